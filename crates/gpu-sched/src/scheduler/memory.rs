//! Device memory outside work items: standing reservations, memory held
//! across items (given back under pressure), and the pressure hook.

use std::fmt;
use std::sync::Arc;

use super::{Shared, in_phase};
use crate::{CancelToken, GpuSchedError, Result};

/// Called with a device's memory when held memory alone keeps the next
/// item from starting there.
pub type PressureHook = Arc<dyn Fn(&DeviceMemory) + Send + Sync>;

/// One device's memory, shared by the scheduler's items and standing
/// reservations. Work items reserve their declared need when a worker takes
/// them; standing reservations (a resident SRS, a cache) are taken here and
/// are served before any new item starts on the device.
#[derive(Clone)]
pub struct DeviceMemory {
    pub(super) shared: Arc<Shared>,
    pub(super) device: usize,
}

impl fmt::Debug for DeviceMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceMemory")
            .field("device", &self.device)
            .finish_non_exhaustive()
    }
}

impl DeviceMemory {
    fn ledger<R>(&self, f: impl FnOnce(&crate::core::MemoryLedger) -> R) -> Option<R> {
        self.shared.lock().ledger(self.device).map(f)
    }

    /// Driver ordinal of the device.
    pub fn ordinal(&self) -> usize {
        self.shared.lock().ordinal(self.device)
    }

    /// Total capacity in bytes.
    pub fn capacity_bytes(&self) -> u64 {
        self.ledger(|l| l.capacity).unwrap_or(0)
    }

    /// Capacity minus the margin: what reservations may add up to.
    pub fn usable_bytes(&self) -> u64 {
        self.ledger(|l| l.usable).unwrap_or(0)
    }

    /// Whether no worker of the device runs an item now (what the
    /// scheduler's pressure hook waits for before asking for held memory
    /// back).
    pub fn is_idle(&self) -> bool {
        self.shared.lock().device_idle(self.device)
    }

    /// Bytes reserved now, by items and standing reservations.
    pub fn reserved_bytes(&self) -> u64 {
        self.ledger(crate::core::MemoryLedger::reserved)
            .unwrap_or(0)
    }

    /// Reserves `bytes` if they fit now; `Ok(None)` if they fit only later.
    ///
    /// # Errors
    /// [`GpuSchedError::ReservationNeverFits`] when they never can.
    pub fn try_reserve(&self, bytes: u64) -> Result<Option<Reservation>> {
        let reserved = self
            .shared
            .with_core(|core| core.try_reserve_standing(self.device, bytes))?;
        Ok(reserved.then(|| self.reservation(bytes)))
    }

    /// Reserves `bytes`, waiting until they fit; while it waits no new item
    /// starts on this device.
    ///
    /// # Errors
    /// [`GpuSchedError::ReservationNeverFits`] when they never can,
    /// [`GpuSchedError::Cancelled`] when `cancel` is cancelled first,
    /// [`GpuSchedError::BlockingInPhase`] inside a phase (use
    /// [`Self::try_reserve`] there, or declare the need in the item).
    pub fn reserve(&self, bytes: u64, cancel: &CancelToken) -> Result<Reservation> {
        if in_phase() {
            return Err(GpuSchedError::BlockingInPhase {
                call: "DeviceMemory::reserve",
            });
        }
        let weak = Arc::downgrade(&self.shared);
        let _listener = cancel.listen(Arc::new(move || {
            if let Some(shared) = weak.upgrade() {
                let _core = shared.lock();
                shared.cv.notify_all();
            }
        }));
        let mut core = self.shared.lock();
        if cancel.is_cancelled() {
            return Err(GpuSchedError::Cancelled {
                waiting_for: "device memory",
            });
        }
        if core.try_reserve_standing(self.device, bytes)? {
            self.shared.cv.notify_all();
            return Ok(self.reservation(bytes));
        }
        core.add_memory_waiter(self.device);
        self.shared.cv.notify_all();
        // Held memory in the way of this reservation on an idle device is
        // asked back now (later, by the worker that finishes an item).
        drop(core);
        self.shared.relieve_pressure();
        core = self.shared.lock();
        // Checked before each wait: a cancellation or a release while the
        // lock was let go above is not missed.
        let outcome = loop {
            if cancel.is_cancelled() {
                break Err(GpuSchedError::Cancelled {
                    waiting_for: "device memory",
                });
            }
            match core.try_reserve_standing(self.device, bytes) {
                Ok(true) => break Ok(()),
                Ok(false) => {}
                Err(error) => break Err(error),
            }
            core = self.shared.wait(core);
        };
        // Items held back for this wait may start now.
        core.remove_memory_waiter(self.device);
        self.shared.cv.notify_all();
        drop(core);
        outcome.map(|()| self.reservation(bytes))
    }

    /// Records `bytes` that are already allocated on the device and kept
    /// across items (say, a parameter set a backend made resident inside a
    /// kernel region): never waits and never refuses, even past the usable
    /// bytes (the memory is in use whatever the ledger says), so it may be
    /// called inside a phase. Unlike a standing reservation, held memory is
    /// given back on request: items that do not fit beside it wait (none is
    /// refused for it), and when it alone keeps one from starting on an
    /// idle device the
    /// [`Scheduler::on_memory_pressure`](super::Scheduler::on_memory_pressure)
    /// hook is called.
    ///
    /// # Errors
    /// [`GpuSchedError::NoSuchDevice`] only.
    pub fn hold(&self, bytes: u64) -> Result<Reservation> {
        self.shared
            .with_core(|core| core.add_held(self.device, bytes))?;
        let mut r = self.reservation(bytes);
        r.held = true;
        Ok(r)
    }

    fn reservation(&self, bytes: u64) -> Reservation {
        Reservation {
            shared: Arc::clone(&self.shared),
            device: self.device,
            bytes,
            held: false,
        }
    }
}

/// Device memory held until dropped.
pub struct Reservation {
    shared: Arc<Shared>,
    device: usize,
    bytes: u64,
    /// From [`DeviceMemory::hold`].
    held: bool,
}

impl fmt::Debug for Reservation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reservation")
            .field("device", &self.device)
            .field("bytes", &self.bytes)
            .finish()
    }
}

impl Reservation {
    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let (device, bytes) = (self.device, self.bytes);
        if self.held {
            self.shared
                .with_core(|core| core.release_held(device, bytes));
        } else {
            self.shared
                .with_core(|core| core.release_standing(device, bytes));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::*;
    use crate::Priority;
    use crate::scheduler::{Phases, WorkItem};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Mutex, mpsc};
    use std::thread;

    #[test]
    fn standing_reservations_wait_cancel_and_refuse() {
        let sched = scheduler(&[100], 2);
        let memory = sched.device_memory(0).unwrap();
        let (gate, gate2) = (Arc::new(Gate::default()), Arc::new(Gate::default()));
        let (_open, _open2) = (gate.guard(), gate2.guard());
        let job = sched.create_job(Priority::Normal);
        let j = job.id();
        sched
            .submit(WorkItem::new(&job, 0, 60, gated(&gate)))
            .unwrap();
        sched.wait_until("p0 runs", |s| s.devices[0].kernel == Some((j, 0)));
        assert!(memory.try_reserve(50).unwrap().is_none());

        let waiter = {
            let memory = memory.clone();
            thread::spawn(move || memory.reserve(50, &CancelToken::new()))
        };
        sched.wait_until("a memory waiter", |s| s.devices[0].memory_waiters == 1);
        // While it waits, no new item starts on the device, though one fits.
        sched
            .submit(WorkItem::new(&job, 1, 10, gated(&gate2)))
            .unwrap();
        assert_eq!(sched.snapshot().queued, 1);
        gate.open();
        let standing = waiter.join().unwrap().unwrap();
        assert_eq!(standing.bytes(), 50);
        sched.wait_until("p1 runs", |s| s.devices[0].kernel == Some((j, 1)));
        assert_eq!(memory.reserved_bytes(), 60);

        // Standing reservations are long-lived: one that cannot fit beside
        // them is refused; one that waits for items can be cancelled.
        assert_eq!(
            memory.reserve(51, &CancelToken::new()).unwrap_err(),
            GpuSchedError::ReservationNeverFits {
                ordinal: 0,
                need_bytes: 51,
                usable_bytes: 50,
            }
        );
        let token = CancelToken::new();
        let waiter = {
            let (memory, token) = (memory.clone(), token.clone());
            thread::spawn(move || memory.reserve(45, &token))
        };
        sched.wait_until("a memory waiter", |s| s.devices[0].memory_waiters == 1);
        token.cancel();
        assert_eq!(
            waiter.join().unwrap().unwrap_err(),
            GpuSchedError::Cancelled {
                waiting_for: "device memory"
            }
        );
        assert_eq!(sched.snapshot().devices[0].memory_waiters, 0);
        gate2.open();
        job.close();
        assert_eq!(job.wait().unwrap().completed, 2);
        drop(standing);
        assert_eq!(memory.reserved_bytes(), 0);
        assert_eq!((memory.capacity_bytes(), memory.usable_bytes()), (100, 100));
    }

    /// Memory already allocated is held at once, past what fits, from
    /// inside a phase; a queued item that does not fit beside it waits, and
    /// once the device is idle the pressure hook is asked to give it back,
    /// after which the item runs. An item that fits only without the held
    /// memory is not refused.
    #[test]
    fn held_memory_counts_at_once_and_is_given_back_under_pressure() {
        let sched = scheduler(&[100], 2);
        let memory = sched.device_memory(0).unwrap();
        let job = sched.create_job(Priority::Normal);
        let j = job.id();
        let (gate, gate2) = (Arc::new(Gate::default()), Arc::new(Gate::default()));
        let (_open, _open2) = (gate.guard(), gate2.guard());
        // What the hook gives back, and how often it was asked.
        let slot: Arc<Mutex<Option<Reservation>>> = Arc::default();
        let asked = Arc::new(AtomicUsize::new(0));
        {
            let (slot, asked) = (slot.clone(), asked.clone());
            sched.on_memory_pressure(Arc::new(move |m: &DeviceMemory| {
                assert_eq!(m.ordinal(), 0);
                asked.fetch_add(1, Ordering::SeqCst);
                drop(slot.lock().unwrap().take());
            }));
        }
        // Inside its kernel region p0 holds 70 bytes it allocated (60 of
        // its own reserved already: 130 in all, past the 100).
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let (held_tx, held_rx) = mpsc::channel();
        let phases = {
            let (gate, memory, slot) = (gate.clone(), memory.clone(), slot.clone());
            Phases::new(
                |_| Ok(()),
                move |_, ()| {
                    go_rx.recv().unwrap();
                    let held = memory.hold(70).unwrap();
                    held_tx.send(held.bytes()).unwrap();
                    *slot.lock().unwrap() = Some(held);
                    gate.wait();
                    Ok(())
                },
                |_, ()| Ok(()),
            )
        };
        assert!(memory.is_idle(), "no item yet");
        sched.submit(WorkItem::new(&job, 0, 60, phases)).unwrap();
        sched.wait_until("p0 runs", |s| s.devices[0].kernel == Some((j, 0)));
        assert!(!memory.is_idle(), "p0 runs");
        // p1 does not fit beside p0 (40 free): queued.
        sched
            .submit(WorkItem::new(&job, 1, 41, gated(&gate2)))
            .unwrap();
        go_tx.send(()).unwrap();
        assert_eq!(held_rx.recv().unwrap(), 70);
        assert_eq!(memory.reserved_bytes(), 130);
        assert_eq!(sched.snapshot().devices[0].held_bytes, 70);
        // 90 bytes fit the device only without the held 70: not refused.
        sched
            .submit(WorkItem::new(&job, 2, 90, gated(&gate2)))
            .unwrap();
        assert_eq!(asked.load(Ordering::SeqCst), 0, "p0 still runs");
        gate.open();
        // p0 done: the device is idle, p1 waits for the held bytes only, so
        // the hook gives them back and p1 runs.
        sched.wait_until("p1 runs", |s| s.devices[0].kernel == Some((j, 1)));
        assert_eq!(asked.load(Ordering::SeqCst), 1);
        assert_eq!(sched.snapshot().devices[0].held_bytes, 0);
        gate2.open();
        job.close();
        assert_eq!(job.wait().unwrap().completed, 3);
        assert_eq!(memory.reserved_bytes(), 0);
        assert_eq!(memory.hold(0).unwrap().bytes(), 0);
    }

    /// A standing reservation that does not fit beside held memory on an
    /// idle device asks for it back instead of waiting forever.
    #[test]
    fn a_reservation_in_the_way_of_held_memory_asks_for_it_back() {
        let sched = scheduler(&[100], 2);
        let memory = sched.device_memory(0).unwrap();
        let slot: Arc<Mutex<Option<Reservation>>> = Arc::default();
        {
            let slot = slot.clone();
            sched.on_memory_pressure(Arc::new(move |_: &DeviceMemory| {
                drop(slot.lock().unwrap().take());
            }));
        }
        *slot.lock().unwrap() = Some(memory.hold(80).unwrap());
        // 30 fit only without the held 80: the hook gives them back.
        let standing = memory.reserve(30, &CancelToken::new()).unwrap();
        assert_eq!(standing.bytes(), 30);
        assert_eq!(sched.snapshot().devices[0].held_bytes, 0);
        assert_eq!(memory.reserved_bytes(), 30);
    }
}
