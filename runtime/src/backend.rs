//! The backends weft runs programs on, named in one place, and [`Device`]: one device type over
//! all of them (DESIGN §5a, issue 20). The CLI, the fuzzer, the filetest runner and the
//! benchmarks open devices through it instead of matching backend names themselves.

use crate::cpu::{CpuDevice, HostCompiler, RuntimeError};
use crate::cuda::{CudaDevice, GpuConfig};
use crate::group::DeviceGroup;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;
use weft_ir::interp::{HostArray, Input, Interpreter, RunError};
use weft_ir::{KernelArg, KernelGrid, Module};

/// A backend: what executes a program. Its name (`interp`, `cranelift`, `llvm`, `cuda`) is
/// what `weft run --backend` and `weft fuzz --backends` take; [`Backend::NAMES`] lists them
/// and this type alone parses and prints them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Backend {
    /// The reference interpreter (`weft_ir::Interpreter`): the definition of the semantics.
    Interp,
    /// The CPU device with Cranelift (`weft_backend_cranelift`).
    Cranelift,
    /// The CPU device with LLVM host code (`weft_backend_llvm`, ORC).
    Llvm,
    /// An NVIDIA GPU through the CUDA driver (LLVM → PTX).
    Cuda,
    /// The CPU device with the tiered JIT (issue 24): Cranelift code at once, LLVM code
    /// compiled in the background and used once ready (`HostCompiler::Auto`).
    Auto,
}

impl Backend {
    /// Every backend, in the order the CLI lists them.
    pub const ALL: [Backend; 5] = [
        Backend::Interp,
        Backend::Cranelift,
        Backend::Llvm,
        Backend::Cuda,
        Backend::Auto,
    ];

    /// The backends' names, in [`Backend::ALL`]'s order.
    pub const NAMES: [&'static str; 5] = ["interp", "cranelift", "llvm", "cuda", "auto"];

    /// The backend's name (`weft run --backend NAME`).
    pub const fn name(self) -> &'static str {
        Backend::NAMES[self as usize]
    }

    /// Whether the backend runs compiled code (everything but the interpreter).
    pub const fn is_compiled(self) -> bool {
        !matches!(self, Backend::Interp)
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl HostCompiler {
    /// The backend a CPU device with this compiler is.
    pub fn backend(self) -> Backend {
        match self {
            HostCompiler::Cranelift => Backend::Cranelift,
            HostCompiler::Llvm(_) => Backend::Llvm,
            HostCompiler::Auto(_) => Backend::Auto,
        }
    }
}

/// A name that is not a backend's.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown backend `{0}` (the backends are interp, cranelift, llvm, cuda, auto)")]
pub struct UnknownBackend(pub String);

impl FromStr for Backend {
    type Err = UnknownBackend;

    fn from_str(s: &str) -> Result<Backend, UnknownBackend> {
        Backend::ALL
            .into_iter()
            .find(|b| b.name() == s)
            .ok_or_else(|| UnknownBackend(s.to_string()))
    }
}

/// How [`Device::open`] sets a device up.
#[derive(Clone, Copy, Debug)]
pub struct DeviceOptions {
    /// Fast-math (LLVM and CUDA; docs/semantics.md, "Fast-math"); Cranelift and the
    /// interpreter ignore it.
    pub fast_math: bool,
    /// The GPU's ordinal (CUDA only).
    pub ordinal: usize,
    /// The interpreter's fuel per element (ops).
    pub fuel: u64,
    /// The time budget of each launch: the CPU devices' watchdog (docs/abi.md); on the
    /// interpreter it caps the fuel at about [`INTERP_OPS_PER_SECOND`] ops per second; CUDA
    /// has none. Default: `WEFT_TIMEOUT`'s, as for [`CpuDevice::new`] (none when unset or
    /// not a number).
    pub timeout: Option<Duration>,
    /// Block and grid sizes for map programs on CUDA (`None`: automatic).
    pub block: Option<u32>,
    /// See [`DeviceOptions::block`].
    pub grid: Option<u32>,
}

impl Default for DeviceOptions {
    fn default() -> DeviceOptions {
        DeviceOptions {
            fast_math: false,
            ordinal: 0,
            fuel: weft_ir::interp::DEFAULT_FUEL,
            timeout: crate::watchdog::timeout_from_env().ok().flatten(),
            block: None,
            grid: None,
        }
    }
}

/// Ops per second one element of the interpreter runs, roughly (a loop of adds on a 2-core
/// AMD Zen 4): a time budget on the interpreter becomes this much fuel per second.
pub const INTERP_OPS_PER_SECOND: f64 = 2.5e7;

/// The interpreter's fuel per element under `budget`: `fuel`, capped at the ops one element
/// runs in about that time (the interpreter counts ops, not time).
pub fn interp_fuel(fuel: u64, budget: Option<Duration>) -> u64 {
    budget.map_or(fuel, |b| {
        fuel.min((b.as_secs_f64() * INTERP_OPS_PER_SECOND).max(1.0) as u64)
    })
}

/// One device of any [`Backend`], dispatched by variant: the backends' devices differ in
/// what they hold (nothing, a kernel cache, a CUDA context), and an enum keeps their own
/// richer APIs (prepared launches, buffers, residency) reachable without a trait object.
// A device is opened once and shared (the library holds it in an `Arc`): the variants'
// sizes do not matter.
#[allow(clippy::large_enum_variant)]
pub enum Device {
    /// The interpreter, with its fuel per element.
    Interp {
        /// Ops per element before the run stops with an error.
        fuel: u64,
    },
    /// The CPU with Cranelift or LLVM.
    Cpu(CpuDevice),
    /// A GPU.
    Cuda(CudaDevice),
    /// Several devices a map launch is split across (issue 27, [`DeviceGroup`]).
    Group(DeviceGroup),
}

impl Device {
    /// Opens a device of `backend` set up as `opts` says.
    ///
    /// # Errors
    /// [`RuntimeError::Cuda`] when the CUDA driver or the GPU `opts.ordinal` is missing.
    pub fn open(backend: Backend, opts: &DeviceOptions) -> Result<Device, RuntimeError> {
        let cpu = |compiler| {
            let dev = CpuDevice::with_compiler(compiler);
            dev.set_timeout(opts.timeout);
            Device::Cpu(dev)
        };
        Ok(match backend {
            Backend::Interp => Device::Interp {
                fuel: interp_fuel(opts.fuel, opts.timeout),
            },
            Backend::Cranelift => cpu(HostCompiler::Cranelift),
            Backend::Llvm => cpu(HostCompiler::Llvm(weft_backend_llvm::Options {
                fast_math: opts.fast_math,
                ..Default::default()
            })),
            Backend::Auto => cpu(HostCompiler::Auto(weft_backend_llvm::Options {
                fast_math: opts.fast_math,
                ..Default::default()
            })),
            Backend::Cuda => {
                let mut dev = CudaDevice::new(opts.ordinal)?;
                dev.set_config(GpuConfig {
                    block: opts.block,
                    grid: opts.grid,
                    fast_math: opts.fast_math,
                });
                Device::Cuda(dev)
            }
        })
    }

    /// The device's backend.
    pub fn backend(&self) -> Backend {
        match self {
            Device::Interp { .. } => Backend::Interp,
            Device::Cpu(d) => d.compiler().backend(),
            Device::Cuda(_) => Backend::Cuda,
            Device::Group(g) => g.members()[0].backend(),
        }
    }

    /// Applies program `name` of `m` over `inputs` (DESIGN §5): one output array per program
    /// output, of the launch shape (the varying inputs' shape, or `shape` for a program with
    /// none).
    ///
    /// # Errors
    /// Bad inputs or launch shape, compilation, the driver, fuel or the time budget.
    pub fn apply(
        &self,
        m: &Module,
        name: &str,
        inputs: &[Input],
        shape: Option<&[usize]>,
    ) -> Result<Vec<HostArray>, RuntimeError> {
        match self {
            Device::Interp { fuel } => {
                let mut it = Interpreter::new(m);
                it.fuel = *fuel;
                Ok(it.apply(name, inputs, shape)?)
            }
            Device::Cpu(d) => d.apply(m, name, inputs, shape),
            Device::Cuda(d) => d.apply(m, name, inputs, shape),
            Device::Group(g) => g.apply(m, name, inputs, shape),
        }
    }

    /// Compiles map program `name` of `m` ahead of its first launch (the interpreter has
    /// nothing to compile): what `weft run --time` reports as compile time.
    ///
    /// # Errors
    /// An unknown program or a compile error (on CUDA, also the driver's).
    pub fn prepare(&self, m: &Module, name: &str) -> Result<(), RuntimeError> {
        match self {
            Device::Interp { .. } => m
                .get(name)
                .map(|_| ())
                .ok_or_else(|| RunError::UnknownProgram(name.to_string()).into()),
            Device::Cpu(d) => d.prepare(m, name).map(|_| ()),
            Device::Cuda(d) => d.prepare(m, name).map(|_| ()),
            Device::Group(g) => g.members().iter().try_for_each(|d| d.prepare(m, name)),
        }
    }

    /// Drops the device's compiled kernels (and, on CUDA, its resident inputs).
    pub fn clear_cache(&self) {
        match self {
            Device::Interp { .. } => {}
            Device::Cpu(d) => d.clear_cache(),
            Device::Cuda(d) => d.clear_cache(),
            Device::Group(g) => g.members().iter().for_each(|d| d.clear_cache()),
        }
    }

    /// Runs kernel `name` of `m` over `grid` (DESIGN §2, kernel mode); buffers in `args` are
    /// updated in place.
    ///
    /// # Errors
    /// As [`Device::apply`]; a stopped or failed launch leaves the buffers as they were on
    /// the CPU devices.
    pub fn run_kernel(
        &self,
        m: &Module,
        name: &str,
        args: &mut [KernelArg],
        grid: &KernelGrid,
    ) -> Result<(), RuntimeError> {
        match self {
            Device::Interp { fuel } => {
                let mut it = Interpreter::new(m);
                it.fuel = *fuel;
                Ok(it.run_kernel(name, args, grid)?)
            }
            Device::Cpu(d) => d.run_kernel(m, name, args, grid),
            Device::Cuda(d) => d.run_kernel(m, name, args, grid),
            // Kernels run whole on the group's first device (issue 27's grid split is to come).
            Device::Group(g) => g.members()[0].run_kernel(m, name, args, grid),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_are_errors() {
        for b in Backend::ALL {
            assert_eq!(b.name().parse::<Backend>(), Ok(b));
            assert_eq!(b.to_string(), b.name());
        }
        let e = "gpu".parse::<Backend>().unwrap_err();
        assert!(
            e.to_string().contains("interp, cranelift, llvm, cuda"),
            "{e}"
        );
    }

    #[test]
    fn interp_fuel_follows_the_budget() {
        assert_eq!(interp_fuel(100, None), 100);
        assert_eq!(
            interp_fuel(u64::MAX, Some(Duration::from_secs(2))),
            50_000_000
        );
        assert_eq!(interp_fuel(10, Some(Duration::from_secs(2))), 10);
    }
}
