//! Reference exports of resnet50, inception_v3, an encoder-decoder transformer and a
//! GNMT-style seq2seq (from PyTorch, in training mode, weights as graph inputs), when
//! `ORDO_ONNX_MODELS` names a directory holding them: each must import with the parameter
//! count and output shape its exporter declares. Skipped with a message otherwise, as in a
//! fresh clone.

use std::path::PathBuf;
use std::time::Instant;

use ordo_ir::TensorFact;
use ordo_onnx::{ImportOptions, import_file_with};

fn models_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(std::env::var_os("ORDO_ONNX_MODELS")?);
    dir.is_dir().then_some(dir)
}

/// Imports `name.onnx` and checks parameters, output and data inputs.
fn check(name: &str, params: u64, output: TensorFact, data_inputs: &[&str]) {
    let Some(dir) = models_dir() else {
        println!("skipped: ORDO_ONNX_MODELS does not name a directory of reference exports");
        return;
    };
    let path = dir.join(format!("{name}.onnx"));
    if !path.is_file() {
        println!("skipped: {} is absent", path.display());
        return;
    }
    let start = Instant::now();
    let import = import_file_with(&path, &ImportOptions::default())
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let elapsed = start.elapsed();
    let r = &import.report;
    println!(
        "{name}: {} ONNX nodes -> {} IR nodes ({} folded, {} fused), {} params, {} buffer elements, {:?}",
        r.onnx_nodes, r.ir_nodes, r.folded, r.fused, r.params, r.buffers, elapsed
    );
    let g = &import.graph;
    assert_eq!(r.params, params, "{name}: parameters");
    assert_eq!(g.outputs.len(), 1, "{name}: outputs");
    assert_eq!(g.fact(g.outputs[0]), Some(&output), "{name}: output fact");
    assert_eq!(r.data_inputs, data_inputs, "{name}: data inputs");
    ordo_ir::validate(g).unwrap();
}

#[test]
fn resnet50() {
    check("resnet50", 25_557_032, TensorFact::f32([32, 1000]), &["input.1"]);
}

#[test]
fn inception_v3() {
    check("inception_v3", 23_834_568, TensorFact::f32([32, 1000]), &["input.1"]);
}

#[test]
fn transformer() {
    check("transformer", 93_322_496, TensorFact::f32([64, 128, 32000]), &["input.1", "input.63"]);
}

#[test]
fn gnmt() {
    check("gnmt", 162_511_152, TensorFact::f32([128, 40, 30000]), &["input.1", "input.11"]);
}
