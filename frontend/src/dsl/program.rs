//! [`Program`]: a recorded (or parsed) program with the module of the programs it calls and
//! the links of its uniform inputs to host [`Uniform`]s; recording
//! ([`Program::record`], RapidMind's `BEGIN … END`), the program algebra of DESIGN §4
//! (Sh's "Shader Algebra", SIGGRAPH 2004; RapidMind's "partial evaluation and the program
//! algebra") on whole programs, and calls of programs as subroutines.

use super::interface::InArray;
use super::record::{self, Raw, Recorder, Repr, Top};
use super::uniform::{captured_param, HostCell, Uniform};
use super::value::{Value, ValueType};
use crate::error::{Error, Result};
use crate::scalar::{Elem, Scalar};
use std::fmt;
use std::panic::Location;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use weft_ir::interp::{Arg, Interpreter};
use weft_ir::{algebra, passes, Const, HostArray, Imm, Module, Opcode, ParamKind, Type, ValueDef};

static NEXT_PROGRAM: AtomicUsize = AtomicUsize::new(0);

/// A program of the DSL: the IR module holding it and the programs it calls, plus the links
/// of its uniform inputs to host [`Uniform`] cells (DESIGN §4 loose binding). Cheap to
/// clone (shared, immutable); `Send + Sync`. Every algebra operation returns a new
/// `Program`.
#[derive(Clone)]
pub struct Program {
    inner: Arc<Inner>,
}

#[derive(Clone)]
struct Inner {
    /// Shared unchanged with the devices, which find their prepared programs by its identity.
    module: Arc<Module>,
    main: usize,
    links: Vec<Link>,
}

/// Parameter `param` of the main program reads host cell `cell`.
#[derive(Clone)]
struct Link {
    param: usize,
    cell: Arc<dyn HostCell>,
}

/// What a recording closure may return: `()`, or a `Result<()>` so that `?` can be used
/// inside (an `Err` makes [`Program::record`] return it).
pub trait RecordResult {
    /// The closure's outcome.
    fn into_result(self) -> Result<()>;
}

impl RecordResult for () {
    fn into_result(self) -> Result<()> {
        Ok(())
    }
}

impl RecordResult for Result<()> {
    fn into_result(self) -> Result<()> {
        self
    }
}

pub(crate) fn is_ident(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
}

impl Program {
    /// Records a program (RapidMind retained mode): runs `f` with a recording context on
    /// this thread, in which [`In`](super::In)/[`Out`](super::Out)/… declare the interface,
    /// operations on [`Value`]s append IR, and [`if_`](super::if_)/[`for_`](super::for_)/…
    /// record control flow. Recordings nest (recording inside `f` records another program).
    /// The program is named `p{n}` from a process-wide counter.
    ///
    /// Errors: the first misuse recorded (an [`Error::Record`] naming the user's line); an
    /// `Out` never assigned or assigned on some paths only (at the `Out` line); the program
    /// failing verification ([`Error::Invalid`] with the diagnostics at the Rust lines);
    /// `Err` returned by `f`.
    #[track_caller]
    pub fn record<R: RecordResult>(f: impl FnOnce() -> R) -> Result<Program> {
        let n = NEXT_PROGRAM.fetch_add(1, Ordering::Relaxed);
        record_as(format!("p{n}"), f, Location::caller())
    }

    /// [`Program::record`] with the program named `name` (an identifier `[A-Za-z0-9_.]+`;
    /// names must be unique in a module: a program calling another of the same name, or two
    /// different called programs of one name, is an error).
    #[track_caller]
    pub fn record_named<R: RecordResult>(name: &str, f: impl FnOnce() -> R) -> Result<Program> {
        let loc = Location::caller();
        if !is_ident(name) {
            return Err(Error::Record {
                message: format!("program name `{name}` is not an identifier ([A-Za-z0-9_.]+)"),
                location: loc,
            });
        }
        record_as(name.to_string(), f, loc)
    }

    /// The module: the programs this one calls (transitively), then this one.
    pub fn module(&self) -> &Module {
        &self.inner.module
    }

    /// The module behind its `Arc` (what launches pass to the devices).
    pub(crate) fn module_arc(&self) -> &Arc<Module> {
        &self.inner.module
    }

    /// The program's name (without `@`).
    pub fn name(&self) -> &str {
        &self.ir().name
    }

    /// The main program's IR.
    pub fn ir(&self) -> &weft_ir::Program {
        &self.inner.module.programs[self.inner.main]
    }

    /// The module as IR text (`.weft`; parses back identically).
    pub fn text(&self) -> String {
        weft_ir::print_module(&self.inner.module)
    }

    /// Wraps program `name` of module `m` (verified first). No uniform is linked to a host
    /// cell. Errors: no such program ([`Error::Argument`]); the module does not verify
    /// ([`Error::Invalid`]).
    pub fn from_module(m: Module, name: &str) -> Result<Program> {
        weft_ir::verify_module(&m).map_err(Error::invalid)?;
        let main = m.position(name).ok_or_else(|| {
            let names: Vec<&str> = m.programs.iter().map(|p| p.name.as_str()).collect();
            Error::argument(format!(
                "no program @{name} in the module (it has: {})",
                names.join(", ")
            ))
        })?;
        Ok(Program {
            inner: Arc::new(Inner {
                module: Arc::new(m),
                main,
                links: Vec::new(),
            }),
        })
    }

    /// Parses IR text (docs/ir.md) and wraps its program `name`. Errors: parse or
    /// verification errors rendered with `file:line:col` and a snippet (the file shown as
    /// `<text>`); no such program.
    pub fn parse(text: &str, name: &str) -> Result<Program> {
        let m = weft_ir::parse_module(text).map_err(|e| Error::invalid_in(e, "<text>", text))?;
        weft_ir::verify_module(&m).map_err(|e| Error::invalid_in(e, "<text>", text))?;
        Program::from_module(m, name)
    }

    /// The parameter indices the user supplies at apply, in order: every parameter not
    /// linked to a host [`Uniform`].
    pub fn open_inputs(&self) -> Vec<usize> {
        (0..self.ir().params.len())
            .filter(|i| !self.inner.links.iter().any(|l| l.param == *i))
            .collect()
    }

    /// Whether a map program has a varying input (its launch shape then comes from the
    /// arguments); true for kernels, which take their grid at launch.
    pub(crate) fn has_varying_input(&self) -> bool {
        let p = self.ir();
        p.kind == weft_ir::ProgramKind::Kernel
            || p.params
                .iter()
                .any(|q| q.kind == weft_ir::ParamKind::Varying)
    }

    /// Whether any uniform input is linked to a host [`Uniform`].
    pub(crate) fn has_captured_uniforms(&self) -> bool {
        !self.inner.links.is_empty()
    }

    /// For each uniform input linked to a host [`Uniform`]: its parameter index and the
    /// cell's *current* value (read now, so [`Uniform::set`] is seen by the next call).
    pub fn captured_uniforms(&self) -> Vec<(usize, Const)> {
        self.inner
            .links
            .iter()
            .map(|l| (l.param, l.cell.current()))
            .collect()
    }

    // ---- the program algebra (DESIGN §4) ----

    /// A program with main program `main` built from `sources` (their callees are merged:
    /// one program per name), whose uniform links are those of `sources` whose parameter
    /// (by name) is still a uniform input of `main`.
    fn derive(&self, main: weft_ir::Program, sources: &[&Program]) -> Result<Program> {
        let mut module = Module::new();
        for s in sources {
            for (i, q) in s.module().programs.iter().enumerate() {
                if i == s.inner.main {
                    continue;
                }
                add_program(&mut module, q)?;
            }
        }
        if module.get(&main.name).is_some() {
            return Err(Error::argument(format!(
                "the result @{} has the name of a program it calls",
                main.name
            )));
        }
        let links = remap_links(&main, sources)?;
        module.programs.push(main);
        weft_ir::verify_module(&module).map_err(Error::invalid)?;
        let main = module.programs.len() - 1;
        Ok(Program {
            inner: Arc::new(Inner {
                module: Arc::new(module),
                main,
                links,
            }),
        })
    }

    /// Tight binding (DESIGN §4): input `input` (a name, with or without `%`) is the
    /// constant `value` from now on and disappears from the inputs; the optimizer folds it.
    /// `value` is a host scalar, `[S; N]`, an immediate [`Value`] or a [`Const`].
    /// Errors: no such input, an array input, a type mismatch ([`Error::Algebra`]).
    pub fn bind(&self, input: &str, value: impl IntoConst) -> Result<Program> {
        let c = value.into_const()?;
        let r = algebra::bind(self.ir(), input, &c)?;
        self.derive(r, &[self])
    }

    /// This program with the inputs linked to host [`Uniform`](super::Uniform)s bound
    /// tightly to the uniforms' current values (DESIGN §4): what collectives inline into
    /// their generated programs (`count`, `reduce`), so that a predicate or combiner reading
    /// a uniform sees the value it has at the call, as an apply's program does. The program
    /// itself when it has no such input.
    ///
    /// # Errors
    /// As [`Program::bind`].
    pub fn with_current_uniforms(&self) -> Result<Program> {
        let caps = self.captured_uniforms();
        if caps.is_empty() {
            return Ok(self.clone());
        }
        let mut ir = self.ir().clone();
        for (i, c) in caps {
            let name = self.ir().param_name(i).to_string();
            ir = algebra::bind(&ir, &name, &c)?;
        }
        self.derive(ir, &[self])
    }

    /// Tight binding of an array input to known contents (DESIGN §4, `algebra::bind_array`):
    /// reads at constant coordinates fold to constants. Errors as `algebra::bind_array`.
    pub fn bind_array(&self, input: &str, value: &HostArray) -> Result<Program> {
        let r = algebra::bind_array(self.ir(), input, value)?;
        self.derive(r, &[self])
    }

    /// Loose binding (DESIGN §4): input `input` becomes a uniform input linked to host cell
    /// `u` (a varying input is turned into a uniform; an open uniform input is linked as it
    /// is). Errors: no such input, an array input, `u`'s type differs from the input's.
    pub fn bind_uniform<E: Elem>(&self, input: &str, u: &Uniform<E>) -> Result<Program> {
        let p = self.ir();
        let name = input.strip_prefix('%').unwrap_or(input);
        let i = p.param_index(name).ok_or_else(|| {
            Error::argument(format!("bind_uniform: @{} has no input `{name}`", p.name))
        })?;
        let ty = p.ty(p.params[i].value);
        if ty != E::ir_type() {
            return Err(Error::argument(format!(
                "bind_uniform: input {i} `{name}` of @{} is {ty}, but the uniform `{}` is {}",
                p.name,
                u.name(),
                E::ir_type()
            )));
        }
        let r = match p.params[i].kind {
            ParamKind::Uniform => p.clone(),
            _ => algebra::bind_uniform(p, input)?,
        };
        let out = self.derive(r, &[self])?;
        let mut inner = Arc::unwrap_or_clone(out.inner);
        inner.links.retain(|l| l.param != i);
        inner.links.push(Link {
            param: i,
            cell: u.cell(),
        });
        inner.links.sort_by_key(|l| l.param);
        Ok(Program {
            inner: Arc::new(inner),
        })
    }

    /// Unbinding (Sh's `replaceUniform`): uniform input `input` becomes a varying input
    /// (its host link, if any, is dropped). Errors: no such input, not a uniform.
    pub fn unbind(&self, input: &str) -> Result<Program> {
        let r = algebra::unbind(self.ir(), input)?;
        self.derive(r, &[self])
    }

    /// Composition `self << q` (DESIGN §4): `q`'s outputs feed this program's first varying
    /// inputs in order. Uniform inputs of one name are shared; two different host uniforms of
    /// one name, or a name linked in one program and open in the other, are an error.
    pub fn compose(&self, q: &Program) -> Result<Program> {
        let r = algebra::compose(self.ir(), q.ir())?;
        self.derive(r, &[self, q])
    }

    /// Bundling (DESIGN §4): the programs side by side, inputs and outputs concatenated.
    /// Errors: an empty list; clashing uniform inputs (see [`Program::compose`]).
    pub fn bundle(programs: &[&Program]) -> Result<Program> {
        let first = programs
            .first()
            .ok_or_else(|| Error::argument("bundle: no programs"))?;
        let irs: Vec<&weft_ir::Program> = programs.iter().map(|p| p.ir()).collect();
        let r = algebra::bundle(&irs)?;
        first.derive(r, programs)
    }

    /// Specialization (DESIGN §4): only outputs `outputs` (names or positions), in that
    /// order; dead code and unused inputs are removed.
    pub fn keep(&self, outputs: &[&str]) -> Result<Program> {
        let r = algebra::keep(self.ir(), outputs)?;
        self.derive(r, &[self])
    }

    /// Specialization (DESIGN §4): without outputs `outputs` (names or positions).
    pub fn drop_outputs(&self, outputs: &[&str]) -> Result<Program> {
        let r = algebra::drop_outputs(self.ir(), outputs)?;
        self.derive(r, &[self])
    }

    /// Interface adaptation (DESIGN §4): varying input `k` of the result is this program's
    /// varying input `order[k]`.
    pub fn swizzle_inputs(&self, order: &[usize]) -> Result<Program> {
        let r = algebra::swizzle_inputs(self.ir(), order)?;
        self.derive(r, &[self])
    }

    /// The module optimized by the default pipeline (`passes::DEFAULT_PIPELINE`: inline,
    /// fold, cse, licm, dce). Links are kept for the uniform inputs that remain.
    pub fn optimize(&self) -> Result<Program> {
        let mut m = self.module().clone();
        passes::run_pipeline(&mut m, passes::DEFAULT_PIPELINE)
            .map_err(|e| Error::invalid_message(e.to_string()))?;
        let main = m.position(self.name()).ok_or_else(|| {
            Error::invalid_message(format!("@{} disappeared in optimization", self.name()))
        })?;
        let links = remap_links(&m.programs[main], &[self])?;
        Ok(Program {
            inner: Arc::new(Inner {
                module: Arc::new(m),
                main,
                links,
            }),
        })
    }

    // ---- calls ----

    /// Calls this program as a subroutine with `args` for its [open
    /// inputs](Program::open_inputs) (values, or [`InArray`]s for array inputs); its
    /// uniforms linked to host cells are passed on by linking the caller to the same cells.
    /// Returns the outputs, to be converted back with [`AnyValue::into_value`].
    ///
    /// While recording, this records a `call` (this program and the programs it calls are
    /// added to the caller's module once); in immediate mode the interpreter runs it at once
    /// (as one element of a 1-D launch of one element).
    ///
    /// Errors (naming the caller's line): wrong number of arguments; an argument of the
    /// wrong type or kind; a call of a program by itself (same name); two different
    /// programs of one name among the callees; an array argument in immediate mode.
    #[track_caller]
    pub fn call(&self, args: &[AnyValue]) -> Result<Vec<AnyValue>> {
        let loc = Location::caller();
        let err = |m: String| Error::Record {
            message: m,
            location: loc,
        };
        let p = self.ir();
        let open = self.open_inputs();
        if args.len() != open.len() {
            let ins: Vec<String> = open.iter().map(|&i| describe_param(p, i)).collect();
            return Err(err(format!(
                "@{} takes {} argument(s) ({}), got {}",
                p.name,
                open.len(),
                ins.join(", "),
                args.len()
            )));
        }
        for (k, (&i, a)) in open.iter().zip(args).enumerate() {
            let par = p.params[i];
            let ty = p.ty(par.value);
            let ok = match &a.kind {
                AnyKind::Array { ty: t, .. } => par.kind == ParamKind::Array && *t == ty,
                AnyKind::Value { ty: t, .. } => par.kind != ParamKind::Array && *t == ty,
            };
            if !ok {
                return Err(err(format!(
                    "argument {k} of @{}: input `{}` needs {}, got {}",
                    p.name,
                    describe_param(p, i),
                    ty,
                    a.describe()
                )));
            }
        }
        let Some(mut rec) = Top::take() else {
            return self.call_immediate(args, loc);
        };
        if self.module().get(&rec.name).is_some() {
            return Err(err(format!(
                "@{} cannot call @{}: a program named @{} is among the callees (recursion \
                 or a name clash)",
                rec.name, p.name, rec.name
            )));
        }
        for q in &self.module().programs {
            match rec.callees.iter().find(|c| c.name == q.name) {
                Some(c) => {
                    if weft_ir::print_program(c) != weft_ir::print_program(q) {
                        return Err(err(format!(
                            "two different programs named @{} are called by @{}",
                            q.name, rec.name
                        )));
                    }
                }
                None => rec.callees.push(q.clone()),
            }
        }
        let mut vals = Vec::with_capacity(p.params.len());
        let mut it = args.iter();
        for i in 0..p.params.len() {
            if let Some(l) = self.inner.links.iter().find(|l| l.param == i) {
                vals.push(captured_param(&mut rec, l.cell.clone(), loc)?);
                continue;
            }
            let Some(a) = it.next() else { break };
            match &a.kind {
                AnyKind::Value { raw, .. } => vals.push(value_of_at(&mut rec, raw, loc)?),
                AnyKind::Array { ctx, value, .. } => {
                    if *ctx != rec.id {
                        return Err(err(format!(
                            "the array passed to @{} is not an input of @{}",
                            p.name, rec.name
                        )));
                    }
                    vals.push(*value);
                }
            }
        }
        let outs = rec.b().call(&stub(p), &vals);
        Ok(outs
            .into_iter()
            .zip(&p.outputs)
            .map(|(v, o)| AnyValue {
                kind: AnyKind::Value {
                    raw: rec.new_raw(v),
                    ty: o.ty,
                },
            })
            .collect())
    }

    fn call_immediate(
        &self,
        args: &[AnyValue],
        loc: &'static Location<'static>,
    ) -> Result<Vec<AnyValue>> {
        let p = self.ir();
        let mut iargs = Vec::with_capacity(p.params.len());
        let mut it = args.iter();
        for i in 0..p.params.len() {
            if let Some(l) = self.inner.links.iter().find(|l| l.param == i) {
                iargs.push(Arg::Value(l.cell.current()));
                continue;
            }
            let Some(a) = it.next() else { break };
            match &a.kind {
                AnyKind::Value { raw, .. } => iargs.push(Arg::Value(raw.to_const()?)),
                AnyKind::Array { .. } => {
                    return Err(Error::Record {
                        message: format!(
                            "@{} is called outside recording with an array argument",
                            p.name
                        ),
                        location: loc,
                    })
                }
            }
        }
        let outs = Interpreter::new(self.module()).run_element(&p.name, &iargs, &[0], &[1])?;
        Ok(outs
            .into_iter()
            .map(|c| AnyValue {
                kind: AnyKind::Value {
                    raw: Raw::imm(c),
                    ty: c.ty,
                },
            })
            .collect())
    }
}

#[track_caller]
fn value_of_at(
    rec: &mut Recorder,
    raw: &Raw,
    loc: &'static Location<'static>,
) -> Result<weft_ir::Value> {
    rec.value_of(raw).map_err(|e| match e {
        Error::Record { message, .. } => Error::Record {
            message,
            location: loc,
        },
        e => e,
    })
}

/// `%x: f32`, `uniform %dt: f32`, `%a: array<1 x f32, clamp>`.
fn describe_param(p: &weft_ir::Program, i: usize) -> String {
    let par = p.params[i];
    let kind = if par.kind == ParamKind::Uniform {
        "uniform "
    } else {
        ""
    };
    format!("{kind}%{}: {}", p.param_name(i), p.ty(par.value))
}

/// Adds `q` to `m` unless a program of its name is there (same text: fine; else an error).
fn add_program(m: &mut Module, q: &weft_ir::Program) -> Result<()> {
    match m.get(&q.name) {
        Some(c) if weft_ir::print_program(c) != weft_ir::print_program(q) => Err(Error::argument(
            format!("two different programs named @{} meet", q.name),
        )),
        Some(_) => Ok(()),
        None => {
            m.programs.push(q.clone());
            Ok(())
        }
    }
}

/// The links of `sources` that survive in `main`: by parameter name, to a uniform input.
fn remap_links(main: &weft_ir::Program, sources: &[&Program]) -> Result<Vec<Link>> {
    let mut out: Vec<Link> = Vec::new();
    for s in sources {
        for l in &s.inner.links {
            let name = s.ir().param_name(l.param);
            let Some(i) = main.param_index(name) else {
                continue;
            };
            if main.params[i].kind != ParamKind::Uniform {
                continue;
            }
            match out.iter().find(|x| x.param == i) {
                Some(x) if x.cell.id() != l.cell.id() => {
                    return Err(Error::argument(format!(
                        "uniform `{name}` of @{} is linked to two different host uniforms",
                        main.name
                    )))
                }
                Some(_) => {}
                None => out.push(Link {
                    param: i,
                    cell: l.cell.clone(),
                }),
            }
        }
    }
    if sources.len() > 1 {
        for s in sources {
            let p = s.ir();
            for (j, par) in p.params.iter().enumerate() {
                if par.kind != ParamKind::Uniform || s.inner.links.iter().any(|l| l.param == j) {
                    continue;
                }
                if let Some(i) = main.param_index(p.param_name(j)) {
                    if out.iter().any(|l| l.param == i) {
                        return Err(Error::argument(format!(
                            "uniform `{}` is open in @{} but linked to a host uniform in \
                             another program of @{}",
                            p.param_name(j),
                            p.name,
                            main.name
                        )));
                    }
                }
            }
        }
    }
    out.sort_by_key(|l| l.param);
    Ok(out)
}

/// A program with `p`'s name and signature whose body returns zeros: what the builder
/// checks a `call` against (the real program replaces it when recording ends).
fn stub(p: &weft_ir::Program) -> weft_ir::Program {
    let mut s = weft_ir::Program::new(p.name.clone());
    for (i, par) in p.params.iter().enumerate() {
        s.add_param(par.kind, p.param_name(i), p.ty(par.value));
    }
    let body = s.body;
    let mut rets = Vec::new();
    for o in &p.outputs {
        let op = s.new_op(
            Opcode::Const,
            vec![],
            Imm::Const(Const::zero(o.ty)),
            &[o.ty],
            vec![],
        );
        s.append(body, op);
        rets.push(s.op(op).results[0]);
    }
    let r = s.new_op(Opcode::Return, rets, Imm::None, &[], vec![]);
    s.append(body, r);
    s.outputs = p.outputs.clone();
    s
}

fn record_as<R: RecordResult>(
    name: String,
    f: impl FnOnce() -> R,
    loc: &'static Location<'static>,
) -> Result<Program> {
    record_program(name, false, f, loc)
}

/// Records program `name` (a kernel when `kernel`) by running `f`.
pub(crate) fn record_program<R: RecordResult>(
    name: String,
    kernel: bool,
    f: impl FnOnce() -> R,
    loc: &'static Location<'static>,
) -> Result<Program> {
    let session = record::begin(name);
    if kernel {
        if let Some(mut rec) = Top::take() {
            rec.b().make_kernel();
        }
    }
    let r = f();
    let rec = session.end().ok_or_else(|| Error::Record {
        message: "internal error: the recording context was lost".into(),
        location: loc,
    })?;
    r.into_result()?;
    finish(*rec)
}

/// Ends a recording: outputs, the module with the real callees, verification, links.
fn finish(mut rec: Recorder) -> Result<Program> {
    if let Some(e) = rec.error.take() {
        return Err(e);
    }
    let mut b = rec
        .builder
        .take()
        .ok_or_else(|| Error::invalid_message("internal error: the builder was lost"))?;
    let mut unnamed = Vec::new();
    for (k, o) in rec.outs.iter().enumerate() {
        let what = match &o.name {
            Some(n) => format!("output {k} `{n}` of @{}", rec.name),
            None => format!("output {k} of @{}", rec.name),
        };
        if !o.assigned {
            return Err(Error::Record {
                message: format!("{what} is declared here but never assigned"),
                location: o.location,
            });
        }
        if !o.definite {
            return Err(Error::Record {
                message: format!(
                    "{what} is assigned on some paths only (in one arm of an if_, or only \
                     inside a loop): give it a value before the region or in both arms"
                ),
                location: o.location,
            });
        }
        let v = b.use_var(o.var);
        debug_assert_eq!(b.program().ty(v), o.ty);
        let name = o.name.clone().unwrap_or_else(|| format!("out{k}"));
        if o.name.is_none() {
            unnamed.push(k);
        }
        b.output(&name, v);
    }
    let mut links = Vec::new();
    for c in &rec.captured {
        if let ValueDef::Param(i) = b.program().value(c.param).def {
            links.push(Link {
                param: i as usize,
                cell: c.cell.clone(),
            });
        }
    }
    let mut m = b.finish_module().map_err(Error::invalid)?;
    let mut main = m.programs.len() - 1;
    for &k in &unnamed {
        m.programs[main].outputs[k].name = None;
    }
    for q in rec.callees {
        if q.name == rec.name {
            return Err(Error::invalid_message(format!(
                "@{} calls a program of its own name",
                rec.name
            )));
        }
        match m.position(&q.name) {
            Some(i) => m.programs[i] = q,
            None => {
                m.programs.insert(main, q);
                main += 1;
            }
        }
    }
    weft_ir::verify_module(&m).map_err(Error::invalid)?;
    Ok(Program {
        inner: Arc::new(Inner {
            module: Arc::new(m),
            main,
            links,
        }),
    })
}

impl fmt::Display for Program {
    /// The module as IR text ([`Program::text`]).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text())
    }
}

impl fmt::Debug for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Program")
            .field("name", &self.name())
            .field("links", &self.captured_uniforms())
            .finish_non_exhaustive()
    }
}

impl std::ops::Shl<&Program> for &Program {
    type Output = Result<Program>;
    /// `p << q`: [`Program::compose`] (Sh's and RapidMind's composition operator).
    fn shl(self, q: &Program) -> Result<Program> {
        self.compose(q)
    }
}

impl std::ops::Shl<Program> for Program {
    type Output = Result<Program>;
    /// `p << q`: [`Program::compose`].
    fn shl(self, q: Program) -> Result<Program> {
        self.compose(&q)
    }
}

impl std::ops::Shl<&Program> for Result<Program> {
    type Output = Result<Program>;
    /// Chained composition: `&p << &q << &r` is `(p << q) << r` (an error passes through).
    fn shl(self, r: &Program) -> Result<Program> {
        self?.compose(r)
    }
}

/// A value or array of any type: the arguments and results of [`Program::call`].
pub struct AnyValue {
    kind: AnyKind,
}

enum AnyKind {
    Value {
        raw: Raw,
        ty: Type,
    },
    Array {
        ctx: u64,
        value: weft_ir::Value,
        ty: Type,
    },
}

impl AnyValue {
    /// Its IR type (a scalar, tuple or array type).
    pub fn ty(&self) -> Type {
        match &self.kind {
            AnyKind::Value { ty, .. } | AnyKind::Array { ty, .. } => *ty,
        }
    }

    /// True for an array argument.
    pub fn is_array(&self) -> bool {
        matches!(self.kind, AnyKind::Array { .. })
    }

    fn describe(&self) -> String {
        match &self.kind {
            AnyKind::Value { ty, .. } => format!("a {ty} value"),
            AnyKind::Array { ty, .. } => format!("an array {ty}"),
        }
    }

    /// The typed value. Errors (at the caller's line): the value is not a `Value<T, N>`
    /// (the message gives both types).
    #[track_caller]
    pub fn into_value<T: Scalar, const N: usize>(self) -> Result<Value<T, N>> {
        let want = Value::<T, N>::ir_type();
        match self.kind {
            AnyKind::Value { raw, ty } if ty == want => Ok(Value::from_raw(raw)),
            _ => Err(Error::record(format!(
                "expected a {want} value, got {}",
                self.describe_kind()
            ))),
        }
    }

    fn describe_kind(&self) -> String {
        self.describe()
    }

    /// The host constant of an immediate value (errors as [`Value::to_const`]).
    #[track_caller]
    pub fn to_const(&self) -> Result<Const> {
        match &self.kind {
            AnyKind::Value { raw, .. } => raw.to_const(),
            AnyKind::Array { .. } => Err(Error::record("an array has no constant value")),
        }
    }
}

impl Clone for AnyValue {
    /// A copy: a value is copied as [`Value::clone`] copies it (assigning to one later does
    /// not change the other); an array argument is the same array.
    #[track_caller]
    fn clone(&self) -> AnyValue {
        let kind = match &self.kind {
            AnyKind::Value { raw, ty } => AnyKind::Value {
                raw: raw.clone(),
                ty: *ty,
            },
            AnyKind::Array { ctx, value, ty } => AnyKind::Array {
                ctx: *ctx,
                value: *value,
                ty: *ty,
            },
        };
        AnyValue { kind }
    }
}

impl fmt::Debug for AnyValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            AnyKind::Value { raw, .. } => match raw.repr() {
                Repr::Imm(c) => write!(f, "AnyValue({c})"),
                _ => write!(f, "AnyValue({})", self.describe()),
            },
            AnyKind::Array { .. } => write!(f, "AnyValue({})", self.describe()),
        }
    }
}

impl<T: Scalar, const N: usize> From<Value<T, N>> for AnyValue {
    fn from(v: Value<T, N>) -> AnyValue {
        AnyValue {
            kind: AnyKind::Value {
                raw: v.raw,
                ty: Value::<T, N>::ir_type(),
            },
        }
    }
}

impl<T: Scalar, const N: usize> From<&Value<T, N>> for AnyValue {
    /// A copy of the current value.
    #[track_caller]
    fn from(v: &Value<T, N>) -> AnyValue {
        AnyValue::from(v.clone())
    }
}

impl<const D: usize, V: ValueType> From<&InArray<D, V>> for AnyValue {
    fn from(a: &InArray<D, V>) -> AnyValue {
        let (ctx, value, ty) = a.handle();
        AnyValue {
            kind: AnyKind::Array { ctx, value, ty },
        }
    }
}

impl<T: Scalar, const N: usize> TryFrom<AnyValue> for Value<T, N> {
    type Error = Error;
    /// [`AnyValue::into_value`].
    #[track_caller]
    fn try_from(a: AnyValue) -> Result<Value<T, N>> {
        a.into_value()
    }
}

/// A host value for tight binding ([`Program::bind`]): a scalar, `[S; N]`, a [`Const`], or
/// an immediate [`Value`].
pub trait IntoConst {
    /// The constant. Errors: a recorded value (it has no host value).
    fn into_const(self) -> Result<Const>;
}

impl<E: Elem> IntoConst for E {
    fn into_const(self) -> Result<Const> {
        let bits: Vec<u64> = (0..E::LANES).map(|l| self.lane(l).to_bits()).collect();
        Ok(Const::from_lanes(E::ir_type(), &bits))
    }
}

impl IntoConst for Const {
    fn into_const(self) -> Result<Const> {
        Ok(self)
    }
}

impl<T: Scalar, const N: usize> IntoConst for Value<T, N> {
    #[track_caller]
    fn into_const(self) -> Result<Const> {
        self.to_const()
    }
}

impl<T: Scalar, const N: usize> IntoConst for &Value<T, N> {
    #[track_caller]
    fn into_const(self) -> Result<Const> {
        self.to_const()
    }
}
