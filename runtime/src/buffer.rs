//! Host buffers in the kernel ABI's plane layout (docs/abi.md): the storage the `weft`
//! library's arrays live in on the CPU, handed to kernels without copying.

use crate::planes::{from_storage, scalar_lanes, to_storage};
use std::collections::VecDeque;
use std::sync::Mutex;
use weft_ir::abi::{storage_bytes, PAD};
use weft_ir::interp::HostArray;
use weft_ir::{Const, Type};

/// `len` elements of type `elem` as planes (one per tuple lane) of the kernel ABI's storage
/// layout: 4 bytes a lane for 32-bit-class types (f16 as f32, narrow integers widened), 8 for
/// 64-bit ones. Each plane holds [`HostBuffer::stride`] elements: at least `len + PAD`, so a
/// kernel may read whole blocks past the end of any element range inside the buffer.
/// Planes start 64-byte aligned (a cache line: a kernel's whole-vector loads and stores of a
/// block then never straddle two lines); the contents past `len` are zero.
#[derive(Debug)]
pub struct HostBuffer {
    elem: Type,
    /// `elem`'s scalar type and tuple lanes (kept: every plane access needs them, and a
    /// tuple type's lookup takes the type interner's lock).
    scalar: weft_ir::ScalarType,
    lanes: u8,
    len: usize,
    stride: usize,
    /// The allocation: the planes begin `off` words in (the first 64-byte boundary), and it
    /// holds [`ALIGN_WORDS`] spare words for that.
    words: Vec<u64>,
    off: usize,
}

/// Spare words an allocation holds so that its planes can start on a 64-byte boundary.
const ALIGN_WORDS: usize = 7;

/// Words from the start of `words` to its first 64-byte boundary.
fn align_off(words: &[u64]) -> usize {
    (words.as_ptr() as usize).wrapping_neg() % 64 / 8
}

impl Clone for HostBuffer {
    fn clone(&self) -> HostBuffer {
        let mut b = HostBuffer::for_output(self.elem, self.len);
        b.bytes_mut().copy_from_slice(self.bytes());
        b
    }
}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        pool_give(std::mem::take(&mut self.words));
    }
}

/// Allocations kept for reuse, in two pools of exact sizes:
/// - large ones (at least [`POOL_MIN_WORDS`] words, at most [`POOL_MAX_BYTES`] in all):
///   fresh memory from the OS costs a page fault per 4 KiB on first touch, which for a
///   reduction's partial results cost more than the kernel;
/// - small ones (at most [`SMALL_KEPT`] of them): the allocator zeroes a fresh buffer and
///   often consolidates its free lists first, which for a launch over a thousand elements
///   cost as much as the kernel.
///
/// A buffer returns to its pool only when dropped (nothing can see it then), so reuse never
/// aliases a live buffer.
static POOL: Mutex<VecDeque<Vec<u64>>> = Mutex::new(VecDeque::new());
static SMALL: Mutex<VecDeque<Vec<u64>>> = Mutex::new(VecDeque::new());
/// Smallest allocation of the large pool (words).
const POOL_MIN_WORDS: usize = 1 << 15;
/// Most memory the large pool holds.
const POOL_MAX_BYTES: usize = 1 << 30;
/// Most allocations the small pool holds (at most 16 MiB).
const SMALL_KEPT: usize = 64;

fn pool_lock(words: usize) -> std::sync::MutexGuard<'static, VecDeque<Vec<u64>>> {
    let pool = if words < POOL_MIN_WORDS {
        &SMALL
    } else {
        &POOL
    };
    pool.lock().unwrap_or_else(|e| e.into_inner())
}

/// Small allocations each thread keeps in front of the shared pool ([`SMALL`]): a launch
/// replayed in a loop frees and takes buffers of the same sizes on one thread, and this
/// needs no lock (two locked atomics per take and per give otherwise).
const LOCAL_KEPT: usize = 16;

thread_local! {
    static LOCAL: std::cell::RefCell<Vec<Vec<u64>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A pooled vector of exactly `words` initialised words (stale contents), if one is free.
fn pool_take(words: usize) -> Option<Vec<u64>> {
    if words == 0 {
        return None;
    }
    if words < POOL_MIN_WORDS {
        let local = LOCAL
            .try_with(|l| {
                let mut l = l.borrow_mut();
                let i = l.iter().rposition(|v| v.len() == words)?;
                Some(l.swap_remove(i))
            })
            .ok()
            .flatten();
        if local.is_some() {
            return local;
        }
    }
    let mut p = pool_lock(words);
    let i = p.iter().rposition(|v| v.len() == words)?;
    p.swap_remove_back(i)
}

fn pool_give(v: Vec<u64>) {
    if v.is_empty() {
        return;
    }
    let small = v.len() < POOL_MIN_WORDS;
    // A small one is kept by this thread when it has room (else, or while it exits, the
    // shared pool).
    let mut v = Some(v);
    if small {
        let _ = LOCAL.try_with(|l| {
            let mut l = l.borrow_mut();
            if l.len() < LOCAL_KEPT {
                l.extend(v.take());
            }
        });
    }
    let Some(v) = v else { return };
    let mut p = pool_lock(v.len());
    if small {
        if p.len() == SMALL_KEPT {
            // The oldest goes.
            p.pop_front();
        }
        p.push_back(v);
        return;
    }
    let held: usize = p.iter().map(|v| v.len() * 8).sum();
    if held + v.len() * 8 > POOL_MAX_BYTES {
        if let Some(i) = (0..p.len()).min_by_key(|&i| p[i].len()) {
            p.swap_remove_back(i);
        }
        return;
    }
    p.push_back(v);
}

impl HostBuffer {
    /// A zeroed buffer of `len` elements of `elem` (a scalar or tuple type).
    pub fn zeroed(elem: Type, len: usize) -> HostBuffer {
        let (mut b, stale) = HostBuffer::try_alloc(elem, len)
            .unwrap_or_else(|| panic!("out of memory for a buffer of {len} elements of {elem}"));
        if stale {
            b.words.fill(0);
        }
        b
    }

    /// A buffer of `len` elements of `elem` whose elements are about to be overwritten (a
    /// kernel's output): the contents are unspecified (but initialised) values and the
    /// padding past `len` is zero. Reuses a pooled allocation when one fits.
    pub fn for_output(elem: Type, len: usize) -> HostBuffer {
        // Sizes here come from arrays that already exist; launches over shapes from user
        // input allocate through `try_for_output` and report an error instead.
        HostBuffer::try_for_output(elem, len)
            .unwrap_or_else(|| panic!("out of memory for a buffer of {len} elements of {elem}"))
    }

    /// [`HostBuffer::for_output`], or `None` when memory for `len` elements cannot be had
    /// (a launch then reports an error instead of aborting the process).
    pub fn try_for_output(elem: Type, len: usize) -> Option<HostBuffer> {
        HostBuffer::try_alloc(elem, len).map(|(b, _)| b)
    }

    /// [`HostBuffer::try_for_output`] whose padding is not zeroed yet: for a kernel's
    /// output whose padding the caller zeroes after the kernel ran (its masked last block
    /// may store there), which would otherwise be zeroed twice.
    pub(crate) fn try_for_kernel(elem: Type, len: usize) -> Option<HostBuffer> {
        HostBuffer::try_alloc_raw(elem, len).map(|(b, _)| b)
    }

    /// A buffer with zero padding, and whether its elements are stale (pooled) rather than
    /// zero (fresh).
    fn try_alloc(elem: Type, len: usize) -> Option<(HostBuffer, bool)> {
        let (mut b, stale) = HostBuffer::try_alloc_raw(elem, len)?;
        if stale {
            b.zero_padding();
        }
        Some((b, stale))
    }

    /// A buffer whose padding is zero only when it is fresh, and whether its contents are
    /// stale (pooled) rather than zero (fresh).
    fn try_alloc_raw(elem: Type, len: usize) -> Option<(HostBuffer, bool)> {
        let (s, nl) = scalar_lanes(elem);
        let stride = len.checked_add(PAD)?.div_ceil(PAD) * PAD;
        let bytes = weft_ir::host::byte_len(stride, storage_bytes(s) * nl).ok()?;
        let words = bytes.div_ceil(8).checked_add(ALIGN_WORDS)?;
        let (words, stale) = match pool_take(words) {
            Some(w) => (w, true),
            None => (weft_ir::host::try_zeroed_words(words)?, false),
        };
        let b = HostBuffer {
            elem,
            scalar: s,
            lanes: nl as u8,
            len,
            stride,
            off: align_off(&words),
            words,
        };
        Some((b, stale))
    }

    /// Elements per plane of a buffer of `len` elements (`len + PAD`, rounded up to `PAD`).
    pub fn stride_for(len: usize) -> usize {
        (len + PAD).div_ceil(PAD) * PAD
    }

    /// Bytes of a buffer of `len` elements of `elem` (all planes with padding).
    pub fn bytes_for(elem: Type, len: usize) -> usize {
        let (s, nl) = scalar_lanes(elem);
        HostBuffer::stride_for(len) * storage_bytes(s) * nl
    }

    /// The buffer holding `a`'s elements in row-major order.
    pub fn from_host_array(a: &HostArray) -> HostBuffer {
        let n = a.len();
        let mut b = HostBuffer::zeroed(a.elem, n);
        let nl = b.lanes();
        for l in 0..nl {
            for e in 0..n {
                b.set_bits(e, l, a.data[e * nl + l]);
            }
        }
        b
    }

    /// The elements as a [`HostArray`] of `shape` (whose product must be [`HostBuffer::len`]).
    pub fn to_host_array(&self, shape: &[usize]) -> HostArray {
        self.range_to_host_array(0, shape)
    }

    /// Elements `offset ..` (as many as `shape` holds) as a [`HostArray`] of `shape`.
    pub fn range_to_host_array(&self, offset: usize, shape: &[usize]) -> HostArray {
        let n: usize = shape.iter().product();
        let nl = self.lanes();
        let mut data = vec![0u64; n * nl];
        for l in 0..nl {
            for e in 0..n {
                data[e * nl + l] = self.bits(offset + e, l);
            }
        }
        HostArray {
            elem: self.elem,
            shape: shape.to_vec(),
            data,
        }
    }

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

    /// Tuple lanes per element (1 for a scalar), i.e. the number of planes.
    pub fn lanes(&self) -> usize {
        usize::from(self.lanes)
    }

    /// Elements per plane (`len` plus padding).
    pub fn stride(&self) -> usize {
        self.stride
    }

    /// Bytes of one lane in storage (4 or 8).
    pub fn lane_bytes(&self) -> usize {
        storage_bytes(self.scalar)
    }

    /// All planes as bytes, plane after plane (`lanes() × stride() × lane_bytes()` bytes).
    pub fn bytes(&self) -> &[u8] {
        let n = self.lanes() * self.stride * self.lane_bytes();
        // SAFETY: `words` holds at least `n` initialised bytes after its first `off` words
        // (`ALIGN_WORDS` spare); u8 has no alignment needs.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr().add(self.off).cast::<u8>(), n) }
    }

    /// All planes as mutable bytes (see [`HostBuffer::bytes`]).
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        let n = self.lanes() * self.stride * self.lane_bytes();
        // SAFETY: as in `bytes`, and `self` is borrowed mutably.
        unsafe {
            std::slice::from_raw_parts_mut(self.words.as_mut_ptr().add(self.off).cast::<u8>(), n)
        }
    }

    /// Plane `l` as bytes (`stride() × lane_bytes()`).
    pub fn plane(&self, l: usize) -> &[u8] {
        let pb = self.stride * self.lane_bytes();
        &self.bytes()[l * pb..(l + 1) * pb]
    }

    /// Plane `l` as mutable bytes.
    pub fn plane_mut(&mut self, l: usize) -> &mut [u8] {
        let pb = self.stride * self.lane_bytes();
        &mut self.bytes_mut()[l * pb..(l + 1) * pb]
    }

    /// The `len` elements of plane 0 as `T`s (the host sort's and scan's view).
    ///
    /// # Panics
    /// When `T`'s size is not the storage width of this buffer's scalars.
    pub(crate) fn scalars<T: Plain>(&self) -> &[T] {
        assert_eq!(
            std::mem::size_of::<T>(),
            self.lane_bytes(),
            "a plane of other widths"
        );
        let p = self.plane(0);
        // SAFETY: planes start 64-byte aligned and hold `stride >= len` elements of this
        // width; every bit pattern is a valid `T` (`Plain`).
        unsafe { std::slice::from_raw_parts(p.as_ptr().cast::<T>(), self.len) }
    }

    /// [`HostBuffer::scalars`], mutable.
    ///
    /// # Panics
    /// As [`HostBuffer::scalars`].
    pub(crate) fn scalars_mut<T: Plain>(&mut self) -> &mut [T] {
        assert_eq!(
            std::mem::size_of::<T>(),
            self.lane_bytes(),
            "a plane of other widths"
        );
        let n = self.len;
        let p = self.plane_mut(0);
        // SAFETY: as in `scalars`, borrowed mutably.
        unsafe { std::slice::from_raw_parts_mut(p.as_mut_ptr().cast::<T>(), n) }
    }

    /// Plane `l` as `f32`s, when the element's scalar type is f32 (else `None`).
    pub fn plane_f32(&self, l: usize) -> Option<&[f32]> {
        (self.scalar == weft_ir::ScalarType::F32).then(|| {
            let p = self.plane(l);
            // SAFETY: planes start at multiples of 64 bytes from an 8-aligned base; any bit
            // pattern is an f32.
            unsafe { std::slice::from_raw_parts(p.as_ptr().cast::<f32>(), p.len() / 4) }
        })
    }

    /// Canonical lane bits of lane `l` of element `e`.
    pub fn bits(&self, e: usize, l: usize) -> u64 {
        let b = self.lane_bytes();
        let p = &self.plane(l)[e * b..(e + 1) * b];
        let mut w = [0u8; 8];
        w[..b].copy_from_slice(p);
        from_storage(self.scalar, u64::from_le_bytes(w))
    }

    /// Sets lane `l` of element `e` from canonical lane bits.
    pub fn set_bits(&mut self, e: usize, l: usize, bits: u64) {
        let b = self.lane_bytes();
        let raw = to_storage(self.scalar, bits).to_le_bytes();
        self.plane_mut(l)[e * b..(e + 1) * b].copy_from_slice(&raw[..b]);
    }

    /// Canonical lane bits of lane `l` of elements `start..start + n`, in order: [`bits`]
    /// for a run of elements, with the element type looked up once.
    ///
    /// [`bits`]: HostBuffer::bits
    pub fn lane_run(&self, l: usize, start: usize, n: usize) -> impl Iterator<Item = u64> + '_ {
        let s = self.scalar;
        let b = self.lane_bytes();
        self.plane(l)[start * b..(start + n) * b]
            .chunks_exact(b)
            .map(move |p| {
                let mut w = [0u8; 8];
                w[..b].copy_from_slice(p);
                from_storage(s, u64::from_le_bytes(w))
            })
    }

    /// Sets lane `l` of elements `start, start + 1, …` from canonical lane bits, in order:
    /// [`set_bits`] for a run of elements, with the element type looked up once.
    ///
    /// [`set_bits`]: HostBuffer::set_bits
    pub fn set_lane_run(&mut self, l: usize, start: usize, bits: impl Iterator<Item = u64>) {
        let s = self.scalar;
        let b = self.lane_bytes();
        for (p, x) in self.plane_mut(l)[start * b..].chunks_exact_mut(b).zip(bits) {
            p.copy_from_slice(&to_storage(s, x).to_le_bytes()[..b]);
        }
    }

    /// Element `e` as a constant.
    pub fn get(&self, e: usize) -> Const {
        let lanes: smallvec::SmallVec<[u64; 4]> =
            (0..self.lanes()).map(|l| self.bits(e, l)).collect();
        Const::from_lanes(self.elem, &lanes)
    }

    /// Sets element `e` (the constant's type must be the element type).
    pub fn set(&mut self, e: usize, c: &Const) {
        for (l, &b) in c.lane_bits().iter().enumerate() {
            self.set_bits(e, l, b);
        }
    }

    /// Copies `n` elements starting at `src_offset` of `src` to `dst_offset` of `self` (same
    /// element type).
    pub fn copy_from(&mut self, dst_offset: usize, src: &HostBuffer, src_offset: usize, n: usize) {
        let b = self.lane_bytes();
        for l in 0..self.lanes() {
            let s = &src.plane(l)[src_offset * b..(src_offset + n) * b];
            self.plane_mut(l)[dst_offset * b..(dst_offset + n) * b].copy_from_slice(s);
        }
    }

    /// Zeroes every plane's elements past `len` (kernels' masked final blocks may store
    /// there).
    pub fn zero_padding(&mut self) {
        let (b, len) = (self.lane_bytes(), self.len);
        for l in 0..self.lanes() {
            self.plane_mut(l)[len * b..].fill(0);
        }
    }
}

/// Number types every bit pattern of which is a value, at most 8-byte aligned
/// ([`HostBuffer::scalars`]).
pub(crate) trait Plain: Copy {}
impl Plain for u32 {}
impl Plain for u64 {}
impl Plain for f32 {}
impl Plain for f64 {}

#[cfg(test)]
mod tests {
    use super::*;

    /// A zeroed buffer is zero even when its allocation comes back from a pool holding
    /// another buffer's values, small or large.
    #[test]
    fn zeroed_buffers_from_the_pools_are_zero() {
        let f32t = Type::scalar(weft_ir::ScalarType::F32);
        for len in [1000, 1 << 16] {
            let mut a = HostBuffer::for_output(f32t, len);
            a.bytes_mut().fill(0xff);
            drop(a);
            let b = HostBuffer::zeroed(f32t, len);
            assert!(b.bytes().iter().all(|&x| x == 0), "{len} elements");
        }
    }
}
