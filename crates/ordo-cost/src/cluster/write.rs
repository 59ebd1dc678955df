//! The JSON layout of written cluster files: top-level entries and the compact form's device
//! one per line, every entry of `devices` and `links` on a line of its own, and large numbers
//! in engineering notation (`15.7e12`, `900e9`), as the shipped files are written.

use std::io::{self, Write};

use serde::Serialize;
use serde_json::ser::{Formatter, Serializer};

/// `value` as JSON laid out for people.
pub(super) fn to_string<T: Serialize>(value: &T) -> String {
    let mut out = Vec::new();
    let mut serializer = Serializer::with_formatter(&mut out, Layout::default());
    value.serialize(&mut serializer).expect("cluster files have string keys only");
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

/// Objects and lists nested deeper than this are written on one line.
const MULTI_LINE_DEPTH: usize = 2;

#[derive(Default)]
struct Layout {
    depth: usize,
    has_value: bool,
}

impl Layout {
    fn inline(&self) -> bool {
        self.depth > MULTI_LINE_DEPTH
    }

    fn open<W: ?Sized + Write>(&mut self, w: &mut W, bracket: &[u8]) -> io::Result<()> {
        self.depth += 1;
        self.has_value = false;
        w.write_all(bracket)
    }

    fn close<W: ?Sized + Write>(&mut self, w: &mut W, bracket: &[u8]) -> io::Result<()> {
        let inline = self.inline();
        self.depth -= 1;
        if self.has_value && !inline {
            self.newline(w)?;
        }
        w.write_all(bracket)
    }

    fn item<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if self.inline() {
            return w.write_all(if first { b"" } else { b", " });
        }
        w.write_all(if first { b"" } else { b"," })?;
        self.newline(w)
    }

    fn newline<W: ?Sized + Write>(&self, w: &mut W) -> io::Result<()> {
        w.write_all(b"\n")?;
        (0..self.depth).try_for_each(|_| w.write_all(b"  "))
    }
}

impl Formatter for Layout {
    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.open(w, b"[")
    }

    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.close(w, b"]")
    }

    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.item(w, first)
    }

    fn end_array_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.open(w, b"{")
    }

    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.close(w, b"}")
    }

    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.item(w, first)
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }

    fn end_object_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    fn write_f64<W: ?Sized + Write>(&mut self, w: &mut W, value: f64) -> io::Result<()> {
        w.write_all(number_text(value).as_bytes())
    }
}

/// The shortest text that reads back as `x`: plain below a million (`7`, `2.5`), in
/// engineering notation from there on (`15.7e12`, `900e9`).
fn number_text(x: f64) -> String {
    if !x.is_finite() {
        return "null".into();
    }
    if x.abs() < 1e6 {
        return format!("{x}");
    }
    let scientific = format!("{:e}", x.abs());
    let (mantissa, exponent) = scientific.split_once('e').expect("{:e} has an exponent");
    let exponent: i32 = exponent.parse().expect("{:e} has an integer exponent");
    let target = exponent - exponent.rem_euclid(3);
    let whole_len = (exponent - target + 1) as usize;
    let digits = format!("{:0<whole_len$}", mantissa.replace('.', ""));
    let (whole, fraction) = digits.split_at(whole_len);
    let sign = if x < 0.0 { "-" } else { "" };
    let point = if fraction.is_empty() { "" } else { "." };
    format!("{sign}{whole}{point}{fraction}e{target}")
}

#[cfg(test)]
mod tests {
    use super::number_text;

    #[test]
    fn numbers_read_back() {
        for (x, text) in [
            (7.0, "7"),
            (2.56, "2.56"),
            (0.0001754, "0.0001754"),
            (15.7e12, "15.7e12"),
            (900e9, "900e9"),
            (9e9, "9e9"),
            (2.039e12, "2.039e12"),
            (-1.5e6, "-1.5e6"),
            (1e6 / 0.0001754, "5.701254275940706e9"),
        ] {
            assert_eq!(number_text(x), text);
            assert_eq!(serde_json::from_str::<f64>(text).unwrap(), x, "{text}");
        }
    }
}
