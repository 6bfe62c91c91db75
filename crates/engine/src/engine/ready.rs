//! `synthesis_ahead`: partitions whose witness is made in parallel parts
//! (through [`cuzk_synth::PartsGate`], as PoRep's is) that are in the
//! gate's line, running, or finished and not yet taken by a GPU worker, by
//! priority class.
//!
//! Such a witness uses every core and is made faster than the GPU proves it
//! (a 32 GiB PoRep partition: about 1.3 s on 16 cores against about 4 s of
//! GPU); without a limit every synthesis thread's witness ended up finished
//! and waiting, whole, in host memory (111 GiB peak for two 32 GiB C2s). The
//! engine runs each witness with a [`Pacing`] pacer: the gate lets the
//! witness into its line only while fewer than `synthesis_ahead` partitions
//! of its class or above are counted, and counts it from then on
//! ([`ReadySlot`]) until a worker starts its prep or it is dropped unproved. A witness made on one
//! thread never enters the gate and is not counted: many of those at once
//! are what keeps a GPU busy (the dispatch bound and the memory budget bound
//! them).

use std::cell::{Cell, RefCell};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use cuzk_gpu_sched::Priority;
use cuzk_synth::PartsGate;
use cuzk_synth::gate::Pacer;

use super::JobState;

/// Counted partitions by priority class.
pub(crate) struct Ready {
    counts: Mutex<Counts>,
    /// The most counted partitions of a class and those above it.
    ahead: usize,
}

/// Indexed by [`class`].
#[derive(Debug, Default)]
struct Counts {
    /// Partitions counted (in the gate's line, running, or waiting for a
    /// worker).
    counted: [usize; 4],
    /// Witnesses started on the room they saw ([`Ready::claim_start`]) that
    /// have not taken it yet.
    starting: [usize; 4],
}

impl fmt::Debug for Ready {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ready")
            .field("counts", &*self.lock())
            .field("ahead", &self.ahead)
            .finish()
    }
}

/// `Low` 0 ... `Critical` 3.
fn class(p: Priority) -> usize {
    match p {
        Priority::Low => 0,
        Priority::Normal => 1,
        Priority::High => 2,
        Priority::Critical => 3,
    }
}

impl Ready {
    pub(crate) fn new(ahead: usize) -> Self {
        Ready {
            counts: Mutex::new(Counts::default()),
            ahead,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counted partitions of every class.
    pub(crate) fn total(&self) -> usize {
        self.lock().counted.iter().sum()
    }

    /// Whether a partition of `priority` would be counted now (nothing is
    /// reserved: another may take the room first).
    #[cfg(test)]
    pub(crate) fn has_room(&self, priority: Priority) -> bool {
        self.lock().counted[class(priority)..].iter().sum::<usize>() < self.ahead
    }

    /// For a witness about to start: a claim on the room of its class if
    /// the partitions counted and the witnesses already started on a claim
    /// leave some, else `None` (it will wait at the gate, so it works on a
    /// copy of its circuit and may yield there). Witnesses that start
    /// together so share the room out instead of each seeing all of it: at
    /// a 32 GiB PoRep job's start ten did, none took a copy, and a HIGH job
    /// then waited for every one of them. The claim ends when the witness
    /// takes its slot ([`Pacing`]) or ends.
    pub(crate) fn claim_start(self: &Arc<Self>, priority: Priority) -> Option<StartClaim> {
        let mut counts = self.lock();
        let c = class(priority);
        let taken: usize =
            counts.counted[c..].iter().sum::<usize>() + counts.starting[c..].iter().sum::<usize>();
        if taken >= self.ahead {
            return None;
        }
        counts.starting[c] += 1;
        Some(StartClaim {
            ready: Arc::clone(self),
            priority,
        })
    }

    /// Counts a partition of `priority` (until the slot is dropped) if
    /// fewer than `ahead` of its class and above are counted.
    pub(crate) fn try_reserve(self: &Arc<Self>, priority: Priority) -> Option<ReadySlot> {
        let mut counts = self.lock();
        let c = class(priority);
        if counts.counted[c..].iter().sum::<usize>() >= self.ahead {
            return None;
        }
        counts.counted[c] += 1;
        Some(ReadySlot {
            ready: Arc::clone(self),
            priority,
        })
    }
}

/// A witness started on the room it saw ([`Ready::claim_start`]).
pub(crate) struct StartClaim {
    ready: Arc<Ready>,
    priority: Priority,
}

impl fmt::Debug for StartClaim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StartClaim")
            .field("priority", &self.priority)
            .finish()
    }
}

impl Drop for StartClaim {
    fn drop(&mut self) {
        let mut counts = self.ready.lock();
        let c = &mut counts.starting[class(self.priority)];
        *c = c.saturating_sub(1);
    }
}

/// One counted partition; dropped when a worker takes it (or it is dropped).
pub(crate) struct ReadySlot {
    ready: Arc<Ready>,
    priority: Priority,
}

impl fmt::Debug for ReadySlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadySlot")
            .field("priority", &self.priority)
            .finish()
    }
}

impl Drop for ReadySlot {
    fn drop(&mut self) {
        {
            let mut counts = self.ready.lock();
            let c = &mut counts.counted[class(self.priority)];
            *c = c.saturating_sub(1);
        }
        // A witness waiting at the gate may fit now.
        PartsGate::global().wake();
    }
}

/// The pacer of one partition's witness: admits it when its class has room
/// (or when its job has ended, so that nothing waits for a job that is gone)
/// and keeps the slot for the engine to hand on with the partition.
pub(crate) struct Pacing {
    ready: Arc<Ready>,
    job: Arc<JobState>,
    slot: RefCell<Option<ReadySlot>>,
    /// The witness's claim on the room, given up when it takes its slot.
    claim: RefCell<Option<StartClaim>>,
    /// Whether a witness kept waiting should give its turn up now.
    should_yield: Box<dyn Fn() -> bool>,
    /// When the witness was first refused room, and when it got it.
    refused: Cell<Option<Instant>>,
    admitted: Cell<Option<Instant>>,
}

impl Pacing {
    pub(crate) fn new(
        ready: &Arc<Ready>,
        job: &Arc<JobState>,
        claim: Option<StartClaim>,
        should_yield: Box<dyn Fn() -> bool>,
    ) -> Self {
        Pacing {
            ready: Arc::clone(ready),
            job: Arc::clone(job),
            slot: RefCell::new(None),
            claim: RefCell::new(claim),
            should_yield,
            refused: Cell::new(None),
            admitted: Cell::new(None),
        }
    }

    /// The slot taken when the witness entered the gate; `None` if it never
    /// did (a witness made on one thread).
    pub(crate) fn take_slot(&self) -> Option<ReadySlot> {
        self.slot.borrow_mut().take()
    }

    /// From the first refusal to the admission, when the witness waited
    /// for room.
    pub(crate) fn waited(&self) -> Option<(Instant, Instant)> {
        self.refused.get().zip(self.admitted.get())
    }

    /// Gives the witness's claim on the room up (it has ended: a witness
    /// that never took a slot must not hold its claim through the rest of
    /// its partition's synthesis).
    pub(crate) fn release_claim(&self) {
        self.claim.borrow_mut().take();
    }

    /// `synthesis_ahead`.
    pub(crate) fn ahead(&self) -> usize {
        self.ready.ahead
    }
}

impl Pacer for Pacing {
    fn try_admit(&self) -> bool {
        if self.slot.borrow().is_some() {
            // A second gate in the same witness: already counted.
            return true;
        }
        match self.ready.try_reserve(self.job.priority) {
            Some(slot) => {
                *self.slot.borrow_mut() = Some(slot);
                self.claim.borrow_mut().take();
                if self.refused.get().is_some() {
                    self.admitted.set(Some(Instant::now()));
                }
                true
            }
            None => {
                if self.refused.get().is_none() {
                    self.refused.set(Some(Instant::now()));
                }
                self.job.is_terminated()
            }
        }
    }

    fn should_yield(&self) -> bool {
        (self.should_yield)()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn room_counts_the_same_class_and_those_above() {
        let ready = Arc::new(Ready::new(2));
        let a = ready.try_reserve(Priority::Normal).unwrap();
        let b = ready.try_reserve(Priority::Normal).unwrap();
        assert_eq!(ready.total(), 2);
        // Two NORMAL partitions counted: NORMAL and LOW wait, HIGH and
        // CRITICAL do not.
        assert!(ready.try_reserve(Priority::Normal).is_none());
        assert!(ready.try_reserve(Priority::Low).is_none());
        assert!(!ready.has_room(Priority::Normal) && !ready.has_room(Priority::Low));
        assert!(ready.has_room(Priority::High));
        let c = ready.try_reserve(Priority::Critical).unwrap();
        let d = ready.try_reserve(Priority::High).unwrap();
        assert_eq!(ready.total(), 4);
        // One HIGH and one CRITICAL: HIGH is full, CRITICAL has room.
        assert!(ready.try_reserve(Priority::High).is_none());
        let e = ready.try_reserve(Priority::Critical).unwrap();
        assert!(ready.try_reserve(Priority::Critical).is_none());
        drop((c, d, e));
        assert!(ready.try_reserve(Priority::Normal).is_none());
        drop(a);
        let a = ready.try_reserve(Priority::Normal).unwrap();
        drop((a, b));
        assert_eq!(ready.total(), 0);
    }

    /// Witnesses starting together share the room out: with room for two,
    /// the third to start gets no claim (it works on a copy and may yield)
    /// although nothing is counted yet. A claim taken into a slot or
    /// dropped gives its place back; a higher class is not kept out by
    /// lower claims.
    #[test]
    fn starts_share_the_room_out() {
        let ready = Arc::new(Ready::new(2));
        let a = ready.claim_start(Priority::Normal).unwrap();
        let b = ready.claim_start(Priority::Normal).unwrap();
        assert!(ready.claim_start(Priority::Normal).is_none());
        assert!(ready.claim_start(Priority::Low).is_none());
        let high = ready.claim_start(Priority::High).unwrap();
        assert_eq!(ready.total(), 0, "claims are not counted partitions");
        // a takes its slot (Pacing drops the claim then): still full.
        let slot = ready.try_reserve(Priority::Normal).unwrap();
        drop(a);
        assert!(ready.claim_start(Priority::Normal).is_none());
        // b ends without taking one: its place is free again once the
        // HIGH claim, which counts against NORMAL's room too, is gone.
        drop(b);
        assert!(ready.claim_start(Priority::Normal).is_none());
        drop(high);
        let c = ready.claim_start(Priority::Normal).unwrap();
        assert!(ready.claim_start(Priority::Normal).is_none());
        drop((slot, c));
        assert!(ready.claim_start(Priority::Normal).is_some());
    }
}
