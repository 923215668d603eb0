//! Operator overloading for [`Value`]: arithmetic, bitwise and shift operators with values,
//! references, host scalars and uniforms on either side (a scalar broadcasts to all lanes),
//! compound assignments, and unary `-`/`!` (RapidMind's overloaded C++ operators).

use super::record::Raw;
use super::value::{binary, unary, Bits, Int, IntoValue, Numeric, Value};
use half::f16;
use std::ops::{
    Add, AddAssign, BitAnd, BitAndAssign, BitOr, BitOrAssign, BitXor, BitXorAssign, Div, DivAssign,
    Mul, MulAssign, Neg, Not, Rem, RemAssign, Shl, ShlAssign, Shr, ShrAssign, Sub, SubAssign,
};
use weft_ir::Opcode;

macro_rules! binop {
    ($bound:ident, $Trait:ident, $method:ident, $Assign:ident, $assign:ident, $opc:ident, $doc:literal) => {
        impl<T: $bound, const N: usize, R: IntoValue<T, N>> $Trait<R> for Value<T, N> {
            type Output = Value<T, N>;
            #[doc = $doc]
            #[track_caller]
            fn $method(self, rhs: R) -> Value<T, N> {
                let r = rhs.into_operand();
                binary(Opcode::$opc, &self.raw, &r)
            }
        }

        impl<T: $bound, const N: usize, R: IntoValue<T, N>> $Trait<R> for &Value<T, N> {
            type Output = Value<T, N>;
            #[doc = $doc]
            #[track_caller]
            fn $method(self, rhs: R) -> Value<T, N> {
                let r = rhs.into_operand();
                binary(Opcode::$opc, &self.raw, &r)
            }
        }

        impl<T: $bound, const N: usize, R: IntoValue<T, N>> $Assign<R> for Value<T, N> {
            #[doc = $doc]
            #[track_caller]
            fn $assign(&mut self, rhs: R) {
                let r = rhs.into_operand();
                let res: Value<T, N> = binary(Opcode::$opc, &self.raw, &r);
                super::value::assign_raw(&self.raw, &res.raw);
            }
        }
    };
}

binop!(
    Numeric,
    Add,
    add,
    AddAssign,
    add_assign,
    Add,
    "Lane-wise addition (integers wrap)."
);
binop!(
    Numeric,
    Sub,
    sub,
    SubAssign,
    sub_assign,
    Sub,
    "Lane-wise subtraction (integers wrap)."
);
binop!(
    Numeric,
    Mul,
    mul,
    MulAssign,
    mul_assign,
    Mul,
    "Lane-wise multiplication (integers wrap)."
);
binop!(
    Numeric,
    Div,
    div,
    DivAssign,
    div_assign,
    Div,
    "Lane-wise division (integer `x / 0` = all ones, `MIN / -1` = MIN; DESIGN §3)."
);
binop!(
    Numeric,
    Rem,
    rem,
    RemAssign,
    rem_assign,
    Rem,
    "Lane-wise remainder with the dividend's sign (integer `x % 0` = x; floats: fmod)."
);
binop!(
    Bits,
    BitAnd,
    bitand,
    BitAndAssign,
    bitand_assign,
    And,
    "Lane-wise bitwise/logical and."
);
binop!(
    Bits,
    BitOr,
    bitor,
    BitOrAssign,
    bitor_assign,
    Or,
    "Lane-wise bitwise/logical or."
);
binop!(
    Bits,
    BitXor,
    bitxor,
    BitXorAssign,
    bitxor_assign,
    Xor,
    "Lane-wise exclusive or."
);
binop!(
    Int,
    Shl,
    shl,
    ShlAssign,
    shl_assign,
    Shl,
    "Lane-wise shift left (amount modulo the width)."
);
binop!(
    Int,
    Shr,
    shr,
    ShrAssign,
    shr_assign,
    Shr,
    "Lane-wise shift right: arithmetic for signed, logical for unsigned (amount modulo the width)."
);

impl<T: Numeric, const N: usize> Neg for Value<T, N> {
    type Output = Value<T, N>;
    /// Lane-wise negation (integers wrap; floats flip the sign bit).
    #[track_caller]
    fn neg(self) -> Value<T, N> {
        unary(Opcode::Neg, &self.raw)
    }
}

impl<T: Numeric, const N: usize> Neg for &Value<T, N> {
    type Output = Value<T, N>;
    /// Lane-wise negation (integers wrap; floats flip the sign bit).
    #[track_caller]
    fn neg(self) -> Value<T, N> {
        unary(Opcode::Neg, &self.raw)
    }
}

impl<T: Bits, const N: usize> Not for Value<T, N> {
    type Output = Value<T, N>;
    /// Lane-wise complement (logical not for bool).
    #[track_caller]
    fn not(self) -> Value<T, N> {
        unary(Opcode::Not, &self.raw)
    }
}

impl<T: Bits, const N: usize> Not for &Value<T, N> {
    type Output = Value<T, N>;
    /// Lane-wise complement (logical not for bool).
    #[track_caller]
    fn not(self) -> Value<T, N> {
        unary(Opcode::Not, &self.raw)
    }
}

/// `scalar op value`: the host scalar is broadcast to the value's lanes.
macro_rules! scalar_lhs {
    ($Trait:ident, $method:ident, $opc:ident; $($t:ty),*) => {$(
        impl<const N: usize> $Trait<Value<$t, N>> for $t {
            type Output = Value<$t, N>;
            #[track_caller]
            fn $method(self, rhs: Value<$t, N>) -> Value<$t, N> {
                let l: Raw = IntoValue::<$t, N>::into_operand(self);
                binary(Opcode::$opc, &l, &rhs.raw)
            }
        }
        impl<const N: usize> $Trait<&Value<$t, N>> for $t {
            type Output = Value<$t, N>;
            #[track_caller]
            fn $method(self, rhs: &Value<$t, N>) -> Value<$t, N> {
                let l: Raw = IntoValue::<$t, N>::into_operand(self);
                binary(Opcode::$opc, &l, &rhs.raw)
            }
        }
    )*};
}

scalar_lhs!(Add, add, Add; i8, i16, i32, i64, u8, u16, u32, u64, f16, f32, f64);
scalar_lhs!(Sub, sub, Sub; i8, i16, i32, i64, u8, u16, u32, u64, f16, f32, f64);
scalar_lhs!(Mul, mul, Mul; i8, i16, i32, i64, u8, u16, u32, u64, f16, f32, f64);
scalar_lhs!(Div, div, Div; i8, i16, i32, i64, u8, u16, u32, u64, f16, f32, f64);
scalar_lhs!(Rem, rem, Rem; i8, i16, i32, i64, u8, u16, u32, u64, f16, f32, f64);
scalar_lhs!(BitAnd, bitand, And; bool, i8, i16, i32, i64, u8, u16, u32, u64);
scalar_lhs!(BitOr, bitor, Or; bool, i8, i16, i32, i64, u8, u16, u32, u64);
scalar_lhs!(BitXor, bitxor, Xor; bool, i8, i16, i32, i64, u8, u16, u32, u64);

/// `scalar value op tuple value`: the one-lane value is broadcast to the tuple's lanes
/// (`s * v`, `v.length() + v` for `v: Value3f`), as `v op s` already does. (Per scalar type:
/// a generic impl would overlap the `Value<T, 1> op R` one for types of other crates.)
macro_rules! scalar_value_lhs {
    ($Trait:ident, $method:ident, $opc:ident; $($t:ty),*) => {$(
        scalar_value_lhs!(@one $Trait, $method, $opc, $t, 2);
        scalar_value_lhs!(@one $Trait, $method, $opc, $t, 3);
        scalar_value_lhs!(@one $Trait, $method, $opc, $t, 4);
    )*};
    (@one $Trait:ident, $method:ident, $opc:ident, $t:ty, $n:literal) => {
        impl $Trait<Value<$t, $n>> for Value<$t, 1> {
            type Output = Value<$t, $n>;
            #[track_caller]
            fn $method(self, rhs: Value<$t, $n>) -> Value<$t, $n> {
                let l = IntoValue::<$t, $n>::into_operand(&self);
                binary(Opcode::$opc, &l, &rhs.raw)
            }
        }
        impl $Trait<&Value<$t, $n>> for Value<$t, 1> {
            type Output = Value<$t, $n>;
            #[track_caller]
            fn $method(self, rhs: &Value<$t, $n>) -> Value<$t, $n> {
                let l = IntoValue::<$t, $n>::into_operand(&self);
                binary(Opcode::$opc, &l, &rhs.raw)
            }
        }
        impl $Trait<Value<$t, $n>> for &Value<$t, 1> {
            type Output = Value<$t, $n>;
            #[track_caller]
            fn $method(self, rhs: Value<$t, $n>) -> Value<$t, $n> {
                let l = IntoValue::<$t, $n>::into_operand(self);
                binary(Opcode::$opc, &l, &rhs.raw)
            }
        }
        impl $Trait<&Value<$t, $n>> for &Value<$t, 1> {
            type Output = Value<$t, $n>;
            #[track_caller]
            fn $method(self, rhs: &Value<$t, $n>) -> Value<$t, $n> {
                let l = IntoValue::<$t, $n>::into_operand(self);
                binary(Opcode::$opc, &l, &rhs.raw)
            }
        }
    };
}

scalar_value_lhs!(Add, add, Add; i8, i16, i32, i64, u8, u16, u32, u64, f16, f32, f64);
scalar_value_lhs!(Sub, sub, Sub; i8, i16, i32, i64, u8, u16, u32, u64, f16, f32, f64);
scalar_value_lhs!(Mul, mul, Mul; i8, i16, i32, i64, u8, u16, u32, u64, f16, f32, f64);
scalar_value_lhs!(Div, div, Div; i8, i16, i32, i64, u8, u16, u32, u64, f16, f32, f64);
scalar_value_lhs!(Rem, rem, Rem; i8, i16, i32, i64, u8, u16, u32, u64, f16, f32, f64);

/// `integer literal op float value`: `1 - x` for `x: Value1f` (the integer is converted to
/// the float type, as on the right: `x - 1`).
macro_rules! int_literal_lhs {
    ($Trait:ident, $method:ident, $opc:ident; $($f:ty),*) => {$(
        impl<const N: usize> $Trait<Value<$f, N>> for i32 {
            type Output = Value<$f, N>;
            #[track_caller]
            fn $method(self, rhs: Value<$f, N>) -> Value<$f, N> {
                let l: Raw = IntoValue::<$f, N>::into_operand(self);
                binary(Opcode::$opc, &l, &rhs.raw)
            }
        }
        impl<const N: usize> $Trait<&Value<$f, N>> for i32 {
            type Output = Value<$f, N>;
            #[track_caller]
            fn $method(self, rhs: &Value<$f, N>) -> Value<$f, N> {
                let l: Raw = IntoValue::<$f, N>::into_operand(self);
                binary(Opcode::$opc, &l, &rhs.raw)
            }
        }
    )*};
}

int_literal_lhs!(Add, add, Add; f32, f64);
int_literal_lhs!(Sub, sub, Sub; f32, f64);
int_literal_lhs!(Mul, mul, Mul; f32, f64);
int_literal_lhs!(Div, div, Div; f32, f64);
