//! Symbolic dimensions (an export with `dynamic_axes`: `batch_size`, `sequence`): bound to
//! sizes before the import, so that the rest of the importer sees a model of static shapes.
//!
//! A graph input's symbolic dimension is bound by [`ImportOptions::dims`] when that names it;
//! else dimension 0 by [`ImportOptions::batch`] and, of a token input (integers of rank 2 or
//! more), dimension 1 by [`ImportOptions::seq_len`]. A batch or sequence length used this way
//! is the model's own size, not a resize. Every binding replaces the name everywhere the file
//! declares it (inputs, outputs, intermediate value infos). An input dimension left unbound,
//! or a binding of a name the file does not have, is an error that lists every symbolic
//! dimension of the inputs and the option that binds it.

use std::collections::{BTreeMap, BTreeSet};

use prost::Message;

use crate::ImportOptions;
use crate::error::{OnnxError, OnnxResult};
use crate::proto::{
    ModelProto, TypeProto, ValueInfoProto, tensor_shape_proto::dimension, type_proto,
};

/// A symbolic dimension of a graph input.
struct Symbol {
    name: String,
    input: String,
    axis: usize,
    /// The option that binds it: `--batch`, `--seq-len` or `--dim NAME=SIZE`.
    option: String,
}

/// `bytes` with the symbolic dimensions bound as `options` say, and the options left to apply
/// (a batch or sequence length used as a binding is not a resize any more); `None` when the
/// file has no symbolic dimension to bind and `options.dims` is empty.
///
/// # Errors
/// [`OnnxError::Decode`] for bytes that are not a model; [`OnnxError::SymbolicDims`] for an
/// input dimension left unbound or a binding of a name the file does not declare.
pub(crate) fn bind(
    bytes: &prost::bytes::Bytes,
    options: &ImportOptions,
) -> OnnxResult<Option<(Vec<u8>, ImportOptions)>> {
    let mut model =
        ModelProto::decode(bytes.clone()).map_err(|e| OnnxError::Decode(e.to_string()))?;
    let Some(graph) = model.graph.as_mut() else { return Ok(None) };
    let initializers: BTreeSet<&str> = graph.initializer.iter().map(|t| t.name()).collect();
    let symbols: Vec<Symbol> = graph
        .input
        .iter()
        .filter(|i| !initializers.contains(i.name()))
        .flat_map(input_symbols)
        .collect();
    if symbols.is_empty() && options.dims.is_empty() {
        return Ok(None);
    }
    let mut sizes: BTreeMap<String, usize> = options.dims.clone();
    let (mut used_batch, mut used_seq) = (false, false);
    let mut unbound = Vec::new();
    for s in &symbols {
        if sizes.contains_key(&s.name) {
            continue;
        }
        match (s.option.as_str(), options.batch, options.seq_len) {
            ("--batch", Some(batch), _) => {
                sizes.insert(s.name.clone(), batch);
                used_batch = true;
            }
            ("--seq-len", _, Some(seq)) => {
                sizes.insert(s.name.clone(), seq);
                used_seq = true;
            }
            _ => unbound.push(s),
        }
    }
    let declared: BTreeSet<&str> = symbols.iter().map(|s| s.name.as_str()).collect();
    let unknown: Vec<&String> =
        options.dims.keys().filter(|k| !declared.contains(k.as_str())).collect();
    if !unbound.is_empty() || !unknown.is_empty() {
        let listing: Vec<String> = symbols
            .iter()
            .map(|s| format!("`{}` (input `{}`, axis {}: {})", s.name, s.input, s.axis, s.option))
            .collect();
        let listing = if listing.is_empty() { "none".to_string() } else { listing.join(", ") };
        let problem = match unbound.first() {
            Some(s) => format!("symbolic dimension `{}` has no size", s.name),
            None => {
                let name = unknown.first().map_or("", |n| n.as_str());
                format!("--dim {name}: the model has no symbolic dimension `{name}`")
            }
        };
        return Err(OnnxError::SymbolicDims {
            message: format!("{problem}; its symbolic dimensions: {listing}"),
        });
    }
    for value in
        graph.input.iter_mut().chain(graph.output.iter_mut()).chain(graph.value_info.iter_mut())
    {
        bind_value(value, &sizes);
    }
    let rest = ImportOptions {
        batch: options.batch.filter(|_| !used_batch),
        seq_len: options.seq_len.filter(|_| !used_seq),
        dims: BTreeMap::new(),
        ..options.clone()
    };
    Ok(Some((model.encode_to_vec(), rest)))
}

/// The symbolic dimensions of one graph input, with the option that binds each.
fn input_symbols(input: &ValueInfoProto) -> Vec<Symbol> {
    let Some(type_proto::Value::TensorType(t)) =
        input.r#type.as_ref().and_then(|t| t.value.as_ref())
    else {
        return Vec::new();
    };
    let Some(shape) = t.shape.as_ref() else { return Vec::new() };
    let is_float = matches!(
        crate::tensor::ir_dtype(t.elem_type()),
        Some(dtype) if dtype.is_float()
    );
    let rank = shape.dim.len();
    shape
        .dim
        .iter()
        .enumerate()
        .filter_map(|(axis, d)| match &d.value {
            Some(dimension::Value::DimParam(name)) => {
                let option = match axis {
                    0 => "--batch".to_string(),
                    1 if !is_float && rank >= 2 => "--seq-len".to_string(),
                    _ => format!("--dim {name}=SIZE"),
                };
                Some(Symbol { name: name.clone(), input: input.name().to_string(), axis, option })
            }
            _ => None,
        })
        .collect()
}

/// Replaces the bound symbolic dimensions of one value info by their sizes.
fn bind_value(value: &mut ValueInfoProto, sizes: &BTreeMap<String, usize>) {
    let Some(TypeProto { value: Some(type_proto::Value::TensorType(t)), .. }) =
        value.r#type.as_mut()
    else {
        return;
    };
    let Some(shape) = t.shape.as_mut() else { return };
    for d in &mut shape.dim {
        if let Some(dimension::Value::DimParam(name)) = &d.value
            && let Some(&size) = sizes.get(name)
            && let Ok(size) = i64::try_from(size)
        {
            d.value = Some(dimension::Value::DimValue(size));
        }
    }
}
