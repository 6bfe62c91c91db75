//! MSMs carried over chunks, as a streamed query runs (each chunk's buckets
//! summed in, reduced once), with and without densities, against the CPU
//! over the whole, with the scratch within its bound.

use std::sync::Arc;

use anyhow::Result;
use blstrs::{G1Affine, G2Affine, Scalar};
use cuzk_gpu_sched::testing::gpu_or_skip;
use cuzk_groth16_cuda::msm::{Accumulate, DeviceBases, DeviceDensity, GpuMsm, MsmConfig};
use ff::Field;
use group::Curve;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

use super::{TestCurve, cpu_msm, filecoin_scalars, gpu, max_log2, random_points};

/// One MSM carried over chunks (`GpuMsm::carried`), as a streamed query
/// runs: each chunk's bases and scalars in buffers of their own, the
/// chunk's used variables marked by a density when `dense`. Against the CPU
/// over the whole; the scratch within its bound.
fn carried_chunks<A: TestCurve>(seed: u64) -> Result<()> {
    let gpu = gpu();
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let big = 1usize << max_log2().min(18);
    let configs = [
        MsmConfig::default(),
        MsmConfig {
            ones_separately: true,
            ..MsmConfig::default()
        },
        MsmConfig {
            window_bits: Some(5),
            max_entries_per_pass: 1 << 10,
            ..MsmConfig::default()
        },
        MsmConfig::for_device_memory(16 << 30),
        MsmConfig {
            accumulate: Accumulate::BatchAffine128,
            merge_fan_log2: 5,
            ..MsmConfig::default()
        },
    ];
    for n in [1usize, 7, 5000, 200_003, big] {
        // Filecoin-shaped, with a stretch of zeros and one of ones (chunks
        // with nothing for Pippenger), and p - 1 at both ends.
        let mut scalars = filecoin_scalars(n, &mut rng);
        if n >= 5000 {
            scalars[n / 4..n / 4 + 1500].fill(Scalar::ZERO);
            scalars[n / 2..n / 2 + 1500].fill(Scalar::ONE);
        }
        scalars[0] = -Scalar::ONE;
        scalars[n - 1] = -Scalar::ONE;
        let used: Vec<bool> = (0..n).map(|i| i == 0 || rng.gen_bool(0.6)).collect();
        let bases = random_points::<A>(n, &mut rng);
        let chunkings: Vec<usize> = match n {
            1 => vec![1],
            7 => vec![1, 3, 7],
            _ => vec![n, n / 3 + 1, 4096],
        };
        for dense in [false, true] {
            let (host_bases, picked): (Vec<A>, Vec<Scalar>) = if dense {
                let count = used.iter().filter(|&&u| u).count();
                let picked = scalars
                    .iter()
                    .zip(&used)
                    .filter(|(_, u)| **u)
                    .map(|(s, _)| *s)
                    .collect();
                (bases[..count].to_vec(), picked)
            } else {
                (bases.clone(), scalars.clone())
            };
            let want = cpu_msm(&host_bases, &picked).to_affine();
            // All scalars at once: chunks with a density read theirs in
            // place (`add_at`), the others from buffers of their own.
            let all_scalars = gpu.upload(&scalars)?;
            for &chunk in &chunkings {
                // Each chunk's device buffers, made before the MSMs.
                let mut parts = Vec::new();
                let mut first_base = 0;
                for lo in (0..n).step_by(chunk) {
                    let len = chunk.min(n - lo);
                    let d_scalars = gpu.upload(&scalars[lo..lo + len])?;
                    let (count, density) = if dense {
                        let u = &used[lo..lo + len];
                        let count = u.iter().filter(|&&u| u).count();
                        (
                            count,
                            Some(DeviceDensity::upload(&gpu, u.iter().copied(), len)?),
                        )
                    } else {
                        (len, None)
                    };
                    // A chunk without a used variable has no bases.
                    let span = match count {
                        0 => &host_bases[..1],
                        _ => &host_bases[first_base..first_base + count],
                    };
                    let d_bases = DeviceBases::upload(&gpu, span)?;
                    first_base += count;
                    parts.push((d_bases, d_scalars, lo, density));
                }
                // Tiny passes (one window each, many per chunk) at small n only.
                for config in configs
                    .iter()
                    .filter(|c| n <= 5000 || c.max_entries_per_pass > 1 << 10)
                {
                    let config = *config;
                    let msm = GpuMsm::with_config(Arc::clone(&gpu), config);
                    let mut carried = msm.carried::<A>(n, n.div_ceil(chunk))?;
                    for (b, s, lo, d) in &parts {
                        match d {
                            Some(d) => carried.add_at(b, &all_scalars, *lo, Some(d))?,
                            None => carried.add(b, s, None)?,
                        }
                    }
                    let got = carried.finish()?.to_affine();
                    assert_eq!(
                        got,
                        want,
                        "{} carried: n = {n}, chunks of {chunk}, dense {dense}, {config:?}",
                        A::NAME
                    );
                    let held = msm.scratch_bytes();
                    let bound = config.scratch_bound(chunk.min(n));
                    assert!(
                        held <= bound,
                        "{} carried: n = {n}, chunks of {chunk}: scratch {held} > bound {bound}",
                        A::NAME
                    );
                }
            }
        }
    }
    Ok(())
}

#[test]
fn g1_carried_chunks_match_cpu() -> Result<()> {
    let Some(_) = gpu_or_skip("g1_carried_chunks_match_cpu") else {
        return Ok(());
    };
    carried_chunks::<G1Affine>(61)
}

#[test]
fn g2_carried_chunks_match_cpu() -> Result<()> {
    let Some(_) = gpu_or_skip("g2_carried_chunks_match_cpu") else {
        return Ok(());
    };
    carried_chunks::<G2Affine>(62)
}
