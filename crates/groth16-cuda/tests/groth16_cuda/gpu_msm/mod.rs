//! GPU multi-scalar multiplication (modules `msm`, `msm_g1`, `msm_g2`)
//! against bellperson's CPU multiexp (ec-gpu-gen's `multiexp_cpu`, as the
//! CPU backend calls it) and, for the large random sizes, blst's multi-exp:
//! edge cases (n = 1, all-zero, all-one, p-1, repeated bases, bases that are
//! each other's negation, the identity among the bases, one giant bucket,
//! sizes that are not powers of two, every window size class, several
//! sorting passes), bellperson's density-filtered A and B layouts, and
//! random sizes up to 2^22 (`CUZK_TEST_LOG2` sets the largest log2 size),
//! and MSMs carried over chunks (a streamed query's buckets summed chunk by
//! chunk, reduced once) with and without densities, and MSMs over bases
//! carrying their window multiples (and those multiples against their CPU
//! twin).
//! Each case runs on G1 and G2. Skips without a GPU; fails instead when
//! `CUZK_REQUIRE_GPU=1`.
//!
//! The CPU references, random inputs and the compare-with-the-CPU check are
//! here; the cases are in one file per area.

mod carried;
mod density;
mod edge_cases;
mod misuse;
mod random_sizes;
mod window_multiples;

use std::sync::Arc;

use anyhow::Result;
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use cuzk_groth16_cuda::cuda::Gpu;
use cuzk_groth16_cuda::msm::{DeviceBases, GpuMsm, MsmAffine};
use ec_gpu_gen::multiexp_cpu::{FullDensity, multiexp_cpu};
use ec_gpu_gen::threadpool::Worker;
use ff::{Field, PrimeField};
use group::prime::PrimeCurveAffine;
use group::{Curve, Group};
use rand::Rng;
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;

pub(super) fn max_log2() -> u32 {
    std::env::var("CUZK_TEST_LOG2")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(22)
}

/// The curve-specific parts the tests need, for G1 and G2 alike.
pub(super) trait TestCurve:
    PrimeCurveAffine<Scalar = Scalar>
    + MsmAffine<Projective = <Self as PrimeCurveAffine>::Curve>
    + Send
    + Sync
{
    const NAME: &'static str;
    /// blst's multi-threaded Pippenger (the fast reference).
    fn blst_multi_exp(points: &[Self::Curve], scalars: &[Scalar]) -> Self::Curve;
}

impl TestCurve for G1Affine {
    const NAME: &'static str = "G1";
    fn blst_multi_exp(points: &[G1Projective], scalars: &[Scalar]) -> G1Projective {
        G1Projective::multi_exp(points, scalars)
    }
}

impl TestCurve for G2Affine {
    const NAME: &'static str = "G2";
    fn blst_multi_exp(points: &[G2Projective], scalars: &[Scalar]) -> G2Projective {
        G2Projective::multi_exp(points, scalars)
    }
}

/// n random points, cheaply: 64 random starts, then repeated additions of
/// a random step, normalised in parallel.
pub(super) fn random_points<A: TestCurve>(n: usize, rng: &mut ChaCha20Rng) -> Vec<A> {
    let starts: Vec<A::Curve> = (0..64).map(|_| A::Curve::random(&mut *rng)).collect();
    let step = A::Curve::random(&mut *rng);
    let per = n.div_ceil(64).max(1);
    let proj: Vec<A::Curve> = starts
        .par_iter()
        .flat_map_iter(|s| std::iter::successors(Some(*s), move |p| Some(*p + step)).take(per))
        .collect();
    let mut out = vec![A::identity(); proj.len()];
    out.par_chunks_mut(4096)
        .zip(proj.par_chunks(4096))
        .for_each(|(o, p)| A::Curve::batch_normalize(p, o));
    out.truncate(n);
    out
}

pub(super) fn random_scalars(n: usize, rng: &mut ChaCha20Rng) -> Vec<Scalar> {
    (0..n).map(|_| Scalar::random(&mut *rng)).collect()
}

/// Filecoin-shaped: 35% zeros, 35% ones, the rest random.
pub(super) fn filecoin_scalars(n: usize, rng: &mut ChaCha20Rng) -> Vec<Scalar> {
    (0..n)
        .map(|_| match rng.gen_range(0..100) {
            0..35 => Scalar::ZERO,
            35..70 => Scalar::ONE,
            _ => Scalar::random(&mut *rng),
        })
        .collect()
}

pub(super) fn reprs(v: &[Scalar]) -> Arc<Vec<[u8; 32]>> {
    Arc::new(v.iter().map(|s| s.to_repr()).collect())
}

/// bellperson's CPU multiexp of `scalars` with the first `scalars.len()`
/// bases. It refuses identity bases ("an identity element in the CRS"), so
/// their terms, which are the identity whatever the scalar, are left out.
pub(super) fn cpu_msm<A: TestCurve>(bases: &[A], scalars: &[Scalar]) -> A::Curve {
    let (b, s): (Vec<A>, Vec<Scalar>) = bases
        .iter()
        .zip(scalars)
        .filter(|(b, _)| !bool::from(b.is_identity()))
        .map(|(b, s)| (*b, *s))
        .unzip();
    multiexp_cpu::<_, _, A, _>(&Worker::new(), (Arc::new(b), 0), FullDensity, reprs(&s))
        .wait()
        .expect("CPU multiexp")
}

pub(super) fn gpu() -> Arc<Gpu> {
    Gpu::get(0).expect("GPU 0")
}

pub(super) fn check<A: TestCurve>(
    msm: &GpuMsm,
    what: &str,
    bases: &DeviceBases<A>,
    host_bases: &[A],
    scalars: &[Scalar],
) -> Result<()> {
    let d = msm.gpu().upload(scalars)?;
    let got = msm.msm(bases, &d, None)?;
    let want = cpu_msm(host_bases, scalars);
    assert_eq!(
        got.to_affine(),
        want.to_affine(),
        "{} {what}: n = {}, config {:?}",
        A::NAME,
        scalars.len(),
        msm.config()
    );
    Ok(())
}
