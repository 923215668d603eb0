//! The program algebra's demonstrations (issue 5, DESIGN §4) as tests on IR counts and
//! results: fusion by composition, partial evaluation of a sparse mask, specialization,
//! and free interface adaptation. Their timings are benchmark rows (weft-bench).

use std::sync::Arc;
use weft_ir::algebra::{bind_array, compose, keep, swizzle_inputs};
use weft_ir::interp::{HostArray, Input, Interpreter};
use weft_ir::passes::run_pipeline;
use weft_ir::passes::util::count_ops;
use weft_ir::{parse_module, print_program, Const, Module, Opcode, Program, ScalarType, Type};
use weft_runtime::{CpuDevice, HostCompiler};

fn example(name: &str) -> Module {
    let path = format!(
        "{}/../examples/ir/algebra/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let src = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let m = parse_module(&src).unwrap_or_else(|e| panic!("{path}: {e:?}"));
    weft_ir::verify_module(&m).unwrap_or_else(|e| panic!("{path}: {e:?}"));
    m
}

fn program(m: &Module, name: &str) -> Program {
    m.get(name).unwrap_or_else(|| panic!("no @{name}")).clone()
}

/// `p` alone in a module, optimized with `pipeline`.
fn optimized(p: Program, pipeline: &str) -> Module {
    let mut m = Module { programs: vec![p] };
    run_pipeline(&mut m, pipeline).expect("pipeline runs");
    m
}

/// Bit patterns of every output, element by element.
fn bits(outs: &[HostArray]) -> Vec<Vec<u64>> {
    outs.iter().map(|a| a.data.clone()).collect()
}

/// Runs program `name` of `m` on the interpreter, Cranelift and LLVM; all must agree.
fn run_everywhere(
    m: &Module,
    name: &str,
    inputs: &[Input],
    shape: Option<&[usize]>,
) -> Vec<Vec<u64>> {
    let want = Interpreter::new(m)
        .apply(name, inputs, shape)
        .expect("interpreter");
    for dev in [
        CpuDevice::new(),
        CpuDevice::with_compiler(HostCompiler::Llvm(Default::default())),
    ] {
        let got = dev.apply(m, name, inputs, shape).expect("compiled run");
        assert_eq!(bits(&got), bits(&want), "@{name}: compiled result differs");
    }
    bits(&want)
}

fn particles(n: usize) -> Vec<Input> {
    let v3 = |f: &dyn Fn(usize, usize) -> f32| {
        let mut a = HostArray::zeros(Type::tuple(ScalarType::F32, 3).unwrap(), &[n]);
        for i in 0..n {
            for l in 0..3 {
                a.data[i * 3 + l] = f(i, l).to_bits() as u64;
            }
        }
        Input::Array(Arc::new(a))
    };
    let age: Vec<f32> = (0..n).map(|i| (i % 97) as f32 * 0.05).collect();
    vec![
        v3(&|i, l| ((i * 7 + l * 3) % 11) as f32 * 0.1 - 0.2),
        v3(&|i, l| ((i * 5 + l) % 13) as f32 - 6.0),
        Input::Array(Arc::new(HostArray::from_f32(&age))),
        Input::Uniform(Const::f32(0.05)),
    ]
}

#[test]
fn a_fusion_by_composition() {
    let m = example("particles.weft");
    let stages = compose(&program(&m, "position"), &program(&m, "velocity")).unwrap();
    let mut fused = compose(&program(&m, "reset"), &stages).unwrap();
    fused.name = "fused".into();
    let pipeline = "inline,fold,cse,dce";
    let fused = optimized(fused, pipeline);
    let hand = optimized(program(&m, "evolve"), pipeline);
    // One pass, and the same work as the hand-written program, op for op.
    for op in weft_ir::OP_TABLE.iter().map(|i| i.opcode) {
        assert_eq!(
            count_ops(&fused.programs[0], op),
            count_ops(&hand.programs[0], op),
            "count of `{}` differs:\n{}",
            op.mnemonic(),
            print_program(&fused.programs[0])
        );
    }
    let ins = particles(1000);
    let a = run_everywhere(&fused, "fused", &ins, None);
    let b = run_everywhere(&hand, "evolve", &ins, None);
    assert_eq!(a, b);
    // The stages one after another through memory compute the same.
    let mut staged = ins.clone();
    for stage in ["velocity", "position", "reset"] {
        let outs = Interpreter::new(&m).apply(stage, &staged, None).unwrap();
        let dt = staged[3].clone();
        staged = outs
            .into_iter()
            .map(|o| Input::Array(Arc::new(o)))
            .collect();
        staged.push(dt);
    }
    let staged: Vec<Vec<u64>> = staged[..3]
        .iter()
        .map(|i| match i {
            Input::Array(a) => a.data.clone(),
            Input::Uniform(_) => unreachable!(),
        })
        .collect();
    assert_eq!(a, staged);
}

/// A ring of radius `r` in a `(2r+1)²` mask: the taps at distance r ± 0.5 from the centre,
/// each weighing 1 / (number of taps).
pub fn ring_mask(r: usize) -> HostArray {
    let k = 2 * r + 1;
    let mut m = HostArray::zeros(Type::scalar(ScalarType::F32), &[k, k]);
    let on = |y: usize, x: usize| {
        let d = ((y as f64 - r as f64).powi(2) + (x as f64 - r as f64).powi(2)).sqrt();
        (d - r as f64).abs() < 0.5
    };
    let n = (0..k * k).filter(|&i| on(i / k, i % k)).count();
    for i in 0..k * k {
        if on(i / k, i % k) {
            m.data[i] = (1.0f32 / n as f32).to_bits() as u64;
        }
    }
    m
}

fn synthetic_image(h: usize, w: usize) -> HostArray {
    let mut a = HostArray::zeros(Type::scalar(ScalarType::U8), &[h, w]);
    for y in 0..h {
        for x in 0..w {
            a.data[y * w + x] = ((x * 31 + y * 17 + x * y) % 256) as u64;
        }
    }
    a
}

#[test]
fn b_partial_evaluation_of_a_sparse_mask() {
    let m = example("conv.weft");
    let conv = program(&m, "conv");
    let mask = ring_mask(7);
    let nonzero = mask.data.iter().filter(|&&b| b != 0).count();
    assert!(
        nonzero > 0 && nonzero < 225 / 3,
        "a sparse ring: {nonzero} taps"
    );
    let bound = bind_array(&conv, "mask", &mask).expect("binds");
    let bound = optimized(bound, "inline,fold,cse,licm,dce");
    let p = &bound.programs[0];
    // The multiply count is the number of nonzero taps; no loop and no mask read is left.
    assert_eq!(
        count_ops(p, Opcode::Mul) + count_ops(p, Opcode::Fma),
        nonzero
    );
    assert_eq!(count_ops(p, Opcode::For), 0);
    assert_eq!(count_ops(p, Opcode::Read), nonzero);
    assert_eq!(p.params.len(), 1, "the mask input is gone");
    // Bit-identical to the unbound program fed the same mask (zero taps add exactly +0).
    let img = Arc::new(synthetic_image(40, 50));
    let unbound = Interpreter::new(&m)
        .apply(
            "conv",
            &[
                Input::Array(img.clone()),
                Input::Array(Arc::new(ring_mask(7))),
            ],
            Some(&[40, 50]),
        )
        .unwrap();
    let tight = run_everywhere(&bound, "conv", &[Input::Array(img)], Some(&[40, 50]));
    assert_eq!(tight, bits(&unbound));
}

#[test]
fn c_specialization_keeps_one_cone() {
    let m = example("stats.weft");
    let full = optimized(program(&m, "stats"), "inline,fold,cse,dce");
    let poly = keep(&program(&m, "stats"), &["poly"]).unwrap();
    let poly = optimized(poly, "inline,fold,cse,dce");
    let p = &poly.programs[0];
    assert_eq!(p.outputs.len(), 1);
    assert_eq!(p.params.len(), 1, "%y feeds only the dropped outputs");
    for gone in [
        Opcode::Length,
        Opcode::Dot,
        Opcode::Atan2,
        Opcode::Div,
        Opcode::Sub,
    ] {
        assert_eq!(count_ops(p, gone), 0, "`{}` left", gone.mnemonic());
    }
    // extract, three constants, three fmas, exp, return.
    let total = |p: &Program| {
        let mut n = 0;
        p.walk(&mut |_| n += 1);
        n
    };
    assert_eq!(total(p), 9, "{}", print_program(p));
    // The whole program: 17 ops (sub, 3 length, dot, mul, div, atan2 and the poly cone).
    assert_eq!(total(&full.programs[0]), 17);
    let x: Vec<f32> = (0..64).map(|i| i as f32 * 0.37 - 9.0).collect();
    let mut xa = HostArray::zeros(Type::tuple(ScalarType::F32, 4).unwrap(), &[16]);
    for (d, s) in xa.data.iter_mut().zip(&x) {
        *d = s.to_bits() as u64;
    }
    let xa = Input::Array(Arc::new(xa));
    let whole = run_everywhere(&full, "stats", &[xa.clone(), xa.clone()], None);
    let one = run_everywhere(&poly, "stats", &[xa], None);
    assert_eq!(one[0], whole[2]);
}

/// A program's text with every value name but the parameters' replaced by numbers.
fn anonymous(p: &Program) -> String {
    let mut q = weft_ir::passes::util::compact(p);
    for v in 0..q.num_values() {
        let v = weft_ir::Value(v as u32);
        if !matches!(q.value(v).def, weft_ir::ValueDef::Param(_)) {
            q.value_mut(v).name = None;
        }
    }
    q.name = "p".into();
    print_program(&q)
}

#[test]
fn d_interface_adaptation_is_free() {
    let m = example("adapt.weft");
    let mut adapted = swizzle_inputs(&program(&m, "lerp"), &[2, 0, 1]).unwrap();
    adapted.name = "lerp_tab".into();
    let pipeline = "inline,fold,cse,dce";
    let adapted = optimized(adapted, pipeline);
    let hand = optimized(program(&m, "lerp_tab"), pipeline);
    assert_eq!(
        anonymous(&adapted.programs[0]),
        anonymous(&hand.programs[0])
    );
    let clif = |m: &Module| {
        weft_backend_cranelift::compile_with_clif(m, "lerp_tab")
            .unwrap()
            .clif
            .clone()
    };
    assert_eq!(clif(&adapted), clif(&hand), "the same machine code");
}
