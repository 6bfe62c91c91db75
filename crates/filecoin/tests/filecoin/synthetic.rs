//! The synthetic C1 (no sealed sector): its vanilla proofs pass
//! storage-proofs' verifier at every tree shape, it is deterministic from
//! its seed, and its C2 (2 KiB and 8 MiB) is bellperson's bytes and
//! accepted by filecoin-proofs' `verify_seal`; the same for synthetic
//! WinningPoSt, WindowPoSt and SnapDeals requests with their verifiers.
//! A PoRep partition's witness made challenge by challenge in parallel is
//! storage-proofs' sequential witness.
//! Requests it cannot serve are refused with clear errors.

use crate::common;
use std::collections::BTreeMap;
use std::time::Instant;

use bellperson::groth16::create_proof_batch;
use blstrs::Scalar;
use cuzk_filecoin::porep::{self, generate_test_params};
use cuzk_filecoin::post::{self, PostInput};
use cuzk_filecoin::synthetic::{self, generate_json};
use cuzk_filecoin::update::{self, UpdateInput};
use cuzk_filecoin::{
    C1Output, Partitions, PostKind, PostProof, SealProof, SealVersion, SectorSize, UpdateProof,
    proofs_to_bytes,
};
use cuzk_synth::{Pce, Witness};
use filecoin_proofs::{PartitionProof, PublicReplicaInfo, SectorShape2KiB, SectorShape8MiB};
use storage_proofs_core::merkle::MerkleTreeTrait;

/// bellperson's `create_proof_batch` on the very partition circuits cuzk
/// proved, with the same (r, s): the bytes cuzk must have produced.
fn bellperson_bytes<C>(partitions: Partitions<C>, randomness: Vec<(Scalar, Scalar)>) -> Vec<u8>
where
    C: bellperson::Circuit<Scalar> + Send,
{
    let params = cuzk_groth16_cuda::read_params(&partitions.params.params, false).unwrap();
    let (r, s): (Vec<_>, Vec<_>) = randomness.into_iter().unzip();
    let start = Instant::now();
    let theirs = create_proof_batch(partitions.circuits, &params, r, s).unwrap();
    eprintln!("bellperson {}: {:.2?}", partitions.label, start.elapsed());
    proofs_to_bytes(&theirs)
}

fn proof(size: &str) -> SealProof {
    SealProof::v1_1(size.parse::<SectorSize>().unwrap())
}

#[test]
fn synthetic_c1s_pass_the_vanilla_verifier_at_every_tree_shape() {
    common::init();
    // Base (2 KiB, 8 MiB), Sub2 (4 KiB), Sub8 (16 KiB, as 32 GiB), Top2
    // (32 KiB, as 64 GiB), and the full-size ones: only challenged paths
    // are hashed, so 32 GiB costs about what 2 KiB does.
    for size in ["2KiB", "4KiB", "16KiB", "32KiB", "8MiB", "32GiB", "64GiB"] {
        let start = Instant::now();
        let s = generate_json(proof(size), 5).unwrap();
        // generate_json checked the vanilla proofs; so does the C2 path.
        let c1 = C1Output::from_json(&s.json, None).unwrap();
        assert_eq!(c1.proof(), proof(size));
        assert_eq!(c1.partitions(), s.partitions);
        c1.check_vanilla().unwrap();
        let (comm_r, comm_d, seed, ticket) = c1.commitments();
        assert_eq!(
            (comm_r, comm_d, seed, ticket),
            (s.comm_r, s.comm_d, s.seed, s.ticket)
        );
        let config = proof(size).config().unwrap();
        assert_eq!(s.partitions, usize::from(config.partitions));
        assert!(s.challenges >= config.minimum_challenges(), "{size}");
        eprintln!(
            "{size}: {} partitions, {} challenges, {} bytes of JSON, {:.2?}",
            s.partitions,
            s.challenges,
            s.json.len(),
            start.elapsed()
        );
    }
}

#[test]
fn a_synthetic_c1_follows_from_its_seed() {
    common::init();
    let a = generate_json(proof("2KiB"), 1).unwrap();
    let b = generate_json(proof("2KiB"), 1).unwrap();
    let c = generate_json(proof("2KiB"), 2).unwrap();
    assert_eq!(a.json, b.json);
    assert_eq!(a.prover_id, b.prover_id);
    assert_ne!(a.comm_r, c.comm_r);
    assert_ne!(a.sector_id, c.sector_id);

    // An altered synthetic C1 is refused like any other.
    let mut v: serde_json::Value = serde_json::from_slice(&a.json).unwrap();
    let byte =
        &mut v["vanilla_proofs"][0][0]["replica_column_proofs"]["c_x"]["column"]["rows"][0][0];
    *byte = (byte.as_u64().unwrap() ^ 1).into();
    let altered = C1Output::from_json(&serde_json::to_vec(&v).unwrap(), None).unwrap();
    let e = altered.check_vanilla().unwrap_err();
    assert!(e.to_string().contains("do not verify"), "{e}");
}

#[test]
fn what_the_generator_cannot_serve_is_refused_clearly() {
    common::init();
    for version in [
        SealVersion::V1_1SyntheticPoRep,
        SealVersion::V1_2NonInteractivePoRep,
    ] {
        let p = SealProof {
            sector_size: SectorSize::KIB2,
            version,
        };
        let e = generate_json(p, 1).unwrap_err().to_string();
        assert!(
            e.contains("interactive PoRep") && e.contains("StackedDrg2KiBV1_1"),
            "{e}"
        );
    }
    let e = "3KiB".parse::<SectorSize>().unwrap_err().to_string();
    assert!(e.contains("not one of"), "{e}");
    let e = SectorSize::new(3 << 10).unwrap_err().to_string();
    assert!(e.contains("3072"), "{e}");
}

/// C2 of a synthetic C1 through the engine: bellperson's bytes for the
/// same circuits and (r, s), accepted by verify_seal.
fn c2_is_bellperson_and_accepted<Tree: 'static + MerkleTreeTrait>(size: &str, seed: u64) {
    let dir = common::init();
    let proof = proof(size);
    let start = Instant::now();
    let generated = generate_test_params(proof, dir, common::PARAM_SEED).unwrap();
    eprintln!(
        "PoRep {size} parameters: {} in {:.2?}",
        if generated { "generated" } else { "cached" },
        start.elapsed()
    );
    let s = synthetic::generate::<Tree>(proof, seed).unwrap();
    let json = serde_json::to_vec(&s.c1).unwrap();
    let c1 = C1Output::from_json(&json, Some(proof)).unwrap();

    let randomness = common::randomness(c1.partitions(), seed);
    let start = Instant::now();
    let c2 = c1
        .prove(common::engine(), dir, Some(randomness.clone()))
        .unwrap();
    eprintln!("cuzk C2 {size}: {:.2?}", start.elapsed());

    // bellperson proves storage-proofs' own partition circuits, as
    // filecoin-proofs' seal_commit_phase2 does.
    let partitions = porep::partitions(&s.c1, proof, dir).unwrap();
    let theirs = Partitions {
        circuits: porep::stacked_circuits(&s.c1, proof).unwrap(),
        label: partitions.label,
        params: partitions.params,
        priority: partitions.priority,
        witness: Witness::synthesize_with_capacity,
    };
    assert_eq!(
        bellperson_bytes(theirs, randomness),
        c2.bytes,
        "not bellperson's bytes"
    );

    let config = proof.config().unwrap();
    let verify = |bytes: &[u8]| {
        filecoin_proofs::verify_seal::<Tree>(
            &config,
            s.c1.comm_r,
            s.c1.comm_d,
            s.prover_id,
            s.sector_id.into(),
            s.c1.ticket,
            s.c1.seed,
            bytes,
        )
    };
    assert!(
        verify(&c2.bytes).unwrap(),
        "verify_seal refused the C2 proof"
    );
    // Another sector id: another replica id, so the same proof fails.
    let other = filecoin_proofs::verify_seal::<Tree>(
        &config,
        s.c1.comm_r,
        s.c1.comm_d,
        s.prover_id,
        (s.sector_id ^ 1).into(),
        s.c1.ticket,
        s.c1.seed,
        &c2.bytes,
    );
    assert!(!matches!(other, Ok(true)), "accepted for another sector id");
}

/// Each partition's witness made by cuzk's PoRep circuit with its
/// challenges in parallel equals storage-proofs' sequential synthesis of its
/// own circuit (`StackedCompound::circuit`), value for value; the PCE
/// recorded from cuzk's circuit is the one recorded from storage-proofs',
/// and the witness satisfies it.
fn parallel_witness_is_storage_proofs<Tree: 'static + MerkleTreeTrait>(size: &str, seed: u64) {
    let dir = common::init();
    let proof = proof(size);
    let s = synthetic::generate::<Tree>(proof, seed).unwrap();
    let ours = porep::partitions(&s.c1, proof, dir).unwrap().circuits;
    let theirs = porep::stacked_circuits(&s.c1, proof).unwrap();
    assert_eq!(ours.len(), theirs.len());
    for (k, (ours, theirs)) in ours.into_iter().zip(theirs).enumerate() {
        assert!(ours.challenges() > 1, "{size}: one challenge tests nothing");
        let pce = Pce::record(theirs.clone()).unwrap();
        assert_eq!(
            Pce::record(ours.clone()).unwrap(),
            pce,
            "{size} partition {k}: PCE"
        );

        let start = Instant::now();
        let sequential = Witness::synthesize(theirs).unwrap();
        let t_seq = start.elapsed();
        let start = Instant::now();
        let parallel = ours.clone().witness(pce.num_inputs, pce.num_aux).unwrap();
        let t_par = start.elapsed();
        eprintln!(
            "{size} partition {k}: {} challenges, {} aux; storage-proofs sequential {t_seq:.2?}, \
             cuzk parallel {t_par:.2?} on {} threads",
            ours.challenges(),
            sequential.aux.len(),
            rayon::current_num_threads()
        );
        assert_eq!(
            parallel.inputs, sequential.inputs,
            "{size} partition {k}: inputs"
        );
        assert!(
            parallel.aux == sequential.aux,
            "{size} partition {k}: aux values differ"
        );
        // Sizes unknown: challenges on systems of their own, then joined;
        // and both ways with the labels' SHA-256 made natively or by
        // storage-proofs' circuit.
        for native in [true, false] {
            assert!(
                ours.clone().witness_with(0, 0, native).unwrap() == sequential,
                "{size} partition {k}: parallel witness without sizes, native SHA-256 {native}"
            );
            assert!(
                ours.clone()
                    .witness_with(pce.num_inputs, pce.num_aux, native)
                    .unwrap()
                    == sequential,
                "{size} partition {k}: parallel witness, native SHA-256 {native}"
            );
        }
        assert!(
            Witness::synthesize(ours).unwrap() == sequential,
            "{size} partition {k}: cuzk's circuit synthesized sequentially"
        );
        let abc = cuzk_synth::evaluate(&pce, &parallel).unwrap();
        cuzk_synth::check_satisfied(&pce, &abc.a, &abc.b, &abc.c).unwrap();
    }
}

#[test]
fn parallel_witness_is_storage_proofs_at_2kib() {
    parallel_witness_is_storage_proofs::<SectorShape2KiB>("2KiB", 6);
}

#[test]
fn parallel_witness_is_storage_proofs_at_8mib() {
    parallel_witness_is_storage_proofs::<SectorShape8MiB>("8MiB", 7);
}

#[test]
fn synthetic_2kib_c2_is_bellperson_and_verify_seal_accepts_it() {
    c2_is_bellperson_and_accepted::<SectorShape2KiB>("2KiB", 3);
}

#[test]
fn synthetic_8mib_c2_is_bellperson_and_verify_seal_accepts_it() {
    c2_is_bellperson_and_accepted::<SectorShape8MiB>("8MiB", 4);
}

/// A synthetic PoSt request of `sectors` 2 KiB sectors proved through the
/// engine: bellperson's bytes, accepted by filecoin-proofs' verifier.
fn synthetic_post_proves_and_verifies(kind: PostKind, sectors: usize) {
    let dir = common::init();
    let proof = common::post_proof(kind);
    post::generate_test_params(proof, dir, common::PARAM_SEED).unwrap();
    let s = synthetic::post_json(proof, sectors, 8).unwrap();
    assert_eq!(s.replicas.len(), sectors);
    let input = PostInput::from_json(&s.json, Some(kind)).unwrap();
    let typed = synthetic::post_vanilla::<SectorShape2KiB>(proof, sectors, 8).unwrap();
    let partitions =
        post::partitions(proof, &s.randomness, s.prover_id, &typed.vanilla, dir).unwrap();
    let randomness = common::randomness(partitions.circuits.len(), 6);
    let ours = input
        .prove(common::engine(), dir, Some(randomness.clone()))
        .unwrap();
    assert_eq!(
        bellperson_bytes(partitions, randomness),
        ours.bytes,
        "{proof}: not bellperson's bytes"
    );

    let replicas: Vec<_> = s
        .replicas
        .iter()
        .map(|&(id, comm_r)| (id.into(), PublicReplicaInfo::new(comm_r).unwrap()))
        .collect();
    let config = proof.config();
    let accepted = match kind {
        PostKind::Winning => filecoin_proofs::verify_winning_post::<SectorShape2KiB>(
            &config,
            &s.randomness,
            &replicas,
            s.prover_id,
            &ours.bytes,
        ),
        PostKind::Window => filecoin_proofs::verify_window_post::<SectorShape2KiB>(
            &config,
            &s.randomness,
            &replicas.into_iter().collect::<BTreeMap<_, _>>(),
            s.prover_id,
            &ours.bytes,
        ),
    }
    .unwrap();
    assert!(
        accepted,
        "filecoin-proofs refused the {proof} of synthetic sectors"
    );
    assert!(input.verify(dir, &ours.bytes).unwrap());
}

#[test]
fn synthetic_window_post_of_three_sectors_verifies() {
    // 2 KiB WindowPoSt holds 2 sectors per partition: 2 partitions, the
    // second padded as filecoin-proofs pads it.
    synthetic_post_proves_and_verifies(PostKind::Window, 3);
}

#[test]
fn synthetic_winning_post_verifies() {
    synthetic_post_proves_and_verifies(PostKind::Winning, 1);
}

#[test]
fn synthetic_post_sizes_it_cannot_serve_are_refused() {
    common::init();
    for (kind, sectors) in [(PostKind::Winning, 2), (PostKind::Window, 0)] {
        let e = synthetic::post_json(common::post_proof(kind), sectors, 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains(&format!("{sectors} sectors asked for")), "{e}");
    }
    // Full size costs little: only the challenged paths are hashed.
    let proof: PostProof = "StackedDrgWindow32GiBV1_1".parse().unwrap();
    let start = Instant::now();
    let s = synthetic::post_json(proof, 2349, 1).unwrap();
    let input = PostInput::from_json(&s.json, Some(PostKind::Window)).unwrap();
    assert_eq!(input.partitions().unwrap(), 1);
    eprintln!(
        "WindowPoSt 32 GiB, 2349 sectors: {} bytes of JSON in {:.2?}",
        s.json.len(),
        start.elapsed()
    );
}

#[test]
fn synthetic_snap_deals_prove_and_verify() {
    let dir = common::init();
    let proof = UpdateProof::new(SectorSize::KIB2).unwrap();
    update::generate_test_params(proof, dir, common::PARAM_SEED).unwrap();
    let s = synthetic::update_json(proof, 2).unwrap();
    let input = UpdateInput::from_json(&s.json).unwrap();
    assert_eq!(
        input.commitments(),
        (s.comm_r_old, s.comm_r_new, s.comm_d_new)
    );
    let request: serde_json::Value = serde_json::from_slice(&s.json).unwrap();
    let vanilla: Vec<PartitionProof<SectorShape2KiB>> =
        serde_json::from_value(request["vanilla_proofs"].clone()).unwrap();
    let partitions = update::partitions(
        proof,
        s.comm_r_old,
        s.comm_r_new,
        s.comm_d_new,
        &vanilla,
        dir,
    )
    .unwrap();
    let randomness = common::randomness(partitions.circuits.len(), 7);
    let ours = input
        .prove(common::engine(), dir, Some(randomness.clone()))
        .unwrap();
    assert_eq!(
        bellperson_bytes(partitions, randomness),
        ours.bytes,
        "not bellperson's bytes"
    );
    let accepted = filecoin_proofs::verify_empty_sector_update_proof::<SectorShape2KiB>(
        &proof.config().unwrap(),
        &ours.bytes,
        s.comm_r_old,
        s.comm_r_new,
        s.comm_d_new,
    )
    .unwrap();
    assert!(
        accepted,
        "filecoin-proofs refused the SnapDeals proof of a synthetic sector"
    );

    // Every tree shape, and full size: generation checks the vanilla proofs.
    for size in ["4KiB", "16KiB", "32KiB", "8MiB", "32GiB", "64GiB"] {
        let start = Instant::now();
        let p = UpdateProof::new(size.parse().unwrap()).unwrap();
        let s = synthetic::update_json(p, 1).unwrap();
        let input = UpdateInput::from_json(&s.json).unwrap();
        input.check_vanilla().unwrap();
        eprintln!(
            "SnapDeals {size}: {} partitions, {} bytes of JSON, {:.2?}",
            input.partitions(),
            s.json.len(),
            start.elapsed()
        );
    }
}
