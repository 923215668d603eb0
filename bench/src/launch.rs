//! `weft-bench launch [--gpu] [--cuda-bin DIR] [--out FILE.md]` (issue 21; for profilers
//! also `--apply-loop N [--apply-device D]` and `--sum-loop N …`): the host cost of
//! one launch through the `weft` library on every device — back-to-back applies on 1,024
//! elements, an apply followed by reading one element, `sum` of 1,024 and of 2^26 f32, one CG
//! iteration on lund_a — next to CUDA's own launch cost measured in the same run by
//! `bench/cuda/launch.cu` (an empty kernel launched back to back, and launched, synchronised
//! and followed by a 4-byte copy). Medians.

use crate::{fail, option_value};
use std::path::Path;
use std::process::Command;
use weft::dsl::{In, Out, Param, Program, Value1f};

use weft::{sum, Array, Device};

/// Elements of the small launches.
const SMALL: usize = 1024;
/// Applies chained per timed run of the back-to-back row.
const CHAIN: usize = 64;

fn ok<T>(r: weft::Result<T>) -> T {
    r.unwrap_or_else(|e| fail(e.to_string()))
}

use crate::time_median as time;

/// `y = a·x + 1`: the program every launch row applies.
fn axpb() -> Program {
    ok(Program::record_named("axpb", || {
        let x = In::<Value1f>::named("x");
        let a = Param::uniform::<Value1f>("a");
        Out::named("y", a * x + 1.0f32);
    }))
}

/// One device's measurements, in seconds.
struct Costs {
    back_to_back: f64,
    apply_read: f64,
    sum_small: f64,
    sum_large: Option<f64>,
    reduce_large: f64,
    cg_iteration: Option<f64>,
    /// Whether the device is a GPU (its bandwidth is compared with the device copy's).
    gpu: bool,
}

fn measure(dev: &Device, large: &Array<1, f32>) -> Costs {
    let p = axpb();
    let x: Array<1, f32> = ok(Array::from_fn([SMALL], |i| (i % 7) as f32));
    eprintln!("launch: {dev}: back-to-back applies ...");
    let back_to_back = time(21, || {
        let mut y = x.clone();
        for _ in 0..CHAIN {
            y = ok(p.apply_on(dev, (&y, 0.5f32)));
        }
        std::hint::black_box(ok(y.get(0)));
    }) / CHAIN as f64;
    eprintln!("launch: {dev}: apply + read ...");
    let apply_read = time(201, || {
        let y: Array<1, f32> = ok(p.apply_on(dev, (&x, 0.5f32)));
        std::hint::black_box(ok(y.get(0)));
    });
    eprintln!("launch: {dev}: sum of {SMALL} ...");
    let sum_small = time(201, || {
        std::hint::black_box(ok(dev.scope(|| sum(&x))));
    });
    eprintln!("launch: {dev}: sum of 2^26 ...");
    let sum_large = Some(time(5, || {
        std::hint::black_box(ok(dev.scope(|| sum(large))));
    }));
    eprintln!("launch: {dev}: reduce of 2^26 with a user combiner ...");
    let add = ok(Program::record_named("add", || {
        let a = In::<Value1f>::named("a");
        let b = In::<Value1f>::named("b");
        Out::named("r", a + b);
    }));
    let reduce_large = time(5, || {
        std::hint::black_box(ok(dev.scope(|| weft::reduce(&add, large))));
    });
    eprintln!("launch: {dev}: CG on lund_a ...");
    let cg_iteration = cg_iteration(dev);
    Costs {
        back_to_back,
        apply_read,
        sum_small,
        sum_large,
        reduce_large,
        cg_iteration,
        gpu: dev.is_cuda(),
    }
}

/// Seconds per CG iteration on lund_a: (100 iterations − 10 iterations) / 90, so recording
/// and setup cancel; `None` when the matrix is not fetched.
fn cg_iteration(dev: &Device) -> Option<f64> {
    use weft_workloads::cg;
    let a = match cg::matrix("lund_a") {
        Ok(a) => a,
        Err(e) => {
            eprintln!("launch: CG row skipped: {e}");
            return None;
        }
    };
    let da = ok(cg::DeviceCsr::new(&a));
    let b: Array<1, f64> = ok(Array::from_vec([a.rows], vec![1.0; a.rows]));
    // One by one (`weft-bench sequence` has the recorded solve).
    let run = |iters: usize| {
        time(5, || {
            let s = ok(cg::cg_arrays(dev, &da, &b, 0.0, iters));
            assert_eq!(s.iterations, iters);
        })
    };
    Some((run(100) - run(10)) / 90.0)
}

/// Side of the Jacobi grid of the `--iterate` row.
const JACOBI_SIDE: usize = 512;

/// Seconds per Jacobi step (`examples/ir/jacobi.weft`, 512², stopped by `max(delta)`) on the
/// CPU with Cranelift: through the library (apply, `max`, feed back) and through
/// `weft run --iterate … --until` in-process ((200 steps − 2 steps) / 198, so parsing,
/// compilation and file reading cancel).
fn iterate_rows() -> (f64, f64) {
    let src = std::fs::read_to_string(crate::root().join("examples/ir/jacobi.weft"))
        .unwrap_or_else(|e| fail(format!("examples/ir/jacobi.weft: {e}")));
    let p = ok(Program::parse(&src, "jacobi"));
    let side = JACOBI_SIDE;
    let u0: Array<2, f32> = ok(Array::from_fn([side, side], |i| {
        if i < side {
            1.0
        } else {
            0.0
        }
    }));
    let dev = Device::cpu_cranelift();
    let steps = 200;
    let lib = time(5, || {
        let mut u = u0.clone();
        for _ in 0..steps {
            let (next, delta): (Array<2, f32>, Array<2, f32>) =
                ok(p.apply_shape_on(&dev, &[side, side], &u));
            std::hint::black_box(ok(dev.scope(|| weft::maximum(&delta))));
            u = next;
        }
    }) / steps as f64;
    let npy = std::env::temp_dir().join(format!("weft-bench-u0-{}.npy", std::process::id()));
    let v = ok(u0.to_vec());
    ok(weft::data::write_npy_f32(&npy, &[side, side], &v));
    let cli = |n: usize| {
        let args: Vec<String> = [
            "weft",
            "run",
            "examples/ir/jacobi.weft",
            "--shape",
            &format!("{side},{side}"),
            "--in",
            &format!("u={}", npy.display()),
            "--iterate",
            &n.to_string(),
            "--feed",
            "u_next=u",
            "--until",
            "delta<1e-30",
        ]
        .iter()
        .map(ToString::to_string)
        .collect();
        time(9, || {
            let (mut out, mut err) = (Vec::new(), Vec::new());
            let rc = weft_cli::cli::run_args(&args, &mut out, &mut err);
            if rc != 0 {
                fail(String::from_utf8_lossy(&err).into_owned());
            }
        })
    };
    let run = (cli(steps) - cli(2)) / (steps - 2) as f64;
    let _ = std::fs::remove_file(&npy);
    (lib, run)
}

/// Elements of the kernel-launch row's arrays.
const KERNEL_N: usize = 1_000_000;

/// Seconds for `Kernel::launch` of a kernel that does nothing, given a 10⁶-element
/// `InArray` and a 10⁶-element `Buffer`, and for a map program copying 10⁶ elements and
/// reading one back, on `dev`.
fn kernel_rows(dev: &Device) -> (f64, f64) {
    use weft::dsl::{Buffer, InArray, Kernel, KernelArg};
    let k = ok(Kernel::record_named("nothing", || {
        let _x = InArray::<1, Value1f>::named("x", weft::ir::Boundary::Clamp);
        let _y = Buffer::<1, Value1f>::named("y");
    }));
    let x: Array<1, f32> = ok(Array::from_fn([KERNEL_N], |i| i as f32));
    let mut y: Array<1, f32> = ok(Array::filled([KERNEL_N], 0.0));
    let launch = time(21, || {
        let mut args = [KernelArg::array(&x), KernelArg::buffer(&mut y)];
        ok(k.launch_on(dev, &[1], &[32], &mut args));
    });
    let copy = ok(Program::record_named("copy", || {
        let x = In::<Value1f>::named("x");
        Out::named("y", x);
    }));
    let map = time(21, || {
        let y: Array<1, f32> = ok(copy.apply_on(dev, &x));
        std::hint::black_box(ok(y.get(0)));
    });
    (launch, map)
}

/// CUDA's own costs (`bench/cuda/launch.cu`): seconds per empty launch back to back, per
/// launch + synchronise + 4-byte copy, and the device copy bandwidth of 2^26 f32 in GB/s
/// timed on the host (call to completion) and by CUDA events.
fn cuda_baseline(dir: &Path) -> Option<(f64, f64, f64, f64)> {
    let exe = dir.join("launch_cuda");
    let out = Command::new(&exe).output().ok()?;
    if !out.status.success() {
        eprintln!("launch: {} failed", exe.display());
        return None;
    }
    let s = String::from_utf8_lossy(&out.stdout);
    let v: Vec<f64> = s
        .split_whitespace()
        .filter_map(|t| t.parse().ok())
        .collect();
    match v.as_slice() {
        [a, b, c, d] => Some((*a, *b, *c, *d)),
        _ => None,
    }
}

fn us(t: f64) -> String {
    if t >= 1e-3 {
        format!("{:.2} ms", t * 1e3)
    } else {
        format!("{:.1} µs", t * 1e6)
    }
}

/// Entry point of `weft-bench launch`.
pub fn main(args: &[String]) {
    if let Some(n) = option_value(args, "--apply-loop") {
        // For profilers: N chains of the back-to-back row (64 applies on 1,024 f32, then a
        // read) on `--apply-device` (cranelift, llvm or cuda).
        let n: usize = n
            .parse()
            .unwrap_or_else(|_| fail(format!("--apply-loop {n}")));
        let dev = match option_value(args, "--apply-device").map(String::as_str) {
            Some("llvm") => Device::cpu_llvm(),
            Some("cuda") => ok(Device::cuda(0)),
            _ => Device::cpu_cranelift(),
        };
        let p = axpb();
        let x: Array<1, f32> = ok(Array::from_fn([SMALL], |i| (i % 7) as f32));
        for _ in 0..n {
            let mut y = x.clone();
            for _ in 0..CHAIN {
                y = ok(p.apply_on(&dev, (&y, 0.5f32)));
            }
            std::hint::black_box(ok(y.get(0)));
        }
        return;
    }
    if let Some(n) = option_value(args, "--sum-loop") {
        // For profilers: `sum` of 1,024 (or `--sum-size`) f32 on the CPU, N times.
        let n: usize = n
            .parse()
            .unwrap_or_else(|_| fail(format!("--sum-loop {n}")));
        let size = option_value(args, "--sum-size").map_or(SMALL, |s| {
            s.parse()
                .unwrap_or_else(|_| fail(format!("--sum-size {s}")))
        });
        let x: Array<1, f32> = ok(Array::from_fn([size], |i| (i % 7) as f32));
        let dev = match option_value(args, "--sum-device").map(String::as_str) {
            Some("llvm") => Device::cpu_llvm(),
            Some("cuda") => ok(Device::cuda(0)),
            _ => Device::cpu_cranelift(),
        };
        // `--user-combiner`: `reduce` with a user combiner (`a + b`) instead of `sum`.
        if args.iter().any(|a| a == "--user-combiner") {
            let add = ok(Program::record_named("add", || {
                let a = In::<Value1f>::named("a");
                let b = In::<Value1f>::named("b");
                Out::named("r", a + b);
            }));
            for _ in 0..n {
                std::hint::black_box(ok(dev.scope(|| weft::reduce(&add, &x))));
            }
            return;
        }
        for _ in 0..n {
            std::hint::black_box(ok(dev.scope(|| sum(&x))));
        }
        return;
    }
    let gpu = args.iter().any(|a| a == "--gpu");
    let out = option_value(args, "--out");
    let mut devs = vec![Device::cpu_cranelift(), Device::cpu_llvm()];
    if gpu {
        devs.push(ok(Device::cuda(0)));
    }
    let large: Array<1, f32> = ok(Array::from_fn([1 << 26], |i| (i % 4) as f32));
    let costs: Vec<Costs> = devs.iter().map(|d| measure(d, &large)).collect();
    let cuda = option_value(args, "--cuda-bin").and_then(|d| cuda_baseline(Path::new(d)));
    eprintln!("launch: Jacobi steps through the library and weft run --iterate ...");
    let (lib_step, cli_step) = iterate_rows();
    eprintln!("launch: kernel launches over 10^6-element arrays ...");
    let kernel: Vec<(f64, f64)> = devs.iter().map(kernel_rows).collect();
    let mut t = format!(
        "| per launch | {} | CUDA itself |\n|---|{}---|\n",
        devs.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(" | "),
        "---|".repeat(devs.len())
    );
    let opt = |v: Option<f64>| v.map_or("—".to_string(), us);
    let mut row = |what: &str, f: &dyn Fn(&Costs) -> String, base: String| {
        let cells: Vec<String> = costs.iter().map(f).collect();
        t.push_str(&format!("| {what} | {} | {base} |\n", cells.join(" | ")));
    };
    row(
        &format!("apply on {SMALL} f32, back to back ({CHAIN} chained)"),
        &|c| us(c.back_to_back),
        cuda.map_or("—".into(), |(l, _, _, _)| {
            format!("{} (empty kernel)", us(l))
        }),
    );
    row(
        &format!("apply on {SMALL} f32 + read one element"),
        &|c| us(c.apply_read),
        cuda.map_or("—".into(), |(_, s, _, _)| {
            format!("{} (launch + sync + 4-byte copy)", us(s))
        }),
    );
    row(
        &format!("`sum` of {SMALL} f32"),
        &|c| us(c.sum_small),
        "—".into(),
    );
    // Bandwidth: bytes read / time, and on a GPU its ratio to the device copy's.
    let copy_bw = cuda.map(|(_, _, b, _)| b);
    let bw = |t: f64, gpu: bool| {
        let gbs = (4usize << 26) as f64 / t / 1e9;
        match copy_bw.filter(|_| gpu) {
            Some(c) => format!("{} ({gbs:.0} GB/s, {:.2}× copy)", us(t), gbs / c),
            None => format!("{} ({gbs:.1} GB/s)", us(t)),
        }
    };
    let copy = cuda.map_or("—".into(), |(_, _, b, e)| {
        format!("{b:.0} GB/s (device copy of 2^26 f32, call to completion; {e:.0} GB/s by events)")
    });
    row(
        "`sum` of 2^26 f32",
        &|c| c.sum_large.map_or("—".into(), |t| bw(t, c.gpu)),
        copy.clone(),
    );
    row(
        "`reduce` of 2^26 f32 with a user combiner (`a + b`)",
        &|c| bw(c.reduce_large, c.gpu),
        copy,
    );
    row(
        "one CG iteration on lund_a (147 rows)",
        &|c| opt(c.cg_iteration),
        "—".into(),
    );
    t.push_str(&format!(
        "\n| `Kernel::launch`, a kernel that does nothing, 10⁶-element `InArray` + `Buffer` | {} |\n| map program copying 10⁶ elements + read one | {} |\n| ratio | {} |\n",
        kernel.iter().map(|k| us(k.0)).collect::<Vec<_>>().join(" | ") + " | —",
        kernel.iter().map(|k| us(k.1)).collect::<Vec<_>>().join(" | ") + " | —",
        kernel
            .iter()
            .map(|k| format!("{:.2}×", k.0 / k.1))
            .collect::<Vec<_>>()
            .join(" | ")
            + " | —",
    ));
    t.push_str(&format!(
        "\n| one Jacobi step, {JACOBI_SIDE}², with `max(delta)` (cpu, cranelift) | library | `weft run --iterate` | ratio |\n|---|---|---|---|\n| per step | {} | {} | {:.2}× |\n",
        us(lib_step),
        us(cli_step),
        cli_step / lib_step
    ));
    let md = format!(
        "Host cost per launch through the `weft` library, medians; {} threads on {}.\n\n{t}",
        threads(),
        crate::cpu_name()
    );
    print!("{md}");
    if let Some(p) = out {
        std::fs::write(p, &md).unwrap_or_else(|e| fail(format!("{p}: {e}")));
    }
}

fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
