//! Constants: typed scalar and tuple literals stored as raw bits, with exact text round-trip.

use crate::types::{ScalarType, Type};
use half::f16;
use std::fmt;

/// A scalar or tuple constant. Each lane holds the value's bits zero-extended to 64 bits
/// (`i8 -1` is `0xff`, `f32 1.0` is `0x3f80_0000`, `true` is `1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Const {
    /// The scalar or tuple type.
    pub ty: Type,
    /// Lane bits; lanes past the type's lane count are zero.
    pub lanes: [u64; 4],
}

/// Rounds an f64 to binary16, correctly (round to nearest, ties to even), keeping subnormals.
/// (`half::f16::from_f64` rounds twice and can be off by one ulp; `from_f32` is avoided too,
/// so that every conversion to f16 in weft goes through this one function.)
pub fn f16_from_f64(x: f64) -> f16 {
    let sign: u16 = if x.is_sign_negative() { 0x8000 } else { 0 };
    if x.is_nan() {
        return f16::from_bits(sign | 0x7e00);
    }
    let a = x.abs();
    if a >= 65520.0 {
        // At or past the midpoint between 65504 and 2^16: ties go to the even (infinite) side.
        return f16::from_bits(sign | 0x7c00);
    }
    let min_normal = 2f64.powi(-14);
    if a < min_normal {
        // Subnormal (or zero): units of 2^-24; 1024 units carry into the smallest normal.
        let q = (a * 2f64.powi(24)).round_ties_even();
        return f16::from_bits(sign | q as u16);
    }
    let e = ((a.to_bits() >> 52) as i32 & 0x7ff) - 1023; // -14..=15
    let q = (a * 2f64.powi(10 - e) - 1024.0).round_ties_even(); // 0..=1024, exact before rounding
    let bits = (((e + 15) as u32) << 10) + q as u32; // q = 1024 carries into the exponent
    f16::from_bits(sign | bits as u16)
}

/// Masks `bits` to the width of `s` (the canonical lane representation).
#[inline(always)]
pub fn canon(s: ScalarType, bits: u64) -> u64 {
    match s.bits() {
        64 => bits,
        1 => bits & 1,
        w => bits & ((1u64 << w) - 1),
    }
}

/// Sign-extends a canonical lane of a signed type to i64 (zero-extends unsigned ones).
#[inline(always)]
pub fn lane_i64(s: ScalarType, bits: u64) -> i64 {
    match s {
        ScalarType::I8 => bits as u8 as i8 as i64,
        ScalarType::I16 => bits as u16 as i16 as i64,
        ScalarType::I32 => bits as u32 as i32 as i64,
        _ => bits as i64,
    }
}

/// The value of a float lane as f64 (exact for every float type).
#[inline(always)]
pub fn lane_f64(s: ScalarType, bits: u64) -> f64 {
    match s {
        ScalarType::F16 => f16::from_bits(bits as u16).to_f64(),
        ScalarType::F32 => f32::from_bits(bits as u32) as f64,
        _ => f64::from_bits(bits),
    }
}

impl Const {
    /// A constant of scalar or tuple type `ty` from lane bits (missing lanes are zero).
    pub fn from_lanes(ty: Type, lanes: &[u64]) -> Const {
        let mut l = [0u64; 4];
        let s = ty.elem_scalar();
        for (d, &b) in l.iter_mut().zip(lanes) {
            *d = canon(s, b);
        }
        Const { ty, lanes: l }
    }

    /// A scalar constant.
    pub fn scalar(s: ScalarType, bits: u64) -> Const {
        Const::from_lanes(Type::scalar(s), &[bits])
    }

    /// An `f32` constant.
    pub fn f32(x: f32) -> Const {
        Const::scalar(ScalarType::F32, x.to_bits() as u64)
    }

    /// An `f64` constant.
    pub fn f64(x: f64) -> Const {
        Const::scalar(ScalarType::F64, x.to_bits())
    }

    /// An `i32` constant.
    pub fn i32(x: i32) -> Const {
        Const::scalar(ScalarType::I32, x as u32 as u64)
    }

    /// A `bool` constant.
    pub fn bool(x: bool) -> Const {
        Const::scalar(ScalarType::Bool, x as u64)
    }

    /// The zero value of a scalar or tuple type (all lanes zero bits).
    pub fn zero(ty: Type) -> Const {
        Const { ty, lanes: [0; 4] }
    }

    /// Number of lanes (1 for a scalar).
    pub fn lane_count(&self) -> usize {
        self.ty.lanes().map_or(1, |(_, n)| n as usize)
    }

    /// The lanes in use.
    pub fn lane_bits(&self) -> &[u64] {
        &self.lanes[..self.lane_count()]
    }
}

/// Host scalars and arrays of 2 to 4 of them as constants (`Const::from(2.5f32)`,
/// `Const::from([0u8, 0, 0, 255])`), e.g. for [`crate::Boundary::constant`].
macro_rules! const_from {
    ($($t:ty => $s:ident, $bits:expr;)*) => {$(
        impl From<$t> for Const {
            fn from(x: $t) -> Const {
                let bits: fn($t) -> u64 = $bits;
                Const::scalar(ScalarType::$s, bits(x))
            }
        }
        impl<const N: usize> From<[$t; N]> for Const {
            /// A tuple of N = 2 to 4 lanes (N = 1: a scalar; lanes past 4 are dropped, as
            /// no type has them).
            fn from(x: [$t; N]) -> Const {
                let bits: fn($t) -> u64 = $bits;
                let lanes: Vec<u64> = x.iter().map(|&v| bits(v)).collect();
                let s = ScalarType::$s;
                let ty = Type::tuple(s, N.clamp(1, 4) as u8).unwrap_or(Type::scalar(s));
                Const::from_lanes(ty, &lanes)
            }
        }
    )*};
}

const_from! {
    bool => Bool, |x| x as u64;
    i8 => I8, |x| x as u8 as u64;
    i16 => I16, |x| x as u16 as u64;
    i32 => I32, |x| x as u32 as u64;
    i64 => I64, |x| x as u64;
    u8 => U8, |x| x as u64;
    u16 => U16, |x| x as u64;
    u32 => U32, |x| x as u64;
    u64 => U64, |x| x;
    f16 => F16, |x| x.to_bits() as u64;
    f32 => F32, |x| x.to_bits() as u64;
    f64 => F64, |x| x.to_bits();
}

/// Formats one lane as a literal that parses back to the same bits.
pub fn fmt_lane(f: &mut impl fmt::Write, s: ScalarType, bits: u64) -> fmt::Result {
    match s {
        ScalarType::Bool => write!(f, "{}", bits != 0),
        ScalarType::I8 | ScalarType::I16 | ScalarType::I32 | ScalarType::I64 => {
            write!(f, "{}", lane_i64(s, bits))
        }
        ScalarType::U8 | ScalarType::U16 | ScalarType::U32 | ScalarType::U64 => {
            write!(f, "{bits}")
        }
        ScalarType::F16 => {
            let x = f16::from_bits(bits as u16);
            if x.is_nan() {
                fmt_nan(f, bits, f16::NAN.to_bits() as u64, 15)
            } else {
                fmt_float(f, x.to_f32() as f64, shortest_f16(x))
            }
        }
        ScalarType::F32 => {
            let x = f32::from_bits(bits as u32);
            if x.is_nan() {
                fmt_nan(f, bits, f32::NAN.to_bits() as u64, 31)
            } else {
                fmt_float(f, x as f64, format!("{x:?}"))
            }
        }
        ScalarType::F64 => {
            let x = f64::from_bits(bits);
            if x.is_nan() {
                fmt_nan(f, bits, f64::NAN.to_bits(), 63)
            } else {
                fmt_float(f, x, format!("{x:?}"))
            }
        }
    }
}

/// The shortest decimal that parses back (as [`parse_lane`] does: to f64, then rounded once
/// to f16) to `x`.
fn shortest_f16(x: f16) -> String {
    let v = x.to_f64();
    for digits in 0..9 {
        let y: f64 = format!("{v:.digits$e}").parse().unwrap_or(v);
        if f16_from_f64(y) == x {
            return format!("{y:?}");
        }
    }
    format!("{v:?}")
}

fn fmt_float(f: &mut impl fmt::Write, x: f64, shortest: String) -> fmt::Result {
    if x.is_infinite() {
        f.write_str(if x > 0.0 { "inf" } else { "-inf" })
    } else {
        f.write_str(&shortest)
    }
}

fn fmt_nan(f: &mut impl fmt::Write, bits: u64, canonical: u64, sign_bit: u32) -> fmt::Result {
    if bits == canonical {
        f.write_str("nan")
    } else if bits == canonical | (1 << sign_bit) {
        f.write_str("-nan")
    } else {
        write!(f, "nan:{bits:#x}")
    }
}

impl fmt::Display for Const {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.ty.elem_scalar();
        let lanes = self.lane_bits();
        if lanes.len() == 1 {
            return fmt_lane(f, s, lanes[0]);
        }
        f.write_str("(")?;
        for (i, &b) in lanes.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            fmt_lane(f, s, b)?;
        }
        f.write_str(")")
    }
}

/// Parses one lane literal for scalar type `s`: `true`/`false`, a decimal or `0x` hex
/// integer (range-checked), a decimal float, `inf`, `-inf`, `nan`, `-nan`, or
/// `nan:0xBITS` (a NaN with an explicit bit pattern).
/// `neg` says a `-` sign token preceded `text`. Errors are messages for the caller to locate.
pub fn parse_lane(s: ScalarType, neg: bool, text: &str) -> Result<u64, String> {
    let bad = || {
        format!(
            "`{}{text}` is not a valid {s} literal",
            if neg { "-" } else { "" }
        )
    };
    match s {
        ScalarType::Bool => match (neg, text) {
            (false, "true") => Ok(1),
            (false, "false") => Ok(0),
            _ => Err(bad()),
        },
        _ if s.is_int() => {
            let mag: u128 = if let Some(h) = text.strip_prefix("0x") {
                u128::from_str_radix(&h.replace('_', ""), 16).map_err(|_| bad())?
            } else {
                text.replace('_', "").parse::<u128>().map_err(|_| bad())?
            };
            let w = s.bits();
            if s.is_signed_int() {
                let v: i128 = if neg { -(mag as i128) } else { mag as i128 };
                let lo = -(1i128 << (w - 1));
                let hi = (1i128 << (w - 1)) - 1;
                if v < lo || v > hi || mag > u64::MAX as u128 * 2 {
                    return Err(format!("{}: out of range for {s}", bad()));
                }
                Ok(canon(s, v as i64 as u64))
            } else {
                if neg && mag != 0 {
                    return Err(format!("{}: negative value for unsigned {s}", bad()));
                }
                if mag > (u64::MAX >> (64 - w)) as u128 {
                    return Err(format!("{}: out of range for {s}", bad()));
                }
                Ok(mag as u64)
            }
        }
        _ => {
            let sign_bit = s.bits() - 1;
            if let Some(h) = text.strip_prefix("nan:0x") {
                let b = u64::from_str_radix(h, 16).map_err(|_| bad())?;
                let b = if neg { b | (1 << sign_bit) } else { b };
                if canon(s, b) != b || !lane_f64(s, b).is_nan() {
                    return Err(format!("{}: not a {s} NaN bit pattern", bad()));
                }
                return Ok(b);
            }
            let x: f64 = match text {
                "inf" => f64::INFINITY,
                "nan" => f64::NAN,
                _ => {
                    let ok = text.bytes().all(|c| {
                        c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E' | b'+' | b'-')
                    }) && text.as_bytes().first().is_some_and(u8::is_ascii_digit);
                    if !ok {
                        return Err(bad());
                    }
                    // Parse at the target precision directly, so decimals round once.
                    return Ok(match s {
                        ScalarType::F32 => {
                            let v: f32 = text.parse().map_err(|_| bad())?;
                            (if neg { -v } else { v }).to_bits() as u64
                        }
                        ScalarType::F64 => {
                            let v: f64 = text.parse().map_err(|_| bad())?;
                            (if neg { -v } else { v }).to_bits()
                        }
                        _ => {
                            // Decimal -> f64 (correctly rounded) -> f16 (correctly rounded).
                            let v = f16_from_f64(text.parse::<f64>().map_err(|_| bad())?);
                            (if neg { -v } else { v }).to_bits() as u64
                        }
                    });
                }
            };
            let x = if neg { -x } else { x };
            Ok(match s {
                ScalarType::F16 => f16_from_f64(x).to_bits() as u64,
                ScalarType::F32 => (x as f32).to_bits() as u64,
                _ => x.to_bits(),
            })
        }
    }
}

/// The identity of built-in combiner `op` on `s` as lane bits (`x ⊕ e = x` bit for bit, NaN
/// payloads aside): −0 for float sums (`+0 + −0` is `+0`, `−0 + −0` is `−0`), 0 for integer
/// sums, 1 for products, +∞ / the largest integer for `min` (and `lt`, arg_min's), −∞ / the
/// smallest for `max`, NaN for float `arg_min`/`arg_max` values (NaN loses to every number).
pub fn identity_bits(op: crate::Opcode, s: ScalarType) -> u64 {
    let (sign, one, inf, nan): (u64, u64, u64, u64) = match s {
        ScalarType::F16 => (0x8000, 0x3c00, 0x7c00, 0x7e00),
        ScalarType::F32 => (0x8000_0000, 0x3f80_0000, 0x7f80_0000, 0x7fc0_0000),
        ScalarType::F64 => (1 << 63, 0x3ff0 << 48, 0x7ff0 << 48, 0x7ff8 << 48),
        _ => {
            let w = s.bits();
            let (lo, hi) = if s.is_signed_int() {
                ((-1i64 << (w - 1)) as u64, (1u64 << (w - 1)) - 1)
            } else {
                (0, u64::MAX >> (64 - w))
            };
            return canon(
                s,
                match op {
                    crate::Opcode::Add => 0,
                    crate::Opcode::Mul => 1,
                    crate::Opcode::Min | crate::Opcode::Lt => hi,
                    _ => lo,
                },
            );
        }
    };
    match op {
        crate::Opcode::Add => sign,
        crate::Opcode::Mul => one,
        crate::Opcode::Min => inf,
        crate::Opcode::Max => inf | sign,
        _ => nan,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_rounding_is_correct_at_midpoints() {
        // Every pair of adjacent finite f16 values: the midpoint goes to the even one, a hair
        // above it to the upper, a hair below to the lower; each value converts to itself.
        for b in 0..0x7bffu16 {
            let lo = f16::from_bits(b).to_f64();
            let hi = f16::from_bits(b + 1).to_f64();
            let mid = (lo + hi) / 2.0;
            let even = if b % 2 == 0 { b } else { b + 1 };
            assert_eq!(f16_from_f64(mid).to_bits(), even, "mid {mid:e}");
            assert_eq!(f16_from_f64(-mid).to_bits(), even | 0x8000, "-mid {mid:e}");
            assert_eq!(f16_from_f64(mid + (hi - lo) * 1e-6).to_bits(), b + 1);
            assert_eq!(f16_from_f64(mid - (hi - lo) * 1e-6).to_bits(), b);
            assert_eq!(f16_from_f64(lo).to_bits(), b);
        }
        assert_eq!(f16_from_f64(65519.99).to_bits(), 0x7bff);
        assert_eq!(f16_from_f64(65520.0).to_bits(), 0x7c00);
        assert_eq!(
            f16_from_f64(1.0 + 3.0 / 2048.0 - 3.0 / 2147483648.0).to_bits(),
            0x3c01
        );
        assert_eq!(f16_from_f64(2f64.powi(-25)).to_bits(), 0); // tie to even (zero)
        assert_eq!(f16_from_f64(2f64.powi(-25) * 3.0).to_bits(), 2); // 1.5 units: tie to even
        assert_eq!(f16_from_f64(-0.0).to_bits(), 0x8000);
    }
}
