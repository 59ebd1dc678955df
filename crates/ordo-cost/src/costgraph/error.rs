//! Errors of reading, checking and writing cost graphs. Every message starts with the file (or
//! whatever the caller called the text) and names the node or link and the attribute, so it
//! can be shown to a user as it is.

use std::fmt;

/// What went wrong with a cost graph.
#[derive(Debug, thiserror::Error)]
pub enum CostGraphError {
    /// The file could not be read or written.
    #[error(transparent)]
    File(#[from] crate::file::FileError),
    /// The text is not JSON (or is cut short).
    #[error("{origin}: not valid JSON: {message}")]
    Json {
        /// The file.
        origin: String,
        /// The parser's message, which includes the position.
        message: String,
        /// 1-based line of the problem.
        line: usize,
        /// 1-based column of the problem.
        column: usize,
    },
    /// The JSON is not an object, so not a cost graph.
    #[error("{origin}: the top level is {found}, not an object")]
    NotAnObject {
        /// The file.
        origin: String,
        /// What the top level is, e.g. `a list`.
        found: String,
    },
    /// A problem with a top-level attribute (`nodes`, `links`, `graph`, ...).
    #[error("{origin}: attribute \"{attribute}\" {problem}")]
    Top {
        /// The file.
        origin: String,
        /// The top-level key.
        attribute: String,
        /// What is wrong, e.g. `is missing`.
        problem: String,
    },
    /// A problem with one node's attribute.
    #[error("{origin}: {node}: attribute \"{attribute}\" {problem}")]
    Node {
        /// The file.
        origin: String,
        /// The node.
        node: NodeLabel,
        /// The attribute, e.g. `output_memory`.
        attribute: String,
        /// What is wrong, e.g. `has a negative entry -5`.
        problem: String,
    },
    /// A problem with one link's attribute.
    #[error("{origin}: {edge}: attribute \"{attribute}\" {problem}")]
    Edge {
        /// The file.
        origin: String,
        /// The link (boxed to keep the error small).
        edge: Box<EdgeLabel>,
        /// The attribute, e.g. `target` or `tensor[0].num_bytes`.
        attribute: String,
        /// What is wrong.
        problem: String,
    },
    /// The links form a cycle.
    #[error("{origin}: {node} lies on a cycle of links: {}", cycle_text(.cycle))]
    Cycle {
        /// The file.
        origin: String,
        /// A node on the cycle.
        node: NodeLabel,
        /// Ids along the cycle, starting and ending at `node`.
        cycle: Vec<u64>,
    },
}

impl CostGraphError {
    /// The file (or other origin) the error is about.
    pub fn origin(&self) -> &str {
        match self {
            Self::File(file) => file.origin(),
            Self::Json { origin, .. }
            | Self::NotAnObject { origin, .. }
            | Self::Top { origin, .. }
            | Self::Node { origin, .. }
            | Self::Edge { origin, .. }
            | Self::Cycle { origin, .. } => origin,
        }
    }
}

fn cycle_text(cycle: &[u64]) -> String {
    cycle.iter().map(u64::to_string).collect::<Vec<_>>().join(" -> ")
}

/// Names a node in messages: `node 12 ("relu")`, or by its position in the `nodes` list when
/// its id is unusable: `node at position 3 ("relu")`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeLabel {
    /// Position in the file's `nodes` list.
    pub position: usize,
    /// The node's id, when it has a valid one.
    pub id: Option<u64>,
    /// The node's name, when it has one.
    pub name: Option<String>,
}

impl fmt::Display for NodeLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.id {
            Some(id) => write!(f, "node {id}")?,
            None => write!(f, "node at position {}", self.position)?,
        }
        match &self.name {
            Some(name) => write!(f, " ({name:?})"),
            None => Ok(()),
        }
    }
}

/// Names a link in messages: `edge 3 ("a") -> 7 ("b")`, with `?` for an endpoint that is
/// missing or unusable and the position in the `links` list in that case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EdgeLabel {
    /// Position in the file's `links` (or `edges`) list.
    pub position: usize,
    /// Source id, when valid.
    pub source: Option<u64>,
    /// Name of the source node, when it is a known node.
    pub source_name: Option<String>,
    /// Target id, when valid.
    pub target: Option<u64>,
    /// Name of the target node, when it is a known node.
    pub target_name: Option<String>,
}

impl fmt::Display for EdgeLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let end = |f: &mut fmt::Formatter<'_>, id: Option<u64>, name: &Option<String>| {
            match id {
                Some(id) => write!(f, "{id}")?,
                None => f.write_str("?")?,
            }
            match name {
                Some(name) => write!(f, " ({name:?})"),
                None => Ok(()),
            }
        };
        f.write_str("edge ")?;
        if self.source.is_none() || self.target.is_none() {
            write!(f, "at position {} (", self.position)?;
        }
        end(f, self.source, &self.source_name)?;
        f.write_str(" -> ")?;
        end(f, self.target, &self.target_name)?;
        if self.source.is_none() || self.target.is_none() {
            f.write_str(")")?;
        }
        Ok(())
    }
}
