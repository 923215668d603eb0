//! The launch watchdog (docs/abi.md, "The launch watchdog"): a time budget per launch of
//! compiled host code. Every launch gets an abort flag whose address goes into the context's
//! abort word; compiled code loads the flag at each loop back-edge and returns when it is
//! set. One process-wide thread sets the flags of launches whose deadline has passed; the
//! device then reports [`crate::RuntimeError::Timeout`] instead of results.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// The word compiled code checks: nonzero means "stop now". It has a cache line of its own,
/// so the loads at loop back-edges hit a line that nothing writes until the deadline.
#[repr(C, align(64))]
#[derive(Debug, Default)]
pub struct AbortFlag {
    word: AtomicU32,
}

impl AbortFlag {
    /// A flag that is not raised.
    pub const fn new() -> AbortFlag {
        AbortFlag {
            word: AtomicU32::new(0),
        }
    }

    /// Tells compiled code reading this flag to stop at its next loop back-edge.
    pub fn raise(&self) {
        self.word.store(1, Ordering::Relaxed);
    }

    /// Whether the flag was raised.
    pub fn is_raised(&self) -> bool {
        self.word.load(Ordering::Relaxed) != 0
    }

    /// The flag's address, as the context's abort word holds it.
    pub fn addr(&self) -> u64 {
        &self.word as *const AtomicU32 as u64
    }
}

/// A flag that is never raised: the abort word of a context between runs.
pub(crate) static NEVER: AbortFlag = AbortFlag::new();

/// The budget `WEFT_TIMEOUT` sets (seconds, a positive decimal number; `0` or unset: none).
///
/// # Errors
/// A value that is not a non-negative number of seconds (the message names the variable).
pub fn timeout_from_env() -> Result<Option<Duration>, String> {
    match std::env::var("WEFT_TIMEOUT") {
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(e) => Err(format!("WEFT_TIMEOUT: {e}")),
        Ok(v) => parse_timeout(v.trim()).map_err(|e| format!("WEFT_TIMEOUT={v}: {e}")),
    }
}

/// A time budget in seconds (`0` means none), as `--timeout` and `WEFT_TIMEOUT` take it.
///
/// # Errors
/// Not a number, negative, not finite, or too large for a [`Duration`].
pub fn parse_timeout(s: &str) -> Result<Option<Duration>, String> {
    let secs: f64 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if secs == 0.0 {
        return Ok(None);
    }
    Duration::try_from_secs_f64(secs)
        .map(Some)
        .map_err(|_| format!("`{s}` is not a usable number of seconds (0 turns the budget off)"))
}

/// The budget as the error message writes it (`10 s`, `0.25 s`).
pub(crate) fn budget_text(d: Duration) -> String {
    format!("{} s", d.as_secs_f64())
}

struct Entry {
    id: u64,
    deadline: Instant,
    flag: Arc<AbortFlag>,
}

#[derive(Default)]
struct State {
    entries: Vec<Entry>,
    next_id: u64,
    started: bool,
}

#[derive(Default)]
struct Watchdog {
    state: Mutex<State>,
    wake: Condvar,
}

fn watchdog() -> &'static Watchdog {
    static W: OnceLock<Watchdog> = OnceLock::new();
    W.get_or_init(Watchdog::default)
}

impl Watchdog {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The thread: raises the flags of expired entries, then sleeps until the next deadline
    /// (or a new entry).
    fn run(&self) {
        let mut st = self.lock();
        loop {
            let now = Instant::now();
            st.entries.retain(|e| {
                if e.deadline <= now {
                    e.flag.raise();
                    false
                } else {
                    true
                }
            });
            st = match st.entries.iter().map(|e| e.deadline).min() {
                None => self.wake.wait(st).unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    self.wake
                        .wait_timeout(st, d.saturating_duration_since(now))
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
            };
        }
    }
}

/// One run's watch: its abort flag, raised by the watchdog thread once `budget` has passed
/// (never without a budget). Dropping it stops watching.
pub(crate) struct Watch {
    /// The run's own flag; none without a budget ([`NEVER`] then).
    flag: Option<Arc<AbortFlag>>,
    id: Option<u64>,
}

impl Watch {
    /// Starts watching a run with `budget` (none: the flag is never raised).
    ///
    /// # Errors
    /// The watchdog thread could not be started (the message says why).
    pub(crate) fn start(budget: Option<Duration>) -> Result<Watch, String> {
        let Some(budget) = budget else {
            // Nothing raises the flag: the shared one that never is (no allocation).
            return Ok(Watch {
                flag: None,
                id: None,
            });
        };
        let flag = Arc::new(AbortFlag::new());
        let w = watchdog();
        let mut st = w.lock();
        if !st.started {
            std::thread::Builder::new()
                .name("weft-watchdog".into())
                .spawn(|| watchdog().run())
                .map_err(|e| format!("cannot start the launch watchdog thread: {e}"))?;
            st.started = true;
        }
        let id = st.next_id;
        st.next_id += 1;
        // A budget too large for an `Instant` never expires.
        if let Some(deadline) = Instant::now().checked_add(budget) {
            let earliest = st.entries.iter().all(|e| deadline < e.deadline);
            st.entries.push(Entry {
                id,
                deadline,
                flag: flag.clone(),
            });
            if earliest {
                w.wake.notify_one();
            }
        }
        Ok(Watch {
            flag: Some(flag),
            id: Some(id),
        })
    }

    /// The flag compiled code checks.
    pub(crate) fn flag(&self) -> &AbortFlag {
        self.flag.as_deref().unwrap_or(&NEVER)
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            watchdog().lock().entries.retain(|e| e.id != id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raises_after_the_budget_only() {
        let w = Watch::start(Some(Duration::from_millis(50))).expect("starts");
        let never = Watch::start(None).expect("starts");
        assert!(!w.flag().is_raised());
        let t = Instant::now();
        while !w.flag().is_raised() && t.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(w.flag().is_raised());
        assert!(t.elapsed() >= Duration::from_millis(40));
        assert!(!never.flag().is_raised());
    }

    #[test]
    fn parses_budgets() {
        assert_eq!(parse_timeout("0"), Ok(None));
        assert_eq!(parse_timeout("2.5"), Ok(Some(Duration::from_millis(2500))));
        assert!(parse_timeout("-1").is_err());
        assert!(parse_timeout("soon").is_err());
        assert!(parse_timeout("inf").is_err());
        assert_eq!(budget_text(Duration::from_secs(10)), "10 s");
    }
}
