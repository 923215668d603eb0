//! weft-backend-cranelift: lowers verified weft IR to Cranelift IR for 128-bit SIMD host code.
//! Not yet implemented (the Cranelift issue); the crate exists so the workspace layout of
//! DESIGN §1 holds from the start.

/// The backend's name as used by `weft run --backend`.
pub const NAME: &str = "cranelift";
