//! The RapidMind paper's shader-style program (§3): normalize a surface normal and reflect
//! the incident direction about it, `r = i − 2·dot(n, i)·n`, over arrays of `Value3f`.
//!
//! `cargo run --release -p weft-workloads --example reflect [DEVICE] [N]`

use weft::dsl::{In, Out, Program, Value3f};
use weft::{Array, Device, Result};

/// Reflections of `n` incident directions about `n` normals (not unit length on input).
pub fn reflect(dev: &Device, n: usize) -> Result<Vec<[f32; 3]>> {
    let p = Program::record(|| {
        let i = In::<Value3f>::named("incident");
        let nrm = In::<Value3f>::named("normal");
        let un = nrm.normalize();
        Out::named("r", i.reflect(&un));
    })?;
    let inc = Array::from_fn([n], |k| {
        [1.0, -((k % 7) as f32) - 1.0, 0.25 * (k % 3) as f32]
    })?;
    let nrm = Array::from_fn([n], |k| [0.1 * (k % 5) as f32, 2.0, 0.3])?;
    let r: Array<1, [f32; 3]> = p.apply_on(dev, (&inc, &nrm))?;
    r.to_vec()
}

/// The example's command line (see the module docs).
pub fn main() {
    let name = crate::device_arg();
    let n = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1 << 20);
    let run = || -> Result<()> {
        let dev = Device::by_name(&name)?;
        let r = reflect(&dev, n)?;
        println!(
            "reflect on {dev}: {n} directions, r[0] = {:?}, r[1] = {:?}",
            r[0],
            r[1 % n]
        );
        Ok(())
    };
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
