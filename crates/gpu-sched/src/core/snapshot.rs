//! Snapshots of the scheduler's state, for observability and tests.

use super::{Core, ItemKey, Stage, WorkerId};
use crate::JobId;

/// Snapshot of one device, for observability and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceSnapshot {
    /// Driver ordinal.
    pub ordinal: usize,
    /// Capacity in bytes.
    pub capacity_bytes: u64,
    /// Capacity minus the margin.
    pub usable_bytes: u64,
    /// Bytes reserved by running items.
    pub item_bytes: u64,
    /// Bytes held by standing reservations ([`crate::Reservation`]).
    pub standing_bytes: u64,
    /// Bytes held by [`crate::DeviceMemory::hold`].
    pub held_bytes: u64,
    /// Workers that hold an item.
    pub busy_workers: usize,
    /// The item in the kernel region, as (job, partition).
    pub kernel: Option<(JobId, u32)>,
    /// Items waiting for the kernel lock, in key order.
    pub waiting_for_kernel: Vec<(JobId, u32)>,
    /// Callers blocked in [`crate::DeviceMemory::reserve`].
    pub memory_waiters: usize,
}

/// Snapshot of the whole scheduler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedulerSnapshot {
    /// Items submitted and not yet taken by a worker.
    pub queued: usize,
    /// Jobs whose state is still kept (a handle is alive or work remains).
    pub live_jobs: usize,
    /// Per device, in the order given to the scheduler.
    pub devices: Vec<DeviceSnapshot>,
}

impl<P> Core<P> {
    pub(crate) fn snapshot(&self) -> SchedulerSnapshot {
        let devices = self
            .devices
            .iter()
            .map(|dev| {
                let key_of = |w: WorkerId| {
                    self.workers
                        .get(w)
                        .and_then(|s| s.item.as_ref())
                        .map(|i| i.key)
                };
                let mut waiting: Vec<ItemKey> = dev
                    .workers
                    .clone()
                    .filter(|&w| self.stage(w) == Stage::WaitingKernel)
                    .filter_map(key_of)
                    .collect();
                waiting.sort();
                DeviceSnapshot {
                    ordinal: dev.ordinal,
                    capacity_bytes: dev.ledger.capacity,
                    usable_bytes: dev.ledger.usable,
                    item_bytes: dev.ledger.items,
                    standing_bytes: dev.ledger.standing,
                    held_bytes: dev.ledger.held,
                    busy_workers: dev
                        .workers
                        .clone()
                        .filter(|&w| self.stage(w) != Stage::Idle)
                        .count(),
                    kernel: dev
                        .kernel_holder
                        .and_then(key_of)
                        .map(|k| (k.job, k.partition)),
                    waiting_for_kernel: waiting.iter().map(|k| (k.job, k.partition)).collect(),
                    memory_waiters: dev.memory_waiters,
                }
            })
            .collect();
        SchedulerSnapshot {
            queued: self.queue.len(),
            live_jobs: self.jobs.len(),
            devices,
        }
    }
}
