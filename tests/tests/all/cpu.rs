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
    l.run().expect("runs");
    let first = l.outputs();
    l.run().expect("runs again");
    assert_eq!(l.outputs(), first);
    assert_eq!(l.len(), 10_000);
}

/// A program reading array `a` at `index + off` (rank `r`) and returning it together with
/// the coordinates `index` gave.
fn stencil_src(r: usize, ty: &str, mode: &str, off: &[i32]) -> String {
    let it = if r == 1 {
        "i32".to_string()
    } else {
        format!("<{r} x i32>")
    };
    let lit = if r == 1 {
        off[0].to_string()
    } else {
        format!(
            "({})",
            off.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    format!(
        "program @s(%a: array<{r} x {ty}, {mode}>) -> (v: {ty}, at: {it}) {{
  %p: {it} = index
  %o: {it} = const {lit}
  %q: {it} = add %p, %o
  %v: {ty} = read %a, %q
  return %v, %p
}}
"
    )
}

fn pattern(elem: Type, shape: &[usize]) -> HostArray {
    let n: usize = shape.iter().product();
    let (s, lanes) = elem.lanes().expect("scalar or tuple");
    // Element-major lanes: a tuple's lanes get different values.
    let data = (0..(n * lanes as usize) as u64)
        .map(|i| {
            let x = i.wrapping_mul(2654435761) % 1000;
            if s.is_float() {
                let v = x as f64 * 0.25 - 7.0;
                match s.bits() {
                    64 => v.to_bits(),
                    32 => (v as f32).to_bits() as u64,
                    _ => weft_ir::konst::f16_from_f64(v).to_bits() as u64,
                }
            } else {
                weft_ir::konst::canon(s, x.wrapping_sub(500))
            }
        })
        .collect();
    HostArray {
        elem,
        shape: shape.to_vec(),
        data,
    }
}

#[test]
fn index_and_stencil_reads_match_the_interpreter_on_wide_launches() {
    // Launch shapes whose last axis holds a whole SIMD block or more, where `index` takes its
    // carry path and reads at `index + const` may load whole vectors, around the edges of
    // that path: the last axis 8, 9, 13, 16, 33; offsets that keep blocks inside the array,
    // cross its ends, or wrap rows; every boundary mode; 32- and 64-bit and narrow types.
    let devs = [
        CpuDevice::new(),
        CpuDevice::with_compiler(weft_runtime::HostCompiler::Llvm(Default::default())),
    ];
    let mut cases = 0;
    for shape in [
        vec![40usize],
        vec![3, 8],
        vec![5, 9],
        vec![4, 13],
        vec![2, 16],
        vec![3, 2, 33],
        vec![2, 3, 8],
    ] {
        let r = shape.len();
        for ty in ["f32", "i32", "f64", "u64", "i16", "f16"] {
            for mode in ["clamp", "repeat", "constant(0)"] {
                for off in [0i32, 1, -1, 7, -8, 9] {
                    let mut o = vec![0i32; r];
                    o[r - 1] = off;
                    if r > 1 {
                        o[0] = off.signum();
                    }
                    let src = stencil_src(r, ty, mode, &o);
                    let m =
                        weft_ir::parse_and_verify(&src).unwrap_or_else(|e| panic!("{e}\n{src}"));
                    let elem = m.programs[0].outputs[0].ty;
                    let a = Arc::new(pattern(elem, &shape));
                    let ins = [Input::Array(a)];
                    let want = Interpreter::new(&m)
                        .apply("s", &ins, Some(&shape))
                        .expect("interp");
                    for d in &devs {
                        let got = d.apply(&m, "s", &ins, Some(&shape)).expect("compiled");
                        assert_eq!(got, want, "{shape:?} {ty} {mode} {o:?}\n{src}");
                    }
                    cases += 1;
                }
            }
        }
    }
    assert_eq!(cases, 7 * 6 * 3 * 6);
}

/// Uniform work the devices lift into a prologue (DESIGN §4): `%s = a * a + 1`.
const LIFTED: &str = "
program @scale(uniform %a: f32, %x: f32) -> (y: f32) {
  %one: f32 = const 1.0
  %aa: f32 = mul %a, %a
  %s: f32 = add %aa, %one
  %y: f32 = mul %x, %s
  return %y
}
";

/// One preparation path: a prepared program is planned once per signature and uniform
/// values; relaunching it with other arrays of the same signature reuses the plan, a new
/// uniform value re-runs the prologue, and a bad argument is still caught.
#[test]
fn prepared_programs_plan_once_per_signature() {
    let m = weft_ir::parse_and_verify(LIFTED).expect("verifies");
    let dev = CpuDevice::new();
    let prog = dev.prepare(&m, "scale").expect("prepares");
    // The kernel takes the lifted value as one more uniform.
    let k = prog
        .prepared()
        .kernel_module()
        .get("scale")
        .expect("kernel");
    assert_eq!(k.params.len(), 3, "lifted kernel: a, x, then s");
    assert!(Arc::ptr_eq(
        &prog,
        &dev.prepare(&m, "scale").expect("cached")
    ));
    let run = |a: f32, x: &[f32]| {
        let ins = vec![
            Input::Uniform(Const::f32(a)),
            Input::Array(Arc::new(HostArray::from_f32(x))),
        ];
        let want = Interpreter::new(&m)
            .apply("scale", &ins, None)
            .expect("interp");
        let mut l = dev.launch_prepared(&prog, &ins, None).expect("launch");
        l.run().expect("run");
        assert_eq!(l.outputs(), want, "a = {a}");
        let descs: Vec<_> = ins.iter().map(weft_ir::launch::ArgDesc::of).collect();
        prog.prepared().plan(&descs, None).expect("plan")
    };
    let p1 = run(2.0, &[1.0, 2.0, 3.0]);
    let p2 = run(2.0, &[4.0, 5.0, 6.0]);
    assert!(Arc::ptr_eq(&p1, &p2), "same signature: the plan is reused");
    assert_eq!(p1.extra, vec![Const::f32(5.0)]);
    let p3 = run(3.0, &[4.0, 5.0, 6.0]);
    assert_eq!(
        p3.extra,
        vec![Const::f32(10.0)],
        "a new uniform re-runs the prologue"
    );
    let p4 = run(3.0, &[1.0; 7]);
    assert_eq!(p4.shape, vec![7]);
    let bad = vec![
        Input::Uniform(Const::f32(1.0)),
        Input::Uniform(Const::f32(1.0)),
    ];
    let e = dev
        .launch_prepared(&prog, &bad, None)
        .err()
        .expect("a uniform for a varying input");
    assert!(e.to_string().contains("`x`"), "{e}");
}

/// A program adding three stencil reads: `a` at `index + o1` and `index + o2`, and `b` (whose
/// shape may differ from the launch's) at `index + o3`, in that order.
fn three_reads_src(r: usize, ty: &str, mode: &str, offs: [&[i32]; 3]) -> String {
    let it = if r == 1 {
        "i32".to_string()
    } else {
        format!("<{r} x i32>")
    };
    let lit = |off: &[i32]| {
        let xs: Vec<String> = off.iter().map(|x| x.to_string()).collect();
        if r == 1 {
            xs[0].clone()
        } else {
            format!("({})", xs.join(", "))
        }
    };
    format!(
        "program @s(%a: array<{r} x {ty}, {mode}>, %b: array<{r} x {ty}, {mode}>) -> (v: {ty}) {{
  %p: {it} = index
  %o1: {it} = const {}
  %o2: {it} = const {}
  %o3: {it} = const {}
  %q1: {it} = add %p, %o1
  %q2: {it} = sub %p, %o2
  %q3: {it} = add %o3, %p
  %x: {ty} = read %a, %q1
  %y: {ty} = read %a, %q2
  %z: {ty} = read %b, %q3
  %xy: {ty} = add %x, %y
  %v: {ty} = add %xy, %z
  return %v
}}
",
        lit(offs[0]),
        lit(offs[1]),
        lit(offs[2])
    )
}

/// Stencil launches split into an interior (offset reads, `passes::partition`) and a
/// border: every boundary mode, offsets up to ±3 on each axis, a second array larger or
/// smaller than the launch, shapes from smaller than the stencil to several blocks wide, and
/// element types of every storage class (4- and 8-byte lanes, narrow integers, f16, a tuple
/// of two planes) give the interpreter's bits on both CPU compilers.
#[test]
fn partitioned_stencils_match_the_interpreter() {
    let devs = [
        CpuDevice::new(),
        CpuDevice::with_compiler(weft_runtime::HostCompiler::Llvm(Default::default())),
    ];
    let cases = stencil_cases();
    for c in &cases {
        for d in &devs {
            let got = d
                .apply(&c.module, "s", &c.inputs, Some(&c.shape))
                .expect("compiled");
            assert_eq!(got, c.want, "{}", c.what);
        }
    }
    assert_eq!(cases.len(), 10 * 7 * 3);
}

/// A stencil case of [`stencil_cases`]: program `s` of `module` over `shape`.
pub(crate) struct StencilCase {
    pub module: weft_ir::Module,
    pub inputs: Vec<Input>,
    pub shape: Vec<usize>,
    /// The interpreter's outputs.
    pub want: Vec<HostArray>,
    /// The case, for failure messages.
    pub what: String,
}

/// Programs of three stencil reads (offsets up to ±3 per axis, one of them of a second array
/// larger or smaller than the launch) for every boundary mode, 10 shapes of rank 1–3 (from
/// smaller than the stencil to several blocks wide) and element types of every storage class
/// (4- and 8-byte lanes, narrow integers, f16, a tuple of two planes), with the interpreter's
/// results: 210 cases, each checked to have an interior variant of three offset reads.
pub(crate) fn stencil_cases() -> Vec<StencilCase> {
    let mut seed = 0x9e37_79b9_u64;
    let mut next = move |k: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % k
    };
    let mut cases = Vec::new();
    for shape in [
        vec![1usize],
        vec![5],
        vec![100],
        vec![3000],
        vec![2, 3],
        vec![37, 45],
        vec![9, 64],
        vec![70, 17],
        vec![3, 4, 40],
        vec![5, 6, 21],
    ] {
        let r = shape.len();
        for ty in ["f32", "i32", "f64", "i64", "u8", "f16", "<2 x f32>"] {
            let three = if ty.starts_with('<') {
                "constant((3, 3))"
            } else {
                "constant(3)"
            };
            for mode in ["clamp", "repeat", three] {
                let mut off = || -> Vec<i32> { (0..r).map(|_| next(7) as i32 - 3).collect() };
                let (o1, o2, o3) = (off(), off(), off());
                let bshape: Vec<usize> = shape
                    .iter()
                    .map(|&n| (n as i64 + [-2i64, 0, 3][next(3) as usize]).max(1) as usize)
                    .collect();
                let src = three_reads_src(r, ty, mode, [&o1, &o2, &o3]);
                let m = weft_ir::parse_and_verify(&src).unwrap_or_else(|e| panic!("{e}\n{src}"));
                let (prog, _) = weft_ir::passes::partition::interior_variant(&m.programs[0])
                    .expect("three stencil reads");
                assert_eq!(
                    weft_ir::passes::util::count_ops(&prog, weft_ir::Opcode::ReadOffset),
                    3
                );
                let elem = m.programs[0].outputs[0].ty;
                let inputs = vec![
                    Input::Array(Arc::new(pattern(elem, &shape))),
                    Input::Array(Arc::new(pattern(elem, &bshape))),
                ];
                let want = Interpreter::new(&m)
                    .apply("s", &inputs, Some(&shape))
                    .expect("interp");
                cases.push(StencilCase {
                    module: m,
                    inputs,
                    what: format!("{shape:?} b {bshape:?} {ty} {mode}\n{src}"),
                    shape: shape.clone(),
                    want,
                });
            }
        }
    }
    cases
}
