//! Random bytes, truncations and corruptions of valid models never panic the importer.

use std::path::PathBuf;

use proptest::prelude::*;

fn fixture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(format!("{name}.onnx"));
    std::fs::read(path).unwrap()
}

fn fixtures() -> Vec<Vec<u8>> {
    ["convnet", "weights_as_inputs", "transformer_block", "lstm"].map(fixture).to_vec()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(std::env::var("ORDO_ONNX_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(256)))]

    #[test]
    fn random_bytes_do_not_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = ordo_onnx::import_bytes(&bytes);
    }

    #[test]
    fn truncations_do_not_panic(which in 0usize..4, frac in 0.0f64..1.0) {
        let bytes = &fixtures()[which];
        let cut = (bytes.len() as f64 * frac) as usize;
        let _ = ordo_onnx::import_bytes(&bytes[..cut]);
    }

    #[test]
    fn corruptions_do_not_panic(
        which in 0usize..4,
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        let mut bytes = fixtures()[which].clone();
        for (at, value) in edits {
            let i = at.index(bytes.len());
            bytes[i] = value;
        }
        let _ = ordo_onnx::import_bytes(&bytes);
    }
}
