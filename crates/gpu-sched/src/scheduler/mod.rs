//! The threaded scheduler: `workers_per_device` threads per device, driving
//! the decisions of [`Core`] under one mutex.
//!
//! Locking rules that keep it deadlock-free:
//! - user code (phases, and the `Drop` of anything a work item owns) never
//!   runs under the core mutex: payloads [`Core`] removes are dropped after
//!   it is released;
//! - a [`CancelToken`]'s listeners are called without its own lock, and are
//!   never called by this crate while the core mutex is held;
//! - an item's permit and phases are dropped before [`Core::finish`] reports
//!   the item done, so a job that reports done has released everything.
//!
//! Its parts: `work_item` (what is submitted: phases, work items, the
//! context a phase runs in), `worker` (the threads that take items and run
//! their phases), `job` (job handles: close, cancel, wait) and `memory`
//! (device memory: standing reservations, held memory, pressure). This file
//! holds the configuration, the state the parts share, and the [`Scheduler`]
//! itself (start, admission of items, shut-down).

mod job;
mod memory;
#[cfg(test)]
mod test_support;
mod work_item;
mod worker;

pub use job::JobHandle;
pub use memory::{DeviceMemory, PressureHook, Reservation};
pub use work_item::{PhaseError, Phases, WorkItem, WorkerContext};
pub(crate) use worker::in_phase;

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};

use crate::core::Core;
use crate::{CancelToken, DeviceInfo, GpuSchedError, JobId, Priority, Result, SchedulerSnapshot};

use job::JobInner;
use work_item::Payload;
use worker::{drop_user_state, worker_main};

/// How many workers run on each device, and how much of each device's
/// memory is never handed out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchedulerConfig {
    /// Workers (threads) per device. Two is what keeps a GPU busy: one runs
    /// its kernel region while the other preps or finishes. Default 2.
    pub workers_per_device: usize,
    /// Bytes of each device's capacity kept back from reservations (the
    /// CUDA context, the driver, fragmentation). Default 1 GiB.
    pub memory_margin_bytes: u64,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        Self {
            workers_per_device: 2,
            memory_margin_bytes: 1 << 30,
        }
    }
}

/// A device as the scheduler sees it: a real one from [`crate::discover`],
/// or a fake with any capacity (tests, machines without a GPU).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceSpec {
    /// Driver ordinal, passed to the phases ([`WorkerContext::ordinal`]).
    pub ordinal: usize,
    /// Device memory in bytes.
    pub capacity_bytes: u64,
}

impl From<&DeviceInfo> for DeviceSpec {
    fn from(info: &DeviceInfo) -> Self {
        Self {
            ordinal: info.ordinal,
            capacity_bytes: info.total_memory_bytes,
        }
    }
}

static NEXT_SCHEDULER: AtomicU64 = AtomicU64::new(0);

struct Shared {
    /// Tells this scheduler's jobs from another's.
    id: u64,
    core: Mutex<Core<Payload>>,
    /// Every change of `core` is announced here.
    cv: Condvar,
    /// Job tokens, cancelled when the scheduler is dropped.
    tokens: Mutex<HashMap<JobId, CancelToken>>,
    /// Asked to give back held memory that is in the way
    /// ([`Scheduler::on_memory_pressure`]).
    pressure_hook: Mutex<Option<PressureHook>>,
}

impl Shared {
    // A panic never happens under the core mutex (phases run outside it),
    // so a poisoned lock still guards consistent state.
    fn lock(&self) -> MutexGuard<'_, Core<Payload>> {
        self.core.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wait<'a>(&self, guard: MutexGuard<'a, Core<Payload>>) -> MutexGuard<'a, Core<Payload>> {
        self.cv.wait(guard).unwrap_or_else(PoisonError::into_inner)
    }

    fn with_core<R>(&self, f: impl FnOnce(&mut Core<Payload>) -> R) -> R {
        let mut core = self.lock();
        let result = f(&mut core);
        self.cv.notify_all();
        result
    }

    /// Calls the pressure hook (outside the core lock) for each device
    /// whose held memory is in the way now.
    fn relieve_pressure(self: &Arc<Self>) {
        let devices = self.lock().pressured();
        if devices.is_empty() {
            return;
        }
        let hook = self
            .pressure_hook
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let Some(hook) = hook else {
            return;
        };
        for device in devices {
            hook(&DeviceMemory {
                shared: Arc::clone(self),
                device,
            });
        }
    }

    fn tokens(&self) -> MutexGuard<'_, HashMap<JobId, CancelToken>> {
        self.tokens.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn drop_removed(&self, job: JobId, removed: Vec<Payload>) {
        let count = removed.len();
        drop_user_state(removed);
        if count > 0 {
            self.with_core(|core| core.payloads_dropped(job, count));
        }
    }

    fn cancel_job(&self, job: JobId) {
        let removed = self.with_core(|core| core.cancel(job));
        self.drop_removed(job, removed);
    }
}

/// Runs work items on GPUs: see the crate documentation.
///
/// Dropping it cancels every job not yet done and waits for the phases
/// running now to return.
pub struct Scheduler {
    shared: Arc<Shared>,
    devices: Vec<DeviceSpec>,
    config: SchedulerConfig,
    threads: Vec<JoinHandle<()>>,
}

impl fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scheduler")
            .field("devices", &self.devices)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Scheduler {
    /// Starts `config.workers_per_device` workers on each device. Zero
    /// devices is allowed: submissions are then refused with
    /// [`GpuSchedError::NoDevices`].
    pub fn new(config: SchedulerConfig, devices: Vec<DeviceSpec>) -> Result<Self> {
        if config.workers_per_device == 0 {
            return Err(GpuSchedError::ZeroWorkers);
        }
        let specs: Vec<(usize, u64)> = devices
            .iter()
            .map(|d| (d.ordinal, d.capacity_bytes))
            .collect();
        let core = Core::new(
            &specs,
            config.workers_per_device,
            config.memory_margin_bytes,
        );
        let workers = core.worker_count();
        let shared = Arc::new(Shared {
            id: NEXT_SCHEDULER.fetch_add(1, Ordering::Relaxed),
            core: Mutex::new(core),
            cv: Condvar::new(),
            tokens: Mutex::new(HashMap::new()),
            pressure_hook: Mutex::new(None),
        });
        let mut scheduler = Self {
            shared,
            devices,
            config,
            threads: Vec::with_capacity(workers),
        };
        for worker in 0..workers {
            let device = worker / config.workers_per_device;
            let ordinal = scheduler.devices.get(device).map_or(device, |d| d.ordinal);
            let shared = Arc::clone(&scheduler.shared);
            let spawned = thread::Builder::new()
                .name(format!(
                    "cuzk-gpu{ordinal}-w{}",
                    worker % config.workers_per_device
                ))
                .spawn(move || worker_main(&shared, worker));
            match spawned {
                Ok(handle) => scheduler.threads.push(handle),
                // Dropping `scheduler` stops the workers already started.
                Err(error) => {
                    return Err(GpuSchedError::WorkerSpawn {
                        ordinal,
                        message: error.to_string(),
                    });
                }
            }
        }
        Ok(scheduler)
    }

    /// The devices, in the order given (index = [`WorkerContext::device_index`]).
    pub fn devices(&self) -> &[DeviceSpec] {
        &self.devices
    }

    /// The configuration.
    pub fn config(&self) -> SchedulerConfig {
        self.config
    }

    /// A new job; jobs are served FIFO within their priority class in the
    /// order they are created.
    pub fn create_job(&self, priority: Priority) -> JobHandle {
        let id = self.shared.with_core(|core| core.create_job(priority));
        let token = CancelToken::new();
        let weak = Arc::downgrade(&self.shared);
        token
            .listen(Arc::new(move || {
                if let Some(shared) = weak.upgrade() {
                    shared.cancel_job(id);
                }
            }))
            .keep();
        self.shared.tokens().insert(id, token.clone());
        JobHandle {
            inner: Arc::new(JobInner {
                shared: Arc::clone(&self.shared),
                id,
                priority,
                token,
            }),
        }
    }

    /// Queues `item`. It runs when a worker of a device with room for its
    /// memory is free and no item ahead of it could take that place.
    ///
    /// # Errors
    /// [`GpuSchedError::ItemNeverFits`] when no device can ever hold its
    /// memory, [`GpuSchedError::NoDevices`], [`GpuSchedError::JobCancelled`],
    /// [`GpuSchedError::JobClosed`], [`GpuSchedError::ForeignJob`]. A
    /// refused item is dropped, with its permit.
    pub fn submit(&self, item: WorkItem) -> Result<()> {
        if item.scheduler != self.shared.id {
            return Err(GpuSchedError::ForeignJob { job: item.job });
        }
        let WorkItem {
            job,
            partition,
            device_bytes,
            phases,
            permit,
            token,
            ..
        } = item;
        let payload = Payload {
            phases,
            permit,
            token,
        };
        let refused = self
            .shared
            .with_core(|core| core.submit(job, partition, device_bytes, payload).err());
        self.shared.relieve_pressure();
        match refused {
            None => Ok(()),
            Some((error, payload)) => {
                drop(payload);
                Err(error)
            }
        }
    }

    /// Sets what is called when memory held with [`DeviceMemory::hold`]
    /// is in the way: a device is idle (no item on it) and the first queued
    /// item that could run there does not fit beside its held memory. The
    /// hook, called outside the scheduler's lock on the thread that saw it
    /// (a worker that finished an item, or a submitter), should free what
    /// no item uses and drop or shrink its holds. Dropping the scheduler
    /// drops the hook.
    pub fn on_memory_pressure(&self, hook: PressureHook) {
        *self
            .shared
            .pressure_hook
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(hook);
    }

    /// The memory of device `index` (in [`Self::devices`] order), for
    /// standing reservations such as a resident SRS.
    pub fn device_memory(&self, index: usize) -> Result<DeviceMemory> {
        if index >= self.devices.len() {
            return Err(GpuSchedError::NoSuchDevice { index });
        }
        Ok(DeviceMemory {
            shared: Arc::clone(&self.shared),
            device: index,
        })
    }

    /// The state of queue, devices and locks now.
    pub fn snapshot(&self) -> SchedulerSnapshot {
        self.shared.lock().snapshot()
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        let removed = self.shared.with_core(Core::shut_down);
        for (job, payloads) in removed {
            self.shared.drop_removed(job, payloads);
        }
        // Running phases see their job cancelled; waits on job tokens wake.
        let tokens: Vec<CancelToken> = self.shared.tokens().values().cloned().collect();
        for token in tokens {
            token.cancel();
        }
        // The hook may own what holds memory (and so this scheduler's
        // memory handles): let it go.
        drop(
            self.shared
                .pressure_hook
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        let me = thread::current().id();
        for handle in self.threads.drain(..) {
            // A phase that owned the last reference would join itself.
            if handle.thread().id() != me && handle.join().is_err() {
                tracing::error!("a GPU worker thread panicked outside its phases");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::*;
    use super::*;
    use crate::{DispatchBound, DispatchPermit};
    use std::sync::atomic::AtomicUsize;
    use std::sync::mpsc;

    #[test]
    fn handles_cross_threads() {
        fn send_sync<T: Send + Sync>() {}
        fn send<T: Send>() {}
        send_sync::<Scheduler>();
        send_sync::<JobHandle>();
        send_sync::<DeviceMemory>();
        send_sync::<Reservation>();
        send_sync::<DispatchBound>();
        send_sync::<DispatchPermit>();
        send_sync::<CancelToken>();
        send::<WorkItem>();
    }

    #[test]
    fn dispatch_bound_keeps_at_most_bound_items_in_flight() {
        let sched = Arc::new(scheduler(&[1000], 2));
        let bound = DispatchBound::new(3).unwrap();
        let in_flight = Arc::new(AtomicUsize::new(0));
        let max_seen = Arc::new(AtomicUsize::new(0));
        let job = sched.create_job(Priority::Normal);
        // The engine's loop: a permit before each synthesis.
        for partition in 0..40 {
            let permit = bound.acquire(job.priority(), job.cancel_token()).unwrap();
            let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            max_seen.fetch_max(now, Ordering::SeqCst);
            let in_flight = in_flight.clone();
            let phases = Phases::new(
                |_| Ok(()),
                |_, ()| Ok(()),
                move |_, ()| {
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                    Ok(())
                },
            );
            sched
                .submit(WorkItem::new(&job, partition, 10, phases).with_permit(permit))
                .unwrap();
        }
        job.close();
        assert_eq!(job.wait().unwrap().completed, 40);
        assert!(max_seen.load(Ordering::SeqCst) <= 3);
        assert_eq!(bound.in_flight(), 0);
    }

    #[test]
    fn refusals_name_the_problem() {
        let sched = scheduler(&[100, 50], 2);
        let job = sched.create_job(Priority::Normal);
        let bound = DispatchBound::new(1).unwrap();
        let item = WorkItem::new(&job, 4, 101, logged(&Log::default(), None))
            .with_permit(bound.try_acquire().unwrap());
        let error = sched.submit(item).unwrap_err();
        assert_eq!(
            error,
            GpuSchedError::ItemNeverFits {
                job: job.id(),
                partition: 4,
                need_bytes: 101,
                largest_usable_bytes: 100,
            }
        );
        assert_eq!(bound.in_flight(), 0);
        assert_eq!(
            error.to_string(),
            format!(
                "{} partition 4 needs 101 bytes of device memory, but the largest device \
                 offers 100 (capacity minus margin and standing reservations)",
                job.id()
            )
        );
        job.close();
        let item = WorkItem::new(&job, 5, 1, logged(&Log::default(), None));
        assert_eq!(
            sched.submit(item),
            Err(GpuSchedError::JobClosed { job: job.id() })
        );
        let other = scheduler(&[100], 1);
        let foreign = other.create_job(Priority::Normal);
        let item = WorkItem::new(&foreign, 0, 1, logged(&Log::default(), None));
        assert!(matches!(
            sched.submit(item),
            Err(GpuSchedError::ForeignJob { .. })
        ));

        let none = scheduler(&[], 2);
        let job = none.create_job(Priority::Normal);
        let item = WorkItem::new(&job, 0, 0, logged(&Log::default(), None));
        assert_eq!(none.submit(item), Err(GpuSchedError::NoDevices));
        assert_eq!(
            Scheduler::new(
                SchedulerConfig {
                    workers_per_device: 0,
                    memory_margin_bytes: 0
                },
                vec![]
            )
            .unwrap_err(),
            GpuSchedError::ZeroWorkers
        );
        assert!(matches!(
            sched.device_memory(2),
            Err(GpuSchedError::NoSuchDevice { index: 2 })
        ));
    }

    #[test]
    fn dropping_the_scheduler_cancels_outstanding_work() {
        let sched = scheduler(&[100], 1);
        let bound = DispatchBound::new(4).unwrap();
        let job = sched.create_job(Priority::Normal);
        let (started_tx, started_rx) = mpsc::channel();
        for partition in 0..4 {
            let started = started_tx.clone();
            let phases = Phases::new(
                move |ctx| {
                    started.send(()).unwrap();
                    // Hold the worker until the job is cancelled.
                    let (tx, rx) = mpsc::channel();
                    let _listener = ctx.cancel_token().listen(Arc::new(move || {
                        let _ = tx.send(());
                    }));
                    if !ctx.is_cancelled() {
                        rx.recv().unwrap();
                    }
                    Ok(())
                },
                |_, ()| Ok(()),
                |_, ()| Ok(()),
            );
            let permit = bound.acquire(Priority::Normal, job.cancel_token()).unwrap();
            sched
                .submit(WorkItem::new(&job, partition, 10, phases).with_permit(permit))
                .unwrap();
        }
        started_rx.recv().unwrap();
        drop(sched);
        assert_eq!(
            job.wait(),
            Err(GpuSchedError::JobCancelled { job: job.id() })
        );
        assert_eq!(bound.in_flight(), 0);
        assert!(started_rx.try_recv().is_err(), "only one prep ran");
    }
}
