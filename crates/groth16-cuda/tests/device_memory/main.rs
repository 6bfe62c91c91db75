//! cuzk-groth16-cuda's tests that read the whole device's memory
//! (cuMemGetInfo) and so need the GPU to themselves: a test executable
//! apart from `groth16_cuda` (cargo and the bundle's run.sh run executables
//! one after another), whose tests take [`device`] so they run one at a
//! time. Skip without a GPU.

use std::sync::{Mutex, MutexGuard};

mod gpu_evict;
mod gpu_grow;
mod gpu_memory_limit;

/// Held by each test for its whole run: no other test of this executable
/// allocates on the device meanwhile.
fn device() -> MutexGuard<'static, ()> {
    static DEVICE: Mutex<()> = Mutex::new(());
    DEVICE.lock().unwrap_or_else(|e| e.into_inner())
}
