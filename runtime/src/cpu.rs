//! The CPU device: compile once per program text (in-memory cache) with Cranelift or LLVM,
//! marshal arrays into the kernel ABI's planes (docs/abi.md), and split the launch over the
//! launch pool (`pool.rs`).

use crate::buffer::HostBuffer;
use crate::cache::Lru;
use crate::context::Context;
use crate::disk::{DiskCache, Key};
pub use crate::error::RuntimeError;
use crate::plan::check_ranges;
use crate::planes::{read_output, Plane};
use crate::prepare::{Plan, Prepared};
use crate::stats;
use crate::watchdog::{AbortFlag, Watch, NEVER};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use weft_backend_cranelift::abi::{lanes, Layout, PAD};
use weft_backend_cranelift::{compile, Kernel};
use weft_ir::interp::{HostArray, Input, RunError};
use weft_ir::launch::ArgDesc;
use weft_ir::passes::partition::{self, Footprint};
use weft_ir::{Const, Module, ParamKind};

/// Which code generator a CPU device compiles with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum HostCompiler {
    /// Cranelift (fast compiles, 128-bit SIMD; the default).
    #[default]
    Cranelift,
    /// LLVM 19 through ORC (slower compiles, the host's widest vectors).
    Llvm(weft_backend_llvm::Options),
    /// Tiered (issue 24): a program's first launches run Cranelift code while LLVM (with
    /// these options) compiles it in the background; the next launch after that compile
    /// finishes runs the LLVM code (both compute the interpreter's bits). A program whose
    /// LLVM code is in the on-disk cache runs it at once, with no Cranelift compile. Kernels
    /// (kernel mode) run Cranelift code.
    Auto(weft_backend_llvm::Options),
}

/// A compiled host kernel of either code generator; both use the ABI of docs/abi.md.
// Built once per compile and kept behind an `Arc`: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
pub enum HostCode {
    /// From Cranelift.
    Cranelift(Kernel),
    /// From LLVM.
    Llvm(weft_backend_llvm::HostKernel),
}

impl HostCode {
    /// The context layout.
    pub fn layout(&self) -> &Layout {
        match self {
            HostCode::Cranelift(k) => &k.layout,
            HostCode::Llvm(k) => &k.layout,
        }
    }

    /// The entry point (`(ctx, begin, end)`).
    ///
    /// # Safety
    /// As [`Kernel::entry`]: a context per [`HostCode::layout`] with buffers padded to whole
    /// blocks that outlive the call.
    pub unsafe fn entry(&self) -> unsafe extern "C" fn(*const u64, i64, i64) {
        // SAFETY: forwarded contract.
        unsafe {
            match self {
                HostCode::Cranelift(k) => k.entry(),
                HostCode::Llvm(k) => k.entry(),
            }
        }
    }
}

/// Launches at or below this many elements run on the calling thread.
const SERIAL_LIMIT: usize = 1 << 11;

/// The CPU device: compiled kernels, cached by (structural hash of the module, program
/// name) in a least-recently-used cache of bounded size ([`CpuDevice::set_cache_capacity`]),
/// and a time budget per launch ([`CpuDevice::set_timeout`]).
pub struct CpuDevice {
    compiler: HostCompiler,
    /// [`HostCompiler::Auto`]'s upper tier: an LLVM device, and its background compiles.
    upper: Option<Arc<Upper>>,
    cache: Mutex<Lru<(u64, String), Arc<HostCode>>>,
    /// Prepared programs ([`CpuDevice::prepare`]), by (fingerprint of the module as given,
    /// program name).
    programs: Mutex<Lru<(u64, String), Arc<CpuProgram>>>,
    /// The same programs by module identity ([`CpuDevice::prepare_shared`]).
    shared: crate::prepare::ByIdentity<Arc<CpuProgram>>,
    timeout: Mutex<Option<Duration>>,
}

/// A program prepared and compiled for a CPU device ([`CpuDevice::prepare`]): launch it with
/// [`CpuDevice::launch_prepared`] or [`CpuDevice::launch_buffers_prepared`] as often as
/// wanted; nothing is planned, lifted or looked up again.
pub struct CpuProgram {
    prepared: Prepared,
    code: Arc<HostCode>,
    /// The interior variant of a stencil program and its footprint
    /// (`weft_ir::passes::partition`): run over the launch's interior, `code` over the rest.
    interior: Option<(Arc<HostCode>, Footprint)>,
    /// The last launch's split, by launch shape and the extents of the arrays the footprint
    /// reads: an iterated stencil launches the same shapes again and again.
    last_split: Mutex<Option<SplitKey>>,
    /// [`HostCompiler::Auto`]: the same program compiled by LLVM, set by the background
    /// compile when it finishes; launches from then on run it.
    tier: OnceLock<Arc<CpuProgram>>,
}

/// The upper tier of a [`HostCompiler::Auto`] device: the LLVM device that compiles its
/// programs in the background, and how many of those compiles are running.
struct Upper {
    llvm: CpuDevice,
    running: Mutex<usize>,
    idle: std::sync::Condvar,
    /// The background compiler: one thread (started on first use) running compiles in the
    /// order they come, so that they take one core and never the launch pool's or the
    /// foreground compiles' (a rayon job would queue the foreground behind them).
    queue: Mutex<Option<std::sync::mpsc::Sender<TierJob>>>,
}

/// A background compile of [`Upper`].
type TierJob = Box<dyn FnOnce() + Send>;

/// Foreground compiles of tiered devices running now, and when the last one ended: the
/// background compiler starts a job only after none has run for [`TIER_QUIET`], so that
/// on a machine with few cores the first launches' Cranelift compiles get them.
static FOREGROUND: Mutex<(usize, Option<Instant>)> = Mutex::new((0, None));

/// How long foreground compiles must have been idle before a background compile starts.
const TIER_QUIET: Duration = Duration::from_millis(20);

/// The longest a background compile waits for quiet (no foreground compile, no launch
/// running): a program launched back to back still gets its LLVM code. Long enough for a
/// long first launch to finish alone (MDH's 64³ grid on two cores: 0.7 s; with 250 ms the
/// compile took a core from it, 1.04 s instead of 0.69 s).
const TIER_PATIENCE: Duration = Duration::from_millis(1000);

/// CPU launches running now (any device): the background compiler waits for none, so that
/// a first launch runs on every core (about 1.2× faster on two cores).
static LAUNCHES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Counts a foreground compile while alive.
struct Foreground;

impl Foreground {
    fn enter() -> Foreground {
        FOREGROUND.lock().unwrap_or_else(|e| e.into_inner()).0 += 1;
        Foreground
    }
}

impl Drop for Foreground {
    fn drop(&mut self) {
        let mut f = FOREGROUND.lock().unwrap_or_else(|e| e.into_inner());
        f.0 -= 1;
        f.1 = Some(Instant::now());
    }
}

/// Waits until no foreground compile has run for [`TIER_QUIET`] and no launch runs, or
/// [`TIER_PATIENCE`] has passed.
fn wait_for_quiet() {
    let start = Instant::now();
    while start.elapsed() < TIER_PATIENCE {
        let wait = {
            let f = FOREGROUND.lock().unwrap_or_else(|e| e.into_inner());
            let launching = LAUNCHES.load(std::sync::atomic::Ordering::Relaxed) > 0;
            match *f {
                (0, None) if !launching => return,
                (0, Some(t)) if t.elapsed() >= TIER_QUIET && !launching => return,
                (0, Some(t)) if t.elapsed() < TIER_QUIET => TIER_QUIET - t.elapsed(),
                _ => Duration::from_millis(2),
            }
        };
        std::thread::sleep(wait);
    }
}

impl Upper {
    /// Runs `job` on the background compiler thread.
    fn spawn(&self, job: TierJob) {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        let job = match q.as_ref() {
            None => job,
            Some(tx) => match tx.send(job) {
                Ok(()) => return,
                Err(e) => e.0,
            },
        };
        let (tx, rx) = std::sync::mpsc::channel::<TierJob>();
        let started = std::thread::Builder::new()
            .name("weft-tier".into())
            .spawn(move || {
                for j in rx {
                    wait_for_quiet();
                    j();
                }
            });
        match started {
            Ok(_) => {
                let _ = tx.send(job);
                *q = Some(tx);
            }
            // No thread: compile now (the program still gets its LLVM code).
            Err(_) => job(),
        }
    }
}

/// Whether `WEFT_LOG` names `topic` (comma-separated topics, or `all`): debug lines on
/// standard error, such as the tiered JIT's switches (`WEFT_LOG=tier`).
fn logs(topic: &str) -> bool {
    static TOPICS: OnceLock<String> = OnceLock::new();
    let t = TOPICS.get_or_init(|| std::env::var("WEFT_LOG").unwrap_or_default());
    t.split(',').any(|x| x.trim() == topic || x.trim() == "all")
}

/// The ranges of a launch split into interior and border (`weft_ir::passes::partition::split`)
/// and the interior variant's code.
type Split = (Arc<HostCode>, Arc<Segments>);

/// A split's ranges and, once a large launch has used them, its schedule: the pieces the
/// launch pool runs, made once per split rather than per launch (an iterated stencil
/// launches the same split again and again; Jacobi 1024² has 2,046 ranges).
#[derive(Debug)]
struct Segments {
    segs: Vec<(std::ops::Range<usize>, bool)>,
    schedule: OnceLock<Schedule>,
}

/// The ranges (at most a chunk each) of a launch of `n` elements on `threads` threads, and
/// pieces of consecutive ranges holding about a chunk each.
#[derive(Clone, Debug)]
struct Schedule {
    threads: usize,
    n: usize,
    ranges: Vec<(usize, usize, bool)>,
    pieces: Vec<std::ops::Range<usize>>,
}

impl Schedule {
    fn new(segs: &[(std::ops::Range<usize>, bool)], n: usize, threads: usize) -> Schedule {
        let chunk = (n / (threads * 8)).max(SERIAL_LIMIT / 2).div_ceil(PAD) * PAD;
        // Ranges of at most `chunk` elements, then pieces of consecutive ranges holding about
        // `chunk` elements each (a stencil's split has two short ranges per row).
        let ranges: Vec<(usize, usize, bool)> = segs
            .iter()
            .flat_map(|(r, inside)| {
                (r.start..r.end)
                    .step_by(chunk)
                    .map(move |lo| (lo, (lo + chunk).min(r.end), *inside))
            })
            .collect();
        let mut pieces: Vec<std::ops::Range<usize>> = Vec::new();
        let (mut first, mut held) = (0, 0);
        for (k, &(lo, hi, _)) in ranges.iter().enumerate() {
            held += hi - lo;
            if held >= chunk || k + 1 == ranges.len() {
                pieces.push(first..k + 1);
                (first, held) = (k + 1, 0);
            }
        }
        Schedule {
            threads,
            n,
            ranges,
            pieces,
        }
    }
}

/// The schedule of a launch of `n` elements over `split`'s ranges (the whole launch without
/// one): the split's own, made once, if it was made for this thread count and size, else a
/// fresh one.
fn schedule_of(split: Option<&Split>, n: usize) -> std::borrow::Cow<'_, Schedule> {
    let threads = rayon::current_num_threads().max(1);
    let whole = [(0..n, false)];
    let segs = split.map_or(&whole[..], |(_, s)| &s.segs[..]);
    match split.map(|(_, s)| s.schedule.get_or_init(|| Schedule::new(segs, n, threads))) {
        Some(s) if s.threads == threads && s.n == n => std::borrow::Cow::Borrowed(s),
        _ => std::borrow::Cow::Owned(Schedule::new(segs, n, threads)),
    }
}

/// A launch shape, the read arrays' extents, and the split they give.
type SplitKey = (Vec<usize>, Vec<Vec<usize>>, Option<Split>);

impl CpuProgram {
    /// The interior/border split of a launch of `shape` whose array parameter `i` has the
    /// extents `extents(i)`: `None` when the program has no stencil reads or the launch no
    /// interior range.
    fn split(&self, shape: &[usize], extents: impl Fn(usize) -> Vec<usize>) -> Option<Split> {
        let (code, fp) = self.interior.as_ref()?;
        let ext: Vec<Vec<usize>> = fp.reads.iter().map(|(i, _)| extents(*i)).collect();
        let mut last = self.last_split.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((s, e, split)) = &*last {
            if s == shape && *e == ext {
                return split.clone();
            }
        }
        let bx = fp.interior(shape, |i| {
            let k = fp.reads.iter().position(|r| r.0 == i).unwrap_or(0);
            ext[k].clone()
        });
        // Kernels store only their ranges' elements, so interior ranges need no alignment.
        // Cranelift's kernels run a range's partial blocks as masked SIMD blocks, so its
        // interior ranges are aligned to whole blocks (the rest of a row goes to the border
        // ranges: one block at each end of a Jacobi row; aligning to PAD = two blocks was
        // 9% slower per 1024² sweep: 160 against 175 µs); LLVM's run partial blocks and
        // short border ranges one element
        // at a time (no gathers), so the whole interior goes to the interior kernel
        // (Jacobi 1024² with LLVM: 13–14 ms against 22–29 ms aligned, docs/performance.md).
        let align = match *self.code {
            HostCode::Llvm(_) => 1,
            HostCode::Cranelift(_) => weft_ir::abi::BLOCK,
        };
        let segs = partition::split(shape, &bx, align);
        let usable = match **code {
            HostCode::Llvm(_) => true,
            HostCode::Cranelift(_) => whole_blocks_in_rows(&segs, shape),
        };
        let split = (usable && segs.iter().any(|s| s.1)).then(|| {
            let segs = Segments {
                segs,
                schedule: OnceLock::new(),
            };
            (code.clone(), Arc::new(segs))
        });
        *last = Some((shape.to_vec(), ext, split.clone()));
        split
    }
}

impl CpuProgram {
    /// The preparation (kernel module, argument planning).
    pub fn prepared(&self) -> &Prepared {
        &self.prepared
    }

    /// The compiled kernel a launch starts now runs (the upper tier's once it is ready).
    pub fn code(&self) -> &Arc<HostCode> {
        &self.current().code
    }

    /// Whether launches run LLVM code: always on an LLVM device; on a
    /// [`HostCompiler::Auto`] device once the background compile has finished.
    pub fn is_upper_tier(&self) -> bool {
        matches!(*self.current().code, HostCode::Llvm(_))
    }

    /// The program launches run now: the upper tier once it is ready, else this one.
    fn current(&self) -> &CpuProgram {
        self.tier.get().map_or(self, |t| t)
    }
}

impl Default for CpuDevice {
    fn default() -> CpuDevice {
        CpuDevice::with_compiler(HostCompiler::default())
    }
}

/// The budget `WEFT_TIMEOUT` gives new devices (read once; a bad value counts as none here,
/// the CLI reports it).
fn env_timeout() -> Option<Duration> {
    static T: std::sync::OnceLock<Option<Duration>> = std::sync::OnceLock::new();
    *T.get_or_init(|| crate::watchdog::timeout_from_env().ok().flatten())
}

/// A launch's context words (docs/abi.md), inline up to [`CTX_INLINE`] words so that a
/// replayed launch's copy allocates nothing.
struct Ctx(Words);

/// Context words a [`Ctx`] holds without allocating.
const CTX_INLINE: usize = 32;

/// Context words.
type Words = smallvec::SmallVec<[u64; CTX_INLINE]>;
// SAFETY: the context block holds addresses of buffers that live for the whole launch; the
// kernels only read the block, and write disjoint element ranges of the output planes.
unsafe impl Sync for Ctx {}

impl CpuDevice {
    /// A CPU device compiling with Cranelift, with an empty kernel cache.
    pub fn new() -> CpuDevice {
        CpuDevice::default()
    }

    /// A CPU device compiling with `compiler`, with an empty kernel cache of
    /// [`crate::cache::DEFAULT_CAPACITY`] kernels and the time budget of the `WEFT_TIMEOUT`
    /// environment variable (seconds; none when unset, `0` or not a number).
    pub fn with_compiler(compiler: HostCompiler) -> CpuDevice {
        let upper = match compiler {
            HostCompiler::Auto(o) => Some(Arc::new(Upper {
                llvm: CpuDevice::with_compiler(HostCompiler::Llvm(o)),
                running: Mutex::new(0),
                idle: std::sync::Condvar::new(),
                queue: Mutex::new(None),
            })),
            _ => None,
        };
        CpuDevice {
            compiler,
            upper,
            cache: Mutex::default(),
            programs: Mutex::default(),
            shared: Default::default(),
            timeout: Mutex::new(env_timeout()),
        }
    }

    /// The code generator this device compiles with.
    pub fn compiler(&self) -> HostCompiler {
        self.compiler
    }

    /// Sets the time budget of each later launch (none: unlimited). Compiled code checks it
    /// at every loop back-edge (docs/abi.md, "The launch watchdog"); a launch that runs
    /// longer stops early and fails with [`RuntimeError::Timeout`], naming the program.
    /// Prepared launches ([`CpuDevice::launch`]) keep the budget they were made with.
    pub fn set_timeout(&self, budget: Option<Duration>) {
        *self.timeout.lock().unwrap_or_else(|e| e.into_inner()) = budget;
    }

    /// Waits until no background compile of a [`HostCompiler::Auto`] device is running (at
    /// once on other devices): every program prepared before the call then runs LLVM code
    /// (unless LLVM failed on it). For tests and benchmarks.
    pub fn wait_for_upper_tier(&self) {
        if let Some(u) = &self.upper {
            let mut n = u.running.lock().unwrap_or_else(|e| e.into_inner());
            while *n > 0 {
                n = u.idle.wait(n).unwrap_or_else(|e| e.into_inner());
            }
        }
    }

    /// The time budget of each launch (see [`CpuDevice::set_timeout`]).
    pub fn timeout(&self) -> Option<Duration> {
        *self.timeout.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sets how many compiled kernels the cache keeps (at least 1); beyond that the least
    /// recently used one is dropped, and its code freed once no launch holds it.
    pub fn set_cache_capacity(&self, kernels: usize) {
        self.lock_cache().set_capacity(kernels);
        self.lock_programs().set_capacity(kernels);
        self.shared.set_capacity(kernels);
    }

    /// How many compiled kernels the cache keeps.
    pub fn cache_capacity(&self) -> usize {
        self.lock_cache().capacity()
    }

    fn lock_programs(&self) -> std::sync::MutexGuard<'_, Lru<(u64, String), Arc<CpuProgram>>> {
        self.programs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Program `name` of `m` prepared ([`Prepared::new`]) and compiled, from the cache or
    /// freshly made: what every launch of this device starts from.
    ///
    /// # Errors
    /// An unknown program or a compile error.
    pub fn prepare(&self, m: &Module, name: &str) -> Result<Arc<CpuProgram>, RuntimeError> {
        let key = (weft_ir::launch::fingerprint(m), name.to_string());
        if let Some(p) = self.lock_programs().get(&key) {
            return Ok(p);
        }
        let p = match &self.upper {
            Some(up) => self.prepare_tiered(up, m, name)?,
            None => Arc::new(self.prepare_new(m, name)?),
        };
        Ok(self.lock_programs().get_or_insert(key, p))
    }

    /// Program `name` of `m` prepared and compiled by this device's compiler (Cranelift for
    /// [`HostCompiler::Auto`]), bypassing the program cache.
    fn prepare_new(&self, m: &Module, name: &str) -> Result<CpuProgram, RuntimeError> {
        self.compile_prepared(Prepared::new(m, name)?, name)
    }

    /// The program `prepared` (program `name`) compiled by this device's compiler.
    fn compile_prepared(&self, prepared: Prepared, name: &str) -> Result<CpuProgram, RuntimeError> {
        let code = self.kernel(prepared.kernel_module(), name)?;
        let interior = self.interior(prepared.kernel_module(), name)?;
        Ok(CpuProgram {
            prepared,
            code,
            interior,
            last_split: Mutex::new(None),
            tier: OnceLock::new(),
        })
    }

    /// [`HostCompiler::Auto`]'s preparation: the LLVM code at once if the on-disk cache
    /// holds it, else Cranelift code now and LLVM code in the background (on the tier
    /// thread), which the program's launches switch to when it is ready.
    fn prepare_tiered(
        &self,
        up: &Arc<Upper>,
        m: &Module,
        name: &str,
    ) -> Result<Arc<CpuProgram>, RuntimeError> {
        let t0 = Instant::now();
        let prepared = match up.llvm.prepare_from_disk(Prepared::new(m, name)?, name) {
            Ok(p) => return Ok(Arc::new(p)),
            Err(prepared) => *prepared,
        };
        let p = {
            let _busy = Foreground::enter();
            Arc::new(self.compile_prepared(prepared, name)?)
        };
        let (weak, up2, m2, name2) = (Arc::downgrade(&p), up.clone(), m.clone(), name.to_string());
        *up.running.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        up.spawn(Box::new(move || {
            // A program dropped meanwhile needs no LLVM code.
            let q = match weak.strong_count() {
                0 => None,
                _ => Some(up2.llvm.prepare_new(&m2, &name2).map(Arc::new)),
            };
            match (q, weak.upgrade()) {
                (Some(Ok(q)), Some(p)) if p.tier.set(q.clone()).is_ok() => {
                    stats::count_tier_switch();
                    if logs("tier") {
                        eprintln!(
                            "weft: @{name2}: LLVM code ready after {:.1} ms; later launches run it",
                            t0.elapsed().as_secs_f64() * 1e3
                        );
                    }
                }
                (Some(Err(e)), _) if logs("tier") => {
                    eprintln!("weft: @{name2}: LLVM failed, keeping Cranelift code: {e}")
                }
                _ => {}
            }
            let mut n = up2.running.lock().unwrap_or_else(|e| e.into_inner());
            *n -= 1;
            up2.idle.notify_all();
        }));
        Ok(p)
    }

    /// On an LLVM device: the program `prepared` (program `name`) with its code (and its
    /// interior variant's) from the on-disk cache, or `prepared` back if the cache lacks any
    /// of them (nothing is compiled).
    fn prepare_from_disk(
        &self,
        prepared: Prepared,
        name: &str,
    ) -> Result<CpuProgram, Box<Prepared>> {
        let HostCompiler::Llvm(o) = self.compiler else {
            return Err(Box::new(prepared));
        };
        if DiskCache::global().is_none() {
            return Err(Box::new(prepared));
        }
        let km = prepared.kernel_module();
        let Some(code) = llvm_host_from_disk(km, name, o) else {
            return Err(Box::new(prepared));
        };
        let interior = match interior_module(km, name) {
            None => None,
            Some((im, fp)) => match llvm_host_from_disk(&im, name, o) {
                Some(k) => Some((Arc::new(HostCode::Llvm(k)), fp)),
                None => return Err(Box::new(prepared)),
            },
        };
        Ok(CpuProgram {
            prepared,
            code: Arc::new(HostCode::Llvm(code)),
            interior,
            last_split: Mutex::new(None),
            tier: OnceLock::new(),
        })
    }

    /// [`CpuDevice::prepare`] for a module the caller keeps unchanged behind `m` (the `weft`
    /// library's programs): found by the `Arc`'s identity, without hashing the IR.
    ///
    /// # Errors
    /// As [`CpuDevice::prepare`].
    pub fn prepare_shared(
        &self,
        m: &Arc<Module>,
        name: &str,
    ) -> Result<Arc<CpuProgram>, RuntimeError> {
        self.shared.get_or(m, name, || self.prepare(m, name))
    }

    /// Program `name` of `m` compiled with its output `r.output` reduced inside its kernels
    /// ([`weft_backend_llvm::HostReduce`]: each call stores partial states, not the
    /// output), for [`BufferLaunch::run_reduced`]; kept with the programs of
    /// [`CpuDevice::prepare`]. `None` when this device does not compile
    /// with LLVM alone: Cranelift, and so the tiered JIT, has no such lowering.
    ///
    /// # Errors
    /// As [`CpuDevice::prepare`]; an output that cannot be reduced (named in the error).
    pub fn prepare_reduced(
        &self,
        m: &Arc<Module>,
        name: &str,
        r: weft_backend_llvm::HostReduce,
    ) -> Result<Option<Arc<CpuProgram>>, RuntimeError> {
        let HostCompiler::Llvm(o) = self.compiler else {
            return Ok(None);
        };
        let o = weft_backend_llvm::Options {
            reduce: Some(r),
            ..o
        };
        let tag = format!("{name}#reduce{}:{:?}:{:x}", r.output, r.op, r.identity);
        let key = (weft_ir::launch::fingerprint(m), tag.clone());
        if let Some(p) = self.lock_programs().get(&key) {
            return Ok(Some(p));
        }
        let p = {
            let prepared = Prepared::new(m, name)?;
            let km = prepared.kernel_module();
            let compile = |km: &Module, key: String| {
                self.cache_entry(km, key, || {
                    Ok(HostCode::Llvm(llvm_host(km, name, None, o)?))
                })
            };
            let code = compile(km, tag.clone())?;
            let interior = match interior_module(km, name) {
                None => None,
                Some((im, fp)) => Some((compile(&im, format!("{tag}#interior"))?, fp)),
            };
            Arc::new(CpuProgram {
                prepared,
                code,
                interior,
                last_split: Mutex::new(None),
                tier: OnceLock::new(),
            })
        };
        Ok(Some(self.lock_programs().get_or_insert(key, p)))
    }

    /// Whether [`CpuDevice::prepare_shared`] has program `name` of `m` already.
    pub fn is_prepared_shared(&self, m: &Arc<Module>, name: &str) -> bool {
        self.shared.contains(m, name)
    }

    /// The compiled interior variant of program `name` of `m` (after inlining, so reads in
    /// callees count) and its footprint, if it has stencil reads.
    fn interior(
        &self,
        m: &Module,
        name: &str,
    ) -> Result<Option<(Arc<HostCode>, Footprint)>, RuntimeError> {
        let Some((im, fp)) = interior_module(m, name) else {
            return Ok(None);
        };
        let code = match self.compiler {
            // Cranelift's interior kernels run ranges of whole blocks inside one row each
            // (`split` with an alignment of `BLOCK`; `whole_blocks_in_rows` checks it):
            // compiled without the gathers of blocks across rows.
            HostCompiler::Cranelift | HostCompiler::Auto(_) => {
                self.cache_entry(&im, format!("{name}#interior"), || {
                    let t0 = Instant::now();
                    let k = weft_backend_cranelift::compile_interior(&im, name)?;
                    stats::count_compile(stats::Compiler::Cranelift, t0.elapsed());
                    Ok(HostCode::Cranelift(k))
                })?
            }
            HostCompiler::Llvm(_) => self.kernel(&im, name)?,
        };
        Ok(Some((code, fp)))
    }

    fn lock_cache(&self) -> std::sync::MutexGuard<'_, Lru<(u64, String), Arc<HostCode>>> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The compiled kernel for program `name` of `m`, from the cache or freshly compiled.
    pub fn kernel(&self, m: &Module, name: &str) -> Result<Arc<HostCode>, RuntimeError> {
        self.cache_entry(m, name.to_string(), || {
            Ok(match self.compiler {
                HostCompiler::Cranelift | HostCompiler::Auto(_) => {
                    let t0 = Instant::now();
                    let k = compile(m, name)?;
                    stats::count_compile(stats::Compiler::Cranelift, t0.elapsed());
                    HostCode::Cranelift(k)
                }
                HostCompiler::Llvm(o) => HostCode::Llvm(llvm_host(m, name, None, o)?),
            })
        })
    }

    /// The compiled code of kernel `name` of `m` for work-groups of `block` work-items
    /// (cached per block size).
    ///
    /// # Errors
    /// A compile error.
    pub fn group_kernel(
        &self,
        m: &Module,
        name: &str,
        block: [u32; 3],
    ) -> Result<Arc<HostCode>, RuntimeError> {
        let key = format!("{name}@{}x{}x{}", block[0], block[1], block[2]);
        self.cache_entry(m, key, || match self.compiler {
            HostCompiler::Cranelift | HostCompiler::Auto(_) => {
                let t0 = Instant::now();
                let k = weft_backend_cranelift::compile_kernel(m, name, block)?;
                stats::count_compile(stats::Compiler::Cranelift, t0.elapsed());
                Ok(HostCode::Cranelift(k))
            }
            HostCompiler::Llvm(o) => Ok(HostCode::Llvm(llvm_host(m, name, Some(block), o)?)),
        })
    }

    /// The cache entry (structural fingerprint of `m`, `key`), compiled by `compile` when
    /// missing.
    fn cache_entry(
        &self,
        m: &Module,
        key: String,
        compile: impl FnOnce() -> Result<HostCode, RuntimeError>,
    ) -> Result<Arc<HostCode>, RuntimeError> {
        let key = (weft_ir::launch::fingerprint(m), key);
        if let Some(k) = self.lock_cache().get(&key) {
            return Ok(k);
        }
        let k = Arc::new(compile()?);
        Ok(self.lock_cache().get_or_insert(key, k))
    }

    /// Runs kernel `name` of `m` over `grid` (DESIGN §2 kernel mode), like
    /// [`weft_ir::Interpreter::run_kernel`]: buffers are updated in place; work-groups run in
    /// parallel on the launch pool, the work-items of each the MCUDA way (docs/kernel-mode.md).
    ///
    /// # Errors
    /// Arguments that do not match the kernel's parameters (named), or a compile error.
    pub fn run_kernel(
        &self,
        m: &Module,
        name: &str,
        args: &mut [weft_ir::KernelArg],
        grid: &weft_ir::KernelGrid,
    ) -> Result<(), RuntimeError> {
        let p = m
            .get(name)
            .ok_or_else(|| RunError::UnknownProgram(name.to_string()))?;
        weft_ir::launch::check_kernel_host_args(p, args)?;
        let kernel = self.group_kernel(m, name, grid.block)?;
        let layout = kernel.layout();
        let mut ctx = Context::new(layout);
        let mut planes: Vec<Vec<Plane>> = Vec::new();
        for (i, a) in args.iter().enumerate() {
            let mut ps = Vec::new();
            match a {
                weft_ir::KernelArg::Value(c) => ctx.uniform(i, c),
                weft_ir::KernelArg::Array(_) | weft_ir::KernelArg::Buffer(_) => {
                    let h = a.array().expect("array argument");
                    ps = (0..lanes(h.elem))
                        .map(|l| Plane::from_array(h, l, h.len()))
                        .collect();
                    ctx.planes(i, ps.iter_mut().map(Plane::ptr));
                    ctx.extents(i, lanes(h.elem), &h.shape);
                }
            }
            planes.push(ps);
        }
        ctx.grid(grid.groups);
        // A stopped launch leaves the buffers as they were: the planes are not copied back.
        // SAFETY: the context follows the kernel's layout and every plane it names lives
        // until the end of this function.
        unsafe { self.run_groups(&kernel, ctx, name, grid.num_groups()) }?;
        for (a, ps) in args.iter_mut().zip(&planes) {
            if let weft_ir::KernelArg::Buffer(h) = a {
                let views: Vec<&[u8]> = ps.iter().map(|p| p.0.as_slice()).collect();
                let n = h.len();
                **h = read_output(h.elem, &h.shape, n, &views);
            }
        }
        Ok(())
    }

    /// [`CpuDevice::run_kernel`] over [`HostBuffer`]s without copying them (the `weft`
    /// library's arrays): arrays are read where they are, buffers written in place.
    ///
    /// # Errors
    /// As [`CpuDevice::run_kernel`]; also an element range outside its buffer. A launch that
    /// fails or stops at its time budget leaves the buffers' contents unspecified (the
    /// library runs kernels on copies it keeps only on success).
    pub fn run_kernel_buffers(
        &self,
        m: &Module,
        name: &str,
        args: &mut [KernelBuf<'_>],
        grid: &weft_ir::KernelGrid,
    ) -> Result<(), RuntimeError> {
        let p = m
            .get(name)
            .ok_or_else(|| RunError::UnknownProgram(name.to_string()))?;
        let descs: Vec<ArgDesc> = args.iter().map(KernelBuf::desc).collect();
        weft_ir::launch::check_kernel_args(p, &descs)?;
        for (i, (par, a)) in p.params.iter().zip(args.iter()).enumerate() {
            if par.kind == ParamKind::Buffer && !matches!(a, KernelBuf::Buffer { .. }) {
                return Err(RunError::BadInput {
                    program: p.name.clone(),
                    param: p.param_name(i).to_string(),
                    message: "is a buffer: pass it writable (KernelBuf::Buffer)".into(),
                }
                .into());
            }
        }
        check_ranges(
            p,
            args.iter().map(|a| match a {
                KernelBuf::Value(_) => None,
                KernelBuf::Array { buf, offset, shape } => {
                    Some((*offset, shape.iter().product(), buf.len()))
                }
                KernelBuf::Buffer { buf, shape } => Some((0, shape.iter().product(), buf.len())),
            }),
        )?;
        let kernel = self.group_kernel(m, name, grid.block)?;
        let layout = kernel.layout();
        let mut ctx = Context::new(layout);
        for (i, a) in args.iter_mut().enumerate() {
            match a {
                KernelBuf::Value(c) => ctx.uniform(i, c),
                KernelBuf::Array { buf, offset, shape } => {
                    let b = buf.lane_bytes();
                    ctx.planes(
                        i,
                        (0..buf.lanes()).map(|l| buf.plane(l)[*offset * b..].as_ptr() as u64),
                    );
                    ctx.extents(i, buf.lanes(), shape);
                }
                KernelBuf::Buffer { buf, shape } => {
                    let ptrs: Vec<u64> = (0..buf.lanes())
                        .map(|l| buf.plane_mut(l).as_mut_ptr() as u64)
                        .collect();
                    ctx.planes(i, ptrs);
                    ctx.extents(i, buf.lanes(), shape);
                }
            }
        }
        ctx.grid(grid.groups);
        // SAFETY: the context follows the kernel's layout; every plane it names belongs to a
        // buffer borrowed for this call.
        unsafe { self.run_groups(&kernel, ctx, name, grid.num_groups()) }?;
        for a in args.iter_mut() {
            if let KernelBuf::Buffer { buf, .. } = a {
                buf.zero_padding();
            }
        }
        Ok(())
    }

    /// Runs work-groups `0 .. n` of `kernel` with context `ctx`, in chunks over the launch
    /// pool, under the device's time budget.
    ///
    /// # Safety
    /// `ctx` follows `kernel`'s layout and every plane it names lives for the call; the
    /// kernel writes buffers only through in-range stores and atomics.
    unsafe fn run_groups(
        &self,
        kernel: &HostCode,
        ctx: Context,
        name: &str,
        n: usize,
    ) -> Result<(), RuntimeError> {
        let mut ctx = Ctx(Words::from_vec(ctx.words));
        // SAFETY: forwarded contract.
        let entry = unsafe { kernel.entry() };
        let threads = rayon::current_num_threads().max(1);
        let chunk = n.div_ceil(threads * 4).max(1);
        let ranges: Vec<(usize, usize)> = (0..n.div_ceil(chunk))
            .map(|c| (c * chunk, ((c + 1) * chunk).min(n)))
            .collect();
        // Work-groups run over every thread: always counted.
        watched(
            &mut ctx,
            (kernel.layout().abort, usize::MAX),
            name,
            self.timeout(),
            |ctx, abort| {
                let run = |lo: usize, hi: usize| {
                    if !abort.is_raised() {
                        // SAFETY: as above; the abort word points at `abort`.
                        unsafe { entry(ctx.0.as_ptr(), lo as i64, hi as i64) }
                    }
                };
                crate::pool::run(ranges.len(), &|i| run(ranges[i].0, ranges[i].1));
            },
        )
    }

    /// Number of kernels in the cache.
    pub fn cached(&self) -> usize {
        self.lock_cache().len()
    }

    /// Empties the kernel cache; a kernel's code is freed once no launch holds it.
    pub fn clear_cache(&self) {
        self.lock_cache().clear();
        self.lock_programs().clear();
        self.shared.clear();
    }

    /// Applies program `name` over arrays (DESIGN §5), like
    /// [`weft_ir::Interpreter::apply`], on compiled code; results are bit-identical.
    pub fn apply(
        &self,
        m: &Module,
        name: &str,
        inputs: &[Input],
        shape: Option<&[usize]>,
    ) -> Result<Vec<HostArray>, RuntimeError> {
        let mut l = self.launch(m, name, inputs, shape)?;
        l.run()?;
        Ok(l.outputs())
    }

    /// Prepares a launch: checks the inputs, compiles (or finds) the kernel and copies the
    /// inputs into kernel buffers. [`Launch::run`] then runs the kernel over them as often
    /// as wanted (benchmarks time exactly that); [`Launch::outputs`] reads the results.
    pub fn launch(
        &self,
        m: &Module,
        name: &str,
        inputs: &[Input],
        shape: Option<&[usize]>,
    ) -> Result<Launch, RuntimeError> {
        let prog = self.prepare(m, name)?;
        self.launch_prepared(&prog, inputs, shape)
    }

    /// [`CpuDevice::launch`] of a prepared program: checks the inputs (a recent launch's plan
    /// is reused when they have its signature) and copies them into kernel buffers.
    ///
    /// # Errors
    /// As [`CpuDevice::launch`].
    pub fn launch_prepared(
        &self,
        prog: &CpuProgram,
        inputs: &[Input],
        shape: Option<&[usize]>,
    ) -> Result<Launch, RuntimeError> {
        let prog = prog.current();
        let name = prog.prepared.name();
        weft_ir::launch::check_host_inputs(prog.prepared.program(), inputs)?;
        let descs: Vec<ArgDesc> = inputs.iter().map(ArgDesc::of).collect();
        let plan = prog.prepared.plan(&descs, shape)?;
        let (p, n) = (prog.prepared.program(), plan.n);
        let kernel = prog.code.clone();
        let layout = kernel.layout();
        let padded = n.div_ceil(PAD) * PAD;
        let mut ctx = Context::new(layout);
        let mut keep: Vec<Plane> = Vec::new();
        for (i, (par, inp)) in p.params.iter().zip(inputs).enumerate() {
            match (par.kind, inp) {
                (ParamKind::Varying, Input::Array(a)) | (ParamKind::Array, Input::Array(a)) => {
                    let len = if par.kind == ParamKind::Varying {
                        padded
                    } else {
                        a.len()
                    };
                    let mut ps: Vec<Plane> = (0..lanes(a.elem))
                        .map(|l| Plane::from_array(a, l, len))
                        .collect();
                    ctx.planes(i, ps.iter_mut().map(Plane::ptr));
                    keep.extend(ps);
                    if par.kind == ParamKind::Array {
                        ctx.extents(i, lanes(a.elem), &a.shape);
                    }
                }
                (ParamKind::Uniform, Input::Uniform(c)) => ctx.uniform(i, c),
                _ => {}
            }
        }
        for (j, c) in plan.extra.iter().enumerate() {
            ctx.uniform(inputs.len() + j, c);
        }
        let mut outs: Vec<Vec<Plane>> = Vec::new();
        for (k, o) in p.outputs.iter().enumerate() {
            let s = o.ty.elem_scalar();
            let mut planes: Vec<Plane> = (0..lanes(o.ty))
                .map(|_| Plane::try_new(s, padded))
                .collect::<Option<_>>()
                .ok_or_else(|| too_big_to_allocate(name, &plan.shape))?;
            ctx.output(k, planes.iter_mut().map(Plane::ptr));
            outs.push(planes);
        }
        ctx.launch(&plan.shape);
        let words = ctx.words;
        let watch = Budget {
            word: layout.abort,
            program: prog.prepared.name_shared().clone(),
            budget: self.timeout(),
        };
        let split = prog.split(&plan.shape, |i| match inputs.get(i) {
            Some(Input::Array(a)) => a.shape.clone(),
            _ => Vec::new(),
        });
        Ok(Launch {
            kernel,
            split,
            ctx: Ctx(Words::from_vec(words)),
            _inputs: keep,
            outs,
            out_types: p.outputs.iter().map(|o| o.ty).collect(),
            shape: plan.shape.clone(),
            n,
            watch,
        })
    }

    /// Applies program `name` of `m` over [`HostBuffer`]s without copying them (the
    /// `weft` library's arrays): like [`CpuDevice::apply`], with fresh output buffers.
    ///
    /// # Errors
    /// As [`CpuDevice::apply`]; also an element range outside its buffer.
    pub fn apply_buffers(
        &self,
        m: &Module,
        name: &str,
        args: &[BufArg],
        shape: Option<&[usize]>,
    ) -> Result<Vec<HostBuffer>, RuntimeError> {
        let mut l = self.launch_buffers(m, name, args, shape)?;
        l.run()?;
        Ok(l.into_outputs())
    }

    /// Prepares a launch over [`HostBuffer`]s: checks the arguments, lifts uniform work
    /// (DESIGN §4), compiles (or finds) the kernel and points its context at the buffers.
    ///
    /// # Errors
    /// As [`CpuDevice::launch`]; also an element range outside its buffer.
    pub fn launch_buffers<'a>(
        &self,
        m: &Module,
        name: &str,
        args: &[BufArg<'a>],
        shape: Option<&[usize]>,
    ) -> Result<BufferLaunch<'a>, RuntimeError> {
        let prog = self.prepare(m, name)?;
        self.launch_buffers_prepared(&prog, args, shape)
    }

    /// [`CpuDevice::launch_buffers`] of a prepared program: checks the arguments (a recent
    /// launch's plan is reused when they have its signature) and points the kernel's context
    /// at them.
    ///
    /// # Errors
    /// As [`CpuDevice::launch_buffers`].
    pub fn launch_buffers_prepared<'a>(
        &self,
        prog: &CpuProgram,
        args: &[BufArg<'a>],
        shape: Option<&[usize]>,
    ) -> Result<BufferLaunch<'a>, RuntimeError> {
        let prog = prog.current();
        let name = prog.prepared.name();
        let (plan, p) = plan_checked(prog, args, shape)?;
        let n = plan.n;
        let kernel = prog.code.clone();
        let layout = kernel.layout();
        let mut ctx = Context::new(layout);
        fill_params(&mut ctx, p, args, &plan);
        let mut outs: Vec<HostBuffer> = p
            .outputs
            .iter()
            .map(|o| HostBuffer::try_for_output(o.ty, n))
            .collect::<Option<_>>()
            .ok_or_else(|| too_big_to_allocate(name, &plan.shape))?;
        for (k, o) in outs.iter_mut().enumerate() {
            let lanes = o.lanes();
            ctx.output(k, (0..lanes).map(|l| o.plane_mut(l).as_mut_ptr() as u64));
        }
        ctx.launch(&plan.shape);
        let words = ctx.words;
        let watch = Budget {
            word: layout.abort,
            program: prog.prepared.name_shared().clone(),
            budget: self.timeout(),
        };
        let split = prog.split(&plan.shape, |i| match args.get(i) {
            Some(BufArg::Array { shape, .. }) => shape.to_vec(),
            _ => Vec::new(),
        });
        Ok(BufferLaunch {
            kernel,
            split,
            ctx: Ctx(Words::from_vec(words)),
            outs,
            plan,
            n,
            watch,
            _args: std::marker::PhantomData,
        })
    }
}

/// The plan of a launch of `prog` over `args` and the program, after checking that every
/// array argument's elements lie inside its buffer.
fn plan_checked<'p>(
    prog: &'p CpuProgram,
    args: &[BufArg],
    shape: Option<&[usize]>,
) -> Result<(Arc<Plan>, &'p weft_ir::Program), RuntimeError> {
    let descs: smallvec::SmallVec<[ArgDesc; 8]> = args.iter().map(BufArg::desc).collect();
    let plan = prog.prepared.plan(&descs, shape)?;
    let p = prog.prepared.program();
    check_ranges(
        p,
        args.iter().map(|a| match a {
            BufArg::Array { buf, offset, shape } => {
                Some((*offset, shape.iter().product(), buf.len()))
            }
            BufArg::Uniform(_) => None,
        }),
    )?;
    Ok((plan, p))
}

/// Writes the arguments' words (plane addresses, array extents, uniforms, the prologue's
/// results) into `ctx`.
fn fill_params(ctx: &mut Context, p: &weft_ir::Program, args: &[BufArg], plan: &Plan) {
    for (i, (par, arg)) in p.params.iter().zip(args).enumerate() {
        match arg {
            BufArg::Array { buf, offset, shape } => {
                let b = buf.lane_bytes();
                ctx.planes(
                    i,
                    (0..buf.lanes()).map(|l| buf.plane(l)[offset * b..].as_ptr() as u64),
                );
                if par.kind == ParamKind::Array {
                    ctx.extents(i, buf.lanes(), shape);
                }
            }
            BufArg::Uniform(c) => ctx.uniform(i, c),
        }
    }
    for (j, c) in plan.extra.iter().enumerate() {
        ctx.uniform(args.len() + j, c);
    }
}

/// A launch of one program bound to one argument signature (issue 23: replayed launch
/// sequences): the plan, the argument checks and the context words of uniforms and extents
/// are made once by [`CpuDevice::bind`]; [`CpuDevice::run_bound`] then checks only that each
/// buffer holds the elements read, places the addresses, takes the output buffers and runs.
/// Follows the tiered JIT's switch to the upper tier (the context layout is the program's,
/// the same for both code generators).
pub struct BoundLaunch {
    prog: Arc<CpuProgram>,
    plan: Arc<Plan>,
    /// The context words with everything but the plane addresses of arrays and outputs.
    words: Words,
    /// One entry per parameter: `Some` for arrays.
    arrays: Vec<Option<crate::plan::BoundArray>>,
    /// The outputs' element types and first context words.
    outs: Vec<(weft_ir::Type, usize)>,
    /// The split of the code it last ran (keyed by the code's address).
    split: Mutex<Option<(usize, Option<Split>)>>,
}

impl BoundLaunch {
    /// The launch shape.
    pub fn shape(&self) -> &[usize] {
        &self.plan.shape
    }
}

impl CpuDevice {
    /// Binds a launch of `prog` (from [`CpuDevice::prepare_shared`]) to the signature of
    /// `args` and `shape`; the buffers in `args` are only looked at for their types and
    /// shapes.
    ///
    /// # Errors
    /// As [`CpuDevice::launch_buffers_prepared`].
    pub fn bind(
        &self,
        prog: &Arc<CpuProgram>,
        args: &[BufArg<'_>],
        shape: Option<&[usize]>,
    ) -> Result<BoundLaunch, RuntimeError> {
        let cur = prog.current();
        let (plan, p) = plan_checked(cur, args, shape)?;
        let layout = cur.code.layout();
        let mut ctx = Context::new(layout);
        fill_params(&mut ctx, p, args, &plan);
        ctx.launch(&plan.shape);
        let arrays = crate::plan::bound_arrays(
            p,
            layout,
            &mut ctx.words,
            args.iter().map(|a| match a {
                BufArg::Array { buf, shape, .. } => Some((buf.elem(), buf.lanes(), &shape[..])),
                BufArg::Uniform(_) => None,
            }),
        );
        let outs = crate::plan::bound_outputs(p, layout);
        Ok(BoundLaunch {
            prog: prog.clone(),
            plan,
            words: Words::from_vec(ctx.words),
            arrays,
            outs,
            split: Mutex::new(None),
        })
    }

    /// Runs bound launch `b` over `bufs` (one per parameter: `Some((buffer, offset))` for
    /// each array, `None` for each uniform) and returns the output buffers (`n` elements
    /// each, padding zeroed).
    ///
    /// # Errors
    /// A buffer of another element type than bound, or too short for the elements read
    /// (named); outputs too large to allocate; as [`BufferLaunch::run`].
    pub fn run_bound(
        &self,
        b: &BoundLaunch,
        bufs: &[Option<(&HostBuffer, usize)>],
    ) -> Result<Vec<HostBuffer>, RuntimeError> {
        let mut ctx = Ctx(Words::new());
        let (cur, mut outs, split) = self.bound_words(b, bufs, &mut ctx.0)?;
        let (code, n) = (&cur.code, b.plan.n);
        watched(
            &mut ctx,
            (code.layout().abort, n),
            cur.prepared.name(),
            self.timeout(),
            |ctx, abort| run_split(code, split.as_ref(), ctx, n, abort),
        )?;
        for o in &mut outs {
            o.zero_padding();
        }
        Ok(outs)
    }

    /// [`CpuDevice::run_bound`] of a launch of a program from
    /// [`CpuDevice::prepare_reduced`], as [`BufferLaunch::run_reduced`]: the output
    /// buffers (output `output`'s unwritten) and the partial states.
    ///
    /// # Errors
    /// As [`CpuDevice::run_bound`] and [`BufferLaunch::run_reduced`].
    pub fn run_bound_reduced(
        &self,
        b: &BoundLaunch,
        bufs: &[Option<(&HostBuffer, usize)>],
        output: usize,
    ) -> Result<(Vec<HostBuffer>, HostBuffer), RuntimeError> {
        let mut ctx = Ctx(Words::new());
        let (cur, mut outs, split) = self.bound_words(b, bufs, &mut ctx.0)?;
        let name = cur.prepared.name_shared().clone();
        let budget = Budget {
            word: cur.code.layout().abort,
            program: name,
            budget: self.timeout(),
        };
        let k = (&*cur.code, split.as_ref(), b.plan.n);
        let partials = run_reduced_split(k, &mut ctx, &budget, &outs, output)?;
        for o in &mut outs {
            o.zero_padding();
        }
        Ok((outs, partials))
    }

    /// What a run of bound launch `b` over `bufs` needs: the program's current code, the
    /// context words with every address placed (into `words`, in place: a context is a few
    /// hundred bytes), fresh output buffers, and the split.
    fn bound_words<'b>(
        &self,
        b: &'b BoundLaunch,
        bufs: &[Option<(&HostBuffer, usize)>],
        words: &mut Words,
    ) -> Result<(&'b CpuProgram, Vec<HostBuffer>, Option<Split>), RuntimeError> {
        let cur = b.prog.current();
        let p = cur.prepared.program();
        words.clear();
        words.extend_from_slice(&b.words);
        for (a, buf) in b.arrays.iter().zip(bufs) {
            let (Some(a), Some((buf, offset))) = (a, buf) else {
                continue;
            };
            crate::plan::check_bound(
                (&p.name, &a.param),
                (a.elem, a.len),
                (buf.elem(), *offset, buf.len()),
            )?;
            let lb = buf.lane_bytes();
            for l in 0..buf.lanes() {
                words[a.word + l] = buf.plane(l)[offset * lb..].as_ptr() as u64;
            }
        }
        let n = b.plan.n;
        let mut outs: Vec<HostBuffer> = b
            .outs
            .iter()
            .map(|&(ty, _)| HostBuffer::try_for_kernel(ty, n))
            .collect::<Option<_>>()
            .ok_or_else(|| too_big_to_allocate(&p.name, &b.plan.shape))?;
        for (o, &(_, w)) in outs.iter_mut().zip(&b.outs) {
            for l in 0..o.lanes() {
                words[w + l] = o.plane_mut(l).as_mut_ptr() as u64;
            }
        }
        let split = if cur.interior.is_none() {
            // No stencil reads: no split (and no lock).
            None
        } else {
            let key = Arc::as_ptr(&cur.code) as usize;
            let mut last = b.split.lock().unwrap_or_else(|e| e.into_inner());
            match &*last {
                Some((k, s)) if *k == key => s.clone(),
                _ => {
                    let s = cur.split(&b.plan.shape, |i| {
                        b.arrays
                            .get(i)
                            .and_then(|a| a.as_ref())
                            .map_or_else(Vec::new, |a| a.shape.clone())
                    });
                    *last = Some((key, s.clone()));
                    s
                }
            }
        };
        Ok((cur, outs, split))
    }
}

/// The error for outputs of launch shape `launch` that memory cannot hold.
fn too_big_to_allocate(program: &str, launch: &[usize]) -> RunError {
    RunError::Launch {
        program: program.to_string(),
        message: format!("launch shape {launch:?} is too large to allocate its outputs"),
    }
}

/// Whether every interior range of `segs` (a launch of `shape`) is made of whole blocks
/// inside one row each: starts and ends at multiples of [`weft_ir::abi::BLOCK`] and crosses
/// no row boundary that is not one — what Cranelift's interior kernels need
/// (`weft_backend_cranelift::compile_interior`). `partition::split` with that alignment
/// makes such ranges (it merges two rows' ranges only where the rows meet at a multiple of
/// the alignment); this is the check that it did.
fn whole_blocks_in_rows(segs: &[(std::ops::Range<usize>, bool)], shape: &[usize]) -> bool {
    let b = weft_ir::abi::BLOCK;
    let w = if shape.len() > 1 {
        shape[shape.len() - 1]
    } else {
        usize::MAX
    };
    segs.iter().filter(|s| s.1).all(|(r, _)| {
        let aligned = r.start % b == 0 && r.end % b == 0;
        if !aligned || w == 0 || w % b == 0 || w == usize::MAX {
            return aligned;
        }
        // Every row boundary strictly inside the range is a multiple of the block.
        let mut at = (r.start / w + 1) * w;
        while at < r.end {
            if at % b != 0 {
                return false;
            }
            at += w;
        }
        true
    })
}

/// The interior variant of program `name` of `m` (after inlining, so reads in callees
/// count) in a module of its own, and its footprint, if the program has stencil reads.
fn interior_module(m: &Module, name: &str) -> Option<(Module, Footprint)> {
    let lowered = weft_ir::passes::for_lowering(m, name);
    let i = lowered.position(name)?;
    let (q, fp) = partition::interior_variant(&lowered.programs[i])?;
    let mut im = lowered.into_owned();
    im.programs[i] = q;
    Some((im, fp))
}

/// The on-disk cache's key and entry symbol of the LLVM host code of program `name` of `m`
/// (a kernel: for work-groups of `block`): the module's canonical text, the program, the
/// target CPU and features, LLVM's version, the options and the work-group size.
fn llvm_host_key(
    m: &Module,
    name: &str,
    block: Option<[u32; 3]>,
    o: weft_backend_llvm::Options,
) -> Result<(Key, String), RuntimeError> {
    let key = Key::new(
        "llvm-host",
        &[
            weft_ir::print_module(m).as_bytes(),
            name.as_bytes(),
            weft_backend_llvm::host_target_id()?.as_bytes(),
            format!("{o:?} {block:?}").as_bytes(),
        ],
    );
    let sym = format!("weft_k_{}", &key.hex()[..32]);
    Ok((key, sym))
}

/// LLVM host code for the cache entry `key` (entry symbol `sym`) of program `name` of `m`,
/// if the on-disk cache holds an object ORC accepts (one it rejects, another LLVM's under
/// the same key say, is a miss: the caller compiles).
fn llvm_host_load(
    cache: &DiskCache,
    key: &Key,
    sym: &str,
    p: &weft_ir::Program,
) -> Option<weft_backend_llvm::HostKernel> {
    let t0 = Instant::now();
    let obj = cache.get(key)?;
    let k = weft_backend_llvm::load_host_object(&obj, sym, weft_ir::abi::Layout::new(p)).ok()?;
    stats::count_load(stats::Compiler::LlvmHost, t0.elapsed());
    Some(k)
}

/// LLVM host code for map program `name` of `m` from the on-disk cache alone (`None`:
/// not there, or no cache).
fn llvm_host_from_disk(
    m: &Module,
    name: &str,
    o: weft_backend_llvm::Options,
) -> Option<weft_backend_llvm::HostKernel> {
    let (cache, p) = (DiskCache::global()?, m.get(name)?);
    let (key, sym) = llvm_host_key(m, name, None, o).ok()?;
    llvm_host_load(cache, &key, &sym, p)
}

/// LLVM host code for program `name` of `m` (a kernel: for work-groups of `block`), from the
/// on-disk cache ([`DiskCache::global`]) when it holds the object, else compiled (and the
/// object stored).
fn llvm_host(
    m: &Module,
    name: &str,
    block: Option<[u32; 3]>,
    o: weft_backend_llvm::Options,
) -> Result<weft_backend_llvm::HostKernel, RuntimeError> {
    use weft_backend_llvm as llvm;
    let t0 = Instant::now();
    let counted = |k: llvm::HostKernel| {
        stats::count_compile(stats::Compiler::LlvmHost, t0.elapsed());
        Ok(k)
    };
    let (Some(cache), Some(p)) = (DiskCache::global(), m.get(name)) else {
        return match block {
            None => counted(llvm::compile_host(m, name, o)?),
            Some(b) => counted(llvm::compile_host_kernel(m, name, b, o)?),
        };
    };
    let (key, sym) = llvm_host_key(m, name, block, o)?;
    if let Some(k) = llvm_host_load(cache, &key, &sym, p) {
        return Ok(k);
    }
    let obj = llvm::host_object_bytes(m, name, o, block, &sym)?;
    cache.put(&key, &obj);
    counted(llvm::load_host_object(
        &obj,
        &sym,
        weft_ir::abi::Layout::new(p),
    )?)
}

/// One run of a launch of `program` (`n` elements) under the watchdog: points the context's
/// abort word (`word`) at a fresh flag (raised once `budget` has passed), runs `body` with
/// it, and turns a raised flag into [`RuntimeError::Timeout`]. The abort word is reset
/// afterwards.
fn watched(
    ctx: &mut Ctx,
    (word, n): (usize, usize),
    program: &str,
    budget: Option<Duration>,
    body: impl FnOnce(&Ctx, &AbortFlag),
) -> Result<(), RuntimeError> {
    // Counted while it runs (the tiered JIT's background compiler waits for none), when it
    // may use more than the calling thread: a launch of at most `SERIAL_LIMIT` elements
    // leaves the other cores free, and the count's two locked atomics cost as much as a
    // small launch's kernel.
    struct Running(bool);
    impl Drop for Running {
        fn drop(&mut self) {
            if self.0 {
                LAUNCHES.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }
    let counted = n > SERIAL_LIMIT;
    if counted {
        LAUNCHES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    let _running = Running(counted);
    let watch = Watch::start(budget).map_err(|message| RuntimeError::Watchdog {
        program: program.to_string(),
        message,
    })?;
    ctx.0[word] = watch.flag().addr();
    body(ctx, watch.flag());
    ctx.0[word] = NEVER.addr();
    match budget {
        Some(budget) if watch.flag().is_raised() => Err(RuntimeError::Timeout {
            program: program.to_string(),
            budget,
        }),
        _ => Ok(()),
    }
}

/// Runs `kernel` (with its `split`) over `0..n` with context `ctx` under the watchdog of
/// `w`: a prepared launch's run.
fn run_watched(
    kernel: &HostCode,
    split: Option<&Split>,
    ctx: &mut Ctx,
    n: usize,
    w: &Budget,
) -> Result<(), RuntimeError> {
    watched(ctx, (w.word, n), &w.program, w.budget, |ctx, abort| {
        run_split(kernel, split, ctx, n, abort)
    })
}

/// Runs `kernel` with context `ctx` over elements `0..n`, or with a `split`, its interior
/// ranges with the interior variant and the rest with `kernel`: on the calling thread for
/// small launches, else in chunks over the launch pool (`pool`: the calling thread and
/// spinning workers). Chunks not yet started
/// when `abort` is raised are skipped.
fn run_split(kernel: &HostCode, split: Option<&Split>, ctx: &Ctx, n: usize, abort: &AbortFlag) {
    // SAFETY: the context follows the layout of both kernels (the interior variant has the
    // program's parameters and outputs); every plane it names lives as long as the launch
    // that owns `ctx` and is padded past whole blocks; a kernel stores only the elements of
    // its range (a block that ends past the range stores its lanes before the end one by
    // one), so ranges may start and end anywhere and each writes its own element range of
    // the output planes; interior ranges hold only elements whose offset reads are inside
    // their arrays; the abort word points at `abort`, which outlives the call.
    let entry = unsafe { kernel.entry() };
    let inner = split.map(|(code, _)| unsafe { code.entry() });
    let run = |lo: usize, hi: usize, inside: bool| {
        if !abort.is_raised() {
            let e = match inner {
                Some(e) if inside => e,
                _ => entry,
            };
            unsafe { e(ctx.0.as_ptr(), lo as i64, hi as i64) }
        }
    };
    let whole = [(0..n, false)];
    let segs = split.map_or(&whole[..], |(_, s)| &s.segs[..]);
    if n <= SERIAL_LIMIT {
        for (r, inside) in segs {
            run(r.start, r.end, *inside);
        }
    } else {
        let sched = schedule_of(split, n);
        let (ranges, pieces) = (&sched.ranges, &sched.pieces);
        crate::pool::run(pieces.len(), &|i| {
            for &(lo, hi, inside) in &ranges[pieces[i].clone()] {
                run(lo, hi, inside)
            }
        });
    }
}

/// Runs a reduced program's `kernel` (with its `split`) over `0..n` as [`run_split`] does,
/// under the watchdog of `watch`, with output `output` (of `outs`, the launch's output
/// buffers) reduced ([`BufferLaunch::run_reduced`]): before each range's call the output's
/// plane words are pointed at that range's slot of `HOST_WIDTH + 1` partial states in a
/// new buffer, which is returned.
fn run_reduced_split(
    (kernel, split, n): (&HostCode, Option<&Split>, usize),
    ctx: &mut Ctx,
    watch: &Budget,
    outs: &[HostBuffer],
    output: usize,
) -> Result<HostBuffer, RuntimeError> {
    let o = outs.get(output).ok_or_else(|| RunError::Launch {
        program: watch.program.to_string(),
        message: format!("no output {output} to reduce"),
    })?;
    let (elem, lanes, lane_bytes) = (o.elem(), o.lanes(), o.lane_bytes());
    let per = weft_backend_llvm::HOST_WIDTH + 1;
    let sched = schedule_of(split, n);
    let calls = sched.ranges.len();
    let mut partials =
        HostBuffer::try_for_output(elem, calls * per).ok_or_else(|| RunError::Launch {
            program: watch.program.to_string(),
            message: format!("{calls} partial states are too many to allocate"),
        })?;
    let planes: Vec<usize> = (0..lanes)
        .map(|l| partials.plane_mut(l).as_mut_ptr() as usize)
        .collect();
    let word = kernel.layout().outputs[output];
    watched(
        ctx,
        (watch.word, n),
        &watch.program,
        watch.budget,
        |ctx, abort| {
            // SAFETY: as `run_split`; the reduced output's plane words point at
            // `slot − lo·lane_bytes` for each range `lo..hi`, so the kernel's stores of its `per`
            // partial states at elements `lo ..= lo + HOST_WIDTH` land in that range's own slot
            // of `partials`, which outlives the call.
            let entry = unsafe { kernel.entry() };
            let inner = split.map(|(code, _)| unsafe { code.entry() });
            let body = |piece: std::ops::Range<usize>| {
                let mut words = ctx.0.clone();
                for r in piece {
                    if abort.is_raised() {
                        return;
                    }
                    let (lo, hi, inside) = sched.ranges[r];
                    for (l, &pl) in planes.iter().enumerate() {
                        let slot = pl + r * per * lane_bytes;
                        words[word + l] = slot.wrapping_sub(lo * lane_bytes) as u64;
                    }
                    let e = match inner {
                        Some(e) if inside => e,
                        _ => entry,
                    };
                    unsafe { e(words.as_ptr(), lo as i64, hi as i64) }
                }
            };
            if n <= SERIAL_LIMIT {
                body(0..calls);
            } else {
                crate::pool::run(sched.pieces.len(), &|i| body(sched.pieces[i].clone()));
            }
        },
    )?;
    partials.zero_padding();
    Ok(partials)
}

/// Elements of a chunk of a fused launch ([`BufferLaunch::run_fused`]) at most: a chunk's
/// consumed output (64 KiB of f32) stays in the core's L2 cache between the producer's
/// kernel and the consumer's.
const FUSE_CHUNK: usize = 1 << 14;

/// Where a fused launch's consumed output goes ([`BufferLaunch::run_fused`]).
struct Fusion {
    /// The producer's first context word of the output's planes.
    a_word: usize,
    /// The consumer's first context word of the parameter's planes.
    b_word: usize,
    lanes: usize,
    lane_bytes: usize,
    span: usize,
    per_span: usize,
    /// The consumer's element count.
    b_n: usize,
}

/// Runs producer `a` (its kernel, split and context) over `0..n` and consumer `b` over its
/// elements chunk by chunk ([`BufferLaunch::run_fused`]): each chunk of whole spans runs
/// `a`'s ranges inside it (the interior variant on interior ranges, as [`run_split`]) with
/// the consumed output's planes pointed at a scratch buffer of the thread's, then `b`'s
/// elements of those spans reading it. Chunks are shared out over the launch pool in
/// pieces of consecutive chunks; those not yet started when `abort` is raised are skipped.
fn run_fused_split(
    (a, split, a_ctx): (&HostCode, Option<&Split>, &Ctx),
    n: usize,
    (b, b_ctx): (&HostCode, &Ctx),
    f: &Fusion,
    abort: &AbortFlag,
) {
    // SAFETY: as `run_split` for both kernels. For every chunk but the last, the consumed
    // output's plane words point at `base − lo·lane_bytes`, so that the producer's stores
    // to elements `lo..hi` (it stores only its range) and the consumer's reads of them
    // (inside its spans' elements, by the contract of `run_fused`, all before the end of the
    // output) land in the scratch planes of `chunk + span` elements each, 64-byte aligned as
    // every plane is; the scratch outlives both calls. The last chunk uses the output's own
    // planes, as `run_split` does.
    let a_entry = unsafe { a.entry() };
    let inner = split.map(|(code, _)| unsafe { code.entry() });
    let b_entry = unsafe { b.entry() };
    let whole = [(0..n, false)];
    let segs = split.map_or(&whole[..], |(_, s)| &s.segs[..]);
    let chunk = f.span * (FUSE_CHUNK / f.span).max(1);
    let chunks = n.div_ceil(chunk);
    let threads = rayon::current_num_threads().max(1);
    let per_piece = if n <= SERIAL_LIMIT {
        chunks.max(1)
    } else {
        (chunks / (threads * 8)).max(1)
    };
    let pieces = chunks.div_ceil(per_piece);
    let plane_bytes = ((chunk + f.span) * f.lane_bytes).div_ceil(64) * 64;
    let body = |p: usize| {
        let mut scratch = vec![0u64; (f.lanes * plane_bytes + 64) / 8];
        let base = (scratch.as_mut_ptr() as usize).div_ceil(64) * 64;
        let (mut aw, mut bw) = (a_ctx.0.clone(), b_ctx.0.clone());
        for c in p * per_piece..((p + 1) * per_piece).min(chunks) {
            if abort.is_raised() {
                return;
            }
            let (lo, hi) = (c * chunk, ((c + 1) * chunk).min(n));
            for l in 0..f.lanes {
                // The last chunk goes to the output's own planes: a consumer element with
                // positions past the end may load element 0 (a masked lane's address),
                // which only they hold.
                let v = if hi == n {
                    a_ctx.0[f.a_word + l]
                } else {
                    (base + l * plane_bytes).wrapping_sub(lo * f.lane_bytes) as u64
                };
                aw[f.a_word + l] = v;
                bw[f.b_word + l] = v;
            }
            let first = segs.partition_point(|s| s.0.end <= lo);
            for (r, inside) in segs[first..].iter().take_while(|s| s.0.start < hi) {
                let e = match inner {
                    Some(e) if *inside => e,
                    _ => a_entry,
                };
                unsafe { e(aw.as_ptr(), r.start.max(lo) as i64, r.end.min(hi) as i64) }
            }
            let b_lo = lo / f.span * f.per_span;
            let b_hi = if hi == n {
                f.b_n
            } else {
                hi / f.span * f.per_span
            };
            unsafe { b_entry(bw.as_ptr(), b_lo as i64, b_hi as i64) }
        }
        drop(scratch);
    };
    if pieces <= 1 {
        body(0);
    } else {
        crate::pool::run(pieces, &body);
    }
}

/// An argument of a launch over [`HostBuffer`]s ([`CpuDevice::launch_buffers`]).
#[derive(Clone, Debug)]
pub enum BufArg<'a> {
    /// An array, for a varying or an array parameter: the elements `offset ..` of `buf`, as
    /// many as `shape` holds, in row-major order.
    Array {
        /// The storage.
        buf: &'a HostBuffer,
        /// First element.
        offset: usize,
        /// Extent of each axis, outermost first.
        shape: &'a [usize],
    },
    /// One value, for a uniform parameter.
    Uniform(Const),
}

impl BufArg<'_> {
    /// The description [`weft_ir::launch::plan_program_launch_desc`] checks.
    pub fn desc(&self) -> ArgDesc<'_> {
        match self {
            BufArg::Array { buf, shape, .. } => ArgDesc::Array {
                elem: buf.elem(),
                shape,
            },
            BufArg::Uniform(c) => ArgDesc::Uniform(*c),
        }
    }

    /// The uniform value, if this is one.
    pub fn uniform(&self) -> Option<Const> {
        match self {
            BufArg::Uniform(c) => Some(*c),
            BufArg::Array { .. } => None,
        }
    }
}

/// An argument of a kernel launch over [`HostBuffer`]s ([`CpuDevice::run_kernel_buffers`]).
pub enum KernelBuf<'a> {
    /// One value, for a uniform parameter.
    Value(Const),
    /// A read-only array: the elements `offset ..` of `buf`, as many as `shape` holds.
    Array {
        /// The storage.
        buf: &'a HostBuffer,
        /// First element.
        offset: usize,
        /// Extent of each axis, outermost first.
        shape: &'a [usize],
    },
    /// A buffer the kernel writes in place: the first elements of `buf`, as many as `shape`
    /// holds.
    Buffer {
        /// The storage.
        buf: &'a mut HostBuffer,
        /// Extent of each axis, outermost first.
        shape: &'a [usize],
    },
}

impl KernelBuf<'_> {
    /// The description [`weft_ir::launch::check_kernel_args`] checks.
    pub fn desc(&self) -> ArgDesc<'_> {
        match self {
            KernelBuf::Value(c) => ArgDesc::Uniform(*c),
            KernelBuf::Array { buf, shape, .. } => ArgDesc::Array {
                elem: buf.elem(),
                shape,
            },
            KernelBuf::Buffer { buf, shape } => ArgDesc::Array {
                elem: buf.elem(),
                shape,
            },
        }
    }
}

/// A prepared launch over [`HostBuffer`]s (see [`CpuDevice::launch_buffers`]): runs as often
/// as wanted; [`BufferLaunch::into_outputs`] hands over the output buffers.
pub struct BufferLaunch<'a> {
    kernel: Arc<HostCode>,
    split: Option<Split>,
    ctx: Ctx,
    outs: Vec<HostBuffer>,
    /// The plan (launch shape and element count), shared with the program's recent plans.
    plan: Arc<crate::prepare::Plan>,
    n: usize,
    watch: Budget,
    _args: std::marker::PhantomData<&'a HostBuffer>,
}

/// What the watchdog needs to know about a prepared launch.
struct Budget {
    /// The context's abort word.
    word: usize,
    /// The program (for the error).
    program: Arc<str>,
    /// The device's budget when the launch was prepared.
    budget: Option<Duration>,
}

impl BufferLaunch<'_> {
    /// Number of elements in the launch.
    pub fn len(&self) -> usize {
        self.n
    }

    /// True for a launch of no elements.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The launch shape.
    pub fn shape(&self) -> &[usize] {
        &self.plan.shape
    }

    /// Runs the kernel over every element (see [`Launch::run`]).
    ///
    /// # Errors
    /// As [`Launch::run`].
    pub fn run(&mut self) -> Result<(), RuntimeError> {
        run_watched(
            &self.kernel,
            self.split.as_ref(),
            &mut self.ctx,
            self.n,
            &self.watch,
        )
    }

    /// The output buffers as they are before a run: what a launch fused to this one reads
    /// ([`BufferLaunch::run_fused`]).
    pub fn outputs(&self) -> &[HostBuffer] {
        &self.outs
    }

    /// Runs this launch of a program from [`CpuDevice::prepare_reduced`] with output
    /// `output` reduced, and returns the partial states its kernel calls stored: for each
    /// range the launch runs, `HOST_WIDTH + 1` elements of the output's type
    /// ([`weft_backend_llvm::HostReduce`]), each the fold of some of the range's elements
    /// or the identity. Combined with the same op in any order they give the reduction of
    /// the whole output. The output's own buffer is not written.
    ///
    /// # Errors
    /// No output `output`; partial states too many to allocate; as [`Launch::run`].
    pub fn run_reduced(&self, output: usize) -> Result<HostBuffer, RuntimeError> {
        let mut ctx = Ctx(self.ctx.0.clone());
        let k = (&*self.kernel, self.split.as_ref(), self.n);
        run_reduced_split(k, &mut ctx, &self.watch, &self.outs, output)
    }

    /// Runs this launch with its output `output` consumed as it is made by `consumer`, a
    /// launch whose array parameter `param` is that whole output (a 1-D view of its `n`
    /// elements from 0, made over [`BufferLaunch::outputs`]) and whose elements
    /// `[j·per_span, (j + 1)·per_span)` read only its elements `[j·span, (j + 1)·span)` —
    /// the last group: up to the end of both — as a reduction level does (issue 22's fused
    /// convergence check; frontend `collective`). The launch runs in chunks of whole spans;
    /// each chunk's `output` goes to a per-thread scratch buffer that the consumer's
    /// elements of that chunk read at once, while it is in cache. `output` itself is never
    /// written (its contents are unspecified afterwards); every other output of both
    /// launches holds what `run` of this launch, then of `consumer`, gives: each kernel runs
    /// over the same elements with the same inputs.
    ///
    /// # Errors
    /// No output `output` or parameter `param`; `span` or `per_span` zero, or `span`
    /// elements of the output not a multiple of 64 bytes; a consumer with an interior/border
    /// split; as [`Launch::run`].
    pub fn run_fused(
        &self,
        output: usize,
        consumer: &BufferLaunch<'_>,
        param: usize,
        (span, per_span): (usize, usize),
    ) -> Result<(), RuntimeError> {
        let w = &self.watch;
        let bad = |message: String| RunError::Launch {
            program: w.program.to_string(),
            message: format!("fused launch: {message}"),
        };
        let o = self
            .outs
            .get(output)
            .ok_or_else(|| bad(format!("no output {output}")))?;
        let (lanes, lane_bytes) = (o.lanes(), o.lane_bytes());
        let b_word = *consumer
            .kernel
            .layout()
            .params
            .get(param)
            .ok_or_else(|| bad(format!("the consumer has no parameter {param}")))?;
        if span == 0 || per_span == 0 || (span * lane_bytes) % 64 != 0 {
            return Err(bad(format!(
                "spans of {span} elements ({per_span} consumer elements) do not keep chunks \
                 on 64-byte boundaries"
            ))
            .into());
        }
        if consumer.split.is_some() {
            return Err(bad("the consumer has stencil reads".into()).into());
        }
        let f = Fusion {
            a_word: self.kernel.layout().outputs[output],
            b_word,
            lanes,
            lane_bytes,
            span,
            per_span,
            b_n: consumer.n,
        };
        let mut a_ctx = Ctx(self.ctx.0.clone());
        let mut b_ctx = Ctx(consumer.ctx.0.clone());
        let (b_abort, split) = (consumer.watch.word, self.split.as_ref());
        watched(
            &mut a_ctx,
            (w.word, self.n),
            &w.program,
            w.budget,
            |a_ctx, abort| {
                b_ctx.0[b_abort] = abort.addr();
                let a = (&*self.kernel, split, a_ctx);
                run_fused_split(a, self.n, (&consumer.kernel, &b_ctx), &f, abort)
            },
        )
    }

    /// The output buffers (`n` elements each; padding zeroed).
    pub fn into_outputs(mut self) -> Vec<HostBuffer> {
        for o in &mut self.outs {
            o.zero_padding();
        }
        self.outs
    }
}

/// A prepared launch: a kernel with its inputs copied into kernel buffers (see
/// [`CpuDevice::launch`]).
pub struct Launch {
    kernel: Arc<HostCode>,
    split: Option<Split>,
    ctx: Ctx,
    _inputs: Vec<Plane>,
    outs: Vec<Vec<Plane>>,
    out_types: Vec<weft_ir::Type>,
    shape: Vec<usize>,
    n: usize,
    watch: Budget,
}

impl Launch {
    /// Number of elements in the launch.
    pub fn len(&self) -> usize {
        self.n
    }

    /// True for a launch of no elements.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Runs the kernel over every element: on the calling thread for small launches, else in
    /// chunks over the launch pool, under the device's time budget.
    ///
    /// # Errors
    /// [`RuntimeError::Timeout`] when the run took longer than the budget: it stopped early
    /// and the outputs hold no valid results (run again for them);
    /// [`RuntimeError::Watchdog`] when the watchdog thread could not be started.
    pub fn run(&mut self) -> Result<(), RuntimeError> {
        run_watched(
            &self.kernel,
            self.split.as_ref(),
            &mut self.ctx,
            self.n,
            &self.watch,
        )
    }

    /// The outputs as host arrays of the launch shape.
    pub fn outputs(&self) -> Vec<HostArray> {
        self.out_types
            .iter()
            .zip(&self.outs)
            .map(|(&ty, planes)| {
                let planes: Vec<&[u8]> = planes.iter().map(|p| p.0.as_slice()).collect();
                read_output(ty, &self.shape, self.n, &planes)
            })
            .collect()
    }
}
