//! The CUDA backend against bellperson's `create_proof`: byte-identical
//! proofs that verify, for every built-in circuit family (two sizes each)
//! plus larger PoRep-shaped and mul-chain circuits (2^`CUZK_TEST_LOG2`
//! constraints, default 2^16), with real parameters. Also the CPU backend on
//! the same inputs, so CPU and GPU are twins. Skips without a GPU.

use bellperson::groth16::{
    Parameters, Proof, create_proof, generate_random_parameters, prepare_verifying_key,
    verify_proof,
};
use blstrs::Scalar;
use cuzk_gpu_sched::testing::gpu_or_skip;
use cuzk_groth16_cuda::{AbcInput, Bls12, CpuProver, GpuProver, Prover, ProverInput};
use cuzk_synth::circuits::{CircuitSpec, all_test_specs};
use cuzk_synth::{Pce, Witness};
use ff::Field;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

fn bytes(p: &Proof<Bls12>) -> Vec<u8> {
    let mut v = Vec::with_capacity(192);
    p.write(&mut v).unwrap();
    v
}

fn large_log2() -> u32 {
    std::env::var("CUZK_TEST_LOG2")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16)
}

#[test]
fn gpu_proofs_are_byte_identical_to_bellperson() {
    let Some(_) = gpu_or_skip("gpu_proofs_are_byte_identical_to_bellperson") else {
        return;
    };
    let gpu = GpuProver::new(0).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(0xD00D);
    let k = large_log2();
    let mut specs = all_test_specs();
    specs.push(format!("porep:{k}").parse::<CircuitSpec>().unwrap());
    specs.push(format!("mul-chain:{k}").parse::<CircuitSpec>().unwrap());
    for spec in &specs {
        let start = std::time::Instant::now();
        let params: Parameters<Bls12> =
            generate_random_parameters(spec.build(0), &mut rng).unwrap();
        let pvk = prepare_verifying_key(&params.vk);
        let pce = Pce::record(spec.build(0)).unwrap();
        for (k, seed) in [1u64, 2, 3].into_iter().enumerate() {
            let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
            let theirs = create_proof(spec.build(seed), &params, r, s).unwrap();
            let witness = Witness::synthesize(spec.build(seed)).unwrap();
            let abc = cuzk_synth::evaluate(&pce, &witness).unwrap();
            let input = ProverInput {
                pce: &pce,
                witness: &witness,
                abc: if k == 0 {
                    AbcInput::FromPce
                } else {
                    AbcInput::Evaluated {
                        a: &abc.a,
                        b: &abc.b,
                        c: &abc.c,
                    }
                },
            };
            let ours = gpu.prove(input, &params, r, s).unwrap();
            assert_eq!(
                bytes(&ours.proof),
                bytes(&theirs),
                "{spec}: GPU proof {k} differs"
            );
            assert!(verify_proof(&pvk, &ours.proof, witness.public_inputs()).unwrap());
            if k == 0 {
                let cpu = CpuProver.prove(input, &params, r, s).unwrap();
                assert_eq!(
                    bytes(&cpu.proof),
                    bytes(&ours.proof),
                    "{spec}: CPU and GPU differ"
                );
            }
        }
        eprintln!("{spec}: 3 GPU proofs identical ({:.1?})", start.elapsed());
    }
}

#[test]
fn gpu_refuses_mismatched_parameters() {
    let Some(_) = gpu_or_skip("gpu_refuses_mismatched_parameters") else {
        return;
    };
    let gpu = GpuProver::new(0).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let spec: CircuitSpec = "mul-chain:6".parse().unwrap();
    let other: CircuitSpec = "mul-chain:7".parse().unwrap();
    let params: Parameters<Bls12> = generate_random_parameters(other.build(0), &mut rng).unwrap();
    let pce = Pce::record(spec.build(0)).unwrap();
    let witness = Witness::synthesize(spec.build(1)).unwrap();
    let input = ProverInput {
        pce: &pce,
        witness: &witness,
        abc: AbcInput::FromPce,
    };
    let err = gpu
        .prove(input, &params, Scalar::ONE, Scalar::ONE)
        .unwrap_err();
    assert!(
        err.to_string().contains("do not match the circuit"),
        "{err}"
    );
}
