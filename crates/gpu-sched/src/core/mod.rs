//! Every scheduling decision, free of threads and clocks.
//!
//! [`Core`] holds the queue of waiting items, the per-device memory ledgers,
//! the per-device kernel-region lock and the jobs' bookkeeping. It never
//! blocks, never reads a clock and never runs or drops user code: payloads
//! it removes are handed back to the caller, who drops them outside any lock
//! (a payload's `Drop` may call back into the scheduler). The real scheduler
//! drives it from worker threads under one mutex; the discrete-event
//! simulation in the tests drives the same code with a simulated clock.
//!
//! Decisions (see `docs/ARCHITECTURE.md`, "Scheduling model"):
//! - queue order: priority class, then job (creation order), then partition;
//! - dispatch: an idle worker on device `d` takes the first item in queue
//!   order that fits `d`'s free memory now, unless an item ahead of it could
//!   ever fit `d` (then `d` waits for that one). Among devices that could take
//!   an item now, it goes to the one with the fewest items ahead of their
//!   kernel region (the soonest to run it);
//! - kernel lock: granted to the waiting item with the smallest key, except
//!   that it stays free while an item of a strictly higher class on the same
//!   device is still in prep (that one would otherwise wait behind a lower
//!   kernel region that started after it was taken).
//!
//! Its parts: `jobs` (job bookkeeping: close, cancel, outcome), `admission`
//! (what enters the queue, or is refused), `dispatch` (which idle worker
//! takes which queued item, and giving the item back), `kernel_lock` (the
//! per-device kernel-region lock), `memory` (the per-device memory ledger,
//! standing reservations and held memory) and `snapshot` (the state as
//! observers see it). This file holds the state they share.

mod admission;
mod dispatch;
mod jobs;
mod kernel_lock;
mod memory;
mod snapshot;
#[cfg(test)]
mod test_support;

pub use jobs::JobSummary;
pub(crate) use memory::MemoryLedger;
pub use snapshot::{DeviceSnapshot, SchedulerSnapshot};

use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, HashMap};

use crate::{GpuSchedError, JobId, Priority};

use jobs::JobState;

/// Index of a worker across all devices (device `d` owns workers
/// `d * workers_per_device ..`).
pub(crate) type WorkerId = usize;

/// Order of service: smaller is served first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct ItemKey {
    pub(crate) priority: Priority,
    pub(crate) job: JobId,
    pub(crate) partition: u32,
    /// Submission order, only to tell apart two items with the same
    /// (job, partition).
    pub(crate) seq: u64,
}

impl ItemKey {
    fn order(&self) -> (Reverse<Priority>, JobId, u32, u64) {
        (Reverse(self.priority), self.job, self.partition, self.seq)
    }
}

impl Ord for ItemKey {
    fn cmp(&self, other: &Self) -> Ordering {
        self.order().cmp(&other.order())
    }
}

impl PartialOrd for ItemKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Where a worker is in the life of its item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    Idle,
    Prep,
    WaitingKernel,
    Kernel,
    Epilogue,
}

/// How an item left its worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ItemEnd {
    Completed,
    /// Its job was cancelled; the phases left were skipped.
    Cancelled,
    Failed(GpuSchedError),
}

/// What changed that a driver must act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CoreEvent {
    /// The worker was given an item (its memory is reserved): run prep.
    Assigned(WorkerId),
    /// The worker holds its device's kernel lock: run the kernel region.
    Granted(WorkerId),
}

/// What a worker needs to know about the item it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ItemInfo {
    pub(crate) key: ItemKey,
    pub(crate) device_bytes: u64,
    pub(crate) device: usize,
    pub(crate) worker_in_device: usize,
}

#[derive(Debug)]
struct Queued<P> {
    device_bytes: u64,
    payload: P,
}

#[derive(Debug)]
struct Running<P> {
    key: ItemKey,
    device_bytes: u64,
    payload: Option<P>,
}

#[derive(Debug)]
struct WorkerSlot<P> {
    device: usize,
    stage: Stage,
    item: Option<Running<P>>,
}

#[derive(Debug)]
struct DeviceSlot {
    ordinal: usize,
    ledger: MemoryLedger,
    /// Callers blocked in `DeviceMemory::reserve`: while any wait, no new
    /// item is dispatched here, so memory freed goes to them first.
    memory_waiters: usize,
    kernel_holder: Option<WorkerId>,
    workers: std::ops::Range<WorkerId>,
}

/// The scheduler's state and decisions. `P` is the payload of an item (the
/// phases to run, in the real scheduler).
#[derive(Debug)]
pub(crate) struct Core<P> {
    devices: Vec<DeviceSlot>,
    workers: Vec<WorkerSlot<P>>,
    queue: BTreeMap<ItemKey, Queued<P>>,
    jobs: HashMap<JobId, JobState>,
    next_job: u64,
    next_seq: u64,
    shut_down: bool,
    /// Only a driver that reads events (the simulation) records them.
    record_events: bool,
    events: Vec<CoreEvent>,
}

impl<P> Core<P> {
    /// `devices` are (ordinal, capacity in bytes).
    pub(crate) fn new(devices: &[(usize, u64)], workers_per_device: usize, margin: u64) -> Self {
        let mut workers = Vec::with_capacity(devices.len() * workers_per_device);
        let devices = devices
            .iter()
            .enumerate()
            .map(|(index, &(ordinal, capacity))| {
                let start = index * workers_per_device;
                for _ in 0..workers_per_device {
                    workers.push(WorkerSlot {
                        device: index,
                        stage: Stage::Idle,
                        item: None,
                    });
                }
                DeviceSlot {
                    ordinal,
                    ledger: MemoryLedger::new(capacity, margin),
                    memory_waiters: 0,
                    kernel_holder: None,
                    workers: start..start + workers_per_device,
                }
            })
            .collect();
        Self {
            devices,
            workers,
            queue: BTreeMap::new(),
            jobs: HashMap::new(),
            next_job: 0,
            next_seq: 0,
            shut_down: false,
            record_events: false,
            events: Vec::new(),
        }
    }

    /// Keep [`CoreEvent`]s for [`Self::drain_events`].
    #[cfg(test)]
    pub(crate) fn record_events(&mut self) {
        self.record_events = true;
    }

    fn event(&mut self, event: CoreEvent) {
        if self.record_events {
            self.events.push(event);
        }
    }

    pub(crate) fn worker_count(&self) -> usize {
        self.workers.len()
    }

    pub(crate) fn device_of(&self, worker: WorkerId) -> usize {
        self.workers.get(worker).map_or(0, |w| w.device)
    }

    pub(crate) fn stage(&self, worker: WorkerId) -> Stage {
        self.workers.get(worker).map_or(Stage::Idle, |w| w.stage)
    }

    pub(crate) fn ledger(&self, device: usize) -> Option<&MemoryLedger> {
        self.devices.get(device).map(|d| &d.ledger)
    }

    pub(crate) fn ordinal(&self, device: usize) -> usize {
        self.devices.get(device).map_or(device, |d| d.ordinal)
    }

    pub(crate) fn kernel_holder(&self, device: usize) -> Option<WorkerId> {
        self.devices.get(device).and_then(|d| d.kernel_holder)
    }

    #[cfg(test)]
    pub(crate) fn queue_len(&self) -> usize {
        self.queue.len()
    }

    pub(crate) fn is_shut_down(&self) -> bool {
        self.shut_down
    }

    #[cfg(test)]
    pub(crate) fn drain_events(&mut self) -> Vec<CoreEvent> {
        std::mem::take(&mut self.events)
    }
}
