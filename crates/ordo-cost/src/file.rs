//! Writing output files so that a failure (a full disk, a killed process) never leaves a
//! truncated one: the text goes to a temporary file next to the destination, which is renamed
//! over it once complete.

use std::io::{BufWriter, Write};
use std::path::Path;

/// A file that could not be read or written: the error every reader and writer of this crate
/// (cluster descriptions, cost graphs) gives for the file itself.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The file could not be read.
    #[error("{origin}: cannot read the file")]
    Read {
        /// The file.
        origin: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file could not be written.
    #[error("{origin}: cannot write the file")]
    Write {
        /// The file.
        origin: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

impl FileError {
    /// The file the error is about.
    pub fn origin(&self) -> &str {
        match self {
            Self::Read { origin, .. } | Self::Write { origin, .. } => origin,
        }
    }
}

/// Writes a file through `write`, atomically: readers see the old file or the whole new one.
/// A destination that exists and is not a regular file (`/dev/null`, a pipe) is written
/// directly, since renaming over it would replace the device.
///
/// # Errors
/// The I/O error of creating, writing, syncing or renaming the file.
pub fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let special = std::fs::metadata(path).is_ok_and(|m| !m.is_file());
    if special {
        let mut out = BufWriter::new(std::fs::File::create(path)?);
        write(&mut out)?;
        return out.flush();
    }
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let temporary = tempfile::NamedTempFile::new_in(dir)?;
    let mut out = BufWriter::new(temporary);
    write(&mut out)?;
    let temporary = out.into_inner().map_err(std::io::IntoInnerError::into_error)?;
    temporary.as_file().sync_all()?;
    temporary.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::write_atomically;

    #[test]
    fn a_failed_write_leaves_the_old_file_and_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.json");
        std::fs::write(&path, "old").unwrap();
        let failed = write_atomically(&path, |w: &mut dyn std::io::Write| {
            w.write_all(b"half")?;
            Err(std::io::Error::other("disk full"))
        });
        assert!(failed.is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "a temporary file remains");
        write_atomically(&path, |w| w.write_all(b"new")).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
    }
}
