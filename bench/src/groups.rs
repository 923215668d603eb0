//! `weft-bench groups [--same-gpu] [--reps N]` (issue 27): MDH (4,096 atoms × 161³ ≈ 2^22
//! points) and Black-Scholes (10^8 options, inputs resident) on one GPU and on device groups
//! of 2 and 4 GPUs (as many as the host has; `--same-gpu`: GPU 0 twice, which checks the
//! split paths on one GPU but cannot be faster), and 50 iterations of CG on the 2048² Poisson
//! matrix (`cg_arrays`: the SpMV reads the whole direction vector, which every member gathers
//! from the others through NCCL, and two dot products per iteration). Each row is the median time of an apply
//! until every member has finished (one element read, then `Device::synchronize`), the speedup over one GPU in the
//! same run, and whether the result has one GPU's bits. Markdown on stdout.

use crate::{fail, option_value, time_median as time};
use weft::{Array, Device};
use weft_workloads::{blackscholes, cg, mdh};

fn ok<T>(r: weft::Result<T>) -> T {
    r.unwrap_or_else(|e| fail(e.to_string()))
}

/// MDH grid side: 161³ = 4,173,281 points.
const SIDE: usize = 161;
/// MDH atoms.
const ATOMS: usize = 4096;
/// Black-Scholes options.
const OPTIONS: usize = 100_000_000;

/// Entry point.
pub fn main(args: &[String]) {
    let same = args.iter().any(|a| a == "--same-gpu");
    let reps: usize = option_value(args, "--reps")
        .and_then(|v| v.parse().ok())
        .unwrap_or(7);
    let count = match weft_runtime::cuda_devices() {
        Ok(d) if !d.is_empty() => d.len(),
        Ok(_) => fail("weft-bench groups: no CUDA GPU".into()),
        Err(e) => fail(format!("weft-bench groups: {e}")),
    };
    let one = ok(Device::cuda(0));
    let mut devices: Vec<(String, Device)> = vec![("1 GPU".into(), one.clone())];
    if same {
        let twice = ok(Device::group(&[one.clone(), ok(Device::cuda(0))]));
        devices.push(("GPU 0 twice".into(), twice));
    }
    for k in [2usize, 4, 8] {
        if k <= count {
            let gpus: Vec<Device> = (0..k).map(|i| ok(Device::cuda(i))).collect();
            devices.push((format!("{k} GPUs"), ok(Device::group(&gpus))));
        }
    }
    println!("GPUs: {count} × {}", one.name());
    println!();
    println!("| workload | devices | median | speedup over 1 GPU | bits as 1 GPU |");
    println!("|---|---|---:|---:|---|");

    // MDH: compute-bound, inputs tiny.
    let atoms = mdh::atoms(ATOMS);
    let origin = mdh::origin(&atoms, SIDE);
    let p = ok(mdh::program());
    let arr = ok(Array::from_slice([ATOMS], &atoms));
    let mut base_t = 0.0;
    let mut base_bits: Vec<u32> = Vec::new();
    for (label, dev) in &devices {
        let run = || ok(dev.scope(|| mdh::mdh_array(&p, &arr, origin, SIDE)));
        // One element read runs a deferred launch; then every member has to finish.
        let t = time(reps, || {
            let out = run();
            ok(out.get(0));
            ok(dev.synchronize());
        });
        let bits: Vec<u32> = ok(run().to_vec()).iter().map(|x| x.to_bits()).collect();
        if base_bits.is_empty() {
            (base_t, base_bits) = (t, bits.clone());
        }
        println!(
            "| MDH {ATOMS} atoms × {SIDE}³ | {label} | {:.2} ms | {:.2}× | {} |",
            t * 1e3,
            base_t / t,
            if bits == base_bits { "yes" } else { "NO" }
        );
    }

    // Black-Scholes: bandwidth-bound; inputs uploaded by the warm-up run and kept.
    let (s, x, t) = blackscholes::options(OPTIONS);
    let p = ok(blackscholes::program());
    let (s, x, t) = (
        ok(Array::from_vec([OPTIONS], s)),
        ok(Array::from_vec([OPTIONS], x)),
        ok(Array::from_vec([OPTIONS], t)),
    );
    let mut base_t = 0.0;
    let mut base_sum = (0u32, 0u32);
    for (label, dev) in &devices {
        let run = || ok(dev.scope(|| blackscholes::price_arrays(&p, &s, &x, &t)));
        let tm = time(reps, || {
            let (call, put) = run();
            ok(call.get(0));
            ok(put.get(0));
            ok(dev.synchronize());
        });
        // Compared through two sums (reading 800 MB back per device would dominate).
        let (call, put) = run();
        let sums = dev.scope(|| {
            (
                ok(weft::sum(&call)).to_bits(),
                ok(weft::sum(&put)).to_bits(),
            )
        });
        if base_t == 0.0 {
            (base_t, base_sum) = (tm, sums);
        }
        println!(
            "| Black-Scholes 10^8 options, resident | {label} | {:.2} ms | {:.2}× | {} |",
            tm * 1e3,
            base_t / tm,
            if sums == base_sum { "yes (sums)" } else { "NO" }
        );
    }

    // CG: 50 iterations (the tolerance is never reached), the solution left split.
    let a = ok(cg::matrix("poisson:2048"));
    let n = a.rows;
    let da = ok(cg::DeviceCsr::new(&a));
    let b = ok(Array::from_fn([n], |i| 1.0 + (i % 7) as f64 * 0.125));
    let mut base_t = 0.0;
    let mut base_bits = 0u64;
    for (label, dev) in &devices {
        let run = || ok(cg::cg_arrays(dev, &da, &b, 1e-300, 50));
        let tm = time(3, || {
            let s = run();
            ok(s.x.get(0));
            ok(dev.synchronize());
        });
        let s = run();
        let bits = ok(dev.scope(|| weft::sum(&s.x))).to_bits();
        if base_t == 0.0 {
            (base_t, base_bits) = (tm, bits);
        }
        println!(
            "| CG Poisson 2048², 50 iterations | {label} | {:.2} ms | {:.2}× | {} |",
            tm * 1e3,
            base_t / tm,
            if bits == base_bits && s.iterations == 50 {
                "yes (sum of x)"
            } else {
                "NO"
            }
        );
    }
}
