//! Lenient deserialization: JSON values read in one pass without ever failing on a value of the
//! wrong type. Only malformed JSON fails the parse; a wrong value is kept as a [`Lite`] so that
//! the check that rejects it can say what it found and where.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// Any JSON value, with objects reduced to a marker (attributes never hold objects).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Lite {
    Null,
    Bool(bool),
    UInt(u64),
    Neg(i64),
    Float(f64),
    Str(String),
    Array(Vec<Lite>),
    Object,
}

impl Lite {
    /// The value as a message shows it: `a string "abc"`, `the number 1.5`, `a list`.
    pub(crate) fn describe(&self) -> String {
        match self {
            Lite::Null => "null".into(),
            Lite::Bool(b) => b.to_string(),
            Lite::UInt(v) => format!("the number {v}"),
            Lite::Neg(v) => format!("the number {v}"),
            Lite::Float(v) => format!("the number {v}"),
            Lite::Str(s) if s.chars().count() > 40 => {
                format!("a string {:?}...", s.chars().take(40).collect::<String>())
            }
            Lite::Str(s) => format!("a string {s:?}"),
            Lite::Array(_) => "a list".into(),
            Lite::Object => "an object".into(),
        }
    }
}

/// Describes a kept JSON value the way [`Lite::describe`] does.
pub(crate) fn describe_value(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => Lite::Str(s.clone()).describe(),
        Value::Array(_) => "a list".into(),
        Value::Object(_) => "an object".into(),
    }
}

/// A struct read from a JSON object key by key.
pub(crate) trait FromMap: Sized {
    fn from_map<'de, A: MapAccess<'de>>(map: A) -> Result<Self, A::Error>;
}

/// An object read as `T`, or the value found instead of an object.
#[derive(Debug)]
pub(crate) enum Parsed<T> {
    Object(T),
    Other(Lite),
}

/// A list of objects, each read as `Result<T, E>`: the items, or the first item that failed
/// (later items are only checked for syntax), or the value found instead of a list.
#[derive(Debug)]
pub(crate) enum Collected<T, E> {
    Items(Vec<T>),
    Failed(usize, Failure<E>),
    Other(Lite),
}

/// Why an item of a [`Collected`] list failed.
#[derive(Debug)]
pub(crate) enum Failure<E> {
    Item(E),
    NotObject(Lite),
}

/// A list of non-negative integers, the first entry that is not one (and its position), or the
/// value found instead of a list.
#[derive(Debug)]
pub(crate) enum IntList {
    Ints(Vec<u64>),
    BadEntry(usize, Lite),
    Other(Lite),
}

/// A string, a list of strings, the first list entry that is not a string (and its position),
/// or another value.
#[derive(Debug)]
pub(crate) enum Strings {
    One(String),
    List(Vec<String>),
    BadEntry(usize, Lite),
    Other(Lite),
}

/// An object key, borrowed from the input when it has no escapes.
pub(crate) struct Key<'de>(pub(crate) Cow<'de, str>);

/// Visit methods for the values every visitor here treats alike: scalars become [`Lite`].
macro_rules! scalar_visits {
    () => {
        fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
            Ok(Lite::Bool(v).into())
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
            Ok(if v < 0 { Lite::Neg(v) } else { Lite::UInt(v as u64) }.into())
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
            Ok(Lite::UInt(v).into())
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
            Ok(Lite::Float(v).into())
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Lite::Str(v.to_string()).into())
        }
        fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
            Ok(Lite::Str(v).into())
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(Lite::Null.into())
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(Lite::Null.into())
        }
    };
}

fn collect_lite<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<Lite, A::Error> {
    let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
    while let Some(item) = seq.next_element::<Lite>()? {
        items.push(item);
    }
    Ok(Lite::Array(items))
}

fn drain_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<Lite, A::Error> {
    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(Lite::Object)
}

struct LiteVisitor;

impl<'de> Visitor<'de> for LiteVisitor {
    type Value = Lite;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    scalar_visits!();

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Lite, A::Error> {
        collect_lite(seq)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Lite, A::Error> {
        drain_map(map)
    }
}

impl<'de> Deserialize<'de> for Lite {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(LiteVisitor)
    }
}

impl<T> From<Lite> for Parsed<T> {
    fn from(lite: Lite) -> Self {
        Parsed::Other(lite)
    }
}

struct ParsedVisitor<T>(PhantomData<T>);

impl<'de, T: FromMap> Visitor<'de> for ParsedVisitor<T> {
    type Value = Parsed<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    scalar_visits!();

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        Ok(Parsed::Other(collect_lite(seq)?))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        Ok(Parsed::Object(T::from_map(map)?))
    }
}

impl<'de, T: FromMap> Deserialize<'de> for Parsed<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ParsedVisitor(PhantomData))
    }
}

impl<T, E> From<Lite> for Collected<T, E> {
    fn from(lite: Lite) -> Self {
        Collected::Other(lite)
    }
}

struct CollectedVisitor<T, F>(PhantomData<(T, F)>);

impl<'de, T, F> Visitor<'de> for CollectedVisitor<T, F>
where
    Result<T, F>: FromMap,
{
    type Value = Collected<T, F>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    scalar_visits!();

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        let mut position = 0;
        while let Some(item) = seq.next_element::<Parsed<Result<T, F>>>()? {
            let failure = match item {
                Parsed::Object(Ok(item)) => {
                    items.push(item);
                    position += 1;
                    continue;
                }
                Parsed::Object(Err(e)) => Failure::Item(e),
                Parsed::Other(found) => Failure::NotObject(found),
            };
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            return Ok(Collected::Failed(position, failure));
        }
        Ok(Collected::Items(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        Ok(Collected::Other(drain_map(map)?))
    }
}

impl<'de, T, E> Deserialize<'de> for Collected<T, E>
where
    Result<T, E>: FromMap,
{
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(CollectedVisitor(PhantomData))
    }
}

impl From<Lite> for IntList {
    fn from(lite: Lite) -> Self {
        IntList::Other(lite)
    }
}

struct IntListVisitor;

impl<'de> Visitor<'de> for IntListVisitor {
    type Value = IntList;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    scalar_visits!();

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut ints = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        while let Some(item) = seq.next_element::<Lite>()? {
            match item {
                Lite::UInt(v) => ints.push(v),
                other => {
                    while seq.next_element::<IgnoredAny>()?.is_some() {}
                    return Ok(IntList::BadEntry(ints.len(), other));
                }
            }
        }
        Ok(IntList::Ints(ints))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        Ok(IntList::Other(drain_map(map)?))
    }
}

impl<'de> Deserialize<'de> for IntList {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(IntListVisitor)
    }
}

impl From<Lite> for Strings {
    fn from(lite: Lite) -> Self {
        match lite {
            Lite::Str(s) => Strings::One(s),
            other => Strings::Other(other),
        }
    }
}

struct StringsVisitor;

impl<'de> Visitor<'de> for StringsVisitor {
    type Value = Strings;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    scalar_visits!();

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut strings = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        while let Some(item) = seq.next_element::<Lite>()? {
            match item {
                Lite::Str(s) => strings.push(s),
                other => {
                    while seq.next_element::<IgnoredAny>()?.is_some() {}
                    return Ok(Strings::BadEntry(strings.len(), other));
                }
            }
        }
        Ok(Strings::List(strings))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        Ok(Strings::Other(drain_map(map)?))
    }
}

impl<'de> Deserialize<'de> for Strings {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StringsVisitor)
    }
}

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Key<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Key(Cow::Borrowed(v)))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Key(Cow::Owned(v.to_string())))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Key(Cow::Owned(v)))
    }
}

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(KeyVisitor)
    }
}
