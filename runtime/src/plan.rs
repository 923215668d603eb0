//! Launch checks shared by the CPU and CUDA devices' buffer launches: element ranges inside
//! buffers, and the array arguments of bound launches (the rest of planning is
//! [`crate::prepare::Prepared::plan`]).

use weft_ir::interp::RunError;

/// Checks that every array argument's element range lies inside its buffer; errors name the
/// parameter.
pub(crate) fn check_ranges(
    p: &weft_ir::Program,
    ranges: impl Iterator<Item = Option<(usize, usize, usize)>>,
) -> Result<(), RunError> {
    for (i, r) in ranges.enumerate() {
        if let Some((offset, n, len)) = r {
            if offset.checked_add(n).is_none_or(|end| end > len) {
                return Err(RunError::BadInput {
                    program: p.name.clone(),
                    param: p.param_name(i).to_string(),
                    message: format!(
                        "elements {offset}..{} lie outside its buffer of {len}",
                        offset.saturating_add(n)
                    ),
                });
            }
        }
    }
    Ok(())
}

/// Checks a buffer given to a bound launch (issue 23's replays): `elem` elements, holding
/// the `len` elements read from `offset` (`bound`: the element type and count it was bound
/// to). Errors name the program and parameter.
pub(crate) fn check_bound(
    (program, param): (&str, &str),
    bound: (weft_ir::Type, usize),
    (elem, offset, buf_len): (weft_ir::Type, usize, usize),
) -> Result<(), RunError> {
    let (want, len) = bound;
    if elem == want && offset.checked_add(len).is_some_and(|e| e <= buf_len) {
        return Ok(());
    }
    Err(RunError::BadInput {
        program: program.to_string(),
        param: param.to_string(),
        message: format!(
            "bound to {len} elements of {want}, given elements {offset}.. of a buffer of \
             {buf_len} {elem}"
        ),
    })
}

/// An array argument of a bound launch (issue 23; `CpuDevice::bind`, `CudaDevice::bind`):
/// where each run places its plane pointers, and what each run's buffer must hold.
pub(crate) struct BoundArray {
    /// Its first context word.
    pub(crate) word: usize,
    /// The parameter's name (for errors).
    pub(crate) param: String,
    pub(crate) elem: weft_ir::Type,
    /// Elements it reads from its offset.
    pub(crate) len: usize,
    /// Its extents (the CPU's interior/border split).
    pub(crate) shape: Vec<usize>,
}

/// The array arguments of a launch of `p` being bound, one entry per parameter (`None` for
/// a uniform); `arrays` gives each array's element type, lanes and shape. Their plane
/// pointers' words in `words` are zeroed: each run writes its own.
pub(crate) fn bound_arrays<'a>(
    p: &weft_ir::Program,
    layout: &weft_ir::abi::Layout,
    words: &mut [u64],
    arrays: impl Iterator<Item = Option<(weft_ir::Type, usize, &'a [usize])>>,
) -> Vec<Option<BoundArray>> {
    arrays
        .enumerate()
        .map(|(i, a)| {
            let (elem, lanes, shape) = a?;
            let word = layout.params[i];
            words[word..word + lanes].fill(0);
            Some(BoundArray {
                word,
                param: p.param_name(i).to_string(),
                elem,
                len: shape.iter().product(),
                shape: shape.to_vec(),
            })
        })
        .collect()
}

/// The outputs of a bound launch of `p`: each one's element type and first context word.
pub(crate) fn bound_outputs(
    p: &weft_ir::Program,
    layout: &weft_ir::abi::Layout,
) -> Vec<(weft_ir::Type, usize)> {
    p.outputs
        .iter()
        .zip(&layout.outputs)
        .map(|(o, &w)| (o.ty, w))
        .collect()
}
