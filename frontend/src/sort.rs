//! Stable radix sort (issue 25): keys of `u32`, `i32`, `f32`, `u64`, `i64` or `f64`, alone
//! or with values of those types — the least-significant-digit radix sort that CUB's and
//! Thrust's sorts are built on (Merrill and Grimshaw, "High Performance and Scalable Radix
//! Sorting", 2011). Each pass of a 4-bit digit (8 for 32-bit keys, 16 for 64-bit ones) is
//! three launches: `sort.count` (kernel mode: each work-group counts the digits of one tile
//! of keys), `cumsum_exclusive` of the counts laid out digit by digit (every tile's first
//! place for each digit: keys of smaller digits first, then those of earlier tiles), and
//! `sort.place` (each work-group ranks its tile in shared memory and writes it out). The
//! result is a permutation fixed by the keys alone, so every device gives the same bits; on
//! a CPU device and the interpreter the runtime's native sort runs instead: passes by the
//! top bits into cache-sized buckets, then LSD passes of 8-bit digits inside each
//! ([`weft_runtime::hostsort`]) — for 32-bit keys without values on a CPU with AVX-512, a
//! vectorised quicksort, whose result is the same sequence (equal keys are equal bits).

use crate::array::Array;
use crate::collective::{bank_pad, bank_padded, memo, Memo};
use crate::device::Device;
use crate::dsl::{Kernel, KernelArg};
use crate::error::{Error, Result};
use crate::scalar::{Elem, Scalar};
use std::sync::OnceLock;
use weft_ir::builder::ProgramBuilder;
use weft_ir::{Boundary, Const, Opcode, ScalarType, Type};

/// Work-items per work-group: they rank one tile of keys together.
const ITEMS: usize = 256;
/// Bits of a pass's digit (16 digit values): each work-item counts its run's digits in two
/// registers (4 bits a digit) and writes them as 8 words of packed 16-bit counters, 8 KiB
/// of shared memory a work-group.
const DIGIT_BITS: u32 = 4;
/// Digit values of a pass.
const DIGITS: usize = 1 << DIGIT_BITS;

/// Keys each work-item ranks in one tile, so that a tile's keys (twice: as read and as
/// ranked) and values fit in shared memory beside the counters: 8 for 32-bit keys and
/// values, 4 when either is 64 bits wide.
fn per_item(key: ScalarType, value: Option<ScalarType>) -> usize {
    if key.bits() == 64 || value.is_some_and(|v| v.bits() == 64) {
        4
    } else {
        8
    }
}

/// The unsigned integer of the key's width (`u32` or `u64`) whose order is the order of
/// key `k` of type `s`: signed integers with the sign bit flipped; floats in IEEE total
/// order — negatives' bits inverted, positives' sign bit set — so −NaN < −∞ < … < −0 < +0
/// < … < +∞ < +NaN.
fn ordered(b: &mut ProgramBuilder, k: weft_ir::Value, s: ScalarType) -> weft_ir::Value {
    let (u, top) = unsigned_of(s);
    let sign = b.constant(Const::scalar(u, top));
    let ut = Type::scalar(u);
    match s {
        ScalarType::U32 | ScalarType::U64 => k,
        ScalarType::I32 | ScalarType::I64 => {
            let bits = b.op_typed(Opcode::Bitcast, &[k], ut);
            b.op(Opcode::Xor, &[bits, sign])
        }
        _ => {
            let bits = b.op_typed(Opcode::Bitcast, &[k], ut);
            let neg = b.op(Opcode::Ge, &[bits, sign]);
            let inv = b.op(Opcode::Not, &[bits]);
            let set = b.op(Opcode::Or, &[bits, sign]);
            b.select(neg, inv, set)
        }
    }
}

/// The unsigned type of `s`'s width and its sign bit.
fn unsigned_of(s: ScalarType) -> (ScalarType, u64) {
    if s.bits() == 64 {
        (ScalarType::U64, 1 << 63)
    } else {
        (ScalarType::U32, 1 << 31)
    }
}

/// The kernels of one key type and value type (`None`: keys alone): `sort.count` and
/// `sort.place`.
fn kernels(key: ScalarType, value: Option<ScalarType>) -> Result<(Kernel, Kernel)> {
    static CACHE: Memo<(ScalarType, Option<ScalarType>), (Kernel, Kernel)> = OnceLock::new();
    memo(&CACHE, (key, value), || {
        Ok((count_kernel(key, value)?, place_kernel(key, value)?))
    })
}

/// A 1-D clamped array type of `t`.
fn arr(t: Type) -> Result<Type> {
    Type::array(1, t, Boundary::Clamp).ok_or_else(|| Error::argument("sort: no such arrays"))
}

/// Key `k`'s digit of the pass that starts at bit `shift` (a `u32`/`u64` value), as `i32`.
fn digit(
    b: &mut ProgramBuilder,
    k: weft_ir::Value,
    key: ScalarType,
    shift: weft_ir::Value,
) -> weft_ir::Value {
    let (ku, _) = unsigned_of(key);
    let o = ordered(b, k, key);
    let sh = b.op(Opcode::Shr, &[o, shift]);
    let mask = b.constant(Const::scalar(ku, DIGITS as u64 - 1));
    let d = b.op(Opcode::And, &[sh, mask]);
    b.cast(d, Type::i32())
}

/// The reads of a tile's keys from `base`, coalesced: work-item `l` reads tile positions
/// `j · ITEMS + l` for `j < kpi`, all issued before anything uses them (the reads are
/// clamped, so those past the end need no `if`). Gives (position, key) pairs.
fn tile_reads(
    b: &mut ProgramBuilder,
    keys: weft_ir::Value,
    base: weft_ir::Value,
    l: weft_ir::Value,
    kpi: usize,
) -> Vec<(weft_ir::Value, weft_ir::Value)> {
    (0..kpi)
        .map(|j| {
            let q = b.constant(Const::i32((j * ITEMS) as i32));
            let q = b.op(Opcode::Add, &[q, l]);
            let i = b.op(Opcode::Add, &[base, q]);
            (q, b.read(keys, i))
        })
        .collect()
}

/// `sort.count`: work-group `g` counts the digits of tile `g` (the [`per_item`] ·
/// [`ITEMS`] keys from `g · tile`) in shared memory and writes them digit-major:
/// `counts[d · tiles + g]`. Parameters: keys, n, shift, tiles, the `counts` buffer. The
/// counts do not depend on the keys' order, so the reads are coalesced (work-item `l`
/// reads `l`, `l + ITEMS`, …).
fn count_kernel(key: ScalarType, value: Option<ScalarType>) -> Result<Kernel> {
    let (i32t, u32t) = (Type::i32(), Type::scalar(ScalarType::U32));
    let name = "sort.count";
    let mut b = ProgramBuilder::new(name);
    b.make_kernel();
    let keys = b.array("keys", arr(Type::scalar(key))?);
    let n = b.uniform("n", i32t);
    let (ku, _) = unsigned_of(key);
    let shift = b.uniform("shift", Type::scalar(ku));
    let tiles = b.uniform("tiles", i32t);
    let counts = b.buffer("counts", arr(u32t)?);
    let kpi = per_item(key, value);
    let c = |b: &mut ProgramBuilder, x: usize| b.constant(Const::i32(x as i32));
    let l = b.op_typed(Opcode::LocalId, &[], i32t);
    let g = b.op_typed(Opcode::GroupId, &[], i32t);
    let digits = c(&mut b, DIGITS);
    let hist = b.op_typed(Opcode::Shared, &[digits], arr(u32t)?);
    let few = b.op(Opcode::Lt, &[l, digits]);
    let u0 = b.constant(Const::scalar(ScalarType::U32, 0));
    let u1 = b.constant(Const::scalar(ScalarType::U32, 1));
    b.if_(few, |b| b.effect(Opcode::Store, &[hist, l, u0]));
    b.effect(Opcode::Barrier, &[]);
    let tile_len = c(&mut b, ITEMS * kpi);
    let base = b.op(Opcode::Mul, &[g, tile_len]);
    let left = b.op(Opcode::Sub, &[n, base]);
    let count = b.op(Opcode::Min, &[left, tile_len]);
    // Every read first (clamped, so all are in flight at once), then the counts.
    let reads = tile_reads(&mut b, keys, base, l, kpi);
    for (q, k) in reads {
        let inside = b.op(Opcode::Lt, &[q, count]);
        b.if_(inside, |b| {
            let d = digit(b, k, key, shift);
            b.op_typed(Opcode::AtomicAdd, &[hist, d, u1], u32t);
        });
    }
    b.effect(Opcode::Barrier, &[]);
    b.if_(few, |b| {
        let h = b.read(hist, l);
        let at = b.op(Opcode::Mul, &[l, tiles]);
        let at = b.op(Opcode::Add, &[at, g]);
        b.effect(Opcode::Store, &[counts, at, h]);
    });
    let m = b.finish_module().map_err(Error::invalid)?;
    Ok(Kernel::from_program(crate::dsl::Program::from_module(
        m, name,
    )?))
}

/// One key of a work-item's run in `sort.place`: the key, its counter word's index, the
/// shift of its half of the word (0 or 16), the shift of its 4-bit count in the run's
/// register counts (0, 4, …, 28), and whether its digit is 8 or more.
struct Digit {
    key: weft_ir::Value,
    slot: weft_ir::Value,
    half: weft_ir::Value,
    nibble: weft_ir::Value,
    high: weft_ir::Value,
}

/// `sort.place`: work-group `g` puts tile `g`'s keys (and values) in their places.
/// Parameters: keys, (values), n, shift, tiles, `offsets` (the exclusive scan of
/// `sort.count`'s counts: tile `g`'s first place for digit `d` at `d · tiles + g`), the
/// output keys, (the output values).
///
/// The work-group ranks the tile's keys in shared memory (Merrill and Grimshaw, §4, the
/// local scan-based ranking, with CUB's `BlockRadixRank` packed counters): each work-item
/// counts the digits of its run of consecutive keys in registers (4 bits a digit) and
/// writes them as its own column of counters — two 16-bit counters a word, digit `d` in
/// the low half of word `d mod 8` and digit `d + 8` in the high half — the work-group
/// scans the words in column order (each work-item 8 words serially, then a two-level scan
/// of the 256 sums), the high halves get the count of all low-half digits added, and a
/// key's rank is its column's counter plus the keys of its digit before it in its run (the
/// register counts again): the number of the tile's keys of smaller digits, or of its
/// digit and earlier, a stable order. No counter is read, changed and written back, so
/// no walk waits on shared memory's latency key after key. The keys then go
/// to shared memory at their ranks and out in rank order, each to its digit's first place
/// plus its rank within the digit: consecutive work-items write consecutive places.
///
/// A tile's places past the end of the keys hold the largest key (in the order sorted), so
/// they rank after every key and no walk needs a bounds check; only the stores out skip
/// them. The work-item id is masked to `ITEMS − 1` (the launch's size), so that the
/// compiler sees every shared index in range and drops their clamps and checks.
fn place_kernel(key: ScalarType, value: Option<ScalarType>) -> Result<Kernel> {
    let (i32t, u32t) = (Type::i32(), Type::scalar(ScalarType::U32));
    let kt = Type::scalar(key);
    let name = "sort.place";
    let mut b = ProgramBuilder::new(name);
    b.make_kernel();
    let keys = b.array("keys", arr(kt)?);
    let vals = match value {
        Some(v) => Some(b.array("values", arr(Type::scalar(v))?)),
        None => None,
    };
    let n = b.uniform("n", i32t);
    let (ku, _) = unsigned_of(key);
    let shift = b.uniform("shift", Type::scalar(ku));
    let tiles = b.uniform("tiles", i32t);
    let offsets = b.array("offsets", arr(u32t)?);
    let out_keys = b.buffer("out_keys", arr(kt)?);
    let out_vals = match value {
        Some(v) => Some(b.buffer("out_values", arr(Type::scalar(v))?)),
        None => None,
    };
    let kpi = per_item(key, value);
    let c = |b: &mut ProgramBuilder, x: usize| b.constant(Const::i32(x as i32));
    let cu = |b: &mut ProgramBuilder, x: u32| b.constant(Const::scalar(ScalarType::U32, x.into()));
    // Shared arrays are indexed with a gap after every 32 elements (`pad`), so a
    // work-item's run of consecutive elements sits in other banks than its neighbours'.
    let pad = bank_pad;
    const WORDS: usize = DIGITS / 2;
    let id = b.op_typed(Opcode::LocalId, &[], i32t);
    let mask = c(&mut b, ITEMS - 1);
    let l = b.op(Opcode::And, &[id, mask]);
    let lp = pad(&mut b, l);
    let u0 = cu(&mut b, 0);
    let tile_len = c(&mut b, ITEMS * kpi);
    let cap = c(&mut b, bank_padded(WORDS * ITEMS));
    let cnt = b.op_typed(Opcode::Shared, &[cap], arr(u32t)?);
    let cap = c(&mut b, bank_padded(ITEMS));
    let tot = b.op_typed(Opcode::Shared, &[cap], arr(u32t)?);
    let cap = c(&mut b, 17);
    let groups = b.op_typed(Opcode::Shared, &[cap], arr(u32t)?);
    let cap = c(&mut b, DIGITS);
    let delta = b.op_typed(Opcode::Shared, &[cap], arr(u32t)?);
    // The tile as read (at padded positions) and in rank order (unpadded). Both walks read
    // a work-item's run from `stage` (not kept in registers across the scan: fewer
    // registers, more work-groups a multiprocessor).
    let cap = c(&mut b, bank_padded(ITEMS * kpi));
    let stage = b.op_typed(Opcode::Shared, &[cap], arr(kt)?);
    let ranked = b.op_typed(Opcode::Shared, &[tile_len], arr(kt)?);
    let sv = match value {
        Some(v) => Some(b.op_typed(Opcode::Shared, &[tile_len], arr(Type::scalar(v))?)),
        None => None,
    };
    let tile = b.op_typed(Opcode::GroupId, &[], i32t);
    let base = b.op(Opcode::Mul, &[tile, tile_len]);
    let left = b.op(Opcode::Sub, &[n, base]);
    let count = b.op(Opcode::Min, &[left, tile_len]);
    // Digits w and w + 8's first places in the output (w = l / 32), read now for the
    // work-items that use them after the scan: every work-item reads (a warp reads one
    // place, broadcast), none waits for them on the way.
    let firsts: Vec<_> = {
        let five = c(&mut b, 5);
        let w = b.op(Opcode::Shr, &[l, five]);
        let eight = c(&mut b, WORDS);
        let w8 = b.op(Opcode::Add, &[w, eight]);
        [w, w8]
            .into_iter()
            .map(|d| {
                let at = b.op(Opcode::Mul, &[d, tiles]);
                let at = b.op(Opcode::Add, &[at, tile]);
                (d, b.read(offsets, at))
            })
            .collect()
    };
    // Word w of this work-item's column is at w · (ITEMS + ITEMS/32) + lp.
    let stride = c(&mut b, bank_padded(ITEMS));
    // The tile's keys into shared memory, coalesced (work-item l reads l, l + ITEMS…):
    // every read first (clamped, so all are in flight at once), then the stores; places
    // past the end get the largest key.
    let (_, top) = unsigned_of(key);
    let largest = match key {
        ScalarType::U32 => u32::MAX.into(),
        ScalarType::U64 => u64::MAX,
        // i32/i64 MAX; a float's +NaN with every payload bit set.
        _ => top - 1,
    };
    let largest = b.constant(Const::scalar(key, largest));
    let reads = tile_reads(&mut b, keys, base, l, kpi);
    for (q, k) in reads {
        let inside = b.op(Opcode::Lt, &[q, count]);
        let k = b.select(inside, k, largest);
        let at = pad(&mut b, q);
        b.effect(Opcode::Store, &[stage, at, k]);
    }
    b.effect(Opcode::Barrier, &[]);
    // This work-item's run (tile positions kpi·l + j): each key's counter word and the
    // shift of its half (0 or 16).
    let kc = c(&mut b, kpi);
    let run = b.op(Opcode::Mul, &[l, kc]);
    let runp = pad(&mut b, run);
    let (seven, eight, one) = (cu(&mut b, 7), cu(&mut b, 8), cu(&mut b, 1));
    let two = cu(&mut b, 2);
    let walk = |b: &mut ProgramBuilder| -> Vec<Digit> {
        (0..kpi)
            .map(|j| {
                let jc = c(b, j);
                let at = b.op(Opcode::Add, &[runp, jc]);
                let k = b.read(stage, at);
                let d = digit(b, k, key, shift);
                let d = b.cast(d, u32t);
                let w = b.op(Opcode::And, &[d, seven]);
                let nibble = b.op(Opcode::Shl, &[w, two]);
                let w = b.cast(w, i32t);
                let slot = b.op(Opcode::Mul, &[w, stride]);
                let slot = b.op(Opcode::Add, &[slot, lp]);
                let high = b.op(Opcode::And, &[d, eight]);
                let half = b.op(Opcode::Shl, &[high, one]);
                let high = b.op(Opcode::Ne, &[high, u0]);
                Digit {
                    key: k,
                    slot,
                    half,
                    nibble,
                    high,
                }
            })
            .collect()
    };
    // The run's digit counts in registers, a 4-bit count a digit (a run has at most 8
    // keys): digits 0–7 in `lo`, 8–15 in `hi`. Gives the count of the key's digit before
    // it, and the counts after it.
    let nib = cu(&mut b, 0xF);
    let tally = |b: &mut ProgramBuilder, (lo, hi): (weft_ir::Value, weft_ir::Value), t: &Digit| {
        let from = b.select(t.high, hi, lo);
        let before = b.op(Opcode::Shr, &[from, t.nibble]);
        let before = b.op(Opcode::And, &[before, nib]);
        let inc = b.op(Opcode::Shl, &[one, t.nibble]);
        let lo_inc = b.select(t.high, u0, inc);
        let hi_inc = b.select(t.high, inc, u0);
        let lo = b.op(Opcode::Add, &[lo, lo_inc]);
        let hi = b.op(Opcode::Add, &[hi, hi_inc]);
        (before, (lo, hi))
    };
    let mut counts = (u0, u0);
    for t in walk(&mut b) {
        counts = tally(&mut b, counts, &t).1;
    }
    // This work-item's column of counter words: word w holds digit w's count in its low
    // half and digit w + 8's in its high half.
    let (lo, hi) = counts;
    let sixteen = cu(&mut b, 16);
    for w in 0..WORDS {
        let sh = cu(&mut b, 4 * w as u32);
        let a = b.op(Opcode::Shr, &[lo, sh]);
        let a = b.op(Opcode::And, &[a, nib]);
        let h = b.op(Opcode::Shr, &[hi, sh]);
        let h = b.op(Opcode::And, &[h, nib]);
        let h = b.op(Opcode::Shl, &[h, sixteen]);
        let word = b.op(Opcode::Or, &[a, h]);
        let at = c(&mut b, w * bank_padded(ITEMS));
        let at = b.op(Opcode::Add, &[at, lp]);
        b.effect(Opcode::Store, &[cnt, at, word]);
    }
    b.effect(Opcode::Barrier, &[]);
    // Scan the words in column order (word w of column l' is the w · ITEMS + l'-th):
    // this work-item's WORDS consecutive ones serially…
    let wc = c(&mut b, WORDS);
    let row = b.op(Opcode::Mul, &[l, wc]);
    let rowp = pad(&mut b, row);
    let row_at: Vec<_> = (0..WORDS)
        .map(|j| {
            let jc = c(&mut b, j);
            b.op(Opcode::Add, &[rowp, jc])
        })
        .collect();
    let words: Vec<_> = row_at.iter().map(|&at| b.read(cnt, at)).collect();
    let own = words
        .iter()
        .copied()
        .reduce(|s, x| b.op(Opcode::Add, &[s, x]))
        .expect("words");
    b.effect(Opcode::Store, &[tot, lp, own]);
    b.effect(Opcode::Barrier, &[]);
    // …then the 256 sums: 16 work-items scan 16 each (exclusive, in place), work-item 0
    // the 16 group sums (exclusive, and the total in `groups[16]`).
    const SIDE: usize = 16;
    let side = c(&mut b, SIDE);
    let lead = b.op(Opcode::Lt, &[l, side]);
    b.if_(lead, |b| {
        let m = c(b, SIDE - 1);
        let l = b.op(Opcode::And, &[l, m]);
        let r = b.op(Opcode::Mul, &[l, side]);
        let r = pad(b, r);
        let mut s = u0;
        for j in 0..SIDE {
            let jc = c(b, j);
            let at = b.op(Opcode::Add, &[r, jc]);
            let x = b.read(tot, at);
            b.effect(Opcode::Store, &[tot, at, s]);
            s = b.op(Opcode::Add, &[s, x]);
        }
        b.effect(Opcode::Store, &[groups, l, s]);
    });
    b.effect(Opcode::Barrier, &[]);
    let zero = c(&mut b, 0);
    let first = b.op(Opcode::Eq, &[l, zero]);
    b.if_(first, |b| {
        let at: Vec<_> = (0..=SIDE).map(|j| c(b, j)).collect();
        let xs: Vec<_> = at[..SIDE].iter().map(|&a| b.read(groups, a)).collect();
        let mut s = u0;
        for (j, x) in xs.into_iter().enumerate() {
            b.effect(Opcode::Store, &[groups, at[j], s]);
            s = b.op(Opcode::Add, &[s, x]);
        }
        b.effect(Opcode::Store, &[groups, at[SIDE], s]);
    });
    b.effect(Opcode::Barrier, &[]);
    // Each word becomes the exclusive prefix before it, the high halves also counting
    // every low-half digit's keys (the total's low half).
    let four = c(&mut b, 4);
    let g = b.op(Opcode::Shr, &[l, four]);
    let gx = b.read(groups, g);
    let tx = b.read(tot, lp);
    let excl = b.op(Opcode::Add, &[gx, tx]);
    let total = b.read(groups, side);
    let low = b.op(Opcode::Shl, &[total, sixteen]);
    let start = b.op(Opcode::Add, &[excl, low]);
    let mut run_sum = start;
    // The words again (after the barriers, so not kept in registers across the scan).
    let words: Vec<_> = row_at.iter().map(|&at| b.read(cnt, at)).collect();
    for (&at, &x) in row_at.iter().zip(&words) {
        b.effect(Opcode::Store, &[cnt, at, run_sum]);
        run_sum = b.op(Opcode::Add, &[run_sum, x]);
    }
    // Work-item 32w's first word is column 0's word w: digit w's first rank in the tile in
    // its low half, digit w + 8's in its high half. It keeps each digit's first place in
    // the output less that rank, as u32 (it wraps).
    let lane_mask = c(&mut b, 31);
    let lane = b.op(Opcode::And, &[l, lane_mask]);
    let heads = b.op(Opcode::Eq, &[lane, zero]);
    b.if_(heads, |b| {
        let ffff = cu(b, 0xFFFF);
        let lo = b.op(Opcode::And, &[start, ffff]);
        let hi = b.op(Opcode::Shr, &[start, sixteen]);
        for ((d, o), s0) in firsts.into_iter().zip([lo, hi]) {
            let dl = b.op(Opcode::Sub, &[o, s0]);
            b.effect(Opcode::Store, &[delta, d, dl]);
        }
    });
    b.effect(Opcode::Barrier, &[]);
    // Rank this work-item's keys in order and put them (and values) at their ranks: the
    // reads of the tile as read are all done (the barriers above).
    let below = cu(&mut b, (ITEMS * kpi - 1) as u32);
    let mut counts = (u0, u0);
    for (j, t) in walk(&mut b).into_iter().enumerate() {
        let (k, slot, half) = (t.key, t.slot, t.half);
        let r = b.read(cnt, slot);
        let (before, next) = tally(&mut b, counts, &t);
        counts = next;
        // A rank is below the tile's length, a power of two: the mask keeps the low half
        // and shows the compiler that the store below is in range.
        let rank = b.op(Opcode::Shr, &[r, half]);
        let rank = b.op(Opcode::Add, &[rank, before]);
        let rank = b.op(Opcode::And, &[rank, below]);
        let rank = b.cast(rank, i32t);
        b.effect(Opcode::Store, &[ranked, rank, k]);
        if let (Some(vs), Some(sv)) = (vals, sv) {
            let jc = c(&mut b, j);
            let q = b.op(Opcode::Add, &[run, jc]);
            let i = b.op(Opcode::Add, &[base, q]);
            let v = b.read(vs, i);
            b.effect(Opcode::Store, &[sv, rank, v]);
        }
    }
    b.effect(Opcode::Barrier, &[]);
    // Out in rank order: rank r of digit d goes to place delta[d] + r; ranks past the
    // keys' count (the padding) go nowhere (place −1 is out of range: no store).
    let minus = b.constant(Const::i32(-1));
    for j in 0..kpi {
        let r = c(&mut b, j * ITEMS);
        let r = b.op(Opcode::Add, &[r, l]);
        let k = b.read(ranked, r);
        let d = digit(&mut b, k, key, shift);
        let dl = b.read(delta, d);
        let ru = b.cast(r, u32t);
        let pos = b.op(Opcode::Add, &[dl, ru]);
        let pos = b.cast(pos, i32t);
        let inside = b.op(Opcode::Lt, &[r, count]);
        let pos = b.select(inside, pos, minus);
        b.effect(Opcode::Store, &[out_keys, pos, k]);
        if let (Some(sv), Some(ov)) = (sv, out_vals) {
            let v = b.read(sv, r);
            b.effect(Opcode::Store, &[ov, pos, v]);
        }
    }
    let m = b.finish_module().map_err(Error::invalid)?;
    Ok(Kernel::from_program(crate::dsl::Program::from_module(
        m, name,
    )?))
}

/// A new array of `n` elements for a launch that writes every one: on a GPU, device
/// memory with no upload and no fill; elsewhere zeros.
fn scratch<T: Elem>(dev: &Device, n: usize) -> Result<Array<1, T>> {
    if let Some(gpu) = dev.as_cuda() {
        let b = gpu.alloc_uninit(T::ir_type(), n)?;
        return Array::from_data(crate::array::ArrayData::stored(
            crate::array::Storage::from_resident(crate::array::Resident::Cuda(b)),
            &[n][..],
        ));
    }
    Array::filled([n], T::from_lanes(|_| T::Scalar::from_bits(0)))
}

/// The scalar type of a sort's key or value element.
fn scalar_of<T: Elem>(what: &str) -> Result<ScalarType> {
    match T::ir_type().lanes() {
        Some((
            s @ (ScalarType::U32
            | ScalarType::I32
            | ScalarType::F32
            | ScalarType::U64
            | ScalarType::I64
            | ScalarType::F64),
            1,
        )) => Ok(s),
        _ => Err(Error::argument(format!(
            "sort: {what} of {} (u32, i32, f32, u64, i64 and f64 are sorted)",
            T::ir_type()
        ))),
    }
}

/// Sorts `keys`, carrying `values` (same length) along, on the current device.
fn sort_impl<K: Elem, V: Elem>(
    keys: &Array<1, K>,
    values: Option<&Array<1, V>>,
) -> Result<(Array<1, K>, Option<Array<1, V>>)> {
    let ks = scalar_of::<K>("keys")?;
    let vs = match values {
        Some(v) => {
            if v.len() != keys.len() {
                return Err(Error::argument(format!(
                    "sort_pairs: {} keys and {} values",
                    keys.len(),
                    v.len()
                )));
            }
            Some(scalar_of::<V>("values")?)
        }
        None => None,
    };
    let n = keys.len();
    if n > i32::MAX as usize / 2 {
        return Err(Error::argument(format!("sort: {n} keys")));
    }
    let (mut k, mut v) = (keys.clone(), values.cloned());
    if n <= 1 {
        return Ok((k, v));
    }
    let dev = Device::current();
    if let Some(sorted) = sort_on_cpu(&dev, keys, values)? {
        return Ok(sorted);
    }
    let (count, place) = kernels(ks, vs)?;
    let tiles = n.div_ceil(ITEMS * per_item(ks, vs));
    let passes = ks.bits() / DIGIT_BITS;
    let mut counts = scratch::<u32>(&dev, DIGITS * tiles)?;
    for pass in 0..passes {
        let bits = pass * DIGIT_BITS;
        let shift = || {
            if ks.bits() == 64 {
                KernelArg::value(u64::from(bits))
            } else {
                KernelArg::value(bits)
            }
        };
        let mut args = [
            KernelArg::array(&k),
            KernelArg::value(n as i32),
            shift(),
            KernelArg::value(tiles as i32),
            KernelArg::buffer(&mut counts),
        ];
        count.launch_on(&dev, &[tiles as u32], &[ITEMS as u32], &mut args)?;
        let offsets = dev.scope(|| crate::collective::cumsum_exclusive(&counts))?;
        let mut out_k = scratch::<K>(&dev, n)?;
        let mut out_v = match &v {
            Some(_) => Some(scratch::<V>(&dev, n)?),
            None => None,
        };
        let mut args = vec![KernelArg::array(&k)];
        if let Some(v) = &v {
            args.push(KernelArg::array(v));
        }
        args.push(KernelArg::value(n as i32));
        args.push(shift());
        args.push(KernelArg::value(tiles as i32));
        args.push(KernelArg::array(&offsets));
        args.push(KernelArg::buffer(&mut out_k));
        if let Some(ov) = out_v.as_mut() {
            args.push(KernelArg::buffer(ov));
        }
        place.launch_on(&dev, &[tiles as u32], &[ITEMS as u32], &mut args)?;
        drop(args);
        k = out_k;
        v = out_v;
    }
    Ok((k, v))
}

/// On a CPU device or the interpreter (not while a sequence is recorded), the sort of
/// `keys` (and `values`) by the runtime's radix sort over the host buffers on every thread
/// ([`weft_runtime::hostsort::sort_host`]: stable too, so the same permutation). `None`
/// elsewhere. The interpreter runs a kernel with barriers as one OS thread per work-item,
/// which made `sort.place` (256 work-items, 22 barriers) take 25 s for 70,001 keys.
#[allow(clippy::type_complexity)]
fn sort_on_cpu<K: Elem, V: Elem>(
    dev: &Device,
    keys: &Array<1, K>,
    values: Option<&Array<1, V>>,
) -> Result<Option<(Array<1, K>, Option<Array<1, V>>)>> {
    if (dev.as_cpu().is_none() && !dev.is_interp()) || crate::sequence::recording() {
        return Ok(None);
    }
    let k = keys.data.host_buffer()?;
    let v = values.map(|v| v.data.host_buffer()).transpose()?;
    let threads = rayon::current_num_threads();
    let Some((sk, sv)) = weft_runtime::hostsort::sort_host(&k, v.as_deref(), threads) else {
        return Ok(None);
    };
    let wrap = |h: weft_runtime::HostBuffer| {
        let n = h.len();
        crate::array::ArrayData::stored(crate::array::Storage::from_host(h), &[n][..])
    };
    let sk = Array::from_data(wrap(sk))?;
    let sv = sv.map(|h| Array::from_data(wrap(h))).transpose()?;
    Ok(Some((sk, sv)))
}

/// `keys` in ascending order (a stable LSD radix sort, CUB's and Thrust's algorithm), on
/// the current device: integer keys (`u32`, `i32`, `u64`, `i64`) in numeric order, float
/// keys (`f32`, `f64`) in IEEE total order (−NaN, −∞, …, −0, +0, …, +∞, +NaN: NumPy puts
/// every NaN last). The same bits on every device.
///
/// ```
/// use weft::{sort, Array};
/// let k = Array::from_vec([5], vec![3.5f32, -1.0, 0.0, -0.0, 2.0])?;
/// assert_eq!(sort(&k)?.to_vec()?, vec![-1.0, -0.0, 0.0, 2.0, 3.5]);
/// # Ok::<(), weft::Error>(())
/// ```
///
/// # Errors
/// Keys of another type; more than 2^30 keys; a device failure.
pub fn sort<K: Elem>(keys: &Array<1, K>) -> Result<Array<1, K>> {
    Ok(sort_impl::<K, u32>(keys, None)?.0)
}

/// `keys` in ascending order with `values` permuted alike (equal keys keep their order),
/// as [`sort`]; values of the key types'.
///
/// # Errors
/// As [`sort`]; values of another type or another length.
pub fn sort_pairs<K: Elem, V: Elem>(
    keys: &Array<1, K>,
    values: &Array<1, V>,
) -> Result<(Array<1, K>, Array<1, V>)> {
    let (k, v) = sort_impl(keys, Some(values))?;
    Ok((k, v.expect("values were given")))
}
