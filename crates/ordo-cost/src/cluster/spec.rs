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
