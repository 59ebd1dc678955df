//! Any bytes given to the ONNX importer give a graph or an error, never a panic or a hang; so do
//! the readers of tensors (test data `.pb` files), initializers and model summaries.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(import) = ordo_onnx::import(data, &ordo_onnx::ImportOptions::default()) {
        assert_eq!(import.sources.len(), import.graph.params.len());
        if let Ok(tensors) = ordo_onnx::initializers(data) {
            let shapes: Vec<Vec<usize>> =
                import.graph.params.iter().map(|p| p.fact.shape.clone()).collect();
            let _ = ordo_onnx::param_values(&import.sources, &shapes, &tensors);
        }
    }
    let _ = ordo_onnx::model_info(data);
    let _ = ordo_onnx::read_tensor(data);
    let _ = ordo_onnx::read_string_tensor(data);
});
