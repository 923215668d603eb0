//! The `weft` CLI run in-process: exit codes, located messages, numpy-exact saxpy, and the
//! module transformations (`opt`, `compose`, `bundle`, `bind`, `specialize`).

use std::path::PathBuf;

fn weft(args: &[&str]) -> (i32, String, String) {
    let mut argv = vec!["weft".to_string()];
    argv.extend(args.iter().map(|s| s.to_string()));
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = weft_cli::cli::run_args(&argv, &mut out, &mut err);
    (
        code,
        String::from_utf8_lossy(&out).into_owned(),
        String::from_utf8_lossy(&err).into_owned(),
    )
}

fn tmp(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("weft-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let p = dir.join(name);
    std::fs::write(&p, bytes).expect("write");
    p
}

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/ir")
}

#[test]
fn check_bad_inputs_exit_1_with_location() {
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty.weft", vec![], "empty.weft:1:1: error"),
        (
            "binary.weft",
            vec![b'p', 0xff, 0xfe, 0, 1, 2],
            "binary.weft:1:2: error: the file is not UTF-8",
        ),
        (
            "truncated.weft",
            b"program @f(%x: f32) -> (f32) {\n  %y: f32 = add %x,".to_vec(),
            "truncated.weft:2:",
        ),
        (
            "type.weft",
            b"program @f(%x: f32) -> (f32) {\n  %y: i32 = add %x, %x\n  return %y\n}\n".to_vec(),
            "type.weft:2:3: error: `add` produces f32",
        ),
        (
            "undef.weft",
            b"program @f(%x: f32) -> (f32) {\n  return %nope\n}\n".to_vec(),
            "undef.weft:2:10: error: undefined value %nope",
        ),
        (
            "nested.weft",
            "(".repeat(100_000).into_bytes(),
            "nested.weft:1:1: error",
        ),
        (
            "deep_if.weft",
            format!(
                "program @f(%c: bool) -> () {{\n{}",
                "if %c {\n".repeat(100_000)
            )
            .into_bytes(),
            "nested deeper than",
        ),
    ];
    for (name, bytes, want) in cases {
        let p = tmp(name, &bytes);
        let (code, _, err) = weft(&["check", p.to_str().expect("utf8 path")]);
        assert_eq!(code, 1, "{name}: {err}");
        assert!(err.contains(want), "{name}: expected `{want}` in:\n{err}");
    }
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(weft(&["frobnicate"]).0, 2);
    assert_eq!(weft(&["run"]).0, 2);
    assert_eq!(weft(&["--help"]).0, 0);
    // Values clap's parsers refuse and duplicate inputs (tests/all/bad_input.rs has more).
    let saxpy = examples().join("saxpy.weft");
    let s = saxpy.to_str().expect("path");
    for extra in [
        &["--iterate", "0"][..],
        &["--block", "0"],
        &["--backend", "foo"],
        &["--in", "a"],
        &["--in", "a=1", "--in", "a=2"],
        &["--shape", "1,1,1,1"],
    ] {
        let mut args = vec!["run", s];
        args.extend(extra);
        let (code, _, err) = weft(&args);
        assert_eq!(code, 2, "{extra:?}: {err}");
        assert!(err.contains(extra[0]), "{extra:?}: {err}");
    }
}

#[test]
fn run_errors_name_the_input() {
    let saxpy = examples().join("saxpy.weft");
    let s = saxpy.to_str().expect("path");
    let (code, _, err) = weft(&[
        "run",
        s,
        "--in",
        "a=2",
        "--in",
        "x=/nonexistent.npy",
        "--in",
        "y=/nonexistent.npy",
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("--in x"), "{err}");
    let (code, _, err) = weft(&["run", s, "--in", "a=two"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("--in a") && err.contains("not a valid f32"),
        "{err}"
    );
    let (code, _, err) = weft(&["run", s, "--in", "a=2"]);
    assert_eq!(code, 1);
    assert!(err.contains("needs --in for: x, y"), "{err}");
    // Without a GPU the backend is named; on a GPU machine the missing inputs are.
    let (code, _, err) = weft(&["run", s, "--backend", "cuda", "--in", "a=2"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("backend `cuda`") || err.contains("needs --in for: x, y"),
        "{err}"
    );
}

#[test]
fn saxpy_matches_two_x_plus_y_bit_for_bit() {
    let n = 10_007usize;
    // Deterministic pseudo-random f32 inputs, including specials.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        f32::from_bits((state >> 32) as u32)
    };
    let x: Vec<f32> = (0..n).map(|_| next()).collect();
    let y: Vec<f32> = (0..n).map(|_| next()).collect();
    let dir = tmp("dummy", b"").parent().expect("dir").to_path_buf();
    let (xp, yp, rp) = (dir.join("x.npy"), dir.join("y.npy"), dir.join("r.npy"));
    weft::npy::write_npy(&xp, &weft::HostArray::from_f32(&x)).expect("write x");
    weft::npy::write_npy(&yp, &weft::HostArray::from_f32(&y)).expect("write y");
    let saxpy = examples().join("saxpy.weft");
    let (code, _, err) = weft(&[
        "run",
        saxpy.to_str().expect("p"),
        "--backend",
        "interp",
        "--in",
        "a=2",
        "--in",
        &format!("x={}", xp.display()),
        "--in",
        &format!("y={}", yp.display()),
        "--out",
        &format!("r={}", rp.display()),
    ]);
    assert_eq!(code, 0, "{err}");
    let r = weft::npy::read_npy(&rp).expect("read r");
    assert_eq!(r.shape, vec![n]);
    for i in 0..n {
        let want = 2.0f32 * x[i] + y[i];
        let got = f32::from_bits(r.data[i] as u32);
        assert!(
            got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
            "element {i}: {got} vs {want}"
        );
    }
}

/// Every example verifies, prints canonically and round-trips.
#[test]
fn examples_check_and_round_trip() {
    let mut n = 0;
    for e in std::fs::read_dir(examples()).expect("examples/ir") {
        let p = e.expect("entry").path();
        if p.extension().is_none_or(|x| x != "weft") {
            continue;
        }
        let (code, out, err) = weft(&["check", p.to_str().expect("path")]);
        assert_eq!(code, 0, "{}: {err}", p.display());
        assert!(out.contains(": ok"), "{out}");
        let (code, printed, _) = weft(&["fmt", p.to_str().expect("path")]);
        assert_eq!(code, 0);
        let again = weft_ir::print_module(&weft_ir::parse_module(&printed).expect("reparses"));
        assert_eq!(again, printed, "{}", p.display());
        n += 1;
    }
    assert!(n >= 5, "expected at least 5 examples, found {n}");
}

/// The evolve example (IF with results) on a few particles, through `weft run` without --out.
#[test]
fn run_prints_summaries_without_out() {
    let dir = tmp("dummy2", b"").parent().expect("dir").to_path_buf();
    let pos = weft::HostArray {
        elem: weft::Type::tuple(weft::ScalarType::F32, 3).expect("tuple"),
        shape: vec![2],
        data: [0.0f32, 0.001, 0.0, 1.0, 1.0, 1.0]
            .iter()
            .map(|x| x.to_bits() as u64)
            .collect(),
    };
    let life = weft::HostArray::from_f32(&[0.005, 0.5]);
    let (pp, vp, lp) = (
        dir.join("pos.npy"),
        dir.join("vel.npy"),
        dir.join("life.npy"),
    );
    weft::npy::write_npy(&pp, &pos).expect("pos");
    weft::npy::write_npy(&vp, &pos).expect("vel");
    weft::npy::write_npy(&lp, &life).expect("life");
    let ev = examples().join("evolve.weft");
    let (code, out, err) = weft(&[
        "run",
        ev.to_str().expect("p"),
        "--in",
        "dt=0.01",
        "--in",
        "g=0,-9.8,0",
        "--in",
        &format!("pos={}", pp.display()),
        "--in",
        &format!("vel={}", vp.display()),
        "--in",
        &format!("life={}", lp.display()),
    ]);
    assert_eq!(code, 0, "{err}");
    // Particle 0 dies (life 0.005 - 0.01 <= 0) and is reset to the emitter.
    assert!(
        out.contains("pos: shape [2, 3] f4 [(0.0, 0.0, 0.0), "),
        "{out}"
    );
    assert!(out.contains("life: shape [2] f4 [1.0, 0.49"), "{out}");
    assert!(out.contains("checksum"), "{out}");
}

/// Reads an f32 .npy file written by `weft run --out`.
fn read_f32(p: &std::path::Path) -> Vec<f32> {
    let r = weft::npy::read_npy(p).expect("read npy");
    r.data.iter().map(|&b| f32::from_bits(b as u32)).collect()
}

/// Writes `xs` as an f32 .npy file in the test directory.
fn write_f32(name: &str, xs: &[f32]) -> PathBuf {
    let p = tmp(name, b"");
    weft::npy::write_npy(&p, &weft::HostArray::from_f32(xs)).expect("write npy");
    p
}

/// `weft opt --passes LIST --print-after-all`: one dump per pass on stderr, the last one
/// equal to the module on stdout, which verifies; dead code is gone.
#[test]
fn opt_runs_the_given_passes() {
    let src = "program @f(%x: f32) -> (y: f32) {
  %two: f32 = const 2.0
  %three: f32 = const 3.0
  %six: f32 = mul %two, %three
  %dead: f32 = add %x, %x
  %y: f32 = mul %x, %six
  return %y
}
";
    let f = tmp("opt_in.weft", src.as_bytes());
    let f = f.to_str().expect("path");
    let (code, out, err) = weft(&["opt", f, "--passes", "fold,dce", "--print-after-all"]);
    assert_eq!(code, 0, "{err}");
    let (fold, dce) = (
        err.find("; after fold\n").expect("fold dump"),
        err.find("; after dce\n").expect("dce dump"),
    );
    assert!(fold < dce, "{err}");
    assert_eq!(&err[dce + "; after dce\n".len()..], out);
    let m = weft_ir::parse_and_verify(&out).expect("opt output verifies");
    assert_eq!(weft_ir::print_module(&m), out);
    assert!(!out.contains("add"), "dead `add` kept:\n{out}");
    // The default pipeline, to a file that `weft check` accepts.
    let o = tmp("opt_out.weft", b"");
    let o = o.to_str().expect("path");
    let (code, out, err) = weft(&["opt", f, "-o", o]);
    assert_eq!((code, out.as_str()), (0, ""), "{err}");
    assert_eq!(weft(&["check", o]).0, 0);
}

#[test]
fn opt_unknown_pass_is_named_with_its_position() {
    let f = examples().join("saxpy.weft");
    let (code, out, err) = weft(&["opt", f.to_str().expect("p"), "--passes", "fold,bogus"]);
    assert_eq!(code, 1);
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains("`bogus`") && err.contains("position 2"),
        "{err}"
    );
}

/// `weft compose A:@p B:@q` is p << q: @q (which calls a helper: inlined) feeds @p; the
/// result runs with @q's inputs then @p's unfed ones.
#[test]
fn compose_two_files_then_run() {
    let a = tmp(
        "compose_a.weft",
        b"program @scale(%x: f32, uniform %k: f32) -> (y: f32) {
  %y: f32 = mul %x, %k
  return %y
}
",
    );
    let b = tmp(
        "compose_b.weft",
        b"program @add(%a: f32, %b: f32) -> (f32) {
  %s: f32 = add %a, %b
  return %s
}

program @sum(%u: f32, %v: f32) -> (s: f32) {
  %s: f32 = call @add(%u, %v)
  return %s
}
",
    );
    let c = tmp("compose_c.weft", b"");
    let (code, out, err) = weft(&[
        "compose",
        &format!("{}:@scale", a.display()),
        &format!("{}:@sum", b.display()),
        "-o",
        c.to_str().expect("p"),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.is_empty());
    let text = std::fs::read_to_string(&c).expect("read result");
    let m = weft_ir::parse_and_verify(&text).expect("compose output verifies");
    assert_eq!(m.programs.len(), 1, "{text}");
    let p = &m.programs[0];
    assert_eq!(p.name, "scale_sum");
    let params: Vec<&str> = (0..p.params.len()).map(|i| p.param_name(i)).collect();
    assert_eq!(params, ["u", "v", "k"], "{text}");
    assert!(!text.contains("call"), "{text}");
    let (u, v, y) = (
        write_f32("compose_u.npy", &[1.0, 2.0, -3.0]),
        write_f32("compose_v.npy", &[10.0, 0.5, 3.0]),
        tmp("compose_y.npy", b""),
    );
    let (code, _, err) = weft(&[
        "run",
        c.to_str().expect("p"),
        "--in",
        "k=3",
        "--in",
        &format!("u={}", u.display()),
        "--in",
        &format!("v={}", v.display()),
        "--out",
        &format!("y={}", y.display()),
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(read_f32(&y), [33.0, 7.5, 0.0]);
}

#[test]
fn compose_argument_errors_name_the_argument() {
    let s = examples().join("saxpy.weft");
    let s = s.to_str().expect("p");
    let good = format!("{s}:@saxpy");
    let (code, _, err) = weft(&["compose", &good, s]);
    assert_eq!(code, 1);
    assert!(
        err.contains(&format!("`{s}`")) && err.contains("FILE:@PROGRAM"),
        "{err}"
    );
    let (code, _, err) = weft(&["bundle", &good, &format!("{s}:@nope")]);
    assert_eq!(code, 1);
    assert!(err.contains("has no program @nope"), "{err}");
}

/// Tight binding of a uniform to a literal, then running the bound program; loose binding
/// turns a varying input into a uniform.
#[test]
fn bind_then_run() {
    let s = examples().join("saxpy.weft");
    let b = tmp("bind_saxpy.weft", b"");
    let b = b.to_str().expect("p");
    let (code, _, err) = weft(&[
        "bind",
        s.to_str().expect("p"),
        "--program",
        "@saxpy",
        "--input",
        "a=2.5",
        "-o",
        b,
    ]);
    assert_eq!(code, 0, "{err}");
    let m = weft_ir::parse_and_verify(&std::fs::read_to_string(b).expect("read")).expect("ok");
    let p = m.get("saxpy").expect("keeps its name");
    assert_eq!(p.param_index("a"), None, "bound input still there");
    let (x, y, r) = (
        write_f32("bind_x.npy", &[1.0, 2.0]),
        write_f32("bind_y.npy", &[0.5, -1.0]),
        tmp("bind_r.npy", b""),
    );
    let (code, _, err) = weft(&[
        "run",
        b,
        "--in",
        &format!("x={}", x.display()),
        "--in",
        &format!("y={}", y.display()),
        "--out",
        &format!("r={}", r.display()),
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(read_f32(&r), [3.0, 4.0]);
    // A tuple literal, and a type error naming the argument.
    let e = examples().join("evolve.weft");
    let e = e.to_str().expect("p");
    let (code, out, err) = weft(&["bind", e, "--input", "g=(0.0, -9.8, 0.0)"]);
    assert_eq!(code, 0, "{err}");
    let m = weft_ir::parse_and_verify(&out).expect("bound evolve verifies");
    assert_eq!(m.programs[0].param_index("g"), None, "{out}");
    let (code, _, err) = weft(&["bind", e, "--input", "g=1.0"]);
    assert_eq!(code, 1);
    assert!(err.contains("--input g=1.0") && err.contains("3"), "{err}");
    // Loose binding.
    let (code, out, err) = weft(&["bind", s.to_str().expect("p"), "--loose", "--input", "x"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("uniform %x: f32"), "{out}");
}

/// `--keep` keeps only the listed output; the inputs only the others needed disappear.
#[test]
fn specialize_keep_and_drop() {
    let f = tmp(
        "specialize.weft",
        b"program @g(%u: f32, %v: f32, %w: f32) -> (s: f32, d: f32) {
  %s: f32 = add %u, %v
  %d: f32 = mul %w, %w
  return %s, %d
}

program @other(%a: f32) -> (f32) {
  return %a
}
",
    );
    let f = f.to_str().expect("p");
    let (code, out, err) = weft(&["specialize", f, "--program", "@g", "--keep", "d"]);
    assert_eq!(code, 0, "{err}");
    let m = weft_ir::parse_and_verify(&out).expect("specialize output verifies");
    assert_eq!(m.programs.len(), 2, "other programs kept:\n{out}");
    let g = m.get("g").expect("@g");
    assert_eq!(g.outputs.len(), 1);
    assert_eq!(g.output_name(0), "d");
    let params: Vec<&str> = (0..g.params.len()).map(|i| g.param_name(i)).collect();
    assert_eq!(params, ["w"], "{out}");
    let (code, out, err) = weft(&["specialize", f, "--program", "g", "--drop", "d"]);
    assert_eq!(code, 0, "{err}");
    let m = weft_ir::parse_and_verify(&out).expect("verifies");
    assert_eq!(m.get("g").expect("@g").output_name(0), "s");
    let (code, _, err) = weft(&["specialize", f, "--program", "g", "--keep", "nope"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("--keep nope") && err.contains("no output"),
        "{err}"
    );
}

/// The PTX backend's workarounds for the miscompiles `weft fuzz` found on an H100 (issue 7;
/// docs/testing.md, "What it found") hold in the emitted PTX, so CI checks them without a GPU:
/// no 16-bit `abs`/`neg` (wrong machine code for MIN), no `sitofp i1` lowered as `selp 1, 0`
/// (+1.0 for true), and with fast-math, f64 `sqrt` and `div` stay correctly rounded.
#[test]
fn ptx_avoids_the_miscompiles_the_fuzzer_found() {
    let src = "program @p(%x: i16, %y: i8, %c: i32, %d: f64) -> (i16, i8, f32, f64, f64, f64) {
  %a: i16 = abs %x
  %n: i8 = neg %y
  %z: i32 = const 0
  %lt: bool = lt %c, %z
  %m: i32 = const -1
  %s: i32 = select %lt, %m, %z
  %f: f32 = cast %s
  %r: f64 = sqrt %d
  %q: f64 = div %r, %d
  %z8: i8 = const 0
  %ne: bool = ne %y, %z8
  %m8: i8 = const -1
  %t: i8 = select %ne, %m8, %z8
  %g: f64 = cast %t
  return %a, %n, %f, %r, %q, %g
}
";
    let file = tmp("ptx_workarounds.weft", src.as_bytes());
    for fast in [false, true] {
        let mut args = vec!["emit", "--target", "ptx", file.to_str().expect("path")];
        if fast {
            args.push("--fast-math");
        }
        let (code, ptx, err) = weft(&args);
        assert_eq!(code, 0, "{err}");
        for bad in [
            "abs.s16",
            "neg.s16",
            "rsqrt.approx.f64",
            "rcp.approx",
            "div.approx.f64",
        ] {
            assert!(!ptx.contains(bad), "fast-math {fast}: `{bad}` in\n{ptx}");
        }
        assert!(
            ptx.contains("sqrt.rn.f64"),
            "fast-math {fast}: no sqrt.rn.f64 in\n{ptx}"
        );
        // LLVM makes `sitofp i1` of `%g`; the backend turns it into a select of -1.0 and 0.0.
        assert!(
            ptx.contains("0dBFF0000000000000"),
            "fast-math {fast}: no select of -1.0 for the bool-to-f64 cast:\n{ptx}"
        );
        // `sitofp i1` as NVPTX miscompiled it: `selp.u32 %r, 1, 0, %p` then a signed convert.
        let regs: Vec<String> = (ptx.lines())
            .filter_map(|l| {
                let ops = l
                    .trim()
                    .strip_prefix("selp.u32")?
                    .trim()
                    .trim_end_matches(';');
                let parts: Vec<&str> = ops.split(',').map(str::trim).collect();
                (parts.len() == 4 && parts[1] == "1" && parts[2] == "0")
                    .then(|| parts[0].to_string())
            })
            .collect();
        for r in &regs {
            let bad = ptx.lines().map(str::trim).any(|l| {
                l.starts_with("cvt.rn.f") && l.contains(".s32") && l.ends_with(&format!(", {r};"))
            });
            assert!(
                !bad,
                "fast-math {fast}: `selp.u32 {r}, 1, 0` into a signed convert:\n{ptx}"
            );
        }
    }
}

/// `weft fuzz`: a short run prints the summary table and exits 0; bad arguments name the
/// argument; `cuda` without a driver is an error, not a panic (issue 7).
#[test]
fn fuzz_runs_and_reports() {
    let out = std::env::temp_dir().join("weft-cli-fuzz");
    let dir = out.to_str().expect("path");
    let (code, text, err) = weft(&["fuzz", "--cases", "20", "--quiet", "--out-dir", dir]);
    assert_eq!(code, 0, "{err}");
    assert!(text.contains("20 cases in"), "{text}");
    assert!(text.contains("| cranelift | 20 | 0 |"), "{text}");
    assert!(text.contains("| interp+default | 20 | 0 |"), "{text}");
    let (code, _, err) = weft(&["fuzz", "--backends", "interp,gpu", "--quiet"]);
    assert_eq!(code, 1);
    assert!(err.contains("--backends: unknown backend `gpu`"), "{err}");
    let (code, _, err) = weft(&["fuzz", "--time", "10x"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("unknown unit `x`"), "{err}");
    let (code, _, err) = weft(&[
        "fuzz",
        "--backends",
        "cuda",
        "--cases",
        "1",
        "--quiet",
        "--out-dir",
        dir,
    ]);
    if weft_runtime::cuda_driver_status().is_err() {
        assert_eq!(code, 1);
        assert!(err.contains("cuda requested"), "{err}");
    } else {
        assert_eq!(code, 0, "{err}");
    }
}
