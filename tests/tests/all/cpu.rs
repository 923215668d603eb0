//! The CPU device (Cranelift): launches of 0, 1 and many elements, the parallel path, the
//! kernel cache, and agreement with the interpreter.

use std::sync::Arc;
use weft_ir::interp::{HostArray, Input, Interpreter};
use weft_ir::{Const, Type};
use weft_runtime::CpuDevice;

const SRC: &str = "
program @poly(uniform %a: f32, %x: f32, %n: i32) -> (y: f32, k: i32) {
  %one: f32 = const 1.0
  %z: i32 = const 0
  %s: i32 = const 1
  %y: f32 = for %i: i32 = %z to %n step %s iter(%acc: f32 = %one) {
    %t: f32 = mul %acc, %x
    %u: f32 = add %t, %a
    yield %u
  }
  %k: i32 = mul %n, %n
  return %y, %k
}
";

fn inputs(len: usize) -> Vec<Input> {
    let x: Vec<f32> = (0..len).map(|i| (i as f32) * 0.37 - 5.0).collect();
    let n = HostArray {
        elem: Type::i32(),
        shape: vec![len],
        data: (0..len).map(|i| ((i * 7919) % 23) as u64).collect(),
    };
    vec![
        Input::Uniform(Const::f32(0.5)),
        Input::Array(Arc::new(HostArray::from_f32(&x))),
        Input::Array(Arc::new(n)),
    ]
}

#[test]
fn compiled_matches_interpreter_for_any_length() {
    let m = weft_ir::parse_and_verify(SRC).expect("verifies");
    let dev = CpuDevice::new();
    // 0, 1, a partial block, whole blocks, and a launch large enough for the thread pool.
    for len in [0usize, 1, 3, 4, 5, 63, 1000, 50_001] {
        let ins = inputs(len);
        let want = Interpreter::new(&m)
            .apply("poly", &ins, None)
            .expect("interp");
        let got = dev.apply(&m, "poly", &ins, None).expect("cranelift");
        assert_eq!(got, want, "length {len}");
    }
    // One compile served every launch.
    assert_eq!(dev.cached(), 1);
}

#[test]
fn launch_errors_match_the_interpreter() {
    let m = weft_ir::parse_and_verify(SRC).expect("verifies");
    let mut ins = inputs(4);
    ins[2] = Input::Array(Arc::new(HostArray {
        elem: Type::i32(),
        shape: vec![5],
        data: vec![0; 5],
    }));
    let e = CpuDevice::new()
        .apply(&m, "poly", &ins, None)
        .expect_err("shape mismatch");
    assert!(e.to_string().contains("input `n`"), "{e}");
}

#[test]
fn prepared_launch_runs_repeatedly() {
    let m = weft_ir::parse_and_verify(SRC).expect("verifies");
    let dev = CpuDevice::new();
    let ins = inputs(10_000);
    let mut l = dev.launch(&m, "poly", &ins, None).expect("prepares");
    l.run();
    let first = l.outputs();
    l.run();
    assert_eq!(l.outputs(), first);
    assert_eq!(l.len(), 10_000);
}
