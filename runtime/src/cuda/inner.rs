//! The device state's memory and module operations: allocation, uploads and downloads on the
//! stream, resident inputs, loading PTX modules, and launch geometry.

use super::*;

impl Inner {
    /// Whether `other` drives the same GPU. Devices opened on one GPU share its primary
    /// context and its legacy default stream, so a buffer of one is usable by the other,
    /// in stream order (a device group holding one GPU twice; `Device::cuda` called twice).
    pub(super) fn same_gpu(&self, other: &Inner) -> bool {
        self.info.ordinal == other.info.ordinal
    }

    pub(super) fn bind(&self) -> Result<(), CudaError> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| drv("cuCtxSetCurrent", e))
    }

    pub(super) fn sync(&self) -> Result<(), CudaError> {
        self.stream
            .synchronize()
            .map_err(|e| drv("cuStreamSynchronize", e))
    }

    pub(super) fn alloc(&self, bytes: usize) -> Result<DeviceBuffer, CudaError> {
        let slice = match self.pool.take(bytes) {
            Some(s) => s,
            // SAFETY (both): every caller writes or zeroes all bytes before a kernel reads them.
            None => match unsafe { self.stream.alloc::<u8>(bytes) } {
                Ok(s) => s,
                // Out of memory, perhaps because the pool holds it: free the pool (in stream
                // order, so this stream's next allocation can use it) and try once more.
                Err(_) if self.pool.held() > 0 => {
                    self.pool.clear();
                    unsafe { self.stream.alloc::<u8>(bytes) }.map_err(|e| drv("cuMemAlloc", e))?
                }
                Err(e) => return Err(drv("cuMemAlloc", e)),
            },
        };
        let ptr = slice.device_ptr(&self.stream).0;
        Ok(DeviceBuffer {
            slice: std::mem::ManuallyDrop::new(slice),
            ptr,
            pool: self.pool.clone(),
        })
    }

    pub(super) fn alloc_zeroed(&self, bytes: usize) -> Result<DeviceBuffer, CudaError> {
        let mut b = self.alloc(bytes)?;
        self.stream
            .memset_zeros(&mut *b.slice)
            .map_err(|e| drv("cuMemsetD8Async", e))?;
        Ok(b)
    }

    pub(super) fn upload(&self, host: &[u8]) -> Result<DeviceBuffer, CudaError> {
        let mut b = self.alloc(host.len())?;
        self.stream
            .memcpy_htod(host, &mut *b.slice)
            .map_err(|e| drv("cuMemcpyHtoDAsync", e))?;
        self.uploads.fetch_add(1, Ordering::Relaxed);
        self.upload_bytes
            .fetch_add(host.len() as u64, Ordering::Relaxed);
        Ok(b)
    }

    pub(super) fn download(&self, b: &DeviceBuffer) -> Result<Vec<u8>, CudaError> {
        let v = self
            .stream
            .clone_dtoh(&*b.slice)
            .map_err(|e| drv("cuMemcpyDtoHAsync", e))?;
        self.sync()?;
        self.downloads.fetch_add(1, Ordering::Relaxed);
        self.download_bytes
            .fetch_add(v.len() as u64, Ordering::Relaxed);
        Ok(v)
    }

    /// Copies bytes `range` of `b` into `dst` (waits for queued work).
    pub(super) fn download_into(
        &self,
        b: &DeviceBuffer,
        range: std::ops::Range<usize>,
        dst: &mut [u8],
    ) -> Result<(), CudaError> {
        let n = dst.len();
        self.stream
            .memcpy_dtoh(&b.slice.slice(range), dst)
            .map_err(|e| drv("cuMemcpyDtoHAsync", e))?;
        self.sync()?;
        self.downloads.fetch_add(1, Ordering::Relaxed);
        self.download_bytes.fetch_add(n as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Drops cached inputs whose array the host no longer holds (only the cache's clone is
    /// left, so no later launch can name them).
    pub(super) fn evict_dropped(&self) {
        lock(&self.resident).retain(|_, (a, _)| Arc::strong_count(a) > 1);
    }

    /// The device copy of `a` (all tuple lanes, plane after plane, at least one element
    /// each), uploaded on first use.
    pub(super) fn resident(&self, a: &Arc<HostArray>) -> Result<Arc<DeviceBuffer>, CudaError> {
        let key = Arc::as_ptr(a) as usize;
        let mut map = lock(&self.resident);
        if let Some((_, b)) = map.get(&key) {
            return Ok(b.clone());
        }
        let (s, nl) = scalar_lanes(a.elem);
        let pb = plane_bytes(s, a.len());
        let mut host = vec![0u8; pb * nl];
        for (l, plane) in host.chunks_exact_mut(pb).enumerate() {
            fill_plane(plane, a, l);
        }
        let b = Arc::new(self.upload(&host)?);
        map.insert(key, (a.clone(), b.clone()));
        Ok(b)
    }

    /// The device copy of `a` with its tuple lanes interleaved (element after element, each
    /// one 16 bytes: how map kernels read arrays of 16-byte tuples,
    /// `weft_backend_llvm::interleaved_on_gpu`), uploaded on first use.
    pub(super) fn resident_packed(
        &self,
        a: &Arc<HostArray>,
    ) -> Result<Arc<DeviceBuffer>, CudaError> {
        // Arcs are 8-aligned: `+ 1` keeps this copy apart from the planar one.
        let key = Arc::as_ptr(a) as usize + 1;
        let mut map = lock(&self.resident);
        if let Some((_, b)) = map.get(&key) {
            return Ok(b.clone());
        }
        let (s, nl) = scalar_lanes(a.elem);
        let (pb, eb) = (plane_bytes(s, a.len()), storage_bytes(s));
        let mut planes = vec![0u8; pb * nl];
        for (l, plane) in planes.chunks_exact_mut(pb).enumerate() {
            fill_plane(plane, a, l);
        }
        let mut host = vec![0u8; pb * nl];
        for (e, dst) in host.chunks_exact_mut(eb * nl).enumerate() {
            for (l, d) in dst.chunks_exact_mut(eb).enumerate() {
                d.copy_from_slice(&planes[l * pb + e * eb..l * pb + (e + 1) * eb]);
            }
        }
        let b = Arc::new(self.upload(&host)?);
        map.insert(key, (a.clone(), b.clone()));
        Ok(b)
    }

    /// A new device buffer holding elements `offset .. offset + len` (at least one) of the
    /// planar buffer `src` (`lanes` planes of `stride` elements of `bytes` bytes each) with
    /// its lanes interleaved, made by one strided device copy per lane (queued on the
    /// stream, no wait).
    pub(super) fn pack(
        &self,
        src: u64,
        lanes: usize,
        stride: usize,
        bytes: usize,
        offset: usize,
        len: usize,
    ) -> Result<DeviceBuffer, CudaError> {
        let len = len.max(1);
        let dst = self.alloc(len * lanes * bytes)?;
        for l in 0..lanes {
            let copy = sys::CUDA_MEMCPY2D {
                srcXInBytes: 0,
                srcY: 0,
                srcMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
                srcHost: std::ptr::null(),
                srcDevice: src + ((l * stride + offset) * bytes) as u64,
                srcArray: std::ptr::null_mut(),
                srcPitch: bytes,
                dstXInBytes: 0,
                dstY: 0,
                dstMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
                dstHost: std::ptr::null_mut(),
                dstDevice: dst.ptr + (l * bytes) as u64,
                dstArray: std::ptr::null_mut(),
                dstPitch: lanes * bytes,
                WidthInBytes: bytes,
                Height: len,
            };
            // SAFETY: both ranges lie inside live allocations (`src`'s planes hold `offset +
            // len` elements, checked by the launch's range check; `dst` was just allocated
            // with `len` elements of `lanes` lanes); the copy is queued on this device's stream.
            let r = unsafe { sys::cuMemcpy2DAsync_v2(&copy, self.stream.cu_stream()) };
            if r != sys::CUresult::CUDA_SUCCESS {
                return Err(drv("cuMemcpy2DAsync", DriverError(r)));
            }
        }
        Ok(dst)
    }

    /// Loads PTX (NUL-free text) and finds its entry, with the driver's PTX optimisation
    /// level (`CU_JIT_OPTIMIZATION_LEVEL`, 0 … 4; 4 is the driver's default): kernels LLVM
    /// compiled below full effort (very large programs, docs/abi.md) get 0, since `ptxas` is
    /// super-linear on them too. JIT errors come with the JIT's log.
    pub(super) fn load_module_at(
        &self,
        ptx: &str,
        entry: &str,
        level: u32,
    ) -> Result<LoadedModule, CudaError> {
        let image = CString::new(ptx).map_err(|_| nul("PTX text"))?;
        self.bind()?;
        let mut log = JitLog::new(level);
        let mut module: sys::CUmodule = std::ptr::null_mut();
        // SAFETY: a NUL-terminated PTX image; options whose values are a writable buffer, its
        // size and the optimisation level (the last two passed by value, as the driver API
        // specifies); `log` outlives the call.
        let r = unsafe {
            sys::cuModuleLoadDataEx(
                &mut module,
                image.as_ptr().cast(),
                log.opts.len() as c_uint,
                log.opts.as_mut_ptr(),
                log.vals.as_mut_ptr(),
            )
        };
        if let Err(e) = r.result() {
            return Err(log.error(drv("cuModuleLoadDataEx", e)));
        }
        self.entry_of(module, entry)
    }

    /// Links PTX (NUL-free text) with the CUDA device runtime library `devrt`
    /// (`libcudadevrt.a`, which defines device-side calls such as
    /// `cudaGraphSetConditional`) with the driver's linker, loads the cubin and finds its
    /// entry. Errors come with the linker's log.
    pub(super) fn load_linked(
        &self,
        ptx: &str,
        devrt: &std::path::Path,
        entry: &str,
    ) -> Result<LoadedModule, CudaError> {
        let image = CString::new(ptx).map_err(|_| nul("PTX text"))?;
        let lib = CString::new(devrt.as_os_str().as_encoded_bytes())
            .map_err(|_| nul("libcudadevrt path"))?;
        self.bind()?;
        let mut log = JitLog::new(4);
        let mut state: sys::CUlinkState = std::ptr::null_mut();
        // SAFETY: options as for `cuModuleLoadDataEx`; `log` outlives the link state, which
        // is destroyed below on every path.
        let r = unsafe {
            sys::cuLinkCreate_v2(
                log.opts.len() as c_uint,
                log.opts.as_mut_ptr(),
                log.vals.as_mut_ptr(),
                &mut state,
            )
        };
        if let Err(e) = r.result() {
            return Err(log.error(drv("cuLinkCreate", e)));
        }
        let name = c"weft-loop.ptx";
        // SAFETY: `image` is NUL-terminated PTX and its size includes the NUL, as the driver
        // wants for text input; `lib` is a NUL-terminated path; the link state is live.
        let added = unsafe {
            sys::cuLinkAddData_v2(
                state,
                sys::CUjitInputType::CU_JIT_INPUT_PTX,
                image.as_ptr() as *mut c_void,
                image.as_bytes_with_nul().len(),
                name.as_ptr(),
                0,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        }
        .result()
        .map_err(|e| drv("cuLinkAddData", e))
        .and_then(|()| {
            // SAFETY: as above.
            unsafe {
                sys::cuLinkAddFile_v2(
                    state,
                    sys::CUjitInputType::CU_JIT_INPUT_LIBRARY,
                    lib.as_ptr(),
                    0,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                )
            }
            .result()
            .map_err(|e| drv("cuLinkAddFile", e))
        });
        let mut cubin: *mut c_void = std::ptr::null_mut();
        let mut size = 0usize;
        let loaded = added
            .and_then(|()| {
                // SAFETY: the state holds the inputs; the cubin lives until cuLinkDestroy.
                unsafe { sys::cuLinkComplete(state, &mut cubin, &mut size) }
                    .result()
                    .map_err(|e| drv("cuLinkComplete", e))
            })
            .and_then(|()| {
                let mut module: sys::CUmodule = std::ptr::null_mut();
                // SAFETY: `cubin` is the complete image the linker just made (alive until
                // cuLinkDestroy below); the driver copies it.
                unsafe { sys::cuModuleLoadData(&mut module, cubin.cast_const()) }
                    .result()
                    .map_err(|e| drv("cuModuleLoadData", e))
                    .map(|()| module)
            });
        // SAFETY: destroyed once; the module was loaded from a copy of the cubin.
        let _ = unsafe { sys::cuLinkDestroy(state) };
        let module = loaded.map_err(|e| log.error(e))?;
        self.entry_of(module, entry)
    }

    /// The loaded `module` with its function `entry` (the module is unloaded if there is
    /// no such function).
    fn entry_of(&self, module: sys::CUmodule, entry: &str) -> Result<LoadedModule, CudaError> {
        let entry_c = CString::new(entry).map_err(|_| nul("entry name"))?;
        let loaded = |func| LoadedModule {
            ctx: self.ctx.clone(),
            module,
            func,
        };
        // SAFETY: `module` was just loaded.
        match unsafe { result::module::get_function(module, entry_c) } {
            Ok(func) => Ok(loaded(func)),
            Err(e) => {
                drop(loaded(std::ptr::null_mut()));
                Err(drv("cuModuleGetFunction", e))
            }
        }
    }

    /// Resident blocks of `block` threads per multiprocessor for `f` (at least 1).
    pub(super) fn blocks_per_sm(&self, f: sys::CUfunction, block: u32) -> u32 {
        // SAFETY: `f` is a loaded kernel; no dynamic shared memory.
        unsafe { result::occupancy::max_active_block_per_multiprocessor(f, block as c_int, 0) }
            .map_or(1, |b| b.max(1) as u32)
    }

    /// Block and grid for a launch of `n` elements.
    pub(super) fn geometry(
        &self,
        k: &CudaKernel,
        cfg: &GpuConfig,
        n: usize,
    ) -> Result<(u32, u32), CudaError> {
        let sms = self.info.multiprocessors.max(1) as u64;
        if cfg.block.is_none() && cfg.grid.is_none() && (n as u64) < sms * k.auto_block as u64 {
            // A launch too small to give every multiprocessor a block of the suggested size:
            // smaller blocks (whole warps) spread it over more of them, so that latency-bound
            // work (a reduction's later levels, a small solve) has more load units and
            // caches. Every block is resident at once: no occupancy query.
            let block = (n as u64)
                .div_ceil(sms)
                .next_multiple_of(32)
                .clamp(32, k.auto_block as u64);
            let grid = (n as u64).div_ceil(block).max(1);
            return Ok((block as u32, grid as u32));
        }
        let block = cfg.block.map_or(k.auto_block, |b| b.clamp(1, k.max_block));
        let grid = match cfg.grid {
            Some(g) => g.clamp(1, MAX_GRID),
            None => {
                let per_sm = if block == k.auto_block {
                    k.blocks_per_sm
                } else {
                    self.bind()?;
                    self.blocks_per_sm(k.module.func, block)
                };
                let full = sms * per_sm as u64;
                // A kernel with blocks of `block_elems` elements gets threads for blocks when
                // that still gives every multiprocessor a thread block (so they run: the
                // kernel takes blocks only when each thread has one), else one per element.
                let per = k.block_elems.max(1) as u64;
                let work = if (n as u64) / per >= sms * block as u64 {
                    (n as u64).div_ceil(per)
                } else {
                    n as u64
                };
                work.div_ceil(block as u64)
                    .min(full)
                    .clamp(1, MAX_GRID as u64) as u32
            }
        };
        Ok((block, grid))
    }

    /// Runs `launch` `reps` times back to back on the stream and returns the GPU time
    /// between CUDA events recorded before the first and after the last launch.
    pub(super) fn time_events(
        &self,
        reps: u32,
        mut launch: impl FnMut() -> Result<(), CudaError>,
    ) -> Result<Duration, CudaError> {
        let ms = guard("cuEventRecord", || {
            let timing = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
            let start = self
                .ctx
                .new_event(timing)
                .map_err(|e| drv("cuEventCreate", e))?;
            let stop = self
                .ctx
                .new_event(timing)
                .map_err(|e| drv("cuEventCreate", e))?;
            start
                .record(&self.stream)
                .map_err(|e| drv("cuEventRecord", e))?;
            for _ in 0..reps {
                launch()?;
            }
            stop.record(&self.stream)
                .map_err(|e| drv("cuEventRecord", e))?;
            start
                .elapsed_ms(&stop)
                .map_err(|e| drv("cuEventElapsedTime", e))
        })?;
        Ok(Duration::from_secs_f64(f64::from(ms.max(0.0)) / 1e3))
    }
}

/// The error of a text argument with a NUL byte.
fn nul(what: &str) -> CudaError {
    CudaError::Driver {
        call: "cuModuleLoadDataEx",
        code: "CUDA_ERROR_INVALID_VALUE".into(),
        description: format!("the {what} contains a NUL byte"),
        log: None,
    }
}

/// The options of a driver JIT call: an error log buffer and the optimisation level.
struct JitLog {
    log: Vec<u8>,
    opts: [sys::CUjit_option; 3],
    vals: [*mut c_void; 3],
}

impl JitLog {
    fn new(level: u32) -> Box<JitLog> {
        let mut j = Box::new(JitLog {
            log: vec![0u8; 1 << 14],
            opts: [
                sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
                sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                sys::CUjit_option::CU_JIT_OPTIMIZATION_LEVEL,
            ],
            vals: [std::ptr::null_mut(); 3],
        });
        j.vals = [
            j.log.as_mut_ptr().cast(),
            j.log.len() as *mut c_void,
            level.min(4) as usize as *mut c_void,
        ];
        j
    }

    /// `e` with the log the driver wrote.
    fn error(&self, mut e: CudaError) -> CudaError {
        let end = self
            .log
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(self.log.len());
        if let CudaError::Driver { log: l, .. } = &mut e {
            if end > 0 {
                *l = Some(String::from_utf8_lossy(&self.log[..end]).into_owned());
            }
        }
        e
    }
}
