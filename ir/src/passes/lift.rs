//! Uniform lifting (DESIGN §4; RapidMind's `normalize(n)` example): work at the top level of
//! a program body that depends only on uniform inputs and constants moves into a per-launch
//! *prologue* program, evaluated once per launch; its results reach the kernel as new
//! uniform inputs.
//!
//! [`lift_program`] splits one program. The text pass ([`lift_module`]) replaces `@p` by the
//! kernel and adds the prologue as `@p.prologue`: the prologue takes `@p`'s uniform inputs
//! (same names and order) and returns the lifted values; the kernel takes `@p`'s inputs and
//! then one uniform per prologue output, in order. The devices lift at launch
//! ([`prepare_launch`]), so users never see the split. Lifted: pure ops (and `if`/loops
//! whose every operand, nested ones included, is lifted) that do not read `index`,
//! `shape`, arrays or call other programs; constants are copied where needed, not lifted
//! on their own. Run `licm` first to bring uniform work out of loops.

use super::util::{copy_op, mapped, substitute, ValueMap};
use crate::host::{Arg, Input, RunError};
use crate::interp::Interpreter;
use crate::opcode::Opcode;
use crate::program::{Imm, Module, Op, ParamKind, Program, Region, Value};
use crate::Const;
use std::collections::HashSet;

/// A program split into a per-launch prologue and the kernel that uses its results.
#[derive(Clone, Debug)]
pub struct Lifted {
    /// `@p.prologue`: `p`'s uniform inputs in, the lifted values out.
    pub prologue: Program,
    /// `@p`: `p`'s inputs, then one uniform per prologue output.
    pub kernel: Program,
}

/// The prologue name for program `name`.
pub fn prologue_name(name: &str) -> String {
    format!("{name}.prologue")
}

/// Splits every program of `m` that has uniform work to lift and that no program calls
/// (lifting changes the signature); prologues are appended to the module.
pub fn lift_module(m: &mut Module) {
    let mut called = HashSet::new();
    for p in &m.programs {
        p.walk(&mut |op| {
            if let Imm::Callee(n) = &p.op(op).imm {
                called.insert(n.clone());
            }
        });
    }
    let mut prologues = Vec::new();
    for i in 0..m.programs.len() {
        let p = &m.programs[i];
        let has_prologue = m.get(&prologue_name(&p.name)).is_some();
        if called.contains(&p.name) || has_prologue || p.name.ends_with(".prologue") {
            continue;
        }
        if let Some(l) = lift_program(p) {
            m.programs[i] = l.kernel;
            prologues.push(l.prologue);
        }
    }
    m.programs.extend(prologues);
}

/// Forbidden anywhere in lifted work: per-element or memory-reading ops and calls.
fn forbidden(op: Opcode) -> bool {
    matches!(
        op,
        Opcode::Index
            | Opcode::Shape
            | Opcode::Read
            | Opcode::ReadOffset
            | Opcode::Extent
            | Opcode::Call
    )
}

/// True if every op nested in `op` is allowed and every value they use from outside `op` is
/// in `ok` (or is defined inside `op`).
fn liftable(p: &Program, op: Op, ok: &HashSet<Value>) -> bool {
    let d = p.op(op);
    if forbidden(d.opcode) || d.opcode.is_terminator() {
        return false;
    }
    let mut inner = HashSet::new();
    let mut fine = d.args.iter().all(|a| ok.contains(a));
    fn walk(
        p: &Program,
        r: Region,
        inner: &mut HashSet<Value>,
        ok: &HashSet<Value>,
        fine: &mut bool,
    ) {
        inner.extend(p.region(r).args.iter().copied());
        for &o in &p.region(r).ops {
            let d = p.op(o);
            *fine &=
                !forbidden(d.opcode) && d.args.iter().all(|a| ok.contains(a) || inner.contains(a));
            for &c in &d.regions {
                walk(p, c, inner, ok, fine);
            }
            inner.extend(d.results.iter().copied());
        }
    }
    for &r in &d.regions {
        walk(p, r, &mut inner, ok, &mut fine);
    }
    fine
}

/// Splits `p` (one with no calls; run `inline` first) into prologue and kernel, or returns
/// `None` when no non-constant uniform work feeds the per-element part.
pub fn lift_program(p: &Program) -> Option<Lifted> {
    // Kernels have effects (stores, atomics, barriers) this pass does not model.
    if p.kind == crate::program::ProgramKind::Kernel {
        return None;
    }
    let body = &p.region(p.body).ops;
    // Values computable in the prologue: uniform parameters, constants, lifted results.
    let mut ok: HashSet<Value> = p
        .params
        .iter()
        .filter(|x| x.kind == ParamKind::Uniform)
        .map(|x| x.value)
        .collect();
    let mut lifted: Vec<Op> = Vec::new();
    let mut consts: Vec<Op> = Vec::new();
    for &op in body {
        let d = p.op(op);
        if d.opcode == Opcode::Const {
            ok.extend(d.results.iter().copied());
            consts.push(op);
        } else if liftable(p, op, &ok) {
            ok.extend(d.results.iter().copied());
            lifted.push(op);
        }
    }
    // Exported: lifted results the kernel still uses.
    let lifted_set: HashSet<Op> = lifted.iter().copied().collect();
    let lifted_vals: HashSet<Value> = lifted
        .iter()
        .flat_map(|&o| p.op(o).results.iter().copied())
        .collect();
    let mut exported: Vec<Value> = Vec::new();
    let mut seen = HashSet::new();
    for &op in body {
        if lifted_set.contains(&op) {
            continue;
        }
        let mut uses = Vec::new();
        collect_uses(p, op, &mut uses);
        for v in uses {
            if lifted_vals.contains(&v) && seen.insert(v) {
                exported.push(v);
            }
        }
    }
    if exported.is_empty() {
        return None;
    }
    exported.sort_by_key(|v| v.0);

    // The prologue: uniform parameters, constants and lifted ops, returning `exported`.
    let mut pro = Program::new(prologue_name(&p.name));
    pro.loc = p.loc;
    let mut map = ValueMap::new();
    for (i, par) in p.params.iter().enumerate() {
        if par.kind == ParamKind::Uniform {
            let v = pro.add_param(ParamKind::Uniform, p.param_name(i), p.ty(par.value));
            map.insert(par.value, v);
        }
    }
    let pbody = pro.body;
    for &op in body {
        if consts.contains(&op) || lifted_set.contains(&op) {
            let new = copy_op(p, op, &mut pro, &mut map);
            pro.append(pbody, new);
        }
    }
    let names = lifted_names(p, &exported);
    let rets: Vec<Value> = exported.iter().map(|&v| mapped(&map, v)).collect();
    pro.outputs = exported
        .iter()
        .zip(&names)
        .map(|(&v, n)| crate::program::Output {
            name: Some(n.clone()),
            ty: p.ty(v),
        })
        .collect();
    let ret = pro.new_op(Opcode::Return, rets, Imm::None, &[], vec![]);
    pro.append(pbody, ret);
    super::dce::dce_program(&mut pro);
    let pro = super::util::compact(&pro);

    // The kernel: `p` without the lifted ops, reading their values as new uniforms.
    let mut k = p.clone();
    let mut subst = ValueMap::new();
    for (&v, n) in exported.iter().zip(&names) {
        let u = k.add_param(ParamKind::Uniform, n.clone(), p.ty(v));
        subst.insert(v, u);
    }
    let kb = k.body;
    k.region_mut(kb).ops.retain(|o| !lifted_set.contains(o));
    substitute(&mut k, &subst);
    super::dce::dce_program(&mut k);
    Some(Lifted {
        prologue: pro,
        kernel: super::util::compact(&k),
    })
}

/// Every value `op` and its nested ops use.
fn collect_uses(p: &Program, op: Op, out: &mut Vec<Value>) {
    let d = p.op(op);
    out.extend(d.args.iter().copied());
    for &r in &d.regions {
        for &o in &p.region(r).ops {
            collect_uses(p, o, out);
        }
    }
}

/// Names for the exported values (prologue outputs and kernel uniforms, so words without
/// `.`): their name hints when free, else `lifted_N`.
fn lifted_names(p: &Program, exported: &[Value]) -> Vec<String> {
    let mut used: HashSet<String> = (0..p.params.len())
        .map(|i| p.param_name(i).to_string())
        .collect();
    exported
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let hint = p
                .value(v)
                .name
                .as_deref()
                .map(|h| crate::printer::sanitize(h).replace('.', "_"))
                .filter(|h| !h.is_empty() && !h.starts_with(|c: char| c.is_ascii_digit()));
            let mut name = hint.unwrap_or_else(|| format!("lifted_{i}"));
            while used.contains(&name) {
                name.push_str("_l");
            }
            used.insert(name.clone());
            name
        })
        .collect()
}

/// What a device runs for one launch of program `name` of `m` with `inputs`: when the
/// program has uniform work to lift, the kernel module and the inputs extended with the
/// prologue's results (evaluated here, once, on the interpreter); `None` otherwise.
///
/// Errors: the prologue's [`RunError`] (e.g. out of fuel in a uniform loop).
pub fn prepare_launch(
    m: &Module,
    name: &str,
    inputs: &[Input],
) -> Result<Option<(Module, Vec<Input>)>, RunError> {
    let uniforms: Vec<Option<Const>> = inputs
        .iter()
        .map(|i| match i {
            Input::Uniform(c) => Some(*c),
            Input::Array(_) => None,
        })
        .collect();
    Ok(
        prepare_launch_uniforms(m, name, &uniforms)?.map(|(km, extra)| {
            let mut all = inputs.to_vec();
            all.extend(extra.into_iter().map(Input::Uniform));
            (km, all)
        }),
    )
}

/// [`prepare_launch`] given only the uniform arguments (`None` for array arguments, one entry
/// per parameter): the kernel module and the extra uniform values to append to the
/// arguments, or `None` when nothing is lifted.
pub fn prepare_launch_uniforms(
    m: &Module,
    name: &str,
    uniforms: &[Option<Const>],
) -> Result<Option<(Module, Vec<Const>)>, RunError> {
    let Some(p) = m.get(name) else {
        return Ok(None);
    };
    if uniforms.len() != p.params.len() {
        return Ok(None);
    }
    let Some(split) = split_launch(m, name) else {
        return Ok(None);
    };
    let extra = split.run_prologue(p, uniforms)?;
    Ok(Some((split.kernel, extra)))
}

/// The launch-time split of one program ([`split_launch`]): what the devices prepare once
/// per program and reuse for every launch.
#[derive(Clone, Debug)]
pub struct LaunchSplit {
    /// `m` with `@p` replaced by its kernel (`p`'s inputs, then one uniform per prologue
    /// output).
    pub kernel: Module,
    /// A module of the prologue alone (math functions expanded, so running it costs no
    /// preparation), named [`prologue_name`]`(p)`.
    pub prologue: Module,
}

impl LaunchSplit {
    /// Runs the prologue on the uniform arguments of a launch of `p` (the original program;
    /// `uniforms` has one entry per parameter, `None` for arrays) and returns the values to
    /// append to the kernel's arguments.
    ///
    /// # Errors
    /// The interpreter's errors (fuel, a failing op).
    pub fn run_prologue(
        &self,
        p: &Program,
        uniforms: &[Option<Const>],
    ) -> Result<Vec<Const>, RunError> {
        let args: Vec<Arg> = p
            .params
            .iter()
            .zip(uniforms)
            .filter(|(par, _)| par.kind == ParamKind::Uniform)
            .filter_map(|(_, u)| u.map(Arg::Value))
            .collect();
        Interpreter::new(&self.prologue).run_element(
            &self.prologue.programs[0].name,
            &args,
            &[0],
            &[1],
        )
    }
}

/// Splits program `name` of `m` for launching (DESIGN §4): `None` when it does not exist,
/// calls another program, or has no uniform work to lift ([`lift_program`]).
pub fn split_launch(m: &Module, name: &str) -> Option<LaunchSplit> {
    let p = m.get(name)?;
    if has_call(p) {
        return None;
    }
    let l = lift_program(p)?;
    let mut prologue = Module {
        programs: vec![l.prologue],
    };
    crate::passes::math::expand_math(&mut prologue);
    let mut kernel = m.clone();
    let i = kernel.position(name).expect("found above");
    kernel.programs[i] = l.kernel;
    Some(LaunchSplit { kernel, prologue })
}

fn has_call(p: &Program) -> bool {
    let mut found = false;
    p.walk(&mut |op| found |= p.op(op).opcode == Opcode::Call);
    found
}
