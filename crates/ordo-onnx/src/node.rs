//! One ONNX node as the op mappings see it: its name, inputs, outputs and attributes, and
//! constructors for errors that name it.

use crate::error::OnnxError;
use crate::proto::{AttributeProto, NodeProto, TensorProto};

/// A node being mapped.
pub(crate) struct Node<'a> {
    /// The protobuf node.
    pub proto: &'a NodeProto,
    /// Its name (generated for unnamed nodes).
    pub name: String,
    /// The opset version of its domain.
    pub opset: i64,
}

impl<'a> Node<'a> {
    /// Its op type.
    pub fn op_type(&self) -> &str {
        self.proto.op_type()
    }

    /// Name of input `i`, `None` when absent or empty (an omitted optional input).
    pub fn input(&self, i: usize) -> Option<&'a str> {
        self.proto.input.get(i).map(String::as_str).filter(|s| !s.is_empty())
    }

    /// Name of input `i`, which must be present.
    pub fn required_input(&self, i: usize) -> Result<&'a str, OnnxError> {
        self.input(i).ok_or_else(|| self.malformed(format!("input {i} is missing")))
    }

    /// Number of inputs, omitted ones included.
    pub fn num_inputs(&self) -> usize {
        self.proto.input.len()
    }

    /// Number of outputs.
    pub fn num_outputs(&self) -> usize {
        self.proto.output.len()
    }

    /// Whether output `i` is produced for a reader (listed with a name: an optional output
    /// left out has an empty one).
    pub fn output_named(&self, i: usize) -> bool {
        self.proto.output.get(i).is_some_and(|o| !o.is_empty())
    }

    fn attr(&self, name: &str) -> Option<&'a AttributeProto> {
        self.proto.attribute.iter().find(|a| a.name() == name)
    }

    /// Whether the attribute is present.
    pub fn has_attr(&self, name: &str) -> bool {
        self.attr(name).is_some()
    }

    /// An integer attribute, or `default`.
    pub fn int(&self, name: &str, default: i64) -> Result<i64, OnnxError> {
        match self.attr(name) {
            None => Ok(default),
            Some(a) => {
                a.i.ok_or_else(|| self.malformed(format!("attribute `{name}` is not an int")))
            }
        }
    }

    /// A float attribute, or `default`.
    pub fn float(&self, name: &str, default: f64) -> Result<f64, OnnxError> {
        match self.attr(name) {
            None => Ok(default),
            Some(a) => {
                a.f.map(f64::from)
                    .ok_or_else(|| self.malformed(format!("attribute `{name}` is not a float")))
            }
        }
    }

    /// A list-of-ints attribute, `None` when absent.
    pub fn ints(&self, name: &str) -> Option<&'a [i64]> {
        self.attr(name).map(|a| a.ints.as_slice())
    }

    /// A list-of-floats attribute, `None` when absent.
    pub fn floats(&self, name: &str) -> Option<Vec<f64>> {
        self.attr(name).map(|a| a.floats.iter().map(|&f| f64::from(f)).collect())
    }

    /// A string attribute, or `default`.
    pub fn string(&self, name: &str, default: &str) -> Result<String, OnnxError> {
        match self.attr(name) {
            None => Ok(default.to_string()),
            Some(a) => {
                a.s.as_deref()
                    .map(|s| String::from_utf8_lossy(s).into_owned())
                    .ok_or_else(|| self.malformed(format!("attribute `{name}` is not a string")))
            }
        }
    }

    /// A string attribute that names one of `choices` (its spelling and its value), `default`
    /// when absent; any other spelling is malformed: "mode `mirror`: expected constant,
    /// reflect, edge or wrap".
    pub fn choice<T: Copy>(
        &self,
        name: &str,
        default: &str,
        choices: &[(&str, T)],
    ) -> Result<T, OnnxError> {
        let given = self.string(name, default)?;
        if let Some(&(_, value)) = choices.iter().find(|(spelling, _)| *spelling == given) {
            return Ok(value);
        }
        let names: Vec<&str> = choices.iter().map(|(spelling, _)| *spelling).collect();
        let expected = match names.split_last() {
            Some((last, [])) => last.to_string(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => "nothing".to_string(),
        };
        Err(self.malformed(format!("{name} `{given}`: expected {expected}")))
    }

    /// A list-of-strings attribute, `None` when absent.
    pub fn strings(&self, name: &str) -> Option<Vec<String>> {
        self.attr(name)
            .map(|a| a.strings.iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect())
    }

    /// A tensor attribute, `None` when absent.
    pub fn tensor(&self, name: &str) -> Option<&'a TensorProto> {
        self.attr(name).and_then(|a| a.t.as_ref())
    }

    /// A graph attribute (an `If`'s branch, a `Loop`'s body), `None` when absent.
    pub fn graph(&self, name: &str) -> Option<&'a crate::proto::GraphProto> {
        self.attr(name).and_then(|a| a.g.as_ref())
    }

    /// An error for a configuration of this op that the IR cannot express.
    pub fn unsupported(&self, message: impl Into<String>) -> OnnxError {
        OnnxError::Unsupported {
            node: self.name.clone(),
            op_type: self.op_type().to_string(),
            message: message.into(),
        }
    }

    /// An error for a malformed node.
    pub fn malformed(&self, message: impl Into<String>) -> OnnxError {
        OnnxError::Malformed { node: self.name.clone(), message: message.into() }
    }

    /// An error for shapes that do not fit.
    pub fn shape_error(&self, message: impl Into<String>) -> OnnxError {
        OnnxError::Shape {
            node: self.name.clone(),
            op: self.op_type().to_string(),
            message: message.into(),
        }
    }
}

/// A list of small non-negative integers (kernel sizes, strides, pads) as `usize`.
pub(crate) fn small_uints(
    node: &Node<'_>,
    name: &str,
    values: &[i64],
) -> Result<Vec<usize>, OnnxError> {
    values
        .iter()
        .map(|&v| {
            usize::try_from(v)
                .ok()
                .filter(|&v| v <= 1 << 20)
                .ok_or_else(|| node.malformed(format!("attribute `{name}` has value {v}")))
        })
        .collect()
}
