//! The RapidMind paper's first example (McCool et al., "Data-Parallel Programming on the Cell
//! BE and the GPU using the RapidMind Development Platform", §3 "func_arrays"): a host
//! function called while recording is inlined into the program, which is then applied to
//! two 2-D arrays of `Value3f`.
//!
//! `cargo run --release -p weft-workloads --example func_arrays [DEVICE] [SIDE]`

use weft::dsl::{In, Out, Program, Value3f};
use weft::{Array, Device, Result};

/// An ordinary Rust function over DSL values: recorded (inlined) when called during
/// recording, computed at once outside it.
fn f(a: &Value3f, b: &Value3f) -> Value3f {
    (a * b + 1.0f32) * 0.5f32
}

/// `c = f(a, b) + a · 2` over a `side × side` grid.
pub fn func_arrays(dev: &Device, side: usize) -> Result<Vec<[f32; 3]>> {
    let prog = Program::record(|| {
        let a = In::<Value3f>::named("a");
        let b = In::<Value3f>::named("b");
        let d = f(&a, &b);
        Out::named("c", d + &a * 2.0f32);
    })?;
    let a = Array::from_fn([side, side], |i| [i as f32, 1.0, (i % 5) as f32])?;
    let b = Array::from_fn([side, side], |i| [0.5, (i % 3) as f32, -1.0])?;
    let c: Array<2, [f32; 3]> = prog.apply_on(dev, (&a, &b))?;
    c.to_vec()
}

/// The example's command line (see the module docs).
pub fn main() {
    let name = crate::device_arg();
    let side = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(512);
    let run = || -> Result<()> {
        let dev = Device::by_name(&name)?;
        let c = func_arrays(&dev, side)?;
        // Immediate mode: the same function computes at once outside recording.
        let host = f(
            &Value3f::from_array([0.0, 1.0, 0.0]),
            &Value3f::from_array([0.5, 0.0, -1.0]),
        );
        println!(
            "func_arrays on {dev}: {side}×{side}, c[0] = {:?}, c[last] = {:?}, f at once = {:?}",
            c[0],
            c[c.len() - 1],
            host.to_array()?
        );
        Ok(())
    };
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
