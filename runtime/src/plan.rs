//! Launch planning shared by the CPU and CUDA devices: argument checks against the program,
//! element ranges inside buffers, and uniform lifting (DESIGN §4) for launches over buffers.

use crate::error::RuntimeError;
use weft_ir::interp::RunError;
use weft_ir::launch::{plan_program_launch_desc, ArgDesc};
use weft_ir::{Const, Module};

/// What the buffer launches of both devices share: checks the arguments against program
/// `name` of `m` (types, shapes, and — through `range`, giving an array argument's first
/// element and its buffer's length — element ranges inside their buffers), then lifts uniform
/// work (DESIGN §4). Returns the module to compile when lifting changed it, and the
/// arguments with the prologue's results appended as uniforms (made with `uniform`).
pub(crate) fn plan_buffers<A: Clone>(
    m: &Module,
    name: &str,
    args: &[A],
    shape: Option<&[usize]>,
    desc: impl for<'x> Fn(&'x A) -> ArgDesc<'x>,
    uniform: impl Fn(Const) -> A,
    range: impl Fn(&A) -> Option<(usize, usize)>,
) -> Result<(Option<Module>, Vec<A>), RuntimeError> {
    let descs: Vec<ArgDesc> = args.iter().map(&desc).collect();
    let (p, _, _) = plan_program_launch_desc(m, name, &descs, shape)?;
    check_ranges(
        p,
        args.iter().zip(&descs).map(|(a, d)| {
            let n = match d {
                ArgDesc::Array { shape, .. } => shape.iter().product(),
                ArgDesc::Uniform(_) => 0,
            };
            range(a).map(|(offset, len)| (offset, n, len))
        }),
    )?;
    let uniforms: Vec<Option<Const>> = descs
        .iter()
        .map(|d| match d {
            ArgDesc::Uniform(c) => Some(*c),
            ArgDesc::Array { .. } => None,
        })
        .collect();
    let lifted = weft_ir::passes::lift::prepare_launch_uniforms(m, name, &uniforms)?;
    let mut all = args.to_vec();
    Ok((
        lifted.map(|(km, extra)| {
            all.extend(extra.into_iter().map(&uniform));
            km
        }),
        all,
    ))
}

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
