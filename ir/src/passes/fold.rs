//! Constant folding with DESIGN §3 semantics (stub: being written).

use crate::interp::HostArray;
use crate::program::{Module, Program, Value};
use std::collections::HashMap;

/// Facts the folder may use beyond the program text: array inputs bound to known contents
/// (tight binding of an array, DESIGN §4): `extent` of them and `read`s at constant
/// coordinates fold to constants.
#[derive(Default)]
pub struct Known<'a> {
    /// Array-typed values (parameters) with known contents.
    pub arrays: HashMap<Value, &'a HostArray>,
}

/// Folds every program of `m`.
pub fn fold_module(m: &mut Module) {
    for p in &mut m.programs {
        fold_program(p, &Known::default());
    }
}

/// Folds constants in `p`, using `known` facts.
pub fn fold_program(p: &mut Program, known: &Known) {
    let _ = (p, known);
}
