//! Dispatch: which idle worker takes which queued item, and the item's
//! return when its worker is done with it.

use std::cmp::Reverse;

use super::{Core, CoreEvent, ItemEnd, ItemInfo, ItemKey, Running, Stage, WorkerId};

impl<P> Core<P> {
    pub(crate) fn item(&self, worker: WorkerId) -> Option<ItemInfo> {
        let slot = self.workers.get(worker)?;
        let running = slot.item.as_ref()?;
        let first = self.devices.get(slot.device).map_or(0, |d| d.workers.start);
        Some(ItemInfo {
            key: running.key,
            device_bytes: running.device_bytes,
            device: slot.device,
            worker_in_device: worker - first,
        })
    }

    /// The payload of the item just assigned to `worker` (once).
    pub(crate) fn take_payload(&mut self, worker: WorkerId) -> Option<(ItemInfo, P)> {
        let info = self.item(worker)?;
        let payload = self
            .workers
            .get_mut(worker)?
            .item
            .as_mut()?
            .payload
            .take()?;
        Some((info, payload))
    }

    /// The worker is done with its item, in whatever stage it was: its
    /// memory and, if held, the kernel lock are released. A failure cancels
    /// the rest of the job; the payloads so removed are returned.
    pub(crate) fn finish(&mut self, worker: WorkerId, end: ItemEnd) -> Vec<P> {
        let Some(slot) = self.workers.get_mut(worker) else {
            return Vec::new();
        };
        let Some(item) = slot.item.take() else {
            return Vec::new();
        };
        slot.stage = Stage::Idle;
        let device = slot.device;
        if let Some(dev) = self.devices.get_mut(device) {
            if dev.kernel_holder == Some(worker) {
                dev.kernel_holder = None;
            }
            dev.ledger.items = dev.ledger.items.saturating_sub(item.device_bytes);
        }
        let job = item.key.job;
        let mut removed = Vec::new();
        if let Some(state) = self.jobs.get_mut(&job) {
            state.running = state.running.saturating_sub(1);
            match end {
                ItemEnd::Completed => state.completed += 1,
                ItemEnd::Cancelled => {}
                // A failure after a cancellation is most likely the
                // cancellation itself: the job's outcome stays "cancelled".
                ItemEnd::Failed(error) => {
                    if !state.cancelled {
                        state.failure.get_or_insert(error);
                        removed = self.cancel(job);
                    }
                }
            }
        }
        self.regrant(device);
        self.dispatch();
        self.forget_if_done(job);
        removed
    }

    fn idle_worker(&self, device: usize) -> Option<WorkerId> {
        let dev = self.devices.get(device)?;
        dev.workers
            .clone()
            .find(|&w| self.workers.get(w).is_some_and(|s| s.item.is_none()))
    }

    /// Items on `device` that have not finished their kernel region.
    fn kernel_backlog(&self, device: usize) -> usize {
        self.devices.get(device).map_or(0, |dev| {
            dev.workers
                .clone()
                .filter(|&w| {
                    matches!(
                        self.stage(w),
                        Stage::Prep | Stage::WaitingKernel | Stage::Kernel
                    )
                })
                .count()
        })
    }

    /// Gives queued items to idle workers, as long as any can be given.
    pub(super) fn dispatch(&mut self) {
        while let Some((key, device)) = self.next_assignment() {
            self.assign(key, device);
        }
    }

    fn next_assignment(&self) -> Option<(ItemKey, usize)> {
        let mut open: Vec<bool> = (0..self.devices.len())
            .map(|d| self.devices[d].memory_waiters == 0 && self.idle_worker(d).is_some())
            .collect();
        for (key, queued) in &self.queue {
            if !open.contains(&true) {
                return None;
            }
            let soonest = (0..self.devices.len())
                .filter(|&d| open[d] && self.devices[d].ledger.fits_now(queued.device_bytes))
                .min_by_key(|&d| {
                    (
                        self.kernel_backlog(d),
                        Reverse(self.devices[d].ledger.free()),
                        d,
                    )
                });
            if let Some(device) = soonest {
                return Some((*key, device));
            }
            // Nothing behind this item may take a device it could run on.
            for (d, dev) in self.devices.iter().enumerate() {
                if dev.ledger.could_ever_fit(queued.device_bytes) {
                    open[d] = false;
                }
            }
        }
        None
    }

    fn assign(&mut self, key: ItemKey, device: usize) {
        let Some(worker) = self.idle_worker(device) else {
            return;
        };
        let Some(queued) = self.queue.remove(&key) else {
            return;
        };
        if let Some(dev) = self.devices.get_mut(device) {
            dev.ledger.items += queued.device_bytes;
        }
        if let Some(state) = self.jobs.get_mut(&key.job) {
            state.queued = state.queued.saturating_sub(1);
            state.running += 1;
        }
        if let Some(slot) = self.workers.get_mut(worker) {
            slot.stage = Stage::Prep;
            slot.item = Some(Running {
                key,
                device_bytes: queued.device_bytes,
                payload: Some(queued.payload),
            });
        }
        self.event(CoreEvent::Assigned(worker));
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::*;
    use crate::Priority;

    #[test]
    fn memory_never_overcommitted_and_head_of_line_waits() {
        let mut c = core(&[10], 2);
        let a = c.create_job(Priority::Normal);
        c.submit(a, 0, 6, 0).unwrap();
        c.submit(a, 1, 6, 1).unwrap(); // fits only after partition 0
        c.submit(a, 2, 1, 2).unwrap(); // fits now, but must not pass 1
        assert_eq!(assigned(&mut c), vec![(0, 0)]);
        assert_eq!(c.ledger(0).unwrap().items, 6);
        c.finish(0, ItemEnd::Completed);
        assert_eq!(assigned(&mut c), vec![(0, 1), (1, 2)]);
        assert_eq!(c.ledger(0).unwrap().items, 7);
    }

    #[test]
    fn items_go_to_the_soonest_device() {
        let mut c = core(&[10 * GIB, 10 * GIB], 2);
        let job = c.create_job(Priority::Normal);
        for p in 0..4 {
            c.submit(job, p, GIB, p).unwrap();
        }
        // Spread: 0 -> dev 0, 1 -> dev 1, 2 -> dev 0, 3 -> dev 1.
        let devices: Vec<usize> = assigned(&mut c)
            .into_iter()
            .map(|(w, _)| c.device_of(w))
            .collect();
        assert_eq!(devices, vec![0, 1, 0, 1]);
        // Device 0 frees a worker but device 1 still has two items before
        // its kernel: the next item goes to device 0.
        c.request_kernel(0);
        c.kernel_done(0);
        c.finish(0, ItemEnd::Completed);
        c.submit(job, 4, GIB, 4).unwrap();
        assert_eq!(assigned(&mut c), vec![(0, 4)]);
    }

    #[test]
    fn item_goes_where_its_memory_is_free() {
        let mut c = core(&[10, 10], 2);
        let job = c.create_job(Priority::Normal);
        c.submit(job, 0, 8, 0).unwrap();
        let worker = assigned(&mut c)[0].0;
        assert_eq!(c.device_of(worker), 0);
        // Device 0 has an idle worker but only 2 bytes free: device 1.
        c.submit(job, 1, 5, 1).unwrap();
        let worker = assigned(&mut c)[0].0;
        assert_eq!(c.device_of(worker), 1);
    }

    #[test]
    fn small_device_backfills_when_the_head_never_fits_it() {
        let mut c = core(&[4, 10], 1);
        let job = c.create_job(Priority::Normal);
        c.submit(job, 0, 8, 0).unwrap(); // dev 1
        c.submit(job, 1, 8, 1).unwrap(); // waits for dev 1
        c.submit(job, 2, 3, 2).unwrap(); // may use dev 0: item 1 never fits there
        let got: Vec<(usize, u32)> = assigned(&mut c)
            .into_iter()
            .map(|(w, p)| (c.device_of(w), p))
            .collect();
        assert_eq!(got, vec![(1, 0), (0, 2)]);
    }
}
