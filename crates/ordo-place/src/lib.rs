//! ordo's placers: assign every node of a costed graph to a device under memory limits
//! (Baechi's m-TOPO, m-ETF and m-SCT, and baselines).

mod error;
pub mod lp;
mod placement;
mod problem;

pub use error::PlaceError;
pub use placement::{Placement, PlacementFile};
pub use problem::{Devices, Edge, PlaceProblem, Tensor, baechi_topo_order};
