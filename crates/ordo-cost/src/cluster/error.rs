//! Errors of reading, checking and writing cluster descriptions. Every message starts with the
//! file (or whatever the caller called the text) and names the device or link at fault.

use super::FORMAT;

/// What went wrong with a cluster description.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The file could not be read or written.
    #[error(transparent)]
    File(#[from] crate::file::FileError),
    /// The text is not JSON, or a value has the wrong type or an unknown key.
    #[error("{origin}: not a valid cluster description: {message}")]
    Json {
        /// The file.
        origin: String,
        /// The parser's message, which includes the position.
        message: String,
        /// 1-based line of the problem (0 when unknown).
        line: usize,
        /// 1-based column of the problem (0 when unknown).
        column: usize,
    },
    /// `format` is missing or names a version this build does not read.
    #[error("{origin}: {}", format_problem(.found))]
    Format {
        /// The file.
        origin: String,
        /// The `format` value as written in the file, `None` when there is none.
        found: Option<String>,
    },
    /// A problem with the cluster as a whole: no devices, both or neither of `device` and
    /// `devices`, a pair of devices with no link.
    #[error("{origin}: {problem}")]
    Cluster {
        /// The file.
        origin: String,
        /// What is wrong.
        problem: String,
    },
    /// A problem with one device.
    #[error("{origin}: {device}: {problem}")]
    Device {
        /// The file.
        origin: String,
        /// The device: `devices[2] ("gpu2")`, or `"device"` for the compact form's one spec.
        device: String,
        /// What is wrong, e.g. `"peak_flops" is 0; it must be a positive number of FLOP/s`.
        problem: String,
    },
    /// A problem with one link.
    #[error("{origin}: {link}: {problem}")]
    Link {
        /// The file.
        origin: String,
        /// The link: `links[0] (gpu0 -> gpu9)`, or `"interconnect"` for the default link.
        link: String,
        /// What is wrong.
        problem: String,
    },
}

impl ClusterError {
    /// The file (or other origin) the error is about.
    pub fn origin(&self) -> &str {
        match self {
            Self::File(file) => file.origin(),
            Self::Json { origin, .. }
            | Self::Format { origin, .. }
            | Self::Cluster { origin, .. }
            | Self::Device { origin, .. }
            | Self::Link { origin, .. } => origin,
        }
    }

    pub(crate) fn json(origin: &str, e: &serde_json::Error) -> Self {
        ClusterError::Json {
            origin: origin.to_string(),
            message: e.to_string(),
            line: e.line(),
            column: e.column(),
        }
    }
}

fn format_problem(found: &Option<String>) -> String {
    match found {
        None => format!("there is no \"format\"; a cluster description has \"format\": {FORMAT:?}"),
        Some(found) => {
            format!("unknown format {found}; this version of ordo reads \"format\": {FORMAT:?}")
        }
    }
}
