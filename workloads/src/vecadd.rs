//! MC#'s `vecadd` (the first GPU method of the MC# papers): `c[i] = a[i] + b[i]` over `n`
//! floats, recorded as a weft program and applied on a device.
//!
//! `cargo run --release -p weft-workloads --example vecadd [DEVICE] [N]` (DEVICE: cpu, llvm, cuda, interp).

use weft::dsl::{In, Out, Program, Value1f};
use weft::{Array, Device, Result};

/// `c = a + b` for `a[i] = i`, `b[i] = 2·i mod 7` over `n` elements on `dev`.
pub fn vecadd(dev: &Device, n: usize) -> Result<Vec<f32>> {
    let p = Program::record(|| {
        let a = In::<Value1f>::named("a");
        let b = In::<Value1f>::named("b");
        Out::named("c", a + b);
    })?;
    let a = Array::from_fn([n], |i| i as f32)?;
    let b = Array::from_fn([n], |i| (2 * i % 7) as f32)?;
    let c: Array<1, f32> = p.apply_on(dev, (&a, &b))?;
    c.to_vec()
}

/// The example's command line (see the module docs).
pub fn main() {
    let dev = crate::example_device();
    let n = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1 << 20);
    match vecadd(&dev, n) {
        Ok(c) => println!(
            "vecadd on {dev}: n = {n}, c[0..4] = {:?}, c[n-1] = {}",
            &c[..4.min(n)],
            c[n - 1]
        ),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
