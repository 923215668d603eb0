//! Dead code elimination (stub: being written).
use crate::program::{Module, Program};
/// Runs DCE on every program of `m`.
pub fn dce_module(m: &mut Module) { for p in &mut m.programs { dce_program(p); } }
/// Removes ops of `p` whose results are unused.
pub fn dce_program(p: &mut Program) { let _ = p; }
/// Removes unused inputs of the programs of `m` that no program calls.
pub fn drop_unused_inputs(m: &mut Module) { let _ = m; }
/// Removes unused inputs of `p` (callers must be updated by the caller); returns the kept
/// parameter positions of the original.
pub fn drop_unused_params(p: &mut Program) -> Vec<usize> { (0..p.params.len()).collect() }
