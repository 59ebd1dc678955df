//! Tensor values: where each IR parameter's value comes from, and reading tensors (the
//! initializers of a model, the `.pb` files of ONNX test data) so that an imported graph can be
//! run.

use std::collections::HashMap;
use std::path::Path;

use prost::Message;

use crate::error::{OnnxError, OnnxResult};
use crate::proto::{ModelProto, TensorProto};
use crate::tensor::{ConstData, ConstTensor, MAX_NUMEL, parse_tensor_limited, parse_tensor_raw};

/// The elements of a [`TensorValue`]: floats as `f32`, integers as `i64`, booleans as `bool`
/// (the element types of the IR's CPU kernels).
#[derive(Clone, Debug, PartialEq)]
pub enum Values {
    /// Float, double, half and bfloat16 elements.
    F32(Vec<f32>),
    /// Integer elements.
    I64(Vec<i64>),
    /// Boolean elements.
    Bool(Vec<bool>),
}

impl Values {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            Values::F32(v) => v.len(),
            Values::I64(v) => v.len(),
            Values::Bool(v) => v.len(),
        }
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A named dense row-major tensor with its values.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorValue {
    /// The ONNX tensor name (empty when the file gives none).
    pub name: String,
    /// Shape.
    pub shape: Vec<usize>,
    /// Elements.
    pub values: Values,
}

/// Where the value of one IR parameter of an imported graph comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum ParamSource {
    /// The ONNX tensor of this name (an initializer, or a graph input taken as a parameter),
    /// in its own layout.
    Tensor(String),
    /// A constant of the file (a `Constant` node or folded arithmetic), with its value.
    Constant(TensorValue),
    /// Chunk `chunk` of `chunks` equal chunks of an ONNX LSTM tensor (`W`, `R` or `B`), whose
    /// four gate blocks are reordered from ONNX's input, output, forget, cell to the IR's
    /// input, forget, cell, output.
    LstmGates {
        /// The ONNX tensor.
        tensor: String,
        /// Which chunk.
        chunk: usize,
        /// Number of chunks.
        chunks: usize,
    },
    /// Slice `index` of dim `axis` of an ONNX tensor, that dim removed (one tap of a 3-D
    /// convolution's kernel depth, a weight of its own).
    Tap {
        /// The ONNX tensor.
        tensor: String,
        /// The dim.
        axis: usize,
        /// The index along it.
        index: usize,
    },
}

impl ParamSource {
    /// The ONNX tensor the value is read from, if any.
    pub fn tensor(&self) -> Option<&str> {
        match self {
            ParamSource::Tensor(t)
            | ParamSource::LstmGates { tensor: t, .. }
            | ParamSource::Tap { tensor: t, .. } => Some(t),
            ParamSource::Constant(_) => None,
        }
    }
}

impl From<&ConstTensor> for Values {
    fn from(c: &ConstTensor) -> Self {
        let n = c.numel() as usize;
        if c.elem == crate::tensor::code::BOOL {
            return Values::Bool(match &c.data {
                ConstData::Int(v) => v.iter().map(|&x| x != 0).collect(),
                ConstData::Float(v) => v.iter().map(|&x| x != 0.0).collect(),
                ConstData::Splat(x) => vec![*x != 0.0; n],
            });
        }
        match (&c.data, c.is_int()) {
            (ConstData::Int(v), _) => Values::I64(v.clone()),
            (ConstData::Float(v), true) => Values::I64(v.iter().map(|&x| x as i64).collect()),
            (ConstData::Float(v), false) => Values::F32(v.iter().map(|&x| x as f32).collect()),
            (ConstData::Splat(x), true) => Values::I64(vec![*x as i64; n]),
            (ConstData::Splat(x), false) => Values::F32(vec![*x as f32; n]),
        }
    }
}

pub(crate) fn value_of(name: &str, c: &ConstTensor) -> TensorValue {
    TensorValue { name: name.to_string(), shape: c.shape.clone(), values: Values::from(c) }
}

fn read_proto(t: &TensorProto) -> OnnxResult<TensorValue> {
    read_proto_in(t, None)
}

/// Reads a tensor; one with external data from its file in `folder` (the model's folder;
/// `None` for a model read from memory, where external data is an error).
fn read_proto_in(t: &TensorProto, folder: Option<&Path>) -> OnnxResult<TensorValue> {
    let malformed =
        |message: String| OnnxError::Malformed { node: format!("tensor `{}`", t.name()), message };
    let c = match (crate::external::is_external(t), folder) {
        (true, Some(folder)) => {
            let bytes = crate::external::read(t, folder).map_err(malformed)?;
            parse_tensor_raw(t, MAX_NUMEL, Some(&bytes))
        }
        _ => parse_tensor_limited(t, MAX_NUMEL),
    }
    .map_err(malformed)?;
    Ok(value_of(t.name(), &c))
}

/// Reads one serialized `TensorProto` (the `input_0.pb` / `output_0.pb` files of ONNX test
/// data).
///
/// # Errors
/// [`OnnxError::Decode`] for bytes that are not a tensor, [`OnnxError::Malformed`] for a
/// tensor whose data does not match its shape or whose element type cannot be read.
pub fn read_tensor(bytes: &[u8]) -> OnnxResult<TensorValue> {
    let t = TensorProto::decode(bytes).map_err(|e| OnnxError::Decode(e.to_string()))?;
    read_proto(&t)
}

/// A tensor of strings read from a file.
#[derive(Clone, Debug, PartialEq)]
pub struct StringTensor {
    /// The tensor's name.
    pub name: String,
    /// Its shape.
    pub shape: Vec<usize>,
    /// Its strings in row-major order, as the bytes ONNX holds (no encoding is promised).
    pub strings: Vec<Vec<u8>>,
}

/// A serialized string `TensorProto` (a test's `input_0.pb`); `None` for a tensor of another
/// type.
///
/// # Errors
/// [`OnnxError::Decode`] for bytes that are not a tensor; [`OnnxError::Malformed`] for a
/// string tensor whose number of strings is not its shape's.
pub fn read_string_tensor(bytes: &[u8]) -> OnnxResult<Option<StringTensor>> {
    let t = TensorProto::decode(bytes).map_err(|e| OnnxError::Decode(e.to_string()))?;
    if t.data_type() != crate::tensor::code::STRING {
        return Ok(None);
    }
    let malformed =
        |message: String| OnnxError::Malformed { node: format!("tensor `{}`", t.name()), message };
    crate::tensor::check_data_length(&t).map_err(malformed)?;
    let (_, shape) = crate::tensor::tensor_fact(&t).map_err(malformed)?;
    Ok(Some(StringTensor { name: t.name().to_string(), shape, strings: t.string_data }))
}

/// The shape of a serialized `TensorProto` (a test's `output_0.pb`), without reading its values
/// (which may be of a type [`read_tensor`] cannot hold, such as float8).
///
/// # Errors
/// [`OnnxError::Decode`] for bytes that are not a tensor; a negative dimension.
pub fn read_tensor_shape(bytes: &[u8]) -> OnnxResult<Vec<usize>> {
    let t = TensorProto::decode(bytes).map_err(|e| OnnxError::Decode(e.to_string()))?;
    crate::tensor::dims_to_shape(&t.dims).map_err(OnnxError::Decode)
}

/// The initializers of a model, with their values, by name.
///
/// # Errors
/// As [`read_tensor`], for the model and each initializer.
pub fn initializers(model: &[u8]) -> OnnxResult<HashMap<String, TensorValue>> {
    initializers_in(model, None)
}

/// The initializers of the model file at `path`, by name, those with external data read from
/// the files beside it (a model over protobuf's 2 GiB limit).
///
/// # Errors
/// [`OnnxError::Io`] when the model cannot be read, otherwise as [`initializers`]; a missing
/// or short external data file, or a location outside the model's folder, is
/// [`OnnxError::Malformed`] naming the tensor and the file.
pub fn initializers_in_file(path: &Path) -> OnnxResult<HashMap<String, TensorValue>> {
    let bytes =
        std::fs::read(path).map_err(|source| OnnxError::Io { path: path.to_path_buf(), source })?;
    let folder = path.parent().unwrap_or(Path::new("."));
    initializers_in(prost::bytes::Bytes::from(bytes), Some(folder))
}

fn initializers_in(
    model: impl prost::bytes::Buf,
    folder: Option<&Path>,
) -> OnnxResult<HashMap<String, TensorValue>> {
    let model = ModelProto::decode(model).map_err(|e| OnnxError::Decode(e.to_string()))?;
    let graph = model.graph.as_ref().ok_or(OnnxError::NoGraph)?;
    graph
        .initializer
        .iter()
        .map(|t| Ok((t.name().to_string(), read_proto_in(t, folder)?)))
        .collect()
}

/// The values of an imported graph's parameters, in the graph's order, from their
/// [`ParamSource`]s and the named ONNX tensors (initializers and parameter inputs).
///
/// # Errors
/// [`OnnxError::UnknownTensor`] when a source tensor is not among `tensors`,
/// [`OnnxError::Shape`] when its size does not fit the parameter.
pub fn param_values(
    sources: &[ParamSource],
    shapes: &[Vec<usize>],
    tensors: &HashMap<String, TensorValue>,
) -> OnnxResult<Vec<TensorValue>> {
    sources
        .iter()
        .zip(shapes)
        .map(|(source, shape)| {
            let value = match source {
                ParamSource::Constant(c) => c.clone(),
                ParamSource::Tensor(name) => lookup(tensors, name)?.clone(),
                ParamSource::LstmGates { tensor, chunk, chunks } => {
                    lstm_chunk(lookup(tensors, tensor)?, *chunk, *chunks)?
                }
                ParamSource::Tap { tensor, axis, index } => {
                    tap(lookup(tensors, tensor)?, *axis, *index)?
                }
            };
            let numel: usize = shape.iter().product();
            if value.values.len() != numel {
                return Err(OnnxError::Shape {
                    node: value.name.clone(),
                    op: "parameter".into(),
                    message: format!(
                        "has {} elements, the graph's parameter is {shape:?}",
                        value.values.len()
                    ),
                });
            }
            Ok(TensorValue { shape: shape.clone(), ..value })
        })
        .collect()
}

fn lookup<'t>(
    tensors: &'t HashMap<String, TensorValue>,
    name: &str,
) -> OnnxResult<&'t TensorValue> {
    tensors.get(name).ok_or_else(|| OnnxError::UnknownTensor {
        node: "parameter values".into(),
        tensor: name.to_string(),
    })
}

/// Slice `index` of dim `axis` of `t`, that dim removed.
fn tap(t: &TensorValue, axis: usize, index: usize) -> OnnxResult<TensorValue> {
    let Some(&len) = t.shape.get(axis).filter(|&&len| index < len) else {
        return Err(OnnxError::Malformed {
            node: format!("tensor `{}`", t.name),
            message: format!("shape {:?} has no slice {index} of dim {axis}", t.shape),
        });
    };
    let inner: usize = t.shape[axis + 1..].iter().product();
    let outer: usize = t.shape[..axis].iter().product();
    if outer * len * inner != t.values.len() {
        return Err(OnnxError::Malformed {
            node: format!("tensor `{}`", t.name),
            message: format!("{} elements for shape {:?}", t.values.len(), t.shape),
        });
    }
    // Of each of the `outer` blocks of `len * inner` elements, block `index` of `inner`.
    fn pick<T: Copy>(v: &[T], outer: usize, len: usize, inner: usize, index: usize) -> Vec<T> {
        (0..outer).flat_map(|o| &v[(o * len + index) * inner..][..inner]).copied().collect()
    }
    let values = match &t.values {
        Values::F32(v) => Values::F32(pick(v, outer, len, inner, index)),
        Values::I64(v) => Values::I64(pick(v, outer, len, inner, index)),
        Values::Bool(v) => Values::Bool(pick(v, outer, len, inner, index)),
    };
    let mut shape = t.shape.clone();
    shape.remove(axis);
    Ok(TensorValue { name: t.name.clone(), shape, values })
}

fn lstm_chunk(t: &TensorValue, chunk: usize, chunks: usize) -> OnnxResult<TensorValue> {
    let Values::F32(all) = &t.values else {
        return Err(OnnxError::Malformed {
            node: format!("tensor `{}`", t.name),
            message: "LSTM weights must be floats".into(),
        });
    };
    let size = all.len() / chunks.max(1);
    if size * chunks != all.len() || !size.is_multiple_of(4) || chunk >= chunks {
        return Err(OnnxError::Malformed {
            node: format!("tensor `{}`", t.name),
            message: format!("{} elements do not split into {chunks} LSTM chunks", all.len()),
        });
    }
    let part = &all[chunk * size..(chunk + 1) * size];
    let gate = size / 4;
    // ONNX gates i, o, f, c; the IR's (PyTorch's) i, f, c, o.
    let values = [0, 2, 3, 1].iter().flat_map(|&g| &part[g * gate..(g + 1) * gate]).copied();
    Ok(TensorValue {
        name: format!("{}[{chunk}/{chunks}]", t.name),
        shape: vec![size],
        values: Values::F32(values.collect()),
    })
}

/// The names a model's graph uses, read without importing it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModelInfo {
    /// Op type of every node, in file order (prefixed by its domain when not the default).
    pub op_types: Vec<String>,
    /// The graph inputs that are not initializers, in order (what test data feeds).
    pub inputs: Vec<String>,
    /// The graph outputs, in order.
    pub outputs: Vec<String>,
    /// The graph inputs that some node reads where an export writes a constant: one that sets
    /// a shape (`Resize`'s roi, scales and sizes, `Upsample`'s scales, `OneHot`'s depth,
    /// `Range`'s start, limit and delta, `MelWeightMatrix`'s sizes, rate and edges) or
    /// stands for an attribute (`OneHot`'s off and on values, `Pad`'s constant value).
    pub shape_inputs: Vec<String>,
    /// The graph inputs that some node reads as its first operand (the data an op works on,
    /// where later operands are often axes, pads or sizes).
    pub first_operands: Vec<String>,
}

/// Reads the op types, inputs and outputs of a model's graph.
///
/// # Errors
/// [`OnnxError::Decode`] for bytes that are not a model, [`OnnxError::NoGraph`].
pub fn model_info(model: &[u8]) -> OnnxResult<ModelInfo> {
    let model = ModelProto::decode(model).map_err(|e| OnnxError::Decode(e.to_string()))?;
    let graph = model.graph.as_ref().ok_or(OnnxError::NoGraph)?;
    let inits: std::collections::HashSet<&str> =
        graph.initializer.iter().map(|t| t.name()).collect();
    Ok(ModelInfo {
        op_types: graph
            .node
            .iter()
            .map(|n| match n.domain() {
                "" | "ai.onnx" => n.op_type().to_string(),
                d => format!("{d}.{}", n.op_type()),
            })
            .collect(),
        inputs: graph
            .input
            .iter()
            .map(|i| i.name().to_string())
            .filter(|n| !inits.contains(n.as_str()))
            .collect(),
        outputs: graph.output.iter().map(|o| o.name().to_string()).collect(),
        shape_inputs: graph
            .node
            .iter()
            .flat_map(|n| {
                let slots: &[usize] = match n.op_type() {
                    "Resize" => &[1, 2, 3],
                    "Upsample" => &[1],
                    "OneHot" => &[1, 2],
                    "Pad" => &[2],
                    "Range" => &[0, 1, 2],
                    "Dropout" => &[1],
                    "NonMaxSuppression" => &[2, 3, 4],
                    "MelWeightMatrix" => &[0, 1, 2, 3, 4],
                    _ => &[],
                };
                slots.iter().filter_map(|&s| n.input.get(s)).filter(|s| !s.is_empty()).cloned()
            })
            .collect(),
        first_operands: graph.node.iter().filter_map(|n| n.input.first()).cloned().collect(),
    })
}
