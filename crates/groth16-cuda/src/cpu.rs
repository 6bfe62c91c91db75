//! The CPU backend: bellperson's own building blocks (its `EvaluationDomain`
//! for H, its CPU multiexp for the MSMs with a density) fed from cuzk's PCE
//! and witness; the two dense G1 MSMs (H and L, most of a proof's time on
//! the CPU) on blst's multi-threaded Pippenger, the curve library blstrs
//! wraps ([`dense_g1`]; tested equal to bellperson's multiexp). It is the
//! reference that every GPU routine is tested against, and every proof it
//! makes is tested byte-identical to bellperson's `create_proof`.

use std::sync::Arc;

mod ntt;

use bellperson::groth16::Parameters;
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use cuzk_synth::{Abc, Density, Pce};
use ec_gpu_gen::multiexp_cpu::{
    DensityTracker, FullDensity, QueryDensity, SourceBuilder, multiexp_cpu,
};
use ec_gpu_gen::threadpool::Worker;
use ff::{Field, PrimeField};
use group::Group;
use group::prime::PrimeCurveAffine;
use rayon::prelude::*;

use crate::prover::{AbcInput, MsmResults, Prover, ProverInput, StageTimings, Staged};
use crate::{Bls12, Groth16Error, Result, check_params};

/// The CPU prover.
#[derive(Debug, Default, Clone, Copy)]
pub struct CpuProver;

impl Prover for CpuProver {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn prepare(
        &self,
        input: ProverInput<'_>,
        params: &Parameters<Bls12>,
        timings: &mut StageTimings,
    ) -> Result<Staged> {
        check_params(params, input.pce)?;
        cuzk_synth::spmv::check_shape(input.pce, input.witness)?;
        Ok(match input.abc {
            AbcInput::Evaluated { .. } => Staged::default(),
            AbcInput::FromPce => Staged::new(
                timings.time("spmv", || cuzk_synth::evaluate(input.pce, input.witness))?,
            ),
        })
    }

    fn kernel_region(
        &self,
        input: ProverInput<'_>,
        params: &Parameters<Bls12>,
        staged: Staged,
        timings: &mut StageTimings,
    ) -> Result<MsmResults> {
        let owned = staged.take::<Abc>();
        let (a, b, c) = match (input.abc, &owned) {
            (AbcInput::Evaluated { a, b, c }, _) => (a, b, c),
            (AbcInput::FromPce, Some(abc)) => (&abc.a[..], &abc.b[..], &abc.c[..]),
            (AbcInput::FromPce, None) => {
                return Err(Groth16Error::NotPrepared {
                    backend: self.name(),
                });
            }
        };
        let h = timings.time("h (ntt)", || compute_h(a, b, c))?;
        msms(input.pce, input.witness, params, &h, timings)
    }
}

/// The m-1 coefficients of h = (a·b - c) / Z, computed exactly as
/// bellperson's prover does: iNTT of a, b, c; coset NTT; a·b - c; division
/// by Z on the coset; inverse coset NTT. The transforms are [`ntt`]'s
/// (bellperson's values, in about half its multiplications).
pub fn compute_h(a: &[Scalar], b: &[Scalar], c: &[Scalar]) -> Result<Vec<Scalar>> {
    let n = a.len();
    for (what, v) in [("b", b), ("c", c)] {
        if v.len() != n {
            return Err(cuzk_synth::SynthError::LengthMismatch {
                what,
                expected: n,
                found: v.len(),
            }
            .into());
        }
    }
    let m = n.max(1).next_power_of_two();
    let log2 = m.trailing_zeros();
    if log2 >= Scalar::S {
        return Err(Groth16Error::DomainTooLarge { constraints: n });
    }
    let domain = ntt::Domain::new(log2);
    let padded = |v: &[Scalar]| {
        let mut p = Vec::with_capacity(m);
        p.extend_from_slice(v);
        p.resize(m, Scalar::ZERO);
        domain.ifft(&mut p);
        domain.coset_fft(&mut p);
        p
    };
    let mut h = padded(a);
    let b = padded(b);
    h.par_iter_mut().zip(&b).for_each(|(x, y)| *x *= y);
    drop(b);
    let c = padded(c);
    h.par_iter_mut().zip(&c).for_each(|(x, y)| *x -= y);
    drop(c);
    domain.divide_by_z_on_coset(&mut h);
    domain.icoset_fft(&mut h);
    h.truncate(m - 1);
    Ok(h)
}

fn reprs(v: &[Scalar]) -> Arc<Vec<[u8; 32]>> {
    Arc::new(v.par_iter().map(|s| s.to_repr()).collect())
}

fn tracker(d: &Density) -> Arc<DensityTracker> {
    let mut t = DensityTracker::new();
    for (i, used) in d.iter().enumerate() {
        t.add_element();
        if used {
            t.inc(i);
        }
    }
    Arc::new(t)
}

fn msm<G, D, Q>(
    what: &'static str,
    worker: &Worker,
    bases: (Arc<Vec<G>>, usize),
    density: D,
    exps: Arc<Vec<[u8; 32]>>,
) -> Result<G::Curve>
where
    G: PrimeCurveAffine<Scalar = Scalar>,
    (Arc<Vec<G>>, usize): SourceBuilder<G>,
    for<'a> &'a Q: QueryDensity,
    D: Send + Sync + 'static + Clone + AsRef<Q>,
{
    multiexp_cpu(worker, bases, density, exps)
        .wait()
        .map_err(|e| Groth16Error::Msm {
            what,
            detail: e.to_string(),
        })
}

/// `sum scalars[i] * bases[i]` over every scalar (the first
/// `scalars.len()` bases), on blst's Pippenger with its own thread pool:
/// the sum bellperson's multiexp computes (a group element has one
/// value, whatever the algorithm), in a fraction of the time. Refused as
/// bellperson's multiexp refuses it: fewer bases than scalars, and the
/// identity as a base with a nonzero scalar (no parameter file holds one).
pub fn dense_g1(
    what: &'static str,
    bases: &[G1Affine],
    scalars: &[Scalar],
) -> Result<G1Projective> {
    use blst::{MultiPoint, blst_p1, blst_p1_affine};
    if bases.len() < scalars.len() {
        return Err(Groth16Error::Msm {
            what,
            detail: format!("{} scalars but only {} bases", scalars.len(), bases.len()),
        });
    }
    if scalars.is_empty() {
        return Ok(G1Projective::identity());
    }
    let bases = &bases[..scalars.len()];
    let identity = bases
        .par_iter()
        .zip(scalars)
        .position_any(|(b, s)| bool::from(b.is_identity()) && !bool::from(s.is_zero()));
    if let Some(i) = identity {
        return Err(Groth16Error::Msm {
            what,
            detail: format!("base {i} is the identity (a damaged parameter file?)"),
        });
    }
    // SAFETY: blstrs' G1Affine is `#[repr(transparent)]` over
    // blst_p1_affine, so a slice of one is a slice of the other.
    let points: &[blst_p1_affine] =
        unsafe { std::slice::from_raw_parts(bases.as_ptr().cast::<blst_p1_affine>(), bases.len()) };
    let bytes: Vec<u8> = scalars
        .par_iter()
        .flat_map_iter(|s| s.to_bytes_le())
        .collect();
    let sum: blst_p1 = points.mult(&bytes, 255);
    // SAFETY: blstrs' G1Projective is `#[repr(transparent)]` over blst_p1
    // (the same Jacobian coordinates blst returns).
    Ok(unsafe { std::mem::transmute::<blst_p1, G1Projective>(sum) })
}

/// The five MSMs, with bellperson's query layout: `a` is all inputs then the
/// aux used in A; `b_g1`/`b_g2` are the inputs used in B then the aux used in B.
pub fn msms(
    pce: &Pce,
    witness: &cuzk_synth::Witness,
    params: &Parameters<Bls12>,
    h: &[Scalar],
    timings: &mut StageTimings,
) -> Result<MsmResults> {
    let worker = Worker::new();
    let inputs = reprs(&witness.inputs);
    let aux = reprs(&witness.aux);
    let a_aux = tracker(&pce.a_aux_density);
    let b_in = tracker(&pce.b_input_density);
    let b_aux = tracker(&pce.b_aux_density);
    let b_in_count = pce.b_input_density.count();

    let h = timings.time("msm h", || dense_g1("h", &params.h, h))?;
    let l = timings.time("msm l", || dense_g1("l", &params.l, &witness.aux))?;
    let a = timings.time("msm a", || -> Result<G1Projective> {
        let i = msm::<G1Affine, _, _>(
            "a",
            &worker,
            (params.a.clone(), 0),
            FullDensity,
            inputs.clone(),
        )?;
        let x = msm::<G1Affine, _, _>(
            "a",
            &worker,
            (params.a.clone(), pce.num_inputs),
            a_aux,
            aux.clone(),
        )?;
        Ok(i + x)
    })?;
    let b_g1 = timings.time("msm b_g1", || -> Result<G1Projective> {
        let i = msm::<G1Affine, _, _>(
            "b_g1",
            &worker,
            (params.b_g1.clone(), 0),
            b_in.clone(),
            inputs.clone(),
        )?;
        let x = msm::<G1Affine, _, _>(
            "b_g1",
            &worker,
            (params.b_g1.clone(), b_in_count),
            b_aux.clone(),
            aux.clone(),
        )?;
        Ok(i + x)
    })?;
    let b_g2 = timings.time("msm b_g2", || -> Result<G2Projective> {
        let i = msm::<G2Affine, _, _>("b_g2", &worker, (params.b_g2.clone(), 0), b_in, inputs)?;
        let x = msm::<G2Affine, _, _>(
            "b_g2",
            &worker,
            (params.b_g2.clone(), b_in_count),
            b_aux,
            aux,
        )?;
        Ok(i + x)
    })?;
    Ok(MsmResults {
        h,
        l,
        a,
        b_g1,
        b_g2,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use group::Curve;
    use rand_chacha::ChaCha20Rng;
    use rand_core::SeedableRng;

    /// H as bellperson's prover computes it, with its `EvaluationDomain`.
    fn bellpersons_h(a: &[Scalar], b: &[Scalar], c: &[Scalar]) -> Vec<Scalar> {
        use bellperson::domain::EvaluationDomain;
        let worker = Worker::new();
        let mut a = EvaluationDomain::from_coeffs(a.to_vec()).unwrap();
        let mut b = EvaluationDomain::from_coeffs(b.to_vec()).unwrap();
        let mut c = EvaluationDomain::from_coeffs(c.to_vec()).unwrap();
        EvaluationDomain::ifft_many(&mut [&mut a, &mut b, &mut c], &worker, &mut None).unwrap();
        EvaluationDomain::coset_fft_many(&mut [&mut a, &mut b, &mut c], &worker, &mut None)
            .unwrap();
        a.mul_assign(&worker, &b);
        a.sub_assign(&worker, &c);
        a.divide_by_z_on_coset(&worker);
        a.icoset_fft(&worker, &mut None).unwrap();
        let mut h = a.into_coeffs();
        h.truncate(h.len() - 1);
        h
    }

    #[test]
    fn compute_h_is_bellpersons() {
        let mut rng = ChaCha20Rng::seed_from_u64(11);
        for n in [1usize, 2, 3, 4, 5, 100, 1024, 1025, 5000] {
            let mut v = || -> Vec<Scalar> { (0..n).map(|_| Scalar::random(&mut rng)).collect() };
            let (a, b, mut c) = (v(), v(), v());
            c[0] = Scalar::ZERO;
            assert!(
                compute_h(&a, &b, &c).unwrap() == bellpersons_h(&a, &b, &c),
                "n = {n}"
            );
        }
        // A satisfied system (a·b = c): the same h either way.
        let a: Vec<Scalar> = (0..300).map(|_| Scalar::random(&mut rng)).collect();
        let b: Vec<Scalar> = (0..300).map(|_| Scalar::random(&mut rng)).collect();
        let c: Vec<Scalar> = a.iter().zip(&b).map(|(x, y)| x * y).collect();
        assert!(compute_h(&a, &b, &c).unwrap() == bellpersons_h(&a, &b, &c));
        let e = compute_h(&a, &b[..299], &c).unwrap_err();
        assert!(e.to_string().contains('b'), "{e}");
    }

    /// bellperson's multiexp (ec-gpu-gen's CPU Pippenger) of the same sum.
    fn bellperson(bases: &[G1Affine], scalars: &[Scalar]) -> G1Projective {
        msm::<G1Affine, _, _>(
            "test",
            &Worker::new(),
            (Arc::new(bases.to_vec()), 0),
            FullDensity,
            reprs(scalars),
        )
        .unwrap()
    }

    #[test]
    fn dense_g1_is_bellpersons_multiexp() {
        let mut rng = ChaCha20Rng::seed_from_u64(7);
        let minus_one = -Scalar::ONE;
        for n in [1usize, 2, 3, 31, 32, 33, 257, 4099] {
            let mut bases: Vec<G1Affine> = (0..n)
                .map(|_| G1Projective::random(&mut rng).to_affine())
                .collect();
            let mut scalars: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
            // Edge cases among random ones: the identity as a base (with
            // a zero scalar: bellperson refuses it with any other), zero,
            // one and p-1 as scalars, a base repeated and its negation.
            bases[0] = G1Affine::identity();
            scalars[0] = Scalar::ZERO;
            if n > 3 {
                scalars[1] = Scalar::ZERO;
                scalars[2] = minus_one;
                scalars[3] = Scalar::ONE;
                bases[n - 1] = bases[n - 2];
                bases[n - 3] = -bases[n - 2];
            }
            let extra = G1Projective::random(&mut rng).to_affine();
            let mut longer = bases.clone();
            longer.push(extra);
            let want = bellperson(&bases, &scalars);
            assert_eq!(dense_g1("t", &bases, &scalars).unwrap(), want, "n = {n}");
            // Bases beyond the scalars are not used.
            assert_eq!(
                dense_g1("t", &longer, &scalars).unwrap(),
                want,
                "n = {n}, one base more"
            );
        }
        // All scalars zero, or every base the identity: the identity.
        let bases: Vec<G1Affine> = (0..40)
            .map(|_| G1Projective::random(&mut rng).to_affine())
            .collect();
        assert_eq!(
            dense_g1("t", &bases, &[Scalar::ZERO; 40]).unwrap(),
            G1Projective::identity()
        );
        // The identity as a base with a nonzero scalar: refused by both.
        let scalars: Vec<Scalar> = (0..40).map(|_| Scalar::random(&mut rng)).collect();
        let mut with_identity = bases.clone();
        with_identity[17] = G1Affine::identity();
        let e = dense_g1("h", &with_identity, &scalars).unwrap_err();
        assert!(e.to_string().contains("base 17 is the identity"), "{e}");
        assert!(
            msm::<G1Affine, _, _>(
                "t",
                &Worker::new(),
                (Arc::new(with_identity), 0),
                FullDensity,
                reprs(&scalars),
            )
            .is_err()
        );
        // p-1 everywhere: minus the bases' sum.
        let sum: G1Projective = bases.iter().map(|b| b.to_curve()).sum();
        assert_eq!(dense_g1("t", &bases, &[minus_one; 40]).unwrap(), -sum);
    }

    #[test]
    fn dense_g1_of_nothing_is_the_identity_and_too_few_bases_an_error() {
        assert_eq!(dense_g1("t", &[], &[]).unwrap(), G1Projective::identity());
        let base = G1Affine::generator();
        let e = dense_g1("l", &[base], &[Scalar::ONE, Scalar::ONE]).unwrap_err();
        assert!(e.to_string().contains("2 scalars but only 1 bases"), "{e}");
    }
}
