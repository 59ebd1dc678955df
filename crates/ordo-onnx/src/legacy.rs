//! Models of the default opsets before 7 (the oldest the op mappings know): such a model is
//! imported as an opset-7 one when every operator it uses means the same at its opset as at
//! opset 7 (no new version of it between the two), and refused with the operators that
//! changed otherwise. Few exporters write these opsets any more; ONNX's own node tests still
//! do (`Not` at opset 1).

use std::collections::BTreeMap;

use crate::control::inline::subgraphs;
use crate::error::{OnnxError, OnnxResult};
use crate::proto::GraphProto;

/// The oldest default opset the op mappings know.
const OLDEST_KNOWN: i64 = 7;

/// Each default-domain operator's versions from 2 to 7 (ONNX's operator schemas, onnx 1.22):
/// an operator at opset `v < 7` means what it means at opset 7 when none of its versions lies
/// in `v + 1 ..= 7`. An operator absent from this table has only a version 1 below 8 (or none
/// at all below 8, and then no model of an older opset uses it validly: the later
/// validation names it).
const VERSIONS_2_TO_7: &[(&str, &[i64])] = &[
    ("Abs", &[6]),
    ("Acos", &[7]),
    ("Add", &[6, 7]),
    ("And", &[7]),
    ("Asin", &[7]),
    ("Atan", &[7]),
    ("AveragePool", &[7]),
    ("BatchNormalization", &[6, 7]),
    ("Cast", &[6]),
    ("Ceil", &[6]),
    ("Clip", &[6]),
    ("Concat", &[4]),
    ("Cos", &[7]),
    ("Div", &[6, 7]),
    ("Dropout", &[6, 7]),
    ("Elu", &[6]),
    ("Equal", &[7]),
    ("Exp", &[6]),
    ("Floor", &[6]),
    ("GRU", &[3, 7]),
    ("Gemm", &[6, 7]),
    ("GlobalLpPool", &[2]),
    ("Greater", &[7]),
    ("HardSigmoid", &[6]),
    ("InstanceNormalization", &[6]),
    ("LSTM", &[7]),
    ("LeakyRelu", &[6]),
    ("Less", &[7]),
    ("Log", &[6]),
    ("LpPool", &[2]),
    ("Max", &[6]),
    ("Mean", &[6]),
    ("Min", &[6]),
    ("Mul", &[6, 7]),
    ("Multinomial", &[7]),
    ("Neg", &[6]),
    ("Or", &[7]),
    ("PRelu", &[6, 7]),
    ("Pad", &[2]),
    ("Pow", &[7]),
    ("RNN", &[7]),
    ("Reciprocal", &[6]),
    ("Relu", &[6]),
    ("Reshape", &[5]),
    ("Selu", &[6]),
    ("Sigmoid", &[6]),
    ("Sin", &[7]),
    ("Split", &[2]),
    ("Sqrt", &[6]),
    ("Sub", &[6, 7]),
    ("Sum", &[6]),
    ("Tan", &[7]),
    ("Tanh", &[6]),
    ("Tile", &[6]),
    ("Upsample", &[7]),
    ("Xor", &[7]),
];

/// The opset to import a model of default opset `version` (below 7) at: 7, when every
/// default-domain operator of `graph` (and of its subgraphs) is unchanged from `version` to 7;
/// otherwise an error naming each operator that changed and its versions since.
pub(crate) fn as_oldest_known(graph: &GraphProto, version: i64) -> OnnxResult<i64> {
    let mut changed: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
    let mut pending = vec![graph];
    while let Some(g) = pending.pop() {
        for node in &g.node {
            pending.extend(subgraphs(node));
            if !matches!(node.domain(), "" | "ai.onnx") {
                continue;
            }
            let op = node.op_type();
            let Some((name, versions)) = VERSIONS_2_TO_7.iter().find(|(o, _)| *o == op) else {
                continue;
            };
            let since: Vec<i64> = versions.iter().copied().filter(|&v| v > version).collect();
            if !since.is_empty() {
                changed.insert(name, since);
            }
        }
    }
    if changed.is_empty() {
        return Ok(OLDEST_KNOWN);
    }
    let named: Vec<String> = changed
        .iter()
        .map(|(op, since)| {
            let since: Vec<String> = since.iter().map(i64::to_string).collect();
            format!("`{op}` (new versions at opset {})", since.join(", "))
        })
        .collect();
    Err(OnnxError::Opset(format!(
        "default-domain opset {version}: ordo imports opsets {OLDEST_KNOWN} and later, and an \
         older model whose every operator is unchanged up to opset {OLDEST_KNOWN}; these \
         changed: {}",
        named.join(", ")
    )))
}
