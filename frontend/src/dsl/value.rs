//! `Value<T, N>`: RapidMind's `Value<N, T>` (McCool et al., "Data-Parallel Programming on
//! the Cell BE and the GPU using the RapidMind Development Platform", §"Values"): a scalar
//! (N = 1) or a short vector of N = 2..4 lanes, recorded into a program while
//! [`Program::record`](super::Program::record) runs and computed at once otherwise.

use super::record::{self, Raw, Repr, Top};
use crate::error::{Error, Result};
use crate::scalar::Scalar;
use half::f16;
use std::fmt;
use std::marker::PhantomData;
use std::panic::Location;
use weft_ir::{Const, Opcode, Type};

/// A scalar (`N = 1`, the IR scalar type `T`) or tuple (`N = 2..4`, the IR type `<N x T>`)
/// value of the DSL — RapidMind's `Value<N, T>`.
///
/// **While recording** ([`Program::record`](super::Program::record)), a value stands for a
/// value of the program being recorded: every operation on it appends IR, and it behaves as
/// a variable: [`Value::assign`] and the compound operators (`+=`, …) redefine it, also
/// inside [`if_`](super::if_) and loops, whose results the builder merges (SSA
/// construction). [`Clone`] copies the current value (later assignments to either do not
/// affect the other), like RapidMind's copy constructor.
///
/// **Outside recording** (immediate mode), a value is a constant and every operation
/// computes at once with the interpreter's lane semantics (DESIGN §3), bit for bit what a
/// recorded program computes. [`Value::get`] and [`Value::to_array`] give the host value.
/// A value made outside recording and used while recording becomes a constant of the
/// program.
///
/// Misuse while recording (a value of another recording, a value used after the region it
/// was made in ended, a lane out of range) is recorded and makes `Program::record` return
/// an [`Error`] naming the line; in immediate mode the result carries the error, which
/// `get`/`to_array` return.
///
/// Operators: `+ - * / %` (numeric), unary `-`, `& | ^ !` (integers and bool), `<< >>`
/// (integers), with another value (by value or reference), a host scalar (broadcast to all
/// lanes) or a [`Uniform`](super::Uniform); compound assignments `+= -= *= /= %= &= |= ^=
/// <<= >>=`. Comparisons are methods ([`Value::lt`] …) giving `Value<bool, N>`.
pub struct Value<T: Scalar, const N: usize> {
    pub(crate) raw: Raw,
    _t: PhantomData<fn() -> T>,
}

/// One `f32`.
pub type Value1f = Value<f32, 1>;
/// Two `f32` lanes (`<2 x f32>`).
pub type Value2f = Value<f32, 2>;
/// Three `f32` lanes (`<3 x f32>`): points, vectors, normals, colours.
pub type Value3f = Value<f32, 3>;
/// Four `f32` lanes (`<4 x f32>`).
pub type Value4f = Value<f32, 4>;
/// One `f64`.
pub type Value1d = Value<f64, 1>;
/// Two `f64` lanes.
pub type Value2d = Value<f64, 2>;
/// Three `f64` lanes.
pub type Value3d = Value<f64, 3>;
/// Four `f64` lanes.
pub type Value4d = Value<f64, 4>;
/// One `f16` (`half::f16`).
pub type Value1h = Value<f16, 1>;
/// Two `f16` lanes.
pub type Value2h = Value<f16, 2>;
/// Three `f16` lanes.
pub type Value3h = Value<f16, 3>;
/// Four `f16` lanes.
pub type Value4h = Value<f16, 4>;
/// One `i32`.
pub type Value1i = Value<i32, 1>;
/// Two `i32` lanes (2-D coordinates).
pub type Value2i = Value<i32, 2>;
/// Three `i32` lanes (3-D coordinates).
pub type Value3i = Value<i32, 3>;
/// Four `i32` lanes.
pub type Value4i = Value<i32, 4>;
/// One `u32`.
pub type Value1ui = Value<u32, 1>;
/// Two `u32` lanes.
pub type Value2ui = Value<u32, 2>;
/// Three `u32` lanes.
pub type Value3ui = Value<u32, 3>;
/// Four `u32` lanes.
pub type Value4ui = Value<u32, 4>;
/// One `u8`.
pub type Value1ub = Value<u8, 1>;
/// Two `u8` lanes.
pub type Value2ub = Value<u8, 2>;
/// Three `u8` lanes (RGB pixels).
pub type Value3ub = Value<u8, 3>;
/// Four `u8` lanes (RGBA pixels).
pub type Value4ub = Value<u8, 4>;
/// One `bool`.
pub type Value1bool = Value<bool, 1>;
/// Two `bool` lanes.
pub type Value2bool = Value<bool, 2>;
/// Three `bool` lanes.
pub type Value3bool = Value<bool, 3>;
/// Four `bool` lanes.
pub type Value4bool = Value<bool, 4>;

/// Scalar types with arithmetic (`+ - * / %`, `min`, `max`, `abs`, order comparisons):
/// the integers and the floats.
pub trait Numeric: Scalar {}
/// IEEE float types (`f16`, `f32`, `f64`): math functions and geometry.
pub trait Float: Numeric {}
/// Integer and bool types: bitwise `& | ^ !`.
pub trait Bits: Scalar {}
/// Integer types: shifts `<< >>`.
pub trait Int: Numeric + Bits {}

macro_rules! mark {
    ($tr:ident: $($t:ty),*) => {$( impl $tr for $t {} )*};
}
mark!(Numeric: i8, i16, i32, i64, u8, u16, u32, u64, f16, f32, f64);
mark!(Float: f16, f32, f64);
mark!(Bits: bool, i8, i16, i32, i64, u8, u16, u32, u64);
mark!(Int: i8, i16, i32, i64, u8, u16, u32, u64);

/// A DSL value type (`Value<T, N>`), for generic interface declarations such as
/// [`In::<Value3f>::new()`](super::In::new) and [`Param::uniform`](super::Param::uniform).
pub trait ValueType: Sized {
    /// The lane scalar type.
    type Scalar: Scalar;
    /// Lanes (1 for a scalar).
    const LANES: usize;
    /// The IR type: `T` or `<N x T>`.
    fn ir_type() -> Type;
    #[doc(hidden)]
    fn from_raw(raw: Raw) -> Self;
    #[doc(hidden)]
    fn raw(&self) -> &Raw;
}

impl<T: Scalar, const N: usize> ValueType for Value<T, N> {
    type Scalar = T;
    const LANES: usize = N;
    fn ir_type() -> Type {
        Value::<T, N>::ir_type()
    }
    fn from_raw(raw: Raw) -> Self {
        Value::from_raw(raw)
    }
    fn raw(&self) -> &Raw {
        &self.raw
    }
}

/// Anything usable where a `Value<T, N>` operand is expected: a value (moved or borrowed),
/// a host scalar `T` (broadcast to the `N` lanes), or a host [`Uniform`](super::Uniform)
/// (captured as a uniform input of the program being recorded, DESIGN §4 loose binding).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be used as an operand of type `Value<{T}, {N}>`",
    label = "expected a `Value<{T}, {N}>`, a `{T}`, or a `Uniform` of `{T}`",
    note = "operands of one op have one scalar type: convert with `.cast::<{T}>()`, or write \
            the literal as a `{T}` (e.g. `1.0` for a float); a one-lane value broadcasts to a \
            tuple's lanes"
)]
pub trait IntoValue<T: Scalar, const N: usize> {
    #[doc(hidden)]
    fn into_operand(self) -> Raw;
}

/// An operand of exactly the type `Value<T, N>` (no broadcasting of scalar values): what
/// free functions ([`sqrt`](super::sqrt), [`select`], …) and [`Out::named`](super::Out)
/// take, so that the argument determines `N`. Implemented by `Value<T, N>`, `&Value<T, N>`,
/// host scalars `T` (broadcast constants) and host uniforms of that type.
pub trait AsValue<T: Scalar, const N: usize>: IntoValue<T, N> {}

impl<T: Scalar, const N: usize> AsValue<T, N> for Value<T, N> {}
impl<T: Scalar, const N: usize> AsValue<T, N> for &Value<T, N> {}
impl<T: Scalar, const N: usize> AsValue<T, N> for T {}

impl<T: Scalar, const N: usize> IntoValue<T, N> for Value<T, N> {
    fn into_operand(self) -> Raw {
        self.raw
    }
}

impl<T: Scalar, const N: usize> IntoValue<T, N> for &Value<T, N> {
    fn into_operand(self) -> Raw {
        self.raw.alias()
    }
}

impl<T: Scalar, const N: usize> IntoValue<T, N> for T {
    fn into_operand(self) -> Raw {
        Raw::imm(splat_const::<T, N>(self))
    }
}

/// An integer literal where a float operand is expected, as in Halide and C: `x.lt(1)` and
/// `x + 2` for `x: Value1f` (the integer is converted to the float type, rounding to nearest
/// even).
macro_rules! int_literal_as_float {
    ($($f:ty),*) => {$(
        impl<const N: usize> IntoValue<$f, N> for i32 {
            fn into_operand(self) -> Raw {
                Raw::imm(splat_const::<$f, N>(self as $f))
            }
        }
    )*};
}
int_literal_as_float!(f32, f64);

/// A scalar value broadcast to `N` lanes where a tuple operand is expected (RapidMind's
/// scalar–tuple operations): `v * s` for `v: Value3f`, `s: Value1f`; operators also take the
/// scalar on the left (`s * v`, `v.length() + v`).
macro_rules! broadcast_scalar {
    ($($n:literal),*) => {$(
        impl<T: Scalar> IntoValue<T, $n> for Value<T, 1> {
            #[track_caller]
            fn into_operand(self) -> Raw {
                broadcast_raw::<T, $n>(&self.raw)
            }
        }
        impl<T: Scalar> IntoValue<T, $n> for &Value<T, 1> {
            #[track_caller]
            fn into_operand(self) -> Raw {
                broadcast_raw::<T, $n>(&self.raw)
            }
        }
    )*};
}
broadcast_scalar!(2, 3, 4);

/// Scalar `s` in each of `N` lanes (a `swizzle` with `[0; N]`).
#[track_caller]
pub(crate) fn broadcast_raw<T: Scalar, const N: usize>(s: &Raw) -> Raw {
    record::op(
        Opcode::Swizzle,
        &[0; N],
        None,
        &[s],
        Value::<T, N>::ir_type(),
    )
}

/// `x` in every lane of `T` or `<N x T>`.
pub(crate) fn splat_const<T: Scalar, const N: usize>(x: T) -> Const {
    let b = x.to_bits();
    Const::from_lanes(Value::<T, N>::ir_type(), &[b; 4][..N.min(4)])
}

impl<T: Scalar, const N: usize> Value<T, N> {
    const LANES_OK: () = assert!(N >= 1 && N <= 4, "a weft Value has 1 to 4 lanes");

    /// The IR type: `T` for N = 1, `<N x T>` for N = 2..4 (other N do not compile).
    pub fn ir_type() -> Type {
        #[allow(clippy::let_unit_value)]
        let () = Self::LANES_OK;
        Type::tuple(T::SCALAR, N as u8).expect("1 to 4 lanes")
    }

    pub(crate) fn from_raw(raw: Raw) -> Self {
        Value {
            raw,
            _t: PhantomData,
        }
    }

    /// A value from a host scalar (broadcast to all lanes), a host array `[T; N]`, or
    /// another value (a copy). While recording it is a `const` op of the program (and can
    /// be assigned later, also inside regions).
    #[track_caller]
    pub fn new(x: impl Into<Self>) -> Self {
        x.into()
    }

    /// `x` in every lane.
    #[track_caller]
    pub fn splat(x: T) -> Self {
        Value::from_raw(Raw::constant(splat_const::<T, N>(x)))
    }

    /// The value with lanes `a`.
    #[track_caller]
    pub fn from_array(a: [T; N]) -> Self {
        let bits: Vec<u64> = a.iter().map(|x| x.to_bits()).collect();
        Value::from_raw(Raw::constant(Const::from_lanes(Self::ir_type(), &bits)))
    }

    /// All lanes zero (`0`, `0.0`, `false`).
    #[track_caller]
    pub fn zero() -> Self {
        Value::from_raw(Raw::constant(Const::zero(Self::ir_type())))
    }

    /// A value from a host constant of exactly this type (`Err` naming the caller when
    /// the type differs).
    #[track_caller]
    pub fn from_const(c: Const) -> Result<Self> {
        if c.ty != Self::ir_type() {
            return Err(Error::record(format!(
                "the constant {c} is {}, not {}",
                c.ty,
                Self::ir_type()
            )));
        }
        Ok(Value::from_raw(Raw::constant(c)))
    }

    /// The tuple with lanes `lanes` (scalar values or host scalars), e.g.
    /// `Value3f::from_lanes([&x, &y, &z])` (the IR's `tuple` op). For N = 1, a copy.
    #[track_caller]
    pub fn from_lanes(lanes: [impl IntoValue<T, 1>; N]) -> Self {
        let ops: Vec<Raw> = lanes.into_iter().map(|l| l.into_operand()).collect();
        if N == 1 {
            return Value::from_raw(copy_of(&ops[0]));
        }
        let refs: Vec<&Raw> = ops.iter().collect();
        Value::from_raw(record::op(Opcode::Tuple, &[], None, &refs, Self::ir_type()))
    }

    /// True if this value is recorded into a program (symbolic), false if it is an
    /// immediate constant.
    pub fn is_recorded(&self) -> bool {
        self.raw.is_recorded()
    }

    /// The host constant of an immediate value. Errors: the value is recorded (it has no
    /// host value: apply the program instead), or an immediate operation that made it
    /// failed (the error names that line).
    #[track_caller]
    pub fn to_const(&self) -> Result<Const> {
        self.raw.to_const()
    }

    /// The lanes of an immediate value (errors as [`Value::to_const`]).
    #[track_caller]
    pub fn to_array(&self) -> Result<[T; N]> {
        let c = self.to_const()?;
        Ok(std::array::from_fn(|i| T::from_bits(c.lanes[i])))
    }

    /// Assigns `v` to this value (a variable while recording: inside an `if_` or loop body
    /// the builder merges the definitions after the region).
    #[track_caller]
    pub fn assign(&self, v: impl IntoValue<T, N>) {
        let src = v.into_operand();
        assign_raw(&self.raw, &src);
    }

    /// Gives the current IR value a name hint (printed as `%name`); no effect in immediate
    /// mode. Returns `self`.
    pub fn named(self, name: &str) -> Self {
        if let Repr::Rec { ctx, .. } = self.raw.repr() {
            if let Some(mut rec) = Top::take() {
                if rec.id == ctx {
                    if let Ok(v) = rec.value_of(&self.raw) {
                        rec.b().name(v, name);
                    }
                }
            }
        }
        self
    }

    /// Lanes `lanes` in that order, repeats allowed (the IR's `swizzle`; Sh/RapidMind
    /// swizzling `v(2, 1, 0)`). A single lane gives a scalar; swizzling a scalar with
    /// `[0; M]` broadcasts it.
    #[track_caller]
    pub fn swizzle<const M: usize>(&self, lanes: [usize; M]) -> Value<T, M> {
        let ls: Vec<u8> = lanes.iter().map(|&l| l.min(255) as u8).collect();
        Value::from_raw(record::op(
            Opcode::Swizzle,
            &ls,
            None,
            &[&self.raw],
            Value::<T, M>::ir_type(),
        ))
    }

    /// Lane `i` as a scalar (the IR's `extract`; for N = 1, lane 0 is the value itself).
    #[track_caller]
    pub fn lane(&self, i: usize) -> Value<T, 1> {
        if N == 1 && i == 0 {
            return Value::from_raw(copy_of(&self.raw.alias()));
        }
        Value::from_raw(record::op(
            Opcode::Extract,
            &[i.min(255) as u8],
            None,
            &[&self.raw],
            Value::<T, 1>::ir_type(),
        ))
    }

    /// Lane 0.
    #[track_caller]
    pub fn x(&self) -> Value<T, 1> {
        self.lane(0)
    }

    /// Lane 1.
    #[track_caller]
    pub fn y(&self) -> Value<T, 1> {
        self.lane(1)
    }

    /// Lane 2.
    #[track_caller]
    pub fn z(&self) -> Value<T, 1> {
        self.lane(2)
    }

    /// Lane 3.
    #[track_caller]
    pub fn w(&self) -> Value<T, 1> {
        self.lane(3)
    }

    /// Writemask: replaces lanes `lanes` (distinct) of this value by the lanes of `v`, in
    /// order (the IR's `insert`; RapidMind `v(0, 2) = w`).
    #[track_caller]
    pub fn set_lanes<const M: usize>(&self, lanes: [usize; M], v: impl IntoValue<T, M>) {
        let src = v.into_operand();
        if N == 1 && lanes == [0; M] && M == 1 {
            assign_raw(&self.raw, &src);
            return;
        }
        let ls: Vec<u8> = lanes.iter().map(|&l| l.min(255) as u8).collect();
        let r = record::op(
            Opcode::Insert,
            &ls,
            None,
            &[&self.raw, &src],
            Self::ir_type(),
        );
        assign_raw(&self.raw, &r);
    }

    /// Numeric conversion to lanes of `U` (the IR's `cast`: integers wrap, float → int
    /// saturates with NaN → 0, rounding to nearest even; DESIGN §3).
    #[track_caller]
    pub fn cast<U: Scalar>(&self) -> Value<U, N> {
        Value::from_raw(record::op(
            Opcode::Cast,
            &[],
            Some(Value::<U, N>::ir_type()),
            &[&self.raw],
            Value::<U, N>::ir_type(),
        ))
    }

    /// Reinterprets the bits of each lane as `U` (same width, not bool; the IR's `bitcast`).
    #[track_caller]
    pub fn bitcast<U: Scalar>(&self) -> Value<U, N> {
        Value::from_raw(record::op(
            Opcode::Bitcast,
            &[],
            Some(Value::<U, N>::ir_type()),
            &[&self.raw],
            Value::<U, N>::ir_type(),
        ))
    }

    /// Lane-wise `==` (floats: ordered, NaN equals nothing).
    #[track_caller]
    pub fn eq(&self, rhs: impl IntoValue<T, N>) -> Value<bool, N> {
        compare(Opcode::Eq, &self.raw, rhs.into_operand())
    }

    /// Lane-wise `!=` (floats: true if either is NaN).
    #[track_caller]
    pub fn ne(&self, rhs: impl IntoValue<T, N>) -> Value<bool, N> {
        compare(Opcode::Ne, &self.raw, rhs.into_operand())
    }
}

impl<T: Numeric, const N: usize> Value<T, N> {
    /// Lane-wise `<` (signedness from the type; floats ordered).
    #[track_caller]
    pub fn lt(&self, rhs: impl IntoValue<T, N>) -> Value<bool, N> {
        compare(Opcode::Lt, &self.raw, rhs.into_operand())
    }

    /// Lane-wise `<=`.
    #[track_caller]
    pub fn le(&self, rhs: impl IntoValue<T, N>) -> Value<bool, N> {
        compare(Opcode::Le, &self.raw, rhs.into_operand())
    }

    /// Lane-wise `>`.
    #[track_caller]
    pub fn gt(&self, rhs: impl IntoValue<T, N>) -> Value<bool, N> {
        compare(Opcode::Gt, &self.raw, rhs.into_operand())
    }

    /// Lane-wise `>=`.
    #[track_caller]
    pub fn ge(&self, rhs: impl IntoValue<T, N>) -> Value<bool, N> {
        compare(Opcode::Ge, &self.raw, rhs.into_operand())
    }
}

impl<T: Scalar> Value<T, 1> {
    /// The host value of an immediate scalar (errors as [`Value::to_const`]).
    #[track_caller]
    pub fn get(&self) -> Result<T> {
        Ok(T::from_bits(self.to_const()?.lanes[0]))
    }

    /// This scalar in each of `M` lanes (a `swizzle` with `[0; M]`), e.g. to scale a
    /// `Value3f` by a recorded `Value1f`: `v * s.broadcast::<3>()`.
    #[track_caller]
    pub fn broadcast<const M: usize>(&self) -> Value<T, M> {
        self.swizzle([0; M])
    }
}

impl<T: Scalar, const N: usize> Clone for Value<T, N> {
    /// A copy of the current value (value semantics, as RapidMind's copy constructor).
    #[track_caller]
    fn clone(&self) -> Self {
        Value::from_raw(self.raw.clone())
    }
}

impl<T: Scalar, const N: usize> fmt::Debug for Value<T, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.raw.repr() {
            Repr::Imm(c) => write!(f, "Value({c})"),
            Repr::Rec { .. } | Repr::Alias { .. } => {
                write!(f, "Value(recorded {})", Self::ir_type())
            }
            Repr::Poison(p) => write!(f, "Value(error: {})", p.error()),
        }
    }
}

impl<T: Scalar, const N: usize> Default for Value<T, N> {
    /// [`Value::zero`].
    #[track_caller]
    fn default() -> Self {
        Value::zero()
    }
}

impl<T: Scalar, const N: usize> From<T> for Value<T, N> {
    /// `x` in every lane ([`Value::splat`]).
    #[track_caller]
    fn from(x: T) -> Self {
        Value::splat(x)
    }
}

impl<T: Scalar, const N: usize> From<[T; N]> for Value<T, N> {
    /// [`Value::from_array`].
    #[track_caller]
    fn from(a: [T; N]) -> Self {
        Value::from_array(a)
    }
}

impl<T: Scalar, const N: usize> From<&Value<T, N>> for Value<T, N> {
    /// A copy ([`Clone`]).
    #[track_caller]
    fn from(v: &Value<T, N>) -> Self {
        v.clone()
    }
}

/// An owned copy of operand `src`: while recording, a new value holding `src`'s current
/// IR value (no op); in immediate mode, the constant.
#[track_caller]
pub(crate) fn copy_of(src: &Raw) -> Raw {
    let loc = Location::caller();
    match Top::take() {
        Some(mut rec) => match rec.value_of(src) {
            Ok(v) => rec.new_raw(v),
            Err(e) => {
                rec.fail(e);
                Raw::poison("invalid value", loc)
            }
        },
        None => match src.repr() {
            Repr::Imm(c) => Raw::imm(c),
            Repr::Poison(_) => src.clone(),
            _ => Raw::poison(
                "a recorded value is used outside recording: it has no value here",
                loc,
            ),
        },
    }
}

/// `dst = src` with variable semantics (see [`Value::assign`]).
#[track_caller]
pub(crate) fn assign_raw(dst: &Raw, src: &Raw) {
    let old = match Top::take() {
        Some(mut rec) => match rec.value_of(src) {
            Ok(v) => match rec.write(dst, v) {
                Ok(old) => old,
                Err(e) => {
                    rec.fail(e);
                    None
                }
            },
            Err(e) => {
                rec.fail(e);
                None
            }
        },
        None => Some(dst.replace(copy_of(src).into_repr())),
    };
    drop(old);
}

/// `op a, b` with a result of `a`'s type.
#[track_caller]
pub(crate) fn binary<T: Scalar, const N: usize>(opcode: Opcode, a: &Raw, b: &Raw) -> Value<T, N> {
    Value::from_raw(record::op(
        opcode,
        &[],
        None,
        &[a, b],
        Value::<T, N>::ir_type(),
    ))
}

/// `op a` with a result of `a`'s type.
#[track_caller]
pub(crate) fn unary<T: Scalar, const N: usize>(opcode: Opcode, a: &Raw) -> Value<T, N> {
    Value::from_raw(record::op(
        opcode,
        &[],
        None,
        &[a],
        Value::<T, N>::ir_type(),
    ))
}

#[track_caller]
fn compare<const N: usize>(opcode: Opcode, a: &Raw, b: Raw) -> Value<bool, N> {
    Value::from_raw(record::op(
        opcode,
        &[],
        None,
        &[a, &b],
        Value::<bool, N>::ir_type(),
    ))
}

/// `select(c, a, b)`: `a` where `c` is true, else `b` — per lane when `c` has N lanes, for
/// all lanes when `c` is a scalar (M = 1). The IR's `select`; no branch is taken.
#[track_caller]
pub fn select<T: Scalar, const N: usize, const M: usize>(
    c: impl AsValue<bool, M>,
    a: impl AsValue<T, N>,
    b: impl AsValue<T, N>,
) -> Value<T, N> {
    let (c, a, b) = (c.into_operand(), a.into_operand(), b.into_operand());
    Value::from_raw(record::op(
        Opcode::Select,
        &[],
        None,
        &[&c, &a, &b],
        Value::<T, N>::ir_type(),
    ))
}
