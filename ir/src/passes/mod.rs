//! IR-to-IR passes. [`math`]: the math expansion (DESIGN §3), which replaces the math
//! functions by basic ops so that every backend computes the interpreter's bits.

pub mod math;

pub use math::{expand_math, expand_program};
