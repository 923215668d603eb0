//! Scatters with combine (issue 25): [`bincount`] and [`histogram`], each one kernel-mode
//! launch in which every work-group counts its share of the values into a histogram of its
//! own in shared memory, then adds it to the result with one atomic add per bin (the
//! privatised histogram of CUB's `DeviceHistogram` and of the CUDA samples); and
//! [`scatter_add`], [`scatter_min`], [`scatter_max`] of integers (JAX's `x.at[idx].add(v)`),
//! one atomic per value. Integer atomics give the same result in every order, so every
//! device gives the same numbers; a float `scatter_add`, whose sums would depend on the
//! order of atomics, sorts the values by target and sums each run in input order
//! ([`crate::segment_sum`]) instead, the same bits on every device.

use crate::array::Array;
use crate::collective::{memo, Memo};
use crate::device::Device;
use crate::dsl::{
    block_dim, block_index, for_step, grid_dim, if_, sync_threads, thread_index, Buffer, InArray,
    Kernel, KernelArg, Param, Shared, Value, Value1d, Value1f, Value1i, Value1ui,
};
use crate::error::{Error, Result};
use std::sync::OnceLock;
use weft_ir::Boundary;

/// Bins a work-group counts in shared memory (16 KiB of `u32`); more bins are counted with
/// atomic adds to the result directly.
const LOCAL_BINS: usize = 4096;
/// Work-items per work-group.
const ITEMS: usize = 256;
/// Values each work-item counts, at least, before another work-group is worth launching.
const PER_ITEM: usize = 64;
/// The most work-groups of one launch.
const MAX_GROUPS: usize = 1024;

/// The body shared by the kernels, after their own parameters: uniforms `n` (values) and
/// `bins`, then the `counts` buffer; `bin(i)` gives the bin of value `i` and whether it is
/// counted.
fn count_kernel(local: bool, bin: impl Fn(Value1i) -> (Value1i, Value<bool, 1>)) {
    let n = Param::uniform::<Value1i>("n");
    let bins = Param::uniform::<Value1i>("bins");
    let counts = Buffer::<1, Value1ui>::named("counts");
    let tid = thread_index::<1>();
    let items = block_dim::<1>();
    let first = block_index::<1>() * &items + &tid;
    let stride = grid_dim::<1>() * &items;
    if local {
        let mine = Shared::<1, Value1ui>::new([LOCAL_BINS]);
        for_step(&tid, &bins, &items, |b| mine.store(&b, 0u32));
        sync_threads();
        for_step(&first, &n, &stride, |i| {
            let (b, counted) = bin(i);
            if_(counted, || {
                mine.atomic_add(&b, 1u32);
            });
        });
        sync_threads();
        for_step(&tid, &bins, &items, |b| {
            let c = mine.read(&b);
            if_(c.ne(0u32), || {
                counts.atomic_add(&b, &c);
            });
        });
    } else {
        for_step(&first, &n, &stride, |i| {
            let (b, counted) = bin(i);
            if_(counted, || {
                counts.atomic_add(&b, 1u32);
            });
        });
    }
}

/// The bincount kernel (`local`: counted in shared memory first).
fn bincount_kernel(local: bool) -> Result<Kernel> {
    static K: Memo<bool, Kernel> = OnceLock::new();
    memo(&K, local, || {
        Kernel::record_named("bincount", || {
            let values = InArray::<1, Value1i>::named("values", Boundary::Clamp);
            let top = Param::uniform::<Value1i>("top");
            count_kernel(local, |i| {
                let v = values.read(&i);
                let ok = v.ge(0i32) & v.lt(&top);
                (v, ok)
            });
        })
    })
}

/// The f32 histogram kernel.
fn histogram_kernel(local: bool) -> Result<Kernel> {
    static K: Memo<bool, Kernel> = OnceLock::new();
    memo(&K, local, || {
        Kernel::record_named("histogram", || {
            let values = InArray::<1, Value1f>::named("values", Boundary::Clamp);
            let lo = Param::uniform::<Value1d>("lo");
            let hi = Param::uniform::<Value1d>("hi");
            let scale = Param::uniform::<Value1d>("scale");
            let last = Param::uniform::<Value1i>("last");
            count_kernel(local, |i| {
                let x = values.read(&i).cast::<f64>();
                // NaN fails both comparisons: not counted.
                let inside = x.ge(&lo) & x.le(&hi);
                let f = ((&x - &lo) * &scale).floor();
                let b = crate::dsl::select(f.ge(last.cast::<f64>()), &last, f.cast::<i32>());
                (
                    crate::dsl::select(inside.clone(), b, Value1i::new(0i32)),
                    inside,
                )
            });
        })
    })
}

/// Work-groups for `n` values.
fn groups(n: usize) -> u32 {
    n.div_ceil(ITEMS * PER_ITEM).clamp(1, MAX_GROUPS) as u32
}

fn check(n: usize, bins: usize, what: &str) -> Result<()> {
    if bins == 0 || bins > i32::MAX as usize || n > i32::MAX as usize {
        return Err(Error::argument(format!(
            "{what}: {bins} bins over {n} values (bins must be 1 to 2^31 − 1, values at most \
             2^31 − 1)"
        )));
    }
    Ok(())
}

/// How many of `values` equal each of `0 .. bins` (NumPy's `bincount` with `minlength =
/// bins`, CuPy's on a GPU), on the current device; values outside `0 .. bins` are not
/// counted. Counts are `u32`, the same on every device.
///
/// ```
/// use weft::{bincount, Array};
/// let v = Array::from_vec([6], vec![0, 2, 2, 5, -1, 9])?;
/// assert_eq!(bincount(&v, 6)?.to_vec()?, vec![1, 0, 2, 0, 0, 1]);
/// # Ok::<(), weft::Error>(())
/// ```
///
/// # Errors
/// `bins` of 0 or above `i32::MAX`; a device failure.
pub fn bincount(values: &Array<1, i32>, bins: usize) -> Result<Array<1, u32>> {
    let n = values.len();
    check(n, bins, "bincount")?;
    let k = bincount_kernel(bins <= LOCAL_BINS)?;
    count_into(
        &k,
        n,
        bins,
        vec![KernelArg::array(values), KernelArg::value(bins as i32)],
    )
}

/// Launches counting kernel `k` over `n` values into `bins` new counts; `args` are the
/// kernel's own arguments (before `n`, `bins` and the counts).
fn count_into(
    k: &Kernel,
    n: usize,
    bins: usize,
    args: Vec<KernelArg<'static>>,
) -> Result<Array<1, u32>> {
    let mut counts = Array::filled([bins], 0u32)?;
    if n == 0 {
        return Ok(counts);
    }
    let mut args: Vec<KernelArg<'_>> = args;
    args.push(KernelArg::value(n as i32));
    args.push(KernelArg::value(bins as i32));
    args.push(KernelArg::buffer(&mut counts));
    k.launch_on(&Device::current(), &[groups(n)], &[ITEMS as u32], &mut args)?;
    drop(args);
    Ok(counts)
}

/// The histogram of `values` in `bins` equal bins over `range = (lo, hi)` (NumPy's
/// `histogram(values, bins, range)` counts), on the current device: value `x` in `[lo, hi]`
/// goes to bin `⌊(x − lo) · bins / (hi − lo)⌋` computed in f64 (`hi` itself to the last bin);
/// values outside the range and NaNs are not counted. Counts are `u32`, the same on every
/// device.
///
/// # Errors
/// `bins` of 0 or above `i32::MAX`; a range that is not finite with `lo < hi`; a device
/// failure.
pub fn histogram(values: &Array<1, f32>, bins: usize, range: (f32, f32)) -> Result<Array<1, u32>> {
    let n = values.len();
    check(n, bins, "histogram")?;
    let (lo, hi) = (f64::from(range.0), f64::from(range.1));
    if !(lo.is_finite() && hi.is_finite() && lo < hi) {
        return Err(Error::argument(format!(
            "histogram: range ({lo}, {hi}) must be finite with lo < hi"
        )));
    }
    let k = histogram_kernel(bins <= LOCAL_BINS)?;
    count_into(
        &k,
        n,
        bins,
        vec![
            KernelArg::array(values),
            KernelArg::value(lo),
            KernelArg::value(hi),
            KernelArg::value(bins as f64 / (hi - lo)),
            KernelArg::value(bins as i32 - 1),
        ],
    )
}

/// Work-items per work-group of the scatter kernels.
const SCATTER_ITEMS: usize = 256;

/// The scatter kernel of `op` for elements of `t`: work-item `i < n` combines `v[i]` into
/// `o[idx[i]]` atomically (nothing for an index outside `o`).
fn scatter_kernel(op: weft_ir::Opcode, t: weft_ir::Type) -> Result<Kernel> {
    use weft_ir::builder::ProgramBuilder;
    use weft_ir::{Const, Opcode, Type};
    let at = |t: Type| {
        Type::array(1, t, Boundary::Clamp)
            .ok_or_else(|| Error::argument(format!("scatter: no arrays of {t}")))
    };
    let mut b = ProgramBuilder::new("scatter");
    b.make_kernel();
    let idx = b.array("idx", at(Type::i32())?);
    let v = b.array("v", at(t)?);
    let n = b.uniform("n", Type::i32());
    let out = b.buffer("o", at(t)?);
    let l = b.op_typed(Opcode::LocalId, &[], Type::i32());
    let g = b.op_typed(Opcode::GroupId, &[], Type::i32());
    let items = b.constant(Const::i32(SCATTER_ITEMS as i32));
    let gi = b.op(Opcode::Mul, &[g, items]);
    let i = b.op(Opcode::Add, &[gi, l]);
    let inside = b.op(Opcode::Lt, &[i, n]);
    b.if_(inside, |b| {
        let k = b.read(idx, i);
        let x = b.read(v, i);
        b.op_typed(op, &[out, k, x], t);
    });
    let m = b.finish_module().map_err(Error::invalid)?;
    Ok(Kernel::from_program(crate::dsl::Program::from_module(
        m, "scatter",
    )?))
}

/// `target` with each `values[i]` combined into element `idx[i]` by `op`.
fn scatter_with<T: crate::scalar::Elem>(
    op: weft_ir::Opcode,
    what: &str,
    target: &Array<1, T>,
    idx: &Array<1, i32>,
    values: &Array<1, T>,
) -> Result<Array<1, T>> {
    let t = T::ir_type();
    let ok = matches!(
        t.lanes().map(|l| (l.0, l.1)),
        Some((weft_ir::ScalarType::I32 | weft_ir::ScalarType::U32, 1))
            | Some((weft_ir::ScalarType::I64 | weft_ir::ScalarType::U64, 1))
    );
    let float = matches!(
        t.lanes().map(|l| (l.0, l.1)),
        Some((weft_ir::ScalarType::F32 | weft_ir::ScalarType::F64, 1))
    );
    if idx.len() != values.len() {
        return Err(Error::argument(format!(
            "{what}: {} indices for {} values",
            idx.len(),
            values.len()
        )));
    }
    if float && op == weft_ir::Opcode::AtomicAdd {
        return scatter_add_float(target, idx, values);
    }
    if !ok {
        return Err(Error::argument(format!(
            "{what}: elements of {t}: {} scatter (a float sum's bits depend on the order of \
             its values: only scatter_add takes f32 and f64, in input order)",
            if op == weft_ir::Opcode::AtomicAdd {
                "only i32, u32, i64, u64, f32 and f64"
            } else {
                "only i32, u32, i64 and u64"
            }
        )));
    }
    let n = values.len();
    let mut out = target.clone();
    if n == 0 {
        return Ok(out);
    }
    if n > i32::MAX as usize {
        return Err(Error::argument(format!("{what}: {n} values")));
    }
    static KERNELS: Memo<(weft_ir::Opcode, weft_ir::Type), Kernel> = OnceLock::new();
    let k = memo(&KERNELS, (op, t), || scatter_kernel(op, t))?;
    let groups = n.div_ceil(SCATTER_ITEMS) as u32;
    k.launch_on(
        &Device::current(),
        &[groups],
        &[SCATTER_ITEMS as u32],
        &mut [
            KernelArg::array(idx),
            KernelArg::array(values),
            KernelArg::value(n as i32),
            KernelArg::buffer(&mut out),
        ],
    )?;
    Ok(out)
}

/// [`scatter_add`] of f32 or f64 values in a fixed order (issue 25): the values are sorted
/// by target element (a stable sort of the indices as `u32`, so indices outside `target`
/// — negative ones too — go last), each element's run is summed left to right
/// ([`crate::segment_sum`], exact from −0), and each element with a run becomes
/// `target[k] + run sum`. Every step is a collective whose bits are the same on every
/// device.
fn scatter_add_float<T: crate::scalar::Elem>(
    target: &Array<1, T>,
    idx: &Array<1, i32>,
    values: &Array<1, T>,
) -> Result<Array<1, T>> {
    use weft_ir::builder::ProgramBuilder;
    use weft_ir::{Const, Opcode, ScalarType, Type};
    let (n, len) = (values.len(), target.len());
    if n == 0 || len == 0 {
        return Ok(target.clone());
    }
    if n > i32::MAX as usize / 2 || len >= i32::MAX as usize {
        return Err(Error::argument(format!(
            "scatter_add: {n} values into {len} elements"
        )));
    }
    let t = T::ir_type();
    let at = |e: Type| Type::array(1, e, Boundary::Clamp).expect("a scalar array type");
    let (i32t, u32t) = (Type::scalar(ScalarType::I32), Type::scalar(ScalarType::U32));
    let program = |b: ProgramBuilder, name: &str| -> Result<crate::dsl::Program> {
        let m = b.finish_module().map_err(Error::invalid)?;
        crate::dsl::Program::from_module(m, name)
    };
    static PROGRAMS: Memo<Type, [crate::dsl::Program; 3]> = OnceLock::new();
    let [keys, offsets, add] = &memo(&PROGRAMS, t, || {
        // Sort keys (the index as u32) and positions.
        let mut b = ProgramBuilder::new("scatter.keys");
        let x = b.array("idx", at(i32t));
        let i = b.index(i32t);
        let k = b.read(x, i);
        let k = b.op_typed(Opcode::Bitcast, &[k], u32t);
        b.output("key", k);
        b.output("pos", i);
        let keys = program(b, "scatter.keys")?;
        // Segment offsets: 0, then the inclusive scan of the counts (as i32).
        let mut b = ProgramBuilder::new("scatter.offsets");
        let c = b.array("incl", at(u32t));
        let i = b.index(i32t);
        let one = b.constant(Const::i32(1));
        let prev = b.op(Opcode::Sub, &[i, one]);
        let v = b.read(c, prev);
        let v = b.op_typed(Opcode::Bitcast, &[v], i32t);
        let zero = b.constant(Const::i32(0));
        let first = b.op(Opcode::Eq, &[i, zero]);
        let o = b.select(first, zero, v);
        b.output("offset", o);
        let offsets = program(b, "scatter.offsets")?;
        // target + run sum where a run exists.
        let mut b = ProgramBuilder::new("scatter.add");
        let (tg, sm, ct) = (
            b.array("target", at(t)),
            b.array("sums", at(t)),
            b.array("counts", at(u32t)),
        );
        let i = b.index(i32t);
        let (x, y, c) = (b.read(tg, i), b.read(sm, i), b.read(ct, i));
        let s = b.op(Opcode::Add, &[x, y]);
        let zero = b.constant(Const::scalar(ScalarType::U32, 0));
        let some = b.op(Opcode::Gt, &[c, zero]);
        let o = b.select(some, s, x);
        b.output("out", o);
        let add = program(b, "scatter.add")?;
        Ok([keys, offsets, add])
    })?;
    let (k, pos): (Array<1, u32>, Array<1, i32>) = keys.apply_shape(&[n], idx)?;
    let (_, pos) = crate::sort::sort_pairs(&k, &pos)?;
    let sorted = values.gather(&pos)?;
    let counts = bincount(idx, len)?;
    let incl = crate::collective::cumsum(&counts)?;
    let offs: Array<1, i32> = offsets.apply_shape(&[len + 1], &incl)?;
    let sums = crate::collective::segment_sum(&sorted, &offs)?;
    add.apply_shape(&[len], (target, &sums, &counts))
}

/// `target` with `values[i]` added to element `idx[i]` for every `i` (JAX's
/// `target.at[idx].add(values)`), on the current device; indices outside `target` are
/// skipped; integers wrap. `target` itself is unchanged (arrays are values). Integers are
/// added with atomics (any order gives the same result); f32 and f64 values in a fixed
/// order — each element's values summed left to right in input order, then added to the
/// element (docs/semantics.md, "Histograms") — by a sort, a gather and a segmented sum, so
/// float results are the same bits on every device too.
///
/// ```
/// use weft::{scatter_add, Array};
/// let t = Array::from_vec([4], vec![0i32, 10, 20, 30])?;
/// let idx = Array::from_vec([4], vec![1, 1, 3, 9])?;
/// let v = Array::from_vec([4], vec![5i32, 6, 7, 8])?;
/// assert_eq!(scatter_add(&t, &idx, &v)?.to_vec()?, vec![0, 21, 20, 37]);
/// # Ok::<(), weft::Error>(())
/// ```
///
/// # Errors
/// Elements other than `i32`, `u32`, `i64`, `u64`, `f32`, `f64`; `idx` and `values` of
/// different lengths; a device failure.
pub fn scatter_add<T: crate::scalar::Elem>(
    target: &Array<1, T>,
    idx: &Array<1, i32>,
    values: &Array<1, T>,
) -> Result<Array<1, T>> {
    scatter_with(
        weft_ir::Opcode::AtomicAdd,
        "scatter_add",
        target,
        idx,
        values,
    )
}

/// `target` with element `idx[i]` replaced by its minimum with `values[i]`, as
/// [`scatter_add`].
///
/// # Errors
/// As [`scatter_add`].
pub fn scatter_min<T: crate::scalar::Elem>(
    target: &Array<1, T>,
    idx: &Array<1, i32>,
    values: &Array<1, T>,
) -> Result<Array<1, T>> {
    scatter_with(
        weft_ir::Opcode::AtomicMin,
        "scatter_min",
        target,
        idx,
        values,
    )
}

/// `target` with element `idx[i]` replaced by its maximum with `values[i]`, as
/// [`scatter_add`].
///
/// # Errors
/// As [`scatter_add`].
pub fn scatter_max<T: crate::scalar::Elem>(
    target: &Array<1, T>,
    idx: &Array<1, i32>,
    values: &Array<1, T>,
) -> Result<Array<1, T>> {
    scatter_with(
        weft_ir::Opcode::AtomicMax,
        "scatter_max",
        target,
        idx,
        values,
    )
}
