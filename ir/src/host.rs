//! Sizes of host data computed from untrusted input (file headers, `--shape`, array
//! extents): checked arithmetic and fallible allocation, so a lying header or a huge shape
//! is an error, never a wrapped size, an out-of-bounds access or an allocation abort. Also the
//! host data model every layer shares (issue 20): [`HostArray`], the inputs of a run
//! ([`Input`], [`Arg`]) and why a run failed ([`RunError`]).

use crate::konst::Const;
use crate::types::Type;
use std::sync::Arc;

/// The largest extent of one axis: extents reach compiled code as `i64` context words and
/// `extent` results, so an axis must fit in `i64`.
pub const MAX_EXTENT: usize = i64::MAX as usize;

/// The largest number of bytes one array may hold: what a Rust allocation may span.
pub const MAX_BYTES: usize = isize::MAX as usize;

/// The element count of an array of `shape` (row-major, any number of axes; 1 for no axes),
/// computed with checked arithmetic.
///
/// Errors: an axis over [`MAX_EXTENT`], or a product that overflows `usize` (an empty axis
/// makes the count 0 whatever the other axes are, but they must still be within
/// [`MAX_EXTENT`]). The message states the shape.
pub fn shape_len(shape: &[usize]) -> Result<usize, String> {
    if let Some(&d) = shape.iter().find(|&&d| d > MAX_EXTENT) {
        return Err(format!(
            "shape {shape:?} has an axis of {d}, more than 2^63 - 1 elements"
        ));
    }
    if shape.contains(&0) {
        return Ok(0);
    }
    shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| format!("shape {shape:?} has more than 2^64 elements"))
}

/// The bytes of `count` items of `item_bytes` each, checked against [`MAX_BYTES`].
///
/// Errors: the product overflows or exceeds [`MAX_BYTES`]; the message gives both numbers.
pub fn byte_len(count: usize, item_bytes: usize) -> Result<usize, String> {
    count
        .checked_mul(item_bytes)
        .filter(|&b| b <= MAX_BYTES)
        .ok_or_else(|| format!("{count} elements of {item_bytes} bytes do not fit in memory"))
}

/// A vector of `n` zero words, or `None` when the allocator cannot provide `n * 8` bytes
/// (instead of aborting the process as `vec![0; n]` does). Zeroed pages come from the
/// allocator (`calloc`), so nothing is touched before it is used.
pub fn try_zeroed_words(n: usize) -> Option<Vec<u64>> {
    try_zeroed(n)
}

/// A vector of `n` zero bytes, or `None` when the allocator cannot provide them.
pub fn try_zeroed_bytes(n: usize) -> Option<Vec<u8>> {
    try_zeroed(n)
}

/// Integer types whose all-zero bit pattern is the value 0.
trait ZeroBits: Copy {}
impl ZeroBits for u8 {}
impl ZeroBits for u64 {}

fn try_zeroed<T: ZeroBits>(n: usize) -> Option<Vec<T>> {
    if n == 0 {
        return Some(Vec::new());
    }
    let layout = std::alloc::Layout::array::<T>(n).ok()?;
    // SAFETY: `layout` has a non-zero size (n > 0 and T is not zero-sized).
    let p = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<T>();
    if p.is_null() {
        return None;
    }
    // SAFETY: `p` was allocated by the global allocator with the layout of `[T; n]`, is
    // zeroed (a valid `T` for every `ZeroBits` type), and is owned by nothing else.
    Some(unsafe { Vec::from_raw_parts(p, n, n) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_len_is_checked() {
        assert_eq!(shape_len(&[3, 4, 5]), Ok(60));
        assert_eq!(shape_len(&[]), Ok(1));
        assert_eq!(shape_len(&[0, 1 << 40, 1 << 40]), Ok(0));
        // The products that wrap to 0 and to 1 in unchecked arithmetic.
        assert!(shape_len(&[4194304, 2097152, 2097152]).is_err());
        assert!(shape_len(&[1 << 32, 1 << 32]).is_err());
        assert!(shape_len(&[usize::MAX, usize::MAX]).is_err());
        assert!(shape_len(&[0, usize::MAX]).is_err());
    }

    #[test]
    fn huge_allocations_fail_instead_of_aborting() {
        assert_eq!(try_zeroed_words(4), Some(vec![0; 4]));
        assert!(try_zeroed_words(1 << 60).is_none());
        assert!(try_zeroed_bytes(usize::MAX / 2).is_none());
        assert!(byte_len(1 << 62, 8).is_err());
        assert_eq!(byte_len(10, 4), Ok(40));
    }
}

/// A host array of scalars or tuples: row-major, one canonical `u64` per lane
/// (`data.len() == shape.product() * lanes`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostArray {
    /// Element type (scalar or tuple).
    pub elem: Type,
    /// Extent of each axis (1 to 3 axes), outermost first.
    pub shape: Vec<usize>,
    /// Lane bits, element-major.
    pub data: Vec<u64>,
}

impl HostArray {
    /// An array of `elem` with `shape`, filled with zero bits.
    pub fn zeros(elem: Type, shape: &[usize]) -> HostArray {
        let n: usize = shape.iter().product();
        HostArray {
            elem,
            shape: shape.to_vec(),
            data: vec![0; n * lanes_of(elem)],
        }
    }

    /// A 1-D f32 array.
    pub fn from_f32(xs: &[f32]) -> HostArray {
        HostArray {
            elem: Type::f32(),
            shape: vec![xs.len()],
            data: xs.iter().map(|x| x.to_bits() as u64).collect(),
        }
    }

    /// Number of elements: the product of the shape, or `usize::MAX` when it overflows (an
    /// array that [`HostArray::check`] rejects).
    pub fn len(&self) -> usize {
        shape_len(&self.shape).unwrap_or(usize::MAX)
    }

    /// Checks that the shape's element count is representable ([`shape_len`])
    /// and that `data` holds exactly that many elements of `elem`. Every launch checks its
    /// host arrays with this before reading them, so an array built from a lying file header
    /// is an error, never an out-of-bounds access.
    ///
    /// Errors: a message naming the shape and the data length.
    pub fn check(&self) -> Result<(), String> {
        let n = shape_len(&self.shape)?;
        let lanes = lanes_of(self.elem);
        if n.checked_mul(lanes) != Some(self.data.len()) {
            return Err(format!(
                "array data length {} does not match its shape {:?} of {} (expected {} lanes)",
                self.data.len(),
                self.shape,
                self.elem,
                n.saturating_mul(lanes)
            ));
        }
        Ok(())
    }

    /// True if there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i` (row-major) as a constant.
    pub fn get(&self, i: usize) -> Const {
        let l = lanes_of(self.elem);
        Const::from_lanes(self.elem, &self.data[i * l..(i + 1) * l])
    }

    /// The elements as f32 (only meaningful when `elem` is f32).
    pub fn to_f32(&self) -> Vec<f32> {
        self.data
            .iter()
            .map(|&b| f32::from_bits(b as u32))
            .collect()
    }
}

/// Lanes per element of `t` (1 for a scalar, N for an N-tuple).
pub fn lanes_of(t: Type) -> usize {
    t.lanes().map_or(1, |(_, n)| n as usize)
}

/// An argument of a single-element run.
#[derive(Clone, Debug)]
pub enum Arg {
    /// A scalar or tuple, for a varying or uniform parameter.
    Value(Const),
    /// An array, for an array parameter.
    Array(Arc<HostArray>),
}

/// An input of an apply (one per parameter, in order).
#[derive(Clone, Debug)]
pub enum Input {
    /// For a varying parameter (streamed, one element per invocation) or an array parameter.
    Array(Arc<HostArray>),
    /// For a uniform parameter.
    Uniform(Const),
}

/// Why a run failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    /// No program of that name.
    #[error("no program @{0} in the module")]
    UnknownProgram(String),
    /// Wrong number of arguments.
    #[error("@{program} takes {expected} inputs, got {got}")]
    ArgCount {
        /// Program name.
        program: String,
        /// Its parameter count.
        expected: usize,
        /// Inputs given.
        got: usize,
    },
    /// An input of the wrong kind, type or shape.
    #[error("input `{param}` of @{program}: {message}")]
    BadInput {
        /// Program name.
        program: String,
        /// Parameter name.
        param: String,
        /// What is wrong.
        message: String,
    },
    /// The launch shape could not be determined or does not fit the program.
    #[error("launch of @{program}: {message}")]
    Launch {
        /// Program name.
        program: String,
        /// What is wrong.
        message: String,
    },
    /// An element ran out of fuel (a runaway loop).
    #[error(
        "@{program} ran out of fuel ({fuel} ops) at element {element}: a loop does not terminate"
    )]
    OutOfFuel {
        /// Program name.
        program: String,
        /// The fuel it had.
        fuel: u64,
        /// Row-major index of the element.
        element: usize,
    },
}

/// An argument of a kernel launch, one per parameter.
#[derive(Debug)]
pub enum KernelArg<'a> {
    /// For a uniform parameter.
    Value(Const),
    /// For a read-only array parameter.
    Array(&'a HostArray),
    /// For a buffer parameter: read and written in place.
    Buffer(&'a mut HostArray),
}

impl KernelArg<'_> {
    /// The array of an array or buffer argument.
    pub fn array(&self) -> Option<&HostArray> {
        match self {
            KernelArg::Value(_) => None,
            KernelArg::Array(h) => Some(h),
            KernelArg::Buffer(h) => Some(h),
        }
    }
}
