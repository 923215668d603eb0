//! Uniform lifting (stub: being written).
use crate::program::Module;
/// Lifts uniform work of every program of `m` into prologues.
pub fn lift_module(m: &mut Module) { let _ = m; }
