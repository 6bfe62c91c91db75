//! Job bookkeeping: creating, closing and cancelling jobs, counting their
//! items, and each job's outcome.

use super::{Core, ItemKey};
use crate::{GpuSchedError, JobId, Priority, Result};

/// How a job ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobSummary {
    /// The job.
    pub job: JobId,
    /// Items that ran all three phases.
    pub completed: usize,
}

#[derive(Debug)]
pub(super) struct JobState {
    pub(super) priority: Priority,
    pub(super) queued: usize,
    pub(super) running: usize,
    /// Items removed from the queue whose payloads the driver has not yet
    /// reported dropped: the job is not done before their permits are gone.
    pub(super) pending_drops: usize,
    pub(super) completed: usize,
    pub(super) closed: bool,
    pub(super) cancelled: bool,
    pub(super) failure: Option<GpuSchedError>,
    /// Live handles; the job's state is forgotten once none is left and it
    /// is done.
    pub(super) handles: usize,
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

impl<P> Core<P> {
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

    pub(super) fn forget_if_done(&mut self, job: JobId) {
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
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::*;
    use crate::core::ItemEnd;

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
}
