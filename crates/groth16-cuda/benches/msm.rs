//! The GPU MSM over G1 (`GpuMsm::msm`, bases resident, scalars already on
//! the device, result on the host) with random and with Filecoin-shaped
//! scalars: ids `msm/g1/2^K/random` and `msm/g1/2^K/filecoin`. 2^18 and
//! 2^20 by default; `CUZK_BENCH_LOG2=22,24` picks others. Without a GPU it
//! prints one skip line and measures nothing (`CUZK_REQUIRE_GPU=1`: fails).

#[path = "common/mod.rs"]
mod common;

use std::sync::Arc;

use common::{Scalars, have_gpu, random_points, sizes};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use cuzk_groth16_cuda::cuda::Gpu;
use cuzk_groth16_cuda::msm::{DeviceBases, GpuMsm};

fn msm(c: &mut Criterion) {
    if !have_gpu("msm benches") {
        return;
    }
    let logs = sizes(&[18, 20]);
    let gpu = Gpu::get(0).expect("the GPU gpu_or_skip found");
    let msm = GpuMsm::new(Arc::clone(&gpu));
    msm.warm_up().expect("MSM modules load");
    let max = logs.iter().copied().max().unwrap_or(0);
    let bases = DeviceBases::upload(&gpu, &random_points(1 << max, 1)).expect("bases fit");

    let mut group = c.benchmark_group("msm/g1");
    group.sample_size(10);
    for &k in &logs {
        let n = 1usize << k;
        group.throughput(Throughput::Elements(n as u64));
        for kind in [Scalars::Random, Scalars::Filecoin] {
            let scalars = gpu
                .upload(&kind.make(n, 100 + u64::from(k)))
                .expect("scalars fit");
            group.bench_function(BenchmarkId::new(format!("2^{k}"), kind.name()), |b| {
                b.iter(|| msm.msm(&bases, &scalars, None).expect("MSM runs"))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, msm);
criterion_main!(benches);
