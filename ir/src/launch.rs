//! Launch planning shared by every device (DESIGN §5): checks an apply's inputs against the
//! program's parameters and determines the launch shape.

use crate::host::{Input, RunError};
use crate::opcode::Opcode;
use crate::program::{Module, ParamKind, Program};
use crate::{Const, Type};

/// What an apply passes for one parameter, described without its data: an array's element
/// type and shape, or a uniform value. Devices whose arrays are not [`crate::HostArray`]s (the
/// `weft` library's plane buffers) plan launches from these.
#[derive(Clone, Debug)]
pub enum ArgDesc<'a> {
    /// An array (for a varying or array parameter).
    Array {
        /// Element type.
        elem: Type,
        /// Extent of each axis, outermost first.
        shape: &'a [usize],
    },
    /// A single value (for a uniform parameter).
    Uniform(Const),
}

impl<'a> ArgDesc<'a> {
    /// The description of `input`.
    pub fn of(input: &'a Input) -> ArgDesc<'a> {
        match input {
            Input::Array(a) => ArgDesc::Array {
                elem: a.elem,
                shape: &a.shape,
            },
            Input::Uniform(c) => ArgDesc::Uniform(*c),
        }
    }
}

/// What a device does before compiling: finds program `name` in `m`, checks `inputs`
/// ([`plan_launch`]) and the launch rank against `index`/`shape` ([`check_launch_rank`]).
/// Returns the program, the launch shape and its element count.
pub fn plan_program_launch<'m>(
    m: &'m Module,
    name: &str,
    inputs: &[Input],
    shape: Option<&[usize]>,
) -> Result<(&'m Program, Vec<usize>, usize), RunError> {
    if let Some(p) = m.get(name) {
        check_host_inputs(p, inputs)?;
    }
    let descs: Vec<ArgDesc> = inputs.iter().map(ArgDesc::of).collect();
    plan_program_launch_desc(m, name, &descs, shape)
}

/// [`plan_program_launch`] from argument descriptions.
pub fn plan_program_launch_desc<'m>(
    m: &'m Module,
    name: &str,
    inputs: &[ArgDesc],
    shape: Option<&[usize]>,
) -> Result<(&'m Program, Vec<usize>, usize), RunError> {
    let p = m
        .get(name)
        .ok_or_else(|| RunError::UnknownProgram(name.to_string()))?;
    let (launch, n) = plan_launch_desc(p, inputs, shape)?;
    check_launch_rank(m, p, launch.len())?;
    Ok((p, launch, n))
}

/// Checks `inputs` (one per parameter) against `p` and returns the launch shape and its
/// element count: the shape shared by every varying input, or `shape` when there is none.
/// Errors name the first offending input.
pub fn plan_launch(
    p: &Program,
    inputs: &[Input],
    shape: Option<&[usize]>,
) -> Result<(Vec<usize>, usize), RunError> {
    check_host_inputs(p, inputs)?;
    let descs: Vec<ArgDesc> = inputs.iter().map(ArgDesc::of).collect();
    plan_launch_desc(p, &descs, shape)
}

/// Checks that every host array among `inputs` holds as many elements as its shape says
/// ([`HostArray::check`](crate::HostArray::check)): the arrays' data is about to be read by
/// element number. Errors name the parameter.
pub fn check_host_inputs(p: &Program, inputs: &[Input]) -> Result<(), RunError> {
    for (i, inp) in inputs.iter().enumerate() {
        if let Input::Array(a) = inp {
            a.check().map_err(|message| RunError::BadInput {
                program: p.name.clone(),
                param: param_label(p, i),
                message,
            })?;
        }
    }
    Ok(())
}

/// Parameter `i`'s name, or `#i` past the parameter list.
fn param_label(p: &Program, i: usize) -> String {
    if i < p.params.len() {
        p.param_name(i).to_string()
    } else {
        format!("#{i}")
    }
}

/// Checks a kernel launch's host arguments: [`check_kernel_args`] on their descriptions,
/// then that each array holds as many elements as its shape says (kernels index buffers by
/// element number, so a lying shape would be an out-of-bounds store).
pub fn check_kernel_host_args(p: &Program, args: &[crate::KernelArg]) -> Result<(), RunError> {
    let descs: Vec<ArgDesc> = args
        .iter()
        .map(|a| match a {
            crate::KernelArg::Value(c) => ArgDesc::Uniform(*c),
            crate::KernelArg::Array(h) => ArgDesc::Array {
                elem: h.elem,
                shape: &h.shape,
            },
            crate::KernelArg::Buffer(h) => ArgDesc::Array {
                elem: h.elem,
                shape: &h.shape,
            },
        })
        .collect();
    check_kernel_args(p, &descs)?;
    for (i, a) in args.iter().enumerate() {
        if let Some(h) = a.array() {
            h.check().map_err(|message| RunError::BadInput {
                program: p.name.clone(),
                param: param_label(p, i),
                message,
            })?;
        }
    }
    Ok(())
}

/// [`plan_launch`] from argument descriptions.
pub fn plan_launch_desc(
    p: &Program,
    inputs: &[ArgDesc],
    shape: Option<&[usize]>,
) -> Result<(Vec<usize>, usize), RunError> {
    if p.kind == crate::program::ProgramKind::Kernel {
        return Err(RunError::Launch {
            program: p.name.clone(),
            message: "is a kernel: run it with a grid and block, not over arrays".into(),
        });
    }
    if inputs.len() != p.params.len() {
        return Err(RunError::ArgCount {
            program: p.name.clone(),
            expected: p.params.len(),
            got: inputs.len(),
        });
    }
    if let Some(s) = shape {
        if !(1..=3).contains(&s.len()) {
            return Err(RunError::Launch {
                program: p.name.clone(),
                message: format!(
                    "launch shape {s:?} has {} axes; launches have 1 to 3",
                    s.len()
                ),
            });
        }
    }
    // The launch shape and the input it came from (none: the explicit shape); nothing is
    // allocated unless an error is reported.
    let mut launch: Option<&[usize]> = shape;
    let mut launch_from: Option<usize> = None;
    for (i, (par, inp)) in p.params.iter().zip(inputs).enumerate() {
        let ty = p.ty(par.value);
        let bad = |m: String| RunError::BadInput {
            program: p.name.clone(),
            param: p.param_name(i).to_string(),
            message: m,
        };
        match (par.kind, inp) {
            (ParamKind::Array, ArgDesc::Array { elem, shape }) => {
                check_array_desc(ty, *elem, shape).map_err(bad)?
            }
            (ParamKind::Array, ArgDesc::Uniform(_)) => return Err(bad("expects an array".into())),
            (ParamKind::Buffer, _) => {
                return Err(bad(
                    "is a kernel buffer: kernels run with a grid and block, not applied".into(),
                ))
            }
            (ParamKind::Uniform, ArgDesc::Uniform(c))
            | (ParamKind::Varying, ArgDesc::Uniform(c)) => {
                if c.ty != ty {
                    return Err(bad(format!("expects {ty}, got {}", c.ty)));
                }
                if par.kind == ParamKind::Varying {
                    return Err(bad("is varying: give an array, not a single value".into()));
                }
            }
            (ParamKind::Uniform, ArgDesc::Array { .. }) => {
                return Err(bad(format!(
                    "is uniform: give one {ty} value, not an array"
                )))
            }
            (
                ParamKind::Varying,
                ArgDesc::Array {
                    elem,
                    shape: ashape,
                },
            ) => {
                if *elem != ty {
                    return Err(bad(format!("expects elements of type {ty}, got {elem}")));
                }
                if !(1..=3).contains(&ashape.len()) {
                    return Err(bad(format!(
                        "has {} axes; launches have 1 to 3",
                        ashape.len()
                    )));
                }
                match launch {
                    None => {
                        launch = Some(ashape);
                        launch_from = Some(i);
                    }
                    Some(s) if s != *ashape => {
                        let from = match launch_from {
                            Some(j) => format!("input `{}`", p.param_name(j)),
                            None => "the explicit shape".to_string(),
                        };
                        return Err(bad(format!(
                            "has shape {ashape:?} but {from} has shape {s:?}"
                        )));
                    }
                    Some(_) => {}
                }
            }
        }
    }
    let Some(launch) = launch else {
        return Err(RunError::Launch {
            program: p.name.clone(),
            message: "no varying input, so the launch shape must be given".into(),
        });
    };
    let too_big = || RunError::Launch {
        program: p.name.clone(),
        message: format!("launch shape {launch:?} is too large to allocate its outputs"),
    };
    let n = crate::host::shape_len(launch)
        .ok()
        .filter(|&n| n <= isize::MAX as usize / 64)
        .ok_or_else(too_big)?;
    Ok((launch.to_vec(), n))
}

/// Checks an array argument of element type `elem` and `shape` against array type `ty`.
fn check_array_desc(ty: Type, elem: Type, shape: &[usize]) -> Result<(), String> {
    let Some((dims, want, _)) = ty.array_parts() else {
        return Err(format!("has non-array type {ty}"));
    };
    if shape.len() != dims as usize {
        return Err(format!(
            "expects a {dims}-D array, got {} axes (shape {:?})",
            shape.len(),
            shape
        ));
    }
    if elem != want {
        return Err(format!("expects elements of type {want}, got {elem}"));
    }
    crate::host::shape_len(shape)?;
    Ok(())
}

/// Checks that every `index`/`shape` op of `p` (and of the programs it calls) and every
/// `read_offset`'s offset has as many lanes as the launch has axes.
pub fn check_launch_rank(m: &Module, p: &Program, rank: usize) -> Result<(), RunError> {
    let mut bad = None;
    for q in m.reachable(p) {
        q.walk(&mut |op| {
            let d = q.op(op);
            if bad.is_none() && (d.opcode.reads_index() || d.opcode == Opcode::Shape) {
                // `read_offset`'s offset has a lane per axis, as `index` has.
                let v = match d.opcode {
                    Opcode::ReadOffset => d.args.get(1).copied(),
                    _ => d.results.first().copied(),
                };
                let l = v.map_or(1, |v| q.ty(v).lanes().map_or(1, |x| x.1 as usize));
                if l != rank {
                    bad = Some(format!(
                        "`{}` has {l} lane(s) but the launch has {rank} axes",
                        d.opcode.mnemonic()
                    ));
                }
            }
        });
    }
    match bad {
        Some(message) => Err(RunError::Launch {
            program: p.name.clone(),
            message,
        }),
        None => Ok(()),
    }
}

/// A structural hash of a module (every program: signature, ops, operands, immediates,
/// types, value numbering), for kernel caches: equal modules hash equally, and it costs a
/// walk of the IR, not a print.
pub fn fingerprint(m: &Module) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for p in &m.programs {
        p.name.hash(&mut h);
        for par in &p.params {
            (par.kind as u8, p.ty(par.value), par.value.0).hash(&mut h);
        }
        for o in &p.outputs {
            (&o.name, o.ty).hash(&mut h);
        }
        p.walk(&mut |op| {
            let d = p.op(op);
            d.opcode.hash(&mut h);
            d.imm.hash(&mut h);
            for &a in &d.args {
                a.0.hash(&mut h);
            }
            for &r in &d.results {
                (r.0, p.ty(r)).hash(&mut h);
            }
            for &r in &d.regions {
                for &a in &p.region(r).args {
                    (a.0, p.ty(a)).hash(&mut h);
                }
                p.region(r).ops.len().hash(&mut h);
            }
        });
    }
    h.finish()
}

/// The most work-items one work-group may have (CUDA's limit; the CPU backends keep
/// per-work-item values of a group in memory, sized by it).
pub const MAX_GROUP_SIZE: usize = 1024;

/// A kernel launch's geometry (DESIGN §2, kernel mode): work-groups per axis and work-items
/// per work-group per axis, x first (CUDA's `gridDim`/`blockDim`, OpenCL's global size
/// divided by the local size). Missing axes are 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KernelGrid {
    /// Work-groups on the x, y and z axes.
    pub groups: [u32; 3],
    /// Work-items per work-group on the x, y and z axes.
    pub block: [u32; 3],
}

impl KernelGrid {
    /// A grid of `groups` work-groups of `block` work-items (1 to 3 axes each, x first).
    /// Errors: an axis of 0, more than 3 axes, more than [`MAX_GROUP_SIZE`] work-items per
    /// group, or more than 2^31 - 1 groups.
    pub fn new(groups: &[u32], block: &[u32]) -> Result<KernelGrid, String> {
        let fill = |xs: &[u32], what: &str| -> Result<[u32; 3], String> {
            if xs.is_empty() || xs.len() > 3 {
                return Err(format!("{what} needs 1 to 3 axes, got {}", xs.len()));
            }
            if xs.contains(&0) {
                return Err(format!("{what} {xs:?} has an axis of 0"));
            }
            let mut out = [1u32; 3];
            out[..xs.len()].copy_from_slice(xs);
            Ok(out)
        };
        let g = KernelGrid {
            groups: fill(groups, "the grid")?,
            block: fill(block, "the block")?,
        };
        if g.group_size() > MAX_GROUP_SIZE {
            return Err(format!(
                "a block of {:?} has {} work-items; at most {MAX_GROUP_SIZE} are allowed",
                block,
                g.group_size()
            ));
        }
        if g.num_groups() > i32::MAX as usize {
            return Err(format!(
                "a grid of {groups:?} has more than 2^31 - 1 work-groups"
            ));
        }
        Ok(g)
    }

    /// Work-items per work-group.
    pub fn group_size(&self) -> usize {
        self.block.iter().map(|&x| x as usize).product()
    }

    /// Work-groups in the grid.
    pub fn num_groups(&self) -> usize {
        self.groups.iter().map(|&x| x as usize).product()
    }
}

/// Checks a kernel launch's arguments (one per parameter) against kernel `p`: uniforms
/// get a value of their type, array and buffer parameters an array of their element type
/// and rank. Errors name the parameter.
pub fn check_kernel_args(p: &Program, args: &[ArgDesc]) -> Result<(), RunError> {
    if p.kind != crate::program::ProgramKind::Kernel {
        return Err(RunError::Launch {
            program: p.name.clone(),
            message: "is a map program: apply it over arrays, not with a grid and block".into(),
        });
    }
    if args.len() != p.params.len() {
        return Err(RunError::ArgCount {
            program: p.name.clone(),
            expected: p.params.len(),
            got: args.len(),
        });
    }
    for (i, (par, a)) in p.params.iter().zip(args).enumerate() {
        let ty = p.ty(par.value);
        let bad = |m: String| RunError::BadInput {
            program: p.name.clone(),
            param: p.param_name(i).to_string(),
            message: m,
        };
        match (par.kind.is_array(), a) {
            (true, ArgDesc::Array { elem, shape }) => {
                check_array_desc(ty, *elem, shape).map_err(bad)?
            }
            (true, ArgDesc::Uniform(_)) => return Err(bad("expects an array".into())),
            (false, ArgDesc::Uniform(c)) if c.ty == ty => {}
            (false, ArgDesc::Uniform(c)) => return Err(bad(format!("expects {ty}, got {}", c.ty))),
            (false, ArgDesc::Array { .. }) => {
                return Err(bad(format!(
                    "is uniform: give one {ty} value, not an array"
                )))
            }
        }
    }
    Ok(())
}

/// A uniform parameter [`launch_part`] adds, in order, after the program's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PartParam {
    /// The part's first coordinates in the whole launch, `(row, 0, …)`, of this type (the
    /// type of some `index` op: i32 or i64 lanes, one per axis).
    Origin(Type),
    /// The whole launch's shape, of this type (the type of some `shape` op).
    Shape(Type),
}

impl PartParam {
    /// The parameter's value for a part whose first row is `row` of a launch of `shape`.
    ///
    /// # Errors
    /// A coordinate that does not fit the parameter's lane type.
    pub fn value(&self, row: usize, shape: &[usize]) -> Result<Const, RunError> {
        let (ty, lanes): (Type, Vec<usize>) = match *self {
            PartParam::Origin(t) => {
                let mut v = vec![0; shape.len()];
                if let Some(first) = v.first_mut() {
                    *first = row;
                }
                (t, v)
            }
            PartParam::Shape(t) => (t, shape.to_vec()),
        };
        let (s, n) = ty.lanes().unwrap_or((ty.elem_scalar(), 1));
        let too_big = || RunError::Launch {
            program: String::new(),
            message: format!("launch coordinate does not fit {ty}"),
        };
        let bits = (0..n as usize)
            .map(|k| {
                let x = lanes.get(k).copied().unwrap_or(0);
                match s.bits() {
                    32 => i32::try_from(x)
                        .map(|x| x as u32 as u64)
                        .map_err(|_| too_big()),
                    _ => i64::try_from(x).map(|x| x as u64).map_err(|_| too_big()),
                }
            })
            .collect::<Result<Vec<u64>, RunError>>()?;
        Ok(Const::from_lanes(ty, &bits))
    }
}

/// The name of the `k`-th parameter [`launch_part`] adds.
fn part_param_name(k: usize, p: PartParam) -> String {
    match p {
        PartParam::Origin(_) => format!("weft.part_origin{k}"),
        PartParam::Shape(_) => format!("weft.launch_shape{k}"),
    }
}

/// Program `name` of `m` made to run one part of a launch split along its first axis (a
/// device group, issue 27): a copy of `m` in which the program's calls are inlined, every
/// `index` becomes `index + origin` and every `shape` the whole launch's shape, `origin`
/// and the shape being new trailing uniform parameters (one per distinct type of the
/// `index` and `shape` ops, listed in the returned order). A part launched over rows
/// `b..e` of the first axis, its varying inputs cut to those rows, then computes what the
/// whole launch computes at those elements, bit for bit. `None` when there is no such map
/// program.
pub fn launch_part(m: &Module, name: &str) -> Option<(Module, Vec<PartParam>)> {
    let mut m = m.clone();
    crate::passes::inline::inline_reachable(&mut m, name);
    let pi = m.position(name)?;
    let p = &mut m.programs[pi];
    if p.kind == crate::program::ProgramKind::Kernel {
        return None;
    }
    let mut params: Vec<(PartParam, crate::program::Value)> = Vec::new();
    let mut regions = vec![p.body];
    while let Some(r) = regions.pop() {
        let ops = p.region(r).ops.clone();
        let mut out = Vec::with_capacity(ops.len());
        for op in ops {
            regions.extend(p.op(op).regions.iter().copied());
            out.push(op);
            let opcode = p.op(op).opcode;
            if !matches!(opcode, Opcode::Index | Opcode::Shape) {
                continue;
            }
            let v = p.op(op).results[0];
            let ty = p.ty(v);
            let want = if opcode == Opcode::Index {
                PartParam::Origin(ty)
            } else {
                PartParam::Shape(ty)
            };
            let param = match params.iter().find(|(q, _)| *q == want) {
                Some(&(_, pv)) => pv,
                None => {
                    let k = params.len();
                    let pv = p.add_param(ParamKind::Uniform, part_param_name(k, want), ty);
                    params.push((want, pv));
                    pv
                }
            };
            if opcode == Opcode::Shape {
                // Uses of the launch's shape read the whole launch's instead.
                out.pop();
                let body = p.body;
                crate::builder::replace_uses(p, body, v, param);
                continue;
            }
            // `v = index` becomes `i = index; v = add i, origin`.
            let i = p.new_value(ty, None, crate::program::ValueDef::Undefined);
            p.op_mut(op).results[0] = i;
            p.value_mut(i).def = crate::program::ValueDef::Result(op, 0);
            let add = p.new_op_with_results(
                Opcode::Add,
                vec![i, param],
                crate::program::Imm::None,
                vec![v],
                vec![],
            );
            out.push(add);
        }
        p.region_mut(r).ops = out;
    }
    let compacted = crate::passes::util::compact(p);
    *p = compacted;
    Some((m, params.into_iter().map(|(q, _)| q).collect()))
}
