//! The module-transforming verbs of the `weft` CLI: `opt` (pass pipelines) and the program
//! algebra of DESIGN §4 — `compose` (p << q), `bundle`, `bind` (tight and loose binding)
//! and `specialize` (keep or drop outputs). Each prints a valid `.weft` module, to stdout
//! or to the `-o` file; errors are [`CliError`]s naming the file, argument or program.

use super::{choose_program, load, outputs, parse_const, read_array, CliError};
use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use weft_ir::algebra;
use weft_ir::passes::inline::inline_module;
use weft_ir::passes::Pipeline;
use weft_ir::program::Imm;
use weft_ir::{Module, Opcode, ParamKind, Program};

/// `weft opt`: parses and verifies `file`, runs the pipeline `passes` on it (dumping the
/// module to `err` after each pass when `print_after_all`) and prints the module.
///
/// Errors: an unknown pass (named with its position; checked before the file is read);
/// the file does not parse or verify; a pass leaves IR that does not verify (a weft bug).
pub fn opt(
    file: &Path,
    passes: &str,
    print_after_all: bool,
    output: Option<&Path>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let pipeline = Pipeline::parse(passes).map_err(|e| format!("error: --passes {passes}: {e}"))?;
    check_output(output)?;
    let mut m = load(file)?;
    pipeline
        .run_with(&mut m, &mut |pass, m| {
            if print_after_all {
                let _ = write!(err, "; after {}\n{}", pass.name(), weft_ir::print_module(m));
            }
        })
        .map_err(|e| {
            format!(
                "error: {}: internal error (a bug in weft, please report it): {e}",
                file.display()
            )
        })?;
    emit(&m, "opt", output, out)
}

/// `weft compose A:@p B:@q`: the composition p << q ([`algebra::compose`]) of the two
/// programs, calls inlined, alone in a module, named `name` if given.
///
/// Errors: a malformed or unknown `FILE:@PROGRAM`; a file that does not verify; the
/// interfaces do not fit (the algebra's message); a bad `--name`.
pub fn compose(
    p: &str,
    q: &str,
    name: Option<&str>,
    output: Option<&Path>,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    check_output(output)?;
    let progs = load_refs(&[p.to_string(), q.to_string()])?;
    let r = algebra::compose(&progs[0], &progs[1]).map_err(|e| format!("error: {e}"))?;
    emit_alone(r, name, "compose", output, out)
}

/// `weft bundle A:@p B:@q ...`: the programs bundled side by side ([`algebra::bundle`]),
/// calls inlined, alone in a module, named `name` if given.
///
/// Errors: as for [`compose`].
pub fn bundle(
    refs: &[String],
    name: Option<&str>,
    output: Option<&Path>,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    check_output(output)?;
    let progs = load_refs(refs)?;
    let ps: Vec<&Program> = progs.iter().collect();
    let r = algebra::bundle(&ps).map_err(|e| format!("error: {e}"))?;
    emit_alone(r, name, "bundle", output, out)
}

/// `weft bind FILE --input NAME=VALUE ...`: tight binding of each input to a literal
/// ([`algebra::bind`]) or, for an array input, to `@FILE.npy` ([`algebra::bind_array`]);
/// with `loose`, each `--input NAME` becomes a uniform ([`algebra::bind_uniform`]). The
/// result replaces the program in the module, which is printed whole.
///
/// Errors: an input named twice, unknown, or whose value does not parse as its type (each
/// naming the `--input` argument); the algebra's errors; callers of the program in the
/// module that no longer fit its interface.
pub fn bind(
    file: &Path,
    program: Option<&str>,
    inputs: &[String],
    loose: bool,
    output: Option<&Path>,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    check_output(output)?;
    let mut m = load(file)?;
    let idx = program_index(&m, program, file)?;
    let mut p = m.programs[idx].clone();
    if p.kind == weft_ir::ProgramKind::Kernel {
        return Err(format!(
            "error: bind(@{0}): @{0} is a kernel; the program algebra takes map programs",
            p.name
        )
        .into());
    }
    let mut seen = HashSet::new();
    for spec in inputs {
        let (name, value) = match spec.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (spec.as_str(), None),
        };
        let name = name.trim().trim_start_matches('%');
        if !seen.insert(name.to_string()) {
            return Err(format!("error: --input {spec}: input `{name}` is bound twice").into());
        }
        let fail = |m: String| CliError(format!("error: --input {spec}: {m}"));
        if loose {
            if value.is_some() {
                return Err(fail(format!(
                    "loose binding (--loose) takes no value: give `--input {name}`, and the \
                     value at each run (`weft run --in {name}=...`)"
                )));
            }
            p = algebra::bind_uniform(&p, name).map_err(|e| fail(e.to_string()))?;
            continue;
        }
        let Some(value) = value else {
            return Err(fail(
                "expected NAME=VALUE (tight binding), or --loose to make NAME a uniform".into(),
            ));
        };
        let i = p.param_index(name).ok_or_else(|| {
            let all: Vec<&str> = (0..p.params.len()).map(|i| p.param_name(i)).collect();
            fail(format!(
                "@{} has no input `{name}` (inputs: {})",
                p.name,
                all.join(", ")
            ))
        })?;
        let par = p.params[i];
        let ty = p.ty(par.value);
        p = if par.kind == ParamKind::Array {
            let Some(path) = value.strip_prefix('@') else {
                return Err(fail(format!(
                    "input `{name}` is an array ({ty}): give its contents as @FILE.npy"
                )));
            };
            let arr = read_array(Path::new(path), ty, false).map_err(fail)?;
            algebra::bind_array(&p, name, &arr).map_err(|e| fail(e.to_string()))?
        } else {
            if value.starts_with('@') {
                return Err(fail(format!(
                    "input `{name}` is of type {ty}: give a literal such as 2.5 or (1, 2, 3), \
                     not a file (@FILE.npy is for array inputs)"
                )));
            }
            let c = parse_const(ty, value).map_err(fail)?;
            algebra::bind(&p, name, &c).map_err(|e| fail(e.to_string()))?
        };
    }
    replace_and_emit(m.programs.remove(idx), p, &mut m, idx, "bind", output, out)
}

/// `weft specialize FILE --keep OUT,...` (or `--drop OUT,...`): [`algebra::keep`] or
/// [`algebra::drop_outputs`]; the result replaces the program in the module, printed whole.
///
/// Errors: both or neither of `keep` and `drop`; an unknown output (the algebra's message
/// lists the outputs); callers in the module that no longer fit.
pub fn specialize(
    file: &Path,
    program: Option<&str>,
    keep: Option<&[String]>,
    drop: Option<&[String]>,
    output: Option<&Path>,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let names = |l: &[String]| -> Vec<String> {
        l.iter()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    };
    check_output(output)?;
    let mut m = load(file)?;
    let idx = program_index(&m, program, file)?;
    let p = &m.programs[idx];
    let (flag, list) = match (keep, drop) {
        (Some(k), None) => ("--keep", names(k)),
        (None, Some(d)) => ("--drop", names(d)),
        _ => return Err("error: give exactly one of --keep and --drop".into()),
    };
    let refs: Vec<&str> = list.iter().map(String::as_str).collect();
    let r = if flag == "--keep" {
        algebra::keep(p, &refs)
    } else {
        algebra::drop_outputs(p, &refs)
    }
    .map_err(|e| format!("error: {flag} {}: {e}", list.join(",")))?;
    replace_and_emit(
        m.programs.remove(idx),
        r,
        &mut m,
        idx,
        "specialize",
        output,
        out,
    )
}

/// Checks `-o FILE` before anything is computed ([`outputs::check_file`]). The file may be
/// the input itself (`weft opt f.weft -o f.weft`): it is read completely first and
/// replaced atomically.
fn check_output(output: Option<&Path>) -> Result<(), CliError> {
    output.map_or(Ok(()), |o| outputs::check_file("-o", o))
}

/// The position in `m` of the program chosen by `--program` (or the only one).
fn program_index(m: &Module, program: Option<&str>, file: &Path) -> Result<usize, CliError> {
    let name = choose_program(m, program, file)?.name.clone();
    m.position(&name)
        .ok_or_else(|| format!("error: @{name}: program not found").into())
}

/// Splits a `FILE:@PROGRAM` argument.
fn split_ref(arg: &str) -> Result<(PathBuf, &str), CliError> {
    match arg.rsplit_once(":@") {
        Some((file, name)) if !file.is_empty() && !name.is_empty() => {
            Ok((PathBuf::from(file), name))
        }
        _ => Err(format!(
            "error: `{arg}`: expected FILE:@PROGRAM, e.g. examples/ir/saxpy.weft:@saxpy"
        )
        .into()),
    }
}

/// Loads the programs named by `FILE:@PROGRAM` arguments, each file once, with every call
/// inlined so that the programs are self-contained.
fn load_refs(refs: &[String]) -> Result<Vec<Program>, CliError> {
    let mut modules: Vec<(PathBuf, Module)> = Vec::new();
    let mut progs = Vec::new();
    for arg in refs {
        let (file, name) = split_ref(arg)?;
        let k = match modules.iter().position(|(f, _)| *f == file) {
            Some(k) => k,
            None => {
                let mut m = load(&file)?;
                inline_module(&mut m);
                modules.push((file.clone(), m));
                modules.len() - 1
            }
        };
        let m = &modules[k].1;
        let p = m.get(name).ok_or_else(|| {
            let names: Vec<String> = m.programs.iter().map(|p| format!("@{}", p.name)).collect();
            format!(
                "error: `{arg}`: {} has no program @{name} (it has {})",
                file.display(),
                names.join(", ")
            )
        })?;
        progs.push(p.clone());
    }
    Ok(progs)
}

/// Prints `r` alone in a module, renamed to `name` if given.
fn emit_alone(
    mut r: Program,
    name: Option<&str>,
    verb: &str,
    output: Option<&Path>,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    if let Some(n) = name {
        let n = n.strip_prefix('@').unwrap_or(n);
        let ok = !n.is_empty()
            && n.bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'.');
        if !ok {
            return Err(format!(
                "error: --name {n}: a program name is letters, digits, `_` and `.`"
            )
            .into());
        }
        r.name = n.to_string();
    }
    let mut m = Module::new();
    m.programs.push(r);
    emit(&m, verb, output, out)
}

/// Puts `new` (the transformed `old`) at position `idx` of `m` and prints the module.
/// If the module no longer verifies because other programs call `old` with its former
/// interface, says so.
fn replace_and_emit(
    old: Program,
    new: Program,
    m: &mut Module,
    idx: usize,
    verb: &str,
    output: Option<&Path>,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    m.programs.insert(idx, new);
    if weft_ir::verify_module(m).is_err() {
        let callers: Vec<String> = m
            .programs
            .iter()
            .filter(|c| calls(c, &old.name))
            .map(|c| format!("@{}", c.name))
            .collect();
        if !callers.is_empty() {
            return Err(format!(
                "error: {verb} changes the interface of @{} but {} call(s) it; inline the \
                 calls first (`weft opt --passes inline`) or transform a copy",
                old.name,
                callers.join(", ")
            )
            .into());
        }
    }
    emit(m, verb, output, out)
}

/// Whether `p` contains a `call @callee`.
fn calls(p: &Program, callee: &str) -> bool {
    let mut found = false;
    p.walk(&mut |op| {
        let d = p.op(op);
        if d.opcode == Opcode::Call && matches!(&d.imm, Imm::Callee(c) if c == callee) {
            found = true;
        }
    });
    found
}

/// Verifies `m` (a failure is a weft bug) and prints it to `output` (atomically) or `out`.
fn emit(
    m: &Module,
    verb: &str,
    output: Option<&Path>,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    if let Err(errors) = weft_ir::verify_module(m) {
        let msgs: Vec<String> = errors
            .0
            .iter()
            .map(|e| format!("\n  {}", e.message))
            .collect();
        return Err(format!(
            "error: internal error (a bug in weft, please report it): the result of `weft \
             {verb}` does not verify:{}",
            msgs.concat()
        )
        .into());
    }
    let text = weft_ir::print_module(m);
    match output {
        Some(path) => outputs::write_text("-o", path, &text),
        None => {
            let _ = write!(out, "{text}");
            Ok(())
        }
    }
}
