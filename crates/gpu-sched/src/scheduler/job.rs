//! Job handles: a group of work items with one priority, closed, cancelled
//! and awaited together.

use std::fmt;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use super::{Shared, in_phase};
use crate::{CancelToken, GpuSchedError, JobId, JobSummary, Priority, Result};

/// A job: a group of work items with one priority, cancelled together and
/// awaited together. Clones share the job; when the last is dropped the job
/// is closed (its items still run).
#[derive(Clone)]
pub struct JobHandle {
    pub(super) inner: Arc<JobInner>,
}

pub(super) struct JobInner {
    pub(super) shared: Arc<Shared>,
    pub(super) id: JobId,
    pub(super) priority: Priority,
    pub(super) token: CancelToken,
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

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::*;
    use crate::scheduler::{Phases, WorkItem};
    use crate::{DispatchBound, Phase};
    use std::sync::atomic::{AtomicBool, Ordering};

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
}
