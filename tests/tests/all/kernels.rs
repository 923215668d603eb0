//! Kernel mode (issue 9): the kernels of examples/ir/kernels (shared-memory MDH, tiled and
//! naive matrix multiplication, block tree reduction) give the interpreter's bits on every
//! compiled backend (cranelift and llvm; cuda when `WEFT_FILETEST_BACKENDS` names it), and
//! the kernels agree with their map-program or naive counterparts.

use weft_ir::{Const, HostArray, KernelGrid, Module, Type};
use weft_tests::filetest::{active_backends, run_kernel_on, same_bits, Backend, KernelArgSpec};

fn module(file: &str) -> Module {
    let path = format!(
        "{}/../examples/ir/kernels/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    let src = std::fs::read_to_string(&path).expect("read example");
    weft_ir::parse_and_verify(&src).unwrap_or_else(|e| panic!("{path}: {e:?}"))
}

/// Deterministic pseudo-random numbers in [0, 1).
fn noise(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32) / (1u64 << 24) as f32
        })
        .collect()
}

fn f32_array(shape: &[usize], xs: &[f32]) -> HostArray {
    HostArray {
        elem: Type::f32(),
        shape: shape.to_vec(),
        data: xs.iter().map(|x| x.to_bits() as u64).collect(),
    }
}

/// Runs kernel `name` on the interpreter and on every active backend; asserts every buffer
/// has the interpreter's bits; returns the interpreter's buffers.
fn agree(m: &Module, name: &str, args: &[KernelArgSpec], grid: &KernelGrid) -> Vec<HostArray> {
    let want = run_kernel_on(Backend::Interp, m, name, args, grid).expect("interpreter");
    for b in active_backends() {
        let got = run_kernel_on(b, m, name, args, grid)
            .unwrap_or_else(|e| panic!("@{name} on {}: {e}", b.name()));
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                same_bits(w.elem, &g.data, &w.data),
                "@{name} on {}: buffer {k} differs from the interpreter",
                b.name()
            );
        }
        println!("@{name}: {} agrees with the interpreter", b.name());
    }
    want
}

#[test]
fn shared_memory_mdh_matches_the_map_program_and_every_backend() {
    let m = module("mdh_shared.weft");
    let natoms = 40;
    let r = noise(natoms * 4, 7);
    let atoms: Vec<u64> = (0..natoms)
        .flat_map(|i| {
            let q = r[i * 4 + 3] * 2.0 - 1.0;
            [
                r[i * 4] * 8.0 - 4.0 + 0.37,
                r[i * 4 + 1] * 8.0 - 4.0 + 0.21,
                r[i * 4 + 2] * 8.0 - 4.0 + 0.13,
                q,
            ]
            .map(|x| x.to_bits() as u64)
        })
        .collect();
    let atoms = HostArray {
        elem: Type::tuple(weft_ir::ScalarType::F32, 4).expect("tuple"),
        shape: vec![natoms],
        data: atoms,
    };
    let origin = Const::from_lanes(
        Type::tuple(weft_ir::ScalarType::F32, 3).expect("tuple"),
        &[(-4.0f32).to_bits() as u64; 3],
    );
    let spacing = Const::scalar(weft_ir::ScalarType::F32, 1.0f32.to_bits() as u64);
    let pot = f32_array(&[8, 8, 8], &[0.0; 512]);
    let args = vec![
        KernelArgSpec::Value(origin),
        KernelArgSpec::Value(spacing),
        KernelArgSpec::Value(Const::scalar(weft_ir::ScalarType::I32, natoms as u64)),
        KernelArgSpec::Array(atoms.clone()),
        KernelArgSpec::Buffer(pot),
    ];
    // 16 work-items per group: three tiles, the last one partial.
    let grid = KernelGrid::new(&[2, 4, 4], &[4, 2, 2]).expect("grid");
    let got = agree(&m, "mdh_shared", &args, &grid);
    // The map program of examples/ir/mdh.weft adds the same terms in the same order.
    let src = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/ir/mdh.weft"
    ))
    .expect("mdh.weft");
    let map = weft_ir::parse_and_verify(&src).expect("mdh.weft verifies");
    let ins = vec![
        weft_ir::Input::Uniform(origin),
        weft_ir::Input::Uniform(spacing),
        weft_ir::Input::Array(std::sync::Arc::new(atoms)),
    ];
    let want = weft_ir::Interpreter::new(&map)
        .apply("mdh", &ins, Some(&[8, 8, 8]))
        .expect("map mdh");
    assert!(same_bits(Type::f32(), &got[0].data, &want[0].data));
}

#[test]
fn tiled_matmul_matches_the_naive_kernel_and_every_backend() {
    let m = module("matmul.weft");
    let n = 37;
    let a = f32_array(&[n, n], &noise(n * n, 1));
    let b = f32_array(&[n, n], &noise(n * n, 2));
    let c = f32_array(&[n, n], &vec![0.0; n * n]);
    let args = vec![
        KernelArgSpec::Value(Const::scalar(weft_ir::ScalarType::I32, n as u64)),
        KernelArgSpec::Array(a.clone()),
        KernelArgSpec::Array(b.clone()),
        KernelArgSpec::Buffer(c),
    ];
    let groups = n.div_ceil(16) as u32;
    let grid = KernelGrid::new(&[groups, groups], &[16, 16]).expect("grid");
    let tiled = agree(&m, "matmul_tiled", &args, &grid);
    let naive_grid =
        KernelGrid::new(&[n.div_ceil(8) as u32, n.div_ceil(4) as u32], &[8, 4]).expect("grid");
    let naive = agree(&m, "matmul_naive", &args, &naive_grid);
    assert!(same_bits(Type::f32(), &tiled[0].data, &naive[0].data));
    // And both are a matrix product: one element against f64.
    let get = |h: &HostArray, i: usize| f32::from_bits(h.data[i] as u32) as f64;
    let (i, j) = (5, 33);
    let want: f64 = (0..n)
        .map(|k| get(&a, i * n + k) * get(&b, k * n + j))
        .sum();
    assert!((get(&tiled[0], i * n + j) - want).abs() < 1e-4 * want.abs().max(1.0));
}

#[test]
fn block_tree_reduction_agrees_and_sums() {
    let m = module("reduce.weft");
    let xs = noise(1000, 3);
    let args = vec![
        KernelArgSpec::Array(f32_array(&[1000], &xs)),
        KernelArgSpec::Buffer(f32_array(&[4], &[0.0; 4])),
    ];
    let grid = KernelGrid::new(&[4], &[64]).expect("grid");
    let got = agree(&m, "block_reduce", &args, &grid);
    let total: f64 = got[0]
        .data
        .iter()
        .map(|&b| f32::from_bits(b as u32) as f64)
        .sum();
    let want: f64 = xs.iter().map(|&x| x as f64).sum();
    assert!((total - want).abs() < 1e-3, "{total} vs {want}");
}

/// The kernel property test's CI budget: random barrier-safe kernels (weft-fuzz's
/// `kernel` module) give the interpreter's bits on cranelift (and cuda when active). The
/// long runs are `weft fuzz --kernels --cases 10000` (docs/testing.md).
#[test]
fn random_barrier_safe_kernels_agree_with_the_interpreter() {
    use weft_ir::{KernelArg, KernelGrid};
    let cpu = weft_runtime::CpuDevice::new();
    let on_cpu = |m: &Module, a: &mut [KernelArg], g: &KernelGrid| {
        cpu.run_kernel(m, "k", a, g).map_err(|e| e.to_string())
    };
    let on_llvm = |m: &Module, a: &mut [KernelArg], g: &KernelGrid| {
        weft_tests::filetest::llvm_device()
            .run_kernel(m, "k", a, g)
            .map_err(|e| e.to_string())
    };
    let on_cuda = |m: &Module, a: &mut [KernelArg], g: &KernelGrid| {
        weft_tests::filetest::cuda_device()?
            .run_kernel(m, "k", a, g)
            .map_err(|e| e.to_string())
    };
    type RunFn<'a> = &'a weft_fuzz::kernel::RunKernel<'a>;
    let mut runs: Vec<(&str, RunFn)> = vec![("cranelift", &on_cpu), ("llvm", &on_llvm)];
    if active_backends().contains(&Backend::Cuda) {
        runs.push(("cuda", &on_cuda));
    }
    let s = weft_fuzz::kernel::fuzz_kernels(11, 0, 300, &runs, &|_| {});
    println!(
        "kernel fuzzing: {} checked, {} discarded, {} mismatches",
        s.checked,
        s.discarded,
        s.mismatches.len()
    );
    assert!(s.mismatches.is_empty(), "{}", s.mismatches.join("\n\n"));
    assert_eq!(s.checked, 300);
}
