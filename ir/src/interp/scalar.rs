//! Lane-level semantics of DESIGN §3: every arithmetic, bitwise, comparison, conversion and
//! math op on one lane of canonical bits (see [`crate::konst::canon`]). The ten math
//! functions (exp … rsqrt) are defined by their expansion into these ops
//! ([`crate::passes::math`]); [`float_op`] evaluates them through it.

use crate::konst::{canon, f16_from_f64, lane_f64, lane_i64};
use crate::opcode::Opcode;
use crate::types::ScalarType;
use half::f16;

/// IEEE 754-2019 `minimum`: NaN if either is NaN, and -0 < +0.
fn fminimum<T: Copy + PartialOrd + Float>(a: T, b: T) -> T {
    if a.nan() || b.nan() {
        T::qnan()
    } else if a == b {
        if a.neg_sign() {
            a
        } else {
            b
        }
    } else if a < b {
        a
    } else {
        b
    }
}

/// IEEE 754-2019 `maximum`: NaN if either is NaN, and +0 > -0.
fn fmaximum<T: Copy + PartialOrd + Float>(a: T, b: T) -> T {
    if a.nan() || b.nan() {
        T::qnan()
    } else if a == b {
        if a.neg_sign() {
            b
        } else {
            a
        }
    } else if a > b {
        a
    } else {
        b
    }
}

trait Float {
    fn nan(self) -> bool;
    fn neg_sign(self) -> bool;
    fn qnan() -> Self;
}
impl Float for f32 {
    fn nan(self) -> bool {
        self.is_nan()
    }
    fn neg_sign(self) -> bool {
        self.is_sign_negative()
    }
    fn qnan() -> f32 {
        f32::NAN
    }
}
impl Float for f64 {
    fn nan(self) -> bool {
        self.is_nan()
    }
    fn neg_sign(self) -> bool {
        self.is_sign_negative()
    }
    fn qnan() -> f64 {
        f64::NAN
    }
}

/// A binary integer or bool op (add sub mul div rem min max and or xor shl shr).
#[inline(always)]
pub fn int_binary(op: Opcode, s: ScalarType, a: u64, b: u64) -> u64 {
    macro_rules! go {
        ($t:ty, $u:ty) => {{
            let (x, y) = (a as $t, b as $t);
            let r: $t = match op {
                Opcode::Add => x.wrapping_add(y),
                Opcode::Sub => x.wrapping_sub(y),
                Opcode::Mul => x.wrapping_mul(y),
                // RISC-V: x/0 = all ones, MIN/-1 = MIN; x%0 = x, MIN%-1 = 0.
                Opcode::Div => {
                    if y == 0 {
                        !0
                    } else {
                        x.wrapping_div(y)
                    }
                }
                Opcode::Rem => {
                    if y == 0 {
                        x
                    } else {
                        x.wrapping_rem(y)
                    }
                }
                Opcode::Min => x.min(y),
                Opcode::Max => x.max(y),
                Opcode::And => x & y,
                Opcode::Or => x | y,
                Opcode::Xor => x ^ y,
                // wrapping_shl/shr take the amount modulo the bit width.
                Opcode::Shl => x.wrapping_shl(y as u32),
                Opcode::Shr => x.wrapping_shr(y as u32),
                _ => 0,
            };
            r as $u as u64
        }};
    }
    match s {
        ScalarType::Bool => canon(
            s,
            match op {
                Opcode::And | Opcode::Min => a & b,
                Opcode::Or | Opcode::Max => a | b,
                Opcode::Xor => a ^ b,
                _ => 0,
            },
        ),
        ScalarType::I8 => go!(i8, u8),
        ScalarType::I16 => go!(i16, u16),
        ScalarType::I32 => go!(i32, u32),
        ScalarType::I64 => go!(i64, u64),
        ScalarType::U8 => go!(u8, u8),
        ScalarType::U16 => go!(u16, u16),
        ScalarType::U32 => go!(u32, u32),
        _ => go!(u64, u64),
    }
}

/// A unary integer or bool op (neg abs not).
#[inline(always)]
pub fn int_unary(op: Opcode, s: ScalarType, a: u64) -> u64 {
    let r = match op {
        Opcode::Not => !a,
        Opcode::Neg => a.wrapping_neg(),
        Opcode::Abs if s.is_signed_int() => lane_i64(s, a).wrapping_abs() as u64,
        _ => a,
    };
    canon(s, r)
}

/// An integer or bool comparison.
#[inline(always)]
pub fn int_compare(op: Opcode, s: ScalarType, a: u64, b: u64) -> bool {
    let ord = if s.is_signed_int() {
        lane_i64(s, a).cmp(&lane_i64(s, b))
    } else {
        a.cmp(&b)
    };
    match op {
        Opcode::Eq => ord.is_eq(),
        Opcode::Ne => ord.is_ne(),
        Opcode::Lt => ord.is_lt(),
        Opcode::Le => ord.is_le(),
        Opcode::Gt => ord.is_gt(),
        _ => ord.is_ge(),
    }
}

/// A float comparison (ordered; `ne` is true when either operand is NaN).
#[inline(always)]
pub fn float_compare(op: Opcode, s: ScalarType, a: u64, b: u64) -> bool {
    let (x, y) = (lane_f64(s, a), lane_f64(s, b));
    match op {
        Opcode::Eq => x == y,
        Opcode::Ne => x != y,
        Opcode::Lt => x < y,
        Opcode::Le => x <= y,
        Opcode::Gt => x > y,
        _ => x >= y,
    }
}

macro_rules! float_op_fn {
    ($name:ident, $t:ty) => {
        /// One basic float op on native values (arity 1 to 3; unused operands are ignored).
        #[inline(always)]
        fn $name(op: Opcode, x: $t, y: $t, z: $t) -> $t {
            match op {
                Opcode::Add => x + y,
                Opcode::Sub => x - y,
                Opcode::Mul => x * y,
                Opcode::Div => x / y,
                Opcode::Rem => x % y,
                Opcode::Neg => -x,
                Opcode::Abs => x.abs(),
                Opcode::Min => fminimum(x, y),
                Opcode::Max => fmaximum(x, y),
                Opcode::Fma => x.mul_add(y, z),
                Opcode::Sqrt => x.sqrt(),
                Opcode::Floor => x.floor(),
                Opcode::Ceil => x.ceil(),
                Opcode::Round => x.round(),
                Opcode::Trunc => x.trunc(),
                _ => <$t>::NAN,
            }
        }
    };
}

float_op_fn!(f32_op, f32);
float_op_fn!(f64_op, f64);

/// Correctly rounded binary16 `x*y + z`: the exact product is an f64; the sum is rounded
/// to f64 with round-to-odd (TwoSum error term), after which rounding to f16 is correct.
fn f16_fma(x: f16, y: f16, z: f16) -> f16 {
    let p = x.to_f64() * y.to_f64(); // exact: 11+11 significant bits
    let c = z.to_f64();
    let s = p + c;
    if !s.is_finite() {
        return f16_from_f64(s);
    }
    let bb = s - p;
    let e = (p - (s - bb)) + (c - bb);
    let mut bits = s.to_bits();
    if e != 0.0 && s != 0.0 {
        if (e > 0.0) != (s > 0.0) {
            bits -= 1; // toward zero
        }
        bits |= 1; // round to odd
    }
    f16_from_f64(f64::from_bits(bits))
}

/// A float op of arity 1..3 (arithmetic, rounding, sqrt and the math functions). The math
/// functions (exp … rsqrt) are evaluated by their expansion ([`crate::passes::math::eval`]),
/// bit for bit what expanded IR computes; everything else is [`float_basic`].
pub fn float_op(op: Opcode, s: ScalarType, a: u64, b: u64, c: u64) -> u64 {
    if crate::passes::math::is_math_function(op) {
        return crate::passes::math::eval(op, s, a, b);
    }
    float_basic(op, s, a, b, c)
}

/// A basic float op of arity 1..3 (add sub mul div rem neg abs min max fma sqrt floor ceil
/// round trunc); f16 is computed in f32 and rounded (exact for + − × ÷ √), except `fma`,
/// which is rounded once. Math functions give NaN here (see [`float_op`]).
#[inline(always)]
pub fn float_basic(op: Opcode, s: ScalarType, a: u64, b: u64, c: u64) -> u64 {
    match s {
        ScalarType::F16 => {
            let h = |x: u64| f16::from_bits(x as u16);
            let r = match op {
                Opcode::Fma => f16_fma(h(a), h(b), h(c)),
                Opcode::Neg => -h(a),
                Opcode::Abs => f16::from_bits(a as u16 & 0x7fff),
                Opcode::Min => f16_from_f64(fminimum(h(a).to_f32(), h(b).to_f32()) as f64),
                Opcode::Max => f16_from_f64(fmaximum(h(a).to_f32(), h(b).to_f32()) as f64),
                _ => f16_from_f64(f32_op(op, h(a).to_f32(), h(b).to_f32(), 0.0) as f64),
            };
            r.to_bits() as u64
        }
        ScalarType::F32 => {
            let f = |x: u64| f32::from_bits(x as u32);
            f32_op(op, f(a), f(b), f(c)).to_bits() as u64
        }
        _ => f64_op(op, f64::from_bits(a), f64::from_bits(b), f64::from_bits(c)).to_bits(),
    }
}

/// Converts one lane from `from` to `to` (DESIGN §3): integers wrap; float→int saturates
/// with NaN→0; int→float and float→float round to nearest even; bool is 0/1 and `x != 0`.
#[inline(always)]
pub fn cast(from: ScalarType, to: ScalarType, a: u64) -> u64 {
    if from == to {
        return a;
    }
    if to == ScalarType::Bool {
        return if from.is_float() {
            (lane_f64(from, a) != 0.0) as u64
        } else {
            (a != 0) as u64
        };
    }
    if from.is_float() {
        let x = lane_f64(from, a);
        return match to {
            ScalarType::I8 => x as i8 as u8 as u64,
            ScalarType::I16 => x as i16 as u16 as u64,
            ScalarType::I32 => x as i32 as u32 as u64,
            ScalarType::I64 => x as i64 as u64,
            ScalarType::U8 => x as u8 as u64,
            ScalarType::U16 => x as u16 as u64,
            ScalarType::U32 => x as u32 as u64,
            ScalarType::U64 => x as u64,
            ScalarType::F16 => f16_from_f64(x).to_bits() as u64,
            ScalarType::F32 => (x as f32).to_bits() as u64,
            _ => x.to_bits(),
        };
    }
    // From an integer or bool: its exact value as i128.
    let v: i128 = if from.is_signed_int() {
        lane_i64(from, a) as i128
    } else {
        a as i128
    };
    match to {
        ScalarType::F16 => {
            // |v| < 2^53 converts to f64 exactly; larger values are beyond f16's range.
            f16_from_f64(v as f64).to_bits() as u64
        }
        ScalarType::F32 => {
            let f = if from.is_signed_int() {
                v as i64 as f32
            } else {
                v as u64 as f32
            };
            f.to_bits() as u64
        }
        ScalarType::F64 => {
            let f = if from.is_signed_int() {
                v as i64 as f64
            } else {
                v as u64 as f64
            };
            f.to_bits()
        }
        _ => canon(to, v as u64),
    }
}
