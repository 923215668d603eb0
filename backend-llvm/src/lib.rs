//! weft-backend-llvm: lowers verified weft IR to LLVM IR for host code (ORC) and PTX (NVPTX).
//! Not yet implemented (the LLVM/CUDA issue); the crate exists so the workspace layout of
//! DESIGN §1 holds from the start.

/// The backend's name as used by `weft run --backend`.
pub const NAME: &str = "llvm";
