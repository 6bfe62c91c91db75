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

use std::any::Any;
use std::cell::Cell;
use std::collections::HashMap;
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::core::{Core, ItemEnd, ItemInfo, Stage, WorkerId};
use crate::{
    CancelToken, DeviceInfo, DispatchPermit, GpuSchedError, JobId, JobSummary, Phase, Priority,
    Result, SchedulerSnapshot,
};

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

/// What a phase returns on failure; the scheduler keeps its error chain as
/// text in [`GpuSchedError::PhaseFailed`]. A caller that needs its own typed
/// error back sends it out from the phase (e.g. on a channel it captured).
pub type PhaseError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// The three phases of a work item, run in order on one worker. Each hands
/// its result to the next.
pub struct Phases {
    inner: Box<dyn RunPhase>,
}

impl fmt::Debug for Phases {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Phases { .. }")
    }
}

impl Phases {
    /// `prep` runs outside the kernel lock, `kernel` inside it, `epilogue`
    /// outside it again.
    pub fn new<A, B, P, K, E>(prep: P, kernel: K, epilogue: E) -> Self
    where
        A: Send + 'static,
        B: Send + 'static,
        P: FnOnce(&WorkerContext) -> Result<A, PhaseError> + Send + 'static,
        K: FnOnce(&WorkerContext, A) -> Result<B, PhaseError> + Send + 'static,
        E: FnOnce(&WorkerContext, B) -> Result<(), PhaseError> + Send + 'static,
    {
        Self {
            inner: Box::new(Chain::Prep(prep, kernel, epilogue)),
        }
    }
}

trait RunPhase: Send {
    fn run(&mut self, phase: Phase, ctx: &WorkerContext) -> Result<(), PhaseError>;
}

enum Chain<A, B, P, K, E> {
    Prep(P, K, E),
    Kernel(A, K, E),
    Epilogue(B, E),
    Done,
}

impl<A, B, P, K, E> RunPhase for Chain<A, B, P, K, E>
where
    A: Send,
    B: Send,
    P: FnOnce(&WorkerContext) -> Result<A, PhaseError> + Send,
    K: FnOnce(&WorkerContext, A) -> Result<B, PhaseError> + Send,
    E: FnOnce(&WorkerContext, B) -> Result<(), PhaseError> + Send,
{
    fn run(&mut self, phase: Phase, ctx: &WorkerContext) -> Result<(), PhaseError> {
        match (std::mem::replace(self, Chain::Done), phase) {
            (Chain::Prep(prep, kernel, epilogue), Phase::Prep) => {
                *self = Chain::Kernel(prep(ctx)?, kernel, epilogue);
                Ok(())
            }
            (Chain::Kernel(a, kernel, epilogue), Phase::Kernel) => {
                *self = Chain::Epilogue(kernel(ctx, a)?, epilogue);
                Ok(())
            }
            (Chain::Epilogue(b, epilogue), Phase::Epilogue) => epilogue(ctx, b),
            // The worker runs the phases in order, once each.
            (_, phase) => Err(format!("{phase} run out of order").into()),
        }
    }
}

/// One partition's GPU work: its job, partition index and priority (the
/// job's), the device memory it needs while on a worker, and its phases.
#[derive(Debug)]
pub struct WorkItem {
    scheduler: u64,
    job: JobId,
    priority: Priority,
    partition: u32,
    device_bytes: u64,
    phases: Phases,
    permit: Option<DispatchPermit>,
    token: CancelToken,
}

impl WorkItem {
    /// `device_bytes` are reserved on the chosen device before prep and
    /// released after the epilogue.
    pub fn new(job: &JobHandle, partition: u32, device_bytes: u64, phases: Phases) -> Self {
        Self {
            scheduler: job.inner.shared.id,
            job: job.inner.id,
            priority: job.inner.priority,
            partition,
            device_bytes,
            phases,
            permit: None,
            token: job.inner.token.clone(),
        }
    }

    /// Holds `permit` until the item is done, failed, cancelled or refused.
    pub fn with_permit(mut self, permit: DispatchPermit) -> Self {
        self.permit = Some(permit);
        self
    }

    /// The job.
    pub fn job(&self) -> JobId {
        self.job
    }

    /// The partition index.
    pub fn partition(&self) -> u32 {
        self.partition
    }

    /// The priority class (the job's).
    pub fn priority(&self) -> Priority {
        self.priority
    }

    /// The device memory it needs.
    pub fn device_bytes(&self) -> u64 {
        self.device_bytes
    }
}

/// What the scheduler stores for an item.
struct Payload {
    phases: Phases,
    permit: Option<DispatchPermit>,
    token: CancelToken,
}

impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Payload { .. }")
    }
}

/// Where a phase runs, passed to each phase.
#[derive(Debug)]
pub struct WorkerContext {
    device_index: usize,
    ordinal: usize,
    worker: usize,
    job: JobId,
    partition: u32,
    priority: Priority,
    device_bytes: u64,
    token: CancelToken,
    memory: DeviceMemory,
}

impl WorkerContext {
    /// Driver ordinal of the device.
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// Index of the device in the scheduler's device list.
    pub fn device_index(&self) -> usize {
        self.device_index
    }

    /// The worker within its device, `0..workers_per_device`.
    pub fn worker(&self) -> usize {
        self.worker
    }

    /// The item's job.
    pub fn job(&self) -> JobId {
        self.job
    }

    /// The item's partition index.
    pub fn partition(&self) -> u32 {
        self.partition
    }

    /// The item's priority class.
    pub fn priority(&self) -> Priority {
        self.priority
    }

    /// Device memory reserved for this item.
    pub fn device_bytes(&self) -> u64 {
        self.device_bytes
    }

    /// Whether the job was cancelled; a long phase may check it and return
    /// early (the scheduler never interrupts a phase).
    pub fn is_cancelled(&self) -> bool {
        self.token.is_cancelled()
    }

    /// The job's cancellation token.
    pub fn cancel_token(&self) -> &CancelToken {
        &self.token
    }

    /// The device's memory, for `try_reserve` of extra buffers.
    pub fn device_memory(&self) -> &DeviceMemory {
        &self.memory
    }
}

thread_local! {
    static IN_PHASE: Cell<bool> = const { Cell::new(false) };
}

/// Whether this thread is inside a phase (where blocking on a permit or on
/// device memory could wait for itself).
pub(crate) fn in_phase() -> bool {
    IN_PHASE.with(Cell::get)
}

struct InPhase(bool);

impl InPhase {
    fn enter() -> Self {
        Self(IN_PHASE.with(|c| c.replace(true)))
    }
}

impl Drop for InPhase {
    fn drop(&mut self) {
        IN_PHASE.with(|c| c.set(self.0));
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

/// Called with a device's memory when held memory alone keeps the next
/// item from starting there.
pub type PressureHook = Arc<dyn Fn(&DeviceMemory) + Send + Sync>;

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

    /// Blocks until `done` holds for a snapshot; for tests that need a
    /// particular interleaving without sleeping.
    #[cfg(test)]
    fn wait_until(&self, what: &str, done: impl Fn(&SchedulerSnapshot) -> bool) {
        // Only a guard against a hung test; nothing depends on the time.
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut core = self.shared.lock();
        while !done(&core.snapshot()) {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "timed out waiting until {what}: {:?}",
                core.snapshot()
            );
            core = self
                .shared
                .cv
                .wait_timeout(core, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
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

fn worker_main(shared: &Arc<Shared>, me: WorkerId) {
    loop {
        let taken = {
            let mut core = shared.lock();
            loop {
                if let Some(taken) = core.take_payload(me) {
                    break Some(taken);
                }
                if core.is_shut_down() && core.stage(me) == Stage::Idle {
                    break None;
                }
                core = shared.wait(core);
            }
        };
        let Some((info, payload)) = taken else {
            return;
        };
        let job = info.key.job;
        let (end, token) = run_item(shared, me, info, payload);
        let failed = matches!(end, ItemEnd::Failed(_));
        let removed = shared.with_core(|core| core.finish(me, end));
        shared.relieve_pressure();
        if failed {
            // The job's other running items see it at their next boundary.
            token.cancel();
        }
        shared.drop_removed(job, removed);
    }
}

/// Runs the phases, then drops the item's phases and permit; returns how it
/// ended and the job's token.
fn run_item(
    shared: &Arc<Shared>,
    me: WorkerId,
    info: ItemInfo,
    payload: Payload,
) -> (ItemEnd, CancelToken) {
    let Payload {
        mut phases,
        permit,
        token,
    } = payload;
    let ordinal = shared.lock().ordinal(info.device);
    let ctx = WorkerContext {
        device_index: info.device,
        ordinal,
        worker: info.worker_in_device,
        job: info.key.job,
        partition: info.key.partition,
        priority: info.key.priority,
        device_bytes: info.device_bytes,
        token: token.clone(),
        memory: DeviceMemory {
            shared: Arc::clone(shared),
            device: info.device,
        },
    };
    let end = run_phases(shared, me, &ctx, &mut phases);
    drop_user_state((phases, permit));
    (end, token)
}

/// Drops what a work item owns: its phases' captured state runs user code,
/// whose panic must not take a worker (and the item's bookkeeping) down.
fn drop_user_state<T>(state: T) {
    if let Err(panic) = panic::catch_unwind(AssertUnwindSafe(move || drop(state))) {
        tracing::error!("dropping a work item panicked: {}", panic_message(&*panic));
    }
}

fn run_phases(shared: &Shared, me: WorkerId, ctx: &WorkerContext, phases: &mut Phases) -> ItemEnd {
    let cancelled = || ctx.is_cancelled() || shared.lock().is_cancelled(ctx.job);
    if cancelled() {
        return ItemEnd::Cancelled;
    }
    if let Err(error) = run_phase(phases, Phase::Prep, ctx) {
        return ItemEnd::Failed(error);
    }
    {
        let _span = tracing::debug_span!(
            "kernel_lock_wait",
            job = ctx.job.0,
            partition = ctx.partition,
            gpu = ctx.ordinal
        )
        .entered();
        let mut core = shared.lock();
        core.request_kernel(me);
        shared.cv.notify_all();
        loop {
            // `finish` withdraws a cancelled waiter (or releases the lock).
            if ctx.is_cancelled() || core.is_cancelled(ctx.job) {
                return ItemEnd::Cancelled;
            }
            if core.holds_kernel(me) {
                break;
            }
            core = shared.wait(core);
        }
    }
    let kernel = run_phase(phases, Phase::Kernel, ctx);
    shared.with_core(|core| core.kernel_done(me));
    if let Err(error) = kernel {
        return ItemEnd::Failed(error);
    }
    if cancelled() {
        return ItemEnd::Cancelled;
    }
    match run_phase(phases, Phase::Epilogue, ctx) {
        Ok(()) => ItemEnd::Completed,
        Err(error) => ItemEnd::Failed(error),
    }
}

fn run_phase(phases: &mut Phases, phase: Phase, ctx: &WorkerContext) -> Result<()> {
    let _span = tracing::debug_span!(
        "gpu_phase",
        %phase,
        job = ctx.job.0,
        partition = ctx.partition,
        gpu = ctx.ordinal,
        worker = ctx.worker
    )
    .entered();
    let _in_phase = InPhase::enter();
    match panic::catch_unwind(AssertUnwindSafe(|| phases.inner.run(phase, ctx))) {
        Ok(Ok(())) => Ok(()),
        Ok(Err(error)) => Err(GpuSchedError::PhaseFailed {
            job: ctx.job,
            partition: ctx.partition,
            phase,
            message: error_chain(&*error),
        }),
        Err(panic) => Err(GpuSchedError::PhasePanicked {
            job: ctx.job,
            partition: ctx.partition,
            phase,
            message: panic_message(&*panic),
        }),
    }
}

fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn panic_message(panic: &(dyn Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

/// A job: a group of work items with one priority, cancelled together and
/// awaited together. Clones share the job; when the last is dropped the job
/// is closed (its items still run).
#[derive(Clone)]
pub struct JobHandle {
    inner: Arc<JobInner>,
}

struct JobInner {
    shared: Arc<Shared>,
    id: JobId,
    priority: Priority,
    token: CancelToken,
}

impl Drop for JobInner {
    fn drop(&mut self) {
        self.shared.tokens().remove(&self.id);
        self.shared.with_core(|core| core.handle_dropped(self.id));
    }
}

impl fmt::Debug for JobHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobHandle")
            .field("id", &self.inner.id)
            .field("priority", &self.inner.priority)
            .field("cancelled", &self.inner.token.is_cancelled())
            .finish()
    }
}

impl JobHandle {
    /// The job's id.
    pub fn id(&self) -> JobId {
        self.inner.id
    }

    /// The job's priority class.
    pub fn priority(&self) -> Priority {
        self.inner.priority
    }

    /// The job's token: cancelling it cancels the job, and waits given it
    /// (a dispatch permit, device memory) return early.
    pub fn cancel_token(&self) -> &CancelToken {
        &self.inner.token
    }

    /// Cancels the job: queued items are dropped (with their permits) at
    /// once; items on workers stop at their next phase boundary (a running
    /// phase, kernel region included, is never interrupted) and their
    /// memory and permits are released.
    pub fn cancel(&self) {
        self.inner.token.cancel();
        self.inner.shared.cancel_job(self.inner.id);
    }

    /// No more items will be submitted; [`Self::wait`] returns once the
    /// submitted ones are done.
    pub fn close(&self) {
        self.inner
            .shared
            .with_core(|core| core.close(self.inner.id));
    }

    /// Waits until the job is closed (or cancelled) and all its items are
    /// done and released.
    ///
    /// # Errors
    /// The first phase failure ([`GpuSchedError::PhaseFailed`] or
    /// [`GpuSchedError::PhasePanicked`]), which cancels the rest of the job;
    /// [`GpuSchedError::JobCancelled`] if it was cancelled;
    /// [`GpuSchedError::BlockingInPhase`] inside a phase (a job waiting for
    /// itself never ends; use [`Self::wait_timeout`] there if you must).
    pub fn wait(&self) -> Result<JobSummary> {
        if in_phase() {
            return Err(GpuSchedError::BlockingInPhase {
                call: "JobHandle::wait",
            });
        }
        let mut core = self.inner.shared.lock();
        loop {
            if let Some(outcome) = core.job_outcome(self.inner.id) {
                return outcome;
            }
            core = self.inner.shared.wait(core);
        }
    }

    /// [`Self::wait`] for at most `timeout`; `None` if the job is not done.
    pub fn wait_timeout(&self, timeout: Duration) -> Option<Result<JobSummary>> {
        let deadline = Instant::now() + timeout;
        let mut core = self.inner.shared.lock();
        loop {
            if let Some(outcome) = core.job_outcome(self.inner.id) {
                return Some(outcome);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            core = self
                .inner
                .shared
                .cv
                .wait_timeout(core, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

/// One device's memory, shared by the scheduler's items and standing
/// reservations. Work items reserve their declared need when a worker takes
/// them; standing reservations (a resident SRS, a cache) are taken here and
/// are served before any new item starts on the device.
#[derive(Clone)]
pub struct DeviceMemory {
    shared: Arc<Shared>,
    device: usize,
}

impl fmt::Debug for DeviceMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceMemory")
            .field("device", &self.device)
            .finish_non_exhaustive()
    }
}

impl DeviceMemory {
    fn ledger<R>(&self, f: impl FnOnce(&crate::core::MemoryLedger) -> R) -> Option<R> {
        self.shared.lock().ledger(self.device).map(f)
    }

    /// Driver ordinal of the device.
    pub fn ordinal(&self) -> usize {
        self.shared.lock().ordinal(self.device)
    }

    /// Total capacity in bytes.
    pub fn capacity_bytes(&self) -> u64 {
        self.ledger(|l| l.capacity).unwrap_or(0)
    }

    /// Capacity minus the margin: what reservations may add up to.
    pub fn usable_bytes(&self) -> u64 {
        self.ledger(|l| l.usable).unwrap_or(0)
    }

    /// Bytes reserved now, by items and standing reservations.
    pub fn reserved_bytes(&self) -> u64 {
        self.ledger(crate::core::MemoryLedger::reserved)
            .unwrap_or(0)
    }

    /// Reserves `bytes` if they fit now; `Ok(None)` if they fit only later.
    ///
    /// # Errors
    /// [`GpuSchedError::ReservationNeverFits`] when they never can.
    pub fn try_reserve(&self, bytes: u64) -> Result<Option<Reservation>> {
        let reserved = self
            .shared
            .with_core(|core| core.try_reserve_standing(self.device, bytes))?;
        Ok(reserved.then(|| self.reservation(bytes)))
    }

    /// Reserves `bytes`, waiting until they fit; while it waits no new item
    /// starts on this device.
    ///
    /// # Errors
    /// [`GpuSchedError::ReservationNeverFits`] when they never can,
    /// [`GpuSchedError::Cancelled`] when `cancel` is cancelled first,
    /// [`GpuSchedError::BlockingInPhase`] inside a phase (use
    /// [`Self::try_reserve`] there, or declare the need in the item).
    pub fn reserve(&self, bytes: u64, cancel: &CancelToken) -> Result<Reservation> {
        if in_phase() {
            return Err(GpuSchedError::BlockingInPhase {
                call: "DeviceMemory::reserve",
            });
        }
        let weak = Arc::downgrade(&self.shared);
        let _listener = cancel.listen(Arc::new(move || {
            if let Some(shared) = weak.upgrade() {
                let _core = shared.lock();
                shared.cv.notify_all();
            }
        }));
        let mut core = self.shared.lock();
        if cancel.is_cancelled() {
            return Err(GpuSchedError::Cancelled {
                waiting_for: "device memory",
            });
        }
        if core.try_reserve_standing(self.device, bytes)? {
            self.shared.cv.notify_all();
            return Ok(self.reservation(bytes));
        }
        core.add_memory_waiter(self.device);
        self.shared.cv.notify_all();
        // Held memory in the way of this reservation on an idle device is
        // asked back now (later, by the worker that finishes an item).
        drop(core);
        self.shared.relieve_pressure();
        core = self.shared.lock();
        // Checked before each wait: a cancellation or a release while the
        // lock was let go above is not missed.
        let outcome = loop {
            if cancel.is_cancelled() {
                break Err(GpuSchedError::Cancelled {
                    waiting_for: "device memory",
                });
            }
            match core.try_reserve_standing(self.device, bytes) {
                Ok(true) => break Ok(()),
                Ok(false) => {}
                Err(error) => break Err(error),
            }
            core = self.shared.wait(core);
        };
        // Items held back for this wait may start now.
        core.remove_memory_waiter(self.device);
        self.shared.cv.notify_all();
        drop(core);
        outcome.map(|()| self.reservation(bytes))
    }

    /// Records `bytes` that are already allocated on the device and kept
    /// across items (say, a parameter set a backend made resident inside a
    /// kernel region): never waits and never refuses, even past the usable
    /// bytes (the memory is in use whatever the ledger says), so it may be
    /// called inside a phase. Unlike a standing reservation, held memory is
    /// given back on request: items that do not fit beside it wait (none is
    /// refused for it), and when it alone keeps one from starting on an
    /// idle device the [`Scheduler::on_memory_pressure`] hook is called.
    ///
    /// # Errors
    /// [`GpuSchedError::NoSuchDevice`] only.
    pub fn hold(&self, bytes: u64) -> Result<Reservation> {
        self.shared
            .with_core(|core| core.add_held(self.device, bytes))?;
        let mut r = self.reservation(bytes);
        r.held = true;
        Ok(r)
    }

    fn reservation(&self, bytes: u64) -> Reservation {
        Reservation {
            shared: Arc::clone(&self.shared),
            device: self.device,
            bytes,
            held: false,
        }
    }
}

/// Device memory held until dropped.
pub struct Reservation {
    shared: Arc<Shared>,
    device: usize,
    bytes: u64,
    /// From [`DeviceMemory::hold`].
    held: bool,
}

impl fmt::Debug for Reservation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reservation")
            .field("device", &self.device)
            .field("bytes", &self.bytes)
            .finish()
    }
}

impl Reservation {
    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let (device, bytes) = (self.device, self.bytes);
        if self.held {
            self.shared
                .with_core(|core| core.release_held(device, bytes));
        } else {
            self.shared
                .with_core(|core| core.release_standing(device, bytes));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DispatchBound;
    use std::sync::atomic::{AtomicBool, AtomicUsize};
    use std::sync::mpsc;

    type Log = Arc<Mutex<Vec<(JobId, u32, Phase, usize, usize)>>>;

    fn scheduler(capacities: &[u64], workers: usize) -> Scheduler {
        let devices = capacities
            .iter()
            .enumerate()
            .map(|(ordinal, &capacity_bytes)| DeviceSpec {
                ordinal,
                capacity_bytes,
            })
            .collect();
        let config = SchedulerConfig {
            workers_per_device: workers,
            memory_margin_bytes: 0,
        };
        Scheduler::new(config, devices).unwrap()
    }

    /// A latch: `wait` blocks until `open`.
    #[derive(Default)]
    struct Gate {
        open: Mutex<bool>,
        cv: Condvar,
    }

    impl Gate {
        fn open(&self) {
            *self.open.lock().unwrap_or_else(PoisonError::into_inner) = true;
            self.cv.notify_all();
        }

        /// Opens the gate when dropped, so that a failing test does not hang
        /// the scheduler's drop on a phase still waiting here.
        fn guard(self: &Arc<Self>) -> OpenOnDrop {
            OpenOnDrop(Arc::clone(self))
        }

        fn wait(&self) {
            let mut open = self.open.lock().unwrap();
            while !*open {
                open = self.cv.wait(open).unwrap();
            }
        }
    }

    struct OpenOnDrop(Arc<Gate>);

    impl Drop for OpenOnDrop {
        fn drop(&mut self) {
            self.0.open();
        }
    }

    fn record(log: &Log, ctx: &WorkerContext, phase: Phase) {
        log.lock().unwrap().push((
            ctx.job(),
            ctx.partition(),
            phase,
            ctx.device_index(),
            ctx.worker(),
        ));
    }

    /// Phases that log themselves; the kernel region waits for `gate`.
    fn logged(log: &Log, gate: Option<Arc<Gate>>) -> Phases {
        let (l1, l2, l3) = (log.clone(), log.clone(), log.clone());
        Phases::new(
            move |ctx| {
                record(&l1, ctx, Phase::Prep);
                Ok(())
            },
            move |ctx, ()| {
                record(&l2, ctx, Phase::Kernel);
                if let Some(gate) = gate {
                    gate.wait();
                }
                Ok(())
            },
            move |ctx, ()| {
                record(&l3, ctx, Phase::Epilogue);
                Ok(())
            },
        )
    }

    fn kernels(log: &Log) -> Vec<(JobId, u32)> {
        log.lock()
            .unwrap()
            .iter()
            .filter(|e| e.2 == Phase::Kernel)
            .map(|e| (e.0, e.1))
            .collect()
    }

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
    fn phases_run_in_order_on_one_worker_and_kernels_never_overlap() {
        let sched = scheduler(&[1000, 1000], 2);
        let job = sched.create_job(Priority::Normal);
        let in_kernel: Arc<[AtomicUsize; 2]> = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
        let overlap = Arc::new(AtomicBool::new(false));
        let log: Log = Arc::default();
        for partition in 0..16 {
            let (l1, l2, l3) = (log.clone(), log.clone(), log.clone());
            let (in_kernel, overlap) = (in_kernel.clone(), overlap.clone());
            let phases = Phases::new(
                move |ctx| {
                    record(&l1, ctx, Phase::Prep);
                    Ok(thread::current().id())
                },
                move |ctx, thread_id| {
                    let counter = &in_kernel[ctx.device_index()];
                    if counter.fetch_add(1, Ordering::SeqCst) != 0 {
                        overlap.store(true, Ordering::SeqCst);
                    }
                    record(&l2, ctx, Phase::Kernel);
                    thread::yield_now();
                    counter.fetch_sub(1, Ordering::SeqCst);
                    Ok(thread_id)
                },
                move |ctx, thread_id| {
                    assert_eq!(thread::current().id(), thread_id);
                    record(&l3, ctx, Phase::Epilogue);
                    Ok(())
                },
            );
            sched
                .submit(WorkItem::new(&job, partition, 300, phases))
                .unwrap();
        }
        job.close();
        assert_eq!(job.wait().unwrap().completed, 16);
        assert!(
            !overlap.load(Ordering::SeqCst),
            "two kernel regions overlapped"
        );
        let log = log.lock().unwrap();
        for partition in 0..16 {
            let entries: Vec<_> = log.iter().filter(|e| e.1 == partition).collect();
            let phases: Vec<Phase> = entries.iter().map(|e| e.2).collect();
            assert_eq!(phases, [Phase::Prep, Phase::Kernel, Phase::Epilogue]);
            assert!(
                entries
                    .iter()
                    .all(|e| (e.3, e.4) == (entries[0].3, entries[0].4))
            );
        }
        drop(job);
        let snap = sched.snapshot();
        assert_eq!(snap.live_jobs, 0);
        assert!(
            snap.devices
                .iter()
                .all(|d| d.item_bytes == 0 && d.busy_workers == 0)
        );
    }

    #[test]
    fn higher_priority_overtakes_at_partition_granularity() {
        let sched = scheduler(&[1000], 2);
        let log: Log = Arc::default();
        let gate = Arc::new(Gate::default());
        let _open = gate.guard();
        let normal = sched.create_job(Priority::Normal);
        let n = normal.id();
        // Partition 0 in its kernel region first (submitted together, 1 could
        // overtake 0 in prep: FIFO holds among waiters), then 1 prepped and
        // waiting for the lock.
        sched
            .submit(WorkItem::new(
                &normal,
                0,
                100,
                logged(&log, Some(gate.clone())),
            ))
            .unwrap();
        sched.wait_until("n0 runs", |s| s.devices[0].kernel == Some((n, 0)));
        for partition in 1..6 {
            sched
                .submit(WorkItem::new(&normal, partition, 100, logged(&log, None)))
                .unwrap();
        }
        normal.close();
        sched.wait_until("n1 waits", |s| s.devices[0].waiting_for_kernel == [(n, 1)]);
        let critical = sched.create_job(Priority::Critical);
        for partition in 0..2 {
            sched
                .submit(WorkItem::new(&critical, partition, 100, logged(&log, None)))
                .unwrap();
        }
        critical.close();
        gate.open();
        critical.wait().unwrap();
        normal.wait().unwrap();
        let c = critical.id();
        let order = kernels(&log);
        // n0 was running and n1 already taken by a worker when the critical
        // job came; nothing else of the normal job ran before it. (Within a
        // class, order is FIFO among items waiting for the lock; which of c0
        // and c1 finishes prep first is up to the threads.)
        assert_eq!(order[..2], [(n, 0), (n, 1)], "{order:?}");
        let mut critical_next = order[2..4].to_vec();
        critical_next.sort();
        assert_eq!(critical_next, [(c, 0), (c, 1)], "{order:?}");
        let mut rest = order[4..].to_vec();
        rest.sort();
        assert_eq!(rest, [(n, 2), (n, 3), (n, 4), (n, 5)]);
    }

    #[test]
    fn cancellation_releases_permits_and_reservations() {
        let sched = scheduler(&[100], 2);
        let bound = DispatchBound::new(5).unwrap();
        let log: Log = Arc::default();
        let gate = Arc::new(Gate::default());
        let saw_cancel = Arc::new(AtomicBool::new(false));
        let _open = gate.guard();
        let job = sched.create_job(Priority::Normal);
        let j = job.id();
        for partition in 0..5 {
            if partition == 1 {
                sched.wait_until("p0 runs", |s| s.devices[0].kernel == Some((j, 0)));
            }
            let permit = bound.acquire(Priority::Normal, job.cancel_token()).unwrap();
            let phases = if partition == 0 {
                let (gate, saw_cancel, l) = (gate.clone(), saw_cancel.clone(), log.clone());
                Phases::new(
                    |_| Ok(()),
                    move |ctx, ()| {
                        record(&l, ctx, Phase::Kernel);
                        gate.wait();
                        saw_cancel.store(ctx.is_cancelled(), Ordering::SeqCst);
                        Ok(())
                    },
                    |_, ()| panic!("the epilogue of a cancelled job ran"),
                )
            } else {
                logged(&log, None)
            };
            sched
                .submit(WorkItem::new(&job, partition, 30, phases).with_permit(permit))
                .unwrap();
        }
        sched.wait_until("p1 waits", |s| s.devices[0].waiting_for_kernel == [(j, 1)]);
        assert_eq!(bound.in_flight(), 5);
        let snap = sched.snapshot();
        assert_eq!((snap.queued, snap.devices[0].item_bytes), (3, 60));

        job.cancel();
        // Queued items are dropped by `cancel` itself, the waiting one by
        // its worker.
        sched.wait_until("only p0 is left", |s| {
            s.queued == 0 && s.devices[0].busy_workers == 1 && s.devices[0].item_bytes == 30
        });
        assert_eq!(bound.in_flight(), 1);
        gate.open();
        assert_eq!(job.wait(), Err(GpuSchedError::JobCancelled { job: j }));
        assert!(saw_cancel.load(Ordering::SeqCst));
        assert_eq!(bound.in_flight(), 0);
        let snap = sched.snapshot();
        assert_eq!(snap.devices[0].item_bytes, 0);
        assert_eq!(snap.devices[0].busy_workers, 0);
        assert_eq!(snap.devices[0].kernel, None);
        assert_eq!(kernels(&log), [(j, 0)]);

        // A refused submission drops its permit too.
        let permit = bound.try_acquire().unwrap();
        let item = WorkItem::new(&job, 9, 1, logged(&log, None)).with_permit(permit);
        assert_eq!(
            sched.submit(item),
            Err(GpuSchedError::JobCancelled { job: j })
        );
        assert_eq!(bound.in_flight(), 0);
        drop(job);
        assert_eq!(sched.snapshot().live_jobs, 0);
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

    #[derive(Debug)]
    struct DiskOnFire;

    impl fmt::Display for DiskOnFire {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("disk on fire")
        }
    }

    impl std::error::Error for DiskOnFire {}

    #[test]
    fn a_failed_phase_fails_the_job_and_a_panic_spares_the_worker() {
        let sched = scheduler(&[1000], 1);
        let job = sched.create_job(Priority::Normal);
        // Partition 0 fails only once partition 1 is queued: a failure
        // cancels the job, and a submit after it would be refused.
        let (queued, wait_queued) = mpsc::channel::<()>();
        let phases = Phases::new(
            move |_| {
                wait_queued.recv().unwrap();
                Err::<(), _>(DiskOnFire.into())
            },
            |_, ()| Ok(()),
            |_, ()| Ok(()),
        );
        sched.submit(WorkItem::new(&job, 0, 10, phases)).unwrap();
        let log: Log = Arc::default();
        sched
            .submit(WorkItem::new(&job, 1, 10, logged(&log, None)))
            .unwrap();
        queued.send(()).unwrap();
        job.close();
        let failure = GpuSchedError::PhaseFailed {
            job: job.id(),
            partition: 0,
            phase: Phase::Prep,
            message: "disk on fire".into(),
        };
        assert_eq!(job.wait(), Err(failure));
        assert!(job.cancel_token().is_cancelled());
        // Partition 1 was queued behind partition 0 on the only worker.
        assert!(kernels(&log).is_empty());

        let job = sched.create_job(Priority::High);
        let phases = Phases::new(
            |_| Ok(()),
            |_, ()| -> Result<(), PhaseError> { panic!("kernel launch went wrong") },
            |_, ()| Ok(()),
        );
        sched.submit(WorkItem::new(&job, 0, 10, phases)).unwrap();
        job.close();
        assert_eq!(
            job.wait(),
            Err(GpuSchedError::PhasePanicked {
                job: job.id(),
                partition: 0,
                phase: Phase::Kernel,
                message: "kernel launch went wrong".into(),
            })
        );
        // The worker and the kernel lock survived.
        let job = sched.create_job(Priority::Normal);
        sched
            .submit(WorkItem::new(&job, 0, 10, logged(&log, None)))
            .unwrap();
        job.close();
        assert_eq!(job.wait().unwrap().completed, 1);
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

    /// Phases whose kernel region waits for `gate`.
    fn gated(gate: &Arc<Gate>) -> Phases {
        let gate = Arc::clone(gate);
        Phases::new(
            |_| Ok(()),
            move |_, ()| {
                gate.wait();
                Ok(())
            },
            |_, ()| Ok(()),
        )
    }

    #[test]
    fn standing_reservations_wait_cancel_and_refuse() {
        let sched = scheduler(&[100], 2);
        let memory = sched.device_memory(0).unwrap();
        let (gate, gate2) = (Arc::new(Gate::default()), Arc::new(Gate::default()));
        let (_open, _open2) = (gate.guard(), gate2.guard());
        let job = sched.create_job(Priority::Normal);
        let j = job.id();
        sched
            .submit(WorkItem::new(&job, 0, 60, gated(&gate)))
            .unwrap();
        sched.wait_until("p0 runs", |s| s.devices[0].kernel == Some((j, 0)));
        assert!(memory.try_reserve(50).unwrap().is_none());

        let waiter = {
            let memory = memory.clone();
            thread::spawn(move || memory.reserve(50, &CancelToken::new()))
        };
        sched.wait_until("a memory waiter", |s| s.devices[0].memory_waiters == 1);
        // While it waits, no new item starts on the device, though one fits.
        sched
            .submit(WorkItem::new(&job, 1, 10, gated(&gate2)))
            .unwrap();
        assert_eq!(sched.snapshot().queued, 1);
        gate.open();
        let standing = waiter.join().unwrap().unwrap();
        assert_eq!(standing.bytes(), 50);
        sched.wait_until("p1 runs", |s| s.devices[0].kernel == Some((j, 1)));
        assert_eq!(memory.reserved_bytes(), 60);

        // Standing reservations are long-lived: one that cannot fit beside
        // them is refused; one that waits for items can be cancelled.
        assert_eq!(
            memory.reserve(51, &CancelToken::new()).unwrap_err(),
            GpuSchedError::ReservationNeverFits {
                ordinal: 0,
                need_bytes: 51,
                usable_bytes: 50,
            }
        );
        let token = CancelToken::new();
        let waiter = {
            let (memory, token) = (memory.clone(), token.clone());
            thread::spawn(move || memory.reserve(45, &token))
        };
        sched.wait_until("a memory waiter", |s| s.devices[0].memory_waiters == 1);
        token.cancel();
        assert_eq!(
            waiter.join().unwrap().unwrap_err(),
            GpuSchedError::Cancelled {
                waiting_for: "device memory"
            }
        );
        assert_eq!(sched.snapshot().devices[0].memory_waiters, 0);
        gate2.open();
        job.close();
        assert_eq!(job.wait().unwrap().completed, 2);
        drop(standing);
        assert_eq!(memory.reserved_bytes(), 0);
        assert_eq!((memory.capacity_bytes(), memory.usable_bytes()), (100, 100));
    }

    /// Memory already allocated is held at once, past what fits, from
    /// inside a phase; a queued item that does not fit beside it waits, and
    /// once the device is idle the pressure hook is asked to give it back,
    /// after which the item runs. An item that fits only without the held
    /// memory is not refused.
    #[test]
    fn held_memory_counts_at_once_and_is_given_back_under_pressure() {
        let sched = scheduler(&[100], 2);
        let memory = sched.device_memory(0).unwrap();
        let job = sched.create_job(Priority::Normal);
        let j = job.id();
        let (gate, gate2) = (Arc::new(Gate::default()), Arc::new(Gate::default()));
        let (_open, _open2) = (gate.guard(), gate2.guard());
        // What the hook gives back, and how often it was asked.
        let slot: Arc<Mutex<Option<Reservation>>> = Arc::default();
        let asked = Arc::new(AtomicUsize::new(0));
        {
            let (slot, asked) = (slot.clone(), asked.clone());
            sched.on_memory_pressure(Arc::new(move |m: &DeviceMemory| {
                assert_eq!(m.ordinal(), 0);
                asked.fetch_add(1, Ordering::SeqCst);
                drop(slot.lock().unwrap().take());
            }));
        }
        // Inside its kernel region p0 holds 70 bytes it allocated (60 of
        // its own reserved already: 130 in all, past the 100).
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let (held_tx, held_rx) = mpsc::channel();
        let phases = {
            let (gate, memory, slot) = (gate.clone(), memory.clone(), slot.clone());
            Phases::new(
                |_| Ok(()),
                move |_, ()| {
                    go_rx.recv().unwrap();
                    let held = memory.hold(70).unwrap();
                    held_tx.send(held.bytes()).unwrap();
                    *slot.lock().unwrap() = Some(held);
                    gate.wait();
                    Ok(())
                },
                |_, ()| Ok(()),
            )
        };
        sched.submit(WorkItem::new(&job, 0, 60, phases)).unwrap();
        sched.wait_until("p0 runs", |s| s.devices[0].kernel == Some((j, 0)));
        // p1 does not fit beside p0 (40 free): queued.
        sched
            .submit(WorkItem::new(&job, 1, 41, gated(&gate2)))
            .unwrap();
        go_tx.send(()).unwrap();
        assert_eq!(held_rx.recv().unwrap(), 70);
        assert_eq!(memory.reserved_bytes(), 130);
        assert_eq!(sched.snapshot().devices[0].held_bytes, 70);
        // 90 bytes fit the device only without the held 70: not refused.
        sched
            .submit(WorkItem::new(&job, 2, 90, gated(&gate2)))
            .unwrap();
        assert_eq!(asked.load(Ordering::SeqCst), 0, "p0 still runs");
        gate.open();
        // p0 done: the device is idle, p1 waits for the held bytes only, so
        // the hook gives them back and p1 runs.
        sched.wait_until("p1 runs", |s| s.devices[0].kernel == Some((j, 1)));
        assert_eq!(asked.load(Ordering::SeqCst), 1);
        assert_eq!(sched.snapshot().devices[0].held_bytes, 0);
        gate2.open();
        job.close();
        assert_eq!(job.wait().unwrap().completed, 3);
        assert_eq!(memory.reserved_bytes(), 0);
        assert_eq!(memory.hold(0).unwrap().bytes(), 0);
    }

    /// A standing reservation that does not fit beside held memory on an
    /// idle device asks for it back instead of waiting forever.
    #[test]
    fn a_reservation_in_the_way_of_held_memory_asks_for_it_back() {
        let sched = scheduler(&[100], 2);
        let memory = sched.device_memory(0).unwrap();
        let slot: Arc<Mutex<Option<Reservation>>> = Arc::default();
        {
            let slot = slot.clone();
            sched.on_memory_pressure(Arc::new(move |_: &DeviceMemory| {
                drop(slot.lock().unwrap().take());
            }));
        }
        *slot.lock().unwrap() = Some(memory.hold(80).unwrap());
        // 30 fit only without the held 80: the hook gives them back.
        let standing = memory.reserve(30, &CancelToken::new()).unwrap();
        assert_eq!(standing.bytes(), 30);
        assert_eq!(sched.snapshot().devices[0].held_bytes, 0);
        assert_eq!(memory.reserved_bytes(), 30);
    }

    #[test]
    fn blocking_calls_inside_a_phase_are_refused() {
        let sched = scheduler(&[100], 1);
        let bound = DispatchBound::new(1).unwrap();
        let job = sched.create_job(Priority::Normal);
        let (tx, rx) = mpsc::channel();
        let same_job = job.clone();
        let phases = Phases::new(
            move |ctx| {
                let blocked = ctx.device_memory().reserve(1, ctx.cancel_token()).err();
                let acquire = bound.acquire(Priority::Normal, ctx.cancel_token()).err();
                let extra = ctx
                    .device_memory()
                    .try_reserve(20)
                    .map(|r| r.map(|r| r.bytes()));
                let wait = same_job.wait().err();
                tx.send((blocked, acquire, wait, extra, ctx.device_bytes()))
                    .unwrap();
                Ok(())
            },
            |_, ()| Ok(()),
            |_, ()| Ok(()),
        );
        sched.submit(WorkItem::new(&job, 0, 80, phases)).unwrap();
        let (blocked, acquire, wait, extra, own) = rx.recv().unwrap();
        assert_eq!(
            wait,
            Some(GpuSchedError::BlockingInPhase {
                call: "JobHandle::wait"
            })
        );
        assert_eq!(
            blocked,
            Some(GpuSchedError::BlockingInPhase {
                call: "DeviceMemory::reserve"
            })
        );
        assert_eq!(
            acquire,
            Some(GpuSchedError::BlockingInPhase {
                call: "DispatchBound::acquire"
            })
        );
        // 80 reserved for the item: 20 more fit exactly.
        assert_eq!((extra, own), (Ok(Some(20)), 80));
        job.close();
        job.wait().unwrap();
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
