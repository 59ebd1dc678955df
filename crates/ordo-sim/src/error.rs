//! What can go wrong.

/// Why a plan could not be simulated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimError {
    /// The plan refers to something that does not exist or breaks a structural rule the
    /// simulator relies on.
    #[error("invalid plan: {0}")]
    InvalidPlan(String),
    /// Tasks are left and none can start: the streams and events form a cycle.
    #[error(
        "deadlock: {unfinished} tasks never ran; blocked first in their streams: {}",
        short_list(stuck)
    )]
    Deadlock {
        /// Names of the tasks that are first in one of their streams and cannot start, in task
        /// order.
        stuck: Vec<String>,
        /// How many tasks never finished.
        unfinished: usize,
    },
}

fn short_list(names: &[String]) -> String {
    const SHOWN: usize = 10;
    let mut s = names.iter().take(SHOWN).cloned().collect::<Vec<_>>().join(", ");
    if names.len() > SHOWN {
        s.push_str(&format!(" and {} more", names.len() - SHOWN));
    }
    s
}
