//! ordo's plan builder: from a placement, per-device streams with ordered tasks, transfers on
//! tx/rx streams, cross-stream events and buffer lifetimes. Implemented by the plans issue.
