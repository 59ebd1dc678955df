//! Turns a serialized `FileDescriptorSet` of `onnx.proto` into prost Rust code.
//!
//! Usage: `ordo-onnx-gen <descriptor set> <output dir>`. Writes `<output dir>/onnx.rs`.

use prost::Message;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(fds_path), Some(out_dir)) = (args.next(), args.next()) else {
        return Err("usage: ordo-onnx-gen <descriptor set> <output dir>".into());
    };
    let bytes = std::fs::read(&fds_path)?;
    let fds = prost_types::FileDescriptorSet::decode(bytes.as_slice())?;
    prost_build::Config::new()
        .out_dir(&out_dir)
        // Plain `Vec<u8>` for bytes fields and no `HashMap`s: nothing beyond prost at run time,
        // except a tensor's raw data: `Bytes` (prost's own dependency), so that a model
        // decoded from a `Bytes` buffer shares its weights' bytes instead of copying them
        // (a gigabyte of weights decoded twice as fast, with half the memory).
        .bytes([".onnx.TensorProto.raw_data"])
        .disable_comments(["."])
        .compile_fds(fds)?;
    Ok(())
}
