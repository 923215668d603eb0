//! The random program generator (DESIGN §6, after Cranelift's fuzzgen): proptest strategies
//! producing verified modules, input values mixed with special values, and helpers to run
//! programs on the interpreter and compare results bit for bit.
//!
//! [`module`] builds one program `@p` (name configurable) from a *recipe*: plain data that
//! proptest generates and shrinks (a list of steps whose `u8`/`u16` fields select ops, types
//! and operands). What a recipe can hold, with [`GenConfig::full`] set (the default):
//!
//! - **types**: every scalar (`bool`, 8/16/32/64-bit signed and unsigned integers, `f16`,
//!   `f32`, `f64`; weighted toward `f32`/`i32`) and tuples of 2–4 lanes of any of them;
//! - **inputs**: 0–3 varying, 0–2 uniform, 0–2 array inputs (`array<D x T>`, D = 1..3, any
//!   element type, boundary `clamp`, `repeat` or `constant(c)`); a launch of 1–3 axes;
//! - **ops**: every op of the op table: arithmetic (`fma` included), bitwise and shifts,
//!   comparisons, `select` (scalar or per-lane condition), `cast` between any types of one
//!   lane count, `bitcast` between types of one width, the math set, tuple build / `extract`
//!   / `insert` / `swizzle`, `dot` `length` `normalize` `cross`, `read` (i32 or i64
//!   coordinates, in range or far out of it), `extent`, `index` and `shape`, and `call` of a
//!   second generated program;
//! - **control flow**, nested up to three deep: `if`/`else` on computed (divergent) or
//!   constant conditions, counted `for` with constant or computed (divergent) trip counts,
//!   `while` and `do … until` with a counter bound and a data-dependent exit; each loop
//!   carries a value through the builder's variables;
//! - **constants**: special values (NaN, ±inf, ±0, subnormals, MIN/MAX, zero divisors, shift
//!   amounts at and past the width, float values just past the integer range) or random bits.
//!
//! Outputs are 1–3 values; most programs fold every value nothing else uses into them (`add`
//! or `xor`, after a `cast`/`extract` if needed) so that little code is dead; the others
//! keep their dead code (for `dce`). With `full` unset the generator keeps to `f32`, `i32`,
//! `u32`, `f64` and `bool` scalars, one-level control flow and a 1-D `clamp` array (small
//! programs, for experiments).
//!
//! Operands are picked by small selectors among the values of the needed type, unused values
//! first and recent ones first, and a step's type is mostly that of the previous value: so
//! steps form chains whose ends become the outputs. A type with no value yet is seeded from
//! the inputs (a `cast`, a tuple of lanes, an `extract`, a sign test for bools).

use crate::compare::same_bits;
use proptest::prelude::*;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;
use weft_ir::builder::ProgramBuilder;
use weft_ir::interp::{Arg, Interpreter, RunError};
use weft_ir::konst::canon;
use weft_ir::{Boundary, Const, HostArray, Module, Opcode as O, Program, ScalarType, Type, Value};

use ScalarType::{Bool, F16, F32, F64, I16, I32, I64, I8, U16, U32, U64, U8};

/// What [`module`] generates; [`GenConfig::default`] is the general case.
#[derive(Clone, Debug)]
pub struct GenConfig {
    /// The program's name (without `@`).
    pub name: String,
    /// The callee's name, when the program may call a second generated program.
    pub callee: Option<String>,
    /// Prefix of the parameter names (`{prefix}x0`, `{prefix}u0`, `{prefix}a0`), so that
    /// programs of several generated modules can be combined without clashing names.
    pub prefix: String,
    /// The varying input types; `None`: 1–3 random ones (0–3 with `full`).
    pub inputs: Option<Vec<Type>>,
    /// The output types; `None`: 1–3 random ones.
    pub outputs: Option<Vec<Type>>,
    /// The launch's axes (what `index` and `shape` give); `None`: 1–3 (1 unless `full`).
    pub dims: Option<u8>,
    /// Whether there may be uniform inputs (0–2).
    pub uniforms: bool,
    /// Whether there may be array inputs.
    pub arrays: bool,
    /// The most top-level steps of the body (at least 1).
    pub max_steps: usize,
    /// Every type, op, boundary mode, builtin and nesting depth (see the module docs); unset:
    /// the scalar subset of the algebra property tests.
    pub full: bool,
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
            full: true,
            dims: None,
        }
    }
}

impl GenConfig {
    /// The scalar subset (see the module docs): `f32 i32 u32 f64 bool`, one-level control
    /// flow, a 1-D `clamp` array, no builtins.
    pub fn basic() -> GenConfig {
        GenConfig {
            full: false,
            ..GenConfig::default()
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
    /// The launch's number of axes (what the program's `index`/`shape` ops expect).
    pub dims: u8,
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
    varying: Vec<Type>,
    uniforms: Vec<Type>,
    arrays: Vec<ArraySpec>,
    /// Launch axes, 1..=3.
    dims: u8,
    steps: Vec<Step>,
    /// Per output: its type (`None`: any, a recent value) and a selector.
    outputs: Vec<(Option<Type>, u16)>,
    /// Fold the values nothing uses into the outputs of their type (less dead code).
    sink: bool,
    callee: Option<Box<Recipe>>,
}

/// An array input: axes, element type selector, boundary mode (0 clamp, 1 repeat, 2
/// constant) and the constant.
#[derive(Clone, Debug)]
struct ArraySpec {
    dims: u8,
    elem: u8,
    boundary: u8,
    konst: Lit,
}

/// A constant: one of [`specials`] or random bits, per lane.
#[derive(Clone, Debug)]
enum Lit {
    Special(u8),
    Bits(u64),
}

/// A loop's trip-count bound: constant, or computed from a value (`and x, 7`: divergent).
#[derive(Clone, Debug)]
enum Bound {
    Const(u8),
    Computed(u16),
}

/// One step of a body. `u8` fields pick an op (modulo the table's length) or a type (see
/// [`Pool::ty`]), `u16` fields pick operands (see [`Pool::get`]).
#[derive(Clone, Debug)]
enum Step {
    Bin(u8, u8, u16, u16),
    Un(u8, u8, u16),
    Fma(u8, u16, u16, u16),
    Cmp(u8, u8, u16, u16),
    /// Type, per-lane condition, condition, arms.
    Select(u8, bool, u16, u16, u16),
    Cast(u8, u8, u16),
    /// Source type, target selector, operand.
    Bitcast(u8, u8, u16),
    Const(u8, Lit),
    /// Lane type, lane count selector, lanes.
    Tuple(u8, u8, [u16; 4]),
    Extract(u8, u8, u16),
    /// Tuple type, lane mask, tuple, value.
    Insert(u8, u8, u16, u16),
    /// Tuple type, lanes, count, tuple.
    Swizzle(u8, [u8; 4], u8, u16),
    /// dot / length / normalize / cross on a float tuple.
    Geom(u8, u8, u16, u16),
    /// Array, coordinates, i64 coordinates.
    Read(u8, u16, bool),
    /// A stencil read: array, `index` plus these offsets (−3 … 3 per axis), i64 coordinates
    /// (the interior/border partition's reads, `passes::partition`).
    Stencil(u8, [i8; 3], bool),
    Extent(u8, bool),
    /// `shape` (else `index`), i64 lanes.
    Builtin(bool, bool),
    Call([u16; 4]),
    /// `if` with one result of a type; `None` condition: a computed one.
    If(Option<bool>, u16, u8, Vec<Step>, Vec<Step>, u16, u16),
    /// `for i in 0..bound` (step 1–3) carrying a variable of a type (initial value, body,
    /// value yielded).
    For(Bound, u8, u8, u16, Vec<Step>, u16),
    /// `while` (else `do … until`) with a counter bound and a data-dependent exit: bound,
    /// type, initial value, body, value yielded, exit condition.
    Loop(bool, Bound, u8, u16, Vec<Step>, u16, u16),
}

/// Types of values in the basic subset (weighted toward f32 and i32).
const BASIC_TYS: [ScalarType; 6] = [F32, I32, F32, I32, U32, F64];
/// Scalar types of the full generator (weighted toward f32 and i32).
const FULL_SCALARS: [ScalarType; 14] = [
    F32, I32, F32, I32, F64, F16, I8, I16, I64, U8, U16, U32, U64, Bool,
];
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
        2147483648.0,
        -2147483904.0,
        4294967296.0,
        255.5,
        -128.5,
        65535.5,
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
        9223372036854775808.0,
        -2147483648.5,
        4294967295.5,
        1e300,
    ];
    match s {
        F32 => f32s
            .iter()
            .map(|x| x.to_bits() as u64)
            .chain([1, 0x807f_ffff, 0x0080_0000, 0x7f7f_ffff, 0x4b80_0000])
            .collect(),
        F64 => f64s
            .iter()
            .map(|x| x.to_bits())
            .chain([1, 1 << 63 | 1, 0x7fef_ffff_ffff_ffff, 0x4330 << 48])
            .collect(),
        F16 => vec![
            0x7e00, 0x7c00, 0xfc00, 0, 0x8000, 1, 0x83ff, 0x0400, 0x3c00, 0xbc00, 0x7bff, 0x3800,
            0x5bf8, 0xd800,
        ],
        Bool => vec![0, 1],
        _ => [0i64, 1, -1, 2, 3, 7, 8, 15, 16, 31, 32, 33, 63, 64, 65]
            .iter()
            .chain(&[i64::MIN, i64::MAX, i32::MIN as i64, i32::MAX as i64])
            .chain(&[u32::MAX as i64, i16::MIN as i64, i8::MIN as i64, 255, 65535])
            .map(|&x| canon(s, x as u64))
            .collect(),
    }
}

/// `k` (integers) or `k / 4` (floats) as lane bits of `s`.
fn small(s: ScalarType, k: i32) -> u64 {
    match s {
        F16 => weft_ir::konst::f16_from_f64(k as f64 / 4.0).to_bits() as u64,
        F32 => (k as f32 / 4.0).to_bits() as u64,
        F64 => (k as f64 / 4.0).to_bits(),
        _ => canon(s, k as i64 as u64),
    }
}

/// A scalar or tuple input value of `ty`: per lane, a third each of special values, random
/// bits and small numbers (integers in -32..32, floats in quarters in -8..8).
pub fn value(ty: Type) -> BoxedStrategy<Const> {
    let (s, n) = ty.lanes().expect("a scalar or tuple type");
    prop::collection::vec(lane(s), n as usize)
        .prop_map(move |l| Const::from_lanes(ty, &l))
        .boxed()
}

/// One lane of scalar type `s` (see [`value`]).
pub fn lane(s: ScalarType) -> BoxedStrategy<u64> {
    prop_oneof![
        prop::sample::select(specials(s)),
        any::<u64>().prop_map(move |b| canon(s, b)),
        (-32i32..32).prop_map(move |k| small(s, k)),
    ]
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
                Arg::Array(arr) => crate::compare::fmt_array(arr),
            })
            .collect();
        write!(f, "({})", parts.join(", "))
    }
}

/// An array of `elem` values of `shape` (see [`value`]).
pub fn array(elem: Type, shape: Vec<usize>) -> BoxedStrategy<Arc<HostArray>> {
    let n: usize = shape.iter().product();
    prop::collection::vec(value(elem), n)
        .prop_map(move |vs| {
            let data = vs.iter().flat_map(|c| c.lane_bits().to_vec()).collect();
            Arc::new(HostArray {
                elem,
                shape: shape.clone(),
                data,
            })
        })
        .boxed()
}

/// An array input's shape: 1–5 elements per axis (1–4 for 1-D arrays in the basic subset).
pub fn array_shape(dims: u8) -> BoxedStrategy<Vec<usize>> {
    prop::collection::vec(1usize..=5, dims as usize).boxed()
}

/// Arguments for one element-wise run of `p`: a [`value`] per varying or uniform input, an
/// array of a random shape per array input.
pub fn args(p: &Program) -> BoxedStrategy<Args> {
    let per_param: Vec<BoxedStrategy<Arg>> = p
        .params
        .iter()
        .map(|par| {
            let t = p.ty(par.value);
            match t.array_parts() {
                Some((dims, elem, _)) => array_shape(dims)
                    .prop_flat_map(move |s| array(elem, s))
                    .prop_map(Arg::Array)
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

fn lit() -> BoxedStrategy<Lit> {
    prop_oneof![3 => any::<u8>().prop_map(Lit::Special), 1 => any::<u64>().prop_map(Lit::Bits)]
        .boxed()
}

/// Steps made of two selectors and one operand (`Un`, `Cast`, `Bitcast`, `Extract`).
fn one_operand(f: fn(u8, u8, u16) -> Step) -> BoxedStrategy<Step> {
    (any::<u8>(), any::<u8>(), sel())
        .prop_map(move |(a, b, x)| f(a, b, x))
        .boxed()
}

/// Steps made of two selectors and two operands (`Bin`, `Cmp`, `Insert`, `Geom`).
fn two_operands(f: fn(u8, u8, u16, u16) -> Step) -> BoxedStrategy<Step> {
    (any::<u8>(), any::<u8>(), sel(), sel())
        .prop_map(move |(a, b, x, y)| f(a, b, x, y))
        .boxed()
}

fn simple_step(full: bool) -> BoxedStrategy<Step> {
    let select = (any::<u8>(), any::<bool>(), sel(), sel(), sel())
        .prop_map(move |(t, l, c, a, b)| Step::Select(t, l && full, c, a, b));
    let konst = (any::<u8>(), lit()).prop_map(|(t, l)| Step::Const(t, l));
    let mut arms: Vec<(u32, BoxedStrategy<Step>)> = vec![
        (6, two_operands(Step::Bin)),
        (2, one_operand(Step::Un)),
        (2, two_operands(Step::Cmp)),
        (2, select.boxed()),
        (2, one_operand(Step::Cast)),
        (3, konst.boxed()),
    ];
    if full {
        let fma = (any::<u8>(), sel(), sel(), sel()).prop_map(|(t, a, b, c)| Step::Fma(t, a, b, c));
        let tuple = (any::<u8>(), any::<u8>(), prop::array::uniform4(sel()))
            .prop_map(|(t, n, l)| Step::Tuple(t, n, l));
        let swizzle = (any::<u8>(), prop::array::uniform4(0u8..4), 1u8..=4, sel())
            .prop_map(|(t, l, n, a)| Step::Swizzle(t, l, n, a));
        let builtin = (any::<bool>(), any::<bool>()).prop_map(|(s, w)| Step::Builtin(s, w));
        arms.extend([
            (1, fma.boxed()),
            (1, one_operand(Step::Bitcast)),
            (1, tuple.boxed()),
            (1, one_operand(Step::Extract)),
            (1, two_operands(Step::Insert)),
            (1, swizzle.boxed()),
            (1, two_operands(Step::Geom)),
            (1, builtin.boxed()),
        ]);
    }
    prop::strategy::Union::new_weighted(arms).boxed()
}

fn bound() -> BoxedStrategy<Bound> {
    prop_oneof![
        (0u8..6).prop_map(Bound::Const),
        sel().prop_map(Bound::Computed)
    ]
    .boxed()
}

/// A step; `depth` > 0 allows control flow whose regions hold steps of `depth - 1`.
fn step(full: bool, depth: u32, calls: bool, arrays: bool) -> BoxedStrategy<Step> {
    let mut arms = vec![(10, simple_step(full))];
    if depth > 0 {
        let inner = move |min| prop::collection::vec(step(full, depth - 1, calls, arrays), min..4);
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
        let bound = if full {
            bound()
        } else {
            (0u8..6).prop_map(Bound::Const).boxed()
        };
        let for_ = (
            bound.clone(),
            1u8..=3,
            any::<u8>(),
            sel(),
            inner(1),
            out_sel(),
        )
            .prop_map(|(k, st, t, init, body, y)| Step::For(k, st, t, init, body, y));
        arms.push((2, if_.boxed()));
        arms.push((2, for_.boxed()));
        if full {
            let loop_ = (
                any::<bool>(),
                bound,
                any::<u8>(),
                sel(),
                inner(1),
                out_sel(),
                sel(),
            )
                .prop_map(|(w, k, t, init, body, y, c)| Step::Loop(w, k, t, init, body, y, c));
            arms.push((2, loop_.boxed()));
        }
    }
    if calls {
        arms.push((1, prop::array::uniform4(sel()).prop_map(Step::Call).boxed()));
    }
    if arrays {
        let read = (
            any::<u8>(),
            sel(),
            prop::bool::weighted(if full { 0.3 } else { 0.0 }),
        )
            .prop_map(|(a, c, w)| Step::Read(a, c, w));
        arms.push((2, read.boxed()));
        if full {
            let stencil = (
                any::<u8>(),
                prop::array::uniform3(-3i8..=3),
                prop::bool::weighted(0.3),
            )
                .prop_map(|(a, o, w)| Step::Stencil(a, o, w));
            arms.push((2, stencil.boxed()));
            arms.push((
                1,
                (any::<u8>(), any::<bool>())
                    .prop_map(|(a, w)| Step::Extent(a, w))
                    .boxed(),
            ));
        }
    }
    prop::strategy::Union::new_weighted(arms).boxed()
}

/// A type for inputs and outputs: mostly scalars, a quarter tuples (full), or one of
/// [`BASIC_TYS`].
fn any_type(full: bool) -> BoxedStrategy<Type> {
    any::<u8>()
        .prop_map(move |t| type_of(full, t | 128))
        .boxed()
}

/// The type selector `t` (≥ 128) names: in the full generator a scalar of
/// [`FULL_SCALARS`], a tuple of 2–4 of them one time in four.
fn type_of(full: bool, t: u8) -> Type {
    let t = t as usize;
    if !full {
        return Type::scalar(BASIC_TYS[t % BASIC_TYS.len()]);
    }
    let s = FULL_SCALARS[t % FULL_SCALARS.len()];
    if (t / 16).is_multiple_of(4) {
        Type::tuple(s, 2 + ((t / 4) % 3) as u8).expect("2..=4 lanes")
    } else {
        Type::scalar(s)
    }
}

fn recipe(cfg: &GenConfig) -> BoxedStrategy<Recipe> {
    let full = cfg.full;
    let varying = match &cfg.inputs {
        Some(v) => Just(v.clone()).boxed(),
        None if full => prop_oneof![
            1 => Just(Vec::new()),
            9 => prop::collection::vec(any_type(true), 1..=3),
        ]
        .boxed(),
        None => prop::collection::vec(any_type(false), 1..=3).boxed(),
    };
    let uniforms = prop::collection::vec(any_type(full), 0..=if cfg.uniforms { 2 } else { 0 });
    let spec = (
        1u8..=if full { 3 } else { 1 },
        any::<u8>(),
        0u8..if full { 3 } else { 1 },
        lit(),
    )
        .prop_map(move |(dims, elem, boundary, konst)| ArraySpec {
            dims,
            elem: if full { elem | 128 } else { 0 },
            boundary,
            konst,
        });
    let arrays = match (cfg.arrays, full) {
        (false, _) => Just(Vec::new()).boxed(),
        (true, true) => prop::collection::vec(spec, 0..=2).boxed(),
        // The basic subset: one array, three times in ten.
        (true, false) => (prop::bool::weighted(0.3), spec)
            .prop_map(|(yes, s)| if yes { vec![s] } else { Vec::new() })
            .boxed(),
    };
    let dims = match cfg.dims {
        Some(d) => Just(d.clamp(1, 3)).boxed(),
        None if full => (1u8..=3).boxed(),
        None => Just(1u8).boxed(),
    };
    let depth = if full { 3 } else { 1 };
    let steps = prop::collection::vec(
        step(full, depth, cfg.callee.is_some(), cfg.arrays),
        1..=cfg.max_steps,
    );
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
    (
        varying, uniforms, arrays, dims, steps, outputs, callee, sink,
    )
        .prop_map(
            |(varying, uniforms, arrays, dims, steps, outputs, callee, sink)| Recipe {
                varying,
                uniforms,
                arrays,
                dims,
                steps,
                outputs,
                callee,
                sink,
            },
        )
        .boxed()
}

impl ArraySpec {
    fn ty(&self, full: bool) -> Type {
        let elem = if full {
            type_of(true, self.elem)
        } else {
            Type::f32()
        };
        let boundary = match self.boundary {
            0 => Boundary::Clamp,
            1 => Boundary::Repeat,
            _ => Boundary::Constant(konst(elem, &self.konst).lanes),
        };
        Type::array(self.dims, elem, boundary).expect("array type")
    }
}

/// The constant `lit` of type `t` (lane `i` from the special value `k + i`, or rotated bits).
fn konst(t: Type, lit: &Lit) -> Const {
    let (s, n) = t.lanes().expect("scalar or tuple");
    let lanes: Vec<u64> = (0..n as u64)
        .map(|i| match *lit {
            Lit::Special(k) => {
                let sp = specials(s);
                let k = if k == 0 {
                    0
                } else {
                    k as usize + i as usize * 5
                };
                sp[k % sp.len()]
            }
            Lit::Bits(x) => canon(s, x.rotate_left(17 * i as u32)),
        })
        .collect();
    Const::from_lanes(t, &lanes)
}

/// Verified modules holding one program built from `cfg` (and its callee, if it has one).
pub fn module(cfg: GenConfig) -> impl Strategy<Value = Generated> {
    recipe(&cfg).prop_map(move |r| Generated {
        module: build(&cfg, &r, r.dims),
        name: cfg.name.clone(),
        dims: r.dims,
    })
}

/// The values available to later steps, by type and in order, and which of them are used.
#[derive(Clone)]
struct Pool {
    by_ty: HashMap<Type, Vec<Value>>,
    all: Vec<Value>,
    used: HashSet<Value>,
    /// The type of the most recent non-bool value.
    last: Type,
    /// The value inputs (varying first), from which missing types and fresh operands come.
    inputs: Vec<Value>,
    full: bool,
    /// Fold unused values into region results and outputs.
    sink: bool,
}

impl Pool {
    fn new(b: &ProgramBuilder, inputs: Vec<Value>, full: bool, sink: bool) -> Pool {
        let mut pool = Pool {
            by_ty: HashMap::new(),
            all: Vec::new(),
            used: HashSet::new(),
            last: inputs.first().map_or(Type::i32(), |&v| b.program().ty(v)),
            inputs: inputs.clone(),
            full,
            sink,
        };
        // In reverse: the first varying input is the most recent value, picked first.
        for &v in inputs.iter().rev() {
            pool.push(b, v);
        }
        pool
    }

    fn push(&mut self, b: &ProgramBuilder, v: Value) {
        let t = b.program().ty(v);
        self.by_ty.entry(t).or_default().push(v);
        self.all.push(v);
        if t.elem_scalar() != Bool {
            self.last = t;
        }
    }

    /// A type for a step: below 128, the type of the most recent value (so that steps form
    /// chains of dependent ops); otherwise [`type_of`].
    fn ty(&self, t: u8) -> Type {
        if t < 128 {
            self.last
        } else {
            type_of(self.full, t)
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

    /// Two operands of type `t`, distinct when possible: if both picks are the same value, the
    /// second is replaced by a fresh one (a special constant, or a cast of another input).
    fn get2(&mut self, b: &mut ProgramBuilder, t: Type, x: u16, y: u16) -> (Value, Value) {
        let first = self.get(b, t, x);
        let second = self.get(b, t, y);
        if second != first {
            return (first, second);
        }
        let lanes = |b: &ProgramBuilder, v: Value| b.program().ty(v).lanes().map(|l| l.1);
        let others: Vec<Value> = (self.inputs.iter().copied())
            .filter(|&v| v != first && lanes(b, v) == t.lanes().map(|l| l.1))
            .collect();
        let fresh = if others.is_empty() || y % 2 == 1 {
            b.constant(konst(t, &Lit::Special((y / 2) as u8)))
        } else {
            let src = others[y as usize / 2 % others.len()];
            if b.program().ty(src) == t {
                return (first, src);
            }
            b.cast(src, t)
        };
        self.push(b, fresh);
        self.used.insert(fresh);
        (first, fresh)
    }

    /// A scalar value to seed other types from: a scalar input, else lane 0 of a tuple input,
    /// else a constant.
    fn scalar_source(&mut self, b: &mut ProgramBuilder, sel: u16) -> Value {
        let scalars: Vec<Value> = (self.inputs.iter().copied())
            .filter(|&v| b.program().ty(v).lanes().is_some_and(|l| l.1 == 1))
            .collect();
        if !scalars.is_empty() {
            return scalars[sel as usize % scalars.len()];
        }
        match self.inputs.get(sel as usize % self.inputs.len().max(1)) {
            Some(&t) => b.extract(t, 0),
            None => b.constant(Const::scalar(I32, small(I32, sel as i32 % 32))),
        }
    }

    /// A value of type `t` (see [`Pool::pick`]), seeding the type first if it has none.
    fn get(&mut self, b: &mut ProgramBuilder, t: Type, sel: u16) -> Value {
        if self.by_ty.get(&t).is_none_or(Vec::is_empty) {
            let v = self.seed(b, t, sel);
            self.push(b, v);
        }
        let vs = self.by_ty[&t].clone();
        self.pick(&vs, sel)
    }

    fn seed(&mut self, b: &mut ProgramBuilder, t: Type, sel: u16) -> Value {
        let (s, n) = t.lanes().expect("scalar or tuple");
        if n > 1 {
            // A tuple of the same lane count cast, else a tuple of scalars.
            let same_lanes: Vec<Value> = (self.all.iter().copied())
                .filter(|&v| b.program().ty(v).lanes().is_some_and(|l| l.1 == n))
                .collect();
            if let Some(&v) = same_lanes.get(sel as usize % same_lanes.len().max(1)) {
                return b.cast(v, t);
            }
            let lane = self.get(b, Type::scalar(s), sel);
            let lanes: Vec<Value> = (0..n)
                .map(|i| {
                    if i == 0 {
                        lane
                    } else {
                        self.get(b, Type::scalar(s), sel.wrapping_add(i as u16))
                    }
                })
                .collect();
            return b.tuple(&lanes);
        }
        if s == Bool {
            let x = self.get(b, Type::i32(), 0);
            let zero = b.i32(0);
            return b.lt(x, zero);
        }
        let src = self.scalar_source(b, sel);
        b.cast(src, t)
    }

    /// Folds `v` into `out` so that every bit of `v` that matters reaches `out`: `v`'s lanes
    /// as integer bits (floats bitcast after replacing NaN by one quiet NaN, since NaN
    /// payloads are unspecified), xor-ed together, cast to `out`'s lane type and xor-ed into
    /// every lane of `out` (a float `out` through its bits, NaN replaced the same way).
    fn fold_into(b: &mut ProgramBuilder, out: Value, v: Value) -> Value {
        let x = int_bits(b, v);
        let (x, n) = (x, b.program().ty(x).lanes().expect("value").1);
        let mut h = if n == 1 { x } else { b.extract(x, 0) };
        for i in 1..n {
            let l = b.extract(x, i);
            h = b.op(O::Xor, &[h, l]);
        }
        let ot = b.program().ty(out);
        let (os, on) = ot.lanes().expect("value");
        let o_bits = int_bits(b, out);
        let bt = b.program().ty(o_bits);
        let h = b.cast(h, Type::scalar(bt.elem_scalar()));
        let h = if on == 1 {
            h
        } else {
            b.tuple(&vec![h; on as usize])
        };
        let r = b.op(O::Xor, &[o_bits, h]);
        if os.is_float() {
            b.bitcast(r, ot)
        } else if os == Bool {
            b.cast(r, ot)
        } else {
            r
        }
    }

    /// Folds the values of this region (those after position `base` of the pool) that
    /// nothing uses into `v`, when the recipe asks for it (so that a region's work is live).
    fn sink(&mut self, b: &mut ProgramBuilder, v: Value, base: usize) -> Value {
        if !self.sink {
            return v;
        }
        let unused: Vec<Value> = (self.all[base.min(self.all.len())..].iter())
            .filter(|x| **x != v && !self.used.contains(x))
            .copied()
            .collect();
        let mut v = v;
        for x in unused {
            self.used.insert(x);
            v = Pool::fold_into(b, v, x);
        }
        v
    }
}

/// `v` as integer lanes carrying its bits: floats bitcast to unsigned integers of their
/// width (any NaN first replaced by the canonical quiet NaN), bools cast to `u8`.
fn int_bits(b: &mut ProgramBuilder, v: Value) -> Value {
    let t = b.program().ty(v);
    let s = t.elem_scalar();
    if s == Bool {
        return b.cast(v, t.with_elem(U8));
    }
    if !s.is_float() {
        return v;
    }
    let nan = konst(t, &Lit::Special(0));
    let nan = b.constant(nan);
    let ok = b.op(O::Eq, &[v, v]);
    let clean = b.select(ok, v, nan);
    let u = match s {
        F16 => U16,
        F32 => U32,
        _ => U64,
    };
    b.bitcast(clean, t.with_elem(u))
}

/// The programs and arrays a body may use besides its pool.
struct Env<'a> {
    callee: Option<&'a Program>,
    arrays: Vec<Value>,
    dims: u8,
    full: bool,
}

/// The arithmetic ops every numeric type has.
const ARITH: [O; 7] = [O::Add, O::Sub, O::Mul, O::Div, O::Rem, O::Min, O::Max];

/// Ops for binary steps on values of type `t`.
fn binary_ops(s: ScalarType, full: bool) -> Vec<O> {
    match s {
        Bool => vec![O::And, O::Or, O::Xor],
        s if s.is_float() && full => [&ARITH[..], &[O::Add, O::Mul, O::Pow, O::Atan2]].concat(),
        s if s.is_float() => ARITH.to_vec(),
        _ => [&ARITH[..], &[O::And, O::Or, O::Xor, O::Shl, O::Shr]].concat(),
    }
}

/// Ops for unary steps on values of type `t`.
fn unary_ops(s: ScalarType, full: bool) -> Vec<O> {
    match s {
        Bool => vec![O::Not],
        s if s.is_float() && full => vec![
            O::Neg,
            O::Abs,
            O::Sqrt,
            O::Neg,
            O::Abs,
            O::Sqrt,
            O::Rsqrt,
            O::Exp,
            O::Exp2,
            O::Log,
            O::Log2,
            O::Sin,
            O::Cos,
            O::Tan,
            O::Floor,
            O::Ceil,
            O::Round,
            O::Trunc,
        ],
        s if s.is_float() => vec![O::Neg, O::Abs, O::Sqrt],
        _ => vec![O::Neg, O::Abs, O::Not],
    }
}

/// The type `t` with a float lane type (`f32` for non-float lanes).
fn as_float(t: Type) -> Type {
    if t.elem_scalar().is_float() {
        t
    } else {
        t.with_elem(F32)
    }
}

/// Emits the loop bound: a constant, or `and x, 7` of an i32 value (divergent).
fn emit_bound(b: &mut ProgramBuilder, pool: &mut Pool, k: &Bound) -> Value {
    match *k {
        Bound::Const(k) => b.i32(k as i32),
        Bound::Computed(sel) => {
            let x = pool.get(b, Type::i32(), sel);
            let seven = b.i32(7);
            b.op(O::And, &[x, seven])
        }
    }
}

fn emit(b: &mut ProgramBuilder, env: &Env, pool: &mut Pool, step: &Step) {
    let full = env.full;
    let v = match *step {
        Step::Bin(o, t, x, y) => {
            let t = pool.ty(t);
            let ops = binary_ops(t.elem_scalar(), full);
            let (x, y) = pool.get2(b, t, x, y);
            b.op(ops[o as usize % ops.len()], &[x, y])
        }
        Step::Un(o, t, x) => {
            let t = pool.ty(t);
            let ops = unary_ops(t.elem_scalar(), full);
            let x = pool.get(b, t, x);
            b.op(ops[o as usize % ops.len()], &[x])
        }
        Step::Fma(t, x, y, z) => {
            let t = as_float(pool.ty(t));
            let (x, y) = pool.get2(b, t, x, y);
            let z = pool.get(b, t, z);
            b.fma(x, y, z)
        }
        Step::Cmp(o, t, x, y) => {
            let t = pool.ty(t);
            let ops = if t.elem_scalar() == Bool {
                &CMP[..2]
            } else {
                &CMP[..]
            };
            let (x, y) = pool.get2(b, t, x, y);
            b.op(ops[o as usize % ops.len()], &[x, y])
        }
        Step::Select(t, per_lane, c, x, y) => {
            let t = pool.ty(t);
            let ct = if per_lane {
                t.with_elem(Bool)
            } else {
                Type::bool()
            };
            let c = pool.get(b, ct, c);
            let (x, y) = pool.get2(b, t, x, y);
            b.select(c, x, y)
        }
        Step::Cast(to, from, x) => {
            let from = if from < 128 {
                pool.last
            } else if full {
                type_of(true, from)
            } else {
                Type::scalar([F32, I32, U32, F64, Bool][from as usize % 5])
            };
            let n = from.lanes().map_or(1, |l| l.1);
            let to_s = if full {
                FULL_SCALARS[to as usize % FULL_SCALARS.len()]
            } else {
                BASIC_TYS[to as usize % BASIC_TYS.len()]
            };
            let x = pool.get(b, from, x);
            let to = if n == 1 {
                Type::scalar(to_s)
            } else {
                Type::tuple(to_s, n).expect("lanes")
            };
            b.cast(x, to)
        }
        Step::Bitcast(t, to, x) => {
            let t = pool.ty(t);
            let s = t.elem_scalar();
            if s == Bool {
                return;
            }
            let same_width: Vec<ScalarType> = (ScalarType::ALL.iter().copied())
                .filter(|u| *u != Bool && *u != s && u.bits() == s.bits())
                .collect();
            let Some(&u) = same_width.get(to as usize % same_width.len().max(1)) else {
                return;
            };
            let x = pool.get(b, t, x);
            // NaN payloads are unspecified (DESIGN §3): bitcast a float only after replacing
            // any NaN by one quiet NaN.
            let x = if s.is_float() {
                let nan = b.constant(konst(t, &Lit::Special(0)));
                let ok = b.op(O::Eq, &[x, x]);
                b.select(ok, x, nan)
            } else {
                x
            };
            b.bitcast(x, t.with_elem(u))
        }
        Step::Const(t, ref lit) => {
            let t = pool.ty(t);
            b.constant(konst(t, lit))
        }
        Step::Tuple(t, n, lanes) => {
            let s = pool.ty(t).elem_scalar();
            let n = 2 + n % 3;
            let vals: Vec<Value> = (0..n as usize)
                .map(|i| pool.get(b, Type::scalar(s), lanes[i]))
                .collect();
            b.tuple(&vals)
        }
        Step::Extract(t, lane, x) => {
            let Some(t) = tuple_type(pool, t) else { return };
            let n = t.lanes().expect("tuple").1;
            let x = pool.get(b, t, x);
            b.extract(x, lane % n)
        }
        Step::Insert(t, mask, x, y) => {
            let Some(t) = tuple_type(pool, t) else { return };
            let (s, n) = t.lanes().expect("tuple");
            let lanes: Vec<u8> = (0..n).filter(|i| mask >> i & 1 == 1).collect();
            let lanes = if lanes.is_empty() {
                vec![mask % n]
            } else {
                lanes
            };
            let vt = if lanes.len() == 1 {
                Type::scalar(s)
            } else {
                Type::tuple(s, lanes.len() as u8).expect("lanes")
            };
            let x = pool.get(b, t, x);
            let y = pool.get(b, vt, y);
            b.insert(x, y, &lanes)
        }
        Step::Swizzle(t, lanes, n, x) => {
            let t = pool.ty(t);
            let w = t.lanes().expect("value").1;
            let lanes: Vec<u8> = lanes[..n as usize].iter().map(|l| l % w).collect();
            let x = pool.get(b, t, x);
            b.swizzle(x, &lanes)
        }
        Step::Geom(o, t, x, y) => {
            let t = as_float(pool.ty(t));
            let (s, n) = t.lanes().expect("value");
            let op = [O::Dot, O::Length, O::Normalize, O::Cross][o as usize % 4];
            let n = match op {
                O::Cross => 3,
                _ if n == 1 => 2 + o / 4 % 3,
                _ => n,
            };
            let t = Type::tuple(s, n).expect("lanes");
            match op {
                O::Length | O::Normalize => {
                    let x = pool.get(b, t, x);
                    b.op(op, &[x])
                }
                _ => {
                    let (x, y) = pool.get2(b, t, x, y);
                    b.op(op, &[x, y])
                }
            }
        }
        Step::Read(a, c, wide) => {
            let Some(&arr) = env.arrays.get(a as usize % env.arrays.len().max(1)) else {
                return;
            };
            let dims = b.program().ty(arr).array_parts().expect("array").0;
            let cs = if wide { I64 } else { I32 };
            let ct = if dims == 1 {
                Type::scalar(cs)
            } else {
                Type::tuple(cs, dims).expect("lanes")
            };
            let c = pool.get(b, ct, c);
            b.read(arr, c)
        }
        Step::Stencil(a, offs, wide) => {
            let Some(&arr) = env.arrays.get(a as usize % env.arrays.len().max(1)) else {
                return;
            };
            let dims = b.program().ty(arr).array_parts().expect("array").0;
            if dims != env.dims {
                return;
            }
            let t = coord_type(dims, wide);
            let s = if wide { I64 } else { I32 };
            let lanes: Vec<u64> = offs[..dims as usize]
                .iter()
                .map(|&o| canon(s, o as i64 as u64))
                .collect();
            let i = b.index(t);
            let c = b.constant(Const::from_lanes(t, &lanes));
            let q = b.op(O::Add, &[i, c]);
            b.read(arr, q)
        }
        Step::Extent(a, wide) => {
            let Some(&arr) = env.arrays.get(a as usize % env.arrays.len().max(1)) else {
                return;
            };
            let dims = b.program().ty(arr).array_parts().expect("array").0;
            b.extent(arr, coord_type(dims, wide))
        }
        Step::Builtin(shape, wide) => {
            let t = coord_type(env.dims, wide);
            if shape {
                b.shape(t)
            } else {
                b.index(t)
            }
        }
        Step::Call(sels) => {
            let Some(f) = env.callee else { return };
            let args: Vec<Value> = (f.params.iter().zip(sels))
                .map(|(par, k)| pool.get(b, f.ty(par.value), k))
                .collect();
            for r in b.call(f, &args) {
                pool.push(b, r);
            }
            return;
        }
        Step::If(konst, c, t, ref then, ref els, yt, ye) => {
            let t = pool.ty(t);
            let c = match konst {
                Some(k) => b.bool(k),
                None => pool.get(b, Type::bool(), c),
            };
            let branch = |b: &mut ProgramBuilder, steps: &[Step], y: u16| {
                let mut inner = pool.clone();
                let base = inner.all.len();
                for st in steps {
                    emit(b, env, &mut inner, st);
                }
                let v = inner.get(b, t, y);
                vec![inner.sink(b, v, base)]
            };
            b.if_else(c, |b| branch(b, then, yt), |b| branch(b, els, ye))[0]
        }
        Step::For(ref k, st, t, init, ref body, y) => {
            let t = pool.ty(t);
            let acc = b.declare_var("acc", t);
            let init = pool.get(b, t, init);
            b.def_var(acc, init);
            let hi = emit_bound(b, pool, k);
            let (lo, step) = (b.i32(0), b.i32(st as i32));
            let mut inner = pool.clone();
            let base = inner.all.len();
            b.for_range(lo, hi, step, |b, i| {
                let a = b.use_var(acc);
                inner.push(b, i);
                inner.push(b, a); // most recent: the body's steps start from the carried value
                for st in body {
                    emit(b, env, &mut inner, st);
                }
                let next = inner.get(b, t, y);
                let next = inner.sink(b, next, base);
                b.def_var(acc, next);
            });
            b.use_var(acc)
        }
        Step::Loop(is_while, ref k, t, init, ref body, y, exit) => {
            let t = pool.ty(t);
            let acc = b.declare_var("acc", t);
            let count = b.declare_var("n", Type::i32());
            let init = pool.get(b, t, init);
            b.def_var(acc, init);
            let zero = b.i32(0);
            b.def_var(count, zero);
            let bound = emit_bound(b, pool, k);
            let exit_v = pool.get(b, Type::bool(), exit);
            let mut inner = pool.clone();
            let base = inner.all.len();
            let body_fn = |b: &mut ProgramBuilder| {
                let a = b.use_var(acc);
                inner.push(b, a);
                for st in body {
                    emit(b, env, &mut inner, st);
                }
                let next = inner.get(b, t, y);
                let next = inner.sink(b, next, base);
                b.def_var(acc, next);
                let n = b.use_var(count);
                let one = b.i32(1);
                let n1 = b.op(O::Add, &[n, one]);
                b.def_var(count, n1);
            };
            // Runs while n < bound and not (the exit value and n > 0): the exit condition
            // makes lanes leave at different trips.
            let cond_fn = |b: &mut ProgramBuilder, until: bool| {
                let n = b.use_var(count);
                let more = b.lt(n, bound);
                let z = b.i32(0);
                let started = b.op(O::Gt, &[n, z]);
                let leave = b.op(O::And, &[exit_v, started]);
                let stay = b.op(O::Not, &[leave]);
                let go = b.op(O::And, &[more, stay]);
                if until {
                    b.op(O::Not, &[go])
                } else {
                    go
                }
            };
            if is_while {
                b.while_(|b| cond_fn(b, false), body_fn);
            } else {
                b.do_until(body_fn, |b| cond_fn(b, true));
            }
            b.use_var(acc)
        }
    };
    pool.push(b, v);
}

/// `i32`/`i64` with `dims` lanes (a scalar for one).
fn coord_type(dims: u8, wide: bool) -> Type {
    let s = if wide { I64 } else { I32 };
    if dims == 1 {
        Type::scalar(s)
    } else {
        Type::tuple(s, dims).expect("lanes")
    }
}

/// A tuple type for a tuple op: the step's type if a tuple, else a pair of its lanes.
fn tuple_type(pool: &Pool, t: u8) -> Option<Type> {
    let t = pool.ty(t);
    let (s, n) = t.lanes()?;
    Some(if n > 1 { t } else { Type::tuple(s, 2)? })
}

/// Builds program `cfg.name` from `r` (with its callee first, if any) and verifies it;
/// `index`/`shape` have `dims` lanes (a callee's are its caller's).
fn build(cfg: &GenConfig, r: &Recipe, dims: u8) -> Module {
    let callee_mod = (cfg.callee.as_deref())
        .zip(r.callee.as_deref())
        .map(|(c, cr)| {
            let ccfg = GenConfig {
                name: c.to_string(),
                callee: None,
                prefix: String::new(),
                ..cfg.clone()
            };
            build(&ccfg, cr, dims)
        });
    let prefix = &cfg.prefix;
    let mut b = ProgramBuilder::new(cfg.name.as_str());
    let mut inputs: Vec<Value> = (r.varying.iter().enumerate())
        .map(|(k, &t)| b.varying(&format!("{prefix}x{k}"), t))
        .collect();
    for (k, &t) in r.uniforms.iter().enumerate() {
        inputs.push(b.uniform(&format!("{prefix}u{k}"), t));
    }
    let arrays: Vec<Value> = (r.arrays.iter().enumerate())
        .map(|(k, a)| b.array(&format!("{prefix}a{k}"), a.ty(cfg.full)))
        .collect();
    let mut pool = Pool::new(&b, inputs, cfg.full, r.sink);
    let env = Env {
        callee: callee_mod.as_ref().and_then(|m| m.programs.last()),
        arrays,
        dims,
        full: cfg.full,
    };
    for st in &r.steps {
        emit(&mut b, &env, &mut pool, st);
    }
    let mut outs: Vec<Value> = (r.outputs.iter())
        .map(|&(t, y)| match t {
            Some(t) => pool.get(&mut b, t, y),
            None if pool.all.is_empty() => pool.get(&mut b, Type::i32(), y),
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
            outs[k] = Pool::fold_into(&mut b, outs[k], v);
        }
    }
    for (k, &v) in outs.iter().enumerate() {
        b.output(&format!("o{k}"), v);
    }
    b.finish_module()
        .unwrap_or_else(|e| panic!("the generator built an invalid program: {e}\n{r:?}"))
}
