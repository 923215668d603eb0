//! Dead code elimination: removes ops whose results nothing live uses, and the loop-carried
//! values and `if` results no live op needs (a mark-and-sweep over the structured regions:
//! a value is live when the program returns it or a live op uses it; a control op's slot is
//! live when its result or its region argument is). All ops are pure (DESIGN §3: no traps,
//! no stores), so a dead loop is removed even if it would run out of fuel.
//!
//! [`drop_unused_params`] then removes inputs nothing uses (specialization, DESIGN §4).

use crate::opcode::Opcode;
use crate::program::{Imm, Module, Op, Program, Region, Value, ValueDef};
use std::collections::{HashMap, HashSet};

/// Runs [`dce_program`] on every program of `m`.
pub fn dce_module(m: &mut Module) {
    for p in &mut m.programs {
        dce_program(p);
    }
}

/// Liveness state of one program.
struct Live {
    values: Vec<bool>,
    ops: HashSet<Op>,
    /// (control op, slot) pairs that are live.
    slots: HashSet<(Op, usize)>,
    work: Vec<Value>,
    parent: HashMap<Region, Op>,
}

impl Live {
    fn mark(&mut self, v: Value) {
        if !self.values[v.index()] {
            self.values[v.index()] = true;
            self.work.push(v);
        }
    }

    fn mark_op(&mut self, p: &Program, op: Op) {
        if !self.ops.insert(op) {
            return;
        }
        let d = p.op(op);
        match d.opcode {
            Opcode::If => self.mark(d.args[0]),
            Opcode::For => d.args[..3].iter().for_each(|&a| self.mark(a)),
            Opcode::While => self.mark_yield(p, d.regions[0], 0),
            Opcode::DoUntil => self.mark_yield(p, d.regions[1], 0),
            _ => d.args.iter().for_each(|&a| self.mark(a)),
        }
    }

    fn mark_yield(&mut self, p: &Program, r: Region, k: usize) {
        if let Some(&t) = p.region(r).ops.last() {
            if let Some(&v) = p.op(t).args.get(k) {
                self.mark(v);
            }
        }
    }

    /// Marks slot `k` of control op `op` live: its initial value and every yield feeding it.
    fn mark_slot(&mut self, p: &Program, op: Op, k: usize) {
        self.mark_op(p, op);
        if !self.slots.insert((op, k)) {
            return;
        }
        let d = p.op(op);
        match d.opcode {
            Opcode::If => {
                self.mark_yield(p, d.regions[0], k);
                self.mark_yield(p, d.regions[1], k);
            }
            Opcode::For => {
                self.mark(d.args[3 + k]);
                self.mark_yield(p, d.regions[0], k);
            }
            Opcode::While => {
                self.mark(d.args[k]);
                self.mark_yield(p, d.regions[1], k);
            }
            _ => {
                self.mark(d.args[k]);
                self.mark_yield(p, d.regions[0], k);
            }
        }
    }
}

/// Removes the dead ops, loop-carried values and `if` results of `p`. The program's
/// parameters and outputs do not change.
pub fn dce_program(p: &mut Program) {
    // Kernels have effects (stores, atomics, barriers) this pass does not model.
    if p.kind == crate::program::ProgramKind::Kernel {
        return;
    }
    let mut live = Live {
        values: vec![false; p.num_values()],
        ops: HashSet::new(),
        slots: HashSet::new(),
        work: Vec::new(),
        parent: HashMap::new(),
    };
    p.walk(&mut |op| {
        for &r in &p.op(op).regions {
            live.parent.insert(r, op);
        }
    });
    if let Some(&ret) = p.region(p.body).ops.last() {
        for &v in &p.op(ret).args {
            live.mark(v);
        }
    }
    while let Some(v) = live.work.pop() {
        match p.value(v).def {
            ValueDef::Result(op, k) if p.op(op).opcode.has_regions() => {
                live.mark_slot(p, op, k as usize)
            }
            ValueDef::Result(op, _) => live.mark_op(p, op),
            ValueDef::RegionArg(r, k) => {
                let Some(&op) = live.parent.get(&r) else {
                    continue;
                };
                match p.op(op).opcode {
                    Opcode::For if k == 0 => live.mark_op(p, op),
                    Opcode::For => live.mark_slot(p, op, k as usize - 1),
                    _ => live.mark_slot(p, op, k as usize),
                }
            }
            _ => {}
        }
    }
    sweep(p, p.body, &live);
}

fn sweep(p: &mut Program, r: Region, live: &Live) {
    let ops = std::mem::take(&mut p.region_mut(r).ops);
    let mut out = Vec::with_capacity(ops.len());
    for op in ops {
        let opcode = p.op(op).opcode;
        if !opcode.is_terminator() && !live.ops.contains(&op) {
            continue;
        }
        if opcode.has_regions() {
            let n = p.op(op).results.len();
            let dead: Vec<usize> = (0..n).filter(|&k| !live.slots.contains(&(op, k))).collect();
            remove_slots(p, op, &dead);
            for c in p.op(op).regions.clone() {
                sweep(p, c, live);
            }
        }
        out.push(op);
    }
    p.region_mut(r).ops = out;
}

/// Removes the listed slots (ascending) of control op `op`: results, initial values, region
/// arguments and yielded values, renumbering the definitions of the ones that stay.
pub fn remove_slots(p: &mut Program, op: Op, dead: &[usize]) {
    if dead.is_empty() {
        return;
    }
    let d = p.op(op).clone();
    let keep = |k: usize| !dead.contains(&k);
    let (first_init, first_arg) = match d.opcode {
        Opcode::If => (None, None),
        Opcode::For => (Some(3), Some(1)),
        _ => (Some(0), Some(0)),
    };
    let filter = |v: &[Value], off: usize| -> Vec<Value> {
        v.iter()
            .enumerate()
            .filter(|&(i, _)| i < off || keep(i - off))
            .map(|(_, &x)| x)
            .collect()
    };
    let results = filter(&d.results, 0);
    for (i, &v) in results.iter().enumerate() {
        p.value_mut(v).def = ValueDef::Result(op, i as u32);
    }
    let args = first_init.map_or(d.args.clone(), |o| filter(&d.args, o));
    let od = p.op_mut(op);
    od.results = results;
    od.args = args;
    for (ri, &r) in d.regions.iter().enumerate() {
        if let Some(o) = first_arg {
            let ra = filter(&p.region(r).args, o);
            for (i, &v) in ra.iter().enumerate() {
                p.value_mut(v).def = ValueDef::RegionArg(r, i as u32);
            }
            p.region_mut(r).args = ra;
        }
        // The condition regions of `while` (first) and `do` (second) yield one bool.
        let is_cond = matches!((d.opcode, ri), (Opcode::While, 0) | (Opcode::DoUntil, 1));
        if !is_cond {
            if let Some(&t) = p.region(r).ops.last() {
                let ys = filter(&p.op(t).args, 0);
                p.op_mut(t).args = ys;
            }
        }
    }
}

/// Removes unused inputs (parameters) of every program of `m` that no program of `m` calls.
pub fn drop_unused_inputs(m: &mut Module) {
    let mut called = HashSet::new();
    for p in &m.programs {
        p.walk(&mut |op| {
            if let Imm::Callee(n) = &p.op(op).imm {
                called.insert(n.clone());
            }
        });
    }
    for p in &mut m.programs {
        if !called.contains(&p.name) {
            drop_unused_params(p);
        }
    }
}

/// Removes the parameters of `p` that no placed op uses (callers must be updated by whoever
/// calls this). Returns the original positions of the parameters kept, in order.
pub fn drop_unused_params(p: &mut Program) -> Vec<usize> {
    let uses = super::util::use_counts(p);
    let mut kept = Vec::new();
    let mut i = 0;
    for orig in 0..p.params.len() {
        if uses[p.params[i].value.index()] == 0 {
            super::util::remove_param(p, i);
        } else {
            kept.push(orig);
            i += 1;
        }
    }
    kept
}
