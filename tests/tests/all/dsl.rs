//! The recording DSL (`weft::dsl`): programs recorded from Rust code, checked on the
//! interpreter; immediate mode against recorded-and-interpreted results; control flow,
//! calls, host uniforms, the algebra wrappers, and errors located at this file's lines.

use std::sync::Arc;
use weft::dsl::*;
use weft_ir::interp::{Arg, HostArray, Input, Interpreter};
use weft_ir::{Const, Type};

/// Runs `p` on one element: `open` are the values of its open inputs, in order; captured
/// uniforms are filled in from their host cells.
fn run1(p: &Program, open: &[Const]) -> Vec<Const> {
    let caps = p.captured_uniforms();
    let mut it = open.iter();
    let args: Vec<Arg> = (0..p.ir().params.len())
        .map(|i| match caps.iter().find(|(k, _)| *k == i) {
            Some((_, c)) => Arg::Value(*c),
            None => Arg::Value(*it.next().expect("enough open inputs")),
        })
        .collect();
    Interpreter::new(p.module())
        .run_element(p.name(), &args, &[0], &[1])
        .unwrap_or_else(|e| panic!("{e}\n{p}"))
}

/// Applies `p` over arrays: `open` are its open inputs, in order.
fn apply(p: &Program, open: Vec<Input>) -> Vec<HostArray> {
    let caps = p.captured_uniforms();
    let mut it = open.into_iter();
    let inputs: Vec<Input> = (0..p.ir().params.len())
        .map(|i| match caps.iter().find(|(k, _)| *k == i) {
            Some((_, c)) => Input::Uniform(*c),
            None => it.next().expect("enough open inputs"),
        })
        .collect();
    Interpreter::new(p.module())
        .apply(p.name(), &inputs, None)
        .unwrap_or_else(|e| panic!("{e}\n{p}"))
}

fn f32s(xs: &[f32]) -> Input {
    Input::Array(Arc::new(HostArray::from_f32(xs)))
}

fn i32s(xs: &[i32]) -> Input {
    Input::Array(Arc::new(HostArray {
        elem: Type::i32(),
        shape: vec![xs.len()],
        data: xs.iter().map(|&x| x as u32 as u64).collect(),
    }))
}

fn v3(c: Const) -> [f32; 3] {
    std::array::from_fn(|i| f32::from_bits(c.lanes[i] as u32))
}

/// Prints, parses back and prints again: identical text.
fn round_trips(p: &Program) {
    let text = p.text();
    let q = Program::parse(&text, p.name()).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(q.text(), text);
}

#[test]
fn saxpy_records_and_runs() {
    let p = Program::record_named("saxpy", || {
        let a = Param::uniform::<Value1f>("a");
        let x = In::<Value1f>::named("x");
        let y = In::<Value1f>::named("y");
        Out::named("r", a * x + y);
    })
    .unwrap();
    let text = p.text();
    assert!(
        text.contains("program @saxpy(uniform %a: f32, %x: f32, %y: f32) -> (r: f32)"),
        "{text}"
    );
    assert_eq!(p.open_inputs(), vec![0, 1, 2]);
    round_trips(&p);
    let out = apply(
        &p,
        vec![
            Input::Uniform(Const::f32(2.0)),
            f32s(&[1.0, 2.0, 3.0]),
            f32s(&[10.0, 20.0, 30.0]),
        ],
    );
    assert_eq!(out[0].to_f32(), vec![12.0, 24.0, 36.0]);
}

/// Shading-style geometry, used both recorded and immediately.
fn shade(a: &Value3f, b: &Value3f) -> (Value3f, Value3f, Value3f, Value1f) {
    let n = b.normalize();
    let c = a.cross(b);
    let r = a.reflect(&n);
    let l = length(&c) + dot(a, b);
    (c, n, r, l)
}

#[test]
fn value3f_geometry_matches_immediate_mode() {
    let p = Program::record(|| {
        let a = In::<Value3f>::new();
        let b = In::<Value3f>::new();
        let (c, n, r, l) = shade(&a, &b);
        Out::from(c);
        Out::from(n);
        Out::from(r);
        Out::from(l);
    })
    .unwrap();
    round_trips(&p);
    let (ha, hb) = ([1.0f32, 2.0, 3.0], [0.0f32, 3.0, 4.0]);
    let got = run1(
        &p,
        &[
            Value3f::from(ha).to_const().unwrap(),
            Value3f::from(hb).to_const().unwrap(),
        ],
    );
    // Immediate mode computes the same bits.
    let (c, n, r, l) = shade(&Value3f::from(ha), &Value3f::from(hb));
    assert!(!c.is_recorded());
    assert_eq!(got[0], c.to_const().unwrap());
    assert_eq!(got[1], n.to_const().unwrap());
    assert_eq!(got[2], r.to_const().unwrap());
    assert_eq!(got[3], l.to_const().unwrap());
    // And they are what the formulas say.
    assert_eq!(
        v3(got[0]),
        [
            2.0 * 4.0 - 3.0 * 3.0,
            3.0 * 0.0 - 1.0 * 4.0,
            1.0 * 3.0 - 2.0 * 0.0
        ]
    );
    assert_eq!(v3(got[1]), [0.0, 0.6, 0.8]);
    let d = 2.0 * 0.6 + 3.0 * 0.8; // dot(n, a)
    let want_r = [
        1.0 - 2.0 * d * 0.0,
        2.0 - 2.0 * d * 0.6,
        3.0 - 2.0 * d * 0.8,
    ];
    for (g, w) in v3(got[2]).iter().zip(want_r) {
        assert!((g - w).abs() < 1e-5, "{:?} vs {want_r:?}", v3(got[2]));
    }
}

#[test]
fn swizzle_writemask_and_lanes() {
    let p = Program::record(|| {
        let v = In::<Value4f>::new();
        let s = In::<Value1f>::new();
        let rev: Value3f = v.swizzle([2, 1, 0]);
        let w = v.clone();
        w.set_lanes([0, 2], Value2f::from_lanes([&s, &s]));
        let t = Value3f::from_lanes([v.w(), v.x(), s.clone()]);
        let splat: Value4f = s.broadcast::<4>();
        Out::from(rev);
        Out::from(w);
        Out::from(t);
        Out::from(splat + &v);
        Out::from(v.y() * v.z());
    })
    .unwrap();
    round_trips(&p);
    let v = Value4f::from([1.0, 2.0, 3.0, 4.0]).to_const().unwrap();
    let got = run1(&p, &[v, Const::f32(9.0)]);
    let lanes = |c: Const| -> Vec<f32> {
        c.lane_bits()
            .iter()
            .map(|&b| f32::from_bits(b as u32))
            .collect()
    };
    assert_eq!(lanes(got[0]), vec![3.0, 2.0, 1.0]);
    assert_eq!(lanes(got[1]), vec![9.0, 2.0, 9.0, 4.0]);
    assert_eq!(lanes(got[2]), vec![4.0, 1.0, 9.0]);
    assert_eq!(lanes(got[3]), vec![10.0, 11.0, 12.0, 13.0]);
    assert_eq!(lanes(got[4]), vec![6.0]);
}

#[test]
fn if_else_merges_assignments() {
    let p = Program::record(|| {
        let x = In::<Value1f>::new();
        let mut y = Value1f::new(0.0);
        let mut z = x.clone();
        if_(x.gt(1.0), || {
            y += 1.0;
            z *= 10.0;
        })
        .else_(|| {
            y -= 1.0;
        });
        // A then-only arm (the guard runs it when dropped).
        if_(x.lt(0.0), || {
            z.assign(-&z);
        });
        Out::from(y);
        Out::from(z);
    })
    .unwrap();
    round_trips(&p);
    let text = p.text();
    // `if c {..}` then `if !c {..}` for the if/else, and one more if.
    assert_eq!(text.matches(" = if ").count(), 3, "{text}");
    let out = apply(&p, vec![f32s(&[0.5, 2.0, -3.0])]);
    assert_eq!(out[0].to_f32(), vec![-1.0, 1.0, -1.0]);
    assert_eq!(out[1].to_f32(), vec![0.5, 20.0, 3.0]);
}

#[test]
fn loops_carry_assigned_values() {
    let p = Program::record(|| {
        let n = In::<Value1i>::new();
        let x = In::<Value1f>::new();
        // sum of i*i for i in 0..n, with a nested if.
        let mut acc = Value1i::new(0);
        let mut odd = Value1i::new(0);
        for_(0, &n, |i| {
            acc += &i * &i;
            if_((&i & 1).eq(1), || {
                odd += 1;
            });
        });
        // doubling until at least 100
        // (the condition and the body both use `d`: the body changes it with `assign`)
        let d = x.clone();
        while_(|| d.lt(100.0), || d.assign(&d * 2.0));
        // do-until runs at least once
        let k = Value1i::new(0);
        do_until(|| k.assign(&k + 3), || k.ge(&n));
        Out::from(acc);
        Out::from(odd);
        Out::from(d);
        Out::from(k);
    })
    .unwrap();
    round_trips(&p);
    let out = apply(
        &p,
        vec![i32s(&[0, 1, 4, 7]), f32s(&[200.0, 30.0, 1.0, 99.0])],
    );
    let ints = |a: &HostArray| -> Vec<i32> { a.data.iter().map(|&b| b as u32 as i32).collect() };
    assert_eq!(ints(&out[0]), vec![0, 0, 14, 91]);
    assert_eq!(ints(&out[1]), vec![0, 0, 2, 3]);
    assert_eq!(out[2].to_f32(), vec![200.0, 120.0, 128.0, 198.0]);
    assert_eq!(ints(&out[3]), vec![3, 3, 6, 9]);
}

#[test]
fn control_flow_runs_in_immediate_mode() {
    let mut acc = Value1i::new(0);
    for_(0, 5, |i| acc += i);
    assert_eq!(acc.get().unwrap(), 10);
    let mut y = Value1f::new(1.0);
    if_(y.gt(0.0), || y *= 4.0).else_(|| y *= -1.0);
    assert_eq!(y.get().unwrap(), 4.0);
    while_(|| y.lt(100.0), || y.assign(&y * 3.0));
    assert_eq!(y.get().unwrap(), 108.0);
    let k = Value1i::new(10);
    do_until(|| k.assign(&k + 1), || k.ge(0));
    assert_eq!(k.get().unwrap(), 11);
}

/// Arithmetic and math written once, run immediately and recorded.
fn formula(x: &Value1f, y: &Value1f) -> Vec<Value1f> {
    vec![
        x * 3.0 - y / 2.0,
        2.0 - x,
        x.exp() + y.sin(),
        pow(x.abs(), y),
        atan2(y, x),
        x.fma(y, 1.0).sqrt(),
        min(x, y).max(-1.0),
        x.floor() + y.round() + (x % y),
        select(x.lt(y), x, y),
        (x.cast::<i32>() << 2).cast::<f32>(),
        -x.log2() * y.rsqrt() + x.tan() + y.cos(),
    ]
}

#[test]
fn immediate_mode_equals_recorded_results() {
    let p = Program::record(|| {
        let x = In::<Value1f>::new();
        let y = In::<Value1f>::new();
        for v in formula(&x, &y) {
            Out::from(v);
        }
    })
    .unwrap();
    for (a, b) in [(1.5f32, 2.25f32), (-0.75, 3.5), (10.0, 0.125), (0.0, -2.0)] {
        let got = run1(&p, &[Const::f32(a), Const::f32(b)]);
        let imm = formula(&Value1f::new(a), &Value1f::new(b));
        for (k, (g, v)) in got.iter().zip(&imm).enumerate() {
            let w = v.to_const().unwrap();
            let (gb, wb) = (
                f32::from_bits(g.lanes[0] as u32),
                f32::from_bits(w.lanes[0] as u32),
            );
            assert!(
                g == &w || (gb.is_nan() && wb.is_nan()),
                "output {k} for ({a}, {b}): recorded {gb}, immediate {wb}"
            );
        }
    }
    // Integer semantics of DESIGN §3 in immediate mode.
    let q = Value1i::new(7) / 0;
    assert_eq!(q.get().unwrap(), -1);
    let m = Value1i::new(i32::MIN) / -1;
    assert_eq!(m.get().unwrap(), i32::MIN);
    let s = Value1ub::new(250) + 10u8;
    assert_eq!(s.get().unwrap(), 4);
    let b = Value::<bool, 2>::from([true, false]) ^ true;
    assert_eq!(b.to_array().unwrap(), [false, true]);
}

#[test]
fn called_subprogram() {
    let sq = Program::record_named("sq_plus", || {
        let x = In::<Value1f>::new();
        let y = In::<Value1f>::new();
        Out::from(&x * &x + y);
    })
    .unwrap();
    let wrap = Program::record_named("twice", || -> weft::Result<()> {
        let a = In::<Value1f>::new();
        let r = sq.call(&[(&a).into(), 1.0f32.into_any()])?;
        let r: Value1f = r.into_iter().next().unwrap().into_value()?;
        let r2 = sq.call(&[r.clone().into(), (&a).into()])?;
        Out::from(r2.into_iter().next().unwrap().into_value::<f32, 1>()?);
        Ok(())
    })
    .unwrap();
    let text = wrap.text();
    assert_eq!(wrap.module().programs.len(), 2, "{text}");
    assert_eq!(text.matches("call @sq_plus").count(), 2, "{text}");
    round_trips(&wrap);
    // (3*3+1)^2 + 3 = 103
    assert_eq!(run1(&wrap, &[Const::f32(3.0)]), vec![Const::f32(103.0)]);
    // Immediate mode calls through the interpreter.
    let r = sq
        .call(&[Value1f::new(2.0).into(), Value1f::new(0.5).into()])
        .unwrap();
    assert_eq!(r[0].to_const().unwrap(), Const::f32(4.5));
}

/// Lets a host scalar be passed where an `AnyValue` is expected.
trait IntoAny {
    fn into_any(self) -> AnyValue;
}

impl IntoAny for f32 {
    fn into_any(self) -> AnyValue {
        Value1f::new(self).into()
    }
}

#[test]
fn subprogram_call_with_wrong_argument_type_is_an_error() {
    let sub = Program::record(|| {
        let x = In::<Value3f>::new();
        Out::from(x.length());
    })
    .unwrap();
    let mut seen = None;
    let r = Program::record(|| {
        let x = In::<Value1f>::new();
        let line = line!() + 1;
        let e = sub.call(&[(&x).into()]).unwrap_err();
        seen = Some((e.to_string(), line));
        Out::from(x);
    });
    assert!(r.is_ok());
    let (msg, line) = seen.unwrap();
    assert!(
        msg.contains("<3 x f32>") && msg.contains("f32 value"),
        "{msg}"
    );
    assert!(msg.contains(&format!("dsl.rs:{line}:")), "{msg}");
    // Converting a result to the wrong type is an error too.
    let r = sub.call(&[Value3f::from([1.0, 2.0, 2.0]).into()]).unwrap();
    let e = r
        .into_iter()
        .next()
        .unwrap()
        .into_value::<i32, 1>()
        .unwrap_err();
    assert!(e.to_string().contains("expected a i32 value"), "{e}");
}

#[test]
fn uniform_is_captured_by_reference() {
    let dt = Uniform::named("dt", 0.5f32);
    let gravity = Uniform::new([0.0f32, -10.0, 0.0]);
    let step = Program::record(|| {
        let mut p = InOut::<Value3f>::named("p");
        let v = In::<Value3f>::named("v");
        p += (v + &gravity) * dt.value().broadcast::<3>();
        let _ = &p;
    })
    .unwrap();
    let text = step.text();
    assert!(text.contains("uniform %dt: f32"), "{text}");
    assert_eq!(step.open_inputs(), vec![0, 1]);
    // Captured in the order of first use: gravity, then dt.
    let caps = step.captured_uniforms();
    assert_eq!(caps.len(), 2);
    assert_eq!(
        caps[0],
        (2, Value3f::from([0.0, -10.0, 0.0]).to_const().unwrap())
    );
    assert_eq!(caps[1], (3, Const::f32(0.5)));
    let p0 = Value3f::from([1.0, 1.0, 1.0]).to_const().unwrap();
    let v0 = Value3f::from([2.0, 10.0, 0.0]).to_const().unwrap();
    assert_eq!(v3(run1(&step, &[p0, v0])[0]), [2.0, 1.0, 1.0]);
    dt.set(0.25);
    assert_eq!(step.captured_uniforms()[1], (3, Const::f32(0.25)));
    assert_eq!(v3(run1(&step, &[p0, v0])[0]), [1.5, 1.0, 1.0]);
    // Outside recording a uniform is its current value.
    assert_eq!((&dt.value() * 4.0).get().unwrap(), 1.0);
}

#[test]
fn output_never_assigned_is_an_error_at_its_line() {
    let line = line!() + 3;
    let e = Program::record(|| {
        let x = In::<Value1f>::new();
        let _r = Out::<Value1f>::new();
        let _ = x;
    })
    .unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains(&format!("dsl.rs:{line}:")), "{msg}");
    assert!(msg.contains("never assigned"), "{msg}");
    // Assigned in one arm only.
    let line = line!() + 3;
    let e = Program::record(|| {
        let x = In::<Value1f>::new();
        let r = Out::<Value1f>::new();
        if_(x.gt(0.0), || r.assign(&x));
    })
    .unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains(&format!("dsl.rs:{line}:")) && msg.contains("some paths"),
        "{msg}"
    );
}

#[test]
fn misuse_is_reported_at_the_users_line() {
    // A value made inside a region and used after it.
    let mut line = 0;
    let e = Program::record(|| {
        let x = In::<Value1f>::new();
        let mut keep = None;
        if_(x.gt(0.0), || keep = Some(&x * 2.0));
        line = line!() + 1;
        Out::from(keep.unwrap() + 1.0);
    })
    .unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains(&format!("dsl.rs:{line}:")) && msg.contains("region"),
        "{msg}"
    );
    // A value of one recording used in another (nested) recording.
    let mut line = 0;
    let mut inner_err = None;
    let e = Program::record(|| {
        let x = In::<Value1f>::new();
        let inner = Program::record(|| {
            line = line!() + 1;
            Out::from(&x + 1.0);
        });
        inner_err = inner.err();
        Out::from(x);
    });
    assert!(e.is_ok());
    let msg = inner_err.expect("the inner recording fails").to_string();
    assert!(
        msg.contains(&format!("dsl.rs:{line}:")) && msg.contains("another program"),
        "{msg}"
    );
    // A recorded value used after recording has no host value.
    let mut leak = None;
    let _ = Program::record(|| {
        let x = In::<Value1f>::new();
        leak = Some(x.clone());
        Out::from(x);
    })
    .unwrap();
    assert!(leak.unwrap().get().is_err());
}

#[test]
fn nested_recording_and_arrays() {
    let outer = Program::record(|| {
        let a = InArray::<1, Value1f>::new(Boundary::Clamp);
        let i = index::<1>();
        // Recording inside recording records another program.
        let inner = Program::record(|| {
            let y = In::<Value1f>::new();
            Out::from(y * 0.5);
        })
        .unwrap();
        let s = a.read(&i - 1) + a.read(&i + 1);
        let h = inner.call(&[s.into()]).unwrap();
        let n = a.extent();
        Out::from(
            h.into_iter()
                .next()
                .unwrap()
                .into_value::<f32, 1>()
                .unwrap(),
        );
        Out::from(n);
    })
    .unwrap();
    round_trips(&outer);
    let arr = f32s(&[1.0, 2.0, 4.0, 8.0]);
    let shape: &[usize] = &[4];
    let out = Interpreter::new(outer.module())
        .apply(outer.name(), &[arr], Some(shape))
        .unwrap();
    assert_eq!(out[0].to_f32(), vec![1.5, 2.5, 5.0, 6.0]);
    assert_eq!(out[1].data, vec![4, 4, 4, 4]);
}

#[test]
fn compose_and_bind() {
    let scale = Program::record_named("scale", || {
        let x = In::<Value1f>::named("x");
        let k = In::<Value1f>::named("k");
        Out::named("y", x * k);
    })
    .unwrap();
    let offset = Program::record_named("offset", || {
        let u = In::<Value1f>::named("u");
        Out::named("v", u + 1.0);
    })
    .unwrap();
    // scale << offset: scale(offset(u), k)
    let c = (&scale << &offset).unwrap();
    assert_eq!(c.name(), "scale_offset");
    assert_eq!(
        run1(&c, &[Const::f32(2.0), Const::f32(10.0)]),
        vec![Const::f32(30.0)]
    );
    let b = c.bind("k", 4.0f32).unwrap();
    assert_eq!(b.open_inputs().len(), 1);
    assert_eq!(run1(&b, &[Const::f32(2.0)]), vec![Const::f32(12.0)]);
    let opt = b.optimize().unwrap();
    round_trips(&opt);
    assert_eq!(run1(&opt, &[Const::f32(2.0)]), vec![Const::f32(12.0)]);
    assert!(scale.bind("k", 4i32).is_err());
    // Loose binding to a host uniform, then unbinding.
    let k = Uniform::named("k", 3.0f32);
    let l = scale.bind_uniform("k", &k).unwrap();
    assert_eq!(l.open_inputs(), vec![0]);
    assert_eq!(run1(&l, &[Const::f32(2.0)]), vec![Const::f32(6.0)]);
    k.set(5.0);
    assert_eq!(run1(&l, &[Const::f32(2.0)]), vec![Const::f32(10.0)]);
    let u = l.unbind("k").unwrap();
    assert_eq!(u.open_inputs(), vec![0, 1]);
    // Bundle, keep, drop, swizzle.
    let bun = Program::bundle(&[&scale, &offset]).unwrap();
    assert_eq!(bun.ir().outputs.len(), 2);
    assert_eq!(bun.keep(&["v"]).unwrap().ir().params.len(), 1);
    assert_eq!(bun.drop_outputs(&["v"]).unwrap().ir().outputs.len(), 1);
    let sw = scale.swizzle_inputs(&[1, 0]).unwrap();
    assert_eq!(sw.ir().param_name(0), "k");
}

#[test]
fn compose_keeps_host_links() {
    let g = Uniform::named("g", 2.0f32);
    let p = Program::record(|| {
        let x = In::<Value1f>::new();
        Out::from(x * &g);
    })
    .unwrap();
    let q = Program::record(|| {
        let x = In::<Value1f>::new();
        Out::from(x + &g);
    })
    .unwrap();
    let c = (&p << &q).unwrap();
    assert_eq!(c.captured_uniforms().len(), 1);
    assert_eq!(run1(&c, &[Const::f32(1.0)]), vec![Const::f32(6.0)]);
    g.set(3.0);
    assert_eq!(run1(&c, &[Const::f32(1.0)]), vec![Const::f32(12.0)]);
    // Two different host uniforms of one name cannot meet.
    let other = Uniform::named("g", 1.0f32);
    let r = Program::record(|| {
        let x = In::<Value1f>::new();
        Out::from(x - &other);
    })
    .unwrap();
    assert!((&p << &r).is_err());
}

#[test]
fn many_values_across_nested_regions() {
    // Values held across nested regions become variables; each is carried only if assigned.
    let p = Program::record(|| {
        let x = In::<Value1f>::new();
        let mut vs: Vec<Value1f> = (0..40).map(|k| &x + k as f32).collect();
        for_(0, 3, |_| {
            for_(0, 2, |j| {
                let jf = j.cast::<f32>();
                if_(jf.gt(0.5), || {
                    vs[7] += &jf;
                });
            });
        });
        let mut total = Value1f::new(0.0);
        for v in &vs {
            total += v;
        }
        Out::from(total);
    })
    .unwrap();
    round_trips(&p);
    // sum_{k<40} (1 + k) + 3 (vs[7] gains 1 three times) = 40 + 780 + 3
    assert_eq!(run1(&p, &[Const::f32(1.0)]), vec![Const::f32(823.0)]);
    let text = p.text();
    assert_eq!(text.matches("for ").count(), 2, "{text}");
    // Only the value assigned in the loops is loop-carried.
    assert_eq!(text.matches("iter(").count(), 2, "{text}");
}

#[test]
fn scalars_broadcast_and_compositions_chain() {
    let s = Uniform::named("s", 2.0f32);
    let p = Program::record(|| {
        let v = In::<Value3f>::new();
        let k = In::<Value1f>::new();
        // A scalar value or scalar uniform on the right broadcasts to the tuple's lanes.
        Out::from(&v * &k + &s - v.x());
        // A scalar uniform on the left too.
        Out::from(&s * &v);
    })
    .unwrap();
    let v = Value3f::from([1.0, 2.0, 3.0]).to_const().unwrap();
    let got = run1(&p, &[v, Const::f32(10.0)]);
    assert_eq!(v3(got[0]), [11.0, 21.0, 31.0]);
    assert_eq!(v3(got[1]), [2.0, 4.0, 6.0]);
    // Immediate mode agrees.
    let w = Value3f::from([1.0, 2.0, 3.0]) * Value1f::new(10.0) + &s - 1.0;
    assert_eq!(w.to_array().unwrap(), [11.0, 21.0, 31.0]);
    // `&a << &b << &c` chains (an error passes through).
    let inc = Program::record(|| {
        let x = In::<Value1f>::new();
        Out::from(x + 1.0);
    })
    .unwrap();
    let dbl = Program::record(|| {
        let x = In::<Value1f>::new();
        Out::from(&x + &x);
    })
    .unwrap();
    let c = (&inc << &dbl << &inc).unwrap();
    assert_eq!(run1(&c, &[Const::f32(3.0)]), vec![Const::f32(9.0)]);
    assert!((&p << &inc << &dbl).is_err());
}

#[test]
fn programs_values_and_uniforms_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Program>();
    send_sync::<Value3f>();
    send_sync::<Uniform<[f32; 3]>>();
    send_sync::<AnyValue>();
    // Immediate values work on any thread.
    let h = std::thread::spawn(|| (Value1f::new(2.0).sqrt() * Value1f::new(2.0).sqrt()).get());
    assert!((h.join().unwrap().unwrap() - 2.0).abs() < 1e-6);
}

/// `weft::Error` keeps every diagnostic of a bad program (issue 20), with its location, and
/// renders them as the CLI does (`<text>:line:col`, the line and a caret).
#[test]
fn invalid_programs_keep_every_diagnostic() {
    let text = "program @p(%x: f32) -> (f32) {\n  %a: i32 = add %x, %x\n  %b: f64 = mul %x, %x\n  return %x\n}\n";
    let e = match Program::parse(text, "p") {
        Ok(_) => panic!("the program should not verify"),
        Err(e) => e,
    };
    let d = e.diagnostics();
    assert!(d.len() >= 2, "{} diagnostics: {e}", d.len());
    let lines: Vec<usize> = d
        .iter()
        .filter_map(|d| match d.loc {
            weft_ir::Loc::Span(start, _) => Some(weft_ir::diag::line_col(text, start as usize).0),
            _ => None,
        })
        .collect();
    assert!(lines.contains(&2) && lines.contains(&3), "{lines:?}");
    let shown = e.to_string();
    assert!(
        shown.contains("<text>:2:") && shown.contains("<text>:3:"),
        "{shown}"
    );
    assert!(shown.contains("%a: i32 = add %x, %x"), "{shown}");
    // Errors without a location have no diagnostics.
    let e = weft::Error::invalid_message("no place");
    assert!(e.diagnostics().is_empty());
    assert_eq!(e.to_string(), "no place");
}
