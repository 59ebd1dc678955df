//! Tensor data stored outside the model file (ONNX's external data: a model over protobuf's
//! 2 GiB limit keeps its weights in files beside it). A tensor's `external_data` entries name
//! the file (`location`, relative to the model's folder), and optionally where its bytes start
//! (`offset`) and how many there are (`length`).

use std::io::{Read, Seek, SeekFrom};
use std::path::{Component, Path};

use crate::proto::TensorProto;
use crate::proto::tensor_proto::DataLocation;

/// Whether the tensor's values are stored outside the model file.
pub(crate) fn is_external(t: &TensorProto) -> bool {
    t.data_location() == DataLocation::External
}

/// The bytes of an external tensor, read from its file under `folder` (the model's folder).
/// Errors name the file and what is wrong: no `location`, a location outside the folder, a
/// missing file, or fewer bytes than the tensor's entries say.
pub(crate) fn read(t: &TensorProto, folder: &Path) -> Result<Vec<u8>, String> {
    let entry = |key: &str| t.external_data.iter().find(|e| e.key() == key).map(|e| e.value());
    let location = entry("location").ok_or("external data without a `location`")?;
    let number = |key: &str| -> Result<Option<u64>, String> {
        entry(key)
            .map(|v| {
                v.parse::<u64>().map_err(|_| format!("external data {key} `{v}` is not a number"))
            })
            .transpose()
    };
    let (offset, length) = (number("offset")?.unwrap_or(0), number("length")?);
    // The specification: a path relative to the model's folder. Absolute paths and `..` would
    // let a model file read anything on the machine.
    let relative = Path::new(location);
    if !relative.components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir)) {
        return Err(format!(
            "external data location `{location}` is not inside the model's folder"
        ));
    }
    let path = folder.join(relative);
    let fail = |e: std::io::Error| format!("external data `{}`: {e}", path.display());
    let mut file = std::fs::File::open(&path).map_err(fail)?;
    let size = file.metadata().map_err(fail)?.len();
    let length = length.unwrap_or(size.saturating_sub(offset));
    if offset.checked_add(length).is_none_or(|end| end > size) {
        return Err(format!(
            "external data `{}` has {size} bytes; the tensor's are at {offset}..{offset}+{length}",
            path.display()
        ));
    }
    file.seek(SeekFrom::Start(offset)).map_err(fail)?;
    let mut bytes = vec![0; usize::try_from(length).map_err(|_| "external data too large")?];
    file.read_exact(&mut bytes).map_err(fail)?;
    Ok(bytes)
}
