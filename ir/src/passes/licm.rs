//! Loop-invariant code motion: a pure op at the top level of a loop's region (`for`, `while`,
//! `do`) whose operands are all defined outside the loop moves to just before the loop.
//! Inner loops are done first, so invariant work climbs out of a nest level by level.
//! Every op is total (DESIGN §3: no traps), so hoisting out of a loop that runs zero
//! times is safe.

use crate::opcode::Opcode;
use crate::program::{Module, Op, Program, Region, Value};
use std::collections::HashSet;

/// Runs [`licm_program`] on every program of `m`.
pub fn licm_module(m: &mut Module) {
    for p in &mut m.programs {
        licm_program(p);
    }
}

/// Hoists the loop-invariant ops of `p`.
pub fn licm_program(p: &mut Program) {
    // Kernels have effects (stores, atomics, barriers) this pass does not model.
    if p.kind == crate::program::ProgramKind::Kernel {
        return;
    }
    region(p, p.body);
}

fn is_loop(op: Opcode) -> bool {
    matches!(op, Opcode::For | Opcode::While | Opcode::DoUntil)
}

fn region(p: &mut Program, r: Region) {
    let ops = std::mem::take(&mut p.region_mut(r).ops);
    let mut out = Vec::with_capacity(ops.len());
    for op in ops {
        for c in p.op(op).regions.clone() {
            region(p, c);
        }
        if is_loop(p.op(op).opcode) {
            out.extend(hoist(p, op));
        }
        out.push(op);
    }
    p.region_mut(r).ops = out;
}

/// Removes the invariant ops from loop `lp`'s regions and returns them in order.
fn hoist(p: &mut Program, lp: Op) -> Vec<Op> {
    let mut inside = HashSet::new();
    defined_in(p, lp, &mut inside);
    let mut hoisted = Vec::new();
    for r in p.op(lp).regions.clone() {
        let ops = std::mem::take(&mut p.region_mut(r).ops);
        let mut keep = Vec::with_capacity(ops.len());
        for op in ops {
            let d = p.op(op);
            let movable = !d.opcode.has_regions()
                && !d.opcode.is_terminator()
                && d.args.iter().all(|a| !inside.contains(a));
            if movable {
                for v in &d.results {
                    inside.remove(v);
                }
                hoisted.push(op);
            } else {
                keep.push(op);
            }
        }
        p.region_mut(r).ops = keep;
    }
    hoisted
}

/// Adds every value `op`'s regions define (arguments and results, nested included).
fn defined_in(p: &Program, op: Op, set: &mut HashSet<Value>) {
    for &r in &p.op(op).regions {
        set.extend(p.region(r).args.iter().copied());
        for &o in &p.region(r).ops {
            set.extend(p.op(o).results.iter().copied());
            defined_in(p, o, set);
        }
    }
}
