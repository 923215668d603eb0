//! A reduction with a user combiner (DESIGN §5; RapidMind's `reduce`): the combiner merges
//! two intervals `[lo, hi]` into their hull, so reducing the intervals `[x, x]` of an array
//! gives its range in one parallel pass. Also `count` with a user predicate.
//!
//! `cargo run --release -p weft-workloads --example reduce_combiner [DEVICE] [N]`

use weft::dsl::{In, Out, Program, Value1f, Value2f};
use weft::{count, reduce, Array, Device, Result};

/// The hull of the values' intervals and how many values are negative, on `dev`.
pub fn reduce_combiner(dev: &Device, n: usize) -> Result<([f32; 2], u64)> {
    let hull = Program::record(|| {
        let a = In::<Value2f>::named("a");
        let b = In::<Value2f>::named("b");
        let lo = a.x().min(b.x());
        let hi = a.y().max(b.y());
        Out::named("hull", Value2f::from_lanes([lo, hi]));
    })?;
    let negative = Program::record(|| {
        let x = In::<Value1f>::named("x");
        Out::named("neg", x.lt(0.0f32));
    })?;
    let xs: Vec<f32> = (0..n)
        .map(|i| ((i * 7919) % 10007) as f32 - 5000.0)
        .collect();
    let intervals = Array::from_fn([n], |i| [xs[i], xs[i]])?;
    let values = Array::from_vec([n], xs)?;
    dev.scope(|| Ok((reduce(&hull, &intervals)?, count(&negative, &values)?)))
}

/// The example's command line (see the module docs).
pub fn main() {
    let name = crate::device_arg();
    let n = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1 << 22);
    let run = || -> Result<()> {
        let dev = Device::by_name(&name)?;
        let (h, neg) = reduce_combiner(&dev, n)?;
        println!(
            "reduce_combiner on {dev}: {n} values in [{}, {}], {neg} negative",
            h[0], h[1]
        );
        Ok(())
    };
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
