//! A histogram of normal numbers (issue 25): 10^6 draws of the Philox stream's
//! `random_normal_at` counted into 24 bins over [−4, 4] by `weft::histogram`, printed as a
//! bar chart.
//!
//! `cargo run --release -p weft-workloads --example histogram [DEVICE] [N]`

use weft::dsl::{index, random_normal_at, Out, Param, Program, Value};
use weft::{histogram, Array, Const, Device, Result};

/// Bins of the chart.
pub const BINS: usize = 24;

/// The counts of `n` normal numbers of seed `seed` in [`BINS`] bins over [−4, 4], on `dev`.
pub fn normal_histogram(dev: &Device, n: usize, seed: u64) -> Result<Vec<u32>> {
    let draw = Program::record_named("draw", || {
        let key = Param::uniform::<Value<u64, 2>>("key");
        let z = random_normal_at(&key, &index::<1>().cast::<u64>());
        Out::named("z", z.cast::<f32>());
    })?;
    let key = Const::from_lanes(Value::<u64, 2>::ir_type(), &[seed, 1]);
    let z: Array<1, f32> = draw.apply_shape_on(dev, &[n], key)?;
    dev.scope(|| histogram(&z, BINS, (-4.0, 4.0)))?.to_vec()
}

/// The example's command line (see the module docs).
pub fn main() {
    let dev = crate::example_device();
    let n = crate::size_arg(1_000_000);
    match normal_histogram(&dev, n, 7) {
        Ok(counts) => {
            println!("histogram on {dev}: {n} normal numbers");
            let top = counts.iter().copied().max().unwrap_or(1).max(1);
            for (b, c) in counts.iter().enumerate() {
                let lo = -4.0 + 8.0 * b as f64 / BINS as f64;
                let bar = "#".repeat((60 * *c as usize).div_ceil(top as usize));
                println!("{lo:>6.2} {c:>8} {bar}");
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
