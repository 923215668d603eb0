//! IR-to-IR passes and the pass manager.
//!
//! Passes (each a module, each with a filetest directory `tests/filetests/opt/<pass>`):
//! [`inline`] (calls), [`fold`] (constant folding with DESIGN §3 semantics, through control
//! flow: `if` on a constant, small constant-trip loops unrolled), [`cse`] (value numbering),
//! [`dce`] (dead ops; `dce-inputs` also drops unused inputs), [`licm`] (loop-invariant code
//! motion), [`math`] (the math expansion, DESIGN §3), [`lift`] (uniform lifting into a
//! per-launch prologue, DESIGN §4) and [`partition`] (a stencil launch's interior variant).
//! [`Pipeline`] runs a comma-separated list of them.

pub mod cse;
pub mod dce;
pub mod fold;
pub mod inline;
pub mod licm;
pub mod lift;
pub mod math;
pub mod partition;
pub mod util;

pub use math::{expand_math, expand_program};

use crate::diag::Errors;
use crate::program::Module;
use std::fmt;

/// The module a backend lowers program `name` from: math functions expanded (DESIGN §3,
/// the interpreter runs the same expansion) and the calls of `name` and of what it calls
/// inlined callees first with identical calls merged ([`inline::inline_reachable`]), so a
/// lowering never meets a `call` and a call DAG costs time linear in its size. Borrows `m`
/// when neither applies. Exact: both transformations keep every bit of every result.
pub fn for_lowering<'m>(m: &'m Module, name: &str) -> std::borrow::Cow<'m, Module> {
    let has_call = m.programs.iter().any(|p| {
        let mut found = false;
        p.walk(&mut |op| found |= p.op(op).opcode == crate::Opcode::Call);
        found
    });
    let has_math = math::has_math(m);
    if !has_call && !has_math {
        return std::borrow::Cow::Borrowed(m);
    }
    let mut c = m.clone();
    if has_math {
        expand_math(&mut c);
    }
    if has_call {
        inline::inline_reachable(&mut c, name);
    }
    std::borrow::Cow::Owned(c)
}

/// One pass of a pipeline, by its name in pipeline strings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pass {
    /// `inline`: replaces every `call` by the callee's body ([`inline::inline_module`]).
    Inline,
    /// `fold`: constant folding and unrolling ([`fold::fold_module`]).
    Fold,
    /// `cse`: common subexpression elimination ([`cse::cse_module`]).
    Cse,
    /// `dce`: removes ops whose results are unused ([`dce::dce_module`]).
    Dce,
    /// `dce-inputs`: `dce`, then removes unused inputs of programs no other program calls.
    DceInputs,
    /// `licm`: hoists loop-invariant pure ops out of loops ([`licm::licm_module`]).
    Licm,
    /// `math`: the math expansion ([`math::expand_math`]).
    Math,
    /// `lift-uniforms`: uniform lifting ([`lift::lift_module`]).
    LiftUniforms,
}

/// Every pass, in the order of the default pipeline's documentation.
pub const ALL_PASSES: [Pass; 8] = [
    Pass::Inline,
    Pass::Fold,
    Pass::Cse,
    Pass::Dce,
    Pass::DceInputs,
    Pass::Licm,
    Pass::Math,
    Pass::LiftUniforms,
];

/// The default optimisation pipeline (what `weft opt` runs without `--passes`).
pub const DEFAULT_PIPELINE: &str = "inline,fold,cse,licm,dce";

impl Pass {
    /// The pass's name in pipeline strings.
    pub fn name(self) -> &'static str {
        match self {
            Pass::Inline => "inline",
            Pass::Fold => "fold",
            Pass::Cse => "cse",
            Pass::Dce => "dce",
            Pass::DceInputs => "dce-inputs",
            Pass::Licm => "licm",
            Pass::Math => "math",
            Pass::LiftUniforms => "lift-uniforms",
        }
    }

    /// Looks a pass up by name.
    pub fn from_name(s: &str) -> Option<Pass> {
        ALL_PASSES.into_iter().find(|p| p.name() == s)
    }

    /// Runs the pass on every program of `m`.
    pub fn run(self, m: &mut Module) {
        match self {
            Pass::Inline => inline::inline_module(m),
            Pass::Fold => fold::fold_module(m),
            Pass::Cse => cse::cse_module(m),
            Pass::Dce => dce::dce_module(m),
            Pass::DceInputs => {
                dce::dce_module(m);
                dce::drop_unused_inputs(m);
            }
            Pass::Licm => licm::licm_module(m),
            Pass::Math => expand_math(m),
            Pass::LiftUniforms => lift::lift_module(m),
        }
    }
}

/// A pass pipeline failed: an unknown pass name, or (a bug) a pass whose output does not verify.
#[derive(Debug)]
pub enum PassError {
    /// A name in the pipeline string is not a pass; `position` counts from 1.
    UnknownPass {
        /// The unknown name.
        name: String,
        /// Its position in the list, from 1.
        position: usize,
    },
    /// The module did not verify after `pass` (a pass bug; the message holds the diagnostics).
    Verify {
        /// The pass after which verification failed.
        pass: &'static str,
        /// The diagnostics.
        errors: Errors,
        /// The module as printed after the pass.
        text: String,
    },
}

impl fmt::Display for PassError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PassError::UnknownPass { name, position } => {
                let known: Vec<&str> = ALL_PASSES.iter().map(|p| p.name()).collect();
                write!(
                    f,
                    "unknown pass `{name}` at position {position} of the pipeline (passes: {})",
                    known.join(", ")
                )
            }
            PassError::Verify { pass, errors, .. } => {
                write!(f, "the IR does not verify after pass `{pass}`:")?;
                for e in &errors.0 {
                    write!(f, "\n  {}", e.message)?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for PassError {}

/// A parsed pass pipeline, e.g. `"inline,fold,cse,dce,licm,lift-uniforms"`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pipeline(pub Vec<Pass>);

impl Pipeline {
    /// Parses a comma-separated list of pass names (spaces allowed; empty list = no passes).
    ///
    /// Errors: [`PassError::UnknownPass`] naming the first unknown name and its position.
    pub fn parse(s: &str) -> Result<Pipeline, PassError> {
        let mut passes = Vec::new();
        for (i, name) in s.split(',').map(str::trim).enumerate() {
            if name.is_empty() && s.trim().is_empty() {
                continue;
            }
            passes.push(Pass::from_name(name).ok_or_else(|| PassError::UnknownPass {
                name: name.to_string(),
                position: i + 1,
            })?);
        }
        Ok(Pipeline(passes))
    }

    /// Runs the passes in order on `m`, verifying after each one and calling
    /// `after(pass, module)` after each (for `--print-after-all`).
    ///
    /// Errors: [`PassError::Verify`] if a pass leaves IR that does not verify (a bug in it).
    pub fn run_with(
        &self,
        m: &mut Module,
        after: &mut dyn FnMut(Pass, &Module),
    ) -> Result<(), PassError> {
        for &pass in &self.0 {
            pass.run(m);
            crate::verify::verify_module(m).map_err(|errors| PassError::Verify {
                pass: pass.name(),
                errors,
                text: crate::printer::print_module(m),
            })?;
            after(pass, m);
        }
        Ok(())
    }

    /// Runs the passes in order on `m`, verifying after each one (see [`Pipeline::run_with`]).
    pub fn run(&self, m: &mut Module) -> Result<(), PassError> {
        self.run_with(m, &mut |_, _| {})
    }
}

/// Parses `pipeline` and runs it on `m` (see [`Pipeline`]).
pub fn run_pipeline(m: &mut Module, pipeline: &str) -> Result<(), PassError> {
    Pipeline::parse(pipeline)?.run(m)
}

#[cfg(test)]
mod tests;
