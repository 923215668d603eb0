//! Collectives on every device (DESIGN §5): reduce with a user combiner, the built-in
//! reductions (sum, product, min, max, arg_min, arg_max, count), gather and scatter.
//!
//! A reduction is a plan of ordinary launches of generated programs with the combiner
//! inlined, so it runs on every device and the interpreter defines its result. Its order of
//! combination depends on the element count alone (docs/semantics.md, "Reductions"), never
//! on the device, thread count or launch geometry, so every device gives the same bits,
//! floating-point sums included.
//!
//! Reductions run in levels (docs/semantics.md, "Reductions"), each one launch (or two),
//! none on the host but the read of the result:
//! - The built-in reductions, whose combiners commute: a level cuts its elements into
//!   blocks of [`SPAN`] = [`ROWS`] rows × [`COLS`] columns (row-major) and folds each column
//!   top to bottom (`reduce.level`, a launch element per column: a CPU vector of launch
//!   elements streams through one block, a GPU warp reads two 64-byte pieces per row). The
//!   columns' results, in order, are the next level; the last level (one block) combines
//!   its columns pairwise. `reduce.small` does the last two levels in one launch element
//!   (scalar code on the CPU), for at most `SMALL` (2,048) elements on the CPU and `GPU_SMALL` (32)
//!   on a GPU. On a GPU, scalar states above one block run two levels per launch instead
//!   (`reduce.pair`, kernel mode: a work-group folds 64 blocks' columns into shared memory
//!   and then the 16 columns of the one level-2 block they make), so 2^26 elements take two
//!   launches, not five.
//! - [`crate::reduce`] with a user combiner, which need not commute, keeps the order of the
//!   elements: a level cuts its elements into blocks of [`SEGMENT`] = [`LANES`] runs of
//!   [`RUN`], folds each run left to right, combines a block's runs pairwise (run `j` with
//!   `j + o` for `o` = 1, 2, 4, 8, 16, `j` a multiple of `2o`), and the blocks' results, in
//!   order, are the next level. A level is one launch of `reduce.block` (a launch element
//!   per block) on the CPU when it has few blocks, else `reduce.cols` (a launch element per
//!   run, shape `[blocks, LANES]`) then `reduce.tree` (a launch element per block); on a GPU,
//!   a scalar state's level is one kernel-mode launch of `reduce.runs` (a work-group per
//!   segment, staged through shared memory so that loads are coalesced).
//!
//! Where a device has a choice of programs, they compute the same combinations in the same
//! order, so the choice never changes a bit.

use crate::array::{Array, ArrayData};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::exec::{prepare, run_arrays, ArgVal};
use crate::scalar::{Elem, Scalar};
use std::sync::Arc;
use weft_ir::builder::ProgramBuilder;
use weft_ir::{Boundary, Const, Module, Opcode, ScalarType, Type};

mod chain;

/// Columns per block of every reduction's tree (docs/semantics.md, "Reductions"); also the
/// width of a GPU warp, so a level's columns are one warp's threads.
pub const LANES: usize = 32;

/// Rows per block: the elements of each column of a full block.
pub const RUN: usize = 64;

/// Elements per block of the reduction tree: [`LANES`] × [`RUN`].
pub const SEGMENT: usize = LANES * RUN;

/// The most elements a reduction takes: positions and block ends are i32.
pub const MAX_ELEMENTS: usize = i32::MAX as usize - SEGMENT;

/// Independent accumulators of a `reduce.level` column whose combiner gives the same bits in
/// any order (`Combiner::any_order`).
const ACCUMULATORS: usize = 4;

/// Elements a column loop of `reduce.cols` loads before combining them, so that a GPU
/// thread has that many loads in flight (combined in order afterwards: same bits).
const CHUNK: usize = 8;

/// Largest number of blocks a CPU level of a user-combiner reduction reduces with the fused
/// `reduce.block` program (one launch per level); larger levels, and every level on a GPU,
/// run `reduce.cols` then `reduce.tree`, whose columns are consecutive launch elements. Both
/// compute the same combinations in the same order.
const FUSED_BLOCKS: usize = 16;

/// Columns of a block of the built-in reductions (docs/semantics.md, "Reductions"): the
/// LLVM host code's vector width (two of Cranelift's), so a vector of launch elements reads
/// one block's rows, one after the other, as a contiguous stream (8 columns measured 2.6×
/// slower with LLVM, whose vectors then read two blocks at once, and no faster with
/// Cranelift).
pub const COLS: usize = 16;

/// Rows of a full block of the built-in reductions.
pub const ROWS: usize = 64;

/// Elements of a full block of the built-in reductions: [`COLS`] × [`ROWS`].
pub const SPAN: usize = COLS * ROWS;

/// Largest element count the CPU reduces with the built-ins' one-launch `reduce.small`
/// program of scalar code (at most [`COLS`] blocks, so that the second level is one block);
/// beyond it a vector level first is faster.
const SMALL: usize = 2048;

/// [`SMALL`] on a GPU: two rows (16 loads in flight each, then the column tree). One thread
/// folding 256 elements took 13.5 µs on an H200 (16 rows one after the other), against
/// ~3 µs for another level launch.
const GPU_SMALL: usize = 2 * COLS;

/// A combiner: program `name` of `module` with `2k` inputs and `k` outputs of the state types.
#[derive(Clone)]
struct Combiner {
    /// Shared: the built-ins are kept per (op, type) and handed out on every call.
    module: Arc<Module>,
    /// `weft_ir::launch::fingerprint(module)`, the generated programs' cache key.
    fingerprint: u64,
    name: String,
    state: Vec<Type>,
    /// The built-ins' identity per state component, lane bits (`x ⊕ e = x` bit for bit, NaN
    /// payloads aside): the built-in levels read it past the end of the elements instead of
    /// branching around the missing rows.
    identity: Option<Vec<[u64; 4]>>,
    /// Whether every grouping and order of combination gives the same bits (NaN payloads
    /// aside, docs/semantics.md): `min`/`max` of any type, and integer `add`, `mul`, `and`,
    /// `or`, `xor`, which wrap. A level may then fold a column with independent
    /// accumulators ([`ACCUMULATORS`]) instead of one chain; float sums keep the chain.
    any_order: bool,
    /// The op of a built-in combiner (`None` for a user's).
    builtin: Option<Opcode>,
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
        let module = inlined(module, name)?;
        Ok(Combiner {
            fingerprint: weft_ir::launch::fingerprint(&module),
            module: Arc::new(module),
            name: name.to_string(),
            state: outs,
            identity: None,
            any_order: false,
            builtin: None,
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

/// How the first level turns an element into a state: as it is, or through a map program
/// taking the element (and, when `with_index`, its i64 row-major position) to the state.
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

/// A process-wide cache of generated pieces (programs, combiners, kernels), built on first
/// use: building and verifying them cost more host time than a GPU level over 2^21
/// elements. At most [`MEMO_CAPACITY`] entries each (a cache starts over when full), so a
/// process reducing with many combiners does not grow without bound.
pub(crate) type Memo<K, V> = std::sync::OnceLock<std::sync::Mutex<std::collections::HashMap<K, V>>>;

/// The most entries a [`Memo`] holds.
const MEMO_CAPACITY: usize = 1024;

/// `cell`'s value for `key`, built by `make` on first use.
pub(crate) fn memo<K: std::hash::Hash + Eq, V: Clone>(
    cell: &Memo<K, V>,
    key: K,
    make: impl FnOnce() -> Result<V>,
) -> Result<V> {
    let map = cell.get_or_init(Default::default);
    if let Some(v) = map.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return Ok(v.clone());
    }
    let v = make()?;
    let mut g = map.lock().unwrap_or_else(|e| e.into_inner());
    if g.len() >= MEMO_CAPACITY {
        g.clear();
    }
    g.insert(key, v.clone());
    Ok(v)
}

/// Generated programs by (combiner, map, kind, element types).
type CacheKey = (u64, u64, Kind, smallvec::SmallVec<[Type; 4]>);

/// Which generated program a cache entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    /// `reduce.level`: one launch element per column of a built-in reduction's level.
    Level,
    /// `reduce.small`: a built-in reduction of at most [`SMALL`] elements in one element.
    Small,
    /// `reduce.cols`: one launch element per run of a user-combiner reduction.
    Cols,
    /// `reduce.tree`: one launch element per block, over `reduce.cols`'s runs.
    Tree,
    /// `reduce.block`: one launch element per block, runs and tree fused.
    Block,
    /// `reduce.zeros`: the output buffers of `reduce.runs` and `reduce.pair`.
    Zeros,
    /// `reduce.pair`: two levels of a built-in reduction per kernel-mode launch (a GPU's).
    Pair,
    /// `segment.reduce`: one launch element per segment of a segmented reduction.
    Segment,
    /// `scan.totals`: one launch element per block of [`SCAN_FAN`] elements of a scan.
    ScanTotals,
    /// `scan.spread`: one launch element per element of a scan's level.
    ScanSpread,
    /// `scan.shift`: an inclusive scan made exclusive.
    ScanShift,
}
static PASSES: Memo<CacheKey, Arc<Module>> = std::sync::OnceLock::new();

/// The generated program `kind` for (`c`, `map`, element types `elems`) from the cache,
/// built by `build` on first use.
fn cached(
    c: &Combiner,
    map: Option<&MapFn>,
    kind: Kind,
    elems: &[Type],
    build: impl FnOnce() -> Result<Module>,
) -> Result<Arc<Module>> {
    let key = (
        c.fingerprint,
        map.map_or(0, |m| {
            weft_ir::launch::fingerprint(&m.module) ^ m.with_index as u64
        }),
        kind,
        elems.into(),
    );
    memo(&PASSES, key, || build().map(Arc::new))
}

/// `v` as an i32 constant: positions in a reduction are i32 (at most [`MAX_ELEMENTS`]),
/// whose vector arithmetic every CPU has (i64 multiplies and minimums are per lane on x86
/// without AVX-512).
fn i32c(b: &mut ProgramBuilder, v: usize) -> weft_ir::Value {
    b.constant(Const::scalar(ScalarType::I32, v as u64))
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

/// What a level program reads: its input arrays `x0 …` (one per element component) and the
/// first level's map, if any.
struct Source {
    xs: Vec<weft_ir::Value>,
    map: Option<(weft_ir::Program, bool)>,
    /// With a map: the state every position `≥ n` gives instead (the identity), and `n`.
    pad: Option<(Vec<weft_ir::Value>, weft_ir::Value)>,
}

impl Source {
    /// Declares the inputs of a level over elements of `elems` (the reduction's elements
    /// when `map` is given, else the previous level's states) and the uniform count `n`.
    fn declare(b: &mut ProgramBuilder, elems: &[Type]) -> Result<(Source, weft_ir::Value)> {
        let xs = array_params(b, "x", 1, elems)?;
        let n = b.uniform("n", Type::i32());
        Ok((
            Source {
                xs,
                map: None,
                pad: None,
            },
            n,
        ))
    }

    /// [`Source::declare`] where every position `≥ n` reads as `c`'s identity: through the
    /// arrays' constant boundary, or after a map by a select.
    fn declare_padded(
        b: &mut ProgramBuilder,
        c: &Combiner,
        map: Option<&MapFn>,
        elems: &[Type],
    ) -> Result<(Source, weft_ir::Value)> {
        let id = c
            .identity
            .as_ref()
            .expect("built-in combiners have identities");
        let xs = match map {
            Some(_) => array_params(b, "x", 1, elems)?,
            None => elems
                .iter()
                .zip(id)
                .enumerate()
                .map(|(q, (&t, &bits))| {
                    let at = Type::array(1, t, Boundary::Constant(bits))
                        .ok_or_else(|| Error::argument(format!("reduce: no arrays of {t}")))?;
                    Ok(b.array(&format!("x{q}"), at))
                })
                .collect::<Result<Vec<_>>>()?,
        };
        let n = b.uniform("n", Type::i32());
        let pad = match map {
            Some(_) => {
                let ids = c
                    .state
                    .iter()
                    .zip(id)
                    .map(|(&t, bits)| {
                        let lanes = t.lanes().map_or(1, |l| l.1 as usize);
                        b.constant(Const::from_lanes(t, &bits[..lanes]))
                    })
                    .collect();
                Some((ids, n))
            }
            None => None,
        };
        let map = map.map(|m| {
            let p = m.module.get(&m.name).expect("checked").clone();
            (p, m.with_index)
        });
        Ok((Source { xs, map, pad }, n))
    }

    /// The state of element `p` (i32) of the level.
    fn item(&self, b: &mut ProgramBuilder, p: weft_ir::Value) -> Vec<weft_ir::Value> {
        let mut xs: Vec<weft_ir::Value> = self.xs.iter().map(|&x| b.read(x, p)).collect();
        match &self.map {
            None => xs,
            Some((mp, with_index)) => {
                if *with_index {
                    xs.push(b.cast(p, Type::i64()));
                }
                let ys = b.call(mp, &xs);
                match &self.pad {
                    None => ys,
                    Some((ids, n)) => {
                        let inside = b.op(Opcode::Lt, &[p, *n]);
                        ys.iter()
                            .zip(ids)
                            .map(|(&y, &e)| b.select(inside, y, e))
                            .collect()
                    }
                }
            }
        }
    }
}

/// The block of launch element `s`: its first element and its length (`min(n − start,
/// SEGMENT)`), as i32 values.
fn block_of(
    b: &mut ProgramBuilder,
    s: weft_ir::Value,
    n: weft_ir::Value,
) -> (weft_ir::Value, weft_ir::Value) {
    let seg = i32c(b, SEGMENT);
    let start = b.op(Opcode::Mul, &[s, seg]);
    let left = b.op(Opcode::Sub, &[n, start]);
    let len = b.op(Opcode::Min, &[left, seg]);
    (start, len)
}

/// Run `j` (i32) of the block at `start` of length `len`: its first element, the end of its
/// elements and the step between them (1).
fn column(
    b: &mut ProgramBuilder,
    start: weft_ir::Value,
    len: weft_ir::Value,
    j: weft_ir::Value,
) -> (weft_ir::Value, weft_ir::Value, usize) {
    let end = b.op(Opcode::Add, &[start, len]);
    let run = i32c(b, RUN);
    let off = b.op(Opcode::Mul, &[j, run]);
    let first = b.op(Opcode::Add, &[start, off]);
    let stop = b.op(Opcode::Add, &[first, run]);
    (first, b.op(Opcode::Min, &[stop, end]), 1)
}

/// The number of runs of a block of length `len` that hold an element.
fn present(b: &mut ProgramBuilder, len: weft_ir::Value) -> weft_ir::Value {
    div_up(b, len, RUN)
}

/// `vars ← comb(vars, x)`.
fn combine_into(
    b: &mut ProgramBuilder,
    comb: &weft_ir::Program,
    vars: &[weft_ir::builder::Variable],
    x: &[weft_ir::Value],
) {
    let mut args: Vec<weft_ir::Value> = vars.iter().map(|&v| b.use_var(v)).collect();
    args.extend(x);
    let r = b.call(comb, &args);
    for (&v, x) in vars.iter().zip(r) {
        b.def_var(v, x);
    }
}

/// New variables `{tag}_{q}` for a state of `c`, holding zeros.
fn state_vars(b: &mut ProgramBuilder, c: &Combiner, tag: &str) -> Vec<weft_ir::builder::Variable> {
    c.state
        .iter()
        .enumerate()
        .map(|(q, &t)| {
            let v = b.declare_var(&format!("{tag}_{q}"), t);
            let z = b.constant(Const::zero(t));
            b.def_var(v, z);
            v
        })
        .collect()
}

/// Folds the elements `first, first + step, …` before `end` left to right into new
/// variables `{tag}_{q}` (zeros when there is none), loading `chunk` elements at a time
/// before combining them.
fn fold_column(
    b: &mut ProgramBuilder,
    c: &Combiner,
    src: &Source,
    tag: &str,
    (first, end, step): (weft_ir::Value, weft_ir::Value, usize),
    chunk: usize,
) -> Vec<weft_ir::builder::Variable> {
    let cp = c.program().clone();
    let vars = state_vars(b, c, tag);
    let has = b.op(Opcode::Lt, &[first, end]);
    b.if_(has, |b| {
        let x = src.item(b, first);
        for (&v, x) in vars.iter().zip(x) {
            b.def_var(v, x);
        }
        let stepc = i32c(b, step);
        let mut next = b.op(Opcode::Add, &[first, stepc]);
        if chunk > 1 {
            // Whole chunks first: `full` chunks of `chunk` elements from `next`.
            let zero = i32c(b, 0);
            let span = b.op(Opcode::Sub, &[end, next]);
            let span = b.op(Opcode::Max, &[span, zero]);
            let wide = i32c(b, step * chunk);
            let full = b.op(Opcode::Div, &[span, wide]);
            let len = b.op(Opcode::Mul, &[full, wide]);
            let chunk_end = b.op(Opcode::Add, &[next, len]);
            b.for_range(next, chunk_end, wide, |b, q| {
                let xs: Vec<Vec<weft_ir::Value>> = (0..chunk)
                    .map(|i| {
                        let off = i32c(b, i * step);
                        let p = b.op(Opcode::Add, &[q, off]);
                        src.item(b, p)
                    })
                    .collect();
                for x in xs {
                    combine_into(b, &cp, &vars, &x);
                }
            });
            next = chunk_end;
        }
        b.for_range(next, end, stepc, |b, p| {
            let x = src.item(b, p);
            combine_into(b, &cp, &vars, &x);
        });
    });
    vars
}

/// Combines `cols` (one group of state variables per column) pairwise — column `j` with
/// column `j + o` for `o` = 1, 2, 4, 8, 16 and `j` a multiple of `2o` — skipping columns
/// `≥ present`; the result is in `cols[0]`.
fn tree(
    b: &mut ProgramBuilder,
    c: &Combiner,
    cols: &[Vec<weft_ir::builder::Variable>],
    present: weft_ir::Value,
) {
    let cp = c.program().clone();
    let mut o = 1;
    while o < LANES {
        for j in (0..LANES).step_by(2 * o) {
            let jo = i32c(b, j + o);
            let cond = b.op(Opcode::Lt, &[jo, present]);
            let (dst, src) = (&cols[j], &cols[j + o]);
            b.if_(cond, |b| {
                let x: Vec<weft_ir::Value> = src.iter().map(|&v| b.use_var(v)).collect();
                combine_into(b, &cp, dst, &x);
            });
        }
        o *= 2;
    }
}

/// Finishes a level program whose state is in `vars`: outputs `s0 …`, the combiner (and map)
/// merged in, verified.
fn finish_level(
    mut b: ProgramBuilder,
    c: &Combiner,
    map: Option<&MapFn>,
    vars: &[weft_ir::builder::Variable],
) -> Result<Module> {
    for (q, &v) in vars.iter().enumerate() {
        let x = b.use_var(v);
        b.output(&format!("s{q}"), x);
    }
    finish_module(b, c, map)
}

/// A generated program's module: the builder's program with the combiner (and map) merged
/// in, verified.
fn finish_module(b: ProgramBuilder, c: &Combiner, map: Option<&MapFn>) -> Result<Module> {
    let mut m = built(b)?;
    merge(&mut m, &c.module);
    if let Some(mf) = map {
        merge(&mut m, &mf.module);
    }
    weft_ir::verify_module(&m).map_err(Error::invalid)?;
    Ok(m)
}

/// New variables `{tag}_{q}` holding a state of `c` whose component `q` is `read(b, q)`.
fn state_of(
    b: &mut ProgramBuilder,
    c: &Combiner,
    tag: &str,
    mut read: impl FnMut(&mut ProgramBuilder, usize) -> weft_ir::Value,
) -> Vec<weft_ir::builder::Variable> {
    (0..c.state.len())
        .map(|q| {
            let v = b.declare_var(&format!("{tag}_{q}"), c.state[q]);
            let x = read(b, q);
            b.def_var(v, x);
            v
        })
        .collect()
}

/// `reduce.cols` (launch shape `[blocks, LANES]`): element `(s, j)` folds column `j` of
/// block `s` of the level's `n` elements left to right. A column with no element gives
/// zeros, which `reduce.tree` never reads.
fn cols_program(c: &Combiner, elems: &[Type]) -> Result<Module> {
    let mut b = ProgramBuilder::new("reduce.cols");
    let (src, n) = Source::declare(&mut b, elems)?;
    let idx = b.index(Type::tuple(ScalarType::I32, 2).expect("2 lanes"));
    let s = b.extract(idx, 0);
    let j = b.extract(idx, 1);
    let (start, len) = block_of(&mut b, s, n);
    let col = column(&mut b, start, len, j);
    let vars = fold_column(&mut b, c, &src, "acc", col, CHUNK);
    finish_level(b, c, None, &vars)
}

/// `reduce.tree` (launch shape `[blocks]`): element `s` combines the columns of block `s`
/// (read from the `[blocks, LANES]` arrays `p0 …` of `reduce.cols`) with [`tree`].
fn tree_program(c: &Combiner) -> Result<Module> {
    let mut b = ProgramBuilder::new("reduce.tree");
    let ps = array_params(&mut b, "p", 2, &c.state)?;
    let n = b.uniform("n", Type::i32());
    let s = b.index(Type::i32());
    let (_, len) = block_of(&mut b, s, n);
    let present = present(&mut b, len);
    let cols: Vec<Vec<weft_ir::builder::Variable>> = (0..LANES)
        .map(|j| {
            let jc = b.constant(Const::scalar(ScalarType::I32, j as u64));
            let at = b.tuple(&[s, jc]);
            state_of(&mut b, c, &format!("l{j}"), |b, q| b.read(ps[q], at))
        })
        .collect();
    tree(&mut b, c, &cols, present);
    finish_level(b, c, None, &cols[0])
}

/// `reduce.block` (launch shape `[blocks]`): element `s` folds every column of block `s`
/// and combines them with [`tree`] — `reduce.cols` and `reduce.tree` in one launch.
fn block_program(c: &Combiner, elems: &[Type]) -> Result<Module> {
    let mut b = ProgramBuilder::new("reduce.block");
    let (src, n) = Source::declare(&mut b, elems)?;
    let s = b.index(Type::i32());
    let (start, len) = block_of(&mut b, s, n);
    let cols: Vec<Vec<weft_ir::builder::Variable>> = (0..LANES)
        .map(|j| {
            let jc = i32c(&mut b, j);
            let col = column(&mut b, start, len, jc);
            fold_column(&mut b, c, &src, &format!("c{j}"), col, 1)
        })
        .collect();
    let present = present(&mut b, len);
    tree(&mut b, c, &cols, present);
    finish_level(b, c, None, &cols[0])
}

/// A level's element count after a level over `n` elements: [`COLS`] per block, the last
/// block's columns only as many as it has elements.
fn level_outputs(n: usize) -> usize {
    let last = n - (n - 1) / SPAN * SPAN;
    (n - 1) / SPAN * COLS + last.min(COLS)
}

/// Emits `⌈(a) / d⌉` for non-negative i32 `a` and constant `d`.
fn div_up(b: &mut ProgramBuilder, a: weft_ir::Value, d: usize) -> weft_ir::Value {
    let d1 = i32c(b, d - 1);
    let dc = i32c(b, d);
    let up = b.op(Opcode::Add, &[a, d1]);
    b.op(Opcode::Div, &[up, dc])
}

/// `reduce.level` (launch shape `[level_outputs(n)]`): element `e` folds column `e mod 16`
/// of block `⌊e / 16⌋` of the level's `n` elements — its elements `1024·b + j + 16·r` for rows
/// `r` = 0 … 63 — top to bottom ([`fold_block_column`]).
fn level_program(c: &Combiner, map: Option<&MapFn>, elems: &[Type]) -> Result<Module> {
    let mut b = ProgramBuilder::new("reduce.level");
    let (src, _n) = Source::declare_padded(&mut b, c, map, elems)?;
    let e = b.index(Type::i32());
    let mask = i32c(&mut b, COLS - 1);
    let j = b.op(Opcode::And, &[e, mask]);
    let first_col = b.op(Opcode::Sub, &[e, j]);
    let rows_c = i32c(&mut b, ROWS);
    let start = b.op(Opcode::Mul, &[first_col, rows_c]);
    let base = b.op(Opcode::Add, &[start, j]);
    let acc = fold_block_column(&mut b, c, &src, base, CHUNK);
    finish_level(b, c, map, &acc)
}

/// Folds the column whose first element is `base` — elements `base + 16·r` for rows `r` =
/// 0 … 63 — top to bottom into new variables (for a combiner whose result does not depend on
/// the order, `Combiner::any_order`, in [`ACCUMULATORS`] interleaved chains combined at the
/// end: the same bits, without one chain's latency per row). Straight-line code: rows past
/// the end read as the combiner's identity, and `chunk` loads are issued before they are
/// combined.
fn fold_block_column(
    b: &mut ProgramBuilder,
    c: &Combiner,
    src: &Source,
    base: weft_ir::Value,
    chunk: usize,
) -> Vec<weft_ir::builder::Variable> {
    let cp = c.program().clone();
    // Row r goes to accumulator r mod k: one chain (k = 1) keeps the order of the rows; a
    // combiner that gives the same bits in any order gets k independent chains, combined
    // at the end, so that the column's loads do not wait on one another's combines.
    let k = if c.any_order { ACCUMULATORS } else { 1 };
    let accs: Vec<Vec<weft_ir::builder::Variable>> = (0..k)
        .map(|a| state_vars(b, c, &format!("acc{a}")))
        .collect();
    for (a, vars) in accs.iter().enumerate() {
        let off = i32c(b, a * COLS);
        let p = b.op(Opcode::Add, &[base, off]);
        let x = src.item(b, p);
        for (&v, x) in vars.iter().zip(x) {
            b.def_var(v, x);
        }
    }
    for rows in (k..ROWS).collect::<Vec<_>>().chunks(chunk) {
        let xs: Vec<(usize, Vec<weft_ir::Value>)> = rows
            .iter()
            .map(|&r| {
                let off = i32c(b, r * COLS);
                let p = b.op(Opcode::Add, &[base, off]);
                (r % k, src.item(b, p))
            })
            .collect();
        for (a, x) in xs {
            combine_into(b, &cp, &accs[a], &x);
        }
    }
    column_tree(b, c, &accs);
    accs.into_iter().next().expect("k >= 1")
}

/// Combines the columns `cols` of one block pairwise — column `j` with `j + o` for `o` = 1,
/// 2, 4, 8, `j` a multiple of `2o`; the result is in `cols[0]`. A missing column holds the
/// identity, so combining it changes nothing (docs/semantics.md: it is skipped).
fn column_tree(b: &mut ProgramBuilder, c: &Combiner, cols: &[Vec<weft_ir::builder::Variable>]) {
    let cp = c.program().clone();
    let mut o = 1;
    while o < cols.len() {
        for j in (0..cols.len()).step_by(2 * o) {
            let x: Vec<weft_ir::Value> = cols[j + o].iter().map(|&v| b.use_var(v)).collect();
            combine_into(b, &cp, &cols[j], &x);
        }
        o *= 2;
    }
}

/// `reduce.small` (launch shape `[1]`, every value uniform: scalar code on the CPU): the
/// whole reduction of `n ≤ SMALL` elements. Block `b` of the first level gives column
/// results `t_j`; the second level (one block: column `j` holds `t_j` of blocks 0, 1, … in
/// order) folds them into `a_j` as they come; [`column_tree`] combines the `a_j`. Positions
/// past the end read as the identity, so no step is guarded.
fn small_program(c: &Combiner, map: Option<&MapFn>, elems: &[Type]) -> Result<Module> {
    let mut b = ProgramBuilder::new("reduce.small");
    let (src, n) = Source::declare_padded(&mut b, c, map, elems)?;
    let cp = c.program().clone();
    let zero = i32c(&mut b, 0);
    let one = i32c(&mut b, 1);
    let span = i32c(&mut b, SPAN);
    let cols_c = i32c(&mut b, COLS);
    let blocks = div_up(&mut b, n, SPAN);
    let accs: Vec<Vec<weft_ir::builder::Variable>> = (0..COLS)
        .map(|j| state_vars(&mut b, c, &format!("a{j}")))
        .collect();
    b.for_range(zero, blocks, one, |b, blk| {
        let start = b.op(Opcode::Mul, &[blk, span]);
        let left = b.op(Opcode::Sub, &[n, start]);
        let len = b.op(Opcode::Min, &[left, span]);
        let ts: Vec<Vec<weft_ir::builder::Variable>> = (0..COLS)
            .map(|j| {
                let vars = state_vars(b, c, &format!("t{j}"));
                let jc = i32c(b, j);
                let p = b.op(Opcode::Add, &[start, jc]);
                let x = src.item(b, p);
                for (&v, x) in vars.iter().zip(x) {
                    b.def_var(v, x);
                }
                vars
            })
            .collect();
        // Rows 1, 2, … of the block by their first position (`start + 16r` while inside the
        // block), so that reads are at the loop's counter plus a column: a CPU checks the
        // block once (loop versioning) instead of every read.
        let second = b.op(Opcode::Add, &[start, cols_c]);
        let end = b.op(Opcode::Add, &[start, len]);
        b.for_range(second, end, cols_c, |b, row| {
            let xs: Vec<Vec<weft_ir::Value>> = (0..COLS)
                .map(|j| {
                    let jc = i32c(b, j);
                    let p = b.op(Opcode::Add, &[row, jc]);
                    src.item(b, p)
                })
                .collect();
            for (vars, x) in ts.iter().zip(xs) {
                combine_into(b, &cp, vars, &x);
            }
        });
        let first = b.op(Opcode::Eq, &[blk, zero]);
        b.if_else(
            first,
            |b| {
                for (a, t) in accs.iter().zip(&ts) {
                    for (&v, &tv) in a.iter().zip(t) {
                        let x = b.use_var(tv);
                        b.def_var(v, x);
                    }
                }
                Vec::new()
            },
            |b| {
                for (a, t) in accs.iter().zip(&ts) {
                    let x: Vec<weft_ir::Value> = t.iter().map(|&v| b.use_var(v)).collect();
                    combine_into(b, &cp, a, &x);
                }
                Vec::new()
            },
        );
    });
    column_tree(&mut b, c, &accs);
    finish_level(b, c, map, &accs[0])
}

/// `reduce.runs` (kernel mode; one work-group of [`LANES`] work-items per segment of
/// [`SEGMENT`] elements): a level of a user-combiner reduction of one scalar state, in the
/// order of `reduce.cols` and `reduce.tree`, for a GPU. The work-items first copy the
/// segment into shared memory with coalesced loads (run `j` at `j·(RUN + 1)`: the padding
/// puts the work-items' reads of their runs in different banks), then each folds its run,
/// and the runs are combined pairwise through shared memory; work-item 0 writes the segment's
/// state to `o0[group]`. One launch per level, and a warp's loads read consecutive elements
/// (`reduce.cols` on a GPU issued one load per element of a 64-element run per thread).
fn runs_kernel_program(c: &Combiner, elem: Type) -> Result<Module> {
    let st = c.state[0];
    let mut b = ProgramBuilder::new("reduce.runs");
    b.make_kernel();
    let at = |t: Type| {
        Type::array(1, t, Boundary::Clamp)
            .ok_or_else(|| Error::argument(format!("reduce: no arrays of {t}")))
    };
    let x = b.array("x0", at(elem)?);
    let out = b.buffer("o0", at(st)?);
    let n = b.uniform("n", Type::i32());
    let pitch = RUN + 1;
    let cap = i32c(&mut b, LANES * pitch);
    let s = b.op_typed(Opcode::Shared, &[cap], at(st)?);
    let lanes_c = i32c(&mut b, LANES);
    let t = b.op_typed(Opcode::Shared, &[lanes_c], at(st)?);
    let l = b.op_typed(Opcode::LocalId, &[], Type::i32());
    let g = b.op_typed(Opcode::GroupId, &[], Type::i32());
    let (start, len) = block_of(&mut b, g, n);
    let cp = c.program().clone();
    // Stage: element e = 32·k + l of the segment goes to s[(e / RUN)·pitch + e mod RUN].
    // Straight-line code, STAGE loads before their stores, so that a work-item has that many
    // loads in flight (a loop waited on each load before the next; all 64 at once took as
    // long on an H200, with half the warps resident for the registers); positions past the
    // end read clamped values into places no run reads.
    let zero = i32c(&mut b, 0);
    let one = i32c(&mut b, 1);
    const STAGE: usize = 16;
    for chunk in (0..RUN).collect::<Vec<_>>().chunks(STAGE) {
        let loaded: Vec<(weft_ir::Value, weft_ir::Value)> = chunk
            .iter()
            .map(|&k| {
                let kl = i32c(&mut b, k * LANES);
                let e = b.op(Opcode::Add, &[kl, l]);
                let p = b.op(Opcode::Add, &[start, e]);
                (e, b.read(x, p))
            })
            .collect();
        for (e, v) in loaded {
            let run = i32c(&mut b, RUN);
            let pc = i32c(&mut b, pitch);
            let j = b.op(Opcode::Div, &[e, run]);
            let r = b.op(Opcode::Rem, &[e, run]);
            let jp = b.op(Opcode::Mul, &[j, pc]);
            let q = b.op(Opcode::Add, &[jp, r]);
            b.effect(Opcode::Store, &[s, q, v]);
        }
    }
    b.effect(Opcode::Barrier, &[]);
    // Fold run l (RUN elements, fewer in the last one, none past the end).
    let run = i32c(&mut b, RUN);
    let off = b.op(Opcode::Mul, &[l, run]);
    let rest = b.op(Opcode::Sub, &[len, off]);
    let rest = b.op(Opcode::Max, &[rest, zero]);
    let run_len = b.op(Opcode::Min, &[rest, run]);
    let pc = i32c(&mut b, pitch);
    let base = b.op(Opcode::Mul, &[l, pc]);
    let vars = state_vars(&mut b, c, "acc");
    let has = b.op(Opcode::Gt, &[run_len, zero]);
    b.if_(has, |b| {
        let v = b.read(s, base);
        b.def_var(vars[0], v);
        b.for_range(one, run_len, one, |b, r| {
            let q = b.op(Opcode::Add, &[base, r]);
            let v = b.read(s, q);
            combine_into(b, &cp, &vars, &[v]);
        });
    });
    let acc = b.use_var(vars[0]);
    b.effect(Opcode::Store, &[t, l, acc]);
    b.effect(Opcode::Barrier, &[]);
    // Runs combined pairwise: run j with run j + o, j a multiple of 2o, both present.
    let present = present(&mut b, len);
    let mut o = 1;
    while o < LANES {
        let mask = i32c(&mut b, 2 * o - 1);
        let oc = i32c(&mut b, o);
        let low = b.op(Opcode::And, &[l, mask]);
        let aligned = b.op(Opcode::Eq, &[low, zero]);
        let partner = b.op(Opcode::Add, &[l, oc]);
        let there = b.op(Opcode::Lt, &[partner, present]);
        let go = b.op(Opcode::And, &[aligned, there]);
        b.if_(go, |b| {
            let a = b.read(t, l);
            let z = b.read(t, partner);
            let r = b.call(&cp, &[a, z]);
            b.effect(Opcode::Store, &[t, l, r[0]]);
        });
        b.effect(Opcode::Barrier, &[]);
        o *= 2;
    }
    let first = b.op(Opcode::Eq, &[l, zero]);
    b.if_(first, |b| {
        let v = b.read(t, zero);
        b.effect(Opcode::Store, &[out, g, v]);
    });
    finish_module(b, c, None)
}

/// Elements of one work-group of `reduce.pair`: [`ROWS`] blocks of [`SPAN`], so that the
/// group's level-1 results are one whole block of level 2.
const PAIR_SPAN: usize = ROWS * SPAN;

/// Level-1 columns of a `reduce.pair` work-group's [`PAIR_SPAN`] elements.
const PAIR_COLUMNS: usize = PAIR_SPAN / ROWS;

/// Work-items of a `reduce.pair` work-group on a GPU, where the compiled kernel allows;
/// each folds every `local_size`-th column. ncu on an H200, `sum` of 2^26 f32 (46 registers a
/// work-item): 83.9 µs with 1,024 (one group a multiprocessor, 50% of the warps), 73.1 µs
/// with 512, 72.9 µs with 256, 78.1 µs with 128; the last launch (one group) 6.4, 6.1, 6.6
/// and 8.8 µs. A kernel whose registers allow fewer (f16 `min` and `max` need more than 64
/// a thread) runs the largest power of two it launches with.
const PAIR_ITEMS: usize = 512;

/// Work-items of a `reduce.pair` work-group on a CPU (kernel mode there only runs the GPU's
/// plan in tests): fewer than [`PAIR_ITEMS`], so that the loop over a work-item's columns
/// runs more than once.
const PAIR_ITEMS_CPU: usize = 256;

/// `reduce.pair` (kernel mode; one work-group of up to [`PAIR_ITEMS`] work-items per
/// [`PAIR_SPAN`] = 65,536 elements): two levels of a built-in reduction of scalar states in
/// one launch, for a GPU. Work-item `l` of group `g` folds level-1 columns `q` = `l`, `l +
/// local_size`, … < 1,024 — column `q mod 16` of block `64g + ⌊q / 16⌋`
/// ([`fold_block_column`]) — into shared memory, in the order of the level's outputs; then
/// work-items 0 … 15 fold the 16 columns of that one level-2 block (positions
/// `≥ n1`, the level-1 output count, read as the identity). With `last = 0` they write
/// level 2's outputs `16g + l` (stores past the `o` buffers' end do nothing); with `last ≠ 0`
/// (one group, `n1 ≤ 1024`: level 2 is the last level) work-item 0 combines the columns
/// pairwise ([`column_tree`]) into `o[0]`. The same combinations as `reduce.level` twice (or
/// `reduce.level` then the last level of `reduce.small`), so the same bits; one launch and no
/// level-1 results in global memory.
fn pair_kernel_program(c: &Combiner, map: Option<&MapFn>, elems: &[Type]) -> Result<Module> {
    let mut b = ProgramBuilder::new("reduce.pair");
    b.make_kernel();
    let (src, n) = Source::declare_padded(&mut b, c, map, elems)?;
    let at = |t: Type| {
        Type::array(1, t, Boundary::Clamp)
            .ok_or_else(|| Error::argument(format!("reduce: no arrays of {t}")))
    };
    let outs = c
        .state
        .iter()
        .enumerate()
        .map(|(q, &t)| Ok(b.buffer(&format!("o{q}"), at(t)?)))
        .collect::<Result<Vec<_>>>()?;
    let n1 = b.uniform("n1", Type::i32());
    let last = b.uniform("last", Type::i32());
    let columns = i32c(&mut b, PAIR_COLUMNS);
    let cols_c = i32c(&mut b, COLS);
    let level1 = c
        .state
        .iter()
        .map(|&t| Ok(b.op_typed(Opcode::Shared, &[columns], at(t)?)))
        .collect::<Result<Vec<_>>>()?;
    let level2 = c
        .state
        .iter()
        .map(|&t| Ok(b.op_typed(Opcode::Shared, &[cols_c], at(t)?)))
        .collect::<Result<Vec<_>>>()?;
    let l = b.op_typed(Opcode::LocalId, &[], Type::i32());
    let g = b.op_typed(Opcode::GroupId, &[], Type::i32());
    let size = b.op_typed(Opcode::LocalSize, &[], Type::i32());
    let zero = i32c(&mut b, 0);
    // Level 1: column q of the group's 64 blocks, whose output position is 16·⌊q/16⌋ + q mod 16
    // = q within the group.
    let span = i32c(&mut b, PAIR_SPAN);
    let group_start = b.op(Opcode::Mul, &[g, span]);
    b.for_range(l, columns, size, |b, q| {
        let mask = i32c(b, COLS - 1);
        let j = b.op(Opcode::And, &[q, mask]);
        let first_col = b.op(Opcode::Sub, &[q, j]);
        let rows_c = i32c(b, ROWS);
        let block_start = b.op(Opcode::Mul, &[first_col, rows_c]);
        let base = b.op(Opcode::Add, &[group_start, block_start]);
        let base = b.op(Opcode::Add, &[base, j]);
        // A column starting at or past the end has no level-1 output (level 2 reads the
        // identity there), so it is not folded: the last launch's one group, whose `n ≤
        // 65,536` elements often fill a quarter of its columns, would otherwise run 64 rows
        // for each of them.
        let has = b.op(Opcode::Lt, &[base, n]);
        b.if_(has, |b| {
            let acc = fold_block_column(b, c, &src, base, CHUNK);
            for (&sh, &v) in level1.iter().zip(&acc) {
                let x = b.use_var(v);
                b.effect(Opcode::Store, &[sh, q, x]);
            }
        });
    });
    b.effect(Opcode::Barrier, &[]);
    // Level 2: work-item l < 16 folds column l of the group's level-1 outputs.
    let cp = c.program().clone();
    let ids: Vec<weft_ir::Value> = c
        .state
        .iter()
        .zip(
            c.identity
                .as_ref()
                .expect("built-in combiners have identities"),
        )
        .map(|(&t, bits)| b.constant(Const::from_lanes(t, &bits[..1])))
        .collect();
    let folds = b.op(Opcode::Lt, &[l, cols_c]);
    b.if_(folds, |b| {
        let first_out = b.op(Opcode::Mul, &[g, columns]);
        let vars = state_vars(b, c, "col");
        let rows: Vec<Vec<weft_ir::Value>> = (0..ROWS)
            .map(|r| {
                let rc = i32c(b, r * COLS);
                let q = b.op(Opcode::Add, &[l, rc]);
                let pos = b.op(Opcode::Add, &[first_out, q]);
                let inside = b.op(Opcode::Lt, &[pos, n1]);
                level1
                    .iter()
                    .zip(&ids)
                    .map(|(&sh, &id)| {
                        let v = b.read(sh, q);
                        b.select(inside, v, id)
                    })
                    .collect()
            })
            .collect();
        for (r, x) in rows.into_iter().enumerate() {
            if r == 0 {
                for (&v, x) in vars.iter().zip(x) {
                    b.def_var(v, x);
                }
            } else {
                combine_into(b, &cp, &vars, &x);
            }
        }
        for (&sh, &v) in level2.iter().zip(&vars) {
            let x = b.use_var(v);
            b.effect(Opcode::Store, &[sh, l, x]);
        }
    });
    b.effect(Opcode::Barrier, &[]);
    let more = b.op(Opcode::Eq, &[last, zero]);
    let writes = b.op(Opcode::And, &[more, folds]);
    b.if_(writes, |b| {
        let gc = b.op(Opcode::Mul, &[g, cols_c]);
        let at = b.op(Opcode::Add, &[gc, l]);
        for (&sh, &o) in level2.iter().zip(&outs) {
            let v = b.read(sh, l);
            b.effect(Opcode::Store, &[o, at, v]);
        }
    });
    let done = b.op(Opcode::Ne, &[last, zero]);
    let first = b.op(Opcode::Eq, &[l, zero]);
    let finishes = b.op(Opcode::And, &[done, first]);
    b.if_(finishes, |b| {
        let cols: Vec<Vec<weft_ir::builder::Variable>> = (0..COLS)
            .map(|j| {
                let jc = i32c(b, j);
                state_of(b, c, &format!("t{j}"), |b, q| b.read(level2[q], jc))
            })
            .collect();
        column_tree(b, c, &cols);
        for (&v, &o) in cols[0].iter().zip(&outs) {
            let x = b.use_var(v);
            b.effect(Opcode::Store, &[o, zero, x]);
        }
    });
    finish_module(b, c, map)
}

/// `reduce.zeros` (launch shape `[n]`): zeros of `t`, made where the launch runs (the
/// output buffers of `reduce.runs`, with no upload).
fn zeros_program(t: Type) -> Result<Module> {
    let mut b = ProgramBuilder::new("reduce.zeros");
    let z = b.constant(Const::zero(t));
    b.output("z", z);
    built(b)
}

/// The kernels built from generated programs, once per (combiner, element type).
fn runs_kernel(c: &Combiner, elem: Type) -> Result<crate::dsl::Kernel> {
    static KERNELS: Memo<(u64, Type), crate::dsl::Kernel> = std::sync::OnceLock::new();
    memo(&KERNELS, (c.fingerprint, elem), || {
        let m = runs_kernel_program(c, elem)?;
        let p = crate::dsl::Program::from_module(m, "reduce.runs")?;
        Ok(crate::dsl::Kernel::from_program(p))
    })
}

/// One level of a user-combiner reduction of a scalar state by `reduce.runs`: the states of
/// the `⌈n / SEGMENT⌉` segments of `cur`'s `n` elements.
fn runs_kernel_level(dev: &Device, c: &Combiner, cur: &ArrayData, n: usize) -> Result<ArrayData> {
    let st = c.state[0];
    let blocks = n.div_ceil(SEGMENT);
    let kernel = runs_kernel(c, cur.elem)?;
    let mut out = level_output(dev, c, st, blocks)?;
    let groups =
        u32::try_from(blocks).map_err(|_| Error::argument(format!("reduce: {blocks} segments")))?;
    let mut args = [
        crate::dsl::KernelArg::array_data(cur),
        crate::dsl::KernelArg::buffer_data(&mut out),
        crate::dsl::KernelArg::value(n as i32),
    ];
    kernel.launch_on(dev, &[groups], &[LANES as u32], &mut args)?;
    drop(args);
    Ok(out)
}

/// A new 1-D array of `len` elements of `t` for a kernel-mode level that writes every
/// element: on a GPU, device memory with no launch to fill it (written in place by the
/// kernel, which the array alone holds); elsewhere the output of `reduce.zeros`.
fn level_output(dev: &Device, c: &Combiner, t: Type, len: usize) -> Result<ArrayData> {
    kernel_array(dev, c, t, len, false)
}

/// [`level_output`], or with `zero` an array whose elements are all zero bits on every
/// device (on a GPU a fill queued on its stream: the flags and counters a kernel starts
/// from).
fn kernel_array(dev: &Device, c: &Combiner, t: Type, len: usize, zero: bool) -> Result<ArrayData> {
    if let crate::device::Kind::Cuda(gpu) = &*dev.0 {
        let b = if zero {
            gpu.alloc_zeroed(t, len)?
        } else {
            gpu.alloc_uninit(t, len)?
        };
        return Ok(ArrayData::stored(
            crate::array::Storage::from_resident(crate::array::Resident::Cuda(b)),
            crate::array::Dims::from_slice(&[len]),
        ));
    }
    let zeros = cached(c, None, Kind::Zeros, &[t], || zeros_program(t))?;
    let l = prepare(&zeros, "reduce.zeros", Vec::new(), Some(&[len]))?;
    Ok(crate::exec::defer(dev, l, None)?.remove(0))
}

/// The `reduce.pair` kernel for (`c`, `map`, element types `elems`), built once.
fn pair_kernel(c: &Combiner, map: Option<&MapFn>, elems: &[Type]) -> Result<crate::dsl::Kernel> {
    type Key = (u64, u64, smallvec::SmallVec<[Type; 4]>);
    static KERNELS: Memo<Key, crate::dsl::Kernel> = std::sync::OnceLock::new();
    let map_key = map.map_or(0, |m| {
        weft_ir::launch::fingerprint(&m.module) ^ m.with_index as u64
    });
    memo(&KERNELS, (c.fingerprint, map_key, elems.into()), || {
        let m = cached(c, map, Kind::Pair, elems, || {
            pair_kernel_program(c, map, elems)
        })?;
        let p = crate::dsl::Program::from_module((*m).clone(), "reduce.pair")?;
        Ok(crate::dsl::Kernel::from_program(p))
    })
}

/// One launch of `reduce.pair` over the `n` elements of `cur` (one array per element
/// component): level 2's outputs (`level_outputs(level_outputs(n))` of them), or with
/// `last` (`n ≤ PAIR_SPAN`) the reduction's result, one element per state component.
fn pair_level(
    dev: &Device,
    c: &Combiner,
    map: Option<&MapFn>,
    cur: &[ArrayData],
    n: usize,
    last: bool,
) -> Result<Vec<ArrayData>> {
    let elems: smallvec::SmallVec<[Type; 4]> = cur.iter().map(|a| a.elem).collect();
    let kernel = pair_kernel(c, map, &elems)?;
    let n1 = level_outputs(n);
    let len = if last { 1 } else { level_outputs(n1) };
    let mut outs = c
        .state
        .iter()
        .map(|&t| level_output(dev, c, t, len))
        .collect::<Result<Vec<_>>>()?;
    let groups = u32::try_from(n.div_ceil(PAIR_SPAN))
        .map_err(|_| Error::argument(format!("reduce: {n} elements")))?;
    let mut args: Vec<crate::dsl::KernelArg<'_>> =
        cur.iter().map(crate::dsl::KernelArg::array_data).collect();
    args.push(crate::dsl::KernelArg::value(n as i32));
    args.extend(outs.iter_mut().map(crate::dsl::KernelArg::buffer_data));
    args.push(crate::dsl::KernelArg::value(n1 as i32));
    args.push(crate::dsl::KernelArg::value(i32::from(last)));
    let items = match &*dev.0 {
        crate::device::Kind::Cuda(gpu) => {
            let most = gpu.max_work_items_shared(kernel.program().module_arc(), "reduce.pair")?;
            // A power of two, so that every work-item has as many columns.
            let most = (most as usize).clamp(COLS, PAIR_ITEMS);
            1 << most.ilog2()
        }
        _ => PAIR_ITEMS_CPU,
    };
    kernel.launch_on(dev, &[groups], &[items as u32], &mut args)?;
    drop(args);
    Ok(outs)
}

/// A 1-D view of elements `lo .. lo + n` of a contiguous array.
fn view(d: &ArrayData, lo: usize, n: usize) -> ArrayData {
    let mut v = d.clone();
    v.offset += lo;
    v.shape = smallvec::smallvec![n];
    v.strides = smallvec::smallvec![1];
    v.boundary = None;
    v
}

/// Host values of elements `lo .. lo + n` of each state array (only those elements move).
fn host_states(cur: &[ArrayData], lo: usize, n: usize) -> Result<Vec<Vec<Const>>> {
    for d in cur {
        if let crate::array::Source::Stored(s) = &d.source {
            crate::sequence::check_host_read(s, "a reduction returning its result to the host")?;
        }
    }
    let stores = cur.iter().map(|d| match &d.source {
        crate::array::Source::Stored(s) => (s, d.offset + lo),
        crate::array::Source::Grid => unreachable!("made contiguous"),
    });
    if n == 1 {
        // One element each (a reduction's result): read in place, no copy.
        let one = stores
            .map(|(s, pos)| s.element(pos))
            .collect::<Result<_>>()?;
        return Ok(vec![one]);
    }
    let hosts = stores
        .map(|(s, pos)| s.host_range(pos, n))
        .collect::<Result<Vec<_>>>()?;
    Ok((0..n)
        .map(|e| hosts.iter().map(|h| h.get(e)).collect())
        .collect())
}

/// `data` as one contiguous 1-D view of its elements in row-major order; `None` when empty.
///
/// # Errors
/// More than [`MAX_ELEMENTS`] elements; a device failure making it contiguous.
fn elements(data: &ArrayData) -> Result<Option<ArrayData>> {
    let total = data.len();
    if total == 0 {
        return Ok(None);
    }
    if total > MAX_ELEMENTS {
        return Err(Error::argument(format!(
            "reductions of more than {MAX_ELEMENTS} elements are not supported (this array \
             has {total})"
        )));
    }
    Ok(Some(view(&data.contiguous_view()?, 0, total)))
}

/// Runs generated program `name` of `m` over `shape` on `dev`.
fn run_level(
    dev: &Device,
    m: &Arc<Module>,
    name: &str,
    args: Vec<ArgVal>,
    shape: &[usize],
) -> Result<Vec<ArrayData>> {
    let l = prepare(m, name, args, Some(shape))?;
    run_arrays(dev, &l)
}

fn i32_arg(v: usize) -> ArgVal {
    ArgVal::Uniform(Const::scalar(ScalarType::I32, v as u64))
}

thread_local! {
    static AS_GPU: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether reductions on `dev` use the GPU's programs (levels only, no one-element launch).
fn gpu_plan(dev: &Device) -> bool {
    dev.is_cuda() || AS_GPU.with(std::cell::Cell::get)
}

/// Runs `f` with this thread's reductions using the programs a GPU uses on every device —
/// for tests that check that every decomposition of a reduction gives the same bits.
#[doc(hidden)]
pub fn with_gpu_plan<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            AS_GPU.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(AS_GPU.with(|c| c.replace(true)));
    f()
}

/// Reduces all elements of `data` (row-major) on `dev` with a user combiner `c`, which need
/// not commute, keeping the order of the elements (the module docs): levels of blocks of
/// [`SEGMENT`] elements in runs of [`RUN`]. `None` for an empty array.
fn reduce_runs(dev: &Device, c: &Combiner, data: &ArrayData) -> Result<Option<Vec<Const>>> {
    let Some(first) = elements(data)? else {
        return Ok(None);
    };
    let mut cur = vec![first];
    let mut n = cur[0].len();
    let fused = if gpu_plan(dev) { 0 } else { FUSED_BLOCKS };
    loop {
        let elems: Vec<Type> = cur.iter().map(|a| a.elem).collect();
        let blocks = n.div_ceil(SEGMENT);
        let mut args: Vec<ArgVal> = cur.iter().map(|a| ArgVal::Array(a.clone())).collect();
        args.push(i32_arg(n));
        let scalar = c.state.len() == 1 && c.state[0].lanes().is_some_and(|l| l.1 == 1);
        let states = if gpu_plan(dev) && scalar {
            vec![runs_kernel_level(dev, c, &cur[0], n)?]
        } else if blocks <= fused {
            let m = cached(c, None, Kind::Block, &elems, || block_program(c, &elems))?;
            run_level(dev, &m, "reduce.block", args, &[blocks])?
        } else {
            let cols = cached(c, None, Kind::Cols, &elems, || cols_program(c, &elems))?;
            let parts = run_level(dev, &cols, "reduce.cols", args, &[blocks, LANES])?;
            let tree = cached(c, None, Kind::Tree, &c.state, || tree_program(c))?;
            let mut args: Vec<ArgVal> = parts.into_iter().map(ArgVal::Array).collect();
            args.push(i32_arg(n));
            run_level(dev, &tree, "reduce.tree", args, &[blocks])?
        };
        if blocks == 1 {
            return Ok(host_states(&states, 0, 1)?.pop());
        }
        cur = states;
        n = blocks;
    }
}

/// Reduces all elements of `data` (row-major) on `dev` with a combiner `c` that commutes
/// (the built-in reductions), mapped first through `map` if given (the module docs;
/// docs/semantics.md, "Reductions"). `None` for an empty array.
fn reduce_levels(
    dev: &Device,
    c: &Combiner,
    map: Option<&MapFn>,
    data: &ArrayData,
) -> Result<Option<Vec<Const>>> {
    match reduce_levels_on_device(dev, c, map, data)? {
        Some(states) => Ok(host_states(&states, 0, 1)?.pop()),
        None => Ok(None),
    }
}

/// [`reduce_levels`], leaving the result where `dev` computed it: one one-element array per
/// state component (on a GPU, resident there until read).
fn reduce_levels_on_device(
    dev: &Device,
    c: &Combiner,
    map: Option<&MapFn>,
    data: &ArrayData,
) -> Result<Option<Vec<ArrayData>>> {
    if map.is_none() && c.state.len() == 1 {
        if let Some(split) = group_levels(dev, c, data)? {
            let first = dev.members().remove(0);
            return reduce_levels_on_device(&first, c, None, &split);
        }
    }
    let Some(first) = elements(data)? else {
        return Ok(None);
    };
    let n = first.len();
    levels_from(dev, c, map, vec![first], n).map(Some)
}

/// The levels of [`reduce_levels_on_device`] from `cur` (one array per component of the
/// elements, or of the states after the first level), `n` elements, on.
fn levels_from(
    dev: &Device,
    c: &Combiner,
    map: Option<&MapFn>,
    cur: Vec<ArrayData>,
    n: usize,
) -> Result<Vec<ArrayData>> {
    let (mut cur, mut n, mut map) = (cur, n, map);
    // A GPU thread folding `SMALL` elements alone would wait on 128 loads in a row.
    let small = if gpu_plan(dev) { GPU_SMALL } else { SMALL };
    // A GPU runs two levels per launch (`reduce.pair`) while more than one block is left,
    // except in a recording, whose steps are applies (the same combinations either way).
    let pairs = gpu_plan(dev)
        && c.state.iter().all(|t| t.lanes().is_some_and(|l| l.1 == 1))
        && !crate::sequence::recording();
    loop {
        if pairs && n > SPAN {
            let last = n <= PAIR_SPAN;
            cur = pair_level(dev, c, map, &cur, n, last)?;
            if last {
                return Ok(cur);
            }
            n = level_outputs(level_outputs(n));
            map = None;
            continue;
        }
        let elems: smallvec::SmallVec<[Type; 4]> = cur.iter().map(|a| a.elem).collect();
        let mut args: Vec<ArgVal> = Vec::with_capacity(cur.len() + 1);
        args.extend(cur.iter().map(|a| ArgVal::Array(a.clone())));
        args.push(i32_arg(n));
        if n <= small {
            let m = cached(c, map, Kind::Small, &elems, || {
                small_program(c, map, &elems)
            })?;
            return run_level(dev, &m, "reduce.small", args, &[1]);
        }
        let outs = level_outputs(n);
        let m = cached(c, map, Kind::Level, &elems, || {
            level_program(c, map, &elems)
        })?;
        // `WEFT_REDUCE_PROFILE=1`: each level's time (on a GPU, its queueing) on stderr.
        let t0 = std::time::Instant::now();
        cur = run_level(dev, &m, "reduce.level", args, &[outs])?;
        static PROFILE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        if *PROFILE.get_or_init(|| std::env::var_os("WEFT_REDUCE_PROFILE").is_some()) {
            eprintln!("level {n} -> {outs}: {:?}", t0.elapsed());
        }
        n = outs;
        map = None;
    }
}

/// Runs launch `l` on `dev` and reduces its output `output` with the built-in combiner of
/// `op` (`Add`, `Mul`, `Min`, `Max`), which is not kept: the launch's other outputs, and the
/// reduction as a one-element array where `dev` computed it (`None`: no elements). On a CPU
/// device the first level runs fused into the launch
/// ([`weft_runtime::BufferLaunch::run_fused`]: each chunk's output is folded while it is in
/// cache, and never stored whole) — or, for a combiner whose result does not depend on the
/// order (`Combiner::any_order`) on a device compiling with LLVM, the whole reduction of
/// each kernel call's elements is folded in registers, and the calls' partial states are
/// reduced after (recorded as such in a sequence); elsewhere, and while a sequence is
/// recorded but for that case, the launch then the reduction. Each computes the same levels over the same elements, or (any order) the same
/// result: the same bits.
pub(crate) fn apply_reduced(
    dev: &Device,
    l: crate::exec::Prepared,
    output: usize,
    op: Opcode,
) -> Result<(Vec<ArrayData>, Option<ArrayData>)> {
    let p = &l.module.programs[l.program];
    let elem = p.outputs[output].ty;
    if elem.elem_scalar() == ScalarType::Bool {
        return Err(Error::argument(format!(
            "{}: output {output} of @{} has elements of type {elem}, which have no arithmetic",
            op_name(op),
            p.name
        )));
    }
    let c = builtin_combiner(op, elem)?;
    let n: usize = l.shape.iter().product();
    let recording = crate::sequence::recording();
    if c.any_order && n > 0 && n <= MAX_ELEMENTS {
        // Folded in registers inside the kernels: any order gives the same bits.
        let r = weft_backend_llvm::HostReduce {
            output,
            op,
            identity: identity(op, elem.elem_scalar()),
        };
        if let Some((keep, partials)) = crate::exec::run_reduced(dev, &l, r)? {
            if recording {
                let mut outs = keep.clone();
                outs.insert(output, partials.clone());
                crate::sequence::note_reduced_launch(dev, &l, &outs, r);
            }
            let mut r = reduce_levels_on_device(dev, &c, None, &partials)?
                .ok_or_else(|| Error::argument("internal: no partial states"))?;
            return Ok((keep, Some(r.remove(0))));
        }
    }
    if n > SMALL && n <= MAX_ELEMENTS && !gpu_plan(dev) && !recording {
        let elems = [elem];
        let m = cached(&c, None, Kind::Level, &elems, || {
            level_program(&c, None, &elems)
        })?;
        let outs = level_outputs(n);
        let level = (
            &m,
            "reduce.level",
            &[Const::scalar(ScalarType::I32, n as u64)][..],
        );
        if let Some((keep, cur)) =
            crate::exec::run_fused(dev, &l, output, level, outs, (SPAN, COLS))?
        {
            let mut r = levels_from(dev, &c, None, cur, outs)?;
            return Ok((keep, Some(r.remove(0))));
        }
    }
    let mut outs = crate::exec::defer(dev, l, None)?;
    let d = outs.remove(output);
    let r = reduce_levels_on_device(dev, &c, None, &d)?.map(|mut s| s.remove(0));
    Ok((outs, r))
}

/// On a device group (issue 27), the levels of a reduction that the members run on their
/// own parts of an array split across the group (a result of a launch on it): while every
/// part but the last holds whole blocks of [`SPAN`] elements, member `k` runs one level over
/// part `k` as if it were a whole array, and the results, in part order, are the next
/// level's elements — the combinations and order of one device, so the same bits. The
/// levels left (a few elements per block of the input) run on the first member, which
/// gathers them. `None` when `data` is not split on `dev` this way or no level is left
/// for the members.
fn group_levels(dev: &Device, c: &Combiner, data: &ArrayData) -> Result<Option<ArrayData>> {
    use crate::array::{Part, Parts, Source, Storage};
    if !dev.is_group() || data.offset != 0 || !data.contiguous() {
        return Ok(None);
    }
    let Source::Stored(s) = &data.source else {
        return Ok(None);
    };
    let Some(ps) = s.parts() else {
        return Ok(None);
    };
    let same_group = ps.group.upgrade().is_some_and(|g| Arc::ptr_eq(&g, &dev.0));
    let covered: usize = ps.parts.iter().map(|p| p.len).sum();
    if !same_group || covered != data.len() || data.len() > MAX_ELEMENTS {
        return Ok(None);
    }
    let members = dev.members();
    let mut cur: Vec<(usize, ArrayData)> = ps
        .parts
        .iter()
        .map(|p| (p.member, ArrayData::stored(p.storage.clone(), &[p.len][..])))
        .collect();
    let mut levels = 0;
    loop {
        let n: usize = cur.iter().map(|(_, a)| a.len()).sum();
        let whole_blocks = cur[..cur.len() - 1]
            .iter()
            .all(|(_, a)| a.len() % SPAN == 0);
        if cur.len() < 2 || !whole_blocks || n <= SMALL {
            break;
        }
        cur = cur
            .into_iter()
            .map(|(k, a)| {
                let elems = [a.elem];
                let m = cached(c, None, Kind::Level, &elems, || {
                    level_program(c, None, &elems)
                })?;
                let len = a.len();
                let args = vec![ArgVal::Array(a), i32_arg(len)];
                let out = run_level(&members[k], &m, "reduce.level", args, &[level_outputs(len)])?;
                Ok((k, out.into_iter().next().expect("one state")))
            })
            .collect::<Result<_>>()?;
        levels += 1;
    }
    if levels == 0 {
        return Ok(None);
    }
    let mut start = 0;
    let parts = cur
        .iter()
        .map(|(k, a)| {
            let Source::Stored(st) = &a.source else {
                unreachable!("level outputs are stored")
            };
            let p = Part {
                start,
                len: a.len(),
                member: *k,
                storage: st.clone(),
            };
            start += a.len();
            p
        })
        .collect();
    let elem = cur[0].1.elem;
    let s = Storage::from_parts(
        elem,
        Parts {
            group: Arc::downgrade(&dev.0),
            parts,
        },
    );
    Ok(Some(ArrayData::stored(s, &[start][..])))
}

/// One uniform parameter `{prefix}{q}` per component of `c`'s state.
fn state_uniforms(b: &mut ProgramBuilder, c: &Combiner, prefix: &str) -> Vec<weft_ir::Value> {
    c.state
        .iter()
        .enumerate()
        .map(|(q, &t)| b.uniform(&format!("{prefix}{q}"), t))
        .collect()
}

/// `segment.reduce` (launch shape `[segments]`, issue 25): element `s` folds the elements
/// `offsets[s] .. offsets[s + 1]` of `x0 …` left to right, starting from the uniforms
/// `init0 …` (the identity for the built-ins, the caller's value for a user combiner); an
/// empty segment gives the uniforms `empty0 …`.
fn segment_program(c: &Combiner, elems: &[Type]) -> Result<Module> {
    let mut b = ProgramBuilder::new("segment.reduce");
    let xs = array_params(&mut b, "x", 1, elems)?;
    let ot = Type::array(1, Type::i32(), Boundary::Clamp).expect("arrays of i32");
    let off = b.array("offsets", ot);
    let inits = state_uniforms(&mut b, c, "init");
    let s = b.index(Type::i32());
    let one = i32c(&mut b, 1);
    let s1 = b.op(Opcode::Add, &[s, one]);
    let lo = b.read(off, s);
    let hi = b.read(off, s1);
    let vars: Vec<weft_ir::builder::Variable> = c
        .state
        .iter()
        .zip(&inits)
        .enumerate()
        .map(|(q, (&t, &init))| {
            let v = b.declare_var(&format!("acc_{q}"), t);
            b.def_var(v, init);
            v
        })
        .collect();
    let empties = state_uniforms(&mut b, c, "empty");
    let cp = c.program().clone();
    b.for_range(lo, hi, one, |b, k| {
        let x: Vec<weft_ir::Value> = xs.iter().map(|&x| b.read(x, k)).collect();
        combine_into(b, &cp, &vars, &x);
    });
    // An empty segment gives `empty0 …` (a float sum's +0, where its identity is −0).
    let has = b.op(Opcode::Lt, &[lo, hi]);
    for (&v, &e) in vars.iter().zip(&empties) {
        let acc = b.use_var(v);
        let r = b.select(has, acc, e);
        b.def_var(v, r);
    }
    finish_level(b, c, None, &vars)
}

/// Segment `s` of `values` reduced with `c` from `init`, for every segment of `offsets`.
fn segments<T: Elem>(
    c: &Combiner,
    values: &Array<1, T>,
    offsets: &Array<1, i32>,
    init: Const,
    empty: Const,
) -> Result<Array<1, T>> {
    let n = offsets.len();
    if n == 0 {
        return Err(Error::argument(
            "segmented reduction: `offsets` needs at least one element (segment s is \
             offsets[s] .. offsets[s + 1])",
        ));
    }
    if values.len() > MAX_ELEMENTS {
        return Err(Error::argument(format!(
            "segmented reduction: more than {MAX_ELEMENTS} values"
        )));
    }
    let elems = [T::ir_type()];
    let m = cached(c, None, Kind::Segment, &elems, || {
        segment_program(c, &elems)
    })?;
    let args = vec![
        ArgVal::Array(values.data.contiguous_view()?),
        ArgVal::Array(offsets.data.contiguous_view()?),
        ArgVal::Uniform(init),
        ArgVal::Uniform(empty),
    ];
    let mut out = run_level(&Device::current(), &m, "segment.reduce", args, &[n - 1])?;
    Array::from_data(out.remove(0))
}

/// A built-in segmented reduction.
fn builtin_segments<T: Elem>(
    op: Opcode,
    values: &Array<1, T>,
    offsets: &Array<1, i32>,
) -> Result<Array<1, T>> {
    let c = arithmetic_combiner(op, values)?;
    let t = T::ir_type();
    let lanes = c.identity.as_ref().map_or([0; 4], |id| id[0]);
    let init = Const::from_lanes(t, &lanes[..weft_ir::host::lanes_of(t)]);
    // A float sum's identity is −0 (exact for every element); an empty segment sums to +0.
    let empty = if op == Opcode::Add {
        Const::zero(t)
    } else {
        init
    };
    segments(&c, values, offsets, init, empty)
}

/// The sum of each segment of `values` (issue 25; JAX's `segment_sum` over CSR offsets):
/// element `s` of the result (`offsets.len() − 1` elements) adds `values[offsets[s] ..
/// offsets[s + 1]]` left to right, from 0 (an empty segment gives 0), on the current
/// device: one launch element per segment, the same bits on every device. `offsets` should
/// be non-decreasing within `0 ..= values.len()`; positions outside `values` read its
/// nearest element (clamped).
///
/// ```
/// use weft::{segment_sum, Array};
/// let v = Array::from_vec([5], vec![1.0f32, 2.0, 3.0, 4.0, 5.0])?;
/// let rows = Array::from_vec([4], vec![0, 2, 2, 5])?;
/// assert_eq!(segment_sum(&v, &rows)?.to_vec()?, vec![3.0, 0.0, 12.0]);
/// # Ok::<(), weft::Error>(())
/// ```
///
/// # Errors
/// Empty `offsets`, `bool` values, a device failure.
pub fn segment_sum<T: Elem>(values: &Array<1, T>, offsets: &Array<1, i32>) -> Result<Array<1, T>> {
    builtin_segments(Opcode::Add, values, offsets)
}

/// The minimum of each segment, as [`segment_sum`] (an empty segment gives the type's
/// largest value, +∞ for floats; a NaN in a segment gives NaN).
///
/// # Errors
/// As [`segment_sum`].
pub fn segment_min<T: Elem>(values: &Array<1, T>, offsets: &Array<1, i32>) -> Result<Array<1, T>> {
    builtin_segments(Opcode::Min, values, offsets)
}

/// The maximum of each segment, as [`segment_sum`] (an empty segment gives the type's
/// smallest value, −∞ for floats).
///
/// # Errors
/// As [`segment_sum`].
pub fn segment_max<T: Elem>(values: &Array<1, T>, offsets: &Array<1, i32>) -> Result<Array<1, T>> {
    builtin_segments(Opcode::Max, values, offsets)
}

/// Each segment of `values` reduced with a user combiner (2 inputs, 1 output, all of the
/// element type), left to right from `init` (an empty segment gives `init`), as
/// [`segment_sum`]. A combiner reading host uniforms uses their values at the call.
///
/// # Errors
/// A combiner of the wrong arity or type; as [`segment_sum`].
pub fn segment_reduce<T: Elem>(
    combiner: &crate::dsl::Program,
    values: &Array<1, T>,
    offsets: &Array<1, i32>,
    init: T,
) -> Result<Array<1, T>> {
    let c = user_combiner::<T>(combiner, "segment_reduce")?;
    let init = elem_const(init);
    segments(&c, values, offsets, init, init)
}

/// Elements per block of a scan's levels (docs/semantics.md, "Scans").
pub const SCAN_FAN: usize = weft_runtime::hostscan::FAN;

/// Folds `x0 … [lo .. hi)` left to right into new variables ([`fold_column`] with step 1).
fn fold_range(
    b: &mut ProgramBuilder,
    c: &Combiner,
    xs: &[weft_ir::Value],
    lo: weft_ir::Value,
    hi: weft_ir::Value,
) -> Vec<weft_ir::builder::Variable> {
    let src = Source {
        xs: xs.to_vec(),
        map: None,
        pad: None,
    };
    fold_column(b, c, &src, "acc", (lo, hi, 1), 1)
}

/// `scan.totals` (launch shape `[⌈n / SCAN_FAN⌉]`): element `b` folds block `b` of `x0 …`,
/// elements `SCAN_FAN·b .. min(SCAN_FAN·(b + 1), n)`, left to right.
fn scan_totals_program(c: &Combiner, elems: &[Type]) -> Result<Module> {
    let mut b = ProgramBuilder::new("scan.totals");
    let xs = array_params(&mut b, "x", 1, elems)?;
    let n = b.uniform("n", Type::i32());
    let blk = b.index(Type::i32());
    let fan = i32c(&mut b, SCAN_FAN);
    let lo = b.op(Opcode::Mul, &[blk, fan]);
    let end = b.op(Opcode::Add, &[lo, fan]);
    let hi = b.op(Opcode::Min, &[end, n]);
    let vars = fold_range(&mut b, c, &xs, lo, hi);
    finish_level(b, c, None, &vars)
}

/// `scan.spread` (launch shape `[n]`): element `i` of block `b = ⌊i / SCAN_FAN⌋` is the
/// fold of `x[SCAN_FAN·b ..= i]` left to right, combined after `t[b − 1]` (the inclusive
/// scan of the block totals) when `b > 0`.
fn scan_spread_program(c: &Combiner, elems: &[Type]) -> Result<Module> {
    let mut b = ProgramBuilder::new("scan.spread");
    let xs = array_params(&mut b, "x", 1, elems)?;
    let ts = array_params(&mut b, "t", 1, &c.state)?;
    let i = b.index(Type::i32());
    let mask = i32c(&mut b, SCAN_FAN - 1);
    let j = b.op(Opcode::And, &[i, mask]);
    let lo = b.op(Opcode::Sub, &[i, j]);
    let one = i32c(&mut b, 1);
    let hi = b.op(Opcode::Add, &[i, one]);
    let vars = fold_range(&mut b, c, &xs, lo, hi);
    let zero = i32c(&mut b, 0);
    let later = b.op(Opcode::Gt, &[lo, zero]);
    let cp = c.program().clone();
    b.if_(later, |b| {
        let fan = i32c(b, SCAN_FAN);
        let blk = b.op(Opcode::Div, &[lo, fan]);
        let one = i32c(b, 1);
        let prev = b.op(Opcode::Sub, &[blk, one]);
        let mut args: Vec<weft_ir::Value> = ts.iter().map(|&t| b.read(t, prev)).collect();
        args.extend(vars.iter().map(|&v| b.use_var(v)));
        let r = b.call(&cp, &args);
        for (&v, x) in vars.iter().zip(r) {
            b.def_var(v, x);
        }
    });
    finish_level(b, c, None, &vars)
}

/// `scan.shift` (launch shape `[n]`): element `i` is `y[i − 1]`, element 0 the uniforms
/// `init0 …`.
fn scan_shift_program(c: &Combiner) -> Result<Module> {
    let mut b = ProgramBuilder::new("scan.shift");
    let ys = array_params(&mut b, "y", 1, &c.state)?;
    let inits = state_uniforms(&mut b, c, "init");
    let i = b.index(Type::i32());
    let zero = i32c(&mut b, 0);
    let first = b.op(Opcode::Eq, &[i, zero]);
    let one = i32c(&mut b, 1);
    let prev = b.op(Opcode::Sub, &[i, one]);
    for (q, (&y, &init)) in ys.iter().zip(&inits).enumerate() {
        let v = b.read(y, prev);
        let r = b.select(first, init, v);
        b.output(&format!("s{q}"), r);
    }
    finish_module(b, c, None)
}

/// The inclusive scan of the `n` elements `data` with `c` in the fixed order of
/// docs/semantics.md ("Scans"), on `dev`.
fn scan_levels(dev: &Device, c: &Combiner, data: &ArrayData) -> Result<ArrayData> {
    if let Some(y) = cumsum_on_cpu(dev, c, data)? {
        return Ok(y);
    }
    if let Some(y) = one_pass_scan(dev, c, data, None)? {
        return Ok(y);
    }
    if gpu_plan(dev) && !crate::sequence::recording() && tile_items(c, data.elem).is_some() {
        return scan_tiles(dev, c, data);
    }
    let n = data.len();
    let elems = [data.elem];
    let totals = if n > SCAN_FAN {
        let m = cached(c, None, Kind::ScanTotals, &elems, || {
            scan_totals_program(c, &elems)
        })?;
        let args = vec![ArgVal::Array(data.clone()), i32_arg(n)];
        let t = run_level(dev, &m, "scan.totals", args, &[n.div_ceil(SCAN_FAN)])?;
        scan_levels(dev, c, &t[0])?
    } else {
        // One block: no totals are read (the data stands in: an array of the right type).
        data.clone()
    };
    // On the CPU the walk (one combination per element); on a GPU, whose threads would
    // read 32 elements apart, the walk through shared memory (`scan.tile`, which also
    // makes the totals); elsewhere (tuples, recording) the spread.
    if c.state.len() == 1 && !crate::sequence::recording() && !gpu_plan(dev) {
        return scan_walk(dev, c, data, &totals);
    }
    let m = cached(c, None, Kind::ScanSpread, &elems, || {
        scan_spread_program(c, &elems)
    })?;
    let args = vec![ArgVal::Array(data.clone()), ArgVal::Array(totals)];
    let mut out = run_level(dev, &m, "scan.spread", args, &[n])?;
    Ok(out.remove(0))
}

/// With the GPU plan (not while a sequence is recorded), the scan of `data` (exclusive
/// with `init`) by `scan.chain` in one pass, where it applies (one 32-bit scalar state,
/// `n ≥ 1`); `None` elsewhere.
fn one_pass_scan(
    dev: &Device,
    c: &Combiner,
    data: &ArrayData,
    init: Option<Const>,
) -> Result<Option<ArrayData>> {
    if gpu_plan(dev)
        && !crate::sequence::recording()
        && data.len() > 0
        && chain::applies(c, data.elem)
    {
        return chain::scan(dev, c, data, init).map(Some);
    }
    Ok(None)
}

/// On a CPU device (not while a sequence is recorded, nor under [`with_gpu_plan`]), a
/// `cumsum` of 32- or 64-bit scalars by the runtime's chained scan over the host buffers on
/// every thread ([`weft_runtime::hostscan::cumsum_host`]: the same order, so the same
/// bits), which reads and writes each element once. `None` elsewhere.
fn cumsum_on_cpu(dev: &Device, c: &Combiner, data: &ArrayData) -> Result<Option<ArrayData>> {
    if dev.as_cpu().is_none()
        || gpu_plan(dev)
        || crate::sequence::recording()
        || c.builtin != Some(Opcode::Add)
    {
        return Ok(None);
    }
    let x = data.host_buffer()?;
    let threads = rayon::current_num_threads();
    let Some(y) = weft_runtime::hostscan::cumsum_host(&x, threads) else {
        return Ok(None);
    };
    let n = y.len();
    Ok(Some(ArrayData::stored(
        crate::array::Storage::from_host(y),
        &[n][..],
    )))
}

/// A scan walk's store: the fold so far (`acc`), combined after `prev` when `later` (the
/// block is not the first), into element `at` of `arr`.
fn store_after(
    b: &mut ProgramBuilder,
    cp: &weft_ir::Program,
    (later, prev): (weft_ir::Value, weft_ir::Value),
    acc: weft_ir::builder::Variable,
    (arr, at): (weft_ir::Value, weft_ir::Value),
) {
    let ty = b.program().ty(prev);
    let y = b.declare_var("y", ty);
    let a = b.use_var(acc);
    b.def_var(y, a);
    b.if_(later, |b| {
        let a = b.use_var(acc);
        let r = b.call(cp, &[prev, a]);
        b.def_var(y, r[0]);
    });
    let v = b.use_var(y);
    b.effect(Opcode::Store, &[arr, at, v]);
}

/// Index `q` of a shared array with a gap after every 32 elements (`q + q / 32`), so that
/// work-items walking runs of 32 consecutive elements each hit different banks (CUB's
/// padded shared layouts). `q` is a non-negative `i32`.
pub(crate) fn bank_pad(b: &mut ProgramBuilder, q: weft_ir::Value) -> weft_ir::Value {
    let five = i32c(b, 5);
    let hi = b.op(Opcode::Shr, &[q, five]);
    b.op(Opcode::Add, &[q, hi])
}

/// The elements a shared array of `n` needs with [`bank_pad`]'s gaps.
pub(crate) fn bank_padded(n: usize) -> usize {
    n + n / 32
}

/// Work-items per work-group of `scan.tile` for a scan of `elem` with `c`, when it applies:
/// one state of `elem`'s type, a scalar of at most 8 bytes (a tile of 32 blocks per
/// work-item then takes 33 KiB of shared memory).
fn tile_items(c: &Combiner, elem: Type) -> Option<usize> {
    let (s, lanes) = elem.lanes()?;
    if c.state.len() != 1 || c.state[0] != elem || lanes != 1 {
        return None;
    }
    Some(if s.bits() == 64 { 128 } else { 256 })
}

/// `scan.tile` (kernel mode; the GPU's scan levels): work-group `g` copies its tile of
/// `items` blocks of [`SCAN_FAN`] elements into shared memory (coalesced), work-item `l`
/// walks block `l` there as `scan.walk` does, and the work-group copies the results out
/// (coalesced) — or, with `totals`, stores each block's fold left to right (`scan.totals`).
/// Block `l` sits at `33 · l` in shared memory, so the work-items' walks use every bank.
/// Parameters: `x0`, (`t0`, the inclusive scan of the totals), `n`, then the output `o0`.
fn scan_tile_program(c: &Combiner, elem: Type, items: usize, totals: bool) -> Result<Module> {
    let mut b = ProgramBuilder::new("scan.tile");
    b.make_kernel();
    let at = |t: Type| {
        Type::array(1, t, Boundary::Clamp)
            .ok_or_else(|| Error::argument(format!("scan: no arrays of {t}")))
    };
    let x = b.array("x0", at(elem)?);
    let t = if totals {
        None
    } else {
        Some(b.array("t0", at(elem)?))
    };
    let n = b.uniform("n", Type::i32());
    let out = b.buffer("o0", at(elem)?);
    let tile = items * SCAN_FAN;
    let cap = i32c(&mut b, bank_padded(tile));
    let stage = b.op_typed(Opcode::Shared, &[cap], at(elem)?);
    let pad = bank_pad;
    let l = b.op_typed(Opcode::LocalId, &[], Type::i32());
    let g = b.op_typed(Opcode::GroupId, &[], Type::i32());
    let (zero, one) = (i32c(&mut b, 0), i32c(&mut b, 1));
    let (itc, fan) = (i32c(&mut b, items), i32c(&mut b, SCAN_FAN));
    let tile_c = i32c(&mut b, tile);
    let base = b.op(Opcode::Mul, &[g, tile_c]);
    // The tile into shared memory, coalesced (element j · items + l): every read first
    // (clamped, so all are in flight at once), then the stores of those inside.
    let reads: Vec<_> = (0..SCAN_FAN)
        .map(|j| {
            let q = i32c(&mut b, j * items);
            let q = b.op(Opcode::Add, &[q, l]);
            let i = b.op(Opcode::Add, &[base, q]);
            (q, i, b.read(x, i))
        })
        .collect();
    for (q, i, v) in reads {
        let inside = b.op(Opcode::Lt, &[i, n]);
        b.if_(inside, |b| {
            let s = pad(b, q);
            b.effect(Opcode::Store, &[stage, s, v]);
        });
    }
    b.effect(Opcode::Barrier, &[]);
    let gi = b.op(Opcode::Mul, &[g, itc]);
    let blk = b.op(Opcode::Add, &[gi, l]);
    let lo = b.op(Opcode::Mul, &[l, fan]);
    let glo = b.op(Opcode::Add, &[base, lo]);
    let left = b.op(Opcode::Sub, &[n, glo]);
    let len = b.op(Opcode::Min, &[left, fan]);
    let has = b.op(Opcode::Gt, &[len, zero]);
    let later = b.op(Opcode::Gt, &[blk, zero]);
    let prev = t.map(|t| {
        let before = b.op(Opcode::Sub, &[blk, one]);
        let before = b.op(Opcode::Max, &[before, zero]);
        b.read(t, before)
    });
    let cp = c.program().clone();
    b.if_(has, |b| {
        let acc = b.declare_var("acc", elem);
        let s0 = pad(b, lo);
        let first = b.read(stage, s0);
        b.def_var(acc, first);
        // Stores element `k`'s result over its input (each work-item owns its block).
        let emit = |b: &mut ProgramBuilder, s: weft_ir::Value| {
            if let Some(prev) = prev {
                store_after(b, &cp, (later, prev), acc, (stage, s));
            }
        };
        emit(b, s0);
        // The block's other elements read first (all in flight at once; those past `len`
        // are not combined), then combined in order.
        let rest: Vec<_> = (1..SCAN_FAN)
            .map(|e| {
                let ec = i32c(b, e);
                let k = b.op(Opcode::Add, &[lo, ec]);
                let s = pad(b, k);
                (ec, s, b.read(stage, s))
            })
            .collect();
        for (ec, s, v) in rest {
            let inside = b.op(Opcode::Lt, &[ec, len]);
            b.if_(inside, |b| {
                combine_into(b, &cp, &[acc], &[v]);
                emit(b, s);
            });
        }
        if totals {
            let a = b.use_var(acc);
            b.effect(Opcode::Store, &[out, blk, a]);
        }
    });
    if !totals {
        // The results out, coalesced.
        b.effect(Opcode::Barrier, &[]);
        b.for_range(zero, fan, one, |b, j| {
            let q = b.op(Opcode::Mul, &[j, itc]);
            let q = b.op(Opcode::Add, &[q, l]);
            let i = b.op(Opcode::Add, &[base, q]);
            let inside = b.op(Opcode::Lt, &[i, n]);
            b.if_(inside, |b| {
                let s = pad(b, q);
                let v = b.read(stage, s);
                b.effect(Opcode::Store, &[out, i, v]);
            });
        });
    }
    finish_module(b, c, None)
}

/// The inclusive scan of `data` with `c` by `scan.tile` launches ([`tile_items`] must
/// apply): the blocks' totals, their scan (recursively), then the elements.
fn scan_tiles(dev: &Device, c: &Combiner, data: &ArrayData) -> Result<ArrayData> {
    static KERNELS: Memo<(u64, Type, bool), crate::dsl::Kernel> = std::sync::OnceLock::new();
    let elem = data.elem;
    let items = tile_items(c, elem).expect("checked by the caller");
    let kernel = |totals: bool| {
        memo(&KERNELS, (c.fingerprint, elem, totals), || {
            let m = scan_tile_program(c, elem, items, totals)?;
            let p = crate::dsl::Program::from_module(m, "scan.tile")?;
            Ok(crate::dsl::Kernel::from_program(p))
        })
    };
    let n = data.len();
    let groups = u32::try_from(n.div_ceil(items * SCAN_FAN))
        .map_err(|_| Error::argument(format!("scan: {n} elements")))?;
    let launch = |k: &crate::dsl::Kernel, t: Option<&ArrayData>, out: &mut ArrayData| {
        let mut args = vec![crate::dsl::KernelArg::array_data(data)];
        if let Some(t) = t {
            args.push(crate::dsl::KernelArg::array_data(t));
        }
        args.push(crate::dsl::KernelArg::value(n as i32));
        args.push(crate::dsl::KernelArg::buffer_data(out));
        k.launch_on(dev, &[groups], &[items as u32], &mut args)
    };
    let totals = if n > SCAN_FAN {
        let mut t = level_output(dev, c, elem, n.div_ceil(SCAN_FAN))?;
        launch(&kernel(true)?, None, &mut t)?;
        scan_levels(dev, c, &t)?
    } else {
        // One block: no totals are read (the data stands in: an array of the right type).
        data.clone()
    };
    let mut out = level_output(dev, c, elem, n)?;
    launch(&kernel(false)?, Some(&totals), &mut out)?;
    Ok(out)
}

/// Work-items per work-group of `scan.walk`.
const WALK_ITEMS: usize = 64;

/// `scan.walk` (kernel mode; one work-item per block of [`SCAN_FAN`] elements): work-item
/// `b` walks its block once, keeping the fold of the elements so far and storing, at each
/// element, that fold combined after `t[b − 1]` when `b > 0` — the elements of
/// `scan.spread`, with one combination per element instead of one per element before it in
/// the block.
fn scan_walk_program(c: &Combiner, elem: Type) -> Result<Module> {
    let st = c.state[0];
    let mut b = ProgramBuilder::new("scan.walk");
    b.make_kernel();
    let at = |t: Type| {
        Type::array(1, t, Boundary::Clamp)
            .ok_or_else(|| Error::argument(format!("scan: no arrays of {t}")))
    };
    let x = b.array("x0", at(elem)?);
    let t = b.array("t0", at(st)?);
    let n = b.uniform("n", Type::i32());
    let out = b.buffer("o0", at(st)?);
    let l = b.op_typed(Opcode::LocalId, &[], Type::i32());
    let g = b.op_typed(Opcode::GroupId, &[], Type::i32());
    let items = i32c(&mut b, WALK_ITEMS);
    let gi = b.op(Opcode::Mul, &[g, items]);
    let blk = b.op(Opcode::Add, &[gi, l]);
    let fan = i32c(&mut b, SCAN_FAN);
    let lo = b.op(Opcode::Mul, &[blk, fan]);
    let end = b.op(Opcode::Add, &[lo, fan]);
    let hi = b.op(Opcode::Min, &[end, n]);
    let zero = i32c(&mut b, 0);
    let one = i32c(&mut b, 1);
    let later = b.op(Opcode::Gt, &[blk, zero]);
    let before = b.op(Opcode::Sub, &[blk, one]);
    let before = b.op(Opcode::Max, &[before, zero]);
    let prev = b.read(t, before);
    let cp = c.program().clone();
    let has = b.op(Opcode::Lt, &[lo, hi]);
    b.if_(has, |b| {
        let acc = b.declare_var("acc", st);
        let first = b.read(x, lo);
        b.def_var(acc, first);
        let emit = |b: &mut ProgramBuilder, k: weft_ir::Value| {
            store_after(b, &cp, (later, prev), acc, (out, k));
        };
        emit(b, lo);
        let next = b.op(Opcode::Add, &[lo, one]);
        b.for_range(next, hi, one, |b, k| {
            let v = b.read(x, k);
            combine_into(b, &cp, &[acc], &[v]);
            emit(b, k);
        });
    });
    finish_module(b, c, None)
}

/// [`scan_levels`]'s last step by `scan.walk`: the inclusive scan of `data` given the
/// inclusive scan `totals` of its blocks' totals.
fn scan_walk(
    dev: &Device,
    c: &Combiner,
    data: &ArrayData,
    totals: &ArrayData,
) -> Result<ArrayData> {
    static KERNELS: Memo<(u64, Type), crate::dsl::Kernel> = std::sync::OnceLock::new();
    let kernel = memo(&KERNELS, (c.fingerprint, data.elem), || {
        let m = scan_walk_program(c, data.elem)?;
        let p = crate::dsl::Program::from_module(m, "scan.walk")?;
        Ok(crate::dsl::Kernel::from_program(p))
    })?;
    let n = data.len();
    let blocks = n.div_ceil(SCAN_FAN);
    let groups = u32::try_from(blocks.div_ceil(WALK_ITEMS))
        .map_err(|_| Error::argument(format!("scan: {n} elements")))?;
    let mut out = level_output(dev, c, c.state[0], n)?;
    let mut args = [
        crate::dsl::KernelArg::array_data(data),
        crate::dsl::KernelArg::array_data(totals),
        crate::dsl::KernelArg::value(n as i32),
        crate::dsl::KernelArg::buffer_data(&mut out),
    ];
    kernel.launch_on(dev, &[groups], &[WALK_ITEMS as u32], &mut args)?;
    drop(args);
    Ok(out)
}

/// A scan of `a` with `c`: inclusive, or exclusive from `init`.
fn scan_with<T: Elem>(c: &Combiner, a: &Array<1, T>, init: Option<Const>) -> Result<Array<1, T>> {
    let n = a.len();
    if n == 0 {
        return Ok(a.clone());
    }
    if n > MAX_ELEMENTS {
        return Err(Error::argument(format!(
            "scans of more than {MAX_ELEMENTS} elements are not supported (this array has {n})"
        )));
    }
    let dev = Device::current();
    let data = a.data.contiguous_view()?;
    // `scan.chain` writes an exclusive scan itself (no `scan.shift` pass).
    if let Some(y) = one_pass_scan(&dev, c, &data, init)? {
        return Array::from_data(y);
    }
    let y = scan_levels(&dev, c, &data)?;
    let Some(init) = init else {
        return Array::from_data(y);
    };
    let m = cached(c, None, Kind::ScanShift, &c.state, || scan_shift_program(c))?;
    let args = vec![ArgVal::Array(y), ArgVal::Uniform(init)];
    let mut out = run_level(&dev, &m, "scan.shift", args, &[n])?;
    Array::from_data(out.remove(0))
}

/// The inclusive prefix sums of `a` (NumPy's `cumsum`, issue 25): element `i` is the sum of
/// elements `0 ..= i`, in the fixed order of docs/semantics.md ("Scans") — blocks of
/// [`SCAN_FAN`] elements folded left to right after the scan of the blocks before them —
/// the same bits on every device (not NumPy's sequential order for floats). Integers wrap.
///
/// ```
/// use weft::{cumsum, Array};
/// let a = Array::from_vec([5], vec![1, 2, 3, 4, 5])?;
/// assert_eq!(cumsum(&a)?.to_vec()?, vec![1, 3, 6, 10, 15]);
/// # Ok::<(), weft::Error>(())
/// ```
///
/// # Errors
/// `bool` elements; more than [`MAX_ELEMENTS`] elements; a device failure.
pub fn cumsum<T: Elem>(a: &Array<1, T>) -> Result<Array<1, T>> {
    let c = arithmetic_combiner(Opcode::Add, a)?;
    scan_with(&c, a, None)
}

/// The exclusive prefix sums of `a`: element `i` is the sum of elements `0 .. i` (0 for
/// element 0), in [`cumsum`]'s order (stream compaction's output positions).
///
/// # Errors
/// As [`cumsum`].
pub fn cumsum_exclusive<T: Elem>(a: &Array<1, T>) -> Result<Array<1, T>> {
    let c = arithmetic_combiner(Opcode::Add, a)?;
    scan_with(&c, a, Some(Const::zero(T::ir_type())))
}

/// The inclusive scan of `a` with a user combiner (2 inputs, 1 output, all of the element
/// type; assumed associative, DESIGN §5), in [`cumsum`]'s order. A combiner reading host
/// uniforms uses their values at the call.
///
/// # Errors
/// A combiner of the wrong arity or type; as [`cumsum`].
pub fn scan<T: Elem>(combiner: &crate::dsl::Program, a: &Array<1, T>) -> Result<Array<1, T>> {
    let c = user_combiner::<T>(combiner, "scan")?;
    scan_with(&c, a, None)
}

/// The exclusive scan of `a` with a user combiner: element `i` combines elements `0 .. i`,
/// element 0 is `init`; as [`scan`].
///
/// # Errors
/// As [`scan`].
pub fn scan_exclusive<T: Elem>(
    combiner: &crate::dsl::Program,
    a: &Array<1, T>,
    init: T,
) -> Result<Array<1, T>> {
    let c = user_combiner::<T>(combiner, "scan_exclusive")?;
    scan_with(&c, a, Some(elem_const(init)))
}

/// A user combiner of `T` values.
fn user_combiner<T: Elem>(combiner: &crate::dsl::Program, what: &str) -> Result<Combiner> {
    let combiner = combiner.with_current_uniforms()?;
    let c = Combiner::check(combiner.module(), combiner.name(), what)?;
    if c.state != [T::ir_type()] {
        return Err(Error::argument(format!(
            "{what}: the combiner works on {}, the values are {}",
            list(&c.state),
            T::ir_type()
        )));
    }
    Ok(c)
}

/// `x` as a constant of its IR type.
fn elem_const<T: Elem>(x: T) -> Const {
    let t = T::ir_type();
    let lanes: Vec<u64> = (0..weft_ir::host::lanes_of(t))
        .map(|l| x.lane(l).to_bits())
        .collect();
    Const::from_lanes(t, &lanes)
}

/// A combiner applying `op` lane-wise to two values of `ty` (built once per process).
fn builtin_combiner(op: Opcode, ty: Type) -> Result<Arc<Combiner>> {
    static BUILTINS: Memo<(Opcode, Type), Arc<Combiner>> = std::sync::OnceLock::new();
    memo(&BUILTINS, (op, ty), || {
        make_builtin_combiner(op, ty).map(Arc::new)
    })
}

fn make_builtin_combiner(op: Opcode, ty: Type) -> Result<Combiner> {
    let mut b = ProgramBuilder::new(format!("reduce.{}", op_name(op)));
    let x = b.varying("a", ty);
    let y = b.varying("b", ty);
    let r = b.op(op, &[x, y]);
    b.output("r", r);
    let m = built(b)?;
    let name = m.programs[0].name.clone();
    let mut c = Combiner::check(&m, &name, "built-in combiner")?;
    let s = ty.elem_scalar();
    c.identity = Some(vec![[identity(op, s); 4]]);
    c.builtin = Some(op);
    c.any_order = matches!(op, Opcode::Min | Opcode::Max)
        || (s.is_int()
            && matches!(
                op,
                Opcode::Add | Opcode::Mul | Opcode::And | Opcode::Or | Opcode::Xor
            ));
    Ok(c)
}

/// The identity of built-in combiner `op` on `s` ([`weft_ir::konst::identity_bits`]).
fn identity(op: Opcode, s: ScalarType) -> u64 {
    weft_ir::konst::identity_bits(op, s)
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

/// The built-in combiner `op` for `a`'s elements; an error for `bool` elements.
fn arithmetic_combiner<const D: usize, T: Elem>(
    op: Opcode,
    a: &Array<D, T>,
) -> Result<Arc<Combiner>> {
    if T::Scalar::SCALAR == ScalarType::Bool {
        return Err(Error::argument(format!(
            "{}: elements of type {} have no arithmetic",
            op_name(op),
            a.elem_type()
        )));
    }
    builtin_combiner(op, T::ir_type())
}

fn builtin<const D: usize, T: Elem>(op: Opcode, a: &Array<D, T>) -> Result<Option<T>> {
    let c = arithmetic_combiner(op, a)?;
    let r = reduce_levels(&Device::current(), &c, None, &a.data)?;
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

/// [`sum`] as a one-element array, left where the current device computed it (on a GPU,
/// resident there until read), so a result another launch consumes needs no host round trip
/// (issue 21). Same bits as [`sum`]; an empty array gives `[0]`.
///
/// # Errors
/// As [`sum`].
pub fn sum_array<const D: usize, T: Elem>(a: &Array<D, T>) -> Result<Array<1, T>> {
    match builtin_array(Opcode::Add, a)? {
        Some(s) => Ok(s),
        None => Array::from_vec([1], vec![T::from_lanes(|_| T::Scalar::from_bits(0))]),
    }
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
/// device: Halide's `minimum` (the lane-wise minimum of two values while recording is
/// [`crate::dsl::min`]).
///
/// # Errors
/// An empty array; as [`sum`].
pub fn minimum<const D: usize, T: Elem>(a: &Array<D, T>) -> Result<T> {
    builtin(Opcode::Min, a)?.ok_or_else(|| Error::argument("minimum of an empty array"))
}

/// The greatest element (lane-wise; NaN-propagating for floats) on the current device:
/// Halide's `maximum` (the lane-wise maximum of two values is [`crate::dsl::max`]).
///
/// # Errors
/// An empty array; as [`sum`].
pub fn maximum<const D: usize, T: Elem>(a: &Array<D, T>) -> Result<T> {
    builtin(Opcode::Max, a)?.ok_or_else(|| Error::argument("maximum of an empty array"))
}

/// A built-in reduction `op` of `a` as a one-element array left where the current device
/// computed it; `None` for an empty array.
fn builtin_array<const D: usize, T: Elem>(
    op: Opcode,
    a: &Array<D, T>,
) -> Result<Option<Array<1, T>>> {
    let c = arithmetic_combiner(op, a)?;
    match reduce_levels_on_device(&Device::current(), &c, None, &a.data)? {
        Some(mut states) => Array::from_data(states.remove(0)).map(Some),
        None => Ok(None),
    }
}

/// [`minimum`] as a one-element array left where the current device computed it (see
/// [`sum_array`]). Same bits as [`minimum`].
///
/// # Errors
/// As [`minimum`].
pub fn minimum_array<const D: usize, T: Elem>(a: &Array<D, T>) -> Result<Array<1, T>> {
    builtin_array(Opcode::Min, a)?.ok_or_else(|| Error::argument("minimum of an empty array"))
}

/// [`maximum`] as a one-element array left where the current device computed it (see
/// [`sum_array`]): a convergence test recorded in a [`crate::Sequence`] reads it after the
/// replay. Same bits as [`maximum`].
///
/// # Errors
/// As [`maximum`].
pub fn maximum_array<const D: usize, T: Elem>(a: &Array<D, T>) -> Result<Array<1, T>> {
    builtin_array(Opcode::Max, a)?.ok_or_else(|| Error::argument("maximum of an empty array"))
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
    let mut c = Combiner::check(&m, name, "built-in combiner")?;
    // Padding loses to every element: NaN (or the worst integer) at the largest index.
    let worst = identity(if less { Opcode::Lt } else { Opcode::Gt }, ty.elem_scalar());
    c.identity = Some(vec![[worst; 4], [i64::MAX as u64; 4]]);
    Ok(c)
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
    // Built once per (type, direction): building, inlining and verifying them cost more
    // host time than a GPU level (the coin finder calls arg_max 30 times a run).
    static ARGS: Memo<(Type, bool), Arc<(Combiner, MapFn)>> = std::sync::OnceLock::new();
    let parts = memo(&ARGS, (ty, less), || {
        Ok(Arc::new((arg_combiner(ty, less)?, index_map(ty)?)))
    })?;
    let (c, m) = (&parts.0, &parts.1);
    let r = reduce_levels(&Device::current(), c, Some(m), &a.data)?
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
    let r = reduce_runs(&Device::current(), &c, &a.data)?
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
    let r = reduce_levels(&Device::current(), &c, Some(&map), &a.data)?;
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
        let out = crate::exec::defer(&Device::current(), l, None)?;
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
        for d in [&idx.data, &values.data] {
            if let crate::array::Source::Stored(s) = &d.source {
                crate::sequence::check_host_read(s, "Array::scatter")?;
            }
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
