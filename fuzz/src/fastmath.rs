//! Fast-math cases (issue 7; docs/semantics.md, "Fast-math"): one float op — or a `mul`
//! feeding an `add`, which fast-math may contract — on finite inputs, run with fast-math on
//! and compared with the interpreter within that op's documented error bound instead of bit
//! for bit.

use crate::case::Case;
use crate::gen::Generated;
use proptest::prelude::*;
use std::sync::Arc;
use weft_ir::builder::ProgramBuilder;
use weft_ir::konst::lane_f64;
use weft_ir::{HostArray, Input, Opcode as O, Program, ScalarType, Type};

/// The ops of fast-math cases (`Mul` stands for `mul` then `add`: contraction).
pub const FAST_OPS: [O; 12] = [
    O::Add,
    O::Sub,
    O::Mul,
    O::Div,
    O::Sqrt,
    O::Rsqrt,
    O::Min,
    O::Max,
    O::Neg,
    O::Abs,
    O::Fma,
    O::Exp,
];

/// The documented bound of one fast-math op on a backend (docs/semantics.md, "Fast-math").
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Bound {
    /// The exact result, except that the sign of a zero may differ (`nsz`).
    Exact,
    /// Within this many units in the last place.
    Ulps(u64),
    /// Either the result with two roundings or the fused one (`contract`).
    Contracted,
}

/// The bound of `op` on lane type `s`; `gpu` for PTX (approximate f32 `div` and `sqrt`).
pub fn bound(op: O, s: ScalarType, gpu: bool) -> Bound {
    let f32_gpu = gpu && s == ScalarType::F32;
    match op {
        O::Add | O::Sub | O::Min | O::Max | O::Neg | O::Abs | O::Fma => Bound::Exact,
        O::Mul => Bound::Contracted,
        O::Div => Bound::Ulps(2),
        O::Sqrt if f32_gpu => Bound::Ulps(2),
        O::Sqrt => Bound::Exact,
        // A reciprocal-square-root estimate refined by one Newton step (~2^-22 relative).
        O::Rsqrt => Bound::Ulps(4),
        // The precise expansion, its steps contracted: contraction breaks the exact
        // products of its double-float steps (measured over 20,000 cases: ≤ 1 ulp on the
        // host, ≤ 31 ulp for f64 `exp` on PTX at |x| > 32).
        _ if gpu && s == ScalarType::F64 => Bound::Ulps(64),
        _ => Bound::Ulps(16),
    }
}

/// A finite, normal input lane of `s` for `op` (positive for `sqrt`, `rsqrt`; small for
/// `exp`): sign, a random mantissa and an exponent in ±2^20 (±2^6 for `exp`).
fn lane(s: ScalarType, op: O) -> BoxedStrategy<u64> {
    let positive = matches!(op, O::Sqrt | O::Rsqrt);
    let range = if op == O::Exp { 6 } else { 20 };
    (any::<bool>(), 0.5f64..1.0, -range..=range)
        .prop_map(move |(neg, m, e)| {
            let x = m * 2f64.powi(e);
            let x = if neg && !positive { -x } else { x };
            match s {
                ScalarType::F32 => (x as f32).to_bits() as u64,
                _ => x.to_bits(),
            }
        })
        .boxed()
}

/// Fast-math cases: `@p` applying one of [`FAST_OPS`] to 1–3 varying inputs of `f32`,
/// `f64` or `<4 x f32>`, over 1–40 elements.
pub fn fast_case() -> impl Strategy<Value = Case> {
    let ty = prop::sample::select(vec![
        Type::f32(),
        Type::f64(),
        Type::tuple(ScalarType::F32, 4).expect("tuple"),
    ]);
    (prop::sample::select(FAST_OPS.to_vec()), ty, 1usize..=40).prop_flat_map(|(op, ty, n)| {
        let p = program(op, ty);
        let (s, lanes) = ty.lanes().expect("value");
        let arity = p.params.len();
        let data = prop::collection::vec(lane(s, op), n * lanes as usize);
        prop::collection::vec(data, arity).prop_map(move |cols| {
            let inputs = cols
                .into_iter()
                .map(|data| {
                    Input::Array(Arc::new(HostArray {
                        elem: ty,
                        shape: vec![n],
                        data,
                    }))
                })
                .collect();
            let mut module = weft_ir::Module::new();
            module.programs.push(p.clone());
            Case {
                gen: Generated {
                    module,
                    name: "p".into(),
                    dims: 1,
                },
                inputs,
                shape: vec![n],
            }
        })
    })
}

/// `@p` of one fast-math op on `ty` (`mul` then `add` for `Mul`).
fn program(op: O, ty: Type) -> Program {
    let mut b = ProgramBuilder::new("p");
    let arity = match op {
        O::Fma | O::Mul => 3,
        O::Sqrt | O::Rsqrt | O::Neg | O::Abs | O::Exp => 1,
        _ => 2,
    };
    let xs: Vec<_> = (0..arity)
        .map(|k| b.varying(&format!("x{k}"), ty))
        .collect();
    let r = match op {
        O::Mul => {
            let m = b.op(O::Mul, &xs[..2]);
            b.op(O::Add, &[m, xs[2]])
        }
        _ => b.op(op, &xs),
    };
    b.output("o0", r);
    b.finish().expect("a fast-math case verifies")
}

/// The op of a fast-math case's program.
pub fn case_op(p: &Program) -> O {
    let mut ops = Vec::new();
    p.walk(&mut |o| ops.push(p.op(o).opcode));
    if ops.contains(&O::Mul) {
        O::Mul
    } else {
        ops.into_iter()
            .find(|o| FAST_OPS.contains(o))
            .unwrap_or(O::Add)
    }
}

/// Distance in units in the last place between two finite lanes of `s`, with ±0 equal.
fn ulps(s: ScalarType, a: u64, b: u64) -> u64 {
    let ord = |x: u64| -> i128 {
        let (sign, mag) = match s {
            ScalarType::F32 => (x >> 31 & 1, x & 0x7fff_ffff),
            _ => (x >> 63, x & 0x7fff_ffff_ffff_ffff),
        };
        if sign == 1 {
            -(mag as i128)
        } else {
            mag as i128
        }
    };
    (ord(a) - ord(b)).unsigned_abs() as u64
}

/// Distance in units in the last place between two lanes of `s` (f32 or f64), ±0 equal.
pub fn ulp_distance(s: ScalarType, a: u64, b: u64) -> u64 {
    ulps(s, a, b)
}

/// Checks lane `got` against the interpreter's `want` under `bound`; `fused` is the
/// contracted result (for [`Bound::Contracted`]). Lanes whose exact result is not finite or
/// not normal (overflow, flushed subnormals) are not checked.
pub fn within(s: ScalarType, bound: Bound, want: u64, got: u64, fused: Option<u64>) -> bool {
    let w = lane_f64(s, want);
    let min_normal = if s == ScalarType::F32 {
        f32::MIN_POSITIVE as f64
    } else {
        f64::MIN_POSITIVE
    };
    if !w.is_finite() || (w != 0.0 && w.abs() < min_normal) {
        return true;
    }
    match bound {
        Bound::Exact => ulps(s, want, got) == 0,
        Bound::Ulps(n) => ulps(s, want, got) <= n,
        Bound::Contracted => ulps(s, want, got) == 0 || fused.is_some_and(|f| ulps(s, f, got) == 0),
    }
}

/// The fused result `a * b + c` of one lane (for [`Bound::Contracted`]).
pub fn fused(s: ScalarType, a: u64, b: u64, c: u64) -> u64 {
    match s {
        ScalarType::F32 => {
            let f = |x: u64| f32::from_bits(x as u32);
            f(a).mul_add(f(b), f(c)).to_bits() as u64
        }
        _ => {
            let f = f64::from_bits;
            f(a).mul_add(f(b), f(c)).to_bits()
        }
    }
}
