//! weft-runtime: devices, buffers and residency, launches, kernel cache, collectives.
//! Today the only device is the reference interpreter in `weft-ir`; the CPU (Cranelift, LLVM)
//! and CUDA devices arrive with their issues.

/// Backends this build can run programs on.
pub fn available_backends() -> &'static [&'static str] {
    &["interp"]
}
