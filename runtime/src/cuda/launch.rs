//! Prepared launches on a CUDA device: map programs ([`CudaLaunch`]) and kernels
//! ([`CudaKernelLaunch`]).

use super::*;

/// A prepared CUDA launch: kernel, resident inputs, device outputs and geometry (see
/// [`CudaDevice::launch`]). Outputs stay on the device until [`CudaLaunch::outputs`].
pub struct CudaLaunch {
    pub(super) dev: Arc<Inner>,
    pub(super) kernel: Arc<CudaKernel>,
    pub(super) words: Vec<u64>,
    pub(super) _inputs: Vec<Arc<DeviceBuffer>>,
    pub(super) outs: Vec<(Type, Option<DeviceBuffer>)>,
    pub(super) shape: Vec<usize>,
    pub(super) n: usize,
    pub(super) block: u32,
    pub(super) grid: u32,
    pub(super) ran: bool,
    pub(super) host: Option<Vec<HostArray>>,
}

impl CudaLaunch {
    /// Number of elements in the launch.
    pub fn len(&self) -> usize {
        self.n
    }

    /// True for a launch of no elements (which never launches a kernel).
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Threads per block.
    pub fn block(&self) -> u32 {
        self.block
    }

    /// Blocks in the grid.
    pub fn grid(&self) -> u32 {
        self.grid
    }

    /// The kernel launched.
    pub fn kernel(&self) -> &Arc<CudaKernel> {
        &self.kernel
    }

    /// The launch shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Queues one kernel launch over every element (no synchronisation).
    pub(super) fn enqueue(&self) -> Result<(), CudaError> {
        let d = &self.dev;
        d.bind()?;
        let mut begin: i64 = 0;
        let mut end: i64 = self.n as i64;
        // The driver only reads through the parameter pointers (it copies the values), so
        // they point at the launch's own words: no copy of them per launch.
        let mut params: smallvec::SmallVec<[*mut c_void; 64]> = self
            .words
            .iter()
            .map(|w| (w as *const u64).cast_mut().cast::<c_void>())
            .collect();
        params.push((&mut begin as *mut i64).cast());
        params.push((&mut end as *mut i64).cast());
        // SAFETY: the kernel takes `layout.words` u64 values then two i64 (the PTX ABI); the
        // parameter values are copied by the call and never written through the pointers;
        // every plane pointer addresses a live buffer (held by `self`) of at least `n`
        // elements (arrays: their length, at least 1).
        unsafe {
            result::launch_kernel(
                self.kernel.module.func,
                (self.grid, 1, 1),
                (self.block, 1, 1),
                0,
                d.stream.cu_stream(),
                &mut params,
            )
        }
        .map_err(|e| drv("cuLaunchKernel", e))
    }

    /// Runs the kernel over every element and waits for it (nothing for an empty launch).
    /// Outputs read before are read again afterwards.
    ///
    /// # Errors
    /// [`RuntimeError::Cuda`]: `cuLaunchKernel`, or `cuStreamSynchronize` for faults during
    /// the kernel (after which the context is unusable, as CUDA errors are sticky).
    pub fn run(&mut self) -> Result<(), RuntimeError> {
        self.host = None;
        if self.n > 0 {
            guard("cuLaunchKernel", || {
                self.enqueue()?;
                self.dev.sync()
            })?;
        }
        self.ran = true;
        Ok(())
    }

    /// Launches the kernel `reps` times back to back and returns the total GPU time between
    /// CUDA events recorded before the first and after the last launch (zero for an empty
    /// launch or no reps).
    ///
    /// # Errors
    /// As [`CudaLaunch::run`], or the event calls failing.
    pub fn time_runs(&mut self, reps: u32) -> Result<Duration, RuntimeError> {
        if self.n == 0 || reps == 0 {
            self.ran |= reps > 0;
            return Ok(Duration::ZERO);
        }
        self.host = None;
        let d = self.dev.clone();
        let t = d.time_events(reps, || self.enqueue())?;
        self.ran = true;
        Ok(t)
    }

    /// The outputs as host arrays of the launch shape, running the launch first if it has
    /// not run. The first call after a run downloads them; later calls return the host copy
    /// without transferring again.
    ///
    /// # Errors
    /// As [`CudaLaunch::run`], or `cuMemcpyDtoHAsync` failing.
    pub fn outputs(&mut self) -> Result<Vec<HostArray>, RuntimeError> {
        if let Some(h) = &self.host {
            return Ok(h.clone());
        }
        if !self.ran {
            self.run()?;
        }
        let (d, n, shape) = (&self.dev, self.n, &self.shape);
        let host = guard("cuMemcpyDtoHAsync", || {
            self.outs
                .iter()
                .map(|(ty, buf)| match buf {
                    None => Ok(HostArray {
                        elem: *ty,
                        shape: shape.clone(),
                        data: Vec::new(),
                    }),
                    Some(b) => {
                        let bytes = d.download(b)?;
                        let (s, _) = scalar_lanes(*ty);
                        let planes: Vec<&[u8]> = bytes.chunks_exact(plane_bytes(s, n)).collect();
                        Ok(read_output(*ty, shape, n, &planes))
                    }
                })
                .collect::<Result<Vec<_>, CudaError>>()
        })?;
        self.host = Some(host.clone());
        Ok(host)
    }
}

/// A prepared kernel launch (see [`CudaDevice::prepare_kernel`]): the kernel, its context
/// words and its uploaded arrays.
pub struct CudaKernelLaunch {
    pub(super) dev: Arc<Inner>,
    pub(super) kernel: Arc<CudaKernel>,
    pub(super) words: Vec<u64>,
    pub(super) bufs: Vec<Option<DeviceBuffer>>,
    pub(super) grid: weft_ir::KernelGrid,
}

impl CudaKernelLaunch {
    /// Queues one launch (no synchronisation).
    pub(super) fn enqueue(&self) -> Result<(), CudaError> {
        let d = &self.dev;
        d.bind()?;
        let mut words = self.words.clone();
        let mut begin: i64 = 0;
        let mut end: i64 = 0;
        let mut params: Vec<*mut c_void> = words
            .iter_mut()
            .map(|w| (w as *mut u64).cast::<c_void>())
            .collect();
        params.push((&mut begin as *mut i64).cast());
        params.push((&mut end as *mut i64).cast());
        let [gx, gy, gz] = self.grid.groups;
        let [bx, by, bz] = self.grid.block;
        // SAFETY: the kernel takes `layout.words` u64 values then two i64 (the PTX ABI); every
        // plane pointer addresses a live buffer (held in `self.bufs`) of its array's elements;
        // stores and atomics are bounds-checked in the kernel.
        unsafe {
            result::launch_kernel(
                self.kernel.module.func,
                (gx, gy, gz),
                (bx, by, bz),
                0,
                d.stream.cu_stream(),
                &mut params,
            )
        }
        .map_err(|e| drv("cuLaunchKernel", e))
    }

    /// Launches the kernel once and waits for it.
    ///
    /// # Errors
    /// `cuLaunchKernel`, or `cuStreamSynchronize` for faults during the kernel.
    pub fn run(&mut self) -> Result<(), RuntimeError> {
        guard("cuLaunchKernel", || {
            self.enqueue()?;
            self.dev.sync()
        })?;
        Ok(())
    }

    /// Launches the kernel `reps` times back to back; the GPU time between CUDA events
    /// recorded around them.
    ///
    /// # Errors
    /// As [`CudaKernelLaunch::run`], or the event calls failing.
    pub fn time_runs(&mut self, reps: u32) -> Result<Duration, RuntimeError> {
        let d = self.dev.clone();
        Ok(d.time_events(reps, || self.enqueue())?)
    }

    /// The kernel launched.
    pub fn kernel(&self) -> &Arc<CudaKernel> {
        &self.kernel
    }
}
