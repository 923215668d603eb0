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
