//! Running one program of a module over arrays on a device (DESIGN §5): virtual `grid`
//! inputs become the `index` builtin, arrays' boundary modes override the program's, views
//! become contiguous, and the launch runs on the interpreter, the CPU or a GPU over the
//! arrays' own storage (no copies on the CPU; uploads only of what the GPU lacks).

use crate::array::{ArrayData, Part, Parts, Resident, Source, Storage};
use crate::device::{Device, Kind};
use crate::error::{Error, Result};
use std::ops::Range;
use std::sync::{Arc, Mutex, Weak};
use weft_ir::launch::{plan_launch_desc, ArgDesc, PartParam};
use weft_ir::program::{Imm, ValueDef};
use weft_ir::{Const, Module, Opcode, ParamKind, Type};
use weft_runtime::{BufArg, CudaArg, HostBuffer};

/// One argument of a launch: an array (for a varying or array parameter) or a value.
#[derive(Clone)]
pub(crate) enum ArgVal {
    Array(ArrayData),
    Uniform(Const),
}

impl ArgVal {
    fn desc(&self) -> ArgDesc<'_> {
        match self {
            ArgVal::Array(a) => ArgDesc::Array {
                elem: a.elem,
                shape: &a.shape,
            },
            ArgVal::Uniform(c) => ArgDesc::Uniform(*c),
        }
    }
}

/// A launch ready to run: the (possibly rewritten) module, its arguments, the launch shape.
#[derive(Clone)]
pub(crate) struct Prepared {
    pub(crate) module: Arc<Module>,
    /// The program's position in `module`.
    pub(crate) program: usize,
    pub(crate) args: Vec<ArgVal>,
    pub(crate) shape: Vec<usize>,
}

impl Prepared {
    /// The program's name.
    pub(crate) fn name(&self) -> &str {
        &self.module.programs[self.program].name
    }

    /// The element types of the program's outputs.
    fn outputs(&self) -> impl Iterator<Item = Type> + '_ {
        self.module.programs[self.program]
            .outputs
            .iter()
            .map(|o| o.ty)
    }
}

/// Checks `args` against program `name` of `m` and rewrites the module for grid inputs and
/// boundary overrides. Errors name the argument.
pub(crate) fn prepare(
    m: &Arc<Module>,
    name: &str,
    args: Vec<ArgVal>,
    shape: Option<&[usize]>,
) -> Result<Prepared> {
    let p = m
        .get(name)
        .ok_or_else(|| Error::argument(format!("no program @{name} in the module")))?;
    if args.len() != p.params.len() {
        return Err(Error::argument(format!(
            "@{name} takes {} inputs, {} were given",
            p.params.len(),
            args.len()
        )));
    }
    let mut module: Option<Module> = None;
    let mut args = args;
    let mut grid_shape: Option<Vec<usize>> = None;
    // Boundary overrides (an array's mode wins over the program's declaration).
    for (i, a) in args.iter().enumerate() {
        let ArgVal::Array(d) = a else { continue };
        let Some(b) = d.boundary else { continue };
        let mm = module.get_or_insert_with(|| (**m).clone());
        let pi = mm.position(name).expect("found above");
        let pr = &mut mm.programs[pi];
        let par = pr.params[i];
        if par.kind != ParamKind::Array {
            continue;
        }
        if let Some((dims, elem, old)) = pr.ty(par.value).array_parts() {
            if old != b {
                let t = Type::array(dims, elem, b)
                    .ok_or_else(|| Error::argument(format!("input {i}: bad boundary mode")))?;
                pr.value_mut(par.value).ty = t;
            }
        }
    }
    // Grid inputs of varying parameters become `index`; of array parameters, real arrays.
    let mut i = 0;
    while i < args.len() {
        let is_grid = matches!(&args[i], ArgVal::Array(d) if matches!(d.source, Source::Grid));
        if !is_grid {
            i += 1;
            continue;
        }
        let ArgVal::Array(d) = &args[i] else {
            unreachable!()
        };
        let mm = module.get_or_insert_with(|| (**m).clone());
        let pi = mm.position(name).expect("found above");
        let pr = &mut mm.programs[pi];
        let par = pr.params[i];
        if par.kind != ParamKind::Varying {
            let h = d.to_host_buffer()?;
            let mut nd = ArrayData::stored(Storage::from_host(h), d.shape.clone());
            nd.boundary = d.boundary;
            args[i] = ArgVal::Array(nd);
            i += 1;
            continue;
        }
        let ty = pr.ty(par.value);
        if ty != d.elem {
            return Err(Error::argument(format!(
                "input {i} `{}` of @{name}: expects elements of type {ty}, got a grid of {}",
                pr.param_name(i),
                d.elem
            )));
        }
        if grid_shape.as_ref().is_some_and(|s| s[..] != d.shape[..]) {
            return Err(Error::argument(format!(
                "input {i} `{}` of @{name}: grid shape {:?} differs from another grid's {:?}",
                pr.param_name(i),
                d.shape,
                grid_shape.as_ref().expect("checked")
            )));
        }
        grid_shape = Some(d.shape.to_vec());
        let v = par.value;
        let op = pr.new_op_with_results(Opcode::Index, vec![], Imm::None, vec![v], vec![]);
        let body = pr.body;
        pr.region_mut(body).ops.insert(0, op);
        weft_ir::passes::util::remove_param(pr, i);
        debug_assert!(matches!(pr.value(v).def, ValueDef::Result(..)));
        args.remove(i);
    }
    let module = module.map_or_else(|| m.clone(), Arc::new);
    let mut args = args;
    for a in &mut args {
        if let ArgVal::Array(d) = a {
            // Most arrays already are contiguous stored views: kept as they are.
            if !(matches!(d.source, Source::Stored(_)) && d.contiguous()) {
                *d = d.contiguous_view()?;
            }
        }
    }
    let shape = shape.or(grid_shape.as_deref());
    let descs: smallvec::SmallVec<[ArgDesc; 8]> = args.iter().map(ArgVal::desc).collect();
    // The shape only: every device checks the launch rank against the program when it
    // plans a new signature (a walk over the whole program, too slow for every launch).
    let program = module
        .position(name)
        .ok_or_else(|| Error::argument(format!("no program @{name}")))?;
    let (launch, _) = plan_launch_desc(&module.programs[program], &descs, shape)
        .map_err(|e| Error::argument(e.to_string()))?;
    // The descriptions borrow `args`, which the result takes.
    drop(descs);
    Ok(Prepared {
        module,
        program,
        args,
        shape: launch,
    })
}

fn stored(d: &ArrayData) -> &Arc<Storage> {
    match &d.source {
        Source::Stored(s) => s,
        Source::Grid => unreachable!("grids are rewritten by `prepare`"),
    }
}

/// Runs a prepared launch on `dev` now; the outputs live where `dev` runs (on the host for a
/// device group).
pub(crate) fn run(dev: &Device, l: &Prepared) -> Result<Vec<Resident>> {
    let shape = Some(l.shape.as_slice());
    match &*dev.0 {
        Kind::Group(g) => group_launch(dev, g, l, None, false)?
            .iter()
            .map(|d| Ok(Resident::Host(d.to_host_buffer()?)))
            .collect(),
        Kind::Interp { .. } => {
            let ins = l
                .args
                .iter()
                .map(|a| match a {
                    ArgVal::Array(d) => {
                        Ok(weft_ir::interp::Input::Array(Arc::new(d.to_host_array()?)))
                    }
                    ArgVal::Uniform(c) => Ok(weft_ir::interp::Input::Uniform(*c)),
                })
                .collect::<Result<Vec<_>>>()?;
            let outs = dev.0.apply(&l.module, l.name(), &ins, shape)?;
            Ok(outs
                .iter()
                .map(|o| Resident::Host(HostBuffer::from_host_array(o)))
                .collect())
        }
        Kind::Cpu(cpu) => with_host_args(l, |bargs| {
            let prog = cpu.prepare_shared(&l.module, l.name())?;
            let mut launch = cpu.launch_buffers_prepared(&prog, bargs, shape)?;
            launch.run()?;
            Ok(launch
                .into_outputs()
                .into_iter()
                .map(Resident::Host)
                .collect())
        }),
        Kind::Cuda(gpu) => {
            let bufs = l
                .args
                .iter()
                .map(|a| match a {
                    ArgVal::Array(d) => stored(d).cuda(gpu).map(Some),
                    ArgVal::Uniform(_) => Ok(None),
                })
                .collect::<Result<smallvec::SmallVec<[_; 8]>>>()?;
            let cargs: smallvec::SmallVec<[CudaArg; 8]> = l
                .args
                .iter()
                .zip(&bufs)
                .map(|(a, b)| match (a, b) {
                    (ArgVal::Array(d), Some(b)) => CudaArg::Array {
                        buf: b,
                        offset: d.offset,
                        shape: &d.shape,
                    },
                    (ArgVal::Uniform(c), _) => CudaArg::Uniform(*c),
                    (ArgVal::Array(_), None) => unreachable!("device copy made above"),
                })
                .collect();
            let prog = gpu.prepare_shared(&l.module, l.name())?;
            let mut launch = gpu.launch_buffers_prepared(&prog, &cargs, shape)?;
            launch.enqueue()?;
            Ok(launch
                .into_outputs()
                .into_iter()
                .map(Resident::Cuda)
                .collect())
        }
    }
}

/// Calls `f` with launch `l`'s arguments as host buffers (arrays resolved and copied to
/// the host where they are not there yet).
fn with_host_args<R>(l: &Prepared, f: impl FnOnce(&[BufArg]) -> Result<R>) -> Result<R> {
    let hosts = l
        .args
        .iter()
        .map(|a| match a {
            ArgVal::Array(d) => stored(d).host().map(Some),
            ArgVal::Uniform(_) => Ok(None),
        })
        .collect::<Result<smallvec::SmallVec<[_; 8]>>>()?;
    let bargs: smallvec::SmallVec<[BufArg; 8]> = l
        .args
        .iter()
        .zip(&hosts)
        .map(|(a, h)| match (a, h) {
            (ArgVal::Array(d), Some(h)) => BufArg::Array {
                buf: h,
                offset: d.offset,
                shape: &d.shape,
            },
            (ArgVal::Uniform(c), _) => BufArg::Uniform(*c),
            (ArgVal::Array(_), None) => unreachable!("host copy made above"),
        })
        .collect();
    f(&bargs)
}

/// Host buffers `bufs` as arrays of `shape`, but for the one at position `skip`.
fn host_arrays(bufs: Vec<HostBuffer>, skip: Option<usize>, shape: &[usize]) -> Vec<ArrayData> {
    let shape = crate::array::Dims::from_slice(shape);
    bufs.into_iter()
        .enumerate()
        .filter(|(k, _)| Some(*k) != skip)
        .map(|(_, h)| ArrayData::stored(Storage::from_resident(Resident::Host(h)), shape.clone()))
        .collect()
}

/// Runs launch `l` on CPU device `dev` now with its output `output` reduced inside the
/// kernels (`r`: [`weft_runtime::CpuDevice::prepare_reduced`]): the launch's other outputs,
/// and the kernel calls' partial states as a 1-D array of the output's type, which
/// combined with `r.op` in any order give the reduction. `None` when `dev` is not a CPU
/// device compiling with LLVM alone.
pub(crate) fn run_reduced(
    dev: &Device,
    l: &Prepared,
    r: weft_backend_llvm::HostReduce,
) -> Result<Option<(Vec<ArrayData>, ArrayData)>> {
    let Kind::Cpu(cpu) = &*dev.0 else {
        return Ok(None);
    };
    let Some(prog) = cpu.prepare_reduced(&l.module, l.name(), r)? else {
        return Ok(None);
    };
    let (outs, partials) = with_host_args(l, |bargs| {
        let launch = cpu.launch_buffers_prepared(&prog, bargs, Some(&l.shape))?;
        let partials = launch.run_reduced(r.output)?;
        Ok((launch.into_outputs(), partials))
    })?;
    let keep = host_arrays(outs, Some(r.output), &l.shape);
    let n = partials.len();
    let partials = host_arrays(vec![partials], None, &[n]).remove(0);
    Ok(Some((keep, partials)))
}

/// Runs launch `l` on CPU device `dev` now, fused with program `level` of `m` (a reduction
/// level: [`weft_runtime::BufferLaunch::run_fused`]) over `l`'s output `output`, which is not
/// kept: the launch's other outputs, and `level`'s outputs over `level_shape`.
/// `uniforms` are `level`'s parameters after the array it reads; every `span` elements of
/// the output give `per_span` of `level`'s. `None` when `dev` is not a CPU device.
pub(crate) fn run_fused(
    dev: &Device,
    l: &Prepared,
    output: usize,
    (m, level, uniforms): (&Arc<Module>, &str, &[Const]),
    level_shape: usize,
    spans: (usize, usize),
) -> Result<Option<(Vec<ArrayData>, Vec<ArrayData>)>> {
    let Kind::Cpu(cpu) = &*dev.0 else {
        return Ok(None);
    };
    let n: usize = l.shape.iter().product();
    let (outs, levels) = with_host_args(l, |bargs| {
        let prog = cpu.prepare_shared(&l.module, l.name())?;
        let lprog = cpu.prepare_shared(m, level)?;
        let launch = cpu.launch_buffers_prepared(&prog, bargs, Some(&l.shape))?;
        let flat = [n];
        let mut largs = vec![BufArg::Array {
            buf: &launch.outputs()[output],
            offset: 0,
            shape: &flat,
        }];
        largs.extend(uniforms.iter().map(|c| BufArg::Uniform(*c)));
        let consumer = cpu.launch_buffers_prepared(&lprog, &largs, Some(&[level_shape]))?;
        launch.run_fused(output, &consumer, 0, spans)?;
        let levels = consumer.into_outputs();
        Ok((launch.into_outputs(), levels))
    })?;
    let keep = host_arrays(outs, Some(output), &l.shape);
    Ok(Some((keep, host_arrays(levels, None, &[level_shape]))))
}

/// Runs a prepared launch now and returns its outputs as arrays of the launch shape.
pub(crate) fn run_arrays(dev: &Device, l: &Prepared) -> Result<Vec<ArrayData>> {
    if let Kind::Group(g) = &*dev.0 {
        return group_launch(dev, g, l, None, false);
    }
    let outs: Vec<ArrayData> = run(dev, l)?
        .into_iter()
        .map(|r| {
            ArrayData::stored(
                Storage::from_resident(r),
                crate::array::Dims::from_slice(&l.shape),
            )
        })
        .collect();
    crate::sequence::note_launch(dev, l, &outs);
    Ok(outs)
}

/// Queues a prepared launch: its outputs are arrays whose contents are computed on `dev`
/// when first read (deferred execution). The inputs are held (by value) until then. When
/// they are the results of a chain of [`crate::array::MAX_PENDING_DEPTH`] pending launches,
/// that chain runs now.
///
/// # Errors
/// A launch of that chain failed.
pub(crate) fn defer(
    dev: &Device,
    l: Prepared,
    at: Option<&'static std::panic::Location<'static>>,
) -> Result<Vec<ArrayData>> {
    if let Kind::Group(g) = &*dev.0 {
        return group_launch(dev, g, &l, at, true);
    }
    let inputs = || {
        l.args.iter().filter_map(|a| match a {
            ArgVal::Array(d) => Some(stored(d)),
            ArgVal::Uniform(_) => None,
        })
    };
    let mut depth = 1 + inputs().map(|s| s.pending_depth()).max().unwrap_or(0);
    if depth > crate::array::MAX_PENDING_DEPTH {
        for s in inputs() {
            s.resolve()?;
        }
        depth = 1;
    }
    let shape = crate::array::Dims::from_slice(&l.shape);
    let elems: smallvec::SmallVec<[Type; 4]> = l.outputs().collect();
    let compile = crate::array::Compile {
        dev: dev.clone(),
        module: l.module.clone(),
        program: l.program,
        inputs: inputs().map(Arc::downgrade).collect(),
    };
    // A sequence being recorded notes the launch (its arguments, before the job takes them).
    let recorded = crate::sequence::recording().then(|| l.clone());
    let job_dev = dev.clone();
    // The error names the launch and the user's line that applied it: it surfaces only
    // when a result is read.
    let job: crate::array::Job = Box::new(move || {
        run(&job_dev, &l).map_err(|e| {
            let at = at.map(|a| format!(" (applied at {a})")).unwrap_or_default();
            Error::argument(format!("deferred launch of @{}{at} failed: {e}", l.name()))
        })
    });
    let outs: Vec<ArrayData> = crate::array::Pending::outputs(job, Some(compile), &elems, depth)
        .into_iter()
        .map(|s| ArrayData::stored(s, shape.clone()))
        .collect();
    if let Some(l) = recorded {
        crate::sequence::note_launch(dev, &l, &outs);
    }
    Ok(outs)
}

/// The part program of program `program` of `m` for launches split across a device group
/// ([`weft_ir::launch::launch_part`]): the module, the program's position in it and the
/// parameters it adds. Kept by `m`'s identity (the 64 latest), so that the members find
/// their compiled parts by identity as well.
fn part_program(m: &Arc<Module>, program: usize) -> Result<(Arc<Module>, usize, Arc<[PartParam]>)> {
    type Entry = (Weak<Module>, usize, Arc<Module>, usize, Arc<[PartParam]>);
    static CACHE: Mutex<Vec<Entry>> = Mutex::new(Vec::new());
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    cache.retain(|e| e.0.strong_count() > 0);
    if let Some(e) = cache
        .iter()
        .find(|e| e.1 == program && e.0.upgrade().is_some_and(|a| Arc::ptr_eq(&a, m)))
    {
        return Ok((e.2.clone(), e.3, e.4.clone()));
    }
    let name = &m.programs[program].name;
    let (pm, extra) = weft_ir::launch::launch_part(m, name).ok_or_else(|| {
        Error::argument(format!("@{name} is not a map program: it cannot be split"))
    })?;
    let pos = pm.position(name).expect("launch_part keeps the program");
    let entry: Entry = (Arc::downgrade(m), program, Arc::new(pm), pos, extra.into());
    if cache.len() >= 64 {
        cache.remove(0);
    }
    cache.push(entry);
    let e = cache.last().expect("just pushed");
    Ok((e.2.clone(), e.3, e.4.clone()))
}

/// Runs (or, `deferred`, queues) launch `l` over device group `g` (issue 27): rows of the
/// launch's first axis go to the members in proportion to their weights
/// ([`weft_runtime::DeviceGroup::split`]); each member runs the part program over its
/// rows, with its rows of every varying input (the part itself when the input is a result
/// split the same way on this group) and every array input whole; each output is a
/// storage of the members' parts.
fn group_launch(
    dev: &Device,
    g: &weft_runtime::DeviceGroup,
    l: &Prepared,
    at: Option<&'static std::panic::Location<'static>>,
    deferred: bool,
) -> Result<Vec<ArrayData>> {
    crate::sequence::check_not_recording(|| format!("@{} on a device group", l.name()))?;
    let members = dev.members();
    let rows = l.shape.first().copied().unwrap_or(0);
    let work: Vec<(usize, Range<usize>)> = g
        .split(rows, l.shape.len())
        .into_iter()
        .enumerate()
        .filter(|(_, r)| !r.is_empty())
        .collect();
    // GPU parts are queued at once, so that the members run together; CPU parts wait to be
    // read, like any launch.
    let launch = |on: &Device, p: Prepared| {
        if deferred && !on.is_cuda() {
            defer(on, p, at)
        } else {
            run_arrays(on, &p)
        }
    };
    if work.len() <= 1 {
        // One part: the whole launch on the member that has it.
        let k = work.first().map_or(0, |w| w.0);
        return launch(&members[k], l.clone());
    }
    let (pm, pprog, extra) = part_program(&l.module, l.program)?;
    let row: usize = l.shape[1..].iter().product();
    let params = &l.module.programs[l.program].params;
    let mut outs: Vec<Vec<ArrayData>> = Vec::with_capacity(work.len());
    for (k, r) in &work {
        let mut args: Vec<ArgVal> = l
            .args
            .iter()
            .zip(params)
            .map(|(a, par)| match (a, par.kind) {
                (ArgVal::Array(d), ParamKind::Varying) => {
                    ArgVal::Array(rows_of(d, &dev.0, *k, r.clone(), row))
                }
                _ => a.clone(),
            })
            .collect();
        for q in extra.iter() {
            let c = q
                .value(r.start, &l.shape)
                .map_err(|e| Error::argument(format!("@{}: {e}", l.name())))?;
            args.push(ArgVal::Uniform(c));
        }
        let mut shape = l.shape.clone();
        shape[0] = r.len();
        let part = Prepared {
            module: pm.clone(),
            program: pprog,
            args,
            shape,
        };
        outs.push(launch(&members[*k], part)?);
    }
    let group = Arc::downgrade(&dev.0);
    Ok(l.outputs()
        .enumerate()
        .map(|(j, elem)| {
            let parts = work
                .iter()
                .zip(&outs)
                .map(|((k, r), o)| Part {
                    start: r.start * row,
                    len: r.len() * row,
                    member: *k,
                    storage: stored(&o[j]).clone(),
                })
                .collect();
            let s = Storage::from_parts(
                elem,
                Parts {
                    group: group.clone(),
                    parts,
                },
            );
            ArrayData::stored(s, crate::array::Dims::from_slice(&l.shape))
        })
        .collect())
}

/// Rows `r` (of `row` elements each) of the contiguous varying input `d`, for member `k`
/// of `group`: the part member `k` holds when `d` is a whole result split the same way on
/// this group, else a view of `d`.
fn rows_of(d: &ArrayData, group: &Arc<Kind>, k: usize, r: Range<usize>, row: usize) -> ArrayData {
    let mut shape = d.shape.clone();
    shape[0] = r.len();
    if let (Source::Stored(s), 0, true) = (&d.source, d.offset, d.contiguous()) {
        if let Some(ps) = s.parts() {
            let same_group = ps.group.upgrade().is_some_and(|g| Arc::ptr_eq(&g, group));
            let part = ps
                .parts
                .iter()
                .find(|p| p.member == k && p.start == r.start * row && p.len == r.len() * row);
            if let (true, Some(p)) = (same_group, part) {
                let mut nd = ArrayData::stored(p.storage.clone(), shape);
                nd.boundary = d.boundary;
                return nd;
            }
        }
    }
    let mut nd = d.clone();
    nd.offset += r.start * row;
    nd.shape = shape;
    nd
}
