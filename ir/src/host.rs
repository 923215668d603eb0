//! Sizes of host data computed from untrusted input (file headers, `--shape`, array
//! extents): checked arithmetic and fallible allocation, so a lying header or a huge shape
//! is an error, never a wrapped size, an out-of-bounds access or an allocation abort.

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
