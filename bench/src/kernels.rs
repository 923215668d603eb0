//! Kernel-mode benchmark rows (issue 9): the shared-memory MDH kernel (Stone et al. 2010,
//! Figure 5) against the map-program MDH, and the tiled matrix multiplication against the
//! naive kernel, measured side by side in one run (GPU with `--gpu`, always on the CPU).
//! Every timed result is checked against the other version of the same computation.

use crate::{fail, median};
use weft_ir::interp::{HostArray, Input};
use weft_ir::{Const, KernelArg, KernelGrid, Module, ScalarType, Type};
use weft_runtime::{CpuDevice, CudaDevice};

use weft_workloads::mdh;

fn example(file: &str) -> Module {
    let path = crate::root().join(file);
    let src =
        std::fs::read_to_string(&path).unwrap_or_else(|e| fail(format!("{}: {e}", path.display())));
    weft_ir::parse_and_verify(&src).unwrap_or_else(|e| fail(format!("{file}: {e:?}")))
}

fn f32s(shape: &[usize], xs: impl Iterator<Item = f32>) -> HostArray {
    HostArray {
        elem: Type::f32(),
        shape: shape.to_vec(),
        data: xs.map(|x| x.to_bits() as u64).collect(),
    }
}

fn to_f32(h: &HostArray) -> Vec<f32> {
    h.data.iter().map(|&b| f32::from_bits(b as u32)).collect()
}

/// Largest |a - b| relative to max |b|.
fn rel_diff(a: &[f32], b: &[f32]) -> f64 {
    let scale = b
        .iter()
        .fold(0f64, |m, &x| m.max((x as f64).abs()))
        .max(1e-30);
    a.iter()
        .zip(b)
        .fold(0f64, |m, (&x, &y)| m.max((x as f64 - y as f64).abs()))
        / scale
}

/// One table row: what, version A's time, version B's time, B / A.
struct Row(String, f64, f64, String, String);

fn mdh_inputs(natoms: usize, side: usize) -> (Vec<[f32; 4]>, [f32; 3]) {
    let atoms = mdh::atoms(natoms);
    let o = mdh::origin(&atoms, side);
    (atoms, o)
}

fn atoms_array(atoms: &[[f32; 4]]) -> HostArray {
    HostArray {
        elem: Type::tuple(ScalarType::F32, 4).expect("tuple"),
        shape: vec![atoms.len()],
        data: atoms.iter().flatten().map(|x| x.to_bits() as u64).collect(),
    }
}

fn vec3(o: [f32; 3]) -> Const {
    Const::from_lanes(
        Type::tuple(ScalarType::F32, 3).expect("tuple"),
        &o.map(|x| x.to_bits() as u64),
    )
}

fn f32c(x: f32) -> Const {
    Const::scalar(ScalarType::F32, x.to_bits() as u64)
}

fn i32c(x: i32) -> Const {
    Const::scalar(ScalarType::I32, x as u32 as u64)
}

use crate::time_median as time;

fn gpu_rows(dev: &CudaDevice, rows: &mut Vec<Row>) {
    // ---- MDH: 4096 atoms × 128³ points.
    let (natoms, side) = (4096, 128);
    let (atoms, o) = mdh_inputs(natoms, side);
    let map = example("examples/ir/mdh.weft");
    let kern = example("examples/ir/kernels/mdh_shared.weft");
    // The map program's grid index (i, j, k) is (z, y, x); the kernel's ids are (x, y, z).
    let spacing = mdh::SPACING;
    let ins = vec![
        Input::Uniform(vec3(o)),
        Input::Uniform(f32c(spacing)),
        Input::Array(std::sync::Arc::new(atoms_array(&atoms))),
    ];
    let mut ml = dev
        .launch(&map, "mdh", &ins, Some(&[side; 3]))
        .unwrap_or_else(err);
    ml.run().unwrap_or_else(err);
    let t_map = median(
        (0..5)
            .map(|_| ml.time_runs(3).unwrap_or_else(err).as_secs_f64() / 3.0)
            .collect(),
    );
    let want = to_f32(&ml.outputs().unwrap_or_else(err)[0]);
    let atoms_h = atoms_array(&atoms);
    let mut pot = f32s(&[side; 3], std::iter::repeat_n(0.0, side * side * side));
    let block = [8u32, 8, 4];
    let grid = KernelGrid::new(
        &[(side / 8) as u32, (side / 8) as u32, (side / 4) as u32],
        &block,
    )
    .unwrap_or_else(|e| fail(e));
    let args = vec![
        KernelArg::Value(vec3(o)),
        KernelArg::Value(f32c(spacing)),
        KernelArg::Value(i32c(natoms as i32)),
        KernelArg::Array(&atoms_h),
        KernelArg::Buffer(&mut pot),
    ];
    let mut kl = dev
        .prepare_kernel(&kern, "mdh_shared", &args, &grid)
        .unwrap_or_else(err);
    kl.run().unwrap_or_else(err);
    let t_kern = median(
        (0..5)
            .map(|_| kl.time_runs(3).unwrap_or_else(err).as_secs_f64() / 3.0)
            .collect(),
    );
    drop(kl);
    let mut args = args;
    dev.run_kernel(&kern, "mdh_shared", &mut args, &grid)
        .unwrap_or_else(err);
    drop(args);
    let got = to_f32(&pot);
    let d = rel_diff(&got, &want);
    rows.push(Row(
        format!("GPU MDH, {natoms} atoms × {side}³ points: map program vs shared-memory kernel (block 8×8×4)"),
        t_map,
        t_kern,
        format!("bits equal: {}", if got == want { "yes".to_string() } else { format!("no (max rel diff {d:.1e})") }),
        dev.info().name.clone(),
    ));
    // ---- matmul 1024².
    let n = 1024;
    let mm = example("examples/ir/kernels/matmul.weft");
    let a = f32s(
        &[n, n],
        (0..n * n).map(|i| ((i * 7 % 13) as f32) * 0.125 - 0.75),
    );
    let b = f32s(
        &[n, n],
        (0..n * n).map(|i| ((i * 5 % 11) as f32) * 0.25 - 1.25),
    );
    let g =
        KernelGrid::new(&[(n / 16) as u32, (n / 16) as u32], &[16, 16]).unwrap_or_else(|e| fail(e));
    let mut res = Vec::new();
    let mut times = Vec::new();
    for k in ["matmul_naive", "matmul_tiled"] {
        let mut c = f32s(&[n, n], std::iter::repeat_n(0.0, n * n));
        let mut args = vec![
            KernelArg::Value(i32c(n as i32)),
            KernelArg::Array(&a),
            KernelArg::Array(&b),
            KernelArg::Buffer(&mut c),
        ];
        let mut l = dev.prepare_kernel(&mm, k, &args, &g).unwrap_or_else(err);
        l.run().unwrap_or_else(err);
        times.push(median(
            (0..5)
                .map(|_| l.time_runs(3).unwrap_or_else(err).as_secs_f64() / 3.0)
                .collect(),
        ));
        drop(l);
        dev.run_kernel(&mm, k, &mut args, &g).unwrap_or_else(err);
        drop(args);
        res.push(to_f32(&c));
    }
    rows.push(Row(
        format!("GPU matmul {n}×{n} f32: naive kernel vs 16×16 shared-memory tiles"),
        times[0],
        times[1],
        format!(
            "bits equal: {}",
            if res[0] == res[1] { "yes" } else { "no" }
        ),
        dev.info().name.clone(),
    ));
}

/// The CPU rows for both host compilers.
fn cpu_rows(rows: &mut Vec<Row>) {
    let llvm = CpuDevice::with_compiler(weft_runtime::HostCompiler::Llvm(Default::default()));
    cpu_rows_on(&CpuDevice::new(), rows);
    cpu_rows_on(&llvm, rows);
}

fn cpu_rows_on(dev: &CpuDevice, rows: &mut Vec<Row>) {
    let compiler = dev.compiler().backend();
    let n = 256;
    let mm = example("examples/ir/kernels/matmul.weft");
    let a = f32s(
        &[n, n],
        (0..n * n).map(|i| ((i * 7 % 13) as f32) * 0.125 - 0.75),
    );
    let b = f32s(
        &[n, n],
        (0..n * n).map(|i| ((i * 5 % 11) as f32) * 0.25 - 1.25),
    );
    let g =
        KernelGrid::new(&[(n / 16) as u32, (n / 16) as u32], &[16, 16]).unwrap_or_else(|e| fail(e));
    let mut res = Vec::new();
    let mut times = Vec::new();
    for k in ["matmul_naive", "matmul_tiled"] {
        let mut c = f32s(&[n, n], std::iter::repeat_n(0.0, n * n));
        times.push(time(5, || {
            let mut args = vec![
                KernelArg::Value(i32c(n as i32)),
                KernelArg::Array(&a),
                KernelArg::Array(&b),
                KernelArg::Buffer(&mut c),
            ];
            dev.run_kernel(&mm, k, &mut args, &g).unwrap_or_else(err);
        }));
        res.push(to_f32(&c));
    }
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    rows.push(Row(
        format!("CPU ({compiler}, {threads} threads) matmul {n}×{n} f32: naive kernel vs 16×16 shared-memory tiles"),
        times[0],
        times[1],
        format!("bits equal: {}", if res[0] == res[1] { "yes" } else { "no" }),
        "this machine".into(),
    ));
    // MDH, 512 atoms × 32³.
    let (natoms, side) = (512, 32);
    let (atoms, o) = mdh_inputs(natoms, side);
    let map = example("examples/ir/mdh.weft");
    let kern = example("examples/ir/kernels/mdh_shared.weft");
    let ins = vec![
        Input::Uniform(vec3(o)),
        Input::Uniform(f32c(mdh::SPACING)),
        Input::Array(std::sync::Arc::new(atoms_array(&atoms))),
    ];
    let mut ml = dev
        .launch(&map, "mdh", &ins, Some(&[side; 3]))
        .unwrap_or_else(err);
    let t_map = time(5, || ml.run().unwrap_or_else(err));
    let want = to_f32(&ml.outputs()[0]);
    let atoms_h = atoms_array(&atoms);
    let mut pot = f32s(&[side; 3], std::iter::repeat_n(0.0, side * side * side));
    let grid = KernelGrid::new(
        &[(side / 8) as u32, (side / 8) as u32, (side / 4) as u32],
        &[8, 8, 4],
    )
    .unwrap_or_else(|e| fail(e));
    let t_kern = time(5, || {
        let mut args = vec![
            KernelArg::Value(vec3(o)),
            KernelArg::Value(f32c(mdh::SPACING)),
            KernelArg::Value(i32c(natoms as i32)),
            KernelArg::Array(&atoms_h),
            KernelArg::Buffer(&mut pot),
        ];
        dev.run_kernel(&kern, "mdh_shared", &mut args, &grid)
            .unwrap_or_else(err);
    });
    let got = to_f32(&pot);
    rows.push(Row(
        format!("CPU ({compiler}, {threads} threads) MDH, {natoms} atoms × {side}³ points: map program vs shared-memory kernel"),
        t_map,
        t_kern,
        format!("bits equal: {}", if got == want { "yes" } else { "no" }),
        "this machine".into(),
    ));
}

fn err<T>(e: weft_runtime::RuntimeError) -> T {
    fail(e.to_string())
}

fn ms(s: f64) -> String {
    if s < 1e-3 {
        format!("{:.1} µs", s * 1e6)
    } else {
        format!("{:.2} ms", s * 1e3)
    }
}

/// `weft-bench kernels [--gpu] [--out FILE.md]`: prints (and writes) the table.
pub fn main(args: &[String]) {
    let gpu = args.iter().any(|a| a == "--gpu");
    let out = crate::option_value(args, "--out");
    let mut rows = Vec::new();
    if gpu {
        let dev = CudaDevice::new(0).unwrap_or_else(|e| fail(format!("cuda: {e}")));
        gpu_rows(&dev, &mut rows);
    }
    cpu_rows(&mut rows);
    let mut t = String::from(
        "| computation | first version | second version | second / first | check | device |\n|---|---|---|---|---|---|\n",
    );
    for Row(what, a, b, check, devname) in &rows {
        t.push_str(&format!(
            "| {what} | {} | {} | {:.2}× | {check} | {devname} |\n",
            ms(*a),
            ms(*b),
            b / a
        ));
    }
    print!("{t}");
    if let Some(p) = out {
        std::fs::write(p, &t).unwrap_or_else(|e| fail(format!("{p}: {e}")));
    }
}
