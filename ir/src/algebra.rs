//! The program algebra (DESIGN §4; RapidMind's "Partial evaluation and the program algebra",
//! Sh's "Shader Algebra", 2004): tight and loose binding, unbinding, composition, bundling,
//! specialization and interface adapters, each returning an ordinary program.
//!
//! Every operation takes verified programs and returns a new, compacted program (arenas
//! without garbage) that verifies — in a module holding the programs it calls, if the
//! operands call any — and prints and parses back identically. The operands are not changed.
//! Misuse (an unknown input or output, a type or arity mismatch, a kernel operand: the
//! algebra takes map programs) is an [`AlgebraError`] naming the operation, the programs
//! and the position concerned.
//!
//! Name rules of the results, common to all operations:
//! - an operation on one program keeps its name; [`compose`] names the result
//!   `{p}_{q}`, [`bundle`] joins the names with `_`, and the [`adapters`] are named after
//!   themselves (`swizzle`, `dup`, `keep`, `lose`);
//! - when inputs of several programs meet ([`compose`], [`bundle`]), a uniform or array
//!   input whose name is already taken by an input of the same kind and type is *shared*
//!   (one input feeds both, e.g. a `uniform %dt` of two stages); the same name with a
//!   different kind or type is an error; a varying input whose name is taken is renamed
//!   with a suffix (`%x` → `%x.1`);
//! - clashing output names of a bundle are renamed with a suffix (`r` → `r_1`).

use crate::builder::replace_uses;
use crate::host::HostArray;
use crate::konst::Const;
use crate::opcode::Opcode;
use crate::passes::util::{self, ValueMap};
use crate::passes::{dce, fold};
use crate::program::{Imm, Output, ParamKind, Program, ProgramKind, Value};
use crate::types::Type;
use std::collections::HashSet;
use std::fmt;

/// Misuse of an algebra operation: names the operation, the programs involved and the
/// position (input or output, from 0) where it went wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlgebraError {
    /// The operation (`"compose"`, `"bind"`, ...).
    pub operation: &'static str,
    /// The programs involved, without `@`, in argument order.
    pub programs: Vec<String>,
    /// The input or output position concerned, from 0, when there is one.
    pub position: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for AlgebraError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ps: Vec<String> = self.programs.iter().map(|p| format!("@{p}")).collect();
        write!(f, "{}({}): {}", self.operation, ps.join(", "), self.message)
    }
}

impl std::error::Error for AlgebraError {}

fn error(
    operation: &'static str,
    programs: &[&Program],
    position: Option<usize>,
    message: impl Into<String>,
) -> AlgebraError {
    AlgebraError {
        operation,
        programs: programs.iter().map(|p| p.name.clone()).collect(),
        position,
        message: message.into(),
    }
}

/// Refuses kernel operands, up front: the program algebra takes map programs (a kernel's
/// buffers, barriers and work-item indices have no meaning in a composed or bound map).
fn map_programs(op: &'static str, ps: &[&Program]) -> Result<(), AlgebraError> {
    match ps.iter().find(|p| p.kind == ProgramKind::Kernel) {
        Some(k) => Err(error(
            op,
            ps,
            None,
            format!(
                "@{} is a kernel; the program algebra takes map programs",
                k.name
            ),
        )),
        None => Ok(()),
    }
}

fn kind_word(k: ParamKind) -> &'static str {
    match k {
        ParamKind::Varying => "varying",
        ParamKind::Uniform => "uniform",
        ParamKind::Array => "array",
        ParamKind::Buffer => "buffer",
    }
}

/// `%x: f32`, `uniform %a: f32` — a parameter as written in the text format.
fn describe_param(p: &Program, i: usize) -> String {
    let par = p.params[i];
    let uniform = if par.kind == ParamKind::Uniform {
        "uniform "
    } else {
        ""
    };
    format!("{uniform}%{}: {}", p.param_name(i), p.ty(par.value))
}

/// The position of input `name` of `p`, or an error listing its inputs.
fn find_input(op: &'static str, p: &Program, name: &str) -> Result<usize, AlgebraError> {
    let name = name.strip_prefix('%').unwrap_or(name);
    p.param_index(name).ok_or_else(|| {
        let list: Vec<String> = (0..p.params.len()).map(|i| describe_param(p, i)).collect();
        error(
            op,
            &[p],
            None,
            format!(
                "@{} has no input `%{name}` (inputs: {})",
                p.name,
                list.join(", ")
            ),
        )
    })
}

/// The positions of the outputs in `names`, each a name or a position (a named output may
/// be given by its position too), or an error listing the outputs.
fn find_outputs(op: &'static str, p: &Program, names: &[&str]) -> Result<Vec<usize>, AlgebraError> {
    names
        .iter()
        .map(|&n| {
            let position = || n.parse().ok().filter(|&i: &usize| i < p.outputs.len());
            p.output_index(n).or_else(position).ok_or_else(|| {
                let list: Vec<String> = (0..p.outputs.len()).map(|i| p.output_name(i)).collect();
                error(
                    op,
                    &[p],
                    None,
                    format!(
                        "@{} has no output `{n}` (outputs: {})",
                        p.name,
                        list.join(", ")
                    ),
                )
            })
        })
        .collect()
}

/// The positions of `p`'s varying parameters, in order.
fn varying_params(p: &Program) -> Vec<usize> {
    (0..p.params.len())
        .filter(|&i| p.params[i].kind == ParamKind::Varying)
        .collect()
}

/// The first of `base`, `base{sep}1`, `base{sep}2`, ... that `taken` refuses.
fn fresh_name(base: &str, sep: char, taken: impl Fn(&str) -> bool) -> String {
    if !taken(base) {
        return base.to_string();
    }
    (1..)
        .map(|k| format!("{base}{sep}{k}"))
        .find(|n| !taken(n))
        .unwrap_or_default()
}

/// Appends `return vals` to the body of `p`.
fn add_return(p: &mut Program, vals: Vec<Value>) {
    let op = p.new_op(Opcode::Return, vals, Imm::None, &[], vec![]);
    let body = p.body;
    p.append(body, op);
}

/// A program being assembled from the parameters and bodies of `sources` (compose, bundle).
struct Assembly<'a> {
    operation: &'static str,
    sources: &'a [&'a Program],
    /// Every parameter name of every source (renamed inputs avoid them all).
    reserved: HashSet<String>,
    /// For each parameter of `out`: the source and parameter it came from (first one, if shared).
    origin: Vec<(usize, usize)>,
    out: Program,
}

impl<'a> Assembly<'a> {
    fn new(operation: &'static str, name: String, sources: &'a [&'a Program]) -> Assembly<'a> {
        let reserved = sources
            .iter()
            .flat_map(|p| (0..p.params.len()).map(|i| p.param_name(i).to_string()))
            .collect();
        Assembly {
            operation,
            sources,
            reserved,
            origin: Vec::new(),
            out: Program::new(name),
        }
    }

    /// Adds parameter `i` of source `s` to the result, shared or renamed per the module
    /// rules, and maps it in `map`.
    fn add_param(&mut self, s: usize, i: usize, map: &mut ValueMap) -> Result<(), AlgebraError> {
        let src = self.sources[s];
        let par = src.params[i];
        let name = src.param_name(i);
        let ty = src.ty(par.value);
        if let Some(j) = self.out.param_index(name) {
            let (os, oi) = self.origin[j];
            let other = self.out.params[j];
            if par.kind != ParamKind::Varying {
                if other.kind == par.kind && self.out.ty(other.value) == ty {
                    map.insert(par.value, other.value);
                    return Ok(());
                }
                return Err(error(
                    self.operation,
                    self.sources,
                    Some(i),
                    format!(
                        "input {i} `{}` of @{} has the name of input {oi} `{}` of @{}, but a \
                         shared input needs the same kind and type ({} {ty} vs {} {})",
                        describe_param(src, i),
                        src.name,
                        describe_param(self.sources[os], oi),
                        self.sources[os].name,
                        kind_word(par.kind),
                        kind_word(other.kind),
                        self.out.ty(other.value)
                    ),
                ));
            }
        }
        let out = &self.out;
        let fresh = fresh_name(name, '.', |n| {
            out.param_index(n).is_some() || (n != name && self.reserved.contains(n))
        });
        let v = self.out.add_param(par.kind, fresh, ty);
        self.out.set_value_loc(v, src.value_loc(par.value));
        self.origin.push((s, i));
        map.insert(par.value, v);
        Ok(())
    }

    /// Copies the body of source `s` (its parameters already in `map`); returns the values
    /// it returns.
    fn add_body(&mut self, s: usize, map: &mut ValueMap) -> Vec<Value> {
        let src = self.sources[s];
        let body = self.out.body;
        util::copy_ops(src, src.body, &mut self.out, body, map)
    }

    /// Ends the body with `return rets` and gives the compacted result.
    fn finish(mut self, rets: Vec<Value>, outputs: Vec<Output>) -> Program {
        add_return(&mut self.out, rets);
        self.out.outputs = outputs;
        util::compact(&self.out)
    }
}

/// Tight binding (DESIGN §4): input `input` of `p` — a varying or uniform scalar or tuple —
/// is captured now as the constant `value` and disappears from the inputs. The result has
/// a `const` op (named after the input) first in its body in place of the input, which the
/// optimizer folds (`fold`); the result keeps `p`'s name.
///
/// `input` is a parameter name, with or without `%`.
///
/// Errors: a kernel operand; no such input; an array input (use [`bind_array`]); `value.ty`
/// differs from the input's type (the message gives the position and both types).
pub fn bind(p: &Program, input: &str, value: &Const) -> Result<Program, AlgebraError> {
    map_programs("bind", &[p])?;
    let i = find_input("bind", p, input)?;
    let par = p.params[i];
    let ty = p.ty(par.value);
    let name = p.param_name(i).to_string();
    if par.kind == ParamKind::Array {
        return Err(error(
            "bind",
            &[p],
            Some(i),
            format!(
                "input {i} `%{name}` of @{} is an array ({ty}): use bind_array",
                p.name
            ),
        ));
    }
    if value.ty != ty {
        return Err(error(
            "bind",
            &[p],
            Some(i),
            format!(
                "input {i} `%{name}` of @{} is {ty}, but the value {value} is {}",
                p.name, value.ty
            ),
        ));
    }
    let mut r = p.clone();
    let op = r.new_op(Opcode::Const, vec![], Imm::Const(*value), &[ty], vec![]);
    let c = r.op(op).results[0];
    r.value_mut(c).name = Some(name);
    let body = r.body;
    r.region_mut(body).ops.insert(0, op);
    replace_uses(&mut r, body, par.value, c);
    util::remove_param(&mut r, i);
    Ok(util::compact(&r))
}

/// Tight binding of an array input (DESIGN §4): input `input` of `p` (an array parameter)
/// gets the known contents `value` (element type, shape, lane bits). The folder
/// ([`fold::fold_program`] with [`fold::Known`]) turns `extent` of it and `read`s of it at
/// constant coordinates into constants, unrolling small constant loops (a sparse
/// convolution mask becomes code that taps only its nonzeros), then dead code is removed
/// ([`dce::dce_program`]) and the input disappears. The result keeps `p`'s name.
///
/// Errors: a kernel operand; no such input; the input is not an array (use [`bind`]); `value`'s
/// element type, rank or data length does not fit the array type; the array is still used after
/// folding (a `read` at coordinates that are not constant, or a `call` passing it on): there is
/// no loose binding for arrays — an array input is already an input of each launch.
pub fn bind_array(p: &Program, input: &str, value: &HostArray) -> Result<Program, AlgebraError> {
    map_programs("bind_array", &[p])?;
    let i = find_input("bind_array", p, input)?;
    let par = p.params[i];
    let ty = p.ty(par.value);
    let name = p.param_name(i).to_string();
    let fail = |m: String| error("bind_array", &[p], Some(i), m);
    let Some((dims, elem, _)) = ty.array_parts() else {
        return Err(fail(format!(
            "input {i} `%{name}` of @{} is {} {ty}, not an array: use bind",
            p.name,
            kind_word(par.kind)
        )));
    };
    if value.elem != elem || value.shape.len() != dims as usize {
        return Err(fail(format!(
            "input {i} `%{name}` of @{} is {ty}, but the array given has {} axes of {}",
            p.name,
            value.shape.len(),
            value.elem
        )));
    }
    let lanes = elem.lanes().map_or(1, |(_, n)| n as usize);
    if value.data.len() != value.len() * lanes {
        return Err(fail(format!(
            "the array given for input {i} `%{name}` of @{} has shape {:?} but {} lanes of data",
            p.name,
            value.shape,
            value.data.len()
        )));
    }
    let mut r = p.clone();
    let known = fold::Known {
        arrays: [(par.value, value)].into_iter().collect(),
    };
    fold::fold_program(&mut r, &known);
    dce::dce_program(&mut r);
    let v = r.params[i].value;
    if util::use_counts(&r)[v.index()] > 0 {
        return Err(fail(format!(
            "input {i} `%{name}` of @{} is still used after folding: every `read` of a \
             tightly bound array must have constant coordinates after folding (there is no \
             loose binding, like bind_uniform, for arrays: an array is already an input of \
             each launch)",
            p.name
        )));
    }
    util::remove_param(&mut r, i);
    Ok(util::compact(&r))
}

/// Changes the kind of input `input` of `p` from `from` to `to` (bind_uniform, unbind).
fn rekind(
    op: &'static str,
    p: &Program,
    input: &str,
    from: ParamKind,
    to: ParamKind,
) -> Result<Program, AlgebraError> {
    map_programs(op, &[p])?;
    let i = find_input(op, p, input)?;
    let kind = p.params[i].kind;
    if kind != from {
        return Err(error(
            op,
            &[p],
            Some(i),
            format!(
                "input {i} `{}` of @{} is {}, not {}",
                describe_param(p, i),
                p.name,
                kind_word(kind),
                kind_word(from)
            ),
        ));
    }
    let mut r = util::compact(p);
    r.params[i].kind = to;
    Ok(r)
}

/// Loose binding (DESIGN §4): varying input `input` of `p` becomes a uniform, one value read
/// at each execution (launch) instead of one per element. Position, name and type are kept.
///
/// Errors: a kernel operand; no such input; the input is not varying.
pub fn bind_uniform(p: &Program, input: &str) -> Result<Program, AlgebraError> {
    rekind(
        "bind_uniform",
        p,
        input,
        ParamKind::Varying,
        ParamKind::Uniform,
    )
}

/// Unbinding (Sh's `replaceUniform`, RapidMind's `p >> a`): uniform input `input` of `p`
/// becomes a varying input, one value per element. Position, name and type are kept.
///
/// Errors: a kernel operand; no such input; the input is not uniform.
pub fn unbind(p: &Program, input: &str) -> Result<Program, AlgebraError> {
    rekind("unbind", p, input, ParamKind::Uniform, ParamKind::Varying)
}

/// Composition `p << q` (DESIGN §4): `q`'s outputs feed `p`'s first `q.outputs.len()`
/// varying inputs, in order. The result, named `{p}_{q}`, has `q`'s inputs, then `p`'s
/// inputs that were not fed (in order, shared or renamed per the module rules), and `p`'s
/// outputs (names kept); its body is `q`'s body, then `p`'s.
///
/// Errors: a kernel operand; `q` has more outputs than `p` has varying inputs (position: the
/// first output with no input to feed); an output's type differs from the input it feeds
/// (position: that output, e.g. "output 1 of @q (f32) feeds varying input 1 `%y` of @p, which
/// is i32"); a uniform or array input of `p` has the name of an input of `q` of another kind or
/// type.
pub fn compose(p: &Program, q: &Program) -> Result<Program, AlgebraError> {
    let sources = [p, q];
    map_programs("compose", &sources)?;
    let fail = |pos, m: String| error("compose", &sources, Some(pos), m);
    let varying = varying_params(p);
    if q.outputs.len() > varying.len() {
        return Err(fail(
            varying.len(),
            format!(
                "@{} has {} outputs but @{} has only {} varying inputs",
                q.name,
                q.outputs.len(),
                p.name,
                varying.len()
            ),
        ));
    }
    for (k, o) in q.outputs.iter().enumerate() {
        let i = varying[k];
        let ty = p.ty(p.params[i].value);
        if o.ty != ty {
            return Err(fail(
                k,
                format!(
                    "output {k} of @{} ({}) feeds varying input {k} `%{}` of @{}, which is {ty}",
                    q.name,
                    o.ty,
                    p.param_name(i),
                    p.name
                ),
            ));
        }
    }
    let mut a = Assembly::new("compose", format!("{}_{}", p.name, q.name), &sources);
    let mut qmap = ValueMap::new();
    for i in 0..q.params.len() {
        a.add_param(1, i, &mut qmap)?;
    }
    let fed = &varying[..q.outputs.len()];
    let mut pmap = ValueMap::new();
    for i in 0..p.params.len() {
        if !fed.contains(&i) {
            a.add_param(0, i, &mut pmap)?;
        }
    }
    let qrets = a.add_body(1, &mut qmap);
    for (&i, &v) in fed.iter().zip(&qrets) {
        pmap.insert(p.params[i].value, v);
    }
    let prets = a.add_body(0, &mut pmap);
    Ok(a.finish(prets, p.outputs.clone()))
}

/// Bundling (DESIGN §4): the programs side by side. The result, named with the programs'
/// names joined by `_`, has their inputs concatenated in order (shared or renamed per the
/// module rules), their bodies in sequence, and their outputs concatenated in order (an
/// output name already taken is renamed with a suffix, `r` → `r_1`).
///
/// Errors: a kernel operand; an empty list; a uniform or array input with the name of an
/// earlier input of another kind or type.
pub fn bundle(ps: &[&Program]) -> Result<Program, AlgebraError> {
    if ps.is_empty() {
        return Err(error("bundle", ps, None, "nothing to bundle: no programs"));
    }
    map_programs("bundle", ps)?;
    let name: Vec<&str> = ps.iter().map(|p| p.name.as_str()).collect();
    let mut a = Assembly::new("bundle", name.join("_"), ps);
    let mut maps = Vec::new();
    for (s, p) in ps.iter().enumerate() {
        let mut map = ValueMap::new();
        for i in 0..p.params.len() {
            a.add_param(s, i, &mut map)?;
        }
        maps.push(map);
    }
    let reserved: HashSet<&str> = ps
        .iter()
        .flat_map(|p| p.outputs.iter().filter_map(|o| o.name.as_deref()))
        .collect();
    let mut taken: HashSet<String> = HashSet::new();
    let mut rets = Vec::new();
    let mut outputs = Vec::new();
    for (s, map) in maps.iter_mut().enumerate() {
        rets.extend(a.add_body(s, map));
        for o in &ps[s].outputs {
            let name = o.name.as_deref().map(|n| {
                fresh_name(n, '_', |m| {
                    taken.contains(m) || (m != n && reserved.contains(m))
                })
            });
            taken.extend(name.clone());
            outputs.push(Output { name, ty: o.ty });
        }
    }
    Ok(a.finish(rets, outputs))
}

/// `p` returning only outputs `kept` (positions), in that order, without dead code or
/// unused inputs.
fn specialize(p: &Program, kept: &[usize]) -> Program {
    let mut r = util::compact(p);
    let body = r.body;
    if let Some(&ret) = r.region(body).ops.last() {
        let args = r.op(ret).args.clone();
        r.op_mut(ret).args = kept.iter().map(|&i| args[i]).collect();
    }
    r.outputs = kept.iter().map(|&i| p.outputs[i].clone()).collect();
    dce::dce_program(&mut r);
    dce::drop_unused_params(&mut r);
    util::compact(&r)
}

/// Specialization (DESIGN §4): `p` with exactly the outputs `outputs` (each a name or a
/// position, see [`Program::output_index`]; named outputs may be given by position too),
/// in the given order; an empty list is allowed.
/// Dead-code elimination then removes the work only the other outputs needed, and inputs
/// that become unused disappear (so the result may have fewer inputs than `p`). Output
/// names are kept; unnamed outputs are addressed by their new positions. The result keeps
/// `p`'s name.
///
/// Errors: a kernel operand; an unknown output (the message lists `p`'s outputs); an output
/// named twice.
pub fn keep(p: &Program, outputs: &[&str]) -> Result<Program, AlgebraError> {
    map_programs("keep", &[p])?;
    let kept = find_outputs("keep", p, outputs)?;
    for (k, &i) in kept.iter().enumerate() {
        if kept[..k].contains(&i) {
            return Err(error(
                "keep",
                &[p],
                Some(i),
                format!(
                    "output {i} `{}` of @{} is named twice (use adapters::dup to copy an output)",
                    p.output_name(i),
                    p.name
                ),
            ));
        }
    }
    Ok(specialize(p, &kept))
}

/// Specialization (DESIGN §4): `p` without the outputs `outputs` (each a name or a
/// position, as for [`keep`]; naming one twice is harmless); the others stay
/// in order. Dead-code elimination then removes the work only the dropped outputs needed,
/// and inputs that become unused disappear (so the result may have fewer inputs than `p`).
/// The result keeps `p`'s name.
///
/// Errors: a kernel operand; an unknown output (the message lists `p`'s outputs).
pub fn drop_outputs(p: &Program, outputs: &[&str]) -> Result<Program, AlgebraError> {
    map_programs("drop_outputs", &[p])?;
    let dropped = find_outputs("drop_outputs", p, outputs)?;
    let kept: Vec<usize> = (0..p.outputs.len())
        .filter(|i| !dropped.contains(i))
        .collect();
    Ok(specialize(p, &kept))
}

/// Interface adaptation (DESIGN §4): `p` with its varying inputs reordered — varying input
/// `k` of the result is `p`'s varying input `order[k]` (same name and type); the uniform and
/// array inputs follow them, in their order. Built as `compose(p, swizzle)` with an adapter
/// ([`adapters::swizzle`]) whose inputs carry `p`'s names, so it costs nothing at run time;
/// the result keeps `p`'s name.
///
/// Errors: a kernel operand; `order` is not a permutation of `0..n` for `p`'s `n` varying
/// inputs (position: the first bad entry, or the length when entries are missing).
pub fn swizzle_inputs(p: &Program, order: &[usize]) -> Result<Program, AlgebraError> {
    map_programs("swizzle_inputs", &[p])?;
    let varying = varying_params(p);
    let n = varying.len();
    let fail = |pos, m: String| error("swizzle_inputs", &[p], Some(pos), m);
    let mut inverse = vec![usize::MAX; n];
    for (k, &j) in order.iter().enumerate() {
        if j >= n || inverse[j] != usize::MAX {
            return Err(fail(
                k,
                format!(
                    "order {order:?} is not a permutation of the {n} varying inputs of @{}: \
                     entry {k} is {j}",
                    p.name
                ),
            ));
        }
        inverse[j] = k;
    }
    if order.len() != n {
        return Err(fail(
            order.len(),
            format!(
                "order {order:?} is not a permutation of the {n} varying inputs of @{}: \
                 it has {} entries",
                p.name,
                order.len()
            ),
        ));
    }
    let types: Vec<Type> = order
        .iter()
        .map(|&j| p.ty(p.params[varying[j]].value))
        .collect();
    let mut adapter = adapters::swizzle(&types, &inverse)?;
    for (k, &j) in order.iter().enumerate() {
        let v = adapter.params[k].value;
        adapter.value_mut(v).name = Some(p.param_name(varying[j]).to_string());
    }
    let mut r = compose(p, &adapter)?;
    r.name = p.name.clone();
    Ok(r)
}

/// Interface adapters (Sh): small programs composed with `<<` ([`compose`]) to reorder,
/// duplicate or discard values; they have no ops, so they cost nothing after composition.
/// Their inputs are varying, named `%in0`, `%in1`, ...; their outputs are unnamed. They are
/// for scalar and tuple types only: an array type is an error.
pub mod adapters {
    use super::*;

    /// A program named `name` with varying inputs `%in{k}: types[k]` returning
    /// `inputs[outs[k]]` (indices already checked).
    fn adapter(
        name: &'static str,
        types: &[Type],
        outs: &[usize],
    ) -> Result<Program, AlgebraError> {
        let mut p = Program::new(name);
        for (k, &ty) in types.iter().enumerate() {
            if ty.is_array() {
                return Err(error(
                    name,
                    &[],
                    Some(k),
                    format!("input {k} has array type {ty}: adapters take scalars and tuples"),
                ));
            }
            p.add_param(ParamKind::Varying, format!("in{k}"), ty);
        }
        let vals: Vec<Value> = outs.iter().map(|&k| p.params[k].value).collect();
        p.outputs = outs
            .iter()
            .map(|&k| Output {
                name: None,
                ty: types[k],
            })
            .collect();
        add_return(&mut p, vals);
        Ok(p)
    }

    /// `swizzle`: varying inputs of `types`, outputs `inputs[order[k]]` for each `k` — a
    /// general swizzle: entries may repeat (duplicate) or be left out (discard).
    ///
    /// Errors: an entry of `order` out of range (position: that entry); an array type.
    pub fn swizzle(types: &[Type], order: &[usize]) -> Result<Program, AlgebraError> {
        if let Some(k) = order.iter().position(|&j| j >= types.len()) {
            return Err(error(
                "swizzle",
                &[],
                Some(k),
                format!(
                    "entry {k} of the order is {}, but there are only {} inputs",
                    order[k],
                    types.len()
                ),
            ));
        }
        adapter("swizzle", types, order)
    }

    /// `dup`: one input of type `ty`, `n` copies of it as outputs.
    ///
    /// Errors: `n == 0` (use [`lose`]); an array type.
    pub fn dup(ty: Type, n: usize) -> Result<Program, AlgebraError> {
        if n == 0 {
            return Err(error(
                "dup",
                &[],
                None,
                "dup needs n >= 1 copies (use lose)",
            ));
        }
        adapter("dup", &[ty], &vec![0; n])
    }

    /// `keep`: the identity on one input of type `ty`.
    ///
    /// Errors: an array type.
    pub fn keep(ty: Type) -> Result<Program, AlgebraError> {
        adapter("keep", &[ty], &[0])
    }

    /// `lose`: one input of type `ty`, no outputs (discards a value).
    ///
    /// Errors: an array type.
    pub fn lose(ty: Type) -> Result<Program, AlgebraError> {
        adapter("lose", &[ty], &[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::Module;
    use crate::{parse_module, print_program, Arg, Interpreter};

    const SRC: &str = "\
program @f(%x: f32, uniform %a: f32) -> (y: f32) {
  %y: f32 = mul %a, %x
  return %y
}

program @g(%u: f32, %v: f32) -> (s: f32, d: f32) {
  %s: f32 = add %u, %v
  %d: f32 = sub %u, %v
  return %s, %d
}

program @h(%p: f32, %q: f32, uniform %a: f32) -> (f32) {
  %t: f32 = div %p, %q
  %r: f32 = add %t, %a
  return %r
}

program @k(%x: f32, %y: i32) -> (f32) {
  %c: f32 = cast %y
  %r: f32 = add %x, %c
  return %r
}

program @two(%a: f32, %b: f32) -> (x: f32, y: f32) {
  %x: f32 = neg %a
  %y: f32 = mul %b, %b
  return %x, %y
}

program @s1(%x: f32, uniform %dt: f32) -> (f32) {
  %r: f32 = add %x, %dt
  return %r
}

program @s2(%x: f32, uniform %dt: f32) -> (f32) {
  %r: f32 = mul %x, %dt
  return %r
}

program @s3(%x: f32, uniform %dt: i32) -> (f32) {
  %r: f32 = neg %x
  return %r
}

program @nv(%v: f32) -> (f32) {
  %r: f32 = neg %v
  return %r
}

program @sq(%x: f32) -> (f32) {
  %r: f32 = mul %x, %x
  return %r
}

program @usesq(%x: f32) -> (f32) {
  %r: f32 = call @sq(%x)
  %one: f32 = const 1.0
  %s: f32 = add %r, %one
  return %s
}

program @unused(%m: array<1 x f32, clamp>, %x: f32) -> (f32) {
  %r: f32 = neg %x
  return %r
}

program @dyn(%m: array<1 x f32, clamp>, %i: i32) -> (f32) {
  %r: f32 = read %m, %i
  return %r
}

program @taps(%m: array<1 x f32, clamp>, %x: f32) -> (f32) {
  %n: i32 = extent %m
  %zero: i32 = const 0
  %one: i32 = const 1
  %init: f32 = const 0.0
  %acc: f32 = for %i: i32 = %zero to %n step %one iter(%s: f32 = %init) {
    %w: f32 = read %m, %i
    %t: f32 = mul %w, %x
    %s2: f32 = add %s, %t
    yield %s2
  }
  return %acc
}
";

    fn module() -> Module {
        let m = parse_module(SRC).expect("test source parses");
        crate::verify_module(&m).expect("test source verifies");
        m
    }

    fn get<'m>(m: &'m Module, name: &str) -> &'m Program {
        m.get(name).expect("program in the test source")
    }

    /// Checks that `r` verifies (next to `m`'s other programs, for calls), round-trips
    /// through the text format and has no garbage; returns a module holding it and `m`'s
    /// other programs.
    fn check(m: &Module, r: &Program) -> Module {
        let mut out = Module::new();
        out.programs
            .extend(m.programs.iter().filter(|p| p.name != r.name).cloned());
        out.programs.push(r.clone());
        if let Err(e) = crate::verify_program(&out, r) {
            panic!("{e}\n{}", print_program(r));
        }
        let text = print_program(r);
        let back = crate::parse_program(&text).expect("printed program parses");
        assert_eq!(print_program(&back), text);
        assert_eq!(r.num_ops(), util::placed_ops(r).len(), "garbage ops");
        assert_eq!(
            r.num_values(),
            util::compact(r).num_values(),
            "garbage values"
        );
        out
    }

    fn run(m: &Module, name: &str, args: &[Const]) -> Vec<Const> {
        let args: Vec<Arg> = args.iter().map(|&c| Arg::Value(c)).collect();
        Interpreter::new(m)
            .run_element(name, &args, &[0], &[1])
            .expect("runs")
    }

    fn f(x: f32) -> Const {
        Const::f32(x)
    }

    fn names(p: &Program) -> Vec<String> {
        (0..p.params.len()).map(|i| describe_param(p, i)).collect()
    }

    #[test]
    fn bind_captures_a_constant() {
        let m = module();
        let r = bind(get(&m, "f"), "a", &f(2.5)).unwrap();
        assert_eq!(names(&r), ["%x: f32"]);
        assert_eq!(r.name, "f");
        assert!(print_program(&r).contains("%a: f32 = const 2.5"));
        let rm = check(&m, &r);
        assert_eq!(run(&rm, "f", &[f(3.0)]), run(&m, "f", &[f(3.0), f(2.5)]));
        // A varying input too, by `%name`.
        let r = bind(get(&m, "g"), "%u", &f(10.0)).unwrap();
        let rm = check(&m, &r);
        assert_eq!(run(&rm, "g", &[f(4.0)]), vec![f(14.0), f(6.0)]);
    }

    #[test]
    fn bind_errors() {
        let m = module();
        let e = bind(get(&m, "f"), "a", &Const::i32(2)).unwrap_err();
        assert_eq!((e.operation, e.position), ("bind", Some(1)));
        assert_eq!(e.programs, ["f"]);
        assert!(
            e.message.contains("f32") && e.message.contains("i32"),
            "{e}"
        );
        let e = bind(get(&m, "f"), "z", &f(1.0)).unwrap_err();
        assert!(e.to_string().contains("no input `%z`"), "{e}");
        assert!(e.message.contains("uniform %a: f32"), "{e}");
        let e = bind(get(&m, "unused"), "m", &f(1.0)).unwrap_err();
        assert!(e.message.contains("use bind_array"), "{e}");
    }

    #[test]
    fn bind_uniform_and_unbind() {
        let m = module();
        let r = bind_uniform(get(&m, "g"), "v").unwrap();
        assert_eq!(names(&r), ["%u: f32", "uniform %v: f32"]);
        let rm = check(&m, &r);
        let args = [f(5.0), f(2.0)];
        assert_eq!(run(&rm, "g", &args), run(&m, "g", &args));
        let back = unbind(&r, "v").unwrap();
        check(&m, &back);
        assert_eq!(print_program(&back), print_program(get(&m, "g")));

        let e = bind_uniform(get(&m, "f"), "a").unwrap_err();
        assert_eq!((e.operation, e.position), ("bind_uniform", Some(1)));
        assert!(e.message.contains("is uniform, not varying"), "{e}");
        let e = bind_uniform(get(&m, "unused"), "m").unwrap_err();
        assert!(e.message.contains("is array, not varying"), "{e}");
        let e = unbind(get(&m, "f"), "x").unwrap_err();
        assert_eq!((e.operation, e.position), ("unbind", Some(0)));
        assert!(e.message.contains("is varying, not uniform"), "{e}");
        assert!(unbind(get(&m, "f"), "nope").is_err());
    }

    #[test]
    fn compose_feeds_outputs_to_varying_inputs() {
        let m = module();
        let (h, g) = (get(&m, "h"), get(&m, "g"));
        let r = compose(h, g).unwrap();
        assert_eq!(r.name, "h_g");
        assert_eq!(names(&r), ["%u: f32", "%v: f32", "uniform %a: f32"]);
        assert_eq!(r.outputs, h.outputs);
        let rm = check(&m, &r);
        let (u, v, a) = (f(5.0), f(3.0), f(0.25));
        let gv = run(&m, "g", &[u, v]);
        let want = run(&m, "h", &[gv[0], gv[1], a]);
        assert_eq!(run(&rm, "h_g", &[u, v, a]), want);
        assert_eq!(want, vec![f(4.25)]);
    }

    #[test]
    fn compose_shares_and_renames_inputs() {
        let m = module();
        // Two stages share `uniform %dt`.
        let r = compose(get(&m, "s2"), get(&m, "s1")).unwrap();
        assert_eq!(names(&r), ["%x: f32", "uniform %dt: f32"]);
        let rm = check(&m, &r);
        assert_eq!(run(&rm, "s2_s1", &[f(1.0), f(3.0)]), vec![f(12.0)]);
        // A varying input whose name is taken is renamed.
        let r = compose(get(&m, "g"), get(&m, "nv")).unwrap();
        assert_eq!(names(&r), ["%v: f32", "%v.1: f32"]);
        let rm = check(&m, &r);
        assert_eq!(run(&rm, "g_nv", &[f(2.0), f(7.0)]), vec![f(5.0), f(-9.0)]);
        // The same name with another type is an error.
        let e = compose(get(&m, "s3"), get(&m, "s1")).unwrap_err();
        assert_eq!((e.operation, e.position), ("compose", Some(1)));
        assert_eq!(e.programs, ["s3", "s1"]);
        assert!(
            e.message.contains("@s3") && e.message.contains("@s1"),
            "{e}"
        );
        assert!(
            e.message.contains("i32") && e.message.contains("f32"),
            "{e}"
        );
    }

    #[test]
    fn compose_errors() {
        let m = module();
        let e = compose(get(&m, "k"), get(&m, "g")).unwrap_err();
        assert_eq!(e.programs, ["k", "g"]);
        assert_eq!(e.position, Some(1));
        assert_eq!(
            e.to_string(),
            "compose(@k, @g): output 1 of @g (f32) feeds varying input 1 `%y` of @k, which is i32"
        );
        let e = compose(get(&m, "f"), get(&m, "g")).unwrap_err();
        assert_eq!(e.position, Some(1));
        assert!(
            e.message
                .contains("@g has 2 outputs but @f has only 1 varying inputs"),
            "{e}"
        );
    }

    #[test]
    fn compose_with_calls_verifies_next_to_the_callee() {
        let m = module();
        let u = get(&m, "usesq");
        let r = compose(u, u).unwrap();
        let rm = check(&m, &r);
        assert_eq!(run(&rm, "usesq_usesq", &[f(2.0)]), vec![f(26.0)]);
    }

    #[test]
    fn bundle_concatenates() {
        let m = module();
        let r = bundle(&[get(&m, "f"), get(&m, "g")]).unwrap();
        assert_eq!(r.name, "f_g");
        assert_eq!(
            names(&r),
            ["%x: f32", "uniform %a: f32", "%u: f32", "%v: f32"]
        );
        let outs: Vec<String> = (0..3).map(|i| r.output_name(i)).collect();
        assert_eq!(outs, ["y", "s", "d"]);
        let rm = check(&m, &r);
        let got = run(&rm, "f_g", &[f(2.0), f(3.0), f(5.0), f(1.0)]);
        let mut want = run(&m, "f", &[f(2.0), f(3.0)]);
        want.extend(run(&m, "g", &[f(5.0), f(1.0)]));
        assert_eq!(got, want);
        // A program with itself: the uniform is shared, the varying input renamed, and
        // so is the output.
        let fp = get(&m, "f");
        let r = bundle(&[fp, fp]).unwrap();
        assert_eq!(r.name, "f_f");
        assert_eq!(names(&r), ["%x: f32", "uniform %a: f32", "%x.1: f32"]);
        let outs: Vec<String> = (0..2).map(|i| r.output_name(i)).collect();
        assert_eq!(outs, ["y", "y_1"]);
        let rm = check(&m, &r);
        assert_eq!(
            run(&rm, "f_f", &[f(2.0), f(3.0), f(4.0)]),
            [f(6.0), f(12.0)]
        );
        // Errors.
        let e = bundle(&[]).unwrap_err();
        assert_eq!(e.operation, "bundle");
        let e = bundle(&[get(&m, "s1"), get(&m, "s3")]).unwrap_err();
        assert_eq!((e.position, e.programs.len()), (Some(1), 2));
        assert!(e.message.contains("`uniform %dt: i32` of @s3"), "{e}");
        assert!(e.message.contains("`uniform %dt: f32` of @s1"), "{e}");
    }

    #[test]
    fn keep_and_drop_specialize() {
        let m = module();
        let g = get(&m, "g");
        let r = keep(g, &["d"]).unwrap();
        assert_eq!(r.outputs.len(), 1);
        assert_eq!(r.output_name(0), "d");
        let rm = check(&m, &r);
        assert_eq!(run(&rm, "g", &[f(5.0), f(1.0)]), [f(4.0)]);
        // By position, reordered.
        let r = keep(g, &["1", "0"]).unwrap();
        let rm = check(&m, &r);
        assert_eq!(run(&rm, "g", &[f(5.0), f(1.0)]), [f(4.0), f(6.0)]);
        let r = drop_outputs(g, &["s"]).unwrap();
        let rm = check(&m, &r);
        assert_eq!(run(&rm, "g", &[f(5.0), f(1.0)]), [f(4.0)]);
        // Inputs may disappear.
        let r = keep(get(&m, "two"), &["y"]).unwrap();
        let rm = check(&m, &r);
        assert_eq!(run(&rm, "two", &[f(3.0)]), [f(9.0)]);
        let r = keep(g, &[]).unwrap();
        check(&m, &r);
        assert!(r.outputs.is_empty());
    }

    #[test]
    fn keep_removes_work_and_inputs() {
        let m = module();
        let r = keep(get(&m, "two"), &["y"]).unwrap();
        check(&m, &r);
        assert_eq!(names(&r), ["%b: f32"]);
        assert_eq!(util::count_ops(&r, Opcode::Neg), 0);
        let r = drop_outputs(get(&m, "g"), &["d"]).unwrap();
        assert_eq!(util::count_ops(&r, Opcode::Sub), 0);
    }

    #[test]
    fn keep_and_drop_errors() {
        let m = module();
        let g = get(&m, "g");
        let e = keep(g, &["z"]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "keep(@g): @g has no output `z` (outputs: s, d)"
        );
        let e = drop_outputs(g, &["2"]).unwrap_err();
        assert_eq!(e.operation, "drop_outputs");
        assert!(e.message.contains("no output `2`"), "{e}");
        let e = keep(g, &["s", "0"]).unwrap_err();
        assert_eq!(e.position, Some(0));
        assert!(e.message.contains("named twice"), "{e}");
    }

    #[test]
    fn swizzle_inputs_reorders_varying_inputs() {
        let m = module();
        let h = get(&m, "h");
        let r = swizzle_inputs(h, &[1, 0]).unwrap();
        assert_eq!(r.name, "h");
        assert_eq!(names(&r), ["%q: f32", "%p: f32", "uniform %a: f32"]);
        let rm = check(&m, &r);
        let (p, q, a) = (f(6.0), f(3.0), f(1.0));
        assert_eq!(run(&rm, "h", &[q, p, a]), run(&m, "h", &[p, q, a]));
        assert_eq!(util::placed_ops(&r).len(), util::placed_ops(h).len());
        // Uniforms before the varying inputs move after them.
        let sax = parse_module(
            "program @saxpy(uniform %a: f32, %x: f32, %y: f32) -> (r: f32) {\n  \
             %ax: f32 = mul %a, %x\n  %r: f32 = add %ax, %y\n  return %r\n}\n",
        )
        .unwrap();
        let r = swizzle_inputs(get(&sax, "saxpy"), &[1, 0]).unwrap();
        assert_eq!(names(&r), ["%y: f32", "%x: f32", "uniform %a: f32"]);
        let rm = check(&sax, &r);
        let want = run(&sax, "saxpy", &[f(2.0), f(3.0), f(4.0)]);
        assert_eq!(run(&rm, "saxpy", &[f(4.0), f(3.0), f(2.0)]), want);
        // Errors.
        for (order, pos) in [(&[0, 0][..], 1), (&[0][..], 1), (&[2, 0][..], 0)] {
            let e = swizzle_inputs(h, order).unwrap_err();
            assert_eq!((e.operation, e.position), ("swizzle_inputs", Some(pos)));
            assert!(e.message.contains("not a permutation"), "{e}");
        }
    }

    #[test]
    fn adapters_compose() {
        let m = module();
        let ty = Type::f32();
        // dup: g(x, x).
        let d = adapters::dup(ty, 2).unwrap();
        assert_eq!(d.name, "dup");
        let dm = check(&m, &d);
        assert_eq!(run(&dm, "dup", &[f(1.5)]), [f(1.5), f(1.5)]);
        let r = compose(get(&m, "g"), &d).unwrap();
        let rm = check(&m, &r);
        assert_eq!(run(&rm, "g_dup", &[f(4.0)]), [f(8.0), f(0.0)]);
        // keep: the identity.
        let k = adapters::keep(ty).unwrap();
        let r = compose(get(&m, "f"), &k).unwrap();
        assert_eq!(names(&r), ["%in0: f32", "uniform %a: f32"]);
        let rm = check(&m, &r);
        assert_eq!(run(&rm, "f_keep", &[f(2.0), f(3.0)]), [f(6.0)]);
        // lose: an extra input that nothing reads.
        let l = adapters::lose(ty).unwrap();
        assert!(l.outputs.is_empty());
        let r = compose(get(&m, "f"), &l).unwrap();
        assert_eq!(names(&r), ["%in0: f32", "%x: f32", "uniform %a: f32"]);
        let rm = check(&m, &r);
        assert_eq!(run(&rm, "f_lose", &[f(9.0), f(2.0), f(3.0)]), [f(6.0)]);
        // swizzle: a general one (repeat, omit).
        let i32t = Type::i32();
        let s = adapters::swizzle(&[ty, i32t], &[1, 0, 1]).unwrap();
        let sm = check(&m, &s);
        let out = run(&sm, "swizzle", &[f(1.0), Const::i32(7)]);
        assert_eq!(out, [Const::i32(7), f(1.0), Const::i32(7)]);
        // The swizzled pair feeds @k(%x: f32, %y: i32).
        let s = adapters::swizzle(&[i32t, ty], &[1, 0]).unwrap();
        let r = compose(get(&m, "k"), &s).unwrap();
        let rm = check(&m, &r);
        assert_eq!(run(&rm, "k_swizzle", &[Const::i32(2), f(0.5)]), [f(2.5)]);
    }

    #[test]
    fn adapter_errors() {
        let e = adapters::swizzle(&[Type::f32()], &[0, 1]).unwrap_err();
        assert_eq!((e.operation, e.position), ("swizzle", Some(1)));
        assert!(adapters::dup(Type::f32(), 0).is_err());
        let arr = Type::array(1, Type::f32(), crate::Boundary::Clamp).unwrap();
        let e = adapters::keep(arr).unwrap_err();
        assert!(e.message.contains("array type"), "{e}");
        assert!(adapters::lose(arr).is_err());
    }

    #[test]
    fn bind_array_checks() {
        let m = module();
        let arr = HostArray::from_f32(&[1.0, 2.0]);
        // An array nothing reads just disappears.
        let r = bind_array(get(&m, "unused"), "m", &arr).unwrap();
        assert_eq!(names(&r), ["%x: f32"]);
        let rm = check(&m, &r);
        assert_eq!(run(&rm, "unused", &[f(2.0)]), [f(-2.0)]);
        // A read at a varying coordinate cannot be bound.
        let e = bind_array(get(&m, "dyn"), "m", &arr).unwrap_err();
        assert_eq!((e.operation, e.position), ("bind_array", Some(0)));
        assert!(e.message.contains("constant coordinates"), "{e}");
        assert!(e.message.contains("@dyn"), "{e}");
        // Element type, rank and data length must fit.
        let ints = HostArray::zeros(Type::i32(), &[2]);
        let e = bind_array(get(&m, "dyn"), "m", &ints).unwrap_err();
        assert!(e.message.contains("array<1 x f32, clamp>"), "{e}");
        let flat = HostArray::zeros(Type::f32(), &[2, 2]);
        let e = bind_array(get(&m, "dyn"), "m", &flat).unwrap_err();
        assert!(e.message.contains("2 axes"), "{e}");
        let mut short = arr.clone();
        short.data.pop();
        assert!(bind_array(get(&m, "dyn"), "m", &short).is_err());
        // Not an array.
        let e = bind_array(get(&m, "dyn"), "i", &arr).unwrap_err();
        assert!(e.message.contains("use bind"), "{e}");
    }

    #[test]
    fn bind_array_folds_reads() {
        let m = module();
        let mask = HostArray::from_f32(&[0.5, 0.0, 2.0]);
        let r = bind_array(get(&m, "taps"), "m", &mask).unwrap();
        assert_eq!(names(&r), ["%x: f32"]);
        let rm = check(&m, &r);
        assert_eq!(util::count_ops(&r, Opcode::Read), 0);
        assert_eq!(util::count_ops(&r, Opcode::For), 0);
        let x = f(3.0);
        let args = [Arg::Array(std::sync::Arc::new(mask)), Arg::Value(x)];
        let want = Interpreter::new(&m)
            .run_element("taps", &args, &[0], &[1])
            .unwrap();
        assert_eq!(run(&rm, "taps", &[x]), want);
    }
}
