//! Recorded launch sequences (issue 23; Dr.Jit's `@dr.freeze`, NVIDIA Warp's
//! `ScopedCapture`): the launches a closure makes — applies, reductions left on the device —
//! are recorded once with the data flow between them, and replayed on new input arrays of
//! the same signatures with no re-recording, argument checks, planning or deferral.
//!
//! Recording runs the closure once, for real, on arrays whose storage identity marks them
//! as the sequence's inputs; every launch it makes (through [`crate::exec`]) notes where
//! each of its array arguments comes from: an input, an output of an earlier launch of the
//! recording, or an array from outside (a constant of the sequence, held by it). Reading a
//! recorded result on the host while recording is an error: a value the host reads cannot
//! be replayed (keep it on the device: [`crate::sum_array`], one-element arrays read by the
//! next program).

use crate::apply::{Bundle, Outputs};
use crate::array::{row_major, Array, ArrayData, Dims, Source, Storage};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::exec::{run, ArgVal, Prepared};
use crate::scalar::Elem;
use std::cell::RefCell;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Arc, OnceLock};
use weft_ir::{Boundary, Module, Type};
use weft_runtime::{
    BoundLaunch, BufArg, CpuDevice, CudaArg, CudaBoundLaunch, CudaBuffer, CudaDevice,
    CudaGraphExec, HostBuffer,
};

/// Where an array of a recorded launch comes from.
#[derive(Clone, Copy, Debug)]
enum Src {
    /// Input `i` of the sequence.
    Input(usize),
    /// Output `k` of recorded launch `s`.
    Out(usize, usize),
}

/// A view of a recorded array: `shape` elements from `offset` (relative to the start of an
/// input's view, or of a launch's output).
#[derive(Clone)]
struct Slot {
    src: Src,
    offset: usize,
    shape: Dims,
    boundary: Option<Boundary>,
}

/// An argument of a recorded launch.
#[derive(Clone)]
enum StepArg {
    /// A value or an array that is the same on every replay.
    Fixed(ArgVal),
    /// An array the sequence computes or takes as input.
    Slot(Slot),
}

/// One recorded launch: what [`crate::exec::prepare`] made of it, with its array arguments
/// as slots.
struct Step {
    dev: Device,
    module: Arc<Module>,
    program: usize,
    args: Vec<StepArg>,
    shape: Vec<usize>,
    /// On the CPU, the launch bound at the first replay.
    bound: OnceLock<CpuBound>,
    /// On a GPU, the launch bound at the first replay (`None`: not bindable).
    cuda_bound: OnceLock<Option<CudaBound>>,
    /// A launch with one output reduced inside its kernels (`Program::apply_reduce` on a
    /// CPU device compiling with LLVM): that output's result is the partial states.
    reduce: Option<weft_backend_llvm::HostReduce>,
}

/// A step's launch bound on a GPU ([`weft_runtime::CudaDevice::bind`]), with the device
/// copies of its fixed arrays.
struct CudaBound {
    launch: CudaBoundLaunch,
    fixed: Vec<Option<(CudaBuffer, usize)>>,
}

/// A step's launch bound on the CPU ([`weft_runtime::CpuDevice::bind`]), with the host
/// buffers of its fixed arrays (storage is never written once shared).
struct CpuBound {
    launch: BoundLaunch,
    fixed: Vec<Option<(Arc<HostBuffer>, usize)>>,
}

/// An output of the sequence.
enum OutSrc {
    Slot(Slot),
    /// An array the closure returned that no recorded launch computed (held as it was).
    Fixed(ArrayData),
}

/// The launches a thread is recording.
#[derive(Default)]
struct Recorder {
    /// Storage address → what it holds. The storages are held in `held` while recording,
    /// so an address names one storage.
    known: HashMap<usize, Src>,
    held: Vec<Arc<Storage>>,
    steps: Vec<Step>,
    /// Where each input's view starts in its storage.
    base: Vec<usize>,
}

impl Recorder {
    /// The slot of `d` when its storage is an input or a launch result of the recording.
    fn slot(&self, d: &ArrayData) -> Option<Slot> {
        let Source::Stored(s) = &d.source else {
            return None;
        };
        let src = *self.known.get(&addr(s))?;
        let base = match src {
            Src::Input(i) => self.base[i],
            Src::Out(..) => 0,
        };
        Some(Slot {
            src,
            offset: d.offset - base,
            shape: d.shape.clone(),
            boundary: d.boundary,
        })
    }
}

thread_local! {
    static RECORDER: RefCell<Option<Recorder>> = const { RefCell::new(None) };
}

fn addr(s: &Arc<Storage>) -> usize {
    Arc::as_ptr(s) as usize
}

/// Whether this thread is recording a sequence.
pub(crate) fn recording() -> bool {
    RECORDER.with(|r| r.borrow().is_some())
}

/// Errors when `s` holds an input or a result of the sequence this thread is recording:
/// `what` (e.g. "Array::to_vec") would read on the host a value that a replay cannot
/// reproduce.
pub(crate) fn check_host_read(s: &Arc<Storage>, what: &str) -> Result<()> {
    if !recording() {
        return Ok(());
    }
    let known = RECORDER.with(|r| {
        r.borrow()
            .as_ref()
            .is_some_and(|r| r.known.contains_key(&addr(s)))
    });
    if known {
        return Err(Error::argument(format!(
            "{what} reads a result of the sequence being recorded on the host: a replay \
             cannot repeat a host read. Keep the value on the device (`sum_array` instead of \
             `sum`, a one-element array read by the next program) and read it after \
             `replay`/`repeat`/`until`"
        )));
    }
    Ok(())
}

/// Errors when this thread is recording: `what` cannot be recorded.
pub(crate) fn check_not_recording(what: impl FnOnce() -> String) -> Result<()> {
    if recording() {
        return Err(Error::argument(format!(
            "{} cannot be recorded in a sequence (only applies and reductions are)",
            what()
        )));
    }
    Ok(())
}

/// Notes a launch of `l` on `dev` whose outputs are `outs`, when this thread is recording.
pub(crate) fn note_launch(dev: &Device, l: &Prepared, outs: &[ArrayData]) {
    note(dev, l, outs, None);
}

/// Notes a launch of `l` on `dev` with output `r.output` reduced inside its kernels
/// ([`crate::exec::run_reduced`]), when this thread is recording: `outs` are its outputs
/// with the partial states in that output's place.
pub(crate) fn note_reduced_launch(
    dev: &Device,
    l: &Prepared,
    outs: &[ArrayData],
    r: weft_backend_llvm::HostReduce,
) {
    note(dev, l, outs, Some(r));
}

fn note(
    dev: &Device,
    l: &Prepared,
    outs: &[ArrayData],
    reduce: Option<weft_backend_llvm::HostReduce>,
) {
    if !recording() {
        return;
    }
    RECORDER.with(|r| {
        let mut r = r.borrow_mut();
        let Some(r) = r.as_mut() else { return };
        let args = l
            .args
            .iter()
            .map(|a| match a {
                ArgVal::Array(d) => r
                    .slot(d)
                    .map_or_else(|| StepArg::Fixed(a.clone()), StepArg::Slot),
                ArgVal::Uniform(_) => StepArg::Fixed(a.clone()),
            })
            .collect();
        let s = r.steps.len();
        for (k, o) in outs.iter().enumerate() {
            if let Source::Stored(st) = &o.source {
                r.known.insert(addr(st), Src::Out(s, k));
                r.held.push(st.clone());
            }
        }
        r.steps.push(Step {
            dev: dev.clone(),
            module: l.module.clone(),
            program: l.program,
            args,
            shape: l.shape.clone(),
            bound: OnceLock::new(),
            cuda_bound: OnceLock::new(),
            reduce,
        });
    });
}

/// Arrays a sequence takes and gives: an [`Array`], or a tuple of 2 to 4 arrays.
pub trait Arrays: Outputs + Clone {
    /// The arrays in order, untyped.
    fn to_bundle(&self) -> Bundle;

    /// [`Arrays::to_bundle`], taking the arrays (no copy of their views).
    fn into_bundle(self) -> Bundle {
        self.to_bundle()
    }
}

impl<const D: usize, T: Elem> Arrays for Array<D, T> {
    fn to_bundle(&self) -> Bundle {
        Bundle {
            outs: vec![self.data.clone()],
        }
    }

    fn into_bundle(self) -> Bundle {
        Bundle {
            outs: vec![self.data],
        }
    }
}

macro_rules! tuple_arrays {
    ($($t:ident $d:ident $i:tt),*) => {
        impl<$(const $d: usize, $t: Elem),*> Arrays for ($(Array<$d, $t>,)*) {
            fn to_bundle(&self) -> Bundle {
                Bundle { outs: vec![$(self.$i.data.clone()),*] }
            }

            fn into_bundle(self) -> Bundle {
                Bundle { outs: vec![$(self.$i.data),*] }
            }
        }
    };
}
tuple_arrays!(A DA 0, B DB 1);
tuple_arrays!(A DA 0, B DB 1, C DC 2);
tuple_arrays!(A DA 0, B DB 1, C DC 2, E DE 3);

/// The signature of one input: element type, shape, boundary mode.
struct InputSig {
    elem: Type,
    shape: Dims,
    boundary: Option<Boundary>,
}

/// A recorded launch sequence taking arrays `I` and giving arrays `O` (issue 23): made by
/// [`Sequence::record`], run again by [`Sequence::replay`], and, when it gives what it
/// takes, looped by [`Sequence::repeat`] and [`Sequence::until`].
///
/// A replay runs the recorded launches in order on their devices with the new inputs, with
/// no re-recording, argument checks, planning or deferral: on the CPU each launch runs at
/// once; on a GPU each is queued on the device's stream. It computes what the same applies
/// compute one by one, bit for bit. Arrays from outside the closure (a matrix, a constant)
/// are held by the sequence as they were when recorded; uniforms keep their recorded
/// values.
pub struct Sequence<I, O> {
    /// Every launch runs on a CPU device: replays take [`Sequence::replay_cpu`].
    all_cpu: bool,
    /// Every launch runs on one GPU: replays take [`Sequence::replay_cuda`] (a CUDA graph)
    /// until a launch turns out not to be bindable.
    all_cuda: std::sync::atomic::AtomicBool,
    /// The CUDA graphs of the replays (see [`CudaDevice::launch_graph`]).
    graph: std::sync::Mutex<Vec<CudaGraphExec>>,
    inputs: Vec<InputSig>,
    steps: Vec<Step>,
    outputs: Vec<OutSrc>,
    /// After each launch of a replay, the launch results no later launch or output reads
    /// (step, output), released then: a replay holds no more buffers than the launches one
    /// by one would (the pools reuse them; an iterated stencil does not touch fresh pages).
    release: Vec<Vec<(usize, usize)>>,
    _io: PhantomData<fn(I) -> O>,
}

/// Resets the thread's recorder when recording ends (also by a panic).
struct Stop;

impl Drop for Stop {
    fn drop(&mut self) {
        RECORDER.with(|r| r.borrow_mut().take());
    }
}

impl<I: Arrays, O: Arrays> Sequence<I, O> {
    /// Records the launches `f` makes on `inputs` (run once, for real) and returns the
    /// sequence with `f`'s results. Inside `f`, apply programs and use the reductions that
    /// leave their result on the device ([`crate::sum_array`]); the arrays `f` is given
    /// stand for the inputs of every later replay.
    ///
    /// # Errors
    /// `f`'s own error; an input that is a grid; a recording already running on this
    /// thread; a host read of a recorded array inside `f` (`to_vec`, `get`, `sum`, …) or a
    /// kernel launch, named.
    pub fn record(inputs: &I, f: impl FnOnce(I) -> Result<O>) -> Result<(Self, O)> {
        if recording() {
            return Err(Error::argument(
                "a sequence is already being recorded on this thread (recordings do not nest)",
            ));
        }
        let mut rec = Recorder::default();
        let mut sigs = Vec::new();
        let mut given = Vec::new();
        for (i, d) in inputs.to_bundle().outs.into_iter().enumerate() {
            let d = d.contiguous_view()?;
            let Source::Stored(s) = &d.source else {
                return Err(Error::argument(format!(
                    "input {i} of the sequence is a grid: pass it to the programs inside"
                )));
            };
            // A storage of its own, holding the same contents: two inputs sharing storage
            // (`p = r.clone()`) are told apart.
            let own = Storage::alias(s)?;
            rec.known.insert(addr(&own), Src::Input(i));
            rec.held.push(own.clone());
            rec.base.push(d.offset);
            sigs.push(InputSig {
                elem: d.elem,
                shape: d.shape.clone(),
                boundary: d.boundary,
            });
            given.push(ArrayData {
                source: Source::Stored(own),
                ..d
            });
        }
        let ins = I::from_bundle(Bundle { outs: given })?;
        RECORDER.with(|r| *r.borrow_mut() = Some(rec));
        let stop = Stop;
        let out = f(ins);
        let rec = RECORDER
            .with(|r| r.borrow_mut().take())
            .expect("set above, taken only here and by Stop");
        drop(stop);
        let out = out?;
        let outputs: Vec<OutSrc> = out
            .to_bundle()
            .outs
            .into_iter()
            .map(|d| rec.slot(&d).map_or(OutSrc::Fixed(d), OutSrc::Slot))
            .collect();
        let all_cpu = rec
            .steps
            .iter()
            .all(|s| matches!(&*s.dev.0, crate::device::Kind::Cpu(_)));
        let all_cuda = rec.steps.first().is_some_and(|f| {
            matches!(&*f.dev.0, crate::device::Kind::Cuda(_))
                && rec.steps.iter().all(|s| Arc::ptr_eq(&s.dev.0, &f.dev.0))
        });
        let seq = Sequence {
            all_cpu,
            all_cuda: all_cuda.into(),
            graph: std::sync::Mutex::new(Vec::new()),
            inputs: sigs,
            release: last_uses(&rec.steps, &outputs),
            steps: rec.steps,
            outputs,
            _io: PhantomData,
        };
        Ok((seq, out))
    }

    /// The number of recorded launches.
    pub fn launches(&self) -> usize {
        self.steps.len()
    }

    /// Runs the recorded launches again on `inputs` and returns the outputs.
    ///
    /// # Errors
    /// An input of another element type, shape or boundary mode than recorded (named); a
    /// launch's failure (naming its program).
    pub fn replay(&self, inputs: &I) -> Result<O> {
        let outs = self.replay_data(inputs.to_bundle().outs)?;
        O::from_bundle(Bundle { outs })
    }

    fn replay_data(&self, inputs: Vec<ArrayData>) -> Result<Vec<ArrayData>> {
        let ins = self.checked_inputs(inputs)?;
        if self.all_cpu {
            return self.replay_cpu(&ins);
        }
        if self.all_cuda.load(std::sync::atomic::Ordering::Relaxed) {
            if let Some(outs) = self.replay_cuda(&ins)? {
                return Ok(outs);
            }
            self.all_cuda
                .store(false, std::sync::atomic::Ordering::Relaxed);
        }
        self.replay_general(&ins)
    }

    /// `inputs` checked against the recorded signatures, each contiguous.
    fn checked_inputs(&self, inputs: Vec<ArrayData>) -> Result<smallvec::SmallVec<[ArrayData; 6]>> {
        if inputs.len() != self.inputs.len() {
            return Err(Error::argument(format!(
                "the sequence takes {} inputs, {} were given",
                self.inputs.len(),
                inputs.len()
            )));
        }
        let mut ins: smallvec::SmallVec<[ArrayData; 6]> = smallvec::SmallVec::new();
        for (i, (d, sig)) in inputs.into_iter().zip(&self.inputs).enumerate() {
            if d.elem != sig.elem || d.shape != sig.shape || d.boundary != sig.boundary {
                return Err(Error::argument(format!(
                    "input {i} of the sequence: recorded as {:?} elements of {}{}, given {:?} \
                     elements of {}{}",
                    &sig.shape[..],
                    sig.elem,
                    boundary_note(sig.boundary),
                    &d.shape[..],
                    d.elem,
                    boundary_note(d.boundary)
                )));
            }
            let d = if d.contiguous() && matches!(d.source, Source::Stored(_)) {
                d
            } else {
                d.contiguous_view()?
            };
            if matches!(d.source, Source::Grid) {
                return Err(Error::argument(format!(
                    "input {i} of the sequence is a grid"
                )));
            }
            ins.push(d);
        }
        Ok(ins)
    }

    /// A replay through the ordinary launch path (the interpreter, several devices).
    fn replay_general(&self, ins: &[ArrayData]) -> Result<Vec<ArrayData>> {
        let mut results: Vec<smallvec::SmallVec<[Arc<Storage>; 4]>> =
            Vec::with_capacity(self.steps.len());
        let view = |s: &Slot, results: &[smallvec::SmallVec<[Arc<Storage>; 4]>]| match s.src {
            Src::Input(i) => slot_view(s, input_storage(&ins[i]).clone(), ins[i].offset),
            Src::Out(st, k) => slot_view(s, results[st][k].clone(), 0),
        };
        for step in &self.steps {
            let args = step
                .args
                .iter()
                .map(|a| match a {
                    StepArg::Fixed(v) => v.clone(),
                    StepArg::Slot(s) => ArgVal::Array(view(s, &results)),
                })
                .collect();
            let l = Prepared {
                module: step.module.clone(),
                program: step.program,
                args,
                shape: step.shape.clone(),
            };
            let failed =
                |e: Error| Error::argument(format!("replayed launch of @{} failed: {e}", l.name()));
            if let Some(r) = step.reduce {
                let (mut keep, partials) = crate::exec::run_reduced(&step.dev, &l, r)
                    .and_then(|o| o.ok_or_else(|| Error::argument("not a CPU device")))
                    .map_err(failed)?;
                keep.insert(r.output, partials);
                results.push(keep.iter().map(|d| input_storage(d).clone()).collect());
                continue;
            }
            let outs = run(&step.dev, &l).map_err(failed)?;
            results.push(outs.into_iter().map(Storage::from_resident).collect());
        }
        Ok(self.outputs_from(ins, |st, k| results[st][k].clone()))
    }
}

impl<I, O> Sequence<I, O> {
    /// A replay whose launches all run on CPU devices: each step's launch is bound once
    /// ([`CpuDevice::bind`]) and run over host buffers, with no storage, lock or check per
    /// intermediate array.
    fn replay_cpu(&self, ins: &[ArrayData]) -> Result<Vec<ArrayData>> {
        let in_bufs = ins
            .iter()
            .map(|d| Ok((input_storage(d).host()?, d.offset)))
            .collect::<Result<smallvec::SmallVec<[_; 6]>>>()?;
        // Each launch's output buffers until their last reader (no `Arc` per buffer: only
        // the sequence's outputs are shared, at the end).
        let mut results: Vec<Vec<Option<HostBuffer>>> = Vec::with_capacity(self.steps.len());
        for (si, step) in self.steps.iter().enumerate() {
            let crate::device::Kind::Cpu(cpu) = &*step.dev.0 else {
                unreachable!("all_cpu")
            };
            let slot = |s: &Slot| -> (&HostBuffer, usize) {
                match s.src {
                    Src::Input(i) => (&*in_bufs[i].0, in_bufs[i].1 + s.offset),
                    Src::Out(st, k) => (
                        results[st][k]
                            .as_ref()
                            .expect("released after its last use"),
                        s.offset,
                    ),
                }
            };
            let bound = match step.bound.get() {
                Some(b) => b,
                None => {
                    let b = bind(cpu, step, &slot)?;
                    step.bound.get_or_init(|| b)
                }
            };
            let outs = {
                let bufs = step_args(
                    step,
                    &bound.fixed,
                    |b| &**b,
                    &slot,
                    |buf, offset, _| Some((buf, offset)),
                    |_| None,
                );
                let failed = |e: weft_runtime::RuntimeError| {
                    Error::argument(format!(
                        "replayed launch of @{} failed: {e}",
                        step.module.programs[step.program].name
                    ))
                };
                match step.reduce {
                    Some(r) => {
                        let (mut outs, partials) = cpu
                            .run_bound_reduced(&bound.launch, &bufs, r.output)
                            .map_err(failed)?;
                        outs[r.output] = partials;
                        outs
                    }
                    None => cpu.run_bound(&bound.launch, &bufs).map_err(failed)?,
                }
            };
            results.push(outs.into_iter().map(Some).collect());
            for &(st, k) in &self.release[si] {
                results[st][k] = None;
            }
        }
        // The buffers left are the sequence's outputs' (the others were released after
        // their last reader), each shared by the outputs that name it.
        type Kept = ((usize, usize), Arc<Storage>);
        let mut kept: smallvec::SmallVec<[Kept; 8]> = smallvec::SmallVec::new();
        for (st, r) in results.into_iter().enumerate() {
            for (k, b) in r.into_iter().enumerate() {
                if let Some(b) = b {
                    kept.push(((st, k), Storage::from_host_arc(Arc::new(b))));
                }
            }
        }
        Ok(self.outputs_from(ins, |st, k| {
            kept.iter()
                .find(|(at, _)| *at == (st, k))
                .map(|(_, s)| s.clone())
                .expect("outputs are kept")
        }))
    }

    /// The sequence's outputs of a replay on inputs `ins` whose launch result (step, output)
    /// is the storage `result` gives.
    fn outputs_from(
        &self,
        ins: &[ArrayData],
        result: impl Fn(usize, usize) -> Arc<Storage>,
    ) -> Vec<ArrayData> {
        self.outputs
            .iter()
            .map(|o| match o {
                OutSrc::Slot(s) => match s.src {
                    Src::Input(i) => slot_view(s, input_storage(&ins[i]).clone(), ins[i].offset),
                    Src::Out(st, k) => slot_view(s, result(st, k), 0),
                },
                OutSrc::Fixed(d) => d.clone(),
            })
            .collect()
    }
}

/// The storage of a replay input (made contiguous and checked by `replay_data`).
fn input_storage(d: &ArrayData) -> &Arc<Storage> {
    match &d.source {
        Source::Stored(st) => st,
        Source::Grid => unreachable!("checked by replay_data"),
    }
}

/// Slot `s`'s view of `store`, whose elements start at `base`.
fn slot_view(s: &Slot, store: Arc<Storage>, base: usize) -> ArrayData {
    ArrayData {
        elem: store.elem,
        source: Source::Stored(store),
        strides: row_major(&s.shape),
        shape: s.shape.clone(),
        offset: base + s.offset,
        boundary: s.boundary,
    }
}

impl<I, O> Sequence<I, O> {
    /// A replay whose launches all run on one GPU, as one CUDA graph: each step's launch is
    /// bound at the first replay and only its buffer addresses change. `None` when a launch
    /// cannot be bound (nothing has been queued then).
    fn replay_cuda(&self, ins: &[ArrayData]) -> Result<Option<Vec<ArrayData>>> {
        let crate::device::Kind::Cuda(gpu) = &*self.steps[0].dev.0 else {
            unreachable!("all_cuda")
        };
        let in_bufs = ins
            .iter()
            .map(|d| Ok((input_storage(d).cuda(gpu)?, d.offset)))
            .collect::<Result<smallvec::SmallVec<[_; 6]>>>()?;
        let mut results: Vec<smallvec::SmallVec<[Option<CudaBuffer>; 4]>> =
            Vec::with_capacity(self.steps.len());
        // Every launch's words in one vector; launch `s`'s at `ranges[s]`.
        let mut words: Vec<u64> = Vec::with_capacity(
            self.steps
                .iter()
                .filter_map(|s| s.cuda_bound.get().and_then(Option::as_ref))
                .map(|b| CudaDevice::bound_word_count(&b.launch))
                .sum(),
        );
        let mut ranges: smallvec::SmallVec<[std::ops::Range<usize>; 16]> =
            smallvec::SmallVec::new();
        for (si, step) in self.steps.iter().enumerate() {
            let slot = |s: &Slot| -> (&CudaBuffer, usize) {
                match s.src {
                    Src::Input(i) => (&in_bufs[i].0, in_bufs[i].1 + s.offset),
                    Src::Out(st, k) => (
                        results[st][k]
                            .as_ref()
                            .expect("released after its last use"),
                        s.offset,
                    ),
                }
            };
            let at = words.len();
            let Some((_, outs)) = cuda_step_words(gpu, step, &slot, &mut words)? else {
                return Ok(None);
            };
            ranges.push(at..words.len());
            results.push(outs.into_iter().map(Some).collect());
            // Released buffers go back to the device's pool: a later launch of the graph
            // that reuses one runs after every earlier one (the nodes are a chain).
            for &(st, k) in &self.release[si] {
                results[st][k] = None;
            }
        }
        let launches: smallvec::SmallVec<[(&CudaBoundLaunch, &[u64]); 16]> = self
            .steps
            .iter()
            .zip(&ranges)
            .map(|(s, r)| {
                let b = s.cuda_bound.get().and_then(Option::as_ref);
                (&b.expect("bound above").launch, &words[r.clone()])
            })
            .collect();
        let mut graph = self.graph.lock().unwrap_or_else(|e| e.into_inner());
        gpu.launch_graph(&mut graph, &launches)
            .map_err(|e| Error::argument(format!("replayed sequence failed: {e}")))?;
        drop(graph);
        Ok(Some(self.outputs_from(ins, |st, k| {
            Storage::from_resident(crate::array::Resident::Cuda(
                results[st][k].clone().expect("outputs are kept"),
            ))
        })))
    }
}

/// `step`'s launch on `gpu`, bound at its first use (to the buffers `slot` gives then), with
/// its parameter words over the buffers `slot` gives now appended to `words`: the bound
/// launch and its output buffers (from the device's pool). `None` when the launch cannot be
/// bound.
#[allow(clippy::type_complexity)]
fn cuda_step_words<'s: 'b, 'b>(
    gpu: &CudaDevice,
    step: &'s Step,
    slot: &dyn Fn(&Slot) -> (&'b CudaBuffer, usize),
    words: &mut Vec<u64>,
) -> Result<Option<(&'s CudaBound, smallvec::SmallVec<[CudaBuffer; 4]>)>> {
    let bound = match step.cuda_bound.get() {
        Some(b) => b,
        None => {
            let b = bind_cuda(gpu, step, slot)?;
            step.cuda_bound.get_or_init(|| b)
        }
    };
    let Some(bound) = bound else {
        return Ok(None);
    };
    let bufs = step_args(
        step,
        &bound.fixed,
        |b| b,
        slot,
        |buf, offset, _| Some((buf, offset)),
        |_| None,
    );
    let outs = gpu.bound_words(&bound.launch, &bufs, words)?;
    Ok(Some((bound, outs)))
}

/// Where `step`'s fixed arrays live on a device (`get` gives a storage's copy there).
fn fixed_arrays<B>(
    step: &Step,
    get: impl Fn(&Arc<Storage>) -> Result<B>,
) -> Result<Vec<Option<(B, usize)>>> {
    step.args
        .iter()
        .map(|a| match a {
            StepArg::Fixed(ArgVal::Array(d)) => match &d.source {
                Source::Stored(s) => Ok(Some((get(s)?, d.offset))),
                Source::Grid => unreachable!("grids are rewritten by `prepare`"),
            },
            _ => Ok(None),
        })
        .collect()
}

/// `step`'s arguments as a device's launch arguments `A` over buffers `T`: slots from
/// `slot`, fixed arrays from `fixed` (through `deref`), made by `array` and `uniform`.
fn step_args<'x, T: ?Sized, B, A>(
    step: &'x Step,
    fixed: &'x [Option<(B, usize)>],
    deref: impl Fn(&'x B) -> &'x T,
    slot: &dyn Fn(&Slot) -> (&'x T, usize),
    array: impl Fn(&'x T, usize, &'x [usize]) -> A,
    uniform: impl Fn(weft_ir::Const) -> A,
) -> smallvec::SmallVec<[A; 8]> {
    step.args
        .iter()
        .zip(fixed)
        .map(|(a, f)| match a {
            StepArg::Slot(s) => {
                let (buf, offset) = slot(s);
                array(buf, offset, &s.shape)
            }
            StepArg::Fixed(ArgVal::Array(d)) => {
                let (buf, offset) = f.as_ref().expect("made by fixed_arrays");
                array(deref(buf), *offset, &d.shape)
            }
            StepArg::Fixed(ArgVal::Uniform(c)) => uniform(*c),
        })
        .collect()
}

/// Binds `step`'s launch on `gpu` to the buffers its slots have now (`slot`) and its fixed
/// arrays' device copies; `None` when the runtime does not bind it.
fn bind_cuda<'a>(
    gpu: &CudaDevice,
    step: &Step,
    slot: &dyn Fn(&Slot) -> (&'a CudaBuffer, usize),
) -> Result<Option<CudaBound>> {
    let fixed = fixed_arrays(step, |s| s.cuda(gpu))?;
    let cargs = step_args(
        step,
        &fixed,
        |b| b,
        &|s: &Slot| -> (&CudaBuffer, usize) { slot(s) },
        |buf, offset, shape| CudaArg::Array { buf, offset, shape },
        CudaArg::Uniform,
    );
    let name = &step.module.programs[step.program].name;
    let prog = gpu.prepare_shared(&step.module, name)?;
    let launch = gpu.bind(&prog, &cargs, Some(&step.shape))?;
    drop(cargs);
    Ok(launch.map(|launch| CudaBound { launch, fixed }))
}

/// Binds `step`'s launch on `cpu` to the buffers its slots have now (`slot`) and its fixed
/// arrays' host buffers.
fn bind<'a>(
    cpu: &CpuDevice,
    step: &Step,
    slot: &dyn Fn(&Slot) -> (&'a HostBuffer, usize),
) -> Result<CpuBound> {
    let fixed = fixed_arrays(step, |s| s.host())?;
    let bargs = step_args(
        step,
        &fixed,
        |b| &**b,
        &|s: &Slot| -> (&HostBuffer, usize) { slot(s) },
        |buf, offset, shape| BufArg::Array { buf, offset, shape },
        BufArg::Uniform,
    );
    let name = &step.module.programs[step.program].name;
    let prog = match step.reduce {
        Some(r) => cpu
            .prepare_reduced(&step.module, name, r)?
            .ok_or_else(|| Error::argument(format!("@{name}: reduced on another device")))?,
        None => cpu.prepare_shared(&step.module, name)?,
    };
    let launch = cpu.bind(&prog, &bargs, Some(&step.shape))?;
    drop(bargs);
    Ok(CpuBound { launch, fixed })
}

/// For each step, the step results (step, output) whose last reader it is (or, unread, that
/// it makes); results that are outputs of the sequence are never released.
fn last_uses(steps: &[Step], outputs: &[OutSrc]) -> Vec<Vec<(usize, usize)>> {
    let mut last: HashMap<(usize, usize), usize> = HashMap::new();
    for (si, step) in steps.iter().enumerate() {
        for a in &step.args {
            if let StepArg::Slot(Slot {
                src: Src::Out(st, k),
                ..
            }) = a
            {
                last.insert((*st, *k), si);
            }
        }
    }
    for o in outputs {
        if let OutSrc::Slot(Slot {
            src: Src::Out(st, k),
            ..
        }) = o
        {
            last.insert((*st, *k), usize::MAX);
        }
    }
    let mut release = vec![Vec::new(); steps.len()];
    for (si, step) in steps.iter().enumerate() {
        let outs = step.module.programs[step.program].outputs.len();
        for k in 0..outs {
            match last.get(&(si, k)) {
                Some(&usize::MAX) => {}
                Some(&at) => release[at].push((si, k)),
                None => release[si].push((si, k)),
            }
        }
    }
    release
}

fn boundary_note(b: Option<Boundary>) -> String {
    b.map(|b| format!(" (boundary {b:?})")).unwrap_or_default()
}

impl<I: Arrays> Sequence<I, I> {
    /// Replays the sequence `n` times, each replay taking the previous one's outputs
    /// (`inputs` the first), and returns the last outputs (`inputs` when `n` is 0).
    ///
    /// # Errors
    /// As [`Sequence::replay`].
    pub fn repeat(&self, n: usize, inputs: &I) -> Result<I> {
        let mut cur = inputs.to_bundle().outs;
        for _ in 0..n {
            cur = self.replay_data(cur)?;
        }
        I::from_bundle(Bundle { outs: cur })
    }

    /// Replays the sequence, each replay taking the previous one's outputs, until `done`
    /// says so or `max` replays ran; `done` is asked after every `every` replays (a GPU
    /// then waits for its queue only that often: `done` usually reads a one-element
    /// result). Returns the last outputs and the number of replays run.
    ///
    /// # Errors
    /// `every` of 0; as [`Sequence::replay`]; `done`'s own error.
    pub fn until(
        &self,
        inputs: &I,
        every: usize,
        max: usize,
        mut done: impl FnMut(&I) -> Result<bool>,
    ) -> Result<(I, usize)> {
        if every == 0 {
            return Err(Error::argument("until: `every` must be at least 1"));
        }
        let mut cur = inputs.clone();
        let mut n = 0;
        while n < max {
            let mut data = cur.into_bundle().outs;
            let k = every.min(max - n);
            for _ in 0..k {
                data = self.replay_data(data)?;
            }
            n += k;
            cur = I::from_bundle(Bundle { outs: data })?;
            if done(&cur)? {
                break;
            }
        }
        Ok((cur, n))
    }

    /// Replays the sequence, each replay taking the previous one's outputs, until the
    /// program `stop` applied to output `output` (a one-element array) gives `true`, or
    /// `max` replays ran; `stop` is a map program of one input (that element) and one
    /// `bool` output, with any host `Uniform`s read at the call. Returns the last outputs and
    /// the number of replays run (0 when `max` is 0).
    ///
    /// On one GPU whose driver has conditional graph nodes (CUDA 12.4 or later) and a CUDA
    /// device runtime library to link with (`libcudadevrt.a` under `CUDA_HOME`, `CUDA_PATH`
    /// or `/usr/local/cuda`, or the file `WEFT_CUDADEVRT` names), the whole loop is one
    /// CUDA graph (Warp's `capture_while`): a while node whose body replays the sequence
    /// twice — in place on two sets of buffers, so each half reads what the other wrote —
    /// with `stop` and a condition kernel after each replay; the host waits once and reads
    /// the replay count. Elsewhere (the CPU, the interpreter, other drivers) it is
    /// [`Sequence::until`] with `stop` run after every replay. The outputs are the same
    /// bits either way, and the replays run are the same.
    ///
    /// # Errors
    /// No output `output`, or not a one-element array; `stop` not of one input and one
    /// `bool` output; as [`Sequence::replay`].
    pub fn until_program(
        &self,
        inputs: &I,
        stop: &crate::dsl::Program,
        output: usize,
        max: usize,
    ) -> Result<(I, usize)> {
        let outs = self.outputs.len();
        if output >= outs {
            return Err(Error::argument(format!(
                "until_program: the sequence has {outs} outputs, not an output {output}"
            )));
        }
        let d = inputs.to_bundle().outs.swap_remove(output);
        if d.len() != 1 {
            return Err(Error::argument(format!(
                "until_program: output {output} has {} elements; the stop test reads a \
                 one-element array",
                d.len()
            )));
        }
        let p = stop.ir();
        let bool_t = Type::scalar(weft_ir::ScalarType::Bool);
        if p.outputs.len() != 1 || p.outputs[0].ty != bool_t {
            return Err(Error::argument(format!(
                "until_program: @{} must give one bool output",
                stop.name()
            )));
        }
        // The stop test, prepared on the input's signature (the output's, too); its one
        // array argument is the output's element (the others are captured uniforms).
        let test = stop.prepare_on(d)?;
        let arg = test
            .args
            .iter()
            .position(|a| matches!(a, ArgVal::Array(_)))
            .ok_or_else(|| Error::argument("until_program: the stop test reads no array"))?;
        if max == 0 {
            return Ok((inputs.clone(), 0));
        }
        if self.all_cuda.load(std::sync::atomic::Ordering::Relaxed) {
            if let Some(r) = self.until_cuda(inputs, (&test, arg), output, max)? {
                return Ok(r);
            }
        }
        let dev = self
            .steps
            .first()
            .map_or_else(Device::current, |s| s.dev.clone());
        self.until(inputs, 1, max, |s| {
            let mut l = test.clone();
            l.args[arg] = ArgVal::Array(s.to_bundle().outs.swap_remove(output));
            let flag = crate::exec::run_arrays(&dev, &l)?;
            let Source::Stored(st) = &flag[0].source else {
                unreachable!("launch outputs are stored")
            };
            Ok(st.element(0)?.lane_bits()[0] != 0)
        })
    }

    /// [`Sequence::until_program`] on one GPU as a graph with conditional nodes
    /// ([`CudaDevice::run_loop_graph`]): `None` when the device does not run device loops
    /// or the sequence does not suit one (an output that is an input or a part of a launch
    /// result, two outputs from one result, a launch that cannot be bound, more than
    /// `u32::MAX` replays); nothing ran then.
    fn until_cuda(
        &self,
        inputs: &I,
        (test, arg): (&Prepared, usize),
        output: usize,
        max: usize,
    ) -> Result<Option<(I, usize)>> {
        let crate::device::Kind::Cuda(gpu) = &*self.steps[0].dev.0 else {
            return Ok(None);
        };
        let Ok(max) = u32::try_from(max) else {
            return Ok(None);
        };
        if !gpu.supports_device_loops() {
            return Ok(None);
        }
        // Output j comes whole from result `at[j]` of a launch, no two from one.
        let mut at: smallvec::SmallVec<[(usize, usize); 6]> = smallvec::SmallVec::new();
        for o in &self.outputs {
            let OutSrc::Slot(Slot {
                src: Src::Out(st, k),
                offset: 0,
                shape,
                ..
            }) = o
            else {
                return Ok(None);
            };
            let whole: usize = self.steps[*st].shape.iter().product();
            if shape.iter().product::<usize>() != whole || at.contains(&(*st, *k)) {
                return Ok(None);
            }
            at.push((*st, *k));
        }
        let ins = self.checked_inputs(inputs.to_bundle().outs)?;
        // The state in two sets of buffers: `x` (a copy of the inputs, never the caller's)
        // and `t`; the first half of a trip reads `x` and writes `t`, the second the other
        // way round.
        let x = ins
            .iter()
            .map(|d| {
                let b = input_storage(d).cuda(gpu)?;
                Ok(gpu.copy_buffer(&b, d.offset, d.len())?)
            })
            .collect::<Result<Vec<CudaBuffer>>>()?;
        let t = x
            .iter()
            .map(|b| Ok(gpu.copy_buffer(b, 0, b.len())?))
            .collect::<Result<Vec<CudaBuffer>>>()?;
        let stop = Step {
            dev: self.steps[0].dev.clone(),
            module: test.module.clone(),
            program: test.program,
            args: test
                .args
                .iter()
                .enumerate()
                .map(|(k, a)| match a {
                    ArgVal::Array(d) if k == arg => StepArg::Slot(Slot {
                        src: Src::Input(output),
                        offset: 0,
                        shape: d.shape.clone(),
                        boundary: d.boundary,
                    }),
                    a => StepArg::Fixed(a.clone()),
                })
                .collect(),
            shape: test.shape.clone(),
            bound: OnceLock::new(),
            cuda_bound: OnceLock::new(),
            reduce: None,
        };
        // Every buffer a half's launches use, held until the graph has run.
        let mut held: Vec<CudaBuffer> = Vec::new();
        let mut words: Vec<u64> = Vec::new();
        let mut ranges: Vec<std::ops::Range<usize>> = Vec::new();
        let mut flags: Vec<CudaBuffer> = Vec::new();
        for (from, to) in [(&x, &t), (&t, &x)] {
            let mut results: Vec<smallvec::SmallVec<[Option<CudaBuffer>; 4]>> =
                Vec::with_capacity(self.steps.len());
            for (si, step) in self.steps.iter().chain([&stop]).enumerate() {
                let last = si == self.steps.len();
                let slot = |s: &Slot| -> (&CudaBuffer, usize) {
                    match s.src {
                        Src::Input(i) if last => (&to[i], s.offset),
                        Src::Input(i) => (&from[i], s.offset),
                        Src::Out(st, k) => (
                            results[st][k]
                                .as_ref()
                                .expect("released after its last use"),
                            s.offset,
                        ),
                    }
                };
                let start = words.len();
                let Some((bound, mut outs)) = cuda_step_words(gpu, step, &slot, &mut words)? else {
                    return Ok(None);
                };
                ranges.push(start..words.len());
                if last {
                    flags.push(outs.swap_remove(0));
                    continue;
                }
                // The sequence's outputs go to this half's state buffers.
                for (j, &(st, k)) in at.iter().enumerate() {
                    if st == si {
                        let words = &mut words[start..];
                        if gpu
                            .redirect_output(&bound.launch, words, k, &to[j])
                            .is_err()
                        {
                            return Ok(None);
                        }
                        outs[k] = to[j].clone();
                    }
                }
                held.extend(outs.iter().cloned());
                results.push(outs.into_iter().map(Some).collect());
                for &(st, k) in &self.release[si] {
                    results[st][k] = None;
                }
            }
        }
        let n = self.steps.len() + 1;
        let launches: Vec<(&CudaBoundLaunch, &[u64])> = self
            .steps
            .iter()
            .chain([&stop])
            .cycle()
            .zip(&ranges)
            .map(|(s, r)| {
                let b = s.cuda_bound.get().and_then(Option::as_ref);
                (&b.expect("bound above").launch, &words[r.clone()])
            })
            .collect();
        let runs = gpu
            .run_loop_graph(&launches[..n], &launches[n..], [&flags[0], &flags[1]], max)
            .map_err(|e| Error::argument(format!("device loop failed: {e}")))?;
        drop(held);
        let Some(runs) = runs else {
            return Ok(None);
        };
        let last = if runs % 2 == 1 { &t } else { &x };
        let outs = self.outputs_from(&ins, |st, k| {
            let j = at
                .iter()
                .position(|&a| a == (st, k))
                .expect("every output is a launch result");
            Storage::from_resident(crate::array::Resident::Cuda(last[j].clone()))
        });
        Ok(Some((I::from_bundle(Bundle { outs })?, runs as usize)))
    }
}
