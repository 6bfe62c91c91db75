//! PoRep C2 of a real 2 KiB sector, sealed in the test with filecoin-proofs:
//! cuzk's partition proofs equal bellperson's `create_proof_batch` with the
//! same (r, s), and filecoin-proofs' `verify_seal` accepts the C2 bytes.
//! Bad C1 files and parameters are refused with errors that say what is
//! wrong.

use crate::common;
use std::time::Instant;

use bellperson::groth16::create_proof_batch;
use cuzk_filecoin::porep::{self, generate_test_params};
use cuzk_filecoin::{C1Output, FilecoinError, SealProof, SectorSize, proofs_to_bytes};

#[test]
fn porep_2kib_c2_is_bellperson_byte_for_byte_and_verify_seal_accepts_it() {
    let dir = common::init();
    let sealed = common::sealed_2kib();
    let proof = sealed.proof;

    let start = Instant::now();
    let generated = generate_test_params(proof, dir, common::PARAM_SEED).unwrap();
    eprintln!(
        "PoRep 2 KiB parameters: {} in {:.2?}",
        if generated { "generated" } else { "cached" },
        start.elapsed()
    );

    let c1 = C1Output::from_json(&sealed.c1_json().unwrap(), None).unwrap();
    assert_eq!(c1.proof(), SealProof::v1_1(SectorSize::KIB2));
    assert_eq!(c1.partitions(), 1);
    c1.check_vanilla().unwrap();

    let randomness = common::randomness(c1.partitions(), 42);
    let start = Instant::now();
    let c2 = c1
        .prove(common::engine(), dir, Some(randomness.clone()))
        .unwrap();
    eprintln!(
        "cuzk C2 (engine, {}): {:.2?}",
        common::engine().config().backend,
        start.elapsed()
    );
    assert_eq!(c2.bytes.len(), 192 * c1.partitions());

    // bellperson on the very circuits seal_commit_phase2 builds.
    let partitions = porep::partitions(&sealed.c1, proof, dir).unwrap();
    let params = cuzk_groth16_cuda::read_params(&partitions.params.params, false).unwrap();
    let (r, s): (Vec<_>, Vec<_>) = randomness.into_iter().unzip();
    let start = Instant::now();
    let theirs = create_proof_batch(partitions.circuits, &params, r, s).unwrap();
    eprintln!("bellperson create_proof_batch: {:.2?}", start.elapsed());
    assert_eq!(proofs_to_bytes(&theirs), c2.bytes, "not bellperson's bytes");

    let accepted = sealed.verify_seal(&c2.bytes).unwrap();
    assert!(accepted, "verify_seal refused cuzk's C2 proof");
    assert!(c1.verify(dir, &c2.bytes).unwrap());

    // The same points in another order: a well-formed proof that is wrong.
    let mut wrong = c2.bytes.clone();
    wrong[..48].copy_from_slice(&c2.bytes[144..192]);
    wrong[144..192].copy_from_slice(&c2.bytes[..48]);
    let refused = sealed.verify_seal(&wrong);
    assert!(!matches!(refused, Ok(true)), "a wrong proof was accepted");
    assert!(!matches!(c1.verify(dir, &wrong), Ok(true)));
    let e = c1.verify(dir, &c2.bytes[..100]).unwrap_err();
    assert!(e.to_string().contains("proof of 100 bytes"), "{e}");
}

fn edit(json: &[u8], f: impl FnOnce(&mut serde_json::Value)) -> Vec<u8> {
    let mut v: serde_json::Value = serde_json::from_slice(json).unwrap();
    f(&mut v);
    serde_json::to_vec(&v).unwrap()
}

#[test]
fn bad_c1_files_are_refused_with_clear_errors() {
    common::init();
    let json = common::sealed_2kib().c1_json().unwrap();

    let e = C1Output::from_json(&json[..json.len() / 2], None).unwrap_err();
    assert!(matches!(e, FilecoinError::Truncated { .. }), "{e:?}");
    assert!(e.to_string().contains("truncated"), "{e}");

    let e = C1Output::from_json(b"{\"comm_r\": 1}", None).unwrap_err();
    assert!(e.to_string().contains("no `vanilla_proofs`"), "{e}");

    let e = C1Output::from_json(&json, Some(SealProof::v1_1(SectorSize::MIB8))).unwrap_err();
    assert!(
        matches!(e, FilecoinError::SectorSizeMismatch { .. }),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "C1 output is for 2KiB sectors, but 8MiB was asked for"
    );

    // filecoin-proofs-api's form, naming its registered proof.
    let api = |name: &str| {
        edit(&json, |v| {
            let proofs = v["vanilla_proofs"].take();
            v["vanilla_proofs"] = serde_json::json!({ "StackedDrg2KiBV1": proofs });
            v["registered_proof"] = name.into();
        })
    };
    let c1 = C1Output::from_json(&api("StackedDrg2KiBV1_1"), None).unwrap();
    assert_eq!(c1.proof().to_string(), "StackedDrg2KiBV1_1");
    let e = C1Output::from_json(&api("StackedDrg512MiBV1_1"), None).unwrap_err();
    assert_eq!(
        e.to_string(),
        "C1 output is for 2KiB sectors, but 512MiB was asked for"
    );
    let e = C1Output::from_json(&api("StackedDrg2KiBV7"), None).unwrap_err();
    assert!(e.to_string().contains("unknown registered proof"), "{e}");

    let zero = edit(&json, |v| {
        v["comm_r"] = serde_json::to_value([0u8; 32]).unwrap()
    });
    let e = C1Output::from_json(&zero, None).unwrap_err();
    assert!(e.to_string().contains("comm_r is all zeros"), "{e}");

    // Altered data: another comm_d, or one byte of the replica id.
    let other_comm_d = edit(&json, |v| {
        let byte = &mut v["comm_d"][0];
        *byte = (byte.as_u64().unwrap() ^ 1).into();
    });
    let c1 = C1Output::from_json(&other_comm_d, None).unwrap();
    let e = c1.check_vanilla().unwrap_err();
    assert!(e.to_string().contains("do not verify"), "{e}");

    let e = C1Output::from_json(&edit(&json, |v| v["seed"] = "x".into()), None).unwrap_err();
    assert!(matches!(e, FilecoinError::BadInput { .. }), "{e:?}");
    eprintln!("example errors: {e}");
}

#[test]
fn missing_or_mismatched_parameters_are_named() {
    common::init();
    let sealed = common::sealed_2kib();
    let c1 = C1Output::from_json(&sealed.c1_json().unwrap(), None).unwrap();

    let empty = tempfile::tempdir().unwrap();
    let e = c1.prove(common::engine(), empty.path(), None).unwrap_err();
    assert!(matches!(e, FilecoinError::ParamsMissing { .. }), "{e:?}");
    let text = e.to_string();
    assert!(text.contains("FIL_PROOFS_PARAMETER_CACHE"), "{text}");
    assert!(text.contains(".params"), "{text}");

    // Parameters of another circuit under the PoRep file name.
    let wrong = tempfile::tempdir().unwrap();
    let files = c1.param_files(wrong.path()).unwrap();
    let spec: cuzk_synth::circuits::CircuitSpec = "mul-chain:4".parse().unwrap();
    let mut rng = <rand_chacha::ChaCha20Rng as rand::SeedableRng>::seed_from_u64(1);
    let small = bellperson::groth16::generate_random_parameters::<blstrs::Bls12, _, _>(
        spec.build(0),
        &mut rng,
    )
    .unwrap();
    cuzk_groth16_cuda::write_params(&files.params, &small).unwrap();
    let e = c1.prove(common::engine(), wrong.path(), None).unwrap_err();
    eprintln!("mismatched parameters: {e}");
    assert!(matches!(e, FilecoinError::Engine(_)), "{e:?}");
    assert!(e.to_string().contains("do not match the circuit"), "{e}");
}
