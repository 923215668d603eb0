//! Math and geometry on [`Value`]s, as methods and as free functions with the C names
//! (`sqrt`, `exp`, `atan2`, …; RapidMind's and Sh's standard library): each is one IR op,
//! whose lane semantics (DESIGN §3: math functions within 2 ulp, by one shared expansion)
//! are the interpreter's in immediate mode too. `reflect` is built from ops.

use super::record::{self, Raw};
use super::value::{binary, unary, AsValue, Float, IntoValue, Numeric, Value};
use weft_ir::Opcode;

macro_rules! float_unary {
    ($($name:ident => $opc:ident, $doc:literal;)*) => {
        impl<T: Float, const N: usize> Value<T, N> {
            $(
                #[doc = $doc]
                #[track_caller]
                pub fn $name(&self) -> Value<T, N> {
                    unary(Opcode::$opc, &self.raw)
                }
            )*
        }
        $(
            #[doc = $doc]
            #[track_caller]
            pub fn $name<T: Float, const N: usize>(x: impl AsValue<T, N>) -> Value<T, N> {
                let x = x.into_operand();
                unary(Opcode::$opc, &x)
            }
        )*
    };
}

float_unary! {
    sqrt => Sqrt, "Lane-wise square root (correctly rounded).";
    rsqrt => Rsqrt, "Lane-wise `1 / sqrt(x)`.";
    exp => Exp, "Lane-wise `e^x`.";
    exp2 => Exp2, "Lane-wise `2^x`.";
    log => Log, "Lane-wise natural logarithm.";
    log2 => Log2, "Lane-wise base-2 logarithm.";
    sin => Sin, "Lane-wise sine (radians).";
    cos => Cos, "Lane-wise cosine (radians).";
    tan => Tan, "Lane-wise tangent (radians).";
    floor => Floor, "Lane-wise rounding toward −∞.";
    ceil => Ceil, "Lane-wise rounding toward +∞.";
    round => Round, "Lane-wise rounding to nearest, ties away from zero (C99 `round`).";
    trunc => Trunc, "Lane-wise rounding toward zero.";
    normalize => Normalize, "`a / length(a)`, lane by lane (a tuple of floats).";
}

macro_rules! float_binary {
    ($($name:ident($a:ident, $b:ident) => $opc:ident, $doc:literal;)*) => {
        impl<T: Float, const N: usize> Value<T, N> {
            $(
                #[doc = $doc]
                #[track_caller]
                pub fn $name(&self, $b: impl IntoValue<T, N>) -> Value<T, N> {
                    let $b = $b.into_operand();
                    binary(Opcode::$opc, &self.raw, &$b)
                }
            )*
        }
        $(
            #[doc = $doc]
            #[track_caller]
            pub fn $name<T: Float, const N: usize>(
                $a: impl AsValue<T, N>,
                $b: impl AsValue<T, N>,
            ) -> Value<T, N> {
                let ($a, $b) = ($a.into_operand(), $b.into_operand());
                binary(Opcode::$opc, &$a, &$b)
            }
        )*
    };
}

float_binary! {
    pow(x, y) => Pow, "Lane-wise `x^y` (C99 `pow`).";
    atan2(y, x) => Atan2, "Lane-wise `atan2(y, x)` (C99), for `self` = y.";
}

impl<T: Numeric, const N: usize> Value<T, N> {
    /// Lane-wise minimum (floats: NaN-propagating, −0 < +0).
    #[track_caller]
    pub fn min(&self, other: impl IntoValue<T, N>) -> Value<T, N> {
        let o = other.into_operand();
        binary(Opcode::Min, &self.raw, &o)
    }

    /// Lane-wise maximum (floats: NaN-propagating, −0 < +0).
    #[track_caller]
    pub fn max(&self, other: impl IntoValue<T, N>) -> Value<T, N> {
        let o = other.into_operand();
        binary(Opcode::Max, &self.raw, &o)
    }

    /// Lane-wise absolute value (`abs(MIN) = MIN`; floats clear the sign bit).
    #[track_caller]
    pub fn abs(&self) -> Value<T, N> {
        unary(Opcode::Abs, &self.raw)
    }

    /// `min(max(self, lo), hi)`, lane-wise.
    #[track_caller]
    pub fn clamp(&self, lo: impl IntoValue<T, N>, hi: impl IntoValue<T, N>) -> Value<T, N> {
        let (lo, hi) = (lo.into_operand(), hi.into_operand());
        let m: Value<T, N> = binary(Opcode::Max, &self.raw, &lo);
        binary(Opcode::Min, &m.raw, &hi)
    }
}

/// Lane-wise minimum (floats: NaN-propagating, −0 < +0).
#[track_caller]
pub fn min<T: Numeric, const N: usize>(
    a: impl AsValue<T, N>,
    b: impl AsValue<T, N>,
) -> Value<T, N> {
    let (a, b) = (a.into_operand(), b.into_operand());
    binary(Opcode::Min, &a, &b)
}

/// Lane-wise maximum (floats: NaN-propagating, −0 < +0).
#[track_caller]
pub fn max<T: Numeric, const N: usize>(
    a: impl AsValue<T, N>,
    b: impl AsValue<T, N>,
) -> Value<T, N> {
    let (a, b) = (a.into_operand(), b.into_operand());
    binary(Opcode::Max, &a, &b)
}

/// Lane-wise absolute value.
#[track_caller]
pub fn abs<T: Numeric, const N: usize>(a: impl AsValue<T, N>) -> Value<T, N> {
    let a = a.into_operand();
    unary(Opcode::Abs, &a)
}

impl<T: Float, const N: usize> Value<T, N> {
    /// `self * b + c` with one rounding, lane-wise (the only fused op: DESIGN §3 forbids
    /// contraction elsewhere).
    #[track_caller]
    pub fn fma(&self, b: impl IntoValue<T, N>, c: impl IntoValue<T, N>) -> Value<T, N> {
        let (b, c) = (b.into_operand(), c.into_operand());
        ternary(Opcode::Fma, &self.raw, &b, &c)
    }

    /// Dot product of two tuples, summed left to right without fusion (a scalar).
    #[track_caller]
    pub fn dot(&self, other: impl IntoValue<T, N>) -> Value<T, 1> {
        let o = other.into_operand();
        Value::from_raw(record::op(
            Opcode::Dot,
            &[],
            None,
            &[&self.raw, &o],
            Value::<T, 1>::ir_type(),
        ))
    }

    /// `sqrt(dot(self, self))` of a tuple (a scalar).
    #[track_caller]
    pub fn length(&self) -> Value<T, 1> {
        Value::from_raw(record::op(
            Opcode::Length,
            &[],
            None,
            &[&self.raw],
            Value::<T, 1>::ir_type(),
        ))
    }

    /// Reflection of incident direction `self` about normal `n` (unit length):
    /// `self − 2·dot(n, self)·n`, built from `dot`, `mul`, `swizzle` and `sub` (GLSL's
    /// `reflect`).
    #[track_caller]
    pub fn reflect(&self, n: impl IntoValue<T, N>) -> Value<T, N> {
        let n = n.into_operand();
        let d = Value::<T, 1>::from_raw(record::op(
            Opcode::Dot,
            &[],
            None,
            &[&n, &self.raw],
            Value::<T, 1>::ir_type(),
        ));
        let two_d = &d + &d;
        let k: Value<T, N> = two_d.broadcast::<N>();
        let kn: Value<T, N> = binary(Opcode::Mul, &k.raw, &n);
        binary(Opcode::Sub, &self.raw, &kn.raw)
    }
}

impl<T: Float> Value<T, 3> {
    /// Cross product of two 3-tuples.
    #[track_caller]
    pub fn cross(&self, other: impl IntoValue<T, 3>) -> Value<T, 3> {
        let o = other.into_operand();
        binary(Opcode::Cross, &self.raw, &o)
    }
}

#[track_caller]
fn ternary<T: Float, const N: usize>(opcode: Opcode, a: &Raw, b: &Raw, c: &Raw) -> Value<T, N> {
    Value::from_raw(record::op(
        opcode,
        &[],
        None,
        &[a, b, c],
        Value::<T, N>::ir_type(),
    ))
}

/// `a * b + c` with one rounding, lane-wise.
#[track_caller]
pub fn fma<T: Float, const N: usize>(
    a: impl AsValue<T, N>,
    b: impl AsValue<T, N>,
    c: impl AsValue<T, N>,
) -> Value<T, N> {
    let (a, b, c) = (a.into_operand(), b.into_operand(), c.into_operand());
    ternary(Opcode::Fma, &a, &b, &c)
}

/// Dot product of two float tuples (a scalar).
#[track_caller]
pub fn dot<T: Float, const N: usize>(a: impl AsValue<T, N>, b: impl AsValue<T, N>) -> Value<T, 1> {
    let (a, b) = (a.into_operand(), b.into_operand());
    Value::from_raw(record::op(
        Opcode::Dot,
        &[],
        None,
        &[&a, &b],
        Value::<T, 1>::ir_type(),
    ))
}

/// Cross product of two float 3-tuples.
#[track_caller]
pub fn cross<T: Float>(a: impl AsValue<T, 3>, b: impl AsValue<T, 3>) -> Value<T, 3> {
    let (a, b) = (a.into_operand(), b.into_operand());
    binary(Opcode::Cross, &a, &b)
}

/// Length of a float tuple, `sqrt(dot(a, a))`.
#[track_caller]
pub fn length<T: Float, const N: usize>(a: impl AsValue<T, N>) -> Value<T, 1> {
    let a = a.into_operand();
    Value::from_raw(record::op(
        Opcode::Length,
        &[],
        None,
        &[&a],
        Value::<T, 1>::ir_type(),
    ))
}

/// Reflection of `i` about unit normal `n`: `i − 2·dot(n, i)·n` (see [`Value::reflect`]).
#[track_caller]
pub fn reflect<T: Float, const N: usize>(
    i: impl AsValue<T, N>,
    n: impl AsValue<T, N>,
) -> Value<T, N> {
    let i = Value::<T, N>::from_raw(super::value::copy_of(&i.into_operand()));
    i.reflect(n)
}
