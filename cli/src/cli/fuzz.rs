//! `weft fuzz`: long differential fuzzing runs (weft-fuzz's runner) with a progress bar, a
//! summary table, and every mismatch written as a filetest.

use super::CliError;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::Write;
use std::path::Path;
use std::time::Duration;
use weft_fuzz::{FuzzConfig, Target};
use weft_runtime::{Backend, Device, DeviceOptions};

/// Parses `90s`, `10m`, `2h` or a number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = s.split_at(
        s.find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(s.len()),
    );
    let x: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a duration (e.g. 90s, 10m, 2h)"))?;
    let secs = match unit {
        "" | "s" => x,
        "m" => x * 60.0,
        "h" => x * 3600.0,
        _ => return Err(format!("`{s}`: unknown unit `{unit}` (s, m or h)")),
    };
    Ok(Duration::from_secs_f64(secs))
}

/// Runs `weft fuzz` (see [`super::Command::Fuzz`]).
#[allow(clippy::too_many_arguments)]
pub fn fuzz(
    backends: &[String],
    seed: u64,
    first: u64,
    time: Option<Duration>,
    cases: Option<u64>,
    out_dir: &Path,
    threads: Option<usize>,
    quiet: bool,
    dump: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let mut targets = Vec::new();
    for b in backends {
        let t = Target::of_backend(b.trim()).ok_or_else(|| {
            format!("error: --backends: unknown backend `{b}` (interp, cranelift, llvm, cuda, llvm-fast, cuda-fast)")
        })?;
        targets.extend(t);
    }
    let cases = if time.is_none() {
        Some(cases.unwrap_or(1000))
    } else {
        None
    };
    let mut cfg = FuzzConfig {
        seed,
        first,
        cases,
        time,
        targets,
        out_dir: Some(out_dir.to_path_buf()),
        dump,
        ..FuzzConfig::default()
    };
    if let Some(t) = threads {
        cfg.threads = t.max(1);
    }
    let bar = if quiet {
        ProgressBar::hidden()
    } else if let Some(n) = cases {
        ProgressBar::new(n)
    } else {
        ProgressBar::new(time.map_or(0, |t| t.as_secs()))
    };
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
            .expect("template")
            .progress_chars("=> "),
    );
    let timed = cases.is_none();
    let progress = |s: &weft_fuzz::Summary| {
        bar.set_position(if timed { s.elapsed.as_secs() } else { s.cases });
        bar.set_message(format!(
            "{} cases, {} discarded, {} mismatches",
            s.cases,
            s.discarded,
            s.failures()
        ));
    };
    // Backend panics are caught and reported as mismatches: keep them off the terminal.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let result = weft_fuzz::run(&cfg, &progress);
    std::panic::set_hook(hook);
    bar.finish_and_clear();
    let s = result.map_err(|e| format!("error: {e}"))?;
    let w = |out: &mut dyn Write, t: String| out.write_all(t.as_bytes()).map_err(|e| e.to_string());
    w(
        out,
        format!(
            "weft fuzz --seed {seed} --backends {}\n",
            backends.join(",")
        ),
    )?;
    w(out, s.to_string())?;
    for (i, e) in &s.errors {
        w(out, format!("case {i}: {e}\n"))?;
    }
    for m in &s.mismatches {
        let place = m
            .path
            .as_ref()
            .map_or("(not written)".into(), |p| p.display().to_string());
        let first_line = m.detail.lines().next().unwrap_or("");
        w(
            out,
            format!(
                "case {}: {first_line}\n  shrunk filetest: {place}\n",
                m.case
            ),
        )?;
    }
    if s.failures() > 0 {
        return Err(CliError(format!(
            "error: {} mismatches and {} generator/oracle errors (filetests in {})",
            s.mismatches.len(),
            s.errors.len(),
            out_dir.display()
        )));
    }
    Ok(())
}

/// `weft fuzz --kernels`: random barrier-safe kernels (weft-fuzz's [`weft_fuzz::kernel`]) on
/// the named backends against the interpreter; mismatches are written to `out_dir` as
/// `kernel-N.txt`. Exit code 1 when any mismatch was found.
pub fn fuzz_kernels(
    backends: &[String],
    seed: u64,
    first: u64,
    cases: u64,
    out_dir: &Path,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    use weft_ir::{KernelArg, KernelGrid, Module};
    type RunFn<'a> = &'a weft_fuzz::kernel::RunKernel<'a>;
    let mut devices: Vec<(&str, Device)> = Vec::new();
    for b in backends {
        match b.trim().parse::<Backend>() {
            Ok(Backend::Interp) => {}
            Ok(backend) => {
                let dev = Device::open(backend, &DeviceOptions::default())
                    .map_err(|e| format!("error: backend `{backend}`: {e}"))?;
                devices.push((backend.name(), dev));
            }
            Err(_) => {
                let _ = writeln!(
                    out,
                    "note: --kernels skips `{}` (kernel mode runs on interp, cranelift, llvm and cuda)",
                    b.trim()
                );
            }
        }
    }
    let on: Vec<_> = devices
        .iter()
        .map(|(_, d)| {
            move |m: &Module, a: &mut [KernelArg], g: &KernelGrid| {
                d.run_kernel(m, "k", a, g).map_err(|e| e.to_string())
            }
        })
        .collect();
    let runs: Vec<(&str, RunFn)> = devices
        .iter()
        .zip(&on)
        .map(|((n, _), f)| (*n, f as RunFn))
        .collect();
    let start = std::time::Instant::now();
    let s = weft_fuzz::kernel::fuzz_kernels(seed, first, cases, &runs, &|_| {});
    let names: Vec<&str> = runs.iter().map(|(n, _)| *n).collect();
    let _ = writeln!(
        out,
        "kernel fuzzing, seed {seed}: {} kernels checked on {} against the interpreter, {} discarded, {} mismatches ({:.1} s)",
        s.checked,
        names.join(", "),
        s.discarded,
        s.mismatches.len(),
        start.elapsed().as_secs_f64()
    );
    if s.mismatches.is_empty() {
        return Ok(());
    }
    std::fs::create_dir_all(out_dir).map_err(|e| format!("error: {}: {e}", out_dir.display()))?;
    for (i, m) in s.mismatches.iter().enumerate() {
        let path = out_dir.join(format!("kernel-{i}.txt"));
        weft::data::write_atomic(&path, |w| {
            w.write_all(m.as_bytes()).map_err(|e| e.to_string())
        })
        .map_err(|e| format!("error: {}: {e}", path.display()))?;
        let _ = writeln!(
            out,
            "  {}: {}",
            path.display(),
            m.lines().next().unwrap_or("")
        );
    }
    Err(format!("error: {} kernel mismatch(es)", s.mismatches.len()).into())
}
