//! Inlining: every `call` is replaced by a copy of the callee's body (callees first inlined
//! themselves), so later passes and the backends see one flat program. The verifier rejects
//! recursion, so this terminates.

use super::util::{copy_ops, mapped, substitute, ValueMap};
use crate::opcode::Opcode;
use crate::program::{Imm, Module, Program, Region};

/// Inlines every call in every program of `m`. Callees stay in the module (a later
/// `dce-inputs`-style cleanup or the user removes programs no longer needed).
pub fn inline_module(m: &mut Module) {
    // Callees are inlined before their callers use them: repeat until no call is left
    // (each round removes one level of the acyclic call graph).
    for _ in 0..=m.programs.len() {
        let snapshot = m.clone();
        let mut changed = false;
        for p in &mut m.programs {
            changed |= inline_program(&snapshot, p);
        }
        if !changed {
            break;
        }
    }
}

/// Inlines the calls in `p` whose callees are in `m` (one level: the callees' own calls are
/// copied as calls). Returns true if anything was inlined.
pub fn inline_program(m: &Module, p: &mut Program) -> bool {
    let mut results = ValueMap::new();
    let changed = inline_region(m, p, p.body, &mut results);
    substitute(p, &results);
    changed
}

fn inline_region(m: &Module, p: &mut Program, r: Region, results: &mut ValueMap) -> bool {
    let ops = std::mem::take(&mut p.region_mut(r).ops);
    let mut out = Vec::with_capacity(ops.len());
    let mut changed = false;
    for op in ops {
        let d = p.op(op).clone();
        let callee = match (&d.opcode, &d.imm) {
            (Opcode::Call, Imm::Callee(name)) => m.get(name),
            _ => None,
        };
        let Some(callee) = callee else {
            for &c in &d.regions {
                changed |= inline_region(m, p, c, results);
            }
            out.push(op);
            continue;
        };
        changed = true;
        let mut map: ValueMap = callee
            .params
            .iter()
            .zip(&d.args)
            .map(|(par, &a)| (par.value, mapped(results, a)))
            .collect();
        let scratch = p.new_region();
        let returned = copy_ops(callee, callee.body, p, scratch, &mut map);
        out.extend(std::mem::take(&mut p.region_mut(scratch).ops));
        for (&res, ret) in d.results.iter().zip(returned) {
            results.insert(res, ret);
        }
    }
    p.region_mut(r).ops = out;
    changed
}
