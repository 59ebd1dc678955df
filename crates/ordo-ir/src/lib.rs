//! ordo's graph IR.
//!
//! A [`Graph`] is plain data: an arena of [`Node`]s, each an [`Op`] applied to input wires
//! ([`OutletId`]) and parameters ([`ParamId`]), with a [`TensorFact`] (dtype and static shape)
//! for every output. Graphs are built with [`GraphBuilder`], which runs shape inference as each
//! node is added, or read from a file and checked with [`validate`]. [`node_stats`] and
//! [`graph_stats`] give parameter counts, forward FLOPs and activation bytes.
//!
//! ```
//! use ordo_ir::{GraphBuilder, TensorFact, graph_stats};
//!
//! let mut b = GraphBuilder::new("mlp");
//! let x = b.input("x", TensorFact::f32([8, 784]))?;
//! let h = b.linear("fc1", x, 128)?;
//! let h = b.relu("relu", h)?;
//! b.linear("fc2", h, 10)?;
//! let graph = b.finish();
//! assert_eq!(graph_stats(&graph).params, 784 * 128 + 128 + 128 * 10 + 10);
//! # Ok::<(), ordo_ir::IrError>(())
//! ```

mod builder;
pub mod element;
mod error;
mod fact;
mod graph;
mod ids;
mod layers;
pub mod op;
mod order;
pub mod samples;
mod stats;
pub mod training;
pub mod transform;
mod validate;

pub use builder::GraphBuilder;
pub use error::{IrError, IrResult};
pub use fact::{DType, TensorFact};
pub use graph::{Graph, Node, Param, ParamInit, Role, unique_name};
pub use ids::{NodeId, OutletId, ParamId};
pub use op::Op;
pub use order::{KahnOrder, kahn_order};
pub use stats::{GraphStats, NodeStats, graph_stats, node_stats};
pub use validate::validate;
