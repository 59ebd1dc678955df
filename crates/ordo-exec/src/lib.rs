//! ordo's runtime: executes plans out of order on devices with real kernels. Implemented by the
//! runtime issue.
