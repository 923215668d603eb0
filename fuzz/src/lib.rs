//! weft-fuzz: the cross-backend differential fuzzer (DESIGN §6, after Cranelift's fuzzgen).
//!
//! - [`gen`]: proptest strategies for verified programs covering the op table, every type,
//!   nested control flow, uniforms, arrays under every boundary mode, builtins and calls;
//! - [`case`]: a program plus the inputs of one launch, printable as a `.weft` filetest;
//! - [`oracle`]: runs a case on the interpreter and on each [`oracle::Target`] (pass
//!   pipelines, program-algebra operations, Cranelift, LLVM, CUDA) and compares bit for bit;
//! - [`runner`]: the seeded loop behind `weft fuzz` and the CI budget test: generate, check,
//!   shrink, write filetests, count;
//! - [`kernel`]: random barrier-safe kernels around generated programs, checked on every
//!   backend against the interpreter's exact barrier semantics;
//! - [`fastmath`]: one-op cases run with fast-math, compared within documented bounds;
//! - [`stress`]: programs at the compilers' size limits (call DAGs, long chains, many loops);
//! - [`compare`]: bit equality with any NaN equal to any NaN, and run-line formatting.
#![warn(missing_docs)]

pub mod case;
pub mod compare;
pub mod fastmath;
pub mod gen;
pub mod kernel;
pub mod oracle;
pub mod runner;
pub mod stress;

pub use case::Case;
pub use oracle::Target;
pub use runner::{case_at, run, FuzzConfig, Mismatch, Summary};
