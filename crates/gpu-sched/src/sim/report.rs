//! What a simulated run measured (kernel spans, timings, peaks, tallies,
//! outcomes) and what it left behind.

use std::collections::HashMap;

use super::Sim;
use crate::{JobSummary, Result};

#[derive(Debug, Clone, Copy)]
pub(crate) struct KernelSpan {
    pub(crate) device: usize,
    pub(crate) job: usize,
    pub(crate) partition: u32,
    pub(crate) start: u64,
    pub(crate) end: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    pub(crate) completed: usize,
    pub(crate) cancelled: usize,
    pub(crate) refused: usize,
    pub(crate) failed: usize,
}

#[derive(Debug, Default)]
pub(crate) struct Report {
    pub(crate) kernels: Vec<KernelSpan>,
    /// (job, partition) -> tick a worker took it.
    pub(crate) assigned_at: HashMap<(usize, u32), u64>,
    pub(crate) submitted_at: HashMap<(usize, u32), u64>,
    pub(crate) synth_starts: Vec<u64>,
    pub(crate) item_ends: Vec<u64>,
    /// Per device, the most bytes items held at once.
    pub(crate) max_item_bytes: Vec<u64>,
    pub(crate) max_in_flight: usize,
    pub(crate) tallies: Vec<Tally>,
    pub(crate) outcomes: Vec<Option<Result<JobSummary>>>,
    /// Broken invariants, in words; empty when all held.
    pub(crate) violations: Vec<String>,
    /// What was left behind at the end (queued items, reserved bytes,
    /// permits, locks, busy workers); empty when nothing was.
    pub(crate) leftovers: Vec<String>,
}

impl Report {
    /// Fraction of the time between the first kernel region's start and the
    /// last one's end that `device` ran a kernel region.
    pub(crate) fn busy(&self, device: usize) -> f64 {
        let spans: Vec<&KernelSpan> = self.kernels.iter().filter(|k| k.device == device).collect();
        let (Some(first), Some(last)) = (
            spans.iter().map(|k| k.start).min(),
            spans.iter().map(|k| k.end).max(),
        ) else {
            return 0.0;
        };
        let busy: u64 = spans.iter().map(|k| k.end - k.start).sum();
        busy as f64 / (last - first).max(1) as f64
    }
}

impl Sim<'_> {
    pub(super) fn finish_report(mut self) -> Report {
        let mut left = Vec::new();
        if self.core.queue_len() > 0 {
            left.push(format!("{} items queued", self.core.queue_len()));
        }
        for device in 0..self.setup.capacities.len() {
            let reserved = self.core.ledger(device).map_or(0, |l| l.reserved());
            if reserved > 0 {
                left.push(format!("GPU {device}: {reserved} B reserved"));
            }
            if self.core.kernel_holder(device).is_some() {
                left.push(format!("GPU {device}: kernel lock held"));
            }
        }
        for w in 0..self.core.worker_count() {
            if self.core.stage(w) != crate::core::Stage::Idle {
                left.push(format!("worker {w} busy"));
            }
        }
        if let Some(permits) = &self.permits
            && (permits.in_use() > 0 || permits.waiting() > 0)
        {
            left.push(format!(
                "{} permits held, {} waiting",
                permits.in_use(),
                permits.waiting()
            ));
        }
        if self.in_flight > 0 {
            left.push(format!("{} items in flight", self.in_flight));
        }
        self.report.outcomes = (0..self.jobs.len())
            .map(|j| self.ids[j].and_then(|id| self.core.job_outcome(id)))
            .collect();
        self.report.leftovers = left;
        self.report
    }
}
