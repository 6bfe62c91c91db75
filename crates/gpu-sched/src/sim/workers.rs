//! The workers' side of the simulation: the core's assignments and grants
//! turned into timed phases, checked as they happen, and items ended.

use std::cmp::Reverse;

use super::{Ev, KernelSpan, Sim, SimStage, Step};
use crate::core::{CoreEvent, ItemEnd, WorkerId};
use crate::{GpuSchedError, JobId, Phase};

impl Sim<'_> {
    pub(super) fn phase_done(&mut self, w: WorkerId, step: Step) {
        let Some(payload) = self.running.get(&w).copied() else {
            self.violation(format!("worker {w} finished {step:?} without an item"));
            return;
        };
        let (j, p) = (payload.job, payload.partition);
        let fail = self.item(j, p).fail;
        let cancelled = self.core.is_cancelled(self.id(j));
        match step {
            Step::Prep => {
                if fail == Some(Phase::Prep) {
                    self.end_item(w, failed(Phase::Prep));
                } else if cancelled {
                    self.end_item(w, ItemEnd::Cancelled);
                } else {
                    self.stage[w].0 = SimStage::Waiting;
                    self.core.request_kernel(w);
                }
            }
            Step::Kernel => {
                let device = self.core.device_of(w);
                let start = self.kernel_start.remove(&w).unwrap_or(self.now);
                self.report.kernels.push(KernelSpan {
                    device,
                    job: j,
                    partition: p,
                    start,
                    end: self.now,
                });
                self.stage[w].0 = SimStage::Epilogue;
                self.core.kernel_done(w);
                if fail == Some(Phase::Kernel) {
                    self.end_item(w, failed(Phase::Kernel));
                } else if cancelled {
                    self.end_item(w, ItemEnd::Cancelled);
                } else {
                    let epilogue = self.item(j, p).epilogue;
                    self.at(self.now + epilogue, Ev::PhaseDone(w, Step::Epilogue));
                }
            }
            Step::Epilogue => {
                if fail == Some(Phase::Epilogue) {
                    self.end_item(w, failed(Phase::Epilogue));
                } else {
                    self.end_item(w, ItemEnd::Completed);
                }
            }
        }
    }

    /// As the real worker does: drop the payload (its permit), then tell
    /// the core.
    pub(super) fn end_item(&mut self, w: WorkerId, end: ItemEnd) {
        let Some(payload) = self.running.remove(&w) else {
            return;
        };
        let j = payload.job;
        let device = self.core.device_of(w);
        self.item_bytes[device] -= self.item(j, payload.partition).bytes;
        self.stage[w] = (SimStage::Idle, None);
        self.report.item_ends.push(self.now);
        self.release_permit();
        let tally = &mut self.report.tallies[j];
        let failed = match &end {
            ItemEnd::Completed => {
                tally.completed += 1;
                false
            }
            ItemEnd::Cancelled => {
                tally.cancelled += 1;
                false
            }
            ItemEnd::Failed(_) => {
                tally.failed += 1;
                true
            }
        };
        let removed = self.core.finish(w, end);
        self.removed(j, removed);
        if failed && !self.cancelled[j] {
            self.job_cancelled(j);
        }
    }

    pub(super) fn process_events(&mut self) {
        for event in self.core.drain_events() {
            match event {
                CoreEvent::Assigned(w) => self.assigned(w),
                CoreEvent::Granted(w) => self.granted(w),
            }
        }
    }

    fn assigned(&mut self, w: WorkerId) {
        let Some((info, payload)) = self.core.take_payload(w) else {
            self.violation(format!("worker {w} assigned nothing"));
            return;
        };
        let (j, p) = (payload.job, payload.partition);
        let key = (Reverse(info.key.priority), info.key.job, p);
        let device = info.device;
        let bytes = self.item(j, p).bytes;
        if self.queued.remove(&key).is_none() {
            self.violation(format!("{key:?} assigned but not queued"));
        }
        // Nothing ahead of it could ever have run on this device.
        let usable = self.usable(device);
        if let Some((ahead, need)) = self.queued.range(..key).find(|(_, need)| **need <= usable) {
            let text = format!("{key:?} dispatched to GPU {device} ahead of {ahead:?} ({need} B)");
            self.violation(text);
        }
        self.item_bytes[device] += bytes;
        self.report.max_item_bytes[device] =
            self.report.max_item_bytes[device].max(self.item_bytes[device]);
        if self.item_bytes[device] > usable {
            let text = format!(
                "GPU {device}: {} B reserved of {usable}",
                self.item_bytes[device]
            );
            self.violation(text);
        }
        if self.stage[w].0 != SimStage::Idle {
            self.violation(format!("worker {w} assigned while busy"));
        }
        self.stage[w] = (SimStage::Prep, Some((key, device)));
        self.running.insert(w, payload);
        self.report.assigned_at.insert((j, p), self.now);
        let prep = self.item(j, p).prep;
        self.at(self.now + prep, Ev::PhaseDone(w, Step::Prep));
    }

    fn granted(&mut self, w: WorkerId) {
        // Granted, then cancelled with its job before this event was read
        // (a real worker wakes, sees the cancellation and gives the lock back).
        if !self.core.holds_kernel(w) && self.stage[w].0 == SimStage::Idle {
            return;
        }
        let device = self.core.device_of(w);
        let Some((key, _)) = self.stage[w].1 else {
            self.violation(format!("worker {w} granted without an item"));
            return;
        };
        if self.stage[w].0 != SimStage::Waiting {
            self.violation(format!("worker {w} granted while not waiting"));
        }
        for other in self.device_workers(device) {
            if other == w {
                continue;
            }
            if self.stage[other].0 == SimStage::Kernel {
                self.violation(format!("GPU {device}: two kernel regions"));
            }
            if let Some(k) = self.live(other, SimStage::Waiting)
                && k < key
            {
                self.violation(format!("GPU {device}: lock to {key:?} before {k:?}"));
            }
            if let Some(k) = self.live(other, SimStage::Prep)
                && k.0.0 > key.0.0
            {
                self.violation(format!("GPU {device}: lock to {key:?}, {k:?} in prep"));
            }
        }
        self.stage[w].0 = SimStage::Kernel;
        self.kernel_start.insert(w, self.now);
        let (j, p) = self
            .running
            .get(&w)
            .map_or((0, 0), |p| (p.job, p.partition));
        let kernel = self.item(j, p).kernel;
        self.at(self.now + kernel, Ev::PhaseDone(w, Step::Kernel));
    }
}

fn failed(phase: Phase) -> ItemEnd {
    ItemEnd::Failed(GpuSchedError::PhaseFailed {
        job: JobId(0),
        partition: 0,
        phase,
        message: "simulated failure".into(),
    })
}
