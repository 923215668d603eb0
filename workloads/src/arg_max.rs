//! `arg_max` (DESIGN §5 collectives): the brightest point of a 2-D field computed by a
//! program over a virtual `grid` (no input storage), found with the value and its
//! row-major position.
//!
//! `cargo run --release -p weft-workloads --example arg_max [DEVICE] [SIDE]`

use weft::dsl::{In, Out, Program, Value1f, Value2i};
use weft::{arg_max, grid2, Array, Device, Result};

/// The maximum of a smooth field with a peak at (row 3·side/4, column side/3), and where.
pub fn arg_max_field(dev: &Device, side: usize) -> Result<(f32, usize)> {
    let field = Program::record(|| {
        let ij = In::<Value2i>::named("ij");
        let p = ij.cast::<f32>();
        let peak = weft::dsl::Value2f::from_array([(3 * side / 4) as f32, (side / 3) as f32]);
        let d = &p - peak;
        let r2: Value1f = d.dot(&d);
        Out::named(
            "f",
            (r2 * -0.001f32).exp() + (p.x() * 0.05f32).sin() * 0.01f32,
        );
    })?;
    let f: Array<2, f32> = field.apply_on(dev, &grid2([side, side]))?;
    dev.scope(|| arg_max(&f))
}

/// The example's command line (see the module docs).
pub fn main() {
    let name = crate::device_arg();
    let side = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1024);
    let run = || -> Result<()> {
        let dev = Device::by_name(&name)?;
        let (v, i) = arg_max_field(&dev, side)?;
        println!(
            "arg_max on {dev}: {side}×{side} field, max {v} at row {}, column {}",
            i / side,
            i % side
        );
        Ok(())
    };
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
