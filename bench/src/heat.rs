//! `weft-bench heat [--out FILE.md]` (issue 22): one explicit step of 2-D heat diffusion, a
//! 5-point stencil with clamped (insulated) edges on a 512² f32 grid, as a new user writes
//! it — in weft (both CPU backends), in numpy with `np.pad(mode="edge")` and slices, and as
//! a serial Rust loop with clamped indices. All three compute
//! `u + 0.1·(((up + down) + (left + right)) − 4·u)` in that order in f32, so their grids after
//! [`STEPS`] steps are compared bit for bit. Medians of 5 runs of [`STEPS`] steps after one
//! warm-up run; written to docs/performance-heat.md, which the full run appends to
//! docs/performance.md.

use crate::{fail, option_value, root, time_median};
use std::process::Command;
use weft::dsl::{index, InArray, Out, Program, Value1f, Value2i};
use weft::ir::Boundary;
use weft::{Array, Device};

/// Grid side.
const N: usize = 512;
/// Steps per timed run.
const STEPS: usize = 100;

fn ok<T>(r: weft::Result<T>) -> T {
    r.unwrap_or_else(|e| fail(e.to_string()))
}

/// The initial grid, row-major: a deterministic pattern in [0, 1).
fn initial() -> Vec<f32> {
    (0..N * N)
        .map(|k| ((k / N * 31 + k % N * 17) % 101) as f32 / 101.0)
        .collect()
}

/// One step as a weft program: `u` read as a clamped array.
fn step() -> Program {
    ok(Program::record_named("heat", || {
        let u = InArray::<2, Value1f>::named("u", Boundary::Clamp);
        let ij = index::<2>();
        let c = u.read(&ij);
        let up = u.read(&ij - Value2i::from_array([1, 0]));
        let down = u.read(&ij + Value2i::from_array([1, 0]));
        let left = u.read(&ij - Value2i::from_array([0, 1]));
        let right = u.read(&ij + Value2i::from_array([0, 1]));
        let lap = ((up + down) + (left + right)) - &c * 4.0f32;
        Out::named("u_next", c + lap * 0.1f32);
    }))
}

/// The serial Rust loop: `steps` steps from `u`, clamping every neighbour's index.
fn serial(u: &[f32], steps: usize) -> Vec<f32> {
    let (mut a, mut b) = (u.to_vec(), vec![0.0f32; N * N]);
    for _ in 0..steps {
        for i in 0..N {
            for j in 0..N {
                let at = |r: usize, c: usize| a[r * N + c];
                let c = at(i, j);
                let up = at(i.saturating_sub(1), j);
                let down = at((i + 1).min(N - 1), j);
                let left = at(i, j.saturating_sub(1));
                let right = at(i, (j + 1).min(N - 1));
                b[i * N + j] = c + (((up + down) + (left + right)) - c * 4.0) * 0.1;
            }
        }
        std::mem::swap(&mut a, &mut b);
    }
    a
}

/// numpy's version, run by python3: prints the median milliseconds of a run and writes the
/// grid after one run to `out` (raw little-endian f32).
const NUMPY: &str = r#"
import sys, time
import numpy as np
n, steps, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
k = np.arange(n * n)
u0 = (((k // n) * 31 + (k % n) * 17) % 101).astype(np.float32) / np.float32(101)
u0 = u0.reshape(n, n)
def run(u):
    for _ in range(steps):
        p = np.pad(u, 1, mode="edge")
        u = u + (((p[:-2, 1:-1] + p[2:, 1:-1]) + (p[1:-1, :-2] + p[1:-1, 2:])) - u * np.float32(4)) * np.float32(0.1)
    return u
r = run(u0)
r.astype("<f4").tofile(out)
ts = []
for _ in range(5):
    t = time.perf_counter(); run(u0); ts.append(time.perf_counter() - t)
print(sorted(ts)[2] * 1e3)
"#;

/// The `weft-bench heat` command.
pub fn main(args: &[String]) {
    let u0 = initial();
    let want = serial(&u0, STEPS);
    let p = step();
    let grid: Array<2, f32> = ok(Array::from_vec([N, N], u0.clone()));
    let mut rows: Vec<(String, f64, String)> = Vec::new();
    for (name, dev) in [
        ("weft cranelift", Device::cpu_cranelift()),
        ("weft llvm", Device::cpu_llvm()),
    ] {
        eprintln!("heat: {name} ...");
        let run = || -> Array<2, f32> {
            let mut u = grid.clone();
            for _ in 0..STEPS {
                u = ok(p.apply_shape_on(&dev, &[N, N], &u));
            }
            std::hint::black_box(ok(u.get(0)));
            u
        };
        let got = ok(run().to_vec());
        let same = got
            .iter()
            .zip(&want)
            .all(|(a, b)| a.to_bits() == b.to_bits());
        let t = time_median(5, || {
            run();
        });
        rows.push((
            name.into(),
            t,
            if same { "same bits" } else { "✗ differs" }.into(),
        ));
    }
    eprintln!("heat: serial Rust ...");
    let t = time_median(5, || {
        std::hint::black_box(serial(&u0, STEPS));
    });
    rows.push((
        "serial Rust, clamped indices".into(),
        t,
        "the reference".into(),
    ));
    eprintln!("heat: numpy ...");
    let out = root().join("target/bench/heat_numpy.f32");
    let _ = std::fs::create_dir_all(root().join("target/bench"));
    let py = Command::new("python3")
        .arg("-c")
        .arg(NUMPY)
        .arg(N.to_string())
        .arg(STEPS.to_string())
        .arg(&out)
        .output();
    match py {
        Ok(o) if o.status.success() => {
            let ms: f64 = String::from_utf8_lossy(&o.stdout)
                .trim()
                .parse()
                .unwrap_or(f64::NAN);
            let bytes = std::fs::read(&out).unwrap_or_default();
            let same = bytes.len() == N * N * 4
                && bytes
                    .chunks_exact(4)
                    .zip(&want)
                    .all(|(c, w)| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) == w.to_bits());
            rows.push((
                "numpy, np.pad + slices".into(),
                ms / 1e3,
                if same { "same bits" } else { "✗ differs" }.into(),
            ));
        }
        _ => eprintln!("heat: python3 with numpy is not available: its row stays out"),
    }
    let numpy = rows.iter().find(|r| r.0.starts_with("numpy")).map(|r| r.1);
    let mut md = String::new();
    md.push_str("## Heat diffusion step (issue 22)\n\n");
    md.push_str(&format!(
        "Written by `weft-bench heat`: {STEPS} explicit steps of a 5-point heat stencil with \
         clamped edges on a {N}² f32 grid, `u + 0.1·(((up + down) + (left + right)) − 4·u)`, \
         as a new user writes it in each system; medians of 5 runs after a warm-up run; \
         every result compared bit for bit with the serial Rust loop's. The issue asks for \
         weft ≥ 3× faster than numpy.\n\n"
    ));
    md.push_str("| version | per step | result | numpy ÷ this |\n|---|---:|---|---:|\n");
    for (name, t, check) in &rows {
        let ratio = numpy.map_or("".into(), |n| format!("{:.2}", n / t));
        md.push_str(&format!(
            "| {name} | {:.1} µs | {check} | {ratio} |\n",
            t / STEPS as f64 * 1e6
        ));
    }
    print!("{md}");
    let path = option_value(args, "--out")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| root().join("docs/performance-heat.md"));
    std::fs::write(&path, md).unwrap_or_else(|e| fail(format!("{}: {e}", path.display())));
    eprintln!("wrote {}", path.display());
}
