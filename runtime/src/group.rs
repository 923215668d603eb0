//! Device groups (issue 27; MC#'s one `GpuConfig` per device, Serdyuk §"Конфигурация GPU";
//! OpenCL's one context over several devices): a map launch over a group is split along its
//! first axis into one part per member, in proportion to the members' weights, and each
//! part runs on its member as the program made by [`weft_ir::launch::launch_part`] — the
//! same `index` and `shape` as in the whole launch — so a group computes the bits one device
//! computes.

use crate::backend::Device;
use crate::cpu::RuntimeError;
use std::ops::Range;
use std::sync::Arc;
use weft_ir::host::lanes_of;
use weft_ir::launch::{launch_part, plan_launch};
use weft_ir::{HostArray, Input, Module, ParamKind, RunError};

/// Launches of rank 1 are split at multiples of this many elements: whole blocks of the
/// reductions' first two levels (`weft::collective`), so that each member reduces its own
/// part of a split result by two levels before anything moves between devices.
pub const ROW_GRANULE_1D: usize = 65536;

/// Devices one launch is split across. Members are shared (`Arc`): a device in a group keeps
/// its kernel cache and resident arrays, and may also be used alone.
pub struct DeviceGroup {
    members: Vec<Arc<Device>>,
    granule: usize,
}

impl DeviceGroup {
    /// A group of `members`, in order (the order of the parts of a split launch). The same
    /// device may appear more than once (its parts then run one after the other, or on two
    /// streams when they are two [`crate::CudaDevice`]s of one GPU).
    ///
    /// # Errors
    /// No member, or a member that is itself a group.
    pub fn new(members: Vec<Arc<Device>>) -> Result<DeviceGroup, RuntimeError> {
        let bad = |message: &str| {
            RuntimeError::Run(RunError::Launch {
                program: String::new(),
                message: message.into(),
            })
        };
        if members.is_empty() {
            return Err(bad("a device group needs at least one device"));
        }
        if members.iter().any(|d| matches!(**d, Device::Group(_))) {
            return Err(bad("a device group cannot hold another group"));
        }
        Ok(DeviceGroup {
            members,
            granule: ROW_GRANULE_1D,
        })
    }

    /// The group splitting launches of rank 1 at multiples of `granule` elements instead of
    /// [`ROW_GRANULE_1D`] (at least 1; the fuzzer splits at every element).
    pub fn with_row_granule(mut self, granule: usize) -> DeviceGroup {
        self.granule = granule.max(1);
        self
    }

    /// The members, in order.
    pub fn members(&self) -> &[Arc<Device>] {
        &self.members
    }

    /// A member's share of a launch: its multiprocessors for a GPU, 1 for a CPU device or
    /// the interpreter.
    pub fn weight(d: &Device) -> u64 {
        match d {
            Device::Cuda(g) => u64::from(g.info().multiprocessors.max(1)),
            _ => 1,
        }
    }

    /// The rows `0..rows` of a launch's first axis cut into one range per member, in order,
    /// in proportion to [`DeviceGroup::weight`] (empty ranges for members left without
    /// rows). A launch of rank 1 is cut at multiples of [`ROW_GRANULE_1D`] (or
    /// [`DeviceGroup::with_row_granule`]'s).
    pub fn split(&self, rows: usize, rank: usize) -> Vec<Range<usize>> {
        let granule = if rank == 1 { self.granule } else { 1 };
        let units = rows.div_ceil(granule) as u128;
        let weights: Vec<u128> = self
            .members
            .iter()
            .map(|d| u128::from(DeviceGroup::weight(d)))
            .collect();
        let total: u128 = weights.iter().sum();
        let mut acc = 0u128;
        let mut start = 0usize;
        weights
            .iter()
            .map(|w| {
                acc += w;
                let end_units = units * acc / total;
                let end = ((end_units as usize).saturating_mul(granule)).min(rows);
                let r = start..end.max(start);
                start = r.end;
                r
            })
            .collect()
    }

    /// Applies program `name` of `m` over host `inputs` (as [`Device::apply`]): each
    /// member runs its rows of the launch, with its rows of every varying input and the
    /// whole of every array input; the outputs are put back together in row order.
    ///
    /// # Errors
    /// As [`Device::apply`]; a part's error names the member it ran on.
    pub fn apply(
        &self,
        m: &Module,
        name: &str,
        inputs: &[Input],
        shape: Option<&[usize]>,
    ) -> Result<Vec<HostArray>, RuntimeError> {
        let p = m
            .get(name)
            .ok_or_else(|| RunError::UnknownProgram(name.to_string()))?;
        let (launch, _) = plan_launch(p, inputs, shape)?;
        let ranges = self.split(launch.first().copied().unwrap_or(0), launch.len());
        if ranges.iter().filter(|r| !r.is_empty()).count() <= 1 {
            // One part: the whole launch on the member that has it (or the first).
            let k = ranges.iter().position(|r| !r.is_empty()).unwrap_or(0);
            return self.members[k].apply(m, name, inputs, shape);
        }
        let (pm, extra) = launch_part(m, name).ok_or_else(|| RunError::Launch {
            program: name.to_string(),
            message: "only map programs can be split across a device group".into(),
        })?;
        let row: usize = launch[1..].iter().product();
        let work: Vec<(&Arc<Device>, &Range<usize>)> = self
            .members
            .iter()
            .zip(&ranges)
            .filter(|(_, r)| !r.is_empty())
            .collect();
        let parts: Vec<Result<Vec<HostArray>, RuntimeError>> = std::thread::scope(|s| {
            let handles: Vec<_> = work
                .iter()
                .map(|&(dev, r)| {
                    let (pm, extra, launch) = (&pm, &extra, &launch);
                    s.spawn(move || {
                        let mut ins: Vec<Input> = inputs
                            .iter()
                            .zip(&p.params)
                            .map(|(inp, par)| match (inp, par.kind) {
                                (Input::Array(a), ParamKind::Varying) => {
                                    Input::Array(Arc::new(rows_of(a, r.clone(), row)))
                                }
                                _ => inp.clone(),
                            })
                            .collect();
                        for q in extra {
                            ins.push(Input::Uniform(q.value(r.start, launch)?));
                        }
                        let mut part = launch.clone();
                        part[0] = r.len();
                        dev.apply(pm, name, &ins, Some(&part))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .collect()
        });
        let mut outs: Vec<HostArray> = p
            .outputs
            .iter()
            .map(|o| HostArray::zeros(o.ty, &launch))
            .collect();
        for (res, (dev, r)) in parts.into_iter().zip(work) {
            let res = res.map_err(|e| RunError::Launch {
                program: name.to_string(),
                message: format!("part {}..{} on {}: {e}", r.start, r.end, dev.backend()),
            })?;
            for (o, part) in outs.iter_mut().zip(res) {
                let w = row * lanes_of(o.elem);
                o.data[r.start * w..r.end * w].copy_from_slice(&part.data);
            }
        }
        Ok(outs)
    }
}

/// Rows `r` of `a`'s first axis (rows of `row` elements) as an array of their own.
fn rows_of(a: &HostArray, r: Range<usize>, row: usize) -> HostArray {
    let w = row * lanes_of(a.elem);
    let mut shape = a.shape.clone();
    shape[0] = r.len();
    HostArray {
        elem: a.elem,
        shape,
        data: a.data[r.start * w..r.end * w].to_vec(),
    }
}
