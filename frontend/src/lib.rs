//! weft: a data-parallel JIT in the RapidMind / Sh model. This crate is the public library
//! (re-exports of the IR, npy I/O, and the `weft` CLI's implementation).

pub mod cli;
pub mod npy;

pub use weft_ir as ir;
/// The program algebra (DESIGN §4): binding, composition, bundling, specialization.
pub use weft_ir::algebra;
/// IR-to-IR passes and the pass pipeline (`weft opt`).
pub use weft_ir::passes;
pub use weft_ir::{
    builder::ProgramBuilder, parse_module, print_module, verify_module, Const, HostArray, Module,
    Program, ScalarType, Type,
};
