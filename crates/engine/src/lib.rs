//! The cuzk proving pipeline: circuits in, proofs out.
//!
//! The engine owns policy: what runs next, memory budgets, priorities. Today
//! it proves one partition synchronously ([`prove_partition`]): witness
//! synthesis, a/b/c by SpMV with the satisfaction check, then a backend's
//! H and MSMs and the assembly. The concurrent pipeline (synthesis workers
//! feeding GPU workers through `gpu-sched`, budgets, PCE cache) grows here.
//!
//! The engine never launches kernels itself and never touches device memory:
//! that is the backends' mechanism.

use std::time::Instant;

use bellperson::Circuit;
use bellperson::groth16::Parameters;
use blstrs::Scalar;
use cuzk_groth16_cuda::{
    AbcInput, Bls12, Groth16Error, ProofOutput, Prover, ProverInput, StageTimings,
};
use cuzk_synth::{Pce, SynthError, Witness};

/// What went wrong in the pipeline.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Synth(#[from] SynthError),
    #[error(transparent)]
    Groth16(#[from] Groth16Error),
}

/// `Result` with [`EngineError`].
pub type Result<T> = std::result::Result<T, EngineError>;

/// Proves one partition: synthesizes `circuit`'s witness, evaluates a/b/c
/// with `pce` (recorded from a circuit of the same shape), refuses a witness
/// that does not satisfy the circuit, and proves with `prover`.
///
/// The parameters are checked against the PCE before any work is done.
pub fn prove_partition<C: Circuit<Scalar>>(
    prover: &dyn Prover,
    pce: &Pce,
    circuit: C,
    params: &Parameters<Bls12>,
    r: Scalar,
    s: Scalar,
) -> Result<ProofOutput> {
    cuzk_groth16_cuda::check_params(params, pce)?;
    let mut timings = StageTimings::default();
    let start = Instant::now();
    let witness = Witness::synthesize_with_capacity(circuit, pce.num_inputs, pce.num_aux)?;
    timings.push("witness", start.elapsed());
    let abc = timings.time("spmv", || cuzk_synth::evaluate(pce, &witness))?;
    let out = prover.prove(
        ProverInput {
            pce,
            witness: &witness,
            abc: AbcInput::Evaluated {
                a: &abc.a,
                b: &abc.b,
                c: &abc.c,
            },
        },
        params,
        r,
        s,
    )?;
    timings.0.extend(out.timings.0);
    Ok(ProofOutput {
        proof: out.proof,
        timings,
    })
}

#[cfg(test)]
mod tests {
    use bellperson::groth16::generate_random_parameters;
    use bellperson::{ConstraintSystem, SynthesisError};
    use cuzk_groth16_cuda::CpuProver;
    use ff::Field;
    use rand_chacha::ChaCha20Rng;
    use rand_core::SeedableRng;

    use super::*;

    /// x^2 = y, x^2 = z: with `lie`, z gets a wrong value.
    #[derive(Clone)]
    struct Squares {
        lie: bool,
    }

    impl Circuit<Scalar> for Squares {
        fn synthesize<CS: ConstraintSystem<Scalar>>(
            self,
            cs: &mut CS,
        ) -> std::result::Result<(), SynthesisError> {
            let x = cs.alloc(|| "x", || Ok(Scalar::from(3)))?;
            let y = cs.alloc_input(|| "y", || Ok(Scalar::from(9)))?;
            let z = cs.alloc(|| "z", || Ok(Scalar::from(if self.lie { 10 } else { 9 })))?;
            cs.enforce(|| "y = x^2", |lc| lc + x, |lc| lc + x, |lc| lc + y);
            cs.enforce(|| "z = x^2", |lc| lc + x, |lc| lc + x, |lc| lc + z);
            Ok(())
        }
    }

    #[test]
    fn unsatisfied_witness_is_refused_with_the_constraint_index() {
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let params =
            generate_random_parameters::<Bls12, _, _>(Squares { lie: false }, &mut rng).unwrap();
        let pce = Pce::record(Squares { lie: false }).unwrap();
        let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));

        prove_partition(&CpuProver, &pce, Squares { lie: false }, &params, r, s).unwrap();
        let err =
            prove_partition(&CpuProver, &pce, Squares { lie: true }, &params, r, s).unwrap_err();
        assert!(
            matches!(
                err,
                EngineError::Synth(SynthError::Unsatisfied { index: 1, .. })
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("constraint 1 fails"), "{err}");
    }
}
