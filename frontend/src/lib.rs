//! weft: the public library (recording DSL, arrays, apply, collectives) and the `weft` CLI.
#![doc = include_str!("tutorial.md")]
#![warn(missing_docs)]

mod apply;
pub mod array;
pub mod collective;
pub mod data;
pub mod device;
pub mod dsl;
pub mod error;
mod exec;
pub mod histogram;
pub mod npy;
pub mod scalar;
mod sequence;
pub mod sort;

pub use apply::{count, reduce, Arg, Args, Bundle, Outputs, Reduction};
pub use array::{grid1, grid2, grid3, Array, Residency};
pub use collective::{
    arg_max, arg_min, cumsum, cumsum_exclusive, maximum, maximum_array, minimum, minimum_array,
    product, scan, scan_exclusive, segment_max, segment_min, segment_reduce, segment_sum, sum,
    sum_array,
};
pub use device::Device;
pub use error::{Error, Result};
pub use histogram::{bincount, histogram, scatter_add, scatter_max, scatter_min};
pub use scalar::{Elem, Scalar};
pub use sequence::{Arrays, Sequence};
pub use sort::{sort, sort_pairs};
pub use weft_runtime::{stats, Backend, DeviceOptions};

/// Everything a program using weft needs, for one glob import: `use weft::prelude::*;`.
///
/// Nothing in it clashes with Rust's own prelude or with another name in it: the recording
/// DSL ([`dsl`]: values, interface, control flow, math, kernels — `min`/`max` are the
/// lane-wise functions of recorded values), arrays, devices, applying, and the reductions
/// over arrays (`sum`, `minimum`, `maximum`, … — Halide's names). The IR's own `Program`,
/// `Value` and `Arg` stay under [`ir`].
///
/// ```
/// use weft::prelude::*;
/// let relu = Program::record(|| {
///     let x = In::<Value1f>::named("x");
///     Out::named("y", max(&x, 0.0f32));
/// })?;
/// let x = Array::from_vec([3], vec![-1.0f32, 0.5, 2.0])?;
/// let y: Array<1, f32> = relu.apply(&x)?;
/// assert_eq!(maximum(&y)?, 2.0);
/// # Ok::<(), weft::Error>(())
/// ```
pub mod prelude {
    pub use crate::dsl::*;
    pub use crate::{
        arg_max, arg_min, bincount, count, cumsum, cumsum_exclusive, grid1, grid2, grid3,
        histogram, maximum, maximum_array, minimum, minimum_array, product, reduce, scatter_add,
        scatter_max, scatter_min, sum, sum_array, Array, Arrays, Bundle, Device, Elem, Error,
        Reduction, Result, Scalar, Sequence,
    };
}

pub use weft_ir as ir;
/// The program algebra (DESIGN §4): binding, composition, bundling, specialization.
pub use weft_ir::algebra;
/// IR-to-IR passes and the pass pipeline (`weft opt`).
pub use weft_ir::passes;
pub use weft_ir::{
    builder::ProgramBuilder, parse_module, print_module, verify_module, Const, HostArray, Module,
    ScalarType, Type,
};
