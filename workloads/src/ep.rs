//! EP, the NAS Parallel Benchmarks' embarrassingly parallel kernel (NPB 3.3): 2^M Gaussian
//! pairs by the polar method from the NAS generator x ← 5^13·x mod 2^46 (exact in u64),
//! tallied by annulus; class S (M = 24) must reproduce the published sums
//! (docs/workloads.md). Each element takes `per` consecutive pairs and jumps its seed ahead
//! by square-and-multiply; the per-element sums are added with `weft::sum_array` (left on
//! the device until all twelve are queued).
//!
//! `cargo run --release -p weft-workloads --example ep [DEVICE] [M] [PAIRS_PER_ELEMENT]`

use weft::dsl::{for_, index, select, while_, Out, Param, Program, Value};
use weft::{sum_array, Array, Device, Result};

/// NAS's multiplier 5^13.
pub const A: u64 = 1_220_703_125;
/// NAS's seed.
pub const SEED: u64 = 271_828_183;
/// 2^46 − 1: the generator works modulo 2^46.
pub const MASK: u64 = (1 << 46) - 1;
/// NPB 3.3's verification sums for class S (M = 24): (sx, sy), as published.
#[allow(clippy::excessive_precision)]
pub const CLASS_S: (f64, f64) = (-3.247834652034740e3, -6.958407078382297e3);

/// NPB 3.3's verification sums for class A (M = 28): (sx, sy), as published.
#[allow(clippy::excessive_precision)]
pub const CLASS_A: (f64, f64) = (-4.295875165629892e3, -1.580732573678431e4);

/// Counts per annulus (l = 0 … 9).
pub const NQ: usize = 10;

type U64 = Value<u64, 1>;
type F64 = Value<f64, 1>;
type I32 = Value<i32, 1>;

/// The program: uniform `per` (pairs per element) → sx, sy, q0 … q9 of this element's pairs.
pub fn program() -> Result<Program> {
    Program::record_named("ep", || {
        let per = Param::uniform::<Value<i32, 1>>("per");
        let first = index::<1>().cast::<u64>() * per.cast::<u64>();
        // t = s · a^(2·first) mod 2^46
        let t = U64::new(SEED);
        let b = U64::new(A);
        let e = &first + &first;
        while_(
            || e.ne(0u64),
            || {
                let odd = (&e & 1u64).ne(0u64);
                t.assign(select(odd, (&t * &b) & MASK, &t));
                b.assign((&b * &b) & MASK);
                e.assign(&e >> 1u64);
            },
        );
        let (sx, sy) = (F64::new(0.0), F64::new(0.0));
        let q: Vec<I32> = (0..NQ).map(|_| I32::new(0)).collect();
        let r46 = 1.0f64 / (1u64 << 46) as f64;
        for_(0, &per, |_| {
            let t1 = (&t * A) & MASK;
            let t2 = (&t1 * A) & MASK;
            t.assign(&t2);
            let x1 = t1.cast::<f64>() * r46 * 2.0f64 - 1.0f64;
            let x2 = t2.cast::<f64>() * r46 * 2.0f64 - 1.0f64;
            let tt = &x1 * &x1 + &x2 * &x2;
            let accept = tt.le(1.0f64);
            let f = ((tt.log() * -2.0f64) / &tt).sqrt();
            let (gx, gy) = (&x1 * &f, &x2 * &f);
            sx.assign(select(&accept, &sx + &gx, &sx));
            sy.assign(select(&accept, &sy + &gy, &sy));
            let l = gx.abs().max(gy.abs()).cast::<i32>();
            for (k, qk) in q.iter().enumerate() {
                let hit = accept.clone() & l.eq(k as i32);
                qk.assign(qk + hit.cast::<i32>());
            }
        });
        Out::named("sx", sx);
        Out::named("sy", sy);
        for (k, qk) in q.into_iter().enumerate() {
            Out::named(&format!("q{k}"), qk);
        }
    })
}

/// The tallies of 2^m pairs: (sx, sy, counts per annulus), with `per` pairs per element
/// (a power of two ≤ 2^m).
pub fn ep(dev: &Device, m: u32, per: usize) -> Result<(f64, f64, [u64; NQ])> {
    let p = program()?;
    let items = (1usize << m) / per;
    dev.scope(|| {
        let outs: weft::Bundle = p.apply_shape(&[items], per as i32)?;
        // All twelve sums are queued before the first is read: one wait, not twelve.
        let sx = sum_array(&outs.get::<1, f64>(0)?)?;
        let sy = sum_array(&outs.get::<1, f64>(1)?)?;
        let qs = (0..NQ)
            .map(|k| sum_array(&outs.get::<1, i32>(2 + k)?))
            .collect::<Result<Vec<Array<1, i32>>>>()?;
        let first = |a: &Array<1, f64>| -> Result<f64> { Ok(a.to_vec()?[0]) };
        let (sx, sy) = (first(&sx)?, first(&sy)?);
        let mut q = [0u64; NQ];
        for (qk, a) in q.iter_mut().zip(&qs) {
            *qk = a.to_vec()?[0] as u64;
        }
        Ok((sx, sy, q))
    })
}

/// Whether (sx, sy) equal NPB 3.3's class S values within the benchmark's relative 1e-8.
pub fn verify_class_s(sx: f64, sy: f64) -> bool {
    verify(24, sx, sy) == Some(true)
}

/// Whether (sx, sy) of 2^m pairs equal NPB 3.3's published values (relative 1e-8): `None`
/// when NPB publishes none for `m` here (classes S, M = 24, and A, M = 28).
pub fn verify(m: u32, sx: f64, sy: f64) -> Option<bool> {
    let (vx, vy) = match m {
        24 => CLASS_S,
        28 => CLASS_A,
        _ => return None,
    };
    Some(((sx - vx) / vx).abs() <= 1e-8 && ((sy - vy) / vy).abs() <= 1e-8)
}

/// The example's command line (see the module docs).
pub fn main() {
    let arg = |i: usize| std::env::args().nth(i);
    let name = crate::device_arg();
    let m: u32 = arg(2).and_then(|s| s.parse().ok()).unwrap_or(24);
    let per: usize = arg(3).and_then(|s| s.parse().ok()).unwrap_or(4096);
    let run = || -> Result<()> {
        let dev = Device::by_name(&name)?;
        let t = std::time::Instant::now();
        let (sx, sy, q) = ep(&dev, m, per)?;
        let dt = t.elapsed().as_secs_f64();
        let pairs: u64 = q.iter().sum();
        println!(
            "ep on {dev}: 2^{m} pairs in {:.1} ms (with compilation); sx = {sx:.15e}, sy = {sy:.15e}, {pairs} Gaussian pairs, q = {q:?}",
            dt * 1e3
        );
        if let Some(ok) = verify(m, sx, sy) {
            println!(
                "NPB 3.3 verification (relative 1e-8): {}",
                if ok { "ok" } else { "FAILED" }
            );
            if !ok {
                std::process::exit(1);
            }
        }
        Ok(())
    };
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
