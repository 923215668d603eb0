//! The verifier: type rules of every op, scoping of values across regions, region yields,
//! call signatures and parameter kinds. Reports every error found, each located.

use crate::diag::{Diagnostic, Errors};
use crate::opcode::{infer, Opcode, Rule};
use crate::printer::value_label;
use crate::program::{
    Imm, Loc, Module, Op, ParamKind, Program, ProgramKind, Region, Value, ValueDef,
};
use crate::types::Type;
use std::collections::HashMap;

/// Deepest region nesting a module may have: the parser stops there, and the verifier
/// rejects deeper built modules, so no module can overflow the stack of a recursive pass.
pub const MAX_DEPTH: usize = 200;

/// Verifies every program of a module and the call graph (no recursion).
pub fn verify_module(m: &Module) -> Result<(), Errors> {
    let mut errs = Vec::new();
    let mut names = HashMap::new();
    for p in &m.programs {
        if names.insert(p.name.as_str(), ()).is_some() {
            errs.push(at(
                p,
                p.loc,
                format!("program @{} is defined twice", p.name),
            ));
        }
        verify_into(m, p, &mut errs);
    }
    check_recursion(m, &mut errs);
    if errs.is_empty() {
        Ok(())
    } else {
        Err(Errors(errs))
    }
}

/// Verifies one program of `m` (calls are checked against `m`).
pub fn verify_program(m: &Module, p: &Program) -> Result<(), Errors> {
    let mut errs = Vec::new();
    verify_into(m, p, &mut errs);
    if errs.is_empty() {
        Ok(())
    } else {
        Err(Errors(errs))
    }
}

fn at(p: &Program, loc: Loc, msg: String) -> Diagnostic {
    let mut d = Diagnostic::new(loc, msg);
    d.program = Some(p.name.clone());
    d
}

struct V<'a> {
    m: &'a Module,
    p: &'a Program,
    visible: Vec<bool>,
    errs: &'a mut Vec<Diagnostic>,
}

fn verify_into(m: &Module, p: &Program, errs: &mut Vec<Diagnostic>) {
    let before = errs.len();
    for (i, par) in p.params.iter().enumerate() {
        let ty = p.ty(par.value);
        let ok = match par.kind {
            ParamKind::Array | ParamKind::Buffer => ty.is_array(),
            _ => !ty.is_array(),
        };
        if !ok {
            errs.push(at(
                p,
                p.value_loc(par.value),
                format!(
                    "parameter {} ({}) is {:?} but has type {ty}",
                    i,
                    value_label(p, par.value),
                    par.kind
                ),
            ));
        }
        if par.value.index() >= p.num_values()
            || p.value(par.value).def != ValueDef::Param(i as u32)
        {
            errs.push(at(p, p.loc, format!("parameter {i} is malformed")));
        }
    }
    for (i, o) in p.outputs.iter().enumerate() {
        if o.ty.is_array() {
            errs.push(at(p, p.loc, format!("output {i} has array type {}", o.ty)));
        }
    }
    let mut v = V {
        m,
        p,
        visible: vec![false; p.num_values()],
        errs,
    };
    for par in &p.params {
        if let Some(x) = v.visible.get_mut(par.value.index()) {
            *x = true;
        }
    }
    let outs: Vec<Type> = p.outputs.iter().map(|o| o.ty).collect();
    v.region(p.body, &outs, Opcode::Return, "program outputs", 0);
    let clean = v.errs.len() == before;
    kernel_rules(m, p, clean, v.errs);
}

/// The rules of kernel mode (DESIGN §2): kernel ops only in kernels; a kernel has no outputs
/// or varying parameters and never uses `index`/`shape`; `shared` sits at the top of the body
/// with constant positive sizes; stores and atomics write buffers or shared arrays; calls
/// reach map programs that do not use `index`/`shape`; and every `barrier` is reached by all
/// work-items of a group: no enclosing `if` condition, loop bound or loop condition varies
/// within a group (by [`crate::uniform::uniform_values`]). The first enclosing op whose
/// control varies is named in the error.
///
/// `clean` says the program passed the other rules; only then is the barrier rule checked
/// (its uniformity analysis needs well-formed ops).
fn kernel_rules(m: &Module, p: &Program, clean: bool, errs: &mut Vec<Diagnostic>) {
    let kernel = p.kind == ProgramKind::Kernel;
    if kernel {
        if !p.outputs.is_empty() {
            errs.push(at(p, p.loc, "a kernel has no outputs".into()));
        }
        for par in &p.params {
            if par.kind == ParamKind::Varying {
                errs.push(at(
                    p,
                    p.value_loc(par.value),
                    format!(
                        "kernel parameter {} is varying: kernel parameters are uniform, arrays or buffers",
                        value_label(p, par.value)
                    ),
                ));
            }
        }
    } else if let Some(par) = p.params.iter().find(|x| x.kind == ParamKind::Buffer) {
        errs.push(at(
            p,
            p.value_loc(par.value),
            format!(
                "only kernels take buffer parameters ({})",
                value_label(p, par.value)
            ),
        ));
    }
    let uni = if kernel && clean {
        Some(crate::uniform::uniform_values(m, p))
    } else {
        None
    };
    let mut shared_bytes = 0usize;
    kernel_region(m, p, p.body, uni.as_deref(), None, &mut shared_bytes, errs);
    if shared_bytes > MAX_SHARED_BYTES {
        errs.push(at(
            p,
            p.loc,
            format!(
                "the kernel's shared arrays take {shared_bytes} bytes; at most {MAX_SHARED_BYTES} are allowed"
            ),
        ));
    }
}

/// The most group-shared memory one kernel may declare, in bytes (CUDA's static limit).
pub const MAX_SHARED_BYTES: usize = 48 * 1024;

/// Walks region `r` for [`kernel_rules`]; `divergent` is the location of the innermost
/// enclosing control op whose control varies within a group.
fn kernel_region(
    m: &Module,
    p: &Program,
    r: Region,
    uni: Option<&[bool]>,
    divergent: Option<&'static str>,
    shared_bytes: &mut usize,
    errs: &mut Vec<Diagnostic>,
) {
    let kernel = p.kind == ProgramKind::Kernel;
    for &op in &p.region(r).ops {
        let d = p.op(op);
        let loc = p.op_loc(op);
        let mn = d.opcode.mnemonic();
        if d.opcode.is_kernel_only() && !kernel {
            errs.push(at(p, loc, format!("`{mn}` is only allowed in kernels")));
            continue;
        }
        match d.opcode {
            Opcode::Index | Opcode::Shape | Opcode::ReadOffset if kernel => errs.push(at(
                p,
                loc,
                format!("`{mn}` is not allowed in kernels: use local_id, group_id, local_size and num_groups"),
            )),
            Opcode::Call if kernel => {
                if let Imm::Callee(name) = &d.imm {
                    if let Some(c) = m.get(name) {
                        if c.kind == ProgramKind::Kernel {
                            errs.push(at(p, loc, format!("kernel @{name} cannot be called")));
                        } else if uses_launch(m, c) {
                            errs.push(at(
                                p,
                                loc,
                                format!("a kernel cannot call @{name}, which uses `index` or `shape`"),
                            ));
                        }
                    }
                }
            }
            Opcode::Call => {
                if let Imm::Callee(name) = &d.imm {
                    if m.get(name).is_some_and(|c| c.kind == ProgramKind::Kernel) {
                        errs.push(at(p, loc, format!("kernel @{name} cannot be called")));
                    }
                }
            }
            Opcode::Shared => {
                if r != p.body {
                    errs.push(at(
                        p,
                        loc,
                        "`shared` must be at the top level of the kernel body".into(),
                    ));
                }
                let mut elems = 1usize;
                for &a in &d.args {
                    let size = match p.value(a).def {
                        ValueDef::Result(o, _) if p.op(o).opcode == Opcode::Const => {
                            match &p.op(o).imm {
                                Imm::Const(c) => Some(c.lanes[0] as u32 as i32),
                                _ => None,
                            }
                        }
                        _ => None,
                    };
                    match size {
                        Some(n) if n > 0 => elems = elems.saturating_mul(n as usize),
                        Some(n) => errs.push(at(
                            p,
                            loc,
                            format!("`shared` sizes must be positive, got {n}"),
                        )),
                        None => errs.push(at(
                            p,
                            loc,
                            format!(
                                "`shared` sizes must be constants: {} is not defined by `const`",
                                value_label(p, a)
                            ),
                        )),
                    }
                }
                if let Some(&res) = d.results.first() {
                    if let Some((_, e, _)) = p.ty(res).array_parts() {
                        let bytes = e.elem_scalar().bytes() * e.lanes().map_or(1, |x| x.1 as usize);
                        *shared_bytes = shared_bytes.saturating_add(elems.saturating_mul(bytes));
                    }
                }
            }
            Opcode::Store
            | Opcode::AtomicAdd
            | Opcode::AtomicMin
            | Opcode::AtomicMax
            | Opcode::AtomicXchg
            | Opcode::AtomicCas => {
                let Some(&a) = d.args.first() else {
                    continue;
                };
                let writable = match p.value(a).def {
                    ValueDef::Param(i) => p.params[i as usize].kind == ParamKind::Buffer,
                    ValueDef::Result(o, _) => p.op(o).opcode == Opcode::Shared,
                    _ => false,
                };
                if !writable {
                    errs.push(at(
                        p,
                        loc,
                        format!(
                            "`{mn}` writes {}, which is read-only: write a `buffer` parameter or a `shared` array",
                            value_label(p, a)
                        ),
                    ));
                }
            }
            Opcode::Barrier => {
                if let Some(why) = divergent {
                    errs.push(at(
                        p,
                        loc,
                        format!("`barrier` inside a `{why}` whose control varies within a work-group: every work-item of a group must reach each barrier"),
                    ));
                }
            }
            _ => {}
        }
        if !d.regions.is_empty() {
            let control_uniform = match uni {
                None => true,
                Some(uni) => match d.opcode {
                    Opcode::If => uni[d.args[0].index()],
                    Opcode::For => d.args[..3].iter().all(|a| uni[a.index()]),
                    Opcode::While => yield_uniform(p, d.regions[0], uni),
                    _ => yield_uniform(p, d.regions[1], uni),
                },
            };
            let inner = if control_uniform {
                divergent
            } else {
                divergent.or(Some(mn))
            };
            for &rr in &d.regions {
                kernel_region(m, p, rr, uni, inner, shared_bytes, errs);
            }
        }
    }
}

/// True if the value region `r` yields first is uniform.
fn yield_uniform(p: &Program, r: Region, uni: &[bool]) -> bool {
    p.region(r)
        .ops
        .last()
        .and_then(|&o| p.op(o).args.first())
        .is_some_and(|a| uni[a.index()])
}

/// True if `p` or a program it calls uses `index`, `read_offset` or `shape` (which kernels
/// may not call).
pub fn uses_launch(m: &Module, p: &Program) -> bool {
    m.reaches_op(p, |o| o.reads_index() || o == Opcode::Shape)
}

impl V<'_> {
    fn err(&mut self, loc: Loc, msg: String) {
        self.errs.push(at(self.p, loc, msg));
    }

    /// Checks region `r`: its ops in scope order, ending in `term` yielding `yields`
    /// (`what` names those values in messages).
    fn region(&mut self, r: Region, yields: &[Type], term: Opcode, what: &str, depth: usize) {
        let p = self.p;
        if depth > MAX_DEPTH {
            self.err(
                p.loc,
                format!(
                    "regions nested more than {} deep (the lowerings recurse per level)",
                    MAX_DEPTH
                ),
            );
            return;
        }
        let mut defined_here: Vec<Value> = p.region(r).args.clone();
        for &a in &p.region(r).args {
            self.visible[a.index()] = true;
        }
        let ops = &p.region(r).ops;
        for (i, &op) in ops.iter().enumerate() {
            let d = p.op(op);
            let loc = p.op_loc(op);
            let last = i + 1 == ops.len();
            if d.opcode.is_terminator() && !last {
                self.err(
                    loc,
                    format!(
                        "`{}` must be the last op of its region",
                        d.opcode.mnemonic()
                    ),
                );
            }
            self.op(op, depth);
            if last && d.opcode.is_terminator() {
                if d.opcode != term {
                    self.err(
                        loc,
                        format!(
                            "this region must end with `{}`, not `{}`",
                            term.mnemonic(),
                            d.opcode.mnemonic()
                        ),
                    );
                } else if !d
                    .args
                    .iter()
                    .any(|&a| p.value(a).def == ValueDef::Undefined)
                {
                    self.check_types(loc, &d.args, yields, what);
                }
            }
            for &res in &d.results {
                self.visible[res.index()] = true;
                defined_here.push(res);
            }
        }
        let ends_ok = ops.last().is_some_and(|&o| p.op(o).opcode.is_terminator());
        if !ends_ok {
            let loc = ops.last().map_or(p.loc, |&o| p.op_loc(o));
            self.err(
                loc,
                format!("region does not end with `{}`", term.mnemonic()),
            );
        }
        for v in defined_here {
            self.visible[v.index()] = false;
        }
    }

    fn check_types(&mut self, loc: Loc, vals: &[Value], want: &[Type], what: &str) {
        let got: Vec<Type> = vals.iter().map(|&v| self.p.ty(v)).collect();
        if got != want {
            let show = |t: &[Type]| t.iter().map(Type::to_string).collect::<Vec<_>>().join(", ");
            self.err(
                loc,
                format!("{what}: expected ({}), got ({})", show(want), show(&got)),
            );
        }
    }

    fn op(&mut self, op: Op, depth: usize) {
        let p = self.p;
        let d = p.op(op);
        let loc = p.op_loc(op);
        let mn = d.opcode.mnemonic();
        for &a in &d.args {
            if a.index() >= p.num_values() {
                self.err(loc, format!("`{mn}` uses a value that does not exist"));
                return;
            }
            if !self.visible[a.index()] {
                let msg = match p.value(a).def {
                    ValueDef::Undefined => {
                        format!("`{mn}` uses undefined value {}", value_label(p, a))
                    }
                    _ => format!(
                        "`{mn}` uses {} before its definition or outside the region defining it",
                        value_label(p, a)
                    ),
                };
                self.err(loc, msg);
            }
        }
        if d.args
            .iter()
            .any(|&a| p.value(a).def == ValueDef::Undefined)
        {
            return; // its types are unknown; the undefined use is reported above
        }
        let args: Vec<Type> = d.args.iter().map(|&a| p.ty(a)).collect();
        let res: Vec<Type> = d.results.iter().map(|&r| p.ty(r)).collect();
        for (i, t) in res.iter().enumerate() {
            if t.is_array() && d.opcode != Opcode::Shared {
                self.err(loc, format!("`{mn}` result {i} has array type {t}"));
            }
        }
        let rule = d.opcode.info().rule;
        match rule {
            Rule::Control => self.control(op, &args, &res, depth),
            Rule::Call => self.call(op, &args, &res),
            Rule::Barrier | Rule::Store => {
                if !res.is_empty() {
                    self.err(loc, format!("`{mn}` has no result, got {}", res.len()));
                }
                if let Err(e) = crate::opcode::check_no_result(d.opcode, &args) {
                    self.err(loc, e);
                }
            }
            _ => {
                if res.len() != 1 {
                    self.err(loc, format!("`{mn}` has one result, got {}", res.len()));
                    return;
                }
                if !d.regions.is_empty() {
                    self.err(loc, format!("`{mn}` owns no regions"));
                }
                let lanes: &[u8] = match &d.imm {
                    Imm::Lanes(l) => l,
                    _ => &[],
                };
                if let (Rule::Const, Imm::Const(c)) = (rule, &d.imm) {
                    if c.ty != res[0] {
                        self.err(
                            loc,
                            format!("constant {c} of type {} declared as {}", c.ty, res[0]),
                        );
                    }
                }
                match infer(d.opcode, &args, lanes, Some(res[0])) {
                    Ok(t) if t == res[0] => {}
                    Ok(t) => self.err(
                        loc,
                        format!("`{mn}` produces {t}, but its result is declared {}", res[0]),
                    ),
                    Err(e) => self.err(loc, e),
                }
            }
        }
    }

    fn call(&mut self, op: Op, args: &[Type], res: &[Type]) {
        let p = self.p;
        let loc = p.op_loc(op);
        let Imm::Callee(name) = &p.op(op).imm else {
            self.err(loc, "`call` has no callee".into());
            return;
        };
        let Some(callee) = self.m.get(name) else {
            self.err(loc, format!("call of unknown program @{name}"));
            return;
        };
        let params: Vec<Type> = callee.params.iter().map(|x| callee.ty(x.value)).collect();
        let outs: Vec<Type> = callee.outputs.iter().map(|o| o.ty).collect();
        let show = |t: &[Type]| t.iter().map(Type::to_string).collect::<Vec<_>>().join(", ");
        if args != params.as_slice() {
            self.err(
                loc,
                format!(
                    "call of @{name}: arguments ({}) do not match its parameters ({})",
                    show(args),
                    show(&params)
                ),
            );
        }
        if res != outs.as_slice() {
            self.err(
                loc,
                format!(
                    "call of @{name}: results ({}) do not match its outputs ({})",
                    show(res),
                    show(&outs)
                ),
            );
        }
    }

    fn control(&mut self, op: Op, args: &[Type], res: &[Type], depth: usize) {
        let p = self.p;
        let d = p.op(op);
        let loc = p.op_loc(op);
        let mn = d.opcode.mnemonic();
        let bool_t = Type::bool();
        let want_regions = match d.opcode {
            Opcode::If | Opcode::While | Opcode::DoUntil => 2,
            Opcode::For => 1,
            _ => 0,
        };
        if d.regions.len() != want_regions {
            self.err(
                loc,
                format!(
                    "`{mn}` needs {want_regions} region(s), has {}",
                    d.regions.len()
                ),
            );
            return;
        }
        if matches!(d.opcode, Opcode::Yield | Opcode::Return) {
            if !res.is_empty() {
                self.err(loc, format!("`{mn}` has no results"));
            }
            return;
        }
        let rargs =
            |r: Region| -> Vec<Type> { p.region(r).args.iter().map(|&a| p.ty(a)).collect() };
        let show = |t: &[Type]| t.iter().map(Type::to_string).collect::<Vec<_>>().join(", ");
        for t in res {
            if t.is_array() {
                return;
            }
        }
        match d.opcode {
            Opcode::If => {
                if args.len() != 1 || args[0] != bool_t {
                    self.err(
                        loc,
                        format!("`if` needs one bool condition, got ({})", show(args)),
                    );
                }
                let else_ops = &p.region(d.regions[1]).ops;
                let trivial_else = else_ops.len() == 1 && p.op(else_ops[0]).args.is_empty();
                for (k, &r) in d.regions.iter().enumerate() {
                    if !p.region(r).args.is_empty() {
                        self.err(loc, "`if` regions take no arguments".into());
                    }
                    let what = match k {
                        0 => "`if` results",
                        _ if trivial_else && !res.is_empty() => {
                            "`else` results (an `if` with results needs an `else` yielding them)"
                        }
                        _ => "`else` results",
                    };
                    self.region(r, res, Opcode::Yield, what, depth + 1);
                }
            }
            Opcode::For => {
                let r = d.regions[0];
                let ra = rargs(r);
                if args.len() < 3 {
                    self.err(loc, "`for` needs lower bound, upper bound and step".into());
                    return;
                }
                let it = args[0];
                if !(args[1] == it
                    && args[2] == it
                    && matches!(it.lanes(), Some((s, 1)) if s.is_int()))
                {
                    self.err(
                        loc,
                        format!(
                            "`for` bounds and step must be one integer scalar type, got ({})",
                            show(&args[..3])
                        ),
                    );
                }
                if ra.first() != Some(&it) {
                    self.err(
                        loc,
                        format!("`for` induction variable must have the bounds' type {it}"),
                    );
                }
                let inits = &args[3..];
                let carried = ra.get(1..).unwrap_or(&[]);
                if inits != carried || carried != res {
                    self.err(loc, format!("`for` carried values: initial ({}), region arguments ({}) and results ({}) must match", show(inits), show(carried), show(res)));
                }
                self.region(r, res, Opcode::Yield, "`for` carried values", depth + 1);
            }
            _ => {
                let (body, cond) = if d.opcode == Opcode::While {
                    (d.regions[1], d.regions[0])
                } else {
                    (d.regions[0], d.regions[1])
                };
                if args != res {
                    self.err(
                        loc,
                        format!(
                            "`{mn}` initial values ({}) must match its results ({})",
                            show(args),
                            show(res)
                        ),
                    );
                }
                for r in [body, cond] {
                    if rargs(r) != res {
                        self.err(
                            loc,
                            format!(
                                "`{mn}` region arguments ({}) must match its results ({})",
                                show(&rargs(r)),
                                show(res)
                            ),
                        );
                    }
                }
                // While: condition first, then body. Do: body first, then condition.
                let order = if d.opcode == Opcode::While {
                    [cond, body]
                } else {
                    [body, cond]
                };
                for r in order {
                    if r == cond {
                        let what = format!("`{mn}` condition");
                        self.region(
                            r,
                            std::slice::from_ref(&bool_t),
                            Opcode::Yield,
                            &what,
                            depth + 1,
                        );
                    } else {
                        let what = format!("`{mn}` carried values");
                        self.region(r, res, Opcode::Yield, &what, depth + 1);
                    }
                }
            }
        }
    }
}

fn check_recursion(m: &Module, errs: &mut Vec<Diagnostic>) {
    // Colour-marking DFS over the call graph, iterative.
    let n = m.programs.len();
    let callees: Vec<Vec<usize>> = m
        .programs
        .iter()
        .map(|p| {
            let mut c = Vec::new();
            p.walk(&mut |op| {
                if let Imm::Callee(name) = &p.op(op).imm {
                    if let Some(i) = m.position(name) {
                        c.push(i);
                    }
                }
            });
            c
        })
        .collect();
    let mut state = vec![0u8; n];
    let mut depth = vec![0usize; n];
    for root in 0..n {
        if state[root] != 0 {
            continue;
        }
        let mut stack = vec![(root, 0usize)];
        state[root] = 1;
        while let Some(&mut (u, ref mut k)) = stack.last_mut() {
            if let Some(&w) = callees[u].get(*k) {
                *k += 1;
                match state[w] {
                    0 => {
                        state[w] = 1;
                        stack.push((w, 0));
                    }
                    1 => {
                        let p = &m.programs[u];
                        errs.push(at(
                            p,
                            p.loc,
                            format!(
                                "@{} calls @{} recursively; recursion is not allowed",
                                p.name, m.programs[w].name
                            ),
                        ));
                    }
                    _ => {}
                }
            } else {
                state[u] = 2;
                // Calls nest at most MAX_CALL_DEPTH deep (callees are finished: post-order).
                depth[u] = 1 + callees[u].iter().map(|&w| depth[w]).max().unwrap_or(0);
                if depth[u] == MAX_CALL_DEPTH + 1 {
                    let p = &m.programs[u];
                    errs.push(at(
                        p,
                        p.loc,
                        format!(
                            "@{} starts a chain of calls {} programs deep; calls nest at most {MAX_CALL_DEPTH} deep",
                            p.name, depth[u]
                        ),
                    ));
                }
                stack.pop();
            }
        }
    }
}

/// The deepest chain of calls a module may hold (programs calling programs): compiled code
/// inlines calls and the interpreter runs them on the stack, so the depth is bounded like
/// the parser's region nesting.
pub const MAX_CALL_DEPTH: usize = 256;
