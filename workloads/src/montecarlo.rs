//! A Monte-Carlo option price with counter-based random numbers (issue 25): a European call
//! on one stock under geometric Brownian motion, each path's normal number drawn from the
//! Philox stream (`random_normal_at`), so every device — and any launch size — prices the
//! same paths; next to the closed-form price of [`crate::blackscholes::reference`].
//!
//! `cargo run --release -p weft-workloads --example montecarlo [DEVICE] [PATHS]`

use crate::blackscholes::{R, V};
use weft::dsl::{index, max, random_normal_at, Out, Param, Program, Value, Value1d};
use weft::{sum, Const, Device, Result};

/// Spot price, strike and years to expiry of the priced option.
pub const OPTION: (f64, f64, f64) = (100.0, 105.0, 1.0);

/// The discounted payoff of path `j`: `e^{-rT} · max(S_T − K, 0)` with `S_T = S₀ ·
/// exp((r − σ²/2)·T + σ·√T·z_j)`.
pub fn payoff_program() -> Result<Program> {
    let (s0, k, t) = OPTION;
    let (r, v) = (f64::from(R), f64::from(V));
    Program::record_named("payoff", || {
        let key = Param::uniform::<Value<u64, 2>>("key");
        let z = random_normal_at(&key, &index::<1>().cast::<u64>());
        let drift = (r - 0.5 * v * v) * t;
        let st = ((z * (v * t.sqrt())) + drift).exp() * s0;
        let pay = max(st - k, Value1d::new(0.0f64)) * (-r * t).exp();
        Out::named("payoff", pay);
    })
}

/// The price over `paths` paths of seed `seed` on `dev`: (Monte-Carlo price, its standard
/// error, the closed-form price).
pub fn price(dev: &Device, paths: usize, seed: u64) -> Result<(f64, f64, f64)> {
    let p = payoff_program()?;
    let key = Const::from_lanes(Value::<u64, 2>::ir_type(), &[seed, 0]);
    let pay: weft::Array<1, f64> = p.apply_shape_on(dev, &[paths], key)?;
    let square = Program::record_named("square", || {
        let x = weft::dsl::In::<Value1d>::named("x");
        Out::named("x2", &x * &x);
    })?;
    let sq: weft::Array<1, f64> = square.apply_on(dev, &pay)?;
    let (total, total_sq) = dev.scope(|| Ok::<_, weft::Error>((sum(&pay)?, sum(&sq)?)))?;
    let n = paths as f64;
    let mean = total / n;
    let var = (total_sq / n - mean * mean).max(0.0);
    let (s0, k, t) = OPTION;
    Ok((
        mean,
        (var / n).sqrt(),
        crate::blackscholes::reference(s0, k, t).0,
    ))
}

/// The example's command line (see the module docs).
pub fn main() {
    let dev = crate::example_device();
    let paths = crate::size_arg(1_000_000);
    match price(&dev, paths, 2026) {
        Ok((mc, se, exact)) => println!(
            "montecarlo on {dev}: {paths} paths, call price {mc:.4} ± {se:.4} (closed form \
             {exact:.4})"
        ),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
