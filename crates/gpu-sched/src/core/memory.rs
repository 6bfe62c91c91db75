//! Device-memory accounting: each device's ledger (items, standing
//! reservations, held memory), callers waiting for memory, and pressure.

use super::{Core, Stage};
use crate::{GpuSchedError, Result};

/// Device-memory accounting of one device: bytes held by running items and
/// by standing reservations ([`crate::DeviceMemory`]), against the capacity
/// minus the margin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MemoryLedger {
    pub(crate) capacity: u64,
    pub(crate) usable: u64,
    pub(crate) items: u64,
    pub(crate) standing: u64,
    /// Memory already allocated by a backend and kept across items (a
    /// resident parameter set), held with `DeviceMemory::hold`: counted as
    /// reserved, but given back on request when it is in the way.
    pub(crate) held: u64,
}

impl MemoryLedger {
    pub(super) fn new(capacity: u64, margin: u64) -> Self {
        Self {
            capacity,
            usable: capacity.saturating_sub(margin),
            items: 0,
            standing: 0,
            held: 0,
        }
    }

    pub(crate) fn reserved(&self) -> u64 {
        self.items
            .saturating_add(self.standing)
            .saturating_add(self.held)
    }

    pub(super) fn free(&self) -> u64 {
        self.usable.saturating_sub(self.reserved())
    }

    /// What an item could get once every other item is done: standing
    /// reservations are long-lived charges, so they count; held memory
    /// does not (it is given back when it is in the way).
    pub(crate) fn attainable(&self) -> u64 {
        self.usable.saturating_sub(self.standing)
    }

    pub(super) fn fits_now(&self, bytes: u64) -> bool {
        bytes <= self.free()
    }

    pub(super) fn could_ever_fit(&self, bytes: u64) -> bool {
        bytes <= self.attainable()
    }
}

impl<P> Core<P> {
    /// Takes `bytes` of `device` now if they fit; `Ok(false)` if they fit
    /// only later.
    pub(crate) fn try_reserve_standing(&mut self, device: usize, bytes: u64) -> Result<bool> {
        let Some(dev) = self.devices.get_mut(device) else {
            return Err(GpuSchedError::NoSuchDevice { index: device });
        };
        if !dev.ledger.could_ever_fit(bytes) {
            return Err(GpuSchedError::ReservationNeverFits {
                ordinal: dev.ordinal,
                need_bytes: bytes,
                usable_bytes: dev.ledger.attainable(),
            });
        }
        if dev.ledger.fits_now(bytes) {
            dev.ledger.standing += bytes;
            Ok(true)
        } else {
            Ok(false)
        }
    }

    /// Records `bytes` already in use on the device (allocated by whoever
    /// holds them) as standing, whether or not they fit: never waits, never
    /// refuses. Items that no longer fit beside them wait, or fail as never
    /// fitting, as with any standing reservation.
    pub(crate) fn add_held(&mut self, device: usize, bytes: u64) -> Result<()> {
        let Some(dev) = self.devices.get_mut(device) else {
            return Err(GpuSchedError::NoSuchDevice { index: device });
        };
        dev.ledger.held = dev.ledger.held.saturating_add(bytes);
        Ok(())
    }

    pub(crate) fn release_held(&mut self, device: usize, bytes: u64) {
        if let Some(dev) = self.devices.get_mut(device) {
            dev.ledger.held = dev.ledger.held.saturating_sub(bytes);
        }
        self.dispatch();
    }

    /// Devices whose held memory is in the way now: no item on the
    /// device, and either a caller waiting in `DeviceMemory::reserve` or
    /// the first queued item that could run there not fitting beside it.
    /// Whoever holds it is then asked to give back what no item uses.
    /// Whether no worker of `device` runs an item now.
    pub(crate) fn device_idle(&self, device: usize) -> bool {
        self.devices
            .get(device)
            .is_some_and(|dev| dev.workers.clone().all(|w| self.stage(w) == Stage::Idle))
    }

    pub(crate) fn pressured(&self) -> Vec<usize> {
        (0..self.devices.len())
            .filter(|&d| {
                let dev = &self.devices[d];
                if dev.ledger.held == 0
                    || !dev.workers.clone().all(|w| self.stage(w) == Stage::Idle)
                {
                    return false;
                }
                dev.memory_waiters > 0
                    || self
                        .queue
                        .values()
                        .find(|q| dev.ledger.could_ever_fit(q.device_bytes))
                        .is_some_and(|q| !dev.ledger.fits_now(q.device_bytes))
            })
            .collect()
    }

    pub(crate) fn release_standing(&mut self, device: usize, bytes: u64) {
        if let Some(dev) = self.devices.get_mut(device) {
            dev.ledger.standing = dev.ledger.standing.saturating_sub(bytes);
        }
        self.dispatch();
    }

    pub(crate) fn add_memory_waiter(&mut self, device: usize) {
        if let Some(dev) = self.devices.get_mut(device) {
            dev.memory_waiters += 1;
        }
    }

    pub(crate) fn remove_memory_waiter(&mut self, device: usize) {
        if let Some(dev) = self.devices.get_mut(device) {
            dev.memory_waiters = dev.memory_waiters.saturating_sub(1);
        }
        self.dispatch();
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::*;
    use crate::Priority;
    use crate::core::ItemEnd;

    #[test]
    fn standing_reservations_come_first_and_count_as_never_fits() {
        let mut c = core(&[10], 2);
        assert!(c.try_reserve_standing(0, 4).unwrap());
        let job = c.create_job(Priority::Normal);
        assert!(matches!(
            c.submit(job, 0, 7, 0),
            Err((
                GpuSchedError::ItemNeverFits {
                    largest_usable_bytes: 6,
                    ..
                },
                0
            ))
        ));
        c.submit(job, 0, 5, 0).unwrap();
        c.drain_events();
        assert!(!c.try_reserve_standing(0, 2).unwrap());
        assert!(matches!(
            c.try_reserve_standing(0, 7),
            Err(GpuSchedError::ReservationNeverFits {
                need_bytes: 7,
                usable_bytes: 6,
                ..
            })
        ));
        // A waiting standing reservation blocks new items on its device.
        c.add_memory_waiter(0);
        c.submit(job, 1, 1, 1).unwrap();
        assert!(assigned(&mut c).is_empty());
        c.finish(0, ItemEnd::Completed);
        assert!(c.try_reserve_standing(0, 2).unwrap());
        c.remove_memory_waiter(0);
        assert_eq!(assigned(&mut c).len(), 1);
        assert_eq!(c.ledger(0).unwrap().reserved(), 7);
    }
}
