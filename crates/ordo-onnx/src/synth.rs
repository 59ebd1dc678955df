//! ONNX nodes the importer writes itself, mapped like the file's own: the nodes that join the
//! copies of control flow's subgraphs (a scan's `Gather` of one slice, the `Unsqueeze` and
//! `Concat` that stack its outputs, an `If`'s `Where`), and `Upsample`'s `Resize`.

use crate::proto::attribute_proto::AttributeType;
use crate::proto::{AttributeProto, NodeProto};

/// A node `op_type` named `name`, reading `inputs`, writing `output`, with `attributes`.
pub(crate) fn node(
    op_type: &str,
    name: &str,
    inputs: &[&str],
    output: &str,
    attributes: Vec<AttributeProto>,
) -> NodeProto {
    NodeProto {
        op_type: Some(op_type.to_string()),
        name: Some(name.to_string()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec![output.to_string()],
        attribute: attributes,
        ..NodeProto::default()
    }
}

/// An integer attribute.
pub(crate) fn int(name: &str, value: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.to_string()),
        r#type: Some(AttributeType::Int as i32),
        i: Some(value),
        ..AttributeProto::default()
    }
}

/// A list-of-integers attribute.
pub(crate) fn ints(name: &str, values: Vec<i64>) -> AttributeProto {
    AttributeProto {
        name: Some(name.to_string()),
        r#type: Some(AttributeType::Ints as i32),
        ints: values,
        ..AttributeProto::default()
    }
}

/// A string attribute.
pub(crate) fn string(name: &str, value: &str) -> AttributeProto {
    AttributeProto {
        name: Some(name.to_string()),
        r#type: Some(AttributeType::String as i32),
        s: Some(value.as_bytes().to_vec()),
        ..AttributeProto::default()
    }
}
