//! Reactive dispatch: a counting permit bounding the items between "being
//! synthesized" and "done", granted by priority then arrival.

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashSet};
use std::fmt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use crate::{CancelToken, GpuSchedError, Priority, Result};

/// The permit decisions, free of threads: `bound` permits, waiters served by
/// priority class then ticket (arrival) order.
#[derive(Debug)]
pub(crate) struct PermitCore {
    bound: usize,
    in_use: usize,
    waiting: BTreeSet<(Reverse<Priority>, u64)>,
    /// Tickets granted while waiting, not yet taken by their waiter.
    granted: HashSet<u64>,
    next_ticket: u64,
}

impl PermitCore {
    pub(crate) fn new(bound: usize) -> Self {
        Self {
            bound,
            in_use: 0,
            waiting: BTreeSet::new(),
            granted: HashSet::new(),
            next_ticket: 0,
        }
    }

    pub(crate) fn in_use(&self) -> usize {
        self.in_use
    }

    pub(crate) fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// Asks for a permit; the ticket is granted at once if one is free.
    pub(crate) fn request(&mut self, priority: Priority) -> u64 {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        if self.in_use < self.bound && self.waiting.is_empty() {
            self.in_use += 1;
            self.granted.insert(ticket);
        } else {
            self.waiting.insert((Reverse(priority), ticket));
        }
        ticket
    }

    /// Takes the permit of a granted ticket (once).
    pub(crate) fn take_grant(&mut self, ticket: u64) -> bool {
        self.granted.remove(&ticket)
    }

    /// Returns a permit; the first waiter, if any, is granted it.
    pub(crate) fn release(&mut self) -> Option<u64> {
        self.in_use = self.in_use.saturating_sub(1);
        self.grant_next()
    }

    fn grant_next(&mut self) -> Option<u64> {
        if self.in_use >= self.bound {
            return None;
        }
        let (_, ticket) = self.waiting.pop_first()?;
        self.in_use += 1;
        self.granted.insert(ticket);
        Some(ticket)
    }

    /// Gives up a ticket, waiting or granted-but-not-taken; returns the
    /// ticket that got the permit instead, if any.
    pub(crate) fn withdraw(&mut self, priority: Priority, ticket: u64) -> Option<u64> {
        if self.waiting.remove(&(Reverse(priority), ticket)) {
            None
        } else if self.granted.remove(&ticket) {
            self.release()
        } else {
            None
        }
    }
}

/// A bound on work items between "synthesis started" and "done": the
/// engine takes a permit before it synthesizes a partition and hands it to
/// the partition's [`crate::WorkItem`] ([`crate::WorkItem::with_permit`]);
/// the scheduler drops it when the item completes, fails or is cancelled,
/// which lets exactly one more synthesis start. Waiters are served by
/// priority class, then in arrival order.
///
/// Clones share the bound.
#[derive(Clone)]
pub struct DispatchBound {
    shared: Arc<BoundShared>,
}

struct BoundShared {
    core: Mutex<PermitCore>,
    cv: Condvar,
}

impl BoundShared {
    fn lock(&self) -> MutexGuard<'_, PermitCore> {
        self.core.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl fmt::Debug for DispatchBound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let core = self.shared.lock();
        f.debug_struct("DispatchBound")
            .field("bound", &core.bound)
            .field("in_flight", &core.in_use())
            .field("waiting", &core.waiting())
            .finish()
    }
}

impl DispatchBound {
    /// Allows `bound` items in flight.
    pub fn new(bound: usize) -> Result<Self> {
        if bound == 0 {
            return Err(GpuSchedError::ZeroDispatchBound);
        }
        Ok(Self {
            shared: Arc::new(BoundShared {
                core: Mutex::new(PermitCore::new(bound)),
                cv: Condvar::new(),
            }),
        })
    }

    /// The bound.
    pub fn bound(&self) -> usize {
        self.shared.lock().bound
    }

    /// Permits held now.
    pub fn in_flight(&self) -> usize {
        self.shared.lock().in_use()
    }

    /// A permit if one is free and nobody waits for one.
    pub fn try_acquire(&self) -> Option<DispatchPermit> {
        let mut core = self.shared.lock();
        if core.in_use < core.bound && core.waiting.is_empty() {
            core.in_use += 1;
            Some(DispatchPermit {
                shared: Arc::clone(&self.shared),
            })
        } else {
            None
        }
    }

    /// Waits for a permit, behind waiters of a higher class or of the same
    /// class that came first.
    ///
    /// # Errors
    /// [`GpuSchedError::Cancelled`] when `cancel` is cancelled first;
    /// [`GpuSchedError::BlockingInPhase`] when called from inside a phase
    /// (permits are released by finishing items: waiting there can deadlock).
    pub fn acquire(&self, priority: Priority, cancel: &CancelToken) -> Result<DispatchPermit> {
        if crate::scheduler::in_phase() {
            return Err(GpuSchedError::BlockingInPhase {
                call: "DispatchBound::acquire",
            });
        }
        let cancelled = || GpuSchedError::Cancelled {
            waiting_for: "a dispatch permit",
        };
        let weak = Arc::downgrade(&self.shared);
        let _listener = cancel.listen(Arc::new(move || {
            if let Some(shared) = weak.upgrade() {
                let _core = shared.lock();
                shared.cv.notify_all();
            }
        }));
        let mut core = self.shared.lock();
        if cancel.is_cancelled() {
            return Err(cancelled());
        }
        let ticket = core.request(priority);
        loop {
            if core.take_grant(ticket) {
                return Ok(DispatchPermit {
                    shared: Arc::clone(&self.shared),
                });
            }
            if cancel.is_cancelled() {
                if core.withdraw(priority, ticket).is_some() {
                    self.shared.cv.notify_all();
                }
                return Err(cancelled());
            }
            core = self
                .shared
                .cv
                .wait(core)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// One item's place in flight; dropping it lets the next waiter in.
pub struct DispatchPermit {
    shared: Arc<BoundShared>,
}

impl fmt::Debug for DispatchPermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DispatchPermit")
    }
}

impl Drop for DispatchPermit {
    fn drop(&mut self) {
        let mut core = self.shared.lock();
        if core.release().is_some() {
            self.shared.cv.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::thread;

    #[test]
    fn core_grants_by_priority_then_arrival() {
        let mut core = PermitCore::new(1);
        let first = core.request(Priority::Low);
        assert!(core.take_grant(first));
        let low = core.request(Priority::Low);
        let normal = core.request(Priority::Normal);
        let critical = core.request(Priority::Critical);
        let normal2 = core.request(Priority::Normal);
        let mut order = Vec::new();
        for _ in 0..4 {
            let next = core.release().unwrap();
            assert!(core.take_grant(next));
            order.push(next);
        }
        assert_eq!(order, vec![critical, normal, normal2, low]);
        assert_eq!(core.release(), None);
        assert_eq!(core.in_use(), 0);
    }

    #[test]
    fn withdrawing_a_granted_ticket_passes_it_on() {
        let mut core = PermitCore::new(1);
        let a = core.request(Priority::Normal);
        let b = core.request(Priority::Normal);
        assert_eq!(core.withdraw(Priority::Normal, a), Some(b));
        assert!(core.take_grant(b));
        assert_eq!(core.in_use(), 1);
        let c = core.request(Priority::High);
        assert_eq!(core.withdraw(Priority::High, c), None);
        assert_eq!(core.waiting(), 0);
    }

    #[test]
    fn zero_bound_is_refused() {
        assert_eq!(
            DispatchBound::new(0).unwrap_err(),
            GpuSchedError::ZeroDispatchBound
        );
    }

    #[test]
    fn in_flight_never_exceeds_the_bound_across_threads() {
        let bound = DispatchBound::new(3).unwrap();
        let in_flight = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let max_seen = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let threads: Vec<_> = (0..6)
            .map(|t| {
                let bound = bound.clone();
                let in_flight = Arc::clone(&in_flight);
                let max_seen = Arc::clone(&max_seen);
                thread::spawn(move || {
                    use std::sync::atomic::Ordering::SeqCst;
                    let token = CancelToken::new();
                    for _ in 0..200 {
                        let priority = if t % 2 == 0 {
                            Priority::High
                        } else {
                            Priority::Low
                        };
                        let permit = bound.acquire(priority, &token).unwrap();
                        let now = in_flight.fetch_add(1, SeqCst) + 1;
                        max_seen.fetch_max(now, SeqCst);
                        thread::yield_now();
                        in_flight.fetch_sub(1, SeqCst);
                        drop(permit);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert!(max_seen.load(std::sync::atomic::Ordering::SeqCst) <= 3);
        assert_eq!(bound.in_flight(), 0);
    }

    #[test]
    fn cancelling_a_blocked_acquire_returns_and_leaks_nothing() {
        let bound = DispatchBound::new(1).unwrap();
        let held = bound
            .acquire(Priority::Normal, &CancelToken::new())
            .unwrap();
        let token = CancelToken::new();
        let (tx, rx) = mpsc::channel();
        let waiter = {
            let bound = bound.clone();
            let token = token.clone();
            thread::spawn(move || {
                tx.send(()).unwrap();
                bound.acquire(Priority::Critical, &token).map(drop)
            })
        };
        rx.recv().unwrap();
        token.cancel();
        assert_eq!(
            waiter.join().unwrap(),
            Err(GpuSchedError::Cancelled {
                waiting_for: "a dispatch permit"
            })
        );
        drop(held);
        assert_eq!(bound.in_flight(), 0);
        assert!(bound.try_acquire().is_some());
    }
}
