//! Random sizes up to 2^22 (`CUZK_TEST_LOG2`), random and Filecoin-shaped
//! scalars, against a closed form that bellperson's multiexp and blst's
//! Pippenger confirm at 2^16.

use std::sync::Arc;

use anyhow::Result;
use blstrs::{G1Affine, G2Affine, Scalar};
use cuzk_gpu_sched::testing::gpu_or_skip;
use cuzk_groth16_cuda::msm::{DeviceBases, GpuMsm};
use ff::Field;
use group::{Curve, Group};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;

use super::{TestCurve, cpu_msm, filecoin_scalars, gpu, max_log2, random_scalars};

/// Points in arithmetic progressions, whose MSM has a closed form: chunk c
/// holds start_c + j * step_c for j = 0, 1, ..., so sum_k s_k P_k =
/// sum_c (sum s_k) start_c + (sum j s_k) step_c: two scalar
/// multiplications per chunk instead of a 2^22-point multiexp on the CPU
/// (bellperson's takes about a minute for G2 there).
struct Progressions<A: TestCurve> {
    points: Vec<A>,
    starts: Vec<A::Curve>,
    steps: Vec<A::Curve>,
    per: usize,
}

impl<A: TestCurve> Progressions<A> {
    fn new(n: usize, rng: &mut ChaCha20Rng) -> Self {
        let per = 1 << 14;
        let chunks = n.div_ceil(per);
        let starts: Vec<A::Curve> = (0..chunks).map(|_| A::Curve::random(&mut *rng)).collect();
        let steps: Vec<A::Curve> = (0..chunks).map(|_| A::Curve::random(&mut *rng)).collect();
        let mut points = vec![A::identity(); n];
        points.par_chunks_mut(per).enumerate().for_each(|(c, out)| {
            let proj: Vec<A::Curve> =
                std::iter::successors(Some(starts[c]), |p| Some(*p + steps[c]))
                    .take(out.len())
                    .collect();
            A::Curve::batch_normalize(&proj, out);
        });
        Progressions {
            points,
            starts,
            steps,
            per,
        }
    }

    /// sum_k scalars[k] * points[k].
    fn msm(&self, scalars: &[Scalar]) -> A::Curve {
        scalars
            .par_chunks(self.per)
            .enumerate()
            .map(|(c, s)| {
                let (mut sum, mut weighted, mut j) = (Scalar::ZERO, Scalar::ZERO, Scalar::ZERO);
                for x in s {
                    sum += x;
                    weighted += j * x;
                    j += Scalar::ONE;
                }
                self.starts[c] * sum + self.steps[c] * weighted
            })
            .reduce(A::Curve::identity, |a, b| a + b)
    }
}

/// Random sizes up to 2^max_log2(), random and Filecoin-shaped scalars,
/// against the closed form of [`Progressions`], which bellperson's
/// multiexp and blst's Pippenger confirm at 2^16.
fn random_sizes<A: TestCurve>(seed: u64) -> Result<()> {
    let gpu = gpu();
    let msm = GpuMsm::new(Arc::clone(&gpu));
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let max = 1usize << max_log2();
    let prog = Progressions::<A>::new(max, &mut rng);
    let bases = DeviceBases::upload(&gpu, &prog.points)?;

    let n = (1 << 16).min(max);
    let s = random_scalars(n, &mut rng);
    let proj: Vec<A::Curve> = prog.points[..n].iter().map(|p| p.to_curve()).collect();
    let closed = prog.msm(&s).to_affine();
    assert_eq!(
        closed,
        cpu_msm(&prog.points, &s).to_affine(),
        "{} closed form vs bellperson",
        A::NAME
    );
    assert_eq!(
        closed,
        A::blst_multi_exp(&proj, &s).to_affine(),
        "{} closed form vs blst",
        A::NAME
    );

    let mut sizes = vec![2, 3, 255, 1023, 65_537, max - 1, max];
    sizes.extend((0..4).map(|_| rng.gen_range(1..=max)));
    sizes.retain(|&s| s <= max);
    for n in sizes {
        for (kind, scalars) in [
            ("random", random_scalars(n, &mut rng)),
            ("filecoin-shaped", filecoin_scalars(n, &mut rng)),
        ] {
            let d = gpu.upload(&scalars)?;
            let got = msm.msm(&bases, &d, None)?;
            assert_eq!(
                got.to_affine(),
                prog.msm(&scalars).to_affine(),
                "{} {kind} n = {n}",
                A::NAME
            );
        }
    }
    Ok(())
}

#[test]
fn g1_random_sizes_match_cpu() -> Result<()> {
    let Some(_) = gpu_or_skip("g1_random_sizes_match_cpu") else {
        return Ok(());
    };
    random_sizes::<G1Affine>(5)
}

#[test]
fn g2_random_sizes_match_cpu() -> Result<()> {
    let Some(_) = gpu_or_skip("g2_random_sizes_match_cpu") else {
        return Ok(());
    };
    random_sizes::<G2Affine>(6)
}
