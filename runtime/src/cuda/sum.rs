//! The runtime's one hand-written kernel: the built-in f32 sum (`cuda_sum.ptx`), used by
//! `weft::sum` on a GPU.

use super::*;

/// The built-in sum kernel and its scratch space (see [`CudaDevice::sum_f32`]).
pub(super) struct SumKernel {
    pub(super) module: LoadedModule,
    pub(super) grid: u32,
    pub(super) partial: DeviceBuffer,
    pub(super) out: DeviceBuffer,
}

impl CudaDevice {
    /// The sum of elements `offset .. offset + n` of a buffer of f32 scalars, by the runtime's
    /// built-in reduction kernel (`runtime/src/cuda/cuda_sum.ptx`, DESIGN §5 collectives): each
    /// thread adds a grid-stride slice with four accumulators, warps combine by shuffles,
    /// blocks write partials, and a second launch of one block adds those. The order of the
    /// additions is fixed by the launch geometry, not the reduction tree of
    /// `weft::collective` (so a float sum may differ from other devices in the last bits).
    ///
    /// # Errors
    /// Another element type, a range outside the buffer, a buffer of another device, or a
    /// driver call failing.
    pub fn sum_f32(&self, buf: &CudaBuffer, offset: usize, n: usize) -> Result<f32, RuntimeError> {
        let bad = |description: String| -> RuntimeError {
            CudaError::Driver {
                call: "cuLaunchKernel",
                code: "CUDA_ERROR_INVALID_VALUE".into(),
                description,
                log: None,
            }
            .into()
        };
        if buf.elem != Type::f32() {
            return Err(bad(format!("sum_f32 of a buffer of {}", buf.elem)));
        }
        if offset.checked_add(n).is_none_or(|e| e > buf.len) || !Arc::ptr_eq(&buf.dev, &self.inner)
        {
            return Err(bad(
                "sum_f32: range outside the buffer, or another device".into()
            ));
        }
        if n == 0 {
            return Ok(0.0);
        }
        let i = &self.inner;
        let v = guard("cuLaunchKernel", || {
            i.bind()?;
            const BLOCK: u32 = 256;
            let mut k = lock(&i.sum_kernel);
            if k.is_none() {
                let module = i.load_module(include_str!("cuda_sum.ptx"), "weft_sum_f32")?;
                let per_sm = i.blocks_per_sm(module.func, BLOCK);
                let grid = i.info.multiprocessors.max(1) * per_sm;
                *k = Some(SumKernel {
                    module,
                    grid,
                    partial: i.alloc(grid as usize * 4)?,
                    out: i.alloc(4)?,
                });
            }
            let sk = k.as_ref().expect("set above");
            let grid = (n as u64).div_ceil(BLOCK as u64).min(sk.grid as u64).max(1) as u32;
            let (partial, out) = (&sk.partial, &sk.out);
            let launch = |grid: u32, block: u32, input: u64, len: u64, output: u64| {
                let mut words = [input, len, output];
                let mut params: Vec<*mut c_void> =
                    words.iter_mut().map(|w| (w as *mut u64).cast()).collect();
                // SAFETY: the kernel takes three u64 parameters (input pointer, element count,
                // output pointer); the input holds `len` f32s and the output `grid` f32s.
                unsafe {
                    result::launch_kernel(
                        sk.module.func,
                        (grid, 1, 1),
                        (block, 1, 1),
                        0,
                        i.stream.cu_stream(),
                        &mut params,
                    )
                }
                .map_err(|e| drv("cuLaunchKernel", e))
            };
            let input = buf.buf.ptr + (offset * 4) as u64;
            launch(grid, BLOCK, input, n as u64, partial.ptr)?;
            launch(1, 1024, partial.ptr, grid as u64, out.ptr)?;
            let bytes = i.download(out)?;
            Ok(f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
        })?;
        Ok(v)
    }
}
