//! `weft-bench compile [--gpu] [--out FILE.md]` (issue 24): what compiling costs and what the
//! on-disk kernel cache and the tiered CPU JIT save. Every row runs in a fresh child process
//! of this binary with its own cache directory (the cache is chosen once per process):
//! - loading a cached kernel: MDH and Black-Scholes prepared on a fresh LLVM CPU device (and
//!   CUDA device with `--gpu`) whose code comes from the cache, against compiling it;
//! - the coin finder's first run on the tiered device (`auto`) with a cold cache and with a
//!   warm one (filled by a run that waited for the background compiles), next to Cranelift
//!   and LLVM, and the part of each first run that is compilation (first run − a later run);
//! - MDH and Black-Scholes on `auto` against the plain devices: the first launch (compile
//!   included, cold cache) against Cranelift's, and the steady state once the LLVM code is
//!   in against LLVM's (medians of five processes each).

use crate::{fail, median, option_value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;
use weft::Device;
use weft_runtime::{CpuDevice, HostCompiler};
use weft_workloads::{blackscholes, coins, mdh};

fn ok<T, E: std::fmt::Display>(r: Result<T, E>) -> T {
    r.unwrap_or_else(|e| fail(e.to_string()))
}

/// The programs whose kernels the load rows time.
fn programs() -> Vec<(&'static str, weft::dsl::Program)> {
    vec![
        ("mdh", ok(mdh::program())),
        ("blackscholes", ok(blackscholes::program())),
    ]
}

/// Runs `weft-bench compile --child ARGS` with the cache in `dir` (or none) and returns the
/// lines it prints after `RESULT `.
fn child(args: &[&str], dir: Option<&Path>) -> Vec<String> {
    let mut c = Command::new(std::env::current_exe().unwrap_or_else(|e| fail(e.to_string())));
    c.args(["compile", "--child"]).args(args);
    match dir {
        Some(d) => c.env("WEFT_CACHE_DIR", d).env_remove("WEFT_CACHE"),
        None => c.env("WEFT_CACHE", "off"),
    };
    let o = ok(c.output());
    let out = String::from_utf8_lossy(&o.stdout);
    if !o.status.success() {
        fail(format!(
            "child {args:?} failed:\n{out}\n{}",
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    out.lines()
        .filter_map(|l| l.strip_prefix("RESULT "))
        .map(str::to_string)
        .collect()
}

fn fresh_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("weft-bench-cache-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Seconds as milliseconds with 3 decimals.
fn ms(s: f64) -> String {
    format!("{:.3} ms", s * 1e3)
}

fn num(s: &str) -> f64 {
    s.parse()
        .unwrap_or_else(|_| fail(format!("bad number `{s}`")))
}

/// The child side: one measurement, printed as `RESULT name value…` lines.
fn run_child(args: &[String]) {
    match args.first().map(String::as_str) {
        // Prepare each program on a fresh device `reps` times: the first prepare compiles
        // (cold cache) or loads; print each program's first and median later times.
        Some("load") => {
            let gpu = args.get(1).is_some_and(|a| a == "gpu");
            let reps = 21;
            // One device; its in-memory caches are emptied before each prepare (the code is
            // unloaded), so each later prepare reads, checks and loads the cache entries.
            let cuda = gpu.then(|| ok(weft_runtime::CudaDevice::new(0)));
            let cpu = CpuDevice::with_compiler(HostCompiler::Llvm(Default::default()));
            for (name, p) in programs() {
                let m = p.module();
                let mut times = Vec::new();
                for rep in 0..=reps {
                    let before = weft::stats::snapshot();
                    let t = Instant::now();
                    match &cuda {
                        Some(d) => {
                            ok(d.prepare(m, p.name()));
                        }
                        None => {
                            ok(cpu.prepare(m, p.name()));
                        }
                    }
                    times.push(t.elapsed().as_secs_f64());
                    if std::env::var_os("WEFT_BENCH_VERBOSE").is_some() && rep < 3 {
                        eprintln!(
                            "{name} rep {rep}: {:.3} ms\n{}",
                            times[times.len() - 1] * 1e3,
                            weft::stats::snapshot().since(&before)
                        );
                    }
                    match &cuda {
                        Some(d) => d.clear_cache(),
                        None => cpu.clear_cache(),
                    }
                }
                let first = times.remove(0);
                println!("RESULT {name} {first} {}", median(times));
            }
        }
        // The coin finder's first and second run on `device`; with `wait`, then wait for
        // the tiered JIT's background compiles (filling the cache).
        Some("coins") => {
            let dev = ok(Device::by_name(&args[1]));
            let wait = args.get(2).is_some_and(|a| a == "wait");
            let (h, w, img) = ok(coins::load());
            let before = weft::stats::snapshot();
            let t = Instant::now();
            let found = ok(coins::find_coins(&dev, h, w, &img, coins::COINS));
            let first = t.elapsed().as_secs_f64();
            let s = weft::stats::snapshot().since(&before);
            let t = Instant::now();
            ok(coins::find_coins(&dev, h, w, &img, coins::COINS));
            let second = t.elapsed().as_secs_f64();
            if wait {
                if let Some(c) = dev.as_cpu() {
                    c.wait_for_upper_tier();
                }
            }
            let cl = s.compiled(weft::stats::Compiler::Cranelift);
            println!(
                "RESULT coins {first} {second} {} {} {}",
                found.len(),
                cl.time.as_secs_f64(),
                s.loaded(weft::stats::Compiler::LlvmHost).count
            );
        }
        // MDH or Black-Scholes on `device`: the first run (compile included), then with the
        // tiered JIT's LLVM code in (after waiting), the median of 9 runs.
        Some("tier") => {
            let (work, dev) = (args[1].as_str(), ok(Device::by_name(&args[2])));
            let atoms = mdh::atoms(2048);
            let (s, x, t) = blackscholes::options(1 << 20);
            let run = || match work {
                "mdh" => drop(ok(mdh::mdh(&dev, &atoms, 32))),
                _ => drop(ok(blackscholes::price(&dev, &s, &x, &t))),
            };
            let t0 = Instant::now();
            run();
            let first = t0.elapsed().as_secs_f64();
            if let Some(c) = dev.as_cpu() {
                c.wait_for_upper_tier();
            }
            let steady = median(
                (0..9)
                    .map(|_| {
                        let t = Instant::now();
                        run();
                        t.elapsed().as_secs_f64()
                    })
                    .collect(),
            );
            println!("RESULT {work} {first} {steady}");
        }
        _ => fail("compile --child: load|coins|tier".into()),
    }
}

/// `weft-bench compile`.
pub fn main(args: &[String]) {
    if args.first().is_some_and(|a| a == "--child") {
        return run_child(&args[1..]);
    }
    let gpu = args.iter().any(|a| a == "--gpu");
    let mut md = String::new();
    md.push_str(&format!(
        "Compile cost and the kernel cache, medians; {} threads on {}.\n\n",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        crate::cpu_name()
    ));

    // Loading cached kernels.
    md.push_str(
        "| kernel | compile (cold cache) | load from the cache (median of 21) |\n|---|---|---|\n",
    );
    let mut kinds = vec![("cpu (llvm)", "cpu")];
    if gpu {
        kinds.push(("cuda (PTX; the driver caches its SASS)", "gpu"));
    }
    for (label, kind) in kinds {
        let dir = fresh_dir(kind);
        let cold = child(&["load", kind], Some(&dir));
        let warm = child(&["load", kind], Some(&dir));
        for (c, w) in cold.iter().zip(&warm) {
            let c: Vec<&str> = c.split_whitespace().collect();
            let w: Vec<&str> = w.split_whitespace().collect();
            md.push_str(&format!(
                "| {} on {label} | {} | {} |\n",
                c[0],
                ms(num(c[1])),
                ms(num(w[2]))
            ));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    // The coin finder's first runs.
    md.push_str(
        "\n| coin finder, first run in a new process | first run | later run | compilation (first − later) | Cranelift compile time (all threads) | LLVM kernels loaded |\n|---|---|---|---|---|---|\n",
    );
    let coins_row = |label: &str, r: &[String]| {
        let f: Vec<&str> = r[0].split_whitespace().collect();
        let (first, second) = (num(f[1]), num(f[2]));
        format!(
            "| {label} | {} | {} | {} | {} | {} |\n",
            ms(first),
            ms(second),
            ms(first - second),
            ms(num(f[4])),
            f[5]
        )
    };
    md.push_str(&coins_row(
        "cranelift, no cache",
        &child(&["coins", "cpu"], None),
    ));
    md.push_str(&coins_row(
        "llvm, no cache",
        &child(&["coins", "llvm"], None),
    ));
    let dir = fresh_dir("coins");
    md.push_str(&coins_row(
        "auto, cold cache",
        &child(&["coins", "auto", "wait"], Some(&dir)),
    ));
    md.push_str(&coins_row(
        "auto, warm cache",
        &child(&["coins", "auto"], Some(&dir)),
    ));
    let _ = std::fs::remove_dir_all(&dir);

    // The tiered JIT against the plain devices.
    md.push_str(
        "\n| workload | first run: auto (cold cache) | cranelift | ratio | steady state: auto (LLVM code in) | llvm | ratio |\n|---|---|---|---|---|---|---|\n",
    );
    for work in ["mdh", "blackscholes"] {
        // Medians of 5 processes per device, alternating devices (the first run is one
        // sample per process).
        let (mut a, mut c, mut l) = (Vec::new(), Vec::new(), Vec::new());
        let f = |r: &[String], i: usize| num(r[0].split_whitespace().nth(i).unwrap_or("0"));
        for _ in 0..5 {
            let dir = fresh_dir(work);
            let r = child(&["tier", work, "auto"], Some(&dir));
            a.push((f(&r, 1), f(&r, 2)));
            let _ = std::fs::remove_dir_all(&dir);
            let r = child(&["tier", work, "cpu"], None);
            c.push((f(&r, 1), f(&r, 2)));
            let r = child(&["tier", work, "llvm"], None);
            l.push((f(&r, 1), f(&r, 2)));
        }
        let first = |v: &[(f64, f64)]| median(v.iter().map(|x| x.0).collect());
        let steady = |v: &[(f64, f64)]| median(v.iter().map(|x| x.1).collect());
        md.push_str(&format!(
            "| {work} | {} | {} | {:.2}× | {} | {} | {:.2}× |\n",
            ms(first(&a)),
            ms(first(&c)),
            first(&a) / first(&c),
            ms(steady(&a)),
            ms(steady(&l)),
            steady(&a) / steady(&l)
        ));
    }
    print!("{md}");
    if let Some(out) = option_value(args, "--out") {
        ok(std::fs::write(out, &md));
    }
}
