//! cuzk's parameter generator (CPU fixed-base backend) against bellperson's
//! `generate_parameters`: for every built-in circuit family at two sizes the
//! files are byte-identical for the same toxic waste, whatever the chunk
//! length and window width; edge toxic waste (tau = 0, so H holds identity
//! points; alpha = beta = 0) matches too; what bellperson refuses is refused
//! with a clear error; file output is atomic; proofs made with generated
//! parameters verify.

use std::io::{self, Write};

use bellperson::groth16::{
    Parameters, create_proof, generate_parameters, prepare_verifying_key, verify_proof,
};
use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::{G1Projective, G2Projective, Scalar};
use cuzk_groth16_cuda::setup::{SetupBackend, SetupOptions, ToxicWaste, write_parameters};
use cuzk_groth16_cuda::{Bls12, Groth16Error, check_params, generate_parameters_file};
use cuzk_synth::circuits::{CircuitSpec, all_test_specs};
use cuzk_synth::{Pce, Witness};
use ff::Field;
use group::Group;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

fn bellperson_bytes<C: Circuit<Scalar>>(
    circuit: C,
    w: &ToxicWaste,
) -> Result<Vec<u8>, SynthesisError> {
    let params: Parameters<Bls12> = generate_parameters(
        circuit, w.g1, w.g2, w.alpha, w.beta, w.gamma, w.delta, w.tau,
    )?;
    let mut v = Vec::new();
    params.write(&mut v).unwrap();
    Ok(v)
}

fn cuzk_bytes(pce: &Pce, w: &ToxicWaste, options: &SetupOptions) -> Vec<u8> {
    let mut v = Vec::new();
    let report = write_parameters(pce, w, options, &mut v).unwrap();
    assert_eq!(report.bytes, v.len() as u64);
    v
}

/// Equal bytes, or a message naming the first difference (files are large).
fn assert_same(ours: &[u8], theirs: &[u8], what: &str) {
    if ours == theirs {
        return;
    }
    let first = ours
        .iter()
        .zip(theirs)
        .position(|(a, b)| a != b)
        .unwrap_or(ours.len().min(theirs.len()));
    panic!(
        "{what}: cuzk wrote {} bytes, bellperson {}; first difference at byte {first}",
        ours.len(),
        theirs.len()
    );
}

#[test]
fn every_builtin_family_matches_bellperson_byte_for_byte() {
    let mut rng = ChaCha20Rng::seed_from_u64(0x5e7u64);
    for spec in all_test_specs() {
        let waste = ToxicWaste::random(&mut rng);
        let pce = Pce::record(spec.build(0)).unwrap();
        let theirs = bellperson_bytes(spec.build(0), &waste).unwrap();
        let ours = cuzk_bytes(&pce, &waste, &SetupOptions::cpu());
        assert_same(&ours, &theirs, &spec.to_string());
    }
}

#[test]
fn chunking_and_window_width_do_not_change_the_bytes() {
    let spec: CircuitSpec = "porep:9".parse().unwrap();
    let pce = Pce::record(spec.build(0)).unwrap();
    let waste = ToxicWaste::from_seed(11);
    let theirs = bellperson_bytes(spec.build(0), &waste).unwrap();
    for (window_bits, chunk_len) in [(2, Some(1)), (5, Some(7)), (12, Some(100)), (16, None)] {
        let options = SetupOptions {
            backend: SetupBackend::Cpu,
            window_bits: Some(window_bits),
            chunk_len,
        };
        let ours = cuzk_bytes(&pce, &waste, &options);
        assert_same(&ours, &theirs, &format!("{options:?}"));
    }
}

#[test]
fn edge_toxic_waste_matches_bellperson() {
    let spec: CircuitSpec = "mul-chain:6".parse().unwrap();
    let pce = Pce::record(spec.build(0)).unwrap();
    let base = ToxicWaste::from_seed(5);
    let cases = [
        // Z(0) = -1: h_0 is the only point of H that is not the identity.
        ToxicWaste {
            tau: Scalar::ZERO,
            ..base
        },
        ToxicWaste {
            alpha: Scalar::ZERO,
            beta: Scalar::ZERO,
            ..base
        },
        ToxicWaste {
            gamma: Scalar::ONE,
            delta: -Scalar::ONE,
            g1: G1Projective::generator(),
            g2: G2Projective::generator(),
            ..base
        },
    ];
    for (i, waste) in cases.iter().enumerate() {
        let theirs = bellperson_bytes(spec.build(0), waste).unwrap();
        let ours = cuzk_bytes(&pce, waste, &SetupOptions::cpu());
        assert_same(&ours, &theirs, &format!("case {i}"));
    }
}

#[test]
fn the_toxic_waste_is_drawn_as_bellperson_draws_it() {
    let spec: CircuitSpec = "porep:6".parse().unwrap();
    let pce = Pce::record(spec.build(0)).unwrap();
    let params: Parameters<Bls12> = bellperson::groth16::generate_random_parameters(
        spec.build(0),
        &mut ChaCha20Rng::seed_from_u64(99),
    )
    .unwrap();
    let mut theirs = Vec::new();
    params.write(&mut theirs).unwrap();
    let ours = cuzk_bytes(&pce, &ToxicWaste::from_seed(99), &SetupOptions::cpu());
    assert_same(&ours, &theirs, "from_seed(99)");
}

/// One aux variable that no constraint uses.
#[derive(Clone)]
struct Unconstrained;

impl Circuit<Scalar> for Unconstrained {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let x = cs.alloc(|| "x", || Ok(Scalar::from(3u64)))?;
        let _unused = cs.alloc(|| "unused", || Ok(Scalar::ONE))?;
        let y = cs.alloc(|| "y", || Ok(Scalar::from(9u64)))?;
        cs.enforce(|| "x*x=y", |lc| lc + x, |lc| lc + x, |lc| lc + y);
        Ok(())
    }
}

#[test]
fn what_bellperson_refuses_is_refused_clearly() {
    let waste = ToxicWaste::from_seed(1);
    let pce = Pce::record(Unconstrained).unwrap();
    assert!(matches!(
        bellperson_bytes(Unconstrained, &waste),
        Err(SynthesisError::UnconstrainedVariable)
    ));
    let err = write_parameters(&pce, &waste, &SetupOptions::cpu(), &mut Vec::new()).unwrap_err();
    assert!(
        matches!(err, Groth16Error::UnconstrainedVariable { index: 1 }),
        "{err}"
    );
    assert!(err.to_string().contains("aux variable 1"), "{err}");

    let spec: CircuitSpec = "mul-chain:3".parse().unwrap();
    let pce = Pce::record(spec.build(0)).unwrap();
    for (waste, what) in [
        (
            ToxicWaste {
                gamma: Scalar::ZERO,
                ..waste
            },
            "gamma is zero",
        ),
        (
            ToxicWaste {
                delta: Scalar::ZERO,
                ..waste
            },
            "delta is zero",
        ),
        (
            ToxicWaste {
                g1: G1Projective::identity(),
                ..waste
            },
            "G1 generator is the identity",
        ),
        (
            ToxicWaste {
                g2: G2Projective::identity(),
                ..waste
            },
            "G2 generator is the identity",
        ),
    ] {
        let err =
            write_parameters(&pce, &waste, &SetupOptions::cpu(), &mut Vec::new()).unwrap_err();
        assert!(err.to_string().contains(what), "{err}");
    }
    for window_bits in [0, 1, 21] {
        let options = SetupOptions {
            window_bits: Some(window_bits),
            ..SetupOptions::cpu()
        };
        let err = write_parameters(&pce, &waste, &options, &mut Vec::new()).unwrap_err();
        assert!(
            matches!(err, Groth16Error::SetupWindow { bits, .. } if bits == window_bits),
            "{err}"
        );
    }
}

/// A writer that fails after `left` bytes.
struct FailingWriter {
    left: usize,
}

impl Write for FailingWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.left == 0 {
            return Err(io::Error::other("disk full"));
        }
        let n = buf.len().min(self.left);
        self.left -= n;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn output_errors_are_reported_and_files_are_atomic() {
    let spec: CircuitSpec = "porep:8".parse().unwrap();
    let pce = Pce::record(spec.build(0)).unwrap();
    let waste = ToxicWaste::from_seed(3);
    let options = SetupOptions {
        chunk_len: Some(50),
        ..SetupOptions::cpu()
    };
    for left in [0, 100, 5000] {
        let err = write_parameters(&pce, &waste, &options, &mut FailingWriter { left })
            .unwrap_err()
            .to_string();
        assert!(err.contains("disk full"), "{err}");
    }

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("params");
    let report = generate_parameters_file(&path, &pce, &waste, &options).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(report.bytes, bytes.len() as u64);
    assert_same(
        &bytes,
        &bellperson_bytes(spec.build(0), &waste).unwrap(),
        "file",
    );
    assert_eq!(report.num_constraints, 256);
    assert_eq!(report.domain_log2, 8);
    let names: Vec<&str> = report.sections.iter().map(|s| s.name).collect();
    assert_eq!(names, ["ic", "h", "l", "a", "b_g1", "b_g2"]);
    assert_eq!(report.sections[1].points, 255);

    // A failed generation leaves neither the file nor a temporary one.
    let bad = dir.path().join("bad");
    let degenerate = ToxicWaste {
        delta: Scalar::ZERO,
        ..waste
    };
    assert!(generate_parameters_file(&bad, &pce, &degenerate, &options).is_err());
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["params"]);
    // Nor does an existing file get replaced by a failed one.
    assert!(generate_parameters_file(&path, &pce, &degenerate, &options).is_err());
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
}

#[test]
fn gpu_backend_without_a_gpu_is_a_clear_error() {
    if cuzk_groth16_cuda::cuda::Gpu::get(0).is_ok() {
        eprintln!("skipping gpu_backend_without_a_gpu_is_a_clear_error: there is a GPU");
        return;
    }
    let spec: CircuitSpec = "mul-chain:3".parse().unwrap();
    let pce = Pce::record(spec.build(0)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("params");
    let err = generate_parameters_file(
        &path,
        &pce,
        &ToxicWaste::from_seed(1),
        &SetupOptions::gpu(0),
    )
    .unwrap_err();
    assert!(matches!(err, Groth16Error::NoGpu { .. }), "{err}");
    assert!(!path.exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn generated_parameters_prove_and_verify() {
    let spec: CircuitSpec = "porep:7".parse().unwrap();
    let pce = Pce::record(spec.build(0)).unwrap();
    let params = cuzk_groth16_cuda::setup::generate_parameters(
        &pce,
        &ToxicWaste::from_seed(8),
        &SetupOptions::cpu(),
    )
    .unwrap();
    check_params(&params, &pce).unwrap();
    let pvk = prepare_verifying_key(&params.vk);
    let mut rng = ChaCha20Rng::seed_from_u64(2);
    for seed in [1, 2] {
        let witness = Witness::synthesize(spec.build(seed)).unwrap();
        let proof = create_proof(
            spec.build(seed),
            &params,
            Scalar::random(&mut rng),
            Scalar::random(&mut rng),
        )
        .unwrap();
        let inputs = witness.public_inputs();
        assert!(verify_proof(&pvk, &proof, inputs).unwrap(), "seed {seed}");
        let mut wrong = inputs.to_vec();
        wrong[0] += Scalar::ONE;
        assert!(!verify_proof(&pvk, &proof, &wrong).unwrap());
    }
}
