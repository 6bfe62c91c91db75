//! What the GPU benches share (`#[path]`-included; not a bench itself):
//! sizes from the environment, the GPU check, and cheap random inputs.

#![allow(dead_code)] // each bench uses part of it

use blstrs::{G1Affine, G1Projective, Scalar};
use cuzk_gpu_sched::testing::gpu_or_skip;
use ff::Field;
use group::{Curve, Group};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;

/// log2 sizes from `CUZK_BENCH_LOG2` (comma-separated), else `default`.
pub fn sizes(default: &[u32]) -> Vec<u32> {
    match std::env::var("CUZK_BENCH_LOG2") {
        Ok(v) if !v.trim().is_empty() => v
            .split(',')
            .map(|s| {
                s.trim()
                    .parse()
                    .unwrap_or_else(|_| panic!("CUZK_BENCH_LOG2={v}: not a list of log2 sizes"))
            })
            .collect(),
        _ => default.to_vec(),
    }
}

/// Whether to run: true with a GPU; without one, prints the tests' skip
/// line (`skipping <what>: no CUDA device (...)`) and returns false, so the
/// bench registers nothing. With `CUZK_REQUIRE_GPU=1` a missing GPU panics,
/// as it does in the tests.
pub fn have_gpu(what: &str) -> bool {
    gpu_or_skip(what).is_some()
}

/// n random G1 points: per chunk a random start and repeated additions of a
/// random step, normalised in one batch (hashing to the curve n times would
/// take minutes at 2^24).
pub fn random_points(n: usize, seed: u64) -> Vec<G1Affine> {
    let chunk = 1 << 16;
    let mut out = vec![G1Affine::default(); n];
    out.par_chunks_mut(chunk).enumerate().for_each(|(i, o)| {
        let mut rng =
            ChaCha20Rng::seed_from_u64(seed ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let step = G1Projective::random(&mut rng);
        let mut p = G1Projective::random(&mut rng);
        let mut proj = Vec::with_capacity(o.len());
        for _ in 0..o.len() {
            proj.push(p);
            p += step;
        }
        G1Projective::batch_normalize(&proj, o);
    });
    out
}

/// What MSM scalars look like.
#[derive(Clone, Copy, Debug)]
pub enum Scalars {
    /// Full-width random.
    Random,
    /// As in Filecoin's circuits: 35% zeros, 35% ones, the rest random.
    Filecoin,
}

impl Scalars {
    pub fn name(self) -> &'static str {
        match self {
            Scalars::Random => "random",
            Scalars::Filecoin => "filecoin",
        }
    }

    /// n scalars of this kind.
    pub fn make(self, n: usize, seed: u64) -> Vec<Scalar> {
        let chunk = 1 << 16;
        let mut out = vec![Scalar::ZERO; n];
        out.par_chunks_mut(chunk).enumerate().for_each(|(i, o)| {
            let mut rng = ChaCha20Rng::seed_from_u64(
                seed ^ (i as u64 + 1).wrapping_mul(0xd1b5_4a32_d192_ed03),
            );
            for s in o {
                *s = match self {
                    Scalars::Random => Scalar::random(&mut rng),
                    Scalars::Filecoin => match rng.gen_range(0..100) {
                        0..35 => Scalar::ZERO,
                        35..70 => Scalar::ONE,
                        _ => Scalar::random(&mut rng),
                    },
                };
            }
        });
        out
    }
}
