//! What a new user trips over (issue 26): each test shows what a user now sees — the message
//! text a mistake gets, or a call that used to be refused and now works.

use std::path::PathBuf;
use weft::dsl::*;
use weft::Array;

fn weft(args: &[&str]) -> (i32, String, String) {
    weft_stdin(args, b"")
}

fn weft_stdin(args: &[&str], stdin: &[u8]) -> (i32, String, String) {
    let mut argv = vec!["weft".to_string()];
    argv.extend(args.iter().map(|s| s.to_string()));
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = weft_cli::cli::run_args_with_stdin(&argv, stdin, &mut out, &mut err);
    (
        code,
        String::from_utf8_lossy(&out).into_owned(),
        String::from_utf8_lossy(&err).into_owned(),
    )
}

fn tmp(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("weft-papercuts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let p = dir.join(name);
    std::fs::write(&p, bytes).expect("write");
    p
}

fn path(p: &std::path::Path) -> &str {
    p.to_str().expect("utf8 path")
}

/// An `.npy` file (version 1.0) with `descr`, `fortran_order` and `shape` as given and
/// `data` as its little-endian payload.
fn npy(descr: &str, fortran: bool, shape: &str, data: &[u8]) -> Vec<u8> {
    let f = if fortran { "True" } else { "False" };
    let mut h = format!("{{'descr': '{descr}', 'fortran_order': {f}, 'shape': {shape}, }}");
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend_from_slice(&(h.len() as u16).to_le_bytes());
    b.extend_from_slice(h.as_bytes());
    b.extend_from_slice(data);
    b
}

fn f64_bytes(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

const SCALE: &str = "program @scale(%x: f32, uniform %a: f32) -> (y: f32) {
  %y: f32 = mul %x, %a
  return %y
}
";

const HEAT: &str = "program @heat(%u: array<1 x f32, clamp>) -> (v: f32) {
  %i: i32 = index
  %v: f32 = read %u, %i
  return %v
}
";

// ---- 1. a program with no varying input names how to give the launch shape ----

#[test]
fn no_varying_input_names_apply_shape_and_shape_flag() {
    let p = Program::record(|| {
        let a = InArray::<1, Value1f>::named("a", Boundary::Clamp);
        Out::named("y", a.read(index::<1>()));
    })
    .expect("record");
    let a = Array::from_vec([4], vec![1.0f32, 2.0, 3.0, 4.0]).expect("array");
    let e = p
        .apply::<Array<1, f32>>(&a)
        .map(|_| ())
        .expect_err("no shape");
    assert!(e.to_string().contains("apply_shape(&[n], args)"), "{e}");
    let y: Array<1, f32> = p.apply_shape(&[4], &a).expect("apply_shape");
    assert_eq!(y.to_vec().expect("read"), vec![1.0, 2.0, 3.0, 4.0]);

    let f = tmp("heat.weft", HEAT.as_bytes());
    let u = tmp(
        "u.npy",
        &npy("<f4", false, "(3,)", &f32_bytes(&[1.0, 2.0, 3.0])),
    );
    let (code, _, err) = weft(&["run", path(&f), "--in", &format!("u={}", path(&u))]);
    assert_eq!(code, 1);
    assert!(err.contains("pass --shape N[,M[,K]]"), "{err}");
    let (code, out, err) = weft(&[
        "run",
        path(&f),
        "--in",
        &format!("u={}", path(&u)),
        "--shape",
        "3",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("v: shape [3]"), "{out}");
}

// ---- 9. CLI conveniences ----

#[test]
fn float64_inputs_need_cast_and_say_so() {
    let f = tmp("scale.weft", SCALE.as_bytes());
    let x = tmp(
        "x64.npy",
        &npy("<f8", false, "(3,)", &f64_bytes(&[1.0, 2.5, -4.0])),
    );
    let inx = format!("x={}", path(&x));
    let (code, _, err) = weft(&["run", path(&f), "--in", &inx, "--in", "a=2"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("got f8 (f64): convert it (numpy: `a.astype(np.float32)`) or pass --cast"),
        "{err}"
    );
    let out_path =
        std::env::temp_dir().join(format!("weft-papercuts-y-{}.npy", std::process::id()));
    let (code, _, err) = weft(&[
        "run",
        path(&f),
        "--in",
        &inx,
        "--in",
        "a=2",
        "--cast",
        "--out",
        &format!("y={}", path(&out_path)),
    ]);
    assert_eq!(code, 0, "{err}");
    let y = weft::npy::read_npy(&out_path).expect("output");
    let _ = std::fs::remove_file(&out_path);
    let want: Vec<u64> = [2.0f32, 5.0, -8.0]
        .iter()
        .map(|v| v.to_bits() as u64)
        .collect();
    assert_eq!(y.data, want);
}

#[test]
fn fortran_ordered_and_zero_d_arrays_are_read() {
    // [[1, 2, 3], [4, 5, 6]] stored column by column.
    let bytes = npy(
        "<f4",
        true,
        "(2, 3)",
        &f32_bytes(&[1.0, 4.0, 2.0, 5.0, 3.0, 6.0]),
    );
    let d = weft::npy::read_npy_bytes(&bytes).expect("fortran order");
    assert_eq!(d.shape, vec![2, 3]);
    let c: Vec<f32> = d.data.iter().map(|&b| f32::from_bits(b as u32)).collect();
    assert_eq!(c, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);

    // A 0-d array is a uniform's value.
    let f = tmp("scale0.weft", SCALE.as_bytes());
    let x = tmp(
        "x32.npy",
        &npy("<f4", false, "(2,)", &f32_bytes(&[1.0, 2.0])),
    );
    let a = tmp("a0.npy", &npy("<f4", false, "()", &f32_bytes(&[3.0])));
    let (code, out, err) = weft(&[
        "run",
        path(&f),
        "--in",
        &format!("x={}", path(&x)),
        "--in",
        &format!("a={}", path(&a)),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("y: shape [2] f4 [3.0, 6.0]"), "{out}");
}

#[test]
fn stdin_fmt_check_and_in_place() {
    let messy = "program @scale(%x: f32, uniform %a: f32) -> (y: f32) {\n    %y: f32 = mul %x,%a\n  return %y\n}\n";
    // `-` reads standard input (opt, fmt, check, run all load through it).
    let (code, out, err) = weft_stdin(&["opt", "-"], messy.as_bytes());
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("program @scale"), "{out}");
    let (code, out, _) = weft_stdin(&["fmt", "-"], messy.as_bytes());
    assert_eq!((code, out.as_str()), (0, SCALE));

    let f = tmp("messy.weft", messy.as_bytes());
    let (code, _, err) = weft(&["fmt", "--check", path(&f)]);
    assert_eq!(code, 1);
    assert!(
        err.contains("is not in canonical form (run `weft fmt --in-place"),
        "{err}"
    );
    let (code, out, err) = weft(&["fmt", "--in-place", path(&f)]);
    assert_eq!((code, out.as_str()), (0, ""), "{err}");
    assert_eq!(std::fs::read_to_string(&f).expect("read"), SCALE);
    let (code, _, err) = weft(&["fmt", "--check", path(&f)]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn check_reports_every_parse_error_and_suggests_ops() {
    let src = "program @a(%x: f32) -> (f32) {
  %y: f32 = mull %x, %x
  %z: f32 = add %x, %x
  %w: f32 = sqr %z
  return %y
}
program @b(%x: f32 -> (f32) {
  return %x
}
program @c(%x: f32) -> (f32) {
  %y: f32 = fmaa %x, %x, %x
  return %y
}
";
    let f = tmp("many.weft", src.as_bytes());
    let (code, _, err) = weft(&["check", path(&f)]);
    assert_eq!(code, 1);
    for want in [
        "many.weft:2:13: error: unknown op `mull` (did you mean `mul`?)",
        "many.weft:4:13: error: unknown op `sqr` (did you mean `sqrt`?)",
        "many.weft:7:",
        "many.weft:11:13: error: unknown op `fmaa` (did you mean `fma`?)",
    ] {
        assert!(err.contains(want), "expected `{want}` in:\n{err}");
    }
    // No suggestion when nothing is close.
    let f = tmp(
        "far.weft",
        b"program @a(%x: f32) -> (f32) {\n  %y: f32 = frobnicate %x\n  return %y\n}\n",
    );
    let (_, _, err) = weft(&["check", path(&f)]);
    assert!(
        err.contains("unknown op `frobnicate`\n") || err.contains("unknown op `frobnicate`\r"),
        "{err}"
    );
}

#[test]
fn sum_keeps_the_output_lines_and_time_prints_both_times() {
    let f = tmp("scale_sum.weft", SCALE.as_bytes());
    let x = tmp(
        "xs.npy",
        &npy("<f4", false, "(2,)", &f32_bytes(&[1.0, 2.0])),
    );
    let (code, out, err) = weft(&[
        "run",
        path(&f),
        "--in",
        &format!("x={}", path(&x)),
        "--in",
        "a=2",
        "--sum",
        "y",
        "--time",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("sum(y) = 6"), "{out}");
    assert!(out.contains("y: shape [2] f4 [2.0, 4.0]"), "{out}");
    assert!(
        out.contains("time: compile ") && out.contains(" ms, run "),
        "{out}"
    );
}

// ---- 2. recording errors point at the user's line ----

#[test]
fn recording_errors_name_the_users_line() {
    let e = Program::record(|| {
        let x = In::<Value1f>::named("x");
        let y = In::<Value1f>::named("x"); // the line the error must name
        Out::named("y", x + y);
    })
    .map(|_| ())
    .expect_err("duplicate input");
    let line = line!() - 5;
    let text = e.to_string();
    assert!(
        text.starts_with(&format!("{}:{line}:", file!()))
            && text.contains("already has an input named `x`"),
        "{text}"
    );

    // A value copied out of its recording by `Option::clone` (inside the standard library):
    // the error names the line that uses the copy.
    let mut leak = None;
    Program::record(|| {
        let x = In::<Value1f>::named("x");
        leak = Some(x.clone());
        Out::named("y", x);
    })
    .expect("record");
    let e = Program::record(|| {
        let x = In::<Value1f>::named("x");
        Out::named("y", x + leak.clone().expect("leaked"));
    })
    .map(|_| ())
    .expect_err("leaked value");
    let line = line!() - 4;
    let text = e.to_string();
    assert!(
        text.starts_with(&format!("{}:{line}:", file!()))
            && text.contains("copied after its recording ended"),
        "{text}"
    );
}

// ---- 3. a constant boundary takes a value ----

#[test]
fn boundary_constant_takes_a_value() {
    let p = Program::record(|| {
        let a = InArray::<1, Value1f>::named("a", Boundary::constant(-1.0f32));
        let i = index::<1>();
        Out::named("y", a.read(&i + 2));
    })
    .expect("record");
    let a = Array::from_vec([3], vec![1.0f32, 2.0, 3.0]).expect("a");
    let y: Array<1, f32> = p.apply_shape(&[3], &a).expect("apply");
    assert_eq!(y.to_vec().expect("read"), vec![3.0, -1.0, -1.0]);
    assert_eq!(
        Boundary::constant([0u8, 0, 0, 255]),
        Boundary::Constant([0, 0, 0, 255])
    );
    assert_eq!(
        Boundary::constant(weft::Const::f32(0.5)),
        Boundary::Constant([0.5f32.to_bits() as u64, 0, 0, 0])
    );
}

// ---- 4. call results can be cloned ----

#[test]
fn call_results_clone() {
    let sq = Program::record(|| {
        let x = In::<Value1f>::named("x");
        Out::named("y", &x * &x);
    })
    .expect("record");
    let p = Program::record(|| {
        let x = In::<Value1f>::named("x");
        let outs = sq.call(&[x.into()]).expect("call");
        let again = sq.call(&[outs[0].clone()]).expect("call again");
        let a: Value1f = outs[0].clone().into_value().expect("f32");
        let b: Value1f = again[0].clone().into_value().expect("f32");
        Out::named("y", a + b);
    })
    .expect("record");
    let x = Array::from_vec([2], vec![2.0f32, 3.0]).expect("x");
    let y: Array<1, f32> = p.apply(&x).expect("apply");
    assert_eq!(y.to_vec().expect("read"), vec![4.0 + 16.0, 9.0 + 81.0]);
}

// ---- 5. one glob import, no clashes ----

mod prelude_only {
    use weft::prelude::*;

    /// `max` is the lane-wise maximum of recorded values; the reduction over an array is
    /// `maximum`. (`use weft::*; use weft::dsl::*;` resolves the same way.)
    #[test]
    fn prelude_glob_import_has_no_clashes() {
        let relu = Program::record(|| {
            let x = In::<Value1f>::named("x");
            Out::named("y", max(&x, 0.0f32));
        })
        .expect("record");
        let x = Array::from_vec([3], vec![-1.0f32, 0.5, 2.0]).expect("x");
        let y: Array<1, f32> = relu.apply(&x).expect("apply");
        assert_eq!(maximum(&y).expect("maximum"), 2.0);
        assert_eq!(minimum(&y).expect("minimum"), 0.0);
        // Rust's `drop` is not shadowed.
        drop(y);
    }

    mod both_globs {
        use weft::dsl::*;
        use weft::*;

        #[test]
        fn weft_and_dsl_globs_resolve_max() {
            let p = Program::record(|| {
                let x = In::<Value1f>::named("x");
                Out::named("y", max(&x, 0.0f32));
            })
            .expect("record");
            let x = Array::from_vec([2], vec![-1.0f32, 3.0]).expect("x");
            let y: Array<1, f32> = p.apply(&x).expect("apply");
            assert_eq!(maximum(&y).expect("maximum"), 3.0);
        }
    }
}

// ---- 6. integer literals with floats; scalar op tuple both ways ----

#[test]
fn literals_and_scalar_tuple_operators() {
    let p = Program::record(|| {
        let x = In::<Value1f>::named("x");
        let v = In::<Value3f>::named("v");
        let below = x.lt(1); // an integer literal where an f32 is expected
        let s = select(below, 2 - &x, &x + 1);
        let w = v.length() + &v; // scalar + tuple
        Out::named("s", &s);
        Out::named("w", &s * w);
    })
    .expect("record");
    let x = Array::from_vec([2], vec![0.5f32, 3.0]).expect("x");
    let v = Array::from_vec([2], vec![[3.0f32, 4.0, 0.0], [0.0, 0.0, 2.0]]).expect("v");
    let (s, w): (Array<1, f32>, Array<1, [f32; 3]>) = p.apply((&x, &v)).expect("apply");
    assert_eq!(s.to_vec().expect("s"), vec![1.5, 4.0]);
    assert_eq!(
        w.to_vec().expect("w"),
        vec![[12.0, 13.5, 7.5], [8.0, 8.0, 16.0]]
    );
}

// ---- 7. f64 atomic_add, as its documentation says ----

#[test]
fn f64_atomic_add_runs_on_every_device() {
    let k = Kernel::record(|| {
        let x = InArray::<1, Value1d>::named("x", Boundary::Clamp);
        let total = Buffer::<1, Value1d>::named("total");
        let id = block_index::<1>() * block_dim::<1>() + thread_index::<1>();
        total.atomic_add(0, x.read(&id));
    })
    .expect("an f64 atomic_add records");
    // Powers of two: every order of addition gives the same sum.
    let xs: Vec<f64> = (0..64).map(|i| 2f64.powi(i % 8)).collect();
    let want: f64 = xs.iter().sum();
    let x = Array::from_vec([64], xs).expect("x");
    for dev in super::kernels::dsl_devices() {
        let mut total = Array::filled([1], 0.0f64).expect("total");
        k.launch_on(
            &dev,
            &[2],
            &[32],
            &mut [KernelArg::array(&x), KernelArg::buffer(&mut total)],
        )
        .unwrap_or_else(|e| panic!("{dev}: {e}"));
        assert_eq!(total.to_vec().expect("total"), vec![want], "{dev}");
    }
}

// ---- 8. a runaway launch stops, and the error names the apply ----

#[test]
fn runaway_launch_stops_with_the_apply_line() {
    let spin = Program::record(|| {
        let x = In::<Value1f>::named("x");
        let y = x.clone();
        while_(|| y.ge(0.0f32), || y.assign(&y + 1.0f32));
        Out::named("y", y);
    })
    .expect("record");
    let x = Array::from_vec([4], vec![1.0f32; 4]).expect("x");
    let opts = weft::DeviceOptions {
        timeout: Some(std::time::Duration::from_millis(200)),
        ..weft::DeviceOptions::default()
    };
    for backend in [
        weft::Backend::Interp,
        weft::Backend::Cranelift,
        weft::Backend::Llvm,
    ] {
        let dev = weft::Device::open(backend, &opts).expect("device");
        let y: Array<1, f32> = spin.apply_on(&dev, &x).expect("apply defers");
        let line = line!() - 1;
        let e = y.to_vec().map(|_| ()).expect_err("stopped");
        let text = e.to_string();
        assert!(
            text.contains(&format!(
                "deferred launch of @{} (applied at {}:{line}:",
                spin.name(),
                file!()
            )),
            "{backend}: {text}"
        );
    }
}
