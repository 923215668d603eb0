//! Why a launch failed, on any device: [`RuntimeError`].

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
    /// The CUDA driver failed or is missing (see [`crate::cuda::CudaError`]).
    #[error(transparent)]
    Cuda(#[from] crate::cuda::CudaError),
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
