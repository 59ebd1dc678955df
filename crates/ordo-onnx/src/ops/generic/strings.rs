//! ONNX's string operators (text pipelines) and `ImageDecoder`, for planning: their outputs'
//! shapes and types.
//! String tensors are planned as one 8-byte handle per element ([`DType::String`]); no kernel
//! runs them, so `run` names them.
//!
//! Sizes that depend on the data ([`bounded`]) are planned at the size the file declares, or
//! else at their largest: `StringNormalizer` with stop words (none removed), `StringSplit`
//! (every element split `maxsplit` times). Where nothing bounds them (`StringSplit` without
//! `maxsplit`, `ImageDecoder`: an image's height and width are in its encoded bytes), a file
//! that declares no size is refused.

use ordo_ir::{DType, TensorFact};

use super::In;
use super::rules::broadcast_all;
use crate::error::OnnxResult;
use crate::node::Node;

/// The operators of this module.
pub(super) const OPS: [&str; 6] = [
    "StringNormalizer",
    "StringConcat",
    "StringSplit",
    "RegexFullMatch",
    "TfIdfVectorizer",
    "ImageDecoder",
];

/// Whether `node`'s output size depends on the text (planned at its largest).
pub(super) fn bounded(node: &Node<'_>) -> bool {
    match node.op_type() {
        "StringNormalizer" => node.strings("stopwords").is_some_and(|s| !s.is_empty()),
        "StringSplit" | "ImageDecoder" => true,
        _ => false,
    }
}

/// The facts of a string operator's outputs.
pub(super) fn infer(node: &Node<'_>, ins: &[Option<In>]) -> OnnxResult<Vec<TensorFact>> {
    let x = |i: usize| super::fact_at(node, ins, i);
    let strings = |i: usize| -> OnnxResult<&TensorFact> {
        let fact = x(i)?;
        if fact.dtype != DType::String {
            return Err(node.malformed(format!("input {i} is {}, not strings", fact.dtype)));
        }
        Ok(fact)
    };
    let one = |dtype: DType, shape: Vec<usize>| Ok(vec![TensorFact::new(dtype, shape)]);
    match node.op_type() {
        "StringNormalizer" => {
            let input = strings(0)?;
            let single_row = input.rank() == 2 && input.shape[0] == 1;
            if input.rank() != 1 && !single_row {
                return Err(node.malformed(format!(
                    "input of shape {:?}: expected [C] or [1, C]",
                    input.shape
                )));
            }
            node.choice(
                "case_change_action",
                "NONE",
                &[("NONE", ()), ("LOWER", ()), ("UPPER", ())],
            )?;
            // With stop words, at most every element stays; with all removed, one empty
            // string does.
            let mut shape = input.shape.clone();
            let last = shape.len() - 1;
            shape[last] = shape[last].max(1);
            one(DType::String, shape)
        }
        "StringConcat" => {
            strings(0)?;
            strings(1)?;
            one(DType::String, broadcast_all(node, ins)?)
        }
        "RegexFullMatch" => {
            let input = strings(0)?;
            if node.string("pattern", "")?.is_empty() {
                return Err(node.malformed("no `pattern` to match"));
            }
            one(DType::Bool, input.shape.clone())
        }
        "StringSplit" => {
            let input = strings(0)?;
            // Without `maxsplit` nothing bounds the number of substrings: `UNBOUNDED`, which
            // the size the file declares must replace.
            let most = match node.has_attr("maxsplit") {
                false => super::UNBOUNDED,
                true => {
                    let maxsplit = node.int("maxsplit", 0)?;
                    usize::try_from(maxsplit)
                        .ok()
                        .and_then(|m| m.checked_add(1))
                        .ok_or_else(|| node.malformed(format!("maxsplit = {maxsplit}")))?
                }
            };
            let mut substrings = input.shape.clone();
            substrings.push(most);
            Ok(vec![
                TensorFact::new(DType::String, substrings),
                TensorFact::new(DType::I64, input.shape.clone()),
            ])
        }
        "TfIdfVectorizer" => tf_idf(node, x(0)?),
        "ImageDecoder" => {
            let encoded = x(0)?;
            if encoded.dtype != DType::U8 || encoded.rank() != 1 {
                return Err(node.malformed(format!(
                    "input {encoded}: expected the encoded bytes, u8 of rank 1"
                )));
            }
            let channels =
                node.choice("pixel_format", "RGB", &[("RGB", 3), ("BGR", 3), ("Grayscale", 1)])?;
            // The height and width are in the encoded bytes: the size the file declares.
            one(DType::U8, vec![super::UNBOUNDED, super::UNBOUNDED, channels])
        }
        other => Err(node.unsupported(format!("`{other}` is not a string operator"))),
    }
}

/// `TfIdfVectorizer`: n-gram counts of `[C]` or `[N, C]` tokens (strings or integers) into
/// `[max index + 1]` or `[N, max index + 1]` floats.
fn tf_idf(node: &Node<'_>, input: &TensorFact) -> OnnxResult<Vec<TensorFact>> {
    let tokens = matches!(input.dtype, DType::String | DType::I32 | DType::I64);
    if !tokens || !matches!(input.rank(), 1 | 2) {
        return Err(node.malformed(format!(
            "input of type {} and shape {:?}: expected strings or 32/64-bit integers of shape \
             [C] or [N, C]",
            input.dtype, input.shape
        )));
    }
    node.choice("mode", "", &[("TF", ()), ("IDF", ()), ("TFIDF", ())])?;
    let (min, max) = (node.int("min_gram_length", 0)?, node.int("max_gram_length", 0)?);
    if min < 1 || max < min {
        return Err(node.malformed(format!(
            "gram lengths from {min} to {max}: expected 1 <= min_gram_length <= max_gram_length"
        )));
    }
    let pool: usize = match (node.strings("pool_strings"), node.ints("pool_int64s")) {
        (Some(s), None) if input.dtype == DType::String => s.len(),
        (None, Some(i)) if input.dtype != DType::String => i.len(),
        _ => {
            return Err(node.malformed(format!(
                "input of type {}: expected exactly one pool of the same kind (pool_strings for \
                 strings, pool_int64s for integers)",
                input.dtype
            )));
        }
    };
    // The pool holds the n-grams of each length n from min to max one after another, each
    // length's from its offset in `ngram_counts` on, n tokens per n-gram.
    let counts = node.ints("ngram_counts").unwrap_or_default();
    let mut ngrams = 0;
    for (k, &start) in counts.iter().enumerate() {
        let end = counts.get(k + 1).copied().unwrap_or(pool as i64);
        let n = k + 1;
        let tokens = usize::try_from(end - start).ok().filter(|_| start >= 0 && end <= pool as i64);
        match tokens {
            Some(t) if t % n == 0 => ngrams += t / n,
            _ => {
                return Err(node.malformed(format!(
                    "ngram_counts {counts:?}: the {n}-grams from {start} to {end} of a pool of \
                     {pool} tokens"
                )));
            }
        }
    }
    let indexes = node.ints("ngram_indexes").unwrap_or_default();
    if indexes.len() != ngrams {
        return Err(node
            .malformed(format!("{} ngram_indexes for a pool of {ngrams} n-grams", indexes.len())));
    }
    let width = match indexes.iter().max() {
        Some(&m) if m >= 0 && indexes.iter().all(|&i| i >= 0) => m as usize + 1,
        _ => return Err(node.malformed(format!("ngram_indexes {indexes:?}"))),
    };
    let shape = match input.rank() {
        1 => vec![width],
        _ => vec![input.shape[0], width],
    };
    Ok(vec![TensorFact::new(DType::F32, shape)])
}
