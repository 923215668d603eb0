//! The fuzz loop: generates case after case from a seed (case `i` of seed `S` is always the
//! same program and inputs), checks each on every target, shrinks a mismatch to a small case
//! with proptest's value trees, and writes it out as a `.weft` filetest.

use crate::case::{case, Case};
use crate::gen::GenConfig;
use crate::oracle::{check, oracle, Check, Devices, Oracle, Target};
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use weft_runtime::Backend;

/// What a fuzz run does.
#[derive(Clone, Debug)]
pub struct FuzzConfig {
    /// The seed: case `i` of a seed is always the same.
    pub seed: u64,
    /// The first case index (to replay one case: `first = i`, `cases = 1`).
    pub first: u64,
    /// Stop after this many cases (checked, discarded or failed).
    pub cases: Option<u64>,
    /// Stop after this long.
    pub time: Option<Duration>,
    /// The targets to check (see [`Target::of_backend`]).
    pub targets: Vec<Target>,
    /// Where shrunk mismatches are written as filetests (`None`: not written).
    pub out_dir: Option<PathBuf>,
    /// Worker threads.
    pub threads: usize,
    /// Stop shrinking a mismatch after this many tries.
    pub shrink_steps: u32,
    /// Print every case (module and launch) to stderr.
    pub dump: bool,
}

impl Default for FuzzConfig {
    fn default() -> FuzzConfig {
        FuzzConfig {
            seed: 0,
            first: 0,
            cases: Some(100),
            time: None,
            targets: [Backend::Interp, Backend::Cranelift, Backend::Llvm]
                .iter()
                .flat_map(|b| Target::of_backend(b.name()).expect("backend"))
                .collect(),
            out_dir: None,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            shrink_steps: 2_000,
            dump: false,
        }
    }
}

/// One mismatch, shrunk.
#[derive(Clone, Debug)]
pub struct Mismatch {
    /// The case index (with the run's seed, it reproduces the unshrunk case).
    pub case: u64,
    /// The target that differed.
    pub target: Target,
    /// What differed, on the shrunk case.
    pub detail: String,
    /// The shrunk case as a `test interpret` filetest.
    pub filetest: String,
    /// Where it was written, if it was.
    pub path: Option<PathBuf>,
}

/// Counts of a run so far.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// Cases generated.
    pub cases: u64,
    /// Cases discarded because the interpreter ran out of fuel.
    pub discarded: u64,
    /// Per target: (cases checked, mismatches).
    pub per_target: BTreeMap<Target, (u64, u64)>,
    /// Failures of the generator or the oracle itself (a bug in weft-fuzz or the
    /// interpreter): case index and message.
    pub errors: Vec<(u64, String)>,
    /// The mismatches, shrunk.
    pub mismatches: Vec<Mismatch>,
    /// How many cases exercised each feature ([`crate::case::features`]).
    pub features: BTreeMap<String, u64>,
    /// Time spent.
    pub elapsed: Duration,
}

impl Summary {
    /// Total mismatches and errors.
    pub fn failures(&self) -> usize {
        self.mismatches.len() + self.errors.len()
    }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{} cases in {:.1} s ({} discarded: out of fuel), {} mismatches, {} generator/oracle errors",
            self.cases,
            self.elapsed.as_secs_f64(),
            self.discarded,
            self.mismatches.len(),
            self.errors.len()
        )?;
        writeln!(f, "| interp vs | cases checked | mismatches |")?;
        writeln!(f, "|---|---:|---:|")?;
        for (t, (n, bad)) in &self.per_target {
            writeln!(f, "| {t} | {n} | {bad} |")?;
        }
        let all = crate::case::all_features();
        let missing: Vec<&String> = all
            .iter()
            .filter(|k| !self.features.contains_key(*k))
            .collect();
        writeln!(
            f,
            "coverage: {} of {} features (ops, scalar types, lane counts, boundary modes, array and launch axes)",
            all.len() - missing.len(),
            all.len()
        )?;
        if !missing.is_empty() {
            let m: Vec<&str> = missing.iter().map(|s| s.as_str()).collect();
            writeln!(f, "not exercised: {}", m.join(" "))?;
        }
        Ok(())
    }
}

/// Mixed into the seed of the fast-math case stream.
const FAST_SALT: u64 = 0xfa57_3a70;

/// The proptest runner that generates case `index` of `seed`.
fn runner_for(seed: u64, index: u64) -> TestRunner {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    bytes[8..16].copy_from_slice(&index.to_le_bytes());
    bytes[16..24].copy_from_slice(b"weftfuzz");
    TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &bytes),
    )
}

/// Case `index` of `seed`, as `weft fuzz --seed SEED` generates it (unshrunk).
///
/// # Errors
/// When the generator fails on it (a weft-fuzz bug), with the panic message.
pub fn case_at(seed: u64, index: u64) -> Result<Case, String> {
    case_with(seed, index, GenConfig::default())
}

/// Case `index` of `seed` generated from `cfg` (unshrunk).
///
/// # Errors
/// As [`case_at`].
pub fn case_with(seed: u64, index: u64, cfg: GenConfig) -> Result<Case, String> {
    let mut runner = runner_for(seed, index);
    let strategy = case(cfg);
    std::panic::catch_unwind(AssertUnwindSafe(|| strategy.new_tree(&mut runner)))
        .map_err(|_| format!("the generator panicked on case {index}"))?
        .map(|t| t.current())
        .map_err(|e| e.to_string())
}

/// What checking one case on every target found.
enum Verdict {
    Discarded,
    Checked(Vec<(Target, Check)>),
}

fn verdict(c: &Case, targets: &[Target], dev: &Devices) -> Result<Verdict, String> {
    let want = match oracle(c)? {
        Oracle::OutOfFuel => return Ok(Verdict::Discarded),
        Oracle::Outputs(o) => o,
    };
    Ok(Verdict::Checked(
        targets
            .iter()
            .map(|&t| (t, check(c, t, &want, dev)))
            .collect(),
    ))
}

/// Shrinks the case of `tree` while it still differs on `target`; returns the smallest
/// failing case and what differed on it.
fn shrink(
    tree: &mut impl ValueTree<Value = Case>,
    target: Target,
    dev: &Devices,
    steps: u32,
    detail: String,
) -> (Case, String) {
    let current =
        |tree: &mut _| std::panic::catch_unwind(AssertUnwindSafe(|| ValueTree::current(tree))).ok();
    let mut best = (tree.current(), detail);
    let mut n = 0;
    if !tree.simplify() {
        return best;
    }
    while n < steps {
        n += 1;
        // A candidate the generator cannot build counts as passing.
        let found = current(tree).and_then(|c| still_differs(&c, target, dev).map(|d| (c, d)));
        if let Some((c, d)) = found {
            best = (c, d);
            if !tree.simplify() {
                break;
            }
        } else if !tree.complicate() {
            break;
        }
    }
    best
}

/// After shrinking: the case's module after `dce`, then after `inline,dce`, when the
/// mismatch survives them (a smaller filetest; the passes are checked on their own rows).
fn reduce(mut best: Case, target: Target, dev: &Devices, mut detail: String) -> (Case, String) {
    if !target.is_backend() {
        return (best, detail);
    }
    // Only the first output that differs.
    let p = best.gen.program().clone();
    if let Some(k) = (0..p.outputs.len()).find(|k| detail.contains(&format!("output {k} "))) {
        if let Ok(q) = weft_ir::algebra::keep(&p, &[p.output_name(k).as_str()]) {
            let mut c = best.clone();
            c.inputs = crate::oracle::inputs_by_name(&p, &q, &best.inputs);
            if let Some(slot) = c.gen.module.programs.iter_mut().find(|x| x.name == q.name) {
                *slot = q;
            }
            if let Some(d) = still_differs(&c, target, dev) {
                (best, detail) = (c, d);
            }
        }
    }
    // Only the element that differs, in a launch of one element.
    let elem = detail
        .split(" element ")
        .nth(1)
        .and_then(|r| r.split(':').next())
        .and_then(|e| e.trim().parse::<usize>().ok());
    if let Some(e) = elem {
        let mut c = best.clone();
        c.shape = vec![1; best.shape.len()];
        let p = best.gen.program();
        for (par, x) in p.params.iter().zip(c.inputs.iter_mut()) {
            if let (weft_ir::ParamKind::Varying, weft_ir::Input::Array(a)) = (par.kind, &*x) {
                let l = a.data.len() / a.len().max(1);
                let data = a.data[e * l..(e + 1) * l].to_vec();
                let shape = vec![1; a.shape.len()];
                *x = weft_ir::Input::Array(std::sync::Arc::new(weft_ir::HostArray {
                    elem: a.elem,
                    shape,
                    data,
                }));
            }
        }
        if let Some(d) = still_differs(&c, target, dev) {
            (best, detail) = (c, d);
        }
    }
    for pl in ["dce", "inline,dce"] {
        let mut c = best.clone();
        if weft_ir::passes::run_pipeline(&mut c.gen.module, pl).is_err() {
            continue;
        }
        c.gen
            .module
            .programs
            .retain(|p| p.name == c.gen.name || pl == "dce");
        if let Some(d) = still_differs(&c, target, dev) {
            (best, detail) = (c, d);
        }
    }
    (best, detail)
}

/// What differs when `c` runs on `target`, if anything.
fn still_differs(c: &Case, target: Target, dev: &Devices) -> Option<String> {
    match oracle(c) {
        Ok(Oracle::Outputs(want)) => match check(c, target, &want, dev) {
            Check::Differs(d) => Some(d),
            _ => None,
        },
        _ => None,
    }
}

/// Runs the fuzz loop of `cfg`, calling `progress` after each case with the counts so far.
///
/// # Errors
/// When `cuda` is a target and no CUDA device can be opened, or the output folder cannot be
/// created.
pub fn run(cfg: &FuzzConfig, progress: &(dyn Fn(&Summary) + Sync)) -> Result<Summary, String> {
    // Generated programs are compiled once: keeping them on disk would only fill the cache.
    weft_runtime::disk::DiskCache::disable_global();
    let gpus = crate::oracle::open_gpus(&cfg.targets)?;
    let (fast, exact): (Vec<Target>, Vec<Target>) =
        cfg.targets.iter().partition(|t| t.is_fast_math());
    if let Some(d) = &cfg.out_dir {
        std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    let start = Instant::now();
    let next = AtomicU64::new(cfg.first);
    let summary = Mutex::new(Summary::default());
    let end = cfg.cases.map(|n| cfg.first + n);
    std::thread::scope(|s| {
        for _ in 0..cfg.threads.max(1) {
            s.spawn(|| {
                let dev = Devices::new(&gpus);
                let strategy = case(GenConfig::default());
                let fast_strategy = crate::fastmath::fast_case();
                let mut done = 0u64;
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let timed_out = cfg.time.is_some_and(|t| start.elapsed() >= t);
                    if end.is_some_and(|e| i >= e) || timed_out {
                        break;
                    }
                    let mut found = Vec::new();
                    found.extend(fuzz_one(cfg, &strategy, &exact, i, &dev, &summary));
                    if !fast.is_empty() {
                        found.extend(fuzz_one(cfg, &fast_strategy, &fast, i, &dev, &summary));
                    }
                    for mut m in found {
                        if let Some(d) = &cfg.out_dir {
                            let path =
                                d.join(format!("fuzz-{}-{i}-{}.weft", cfg.seed, slug(m.target)));
                            if std::fs::write(&path, &m.filetest).is_ok() {
                                m.path = Some(path);
                            }
                        }
                        lock(&summary).mismatches.push(m);
                    }
                    done += 1;
                    if done.is_multiple_of(64) {
                        dev.clear();
                    }
                    let mut snap = lock(&summary).clone();
                    snap.elapsed = start.elapsed();
                    progress(&snap);
                }
            });
        }
    });
    let mut s = summary.into_inner().unwrap_or_else(|e| e.into_inner());
    s.elapsed = start.elapsed();
    s.mismatches.sort_by_key(|m| m.case);
    Ok(s)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn slug(t: Target) -> String {
    t.to_string().replace('+', "-")
}

/// Generates case `i` of `strategy` and checks it on `targets`; returns its first mismatch,
/// shrunk. Fast-math cases (`targets` all fast-math ones) come from their own stream and count
/// only per target.
fn fuzz_one(
    cfg: &FuzzConfig,
    strategy: &impl Strategy<Value = Case>,
    targets: &[Target],
    i: u64,
    dev: &Devices,
    summary: &Mutex<Summary>,
) -> Option<Mismatch> {
    if targets.is_empty() {
        return None;
    }
    let main = !targets[0].is_fast_math();
    let mut runner = runner_for(cfg.seed ^ if main { 0 } else { FAST_SALT }, i);
    let tree = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        strategy.new_tree(&mut runner)
    }));
    let mut tree = match tree {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => {
            let mut s = lock(summary);
            s.cases += 1;
            s.errors.push((i, format!("the generator gave up: {e}")));
            return None;
        }
        Err(p) => {
            let msg = (p.downcast_ref::<String>().cloned())
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            let mut s = lock(summary);
            s.cases += 1;
            s.errors.push((i, format!("the generator panicked: {msg}")));
            return None;
        }
    };
    let c = tree.current();
    if cfg.dump {
        eprintln!("; case {i}{c:?}\n");
    }
    let v = verdict(&c, targets, dev);
    let feats = if main {
        crate::case::features(&c)
    } else {
        Default::default()
    };
    let first = {
        let mut s = lock(summary);
        s.cases += u64::from(main);
        for k in feats {
            *s.features.entry(k).or_default() += 1;
        }
        match v {
            Err(e) => {
                s.errors.push((i, format!("{e}\n{c:?}")));
                return None;
            }
            Ok(Verdict::Discarded) => {
                s.discarded += 1;
                return None;
            }
            Ok(Verdict::Checked(checks)) => {
                let mut first = None;
                for (t, ch) in checks {
                    let e = s.per_target.entry(t).or_default();
                    match ch {
                        Check::Skipped => {}
                        Check::Same => e.0 += 1,
                        Check::Differs(d) => {
                            e.0 += 1;
                            e.1 += 1;
                            first.get_or_insert((t, d));
                        }
                    }
                }
                first
            }
        }
    };
    let (target, detail) = first?;
    let (small, detail) = shrink(&mut tree, target, dev, cfg.shrink_steps, detail);
    let (small, detail) = reduce(small, target, dev, detail);
    let want = match oracle(&small) {
        Ok(Oracle::Outputs(o)) => o,
        _ => Vec::new(),
    };
    let comment = format!(
        "weft fuzz --seed {} (case {i}), shrunk: interp vs {target}\n{detail}",
        cfg.seed
    );
    Some(Mismatch {
        case: i,
        target,
        detail,
        filetest: small.filetest(&comment, &want),
        path: None,
    })
}
