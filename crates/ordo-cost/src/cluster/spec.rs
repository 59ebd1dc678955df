//! A device and a link of a cluster.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::model::{CommModel, Roofline};

/// What a device is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceKind {
    /// A GPU (`"gpu"`).
    Gpu,
    /// A CPU core, or a group of cores run as one device (`"cpu"`).
    Cpu,
}

impl DeviceKind {
    /// `"gpu"` or `"cpu"`, as in files.
    pub fn as_str(self) -> &'static str {
        match self {
            DeviceKind::Gpu => "gpu",
            DeviceKind::Cpu => "cpu",
        }
    }
}

impl fmt::Display for DeviceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One device of a cluster.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceSpec {
    /// Name, unique in the cluster (`gpu0`).
    pub name: String,
    /// GPU or CPU.
    pub kind: DeviceKind,
    /// Memory for a placement, in bytes; `u64::MAX` for unlimited.
    pub memory_bytes: u64,
    /// Peak arithmetic throughput in FLOP/s.
    pub peak_flops: f64,
    /// Memory bandwidth in bytes/s.
    pub memory_bandwidth: f64,
    /// Time to launch a kernel, in µs: the fixed cost of every op, also charged per time step
    /// of a recurrent layer (`launch_overhead_us` in files; older files call it
    /// `kernel_overhead_us`).
    pub launch_overhead_us: f64,
    /// Work items (threads) the device keeps in flight at full occupancy, at least 1: streaming
    /// multiprocessors x 2048 resident threads for the shipped GPUs, 1 for a CPU core. A kernel
    /// with fewer items occupies that share of the device and gets that share of its
    /// throughput; 1 makes every kernel fill the device (the plain roofline).
    pub parallelism: u64,
    /// Peak FLOP/s of matrix products in bf16 or fp16 on the tensor cores (dense), where the
    /// device has them (`half_precision_flops` in files).
    pub half_precision_flops: Option<f64>,
}

impl DeviceSpec {
    /// The device's roofline: its peak FLOP/s, bandwidth and parallelism, with
    /// `launch_overhead_us` per op and per recurrent step (each step is a dependent kernel).
    pub fn roofline(&self) -> Roofline {
        Roofline {
            flops_per_s: self.peak_flops,
            bytes_per_s: self.memory_bandwidth,
            overhead_us: self.launch_overhead_us,
            recurrent_step_us: self.launch_overhead_us,
            parallelism: self.parallelism,
            half_flops_per_s: self.half_precision_flops,
        }
    }
}

/// The link from one device to another: a transfer of `B` bytes takes
/// `latency_us + B / bandwidth_bytes_per_s * 1e6` µs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkSpec {
    /// Fixed time of every transfer, in µs.
    pub latency_us: f64,
    /// Bytes per second in the link's direction.
    pub bandwidth_bytes_per_s: f64,
}

impl LinkSpec {
    /// A device's link to itself: free.
    pub const LOCAL: LinkSpec = LinkSpec { latency_us: 0.0, bandwidth_bytes_per_s: f64::INFINITY };

    /// Baechi's default link, [`CommModel::baechi_default`]: 134 µs and 0.0001754 µs per byte
    /// (about 5.7 GB/s).
    pub fn baechi_default() -> Self {
        let comm = CommModel::baechi_default();
        LinkSpec { latency_us: comm.fixed_us, bandwidth_bytes_per_s: 1e6 / comm.us_per_byte }
    }

    /// The link as a [`CommModel`]: `fixed_us` is the latency and `us_per_byte` is
    /// `1e6 / bandwidth`, rounded to 12 significant digits so that a bandwidth written as
    /// `1e6 / c` gives back exactly `c` (Baechi's link gives exactly Baechi's model).
    pub fn comm(&self) -> CommModel {
        let us_per_byte = 1e6 / self.bandwidth_bytes_per_s;
        // 0 for the free local link; left alone if it overflowed.
        let us_per_byte = if us_per_byte.is_normal() {
            format!("{us_per_byte:.11e}").parse().unwrap_or(us_per_byte)
        } else {
            us_per_byte
        };
        CommModel { us_per_byte, fixed_us: self.latency_us }
    }
}

/// How a cluster's nodes are joined.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Topology {
    /// A fat tree (folded Clos) of switches: every device's network card reaches every other
    /// at its full bandwidth divided by `oversubscription` (1 for a non-blocking tree, 2 for
    /// 2:1 at the leaves). ordo charges the oversubscription to every transfer between nodes,
    /// not only to those that leave a leaf switch: a bound for large jobs, which span leaves.
    FatTree {
        /// Bandwidth into a switch layer over bandwidth out of it, from 1 to 1000.
        oversubscription: f64,
    },
}

impl Topology {
    /// A non-blocking fat tree.
    pub const NON_BLOCKING: Topology = Topology::FatTree { oversubscription: 1.0 };

    /// The share of a card's bandwidth a transfer between nodes gets.
    pub fn bandwidth_share(&self) -> f64 {
        match *self {
            Topology::FatTree { oversubscription } => 1.0 / oversubscription,
        }
    }
}

/// The network between a cluster's nodes, seen from one device: every device has its own
/// network card (InfiniBand or RoCE, as on DGX and HGX servers), so a node's bandwidth into
/// the network is its devices' sum.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NetworkSpec {
    /// The switches between the cards.
    pub topology: Topology,
    /// Fixed time of every message between nodes, in µs.
    pub latency_us: f64,
    /// One device's card, bytes per second in each direction (a 400 Gb/s card: 50e9).
    pub bandwidth_bytes_per_s: f64,
}

impl NetworkSpec {
    /// The path from a device to a device on another node: the network's latency and the card's
    /// share of the topology.
    pub fn link(&self) -> LinkSpec {
        LinkSpec {
            latency_us: self.latency_us,
            bandwidth_bytes_per_s: self.bandwidth_bytes_per_s * self.topology.bandwidth_share(),
        }
    }
}
