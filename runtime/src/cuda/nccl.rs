//! NCCL through cudarc, loaded at run time like the driver (issue 27): a device group's
//! parts gathered onto one GPU — the partial results of a reduction, a split result read
//! whole by every member — by NCCL's point-to-point `send`/`recv` between the GPUs, with no
//! trip through the host. Only data moves: the combinations stay weft's, so the bits are
//! those of one device.

use super::*;
use cudarc::nccl::{group_end, group_start, Comm};

/// Whether libnccl can be loaded (checked once per process).
///
/// # Errors
/// [`CudaError::NoNccl`] when it cannot.
pub fn nccl_status() -> Result<(), CudaError> {
    static PRESENT: OnceLock<Result<(), CudaError>> = OnceLock::new();
    PRESENT
        .get_or_init(|| {
            // SAFETY: only tries to open the library under its usual names (and closes it).
            let present = guard("dlopen(libnccl)", || {
                Ok(unsafe { cudarc::nccl::sys::is_culib_present() })
            })?;
            if present {
                Ok(())
            } else {
                Err(CudaError::NoNccl)
            }
        })
        .clone()
}

/// Communicators over a set of GPUs, one per GPU in ordinal order (`ncclCommInitAll`).
struct Comms(Vec<Comm>);

// SAFETY: an NCCL communicator may be used from any thread; every use here holds the
// process-wide lock below, so calls on one communicator never overlap.
unsafe impl Send for Comms {}

/// The communicators of each set of GPUs used so far, by their ordinals (sorted).
fn comms() -> &'static Mutex<HashMap<Vec<usize>, Comms>> {
    static COMMS: OnceLock<Mutex<HashMap<Vec<usize>, Comms>>> = OnceLock::new();
    COMMS.get_or_init(Mutex::default)
}

fn nccl_err(call: &'static str, e: impl fmt::Debug) -> CudaError {
    CudaError::Nccl {
        call,
        message: format!("{e:?}"),
    }
}

/// The byte ranges of each plane of `b` and of the same plane of a buffer of plane stride
/// `stride` (elements) holding `b` from element `start`.
fn planes(
    b: &CudaBuffer,
    stride: usize,
    start: usize,
) -> impl Iterator<Item = (std::ops::Range<usize>, std::ops::Range<usize>)> + '_ {
    let lb = b.lane_bytes();
    (0..b.lanes()).map(move |l| {
        let from = l * b.stride * lb;
        let to = (l * stride + start) * lb;
        (from..from + b.len * lb, to..to + b.len * lb)
    })
}

impl CudaDevice {
    /// A new buffer on this GPU holding `total` elements put together from `parts`: each
    /// `(start, buffer)` fills elements `start .. start + buffer.len()` (parts must not
    /// overlap; elements no part covers are undefined). Parts on this GPU are copied on its
    /// stream; parts on other GPUs are received through NCCL after everything queued on
    /// their GPUs (issue 27's device groups). Queued, not waited for.
    ///
    /// # Errors
    /// A part outside `total` or of another element type; a part on another GPU when NCCL
    /// is missing ([`CudaError::NoNccl`]); the driver or NCCL failing.
    pub fn gather_parts(
        &self,
        parts: &[(usize, &CudaBuffer)],
        total: usize,
    ) -> Result<CudaBuffer, RuntimeError> {
        let elem = parts.first().map_or(Type::f32(), |(_, b)| b.elem);
        let bad = parts
            .iter()
            .any(|(s, b)| b.elem != elem || s.checked_add(b.len).is_none_or(|e| e > total));
        if bad {
            return Err(RunError::Launch {
                program: "gather".into(),
                message: "gather_parts: a part outside the whole or of another type".into(),
            }
            .into());
        }
        let me = &self.inner;
        let stride = HostBuffer::stride_for(total);
        let mut buf = guard("cuMemAlloc", || {
            me.bind()?;
            me.alloc(HostBuffer::bytes_for(elem, total))
        })?;
        let remote: Vec<&(usize, &CudaBuffer)> =
            parts.iter().filter(|(_, b)| !b.dev.same_gpu(me)).collect();
        guard("cuMemcpyDtoDAsync", || {
            me.bind()?;
            for (start, b) in parts.iter().filter(|(_, b)| b.dev.same_gpu(me)) {
                for (from, to) in planes(b, stride, *start) {
                    let s = b.buf.slice.slice(from);
                    let mut d = buf.slice.slice_mut(to);
                    me.stream
                        .memcpy_dtod(&s, &mut d)
                        .map_err(|e| drv("cuMemcpyDtoDAsync", e))?;
                }
            }
            Ok(())
        })?;
        let out = |buf| CudaBuffer {
            dev: me.clone(),
            buf: Arc::new(buf),
            elem,
            len: total,
            stride,
        };
        if remote.is_empty() {
            return Ok(out(buf));
        }
        nccl_status()?;
        // One communicator per GPU involved, in ordinal order.
        let mut ordinals: Vec<usize> = remote.iter().map(|(_, b)| b.ordinal()).collect();
        ordinals.push(me.info.ordinal);
        ordinals.sort_unstable();
        ordinals.dedup();
        let rank = |ord: usize| ordinals.iter().position(|&o| o == ord).expect("listed");
        let mut all = lock(comms());
        if !all.contains_key(&ordinals) {
            // Each GPU's stream: the devices this call sees (one per ordinal).
            let mut streams: Vec<Arc<CudaStream>> = Vec::with_capacity(ordinals.len());
            for &o in &ordinals {
                let s = if o == me.info.ordinal {
                    me.stream.clone()
                } else {
                    let (_, b) = remote
                        .iter()
                        .find(|(_, b)| b.ordinal() == o)
                        .expect("listed");
                    b.dev.stream.clone()
                };
                streams.push(s);
            }
            let c = guard("ncclCommInitAll", || {
                Comm::from_devices(streams).map_err(|e| nccl_err("ncclCommInitAll", e))
            })?;
            all.insert(ordinals.clone(), Comms(c));
        }
        let cs = &all[&ordinals].0;
        let to = rank(me.info.ordinal);
        guard("ncclGroupEnd", || {
            group_start().map_err(|e| nccl_err("ncclGroupStart", e))?;
            let mut res = Ok(());
            for (start, b) in &remote {
                let from = rank(b.ordinal());
                for (src, dst) in planes(b, stride, *start) {
                    let s = b.buf.slice.slice(src);
                    let mut d = buf.slice.slice_mut(dst);
                    let r = cs[from]
                        .send(&s, to as i32)
                        .map_err(|e| nccl_err("ncclSend", e))
                        .and_then(|()| {
                            cs[to]
                                .recv(&mut d, from as i32)
                                .map(drop)
                                .map_err(|e| nccl_err("ncclRecv", e))
                        });
                    if res.is_ok() {
                        res = r;
                    }
                }
            }
            // The group is closed whatever failed inside it.
            let end = group_end().map_err(|e| nccl_err("ncclGroupEnd", e));
            res.and(end)
        })?;
        drop(all);
        Ok(out(buf))
    }
}
