//! Loop-invariant code motion (stub: being written).
use crate::program::Module;
/// Runs LICM on every program of `m`.
pub fn licm_module(m: &mut Module) { let _ = m; }
