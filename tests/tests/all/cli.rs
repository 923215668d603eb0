//! The `weft` CLI run in-process: exit codes, located messages, and numpy-exact saxpy.

use std::path::PathBuf;

fn weft(args: &[&str]) -> (i32, String, String) {
    let mut argv = vec!["weft".to_string()];
    argv.extend(args.iter().map(|s| s.to_string()));
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = weft::cli::run_args(&argv, &mut out, &mut err);
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
    let (code, _, err) = weft(&["run", s, "--backend", "cuda", "--in", "a=2"]);
    assert_eq!(code, 1);
    assert!(err.contains("backend `cuda`"), "{err}");
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
