//! Kernel mode in the DSL (DESIGN §2; docs/kernel-mode.md): explicit SPMD kernels recorded
//! from Rust, with MC#'s GPU-method vocabulary in Rust style — [`thread_index`]
//! (`ThreadIndex`), [`block_index`] (`BlockIndex`), [`block_dim`], [`grid_dim`],
//! [`sync_threads`] (`SyncThreads`), [`Shared`] arrays (`Shared1D`, …), [`clock`]
//! (`GetClock`) — plus read-write [`Buffer`]s with stores and atomics, and
//! [`Kernel::launch`] over an explicit grid of blocks (MC#'s `GpuConfig`). In OpenCL terms a
//! block is a work-group and a thread a work-item.
//!
//! ```
//! use weft::dsl::*;
//! use weft::Array;
//! // Each block sums its 64 elements of `x` into `partials[block]` with a tree in shared
//! // memory (docs/kernel-mode.md; examples/ir/kernels/reduce.weft).
//! let k = Kernel::record(|| {
//!     let x = InArray::<1, Value1f>::named("x", Boundary::Clamp);
//!     let partials = Buffer::<1, Value1f>::named("partials");
//!     let tile = Shared::<1, Value1f>::new([64]);
//!     let t = thread_index::<1>();
//!     let b = block_index::<1>();
//!     tile.store(&t, x.read(&b * 64 + &t));
//!     sync_threads();
//!     let stride = Value1i::from(32);
//!     while_(|| stride.gt(0), || {
//!         if_(t.lt(&stride), || {
//!             tile.store(&t, tile.read(&t) + tile.read(&t + &stride));
//!         });
//!         sync_threads();
//!         stride.assign(&stride / 2);
//!     });
//!     if_(t.eq(0), || partials.store(&b, tile.read(0)));
//! })
//! .unwrap();
//! let x = Array::from_fn([256], |i| i as f32).unwrap();
//! let mut partials = Array::filled([4], 0.0f32).unwrap();
//! k.launch(&[4], &[64], &mut [KernelArg::array(&x), KernelArg::buffer(&mut partials)])
//!     .unwrap();
//! assert_eq!(partials.to_vec().unwrap()[0], (0..64).sum::<i32>() as f32);
//! ```

use super::program::{is_ident, record_program, Program, RecordResult};
use super::record::{Raw, Top};
use super::value::{AsValue, Value, ValueType};
use crate::array::{Array, ArrayData, Storage};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::scalar::{Elem, Scalar};
use std::marker::PhantomData;
use std::panic::Location;
use std::sync::atomic::{AtomicUsize, Ordering};
use weft_ir::{Boundary, Const, HostArray, KernelGrid, Opcode, ParamKind, Type};
use weft_runtime::HostBuffer;

static NEXT_KERNEL: AtomicUsize = AtomicUsize::new(0);

/// A recorded kernel (DESIGN §2 kernel mode): a [`Program`] of kind `kernel`, launched over
/// a grid of blocks (work-groups) of threads (work-items). Cheap to clone.
#[derive(Clone)]
pub struct Kernel {
    program: Program,
}

impl Kernel {
    /// Records a kernel: runs `f`, in which [`Param`](super::Param) declares uniform
    /// inputs, [`InArray`](super::InArray) read-only arrays, [`Buffer`] read-write arrays and [`Shared`]
    /// block-shared arrays; [`thread_index`] and the other ids, [`sync_threads`] and the
    /// control flow of the DSL ([`if_`](super::if_), [`for_`](super::for_), …) record the
    /// body. The kernel is named `k{n}` from a process-wide counter.
    ///
    /// # Errors
    /// As [`Program::record`]; also the kernel rules of the verifier (docs/kernel-mode.md): a
    /// [`sync_threads`] under control flow that differs between the threads of a block, a
    /// [`Shared`] array declared inside control flow, an `Out` or `In` (kernels have only
    /// uniform, array and buffer parameters).
    #[track_caller]
    pub fn record<R: RecordResult>(f: impl FnOnce() -> R) -> Result<Kernel> {
        let n = NEXT_KERNEL.fetch_add(1, Ordering::Relaxed);
        let program = record_program(format!("k{n}"), true, f, Location::caller())?;
        Ok(Kernel { program })
    }

    /// [`Kernel::record`] with the kernel named `name` (an identifier `[A-Za-z0-9_.]+`).
    ///
    /// # Errors
    /// As [`Kernel::record`]; a name that is not an identifier.
    #[track_caller]
    pub fn record_named<R: RecordResult>(name: &str, f: impl FnOnce() -> R) -> Result<Kernel> {
        let loc = Location::caller();
        if !is_ident(name) {
            return Err(Error::Record {
                message: format!("kernel name `{name}` is not an identifier ([A-Za-z0-9_.]+)"),
                location: loc,
            });
        }
        let program = record_program(name.to_string(), true, f, loc)?;
        Ok(Kernel { program })
    }

    /// A kernel-mode program as a kernel (the library's generated kernels).
    pub(crate) fn from_program(program: Program) -> Kernel {
        Kernel { program }
    }

    /// The kernel as a program value (its module, IR and text).
    pub fn program(&self) -> &Program {
        &self.program
    }

    /// The kernel's name (without `@`).
    pub fn name(&self) -> &str {
        self.program.name()
    }

    /// The module as IR text (`.weft`; `weft run --grid … --block …` runs it).
    pub fn text(&self) -> String {
        self.program.text()
    }

    /// Launches the kernel on the current device ([`Device::current`]) over `grid` blocks
    /// of `block` threads (1 to 3 axes each, x first; at most 1024 threads per block), like
    /// MC#'s `GpuConfig`. `args` follow the kernel's open parameters in declaration order
    /// (uniforms linked to a host [`Uniform`](super::Uniform) take its current value);
    /// buffers are updated in place.
    ///
    /// # Errors
    /// A bad grid or block (named); the wrong number of arguments; an argument whose kind,
    /// element type or rank does not match its parameter (named); a device error.
    pub fn launch(&self, grid: &[u32], block: &[u32], args: &mut [KernelArg<'_>]) -> Result<()> {
        self.launch_on(&Device::current(), grid, block, args)
    }

    /// [`Kernel::launch`] on `device` (on a [`Device::group`], its first member).
    ///
    /// # Errors
    /// As [`Kernel::launch`].
    pub fn launch_on(
        &self,
        device: &Device,
        grid: &[u32],
        block: &[u32],
        args: &mut [KernelArg<'_>],
    ) -> Result<()> {
        crate::sequence::check_not_recording(|| format!("kernel @{}", self.name()))?;
        let g = KernelGrid::new(grid, block)
            .map_err(|e| Error::argument(format!("kernel @{}: {e}", self.name())))?;
        let p = self.program.ir();
        let open = self.program.open_inputs();
        if args.len() != open.len() {
            let names: Vec<&str> = open.iter().map(|&i| p.param_name(i)).collect();
            return Err(Error::argument(format!(
                "kernel @{} takes {} arguments ({}), got {}",
                self.name(),
                open.len(),
                names.join(", "),
                args.len()
            )));
        }
        match &*device.0 {
            crate::device::Kind::Cpu(cpu) => return self.launch_cpu(cpu, &g, args),
            crate::device::Kind::Cuda(gpu) => return self.launch_cuda(gpu, &g, args),
            crate::device::Kind::Interp { .. } => {}
            // A kernel runs whole on a group's first member (issue 27).
            crate::device::Kind::Group(_) => {
                let first = device.members().remove(0);
                return self.launch_on(&first, grid, block, args);
            }
        }
        let n = p.params.len();
        let mut values: Vec<Option<Const>> = vec![None; n];
        let mut arrays: Vec<Option<HostArray>> = vec![None; n];
        let mut writable = vec![false; n];
        for (&i, a) in open.iter().zip(args.iter()) {
            match &a.0 {
                Karg::Value(c) => values[i] = Some(*c),
                Karg::Array(_) if p.params[i].kind == ParamKind::Buffer => {
                    return Err(self.buffer_passed_as_array(i))
                }
                Karg::Array(d) => arrays[i] = Some(d.to_host_array()?),
                Karg::Scratch(_) => return Err(self.scratch_off_cuda(i)),
                Karg::Buffer(d) => {
                    arrays[i] = Some(d.to_host_array()?);
                    writable[i] = true;
                }
            }
        }
        for (i, c) in self.program.captured_uniforms() {
            values[i] = Some(c);
        }
        let mut ir_args: Vec<weft_ir::KernelArg> = Vec::with_capacity(n);
        for (i, ((v, a), &w)) in values
            .iter()
            .zip(arrays.iter_mut())
            .zip(&writable)
            .enumerate()
        {
            ir_args.push(match (v, a) {
                (Some(c), _) => weft_ir::KernelArg::Value(*c),
                (None, Some(h)) => {
                    if w {
                        weft_ir::KernelArg::Buffer(h)
                    } else {
                        weft_ir::KernelArg::Array(h)
                    }
                }
                (None, None) => {
                    return Err(Error::argument(format!(
                        "kernel @{}: parameter `{}` has no argument",
                        self.name(),
                        p.param_name(i)
                    )))
                }
            });
        }
        device.run_kernel(self.program.module(), self.name(), &mut ir_args, &g)?;
        drop(ir_args);
        for (&i, a) in open.iter().zip(args.iter_mut()) {
            if let (Karg::Buffer(d), Some(h)) = (&mut a.0, &arrays[i]) {
                **d = ArrayData::stored(
                    Storage::from_host(HostBuffer::from_host_array(h)),
                    h.shape.clone(),
                );
            }
        }
        Ok(())
    }
}

/// What a CPU kernel launch passes for one parameter ([`Kernel::launch_cpu`]).
enum Slot {
    Missing,
    Value(Const),
    /// A read-only array where it is stored: storage, first element, shape.
    Array(std::sync::Arc<HostBuffer>, usize, Vec<usize>),
    /// A buffer's copy, written in place and kept only if the launch succeeds.
    Buffer(HostBuffer, Vec<usize>),
}

impl Kernel {
    /// The error for a read-only array passed for buffer parameter `i`.
    fn buffer_passed_as_array(&self, i: usize) -> Error {
        Error::argument(format!(
            "kernel @{}: parameter `{}` is a buffer: pass it with KernelArg::buffer (the \
             kernel writes it)",
            self.name(),
            self.program.ir().param_name(i)
        ))
    }

    /// The error for device scratch ([`KernelArg::scratch`]) passed to a launch off CUDA.
    fn scratch_off_cuda(&self, i: usize) -> Error {
        Error::argument(format!(
            "kernel @{}: parameter `{}` got CUDA scratch memory, but the launch is not on \
             that CUDA device",
            self.name(),
            self.program.ir().param_name(i)
        ))
    }

    /// [`Kernel::launch_on`] a CPU device without converting arrays (issue 21): read-only
    /// arrays are passed where they are stored, each buffer as one copy of its contents that
    /// the kernel writes in place and that becomes the buffer's storage on success (so a
    /// failed launch leaves the buffers as they were, and storage shared with other arrays
    /// is never written).
    fn launch_cpu(
        &self,
        cpu: &weft_runtime::CpuDevice,
        g: &KernelGrid,
        args: &mut [KernelArg<'_>],
    ) -> Result<()> {
        let p = self.program.ir();
        let open = self.program.open_inputs();
        let mut slots: Vec<Slot> = (0..p.params.len()).map(|_| Slot::Missing).collect();
        for (i, c) in self.program.captured_uniforms() {
            slots[i] = Slot::Value(c);
        }
        for (&i, a) in open.iter().zip(args.iter()) {
            slots[i] = match &a.0 {
                Karg::Value(c) => Slot::Value(*c),
                Karg::Array(_) if p.params[i].kind == ParamKind::Buffer => {
                    return Err(self.buffer_passed_as_array(i))
                }
                Karg::Array(d) => {
                    let v = d.contiguous_view()?;
                    let h = match &v.source {
                        crate::array::Source::Stored(s) => s.host()?,
                        crate::array::Source::Grid => unreachable!("made contiguous"),
                    };
                    Slot::Array(h, v.offset, v.shape.to_vec())
                }
                Karg::Buffer(_) => Slot::Missing,
                Karg::Scratch(_) => return Err(self.scratch_off_cuda(i)),
            };
        }
        if let Some(i) = (0..slots.len())
            .find(|&i| matches!(slots[i], Slot::Missing) && p.params[i].kind != ParamKind::Buffer)
        {
            return Err(Error::argument(format!(
                "kernel @{}: parameter `{}` has no argument",
                self.name(),
                p.param_name(i)
            )));
        }
        // Buffers last, once nothing else can fail before the launch. In place when the
        // storage is the array's alone and nothing can stop the launch half way (no time
        // budget); else a copy, kept only if the launch succeeds.
        let mut taken = vec![false; slots.len()];
        for (&i, a) in open.iter().zip(args.iter_mut()) {
            if let Karg::Buffer(d) = &mut a.0 {
                let own = if cpu.timeout().is_none() {
                    d.take_unique_host()
                } else {
                    None
                };
                taken[i] = own.is_some();
                let h = match own {
                    Some(h) => h,
                    None => d.to_host_buffer()?,
                };
                slots[i] = Slot::Buffer(h, d.shape.to_vec());
            }
        }
        let mut kargs: Vec<weft_runtime::KernelBuf> = slots
            .iter_mut()
            .map(|s| match s {
                Slot::Value(c) => weft_runtime::KernelBuf::Value(*c),
                Slot::Array(h, offset, shape) => weft_runtime::KernelBuf::Array {
                    buf: h,
                    offset: *offset,
                    shape,
                },
                Slot::Buffer(h, shape) => weft_runtime::KernelBuf::Buffer { buf: h, shape },
                Slot::Missing => unreachable!("checked above"),
            })
            .collect();
        let r = cpu.run_kernel_buffers(self.program.module(), self.name(), &mut kargs, g);
        drop(kargs);
        for (&i, a) in open.iter().zip(args.iter_mut()) {
            if let Karg::Buffer(d) = &mut a.0 {
                // A buffer taken in place goes back either way: a failed launch failed before
                // running (nothing could stop it half way), so its contents are unchanged.
                if r.is_ok() || taken[i] {
                    if let Slot::Buffer(h, shape) = std::mem::replace(&mut slots[i], Slot::Missing)
                    {
                        let b = d.boundary;
                        **d = ArrayData::stored(Storage::from_host(h), shape);
                        d.boundary = b;
                    }
                }
            }
        }
        r?;
        Ok(())
    }
}

/// What a GPU kernel launch passes for one parameter ([`Kernel::launch_cuda`]).
enum GpuSlot {
    Missing,
    Value(Const),
    /// A read-only array resident on the GPU: storage, first element, shape.
    Array(weft_runtime::CudaBuffer, usize, Vec<usize>),
    /// A device copy of a buffer's contents, written in place; it becomes the buffer's
    /// storage once the launch is queued.
    Buffer(weft_runtime::CudaBuffer, Vec<usize>),
    /// The buffer's own device memory, written in place (`ArrayData::unique_cuda`): the
    /// array already holds it.
    InPlace(weft_runtime::CudaBuffer, Vec<usize>),
}

impl Kernel {
    /// [`Kernel::launch_on`] a GPU without host copies (issue 21): read-only arrays are
    /// passed resident (uploaded once if they are not), each buffer as a device-to-device
    /// copy of its contents that the kernel writes and that becomes the buffer's storage
    /// (storage shared with other arrays is never written). Queued, not waited for.
    fn launch_cuda(
        &self,
        gpu: &weft_runtime::CudaDevice,
        g: &KernelGrid,
        args: &mut [KernelArg<'_>],
    ) -> Result<()> {
        let p = self.program.ir();
        let open = self.program.open_inputs();
        let resident = |d: &ArrayData| -> Result<(weft_runtime::CudaBuffer, ArrayData)> {
            let v = d.contiguous_view()?;
            let b = match &v.source {
                crate::array::Source::Stored(s) => s.cuda(gpu)?,
                crate::array::Source::Grid => unreachable!("made contiguous"),
            };
            Ok((b, v))
        };
        let mut slots: Vec<GpuSlot> = (0..p.params.len()).map(|_| GpuSlot::Missing).collect();
        for (&i, a) in open.iter().zip(args.iter_mut()) {
            slots[i] = match &mut a.0 {
                Karg::Value(c) => GpuSlot::Value(*c),
                Karg::Array(_) if p.params[i].kind == ParamKind::Buffer => {
                    return Err(self.buffer_passed_as_array(i))
                }
                Karg::Array(d) => {
                    let (b, v) = resident(d)?;
                    GpuSlot::Array(b, v.offset, v.shape.to_vec())
                }
                // In place when the array alone holds its device memory (CUDA has no
                // watchdog to stop a launch half way); else a copy, kept on success.
                Karg::Scratch(b) => GpuSlot::InPlace(b.clone(), vec![b.len()]),
                Karg::Buffer(d) => match d.unique_cuda(gpu.info().ordinal) {
                    Some(b) => GpuSlot::InPlace(b, d.shape.to_vec()),
                    None => {
                        let (b, v) = resident(d)?;
                        GpuSlot::Buffer(gpu.copy_buffer(&b, v.offset, v.len())?, v.shape.to_vec())
                    }
                },
            };
        }
        for (i, c) in self.program.captured_uniforms() {
            slots[i] = GpuSlot::Value(c);
        }
        let kargs = slots
            .iter()
            .enumerate()
            .map(|(i, s)| match s {
                GpuSlot::Value(c) => Ok(weft_runtime::CudaKernelArg::Value(*c)),
                GpuSlot::Array(b, offset, shape) => Ok(weft_runtime::CudaKernelArg::Array {
                    buf: b,
                    offset: *offset,
                    shape,
                }),
                GpuSlot::Buffer(b, shape) | GpuSlot::InPlace(b, shape) => {
                    Ok(weft_runtime::CudaKernelArg::Buffer { buf: b, shape })
                }
                GpuSlot::Missing => Err(Error::argument(format!(
                    "kernel @{}: parameter `{}` has no argument",
                    self.name(),
                    p.param_name(i)
                ))),
            })
            .collect::<Result<Vec<_>>>()?;
        gpu.run_kernel_buffers_shared(self.program.module_arc(), self.name(), &kargs, g)?;
        drop(kargs);
        for (&i, a) in open.iter().zip(args.iter_mut()) {
            if let Karg::Buffer(d) = &mut a.0 {
                if let GpuSlot::Buffer(b, shape) =
                    std::mem::replace(&mut slots[i], GpuSlot::Missing)
                {
                    **d = ArrayData::stored(
                        Storage::from_resident(crate::array::Resident::Cuda(b)),
                        shape,
                    );
                }
            }
        }
        Ok(())
    }
}

/// One argument of [`Kernel::launch`]: a uniform value, a read-only array or a buffer
/// (read and written in place).
pub struct KernelArg<'a>(Karg<'a>);

enum Karg<'a> {
    Value(Const),
    Array(ArrayData),
    Buffer(&'a mut ArrayData),
    /// Device scratch the runtime keeps between launches ([`CudaDevice::with_scratch_pair`]),
    /// written in place though other handles share it (CUDA devices only).
    ///
    /// [`CudaDevice::with_scratch_pair`]: weft_runtime::CudaDevice::with_scratch_pair
    Scratch(weft_runtime::CudaBuffer),
}

impl<'a> KernelArg<'a> {
    /// A uniform value.
    pub fn value<S: Scalar>(x: S) -> KernelArg<'static> {
        KernelArg(Karg::Value(x.to_const()))
    }

    /// A constant (any scalar or tuple type) for a uniform parameter.
    pub fn constant(c: Const) -> KernelArg<'static> {
        KernelArg(Karg::Value(c))
    }

    /// A read-only array (for an [`InArray`](super::InArray) parameter; O(1), the array is shared).
    pub fn array<const D: usize, T: Elem>(a: &Array<D, T>) -> KernelArg<'static> {
        KernelArg(Karg::Array(a.data.clone()))
    }

    /// A buffer (for a [`Buffer`] parameter): the kernel's stores and atomics land in `a`.
    pub fn buffer<const D: usize, T: Elem>(a: &'a mut Array<D, T>) -> KernelArg<'a> {
        KernelArg(Karg::Buffer(&mut a.data))
    }

    /// [`KernelArg::array`] of untyped array data (the library's generated kernels).
    pub(crate) fn array_data(d: &ArrayData) -> KernelArg<'static> {
        KernelArg(Karg::Array(d.clone()))
    }

    /// [`KernelArg::buffer`] of untyped array data.
    pub(crate) fn buffer_data(d: &'a mut ArrayData) -> KernelArg<'a> {
        KernelArg(Karg::Buffer(d))
    }

    /// A buffer parameter's device scratch, written in place (CUDA launches only; any other
    /// device answers an error).
    pub(crate) fn scratch(b: &weft_runtime::CudaBuffer) -> KernelArg<'static> {
        KernelArg(Karg::Scratch(b.clone()))
    }
}

/// An array a kernel may write: a buffer parameter or a shared array of the recording.
struct Mem {
    ctx: u64,
    value: weft_ir::Value,
}

impl Mem {
    const INERT: Mem = Mem {
        ctx: 0,
        value: weft_ir::Value(0),
    };

    /// The array's value in recording `rec` (or the error to record).
    fn value_in(&self, rec: &Top, what: &str) -> Result<weft_ir::Value> {
        if self.ctx == 0 {
            return Err(Error::record(format!(
                "this {what} was not declared while recording a kernel (or its declaration failed)"
            )));
        }
        if self.ctx != rec.id {
            return Err(Error::record(format!(
                "this {what} belongs to another kernel's recording"
            )));
        }
        Ok(self.value)
    }

    /// Records `opcode` on the array and `operands`; its result has type `rty` (`None`:
    /// no result). Outside recording: a poisoned value (nothing for a store).
    #[track_caller]
    fn record(&self, what: &str, opcode: Opcode, operands: &[Raw], rty: Option<Type>) -> Raw {
        let loc = Location::caller();
        let Some(mut rec) = Top::take() else {
            return Raw::poison(format!("a {what} is used outside Kernel::record"), loc);
        };
        let fail = |rec: &mut Top, e: Error| {
            rec.fail(e);
            match rty {
                Some(t) => rec.dummy(t),
                None => Raw::imm(Const::bool(false)),
            }
        };
        let arr = match self.value_in(&rec, what) {
            Ok(a) => a,
            Err(e) => return fail(&mut rec, e),
        };
        let mut vals = vec![arr];
        for o in operands {
            match rec.value_of(o) {
                Ok(v) => vals.push(v),
                Err(e) => return fail(&mut rec, e),
            }
        }
        match rty {
            None => {
                rec.b().effect(opcode, &vals);
                Raw::imm(Const::bool(false))
            }
            Some(t) => {
                let v = rec.b().op_typed(opcode, &vals, t);
                rec.new_raw(v)
            }
        }
    }
}

/// The element type a memory op gives.
fn elem_ty<T: Scalar, const N: usize>() -> Option<Type> {
    Some(Value::<T, N>::ir_type())
}

/// Read, store, extent and atomics of a writable array.
macro_rules! writable_array {
    ($name:ident, $what:literal) => {
        impl<const D: usize, T: Scalar, const N: usize> $name<D, Value<T, N>> {
            /// The element at `coords` (one `i32` per axis), under the array's boundary
            /// mode (the IR's `read`).
            #[track_caller]
            pub fn read(&self, coords: impl AsValue<i32, D>) -> Value<T, N> {
                let c = coords.into_operand();
                Value::from_raw(
                    self.mem
                        .record($what, Opcode::Read, &[c], elem_ty::<T, N>()),
                )
            }

            /// The array's size on each axis as `i32` lanes (the IR's `extent`).
            #[track_caller]
            pub fn extent(&self) -> Value<i32, D> {
                Value::from_raw(self.mem.record(
                    $what,
                    Opcode::Extent,
                    &[],
                    Some(Value::<i32, D>::ir_type()),
                ))
            }

            /// Writes `v` at `coords`; a store outside the array does nothing (the IR's
            /// `store`).
            #[track_caller]
            pub fn store(&self, coords: impl AsValue<i32, D>, v: impl AsValue<T, N>) {
                let ops = [coords.into_operand(), v.into_operand()];
                self.mem.record($what, Opcode::Store, &ops, None);
            }

            /// Atomically adds `v` at `coords`; gives the old element (0 outside the
            /// array). Scalar `i32`, `u32`, `i64`, `u64`, `f32` or `f64` elements.
            #[track_caller]
            pub fn atomic_add(
                &self,
                coords: impl AsValue<i32, D>,
                v: impl AsValue<T, N>,
            ) -> Value<T, N> {
                self.atomic(Opcode::AtomicAdd, coords, v)
            }

            /// Atomic minimum, as [`Self::atomic_add`] (integer elements).
            #[track_caller]
            pub fn atomic_min(
                &self,
                coords: impl AsValue<i32, D>,
                v: impl AsValue<T, N>,
            ) -> Value<T, N> {
                self.atomic(Opcode::AtomicMin, coords, v)
            }

            /// Atomic maximum, as [`Self::atomic_add`] (integer elements).
            #[track_caller]
            pub fn atomic_max(
                &self,
                coords: impl AsValue<i32, D>,
                v: impl AsValue<T, N>,
            ) -> Value<T, N> {
                self.atomic(Opcode::AtomicMax, coords, v)
            }

            /// Atomic exchange: stores `v`, gives the old element.
            #[track_caller]
            pub fn atomic_exchange(
                &self,
                coords: impl AsValue<i32, D>,
                v: impl AsValue<T, N>,
            ) -> Value<T, N> {
                self.atomic(Opcode::AtomicXchg, coords, v)
            }

            /// Atomic compare-and-exchange: stores `v` where the element equals
            /// `expected`; gives the old element either way.
            #[track_caller]
            pub fn atomic_compare_exchange(
                &self,
                coords: impl AsValue<i32, D>,
                expected: impl AsValue<T, N>,
                v: impl AsValue<T, N>,
            ) -> Value<T, N> {
                let ops = [
                    coords.into_operand(),
                    expected.into_operand(),
                    v.into_operand(),
                ];
                Value::from_raw(
                    self.mem
                        .record($what, Opcode::AtomicCas, &ops, elem_ty::<T, N>()),
                )
            }

            #[track_caller]
            fn atomic(
                &self,
                op: Opcode,
                coords: impl AsValue<i32, D>,
                v: impl AsValue<T, N>,
            ) -> Value<T, N> {
                let ops = [coords.into_operand(), v.into_operand()];
                Value::from_raw(self.mem.record($what, op, &ops, elem_ty::<T, N>()))
            }
        }
    };
}

/// A buffer parameter of a kernel: a global array of `D` axes (1 to 3) of `V`, read and
/// written in place ([`KernelArg::buffer`] at launch). Reads use the clamp boundary mode
/// unless [`Buffer::with_boundary`] declares another.
pub struct Buffer<const D: usize, V> {
    mem: Mem,
    _v: PhantomData<V>,
}

impl<const D: usize, V: ValueType> Buffer<D, V> {
    /// A new buffer parameter named `b{k}` (k = its position).
    #[track_caller]
    pub fn new() -> Self {
        Self::declare(None, Boundary::Clamp)
    }

    /// A new buffer parameter named `name`.
    #[track_caller]
    pub fn named(name: &str) -> Self {
        Self::declare(Some(name), Boundary::Clamp)
    }

    /// A new buffer parameter named `name` whose reads use boundary mode `b`.
    #[track_caller]
    pub fn with_boundary(name: &str, b: Boundary) -> Self {
        Self::declare(Some(name), b)
    }

    #[track_caller]
    fn declare(name: Option<&str>, boundary: Boundary) -> Self {
        let mem = match Top::take() {
            None => Mem::INERT,
            Some(mut rec) => match Type::array(D as u8, V::ir_type(), boundary) {
                None => {
                    rec.fail(Error::record(format!("buffers have 1 to 3 axes, not {D}")));
                    Mem::INERT
                }
                Some(ty) => {
                    match super::interface::add_param(&mut rec, ParamKind::Buffer, name, "b", ty) {
                        Ok(value) => Mem { ctx: rec.id, value },
                        Err(e) => {
                            rec.fail(e);
                            Mem::INERT
                        }
                    }
                }
            },
        };
        Buffer {
            mem,
            _v: PhantomData,
        }
    }
}

impl<const D: usize, V: ValueType> Default for Buffer<D, V> {
    #[track_caller]
    fn default() -> Self {
        Self::new()
    }
}

writable_array!(Buffer, "buffer");

/// An array shared by the threads of a block (a work-group's local memory; MC#'s
/// `Shared1D`/`Shared2D`, CUDA's `__shared__`): `D` axes of constant sizes, at most 48 KiB in
/// all, declared at the kernel's top level. Its contents are undefined when a block starts.
pub struct Shared<const D: usize, V> {
    mem: Mem,
    _v: PhantomData<V>,
}

/// A one-axis [`Shared`] array (MC#'s `Shared1D`).
pub type Shared1D<V> = Shared<1, V>;
/// A two-axis [`Shared`] array (MC#'s `Shared2D`).
pub type Shared2D<V> = Shared<2, V>;

impl<const D: usize, V: ValueType> Shared<D, V> {
    /// A new shared array of `sizes` elements per axis (outermost first).
    #[track_caller]
    pub fn new(sizes: [usize; D]) -> Self {
        let mem = match Top::take() {
            None => Mem::INERT,
            Some(mut rec) => match Type::array(D as u8, V::ir_type(), Boundary::Clamp) {
                None => {
                    rec.fail(Error::record(format!(
                        "shared arrays have 1 to 3 axes, not {D}"
                    )));
                    Mem::INERT
                }
                Some(ty) => {
                    let dims: Vec<weft_ir::Value> = sizes
                        .iter()
                        .map(|&n| {
                            let n = i32::try_from(n).unwrap_or(i32::MAX);
                            rec.b().constant(Const::i32(n))
                        })
                        .collect();
                    let value = rec.b().op_typed(Opcode::Shared, &dims, ty);
                    Mem { ctx: rec.id, value }
                }
            },
        };
        Shared {
            mem,
            _v: PhantomData,
        }
    }
}

writable_array!(Shared, "shared array");

/// Records a kernel builtin of type `ty`.
#[track_caller]
fn builtin(opcode: Opcode, ty: Type, axes: usize) -> Raw {
    let loc = Location::caller();
    let Some(mut rec) = Top::take() else {
        return Raw::poison(
            format!(
                "`{}` has no value outside Kernel::record",
                opcode.mnemonic()
            ),
            loc,
        );
    };
    if !(1..=3).contains(&axes) {
        rec.fail(Error::record(format!(
            "kernel ids have 1 to 3 axes, not {axes}"
        )));
        return rec.dummy(ty);
    }
    let v = rec.b().op_typed(opcode, &[], ty);
    rec.new_raw(v)
}

/// This thread's index in its block on `D` axes, x first (MC#'s `ThreadIndex`, CUDA's
/// `threadIdx`, OpenCL's `get_local_id`; the IR's `local_id`).
#[track_caller]
pub fn thread_index<const D: usize>() -> Value<i32, D> {
    Value::from_raw(builtin(Opcode::LocalId, Value::<i32, D>::ir_type(), D))
}

/// This block's index in the grid on `D` axes (MC#'s `BlockIndex`, CUDA's `blockIdx`,
/// OpenCL's `get_group_id`; the IR's `group_id`).
#[track_caller]
pub fn block_index<const D: usize>() -> Value<i32, D> {
    Value::from_raw(builtin(Opcode::GroupId, Value::<i32, D>::ir_type(), D))
}

/// Threads per block on `D` axes (CUDA's `blockDim`, OpenCL's `get_local_size`; the IR's
/// `local_size`).
#[track_caller]
pub fn block_dim<const D: usize>() -> Value<i32, D> {
    Value::from_raw(builtin(Opcode::LocalSize, Value::<i32, D>::ir_type(), D))
}

/// Blocks in the grid on `D` axes (CUDA's `gridDim`, OpenCL's `get_num_groups`; the IR's
/// `num_groups`).
#[track_caller]
pub fn grid_dim<const D: usize>() -> Value<i32, D> {
    Value::from_raw(builtin(Opcode::NumGroups, Value::<i32, D>::ir_type(), D))
}

/// A cycle counter (MC#'s `GetClock`; `%clock64` on the GPU, the CPU's time-stamp counter):
/// differences time code inside a kernel; values differ between runs and devices.
#[track_caller]
pub fn clock() -> Value<u64, 1> {
    Value::from_raw(builtin(Opcode::Clock, Value::<u64, 1>::ir_type(), 1))
}

/// Waits until every thread of the block has reached this point, making their stores to
/// [`Shared`] arrays and buffers visible to each other (MC#'s `SyncThreads`, CUDA's
/// `__syncthreads`, OpenCL's `barrier`; the IR's `barrier`). Every thread of a block must
/// reach the same `sync_threads` calls: one under control flow that differs between the
/// threads is a verification error.
#[track_caller]
pub fn sync_threads() {
    let Some(mut rec) = Top::take() else {
        return;
    };
    rec.b().effect(Opcode::Barrier, &[]);
}
