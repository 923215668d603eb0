//! weft's benchmark suite: each workload on weft's CPU device next to the baseline a user
//! would pick, measured side by side in one run (medians), written to docs/performance.md.
//!
//! Usage: `cargo run --release -p weft-bench` (needs gcc with OpenMP; numba is optional;
//! MDH needs `scripts/fetch_data.sh` first). `weft-bench gpu DIR` runs the GPU benchmarks
//! (see `gpu.rs`; `scripts/gpu_bench.sh` on the GPU machine); `weft-bench limits` times
//! programs at the compilers' size limits (`limits.rs`); `weft-bench launch` the host cost
//! of one launch (`launch.rs`).

mod gpu;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;
use weft_ir::interp::{HostArray, Input};
use weft_ir::{Const, Type};
use weft_runtime::{CpuDevice, HostCompiler};

mod algebra;
mod collectives;
mod compile;
mod groups;
mod heat;
mod kernels;
mod launch;
mod limits;
mod reduce;
mod sequence;
mod workloads;

pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The CPU's model name from /proc/cpuinfo (empty if unknown).
fn cpu_name() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_default()
}

/// The value after option `name` in `args` (`--out FILE`), if given.
fn option_value<'a>(args: &'a [String], name: &str) -> Option<&'a String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
}

/// Median seconds of `reps` calls of `f` after one warm-up call.
fn time_median(reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    median(
        (0..reps)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_secs_f64()
            })
            .collect(),
    )
}

pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn fail(msg: String) -> ! {
    eprintln!("error: {msg}");
    std::process::exit(1)
}

pub(crate) fn gcc(src: &str, out: &Path, extra: &[&str]) {
    let st = Command::new("gcc")
        .args(["-O3", "-march=native", "-fopenmp"])
        .args(extra)
        .arg(root().join("bench/c").join(src))
        .arg("-o")
        .arg(out)
        .arg("-lm")
        .status()
        .unwrap_or_else(|e| fail(format!("running gcc: {e}")));
    if !st.success() {
        fail(format!("gcc failed on bench/c/{src}"));
    }
}

pub(crate) fn run_secs(cmd: &mut Command) -> Option<f64> {
    let out = cmd.output().ok()?;
    if !out.status.success() {
        eprintln!(
            "  ({:?} failed: {})",
            cmd,
            String::from_utf8_lossy(&out.stderr).trim()
        );
        return None;
    }
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn load(file: &str) -> weft_ir::Module {
    let src =
        std::fs::read_to_string(root().join(file)).unwrap_or_else(|e| fail(format!("{file}: {e}")));
    weft_ir::parse_and_verify(&src).unwrap_or_else(|e| fail(format!("{file}: {e}")))
}

/// The first `count` atoms of a PQR file as (x, y, z, charge).
fn mdh_atoms(text: &str, count: usize) -> Vec<[f32; 4]> {
    text.lines()
        .filter(|l| l.starts_with("ATOM") || l.starts_with("HETATM"))
        .filter_map(|l| {
            let f: Vec<f32> = l
                .split_whitespace()
                .rev()
                .take(5)
                .filter_map(|x| x.parse().ok())
                .collect();
            (f.len() == 5).then(|| [f[4], f[3], f[2], f[1]])
        })
        .take(count)
        .collect()
}

/// MDH's inputs for a grid of `nk × nj × ni` points at 1.5 Å spacing centred on the atoms:
/// (inputs, origin, spacing).
fn mdh_inputs(atoms: &[[f32; 4]], nk: usize, nj: usize, ni: usize) -> ([Input; 3], [f32; 3], f32) {
    let na = atoms.len();
    let sp = 1.5f32;
    let c = atoms
        .iter()
        .fold([0f32; 3], |a, p| [a[0] + p[0], a[1] + p[1], a[2] + p[2]]);
    let o = [
        c[0] / na as f32 - sp * ni as f32 / 2.0 + 0.0137,
        c[1] / na as f32 - sp * nj as f32 / 2.0 + 0.0137,
        c[2] / na as f32 - sp * nk as f32 / 2.0 + 0.0137,
    ];
    let elem = Type::tuple(weft_ir::ScalarType::F32, 4).expect("tuple");
    let arr = HostArray {
        elem,
        shape: vec![na],
        data: atoms.iter().flatten().map(|x| x.to_bits() as u64).collect(),
    };
    let t3 = Type::tuple(weft_ir::ScalarType::F32, 3).expect("tuple");
    let origin = Const::from_lanes(t3, &o.map(|x| x.to_bits() as u64));
    (
        [
            Input::Uniform(origin),
            Input::Uniform(Const::f32(sp)),
            Input::Array(Arc::new(arr)),
        ],
        o,
        sp,
    )
}

/// Compares `ours` with the f32 values in file `path` (little-endian, as the C and CUDA
/// baselines write them): (max |difference|, max |value| of the file).
fn compare_with_file(ours: &[f32], path: &Path) -> (f32, f32) {
    let theirs: Vec<f32> = std::fs::read(path)
        .unwrap_or_default()
        .chunks(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let maxv = theirs.iter().fold(0f32, |a, &v| a.max(v.abs()));
    let maxd = ours
        .iter()
        .zip(&theirs)
        .fold(0f32, |a, (&w, &c)| a.max((w - c).abs()));
    (maxd, maxv)
}

/// Appends the markdown table of `rows` (weft column titled `weft`) and the `notes` list.
fn table(md: &mut String, weft: &str, rows: &[Row], notes: &[String]) {
    md.push_str(&format!(
        "| workload | {weft} | baseline | ratio | target |\n|---|---|---|---|---|\n"
    ));
    for r in rows {
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            r.workload, r.weft, r.baseline, r.ratio, r.target
        ));
    }
    md.push('\n');
    for n in notes {
        md.push_str(&format!("- {n}\n"));
    }
}

struct Row {
    workload: String,
    weft: String,
    baseline: String,
    ratio: String,
    target: String,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("algebra") {
        algebra_main();
        return;
    }
    if args.get(1).map(String::as_str) == Some("reduce") {
        reduce_main();
        return;
    }
    if args.get(1).map(String::as_str) == Some("kernels") {
        kernels::main(&args[2..]);
        return;
    }
    if args.get(1).map(String::as_str) == Some("heat") {
        heat::main(&args[2..]);
        return;
    }
    if args.get(1).map(String::as_str) == Some("compile") {
        compile::main(&args[2..]);
        return;
    }
    if args.get(1).map(String::as_str) == Some("sequence") {
        sequence::main(&args[2..]);
        return;
    }
    if args.get(1).map(String::as_str) == Some("collectives") {
        collectives::main(&args[2..]);
        return;
    }
    if args.get(1).map(String::as_str) == Some("groups") {
        groups::main(&args[2..]);
        return;
    }
    if args.get(1).map(String::as_str) == Some("launch") {
        launch::main(&args[2..]);
        return;
    }
    if args.get(1).map(String::as_str) == Some("limits") {
        limits::main(&args[2..]);
        return;
    }
    if args.get(1).map(String::as_str) == Some("workloads") {
        workloads::main(&args[2..]);
        return;
    }
    if args.get(1).map(String::as_str) == Some("gpu") {
        let dir = args
            .get(2)
            .map_or_else(|| root().join("target/bench"), PathBuf::from);
        gpu::main(&dir);
        return;
    }
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let tmp = root().join("target/bench");
    std::fs::create_dir_all(&tmp).unwrap_or_else(|e| fail(format!("{}: {e}", tmp.display())));
    let dev = CpuDevice::new();
    let mut rows = Vec::new();
    let mut notes = Vec::new();

    // ---- saxpy / STREAM triad: 3 x 64 MiB of f32.
    eprintln!("saxpy: 3 x 64 MiB f32 ...");
    let n = 64 << 20 >> 2;
    let x = HostArray::from_f32(
        &(0..n)
            .map(|i| (i % 1000) as f32 * 0.001)
            .collect::<Vec<_>>(),
    );
    let y = HostArray::from_f32(&vec![1.0f32; n]);
    let m = load("examples/ir/saxpy.weft");
    let ins = [
        Input::Uniform(Const::f32(2.0)),
        Input::Array(Arc::new(x)),
        Input::Array(Arc::new(y)),
    ];
    let mut l = dev
        .launch(&m, "saxpy", &ins, None)
        .unwrap_or_else(|e| fail(e.to_string()));
    l.run().unwrap_or_else(|e| fail(e.to_string()));
    let triad = tmp.join("triad");
    gcc("triad.c", &triad, &[]);
    // Alternate weft and C for 5 rounds of 10 passes each (memory bandwidth drifts on a shared
    // machine); each side's figure is the median of its per-round medians.
    let (mut weft_r, mut c_r) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        weft_r.push(median(
            (0..10)
                .map(|_| {
                    let t = Instant::now();
                    l.run().unwrap_or_else(|e| fail(e.to_string()));
                    t.elapsed().as_secs_f64()
                })
                .collect(),
        ));
        c_r.push(run_secs(Command::new(&triad).arg(n.to_string()).arg("10")).unwrap_or(f64::NAN));
    }
    drop(l);
    let (weft_t, c_t) = (median(weft_r), median(c_r));
    let gbs = |t: f64| (3 * n * 4) as f64 / t / 1e9;
    rows.push(Row {
        workload: "saxpy f32, 3 × 64 MiB (GB/s, read + written)".into(),
        weft: format!("{:.1} GB/s ({:.2} ms)", gbs(weft_t), weft_t * 1e3),
        baseline: format!(
            "C triad gcc -O3 -march=native -fopenmp: {:.1} GB/s ({:.2} ms)",
            gbs(c_t),
            c_t * 1e3
        ),
        ratio: format!("{:.2}× of C's bandwidth", gbs(weft_t) / gbs(c_t)),
        target: "≥ 0.95×".into(),
    });

    // ---- MDH: first 4,096 atoms of mache.pqr x 16,384 grid points.
    let pqr = root().join("data/cache/mache.pqr");
    match std::fs::read_to_string(&pqr) {
        Err(_) => notes
            .push("MDH skipped: run scripts/fetch_data.sh for data/cache/mache.pqr".to_string()),
        Ok(text) => {
            eprintln!("MDH: 4,096 atoms x 16,384 points ...");
            let atoms = mdh_atoms(&text, 4096);
            let na = atoms.len();
            let (nk, nj, ni) = (16usize, 32usize, 32usize);
            let (ins, o, sp) = mdh_inputs(&atoms, nk, nj, ni);
            let m = load("examples/ir/mdh.weft");
            let shape = [nk, nj, ni];
            let mut l = dev
                .launch(&m, "mdh", &ins, Some(&shape))
                .unwrap_or_else(|e| fail(e.to_string()));
            l.run().unwrap_or_else(|e| fail(e.to_string()));
            let pot = l.outputs()[0].to_f32();
            let bin = tmp.join("atoms.bin");
            let bytes: Vec<u8> = atoms
                .iter()
                .flatten()
                .flat_map(|x| x.to_le_bytes())
                .collect();
            std::fs::write(&bin, bytes).unwrap_or_else(|e| fail(e.to_string()));
            let args: Vec<String> = vec![
                bin.display().to_string(),
                na.to_string(),
                nk.to_string(),
                nj.to_string(),
                ni.to_string(),
                format!("{:?}", o[0]),
                format!("{:?}", o[1]),
                format!("{:?}", o[2]),
                format!("{sp:?}"),
                "3".into(),
            ];
            let mdh_fast = tmp.join("mdh_fast");
            gcc("mdh.c", &mdh_fast, &["-ffast-math"]);
            let mdh_precise = tmp.join("mdh_precise");
            gcc("mdh.c", &mdh_precise, &[]);
            let out_c = tmp.join("pot_c.bin");
            let llvm = |fast_math| {
                CpuDevice::with_compiler(HostCompiler::Llvm(weft_backend_llvm::Options {
                    fast_math,
                    ..Default::default()
                }))
            };
            let (dev_lp, dev_lf) = (llvm(false), llvm(true));
            let mut l_lp = dev_lp
                .launch(&m, "mdh", &ins, Some(&shape))
                .unwrap_or_else(|e| fail(e.to_string()));
            let mut l_lf = dev_lf
                .launch(&m, "mdh", &ins, Some(&shape))
                .unwrap_or_else(|e| fail(e.to_string()));
            l_lp.run().unwrap_or_else(|e| fail(e.to_string()));
            let pot_lp = l_lp.outputs()[0].to_f32();
            // Alternate the contenders for 7 rounds (this shared machine's speed drifts); each
            // one's figure is the median of its per-round medians of 3 runs.
            let time3 = |l: &mut weft_runtime::cpu::Launch| {
                median(
                    (0..3)
                        .map(|_| {
                            let t = Instant::now();
                            l.run().unwrap_or_else(|e| fail(e.to_string()));
                            t.elapsed().as_secs_f64()
                        })
                        .collect(),
                )
            };
            let (mut weft_r, mut lp_r, mut lf_r, mut c_r, mut cp_r) =
                (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for _ in 0..7 {
                weft_r.push(time3(&mut l));
                lp_r.push(time3(&mut l_lp));
                lf_r.push(time3(&mut l_lf));
                cp_r.push(
                    run_secs(Command::new(&mdh_precise).args(&args).arg(&out_c))
                        .unwrap_or(f64::NAN),
                );
                c_r.push(
                    run_secs(Command::new(&mdh_fast).args(&args).arg(&out_c)).unwrap_or(f64::NAN),
                );
            }
            let (weft_t, c_t) = (median(weft_r), median(c_r));
            let (lp_t, lf_t, cp_t) = (median(lp_r), median(lf_r), median(cp_r));
            let (maxd, maxv) = compare_with_file(&pot, &out_c);
            notes.push(format!(
                "MDH: weft vs C (fast-math) max |difference| = {:.1e} of max |V| = {maxv:.3}",
                maxd / maxv
            ));
            let same = pot
                .iter()
                .zip(&pot_lp)
                .all(|(a, b)| a.to_bits() == b.to_bits());
            notes.push(format!(
                "MDH: llvm (precise) and cranelift outputs bit-identical: {same}"
            ));
            let gflops = |t: f64| (na * nk * nj * ni) as f64 * 20.0 / t / 1e9;
            rows.push(Row {
                workload: format!(
                    "MDH f32, {na} atoms × {} points (20 flop/pair), cranelift",
                    nk * nj * ni
                ),
                weft: format!("{:.1} ms ({:.1} GFLOP/s)", weft_t * 1e3, gflops(weft_t)),
                baseline: format!(
                    "C gcc -O3 -march=native -ffast-math -fopenmp: {:.1} ms",
                    c_t * 1e3
                ),
                ratio: format!("{:.2}× C's time", weft_t / c_t),
                target: "≤ 2.5×".into(),
            });
            rows.push(Row {
                workload: "MDH (same), llvm precise".into(),
                weft: format!("{:.1} ms ({:.1} GFLOP/s)", lp_t * 1e3, gflops(lp_t)),
                baseline: format!("C gcc -O3 -march=native -fopenmp: {:.1} ms", cp_t * 1e3),
                ratio: format!("{:.2}× faster than C", cp_t / lp_t),
                target: "≥ 4× faster".into(),
            });
            rows.push(Row {
                workload: "MDH (same), llvm fast-math".into(),
                weft: format!("{:.1} ms ({:.1} GFLOP/s)", lf_t * 1e3, gflops(lf_t)),
                baseline: format!(
                    "C gcc -O3 -march=native -ffast-math -fopenmp: {:.1} ms",
                    c_t * 1e3
                ),
                ratio: format!("{:.2}× C's time", lf_t / c_t),
                target: "≤ 1.0×".into(),
            });
            let numba = Command::new("python3")
                .arg(root().join("bench/mdh_numba.py"))
                .args(&args)
                .output();
            match numba {
                Ok(o) if o.status.success() => {
                    let t: f64 = String::from_utf8_lossy(&o.stdout)
                        .trim()
                        .parse()
                        .unwrap_or(f64::NAN);
                    rows.push(Row {
                        workload: "MDH (same)".into(),
                        weft: format!("{:.1} ms", weft_t * 1e3),
                        baseline: format!("numba njit(parallel, fastmath): {:.1} ms", t * 1e3),
                        ratio: format!("{:.2}× faster than numba", t / weft_t),
                        target: "≥ 1.5× faster".into(),
                    });
                }
                _ => notes.push(
                    "numba row skipped: `python3 -c 'import numba'` fails here (pip install numba)"
                        .into(),
                ),
            }

            // ---- Compile time of MDH and a cache hit.
            eprintln!("compile time ...");
            let comp: Vec<f64> = (0..21)
                .map(|_| {
                    let t = Instant::now();
                    let k = weft_backend_cranelift::compile(&m, "mdh")
                        .unwrap_or_else(|e| fail(e.to_string()));
                    let s = t.elapsed().as_secs_f64();
                    drop(k);
                    s
                })
                .collect();
            let hits: Vec<f64> = (0..2001)
                .map(|_| {
                    let t = Instant::now();
                    let k = dev.kernel(&m, "mdh");
                    let s = t.elapsed().as_secs_f64();
                    drop(k);
                    s
                })
                .collect();
            let comp_llvm: Vec<f64> = (0..7)
                .map(|_| {
                    let k = weft_backend_llvm::compile_host(&m, "mdh", Default::default())
                        .unwrap_or_else(|e| fail(e.to_string()));
                    k.compile_time.as_secs_f64()
                })
                .collect();
            rows.push(Row {
                workload: "compile MDH with llvm (O3): verified IR → callable code".into(),
                weft: format!("{:.2} ms median of 7", median(comp_llvm) * 1e3),
                baseline: "—".into(),
                ratio: "—".into(),
                target: "—".into(),
            });
            rows.push(Row {
                workload: "compile MDH: verified IR → callable code".into(),
                weft: format!("{:.3} ms median of 21", median(comp) * 1e3),
                baseline: "—".into(),
                ratio: "—".into(),
                target: "≤ 1 ms".into(),
            });
            rows.push(Row {
                workload: "kernel cache hit (MDH)".into(),
                weft: format!("{:.2} µs median of 2001", median(hits) * 1e6),
                baseline: "—".into(),
                ratio: "—".into(),
                target: "≤ 5 µs".into(),
            });
        }
    }

    let cpu = cpu_name();
    let mut md = String::new();
    md.push_str("# weft performance\n\n");
    md.push_str("Written by `cargo run --release -p weft-bench` (after `scripts/fetch_data.sh`); every row\n");
    md.push_str(
        "is measured side by side in one run on the same machine and inputs; times are medians.\n",
    );
    md.push_str(&format!("Machine: {cpu}, {threads} threads (weft's launch pool and OpenMP both use all of them).\n\n"));
    table(&mut md, "weft", &rows, &notes);
    print!("{md}");
    for part in [
        "docs/performance-workloads.md",
        "docs/performance-workloads-gpu.md",
        "docs/performance-launch.md",
        "docs/performance-stencil.md",
        "docs/performance-heat.md",
        "docs/performance-workloads-notes.md",
        "docs/performance-algebra.md",
        "docs/performance-reduce.md",
        "docs/performance-notes.md",
    ] {
        let extra = std::fs::read_to_string(root().join(part)).unwrap_or_default();
        if !extra.is_empty() {
            md.push('\n');
            md.push_str(&extra);
        }
    }
    std::fs::write(root().join("docs/performance.md"), md).unwrap_or_else(|e| fail(e.to_string()));
}

/// `weft-bench algebra`: the program algebra's rows (issue 5), written to
/// docs/performance-algebra.md, which the full run appends to docs/performance.md.
fn algebra_main() {
    let (mut rows, mut notes) = (Vec::new(), Vec::new());
    algebra::rows(&mut rows, &mut notes);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut md = String::from("## Program algebra (DESIGN §4)\n\n");
    md.push_str("Written by `cargo run --release -p weft-bench -- algebra` (after `scripts/fetch_data.sh`\n");
    md.push_str(&format!("for coins.png); {threads} threads. Each variant is optimized with `inline,fold,cse,licm,dce`;\n"));
    md.push_str("a. times whole applies (inputs marshalled in, outputs out: the staged run does that three\n");
    md.push_str("times); b.–d. time the prepared kernel only. Variants alternate over 5 rounds; medians.\n\n");
    table(&mut md, "weft (algebra result)", &rows, &notes);
    print!("{md}");
    std::fs::write(root().join("docs/performance-algebra.md"), md)
        .unwrap_or_else(|e| fail(e.to_string()));
}

/// `weft-bench reduce`: the reduction rows (issue 6), written to docs/performance-reduce.md,
/// which the full run appends to docs/performance.md. GPU rows come from `weft-bench gpu`.
fn reduce_main() {
    let mut rows = Vec::new();
    reduce::cpu_rows(&mut rows);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut md = String::from("## Reductions (DESIGN §5 collectives)\n\n");
    md.push_str("Written by `cargo run --release -p weft-bench -- reduce`; ");
    md.push_str(&format!(
        "{threads} threads. `weft::sum` on an array already on the host,\n"
    ));
    md.push_str(
        "timed as a whole call (every level of the reduction and the read of the result);\n",
    );
    md.push_str("bandwidth is bytes read / time. Devices and the triad alternate over 5 rounds; medians.\n\n");
    table(&mut md, "weft", &rows, &[]);
    print!("{md}");
    std::fs::write(root().join("docs/performance-reduce.md"), md)
        .unwrap_or_else(|e| fail(e.to_string()));
}
