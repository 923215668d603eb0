//! Collectives on every device (DESIGN §5): reduce with a user combiner, the built-in
//! reductions (sum, product, min, max, arg_min, arg_max, count), gather and scatter.
//!
//! A reduction is a plan of ordinary launches of generated programs with the combiner
//! inlined, so it runs on every device and the interpreter defines its result. Its order of
//! combination depends on the element count alone (docs/semantics.md, "Reductions"), never
//! on the device, thread count or launch geometry, so every device gives the same bits,
//! floating-point sums included.
//!
//! The built-in reductions, whose combiners commute, run in passes of fan-in [`FANIN`]:
//! each pass combines `FANIN` equal contiguous segments of the current array element-wise
//! (varying inputs viewed in place: contiguous loads on the CPU, coalesced ones on a GPU),
//! leaving a `FANIN`-times shorter array; the elements left over by a pass (fewer than
//! `FANIN`) are kept on the host, and when at most `FANIN` partials remain one host-side fold
//! combines them, then the left-overs from the last pass back to the first.
//!
//! [`crate::reduce`] with a user combiner, which need not commute, keeps the order of the
//! elements: each level cuts the array into segments of [`SEGMENT`] elements and each
//! segment into [`LANES`] contiguous runs of [`RUN`]; `reduce.lanes` folds each run left to
//! right (launch shape `[segments, LANES]`), `reduce.tree` combines a segment's runs pairwise
//! (run `j` with run `j + o` for `o` = 1, 2, 4, 8, 16, `j` a multiple of `2o`), and the
//! segments' results are the next level's elements, until one is left.

use crate::array::{Array, ArrayData};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::exec::{prepare, run_arrays, ArgVal};
use crate::scalar::{Elem, Scalar};
use std::sync::Arc;
use weft_ir::builder::ProgramBuilder;
use weft_ir::interp::Arg;
use weft_ir::{Boundary, Const, Module, Opcode, ScalarType, Type};

/// The fan-in of the built-in reductions' passes, on every device (the module docs). 16:
/// on a GPU each thread reads 16 coalesced streams and the first pass writes 1/16 of what it
/// reads; on the CPU more input streams per thread read memory more slowly.
pub const FANIN: usize = 16;

/// Runs per segment of a user-combiner reduction (the module docs; docs/semantics.md).
pub const LANES: usize = 32;

/// Elements per run of a full segment.
pub const RUN: usize = 64;

/// Elements per segment of the reduction tree: [`LANES`] × [`RUN`].
pub const SEGMENT: usize = LANES * RUN;

/// A combiner: program `name` of `module` with `2k` inputs and `k` outputs of the state types.
#[derive(Clone)]
struct Combiner {
    module: Module,
    name: String,
    state: Vec<Type>,
}

impl Combiner {
    /// Checks a user program as a combiner of `k`-lane states (DESIGN §5: two inputs, one
    /// output, all of one type, for `k = 1`).
    fn check(module: &Module, name: &str, what: &str) -> Result<Combiner> {
        let p = module
            .get(name)
            .ok_or_else(|| Error::argument(format!("{what}: no program @{name}")))?;
        let ins: Vec<Type> = p.params.iter().map(|q| p.ty(q.value)).collect();
        let outs: Vec<Type> = p.outputs.iter().map(|o| o.ty).collect();
        if outs.is_empty() || ins.len() != 2 * outs.len() {
            return Err(Error::argument(format!(
                "{what}: a combiner takes 2 inputs and gives 1 output of the same type; \
                 @{name} takes {} and gives {}",
                ins.len(),
                outs.len()
            )));
        }
        let k = outs.len();
        if ins[..k] != outs[..] || ins[k..] != outs[..] {
            return Err(Error::argument(format!(
                "{what}: the combiner's inputs and output must have one type; @{name} has \
                 inputs ({}) and outputs ({})",
                list(&ins),
                list(&outs)
            )));
        }
        Ok(Combiner {
            module: inlined(module, name)?,
            name: name.to_string(),
            state: outs,
        })
    }

    fn program(&self) -> &weft_ir::Program {
        self.module.get(&self.name).expect("checked")
    }
}

fn list(ts: &[Type]) -> String {
    ts.iter()
        .map(|t| t.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// How the first pass turns an element into a state: as it is, or through a map program
/// taking the element (and, when `with_index`, its i64 position) to the state.
struct MapFn {
    module: Module,
    name: String,
    with_index: bool,
}

/// Program `name` of `m` alone, with every call inlined (generated programs call it, and
/// the builder only adds the programs called directly).
fn inlined(m: &Module, name: &str) -> Result<Module> {
    let mut m = m.clone();
    weft_ir::passes::run_pipeline(&mut m, "inline")
        .map_err(|e| Error::invalid_message(format!("inlining @{name}: {e}")))?;
    m.programs.retain(|p| p.name == name);
    Ok(m)
}

/// Appends `extra`'s programs missing from `m`.
fn merge(m: &mut Module, extra: &Module) {
    for p in &extra.programs {
        if m.get(&p.name).is_none() {
            m.programs
                .insert(m.programs.len().saturating_sub(1), p.clone());
        }
    }
}

fn built(b: ProgramBuilder) -> Result<Module> {
    b.finish_module().map_err(Error::invalid)
}

/// Generated programs, built once per (combiner, map, order, program): building and
/// verifying them cost more host time than a GPU pass over 2^21 elements. At most
/// [`PASSES_CAPACITY`] are kept (the cache starts over when full), so a process reducing with
/// many combiners does not grow without bound.
type Cache = std::sync::Mutex<std::collections::HashMap<CacheKey, Arc<Module>>>;
type CacheKey = (u64, u64, Kind, Vec<Type>);

/// Which generated program a cache entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    /// `reduce.pass` of fan-in `k`.
    Pass(usize),
    /// `reduce.final` folding `len` states.
    Fold(usize),
    /// `reduce.lanes`.
    Lanes,
    /// `reduce.tree`.
    Tree,
}
static PASSES: std::sync::OnceLock<Cache> = std::sync::OnceLock::new();

/// The most generated programs [`PASSES`] holds.
const PASSES_CAPACITY: usize = 1024;

/// The generated program `kind` for (`c`, `map`, element types `elems`) from the cache,
/// built by `build` on first use.
fn cached(
    c: &Combiner,
    map: Option<&MapFn>,
    kind: Kind,
    elems: &[Type],
    build: impl FnOnce() -> Result<Module>,
) -> Result<Arc<Module>> {
    let fp = |m: &Module| weft_ir::launch::fingerprint(m);
    let key = (
        fp(&c.module),
        map.map_or(0, |m| fp(&m.module) ^ m.with_index as u64),
        kind,
        elems.to_vec(),
    );
    let cache = PASSES.get_or_init(Default::default);
    if let Some(m) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return Ok(m.clone());
    }
    let m = Arc::new(build()?);
    let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
    if cache.len() >= PASSES_CAPACITY {
        cache.clear();
    }
    cache.insert(key, m.clone());
    Ok(m)
}

/// `v` as an i64 constant.
fn i64c(b: &mut ProgramBuilder, v: usize) -> weft_ir::Value {
    b.constant(Const::scalar(ScalarType::I64, v as u64))
}

/// One array parameter `{prefix}{q}` of `dims` axes (clamped) per element type in `elems`.
fn array_params(
    b: &mut ProgramBuilder,
    prefix: &str,
    dims: u8,
    elems: &[Type],
) -> Result<Vec<weft_ir::Value>> {
    elems
        .iter()
        .enumerate()
        .map(|(q, &t)| {
            let at = Type::array(dims, t, Boundary::Clamp)
                .ok_or_else(|| Error::argument(format!("reduce: no arrays of {t}")))?;
            Ok(b.array(&format!("{prefix}{q}"), at))
        })
        .collect()
}

/// `reduce.lanes` (launch shape `[segments, LANES]`): element `(s, j)` folds run `j` of
/// segment `s` of the `n` elements of the 1-D arrays `x0 …` (one per state component: the
/// elements, or the previous level's states) left to right with the combiner. A run with
/// no elements gives zeros, which `reduce.tree` never reads.
fn lanes_program(c: &Combiner, elems: &[Type]) -> Result<Module> {
    let mut b = ProgramBuilder::new("reduce.lanes");
    let xs = array_params(&mut b, "x", 1, elems)?;
    let n = b.uniform("n", Type::i64());
    let idx = b.index(Type::tuple(ScalarType::I64, 2).expect("2 lanes"));
    let s = b.extract(idx, 0);
    let j = b.extract(idx, 1);
    let seg = i64c(&mut b, SEGMENT);
    let seg_start = b.op(Opcode::Mul, &[s, seg]);
    let seg_stop = b.op(Opcode::Add, &[seg_start, seg]);
    let seg_end = b.op(Opcode::Min, &[seg_stop, n]);
    let run = i64c(&mut b, RUN);
    let off = b.op(Opcode::Mul, &[j, run]);
    let start = b.op(Opcode::Add, &[seg_start, off]);
    let stop = b.op(Opcode::Add, &[start, run]);
    let end = b.op(Opcode::Min, &[stop, seg_end]);
    let step = i64c(&mut b, 1);
    let cp = c.program().clone();
    let item = |b: &mut ProgramBuilder, p: weft_ir::Value| -> Vec<weft_ir::Value> {
        let at = b.cast(p, Type::i32());
        xs.iter().map(|&x| b.read(x, at)).collect()
    };
    let vars: Vec<weft_ir::builder::Variable> = c
        .state
        .iter()
        .enumerate()
        .map(|(q, &t)| {
            let v = b.declare_var(&format!("acc{q}"), t);
            let z = b.constant(Const::zero(t));
            b.def_var(v, z);
            v
        })
        .collect();
    let has = b.op(Opcode::Lt, &[start, end]);
    b.if_(has, |b| {
        let first = item(b, start);
        for (&v, x) in vars.iter().zip(first) {
            b.def_var(v, x);
        }
        let next = b.op(Opcode::Add, &[start, step]);
        b.for_range(next, end, step, |b, p| {
            let mut args: Vec<weft_ir::Value> = vars.iter().map(|&v| b.use_var(v)).collect();
            args.extend(item(b, p));
            let r = b.call(&cp, &args);
            for (&v, x) in vars.iter().zip(r) {
                b.def_var(v, x);
            }
        });
    });
    for (q, &v) in vars.iter().enumerate() {
        let x = b.use_var(v);
        b.output(&format!("s{q}"), x);
    }
    let mut m = built(b)?;
    merge(&mut m, &c.module);
    weft_ir::verify_module(&m).map_err(Error::invalid)?;
    Ok(m)
}

/// `reduce.tree` (launch shape `[segments]`): element `s` combines the lanes of segment `s`
/// (read from the `[segments, LANES]` arrays `p0 …` of `reduce.lanes`) pairwise — lane `j`
/// with lane `j + o` for `o` = 1, 2, 4, 8, 16 and `j` a multiple of `2o` — skipping lanes
/// that hold no element of the `n`.
fn tree_program(c: &Combiner) -> Result<Module> {
    let mut b = ProgramBuilder::new("reduce.tree");
    let ps = array_params(&mut b, "p", 2, &c.state)?;
    let n = b.uniform("n", Type::i64());
    let s = b.index(Type::i64());
    let seg = i64c(&mut b, SEGMENT);
    let seg_start = b.op(Opcode::Mul, &[s, seg]);
    let left = b.op(Opcode::Sub, &[n, seg_start]);
    let len = b.op(Opcode::Min, &[left, seg]);
    let r1 = i64c(&mut b, RUN - 1);
    let run = i64c(&mut b, RUN);
    let up = b.op(Opcode::Add, &[len, r1]);
    let present = b.op(Opcode::Div, &[up, run]);
    let s32 = b.cast(s, Type::i32());
    let coord_t = Type::tuple(ScalarType::I32, 2).expect("2 lanes");
    let cp = c.program().clone();
    let mut vars: Vec<Vec<weft_ir::builder::Variable>> = Vec::new();
    for j in 0..LANES {
        let jc = b.constant(Const::scalar(ScalarType::I32, j as u64));
        let at = b.tuple(&[s32, jc]);
        debug_assert_eq!(b.program().ty(at), coord_t);
        let lane: Vec<weft_ir::builder::Variable> = ps
            .iter()
            .enumerate()
            .map(|(q, &p)| {
                let v = b.declare_var(&format!("l{j}_{q}"), c.state[q]);
                let x = b.read(p, at);
                b.def_var(v, x);
                v
            })
            .collect();
        vars.push(lane);
    }
    let mut o = 1;
    while o < LANES {
        for j in (0..LANES).step_by(2 * o) {
            let jo = i64c(&mut b, j + o);
            let cond = b.op(Opcode::Lt, &[jo, present]);
            let (dst, src) = (vars[j].clone(), vars[j + o].clone());
            b.if_(cond, |b| {
                let mut args: Vec<weft_ir::Value> = dst.iter().map(|&v| b.use_var(v)).collect();
                args.extend(src.iter().map(|&v| b.use_var(v)));
                let r = b.call(&cp, &args);
                for (&v, x) in dst.iter().zip(r) {
                    b.def_var(v, x);
                }
            });
        }
        o *= 2;
    }
    for (q, &v) in vars[0].iter().enumerate() {
        let x = b.use_var(v);
        b.output(&format!("s{q}"), x);
    }
    let mut m = built(b)?;
    merge(&mut m, &c.module);
    weft_ir::verify_module(&m).map_err(Error::invalid)?;
    Ok(m)
}

/// The pass program `@reduce.pass`: `K` groups of state inputs (or, with `map`, `K`
/// elements of `elem` and uniforms `base` and `seg`), folded left with the combiner.
fn pass_program(c: &Combiner, map: Option<(&MapFn, Type)>, k: usize) -> Result<Module> {
    let mut b = ProgramBuilder::new("reduce.pass");
    let cp = c.program().clone();
    let mut groups: Vec<Vec<weft_ir::Value>> = Vec::new();
    match map {
        None => {
            for j in 0..k {
                groups.push(
                    c.state
                        .iter()
                        .enumerate()
                        .map(|(s, &t)| b.varying(&format!("x{j}_{s}"), t))
                        .collect(),
                );
            }
        }
        Some((mf, elem)) => {
            let xs: Vec<weft_ir::Value> =
                (0..k).map(|j| b.varying(&format!("x{j}"), elem)).collect();
            let base = b.uniform("base", Type::i64());
            let seg = b.uniform("seg", Type::i64());
            let mp = mf.module.get(&mf.name).expect("checked").clone();
            let idx = b.index(Type::i64());
            for (j, &x) in xs.iter().enumerate() {
                let mut args = vec![x];
                if mf.with_index {
                    let jj = b.constant(Const::scalar(ScalarType::I64, j as u64));
                    let off = b.op(Opcode::Mul, &[jj, seg]);
                    let i0 = b.op(Opcode::Add, &[idx, base]);
                    args.push(b.op(Opcode::Add, &[i0, off]));
                }
                groups.push(b.call(&mp, &args));
            }
        }
    }
    fold_left(&mut b, &cp, &groups);
    let mut m = built(b)?;
    merge(&mut m, &c.module);
    if let Some((mf, _)) = map {
        merge(&mut m, &mf.module);
    }
    weft_ir::verify_module(&m).map_err(Error::invalid)?;
    Ok(m)
}

/// Folds `states` left with the combiner on the interpreter (one element run).
fn fold_host(c: &Combiner, states: &[Vec<Const>]) -> Result<Vec<Const>> {
    if states.len() == 1 {
        return Ok(states[0].clone());
    }
    let m = cached(c, None, Kind::Fold(states.len()), &[], || {
        fold_program(c, states.len())
    })?;
    let args: Vec<Arg> = states.iter().flatten().map(|&c| Arg::Value(c)).collect();
    Ok(weft_ir::Interpreter::new(&m).run_element("reduce.final", &args, &[0], &[1])?)
}

/// The host fold's program: `len` groups of uniform states folded left with the combiner.
fn fold_program(c: &Combiner, len: usize) -> Result<Module> {
    let mut b = ProgramBuilder::new("reduce.final");
    let cp = c.program().clone();
    let ins: Vec<Vec<weft_ir::Value>> = (0..len)
        .map(|j| {
            c.state
                .iter()
                .enumerate()
                .map(|(s, &t)| b.uniform(&format!("u{j}_{s}"), t))
                .collect()
        })
        .collect();
    fold_left(&mut b, &cp, &ins);
    let mut m = built(b)?;
    merge(&mut m, &c.module);
    // Inlined once here, so each host fold's interpreter runs the module as it is instead of
    // copying it to merge repeated calls (exact: inlining keeps every bit).
    weft_ir::passes::run_pipeline(&mut m, "inline")
        .map_err(|e| Error::invalid_message(format!("inlining the host fold: {e}")))?;
    Ok(m)
}

/// Emits `comb(…comb(comb(g0, g1), g2)…, gn)` over groups of state values and makes the
/// result the outputs `s0 …`.
fn fold_left(b: &mut ProgramBuilder, comb: &weft_ir::Program, groups: &[Vec<weft_ir::Value>]) {
    let mut acc = groups[0].clone();
    for g in &groups[1..] {
        let mut args = acc.clone();
        args.extend(g);
        acc = b.call(comb, &args);
    }
    for (s, v) in acc.into_iter().enumerate() {
        b.output(&format!("s{s}"), v);
    }
}

/// A 1-D view of elements `lo .. lo + n` of a contiguous array.
fn view(d: &ArrayData, lo: usize, n: usize) -> ArrayData {
    let mut v = d.clone();
    v.offset += lo;
    v.shape = vec![n];
    v.strides = vec![1];
    v.boundary = None;
    v
}

/// Host values of elements `lo .. lo + n` of each state array (only those elements move).
fn host_states(cur: &[ArrayData], lo: usize, n: usize) -> Result<Vec<Vec<Const>>> {
    let hosts = cur
        .iter()
        .map(|d| match &d.source {
            crate::array::Source::Stored(s) => s.host_range(d.offset + lo, n),
            crate::array::Source::Grid => unreachable!("made contiguous"),
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((0..n)
        .map(|e| hosts.iter().map(|h| h.get(e)).collect())
        .collect())
}

/// Reduces all elements of `data` (row-major) on `dev` with a combiner that need not
/// commute, in the order of the elements (the module docs); `None` for an empty array.
fn reduce_ordered(dev: &Device, c: &Combiner, data: &ArrayData) -> Result<Option<Vec<Const>>> {
    let total = data.len();
    if total == 0 {
        return Ok(None);
    }
    if total > i32::MAX as usize {
        return Err(Error::argument(format!(
            "reductions of more than 2^31 - 1 elements are not supported (this array has {total})"
        )));
    }
    let d = data.contiguous_view()?;
    let mut cur: Vec<ArrayData> = vec![view(&d, 0, total)];
    let mut n = total;
    let run = |m: &Arc<Module>, name: &str, args: Vec<ArgVal>, shape: &[usize]| {
        let l = prepare(m, name, args, Some(shape))?;
        run_arrays(dev, &l)
    };
    let tree = cached(c, None, Kind::Tree, &c.state, || tree_program(c))?;
    loop {
        let elems: Vec<Type> = cur.iter().map(|a| a.elem).collect();
        let lanes = cached(c, None, Kind::Lanes, &elems, || lanes_program(c, &elems))?;
        let segments = n.div_ceil(SEGMENT);
        let nc = ArgVal::Uniform(Const::scalar(ScalarType::I64, n as u64));
        let mut args: Vec<ArgVal> = cur.iter().map(|a| ArgVal::Array(a.clone())).collect();
        args.push(nc.clone());
        let parts = run(&lanes, "reduce.lanes", args, &[segments, LANES])?;
        let mut args: Vec<ArgVal> = parts.into_iter().map(ArgVal::Array).collect();
        args.push(nc);
        let states = run(&tree, "reduce.tree", args, &[segments])?;
        if segments == 1 {
            let mut s = host_states(&states, 0, 1)?;
            return Ok(s.pop());
        }
        cur = states;
        n = segments;
    }
}

/// Reduces all elements of `data` (row-major) on `dev` by passes of fan-in [`FANIN`] (the
/// module docs); `None` for an empty array.
fn reduce_core(
    dev: &Device,
    c: &Combiner,
    map: Option<&MapFn>,
    data: &ArrayData,
) -> Result<Option<Vec<Const>>> {
    let n = data.len();
    if n == 0 {
        return Ok(None);
    }
    let d = data.contiguous_view()?;
    let k = FANIN;
    let mut cur: Vec<ArrayData> = vec![view(&d, 0, n)];
    let mut mapped = map.is_none();
    let mut tails: Vec<Vec<Vec<Const>>> = Vec::new();
    let first_prog = |k: usize| -> Result<Arc<Module>> {
        let mf = map.expect("unmapped only with a map");
        cached(c, Some(mf), Kind::Pass(k), &[d.elem], || {
            pass_program(c, Some((mf, d.elem)), k)
        })
    };
    let run_pass = |m: &Arc<Module>, args: Vec<ArgVal>| -> Result<Vec<ArrayData>> {
        let l = prepare(m, "reduce.pass", args, None)?;
        run_arrays(dev, &l)
    };
    let map_args = |xs: Vec<ArgVal>, base: usize, seg: usize| {
        let mut a = xs;
        a.push(ArgVal::Uniform(Const::scalar(ScalarType::I64, base as u64)));
        a.push(ArgVal::Uniform(Const::scalar(ScalarType::I64, seg as u64)));
        a
    };
    let prof = std::env::var_os("WEFT_REDUCE_PROFILE").is_some();
    let t0 = std::time::Instant::now();
    let plain = cached(c, None, Kind::Pass(k), &[], || pass_program(c, None, k))?;
    loop {
        let len = cur[0].len();
        if len <= k {
            break;
        }
        let (seg, rest) = (len / k, len % k);
        let mut args = Vec::new();
        for j in 0..k {
            for a in &cur {
                args.push(ArgVal::Array(view(a, j * seg, seg)));
            }
        }
        let next = if mapped {
            run_pass(&plain, args)?
        } else {
            run_pass(&first_prog(k)?, map_args(args, 0, seg))?
        };
        if rest > 0 {
            let lo = k * seg;
            let t = if mapped {
                host_states(&cur, lo, rest)?
            } else {
                let tail = run_pass(
                    &first_prog(1)?,
                    map_args(vec![ArgVal::Array(view(&cur[0], lo, rest))], lo, 0),
                )?;
                host_states(&tail, 0, rest)?
            };
            tails.push(t);
        }
        cur = next;
        mapped = true;
        if prof {
            eprintln!("reduce: pass over {len} queued at {:?}", t0.elapsed());
        }
    }
    if !mapped {
        let len = cur[0].len();
        cur = run_pass(
            &first_prog(1)?,
            map_args(vec![ArgVal::Array(view(&cur[0], 0, len))], 0, 0),
        )?;
    }
    let mut states = host_states(&cur, 0, cur[0].len())?;
    if prof {
        eprintln!(
            "reduce: {} partials on the host at {:?}",
            states.len(),
            t0.elapsed()
        );
    }
    for t in tails.into_iter().rev() {
        states.extend(t);
    }
    Ok(Some(fold_host(c, &states)?))
}

/// A combiner applying `op` lane-wise to two values of `ty` (built once per process).
fn builtin_combiner(op: Opcode, ty: Type) -> Result<Combiner> {
    type Builtins = std::sync::Mutex<std::collections::HashMap<(Opcode, Type), Combiner>>;
    static BUILTINS: std::sync::OnceLock<Builtins> = std::sync::OnceLock::new();
    let map = BUILTINS.get_or_init(Default::default);
    if let Some(c) = map.lock().unwrap_or_else(|e| e.into_inner()).get(&(op, ty)) {
        return Ok(c.clone());
    }
    let c = make_builtin_combiner(op, ty)?;
    map.lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert((op, ty), c.clone());
    Ok(c)
}

fn make_builtin_combiner(op: Opcode, ty: Type) -> Result<Combiner> {
    let mut b = ProgramBuilder::new(format!("reduce.{}", op_name(op)));
    let x = b.varying("a", ty);
    let y = b.varying("b", ty);
    let r = b.op(op, &[x, y]);
    b.output("r", r);
    let m = built(b)?;
    let name = m.programs[0].name.clone();
    Combiner::check(&m, &name, "built-in combiner")
}

fn op_name(op: Opcode) -> &'static str {
    match op {
        Opcode::Add => "sum",
        Opcode::Mul => "product",
        Opcode::Min => "min",
        _ => "max",
    }
}

fn scalar_const<T: Elem>(v: &Const) -> T {
    T::from_lanes(|l| T::Scalar::from_bits(v.lane_bits()[l]))
}

fn builtin<const D: usize, T: Elem>(op: Opcode, a: &Array<D, T>) -> Result<Option<T>> {
    if T::Scalar::SCALAR == ScalarType::Bool {
        return Err(Error::argument(format!(
            "{}: elements of type {} have no arithmetic",
            op_name(op),
            a.elem_type()
        )));
    }
    let c = builtin_combiner(op, T::ir_type())?;
    let r = reduce_core(&Device::current(), &c, None, &a.data)?;
    Ok(r.map(|s| scalar_const::<T>(&s[0])))
}

/// The sum of all elements (lane-wise for vectors; 0 for an empty array) on the current
/// device. Integers wrap; floats are added in the order of the reduction tree described in
/// the module docs (not sequentially), the same on every device.
///
/// # Errors
/// Elements of `bool`; a device failure.
pub fn sum<const D: usize, T: Elem>(a: &Array<D, T>) -> Result<T> {
    Ok(builtin(Opcode::Add, a)?.unwrap_or_else(|| T::from_lanes(|_| T::Scalar::from_bits(0))))
}

/// The product of all elements (lane-wise; 1 for an empty array) on the current device.
///
/// # Errors
/// As [`sum`].
pub fn product<const D: usize, T: Elem>(a: &Array<D, T>) -> Result<T> {
    let one = Const::zero(weft_ir::Type::scalar(T::Scalar::SCALAR));
    let one_bits =
        weft_ir::konst::parse_lane(T::Scalar::SCALAR, false, "1").unwrap_or(one.lane_bits()[0]);
    Ok(builtin(Opcode::Mul, a)?
        .unwrap_or_else(|| T::from_lanes(|_| T::Scalar::from_bits(one_bits))))
}

/// The least element (lane-wise; NaN-propagating for floats, DESIGN §3) on the current
/// device.
///
/// # Errors
/// An empty array; as [`sum`].
pub fn min<const D: usize, T: Elem>(a: &Array<D, T>) -> Result<T> {
    builtin(Opcode::Min, a)?.ok_or_else(|| Error::argument("min of an empty array"))
}

/// The greatest element (lane-wise; NaN-propagating for floats) on the current device.
///
/// # Errors
/// An empty array; as [`sum`].
pub fn max<const D: usize, T: Elem>(a: &Array<D, T>) -> Result<T> {
    builtin(Opcode::Max, a)?.ok_or_else(|| Error::argument("max of an empty array"))
}

/// The combiner of (value, index) pairs for arg_min (`less`) or arg_max: the better value
/// wins, NaN loses to every number, ties go to the smaller index.
fn arg_combiner(ty: Type, less: bool) -> Result<Combiner> {
    let name = if less {
        "reduce.arg_min"
    } else {
        "reduce.arg_max"
    };
    let mut b = ProgramBuilder::new(name);
    let va = b.varying("va", ty);
    let ia = b.varying("ia", Type::i64());
    let vb = b.varying("vb", ty);
    let ib = b.varying("ib", Type::i64());
    let better = b.op(if less { Opcode::Lt } else { Opcode::Gt }, &[vb, va]);
    let eq = b.op(Opcode::Eq, &[vb, va]);
    let earlier = b.op(Opcode::Lt, &[ib, ia]);
    let tie = if ty.elem_scalar().is_float() {
        let a_nan = b.op(Opcode::Ne, &[va, va]);
        let b_nan = b.op(Opcode::Ne, &[vb, vb]);
        let b_num = b.op(Opcode::Not, &[b_nan]);
        let a_nan_b_num = b.op(Opcode::And, &[a_nan, b_num]);
        let both_nan = b.op(Opcode::And, &[a_nan, b_nan]);
        let same = b.op(Opcode::Or, &[eq, both_nan]);
        let tie = b.op(Opcode::And, &[same, earlier]);
        b.op(Opcode::Or, &[tie, a_nan_b_num])
    } else {
        b.op(Opcode::And, &[eq, earlier])
    };
    let take_b = b.op(Opcode::Or, &[better, tie]);
    let v = b.select(take_b, vb, va);
    let i = b.select(take_b, ib, ia);
    b.output("v", v);
    b.output("i", i);
    let m = built(b)?;
    Combiner::check(&m, name, "built-in combiner")
}

/// The map `x, i -> (x, i)` for arg reductions.
fn index_map(ty: Type) -> Result<MapFn> {
    let mut b = ProgramBuilder::new("reduce.with_index");
    let x = b.varying("x", ty);
    let i = b.varying("i", Type::i64());
    b.output("v", x);
    b.output("i", i);
    Ok(MapFn {
        module: built(b)?,
        name: "reduce.with_index".into(),
        with_index: true,
    })
}

fn arg_reduce<const D: usize, S: Scalar>(a: &Array<D, S>, less: bool) -> Result<(S, usize)> {
    let what = if less { "arg_min" } else { "arg_max" };
    if S::SCALAR == ScalarType::Bool {
        return Err(Error::argument(format!(
            "{what}: elements of type bool have no order"
        )));
    }
    let ty = a.elem_type();
    let c = arg_combiner(ty, less)?;
    let m = index_map(ty)?;
    let r = reduce_core(&Device::current(), &c, Some(&m), &a.data)?
        .ok_or_else(|| Error::argument(format!("{what} of an empty array")))?;
    Ok((
        S::from_bits(r[0].lane_bits()[0]),
        r[1].lane_bits()[0] as usize,
    ))
}

/// The least element and its row-major position (the first, on ties; NaN only when every
/// element is NaN), on the current device.
///
/// # Errors
/// An empty array; elements of `bool`; a device failure.
pub fn arg_min<const D: usize, S: Scalar>(a: &Array<D, S>) -> Result<(S, usize)> {
    arg_reduce(a, true)
}

/// The greatest element and its row-major position (the first, on ties), on the current
/// device.
///
/// # Errors
/// As [`arg_min`].
pub fn arg_max<const D: usize, S: Scalar>(a: &Array<D, S>) -> Result<(S, usize)> {
    arg_reduce(a, false)
}

/// Reduces `a` with the user combiner program `module`/`name` (2 inputs, 1 output, one
/// type; assumed associative, DESIGN §5). See [`crate::dsl::Program`] for the typed entry.
pub(crate) fn reduce_with<const D: usize, T: Elem>(
    module: &Module,
    name: &str,
    a: &Array<D, T>,
) -> Result<T> {
    let c = Combiner::check(module, name, "reduce")?;
    if c.state.len() != 1 || c.state[0] != a.elem_type() {
        return Err(Error::argument(format!(
            "reduce: the combiner @{name} combines {}, the array holds {}",
            list(&c.state),
            a.elem_type()
        )));
    }
    let r = reduce_ordered(&Device::current(), &c, &a.data)?
        .ok_or_else(|| Error::argument("reduce of an empty array (a combiner has no identity)"))?;
    Ok(scalar_const::<T>(&r[0]))
}

/// Counts the elements of `a` for which predicate program `module`/`name` (1 input of the
/// element type, 1 bool output) is true.
pub(crate) fn count_with<const D: usize, T: Elem>(
    module: &Module,
    name: &str,
    a: &Array<D, T>,
) -> Result<u64> {
    let p = module
        .get(name)
        .ok_or_else(|| Error::argument(format!("count: no program @{name}")))?;
    let ins: Vec<Type> = p.params.iter().map(|q| p.ty(q.value)).collect();
    let outs: Vec<Type> = p.outputs.iter().map(|o| o.ty).collect();
    if ins != [a.elem_type()] || outs != [Type::bool()] {
        return Err(Error::argument(format!(
            "count: the predicate must take one {} and give one bool; @{name} takes ({}) and \
             gives ({})",
            a.elem_type(),
            list(&ins),
            list(&outs)
        )));
    }
    let pm = inlined(module, name)?;
    let p = pm.get(name).expect("kept by inlined");
    let mut b = ProgramBuilder::new("reduce.count_map");
    let x = b.varying("x", a.elem_type());
    let t = b.call(p, &[x])[0];
    let one = b.constant(Const::scalar(ScalarType::U64, 1));
    let zero = b.constant(Const::scalar(ScalarType::U64, 0));
    let r = b.select(t, one, zero);
    b.output("c", r);
    let mm = built(b)?;
    let map = MapFn {
        module: inlined(&mm, "reduce.count_map")?,
        name: "reduce.count_map".into(),
        with_index: false,
    };
    let c = builtin_combiner(Opcode::Add, Type::scalar(ScalarType::U64))?;
    let r = reduce_core(&Device::current(), &c, Some(&map), &a.data)?;
    Ok(r.map_or(0, |s| s[0].lane_bits()[0]))
}

/// Element type of coordinates into a `d`-axis array (i32, or `<d x i32>`).
fn coord_type(d: usize) -> Type {
    if d == 1 {
        Type::i32()
    } else {
        Type::tuple(ScalarType::I32, d as u8).expect("2 or 3")
    }
}

impl<const D: usize, T: Elem> Array<D, T> {
    /// Gather `B[U]` (DESIGN §5): the array of `idx`'s shape whose element `i` is this array's
    /// element at coordinates `idx[i]` (i32, or `[i32; D]`), read with this array's boundary
    /// mode (clamp unless set with [`Array::with_boundary`]). Runs on the current device and,
    /// like apply, is deferred until read.
    ///
    /// # Errors
    /// Coordinates of the wrong type; a device failure.
    pub fn gather<const E: usize, I: Elem>(&self, idx: &Array<E, I>) -> Result<Array<E, T>> {
        let ct = coord_type(D);
        if idx.elem_type() != ct {
            return Err(Error::argument(format!(
                "gather: coordinates into a {D}-D array are {ct}, the index array holds {}",
                idx.elem_type()
            )));
        }
        let b0 = self.data.boundary.unwrap_or(weft_ir::Boundary::Clamp);
        let at = Type::array(D as u8, T::ir_type(), b0)
            .ok_or_else(|| Error::argument("gather: unsupported array type"))?;
        let mut b = ProgramBuilder::new("gather");
        let src = b.array("src", at);
        let i = b.varying("i", ct);
        let r = b.read(src, i);
        b.output("r", r);
        let m = Arc::new(built(b)?);
        let l = prepare(
            &m,
            "gather",
            vec![
                ArgVal::Array(self.data.clone()),
                ArgVal::Array(idx.data.clone()),
            ],
            None,
        )?;
        let out = crate::exec::defer(&Device::current(), l);
        Array::from_data(out.into_iter().next().expect("one output"))
    }

    /// Scatter `A[U] = B` (DESIGN §5): for each `i`, sets this array's element at
    /// coordinates `idx[i]` (i32, or `[i32; D]`) to `values[i]`; unaddressed elements keep
    /// their values; of colliding writes exactly one survives (here: the last). Copies the
    /// storage first if it is shared (by-value semantics). Runs on the host: the contents
    /// move there if they were on a GPU.
    ///
    /// # Errors
    /// `idx` and `values` of different lengths, coordinates of the wrong type, or an index
    /// out of range (naming its position and value).
    pub fn scatter<const E: usize, I: Elem>(
        &mut self,
        idx: &Array<E, I>,
        values: &Array<E, T>,
    ) -> Result<()> {
        let ct = coord_type(D);
        if idx.elem_type() != ct {
            return Err(Error::argument(format!(
                "scatter: coordinates into a {D}-D array are {ct}, the index array holds {}",
                idx.elem_type()
            )));
        }
        if idx.len() != values.len() {
            return Err(Error::argument(format!(
                "scatter: {} indices but {} values",
                idx.len(),
                values.len()
            )));
        }
        let ih = idx.data.to_host_buffer()?;
        let vh = values.data.to_host_buffer()?;
        let shape = self.data.shape.clone();
        let strides = crate::array::row_major(&shape);
        let mut targets = Vec::with_capacity(ih.len());
        for e in 0..ih.len() {
            let mut pos = 0usize;
            for (k, (&dim, &st)) in shape.iter().zip(&strides).enumerate() {
                let c = ih.bits(e, k) as u32 as i32;
                if c < 0 || c as usize >= dim {
                    let coords: Vec<i32> = (0..D).map(|k| ih.bits(e, k) as u32 as i32).collect();
                    return Err(Error::argument(format!(
                        "scatter: index {e} is {coords:?}, outside the array's shape {shape:?}"
                    )));
                }
                pos += c as usize * st;
            }
            targets.push(pos);
        }
        let mut h = self.unique_host()?;
        let off = self.data.offset;
        for (e, &pos) in targets.iter().enumerate() {
            for l in 0..T::LANES {
                h.set_bits(off + pos, l, vh.bits(e, l));
            }
        }
        let b = self.data.boundary;
        self.data = ArrayData::stored(crate::array::Storage::from_host(h), shape);
        self.data.boundary = b;
        Ok(())
    }
}
