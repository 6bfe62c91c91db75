//! Misuse is an error, not a wrong answer: too few bases, densities that do
//! not match, carried chunks past the scalars' end, a window the kernels do
//! not take; empty inputs give the identity.

use std::sync::Arc;

use anyhow::Result;
use blstrs::{G1Affine, Scalar};
use cuzk_gpu_sched::testing::gpu_or_skip;
use cuzk_groth16_cuda::Groth16Error;
use cuzk_groth16_cuda::msm::{DeviceBases, DeviceDensity, GpuMsm, MsmConfig};
use group::{Curve, Group};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

use super::{cpu_msm, gpu, random_points, random_scalars};

#[test]
fn misuse_is_an_error() -> Result<()> {
    let Some(_) = gpu_or_skip("misuse_is_an_error") else {
        return Ok(());
    };
    let gpu = gpu();
    let msm = GpuMsm::new(Arc::clone(&gpu));
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let host = random_points::<G1Affine>(10, &mut rng);
    let bases = DeviceBases::upload(&gpu, &host)?;
    let host_scalars = random_scalars(11, &mut rng);
    let scalars = gpu.upload(&host_scalars)?;
    let err = msm.g1(&bases, &scalars).unwrap_err();
    assert!(
        matches!(
            err,
            Groth16Error::MsmTooFewBases {
                needed: 11,
                available: 10
            }
        ),
        "{err}"
    );
    // A density longer than the scalars.
    let density = DeviceDensity::upload(&gpu, std::iter::repeat_n(false, 12), 12)?;
    let err = msm.g1_dense(&bases, &scalars, &density).unwrap_err();
    assert!(
        err.to_string().contains("density covers 12 variables"),
        "{err}"
    );
    // A density that uses more variables than there are bases.
    let density = DeviceDensity::upload(&gpu, std::iter::repeat_n(true, 11), 11)?;
    assert!(matches!(
        msm.g1_dense(&bases, &scalars, &density),
        Err(Groth16Error::MsmTooFewBases { .. })
    ));
    // A carried chunk whose scalars would run past the buffer's end, or
    // start past it.
    let density = DeviceDensity::upload(&gpu, std::iter::repeat_n(true, 4), 4)?;
    let mut carried = msm.carried::<G1Affine>(4, 1)?;
    let err = carried
        .add_at(&bases, &scalars, 8, Some(&density))
        .unwrap_err();
    assert!(err.to_string().contains("from 8 on"), "{err}");
    let err = carried
        .add_at(&bases, &scalars, 12, Some(&density))
        .unwrap_err();
    assert!(err.to_string().contains("start at 12"), "{err}");
    // The failed calls added nothing; the last four scalars, in place.
    carried.add_at(&bases, &scalars, 7, Some(&density))?;
    assert_eq!(
        carried.finish()?.to_affine(),
        cpu_msm(&host[..4], &host_scalars[7..]).to_affine()
    );
    // A density iterator that ends early.
    let err = DeviceDensity::upload(&gpu, std::iter::repeat_n(true, 3), 5).unwrap_err();
    assert!(err.to_string().contains("gave only 3"), "{err}");
    // A window the kernels do not take.
    let bad = GpuMsm::with_config(
        Arc::clone(&gpu),
        MsmConfig {
            window_bits: Some(25),
            ..MsmConfig::default()
        },
    );
    assert!(
        bad.g1(&bases, &gpu.upload(&random_scalars(10, &mut rng))?)
            .is_err()
    );
    // Empty inputs are the identity.
    let none = gpu.upload::<Scalar>(&[])?;
    assert!(bool::from(msm.g1(&bases, &none)?.is_identity()));
    Ok(())
}
