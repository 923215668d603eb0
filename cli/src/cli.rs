//! The `weft` command-line interface (clap): `check`, `fmt`, `emit`, `devices`, `run`, and
//! the module transformations `opt`, `compose`, `bundle`, `bind` and `specialize`
//! (implemented in [`transform`]).
//! Exit codes: 0 success, 1 bad input (with a message naming the place), 2 usage (clap's
//! errors, values its parsers refuse — [`parse_shape`], [`parse_axes`], `NAME=VALUE`
//! arguments — and [`usage_errors`]). Input files must be regular files
//! ([`weft::data::open_regular`]); output files are checked before computing and written
//! atomically ([`outputs`]).

pub mod fuzz;
pub mod iteration;
pub mod outputs;
pub mod transform;

use clap::{Parser, Subcommand};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use weft::npy;
use weft_ir::interp::Input;
use weft_ir::konst::parse_lane;
use weft_ir::{Const, HostArray, Module, ParamKind, Program, Type};
use weft_runtime::{Backend, Device, DeviceOptions};

/// weft: a data-parallel JIT compiler with its own typed SSA IR.
#[derive(Parser, Debug)]
#[command(name = "weft", version, about)]
pub struct Cli {
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Parse and verify .weft files; print every error with file:line:col.
    Check {
        /// Files to check.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Print a .weft file in canonical form.
    Fmt {
        /// The file (`-`: standard input).
        file: PathBuf,
        /// Print nothing; exit non-zero (naming the file) if it is not in canonical form.
        #[arg(long, conflicts_with = "in_place")]
        check: bool,
        /// Rewrite the file in canonical form (atomically: a temporary file renamed over it).
        #[arg(long = "in-place")]
        in_place: bool,
    },
    /// Print what a backend makes of a program: `clif` (Cranelift IR), `llvm-ir` (optimised
    /// LLVM IR of the host kernel), `asm` (host assembly from LLVM), `ptx-ir` (optimised
    /// LLVM IR of the NVPTX kernel) or `ptx`.
    Emit {
        /// The .weft file.
        file: PathBuf,
        /// What to print: `clif`, `llvm-ir`, `asm`, `ptx-ir` or `ptx`.
        #[arg(long, default_value = "clif", value_parser = ["clif", "llvm-ir", "asm", "ptx-ir", "ptx"])]
        target: String,
        /// Compute capability for `ptx`/`ptx-ir` as major*10+minor (70 … 90).
        #[arg(long, default_value_t = 90, value_parser = clap::value_parser!(u32).range(20..=90))]
        sm: u32,
        /// Fast-math code (LLVM targets): see docs/semantics.md.
        #[arg(long)]
        fast_math: bool,
        /// Program to emit (name without @); needed when the file has several.
        #[arg(long)]
        program: Option<String>,
    },
    /// List the CUDA devices (index, name, compute capability, multiprocessors, memory).
    Devices,
    /// Show the on-disk kernel cache (directory, entries, size, limit), or clear it. The
    /// cache is `WEFT_CACHE_DIR`, else `$XDG_CACHE_HOME/weft`, else `~/.cache/weft`;
    /// `WEFT_CACHE=off` disables it and `WEFT_CACHE_LIMIT` sets its size in MiB.
    Cache {
        /// Remove every entry.
        #[arg(long)]
        clear: bool,
    },
    /// Run a program over arrays (DESIGN §5) and print or save its outputs.
    Run {
        /// The .weft file.
        file: PathBuf,
        /// Program to run (name without @); needed when the file has several.
        #[arg(long)]
        program: Option<String>,
        /// Backend: `cranelift` (compiled SIMD code on the CPU, the default), `llvm` (LLVM
        /// on the CPU), `cuda` (LLVM → PTX on an NVIDIA GPU) or `interp` (the reference
        /// interpreter).
        #[arg(long, default_value = Backend::Cranelift.name(), value_parser = Backend::NAMES)]
        backend: String,
        /// GPU index for `--backend cuda` (see `weft devices`).
        #[arg(long, default_value_t = 0)]
        device: usize,
        /// Threads per block for `--backend cuda` (default: chosen by occupancy). For a
        /// kernel: work-items per work-group, 1 to 3 axes, x first (e.g. `16,16`).
        #[arg(long, value_parser = parse_axes)]
        block: Option<Axes>,
        /// Blocks in the grid for `--backend cuda` (default: enough to fill the device). For
        /// a kernel: work-groups, 1 to 3 axes, x first (e.g. `64,64`).
        #[arg(long, value_parser = parse_axes)]
        grid: Option<Axes>,
        /// Fast-math code for `llvm` and `cuda` (results may differ from the interpreter;
        /// docs/semantics.md).
        #[arg(long)]
        fast_math: bool,
        /// An input: NAME=PATH.npy (varying or array parameter), NAME=PATH.png (an 8-bit
        /// image as a 2-D array of grey levels 0…255, f32 or u8), NAME=NUMBER or
        /// NAME=N1,N2,.. (uniform scalar or tuple). Each input once; files must be regular
        /// files.
        #[arg(long = "in", value_name = "NAME=VALUE", value_parser = parse_name_value)]
        inputs: Vec<String>,
        /// Save an output: NAME=PATH.npy (NAME is the output's name or position), or
        /// NAME=PATH.png for a 2-D scalar output (a heat map with a colour bar). Checked
        /// before the run (the directory must exist and be writable; no two outputs and no
        /// output and input may name one file) and written atomically (a temporary file
        /// renamed over PATH once every output is written).
        #[arg(long = "out", value_name = "NAME=PATH", value_parser = parse_name_value)]
        outputs: Vec<String>,
        /// Launch shape (e.g. 64,64: 1 to 3 axes) for a program with no varying input.
        #[arg(long, value_parser = parse_shape)]
        shape: Option<Shape>,
        /// Run the program up to N times (N ≥ 1), feeding outputs back into inputs
        /// (`--feed`) after each run; with `--until`, stop as soon as the condition holds.
        #[arg(long, value_name = "N", default_value_t = 1, value_parser = parse_iterate)]
        iterate: u64,
        /// With `--iterate`: after each run, output OUT becomes input IN of the next run
        /// (same type; a varying output may feed an array input of the same rank).
        #[arg(long, value_name = "OUT=IN", value_parser = parse_name_value)]
        feed: Vec<String>,
        /// With `--iterate`: stop once the largest element of output OUT is below TOL (a
        /// NaN never is), e.g. `--until delta<1e-4`.
        #[arg(long, value_name = "OUT<TOL")]
        until: Option<String>,
        /// Print the sum of output OUT's elements (in f64; all lanes of a tuple).
        #[arg(long = "sum", value_name = "OUT")]
        sums: Vec<String>,
        /// Ops one element may execute before the run stops (runaway-loop guard; the
        /// interpreter only: compiled code has no fuel).
        #[arg(long, default_value_t = weft_ir::interp::DEFAULT_FUEL)]
        fuel: u64,
        /// Time budget of each launch in seconds (`0`: none); a launch past it stops with an
        /// error naming the program. Compiled code (`cranelift`, `llvm`) checks it at loop
        /// back-edges; on `interp` it caps `--fuel` at about that many seconds of one
        /// element's work; `cuda` has no watchdog. Default: `WEFT_TIMEOUT`, else 600.
        #[arg(long, value_name = "SECONDS", value_parser = parse_budget)]
        timeout: Option<Budget>,
        /// Convert `.npy` inputs of another dtype to the parameter's element type (the IR's
        /// `cast`: integers wrap, float→int saturates, floats round to nearest even);
        /// without it a different dtype is an error.
        #[arg(long)]
        cast: bool,
        /// Print the compile time and the run time (milliseconds) after the outputs (a
        /// kernel always prints its launch time).
        #[arg(long)]
        time: bool,
        /// Print compile statistics after the run: programs each compiler compiled and the
        /// time taken, kernels loaded from the on-disk cache, its hits and misses.
        #[arg(long)]
        stats: bool,
    },
    /// Optimise a module: run a pass pipeline and print the resulting module.
    ///
    /// Parses and verifies FILE (errors as `weft check` prints them), runs the passes of
    /// `--passes` in order on every program (verifying after each) and prints the module.
    /// Passes: inline, fold, cse, dce, dce-inputs, licm, math, lift-uniforms. This is the
    /// clean-up step after `weft compose`, `bundle`, `bind` or `specialize`, which print
    /// exactly what the program algebra builds (e.g. a bound input as a `const` that `fold`
    /// then propagates).
    Opt {
        /// The .weft file.
        file: PathBuf,
        /// Comma-separated pass list, run in order (empty: no pass).
        #[arg(long, value_name = "LIST", default_value = weft_ir::passes::DEFAULT_PIPELINE)]
        passes: String,
        /// Print `; after <pass>` and the module to stderr after each pass.
        #[arg(long)]
        print_after_all: bool,
        /// Write the module to OUT instead of stdout.
        #[arg(short, long, value_name = "OUT")]
        output: Option<PathBuf>,
    },
    /// Composition p << q (DESIGN §4): @q runs first and its outputs feed @p.
    ///
    /// `weft compose A.weft:@p B.weft:@q` builds the program p << q: @q's outputs feed @p's
    /// first varying inputs, in order (types must match). The result's inputs are @q's
    /// inputs, then @p's inputs that were not fed (a uniform or array input with the same
    /// name, kind and type in both is shared, e.g. a `uniform %dt`; a varying input whose
    /// name is taken is renamed `%x.1`); its outputs are @p's. Calls in both programs are
    /// inlined first, so the printed module holds just the result, named `p_q` (or NAME).
    /// Run `weft opt` on it to optimise across the seam.
    Compose {
        /// The outer program @p, as FILE:@PROGRAM.
        #[arg(value_name = "FILE:@P")]
        p: String,
        /// The inner program @q (runs first), as FILE:@PROGRAM; may be in the same file.
        #[arg(value_name = "FILE:@Q")]
        q: String,
        /// Name of the result (without @; default `p_q`).
        #[arg(long)]
        name: Option<String>,
        /// Write the module to OUT instead of stdout.
        #[arg(short, long, value_name = "OUT")]
        output: Option<PathBuf>,
    },
    /// Bundling (DESIGN §4): several programs side by side as one program.
    ///
    /// `weft bundle A.weft:@p B.weft:@q ...` builds one program running them all on the
    /// same elements: their inputs concatenated in order (uniform or array inputs with the
    /// same name, kind and type shared; clashing varying inputs renamed `%x.1`), their
    /// outputs concatenated in order (clashing output names renamed `r_1`). Calls are
    /// inlined first, so the printed module holds just the result, named `p_q_...` (or
    /// NAME). Run `weft opt` on it to share common work (`cse`).
    Bundle {
        /// The programs, each as FILE:@PROGRAM (at least two; files may repeat).
        #[arg(value_name = "FILE:@P", required = true, num_args = 2..)]
        programs: Vec<String>,
        /// Name of the result (without @; default the names joined by `_`).
        #[arg(long)]
        name: Option<String>,
        /// Write the module to OUT instead of stdout.
        #[arg(short, long, value_name = "OUT")]
        output: Option<PathBuf>,
    },
    /// Tight or loose binding of inputs (DESIGN §4).
    ///
    /// Tight binding (the default) captures an input's value now: `--input a=2.5` removes
    /// input %a from @p and puts a `const` in its place, which `weft opt` folds through the
    /// program (partial evaluation). VALUE is a literal of the input's type: `2.5`, `-3`,
    /// `true`, a tuple `(1.0, 2.0, 3.0)`; an array input takes `@FILE.npy` (its contents
    /// are folded into the code: every `read` of it must have constant coordinates after
    /// folding). Loose binding (`--loose --input x`) turns varying input %x into a uniform,
    /// one value per run (`weft run --in x=...`) instead of one per element. The result
    /// keeps @p's name and replaces it in the printed module; the other programs are kept.
    Bind {
        /// The .weft file.
        file: PathBuf,
        /// The program (with or without @); needed when the file has several.
        #[arg(long)]
        program: Option<String>,
        /// An input to bind: NAME=VALUE (tight), or NAME with --loose. Repeatable.
        #[arg(long = "input", value_name = "NAME=VALUE", required = true)]
        inputs: Vec<String>,
        /// Loose binding: make each --input NAME a uniform instead of capturing a value.
        #[arg(long)]
        loose: bool,
        /// Write the module to OUT instead of stdout.
        #[arg(short, long, value_name = "OUT")]
        output: Option<PathBuf>,
    },
    /// Specialization (DESIGN §4): keep or drop outputs, removing the work they needed.
    ///
    /// `--keep r,s` keeps exactly these outputs (names or positions) in that order;
    /// `--drop t` removes these. Dead code is removed and inputs that are no longer used
    /// disappear. The result keeps @p's name and replaces it in the printed module; the
    /// other programs are kept. Run `weft opt` for further clean-up.
    #[command(group = clap::ArgGroup::new("outputs").required(true).args(["keep", "drop"]))]
    Specialize {
        /// The .weft file.
        file: PathBuf,
        /// The program (with or without @); needed when the file has several.
        #[arg(long)]
        program: Option<String>,
        /// The outputs to keep, in order (comma-separated names or positions).
        #[arg(long, value_name = "OUT,...", value_delimiter = ',', num_args = 1)]
        keep: Option<Vec<String>>,
        /// The outputs to drop (comma-separated names or positions).
        #[arg(long, value_name = "OUT,...", value_delimiter = ',', num_args = 1)]
        drop: Option<Vec<String>>,
        /// Write the module to OUT instead of stdout.
        #[arg(short, long, value_name = "OUT")]
        output: Option<PathBuf>,
    },
    /// Differential fuzzing (DESIGN §6): random verified programs run on the interpreter and
    /// on every backend and pass pipeline; results must be bit-identical. Every mismatch is
    /// shrunk and written as a `.weft` filetest. Exit code 1 when any mismatch was found.
    Fuzz {
        /// Backends to check against the interpreter: `interp` (the pass pipelines and
        /// program-algebra operations, run on the interpreter), `cranelift`, `llvm`, `cuda`, and
        /// the fast-math ones `llvm-fast`, `cuda-fast` (one-op cases, compared within bounds).
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "interp,cranelift,llvm,llvm-fast"
        )]
        backends: Vec<String>,
        /// The seed (case i of a seed is always the same program and inputs).
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// The first case index (with `--cases 1`, replays one case).
        #[arg(long, default_value_t = 0)]
        first: u64,
        /// Stop after this long (e.g. `90s`, `10m`, `2h`).
        #[arg(long, value_parser = fuzz::parse_duration, conflicts_with = "cases")]
        time: Option<std::time::Duration>,
        /// Stop after this many cases (default 1000 when no `--time`).
        #[arg(long)]
        cases: Option<u64>,
        /// Where mismatches are written as filetests.
        #[arg(long, default_value = "fuzz-failures")]
        out_dir: PathBuf,
        /// Worker threads (default: the number of cores).
        #[arg(long)]
        threads: Option<usize>,
        /// No progress bar.
        #[arg(long)]
        quiet: bool,
        /// Print every generated case (module and launch inputs) to stderr.
        #[arg(long)]
        dump: bool,
        /// Fuzz kernel mode instead: random barrier-safe kernels around generated programs,
        /// on `cranelift` and `cuda` against the interpreter (`--cases`, default 1000).
        #[arg(long)]
        kernels: bool,
    },
}

/// The axes of `--grid` or `--block`: 1 to 3 numbers of at least 1, x first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Axes(pub Vec<u32>);

/// A launch shape (`--shape`): 1 to 3 extents whose product fits `usize`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shape(pub Vec<usize>);

/// Parses one comma-separated part of a list of counts: a whole number of at most `max`.
fn parse_count<T: std::str::FromStr + std::fmt::Display>(part: &str, max: T) -> Result<T, String> {
    let t = part.trim();
    t.parse().map_err(|_| {
        if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
            format!("`{t}` is too large (at most {max})")
        } else {
            format!("`{t}` is not a whole number")
        }
    })
}

/// Parses `--grid`/`--block`: 1 to 3 comma-separated numbers, each 1 to 2^32 − 1.
///
/// Errors (clap reports them as usage errors, exit code 2): more than 3 axes, an axis that
/// is 0, too large or not a number.
pub fn parse_axes(s: &str) -> Result<Axes, String> {
    let parts: Vec<&str> = s.split(',').collect();
    if parts.len() > 3 {
        return Err(format!(
            "launches have 1 to 3 axes; `{s}` has {}",
            parts.len()
        ));
    }
    let mut axes = Vec::new();
    for part in parts {
        let n = parse_count(part, u32::MAX)?;
        if n == 0 {
            return Err("each axis must be at least 1".into());
        }
        axes.push(n);
    }
    Ok(Axes(axes))
}

/// Parses `--shape`: 1 to 3 comma-separated extents whose product (the launch's element
/// count) fits `usize`; an extent may be 0 (an empty launch), and then the product of the
/// others must fit too.
///
/// Errors (usage errors, exit code 2): more than 3 axes, an extent that is too large or
/// not a number, a product that overflows.
pub fn parse_shape(s: &str) -> Result<Shape, String> {
    let parts: Vec<&str> = s.split(',').collect();
    if parts.len() > 3 {
        return Err(format!(
            "launches have 1 to 3 axes; `{s}` has {}",
            parts.len()
        ));
    }
    let mut dims = Vec::new();
    // The non-zero extents' product: an empty launch with huge other extents would still
    // overflow the strides computed from them.
    let mut count: usize = 1;
    for part in parts {
        let n = parse_count(part, usize::MAX)?;
        count = count
            .checked_mul(n.max(1))
            .ok_or_else(|| format!("`{s}` has more elements than fit in 64 bits"))?;
        dims.push(n);
    }
    Ok(Shape(dims))
}

/// Parses `--iterate N`: a whole number of at least 1.
///
/// Errors (usage errors, exit code 2): 0, or not a whole number.
pub fn parse_iterate(s: &str) -> Result<u64, String> {
    match parse_count(s, u64::MAX)? {
        0 => Err("N must be at least 1 (the number of runs)".into()),
        n => Ok(n),
    }
}

/// Checks a `NAME=VALUE` argument (`--in`, `--out`, `--feed`): a non-empty name before an
/// `=`.
///
/// Errors (usage errors, exit code 2): no `=`, or nothing before it.
pub fn parse_name_value(s: &str) -> Result<String, String> {
    match s.split_once('=') {
        Some((n, _)) if !n.trim().trim_start_matches('%').is_empty() => Ok(s.to_string()),
        Some(_) => Err("the NAME before `=` is empty".into()),
        None => Err("expected NAME=VALUE, with an `=`".into()),
    }
}

/// Usage errors clap cannot see: the same input given twice to `weft run --in`.
///
/// Errors: a message (without `error: `) naming the argument.
pub fn usage_errors(cli: &Cli) -> Result<(), String> {
    if let Command::Run { inputs, .. } = &cli.command {
        let mut seen: Vec<(&str, &str)> = Vec::new();
        for spec in inputs {
            let name = spec
                .split_once('=')
                .map_or(spec.as_str(), |(n, _)| n)
                .trim()
                .trim_start_matches('%');
            if let Some((_, first)) = seen.iter().find(|(n, _)| *n == name) {
                return Err(format!(
                    "--in {spec}: input `{name}` is given twice (also --in {first}); give each \
                     input once"
                ));
            }
            seen.push((name, spec));
        }
    }
    Ok(())
}

/// A CLI failure: a message for stderr; exit code 1.
#[derive(Debug)]
pub struct CliError(pub String);

impl<T: Into<String>> From<T> for CliError {
    fn from(s: T) -> CliError {
        CliError(s.into())
    }
}

/// Runs the CLI on the process arguments and returns the exit code.
pub fn main() -> i32 {
    // A panic is a weft bug: report it in one line (run_args turns it into exit code 1).
    std::panic::set_hook(Box::new(|info| {
        eprintln!("error: internal error (a bug in weft, please report it): {info}");
    }));
    let args: Vec<String> = std::env::args().collect();
    run_args(&args, &mut std::io::stdout(), &mut std::io::stderr())
}

/// [`run_args`] with `stdin` as the standard input that a `-` source file reads (tests
/// run the CLI in-process).
pub fn run_args_with_stdin(
    args: &[String],
    stdin: &[u8],
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> i32 {
    STDIN.with(|s| *s.borrow_mut() = Some(stdin.to_vec()));
    let code = run_args(args, out, err);
    STDIN.with(|s| *s.borrow_mut() = None);
    code
}

thread_local! {
    /// The standard input given to [`run_args_with_stdin`], if any.
    static STDIN: std::cell::RefCell<Option<Vec<u8>>> = const { std::cell::RefCell::new(None) };
}

/// Runs the CLI on `args` (the first is the program name), writing to `out` and `err`, and
/// returns the exit code: 0 success, 1 bad input, 2 usage. Never panics on input: a panic
/// would be a weft bug, and is reported as an internal error with exit code 1.
pub fn run_args(args: &[String], out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let text = e.render().to_string();
            let _ = if code == 0 {
                write!(out, "{text}")
            } else {
                write!(err, "{text}")
            };
            return code;
        }
    };
    if let Err(msg) = usage_errors(&cli) {
        let _ = writeln!(err, "error: {msg}");
        return 2;
    }
    let mut buf = Vec::new();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_to(cli, &mut buf, &mut *err)
    }));
    let _ = out.write_all(&buf);
    match r {
        Ok(Ok(())) => 0,
        Ok(Err(CliError(msg))) => {
            let _ = write!(err, "{msg}");
            if !msg.is_empty() && !msg.ends_with('\n') {
                let _ = writeln!(err);
            }
            1
        }
        Err(p) => {
            let what = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            let _ = writeln!(
                err,
                "error: internal error (a bug in weft, please report it): {what}"
            );
            1
        }
    }
}

/// Executes one parsed command, writing its output to `out` (and `--print-after-all`
/// dumps to the process's stderr; see [`run_to`]).
pub fn run(cli: Cli, out: &mut dyn Write) -> Result<(), CliError> {
    run_to(cli, out, &mut std::io::stderr())
}

/// Executes one parsed command, writing its output to `out` and progress dumps that are not
/// errors (`weft opt --print-after-all`) to `err`. Errors are returned, not written.
pub fn run_to(cli: Cli, out: &mut dyn Write, err: &mut dyn Write) -> Result<(), CliError> {
    match cli.command {
        Command::Opt {
            file,
            passes,
            print_after_all,
            output,
        } => transform::opt(&file, &passes, print_after_all, output.as_deref(), out, err),
        Command::Compose { p, q, name, output } => {
            transform::compose(&p, &q, name.as_deref(), output.as_deref(), out)
        }
        Command::Bundle {
            programs,
            name,
            output,
        } => transform::bundle(&programs, name.as_deref(), output.as_deref(), out),
        Command::Bind {
            file,
            program,
            inputs,
            loose,
            output,
        } => transform::bind(
            &file,
            program.as_deref(),
            &inputs,
            loose,
            output.as_deref(),
            out,
        ),
        Command::Fuzz {
            backends,
            seed,
            first,
            time,
            cases,
            out_dir,
            threads,
            quiet,
            dump,
            kernels,
        } => {
            if kernels {
                fuzz::fuzz_kernels(&backends, seed, first, cases.unwrap_or(1000), &out_dir, out)
            } else {
                fuzz::fuzz(
                    &backends, seed, first, time, cases, &out_dir, threads, quiet, dump, out,
                )
            }
        }
        Command::Specialize {
            file,
            program,
            keep,
            drop,
            output,
        } => transform::specialize(
            &file,
            program.as_deref(),
            keep.as_deref(),
            drop.as_deref(),
            output.as_deref(),
            out,
        ),
        Command::Check { files } => {
            let mut failed = false;
            let mut errors = String::new();
            for f in &files {
                match load(f) {
                    Ok(m) => {
                        let _ =
                            writeln!(out, "{}: ok ({} program(s))", f.display(), m.programs.len());
                    }
                    Err(CliError(msg)) => {
                        errors.push_str(&msg);
                        failed = true;
                    }
                }
            }
            if failed {
                Err(CliError(errors))
            } else {
                Ok(())
            }
        }
        Command::Fmt {
            file,
            check,
            in_place,
        } => {
            let (src, name) = read_source(&file)?;
            let m = weft_ir::parse_module(&src).map_err(|e| weft_ir::render(&e.0, &name, &src))?;
            let text = weft_ir::print_module(&m);
            if check {
                if text != src {
                    return Err(format!(
                        "error: {name} is not in canonical form (run `weft fmt --in-place {name}`)"
                    )
                    .into());
                }
                return Ok(());
            }
            if in_place {
                if is_stdin(&file) {
                    return Err("error: --in-place needs a file, not `-`".into());
                }
                if text != src {
                    outputs::write_text("--in-place", &file, &text)?;
                }
                return Ok(());
            }
            let _ = write!(out, "{text}");
            Ok(())
        }
        Command::Emit {
            file,
            target,
            sm,
            fast_math,
            program,
        } => {
            use weft_backend_llvm::EmitTarget as E;
            let llvm_target = match target.as_str() {
                "clif" => None,
                "llvm-ir" => Some(E::HostIr),
                "asm" => Some(E::HostAsm),
                "ptx-ir" => Some(E::PtxIr),
                "ptx" => Some(E::Ptx),
                _ => {
                    return Err(format!(
                        "error: --target {target}: unknown target (available: clif, llvm-ir, asm, ptx-ir, ptx)"
                    )
                    .into())
                }
            };
            if !(20..=90).contains(&sm) {
                return Err(
                    format!("error: --sm {sm}: LLVM 19 generates PTX for sm_20 … sm_90").into(),
                );
            }
            let m = load(&file)?;
            let p = choose_program(&m, program.as_deref(), &file)?;
            let text = match llvm_target {
                None => weft_backend_cranelift::compile_with_clif(&m, &p.name)
                    .map_err(|e| format!("error: {e}"))?
                    .clif
                    .clone(),
                Some(t) => {
                    let opts = weft_backend_llvm::Options {
                        fast_math,
                        ..Default::default()
                    };
                    weft_backend_llvm::emit(&m, &p.name, t, sm, opts)
                        .map_err(|e| format!("error: {e}"))?
                }
            };
            let _ = write!(out, "{text}");
            Ok(())
        }
        Command::Cache { clear } => {
            let Some(c) = weft_runtime::DiskCache::from_env() else {
                let _ = writeln!(out, "the kernel cache is off (WEFT_CACHE=off, or no HOME)");
                return Ok(());
            };
            if clear {
                c.clear()
                    .map_err(|e| format!("error: clearing {}: {e}", c.dir().display()))?;
            }
            let u = c.usage();
            let _ = writeln!(
                out,
                "kernel cache {}: {} entries, {:.1} MiB of {:.0} MiB",
                c.dir().display(),
                u.entries,
                u.bytes as f64 / (1 << 20) as f64,
                c.limit() as f64 / (1 << 20) as f64
            );
            Ok(())
        }
        Command::Devices => {
            match weft_runtime::cuda_driver_status() {
                Err(e) => {
                    let _ = writeln!(out, "no CUDA devices: {e}");
                }
                Ok(()) => {
                    let devs = weft_runtime::cuda_devices().map_err(|e| format!("error: {e}"))?;
                    if devs.is_empty() {
                        let _ = writeln!(out, "no CUDA devices");
                    }
                    for d in devs {
                        let _ = writeln!(out, "{d}");
                    }
                }
            }
            Ok(())
        }
        Command::Run {
            file,
            program,
            backend,
            device,
            block,
            grid,
            fast_math,
            inputs,
            outputs,
            shape,
            fuel,
            timeout,
            iterate,
            feed,
            until,
            sums,
            cast,
            time,
            stats,
        } => {
            let before = weft_runtime::stats::snapshot();
            let timeout = run_budget(timeout)?;
            let backend: Backend = backend.parse().map_err(|e| format!("error: {e}"))?;
            let m = load(&file)?;
            let p = choose_program(&m, program.as_deref(), &file)?;
            let shape = shape.map(|s| s.0);
            let (grid, block) = (grid.map(|a| a.0), block.map(|a| a.0));
            if p.kind == weft_ir::ProgramKind::Kernel {
                let grid = kernel_grid(p, grid.as_deref(), block.as_deref())?;
                let k = KernelRun {
                    backend,
                    opts: DeviceOptions {
                        fast_math,
                        ordinal: device,
                        fuel,
                        timeout,
                        ..DeviceOptions::default()
                    },
                };
                if iterate != 1 || !feed.is_empty() || until.is_some() || shape.is_some() {
                    return Err(format!(
                        "error: @{} is a kernel: --iterate, --feed, --until and --shape are for map programs",
                        p.name
                    )
                    .into());
                }
                run_kernel_cli(&m, p, &k, &grid, &inputs, &outputs, &sums, cast, out)?;
                if stats {
                    let _ = writeln!(out, "{}", weft_runtime::stats::snapshot().since(&before));
                }
                return Ok(());
            }
            if shape.is_none() && !p.params.iter().any(|q| q.kind == ParamKind::Varying) {
                return Err(format!(
                    "error: @{} has no varying input, so its launch shape cannot come from the \
                     inputs: pass --shape N[,M[,K]] (e.g. --shape 512,512)",
                    p.name
                )
                .into());
            }
            let one = |v: Option<Vec<u32>>, flag: &str| -> Result<Option<u32>, CliError> {
                match v.as_deref() {
                    None => Ok(None),
                    Some([x]) => Ok(Some(*x)),
                    Some(_) => Err(format!(
                        "error: --{flag} takes one number for a map program (several axes are for kernels)"
                    )
                    .into()),
                }
            };
            let block = one(block, "block")?;
            let grid = one(grid, "grid")?;
            // Every output is checked before anything is read or computed.
            let outs_plan = outputs::check_outs(
                &outputs,
                |name| output_index(p, name, "--out"),
                &input_files(p, &inputs),
            )?;
            // The device first: a missing GPU driver or device is reported before anything
            // else.
            let opts = DeviceOptions {
                fast_math,
                ordinal: device,
                fuel,
                timeout,
                block,
                grid,
            };
            let dev = Device::open(backend, &opts)
                .map_err(|e| format!("error: backend `{backend}`: {e}"))?;
            let mut ins = bind_inputs(p, &inputs, cast)?;
            let plan = iteration::Plan::parse(p, iterate, &feed, until.as_deref())?;
            let sums: Vec<usize> = sums
                .iter()
                .map(|o| output_index(p, o, "--sum"))
                .collect::<Result<_, _>>()?;
            let run_once = |ins: &[Input]| -> Result<Vec<HostArray>, CliError> {
                dev.apply(&m, &p.name, ins, shape.as_deref())
                    .map_err(|e| format!("error: {e}").into())
            };
            let start = std::time::Instant::now();
            dev.prepare(&m, &p.name)
                .map_err(|e| format!("error: {e}"))?;
            let compiled = start.elapsed().as_secs_f64();
            let start = std::time::Instant::now();
            let (outs, ran) = match &dev {
                // Iterations on the CPU keep their arrays in kernel buffers between steps.
                Device::Cpu(cpu) if plan.is_iterated() => {
                    plan.run_cpu(cpu, &m, &p.name, &ins, shape.as_deref())?
                }
                // On a GPU they stay resident between steps.
                Device::Cuda(gpu) if plan.is_iterated() => {
                    plan.run_cuda(gpu, &m, &p.name, &ins, shape.as_deref())?
                }
                _ => plan.run(&mut ins, run_once)?,
            };
            let secs = start.elapsed().as_secs_f64();
            if plan.is_iterated() {
                let _ = writeln!(out, "{}", plan.report(ran, &outs, secs));
            }
            for &i in &sums {
                let _ = writeln!(
                    out,
                    "sum({}) = {}",
                    p.output_name(i),
                    iteration::sum_f64(&outs[i])
                );
            }
            outputs::write_outs(&outs_plan, |i| &outs[i])?;
            if outputs.is_empty() {
                for (i, a) in outs.iter().enumerate() {
                    let _ = writeln!(out, "{}", summary(&p.output_name(i), a));
                }
            }
            if time {
                let _ = writeln!(out, "{}", time_line(compiled, secs));
            }
            if stats {
                let _ = writeln!(out, "{}", weft_runtime::stats::snapshot().since(&before));
            }
            Ok(())
        }
    }
}

/// How `weft run` runs a kernel.
struct KernelRun {
    backend: Backend,
    opts: DeviceOptions,
}

/// A `--timeout` value: the budget per launch, `None` for `0` (no budget).
#[derive(Clone, Copy, Debug)]
pub struct Budget(pub Option<std::time::Duration>);

fn parse_budget(s: &str) -> Result<Budget, String> {
    weft_runtime::watchdog::parse_timeout(s).map(Budget)
}

/// `--time`'s line: compile and run time in milliseconds.
fn time_line(compile_s: f64, run_s: f64) -> String {
    format!(
        "time: compile {:.3} ms, run {:.3} ms",
        compile_s * 1e3,
        run_s * 1e3
    )
}

/// `weft run`'s budget per launch when `--timeout` is not given and `WEFT_TIMEOUT` is unset:
/// generous enough for any real launch, so a runaway loop ends the run instead of hanging it.
const DEFAULT_RUN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// The budget of `weft run`'s launches: `--timeout`, else `WEFT_TIMEOUT`, else
/// [`DEFAULT_RUN_TIMEOUT`].
fn run_budget(flag: Option<Budget>) -> Result<Option<std::time::Duration>, CliError> {
    match flag {
        Some(Budget(b)) => Ok(b),
        None if std::env::var_os("WEFT_TIMEOUT").is_some() => {
            weft_runtime::watchdog::timeout_from_env().map_err(|e| format!("error: {e}").into())
        }
        None => Ok(Some(DEFAULT_RUN_TIMEOUT)),
    }
}

/// The kernel launch `--grid`/`--block` give (both required).
fn kernel_grid(
    p: &weft_ir::Program,
    grid: Option<&[u32]>,
    block: Option<&[u32]>,
) -> Result<weft_ir::KernelGrid, CliError> {
    let (Some(g), Some(b)) = (grid, block) else {
        return Err(format!(
            "error: @{} is a kernel: give --grid and --block (work-groups and work-items per group, e.g. --grid 64 --block 256)",
            p.name
        )
        .into());
    };
    weft_ir::KernelGrid::new(g, b).map_err(|e| format!("error: --grid/--block: {e}").into())
}

/// `weft run` of a kernel: binds the inputs (buffers are read from their `--in` files),
/// launches it once on the backend, then saves or summarises the buffers (by parameter
/// name).
#[allow(clippy::too_many_arguments)]
fn run_kernel_cli(
    m: &weft_ir::Module,
    p: &weft_ir::Program,
    k: &KernelRun,
    grid: &weft_ir::KernelGrid,
    inputs: &[String],
    outputs: &[String],
    sums: &[String],
    cast: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let buffer = |name: &str, flag: &str| -> Result<usize, CliError> {
        p.param_index(name)
            .filter(|&i| p.params[i].kind == weft_ir::ParamKind::Buffer)
            .ok_or_else(|| {
                format!(
                    "error: {flag} {name}: @{} has no buffer parameter `{name}`",
                    p.name
                )
                .into()
            })
    };
    // Every output and sum is checked before anything is read or launched.
    let outs = outputs::check_outs(
        outputs,
        |name| buffer(name, "--out"),
        &input_files(p, inputs),
    )?;
    let sums: Vec<(&str, usize)> = sums
        .iter()
        .map(|name| Ok((name.as_str(), buffer(name, "--sum")?)))
        .collect::<Result<_, CliError>>()?;
    let ins = bind_inputs(p, inputs, cast)?;
    let mut owned: Vec<Option<HostArray>> = p
        .params
        .iter()
        .zip(&ins)
        .map(|(par, i)| match (par.kind, i) {
            (weft_ir::ParamKind::Buffer, Input::Array(a)) => Some((**a).clone()),
            _ => None,
        })
        .collect();
    let mut args: Vec<weft_ir::KernelArg> = Vec::new();
    for (i, o) in ins.iter().zip(owned.iter_mut()) {
        args.push(match (i, o) {
            (_, Some(h)) => weft_ir::KernelArg::Buffer(h),
            (Input::Array(a), None) => weft_ir::KernelArg::Array(a),
            (Input::Uniform(c), None) => weft_ir::KernelArg::Value(*c),
        });
    }
    let start = std::time::Instant::now();
    let dev = Device::open(k.backend, &k.opts)
        .map_err(|e| format!("error: backend `{}`: {e}", k.backend))?;
    let r = dev
        .run_kernel(m, &p.name, &mut args, grid)
        .map_err(|e| e.to_string());
    r.map_err(|e| format!("error: {e}"))?;
    let secs = start.elapsed().as_secs_f64();
    drop(args);
    // `check_outs` and the sums only accept buffer parameters, which `owned` holds.
    let empty = HostArray::zeros(Type::f32(), &[0]);
    let buffer_at = |i: usize| owned[i].as_ref().unwrap_or(&empty);
    for &(name, i) in &sums {
        let _ = writeln!(out, "sum({name}) = {}", iteration::sum_f64(buffer_at(i)));
    }
    outputs::write_outs(&outs, buffer_at)?;
    if outputs.is_empty() {
        for (i, a) in owned.iter().enumerate() {
            if let Some(a) = a {
                let _ = writeln!(out, "{}", summary(p.param_name(i), a));
            }
        }
    }
    let _ = writeln!(
        out,
        "kernel @{}: grid {:?} × block {:?} on {} in {:.3} ms",
        p.name,
        grid.groups,
        grid.block,
        k.backend,
        secs * 1e3
    );
    Ok(())
}

/// The `--in` arguments of `p` that name files (those of varying, array and buffer
/// inputs), with their paths: what `--out` must not replace.
fn input_files(p: &Program, specs: &[String]) -> Vec<(String, PathBuf)> {
    specs
        .iter()
        .filter_map(|spec| {
            let (name, value) = split_eq(spec, "--in").ok()?;
            let i = p.param_index(name)?;
            (p.params[i].kind != ParamKind::Uniform).then(|| (spec.clone(), PathBuf::from(value)))
        })
        .collect()
}

/// Reads a `.weft` source file: a regular file (a FIFO or `/dev/zero` is refused before
/// reading), at most the size it had when opened, as UTF-8 text; returns the text and the
/// name for messages.
fn read_source(path: &Path) -> Result<(String, String), CliError> {
    let (name, bytes) = if is_stdin(path) {
        let b = match STDIN.with(|s| s.borrow_mut().take()) {
            Some(b) => b,
            None => {
                let mut b = Vec::new();
                std::io::Read::read_to_end(&mut std::io::stdin(), &mut b)
                    .map_err(|e| format!("error: <stdin>: {e}"))?;
                b
            }
        };
        ("<stdin>".to_string(), b)
    } else {
        let name = path.display().to_string();
        let b = weft::data::read_regular(path).map_err(|e| format!("error: {name}: {e}"))?;
        (name, b)
    };
    match String::from_utf8(bytes) {
        Ok(s) => Ok((s, name)),
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let prefix = std::str::from_utf8(&e.as_bytes()[..valid]).unwrap_or("");
            let (line, col) = weft_ir::diag::line_col(prefix, valid);
            Err(format!(
                "{name}:{line}:{col}: error: the file is not UTF-8 text (invalid byte at offset {valid})\n"
            )
            .into())
        }
    }
}

/// Whether a source path is `-`, standard input.
fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Reads, parses and verifies a module; errors are rendered with file:line:col and a snippet.
pub fn load(path: &Path) -> Result<Module, CliError> {
    let (src, name) = read_source(path)?;
    weft_ir::parse_and_verify(&src).map_err(|e| weft_ir::render(&e.0, &name, &src).into())
}

fn choose_program<'m>(
    m: &'m Module,
    name: Option<&str>,
    file: &Path,
) -> Result<&'m Program, CliError> {
    let names = || {
        m.programs
            .iter()
            .map(|p| format!("@{}", p.name))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match name {
        Some(n) => {
            let n = n.trim_start_matches('@');
            m.get(n).ok_or_else(|| {
                format!(
                    "error: --program {n}: {} has no such program (it has {})",
                    file.display(),
                    names()
                )
                .into()
            })
        }
        None if m.programs.len() == 1 => Ok(&m.programs[0]),
        None => Err(format!(
            "error: {} has {} programs ({}); choose one with --program",
            file.display(),
            m.programs.len(),
            names()
        )
        .into()),
    }
}

/// The position of output `name` of `p` (its name or position), or an error for `flag`
/// listing the outputs.
fn output_index(p: &Program, name: &str, flag: &str) -> Result<usize, CliError> {
    p.output_index(name).ok_or_else(|| {
        format!(
            "error: {flag} {name}: @{} has no output `{name}` (outputs: {})",
            p.name,
            (0..p.outputs.len())
                .map(|i| p.output_name(i))
                .collect::<Vec<_>>()
                .join(", ")
        )
        .into()
    })
}

fn split_eq<'a>(spec: &'a str, flag: &str) -> Result<(&'a str, &'a str), CliError> {
    spec.split_once('=')
        .map(|(a, b)| (a.trim_start_matches('%'), b))
        .ok_or_else(|| format!("error: {flag} {spec}: expected NAME=VALUE").into())
}

/// Reads a .npy file as the contents of an input of type `ty`: an array parameter (its
/// element type and rank) or a varying input (one element of type `ty` per index).
///
/// Errors: the file cannot be read, or its dtype or shape does not fit `ty` (the message
/// names the file).
fn read_array(path: &Path, ty: Type, cast: bool) -> Result<HostArray, String> {
    let data = npy::read_npy(path).map_err(|e| e.to_string())?;
    let (elem, dims) = match ty.array_parts() {
        Some((d, e, _)) => (e, Some(d as usize)),
        None => (ty, None),
    };
    npy::to_host_array_as(data, elem, dims, cast).map_err(|m| format!("{}: {m}", path.display()))
}

/// A uniform input of scalar or tuple type `ty` from an `.npy` file holding one value: a
/// 0-d array (`np.save(f, np.float32(2.5))`), or for a tuple its lanes as one axis.
fn read_uniform(path: &Path, ty: Type, cast: bool) -> Result<Const, String> {
    let data = npy::read_npy(path).map_err(|e| e.to_string())?;
    let (_, lanes) = ty.lanes().ok_or("array of arrays")?;
    if data.data.len() != lanes as usize {
        return Err(format!(
            "{}: a uniform {ty} needs one value (a 0-d array{}), got shape {:?}",
            path.display(),
            if lanes == 1 {
                String::new()
            } else {
                format!(" of {lanes} lanes, shape ({lanes},)")
            },
            data.shape
        ));
    }
    // Read as a one-element 1-D array of `ty`.
    let shape = if lanes == 1 {
        vec![1]
    } else {
        vec![1, lanes as usize]
    };
    let a = npy::to_host_array_as(npy::NpyData { shape, ..data }, ty, Some(1), cast)
        .map_err(|m| format!("{}: {m}", path.display()))?;
    Ok(Const::from_lanes(ty, &a.data))
}

/// Parses a literal of scalar or tuple type `ty`: one lane per comma-separated part, each
/// read by [`parse_lane`] (`2.5`, `-3`, `true`, `0x1f`); a tuple may be written `1,2,3` or
/// `(1, 2, 3)`. Used by `weft run --in` (uniform inputs) and `weft bind --input`.
///
/// Errors: a message naming the type and the lane count, or the lane that is not a valid
/// literal of the lane type.
fn parse_const(ty: Type, value: &str) -> Result<Const, String> {
    let (s, n) = ty
        .lanes()
        .ok_or_else(|| format!("type {ty} is not a scalar or tuple"))?;
    let text = value.trim();
    let inner = match text.strip_prefix('(') {
        Some(t) => t
            .strip_suffix(')')
            .ok_or_else(|| format!("`{value}` has `(` but no closing `)`"))?,
        None => text,
    };
    let parts: Vec<&str> = inner.split(',').map(str::trim).collect();
    if parts.len() != n as usize {
        let example = if n == 1 {
            String::new()
        } else {
            format!(", e.g. ({})", vec!["1"; n as usize].join(", "))
        };
        return Err(format!(
            "a value of type {ty} needs {n} comma-separated lane(s){example}, got `{value}`"
        ));
    }
    let mut lanes = Vec::new();
    for part in parts {
        let (neg, text) = match part.strip_prefix('-') {
            Some(t) => (true, t),
            None => (false, part),
        };
        lanes.push(parse_lane(s, neg, text)?);
    }
    Ok(Const::from_lanes(ty, &lanes))
}

fn bind_inputs(p: &Program, specs: &[String], cast: bool) -> Result<Vec<Input>, CliError> {
    let mut ins: Vec<Option<Input>> = vec![None; p.params.len()];
    for spec in specs {
        let (name, value) = split_eq(spec, "--in")?;
        let i = p.param_index(name).ok_or_else(|| {
            let all: Vec<String> = (0..p.params.len())
                .map(|i| p.param_name(i).to_string())
                .collect();
            format!(
                "error: --in {spec}: @{} has no input `{name}` (inputs: {})",
                p.name,
                all.join(", ")
            )
        })?;
        let par = p.params[i];
        let ty = p.ty(par.value);
        let bad = |m: String| CliError(format!("error: --in {name}: {m}"));
        let input = match par.kind {
            ParamKind::Uniform if value.ends_with(".npy") => {
                Input::Uniform(read_uniform(Path::new(value), ty, cast).map_err(bad)?)
            }
            ParamKind::Uniform => Input::Uniform(parse_const(ty, value).map_err(bad)?),
            ParamKind::Varying | ParamKind::Array | ParamKind::Buffer => {
                let path = Path::new(value);
                if value.ends_with(".png") {
                    let a = iteration::read_png(path, ty).map_err(bad)?;
                    ins[i] = Some(Input::Array(Arc::new(a)));
                    continue;
                }
                if !value.ends_with(".npy") && !path.exists() {
                    return Err(bad(format!(
                        "is a {} input of type {ty}: give a .npy file, not `{value}`",
                        match par.kind {
                            ParamKind::Array => "array",
                            ParamKind::Buffer => "buffer",
                            _ => "varying",
                        }
                    )));
                }
                Input::Array(Arc::new(read_array(path, ty, cast).map_err(bad)?))
            }
        };
        ins[i] = Some(input);
    }
    let missing: Vec<String> = ins
        .iter()
        .enumerate()
        .filter(|(_, x)| x.is_none())
        .map(|(i, _)| p.param_name(i).to_string())
        .collect();
    if !missing.is_empty() {
        return Err(format!("error: @{} needs --in for: {}", p.name, missing.join(", ")).into());
    }
    Ok(ins.into_iter().flatten().collect())
}

/// One line describing an output: shape, dtype, first values and an FNV-1a checksum of its
/// little-endian bytes.
pub fn summary(name: &str, a: &HostArray) -> String {
    let (s, lanes) = a.elem.lanes().unwrap_or((weft_ir::ScalarType::F32, 1));
    let mut shape = a.shape.clone();
    if lanes > 1 {
        shape.push(lanes as usize);
    }
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in &a.data {
        for byte in b.to_le_bytes().iter().take(s.bytes()) {
            h = (h ^ *byte as u64).wrapping_mul(0x100_0000_01b3);
        }
    }
    let first: Vec<String> = (0..a.len().min(6)).map(|i| a.get(i).to_string()).collect();
    let more = if a.len() > 6 { ", ..." } else { "" };
    format!(
        "{name}: shape {:?} {} [{}{more}] checksum {h:016x}",
        shape,
        npy::dtype_str(s),
        first.join(", ")
    )
}
