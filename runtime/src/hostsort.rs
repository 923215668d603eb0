//! The CPU device's radix sort (issue 25): a stable least-significant-digit sort of 8-bit
//! digits over host buffers, on every thread — the algorithm of `weft::sort`'s kernels
//! (CUB's and Thrust's), run natively, as NVIDIA Warp's `radix_sort_pairs` runs on a CPU.
//! One read of the keys counts every pass's digits per thread; each pass then moves the
//! keys (and values) of each thread's contiguous share to their places: keys of smaller
//! digits first, equal digits in input order. The result is the one permutation the keys
//! fix, so it is the bits every other device gives.

use crate::buffer::HostBuffer;
use weft_ir::ScalarType;

/// Keys a thread sorts at the least: below this per thread, fewer threads run.
const PER_THREAD: usize = 1 << 16;

/// Digit values of a pass.
const DIGITS: usize = 256;

/// A key's raw bits, as stored in a plane (4 or 8 bytes).
trait Raw: Copy + Send + Sync + 'static {
    const BITS: u32;
    /// The unsigned value whose order is the order of a key of type `s` with these bits
    /// (docs/semantics.md, "Sorts": IEEE total order for floats).
    fn ordered(self, s: ScalarType) -> Self;
    /// The bits of the key of type `s` whose ordered form this is.
    fn unordered(self, s: ScalarType) -> Self;
    /// Digit `shift / 8` of an ordered key.
    fn digit(self, shift: u32) -> usize;
}

impl Raw for u32 {
    const BITS: u32 = 32;
    fn ordered(self, s: ScalarType) -> u32 {
        const SIGN: u32 = 1 << 31;
        match s {
            ScalarType::I32 => self ^ SIGN,
            ScalarType::F32 if self & SIGN != 0 => !self,
            ScalarType::F32 => self | SIGN,
            _ => self,
        }
    }
    fn unordered(self, s: ScalarType) -> u32 {
        const SIGN: u32 = 1 << 31;
        match s {
            ScalarType::F32 if self & SIGN != 0 => self & !SIGN,
            ScalarType::F32 => !self,
            _ => self.ordered(s),
        }
    }
    fn digit(self, shift: u32) -> usize {
        ((self >> shift) & 0xff) as usize
    }
}

impl Raw for u64 {
    const BITS: u32 = 64;
    fn ordered(self, s: ScalarType) -> u64 {
        const SIGN: u64 = 1 << 63;
        match s {
            ScalarType::I64 => self ^ SIGN,
            ScalarType::F64 if self & SIGN != 0 => !self,
            ScalarType::F64 => self | SIGN,
            _ => self,
        }
    }
    fn unordered(self, s: ScalarType) -> u64 {
        const SIGN: u64 = 1 << 63;
        match s {
            ScalarType::F64 if self & SIGN != 0 => self & !SIGN,
            ScalarType::F64 => !self,
            _ => self.ordered(s),
        }
    }
    fn digit(self, shift: u32) -> usize {
        ((self >> shift) & 0xff) as usize
    }
}

/// A pointer that threads write disjoint elements through.
#[derive(Clone, Copy)]
struct Out<T>(*mut T);
// SAFETY: each thread writes only the positions its digit offsets give it, which no other
// thread's offsets give (the offsets partition `0..n`), and the scope joins them before the
// buffer is read.
unsafe impl<T> Send for Out<T> {}
unsafe impl<T> Sync for Out<T> {}

/// Writes `keys` in ascending order of type `s` to `out`, and `values` (the same length)
/// carried along to `out_values`, on up to `threads` threads, with `scratch` (and
/// `vscratch`, for values) of the same length between passes.
fn sort_planes<K: Raw, V: Copy + Send + Sync + Default>(
    (keys, scratch, out): (&[K], &mut [K], &mut [K]),
    values: Option<(&[V], &mut [V], &mut [V])>,
    s: ScalarType,
    threads: usize,
) {
    let n = keys.len();
    if n == 0 {
        return;
    }
    let (values, vscratch, out_values) = match values {
        Some((v, sc, o)) => (Some(v), Some(sc), Some(o)),
        None => (None, None, None),
    };
    let passes = (K::BITS / 8) as usize;
    // Shares of a power-of-two size, so that position `j` is in share `j >> log`.
    let threads = threads.clamp(1, n.div_ceil(PER_THREAD).max(1));
    let log = n.div_ceil(threads).next_power_of_two().trailing_zeros();
    let size = 1usize << log;
    let shares = n.div_ceil(size);
    let share = |t: usize| t * size..((t + 1) * size).min(n);
    // counts[t][d]: keys of digit d (of the pass about to run) in share t. The first
    // pass's are counted here; each pass counts the next one's as it places the keys.
    let mut counts: Vec<[usize; DIGITS]> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..shares)
            .map(|t| {
                let part = &keys[share(t)];
                sc.spawn(move || {
                    let mut h = [0usize; DIGITS];
                    for &k in part {
                        h[k.ordered(s).digit(0)] += 1;
                    }
                    h
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().expect("a sort thread panicked"))
            .collect()
    });
    // Two buffers each, `out` the second: pass p reads one and writes the other (the first
    // pass reads the input); with an even number of passes the last writes `out`.
    let mut bufs = [scratch, out];
    let mut vbufs = match (vscratch, out_values) {
        (Some(a), Some(b)) => Some([a, b]),
        _ => None,
    };
    for p in 0..passes {
        // Share t's first place for digit d: every key of a smaller digit, then those of
        // digit d in earlier shares.
        let mut starts = vec![[0usize; DIGITS]; shares];
        let mut at = 0;
        for d in 0..DIGITS {
            for t in 0..shares {
                starts[t][d] = at;
                at += counts[t][d];
            }
        }
        assert_eq!(at, n, "sort: the digit counts cover every key");
        let (read, write) = if p % 2 == 0 {
            let [a, b] = &mut bufs;
            (&**b, &mut **a)
        } else {
            let [a, b] = &mut bufs;
            (&**a, &mut **b)
        };
        let kout = Out(write.as_mut_ptr());
        let (vread, vout) = match vbufs.as_mut() {
            Some([a, b]) if p % 2 == 0 => (Some(&**b), Some(Out(a.as_mut_ptr()))),
            Some([a, b]) => (Some(&**a), Some(Out(b.as_mut_ptr()))),
            None => (None, None),
        };
        let (shift, last) = (8 * p as u32, p + 1 == passes);
        // Per share placed from: the next pass's digit counts of each share it wrote into.
        let next_counts: Vec<Vec<[usize; DIGITS]>> = std::thread::scope(|sc| {
            let hs: Vec<_> = starts
                .into_iter()
                .enumerate()
                .map(|(t, mut next)| {
                    let r = share(t);
                    sc.spawn(move || {
                        let (kout, vout) = (kout, vout);
                        let mut nc = vec![[0usize; DIGITS]; if last { 0 } else { shares }];
                        for i in r {
                            // The first pass reads the input (mapping each key), the
                            // others the ordered keys the previous pass wrote.
                            let o = if p == 0 { keys[i].ordered(s) } else { read[i] };
                            let j = next[o.digit(shift)];
                            next[o.digit(shift)] = j + 1;
                            assert!(j < n, "sort: a place past the end");
                            // SAFETY: `j` is one of this share's places for the key's
                            // digit (see `Out`), inside `0..n`.
                            unsafe { kout.0.add(j).write(o) };
                            if !last {
                                nc[j >> log][o.digit(shift + 8)] += 1;
                            }
                            if let Some(vo) = vout {
                                let v = match (values, vread) {
                                    (Some(vs), _) if p == 0 => vs[i],
                                    (_, Some(vr)) => vr[i],
                                    _ => unreachable!("values in both or neither"),
                                };
                                // SAFETY: as for the key.
                                unsafe { vo.0.add(j).write(v) };
                            }
                        }
                        nc
                    })
                })
                .collect();
            hs.into_iter()
                .map(|h| h.join().expect("a sort thread panicked"))
                .collect()
        });
        if !last {
            for (t, c) in counts.iter_mut().enumerate() {
                for (d, x) in c.iter_mut().enumerate() {
                    *x = next_counts.iter().map(|nc| nc[t][d]).sum();
                }
            }
        }
    }
    let [_, sorted] = bufs;
    for k in sorted.iter_mut() {
        *k = k.unordered(s);
    }
}

/// The elements of plane 0 of `b` as `T` (4- or 8-byte lanes).
fn plane<T>(b: &HostBuffer) -> &[T] {
    let p = b.plane(0);
    // SAFETY: planes start 64-byte aligned and hold `stride` lanes of the storage width,
    // which the callers match with `T`; every bit pattern is a valid u32/u64.
    unsafe { std::slice::from_raw_parts(p.as_ptr().cast::<T>(), b.len()) }
}

/// The elements of plane 0 of `b` as mutable `T`s.
fn plane_mut<T>(b: &mut HostBuffer) -> &mut [T] {
    let n = b.len();
    let p = b.plane_mut(0);
    // SAFETY: as in `plane`, borrowed mutably.
    unsafe { std::slice::from_raw_parts_mut(p.as_mut_ptr().cast::<T>(), n) }
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
    macro_rules! go {
        ($k:ty, $v:ty) => {{
            let vals = match (values, vscratch.as_mut(), out_v.as_mut()) {
                (Some(v), Some(sc), Some(o)) => {
                    Some((plane::<$v>(v), plane_mut::<$v>(sc), plane_mut::<$v>(o)))
                }
                _ => None,
            };
            let k = (
                plane::<$k>(keys),
                plane_mut::<$k>(&mut scratch),
                plane_mut::<$k>(&mut out),
            );
            sort_planes::<$k, $v>(k, vals, ks, threads)
        }};
    }
    match (ks.bits(), vs.map(|s| s.bits())) {
        (32, Some(64)) => go!(u32, u64),
        (32, _) => go!(u32, u32),
        (_, Some(64)) => go!(u64, u64),
        _ => go!(u64, u32),
    }
    Some((out, out_v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_ir::{Const, Type};

    /// Sorted keys are in order, carry their values stably, and match a reference sort by
    /// the same total order, for every key type, on 1 and 3 threads.
    #[test]
    fn sorts_like_a_stable_sort_by_total_order() {
        let n = 200_003;
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for s in [
            ScalarType::U32,
            ScalarType::I32,
            ScalarType::F32,
            ScalarType::U64,
            ScalarType::I64,
            ScalarType::F64,
        ] {
            let t = Type::scalar(s);
            let mut keys = HostBuffer::zeroed(t, n);
            let mut vals = HostBuffer::zeroed(Type::scalar(ScalarType::U32), n);
            let mut raw = Vec::with_capacity(n);
            for i in 0..n {
                // Few distinct keys (ties), with NaNs and ±0 among the floats.
                let r = next() % 4099;
                let bits = match s {
                    ScalarType::F32 => ((r as f32 - 2000.0) / 7.0).to_bits() as u64,
                    ScalarType::F64 => ((r as f64 - 2000.0) / 7.0).to_bits(),
                    _ => r.wrapping_mul(0x1000_0001_0001),
                };
                let bits = match (s, i % 97) {
                    (ScalarType::F32, 0) => f32::NAN.to_bits() as u64,
                    (ScalarType::F32, 1) => (-0.0f32).to_bits() as u64,
                    (ScalarType::F64, 0) => (-f64::NAN).to_bits(),
                    (ScalarType::F64, 1) => (-0.0f64).to_bits(),
                    _ => bits,
                };
                keys.set(i, &Const::scalar(s, bits));
                vals.set(i, &Const::scalar(ScalarType::U32, i as u64));
                raw.push((keys.bits(i, 0), i as u64));
            }
            // The reference: a stable sort by the ordered bits.
            let ord = |b: u64| {
                if s.bits() == 32 {
                    u64::from((b as u32).ordered(s))
                } else {
                    b.ordered(s)
                }
            };
            raw.sort_by_key(|&(b, _)| ord(b));
            for threads in [1, 3] {
                let (k, v) = sort_host(&keys, Some(&vals), threads).expect("a key type");
                let v = v.expect("values");
                for (i, &(b, j)) in raw.iter().enumerate() {
                    assert_eq!(k.bits(i, 0), b, "{s}: key {i}, {threads} threads");
                    assert_eq!(v.bits(i, 0), j, "{s}: value {i}, {threads} threads");
                }
            }
        }
    }
}
