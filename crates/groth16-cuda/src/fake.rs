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

/// `fn $name(&[$proj]) -> Vec<$aff>`: affine forms of Jacobian points with
/// one field inversion for the whole slice (Montgomery's trick). The
/// identity maps to the identity.
macro_rules! normalize {
    ($name:ident, $proj:ty, $aff:ty, $field:ty) => {
        fn $name(points: &[$proj]) -> Vec<$aff> {
            let zs: Vec<$field> = points.iter().map(|p| p.z()).collect();
            batch_invert(
                zs,
                |z| z.is_zero().into(),
                |a, b| a * b,
                |z| z.invert().unwrap_or(<$field>::ZERO),
            )
            .into_iter()
            .zip(points)
            .map(|(zinv, p)| {
                if bool::from(p.is_identity()) {
                    return <$aff>::default();
                }
                let zinv2 = zinv.square();
                <$aff>::from_raw_unchecked(p.x() * zinv2, p.y() * zinv2 * zinv, false)
            })
            .collect()
        }
    };
}

normalize!(normalize_g1, G1Projective, G1Affine, Fp);
normalize!(normalize_g2, G2Projective, G2Affine, Fp2);

/// Inverses of every element (zeros stay zero) with a single inversion.
fn batch_invert<F: Copy>(
    v: Vec<F>,
    is_zero: impl Fn(&F) -> bool,
    mul: impl Fn(F, F) -> F,
    invert: impl Fn(F) -> F,
) -> Vec<F> {
    let mut prefix = Vec::with_capacity(v.len());
    let mut acc: Option<F> = None;
    for x in &v {
        if !is_zero(x) {
            acc = Some(acc.map_or(*x, |a| mul(a, *x)));
        }
        prefix.push(acc);
    }
    let Some(total) = acc else { return v };
    let mut inv = invert(total);
    let mut out = v.clone();
    for i in (0..v.len()).rev() {
        if is_zero(&v[i]) {
            continue;
        }
        match i.checked_sub(1).and_then(|j| prefix[j]) {
            Some(before) => {
                out[i] = mul(inv, before);
                inv = mul(inv, v[i]);
            }
            None => out[i] = inv,
        }
    }
    out
}

/// `count` points start·G + i·step·G for i in 0..count, in chunks.
fn g1_points(start: Scalar, step: Scalar, count: usize, first: usize) -> Vec<G1Affine> {
    let g = G1Projective::generator();
    let step_p = g * step;
    let mut p = g * (start + step * Scalar::from(first as u64));
    let mut v = Vec::with_capacity(count);
    for _ in 0..count {
        v.push(p);
        p += step_p;
    }
    normalize_g1(&v)
}

fn g2_points(start: Scalar, step: Scalar, count: usize, first: usize) -> Vec<G2Affine> {
    let g = G2Projective::generator();
    let step_p = g * step;
    let mut p = g * (start + step * Scalar::from(first as u64));
    let mut v = Vec::with_capacity(count);
    for _ in 0..count {
        v.push(p);
        p += step_p;
    }
    normalize_g2(&v)
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

/// One query's points, generated in parallel chunks.
fn section<P: Send>(
    count: usize,
    (start, step): (Scalar, Scalar),
    make: impl Fn(Scalar, Scalar, usize, usize) -> Vec<P> + Sync,
) -> Vec<P> {
    (0..count.div_ceil(CHUNK))
        .into_par_iter()
        .flat_map_iter(|c| {
            let first = c * CHUNK;
            make(start, step, CHUNK.min(count - first), first)
        })
        .collect()
}

/// The same parameters as [`write_fake_params`] writes for `pce` and
/// `seed`, in memory: for benchmarks that need no file.
pub fn fake_params(pce: &Pce, seed: u64) -> Parameters<Bls12> {
    let _s = tracing::info_span!("fake_params_in_memory").entered();
    let mut seeds = seeds_of(seed);
    let vk = fake_vk(pce, &mut seeds);
    let b_len = pce.b_query_len();
    let h = section(pce.domain_size() - 1, seeds(), g1_points);
    let l = section(pce.num_aux, seeds(), g1_points);
    let a = section(pce.a_query_len(), seeds(), g1_points);
    let b_g1 = section(b_len, seeds(), g1_points);
    let b_g2 = section(b_len, seeds(), g2_points);
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
        let ours = normalize_g1(&pts);
        for (p, a) in pts.iter().zip(&ours) {
            assert_eq!(p.to_affine(), *a);
        }
        let g2 = G2Projective::generator();
        let pts: Vec<G2Projective> = (0..20u64).map(|i| g2 * Scalar::from(i + 1)).collect();
        for (p, a) in pts.iter().zip(normalize_g2(&pts)) {
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
