//! Plan files: the [`Plan`] as JSON.

use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use crate::error::SchedError;
use crate::plan::Plan;
use crate::validate::validate;

/// Reads a plan written by [`write_plan`] (or by hand) and checks it with [`validate`].
///
/// # Errors
/// [`SchedError::Read`], [`SchedError::Parse`] or [`SchedError::Invalid`], each naming the file.
pub fn read_plan(path: impl AsRef<Path>) -> Result<Plan, SchedError> {
    let path = path.as_ref();
    let file =
        File::open(path).map_err(|source| SchedError::Read { path: path.to_path_buf(), source })?;
    // The path of the field at fault (`tasks[0].duration_us`) goes with the message.
    let mut reader = serde_json::Deserializer::from_reader(BufReader::new(file));
    let plan: Plan = serde_path_to_error::deserialize(&mut reader).map_err(|e| {
        let at = e.path().to_string();
        let source = e.into_inner();
        if source.is_io() {
            SchedError::Read { path: path.to_path_buf(), source: source.into() }
        } else {
            SchedError::Parse { path: path.to_path_buf(), at, source }
        }
    })?;
    validate(&plan).map_err(|source| SchedError::Invalid {
        path: path.to_path_buf(),
        source: Box::new(source),
    })?;
    Ok(plan)
}

/// Writes `plan` to `path` as pretty-printed JSON (any previous file is replaced).
///
/// # Errors
/// [`SchedError::Write`] naming the file.
pub fn write_plan(plan: &Plan, path: impl AsRef<Path>) -> Result<(), SchedError> {
    let path = path.as_ref();
    let fail = |source: std::io::Error| SchedError::Write { path: path.to_path_buf(), source };
    ordo_cost::write_atomically(path, |out| {
        serde_json::to_writer_pretty(&mut *out, plan)?;
        out.write_all(b"\n")
    })
    .map_err(fail)
}
