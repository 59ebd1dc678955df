//! ordo's plan builder: from a placement, per-device streams with ordered tasks, transfers on
//! tx/rx streams, cross-stream events and buffer lifetimes.

mod plan;

pub use plan::{
    Buffer, BufferId, Event, EventId, Plan, Stream, StreamId, StreamKind, Task, TaskId, TaskKind,
};
