//! The CUDA driver: loading libcuda, errors that name the failing call, device enumeration.

use super::*;

pub use crate::error::CudaError;

/// A driver error from `call`.
pub(super) fn drv(call: &'static str, e: DriverError) -> CudaError {
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
pub(super) fn guard<T>(
    call: &'static str,
    f: impl FnOnce() -> Result<T, CudaError>,
) -> Result<T, CudaError> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| {
        let message = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(no message)".to_string());
        Err(CudaError::Panic { call, message })
    })
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Loads libcuda and runs `cuInit` once per process; the outcome is remembered.
pub(super) fn driver() -> Result<(), CudaError> {
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
pub(super) fn means_no_device(e: &CudaError) -> bool {
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

pub(super) fn device_count() -> Result<usize, CudaError> {
    Ok(result::device::get_count().map_err(|e| drv("cuDeviceGetCount", e))? as usize)
}

pub(super) fn device_info(ordinal: usize) -> Result<DeviceInfo, CudaError> {
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
