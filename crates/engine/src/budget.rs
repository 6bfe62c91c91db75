//! One host memory budget, charged once per byte.
//!
//! PCE matrices and resident parameters are long-lived charges held by their
//! caches; each partition in flight holds a charge for its working set
//! (witness, a/b/c, backend scratch) from before its synthesis starts until
//! its kernel region is done. Idle pinned buffers, idle PCEs and idle
//! parameters are *reclaimable*: when a charge does not fit, the budget asks
//! its reclaimer to free them (pinned first, then PCEs, then parameters,
//! least recently used first) before it reports that the charge must wait.
//!
//! Waits never poll: every state change that could let a waiter in (a charge
//! dropped, a job cancelled, a partition queued) bumps one signal, and
//! waiters sleep on it.

use std::fmt;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, RwLock, Weak};

use serde::Serialize;

use crate::error::{EngineError, Result};

/// A generation counter with a condition variable: "something changed".
///
/// The pattern that cannot lose a wake-up: read [`Signal::current`], check
/// the condition, and if it does not hold, [`Signal::wait_past`] the value
/// read. Every change bumps after it is made, so a change between the read
/// and the wait makes the wait return at once.
#[derive(Debug, Default)]
pub(crate) struct Signal {
    generation: Mutex<u64>,
    changed: Condvar,
}

impl Signal {
    fn lock(&self) -> MutexGuard<'_, u64> {
        self.generation
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn current(&self) -> u64 {
        *self.lock()
    }

    /// Moves the generation on and wakes every waiter; returns the new
    /// generation.
    pub(crate) fn bump(&self) -> u64 {
        let generation = {
            let mut g = self.lock();
            *g += 1;
            *g
        };
        self.changed.notify_all();
        generation
    }

    /// Sleeps until the generation differs from `seen`.
    pub(crate) fn wait_past(&self, seen: u64) {
        let mut generation = self.lock();
        while *generation == seen {
            generation = self
                .changed
                .wait(generation)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// What a charge pays for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChargeKind {
    /// Recorded constraint matrices (the PCE cache).
    Pce,
    /// Resident Groth16 parameters.
    Params,
    /// A partition's witness, a/b/c and backend scratch (and a job's
    /// reserved working set, see the crate docs).
    WorkingSet,
}

const KINDS: usize = 3;

impl ChargeKind {
    fn index(self) -> usize {
        match self {
            ChargeKind::Pce => 0,
            ChargeKind::Params => 1,
            ChargeKind::WorkingSet => 2,
        }
    }
}

/// Frees reclaimable memory for the budget, and says how much of it there is.
pub(crate) trait Reclaim: Send + Sync {
    /// Bytes held outside any charge that can be freed on demand (idle
    /// pinned buffers).
    fn uncharged_idle_bytes(&self) -> u64;
    /// Frees idle memory until at least `need` bytes are freed or nothing
    /// idle is left; returns the bytes freed. Never called with the budget's
    /// lock held.
    fn reclaim(&self, need: u64) -> u64;
}

struct Inner {
    total: u64,
    charged: Mutex<[u64; KINDS]>,
    signal: Arc<Signal>,
    reclaim: RwLock<Option<Weak<dyn Reclaim>>>,
}

impl Inner {
    fn charged(&self) -> MutexGuard<'_, [u64; KINDS]> {
        self.charged.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn reclaimer(&self) -> Option<Arc<dyn Reclaim>> {
        self.reclaim
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .and_then(Weak::upgrade)
    }
}

/// The host memory budget. Cheap to clone; clones share it.
#[derive(Clone)]
pub struct MemoryBudget {
    inner: Arc<Inner>,
}

impl fmt::Debug for MemoryBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryBudget")
            .field("total", &self.inner.total)
            .field("charged", &*self.inner.charged())
            .finish()
    }
}

impl MemoryBudget {
    /// A budget of `total` bytes.
    pub fn new(total: u64) -> Self {
        Self::with_signal(total, Arc::default())
    }

    pub(crate) fn with_signal(total: u64, signal: Arc<Signal>) -> Self {
        Self {
            inner: Arc::new(Inner {
                total,
                charged: Mutex::new([0; KINDS]),
                signal,
                reclaim: RwLock::new(None),
            }),
        }
    }

    pub(crate) fn set_reclaimer(&self, reclaim: Weak<dyn Reclaim>) {
        *self
            .inner
            .reclaim
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Some(reclaim);
    }

    /// The budget in bytes.
    pub fn total(&self) -> u64 {
        self.inner.total
    }

    /// Bytes held by charges now.
    pub fn charged(&self) -> u64 {
        self.inner.charged().iter().sum()
    }

    /// Bytes held by charges of `kind` now.
    pub fn charged_for(&self, kind: ChargeKind) -> u64 {
        self.inner.charged()[kind.index()]
    }

    /// Idle memory outside any charge (idle pinned buffers), freed on demand.
    pub fn uncharged_idle(&self) -> u64 {
        self.inner
            .reclaimer()
            .map_or(0, |r| r.uncharged_idle_bytes())
    }

    /// Bytes that a charge could take now without reclaiming anything.
    pub fn available(&self) -> u64 {
        self.report().available_bytes
    }

    /// Wakes every waiter, to re-check its stop condition
    /// ([`MemoryBudget::charge`]).
    pub fn notify(&self) {
        self.inner.signal.bump();
    }

    /// Charges `bytes` now if they fit, reclaiming idle memory if that makes
    /// them fit; `Ok(None)` if they only fit later.
    ///
    /// # Errors
    /// [`EngineError::NeverFits`] when `bytes` exceed the whole budget.
    pub fn try_charge(&self, bytes: u64, kind: ChargeKind) -> Result<Option<Charge>> {
        Ok(self
            .try_charge_taking(bytes, kind, || None::<()>)?
            .map(|(charge, _)| charge))
    }

    /// [`MemoryBudget::try_charge`] for a charge that pays for idle memory
    /// it takes over: `take` runs under the budget's lock just before the
    /// check and takes what it can from the idle pinned buffers (which then
    /// no longer count as idle), so the charge's bytes count them once, and
    /// a reclaim to make room frees other idle buffers, not these. When the
    /// charge does not fit, what was taken goes back (under the lock too)
    /// before anything is reclaimed, and `take` runs again on the retry.
    pub(crate) fn try_charge_taking<T>(
        &self,
        bytes: u64,
        kind: ChargeKind,
        take: impl FnMut() -> Option<T>,
    ) -> Result<Option<(Charge, Option<T>)>> {
        self.try_charge_taking_with(bytes, kind, take, true)
    }

    /// [`MemoryBudget::try_charge_taking`] that never reclaims: `Ok(None)`
    /// unless `bytes` fit beside everything held now, idle memory included.
    /// For memory that is only worth holding while nothing else wants it
    /// (buffers leased ahead).
    pub(crate) fn try_charge_taking_spare<T>(
        &self,
        bytes: u64,
        kind: ChargeKind,
        take: impl FnMut() -> Option<T>,
    ) -> Result<Option<(Charge, Option<T>)>> {
        self.try_charge_taking_with(bytes, kind, take, false)
    }

    fn try_charge_taking_with<T>(
        &self,
        bytes: u64,
        kind: ChargeKind,
        mut take: impl FnMut() -> Option<T>,
        reclaim: bool,
    ) -> Result<Option<(Charge, Option<T>)>> {
        if bytes > self.inner.total {
            return Err(EngineError::NeverFits {
                what: kind_name(kind),
                need_bytes: bytes,
                budget_bytes: self.inner.total,
            });
        }
        let reclaimer = self.inner.reclaimer();
        let mut reclaimed = !reclaim;
        loop {
            let short = {
                let mut charged = self.inner.charged();
                let taken = take();
                let idle = reclaimer.as_ref().map_or(0, |r| r.uncharged_idle_bytes());
                let used = charged.iter().sum::<u64>() + idle;
                if used + bytes <= self.inner.total {
                    charged[kind.index()] += bytes;
                    let charge = Charge {
                        budget: Some(Arc::clone(&self.inner)),
                        bytes,
                        kind,
                    };
                    return Ok(Some((charge, taken)));
                }
                drop(taken);
                used + bytes - self.inner.total
            };
            // Reclaiming drops charges (which take the lock), so it runs
            // without it; once is enough: what it freed is free now.
            match &reclaimer {
                Some(r) if !reclaimed => {
                    reclaimed = true;
                    if r.reclaim(short) == 0 {
                        return Ok(None);
                    }
                }
                _ => return Ok(None),
            }
        }
    }

    /// Charges `bytes`, waiting until they fit or `stop()` holds (checked on
    /// every change of the budget; call [`MemoryBudget::notify`] after making
    /// it true).
    ///
    /// # Errors
    /// [`EngineError::NeverFits`] when `bytes` exceed the whole budget,
    /// [`EngineError::WaitCancelled`] when stopped.
    pub fn charge(&self, bytes: u64, kind: ChargeKind, stop: &dyn Fn() -> bool) -> Result<Charge> {
        loop {
            let seen = self.inner.signal.current();
            if let Some(charge) = self.try_charge(bytes, kind)? {
                return Ok(charge);
            }
            if stop() {
                return Err(EngineError::WaitCancelled {
                    waiting_for: "host memory",
                });
            }
            self.inner.signal.wait_past(seen);
        }
    }
}

fn kind_name(kind: ChargeKind) -> &'static str {
    match kind {
        ChargeKind::Pce => "a PCE",
        ChargeKind::Params => "a parameter set",
        ChargeKind::WorkingSet => "a partition's working set",
    }
}

/// Bytes held against a [`MemoryBudget`]; released when dropped.
pub struct Charge {
    /// Taken in `drop`.
    budget: Option<Arc<Inner>>,
    bytes: u64,
    kind: ChargeKind,
}

impl fmt::Debug for Charge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Charge")
            .field("bytes", &self.bytes)
            .field("kind", &self.kind)
            .finish()
    }
}

impl Charge {
    /// The bytes held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// What they pay for.
    pub fn kind(&self) -> ChargeKind {
        self.kind
    }

    /// Moves `bytes` of this charge (at most all of it) into a new charge
    /// of `kind`. Nothing is released on the way.
    pub fn split(&mut self, bytes: u64, kind: ChargeKind) -> Charge {
        let bytes = bytes.min(self.bytes);
        if let Some(budget) = &self.budget {
            let mut charged = budget.charged();
            charged[self.kind.index()] -= bytes;
            charged[kind.index()] += bytes;
        }
        self.bytes -= bytes;
        Charge {
            budget: self.budget.clone(),
            bytes,
            kind,
        }
    }
}

impl Charge {
    /// Takes `other` (a charge on the same budget) into this one, as this
    /// one's kind. Nothing is released on the way.
    pub(crate) fn absorb(&mut self, mut other: Charge) {
        if let (Some(mine), Some(theirs)) = (&self.budget, other.budget.take()) {
            debug_assert!(Arc::ptr_eq(mine, &theirs), "a charge on another budget");
            let mut charged = mine.charged();
            charged[other.kind.index()] -= other.bytes;
            charged[self.kind.index()] += other.bytes;
        }
        self.bytes += other.bytes;
    }

    /// Releases the charge and runs `f` (which frees what it paid for, e.g.
    /// returns buffers to the pinned pool, where they count as idle) as one
    /// step: no charge and no report sees the bytes both released and not
    /// yet idle, which would let a charge in over the budget.
    pub(crate) fn release_with(mut self, f: impl FnOnce()) {
        let Some(budget) = self.budget.take() else {
            f();
            return;
        };
        {
            let mut charged = budget.charged();
            let slot = &mut charged[self.kind.index()];
            *slot = slot.saturating_sub(self.bytes);
            f();
        }
        budget.signal.bump();
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        if let Some(budget) = self.budget.take() {
            {
                let mut charged = budget.charged();
                let slot = &mut charged[self.kind.index()];
                *slot = slot.saturating_sub(self.bytes);
            }
            budget.signal.bump();
        }
    }
}

/// Where the memory of a [`MemoryBudget`] is, for reports and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MemoryReport {
    /// The budget.
    pub budget_bytes: u64,
    /// Charged to cached PCEs.
    pub pce_bytes: u64,
    /// Charged to resident parameters.
    pub params_bytes: u64,
    /// Charged to working sets: partitions in flight and jobs' reserved ones.
    pub working_set_bytes: u64,
    /// Idle pinned buffers (not charged; reclaimed first).
    pub pinned_idle_bytes: u64,
    /// All of the above but the budget.
    pub used_bytes: u64,
    /// Budget minus used.
    pub available_bytes: u64,
}

impl MemoryBudget {
    /// Where the memory is now.
    pub fn report(&self) -> MemoryReport {
        // Idle bytes are read under the charges' lock, as `try_charge` reads
        // them: a working set's charge is always released before its buffers
        // go idle, so the two are never counted together.
        let reclaimer = self.inner.reclaimer();
        let (charged, idle) = {
            let charged = self.inner.charged();
            let idle = reclaimer.as_ref().map_or(0, |r| r.uncharged_idle_bytes());
            (*charged, idle)
        };
        let used = charged.iter().sum::<u64>() + idle;
        MemoryReport {
            budget_bytes: self.inner.total,
            pce_bytes: charged[ChargeKind::Pce.index()],
            params_bytes: charged[ChargeKind::Params.index()],
            working_set_bytes: charged[ChargeKind::WorkingSet.index()],
            pinned_idle_bytes: idle,
            used_bytes: used,
            available_bytes: self.inner.total.saturating_sub(used),
        }
    }
}

/// This machine's memory for the automatic budget: `MemTotal` from
/// `/proc/meminfo`, lowered to the cgroup limit when one is set.
pub fn machine_memory() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let total = parse_meminfo_total(&meminfo)?;
    let limit = [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    .iter()
    .find_map(|p| read_limit(Path::new(p)));
    Some(limit.map_or(total, |l| l.min(total)))
}

fn read_limit(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn parse_meminfo_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::thread;

    use super::*;

    #[test]
    fn charges_add_up_split_merge_and_release() {
        let budget = MemoryBudget::new(100);
        let mut a = budget
            .try_charge(60, ChargeKind::WorkingSet)
            .unwrap()
            .unwrap();
        assert_eq!(budget.available(), 40);
        assert!(budget.try_charge(41, ChargeKind::Pce).unwrap().is_none());
        let pce = a.split(25, ChargeKind::Pce);
        assert_eq!(
            (
                budget.charged_for(ChargeKind::Pce),
                budget.charged_for(ChargeKind::WorkingSet)
            ),
            (25, 35)
        );
        let params = a.split(100, ChargeKind::Params);
        assert_eq!((params.bytes(), a.bytes()), (35, 0));
        assert_eq!(budget.charged_for(ChargeKind::Params), 35);
        assert_eq!(budget.charged(), 60);
        drop((pce, a, params));
        assert_eq!(budget.charged(), 0);
        assert_eq!(budget.report().available_bytes, 100);
    }

    #[test]
    fn an_absorbed_charge_changes_kind_and_is_released_once() {
        let budget = MemoryBudget::new(1000);
        let mut ws = budget
            .try_charge(100, ChargeKind::WorkingSet)
            .unwrap()
            .unwrap();
        let pce = budget.try_charge(300, ChargeKind::Pce).unwrap().unwrap();
        ws.absorb(pce);
        assert_eq!(ws.bytes(), 400);
        assert_eq!(budget.charged_for(ChargeKind::WorkingSet), 400);
        assert_eq!(budget.charged_for(ChargeKind::Pce), 0);
        assert_eq!(budget.charged(), 400);
        drop(ws);
        assert_eq!(budget.charged(), 0);
    }

    #[test]
    fn a_charge_larger_than_the_budget_never_fits() {
        let budget = MemoryBudget::new(100);
        let err = budget.try_charge(101, ChargeKind::Params).unwrap_err();
        assert!(
            matches!(
                err,
                EngineError::NeverFits {
                    need_bytes: 101,
                    budget_bytes: 100,
                    ..
                }
            ),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "a parameter set needs 101 bytes but the whole host memory budget is 100 bytes"
        );
    }

    #[test]
    fn a_waiting_charge_gets_in_when_memory_is_freed_or_stops_when_told() {
        let budget = MemoryBudget::new(100);
        let held = budget.try_charge(80, ChargeKind::Pce).unwrap().unwrap();
        let waiter = {
            let budget = budget.clone();
            thread::spawn(move || budget.charge(50, ChargeKind::WorkingSet, &|| false))
        };
        drop(held);
        let got = waiter.join().unwrap().unwrap();
        assert_eq!(got.bytes(), 50);

        let stop = Arc::new(AtomicBool::new(false));
        let waiter = {
            let (budget, stop) = (budget.clone(), Arc::clone(&stop));
            thread::spawn(move || {
                budget
                    .charge(60, ChargeKind::WorkingSet, &|| stop.load(Ordering::SeqCst))
                    .map(|c| c.bytes())
            })
        };
        stop.store(true, Ordering::SeqCst);
        budget.notify();
        assert!(matches!(
            waiter.join().unwrap(),
            Err(EngineError::WaitCancelled { .. })
        ));
        drop(got);
        assert_eq!(budget.charged(), 0);
    }

    struct Idle {
        idle: AtomicU64,
        reclaim_calls: AtomicU64,
    }

    impl Reclaim for Idle {
        fn uncharged_idle_bytes(&self) -> u64 {
            self.idle.load(Ordering::SeqCst)
        }

        fn reclaim(&self, need: u64) -> u64 {
            self.reclaim_calls.fetch_add(1, Ordering::SeqCst);
            let idle = self.idle.load(Ordering::SeqCst);
            let freed = idle.min(need);
            self.idle.store(idle - freed, Ordering::SeqCst);
            freed
        }
    }

    #[test]
    fn idle_memory_counts_and_is_reclaimed_only_when_needed() {
        let budget = MemoryBudget::new(100);
        let idle = Arc::new(Idle {
            idle: AtomicU64::new(50),
            reclaim_calls: AtomicU64::new(0),
        });
        let weak: Weak<dyn Reclaim> = Arc::downgrade(&(Arc::clone(&idle) as Arc<dyn Reclaim>));
        budget.set_reclaimer(weak);
        assert_eq!(budget.available(), 50);
        let a = budget
            .try_charge(40, ChargeKind::WorkingSet)
            .unwrap()
            .unwrap();
        assert_eq!(idle.reclaim_calls.load(Ordering::SeqCst), 0);
        let b = budget
            .try_charge(30, ChargeKind::WorkingSet)
            .unwrap()
            .unwrap();
        assert_eq!(idle.reclaim_calls.load(Ordering::SeqCst), 1);
        assert_eq!(idle.idle.load(Ordering::SeqCst), 30);
        let report = budget.report();
        assert_eq!((report.used_bytes, report.available_bytes), (100, 0));
        drop((a, b));
    }

    /// Idle bytes taken out of `Idle`, back in it when dropped.
    struct Taken(Arc<Idle>, u64);

    impl Drop for Taken {
        fn drop(&mut self) {
            self.0.idle.fetch_add(self.1, Ordering::SeqCst);
        }
    }

    fn take_from(idle: &Arc<Idle>, bytes: u64, calls: &AtomicU64) -> Option<Taken> {
        calls.fetch_add(1, Ordering::SeqCst);
        let have = idle.idle.load(Ordering::SeqCst);
        (have >= bytes).then(|| {
            idle.idle.store(have - bytes, Ordering::SeqCst);
            Taken(Arc::clone(idle), bytes)
        })
    }

    #[test]
    fn a_charge_taking_idle_memory_over_counts_it_once() {
        let budget = MemoryBudget::new(100);
        let idle = Arc::new(Idle {
            idle: AtomicU64::new(60),
            reclaim_calls: AtomicU64::new(0),
        });
        let weak: Weak<dyn Reclaim> = Arc::downgrade(&(Arc::clone(&idle) as Arc<dyn Reclaim>));
        budget.set_reclaimer(weak);
        let calls = AtomicU64::new(0);
        // 70 bytes, 40 of them an idle buffer taken over: 20 idle + 70 fit
        // without reclaiming (a plain charge of 70 would free 30 idle bytes).
        let (a, taken) = budget
            .try_charge_taking(70, ChargeKind::WorkingSet, || take_from(&idle, 40, &calls))
            .unwrap()
            .unwrap();
        assert!(taken.is_some());
        assert_eq!(idle.reclaim_calls.load(Ordering::SeqCst), 0);
        assert_eq!(idle.idle.load(Ordering::SeqCst), 20);
        assert_eq!(budget.report().used_bytes, 90);
        // Dropped together, the buffer counts as idle again.
        a.release_with(|| drop(taken));
        assert_eq!(idle.idle.load(Ordering::SeqCst), 60);
        assert_eq!(budget.report().used_bytes, 60);

        // 95 bytes with the same 40 taken over: 20 + 95 does not fit. What
        // was taken goes back before the reclaim, which frees 15 (the
        // shortfall), and the retry takes the buffer again.
        calls.store(0, Ordering::SeqCst);
        let (b, taken) = budget
            .try_charge_taking(95, ChargeKind::WorkingSet, || take_from(&idle, 40, &calls))
            .unwrap()
            .unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        assert_eq!(idle.reclaim_calls.load(Ordering::SeqCst), 1);
        assert_eq!(idle.idle.load(Ordering::SeqCst), 5);
        assert_eq!(taken.as_ref().map(|t| t.1), Some(40));
        assert_eq!(budget.report().used_bytes, 100);
        b.release_with(|| drop(taken));

        // 10 charged beside 45 idle: 95 more can never fit beside the 10
        // (taken over or not). The first try takes the 40, is 10 short and
        // gives them back; the reclaim frees 10 idle bytes, leaving 35, too
        // few for the retry to take the 40; refused, nothing stays taken.
        let other = budget.try_charge(10, ChargeKind::Params).unwrap().unwrap();
        calls.store(0, Ordering::SeqCst);
        let refused = budget
            .try_charge_taking(95, ChargeKind::WorkingSet, || take_from(&idle, 40, &calls))
            .unwrap();
        assert!(refused.is_none());
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        assert_eq!(idle.reclaim_calls.load(Ordering::SeqCst), 2);
        assert_eq!(idle.idle.load(Ordering::SeqCst), 35);
        assert_eq!(budget.charged(), 10);
        drop(other);
    }

    #[test]
    fn meminfo_total_is_parsed() {
        let text = "MemTotal:       24594732 kB\nMemFree:         1234 kB\n";
        assert_eq!(parse_meminfo_total(text), Some(24594732 * 1024));
        assert_eq!(parse_meminfo_total("nothing"), None);
        assert!(machine_memory().is_some_and(|m| m > 0));
    }
}
