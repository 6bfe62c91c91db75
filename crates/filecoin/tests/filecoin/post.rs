//! WinningPoSt and WindowPoSt of a real 2 KiB sector (sealed in the test):
//! vanilla proofs from filecoin-proofs, SNARKs through the engine equal to
//! bellperson's `create_proof_batch` with the same (r, s), accepted by
//! `verify_winning_post` / `verify_window_post`; bad requests are named.

use crate::common;
use std::collections::BTreeMap;
use std::time::Instant;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bellperson::groth16::create_proof_batch;
use cuzk_filecoin::post::{self, PostInput};
use cuzk_filecoin::{FilecoinError, PostKind, PostProof, VanillaEncoding, proofs_to_bytes};
use filecoin_proofs::{FallbackPoStSectorProof, PublicReplicaInfo, SectorShape2KiB};

const RANDOMNESS: [u8; 32] = [9; 32];
const JSON: VanillaEncoding = VanillaEncoding::Json;

fn proof(kind: PostKind) -> PostProof {
    common::post_proof(kind)
}

fn vanilla(kind: PostKind) -> Vec<FallbackPoStSectorProof<SectorShape2KiB>> {
    common::post_vanilla(proof(kind), RANDOMNESS)
}

fn post_matches_bellperson_and_filecoin_verifies(kind: PostKind) {
    let dir = common::init();
    let sealed = common::sealed_2kib();
    let proof = proof(kind);
    let start = Instant::now();
    let generated = post::generate_test_params(proof, dir, common::PARAM_SEED).unwrap();
    eprintln!(
        "{proof} parameters: {} in {:.2?}",
        if generated { "generated" } else { "cached" },
        start.elapsed()
    );
    let vanilla = vanilla(kind);
    let json = match kind {
        PostKind::Winning => {
            PostInput::request_json(proof, RANDOMNESS, sealed.prover_id, &vanilla, JSON).unwrap()
        }
        // WindowPoSt from the vanilla proofs' bytes as filecoin-proofs-api
        // hands them out (`bincode::serialize`), base64 in the request.
        PostKind::Window => {
            let bytes: Vec<String> = vanilla
                .iter()
                .map(|v| STANDARD.encode(bincode::serialize(v).unwrap()))
                .collect();
            let mut request: serde_json::Value = serde_json::from_slice(
                &PostInput::request_json(proof, RANDOMNESS, sealed.prover_id, &vanilla, JSON)
                    .unwrap(),
            )
            .unwrap();
            request["vanilla_proofs"] = serde_json::json!(bytes);
            let ours: serde_json::Value = serde_json::from_slice(
                &PostInput::request_json(
                    proof,
                    RANDOMNESS,
                    sealed.prover_id,
                    &vanilla,
                    VanillaEncoding::Bincode,
                )
                .unwrap(),
            )
            .unwrap();
            assert!(
                ours == request,
                "cuzk's bincode form is not filecoin-proofs-api's"
            );
            serde_json::to_vec(&request).unwrap()
        }
    };
    let input = PostInput::from_json(&json, Some(kind)).unwrap();
    let partitions = post::partitions(proof, &RANDOMNESS, sealed.prover_id, &vanilla, dir).unwrap();
    let randomness = common::randomness(partitions.circuits.len(), 5);

    let start = Instant::now();
    let ours = input
        .prove(common::engine(), dir, Some(randomness.clone()))
        .unwrap();
    eprintln!("{proof}: cuzk {:.2?}", start.elapsed());

    let params = cuzk_groth16_cuda::read_params(&partitions.params.params, false).unwrap();
    let (r, s): (Vec<_>, Vec<_>) = randomness.into_iter().unzip();
    let theirs = create_proof_batch(partitions.circuits, &params, r, s).unwrap();
    assert_eq!(
        proofs_to_bytes(&theirs),
        ours.bytes,
        "{proof}: not bellperson's bytes"
    );

    let config = proof.config();
    let accepted = match kind {
        PostKind::Winning => filecoin_proofs::verify_winning_post::<SectorShape2KiB>(
            &config,
            &RANDOMNESS,
            &[(
                sealed.sector_id,
                PublicReplicaInfo::new(sealed.pre_commit.comm_r).unwrap(),
            )],
            sealed.prover_id,
            &ours.bytes,
        ),
        PostKind::Window => {
            let replicas = BTreeMap::from([(
                sealed.sector_id,
                PublicReplicaInfo::new(sealed.pre_commit.comm_r).unwrap(),
            )]);
            filecoin_proofs::verify_window_post::<SectorShape2KiB>(
                &config,
                &RANDOMNESS,
                &replicas,
                sealed.prover_id,
                &ours.bytes,
            )
        }
    }
    .unwrap();
    assert!(accepted, "filecoin-proofs refused cuzk's {proof}");
    assert!(input.verify(dir, &ours.bytes).unwrap());

    // The proof of other randomness does not verify.
    let mut other = RANDOMNESS;
    other[0] ^= 1;
    let json = PostInput::request_json(proof, other, sealed.prover_id, &vanilla, JSON).unwrap();
    let input = PostInput::from_json(&json, None).unwrap();
    assert!(!matches!(input.verify(dir, &ours.bytes), Ok(true)));
    // ...and proving with it fails: the vanilla proofs answer other challenges.
    let e = input.prove(common::engine(), dir, None).unwrap_err();
    assert!(e.to_string().contains("do not fit their challenges"), "{e}");
}

#[test]
fn winning_post_2kib_is_bellperson_byte_for_byte_and_verifies() {
    post_matches_bellperson_and_filecoin_verifies(PostKind::Winning);
}

#[test]
fn window_post_2kib_is_bellperson_byte_for_byte_and_verifies() {
    post_matches_bellperson_and_filecoin_verifies(PostKind::Window);
}

#[test]
fn bad_post_requests_are_refused_with_clear_errors() {
    common::init();
    let sealed = common::sealed_2kib();
    let vanilla = vanilla(PostKind::Winning);
    let json = PostInput::request_json(
        proof(PostKind::Winning),
        RANDOMNESS,
        sealed.prover_id,
        &vanilla,
        JSON,
    )
    .unwrap();

    let e = PostInput::from_json(&json, Some(PostKind::Window)).unwrap_err();
    assert!(e.to_string().contains("not a WindowPoSt"), "{e}");

    let e = PostInput::from_json(&json[..json.len() - 10], None).unwrap_err();
    assert!(matches!(e, FilecoinError::Truncated { .. }), "{e:?}");

    let mut v: serde_json::Value = serde_json::from_slice(&json).unwrap();
    v["registered_proof"] = "StackedDrgWinning8MiBV1".into();
    let e = PostInput::from_json(&serde_json::to_vec(&v).unwrap(), None).unwrap_err();
    assert_eq!(
        e.to_string(),
        "PoSt request is for 2KiB sectors, but 8MiB was asked for"
    );
    v["registered_proof"] = "StackedDrgWinning2KiBV9".into();
    let e = PostInput::from_json(&serde_json::to_vec(&v).unwrap(), None).unwrap_err();
    assert!(e.to_string().contains("unknown registered proof"), "{e}");

    // Two sectors for a WinningPoSt of one.
    let two: Vec<_> = vanilla
        .into_iter()
        .chain(self::vanilla(PostKind::Winning))
        .collect();
    let json = PostInput::request_json(
        proof(PostKind::Winning),
        RANDOMNESS,
        sealed.prover_id,
        &two,
        JSON,
    )
    .unwrap();
    let input = PostInput::from_json(&json, None).unwrap();
    let e = input
        .prove(common::engine(), common::init(), None)
        .unwrap_err();
    assert!(
        e.to_string().contains("WinningPoSt proves 1 sector(s)"),
        "{e}"
    );
}
