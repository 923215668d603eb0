//! Reduction benchmark rows (issue 6): `weft::sum` over 2^26 f32 on the CPU devices against
//! the STREAM triad bandwidth measured in the same run, and on a GPU against the
//! device-to-device copy bandwidth.

use crate::{fail, gcc, median, root, run_secs, Row};
use std::process::Command;
use std::time::Instant;
use weft::{sum, Array, Device};

/// 2^26 f32 values (256 MiB) with an exactly known sum in f32 (small integers).
fn input() -> (Array<1, f32>, usize) {
    let n = 1usize << 26;
    let a = Array::from_fn([n], |i| (i % 4) as f32).unwrap_or_else(|e| fail(e.to_string()));
    (a, n)
}

/// Times `sum(&a)` on `dev`: one warm-up, then `reps` runs; returns the median seconds and
/// checks the result.
fn time_sum(dev: &Device, a: &Array<1, f32>, n: usize, reps: usize) -> f64 {
    let want = (n / 4 * 6) as f32;
    let got = dev.scope(|| sum(a)).unwrap_or_else(|e| fail(e.to_string()));
    if got != want {
        fail(format!("sum on {dev}: {got}, expected {want}"));
    }
    median(
        (0..reps)
            .map(|_| {
                let t = Instant::now();
                let s = dev.scope(|| sum(a)).unwrap_or_else(|e| fail(e.to_string()));
                let dt = t.elapsed().as_secs_f64();
                std::hint::black_box(s);
                dt
            })
            .collect(),
    )
}

/// The CPU rows: sum on Cranelift and LLVM next to the C triad, alternating over 5 rounds.
pub fn cpu_rows(rows: &mut Vec<Row>) {
    eprintln!("reduce: sum of 2^26 f32 ...");
    let (a, n) = input();
    let triad = root().join("target/bench/triad");
    if let Some(dir) = triad.parent() {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| fail(format!("{}: {e}", dir.display())));
    }
    gcc("triad.c", &triad, &[]);
    let devs = [Device::cpu_cranelift(), Device::cpu_llvm()];
    let mut w: Vec<Vec<f64>> = vec![Vec::new(); devs.len()];
    let mut c = Vec::new();
    for _ in 0..5 {
        for (d, wr) in devs.iter().zip(&mut w) {
            wr.push(time_sum(d, &a, n, 5));
        }
        c.push(run_secs(Command::new(&triad).arg(n.to_string()).arg("10")).unwrap_or(f64::NAN));
    }
    let ct = median(c);
    let triad_bw = (3 * n * 4) as f64 / ct / 1e9;
    for (d, wr) in devs.iter().zip(w) {
        let t = median(wr);
        let bw = (n * 4) as f64 / t / 1e9;
        rows.push(Row {
            workload: format!("sum of 2^26 f32 on {d} (GB/s read)"),
            weft: format!("{bw:.1} GB/s ({:.2} ms)", t * 1e3),
            baseline: format!(
                "C triad gcc -O3 -march=native -fopenmp: {triad_bw:.1} GB/s ({:.2} ms)",
                ct * 1e3
            ),
            ratio: format!("{:.2}× of triad bandwidth", bw / triad_bw),
            target: "≥ 0.9×".into(),
        });
    }
}

/// The GPU row: sum on CUDA device 0 next to `copy_bw` (GB/s, read + written) measured by
/// the caller for the same element count.
pub fn gpu_row(rows: &mut Vec<Row>, copy_bw: f64, copy_ms: f64) {
    eprintln!("reduce on the GPU: sum of 2^26 f32 ...");
    let dev = Device::cuda(0).unwrap_or_else(|e| fail(e.to_string()));
    let (a, n) = input();
    a.to_device(&dev).unwrap_or_else(|e| fail(e.to_string()));
    let t = median((0..5).map(|_| time_sum(&dev, &a, n, 10)).collect());
    let bw = (n * 4) as f64 / t / 1e9;
    rows.push(Row {
        workload: format!("sum of 2^26 f32 on {dev} (GB/s read, whole call)"),
        weft: format!("{bw:.0} GB/s ({:.3} ms)", t * 1e3),
        baseline: format!("cudaMemcpy device→device: {copy_bw:.0} GB/s ({copy_ms:.3} ms)"),
        ratio: format!("{:.2}× of copy bandwidth", bw / copy_bw),
        target: "≥ 0.9×".into(),
    });
}
