//! Parameter generation on the GPU (module `setup`): the fixed-base kernels
//! against blstrs' scalar multiplication and the CPU twin (edge scalars,
//! every window width class, lengths that are not powers of two, chunk
//! boundaries, all-zero chunks, repeated scalars and negations), then whole
//! parameter files against bellperson's `generate_parameters` byte for byte
//! for every built-in family and for PoRep-shaped and mul-chain circuits of
//! 2^`CUZK_TEST_LOG2` constraints (default 16), and a GPU proof with
//! generated parameters that verifies. Skips without a GPU; fails instead
//! when `CUZK_REQUIRE_GPU=1`.

use std::time::Instant;

use bellperson::groth16::{
    Parameters, create_proof, generate_parameters, prepare_verifying_key, verify_proof,
};
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use cuzk_gpu_sched::testing::gpu_or_skip;
use cuzk_groth16_cuda::setup::{
    CpuFixedBase, GpuFixedBase, SetupBackend, SetupOptions, ToxicWaste,
    generate_parameters as cuzk_generate_parameters, windows, write_parameters,
};
use cuzk_groth16_cuda::{AbcInput, Bls12, GpuProver, Prover, ProverInput};
use cuzk_synth::circuits::{CircuitSpec, all_test_specs};
use cuzk_synth::{Pce, Witness};
use ff::{Field, PrimeField};
use group::prime::PrimeCurveAffine;
use group::{Curve, Group};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

fn large_log2() -> u32 {
    std::env::var("CUZK_TEST_LOG2")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16)
}

/// Scalars where the digit logic and the curve formulas have edge cases.
fn edge_scalars(c: u32) -> Vec<Scalar> {
    let two = Scalar::from(2u64);
    let pow = |e: u32| two.pow_vartime([u64::from(e)]);
    let mut v = vec![
        Scalar::ZERO,
        Scalar::ONE,
        Scalar::from(2u64),
        Scalar::from(3u64),
        -Scalar::ONE,
        -Scalar::from(2u64),
        pow(c - 1),
        pow(c - 1) + Scalar::ONE,
        pow(c) - Scalar::ONE,
        pow(c),
        pow(254),
        pow(255) - Scalar::ONE,
        Scalar::ROOT_OF_UNITY,
        Scalar::MULTIPLICATIVE_GENERATOR,
        Scalar::ZERO,
    ];
    let mut s = Scalar::ZERO;
    for k in 0..windows(c) - 1 {
        s += (pow(c - 1) + Scalar::ONE) * pow(c * k);
    }
    v.push(s);
    v.push(-s);
    v.push(s);
    v
}

fn expected_g1(g: &G1Projective, scalars: &[Scalar]) -> Vec<G1Affine> {
    scalars.iter().map(|s| (g * s).to_affine()).collect()
}

fn expected_g2(g: &G2Projective, scalars: &[Scalar]) -> Vec<G2Affine> {
    scalars.iter().map(|s| (g * s).to_affine()).collect()
}

fn first_mismatch<T: PartialEq>(a: &[T], b: &[T]) -> Option<usize> {
    assert_eq!(a.len(), b.len(), "lengths differ");
    a.iter().zip(b).position(|(x, y)| x != y)
}

#[test]
fn gpu_fixed_base_matches_blstrs_on_edge_cases() {
    let Some(_) = gpu_or_skip("gpu_fixed_base_matches_blstrs_on_edge_cases") else {
        return;
    };
    let mut rng = ChaCha20Rng::seed_from_u64(0xF1);
    let g1 = G1Projective::random(&mut rng);
    let g2 = G2Projective::random(&mut rng);
    for c in [2, 3, 7, 12, 13, 16] {
        let mut fb = GpuFixedBase::new(0, &g1, &g2, c).unwrap();
        let mut scalars = edge_scalars(c);
        scalars.extend((0..61).map(|_| Scalar::random(&mut rng)));
        let want1 = expected_g1(&g1, &scalars);
        let want2 = expected_g2(&g2, &scalars);
        for len in [1, 2, 3, scalars.len()] {
            let got = fb.g1(&scalars[..len]).unwrap();
            assert_eq!(
                first_mismatch(&got, &want1[..len]),
                None,
                "G1 c {c} n {len}"
            );
            let got = fb.g2(&scalars[..len]).unwrap();
            assert_eq!(
                first_mismatch(&got, &want2[..len]),
                None,
                "G2 c {c} n {len}"
            );
        }
        assert!(fb.g1(&[]).unwrap().is_empty());
        // Chunks of 7 (one all-zero chunk included) give the same points.
        let mut chunky = GpuFixedBase::new(0, &g1, &g2, c).unwrap().with_chunk_len(7);
        let mut zeros = vec![Scalar::ZERO; 9];
        zeros.extend_from_slice(&scalars);
        let got = chunky.g1(&zeros).unwrap();
        assert!(got[..9].iter().all(|p| bool::from(p.is_identity())));
        assert_eq!(
            first_mismatch(&got[9..], &want1),
            None,
            "G1 c {c} chunks of 7"
        );
        let got = chunky.g2(&zeros).unwrap();
        assert!(got[..9].iter().all(|p| bool::from(p.is_identity())));
        assert_eq!(
            first_mismatch(&got[9..], &want2),
            None,
            "G2 c {c} chunks of 7"
        );
    }
    // The generator's own multiples and the standard generators.
    let mut fb = GpuFixedBase::new(
        0,
        &G1Projective::generator(),
        &G2Projective::generator(),
        12,
    )
    .unwrap();
    let small: Vec<Scalar> = (0..5000u64).map(Scalar::from).collect();
    let got = fb.g1(&small).unwrap();
    assert_eq!(
        first_mismatch(&got, &expected_g1(&G1Projective::generator(), &small)),
        None
    );
}

#[test]
fn gpu_fixed_base_matches_the_cpu_twin_on_random_data() {
    let Some(_) = gpu_or_skip("gpu_fixed_base_matches_the_cpu_twin_on_random_data") else {
        return;
    };
    let log2 = large_log2().max(12) + 4;
    let mut rng = ChaCha20Rng::seed_from_u64(0xF2);
    let waste = ToxicWaste::random(&mut rng);
    // Not a power of two, and over one chunk (chunks of 2^18 + 3).
    let n = (1usize << log2) + 12_345;
    let scalars: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
    let cpu = CpuFixedBase::new(&waste.g1, &waste.g2, 12).unwrap();
    let mut gpu = GpuFixedBase::new(0, &waste.g1, &waste.g2, 12)
        .unwrap()
        .with_chunk_len((1 << 18) + 3);
    let t = Instant::now();
    let got = gpu.g1(&scalars).unwrap();
    eprintln!(
        "G1 2^{log2}+12345: GPU {:.2?} (kernels {:.1} ms)",
        t.elapsed(),
        gpu.kernel_ms()
    );
    assert_eq!(first_mismatch(&got, &cpu.g1(&scalars)), None, "G1");
    let g2_n = n / 4;
    let got = gpu.g2(&scalars[..g2_n]).unwrap();
    assert_eq!(first_mismatch(&got, &cpu.g2(&scalars[..g2_n])), None, "G2");
}

fn bellperson_bytes(spec: &CircuitSpec, w: &ToxicWaste) -> Vec<u8> {
    let params: Parameters<Bls12> = generate_parameters(
        spec.build(0),
        w.g1,
        w.g2,
        w.alpha,
        w.beta,
        w.gamma,
        w.delta,
        w.tau,
    )
    .unwrap();
    let mut v = Vec::new();
    params.write(&mut v).unwrap();
    v
}

#[test]
fn gpu_parameters_are_byte_identical_to_bellperson() {
    let Some(_) = gpu_or_skip("gpu_parameters_are_byte_identical_to_bellperson") else {
        return;
    };
    let mut rng = ChaCha20Rng::seed_from_u64(0x5E7);
    let k = large_log2();
    let mut specs = all_test_specs();
    specs.push(format!("porep:{k}").parse().unwrap());
    specs.push(format!("mul-chain:{k}").parse().unwrap());
    for spec in &specs {
        let waste = ToxicWaste::random(&mut rng);
        let pce = Pce::record(spec.build(0)).unwrap();
        let t = Instant::now();
        let theirs = bellperson_bytes(spec, &waste);
        let bp = t.elapsed();
        let mut ours = Vec::new();
        let report = write_parameters(&pce, &waste, &SetupOptions::gpu(0), &mut ours).unwrap();
        if ours != theirs {
            let at = ours
                .iter()
                .zip(&theirs)
                .position(|(a, b)| a != b)
                .unwrap_or(ours.len().min(theirs.len()));
            panic!(
                "{spec}: GPU file of {} bytes, bellperson's {}; first difference at byte {at}",
                ours.len(),
                theirs.len()
            );
        }
        eprintln!(
            "{spec}: byte-identical; bellperson {bp:.2?}, cuzk GPU {:.3} s (QAP {:.3} s, \
             kernels {:.3} s)",
            report.total_s, report.qap_s, report.kernel_s
        );
    }
    // Small chunks: many chunks per section, streamed through the writer.
    let spec: CircuitSpec = "porep:12".parse().unwrap();
    let pce = Pce::record(spec.build(0)).unwrap();
    let waste = ToxicWaste::from_seed(12);
    let options = SetupOptions {
        backend: SetupBackend::Gpu { ordinal: 0 },
        window_bits: Some(9),
        chunk_len: Some(1000),
    };
    let mut ours = Vec::new();
    let report = write_parameters(&pce, &waste, &options, &mut ours).unwrap();
    assert_eq!(report.chunk_len, 1000);
    assert!(
        ours == bellperson_bytes(&spec, &waste),
        "porep:12 in chunks of 1000"
    );
}

#[test]
fn gpu_generated_parameters_prove_and_verify() {
    let Some(_) = gpu_or_skip("gpu_generated_parameters_prove_and_verify") else {
        return;
    };
    let spec: CircuitSpec = format!("porep:{}", large_log2()).parse().unwrap();
    let pce = Pce::record(spec.build(0)).unwrap();
    let params =
        cuzk_generate_parameters(&pce, &ToxicWaste::from_seed(77), &SetupOptions::gpu(0)).unwrap();
    cuzk_groth16_cuda::check_params(&params, &pce).unwrap();
    let pvk = prepare_verifying_key(&params.vk);
    let prover = GpuProver::new(0).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(78);
    for seed in [1, 2] {
        let witness = Witness::synthesize(spec.build(seed)).unwrap();
        let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
        let ours = prover
            .prove(
                ProverInput {
                    pce: &pce,
                    witness: &witness,
                    abc: AbcInput::FromPce,
                },
                &params,
                r,
                s,
            )
            .unwrap()
            .proof;
        let theirs = create_proof(spec.build(seed), &params, r, s).unwrap();
        let (mut a, mut b) = (Vec::new(), Vec::new());
        ours.write(&mut a).unwrap();
        theirs.write(&mut b).unwrap();
        assert_eq!(a, b, "{spec} seed {seed}: proof differs from bellperson's");
        assert!(
            verify_proof(&pvk, &ours, witness.public_inputs()).unwrap(),
            "{spec} seed {seed}: does not verify"
        );
    }
}
