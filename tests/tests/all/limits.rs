//! Inputs at and past weft's limits (issue 19), through the library on every backend: call
//! DAGs run in linear time, call chains and nested types too deep for the stack are
//! verifier/parser errors, host arrays whose shape does not match their data (a lying file
//! header) and launches too large for memory are errors, never out-of-bounds accesses or
//! allocation aborts; kernel stores into an empty buffer do nothing.

use std::sync::Arc;
use weft_fuzz::stress::{doubling_dag, sequential_loops, straight_line};
use weft_ir::{Const, HostArray, Input, Interpreter, KernelArg, KernelGrid, Module, Type};
use weft_runtime::{Backend, CpuDevice, Device, DeviceOptions, HostCompiler};

/// Cranelift, LLVM and, where a GPU and driver are present, CUDA (else a message says why
/// it is skipped).
fn devices() -> Vec<(&'static str, Device)> {
    let mut backends = vec![Backend::Cranelift, Backend::Llvm];
    match weft_tests::filetest::cuda_device() {
        Ok(_) => backends.push(Backend::Cuda),
        Err(e) => eprintln!("limits: skipping cuda: {e}"),
    }
    backends
        .into_iter()
        .map(|b| {
            let dev =
                Device::open(b, &DeviceOptions::default()).unwrap_or_else(|e| panic!("{b}: {e}"));
            (b.name(), dev)
        })
        .collect()
}

fn module(src: &str) -> Module {
    weft_ir::parse_and_verify(src).unwrap_or_else(|e| panic!("{e:?}"))
}

#[test]
fn a_call_dag_with_2_to_the_40_paths_runs_on_every_backend() {
    let m = module(&doubling_dag(40));
    let xs: Vec<f32> = (0..37).map(|i| i as f32 * 0.25 - 3.0).collect();
    let ins = [Input::Array(Arc::new(HostArray::from_f32(&xs)))];
    let want: Vec<f32> = xs.iter().map(|x| x * 1.5 * 2f32.powi(40)).collect();
    let interp = Interpreter::new(&m)
        .apply("p0", &ins, None)
        .expect("interp");
    assert_eq!(interp[0].to_f32(), want, "interp");
    for (name, dev) in devices() {
        let out = dev.apply(&m, "p0", &ins, None).expect(name);
        assert_eq!(out[0].data, interp[0].data, "{name}");
    }
    // What `weft compose` does: inline (linear in the DAG's size), then compose.
    let mut flat = m.clone();
    weft_ir::passes::inline::inline_module(&mut flat);
    let p0 = flat.get("p0").expect("p0");
    assert!(p0.num_ops() < 1000, "inlining made {} ops", p0.num_ops());
    weft_ir::algebra::compose(p0, p0).expect("compose");
}

#[test]
fn call_chains_deeper_than_the_limit_are_verifier_errors() {
    let chain = |n: usize| {
        let mut s = String::new();
        for i in 0..n {
            s += &format!(
                "program @p{i}(%x: f32) -> (f32) {{\n  %r: f32 = call @p{}(%x)\n  return %r\n}}\n",
                i + 1
            );
        }
        s + &format!("program @p{n}(%x: f32) -> (f32) {{\n  return %x\n}}\n")
    };
    let limit = weft_ir::verify::MAX_CALL_DEPTH;
    let ok = module(&chain(limit - 1));
    let x = [Input::Array(Arc::new(HostArray::from_f32(&[2.5])))];
    for (name, dev) in devices() {
        let out = dev.apply(&ok, "p0", &x, None).expect(name);
        assert_eq!(out[0].to_f32(), vec![2.5], "{name}");
    }
    for n in [limit, 5000] {
        let e = weft_ir::parse_and_verify(&chain(n)).expect_err("too deep");
        let text = format!("{e:?}");
        assert!(
            text.contains(&format!("calls nest at most {limit} deep")),
            "{text}"
        );
    }
}

#[test]
fn nested_array_types_are_a_parse_error_at_any_depth() {
    for n in [2, 30_000] {
        let ty = format!("{}f32{}", "array<1 x ".repeat(n), ">".repeat(n));
        let src =
            format!("program @n(%a: {ty}) -> (f32) {{\n  %c: f32 = const 1.0\n  return %c\n}}\n");
        let e = weft_ir::parse_and_verify(&src).expect_err("nested arrays");
        let text = format!("{e:?}");
        assert!(
            text.contains("array elements must be scalars or tuples"),
            "{text}"
        );
    }
}

const READ: &str = "
program @g(%m: array<2 x f32, clamp>, uniform %i: <2 x i64>) -> (f32, <2 x i64>) {
  %r: f32 = read %m, %i
  %e: <2 x i64> = extent %m
  return %r, %e
}
";

/// Arrays whose shapes do not match their data: element counts that wrap to 0 and to 1 in
/// unchecked arithmetic, and a plain lie.
fn lying_arrays() -> Vec<HostArray> {
    let f32s = |shape: Vec<usize>, n: usize| HostArray {
        elem: Type::f32(),
        shape,
        data: vec![0; n],
    };
    vec![
        f32s(vec![1 << 32, 1 << 32], 0),
        f32s(vec![usize::MAX, usize::MAX], 1),
        f32s(vec![4, 4], 15),
        f32s(vec![0, usize::MAX], 0),
    ]
}

#[test]
fn arrays_whose_shape_does_not_match_their_data_are_launch_errors() {
    let m = module(READ);
    let index = Input::Uniform(Const::from_lanes(
        Type::tuple(weft_ir::ScalarType::I64, 2).expect("tuple"),
        &[5, 5],
    ));
    for bad in lying_arrays() {
        let ins = [Input::Array(Arc::new(bad.clone())), index.clone()];
        let shape = Some(&[3usize][..]);
        let e = Interpreter::new(&m)
            .apply("g", &ins, shape)
            .expect_err("interp");
        assert!(e.to_string().contains("`m`"), "interp: {e}");
        for (name, dev) in devices() {
            let e = dev.apply(&m, "g", &ins, shape).expect_err(name);
            assert!(e.to_string().contains("`m`"), "{name}: {e}");
        }
    }
}

const STORE: &str = "
kernel @k(buffer %a: array<2 x f32>) {
  %i: <2 x i32> = const (5, 5)
  %v: f32 = const 7.0
  store %a, %i, %v
  %j: <2 x i32> = const (0, 0)
  store %a, %j, %v
  return
}
";

#[test]
fn kernel_stores_never_reach_past_a_buffer() {
    let m = module(STORE);
    let grid = KernelGrid::new(&[1], &[1]).expect("grid");
    // An empty buffer: both stores are out of range and do nothing.
    let empty = HostArray::zeros(Type::f32(), &[0, 5]);
    let mut b = empty.clone();
    Interpreter::new(&m)
        .run_kernel("k", &mut [KernelArg::Buffer(&mut b)], &grid)
        .expect("interp");
    assert_eq!(b, empty);
    for (name, dev) in devices() {
        let mut b = empty.clone();
        dev.run_kernel(&m, "k", &mut [KernelArg::Buffer(&mut b)], &grid)
            .expect(name);
        assert_eq!(b, empty, "{name}");
    }
    // Buffers whose shape lies about their data are refused before the kernel runs.
    for bad in lying_arrays() {
        let mut b = bad.clone();
        let e = Interpreter::new(&m)
            .run_kernel("k", &mut [KernelArg::Buffer(&mut b)], &grid)
            .expect_err("interp");
        assert!(e.to_string().contains("`a`"), "interp: {e}");
        for (name, dev) in devices() {
            let mut b = bad.clone();
            let e = dev
                .run_kernel(&m, "k", &mut [KernelArg::Buffer(&mut b)], &grid)
                .expect_err(name);
            assert!(e.to_string().contains("`a`"), "{name}: {e}");
        }
    }
}

#[test]
fn launches_too_large_for_memory_are_errors() {
    let m = module("program @z() -> (f32) {\n  %c: f32 = const 1.0\n  return %c\n}\n");
    for shape in [
        vec![100_000, 100_000, 100_000],
        vec![1 << 52], // 16 PiB of f32: no machine has it (10^10 fits a 128 GiB host)
        vec![1 << 40, 1 << 40],
    ] {
        let e = Interpreter::new(&m)
            .apply("z", &[], Some(&shape))
            .expect_err("interp");
        assert!(
            e.to_string().contains("too large to allocate"),
            "interp: {e}"
        );
        for (name, dev) in devices() {
            let e = dev.apply(&m, "z", &[], Some(&shape)).expect_err(name);
            // The GPU may report its own allocation failure (the driver names the call).
            let msg = e.to_string();
            assert!(
                msg.contains("too large to allocate")
                    || (name == "cuda" && msg.contains("cuMemAlloc")),
                "{name}: {e}"
            );
        }
    }
    let e = Interpreter::new(&m)
        .apply("z", &[], Some(&[1, 2, 3, 4]))
        .expect_err("4 axes");
    assert!(e.to_string().contains("launches have 1 to 3"), "{e}");
    for (name, dev) in devices() {
        let e = dev
            .apply(&m, "z", &[], Some(&[1, 2, 3, 4]))
            .expect_err(name);
        assert!(
            e.to_string().contains("launches have 1 to 3"),
            "{name}: {e}"
        );
    }
}

/// Programs past the LLVM backend's size thresholds (thousands of sequential loops; a
/// 40,000-op chain) compile at reduced effort (weft_backend_llvm::Effort; minutes at full
/// effort) and give the interpreter's bits on every backend.
#[test]
fn very_large_programs_compile_and_give_the_interpreters_bits() {
    let xs: Vec<f32> = (0..37).map(|i| i as f32 * 0.37 - 5.0).collect();
    let ys: Vec<f32> = (0..37).map(|i| 1.0 - i as f32 * 0.11).collect();
    let arr = |v: &[f32]| Input::Array(Arc::new(HostArray::from_f32(v)));
    for (what, src, ins) in [
        (
            "3,000 sequential loops",
            sequential_loops(3000),
            vec![arr(&xs)],
        ),
        (
            "a 40,000-op chain",
            straight_line(40_000),
            vec![arr(&xs), arr(&ys)],
        ),
    ] {
        let m = module(&src);
        let want = Interpreter::new(&m).apply("p", &ins, None).expect(what);
        for (name, dev) in devices() {
            let got = dev
                .apply(&m, "p", &ins, None)
                .unwrap_or_else(|e| panic!("{what} on {name}: {e}"));
            assert_eq!(got[0].data, want[0].data, "{what} on {name}");
        }
    }
}

/// Every LLVM effort level (weft_backend_llvm::Effort) computes the interpreter's bits on the
/// fuzzer's programs: the reduced levels are taken only by very large programs, so they are
/// forced here on ordinary ones.
#[test]
fn every_llvm_effort_gives_the_interpreters_bits() {
    use weft_backend_llvm::{Effort, Options};
    use weft_fuzz::oracle::{check, oracle, Check, Devices, Oracle, Target};
    for effort in [Effort::Reduced, Effort::Minimal] {
        let mut devs = Devices::new(&[]);
        devs.set(
            Target::Llvm,
            weft_runtime::Device::Cpu(CpuDevice::with_compiler(HostCompiler::Llvm(Options {
                effort,
                ..Default::default()
            }))),
        );
        let (mut checked, mut failures) = (0, Vec::new());
        for i in 0..150 {
            let c = weft_fuzz::runner::case_at(23, i).expect("generated case");
            let Ok(Oracle::Outputs(want)) = oracle(&c) else {
                continue;
            };
            match check(&c, Target::Llvm, &want, &devs) {
                Check::Skipped => {}
                Check::Same => checked += 1,
                Check::Differs(d) => failures.push(format!("case {i}: {d}")),
            }
        }
        assert!(failures.is_empty(), "{effort:?}: {}", failures.join("\n"));
        assert!(checked >= 100, "{effort:?}: only {checked} cases checked");
        println!("llvm at {effort:?}: {checked} fuzz cases give the interpreter's bits");
    }
}
