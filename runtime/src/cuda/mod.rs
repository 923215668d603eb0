//! The CUDA device (DESIGN §5) through the CUDA driver API (cudarc, libcuda loaded at run
//! time): programs compiled to PTX by the LLVM backend and JIT-loaded by the driver (cached
//! per device), input arrays kept resident on the device between launches, outputs left on
//! the device until read.
//!
//! Nothing here panics when the driver is missing or fails: the library's presence is checked
//! before any cudarc call, every driver error becomes a [`CudaError`] naming the call, and the
//! calls into cudarc run under `catch_unwind` in case its bindings panic (a symbol missing
//! from an old driver, say).
//!
//! Kernel ABI (docs/abi.md; `weft_backend_llvm::PtxKernel`): the parameters are the context
//! words of the layout, filled as [`crate::CpuDevice::launch`] fills its context block (plane
//! device pointers, uniform storage bits, array extents, launch rank and extents), then
//! `begin: i64` and `end: i64`; threads walk the elements in blocks of four (or one by one)
//! in a grid-stride loop, so any grid is correct (blocks only where every varying and
//! output plane is aligned to a block's bytes: the kernel checks). Arrays uploaded from host
//! arrays have unpadded planes, device buffers padded ones (`HostBuffer::stride_for`);
//! arrays hold at least one element. All planes of one array (its tuple lanes) share one device allocation.

use crate::buffer::HostBuffer;
use crate::context::Context;
use crate::disk::{DiskCache, Key};
use crate::error::RuntimeError;
use crate::planes::{fill_plane, plane_bytes, read_output, scalar_lanes};
use crate::prepare::Prepared;
use crate::stats;
use cudarc::driver::{result, sys, CudaContext, CudaSlice, CudaStream, DevicePtr, DriverError};
use std::collections::HashMap;
use std::ffi::{c_int, c_uint, c_void, CString};
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};
use weft_ir::abi::{lanes, storage_bytes, Layout};
use weft_ir::interp::{HostArray, Input, RunError};
use weft_ir::launch::ArgDesc;
use weft_ir::{Const, Module, ParamKind, Type};

/// The highest compute capability (major·10 + minor) PTX is generated for: LLVM 19 knows
/// sm_90; newer devices JIT that PTX forward.
pub const MAX_SM: u32 = 90;

/// The largest grid (blocks in x) a launch uses.
const MAX_GRID: u32 = i32::MAX as u32;

/// Whether a map launch passes an argument of element type `elem` to a parameter of `kind`
/// interleaved (an array of 16-byte tuples: docs/abi.md, "The PTX kernel").
fn packed(kind: ParamKind, elem: Type) -> bool {
    kind == ParamKind::Array && weft_backend_llvm::interleaved_on_gpu(elem)
}

/// Block size when the driver's occupancy calculator is unavailable.
const FALLBACK_BLOCK: u32 = 256;

mod buffer;
mod driver;
mod graph;
mod inner;
mod launch;
mod nccl;

pub use buffer::{CudaArg, CudaBuffer, CudaBufferLaunch, CudaKernelArg};
pub use driver::{cuda_devices, cuda_driver_status, cuda_driver_version, CudaError, DeviceInfo};
use driver::{device_count, device_info, driver, drv, guard, lock};
pub use graph::{CudaBoundLaunch, CudaGraphExec};
pub use launch::{CudaKernelLaunch, CudaLaunch};
pub use nccl::nccl_status;

/// Launch geometry and code generation options of a CUDA device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct GpuConfig {
    /// Threads per block; `None` picks the driver's occupancy suggestion
    /// (`cuOccupancyMaxPotentialBlockSize`, 256 if unavailable), or, when the launch has
    /// fewer elements than multiprocessors × that and the grid is not given either, the
    /// whole warps that spread it over every multiprocessor. Clamped to 1 … the kernel's
    /// limit (usually 1024).
    pub block: Option<u32>,
    /// Blocks in the grid; `None` picks `min(⌈n / (block·e)⌉, SMs × resident blocks per SM)`
    /// (at least 1), each thread then looping over several elements, where `e` is the
    /// elements a thread of the kernel takes at a time (`CudaKernel::block_elems`) if
    /// `n / e` still fills every multiprocessor with a thread block, else 1. Clamped to
    /// 1 … 2³¹−1.
    pub grid: Option<u32>,
    /// Compile with fast-math (`weft_backend_llvm::Options::fast_math`): results may differ
    /// from the interpreter.
    pub fast_math: bool,
}

/// Host↔device copies a device has made since it was created (cumulative counters). Kernel
/// parameters (the context words) are not transfers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Transfers {
    /// Host-to-device copies (one per input array uploaded, all its tuple lanes together).
    pub uploads: u64,
    /// Bytes copied host to device.
    pub upload_bytes: u64,
    /// Device-to-host copies (one per output array read back).
    pub downloads: u64,
    /// Bytes copied device to host.
    pub download_bytes: u64,
}

impl Transfers {
    /// The transfers made after `earlier` (a previous reading of the same device).
    pub fn since(&self, earlier: &Transfers) -> Transfers {
        Transfers {
            uploads: self.uploads.saturating_sub(earlier.uploads),
            upload_bytes: self.upload_bytes.saturating_sub(earlier.upload_bytes),
            downloads: self.downloads.saturating_sub(earlier.downloads),
            download_bytes: self.download_bytes.saturating_sub(earlier.download_bytes),
        }
    }
}

/// A loaded module and its kernel function; unloaded on drop.
struct LoadedModule {
    ctx: Arc<CudaContext>,
    module: sys::CUmodule,
    func: sys::CUfunction,
}

// SAFETY: module and function handles may be used from any thread once the owning context is
// bound there (every use binds it first); the driver API is thread-safe.
unsafe impl Send for LoadedModule {}
// SAFETY: as above; the handles are never mutated.
unsafe impl Sync for LoadedModule {}

impl Drop for LoadedModule {
    fn drop(&mut self) {
        let _ = catch_unwind(AssertUnwindSafe(|| {
            let _ = self.ctx.bind_to_thread();
            // SAFETY: loaded by `Inner::load_module_at` and unloaded only here.
            let _ = unsafe { result::module::unload(self.module) };
        }));
    }
}

/// A program compiled to PTX and loaded on one device, with its launch limits.
pub struct CudaKernel {
    module: LoadedModule,
    /// The context words the kernel takes as parameters (before `begin`, `end`).
    pub layout: Layout,
    /// The PTX text the driver loaded.
    pub ptx: String,
    /// The compute capability the PTX was generated for (major·10 + minor, at most
    /// [`MAX_SM`]).
    pub sm: u32,
    /// Time LLVM took to lower, optimise and emit PTX.
    pub llvm_time: Duration,
    /// Time the driver took to load the module (PTX JIT to machine code).
    pub load_time: Duration,
    /// The kernel's limit on threads per block (`CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK`).
    pub max_block: u32,
    /// Registers per thread (`CU_FUNC_ATTRIBUTE_NUM_REGS`; 0 if the driver did not say).
    pub registers: u32,
    /// The block size the occupancy calculator suggests (or 256).
    pub auto_block: u32,
    /// Blocks of `auto_block` threads resident per multiprocessor (at least 1).
    pub blocks_per_sm: u32,
    /// Elements a thread takes at a time in whole blocks (`weft_backend_llvm::ptx_block_elems`:
    /// 4 for small map bodies, else 1); the automatic grid is sized by it.
    pub block_elems: u32,
}

/// One device allocation (an array's planes, or an output's). Dropped, it goes back to its
/// device's [`BufferPool`] for the next allocation of its size.
struct DeviceBuffer {
    slice: std::mem::ManuallyDrop<CudaSlice<u8>>,
    ptr: u64,
    pool: Arc<BufferPool>,
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // SAFETY: `slice` is taken once, here, and not used after.
        let slice = unsafe { std::mem::ManuallyDrop::take(&mut self.slice) };
        self.pool.give(slice);
    }
}

/// Freed device allocations kept by size for reuse (issue 21: a loop's launches allocate
/// nothing from the driver in steady state). Sound with one stream: a reused allocation's
/// next use is queued after every use of its previous life. Holds at most
/// [`BufferPool::MAX_BYTES`]; beyond that, allocations are freed (stream-ordered), and an
/// allocation the driver refuses empties the pool and is tried once more.
#[derive(Default)]
struct BufferPool {
    free: Mutex<Free>,
}

/// Free allocations by size in bytes, and their total.
type Free = (HashMap<usize, Vec<CudaSlice<u8>>>, usize);

impl BufferPool {
    /// The most bytes the pool holds.
    const MAX_BYTES: usize = 1 << 31;

    fn take(&self, bytes: usize) -> Option<CudaSlice<u8>> {
        let mut g = lock(&self.free);
        let s = g.0.get_mut(&bytes)?.pop()?;
        g.1 -= bytes;
        Some(s)
    }

    fn give(&self, s: CudaSlice<u8>) {
        let bytes = s.len();
        let mut g = lock(&self.free);
        if bytes == 0 || g.1 + bytes > Self::MAX_BYTES {
            drop(g);
            drop(s);
            return;
        }
        g.1 += bytes;
        g.0.entry(bytes).or_default().push(s);
    }

    fn clear(&self) {
        let freed = std::mem::take(&mut *lock(&self.free));
        drop(freed);
    }

    /// Bytes held.
    fn held(&self) -> usize {
        lock(&self.free).1
    }
}

/// A resident input: the host array (a strong clone) and its device copy.
type Resident = (Arc<HostArray>, Arc<DeviceBuffer>);

/// The device state shared by a [`CudaDevice`] and its launches.
struct Inner {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    info: DeviceInfo,
    sm: u32,
    kernels: Mutex<crate::cache::Lru<(u64, String, bool), Arc<CudaKernel>>>,
    /// Freed allocations kept for reuse.
    pool: Arc<BufferPool>,
    /// Prepared programs ([`CudaDevice::prepare`]), by (fingerprint of the module as given,
    /// program name, fast-math).
    programs: Mutex<crate::cache::Lru<(u64, String, bool), Arc<CudaProgram>>>,
    /// The same programs by module identity and fast-math ([`CudaDevice::prepare_shared`]).
    shared: [crate::prepare::ByIdentity<Arc<CudaProgram>>; 2],
    /// Compiled kernels by module identity and fast-math
    /// ([`CudaDevice::run_kernel_buffers_shared`]): no hashing of the IR per launch.
    shared_kernels: [crate::prepare::ByIdentity<Arc<CudaKernel>>; 2],
    /// Uploaded inputs keyed by the address of their `Arc<HostArray>`; the strong clone keeps
    /// the address from being reused (and the array from being changed) while cached.
    resident: Mutex<HashMap<usize, Resident>>,
    uploads: AtomicU64,
    upload_bytes: AtomicU64,
    downloads: AtomicU64,
    download_bytes: AtomicU64,
    /// The condition kernel of device loops, linked once ([`CudaDevice::run_loop_graph`]).
    loop_cond: OnceLock<Option<LoadedModule>>,
    /// Scratch word pairs kept between launches ([`CudaDevice::with_scratch_pair`]), by user.
    scratch: Mutex<HashMap<&'static str, ScratchPair>>,
}

/// Two zeroed buffers of `words` `u64` words that launches use in turn
/// ([`CudaDevice::with_scratch_pair`]): `bufs[turn]` is the next launch's.
struct ScratchPair {
    bufs: [Arc<DeviceBuffer>; 2],
    words: usize,
    turn: usize,
}

impl CudaKernel {
    /// An error naming kernel `name` when `grid`'s blocks hold more threads than this
    /// compiled kernel allows.
    fn check_block(&self, name: &str, grid: &weft_ir::KernelGrid) -> Result<(), RunError> {
        if grid.group_size() > self.max_block as usize {
            return Err(RunError::Launch {
                program: name.to_string(),
                message: format!(
                    "a block of {} threads exceeds the compiled kernel's limit of {}",
                    grid.group_size(),
                    self.max_block
                ),
            });
        }
        Ok(())
    }
}

/// Lets the device's default memory pool (which `cuMemAllocAsync` and `cuMemFreeAsync`
/// serve) keep freed memory instead of returning it to the driver at every synchronise:
/// with the default release threshold of 0, each iteration of a host loop would map its
/// outputs' memory afresh. Best effort: a driver without memory pools keeps its behaviour.
fn keep_pool_memory(ordinal: usize) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        let mut dev: sys::CUdevice = 0;
        let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
        let mut threshold = u64::MAX;
        // SAFETY: plain driver calls on out-pointers that live for the call; the context of
        // `ordinal` is current (retained just before).
        unsafe {
            if sys::cuDeviceGet(&mut dev, ordinal as c_int) != sys::CUresult::CUDA_SUCCESS
                || sys::cuDeviceGetDefaultMemPool(&mut pool, dev) != sys::CUresult::CUDA_SUCCESS
            {
                return;
            }
            sys::cuMemPoolSetAttribute(
                pool,
                sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                (&mut threshold as *mut u64).cast::<c_void>(),
            );
        }
    }));
}

/// A program prepared and compiled for a CUDA device ([`CudaDevice::prepare`]): launch it
/// with [`CudaDevice::launch_prepared`] or [`CudaDevice::launch_buffers_prepared`] as often as
/// wanted; nothing is planned, lifted or looked up again.
pub struct CudaProgram {
    prepared: Prepared,
    kernel: Arc<CudaKernel>,
}

impl CudaProgram {
    /// The preparation (kernel module, argument planning).
    pub fn prepared(&self) -> &Prepared {
        &self.prepared
    }

    /// The loaded kernel.
    pub fn kernel(&self) -> &Arc<CudaKernel> {
        &self.kernel
    }
}

/// A CUDA device: one GPU's primary context and default stream, a kernel cache, resident
/// inputs and transfer counters. Cheap to share between threads (`Send + Sync`); launches
/// keep what they use alive.
pub struct CudaDevice {
    inner: Arc<Inner>,
    config: GpuConfig,
}

impl CudaDevice {
    /// Opens device `ordinal` (0-based): retains its primary context.
    ///
    /// # Errors
    /// [`CudaError::NoDriver`] without a driver library; [`CudaError::NoSuchDevice`] (naming
    /// how many devices exist) for an ordinal out of range or a driver without a GPU; else
    /// the failing driver call.
    pub fn new(ordinal: usize) -> Result<CudaDevice, CudaError> {
        match driver() {
            Ok(()) => {}
            Err(e) if e.code() == Some("CUDA_ERROR_NO_DEVICE") => {
                return Err(CudaError::NoSuchDevice { ordinal, count: 0 })
            }
            Err(e) => return Err(e),
        }
        guard("CudaDevice::new", || {
            let count = device_count()?;
            if ordinal >= count {
                return Err(CudaError::NoSuchDevice { ordinal, count });
            }
            let info = device_info(ordinal)?;
            let ctx = CudaContext::new(ordinal).map_err(|e| drv("cuDevicePrimaryCtxRetain", e))?;
            // SAFETY: this device uses one stream only, so no cross-stream tracking is needed.
            unsafe { ctx.disable_event_tracking() };
            let stream = ctx.default_stream();
            keep_pool_memory(ordinal);
            let (major, minor) = info.compute_capability;
            Ok(CudaDevice {
                inner: Arc::new(Inner {
                    sm: (major * 10 + minor).min(MAX_SM),
                    ctx,
                    stream,
                    info,
                    kernels: Mutex::default(),
                    pool: Arc::default(),
                    programs: Mutex::default(),
                    shared: Default::default(),
                    shared_kernels: Default::default(),
                    resident: Mutex::default(),
                    uploads: AtomicU64::new(0),
                    upload_bytes: AtomicU64::new(0),
                    downloads: AtomicU64::new(0),
                    download_bytes: AtomicU64::new(0),
                    loop_cond: OnceLock::new(),
                    scratch: Mutex::default(),
                }),
                config: GpuConfig::default(),
            })
        })
    }

    /// What the driver reports about this device.
    pub fn info(&self) -> &DeviceInfo {
        &self.inner.info
    }

    /// The compute capability PTX is generated for (major·10 + minor, at most [`MAX_SM`]).
    pub fn sm(&self) -> u32 {
        self.inner.sm
    }

    /// The launch configuration used by later launches (default: automatic geometry,
    /// precise math).
    pub fn config(&self) -> GpuConfig {
        self.config
    }

    /// Sets the launch configuration for later launches (prepared launches keep theirs).
    pub fn set_config(&mut self, config: GpuConfig) {
        self.config = config;
    }

    /// Waits until everything queued on this device's stream has run.
    ///
    /// # Errors
    /// The driver's, naming the call (a failed launch queued earlier shows here).
    pub fn synchronize(&self) -> Result<(), CudaError> {
        self.inner.bind()?;
        self.inner.sync()
    }

    /// Host↔device copies so far.
    pub fn transfers(&self) -> Transfers {
        let i = &self.inner;
        Transfers {
            uploads: i.uploads.load(Ordering::Relaxed),
            upload_bytes: i.upload_bytes.load(Ordering::Relaxed),
            downloads: i.downloads.load(Ordering::Relaxed),
            download_bytes: i.download_bytes.load(Ordering::Relaxed),
        }
    }

    /// Number of kernels in the cache.
    pub fn cached(&self) -> usize {
        lock(&self.inner.kernels).len()
    }

    /// Number of input arrays resident on the device.
    pub fn resident_inputs(&self) -> usize {
        lock(&self.inner.resident).len()
    }

    /// Empties the kernel cache and forgets every resident input; modules are unloaded once
    /// no launch holds them.
    pub fn clear_cache(&self) {
        lock(&self.inner.kernels).clear();
        lock(&self.inner.programs).clear();
        self.inner.pool.clear();
        for s in &self.inner.shared {
            s.clear();
        }
        for s in &self.inner.shared_kernels {
            s.clear();
        }
        self.clear_resident();
    }

    /// Forgets every resident input (their device memory is freed once no prepared launch
    /// uses it); the next launch uploads its inputs again.
    pub fn clear_resident(&self) {
        lock(&self.inner.resident).clear();
    }

    /// The loaded kernel for program `name` of `m` with the current `fast_math` setting,
    /// from the cache (keyed by the module's structural fingerprint, the name and
    /// `fast_math`; the least recently used of more than [`crate::cache::DEFAULT_CAPACITY`]
    /// kernels is dropped, its module unloaded once no launch holds it) or freshly compiled
    /// and loaded.
    ///
    /// # Errors
    /// [`RuntimeError::Llvm`] when PTX generation fails; [`RuntimeError::Cuda`] when the
    /// driver rejects the module (the message carries the JIT log).
    pub fn kernel(&self, m: &Module, name: &str) -> Result<Arc<CudaKernel>, RuntimeError> {
        self.kernel_with(m, name, self.config().fast_math)
    }

    /// [`Self::kernel_with`] by module identity (`Arc` address), for callers that keep a
    /// module unchanged behind an `Arc` (the `weft` library's kernels).
    pub(crate) fn kernel_shared(
        &self,
        m: &Arc<Module>,
        name: &str,
    ) -> Result<Arc<CudaKernel>, RuntimeError> {
        let fast = self.config().fast_math;
        self.inner.shared_kernels[usize::from(fast)]
            .get_or(m, name, || self.kernel_with(m, name, fast))
    }

    /// The largest work-group (threads per block) the compiled kernel-mode program `name`
    /// of `m` launches with on this device (`CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK`: below
    /// 1,024 when the kernel needs more than 64 registers a thread), compiling it on first
    /// use (found again by module identity, as [`CudaDevice::run_kernel_buffers_shared`]).
    ///
    /// # Errors
    /// As compiling the kernel.
    pub fn max_work_items_shared(&self, m: &Arc<Module>, name: &str) -> Result<u32, RuntimeError> {
        Ok(self.kernel_shared(m, name)?.max_block)
    }

    fn kernel_with(
        &self,
        m: &Module,
        name: &str,
        fast_math: bool,
    ) -> Result<Arc<CudaKernel>, RuntimeError> {
        let key = (weft_ir::launch::fingerprint(m), name.to_string(), fast_math);
        if let Some(k) = lock(&self.inner.kernels).get(&key) {
            return Ok(k);
        }
        let i = &self.inner;
        let opts = weft_backend_llvm::Options {
            fast_math,
            ..Default::default()
        };
        let ptx = cached_ptx(m, name, i.sm, opts)?;
        let t0 = Instant::now();
        let level = match ptx.effort {
            weft_backend_llvm::Effort::Auto | weft_backend_llvm::Effort::Full => 4,
            weft_backend_llvm::Effort::Reduced | weft_backend_llvm::Effort::Minimal => 0,
        };
        // PTX → SASS is the driver's JIT, whose own compute cache keeps the result across
        // processes (CUDA_CACHE_PATH). A cubin made with the driver's linker instead
        // (`cuLinkAddData` + `cuModuleLoadData`, kept in weft's disk cache until 2026-11-27)
        // ran MDH 10% slower than the JIT's code for the same PTX (5.29 against 4.79 ms on an
        // H200, docs/performance.md).
        let module = guard("cuModuleLoadDataEx", || {
            let module = i.load_module_at(&ptx.ptx, &ptx.entry, level)?;
            stats::count_compile(stats::Compiler::Driver, t0.elapsed());
            Ok(module)
        })?;
        let load_time = t0.elapsed();
        let f = module.func;
        let fattr = |a: sys::CUfunction_attribute| {
            // SAFETY: `f` is the kernel just loaded.
            unsafe { result::function::get_function_attribute(f, a) }
                .ok()
                .filter(|&v| v > 0)
                .map(|v| v as u32)
        };
        let (max_block, registers, auto_block, blocks_per_sm) = guard("cuOccupancy", || {
            use sys::CUfunction_attribute as F;
            let max_block = fattr(F::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK).unwrap_or(1024);
            let registers = fattr(F::CU_FUNC_ATTRIBUTE_NUM_REGS).unwrap_or(0);
            // SAFETY: `f` is loaded; no dynamic shared memory.
            let auto = unsafe { result::occupancy::max_potential_block_size(f, None, 0, 0) }
                .ok()
                .filter(|&(_, b)| b > 0)
                .map_or(FALLBACK_BLOCK, |(_, b)| b as u32)
                .clamp(1, max_block);
            Ok((max_block, registers, auto, i.blocks_per_sm(f, auto)))
        })?;
        let k = Arc::new(CudaKernel {
            module,
            layout: ptx.layout,
            ptx: ptx.ptx,
            sm: i.sm,
            llvm_time: ptx.compile_time,
            load_time,
            max_block,
            registers,
            auto_block,
            blocks_per_sm,
            block_elems: weft_backend_llvm::ptx_block_elems(m, name) as u32,
        });
        Ok(lock(&i.kernels).get_or_insert(key, k))
    }

    /// Program `name` of `m` prepared ([`Prepared::new`]) and compiled with the current
    /// `fast_math` setting, from the cache or freshly made: what every launch of this device
    /// starts from.
    ///
    /// # Errors
    /// An unknown program; as [`CudaDevice::kernel`].
    pub fn prepare(&self, m: &Module, name: &str) -> Result<Arc<CudaProgram>, RuntimeError> {
        let fast_math = self.config().fast_math;
        let key = (weft_ir::launch::fingerprint(m), name.to_string(), fast_math);
        if let Some(p) = lock(&self.inner.programs).get(&key) {
            return Ok(p);
        }
        let prepared = Prepared::new(m, name)?;
        let kernel = self.kernel_with(prepared.kernel_module(), name, fast_math)?;
        let p = Arc::new(CudaProgram { prepared, kernel });
        Ok(lock(&self.inner.programs).get_or_insert(key, p))
    }

    /// [`CudaDevice::prepare`] for a module the caller keeps unchanged behind `m` (the `weft`
    /// library's programs): found by the `Arc`'s identity, without hashing the IR.
    ///
    /// # Errors
    /// As [`CudaDevice::prepare`].
    pub fn prepare_shared(
        &self,
        m: &Arc<Module>,
        name: &str,
    ) -> Result<Arc<CudaProgram>, RuntimeError> {
        let fast = usize::from(self.config().fast_math);
        self.inner.shared[fast].get_or(m, name, || self.prepare(m, name))
    }

    /// Whether [`CudaDevice::prepare_shared`] has program `name` of `m` already (with the
    /// current fast-math setting).
    pub fn is_prepared_shared(&self, m: &Arc<Module>, name: &str) -> bool {
        let fast = usize::from(self.config().fast_math);
        self.inner.shared[fast].contains(m, name)
    }

    /// Runs kernel `name` of `m` (DESIGN §2, kernel mode) over `grid` on the GPU, like
    /// [`weft_ir::Interpreter::run_kernel`]: every argument array is uploaded, the kernel is
    /// launched with `grid.groups` blocks of `grid.block` threads, and buffers are read back
    /// in place. Results equal the interpreter's for race-free kernels.
    ///
    /// # Errors
    /// Arguments that do not match the kernel's parameters (named); a block larger than the
    /// compiled kernel allows; [`RuntimeError::Llvm`] or [`RuntimeError::Cuda`] as for
    /// [`CudaDevice::launch`].
    pub fn run_kernel(
        &self,
        m: &Module,
        name: &str,
        args: &mut [weft_ir::KernelArg],
        grid: &weft_ir::KernelGrid,
    ) -> Result<(), RuntimeError> {
        let l = self.prepare_kernel(m, name, args, grid)?;
        let i = &self.inner;
        let mut l = l;
        l.run()?;
        guard("cuMemcpyDtoHAsync", || {
            for (a, b) in args.iter_mut().zip(&l.bufs) {
                if let (weft_ir::KernelArg::Buffer(h), Some(b)) = (a, b) {
                    let bytes = i.download(b)?;
                    let (s, _) = scalar_lanes(h.elem);
                    let n = h.len();
                    let planes: Vec<&[u8]> = bytes.chunks_exact(plane_bytes(s, n)).collect();
                    **h = read_output(h.elem, &h.shape, n, &planes);
                }
            }
            Ok(())
        })?;
        Ok(())
    }

    /// Prepares a kernel launch: checks the arguments, compiles (or finds) the kernel and
    /// uploads every array; [`CudaKernelLaunch::run`] and [`CudaKernelLaunch::time_runs`]
    /// then launch it as often as wanted (benchmarks time exactly that).
    ///
    /// # Errors
    /// As [`CudaDevice::run_kernel`].
    pub fn prepare_kernel(
        &self,
        m: &Module,
        name: &str,
        args: &[weft_ir::KernelArg],
        grid: &weft_ir::KernelGrid,
    ) -> Result<CudaKernelLaunch, RuntimeError> {
        let p = m
            .get(name)
            .ok_or_else(|| RunError::UnknownProgram(name.to_string()))?;
        weft_ir::launch::check_kernel_host_args(p, args)?;
        let kernel = self.kernel_with(m, name, self.config().fast_math)?;
        kernel.check_block(name, grid)?;
        let i = &self.inner;
        let layout = &kernel.layout;
        let mut ctx = Context::new(layout);
        let mut bufs: Vec<Option<DeviceBuffer>> = Vec::new();
        guard("cuMemcpyHtoDAsync", || {
            i.bind()?;
            for (k, a) in args.iter().enumerate() {
                match a {
                    weft_ir::KernelArg::Value(c) => {
                        ctx.uniform(k, c);
                        bufs.push(None);
                    }
                    weft_ir::KernelArg::Array(_) | weft_ir::KernelArg::Buffer(_) => {
                        let h = a.array().expect("array argument");
                        let (s, nl) = scalar_lanes(h.elem);
                        let pb = plane_bytes(s, h.len());
                        let mut bytes = vec![0u8; pb * nl];
                        for (l, dst) in bytes.chunks_exact_mut(pb).enumerate() {
                            fill_plane(dst, h, l);
                        }
                        let b = i.upload(&bytes)?;
                        ctx.planes(k, (0..nl).map(|l| b.ptr + (l * pb) as u64));
                        ctx.extents(k, nl, &h.shape);
                        bufs.push(Some(b));
                    }
                }
            }
            Ok(())
        })?;
        ctx.grid(grid.groups);
        let words = ctx.words;
        Ok(CudaKernelLaunch {
            dev: self.inner.clone(),
            kernel,
            words,
            bufs,
            grid: *grid,
        })
    }

    /// Applies program `name` over arrays (DESIGN §5) like
    /// [`weft_ir::Interpreter::apply`], on the GPU: launch, run, read the outputs. Results
    /// are bit-identical to the interpreter's unless `fast_math` is set.
    ///
    /// # Errors
    /// As [`CudaDevice::launch`], [`CudaLaunch::run`] and [`CudaLaunch::outputs`].
    pub fn apply(
        &self,
        m: &Module,
        name: &str,
        inputs: &[Input],
        shape: Option<&[usize]>,
    ) -> Result<Vec<HostArray>, RuntimeError> {
        let mut l = self.launch(m, name, inputs, shape)?;
        l.run()?;
        l.outputs()
    }

    /// Prepares a launch: checks the inputs (the interpreter's messages), compiles (or finds)
    /// the kernel, uploads the input arrays not yet resident on the device, allocates the
    /// outputs and picks the launch geometry from the device's [`GpuConfig`]. A launch of no
    /// elements transfers and allocates nothing.
    ///
    /// # Errors
    /// [`RuntimeError::Run`] for bad inputs or launch shape, [`RuntimeError::Llvm`] when PTX
    /// generation fails, [`RuntimeError::Cuda`] when a driver call fails.
    pub fn launch(
        &self,
        m: &Module,
        name: &str,
        inputs: &[Input],
        shape: Option<&[usize]>,
    ) -> Result<CudaLaunch, RuntimeError> {
        let prog = self.prepare(m, name)?;
        self.launch_prepared(&prog, inputs, shape)
    }

    /// [`CudaDevice::launch`] of a prepared program (made with the same `fast_math`
    /// setting): checks the inputs (a recent launch's plan is reused when they have
    /// its signature), uploads and allocates.
    ///
    /// # Errors
    /// As [`CudaDevice::launch`].
    pub fn launch_prepared(
        &self,
        prog: &CudaProgram,
        inputs: &[Input],
        shape: Option<&[usize]>,
    ) -> Result<CudaLaunch, RuntimeError> {
        let p = prog.prepared.program();
        weft_ir::launch::check_host_inputs(p, inputs)?;
        let descs: Vec<ArgDesc> = inputs.iter().map(ArgDesc::of).collect();
        let plan = prog.prepared.plan(&descs, shape)?;
        let n = plan.n;
        let cfg = self.config();
        let kernel = prog.kernel.clone();
        let i = &self.inner;
        let layout = &kernel.layout;
        let mut ctx = Context::new(layout);
        let mut keep = Vec::new();
        if n > 0 {
            i.evict_dropped();
        }
        for (k, (par, inp)) in p.params.iter().zip(inputs).enumerate() {
            match (par.kind, inp) {
                (ParamKind::Varying | ParamKind::Array, Input::Array(a)) => {
                    let nl = lanes(a.elem);
                    if n > 0 && packed(par.kind, a.elem) {
                        let b = guard("cuMemcpyHtoDAsync", || i.resident_packed(a))?;
                        let eb = storage_bytes(scalar_lanes(a.elem).0) as u64;
                        ctx.planes(k, (0..nl).map(|l| b.ptr + l as u64 * eb));
                        keep.push(b);
                    } else if n > 0 {
                        let b = guard("cuMemcpyHtoDAsync", || i.resident(a))?;
                        let pb = plane_bytes(scalar_lanes(a.elem).0, a.len()) as u64;
                        ctx.planes(k, (0..nl).map(|l| b.ptr + l as u64 * pb));
                        keep.push(b);
                    }
                    if par.kind == ParamKind::Array {
                        ctx.extents(k, nl, &a.shape);
                    }
                }
                (ParamKind::Uniform, Input::Uniform(c)) => ctx.uniform(k, c),
                _ => {}
            }
        }
        for (j, c) in plan.extra.iter().enumerate() {
            ctx.uniform(inputs.len() + j, c);
        }
        let mut outs = Vec::new();
        for (k, o) in p.outputs.iter().enumerate() {
            let (s, nl) = scalar_lanes(o.ty);
            let buf = if n > 0 {
                let pb = plane_bytes(s, n);
                let b = guard("cuMemAlloc", || i.alloc_zeroed(pb * nl))?;
                ctx.output(k, (0..nl).map(|l| b.ptr + (l * pb) as u64));
                Some(b)
            } else {
                None
            };
            outs.push((o.ty, buf));
        }
        ctx.launch(&plan.shape);
        let words = ctx.words;
        let (block, grid) = guard("cuOccupancyMaxActiveBlocksPerMultiprocessor", || {
            i.geometry(&kernel, &cfg, n)
        })?;
        Ok(CudaLaunch {
            dev: self.inner.clone(),
            kernel,
            words,
            _inputs: keep,
            outs,
            shape: plan.shape.clone(),
            n,
            block,
            grid,
            ran: false,
            host: None,
        })
    }

    /// Copies a host buffer to the device (same plane layout; see [`HostBuffer`]).
    ///
    /// # Errors
    /// `cuMemAlloc` or `cuMemcpyHtoDAsync` failing.
    pub fn upload(&self, h: &HostBuffer) -> Result<CudaBuffer, RuntimeError> {
        let i = &self.inner;
        let buf = guard("cuMemcpyHtoDAsync", || {
            i.bind()?;
            i.upload(h.bytes())
        })?;
        Ok(CudaBuffer {
            dev: i.clone(),
            buf: Arc::new(buf),
            elem: h.elem(),
            len: h.len(),
            stride: h.stride(),
        })
    }

    /// A buffer of `n` elements of `elem` (same plane layout as [`CudaDevice::upload`]'s)
    /// whose contents are undefined until a kernel writes them: no upload and no fill, for
    /// the outputs of a launch that writes every element (the GPU reductions' levels).
    ///
    /// # Errors
    /// `cuMemAlloc` failing.
    pub fn alloc_uninit(&self, elem: Type, n: usize) -> Result<CudaBuffer, RuntimeError> {
        self.alloc_filled(elem, n, false)
    }

    /// A buffer of `n` elements of `elem` (same plane layout as [`CudaDevice::upload`]'s)
    /// whose bytes are all zero: a fill queued on the device's stream, no upload (the
    /// flags and counters a kernel starts from).
    ///
    /// # Errors
    /// `cuMemAlloc` or `cuMemsetD8Async` failing.
    pub fn alloc_zeroed(&self, elem: Type, n: usize) -> Result<CudaBuffer, RuntimeError> {
        self.alloc_filled(elem, n, true)
    }

    /// Runs `f` (which queues one launch) with two scratch buffers of at least `words`
    /// `u64` words kept on this device for `user` between calls, so that a launch that
    /// needs zeroed flags or counters gets them with no fill on the stream: `cur` is all
    /// zero when the launch starts; the launch must leave every word of `next` zero (the
    /// two have the same length) and may leave `cur` in any state, and the next call's
    /// `cur` is this call's `next`. Calls are serialised (a lock held while `f` queues its
    /// launch), so their launches run in the order the buffers were handed out; a pair too
    /// small is replaced by a zeroed one (a fill, once per growth). When `f` fails, nothing
    /// is turned: its launch must not have been queued.
    ///
    /// # Errors
    /// `cuMemAlloc` or `cuMemsetD8Async` failing for a new pair; `f`'s error.
    pub fn with_scratch_pair<R, E: From<RuntimeError>>(
        &self,
        user: &'static str,
        words: usize,
        f: impl FnOnce(&CudaBuffer, &CudaBuffer) -> Result<R, E>,
    ) -> Result<R, E> {
        let i = &self.inner;
        let mut all = lock(&i.scratch);
        let fits = all.get(user).is_some_and(|p| p.words >= words);
        if !fits {
            let words = words.max(1);
            let bytes =
                HostBuffer::bytes_for(weft_ir::Type::scalar(weft_ir::ScalarType::U64), words);
            let new = || -> Result<Arc<DeviceBuffer>, RuntimeError> {
                let b = guard("cuMemAlloc", || {
                    i.bind()?;
                    i.alloc_zeroed(bytes)
                })?;
                Ok(Arc::new(b))
            };
            let bufs = [new()?, new()?];
            all.insert(
                user,
                ScratchPair {
                    bufs,
                    words,
                    turn: 0,
                },
            );
        }
        let pair = all.get_mut(user).expect("inserted above");
        let handle = |b: &Arc<DeviceBuffer>| CudaBuffer {
            dev: i.clone(),
            buf: b.clone(),
            elem: weft_ir::Type::scalar(weft_ir::ScalarType::U64),
            len: pair.words,
            stride: HostBuffer::stride_for(pair.words),
        };
        let (cur, next) = (
            handle(&pair.bufs[pair.turn]),
            handle(&pair.bufs[1 - pair.turn]),
        );
        let r = f(&cur, &next)?;
        pair.turn = 1 - pair.turn;
        Ok(r)
    }

    fn alloc_filled(&self, elem: Type, n: usize, zero: bool) -> Result<CudaBuffer, RuntimeError> {
        let i = &self.inner;
        let bytes = HostBuffer::bytes_for(elem, n);
        let buf = guard("cuMemAlloc", || {
            i.bind()?;
            if zero {
                i.alloc_zeroed(bytes)
            } else {
                i.alloc(bytes)
            }
        })?;
        Ok(CudaBuffer {
            dev: i.clone(),
            buf: Arc::new(buf),
            elem,
            len: n,
            stride: HostBuffer::stride_for(n),
        })
    }

    /// Applies program `name` of `m` over device buffers without copying them, with fresh
    /// device outputs (the `weft` library's arrays resident on this GPU). The kernel is
    /// queued on the device's stream, not waited for: later launches and downloads on the
    /// same stream see its results, and faults surface at the next download.
    ///
    /// # Errors
    /// As [`CudaDevice::launch`]; also an element range outside its buffer or a buffer of
    /// another device.
    pub fn apply_buffers(
        &self,
        m: &Module,
        name: &str,
        args: &[CudaArg],
        shape: Option<&[usize]>,
    ) -> Result<Vec<CudaBuffer>, RuntimeError> {
        let mut l = self.launch_buffers(m, name, args, shape)?;
        l.enqueue()?;
        Ok(l.into_outputs())
    }

    /// Prepares a launch over device buffers (see [`CudaDevice::apply_buffers`]).
    ///
    /// # Errors
    /// As [`CudaDevice::apply_buffers`].
    pub fn launch_buffers(
        &self,
        m: &Module,
        name: &str,
        args: &[CudaArg],
        shape: Option<&[usize]>,
    ) -> Result<CudaBufferLaunch, RuntimeError> {
        let prog = self.prepare(m, name)?;
        self.launch_buffers_prepared(&prog, args, shape)
    }

    /// [`CudaDevice::launch_buffers`] of a prepared program (made with the same `fast_math`
    /// setting): checks the arguments (a recent launch's plan is reused when they have its
    /// signature) and points the kernel's context at them.
    ///
    /// # Errors
    /// As [`CudaDevice::apply_buffers`].
    pub fn launch_buffers_prepared(
        &self,
        prog: &CudaProgram,
        args: &[CudaArg],
        shape: Option<&[usize]>,
    ) -> Result<CudaBufferLaunch, RuntimeError> {
        for a in args {
            if let CudaArg::Array { buf, .. } = a {
                if !buf.dev.same_gpu(&self.inner) {
                    return Err(CudaError::Driver {
                        call: "cuLaunchKernel",
                        code: "CUDA_ERROR_INVALID_CONTEXT".into(),
                        description: "a buffer lives on another device".into(),
                        log: None,
                    }
                    .into());
                }
            }
        }
        let descs: smallvec::SmallVec<[ArgDesc; 8]> = args.iter().map(CudaArg::desc).collect();
        let plan = prog.prepared.plan(&descs, shape)?;
        let p = prog.prepared.program();
        crate::plan::check_ranges(
            p,
            args.iter().map(|a| match a {
                CudaArg::Array { buf, offset, shape } => {
                    Some((*offset, shape.iter().product(), buf.len))
                }
                CudaArg::Uniform(_) => None,
            }),
        )?;
        let n = plan.n;
        let cfg = self.config();
        let kernel = prog.kernel.clone();
        let i = &self.inner;
        let layout = &kernel.layout;
        let mut ctx = Context::new(layout);
        let mut keep = Vec::with_capacity(2 * args.len());
        for (k, (par, arg)) in p.params.iter().zip(args).enumerate() {
            match arg {
                CudaArg::Array { buf, offset, shape } if packed(par.kind, buf.elem) => {
                    let b = buf.lane_bytes();
                    let len: usize = shape.iter().product();
                    let p = guard("cuMemcpy2DAsync", || {
                        i.bind()?;
                        i.pack(buf.buf.ptr, buf.lanes(), buf.stride, b, *offset, len)
                    })?;
                    ctx.planes(k, (0..buf.lanes()).map(|l| p.ptr + (l * b) as u64));
                    ctx.extents(k, buf.lanes(), shape);
                    keep.push(Arc::new(p));
                    keep.push(buf.buf.clone());
                }
                CudaArg::Array { buf, offset, shape } => {
                    let b = buf.lane_bytes();
                    ctx.planes(
                        k,
                        (0..buf.lanes())
                            .map(|l| buf.buf.ptr + ((l * buf.stride + offset) * b) as u64),
                    );
                    if par.kind == ParamKind::Array {
                        ctx.extents(k, buf.lanes(), shape);
                    }
                    keep.push(buf.buf.clone());
                }
                CudaArg::Uniform(c) => ctx.uniform(k, c),
            }
        }
        for (j, c) in plan.extra.iter().enumerate() {
            ctx.uniform(args.len() + j, c);
        }
        let mut outs = Vec::with_capacity(p.outputs.len());
        for (k, o) in p.outputs.iter().enumerate() {
            // Not zeroed: the kernel writes every element; the padding is zeroed on download.
            let b = guard("cuMemAlloc", || {
                i.bind()?;
                i.alloc(HostBuffer::bytes_for(o.ty, n))
            })?;
            let out = CudaBuffer {
                dev: i.clone(),
                buf: Arc::new(b),
                elem: o.ty,
                len: n,
                stride: HostBuffer::stride_for(n),
            };
            ctx.output(
                k,
                (0..out.lanes()).map(|l| out.buf.ptr + (l * out.stride * out.lane_bytes()) as u64),
            );
            outs.push(out);
        }
        ctx.launch(&plan.shape);
        let words = ctx.words;
        let (block, grid) = guard("cuOccupancyMaxActiveBlocksPerMultiprocessor", || {
            i.geometry(&kernel, &cfg, n)
        })?;
        Ok(CudaBufferLaunch {
            launch: CudaLaunch {
                dev: self.inner.clone(),
                kernel,
                words,
                _inputs: keep,
                outs: Vec::new(),
                shape: plan.shape.clone(),
                n,
                block,
                grid,
                ran: false,
                host: None,
            },
            outs,
        })
    }
}

/// PTX of program `name` of `m` for `sm`, from the on-disk cache ([`DiskCache::global`])
/// when it holds it, else compiled by LLVM (and stored). The key is the module's canonical
/// text, the program, `sm`, the options and LLVM's version.
fn cached_ptx(
    m: &Module,
    name: &str,
    sm: u32,
    opts: weft_backend_llvm::Options,
) -> Result<weft_backend_llvm::PtxKernel, RuntimeError> {
    use weft_backend_llvm::Effort;
    let t0 = Instant::now();
    let (Some(cache), Some(p)) = (DiskCache::global(), m.get(name)) else {
        let k = weft_backend_llvm::compile_ptx(m, name, sm, opts)?;
        stats::count_compile(stats::Compiler::LlvmPtx, t0.elapsed());
        return Ok(k);
    };
    let key = Key::new(
        "ptx",
        &[
            weft_ir::print_module(m).as_bytes(),
            name.as_bytes(),
            format!(
                "sm_{sm} {opts:?} llvm {}",
                weft_backend_llvm::llvm_version()
            )
            .as_bytes(),
        ],
    );
    // The payload: the effort's tag, then the PTX text.
    const EFFORTS: [Effort; 4] = [Effort::Auto, Effort::Full, Effort::Reduced, Effort::Minimal];
    if let Some(b) = cache.get(&key) {
        let effort = b.first().and_then(|&t| EFFORTS.get(t as usize));
        if let (Some(&effort), Ok(ptx)) = (effort, std::str::from_utf8(&b[1..])) {
            stats::count_load(stats::Compiler::LlvmPtx, t0.elapsed());
            return Ok(weft_backend_llvm::PtxKernel {
                ptx: ptx.to_string(),
                entry: weft_backend_llvm::PTX_ENTRY.to_string(),
                layout: weft_ir::abi::Layout::new(p),
                compile_time: t0.elapsed(),
                effort,
            });
        }
    }
    let k = weft_backend_llvm::compile_ptx(m, name, sm, opts)?;
    let tag = EFFORTS.iter().position(|&e| e == k.effort).unwrap_or(0) as u8;
    let mut payload = vec![tag];
    payload.extend_from_slice(k.ptx.as_bytes());
    cache.put(&key, &payload);
    stats::count_compile(stats::Compiler::LlvmPtx, t0.elapsed());
    Ok(k)
}
