//! The cost constants: a roofline for compute time and a linear model for transfer time.
//!
//! Both default to the numbers the cost-graph samples were made with (Baechi's defaults on an
//! NVIDIA V100). They live here and nowhere else, so that cluster descriptions can replace them.

use std::fmt;

/// Compute time of one op from its FLOPs and the bytes it moves:
/// `round(max(flops / flops_per_s, bytes / bytes_per_s) * 1e6 + overhead_us)` µs, at least 1.
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
}

impl Roofline {
    /// V100 fp32: 15.7e12 FLOP/s, 900e9 B/s, 5 µs per op and 5 µs per recurrent step.
    pub fn baechi_default() -> Self {
        Self { flops_per_s: 15.7e12, bytes_per_s: 900e9, overhead_us: 5.0, recurrent_step_us: 5.0 }
    }

    /// Compute time in µs of an op doing `flops` FLOPs and moving `bytes` bytes, at least 1.
    pub fn time_us(&self, flops: u64, bytes: u64) -> u64 {
        let seconds = (flops as f64 / self.flops_per_s).max(bytes as f64 / self.bytes_per_s);
        round_us(seconds * 1e6 + self.overhead_us).max(1)
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
        )
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
}

impl fmt::Display for CommModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "comm round({}*B+{})", self.us_per_byte, self.fixed_us)
    }
}

/// Rounds half to even, as Python's `round` does, so that numbers match files made by the
/// Python converter. Negative and non-finite times become 0.
fn round_us(us: f64) -> u64 {
    if us.is_finite() && us > 0.0 { us.round_ties_even() as u64 } else { 0 }
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
}
