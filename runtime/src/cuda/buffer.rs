//! Device memory a user holds: [`CudaBuffer`] (arrays in the plane layout of
//! `HostBuffer`), the arguments of launches over buffers and those launches.

use super::*;

/// `len` elements in device memory, in the plane layout of [`HostBuffer`] (same stride), on
/// one [`CudaDevice`]. Cheap to clone (the allocation is shared); freed when the last clone
/// and every launch using it are gone.
#[derive(Clone)]
pub struct CudaBuffer {
    pub(super) dev: Arc<Inner>,
    pub(super) buf: Arc<DeviceBuffer>,
    pub(super) elem: Type,
    pub(super) len: usize,
    pub(super) stride: usize,
}

impl fmt::Debug for CudaBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "CudaBuffer({} x {} on {})",
            self.len, self.elem, self.dev.info.name
        )
    }
}

impl CudaBuffer {
    /// Element type.
    pub fn elem(&self) -> Type {
        self.elem
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the buffer holds no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Tuple lanes per element (planes).
    pub fn lanes(&self) -> usize {
        scalar_lanes(self.elem).1
    }

    /// Bytes of one lane in storage (4 or 8).
    pub fn lane_bytes(&self) -> usize {
        weft_ir::abi::storage_bytes(scalar_lanes(self.elem).0)
    }

    /// Whether this handle is the only one to its device memory (no clone shares it), so a
    /// kernel may write it in place without another holder seeing the change.
    pub fn is_unique(&self) -> bool {
        Arc::strong_count(&self.buf) == 1
    }

    /// The ordinal of the device holding it.
    pub fn ordinal(&self) -> usize {
        self.dev.info.ordinal
    }

    /// Copies elements `start .. start + n` to a new host buffer of `n` elements (one
    /// transfer per plane; waits for queued work first).
    ///
    /// # Errors
    /// The range outside the buffer; `cuMemcpyDtoHAsync` or `cuStreamSynchronize` failing.
    pub fn download_range(&self, start: usize, n: usize) -> Result<HostBuffer, RuntimeError> {
        if start.checked_add(n).is_none_or(|e| e > self.len) {
            return Err(CudaError::Driver {
                call: "cuMemcpyDtoHAsync",
                code: "CUDA_ERROR_INVALID_VALUE".into(),
                description: format!(
                    "elements {start}..{} outside a buffer of {}",
                    start.saturating_add(n),
                    self.len
                ),
                log: None,
            }
            .into());
        }
        let d = &self.dev;
        let b = self.lane_bytes();
        let mut h = HostBuffer::for_output(self.elem, n);
        guard("cuMemcpyDtoHAsync", || {
            d.bind()?;
            for l in 0..self.lanes() {
                let from = (l * self.stride + start) * b;
                d.download_into(&self.buf, from..from + n * b, &mut h.plane_mut(l)[..n * b])?;
            }
            Ok(())
        })?;
        Ok(h)
    }

    /// Copies the buffer to the host (waits for queued work first).
    ///
    /// # Errors
    /// `cuMemcpyDtoHAsync` or `cuStreamSynchronize` failing.
    pub fn download(&self) -> Result<HostBuffer, RuntimeError> {
        let d = &self.dev;
        let bytes = guard("cuMemcpyDtoHAsync", || {
            d.bind()?;
            d.download(&self.buf)
        })?;
        let mut h = HostBuffer::for_output(self.elem, self.len);
        h.bytes_mut().copy_from_slice(&bytes);
        h.zero_padding();
        Ok(h)
    }
}

/// An argument of a launch over device buffers ([`CudaDevice::launch_buffers`]).
#[derive(Clone, Debug)]
pub enum CudaArg<'a> {
    /// An array, for a varying or an array parameter: elements `offset ..` of `buf`, as many
    /// as `shape` holds, row-major.
    Array {
        /// The storage.
        buf: &'a CudaBuffer,
        /// First element.
        offset: usize,
        /// Extent of each axis, outermost first.
        shape: &'a [usize],
    },
    /// One value, for a uniform parameter.
    Uniform(Const),
}

impl CudaArg<'_> {
    pub(super) fn desc(&self) -> ArgDesc<'_> {
        match self {
            CudaArg::Array { buf, shape, .. } => ArgDesc::Array {
                elem: buf.elem,
                shape,
            },
            CudaArg::Uniform(c) => ArgDesc::Uniform(*c),
        }
    }
}

/// A prepared launch over device buffers: run it (or queue it) as often as wanted, then take
/// the output buffers.
pub struct CudaBufferLaunch {
    pub(super) launch: CudaLaunch,
    pub(super) outs: Vec<CudaBuffer>,
}

impl CudaBufferLaunch {
    /// The underlying launch (geometry, kernel, timing with [`CudaLaunch::time_runs`]).
    pub fn launch(&mut self) -> &mut CudaLaunch {
        &mut self.launch
    }

    /// Runs the kernel and waits for it.
    ///
    /// # Errors
    /// As [`CudaLaunch::run`].
    pub fn run(&mut self) -> Result<(), RuntimeError> {
        self.launch.run()
    }

    /// Queues the kernel on the device's stream without waiting (a later download or run
    /// waits for it).
    ///
    /// # Errors
    /// `cuLaunchKernel` failing.
    pub fn enqueue(&mut self) -> Result<(), RuntimeError> {
        if self.launch.n > 0 {
            guard("cuLaunchKernel", || self.launch.enqueue())?;
        }
        self.launch.ran = true;
        Ok(())
    }

    /// The output buffers.
    pub fn into_outputs(self) -> Vec<CudaBuffer> {
        self.outs
    }
}

/// An argument of a kernel launch over device buffers ([`CudaDevice::run_kernel_buffers`]).
#[derive(Clone, Debug)]
pub enum CudaKernelArg<'a> {
    /// One value, for a uniform parameter.
    Value(Const),
    /// A read-only array: elements `offset ..` of `buf`, as many as `shape` holds.
    Array {
        /// The storage.
        buf: &'a CudaBuffer,
        /// First element.
        offset: usize,
        /// Extent of each axis, outermost first.
        shape: &'a [usize],
    },
    /// A buffer the kernel writes in place: the first elements of `buf`, as many as `shape`
    /// holds.
    Buffer {
        /// The storage.
        buf: &'a CudaBuffer,
        /// Extent of each axis, outermost first.
        shape: &'a [usize],
    },
}

impl CudaKernelArg<'_> {
    fn desc(&self) -> ArgDesc<'_> {
        match self {
            CudaKernelArg::Value(c) => ArgDesc::Uniform(*c),
            CudaKernelArg::Array { buf, shape, .. } | CudaKernelArg::Buffer { buf, shape } => {
                ArgDesc::Array {
                    elem: buf.elem,
                    shape,
                }
            }
        }
    }
}

impl CudaDevice {
    /// A new buffer holding elements `offset .. offset + n` of `src` (one device-to-device
    /// copy per plane, queued on the stream).
    ///
    /// # Errors
    /// A range outside `src`, a buffer of another device, or the driver failing.
    pub fn copy_buffer(
        &self,
        src: &CudaBuffer,
        offset: usize,
        n: usize,
    ) -> Result<CudaBuffer, RuntimeError> {
        if !src.dev.same_gpu(&self.inner) || offset.checked_add(n).is_none_or(|e| e > src.len) {
            return Err(RunError::Launch {
                program: "copy".into(),
                message: "copy_buffer: range outside the buffer, or another device".into(),
            }
            .into());
        }
        let i = &self.inner;
        let stride = HostBuffer::stride_for(n);
        let lb = src.lane_bytes();
        let buf = guard("cuMemcpyDtoDAsync", || {
            i.bind()?;
            let mut b = i.alloc(HostBuffer::bytes_for(src.elem, n))?;
            for l in 0..src.lanes() {
                let from = (l * src.stride + offset) * lb;
                let to = l * stride * lb;
                let s = src.buf.slice.slice(from..from + n * lb);
                let mut d = b.slice.slice_mut(to..to + n * lb);
                i.stream
                    .memcpy_dtod(&s, &mut d)
                    .map_err(|e| drv("cuMemcpyDtoDAsync", e))?;
            }
            Ok(b)
        })?;
        Ok(CudaBuffer {
            dev: i.clone(),
            buf: Arc::new(buf),
            elem: src.elem,
            len: n,
            stride,
        })
    }

    /// Runs kernel `name` of `m` (DESIGN §2, kernel mode) over `grid` on device buffers
    /// without copying them (the `weft` library's arrays resident on this GPU): arrays are
    /// read where they are, buffers written in place. Queued on the stream, not waited for;
    /// faults surface at the next download.
    ///
    /// # Errors
    /// As [`CudaDevice::run_kernel`]; also an element range outside its buffer, a buffer of
    /// another device, or an array passed for a buffer parameter.
    pub fn run_kernel_buffers(
        &self,
        m: &Module,
        name: &str,
        args: &[CudaKernelArg<'_>],
        grid: &weft_ir::KernelGrid,
    ) -> Result<(), RuntimeError> {
        self.run_kernel_buffers_with(m, name, args, grid, || {
            self.kernel_with(m, name, self.config().fast_math)
        })
    }

    /// [`CudaDevice::run_kernel_buffers`] finding the compiled kernel by the module's `Arc`
    /// identity instead of a hash of its IR (the `weft` library's kernels, launched often).
    ///
    /// # Errors
    /// As [`CudaDevice::run_kernel_buffers`].
    pub fn run_kernel_buffers_shared(
        &self,
        m: &Arc<Module>,
        name: &str,
        args: &[CudaKernelArg<'_>],
        grid: &weft_ir::KernelGrid,
    ) -> Result<(), RuntimeError> {
        self.run_kernel_buffers_with(m, name, args, grid, || self.kernel_shared(m, name))
    }

    fn run_kernel_buffers_with(
        &self,
        m: &Module,
        name: &str,
        args: &[CudaKernelArg<'_>],
        grid: &weft_ir::KernelGrid,
        kernel: impl FnOnce() -> Result<Arc<super::CudaKernel>, RuntimeError>,
    ) -> Result<(), RuntimeError> {
        let p = m
            .get(name)
            .ok_or_else(|| RunError::UnknownProgram(name.to_string()))?;
        let descs: Vec<ArgDesc> = args.iter().map(CudaKernelArg::desc).collect();
        weft_ir::launch::check_kernel_args(p, &descs)?;
        for (k, (par, a)) in p.params.iter().zip(args).enumerate() {
            let bad = |message: &str| RunError::BadInput {
                program: p.name.clone(),
                param: p.param_name(k).to_string(),
                message: message.into(),
            };
            match a {
                CudaKernelArg::Value(_) => {}
                CudaKernelArg::Array { buf, .. } | CudaKernelArg::Buffer { buf, .. } => {
                    if !buf.dev.same_gpu(&self.inner) {
                        return Err(bad("lives on another device").into());
                    }
                }
            }
            if par.kind == ParamKind::Buffer && !matches!(a, CudaKernelArg::Buffer { .. }) {
                return Err(bad("is a buffer: pass it writable (CudaKernelArg::Buffer)").into());
            }
        }
        crate::plan::check_ranges(
            p,
            args.iter().map(|a| match a {
                CudaKernelArg::Value(_) => None,
                CudaKernelArg::Array { buf, offset, shape } => {
                    Some((*offset, shape.iter().product(), buf.len))
                }
                CudaKernelArg::Buffer { buf, shape } => Some((0, shape.iter().product(), buf.len)),
            }),
        )?;
        let kernel = kernel()?;
        kernel.check_block(name, grid)?;
        let mut ctx = Context::new(&kernel.layout);
        for (k, a) in args.iter().enumerate() {
            match a {
                CudaKernelArg::Value(c) => ctx.uniform(k, c),
                CudaKernelArg::Array { buf, offset, shape } => {
                    let b = buf.lane_bytes();
                    ctx.planes(
                        k,
                        (0..buf.lanes())
                            .map(|l| buf.buf.ptr + ((l * buf.stride + offset) * b) as u64),
                    );
                    ctx.extents(k, buf.lanes(), shape);
                }
                CudaKernelArg::Buffer { buf, shape } => {
                    let b = buf.lane_bytes();
                    ctx.planes(
                        k,
                        (0..buf.lanes()).map(|l| buf.buf.ptr + (l * buf.stride * b) as u64),
                    );
                    ctx.extents(k, buf.lanes(), shape);
                }
            }
        }
        ctx.grid(grid.groups);
        let words = ctx.words;
        let launch = CudaKernelLaunch {
            dev: self.inner.clone(),
            kernel,
            words,
            bufs: Vec::new(),
            grid: *grid,
        };
        // The buffers may be dropped once the launch is queued: their memory is freed in
        // stream order, after the kernel.
        guard("cuLaunchKernel", || launch.enqueue())?;
        Ok(())
    }
}
