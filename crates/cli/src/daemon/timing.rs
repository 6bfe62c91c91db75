//! Where each job's time goes, gathered from the engine's timeline as its
//! spans end: the wait before its first stage, its parameter load, its
//! partitions' witnesses and kernel regions, and the devices they ran on.
//! `GetStatus`, `Status`, `AwaitProof` and the job's reply report it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use cuzk_engine::timeline::{KERNEL_REGION, Lane, PARAMS_LOAD, Span, WITNESS};

use crate::proto;

/// No device yet.
const NONE: u64 = u64::MAX;

/// One job's time, in timeline microseconds.
#[derive(Debug)]
pub struct Timing {
    /// When the daemon began tracking it (just after its submission).
    submitted_us: AtomicU64,
    first_start_us: AtomicU64,
    params_load_us: AtomicU64,
    synthesis_us: AtomicU64,
    gpu_us: AtomicU64,
    /// Devices its partitions ran on, one bit each (ordinals below 64).
    devices: AtomicU64,
    /// The device of its latest span there.
    last_device: AtomicU64,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            submitted_us: AtomicU64::new(NONE),
            first_start_us: AtomicU64::new(NONE),
            params_load_us: AtomicU64::new(0),
            synthesis_us: AtomicU64::new(0),
            gpu_us: AtomicU64::new(0),
            devices: AtomicU64::new(0),
            last_device: AtomicU64::new(NONE),
        }
    }
}

fn ms(us: u64) -> u64 {
    us.div_ceil(1000)
}

impl Timing {
    /// Counts one of the job's spans.
    pub fn observe(&self, span: &Span) {
        // Sub-stages lie inside their phase: counted with it.
        if span.depth != 0 {
            return;
        }
        self.first_start_us
            .fetch_min(span.start_us, Ordering::Relaxed);
        let d = span.duration_us();
        match span.stage {
            PARAMS_LOAD => self.params_load_us.fetch_add(d, Ordering::Relaxed),
            WITNESS => self.synthesis_us.fetch_add(d, Ordering::Relaxed),
            KERNEL_REGION => self.gpu_us.fetch_add(d, Ordering::Relaxed),
            _ => 0,
        };
        if let Lane::Device(ordinal) = span.lane {
            if ordinal < 64 {
                self.devices.fetch_or(1 << ordinal, Ordering::Relaxed);
            }
            self.last_device.store(ordinal as u64, Ordering::Relaxed);
        }
    }

    /// Marks the moment the job was submitted (`now_us` on the timeline).
    pub fn submitted(&self, now_us: u64) {
        self.submitted_us.store(now_us, Ordering::Relaxed);
    }

    /// The device its partitions last ran on.
    pub fn last_device(&self) -> Option<usize> {
        let d = self.last_device.load(Ordering::Relaxed);
        (d != NONE).then_some(d as usize)
    }

    /// Kernel-region time so far, in microseconds.
    pub fn gpu_us(&self) -> u64 {
        self.gpu_us.load(Ordering::Relaxed)
    }

    /// Its time as the API reports it; `now_us` (the timeline's present)
    /// bounds the wait of a job that has not started.
    pub fn report(&self, now_us: u64) -> proto::JobTiming {
        let submitted = self.submitted_us.load(Ordering::Relaxed);
        let first = self.first_start_us.load(Ordering::Relaxed);
        let queue_wait_us = if submitted == NONE {
            0
        } else if first == NONE {
            now_us.saturating_sub(submitted)
        } else {
            first.saturating_sub(submitted)
        };
        let mask = self.devices.load(Ordering::Relaxed);
        proto::JobTiming {
            queue_wait_ms: ms(queue_wait_us),
            params_load_ms: ms(self.params_load_us.load(Ordering::Relaxed)),
            synthesis_ms: ms(self.synthesis_us.load(Ordering::Relaxed)),
            gpu_compute_ms: ms(self.gpu_us()),
            devices: (0..64).filter(|d| mask & (1 << d) != 0).collect(),
        }
    }
}

/// Every job's [`Timing`] by job id, filled by a timeline observer: a
/// job's first spans may end before the daemon tracks it.
#[derive(Debug, Default)]
pub struct Timings(Mutex<HashMap<u64, Arc<Timing>>>);

impl Timings {
    fn map(&self) -> MutexGuard<'_, HashMap<u64, Arc<Timing>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The timing of job `id`, made on first use.
    pub fn of(&self, id: u64) -> Arc<Timing> {
        Arc::clone(self.map().entry(id).or_default())
    }

    /// Counts a span for its job.
    pub fn observe(&self, span: &Span) {
        self.of(span.job).observe(span);
    }

    /// Keeps the timings of the jobs `keep` says.
    pub fn retain(&self, keep: impl Fn(u64) -> bool) {
        self.map().retain(|id, _| keep(*id));
    }

    /// How many jobs have a timing.
    pub fn len(&self) -> usize {
        self.map().len()
    }

    /// Whether no job has one.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(job: u64, stage: &'static str, lane: Lane, start: u64, end: u64, depth: u8) -> Span {
        Span {
            job,
            partition: 0,
            worker: 0,
            lane,
            stage,
            start_us: start,
            end_us: end,
            depth,
            note: None,
        }
    }

    #[test]
    fn spans_add_up_by_stage_and_the_wait_ends_at_the_first() {
        let timings = Timings::default();
        // A span may come before the daemon tracks the job.
        timings.observe(&span(7, PARAMS_LOAD, Lane::Host, 1_500, 4_500, 0));
        let t = timings.of(7);
        t.submitted(1_000);
        timings.observe(&span(7, WITNESS, Lane::Host, 5_000, 9_000, 0));
        timings.observe(&span(7, WITNESS, Lane::Host, 5_000, 8_000, 0));
        timings.observe(&span(7, KERNEL_REGION, Lane::Device(1), 9_000, 11_500, 0));
        timings.observe(&span(7, KERNEL_REGION, Lane::Device(0), 9_100, 10_100, 0));
        // Inside a kernel region: not counted again.
        timings.observe(&span(7, "msm_h", Lane::Device(0), 9_100, 9_900, 1));
        timings.observe(&span(8, WITNESS, Lane::Host, 0, 100_000, 0));
        let r = t.report(50_000);
        assert_eq!(r.queue_wait_ms, 1, "500 us from submission to the load");
        assert_eq!(r.params_load_ms, 3);
        assert_eq!(r.synthesis_ms, 7);
        assert_eq!(r.gpu_compute_ms, 4, "3500 us, rounded up");
        assert_eq!(r.devices, vec![0, 1]);
        assert_eq!(t.last_device(), Some(0));
        assert_eq!(t.gpu_us(), 3_500);
    }

    #[test]
    fn a_job_not_started_waits_until_now() {
        let timings = Timings::default();
        let t = timings.of(3);
        t.submitted(2_000);
        let r = t.report(12_000);
        assert_eq!(r.queue_wait_ms, 10);
        assert_eq!(r.gpu_compute_ms, 0);
        assert!(r.devices.is_empty());
        assert_eq!(t.last_device(), None);
        timings.retain(|id| id != 3);
        assert!(timings.is_empty());
    }
}
