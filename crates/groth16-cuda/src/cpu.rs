//! The CPU backend: bellperson's own building blocks (its `EvaluationDomain`
//! for H, its CPU multiexp for the MSMs) fed from cuzk's PCE and witness.
//! It is the reference that every GPU routine is tested against.

use std::sync::Arc;

use bellperson::domain::EvaluationDomain;
use bellperson::groth16::Parameters;
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use cuzk_synth::{Abc, Density, Pce};
use ec_gpu_gen::multiexp_cpu::{
    DensityTracker, FullDensity, QueryDensity, SourceBuilder, multiexp_cpu,
};
use ec_gpu_gen::threadpool::Worker;
use ff::PrimeField;
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
/// by Z on the coset; inverse coset NTT.
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
    let domain_err = |_| Groth16Error::DomainTooLarge { constraints: n };
    let worker = Worker::new();
    let mut a = EvaluationDomain::from_coeffs(a.to_vec()).map_err(domain_err)?;
    let mut b = EvaluationDomain::from_coeffs(b.to_vec()).map_err(domain_err)?;
    let mut c = EvaluationDomain::from_coeffs(c.to_vec()).map_err(domain_err)?;
    let msm_err = |e: bellperson::gpu::GpuError| Groth16Error::Msm {
        what: "h (ntt)",
        detail: e.to_string(),
    };
    EvaluationDomain::ifft_many(&mut [&mut a, &mut b, &mut c], &worker, &mut None)
        .map_err(msm_err)?;
    EvaluationDomain::coset_fft_many(&mut [&mut a, &mut b, &mut c], &worker, &mut None)
        .map_err(msm_err)?;
    a.mul_assign(&worker, &b);
    drop(b);
    a.sub_assign(&worker, &c);
    drop(c);
    a.divide_by_z_on_coset(&worker);
    a.icoset_fft(&worker, &mut None).map_err(msm_err)?;
    let mut h = a.into_coeffs();
    h.truncate(h.len() - 1);
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

    let h = timings.time("msm h", || {
        msm::<G1Affine, _, _>("h", &worker, (params.h.clone(), 0), FullDensity, reprs(h))
    })?;
    let l = timings.time("msm l", || {
        msm::<G1Affine, _, _>(
            "l",
            &worker,
            (params.l.clone(), 0),
            FullDensity,
            aux.clone(),
        )
    })?;
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
