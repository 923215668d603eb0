//! `weft-bench workloads`: the six workloads of docs/workloads.md on every available weft
//! device (Cranelift, LLVM, CUDA) next to the baselines users would pick (gcc with and
//! without -ffast-math and OpenMP, numpy, numba, hand CUDA), side by side in one run;
//! every result checked against its tolerance; a markdown table of medians and ratios and an
//! SVG chart, spliced into docs/performance.md.

#![allow(dead_code)]

use weft_workloads::{blackscholes, cg, coins, ep, jacobi, mdh};

use crate::{fail, median, root};
use indicatif::{ProgressBar, ProgressStyle};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;
use weft::{Array, Device};
use weft_runtime::Backend;
use weft_workloads::data::Csr;

/// Problem sizes of one run.
#[derive(Clone, Copy)]
struct Sizes {
    mdh_atoms: usize,
    mdh_side: usize,
    jacobi_n: usize,
    jacobi_sweeps: usize,
    spmv_m: usize,
    cg_m: usize,
    cg_iters: usize,
    ep_m: u32,
    ep_per: usize,
    bs_n: usize,
    reps: usize,
}

/// This machine (CPU devices and baselines).
const CPU: Sizes = Sizes {
    mdh_atoms: 4096,
    mdh_side: 32,
    jacobi_n: 1024,
    jacobi_sweeps: 100,
    spmv_m: 1024,
    cg_m: 256,
    cg_iters: 100,
    ep_m: 24,
    ep_per: 4096,
    bs_n: 1_000_000,
    reps: 5,
};

/// The GPU machine: larger grids and more repetitions.
const GPU: Sizes = Sizes {
    mdh_atoms: 4096,
    mdh_side: 128,
    jacobi_n: 4096,
    jacobi_sweeps: 200,
    spmv_m: 2048,
    cg_m: 1024,
    cg_iters: 100,
    ep_m: 28,
    ep_per: 128,
    bs_n: 1_000_000,
    reps: 10,
};

/// A smoke run (`--quick`): tiny sizes, two repetitions.
const QUICK: Sizes = Sizes {
    mdh_atoms: 256,
    mdh_side: 16,
    jacobi_n: 64,
    jacobi_sweeps: 20,
    spmv_m: 64,
    cg_m: 32,
    cg_iters: 20,
    ep_m: 20,
    ep_per: 256,
    bs_n: 10_000,
    reps: 2,
};

/// One measurement: median seconds and whether the result met its tolerance.
#[derive(Clone)]
struct Cell {
    secs: f64,
    ok: bool,
}

/// One workload's row: its title, a unit of work for throughput, and a cell per
/// implementation.
struct Row {
    title: String,
    cells: BTreeMap<&'static str, Cell>,
}

/// The implementations, in column order.
const IMPLS: [&str; 9] = [
    "weft cranelift",
    "weft llvm",
    "weft cuda",
    "gcc -O3",
    "gcc -O3 -ffast-math",
    "numpy",
    "numba",
    "CUDA nvcc -O3",
    "CUDA --use_fast_math",
];

/// Builds a baseline's command: (workload, its directory, repetitions, arguments).
type MakeCommand = Box<dyn Fn(&str, &Path, usize, &[String]) -> Command>;
/// Measures weft on a device: (median seconds, within tolerance).
type Measure = Box<dyn FnMut(&Device, usize) -> (f64, bool)>;
/// Checks a baseline's results: (directory, output suffix, stdout lines after the time).
type Check = Box<dyn Fn(&Path, &str, &[String]) -> bool>;

/// A baseline program: its column, how to run it, and its output suffix.
struct Baseline {
    column: &'static str,
    suffix: &'static str,
    run: MakeCommand,
}

fn baselines(dir: &Path, cuda_bin: Option<&Path>) -> Vec<Baseline> {
    let mut v = Vec::new();
    let has_gcc = Command::new("gcc")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_gcc {
        eprintln!("workloads: no gcc: the C columns stay empty");
    }
    for (column, suffix, fast) in [
        ("gcc -O3", "c", false),
        ("gcc -O3 -ffast-math", "cfast", true),
    ]
    .into_iter()
    .filter(|_| has_gcc)
    {
        let dir = dir.to_path_buf();
        v.push(Baseline {
            column,
            suffix,
            run: Box::new(move |w, d, reps, args| {
                let exe = dir.join(format!("{w}_{suffix}"));
                if !exe.exists() {
                    let mut extra = vec![];
                    if fast {
                        extra.push("-ffast-math");
                    }
                    crate::gcc(&format!("{w}.c"), &exe, &extra);
                }
                let mut c = Command::new(exe);
                if w == "mdh" {
                    // bench/c/mdh.c predates the protocol: ATOMS.bin NA NK NJ NI OX OY OZ
                    // SPACING REPS OUT.bin.
                    c.arg(d.join("mdh_atoms.bin"))
                        .args(args)
                        .arg(reps.to_string())
                        .arg(d.join(format!("mdh_pot.{suffix}.bin")));
                } else {
                    c.arg(d).arg(reps.to_string()).arg(suffix).args(args);
                }
                c
            }),
        });
    }
    let py_has = |m: &str| {
        Command::new("python3")
            .args(["-c", &format!("import {m}")])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    for (column, module) in [("numpy", "numpy"), ("numba", "numba")] {
        if !py_has(module) {
            eprintln!("workloads: python3 has no {module}: its column stays empty");
            continue;
        }
        v.push(Baseline {
            column,
            suffix: module,
            run: Box::new(move |w, d, reps, args| {
                let mut c = Command::new("python3");
                c.arg(root().join("bench/py/workloads.py"))
                    .arg(module)
                    .arg(w)
                    .arg(d)
                    .arg(reps.to_string())
                    .args(args);
                c
            }),
        });
    }
    if let Some(bin) = cuda_bin {
        for (column, suffix, exe) in [
            ("CUDA nvcc -O3", Backend::Cuda.name(), "workloads_cuda"),
            ("CUDA --use_fast_math", "cudafast", "workloads_cuda_fast"),
        ] {
            let exe = bin.join(exe);
            if !exe.exists() {
                eprintln!(
                    "workloads: {} missing: its column stays empty",
                    exe.display()
                );
                continue;
            }
            v.push(Baseline {
                column,
                suffix,
                run: Box::new(move |w, d, reps, args| {
                    let mut c = Command::new(&exe);
                    c.arg(w).arg(d).arg(reps.to_string()).arg(suffix).args(args);
                    c
                }),
            });
        }
    }
    v
}

/// Runs a baseline: (median seconds, the lines after the first), or None when it failed
/// or is unavailable (said on stderr).
fn run_baseline(mut cmd: Command) -> Option<(f64, Vec<String>)> {
    let out = cmd.output().ok()?;
    if !out.status.success() {
        eprintln!(
            "  ({:?} failed: {})",
            cmd.get_program(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = text.lines().map(str::to_string);
    let secs = lines.next()?.trim().parse().ok()?;
    Some((secs, lines.collect()))
}

/// Median of `reps` timed calls of `f` after one untimed warm-up call (compilation, uploads).
/// Black-Scholes calls per timed stream (the weft row's time is the stream's ÷ this).
const BS_STREAM: usize = 10;

fn time_weft<R>(reps: usize, mut f: impl FnMut() -> weft::Result<R>) -> (f64, R) {
    let mut last = f().unwrap_or_else(|e| fail(format!("weft: {e}")));
    let mut t = Vec::new();
    for _ in 0..reps {
        let s = Instant::now();
        last = f().unwrap_or_else(|e| fail(format!("weft: {e}")));
        t.push(s.elapsed().as_secs_f64());
    }
    (median(t), last)
}

fn write_bin(path: &Path, bytes: Vec<u8>) {
    std::fs::write(path, bytes).unwrap_or_else(|e| fail(format!("{}: {e}", path.display())));
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn f64_bytes(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn i32_bytes(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn read_f32(path: &Path) -> Vec<f32> {
    std::fs::read(path)
        .unwrap_or_default()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

fn read_f64(path: &Path) -> Vec<f64> {
    std::fs::read(path)
        .unwrap_or_default()
        .chunks_exact(8)
        .map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes")))
        .collect()
}

fn write_csr(d: &Path, a: &Csr) {
    write_bin(&d.join("csr_rowptr.bin"), i32_bytes(&a.rowptr));
    write_bin(&d.join("csr_col.bin"), i32_bytes(&a.col));
    write_bin(&d.join("csr_val.bin"), f64_bytes(&a.val));
}

/// One workload: its name for the baselines, its title, its inputs written into a
/// directory, the baseline arguments, the weft measurement on a device, and the check of a
/// baseline's results.
struct Job {
    name: &'static str,
    title: String,
    args: Vec<String>,
    weft: Measure,
    check: Check,
}

fn jobs(s: Sizes, dir: &Path) -> Vec<Job> {
    let mut jobs = Vec::new();
    let sub = |n: &str| {
        let d = dir.join(n);
        std::fs::create_dir_all(&d).unwrap_or_else(|e| fail(format!("{}: {e}", d.display())));
        d
    };

    // ---- MDH
    let atoms = mdh::atoms(s.mdh_atoms);
    let side = s.mdh_side;
    let o = mdh::origin(&atoms, side);
    let d = sub("mdh");
    write_bin(&d.join("mdh_atoms.bin"), f32_bytes(&atoms.concat()));
    let stride = (side * side * side / 2000).max(1);
    let (atoms2, atoms3) = (atoms.clone(), atoms.clone());
    jobs.push(Job {
        name: "mdh",
        title: format!(
            "MDH, {} atoms of mache.pqr × {side}³ points (f32)",
            atoms.len()
        ),
        args: [atoms.len(), side, side, side]
            .iter()
            .map(|x| x.to_string())
            .chain(o.iter().map(|x| format!("{x:.9}")))
            .chain([format!("{}", mdh::SPACING)])
            .collect(),
        weft: Box::new(move |dev, reps| {
            let p = mdh::program().unwrap_or_else(|e| fail(e.to_string()));
            let arr =
                Array::from_slice([atoms2.len()], &atoms2).unwrap_or_else(|e| fail(e.to_string()));
            let (t, out) = dev.scope(|| {
                time_weft(reps, || {
                    let a = mdh::mdh_array(&p, &arr, o, side)?;
                    a.get(0)?;
                    Ok(a)
                })
            });
            let pot = out.to_vec().unwrap_or_else(|e| fail(e.to_string()));
            (t, mdh::check(&atoms2, side, &pot, stride) <= 1.0)
        }),
        check: Box::new(move |d, sfx, _| {
            let pot = read_f32(&d.join(format!("mdh_pot.{sfx}.bin")));
            pot.len() == side * side * side && mdh::check(&atoms3, side, &pot, stride) <= 1.0
        }),
    });

    // ---- Jacobi
    let (n, sweeps) = (s.jacobi_n, s.jacobi_sweeps);
    let d = sub("jacobi");
    write_bin(&d.join("jacobi_u0.bin"), f32_bytes(&jacobi::initial(n)));
    let reference = std::rc::Rc::new(jacobi::reference(n, sweeps));
    // One by one, and with each check period recorded and replayed (issue 23).
    type Solve = fn(
        &weft::Device,
        &weft::Array<2, f32>,
        f32,
        usize,
    ) -> weft::Result<(weft::Array<2, f32>, usize, f32)>;
    let solves: [(&str, Solve); 2] = [
        ("", jacobi::jacobi_arrays),
        (", recorded sequence", jacobi::jacobi_recorded),
    ];
    for (suffix, solve) in solves {
        let (r1, r2) = (reference.clone(), reference.clone());
        jobs.push(Job {
            name: "jacobi",
            title: format!("Jacobi, {n}² grid, {sweeps} sweeps (f32){suffix}"),
            args: vec![n.to_string(), sweeps.to_string(), "0".into()],
            weft: Box::new(move |dev, reps| {
                // As the CUDA baseline: the initial grid on the device before, the result
                // read back after the timed sweeps.
                let u0 = weft::Array::from_vec([n, n], jacobi::initial(n))
                    .unwrap_or_else(|e| fail(e.to_string()));
                u0.to_device(dev).unwrap_or_else(|e| fail(e.to_string()));
                let (t, (u, k, _)) = time_weft(reps, || solve(dev, &u0, 0.0, sweeps));
                let u = u.to_vec().unwrap_or_else(|e| fail(e.to_string()));
                (t, k == sweeps && jacobi::max_error(&u, &r1) <= 1e-4)
            }),
            check: Box::new(move |d, sfx, _| {
                let u = read_f32(&d.join(format!("jacobi_u.{sfx}.bin")));
                u.len() == n * n && jacobi::max_error(&u, &r2) <= 1e-4
            }),
        });
    }

    // ---- SpMV
    let a = Csr::poisson2d(s.spmv_m);
    let x: Vec<f64> = (0..a.cols).map(|i| 1.0 + (i % 7) as f64 * 0.125).collect();
    let d = sub("spmv");
    write_csr(&d, &a);
    write_bin(&d.join("spmv_x.bin"), f64_bytes(&x));
    let y64 = std::rc::Rc::new(a.mul(&x));
    let y2 = y64.clone();
    let close = |y: &[f64], want: &[f64]| {
        let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        y.len() == want.len()
            && y.iter()
                .zip(want)
                .all(|(u, v)| (u - v).abs() <= 1e-12 * scale)
    };
    let (rows, nnz) = (a.rows, a.nnz());
    jobs.push(Job {
        name: "spmv",
        title: format!(
            "SpMV CSR, Poisson {0}×{0} grid: {rows} rows, {nnz} nonzeros (f64)",
            s.spmv_m
        ),
        args: vec![rows.to_string(), nnz.to_string()],
        weft: Box::new(move |dev, reps| {
            let p = cg::spmv_program().unwrap_or_else(|e| fail(e.to_string()));
            let da = cg::DeviceCsr::new(&a).unwrap_or_else(|e| fail(e.to_string()));
            let xa = Array::from_slice([x.len()], &x).unwrap_or_else(|e| fail(e.to_string()));
            let (t, y) = dev.scope(|| {
                time_weft(reps, || {
                    let y: Array<1, f64> =
                        p.apply_shape(&[rows], (da.rowptr(), da.col(), da.val(), &xa))?;
                    y.get(0)?;
                    Ok(y)
                })
            });
            (t, close(&y.to_vec().unwrap_or_default(), &y64))
        }),
        check: Box::new(move |d, sfx, _| {
            close(&read_f64(&d.join(format!("spmv_y.{sfx}.bin"))), &y2)
        }),
    });

    // ---- CG on Poisson (fixed iterations) and on lund_a (to tolerance)
    for (label, a, tol, maxit) in [
        (
            format!(
                "CG, Poisson {0}×{0}: {1} rows, {2} iterations (f64)",
                s.cg_m,
                s.cg_m * s.cg_m,
                s.cg_iters
            ),
            Csr::poisson2d(s.cg_m),
            0.0,
            s.cg_iters,
        ),
        (
            "CG, lund_a.mtx (147 rows, 2,449 nonzeros) to ‖r‖/‖b‖ < 1e-10 (f64)".to_string(),
            weft_workloads::data::read_matrix_market(
                &weft_workloads::data::cached("lund_a.mtx").unwrap_or_else(|e| fail(e.to_string())),
            )
            .unwrap_or_else(|e| fail(e.to_string())),
            1e-10,
            10_000,
        ),
    ] {
        let b = a.mul(&vec![1.0; a.cols]);
        let d = sub(if tol > 0.0 { "cg_lund" } else { "cg_poisson" });
        write_csr(&d, &a);
        write_bin(&d.join("cg_b.bin"), f64_bytes(&b));
        let want = std::rc::Rc::new(cg::reference(&a, &b, tol, maxit));
        let a = std::rc::Rc::new(a);
        let b = std::rc::Rc::new(b);
        let ok = {
            let (a, b, want) = (a.clone(), b.clone(), want.clone());
            move |x: &[f64]| {
                if x.len() != a.rows {
                    return false;
                }
                if tol > 0.0 {
                    cg::true_residual(&a, x, &b) <= 1e-9
                } else {
                    let scale = want.x.iter().fold(0.0f64, |m, v| m.max(v.abs()));
                    x.iter()
                        .zip(&want.x)
                        .all(|(u, v)| (u - v).abs() <= 1e-6 * scale)
                }
            }
        };
        let ok = std::rc::Rc::new(ok);
        // One by one, and with one iteration recorded and replayed (issue 23): ‖r‖ read
        // every iteration to a tolerance (the same iterations and bits), every 10 for a
        // fixed count.
        let every = if tol > 0.0 { 1 } else { 10 };
        for (suffix, recorded) in [("", false), (", recorded sequence", true)] {
            let (ok1, ok2) = (ok.clone(), ok.clone());
            let (a2, b2) = (a.clone(), b.clone());
            jobs.push(Job {
                name: "cg",
                title: format!("{label}{suffix}"),
                args: vec![
                    a.rows.to_string(),
                    a.nnz().to_string(),
                    maxit.to_string(),
                    format!("{tol:e}"),
                ],
                weft: Box::new(move |dev, reps| {
                    // As the CUDA baseline: b on the device before, x read back after the
                    // timed solves.
                    let da = cg::DeviceCsr::new(&a2).unwrap_or_else(|e| fail(e.to_string()));
                    let b = weft::Array::from_slice([b2.len()], &b2[..])
                        .unwrap_or_else(|e| fail(e.to_string()));
                    b.to_device(dev).unwrap_or_else(|e| fail(e.to_string()));
                    let (t, sol) = time_weft(reps, || {
                        if recorded {
                            cg::cg_recorded(dev, &da, &b, tol, maxit, every)
                        } else {
                            cg::cg_arrays(dev, &da, &b, tol, maxit)
                        }
                    });
                    (
                        t,
                        ok1(&sol.x.to_vec().unwrap_or_else(|e| fail(e.to_string()))),
                    )
                }),
                check: Box::new(move |d, sfx, _| {
                    ok2(&read_f64(&d.join(format!("cg_x.{sfx}.bin"))))
                }),
            });
        }
    }

    // ---- EP
    let (m, per) = (s.ep_m, s.ep_per);
    sub("ep");
    let ep_ok =
        move |sx: f64, sy: f64| ep::verify(m, sx, sy).unwrap_or(sx.is_finite() && sy.is_finite());
    let class = match m {
        24 => " (NPB class S)",
        28 => " (NPB class A)",
        _ => "",
    };
    jobs.push(Job {
        name: "ep",
        title: format!("EP, 2^{m} pairs{class} (f64, u64 generator)"),
        args: vec![m.to_string()],
        weft: Box::new(move |dev, reps| {
            let (t, (sx, sy, _)) = time_weft(reps, || ep::ep(dev, m, per));
            (t, ep_ok(sx, sy))
        }),
        check: Box::new(move |_, _, lines| {
            let f: Vec<&str> = lines
                .first()
                .map(|l| l.split_whitespace().collect())
                .unwrap_or_default();
            match (
                f.get(1).and_then(|v| v.parse().ok()),
                f.get(3).and_then(|v| v.parse().ok()),
            ) {
                (Some(sx), Some(sy)) => ep_ok(sx, sy),
                _ => false,
            }
        }),
    });

    // ---- Coins
    let (h, w, img) = coins::load().unwrap_or_else(|e| fail(e.to_string()));
    let d = sub("coins");
    write_bin(&d.join("coins_img.bin"), f32_bytes(&img));
    let prm = coins::COINS;
    jobs.push(Job {
        name: "coins",
        title: format!(
            "coin finder, coins.png {w}×{h}, radii {}…{}, ≤ {} peaks (f32)",
            prm.rmin, prm.rmax, prm.npeaks
        ),
        args: [h, w]
            .iter()
            .map(|x| x.to_string())
            .chain([
                prm.rmin.to_string(),
                prm.rmax.to_string(),
                prm.npeaks.to_string(),
                format!("{}", prm.thresh),
            ])
            .collect(),
        weft: Box::new(move |dev, reps| {
            let finder = coins::Finder::new(prm).unwrap_or_else(|e| fail(e.to_string()));
            let arr = Array::from_slice([h, w], &img).unwrap_or_else(|e| fail(e.to_string()));
            let (t, found) = dev.scope(|| time_weft(reps, || finder.run(&arr)));
            let (hits, false_pos) = coins::score(&found);
            (t, hits >= 22 && false_pos == 0)
        }),
        check: Box::new(move |_, _, lines| {
            let found: Vec<coins::Coin> = lines
                .iter()
                .skip(1)
                .filter_map(|l| {
                    let v: Vec<f64> = l
                        .split_whitespace()
                        .filter_map(|x| x.parse().ok())
                        .collect();
                    (v.len() >= 3).then(|| coins::Coin {
                        y: v[0] as usize,
                        x: v[1] as usize,
                        r: v[2] as i32,
                        score: 0.0,
                    })
                })
                .collect();
            let (hits, false_pos) = coins::score(&found);
            hits >= 22 && false_pos == 0
        }),
    });

    // ---- Black-Scholes
    let n = s.bs_n;
    let (sv, xv, tv) = blackscholes::options(n);
    let d = sub("blackscholes");
    write_bin(&d.join("bs_s.bin"), f32_bytes(&sv));
    write_bin(&d.join("bs_x.bin"), f32_bytes(&xv));
    write_bin(&d.join("bs_t.bin"), f32_bytes(&tv));
    let inputs = std::rc::Rc::new((sv, xv, tv));
    let i2 = inputs.clone();
    let bs_ok = move |inp: &(Vec<f32>, Vec<f32>, Vec<f32>), c: &[f32], p: &[f32]| {
        if c.len() != inp.0.len() || p.len() != inp.0.len() {
            return false;
        }
        let (ec, ep) = blackscholes::l1_errors(&inp.0, &inp.1, &inp.2, c, p);
        ec <= 1e-6 && ep <= 1e-6
    };
    jobs.push(Job {
        name: "blackscholes",
        title: format!("Black-Scholes, {n} options (f32)"),
        args: vec![
            n.to_string(),
            format!("{}", blackscholes::R),
            format!("{}", blackscholes::V),
        ],
        weft: Box::new(move |dev, reps| {
            let p = blackscholes::program().unwrap_or_else(|e| fail(e.to_string()));
            let arr =
                |v: &[f32]| Array::from_slice([v.len()], v).unwrap_or_else(|e| fail(e.to_string()));
            let (s, x, t) = (arr(&inputs.0), arr(&inputs.1), arr(&inputs.2));
            // A stream of BS_STREAM calls, then one read: the time per call a program
            // pricing batch after batch sees (the GPU's queue hides the host's launch cost,
            // as the CUDA baseline's events do); one call with its read is in `weft-bench
            // launch` ("apply + read").
            let (secs, (c, p)) = dev.scope(|| {
                time_weft(reps, || {
                    // Applies are deferred until read: `to_device` runs each call where
                    // it is (on a GPU: queued, no download).
                    let mut last = blackscholes::price_arrays(&p, &s, &x, &t)?;
                    for _ in 1..BS_STREAM {
                        last.0.to_device(dev)?;
                        last = blackscholes::price_arrays(&p, &s, &x, &t)?;
                    }
                    last.0.get(0)?;
                    last.1.get(0)?;
                    Ok(last)
                })
            });
            let secs = secs / BS_STREAM as f64;
            let (c, p) = (
                c.to_vec().unwrap_or_default(),
                p.to_vec().unwrap_or_default(),
            );
            (secs, bs_ok(&inputs, &c, &p))
        }),
        check: Box::new(move |d, sfx, _| {
            let c = read_f32(&d.join(format!("bs_call.{sfx}.bin")));
            let p = read_f32(&d.join(format!("bs_put.{sfx}.bin")));
            bs_ok(&i2, &c, &p)
        }),
    });
    jobs
}

/// The directory of a job's inputs and outputs.
fn job_dir(dir: &Path, job: &Job) -> PathBuf {
    match job.name {
        "cg" if job.title.contains("lund") => dir.join("cg_lund"),
        "cg" => dir.join("cg_poisson"),
        n => dir.join(n),
    }
}

/// `weft-bench workloads [--quick] [--gpu] [--gpu-only] [--only NAME] [--ep-per N] [--cuda-bin DIR]
/// [--out FILE.md]`; `--ep-per` sets EP's pairs per work-item (a power of two).
pub fn main(args: &[String]) {
    let flag = |f: &str| args.iter().any(|a| a == f);
    let value = |f: &str| {
        args.iter()
            .position(|a| a == f)
            .and_then(|i| args.get(i + 1))
            .map(PathBuf::from)
    };
    let mut devices = vec![
        ("weft cranelift", Device::cpu_cranelift()),
        ("weft llvm", Device::cpu_llvm()),
    ];
    let gpu = match Device::cuda(0) {
        Ok(d) => {
            devices.push(("weft cuda", d));
            true
        }
        Err(e) => {
            eprintln!("workloads: no CUDA device ({e}): CPU devices only");
            false
        }
    };
    let mut sizes = if flag("--quick") {
        QUICK
    } else if gpu || flag("--gpu") {
        GPU
    } else {
        CPU
    };
    if let Some(p) = value("--ep-per") {
        sizes.ep_per = p
            .to_str()
            .and_then(|s| s.parse().ok())
            .filter(|&n: &usize| n.is_power_of_two() && n <= 1 << sizes.ep_m)
            .unwrap_or_else(|| {
                fail(format!(
                    "--ep-per {}: expected a power of two ≤ 2^ep_m",
                    p.display()
                ))
            });
    }
    let dir = root().join("target/bench/workloads");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| fail(format!("{}: {e}", dir.display())));
    let cuda_bin = value("--cuda-bin");
    let mut bases = baselines(&dir, cuda_bin.as_deref());
    if flag("--gpu-only") {
        // The GPU machine's table: weft's CUDA device against the hand CUDA only (the CPU
        // columns at GPU sizes would take most of a run).
        devices.retain(|(c, _)| *c == "weft cuda");
        bases.retain(|b| b.column.starts_with("CUDA"));
    }
    let mut jobs = jobs(sizes, &dir);
    if let Some(only) = value("--only") {
        jobs.retain(|j| Path::new(j.name) == only);
    }
    let steps = jobs.len() * (devices.len() + bases.len());
    let bar = ProgressBar::new(steps as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {elapsed} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    for job in &mut jobs {
        let mut cells = BTreeMap::new();
        for (column, dev) in &devices {
            bar.set_message(format!("{} on {column}", job.name));
            let before = dev.as_cuda().map(|g| g.transfers());
            let (secs, ok) = (job.weft)(dev, sizes.reps);
            if let (Some(g), Some(b)) = (dev.as_cuda(), before) {
                let t = g.transfers().since(&b);
                notes.push(format!(
                    "{}: weft cuda transferred {:.1} MB up in {} copies and {:.1} MB down in {} copies over its {} runs",
                    job.title,
                    t.upload_bytes as f64 / 1e6,
                    t.uploads,
                    t.download_bytes as f64 / 1e6,
                    t.downloads,
                    sizes.reps + 1
                ));
            }
            cells.insert(*column, Cell { secs, ok });
            bar.inc(1);
        }
        let d = job_dir(&dir, job);
        for b in &bases {
            bar.set_message(format!("{} with {}", job.name, b.column));
            if let Some((secs, lines)) = run_baseline((b.run)(job.name, &d, sizes.reps, &job.args))
            {
                let ok = (job.check)(&d, b.suffix, &lines);
                cells.insert(b.column, Cell { secs, ok });
            }
            bar.inc(1);
        }
        rows.push(Row {
            title: job.title.clone(),
            cells,
        });
    }
    bar.finish_and_clear();
    let machine = machine(
        devices
            .iter()
            .find(|(c, _)| *c == "weft cuda")
            .map(|(_, d)| d.name()),
    );
    let mut md = markdown(&rows, &machine, sizes.reps, args);
    if !notes.is_empty() {
        md.push('\n');
        for n in &notes {
            md.push_str(&format!("- {n}\n"));
        }
    }
    print!("{md}");
    let stem = if gpu {
        "performance-workloads-gpu"
    } else {
        "performance-workloads"
    };
    let out = value("--out").unwrap_or_else(|| root().join(format!("docs/{stem}.md")));
    std::fs::write(&out, &md).unwrap_or_else(|e| fail(format!("{}: {e}", out.display())));
    let svg = out.with_extension("svg");
    chart(&rows, &svg);
    eprintln!("wrote {} and {}", out.display(), svg.display());
}

fn machine(gpu: Option<String>) -> String {
    let cpu = crate::cpu_name();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    match gpu {
        Some(g) => format!("{cpu}, {threads} threads; GPU: {g}"),
        None => format!("{cpu}, {threads} threads"),
    }
}

fn fmt_secs(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.2} s")
    } else if s >= 1e-3 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{:.1} µs", s * 1e6)
    }
}

fn markdown(rows: &[Row], machine: &str, reps: usize, args: &[String]) -> String {
    let cols: Vec<&str> = IMPLS
        .iter()
        .copied()
        .filter(|c| rows.iter().any(|r| r.cells.contains_key(c)))
        .collect();
    let mut md = String::new();
    md.push_str(if machine.contains("GPU:") {
        "## Workloads on the GPU machine (issue 8)\n\n"
    } else {
        "## Workloads on this machine (issue 8)\n\n"
    });
    md.push_str(&format!(
        "Written by `weft-bench workloads{}` (`cargo run --release -p weft-bench -- workloads`, after\n",
        args.iter().map(|a| format!(" {a}")).collect::<String>()
    ));
    md.push_str(&format!(
        "`scripts/fetch_data.sh`). Machine: {machine}. Medians of {reps} runs after one warm-up run\n"
    ));
    md.push_str("(compilation, uploads). weft is timed from inputs already in weft arrays to results computed\n");
    md.push_str(
        "(the GPU waited for; Jacobi, CG, EP and the coin finder include their host loops and\n",
    );
    md.push_str("reductions; Jacobi and CG leave their result arrays on the device, as the CUDA baselines do;\n");
    md.push_str(
        "Black-Scholes is the time per call of a stream of 10 calls with one read at the end);\n",
    );
    md.push_str("baselines time their computation only (docs/workloads.md).\n");
    md.push_str("✗ marks a result outside its tolerance; an empty cell: not available here.\n\n");
    md.push_str(&format!("| workload | {} |\n", cols.join(" | ")));
    md.push_str(&format!("|---|{}\n", "---:|".repeat(cols.len())));
    for r in rows {
        let cells: Vec<String> = cols
            .iter()
            .map(|c| match r.cells.get(c) {
                Some(cell) => format!("{}{}", fmt_secs(cell.secs), if cell.ok { "" } else { " ✗" }),
                None => String::new(),
            })
            .collect();
        md.push_str(&format!("| {} | {} |\n", r.title, cells.join(" | ")));
    }
    md.push_str("\nRatios, weft ÷ baseline (time; below 1 means weft is faster):\n\n");
    let weft_cols: Vec<&str> = cols
        .iter()
        .copied()
        .filter(|c| c.starts_with("weft"))
        .collect();
    let base_cols: Vec<&str> = cols
        .iter()
        .copied()
        .filter(|c| !c.starts_with("weft"))
        .collect();
    let pairs: Vec<(&str, &str)> = weft_cols
        .iter()
        .flat_map(|w| {
            base_cols
                .iter()
                .filter(move |b| w.ends_with(Backend::Cuda.name()) == b.starts_with("CUDA"))
                .map(move |b| (*w, *b))
        })
        .collect();
    md.push_str(&format!(
        "| workload | {} |\n",
        pairs
            .iter()
            .map(|(w, b)| format!("{w} ÷ {b}"))
            .collect::<Vec<_>>()
            .join(" | ")
    ));
    md.push_str(&format!("|---|{}\n", "---:|".repeat(pairs.len())));
    for r in rows {
        let cells: Vec<String> = pairs
            .iter()
            .map(|(w, b)| match (r.cells.get(w), r.cells.get(b)) {
                (Some(x), Some(y)) => format!("{:.2}", x.secs / y.secs),
                _ => String::new(),
            })
            .collect();
        md.push_str(&format!("| {} | {} |\n", r.title, cells.join(" | ")));
    }
    md
}

/// A grouped bar chart of each implementation's time relative to the fastest in its row
/// (log scale), as SVG (plotters).
fn chart(rows: &[Row], path: &Path) {
    use plotters::prelude::*;
    let cols: Vec<&str> = IMPLS
        .iter()
        .copied()
        .filter(|c| rows.iter().any(|r| r.cells.contains_key(c)))
        .collect();
    let root = SVGBackend::new(path, (1100, 520)).into_drawing_area();
    let draw = || -> Result<(), Box<dyn std::error::Error>> {
        root.fill(&WHITE)?;
        let mut c = ChartBuilder::on(&root)
            .caption(
                "time ÷ fastest implementation of the workload (log scale; lower is better)",
                ("sans-serif", 18),
            )
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .right_y_label_area_size(0)
            .build_cartesian_2d(0f64..rows.len() as f64, (0.8f64..300.0).log_scale())?;
        c.configure_mesh()
            .disable_x_mesh()
            .x_labels(rows.len())
            .x_label_formatter(&|x| {
                rows.get(*x as usize)
                    .map(|r| r.title.split(',').next().unwrap_or("").to_string())
                    .unwrap_or_default()
            })
            .y_desc("× fastest")
            .draw()?;
        let width = 0.8 / cols.len() as f64;
        for (k, col) in cols.iter().enumerate() {
            let colour = Palette99::pick(k).to_rgba();
            let bars: Vec<Rectangle<(f64, f64)>> = rows
                .iter()
                .enumerate()
                .filter_map(|(i, r)| {
                    let best = r
                        .cells
                        .values()
                        .map(|c| c.secs)
                        .fold(f64::INFINITY, f64::min);
                    let cell = r.cells.get(col)?;
                    let x0 = i as f64 + 0.1 + k as f64 * width;
                    Some(Rectangle::new(
                        [(x0, 0.8), (x0 + width * 0.9, (cell.secs / best).max(0.8))],
                        colour.filled(),
                    ))
                })
                .collect();
            c.draw_series(bars)?.label(*col).legend(move |(x, y)| {
                Rectangle::new([(x, y - 5), (x + 10, y + 5)], colour.filled())
            });
        }
        c.configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
        root.present()?;
        Ok(())
    };
    if let Err(e) = draw() {
        eprintln!("chart: {e}");
    }
}
