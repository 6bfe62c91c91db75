//! Helpers shared by the core's unit tests: a core on fake devices that
//! records its events, and the assignments and grants among them.

use super::{Core, CoreEvent, WorkerId};

pub(super) const GIB: u64 = 1 << 30;

pub(super) fn core(devices: &[u64], workers: usize) -> Core<u32> {
    let specs: Vec<(usize, u64)> = devices.iter().copied().enumerate().collect();
    let mut core = Core::new(&specs, workers, 0);
    core.record_events();
    core
}

pub(super) fn assigned(core: &mut Core<u32>) -> Vec<(WorkerId, u32)> {
    core.drain_events()
        .into_iter()
        .filter_map(|e| match e {
            CoreEvent::Assigned(w) => core.item(w).map(|i| (w, i.key.partition)),
            CoreEvent::Granted(_) => None,
        })
        .collect()
}

pub(super) fn granted(core: &mut Core<u32>) -> Vec<WorkerId> {
    core.drain_events()
        .into_iter()
        .filter_map(|e| match e {
            CoreEvent::Granted(w) => Some(w),
            CoreEvent::Assigned(_) => None,
        })
        .collect()
}
