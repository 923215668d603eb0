//! weft-runtime: devices, buffers and launches. The CPU device compiles programs with the
//! Cranelift or LLVM backend (cached per program text) and runs them over the rayon pool; the
//! CUDA device compiles them to PTX with LLVM and runs them on an NVIDIA GPU through the
//! driver API (loaded at run time, so builds and runs without CUDA installed).
#![warn(missing_docs)]

pub mod backend;
pub mod buffer;
pub mod cache;
mod context;
pub mod cpu;
pub mod cuda;
pub mod disk;
pub mod error;
pub mod group;
pub mod hostscan;
pub mod hostsort;
mod plan;
mod planes;
mod pool;
pub mod prepare;
pub mod stats;
mod vsort;
pub mod watchdog;

pub use backend::{Backend, Device, DeviceOptions, UnknownBackend};
pub use buffer::HostBuffer;
pub use cpu::{
    BoundLaunch, BufArg, BufferLaunch, CpuDevice, CpuProgram, HostCode, HostCompiler, KernelBuf,
    RuntimeError,
};
pub use cuda::{
    cuda_devices, cuda_driver_status, cuda_driver_version, nccl_status, CudaArg, CudaBoundLaunch,
    CudaBuffer, CudaBufferLaunch, CudaDevice, CudaError, CudaGraphExec, CudaKernel, CudaKernelArg,
    CudaKernelLaunch, CudaLaunch, CudaProgram, DeviceInfo, GpuConfig, Transfers,
};
pub use disk::DiskCache;
pub use group::DeviceGroup;
pub use prepare::{Plan, Prepared};

/// Runs `f(i)` for every `i` in `0..n` exactly once on the CPU device's launch pool (the
/// calling thread and the pool's spinning workers; the calling thread alone while another
/// launch uses the pool) and returns when all have finished: host work between launches
/// (such as `weft run --iterate`'s stopping test) without a second thread pool's wake-up.
pub fn parallel_for(n: usize, f: &(dyn Fn(usize) + Sync)) {
    pool::run(n, f)
}

/// [`parallel_for`] for host work whose partial results must not be used: `false` when a
/// piece panicked (the panic hook reports it on stderr; the other pieces still run), so
/// the caller can discard what was written and take another path.
pub(crate) fn parallel_for_checked(n: usize, f: &(dyn Fn(usize) + Sync)) -> bool {
    let failed = std::sync::atomic::AtomicBool::new(false);
    parallel_for(n, &|i| {
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(i))).is_err() {
            failed.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    });
    !failed.into_inner()
}

/// Backends this build can run programs on ([`Backend::NAMES`]). `cuda` is always compiled
/// in; whether a GPU and driver are present is a run-time matter ([`cuda_driver_status`],
/// [`cuda_devices`]).
pub fn available_backends() -> &'static [&'static str] {
    &Backend::NAMES
}
