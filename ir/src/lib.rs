//! weft-ir: weft's typed SSA IR with structured control flow — types, entities, op table,
//! builder, text format (printer and parser), verifier, the reference interpreter,
//! uniformity analysis, launch planning and passes (the math expansion).
//!
//! The interpreter is the definition of weft's semantics (DESIGN §3); every backend must
//! agree with it bit for bit.
#![warn(missing_docs)]

pub mod abi;
pub mod algebra;
pub mod builder;
pub mod diag;
pub mod host;
pub mod interp;
pub mod konst;
pub mod launch;
pub mod lexer;
pub mod opcode;
pub mod parser;
pub mod passes;
pub mod printer;
pub mod program;
pub mod segment;
pub mod types;
pub mod uniform;
pub mod verify;

pub use diag::{render, Diagnostic, Errors};
pub use host::{Arg, HostArray, Input, KernelArg, RunError};
pub use interp::Interpreter;
pub use konst::Const;
pub use launch::KernelGrid;
pub use opcode::{Family, OpInfo, Opcode, Rule, Syntax, OP_TABLE};
pub use parser::{parse_and_verify, parse_module, parse_program};
pub use printer::{print_module, print_program};
pub use program::{
    Imm, Loc, Module, Op, OpData, Output, Param, ParamKind, Program, ProgramKind, Region,
    RegionData, Value, ValueData, ValueDef,
};
pub use types::{Boundary, ScalarType, Type, TypeKind};
pub use verify::{verify_module, verify_program};
