//! The differential oracle (DESIGN §6): runs a case on the interpreter (the definition of
//! semantics) and on each target — the interpreter after pass pipelines and program-algebra
//! operations, and the compiled backends — and compares the results bit for bit (any NaN =
//! any NaN).

use crate::case::Case;
use crate::compare::{fmt_array, same_array};
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use weft_ir::interp::RunError;
use weft_ir::{HostArray, Input, Interpreter, Module, ParamKind};
use weft_runtime::{Backend, Device, DeviceOptions};

/// What a case is checked on, against the interpreter on the original module.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target {
    /// The interpreter on the module after a pass pipeline (names as in
    /// [`weft_ir::passes::Pipeline`]; `"default"` is [`weft_ir::passes::DEFAULT_PIPELINE`]).
    Pipeline(&'static str),
    /// The interpreter on the launch after uniform lifting
    /// ([`weft_ir::passes::lift::prepare_launch`]: prologue once, then the kernel).
    LiftUniforms,
    /// Tight binding (DESIGN §4): every uniform bound to its value
    /// ([`weft_ir::algebra::bind`]), then the default pipeline; applies when there are
    /// uniforms.
    Bind,
    /// Specialization: `keep` of the last output, then `dce-inputs`; applies when there are
    /// two outputs or more.
    Keep,
    /// The launch split row by row across a device group of three interpreters
    /// ([`weft_runtime::DeviceGroup`], issue 27): each part runs
    /// [`weft_ir::launch::launch_part`]'s program over its rows.
    Group,
    /// Cranelift on the CPU device.
    Cranelift,
    /// LLVM host code on the CPU device.
    Llvm,
    /// LLVM host code with the last output reduced inside the kernels
    /// (`weft_backend_llvm::HostReduce`, `Program::apply_reduce`'s path): the other outputs
    /// and the fold of the kernels' partial states against the interpreter's outputs and the
    /// fold of its last output. The op is `min`, `max` or, for integers, `add` or `mul`,
    /// picked from the launch size.
    LlvmReduce,
    /// LLVM PTX on a CUDA device.
    Cuda,
    /// LLVM host code with fast-math, on fast-math cases ([`crate::fastmath`]), compared
    /// within each op's documented error bound.
    LlvmFast,
    /// PTX with fast-math on a CUDA device, on fast-math cases.
    CudaFast,
}

/// The pipelines run as [`Target::Pipeline`]: the default one and each pass alone.
pub const PIPELINES: [&str; 7] = ["default", "inline", "fold", "cse", "dce", "licm", "math"];

impl Target {
    /// The targets of a backend name as `weft fuzz --backends` takes them: `interp` (every
    /// pipeline and algebra row), `cranelift`, `llvm`, `cuda`.
    pub fn of_backend(name: &str) -> Option<Vec<Target>> {
        let (base, fast) = match name.strip_suffix(FAST_SUFFIX) {
            Some(b) => (b, true),
            None => (name, false),
        };
        Some(match (base.parse::<Backend>().ok()?, fast) {
            (Backend::Interp, false) => {
                let mut v: Vec<Target> = PIPELINES.iter().map(|&p| Target::Pipeline(p)).collect();
                v.extend([
                    Target::LiftUniforms,
                    Target::Bind,
                    Target::Keep,
                    Target::Group,
                ]);
                v
            }
            (Backend::Cranelift, false) => vec![Target::Cranelift],
            (Backend::Llvm, false) => vec![Target::Llvm, Target::LlvmReduce],
            (Backend::Cuda, false) => vec![Target::Cuda],
            (Backend::Llvm, true) => vec![Target::LlvmFast],
            (Backend::Cuda, true) => vec![Target::CudaFast],
            (Backend::Interp | Backend::Cranelift, true) => return None,
            // Its two tiers are the `cranelift` and `llvm` targets.
            (Backend::Auto, _) => return None,
        })
    }

    /// The backend the target runs on (the interpreter for pipelines and algebra rows).
    pub fn backend(self) -> Backend {
        match self {
            Target::Pipeline(_)
            | Target::LiftUniforms
            | Target::Bind
            | Target::Keep
            | Target::Group => Backend::Interp,
            Target::Cranelift => Backend::Cranelift,
            Target::Llvm | Target::LlvmReduce | Target::LlvmFast => Backend::Llvm,
            Target::Cuda | Target::CudaFast => Backend::Cuda,
        }
    }

    /// True for the compiled backends.
    pub fn is_backend(self) -> bool {
        matches!(
            self,
            Target::Cranelift | Target::Llvm | Target::LlvmReduce | Target::Cuda
        ) || self.is_fast_math()
    }

    /// True for the fast-math targets (their cases are [`crate::fastmath::fast_case`]s).
    pub fn is_fast_math(self) -> bool {
        matches!(self, Target::LlvmFast | Target::CudaFast)
    }
}

/// The suffix of a fast-math target's name (`llvm-fast`, `cuda-fast`).
pub const FAST_SUFFIX: &str = "-fast";

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.backend();
        match self {
            Target::Pipeline(p) => write!(f, "{b}+{p}"),
            Target::LiftUniforms => write!(f, "{b}+lift-uniforms"),
            Target::Bind => write!(f, "{b}+bind"),
            Target::Keep => write!(f, "{b}+keep"),
            Target::Group => write!(f, "{b}+group"),
            Target::LlvmReduce => write!(f, "{b}+reduce"),
            Target::LlvmFast | Target::CudaFast => write!(f, "{b}{FAST_SUFFIX}"),
            Target::Cranelift | Target::Llvm | Target::Cuda => write!(f, "{b}"),
        }
    }
}

impl Target {
    /// How the device of a compiled target is opened ([`Device::open`]): its backend, with
    /// fast-math for the fast-math targets. `None` for the interpreter's targets. GPU targets
    /// run map programs on one block of [`FUZZ_GPU_THREADS`] threads, so that launches of
    /// 32 or more elements take the kernels' blocks of four elements per thread (vector
    /// loads and stores, the interior variant per block) and smaller ones one element at a
    /// time.
    pub fn device_options(self) -> Option<(Backend, DeviceOptions)> {
        if !self.is_backend() {
            return None;
        }
        let gpu = self.backend() == Backend::Cuda;
        let opts = DeviceOptions {
            fast_math: self.is_fast_math(),
            block: gpu.then_some(FUZZ_GPU_THREADS),
            grid: gpu.then_some(1),
            ..Default::default()
        };
        Some((self.backend(), opts))
    }
}

/// Threads of the one block a GPU target's map launches run on.
pub const FUZZ_GPU_THREADS: u32 = 8;

/// Opens the device of every GPU target among `targets` (`cuda`, `cuda-fast`): once per fuzz
/// run, shared by the worker threads' [`Devices`].
///
/// # Errors
/// No CUDA driver or GPU, as a message.
pub fn open_gpus(targets: &[Target]) -> Result<Vec<(Target, Device)>, String> {
    let mut v = Vec::new();
    for &t in targets {
        if let Some((Backend::Cuda, opts)) = t.device_options() {
            let d =
                Device::open(Backend::Cuda, &opts).map_err(|e| format!("{t} requested: {e}"))?;
            v.push((t, d));
        }
    }
    Ok(v)
}

/// The devices the compiled targets run on: a fresh CPU device per CPU target (kept per
/// worker thread) and the shared GPU ones ([`open_gpus`]).
pub struct Devices<'a> {
    cpu: Vec<(Target, Device)>,
    gpu: &'a [(Target, Device)],
}

/// The compiled targets that run on the CPU.
const CPU_TARGETS: [Target; 3] = [Target::Cranelift, Target::Llvm, Target::LlvmFast];

impl<'a> Devices<'a> {
    /// CPU devices with empty caches for every CPU target, and the GPU devices `gpu`.
    pub fn new(gpu: &'a [(Target, Device)]) -> Devices<'a> {
        let cpu = CPU_TARGETS
            .iter()
            .filter_map(|&t| {
                let (b, opts) = t.device_options()?;
                Some((t, Device::open(b, &opts).ok()?))
            })
            .collect();
        Devices { cpu, gpu }
    }

    /// Runs `target` on `device` instead (a test forcing an LLVM effort level, say).
    pub fn set(&mut self, target: Target, device: Device) {
        self.cpu.retain(|(t, _)| *t != target);
        self.cpu.push((target, device));
    }

    /// The device `target` runs on, if open.
    pub fn get(&self, target: Target) -> Option<&Device> {
        let target = match target {
            Target::LlvmReduce => Target::Llvm,
            t => t,
        };
        self.cpu
            .iter()
            .chain(self.gpu.iter())
            .find(|(t, _)| *t == target)
            .map(|(_, d)| d)
    }

    /// Drops the compiled kernels (a fuzz run compiles every case once).
    pub fn clear(&self) {
        for (_, d) in self.cpu.iter().chain(self.gpu.iter()) {
            d.clear_cache();
        }
    }
}

/// The interpreter's verdict on a case.
pub enum Oracle {
    /// The expected outputs.
    Outputs(Vec<HostArray>),
    /// The interpreter ran out of fuel: the case is discarded.
    OutOfFuel,
}

/// Fuel per element for the oracle (generated loops are bounded; this catches a runaway).
pub const FUEL: u64 = 1_000_000;

/// Runs `case` on the interpreter.
///
/// # Errors
/// Any run error other than fuel exhaustion, or a panic, as a message (a generator or
/// interpreter bug).
pub fn oracle(case: &Case) -> Result<Oracle, String> {
    guarded(|| {
        let mut it = Interpreter::new(&case.gen.module);
        it.fuel = FUEL;
        match it.apply(&case.gen.name, &case.inputs, case.explicit_shape()) {
            Ok(o) => Ok(Oracle::Outputs(o)),
            Err(RunError::OutOfFuel { .. }) => Ok(Oracle::OutOfFuel),
            Err(e) => Err(format!("the interpreter failed: {e}")),
        }
    })
}

/// Runs `f`, turning a panic into an error message.
fn guarded<T>(f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| {
        let msg = (p.downcast_ref::<String>().cloned())
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "a panic".into());
        Err(format!("panicked: {msg}"))
    })
}

/// The interpreter on program `name` of `m` over the launch `shape` (passed on only when the
/// program has no varying input: a derived program may have lost them).
fn interp(
    m: &Module,
    name: &str,
    inputs: &[Input],
    shape: &[usize],
) -> Result<Vec<HostArray>, String> {
    let varying = m
        .get(name)
        .is_some_and(|p| p.params.iter().any(|x| x.kind == ParamKind::Varying));
    let mut it = Interpreter::new(m);
    it.fuel = FUEL * 4;
    it.apply(name, inputs, (!varying).then_some(shape))
        .map_err(|e| e.to_string())
}

/// Runs `case` on `target`: `None` when the target does not apply to it, else the outputs to
/// compare with the oracle's — for [`Target::Keep`], the last output only — or an error
/// message.
fn run_target(
    case: &Case,
    target: Target,
    dev: &Devices,
) -> Option<Result<Vec<HostArray>, String>> {
    if !applies(case, target) {
        return None;
    }
    let (m, name, shape) = (
        &case.gen.module,
        case.gen.name.as_str(),
        case.explicit_shape(),
    );
    let p = case.gen.program();
    let inputs = &case.inputs;
    let optimized = |mut m2: Module, pl: &str, ins: &[Input]| {
        weft_ir::passes::run_pipeline(&mut m2, pl).map_err(|e| e.to_string())?;
        interp(&m2, name, ins, &case.shape)
    };
    Some(guarded(|| match target {
        Target::Pipeline(pl) => {
            let pl = if pl == "default" {
                weft_ir::passes::DEFAULT_PIPELINE
            } else {
                pl
            };
            optimized(m.clone(), pl, inputs)
        }
        Target::LiftUniforms => {
            let lifted = weft_ir::passes::lift::prepare_launch(m, name, inputs);
            match lifted.map_err(|e| e.to_string())? {
                Some((km, ins)) => interp(&km, name, &ins, &case.shape),
                // Nothing to lift: the launch runs the program as it is.
                None => interp(m, name, inputs, &case.shape),
            }
        }
        Target::Bind => {
            let mut q = p.clone();
            for (i, (par, x)) in p.params.iter().zip(inputs).enumerate() {
                if let (ParamKind::Uniform, Input::Uniform(c)) = (par.kind, x) {
                    q = weft_ir::algebra::bind(&q, p.param_name(i), c)
                        .map_err(|e| e.to_string())?;
                }
            }
            let rest = inputs_by_name(p, &q, inputs);
            optimized(with_program(m, q), weft_ir::passes::DEFAULT_PIPELINE, &rest)
        }
        Target::Keep => {
            let last = p.output_name(p.outputs.len() - 1);
            let q = weft_ir::algebra::keep(p, &[last.as_str()]).map_err(|e| e.to_string())?;
            let rest = inputs_by_name(p, &q, inputs);
            optimized(with_program(m, q), "dce", &rest)
        }
        Target::Group => {
            let it = std::sync::Arc::new(Device::Interp { fuel: FUEL * 4 });
            let g = weft_runtime::DeviceGroup::new(vec![it.clone(), it.clone(), it])
                .map_err(|e| e.to_string())?
                .with_row_granule(1);
            g.apply(m, name, inputs, shape).map_err(|e| e.to_string())
        }
        Target::LlvmReduce => match dev.get(target) {
            Some(Device::Cpu(cpu)) => reduced(cpu, case),
            _ => Err(format!("no {target} device")),
        },
        Target::Cranelift | Target::Llvm | Target::LlvmFast | Target::Cuda | Target::CudaFast => {
            match dev.get(target) {
                Some(d) => d.apply(m, name, inputs, shape).map_err(|e| e.to_string()),
                None => Err(format!("no {target} device")),
            }
        }
    }))
}

/// The inputs of `q` (derived from `p`, perhaps with fewer inputs) picked from `p`'s by name.
pub fn inputs_by_name(p: &weft_ir::Program, q: &weft_ir::Program, inputs: &[Input]) -> Vec<Input> {
    (0..q.params.len())
        .filter_map(|j| {
            let i = (0..p.params.len()).find(|&i| p.param_name(i) == q.param_name(j))?;
            Some(inputs[i].clone())
        })
        .collect()
}

/// The reduction [`Target::LlvmReduce`] applies to `case`'s last output: its op, or `None`
/// for a `bool` output.
fn reduce_op(case: &Case) -> Option<weft_ir::Opcode> {
    use weft_ir::Opcode as O;
    let p = case.gen.program();
    let s = p.outputs.last()?.ty.elem_scalar();
    let n: usize = case.shape.iter().product();
    match s {
        weft_ir::ScalarType::Bool => None,
        s if s.is_float() => Some([O::Max, O::Min][n % 2]),
        _ => Some([O::Add, O::Max, O::Min, O::Mul][n % 4]),
    }
}

/// The fold of `xs` with `op` (in order; the ops [`reduce_op`] picks give the same result in
/// any), `None` for no element.
fn fold(
    op: weft_ir::Opcode,
    xs: impl Iterator<Item = weft_ir::Const>,
) -> Result<Option<weft_ir::Const>, String> {
    let mut acc: Option<weft_ir::Const> = None;
    for x in xs {
        acc = Some(match acc {
            None => x,
            Some(a) => weft_ir::interp::eval_op(op, &[], None, &[a, x])?,
        });
    }
    Ok(acc)
}

/// A one-element array of `c` (an empty one of type `ty` for `None`).
fn one_of(ty: weft_ir::Type, c: Option<weft_ir::Const>) -> HostArray {
    let l = weft_ir::host::lanes_of(ty);
    HostArray {
        elem: ty,
        shape: vec![usize::from(c.is_some())],
        data: c.map_or_else(Vec::new, |c| c.lanes[..l].to_vec()),
    }
}

/// [`Target::LlvmReduce`] of `case` on `cpu`: the outputs, the last one replaced by the
/// fold of the kernels' partial states.
fn reduced(cpu: &weft_runtime::CpuDevice, case: &Case) -> Result<Vec<HostArray>, String> {
    let op = reduce_op(case).ok_or("no reduction applies")?;
    let p = case.gen.program();
    let k = p.outputs.len() - 1;
    let ty = p.outputs[k].ty;
    let identity = weft_ir::konst::identity_bits(op, ty.elem_scalar());
    let r = weft_backend_llvm::HostReduce {
        output: k,
        op,
        identity,
    };
    let m = std::sync::Arc::new(case.gen.module.clone());
    let e = |e: weft_runtime::RuntimeError| e.to_string();
    let prog = cpu
        .prepare_reduced(&m, &case.gen.name, r)
        .map_err(e)?
        .ok_or("not an LLVM device")?;
    let bufs: Vec<Option<(weft_runtime::HostBuffer, Vec<usize>)>> = case
        .inputs
        .iter()
        .map(|x| match x {
            Input::Array(a) => Some((
                weft_runtime::HostBuffer::from_host_array(a),
                a.shape.clone(),
            )),
            Input::Uniform(_) => None,
        })
        .collect();
    let args: Vec<weft_runtime::BufArg> = case
        .inputs
        .iter()
        .zip(&bufs)
        .map(|(x, b)| match (x, b) {
            (_, Some((buf, shape))) => weft_runtime::BufArg::Array {
                buf,
                offset: 0,
                shape,
            },
            (Input::Uniform(c), None) => weft_runtime::BufArg::Uniform(*c),
            (Input::Array(_), None) => unreachable!("made above"),
        })
        .collect();
    let launch = cpu
        .launch_buffers_prepared(&prog, &args, case.explicit_shape())
        .map_err(e)?;
    let partials = launch.run_reduced(k).map_err(e)?;
    let shape = launch.shape().to_vec();
    let mut outs: Vec<HostArray> = launch
        .into_outputs()
        .iter()
        .map(|b| b.to_host_array(&shape))
        .collect();
    outs[k] = one_of(ty, fold(op, (0..partials.len()).map(|i| partials.get(i)))?);
    Ok(outs)
}

/// Whether `target` applies to `case` (bind needs a uniform, keep two outputs).
pub fn applies(case: &Case, target: Target) -> bool {
    let p = case.gen.program();
    match target {
        Target::LlvmReduce => reduce_op(case).is_some(),
        Target::Bind => p.params.iter().any(|par| par.kind == ParamKind::Uniform),
        Target::Keep => p.outputs.len() >= 2,
        _ => true,
    }
}

fn with_program(m: &Module, q: weft_ir::Program) -> Module {
    let mut m2 = m.clone();
    if let Some(slot) = m2.programs.iter_mut().find(|x| x.name == q.name) {
        *slot = q;
    }
    m2
}

/// The result of checking one case on one target.
pub enum Check {
    /// The target does not apply to this case.
    Skipped,
    /// Same results as the interpreter.
    Same,
    /// Different results, or a failure: what differs.
    Differs(String),
}

/// Checks `case` on `target` against the oracle's outputs `want`.
pub fn check(case: &Case, target: Target, want: &[HostArray], dev: &Devices) -> Check {
    let Some(got) = run_target(case, target, dev) else {
        return Check::Skipped;
    };
    let folded;
    let want = match target {
        Target::Keep => &want[want.len() - 1..],
        Target::LlvmReduce => {
            let mut w = want.to_vec();
            let (Some(last), Some(op)) = (w.pop(), reduce_op(case)) else {
                return Check::Skipped;
            };
            match fold(op, (0..last.len()).map(|i| last.get(i))) {
                Ok(c) => w.push(one_of(last.elem, c)),
                Err(e) => return Check::Differs(format!("{target}: folding: {e}")),
            }
            folded = w;
            &folded[..]
        }
        _ => want,
    };
    match got {
        Err(e) => Check::Differs(format!("{target} failed: {e}")),
        Ok(got) => {
            if got.len() != want.len() {
                return Check::Differs(format!(
                    "{target} gave {} outputs, the interpreter {}",
                    got.len(),
                    want.len()
                ));
            }
            let p = case.gen.program();
            if target.is_fast_math() {
                return fast_check(case, target, want, &got);
            }
            for (k, (g, w)) in got.iter().zip(want).enumerate() {
                if !same_array(g, w) {
                    let k = if target == Target::Keep {
                        p.outputs.len() - 1
                    } else {
                        k
                    };
                    let first = (0..w.len().min(g.len()))
                        .find(|&i| !same_array(&one(g, i), &one(w, i)))
                        .unwrap_or(0);
                    return Check::Differs(format!(
                        "{target}: output {k} element {first}: interp {}, {target} {}\n  interp {}\n  {target} {}",
                        w.get(first),
                        g.get(first),
                        fmt_array(w),
                        fmt_array(g)
                    ));
                }
            }
            Check::Same
        }
    }
}

/// Element `i` of `a` as a one-element array.
fn one(a: &HostArray, i: usize) -> HostArray {
    let l = a.data.len() / a.len().max(1);
    HostArray {
        elem: a.elem,
        shape: vec![1],
        data: a
            .data
            .get(i * l..(i + 1) * l)
            .map(<[u64]>::to_vec)
            .unwrap_or_default(),
    }
}

/// A fast-math case's output against the interpreter's, lane by lane within the op's bound.
fn fast_check(case: &Case, target: Target, want: &[HostArray], got: &[HostArray]) -> Check {
    use crate::fastmath::{bound, case_op, fused, within, Bound};
    let (w, g) = (&want[0], &got[0]);
    let s = w.elem.elem_scalar();
    let op = case_op(case.gen.program());
    let b = bound(op, s, target == Target::CudaFast);
    if g.data.len() != w.data.len() {
        return Check::Differs(format!(
            "{target}: output shape {:?}, want {:?}",
            g.shape, w.shape
        ));
    }
    let col = |k: usize, i: usize| match &case.inputs[k] {
        Input::Array(a) => a.data[i],
        Input::Uniform(c) => c.lanes[0],
    };
    for i in 0..w.data.len() {
        let f = (b == Bound::Contracted).then(|| fused(s, col(0, i), col(1, i), col(2, i)));
        if !within(s, b, w.data[i], g.data[i], f) {
            let args: Vec<String> = (0..case.inputs.len())
                .map(|k| format!("{}", weft_ir::Const::scalar(s, col(k, i))))
                .collect();
            return Check::Differs(format!(
                "{target}: `{}` on {s} lane {i} ({}): interp {}, {target} {} ({} ulp), beyond the bound {b:?}",
                op.mnemonic(),
                args.join(", "),
                weft_ir::Const::scalar(s, w.data[i]),
                weft_ir::Const::scalar(s, g.data[i]),
                crate::fastmath::ulp_distance(s, w.data[i], g.data[i]),
            ));
        }
    }
    Check::Same
}
