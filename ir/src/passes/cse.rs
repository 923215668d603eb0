//! Common subexpression elimination by scoped value numbering: a pure op (or call: programs
//! are pure) equal to an earlier one — same opcode, operands, immediate and result types —
//! in the same region or an enclosing one is removed and its results replaced by the
//! earlier op's. Operands of commutative ops are ordered first, so `add a, b` = `add b, a`
//! (exact under DESIGN §3: IEEE addition and multiplication commute, NaN payloads are
//! unspecified).

use super::util::{mapped, substitute, ValueMap};
use crate::opcode::Opcode;
use crate::program::{Imm, Module, Program, Region, Value};
use crate::types::Type;
use std::collections::HashMap;

/// Runs [`cse_program`] on every program of `m`.
pub fn cse_module(m: &mut Module) {
    for p in &mut m.programs {
        cse_program(p);
    }
}

type Key = (Opcode, Vec<Value>, Imm, Vec<Type>);

/// Removes the redundant ops of `p`.
pub fn cse_program(p: &mut Program) {
    // Kernels have effects (stores, atomics, barriers) this pass does not model.
    if p.kind == crate::program::ProgramKind::Kernel {
        return;
    }
    let mut map = ValueMap::new();
    let mut scopes = vec![HashMap::new()];
    region(p, p.body, &mut scopes, &mut map, false);
    substitute(p, &map);
}

/// Merges only the redundant calls of `p` (same callee, same arguments, in the same region
/// or an enclosing one): what inlining does first, so a program that calls another twice
/// with the same arguments inlines one copy. Exact: programs are pure. Kernels are skipped.
pub fn cse_calls(p: &mut Program) {
    if p.kind == crate::program::ProgramKind::Kernel {
        return;
    }
    let mut map = ValueMap::new();
    let mut scopes = vec![HashMap::new()];
    region(p, p.body, &mut scopes, &mut map, true);
    substitute(p, &map);
}

fn commutative(op: Opcode) -> bool {
    use Opcode as O;
    matches!(
        op,
        O::Add | O::Mul | O::Min | O::Max | O::And | O::Or | O::Xor | O::Eq | O::Ne | O::Dot
    )
}

fn region(
    p: &mut Program,
    r: Region,
    scopes: &mut Vec<HashMap<Key, Vec<Value>>>,
    map: &mut ValueMap,
    calls_only: bool,
) {
    let ops = std::mem::take(&mut p.region_mut(r).ops);
    let mut out = Vec::with_capacity(ops.len());
    for op in ops {
        for a in &mut p.op_mut(op).args {
            *a = mapped(map, *a);
        }
        let d = p.op(op);
        if d.opcode.has_regions() || d.opcode.is_terminator() {
            for c in d.regions.clone() {
                scopes.push(HashMap::new());
                region(p, c, scopes, map, calls_only);
                scopes.pop();
            }
            out.push(op);
            continue;
        }
        if calls_only && d.opcode != Opcode::Call {
            out.push(op);
            continue;
        }
        let mut args = d.args.clone();
        if commutative(d.opcode) {
            args.sort();
        }
        let key: Key = (
            d.opcode,
            args,
            d.imm.clone(),
            d.results.iter().map(|&v| p.ty(v)).collect(),
        );
        if let Some(prev) = scopes.iter().rev().find_map(|s| s.get(&key)) {
            for (&v, &w) in d.results.iter().zip(prev) {
                map.insert(v, w);
            }
            continue;
        }
        let results = d.results.clone();
        scopes.last_mut().expect("a scope").insert(key, results);
        out.push(op);
    }
    p.region_mut(r).ops = out;
}
