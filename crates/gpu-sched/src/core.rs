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

use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, HashMap};

use crate::{GpuSchedError, JobId, Priority, Result};

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

/// Device-memory accounting of one device: bytes held by running items and
/// by standing reservations ([`crate::DeviceMemory`]), against the capacity
/// minus the margin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MemoryLedger {
    pub(crate) capacity: u64,
    pub(crate) usable: u64,
    pub(crate) items: u64,
    pub(crate) standing: u64,
    /// Memory already allocated by a backend and kept across items (a
    /// resident parameter set), held with `DeviceMemory::hold`: counted as
    /// reserved, but given back on request when it is in the way.
    pub(crate) held: u64,
}

impl MemoryLedger {
    fn new(capacity: u64, margin: u64) -> Self {
        Self {
            capacity,
            usable: capacity.saturating_sub(margin),
            items: 0,
            standing: 0,
            held: 0,
        }
    }

    pub(crate) fn reserved(&self) -> u64 {
        self.items
            .saturating_add(self.standing)
            .saturating_add(self.held)
    }

    fn free(&self) -> u64 {
        self.usable.saturating_sub(self.reserved())
    }

    /// What an item could get once every other item is done: standing
    /// reservations are long-lived charges, so they count; held memory
    /// does not (it is given back when it is in the way).
    pub(crate) fn attainable(&self) -> u64 {
        self.usable.saturating_sub(self.standing)
    }

    fn fits_now(&self, bytes: u64) -> bool {
        bytes <= self.free()
    }

    fn could_ever_fit(&self, bytes: u64) -> bool {
        bytes <= self.attainable()
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

/// How a job ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobSummary {
    /// The job.
    pub job: JobId,
    /// Items that ran all three phases.
    pub completed: usize,
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

#[derive(Debug)]
struct JobState {
    priority: Priority,
    queued: usize,
    running: usize,
    /// Items removed from the queue whose payloads the driver has not yet
    /// reported dropped: the job is not done before their permits are gone.
    pending_drops: usize,
    completed: usize,
    closed: bool,
    cancelled: bool,
    failure: Option<GpuSchedError>,
    /// Live handles; the job's state is forgotten once none is left and it
    /// is done.
    handles: usize,
}

impl JobState {
    fn done(&self) -> bool {
        (self.closed || self.cancelled)
            && self.queued == 0
            && self.running == 0
            && self.pending_drops == 0
    }

    fn outcome(&self, job: JobId) -> Result<JobSummary> {
        if let Some(failure) = &self.failure {
            Err(failure.clone())
        } else if self.cancelled {
            Err(GpuSchedError::JobCancelled { job })
        } else {
            Ok(JobSummary {
                job,
                completed: self.completed,
            })
        }
    }
}

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

    // ---- jobs ----

    pub(crate) fn create_job(&mut self, priority: Priority) -> JobId {
        let job = JobId(self.next_job);
        self.next_job += 1;
        self.jobs.insert(
            job,
            JobState {
                priority,
                queued: 0,
                running: 0,
                pending_drops: 0,
                completed: 0,
                closed: false,
                cancelled: false,
                failure: None,
                handles: 1,
            },
        );
        job
    }

    pub(crate) fn is_cancelled(&self, job: JobId) -> bool {
        // A forgotten job is done: nothing of it may run any more.
        self.jobs.get(&job).is_none_or(|j| j.cancelled)
    }

    /// No more items will be submitted to `job`.
    pub(crate) fn close(&mut self, job: JobId) {
        if let Some(state) = self.jobs.get_mut(&job) {
            state.closed = true;
        }
    }

    /// `Some(outcome)` once the job is closed (or cancelled) and nothing of
    /// it is queued, running, or waiting to be dropped.
    pub(crate) fn job_outcome(&self, job: JobId) -> Option<Result<JobSummary>> {
        match self.jobs.get(&job) {
            Some(state) => state.done().then(|| state.outcome(job)),
            None => Some(Err(GpuSchedError::JobClosed { job })),
        }
    }

    /// The last handle of `job` is gone: close it, forget it once done.
    pub(crate) fn handle_dropped(&mut self, job: JobId) {
        if let Some(state) = self.jobs.get_mut(&job) {
            state.handles = state.handles.saturating_sub(1);
            state.closed = true;
        }
        self.forget_if_done(job);
    }

    fn forget_if_done(&mut self, job: JobId) {
        if self
            .jobs
            .get(&job)
            .is_some_and(|state| state.handles == 0 && state.done())
        {
            self.jobs.remove(&job);
        }
    }

    /// Marks `job` cancelled and removes its queued items, whose payloads
    /// are returned for the caller to drop (then call [`Self::payloads_dropped`]).
    /// Items on workers see the cancellation at their next phase boundary.
    pub(crate) fn cancel(&mut self, job: JobId) -> Vec<P> {
        let Some(state) = self.jobs.get_mut(&job) else {
            return Vec::new();
        };
        // A job already done keeps its outcome.
        if state.cancelled || state.done() {
            return Vec::new();
        }
        state.cancelled = true;
        let keys: Vec<ItemKey> = self
            .queue
            .keys()
            .filter(|key| key.job == job)
            .copied()
            .collect();
        let removed: Vec<P> = keys
            .iter()
            .filter_map(|key| self.queue.remove(key))
            .map(|q| q.payload)
            .collect();
        state.queued = state.queued.saturating_sub(removed.len());
        state.pending_drops += removed.len();
        // A cancelled item in prep no longer holds the lock back, and the
        // queue may have lost its head.
        for device in 0..self.devices.len() {
            self.regrant(device);
        }
        self.dispatch();
        removed
    }

    pub(crate) fn payloads_dropped(&mut self, job: JobId, count: usize) {
        if let Some(state) = self.jobs.get_mut(&job) {
            state.pending_drops = state.pending_drops.saturating_sub(count);
        }
        self.forget_if_done(job);
    }

    /// Refuses new work and cancels every job; returns the removed payloads
    /// by job.
    pub(crate) fn shut_down(&mut self) -> Vec<(JobId, Vec<P>)> {
        self.shut_down = true;
        let mut jobs: Vec<JobId> = self.jobs.keys().copied().collect();
        jobs.sort();
        jobs.into_iter()
            .map(|job| (job, self.cancel(job)))
            .filter(|(_, removed)| !removed.is_empty())
            .collect()
    }

    // ---- items ----

    /// Queues an item. On refusal the payload comes back with the error.
    pub(crate) fn submit(
        &mut self,
        job: JobId,
        partition: u32,
        device_bytes: u64,
        payload: P,
    ) -> std::result::Result<(), (GpuSchedError, P)> {
        if self.shut_down {
            return Err((GpuSchedError::ShutDown, payload));
        }
        let Some(state) = self.jobs.get(&job) else {
            return Err((GpuSchedError::JobClosed { job }, payload));
        };
        if state.cancelled {
            return Err((GpuSchedError::JobCancelled { job }, payload));
        }
        if state.closed {
            return Err((GpuSchedError::JobClosed { job }, payload));
        }
        if self.devices.is_empty() {
            return Err((GpuSchedError::NoDevices, payload));
        }
        let largest = self
            .devices
            .iter()
            .map(|d| d.ledger.attainable())
            .max()
            .unwrap_or(0);
        if device_bytes > largest {
            return Err((
                GpuSchedError::ItemNeverFits {
                    job,
                    partition,
                    need_bytes: device_bytes,
                    largest_usable_bytes: largest,
                },
                payload,
            ));
        }
        let key = ItemKey {
            priority: state.priority,
            job,
            partition,
            seq: self.next_seq,
        };
        self.next_seq += 1;
        self.queue.insert(
            key,
            Queued {
                device_bytes,
                payload,
            },
        );
        if let Some(state) = self.jobs.get_mut(&job) {
            state.queued += 1;
        }
        self.dispatch();
        Ok(())
    }

    pub(crate) fn item(&self, worker: WorkerId) -> Option<ItemInfo> {
        let slot = self.workers.get(worker)?;
        let running = slot.item.as_ref()?;
        let first = self.devices.get(slot.device).map_or(0, |d| d.workers.start);
        Some(ItemInfo {
            key: running.key,
            device_bytes: running.device_bytes,
            device: slot.device,
            worker_in_device: worker - first,
        })
    }

    /// The payload of the item just assigned to `worker` (once).
    pub(crate) fn take_payload(&mut self, worker: WorkerId) -> Option<(ItemInfo, P)> {
        let info = self.item(worker)?;
        let payload = self
            .workers
            .get_mut(worker)?
            .item
            .as_mut()?
            .payload
            .take()?;
        Some((info, payload))
    }

    /// Prep is done: the worker queues for its device's kernel lock.
    pub(crate) fn request_kernel(&mut self, worker: WorkerId) {
        let Some(slot) = self.workers.get_mut(worker) else {
            return;
        };
        if slot.stage != Stage::Prep {
            return;
        }
        slot.stage = Stage::WaitingKernel;
        let device = slot.device;
        self.regrant(device);
    }

    pub(crate) fn holds_kernel(&self, worker: WorkerId) -> bool {
        self.kernel_holder(self.device_of(worker)) == Some(worker)
    }

    /// The kernel region is over: the lock goes to the next waiter.
    pub(crate) fn kernel_done(&mut self, worker: WorkerId) {
        let device = self.device_of(worker);
        if let Some(slot) = self.workers.get_mut(worker)
            && slot.stage == Stage::Kernel
        {
            slot.stage = Stage::Epilogue;
        }
        if let Some(dev) = self.devices.get_mut(device)
            && dev.kernel_holder == Some(worker)
        {
            dev.kernel_holder = None;
        }
        self.regrant(device);
    }

    /// The worker is done with its item, in whatever stage it was: its
    /// memory and, if held, the kernel lock are released. A failure cancels
    /// the rest of the job; the payloads so removed are returned.
    pub(crate) fn finish(&mut self, worker: WorkerId, end: ItemEnd) -> Vec<P> {
        let Some(slot) = self.workers.get_mut(worker) else {
            return Vec::new();
        };
        let Some(item) = slot.item.take() else {
            return Vec::new();
        };
        slot.stage = Stage::Idle;
        let device = slot.device;
        if let Some(dev) = self.devices.get_mut(device) {
            if dev.kernel_holder == Some(worker) {
                dev.kernel_holder = None;
            }
            dev.ledger.items = dev.ledger.items.saturating_sub(item.device_bytes);
        }
        let job = item.key.job;
        let mut removed = Vec::new();
        if let Some(state) = self.jobs.get_mut(&job) {
            state.running = state.running.saturating_sub(1);
            match end {
                ItemEnd::Completed => state.completed += 1,
                ItemEnd::Cancelled => {}
                // A failure after a cancellation is most likely the
                // cancellation itself: the job's outcome stays "cancelled".
                ItemEnd::Failed(error) => {
                    if !state.cancelled {
                        state.failure.get_or_insert(error);
                        removed = self.cancel(job);
                    }
                }
            }
        }
        self.regrant(device);
        self.dispatch();
        self.forget_if_done(job);
        removed
    }

    // ---- standing reservations ----

    /// Takes `bytes` of `device` now if they fit; `Ok(false)` if they fit
    /// only later.
    pub(crate) fn try_reserve_standing(&mut self, device: usize, bytes: u64) -> Result<bool> {
        let Some(dev) = self.devices.get_mut(device) else {
            return Err(GpuSchedError::NoSuchDevice { index: device });
        };
        if !dev.ledger.could_ever_fit(bytes) {
            return Err(GpuSchedError::ReservationNeverFits {
                ordinal: dev.ordinal,
                need_bytes: bytes,
                usable_bytes: dev.ledger.attainable(),
            });
        }
        if dev.ledger.fits_now(bytes) {
            dev.ledger.standing += bytes;
            Ok(true)
        } else {
            Ok(false)
        }
    }

    /// Records `bytes` already in use on the device (allocated by whoever
    /// holds them) as standing, whether or not they fit: never waits, never
    /// refuses. Items that no longer fit beside them wait, or fail as never
    /// fitting, as with any standing reservation.
    pub(crate) fn add_held(&mut self, device: usize, bytes: u64) -> Result<()> {
        let Some(dev) = self.devices.get_mut(device) else {
            return Err(GpuSchedError::NoSuchDevice { index: device });
        };
        dev.ledger.held = dev.ledger.held.saturating_add(bytes);
        Ok(())
    }

    pub(crate) fn release_held(&mut self, device: usize, bytes: u64) {
        if let Some(dev) = self.devices.get_mut(device) {
            dev.ledger.held = dev.ledger.held.saturating_sub(bytes);
        }
        self.dispatch();
    }

    /// Devices whose held memory is in the way now: no item on the
    /// device, and either a caller waiting in `DeviceMemory::reserve` or
    /// the first queued item that could run there not fitting beside it.
    /// Whoever holds it is then asked to give back what no item uses.
    pub(crate) fn pressured(&self) -> Vec<usize> {
        (0..self.devices.len())
            .filter(|&d| {
                let dev = &self.devices[d];
                if dev.ledger.held == 0
                    || !dev.workers.clone().all(|w| self.stage(w) == Stage::Idle)
                {
                    return false;
                }
                dev.memory_waiters > 0
                    || self
                        .queue
                        .values()
                        .find(|q| dev.ledger.could_ever_fit(q.device_bytes))
                        .is_some_and(|q| !dev.ledger.fits_now(q.device_bytes))
            })
            .collect()
    }

    pub(crate) fn release_standing(&mut self, device: usize, bytes: u64) {
        if let Some(dev) = self.devices.get_mut(device) {
            dev.ledger.standing = dev.ledger.standing.saturating_sub(bytes);
        }
        self.dispatch();
    }

    pub(crate) fn add_memory_waiter(&mut self, device: usize) {
        if let Some(dev) = self.devices.get_mut(device) {
            dev.memory_waiters += 1;
        }
    }

    pub(crate) fn remove_memory_waiter(&mut self, device: usize) {
        if let Some(dev) = self.devices.get_mut(device) {
            dev.memory_waiters = dev.memory_waiters.saturating_sub(1);
        }
        self.dispatch();
    }

    // ---- decisions ----

    fn idle_worker(&self, device: usize) -> Option<WorkerId> {
        let dev = self.devices.get(device)?;
        dev.workers
            .clone()
            .find(|&w| self.workers.get(w).is_some_and(|s| s.item.is_none()))
    }

    /// Items on `device` that have not finished their kernel region.
    fn kernel_backlog(&self, device: usize) -> usize {
        self.devices.get(device).map_or(0, |dev| {
            dev.workers
                .clone()
                .filter(|&w| {
                    matches!(
                        self.stage(w),
                        Stage::Prep | Stage::WaitingKernel | Stage::Kernel
                    )
                })
                .count()
        })
    }

    /// Gives queued items to idle workers, as long as any can be given.
    fn dispatch(&mut self) {
        while let Some((key, device)) = self.next_assignment() {
            self.assign(key, device);
        }
    }

    fn next_assignment(&self) -> Option<(ItemKey, usize)> {
        let mut open: Vec<bool> = (0..self.devices.len())
            .map(|d| self.devices[d].memory_waiters == 0 && self.idle_worker(d).is_some())
            .collect();
        for (key, queued) in &self.queue {
            if !open.contains(&true) {
                return None;
            }
            let soonest = (0..self.devices.len())
                .filter(|&d| open[d] && self.devices[d].ledger.fits_now(queued.device_bytes))
                .min_by_key(|&d| {
                    (
                        self.kernel_backlog(d),
                        Reverse(self.devices[d].ledger.free()),
                        d,
                    )
                });
            if let Some(device) = soonest {
                return Some((*key, device));
            }
            // Nothing behind this item may take a device it could run on.
            for (d, dev) in self.devices.iter().enumerate() {
                if dev.ledger.could_ever_fit(queued.device_bytes) {
                    open[d] = false;
                }
            }
        }
        None
    }

    fn assign(&mut self, key: ItemKey, device: usize) {
        let Some(worker) = self.idle_worker(device) else {
            return;
        };
        let Some(queued) = self.queue.remove(&key) else {
            return;
        };
        if let Some(dev) = self.devices.get_mut(device) {
            dev.ledger.items += queued.device_bytes;
        }
        if let Some(state) = self.jobs.get_mut(&key.job) {
            state.queued = state.queued.saturating_sub(1);
            state.running += 1;
        }
        if let Some(slot) = self.workers.get_mut(worker) {
            slot.stage = Stage::Prep;
            slot.item = Some(Running {
                key,
                device_bytes: queued.device_bytes,
                payload: Some(queued.payload),
            });
        }
        self.event(CoreEvent::Assigned(worker));
    }

    /// Grants a free kernel lock on `device` if it should be granted now.
    fn regrant(&mut self, device: usize) {
        let Some(dev) = self.devices.get(device) else {
            return;
        };
        if dev.kernel_holder.is_some() {
            return;
        }
        let mut best_waiting: Option<(ItemKey, WorkerId)> = None;
        let mut best_in_prep: Option<Priority> = None;
        for w in dev.workers.clone() {
            let Some(slot) = self.workers.get(w) else {
                continue;
            };
            let Some(item) = &slot.item else { continue };
            if self.is_cancelled(item.key.job) {
                continue;
            }
            match slot.stage {
                Stage::WaitingKernel if best_waiting.is_none_or(|(k, _)| item.key < k) => {
                    best_waiting = Some((item.key, w));
                }
                Stage::Prep if best_in_prep.is_none_or(|p| item.key.priority > p) => {
                    best_in_prep = Some(item.key.priority);
                }
                _ => {}
            }
        }
        let Some((key, worker)) = best_waiting else {
            return;
        };
        if best_in_prep.is_some_and(|p| p > key.priority) {
            return;
        }
        if let Some(dev) = self.devices.get_mut(device) {
            dev.kernel_holder = Some(worker);
        }
        if let Some(slot) = self.workers.get_mut(worker) {
            slot.stage = Stage::Kernel;
        }
        self.event(CoreEvent::Granted(worker));
    }

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

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn core(devices: &[u64], workers: usize) -> Core<u32> {
        let specs: Vec<(usize, u64)> = devices.iter().copied().enumerate().collect();
        let mut core = Core::new(&specs, workers, 0);
        core.record_events();
        core
    }

    fn assigned(core: &mut Core<u32>) -> Vec<(WorkerId, u32)> {
        core.drain_events()
            .into_iter()
            .filter_map(|e| match e {
                CoreEvent::Assigned(w) => core.item(w).map(|i| (w, i.key.partition)),
                CoreEvent::Granted(_) => None,
            })
            .collect()
    }

    fn granted(core: &mut Core<u32>) -> Vec<WorkerId> {
        core.drain_events()
            .into_iter()
            .filter_map(|e| match e {
                CoreEvent::Granted(w) => Some(w),
                CoreEvent::Assigned(_) => None,
            })
            .collect()
    }

    #[test]
    fn queue_orders_by_priority_then_job_then_partition() {
        let mut c = core(&[10 * GIB], 1);
        let busy = c.create_job(Priority::Low);
        c.submit(busy, 0, 1, 0).unwrap();
        assert_eq!(assigned(&mut c), vec![(0, 0)]);
        let normal_a = c.create_job(Priority::Normal);
        let normal_b = c.create_job(Priority::Normal);
        let high = c.create_job(Priority::High);
        c.submit(normal_b, 1, 1, 21).unwrap();
        c.submit(normal_a, 2, 1, 12).unwrap();
        c.submit(normal_b, 0, 1, 20).unwrap();
        c.submit(normal_a, 1, 1, 11).unwrap();
        c.submit(high, 5, 1, 35).unwrap();
        c.submit(busy, 1, 1, 1).unwrap();
        let mut order = Vec::new();
        for _ in 0..6 {
            c.take_payload(0);
            c.finish(0, ItemEnd::Completed);
            if let Some((_, p)) = c.take_payload(0) {
                order.push(p);
            }
        }
        assert_eq!(order, vec![35, 11, 12, 20, 21, 1]);
    }

    #[test]
    fn kernel_lock_by_priority_then_arrival_and_held_for_higher_prep() {
        let mut c = core(&[10 * GIB], 3);
        let normal = c.create_job(Priority::Normal);
        let high = c.create_job(Priority::High);
        c.submit(normal, 0, 1, 0).unwrap();
        c.submit(normal, 1, 1, 1).unwrap();
        assert_eq!(assigned(&mut c).len(), 2);
        c.request_kernel(1); // partition 1 first: nobody else waits
        assert_eq!(granted(&mut c), vec![1]);
        c.request_kernel(0);
        assert!(granted(&mut c).is_empty());
        c.submit(high, 0, 1, 9).unwrap();
        assert_eq!(assigned(&mut c), vec![(2, 0)]);
        // The high item is in prep: the lock is held back for it.
        c.kernel_done(1);
        assert!(granted(&mut c).is_empty());
        c.request_kernel(2);
        assert_eq!(granted(&mut c), vec![2]);
        c.kernel_done(2);
        assert_eq!(granted(&mut c), vec![0]);
    }

    #[test]
    fn same_class_in_prep_does_not_hold_the_lock() {
        let mut c = core(&[10 * GIB], 2);
        let job = c.create_job(Priority::Normal);
        c.submit(job, 0, 1, 0).unwrap();
        c.submit(job, 1, 1, 1).unwrap();
        c.drain_events();
        c.request_kernel(1);
        assert_eq!(granted(&mut c), vec![1]);
    }

    #[test]
    fn cancelled_item_in_prep_releases_the_hold() {
        let mut c = core(&[10 * GIB], 2);
        let normal = c.create_job(Priority::Normal);
        let critical = c.create_job(Priority::Critical);
        c.submit(normal, 0, 1, 0).unwrap();
        c.submit(critical, 0, 1, 1).unwrap();
        c.drain_events();
        let normal_worker = (0..2)
            .find(|&w| c.item(w).unwrap().key.job == normal)
            .unwrap();
        c.request_kernel(normal_worker);
        assert!(granted(&mut c).is_empty());
        assert!(c.cancel(critical).is_empty());
        assert_eq!(granted(&mut c), vec![normal_worker]);
    }

    #[test]
    fn memory_never_overcommitted_and_head_of_line_waits() {
        let mut c = core(&[10], 2);
        let a = c.create_job(Priority::Normal);
        c.submit(a, 0, 6, 0).unwrap();
        c.submit(a, 1, 6, 1).unwrap(); // fits only after partition 0
        c.submit(a, 2, 1, 2).unwrap(); // fits now, but must not pass 1
        assert_eq!(assigned(&mut c), vec![(0, 0)]);
        assert_eq!(c.ledger(0).unwrap().items, 6);
        c.finish(0, ItemEnd::Completed);
        assert_eq!(assigned(&mut c), vec![(0, 1), (1, 2)]);
        assert_eq!(c.ledger(0).unwrap().items, 7);
    }

    #[test]
    fn never_fits_is_refused_with_sizes() {
        let specs = [(0, 10 * GIB), (1, 20 * GIB)];
        let mut c: Core<u32> = Core::new(&specs, 2, GIB);
        c.record_events();
        let job = c.create_job(Priority::Normal);
        let (err, payload) = c.submit(job, 3, 20 * GIB, 7).unwrap_err();
        assert_eq!(payload, 7);
        assert_eq!(
            err,
            GpuSchedError::ItemNeverFits {
                job,
                partition: 3,
                need_bytes: 20 * GIB,
                largest_usable_bytes: 19 * GIB,
            }
        );
        assert!(err.to_string().contains("21474836480 bytes"), "{err}");
        c.submit(job, 3, 19 * GIB, 7).unwrap();
        assert_eq!(c.item(2).map(|i| i.device), Some(1));
    }

    #[test]
    fn no_devices_refuses() {
        let mut c: Core<u32> = Core::new(&[], 2, 0);
        let job = c.create_job(Priority::Normal);
        assert_eq!(
            c.submit(job, 0, 0, 0).unwrap_err().0,
            GpuSchedError::NoDevices
        );
    }

    #[test]
    fn items_go_to_the_soonest_device() {
        let mut c = core(&[10 * GIB, 10 * GIB], 2);
        let job = c.create_job(Priority::Normal);
        for p in 0..4 {
            c.submit(job, p, GIB, p).unwrap();
        }
        // Spread: 0 -> dev 0, 1 -> dev 1, 2 -> dev 0, 3 -> dev 1.
        let devices: Vec<usize> = assigned(&mut c)
            .into_iter()
            .map(|(w, _)| c.device_of(w))
            .collect();
        assert_eq!(devices, vec![0, 1, 0, 1]);
        // Device 0 frees a worker but device 1 still has two items before
        // its kernel: the next item goes to device 0.
        c.request_kernel(0);
        c.kernel_done(0);
        c.finish(0, ItemEnd::Completed);
        c.submit(job, 4, GIB, 4).unwrap();
        assert_eq!(assigned(&mut c), vec![(0, 4)]);
    }

    #[test]
    fn item_goes_where_its_memory_is_free() {
        let mut c = core(&[10, 10], 2);
        let job = c.create_job(Priority::Normal);
        c.submit(job, 0, 8, 0).unwrap();
        let worker = assigned(&mut c)[0].0;
        assert_eq!(c.device_of(worker), 0);
        // Device 0 has an idle worker but only 2 bytes free: device 1.
        c.submit(job, 1, 5, 1).unwrap();
        let worker = assigned(&mut c)[0].0;
        assert_eq!(c.device_of(worker), 1);
    }

    #[test]
    fn small_device_backfills_when_the_head_never_fits_it() {
        let mut c = core(&[4, 10], 1);
        let job = c.create_job(Priority::Normal);
        c.submit(job, 0, 8, 0).unwrap(); // dev 1
        c.submit(job, 1, 8, 1).unwrap(); // waits for dev 1
        c.submit(job, 2, 3, 2).unwrap(); // may use dev 0: item 1 never fits there
        let got: Vec<(usize, u32)> = assigned(&mut c)
            .into_iter()
            .map(|(w, p)| (c.device_of(w), p))
            .collect();
        assert_eq!(got, vec![(1, 0), (0, 2)]);
    }

    #[test]
    fn cancel_removes_queued_and_job_completes_after_drops() {
        let mut c = core(&[10], 1);
        let job = c.create_job(Priority::Normal);
        for p in 0..3 {
            c.submit(job, p, 4, p).unwrap();
        }
        c.drain_events();
        let removed = c.cancel(job);
        assert_eq!(removed, vec![1, 2]);
        assert!(c.is_cancelled(job));
        c.take_payload(0);
        c.finish(0, ItemEnd::Cancelled);
        assert_eq!(c.job_outcome(job), None, "two payloads not yet dropped");
        c.payloads_dropped(job, 2);
        assert_eq!(
            c.job_outcome(job),
            Some(Err(GpuSchedError::JobCancelled { job }))
        );
        assert_eq!(c.ledger(0).unwrap().reserved(), 0);
        c.handle_dropped(job);
        assert_eq!(c.snapshot().live_jobs, 0);
    }

    #[test]
    fn failure_cancels_the_rest_and_is_the_outcome() {
        let mut c = core(&[10], 1);
        let job = c.create_job(Priority::Normal);
        c.submit(job, 0, 1, 0).unwrap();
        c.submit(job, 1, 1, 1).unwrap();
        c.close(job);
        let failure = GpuSchedError::PhaseFailed {
            job,
            partition: 0,
            phase: crate::Phase::Kernel,
            message: "boom".into(),
        };
        assert_eq!(c.finish(0, ItemEnd::Failed(failure.clone())), vec![1]);
        c.payloads_dropped(job, 1);
        assert_eq!(c.job_outcome(job), Some(Err(failure)));
    }

    #[test]
    fn standing_reservations_come_first_and_count_as_never_fits() {
        let mut c = core(&[10], 2);
        assert!(c.try_reserve_standing(0, 4).unwrap());
        let job = c.create_job(Priority::Normal);
        assert!(matches!(
            c.submit(job, 0, 7, 0),
            Err((
                GpuSchedError::ItemNeverFits {
                    largest_usable_bytes: 6,
                    ..
                },
                0
            ))
        ));
        c.submit(job, 0, 5, 0).unwrap();
        c.drain_events();
        assert!(!c.try_reserve_standing(0, 2).unwrap());
        assert!(matches!(
            c.try_reserve_standing(0, 7),
            Err(GpuSchedError::ReservationNeverFits {
                need_bytes: 7,
                usable_bytes: 6,
                ..
            })
        ));
        // A waiting standing reservation blocks new items on its device.
        c.add_memory_waiter(0);
        c.submit(job, 1, 1, 1).unwrap();
        assert!(assigned(&mut c).is_empty());
        c.finish(0, ItemEnd::Completed);
        assert!(c.try_reserve_standing(0, 2).unwrap());
        c.remove_memory_waiter(0);
        assert_eq!(assigned(&mut c).len(), 1);
        assert_eq!(c.ledger(0).unwrap().reserved(), 7);
    }
}
