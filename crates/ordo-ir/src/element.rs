//! Values of the narrow element types: rounding a number to a float format of fewer bits,
//! wrapping an integer to a narrower integer type, and decoding the bits of the float8 and
//! float4 formats. The import's constant folding and the CPU kernels both narrow values with
//! these, so a folded constant and a computed tensor of the same type hold the same values.
//!
//! Float formats follow ONNX (and the `ml_dtypes` library its reference uses): rounding to
//! nearest, ties to even, with subnormals; what an overflow gives depends on the format's
//! special values ([`Specials`]).

use crate::fact::DType;

/// Which special values a float format has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Specials {
    /// IEEE's: the all-ones exponent holds the infinities and NaNs (f16, bf16, float8 e5m2).
    /// An overflow rounds to infinity.
    Ieee,
    /// No infinities; NaN is all ones (float8 e4m3fn). An overflow is NaN.
    NanAllOnes,
    /// No infinities and no negative zero; NaN is the bits of negative zero (the `fnuz`
    /// float8 formats). An overflow is NaN.
    NanNegativeZero,
    /// Finite values only (float4 e2m1). An overflow saturates to the largest value; NaN
    /// becomes negative zero (`ml_dtypes`' conversion).
    FiniteOnly,
}

/// A binary float format: a sign bit, `exponent_bits` of exponent with `bias`, and
/// `mantissa_bits` of fraction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FloatFormat {
    /// Bits of exponent.
    pub exponent_bits: u32,
    /// Bits of fraction (the mantissa without its leading 1).
    pub mantissa_bits: u32,
    /// The exponent's bias.
    pub bias: i32,
    /// Its special values.
    pub specials: Specials,
}

impl FloatFormat {
    const fn new(exponent_bits: u32, mantissa_bits: u32, bias: i32, specials: Specials) -> Self {
        Self { exponent_bits, mantissa_bits, bias, specials }
    }

    /// The format of `dtype`: f16, bf16 and the float8 and float4 formats but e8m0 (which has no
    /// sign or mantissa; [`e8m0_round`]); `None` for f32, f64 and non-float types.
    pub fn of(dtype: DType) -> Option<Self> {
        Some(match dtype {
            DType::F16 => Self::new(5, 10, 15, Specials::Ieee),
            DType::BF16 => Self::new(8, 7, 127, Specials::Ieee),
            DType::F8E4M3FN => Self::new(4, 3, 7, Specials::NanAllOnes),
            DType::F8E4M3FNUZ => Self::new(4, 3, 8, Specials::NanNegativeZero),
            DType::F8E5M2 => Self::new(5, 2, 15, Specials::Ieee),
            DType::F8E5M2FNUZ => Self::new(5, 2, 16, Specials::NanNegativeZero),
            DType::F4E2M1 => Self::new(2, 1, 1, Specials::FiniteOnly),
            _ => return None,
        })
    }

    /// The all-ones exponent field.
    fn top(&self) -> i32 {
        (1 << self.exponent_bits) - 1
    }

    /// The largest finite value.
    pub fn max(&self) -> f64 {
        let m = self.mantissa_bits as i32;
        let (exponent, mantissa) = match self.specials {
            Specials::Ieee => (self.top() - 1, (1 << (m + 1)) - 1),
            // All ones is NaN: the largest mantissa is one less.
            Specials::NanAllOnes => (self.top(), (1 << (m + 1)) - 2),
            Specials::NanNegativeZero | Specials::FiniteOnly => (self.top(), (1 << (m + 1)) - 1),
        };
        f64::from(mantissa) * 2f64.powi(exponent - self.bias - m)
    }

    /// `x` rounded to the nearest value of the format (ties to even). Past the largest
    /// value: infinity, NaN or the largest value, as [`Specials`] says; NaN stays NaN.
    pub fn round(&self, x: f64) -> f64 {
        if x.is_nan() {
            return if self.specials == Specials::FiniteOnly { -0.0 } else { f64::NAN };
        }
        let a = x.abs();
        let rounded = if a.is_infinite() || a == 0.0 {
            a
        } else {
            // The exponent of `a` (f64's field; f64 subnormals are far below every format's
            // smallest value), no less than the format's smallest normal exponent.
            let exponent = ((a.to_bits() >> 52) & 0x7ff) as i32 - 1023;
            let e = exponent.max(1 - self.bias);
            let quantum = 2f64.powi(e - self.mantissa_bits as i32);
            (a / quantum).round_ties_even() * quantum
        };
        let max = self.max();
        let r = if rounded > max {
            match self.specials {
                Specials::Ieee => f64::INFINITY,
                Specials::FiniteOnly => max,
                Specials::NanAllOnes | Specials::NanNegativeZero => return f64::NAN,
            }
        } else {
            rounded
        };
        if r == 0.0 && self.specials == Specials::NanNegativeZero {
            return 0.0;
        }
        r.copysign(x)
    }

    /// The value of the format's bit pattern `bits` (its low `1 + exponent + mantissa` bits).
    pub fn decode(&self, bits: u32) -> f64 {
        let (e, m) = (self.exponent_bits, self.mantissa_bits);
        let negative = (bits >> (e + m)) & 1 == 1;
        let exponent = ((bits >> m) & ((1 << e) - 1)) as i32;
        let mantissa = bits & ((1 << m) - 1);
        let all_ones = mantissa == (1 << m) - 1;
        match self.specials {
            Specials::Ieee if exponent == self.top() => {
                let inf = if negative { f64::NEG_INFINITY } else { f64::INFINITY };
                return if mantissa == 0 { inf } else { f64::NAN };
            }
            Specials::NanAllOnes if exponent == self.top() && all_ones => return f64::NAN,
            Specials::NanNegativeZero if negative && exponent == 0 && mantissa == 0 => {
                return f64::NAN;
            }
            _ => {}
        }
        let m = m as i32;
        let v = if exponent == 0 {
            f64::from(mantissa) * 2f64.powi(1 - self.bias - m)
        } else {
            f64::from(mantissa + (1 << m)) * 2f64.powi(exponent - self.bias - m)
        };
        if negative { -v } else { v }
    }
}

/// How a value becomes a float8 e8m0 (a power of two, `2^(e - 127)`): the exponent of the
/// value's f32 bits, rounded by its fraction (ONNX `Cast`'s `round_mode`).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum E8m0Rounding {
    /// Up whenever there is a fraction (ONNX's default).
    #[default]
    Up,
    /// Down: the fraction dropped.
    Down,
    /// To the nearest (the guard, round and sticky bits).
    Nearest,
}

/// `x` as a float8 e8m0: `2^(e - 127)` for the exponent `e` of `x`'s f32 bits (its sign
/// dropped), rounded by `mode`; NaN and infinities are NaN, and so is a rounding past the
/// largest exponent unless `saturate` holds it there. ONNX's reference conversion.
pub fn e8m0_round(x: f32, saturate: bool, mode: E8m0Rounding) -> f32 {
    let bits = x.to_bits();
    let exponent = (bits >> 23) & 0xff;
    if exponent == 0xff {
        return f32::NAN;
    }
    let up = match mode {
        E8m0Rounding::Up => bits & 0x7f_ffff != 0,
        E8m0Rounding::Down => false,
        E8m0Rounding::Nearest => {
            let (g, r, s) = (bits & 0x40_0000 != 0, bits & 0x20_0000 != 0, bits & 0x1f_ffff != 0);
            g && (r || s || exponent > 0)
        }
    };
    let held_at_max = saturate && exponent == 0xfe;
    e8m0_decode((exponent + u32::from(up && !held_at_max)) as u8)
}

/// The value of float8 e8m0 bits: `2^(bits - 127)`, NaN for `0xff`.
pub fn e8m0_decode(bits: u8) -> f32 {
    if bits == 0xff { f32::NAN } else { 2f64.powi(i32::from(bits) - 127) as f32 }
}

/// `x` rounded to float type `to`: f32's precision for f32, f64 as it is, the nearest value of
/// a narrower format ([`FloatFormat::round`]), float8 e8m0's power of two rounding up and
/// saturating (ONNX's defaults). What a value of type `to` holds after any op.
pub fn round_float(x: f64, to: DType) -> f64 {
    match (to, FloatFormat::of(to)) {
        (DType::F32, _) => f64::from(x as f32),
        (DType::F8E8M0, _) => f64::from(e8m0_round(x as f32, true, E8m0Rounding::Up)),
        (_, Some(format)) => format.round(x),
        _ => x,
    }
}

/// What a `Cast` to float type `to` does before [`round_float`]: with `saturate`, a float8
/// format's values past its range, infinities included, become its largest (ONNX's reference
/// clamps them); to e8m0, the exponent rounds by `round` (and `saturate` holds it at the
/// largest). Any other type: `x` as it is.
pub fn cast_float(x: f64, to: DType, saturate: bool, round: E8m0Rounding) -> f64 {
    let float8 =
        matches!(to, DType::F8E4M3FN | DType::F8E4M3FNUZ | DType::F8E5M2 | DType::F8E5M2FNUZ);
    match (to, FloatFormat::of(to)) {
        (DType::F8E8M0, _) => f64::from(e8m0_round(x as f32, saturate, round)),
        (_, Some(format)) if float8 && saturate && !x.is_nan() => {
            x.clamp(-format.max(), format.max())
        }
        _ => x,
    }
}

/// `v` wrapped to integer type `dtype` (two's complement, as NumPy and PyTorch overflow), as
/// the `i64` that holds it. 64-bit and non-integer types leave it as it is; a u64 is its bit
/// pattern.
pub fn wrap_integer(v: i64, dtype: DType) -> i64 {
    let (bits, signed) = match dtype {
        DType::I32 => (32, true),
        DType::I16 => (16, true),
        DType::I8 => (8, true),
        DType::I4 => (4, true),
        DType::I2 => (2, true),
        DType::U32 => (32, false),
        DType::U16 => (16, false),
        DType::U8 => (8, false),
        DType::U4 => (4, false),
        DType::U2 => (2, false),
        _ => return v,
    };
    // Shift the low `bits` to the top and back: arithmetically to sign-extend, logically not.
    let shift = 64 - bits;
    if signed { (v << shift) >> shift } else { ((v as u64) << shift >> shift) as i64 }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NARROW: [DType; 7] = [
        DType::F16,
        DType::BF16,
        DType::F8E4M3FN,
        DType::F8E4M3FNUZ,
        DType::F8E5M2,
        DType::F8E5M2FNUZ,
        DType::F4E2M1,
    ];

    #[test]
    fn every_bit_pattern_decodes_to_a_value_that_rounds_to_itself() {
        for dtype in NARROW {
            let f = FloatFormat::of(dtype).unwrap();
            let n = 1u32 << (1 + f.exponent_bits + f.mantissa_bits);
            let mut values: Vec<f64> = (0..n).map(|b| f.decode(b)).collect();
            for &v in &values {
                let r = f.round(v);
                assert!(r == v || (r.is_nan() && v.is_nan()), "{dtype}: {v} rounds to {r}");
            }
            // Between two neighbours, the midpoint goes to the one with an even mantissa.
            values.retain(|v| v.is_finite() && *v >= 0.0);
            values.sort_by(f64::total_cmp);
            values.dedup();
            assert_eq!(values.last().copied(), Some(f.max()), "{dtype}");
            for (k, pair) in values.windows(2).enumerate() {
                let mid = (pair[0] + pair[1]) / 2.0;
                let even = if k % 2 == 0 { pair[0] } else { pair[1] };
                assert_eq!(f.round(mid), even, "{dtype}: midpoint of {pair:?}");
                assert_eq!(f.round(pair[0] + (pair[1] - pair[0]) * 0.3), pair[0], "{dtype}");
            }
        }
    }

    #[test]
    fn formats_agree_with_their_published_ranges_and_overflows() {
        let max = |d| FloatFormat::of(d).unwrap().max();
        assert_eq!(max(DType::F16), 65504.0);
        assert_eq!(max(DType::BF16), f64::from(f32::from_bits(0x7f7f_0000)));
        assert_eq!(max(DType::F8E4M3FN), 448.0);
        assert_eq!(max(DType::F8E4M3FNUZ), 240.0);
        assert_eq!(max(DType::F8E5M2), 57344.0);
        assert_eq!(max(DType::F8E5M2FNUZ), 57344.0);
        assert_eq!(max(DType::F4E2M1), 6.0);
        let round = |d, x| FloatFormat::of(d).unwrap().round(x);
        assert_eq!(round(DType::F8E4M3FN, 464.0), 448.0);
        assert!(round(DType::F8E4M3FN, 465.0).is_nan());
        assert_eq!(round(DType::F8E5M2, 1e9), f64::INFINITY);
        assert_eq!(round(DType::F4E2M1, -1e9), -6.0);
        assert!(round(DType::F8E4M3FNUZ, -0.0).is_sign_positive());
        assert!(round(DType::F8E4M3FN, -0.0).is_sign_negative());
    }

    #[test]
    fn e8m0_rounds_by_its_mode_and_saturates() {
        use E8m0Rounding::{Down, Nearest, Up};
        assert_eq!(e8m0_round(1.0, true, Up), 1.0);
        assert_eq!(e8m0_round(1.25, true, Up), 2.0);
        assert_eq!(e8m0_round(1.75, true, Down), 1.0);
        assert_eq!(e8m0_round(1.75, true, Nearest), 2.0);
        assert_eq!(e8m0_round(1.25, true, Nearest), 1.0);
        assert_eq!(e8m0_round(-4.0, true, Up), 4.0);
        let big = f32::from_bits(0x7f40_0000);
        assert_eq!(e8m0_round(big, true, Up), 2f32.powi(127));
        assert!(e8m0_round(big, false, Up).is_nan());
        assert!(e8m0_round(f32::INFINITY, true, Up).is_nan());
        assert_eq!(e8m0_decode(127), 1.0);
    }

    #[test]
    fn integers_wrap_to_their_width() {
        assert_eq!(wrap_integer(-9, DType::I4), 7);
        assert_eq!(wrap_integer(-1, DType::U2), 3);
        assert_eq!(wrap_integer(3, DType::I2), -1);
        assert_eq!(wrap_integer(300, DType::U8), 44);
        assert_eq!(wrap_integer(1 << 40, DType::I32), 0);
        assert_eq!(wrap_integer(-1, DType::U64), -1);
    }
}
