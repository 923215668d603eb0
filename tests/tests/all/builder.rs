//! The builder API: SSA construction for variables across if/for/while/do regions, the
//! printed form it gives, results on the interpreter, and errors located at the Rust caller.

use std::sync::Arc;
use weft_ir::builder::ProgramBuilder;
use weft_ir::interp::{Arg, Input, Interpreter};
use weft_ir::{Const, HostArray, Module, Type};

fn run1(m: &Module, name: &str, args: &[Const]) -> Vec<Const> {
    let args: Vec<Arg> = args.iter().map(|&c| Arg::Value(c)).collect();
    Interpreter::new(m)
        .run_element(name, &args, &[0], &[1])
        .expect("runs")
}

#[test]
fn variables_merge_across_if_else() {
    // y = x; if x < 0 { y = -x }; return y   (abs through a variable)
    let mut b = ProgramBuilder::new("absv");
    let x = b.varying("x", Type::f32());
    let y = b.declare_var("y", Type::f32());
    b.def_var(y, x);
    let zero = b.f32(0.0);
    let neg = b.lt(x, zero);
    b.if_(neg, |b| {
        let v = b.neg(x);
        b.def_var(y, v);
    });
    let r = b.use_var(y);
    b.output("r", r);
    let m = b.finish_module().expect("verifies");
    let text = weft_ir::print_module(&m);
    assert!(text.contains("%y: f32 = if %"), "{text}");
    let text2 = weft_ir::print_module(&weft_ir::parse_module(&text).expect("parses"));
    assert_eq!(text, text2);
    assert_eq!(run1(&m, "absv", &[Const::f32(-2.5)]), vec![Const::f32(2.5)]);
    assert_eq!(run1(&m, "absv", &[Const::f32(3.0)]), vec![Const::f32(3.0)]);
}

#[test]
fn for_loop_carries_only_assigned_variables() {
    // acc = 0; k = 7 (never assigned in the loop); for i in 0..n { acc = acc + i * k }
    let mut b = ProgramBuilder::new("tri");
    let n = b.varying("n", Type::i32());
    let acc = b.declare_var("acc", Type::i32());
    let k = b.declare_var("k", Type::i32());
    let z = b.i32(0);
    b.def_var(acc, z);
    let seven = b.i32(7);
    b.def_var(k, seven);
    let one = b.i32(1);
    b.for_range(z, n, one, |b, i| {
        let kv = b.use_var(k);
        let t = b.mul(i, kv);
        let a = b.use_var(acc);
        let s = b.add(a, t);
        b.def_var(acc, s);
    });
    let r = b.use_var(acc);
    b.output("r", r);
    let m = b.finish_module().expect("verifies");
    let text = weft_ir::print_module(&m);
    // One carried value (acc); k is used from outside the loop.
    assert!(text.contains("iter(%acc.1: i32 = %acc)"), "{text}");
    assert!(!text.contains("%k.1"), "{text}");
    assert_eq!(run1(&m, "tri", &[Const::i32(4)]), vec![Const::i32(7 * 6)]);
}

#[test]
fn while_and_do_until_loops() {
    // Collatz steps with while; the same count with do-until starting from one step done.
    let mut b = ProgramBuilder::new("collatz");
    let x0 = b.varying("x", Type::i32());
    let x = b.declare_var("x", Type::i32());
    let steps = b.declare_var("steps", Type::i32());
    b.def_var(x, x0);
    let z = b.i32(0);
    b.def_var(steps, z);
    b.while_(
        |b| {
            let xv = b.use_var(x);
            let one = b.i32(1);
            b.ne(xv, one)
        },
        |b| {
            let xv = b.use_var(x);
            let two = b.i32(2);
            let r = b.rem(xv, two);
            let zero = b.i32(0);
            let even = b.eq(r, zero);
            let half = b.div(xv, two);
            let three = b.i32(3);
            let t = b.mul(xv, three);
            let one = b.i32(1);
            let odd = b.add(t, one);
            let next = b.select(even, half, odd);
            b.def_var(x, next);
            let s = b.use_var(steps);
            let s1 = b.add(s, one);
            b.def_var(steps, s1);
        },
    );
    let s = b.use_var(steps);
    b.output("steps", s);
    let m = b.finish_module().expect("verifies");
    assert_eq!(run1(&m, "collatz", &[Const::i32(6)]), vec![Const::i32(8)]);
    assert_eq!(run1(&m, "collatz", &[Const::i32(1)]), vec![Const::i32(0)]);

    let mut b = ProgramBuilder::new("count_down");
    let n = b.varying("n", Type::i32());
    let v = b.declare_var("v", Type::i32());
    b.def_var(v, n);
    b.do_until(
        |b| {
            let x = b.use_var(v);
            let one = b.i32(1);
            let y = b.sub(x, one);
            b.def_var(v, y);
        },
        |b| {
            let x = b.use_var(v);
            let zero = b.i32(0);
            b.le(x, zero)
        },
    );
    let r = b.use_var(v);
    b.output("r", r);
    let m = b.finish_module().expect("verifies");
    // The body runs once even when the condition already holds.
    assert_eq!(
        run1(&m, "count_down", &[Const::i32(-5)]),
        vec![Const::i32(-6)]
    );
    assert_eq!(
        run1(&m, "count_down", &[Const::i32(3)]),
        vec![Const::i32(0)]
    );
}

#[test]
fn calls_and_apply_over_arrays() {
    let mut g = ProgramBuilder::new("sq");
    let x = g.varying("x", Type::f32());
    let y = g.mul(x, x);
    g.output("y", y);
    let sq = g.finish().expect("sq verifies");
    let mut b = ProgramBuilder::new("sum_sq");
    let a = b.varying("a", Type::f32());
    let c = b.varying("c", Type::f32());
    let a2 = b.call(&sq, &[a])[0];
    let c2 = b.call(&sq, &[c])[0];
    let s = b.add(a2, c2);
    b.output("s", s);
    let m = b.finish_module().expect("verifies");
    let ins = vec![
        Input::Array(Arc::new(HostArray::from_f32(&[1.0, 2.0, 3.0]))),
        Input::Array(Arc::new(HostArray::from_f32(&[4.0, 5.0, 6.0]))),
    ];
    let out = Interpreter::new(&m)
        .apply("sum_sq", &ins, None)
        .expect("applies");
    assert_eq!(out[0].to_f32(), vec![17.0, 29.0, 45.0]);
}

#[test]
fn misuse_is_reported_at_the_callers_line() {
    let mut b = ProgramBuilder::new("bad");
    let x = b.varying("x", Type::f32());
    let n = b.varying("n", Type::i32());
    let line = line!() + 1;
    let s = b.add(x, n);
    b.output("s", s);
    let e = b.finish().expect_err("type error");
    let text = e.to_string();
    assert!(text.contains(&format!("builder.rs:{line}:")), "{text}");
    assert!(text.contains("`add` operands must have one type"), "{text}");

    let mut b = ProgramBuilder::new("undef");
    let v = b.declare_var("v", Type::f32());
    let line = line!() + 1;
    let u = b.use_var(v);
    let w = b.sqrt(u);
    b.output("w", w);
    let e = b.finish().expect_err("undefined variable");
    assert!(e.to_string().contains("undefined value"), "{e}");
    let _ = line;
}

#[test]
fn variables_declared_inside_regions_are_local_to_them() {
    // Declaring a variable inside an `if` arm or a loop body, then another after it, used to
    // index past the restored definitions and panic.
    let mut b = ProgramBuilder::new("locals");
    let x = b.varying("x", Type::f32());
    let acc = b.declare_var("acc", Type::f32());
    b.def_var(acc, x);
    let zero = b.f32(0.0);
    let pos = b.gt(x, zero);
    b.if_(pos, |b| {
        let t = b.declare_var("t", Type::f32());
        let a = b.use_var(acc);
        let twice = b.add(a, a);
        b.def_var(t, twice);
        let tv = b.use_var(t);
        b.def_var(acc, tv);
    });
    let (lo, hi, one) = (b.i32(0), b.i32(3), b.i32(1));
    b.for_range(lo, hi, one, |b, _| {
        let u = b.declare_var("u", Type::f32());
        let a = b.use_var(acc);
        let inc = b.f32(1.0);
        let s = b.add(a, inc);
        b.def_var(u, s);
        let uv = b.use_var(u);
        b.def_var(acc, uv);
    });
    let after = b.declare_var("after", Type::f32());
    let a = b.use_var(acc);
    b.def_var(after, a);
    let r = b.use_var(after);
    b.output("r", r);
    let m = b.finish_module().expect("verifies");
    assert_eq!(
        run1(&m, "locals", &[Const::f32(2.0)]),
        vec![Const::f32(7.0)]
    );
    assert_eq!(
        run1(&m, "locals", &[Const::f32(-2.0)]),
        vec![Const::f32(1.0)]
    );
}
