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
    [
        "convnet",
        "weights_as_inputs",
        "transformer_block",
        "lstm",
        "planning_only",
        "control_flow",
        "conv3d",
        "strings",
    ]
    .map(fixture)
    .to_vec()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(std::env::var("ORDO_ONNX_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(256)))]

    #[test]
    fn random_bytes_do_not_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = ordo_onnx::import_bytes(&bytes);
    }

    #[test]
    fn truncations_do_not_panic(which in 0usize..7, frac in 0.0f64..1.0) {
        let bytes = &fixtures()[which];
        let cut = (bytes.len() as f64 * frac) as usize;
        let _ = ordo_onnx::import_bytes(&bytes[..cut]);
    }

    #[test]
    fn corruptions_do_not_panic(
        which in 0usize..7,
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        let mut bytes = fixtures()[which].clone();
        for (at, value) in edits {
            let i = at.index(bytes.len());
            bytes[i] = value;
        }
        let _ = ordo_onnx::import_bytes(&bytes);
    }

    #[test]
    fn resized_imports_of_corruptions_do_not_panic(
        which in 0usize..9,
        batch in 0usize..70,
        seq_len in proptest::option::of(0usize..20),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
    ) {
        let all = [fixtures(), vec![fixture("tokens"), fixture("baked_batch")]].concat();
        let mut bytes = all[which].clone();
        for (at, value) in edits {
            let i = at.index(bytes.len());
            bytes[i] = value;
        }
        let options = ordo_onnx::ImportOptions {
            batch: Some(batch),
            seq_len,
            ..ordo_onnx::ImportOptions::default()
        };
        let _ = ordo_onnx::import(&bytes, &options);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(std::env::var("ORDO_ONNX_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(256)))]

    #[test]
    fn random_bytes_do_not_panic_the_other_readers(
        bytes in proptest::collection::vec(any::<u8>(), 0..512),
    ) {
        let _ = ordo_onnx::read_tensor(&bytes);
        let _ = ordo_onnx::model_info(&bytes);
        let _ = ordo_onnx::initializers(&bytes);
    }
}

/// Found by the fuzz target: a tensor shaped `[2^40, 2^40, 0]` passed the size check (its
/// product is 0) but overflowed when its elements were counted in order.
#[test]
fn a_zero_dim_after_huge_dims_is_an_error_not_an_overflow() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/regressions/zero_dim_overflow.bin");
    let bytes = std::fs::read(path).unwrap();
    let _ = ordo_onnx::import_bytes(&bytes);
    let _ = ordo_onnx::read_tensor(&bytes);
    let _ = ordo_onnx::initializers(&bytes);
    // The same tensor written out: dims 2^40, 2^40, 0 (field 1), float (field 2).
    let huge = [0x80, 0x80, 0x80, 0x80, 0x80, 0x20];
    let mut tensor = Vec::new();
    for dim in [&huge[..], &huge[..], &[0x00][..]] {
        tensor.push(0x08);
        tensor.extend_from_slice(dim);
    }
    tensor.extend_from_slice(&[0x10, 0x01]);
    let err = ordo_onnx::read_tensor(&tensor).unwrap_err().to_string();
    assert!(err.contains("too many elements"), "{err}");
}
