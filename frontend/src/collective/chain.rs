//! `scan.chain`: a GPU scan of 32-bit scalars in one pass (read each element once, write it
//! once) that keeps the fixed tree order of docs/semantics.md ("Scans").
//!
//! CUB's decoupled look-back (Merrill & Garland, "Single-pass Parallel Prefix Scan with
//! Decoupled Look-back", 2016) combines the aggregates of earlier tiles in whatever order
//! they become ready, which changes float bits from run to run. Here the combinations are
//! the tree's: with `a₁` the folds of the blocks of [`SCAN_FAN`] elements, `a₂` the folds of
//! the groups of `SCAN_FAN` blocks and so on (`a_{k+1}[g]` folds `a_k[32g ..= 32g + 31]`
//! left to right), the inclusive scan at level `k` is
//! `S_k[j] = S_{k+1}[⌊j / 32⌋ − 1] ⊕ fold(a_k[32⌊j / 32⌋ ..= j])` (the first factor only when
//! `j ≥ 32`), and element `i` of the result is `S_0[i]`.
//!
//! A work-group (its tile number `t` taken from a counter, so that every tile it waits for
//! has started) holds [`GROUPS`] level-2 groups: `8192` elements. It folds its blocks and
//! groups and publishes its `a₂` values at once. It needs `S₂` on the run
//! `8t − 2 ..= 8t + 6` (and `a₂[8t − 1]`), which the recursion turns into a run of at most
//! two `S_k` values per level above; level `k`'s window is the run back to the start of its
//! group of 32 (at most 40 values), each a 64-bit word of a flag and the value, published by
//! earlier tiles. Level 2's window is read first: work-item 0 folds it and, in a tile that
//! holds the last `a₂` of a group of 32, publishes that group's `a₃` before anything else,
//! so the `a₃` values (one every four tiles) never wait on a chain of tiles. The windows
//! above are read together next (one wait, not one per level); a tile that completes groups
//! above level 3 too (one in 128 or fewer) publishes their folds after that wait.
//!
//! Measured on an H200 (docs/performance.md, fourteenth session): 2^26 f32 in 0.21 ms
//! against 0.35 ms for the two-pass `scan.tile` plan.

use super::{finish_module, i32c, kernel_array, level_output, memo, Combiner, Memo, SCAN_FAN};
use crate::array::ArrayData;
use crate::device::Device;
use crate::error::{Error, Result};
use weft_ir::builder::ProgramBuilder;
use weft_ir::{Boundary, Const, Module, Opcode, ScalarType, Type, Value};

/// Work-items per work-group: one block of [`SCAN_FAN`] elements each.
const ITEMS: usize = 256;

/// Level-2 groups (of `SCAN_FAN²` elements) per tile.
const GROUPS: usize = ITEMS / SCAN_FAN;

/// Elements per tile.
const TILE: usize = ITEMS * SCAN_FAN;

/// The most levels (2, 3, …) a scan of fewer than 2^31 elements looks back through.
const LEVELS: usize = 6;

/// Slots per level's window: the run's groups, from the start of the first.
const WINDOW: usize = 64;

/// Values read from shared memory at once before they are folded (more would hold more
/// registers, which cost work-groups per multiprocessor).
const CHUNK: usize = 8;

/// The most values in level 2's window: 31 before the run and its 9.
const WINDOW_2: usize = SCAN_FAN - 1 + GROUPS + 1;

/// The most values in a window above level 2: 31 before the run and its 2.
const WINDOW_UP: usize = SCAN_FAN + 1;

/// Whether `scan.chain` serves a scan of `elem` with `c`: one state of `elem`'s type, a
/// 32-bit scalar (so that a value and its flag fit one 64-bit atomic word).
pub(super) fn applies(c: &Combiner, elem: Type) -> bool {
    matches!(
        elem.lanes(),
        Some((ScalarType::F32 | ScalarType::I32 | ScalarType::U32, 1))
    ) && c.state.len() == 1
        && c.state[0] == elem
}

/// The levels (2, 3, …) a scan of `n` elements looks back through, and the words of its
/// scratch buffer: the tile counter, then each level's published values (one more level
/// than it reads, for the top's fold).
fn layout(n: usize) -> (usize, usize) {
    let mut size = n.div_ceil(SCAN_FAN * SCAN_FAN);
    let (mut levels, mut words) = (1, 1 + size);
    while size > SCAN_FAN {
        size = size.div_ceil(SCAN_FAN);
        levels += 1;
        words += size;
    }
    (levels, words + size.div_ceil(SCAN_FAN))
}

/// The inclusive scan of `data` (`n ≥ 1` elements; [`applies`] must hold) with `c` in one
/// `scan.chain` launch on `dev`; with `init`, the exclusive scan (`init`, then the
/// inclusive scan's first `n − 1` elements: each written one place on, so the exclusive
/// scan costs no second pass).
pub(super) fn scan(
    dev: &Device,
    c: &Combiner,
    data: &ArrayData,
    init: Option<Const>,
) -> Result<ArrayData> {
    static KERNELS: Memo<(u64, Type, bool), crate::dsl::Kernel> = std::sync::OnceLock::new();
    let elem = data.elem;
    let kernel = memo(&KERNELS, (c.fingerprint, elem, init.is_some()), || {
        let m = program(c, elem, init.is_some())?;
        let p = crate::dsl::Program::from_module(m, "scan.chain")?;
        Ok(crate::dsl::Kernel::from_program(p))
    })?;
    let n = data.len();
    let groups = u32::try_from(n.div_ceil(TILE))
        .map_err(|_| Error::argument(format!("scan: {n} elements")))?;
    let (levels, words) = layout(n);
    let mut out = level_output(dev, c, elem, n)?;
    let launch = |flags: crate::dsl::KernelArg<'_>,
                  next: crate::dsl::KernelArg<'_>,
                  cap: usize,
                  out: &mut ArrayData| {
        let mut args = vec![
            crate::dsl::KernelArg::array_data(data),
            crate::dsl::KernelArg::value(n as i32),
            crate::dsl::KernelArg::value(levels as i32),
            crate::dsl::KernelArg::buffer_data(out),
            flags,
            next,
            crate::dsl::KernelArg::value(cap as i32),
        ];
        args.extend(init.map(crate::dsl::KernelArg::constant));
        kernel.launch_on(dev, &[groups], &[ITEMS as u32], &mut args)
    };
    if let Some(gpu) = dev.as_cuda() {
        // The words from the device's pair: zero at the start, the next call's zeroed by
        // this launch (no fill on the stream per call).
        gpu.with_scratch_pair("scan.chain", words, |cur, next| {
            let cap = next.len();
            launch(
                crate::dsl::KernelArg::scratch(cur),
                crate::dsl::KernelArg::scratch(next),
                cap,
                &mut out,
            )
        })?;
    } else {
        let mut flags = kernel_array(dev, c, Type::scalar(ScalarType::U64), words, true)?;
        let mut next = kernel_array(dev, c, Type::scalar(ScalarType::U64), 1, false)?;
        launch(
            crate::dsl::KernelArg::buffer_data(&mut flags),
            crate::dsl::KernelArg::buffer_data(&mut next),
            0,
            &mut out,
        )?;
    }
    Ok(out)
}

/// A 1-D array type of `t`.
fn arr(t: Type) -> Result<Type> {
    Type::array(1, t, Boundary::Clamp)
        .ok_or_else(|| Error::argument(format!("scan: no arrays of {t}")))
}

/// The word that publishes `v` (a 32-bit scalar of `elem`): its bits, and 1 above them.
fn pack(b: &mut ProgramBuilder, elem: Type, v: Value) -> Value {
    let u32t = Type::scalar(ScalarType::U32);
    let bits = if elem == u32t { v } else { b.bitcast(v, u32t) };
    let w = b.cast(bits, Type::scalar(ScalarType::U64));
    let flag = b.constant(Const::scalar(ScalarType::U64, 1 << 32));
    b.op(Opcode::Or, &[w, flag])
}

/// Element `at` of `flags` once it is published, as a value of `elem`: reads it (an atomic
/// `max` with 0, which changes nothing and reads the word where every tile writes it) until
/// its flag is set.
fn spin_read(b: &mut ProgramBuilder, elem: Type, flags: Value, at: Value) -> Value {
    let u64t = Type::scalar(ScalarType::U64);
    let zero = b.constant(Const::scalar(ScalarType::U64, 0));
    let w = b.declare_var("word", u64t);
    b.def_var(w, zero);
    b.do_until(
        |b| {
            let r = b.op_typed(Opcode::AtomicMax, &[flags, at, zero], u64t);
            b.def_var(w, r);
        },
        |b| {
            let r = b.use_var(w);
            let s = b.constant(Const::scalar(ScalarType::U64, 32));
            let hi = b.op(Opcode::Shr, &[r, s]);
            b.op(Opcode::Ne, &[hi, zero])
        },
    );
    let r = b.use_var(w);
    let u32t = Type::scalar(ScalarType::U32);
    let bits = b.cast(r, u32t);
    if elem == u32t {
        bits
    } else {
        b.bitcast(bits, elem)
    }
}

/// `publish`: stores `v`'s word at element `at` of `flags`.
fn publish(b: &mut ProgramBuilder, elem: Type, flags: Value, at: Value, v: Value) {
    let w = pack(b, elem, v);
    let u64t = Type::scalar(ScalarType::U64);
    b.op_typed(Opcode::AtomicXchg, &[flags, at, w], u64t);
}

/// `a ⊕ b` by the combiner.
fn comb(b: &mut ProgramBuilder, cp: &weft_ir::Program, x: Value, y: Value) -> Value {
    b.call(cp, &[x, y])[0]
}

/// Builder shorthands for the kernel's `i32` index arithmetic: `x op y`.
fn bin(b: &mut ProgramBuilder, o: Opcode, x: Value, y: Value) -> Value {
    b.op(o, &[x, y])
}

/// `x op k` for a constant `k`.
fn binc(b: &mut ProgramBuilder, o: Opcode, x: Value, k: usize) -> Value {
    let k = i32c(b, k);
    b.op(o, &[x, k])
}

/// A level's run and place: the run `lo ..= hi` (`hi < 0`: the tile needs none of this
/// level), the first word of the level's published values, and the level's length.
#[derive(Clone, Copy)]
struct Run {
    lo: Value,
    hi: Value,
    off: Value,
    size: Value,
}

/// The run one level up: `max(⌊lo / 32⌋ − 1, 0) ..= ⌊hi / 32⌋ − 1` (none stays none).
fn up(b: &mut ProgramBuilder, r: Run) -> Run {
    let zero = i32c(b, 0);
    let g = binc(b, Opcode::Shr, r.lo, 5);
    let lo = binc(b, Opcode::Sub, g, 1);
    let lo = bin(b, Opcode::Max, lo, zero);
    let need = bin(b, Opcode::Ge, r.hi, zero);
    let g = binc(b, Opcode::Shr, r.hi, 5);
    let hi = binc(b, Opcode::Sub, g, 1);
    let none = i32c(b, 0);
    let none = binc(b, Opcode::Sub, none, 1);
    let hi = b.select(need, hi, none);
    let off = bin(b, Opcode::Add, r.off, r.size);
    let s = binc(b, Opcode::Add, r.size, SCAN_FAN - 1);
    let size = binc(b, Opcode::Shr, s, 5);
    Run { lo, hi, off, size }
}

/// The run at level row `lev` (0 for level 2), climbing from level 2's.
fn climb(b: &mut ProgramBuilder, r2: Run, lev: Value) -> Run {
    let i32t = Type::i32();
    let vars = [
        b.declare_var("lo", i32t),
        b.declare_var("hi", i32t),
        b.declare_var("off", i32t),
        b.declare_var("size", i32t),
    ];
    for (v, x) in vars.iter().zip([r2.lo, r2.hi, r2.off, r2.size]) {
        b.def_var(*v, x);
    }
    let (zero, one) = (i32c(b, 0), i32c(b, 1));
    b.for_range(zero, lev, one, |b, _| {
        let r = Run {
            lo: b.use_var(vars[0]),
            hi: b.use_var(vars[1]),
            off: b.use_var(vars[2]),
            size: b.use_var(vars[3]),
        };
        let u = up(b, r);
        for (v, x) in vars.iter().zip([u.lo, u.hi, u.off, u.size]) {
            b.def_var(*v, x);
        }
    });
    Run {
        lo: b.use_var(vars[0]),
        hi: b.use_var(vars[1]),
        off: b.use_var(vars[2]),
        size: b.use_var(vars[3]),
    }
}

/// The first index of a run's window: the start of `lo`'s group of 32.
fn window_start(b: &mut ProgramBuilder, lo: Value) -> Value {
    let g = binc(b, Opcode::Shr, lo, 5);
    binc(b, Opcode::Shl, g, 5)
}

/// `dst[slot(p)]` ← the fold of `src[slot(32⌊p / 32⌋)] ..= src[slot(p)]` left to right for
/// `p < len` (a fold restarts every 32 slots), reading `chunk` slots at a time before
/// folding them. Each chunk's slots are computed just before its reads: with every slot
/// computed up front (as in efcaa10) the kernel took 56 registers a work-item instead of
/// 48, one work-group a multiprocessor fewer (`ptxas -v`; 173 → 192 µs for 2^26 f32).
fn left_scan(
    b: &mut ProgramBuilder,
    cp: &weft_ir::Program,
    (src, dst): (Value, Value),
    (len, chunk): (usize, usize),
    slot: impl Fn(&mut ProgramBuilder, usize) -> Value,
) {
    let mut acc = None;
    for c in (0..len).step_by(chunk) {
        let vals: Vec<_> = (c..len.min(c + chunk))
            .map(|p| {
                let at = slot(b, p);
                (p, at, b.read(src, at))
            })
            .collect();
        for (p, at, v) in vals {
            let a = match acc {
                Some(a) if !p.is_multiple_of(SCAN_FAN) => comb(b, cp, a, v),
                _ => v,
            };
            b.effect(Opcode::Store, &[dst, at, a]);
            acc = Some(a);
        }
    }
}

/// `fv[row + p]` ← the fold of `wv[row + 32⌊p / 32⌋ ..= row + p]` for `p < len`: a
/// window's folds from each group's start (its first index is a group's start).
fn walk(
    b: &mut ProgramBuilder,
    cp: &weft_ir::Program,
    (wv, fv): (Value, Value),
    row: Value,
    len: usize,
) {
    left_scan(b, cp, (wv, fv), (len, CHUNK), |b, p| {
        binc(b, Opcode::Add, row, p)
    });
}

/// The `scan.chain` kernel (module docs). Parameters: `x0`, `n`, `levels` (from
/// [`layout`]), the output `o0`, `p`, the zeroed scratch words, `next` and `cap`: words
/// the kernel zeroes (`next[0 .. cap]`, the next call's `p` on a GPU), and for an
/// `exclusive` scan `init`, element 0 of the output (every other result is written one
/// place on). The tile sits in shared memory with element `q` at `q + ⌊q / 32⌋` (a word of
/// padding every 32), so that a work-item's block and a warp's coalesced row both touch
/// every bank once, and every slot a work-item touches is its own offset plus a constant
/// (an XOR swizzle costs two instructions an access).
fn program(c: &Combiner, elem: Type, exclusive: bool) -> Result<Module> {
    let mut builder = ProgramBuilder::new("scan.chain");
    builder.make_kernel();
    let b = &mut builder;
    let i32t = Type::i32();
    let u64t = Type::scalar(ScalarType::U64);
    let x = b.array("x0", arr(elem)?);
    let n = b.uniform("n", i32t);
    let levels = b.uniform("levels", i32t);
    let out = b.buffer("o0", arr(elem)?);
    let flags = b.buffer("p", arr(u64t)?);
    let next = b.buffer("next", arr(u64t)?);
    let cap = b.uniform("cap", i32t);
    let init = exclusive.then(|| b.uniform("init", elem));
    let shared = |b: &mut ProgramBuilder, len: usize, t: Type| -> Result<Value> {
        let cap = i32c(b, len);
        Ok(b.op_typed(Opcode::Shared, &[cap], arr(t)?))
    };
    let tile_no = shared(b, 1, i32t)?;
    // Element `q` at `q + ⌊q / 32⌋` (a word of padding every 32; see below).
    let stage = shared(b, TILE + TILE / SCAN_FAN, elem)?;
    // Block folds, later each block's prefix `S₁[B − 1]`; the in-group scans of the folds.
    let t1 = shared(b, ITEMS, elem)?;
    let g1 = shared(b, ITEMS, elem)?;
    let t2 = shared(b, GROUPS, elem)?;
    // Per level: the window's values, and their folds (on the run, later, the S values).
    let wv = shared(b, LEVELS * WINDOW, elem)?;
    let fv = shared(b, LEVELS * WINDOW, elem)?;
    // Per level: the run's first and last index and the window's first.
    let meta = shared(b, 3 * LEVELS, i32t)?;
    let cp = c.program().clone();
    let lid = b.op_typed(Opcode::LocalId, &[], i32t);
    let l = binc(b, Opcode::And, lid, ITEMS - 1);
    let (zero, one) = (i32c(b, 0), i32c(b, 1));
    let first = bin(b, Opcode::Eq, l, zero);
    let barrier = |b: &mut ProgramBuilder| b.effect(Opcode::Barrier, &[]);

    // The tile's number, in the order work-groups start.
    b.if_(first, |b| {
        let one64 = b.constant(Const::scalar(ScalarType::U64, 1));
        let zero = i32c(b, 0);
        let t = b.op_typed(Opcode::AtomicAdd, &[flags, zero, one64], u64t);
        let t = b.cast(t, i32t);
        b.effect(Opcode::Store, &[tile_no, zero, t]);
        // An exclusive scan's element 0.
        if let Some(init) = init {
            let t0 = bin(b, Opcode::Eq, t, zero);
            b.if_(t0, |b| {
                let zero = i32c(b, 0);
                b.effect(Opcode::Store, &[out, zero, init]);
            });
        }
    });
    barrier(b);
    let t = b.read(tile_no, zero);
    let base = binc(b, Opcode::Mul, t, TILE);

    // The tile into shared memory, coalesced: every read first (clamped, so all are in
    // flight at once), then the stores.
    let lh = binc(b, Opcode::Shr, l, 5);
    // Row `j`'s element `l` (`q = 256j + l`) sits at `264j + l + ⌊l / 32⌋`: a per-work-item
    // offset plus a constant, which the address takes for free.
    let own = bin(b, Opcode::Add, l, lh);
    let row_slot = |b: &mut ProgramBuilder, j: usize| {
        binc(b, Opcode::Add, own, j * (ITEMS + ITEMS / SCAN_FAN))
    };
    let reads: Vec<_> = (0..SCAN_FAN)
        .map(|j| {
            let q = binc(b, Opcode::Add, l, j * ITEMS);
            let i = bin(b, Opcode::Add, base, q);
            (j, b.read(x, i))
        })
        .collect();
    for (j, v) in reads {
        let s = row_slot(b, j);
        b.effect(Opcode::Store, &[stage, s, v]);
    }
    barrier(b);

    // Block `l`'s scan from its start, in place, and its fold.
    let lo = binc(b, Opcode::Shl, l, 5);
    // Elements from the tile's start (never `base + …`, which can pass i32::MAX in the last
    // tile of a scan near MAX_ELEMENTS).
    let rest = bin(b, Opcode::Sub, n, base);
    let left = bin(b, Opcode::Sub, rest, lo);
    let len = binc(b, Opcode::Min, left, SCAN_FAN);
    let has = bin(b, Opcode::Gt, len, zero);
    // Block `l`'s element `e` (`q = 32l + e`) at `33l + e`.
    let b33 = bin(b, Opcode::Add, lo, l);
    let block_slot = |b: &mut ProgramBuilder, e: Value| bin(b, Opcode::Add, b33, e);
    b.if_(has, |b| {
        left_scan(b, &cp, (stage, stage), (SCAN_FAN, 2 * CHUNK), |b, e| {
            let ec = i32c(b, e);
            block_slot(b, ec)
        });
        let last = binc(b, Opcode::Sub, len, 1);
        let s = block_slot(b, last);
        let f = b.read(stage, s);
        b.effect(Opcode::Store, &[t1, l, f]);
    });
    barrier(b);

    // The tile's blocks and level-2 groups; group `l`'s scan of its blocks' folds, and its
    // fold, published at once (level 2 starts at word 1).
    let from = binc(b, Opcode::Add, rest, SCAN_FAN - 1);
    let blocks = binc(b, Opcode::Shr, from, 5);
    let blocks = binc(b, Opcode::Min, blocks, ITEMS);
    let bg = binc(b, Opcode::Add, blocks, SCAN_FAN - 1);
    let present = binc(b, Opcode::Shr, bg, 5);
    let et = binc(b, Opcode::Mul, t, GROUPS);
    let is_group = bin(b, Opcode::Lt, l, present);
    b.if_(is_group, |b| {
        let g0 = binc(b, Opcode::Shl, l, 5);
        let at = |b: &mut ProgramBuilder, r: Value| {
            let q = bin(b, Opcode::Or, g0, r);
            binc(b, Opcode::And, q, ITEMS - 1)
        };
        left_scan(b, &cp, (t1, g1), (SCAN_FAN, CHUNK), |b, r| {
            let rc = i32c(b, r);
            at(b, rc)
        });
        let nb = bin(b, Opcode::Sub, blocks, g0);
        let nb = binc(b, Opcode::Min, nb, SCAN_FAN);
        let last = binc(b, Opcode::Sub, nb, 1);
        let q = at(b, last);
        let a = b.read(g1, q);
        b.effect(Opcode::Store, &[t2, l, a]);
        let h = bin(b, Opcode::Add, et, l);
        let w = binc(b, Opcode::Add, h, 1);
        publish(b, elem, flags, w, a);
    });
    barrier(b);

    // Level 2's window: earlier tiles' published values, the tile's own from `t2`.
    let gm2 = binc(b, Opcode::Sub, et, 2);
    let lo2 = bin(b, Opcode::Max, gm2, zero);
    let hi2 = bin(b, Opcode::Add, et, present);
    let hi2 = binc(b, Opcode::Sub, hi2, 2);
    let size2 = binc(b, Opcode::Add, n, SCAN_FAN * SCAN_FAN - 1);
    let size2 = binc(b, Opcode::Shr, size2, 10);
    let r2 = Run {
        lo: lo2,
        hi: hi2,
        off: one,
        size: size2,
    };
    let w2 = window_start(b, lo2);
    let read_window = |b: &mut ProgramBuilder, r: Run, row: Value, p: Value, own: bool| {
        let w = window_start(b, r.lo);
        let j = bin(b, Opcode::Add, w, p);
        let zero = i32c(b, 0);
        let need = bin(b, Opcode::Ge, r.hi, zero);
        let in_win = binc(b, Opcode::Lt, p, WINDOW);
        let to_hi = bin(b, Opcode::Le, j, r.hi);
        let rd = bin(b, Opcode::And, need, in_win);
        let rd = bin(b, Opcode::And, rd, to_hi);
        b.if_(rd, |b| {
            let mine = if own {
                bin(b, Opcode::Ge, j, et)
            } else {
                b.constant(Const::bool(false))
            };
            let v = b.if_else(
                mine,
                |b| {
                    let q = bin(b, Opcode::Sub, j, et);
                    let q = binc(b, Opcode::And, q, GROUPS - 1);
                    vec![b.read(t2, q)]
                },
                |b| {
                    let at = bin(b, Opcode::Add, r.off, j);
                    vec![spin_read(b, elem, flags, at)]
                },
            )[0];
            let s = bin(b, Opcode::Add, row, p);
            b.effect(Opcode::Store, &[wv, s, v]);
        });
    };
    read_window(b, r2, zero, l, true);
    barrier(b);

    // Work-item 0 folds level 2's window and, if the tile holds the last group of a group
    // of 32 (a full tile, t ≡ 3 mod 4), publishes that group's fold one level up; meanwhile
    // work-items 64 … read the windows of the levels above, three levels a round.
    let c0 = binc(b, Opcode::Add, et, GROUPS - 1);
    let tile = i32c(b, TILE);
    let full = bin(b, Opcode::Le, tile, rest);
    let cm = binc(b, Opcode::And, c0, SCAN_FAN - 1);
    let last = binc(b, Opcode::Eq, cm, SCAN_FAN - 1);
    let comp = bin(b, Opcode::And, full, last);
    let up3 = b.declare_var("up3", elem);
    let z = b.constant(Const::zero(elem));
    b.def_var(up3, z);
    b.if_(first, |b| {
        for (q, v) in [lo2, hi2, w2].into_iter().enumerate() {
            let at = i32c(b, q);
            b.effect(Opcode::Store, &[meta, at, v]);
        }
        let zero = i32c(b, 0);
        walk(b, &cp, (wv, fv), zero, WINDOW_2);
        b.if_(comp, |b| {
            let p = bin(b, Opcode::Sub, hi2, w2);
            let f = b.read(fv, p);
            let gl = i32c(b, GROUPS - 1);
            let mine = b.read(t2, gl);
            let v = comb(b, &cp, f, mine);
            let g = binc(b, Opcode::Shr, c0, 5);
            let o = bin(b, Opcode::Add, one, size2);
            let at = bin(b, Opcode::Add, o, g);
            publish(b, elem, flags, at, v);
            b.def_var(up3, v);
        });
    });
    let upper = binc(b, Opcode::Ge, l, 2 * SCAN_FAN);
    b.if_(upper, |b| {
        let k = binc(b, Opcode::Sub, l, 2 * SCAN_FAN);
        let slot = binc(b, Opcode::Shr, k, 6);
        let p = binc(b, Opcode::And, k, WINDOW - 1);
        let rounds = binc(b, Opcode::Add, levels, 1);
        let rounds = binc(b, Opcode::Div, rounds, 3);
        let (zero, one) = (i32c(b, 0), i32c(b, 1));
        b.for_range(zero, rounds, one, |b, round| {
            let r3 = binc(b, Opcode::Mul, round, 3);
            let lev = bin(b, Opcode::Add, r3, slot);
            let lev = binc(b, Opcode::Add, lev, 1);
            let here = bin(b, Opcode::Lt, lev, levels);
            b.if_(here, |b| {
                let r = climb(b, r2, lev);
                let row = binc(b, Opcode::Mul, lev, WINDOW);
                read_window(b, r, row, p, false);
            });
        });
    });
    barrier(b);

    // Each level above folds its window (work-item 32 · row), and records its run.
    let lev = binc(b, Opcode::Shr, l, 5);
    let lane = binc(b, Opcode::And, l, SCAN_FAN - 1);
    let lane0 = bin(b, Opcode::Eq, lane, zero);
    let above = bin(b, Opcode::Ge, lev, one);
    let in_levels = bin(b, Opcode::Lt, lev, levels);
    let walker = bin(b, Opcode::And, lane0, above);
    let walker = bin(b, Opcode::And, walker, in_levels);
    b.if_(walker, |b| {
        let r = climb(b, r2, lev);
        let w = window_start(b, r.lo);
        let mrow = binc(b, Opcode::Mul, lev, 3);
        for (q, v) in [r.lo, r.hi, w].into_iter().enumerate() {
            let at = binc(b, Opcode::Add, mrow, q);
            b.effect(Opcode::Store, &[meta, at, v]);
        }
        let row = binc(b, Opcode::Mul, lev, WINDOW);
        walk(b, &cp, (wv, fv), row, WINDOW_UP);
    });
    barrier(b);

    // Work-item 0: the chain of completed groups above level 2, then top down S on each
    // level's run (`S_{k+1}[g − 1] ⊕ fold` in place of the fold).
    b.if_(first, |b| {
        let zero = i32c(b, 0);
        let one = i32c(b, 1);
        b.if_(comp, |b| {
            let v = b.use_var(up3);
            let i32t = Type::i32();
            let (own, cidx, comp) = (
                b.declare_var("own", elem),
                b.declare_var("cidx", i32t),
                b.declare_var("comp", Type::bool()),
            );
            b.def_var(own, v);
            let c1 = binc(b, Opcode::Shr, c0, 5);
            b.def_var(cidx, c1);
            let t = b.constant(Const::bool(true));
            b.def_var(comp, t);
            let one = i32c(b, 1);
            b.for_range(one, levels, one, |b, lev| {
                let ci = b.use_var(cidx);
                let cm = binc(b, Opcode::And, ci, SCAN_FAN - 1);
                let last = binc(b, Opcode::Eq, cm, SCAN_FAN - 1);
                let was = b.use_var(comp);
                let now = bin(b, Opcode::And, was, last);
                b.def_var(comp, now);
                b.if_(now, |b| {
                    let mrow = binc(b, Opcode::Mul, lev, 3);
                    let hi_at = binc(b, Opcode::Add, mrow, 1);
                    let w_at = binc(b, Opcode::Add, mrow, 2);
                    let hi = b.read(meta, hi_at);
                    let w = b.read(meta, w_at);
                    let row = binc(b, Opcode::Mul, lev, WINDOW);
                    let p = bin(b, Opcode::Sub, hi, w);
                    let at = bin(b, Opcode::Add, row, p);
                    let f = b.read(fv, at);
                    let mine = b.use_var(own);
                    let v = comb(b, &cp, f, mine);
                    let upl = binc(b, Opcode::Add, lev, 1);
                    let r = climb(b, r2, upl);
                    let g = binc(b, Opcode::Shr, ci, 5);
                    let at = bin(b, Opcode::Add, r.off, g);
                    publish(b, elem, flags, at, v);
                    b.def_var(own, v);
                    b.def_var(cidx, g);
                });
            });
        });
        b.for_range(zero, levels, one, |b, kk| {
            let one = i32c(b, 1);
            let top = binc(b, Opcode::Sub, levels, 1);
            let lev = bin(b, Opcode::Sub, top, kk);
            let mrow = binc(b, Opcode::Mul, lev, 3);
            let get = |b: &mut ProgramBuilder, base: Value, q: usize| {
                let at = binc(b, Opcode::Add, base, q);
                b.read(meta, at)
            };
            let (lo, hi, w) = (get(b, mrow, 0), get(b, mrow, 1), get(b, mrow, 2));
            let umrow = binc(b, Opcode::Add, mrow, 3);
            let uw = get(b, umrow, 2);
            let row = binc(b, Opcode::Mul, lev, WINDOW);
            let ulev = binc(b, Opcode::Add, lev, 1);
            let urow = binc(b, Opcode::Mul, ulev, WINDOW);
            let end = bin(b, Opcode::Add, hi, one);
            b.for_range(lo, end, one, |b, j| {
                let zero = i32c(b, 0);
                let g = binc(b, Opcode::Shr, j, 5);
                let later = bin(b, Opcode::Gt, g, zero);
                b.if_(later, |b| {
                    let p = bin(b, Opcode::Sub, j, w);
                    let s = bin(b, Opcode::Add, row, p);
                    let f = b.read(fv, s);
                    let gp = binc(b, Opcode::Sub, g, 1);
                    let q = bin(b, Opcode::Sub, gp, uw);
                    let us = bin(b, Opcode::Add, urow, q);
                    let u = b.read(fv, us);
                    let r = comb(b, &cp, u, f);
                    b.effect(Opcode::Store, &[fv, s, r]);
                });
            });
        });
    });
    barrier(b);

    // Block `l`'s prefix `S₁[B − 1]` into `t1[l]`: for a group's first block
    // `S₂[h − 2] ⊕ a₂[h − 1]`, for the others `S₂[h − 1] ⊕ G[l − 1]` (each first factor
    // when its index is ≥ 0), with `h` the block's level-2 group (block 0 has none).
    let m = binc(b, Opcode::Shr, l, 5);
    let h = bin(b, Opcode::Add, et, m);
    let h1 = bin(b, Opcode::Ge, h, one);
    let r0 = bin(b, Opcode::Eq, lane, zero);
    let hm1 = binc(b, Opcode::Sub, h, 1);
    let p1 = bin(b, Opcode::Sub, hm1, w2);
    let p1 = bin(b, Opcode::Max, p1, zero);
    let p1 = binc(b, Opcode::And, p1, WINDOW - 1);
    let tb = binc(b, Opcode::Mul, t, ITEMS);
    let blk = bin(b, Opcode::Add, tb, l);
    let later = bin(b, Opcode::Gt, blk, zero);
    let go = bin(b, Opcode::And, later, has);
    b.if_(go, |b| {
        let pre = b.if_else(
            r0,
            |b| {
                let a = b.read(wv, p1);
                let two = i32c(b, 2);
                let h2 = bin(b, Opcode::Ge, h, two);
                b.if_else(
                    h2,
                    |b| {
                        let p2 = binc(b, Opcode::Sub, p1, 1);
                        let p2 = binc(b, Opcode::And, p2, WINDOW - 1);
                        let s = b.read(fv, p2);
                        vec![comb(b, &cp, s, a)]
                    },
                    |_| vec![a],
                )
            },
            |b| {
                let q = binc(b, Opcode::Sub, l, 1);
                let q = binc(b, Opcode::And, q, ITEMS - 1);
                let g = b.read(g1, q);
                b.if_else(
                    h1,
                    |b| {
                        let u = b.read(fv, p1);
                        vec![comb(b, &cp, u, g)]
                    },
                    |_| vec![g],
                )
            },
        )[0];
        b.effect(Opcode::Store, &[t1, l, pre]);
    });
    barrier(b);

    // The tile out, coalesced, each element's in-block scan combined after its block's
    // prefix (not block 0's: tile 0's first 32 elements are their own scan). A loop, not
    // unrolled here: unrolled, the compiler front-loads every element's reads and bounds
    // check (96 registers, two work-groups per multiprocessor).
    let fan = i32c(b, SCAN_FAN);
    let later_tile = bin(b, Opcode::Gt, t, zero);
    b.for_range(zero, fan, one, |b, j| {
        let j8 = binc(b, Opcode::Shl, j, 3);
        let blk = bin(b, Opcode::Add, lh, j8);
        let row = binc(b, Opcode::Shl, j, 8);
        let js = binc(b, Opcode::Mul, j, ITEMS + ITEMS / SCAN_FAN);
        let s = bin(b, Opcode::Add, js, own);
        let x = b.read(stage, s);
        let blk = binc(b, Opcode::And, blk, ITEMS - 1);
        let pre = b.read(t1, blk);
        let y = comb(b, &cp, pre, x);
        let zero = i32c(b, 0);
        let later = bin(b, Opcode::Gt, blk, zero);
        let later = bin(b, Opcode::Or, later, later_tile);
        let v = b.select(later, y, x);
        let q = bin(b, Opcode::Add, row, l);
        let mut i = bin(b, Opcode::Add, base, q);
        if exclusive {
            // One place on (the last element's goes out of range: stores there do nothing).
            i = binc(b, Opcode::Add, i, 1);
        }
        b.effect(Opcode::Store, &[out, i, v]);
    });

    // The next call's words zeroed: `next[0 .. cap]`, spread over the work-groups.
    // ⌈n / TILE⌉ work-groups (n ≥ 1; n + TILE − 1 could pass i32::MAX).
    let gs = binc(b, Opcode::Sub, n, 1);
    let gs = binc(b, Opcode::Shr, gs, TILE.trailing_zeros() as usize);
    let gs = binc(b, Opcode::Add, gs, 1);
    let stride = binc(b, Opcode::Mul, gs, ITEMS);
    let from = bin(b, Opcode::Add, tb, l);
    let zero64 = b.constant(Const::scalar(ScalarType::U64, 0));
    b.for_range(from, cap, stride, |b, k| {
        b.effect(Opcode::Store, &[next, k, zero64]);
    });
    finish_module(builder, c, None)
}
