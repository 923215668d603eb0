//! The CPU device's `cumsum` (issue 25): the fixed order of docs/semantics.md ("Scans") in
//! one pass over host buffers, on every thread — a chained scan (Merrill and Garland's
//! single-pass scan, with the predecessor's state handed on instead of looked back for).
//!
//! The order: elements in blocks of [`FAN`]; element `i` of block `b` is the fold of the
//! block up to `i`, left to right, combined after element `b − 1` of the inclusive scan (in
//! this same order) of the blocks' totals. `Levels` computes that scan of the totals as
//! they arrive, one level per fan-in; a chunk of whole blocks (at most `CHUNK_BYTES`) is
//! read once from memory to fold its blocks, hands its folds of 32 block totals through
//! the levels in chunk order, and is walked again from the cache to write the results.
//! Each result is the same expression the kernels evaluate, so the bits are the same as
//! every other device's.

use crate::buffer::HostBuffer;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use weft_ir::ScalarType;

/// Elements per block of a scan (frontend `SCAN_FAN`).
pub const FAN: usize = 32;

/// Most bytes in a chunk. A chunk stays in the core's L2 cache between its fold and its
/// walk, beside the next chunk being folded: two chunks of 1 MiB fit the 2 MiB of a recent
/// Xeon's L2 (on AMD Zen 4's 1 MiB the walk reads from L3). Chunks of 128 KiB (1,024
/// blocks of `f32`) were 12–20 % slower at 2^24 `f32` on two threads (docs/performance.md,
/// eighteenth session): each chunk restarts the hardware prefetchers' streams.
const CHUNK_BYTES: usize = 1 << 20;

/// Fewest elements in a chunk: 1,024 blocks, whose 1,024 totals are one block of the
/// second level.
const MIN_CHUNK: usize = FAN * FAN * FAN;

/// Elements per chunk of a scan of `n` elements of `T` on `threads` threads: a power of
/// two from [`MIN_CHUNK`] up to [`CHUNK_BYTES`], small enough to give each thread two to
/// four chunks (more once chunks reach `CHUNK_BYTES`), so that mid-sized scans still use
/// every thread. A multiple of `FAN * FAN`, as [`Levels::hand_on`] needs.
fn chunk_len<T>(n: usize, threads: usize) -> usize {
    let most = (CHUNK_BYTES / std::mem::size_of::<T>()).max(MIN_CHUNK);
    (n / (4 * threads.max(1)))
        .next_power_of_two()
        .clamp(MIN_CHUNK, most)
}

/// Blocks folded side by side (independent chains for the core's adders).
const LANES: usize = 8;

/// An element type with the sum of [`cumsum`]: IEEE addition for floats, wrapping for
/// integers.
trait Sum: Copy + Send + Sync + Default + 'static {
    fn add(self, o: Self) -> Self;

    /// The folds of the [`LANES`] blocks of `g` into `acc` by SIMD, if this CPU has it;
    /// false when the caller must fold them.
    fn fold_group(_g: &[Self], _acc: &mut [Self; LANES]) -> bool {
        false
    }

    /// The walk of the [`LANES`] blocks of `g` after `prev` into `out` by SIMD, if this CPU
    /// has it; false when the caller must walk them.
    fn walk_group(_g: &[Self], _prev: &[Self; LANES], _out: &mut [Self]) -> bool {
        false
    }
}

impl Sum for f32 {
    fn add(self, o: f32) -> f32 {
        self + o
    }

    fn fold_group(g: &[f32], acc: &mut [f32; LANES]) -> bool {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx") {
            assert!(g.len() == LANES * FAN);
            // SAFETY: AVX is present; `g` holds the group's `LANES * FAN` elements.
            unsafe { avx::fold_group(g.as_ptr(), acc) };
            return true;
        }
        let _ = (g, acc);
        false
    }

    fn walk_group(g: &[f32], prev: &[f32; LANES], out: &mut [f32]) -> bool {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx") {
            assert!(g.len() == LANES * FAN && out.len() == LANES * FAN);
            // SAFETY: AVX is present; `g` and `out` hold the group's elements.
            unsafe { avx::walk_group(g.as_ptr(), prev, out.as_mut_ptr()) };
            return true;
        }
        let _ = (g, prev, out);
        false
    }
}

/// `f32` groups of [`LANES`] blocks with AVX: 8 × 8 tiles of the blocks are transposed so
/// that one vector holds element `i` of each block, and the blocks' chains run side by side
/// — the same additions in the same order as the scalar loops.
#[cfg(target_arch = "x86_64")]
mod avx {
    use super::{FAN, LANES};
    use std::arch::x86_64::*;

    /// Transposes the 8 × 8 tile `r` (row `j` becomes column `j`).
    #[target_feature(enable = "avx")]
    fn transpose(r: &mut [__m256; 8]) {
        let t0 = _mm256_unpacklo_ps(r[0], r[1]);
        let t1 = _mm256_unpackhi_ps(r[0], r[1]);
        let t2 = _mm256_unpacklo_ps(r[2], r[3]);
        let t3 = _mm256_unpackhi_ps(r[2], r[3]);
        let t4 = _mm256_unpacklo_ps(r[4], r[5]);
        let t5 = _mm256_unpackhi_ps(r[4], r[5]);
        let t6 = _mm256_unpacklo_ps(r[6], r[7]);
        let t7 = _mm256_unpackhi_ps(r[6], r[7]);
        let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
        let u1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
        let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
        let u3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
        let u4 = _mm256_shuffle_ps::<0x44>(t4, t6);
        let u5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
        let u6 = _mm256_shuffle_ps::<0x44>(t5, t7);
        let u7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
        r[0] = _mm256_permute2f128_ps::<0x20>(u0, u4);
        r[1] = _mm256_permute2f128_ps::<0x20>(u1, u5);
        r[2] = _mm256_permute2f128_ps::<0x20>(u2, u6);
        r[3] = _mm256_permute2f128_ps::<0x20>(u3, u7);
        r[4] = _mm256_permute2f128_ps::<0x31>(u0, u4);
        r[5] = _mm256_permute2f128_ps::<0x31>(u1, u5);
        r[6] = _mm256_permute2f128_ps::<0x31>(u2, u6);
        r[7] = _mm256_permute2f128_ps::<0x31>(u3, u7);
    }

    /// Columns `8t .. 8t + 8` of the group at `g`: vector `k` holds element `8t + k` of
    /// every block.
    ///
    /// # Safety
    /// AVX; `g` points at `LANES * FAN` readable `f32`s.
    #[target_feature(enable = "avx")]
    unsafe fn columns(g: *const f32, t: usize) -> [__m256; 8] {
        // SAFETY: rows `j` and columns `8t .. 8t + 8 <= FAN` are inside the group.
        let mut r: [__m256; 8] =
            std::array::from_fn(|j| unsafe { _mm256_loadu_ps(g.add(j * FAN + 8 * t)) });
        transpose(&mut r);
        r
    }

    /// The folds of the group's blocks, left to right, into `acc`.
    ///
    /// # Safety
    /// As [`columns`].
    #[target_feature(enable = "avx")]
    pub(super) unsafe fn fold_group(g: *const f32, acc: &mut [f32; LANES]) {
        // SAFETY: the caller's.
        let c = unsafe { columns(g, 0) };
        let mut a = c[0];
        for v in &c[1..] {
            a = _mm256_add_ps(a, *v);
        }
        for t in 1..FAN / 8 {
            // SAFETY: the caller's.
            let c = unsafe { columns(g, t) };
            for v in c {
                a = _mm256_add_ps(a, v);
            }
        }
        // SAFETY: `acc` holds 8 `f32`s.
        unsafe { _mm256_storeu_ps(acc.as_mut_ptr(), a) };
    }

    /// The group's running folds, each combined after its block's `prev`, into `out`.
    ///
    /// # Safety
    /// As [`columns`], and `out` points at `LANES * FAN` writable `f32`s.
    #[target_feature(enable = "avx")]
    pub(super) unsafe fn walk_group(g: *const f32, prev: &[f32; LANES], out: *mut f32) {
        // SAFETY: `prev` holds 8 `f32`s.
        let p = unsafe { _mm256_loadu_ps(prev.as_ptr()) };
        let mut a = _mm256_setzero_ps();
        // The group's results, staged so that they go out as whole lines.
        let mut stage = [std::mem::MaybeUninit::<__m256>::uninit(); LANES * FAN / 8];
        for t in 0..FAN / 8 {
            // SAFETY: the caller's.
            let c = unsafe { columns(g, t) };
            let mut o = [_mm256_setzero_ps(); 8];
            for (k, v) in c.into_iter().enumerate() {
                a = if t == 0 && k == 0 {
                    v
                } else {
                    _mm256_add_ps(a, v)
                };
                o[k] = _mm256_add_ps(p, a);
            }
            transpose(&mut o);
            for (j, v) in o.into_iter().enumerate() {
                stage[j * FAN / 8 + t].write(v);
            }
        }
        if (out as usize).is_multiple_of(32) {
            for (i, v) in stage.iter().enumerate() {
                // SAFETY: the group's output, 32-byte aligned; whole lines in order. Every
                // stage entry was written (each tile's 8 rows).
                unsafe { _mm256_stream_ps(out.add(8 * i), v.assume_init()) };
            }
        } else {
            for (i, v) in stage.iter().enumerate() {
                // SAFETY: the group's output; every stage entry was written.
                unsafe { _mm256_storeu_ps(out.add(8 * i), v.assume_init()) };
            }
        }
    }
}

impl Sum for f64 {
    fn add(self, o: f64) -> f64 {
        self + o
    }
}

impl Sum for u32 {
    fn add(self, o: u32) -> u32 {
        self.wrapping_add(o)
    }
}

impl Sum for u64 {
    fn add(self, o: u64) -> u64 {
        self.wrapping_add(o)
    }
}

/// One level of the scan of the blocks' totals: level 0 scans the totals of the element
/// blocks, level `k + 1` the totals of level `k`'s blocks.
#[derive(Clone, Copy, Default)]
struct Level<T> {
    /// Values seen.
    count: usize,
    /// The fold of the current block so far.
    run: T,
    /// Element `b − 1` of the next level's scan, for the current block `b > 0`.
    prev: Option<T>,
    /// The scan's last element.
    last: T,
}

/// The inclusive scan, in the fixed order, of a stream of block totals.
#[derive(Clone, Default)]
struct Levels<T> {
    levels: Vec<Level<T>>,
}

impl<T: Sum> Levels<T> {
    /// The scan's last element so far, if any: what the next block is combined after.
    fn last(&self) -> Option<T> {
        self.levels.first().filter(|l| l.count > 0).map(|l| l.last)
    }

    /// Appends the totals of a whole chunk (a multiple of `FAN * FAN` of them, starting a
    /// block of the second level) given only their folds by 32 (`folds`, the second level's
    /// values): the second level and above take them one by one, the first level's state
    /// after the chunk follows from the last. Returns the first level's last element
    /// before the chunk and the second level's before each fold — all that
    /// [`Prevs::Runs`] needs for the chunk's own elements of the first level. The work done
    /// in chunk order is one push for 32 totals.
    fn hand_on(&mut self, folds: &[T]) -> (Option<T>, Vec<Option<T>>) {
        if self.levels.is_empty() {
            self.levels.push(Level::default());
        }
        let l0 = self.levels[0].count;
        debug_assert!(l0.is_multiple_of(FAN * FAN) && folds.len().is_multiple_of(FAN));
        let before = self.last();
        let mut above = Vec::with_capacity(folds.len());
        for &f in folds {
            above.push(self.levels.get(1).filter(|l| l.count > 0).map(|l| l.last));
            self.push_at(1, f);
        }
        // The first level's last block: its fold follows the second level's element
        // before it.
        let (prev, run) = (above[folds.len() - 1], folds[folds.len() - 1]);
        self.levels[0] = Level {
            count: l0 + folds.len() * FAN,
            run,
            prev,
            last: match prev {
                Some(p) => p.add(run),
                None => run,
            },
        };
        (before, above)
    }

    /// Appends `totals` in order, writing before each the scan's last element so far (what
    /// its block is combined after) into `prev` (a chunk shorter than the others; whole ones
    /// go through [`Levels::hand_on`]).
    fn push_all(&mut self, totals: &[T], prev: &mut Vec<Option<T>>) {
        prev.clear();
        for &t in totals {
            prev.push(self.last());
            self.push(t);
        }
    }

    /// Appends total `v`: the fold of its block so far, combined after the next level's
    /// element for the block before; a finished block's fold goes on to the next level.
    fn push(&mut self, v: T) {
        self.push_at(0, v);
    }

    /// [`Levels::push`] from level `k` up.
    fn push_at(&mut self, mut k: usize, mut v: T) {
        loop {
            if k == self.levels.len() {
                self.levels.push(Level::default());
            }
            let above = self.levels.get(k + 1).map(|l| l.last);
            let l = &mut self.levels[k];
            if l.count.is_multiple_of(FAN) {
                // A block's first value; blocks after the first follow the next level's
                // element for the block before (pushed when that block finished).
                l.prev = if l.count > 0 { above } else { None };
                l.run = v;
            } else {
                l.run = l.run.add(v);
            }
            l.last = match l.prev {
                Some(p) => p.add(l.run),
                None => l.run,
            };
            l.count += 1;
            if !l.count.is_multiple_of(FAN) {
                return;
            }
            v = l.run;
            k += 1;
        }
    }
}

/// What each block of a chunk is combined after: element `b − 1` of the first level's scan
/// for the chunk's block `b` (`None` for the scan's first block).
enum Prevs<'a, T> {
    /// Listed block by block (a chunk shorter than the others, from
    /// [`Levels::push_all`]).
    Listed(&'a [Option<T>]),
    /// Worked out as the walk goes, for a whole chunk from [`Levels::hand_on`]'s results:
    /// the first level's fold within each run of 32 totals combined after the second level's
    /// element before the run (`above`), the element before a run's first block the previous
    /// run's (its whole fold, `folds`, combined after its `above`), the chunk's first after
    /// `before`. A group's [`LANES`] elements are a short chain of additions that overlaps
    /// the group's walk.
    Runs {
        totals: &'a [T],
        folds: &'a [T],
        before: Option<T>,
        above: &'a [Option<T>],
    },
}

impl<T: Sum> Prevs<'_, T> {
    /// The elements for blocks `b0 .. b0 + LANES` (`b0` a multiple of [`LANES`], the groups
    /// asked for in order); `run` carries the fold of the current run of 32 totals from one
    /// group to the next.
    fn group(&self, b0: usize, run: &mut T) -> [Option<T>; LANES] {
        let put = |p: Option<T>, r: T| {
            Some(match p {
                Some(p) => p.add(r),
                None => r,
            })
        };
        let mut p = [None; LANES];
        match *self {
            Prevs::Listed(l) => p.copy_from_slice(&l[b0..b0 + LANES]),
            Prevs::Runs {
                totals,
                folds,
                before,
                above,
            } => {
                // A plain loop: `array::from_fn`'s closure was not inlined.
                for (j, p) in p.iter_mut().enumerate() {
                    let b = b0 + j;
                    let (r, i) = (b / FAN, b % FAN);
                    *p = match (i, r) {
                        (0, 0) => before,
                        (0, _) => put(above[r - 1], folds[r - 1]),
                        _ => put(above[r], *run),
                    };
                    *run = if i == 0 {
                        totals[b]
                    } else {
                        run.add(totals[b])
                    };
                }
            }
        }
        p
    }
}

/// The folds of `x`'s blocks (the last may be short), left to right, into `totals`.
fn fold_blocks<T: Sum>(x: &[T], totals: &mut Vec<T>) {
    totals.clear();
    let mut groups = x.chunks_exact(FAN * LANES);
    for g in groups.by_ref() {
        fold_group(g, totals);
    }
    fold_tail(groups.remainder(), totals);
}

/// Appends the folds of the [`LANES`] blocks of group `g` to `totals`.
fn fold_group<T: Sum>(g: &[T], totals: &mut Vec<T>) {
    let mut acc = [T::default(); LANES];
    if !T::fold_group(g, &mut acc) {
        acc = std::array::from_fn(|j| g[j * FAN]);
        for i in 1..FAN {
            for (j, a) in acc.iter_mut().enumerate() {
                *a = a.add(g[j * FAN + i]);
            }
        }
    }
    totals.extend_from_slice(&acc);
}

/// Appends the folds of the blocks of `rest` (fewer than a group; the last may be short)
/// to `totals`.
fn fold_tail<T: Sum>(rest: &[T], totals: &mut Vec<T>) {
    totals.extend(rest.chunks(FAN).map(fold));
}

/// The fold of `xs` (not empty), left to right.
fn fold<T: Sum>(xs: &[T]) -> T {
    xs[1..].iter().fold(xs[0], |a, &v| a.add(v))
}

/// Writes the scan of `x`'s blocks into `out`: each block's running fold, combined after
/// what `prev` gives for block `b` (nothing for the scan's first block) — and, group by
/// group beside it, folds the blocks of `next` (the chunk this thread walks next) into
/// `next_totals`. So one loop reads `next` from memory as a stream while `x` (folded
/// before, so in the cache) goes out as another, as a copy loop does: the hardware
/// prefetchers see two sequential streams, and no software prefetch takes the line-fill
/// buffers the streaming stores need.
fn walk_blocks<T: Sum>(
    x: &[T],
    prev: Prevs<'_, T>,
    out: &mut [T],
    next: &[T],
    next_totals: &mut Vec<T>,
) {
    next_totals.clear();
    let mut next_groups = next.chunks_exact(FAN * LANES);
    let put = |p: Option<T>, r: T| match p {
        Some(p) => p.add(r),
        None => r,
    };
    let mut at = 0;
    let mut run = T::default();
    let mut groups = x
        .chunks_exact(FAN * LANES)
        .zip(out.chunks_exact_mut(FAN * LANES));
    for (g, o) in groups.by_ref() {
        if let Some(ng) = next_groups.next() {
            fold_group(ng, next_totals);
        }
        let p = prev.group(at, &mut run);
        if p.iter().all(Option::is_some) {
            let p = p.map(|p| p.unwrap_or_default());
            if T::walk_group(g, &p, o) {
                at += LANES;
                continue;
            }
        }
        let mut acc: [T; LANES] = std::array::from_fn(|j| g[j * FAN]);
        for j in 0..LANES {
            o[j * FAN] = put(p[j], acc[j]);
        }
        for i in 1..FAN {
            for j in 0..LANES {
                acc[j] = acc[j].add(g[j * FAN + i]);
                o[j * FAN + i] = put(p[j], acc[j]);
            }
        }
        at += LANES;
    }
    for ng in next_groups.by_ref() {
        fold_group(ng, next_totals);
    }
    fold_tail(next_groups.remainder(), next_totals);
    let done = at * FAN;
    let Prevs::Listed(prev) = prev else {
        // A whole chunk is whole groups.
        debug_assert!(done == x.len());
        return;
    };
    for (b, (xb, ob)) in x[done..]
        .chunks(FAN)
        .zip(out[done..].chunks_mut(FAN))
        .enumerate()
    {
        let mut acc = xb[0];
        ob[0] = put(prev[at + b], acc);
        for (i, &v) in xb.iter().enumerate().skip(1) {
            acc = acc.add(v);
            ob[i] = put(prev[at + b], acc);
        }
    }
}

/// The inclusive scan of `x` into `out` on up to `threads` threads.
fn scan_planes<T: Sum>(x: &[T], out: &mut [T], threads: usize) -> bool {
    let n = x.len();
    let len = chunk_len::<T>(n, threads);
    let chunks = n.div_ceil(len);
    // The levels after the chunks handed on so far, and how many those are.
    let state = Mutex::new(Levels::<T>::default());
    let handed = AtomicUsize::new(0);
    let outs: Vec<Mutex<&mut [T]>> = out.chunks_mut(len).map(Mutex::new).collect();
    let workers = threads.clamp(1, chunks.max(1));
    let chunk = |c: usize| &x[(c * len).min(n)..((c + 1) * len).min(n)];
    // Set when a worker panicked (a broken invariant): the others stop, and the scan
    // reports failure instead of handing out a partial result or waiting for ever.
    let failed = AtomicBool::new(false);
    // Chunks are claimed in order, each by a running worker, and chunk `c − 1`'s worker
    // hands it on before it waits for anything later: this wait ends (false when a worker
    // failed).
    let wait = |c: usize| {
        let mut spins = 0u32;
        while handed.load(Ordering::Acquire) != c {
            if failed.load(Ordering::Acquire) {
                return false;
            }
            spins += 1;
            if spins < 1 << 12 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        true
    };
    let claimed = AtomicUsize::new(0);
    let claim = || Some(claimed.fetch_add(1, Ordering::Relaxed)).filter(|&c| c < chunks);
    // Workers take turns along the chunks (chunk `c + 1` is folded by another worker while
    // this one walks `c`, or by this one during that walk when it runs alone). Each claims
    // its next chunk before it walks the current one and folds it during the walk
    // ([`walk_blocks`]): it hands that chunk on only after the walk, and nothing it waits
    // for is claimed after it, so the waits end.
    let work = |_: usize| {
        let (mut totals, mut next_totals, mut prev) = (Vec::new(), Vec::new(), Vec::new());
        let mut cur = claim();
        if let Some(c) = cur {
            fold_blocks(chunk(c), &mut totals);
        }
        while let Some(c) = cur {
            let xc = chunk(c);
            let (folds, above);
            let prevs = if xc.len() == len {
                // A whole chunk hands on its folds of 32 totals; what its own blocks are
                // combined after is worked out during its walk.
                folds = totals.chunks(FAN).map(fold).collect::<Vec<T>>();
                if !wait(c) {
                    return;
                }
                let before;
                (before, above) = state
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .hand_on(&folds);
                handed.store(c + 1, Ordering::Release);
                Prevs::Runs {
                    totals: &totals,
                    folds: &folds,
                    before,
                    above: &above,
                }
            } else {
                if !wait(c) {
                    return;
                }
                state
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push_all(&totals, &mut prev);
                handed.store(c + 1, Ordering::Release);
                Prevs::Listed(&prev)
            };
            let next = claim();
            let mut o = outs[c].lock().unwrap_or_else(|e| e.into_inner());
            walk_blocks(
                xc,
                prevs,
                &mut o,
                next.map_or(&[][..], chunk),
                &mut next_totals,
            );
            #[cfg(target_arch = "x86_64")]
            // SAFETY: SSE is part of x86-64. Orders the walk's streaming stores before the
            // stores that follow (`parallel_for`'s end publishes them).
            unsafe {
                std::arch::x86_64::_mm_sfence()
            };
            std::mem::swap(&mut totals, &mut next_totals);
            cur = next;
        }
    };
    // On the launch pool's threads (no spawn per call); run one after another when the
    // pool is busy, the first worker claims every chunk in order.
    crate::parallel_for(workers, &|w| {
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(w))).is_err() {
            failed.store(true, Ordering::Release);
        }
    });
    !failed.into_inner()
}

/// The inclusive prefix sums of host buffer `x` (scalars of `f32`, `f64`, `i32`, `u32`,
/// `i64` or `u64`; integers wrap) in the fixed order of docs/semantics.md ("Scans"), on up
/// to `threads` threads: the bits of every device's `cumsum`. `None` for other element
/// types, which the caller scans with its kernels — and when a worker panicked (a broken
/// invariant, reported on stderr), so that no partial result is handed out.
pub fn cumsum_host(x: &HostBuffer, threads: usize) -> Option<HostBuffer> {
    let (s, 1) = x.elem().lanes()? else {
        return None;
    };
    if !matches!(
        s,
        ScalarType::F32
            | ScalarType::F64
            | ScalarType::I32
            | ScalarType::U32
            | ScalarType::I64
            | ScalarType::U64
    ) {
        return None;
    }
    let mut out = HostBuffer::try_for_output(x.elem(), x.len())?;
    let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match s {
        ScalarType::F32 => scan_planes::<f32>(x.scalars(), out.scalars_mut(), threads),
        ScalarType::F64 => scan_planes::<f64>(x.scalars(), out.scalars_mut(), threads),
        ScalarType::I32 | ScalarType::U32 => {
            scan_planes::<u32>(x.scalars(), out.scalars_mut(), threads)
        }
        _ => scan_planes::<u64>(x.scalars(), out.scalars_mut(), threads),
    }));
    matches!(done, Ok(true)).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fixed order written as the recursion of docs/semantics.md.
    fn tree(x: &[f32]) -> Vec<f32> {
        let totals: Vec<f32> = x
            .chunks(FAN)
            .map(|b| b[1..].iter().fold(b[0], |a, &v| a + v))
            .collect();
        let above = if x.len() > FAN {
            tree(&totals)
        } else {
            Vec::new()
        };
        let mut out = Vec::with_capacity(x.len());
        for (b, blk) in x.chunks(FAN).enumerate() {
            let mut acc = blk[0];
            for (i, &v) in blk.iter().enumerate() {
                if i > 0 {
                    acc += v;
                }
                out.push(if b > 0 { above[b - 1] + acc } else { acc });
            }
        }
        out
    }

    /// The chained scan gives the recursion's bits at lengths around blocks, groups and
    /// chunks (chunks of 2^15 to 2^18 elements, whole and short), with up to five levels,
    /// on 1 and 3 threads.
    #[test]
    fn chained_scan_follows_the_fixed_order() {
        for n in [
            1,
            31,
            32,
            33,
            255,
            256,
            257,
            1025,
            MIN_CHUNK - 1,
            MIN_CHUNK,
            MIN_CHUNK + 1,
            1_100_003,
            2_500_001,
        ] {
            let x: Vec<f32> = (0..n)
                .map(|i| ((i * 7919) % 1013) as f32 * 0.013 - 6.0)
                .collect();
            let want: Vec<u32> = tree(&x).into_iter().map(f32::to_bits).collect();
            for threads in [1, 3] {
                let mut out = vec![0.0f32; n];
                assert!(scan_planes(&x, &mut out, threads));
                let got: Vec<u32> = out.into_iter().map(f32::to_bits).collect();
                assert!(got == want, "{n} elements, {threads} threads");
            }
        }
    }
}
