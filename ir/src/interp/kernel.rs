//! Kernel mode in the reference interpreter (DESIGN §2): runs a kernel's work-groups with
//! exact barrier semantics, one OS thread per work-item when the kernel has a `barrier`.

use super::{lanes_of, linear, Ctx, Frame, Interpreter, Lanes, RunError};
use crate::konst::{canon, lane_i64};
use crate::launch::KernelGrid;
use crate::opcode::Opcode;
use crate::program::{OpData, ParamKind, Program, Value};
use crate::types::{Boundary, ScalarType, Type};
use rayon::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Instant;

pub use crate::host::KernelArg;

/// A kernel's buffer or shared array while it runs: canonical lanes that work-items load,
/// store and update atomically.
pub struct Mem {
    data: Vec<AtomicU64>,
    shape: Vec<usize>,
    lanes: usize,
}

impl Mem {
    fn new(shape: &[usize], lanes: usize, data: impl Iterator<Item = u64>) -> Mem {
        Mem {
            data: data.map(AtomicU64::new).collect(),
            shape: shape.to_vec(),
            lanes,
        }
    }

    /// A `read` under `boundary`.
    pub(crate) fn read(&self, boundary: Boundary, cs: ScalarType, coords: &Lanes) -> Lanes {
        match linear(&self.shape, boundary, cs, coords) {
            Ok(lin) => {
                let mut out = [0u64; 4];
                for (k, o) in out.iter_mut().enumerate().take(self.lanes) {
                    *o = self.data[lin * self.lanes + k].load(Ordering::Relaxed);
                }
                out
            }
            Err(k) => k,
        }
    }

    /// The element number of in-range `coords`, or `None` (stores and atomics there do
    /// nothing).
    fn in_range(&self, cs: ScalarType, coords: &Lanes) -> Option<usize> {
        let mut lin = 0usize;
        for (ax, &n) in self.shape.iter().enumerate() {
            let c = lane_i64(cs, coords[ax]);
            if c < 0 || c as u64 >= n as u64 {
                return None;
            }
            lin = lin * n + c as usize;
        }
        Some(lin)
    }
}

/// A barrier for the work-items of one group that cannot hang: a work-item that fails
/// aborts it, and a work-item that finishes while others wait at it is a barrier
/// divergence, reported as an error.
pub(crate) struct GroupBarrier {
    n: usize,
    state: Mutex<BarrierState>,
    cv: Condvar,
}

#[derive(Default)]
struct BarrierState {
    arrived: usize,
    finished: usize,
    generation: u64,
    aborted: bool,
    diverged: bool,
}

impl GroupBarrier {
    fn new(n: usize) -> GroupBarrier {
        GroupBarrier {
            n,
            state: Mutex::new(BarrierState::default()),
            cv: Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BarrierState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for the whole group; false if the group was aborted.
    fn wait(&self) -> bool {
        let mut s = self.lock();
        if s.aborted {
            return false;
        }
        s.arrived += 1;
        if s.arrived == self.n {
            s.arrived = 0;
            s.generation += 1;
            self.cv.notify_all();
            return true;
        }
        if s.finished > 0 {
            s.diverged = true;
            s.aborted = true;
            self.cv.notify_all();
            return false;
        }
        let g = s.generation;
        while s.generation == g && !s.aborted {
            s = self.cv.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        !s.aborted
    }

    /// A work-item ended (normally or not; `failed` aborts the group).
    fn finish(&self, failed: bool) {
        let mut s = self.lock();
        s.finished += 1;
        if failed {
            s.aborted = true;
        } else if s.arrived > 0 {
            s.diverged = true;
            s.aborted = true;
        }
        self.cv.notify_all();
    }
}

/// One work-item's view of the launch.
pub(crate) struct WorkItem<'a> {
    local: [i64; 3],
    group: [i64; 3],
    grid: &'a KernelGrid,
    barrier: &'a GroupBarrier,
    start: Instant,
}

/// What a kernel op gave: its result (if any), and whether the work-item must stop.
pub(crate) struct Step {
    pub value: Option<Lanes>,
    pub stop: bool,
}

/// Runs kernel op `d` as work-item `item`. `mem` finds the buffer or shared array an array
/// operand names.
pub(crate) fn exec<'m>(
    item: &WorkItem,
    d: &OpData,
    arg: &dyn Fn(usize) -> Lanes,
    aty: &dyn Fn(usize) -> Type,
    rty: Option<Type>,
    mem: &dyn Fn(Value) -> Option<&'m Mem>,
) -> Step {
    let value = |v: Lanes| Step {
        value: Some(v),
        stop: false,
    };
    let ids = |xs: [i64; 3]| {
        let mut l = [0u64; 4];
        let n = rty.map_or(1, lanes_of);
        for k in 0..n.min(3) {
            l[k] = canon(ScalarType::I32, xs[k] as u64);
        }
        value(l)
    };
    let g = item.grid;
    match d.opcode {
        Opcode::LocalId => ids(item.local),
        Opcode::GroupId => ids(item.group),
        Opcode::LocalSize => ids(g.block.map(i64::from)),
        Opcode::NumGroups => ids(g.groups.map(i64::from)),
        Opcode::Shared => value([0; 4]),
        Opcode::Clock => value([item.start.elapsed().as_nanos() as u64, 0, 0, 0]),
        Opcode::Barrier => Step {
            value: None,
            stop: !item.barrier.wait(),
        },
        Opcode::Store => {
            if let Some(m) = mem(d.args[0]) {
                if let Some(lin) = m.in_range(aty(1).elem_scalar(), &arg(1)) {
                    let v = arg(2);
                    for (k, &x) in v.iter().enumerate().take(m.lanes) {
                        m.data[lin * m.lanes + k].store(x, Ordering::Relaxed);
                    }
                }
            }
            Step {
                value: None,
                stop: false,
            }
        }
        _ => {
            let Some(m) = mem(d.args[0]) else {
                return value([0; 4]);
            };
            let Some(lin) = m.in_range(aty(1).elem_scalar(), &arg(1)) else {
                return value([0; 4]);
            };
            let s = aty(2).elem_scalar();
            let (v, cmp) = if d.opcode == Opcode::AtomicCas {
                (arg(3)[0], arg(2)[0])
            } else {
                (arg(2)[0], 0)
            };
            let update = |old: u64| -> u64 {
                match d.opcode {
                    Opcode::AtomicAdd if s.is_float() => {
                        super::scalar::float_op(Opcode::Add, s, old, v, 0)
                    }
                    Opcode::AtomicAdd => super::scalar::int_binary(Opcode::Add, s, old, v),
                    Opcode::AtomicMin => super::scalar::int_binary(Opcode::Min, s, old, v),
                    Opcode::AtomicMax => super::scalar::int_binary(Opcode::Max, s, old, v),
                    Opcode::AtomicXchg => v,
                    _ if old == cmp => v,
                    _ => old,
                }
            };
            let cell = &m.data[lin * m.lanes];
            let old = cell
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |o| Some(update(o)))
                .unwrap_or_else(|o| o);
            value([old, 0, 0, 0])
        }
    }
}

/// True if kernel `p` has a `barrier` anywhere.
fn has_barrier(p: &Program) -> bool {
    let mut found = false;
    p.walk(&mut |op| found |= p.op(op).opcode == Opcode::Barrier);
    found
}

/// Each axis's coordinate of row-major number `i` with x fastest.
fn unflatten(mut i: usize, dims: [u32; 3]) -> [i64; 3] {
    let mut out = [0i64; 3];
    for (o, &n) in out.iter_mut().zip(&dims) {
        *o = (i % n as usize) as i64;
        i /= n as usize;
    }
    out
}

impl Interpreter<'_> {
    /// Runs kernel `program` over `grid` (DESIGN §2): every work-item of every work-group
    /// runs the body; `barrier` waits for the whole group exactly (one OS thread per
    /// work-item when the kernel has a barrier); buffers are updated in place. Shared
    /// arrays start zeroed (the backends leave them undefined). Work-groups run one after
    /// another when the kernel has a barrier, else in parallel on the rayon pool.
    ///
    /// Errors: a map program, arguments that do not match the parameters (named), a
    /// work-item out of fuel, or work-items of one group reaching different barriers.
    pub fn run_kernel(
        &self,
        program: &str,
        args: &mut [KernelArg],
        grid: &KernelGrid,
    ) -> Result<(), RunError> {
        let p = self.program(program)?;
        crate::launch::check_kernel_host_args(p, args)?;
        for (i, (par, a)) in p.params.iter().zip(args.iter()).enumerate() {
            let ok = match a {
                KernelArg::Buffer(_) => par.kind == ParamKind::Buffer,
                KernelArg::Array(_) => par.kind == ParamKind::Array,
                KernelArg::Value(_) => true,
            };
            if !ok {
                return Err(RunError::BadInput {
                    program: p.name.clone(),
                    param: p.param_name(i).to_string(),
                    message: format!(
                        "is {} parameter: pass it as {}",
                        if par.kind == ParamKind::Buffer {
                            "a buffer"
                        } else {
                            "a read-only array"
                        },
                        if par.kind == ParamKind::Buffer {
                            "a buffer"
                        } else {
                            "an array"
                        }
                    ),
                });
            }
        }
        // Buffers become shared memory cells for the run and are written back after it.
        let mems: Vec<Option<Mem>> = args
            .iter()
            .map(|a| match a {
                KernelArg::Buffer(h) => {
                    Some(Mem::new(&h.shape, lanes_of(h.elem), h.data.iter().copied()))
                }
                _ => None,
            })
            .collect();
        let result = self.run_groups(p, args, &mems, grid);
        for (a, m) in args.iter_mut().zip(mems) {
            if let (KernelArg::Buffer(h), Some(m)) = (a, m) {
                h.data = m.data.into_iter().map(AtomicU64::into_inner).collect();
            }
        }
        result
    }

    fn run_groups(
        &self,
        p: &Program,
        args: &[KernelArg],
        mems: &[Option<Mem>],
        grid: &KernelGrid,
    ) -> Result<(), RunError> {
        let start = Instant::now();
        let barriers = has_barrier(p);
        let run_group = |gi: usize| -> Result<(), RunError> {
            let group = unflatten(gi, grid.groups);
            // Shared arrays, one set per group.
            let mut shared: Vec<(Value, Mem)> = Vec::new();
            for &op in &p.region(p.body).ops {
                let d = p.op(op);
                if d.opcode != Opcode::Shared {
                    continue;
                }
                let Some(&res) = d.results.first() else {
                    continue;
                };
                let Some((_, elem, _)) = p.ty(res).array_parts() else {
                    continue;
                };
                let shape: Vec<usize> = d.args.iter().map(|&a| shared_size(p, a)).collect();
                let n: usize = shape.iter().product::<usize>() * lanes_of(elem);
                shared.push((
                    res,
                    Mem::new(&shape, lanes_of(elem), std::iter::repeat_n(0, n)),
                ));
            }
            let n = grid.group_size();
            let barrier = GroupBarrier::new(n);
            let run_item = |li: usize| -> Result<(), RunError> {
                let item = WorkItem {
                    local: unflatten(li, grid.block),
                    group,
                    grid,
                    barrier: &barrier,
                    start,
                };
                let r = self.run_item(p, args, mems, &shared, &item, gi * n + li);
                barrier.finish(r.is_err());
                r
            };
            let results: Vec<Result<(), RunError>> = if barriers && n > 1 {
                std::thread::scope(|sc| {
                    let hs: Vec<_> = (0..n)
                        .map(|li| {
                            std::thread::Builder::new()
                                .stack_size(1 << 20)
                                .spawn_scoped(sc, move || run_item(li))
                        })
                        .collect();
                    hs.into_iter()
                        .map(|h| match h {
                            Ok(h) => h.join().unwrap_or_else(|_| {
                                Err(launch_error(p, "a work-item thread panicked"))
                            }),
                            Err(e) => Err(launch_error(
                                p,
                                &format!("cannot start a work-item thread: {e}"),
                            )),
                        })
                        .collect()
                })
            } else {
                (0..n).map(run_item).collect()
            };
            let s = barrier.lock();
            if s.diverged {
                return Err(launch_error(
                    p,
                    &format!(
                        "work-items of group {group:?} reached different barriers (a barrier under control flow that varied within the group)"
                    ),
                ));
            }
            drop(s);
            // The first real failure, not the aborts it caused.
            let mut first_abort = None;
            for r in results {
                match r {
                    Err(RunError::Launch { message, .. }) if message == ABORTED => {
                        first_abort = Some(())
                    }
                    Err(e) => return Err(e),
                    Ok(()) => {}
                }
            }
            match first_abort {
                Some(()) => Err(launch_error(p, "a work-group was aborted")),
                None => Ok(()),
            }
        };
        if barriers {
            (0..grid.num_groups()).try_for_each(run_group)
        } else {
            (0..grid.num_groups())
                .into_par_iter()
                .try_for_each(run_group)
        }
    }

    fn run_item(
        &self,
        p: &Program,
        args: &[KernelArg],
        mems: &[Option<Mem>],
        shared: &[(Value, Mem)],
        item: &WorkItem,
        number: usize,
    ) -> Result<(), RunError> {
        let mut f = Frame::new(p);
        for ((par, a), m) in p.params.iter().zip(args).zip(mems) {
            match a {
                KernelArg::Value(c) => f.vals[par.value.index()] = c.lanes,
                KernelArg::Array(h) => f.arrays[par.value.index()] = Some(h),
                KernelArg::Buffer(_) => f.mems[par.value.index()] = m.as_ref(),
            }
        }
        for (v, m) in shared {
            f.mems[v.index()] = Some(m);
        }
        let mut ctx = Ctx {
            fuel: self.fuel,
            index: &[],
            shape: &[],
            out_of_fuel: false,
            launch_error: None,
            item: Some(item),
            aborted: false,
        };
        self.exec_region(p, &mut f, &mut ctx, p.body);
        if ctx.aborted {
            return Err(launch_error(p, ABORTED));
        }
        if let Some(message) = ctx.launch_error.take() {
            return Err(launch_error(p, &message));
        }
        if ctx.out_of_fuel {
            return Err(RunError::OutOfFuel {
                program: p.name.clone(),
                fuel: self.fuel,
                element: number,
            });
        }
        Ok(())
    }
}

const ABORTED: &str = "aborted";

fn launch_error(p: &Program, message: &str) -> RunError {
    RunError::Launch {
        program: p.name.clone(),
        message: message.to_string(),
    }
}

/// The value of a `shared` size operand (the verifier made it a positive `const`).
pub(crate) fn shared_size(p: &Program, a: Value) -> usize {
    match p.value(a).def {
        crate::program::ValueDef::Result(o, _) => match &p.op(o).imm {
            crate::program::Imm::Const(c) => (c.lanes[0] as u32 as i32).max(1) as usize,
            _ => 1,
        },
        _ => 1,
    }
}
