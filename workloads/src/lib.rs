//! weft-workloads: the seed papers' workloads (docs/workloads.md) and the `weft` library's
//! examples as functions over a [`weft::Device`], and the workloads' data readers
//! ([`data`]). The examples (`workloads/examples/`, `cargo run --release -p weft-workloads
//! --example NAME [DEVICE] …`), the integration tests and `weft-bench` all call these; each
//! module's docs give its source paper and section and its command line.
#![warn(missing_docs)]

pub mod data;

pub mod arg_max;
pub mod blackscholes;
pub mod cg;
pub mod coins;
pub mod compaction;
pub mod ep;
pub mod func_arrays;
pub mod heat_sequence;
pub mod histogram;
pub mod jacobi;
pub mod mdh;
pub mod montecarlo;
pub mod particles;
pub mod reduce_combiner;
pub mod reflect;
pub mod vecadd;

use weft::Device;

/// The examples' first command-line argument: the device to run on, a name as
/// [`Device::by_name`] takes it (default: `cpu`).
pub fn device_arg() -> String {
    std::env::args().nth(1).unwrap_or_else(|| "cpu".into())
}

/// The examples' second command-line argument as a size, or `default` when absent or not a
/// number.
pub fn size_arg(default: usize) -> usize {
    std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// The device named by [`device_arg`]; exits with a message for an unknown name or a
/// missing device. For the examples' `main`s.
pub fn example_device() -> Device {
    let name = device_arg();
    Device::by_name(&name).unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(1)
    })
}
