//! Rewriting utilities shared by the passes and the program algebra: copying regions between
//! programs with a value map, substituting uses, compacting arenas, counting uses.

use crate::program::{Op, Program, Region, Value};
use std::collections::HashMap;

/// A map from values of a source program to values of a destination program.
pub type ValueMap = HashMap<Value, Value>;

/// Looks `v` up in `map`, or returns it unchanged (values of the destination itself).
pub fn mapped(map: &ValueMap, v: Value) -> Value {
    map.get(&v).copied().unwrap_or(v)
}

/// Copies the ops of `src`'s region `r`, except its terminator, to the end of `dst`'s region
/// `into`, nested regions included (deep copy). Operands go through `map` (which must hold
/// every value defined outside `r` that `r` uses, e.g. `src`'s parameters); every copied
/// result and region argument is added to `map`. Names and locations are kept.
/// Returns the terminator's operands, mapped (empty if `r` has no terminator).
pub fn copy_ops(
    src: &Program,
    r: Region,
    dst: &mut Program,
    into: Region,
    map: &mut ValueMap,
) -> Vec<Value> {
    for &op in &src.region(r).ops {
        let d = src.op(op);
        if d.opcode.is_terminator() {
            return d.args.iter().map(|&a| mapped(map, a)).collect();
        }
        let new = copy_op(src, op, dst, map);
        dst.append(into, new);
    }
    Vec::new()
}

/// Copies one op of `src` (with its nested regions, deep) into `dst`, unplaced; see [`copy_ops`].
pub fn copy_op(src: &Program, op: Op, dst: &mut Program, map: &mut ValueMap) -> Op {
    let d = src.op(op);
    let mut regions = Vec::with_capacity(d.regions.len());
    for &sr in &d.regions {
        regions.push(copy_region(src, sr, dst, map));
    }
    let args = d.args.iter().map(|&a| mapped(map, a)).collect();
    let types: Vec<_> = d.results.iter().map(|&v| src.ty(v)).collect();
    let new = dst.new_op(d.opcode, args, d.imm.clone(), &types, regions);
    dst.set_op_loc(new, src.op_loc(op));
    for (&old, &nv) in d.results.iter().zip(&dst.op(new).results.clone()) {
        dst.value_mut(nv).name = src.value(old).name.clone();
        dst.set_value_loc(nv, src.value_loc(old));
        map.insert(old, nv);
    }
    new
}

/// Copies a whole region of `src` (arguments, ops and terminator) into a new region of `dst`.
pub fn copy_region(src: &Program, r: Region, dst: &mut Program, map: &mut ValueMap) -> Region {
    let nr = dst.new_region();
    for &a in &src.region(r).args {
        let na = dst.add_region_arg(nr, src.ty(a), src.value(a).name.clone());
        dst.set_value_loc(na, src.value_loc(a));
        map.insert(a, na);
    }
    for &op in &src.region(r).ops {
        let new = copy_op(src, op, dst, map);
        dst.append(nr, new);
    }
    nr
}

/// Rewrites every operand of every op placed in `p` through `map`.
pub fn substitute(p: &mut Program, map: &ValueMap) {
    if map.is_empty() {
        return;
    }
    let mut ops = Vec::new();
    p.walk(&mut |op| ops.push(op));
    for op in ops {
        for a in &mut p.op_mut(op).args {
            *a = mapped(map, *a);
        }
    }
}

/// A compacted copy of `p`: same name, parameters and outputs, only the ops placed in its body
/// (arenas without garbage, values renumbered in program order).
pub fn compact(p: &Program) -> Program {
    let mut q = Program::new(p.name.clone());
    q.loc = p.loc;
    let mut map = ValueMap::new();
    for (i, par) in p.params.iter().enumerate() {
        let v = q.add_param(par.kind, p.param_name(i), p.ty(par.value));
        q.set_value_loc(v, p.value_loc(par.value));
        map.insert(par.value, v);
    }
    q.outputs = p.outputs.clone();
    let body = q.body;
    for &op in &p.region(p.body).ops {
        let new = copy_op(p, op, &mut q, &mut map);
        q.append(body, new);
    }
    q
}

/// How many times each value (by [`Value::index`]) is used as an operand by placed ops.
pub fn use_counts(p: &Program) -> Vec<u32> {
    let mut n = vec![0u32; p.num_values()];
    p.walk(&mut |op| {
        for a in &p.op(op).args {
            n[a.index()] += 1;
        }
    });
    n
}

/// The ops placed in `p`, parents before children, in program order.
pub fn placed_ops(p: &Program) -> Vec<Op> {
    let mut ops = Vec::new();
    p.walk(&mut |op| ops.push(op));
    ops
}

/// Number of placed ops of `p` with the given opcode (tests and demonstrations count work).
pub fn count_ops(p: &Program, opcode: crate::Opcode) -> usize {
    let mut n = 0;
    p.walk(&mut |op| n += (p.op(op).opcode == opcode) as usize);
    n
}

/// Removes parameter `i` of `p` (its value must be unused) and renumbers the later ones.
pub fn remove_param(p: &mut Program, i: usize) {
    p.params.remove(i);
    for k in i..p.params.len() {
        let v = p.params[k].value;
        p.value_mut(v).def = crate::program::ValueDef::Param(k as u32);
    }
}
