//! Constant folding with DESIGN §3 semantics, through structured control flow.
//!
//! - A pure op whose operands are constants becomes a `const`, evaluated with the
//!   interpreter's own lane semantics (math functions with the math expansion's evaluator),
//!   so folded code computes the interpreter's bits.
//! - An `if` on a constant is replaced by the ops of the branch taken; a `select` on a
//!   constant by the arm chosen.
//! - A `for` with constant bounds and a small trip count is unrolled ([`MAX_TRIPS`],
//!   [`UNROLL_BUDGET`]); the copies fold further (the induction variable is a constant).
//! - Identities that are exact under §3: integer `x+0`, `x-0`, `x*1`, `x*0`, `x|0`, `x&0`,
//!   `x&~0`, `x^0`, shifts by 0; float `x*1`, `x/1`, `x+(-0)`, `x-(+0)`, and — using facts
//!   about float values (finite, sign bit clear, never −0) — `x+(+0)` when x is never −0 and
//!   `x*(±0)` = a signed zero when x is finite with a known sign. These let a tightly bound
//!   zero weight remove its whole tap (`acc + 0*px` is `acc` when `px` is a finite
//!   non-negative pixel and `acc` never −0) without fast-math.
//! - With [`Known`] arrays (tight binding of an array input, DESIGN §4), `extent` of them and
//!   `read`s at constant coordinates (under the array's boundary mode) become constants.

use super::math::{eval as math_eval, is_math_function};
use super::util::{copy_ops, ValueMap};
use crate::host::HostArray;
use crate::interp::{pure, read};
use crate::konst::{canon, lane_f64, lane_i64, Const};
use crate::opcode::Opcode;
use crate::program::{Imm, Module, Op, OpData, Program, Region, Value};
use crate::types::{ScalarType, Type};
use std::collections::{HashMap, VecDeque};

/// Largest trip count of a `for` loop the folder unrolls.
pub const MAX_TRIPS: usize = 256;
/// Largest trip count × body size (ops, nested included) the folder unrolls.
pub const UNROLL_BUDGET: usize = 4096;

/// Facts the folder may use beyond the program text: array inputs bound to known contents
/// (tight binding of an array, DESIGN §4): `extent` of them and `read`s at constant
/// coordinates fold to constants.
#[derive(Default)]
pub struct Known<'a> {
    /// Array-typed values (parameters) with known contents.
    pub arrays: HashMap<Value, &'a HostArray>,
}

/// Folds every program of `m`.
pub fn fold_module(m: &mut Module) {
    for p in &mut m.programs {
        fold_program(p, &Known::default());
    }
}

/// Folds constants in `p` (in place), using `known` facts. Parameters and outputs do not
/// change; dead ops are left for DCE.
pub fn fold_program(p: &mut Program, known: &Known) {
    // Kernels have effects (stores, atomics, barriers) this pass does not model.
    if p.kind == crate::program::ProgramKind::Kernel {
        return;
    }
    let mut f = Folder {
        known,
        consts: HashMap::new(),
        facts: HashMap::new(),
        subst: ValueMap::new(),
    };
    f.region(p, p.body);
    // Uses inside regions processed before a substitution was recorded are resolved here.
    let mut ops = Vec::new();
    p.walk(&mut |op| ops.push(op));
    for op in ops {
        let args: Vec<Value> = p.op(op).args.iter().map(|&a| f.resolve(a)).collect();
        p.op_mut(op).args = args;
    }
}

/// What is known about every lane of a float value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Facts {
    /// Not NaN, not ±inf.
    finite: bool,
    /// Not NaN and the sign bit is clear (+0, positive, +inf).
    sign_clear: bool,
    /// Not −0.
    not_neg_zero: bool,
}

enum Simplified {
    /// The op's result is this existing value.
    Value(Value),
    /// The op's result is this constant.
    Const(Const),
}

struct Folder<'k, 'a> {
    known: &'k Known<'a>,
    consts: HashMap<Value, Const>,
    facts: HashMap<Value, Facts>,
    subst: ValueMap,
}

fn float_lane_facts(s: ScalarType, bits: u64) -> Facts {
    let x = lane_f64(s, bits);
    let sign = bits >> (s.bits() - 1) & 1 == 1;
    Facts {
        finite: x.is_finite(),
        sign_clear: !x.is_nan() && !sign,
        not_neg_zero: !(x == 0.0 && sign),
    }
}

fn const_facts(c: &Const) -> Facts {
    let s = c.ty.elem_scalar();
    if !s.is_float() {
        return Facts::default();
    }
    let mut f = Facts {
        finite: true,
        sign_clear: true,
        not_neg_zero: true,
    };
    for &b in c.lane_bits() {
        let l = float_lane_facts(s, b);
        f.finite &= l.finite;
        f.sign_clear &= l.sign_clear;
        f.not_neg_zero &= l.not_neg_zero;
    }
    f
}

/// True if every lane of `c` satisfies `f(scalar type, bits)`.
fn all_lanes(c: &Const, f: impl Fn(ScalarType, u64) -> bool) -> bool {
    let s = c.ty.elem_scalar();
    c.lane_bits().iter().all(|&b| f(s, b))
}

fn is_int_zero(c: &Const) -> bool {
    all_lanes(c, |s, b| !s.is_float() && b == 0)
}

fn is_int_one(c: &Const) -> bool {
    all_lanes(c, |s, b| s.is_int() && b == 1)
}

fn is_all_ones(c: &Const) -> bool {
    all_lanes(c, |s, b| !s.is_float() && b == canon(s, u64::MAX))
}

fn is_float(c: &Const, x: f64, negative: bool) -> bool {
    all_lanes(c, |s, b| {
        s.is_float() && lane_f64(s, b) == x && (b >> (s.bits() - 1) & 1 == 1) == negative
    })
}

fn float_const(ty: Type, x: f64) -> Const {
    let s = ty.elem_scalar();
    let bits = match s {
        ScalarType::F16 => crate::konst::f16_from_f64(x).to_bits() as u64,
        ScalarType::F32 => (x as f32).to_bits() as u64,
        _ => x.to_bits(),
    };
    let n = ty.lanes().map_or(1, |(_, n)| n as usize);
    Const::from_lanes(ty, &vec![bits; n])
}

impl Folder<'_, '_> {
    fn resolve(&self, mut v: Value) -> Value {
        while let Some(&w) = self.subst.get(&v) {
            if w == v {
                break;
            }
            v = w;
        }
        v
    }

    fn facts(&self, v: Value) -> Facts {
        match self.consts.get(&v) {
            Some(c) => const_facts(c),
            None => self.facts.get(&v).copied().unwrap_or_default(),
        }
    }

    fn region(&mut self, p: &mut Program, r: Region) {
        let mut queue: VecDeque<Op> = std::mem::take(&mut p.region_mut(r).ops).into();
        let mut out = Vec::with_capacity(queue.len());
        while let Some(op) = queue.pop_front() {
            let args: Vec<Value> = p.op(op).args.iter().map(|&a| self.resolve(a)).collect();
            p.op_mut(op).args = args;
            let d = p.op(op).clone();
            match d.opcode {
                o if o.is_terminator() => out.push(op),
                Opcode::Const => {
                    if let Imm::Const(c) = &d.imm {
                        self.consts.insert(d.results[0], *c);
                    }
                    out.push(op);
                }
                Opcode::If => match self.consts.get(&d.args[0]) {
                    Some(c) => {
                        let taken = d.regions[if c.lanes[0] != 0 { 0 } else { 1 }];
                        let mut ops = std::mem::take(&mut p.region_mut(taken).ops);
                        let term = ops.pop().expect("a region ends with its terminator");
                        for (&res, &y) in d.results.iter().zip(&p.op(term).args) {
                            self.subst.insert(res, y);
                        }
                        for o in ops.into_iter().rev() {
                            queue.push_front(o);
                        }
                    }
                    None => {
                        for c in d.regions {
                            self.region(p, c);
                        }
                        out.push(op);
                    }
                },
                Opcode::For => match self.unroll(p, &d) {
                    Some(ops) => {
                        for o in ops.into_iter().rev() {
                            queue.push_front(o);
                        }
                    }
                    None => {
                        self.region(p, d.regions[0]);
                        out.push(op);
                    }
                },
                Opcode::While | Opcode::DoUntil => {
                    for c in d.regions {
                        self.region(p, c);
                    }
                    out.push(op);
                }
                Opcode::Call => out.push(op),
                _ => match self.simplify(p, &d) {
                    Some(Simplified::Value(v)) => {
                        self.subst.insert(d.results[0], v);
                    }
                    Some(Simplified::Const(c)) => {
                        self.consts.insert(d.results[0], c);
                        let od = p.op_mut(op);
                        od.opcode = Opcode::Const;
                        od.args.clear();
                        od.imm = Imm::Const(c);
                        out.push(op);
                    }
                    None => {
                        let f = self.result_facts(p, &d);
                        if f != Facts::default() {
                            self.facts.insert(d.results[0], f);
                        }
                        out.push(op);
                    }
                },
            }
        }
        p.region_mut(r).ops = out;
    }

    /// Unrolls a `for` with constant bounds within the limits: returns the ops replacing it
    /// (not yet folded) and records its results' substitutes.
    fn unroll(&mut self, p: &mut Program, d: &OpData) -> Option<Vec<Op>> {
        let (lo, hi, step) = (
            self.consts.get(&d.args[0])?,
            self.consts.get(&d.args[1])?,
            self.consts.get(&d.args[2])?,
        );
        let s = lo.ty.elem_scalar();
        let val = |c: &Const| -> i128 {
            if s.is_signed_int() {
                lane_i64(s, c.lanes[0]) as i128
            } else {
                c.lanes[0] as i128
            }
        };
        let (lo, hi, step) = (val(lo), val(hi), val(step));
        let max = if s.is_signed_int() {
            (1i128 << (s.bits() - 1)) - 1
        } else {
            (1i128 << s.bits()) - 1
        };
        // The interpreter's loop: while i < hi, stopping when i + step passes the type's max.
        let mut trips = Vec::new();
        let mut i = lo;
        while step > 0 && i < hi {
            if trips.len() == MAX_TRIPS {
                return None;
            }
            trips.push(i);
            i += step;
            if i > max {
                break;
            }
        }
        let body = d.regions[0];
        if trips.len() * deep_size(p, body) > UNROLL_BUDGET {
            return None;
        }
        let src = p.clone();
        let iv = p.region(body).args[0];
        let ivty = p.ty(iv);
        let mut carried: Vec<Value> = d.args[3..].to_vec();
        let scratch = p.new_region();
        for &i in &trips {
            let c = p.new_op(
                Opcode::Const,
                vec![],
                Imm::Const(Const::scalar(s, canon(s, i as u64))),
                &[ivty],
                vec![],
            );
            let cv = p.op(c).results[0];
            p.value_mut(cv).name = p.value(iv).name.clone();
            p.append(scratch, c);
            let mut map: ValueMap = src
                .region(body)
                .args
                .iter()
                .copied()
                .zip(std::iter::once(cv).chain(carried.iter().copied()))
                .collect();
            carried = copy_ops(&src, body, p, scratch, &mut map);
        }
        for (&res, &v) in d.results.iter().zip(&carried) {
            self.subst.insert(res, v);
        }
        Some(std::mem::take(&mut p.region_mut(scratch).ops))
    }

    /// The value or constant an op reduces to, if any.
    fn simplify(&self, p: &Program, d: &OpData) -> Option<Simplified> {
        if let Some(c) = self.evaluate(p, d) {
            return Some(Simplified::Const(c));
        }
        let k = |i: usize| d.args.get(i).and_then(|a| self.consts.get(a));
        let rty = p.ty(*d.results.first()?);
        use Opcode as O;
        let (a, b) = (d.args.first().copied(), d.args.get(1).copied());
        let val = Simplified::Value;
        // `op x, c` or `op c, x` with the constant on either side of a commutative op.
        let either = |pred: &dyn Fn(&Const) -> bool| -> Option<Value> {
            if k(1).is_some_and(pred) {
                a
            } else if k(0).is_some_and(pred) {
                b
            } else {
                None
            }
        };
        let int = !rty.elem_scalar().is_float();
        match d.opcode {
            O::Select => {
                let (x, y) = (d.args[1], d.args[2]);
                if x == y {
                    return Some(val(x));
                }
                let c = k(0)?;
                if all_lanes(c, |_, b| b != 0) {
                    Some(val(x))
                } else if all_lanes(c, |_, b| b == 0) {
                    Some(val(y))
                } else {
                    None
                }
            }
            O::Add | O::Or | O::Xor if int => either(&is_int_zero).map(val),
            O::Sub | O::Shl | O::Shr if int => k(1).filter(|c| is_int_zero(c)).and(a).map(val),
            O::Mul if int => {
                if k(0).is_some_and(is_int_zero) || k(1).is_some_and(is_int_zero) {
                    Some(Simplified::Const(Const::zero(rty)))
                } else {
                    either(&is_int_one).map(val)
                }
            }
            O::And if int => {
                if k(0).is_some_and(is_int_zero) || k(1).is_some_and(is_int_zero) {
                    Some(Simplified::Const(Const::zero(rty)))
                } else {
                    either(&is_all_ones).map(val)
                }
            }
            O::Mul => {
                if let Some(x) = either(&|c| is_float(c, 1.0, false)) {
                    return Some(val(x));
                }
                self.zero_product(d.args[0], d.args[1], rty)
                    .map(Simplified::Const)
            }
            O::Div => k(1).filter(|c| is_float(c, 1.0, false)).and(a).map(val),
            O::Add => {
                if let Some(x) = either(&|c| is_float(c, 0.0, true)) {
                    return Some(val(x));
                }
                let (x, y) = (d.args[0], d.args[1]);
                let pz = |c: &Const| is_float(c, 0.0, false);
                if k(1).is_some_and(pz) && self.facts(x).not_neg_zero {
                    Some(val(x))
                } else if k(0).is_some_and(pz) && self.facts(y).not_neg_zero {
                    Some(val(y))
                } else {
                    None
                }
            }
            O::Sub => {
                let x = d.args[0];
                if k(1).is_some_and(|c| is_float(c, 0.0, false))
                    || (k(1).is_some_and(|c| is_float(c, 0.0, true)) && self.facts(x).not_neg_zero)
                {
                    Some(val(x))
                } else {
                    None
                }
            }
            O::Fma => {
                let z = self.zero_product(d.args[0], d.args[1], rty)?;
                let c = d.args[2];
                let neg = is_float(&z, 0.0, true);
                if neg || self.facts(c).not_neg_zero {
                    Some(val(c))
                } else {
                    None
                }
            }
            _ => None,
        }
    }

    /// `x * (±0)` (either order) with `x` finite and its sign bit known clear: the product is
    /// exactly a zero whose sign is the constant's.
    fn zero_product(&self, a: Value, b: Value, rty: Type) -> Option<Const> {
        let zero_sign = |v: Value| -> Option<bool> {
            let c = self.consts.get(&v)?;
            if is_float(c, 0.0, false) {
                Some(false)
            } else if is_float(c, 0.0, true) {
                Some(true)
            } else {
                None
            }
        };
        let (neg, other) = match (zero_sign(a), zero_sign(b)) {
            (Some(n), _) => (n, b),
            (None, Some(n)) => (n, a),
            _ => return None,
        };
        let f = self.facts(other);
        (f.finite && f.sign_clear).then(|| float_const(rty, if neg { -0.0 } else { 0.0 }))
    }

    /// Evaluates `d` when its operands are constants (or known arrays).
    fn evaluate(&self, p: &Program, d: &OpData) -> Option<Const> {
        let rty = p.ty(*d.results.first()?);
        match d.opcode {
            Opcode::Index | Opcode::Shape | Opcode::ReadOffset => return None,
            Opcode::Extent => {
                let arr = self.known.arrays.get(&d.args[0])?;
                let s = rty.elem_scalar();
                let lanes: Vec<u64> = arr
                    .shape
                    .iter()
                    .map(|&x| {
                        let x = if s == ScalarType::I32 {
                            x.min(i32::MAX as usize)
                        } else {
                            x
                        };
                        canon(s, x as u64)
                    })
                    .collect();
                return Some(Const::from_lanes(rty, &lanes));
            }
            Opcode::Read => {
                let arr = self.known.arrays.get(&d.args[0])?;
                let coords = self.consts.get(&d.args[1])?;
                let (_, elem, boundary) = p.ty(d.args[0]).array_parts()?;
                let cs = coords.ty.elem_scalar();
                let lanes = read(arr, elem, boundary, cs, &coords.lanes);
                return Some(Const { ty: rty, lanes });
            }
            _ => {}
        }
        let args: Vec<&Const> = d
            .args
            .iter()
            .map(|a| self.consts.get(a))
            .collect::<Option<_>>()?;
        if is_math_function(d.opcode) {
            let s = rty.elem_scalar();
            let n = rty.lanes().map_or(1, |(_, n)| n as usize);
            let lanes: Vec<u64> = (0..n)
                .map(|i| {
                    let b = args.get(1).map_or(0, |c| c.lanes[i]);
                    math_eval(d.opcode, s, args[0].lanes[i], b)
                })
                .collect();
            return Some(Const::from_lanes(rty, &lanes));
        }
        let lanes = pure(d, &|i| args[i].lanes, &|i| args[i].ty, rty);
        Some(Const { ty: rty, lanes })
    }

    /// Facts about a float op's result from its operands' facts.
    fn result_facts(&self, p: &Program, d: &OpData) -> Facts {
        let Some(&r) = d.results.first() else {
            return Facts::default();
        };
        let rs = p.ty(r).elem_scalar();
        if !rs.is_float() {
            return Facts::default();
        }
        let f = |i: usize| self.facts(d.args[i]);
        let clear = |sign_clear: bool, finite: bool| Facts {
            finite,
            sign_clear,
            not_neg_zero: sign_clear,
        };
        match d.opcode {
            Opcode::Cast => {
                let from = p.ty(d.args[0]).elem_scalar();
                if from.is_float() {
                    let a = f(0);
                    if from.bits() <= rs.bits() {
                        a
                    } else {
                        clear(a.sign_clear, false)
                    }
                } else {
                    // Integers convert to the nearest float: never -0, finite unless the
                    // integer range passes f16's 65504.
                    let fits = rs != ScalarType::F16
                        || from.bits() <= 8
                        || from == ScalarType::I16
                        || from == ScalarType::Bool;
                    Facts {
                        finite: fits,
                        sign_clear: !from.is_signed_int(),
                        not_neg_zero: true,
                    }
                }
            }
            Opcode::Add => {
                let (a, b) = (f(0), f(1));
                Facts {
                    finite: false,
                    sign_clear: a.sign_clear && b.sign_clear,
                    not_neg_zero: a.not_neg_zero || b.not_neg_zero,
                }
            }
            Opcode::Mul => {
                let (a, b) = (f(0), f(1));
                clear(a.sign_clear && b.sign_clear && a.finite && b.finite, false)
            }
            Opcode::Fma => {
                let (a, b, c) = (f(0), f(1), f(2));
                clear(
                    a.sign_clear && b.sign_clear && c.sign_clear && a.finite && b.finite,
                    false,
                )
            }
            Opcode::Select => {
                let (a, b) = (f(1), f(2));
                Facts {
                    finite: a.finite && b.finite,
                    sign_clear: a.sign_clear && b.sign_clear,
                    not_neg_zero: a.not_neg_zero && b.not_neg_zero,
                }
            }
            _ => Facts::default(),
        }
    }
}

/// Number of ops in region `r`, nested regions included.
fn deep_size(p: &Program, r: Region) -> usize {
    p.region(r)
        .ops
        .iter()
        .map(|&op| {
            1 + p
                .op(op)
                .regions
                .iter()
                .map(|&c| deep_size(p, c))
                .sum::<usize>()
        })
        .sum()
}
