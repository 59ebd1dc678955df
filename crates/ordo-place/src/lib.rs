//! ordo's placers: assign every node of a costed graph to a device under memory limits
//! (Baechi's m-TOPO, m-ETF and m-SCT, and baselines).

mod algorithm;
pub mod auto;
pub mod baselines;
pub mod bound;
mod error;
pub mod etf;
pub mod lp;
mod received;
pub mod reduce;
pub mod sct;
pub mod sim;
pub mod topo;

pub use algorithm::{
    Algorithm, MemoryNeed, PlaceOptions, check_fits, device_needs, group_need, place,
};
pub use auto::{AutoOptions, AutoPlacement, AutoProgress, place_auto, place_auto_reporting};
pub use bound::{LowerBounds, lower_bounds};
pub use error::PlaceError;
pub use etf::m_etf;
pub use ordo_problem::{
    Devices, Edge, PlaceProblem, Placement, PlacementFile, ProblemError, Tensor, baechi_topo_order,
};
pub use reduce::{Reduced, expand};
pub use sct::{m_sct, m_sct_with_favorites};
pub use sim::{Schedule, makespan_with_order, placement_file, simulate, simulate_with_order};
pub use topo::{Capacity, m_topo};
