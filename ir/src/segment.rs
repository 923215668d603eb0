//! MCUDA segmentation of kernels for the CPU backends (Stratton et al., "MCUDA", LCPC 2008,
//! §3; docs/kernel-mode.md): which ops contain a barrier, a region split at its barriers into
//! segments and barrier-containing control ops, the values each piece uses, and the constant
//! sizes of a `shared` array.

use crate::opcode::Opcode;
use crate::program::{Imm, Op, Program, Region, Value, ValueDef};
use std::collections::HashSet;

/// One piece of a region split at its barriers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece {
    /// Barrier-free ops run per work-item (the region's terminator ends the last one).
    Segment(Vec<Op>),
    /// A control op containing a barrier, run once per group.
    Group(Op),
}

/// Adds to `out` the values op `o` and the ops of its regions use.
pub fn uses(p: &Program, o: Op, out: &mut HashSet<Value>) {
    let d = p.op(o);
    out.extend(d.args.iter().copied());
    for &r in &d.regions {
        for &x in &p.region(r).ops {
            uses(p, x, out);
        }
    }
}

/// The ops of `p`'s body that contain a barrier (themselves or in their regions).
pub fn barrier_ops(p: &Program) -> HashSet<Op> {
    fn go(p: &Program, o: Op, out: &mut HashSet<Op>) -> bool {
        let d = p.op(o);
        let mut any = d.opcode == Opcode::Barrier;
        for &r in &d.regions {
            for &x in &p.region(r).ops {
                any |= go(p, x, out);
            }
        }
        if any {
            out.insert(o);
        }
        any
    }
    let mut out = HashSet::new();
    for &o in &p.region(p.body).ops {
        go(p, o, &mut out);
    }
    out
}

/// Region `r` split at its barriers and at the ops of `barrier_ops` (from [`barrier_ops`]),
/// with the values each piece uses. `barrier` and `shared` ops belong to no piece; the last
/// piece is a segment ending with the region's terminator.
pub fn split(
    p: &Program,
    r: Region,
    barrier_ops: &HashSet<Op>,
) -> (Vec<Piece>, Vec<HashSet<Value>>) {
    let ops = &p.region(r).ops;
    let Some((&term, body)) = ops.split_last() else {
        return (Vec::new(), Vec::new());
    };
    let mut pieces = Vec::new();
    let mut cur = Vec::new();
    for &o in body {
        let d = p.op(o);
        if d.opcode == Opcode::Barrier {
            pieces.push(Piece::Segment(std::mem::take(&mut cur)));
        } else if barrier_ops.contains(&o) {
            pieces.push(Piece::Segment(std::mem::take(&mut cur)));
            pieces.push(Piece::Group(o));
        } else if d.opcode != Opcode::Shared {
            cur.push(o);
        }
    }
    cur.push(term);
    pieces.push(Piece::Segment(cur));
    let used = pieces
        .iter()
        .map(|it| {
            let mut u = HashSet::new();
            match it {
                Piece::Segment(os) => os.iter().for_each(|&o| uses(p, o, &mut u)),
                Piece::Group(o) => uses(p, *o, &mut u),
            }
            u
        })
        .collect();
    (pieces, used)
}

/// The constant sizes of `shared` op `o` (the verifier guarantees constant positive i32s).
pub fn shared_dims(p: &Program, o: Op) -> Vec<usize> {
    p.op(o)
        .args
        .iter()
        .map(|&a| match p.value(a).def {
            ValueDef::Result(c, _) => match &p.op(c).imm {
                Imm::Const(k) => (k.lanes[0] as u32 as i32).max(1) as usize,
                _ => 1,
            },
            _ => 1,
        })
        .collect()
}
