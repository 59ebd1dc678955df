//! ordo's placers: assign every node of a costed graph to a device under memory limits
//! (Baechi's m-TOPO, m-ETF and m-SCT, and baselines).

pub mod lp;
