//! The CPU device's radix sort (issue 25): a stable radix sort over host buffers on every
//! thread, as NVIDIA Warp's `radix_sort_pairs` runs on a CPU. Passes by the top 4, 8 and 12
//! bits (each share of the keys writes about 16 places at once) cut the keys into buckets
//! of a few thousand; each thread then sorts whole buckets by their low bits with 8-bit
//! digits in its own cache-sized buffers (least-significant digit first), the last pass
//! writing the result. Every pass is stable, so the result is the one permutation the keys
//! fix: the bits every other device gives. 32-bit keys without values take the vectorised
//! quicksort (`vsort.rs`) on CPUs with AVX-512: equal keys are equal bits, so its
//! instability changes nothing, and on 2 cores it is about 2.5× this radix sort's speed.

use crate::buffer::HostBuffer;
use weft_ir::ScalarType;

/// Keys a thread sorts at the least: below this per thread, fewer threads run.
const PER_THREAD: usize = 1 << 16;

/// A key's raw bits, as stored in a plane (4 or 8 bytes).
pub(crate) trait Raw:
    Copy
    + Default
    + Send
    + Sync
    + std::ops::BitXor<Output = Self>
    + std::ops::BitAnd<Output = Self>
    + std::ops::BitOr<Output = Self>
    + std::ops::Not<Output = Self>
    + 'static
{
    const BITS: u32;
    const ZERO: Self;
    /// The sign bit alone.
    const SIGN: Self;
    /// All ones when the top bit is set, else zero.
    fn sign_fill(self) -> Self;
    /// Bits `shift .. shift + width` (`width` at most 16).
    fn field(self, shift: u32, width: u32) -> usize;
}

impl Raw for u32 {
    const BITS: u32 = 32;
    const ZERO: u32 = 0;
    const SIGN: u32 = 1 << 31;
    fn sign_fill(self) -> u32 {
        ((self as i32) >> 31) as u32
    }
    fn field(self, shift: u32, width: u32) -> usize {
        ((self >> shift) & ((1 << width) - 1)) as usize
    }
}

impl Raw for u64 {
    const BITS: u32 = 64;
    const ZERO: u64 = 0;
    const SIGN: u64 = 1 << 63;
    fn sign_fill(self) -> u64 {
        ((self as i64) >> 63) as u64
    }
    fn field(self, shift: u32, width: u32) -> usize {
        ((self >> shift) & ((1 << width) - 1)) as usize
    }
}

/// The map between a key's bits and the unsigned value whose order is the order of the key
/// of its type (docs/semantics.md, "Sorts": IEEE total order for floats): `x ^ ((fill(x) &
/// fill) | flip)`, where `fill(x)` is all ones for a set top bit — no branch in the loops.
#[derive(Clone, Copy)]
pub(crate) struct Order<K> {
    pub(crate) fill: K,
    pub(crate) flip: K,
}

impl<K: Raw> Order<K> {
    /// The identity (keys already in their ordered form).
    pub(crate) const SAME: Order<K> = Order {
        fill: K::ZERO,
        flip: K::ZERO,
    };

    /// The order of keys of type `s`: floats flip every bit when negative and the sign
    /// when not; signed integers flip the sign.
    pub(crate) fn of(s: ScalarType) -> Order<K> {
        match s {
            ScalarType::F32 | ScalarType::F64 => Order {
                fill: !K::ZERO,
                flip: K::SIGN,
            },
            ScalarType::I32 | ScalarType::I64 => Order {
                fill: K::ZERO,
                flip: K::SIGN,
            },
            _ => Order::SAME,
        }
    }

    /// The ordered form of key bits `x`.
    pub(crate) fn ordered(self, x: K) -> K {
        x ^ ((x.sign_fill() & self.fill) | self.flip)
    }

    /// The key bits whose ordered form is `x`.
    fn unordered(self, x: K) -> K {
        x ^ (((!x).sign_fill() & self.fill) | self.flip)
    }
}

/// A pointer that threads write disjoint elements through.
#[derive(Clone, Copy)]
struct Out<T>(*mut T);
// SAFETY: each thread writes only the positions its digit offsets give it, which no other
// thread's offsets give (the offsets partition `0..n`), and `parallel_for` returns only
// after every piece has finished, before the buffer is read.
unsafe impl<T> Send for Out<T> {}
unsafe impl<T> Sync for Out<T> {}

/// Keys from which 32-bit keys alone take the vectorised quicksort (`vsort.rs`) when
/// the CPU has AVX-512.
const VSORT_MIN: usize = 1 << 12;

/// Keys per bucket the most-significant-digit passes aim at: a bucket's keys, values and a
/// thread's two scratch copies of them stay in a core's L2 cache.
const BUCKET: usize = 1 << 15;

/// Most keys of a bucket a thread sorts in its own buffers. A larger one (many keys with
/// the same top bits) is sorted by passes over it on every thread, as a whole array is.
const LOCAL_MAX: usize = 1 << 17;

/// Bits of a most-significant-digit pass: each share of the keys writes to about 16 places
/// at once (on this project's 2-core VM a 16-way scatter of 2^24 keys took 82 ms on one
/// thread, a 256-way one 138 ms).
const MSD_BITS: u32 = 4;

/// Most bits the most-significant-digit passes take (4,096 buckets).
const MSD_MAX: u32 = 12;

/// Most bits of a pass inside a bucket.
const LSD_BITS: u32 = 8;

/// The bits the most-significant-digit passes of `n` keys take: the fewest multiples of
/// [`MSD_BITS`] (at most [`MSD_MAX`]) that leave about [`BUCKET`] keys a bucket; 0 when the
/// keys fit one thread's buffers.
fn msd_bits(n: usize) -> u32 {
    let mut bits = 0;
    if n <= LOCAL_MAX {
        return 0;
    }
    while bits < MSD_MAX && n >> bits > BUCKET {
        bits += MSD_BITS;
    }
    bits
}

/// Shares of `n` keys for up to `threads` threads: at least [`PER_THREAD`] keys each.
fn shares(n: usize, threads: usize) -> Vec<std::ops::Range<usize>> {
    let threads = threads.clamp(1, n.div_ceil(PER_THREAD).max(1));
    let size = n.div_ceil(threads).max(1);
    (0..n.div_ceil(size))
        .map(|t| t * size..((t + 1) * size).min(n))
        .collect()
}

/// Where a pass reads: keys (mapped by `order` to their ordered form) and their values.
#[derive(Clone, Copy)]
struct Src<'a, K, V> {
    keys: &'a [K],
    values: Option<&'a [V]>,
    order: Order<K>,
}

impl<'a, K: Raw, V: Copy> Src<'a, K, V> {
    /// Keys already in their ordered form (and their values).
    fn stored(keys: &'a [K], values: Option<&'a [V]>) -> Src<'a, K, V> {
        Src {
            keys,
            values,
            order: Order::SAME,
        }
    }

    /// Keys (and values) `r`.
    fn part(&self, r: std::ops::Range<usize>) -> Src<'a, K, V> {
        Src {
            keys: &self.keys[r.clone()],
            values: self.values.map(|v| &v[r]),
            order: self.order,
        }
    }
}

/// Where a pass writes `len` keys (mapped back from their ordered form by `order`) and
/// their values.
#[derive(Clone, Copy)]
struct Dst<K, V> {
    keys: Out<K>,
    values: Option<Out<V>>,
    order: Order<K>,
    len: usize,
}

impl<K: Raw, V: Copy> Dst<K, V> {
    /// Writes every key of `src` (and its value) at the place `place` gives its ordered
    /// form, which must be one no other thread writes.
    fn scatter(&self, src: Src<'_, K, V>, mut place: impl FnMut(K) -> usize) {
        match (src.values, self.values) {
            (Some(vs), Some(vo)) => {
                for (&k, &v) in src.keys.iter().zip(vs) {
                    let o = src.order.ordered(k);
                    let j = place(o);
                    assert!(j < self.len, "sort: a place past the end");
                    // SAFETY: `j` is inside the destination, and no other thread writes it
                    // (the caller's places).
                    unsafe {
                        self.keys.0.add(j).write(self.order.unordered(o));
                        vo.0.add(j).write(v);
                    }
                }
            }
            _ => {
                for &k in src.keys {
                    let o = src.order.ordered(k);
                    let j = place(o);
                    assert!(j < self.len, "sort: a place past the end");
                    // SAFETY: as above.
                    unsafe { self.keys.0.add(j).write(self.order.unordered(o)) };
                }
            }
        }
    }
}

/// One stable counting pass over `src` on up to `threads` threads: keys (and values) go to
/// `dst` in ascending order of `digit` of their ordered form (`digits` values), equal digits
/// in input order. Returns the keys of each digit; `None` when a thread panicked.
fn pass<K: Raw, V: Copy + Send + Sync>(
    src: Src<'_, K, V>,
    dst: Dst<K, V>,
    (digit, digits): (impl Fn(K) -> usize + Send + Sync + Copy, usize),
    threads: usize,
) -> Option<Vec<usize>> {
    let n = src.keys.len();
    let shares = shares(n, threads);
    // On the launch pool's threads (no spawn per pass).
    let counts: Vec<std::sync::Mutex<Vec<usize>>> = shares
        .iter()
        .map(|_| std::sync::Mutex::new(vec![0usize; digits]))
        .collect();
    let counted = crate::parallel_for_checked(shares.len(), &|t| {
        let part = src.part(shares[t].clone());
        let mut h = counts[t].lock().unwrap_or_else(|e| e.into_inner());
        for &k in part.keys {
            h[digit(part.order.ordered(k))] += 1;
        }
    });
    let counts: Vec<Vec<usize>> = counts
        .into_iter()
        .map(|c| c.into_inner().unwrap_or_else(|e| e.into_inner()))
        .collect();
    // Share t's first place for digit d: every key of a smaller digit, then those of digit d
    // in earlier shares.
    let mut starts = vec![vec![0usize; digits]; shares.len()];
    let mut totals = vec![0usize; digits];
    let mut at = 0;
    for d in 0..digits {
        for (t, c) in counts.iter().enumerate() {
            starts[t][d] = at;
            at += c[d];
            totals[d] += c[d];
        }
    }
    assert_eq!(at, n, "sort: the digit counts cover every key");
    let starts: Vec<std::sync::Mutex<Vec<usize>>> =
        starts.into_iter().map(std::sync::Mutex::new).collect();
    if !counted {
        return None;
    }
    let placed = crate::parallel_for_checked(shares.len(), &|t| {
        let part = src.part(shares[t].clone());
        let mut next = starts[t].lock().unwrap_or_else(|e| e.into_inner());
        // This share's places for each digit, which the counts give no other share.
        dst.scatter(part, |o| {
            let slot = &mut next[digit(o)];
            *slot += 1;
            *slot - 1
        });
    });
    placed.then_some(totals)
}

/// The widths of the passes that sort the low `bits` bits: as even as [`LSD_BITS`] allows.
fn lsd_widths(bits: u32) -> Vec<u32> {
    let q = bits.div_ceil(LSD_BITS).max(1);
    (0..q).map(|i| bits / q + u32::from(i < bits % q)).collect()
}

/// A thread's buffers for [`sort_bucket`].
type Bufs<K, V> = ([Vec<K>; 2], [Vec<V>; 2]);

/// Sorts the keys of one bucket (`src`, whose keys agree above their low `bits` bits) on
/// this thread into `dst`, passing through `bufs` (grown to the bucket's length).
fn sort_bucket<K: Raw, V: Copy + Default>(
    src: Src<'_, K, V>,
    dst: Dst<K, V>,
    bits: u32,
    (tmp, vtmp): &mut Bufs<K, V>,
) {
    let n = src.keys.len();
    let widths = lsd_widths(bits);
    let mut shifts = Vec::with_capacity(widths.len());
    let mut at = 0;
    for &w in &widths {
        shifts.push(at);
        at += w;
    }
    let mut hist = vec![[0usize; 1 << LSD_BITS]; widths.len()];
    for &k in src.keys {
        let o = src.order.ordered(k);
        for (q, h) in hist.iter_mut().enumerate() {
            h[o.field(shifts[q], widths[q])] += 1;
        }
    }
    for h in &mut hist {
        let mut at = 0;
        for c in h.iter_mut() {
            (*c, at) = (at, at + *c);
        }
    }
    for t in tmp.iter_mut() {
        t.resize(n, K::default());
    }
    if src.values.is_some() {
        for t in vtmp.iter_mut() {
            t.resize(n, V::default());
        }
    }
    let last = widths.len() - 1;
    for (q, next) in hist.iter_mut().enumerate() {
        let [t0, t1] = &mut *tmp;
        let [v0, v1] = &mut *vtmp;
        let (from, to, vfrom, vto) = if q % 2 == 0 {
            (&**t1, &mut **t0, &**v1, &mut **v0)
        } else {
            (&**t0, &mut **t1, &**v0, &mut **v1)
        };
        let s = if q == 0 {
            src
        } else {
            Src {
                keys: &from[..n],
                values: src.values.map(|_| &vfrom[..n]),
                order: Order::SAME,
            }
        };
        let d = if q == last {
            dst
        } else {
            Dst {
                keys: Out(to.as_mut_ptr()),
                values: src.values.map(|_| Out(vto.as_mut_ptr())),
                order: Order::SAME,
                len: n,
            }
        };
        let (shift, width) = (shifts[q], widths[q]);
        // The bucket's places partition `0..n`, and this thread alone writes them.
        d.scatter(s, |o| {
            let slot = &mut next[o.field(shift, width)];
            *slot += 1;
            *slot - 1
        });
    }
}

/// Writes `keys` in ascending order of type `s` to `out`, and `values` (the same length)
/// carried along to `out_values`, on up to `threads` threads, with `scratch` (and
/// `vscratch`, for values) of the same length between passes.
///
/// Most-significant-digit passes of 4 bits (16 places written at once) cut the keys into
/// buckets of about [`BUCKET`] keys by their top bits; each thread then sorts whole
/// buckets by their low bits in its own cache-sized buffers, writing `out` in the last
/// pass. Every pass is stable, so the result is the one permutation the keys fix. `false`
/// when a thread panicked (the output is then not the sort).
fn sort_planes<K: Raw, V: Copy + Send + Sync + Default>(
    (keys, scratch, out): (&[K], &mut [K], &mut [K]),
    values: Option<(&[V], &mut [V], &mut [V])>,
    s: ScalarType,
    threads: usize,
) -> bool {
    let n = keys.len();
    if n == 0 {
        return true;
    }
    let (values, mut vscratch, mut out_values) = match values {
        Some((v, sc, o)) => (Some(v), Some(sc), Some(o)),
        None => (None, None, None),
    };
    let order = Order::of(s);
    let input = Src {
        keys,
        values,
        order,
    };
    let dst = |k: &mut [K], v: Option<&mut [V]>, order: Order<K>| Dst {
        len: k.len(),
        keys: Out(k.as_mut_ptr()),
        values: v.map(|v| Out(v.as_mut_ptr())),
        order,
    };
    let msd = msd_bits(n);
    if msd == 0 {
        let d = dst(out, out_values.as_deref_mut(), order);
        sort_bucket(input, d, K::BITS, &mut Default::default());
        return true;
    }
    // The passes by the top 4, 8, … bits alternate between `out` and `scratch`, the last
    // writing `scratch`.
    let passes = msd / MSD_BITS;
    let mut totals = Vec::new();
    for m in 1..=passes {
        let to_scratch = (passes - m).is_multiple_of(2);
        let width = m * MSD_BITS;
        let digit = move |o: K| o.field(K::BITS - width, width);
        let (src, d) = match (m, to_scratch) {
            (1, true) => (input, dst(scratch, vscratch.as_deref_mut(), Order::SAME)),
            (1, false) => (input, dst(out, out_values.as_deref_mut(), Order::SAME)),
            (_, true) => (
                Src::stored(out, out_values.as_deref()),
                dst(scratch, vscratch.as_deref_mut(), Order::SAME),
            ),
            (_, false) => (
                Src::stored(scratch, vscratch.as_deref()),
                dst(out, out_values.as_deref_mut(), Order::SAME),
            ),
        };
        let Some(t) = pass(src, d, (digit, 1 << width), threads) else {
            return false;
        };
        totals = t;
    }
    // The buckets, now in `scratch`: small ones sorted a thread each, large ones by passes
    // on every thread.
    let mut at = 0;
    let mut small = Vec::new();
    let mut large = Vec::new();
    for len in totals {
        match len {
            0 => {}
            l if l <= LOCAL_MAX => small.push(at..at + l),
            l => large.push(at..at + l),
        }
        at += len;
    }
    let bits = K::BITS - msd;
    {
        let from = Src::stored(scratch, vscratch.as_deref());
        let d = dst(out, out_values.as_deref_mut(), order);
        let next = std::sync::atomic::AtomicUsize::new(0);
        let workers = threads.clamp(1, small.len().max(1));
        let sorted = crate::parallel_for_checked(workers, &|_| {
            let d = &d;
            let mut bufs = Bufs::default();
            loop {
                let b = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(r) = small.get(b) else { break };
                // SAFETY: `r` is inside `0..n`; the buckets are disjoint, and each is written
                // by the one worker that took it.
                let part = unsafe {
                    Dst {
                        keys: Out(d.keys.0.add(r.start)),
                        values: d.values.map(|v| Out(v.0.add(r.start))),
                        order: d.order,
                        len: r.len(),
                    }
                };
                sort_bucket(from.part(r.clone()), part, bits, &mut bufs);
            }
        });
        if !sorted {
            return false;
        }
    }
    for r in large {
        // Passes of the low bits over the bucket, between `scratch` and `out`; the last
        // writes `out` (after a copy when the count is even).
        let widths = lsd_widths(bits);
        let mut shift = 0;
        for (q, &w) in widths.iter().enumerate() {
            let digit = move |o: K| o.field(shift, w);
            let last = q + 1 == widths.len();
            let (src, d) = if q % 2 == 0 {
                let vo = out_values.as_deref_mut().map(|v| &mut v[r.clone()]);
                let d = dst(
                    &mut out[r.clone()],
                    vo,
                    if last { order } else { Order::SAME },
                );
                (Src::stored(scratch, vscratch.as_deref()).part(r.clone()), d)
            } else {
                let vs = vscratch.as_deref_mut().map(|v| &mut v[r.clone()]);
                let d = dst(&mut scratch[r.clone()], vs, Order::SAME);
                (Src::stored(out, out_values.as_deref()).part(r.clone()), d)
            };
            if pass(src, d, (digit, 1 << w), threads).is_none() {
                return false;
            }
            shift += w;
        }
        if widths.len().is_multiple_of(2) {
            for i in r.clone() {
                out[i] = order.unordered(scratch[i]);
            }
            if let (Some(o), Some(v)) = (out_values.as_deref_mut(), vscratch.as_deref()) {
                o[r.clone()].copy_from_slice(&v[r]);
            }
        }
    }
    true
}

/// Sorts host buffer `keys` (scalars of `u32`, `i32`, `f32`, `u64`, `i64` or `f64`) in
/// ascending order — integers numerically, floats in IEEE total order (docs/semantics.md,
/// "Sorts") — carrying `values` (scalars of a 4- or 8-byte type, the same length) along,
/// stably, on up to `threads` threads. `None` for other key or value types (or lengths),
/// which the caller sorts otherwise.
pub fn sort_host(
    keys: &HostBuffer,
    values: Option<&HostBuffer>,
    threads: usize,
) -> Option<(HostBuffer, Option<HostBuffer>)> {
    let n = keys.len();
    let (ks, 1) = keys.elem().lanes()? else {
        return None;
    };
    let vs = match values {
        Some(v) if v.len() != n => return None,
        Some(v) => match v.elem().lanes()? {
            (s, 1) if matches!(s.bits(), 32 | 64) && s != ScalarType::Bool => Some(s),
            _ => return None,
        },
        None => None,
    };
    if !matches!(
        ks,
        ScalarType::U32
            | ScalarType::I32
            | ScalarType::F32
            | ScalarType::U64
            | ScalarType::I64
            | ScalarType::F64
    ) {
        return None;
    }
    // The scratch buffers come from the buffer pools too: fresh pages cost a fault each
    // (about 35 ms for 64 MB on this machine's VM), more than a pass.
    let mut out = HostBuffer::try_for_output(keys.elem(), n)?;
    let mut scratch = HostBuffer::try_for_output(keys.elem(), n)?;
    let mut out_v = match values {
        Some(v) => Some(HostBuffer::try_for_output(v.elem(), n)?),
        None => None,
    };
    let mut vscratch = match values {
        Some(v) => Some(HostBuffer::try_for_output(v.elem(), n)?),
        None => None,
    };
    // 32-bit keys alone, on a CPU with AVX-512: the vectorised quicksort. Equal keys are
    // equal bits, so an unstable sort gives the same result.
    if values.is_none() && ks.bits() == 32 && n >= VSORT_MIN && crate::vsort::available() {
        let order = Order::<u32>::of(ks);
        let sorted = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            crate::vsort::sort_keys(
                HostBuffer::scalars::<u32>(keys),
                HostBuffer::scalars_mut::<u32>(&mut scratch),
                HostBuffer::scalars_mut::<u32>(&mut out),
                order,
            )
        }));
        if matches!(sorted, Ok(true)) {
            return Some((out, None));
        }
    }
    macro_rules! go {
        ($k:ty, $v:ty) => {{
            let vals = match (values, vscratch.as_mut(), out_v.as_mut()) {
                (Some(v), Some(sc), Some(o)) => Some((
                    HostBuffer::scalars::<$v>(v),
                    HostBuffer::scalars_mut::<$v>(sc),
                    HostBuffer::scalars_mut::<$v>(o),
                )),
                _ => None,
            };
            let k = (
                HostBuffer::scalars::<$k>(keys),
                HostBuffer::scalars_mut::<$k>(&mut scratch),
                HostBuffer::scalars_mut::<$k>(&mut out),
            );
            sort_planes::<$k, $v>(k, vals, ks, threads)
        }};
    }
    // A panic (a broken invariant) is reported on stderr and the caller sorts with its
    // kernels instead: no partial result is handed out.
    let sorted = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        match (ks.bits(), vs.map(|s| s.bits())) {
            (32, Some(64)) => go!(u32, u64),
            (32, _) => go!(u32, u32),
            (_, Some(64)) => go!(u64, u64),
            _ => go!(u64, u32),
        }
    }));
    if !matches!(sorted, Ok(true)) {
        return None;
    }
    Some((out, out_v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_ir::{Const, Type};

    /// Sorted keys are in order, carry their values stably, and match a reference sort by
    /// the same total order, for every key type, on 1 and 3 threads: one bucket (few keys),
    /// buckets a thread each (keys over the whole range), and buckets too large for one
    /// thread's buffers (few distinct keys, so many share their top bits).
    #[test]
    fn sorts_like_a_stable_sort_by_total_order() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let types = [
            ScalarType::U32,
            ScalarType::I32,
            ScalarType::F32,
            ScalarType::U64,
            ScalarType::I64,
            ScalarType::F64,
        ];
        // Keys: few distinct ones (0), over the whole range (1), or few and small, so that one
        // bucket holds them all (2).
        let cases = [
            (1_000, 1),
            (70_001, 0),
            (300_007, 1),
            (300_007, 0),
            (600_001, 2),
        ];
        for ((n, mode), s) in cases.into_iter().flat_map(|c| types.map(|s| (c, s))) {
            let t = Type::scalar(s);
            let mut keys = HostBuffer::zeroed(t, n);
            let mut vals = HostBuffer::zeroed(Type::scalar(ScalarType::U32), n);
            let mut raw = Vec::with_capacity(n);
            for i in 0..n {
                // Few distinct keys (ties), or keys over the whole range; NaNs and ±0 among
                // the floats.
                let r = next();
                let few = (r % 4099) as f64 - 2000.0;
                let bits = match (s, mode) {
                    (_, 2) if s.is_float() => ((r % 1000) as f64).to_bits(),
                    (_, 2) => r % 1000,
                    (ScalarType::F32, 0) => (few as f32 / 7.0).to_bits() as u64,
                    (ScalarType::F64, 0) => (few / 7.0).to_bits(),
                    (_, 0) => (r % 4099).wrapping_mul(0x1000_0001_0001),
                    _ => r,
                };
                let bits = match (s, mode) {
                    (ScalarType::F32, 2) => (f64::from_bits(bits) as f32).to_bits() as u64,
                    _ => bits,
                };
                let bits = match (s, i % 97) {
                    (ScalarType::F32, 0) => f32::NAN.to_bits() as u64,
                    (ScalarType::F32, 1) => (-0.0f32).to_bits() as u64,
                    (ScalarType::F64, 0) => (-f64::NAN).to_bits(),
                    (ScalarType::F64, 1) => (-0.0f64).to_bits(),
                    _ => bits,
                };
                keys.set(i, &Const::scalar(s, bits & (u64::MAX >> (64 - s.bits()))));
                vals.set(i, &Const::scalar(ScalarType::U32, i as u64));
                raw.push((keys.bits(i, 0), i as u64));
            }
            // The reference: a stable sort by the ordered bits.
            let ord = |b: u64| {
                if s.bits() == 32 {
                    u64::from(Order::<u32>::of(s).ordered(b as u32))
                } else {
                    Order::<u64>::of(s).ordered(b)
                }
            };
            raw.sort_by_key(|&(b, _)| ord(b));
            for threads in [1, 3] {
                let (k, v) = sort_host(&keys, Some(&vals), threads).expect("a key type");
                let v = v.expect("values");
                for (i, &(b, j)) in raw.iter().enumerate() {
                    assert_eq!(
                        k.bits(i, 0),
                        b,
                        "{s} {n} {mode}: key {i}, {threads} threads"
                    );
                    assert_eq!(
                        v.bits(i, 0),
                        j,
                        "{s} {n} {mode}: value {i}, {threads} threads"
                    );
                }
            }
        }
    }
}
