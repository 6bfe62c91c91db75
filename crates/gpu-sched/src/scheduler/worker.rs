//! The worker threads: each takes the item the core assigned it, runs its
//! phases (prep, the kernel region under the device lock, the epilogue),
//! catches their failures and panics, and reports the item done.

use std::any::Any;
use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;

use super::work_item::Payload;
use super::{DeviceMemory, Phases, Shared, WorkerContext};
use crate::core::{ItemEnd, ItemInfo, Stage, WorkerId};
use crate::{CancelToken, GpuSchedError, Phase, Result};

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

pub(super) fn worker_main(shared: &Arc<Shared>, me: WorkerId) {
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
pub(super) fn drop_user_state<T>(state: T) {
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

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::*;
    use crate::scheduler::{PhaseError, WorkItem};
    use crate::{DispatchBound, Priority};
    use std::fmt;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::mpsc;
    use std::thread;

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
}
