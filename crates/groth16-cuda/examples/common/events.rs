//! CUDA-event timing for the benchmark examples (`#[path]`-included beside
//! `common/mod.rs`, whose `Stat` it returns; not an example itself).

use std::sync::Arc;

use anyhow::Result;
use cudarc::driver::sys::CUevent_flags;
use cuzk_groth16_cuda::cuda::Gpu;

use crate::common::Stat;

/// Seconds of what `step(false)` queues on the GPU's stream, by CUDA
/// events: one warm-up, then `runs` runs, each after an untimed
/// `step(true)` (its setup, if it has one).
pub fn time_events(
    gpu: &Arc<Gpu>,
    runs: usize,
    mut step: impl FnMut(bool) -> Result<()>,
) -> Result<Stat> {
    step(true)?;
    step(false)?;
    gpu.synchronize()?;
    let mut t = Vec::with_capacity(runs);
    for _ in 0..runs {
        step(true)?;
        let start = gpu
            .stream()
            .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
        step(false)?;
        let end = gpu
            .stream()
            .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
        end.synchronize()?;
        t.push(f64::from(start.elapsed_ms(&end)?) / 1e3);
    }
    Ok(Stat::of(t))
}
