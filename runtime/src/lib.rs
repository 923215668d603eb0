//! weft-runtime: devices, buffers and launches. The CPU device compiles programs with the
//! Cranelift or LLVM backend (cached per program text) and runs them over the rayon pool.

pub mod cpu;

pub use cpu::{CpuDevice, HostCode, HostCompiler, RuntimeError};

/// Backends this build can run programs on.
pub fn available_backends() -> &'static [&'static str] {
    &["interp", "cranelift", "llvm"]
}
