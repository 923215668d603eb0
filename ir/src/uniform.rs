//! Uniformity analysis: which values are the same for every element of a launch (RapidMind's
//! uniform vs varying), so SIMD and GPU lowerings keep them scalar and branch on them.

use crate::opcode::Opcode;
use crate::program::{Imm, Module, ParamKind, Program, Region, Value};

/// Per value of `p` (indexed by [`Value::index`]): true if uniform.
///
/// Rules: uniform and array parameters, constants, `shape` and `extent` are uniform; `index`
/// and varying parameters are not. In kernels, uniform means the same for every work-item of
/// a work-group: `group_id`, `local_size`, `num_groups` and `shared` are uniform; `local_id`,
/// atomics, `clock` and reads of buffers or shared arrays are not; a pure op or `read` is uniform when all its operands are; a
/// call is uniform when its arguments are and the callee (transitively) never reads `index`;
/// an `if` result is uniform when the condition and both yields are; a loop's carried values
/// are uniform when the loop's control (bounds/step, or its condition) is uniform and every
/// initial value and update is (a fixpoint over the body).
pub fn uniform_values(m: &Module, p: &Program) -> Vec<bool> {
    let params: Vec<bool> = p
        .params
        .iter()
        .map(|x| x.kind != ParamKind::Varying)
        .collect();
    uniform_values_with(m, p, &params)
}

/// Like [`uniform_values`], with the parameters' uniformity given (one flag per parameter):
/// for a program inlined at a call site, whose arguments decide it.
pub fn uniform_values_with(m: &Module, p: &Program, params: &[bool]) -> Vec<bool> {
    let mut u = vec![false; p.num_values()];
    for (par, &uni) in p.params.iter().zip(params) {
        u[par.value.index()] = uni;
    }
    region(m, p, p.body, &mut u);
    u
}

/// True if `p` or a program it calls reads `index` (or `read_offset`, which reads at it).
pub fn uses_index(m: &Module, p: &Program) -> bool {
    m.reaches_op(p, |o| o.reads_index())
}

/// True if `a` is a read-only array parameter (not a kernel's buffer or shared array).
fn read_only(p: &Program, a: Value) -> bool {
    match p.value(a).def {
        crate::program::ValueDef::Param(i) => p.params[i as usize].kind == ParamKind::Array,
        _ => false,
    }
}

fn all(u: &[bool], vals: &[Value]) -> bool {
    vals.iter().all(|v| u[v.index()])
}

/// The terminator operands of region `r`.
fn yields(p: &Program, r: Region) -> &[Value] {
    p.region(r)
        .ops
        .last()
        .map_or(&[], |&o| p.op(o).args.as_slice())
}

fn region(m: &Module, p: &Program, r: Region, u: &mut Vec<bool>) {
    for &op in &p.region(r).ops {
        let d = p.op(op);
        let res_uniform: Vec<bool> = match d.opcode {
            Opcode::Yield | Opcode::Return => continue,
            Opcode::Const | Opcode::Shape | Opcode::Extent => vec![true; d.results.len()],
            Opcode::Index
            | Opcode::ReadOffset
            | Opcode::LocalId
            | Opcode::Clock
            | Opcode::AtomicAdd
            | Opcode::AtomicMin
            | Opcode::AtomicMax
            | Opcode::AtomicXchg
            | Opcode::AtomicCas => vec![false; d.results.len()],
            // A kernel's buffers and shared arrays change as work-items store into them.
            Opcode::Read => {
                let ro = d.args.first().is_some_and(|&a| read_only(p, a));
                vec![ro && all(u, &d.args); d.results.len()]
            }
            Opcode::Call => {
                let pure = match &d.imm {
                    Imm::Callee(n) => m.get(n).is_some_and(|c| !uses_index(m, c)),
                    _ => false,
                };
                vec![pure && all(u, &d.args); d.results.len()]
            }
            Opcode::If => {
                let c = u[d.args[0].index()];
                for &r in &d.regions {
                    region(m, p, r, u);
                }
                let (t, e) = (yields(p, d.regions[0]), yields(p, d.regions[1]));
                (0..d.results.len())
                    .map(|i| {
                        c && t.get(i).is_some_and(|v| u[v.index()])
                            && e.get(i).is_some_and(|v| u[v.index()])
                    })
                    .collect()
            }
            Opcode::For | Opcode::While | Opcode::DoUntil => loop_uniformity(m, p, op, u),
            _ => vec![all(u, &d.args); d.results.len()],
        };
        for (&v, uni) in d.results.iter().zip(res_uniform) {
            u[v.index()] = uni;
        }
    }
}

/// Fixpoint for a loop: returns the uniformity of its results.
fn loop_uniformity(m: &Module, p: &Program, op: crate::Op, u: &mut Vec<bool>) -> Vec<bool> {
    let d = p.op(op);
    let (inits, control_ops): (&[Value], &[Value]) = match d.opcode {
        Opcode::For => (&d.args[3..], &d.args[..3]),
        _ => (&d.args[..], &[]),
    };
    let n = inits.len();
    // Optimistic start: a carried value is uniform if its initial value is.
    let mut carried: Vec<bool> = inits.iter().map(|v| u[v.index()]).collect();
    let mut control = all(u, control_ops);
    loop {
        if !control {
            carried = vec![false; n];
        }
        // Region arguments: `for` has the induction variable first.
        for &r in &d.regions {
            let args = &p.region(r).args;
            let skip = args.len() - n;
            for (k, &a) in args.iter().enumerate() {
                u[a.index()] = if k < skip { control } else { carried[k - skip] };
            }
            region(m, p, r, u);
        }
        let (body, cond) = match d.opcode {
            Opcode::For => (d.regions[0], None),
            Opcode::While => (d.regions[1], Some(d.regions[0])),
            _ => (d.regions[0], Some(d.regions[1])),
        };
        let ys = yields(p, body);
        let new_carried: Vec<bool> = (0..n)
            .map(|i| carried[i] && ys.get(i).is_some_and(|v| u[v.index()]))
            .collect();
        let new_control =
            control && cond.is_none_or(|c| yields(p, c).first().is_some_and(|v| u[v.index()]));
        if new_carried == carried && new_control == control {
            return if control { carried } else { vec![false; n] };
        }
        carried = new_carried;
        control = new_control;
    }
}
