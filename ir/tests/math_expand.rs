//! The math expansion pass: expanded IR run by the interpreter agrees bit for bit with the
//! direct evaluator (`passes::math::eval`) on random and special inputs in f16, f32, f64 and
//! tuples; expanded modules verify, contain no math function, and round-trip through the
//! printer; math ops nested in control flow are expanded in place.

use std::sync::Arc;
use weft_ir::interp::{Arg, HostArray, Input, Interpreter};
use weft_ir::passes::math::{eval, has_math, is_math_function, MATH_FUNCTIONS};
use weft_ir::passes::{expand_math, expand_program};
use weft_ir::{
    parse_and_verify, parse_module, print_module, verify_module, Const, Module, Opcode, ScalarType,
    Type,
};

fn two_operands(op: Opcode) -> bool {
    matches!(op, Opcode::Pow | Opcode::Atan2)
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// Special lane bits of type `s`: zeros, infinities, NaN, ±1, subnormals, extremes,
/// multiples of pi/2 and the reduction threshold 2^30.
fn specials(s: ScalarType) -> Vec<u64> {
    let xs = [
        0.0,
        f64::INFINITY,
        f64::NAN,
        1.0,
        0.5,
        2.0,
        3.0,
        2.5,
        1e-310,
        5e-324,
        1e-40,
        6e-8,
        f64::MAX,
        3.4e38,
        65504.0,
        std::f64::consts::FRAC_PI_2,
        1e22,
        2f64.powi(30),
        709.8,
        -745.2,
        88.7,
        -103.9,
        1024.0,
        -1075.0,
    ];
    let mut out = Vec::new();
    for x in xs {
        for y in [x, -x] {
            out.push(match s {
                ScalarType::F16 => weft_ir::konst::f16_from_f64(y).to_bits() as u64,
                ScalarType::F32 => (y as f32).to_bits() as u64,
                _ => y.to_bits(),
            });
        }
    }
    out
}

/// Random lane bits of type `s`: half uniformly random patterns, half moderate values.
fn random(s: ScalarType, rng: &mut Rng) -> u64 {
    let r = rng.next();
    let moderate = (r >> 1).is_multiple_of(2);
    match s {
        ScalarType::F16 => r & 0xffff,
        ScalarType::F32 if moderate => {
            ((((r >> 8) as f64 / 2f64.powi(56)) * 40.0 - 20.0) as f32).to_bits() as u64
        }
        ScalarType::F32 => r & 0xffff_ffff,
        _ if moderate => (((r >> 11) as f64 / 2f64.powi(53)) * 40.0 - 20.0).to_bits(),
        _ => r,
    }
}

/// One program per (function, type): `@<op>_<ty>(%a: T[, %b: T]) -> (T)`.
fn module_for(ty: &str) -> Module {
    let mut src = String::new();
    for op in MATH_FUNCTIONS {
        let mn = op.mnemonic();
        if two_operands(op) {
            src += &format!(
                "program @{mn}(%a: {ty}, %b: {ty}) -> ({ty}) {{\n  %r: {ty} = {mn} %a, %b\n  return %r\n}}\n"
            );
        } else {
            src += &format!(
                "program @{mn}(%a: {ty}) -> ({ty}) {{\n  %r: {ty} = {mn} %a\n  return %r\n}}\n"
            );
        }
    }
    parse_and_verify(&src).expect("valid module")
}

/// Runs every function over `n` random plus the special inputs through the interpreter
/// (expanded IR) and compares each lane with `eval`, bit for bit.
fn agree(ty: &str, n: usize) {
    let m = module_for(ty);
    let interp = Interpreter::new(&m);
    assert!(
        !has_math(interp.module()),
        "the interpreter runs expanded IR"
    );
    verify_module(interp.module()).expect("expanded module verifies");
    let t = parse_module(&format!(
        "program @t(%a: {ty}) -> ({ty}) {{\n  return %a\n}}"
    ))
    .expect("type")
    .programs[0]
        .outputs[0]
        .ty;
    let (s, lanes) = t.lanes().expect("scalar or tuple");
    let lanes = lanes as usize;
    let mut rng = Rng(lanes as u64 * 31 + s as u64);
    for op in MATH_FUNCTIONS {
        let mut a_bits = specials(s);
        let mut b_bits: Vec<u64> = a_bits.iter().rev().copied().collect();
        // All pairs of specials for the binary functions.
        if two_operands(op) {
            let sp = specials(s);
            a_bits = sp.iter().flat_map(|&a| sp.iter().map(move |_| a)).collect();
            b_bits = sp.iter().flat_map(|_| sp.iter().copied()).collect();
        }
        while !a_bits.len().is_multiple_of(lanes) {
            a_bits.push(0);
            b_bits.push(0);
        }
        for _ in 0..n * lanes {
            a_bits.push(random(s, &mut rng));
            b_bits.push(random(s, &mut rng));
        }
        let len = a_bits.len() / lanes;
        let arr = |data: Vec<u64>| {
            Input::Array(Arc::new(HostArray {
                elem: t,
                shape: vec![len],
                data,
            }))
        };
        let mut inputs = vec![arr(a_bits.clone())];
        if two_operands(op) {
            inputs.push(arr(b_bits.clone()));
        }
        let out = interp.apply(op.mnemonic(), &inputs, None).expect("runs");
        for (i, &got) in out[0].data.iter().enumerate() {
            let want = eval(op, s, a_bits[i], b_bits[i]);
            // NaN payloads are unspecified (DESIGN §3): any NaN equals any NaN.
            let nan = |b: u64| weft_ir::konst::lane_f64(s, b).is_nan();
            if nan(got) && nan(want) {
                continue;
            }
            assert_eq!(
                got, want,
                "{ty} {op:?}({:#x}, {:#x}): IR gives {got:#x}, direct {want:#x}",
                a_bits[i], b_bits[i]
            );
        }
    }
}

#[test]
fn ir_agrees_with_direct_f64() {
    agree("f64", 3000);
}

#[test]
fn ir_agrees_with_direct_f32() {
    agree("f32", 3000);
}

#[test]
fn ir_agrees_with_direct_f16() {
    agree("f16", 2000);
}

#[test]
fn ir_agrees_with_direct_tuples() {
    agree("<4 x f32>", 300);
    agree("<2 x f64>", 300);
    agree("<3 x f16>", 300);
}

const NESTED: &str = r#"
program @leaf(%x: f32) -> (f32) {
  %e: f32 = exp %x
  return %e
}
program @nested(%x: f32, uniform %n: i32, %v: <3 x f64>) -> (f32, <3 x f64>, f32) {
  %zero: i32 = const 0
  %one: i32 = const 1
  %c0: f32 = const 0.0
  %pos: bool = gt %x, %c0
  %r: f32 = if %pos {
    %l: f32 = log %x
    %s: f32 = sin %l
    yield %s
  } else {
    %a: f32 = atan2 %x, %c0
    yield %a
  }
  %acc: f32 = for %i: i32 = %zero to %n step %one iter(%a0: f32 = %r) {
    %p: f32 = pow %a0, %a0
    %q: f32 = cos %p
    %w: f32, %wc: i32 = while iter(%k: f32 = %q, %c: i32 = %zero) {
      %more: bool = lt %c, %n
      yield %more
    } do (%k1: f32, %c1: i32) {
      %t: f32 = tan %k1
      %c2: i32 = add %c1, %one
      yield %t, %c2
    }
    %d: f32, %dc: i32 = do iter(%j: f32 = %w, %jc: i32 = %zero) {
      %j2: f32 = exp2 %j
      %jc2: i32 = add %jc, %one
      yield %j2, %jc2
    } until (%j3: f32, %jc3: i32) {
      %done: bool = ge %jc3, %n
      yield %done
    }
    %e: f32 = call @leaf(%d)
    yield %e
  }
  %lv: <3 x f64> = log2 %v
  %rv: <3 x f64> = rsqrt %lv
  %x2: f32 = rsqrt %acc
  return %acc, %rv, %x2
}
"#;

/// Math ops inside if/for/while/do regions, in a callee, and on tuples: all expanded; the
/// result verifies, round-trips through the printer, and computes what `eval` computes.
#[test]
fn expands_nested_regions_and_round_trips() {
    let m = parse_and_verify(NESTED).expect("valid");
    let mut x = m.clone();
    expand_math(&mut x);
    verify_module(&x).expect("expanded module verifies");
    assert!(!has_math(&x));
    for p in &x.programs {
        p.walk(&mut |op| assert!(!is_math_function(p.op(op).opcode)));
    }
    let text = print_module(&x);
    let back = parse_and_verify(&text).expect("printed expansion parses and verifies");
    assert_eq!(print_module(&back), text, "print/parse round trip");
    // Expanding again changes nothing.
    let mut y = back.clone();
    expand_math(&mut y);
    assert_eq!(print_module(&y), text);

    // The expanded module computes what eval says, step by step.
    let f = |op: Opcode, a: f32, b: f32| {
        f32::from_bits(eval(op, ScalarType::F32, a.to_bits() as u64, b.to_bits() as u64) as u32)
    };
    let g = |op: Opcode, a: f64| f64::from_bits(eval(op, ScalarType::F64, a.to_bits(), 0));
    for (x0, n) in [(2.5f32, 2), (-0.75, 1), (0.3, 0)] {
        let mut r = if x0 > 0.0 {
            f(Opcode::Sin, f(Opcode::Log, x0, 0.0), 0.0)
        } else {
            f(Opcode::Atan2, x0, 0.0)
        };
        for _ in 0..n {
            let q = f(Opcode::Cos, f(Opcode::Pow, r, r), 0.0);
            let mut k = q;
            for _ in 0..n {
                k = f(Opcode::Tan, k, 0.0);
            }
            let mut j = k;
            for _ in 0..n.max(1) {
                j = f(Opcode::Exp2, j, 0.0);
            }
            r = f(Opcode::Exp, j, 0.0);
        }
        let v = [0.5f64, 8.0, 1e300];
        let want_v: Vec<u64> = v
            .iter()
            .map(|&a| g(Opcode::Rsqrt, g(Opcode::Log2, a)).to_bits())
            .collect();
        let v3 = Type::tuple(ScalarType::F64, 3).expect("tuple");
        let args = [
            Arg::Value(Const::f32(x0)),
            Arg::Value(Const::i32(n)),
            Arg::Value(Const::from_lanes(v3, &v.map(f64::to_bits))),
        ];
        for module in [&m, &x] {
            let out = Interpreter::new(module)
                .run_element("nested", &args, &[0], &[1])
                .expect("runs");
            // Any NaN equals any NaN (payloads are unspecified).
            let same32 = |a: &Const, b: f32| {
                let a = f32::from_bits(a.lanes[0] as u32);
                (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
            };
            assert!(same32(&out[0], r), "x = {x0}: {:?} vs {r}", out[0]);
            assert_eq!(&out[1].lanes[..3], &want_v[..]);
            assert!(same32(&out[2], f(Opcode::Rsqrt, r, 0.0)));
        }
    }
}

/// A program without math functions is left exactly as it was; the interpreter does not
/// copy it.
#[test]
fn no_math_no_change() {
    let src = "program @p(%a: f32) -> (f32) {\n  %b: f32 = sqrt %a\n  return %b\n}\n";
    let m = parse_and_verify(src).expect("valid");
    let mut x = m.clone();
    expand_program(&mut x.programs[0]);
    assert_eq!(print_module(&x), print_module(&m));
    assert_eq!(x.programs[0].num_ops(), m.programs[0].num_ops());
    let i = Interpreter::new(&m);
    assert!(std::ptr::eq(i.module(), &m));
}

/// The size of each expansion (ops executed on the common path, and in all regions), printed
/// for docs/semantics.md and bounded so that a change that blows it up is noticed.
#[test]
fn expansion_sizes() {
    let m = module_for("f64");
    let mut x = m.clone();
    expand_math(&mut x);
    for p in &x.programs {
        let mut all = 0;
        p.walk(&mut |_| all += 1);
        let top = p.region(p.body).ops.len();
        eprintln!("{}: {top} ops in the body, {all} in all regions", p.name);
        assert!(all < 800, "{} expands to {all} ops", p.name);
    }
}

/// `is_math_function` and `MATH_FUNCTIONS` name the same ten ops.
#[test]
fn math_function_list() {
    let listed: Vec<Opcode> = weft_ir::OP_TABLE
        .iter()
        .map(|i| i.opcode)
        .filter(|&o| is_math_function(o))
        .collect();
    let mut all = MATH_FUNCTIONS.to_vec();
    all.sort();
    assert_eq!(listed, all);
}
