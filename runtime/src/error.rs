//! Why a launch failed, on any device: [`RuntimeError`], and why a CUDA operation failed:
//! [`CudaError`].

use crate::watchdog::budget_text;
use std::time::Duration;
use weft_backend_cranelift::CompileError;
use weft_ir::interp::RunError;

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
    /// The CUDA driver failed or is missing (see [`CudaError`]).
    #[error(transparent)]
    Cuda(#[from] CudaError),
    /// A launch ran past its time budget ([`crate::CpuDevice::set_timeout`]); it was stopped and
    /// gave no results (outputs and buffers are not updated).
    #[error("launch of @{program} exceeded its time budget of {}", budget_text(*.budget))]
    Timeout {
        /// The program.
        program: String,
        /// The budget it had.
        budget: Duration,
    },
    /// The launch watchdog could not be started.
    #[error("launch of @{program}: {message}")]
    Watchdog {
        /// The program.
        program: String,
        /// Why.
        message: String,
    },
}

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
    /// NCCL (libnccl), which moves a device group's parts between GPUs, is not installed or
    /// could not be loaded.
    #[error("no NCCL library found (libnccl.so could not be loaded: install NCCL, or link libnccl.so to libnccl.so.2 in a directory on LD_LIBRARY_PATH)")]
    NoNccl,
    /// An NCCL call failed.
    #[error("{call}: {message}")]
    Nccl {
        /// The NCCL function, e.g. `ncclGroupEnd`.
        call: &'static str,
        /// NCCL's error.
        message: String,
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
