//! Host scalar and element types of the DSL: the Rust types (`f32`, `half::f16`, `u8`, `bool`,
//! …) that stand for IR scalar types, and array elements (a scalar or `[S; N]`, N = 2..4).

use half::f16;
use weft_ir::konst::canon;
use weft_ir::{Const, ScalarType, Type};

/// A Rust type standing for one IR scalar type (DESIGN §2): `bool`, `i8`–`i64`, `u8`–`u64`,
/// `half::f16`, `f32`, `f64`. Values convert to and from canonical lane bits (the
/// interpreter's representation, `weft_ir::Const`).
pub trait Scalar: Copy + Send + Sync + std::fmt::Debug + PartialEq + 'static {
    /// The IR scalar type.
    const SCALAR: ScalarType;
    /// Canonical lane bits of `self`.
    fn to_bits(self) -> u64;
    /// The value with canonical lane bits `bits`.
    fn from_bits(bits: u64) -> Self;
    /// A one-lane constant.
    fn to_const(self) -> Const {
        Const::scalar(Self::SCALAR, self.to_bits())
    }
}

macro_rules! int_scalar {
    ($($t:ty => $s:ident),*) => {$(
        impl Scalar for $t {
            const SCALAR: ScalarType = ScalarType::$s;
            fn to_bits(self) -> u64 {
                canon(ScalarType::$s, self as u64)
            }
            fn from_bits(bits: u64) -> Self {
                bits as $t
            }
        }
    )*};
}
int_scalar!(i8 => I8, i16 => I16, i32 => I32, i64 => I64, u8 => U8, u16 => U16, u32 => U32, u64 => U64);

impl Scalar for bool {
    const SCALAR: ScalarType = ScalarType::Bool;
    fn to_bits(self) -> u64 {
        self as u64
    }
    fn from_bits(bits: u64) -> Self {
        bits & 1 != 0
    }
}

impl Scalar for f16 {
    const SCALAR: ScalarType = ScalarType::F16;
    fn to_bits(self) -> u64 {
        f16::to_bits(self) as u64
    }
    fn from_bits(bits: u64) -> Self {
        f16::from_bits(bits as u16)
    }
}

impl Scalar for f32 {
    const SCALAR: ScalarType = ScalarType::F32;
    fn to_bits(self) -> u64 {
        f32::to_bits(self) as u64
    }
    fn from_bits(bits: u64) -> Self {
        f32::from_bits(bits as u32)
    }
}

impl Scalar for f64 {
    const SCALAR: ScalarType = ScalarType::F64;
    fn to_bits(self) -> u64 {
        f64::to_bits(self)
    }
    fn from_bits(bits: u64) -> Self {
        f64::from_bits(bits)
    }
}

/// An array element on the host: a [`Scalar`] or a short vector `[S; N]` (N = 2, 3, 4),
/// standing for the IR's scalar or tuple type (RapidMind's `Value<N, T>`).
pub trait Elem: Copy + Send + Sync + std::fmt::Debug + PartialEq + 'static {
    /// The scalar type of each lane.
    type Scalar: Scalar;
    /// Tuple lanes (1 for a scalar).
    const LANES: usize;
    /// The IR element type.
    fn ir_type() -> Type {
        let s = <Self::Scalar as Scalar>::SCALAR;
        if Self::LANES == 1 {
            Type::scalar(s)
        } else {
            Type::tuple(s, Self::LANES as u8).expect("2 to 4 lanes")
        }
    }
    /// Lane `l` of `self`.
    fn lane(&self, l: usize) -> Self::Scalar;
    /// The element with lanes `f(0) … f(LANES-1)`.
    fn from_lanes(f: impl FnMut(usize) -> Self::Scalar) -> Self;
}

impl<S: Scalar> Elem for S {
    type Scalar = S;
    const LANES: usize = 1;
    fn lane(&self, _: usize) -> S {
        *self
    }
    fn from_lanes(mut f: impl FnMut(usize) -> S) -> S {
        f(0)
    }
}

macro_rules! vec_elem {
    ($($n:literal),*) => {$(
        impl<S: Scalar> Elem for [S; $n] {
            type Scalar = S;
            const LANES: usize = $n;
            fn lane(&self, l: usize) -> S {
                self[l]
            }
            fn from_lanes(f: impl FnMut(usize) -> S) -> Self {
                std::array::from_fn(f)
            }
        }
    )*};
}
vec_elem!(2, 3, 4);
