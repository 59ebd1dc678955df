//! ordo's placers: assign every node of a costed graph to a device under memory limits
//! (Baechi's m-TOPO, m-ETF and m-SCT, and baselines). Implemented by the placement issue; the
//! crate exists now so that dependencies flow one way from the start:
//! `ir <- models/cost <- place <- sched <- sim/exec <- cli`.
