//! The per-device kernel-region lock: requested after prep, granted by
//! priority then arrival, held back for a higher class still in prep.

use super::{Core, CoreEvent, ItemKey, Stage, WorkerId};
use crate::Priority;

impl<P> Core<P> {
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

    /// Grants a free kernel lock on `device` if it should be granted now.
    pub(super) fn regrant(&mut self, device: usize) {
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
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::*;

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
}
