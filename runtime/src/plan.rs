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
