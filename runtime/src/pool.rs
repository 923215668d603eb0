//! The CPU device's launch pool: runs the pieces of one launch on the calling thread and on
//! worker threads that spin (yielding the core) briefly between launches (OpenMP's active
//! wait), so that
//! back-to-back launches do not pay a sleeping thread's wake-up; the caller claims pieces
//! too, so a launch never waits for a worker that has not woken up.
//!
//! Protocol: a launch publishes its [`Job`] and makes the epoch odd (open); workers that
//! see the new epoch register in `active`, re-check that the epoch is unchanged, then claim
//! pieces from their own share of the job, then from the others'. The caller claims pieces as well, waits until every piece
//! is done, makes the epoch even (closed) and waits until no worker is registered: after
//! that no worker reads the job, which lives on the caller's stack.

use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long an idle worker spins before it sleeps.
const SPIN: Duration = Duration::from_millis(2);

/// One launch's pieces: `f(i)` for `i` in `0..n`, dealt into one contiguous share per thread
/// (the caller's first): each thread runs its own share first — the same pieces as in the
/// previous launch of the same size, whose data its cache still holds — then takes what is
/// left of the others'.
struct Job {
    /// The work, its lifetime erased: valid while the job is published.
    f: *const (dyn Fn(usize) + Sync),
    /// Per share: the next piece to claim, and the share's end.
    shares: Vec<(AtomicUsize, usize)>,
    done: AtomicUsize,
}

struct Shared {
    /// Odd while a job is open.
    epoch: AtomicU64,
    job: AtomicPtr<Job>,
    /// Workers registered in the current job.
    active: AtomicUsize,
    /// Workers asleep (or about to sleep) on `wake`.
    parked: AtomicUsize,
    sleep: Mutex<()>,
    wake: Condvar,
}

struct Pool {
    shared: &'static Shared,
    workers: usize,
    /// One launch at a time; others run on their calling thread.
    busy: Mutex<()>,
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| {
        let shared: &'static Shared = Box::leak(Box::new(Shared {
            epoch: AtomicU64::new(0),
            job: AtomicPtr::new(std::ptr::null_mut()),
            active: AtomicUsize::new(0),
            parked: AtomicUsize::new(0),
            sleep: Mutex::new(()),
            wake: Condvar::new(),
        }));
        // The caller is one of the launch's threads (RAYON_NUM_THREADS counts it).
        let wanted = rayon::current_num_threads().saturating_sub(1);
        let mut workers = 0;
        for k in 0..wanted {
            let spawned = std::thread::Builder::new()
                .name(format!("weft-cpu-{k}"))
                .spawn(move || worker(shared, k + 1));
            if spawned.is_ok() {
                workers += 1;
            }
        }
        Pool {
            shared,
            workers,
            busy: Mutex::new(()),
        }
    })
}

/// Runs `f(i)` for every `i` in `0..n` exactly once, on the calling thread and the pool's
/// workers, and returns when all have finished. Runs them all on the calling thread when
/// the pool has no workers or another launch is using it.
pub(crate) fn run(n: usize, f: &(dyn Fn(usize) + Sync)) {
    let p = pool();
    let guard = match p.busy.try_lock() {
        Ok(g) if p.workers > 0 && n > 1 => g,
        _ => {
            (0..n).for_each(f);
            return;
        }
    };
    let s = p.shared;
    // SAFETY: only the lifetime is erased; the job is withdrawn (closed, no worker
    // registered) before this function returns.
    let f: *const (dyn Fn(usize) + Sync) = unsafe { std::mem::transmute(f) };
    let threads = p.workers + 1;
    let job = Job {
        f,
        shares: (0..threads)
            .map(|t| (AtomicUsize::new(t * n / threads), (t + 1) * n / threads))
            .collect(),
        done: AtomicUsize::new(0),
    };
    s.job.store(&job as *const Job as *mut Job, SeqCst);
    s.epoch.fetch_add(1, SeqCst);
    if s.parked.load(SeqCst) > 0 {
        let _g = s.sleep.lock().unwrap_or_else(|e| e.into_inner());
        s.wake.notify_all();
    }
    claim(&job, 0);
    wait_until(|| job.done.load(SeqCst) >= n);
    s.epoch.fetch_add(1, SeqCst);
    wait_until(|| s.active.load(SeqCst) == 0);
    s.job.store(std::ptr::null_mut(), SeqCst);
    drop(guard);
}

/// Waits until `ready()`: spins briefly, then yields the processor between checks (the
/// thread being waited for may need this one's core).
fn wait_until(ready: impl Fn() -> bool) {
    let mut k = 0u32;
    while !ready() {
        if k < 64 {
            std::hint::spin_loop();
            k += 1;
        } else {
            std::thread::yield_now();
        }
    }
}

/// Claims and runs pieces until none is left: share `me` first, then the others' in turn.
fn claim(job: &Job, me: usize) {
    let k = job.shares.len();
    for s in (0..k).map(|j| (me + j) % k) {
        let (next, end) = (&job.shares[s].0, job.shares[s].1);
        loop {
            let i = next.fetch_add(1, SeqCst);
            if i >= end {
                break;
            }
            // SAFETY: the job is published, so `f` is alive (see `run`).
            let f = unsafe { &*job.f };
            // A panic is reported on stderr and the piece counts as done, so the launch
            // ends (the kernels themselves do not unwind).
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(i))).is_err() {
                eprintln!("weft: a CPU launch piece panicked");
            }
            job.done.fetch_add(1, SeqCst);
        }
    }
}

/// Worker `me` (1 ..= workers; the caller is 0).
fn worker(s: &'static Shared, me: usize) {
    let mut seen = s.epoch.load(SeqCst);
    loop {
        // Wait for a new epoch: spin, then sleep.
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            let e = s.epoch.load(SeqCst);
            if e != seen {
                seen = e;
                break;
            }
            spins = spins.wrapping_add(1);
            if !spins.is_multiple_of(64) {
                std::hint::spin_loop();
                continue;
            }
            if start.elapsed() < SPIN {
                // Leave the core to any other runnable thread (the caller may share it).
                std::thread::yield_now();
                continue;
            }
            let mut g = s.sleep.lock().unwrap_or_else(|e| e.into_inner());
            s.parked.fetch_add(1, SeqCst);
            while s.epoch.load(SeqCst) == seen {
                g = s.wake.wait(g).unwrap_or_else(|e| e.into_inner());
            }
            s.parked.fetch_sub(1, SeqCst);
        }
        if !seen.is_multiple_of(2) {
            s.active.fetch_add(1, SeqCst);
            if s.epoch.load(SeqCst) == seen {
                // SAFETY: the epoch is still the job's, and the caller waits for `active`
                // to drop to zero before withdrawing it.
                let job = unsafe { &*s.job.load(SeqCst) };
                claim(job, me);
            }
            s.active.fetch_sub(1, SeqCst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every piece runs exactly once, also when several threads launch at once (all but one
    /// of them then run their pieces on their own thread) and for empty and one-piece jobs.
    #[test]
    fn every_piece_runs_exactly_once() {
        let launchers: Vec<_> = (0..4)
            .map(|t| {
                std::thread::spawn(move || {
                    for n in [0usize, 1, 2, 7, 64, 1000] {
                        let hits: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
                        run(n, &|i| {
                            hits[i].fetch_add(1, SeqCst);
                        });
                        let counts: Vec<usize> = hits.iter().map(|h| h.load(SeqCst)).collect();
                        assert!(
                            counts.iter().all(|&c| c == 1),
                            "thread {t}, {n} pieces: {counts:?}"
                        );
                    }
                })
            })
            .collect();
        for l in launchers {
            l.join().expect("a launcher panicked");
        }
    }
}
