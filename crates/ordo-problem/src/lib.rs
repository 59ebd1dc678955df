//! The placement problem and its answer, as plain data: what the placers read
//! ([`PlaceProblem`]: a costed graph in dense, index-based form, with its devices) and what
//! they write ([`Placement`]: a device and an order for every node).
//!
//! These types sit below the placers so that the scheduler, the simulator and the runtime can
//! name them without depending on the placers (or on m-SCT's LP solver). Analyses of a problem
//! (lower bounds, Baechi's simulator) live with the placers in `ordo-place`.

mod error;
mod placement;
mod problem;

pub use error::ProblemError;
pub use placement::{Placement, PlacementFile};
pub use problem::{Devices, Edge, PlaceProblem, Tensor, baechi_topo_order};
