//! Admission: an item enters the queue in service order (priority class,
//! job, partition), or is refused with the reason.

use super::{Core, ItemKey, Queued};
use crate::{GpuSchedError, JobId};

impl<P> Core<P> {
    /// Queues an item. On refusal the payload comes back with the error.
    pub(crate) fn submit(
        &mut self,
        job: JobId,
        partition: u32,
        device_bytes: u64,
        payload: P,
    ) -> std::result::Result<(), (GpuSchedError, P)> {
        if self.shut_down {
            return Err((GpuSchedError::ShutDown, payload));
        }
        let Some(state) = self.jobs.get(&job) else {
            return Err((GpuSchedError::JobClosed { job }, payload));
        };
        if state.cancelled {
            return Err((GpuSchedError::JobCancelled { job }, payload));
        }
        if state.closed {
            return Err((GpuSchedError::JobClosed { job }, payload));
        }
        if self.devices.is_empty() {
            return Err((GpuSchedError::NoDevices, payload));
        }
        let largest = self
            .devices
            .iter()
            .map(|d| d.ledger.attainable())
            .max()
            .unwrap_or(0);
        if device_bytes > largest {
            return Err((
                GpuSchedError::ItemNeverFits {
                    job,
                    partition,
                    need_bytes: device_bytes,
                    largest_usable_bytes: largest,
                },
                payload,
            ));
        }
        let key = ItemKey {
            priority: state.priority,
            job,
            partition,
            seq: self.next_seq,
        };
        self.next_seq += 1;
        self.queue.insert(
            key,
            Queued {
                device_bytes,
                payload,
            },
        );
        if let Some(state) = self.jobs.get_mut(&job) {
            state.queued += 1;
        }
        self.dispatch();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::*;
    use crate::Priority;
    use crate::core::ItemEnd;

    #[test]
    fn queue_orders_by_priority_then_job_then_partition() {
        let mut c = core(&[10 * GIB], 1);
        let busy = c.create_job(Priority::Low);
        c.submit(busy, 0, 1, 0).unwrap();
        assert_eq!(assigned(&mut c), vec![(0, 0)]);
        let normal_a = c.create_job(Priority::Normal);
        let normal_b = c.create_job(Priority::Normal);
        let high = c.create_job(Priority::High);
        c.submit(normal_b, 1, 1, 21).unwrap();
        c.submit(normal_a, 2, 1, 12).unwrap();
        c.submit(normal_b, 0, 1, 20).unwrap();
        c.submit(normal_a, 1, 1, 11).unwrap();
        c.submit(high, 5, 1, 35).unwrap();
        c.submit(busy, 1, 1, 1).unwrap();
        let mut order = Vec::new();
        for _ in 0..6 {
            c.take_payload(0);
            c.finish(0, ItemEnd::Completed);
            if let Some((_, p)) = c.take_payload(0) {
                order.push(p);
            }
        }
        assert_eq!(order, vec![35, 11, 12, 20, 21, 1]);
    }

    #[test]
    fn never_fits_is_refused_with_sizes() {
        let specs = [(0, 10 * GIB), (1, 20 * GIB)];
        let mut c: Core<u32> = Core::new(&specs, 2, GIB);
        c.record_events();
        let job = c.create_job(Priority::Normal);
        let (err, payload) = c.submit(job, 3, 20 * GIB, 7).unwrap_err();
        assert_eq!(payload, 7);
        assert_eq!(
            err,
            GpuSchedError::ItemNeverFits {
                job,
                partition: 3,
                need_bytes: 20 * GIB,
                largest_usable_bytes: 19 * GIB,
            }
        );
        assert!(err.to_string().contains("21474836480 bytes"), "{err}");
        c.submit(job, 3, 19 * GIB, 7).unwrap();
        assert_eq!(c.item(2).map(|i| i.device), Some(1));
    }

    #[test]
    fn no_devices_refuses() {
        let mut c: Core<u32> = Core::new(&[], 2, 0);
        let job = c.create_job(Priority::Normal);
        assert_eq!(
            c.submit(job, 0, 0, 0).unwrap_err().0,
            GpuSchedError::NoDevices
        );
    }
}
