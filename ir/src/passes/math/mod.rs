//! The math expansion pass (DESIGN §3): replaces `exp exp2 log log2 sin cos tan pow atan2
//! rsqrt` by basic ops, so that the interpreter and every backend compute the same bits.
//!
//! The algorithms ([`algo`]) are written once over the [`Emit`] trait and run two ways:
//! [`Direct`] evaluates them on lane values with the interpreter's lane semantics ([`eval`]),
//! and [`IrEmitter`] appends their ops to a program ([`expand_math`]). Expanded code uses
//! only arithmetic, fma, bitwise and shift ops, comparisons, select, cast, bitcast, round,
//! trunc, sqrt, tuple extract/build, constants and `if` (for the Payne–Hanek reduction of
//! trigonometric arguments of magnitude 2^30 and more). Error bounds: docs/semantics.md.

pub mod algo;
pub mod consts;
mod direct;
mod emit;
mod ir_emit;

pub use direct::{Direct, Lane};
pub use emit::{
    dd_add, dd_add_c, dd_div, dd_mul, dd_round, fast_two_sum, two_prod, two_sum, Dd, Emit,
};
pub use ir_emit::IrEmitter;

use crate::opcode::Opcode;
use crate::program::{Module, Op, Program, Region, Value};
use crate::types::{ScalarType, TypeKind};
use std::collections::HashMap;

/// The ten math functions the pass expands.
pub const MATH_FUNCTIONS: [Opcode; 10] = [
    Opcode::Exp,
    Opcode::Exp2,
    Opcode::Log,
    Opcode::Log2,
    Opcode::Sin,
    Opcode::Cos,
    Opcode::Tan,
    Opcode::Pow,
    Opcode::Atan2,
    Opcode::Rsqrt,
];

/// True for the ten math functions the pass expands (see [`MATH_FUNCTIONS`]).
#[inline]
pub fn is_math_function(op: Opcode) -> bool {
    matches!(
        op,
        Opcode::Exp
            | Opcode::Exp2
            | Opcode::Log
            | Opcode::Log2
            | Opcode::Sin
            | Opcode::Cos
            | Opcode::Tan
            | Opcode::Pow
            | Opcode::Atan2
            | Opcode::Rsqrt
    )
}

/// Evaluates math function `op` on one lane of float type `s` (lane bits `a`, and `b` for
/// the second operand of `pow` and `atan2`), exactly as the expanded IR computes it.
/// For any other opcode or a non-float type it returns 0.
pub fn eval(op: Opcode, s: ScalarType, a: u64, b: u64) -> u64 {
    if !is_math_function(op) || !s.is_float() {
        return 0;
    }
    let a = Lane { ty: s, bits: a };
    let b = Lane { ty: s, bits: b };
    let two = matches!(op, Opcode::Pow | Opcode::Atan2);
    algo::emit_math(&mut Direct, op, a, two.then_some(b)).bits
}

/// True if any program of `m` contains a math function op.
pub fn has_math(m: &Module) -> bool {
    m.programs.iter().any(program_has_math)
}

fn program_has_math(p: &Program) -> bool {
    let mut found = false;
    p.walk(&mut |op| found |= is_math_function(p.op(op).opcode));
    found
}

/// Expands every math function op of every program of `m` (see [`expand_program`]).
pub fn expand_math(m: &mut Module) {
    for p in &mut m.programs {
        expand_program(p);
    }
}

/// Replaces every math function op in every region of `p` (nested regions included;
/// tuples lane by lane) by its expansion, in place. Uses of the op's result are redirected
/// to the expansion's value, which takes over the result's name. A verified program stays
/// verified; ops that break their type rule (unverified input) are left alone.
pub fn expand_program(p: &mut Program) {
    if !program_has_math(p) {
        return;
    }
    let body = p.body;
    let mut map = HashMap::new();
    let mut em = IrEmitter::new(p, body, Default::default());
    expand_region(&mut em, body, &mut map);
}

fn expand_region(em: &mut IrEmitter, r: Region, map: &mut HashMap<Value, Value>) {
    let ops = std::mem::take(&mut em.program().region_mut(r).ops);
    em.push_scope();
    for op in ops {
        for a in em.program().op_mut(op).args.iter_mut() {
            if let Some(&v) = map.get(a) {
                *a = v;
            }
        }
        if expandable(em.program(), op) {
            em.set_region(r);
            let loc = em.program().op_loc(op);
            em.set_loc(loc);
            let old = em.program().op(op).results[0];
            let new = expand_op(em, op);
            let p = em.program();
            if p.value(new).name.is_none() {
                p.value_mut(new).name = p.value(old).name.clone();
            }
            p.set_value_loc(new, p.value_loc(old));
            map.insert(old, new);
        } else {
            em.program().region_mut(r).ops.push(op);
            let children = em.program().op(op).regions.clone();
            for c in children {
                expand_region(em, c, map);
            }
        }
    }
    em.pop_scope();
}

/// A math function op whose operands and result have its float type (as the verifier
/// requires).
fn expandable(p: &Program, op: Op) -> bool {
    let d = p.op(op);
    if !is_math_function(d.opcode) || d.results.len() != 1 || !d.regions.is_empty() {
        return false;
    }
    let arity = if matches!(d.opcode, Opcode::Pow | Opcode::Atan2) {
        2
    } else {
        1
    };
    let ty = p.ty(d.results[0]);
    let float = match ty.kind() {
        TypeKind::Scalar(s) | TypeKind::Tuple(s, _) => s.is_float(),
        _ => false,
    };
    float && d.args.len() == arity && d.args.iter().all(|&a| p.ty(a) == ty)
}

fn expand_op(em: &mut IrEmitter, op: Op) -> Value {
    let d = em.program().op(op).clone();
    let ty = em.program().ty(d.results[0]);
    match ty.kind() {
        TypeKind::Tuple(_, n) => {
            let lanes: Vec<Value> = (0..n)
                .map(|i| {
                    let a = em.extract(d.args[0], i);
                    let b = d.args.get(1).map(|&b| em.extract(b, i));
                    algo::emit_math(em, d.opcode, a, b)
                })
                .collect();
            em.tuple(&lanes)
        }
        _ => algo::emit_math(em, d.opcode, d.args[0], d.args.get(1).copied()),
    }
}
