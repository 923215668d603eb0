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
//! `begin: i64` and `end: i64`; threads walk the elements in a grid-stride loop, so any grid
//! is correct. Planes are not padded (one element per thread); arrays hold at least one
//! element. All planes of one array (its tuple lanes) share one device allocation.

use crate::buffer::HostBuffer;
use crate::context::Context;
use crate::error::RuntimeError;
use crate::planes::{fill_plane, plane_bytes, read_output, scalar_lanes};
use cudarc::driver::{result, sys, CudaContext, CudaSlice, CudaStream, DevicePtr, DriverError};
use std::collections::HashMap;
use std::ffi::{c_int, c_uint, c_void, CString};
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};
use weft_ir::abi::{lanes, Layout};
use weft_ir::interp::{HostArray, Input, RunError};
use weft_ir::launch::{plan_program_launch, plan_program_launch_desc, ArgDesc};
use weft_ir::{Const, Module, ParamKind, Type};

/// The highest compute capability (major·10 + minor) PTX is generated for: LLVM 19 knows
/// sm_90; newer devices JIT that PTX forward.
pub const MAX_SM: u32 = 90;

/// The largest grid (blocks in x) a launch uses.
const MAX_GRID: u32 = i32::MAX as u32;

/// Block size when the driver's occupancy calculator is unavailable.
const FALLBACK_BLOCK: u32 = 256;

/// Why a CUDA operation failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CudaError {
    /// The driver library (libcuda) is not installed or could not be loaded.
    #[error("no CUDA driver found (libcuda.so could not be loaded)")]
    NoDriver,
    /// A driver call failed.
    #[error("{}", driver_message(call, code, description, log.as_deref()))]
    Driver {
        /// The driver function, e.g. `cuModuleLoadDataEx`.
        call: &'static str,
        /// The error's name, e.g. `CUDA_ERROR_INVALID_PTX`.
        code: String,
        /// The driver's description of the error (empty if it gave none).
        description: String,
        /// The PTX JIT's error log, for module loads.
        log: Option<String>,
    },
    /// The requested device ordinal does not exist.
    #[error("no CUDA device {ordinal}: the CUDA driver reports {count} device(s)")]
    NoSuchDevice {
        /// The ordinal asked for.
        ordinal: usize,
        /// How many devices the driver reports.
        count: usize,
    },
    /// The driver bindings panicked (e.g. a function missing from an old driver); caught.
    #[error("{call}: the CUDA driver bindings panicked: {message}")]
    Panic {
        /// The operation that was running.
        call: &'static str,
        /// The panic's message.
        message: String,
    },
}

fn driver_message(call: &str, code: &str, description: &str, log: Option<&str>) -> String {
    let mut s = format!("{call}: {code}");
    if !description.is_empty() {
        s.push_str(&format!(" ({description})"));
    }
    if let Some(l) = log.filter(|l| !l.trim().is_empty()) {
        s.push_str(&format!("\n{}", l.trim_end()));
    }
    s
}

impl CudaError {
    /// The driver error code's name (`CUDA_ERROR_…`) if this is a failed driver call.
    pub fn code(&self) -> Option<&str> {
        match self {
            CudaError::Driver { code, .. } => Some(code),
            _ => None,
        }
    }
}

/// A driver error from `call`.
fn drv(call: &'static str, e: DriverError) -> CudaError {
    let description = e
        .error_string()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    CudaError::Driver {
        call,
        code: format!("{:?}", e.0),
        description,
        log: None,
    }
}

/// Runs `f` (which calls into cudarc), turning a panic into [`CudaError::Panic`].
fn guard<T>(call: &'static str, f: impl FnOnce() -> Result<T, CudaError>) -> Result<T, CudaError> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| {
        let message = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(no message)".to_string());
        Err(CudaError::Panic { call, message })
    })
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Loads libcuda and runs `cuInit` once per process; the outcome is remembered.
fn driver() -> Result<(), CudaError> {
    static INIT: OnceLock<Result<(), CudaError>> = OnceLock::new();
    INIT.get_or_init(|| {
        // SAFETY: only tries to open the library under its usual names (and closes it).
        if !guard("dlopen(libcuda)", || Ok(unsafe { sys::is_culib_present() }))? {
            return Err(CudaError::NoDriver);
        }
        guard("cuInit", || result::init().map_err(|e| drv("cuInit", e)))
    })
    .clone()
}

/// True for driver errors that mean "a driver library, but no usable GPU".
fn means_no_device(e: &CudaError) -> bool {
    matches!(
        e.code(),
        Some("CUDA_ERROR_NO_DEVICE") | Some("CUDA_ERROR_STUB_LIBRARY")
    )
}

/// Whether the CUDA driver can be used: `Ok` when libcuda loads and `cuInit` succeeds.
///
/// # Errors
/// [`CudaError::NoDriver`] ("no CUDA driver found (libcuda.so could not be loaded)") when the
/// library is missing; otherwise the failing call, e.g. `cuInit: CUDA_ERROR_NO_DEVICE`.
pub fn cuda_driver_status() -> Result<(), CudaError> {
    driver()
}

/// The driver's CUDA version as (major, minor), e.g. (13, 0).
///
/// # Errors
/// As [`cuda_driver_status`], or `cuDriverGetVersion` failing.
pub fn cuda_driver_version() -> Result<(u32, u32), CudaError> {
    driver()?;
    guard("cuDriverGetVersion", || {
        let mut v: c_int = 0;
        // SAFETY: writes one int.
        unsafe { sys::cuDriverGetVersion(&mut v) }
            .result()
            .map_err(|e| drv("cuDriverGetVersion", e))?;
        Ok(((v / 1000) as u32, ((v % 1000) / 10) as u32))
    })
}

/// What the driver reports about one device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Device ordinal (0-based, in the driver's order; `CUDA_VISIBLE_DEVICES` applies).
    pub ordinal: usize,
    /// Product name, e.g. "NVIDIA H100 80GB HBM3".
    pub name: String,
    /// Compute capability (major, minor), e.g. (9, 0).
    pub compute_capability: (u32, u32),
    /// Number of streaming multiprocessors.
    pub multiprocessors: u32,
    /// Total device memory in bytes.
    pub memory_bytes: u64,
}

impl fmt::Display for DeviceInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "CUDA device {}: {} (sm_{}{}, {} SMs, {:.1} GiB)",
            self.ordinal,
            self.name,
            self.compute_capability.0,
            self.compute_capability.1,
            self.multiprocessors,
            self.memory_bytes as f64 / (1u64 << 30) as f64
        )
    }
}

fn device_count() -> Result<usize, CudaError> {
    Ok(result::device::get_count().map_err(|e| drv("cuDeviceGetCount", e))? as usize)
}

fn device_info(ordinal: usize) -> Result<DeviceInfo, CudaError> {
    let dev = result::device::get(ordinal as c_int).map_err(|e| drv("cuDeviceGet", e))?;
    let name = result::device::get_name(dev).map_err(|e| drv("cuDeviceGetName", e))?;
    let attr = |a: sys::CUdevice_attribute| -> Result<u32, CudaError> {
        // SAFETY: `dev` came from cuDeviceGet.
        let v = unsafe { result::device::get_attribute(dev, a) }
            .map_err(|e| drv("cuDeviceGetAttribute", e))?;
        Ok(v.max(0) as u32)
    };
    use sys::CUdevice_attribute as A;
    let major = attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
    let multiprocessors = attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
    // SAFETY: as above.
    let memory_bytes =
        unsafe { result::device::total_mem(dev) }.map_err(|e| drv("cuDeviceTotalMem", e))? as u64;
    Ok(DeviceInfo {
        ordinal,
        name,
        compute_capability: (major, minor),
        multiprocessors,
        memory_bytes,
    })
}

/// The CUDA devices present.
///
/// # Errors
/// None when there is no driver library, or a driver but no usable GPU (`cuInit` reports
/// `CUDA_ERROR_NO_DEVICE` or `CUDA_ERROR_STUB_LIBRARY`): those give an empty list. Other
/// driver failures are returned, naming the call.
pub fn cuda_devices() -> Result<Vec<DeviceInfo>, CudaError> {
    match driver() {
        Ok(()) => {}
        Err(CudaError::NoDriver) => return Ok(Vec::new()),
        Err(e) if means_no_device(&e) => return Ok(Vec::new()),
        Err(e) => return Err(e),
    }
    guard("cuDeviceGetCount", || {
        (0..device_count()?).map(device_info).collect()
    })
}

/// Launch geometry and code generation options of a CUDA device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct GpuConfig {
    /// Threads per block; `None` picks the driver's occupancy suggestion
    /// (`cuOccupancyMaxPotentialBlockSize`, 256 if unavailable). Clamped to 1 … the kernel's
    /// limit (usually 1024).
    pub block: Option<u32>,
    /// Blocks in the grid; `None` picks `min(⌈n / block⌉, SMs × resident blocks per SM)`
    /// (at least 1), each thread then looping over several elements. Clamped to 1 … 2³¹−1.
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
            // SAFETY: loaded by `Inner::load_module` and unloaded only here.
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
}

/// The built-in sum kernel and its scratch space (see [`CudaDevice::sum_f32`]).
struct SumKernel {
    module: LoadedModule,
    grid: u32,
    partial: DeviceBuffer,
    out: DeviceBuffer,
}

/// One device allocation (an array's planes, or an output's).
struct DeviceBuffer {
    slice: CudaSlice<u8>,
    ptr: u64,
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
    /// Uploaded inputs keyed by the address of their `Arc<HostArray>`; the strong clone keeps
    /// the address from being reused (and the array from being changed) while cached.
    resident: Mutex<HashMap<usize, Resident>>,
    uploads: AtomicU64,
    upload_bytes: AtomicU64,
    downloads: AtomicU64,
    download_bytes: AtomicU64,
    /// The built-in sum kernel (`cuda_sum.ptx`), loaded on first use, with its grid size and
    /// scratch buffers for the block partials and the result (kept between calls: allocating
    /// them cost as much as a launch).
    sum_kernel: Mutex<Option<SumKernel>>,
}

impl Inner {
    fn bind(&self) -> Result<(), CudaError> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| drv("cuCtxSetCurrent", e))
    }

    fn sync(&self) -> Result<(), CudaError> {
        self.stream
            .synchronize()
            .map_err(|e| drv("cuStreamSynchronize", e))
    }

    fn alloc(&self, bytes: usize) -> Result<DeviceBuffer, CudaError> {
        // SAFETY: every caller writes or zeroes all bytes before a kernel reads them.
        let slice = unsafe { self.stream.alloc::<u8>(bytes) }.map_err(|e| drv("cuMemAlloc", e))?;
        let ptr = slice.device_ptr(&self.stream).0;
        Ok(DeviceBuffer { slice, ptr })
    }

    fn alloc_zeroed(&self, bytes: usize) -> Result<DeviceBuffer, CudaError> {
        let mut b = self.alloc(bytes)?;
        self.stream
            .memset_zeros(&mut b.slice)
            .map_err(|e| drv("cuMemsetD8Async", e))?;
        Ok(b)
    }

    fn upload(&self, host: &[u8]) -> Result<DeviceBuffer, CudaError> {
        let mut b = self.alloc(host.len())?;
        self.stream
            .memcpy_htod(host, &mut b.slice)
            .map_err(|e| drv("cuMemcpyHtoDAsync", e))?;
        self.uploads.fetch_add(1, Ordering::Relaxed);
        self.upload_bytes
            .fetch_add(host.len() as u64, Ordering::Relaxed);
        Ok(b)
    }

    fn download(&self, b: &DeviceBuffer) -> Result<Vec<u8>, CudaError> {
        let v = self
            .stream
            .clone_dtoh(&b.slice)
            .map_err(|e| drv("cuMemcpyDtoHAsync", e))?;
        self.sync()?;
        self.downloads.fetch_add(1, Ordering::Relaxed);
        self.download_bytes
            .fetch_add(v.len() as u64, Ordering::Relaxed);
        Ok(v)
    }

    /// Copies bytes `range` of `b` into `dst` (waits for queued work).
    fn download_into(
        &self,
        b: &DeviceBuffer,
        range: std::ops::Range<usize>,
        dst: &mut [u8],
    ) -> Result<(), CudaError> {
        let n = dst.len();
        self.stream
            .memcpy_dtoh(&b.slice.slice(range), dst)
            .map_err(|e| drv("cuMemcpyDtoHAsync", e))?;
        self.sync()?;
        self.downloads.fetch_add(1, Ordering::Relaxed);
        self.download_bytes.fetch_add(n as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Drops cached inputs whose array the host no longer holds (only the cache's clone is
    /// left, so no later launch can name them).
    fn evict_dropped(&self) {
        lock(&self.resident).retain(|_, (a, _)| Arc::strong_count(a) > 1);
    }

    /// The device copy of `a` (all tuple lanes, plane after plane, at least one element
    /// each), uploaded on first use.
    fn resident(&self, a: &Arc<HostArray>) -> Result<Arc<DeviceBuffer>, CudaError> {
        let key = Arc::as_ptr(a) as usize;
        let mut map = lock(&self.resident);
        if let Some((_, b)) = map.get(&key) {
            return Ok(b.clone());
        }
        let (s, nl) = scalar_lanes(a.elem);
        let pb = plane_bytes(s, a.len());
        let mut host = vec![0u8; pb * nl];
        for (l, plane) in host.chunks_exact_mut(pb).enumerate() {
            fill_plane(plane, a, l);
        }
        let b = Arc::new(self.upload(&host)?);
        map.insert(key, (a.clone(), b.clone()));
        Ok(b)
    }

    /// Loads PTX (NUL-free text) and finds its entry; JIT errors come with the JIT's log.
    fn load_module(&self, ptx: &str, entry: &str) -> Result<LoadedModule, CudaError> {
        self.load_module_at(ptx, entry, 4)
    }

    /// [`Inner::load_module`] with the driver's PTX optimisation level (`CU_JIT_OPTIMIZATION_LEVEL`,
    /// 0 … 4; 4 is the driver's default): kernels LLVM compiled below full effort (very large
    /// programs, docs/abi.md) get 0, since `ptxas` is super-linear on them too.
    fn load_module_at(
        &self,
        ptx: &str,
        entry: &str,
        level: u32,
    ) -> Result<LoadedModule, CudaError> {
        let bad = |what: &str| CudaError::Driver {
            call: "cuModuleLoadDataEx",
            code: "CUDA_ERROR_INVALID_VALUE".into(),
            description: format!("the {what} contains a NUL byte"),
            log: None,
        };
        let image = CString::new(ptx).map_err(|_| bad("PTX text"))?;
        let entry_c = CString::new(entry).map_err(|_| bad("entry name"))?;
        self.bind()?;
        let mut log = vec![0u8; 1 << 14];
        let mut opts = [
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
            sys::CUjit_option::CU_JIT_OPTIMIZATION_LEVEL,
        ];
        let mut vals: [*mut c_void; 3] = [
            log.as_mut_ptr().cast(),
            log.len() as *mut c_void,
            level.min(4) as usize as *mut c_void,
        ];
        let mut module: sys::CUmodule = std::ptr::null_mut();
        // SAFETY: a NUL-terminated PTX image; three options whose values are a writable buffer,
        // its size and the optimisation level (the last two passed by value, as the driver API
        // specifies); `log` outlives the call.
        let r = unsafe {
            sys::cuModuleLoadDataEx(
                &mut module,
                image.as_ptr().cast(),
                opts.len() as c_uint,
                opts.as_mut_ptr(),
                vals.as_mut_ptr(),
            )
        };
        if let Err(e) = r.result() {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let mut err = drv("cuModuleLoadDataEx", e);
            if let CudaError::Driver { log: l, .. } = &mut err {
                *l = Some(String::from_utf8_lossy(&log[..end]).into_owned());
            }
            return Err(err);
        }
        let loaded = |func| LoadedModule {
            ctx: self.ctx.clone(),
            module,
            func,
        };
        // SAFETY: `module` was just loaded.
        match unsafe { result::module::get_function(module, entry_c) } {
            Ok(func) => Ok(loaded(func)),
            Err(e) => {
                drop(loaded(std::ptr::null_mut()));
                Err(drv("cuModuleGetFunction", e))
            }
        }
    }

    /// Resident blocks of `block` threads per multiprocessor for `f` (at least 1).
    fn blocks_per_sm(&self, f: sys::CUfunction, block: u32) -> u32 {
        // SAFETY: `f` is a loaded kernel; no dynamic shared memory.
        unsafe { result::occupancy::max_active_block_per_multiprocessor(f, block as c_int, 0) }
            .map_or(1, |b| b.max(1) as u32)
    }

    /// Block and grid for a launch of `n` elements.
    fn geometry(&self, k: &CudaKernel, cfg: &GpuConfig, n: usize) -> Result<(u32, u32), CudaError> {
        let block = cfg.block.map_or(k.auto_block, |b| b.clamp(1, k.max_block));
        let grid = match cfg.grid {
            Some(g) => g.clamp(1, MAX_GRID),
            None => {
                let per_sm = if block == k.auto_block {
                    k.blocks_per_sm
                } else {
                    self.bind()?;
                    self.blocks_per_sm(k.module.func, block)
                };
                let full = (self.info.multiprocessors.max(1) as u64) * per_sm as u64;
                (n as u64)
                    .div_ceil(block as u64)
                    .min(full)
                    .clamp(1, MAX_GRID as u64) as u32
            }
        };
        Ok((block, grid))
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
            let (major, minor) = info.compute_capability;
            Ok(CudaDevice {
                inner: Arc::new(Inner {
                    sm: (major * 10 + minor).min(MAX_SM),
                    ctx,
                    stream,
                    info,
                    kernels: Mutex::default(),
                    resident: Mutex::default(),
                    uploads: AtomicU64::new(0),
                    upload_bytes: AtomicU64::new(0),
                    downloads: AtomicU64::new(0),
                    download_bytes: AtomicU64::new(0),
                    sum_kernel: Mutex::default(),
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
        let ptx = weft_backend_llvm::compile_ptx(
            m,
            name,
            i.sm,
            weft_backend_llvm::Options {
                fast_math,
                ..Default::default()
            },
        )?;
        let t0 = Instant::now();
        let level = match ptx.effort {
            weft_backend_llvm::Effort::Auto | weft_backend_llvm::Effort::Full => 4,
            weft_backend_llvm::Effort::Reduced | weft_backend_llvm::Effort::Minimal => 0,
        };
        let module = guard("cuModuleLoadDataEx", || {
            i.load_module_at(&ptx.ptx, &ptx.entry, level)
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
        });
        Ok(lock(&i.kernels).get_or_insert(key, k))
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
        if grid.group_size() > kernel.max_block as usize {
            return Err(RunError::Launch {
                program: name.to_string(),
                message: format!(
                    "a block of {} threads exceeds the compiled kernel's limit of {}",
                    grid.group_size(),
                    kernel.max_block
                ),
            }
            .into());
        }
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
        // Uniform work runs once here, in a prologue (DESIGN §4 uniform lifting).
        plan_program_launch(m, name, inputs, shape)?;
        let lifted = weft_ir::passes::lift::prepare_launch(m, name, inputs)?;
        let (m, inputs) = match &lifted {
            Some((km, ins)) => (km, ins.as_slice()),
            None => (m, inputs),
        };
        let (p, launch, n) = plan_program_launch(m, name, inputs, shape)?;
        let cfg = self.config();
        let kernel = self.kernel_with(m, name, cfg.fast_math)?;
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
                    if n > 0 {
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
        ctx.launch(&launch);
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
            shape: launch,
            n,
            block,
            grid,
            ran: false,
            host: None,
        })
    }

    /// The sum of elements `offset .. offset + n` of a buffer of f32 scalars, by the runtime's
    /// built-in reduction kernel (`runtime/src/cuda_sum.ptx`, DESIGN §5 collectives): each
    /// thread adds a grid-stride slice with four accumulators, warps combine by shuffles,
    /// blocks write partials, and a second launch of one block adds those. The order of the
    /// additions is fixed by the launch geometry, not the reduction tree of
    /// `weft::collective` (so a float sum may differ from other devices in the last bits).
    ///
    /// # Errors
    /// Another element type, a range outside the buffer, a buffer of another device, or a
    /// driver call failing.
    pub fn sum_f32(&self, buf: &CudaBuffer, offset: usize, n: usize) -> Result<f32, RuntimeError> {
        let bad = |description: String| -> RuntimeError {
            CudaError::Driver {
                call: "cuLaunchKernel",
                code: "CUDA_ERROR_INVALID_VALUE".into(),
                description,
                log: None,
            }
            .into()
        };
        if buf.elem != Type::f32() {
            return Err(bad(format!("sum_f32 of a buffer of {}", buf.elem)));
        }
        if offset.checked_add(n).is_none_or(|e| e > buf.len) || !Arc::ptr_eq(&buf.dev, &self.inner)
        {
            return Err(bad(
                "sum_f32: range outside the buffer, or another device".into()
            ));
        }
        if n == 0 {
            return Ok(0.0);
        }
        let i = &self.inner;
        let v = guard("cuLaunchKernel", || {
            i.bind()?;
            const BLOCK: u32 = 256;
            let mut k = lock(&i.sum_kernel);
            if k.is_none() {
                let module = i.load_module(include_str!("cuda_sum.ptx"), "weft_sum_f32")?;
                let per_sm = i.blocks_per_sm(module.func, BLOCK);
                let grid = i.info.multiprocessors.max(1) * per_sm;
                *k = Some(SumKernel {
                    module,
                    grid,
                    partial: i.alloc(grid as usize * 4)?,
                    out: i.alloc(4)?,
                });
            }
            let sk = k.as_ref().expect("set above");
            let grid = (n as u64).div_ceil(BLOCK as u64).min(sk.grid as u64).max(1) as u32;
            let (partial, out) = (&sk.partial, &sk.out);
            let launch = |grid: u32, block: u32, input: u64, len: u64, output: u64| {
                let mut words = [input, len, output];
                let mut params: Vec<*mut c_void> =
                    words.iter_mut().map(|w| (w as *mut u64).cast()).collect();
                // SAFETY: the kernel takes three u64 parameters (input pointer, element count,
                // output pointer); the input holds `len` f32s and the output `grid` f32s.
                unsafe {
                    result::launch_kernel(
                        sk.module.func,
                        (grid, 1, 1),
                        (block, 1, 1),
                        0,
                        i.stream.cu_stream(),
                        &mut params,
                    )
                }
                .map_err(|e| drv("cuLaunchKernel", e))
            };
            let input = buf.buf.ptr + (offset * 4) as u64;
            launch(grid, BLOCK, input, n as u64, partial.ptr)?;
            launch(1, 1024, partial.ptr, grid as u64, out.ptr)?;
            let bytes = i.download(out)?;
            Ok(f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
        })?;
        Ok(v)
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
        for a in args {
            if let CudaArg::Array { buf, .. } = a {
                if !Arc::ptr_eq(&buf.dev, &self.inner) {
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
        let (lifted, all) = crate::plan::plan_buffers(
            m,
            name,
            args,
            shape,
            CudaArg::desc,
            CudaArg::Uniform,
            |a| match a {
                CudaArg::Array { buf, offset, .. } => Some((*offset, buf.len)),
                CudaArg::Uniform(_) => None,
            },
        )?;
        let m = lifted.as_ref().unwrap_or(m);
        let descs: Vec<ArgDesc> = all.iter().map(CudaArg::desc).collect();
        let (p, launch, n) = plan_program_launch_desc(m, name, &descs, shape)?;
        let cfg = self.config();
        let kernel = self.kernel_with(m, name, cfg.fast_math)?;
        let i = &self.inner;
        let layout = &kernel.layout;
        let mut ctx = Context::new(layout);
        let mut keep = Vec::new();
        for (k, (par, arg)) in p.params.iter().zip(&all).enumerate() {
            match arg {
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
        let mut outs = Vec::new();
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
        ctx.launch(&launch);
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
                shape: launch,
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

/// A prepared CUDA launch: kernel, resident inputs, device outputs and geometry (see
/// [`CudaDevice::launch`]). Outputs stay on the device until [`CudaLaunch::outputs`].
pub struct CudaLaunch {
    dev: Arc<Inner>,
    kernel: Arc<CudaKernel>,
    words: Vec<u64>,
    _inputs: Vec<Arc<DeviceBuffer>>,
    outs: Vec<(Type, Option<DeviceBuffer>)>,
    shape: Vec<usize>,
    n: usize,
    block: u32,
    grid: u32,
    ran: bool,
    host: Option<Vec<HostArray>>,
}

impl CudaLaunch {
    /// Number of elements in the launch.
    pub fn len(&self) -> usize {
        self.n
    }

    /// True for a launch of no elements (which never launches a kernel).
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Threads per block.
    pub fn block(&self) -> u32 {
        self.block
    }

    /// Blocks in the grid.
    pub fn grid(&self) -> u32 {
        self.grid
    }

    /// The kernel launched.
    pub fn kernel(&self) -> &Arc<CudaKernel> {
        &self.kernel
    }

    /// Queues one kernel launch over every element (no synchronisation).
    fn enqueue(&self) -> Result<(), CudaError> {
        let d = &self.dev;
        d.bind()?;
        let mut words = self.words.clone();
        let mut begin: i64 = 0;
        let mut end: i64 = self.n as i64;
        let mut params: Vec<*mut c_void> = words
            .iter_mut()
            .map(|w| (w as *mut u64).cast::<c_void>())
            .collect();
        params.push((&mut begin as *mut i64).cast());
        params.push((&mut end as *mut i64).cast());
        // SAFETY: the kernel takes `layout.words` u64 values then two i64 (the PTX ABI); the
        // parameter values are copied by the call; every plane pointer addresses a live
        // buffer (held by `self`) of at least `n` elements (arrays: their length, at least 1).
        unsafe {
            result::launch_kernel(
                self.kernel.module.func,
                (self.grid, 1, 1),
                (self.block, 1, 1),
                0,
                d.stream.cu_stream(),
                &mut params,
            )
        }
        .map_err(|e| drv("cuLaunchKernel", e))
    }

    /// Runs the kernel over every element and waits for it (nothing for an empty launch).
    /// Outputs read before are read again afterwards.
    ///
    /// # Errors
    /// [`RuntimeError::Cuda`]: `cuLaunchKernel`, or `cuStreamSynchronize` for faults during
    /// the kernel (after which the context is unusable, as CUDA errors are sticky).
    pub fn run(&mut self) -> Result<(), RuntimeError> {
        self.host = None;
        if self.n > 0 {
            guard("cuLaunchKernel", || {
                self.enqueue()?;
                self.dev.sync()
            })?;
        }
        self.ran = true;
        Ok(())
    }

    /// Launches the kernel `reps` times back to back and returns the total GPU time between
    /// CUDA events recorded before the first and after the last launch (zero for an empty
    /// launch or no reps).
    ///
    /// # Errors
    /// As [`CudaLaunch::run`], or the event calls failing.
    pub fn time_runs(&mut self, reps: u32) -> Result<Duration, RuntimeError> {
        if self.n == 0 || reps == 0 {
            self.ran |= reps > 0;
            return Ok(Duration::ZERO);
        }
        self.host = None;
        let d = self.dev.clone();
        let ms = guard("cuEventRecord", || {
            let timing = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
            let start = d
                .ctx
                .new_event(timing)
                .map_err(|e| drv("cuEventCreate", e))?;
            let stop = d
                .ctx
                .new_event(timing)
                .map_err(|e| drv("cuEventCreate", e))?;
            start
                .record(&d.stream)
                .map_err(|e| drv("cuEventRecord", e))?;
            for _ in 0..reps {
                self.enqueue()?;
            }
            stop.record(&d.stream)
                .map_err(|e| drv("cuEventRecord", e))?;
            start
                .elapsed_ms(&stop)
                .map_err(|e| drv("cuEventElapsedTime", e))
        })?;
        self.ran = true;
        Ok(Duration::from_secs_f64(f64::from(ms.max(0.0)) / 1e3))
    }

    /// The outputs as host arrays of the launch shape, running the launch first if it has
    /// not run. The first call after a run downloads them; later calls return the host copy
    /// without transferring again.
    ///
    /// # Errors
    /// As [`CudaLaunch::run`], or `cuMemcpyDtoHAsync` failing.
    pub fn outputs(&mut self) -> Result<Vec<HostArray>, RuntimeError> {
        if let Some(h) = &self.host {
            return Ok(h.clone());
        }
        if !self.ran {
            self.run()?;
        }
        let (d, n, shape) = (&self.dev, self.n, &self.shape);
        let host = guard("cuMemcpyDtoHAsync", || {
            self.outs
                .iter()
                .map(|(ty, buf)| match buf {
                    None => Ok(HostArray {
                        elem: *ty,
                        shape: shape.clone(),
                        data: Vec::new(),
                    }),
                    Some(b) => {
                        let bytes = d.download(b)?;
                        let (s, _) = scalar_lanes(*ty);
                        let planes: Vec<&[u8]> = bytes.chunks_exact(plane_bytes(s, n)).collect();
                        Ok(read_output(*ty, shape, n, &planes))
                    }
                })
                .collect::<Result<Vec<_>, CudaError>>()
        })?;
        self.host = Some(host.clone());
        Ok(host)
    }
}

/// A prepared kernel launch (see [`CudaDevice::prepare_kernel`]): the kernel, its context
/// words and its uploaded arrays.
pub struct CudaKernelLaunch {
    dev: Arc<Inner>,
    kernel: Arc<CudaKernel>,
    words: Vec<u64>,
    bufs: Vec<Option<DeviceBuffer>>,
    grid: weft_ir::KernelGrid,
}

impl CudaKernelLaunch {
    /// Queues one launch (no synchronisation).
    fn enqueue(&self) -> Result<(), CudaError> {
        let d = &self.dev;
        d.bind()?;
        let mut words = self.words.clone();
        let mut begin: i64 = 0;
        let mut end: i64 = 0;
        let mut params: Vec<*mut c_void> = words
            .iter_mut()
            .map(|w| (w as *mut u64).cast::<c_void>())
            .collect();
        params.push((&mut begin as *mut i64).cast());
        params.push((&mut end as *mut i64).cast());
        let [gx, gy, gz] = self.grid.groups;
        let [bx, by, bz] = self.grid.block;
        // SAFETY: the kernel takes `layout.words` u64 values then two i64 (the PTX ABI); every
        // plane pointer addresses a live buffer (held in `self.bufs`) of its array's elements;
        // stores and atomics are bounds-checked in the kernel.
        unsafe {
            result::launch_kernel(
                self.kernel.module.func,
                (gx, gy, gz),
                (bx, by, bz),
                0,
                d.stream.cu_stream(),
                &mut params,
            )
        }
        .map_err(|e| drv("cuLaunchKernel", e))
    }

    /// Launches the kernel once and waits for it.
    ///
    /// # Errors
    /// `cuLaunchKernel`, or `cuStreamSynchronize` for faults during the kernel.
    pub fn run(&mut self) -> Result<(), RuntimeError> {
        guard("cuLaunchKernel", || {
            self.enqueue()?;
            self.dev.sync()
        })?;
        Ok(())
    }

    /// Launches the kernel `reps` times back to back; the GPU time between CUDA events
    /// recorded around them.
    ///
    /// # Errors
    /// As [`CudaKernelLaunch::run`], or the event calls failing.
    pub fn time_runs(&mut self, reps: u32) -> Result<Duration, RuntimeError> {
        let d = self.dev.clone();
        let ms = guard("cuEventRecord", || {
            let timing = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
            let start = d
                .ctx
                .new_event(timing)
                .map_err(|e| drv("cuEventCreate", e))?;
            let stop = d
                .ctx
                .new_event(timing)
                .map_err(|e| drv("cuEventCreate", e))?;
            start
                .record(&d.stream)
                .map_err(|e| drv("cuEventRecord", e))?;
            for _ in 0..reps {
                self.enqueue()?;
            }
            stop.record(&d.stream)
                .map_err(|e| drv("cuEventRecord", e))?;
            start
                .elapsed_ms(&stop)
                .map_err(|e| drv("cuEventElapsedTime", e))
        })?;
        Ok(Duration::from_secs_f64(f64::from(ms.max(0.0)) / 1e3))
    }

    /// The kernel launched.
    pub fn kernel(&self) -> &Arc<CudaKernel> {
        &self.kernel
    }
}

/// `len` elements in device memory, in the plane layout of [`HostBuffer`] (same stride), on
/// one [`CudaDevice`]. Cheap to clone (the allocation is shared); freed when the last clone
/// and every launch using it are gone.
#[derive(Clone)]
pub struct CudaBuffer {
    dev: Arc<Inner>,
    buf: Arc<DeviceBuffer>,
    elem: Type,
    len: usize,
    stride: usize,
}

impl fmt::Debug for CudaBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "CudaBuffer({} x {} on {})",
            self.len, self.elem, self.dev.info.name
        )
    }
}

impl CudaBuffer {
    /// Element type.
    pub fn elem(&self) -> Type {
        self.elem
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the buffer holds no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Tuple lanes per element (planes).
    pub fn lanes(&self) -> usize {
        scalar_lanes(self.elem).1
    }

    /// Bytes of one lane in storage (4 or 8).
    pub fn lane_bytes(&self) -> usize {
        weft_ir::abi::storage_bytes(scalar_lanes(self.elem).0)
    }

    /// The ordinal of the device holding it.
    pub fn ordinal(&self) -> usize {
        self.dev.info.ordinal
    }

    /// Copies elements `start .. start + n` to a new host buffer of `n` elements (one
    /// transfer per plane; waits for queued work first).
    ///
    /// # Errors
    /// The range outside the buffer; `cuMemcpyDtoHAsync` or `cuStreamSynchronize` failing.
    pub fn download_range(&self, start: usize, n: usize) -> Result<HostBuffer, RuntimeError> {
        if start.checked_add(n).is_none_or(|e| e > self.len) {
            return Err(CudaError::Driver {
                call: "cuMemcpyDtoHAsync",
                code: "CUDA_ERROR_INVALID_VALUE".into(),
                description: format!(
                    "elements {start}..{} outside a buffer of {}",
                    start.saturating_add(n),
                    self.len
                ),
                log: None,
            }
            .into());
        }
        let d = &self.dev;
        let b = self.lane_bytes();
        let mut h = HostBuffer::for_output(self.elem, n);
        guard("cuMemcpyDtoHAsync", || {
            d.bind()?;
            for l in 0..self.lanes() {
                let from = (l * self.stride + start) * b;
                d.download_into(&self.buf, from..from + n * b, &mut h.plane_mut(l)[..n * b])?;
            }
            Ok(())
        })?;
        Ok(h)
    }

    /// Copies the buffer to the host (waits for queued work first).
    ///
    /// # Errors
    /// `cuMemcpyDtoHAsync` or `cuStreamSynchronize` failing.
    pub fn download(&self) -> Result<HostBuffer, RuntimeError> {
        let d = &self.dev;
        let bytes = guard("cuMemcpyDtoHAsync", || {
            d.bind()?;
            d.download(&self.buf)
        })?;
        let mut h = HostBuffer::for_output(self.elem, self.len);
        h.bytes_mut().copy_from_slice(&bytes);
        h.zero_padding();
        Ok(h)
    }
}

/// An argument of a launch over device buffers ([`CudaDevice::launch_buffers`]).
#[derive(Clone, Debug)]
pub enum CudaArg<'a> {
    /// An array, for a varying or an array parameter: elements `offset ..` of `buf`, as many
    /// as `shape` holds, row-major.
    Array {
        /// The storage.
        buf: &'a CudaBuffer,
        /// First element.
        offset: usize,
        /// Extent of each axis, outermost first.
        shape: &'a [usize],
    },
    /// One value, for a uniform parameter.
    Uniform(Const),
}

impl CudaArg<'_> {
    fn desc(&self) -> ArgDesc<'_> {
        match self {
            CudaArg::Array { buf, shape, .. } => ArgDesc::Array {
                elem: buf.elem,
                shape,
            },
            CudaArg::Uniform(c) => ArgDesc::Uniform(*c),
        }
    }
}

/// A prepared launch over device buffers: run it (or queue it) as often as wanted, then take
/// the output buffers.
pub struct CudaBufferLaunch {
    launch: CudaLaunch,
    outs: Vec<CudaBuffer>,
}

impl CudaBufferLaunch {
    /// The underlying launch (geometry, kernel, timing with [`CudaLaunch::time_runs`]).
    pub fn launch(&mut self) -> &mut CudaLaunch {
        &mut self.launch
    }

    /// Runs the kernel and waits for it.
    ///
    /// # Errors
    /// As [`CudaLaunch::run`].
    pub fn run(&mut self) -> Result<(), RuntimeError> {
        self.launch.run()
    }

    /// Queues the kernel on the device's stream without waiting (a later download or run
    /// waits for it).
    ///
    /// # Errors
    /// `cuLaunchKernel` failing.
    pub fn enqueue(&mut self) -> Result<(), RuntimeError> {
        if self.launch.n > 0 {
            guard("cuLaunchKernel", || self.launch.enqueue())?;
        }
        self.launch.ran = true;
        Ok(())
    }

    /// The output buffers.
    pub fn into_outputs(self) -> Vec<CudaBuffer> {
        self.outs
    }
}
