//! Launch checks shared by the CPU and CUDA devices' buffer launches: element ranges inside
//! buffers (the rest of planning is [`crate::prepare::Prepared::plan`]).

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
