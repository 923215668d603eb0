//! The direct evaluator: runs the math algorithms on native lane values with exactly the
//! interpreter's lane semantics (the functions of `interp::scalar`), op by op.

use super::emit::Emit;
use crate::interp::scalar;
use crate::konst::canon;
use crate::opcode::Opcode;
use crate::types::ScalarType;

/// One lane: its scalar type and canonical bits (as the interpreter holds them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lane {
    /// The lane's type.
    pub ty: ScalarType,
    /// Its canonical bits.
    pub bits: u64,
}

impl Lane {
    /// An f64 lane.
    pub fn f64(x: f64) -> Lane {
        Lane {
            ty: ScalarType::F64,
            bits: x.to_bits(),
        }
    }
}

/// The direct evaluator: each [`Emit`] op is computed at once by the interpreter's lane
/// functions, and `if_else` runs only the arm taken. Used by [`super::eval`] (and so by the
/// interpreter's `float_op` for math opcodes) and by the exhaustive accuracy sweeps.
#[derive(Clone, Copy, Debug, Default)]
pub struct Direct;

impl Emit for Direct {
    type V = Lane;

    #[inline(always)]
    fn ty(&self, v: Lane) -> ScalarType {
        v.ty
    }

    #[inline(always)]
    fn konst(&mut self, s: ScalarType, bits: u64) -> Lane {
        Lane {
            ty: s,
            bits: canon(s, bits),
        }
    }

    /// Dispatches exactly as the interpreter's `pure` does for one lane.
    #[inline(always)]
    fn op(&mut self, op: Opcode, args: &[Lane]) -> Lane {
        let s = args[0].ty;
        let get = |i: usize| args.get(i).map_or(0, |l| l.bits);
        match op {
            Opcode::Eq | Opcode::Ne | Opcode::Lt | Opcode::Le | Opcode::Gt | Opcode::Ge => {
                let r = if s.is_float() {
                    scalar::float_compare(op, s, get(0), get(1))
                } else {
                    scalar::int_compare(op, s, get(0), get(1))
                };
                Lane {
                    ty: ScalarType::Bool,
                    bits: r as u64,
                }
            }
            _ => {
                let bits = if s.is_float() {
                    scalar::float_basic(op, s, get(0), get(1), get(2))
                } else if args.len() == 1 {
                    scalar::int_unary(op, s, get(0))
                } else {
                    scalar::int_binary(op, s, get(0), get(1))
                };
                Lane { ty: s, bits }
            }
        }
    }

    #[inline(always)]
    fn select(&mut self, c: Lane, a: Lane, b: Lane) -> Lane {
        if c.bits != 0 {
            a
        } else {
            b
        }
    }

    #[inline(always)]
    fn cast(&mut self, a: Lane, to: ScalarType) -> Lane {
        Lane {
            ty: to,
            bits: scalar::cast(a.ty, to, a.bits),
        }
    }

    #[inline(always)]
    fn bitcast(&mut self, a: Lane, to: ScalarType) -> Lane {
        Lane {
            ty: to,
            bits: a.bits,
        }
    }

    #[inline(always)]
    fn if_else<const N: usize>(
        &mut self,
        c: Lane,
        then: impl FnOnce(&mut Self) -> [Lane; N],
        els: impl FnOnce(&mut Self) -> [Lane; N],
    ) -> [Lane; N] {
        if c.bits != 0 {
            then(self)
        } else {
            els(self)
        }
    }
}
