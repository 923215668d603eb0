//! Stable radix sort (issue 25): keys of `u32`, `i32`, `f32`, `u64`, `i64` or `f64`, alone
//! or with values of those types — the least-significant-digit radix sort of 8-bit digits
//! that CUB's and Thrust's sorts are built on. Each pass (4 for 32-bit keys, 8 for 64-bit
//! ones) is three launches: `sort.count`
//! (kernel mode: each work-item walks one block of [`BLOCK`] keys and counts its digits),
//! `cumsum_exclusive` of the counts laid out digit by digit (every key's place: keys of
//! smaller digits first, then those of earlier blocks), and `sort.place` (each work-item walks
//! its block again, in order, storing each key at its place). The result is a permutation
//! fixed by the keys alone, so every device gives the same bits.

use crate::array::Array;
use crate::collective::{memo, Memo};
use crate::device::Device;
use crate::dsl::{Kernel, KernelArg};
use crate::error::{Error, Result};
use crate::scalar::{Elem, Scalar};
use std::sync::OnceLock;
use weft_ir::builder::ProgramBuilder;
use weft_ir::{Boundary, Const, Opcode, ScalarType, Type};

/// Keys each work-item walks.
pub const BLOCK: usize = 2048;
/// Work-items per work-group (each with a 256-counter slice of shared memory: 32 KiB).
const ITEMS: usize = 32;
/// Digit values of a pass.
const DIGITS: usize = 256;

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
        Ok((build(key, value, false)?, build(key, value, true)?))
    })
}

/// `sort.count` (`place` false) or `sort.place`. Parameters: keys, (values), n, shift,
/// blocks, then `counts` (count: the buffer written; place: the offsets read), then (place)
/// the output keys and values.
fn build(key: ScalarType, value: Option<ScalarType>, place: bool) -> Result<Kernel> {
    let arr = |t: Type| {
        Type::array(1, t, Boundary::Clamp).ok_or_else(|| Error::argument("sort: no such arrays"))
    };
    let (i32t, u32t) = (Type::i32(), Type::scalar(ScalarType::U32));
    let name = if place { "sort.place" } else { "sort.count" };
    let mut b = ProgramBuilder::new(name);
    b.make_kernel();
    let keys = b.array("keys", arr(Type::scalar(key))?);
    let vals = value.map(|v| b.array("values", arr(Type::scalar(v)).expect("scalar")));
    let n = b.uniform("n", i32t);
    let (ku, _) = unsigned_of(key);
    let shift = b.uniform("shift", Type::scalar(ku));
    let blocks = b.uniform("blocks", i32t);
    let counts = if place {
        b.array("offsets", arr(u32t)?)
    } else {
        b.buffer("counts", arr(u32t)?)
    };
    let out_keys = place.then(|| b.buffer("out_keys", arr(Type::scalar(key)).expect("scalar")));
    let out_vals = match (place, value) {
        (true, Some(v)) => Some(b.buffer("out_values", arr(Type::scalar(v))?)),
        _ => None,
    };
    let cap = b.constant(Const::i32((ITEMS * DIGITS) as i32));
    let shared = b.op_typed(Opcode::Shared, &[cap], arr(u32t)?);
    let l = b.op_typed(Opcode::LocalId, &[], i32t);
    let g = b.op_typed(Opcode::GroupId, &[], i32t);
    let items = b.constant(Const::i32(ITEMS as i32));
    let gi = b.op(Opcode::Mul, &[g, items]);
    let blk = b.op(Opcode::Add, &[gi, l]);
    let digits = b.constant(Const::i32(DIGITS as i32));
    let base = b.op(Opcode::Mul, &[l, digits]);
    let zero = b.constant(Const::i32(0));
    let one = b.constant(Const::i32(1));
    let inside = b.op(Opcode::Lt, &[blk, blocks]);
    b.if_(inside, |b| {
        // This work-item's counters: zero (count) or its block's first places (place).
        b.for_range(zero, digits, one, |b, d| {
            let slot = b.op(Opcode::Add, &[base, d]);
            let v = if place {
                let at = b.op(Opcode::Mul, &[d, blocks]);
                let at = b.op(Opcode::Add, &[at, blk]);
                b.read(counts, at)
            } else {
                b.constant(Const::scalar(ScalarType::U32, 0))
            };
            b.effect(Opcode::Store, &[shared, slot, v]);
        });
        let span = b.constant(Const::i32(BLOCK as i32));
        let lo = b.op(Opcode::Mul, &[blk, span]);
        let end = b.op(Opcode::Add, &[lo, span]);
        let hi = b.op(Opcode::Min, &[end, n]);
        b.for_range(lo, hi, one, |b, i| {
            let k = b.read(keys, i);
            let o = ordered(b, k, key);
            let sh = b.op(Opcode::Shr, &[o, shift]);
            let mask = b.constant(Const::scalar(ku, 255));
            let d = b.op(Opcode::And, &[sh, mask]);
            let d = b.cast(d, i32t);
            let slot = b.op(Opcode::Add, &[base, d]);
            let c = b.read(shared, slot);
            let one_u = b.constant(Const::scalar(ScalarType::U32, 1));
            let c1 = b.op(Opcode::Add, &[c, one_u]);
            b.effect(Opcode::Store, &[shared, slot, c1]);
            if let Some(ok) = out_keys {
                let pos = b.cast(c, i32t);
                b.effect(Opcode::Store, &[ok, pos, k]);
                if let (Some(vs), Some(ov)) = (vals, out_vals) {
                    let v = b.read(vs, i);
                    b.effect(Opcode::Store, &[ov, pos, v]);
                }
            }
        });
        if !place {
            b.for_range(zero, digits, one, |b, d| {
                let slot = b.op(Opcode::Add, &[base, d]);
                let c = b.read(shared, slot);
                let at = b.op(Opcode::Mul, &[d, blocks]);
                let at = b.op(Opcode::Add, &[at, blk]);
                b.effect(Opcode::Store, &[counts, at, c]);
            });
        }
    });
    let m = b.finish_module().map_err(Error::invalid)?;
    Ok(Kernel::from_program(crate::dsl::Program::from_module(
        m, name,
    )?))
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
    let blocks = n.div_ceil(BLOCK);
    let groups = blocks.div_ceil(ITEMS) as u32;
    let passes = ks.bits() / 8;
    for pass in 0..passes {
        let shift = pass * 8;
        let mut counts = Array::filled([DIGITS * blocks], 0u32)?;
        let head = |k: &Array<1, K>, v: &Option<Array<1, V>>| {
            let mut a = vec![KernelArg::array(k)];
            if let Some(v) = v {
                a.push(KernelArg::array(v));
            }
            a.push(KernelArg::value(n as i32));
            a.push(if ks.bits() == 64 {
                KernelArg::value(u64::from(shift))
            } else {
                KernelArg::value(shift)
            });
            a.push(KernelArg::value(blocks as i32));
            a
        };
        let mut args = head(&k, &v);
        args.push(KernelArg::buffer(&mut counts));
        count.launch_on(&dev, &[groups], &[ITEMS as u32], &mut args)?;
        drop(args);
        let offsets = dev.scope(|| crate::collective::cumsum_exclusive(&counts))?;
        let mut out_k = Array::filled([n], K::from_lanes(|_| K::Scalar::from_bits(0)))?;
        let mut out_v = match &v {
            Some(_) => Some(Array::filled(
                [n],
                V::from_lanes(|_| V::Scalar::from_bits(0)),
            )?),
            None => None,
        };
        let mut args = head(&k, &v);
        args.push(KernelArg::array(&offsets));
        args.push(KernelArg::buffer(&mut out_k));
        if let Some(ov) = out_v.as_mut() {
            args.push(KernelArg::buffer(ov));
        }
        place.launch_on(&dev, &[groups], &[ITEMS as u32], &mut args)?;
        drop(args);
        k = out_k;
        v = out_v;
    }
    Ok((k, v))
}

/// On a CPU device (not while a sequence is recorded), the sort of `keys` (and `values`)
/// by the runtime's radix sort over the host buffers on every thread
/// ([`weft_runtime::hostsort::sort_host`]: the same passes as the kernels, so the same
/// permutation). `None` elsewhere.
#[allow(clippy::type_complexity)]
fn sort_on_cpu<K: Elem, V: Elem>(
    dev: &Device,
    keys: &Array<1, K>,
    values: Option<&Array<1, V>>,
) -> Result<Option<(Array<1, K>, Option<Array<1, V>>)>> {
    if dev.as_cpu().is_none() || crate::sequence::recording() {
        return Ok(None);
    }
    let host = |d: &crate::array::ArrayData| -> Result<std::sync::Arc<weft_runtime::HostBuffer>> {
        if let crate::array::Source::Stored(st) = &d.source {
            if d.offset == 0 && d.contiguous() {
                let h = st.host()?;
                if h.len() == d.len() {
                    return Ok(h);
                }
            }
        }
        Ok(std::sync::Arc::new(d.to_host_buffer()?))
    };
    let k = host(&keys.data)?;
    let v = values.map(|v| host(&v.data)).transpose()?;
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
