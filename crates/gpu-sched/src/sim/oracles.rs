//! Oracles written apart from the core: between events, nothing that could
//! run may be left waiting (kernel lock, idle workers, dispatch permits).

use super::{QueueKey, Sim, SimStage};
use crate::core::WorkerId;

impl Sim<'_> {
    pub(super) fn live(&self, w: WorkerId, stage: SimStage) -> Option<QueueKey> {
        let (s, item) = self.stage[w];
        let (key, _) = item?;
        let j = self.running.get(&w)?.job;
        (s == stage && !self.cancelled[j]).then_some(key)
    }

    pub(super) fn device_workers(&self, device: usize) -> std::ops::Range<WorkerId> {
        let n = self.setup.workers_per_device;
        device * n..(device + 1) * n
    }

    /// Between events nothing that could run may be left waiting.
    pub(super) fn check_quiescent(&mut self) {
        for device in 0..self.setup.capacities.len() {
            let workers = self.device_workers(device);
            let has_kernel = workers.clone().any(|w| self.stage[w].0 == SimStage::Kernel);
            let best_waiting = workers
                .clone()
                .filter_map(|w| self.live(w, SimStage::Waiting))
                .min();
            let best_prep = workers
                .clone()
                .filter_map(|w| self.live(w, SimStage::Prep))
                .map(|k| k.0.0)
                .max();
            if let (false, Some(waiting)) = (has_kernel, best_waiting)
                && best_prep.is_none_or(|p| p <= waiting.0.0)
            {
                self.violation(format!("GPU {device}: lock free while {waiting:?} waits"));
            }
            let idle = workers.clone().any(|w| self.stage[w].0 == SimStage::Idle);
            let usable = self.usable(device);
            let first = self.queued.iter().find(|(_, need)| **need <= usable);
            if let (true, Some((key, need))) = (idle, first)
                && *need <= usable - self.item_bytes[device]
            {
                let text = format!("GPU {device}: a worker idles while {key:?} fits");
                self.violation(text);
            }
        }
        if let Some(permits) = &self.permits
            && permits.waiting() > 0
            && permits.in_use() < self.setup.bound.unwrap_or(0)
        {
            let text = format!("{} permits free while some wait", permits.in_use());
            self.violation(text);
        }
    }
}
