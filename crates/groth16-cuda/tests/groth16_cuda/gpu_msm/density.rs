//! bellperson's density-filtered A and B layouts (the whole witness as
//! scalars, a density marking the variables the query has points for)
//! against the CPU backend's filtered multiexp, on G1 and G2.

use std::sync::Arc;

use anyhow::Result;
use blstrs::{G1Affine, G2Affine, Scalar};
use cuzk_gpu_sched::testing::gpu_or_skip;
use cuzk_groth16_cuda::msm::{DeviceBases, DeviceDensity, GpuMsm, MsmConfig};
use ec_gpu_gen::multiexp_cpu::{DensityTracker, FullDensity, multiexp_cpu};
use ec_gpu_gen::threadpool::Worker;
use ff::Field;
use group::Curve;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

use super::{TestCurve, filecoin_scalars, gpu, random_points, reprs};

fn tracker(used: &[bool]) -> Arc<DensityTracker> {
    let mut t = DensityTracker::new();
    for (i, u) in used.iter().enumerate() {
        t.add_element();
        if *u {
            t.inc(i);
        }
    }
    Arc::new(t)
}

/// As the CPU backend filters a query: the inputs (with their density, or
/// all of them), then the aux with theirs, each taking bases in order.
fn cpu_dense<A: TestCurve>(
    bases: &[A],
    inputs: &[Scalar],
    input_used: Option<&[bool]>,
    aux: &[Scalar],
    aux_used: &[bool],
) -> A::Curve {
    let worker = Worker::new();
    let bases = Arc::new(bases.to_vec());
    let (i, skip) = match input_used {
        None => (
            multiexp_cpu::<_, _, A, _>(&worker, (bases.clone(), 0), FullDensity, reprs(inputs))
                .wait(),
            inputs.len(),
        ),
        Some(u) => (
            multiexp_cpu::<_, _, A, _>(&worker, (bases.clone(), 0), tracker(u), reprs(inputs))
                .wait(),
            u.iter().filter(|b| **b).count(),
        ),
    };
    let x =
        multiexp_cpu::<_, _, A, _>(&worker, (bases, skip), tracker(aux_used), reprs(aux)).wait();
    i.expect("CPU multiexp") + x.expect("CPU multiexp")
}

/// bellperson's A and B layouts: scalars are the whole witness (inputs then
/// aux), the density marks what the query has a point for.
fn density_layouts<A: TestCurve>(seed: u64) -> Result<()> {
    let gpu = gpu();
    let plain = GpuMsm::new(Arc::clone(&gpu));
    let apart = GpuMsm::with_config(
        Arc::clone(&gpu),
        MsmConfig {
            ones_separately: true,
            ..MsmConfig::default()
        },
    );
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    for (num_inputs, num_aux) in [(1, 0), (1, 1), (3, 70), (41, 10_000), (328, 200_003)] {
        let inputs = {
            let mut v = filecoin_scalars(num_inputs, &mut rng);
            v[0] = Scalar::ONE; // the ONE input
            v
        };
        let aux = filecoin_scalars(num_aux, &mut rng);
        let witness: Vec<Scalar> = inputs.iter().chain(&aux).copied().collect();
        let d_witness = gpu.upload(&witness)?;
        let aux_used: Vec<bool> = (0..num_aux).map(|_| rng.gen_bool(0.25)).collect();
        let input_used: Vec<bool> = (0..num_inputs).map(|_| rng.gen_bool(0.5)).collect();

        // A: every input, then the aux A uses.
        let a_used: Vec<bool> = std::iter::repeat_n(true, num_inputs)
            .chain(aux_used.iter().copied())
            .collect();
        let a_count = a_used.iter().filter(|b| **b).count();
        let a_bases = random_points::<A>(a_count, &mut rng);
        let want = cpu_dense(&a_bases, &inputs, None, &aux, &aux_used);
        let density = DeviceDensity::upload(&gpu, a_used.iter().copied(), a_used.len())?;
        assert_eq!(density.count(), a_count);
        let d_bases = DeviceBases::upload(&gpu, &a_bases)?;
        for msm in [&plain, &apart] {
            let got = msm.msm(&d_bases, &d_witness, Some(&density))?;
            assert_eq!(
                got.to_affine(),
                want.to_affine(),
                "{} A layout {num_inputs} + {num_aux}",
                A::NAME
            );
        }

        // B: the inputs B uses, then the aux B uses.
        let b_used: Vec<bool> = input_used.iter().chain(&aux_used).copied().collect();
        let b_count = b_used.iter().filter(|b| **b).count();
        let b_bases = random_points::<A>(b_count, &mut rng);
        let want = cpu_dense(&b_bases, &inputs, Some(&input_used), &aux, &aux_used);
        let density = DeviceDensity::upload(&gpu, b_used.iter().copied(), b_used.len())?;
        let d_bases = DeviceBases::upload(&gpu, &b_bases)?;
        for msm in [&plain, &apart] {
            let got = msm.msm(&d_bases, &d_witness, Some(&density))?;
            assert_eq!(
                got.to_affine(),
                want.to_affine(),
                "{} B layout {num_inputs} + {num_aux}",
                A::NAME
            );
        }
    }
    Ok(())
}

#[test]
fn g1_density_layouts_match_cpu() -> Result<()> {
    let Some(_) = gpu_or_skip("g1_density_layouts_match_cpu") else {
        return Ok(());
    };
    density_layouts::<G1Affine>(3)
}

#[test]
fn g2_density_layouts_match_cpu() -> Result<()> {
    let Some(_) = gpu_or_skip("g2_density_layouts_match_cpu") else {
        return Ok(());
    };
    density_layouts::<G2Affine>(4)
}
