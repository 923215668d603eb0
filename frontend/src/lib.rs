//! weft: the public library (recording DSL, arrays, apply, collectives) and the `weft` CLI.
#![doc = include_str!("tutorial.md")]

mod apply;
pub mod array;
pub mod collective;
pub mod data;
pub mod device;
pub mod dsl;
pub mod error;
mod exec;
pub mod npy;
pub mod scalar;

pub use apply::{count, reduce, Arg, Args, Bundle, Outputs};
pub use array::{grid1, grid2, grid3, Array, Residency};
pub use collective::{arg_max, arg_min, max, min, product, sum, sum_array};
pub use device::Device;
pub use error::{Error, Result};
pub use scalar::{Elem, Scalar};

pub use weft_ir as ir;
/// The program algebra (DESIGN §4): binding, composition, bundling, specialization.
pub use weft_ir::algebra;
/// IR-to-IR passes and the pass pipeline (`weft opt`).
pub use weft_ir::passes;
pub use weft_ir::{
    builder::ProgramBuilder, parse_module, print_module, verify_module, Const, HostArray, Module,
    Program as IrProgram, ScalarType, Type,
};
