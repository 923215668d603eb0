//! A random program generator for differential property tests (DESIGN §6, after Cranelift's
//! fuzzgen): proptest strategies producing verified modules, input values mixed with special
//! values, and helpers to run programs on the interpreter and compare results bit for bit.
//!
//! What [`module`] covers: one program `@p` (name configurable) with 1–3 varying inputs and
//! 0–2 uniforms of `f32`/`i32` (sometimes `u32`/`f64`), optionally an array input
//! `array<1 x f32, clamp>` read at a computed `i32` coordinate; a straight-line body of
//! binary ops (`add sub mul div rem min max`, on integers also `and or xor shl shr`), unary
//! ops (`neg abs`, `sqrt` on floats, `not` on integers), comparisons, `select`, `cast`
//! between `f32 i32 u32 f64 bool`, constants (special values: NaN, ±inf, ±0, subnormals,
//! MIN/MAX, zero divisors, shift amounts around the width); `if` with one result on a
//! computed or constant condition; counted `for 0..k` (k < 6) carrying one variable through
//! the builder's `declare_var`/`def_var`/`use_var`; optionally calls of a second generated
//! program (`@f`, varying inputs only); 1–3 outputs named `o0`, `o1`, `o2`, into which most
//! programs fold every value nothing else uses (`add` or `xor`, after a `cast` if needed), so
//! that little code is dead; the others keep their dead code (for `dce`).
//!
//! Not covered yet (a later issue): tuples and swizzles, `f16`, 8/16/64-bit integers, math
//! functions, `fma`, bitcasts, `while`/`do … until`, nested control flow beyond one level,
//! multi-dimensional arrays and other boundary modes, `index`/`shape`, apply over arrays.
//!
//! Operands are picked by small selectors among the values of the needed type, unused values
//! first and recent ones first, and a step's type is mostly that of the previous value: so
//! steps form chains whose ends become the outputs. A type with no
//! value yet is seeded by a `cast` of an input (a bool by a sign test); an op whose two
//! operands would be the same value gets a fresh second one (a special constant or a cast of
//! another input).

use crate::filetest::same_bits;
use proptest::prelude::*;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;
use weft_ir::builder::ProgramBuilder;
use weft_ir::interp::{Arg, Interpreter, RunError};
use weft_ir::konst::canon;
use weft_ir::{Boundary, Const, HostArray, Module, Opcode as O, Program, ScalarType, Type, Value};

use ScalarType::{Bool, F32, F64, I32, U32};

/// What [`module`] generates; [`GenConfig::default`] is the general case.
#[derive(Clone, Debug)]
pub struct GenConfig {
    /// The program's name (without `@`).
    pub name: String,
    /// The callee's name, when the program may call a second generated program.
    pub callee: Option<String>,
    /// Prefix of the parameter names (`{prefix}x0`, `{prefix}u0`, `{prefix}a`), so that
    /// programs of several generated modules can be combined without clashing names.
    pub prefix: String,
    /// The varying input types; `None`: 1–3 random ones.
    pub inputs: Option<Vec<ScalarType>>,
    /// The output types; `None`: 1–3 random ones.
    pub outputs: Option<Vec<ScalarType>>,
    /// Whether there may be uniform inputs (0–2).
    pub uniforms: bool,
    /// Whether there may be an array input.
    pub arrays: bool,
    /// The most top-level steps of the body (at least 1).
    pub max_steps: usize,
}

impl Default for GenConfig {
    fn default() -> GenConfig {
        GenConfig {
            name: "p".into(),
            callee: Some("f".into()),
            prefix: String::new(),
            inputs: None,
            outputs: None,
            uniforms: true,
            arrays: true,
            max_steps: 10,
        }
    }
}

/// A generated module; its `Debug` form is the module's text, ready for a `.weft` filetest.
#[derive(Clone)]
pub struct Generated {
    /// The module: the callee (if any), then the program.
    pub module: Module,
    /// The generated program's name.
    pub name: String,
}

impl Generated {
    /// The generated program.
    pub fn program(&self) -> &Program {
        self.module.get(&self.name).expect("generated program")
    }
}

impl fmt::Debug for Generated {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\n{}", weft_ir::print_module(&self.module))
    }
}

/// A program's shape and steps: plain data that proptest generates and shrinks.
#[derive(Clone, Debug)]
struct Recipe {
    varying: Vec<ScalarType>,
    uniforms: Vec<ScalarType>,
    array: bool,
    steps: Vec<Step>,
    /// Per output: its type (`None`: any, a recent value) and a selector.
    outputs: Vec<(Option<ScalarType>, u16)>,
    /// Fold the values nothing uses into the outputs of their type (less dead code).
    sink: bool,
    callee: Option<Box<Recipe>>,
}

/// A constant: one of [`specials`] or random bits.
#[derive(Clone, Debug)]
enum Lit {
    Special(u8),
    Bits(u64),
}

/// One step of a body. `u8` fields pick an op (modulo the table's length) or a type (see
/// [`Pool::ty`]), `u16` fields pick operands (see [`Pool::get`]).
#[derive(Clone, Debug)]
enum Step {
    Bin(u8, u8, u16, u16),
    Un(u8, u8, u16),
    Cmp(u8, u8, u16, u16),
    Select(u8, u16, u16, u16),
    Cast(u8, u8, u16),
    Const(u8, Lit),
    /// `if` with one result of a type; `None` condition: a computed one.
    If(Option<bool>, u16, u8, Vec<Step>, Vec<Step>, u16, u16),
    /// `for i in 0..k` carrying a variable of a type (initial value, body, value yielded).
    For(u8, u8, u16, Vec<Step>, u16),
    Call([u16; 3]),
    Read(u16),
}

/// Types of values (weighted toward f32 and i32).
const TYS: [ScalarType; 6] = [F32, I32, F32, I32, U32, F64];
const FLOAT_BIN: [O; 7] = [O::Add, O::Sub, O::Mul, O::Div, O::Rem, O::Min, O::Max];
const INT_BIN: [O; 5] = [O::And, O::Or, O::Xor, O::Shl, O::Shr];
const CMP: [O; 6] = [O::Eq, O::Ne, O::Lt, O::Le, O::Gt, O::Ge];

/// Special values of `s` (as canonical lane bits): the cases where semantics are subtle.
pub fn specials(s: ScalarType) -> Vec<u64> {
    let f32s = [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        3.0,
    ];
    let f64s = [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.0,
        -0.0,
        1.0,
        -1.5,
        2.5,
    ];
    match s {
        F32 => f32s
            .iter()
            .map(|x| x.to_bits() as u64)
            .chain([1, 0x0080_0000, 0x7f7f_ffff, 0x4b80_0000])
            .collect(),
        F64 => f64s
            .iter()
            .map(|x| x.to_bits())
            .chain([1, 0x7fef_ffff_ffff_ffff, 0x4330 << 48])
            .collect(),
        Bool => vec![0, 1],
        _ => [0i64, 1, -1, 2, 3, 7, 31, 32, 33, i64::MIN, i64::MAX]
            .iter()
            .chain(&[i32::MIN as i64, i32::MAX as i64, u32::MAX as i64])
            .map(|&x| canon(s, x as u64))
            .collect(),
    }
}

/// `k` (integers) or `k / 4` (floats) as lane bits of `s`.
fn small(s: ScalarType, k: i32) -> u64 {
    match s {
        F32 => (k as f32 / 4.0).to_bits() as u64,
        F64 => (k as f64 / 4.0).to_bits(),
        _ => canon(s, k as i64 as u64),
    }
}

/// A scalar or tuple input value of `ty`: a third each of special values, random bits and
/// small numbers (integers in -32..32, floats in quarters in -8..8).
pub fn value(ty: Type) -> BoxedStrategy<Const> {
    let (s, n) = ty.lanes().expect("a scalar or tuple type");
    let sp = specials(s);
    let lane = prop_oneof![
        prop::sample::select(sp),
        any::<u64>().prop_map(move |b| canon(s, b)),
        (-32i32..32).prop_map(move |k| small(s, k)),
    ];
    prop::collection::vec(lane, n as usize)
        .prop_map(move |l| Const::from_lanes(ty, &l))
        .boxed()
}

/// Arguments of one element-wise run; `Debug` writes them in run-line syntax
/// (`(1.0, -3, [2.5, nan])`).
#[derive(Clone)]
pub struct Args(pub Vec<Arg>);

impl std::ops::Deref for Args {
    type Target = [Arg];
    fn deref(&self) -> &[Arg] {
        &self.0
    }
}

impl fmt::Debug for Args {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = (self.0.iter())
            .map(|a| match a {
                Arg::Value(c) => c.to_string(),
                Arg::Array(arr) => {
                    let xs: Vec<String> = (0..arr.len()).map(|i| arr.get(i).to_string()).collect();
                    format!("[{}]", xs.join(", "))
                }
            })
            .collect();
        write!(f, "({})", parts.join(", "))
    }
}

/// Arguments for one element-wise run of `p`: a [`value`] per varying or uniform input, an
/// array of 1–4 such values per array input.
pub fn args(p: &Program) -> BoxedStrategy<Args> {
    let per_param: Vec<BoxedStrategy<Arg>> = p
        .params
        .iter()
        .map(|par| {
            let t = p.ty(par.value);
            match t.array_parts() {
                Some((_, elem, _)) => prop::collection::vec(value(elem), 1..5)
                    .prop_map(move |vs| {
                        let data = vs.iter().flat_map(|c| c.lane_bits().to_vec()).collect();
                        let shape = vec![vs.len()];
                        Arg::Array(Arc::new(HostArray { elem, shape, data }))
                    })
                    .boxed(),
                None => value(t).prop_map(Arg::Value).boxed(),
            }
        })
        .collect();
    per_param.prop_map(Args).boxed()
}

/// Runs `name` of `m` on one element on the interpreter.
pub fn run_interp(m: &Module, name: &str, inputs: &[Arg]) -> Result<Vec<Const>, RunError> {
    Interpreter::new(m).run_element(name, inputs, &[0], &[1])
}

/// Same types and bit-identical lanes, except that any NaN equals any NaN (DESIGN §3).
pub fn same_results(a: &[Const], b: &[Const]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.ty == y.ty && same_bits(x.ty, x.lane_bits(), y.lane_bits()))
}

fn sel() -> BoxedStrategy<u16> {
    prop_oneof![3 => 0u16..4, 1 => any::<u16>()].boxed()
}

/// Outputs mostly take the most recent unused value: the end of a chain of steps.
fn out_sel() -> BoxedStrategy<u16> {
    prop_oneof![3 => Just(0u16), 1 => sel()].boxed()
}

fn simple_step() -> BoxedStrategy<Step> {
    let lit =
        prop_oneof![3 => any::<u8>().prop_map(Lit::Special), 1 => any::<u64>().prop_map(Lit::Bits)];
    prop_oneof![
        6 => (any::<u8>(), any::<u8>(), sel(), sel()).prop_map(|(o, t, a, b)| Step::Bin(o, t, a, b)),
        2 => (any::<u8>(), any::<u8>(), sel()).prop_map(|(o, t, a)| Step::Un(o, t, a)),
        2 => (any::<u8>(), any::<u8>(), sel(), sel()).prop_map(|(o, t, a, b)| Step::Cmp(o, t, a, b)),
        2 => (any::<u8>(), sel(), sel(), sel()).prop_map(|(t, c, a, b)| Step::Select(t, c, a, b)),
        2 => (any::<u8>(), any::<u8>(), sel()).prop_map(|(to, from, a)| Step::Cast(to, from, a)),
        3 => (any::<u8>(), lit).prop_map(|(t, l)| Step::Const(t, l)),
    ]
    .boxed()
}

fn step(calls: bool, arrays: bool) -> BoxedStrategy<Step> {
    let inner = |min| prop::collection::vec(simple_step(), min..4);
    let cond = prop_oneof![3 => Just(None), 1 => any::<bool>().prop_map(Some)];
    let if_ = (
        cond,
        sel(),
        any::<u8>(),
        inner(0),
        inner(0),
        out_sel(),
        out_sel(),
    )
        .prop_map(|(k, c, t, a, b, ya, yb)| Step::If(k, c, t, a, b, ya, yb));
    let for_ = (0u8..6, any::<u8>(), sel(), inner(1), out_sel())
        .prop_map(|(k, t, init, body, y)| Step::For(k, t, init, body, y));
    let mut arms = vec![(10, simple_step()), (2, if_.boxed()), (2, for_.boxed())];
    if calls {
        arms.push((1, prop::array::uniform3(sel()).prop_map(Step::Call).boxed()));
    }
    if arrays {
        arms.push((1, sel().prop_map(Step::Read).boxed()));
    }
    prop::strategy::Union::new_weighted(arms).boxed()
}

fn recipe(cfg: &GenConfig) -> BoxedStrategy<Recipe> {
    let input_ty = || prop::sample::select(&TYS[..]);
    let varying = match &cfg.inputs {
        Some(v) => Just(v.clone()).boxed(),
        None => prop::collection::vec(input_ty(), 1..=3).boxed(),
    };
    let uniforms = prop::collection::vec(input_ty(), 0..=if cfg.uniforms { 2 } else { 0 });
    let array = if cfg.arrays {
        prop::bool::weighted(0.3).boxed()
    } else {
        Just(false).boxed()
    };
    let steps = prop::collection::vec(step(cfg.callee.is_some(), cfg.arrays), 1..=cfg.max_steps);
    let outputs = match &cfg.outputs {
        Some(ts) => ts
            .iter()
            .map(|&t| (Just(Some(t)), out_sel()))
            .collect::<Vec<_>>()
            .boxed(),
        None => prop::collection::vec((Just(None), out_sel()), 1..=3).boxed(),
    };
    let callee = match &cfg.callee {
        Some(_) => prop::option::weighted(
            0.5,
            recipe(&GenConfig {
                callee: None,
                uniforms: false,
                arrays: false,
                inputs: None,
                outputs: None,
                max_steps: 4,
                ..cfg.clone()
            })
            .prop_map(Box::new),
        )
        .boxed(),
        None => Just(None).boxed(),
    };
    let sink = prop::bool::weighted(0.6);
    (varying, uniforms, array, steps, outputs, callee, sink)
        .prop_map(
            |(varying, uniforms, array, steps, outputs, callee, sink)| Recipe {
                varying,
                uniforms,
                array,
                steps,
                outputs,
                callee,
                sink,
            },
        )
        .boxed()
}

/// Verified modules holding one program built from `cfg` (and its callee, if it has one).
pub fn module(cfg: GenConfig) -> impl Strategy<Value = Generated> {
    recipe(&cfg).prop_map(move |r| Generated {
        module: build(&cfg.name, cfg.callee.as_deref(), &cfg.prefix, &r),
        name: cfg.name.clone(),
    })
}

/// The values available to later steps, by type and in order, and which of them are used.
#[derive(Clone)]
struct Pool {
    by_ty: HashMap<ScalarType, Vec<Value>>,
    all: Vec<Value>,
    used: HashSet<Value>,
    /// The type of the most recent non-bool value.
    last: ScalarType,
    /// The scalar inputs (varying first), from which missing types and fresh operands are cast.
    inputs: Vec<Value>,
}

impl Pool {
    fn new(b: &ProgramBuilder, inputs: Vec<Value>) -> Pool {
        let mut pool = Pool {
            by_ty: HashMap::new(),
            all: Vec::new(),
            used: HashSet::new(),
            last: b.program().ty(inputs[0]).elem_scalar(),
            inputs: inputs.clone(),
        };
        // In reverse: the first varying input is the most recent value, picked first.
        for &v in inputs.iter().rev() {
            pool.push(b, v);
        }
        pool
    }

    fn push(&mut self, b: &ProgramBuilder, v: Value) {
        let s = b.program().ty(v).elem_scalar();
        self.by_ty.entry(s).or_default().push(v);
        self.all.push(v);
        if s != Bool {
            self.last = s;
        }
    }

    /// A type for a step: below 128, the type of the most recent value (so that steps form
    /// chains of dependent ops); otherwise one of [`TYS`].
    fn ty(&self, t: u8) -> ScalarType {
        if t < 128 {
            self.last
        } else {
            TYS[t as usize % TYS.len()]
        }
    }

    /// Picks entry `sel` of `vs` ordered unused first, most recent first (so that most values
    /// end up used, and shrinking moves toward short chains), and marks it used.
    fn pick(&mut self, vs: &[Value], sel: u16) -> Value {
        let (unused, used): (Vec<Value>, Vec<Value>) =
            vs.iter().rev().partition(|v| !self.used.contains(v));
        let v = [unused, used].concat()[sel as usize % vs.len()];
        self.used.insert(v);
        v
    }

    /// A value of any type (see [`Pool::pick`]).
    fn any(&mut self, sel: u16) -> Value {
        let all = self.all.clone();
        self.pick(&all, sel)
    }

    /// Two operands of type `s`, distinct when possible: if both picks are the same value, the
    /// second is replaced by a fresh one (a special constant, or a cast of another input).
    fn get2(&mut self, b: &mut ProgramBuilder, s: ScalarType, x: u16, y: u16) -> (Value, Value) {
        let first = self.get(b, s, x);
        let second = self.get(b, s, y);
        if second != first {
            return (first, second);
        }
        let others: Vec<Value> = self
            .inputs
            .iter()
            .copied()
            .filter(|&v| v != first)
            .collect();
        let fresh = if others.is_empty() || y % 2 == 1 {
            let sp = specials(s);
            b.constant(Const::scalar(s, sp[y as usize / 2 % sp.len()]))
        } else {
            let src = others[y as usize / 2 % others.len()];
            if b.program().ty(src).elem_scalar() == s {
                return (first, src);
            }
            b.cast(src, Type::scalar(s))
        };
        self.push(b, fresh);
        self.used.insert(fresh);
        (first, fresh)
    }

    /// A value of type `s` (see [`Pool::pick`]), seeding the type first if it has none.
    fn get(&mut self, b: &mut ProgramBuilder, s: ScalarType, sel: u16) -> Value {
        if self.by_ty.get(&s).is_none_or(Vec::is_empty) {
            let v = if s == Bool {
                let x = self.get(b, I32, 0);
                let zero = b.i32(0);
                b.lt(x, zero)
            } else {
                let src = self.inputs[sel as usize % self.inputs.len()];
                b.cast(src, Type::scalar(s))
            };
            self.push(b, v);
        }
        let vs = self.by_ty[&s].clone();
        self.pick(&vs, sel)
    }
}

/// The programs a body may use besides its pool.
struct Env<'a> {
    callee: Option<&'a Program>,
    array: Option<Value>,
}

fn emit(b: &mut ProgramBuilder, env: &Env, pool: &mut Pool, step: &Step) {
    let v = match *step {
        Step::Bin(o, t, x, y) => {
            let s = pool.ty(t);
            let ops: Vec<O> = if s.is_float() {
                FLOAT_BIN.to_vec()
            } else {
                FLOAT_BIN.iter().chain(&INT_BIN).copied().collect()
            };
            let (x, y) = pool.get2(b, s, x, y);
            b.op(ops[o as usize % ops.len()], &[x, y])
        }
        Step::Un(o, t, x) => {
            let s = pool.ty(t);
            let second = if s.is_float() { O::Sqrt } else { O::Not };
            let op = [O::Neg, O::Abs, second][o as usize % 3];
            let x = pool.get(b, s, x);
            b.op(op, &[x])
        }
        Step::Cmp(o, t, x, y) => {
            let s = pool.ty(t);
            let (x, y) = pool.get2(b, s, x, y);
            b.op(CMP[o as usize % CMP.len()], &[x, y])
        }
        Step::Select(t, c, x, y) => {
            let s = pool.ty(t);
            let c = pool.get(b, Bool, c);
            let (x, y) = pool.get2(b, s, x, y);
            b.select(c, x, y)
        }
        Step::Cast(to, from, x) => {
            let from = if from < 128 {
                pool.last
            } else {
                [F32, I32, U32, F64, Bool][from as usize % 5]
            };
            let x = pool.get(b, from, x);
            b.cast(x, Type::scalar(TYS[to as usize % TYS.len()]))
        }
        Step::Const(t, ref lit) => {
            let s = pool.ty(t);
            let bits = match *lit {
                Lit::Special(i) => {
                    let sp = specials(s);
                    sp[i as usize % sp.len()]
                }
                Lit::Bits(x) => canon(s, x),
            };
            b.constant(Const::scalar(s, bits))
        }
        Step::If(konst, c, t, ref then, ref els, yt, ye) => {
            let s = pool.ty(t);
            let c = match konst {
                Some(k) => b.bool(k),
                None => pool.get(b, Bool, c),
            };
            let branch = |b: &mut ProgramBuilder, steps: &[Step], y: u16| {
                let mut inner = pool.clone();
                for st in steps {
                    emit(b, env, &mut inner, st);
                }
                vec![inner.get(b, s, y)]
            };
            b.if_else(c, |b| branch(b, then, yt), |b| branch(b, els, ye))[0]
        }
        Step::For(k, t, init, ref body, y) => {
            let s = pool.ty(t);
            let acc = b.declare_var("acc", Type::scalar(s));
            let init = pool.get(b, s, init);
            b.def_var(acc, init);
            let (lo, hi, one) = (b.i32(0), b.i32(k as i32), b.i32(1));
            let mut inner = pool.clone();
            b.for_range(lo, hi, one, |b, i| {
                let a = b.use_var(acc);
                inner.push(b, i);
                inner.push(b, a); // most recent: the body's steps start from the carried value
                for st in body {
                    emit(b, env, &mut inner, st);
                }
                let next = inner.get(b, s, y);
                b.def_var(acc, next);
            });
            b.use_var(acc)
        }
        Step::Call(sels) => {
            let Some(f) = env.callee else { return };
            let args: Vec<Value> = f
                .params
                .iter()
                .zip(sels)
                .map(|(par, k)| pool.get(b, f.ty(par.value).elem_scalar(), k))
                .collect();
            for r in b.call(f, &args) {
                pool.push(b, r);
            }
            return;
        }
        Step::Read(c) => {
            let Some(a) = env.array else { return };
            let c = pool.get(b, I32, c);
            b.read(a, c)
        }
    };
    pool.push(b, v);
}

/// Builds program `name` from `r` (with its callee first, if any) and verifies it.
fn build(name: &str, callee: Option<&str>, prefix: &str, r: &Recipe) -> Module {
    let callee_mod = callee
        .zip(r.callee.as_deref())
        .map(|(c, cr)| build(c, None, "", cr));
    let mut b = ProgramBuilder::new(name);
    let varying: Vec<Value> = (r.varying.iter().enumerate())
        .map(|(k, &s)| b.varying(&format!("{prefix}x{k}"), Type::scalar(s)))
        .collect();
    assert!(!varying.is_empty(), "at least one varying input");
    let mut inputs = varying;
    for (k, &s) in r.uniforms.iter().enumerate() {
        inputs.push(b.uniform(&format!("{prefix}u{k}"), Type::scalar(s)));
    }
    let mut pool = Pool::new(&b, inputs);
    let array = r.array.then(|| {
        let t = Type::array(1, Type::f32(), Boundary::Clamp).expect("array type");
        b.array(&format!("{prefix}a"), t)
    });
    let env = Env {
        callee: callee_mod.as_ref().and_then(|m| m.programs.last()),
        array,
    };
    for st in &r.steps {
        emit(&mut b, &env, &mut pool, st);
    }
    let mut outs: Vec<Value> = (r.outputs.iter())
        .map(|&(s, y)| match s {
            Some(s) => pool.get(&mut b, s, y),
            None => pool.any(y),
        })
        .collect();
    if r.sink {
        let unused: Vec<Value> = (pool.all.iter())
            .filter(|v| !pool.used.contains(v) && !pool.inputs.contains(v))
            .copied()
            .collect();
        for v in unused {
            let t = b.program().ty(v);
            let k = (outs.iter().position(|&o| b.program().ty(o) == t)).unwrap_or(0);
            let ot = b.program().ty(outs[k]);
            let v = if ot == t { v } else { b.cast(v, ot) };
            let op = if ot.elem_scalar().is_float() {
                O::Add
            } else {
                O::Xor
            };
            outs[k] = b.op(op, &[outs[k], v]);
        }
    }
    for (k, &v) in outs.iter().enumerate() {
        b.output(&format!("o{k}"), v);
    }
    b.finish_module()
        .unwrap_or_else(|e| panic!("the generator built an invalid program: {e}\n{r:?}"))
}
