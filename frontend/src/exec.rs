//! Running one program of a module over arrays on a device (DESIGN §5): virtual `grid`
//! inputs become the `index` builtin, arrays' boundary modes override the program's, views
//! become contiguous, and the launch runs on the interpreter, the CPU or a GPU over the
//! arrays' own storage (no copies on the CPU; uploads only of what the GPU lacks).

use crate::array::{ArrayData, Resident, Source, Storage};
use crate::device::{Device, Kind};
use crate::error::{Error, Result};
use std::sync::Arc;
use weft_ir::launch::{plan_launch_desc, ArgDesc};
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

/// Runs a prepared launch on `dev` now; the outputs live where `dev` runs.
pub(crate) fn run(dev: &Device, l: &Prepared) -> Result<Vec<Resident>> {
    let shape = Some(l.shape.as_slice());
    match &*dev.0 {
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
        Kind::Cpu(cpu) => {
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
            let prog = cpu.prepare_shared(&l.module, l.name())?;
            let mut launch = cpu.launch_buffers_prepared(&prog, &bargs, shape)?;
            launch.run()?;
            Ok(launch
                .into_outputs()
                .into_iter()
                .map(Resident::Host)
                .collect())
        }
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

/// Runs a prepared launch now and returns its outputs as arrays of the launch shape.
pub(crate) fn run_arrays(dev: &Device, l: &Prepared) -> Result<Vec<ArrayData>> {
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
    let recorded = crate::sequence::recording().then(|| Prepared {
        module: l.module.clone(),
        program: l.program,
        args: l.args.clone(),
        shape: l.shape.clone(),
    });
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
