//! ordo's discrete-event simulator: runs a plan against the cost model and reports step time,
//! utilisation, peak memory and the critical path. Implemented by the simulator issue.
