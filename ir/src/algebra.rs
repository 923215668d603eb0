//! The program algebra (DESIGN §4; RapidMind's "partial evaluation and the program algebra",
//! Sh's Shader Algebra): tight and loose binding, unbinding, composition, bundling,
//! specialization and interface adapters, each returning an ordinary program.
//! (Skeleton: being written.)

use crate::interp::HostArray;
use crate::konst::Const;
use crate::program::Program;
use crate::types::Type;
use std::fmt;

/// Misuse of an algebra operation: names the operation, the programs involved and the
/// position (input or output, from 0) where it went wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlgebraError {
    /// The operation (`"compose"`, `"bind"`, ...).
    pub operation: &'static str,
    /// The programs involved, without `@`, in argument order.
    pub programs: Vec<String>,
    /// The input or output position concerned, from 0, when there is one.
    pub position: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for AlgebraError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ps: Vec<String> = self.programs.iter().map(|p| format!("@{p}")).collect();
        write!(f, "{}({}): {}", self.operation, ps.join(", "), self.message)
    }
}

impl std::error::Error for AlgebraError {}

fn todo(op: &'static str, ps: &[&Program]) -> AlgebraError {
    AlgebraError {
        operation: op,
        programs: ps.iter().map(|p| p.name.clone()).collect(),
        position: None,
        message: "not implemented yet".into(),
    }
}

/// Tight binding of a scalar or tuple input to `value`.
pub fn bind(p: &Program, input: &str, value: &Const) -> Result<Program, AlgebraError> {
    let _ = (input, value);
    Err(todo("bind", &[p]))
}

/// Tight binding of an array input to known contents.
pub fn bind_array(p: &Program, input: &str, value: &HostArray) -> Result<Program, AlgebraError> {
    let _ = (input, value);
    Err(todo("bind", &[p]))
}

/// Loose binding: a varying input becomes a uniform.
pub fn bind_uniform(p: &Program, input: &str) -> Result<Program, AlgebraError> {
    let _ = input;
    Err(todo("bind_uniform", &[p]))
}

/// Unbinding: a uniform becomes a varying input.
pub fn unbind(p: &Program, input: &str) -> Result<Program, AlgebraError> {
    let _ = input;
    Err(todo("unbind", &[p]))
}

/// Composition `p << q`.
pub fn compose(p: &Program, q: &Program) -> Result<Program, AlgebraError> {
    Err(todo("compose", &[p, q]))
}

/// Bundling.
pub fn bundle(ps: &[&Program]) -> Result<Program, AlgebraError> {
    Err(todo("bundle", ps))
}

/// Specialization to the named outputs.
pub fn keep(p: &Program, outputs: &[&str]) -> Result<Program, AlgebraError> {
    let _ = outputs;
    Err(todo("keep", &[p]))
}

/// Specialization without the named outputs.
pub fn drop(p: &Program, outputs: &[&str]) -> Result<Program, AlgebraError> {
    let _ = outputs;
    Err(todo("drop", &[p]))
}

/// `p` with its varying inputs reordered.
pub fn swizzle_inputs(p: &Program, order: &[usize]) -> Result<Program, AlgebraError> {
    let _ = order;
    Err(todo("swizzle_inputs", &[p]))
}

/// Interface adapters (Sh): small programs composed with `<<`.
pub mod adapters {
    use super::*;

    /// Inputs of the given types, outputs `inputs[order[k]]`.
    pub fn swizzle(types: &[Type], order: &[usize]) -> Result<Program, AlgebraError> {
        let _ = (types, order);
        Err(todo("swizzle", &[]))
    }

    /// One input, `n` copies of it as outputs.
    pub fn dup(ty: Type, n: usize) -> Result<Program, AlgebraError> {
        let _ = (ty, n);
        Err(todo("dup", &[]))
    }

    /// Identity on one input.
    pub fn keep(ty: Type) -> Program {
        let _ = ty;
        Program::new("keep")
    }

    /// One input, no outputs.
    pub fn lose(ty: Type) -> Program {
        let _ = ty;
        Program::new("lose")
    }
}
