//! Measured profiles (`ordo.profile/1`): every node's compute time and memory as measured by
//! running its kernel, to cost a graph with instead of the roofline.
//!
//! ```json
//! {"format": "ordo.profile/1", "model": "resnet50-small (training graph)", "batch": 2,
//!  "device": "cpu: 1 thread, x86_64 linux", "reps": 5, "warmup": 2, "calls": "in-step",
//!  "temporary_measured": true,
//!  "nodes": [{"name": "conv1", "time_us": 41.5, "output_bytes": [16384],
//!             "temporary_bytes": 75264}, ...]}
//! ```
//!
//! `time_us` is the median of the timed calls, in µs; `output_bytes` the bytes of each output;
//! `temporary_bytes` the peak heap a call allocated beyond its outputs (all 0 when
//! `temporary_measured` is false). [`apply_profile`] puts the times into a cost graph of the
//! same graph, and refuses a profile of another graph or of another size.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use ordo_ir::Role;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::costgraph::CostGraph;

/// The format tag of the files this version reads and writes.
pub const PROFILE_FORMAT: &str = "ordo.profile/1";

/// How many offending names an error lists before it gives only the count.
const SHOWN: usize = 5;

/// A measured profile of one graph.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// Always [`PROFILE_FORMAT`].
    pub format: String,
    /// The profiled graph's name (e.g. `gnmt-small (training graph)`).
    pub model: String,
    /// The batch size it was built with.
    pub batch: usize,
    /// The device it ran on, in words.
    pub device: String,
    /// Timed calls per node.
    pub reps: usize,
    /// Untimed calls before them.
    pub warmup: usize,
    /// How the calls were made: `runtime` (whole steps of the runtime), `in-step` (whole
    /// passes of kernel calls over the graph) or `back-to-back`
    /// (each node all its calls in a row).
    pub calls: String,
    /// Whether `temporary_bytes` were measured (else they are 0).
    pub temporary_measured: bool,
    /// How much the machine's speed varied while profiling: the interquartile range of the
    /// timed steps' totals over their median (absent in profiles that did not measure it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread: Option<f64>,
    /// Every node of the graph, in the graph's order.
    pub nodes: Vec<ProfileNode>,
    /// What a transfer between two devices of the runtime measured, when it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<ProfileLink>,
    /// What a step of the runtime costs outside its tasks (starting and joining its workers),
    /// µs, when it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_overhead_us: Option<f64>,
    /// How much slower a step runs while another copy of it runs at once on the machine (at
    /// least 1), when it was measured: what a second CPU device or worker costs the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency_slowdown: Option<f64>,
}

/// A measured transfer between two devices: a fixed cost and a cost per byte.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProfileLink {
    /// Fixed cost of one transfer, µs (the hand-over between devices).
    pub fixed_us: f64,
    /// Cost per byte, µs.
    pub us_per_byte: f64,
}

impl Profile {
    /// The measured link as a communication model, when there is one.
    pub fn comm(&self) -> Option<crate::CommModel> {
        self.link.map(|l| crate::CommModel { us_per_byte: l.us_per_byte, fixed_us: l.fixed_us })
    }
}

/// What one node measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProfileNode {
    /// The node's name, unique in the profile.
    pub name: String,
    /// Median time of one call, in µs (finite, not negative).
    pub time_us: f64,
    /// Bytes of each output, in slot order.
    pub output_bytes: Vec<u64>,
    /// Peak heap bytes a call allocated beyond its outputs.
    pub temporary_bytes: u64,
}

/// What is wrong with a profile file, or with applying a profile to a graph.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// The file could not be read or written.
    #[error("{origin}: cannot {action} the file")]
    Io {
        /// The file.
        origin: String,
        /// `read` or `write`.
        action: &'static str,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The text is not JSON, not a profile, or a profile with a bad field.
    #[error("{origin}: {message}")]
    Invalid {
        /// The file.
        origin: String,
        /// What is wrong.
        message: String,
    },
    /// The profile is of another graph: node names do not match.
    #[error("the profile of `{profile_model}` does not match the graph `{graph_model}`: {details}")]
    OtherGraph {
        /// The profile's model.
        profile_model: String,
        /// The graph's model (its `model` metadata).
        graph_model: String,
        /// The nodes missing from the profile and those the graph does not have.
        details: String,
    },
    /// Same node names, other output sizes: a profile of another batch size or variant.
    #[error(
        "the profile of `{model}` (batch {batch}) was measured at other sizes than this graph: \
         {details}"
    )]
    OtherSize {
        /// The profile's model.
        model: String,
        /// The profile's batch size.
        batch: usize,
        /// The nodes whose output bytes differ.
        details: String,
    },
}

impl Profile {
    /// Parses a profile; `origin` names the text in errors.
    ///
    /// # Errors
    /// [`ProfileError::Invalid`]: not JSON, another format or version, a missing or
    /// mistyped field, a negative or non-finite time, a duplicate node name.
    pub fn parse(text: &str, origin: &str) -> Result<Self, ProfileError> {
        let invalid = |message: String| ProfileError::Invalid { origin: origin.into(), message };
        let value: Value =
            serde_json::from_str(text).map_err(|e| invalid(format!("not valid JSON: {e}")))?;
        match value.get("format").and_then(Value::as_str) {
            Some(PROFILE_FORMAT) => {}
            Some(other) if other.starts_with("ordo.profile/") => {
                return Err(invalid(format!(
                    "profile format `{other}` is not supported; this ordo reads {PROFILE_FORMAT}"
                )));
            }
            Some(other) => return Err(invalid(format!("format `{other}` is not a profile"))),
            None => {
                return Err(invalid(format!(
                    "no \"format\": \"{PROFILE_FORMAT}\"; not a profile written by `ordo profile`"
                )));
            }
        }
        // The path of the offending field in the message (`nodes[3].time_us: invalid type`).
        let profile: Profile = serde_path_to_error::deserialize(value)
            .map_err(|e| invalid(format!("bad profile: {}: {}", e.path(), e.inner())))?;
        let mut seen = BTreeSet::new();
        if let Some(slowdown) = profile.concurrency_slowdown
            && !(slowdown.is_finite() && (1.0..=100.0).contains(&slowdown))
        {
            return Err(invalid(format!(
                "concurrency_slowdown is {}: expected a factor between 1 and 100",
                crate::readable(slowdown)
            )));
        }
        if let Some(spread) = profile.spread
            && !(spread.is_finite() && (0.0..=1e3).contains(&spread))
        {
            return Err(invalid(format!(
                "spread is {}: expected a ratio between 0 and 1000",
                crate::readable(spread)
            )));
        }
        if let Some(problem) = profile.step_overhead_us.and_then(|t| crate::time_problem(t, "µs"))
        {
            return Err(invalid(format!("step_overhead_us {problem}")));
        }
        if let Some(link) = profile.link {
            if let Some(problem) = crate::time_problem(link.fixed_us, "µs") {
                return Err(invalid(format!("link.fixed_us {problem}")));
            }
            // At most 1 s per byte: a link of 1 byte/s.
            if let Some(problem) =
                crate::time_problem(link.us_per_byte, "µs per byte").or_else(|| {
                    (link.us_per_byte > 1e6).then(|| {
                        format!(
                            "is {}: a link slower than 1 byte/s",
                            crate::readable(link.us_per_byte)
                        )
                    })
                })
            {
                return Err(invalid(format!("link.us_per_byte {problem}")));
            }
        }
        for node in &profile.nodes {
            if let Some(problem) = crate::time_problem(node.time_us, "µs") {
                return Err(invalid(format!("node `{}`: time_us {problem}", node.name)));
            }
            if !seen.insert(node.name.as_str()) {
                return Err(invalid(format!("node `{}` appears twice", node.name)));
            }
        }
        Ok(profile)
    }

    /// Reads a profile file.
    ///
    /// # Errors
    /// [`ProfileError::Io`] or the errors of [`Profile::parse`].
    pub fn read(path: impl AsRef<Path>) -> Result<Self, ProfileError> {
        let path = path.as_ref();
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ProfileError::Io {
            origin: origin.clone(),
            action: "read",
            source,
        })?;
        Self::parse(&text, &origin)
    }

    /// The profile as pretty JSON.
    pub fn to_json_string(&self) -> String {
        serde_json::to_string_pretty(self).expect("a profile serialises")
    }

    /// Writes the profile to `path`.
    ///
    /// # Errors
    /// [`ProfileError::Io`].
    pub fn write(&self, path: impl AsRef<Path>) -> Result<(), ProfileError> {
        let path = path.as_ref();
        let text = self.to_json_string();
        crate::write_atomically(path, |out| out.write_all(text.as_bytes())).map_err(|source| {
            ProfileError::Io { origin: path.display().to_string(), action: "write", source }
        })
    }
}

/// Costs `graph`'s nodes with `profile`: each node's `weight` becomes its measured time in whole
/// µs (at least 1, as the format requires) and its `temporary_memory` the measured temporary
/// bytes. Times are rounded with error diffusion in graph order (each node's rounding error is
/// carried to the next), so a step of hundreds of few-µs kernels sums to its measured time
/// instead of gaining half a µs per node, as rounding each one up or to the nearest would. Output and persistent memory, occupancy and links stay as they
/// were. The graph's `cost_model` metadata then names the profile.
///
/// # Errors
/// [`ProfileError::OtherGraph`] when the names differ (nodes of the graph the profile lacks,
/// or nodes of the profile the graph lacks, the first few of each and their count);
/// [`ProfileError::OtherSize`] when a node's output bytes differ from the graph's (updates,
/// whose output the cost graph counts as written in place, are not compared). Nothing is
/// changed on error.
pub fn apply_profile(graph: &mut CostGraph, profile: &Profile) -> Result<(), ProfileError> {
    let by_name: BTreeMap<&str, &ProfileNode> =
        profile.nodes.iter().map(|n| (n.name.as_str(), n)).collect();
    let graph_names: BTreeSet<&str> = graph.nodes.iter().map(|n| n.name.as_str()).collect();
    let missing: Vec<&str> =
        graph.nodes.iter().map(|n| n.name.as_str()).filter(|n| !by_name.contains_key(n)).collect();
    let extra: Vec<&str> = profile
        .nodes
        .iter()
        .map(|n| n.name.as_str())
        .filter(|n| !graph_names.contains(n))
        .collect();
    let graph_model = graph.graph.get("model").and_then(Value::as_str).unwrap_or("?").to_string();
    if !missing.is_empty() || !extra.is_empty() {
        let mut details = Vec::new();
        if !missing.is_empty() {
            details.push(format!("graph nodes not in the profile: {}", listing(&missing)));
        }
        if !extra.is_empty() {
            details.push(format!("not in the graph: {}", listing(&extra)));
        }
        return Err(ProfileError::OtherGraph {
            profile_model: profile.model.clone(),
            graph_model,
            details: details.join("; "),
        });
    }
    let resized: Vec<String> = graph
        .nodes
        .iter()
        .filter(|n| n.role != Role::Update)
        .filter_map(|n| {
            let measured = &by_name[n.name.as_str()].output_bytes;
            (measured != &n.output_memory)
                .then(|| format!("{} ({:?} bytes, graph {:?})", n.name, measured, n.output_memory))
        })
        .collect();
    if !resized.is_empty() {
        let names: Vec<&str> = resized.iter().map(String::as_str).collect();
        return Err(ProfileError::OtherSize {
            model: profile.model.clone(),
            batch: profile.batch,
            details: listing(&names),
        });
    }
    let mut carried = 0.0;
    for node in &mut graph.nodes {
        let measured = by_name[node.name.as_str()];
        let exact = measured.time_us + carried;
        node.weight = (exact.round().max(1.0)) as u64;
        carried = exact - node.weight as f64;
        node.temporary_memory = measured.temporary_bytes;
    }
    let description = format!(
        "profile of `{}` on {} (median of {} calls)",
        profile.model, profile.device, profile.reps
    );
    graph.graph.insert("cost_model".into(), Value::from(description));
    Ok(())
}

/// The first [`SHOWN`] names, then how many there are in all.
fn listing(names: &[&str]) -> String {
    let shown: Vec<String> = names.iter().take(SHOWN).map(|n| format!("`{n}`")).collect();
    if names.len() > SHOWN {
        format!("{}, ... ({} in all)", shown.join(", "), names.len())
    } else {
        format!("{} ({} in all)", shown.join(", "), names.len())
    }
}
