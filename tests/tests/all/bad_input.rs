//! Bad input never takes `weft` down (issue 19): crafted `.npy` headers (element counts
//! that overflow or wrap, negative dimensions, sizes that lie), non-regular files (a FIFO,
//! `/dev/zero`, a directory) as inputs and as `.weft` sources, a PNG header claiming 10^10
//! pixels, duplicate, unwritable and input-replacing outputs, duplicate inputs, usage
//! errors and kernel operands of the program algebra. Each case runs the CLI in a child
//! process (this test binary re-executed, see [`child`]) and asserts its exit code (1 bad
//! input, 2 usage), a message naming the file or argument, and that no signal killed it.
//! Plus a property test over `.npy` headers: `read_npy` returns `Ok` or `Err`, never
//! panics, and never `Ok` with a data length that is not the product of the shape.

use proptest::prelude::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The environment variable that makes [`child`] run the CLI: its arguments separated by
/// U+001F.
const CHILD_ARGS: &str = "WEFT_BAD_INPUT_CHILD_ARGS";

/// Not a test on its own: when [`CHILD_ARGS`] is set (by [`weft_isolated`]), runs the CLI
/// on those arguments, prints its output and exits with its exit code.
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
    let _ = std::io::stdout().write_all(&out);
    let _ = std::io::stderr().write_all(&err);
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    std::process::exit(code);
}

/// What a child `weft` did: its exit code (`None`: killed by a signal) and stderr.
struct Run {
    code: Option<i32>,
    err: String,
    out: String,
}

/// Runs `weft ARGS` in a child process (this test binary, running only [`child`]), with a
/// 120 s limit: a hang is a failure, not a stuck test run.
fn weft_isolated(args: &[&str]) -> Run {
    let exe = std::env::current_exe().expect("test binary");
    let mut c = Command::new(exe)
        .args(["bad_input::child", "--exact", "--nocapture", "-q"])
        .args(["--test-threads", "1"])
        .env(CHILD_ARGS, args.join("\u{1f}"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the test binary");
    let start = Instant::now();
    loop {
        if c.try_wait().expect("wait").is_some() {
            break;
        }
        if start.elapsed() > Duration::from_secs(120) {
            let _ = c.kill();
            panic!("weft {args:?} hung (killed after 120 s)");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let o = c.wait_with_output().expect("output");
    Run {
        code: o.status.code(),
        err: String::from_utf8_lossy(&o.stderr).into_owned(),
        out: String::from_utf8_lossy(&o.stdout).into_owned(),
    }
}

/// Runs `weft ARGS` and asserts: not killed by a signal, exit code `code`, no internal
/// error, and every string of `want` in stderr.
fn expect(args: &[&str], code: i32, want: &[&str]) -> Run {
    let r = weft_isolated(args);
    assert!(
        r.code.is_some(),
        "weft {args:?} was killed by a signal\nstderr: {}",
        r.err
    );
    assert_eq!(
        r.code,
        Some(code),
        "weft {args:?}\nstdout: {}\nstderr: {}",
        r.out,
        r.err
    );
    assert!(
        !r.err.contains("internal error"),
        "weft {args:?}: {}",
        r.err
    );
    for w in want {
        assert!(
            r.err.contains(w),
            "weft {args:?}: expected `{w}` in:\n{}",
            r.err
        );
    }
    r
}

/// A fresh directory for one test.
fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("weft-bad-input-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("tmp dir");
    d
}

/// Writes `bytes` to `dir/name`.
fn file(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).expect("write");
    p
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// An npy file (version 1 header, padded as numpy pads it) with a raw `shape` text, dtype
/// `descr` and data bytes `data`.
fn npy(shape: &str, descr: &str, data: &[u8]) -> Vec<u8> {
    npy_v(1, &format!("'shape': {shape}"), descr, data)
}

fn npy_v(version: u8, shape_entry: &str, descr: &str, data: &[u8]) -> Vec<u8> {
    let mut h = format!("{{'descr': '{descr}', 'fortran_order': False, {shape_entry}, }}");
    let prefix = if version == 1 { 10 } else { 12 };
    while (prefix + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut b = b"\x93NUMPY".to_vec();
    b.extend([version, 0]);
    if version == 1 {
        b.extend((h.len() as u16).to_le_bytes());
    } else {
        b.extend((h.len() as u32).to_le_bytes());
    }
    b.extend(h.as_bytes());
    b.extend(data);
    b
}

/// A PNG of `w × h` pixels of colour type `ct` (8 bits) whose image data is `data`
/// (compressed), with valid CRCs.
fn png(w: u32, h: u32, ct: u8, data: &[u8]) -> Vec<u8> {
    fn crc(bytes: &[u8]) -> u32 {
        let mut c = 0xffff_ffffu32;
        for &b in bytes {
            c ^= b as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    0xedb8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
            }
        }
        !c
    }
    fn chunk(out: &mut Vec<u8>, t: &[u8], d: &[u8]) {
        out.extend((d.len() as u32).to_be_bytes());
        let mut td = t.to_vec();
        td.extend(d);
        out.extend(&td);
        out.extend(crc(&td).to_be_bytes());
    }
    let mut ihdr = Vec::new();
    ihdr.extend(w.to_be_bytes());
    ihdr.extend(h.to_be_bytes());
    ihdr.extend([8, ct, 0, 0, 0]);
    let mut b = b"\x89PNG\r\n\x1a\n".to_vec();
    chunk(&mut b, b"IHDR", &ihdr);
    chunk(&mut b, b"IDAT", data);
    chunk(&mut b, b"IEND", &[]);
    b
}

/// A zlib stream of `n` zero bytes as stored blocks (no compression needed to craft it).
fn zlib_zeros(n: usize) -> Vec<u8> {
    let mut b = vec![0x78, 0x01];
    let raw = vec![0u8; n];
    let mut chunks = raw.chunks(65535).peekable();
    if chunks.peek().is_none() {
        b.extend([1, 0, 0, 0xff, 0xff]);
    }
    while let Some(c) = chunks.next() {
        b.push(u8::from(chunks.peek().is_none()));
        b.extend((c.len() as u16).to_le_bytes());
        b.extend((!(c.len() as u16)).to_le_bytes());
        b.extend(c);
    }
    // Adler-32 of zeros: a = 1, b = n (mod 65521).
    let (a, bb) = (1u32, (n % 65521) as u32);
    b.extend(((bb << 16) | a).to_be_bytes());
    b
}

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/ir")
}

const READ3: &str = "program @g(%m: array<3 x f32, clamp>, %i: <3 x i64>) -> (f32) {
  %v: f32 = read %m, %i
  return %v
}
";
const READ2: &str = "program @g(%m: array<2 x f32, clamp>, %i: <2 x i64>) -> (f32, <2 x i64>) {
  %v: f32 = read %m, %i
  %e: <2 x i64> = extent %m
  return %v, %e
}
";
const STORE: &str = "kernel @k(buffer %a: array<2 x f32, clamp>) {
  %i: i32 = const 5
  %c: <2 x i32> = tuple %i, %i
  %v: f32 = const 7.0
  store %a, %c, %v
  return
}
";

/// `.npy` headers whose element count overflows 64 bits (and wraps to 0 or 1 in unchecked
/// arithmetic), negative dimensions, headers that lie about the data size, a header longer
/// than the file: exit 1 naming the file and the claim, on every CPU backend and on cuda where
/// a GPU is present, before anything is allocated or launched.
#[test]
fn crafted_npy_headers_are_errors() {
    let d = dir("npy");
    let g3 = file(&d, "g3.weft", READ3.as_bytes());
    let g2 = file(&d, "g2.weft", READ2.as_bytes());
    let k = file(&d, "k.weft", STORE.as_bytes());
    let i3 = file(&d, "i3.npy", &npy("(1, 3)", "<i8", &[0; 24]));
    let i2 = file(&d, "i2.npy", &npy("(1, 2)", "<i8", &[0; 16]));
    let wrap0 = file(
        &d,
        "wrap0.npy",
        &npy("(4194304, 2097152, 2097152)", "<f4", &[]),
    );
    let wrap0b = file(
        &d,
        "wrap0b.npy",
        &npy("(4294967296, 4294967296)", "<f4", &[]),
    );
    let max = u64::MAX;
    let wrap1 = file(
        &d,
        "wrap1.npy",
        &npy(&format!("({max}, {max})"), "<f4", &[0; 4]),
    );
    let neg = file(&d, "neg.npy", &npy("(-2, 2)", "<f4", &[0; 16]));
    let lie = file(&d, "lie.npy", &npy("(1000, 1)", "<f4", &[0; 40]));
    let too_big = file(
        &d,
        "big_dim.npy",
        &npy("(1, 340282366920938463463374607431768211456)", "<f4", &[]),
    );
    let mut long_header = b"\x93NUMPY\x02\x00".to_vec();
    long_header.extend(u32::MAX.to_le_bytes());
    long_header.extend(b"{'descr'");
    let long_header = file(&d, "long_header.npy", &long_header);
    let in_i3 = format!("i={}", s(&i3));
    let in_i2 = format!("i={}", s(&i2));
    let mut backends = vec!["interp", "cranelift", "llvm"];
    match weft_tests::filetest::cuda_device() {
        Ok(_) => backends.push("cuda"),
        Err(e) => eprintln!("crafted_npy_headers_are_errors: SKIPPED on cuda ({e})"),
    }
    for backend in backends {
        let m = format!("m={}", s(&wrap0));
        expect(
            &["run", s(&g3), "--backend", backend, "--in", &m, "--in", &in_i3],
            1,
            &[
                "--in m",
                "wrap0.npy",
                "the header claims shape (4194304, 2097152, 2097152) = 18446744073709551616 elements",
                "but the file has 0 data bytes",
            ],
        );
        let m = format!("m={}", s(&wrap0b));
        expect(
            &[
                "run",
                s(&g2),
                "--backend",
                backend,
                "--in",
                &m,
                "--in",
                &in_i2,
            ],
            1,
            &[
                "wrap0b.npy",
                "shape (4294967296, 4294967296)",
                "0 data bytes",
            ],
        );
        let m = format!("m={}", s(&wrap1));
        expect(
            &[
                "run",
                s(&g2),
                "--backend",
                backend,
                "--in",
                &m,
                "--in",
                &in_i2,
            ],
            1,
            &["wrap1.npy", "but the file has 4 data bytes"],
        );
        // A kernel storing into a buffer read from such a file.
        let a = format!("a={}", s(&wrap0b));
        expect(
            &[
                "run",
                s(&k),
                "--backend",
                backend,
                "--grid",
                "1",
                "--block",
                "1",
                "--in",
                &a,
            ],
            1,
            &["--in a", "wrap0b.npy", "the header claims shape"],
        );
    }
    let cases: [(&Path, &str); 4] = [
        (&neg, "negative dimension"),
        (
            &lie,
            "shape (1000, 1) = 1000 elements (4000 bytes) but the file has 40 data bytes",
        ),
        (&too_big, "does not fit in 64 bits"),
        (&long_header, "the header claims 4294967295 bytes"),
    ];
    for (f, want) in cases {
        let m = format!("m={}", s(f));
        let name = f.file_name().and_then(|n| n.to_str()).expect("name");
        expect(
            &["run", s(&g2), "--in", &m, "--in", &in_i2],
            1,
            &["--in m", name, want],
        );
    }
    // The same file given to `weft bind` as an array's contents.
    let m = format!("m=@{}", s(&wrap0));
    expect(
        &["bind", s(&g3), "--input", &m],
        1,
        &["--input m", "wrap0.npy", "the header claims"],
    );
}

/// A FIFO, `/dev/zero`, `/dev/urandom` and a directory are refused before reading, as
/// `.weft` sources (`check`, `fmt`, `run`) and as `.npy` and `.png` inputs.
#[test]
fn non_regular_files_are_refused() {
    let d = dir("nonregular");
    let fifo = d.join("pipe.weft");
    let fifo_png = d.join("pipe.png");
    let fifo_npy = d.join("pipe.npy");
    for f in [&fifo, &fifo_png, &fifo_npy] {
        let st = Command::new("mkfifo").arg(f).status().expect("mkfifo");
        assert!(st.success(), "mkfifo {}", f.display());
    }
    let not_regular = "is not a regular file";
    for src in [s(&fifo), "/dev/zero", "/dev/urandom", s(&d)] {
        expect(&["check", src], 1, &[src, not_regular]);
        expect(&["fmt", src], 1, &[src, not_regular]);
        expect(&["run", src], 1, &[src, not_regular]);
    }
    expect(&["check", s(&fifo)], 1, &["(it is a FIFO)"]);
    expect(&["check", "/dev/zero"], 1, &["(it is a character device)"]);
    let saxpy = examples().join("saxpy.weft");
    for input in [s(&fifo_npy), "/dev/zero", "/dev/urandom", s(&d)] {
        let x = format!("x={input}");
        expect(
            &[
                "run",
                s(&saxpy),
                "--in",
                "a=2",
                "--in",
                &x,
                "--in",
                &x.replacen('x', "y", 1),
            ],
            1,
            &["--in x", input, not_regular],
        );
    }
    let img = file(
        &d,
        "img.weft",
        b"program @img(%m: array<2 x f32, clamp>) -> (f32) {\n  %i: <2 x i64> = index\n  %v: f32 = read %m, %i\n  return %v\n}\n",
    );
    let m = format!("m={}", s(&fifo_png));
    expect(
        &["run", s(&img), "--shape", "2,2", "--in", &m],
        1,
        &["--in m", "pipe.png", not_regular],
    );
}

/// A PNG header claiming 10^10 pixels (or 2^62) is an error before the image is allocated;
/// a small PNG still reads.
#[test]
fn huge_png_headers_are_errors() {
    let d = dir("png");
    let img = file(
        &d,
        "img.weft",
        b"program @img(%m: array<2 x f32, clamp>) -> (f32) {\n  %i: <2 x i64> = index\n  %v: f32 = read %m, %i\n  return %v\n}\n",
    );
    let huge = file(&d, "huge.png", &png(100_000, 100_000, 0, &zlib_zeros(100)));
    let m = format!("m={}", s(&huge));
    expect(
        &["run", s(&img), "--shape", "2,2", "--in", &m],
        1,
        &[
            "--in m",
            "huge.png",
            "the header claims 100000 × 100000 pixels",
        ],
    );
    let max = (1u32 << 31) - 1;
    let huger = file(&d, "huger.png", &png(max, max, 6, &zlib_zeros(100)));
    let m = format!("m={}", s(&huger));
    expect(
        &["run", s(&img), "--shape", "2,2", "--in", &m],
        1,
        &["--in m", "huger.png", "too large"],
    );
    // 3 rows of 4 grey pixels 0, 1, 2, 3 (each row: filter byte 0, then the pixels).
    let rows: Vec<u8> = (0..3).flat_map(|_| [0, 0, 1, 2, 3]).collect();
    let mut z = vec![0x78, 0x01, 1];
    z.extend((rows.len() as u16).to_le_bytes());
    z.extend((!(rows.len() as u16)).to_le_bytes());
    z.extend(&rows);
    let (mut a, mut b) = (1u32, 0u32);
    for &x in &rows {
        a = (a + x as u32) % 65521;
        b = (b + a) % 65521;
    }
    z.extend(((b << 16) | a).to_be_bytes());
    let small = file(&d, "small.png", &png(4, 3, 0, &z));
    let m = format!("m={}", s(&small));
    let r = expect(&["run", s(&img), "--shape", "3,4", "--in", &m], 0, &[]);
    assert!(
        r.out.contains("[0.0, 1.0, 2.0, 3.0, 0.0, 1.0, ...]"),
        "{}",
        r.out
    );
}

/// Two `--out` to one file (spelled differently), an output that is also an input (the
/// input is unchanged afterwards), a missing or unwritable directory, `/dev/null` or a
/// directory as target: exit 1 naming the `--out` argument, checked before the run (no file
/// is written, no temporary file is left). A good run replaces an existing output whole.
#[test]
fn bad_outputs_are_refused_before_running() {
    let d = dir("outputs");
    let two = file(
        &d,
        "two.weft",
        b"program @two(%x: f32) -> (s: f32, w: f64) {\n  %s: f32 = add %x, %x\n  %w: f64 = cast %s\n  return %s, %w\n}\n",
    );
    let xs: Vec<u8> = [1.0f32, 2.0, 3.0]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let x = file(&d, "x.npy", &npy("(3,)", "<f4", &xs));
    let before = std::fs::read(&x).expect("x");
    let in_x = format!("x={}", s(&x));
    let o = d.join("o.npy");
    let o2 = d.join(".").join("o.npy");
    let run = |outs: &[String]| {
        let mut args = vec!["run", s(&two), "--in", &in_x];
        for o in outs {
            args.extend(["--out", o.as_str()]);
        }
        weft_isolated(&args)
    };
    let check = |outs: &[&str], want: &[&str]| {
        let mut args = vec!["run", s(&two), "--in", in_x.as_str()];
        for o in outs {
            args.extend(["--out", *o]);
        }
        expect(&args, 1, want);
    };
    let so = format!("s={}", s(&o));
    let so = so.as_str();
    let wo = format!("w={}", s(&o2));
    let wo = wo.as_str();
    check(
        &[so, wo],
        &[&format!("--out {so} and --out {wo} write the same file")],
    );
    assert!(
        !o.exists(),
        "nothing is written when the outputs are refused"
    );
    let wx = format!("w={}", s(&x));
    let wx = wx.as_str();
    check(
        &[wx],
        &[&format!(
            "--out {wx} would replace the file that --in {in_x} reads"
        )],
    );
    let link = d.join("link.npy");
    std::os::unix::fs::symlink(&x, &link).expect("symlink");
    let wl = format!("w={}", s(&link));
    let wl = wl.as_str();
    check(&[wl], &["would replace the file that --in"]);
    assert_eq!(
        std::fs::read(&x).expect("x"),
        before,
        "the input is unchanged"
    );
    check(
        &[so, "w=/nonexistent/r.npy"],
        &["--out w=/nonexistent/r.npy: directory /nonexistent does not exist"],
    );
    assert!(!o.exists(), "no output is written when one is refused");
    check(
        &["s=/proc/r.npy"],
        &["--out s=/proc/r.npy: directory /proc is not writable"],
    );
    check(
        &["s=/dev/null"],
        &["--out s=/dev/null", "is not a regular file"],
    );
    let sd = format!("s={}", s(&d));
    let sd = sd.as_str();
    check(
        &[sd],
        &[
            &format!("--out {sd}"),
            "is not a regular file (it is a directory)",
        ],
    );
    check(&["nope=r.npy"], &["--out nope", "has no output `nope`"]);
    // A good run: an existing output is replaced whole, and no temporary file remains.
    std::fs::write(&o, vec![b'#'; 10_000]).expect("old o");
    let r = run(&[so.to_string()]);
    assert_eq!(r.code, Some(0), "{}", r.err);
    let back = weft::npy::read_npy(&o).expect("o");
    assert_eq!(back.shape, vec![3]);
    let names: Vec<String> = std::fs::read_dir(&d)
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|n| !n.ends_with(".tmp")),
        "temporary files left: {names:?}"
    );
    // `-o` of the module transformations is checked first too.
    expect(
        &["opt", s(&two), "-o", "/nonexistent/o.weft"],
        1,
        &["-o /nonexistent/o.weft: directory /nonexistent does not exist"],
    );
}

/// Usage errors exit 2 naming the argument: `--iterate 0`, `--block 0`, `--grid 0`,
/// `--backend foo` (listing the backends), `--in a` without `=`, the same input twice,
/// `--shape` with 4 axes, an extent or element count that overflows.
#[test]
fn usage_errors_exit_2_naming_the_argument() {
    let saxpy = examples().join("saxpy.weft");
    let sx = s(&saxpy);
    let cases: &[(&[&str], &[&str])] = &[
        (&["--iterate", "0"], &["--iterate", "at least 1"]),
        (&["--block", "0"], &["--block", "at least 1"]),
        (&["--grid", "0"], &["--grid", "at least 1"]),
        (&["--grid", "1,1,1,1"], &["--grid", "1 to 3 axes"]),
        (
            &["--backend", "foo"],
            &["--backend", "foo", "cranelift", "llvm", "cuda", "interp"],
        ),
        (&["--in", "a"], &["--in", "NAME=VALUE"]),
        (&["--out", "r"], &["--out", "NAME=VALUE"]),
        (
            &["--in", "a=1", "--in", "a=2"],
            &["--in a=2", "input `a` is given twice"],
        ),
        (
            &["--shape", "1,2,3,4"],
            &["--shape", "launches have 1 to 3 axes"],
        ),
        (
            &["--shape", "99999999999999999999"],
            &["--shape", "too large"],
        ),
        (
            &["--shape", "4294967296,4294967296"],
            &["--shape", "more elements than fit"],
        ),
        (
            &["--shape", "0,4294967296,4294967296"],
            &["--shape", "more elements than fit"],
        ),
        (&["--shape", "2,x"], &["--shape", "not a whole number"]),
    ];
    for (extra, want) in cases {
        let mut args = vec!["run", sx];
        args.extend(*extra);
        expect(&args, 2, want);
    }
    expect(&["emit", sx, "--target", "foo"], 2, &["--target", "clif"]);
}

/// The program algebra takes map programs: a kernel operand of `compose`, `bundle`, `bind`
/// or `specialize` is an error naming it, not an internal error.
#[test]
fn algebra_refuses_kernels() {
    let saxpy = examples().join("saxpy.weft");
    let reduce = examples().join("kernels/reduce.weft");
    let p = format!("{}:@saxpy", s(&saxpy));
    let q = format!("{}:@block_reduce", s(&reduce));
    let msg = "@block_reduce is a kernel; the program algebra takes map programs";
    expect(&["compose", &p, &q], 1, &[msg]);
    expect(&["compose", &q, &p], 1, &[msg]);
    expect(&["bundle", &p, &q], 1, &[msg]);
    expect(&["bind", s(&reduce), "--input", "x=1"], 1, &[msg]);
    expect(&["bind", s(&reduce), "--loose", "--input", "x"], 1, &[msg]);
    expect(&["specialize", s(&reduce), "--keep", "0"], 1, &[msg]);
}

/// A header literal for the property test: a shape entry, a dtype, the fortran flag.
fn header_parts() -> impl Strategy<Value = (Vec<i128>, String, bool, u8)> {
    let dim = prop_oneof![
        4 => 0i128..6,
        1 => Just(1i128 << 21),
        1 => Just(1i128 << 22),
        1 => Just(1i128 << 32),
        1 => Just(u64::MAX as i128),
        1 => Just(u64::MAX as i128 + 1),
        1 => any::<u64>().prop_map(i128::from),
        1 => -3i128..0,
    ];
    let dtype = prop_oneof![
        Just("<f4"),
        Just(">f4"),
        Just("<f8"),
        Just("<f2"),
        Just("|b1"),
        Just("|u1"),
        Just("<i2"),
        Just(">i8"),
        Just("<u4"),
        Just("|i1"),
        Just("=u2"),
        Just("<c8"),
        Just("|f4"),
        Just("f4"),
        Just(""),
        Just("<U3"),
        Just("<V8"),
    ];
    (
        prop::collection::vec(dim, 0..5),
        dtype.prop_map(str::to_string),
        any::<bool>(),
        1u8..4,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    /// `.npy` headers with random shapes (zero, small, huge, wrapping, negative), dtypes
    /// and data lengths (exact, short, long, truncated files): `read_npy` never panics, is
    /// never `Ok` with a data length other than the shape's product, and reads every file
    /// whose header tells the truth.
    #[test]
    fn npy_headers_never_panic(
        (dims, dtype, fortran, version) in header_parts(),
        exact in any::<bool>(),
        extra in 0usize..40,
        cut in prop::option::of(0usize..200),
        seed in any::<u64>(),
    ) {
        let shape = match dims.as_slice() {
            [d] => format!("({d},)"),
            ds => format!("({})", ds.iter().map(i128::to_string).collect::<Vec<_>>().join(", ")),
        };
        let item = dtype.get(2..).and_then(|n| n.parse::<usize>().ok()).unwrap_or(1);
        let count = dims
            .iter()
            .try_fold(1u128, |c, &d| u128::try_from(d).ok().and_then(|d| c.checked_mul(d)));
        let small = count.filter(|&c| c.checked_mul(item as u128).is_some_and(|b| b <= 4096));
        let n = match (exact, small) {
            (true, Some(c)) => c as usize * item,
            _ => extra,
        };
        let is_bool = dtype.ends_with("b1");
        let data: Vec<u8> = (0..n)
            .map(|i| {
                let x = (seed >> (i % 57)) as u8 ^ i as u8;
                if is_bool { x & 1 } else { x }
            })
            .collect();
        let mut bytes = npy_v(
            version,
            &format!("'shape': {shape}"),
            &dtype,
            &data,
        );
        if fortran {
            let t = String::from_utf8_lossy(&bytes).replace("False", "True ");
            bytes = t.into_bytes();
        }
        if let Some(c) = cut {
            bytes.truncate(c);
        }
        let r = weft::npy::read_npy_bytes(&bytes);
        if let Ok(d) = &r {
            let product = d.shape.iter().try_fold(1usize, |c, &x| c.checked_mul(x));
            prop_assert_eq!(Some(d.data.len()), product);
            let nonzero = d
                .shape
                .iter()
                .filter(|&&x| x != 0)
                .try_fold(1usize, |c, &x| c.checked_mul(x));
            prop_assert!(nonzero.is_some(), "non-zero extents overflow: {:?}", d.shape);
        }
        let valid_dtype = ["<f4", ">f4", "<f8", "<f2", "|b1", "|u1", "<i2", ">i8", "<u4", "|i1", "=u2"]
            .contains(&dtype.as_str());
        // numpy's rule: the non-zero extents times the item size fit in 2^63 - 1 bytes.
        let dims_fit = dims.iter().all(|&d| u64::try_from(d).is_ok())
            && dims
                .iter()
                .filter(|&&d| d != 0)
                .try_fold(item as u128, |c, &d| u128::try_from(d).ok().and_then(|d| c.checked_mul(d)))
                .is_some_and(|b| b <= i64::MAX as u128);
        let truthful = exact && small.is_some() && dims_fit && !fortran && cut.is_none() && valid_dtype
            && bytes.len() < 1 << 20;
        if truthful {
            prop_assert!(r.is_ok(), "a truthful file fails: {:?} ({shape} {dtype})", r.err());
        }
    }
}

/// The file-reading side of the property test: `read_npy` of a truncated file and of a
/// good one, through the file system.
#[test]
fn read_npy_files() {
    let d = dir("npyfiles");
    let good = file(
        &d,
        "good.npy",
        &npy("(2, 3)", "<u2", &[1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0]),
    );
    let r = weft::npy::read_npy(&good).expect("good");
    assert_eq!(r.shape, vec![2, 3]);
    assert_eq!(r.data, vec![1, 2, 3, 4, 5, 6]);
    let mut bytes = std::fs::read(&good).expect("good");
    bytes.truncate(bytes.len() - 1);
    let short = file(&d, "short.npy", &bytes);
    let e = weft::npy::read_npy(&short).expect_err("short").to_string();
    assert!(
        e.contains("short.npy") && e.contains("11 data bytes"),
        "{e}"
    );
    let b = file(&d, "bool.npy", &npy("(2,)", "|b1", &[1, 2]));
    let e = weft::npy::read_npy(&b).expect_err("bool").to_string();
    assert!(e.contains("not a bool"), "{e}");
}
