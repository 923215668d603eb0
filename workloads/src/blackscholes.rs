//! Black-Scholes (MC#'s finance example; the formula and polynomial CND of NVIDIA's
//! BlackScholes sample): European call and put prices of `n` options in f32, one option per
//! element, validated against the same formula in f64 (docs/workloads.md).
//!
//! `cargo run --release -p weft-workloads --example blackscholes [DEVICE] [N]`

use weft::dsl::{select, In, Out, Param, Program, Value1f};
use weft::{Array, Device, Result};

/// Riskless rate per year.
pub const R: f32 = 0.02;
/// Volatility per year.
pub const V: f32 = 0.30;

/// The polynomial approximation of the normal CDF (Abramowitz and Stegun 26.2.17), recorded
/// into the program that calls it. The constants are written as published (NVIDIA's
/// BlackScholes_gold.cpp); as f32 they round exactly as the C and CUDA baselines' do.
#[allow(clippy::excessive_precision)]
fn cnd(d: &Value1f) -> Value1f {
    let k = 1.0f32 / (d.abs() * 0.2316419f32 + 1.0f32);
    let poly = &k
        * (((((&k * 1.330274429f32) + -1.821255978f32) * &k + 1.781477937f32) * &k
            + -0.356563782f32)
            * &k
            + 0.31938153f32);
    let c = (d * d * -0.5f32).exp() * 0.3989422804014327f32 * poly;
    select(d.gt(0.0f32), 1.0f32 - &c, c)
}

/// The pricing program: (s, x, t) varying, (r, v) uniform → (call, put).
pub fn program() -> Result<Program> {
    Program::record_named("blackscholes", || {
        let s = In::<Value1f>::named("s");
        let x = In::<Value1f>::named("x");
        let t = In::<Value1f>::named("t");
        let r = Param::uniform::<Value1f>("r");
        let v = Param::uniform::<Value1f>("v");
        let sqt = t.sqrt();
        let vst = &v * &sqt;
        let d1 = ((&s / &x).log() + (&r + &v * &v * 0.5f32) * &t) / &vst;
        let d2 = &d1 - &vst;
        let (n1, n2) = (cnd(&d1), cnd(&d2));
        let xd = &x * (-&r * &t).exp();
        Out::named("call", &s * &n1 - &xd * &n2);
        Out::named("put", &xd * (1.0f32 - &n2) - &s * (1.0f32 - &n1));
    })
}

/// `n` options: spot S ∈ [5, 30], strike X ∈ [1, 100], years T ∈ [0.25, 10], uniform from a
/// fixed seed (splitmix64).
pub fn options(n: usize) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let mut state = 0x5eed_u64;
    let mut next = |lo: f32, hi: f32| {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        lo + (hi - lo) * ((z >> 40) as f32 / (1u64 << 24) as f32)
    };
    let mut s = Vec::with_capacity(n);
    let mut x = Vec::with_capacity(n);
    let mut t = Vec::with_capacity(n);
    for _ in 0..n {
        s.push(next(5.0, 30.0));
        x.push(next(1.0, 100.0));
        t.push(next(0.25, 10.0));
    }
    (s, x, t)
}

/// Call and put prices of the options on `dev`.
pub fn price(dev: &Device, s: &[f32], x: &[f32], t: &[f32]) -> Result<(Vec<f32>, Vec<f32>)> {
    let p = program()?;
    let n = s.len();
    let (s, x, t) = (
        Array::from_slice([n], s)?,
        Array::from_slice([n], x)?,
        Array::from_slice([n], t)?,
    );
    let (call, put) = dev.scope(|| price_arrays(&p, &s, &x, &t))?;
    Ok((call.to_vec()?, put.to_vec()?))
}

/// Applies the pricing program `p` ([`program`]) to option arrays on the current device:
/// (call, put) arrays, left where they were computed.
pub fn price_arrays(
    p: &Program,
    s: &Array<1, f32>,
    x: &Array<1, f32>,
    t: &Array<1, f32>,
) -> Result<(Array<1, f32>, Array<1, f32>)> {
    p.apply((s, x, t, R, V))
}

/// The same formula in f64: (call, put) of one option.
pub fn reference(s: f64, x: f64, t: f64) -> (f64, f64) {
    let (r, v) = (R as f64, V as f64);
    let cnd = |d: f64| {
        let k = 1.0 / (1.0 + 0.2316419 * d.abs());
        let c = 0.3989422804014327
            * (-0.5 * d * d).exp()
            * (k * (0.31938153
                + k * (-0.356563782 + k * (1.781477937 + k * (-1.821255978 + k * 1.330274429)))));
        if d > 0.0 {
            1.0 - c
        } else {
            c
        }
    };
    let sqt = t.sqrt();
    let d1 = ((s / x).ln() + (r + 0.5 * v * v) * t) / (v * sqt);
    let d2 = d1 - v * sqt;
    let xd = x * (-r * t).exp();
    (
        s * cnd(d1) - xd * cnd(d2),
        xd * (1.0 - cnd(d2)) - s * (1.0 - cnd(d1)),
    )
}

/// L1 relative errors of (call, put) against the f64 reference: Σ|p − p₆₄| / Σ|p₆₄|.
pub fn l1_errors(s: &[f32], x: &[f32], t: &[f32], call: &[f32], put: &[f32]) -> (f64, f64) {
    let (mut dc, mut rc, mut dp, mut rp) = (0.0, 0.0, 0.0, 0.0);
    for i in 0..s.len() {
        let (c, p) = reference(s[i] as f64, x[i] as f64, t[i] as f64);
        dc += (call[i] as f64 - c).abs();
        rc += c.abs();
        dp += (put[i] as f64 - p).abs();
        rp += p.abs();
    }
    (dc / rc, dp / rp)
}

/// The example's command line (see the module docs).
pub fn main() {
    let name = crate::device_arg();
    let n = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let run = || -> Result<()> {
        let dev = Device::by_name(&name)?;
        let (s, x, t) = options(n);
        let start = std::time::Instant::now();
        let (call, put) = price(&dev, &s, &x, &t)?;
        let dt = start.elapsed().as_secs_f64();
        let (ec, ep) = l1_errors(&s, &x, &t, &call, &put);
        let ok = ec <= 1e-6 && ep <= 1e-6;
        println!(
            "blackscholes on {dev}: {n} options in {:.1} ms (with compilation); call[0] = {}, put[0] = {}; L1 error vs f64: call {ec:.2e}, put {ep:.2e} (tolerance 1e-6) {}",
            dt * 1e3, call[0], put[0], if ok { "ok" } else { "FAILED" }
        );
        if !ok {
            std::process::exit(1);
        }
        Ok(())
    };
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
