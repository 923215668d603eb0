//! The seed papers' workloads (docs/workloads.md) at CI sizes: each Rust example
//! (`weft-workloads`, `workloads/src/`) on both CPU backends (and a CUDA GPU when present) within its
//! stated tolerance of the f64 reference, and each `.weft` program (`examples/ir/`) through
//! `weft run`. Real inputs come from `scripts/fetch_data.sh` (which `scripts/test.sh` runs);
//! a test whose file is missing fails and says how to fetch it.

use std::path::PathBuf;
use weft::ir::{ScalarType, Type};
use weft::{Device, HostArray};
use weft_workloads::{blackscholes, cg, coins, ep, jacobi, mdh};

/// Both CPU backends, and CUDA GPU 0 when a driver and GPU are present (else a message
/// says it was skipped).
fn devices() -> Vec<Device> {
    let mut d = vec![Device::cpu_cranelift(), Device::cpu_llvm()];
    match Device::cuda(0) {
        Ok(g) => d.push(g),
        Err(e) => eprintln!("workloads: skipping CUDA ({e})"),
    }
    d
}

#[test]
fn mdh_is_within_tolerance_of_f64() {
    let atoms = mdh::atoms(512);
    assert_eq!(
        atoms.len(),
        512,
        "mache.pqr missing? run scripts/fetch_data.sh"
    );
    for d in devices() {
        let pot = mdh::mdh(&d, &atoms, 12).unwrap();
        let err = mdh::check(&atoms, 12, &pot, 1);
        assert!(err <= 1.0, "on {d}: error {err} of the tolerance");
        eprintln!("workload mdh (512 atoms × 12³) on {d}: {err:.4} of the tolerance");
    }
}

#[test]
fn mdh_writes_npy_and_a_png_slice() {
    let atoms = mdh::atoms(64);
    let pot = mdh::mdh(&Device::cpu(), &atoms, 8).unwrap();
    let dir = std::env::temp_dir().join(format!("weft-mdh-{}", std::process::id()));
    let png = mdh::save(&dir, 8, &pot).unwrap();
    let back = weft::npy::read_npy(&dir.join("potential.npy")).unwrap();
    assert_eq!(back.shape, vec![8, 8, 8]);
    assert_eq!(back.data[5], pot[5].to_bits() as u64);
    let (h, w, _) = weft::data::read_png_gray(&png).unwrap();
    assert!(h >= 64 && w > 64, "slice with colour bar: {h}×{w}");
}

#[test]
fn jacobi_converges_within_tolerance_of_f64() {
    for d in devices() {
        let (u, sweeps, delta) = jacobi::jacobi(&d, 32, 1e-4, 100_000).unwrap();
        assert!(
            delta < 1e-4 && sweeps % jacobi::CHECK == 0,
            "on {d}: {sweeps} {delta}"
        );
        let err = jacobi::max_error(&u, &jacobi::reference(32, sweeps));
        assert!(err <= 1e-4, "on {d}: max error {err}");
        eprintln!("workload jacobi (32², tol 1e-4) on {d}: {sweeps} sweeps, max error {err:.2e}");
    }
}

#[test]
fn spmv_and_cg_solve_lund_a() {
    let a = weft_workloads::data::read_matrix_market(
        &weft_workloads::data::cached("lund_a.mtx").unwrap(),
    )
    .unwrap();
    assert_eq!(
        (a.rows, a.nnz()),
        (147, 2449),
        "lund_a: both triangles stored"
    );
    let b = a.mul(&vec![1.0; a.cols]);
    let reference = cg::reference(&a, &b, 1e-10, 10_000);
    for d in devices() {
        let da = cg::DeviceCsr::new(&a).unwrap();
        let y = cg::spmv(&d, &da, &b).unwrap();
        assert_eq!(
            y,
            a.mul(&b),
            "SpMV on {d}: same order of sums, same f64 results"
        );
        let s = cg::cg(&d, &da, &b, 1e-10, 10_000).unwrap();
        let res = cg::true_residual(&a, &s.x, &b);
        assert!(res <= 1e-9, "on {d}: true residual {res}");
        assert!(
            s.iterations.abs_diff(reference.iterations) <= 5,
            "on {d}: {} iterations, the host reference {}",
            s.iterations,
            reference.iterations
        );
        eprintln!(
            "workload cg (lund_a) on {d}: {} iterations, true residual {res:.2e}",
            s.iterations
        );
    }
}

#[test]
fn ep_class_s_matches_the_published_sums() {
    for d in devices() {
        let (sx, sy, q) = ep::ep(&d, 24, 4096).unwrap();
        assert!(ep::verify_class_s(sx, sy), "on {d}: sx {sx} sy {sy}");
        assert_eq!(
            q,
            [6140517, 5865300, 1100361, 68546, 1648, 17, 0, 0, 0, 0],
            "on {d}"
        );
        eprintln!("workload ep (class S) on {d}: sx {sx:.15e} sy {sy:.15e}");
    }
}

#[test]
fn coin_finder_finds_the_coins() {
    let (h, w, img) = coins::load().unwrap();
    assert_eq!((h, w), (303, 384));
    for d in devices() {
        let found = coins::find_coins(&d, h, w, &img, coins::COINS).unwrap();
        let (hits, false_pos) = coins::score(&found);
        assert!(
            hits >= 22 && false_pos == 0,
            "on {d}: {hits} of 24 found, {false_pos} false"
        );
        eprintln!("workload coins on {d}: {hits} of 24 coins, {false_pos} false");
    }
}

#[test]
fn ring_masks_specialise_to_constant_offsets() {
    let generic = coins::ring_program().unwrap();
    let m = coins::ring(5);
    let mask = HostArray {
        elem: Type::tuple(ScalarType::I32, 2).unwrap(),
        shape: vec![m.len()],
        data: m.iter().flatten().map(|&v| v as u32 as u64).collect(),
    };
    let r5 = generic.bind_array("mask", &mask).unwrap();
    let text = r5.text();
    assert_eq!(
        r5.ir().params.len(),
        1,
        "the mask is no longer an input:\n{text}"
    );
    assert!(
        !text.contains(" for "),
        "the ring loop is unrolled:\n{text}"
    );
    assert!(
        text.contains("const (-5, 0)"),
        "offsets are constants:\n{text}"
    );
}

#[test]
fn black_scholes_is_within_tolerance_of_f64() {
    let (s, x, t) = blackscholes::options(100_000);
    for d in devices() {
        let (call, put) = blackscholes::price(&d, &s, &x, &t).unwrap();
        let (ec, ep) = blackscholes::l1_errors(&s, &x, &t, &call, &put);
        assert!(ec <= 1e-6 && ep <= 1e-6, "on {d}: {ec} {ep}");
        eprintln!("workload blackscholes (100,000 options) on {d}: L1 errors {ec:.2e} {ep:.2e}");
    }
}

// ---- the .weft versions through `weft run`

fn weft(args: &[String]) -> String {
    let mut argv = vec!["weft".to_string()];
    argv.extend(args.iter().cloned());
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = weft_cli::cli::run_args(&argv, &mut out, &mut err);
    let (out, err) = (String::from_utf8_lossy(&out), String::from_utf8_lossy(&err));
    assert_eq!(code, 0, "weft {argv:?}\nstdout: {out}\nstderr: {err}");
    out.into_owned()
}

fn dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("weft-workloads-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn ir(name: &str) -> String {
    format!("{}/../examples/ir/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn save(name: &str, a: HostArray) -> String {
    let p = dir().join(name);
    weft::npy::write_npy(&p, &a).unwrap();
    p.display().to_string()
}

fn load(path: &str, elem: Type) -> HostArray {
    weft::npy::to_host_array(
        weft::npy::read_npy(std::path::Path::new(path)).unwrap(),
        elem,
        None,
    )
    .unwrap()
}

fn f64s(a: &HostArray) -> Vec<f64> {
    a.data.iter().map(|&b| f64::from_bits(b)).collect()
}

fn args(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

const BACKENDS: [&str; 2] = ["cranelift", "llvm"];

#[test]
fn weft_run_jacobi_iterates_to_the_tolerance() {
    let mut u0 = HostArray::from_f32(&jacobi::initial(32));
    u0.shape = vec![32, 32];
    let u0 = save("u0.npy", u0);
    for be in BACKENDS {
        let out = dir().join(format!("u-{be}.npy")).display().to_string();
        let text = weft(&args(&[
            "run",
            &ir("jacobi.weft"),
            "--backend",
            be,
            "--shape",
            "32,32",
            "--in",
            &format!("u={u0}"),
            "--iterate",
            "100000",
            "--feed",
            "u_next=u",
            "--until",
            "delta<1e-4",
            "--out",
            &format!("u_next={out}"),
        ]));
        let sweeps: usize = text
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("{text}"));
        assert!(text.contains("converged"), "{text}");
        let u = load(&out, Type::f32()).to_f32();
        let err = jacobi::max_error(&u, &jacobi::reference(32, sweeps));
        assert!(err <= 1e-4, "{be}: {err}");
    }
}

#[test]
fn weft_run_ep_sums_match_class_s() {
    for be in BACKENDS {
        let text = weft(&args(&[
            "run",
            &ir("ep.weft"),
            "--backend",
            be,
            "--shape",
            "4096",
            "--in",
            "per=4096",
            "--sum",
            "sx",
            "--sum",
            "sy",
            "--sum",
            "q0",
            "--sum",
            "q5",
        ]));
        let get = |k: &str| -> f64 {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("sum({k}) = ")))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{text}"))
        };
        assert!(ep::verify_class_s(get("sx"), get("sy")), "{be}: {text}");
        assert_eq!((get("q0"), get("q5")), (6140517.0, 17.0), "{be}");
    }
}

fn csr_args(a: &weft_workloads::data::Csr) -> Vec<String> {
    let i32s = |v: &[i32]| HostArray {
        elem: Type::scalar(ScalarType::I32),
        shape: vec![v.len()],
        data: v.iter().map(|&x| x as u32 as u64).collect(),
    };
    args(&[
        "--in",
        &format!("rowptr={}", save("rowptr.npy", i32s(&a.rowptr))),
        "--in",
        &format!("col={}", save("col.npy", i32s(&a.col))),
        "--in",
        &format!("val={}", save("val.npy", f64_array(&a.val))),
    ])
}

fn f64_array(v: &[f64]) -> HostArray {
    HostArray {
        elem: Type::scalar(ScalarType::F64),
        shape: vec![v.len()],
        data: v.iter().map(|x| x.to_bits()).collect(),
    }
}

#[test]
fn weft_run_spmv_and_cg_on_lund_a() {
    let a = weft_workloads::data::read_matrix_market(
        &weft_workloads::data::cached("lund_a.mtx").unwrap(),
    )
    .unwrap();
    let b = a.mul(&vec![1.0; a.cols]);
    let bpath = save("b.npy", f64_array(&b));
    let x0 = save("x0.npy", f64_array(&vec![0.0; a.rows]));
    let bnorm = b.iter().map(|v| v * v).sum::<f64>().sqrt();
    let n = a.rows.to_string();
    for be in BACKENDS {
        let y = dir().join(format!("y-{be}.npy")).display().to_string();
        let mut v = args(&["run", &ir("spmv.weft"), "--backend", be, "--shape", &n]);
        v.extend(csr_args(&a));
        v.extend(args(&[
            "--in",
            &format!("x={bpath}"),
            "--out",
            &format!("y={y}"),
        ]));
        weft(&v);
        assert_eq!(
            f64s(&load(&y, Type::scalar(ScalarType::F64))),
            a.mul(&b),
            "{be}"
        );

        let x = dir().join(format!("x-{be}.npy")).display().to_string();
        let mut v = args(&[
            "run",
            &ir("cg.weft"),
            "--program",
            "cg",
            "--backend",
            be,
            "--shape",
            &n,
        ]);
        v.extend(csr_args(&a));
        v.extend(args(&[
            "--in",
            &format!("x={x0}"),
            "--in",
            &format!("r={bpath}"),
            "--in",
            &format!("p={bpath}"),
            "--in",
            &format!("bnorm={bnorm:e}"),
            "--iterate",
            "2000",
            "--feed",
            "x_next=x",
            "--feed",
            "r_next=r",
            "--feed",
            "p_next=p",
            "--until",
            "res<1e-10",
            "--out",
            &format!("x_next={x}"),
        ]));
        let text = weft(&v);
        assert!(text.contains("converged"), "{be}: {text}");
        let res = cg::true_residual(&a, &f64s(&load(&x, Type::scalar(ScalarType::F64))), &b);
        assert!(res <= 1e-9, "{be}: {text} true residual {res}");
    }
}

#[test]
fn weft_run_black_scholes() {
    let (s, x, t) = blackscholes::options(10_000);
    let (sp, xp, tp) = (
        save("s.npy", HostArray::from_f32(&s)),
        save("x.npy", HostArray::from_f32(&x)),
        save("t.npy", HostArray::from_f32(&t)),
    );
    for be in BACKENDS {
        let (c, p) = (
            dir().join(format!("c-{be}.npy")),
            dir().join(format!("p-{be}.npy")),
        );
        let (c, p) = (c.display().to_string(), p.display().to_string());
        weft(&args(&[
            "run",
            &ir("blackscholes.weft"),
            "--program",
            "blackscholes",
            "--backend",
            be,
            "--in",
            &format!("s={sp}"),
            "--in",
            &format!("x={xp}"),
            "--in",
            &format!("t={tp}"),
            "--in",
            "r=0.02",
            "--in",
            "v=0.3",
            "--out",
            &format!("call={c}"),
            "--out",
            &format!("put={p}"),
        ]));
        let (call, put) = (
            load(&c, Type::f32()).to_f32(),
            load(&p, Type::f32()).to_f32(),
        );
        let (ec, ep) = blackscholes::l1_errors(&s, &x, &t, &call, &put);
        assert!(ec <= 1e-6 && ep <= 1e-6, "{be}: {ec} {ep}");
    }
}

#[test]
fn weft_run_coins_edges_ring_and_peaks() {
    let png = weft_workloads::data::cached("coins.png")
        .unwrap()
        .display()
        .to_string();
    let e = dir().join("e.npy").display().to_string();
    weft(&args(&[
        "run",
        &ir("coins.weft"),
        "--program",
        "edges",
        "--shape",
        "303,384",
        "--in",
        &format!("img={png}"),
        "--out",
        &format!("e={e}"),
    ]));
    // The .weft edges equal the DSL's.
    let (h, w, img) = coins::load().unwrap();
    let ea = weft::Array::from_slice([h, w], &img).unwrap();
    let want: weft::Array<2, f32> = coins::edges_program()
        .unwrap()
        .apply_shape_on(&Device::cpu(), &[h, w], &ea)
        .unwrap();
    assert_eq!(load(&e, Type::f32()).to_f32(), want.to_vec().unwrap());
    // One radius, the mask tight-bound by `weft bind`, then the peaks of its score.
    let m = coins::ring(20);
    let mask = save(
        "ring20.npy",
        HostArray {
            elem: Type::tuple(ScalarType::I32, 2).unwrap(),
            shape: vec![m.len()],
            data: m.iter().flatten().map(|&v| v as u32 as u64).collect(),
        },
    );
    let bound = dir().join("ring20.weft");
    weft(&args(&[
        "bind",
        &ir("coins.weft"),
        "--program",
        "ring",
        "--input",
        &format!("mask=@{mask}"),
        "-o",
        &bound.display().to_string(),
    ]));
    let s = dir().join("s20.npy").display().to_string();
    for be in BACKENDS {
        weft(&args(&[
            "run",
            &bound.display().to_string(),
            "--program",
            "ring",
            "--backend",
            be,
            "--shape",
            "303,384",
            "--in",
            &format!("e={e}"),
            "--out",
            &format!("s={s}"),
        ]));
        let text = weft(&args(&[
            "run",
            &ir("coins.weft"),
            "--program",
            "peaks",
            "--backend",
            be,
            "--shape",
            "303,384",
            "--in",
            &format!("best={s}"),
            "--in",
            "win=14",
            "--in",
            "thresh=300",
            "--sum",
            "peak",
        ]));
        let peaks: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix("sum(peak) = "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("{text}"));
        assert!(
            (3.0..=24.0).contains(&peaks),
            "{be}: {peaks} peaks of the radius-20 score"
        );
    }
}

/// `weft run --iterate` keeps its arrays in kernel buffers between steps on the CPU, and
/// resident on a GPU (issue 21): the same sweeps, stopping point and bits as the
/// interpreter's step-by-step loop.
#[test]
fn weft_run_iterate_on_kernel_buffers_gives_the_interpreters_bits() {
    let mut u0 = HostArray::from_f32(&jacobi::initial(12));
    u0.shape = vec![12, 12];
    let u0 = save("u0-iter.npy", u0);
    let run = |be: &str| {
        let out = dir().join(format!("u-iter-{be}.npy")).display().to_string();
        let text = weft(&args(&[
            "run",
            &ir("jacobi.weft"),
            "--backend",
            be,
            "--shape",
            "12,12",
            "--in",
            &format!("u={u0}"),
            "--iterate",
            "40",
            "--feed",
            "u_next=u",
            "--until",
            "delta<1e-3",
            "--out",
            &format!("u_next={out}"),
        ]));
        let sweeps = text.split_whitespace().nth(1).unwrap_or("").to_string();
        (sweeps, std::fs::read(&out).expect("output written"))
    };
    let want = run("interp");
    let mut backends = BACKENDS.to_vec();
    match Device::cuda(0) {
        Ok(_) => backends.push("cuda"),
        Err(e) => eprintln!("weft run --iterate: skipping CUDA ({e})"),
    }
    for be in backends {
        assert_eq!(run(be), want, "{be}");
    }
}

/// Jacobi's five reads (`index` and its four neighbours, recorded by the DSL as tuples of
/// constants) are stencil reads, so its launches run an interior without boundary handling.
#[test]
fn jacobi_reads_are_stencil_reads() {
    let p = jacobi::sweep().expect("records");
    let (_, fp) = weft_ir::passes::partition::interior_variant(p.ir()).expect("stencil reads");
    assert_eq!(fp.reads.len(), 5, "{fp:?}");
    // In the interior the edge test folds away: the sweep is four offset reads and
    // arithmetic, with no `index`, comparison or select left.
    let fast = p.keep(&["u_next"]).expect("keeps");
    let (q, _) = weft_ir::passes::partition::interior_variant(fast.ir()).expect("stencil reads");
    use weft_ir::passes::util::count_ops;
    use weft_ir::Opcode;
    assert_eq!(
        count_ops(&q, Opcode::ReadOffset),
        4,
        "{}",
        weft_ir::print_program(&q)
    );
    for op in [Opcode::Index, Opcode::Eq, Opcode::Select, Opcode::Read] {
        assert_eq!(
            count_ops(&q, op),
            0,
            "{op:?}\n{}",
            weft_ir::print_program(&q)
        );
    }
}
