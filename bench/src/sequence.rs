//! `weft-bench sequence [--gpu] [--cuda-bin DIR] [--out FILE.md] [--cg-loop N]` (issue 23):
//! the host cost of a replayed launch sequence — 8 chained applies on 1,024 elements
//! replayed, per launch, next to the same applies one by one, and next to CUDA's own graph of
//! the same 8 kernels (`bench/cuda/graph.cu`, built as `DIR/graph_cuda`) — one CG iteration
//! on lund_a and Jacobi 1024² recorded and replayed next to the one-by-one versions, on
//! every device; medians. `--cg-loop N` solves lund_a recorded N times on the LLVM CPU
//! device (for profilers).

use crate::{fail, option_value, time_median as time};
use weft::dsl::{In, InArray, Out, Program, Value1f};
use weft::ir::Boundary;
use weft::{Array, Device, Sequence};
use weft_workloads::cg;

fn ok<T>(r: weft::Result<T>) -> T {
    r.unwrap_or_else(|e| fail(e.to_string()))
}

/// Elements of the small launches.
const SMALL: usize = 1024;
/// Launches per recorded sequence.
const LAUNCHES: usize = 8;

/// `y = s[0]·x + 1`: the scale is a one-element array (a device-side scalar).
fn axpb() -> Program {
    ok(Program::record_named("axpb_dev", || {
        let x = In::<Value1f>::named("x");
        let s = InArray::<1, Value1f>::named("s", Boundary::Clamp);
        Out::named("y", s.read(0) * x + 1.0f32);
    }))
}

/// Seconds per launch: 8 chained applies one by one, and replayed, then a read of one
/// element (both); and the host time of 16 chained replays alone (the read after them not
/// timed: on a GPU, the time to queue the graphs).
fn chain_rows(dev: &Device) -> (f64, f64, f64) {
    let p = axpb();
    let x: Array<1, f32> = ok(Array::from_fn([SMALL], |i| (i % 7) as f32));
    let s: Array<1, f32> = ok(Array::from_vec([1], vec![0.5]));
    let chain = |x: Array<1, f32>, s: &Array<1, f32>| -> weft::Result<Array<1, f32>> {
        let mut y = x;
        for _ in 0..LAUNCHES {
            y = p.apply_on(dev, (&y, s))?;
        }
        Ok(y)
    };
    let one_by_one = time(201, || {
        let y = ok(chain(x.clone(), &s));
        std::hint::black_box(ok(y.get(0)));
    }) / LAUNCHES as f64;
    let (seq, _) = ok(Sequence::record(&(x.clone(), s.clone()), |(x, s)| {
        Ok((chain(x, &s)?, s))
    }));
    let state = (x.clone(), s.clone());
    let replayed = time(201, || {
        let (y, _) = ok(seq.replay(&state));
        std::hint::black_box(ok(y.get(0)));
    }) / LAUNCHES as f64;
    let mut host = Vec::new();
    for _ in 0..21 {
        let t = std::time::Instant::now();
        let mut st = state.clone();
        for _ in 0..16 {
            st = ok(seq.replay(&st));
        }
        host.push(t.elapsed().as_secs_f64() / (16 * LAUNCHES) as f64);
        std::hint::black_box(ok(st.0.get(0)));
    }
    host.sort_by(f64::total_cmp);
    (one_by_one, replayed, host[host.len() / 2])
}

/// Seconds per CG iteration on lund_a, one by one and recorded ((100 − 10) / 90 iterations,
/// so setup and recording cancel); `None` without the matrix.
fn cg_rows(dev: &Device) -> Option<(f64, f64)> {
    let a = match cg::matrix("lund_a") {
        Ok(a) => a,
        Err(e) => {
            eprintln!("sequence: CG rows skipped: {e}");
            return None;
        }
    };
    let da = ok(cg::DeviceCsr::new(&a));
    let b: Array<1, f64> = ok(Array::from_vec([a.rows], vec![1.0; a.rows]));
    let run = |iters: usize, recorded: bool| {
        time(7, || {
            let s = if recorded {
                ok(cg::cg_recorded(dev, &da, &b, 0.0, iters, iters))
            } else {
                ok(cg::cg_arrays(dev, &da, &b, 0.0, iters))
            };
            assert_eq!(s.iterations, iters);
        })
    };
    let per = |recorded| (run(100, recorded) - run(10, recorded)) / 90.0;
    Some((per(false), per(true)))
}

/// Side and sweeps of the Jacobi rows.
const JACOBI: (usize, usize) = (1024, 100);

/// Seconds for [`JACOBI`]'s sweeps: without convergence checks (every sweep the program
/// specialised to the grid), with a check every 10 sweeps one by one, and the same recorded.
fn jacobi_rows(dev: &Device) -> (f64, f64, f64) {
    use weft_workloads::jacobi;
    let (n, sweeps) = JACOBI;
    let u0: Array<2, f32> = ok(Array::from_vec([n, n], jacobi::initial(n)));
    ok(u0.to_device(dev));
    let fast = ok(ok(jacobi::sweep()).keep(&["u_next"]));
    let unchecked = || {
        let mut u = u0.clone();
        for _ in 0..sweeps {
            u = ok(fast.apply_shape_on(dev, &[n, n], &u));
        }
        std::hint::black_box(ok(u.get(0)));
    };
    let checked = || {
        let (u, k, _) = ok(jacobi::jacobi_arrays(dev, &u0, 0.0, sweeps));
        assert_eq!(k, sweeps);
        std::hint::black_box(ok(u.get(0)));
    };
    let recorded = || {
        let (u, k, _) = ok(jacobi::jacobi_recorded(dev, &u0, 0.0, sweeps));
        assert_eq!(k, sweeps);
        std::hint::black_box(ok(u.get(0)));
    };
    // The three alternate in rounds (after one warm-up round), so that the machine's drift
    // reaches each alike; medians of 7 rounds.
    let runs: [&dyn Fn(); 3] = [&unchecked, &checked, &recorded];
    runs.iter().for_each(|f| f());
    let mut t = [Vec::new(), Vec::new(), Vec::new()];
    for _ in 0..7 {
        for (f, v) in runs.iter().zip(&mut t) {
            let t0 = std::time::Instant::now();
            f();
            v.push(t0.elapsed().as_secs_f64());
        }
    }
    let [unchecked, checked, recorded] = t.map(crate::median);
    (unchecked, checked, recorded)
}

/// CUDA's own host time per kernel of a replayed 8-kernel graph and of the same kernels
/// launched one by one (`DIR/graph_cuda`), if it ran.
fn cuda_graph_baseline(dir: &str) -> Option<(f64, f64)> {
    let exe = std::path::Path::new(dir).join("graph_cuda");
    let out = std::process::Command::new(&exe).output().ok()?;
    if !out.status.success() {
        eprintln!("sequence: {} failed", exe.display());
        return None;
    }
    let v: Vec<f64> = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|t| t.parse().ok())
        .collect();
    match v.as_slice() {
        [g, d] => Some((*g, *d)),
        _ => None,
    }
}

fn us(t: f64) -> String {
    format!("{:.2} µs", t * 1e6)
}

/// The command (see the module docs).
pub fn main(args: &[String]) {
    if let Some(n) = option_value(args, "--cg-loop") {
        let n: usize = n.parse().unwrap_or_else(|_| fail(format!("--cg-loop {n}")));
        let dev = Device::cpu_llvm();
        let a = ok(cg::matrix("lund_a"));
        let da = ok(cg::DeviceCsr::new(&a));
        let b: Array<1, f64> = ok(Array::from_vec([a.rows], vec![1.0; a.rows]));
        for _ in 0..n {
            std::hint::black_box(ok(cg::cg_recorded(&dev, &da, &b, 1e-10, 10_000, 1)));
        }
        return;
    }
    if let Some(n) = option_value(args, "--jacobi-loop") {
        // For profilers: Jacobi 1024² × 100 with checks, N times, on the LLVM CPU device,
        // recorded with `--recorded`.
        use weft_workloads::jacobi;
        let reps: usize = n
            .parse()
            .unwrap_or_else(|_| fail(format!("--jacobi-loop {n}")));
        let dev = Device::cpu_llvm();
        let (side, sweeps) = JACOBI;
        let u0: Array<2, f32> = ok(Array::from_vec([side, side], jacobi::initial(side)));
        let recorded = args.iter().any(|a| a == "--recorded");
        for _ in 0..reps {
            let r = if recorded {
                jacobi::jacobi_recorded(&dev, &u0, 0.0, sweeps)
            } else {
                jacobi::jacobi_arrays(&dev, &u0, 0.0, sweeps)
            };
            std::hint::black_box(ok(r));
        }
        return;
    }
    let mut devs = vec![Device::cpu_cranelift(), Device::cpu_llvm()];
    if args.iter().any(|a| a == "--gpu") {
        devs.push(ok(Device::cuda(0)));
    }
    let mut t = format!(
        "| per launch or iteration | {} |\n|---|{}\n",
        devs.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(" | "),
        "---|".repeat(devs.len())
    );
    let chains: Vec<(f64, f64, f64)> = devs
        .iter()
        .map(|d| {
            eprintln!("sequence: {d}: {LAUNCHES} chained applies ...");
            chain_rows(d)
        })
        .collect();
    let cgs: Vec<Option<(f64, f64)>> = devs
        .iter()
        .map(|d| {
            eprintln!("sequence: {d}: CG on lund_a ...");
            cg_rows(d)
        })
        .collect();
    let jacobis: Vec<(f64, f64, f64)> = devs
        .iter()
        .map(|d| {
            eprintln!("sequence: {d}: Jacobi ...");
            jacobi_rows(d)
        })
        .collect();
    let mut row = |what: &str, cells: Vec<String>| {
        t.push_str(&format!("| {what} | {} |\n", cells.join(" | ")));
    };
    row(
        &format!("{LAUNCHES} chained applies on {SMALL} f32 + read one, one by one (per launch)"),
        chains.iter().map(|c| us(c.0)).collect(),
    );
    row(
        "the same, recorded and replayed (per launch)",
        chains.iter().map(|c| us(c.1)).collect(),
    );
    row(
        "host time of 16 chained replays alone, no read (per launch)",
        chains.iter().map(|c| us(c.2)).collect(),
    );
    let cell = |c: &Option<(f64, f64)>, k: usize| {
        c.map_or("—".into(), |c| us(if k == 0 { c.0 } else { c.1 }))
    };
    row(
        "one CG iteration on lund_a (5 launches), one by one",
        cgs.iter().map(|c| cell(c, 0)).collect(),
    );
    row(
        "one CG iteration on lund_a, recorded and replayed",
        cgs.iter().map(|c| cell(c, 1)).collect(),
    );
    let (n, sweeps) = JACOBI;
    let ms = |t: f64| format!("{:.2} ms", t * 1e3);
    row(
        &format!("Jacobi {n}² × {sweeps} sweeps, no convergence checks"),
        jacobis.iter().map(|j| ms(j.0)).collect(),
    );
    row(
        "the same with a check (`max` of the change) every 10 sweeps, one by one",
        jacobis
            .iter()
            .map(|j| format!("{} ({:.2}×)", ms(j.1), j.1 / j.0))
            .collect(),
    );
    row(
        "the same, each check period recorded and replayed",
        jacobis
            .iter()
            .map(|j| format!("{} ({:.2}×)", ms(j.2), j.2 / j.0))
            .collect(),
    );
    if let Some((g, d)) = option_value(args, "--cuda-bin").and_then(|d| cuda_graph_baseline(d)) {
        t.push_str(&format!(
            "\nCUDA itself in the same run (`bench/cuda/graph.cu`): host time per kernel of 16 \
             chained launches of a captured graph of the 8 kernels, {}; of the same kernels \
             launched one by one, {}.\n",
            us(g),
            us(d)
        ));
    }
    let md = format!(
        "Host cost of recorded launch sequences, medians; {} on {}.\n\n{t}",
        rayon_threads(),
        crate::cpu_name()
    );
    print!("{md}");
    if let Some(p) = option_value(args, "--out") {
        std::fs::write(p, &md).unwrap_or_else(|e| fail(format!("{p}: {e}")));
    }
}

fn rayon_threads() -> String {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!("{n} threads")
}
