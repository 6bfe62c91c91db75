//! cuzk's CPU path against bellperson's `create_proof`: for every built-in
//! circuit family at two sizes and many random (r, s), the proofs must be
//! byte-identical and verify; a wrong public input must fail verification.

use bellperson::groth16::{
    Parameters, Proof, create_proof, generate_random_parameters, prepare_verifying_key,
    verify_proof,
};
use blstrs::Scalar;
use cuzk_groth16_cuda::{AbcInput, Bls12, CpuProver, Prover, ProverInput};
use cuzk_synth::circuits::{CircuitSpec, all_test_specs};
use cuzk_synth::{Pce, Witness};
use ff::Field;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

/// (r, s) pairs per circuit; `CUZK_TEST_PAIRS` overrides.
fn pairs() -> usize {
    std::env::var("CUZK_TEST_PAIRS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20)
}

fn bytes(p: &Proof<Bls12>) -> Vec<u8> {
    let mut v = Vec::with_capacity(192);
    p.write(&mut v).unwrap();
    v
}

fn check_spec(spec: &CircuitSpec, rng: &mut ChaCha20Rng) {
    let params: Parameters<Bls12> = generate_random_parameters(spec.build(0), &mut *rng).unwrap();
    let pvk = prepare_verifying_key(&params.vk);
    let pce = Pce::record(spec.build(0)).unwrap();
    cuzk_groth16_cuda::check_params(&params, &pce).unwrap();

    for k in 0..pairs() {
        // Two witnesses per shape: the same parameters serve every witness.
        let seed = 1 + (k % 2) as u64;
        let r = Scalar::random(&mut *rng);
        let s = Scalar::random(&mut *rng);
        let theirs = create_proof(spec.build(seed), &params, r, s).unwrap();

        let witness = Witness::synthesize(spec.build(seed)).unwrap();
        let abc = cuzk_synth::evaluate(&pce, &witness).unwrap();
        let ours = CpuProver
            .prove(
                ProverInput {
                    pce: &pce,
                    witness: &witness,
                    abc: if k % 3 == 0 {
                        AbcInput::FromPce
                    } else {
                        AbcInput::Evaluated {
                            a: &abc.a,
                            b: &abc.b,
                            c: &abc.c,
                        }
                    },
                },
                &params,
                r,
                s,
            )
            .unwrap()
            .proof;
        assert_eq!(bytes(&ours), bytes(&theirs), "{spec}: pair {k} differs");

        let inputs = witness.public_inputs();
        assert!(
            verify_proof(&pvk, &ours, inputs).unwrap(),
            "{spec}: pair {k} does not verify"
        );
        if k < 2 && !inputs.is_empty() {
            let mut wrong = inputs.to_vec();
            wrong[k % inputs.len()] += Scalar::ONE;
            assert!(
                !verify_proof(&pvk, &ours, &wrong).unwrap(),
                "{spec}: verified with a wrong public input"
            );
        }
    }
}

#[test]
fn cpu_proofs_are_byte_identical_to_bellperson() {
    let mut rng = ChaCha20Rng::seed_from_u64(0xC0FFEE);
    let specs = all_test_specs();
    // Exactly these: a family that dropped out (or one added without a
    // second size here) fails the test instead of shrinking it.
    let names: Vec<String> = specs.iter().map(ToString::to_string).collect();
    assert_eq!(
        names,
        [
            "mul-chain:3",
            "mul-chain:10",
            "sha256:1",
            "sha256:2",
            "porep:7:20",
            "porep:12",
            "no-aux:1",
            "no-aux:16",
            "many-inputs:0",
            "many-inputs:8",
            "repeated-vars:1",
            "repeated-vars:8",
            "constant-only:1",
            "constant-only:8",
            "parts:1",
            "parts:8",
        ]
    );
    // Every family of the built-in circuits, at two sizes.
    let families = CircuitSpec::families();
    assert_eq!(specs.len(), 2 * families.len(), "{families:?}");
    for (syntax, _) in families {
        let family = syntax.split(':').next().unwrap();
        let sizes = names
            .iter()
            .filter(|n| n.split(':').next() == Some(family))
            .count();
        assert_eq!(sizes, 2, "{family}: {sizes} sizes in all_test_specs");
    }
    for spec in &specs {
        let start = std::time::Instant::now();
        check_spec(spec, &mut rng);
        eprintln!(
            "{spec}: {} pairs identical ({:.1?})",
            pairs(),
            start.elapsed()
        );
    }
}

#[test]
fn zero_randomness_matches_too() {
    // r = s = 0 is bellperson's non-zk case; the algebra must still agree.
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let spec: CircuitSpec = "mul-chain:6".parse().unwrap();
    let params: Parameters<Bls12> = generate_random_parameters(spec.build(0), &mut rng).unwrap();
    let pce = Pce::record(spec.build(0)).unwrap();
    let theirs = create_proof(spec.build(3), &params, Scalar::ZERO, Scalar::ZERO).unwrap();
    let ours = prove_with_cpu(&pce, &spec, 3, &params);
    assert_eq!(bytes(&ours), bytes(&theirs));
}

fn prove_with_cpu(
    pce: &Pce,
    spec: &CircuitSpec,
    seed: u64,
    params: &Parameters<Bls12>,
) -> Proof<Bls12> {
    let witness = Witness::synthesize(spec.build(seed)).unwrap();
    CpuProver
        .prove(
            ProverInput {
                pce,
                witness: &witness,
                abc: AbcInput::FromPce,
            },
            params,
            Scalar::ZERO,
            Scalar::ZERO,
        )
        .unwrap()
        .proof
}
