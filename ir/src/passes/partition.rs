//! Interior/border partitioning of stencil reads (DESIGN §5a; Halide's loop partitioning,
//! `src/PartitionLoops.cpp`): finds the `read`s of a map program whose coordinates are the
//! launch `index` plus constant offsets, and makes the program's *interior variant*, where
//! those reads are `read_offset`s (no coordinates: the offset alone, so a backend addresses
//! the element from the block's position) and comparisons of `index` with constants or with
//! `shape` minus a constant that the interior decides are folded (Halide's simplification of
//! a partitioned loop's steady state: a stencil's edge test disappears). A launch runs the
//! variant over the sub-box of the launch where every such read is inside its array
//! ([`Footprint::interior`]) and the program itself over the rest ([`split`]): no boundary
//! handling in the interior, and the same bits as the whole launch run by the program,
//! whatever the boundary modes.

use crate::konst::{canon, lane_i64, Const};
use crate::passes::{dce::dce_program, fold::fold_program, fold::Known};
use crate::program::{Imm, ParamKind, Program, ProgramKind, Value, ValueDef};
use crate::types::{ScalarType, Type};
use crate::Opcode;
use std::ops::Range;

/// Largest offset magnitude the analysis accepts: with launch extents up to [`MAX_EXTENT`],
/// `index + c` and `shape + c` cannot overflow i32.
const MAX_OFFSET: i64 = 1 << 20;

/// Largest launch extent with an interior: the folded comparisons assume `index + c` does
/// not wrap around in i32.
pub const MAX_EXTENT: usize = 1 << 30;

/// The stencil reads of a program: per read, its array parameter (position in the
/// program's parameters) and its constant offset on each axis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Footprint {
    /// `(parameter, offsets)` per read, offsets outermost axis first.
    pub reads: Vec<(usize, Vec<i64>)>,
}

impl Footprint {
    /// The interior of a launch of `shape`: per axis the range of positions `i` where every
    /// read's `i + c` is inside its array, `extents(param)` giving that array's extents, and
    /// inside `0 .. shape` too (the folded comparisons of `index` assume it). Empty ranges
    /// (`start == end`) when some axis has no interior or exceeds 2^30.
    pub fn interior(
        &self,
        shape: &[usize],
        extents: impl Fn(usize) -> Vec<usize>,
    ) -> Vec<Range<usize>> {
        let mut bx: Vec<(i64, i64)> = shape.iter().map(|&n| (0, n as i64)).collect();
        if shape.iter().any(|&n| n > MAX_EXTENT) {
            bx.iter_mut().for_each(|b| b.1 = 0);
        }
        for (param, offs) in &self.reads {
            let ext = extents(*param);
            for (k, b) in bx.iter_mut().enumerate() {
                let (c, n) = (offs[k], ext.get(k).copied().unwrap_or(0) as i64);
                b.0 = b.0.max(-c);
                b.1 = b.1.min(n - c).min(shape[k] as i64 - c);
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
/// that of the launch) turned into `read_offset %a, c`, the comparisons of `index` that the
/// interior decides folded (`fold_launch_compares`), then constants folded and dead code
/// removed. `None` when `p` has no such read or is a kernel. Reads nested in loops and
/// branches count; reads in callees do not (lower after inlining to include them).
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
            .map(|k| match affine_lane(p, d.args[1], k, 0, Opcode::Index) {
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
        // The offset as a constant of the coordinates' type, placed first in the body.
        let cty = p.ty(p.op(op).args[1]);
        let s = cty.elem_scalar();
        let lanes: Vec<u64> = offs.iter().map(|&c| canon(s, c as u64)).collect();
        let k = q.new_op(
            Opcode::Const,
            vec![],
            Imm::Const(Const::from_lanes(cty, &lanes)),
            &[cty],
            vec![],
        );
        let kv = q.op(k).results[0];
        let body = q.body;
        q.region_mut(body).ops.insert(0, k);
        let d = q.op_mut(op);
        d.opcode = Opcode::ReadOffset;
        d.args[1] = kv;
        if !reads.contains(&(i, offs.clone())) {
            reads.push((i, offs));
        }
    }
    fold_launch_compares(&mut q, rank as usize, &reads);
    fold_program(&mut q, &Known::default());
    dce_program(&mut q);
    Some((q, Footprint { reads }))
}

/// Folds the comparisons of `index` that the interior decides: per axis `k` the interior
/// holds positions `lo ≤ i < shape[k] − m` where `lo` is the largest negative read offset's
/// magnitude and `m` the largest positive offset ([`Footprint::interior`] keeps the launch
/// there). A comparison of `index[k] + a` with a constant `b` is decided when `lo + a − b`
/// is, one with `shape[k] + b` when `a − b − m − 1` is; signed integer lanes only (extents
/// up to 2^30 and offsets up to 2^20 do not wrap around). Each comparison whose lanes are
/// all decided becomes a constant.
fn fold_launch_compares(q: &mut Program, rank: usize, reads: &[(usize, Vec<i64>)]) {
    let lo: Vec<i64> = (0..rank)
        .map(|k| reads.iter().map(|r| -r.1[k]).max().unwrap_or(0).max(0))
        .collect();
    let m: Vec<i64> = (0..rank)
        .map(|k| reads.iter().map(|r| r.1[k]).max().unwrap_or(0).max(0))
        .collect();
    let mut folds = Vec::new();
    q.walk(&mut |op| {
        let d = q.op(op);
        if !matches!(
            d.opcode,
            Opcode::Eq | Opcode::Ne | Opcode::Lt | Opcode::Le | Opcode::Gt | Opcode::Ge
        ) {
            return;
        }
        let at = q.ty(d.args[0]);
        if !matches!(at.elem_scalar(), ScalarType::I32 | ScalarType::I64) {
            return;
        }
        let n = at.lanes().map_or(1, |l| l.1 as usize);
        let lanes: Option<Vec<u64>> = (0..n)
            .map(|l| decide(q, d.opcode, d.args[0], d.args[1], l, &lo, &m).map(u64::from))
            .collect();
        if let Some(lanes) = lanes {
            folds.push((op, lanes));
        }
    });
    for (op, lanes) in folds {
        let t: Type = q.ty(q.op(op).results[0]);
        let d = q.op_mut(op);
        d.opcode = Opcode::Const;
        d.args.clear();
        d.imm = Imm::Const(Const::from_lanes(t, &lanes));
    }
}

/// Lane `lane` of comparison `op a, b` in the interior (see [`fold_launch_compares`]), when
/// decided.
fn decide(
    q: &Program,
    op: Opcode,
    a: Value,
    b: Value,
    lane: usize,
    lo: &[i64],
    m: &[i64],
) -> Option<bool> {
    use std::cmp::Ordering::{Equal, Greater, Less};
    let small = |c: i64| c.abs() <= MAX_OFFSET;
    // `index[k] + x` on the left: swap when it is on the right.
    let (op, a, b) = match affine_lane(q, a, lane, 0, Opcode::Index) {
        Some(_) => (op, a, b),
        None => {
            let flipped = match op {
                Opcode::Lt => Opcode::Gt,
                Opcode::Le => Opcode::Ge,
                Opcode::Gt => Opcode::Lt,
                Opcode::Ge => Opcode::Le,
                o => o,
            };
            (flipped, b, a)
        }
    };
    let (k, x) = affine_lane(q, a, lane, 0, Opcode::Index)?;
    if !small(x) || k >= lo.len() {
        return None;
    }
    // What is known of a − b: its lower bound (`b` constant) or its upper bound (`b` is
    // `shape[k] + y`).
    let (bound, lower) = if let Some(y) = const_lane(q, b, lane) {
        if !small(y) {
            return None;
        }
        (lo[k] + x - y, true)
    } else {
        let (kb, y) = affine_lane(q, b, lane, 0, Opcode::Shape)?;
        if kb != k || !small(y) {
            return None;
        }
        (x - y - m[k] - 1, false)
    };
    // The sign of a − b where the bound fixes it.
    let sign = match (lower, bound.cmp(&0)) {
        (true, Greater) | (false, Less) => Some(if lower { Greater } else { Less }),
        _ => None,
    };
    // a − b ≥ 0 (lower bound 0) or ≤ 0 (upper bound 0) decide the non-strict comparisons.
    let weak = match (lower, bound.cmp(&0)) {
        (true, Equal) => Some(Greater),
        (false, Equal) => Some(Less),
        _ => None,
    };
    match (op, sign, weak) {
        (Opcode::Eq, Some(_), _) => Some(false),
        (Opcode::Ne, Some(_), _) => Some(true),
        (Opcode::Lt, Some(s), _) => Some(s == Less),
        (Opcode::Gt, Some(s), _) => Some(s == Greater),
        (Opcode::Le, Some(s), _) => Some(s == Less),
        (Opcode::Ge, Some(s), _) => Some(s == Greater),
        // a ≥ b: a < b false, a ≥ b true; a ≤ b: a > b false, a ≤ b true.
        (Opcode::Lt, None, Some(Greater)) => Some(false),
        (Opcode::Ge, None, Some(Greater)) => Some(true),
        (Opcode::Gt, None, Some(Less)) => Some(false),
        (Opcode::Le, None, Some(Less)) => Some(true),
        _ => None,
    }
}

/// Lane `lane` of `v` as `root[axis] + c` (`root` is `index` or `shape`): `(axis, c)`.
/// Follows `root`, `extract`, `tuple`, and `add`/`sub` of a constant; `depth` bounds the
/// walk.
fn affine_lane(
    p: &Program,
    v: Value,
    lane: usize,
    depth: u32,
    root: Opcode,
) -> Option<(usize, i64)> {
    if depth > 16 {
        return None;
    }
    let ValueDef::Result(op, 0) = p.value(v).def else {
        return None;
    };
    let d = p.op(op);
    match d.opcode {
        o if o == root => Some((lane, 0)),
        Opcode::Extract => match &d.imm {
            Imm::Lanes(ls) => affine_lane(p, d.args[0], *ls.get(lane)? as usize, depth + 1, root),
            _ => None,
        },
        Opcode::Tuple => affine_lane(p, *d.args.get(lane)?, 0, depth + 1, root),
        Opcode::Add | Opcode::Sub => {
            let a = affine_lane(p, d.args[0], lane, depth + 1, root);
            let cb = const_lane(p, d.args[1], lane);
            let (axis, c) = match (a, cb, d.opcode) {
                (Some((axis, x)), Some(c), Opcode::Add) => (axis, x.checked_add(c)?),
                (Some((axis, x)), Some(c), _) => (axis, x.checked_sub(c)?),
                (None, None, Opcode::Add) => {
                    let (axis, x) = affine_lane(p, d.args[1], lane, depth + 1, root)?;
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

    /// The interior of reads at `index ± 1` is `1 ≤ i < shape − 1`: comparisons it decides
    /// become constants, the others stay.
    #[test]
    fn comparisons_the_interior_decides_fold() {
        let src = "program @e(%a: array<2 x f32, clamp>) -> (f32, <2 x bool>, <2 x bool>, <2 x bool>, <2 x bool>, <2 x bool>) {
  %i: <2 x i32> = index
  %s: <2 x i32> = shape
  %one: <2 x i32> = const (1, 1)
  %up: <2 x i32> = sub %i, %one
  %dn: <2 x i32> = add %i, %one
  %v: f32 = read %a, %up
  %w: f32 = read %a, %dn
  %x: f32 = add %v, %w
  %zero: <2 x i32> = const (0, 0)
  %two: <2 x i32> = const (2, 2)
  %last: <2 x i32> = sub %s, %one
  %e0: <2 x bool> = eq %i, %zero
  %e1: <2 x bool> = eq %i, %last
  %g: <2 x bool> = ge %i, %two
  %l: <2 x bool> = lt %last, %i
  %h: <2 x bool> = ge %dn, %one
  return %x, %e0, %e1, %g, %l, %h
}";
        let m = crate::parse_and_verify(src).expect("parses");
        let (q, fp) = interior_variant(&m.programs[0]).expect("stencil reads");
        assert_eq!(fp.reads, vec![(0, vec![-1, -1]), (0, vec![1, 1])]);
        let ret = q.region(q.body).ops.last().copied().expect("return");
        let outs = q.op(ret).args.clone();
        let konst = |v: Value| match q.value(v).def {
            ValueDef::Result(op, _) => match &q.op(op).imm {
                Imm::Const(c) if q.op(op).opcode == Opcode::Const => Some(c.lanes),
                _ => None,
            },
            _ => None,
        };
        // i = 0 and i = shape − 1 are outside; shape − 1 < i is false; i + 1 ≥ 1 holds.
        assert_eq!(konst(outs[1]).map(|l| l[..2].to_vec()), Some(vec![0, 0]));
        assert_eq!(konst(outs[2]).map(|l| l[..2].to_vec()), Some(vec![0, 0]));
        assert_eq!(konst(outs[3]), None, "i ≥ 2 is not decided at i = 1");
        assert_eq!(konst(outs[4]).map(|l| l[..2].to_vec()), Some(vec![0, 0]));
        assert_eq!(konst(outs[5]).map(|l| l[..2].to_vec()), Some(vec![1, 1]));
        assert_eq!(crate::passes::util::count_ops(&q, Opcode::ReadOffset), 2);
    }

    #[test]
    fn the_interior_is_where_every_read_is_inside_its_array() {
        let fp = Footprint {
            reads: vec![(0, vec![-1, 2]), (1, vec![3, 0])],
        };
        let ext = |i: usize| if i == 0 { vec![10, 10] } else { vec![8, 12] };
        assert_eq!(fp.interior(&[10, 10], ext), vec![1..5, 0..8]);
        // Also inside the launch: row 1 + 3 is past a launch of 2 rows.
        assert_eq!(fp.interior(&[2, 1], ext), vec![1..1, 0..0]);
        let far = Footprint {
            reads: vec![(0, vec![20, 0])],
        };
        assert_eq!(far.interior(&[10, 10], ext)[0].len(), 0);
    }
}
