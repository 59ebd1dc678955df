//! Any bytes given to the ONNX importer give a graph or an error, never a panic or a hang.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = ordo_onnx::import_bytes(data);
});
