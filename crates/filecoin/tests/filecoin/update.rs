//! SnapDeals (empty sector update) of a real 2 KiB sector: a CC sector
//! sealed in the test, updated with filecoin-proofs' `encode_into`, vanilla
//! proofs from `generate_partition_proofs`; cuzk's partition proofs equal
//! bellperson's `create_proof_batch` with the same (r, s), and
//! `verify_empty_sector_update_proof` accepts the proof bytes. Bad requests
//! and parameters are refused with errors that say what is wrong.

use crate::common;
use std::path::Path;
use std::sync::OnceLock;
use std::time::Instant;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bellperson::groth16::create_proof_batch;
use cuzk_filecoin::update::{self, UpdateInput, generate_test_params};
use cuzk_filecoin::{FilecoinError, SectorSize, UpdateProof, VanillaEncoding, proofs_to_bytes};
use filecoin_proofs::SectorShape2KiB;
use serde_json::Value;

/// The parameter directory with the SnapDeals 2 KiB parameters in it,
/// generated once per binary (not once per test) when they are not cached.
fn params() -> &'static Path {
    static GENERATED: OnceLock<()> = OnceLock::new();
    let dir = common::init();
    GENERATED.get_or_init(|| {
        let proof = UpdateProof::new(SectorSize::KIB2).unwrap();
        let start = Instant::now();
        let generated = generate_test_params(proof, dir, common::PARAM_SEED).unwrap();
        eprintln!(
            "SnapDeals 2 KiB parameters: {} in {:.2?}",
            if generated { "generated" } else { "cached" },
            start.elapsed()
        );
    });
    dir
}

fn verify_with_filecoin_proofs(
    proof: UpdateProof,
    bytes: &[u8],
    comms: ([u8; 32], [u8; 32], [u8; 32]),
) -> anyhow::Result<bool> {
    let (comm_r_old, comm_r_new, comm_d_new) = comms;
    filecoin_proofs::verify_empty_sector_update_proof::<SectorShape2KiB>(
        &proof.config()?,
        bytes,
        comm_r_old,
        comm_r_new,
        comm_d_new,
    )
}

#[test]
fn snap_deals_2kib_is_bellperson_byte_for_byte_and_verify_accepts_it() {
    let dir = params();
    let updated = common::updated_2kib();
    let proof = updated.proof;
    assert_eq!(proof, UpdateProof::new(SectorSize::KIB2).unwrap());

    // The vanilla proofs as filecoin-proofs-api's generate_partition_proofs
    // returns them (`PartitionProofBytes`: `bincode::serialize`), base64.
    let bytes: Vec<String> = updated
        .vanilla_proofs
        .iter()
        .map(|p| STANDARD.encode(bincode::serialize(p).unwrap()))
        .collect();
    let mut request: Value = serde_json::from_slice(&updated.request_json().unwrap()).unwrap();
    request["vanilla_proofs"] = serde_json::json!(bytes);
    let ours: Value =
        serde_json::from_slice(&updated.request_json_as(VanillaEncoding::Bincode).unwrap())
            .unwrap();
    assert!(
        ours == request,
        "cuzk's bincode form is not filecoin-proofs-api's"
    );
    let input = UpdateInput::from_json(&serde_json::to_vec(&request).unwrap()).unwrap();
    assert_eq!(input.proof().to_string(), "StackedDrg2KiBV1");
    assert_eq!(input.partitions(), 1);
    input.check_vanilla().unwrap();

    let randomness = common::randomness(input.partitions(), 17);
    let start = Instant::now();
    let ours = input
        .prove(common::engine(), dir, Some(randomness.clone()))
        .unwrap();
    eprintln!(
        "cuzk SnapDeals (engine, {}): {:.2?}",
        common::engine().config().backend,
        start.elapsed()
    );
    assert_eq!(ours.bytes.len(), 192 * input.partitions());

    // bellperson on the very circuits generate_empty_sector_update_proof_with_vanilla builds.
    let partitions = update::partitions(
        proof,
        updated.comm_r_old,
        updated.comm_r_new,
        updated.comm_d_new,
        &updated.vanilla_proofs,
        dir,
    )
    .unwrap();
    assert_eq!(partitions.priority, cuzk_engine::Priority::Normal);
    let params = cuzk_groth16_cuda::read_params(&partitions.params.params, false).unwrap();
    let (r, s): (Vec<_>, Vec<_>) = randomness.into_iter().unzip();
    let start = Instant::now();
    let theirs = create_proof_batch(partitions.circuits, &params, r, s).unwrap();
    eprintln!("bellperson create_proof_batch: {:.2?}", start.elapsed());
    assert_eq!(
        proofs_to_bytes(&theirs),
        ours.bytes,
        "not bellperson's bytes"
    );

    let comms = input.commitments();
    assert!(
        verify_with_filecoin_proofs(proof, &ours.bytes, comms).unwrap(),
        "verify_empty_sector_update_proof refused cuzk's proof"
    );
    assert!(input.verify(dir, &ours.bytes).unwrap());

    // The same points in another order: a well-formed proof that is wrong.
    let mut wrong = ours.bytes.clone();
    wrong[..48].copy_from_slice(&ours.bytes[144..192]);
    wrong[144..192].copy_from_slice(&ours.bytes[..48]);
    let refused = verify_with_filecoin_proofs(proof, &wrong, comms);
    assert!(!matches!(refused, Ok(true)), "a wrong proof was accepted");
    assert!(!matches!(input.verify(dir, &wrong), Ok(true)));
    // The right proof for other commitments.
    let (r_old, mut r_new, d_new) = comms;
    r_new[0] ^= 1;
    let refused = verify_with_filecoin_proofs(proof, &ours.bytes, (r_old, r_new, d_new));
    assert!(
        !matches!(refused, Ok(true)),
        "accepted for another comm_r_new"
    );
    let e = input.verify(dir, &ours.bytes[..100]).unwrap_err();
    assert!(e.to_string().contains("proof of 100 bytes"), "{e}");
}

fn edit(json: &[u8], f: impl FnOnce(&mut Value)) -> Vec<u8> {
    let mut v: Value = serde_json::from_slice(json).unwrap();
    f(&mut v);
    serde_json::to_vec(&v).unwrap()
}

#[test]
fn bad_snap_deals_requests_are_refused_with_clear_errors() {
    common::init();
    let json = common::updated_2kib().request_json().unwrap();

    let e = UpdateInput::from_json(&json[..json.len() / 2]).unwrap_err();
    assert!(matches!(e, FilecoinError::Truncated { .. }), "{e:?}");
    assert!(e.to_string().contains("truncated"), "{e}");

    let e = UpdateInput::from_json(b"{\"registered_proof\": \"StackedDrg2KiBV1\"}").unwrap_err();
    assert!(matches!(e, FilecoinError::BadInput { .. }), "{e:?}");
    assert!(e.to_string().contains("comm_r_old"), "{e}");

    // Another sector size asked for, of the same tree shape or another.
    for (name, size) in [("StackedDrg8MiBV1", "8MiB"), ("StackedDrg32GiBV1", "32GiB")] {
        let other = edit(&json, |v| v["registered_proof"] = name.into());
        let e = UpdateInput::from_json(&other).unwrap_err();
        assert!(
            matches!(e, FilecoinError::SectorSizeMismatch { .. }),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            format!("SnapDeals request is for 2KiB sectors, but {size} was asked for")
        );
    }
    for name in ["StackedDrg2KiBV1_1", "StackedDrgWindow2KiBV1", "snap"] {
        let other = edit(&json, |v| v["registered_proof"] = name.into());
        let e = UpdateInput::from_json(&other).unwrap_err();
        assert!(e.to_string().contains("unknown registered proof"), "{e}");
    }

    // Malformed vanilla proofs: a partition too many, a challenge missing,
    // a sibling missing from a path, a commitment that is no field element.
    let two = edit(&json, |v| {
        let first = v["vanilla_proofs"][0].clone();
        v["vanilla_proofs"].as_array_mut().unwrap().push(first);
    });
    let e = UpdateInput::from_json(&two).unwrap_err();
    assert_eq!(
        e.to_string(),
        "SnapDeals request holds 2 partitions; a SnapDeals StackedDrg2KiBV1 proof has 1"
    );
    let short = edit(&json, |v| {
        v["vanilla_proofs"][0]["challenge_proofs"]
            .as_array_mut()
            .unwrap()
            .pop();
    });
    let e = UpdateInput::from_json(&short).unwrap_err();
    assert!(
        e.to_string()
            .contains("partition 0: 9 challenge proofs, a 2KiB sector has 10"),
        "{e}"
    );
    let pruned = edit(&json, |v| {
        v.pointer_mut(
            "/vanilla_proofs/0/challenge_proofs/3/proof_r_new/data/Single/path/path/0/hashes",
        )
        .and_then(Value::as_array_mut)
        .unwrap()
        .pop();
    });
    let e = UpdateInput::from_json(&pruned).unwrap_err();
    assert!(
        e.to_string().contains("challenge 3: the TreeRNew path"),
        "{e}"
    );
    let e = UpdateInput::from_json(&edit(&json, |v| v["vanilla_proofs"] = Value::Array(vec![])))
        .unwrap_err();
    assert!(e.to_string().contains("holds no partition proofs"), "{e}");
    let not_fr = edit(&json, |v| {
        v["comm_d_new"] = serde_json::to_value([0xffu8; 32]).unwrap()
    });
    let e = UpdateInput::from_json(&not_fr)
        .unwrap()
        .check_vanilla()
        .unwrap_err();
    assert!(e.to_string().contains("comm_d_new"), "{e}");

    // Wrong commitments: the vanilla proofs do not verify against them, and
    // proving them is an error, not a panic.
    let wrong = edit(&json, |v| {
        let byte = &mut v["comm_r_new"][0];
        *byte = (byte.as_u64().unwrap() ^ 1).into();
    });
    let input = UpdateInput::from_json(&wrong).unwrap();
    let e = input.check_vanilla().unwrap_err();
    assert!(e.to_string().contains("do not verify"), "{e}");
    let e = input.prove(common::engine(), params(), None).unwrap_err();
    eprintln!("proving for wrong commitments: {e}");
    assert!(e.to_string().contains("do not verify"), "{e}");
}

#[test]
fn missing_or_mismatched_parameters_are_named() {
    common::init();
    let input = UpdateInput::from_json(&common::updated_2kib().request_json().unwrap()).unwrap();

    let empty = tempfile::tempdir().unwrap();
    let e = input
        .prove(common::engine(), empty.path(), None)
        .unwrap_err();
    assert!(matches!(e, FilecoinError::ParamsMissing { .. }), "{e:?}");
    let text = e.to_string();
    assert!(text.contains("FIL_PROOFS_PARAMETER_CACHE"), "{text}");
    assert!(text.contains("v28-empty-sector-update-"), "{text}");
    let e = input.verify(empty.path(), &[0; 192]).unwrap_err();
    assert!(e.to_string().contains("no verifying key at"), "{e}");

    // Parameters of another circuit under the SnapDeals file name.
    let wrong = tempfile::tempdir().unwrap();
    let files = input.param_files(wrong.path()).unwrap();
    let spec: cuzk_synth::circuits::CircuitSpec = "mul-chain:4".parse().unwrap();
    let mut rng = <rand_chacha::ChaCha20Rng as rand::SeedableRng>::seed_from_u64(1);
    let small = bellperson::groth16::generate_random_parameters::<blstrs::Bls12, _, _>(
        spec.build(0),
        &mut rng,
    )
    .unwrap();
    cuzk_groth16_cuda::write_params(&files.params, &small).unwrap();
    let e = input
        .prove(common::engine(), wrong.path(), None)
        .unwrap_err();
    eprintln!("mismatched parameters: {e}");
    assert!(matches!(e, FilecoinError::Engine(_)), "{e:?}");
    assert!(e.to_string().contains("do not match the circuit"), "{e}");
}
