//! Compile-and-run times of programs at the compilers' size limits (issue 19), on every
//! backend: a call DAG with 2^40 call paths, straight-line chains of 30,000 and 100,000 ops,
//! and 10,000 sequential loops (`weft_fuzz::stress`). Each row is parse + verify + compile +
//! one launch over 1,000 elements on a fresh device (no kernel cache), median of 3, checked
//! against the interpreter's bits.

use crate::{cpu_name, fail, median};
use std::sync::Arc;
use std::time::Instant;
use weft_fuzz::stress::{doubling_dag, sequential_loops, straight_line};
use weft_ir::interp::{HostArray, Input};
use weft_ir::Module;
use weft_runtime::{Backend, Device, DeviceOptions};

/// Elements per launch.
const N: usize = 1000;

/// One launch of `@name` on `backend` with a fresh device: the outputs.
fn run(backend: Backend, m: &Module, name: &str, ins: &[Input]) -> Vec<HostArray> {
    Device::open(backend, &DeviceOptions::default())
        .and_then(|d| d.apply(m, name, ins, None))
        .unwrap_or_else(|e| fail(format!("{backend}: {e}")))
}

/// `weft-bench limits [--gpu] [--out FILE.md]`: prints (and writes) the table.
pub fn main(args: &[String]) {
    let gpu = args.iter().any(|a| a == "--gpu");
    let out = crate::option_value(args, "--out");
    let mut backends = vec![Backend::Interp, Backend::Cranelift, Backend::Llvm];
    if gpu {
        backends.push(Backend::Cuda);
    }
    let xs: Vec<f32> = (0..N).map(|i| i as f32 / N as f32).collect();
    let ys: Vec<f32> = (0..N).map(|i| 1.0 + i as f32 / N as f32).collect();
    let arr = |v: &[f32]| Input::Array(Arc::new(HostArray::from_f32(v)));
    let cases: Vec<(&str, String, &str, Vec<Input>, &str)> = vec![
        (
            "call DAG, N = 40 (2^40 call paths)",
            doubling_dag(40),
            "p0",
            vec![arr(&xs)],
            "≤ 5 s",
        ),
        (
            "straight line, 30,000 ops",
            straight_line(30_000),
            "p",
            vec![arr(&xs), arr(&ys)],
            "≤ 5 s",
        ),
        (
            "straight line, 100,000 ops",
            straight_line(100_000),
            "p",
            vec![arr(&xs), arr(&ys)],
            "≤ 20 s",
        ),
        (
            "10,000 sequential loops",
            sequential_loops(10_000),
            "p",
            vec![arr(&xs)],
            "—",
        ),
    ];
    let mut t = format!(
        "| program | {} | target |\n|---|{}---|\n",
        backends
            .iter()
            .map(|b| b.name())
            .collect::<Vec<_>>()
            .join(" | "),
        "---|".repeat(backends.len())
    );
    for (what, src, name, ins, target) in &cases {
        eprintln!("limits: {what} ...");
        let mut want: Option<Vec<HostArray>> = None;
        let mut cells = Vec::new();
        for b in &backends {
            let mut times = Vec::new();
            for _ in 0..3 {
                let t0 = Instant::now();
                let m = weft_ir::parse_and_verify(src)
                    .unwrap_or_else(|e| fail(format!("{what}: {e:?}")));
                let got = run(*b, &m, name, ins);
                times.push(t0.elapsed().as_secs_f64());
                match &want {
                    None => want = Some(got),
                    Some(w) if w[0].data == got[0].data => {}
                    Some(_) => fail(format!("{what}: {b} differs from the interpreter")),
                }
            }
            let cell = format!("{:.2} s", median(times));
            eprintln!("limits: {what} on {b}: {cell}");
            cells.push(cell);
        }
        t.push_str(&format!("| {what} | {} | {target} |\n", cells.join(" | ")));
    }
    let md = format!(
        "Compile + one launch over {N} elements, fresh device, median of 3, bits checked against the interpreter; {}.\n\n{t}",
        cpu_name()
    );
    print!("{md}");
    if let Some(p) = out {
        std::fs::write(p, &md).unwrap_or_else(|e| fail(format!("{p}: {e}")));
    }
}
