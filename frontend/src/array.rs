//! `Array<D, T>`: by-value arrays of 1 to 3 axes (DESIGN §5; RapidMind's `Array<D, T>`):
//! O(1) assignment with copy-on-write storage, views (`slice`, `offset`, `stride`), boundary
//! modes, virtual `grid` index arrays, conversions from and to `Vec` and `ndarray`, and
//! residency per device (contents move between host and GPU only when needed).

use crate::device::{Device, Kind};
use crate::error::{Error, Result};
use crate::scalar::{Elem, Scalar};
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use weft_ir::{Boundary, Const, Type};
use weft_runtime::{CudaBuffer, HostBuffer};

/// The shared storage of arrays: `len` elements of `elem`, with a copy on the host and/or on
/// GPUs (all copies hold the same contents; storage is never written once shared), or a
/// launch not yet run (deferred execution).
pub(crate) struct Storage {
    pub(crate) elem: Type,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    host: Option<Arc<HostBuffer>>,
    cuda: Vec<CudaBuffer>,
    pending: Option<(Arc<Pending>, usize)>,
    /// The contents as consecutive parts on the members of a device group (issue 27):
    /// the result of a launch split across the group, gathered only when read elsewhere.
    parts: Option<Arc<Parts>>,
}

/// A storage's contents split across a device group's members: part `k` holds elements
/// `start .. start + len` and lives where member `member` of `group` runs.
pub(crate) struct Parts {
    /// The group's runtime device (identity only: a launch on another group gathers).
    pub(crate) group: Weak<Kind>,
    pub(crate) parts: Vec<Part>,
}

/// One part of a [`Parts`].
pub(crate) struct Part {
    pub(crate) start: usize,
    pub(crate) len: usize,
    pub(crate) member: usize,
    pub(crate) storage: Arc<Storage>,
}

/// Where a storage's contents are right now (for tests and diagnostics).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Residency {
    /// A current copy is in host memory.
    pub host: bool,
    /// Ordinals of the GPUs holding a current copy.
    pub cuda: Vec<usize>,
    /// The contents are the result of a launch not yet run (deferred execution).
    pub pending: bool,
    /// The number of parts the contents are split into across a device group's members
    /// (0: not split; issue 27).
    pub parts: usize,
}

/// A launch whose outputs nobody has read yet. Runs at most once, on the first read of any
/// of its outputs.
pub(crate) struct Pending {
    job: Mutex<Option<Job>>,
    /// The program the job launches and the storages it reads: before a chain of pending
    /// launches runs, the programs in it are compiled in parallel ([`precompile`]).
    compile: Option<Compile>,
    /// Launches in the longest chain of pending launches this one runs first (1: its inputs
    /// are all computed). Running a chain recurses once per launch, so chains are bounded
    /// by [`MAX_PENDING_DEPTH`].
    depth: usize,
    outs: Mutex<Vec<Weak<Storage>>>,
    done: OnceLock<std::result::Result<(), String>>,
    /// Set once a [`precompile`] walk has visited this launch: the walk from the chain's
    /// last launch covers every launch it waits for, so their own resolutions (which run
    /// them one by one) do not walk again.
    walked: std::sync::atomic::AtomicBool,
}

/// The longest chain of deferred launches: a launch whose inputs are this deep runs them
/// first, so that reading a result never recurses deeper (a loop of a million applies with
/// no read in between must not overflow the stack).
pub(crate) const MAX_PENDING_DEPTH: usize = 64;

/// What a deferred launch computes: its outputs' contents on one device.
pub(crate) type Job = Box<dyn FnOnce() -> Result<Vec<Resident>> + Send>;

/// What a pending launch compiles, and the storages its arguments read.
pub(crate) struct Compile {
    pub(crate) dev: Device,
    pub(crate) module: Arc<weft_ir::Module>,
    /// The program's position in `module`.
    pub(crate) program: usize,
    pub(crate) inputs: smallvec::SmallVec<[Weak<Storage>; 4]>,
}

impl Compile {
    fn name(&self) -> &str {
        &self.module.programs[self.program].name
    }
}

/// Launches whose programs [`precompile`] looks at, at most, in one chain.
const PRECOMPILE_LIMIT: usize = 4096;

/// Compiles the programs of the launches `p` waits for (and `p`'s) that no device has
/// compiled yet, in parallel on the rayon pool (issue 24: the coin finder's 21 ring
/// programs are one chain of deferred applies). Errors are left for the launches to report.
fn precompile(p: &Arc<Pending>) {
    use std::sync::atomic::Ordering::Relaxed;
    let mut todo = vec![p.clone()];
    let mut jobs: Vec<&Compile> = Vec::new();
    // The pendings walked, kept alive while `jobs` borrows from them.
    let mut held: Vec<Arc<Pending>> = Vec::new();
    while let Some(q) = todo.pop() {
        if held.len() >= PRECOMPILE_LIMIT || q.walked.swap(true, Relaxed) {
            continue;
        }
        if q.done.get().is_some() {
            continue;
        }
        if let Some(c) = &q.compile {
            for s in c.inputs.iter().filter_map(Weak::upgrade) {
                if let Some((q, _)) = lock(&s.state).pending.clone() {
                    todo.push(q);
                }
            }
        }
        held.push(q);
    }
    for c in held.iter().filter_map(|q| q.compile.as_ref()) {
        let new = !jobs.iter().any(|j| {
            Arc::ptr_eq(&j.dev.0, &c.dev.0)
                && Arc::ptr_eq(&j.module, &c.module)
                && j.program == c.program
        });
        if new && c.dev.needs_compile(&c.module, c.name()) {
            jobs.push(c);
        }
    }
    if jobs.len() > 1 {
        use rayon::prelude::*;
        jobs.par_iter().for_each(|c| {
            // Errors are left for the launches to report.
            let _ = c.dev.precompile(&c.module, c.name());
        });
    }
}

/// The contents of one storage on one device.
pub(crate) enum Resident {
    Host(HostBuffer),
    Cuda(CudaBuffer),
}

impl Pending {
    /// Whether an input of this launch is itself the result of a pending launch.
    fn waits_on_pending(&self) -> bool {
        self.compile.as_ref().is_some_and(|c| {
            c.inputs
                .iter()
                .filter_map(Weak::upgrade)
                .any(|s| lock(&s.state).pending.is_some())
        })
    }

    /// Output storages of `elems`/`len` whose contents `job` computes when first read;
    /// `depth` as [`Pending::depth`].
    pub(crate) fn outputs(
        job: Job,
        compile: Option<Compile>,
        elems: &[Type],
        depth: usize,
    ) -> Vec<Arc<Storage>> {
        let p = Arc::new(Pending {
            job: Mutex::new(Some(job)),
            compile,
            depth,
            outs: Mutex::new(Vec::new()),
            done: OnceLock::new(),
            walked: std::sync::atomic::AtomicBool::new(false),
        });
        let stores: Vec<Arc<Storage>> = elems
            .iter()
            .enumerate()
            .map(|(i, &elem)| {
                Arc::new(Storage {
                    elem,
                    state: Mutex::new(State {
                        pending: Some((p.clone(), i)),
                        ..State::default()
                    }),
                })
            })
            .collect();
        *lock(&p.outs) = stores.iter().map(Arc::downgrade).collect();
        stores
    }

    fn run(&self) -> std::result::Result<(), String> {
        self.done
            .get_or_init(|| {
                let Some(job) = lock(&self.job).take() else {
                    return Err("deferred launch lost".into());
                };
                let res = job().map_err(|e| e.to_string())?;
                // The job runs once: the outputs are not needed after this.
                let outs = std::mem::take(&mut *lock(&self.outs));
                for (w, r) in outs.iter().zip(res) {
                    if let Some(s) = w.upgrade() {
                        let mut st = lock(&s.state);
                        st.pending = None;
                        match r {
                            Resident::Host(h) => st.host = Some(Arc::new(h)),
                            Resident::Cuda(c) => st.cuda.push(c),
                        }
                    }
                }
                Ok(())
            })
            .clone()
    }
}

impl Parts {
    /// The whole contents on the host: each part's host copy (downloaded from its member
    /// when it has none) put in place.
    fn gather(&self, elem: Type) -> Result<HostBuffer> {
        let mut out = HostBuffer::for_output(elem, self.len());
        for p in &self.parts {
            let h = p.storage.host()?;
            out.copy_from(p.start, &h, 0, p.len);
        }
        Ok(out)
    }

    /// The whole contents on GPU `dev`, put together there from the parts' device copies
    /// ([`weft_runtime::CudaDevice::gather_parts`]: copies on one GPU, NCCL between GPUs).
    /// `None` when a part has no device copy, or parts on other GPUs need NCCL and it is
    /// missing: the caller then goes through the host.
    fn gather_on(&self, dev: &weft_runtime::CudaDevice) -> Result<Option<CudaBuffer>> {
        let mut bufs = Vec::with_capacity(self.parts.len());
        for p in &self.parts {
            p.storage.resolve()?;
            let st = lock(&p.storage.state);
            let Some(c) = st.cuda.first() else {
                return Ok(None);
            };
            bufs.push((p.start, c.clone()));
        }
        let ord = dev.info().ordinal;
        if bufs.iter().any(|(_, b)| b.ordinal() != ord) && weft_runtime::nccl_status().is_err() {
            return Ok(None);
        }
        let refs: Vec<(usize, &CudaBuffer)> = bufs.iter().map(|(s, b)| (*s, b)).collect();
        Ok(Some(dev.gather_parts(&refs, self.len())?))
    }

    /// The elements the parts hold in all.
    fn len(&self) -> usize {
        self.parts
            .iter()
            .map(|p| p.start + p.len)
            .max()
            .unwrap_or(0)
    }

    /// Elements `start .. start + n`, from the parts that hold them (downloading only
    /// those elements from a GPU).
    fn range(&self, elem: Type, start: usize, n: usize) -> Result<HostBuffer> {
        let mut out = HostBuffer::zeroed(elem, n);
        for p in &self.parts {
            let lo = start.max(p.start);
            let hi = (start + n).min(p.start + p.len);
            if lo < hi {
                let h = p.storage.host_range(lo - p.start, hi - lo)?;
                out.copy_from(lo - start, &h, 0, hi - lo);
            }
        }
        Ok(out)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Storage {
    pub(crate) fn from_host(h: HostBuffer) -> Arc<Storage> {
        Arc::new(Storage {
            elem: h.elem(),
            state: Mutex::new(State {
                host: Some(Arc::new(h)),
                ..State::default()
            }),
        })
    }

    /// A storage holding a shared host buffer.
    pub(crate) fn from_host_arc(h: Arc<HostBuffer>) -> Arc<Storage> {
        Arc::new(Storage {
            elem: h.elem(),
            state: Mutex::new(State {
                host: Some(h),
                ..State::default()
            }),
        })
    }

    pub(crate) fn from_resident(r: Resident) -> Arc<Storage> {
        match r {
            Resident::Host(h) => Storage::from_host(h),
            Resident::Cuda(c) => Arc::new(Storage {
                elem: c.elem(),
                state: Mutex::new(State {
                    cuda: vec![c],
                    ..State::default()
                }),
            }),
        }
    }

    /// A storage of its own holding `s`'s contents (computed first if pending): the same
    /// buffers, another identity (storage is never written once shared).
    pub(crate) fn alias(s: &Storage) -> Result<Arc<Storage>> {
        s.resolve()?;
        let st = lock(&s.state);
        Ok(Arc::new(Storage {
            elem: s.elem,
            state: Mutex::new(State {
                host: st.host.clone(),
                cuda: st.cuda.clone(),
                pending: None,
                parts: st.parts.clone(),
            }),
        }))
    }

    /// Runs the pending launch that computes this storage, if any.
    pub(crate) fn resolve(&self) -> Result<()> {
        let pending = {
            let st = lock(&self.state);
            if st.pending.is_none() && st.parts.is_none() {
                return Ok(());
            }
            st.pending.clone()
        };
        if let Some((p, _)) = pending {
            // A launch that waits for no other has nothing to compile beside its own; one
            // a walk from a later launch visited is covered.
            if p.done.get().is_none()
                && !p.walked.load(std::sync::atomic::Ordering::Relaxed)
                && p.waits_on_pending()
            {
                precompile(&p);
            }
            p.run().map_err(Error::argument)?;
            let mut st = lock(&self.state);
            if st.pending.is_some() {
                st.pending = None;
            }
        }
        let parts = lock(&self.state).parts.clone();
        if let Some(ps) = parts {
            for p in &ps.parts {
                p.storage.resolve()?;
            }
        }
        Ok(())
    }

    /// A storage of `elem` whose contents are `parts` (issue 27).
    pub(crate) fn from_parts(elem: Type, parts: Parts) -> Arc<Storage> {
        Arc::new(Storage {
            elem,
            state: Mutex::new(State {
                parts: Some(Arc::new(parts)),
                ..State::default()
            }),
        })
    }

    /// The parts of a storage split across a device group, if it is.
    pub(crate) fn parts(&self) -> Option<Arc<Parts>> {
        lock(&self.state).parts.clone()
    }

    /// The depth of the pending launch that computes this storage (0: none pending).
    pub(crate) fn pending_depth(&self) -> usize {
        let st = lock(&self.state);
        let own = st.pending.as_ref().map_or(0, |(p, _)| p.depth);
        let parts = st.parts.as_ref().map_or(0, |ps| {
            ps.parts
                .iter()
                .map(|p| p.storage.pending_depth())
                .max()
                .unwrap_or(0)
        });
        own.max(parts)
    }

    pub(crate) fn residency(&self) -> Residency {
        let st = lock(&self.state);
        Residency {
            host: st.host.is_some(),
            cuda: st.cuda.iter().map(CudaBuffer::ordinal).collect(),
            pending: st.pending.is_some(),
            parts: st.parts.as_ref().map_or(0, |p| p.parts.len()),
        }
    }

    /// The host copy, downloading it from a GPU when only a GPU has one.
    pub(crate) fn host(&self) -> Result<Arc<HostBuffer>> {
        {
            // The common case, one lock: computed and on the host.
            let st = lock(&self.state);
            if let (None, None, Some(h)) = (&st.pending, &st.parts, &st.host) {
                return Ok(h.clone());
            }
        }
        self.resolve()?;
        let mut st = lock(&self.state);
        if let Some(h) = &st.host {
            return Ok(h.clone());
        }
        if st.cuda.is_empty() {
            if let Some(ps) = st.parts.clone() {
                // Gathered from the group's members (their own locks, not this one's).
                drop(st);
                let h = Arc::new(ps.gather(self.elem)?);
                lock(&self.state).host = Some(h.clone());
                return Ok(h);
            }
        }
        let Some(c) = st.cuda.first() else {
            return Err(Error::argument(
                "array storage has no contents (a failed launch)",
            ));
        };
        let h = Arc::new(c.download()?);
        st.host = Some(h.clone());
        Ok(h)
    }

    /// Elements `start .. start + n` on the host: from the host copy, else downloading just
    /// that range from a GPU.
    pub(crate) fn host_range(&self, start: usize, n: usize) -> Result<HostBuffer> {
        self.resolve()?;
        let st = lock(&self.state);
        if st.host.is_none() && st.cuda.is_empty() {
            if let Some(ps) = st.parts.clone() {
                drop(st);
                return ps.range(self.elem, start, n);
            }
        }
        if let Some(h) = &st.host {
            let mut out = HostBuffer::zeroed(self.elem, n);
            out.copy_from(0, h, start, n);
            return Ok(out);
        }
        let Some(c) = st.cuda.first() else {
            return Err(Error::argument(
                "array storage has no contents (a failed launch)",
            ));
        };
        Ok(c.download_range(start, n)?)
    }

    /// Element `pos` on the host: read from the host copy, else downloaded alone from a GPU.
    pub(crate) fn element(&self, pos: usize) -> Result<Const> {
        self.resolve()?;
        if let Some(h) = &lock(&self.state).host {
            return Ok(h.get(pos));
        }
        Ok(self.host_range(pos, 1)?.get(0))
    }

    /// The copy on CUDA device `dev`, uploading the host copy when it has none.
    pub(crate) fn cuda(&self, dev: &weft_runtime::CudaDevice) -> Result<CudaBuffer> {
        self.resolve()?;
        let ord = dev.info().ordinal;
        if let Some(c) = lock(&self.state).cuda.iter().find(|c| c.ordinal() == ord) {
            return Ok(c.clone());
        }
        let (parts, on_host) = {
            let st = lock(&self.state);
            (st.parts.clone(), st.host.is_some())
        };
        if let (Some(ps), false) = (parts, on_host) {
            // A split result put together on this GPU from its members' GPUs (NCCL).
            if let Some(c) = ps.gather_on(dev)? {
                lock(&self.state).cuda.push(c.clone());
                return Ok(c);
            }
        }
        let h = self.host()?;
        let c = dev.upload(&h)?;
        lock(&self.state).cuda.push(c.clone());
        Ok(c)
    }

    /// Makes sure a copy exists where `dev` runs (host for the interpreter and the CPU).
    pub(crate) fn make_resident(&self, dev: &Device) -> Result<()> {
        match &*dev.0 {
            Kind::Cuda(d) => self.cuda(d).map(drop),
            _ => self.host().map(drop),
        }
    }
}

/// What an array's elements come from.
#[derive(Clone)]
pub(crate) enum Source {
    /// Stored elements.
    Stored(Arc<Storage>),
    /// A virtual index array: element `i` is its own coordinates (`grid`).
    Grid,
}

/// The untyped part of an array: a view (offset, shape, strides in elements) of a source,
/// and a boundary mode for random-access reads.
#[derive(Clone)]
pub(crate) struct ArrayData {
    pub(crate) source: Source,
    pub(crate) elem: Type,
    pub(crate) shape: Dims,
    pub(crate) offset: usize,
    pub(crate) strides: Dims,
    pub(crate) boundary: Option<Boundary>,
}

/// A shape or strides: one number per axis, held inline (arrays have 1 to 3 axes, so
/// copying a view allocates nothing).
pub(crate) type Dims = smallvec::SmallVec<[usize; 3]>;

/// Row-major strides of `shape`.
pub(crate) fn row_major(shape: &[usize]) -> Dims {
    let mut s: Dims = smallvec::smallvec![1usize; shape.len()];
    for k in (0..shape.len().saturating_sub(1)).rev() {
        s[k] = s[k + 1] * shape[k + 1];
    }
    s
}

impl ArrayData {
    pub(crate) fn stored(store: Arc<Storage>, shape: impl Into<Dims>) -> ArrayData {
        let shape = shape.into();
        ArrayData {
            elem: store.elem,
            strides: row_major(&shape),
            source: Source::Stored(store),
            shape,
            offset: 0,
            boundary: None,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// True when the view's elements are consecutive in storage (row-major).
    pub(crate) fn contiguous(&self) -> bool {
        // Row-major strides from the last axis in, compared as they are made.
        let mut want = 1usize;
        for (&d, &st) in self.shape.iter().zip(&self.strides).rev() {
            if d > 1 && st != want {
                return false;
            }
            want = want.wrapping_mul(d);
        }
        true
    }

    /// Storage position of row-major element `i` of the view.
    fn position(&self, mut i: usize) -> usize {
        let mut pos = self.offset;
        for k in (0..self.shape.len()).rev() {
            let d = self.shape[k].max(1);
            pos += (i % d) * self.strides[k];
            i /= d;
        }
        pos
    }

    /// The same elements as a contiguous view starting at `offset` of a stored array (the
    /// view itself when it already is one; otherwise a host copy).
    pub(crate) fn contiguous_view(&self) -> Result<ArrayData> {
        if let Source::Stored(s) = &self.source {
            if self.contiguous() {
                return Ok(self.clone());
            }
            crate::sequence::check_host_read(s, "a strided view (copied on the host)")?;
        }
        let h = self.to_host_buffer()?;
        let mut d = ArrayData::stored(Storage::from_host(h), self.shape.clone());
        d.boundary = self.boundary;
        Ok(d)
    }

    /// This array's host storage taken out to be written in place, when nothing else can
    /// see it: the storage is this array's alone (no clone, view or launch holds it, no
    /// launch is pending for it), contiguous from element 0, and on the host. The array
    /// then has no contents until it is given storage again. `None` (and the array as it
    /// was) otherwise.
    pub(crate) fn take_unique_host(&mut self) -> Option<HostBuffer> {
        if self.offset != 0 || !self.contiguous() {
            return None;
        }
        let n = self.len();
        let Source::Stored(s) = &mut self.source else {
            return None;
        };
        let state = Arc::get_mut(s)?.state.get_mut().ok()?;
        if state.pending.is_some() {
            return None;
        }
        let h = state.host.take()?;
        match Arc::try_unwrap(h) {
            Ok(b) if b.len() == n => {
                state.cuda.clear();
                state.parts = None;
                Some(b)
            }
            Ok(b) => {
                state.host = Some(Arc::new(b));
                None
            }
            Err(h) => {
                state.host = Some(h);
                None
            }
        }
    }

    /// The device copy on CUDA device `ordinal` that a kernel may write in place: when the
    /// view is the whole of a storage held by this array alone, with no pending launch, no
    /// host copy (it would go stale), one device copy of exactly its length and no other
    /// handle to that device memory. The storage keeps the copy, so the array holds what
    /// the kernel writes. `None` otherwise (the caller copies).
    pub(crate) fn unique_cuda(&mut self, ordinal: usize) -> Option<CudaBuffer> {
        if self.offset != 0 || !self.contiguous() {
            return None;
        }
        let n = self.len();
        let Source::Stored(s) = &mut self.source else {
            return None;
        };
        // A deferred result runs first (an error shows again where the caller reads it).
        s.resolve().ok()?;
        let state = Arc::get_mut(s)?.state.get_mut().ok()?;
        match (&state.pending, &state.host, state.cuda.as_slice()) {
            (None, None, [c])
                if state.parts.is_none()
                    && c.ordinal() == ordinal
                    && c.len() == n
                    && c.is_unique() =>
            {
                Some(c.clone())
            }
            _ => None,
        }
    }

    /// The view's elements in a host buffer: the stored one when the view is the whole of
    /// it (no copy), else [`ArrayData::to_host_buffer`]'s.
    pub(crate) fn host_buffer(&self) -> Result<Arc<HostBuffer>> {
        if let Source::Stored(st) = &self.source {
            if self.offset == 0 && self.contiguous() {
                let h = st.host()?;
                if h.len() == self.len() {
                    return Ok(h);
                }
            }
        }
        Ok(Arc::new(self.to_host_buffer()?))
    }

    /// The view's elements, row-major, in a fresh host buffer.
    pub(crate) fn to_host_buffer(&self) -> Result<HostBuffer> {
        let n = self.len();
        if let (Source::Stored(s), true) = (&self.source, self.contiguous()) {
            // Every element is copied over: no need to zero them first.
            let h = s.host()?;
            let mut out = HostBuffer::for_output(self.elem, n);
            out.copy_from(0, &h, self.offset, n);
            return Ok(out);
        }
        let mut out = HostBuffer::zeroed(self.elem, n);
        match &self.source {
            Source::Grid => {
                let rm = row_major(&self.shape);
                for i in 0..n {
                    for (k, &s) in rm.iter().enumerate() {
                        out.set_bits(i, k, ((i / s) % self.shape[k].max(1)) as u32 as u64);
                    }
                }
            }
            Source::Stored(s) => {
                let h = s.host()?;
                if self.contiguous() {
                    out.copy_from(0, &h, self.offset, n);
                } else {
                    for i in 0..n {
                        let p = self.position(i);
                        for l in 0..out.lanes() {
                            out.set_bits(i, l, h.bits(p, l));
                        }
                    }
                }
            }
        }
        Ok(out)
    }

    /// The view as an interpreter array.
    pub(crate) fn to_host_array(&self) -> Result<weft_ir::HostArray> {
        Ok(self.to_host_buffer()?.to_host_array(&self.shape))
    }
}

/// A by-value array of `D` axes (1 to 3) of elements `T` (a [`Scalar`] or `[S; N]`), as in
/// RapidMind's `Array<D, T>` (McCool et al., "Data-Parallel Programming on the Cell BE and
/// the GPU using the RapidMind Development Platform", §3).
///
/// - **By value**: `clone` and assignment are O(1); storage is shared until one side is
///   written ([`Array::set`], [`Array::scatter`]), which copies it first (copy-on-write).
/// - **Views**: [`Array::slice`], [`Array::offset`] and [`Array::stride`] share storage.
/// - **Residency** (DESIGN §5): the contents live on the host, on GPUs, or are the pending
///   result of a launch (deferred until read); transfers happen only when a device needs a
///   copy it lacks ([`Array::residency`]).
/// - **Boundary mode** ([`Array::with_boundary`]) applies when a program reads the array at
///   random (an array input); it overrides the mode the program declared.
pub struct Array<const D: usize, T: Elem> {
    pub(crate) data: ArrayData,
    _t: PhantomData<T>,
}

impl<const D: usize, T: Elem> Clone for Array<D, T> {
    fn clone(&self) -> Self {
        Array {
            data: self.data.clone(),
            _t: PhantomData,
        }
    }
}

impl<const D: usize, T: Elem> std::fmt::Debug for Array<D, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Array<{D}, {}>{:?}", self.data.elem, self.data.shape)
    }
}

fn check_rank<const D: usize>() -> Result<()> {
    if (1..=3).contains(&D) {
        Ok(())
    } else {
        Err(Error::argument(format!("arrays have 1 to 3 axes, not {D}")))
    }
}

impl<const D: usize, T: Elem> Array<D, T> {
    /// Wraps untyped array data whose element type is `T`'s.
    pub(crate) fn from_data(data: ArrayData) -> Result<Self> {
        if data.elem != T::ir_type() || data.shape.len() != D {
            return Err(Error::argument(format!(
                "expected an array of {D} axes of {}, got {} axes of {}",
                T::ir_type(),
                data.shape.len(),
                data.elem
            )));
        }
        Ok(Array {
            data,
            _t: PhantomData,
        })
    }

    /// An array of `shape` (outermost axis first) from `values` in row-major order.
    ///
    /// # Errors
    /// `values.len()` differs from the product of `shape`, or `D` is not 1, 2 or 3.
    pub fn from_vec(shape: [usize; D], values: Vec<T>) -> Result<Self> {
        Self::from_slice(shape, &values)
    }

    /// As [`Array::from_vec`], borrowing the values.
    ///
    /// # Errors
    /// As [`Array::from_vec`].
    pub fn from_slice(shape: [usize; D], values: &[T]) -> Result<Self> {
        check_rank::<D>()?;
        let n: usize = shape.iter().product();
        if values.len() != n {
            return Err(Error::argument(format!(
                "shape {shape:?} holds {n} elements, but {} values were given",
                values.len()
            )));
        }
        let mut h = HostBuffer::zeroed(T::ir_type(), n);
        for l in 0..T::LANES {
            h.set_lane_run(l, 0, values.iter().map(|v| v.lane(l).to_bits()));
        }
        Ok(Self::from_host(h, shape.to_vec()))
    }

    /// An array of `shape` whose element at row-major position `i` is `f(i)`.
    ///
    /// # Errors
    /// As [`Array::from_vec`].
    pub fn from_fn(shape: [usize; D], f: impl FnMut(usize) -> T) -> Result<Self> {
        let n: usize = shape.iter().product();
        Self::from_vec(shape, (0..n).map(f).collect())
    }

    /// An array of `shape` with every element `value`.
    ///
    /// # Errors
    /// As [`Array::from_vec`].
    pub fn filled(shape: [usize; D], value: T) -> Result<Self> {
        Self::from_fn(shape, |_| value)
    }

    pub(crate) fn from_host(h: HostBuffer, shape: Vec<usize>) -> Self {
        Array {
            data: ArrayData::stored(Storage::from_host(h), shape),
            _t: PhantomData,
        }
    }

    /// Extent of each axis, outermost first.
    pub fn shape(&self) -> [usize; D] {
        let mut s = [0usize; D];
        s.copy_from_slice(&self.data.shape);
        s
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// True when the array has no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The IR element type (`f32`, `<3 x f32>`, …).
    pub fn elem_type(&self) -> Type {
        self.data.elem
    }

    /// The elements in row-major order (downloading from a GPU or running a deferred launch
    /// when needed).
    ///
    /// # Errors
    /// A deferred launch failed, or a download failed.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        if let Source::Stored(s) = &self.data.source {
            crate::sequence::check_host_read(s, "Array::to_vec")?;
        }
        let d = self.data.contiguous_view()?;
        let n = d.len();
        let h = match &d.source {
            Source::Stored(s) => s.host()?,
            Source::Grid => Arc::new(d.to_host_buffer()?),
        };
        let off = d.offset;
        if T::LANES == 1 {
            return Ok(h
                .lane_run(0, off, n)
                .map(|b| T::from_lanes(|_| T::Scalar::from_bits(b)))
                .collect());
        }
        let lanes: Vec<Vec<u64>> = (0..T::LANES)
            .map(|l| h.lane_run(l, off, n).collect())
            .collect();
        Ok((0..n)
            .map(|e| T::from_lanes(|l| T::Scalar::from_bits(lanes[l][e])))
            .collect())
    }

    /// Element at row-major position `i` (`None` past the end).
    ///
    /// # Errors
    /// As [`Array::to_vec`].
    pub fn get(&self, i: usize) -> Result<Option<T>> {
        if i >= self.len() {
            return Ok(None);
        }
        let p = self.data.position(i);
        Ok(Some(match &self.data.source {
            Source::Stored(s) => {
                crate::sequence::check_host_read(s, "Array::get")?;
                // One element only: a GPU-resident array is not downloaded whole.
                let c = s.element(p)?;
                T::from_lanes(|l| T::Scalar::from_bits(c.lane_bits()[l]))
            }
            Source::Grid => self.to_vec()?[i],
        }))
    }

    /// Sets the element at row-major position `i`, copying the storage first when another
    /// array shares it (copy-on-write).
    ///
    /// # Errors
    /// `i` out of range (naming it), or a transfer failing.
    pub fn set(&mut self, i: usize, value: T) -> Result<()> {
        if i >= self.len() {
            return Err(Error::argument(format!(
                "index {i} is out of range for an array of {} elements",
                self.len()
            )));
        }
        let mut h = self.unique_host()?;
        let p = self.data.position(i);
        for l in 0..T::LANES {
            h.set_bits(p, l, value.lane(l).to_bits());
        }
        self.data.source = Source::Stored(Storage::from_host(h));
        Ok(())
    }

    /// A host buffer this array may write: its own when nobody else shares the storage, else
    /// a copy; views and grids become plain contiguous storage first.
    pub(crate) fn unique_host(&mut self) -> Result<HostBuffer> {
        if let Source::Stored(s) = &self.data.source {
            crate::sequence::check_host_read(s, "writing an array on the host (set, scatter)")?;
        }
        if !matches!(self.data.source, Source::Stored(_)) || !self.data.contiguous() {
            let shape = self.data.shape.clone();
            let b = self.data.boundary;
            self.data = ArrayData::stored(Storage::from_host(self.data.to_host_buffer()?), shape);
            self.data.boundary = b;
        }
        let Source::Stored(s) = &self.data.source else {
            unreachable!("made stored above")
        };
        let h = s.host()?;
        Ok(Arc::try_unwrap(h).unwrap_or_else(|h| (*h).clone()))
    }

    /// Where the contents are (host, GPUs, pending); a grid has no storage.
    pub fn residency(&self) -> Option<Residency> {
        match &self.data.source {
            Source::Stored(s) => Some(s.residency()),
            Source::Grid => None,
        }
    }

    /// Makes a copy of the contents resident on `dev` now (uploads ahead of time).
    ///
    /// # Errors
    /// A transfer failing.
    pub fn to_device(&self, dev: &Device) -> Result<()> {
        match &self.data.source {
            Source::Stored(s) => s.make_resident(dev),
            Source::Grid => Ok(()),
        }
    }

    /// True when both arrays view the same storage (no copy was made between them).
    pub fn shares_storage(&self, other: &Self) -> bool {
        match (&self.data.source, &other.data.source) {
            (Source::Stored(a), Source::Stored(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// The same elements read with boundary mode `b` by programs that gather from it.
    pub fn with_boundary(&self, b: Boundary) -> Self {
        let mut a = self.clone();
        a.data.boundary = Some(b);
        a
    }

    /// The boundary mode set with [`Array::with_boundary`] (`None`: the program's own).
    pub fn boundary(&self) -> Option<Boundary> {
        self.data.boundary
    }

    /// The view of the box `start[k] .. end[k]` on each axis (shares storage).
    ///
    /// # Errors
    /// A bound past the extent or `start > end` (naming the axis).
    pub fn slice(&self, start: [usize; D], end: [usize; D]) -> Result<Self> {
        for k in 0..D {
            if start[k] > end[k] || end[k] > self.data.shape[k] {
                return Err(Error::argument(format!(
                    "slice axis {k}: {}..{} is not inside 0..{}",
                    start[k], end[k], self.data.shape[k]
                )));
            }
        }
        let mut a = self.clone();
        a.data.offset += (0..D)
            .map(|k| start[k] * self.data.strides[k])
            .sum::<usize>();
        for k in 0..D {
            a.data.shape[k] = end[k] - start[k];
        }
        Ok(a)
    }

    /// The view starting at coordinates `start` to the end of each axis (shares storage).
    ///
    /// # Errors
    /// As [`Array::slice`].
    pub fn offset(&self, start: [usize; D]) -> Result<Self> {
        self.slice(start, self.shape())
    }

    /// The view of every `step[k]`-th element along each axis, starting with the first
    /// (shares storage; programs read it through a copy).
    ///
    /// # Errors
    /// A step of zero.
    pub fn stride(&self, step: [usize; D]) -> Result<Self> {
        if let Some(k) = step.iter().position(|&s| s == 0) {
            return Err(Error::argument(format!("stride axis {k}: a step of 0")));
        }
        let mut a = self.clone();
        for (k, &st) in step.iter().enumerate() {
            a.data.shape[k] = self.data.shape[k].div_ceil(st);
            a.data.strides[k] *= st;
        }
        Ok(a)
    }
}

impl<const D: usize> Array<D, i32> {
    /// The data of a virtual index array of `shape` (see [`grid1`]).
    fn grid_data(shape: &[usize]) -> ArrayData {
        ArrayData {
            source: Source::Grid,
            elem: grid_elem(shape.len()),
            strides: row_major(shape),
            shape: shape.into(),
            offset: 0,
            boundary: None,
        }
    }
}

fn grid_elem(d: usize) -> Type {
    if d == 1 {
        Type::i32()
    } else {
        Type::tuple(weft_ir::ScalarType::I32, d as u8).expect("2 or 3 lanes")
    }
}

/// A virtual 1-D index array of `n` elements: element `i` is `i` (i32). It has no storage;
/// a program applied to it reads its `index` builtin instead (RapidMind's `grid`).
pub fn grid1(n: usize) -> Array<1, i32> {
    Array {
        data: Array::<1, i32>::grid_data(&[n]),
        _t: PhantomData,
    }
}

/// A virtual 2-D index array of `shape`: element `[i, j]` is `[i, j]` (i32 pairs), with no
/// storage (see [`grid1`]).
pub fn grid2(shape: [usize; 2]) -> Array<2, [i32; 2]> {
    Array {
        data: Array::<2, i32>::grid_data(&shape),
        _t: PhantomData,
    }
}

/// A virtual 3-D index array of `shape` (see [`grid2`]).
pub fn grid3(shape: [usize; 3]) -> Array<3, [i32; 3]> {
    Array {
        data: Array::<3, i32>::grid_data(&shape),
        _t: PhantomData,
    }
}

impl<const D: usize, S: Scalar> Array<D, S>
where
    ndarray::Dim<[usize; D]>: ndarray::Dimension,
{
    /// An array holding a copy of an `ndarray` array's elements (any memory order).
    ///
    /// # Errors
    /// `D` is not 1, 2 or 3.
    pub fn from_ndarray<A>(a: &ndarray::ArrayBase<A, ndarray::Dim<[usize; D]>>) -> Result<Self>
    where
        A: ndarray::Data<Elem = S>,
    {
        let mut shape = [0usize; D];
        shape.copy_from_slice(a.shape());
        Self::from_vec(shape, a.iter().copied().collect())
    }

    /// The elements as an `ndarray` array of the same shape.
    ///
    /// # Errors
    /// As [`Array::to_vec`].
    pub fn to_ndarray(&self) -> Result<ndarray::Array<S, ndarray::Dim<[usize; D]>>> {
        let v = self.to_vec()?;
        ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&self.shape()), v)
            .and_then(|a| a.into_dimensionality())
            .map_err(|e| Error::argument(format!("to_ndarray: {e}")))
    }
}

impl<const D: usize, S: Scalar> Array<D, S> {
    /// An array from a dynamically typed `ndarray` array, checking at run time that its
    /// element type is `S` and that it has `D` axes.
    ///
    /// # Errors
    /// A different element type ("expected f32, got f64") or number of axes.
    pub fn from_ndarray_dyn<U: Scalar>(a: &ndarray::ArrayD<U>) -> Result<Self> {
        if U::SCALAR != S::SCALAR {
            return Err(Error::argument(format!(
                "ndarray has elements of type {}, expected {}",
                U::SCALAR.name(),
                S::SCALAR.name()
            )));
        }
        if a.ndim() != D {
            return Err(Error::argument(format!(
                "ndarray has {} axes (shape {:?}), expected {D}",
                a.ndim(),
                a.shape()
            )));
        }
        let mut shape = [0usize; D];
        shape.copy_from_slice(a.shape());
        let v: Vec<S> = a.iter().map(|x| S::from_bits(x.to_bits())).collect();
        Self::from_vec(shape, v)
    }
}
