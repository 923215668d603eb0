//! The recording DSL (DESIGN §2, §4): values, recording, control flow, programs.
//!
//! weft revives the retained mode of RapidMind (McCool et al., "Data-Parallel Programming
//! on the Cell BE and the GPU using the RapidMind Development Platform") and Sh ("Shader
//! Algebra", SIGGRAPH 2004): ordinary Rust code run inside [`Program::record`] records a
//! program into weft's IR instead of computing. [`Value`]s stand for the program's values,
//! operators and math functions append ops, [`if_`]/[`for_`]/[`while_`]/[`do_until`]
//! record structured control flow, and [`In`]/[`Out`]/[`InOut`]/[`Param`]/[`InArray`]/
//! [`Uniform`] declare the interface. Outside recording the same code runs in immediate
//! mode: every operation computes at once with the interpreter's semantics.
//!
//! ```
//! use weft::dsl::*;
//! let a = Uniform::named("a", 2.0f32);
//! let saxpy = Program::record(|| {
//!     let x = In::<Value1f>::named("x");
//!     let y = In::<Value1f>::named("y");
//!     Out::named("r", &a * x + y);
//! })
//! .unwrap();
//! assert_eq!(saxpy.open_inputs().len(), 2); // x, y; `a` follows the host cell
//! a.set(3.0);
//! assert_eq!(saxpy.captured_uniforms()[0].1, weft::ir::Const::f32(3.0));
//! ```
//!
//! Recorded programs are values of the program algebra (DESIGN §4): see [`Program::bind`],
//! [`Program::compose`] (`&p << &q`), [`Program::bundle`], [`Program::keep`], and can be
//! called from other recordings ([`Program::call`]).
//!
//! Explicit SPMD kernels (DESIGN §2 kernel mode) are recorded with [`Kernel::record`], with
//! [`thread_index`], [`sync_threads`], [`Shared`] arrays and [`Buffer`]s (MC#'s names in Rust
//! style), and launched over a grid of blocks with [`Kernel::launch`].

mod control;
mod interface;
mod kernel;
mod math;
mod ops;
mod program;
mod random;
mod record;
mod uniform;
mod value;

pub use control::*;
pub use interface::*;
pub use kernel::*;
pub use math::*;
pub use program::*;
pub use random::*;
pub use record::is_recording;
pub use uniform::Uniform;
pub use value::*;
pub use weft_ir::Boundary;
