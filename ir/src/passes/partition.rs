//! Interior/border partitioning of stencil reads (DESIGN §5a; Halide's loop partitioning,
//! `src/PartitionLoops.cpp`): finds the `read`s of a map program whose coordinates are the
//! launch `index` plus constant offsets, and makes the program's *interior variant*, where
//! those reads are `read_inbounds`. A launch runs the variant over the sub-box of the launch
//! where every such read is inside its array ([`Footprint::interior`]) and the program
//! itself over the rest ([`split`]): no boundary handling in the interior, and the same bits
//! as the whole launch run by the program, whatever the boundary modes.

use crate::konst::lane_i64;
use crate::program::{Imm, ParamKind, Program, ProgramKind, Value, ValueDef};
use crate::Opcode;
use std::ops::Range;

/// Largest offset magnitude the analysis accepts: `index + c` then cannot overflow i32 for
/// any position that is inside an array (extents are below 2^31).
const MAX_OFFSET: i64 = 1 << 20;

/// The stencil reads of a program: per read, its array parameter (position in the
/// program's parameters) and its constant offset on each axis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Footprint {
    /// `(parameter, offsets)` per read, offsets outermost axis first.
    pub reads: Vec<(usize, Vec<i64>)>,
}

impl Footprint {
    /// The interior of a launch of `shape`: per axis the range of positions `i` where every
    /// read's `i + c` is inside its array, `extents(param)` giving that array's extents.
    /// Empty ranges (`start == end`) when some axis has no interior.
    pub fn interior(
        &self,
        shape: &[usize],
        extents: impl Fn(usize) -> Vec<usize>,
    ) -> Vec<Range<usize>> {
        let mut bx: Vec<(i64, i64)> = shape.iter().map(|&n| (0, n as i64)).collect();
        for (param, offs) in &self.reads {
            let ext = extents(*param);
            for (k, b) in bx.iter_mut().enumerate() {
                let (c, n) = (offs[k], ext.get(k).copied().unwrap_or(0) as i64);
                b.0 = b.0.max(-c);
                b.1 = b.1.min(n - c);
            }
        }
        bx.iter()
            .map(|&(lo, hi)| {
                let lo = lo.max(0) as usize;
                lo..(hi.max(lo as i64) as usize)
            })
            .collect()
    }
}

/// The interior variant of map program `p` and its footprint: `p` with every read of an
/// array parameter at `index + c` (one constant `c` per axis, `|c| ≤ 2^20`, the array's rank
/// that of the launch) turned into `read_inbounds`. `None` when `p` has no such read or is a
/// kernel. Reads nested in loops and branches count; reads in callees do not (lower after
/// inlining to include them).
pub fn interior_variant(p: &Program) -> Option<(Program, Footprint)> {
    if p.kind != ProgramKind::Map {
        return None;
    }
    // The launch's rank: that of `index` (none: no stencil reads).
    let mut rank = None;
    p.walk(&mut |op| {
        let d = p.op(op);
        if d.opcode == Opcode::Index {
            rank = Some(p.ty(d.results[0]).lanes().map_or(1, |l| l.1 as u32));
        }
    });
    let rank = rank?;
    let mut found = Vec::new();
    p.walk(&mut |op| {
        let d = p.op(op);
        if d.opcode != Opcode::Read {
            return;
        }
        let ValueDef::Param(i) = p.value(d.args[0]).def else {
            return;
        };
        let i = i as usize;
        if p.params[i].kind != ParamKind::Array {
            return;
        }
        let Some((dims, _, _)) = p.ty(d.args[0]).array_parts() else {
            return;
        };
        if dims as u32 != rank {
            return;
        }
        let offs: Option<Vec<i64>> = (0..dims as usize)
            .map(|k| match lane_offset(p, d.args[1], k, 0) {
                Some((axis, c)) if axis == k && c.abs() <= MAX_OFFSET => Some(c),
                _ => None,
            })
            .collect();
        if let Some(offs) = offs {
            found.push((op, i, offs));
        }
    });
    if found.is_empty() {
        return None;
    }
    let mut q = p.clone();
    let mut reads = Vec::new();
    for (op, i, offs) in found {
        q.op_mut(op).opcode = Opcode::ReadInBounds;
        if !reads.contains(&(i, offs.clone())) {
            reads.push((i, offs));
        }
    }
    Some((q, Footprint { reads }))
}

/// Lane `lane` of `v` as `index[axis] + c`: `(axis, c)`. Follows `index`, `extract`,
/// `tuple`, and `add`/`sub` of a constant; `depth` bounds the walk.
fn lane_offset(p: &Program, v: Value, lane: usize, depth: u32) -> Option<(usize, i64)> {
    if depth > 16 {
        return None;
    }
    let ValueDef::Result(op, 0) = p.value(v).def else {
        return None;
    };
    let d = p.op(op);
    match d.opcode {
        Opcode::Index => Some((lane, 0)),
        Opcode::Extract => match &d.imm {
            Imm::Lanes(ls) => lane_offset(p, d.args[0], *ls.get(lane)? as usize, depth + 1),
            _ => None,
        },
        Opcode::Tuple => lane_offset(p, *d.args.get(lane)?, 0, depth + 1),
        Opcode::Add | Opcode::Sub => {
            let a = lane_offset(p, d.args[0], lane, depth + 1);
            let cb = const_lane(p, d.args[1], lane);
            let (axis, c) = match (a, cb, d.opcode) {
                (Some((axis, x)), Some(c), Opcode::Add) => (axis, x.checked_add(c)?),
                (Some((axis, x)), Some(c), _) => (axis, x.checked_sub(c)?),
                (None, None, Opcode::Add) => {
                    let (axis, x) = lane_offset(p, d.args[1], lane, depth + 1)?;
                    (axis, x.checked_add(const_lane(p, d.args[0], lane)?)?)
                }
                _ => return None,
            };
            Some((axis, c))
        }
        _ => None,
    }
}

/// Lane `lane` of constant `v` as an integer, if `v` is an integer `const` (or a `tuple`
/// of them, as the DSL records `Value2i::from_array`).
fn const_lane(p: &Program, v: Value, lane: usize) -> Option<i64> {
    let ValueDef::Result(op, 0) = p.value(v).def else {
        return None;
    };
    let d = p.op(op);
    match (&d.opcode, &d.imm) {
        (Opcode::Tuple, _) => const_lane(p, *d.args.get(lane)?, 0),
        (Opcode::Const, Imm::Const(c)) => {
            let s = c.ty.elem_scalar();
            if !s.is_int() {
                return None;
            }
            let n = c.ty.lanes().map_or(1, |l| l.1 as usize);
            Some(lane_i64(s, c.lanes[if n == 1 { 0 } else { lane }]))
        }
        _ => None,
    }
}

/// The launch's elements `0 .. shape.product()` (row-major) as ranges run by the interior
/// variant (`true`) or the program (`false`), in order and covering every element once. An
/// interior range holds elements of `interior` only and starts and ends at multiples of
/// `align` (the CPU kernels' block multiple), so a kernel's whole-block stores stay inside
/// its range; elements of the interior outside such ranges are left to the program.
pub fn split(
    shape: &[usize],
    interior: &[Range<usize>],
    align: usize,
) -> Vec<(Range<usize>, bool)> {
    let total: usize = shape.iter().product();
    let mut inner: Vec<Range<usize>> = Vec::new();
    if total > 0 && interior.iter().all(|r| r.start < r.end) && !shape.is_empty() {
        let last = shape.len() - 1;
        let w = shape[last];
        // Row-major strides of the outer axes.
        let mut rows: Vec<usize> = vec![0];
        for (k, r) in interior[..last].iter().enumerate() {
            let stride: usize = shape[k + 1..last].iter().product();
            rows = rows
                .iter()
                .flat_map(|&base| r.clone().map(move |i| base + i * stride))
                .collect();
        }
        for row in rows {
            let lo = (row * w + interior[last].start).next_multiple_of(align);
            let hi = (row * w + interior[last].end) / align * align;
            if lo < hi {
                match inner.last_mut() {
                    Some(prev) if prev.end == lo => prev.end = hi,
                    _ => inner.push(lo..hi),
                }
            }
        }
    }
    let mut out = Vec::with_capacity(2 * inner.len() + 1);
    let mut at = 0;
    for r in inner {
        if at < r.start {
            out.push((at..r.start, false));
        }
        at = r.end;
        out.push((r, true));
    }
    if at < total {
        out.push((at..total, false));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `split` covers every element once, in order; interior ranges are aligned and hold only
    /// elements of the box; and no aligned whole block of the box is left to the border.
    #[test]
    fn split_covers_the_launch_and_keeps_interior_ranges_inside_the_box() {
        let shapes: [&[usize]; 7] = [
            &[0],
            &[1],
            &[100],
            &[7, 50],
            &[33, 16],
            &[3, 5, 40],
            &[2, 2, 2],
        ];
        for shape in shapes {
            let boxes: Vec<Vec<Range<usize>>> = vec![
                shape.iter().map(|&n| 0..n).collect(),
                shape
                    .iter()
                    .map(|&n| 1.min(n)..n.saturating_sub(2))
                    .collect(),
                shape.iter().map(|&n| (n / 3)..(n / 3)).collect(),
            ];
            for bx in boxes {
                let segs = split(shape, &bx, 16);
                let total: usize = shape.iter().product();
                let mut at = 0;
                for (r, inside) in &segs {
                    assert_eq!(r.start, at, "{shape:?} {bx:?}: {segs:?}");
                    assert!(r.start < r.end);
                    at = r.end;
                    if *inside {
                        assert_eq!(r.start % 16, 0);
                        assert_eq!(r.end % 16, 0);
                        for e in r.clone() {
                            let mut rest = e;
                            for k in (0..shape.len()).rev() {
                                assert!(bx[k].contains(&(rest % shape[k])), "{e} outside {bx:?}");
                                rest /= shape[k];
                            }
                        }
                    }
                }
                assert_eq!(at, total);
            }
        }
    }

    #[test]
    fn the_interior_is_where_every_read_is_inside_its_array() {
        let fp = Footprint {
            reads: vec![(0, vec![-1, 2]), (1, vec![3, 0])],
        };
        let ext = |i: usize| if i == 0 { vec![10, 10] } else { vec![8, 12] };
        assert_eq!(fp.interior(&[10, 10], ext), vec![1..5, 0..8]);
        assert_eq!(fp.interior(&[2, 1], ext), vec![1..2, 0..1]);
        let far = Footprint {
            reads: vec![(0, vec![20, 0])],
        };
        assert_eq!(far.interior(&[10, 10], ext)[0].len(), 0);
    }
}
