//! Edge cases on G1 and G2 under every configuration (accumulation
//! variants, ones apart, merge fans, window sizes, tiny sorting passes,
//! scatter batches):
//! n = 1, all-zero, all-one, p-1, one bucket, sizes that are not powers of
//! two, repeated and negated bases, the identity among the bases, and bases
//! resident across calls of different sizes.

use std::sync::Arc;

use anyhow::Result;
use blstrs::{G1Affine, G2Affine, Scalar};
use cuzk_gpu_sched::testing::gpu_or_skip;
use cuzk_groth16_cuda::msm::{Accumulate, DeviceBases, GpuMsm, MsmConfig};
use ff::Field;
use group::Group;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

use super::{TestCurve, check, filecoin_scalars, gpu, random_points, random_scalars};

/// Every edge case of the issue on one curve, with the default
/// configuration and with forced window sizes and tiny sorting passes.
fn edge_cases<A: TestCurve>(seed: u64) -> Result<()> {
    let gpu = gpu();
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let n = 5000;
    let mut host = random_points::<A>(n, &mut rng);
    // The identity, a repeated base and a base's negation among the others.
    host[10] = A::identity();
    host[12] = host[11];
    host[14] = -host[13];
    let bases = DeviceBases::upload(&gpu, &host)?;
    let p_minus_1 = -Scalar::ONE;

    let configs = [
        MsmConfig::default(),
        MsmConfig {
            ones_separately: true,
            ..MsmConfig::default()
        },
        MsmConfig {
            accumulate: Accumulate::Plain,
            ..MsmConfig::default()
        },
        MsmConfig {
            accumulate: Accumulate::Prefetch128,
            ..MsmConfig::default()
        },
        MsmConfig {
            accumulate: Accumulate::Prefetch,
            ones_separately: true,
            ..MsmConfig::default()
        },
        MsmConfig {
            accumulate: Accumulate::PlainV4,
            ..MsmConfig::default()
        },
        MsmConfig {
            accumulate: Accumulate::Prefetch128V4,
            ones_separately: true,
            ..MsmConfig::default()
        },
        MsmConfig {
            accumulate: Accumulate::BatchAffine128,
            ..MsmConfig::default()
        },
        MsmConfig {
            accumulate: Accumulate::BatchAffine256,
            window_bits: Some(7),
            max_entries_per_pass: 3000,
            ..MsmConfig::default()
        },
        MsmConfig {
            merge_fan_log2: 3,
            ..MsmConfig::default()
        },
        MsmConfig {
            merge_fan_log2: 8,
            window_bits: Some(13),
            ..MsmConfig::default()
        },
        MsmConfig {
            window_bits: Some(2),
            ..MsmConfig::default()
        },
        MsmConfig {
            window_bits: Some(7),
            max_entries_per_pass: 3000,
            ..MsmConfig::default()
        },
        MsmConfig {
            window_bits: Some(13),
            ..MsmConfig::default()
        },
        MsmConfig {
            window_bits: Some(16),
            max_entries_per_pass: 1,
            ..MsmConfig::default()
        },
        MsmConfig {
            window_bits: Some(21),
            ..MsmConfig::default()
        },
        // The batched scatter (the default is the serial one): batches
        // that end inside the windows (2 bits: 128 windows), across
        // several passes (w0 > 0).
        MsmConfig {
            scatter_batch: 8,
            ..MsmConfig::default()
        },
        MsmConfig {
            scatter_batch: 16,
            window_bits: Some(2),
            ..MsmConfig::default()
        },
        MsmConfig {
            scatter_batch: 4,
            window_bits: Some(7),
            max_entries_per_pass: 3000,
            ..MsmConfig::default()
        },
        MsmConfig {
            scatter_batch: 16,
            window_bits: Some(11),
            max_entries_per_pass: 7000,
            ..MsmConfig::default()
        },
    ];
    for config in configs {
        let msm = GpuMsm::with_config(Arc::clone(&gpu), config);
        let random = random_scalars(n, &mut rng);
        check(&msm, "random", &bases, &host, &random)?;
        check(
            &msm,
            "filecoin-shaped",
            &bases,
            &host,
            &filecoin_scalars(n, &mut rng),
        )?;
        check(&msm, "n = 1", &bases, &host, &random[..1])?;
        check(&msm, "n = 1, scalar 1", &bases, &host, &[Scalar::ONE])?;
        check(&msm, "n = 1, scalar 0", &bases, &host, &[Scalar::ZERO])?;
        check(&msm, "n = 3, p-1", &bases, &host, &[p_minus_1; 3])?;
        check(&msm, "all zero", &bases, &host, &vec![Scalar::ZERO; n])?;
        check(&msm, "all one", &bases, &host, &vec![Scalar::ONE; n])?;
        check(&msm, "all p-1", &bases, &host, &vec![p_minus_1; n])?;
        check(
            &msm,
            "all 3 (one bucket)",
            &bases,
            &host,
            &vec![Scalar::from(3u64); n],
        )?;
        let small: Vec<Scalar> = (0..n)
            .map(|_| Scalar::from(rng.gen_range(0..6u64)))
            .collect();
        check(&msm, "small integers", &bases, &host, &small)?;
        let edges: Vec<Scalar> = (0..n)
            .map(|i| match i % 7 {
                0 => Scalar::ZERO,
                1 => Scalar::ONE,
                2 => p_minus_1,
                3 => -Scalar::from(2u64),
                4 => Scalar::from(2u64).pow_vartime([254]),
                5 => Scalar::from(2u64).pow_vartime([254]) - Scalar::ONE,
                _ => Scalar::random(&mut rng),
            })
            .collect();
        check(&msm, "0, 1, p-1, 2^254 mixed", &bases, &host, &edges)?;
        check(
            &msm,
            "4097 (not a power of two)",
            &bases,
            &host,
            &random[..4097],
        )?;
    }

    // Repeated bases: every point the same, so every bucket adds P + P.
    let same = vec![host[0]; 3000];
    let same_bases = DeviceBases::upload(&gpu, &same)?;
    let msm = GpuMsm::new(Arc::clone(&gpu));
    check(
        &msm,
        "one repeated base, random",
        &same_bases,
        &same,
        &random_scalars(3000, &mut rng),
    )?;
    check(
        &msm,
        "one repeated base, all 5",
        &same_bases,
        &same,
        &vec![Scalar::from(5u64); 3000],
    )?;
    // Bases that are each other's negation, with equal scalars (every pair
    // cancels: P + (-P) in the buckets) and with random ones.
    let mut pairs = random_points::<A>(2000, &mut rng);
    for i in (0..pairs.len()).step_by(2) {
        pairs[i + 1] = -pairs[i];
    }
    let pair_bases = DeviceBases::upload(&gpu, &pairs)?;
    let mut equal = random_scalars(2000, &mut rng);
    for i in (0..equal.len()).step_by(2) {
        equal[i + 1] = equal[i];
    }
    check(
        &msm,
        "negated pairs, equal scalars",
        &pair_bases,
        &pairs,
        &equal,
    )?;
    let d = gpu.upload(&equal)?;
    assert!(
        bool::from(msm.msm(&pair_bases, &d, None)?.is_identity()),
        "{} pairs cancel",
        A::NAME
    );
    check(
        &msm,
        "negated pairs, random",
        &pair_bases,
        &pairs,
        &random_scalars(2000, &mut rng),
    )?;
    // Bases resident across calls of different sizes (scratch shrinking
    // and growing) and fewer scalars than bases.
    for len in [5000, 17, 4999, 1, 2500] {
        check(
            &msm,
            "resident bases",
            &bases,
            &host,
            &filecoin_scalars(len, &mut rng),
        )?;
    }
    Ok(())
}

#[test]
fn g1_edge_cases_match_cpu() -> Result<()> {
    let Some(_) = gpu_or_skip("g1_edge_cases_match_cpu") else {
        return Ok(());
    };
    edge_cases::<G1Affine>(1)
}

#[test]
fn g2_edge_cases_match_cpu() -> Result<()> {
    let Some(_) = gpu_or_skip("g2_edge_cases_match_cpu") else {
        return Ok(());
    };
    edge_cases::<G2Affine>(2)
}
