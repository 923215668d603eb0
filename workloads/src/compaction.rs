//! Stream compaction with a scan and a scatter (issue 25): the values above a threshold,
//! kept in order — a map gives each value's flag, `cumsum_exclusive` its output position,
//! and a kernel stores each kept value there (a scatter with no collisions).
//!
//! `cargo run --release -p weft-workloads --example compaction [DEVICE] [N]`

use weft::dsl::{
    block_dim, block_index, if_, thread_index, Buffer, In, InArray, Kernel, KernelArg, Out, Param,
    Program, Value1f, Value1i,
};
use weft::ir::Boundary;
use weft::{cumsum_exclusive, Array, Device, Result};

/// The values of `x` above `threshold`, in order, computed on `dev`.
pub fn compact(dev: &Device, x: &Array<1, f32>, threshold: f32) -> Result<Vec<f32>> {
    let flag = Program::record_named("flag", || {
        let v = In::<Value1f>::named("x");
        let t = Param::uniform::<Value1f>("threshold");
        Out::named(
            "keep",
            weft::dsl::select(v.gt(&t), Value1i::new(1), Value1i::new(0)),
        );
    })?;
    let store = Kernel::record_named("compact", || {
        let x = InArray::<1, Value1f>::named("x", Boundary::Clamp);
        let keep = InArray::<1, Value1i>::named("keep", Boundary::Clamp);
        let pos = InArray::<1, Value1i>::named("pos", Boundary::Clamp);
        let n = Param::uniform::<Value1i>("n");
        let out = Buffer::<1, Value1f>::named("out");
        let i = block_index::<1>() * block_dim::<1>() + thread_index::<1>();
        if_(i.lt(&n) & keep.read(&i).eq(1i32), || {
            out.store(pos.read(&i), x.read(&i));
        });
    })?;
    let n = x.len();
    if n == 0 {
        return Ok(Vec::new());
    }
    dev.scope(|| {
        let keep: Array<1, i32> = flag.apply((x, threshold))?;
        let pos = cumsum_exclusive(&keep)?;
        let kept = pos.get(n - 1)?.unwrap_or(0) + keep.get(n - 1)?.unwrap_or(0);
        let mut out = Array::filled([kept.max(1) as usize], 0.0f32)?;
        let block = 256u32;
        let grid = n.div_ceil(block as usize) as u32;
        store.launch(
            &[grid],
            &[block],
            &mut [
                KernelArg::array(x),
                KernelArg::array(&keep),
                KernelArg::array(&pos),
                KernelArg::value(n as i32),
                KernelArg::buffer(&mut out),
            ],
        )?;
        let mut v = out.to_vec()?;
        v.truncate(kept as usize);
        Ok(v)
    })
}

/// The example's command line (see the module docs).
pub fn main() {
    let dev = crate::example_device();
    let n = crate::size_arg(1_000_000);
    let run = || -> Result<()> {
        let x = Array::from_fn([n], |i| ((i * 7919) % 1000) as f32 * 0.001)?;
        let kept = compact(&dev, &x, 0.9)?;
        println!(
            "compaction on {dev}: {} of {n} values above 0.9, first {:?}",
            kept.len(),
            &kept[..kept.len().min(4)]
        );
        Ok(())
    };
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
