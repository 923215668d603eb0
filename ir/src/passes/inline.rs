//! Inlining: every `call` is replaced by a copy of the callee's body, so later passes and
//! the backends see one flat program. Programs are flattened callees first, each once, and
//! identical calls (same callee, same arguments: programs are pure) are merged before they
//! are inlined, so a call DAG costs time linear in its size, not in its number of paths
//! (a chain where each program calls the next twice with the same arguments stays linear).
//! The verifier rejects recursion, so this terminates.

use super::util::{copy_ops, mapped, substitute, ValueMap};
use crate::opcode::Opcode;
use crate::program::{Imm, Module, Program, Region};

/// Inlines every call in every program of `m`. Callees stay in the module (a later
/// `dce-inputs`-style cleanup or the user removes programs no longer needed).
pub fn inline_module(m: &mut Module) {
    let all: Vec<usize> = (0..m.programs.len()).collect();
    inline_in_order(m, &callees_first(m, &all));
}

/// Inlines every call in program `name` of `m` and in the programs it calls (directly or
/// not); other programs are left as they are. What the backends run before lowering, so
/// they never lower a call.
pub fn inline_reachable(m: &mut Module, name: &str) {
    if let Some(root) = m.position(name) {
        inline_in_order(m, &callees_first(m, &[root]));
    }
}

/// Flattens the programs `order` names (callees before callers): each program's identical
/// calls are merged ([`super::cse::cse_calls`]) and its calls replaced by the already flat
/// callees' bodies.
fn inline_in_order(m: &mut Module, order: &[usize]) {
    for &i in order {
        let has_call = {
            let p = &m.programs[i];
            let mut found = false;
            p.walk(&mut |op| found |= p.op(op).opcode == Opcode::Call);
            found
        };
        if !has_call {
            continue;
        }
        let mut p = std::mem::replace(&mut m.programs[i], Program::new(""));
        super::cse::cse_calls(&mut p);
        inline_program(m, &mut p);
        m.programs[i] = p;
    }
}

/// The programs reachable from `roots` through calls, callees before their callers
/// (a post-order of the acyclic call graph, computed without recursion).
pub fn callees_first(m: &Module, roots: &[usize]) -> Vec<usize> {
    let callees: Vec<Vec<usize>> = m
        .programs
        .iter()
        .map(|p| {
            let mut c = Vec::new();
            p.walk(&mut |op| {
                if let Imm::Callee(name) = &p.op(op).imm {
                    if let Some(i) = m.position(name) {
                        c.push(i);
                    }
                }
            });
            c
        })
        .collect();
    let mut seen = vec![false; m.programs.len()];
    let mut order = Vec::new();
    for &root in roots {
        if seen[root] {
            continue;
        }
        seen[root] = true;
        let mut stack = vec![(root, 0usize)];
        while let Some(&mut (u, ref mut k)) = stack.last_mut() {
            if let Some(&w) = callees[u].get(*k) {
                *k += 1;
                if !seen[w] {
                    seen[w] = true;
                    stack.push((w, 0));
                }
            } else {
                order.push(u);
                stack.pop();
            }
        }
    }
    order
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
