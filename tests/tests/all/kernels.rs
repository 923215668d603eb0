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
        weft_tests::filetest::llvm_device()?
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

/// The devices kernels run on here: the interpreter, cranelift and llvm, and the GPU when
/// `WEFT_FILETEST_BACKENDS` names cuda and one is present.
pub(crate) fn dsl_devices() -> Vec<weft::Device> {
    let mut ds = vec![
        weft::Device::interp(),
        weft::Device::cpu_cranelift(),
        weft::Device::cpu_llvm(),
    ];
    if active_backends().contains(&Backend::Cuda) {
        ds.push(weft::Device::cuda(0).expect("cuda device"));
    }
    ds
}

/// A tiled matrix multiplication recorded with the kernel DSL (MC#'s example: `Shared2D`
/// tiles, `thread_index`, `block_index`, `sync_threads`) gives the host's product on every
/// device, and its text runs like the recorded kernel.
#[test]
fn dsl_tiled_matmul_runs_on_every_device() {
    use weft::dsl::*;
    use weft::Array;
    const T: i32 = 8;
    let k = Kernel::record_named("dsl_matmul", || {
        let n = Param::uniform::<Value1i>("n");
        let a = InArray::<2, Value1f>::named("a", Boundary::Clamp);
        let b = InArray::<2, Value1f>::named("b", Boundary::Clamp);
        let c = Buffer::<2, Value1f>::named("c");
        let ta = Shared2D::<Value1f>::new([T as usize, T as usize]);
        let tb = Shared2D::<Value1f>::new([T as usize, T as usize]);
        let t = thread_index::<2>();
        let g = block_index::<2>();
        let (tx, ty) = (t.x(), t.y());
        let row = g.y() * T + &ty;
        let col = g.x() * T + &tx;
        let acc = Value1f::from(0.0);
        for_(0, &n / T, |kk| {
            let k0 = &kk * T;
            ta.store(
                Value2i::from_lanes([&ty, &tx]),
                a.read(Value2i::from_lanes([&row, &(&k0 + &tx)])),
            );
            tb.store(
                Value2i::from_lanes([&ty, &tx]),
                b.read(Value2i::from_lanes([&(&k0 + &ty), &col])),
            );
            sync_threads();
            for_(0, T, |j| {
                acc.assign(
                    &acc + ta.read(Value2i::from_lanes([&ty, &j]))
                        * tb.read(Value2i::from_lanes([&j, &tx])),
                );
            });
            sync_threads();
        });
        c.store(Value2i::from_lanes([&row, &col]), &acc);
    })
    .expect("record");
    let n = 24usize;
    let av: Vec<f32> = noise(n * n, 5).iter().map(|x| (x * 8.0).round()).collect();
    let bv: Vec<f32> = noise(n * n, 6).iter().map(|x| (x * 8.0).round()).collect();
    let mut want = vec![0f32; n * n];
    for i in 0..n {
        for j in 0..n {
            want[i * n + j] = (0..n).map(|l| av[i * n + l] * bv[l * n + j]).sum();
        }
    }
    let a = Array::from_vec([n, n], av).expect("a");
    let b = Array::from_vec([n, n], bv).expect("b");
    let g = (n / T as usize) as u32;
    for dev in dsl_devices() {
        let mut c = Array::filled([n, n], -1.0f32).expect("c");
        k.launch_on(
            &dev,
            &[g, g],
            &[T as u32, T as u32],
            &mut [
                KernelArg::value(n as i32),
                KernelArg::array(&a),
                KernelArg::array(&b),
                KernelArg::buffer(&mut c),
            ],
        )
        .unwrap_or_else(|e| panic!("{dev}: {e}"));
        assert_eq!(c.to_vec().expect("c"), want, "{dev}");
        println!("dsl_matmul on {dev}: the host's product");
    }
    // The text parses back to a kernel that `weft run` could take.
    let m = weft_ir::parse_and_verify(&k.text()).expect("text parses");
    assert_eq!(
        m.get("dsl_matmul").expect("kernel").kind,
        weft_ir::ProgramKind::Kernel
    );
}

/// Atomics, `clock`, and `grid_dim`/`block_dim` from the DSL: a histogram by `atomic_add`
/// on a buffer, a global maximum by `atomic_max`, and a thread count.
#[test]
fn dsl_atomics_count_on_every_device() {
    use weft::dsl::*;
    use weft::Array;
    let k = Kernel::record(|| {
        let x = InArray::<1, Value1i>::named("x", Boundary::Clamp);
        let hist = Buffer::<1, Value1i>::named("hist");
        let top = Buffer::<1, Value1i>::named("top");
        let id = block_index::<1>() * block_dim::<1>() + thread_index::<1>();
        let v = x.read(&id);
        hist.atomic_add(&v % 4, 1);
        top.atomic_max(0, &v);
        top.atomic_add(1, 1);
        let threads = grid_dim::<1>() * block_dim::<1>();
        if_(id.eq(0), || top.store(2, &threads));
        let t0 = clock();
        let _ = &t0 - &t0;
    })
    .expect("record");
    let xs: Vec<i32> = (0..96).map(|i| (i * 37) % 101).collect();
    let x = Array::from_vec([96], xs.clone()).expect("x");
    let mut want_hist = vec![0i32; 4];
    for v in &xs {
        want_hist[(v % 4) as usize] += 1;
    }
    for dev in dsl_devices() {
        let mut hist = Array::filled([4], 0i32).expect("hist");
        let mut top = Array::filled([3], 0i32).expect("top");
        k.launch_on(
            &dev,
            &[3],
            &[32],
            &mut [
                KernelArg::array(&x),
                KernelArg::buffer(&mut hist),
                KernelArg::buffer(&mut top),
            ],
        )
        .unwrap_or_else(|e| panic!("{dev}: {e}"));
        assert_eq!(hist.to_vec().expect("hist"), want_hist, "{dev}");
        let top = top.to_vec().expect("top");
        assert_eq!(top, vec![*xs.iter().max().expect("max"), 96, 96], "{dev}");
    }
}

/// Misuse of the kernel DSL is an error naming the place: `sync_threads` under control flow
/// that differs between threads (at the kernel's line), and a launch with the wrong
/// arguments (named).
#[test]
fn dsl_kernel_misuse_is_a_clear_error() {
    use weft::dsl::*;
    use weft::Array;
    let e = Kernel::record(|| {
        let t = thread_index::<1>();
        if_(t.lt(3), || {
            sync_threads();
        });
    })
    .err()
    .expect("divergent barrier");
    let msg = e.to_string();
    assert!(
        msg.contains("barrier") && msg.contains("kernels.rs"),
        "{msg}"
    );
    let k = Kernel::record_named("fill", || {
        let out = Buffer::<1, Value1f>::named("out");
        out.store(thread_index::<1>(), 1.0f32);
    })
    .expect("record");
    let e = k.launch(&[1], &[4], &mut []).expect_err("no arguments");
    assert!(
        e.to_string().contains("takes 1 arguments (out), got 0"),
        "{e}"
    );
    let x = Array::filled([4], 0.0f32).expect("x");
    let e = k
        .launch(&[1], &[4], &mut [KernelArg::array(&x)])
        .expect_err("an array for a buffer");
    assert!(e.to_string().contains("out"), "{e}");
    let mut wrong = Array::filled([4], 0i32).expect("wrong");
    let e = k
        .launch(&[1], &[4], &mut [KernelArg::buffer(&mut wrong)])
        .expect_err("i32 for f32");
    assert!(e.to_string().contains("out"), "{e}");
    let e = k
        .launch(&[1], &[2000], &mut [KernelArg::buffer(&mut wrong)])
        .expect_err("block too large");
    assert!(e.to_string().contains("1024"), "{e}");
}

/// `Kernel::launch` passes arrays without host copies (issue 21) and keeps arrays values: a
/// buffer whose storage another array shares is copied before the kernel writes it (the
/// other array keeps its contents), one held alone is written in place, and a launch that
/// fails leaves the buffer as it was — on every device.
#[test]
fn dsl_kernel_buffers_keep_value_semantics() {
    use weft::dsl::Value1f;
    use weft::dsl::{block_dim, block_index, thread_index, Buffer, InArray, Kernel, KernelArg};
    use weft::ir::Boundary;
    use weft::Array;
    let k = Kernel::record_named("double_into", || {
        let x = InArray::<1, Value1f>::named("x", Boundary::Clamp);
        let y = Buffer::<1, Value1f>::named("y");
        let i = block_index::<1>() * block_dim::<1>() + thread_index::<1>();
        y.store(&i, x.read(&i) * 2.0f32);
    })
    .unwrap();
    let n = 1000;
    let x: Array<1, f32> = Array::from_fn([n], |i| i as f32).unwrap();
    for d in dsl_devices() {
        let mut y: Array<1, f32> = Array::filled([n], -1.0).unwrap();
        let shared = y.clone();
        k.launch_on(
            &d,
            &[32],
            &[32],
            &mut [KernelArg::array(&x), KernelArg::buffer(&mut y)],
        )
        .unwrap();
        let want: Vec<f32> = (0..n).map(|i| 2.0 * i as f32).collect();
        assert_eq!(y.to_vec().unwrap(), want, "on {d}");
        assert_eq!(
            shared.to_vec().unwrap(),
            vec![-1.0; n],
            "shared storage on {d}"
        );
        // Alone now (on the CPU: written in place), from its own old contents.
        let old = y.to_vec().unwrap();
        let y_in: Array<1, f32> = Array::from_vec([n], old).unwrap();
        k.launch_on(
            &d,
            &[32],
            &[32],
            &mut [KernelArg::array(&y_in), KernelArg::buffer(&mut y)],
        )
        .unwrap();
        let want4: Vec<f32> = (0..n).map(|i| 4.0 * i as f32).collect();
        assert_eq!(y.to_vec().unwrap(), want4, "in place on {d}");
        // A bad launch (a block too large) fails and leaves the buffer as it was.
        let e = k.launch_on(
            &d,
            &[1],
            &[4096],
            &mut [KernelArg::array(&x), KernelArg::buffer(&mut y)],
        );
        assert!(e.is_err(), "block of 4096 on {d}");
        assert_eq!(y.to_vec().unwrap(), want4, "after a failed launch on {d}");
        // A result that lives only where it was computed (on a GPU: device memory held by
        // this array alone, written in place there); a clone taken before keeps its values.
        let mut z = d.scope(|| weft::maximum_array(&x)).unwrap();
        let z_before = z.clone();
        let mut w = d.scope(|| weft::maximum_array(&x)).unwrap();
        for (buf, what) in [(&mut z, "shared"), (&mut w, "alone")] {
            k.launch_on(
                &d,
                &[1],
                &[1],
                &mut [KernelArg::array(&x), KernelArg::buffer(buf)],
            )
            .unwrap();
            assert_eq!(buf.to_vec().unwrap(), vec![0.0], "{what} on {d}");
        }
        assert_eq!(z_before.to_vec().unwrap(), vec![999.0], "clone on {d}");
    }
}
