//! The CPU device: compile once per program text (in-memory cache) with Cranelift or LLVM,
//! marshal arrays into the kernel ABI's planes (docs/abi.md), and split the launch over the
//! rayon pool.

use crate::planes::{read_output, to_storage, Plane};
use rayon::prelude::*;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use weft_backend_cranelift::abi::{lanes, Layout, PAD};
use weft_backend_cranelift::{compile, CompileError, Kernel};
use weft_ir::interp::{HostArray, Input, RunError};
use weft_ir::launch::plan_program_launch;
use weft_ir::{Module, ParamKind};

/// Why a launch failed (CPU or CUDA device).
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// Bad inputs or launch (same messages as the interpreter).
    #[error(transparent)]
    Run(#[from] RunError),
    /// The program could not be compiled (Cranelift).
    #[error(transparent)]
    Compile(#[from] CompileError),
    /// The program could not be compiled (LLVM).
    #[error(transparent)]
    Llvm(#[from] weft_backend_llvm::CompileError),
    /// The CUDA driver failed or is missing (see [`crate::cuda::CudaError`]).
    #[error(transparent)]
    Cuda(#[from] crate::cuda::CudaError),
}

/// Which code generator a CPU device compiles with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum HostCompiler {
    /// Cranelift (fast compiles, 128-bit SIMD; the default).
    #[default]
    Cranelift,
    /// LLVM 19 through ORC (slower compiles, the host's widest vectors).
    Llvm(weft_backend_llvm::Options),
}

/// A compiled host kernel of either code generator; both use the ABI of docs/abi.md.
// Built once per compile and kept behind an `Arc`: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
pub enum HostCode {
    /// From Cranelift.
    Cranelift(Kernel),
    /// From LLVM.
    Llvm(weft_backend_llvm::HostKernel),
}

impl HostCode {
    /// The context layout.
    pub fn layout(&self) -> &Layout {
        match self {
            HostCode::Cranelift(k) => &k.layout,
            HostCode::Llvm(k) => &k.layout,
        }
    }

    /// The entry point (`(ctx, begin, end)`).
    ///
    /// # Safety
    /// As [`Kernel::entry`]: a context per [`HostCode::layout`] with buffers padded to whole
    /// blocks that outlive the call.
    pub unsafe fn entry(&self) -> unsafe extern "C" fn(*const u64, i64, i64) {
        // SAFETY: forwarded contract.
        unsafe {
            match self {
                HostCode::Cranelift(k) => k.entry(),
                HostCode::Llvm(k) => k.entry(),
            }
        }
    }
}

/// Launches at or below this many elements run on the calling thread.
const SERIAL_LIMIT: usize = 1 << 11;

/// The CPU device: compiled kernels, cached by (structural hash of the module, program
/// name).
#[derive(Default)]
pub struct CpuDevice {
    compiler: HostCompiler,
    cache: Mutex<HashMap<(u64, String), Arc<HostCode>>>,
}

struct Ctx(Vec<u64>);
// SAFETY: the context block holds addresses of buffers that live for the whole launch; the
// kernels only read the block, and write disjoint element ranges of the output planes.
unsafe impl Sync for Ctx {}

impl CpuDevice {
    /// A CPU device compiling with Cranelift, with an empty kernel cache.
    pub fn new() -> CpuDevice {
        CpuDevice::default()
    }

    /// A CPU device compiling with `compiler`.
    pub fn with_compiler(compiler: HostCompiler) -> CpuDevice {
        CpuDevice {
            compiler,
            cache: Mutex::default(),
        }
    }

    /// The compiled kernel for program `name` of `m`, from the cache or freshly compiled.
    pub fn kernel(&self, m: &Module, name: &str) -> Result<Arc<HostCode>, RuntimeError> {
        let key = (weft_ir::launch::fingerprint(m), name.to_string());
        if let Some(k) = self
            .cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            return Ok(k.clone());
        }
        let k = Arc::new(match self.compiler {
            HostCompiler::Cranelift => HostCode::Cranelift(compile(m, name)?),
            HostCompiler::Llvm(o) => HostCode::Llvm(weft_backend_llvm::compile_host(m, name, o)?),
        });
        self.cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, k.clone());
        Ok(k)
    }

    /// Number of kernels in the cache.
    pub fn cached(&self) -> usize {
        self.cache.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Applies program `name` over arrays (DESIGN §5), like
    /// [`weft_ir::Interpreter::apply`], on compiled code; results are bit-identical.
    pub fn apply(
        &self,
        m: &Module,
        name: &str,
        inputs: &[Input],
        shape: Option<&[usize]>,
    ) -> Result<Vec<HostArray>, RuntimeError> {
        let mut l = self.launch(m, name, inputs, shape)?;
        l.run();
        Ok(l.outputs())
    }

    /// Prepares a launch: checks the inputs, compiles (or finds) the kernel and copies the
    /// inputs into kernel buffers. [`Launch::run`] then runs the kernel over them as often
    /// as wanted (benchmarks time exactly that); [`Launch::outputs`] reads the results.
    pub fn launch(
        &self,
        m: &Module,
        name: &str,
        inputs: &[Input],
        shape: Option<&[usize]>,
    ) -> Result<Launch, RuntimeError> {
        // Uniform work runs once here, in a prologue (DESIGN §4 uniform lifting).
        plan_program_launch(m, name, inputs, shape)?;
        let lifted = weft_ir::passes::lift::prepare_launch(m, name, inputs)?;
        let (m, inputs) = match &lifted {
            Some((km, ins)) => (km, ins.as_slice()),
            None => (m, inputs),
        };
        let (p, launch, n) = plan_program_launch(m, name, inputs, shape)?;
        let kernel = self.kernel(m, name)?;
        let layout = kernel.layout();
        let padded = n.div_ceil(PAD) * PAD;
        let mut ctx = vec![0u64; layout.words];
        let mut keep: Vec<Plane> = Vec::new();
        for (i, (par, inp)) in p.params.iter().zip(inputs).enumerate() {
            let w = layout.params[i];
            match (par.kind, inp) {
                (ParamKind::Varying, Input::Array(a)) | (ParamKind::Array, Input::Array(a)) => {
                    let len = if par.kind == ParamKind::Varying {
                        padded
                    } else {
                        a.len()
                    };
                    for l in 0..lanes(a.elem) {
                        let mut pl = Plane::from_array(a, l, len);
                        ctx[w + l] = pl.ptr();
                        keep.push(pl);
                    }
                    if par.kind == ParamKind::Array {
                        for (k, &d) in a.shape.iter().enumerate() {
                            ctx[w + lanes(a.elem) + k] = d as u64;
                        }
                    }
                }
                (ParamKind::Uniform, Input::Uniform(c)) => {
                    let s = c.ty.elem_scalar();
                    for (l, &b) in c.lane_bits().iter().enumerate() {
                        ctx[w + l] = to_storage(s, b);
                    }
                }
                _ => {}
            }
        }
        let mut outs: Vec<Vec<Plane>> = Vec::new();
        for (k, o) in p.outputs.iter().enumerate() {
            let s = o.ty.elem_scalar();
            let mut planes: Vec<Plane> = (0..lanes(o.ty)).map(|_| Plane::new(s, padded)).collect();
            for (l, pl) in planes.iter_mut().enumerate() {
                ctx[layout.outputs[k] + l] = pl.ptr();
            }
            outs.push(planes);
        }
        ctx[layout.launch] = launch.len() as u64;
        for (k, &d) in launch.iter().enumerate() {
            ctx[layout.launch + 1 + k] = d as u64;
        }
        Ok(Launch {
            kernel,
            ctx: Ctx(ctx),
            _inputs: keep,
            outs,
            out_types: p.outputs.iter().map(|o| o.ty).collect(),
            shape: launch,
            n,
        })
    }
}

/// A prepared launch: a kernel with its inputs copied into kernel buffers (see
/// [`CpuDevice::launch`]).
pub struct Launch {
    kernel: Arc<HostCode>,
    ctx: Ctx,
    _inputs: Vec<Plane>,
    outs: Vec<Vec<Plane>>,
    out_types: Vec<weft_ir::Type>,
    shape: Vec<usize>,
    n: usize,
}

impl Launch {
    /// Number of elements in the launch.
    pub fn len(&self) -> usize {
        self.n
    }

    /// True for a launch of no elements.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Runs the kernel over every element: on the calling thread for small launches, else in
    /// chunks (whole blocks) over the rayon pool.
    pub fn run(&mut self) {
        let n = self.n;
        let ctx = &self.ctx;
        // SAFETY: the context follows the kernel's layout; every plane lives as long as
        // `self` and is padded to whole blocks (arrays hold at least one element); chunks
        // write disjoint element ranges of the output planes.
        let entry = unsafe { self.kernel.entry() };
        let run = |lo: usize, hi: usize| unsafe { entry(ctx.0.as_ptr(), lo as i64, hi as i64) };
        if n <= SERIAL_LIMIT {
            run(0, n);
        } else {
            let threads = rayon::current_num_threads().max(1);
            let chunk = (n / (threads * 8)).max(SERIAL_LIMIT / 2).div_ceil(PAD) * PAD;
            let ranges: Vec<(usize, usize)> = (0..n.div_ceil(chunk))
                .map(|c| (c * chunk, ((c + 1) * chunk).min(n)))
                .collect();
            ranges.par_iter().for_each(|&(lo, hi)| run(lo, hi));
        }
    }

    /// The outputs as host arrays of the launch shape.
    pub fn outputs(&self) -> Vec<HostArray> {
        self.out_types
            .iter()
            .zip(&self.outs)
            .map(|(&ty, planes)| {
                let planes: Vec<&[u8]> = planes.iter().map(|p| p.0.as_slice()).collect();
                read_output(ty, &self.shape, self.n, &planes)
            })
            .collect()
    }
}
