//! The cost constants: a roofline for compute time, with launch overhead and occupancy, and a
//! linear model for transfer time.
//!
//! Both default to the numbers the cost-graph samples were made with (Baechi's defaults on an
//! NVIDIA V100). They live here and nowhere else, so that cluster descriptions can replace them.

use std::fmt;

/// Compute time of one kernel from its FLOPs, the bytes it moves and how many parallel work
/// items it has.
///
/// A kernel of `work_items` items keeps `occupancy = min(1, work_items / parallelism)` of the
/// device busy (at least `1 / parallelism`), and gets only that share of its throughput:
///
/// `time = round(max(flops / (flops_per_s * occupancy), bytes / (bytes_per_s * occupancy))
/// * 1e6 + overhead_us)` µs, at least 1.
///
/// With `parallelism` 1 every kernel fills the device and this is the plain roofline
/// ([`Roofline::time_us`], which the cost-graph samples were made with).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Roofline {
    /// Peak arithmetic throughput in FLOP/s.
    pub flops_per_s: f64,
    /// Memory bandwidth in bytes/s.
    pub bytes_per_s: f64,
    /// Fixed cost of every op (a kernel launch), in µs.
    pub overhead_us: f64,
    /// Extra cost per time step and direction of a recurrent layer, in µs: each step is a
    /// dependent kernel, which the plain roofline does not see.
    pub recurrent_step_us: f64,
    /// Work items (threads) the device keeps in flight when fully occupied; at least 1. A
    /// kernel with fewer items occupies only part of the device.
    pub parallelism: u64,
    /// Peak FLOP/s of matrix products in 16-bit floats (bf16, fp16) on the device's tensor
    /// cores, where it has them; `None`: as `flops_per_s`.
    pub half_flops_per_s: Option<f64>,
}

/// What one kernel costs: its time alone on the device and the share of the device it keeps
/// busy meanwhile.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KernelCost {
    /// Time in µs with the device to itself, launch overhead included; at least 1.
    pub time_us: u64,
    /// Share of the device the kernel occupies, in `(0, 1]`.
    pub occupancy: f64,
}

impl Roofline {
    /// V100 fp32: 15.7e12 FLOP/s, 900e9 B/s, 5 µs per op and 5 µs per recurrent step, and
    /// `parallelism` 1, so that every kernel fills the device as in Baechi's model.
    pub fn baechi_default() -> Self {
        Self {
            flops_per_s: 15.7e12,
            bytes_per_s: 900e9,
            overhead_us: 5.0,
            recurrent_step_us: 5.0,
            parallelism: 1,
            half_flops_per_s: None,
        }
    }

    /// The roofline of matrix products in 16-bit floats: the tensor cores' FLOP/s, where the
    /// device has them.
    pub fn for_half_matmul(&self) -> Roofline {
        Roofline { flops_per_s: self.half_flops_per_s.unwrap_or(self.flops_per_s), ..*self }
    }

    /// Share of the device a kernel of `work_items` parallel items occupies:
    /// `min(1, work_items / parallelism)`, at least `1 / parallelism` (a kernel runs at least
    /// one item at a time).
    pub fn occupancy(&self, work_items: u64) -> f64 {
        let parallelism = self.parallelism.max(1) as f64;
        (work_items as f64 / parallelism).clamp(1.0 / parallelism, 1.0)
    }

    /// Time and occupancy of a kernel doing `flops` FLOPs and moving `bytes` bytes over
    /// `work_items` parallel items (see [`Roofline`]).
    pub fn kernel(&self, flops: u64, bytes: u64, work_items: u64) -> KernelCost {
        let occupancy = self.occupancy(work_items);
        let seconds = (flops as f64 / (self.flops_per_s * occupancy))
            .max(bytes as f64 / (self.bytes_per_s * occupancy));
        KernelCost { time_us: round_us(seconds * 1e6 + self.overhead_us).max(1), occupancy }
    }

    /// Compute time in µs of an op doing `flops` FLOPs and moving `bytes` bytes with the whole
    /// device (occupancy 1), at least 1: the plain roofline.
    pub fn time_us(&self, flops: u64, bytes: u64) -> u64 {
        self.kernel(flops, bytes, u64::MAX).time_us
    }

    /// Extra time in µs of a recurrent layer of `steps` time steps in `directions` directions.
    pub fn recurrent_time_us(&self, steps: u64, directions: u64) -> u64 {
        round_us(self.recurrent_step_us * (steps * directions) as f64)
    }
}

impl fmt::Display for Roofline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "roofline {} FLOP/s, {} B/s, +{}us per op, +{}us per recurrent step",
            engineering(self.flops_per_s),
            engineering(self.bytes_per_s),
            self.overhead_us,
            self.recurrent_step_us
        )?;
        if self.parallelism > 1 {
            write!(f, ", {} threads in flight", self.parallelism)?;
        }
        Ok(())
    }
}

/// Transfer time of a tensor between devices: `round(us_per_byte * bytes + fixed_us)` µs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CommModel {
    /// Time per byte in µs.
    pub us_per_byte: f64,
    /// Fixed time per transfer in µs.
    pub fixed_us: f64,
}

impl CommModel {
    /// Baechi's default `--comm_cost_coeffs=0.0001754,134`.
    pub fn baechi_default() -> Self {
        Self { us_per_byte: 0.0001754, fixed_us: 134.0 }
    }

    /// Time in µs to move `bytes` bytes to another device.
    pub fn time_us(&self, bytes: u64) -> u64 {
        round_us(self.us_per_byte * bytes as f64 + self.fixed_us)
    }

    /// Time in µs of a ring all-reduce of `bytes` bytes over `devices` devices linked by this
    /// model: `2 (N - 1)` steps, each moving `bytes / N` to the next device in the ring
    /// (reduce-scatter, then all-gather), so `2 (N - 1) / N * bytes` per device and
    /// `2 (N - 1)` latencies. 0 for one device.
    pub fn ring_all_reduce_us(&self, devices: usize, bytes: u64) -> u64 {
        if devices < 2 {
            return 0;
        }
        let steps = 2.0 * (devices - 1) as f64;
        let per_step = bytes as f64 / devices as f64;
        round_us(steps * (self.fixed_us + self.us_per_byte * per_step))
    }
}

impl fmt::Display for CommModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "comm round({}*B+{})", self.us_per_byte, self.fixed_us)
    }
}

/// Rounds half to even, as Python's `round` does, so that numbers match files made by the
/// Python converter. Negative and non-finite times become 0.
/// `us` rounded to whole µs, 0 for NaN or negative, at most [`crate::MAX_TIME_US`] (also for
/// an infinite time).
pub(crate) fn round_us(us: f64) -> u64 {
    if us > 0.0 { (us.round_ties_even().min(crate::MAX_TIME_US as f64)) as u64 } else { 0 }
}

/// `15.7e12`, `900e9`: a mantissa and an exponent that is a multiple of 3.
fn engineering(x: f64) -> String {
    if !x.is_finite() || x == 0.0 {
        return x.to_string();
    }
    let exp = (x.abs().log10() / 3.0).floor() as i32 * 3;
    let mantissa = x / 10f64.powi(exp);
    // Rounding to 9 significant digits hides the error of the division.
    let mantissa = format!("{mantissa:.9}");
    let mantissa = mantissa.trim_end_matches('0').trim_end_matches('.');
    if exp == 0 { mantissa.to_string() } else { format!("{mantissa}e{exp}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describes_the_defaults() {
        assert_eq!(
            format!("{}; {}", Roofline::baechi_default(), CommModel::baechi_default()),
            "roofline 15.7e12 FLOP/s, 900e9 B/s, +5us per op, +5us per recurrent step; \
             comm round(0.0001754*B+134)"
        );
        assert_eq!(engineering(1.0), "1");
        assert_eq!(engineering(0.0001754), "175.4e-6");
    }

    #[test]
    fn rounds_like_python() {
        let comm = CommModel { us_per_byte: 0.5, fixed_us: 0.0 };
        assert_eq!(comm.time_us(1), 0);
        assert_eq!(comm.time_us(3), 2);
        assert_eq!(CommModel::baechi_default().time_us(20971520), 3812);
        assert_eq!(Roofline::baechi_default().time_us(7552892928, 0), 486);
        assert_eq!(Roofline::baechi_default().time_us(0, 0), 5);
    }

    /// An A100 as shipped: 19.5e12 FLOP/s, 2.039e12 B/s, 5 µs launch, 108 SMs x 2048 threads.
    fn a100() -> Roofline {
        Roofline {
            flops_per_s: 19.5e12,
            bytes_per_s: 2.039e12,
            overhead_us: 5.0,
            recurrent_step_us: 5.0,
            parallelism: 108 * 2048,
            half_flops_per_s: Some(312e12),
        }
    }

    #[test]
    fn occupancy_is_the_share_of_the_threads_in_flight() {
        let gpu = a100();
        assert_eq!(gpu.occupancy(221_184), 1.0);
        assert_eq!(gpu.occupancy(10_000_000), 1.0);
        assert_eq!(gpu.occupancy(110_592), 0.5);
        // Never 0: one item at a time at least.
        assert_eq!(gpu.occupancy(0), 1.0 / 221_184.0);
        assert_eq!(gpu.occupancy(1), 1.0 / 221_184.0);
        // Parallelism 1 (and 0, read as 1): every kernel fills the device.
        for parallelism in [0, 1] {
            let plain = Roofline { parallelism, ..gpu };
            assert_eq!(plain.occupancy(0), 1.0);
            assert_eq!(plain.occupancy(3), 1.0);
        }
    }

    #[test]
    fn a_kernel_gets_the_throughput_of_the_share_it_occupies() {
        let gpu = a100();
        // 39e9 FLOP on the whole device: 2000 µs + 5 µs launch.
        assert_eq!(
            gpu.kernel(39_000_000_000, 0, 221_184),
            KernelCost { time_us: 2005, occupancy: 1.0 }
        );
        // The same work over half the threads takes twice as long.
        assert_eq!(
            gpu.kernel(39_000_000_000, 0, 110_592),
            KernelCost { time_us: 4005, occupancy: 0.5 }
        );
        // Memory-bound: 2.039e9 B at a quarter of the bandwidth: 4000 µs.
        assert_eq!(gpu.kernel(0, 2_039_000_000, 55_296).time_us, 4005);
        // time_us is the full-occupancy roofline, whatever the parallelism.
        assert_eq!(gpu.time_us(39_000_000_000, 0), 2005);
        assert_eq!(Roofline { parallelism: 1, ..gpu }.kernel(39_000_000_000, 0, 1).time_us, 2005);
    }

    #[test]
    fn launch_overhead_is_paid_once_per_kernel() {
        let gpu = a100();
        assert_eq!(gpu.kernel(0, 0, 1).time_us, 5);
        let free = Roofline { overhead_us: 0.0, ..gpu };
        // Nothing to do and no launch cost: still at least 1 µs.
        assert_eq!(free.kernel(0, 0, 1).time_us, 1);
        assert_eq!(free.kernel(39_000_000_000, 0, 221_184).time_us, 2000);
        assert_eq!(
            Roofline { overhead_us: 12.0, ..free }.kernel(39_000_000_000, 0, 221_184).time_us,
            2012
        );
    }

    #[test]
    fn a_small_kernel_fills_a_cpu_core_but_not_an_a100() {
        // 64 x 64 outputs of a 64-deep matrix product: 524288 FLOP.
        let (flops, bytes, items) = (2 * 64 * 64 * 64, 3 * 64 * 64 * 4, 64 * 64);
        let gpu = a100().kernel(flops, bytes, items);
        assert!(gpu.occupancy < 0.02, "{gpu:?}");
        assert_eq!(gpu.occupancy, 4096.0 / 221_184.0);
        // 524288 / (19.5e12 * 4096 / 221184) = 1.45 µs, + 5.
        assert_eq!(gpu.time_us, 6);
        let core = Roofline {
            flops_per_s: 147.2e9,
            bytes_per_s: 5.12e9,
            overhead_us: 1.0,
            recurrent_step_us: 1.0,
            parallelism: 1,
            half_flops_per_s: None,
        };
        let cpu = core.kernel(flops, bytes, items);
        assert_eq!(cpu.occupancy, 1.0);
        // max(3.56, 9.6) + 1 µs.
        assert_eq!(cpu.time_us, 11);
    }

    #[test]
    fn the_description_names_the_parallelism() {
        assert_eq!(
            a100().to_string(),
            "roofline 19.5e12 FLOP/s, 2.039e12 B/s, +5us per op, +5us per recurrent step, 221184 \
             threads in flight"
        );
    }
}
