//! Compile statistics of the process (issue 24): how many programs each compiler compiled
//! and the time it took, the on-disk cache's hits, misses and writes, and the tiered CPU
//! JIT's switches — readable from the library ([`snapshot`]) and printed by
//! `weft run --stats`.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// A compiler whose work is counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compiler {
    /// Cranelift to host code.
    Cranelift,
    /// LLVM to a host object (then linked by ORC).
    LlvmHost,
    /// LLVM to PTX.
    LlvmPtx,
    /// The CUDA driver: PTX loaded through its JIT (`ptxas`, or its compute cache).
    Driver,
}

/// An event of the on-disk cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Disk {
    Hit,
    Miss,
    Write,
    Corrupt,
    Evicted,
}

struct Counter {
    count: AtomicU64,
    nanos: AtomicU64,
}

impl Counter {
    const fn new() -> Counter {
        Counter {
            count: AtomicU64::new(0),
            nanos: AtomicU64::new(0),
        }
    }
}

static COMPILES: [Counter; 4] = [
    Counter::new(),
    Counter::new(),
    Counter::new(),
    Counter::new(),
];
static LOADS: [Counter; 4] = [
    Counter::new(),
    Counter::new(),
    Counter::new(),
    Counter::new(),
];
static DISK: [AtomicU64; 5] = [
    AtomicU64::new(0),
    AtomicU64::new(0),
    AtomicU64::new(0),
    AtomicU64::new(0),
    AtomicU64::new(0),
];
static TIER_SWITCHES: AtomicU64 = AtomicU64::new(0);

fn index(c: Compiler) -> usize {
    c as usize
}

/// Counts one compilation by `c` that took `t`.
pub fn count_compile(c: Compiler, t: Duration) {
    let k = &COMPILES[index(c)];
    k.count.fetch_add(1, Relaxed);
    k.nanos.fetch_add(t.as_nanos() as u64, Relaxed);
}

/// Counts one artifact of `c` loaded from the on-disk cache in `t` instead of compiled.
pub fn count_load(c: Compiler, t: Duration) {
    let k = &LOADS[index(c)];
    k.count.fetch_add(1, Relaxed);
    k.nanos.fetch_add(t.as_nanos() as u64, Relaxed);
}

pub(crate) fn count_disk(e: Disk) {
    DISK[e as usize].fetch_add(1, Relaxed);
}

/// Counts one switch of a program from Cranelift code to LLVM code (`Backend::Auto`).
pub(crate) fn count_tier_switch() {
    TIER_SWITCHES.fetch_add(1, Relaxed);
}

/// Compilations (or loads) and the time they took.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Work {
    /// How many.
    pub count: u64,
    /// Their total time.
    pub time: Duration,
}

/// The process's compile statistics at one moment ([`snapshot`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Compilations by Cranelift, LLVM (host), LLVM (PTX) and the CUDA driver, in
    /// [`Compiler`] order.
    pub compiles: [Work; 4],
    /// Artifacts loaded from the on-disk cache instead, in the same order.
    pub loads: [Work; 4],
    /// On-disk cache lookups that found an intact entry.
    pub disk_hits: u64,
    /// Lookups that found none (damaged entries included).
    pub disk_misses: u64,
    /// Entries written.
    pub disk_writes: u64,
    /// Damaged or foreign entries found (and removed).
    pub disk_corrupt: u64,
    /// Entries evicted to keep the cache within its limit.
    pub disk_evicted: u64,
    /// Programs switched from Cranelift code to LLVM code by the tiered CPU JIT.
    pub tier_switches: u64,
}

impl Stats {
    /// The compilations of `c`.
    pub fn compiled(&self, c: Compiler) -> Work {
        self.compiles[index(c)]
    }

    /// The cache loads of `c`.
    pub fn loaded(&self, c: Compiler) -> Work {
        self.loads[index(c)]
    }

    /// What happened between `earlier` and `self` (both from [`snapshot`]).
    pub fn since(&self, earlier: &Stats) -> Stats {
        let work = |a: &[Work; 4], b: &[Work; 4]| {
            std::array::from_fn(|i| Work {
                count: a[i].count - b[i].count,
                time: a[i].time.saturating_sub(b[i].time),
            })
        };
        Stats {
            compiles: work(&self.compiles, &earlier.compiles),
            loads: work(&self.loads, &earlier.loads),
            disk_hits: self.disk_hits - earlier.disk_hits,
            disk_misses: self.disk_misses - earlier.disk_misses,
            disk_writes: self.disk_writes - earlier.disk_writes,
            disk_corrupt: self.disk_corrupt - earlier.disk_corrupt,
            disk_evicted: self.disk_evicted - earlier.disk_evicted,
            tier_switches: self.tier_switches - earlier.tier_switches,
        }
    }
}

/// The counters now.
pub fn snapshot() -> Stats {
    let work = |c: &[Counter; 4]| {
        std::array::from_fn(|i| Work {
            count: c[i].count.load(Relaxed),
            time: Duration::from_nanos(c[i].nanos.load(Relaxed)),
        })
    };
    let d = |e: Disk| DISK[e as usize].load(Relaxed);
    Stats {
        compiles: work(&COMPILES),
        loads: work(&LOADS),
        disk_hits: d(Disk::Hit),
        disk_misses: d(Disk::Miss),
        disk_writes: d(Disk::Write),
        disk_corrupt: d(Disk::Corrupt),
        disk_evicted: d(Disk::Evicted),
        tier_switches: TIER_SWITCHES.load(Relaxed),
    }
}

impl fmt::Display for Stats {
    /// One line per compiler, then the cache: what `weft run --stats` prints.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = ["cranelift", "llvm (host)", "llvm (ptx)", "cuda driver"];
        for (i, n) in names.iter().enumerate() {
            let (c, l) = (self.compiles[i], self.loads[i]);
            writeln!(
                f,
                "compile {n:<12} {:>4} compiled in {:>9.3} ms, {:>4} loaded from the cache in {:>8.3} ms",
                c.count,
                c.time.as_secs_f64() * 1e3,
                l.count,
                l.time.as_secs_f64() * 1e3
            )?;
        }
        write!(
            f,
            "disk cache: {} hits, {} misses, {} writes, {} damaged, {} evicted; tier switches: {}",
            self.disk_hits,
            self.disk_misses,
            self.disk_writes,
            self.disk_corrupt,
            self.disk_evicted,
            self.tier_switches
        )
    }
}
