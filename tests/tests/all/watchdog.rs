//! The launch watchdog (issue 19): a loop that never ends, in a map program or a kernel, on
//! Cranelift and LLVM host code, stops at its time budget with an error naming the program
//! (uniform and divergent `while`, `do … until`, a `for` of 2^62 iterations; kernels with and
//! without a barrier in the loop), leaves a kernel's buffers as they were, and the device
//! runs the next launch normally; terminating loop-heavy programs give the interpreter's bits
//! with the watchdog on; `weft run --timeout` and `WEFT_TIMEOUT` on every CPU backend.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use weft_ir::{Const, HostArray, Input, Interpreter, KernelArg, KernelGrid, Module, Type};
use weft_runtime::{CpuDevice, HostCompiler, RuntimeError};

/// The CPU devices (Cranelift, LLVM) with a budget of `budget`.
fn devices(budget: Duration) -> Vec<(&'static str, CpuDevice)> {
    let devs = vec![
        ("cranelift", CpuDevice::new()),
        (
            "llvm",
            CpuDevice::with_compiler(HostCompiler::Llvm(Default::default())),
        ),
    ];
    for (_, d) in &devs {
        d.set_timeout(Some(budget));
    }
    devs
}

fn module(src: &str) -> Module {
    weft_ir::parse_and_verify(src).unwrap_or_else(|e| panic!("{e:?}"))
}

fn i32_array(xs: &[i32]) -> Input {
    Input::Array(Arc::new(HostArray {
        elem: Type::i32(),
        shape: vec![xs.len()],
        data: xs.iter().map(|&x| x as u32 as u64).collect(),
    }))
}

/// Asserts `r` is the watchdog's error for `program` with a budget of 0.2 s, reached in
/// less than 10 s.
fn assert_timeout<T: std::fmt::Debug>(
    r: Result<T, RuntimeError>,
    program: &str,
    start: Instant,
    what: &str,
) {
    let e = r.expect_err(what);
    let msg = e.to_string();
    assert!(
        matches!(&e, RuntimeError::Timeout { program: p, .. } if p == program),
        "{what}: {msg}"
    );
    assert_eq!(
        msg,
        format!("launch of @{program} exceeded its time budget of 0.2 s"),
        "{what}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{what}: too slow"
    );
}

const ENDLESS: &str = r#"
program @spin(%x: i32) -> (r: i32) {
  %r: i32 = while iter(%v: i32 = %x) {
    %t: bool = const true
    yield %t
  } do (%w: i32) {
    %one: i32 = const 1
    %w2: i32 = add %w, %one
    yield %w2
  }
  return %r
}

; Lanes with x > 0 count down to 0 and stop; a lane with x = 0 never stops (divergent).
program @spin_some(%x: i32) -> (r: i32) {
  %z: i32 = const 0
  %r: i32 = while iter(%v: i32 = %x) {
    %pos: bool = gt %v, %z
    %zero: bool = eq %x, %z
    %more: bool = or %pos, %zero
    yield %more
  } do (%w: i32) {
    %one: i32 = const 1
    %w2: i32 = sub %w, %one
    yield %w2
  }
  return %r
}

; do … until the counter comes back to x: 2^64 iterations.
program @spin_do(%x: i32) -> (r: i64) {
  %x64: i64 = cast %x
  %r: i64 = do iter(%v: i64 = %x64) {
    %one: i64 = const 1
    %v2: i64 = add %v, %one
    yield %v2
  } until (%u: i64) {
    %back: bool = eq %u, %x64
    yield %back
  }
  return %r
}

; A `for` of 2^62 iterations, nested in a short one. (The carried value is varying: a loop
; of uniform values only would be lifted into the launch's prologue, which runs on the
; interpreter with its fuel.)
program @spin_for(%x: i32) -> (r: i64) {
  %z: i64 = const 0
  %one: i64 = const 1
  %two: i64 = const 2
  %big: i64 = const 4611686018427387904
  %x64: i64 = cast %x
  %r: i64 = for %j: i64 = %z to %two step %one iter(%a: i64 = %x64) {
    %s: i64 = for %i: i64 = %z to %big step %one iter(%b: i64 = %a) {
      %b2: i64 = add %b, %i
      yield %b2
    }
    yield %s
  }
  return %r
}

; A `for` whose bound varies (divergent control).
program @spin_for_varying(%x: i32) -> (r: i64) {
  %z: i64 = const 0
  %one: i64 = const 1
  %big: i64 = const 4611686018427387904
  %x64: i64 = cast %x
  %hi: i64 = sub %big, %x64
  %r: i64 = for %i: i64 = %z to %hi step %one iter(%a: i64 = %x64) {
    %a2: i64 = add %a, %i
    yield %a2
  }
  return %r
}

; do … until false: uniform control, varying carried value.
program @spin_do_uniform(%x: i32) -> (r: i32) {
  %r: i32 = do iter(%v: i32 = %x) {
    %one: i32 = const 1
    %v2: i32 = add %v, %one
    yield %v2
  } until (%u: i32) {
    %f: bool = const false
    yield %f
  }
  return %r
}

; For `weft run --shape N`: no input, a varying endless loop.
program @spin_index() -> (r: i64) {
  %i: i64 = index
  %one: i64 = const 1
  %r: i64 = while iter(%v: i64 = %i) {
    %t: bool = const true
    yield %t
  } do (%w: i64) {
    %w2: i64 = add %w, %one
    yield %w2
  }
  return %r
}

; Terminates: the watchdog must not change anything.
program @fine(%x: i32) -> (r: i32) {
  %one: i32 = const 1
  %r: i32 = add %x, %one
  return %r
}
"#;

#[test]
fn endless_map_loops_stop_at_the_budget_on_cranelift_and_llvm() {
    let m = module(ENDLESS);
    // Enough elements for several chunks on the rayon pool; every chunk must stop.
    let xs: Vec<i32> = (0..100_000).map(|i| i % 7).collect();
    let ins = [i32_array(&xs)];
    for (name, dev) in devices(Duration::from_millis(200)) {
        for p in [
            "spin",
            "spin_some",
            "spin_do",
            "spin_do_uniform",
            "spin_for",
            "spin_for_varying",
        ] {
            let start = Instant::now();
            let r = dev.apply(&m, p, &ins, None);
            assert_timeout(r, p, start, &format!("@{p} on {name}"));
        }
        // One element, on the calling thread.
        let start = Instant::now();
        let r = dev.apply(&m, "spin", &[i32_array(&[3])], None);
        assert_timeout(r, "spin", start, &format!("@spin of one element on {name}"));
        // The device is not poisoned: the next launch runs. (A generous budget: the budget is
        // wall-clock time, and tests running in parallel share the rayon pool.)
        dev.set_timeout(Some(Duration::from_secs(600)));
        let outs = dev
            .apply(&m, "fine", &ins, None)
            .expect("a launch after a timeout");
        let want: Vec<u64> = xs.iter().map(|&x| (x + 1) as u32 as u64).collect();
        assert_eq!(outs[0].data, want, "{name}");
    }
}

#[test]
fn a_prepared_launch_times_out_on_every_run() {
    let m = module(ENDLESS);
    for (name, dev) in devices(Duration::from_millis(200)) {
        let ins = [i32_array(&[1, 0, 2])];
        let mut l = dev.launch(&m, "spin_some", &ins, None).expect("prepares");
        for run in 0..2 {
            let start = Instant::now();
            assert_timeout(l.run(), "spin_some", start, &format!("run {run} on {name}"));
        }
    }
}

const ENDLESS_KERNELS: &str = r#"
; Work-item 0 never leaves its loop (no barrier in it: the work-item loop's own code).
kernel @kspin(buffer %out: array<1 x i32, clamp>) {
  %l: i32 = local_id
  %z: i32 = const 0
  %r: i32 = while iter(%v: i32 = %l) {
    %zero: bool = eq %l, %z
    yield %zero
  } do (%w: i32) {
    %one: i32 = const 1
    %w2: i32 = add %w, %one
    yield %w2
  }
  store %out, %l, %r
  return
}

; A group-uniform endless loop with a barrier in it (run once per group around the
; work-item loops).
kernel @kspin_barrier(buffer %out: array<1 x i32, clamp>) {
  %l: i32 = local_id
  %z: i32 = const 0
  %r: i32 = while iter(%v: i32 = %z) {
    %t: bool = const true
    yield %t
  } do (%w: i32) {
    store %out, %l, %w
    barrier
    %one: i32 = const 1
    %w2: i32 = add %w, %one
    yield %w2
  }
  store %out, %l, %r
  return
}

; A `for` of 2^62 iterations with a barrier in it.
kernel @kspin_for(buffer %out: array<1 x i32, clamp>) {
  %l: i32 = local_id
  %z: i64 = const 0
  %one: i64 = const 1
  %big: i64 = const 4611686018427387904
  %r: i64 = for %i: i64 = %z to %big step %one iter(%a: i64 = %z) {
    barrier
    %a2: i64 = add %a, %i
    yield %a2
  }
  %r32: i32 = cast %r
  store %out, %l, %r32
  return
}

; A `do … until false` with a barrier in it.
kernel @kspin_do(buffer %out: array<1 x i32, clamp>) {
  %l: i32 = local_id
  %r: i32 = do iter(%v: i32 = %l) {
    barrier
    %one: i32 = const 1
    %v2: i32 = add %v, %one
    yield %v2
  } until (%u: i32) {
    %f: bool = const false
    yield %f
  }
  store %out, %l, %r
  return
}

; Terminates.
kernel @kfine(buffer %out: array<1 x i32, clamp>) {
  %l: i32 = local_id
  %g: i32 = group_id
  %n: i32 = local_size
  %gn: i32 = mul %g, %n
  %i: i32 = add %gn, %l
  store %out, %i, %i
  return
}
"#;

#[test]
fn endless_kernel_loops_stop_at_the_budget_and_leave_buffers_alone() {
    let m = module(ENDLESS_KERNELS);
    let grid = KernelGrid::new(&[16], &[32]).expect("grid");
    let before = HostArray {
        elem: Type::i32(),
        shape: vec![512],
        data: (0..512).map(|i| 1000 + i as u64).collect(),
    };
    for (name, dev) in devices(Duration::from_millis(200)) {
        for k in ["kspin", "kspin_barrier", "kspin_for", "kspin_do"] {
            let mut buf = before.clone();
            let start = Instant::now();
            let r = dev.run_kernel(&m, k, &mut [KernelArg::Buffer(&mut buf)], &grid);
            assert_timeout(r, k, start, &format!("@{k} on {name}"));
            assert_eq!(
                buf, before,
                "@{k} on {name}: a stopped kernel changed its buffer"
            );
        }
        let mut buf = before.clone();
        dev.set_timeout(Some(Duration::from_secs(600)));
        dev.run_kernel(&m, "kfine", &mut [KernelArg::Buffer(&mut buf)], &grid)
            .expect("a kernel after a timeout");
        assert_eq!(buf.data, (0..512).collect::<Vec<u64>>(), "{name}");
    }
}

const LOOPY: &str = r#"
; Nested loops of every kind, divergent and uniform, that end: the watchdog's checks must
; not change a bit.
program @loopy(%x: i32, %y: f32, uniform %n: i32) -> (a: i32, b: f32, c: i64) {
  %z: i32 = const 0
  %one: i32 = const 1
  %three: i32 = const 3
  %half: f32 = const 0.5
  %f1: f32 = const 1.0
  %a: i32, %b: f32 = for %i: i32 = %z to %n step %one iter(%s: i32 = %x, %t: f32 = %y) {
    %k: i32 = and %s, %three
    %s2: i32 = while iter(%v: i32 = %k) {
      %more: bool = gt %v, %z
      yield %more
    } do (%w: i32) {
      %w2: i32 = sub %w, %one
      yield %w2
    }
    %si: i32 = add %s, %i
    %s3: i32 = add %si, %s2
    %t2: f32 = do iter(%u: f32 = %t) {
      %u2: f32 = mul %u, %half
      yield %u2
    } until (%q: f32) {
      %small: bool = lt %q, %f1
      yield %small
    }
    %t3: f32 = add %t2, %y
    yield %s3, %t3
  }
  %z64: i64 = const 0
  %one64: i64 = const 1
  %x64: i64 = cast %x
  %c: i64 = for %j: i64 = %z64 to %x64 step %one64 iter(%acc: i64 = %z64) {
    %acc2: i64 = add %acc, %j
    yield %acc2
  }
  return %a, %b, %c
}
"#;

#[test]
fn terminating_loops_give_the_interpreters_bits_with_the_watchdog_on() {
    let m = module(LOOPY);
    let n = 5000;
    let xs: Vec<i32> = (0..n).map(|i| (i * 37 % 1000) - 3).collect();
    let ys: Vec<f32> = (0..n).map(|i| (i as f32) * 0.731 - 50.0).collect();
    let ins = [
        i32_array(&xs),
        Input::Array(Arc::new(HostArray::from_f32(&ys))),
        Input::Uniform(Const::i32(40)),
    ];
    let want = Interpreter::new(&m)
        .apply("loopy", &ins, None)
        .expect("interpreter");
    for (name, dev) in devices(Duration::from_secs(600)) {
        let got = dev.apply(&m, "loopy", &ins, None).expect(name);
        assert_eq!(got, want, "{name} differs from the interpreter");
    }
}

/// A `weft run` in this process: (exit code, stderr).
fn weft(args: &[&str]) -> (i32, String) {
    let mut argv = vec!["weft".to_string()];
    argv.extend(args.iter().map(|s| s.to_string()));
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = weft_cli::cli::run_args(&argv, &mut out, &mut err);
    (code, String::from_utf8_lossy(&err).into_owned())
}

fn spin_file() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("weft-watchdog-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let p = dir.join("spin.weft");
    std::fs::write(&p, ENDLESS).expect("write");
    p
}

#[test]
fn weft_run_timeout_stops_every_cpu_backend() {
    let f = spin_file();
    let f = f.to_str().expect("utf-8 path");
    for backend in ["cranelift", "llvm"] {
        let start = Instant::now();
        let (code, err) = weft(&[
            "run",
            f,
            "--program",
            "spin_index",
            "--shape",
            "1000",
            "--backend",
            backend,
            "--timeout",
            "0.2",
        ]);
        assert_eq!(code, 1, "{backend}: {err}");
        assert!(
            err.contains("launch of @spin_index exceeded its time budget of 0.2 s"),
            "{backend}: {err}"
        );
        assert!(start.elapsed() < Duration::from_secs(20), "{backend}");
    }
    // The interpreter: the budget caps its fuel.
    let (code, err) = weft(&[
        "run",
        f,
        "--program",
        "spin_index",
        "--shape",
        "4",
        "--backend",
        "interp",
        "--timeout",
        "0.2",
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("@spin_index ran out of fuel"), "{err}");
    // Kernels.
    let k = spin_file().with_file_name("kspin.weft");
    std::fs::write(&k, ENDLESS_KERNELS).expect("write");
    let k = k.to_str().expect("utf-8 path");
    let z = spin_file().with_file_name("zeros.npy");
    let zeros = HostArray::zeros(Type::i32(), &[64]);
    weft::npy::write_npy(&z, &zeros).expect("npy");
    for backend in ["cranelift", "llvm"] {
        let (code, err) = weft(&[
            "run",
            k,
            "--program",
            "kspin_barrier",
            "--grid",
            "2",
            "--block",
            "32",
            "--in",
            &format!("out={}", z.display()),
            "--backend",
            backend,
            "--timeout",
            "0.2",
        ]);
        assert_eq!(code, 1, "{backend}: {err}");
        assert!(
            err.contains("launch of @kspin_barrier exceeded its time budget of 0.2 s"),
            "{backend}: {err}"
        );
    }
    // Bad values are usage errors.
    let (code, err) = weft(&["run", f, "--program", "spin_index", "--timeout", "soon"]);
    assert_eq!(code, 2, "{err}");
}

/// The environment variable that makes [`child`] run the CLI: its arguments separated by
/// U+001F.
const CHILD_ARGS: &str = "WEFT_WATCHDOG_CHILD_ARGS";

/// Not a test on its own: when [`CHILD_ARGS`] is set, runs the CLI on those arguments and
/// exits with its exit code (stderr passed on).
#[test]
fn child() {
    let Ok(args) = std::env::var(CHILD_ARGS) else {
        return;
    };
    let mut argv = vec!["weft".to_string()];
    argv.extend(args.split('\u{1f}').map(str::to_string));
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = weft_cli::cli::run_args(&argv, &mut out, &mut err);
    use std::io::Write;
    let _ = std::io::stderr().write_all(&err);
    let _ = std::io::stderr().flush();
    std::process::exit(code);
}

/// `weft ARGS` in a child process with `WEFT_TIMEOUT=timeout`: (exit code, stderr).
fn weft_with_env(timeout: &str, args: &[&str]) -> (Option<i32>, String) {
    let exe = std::env::current_exe().expect("test binary");
    let o = Command::new(exe)
        .args(["watchdog::child", "--exact", "--nocapture", "-q"])
        .args(["--test-threads", "1"])
        .env(CHILD_ARGS, args.join("\u{1f}"))
        .env("WEFT_TIMEOUT", timeout)
        .stdin(Stdio::null())
        .output()
        .expect("run the test binary");
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn weft_timeout_environment_variable() {
    let f = spin_file();
    let f = f.to_str().expect("utf-8 path");
    let run = ["run", f, "--program", "spin_index", "--shape", "100"];
    let (code, err) = weft_with_env("0.3", &run);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("launch of @spin_index exceeded its time budget of 0.3 s"),
        "{err}"
    );
    let (code, err) = weft_with_env("later", &run);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("WEFT_TIMEOUT=later"), "{err}");
}
