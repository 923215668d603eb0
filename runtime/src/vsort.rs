//! A vectorised quicksort of 32-bit keys alone, with AVX-512 (issue 25's CPU sort): the
//! partitioning of Bramas ("A Novel Hybrid Quicksort Algorithm Vectorized using AVX-512 on
//! Intel Skylake", 2017) and Google Highway's vqsort (Blacher et al., "Vectorized and
//! performance-portable Quicksort", 2022) — each 16-key vector split by one compare into the
//! keys below the pivot and the rest, compressed and stored at the two ends of the output —
//! and bitonic networks in registers for parts of up to 128 keys. Unstable, which for keys
//! alone is no loss: the sorted keys are the one sequence their order fixes, the bits every
//! other device gives. The first partition runs on two threads (each half counted, then
//! placed), and the two parts of every large partition are sorted on two threads.
//! 2^24 random u32 on this project's 2-core VM: 87–90 ms, against 175 ms on one thread and
//! NumPy's AVX-512 quicksort (one thread) 91–120 ms (docs/performance.md).
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]

use crate::hostsort::Order;
#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Lanes of a vector (32-bit keys in 512 bits).
const LANES: usize = 16;

/// Keys above which the two parts of a partition are sorted on two threads.
const PARALLEL: usize = 1 << 16;

/// Whether this CPU runs [`sort_keys`] (AVX-512 Foundation and POPCNT).
pub(crate) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("popcnt")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Sorts the 32-bit keys of `input` into `out` (the same length), on the current rayon
/// pool's threads, in the order of their unsigned form under `order` (hostsort's map of
/// signed and float keys), with `scratch` (the same length) as working space. `false` (and
/// nothing sorted) when the CPU lacks AVX-512 or the lengths differ.
pub(crate) fn sort_keys(
    input: &[u32],
    scratch: &mut [u32],
    out: &mut [u32],
    order: Order<u32>,
) -> bool {
    if !available() || scratch.len() != input.len() || out.len() != input.len() {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    {
        use rayon::prelude::*;
        const CHUNK: usize = 1 << 16;
        let depth = 2 * (usize::BITS - input.len().leading_zeros()) + 8;
        // SAFETY (every call below): the CPU has AVX-512 Foundation and POPCNT (checked
        // above).
        let split =
            input.len() > 2 * PARALLEL && unsafe { sort_split(input, scratch, out, depth, order) };
        if !split {
            scratch
                .par_chunks_mut(CHUNK)
                .zip(input.par_chunks(CHUNK))
                .for_each(|(s, i)| unsafe {
                    map(i.as_ptr(), s.as_mut_ptr(), i.len(), order, false)
                });
            unsafe { sort_from(scratch, out, true, depth) };
        }
        if order.fill | order.flip != 0 {
            out.par_chunks_mut(CHUNK).for_each(|o| {
                let p = o.as_mut_ptr();
                unsafe { map(p, p, o.len(), order, true) }
            });
        }
        true
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (input, scratch, order);
        false
    }
}

/// `dst[i] = ordered(src[i])` for `i < n`, or its inverse with `back`; `dst` may be `src`
/// (each vector is read before it is written).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,popcnt")]
unsafe fn map(src: *const u32, dst: *mut u32, n: usize, order: Order<u32>, back: bool) {
    // SAFETY: the caller passes `n` readable keys at `src` and `n` writable at `dst`; the
    // loads and stores are masked to them.
    unsafe {
        let mut i = 0;
        while i < n {
            let m = lanes_mask(n - i);
            let v = _mm512_maskz_loadu_epi32(m, src.add(i) as *const i32);
            let w = if back {
                unordered_lanes(order, v)
            } else {
                ordered_lanes(order, v)
            };
            _mm512_mask_storeu_epi32(dst.add(i) as *mut i32, m, w);
            i += LANES;
        }
    }
}

/// What `order` XORs into each lane whose top bit `top` holds: `(fill(top) & fill) | flip`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn order_bits(order: Order<u32>, top: __m512i) -> __m512i {
    let fills = _mm512_srai_epi32(top, 31);
    let f = _mm512_set1_epi32(order.fill as i32);
    _mm512_or_si512(
        _mm512_and_si512(fills, f),
        _mm512_set1_epi32(order.flip as i32),
    )
}

/// Hostsort's `Order::ordered` of each lane.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn ordered_lanes(order: Order<u32>, v: __m512i) -> __m512i {
    _mm512_xor_si512(v, order_bits(order, v))
}

/// Hostsort's `Order::unordered` of each lane: the top bit of the ordered form's inverse
/// decides.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn unordered_lanes(order: Order<u32>, v: __m512i) -> __m512i {
    let inverse = _mm512_xor_si512(v, _mm512_set1_epi32(-1));
    _mm512_xor_si512(v, order_bits(order, inverse))
}

/// The mask of the first `min(left, 16)` lanes.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn lanes_mask(left: usize) -> __mmask16 {
    if left >= LANES {
        0xFFFF
    } else {
        ((1u32 << left) - 1) as __mmask16
    }
}

/// The 10 stages of the 16-lane bitonic network (Batcher, 1968), as (lane permutation,
/// lanes that take the larger key): stage (k, j) pairs lane i with lane i ^ j, and lane i
/// keeps the larger of the two when `i & j` and `i & k` differ (k = 2, 4, 8, 16; j = k/2,
/// …, 1).
const NETWORK: ([[i32; LANES]; 10], [u16; 10]) = {
    let mut idx = [[0i32; LANES]; 10];
    let mut take_max = [0u16; 10];
    let (mut s, mut k) = (0, 2);
    while k <= LANES {
        let mut j = k / 2;
        while j >= 1 {
            let mut i = 0;
            while i < LANES {
                idx[s][i] = (i ^ j) as i32;
                if ((i & j) != 0) != ((i & k) != 0) {
                    take_max[s] |= 1 << i;
                }
                i += 1;
            }
            s += 1;
            j /= 2;
        }
        k *= 2;
    }
    (idx, take_max)
};

/// [`NETWORK`]'s stages from `first` on, applied to `v`: each a lane permutation, a min,
/// a max and a blend.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,popcnt")]
fn stages(mut v: __m512i, first: usize) -> __m512i {
    for s in first..10 {
        // SAFETY: a read of the 16 lanes of a constant table's row.
        let idx = unsafe { _mm512_loadu_si512(NETWORK.0[s].as_ptr().cast()) };
        let w = _mm512_permutexvar_epi32(idx, v);
        let lo = _mm512_min_epu32(v, w);
        let hi = _mm512_max_epu32(v, w);
        v = _mm512_mask_blend_epi32(NETWORK.1[s], lo, hi);
    }
    v
}

/// Sorts 16 lanes ascending as unsigned integers: all of [`NETWORK`]'s stages.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,popcnt")]
fn sort16(v: __m512i) -> __m512i {
    stages(v, 0)
}

/// Vectors of the largest part a network sorts.
const BLOCK_VECTORS: usize = 8;

/// Keys of the largest part a network sorts (128).
const BLOCK: usize = BLOCK_VECTORS * LANES;

/// The lanes of `v` in reverse order.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,popcnt")]
fn reverse(v: __m512i) -> __m512i {
    let idx = _mm512_set_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    _mm512_permutexvar_epi32(idx, v)
}

/// A bitonic vector sorted ascending: [`NETWORK`]'s last 4 stages (those of k = 16).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,popcnt")]
fn merge16(v: __m512i) -> __m512i {
    stages(v, 6)
}

/// Sorts `n ≤ 128` keys from `src` into `dst` (which may be `src`) in registers: up to 8
/// vectors (padded with the largest key), each sorted by [`sort16`], then merged pairwise
/// by bitonic merges (the second run reversed, a half-cleaner across the two, then
/// half-cleaners between vectors and [`merge16`] within each).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,popcnt")]
unsafe fn sort_block(src: *const u32, dst: *mut u32, n: usize) {
    // SAFETY: as `block`'s.
    unsafe {
        match n.div_ceil(LANES) {
            0 | 1 => block::<1>(src, dst, n),
            2 => block::<2>(src, dst, n),
            3 | 4 => block::<4>(src, dst, n),
            _ => block::<BLOCK_VECTORS>(src, dst, n),
        }
    }
}

/// [`sort_block`] with `R` vectors (a power of two, `n ≤ 16 R`), unrolled so that the
/// vectors stay in registers.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,popcnt")]
unsafe fn block<const R: usize>(src: *const u32, dst: *mut u32, n: usize) {
    // SAFETY: the loads and stores are masked to the `n` keys of `src` and `dst` (the
    // addresses of vectors wholly past them are formed with `wrapping_add` and touch
    // nothing).
    unsafe {
        let top = _mm512_set1_epi32(-1);
        let mut v = [top; R];
        for (q, x) in v.iter_mut().enumerate() {
            let m = lanes_mask(n.saturating_sub(q * LANES));
            *x = sort16(_mm512_mask_loadu_epi32(
                top,
                m,
                src.wrapping_add(q * LANES) as *const i32,
            ));
        }
        let mut w = 2;
        while w <= R {
            let h = w / 2;
            for g in (0..R).step_by(w) {
                // The second run reversed, then a half-cleaner across the two runs.
                let (mut lo, mut hi) = ([top; R], [top; R]);
                for q in 0..h {
                    let b = reverse(v[g + w - 1 - q]);
                    lo[q] = _mm512_min_epu32(v[g + q], b);
                    hi[q] = _mm512_max_epu32(v[g + q], b);
                }
                v[g..g + h].copy_from_slice(&lo[..h]);
                v[g + h..g + w].copy_from_slice(&hi[..h]);
                for half in [g, g + h] {
                    let mut s = h / 2;
                    while s >= 1 {
                        for b in (half..half + h).step_by(2 * s) {
                            for i in b..b + s {
                                let (x, y) = (v[i], v[i + s]);
                                v[i] = _mm512_min_epu32(x, y);
                                v[i + s] = _mm512_max_epu32(x, y);
                            }
                        }
                        s /= 2;
                    }
                    for x in &mut v[half..half + h] {
                        *x = merge16(*x);
                    }
                }
            }
            w *= 2;
        }
        for (q, x) in v.iter().enumerate() {
            let m = lanes_mask(n.saturating_sub(q * LANES));
            _mm512_mask_storeu_epi32(dst.wrapping_add(q * LANES) as *mut i32, m, *x);
        }
    }
}

/// The median of 16 keys of `src` spread over it (`src.len() > 16`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,popcnt")]
unsafe fn pivot(src: &[u32]) -> u32 {
    // SAFETY: as `pivot_of`'s.
    unsafe { pivot_of(src, |x| x) }
}

/// The median of 16 keys of `src` spread over it, each mapped by `f` first (`src.len() >
/// 16`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,popcnt")]
unsafe fn pivot_of(src: &[u32], f: impl Fn(u32) -> u32) -> u32 {
    let n = src.len();
    let mut s = [0u32; LANES];
    for (q, x) in s.iter_mut().enumerate() {
        *x = f(src[q * n / LANES + n / (2 * LANES)]);
    }
    // SAFETY: reads and writes of the local array.
    unsafe {
        let v = sort16(_mm512_loadu_si512(s.as_ptr().cast()));
        _mm512_storeu_si512(s.as_mut_ptr().cast(), v);
    }
    s[LANES / 2]
}

/// Puts the keys of `src` below `p` from `left` on and the rest backwards from
/// `right_end`; returns how many are below. The caller owns `src.len()` places from `left`
/// and before `right_end` together (the first count below `p`, the second the rest).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,popcnt")]
unsafe fn partition_into<const MAP: bool>(
    src: &[u32],
    left: *mut u32,
    right_end: *mut u32,
    p: u32,
    order: Order<u32>,
) -> usize {
    // SAFETY: every load is of a whole vector or masked inside `src`, and the stores are
    // masked to the keys written, inside the caller's places.
    unsafe {
        let n = src.len();
        let pv = _mm512_set1_epi32(p as i32);
        let s = src.as_ptr();
        let (mut l, mut i) = (0, 0);
        let mut r = right_end;
        let d = left;
        let mut split = |v: __m512i, all: __mmask16| {
            let v = if MAP { ordered_lanes(order, v) } else { v };
            let below = _mm512_mask_cmplt_epu32_mask(all, v, pv);
            let rest = all & !below;
            let (lc, rc) = (below.count_ones(), rest.count_ones());
            // Compressed in a register, then a masked store: AMD's Zen 4 runs the
            // compress-to-memory form as microcode, many times slower.
            let lo = _mm512_maskz_compress_epi32(below, v);
            _mm512_mask_storeu_epi32(d.add(l) as *mut i32, low_lanes(lc), lo);
            let hi = _mm512_maskz_compress_epi32(rest, v);
            r = r.sub(rc as usize);
            _mm512_mask_storeu_epi32(r as *mut i32, low_lanes(rc), hi);
            l += lc as usize;
        };
        while i + LANES <= n {
            split(_mm512_loadu_si512(s.add(i).cast()), 0xFFFF);
            i += LANES;
        }
        if i < n {
            let all = lanes_mask(n - i);
            split(_mm512_maskz_loadu_epi32(all, s.add(i) as *const i32), all);
        }
        l
    }
}

/// How many keys of `src`, in their ordered form under `order`, are below `p`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,popcnt")]
unsafe fn count_below(src: &[u32], p: u32, order: Order<u32>) -> usize {
    // SAFETY: whole-vector loads inside `src`, then a masked one.
    unsafe {
        let (n, s) = (src.len(), src.as_ptr());
        let pv = _mm512_set1_epi32(p as i32);
        let (mut c, mut i) = (0usize, 0);
        while i + LANES <= n {
            let v = _mm512_loadu_si512(s.add(i).cast());
            let v = ordered_lanes(order, v);
            c += _mm512_cmplt_epu32_mask(v, pv).count_ones() as usize;
            i += LANES;
        }
        if i < n {
            let all = lanes_mask(n - i);
            let v = _mm512_maskz_loadu_epi32(all, s.add(i) as *const i32);
            let v = ordered_lanes(order, v);
            c += _mm512_mask_cmplt_epu32_mask(all, v, pv).count_ones() as usize;
        }
        c
    }
}

/// A pointer two threads write disjoint places through.
#[derive(Clone, Copy)]
struct Shared(*mut u32);
// SAFETY: the threads that receive it write disjoint places (the caller's counts), and
// `rayon::join` returns only after both have finished.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

impl Shared {
    /// The place `i` elements on (a method, so that closures take the whole `Shared`).
    fn at(self, i: usize) -> *mut u32 {
        self.0.wrapping_add(i)
    }
}

/// The first partition of `input`'s keys (mapped to their ordered form on the way) into
/// `dst`, on two threads: each counts the keys of its half below the pivot, then puts its
/// half's keys at the places the counts give it (those below first, the first half's
/// before the second's). Then both parts are sorted in place, with `scratch` as working
/// space. `false` (nothing sorted) when no key is below the pivot.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,popcnt")]
unsafe fn sort_split(
    input: &[u32],
    scratch: &mut [u32],
    dst: &mut [u32],
    depth: u32,
    order: Order<u32>,
) -> bool {
    // SAFETY: the two halves' places are disjoint ranges of `dst` (by the counts), and
    // the recursion's slices are disjoint halves of `scratch` and `dst`.
    unsafe {
        let n = input.len();
        let p = pivot_of(input, |x| order.ordered(x));
        let h = n / 2;
        let (a, b) = input.split_at(h);
        let (c0, c1) = rayon::join(|| count_below(a, p, order), || count_below(b, p, order));
        let k = c0 + c1;
        if k == 0 {
            return false;
        }
        let d = Shared(dst.as_mut_ptr());
        rayon::join(
            || partition_into::<true>(a, d.at(0), d.at(k + (h - c0)), p, order),
            || partition_into::<true>(b, d.at(c0), d.at(n), p, order),
        );
        let (dl, dr) = dst.split_at_mut(k);
        let (sl, sr) = scratch.split_at_mut(k);
        rayon::join(
            || sort_from(dl, sl, false, depth - 1),
            || sort_from(dr, sr, false, depth - 1),
        );
        true
    }
}

/// The mask of the first `c ≤ 16` lanes.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn low_lanes(c: u32) -> __mmask16 {
    ((1u32 << c) - 1) as __mmask16
}

/// Puts the keys of `src` below `p` at the start of `dst` and the rest after them (the
/// latter from the end backwards); returns how many are below.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,popcnt")]
unsafe fn partition(src: &[u32], dst: &mut [u32], p: u32) -> usize {
    // SAFETY: `dst` has `src`'s length, which the two ranges fill.
    unsafe {
        let d = dst.as_mut_ptr();
        partition_into::<false>(src, d, d.add(src.len()), p, Order::SAME)
    }
}

/// Sorts the keys of `data`, the result in `data` or (`into_other`) in `other` (the same
/// length; the buffer without the result is clobbered): a partition around the median of
/// 16 of the keys into `other`, then each part sorted from there, its result back in
/// `data`'s part or left in `other`'s — the two parts on two threads when the keys are
/// many. Past `depth` levels (keys that defeat the sampled median) the standard library's
/// sort finishes. Out of place rather than in place: an in-place partition (Bramas 2017,
/// §4.2) must pick the side of each read from the previous vector's split, a branch as
/// good as random or a chain of latencies, and measured 15–45 % slower here.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,popcnt")]
unsafe fn sort_from(data: &mut [u32], other: &mut [u32], into_other: bool, depth: u32) {
    // SAFETY: the parts are disjoint halves of `data` and `other`.
    unsafe {
        let n = data.len();
        if n <= BLOCK {
            let from = data.as_mut_ptr();
            let to = if into_other { other.as_mut_ptr() } else { from };
            sort_block(from, to, n);
            return;
        }
        if depth == 0 {
            data.sort_unstable();
            if into_other {
                other.copy_from_slice(data);
            }
            return;
        }
        let p = pivot(data);
        let k = partition(data, other, p);
        if k == 0 {
            // Every key is `p` or above (`p` among them): those equal to `p` go first and
            // are done.
            if p == u32::MAX {
                if !into_other {
                    data.copy_from_slice(other);
                }
                return;
            }
            let eq = partition(other, data, p + 1);
            if into_other {
                other[..eq].fill(p);
            }
            return sort_from(&mut data[eq..], &mut other[eq..], into_other, depth - 1);
        }
        // The keys are in `other` now: each part sorts from there.
        let (ol, or) = other.split_at_mut(k);
        let (dl, dr) = data.split_at_mut(k);
        if n > PARALLEL {
            rayon::join(
                || sort_from(ol, dl, !into_other, depth - 1),
                || sort_from(or, dr, !into_other, depth - 1),
            );
        } else {
            sort_from(ol, dl, !into_other, depth - 1);
            sort_from(or, dr, !into_other, depth - 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys: random, few distinct values, all equal, already sorted, reversed, and the
    /// extremes; lengths around a vector and a parallel split. Each sorted as
    /// `sort_unstable` sorts its ordered form, for the three orders of 32-bit keys.
    #[test]
    fn sorts_like_sort_unstable() {
        if !available() {
            eprintln!("vsort: SKIPPED (no AVX-512 on this CPU)");
            return;
        }
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 32) as u32
        };
        for n in [0usize, 1, 2, 15, 16, 17, 31, 33, 100, 1000, 70_001, 300_000] {
            let sets: Vec<Vec<u32>> = vec![
                (0..n).map(|_| rnd()).collect(),
                (0..n).map(|_| rnd() % 3).collect(),
                vec![7; n],
                (0..n as u32).collect(),
                (0..n as u32).rev().collect(),
                (0..n)
                    .map(|i| if i % 2 == 0 { u32::MAX } else { 0 })
                    .collect(),
                (0..n).map(|_| u32::MAX - rnd() % 2).collect(),
            ];
            for keys in sets {
                for (fill, flip) in [(0, 0), (0, 1 << 31), (u32::MAX, 1 << 31)] {
                    let ord = |x: u32| x ^ ((((x as i32) >> 31) as u32 & fill) | flip);
                    let mut want = keys.clone();
                    want.sort_unstable_by_key(|&k| ord(k));
                    let (mut s, mut o) = (vec![0; n], vec![0; n]);
                    assert!(sort_keys(&keys, &mut s, &mut o, Order { fill, flip }));
                    assert_eq!(o, want, "n {n} fill {fill:x} flip {flip:x}");
                }
            }
        }
    }
}
