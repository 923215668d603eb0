//! `weft run --iterate N --feed OUT=IN --until OUT<TOL --sum OUT`: a program run repeatedly
//! with outputs fed back into inputs (Jacobi sweeps, CG steps), stopped by a tolerance on an
//! output; sums of outputs (EP's tallies); 2-D outputs written as PNG heat maps
//! ([`encode_png`]; the files themselves are written by [`super::outputs`]).

use super::{output_index, CliError};
use std::borrow::Cow;
use std::path::Path;
use std::sync::Arc;
use weft_ir::interp::Input;
use weft_ir::konst::{lane_f64, lane_i64};
use weft_ir::{Const, HostArray, Module, ParamKind, Program, ScalarType};
use weft_runtime::{
    BoundLaunch, BufArg, CpuDevice, CudaArg, CudaBoundLaunch, CudaBuffer, CudaDevice,
    CudaGraphExec, HostBuffer,
};

/// How `weft run` repeats a program: at most `max` runs; after each, `feeds` (output,
/// input) pairs move outputs into inputs; `until` (output, tolerance) stops the loop.
pub struct Plan {
    max: u64,
    feeds: Vec<(usize, usize)>,
    until: Option<(usize, f64)>,
    until_name: String,
}

impl Plan {
    /// Checks the `--iterate`, `--feed` and `--until` arguments against `p`'s signature.
    ///
    /// Errors: `--iterate 0`, a feed or condition naming no output/input of `p`, a feed
    /// whose output type is not the input's (element) type, `--feed`/`--until` without
    /// `--iterate`, a tolerance that is not a number.
    pub fn parse(
        p: &Program,
        max: u64,
        feeds: &[String],
        until: Option<&str>,
    ) -> Result<Plan, CliError> {
        if max == 0 {
            return Err("error: --iterate must be at least 1".into());
        }
        if max == 1 && (!feeds.is_empty() || until.is_some()) {
            return Err("error: --feed and --until need --iterate N (N > 1)".into());
        }
        let mut pairs = Vec::new();
        for spec in feeds {
            let (o, i) = spec
                .split_once('=')
                .ok_or_else(|| format!("error: --feed {spec}: expected OUT=IN"))?;
            let oi = output_index(p, o, "--feed")?;
            let ii = p
                .param_index(i)
                .ok_or_else(|| format!("error: --feed {spec}: @{} has no input `{i}`", p.name))?;
            let par = p.params[ii];
            let in_ty = p.ty(par.value);
            let elem = match par.kind {
                ParamKind::Array | ParamKind::Buffer => {
                    in_ty.array_parts().map_or(in_ty, |(_, e, _)| e)
                }
                ParamKind::Varying => in_ty,
                ParamKind::Uniform => {
                    return Err(format!(
                    "error: --feed {spec}: `{i}` is a uniform input; feed varying or array inputs"
                )
                    .into())
                }
            };
            let out_ty = p.outputs[oi].ty;
            if out_ty != elem {
                return Err(format!(
                    "error: --feed {spec}: output `{o}` is {out_ty} but input `{i}` takes {in_ty}"
                )
                .into());
            }
            pairs.push((oi, ii));
        }
        let (until, until_name) = match until {
            None => (None, String::new()),
            Some(spec) => {
                let (o, t) = spec
                    .split_once('<')
                    .ok_or_else(|| format!("error: --until {spec}: expected OUT<TOL"))?;
                let oi = output_index(p, o.trim(), "--until")?;
                let tol: f64 = t
                    .trim()
                    .parse()
                    .map_err(|_| format!("error: --until {spec}: `{t}` is not a number"))?;
                (Some((oi, tol)), o.trim().to_string())
            }
        };
        Ok(Plan {
            max,
            feeds: pairs,
            until,
            until_name,
        })
    }

    /// Whether the program runs more than once.
    pub fn is_iterated(&self) -> bool {
        self.max > 1
    }

    /// Runs `run_once` up to `max` times over `ins` (updated by the feeds): the last
    /// outputs and the number of runs.
    pub fn run(
        &self,
        ins: &mut [Input],
        mut run_once: impl FnMut(&[Input]) -> Result<Vec<HostArray>, CliError>,
    ) -> Result<(Vec<HostArray>, u64), CliError> {
        let mut k = 0;
        loop {
            let outs = run_once(ins)?;
            k += 1;
            let done = self.until.is_some_and(|(o, tol)| max_f64(&outs[o]) < tol);
            if done || k == self.max {
                return Ok((outs, k));
            }
            for &(o, i) in &self.feeds {
                ins[i] = Input::Array(Arc::new(outs[o].clone()));
            }
        }
    }

    /// One line: runs, time, and the stopping condition's value.
    pub fn report(&self, runs: u64, outs: &[HostArray], secs: f64) -> String {
        match self.until {
            Some((o, tol)) => {
                let m = max_f64(&outs[o]);
                let state = if m < tol {
                    format!("converged: max({}) = {m:e} < {tol:e}", self.until_name)
                } else {
                    format!("not converged: max({}) = {m:e}", self.until_name)
                };
                format!("iterations: {runs} in {secs:.3} s ({state})")
            }
            None => format!("iterations: {runs} in {secs:.3} s"),
        }
    }
}

/// Lane bits of scalar type `s` as f64.
fn bits_f64(s: ScalarType, b: u64) -> f64 {
    if s.is_float() {
        lane_f64(s, b)
    } else if s.is_signed_int() {
        lane_i64(s, b) as f64
    } else {
        b as f64
    }
}

fn lanes_f64(a: &HostArray) -> impl Iterator<Item = f64> + '_ {
    let s = a.elem.lanes().map_or(ScalarType::F32, |(s, _)| s);
    a.data.iter().map(move |&b| bits_f64(s, b))
}

/// The largest of `xs`; NaN if any is NaN (so `NaN < tol` never stops a loop); −∞ for none.
fn max_of(xs: impl Iterator<Item = f64>) -> f64 {
    xs.fold(f64::NEG_INFINITY, |m, x| {
        if x.is_nan() || m.is_nan() {
            f64::NAN
        } else {
            m.max(x)
        }
    })
}

/// The largest lane of `a` as f64; NaN if any lane is NaN (so `NaN < tol` never stops a
/// loop); −∞ for an empty array.
pub fn max_f64(a: &HostArray) -> f64 {
    max_of(lanes_f64(a))
}

/// Elements per piece of [`max_f64_buffer`]'s parallel loop.
const PIECE: usize = 1 << 15;

/// [`max_f64`] of a kernel buffer's elements.
fn max_f64_buffer(b: &HostBuffer) -> f64 {
    if let Some(xs) = (0..b.lanes())
        .map(|l| b.plane_f32(l).map(|p| &p[..b.len()]))
        .collect::<Option<Vec<&[f32]>>>()
    {
        // f32 planes read directly (a Jacobi step's `--until` over 512² points), in pieces
        // over the launch pool (as the library's `max` runs), each in a loop the compiler
        // vectorises: `f32::max` ignores NaN, so NaN is tracked on the side. Sixteen
        // running maxima, so the loop has no chain of dependent comparisons.
        let fold = |p: &[f32]| {
            let (mut m, mut nan) = ([f32::NEG_INFINITY; 16], false);
            let mut chunks = p.chunks_exact(16);
            for c in &mut chunks {
                for (mi, &x) in m.iter_mut().zip(c) {
                    nan |= x.is_nan();
                    *mi = mi.max(x);
                }
            }
            for &x in chunks.remainder() {
                nan |= x.is_nan();
                m[0] = m[0].max(x);
            }
            (m.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b)), nan)
        };
        let pieces: Vec<&[f32]> = xs.iter().flat_map(|p| p.chunks(PIECE)).collect();
        let parts: Vec<std::sync::OnceLock<(f32, bool)>> =
            pieces.iter().map(|_| std::sync::OnceLock::new()).collect();
        weft_runtime::parallel_for(pieces.len(), &|i| {
            let _ = parts[i].set(fold(pieces[i]));
        });
        let (m, nan) = parts
            .iter()
            .filter_map(|p| p.get())
            .fold((f32::NEG_INFINITY, false), |(m, n), &(pm, pn)| {
                (m.max(pm), n | pn)
            });
        return if nan { f64::NAN } else { f64::from(m) };
    }
    let s = b.elem().lanes().map_or(ScalarType::F32, |(s, _)| s);
    max_of((0..b.lanes()).flat_map(|l| b.lane_run(l, 0, b.len()).map(move |x| bits_f64(s, x))))
}

/// An argument of [`Plan::run_cpu`]'s and [`Plan::run_cuda`]'s launches: an array kept in a
/// device buffer `B` (with its shape), or a value.
enum Slot<B> {
    Array(B, Vec<usize>),
    Uniform(Const),
}

/// The shapes of the array arguments (empty for values): a bound step is bound to them.
fn slot_shapes<B>(cur: &[Slot<B>]) -> Vec<Vec<usize>> {
    cur.iter()
        .map(|s| match s {
            Slot::Array(_, shape) => shape.clone(),
            Slot::Uniform(_) => Vec::new(),
        })
        .collect()
}

/// The arguments of a CUDA launch over `cur`.
fn cuda_args(cur: &[Slot<CudaBuffer>]) -> Vec<CudaArg<'_>> {
    cur.iter()
        .map(|s| match s {
            Slot::Array(buf, shape) => CudaArg::Array {
                buf,
                offset: 0,
                shape,
            },
            Slot::Uniform(c) => CudaArg::Uniform(*c),
        })
        .collect()
}

/// Whether the array arguments have `shapes` (from [`slot_shapes`]): no allocation per step.
fn same_shapes<B>(shapes: &[Vec<usize>], cur: &[Slot<B>]) -> bool {
    shapes.len() == cur.len()
        && shapes.iter().zip(cur).all(|(s, c)| match c {
            Slot::Array(_, shape) => s == shape,
            Slot::Uniform(_) => s.is_empty(),
        })
}

/// A buffer [`Plan::run_resident`] reads back: in place on the host, downloaded from a GPU.
trait ReadBack {
    fn read(&self) -> Result<Cow<'_, HostBuffer>, CliError>;
}

impl ReadBack for HostBuffer {
    fn read(&self) -> Result<Cow<'_, HostBuffer>, CliError> {
        Ok(Cow::Borrowed(self))
    }
}

impl ReadBack for CudaBuffer {
    fn read(&self) -> Result<Cow<'_, HostBuffer>, CliError> {
        Ok(Cow::Owned(self.download().map_err(runtime_err)?))
    }
}

/// A runtime error as the CLI reports it.
fn runtime_err(e: weft_runtime::RuntimeError) -> CliError {
    format!("error: {e}").into()
}

impl Plan {
    /// [`Plan::run`] of program `name` of `m` on a GPU, with the arrays resident there:
    /// inputs are uploaded once, outputs are fed back where they are, each step downloads
    /// only the `--until` output, and the prepared program is reused (issue 21). The same
    /// launches as [`Plan::run`], so the same bits.
    ///
    /// Errors: as the launches' and transfers'.
    pub fn run_cuda(
        &self,
        gpu: &CudaDevice,
        m: &Module,
        name: &str,
        ins: &[Input],
        shape: Option<&[usize]>,
    ) -> Result<(Vec<HostArray>, u64), CliError> {
        let prog = gpu.prepare(m, name).map_err(runtime_err)?;
        // The step is bound once (issue 23) and queued as a one-node CUDA graph; bound again
        // only if a feed changes an argument's shape. `None` inside: not bindable
        // (interleaved tuple arrays), so each step takes the general path.
        let mut bound: Option<(Option<CudaBoundLaunch>, Vec<Vec<usize>>)> = None;
        let mut graphs: Vec<CudaGraphExec> = Vec::new();
        self.run_resident(
            ins,
            |a| {
                gpu.upload(&HostBuffer::from_host_array(a))
                    .map_err(runtime_err)
            },
            |cur| {
                if bound.as_ref().is_none_or(|b| !same_shapes(&b.1, cur)) {
                    let b = gpu
                        .bind(&prog, &cuda_args(cur), shape)
                        .map_err(runtime_err)?;
                    bound = Some((b, slot_shapes(cur)));
                }
                let Some(b) = bound.as_ref().and_then(|b| b.0.as_ref()) else {
                    let mut l = gpu
                        .launch_buffers_prepared(&prog, &cuda_args(cur), shape)
                        .map_err(runtime_err)?;
                    l.enqueue().map_err(runtime_err)?;
                    let launch = l.launch().shape().to_vec();
                    return Ok((l.into_outputs(), launch));
                };
                let bufs: Vec<Option<(&CudaBuffer, usize)>> = cur
                    .iter()
                    .map(|s| match s {
                        Slot::Array(buf, _) => Some((buf, 0)),
                        Slot::Uniform(_) => None,
                    })
                    .collect();
                let mut words = Vec::new();
                let outs = gpu.bound_words(b, &bufs, &mut words).map_err(runtime_err)?;
                gpu.launch_graph(&mut graphs, &[(b, &words)])
                    .map_err(runtime_err)?;
                Ok((outs.into_vec(), b.shape().to_vec()))
            },
        )
    }

    /// [`Plan::run`] of program `name` of `m` on a CPU device, with the arrays kept in kernel
    /// buffers: inputs are converted once, outputs are fed back as they are, each step reads
    /// only the `--until` output, and the prepared program is reused (issue 21). The same
    /// launches as [`Plan::run`], so the same bits.
    ///
    /// Errors: as the launches'.
    pub fn run_cpu(
        &self,
        cpu: &CpuDevice,
        m: &Module,
        name: &str,
        ins: &[Input],
        shape: Option<&[usize]>,
    ) -> Result<(Vec<HostArray>, u64), CliError> {
        let prog = cpu.prepare(m, name).map_err(runtime_err)?;
        // The step is bound once (issue 23); bound again only if a feed changes an
        // argument's shape.
        let mut bound: Option<(BoundLaunch, Vec<Vec<usize>>)> = None;
        self.run_resident(
            ins,
            |a| Ok(HostBuffer::from_host_array(a)),
            |cur| {
                if bound.as_ref().is_none_or(|b| !same_shapes(&b.1, cur)) {
                    let args: Vec<BufArg> = cur
                        .iter()
                        .map(|s| match s {
                            Slot::Array(buf, shape) => BufArg::Array {
                                buf,
                                offset: 0,
                                shape,
                            },
                            Slot::Uniform(c) => BufArg::Uniform(*c),
                        })
                        .collect();
                    let b = cpu.bind(&prog, &args, shape).map_err(runtime_err)?;
                    bound = Some((b, slot_shapes(cur)));
                }
                let (b, _) = bound.as_ref().expect("bound above");
                let bufs: Vec<Option<(&HostBuffer, usize)>> = cur
                    .iter()
                    .map(|s| match s {
                        Slot::Array(buf, _) => Some((buf, 0)),
                        Slot::Uniform(_) => None,
                    })
                    .collect();
                let outs = cpu.run_bound(b, &bufs).map_err(runtime_err)?;
                Ok((outs, b.shape().to_vec()))
            },
        )
    }

    /// The loop of [`Plan::run_cpu`] and [`Plan::run_cuda`] over device buffers `B`: `put`
    /// stores an input array once, `step` launches over the current arguments (giving the
    /// outputs and the launch shape); only the `--until` output is read back after each
    /// step, every output at the end. Outputs are fed back as they are: moved, or cloned
    /// when one output feeds several inputs.
    fn run_resident<B: Clone + ReadBack>(
        &self,
        ins: &[Input],
        mut put: impl FnMut(&HostArray) -> Result<B, CliError>,
        mut step: impl FnMut(&[Slot<B>]) -> Result<(Vec<B>, Vec<usize>), CliError>,
    ) -> Result<(Vec<HostArray>, u64), CliError> {
        let mut cur: Vec<Slot<B>> = ins
            .iter()
            .map(|i| match i {
                Input::Array(a) => Ok(Slot::Array(put(a)?, a.shape.clone())),
                Input::Uniform(c) => Ok(Slot::Uniform(*c)),
            })
            .collect::<Result<_, CliError>>()?;
        let mut k = 0;
        loop {
            let (outs, launch) = step(&cur)?;
            k += 1;
            let done = match self.until {
                Some((o, tol)) => max_f64_buffer(&*outs[o].read()?) < tol,
                None => false,
            };
            if done || k == self.max {
                let arrays = outs
                    .iter()
                    .map(|b| Ok(b.read()?.to_host_array(&launch)))
                    .collect::<Result<_, CliError>>()?;
                return Ok((arrays, k));
            }
            let mut outs: Vec<Option<B>> = outs.into_iter().map(Some).collect();
            for (n, &(o, i)) in self.feeds.iter().enumerate() {
                let again = self.feeds[n + 1..].iter().any(|&(o2, _)| o2 == o);
                let b = if again {
                    outs[o].clone()
                } else {
                    outs[o].take()
                };
                if let Some(b) = b {
                    cur[i] = Slot::Array(b, launch.clone());
                }
            }
        }
    }
}

/// The sum of every lane of `a` in f64 (in element order).
pub fn sum_f64(a: &HostArray) -> f64 {
    lanes_f64(a).sum()
}

/// Encodes a 2-D output of one lane per element as a PNG viridis heat map with a colour
/// bar (its range: the output's minimum and maximum) to `w`.
///
/// Errors: the output is not 2-D scalars; writing fails.
pub fn encode_png(w: &mut dyn std::io::Write, a: &HostArray) -> Result<(), String> {
    let lanes = a.elem.lanes().map_or(1, |(_, n)| n);
    if a.shape.len() != 2 || lanes != 1 {
        return Err(format!(
            "a PNG needs a 2-D output of scalars; this one has shape {:?} and {lanes} lane(s)",
            a.shape
        ));
    }
    let v: Vec<f32> = lanes_f64(a).map(|x| x as f32).collect();
    let lo = v
        .iter()
        .copied()
        .filter(|x| x.is_finite())
        .fold(f32::INFINITY, f32::min);
    let hi = v
        .iter()
        .copied()
        .filter(|x| x.is_finite())
        .fold(f32::NEG_INFINITY, f32::max);
    weft::data::encode_heatmap_png(w, a.shape[0], a.shape[1], &v, (lo, hi), 1)
}

/// Reads an 8-bit PNG as the contents of an input of type `ty` (a 2-D array of `f32` or `u8`,
/// or a varying `f32`/`u8`): grey levels 0…255, shape (height, width).
pub fn read_png(path: &Path, ty: weft_ir::Type) -> Result<HostArray, String> {
    let (elem, rank) = match ty.array_parts() {
        Some((d, e, _)) => (e, d as usize),
        None => (ty, 2),
    };
    let s = elem.lanes().filter(|&(_, n)| n == 1).map(|(s, _)| s);
    if rank != 2 || !matches!(s, Some(ScalarType::F32 | ScalarType::U8)) {
        return Err(format!(
            "a PNG gives a 2-D array of f32 or u8 grey levels; the input is {ty}"
        ));
    }
    let (h, w, px) = weft::data::read_png_gray(path).map_err(|e| e.to_string())?;
    let mut data = Vec::new();
    data.try_reserve_exact(px.len()).map_err(|_| {
        format!(
            "{}: cannot allocate memory for {h} × {w} pixels",
            path.display()
        )
    })?;
    data.extend(px.iter().map(|&g| {
        if s == Some(ScalarType::U8) {
            g as u64
        } else {
            (g as f32).to_bits() as u64
        }
    }));
    Ok(HostArray {
        elem,
        shape: vec![h, w],
        data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `--until` maximum of a buffer split into pieces over the launch pool is the
    /// maximum of every element, NaN when any element is NaN, as `max_f64` gives.
    #[test]
    fn buffer_maximum_covers_every_piece() {
        let n = 3 * PIECE + 17;
        let mut xs: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 * 1e-3).collect();
        xs[n - 5] = 7.5;
        let a = HostArray::from_f32(&xs);
        let b = HostBuffer::from_host_array(&a);
        assert_eq!(max_f64_buffer(&b), 7.5);
        assert_eq!(max_f64_buffer(&b), max_f64(&a));
        xs[2 * PIECE + 3] = f32::NAN;
        let b = HostBuffer::from_host_array(&HostArray::from_f32(&xs));
        assert!(max_f64_buffer(&b).is_nan());
    }
}
