//! Fake parameters: well-formed parameter files full of cheap pseudo-random
//! curve points, for timing at sizes where a real setup is too slow.
//!
//! Every query has the length a real setup for the circuit would give, so
//! the prover does exactly the work it does with real parameters, but the
//! points come from no toxic waste: proofs made with them never verify. Fake
//! parameters are recognisable from the file alone: their alpha_g1 is a fixed
//! point hashed from a marker string ([`is_fake`]), and everything that
//! proves or verifies with them says so loudly.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use bellperson::groth16::{Parameters, VerifyingKey};
use blstrs::{Fp, Fp2, G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use cuzk_synth::Pce;
use ff::Field;
use group::prime::PrimeCurveAffine;
use group::{Curve, Group};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use rayon::prelude::*;

use crate::params::write_atomically;
use crate::{Bls12, Result};

const MARKER: &[u8] = b"cuzk fake parameters: proofs made with these never verify";
const DST: &[u8] = b"CUZK-FAKE-PARAMS-V1";
/// Points generated (and normalised with one inversion) per parallel task.
const CHUNK: usize = 1 << 14;

/// alpha_g1 of every fake parameter file.
pub fn fake_alpha_g1() -> G1Affine {
    G1Projective::hash_to_curve(MARKER, DST, &[]).to_affine()
}

/// Whether a verifying key belongs to fake parameters.
pub fn is_fake(vk: &VerifyingKey<Bls12>) -> bool {
    vk.alpha_g1 == fake_alpha_g1()
}

/// Replaces every nonzero element of `v` by its inverse (zeros stay zero)
/// with one field inversion (Montgomery's trick); `prefix` is scratch.
fn invert_all<F: Field>(v: &mut [F], prefix: &mut Vec<F>) {
    prefix.clear();
    let mut acc = F::ONE;
    for x in v.iter() {
        prefix.push(acc);
        if !bool::from(x.is_zero()) {
            acc *= x;
        }
    }
    let mut inv = acc.invert().unwrap_or(F::ZERO);
    for (x, before) in v.iter_mut().zip(prefix.iter()).rev() {
        if bool::from(x.is_zero()) {
            continue;
        }
        let xinv = inv * before;
        inv *= *x;
        *x = xinv;
    }
}

/// `fn $name(&[$proj], &mut [$aff])`: affine forms of Jacobian points with
/// one field inversion for the whole slice, written into `out` (as long as
/// `points`). The identity maps to the identity.
macro_rules! normalize {
    ($name:ident, $proj:ty, $aff:ty, $field:ty) => {
        fn $name(points: &[$proj], out: &mut [$aff]) {
            debug_assert_eq!(points.len(), out.len());
            let mut zinv: Vec<$field> = points.iter().map(|p| p.z()).collect();
            invert_all(&mut zinv, &mut Vec::with_capacity(points.len()));
            for ((p, zinv), o) in points.iter().zip(zinv).zip(out.iter_mut()) {
                *o = if bool::from(zinv.is_zero()) {
                    <$aff>::default()
                } else {
                    let zinv2 = zinv.square();
                    <$aff>::from_raw_unchecked(p.x() * zinv2, p.y() * zinv2 * zinv, false)
                };
            }
        }
    };
}

normalize!(normalize_g1, G1Projective, G1Affine, Fp);
normalize!(normalize_g2, G2Projective, G2Affine, Fp2);

/// Lanes of a chunk that step together (see `progression!`).
const LANES: usize = 512;

/// `fn $name(start, step, first, out)`: the points (start + i·step)·G for
/// i in first..first + out.len(), into `out`, in affine additions. `out`
/// is cut into up to [`LANES`] runs; each run's first point comes from a
/// projective progression by the run's length (normalised together), then
/// every run adds the affine step to its last point, all runs at once with
/// one inversion per round (Montgomery's trick): about six field
/// multiplications a point. A sum whose two points share x (the step
/// itself, its negation) or start from the identity takes the projective
/// addition instead.
macro_rules! progression {
    ($name:ident, $proj:ty, $aff:ty, $field:ty, $normalize:ident) => {
        fn $name(start: Scalar, step: Scalar, first: usize, out: &mut [$aff]) {
            let n = out.len();
            if n == 0 {
                return;
            }
            let g = <$proj>::generator();
            let step_a = (g * step).to_affine();
            let run = n.div_ceil(LANES);
            let lanes = n.div_ceil(run);
            // Each run's first point.
            let hop = (g * (step * Scalar::from(run as u64))).to_affine();
            let mut p = g * (start + step * Scalar::from(first as u64));
            let mut heads = Vec::with_capacity(lanes);
            for _ in 0..lanes {
                heads.push(p);
                p += &hop;
            }
            let mut heads_a = vec![<$aff>::default(); lanes];
            $normalize(&heads, &mut heads_a);
            for (l, h) in heads_a.into_iter().enumerate() {
                out[l * run] = h;
            }
            let (sx, sy) = (step_a.x(), step_a.y());
            let mut dinv = Vec::with_capacity(lanes);
            let mut scratch = Vec::with_capacity(lanes);
            for k in 1..run {
                // Lanes 0..live have a point k. A zero stands for a sum the
                // affine formula cannot make (identity, or x shared).
                let live = (0..lanes).take_while(|l| l * run + k < n).count();
                dinv.clear();
                dinv.extend((0..live).map(|l| {
                    let prev = &out[l * run + k - 1];
                    if bool::from(prev.is_identity()) {
                        <$field>::ZERO
                    } else {
                        sx - prev.x()
                    }
                }));
                invert_all(&mut dinv, &mut scratch);
                for (l, dinv) in dinv.iter().enumerate() {
                    let i = l * run + k;
                    let prev = out[i - 1];
                    if bool::from(dinv.is_zero()) {
                        out[i] = (<$proj>::from(prev) + step_a).to_affine();
                        continue;
                    }
                    let (px, py) = (prev.x(), prev.y());
                    let lambda = (sy - py) * dinv;
                    let x3 = lambda.square() - px - sx;
                    let y3 = lambda * (px - x3) - py;
                    out[i] = <$aff>::from_raw_unchecked(x3, y3, false);
                }
            }
        }
    };
}

progression!(g1_fill, G1Projective, G1Affine, Fp, normalize_g1);
progression!(g2_fill, G2Projective, G2Affine, Fp2, normalize_g2);

/// `count` points start·G + i·step·G for i in first..first + count.
fn g1_points(start: Scalar, step: Scalar, count: usize, first: usize) -> Vec<G1Affine> {
    let mut out = vec![G1Affine::default(); count];
    g1_fill(start, step, first, &mut out);
    out
}

/// The same in G2.
fn g2_points(start: Scalar, step: Scalar, count: usize, first: usize) -> Vec<G2Affine> {
    let mut out = vec![G2Affine::default(); count];
    g2_fill(start, step, first, &mut out);
    out
}

/// Writes a section: a u32 count and `count` points, produced chunk by chunk
/// so memory stays bounded whatever the size.
fn write_section<W: Write, P: Send>(
    w: &mut W,
    count: usize,
    mut seeds: impl FnMut() -> (Scalar, Scalar),
    make: impl Fn(Scalar, Scalar, usize, usize) -> Vec<P> + Sync,
    encode: impl Fn(&P) -> Vec<u8> + Sync,
) -> std::io::Result<()> {
    let count32 = u32::try_from(count).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "more than 2^32 points in one query",
        )
    })?;
    w.write_all(&count32.to_be_bytes())?;
    let (start, step) = seeds();
    // Several chunks per batch in parallel, written in order.
    let batch = CHUNK * rayon::current_num_threads().max(1) * 2;
    let mut done = 0;
    while done < count {
        let n = batch.min(count - done);
        let bytes: Vec<Vec<u8>> = (0..n.div_ceil(CHUNK))
            .into_par_iter()
            .map(|c| {
                let first = done + c * CHUNK;
                let len = CHUNK.min(done + n - first);
                make(start, step, len, first)
                    .iter()
                    .flat_map(&encode)
                    .collect()
            })
            .collect();
        for b in bytes {
            w.write_all(&b)?;
        }
        done += n;
    }
    Ok(())
}

/// The verifying key of fake parameters, from the first seed pair.
fn fake_vk(pce: &Pce, seeds: &mut impl FnMut() -> (Scalar, Scalar)) -> VerifyingKey<Bls12> {
    let (s, t) = seeds();
    let vk_g1 = g1_points(s, t, 2 + pce.num_inputs, 0);
    let vk_g2 = g2_points(s, t, 3, 0);
    VerifyingKey::<Bls12> {
        alpha_g1: fake_alpha_g1(),
        beta_g1: vk_g1[0],
        beta_g2: vk_g2[0],
        gamma_g2: vk_g2[1],
        delta_g1: vk_g1[1],
        delta_g2: vk_g2[2],
        ic: vk_g1[2..].to_vec(),
    }
}

fn seeds_of(seed: u64) -> impl FnMut() -> (Scalar, Scalar) {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    move || (Scalar::random(&mut rng), Scalar::random(&mut rng))
}

/// Writes fake parameters for the circuit recorded in `pce` to `path`
/// (atomically, streaming: memory use does not grow with the circuit).
pub fn write_fake_params(path: &Path, pce: &Pce, seed: u64) -> Result<()> {
    let _s = tracing::info_span!("fake_params", path = %path.display()).entered();
    let mut seeds = seeds_of(seed);
    let g1 = |p: &G1Affine| p.to_uncompressed().to_vec();
    let g2 = |p: &G2Affine| p.to_uncompressed().to_vec();
    let vk = fake_vk(pce, &mut seeds);
    let b_len = pce.b_query_len();
    write_atomically(path, |w| {
        vk.write(&mut *w)?;
        write_section(w, pce.domain_size() - 1, &mut seeds, g1_points, g1)?;
        write_section(w, pce.num_aux, &mut seeds, g1_points, g1)?;
        write_section(w, pce.a_query_len(), &mut seeds, g1_points, g1)?;
        write_section(w, b_len, &mut seeds, g1_points, g1)?;
        write_section(w, b_len, &mut seeds, g2_points, g2)
    })
}

/// One query's points, generated in parallel chunks straight into the
/// vector, allocated once at its size (no copies as it grows, no second
/// copy at the peak).
fn section<P: Send + Sync + Default + Copy>(
    count: usize,
    (start, step): (Scalar, Scalar),
    fill: impl Fn(Scalar, Scalar, usize, &mut [P]) + Sync,
) -> Vec<P> {
    let mut out: Vec<P> = (0..count).into_par_iter().map(|_| P::default()).collect();
    out.par_chunks_mut(CHUNK)
        .enumerate()
        .for_each(|(c, chunk)| fill(start, step, c * CHUNK, chunk));
    out
}

/// The same parameters as [`write_fake_params`] writes for `pce` and
/// `seed`, in memory: for benchmarks that need no file.
pub fn fake_params(pce: &Pce, seed: u64) -> Parameters<Bls12> {
    let _s = tracing::info_span!("fake_params_in_memory").entered();
    let mut seeds = seeds_of(seed);
    let vk = fake_vk(pce, &mut seeds);
    let b_len = pce.b_query_len();
    let h = section(pce.domain_size() - 1, seeds(), g1_fill);
    let l = section(pce.num_aux, seeds(), g1_fill);
    let a = section(pce.a_query_len(), seeds(), g1_fill);
    let b_g1 = section(b_len, seeds(), g1_fill);
    let b_g2 = section(b_len, seeds(), g2_fill);
    Parameters {
        vk,
        h: Arc::new(h),
        l: Arc::new(l),
        a: Arc::new(a),
        b_g1: Arc::new(b_g1),
        b_g2: Arc::new(b_g2),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_normalisation_matches_to_affine() {
        let g = G1Projective::generator();
        let pts: Vec<G1Projective> = (0..50u64)
            .map(|i| {
                if i == 7 {
                    G1Projective::identity()
                } else {
                    g * Scalar::from(i * i + 3)
                }
            })
            .collect();
        let mut ours = vec![G1Projective::generator().to_affine(); pts.len()];
        normalize_g1(&pts, &mut ours);
        for (p, a) in pts.iter().zip(&ours) {
            assert_eq!(p.to_affine(), *a);
        }
        // The identity first, last and alone.
        for pts in [
            vec![G1Projective::identity(), g, g * Scalar::from(9)],
            vec![g * Scalar::from(2), G1Projective::identity()],
            vec![G1Projective::identity()],
        ] {
            let mut ours = vec![G1Projective::generator().to_affine(); pts.len()];
            normalize_g1(&pts, &mut ours);
            let want: Vec<G1Affine> = pts.iter().map(|p| p.to_affine()).collect();
            assert_eq!(ours, want);
        }
        let g2 = G2Projective::generator();
        let pts: Vec<G2Projective> = (0..20u64).map(|i| g2 * Scalar::from(i + 1)).collect();
        let mut ours = vec![G2Projective::generator().to_affine(); pts.len()];
        normalize_g2(&pts, &mut ours);
        for (p, a) in pts.iter().zip(ours) {
            assert_eq!(p.to_affine(), a);
        }
    }

    #[test]
    fn points_are_the_arithmetic_progression() {
        let (s, t) = (Scalar::from(5), Scalar::from(11));
        let a = g1_points(s, t, 10, 0);
        let b = g1_points(s, t, 4, 6);
        assert_eq!(&a[6..], &b[..]);
        assert_eq!(
            a[3],
            (G1Projective::generator() * Scalar::from(5 + 33)).to_affine()
        );
        let g2 = g2_points(s, t, 5, 2);
        assert_eq!(
            g2[4],
            (G2Projective::generator() * Scalar::from(5 + 66)).to_affine()
        );
        // Every length around the lanes' rounding, against one scalar
        // multiplication a point.
        for n in [1, 2, LANES - 1, LANES, LANES + 1, 2 * LANES + 7] {
            let pts = g1_points(s, t, n, 3);
            for (i, p) in pts.iter().enumerate() {
                let e = s + t * Scalar::from((i + 3) as u64);
                assert_eq!(
                    *p,
                    (G1Projective::generator() * e).to_affine(),
                    "n {n}, i {i}"
                );
            }
        }
        let pts = g2_points(s, t, LANES + 5, 1);
        for i in [0, 1, 2, LANES - 1, LANES, LANES + 4] {
            let e = s + t * Scalar::from((i + 1) as u64);
            assert_eq!(
                pts[i],
                (G2Projective::generator() * e).to_affine(),
                "g2 {i}"
            );
        }
        // Runs of two points (2·LANES of them): each odd point is an
        // affine addition to the even one before it. From -2·step, point 3
        // adds the step to the identity; from -step, point 1 adds it to its
        // negation and point 3 to itself (x shared: the projective
        // fallback), giving the identity and 2·step.
        for k in [2u64, 1] {
            let start = -(t * Scalar::from(k));
            let pts = g1_points(start, t, 2 * LANES, 0);
            for (i, p) in pts.iter().enumerate().take(8) {
                let e = start + t * Scalar::from(i as u64);
                assert_eq!(
                    *p,
                    (G1Projective::generator() * e).to_affine(),
                    "-{k}·step, {i}"
                );
            }
            let zero = usize::try_from(k).unwrap();
            assert!(bool::from(pts[zero].is_identity()));
        }
        // In parallel chunks as the in-memory parameters are, across a
        // chunk boundary: the same points as one run.
        let n = CHUNK + 3;
        assert_eq!(section(n, (s, t), g1_fill), g1_points(s, t, n, 0));
    }

    #[test]
    fn in_memory_fake_params_equal_the_file() {
        let spec: cuzk_synth::circuits::CircuitSpec = "porep:8".parse().unwrap();
        let pce = Pce::record(spec.build(0)).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fake.params");
        write_fake_params(&path, &pce, 9).unwrap();
        let mut file = Vec::new();
        fake_params(&pce, 9).write(&mut file).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), file);
        assert!(is_fake(&fake_params(&pce, 9).vk));
    }
}
