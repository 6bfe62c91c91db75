//! Helpers shared by the scheduler's unit tests: a scheduler on fake
//! devices, a gate that holds a phase, phases that log themselves, and
//! waiting for a snapshot to show a state.

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::{DeviceSpec, Phases, Scheduler, SchedulerConfig, WorkerContext};
use crate::{JobId, Phase, SchedulerSnapshot};

pub(super) type Log = Arc<Mutex<Vec<(JobId, u32, Phase, usize, usize)>>>;

pub(super) fn scheduler(capacities: &[u64], workers: usize) -> Scheduler {
    let devices = capacities
        .iter()
        .enumerate()
        .map(|(ordinal, &capacity_bytes)| DeviceSpec {
            ordinal,
            capacity_bytes,
        })
        .collect();
    let config = SchedulerConfig {
        workers_per_device: workers,
        memory_margin_bytes: 0,
    };
    Scheduler::new(config, devices).unwrap()
}

/// A latch: `wait` blocks until `open`.
#[derive(Default)]
pub(super) struct Gate {
    open: Mutex<bool>,
    cv: Condvar,
}

impl Gate {
    pub(super) fn open(&self) {
        *self.open.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.cv.notify_all();
    }

    /// Opens the gate when dropped, so that a failing test does not hang
    /// the scheduler's drop on a phase still waiting here.
    pub(super) fn guard(self: &Arc<Self>) -> OpenOnDrop {
        OpenOnDrop(Arc::clone(self))
    }

    pub(super) fn wait(&self) {
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.cv.wait(open).unwrap();
        }
    }
}

pub(super) struct OpenOnDrop(Arc<Gate>);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.open();
    }
}

pub(super) fn record(log: &Log, ctx: &WorkerContext, phase: Phase) {
    log.lock().unwrap().push((
        ctx.job(),
        ctx.partition(),
        phase,
        ctx.device_index(),
        ctx.worker(),
    ));
}

/// Phases that log themselves; the kernel region waits for `gate`.
pub(super) fn logged(log: &Log, gate: Option<Arc<Gate>>) -> Phases {
    let (l1, l2, l3) = (log.clone(), log.clone(), log.clone());
    Phases::new(
        move |ctx| {
            record(&l1, ctx, Phase::Prep);
            Ok(())
        },
        move |ctx, ()| {
            record(&l2, ctx, Phase::Kernel);
            if let Some(gate) = gate {
                gate.wait();
            }
            Ok(())
        },
        move |ctx, ()| {
            record(&l3, ctx, Phase::Epilogue);
            Ok(())
        },
    )
}

pub(super) fn kernels(log: &Log) -> Vec<(JobId, u32)> {
    log.lock()
        .unwrap()
        .iter()
        .filter(|e| e.2 == Phase::Kernel)
        .map(|e| (e.0, e.1))
        .collect()
}

/// Phases whose kernel region waits for `gate`.
pub(super) fn gated(gate: &Arc<Gate>) -> Phases {
    let gate = Arc::clone(gate);
    Phases::new(
        |_| Ok(()),
        move |_, ()| {
            gate.wait();
            Ok(())
        },
        |_, ()| Ok(()),
    )
}

impl Scheduler {
    /// Blocks until `done` holds for a snapshot; for tests that need a
    /// particular interleaving without sleeping.
    pub(super) fn wait_until(&self, what: &str, done: impl Fn(&SchedulerSnapshot) -> bool) {
        // Only a guard against a hung test; nothing depends on the time.
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut core = self.shared.lock();
        while !done(&core.snapshot()) {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "timed out waiting until {what}: {:?}",
                core.snapshot()
            );
            core = self
                .shared
                .cv
                .wait_timeout(core, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}
