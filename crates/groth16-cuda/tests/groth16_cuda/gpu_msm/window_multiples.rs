//! MSMs over bases carrying their window multiples: the multiples against
//! their CPU twin, and MSMs over them (every window class, edge scalars,
//! several passes, a density, a carried MSM) against the CPU multiexp.

use std::sync::Arc;

use anyhow::Result;
use blstrs::{G1Affine, G2Affine, Scalar};
use cuzk_gpu_sched::testing::gpu_or_skip;
use cuzk_groth16_cuda::msm::{Accumulate, DeviceBases, DeviceDensity, GpuMsm, MsmConfig};
use ff::Field;
use group::Curve;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

use super::{TestCurve, check, cpu_msm, filecoin_scalars, gpu, random_points, random_scalars};

/// Bases with window multiples (`DeviceBases::with_window_multiples`): the
/// multiples equal the CPU twin's (identity, repeated and negated bases
/// among them), and MSMs over them equal the CPU multiexp: every window
/// class, edge scalars, several sorting passes (which then carry into the
/// one set of buckets), ones apart, a density, sizes below the bases'
/// count, and a carried MSM (which reads the plain bases).
fn window_multiples<A: TestCurve>(seed: u64) -> Result<()>
where
    A::Curve: From<A>,
{
    let gpu = gpu();
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let n = 3000;
    let mut host = random_points::<A>(n, &mut rng);
    host[10] = A::identity();
    host[12] = host[11];
    host[14] = -host[13];
    let p_minus_1 = -Scalar::ONE;
    let mut scalar_sets: Vec<(&str, Vec<Scalar>)> = vec![
        ("random", random_scalars(n, &mut rng)),
        ("filecoin", filecoin_scalars(n, &mut rng)),
        ("p-1", vec![p_minus_1; n]),
        ("zeros", vec![Scalar::ZERO; n]),
        ("one scalar", vec![Scalar::from(5u64)]),
        ("fewer than the bases", random_scalars(1234, &mut rng)),
    ];
    scalar_sets.push((
        "small",
        (0..n as u64).map(|i| Scalar::from(i * i + 3)).collect(),
    ));
    for c in [2u32, 7, 13, 22] {
        // Digits at the bucket range's edges in every window below bit 250:
        // 2^(c-1) (the last bucket), 2^(c-1) + 1 (negative, with a carry)
        // and 1 (the first bucket), times the index to vary the top ones.
        let two = Scalar::from(2u64);
        let mut top = Scalar::ZERO;
        let mut low = Scalar::ZERO;
        let mut k = 0u64;
        while u64::from(c) * (k + 1) <= 250 {
            top += two.pow_vartime([u64::from(c) * k + u64::from(c) - 1]);
            low += two.pow_vartime([u64::from(c) * k]);
            k += 1;
        }
        let mut scalar_sets = scalar_sets.clone();
        scalar_sets.push((
            "bucket edges",
            (0..n as u64)
                .map(|i| match i % 3 {
                    0 => top,
                    1 => top + low,
                    _ => low * Scalar::from(i),
                })
                .collect(),
        ));
        let bases = DeviceBases::upload(&gpu, &host)?.with_window_multiples(c)?;
        assert_eq!(bases.len(), n);
        assert_eq!(bases.multiples_window(), Some(c));
        let want_table = cuzk_groth16_cuda::msm::window_multiples_cpu(&host, c);
        let got_table = bases.buffer().download()?;
        assert_eq!(got_table.len(), want_table.len(), "{} c = {c}", A::NAME);
        if let Some(i) = (0..want_table.len()).find(|&i| got_table[i] != want_table[i]) {
            panic!(
                "{} c = {c}: multiple {i} (window {}, base {}) differs from the CPU twin's",
                A::NAME,
                i / n,
                i % n
            );
        }
        let configs = [
            MsmConfig::default(),
            MsmConfig {
                max_entries_per_pass: 2000,
                ones_separately: true,
                ..MsmConfig::default()
            },
            MsmConfig {
                accumulate: Accumulate::Prefetch128,
                max_entries_per_pass: 1,
                ..MsmConfig::default()
            },
            // Passes after the first carry into the buckets.
            MsmConfig {
                accumulate: Accumulate::BatchAffine128,
                max_entries_per_pass: 2000,
                ..MsmConfig::default()
            },
            // One window of 2^(c - 1) buckets, merged 2^4 ranges a launch.
            MsmConfig {
                merge_fan_log2: 4,
                ..MsmConfig::default()
            },
            // Batched scatters (8, and 4 over passes).
            MsmConfig {
                scatter_batch: 8,
                ..MsmConfig::default()
            },
            MsmConfig {
                scatter_batch: 4,
                max_entries_per_pass: 2000,
                ..MsmConfig::default()
            },
        ];
        for config in configs {
            let msm = GpuMsm::with_config(Arc::clone(&gpu), config);
            for (what, scalars) in &scalar_sets {
                check(
                    &msm,
                    &format!("multiples c = {c}, {what}"),
                    &bases,
                    &host,
                    scalars,
                )?;
            }
        }
        // A density (bellperson's A layout, all inputs then a third of the
        // aux): the used variables take bases 0, 1, 2, ...
        let num = 2500;
        let used: Vec<bool> = (0..num).map(|i| i < 5 || rng.gen_bool(0.33)).collect();
        let witness = filecoin_scalars(num, &mut rng);
        let picked: Vec<Scalar> = witness
            .iter()
            .zip(&used)
            .filter(|(_, u)| **u)
            .map(|(s, _)| *s)
            .collect();
        let density = DeviceDensity::upload(&gpu, used.iter().copied(), num)?;
        let got =
            GpuMsm::new(Arc::clone(&gpu)).msm(&bases, &gpu.upload(&witness)?, Some(&density))?;
        assert_eq!(
            got.to_affine(),
            cpu_msm(&host, &picked).to_affine(),
            "{} multiples c = {c} with a density",
            A::NAME
        );
        // A carried MSM reads the plain bases of the same buffer.
        let scalars = &scalar_sets[1].1;
        let msm = GpuMsm::new(Arc::clone(&gpu));
        let mut carried = msm.carried::<A>(n, 1)?;
        carried.add(&bases, &gpu.upload(scalars)?, None)?;
        assert_eq!(
            carried.finish()?.to_affine(),
            cpu_msm(&host, scalars).to_affine(),
            "{} carried over bases with multiples of c = {c}",
            A::NAME
        );
    }
    // Windows the kernels do not take.
    for c in [0, 1, 25] {
        let err = DeviceBases::upload(&gpu, &host[..4])?
            .with_window_multiples(c)
            .unwrap_err();
        assert!(
            err.to_string().contains(&format!("a window of {c} bits")),
            "{err}"
        );
    }
    Ok(())
}

#[test]
fn g1_window_multiples_match_cpu() -> Result<()> {
    let Some(_) = gpu_or_skip("g1_window_multiples_match_cpu") else {
        return Ok(());
    };
    window_multiples::<G1Affine>(71)
}

#[test]
fn g2_window_multiples_match_cpu() -> Result<()> {
    let Some(_) = gpu_or_skip("g2_window_multiples_match_cpu") else {
        return Ok(());
    };
    window_multiples::<G2Affine>(72)
}
