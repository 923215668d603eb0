//! Filetests: `.weft` files whose header lines (`test cat`, `test verifier`, `test interpret`,
//! `test opt PIPELINE`, `test algebra`) pick the checks and whose `;` comments hold the
//! expectations:
//!
//! - `test cat`: the module round-trips (`print(parse(print(m))) == print(m)`) and the printed
//!   text matches the `; check: TEXT` lines in order (substring match, FileCheck-style).
//!   `; not: TEXT` (FileCheck's CHECK-NOT) requires that TEXT does not occur between the end
//!   of the previous `check` match (or the start) and the start of the next `check` match (or
//!   the end of the text).
//! - `test verifier`: every `; error: TEXT` comment expects a diagnostic on its own line whose
//!   message contains TEXT, and no other diagnostic may appear.
//! - `test interpret`: every `; run: @p(ARGS) == RESULTS` runs @p on the interpreter and on the
//!   compiled backends ([`compiled_backends`]);
//!   `; run: @p(ARGS) fails "TEXT"` expects a run error containing TEXT. An array literal
//!   (`[1, 2, 3]`) for a varying input applies @p over the array; `over [4, 4]` gives the
//!   launch shape when there is no varying input; `fuel N` sets the interpreter's fuel.
//! - `test opt PIPELINE` (e.g. `test opt fold,dce`; names as in [`weft_ir::passes::Pipeline`]):
//!   the module is parsed and verified, the pipeline runs on a copy (which must verify), and
//!   the printed result is matched against the `; check:` / `; not:` lines as for `test cat`.
//!   Every `; run:` line must then hold on the original module and on the optimized one
//!   (interpreter only).
//! - `test algebra`: the lines `; algebra: @NAME = OPERATION ARGS` apply program-algebra
//!   operations ([`weft_ir::algebra`]) in file order; each result, renamed `@NAME`, is appended
//!   to the module (so later lines and run lines can use it) and must verify and round-trip.
//!   Operations: `compose @p, @q`; `bundle @p, @q, ...`; `bind @p INPUT=VALUE` (a value in
//!   run-line syntax; an array literal `[...]` for an array input binds its contents);
//!   `bind_uniform @p INPUT`; `unbind @p INPUT`; `keep @p OUT, ...`; `drop @p OUT, ...`
//!   (output names or positions); `swizzle_inputs @p 2, 0, 1`. Input names may be written
//!   with or without `%`. `; algebra-error: OPERATION ARGS fails "TEXT"` expects the
//!   operation to fail with an error whose message contains TEXT. Then the `; check:` /
//!   `; not:` lines match the printed final module and the `; run:` lines run on it
//!   (interpreter only).
//!
//! Bless mode (`WEFT_BLESS=1`) rewrites the results of `; run:` lines with what the
//! interpreter computed (for `test opt`, on the original module).

use std::sync::Arc;
pub use weft_fuzz::compare::same_bits;
use weft_fuzz::compare::{fmt_array, fmt_value};
use weft_ir::algebra::{self, AlgebraError};
use weft_ir::interp::{Arg, Input, Interpreter};
use weft_ir::konst::parse_lane;
use weft_ir::lexer::{lex, Tok, TokKind};
use weft_ir::{Const, HostArray, KernelArg, Loc, Module, ParamKind, Program, ProgramKind, Type};

/// What one file's checks did.
#[derive(Debug, Default, Clone)]
pub struct Outcome {
    /// Checks that passed (run lines, check lines, expected errors, round-trips).
    pub passed: usize,
    /// Failure messages (file:line: what).
    pub failures: Vec<String>,
    /// The blessed text, when bless mode changed something.
    pub blessed: Option<String>,
}

/// Runs the checks of one filetest's text; `name` is used in messages.
pub fn run_filetest(name: &str, src: &str, bless: bool) -> Outcome {
    let mut out = Outcome::default();
    let tests: Vec<&str> = src
        .lines()
        .filter_map(|l| l.trim().strip_prefix("test "))
        .map(str::trim)
        .collect();
    if tests.is_empty() {
        out.failures.push(format!("{name}: no `test` header line"));
    }
    for t in tests {
        match t {
            "cat" => cat(name, src, &mut out),
            "verifier" => verifier(name, src, &mut out),
            "interpret" => interpret(name, src, bless, &mut out),
            "algebra" => algebra_test(name, src, bless, &mut out),
            t if t.split_whitespace().next() == Some("opt") => {
                opt(name, src, t["opt".len()..].trim(), bless, &mut out)
            }
            other => out
                .failures
                .push(format!("{name}: unknown test kind `{other}`")),
        }
    }
    out
}

/// The header lines are not IR: blank them (keeping offsets) before parsing.
fn body(src: &str) -> String {
    src.lines()
        .map(|l| {
            if l.trim().starts_with("test ") {
                " ".repeat(l.len())
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn cat(name: &str, src: &str, out: &mut Outcome) {
    let text = body(src);
    let m = match weft_ir::parse_module(&text) {
        Ok(m) => m,
        Err(e) => {
            out.failures.push(format!(
                "{name}: does not parse:\n{}",
                weft_ir::render(&e.0, name, &text)
            ));
            return;
        }
    };
    let printed = weft_ir::print_module(&m);
    round_trip(name, &printed, out);
    check_lines(name, src, &printed, out);
}

/// `printed` (a printed module) parses and prints back identically.
fn round_trip(name: &str, printed: &str, out: &mut Outcome) {
    match weft_ir::parse_module(printed) {
        Ok(m2) if weft_ir::print_module(&m2) == printed => out.passed += 1,
        Ok(m2) => out.failures.push(format!(
            "{name}: round-trip differs:\n--- first print\n{printed}\n--- second print\n{}",
            weft_ir::print_module(&m2)
        )),
        Err(e) => out.failures.push(format!(
            "{name}: printed text does not parse:\n{printed}\n{}",
            weft_ir::render(&e.0, "printed", printed)
        )),
    }
}

/// The text after `; KIND:` on `line`, trimmed, if the line holds that directive.
fn directive<'a>(line: &'a str, kind: &str) -> Option<&'a str> {
    line.split_once(&format!("; {kind}:"))
        .map(|(_, p)| p.trim())
}

/// Matches the `; check:` lines of `src` in order against `printed` (each after the previous
/// match) and the `; not:` lines against the text between the neighbouring check matches
/// (`not:` lines before a check that fails are not judged).
fn check_lines(name: &str, src: &str, printed: &str, out: &mut Outcome) {
    let mut pos = 0usize;
    // `; not:` lines waiting for the next check match: (line number, pattern).
    let mut nots: Vec<(usize, &str)> = Vec::new();
    let check_nots = |nots: &mut Vec<(usize, &str)>, region: &str, out: &mut Outcome| {
        for (ln, pat) in nots.drain(..) {
            if region.contains(pat) {
                out.failures.push(format!(
                    "{name}:{ln}: `not: {pat}` found between the neighbouring check matches:\n{printed}"
                ));
            } else {
                out.passed += 1;
            }
        }
    };
    for (ln, line) in src.lines().enumerate() {
        if let Some(pat) = directive(line, "check") {
            match printed[pos..].find(pat) {
                Some(i) => {
                    check_nots(&mut nots, &printed[pos..pos + i], out);
                    pos += i + pat.len();
                    out.passed += 1;
                }
                None => {
                    // The pending `not:` lines have no region to be judged on.
                    nots.clear();
                    out.failures.push(format!(
                        "{name}:{}: `check: {pat}` not found in the printed output (after the previous match):\n{printed}",
                        ln + 1
                    ));
                }
            }
        } else if let Some(pat) = directive(line, "not") {
            nots.push((ln + 1, pat));
        }
    }
    check_nots(&mut nots, &printed[pos..], out);
}

fn verifier(name: &str, src: &str, out: &mut Outcome) {
    let text = body(src);
    let mut expected: Vec<(usize, String, bool)> = src
        .lines()
        .enumerate()
        .flat_map(|(i, l)| {
            l.split("; error:")
                .skip(1)
                .map(move |e| (i + 1, e.trim().to_string(), false))
        })
        .collect();
    let diags = match weft_ir::parse_and_verify(&text) {
        Ok(_) => Vec::new(),
        Err(e) => e.0,
    };
    for d in &diags {
        let line = match d.loc {
            Loc::Span(s, _) => weft_ir::diag::line_col(&text, s as usize).0,
            _ => 0,
        };
        match expected
            .iter_mut()
            .find(|(l, m, seen)| *l == line && !*seen && d.message.contains(m.as_str()))
        {
            Some(e) => {
                e.2 = true;
                out.passed += 1;
            }
            None => out
                .failures
                .push(format!("{name}:{line}: unexpected error: {}", d.message)),
        }
    }
    for (l, m, seen) in expected {
        if !seen {
            out.failures.push(format!(
                "{name}:{l}: expected an error containing `{m}`, got none there"
            ));
        }
    }
}

/// Parses and verifies the module of a filetest, or records why it does not.
fn parse_verified(name: &str, src: &str, out: &mut Outcome) -> Option<Module> {
    let text = body(src);
    match weft_ir::parse_and_verify(&text) {
        Ok(m) => Some(m),
        Err(e) => {
            out.failures.push(format!(
                "{name}: does not verify:\n{}",
                weft_ir::render(&e.0, name, &text)
            ));
            None
        }
    }
}

fn interpret(name: &str, src: &str, bless: bool, out: &mut Outcome) {
    let Some(m) = parse_verified(name, src, out) else {
        return;
    };
    if compiled_backends().contains(&Backend::Cuda) {
        if let Err(e) = cuda_device() {
            out.failures.push(format!("{name}: {e}"));
        }
    }
    let mode = RunMode {
        bless,
        backends: true,
        label: "",
    };
    out.blessed = run_lines(name, src, &m, &mode, out);
}

/// How [`run_lines`] checks the `; run:` lines of a file.
struct RunMode<'a> {
    /// Return the file with the results of failing lines rewritten.
    bless: bool,
    /// Also run on the compiled backends ([`active_backends`]).
    backends: bool,
    /// Appended to `file:line` in failure messages (which module the line ran on).
    label: &'a str,
}

/// Checks every `; run:` line of `src` on `m`; returns the blessed text when bless mode
/// changed something.
fn run_lines(
    name: &str,
    src: &str,
    m: &Module,
    mode: &RunMode,
    out: &mut Outcome,
) -> Option<String> {
    let mut new_lines = Vec::new();
    let mut changed = false;
    for (ln, line) in src.lines().enumerate() {
        let Some((prefix, spec)) = line.split_once("; run:") else {
            new_lines.push(line.to_string());
            continue;
        };
        let here = format!("{name}:{}{}", ln + 1, mode.label);
        match run_line(m, spec.trim(), mode.backends) {
            Err(e) => {
                out.failures.push(format!("{here}: {e}"));
                new_lines.push(line.to_string());
            }
            Ok(r) => {
                for f in &r.backend_failures {
                    out.failures
                        .push(format!("{here}: {}: expected {}, {f}", r.call, r.expected));
                }
                if r.ok {
                    out.passed += 1;
                } else {
                    out.failures.push(format!(
                        "{here}: {}: expected {}, got {}",
                        r.call, r.expected, r.actual
                    ));
                }
                if mode.bless && !r.ok {
                    changed = true;
                    new_lines.push(format!("{prefix}; run: {} {}", r.call, r.actual));
                } else {
                    new_lines.push(line.to_string());
                }
            }
        }
    }
    changed.then(|| {
        let mut t = new_lines.join("\n");
        if src.ends_with('\n') {
            t.push('\n');
        }
        t
    })
}

/// `test opt PIPELINE`: see the module docs.
fn opt(name: &str, src: &str, pipeline: &str, bless: bool, out: &mut Outcome) {
    let Some(m) = parse_verified(name, src, out) else {
        return;
    };
    let pipe = match weft_ir::passes::Pipeline::parse(pipeline) {
        Ok(p) => p,
        Err(e) => {
            out.failures.push(format!("{name}: test opt: {e}"));
            return;
        }
    };
    let mut o = m.clone();
    if let Err(e) = pipe.run(&mut o) {
        let text = match &e {
            weft_ir::passes::PassError::Verify { text, .. } => format!(":\n{text}"),
            _ => String::new(),
        };
        out.failures
            .push(format!("{name}: opt {pipeline}: {e}{text}"));
        return;
    }
    if let Err(e) = weft_ir::verify_module(&o) {
        let msgs: Vec<&str> = e.0.iter().map(|d| d.message.as_str()).collect();
        out.failures.push(format!(
            "{name}: the optimized module does not verify: {}",
            msgs.join("; ")
        ));
        return;
    }
    let printed = weft_ir::print_module(&o);
    round_trip(name, &printed, out);
    check_lines(name, src, &printed, out);
    let original = RunMode {
        bless,
        backends: false,
        label: "",
    };
    out.blessed = run_lines(name, src, &m, &original, out);
    let label = format!(" (after `opt {pipeline}`)");
    let optimized = RunMode {
        bless: false,
        backends: false,
        label: &label,
    };
    run_lines(name, src, &o, &optimized, out);
}

/// `test algebra`: see the module docs.
fn algebra_test(name: &str, src: &str, bless: bool, out: &mut Outcome) {
    let Some(mut m) = parse_verified(name, src, out) else {
        return;
    };
    for (ln, line) in src.lines().enumerate() {
        let here = format!("{name}:{}", ln + 1);
        if let Some(spec) = directive(line, "algebra") {
            let Some((lhs, rhs)) = spec.split_once('=') else {
                out.failures.push(format!(
                    "{here}: expected `; algebra: @NAME = OPERATION ARGS`"
                ));
                continue;
            };
            let Some(new) = lhs.trim().strip_prefix('@').filter(|n| !n.is_empty()) else {
                out.failures.push(format!(
                    "{here}: expected `@NAME` before `=`, got `{}`",
                    lhs.trim()
                ));
                continue;
            };
            if m.get(new).is_some() {
                out.failures
                    .push(format!("{here}: the module already has a program @{new}"));
                continue;
            }
            let mut p = match apply_algebra(&m, rhs) {
                Err(e) => {
                    out.failures.push(format!("{here}: {e}"));
                    continue;
                }
                Ok(Err(e)) => {
                    out.failures.push(format!("{here}: {e}"));
                    continue;
                }
                Ok(Ok(p)) => p,
            };
            p.name = new.to_string();
            let text = weft_ir::print_program(&p);
            m.programs.push(p);
            if let Err(e) = weft_ir::verify_module(&m) {
                m.programs.pop();
                let msgs: Vec<&str> = e.0.iter().map(|d| d.message.as_str()).collect();
                out.failures.push(format!(
                    "{here}: the result does not verify: {}\n{text}",
                    msgs.join("; ")
                ));
                continue;
            }
            match weft_ir::parse_program(&text) {
                Ok(p2) if weft_ir::print_program(&p2) == text => out.passed += 1,
                Ok(p2) => out.failures.push(format!(
                    "{here}: round-trip differs:\n--- first print\n{text}\n--- second print\n{}",
                    weft_ir::print_program(&p2)
                )),
                Err(e) => out.failures.push(format!(
                    "{here}: the printed result does not parse:\n{}",
                    weft_ir::render(&e.0, "printed", &text)
                )),
            }
        } else if let Some(spec) = directive(line, "algebra-error") {
            let Some((op, want)) = spec.split_once(" fails ") else {
                out.failures.push(format!(
                    "{here}: expected `; algebra-error: OPERATION ARGS fails \"TEXT\"`"
                ));
                continue;
            };
            let want = want.trim().trim_matches('"');
            match apply_algebra(&m, op) {
                Err(e) => out.failures.push(format!("{here}: {e}")),
                Ok(Ok(_)) => out.failures.push(format!(
                    "{here}: `{}` succeeded; expected it to fail with \"{want}\"",
                    op.trim()
                )),
                Ok(Err(e)) if e.to_string().contains(want) => out.passed += 1,
                Ok(Err(e)) => out.failures.push(format!(
                    "{here}: `{}` failed with \"{e}\"; expected \"{want}\"",
                    op.trim()
                )),
            }
        }
    }
    check_lines(name, src, &weft_ir::print_module(&m), out);
    let mode = RunMode {
        bless,
        backends: false,
        label: "",
    };
    out.blessed = run_lines(name, src, &m, &mode, out);
}

/// Parses `OPERATION ARGS` of an algebra line and applies it to the programs of `m`. The outer
/// error says the line is malformed or names something `m` lacks; the inner one is the
/// operation's own.
fn apply_algebra(m: &Module, spec: &str) -> Result<Result<Program, AlgebraError>, String> {
    const OPS: &str = "compose, bundle, bind, bind_uniform, unbind, keep, drop, swizzle_inputs";
    let spec = spec.trim();
    let (op, rest) = spec
        .split_once(char::is_whitespace)
        .ok_or_else(|| format!("expected `OPERATION @program ...`, got `{spec}`"))?;
    let prog = |s: &str| -> Result<&Program, String> {
        let n = s
            .trim()
            .strip_prefix('@')
            .ok_or_else(|| format!("expected `@program`, got `{}`", s.trim()))?;
        m.get(n).ok_or_else(|| format!("no program @{n}"))
    };
    let list = |s: &str| -> Vec<String> {
        s.split(',')
            .map(|x| x.trim().to_string())
            .filter(|x| !x.is_empty())
            .collect()
    };
    if op == "compose" || op == "bundle" {
        let names = list(rest);
        let ps = names
            .iter()
            .map(|n| prog(n))
            .collect::<Result<Vec<_>, _>>()?;
        return match (op, ps.as_slice()) {
            ("compose", [p, q]) => Ok(algebra::compose(p, q)),
            ("compose", _) => Err("`compose` takes two programs: `compose @p, @q`".into()),
            _ => Ok(algebra::bundle(&ps)),
        };
    }
    let rest = rest.trim();
    let (pname, arg) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    let p = prog(pname)?;
    let arg = arg.trim();
    let input = arg.trim_start_matches('%');
    Ok(match op {
        "bind" => {
            let (x, lit) = arg.split_once('=').ok_or("`bind` takes `@p INPUT=VALUE`")?;
            return bind_literal(p, x.trim().trim_start_matches('%'), lit.trim());
        }
        "bind_uniform" => algebra::bind_uniform(p, input),
        "unbind" => algebra::unbind(p, input),
        "keep" | "drop" => {
            let outs = list(arg);
            let outs: Vec<&str> = outs.iter().map(String::as_str).collect();
            if op == "keep" {
                algebra::keep(p, &outs)
            } else {
                algebra::drop_outputs(p, &outs)
            }
        }
        "swizzle_inputs" => {
            let order = list(arg)
                .iter()
                .map(|x| {
                    x.parse::<usize>()
                        .map_err(|_| format!("bad input position `{x}`"))
                })
                .collect::<Result<Vec<_>, _>>()?;
            algebra::swizzle_inputs(p, &order)
        }
        _ => return Err(format!("unknown algebra operation `{op}` (one of: {OPS})")),
    })
}

/// `bind @p INPUT=LITERAL`: the literal is read with the input's type (an array literal for
/// an array input, which is then bound with [`algebra::bind_array`]).
fn bind_literal(
    p: &Program,
    input: &str,
    lit: &str,
) -> Result<Result<Program, AlgebraError>, String> {
    let i = p
        .param_index(input)
        .ok_or_else(|| format!("@{} has no input `{input}`", p.name))?;
    let ty = p.ty(p.params[i].value);
    let toks = lex(lit).map_err(|d| d.message)?;
    let mut c = Cur {
        src: lit,
        toks,
        pos: 0,
    };
    let r = match ty.array_parts() {
        Some((_, elem, _)) => {
            let (shape, data) = c.array(elem, 1)?;
            algebra::bind_array(p, input, &HostArray { elem, shape, data })
        }
        None => algebra::bind(p, input, &c.value(ty)?),
    };
    if c.peek().kind != TokKind::Eof {
        return Err(format!(
            "unexpected `{}` after the value",
            &lit[c.peek().start..]
        ));
    }
    Ok(r)
}

struct RunResult {
    call: String,
    expected: String,
    actual: String,
    ok: bool,
    /// Compiled backends whose results differ from the expectation.
    backend_failures: Vec<String>,
}

/// A tiny cursor over the tokens of a run line.
struct Cur<'a> {
    src: &'a str,
    toks: Vec<Tok>,
    pos: usize,
}

impl<'a> Cur<'a> {
    fn peek(&self) -> Tok {
        self.toks[self.pos.min(self.toks.len() - 1)]
    }
    fn text(&self, t: Tok) -> &'a str {
        &self.src[t.start..t.end]
    }
    fn is(&self, c: u8) -> bool {
        self.peek().kind == TokKind::Punct(c)
    }
    fn eat(&mut self, c: u8) -> bool {
        let y = self.is(c);
        if y {
            self.pos += 1;
        }
        y
    }
    fn expect(&mut self, c: u8) -> Result<(), String> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(format!(
                "expected `{}` at `{}`",
                c as char,
                &self.src[self.peek().start..]
            ))
        }
    }
    fn lane(&mut self, ty: Type) -> Result<u64, String> {
        let s = ty.elem_scalar();
        let neg = self.eat(b'-');
        let t = self.peek();
        self.pos += 1;
        let mut text = self.text(t).to_string();
        if text == "nan" && self.is(b':') {
            self.pos += 1;
            let t2 = self.peek();
            self.pos += 1;
            text = format!("nan:{}", self.text(t2));
        }
        parse_lane(s, neg, &text)
    }
    /// A scalar or tuple literal of `ty`.
    fn value(&mut self, ty: Type) -> Result<Const, String> {
        let (_, n) = ty.lanes().ok_or("array type where a value was expected")?;
        if n == 1 {
            return Ok(Const::from_lanes(ty, &[self.lane(ty)?]));
        }
        self.expect(b'(')?;
        let mut l = Vec::new();
        for i in 0..n {
            if i > 0 {
                self.expect(b',')?;
            }
            l.push(self.lane(ty)?);
        }
        self.expect(b')')?;
        Ok(Const::from_lanes(ty, &l))
    }
    /// A nested array literal of elements `elem`; returns (shape, lanes).
    fn array(&mut self, elem: Type, depth: usize) -> Result<(Vec<usize>, Vec<u64>), String> {
        if depth > 3 {
            return Err("array literal nested deeper than 3".into());
        }
        self.expect(b'[')?;
        let mut shape_inner: Option<Vec<usize>> = None;
        let mut data = Vec::new();
        let mut count = 0;
        while !self.is(b']') {
            if count > 0 {
                self.expect(b',')?;
            }
            if self.is(b'[') {
                let (s, d) = self.array(elem, depth + 1)?;
                if shape_inner.as_ref().is_some_and(|x| *x != s) {
                    return Err("ragged array literal".into());
                }
                shape_inner = Some(s);
                data.extend(d);
            } else {
                data.extend_from_slice(self.value(elem)?.lane_bits());
            }
            count += 1;
            if self.peek().kind == TokKind::Eof {
                return Err("unclosed `[`".into());
            }
        }
        self.pos += 1;
        let mut shape = vec![count];
        shape.extend(shape_inner.unwrap_or_default());
        Ok((shape, data))
    }
}

/// Runs one `; run:` line on `m`: on the interpreter, and on the compiled backends when
/// `backends` is set.
fn run_line(m: &Module, spec: &str, backends: bool) -> Result<RunResult, String> {
    // The quoted message of `fails "..."` is not IR: lex only what precedes it.
    let toks = lex(spec.split('"').next().unwrap_or("")).map_err(|d| d.message)?;
    let mut c = Cur {
        src: spec,
        toks,
        pos: 0,
    };
    let t = c.peek();
    if t.kind != TokKind::ProgName {
        return Err("a run line starts with `@program(`".into());
    }
    c.pos += 1;
    let pname = &spec[t.start + 1..t.end];
    let p: &Program = m.get(pname).ok_or_else(|| format!("no program @{pname}"))?;
    c.expect(b'(')?;
    if p.kind == ProgramKind::Kernel {
        return kernel_line(m, p, c, spec, backends);
    }
    let mut elems: Vec<Arg> = Vec::new();
    let mut apply: Vec<Option<Input>> = Vec::new();
    let mut is_apply = false;
    for (i, par) in p.params.iter().enumerate() {
        if i > 0 {
            c.expect(b',')?;
        }
        let ty = p.ty(par.value);
        match (par.kind, ty.array_parts()) {
            (ParamKind::Array, Some((_, elem, _))) => {
                let (shape, data) = c.array(elem, 1)?;
                let a = Arc::new(HostArray { elem, shape, data });
                elems.push(Arg::Array(a.clone()));
                apply.push(Some(Input::Array(a)));
            }
            (ParamKind::Varying, _) if c.is(b'[') => {
                let (shape, data) = c.array(ty, 1)?;
                is_apply = true;
                elems.push(Arg::Value(Const::zero(ty)));
                apply.push(Some(Input::Array(Arc::new(HostArray {
                    elem: ty,
                    shape,
                    data,
                }))));
            }
            _ => {
                let v = c.value(ty)?;
                elems.push(Arg::Value(v));
                apply.push(if par.kind == ParamKind::Uniform {
                    Some(Input::Uniform(v))
                } else {
                    None
                });
            }
        }
    }
    c.expect(b')')?;
    let mut launch: Option<Vec<usize>> = None;
    let mut fuel: Option<u64> = None;
    loop {
        let t = c.peek();
        let word = if t.kind == TokKind::Word {
            c.text(t)
        } else {
            ""
        };
        match word {
            "over" => {
                c.pos += 1;
                c.expect(b'[')?;
                let mut s = Vec::new();
                while !c.is(b']') {
                    if !s.is_empty() {
                        c.expect(b',')?;
                    }
                    let t = c.peek();
                    c.pos += 1;
                    s.push(c.text(t).parse::<usize>().map_err(|_| "bad launch shape")?);
                }
                c.pos += 1;
                launch = Some(s);
                is_apply = true;
            }
            "fuel" => {
                c.pos += 1;
                let t = c.peek();
                c.pos += 1;
                fuel = Some(c.text(t).parse::<u64>().map_err(|_| "bad fuel amount")?);
            }
            _ => break,
        }
    }
    let call_end = c.peek().start;
    let call = spec[..call_end].trim_end().to_string();
    let rest = spec[c.peek().start..].trim();
    let fails = rest
        .strip_prefix("fails")
        .map(|m| m.trim().trim_matches('"').to_string());
    let run = |backend: Backend| -> Result<Got, String> {
        backend.run(m, pname, &elems, &apply, is_apply, launch.as_deref(), fuel)
    };
    let interp_got = run(Backend::Interp);
    if let Some(want) = fails {
        // Failures (fuel, launch errors) are checked on the interpreter, the oracle.
        return Ok(match interp_got {
            Err(e) => RunResult {
                call,
                expected: format!("fails \"{want}\""),
                ok: e.contains(&want),
                actual: format!("fails \"{e}\""),
                backend_failures: Vec::new(),
            },
            Ok(v) => RunResult {
                call,
                expected: format!("fails \"{want}\""),
                actual: format!("== {}", v.show()),
                ok: false,
                backend_failures: Vec::new(),
            },
        });
    }
    c.expect(b'=')?;
    c.expect(b'=')?;
    // Expected results, one per output: (shape for array literals, lanes).
    let mut expected_vals: Vec<(Option<Vec<usize>>, Vec<u64>)> = Vec::new();
    for (k, o) in p.outputs.iter().enumerate() {
        if k > 0 {
            c.expect(b',')?;
        }
        expected_vals.push(if c.is(b'[') {
            let (shape, d) = c.array(o.ty, 1)?;
            (Some(shape), d)
        } else {
            (None, c.value(o.ty)?.lane_bits().to_vec())
        });
    }
    if c.peek().kind != TokKind::Eof {
        return Err(format!(
            "unexpected `{}` after the results",
            &spec[c.peek().start..]
        ));
    }
    let matches = |got: &Result<Got, String>| -> bool {
        match got {
            Ok(g) => p
                .outputs
                .iter()
                .zip(&expected_vals)
                .enumerate()
                .all(|(k, (o, (shape, lanes)))| g.matches(k, o.ty, shape.as_deref(), lanes)),
            Err(_) => false,
        }
    };
    let show = |got: &Result<Got, String>| match got {
        Ok(g) => format!("== {}", g.show()),
        Err(e) => format!("fails \"{e}\""),
    };
    let ok = matches(&interp_got);
    let mut backend_failures = Vec::new();
    for backend in active_backends().into_iter().filter(|_| backends) {
        let got = run(backend);
        if !matches(&got) {
            backend_failures.push(format!("{}: got {}", backend.name(), show(&got)));
        }
    }
    let expected = spec[spec.find("==").unwrap_or(0)..].trim().to_string();
    Ok(RunResult {
        call,
        expected,
        actual: show(&interp_got),
        ok,
        backend_failures,
    })
}

/// `@k(ARGS) grid [G..] block [B..] == BUFFERS` or `... fails "TEXT"` for a kernel: the
/// arguments are values for uniform parameters and array literals for array and buffer
/// parameters; the results are the buffer parameters' contents after the launch, in order.
fn kernel_line(
    m: &Module,
    p: &Program,
    mut c: Cur,
    spec: &str,
    backends: bool,
) -> Result<RunResult, String> {
    let mut args: Vec<KernelArgSpec> = Vec::new();
    for (i, par) in p.params.iter().enumerate() {
        if i > 0 {
            c.expect(b',')?;
        }
        let ty = p.ty(par.value);
        args.push(match ty.array_parts() {
            Some((_, elem, _)) => {
                let (shape, data) = c.array(elem, 1)?;
                let a = HostArray { elem, shape, data };
                if par.kind == ParamKind::Buffer {
                    KernelArgSpec::Buffer(a)
                } else {
                    KernelArgSpec::Array(a)
                }
            }
            None => KernelArgSpec::Value(c.value(ty)?),
        });
    }
    c.expect(b')')?;
    let axes = |c: &mut Cur, what: &str| -> Result<Vec<u32>, String> {
        let t = c.peek();
        if t.kind != TokKind::Word || c.text(t) != what {
            return Err(format!("a kernel run line needs `{what} [N, ...]`"));
        }
        c.pos += 1;
        c.expect(b'[')?;
        let mut s = Vec::new();
        while !c.is(b']') {
            if !s.is_empty() {
                c.expect(b',')?;
            }
            let t = c.peek();
            c.pos += 1;
            s.push(
                c.text(t)
                    .parse::<u32>()
                    .map_err(|_| format!("bad {what} size"))?,
            );
        }
        c.pos += 1;
        Ok(s)
    };
    let groups = axes(&mut c, "grid")?;
    let block = axes(&mut c, "block")?;
    let grid = weft_ir::KernelGrid::new(&groups, &block)?;
    let call_end = c.peek().start;
    let call = spec[..call_end].trim_end().to_string();
    let rest = spec[c.peek().start..].trim();
    let fails = rest
        .strip_prefix("fails")
        .map(|m| m.trim().trim_matches('"').to_string());
    let buffers: Vec<usize> = p
        .params
        .iter()
        .enumerate()
        .filter(|(_, x)| x.kind == ParamKind::Buffer)
        .map(|(i, _)| i)
        .collect();
    let run = |b: Backend| b.run_kernel(m, &p.name, &args, &grid);
    let interp_got = run(Backend::Interp);
    let show = |got: &Result<Vec<HostArray>, String>| match got {
        Ok(a) => format!(
            "== {}",
            a.iter().map(fmt_array).collect::<Vec<_>>().join(", ")
        ),
        Err(e) => format!("fails \"{e}\""),
    };
    if let Some(want) = fails {
        return Ok(RunResult {
            call,
            expected: format!("fails \"{want}\""),
            ok: matches!(&interp_got, Err(e) if e.contains(&want)),
            actual: show(&interp_got),
            backend_failures: Vec::new(),
        });
    }
    c.expect(b'=')?;
    c.expect(b'=')?;
    let mut expected: Vec<(Vec<usize>, Vec<u64>)> = Vec::new();
    for (k, &i) in buffers.iter().enumerate() {
        if k > 0 {
            c.expect(b',')?;
        }
        let elem = p.ty(p.params[i].value).array_parts().expect("buffer").1;
        expected.push(c.array(elem, 1)?);
    }
    if c.peek().kind != TokKind::Eof {
        return Err(format!(
            "unexpected `{}` after the results",
            &spec[c.peek().start..]
        ));
    }
    let matches = |got: &Result<Vec<HostArray>, String>| match got {
        Ok(a) => a
            .iter()
            .zip(&expected)
            .all(|(a, (shape, lanes))| &a.shape == shape && same_bits(a.elem, &a.data, lanes)),
        Err(_) => false,
    };
    let ok = matches(&interp_got);
    let mut backend_failures = Vec::new();
    for backend in active_backends().into_iter().filter(|_| backends) {
        let got = run(backend);
        if !matches(&got) {
            backend_failures.push(format!("{}: got {}", backend.name(), show(&got)));
        }
    }
    let expected = spec[spec.find("==").unwrap_or(0)..].trim().to_string();
    Ok(RunResult {
        call,
        expected,
        actual: show(&interp_got),
        ok,
        backend_failures,
    })
}

/// A kernel run line's argument for one parameter.
#[derive(Clone, Debug)]
pub enum KernelArgSpec {
    /// A uniform value.
    Value(Const),
    /// A read-only array.
    Array(HostArray),
    /// A buffer's contents before the launch.
    Buffer(HostArray),
}

/// Runs kernel `name` of `m` over `grid` on `backend`, with fresh copies of the buffers
/// in `args`; returns the buffers' contents afterwards, in parameter order.
pub fn run_kernel_on(
    backend: Backend,
    m: &Module,
    name: &str,
    args: &[KernelArgSpec],
    grid: &weft_ir::KernelGrid,
) -> Result<Vec<HostArray>, String> {
    backend.run_kernel(m, name, args, grid)
}

/// What a run produced: one element's outputs, or whole output arrays.
enum Got {
    Element(Vec<Const>),
    Arrays(Vec<HostArray>),
}

impl Got {
    fn matches(&self, k: usize, ty: Type, shape: Option<&[usize]>, lanes: &[u64]) -> bool {
        match self {
            Got::Element(v) => shape.is_none() && same_bits(ty, v[k].lane_bits(), lanes),
            Got::Arrays(a) => {
                shape == Some(a[k].shape.as_slice()) && same_bits(ty, &a[k].data, lanes)
            }
        }
    }

    fn show(&self) -> String {
        match self {
            Got::Element(v) => v.iter().map(fmt_value).collect::<Vec<_>>().join(", "),
            Got::Arrays(a) => a.iter().map(fmt_array).collect::<Vec<_>>().join(", "),
        }
    }
}

/// A backend a run line is checked on: the interpreter (the oracle), Cranelift or LLVM on the
/// CPU device, or CUDA (`WEFT_CUDA_DEVICE`, default 0; only when named in
/// `WEFT_FILETEST_BACKENDS`).
pub use weft_runtime::Backend;
use weft_runtime::Device;

/// The compiled backends every `test interpret` run line also runs on: the CPU ones
/// (Cranelift, LLVM), or those named in `WEFT_FILETEST_BACKENDS` (comma-separated, e.g.
/// `cranelift,llvm,cuda`; `none` for none). `cuda` runs only when named.
pub fn compiled_backends() -> Vec<Backend> {
    match std::env::var("WEFT_FILETEST_BACKENDS") {
        Ok(v) => v
            .split(',')
            .filter_map(|b| b.trim().parse().ok())
            .filter(|b: &Backend| b.is_compiled())
            .collect(),
        Err(_) => vec![Backend::Cranelift, Backend::Llvm],
    }
}

/// [`compiled_backends`] without `cuda` when no CUDA device can be opened (each file then
/// reports that as one failure instead of one per run line).
pub fn active_backends() -> Vec<Backend> {
    let mut b = compiled_backends();
    if b.contains(&Backend::Cuda) && cuda_device().is_err() {
        b.retain(|&x| x != Backend::Cuda);
    }
    b
}

/// The process-wide device of compiled backend `b`, opened on first use through
/// [`weft_runtime::Device::open`]; `cuda` on ordinal `WEFT_CUDA_DEVICE` (default 0).
///
/// # Errors
/// Why there is none, starting "cuda requested but no CUDA driver" when libcuda is missing.
pub fn device(b: Backend) -> Result<&'static Device, String> {
    use std::sync::OnceLock;
    static DEVS: [OnceLock<Result<Device, String>>; Backend::ALL.len()] =
        [const { OnceLock::new() }; Backend::ALL.len()];
    DEVS[b as usize]
        .get_or_init(|| open_device(b))
        .as_ref()
        .map_err(Clone::clone)
}

fn open_device(b: Backend) -> Result<Device, String> {
    use weft_runtime::{CudaError, DeviceOptions};
    let mut opts = DeviceOptions::default();
    if b == Backend::Cuda {
        opts.ordinal = match std::env::var("WEFT_CUDA_DEVICE") {
            Ok(v) => v.trim().parse::<usize>().map_err(|_| {
                format!("cuda requested but WEFT_CUDA_DEVICE={v:?} is not a device ordinal")
            })?,
            Err(_) => 0,
        };
        match weft_runtime::cuda_driver_status() {
            Ok(()) => {}
            Err(e @ CudaError::NoDriver) => {
                return Err(format!("cuda requested but no CUDA driver: {e}"))
            }
            Err(e) => return Err(format!("cuda requested but the CUDA driver failed: {e}")),
        }
    }
    Device::open(b, &opts).map_err(|e| match b {
        Backend::Cuda => format!(
            "cuda requested but CUDA device {} could not be opened: {e}",
            opts.ordinal
        ),
        _ => format!("{b}: {e}"),
    })
}

/// The process-wide CUDA device the `cuda` backend runs on ([`device`]).
///
/// # Errors
/// As [`device`].
pub fn cuda_device() -> Result<&'static weft_runtime::CudaDevice, String> {
    match device(Backend::Cuda)? {
        Device::Cuda(d) => Ok(d),
        _ => Err("the cuda backend opened no CUDA device".into()),
    }
}

/// The shared CPU device that compiles with LLVM ([`device`]).
///
/// # Errors
/// As [`device`] (never, for a CPU device).
pub fn llvm_device() -> Result<&'static weft_runtime::CpuDevice, String> {
    match device(Backend::Llvm)? {
        Device::Cpu(d) => Ok(d),
        _ => Err("the llvm backend opened no CPU device".into()),
    }
}

/// Running a run line's program on a backend.
trait RunLine {
    /// Runs kernel `name` with `args` over `grid`; returns the buffers after the launch.
    fn run_kernel(
        self,
        m: &Module,
        name: &str,
        args: &[KernelArgSpec],
        grid: &weft_ir::KernelGrid,
    ) -> Result<Vec<HostArray>, String>;

    /// Runs program `pname` on one element (`elems`) or applied over arrays (`apply`).
    #[allow(clippy::too_many_arguments)]
    fn run(
        self,
        m: &Module,
        pname: &str,
        elems: &[Arg],
        apply: &[Option<Input>],
        is_apply: bool,
        launch: Option<&[usize]>,
        fuel: Option<u64>,
    ) -> Result<Got, String>;
}

impl RunLine for Backend {
    fn run_kernel(
        self,
        m: &Module,
        name: &str,
        args: &[KernelArgSpec],
        grid: &weft_ir::KernelGrid,
    ) -> Result<Vec<HostArray>, String> {
        let mut owned: Vec<KernelArgSpec> = args.to_vec();
        let mut ka: Vec<KernelArg> = owned
            .iter_mut()
            .map(|a| match a {
                KernelArgSpec::Value(c) => KernelArg::Value(*c),
                KernelArgSpec::Array(h) => KernelArg::Array(h),
                KernelArgSpec::Buffer(h) => KernelArg::Buffer(h),
            })
            .collect();
        match self {
            Backend::Interp => Interpreter::new(m)
                .run_kernel(name, &mut ka, grid)
                .map_err(|e| e.to_string())?,
            _ => device(self)?
                .run_kernel(m, name, &mut ka, grid)
                .map_err(|e| e.to_string())?,
        }
        drop(ka);
        Ok(owned
            .into_iter()
            .filter_map(|a| match a {
                KernelArgSpec::Buffer(h) => Some(h),
                _ => None,
            })
            .collect())
    }

    #[allow(clippy::too_many_arguments)]
    fn run(
        self,
        m: &Module,
        pname: &str,
        elems: &[Arg],
        apply: &[Option<Input>],
        is_apply: bool,
        launch: Option<&[usize]>,
        fuel: Option<u64>,
    ) -> Result<Got, String> {
        if is_apply && apply.iter().any(Option::is_none) {
            return Err(
                "when applying over arrays, every varying input must be an array literal".into(),
            );
        }
        match self {
            Backend::Interp => {
                let mut interp = Interpreter::new(m);
                if let Some(f) = fuel {
                    interp.fuel = f;
                }
                if is_apply {
                    let ins: Vec<Input> = apply.iter().flatten().cloned().collect();
                    interp
                        .apply(pname, &ins, launch)
                        .map(Got::Arrays)
                        .map_err(|e| e.to_string())
                } else {
                    interp
                        .run_element(pname, elems, &[0], &[1])
                        .map(Got::Element)
                        .map_err(|e| e.to_string())
                }
            }
            Backend::Cranelift | Backend::Llvm | Backend::Cuda | Backend::Auto => {
                let device_apply = |ins: &[Input], shape: Option<&[usize]>| {
                    device(self)?
                        .apply(m, pname, ins, shape)
                        .map_err(|e| e.to_string())
                };
                if is_apply {
                    let ins: Vec<Input> = apply.iter().flatten().cloned().collect();
                    return device_apply(&ins, launch).map(Got::Arrays);
                }
                // One element: a launch of shape [1].
                let ins: Vec<Input> = elems
                    .iter()
                    .zip(apply)
                    .map(|(e, a)| match (e, a) {
                        (_, Some(i)) => i.clone(),
                        (Arg::Value(c), None) => Input::Array(Arc::new(HostArray {
                            elem: c.ty,
                            shape: vec![1],
                            data: c.lane_bits().to_vec(),
                        })),
                        (Arg::Array(a), None) => Input::Array(a.clone()),
                    })
                    .collect();
                let has_varying = elems
                    .iter()
                    .zip(apply)
                    .any(|(e, a)| matches!((e, a), (Arg::Value(_), None)));
                let shape: Option<&[usize]> = if has_varying { None } else { Some(&[1]) };
                device_apply(&ins, shape)
                    .map(|outs| Got::Element(outs.iter().map(|a| a.get(0)).collect()))
            }
        }
    }
}
