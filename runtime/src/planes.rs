//! Marshalling between host arrays and the kernel ABI's planes (docs/abi.md), shared by the
//! CPU and CUDA devices: lane storage conversion, planes built from input arrays, and output
//! planes read back into [`HostArray`]s.

use half::f16;
use weft_ir::abi::storage_bytes;
use weft_ir::interp::HostArray;
use weft_ir::konst::{canon, f16_from_f64, lane_i64};
use weft_ir::{ScalarType, Type};

/// The storage bits of one lane of type `s` given its canonical lane bits: f16 becomes the
/// f32 of the same value, 8/16-bit integers are sign-extended to 32 bits (unsigned ones are
/// already zero-extended), everything else is stored as is.
pub(crate) fn to_storage(s: ScalarType, bits: u64) -> u64 {
    match s {
        ScalarType::F16 => f16::from_bits(bits as u16).to_f32().to_bits() as u64,
        ScalarType::I8 | ScalarType::I16 => lane_i64(s, bits) as u32 as u64,
        _ => bits,
    }
}

/// A uniform's context words: the storage bits of each tuple lane (docs/abi.md).
pub(crate) fn uniform_words(c: &weft_ir::Const) -> impl Iterator<Item = u64> + '_ {
    let s = c.ty.elem_scalar();
    c.lane_bits().iter().map(move |&b| to_storage(s, b))
}

/// The canonical lane bits of type `s` from its storage bits (inverse of [`to_storage`]).
pub(crate) fn from_storage(s: ScalarType, raw: u64) -> u64 {
    match s {
        ScalarType::F16 => f16_from_f64(f32::from_bits(raw as u32) as f64).to_bits() as u64,
        _ => canon(s, raw),
    }
}

/// The scalar type and tuple lane count of an element type (a scalar has 1 lane).
pub(crate) fn scalar_lanes(ty: Type) -> (ScalarType, usize) {
    ty.lanes()
        .map_or((ScalarType::F32, 1), |(s, n)| (s, n as usize))
}

/// Bytes of one plane of `len` elements of `s` (at least one element).
pub(crate) fn plane_bytes(s: ScalarType, len: usize) -> usize {
    len.max(1) * storage_bytes(s)
}

/// Writes lane `lane` of every element of `a` into `dst` (one plane, little-endian storage
/// bits); elements past `a.len()` are left as they are.
pub(crate) fn fill_plane(dst: &mut [u8], a: &HostArray, lane: usize) {
    let (s, n) = scalar_lanes(a.elem);
    let b = storage_bytes(s);
    for (e, out) in dst.chunks_exact_mut(b).take(a.len()).enumerate() {
        let raw = to_storage(s, a.data[e * n + lane]);
        out.copy_from_slice(&raw.to_le_bytes()[..b]);
    }
}

/// Reads element `e` of a plane of `s` (storage bits) as canonical lane bits.
pub(crate) fn read_lane(plane: &[u8], s: ScalarType, e: usize) -> u64 {
    let b = storage_bytes(s);
    let mut w = [0u8; 8];
    w[..b].copy_from_slice(&plane[e * b..(e + 1) * b]);
    from_storage(s, u64::from_le_bytes(w))
}

/// An output of element type `ty` and launch `shape` (`n` elements) from its planes, one per
/// tuple lane, each holding at least `n` elements.
pub(crate) fn read_output(ty: Type, shape: &[usize], n: usize, planes: &[&[u8]]) -> HostArray {
    let (s, nl) = scalar_lanes(ty);
    let mut data = vec![0u64; n * nl];
    for e in 0..n {
        for (l, pl) in planes.iter().enumerate() {
            data[e * nl + l] = read_lane(pl, s, e);
        }
    }
    HostArray {
        elem: ty,
        shape: shape.to_vec(),
        data,
    }
}

/// One host plane of kernel data: `len` (at least one) elements of the storage size of its
/// scalar type, little-endian.
pub(crate) struct Plane(pub(crate) Vec<u8>);

impl Plane {
    /// A zeroed plane of `len` elements of `s`.
    pub(crate) fn new(s: ScalarType, len: usize) -> Plane {
        Plane(vec![0u8; plane_bytes(s, len)])
    }

    /// A zeroed plane of `len` elements of `s`, or `None` when the memory cannot be had
    /// (an output of a huge launch shape: an error, not an abort).
    pub(crate) fn try_new(s: ScalarType, len: usize) -> Option<Plane> {
        let bytes = weft_ir::host::byte_len(len.max(1), storage_bytes(s)).ok()?;
        weft_ir::host::try_zeroed_bytes(bytes).map(Plane)
    }

    /// Lane `lane` of every element of `a`, padded with zeros to `len` elements.
    pub(crate) fn from_array(a: &HostArray, lane: usize, len: usize) -> Plane {
        let mut p = Plane::new(scalar_lanes(a.elem).0, len);
        fill_plane(&mut p.0, a, lane);
        p
    }

    /// The plane's address, for a context word.
    pub(crate) fn ptr(&mut self) -> u64 {
        self.0.as_mut_ptr() as u64
    }
}
