//! Devices the library runs programs on (DESIGN §5): the reference interpreter, the CPU with
//! Cranelift (the default) or LLVM, and CUDA GPUs; and the per-thread current device.

use crate::error::{Error, Result};
use std::cell::RefCell;
use std::fmt;
use std::sync::{Arc, OnceLock};
use weft_runtime::{Backend, CpuDevice, CudaDevice, DeviceOptions, HostCompiler};

/// The runtime's device (one type over every backend), which a [`Device`] shares.
pub(crate) use weft_runtime::Device as Kind;

/// Where programs run. Cheap to clone; clones share the kernel cache. Pick one per thread
/// with [`Device::scope`] (the default is [`Device::cpu`]), or pass it to the `_on` variants
/// of apply and the collectives. It wraps the runtime's [`weft_runtime::Device`].
#[derive(Clone)]
pub struct Device(pub(crate) Arc<Kind>);

thread_local! {
    static CURRENT: RefCell<Option<Device>> = const { RefCell::new(None) };
}

impl Device {
    /// The default device: the CPU with the tiered JIT ([`Device::cpu_auto`]) — a
    /// program's first launches run Cranelift code (fast to compile), later ones LLVM code
    /// (compiled in the background, or loaded from the on-disk kernel cache), with the same
    /// bits. One shared instance per process (so its kernel cache is shared).
    pub fn cpu() -> Device {
        Device::cpu_auto()
    }

    /// The CPU with Cranelift-compiled SIMD code alone (128-bit vectors; fast compiles,
    /// slower code than LLVM's on loop- and math-heavy programs). One shared instance per
    /// process.
    pub fn cpu_cranelift() -> Device {
        static CPU: OnceLock<Device> = OnceLock::new();
        CPU.get_or_init(|| Device(Arc::new(Kind::Cpu(CpuDevice::new()))))
            .clone()
    }

    /// The CPU with LLVM-compiled code (ORC JIT, the host's widest vectors). One shared
    /// instance per process.
    pub fn cpu_llvm() -> Device {
        static CPU: OnceLock<Device> = OnceLock::new();
        CPU.get_or_init(|| {
            let c = CpuDevice::with_compiler(HostCompiler::Llvm(Default::default()));
            Device(Arc::new(Kind::Cpu(c)))
        })
        .clone()
    }

    /// The CPU with the tiered JIT (issue 24; the default, [`Device::cpu`]): a program's
    /// first launches run Cranelift code while LLVM compiles it in the background, later
    /// ones the LLVM code; a program whose LLVM code is in the on-disk kernel cache runs it
    /// at once. One shared instance per process.
    pub fn cpu_auto() -> Device {
        static CPU: OnceLock<Device> = OnceLock::new();
        CPU.get_or_init(|| {
            let c = CpuDevice::with_compiler(HostCompiler::Auto(Default::default()));
            Device(Arc::new(Kind::Cpu(c)))
        })
        .clone()
    }

    /// The reference interpreter as a device: every result is the definition of what the
    /// compiled devices must compute (DESIGN §3, §6).
    pub fn interp() -> Device {
        static I: OnceLock<Device> = OnceLock::new();
        I.get_or_init(|| {
            Device(Arc::new(Kind::Interp {
                fuel: weft_ir::interp::DEFAULT_FUEL,
            }))
        })
        .clone()
    }

    /// CUDA GPU number `ordinal` (driver order). Opening the same ordinal twice gives two
    /// devices sharing the GPU's primary context.
    ///
    /// # Errors
    /// [`Error::Runtime`] when no driver is installed (a clear message, never a panic), or
    /// there is no such GPU.
    pub fn cuda(ordinal: usize) -> Result<Device> {
        let d = CudaDevice::new(ordinal).map_err(|e| Error::Runtime(e.into()))?;
        Ok(Device(Arc::new(Kind::Cuda(d))))
    }

    /// A new device of `backend` set up as `opts` says (each call makes a device with its
    /// own kernel cache): fast-math for LLVM and CUDA (docs/semantics.md, "Fast-math"), the
    /// GPU's ordinal, CUDA block and grid sizes, and the time budget of each launch — the
    /// CPU's watchdog (docs/abi.md): a launch running past it stops, and reading its result
    /// gives an error naming the program and the line that applied it. The default options
    /// take the budget from `WEFT_TIMEOUT` (seconds; none when unset).
    ///
    /// ```
    /// use std::time::Duration;
    /// use weft::{Backend, Device, DeviceOptions};
    /// let dev = Device::open(
    ///     Backend::Cranelift,
    ///     &DeviceOptions { timeout: Some(Duration::from_secs(5)), ..DeviceOptions::default() },
    /// )?;
    /// assert_eq!(dev.name(), "cpu (cranelift)");
    /// # Ok::<(), weft::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`Device::cuda`] for `Backend::Cuda`.
    pub fn open(backend: Backend, opts: &DeviceOptions) -> Result<Device> {
        let k = Kind::open(backend, opts).map_err(Error::Runtime)?;
        Ok(Device(Arc::new(k)))
    }

    /// A device by name: `interp`, `cpu` or `auto` (the tiered CPU, the default),
    /// `cranelift`, `llvm`, `cuda` or `cuda:N`.
    ///
    /// # Errors
    /// An unknown name, or as [`Device::cuda`].
    pub fn by_name(name: &str) -> Result<Device> {
        use weft_runtime::Backend;
        // `cpu` is the default CPU backend; `cuda:N` names a GPU.
        let (backend, ordinal) = match name.split_once(':') {
            Some((b, n)) if b.parse() == Ok(Backend::Cuda) => (Some(Backend::Cuda), n.parse().ok()),
            Some(_) => (None, None),
            None if name == "cpu" => (Some(Backend::Auto), Some(0)),
            None => (name.parse().ok(), Some(0)),
        };
        match (backend, ordinal) {
            (Some(Backend::Interp), _) => Ok(Device::interp()),
            (Some(Backend::Cranelift), _) => Ok(Device::cpu_cranelift()),
            (Some(Backend::Llvm), _) => Ok(Device::cpu_llvm()),
            (Some(Backend::Auto), _) => Ok(Device::cpu_auto()),
            (Some(Backend::Cuda), Some(n)) => Device::cuda(n),
            _ => Err(Error::argument(format!(
                "unknown device `{name}` (expected interp, cpu, llvm, auto, cuda or cuda:N)"
            ))),
        }
    }

    /// The current thread's device: the innermost [`Device::scope`], else [`Device::cpu`].
    pub fn current() -> Device {
        CURRENT
            .with(|c| c.borrow().clone())
            .unwrap_or_else(Device::cpu)
    }

    /// Runs `f` with `self` as the current device of this thread, restoring the previous
    /// one afterwards (also when `f` panics).
    pub fn scope<R>(&self, f: impl FnOnce() -> R) -> R {
        struct Restore(Option<Device>);
        impl Drop for Restore {
            fn drop(&mut self) {
                let prev = self.0.take();
                CURRENT.with(|c| *c.borrow_mut() = prev);
            }
        }
        let prev = CURRENT.with(|c| c.borrow_mut().replace(self.clone()));
        let _restore = Restore(prev);
        f()
    }

    /// A short description (`cpu (cranelift)`, `interp`, the GPU's name).
    pub fn name(&self) -> String {
        match &*self.0 {
            Kind::Interp { .. } => Backend::Interp.name().into(),
            Kind::Cpu(c) => format!("cpu ({})", c.compiler().backend()),
            Kind::Cuda(d) => format!("cuda:{} ({})", d.info().ordinal, d.info().name),
            Kind::Group(g) => {
                let names: Vec<String> = g
                    .members()
                    .iter()
                    .map(|m| Device(m.clone()).name())
                    .collect();
                format!("group [{}]", names.join(", "))
            }
        }
    }

    /// A device group (issue 27; MC#'s one `GpuConfig` per device, OpenCL's context over
    /// several devices): a map launch on it is split along its first axis, in proportion
    /// to each member's multiprocessors (1 for a CPU device or the interpreter), and each
    /// part runs on its member with the whole launch's `index` and `shape`, so the results
    /// have the bits one device gives. A part's inputs are uploaded to its member and stay
    /// there; a result's parts stay on their members and are gathered when read elsewhere
    /// (the host, another device, or an input read at random coordinates, which each
    /// member gets whole). Kernels, recorded sequences and kernel-mode collectives run on
    /// the first member. The same device may be a member twice (two parts on one GPU or
    /// CPU: every split path runs without several GPUs).
    ///
    /// ```
    /// use weft::Device;
    /// let pair = Device::group(&[Device::cpu_cranelift(), Device::interp()])?;
    /// assert_eq!(pair.members().len(), 2);
    /// # Ok::<(), weft::Error>(())
    /// ```
    ///
    /// # Errors
    /// No member, or a member that is a group itself.
    pub fn group(members: &[Device]) -> Result<Device> {
        let g = weft_runtime::DeviceGroup::new(members.iter().map(|d| d.0.clone()).collect())
            .map_err(Error::Runtime)?;
        Ok(Device(Arc::new(Kind::Group(g))))
    }

    /// Every CUDA GPU of this host as one [`Device::group`] (driver order;
    /// `CUDA_VISIBLE_DEVICES` applies). One GPU gives a group of one.
    ///
    /// # Errors
    /// No driver or no GPU (a clear message), or a GPU that fails to open.
    pub fn cuda_all() -> Result<Device> {
        let n = weft_runtime::cuda_devices()
            .map_err(|e| Error::Runtime(e.into()))?
            .len();
        if n == 0 {
            return Err(Error::argument("cuda_all: no CUDA GPU found"));
        }
        let gpus = (0..n).map(Device::cuda).collect::<Result<Vec<_>>>()?;
        Device::group(&gpus)
    }

    /// The members of a [`Device::group`], in order; a device that is not a group is its
    /// own only member.
    pub fn members(&self) -> Vec<Device> {
        match &*self.0 {
            Kind::Group(g) => g.members().iter().map(|m| Device(m.clone())).collect(),
            _ => vec![self.clone()],
        }
    }

    /// Waits until the launches queued on this device — on each member of a group — have
    /// finished (CUDA's `cuStreamSynchronize`); nothing to wait for on the CPU or the
    /// interpreter. Deferred launches the library has not queued yet are not run: they run
    /// when their results are read. For timing and for handing memory to other libraries.
    ///
    /// # Errors
    /// A GPU error, including one of a launch queued earlier.
    pub fn synchronize(&self) -> Result<()> {
        match &*self.0 {
            Kind::Cuda(g) => g.synchronize().map_err(|e| Error::Runtime(e.into())),
            Kind::Group(_) => self.members().iter().try_for_each(Device::synchronize),
            _ => Ok(()),
        }
    }

    /// True for a [`Device::group`].
    pub fn is_group(&self) -> bool {
        matches!(&*self.0, Kind::Group(_))
    }

    /// Whether map program `name` of `m` is not compiled for this device yet.
    pub(crate) fn needs_compile(&self, m: &Arc<weft_ir::Module>, name: &str) -> bool {
        match &*self.0 {
            Kind::Interp { .. } => false,
            Kind::Cpu(c) => !c.is_prepared_shared(m, name),
            Kind::Cuda(g) => !g.is_prepared_shared(m, name),
            // Its members compile the part programs, made at the first launch.
            Kind::Group(_) => false,
        }
    }

    /// Compiles map program `name` of `m` for this device (the interpreter has nothing to
    /// compile).
    pub(crate) fn precompile(&self, m: &Arc<weft_ir::Module>, name: &str) -> Result<()> {
        match &*self.0 {
            Kind::Interp { .. } => Ok(()),
            Kind::Cpu(c) => c.prepare_shared(m, name).map(drop),
            Kind::Cuda(g) => g.prepare_shared(m, name).map(drop),
            Kind::Group(_) => Ok(()),
        }
        .map_err(Error::Runtime)
    }

    /// Compiles `programs` for this device now, in parallel on the rayon pool, instead of at
    /// their first launches: a program applied later starts at once. (A chain of deferred
    /// applies compiles its programs in parallel by itself when its first result is read.)
    ///
    /// # Errors
    /// The first program that fails to compile (naming it).
    pub fn compile(&self, programs: &[&crate::dsl::Program]) -> Result<()> {
        use rayon::prelude::*;
        programs
            .par_iter()
            .try_for_each(|p| self.precompile(p.module_arc(), p.name()))
    }

    /// Runs kernel `name` of `m` over `grid` on this device, updating buffers in place.
    ///
    /// # Errors
    /// Arguments that do not match the kernel (named), a compile or launch error.
    pub(crate) fn run_kernel(
        &self,
        m: &weft_ir::Module,
        name: &str,
        args: &mut [weft_ir::KernelArg],
        grid: &weft_ir::KernelGrid,
    ) -> Result<()> {
        Ok(self.0.run_kernel(m, name, args, grid)?)
    }

    /// True for the reference interpreter.
    pub(crate) fn is_interp(&self) -> bool {
        matches!(&*self.0, Kind::Interp { .. })
    }

    /// True for a CUDA device.
    pub fn is_cuda(&self) -> bool {
        matches!(&*self.0, Kind::Cuda(_))
    }

    /// True when [`crate::Sequence::until_program`] runs its loops here as one CUDA graph
    /// with conditional nodes (a CUDA device whose driver is 12.4 or later, with a CUDA
    /// device runtime library to link with; Warp's `is_conditional_graph_supported`).
    /// Elsewhere such loops run on the host, with the same results.
    pub fn runs_device_loops(&self) -> bool {
        match &*self.0 {
            Kind::Cuda(g) => g.supports_device_loops(),
            _ => false,
        }
    }

    /// The CPU device, if this is one (for its time budget, kernel cache and the tiered
    /// JIT's [`CpuDevice::wait_for_upper_tier`]).
    pub fn as_cpu(&self) -> Option<&CpuDevice> {
        match &*self.0 {
            Kind::Cpu(d) => Some(d),
            _ => None,
        }
    }

    /// The CUDA device, if this is one (for its configuration and transfer counters).
    pub fn as_cuda(&self) -> Option<&CudaDevice> {
        match &*self.0 {
            Kind::Cuda(d) => Some(d),
            _ => None,
        }
    }
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Device({})", self.name())
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}
