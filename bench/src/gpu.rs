//! GPU benchmarks (`weft-bench gpu BASELINE_DIR`): saxpy against the device-to-device copy
//! bandwidth, MDH against a hand-written CUDA kernel built with nvcc (precise and
//! `--use_fast_math`), and the time from IR to a loaded module. Run on the GPU machine; the
//! baselines come from `bench/cuda/baseline.cu` (built there by `scripts/gpu_bench.sh`).

use crate::{
    compare_with_file, fail, load, mdh_atoms, mdh_inputs, median, root, run_secs, table, Row,
};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use weft_ir::interp::{HostArray, Input};
use weft_ir::Const;
use weft_runtime::{CpuDevice, CudaDevice, GpuConfig, HostCompiler};

/// Runs the GPU benchmarks; `dir` holds the nvcc-built `baseline_precise`, `baseline_fast`
/// and `baseline_nofma` (`--fmad=false`: no contraction, like weft's precise mode). Prints a markdown table.
pub fn main(dir: &Path) {
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    let mut dev = CudaDevice::new(0).unwrap_or_else(|e| fail(e.to_string()));
    let info = dev.info().clone();
    let precise = dir.join("baseline_precise");
    let fast = dir.join("baseline_fast");
    let nofma = dir.join("baseline_nofma");

    // ---- saxpy vs device-to-device copy, 2^26 and 2^28 f32.
    let m = load("examples/ir/saxpy.weft");
    for log in [26u32, 28] {
        let n = 1usize << log;
        eprintln!("saxpy 2^{log} ...");
        let x = HostArray::from_f32(
            &(0..n)
                .map(|i| (i % 1000) as f32 * 0.001)
                .collect::<Vec<_>>(),
        );
        let y = HostArray::from_f32(&vec![1.0f32; n]);
        let ins = [
            Input::Uniform(Const::f32(2.0)),
            Input::Array(Arc::new(x)),
            Input::Array(Arc::new(y)),
        ];
        let mut l = dev
            .launch(&m, "saxpy", &ins, None)
            .unwrap_or_else(|e| fail(e.to_string()));
        l.run().unwrap_or_else(|e| fail(e.to_string()));
        let (mut w, mut c) = (Vec::new(), Vec::new());
        for _ in 0..5 {
            let t = l.time_runs(10).unwrap_or_else(|e| fail(e.to_string()));
            w.push(t.as_secs_f64() / 10.0);
            let ms = run_secs(Command::new(&precise).args(["copy", &n.to_string(), "10"]))
                .unwrap_or(f64::NAN);
            c.push(ms * 1e-3);
        }
        let (wt, ct) = (median(w), median(c));
        let weft_bw = (3 * n * 4) as f64 / wt / 1e9;
        let copy_bw = (2 * n * 4) as f64 / ct / 1e9;
        rows.push(Row {
            workload: format!("saxpy f32, 2^{log} elements (GB/s, read + written)"),
            weft: format!("{weft_bw:.0} GB/s ({:.3} ms)", wt * 1e3),
            baseline: format!(
                "cudaMemcpy device→device: {copy_bw:.0} GB/s ({:.3} ms)",
                ct * 1e3
            ),
            ratio: format!("{:.2}× of copy bandwidth", weft_bw / copy_bw),
            target: "≥ 0.95×".into(),
        });
        if log == 26 {
            crate::reduce::gpu_row(&mut rows, copy_bw, ct * 1e3);
        }
    }

    // ---- MDH, 4,096 atoms × 2^20 points.
    let pqr = root().join("data/cache/mache.pqr");
    let text =
        std::fs::read_to_string(&pqr).unwrap_or_else(|e| fail(format!("{}: {e}", pqr.display())));
    let atoms = mdh_atoms(&text, 4096);
    let (nk, nj, ni) = (64usize, 128usize, 128usize);
    let (ins, o, sp) = mdh_inputs(&atoms, nk, nj, ni);
    let m = load("examples/ir/mdh.weft");
    let shape = [nk, nj, ni];
    let bin = std::env::temp_dir().join("weft_atoms.bin");
    let bytes: Vec<u8> = atoms
        .iter()
        .flatten()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    std::fs::write(&bin, bytes).unwrap_or_else(|e| fail(e.to_string()));
    let out_c = std::env::temp_dir().join("weft_pot_c.bin");
    let args: Vec<String> = vec![
        "mdh".into(),
        bin.display().to_string(),
        atoms.len().to_string(),
        nk.to_string(),
        nj.to_string(),
        ni.to_string(),
        format!("{:?}", o[0]),
        format!("{:?}", o[1]),
        format!("{:?}", o[2]),
        format!("{sp:?}"),
        "5".into(),
        out_c.display().to_string(),
    ];
    // Compile time: IR → PTX (LLVM) and PTX → loaded module (driver JIT), first compile on
    // this device.
    let k = dev
        .kernel(&m, "mdh")
        .unwrap_or_else(|e| fail(e.to_string()));
    rows.push(Row {
        workload: "compile MDH for the GPU: IR → PTX (LLVM) + PTX → loaded module (driver)".into(),
        weft: format!(
            "{:.1} ms + {:.1} ms",
            k.llvm_time.as_secs_f64() * 1e3,
            k.load_time.as_secs_f64() * 1e3
        ),
        baseline: "—".into(),
        ratio: "—".into(),
        target: "—".into(),
    });
    let pair_flops = |t: f64| (atoms.len() * nk * nj * ni) as f64 * 20.0 / t / 1e12;
    let mut outs = Vec::new();
    for (fast_math, base, label) in [
        (false, &precise, "nvcc -O3"),
        (true, &fast, "nvcc -O3 --use_fast_math"),
        (false, &nofma, "nvcc -O3 --fmad=false"),
    ] {
        eprintln!("MDH on the GPU, fast_math = {fast_math} ...");
        dev.set_config(GpuConfig {
            fast_math,
            ..Default::default()
        });
        let mut l = dev
            .launch(&m, "mdh", &ins, Some(&shape))
            .unwrap_or_else(|e| fail(e.to_string()));
        l.run().unwrap_or_else(|e| fail(e.to_string()));
        let (mut w, mut c) = (Vec::new(), Vec::new());
        for _ in 0..5 {
            w.push(
                l.time_runs(3)
                    .unwrap_or_else(|e| fail(e.to_string()))
                    .as_secs_f64()
                    / 3.0,
            );
            c.push(run_secs(Command::new(base).args(&args)).unwrap_or(f64::NAN) * 1e-3);
        }
        let (wt, ct) = (median(w), median(c));
        let pot = l.outputs().unwrap_or_else(|e| fail(e.to_string()))[0].to_f32();
        let (maxd, maxv) = compare_with_file(&pot, &out_c);
        notes.push(format!(
            "MDH GPU ({}) vs CUDA ({label}): max |difference| = {:.1e} of max |V| = {maxv:.3}",
            if fast_math { "fast-math" } else { "precise" },
            maxd / maxv
        ));
        rows.push(Row {
            workload: format!(
                "MDH f32, {} atoms × 2^20 points, {}",
                atoms.len(),
                if fast_math { "fast-math" } else { "precise" }
            ),
            weft: format!("{:.2} ms ({:.1} TFLOP/s)", wt * 1e3, pair_flops(wt)),
            baseline: format!("hand-written CUDA, {label}: {:.2} ms", ct * 1e3),
            ratio: format!("{:.2}× CUDA's time", wt / ct),
            target: "≤ 1.0×".into(),
        });
        outs.push(pot);
    }
    // The precise GPU result against the CPU (LLVM, precise): bit for bit.
    eprintln!("MDH on the CPU for the bit-for-bit check ...");
    let cpu = CpuDevice::with_compiler(HostCompiler::Llvm(Default::default()));
    let cpu_pot = cpu
        .apply(&m, "mdh", &ins, Some(&shape))
        .unwrap_or_else(|e| fail(e.to_string()))[0]
        .to_f32();
    let same = cpu_pot
        .iter()
        .zip(&outs[0])
        .filter(|(a, b)| a.to_bits() == b.to_bits())
        .count();
    notes.push(format!(
        "MDH precise: GPU and CPU (llvm) outputs bit-identical on {same} of {} points",
        cpu_pot.len()
    ));
    let t = dev.transfers();
    notes.push(format!(
        "transfers over the whole run: {} uploads ({} MB), {} downloads ({} MB)",
        t.uploads,
        t.upload_bytes >> 20,
        t.downloads,
        t.download_bytes >> 20
    ));

    let mut md = String::new();
    md.push_str(&format!(
        "## GPU: {} (sm_{}{}, {} multiprocessors, {} GiB)\n\n",
        info.name,
        info.compute_capability.0,
        info.compute_capability.1,
        info.multiprocessors,
        info.memory_bytes >> 30
    ));
    md.push_str("Written by `scripts/gpu_run.sh` on the GPU machine (`weft-bench gpu`); weft and the\nbaseline alternate in 5 rounds; times are medians of kernel time (CUDA events / stream\nsynchronise), inputs resident on the device.\n\n");
    table(&mut md, "weft (cuda)", &rows, &notes);
    print!("{md}");
}
