//! The H polynomial on the GPU (`GpuNtt::compute_h`: iNTT, coset NTT,
//! a·b - c over Z, inverse coset NTT) on device-resident a, b, c, waited
//! for: ids `ntt/h/2^K`. 2^18 and 2^20 by default;
//! `CUZK_BENCH_LOG2=22,24` picks others. Without a GPU it prints one skip
//! line and measures nothing (`CUZK_REQUIRE_GPU=1`: fails).

#[path = "common/mod.rs"]
mod common;

use common::{Scalars, have_gpu, sizes};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use cuzk_groth16_cuda::cuda::Gpu;
use cuzk_groth16_cuda::ntt::GpuNtt;

fn ntt(c: &mut Criterion) {
    if !have_gpu("ntt benches") {
        return;
    }
    let gpu = Gpu::get(0).expect("the GPU gpu_or_skip found");
    let ntt = GpuNtt::new(gpu.clone());
    let mut group = c.benchmark_group("ntt/h");
    group.sample_size(10);
    for k in sizes(&[18, 20]) {
        let n = 1usize << k;
        ntt.prepare(k).expect("the domain's tables build");
        let upload = |seed| {
            gpu.upload(&Scalars::Random.make(n, seed))
                .expect("a, b, c fit")
        };
        let (mut a, mut b, mut c) = (upload(1), upload(2), upload(3));
        group.throughput(Throughput::Elements(n as u64));
        // h overwrites a and uses b and c as scratch: the next run transforms
        // other field elements, the same work.
        group.bench_function(BenchmarkId::from_parameter(format!("2^{k}")), |bench| {
            bench.iter(|| {
                ntt.compute_h(&mut a, &mut b, &mut c, k).expect("H runs");
                gpu.synchronize().expect("the kernels finish");
            })
        });
    }
    group.finish();
}

criterion_group!(benches, ntt);
criterion_main!(benches);
