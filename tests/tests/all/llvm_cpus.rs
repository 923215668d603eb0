//! Host LLVM code generation for x86 CPUs this machine is not (issue 19): programs compile to
//! object files, without being run, for several CPU models — AVX512-FP16 (`sapphirerapids`),
//! AVX-512 without FP16 (`znver4`, `skylake-avx512`) and the baselines (`x86-64-v2`, and
//! `x86-64` for kernels) — so that a host we do not have cannot abort a user's process in LLVM's
//! instruction selection: the fuzzer's map programs (as generated and as the CPU device
//! compiles them, after uniform lifting) and kernels, and the construct that aborted on a
//! Sapphire Rapids host (a float comparison's result bitcast to f16 in scalar code) for every
//! CPU LLVM knows.
//!
//! An LLVM fatal error ends the test binary with status 1 and `error: LLVM failed while
//! compiling @caseN for CPU: …` (the backend's handler): the program's name gives the case
//! (`weft_fuzz::runner::case_with(SEED, N, …)`; kernels are `@kernelN`).

use weft_backend_llvm::{compile_object_for_cpu, CompileError, Options, KNOWN_CPUS};
use weft_fuzz::gen::GenConfig;
use weft_fuzz::kernel::kernel_case;
use weft_fuzz::runner::case_with;
use weft_ir::Module;

/// The CPU models the fuzzer's programs are compiled for.
const CPUS: &[&str] = &["sapphirerapids", "znver4", "skylake-avx512", "x86-64-v2"];

/// The CPU models the fuzzer's kernels are compiled for.
const KERNEL_CPUS: &[&str] = &[
    "sapphirerapids",
    "znver4",
    "skylake-avx512",
    "x86-64-v2",
    "x86-64",
];

/// The fuzz seed of the generated programs and kernels.
const SEED: u64 = 19;

/// Map programs generated (each compiled for every CPU of [`CPUS`], as generated and lifted).
const PROGRAMS: u64 = 160;

/// Kernels generated (each compiled for every CPU of [`KERNEL_CPUS`]).
const KERNELS: u64 = 48;

/// Runs `f` on every index below `n`, spread over a few threads; returns what it reports.
fn spread(n: u64, f: impl Fn(u64) -> Vec<String> + Sync) -> Vec<String> {
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get().min(8)) as u64;
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                let f = &f;
                s.spawn(move || {
                    (t..n)
                        .step_by(threads as usize)
                        .flat_map(f)
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        hs.into_iter()
            .flat_map(|h| h.join().expect("worker"))
            .collect()
    })
}

/// Compiles `name` of `m` for each CPU of `cpus` (also with fast-math when `fast`); returns
/// the failures.
fn compile_for(m: &Module, name: &str, cpus: &[&str], fast: bool) -> Vec<String> {
    let mut failures = Vec::new();
    for cpu in cpus {
        let modes: &[bool] = if fast { &[false, true] } else { &[false] };
        for &fast_math in modes {
            match compile_object_for_cpu(
                m,
                name,
                cpu,
                Options {
                    fast_math,
                    ..Default::default()
                },
            ) {
                Ok(obj) if obj.starts_with(b"\x7fELF") => {}
                Ok(_) => failures.push(format!("@{name} for {cpu}: not an ELF object")),
                Err(e) => failures.push(format!(
                    "@{name} for {cpu} (fast-math {fast_math}): {e}\n{}",
                    weft_ir::print_module(m)
                )),
            }
        }
    }
    failures
}

fn assert_none(failures: Vec<String>) {
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn fuzz_programs_compile_for_every_cpu_model() {
    let f16 = std::sync::atomic::AtomicU64::new(0);
    let lifted_programs = std::sync::atomic::AtomicU64::new(0);
    let failures = spread(PROGRAMS, |i| {
        let cfg = GenConfig {
            name: format!("case{i}"),
            ..GenConfig::default()
        };
        let c = case_with(SEED, i, cfg).expect("generated case");
        let (m, name) = (&c.gen.module, &c.gen.name);
        if weft_ir::print_module(m).contains("f16") {
            f16.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let mut failures = compile_for(m, name, CPUS, i % 8 == 0);
        // What the CPU device compiles: uniform work lifted out for this launch's inputs.
        if let Ok(Some((lifted, _))) = weft_ir::passes::lift::prepare_launch(m, name, &c.inputs) {
            lifted_programs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            failures.extend(compile_for(&lifted, name, CPUS, false));
        }
        failures
    });
    assert_none(failures);
    let (f16, lifted) = (f16.into_inner(), lifted_programs.into_inner());
    println!(
        "{PROGRAMS} generated programs ({f16} with f16) and {lifted} lifted ones compiled for {CPUS:?}"
    );
    assert!(f16 >= PROGRAMS / 5, "only {f16} programs use f16");
}

#[test]
fn fuzz_kernels_compile_for_every_cpu_model() {
    let compiled = std::sync::atomic::AtomicU64::new(0);
    let failures = spread(KERNELS, |i| {
        let Some(kc) = kernel_case(SEED, i).expect("generated kernel") else {
            return Vec::new();
        };
        let mut m = kc.module;
        let name = format!("kernel{i}");
        let Some(k) = m.programs.iter_mut().find(|p| p.name == "k") else {
            return vec![format!("kernel case {i} has no @k")];
        };
        k.name = name.clone();
        compiled.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        compile_for(&m, &name, KERNEL_CPUS, false)
    });
    assert_none(failures);
    let compiled = compiled.into_inner();
    assert!(compiled >= KERNELS / 2, "only {compiled} kernels compiled");
}

/// A float comparison's result, cast to a 16-bit integer and bitcast to f16, then used as
/// f16 in scalar code: a uniform loop of a map program and a kernel. Without the host
/// lowering's opaque bitcast, LLVM 19 aborted on it for every AVX-512 CPU ("Cannot select:
/// f16 = bitcast", `weft fuzz --seed 99` case 3361 on a Sapphire Rapids host).
const F16_BITCAST_OF_COMPARE: &str = "
program @p(%x: f16, uniform %a: f16, uniform %b: f16, uniform %c: f32, uniform %n: i32) -> (f16) {
  %k: f16 = const 4096.0
  %z: i32 = const 0
  %one: i32 = const 1
  %vary: bool = lt %x, %a
  %r: f16 = for %i: i32 = %z to %n step %one iter(%acc: f16 = %a) {
    %c0: bool = ne %acc, %b
    %u0: u16 = cast %c0
    %h0: f16 = bitcast %u0
    %a0: f16 = abs %h0
    %c1: bool = lt %c, %c
    %u1: i16 = cast %c1
    %h1: f16 = bitcast %u1
    %e1: bool = eq %h1, %h1
    %s1: f16 = select %e1, %h1, %k
    %m1: f16 = mul %s1, %a0
    yield %m1
  }
  %t: f16 = if %vary {
    %c2: bool = ne %a, %b
    %u2: u16 = cast %c2
    %h2: f16 = bitcast %u2
    %l2: bool = lt %h2, %b
    %s2: f16 = select %l2, %a, %b
    %d2: f16 = add %h2, %s2
    yield %d2
  } else {
    yield %k
  }
  %o: f16 = add %r, %t
  return %o
}

kernel @k(uniform %a: f16, uniform %b: f16, %x: array<1 x f16>, buffer %out: array<1 x f16>) {
  %l: i32 = local_id
  %k: f16 = const 4096.0
  %xf: f16 = read %x, %l
  %c: bool = lt %xf, %a
  %u: u16 = cast %c
  %h: f16 = bitcast %u
  %m: f16 = mul %h, %k
  %c2: bool = ne %a, %b
  %u2: u16 = cast %c2
  %h2: f16 = bitcast %u2
  %s: f16 = add %m, %h2
  store %out, %l, %s
  return
}
";

#[test]
fn f16_bitcast_of_a_comparison_compiles_for_every_known_cpu() {
    let m = weft_ir::parse_and_verify(F16_BITCAST_OF_COMPARE).expect("module");
    let failures = spread(KNOWN_CPUS.len() as u64, |i| {
        let cpu = [KNOWN_CPUS[i as usize]];
        let mut f = compile_for(&m, "p", &cpu, false);
        f.extend(compile_for(&m, "k", &cpu, false));
        f
    });
    assert_none(failures);
}

#[test]
fn unknown_cpu_is_an_error_not_a_warning() {
    let m = weft_ir::parse_and_verify(
        "program @f(%x: f16, %y: f16) -> (bool) {\n  %c: bool = lt %x, %y\n  return %c\n}\n",
    )
    .expect("module");
    for bad in [
        "pentium9",
        "",
        "sapphire rapids",
        "znver4\0",
        "SAPPHIRERAPIDS",
        "i686",
    ] {
        match compile_object_for_cpu(&m, "f", bad, Options::default()) {
            Err(CompileError::UnknownCpu(c)) => assert_eq!(c, bad),
            Err(e) => panic!("{bad:?}: {e}"),
            Ok(_) => panic!("{bad:?} compiled"),
        }
    }
    let e = compile_object_for_cpu(&m, "f", "pentium9", Options::default())
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("unknown CPU `pentium9`"), "{e}");
    for good in ["native", " znver4 ", "x86-64-v3"] {
        assert!(
            compile_object_for_cpu(&m, "f", good, Options::default()).is_ok(),
            "{good:?}"
        );
    }
    assert!(weft_backend_llvm::is_known_cpu("sapphirerapids"));
    assert!(!weft_backend_llvm::is_known_cpu("pentium9"));
    // This machine's CPU (or WEFT_LLVM_CPU's) is one LLVM knows.
    let host = weft_backend_llvm::host_target_cpu().expect("host CPU");
    assert!(weft_backend_llvm::is_known_cpu(&host), "{host}");
}
