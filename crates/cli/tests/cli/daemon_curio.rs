//! The daemon driven as Curio's Go client drives it, through
//! `cuzk.v1.ProvingEngine` (on the GPU where there is one, else the CPU):
//! a 2 KiB PoRep C2 from Curio's
//! c1.json wrapper, a 2 KiB WindowPoSt partition from bincode vanilla
//! proofs (submitted, awaited, repeated by request id) and a 2 KiB
//! SnapDeals from bincode partition proofs, each accepted by
//! filecoin-proofs' own verifiers; cancellation; bad input refused as
//! INVALID_ARGUMENT while the daemon goes on serving; status and metrics.

use crate::common;
use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use cuzk_cli::client;
use cuzk_cli::curio_proto::{self as pb, proving_engine_client::ProvingEngineClient};
use cuzk_cli::daemon::curio::{make_prover_id, post_proof_name, seal_proof_name};
use cuzk_filecoin::post::PostInput;
use cuzk_filecoin::{PostKind, PostProof, SectorSize, VanillaEncoding};
use filecoin_proofs::{PublicReplicaInfo, SectorShape2KiB};
use storage_proofs_core::api_version::ApiVersion;
use tonic::Code;
use tonic::transport::Channel;

/// The miner the requests are for: prover id e8 07 00 ...
const MINER: u64 = 1000;

/// `StackedDrg2KiBV1_1` as Filecoin numbers RegisteredSealProof.
const SEAL_2KIB_V1_1: u64 = 5;
/// `StackedDrgWindow2KiBV1_1` of Go and the FFI (proofs-api's `V1_2`).
const WINDOW_2KIB_V1_1: u64 = 10;
/// `StackedDrg2KiBV1` as Filecoin numbers RegisteredUpdateProof.
const UPDATE_2KIB: u64 = 0;

type Curio = ProvingEngineClient<Channel>;

/// Prove (submit and await): the completed proof, or the call's error;
/// a reply other than COMPLETED fails the test.
async fn prove(c: &mut Curio, req: pb::SubmitProofRequest) -> Result<Vec<u8>, tonic::Status> {
    let reply = c
        .prove(pb::ProveRequest { submit: Some(req) })
        .await?
        .into_inner()
        .result
        .expect("Prove answers with a result");
    assert_eq!(
        reply.status(),
        pb::await_proof_response::Status::Completed,
        "{}",
        reply.error_message
    );
    assert!(!reply.job_id.is_empty());
    Ok(reply.proof)
}

/// The bytes of each base64 string in a cuzk request's `vanilla_proofs`
/// (written with `VanillaEncoding::Bincode`): filecoin-proofs-api's
/// bincode vanilla proofs, as Curio sends them.
fn bincode_proofs(request_json: &[u8]) -> Vec<Vec<u8>> {
    let v: serde_json::Value = serde_json::from_slice(request_json).unwrap();
    v["vanilla_proofs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| STANDARD.decode(s.as_str().unwrap()).unwrap())
        .collect()
}

#[test]
fn prover_ids_are_the_miner_ids_leb128_bytes() {
    let id = |miner: u64, bytes: &[u8]| {
        let mut expect = [0u8; 32];
        expect[..bytes.len()].copy_from_slice(bytes);
        assert_eq!(make_prover_id(miner), expect, "miner {miner}");
    };
    id(0, &[]);
    id(1, &[0x01]);
    id(127, &[0x7f]);
    id(128, &[0x80, 0x01]);
    id(1000, &[0xe8, 0x07]);
    id(624_485, &[0xe5, 0x8e, 0x26]);
    id(
        u64::MAX,
        &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
    );

    assert_eq!(seal_proof_name(5).unwrap(), "StackedDrg2KiBV1_1");
    assert_eq!(seal_proof_name(8).unwrap(), "StackedDrg32GiBV1_1");
    assert_eq!(
        seal_proof_name(13).unwrap(),
        "StackedDrg32GiBV1_1_Feat_SyntheticPoRep"
    );
    assert_eq!(seal_proof_name(20), None);
    assert_eq!(post_proof_name(3).unwrap(), "StackedDrgWinning32GiBV1");
    assert_eq!(post_proof_name(8).unwrap(), "StackedDrgWindow32GiBV1");
    assert_eq!(post_proof_name(13).unwrap(), "StackedDrgWindow32GiBV1_2");
    assert_eq!(post_proof_name(15), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn curios_client_proves_through_the_daemon() {
    let params = common::init();
    let work = tempfile::tempdir().unwrap();
    let window = PostProof {
        kind: PostKind::Window,
        sector_size: SectorSize::KIB2,
        api_version: ApiVersion::V1_2_0,
    };
    let (sealed, updated) = common::sectors(work.path(), params, 31, window).await;

    let running = common::start_daemon(work.path(), params).await;
    let mut c = ProvingEngineClient::new(client::channel(&running.address).await.unwrap());

    // PoRep C2 as Curio sends it: filecoin-proofs-api's commit phase 1
    // output (registered proof named, vanilla proofs under their type),
    // base64 in the c1.json wrapper. The C1 carries the replica id, so the
    // miner id is not an input of C2; the sector's own prover id (which
    // `testing::seal` draws at random) is what verify_seal checks.
    let sector_number = u64::from(sealed.sector_id);
    let mut c1: serde_json::Value = serde_json::from_slice(&sealed.c1_json().unwrap()).unwrap();
    let vanilla = c1["vanilla_proofs"].take();
    c1["vanilla_proofs"] = serde_json::json!({ "StackedDrg2KiBV1": vanilla });
    c1["registered_proof"] = "StackedDrg2KiBV1_1".into();
    let wrapper = |phase1_out: &[u8], sector_size: u64| {
        serde_json::to_vec(&serde_json::json!({
            "SectorNum": sector_number,
            "Phase1Out": STANDARD.encode(phase1_out),
            "SectorSize": sector_size,
        }))
        .unwrap()
    };
    let c1_bytes = serde_json::to_vec(&c1).unwrap();
    let porep_request = |request_id: &str, vanilla_proof: Vec<u8>| pb::SubmitProofRequest {
        request_id: request_id.into(),
        proof_kind: pb::ProofKind::PorepSealCommit as i32,
        sector_size: 2048,
        registered_proof: SEAL_2KIB_V1_1,
        priority: pb::Priority::Normal as i32,
        vanilla_proof,
        sector_number,
        miner_id: MINER,
        ..pb::SubmitProofRequest::default()
    };
    let bytes = prove(&mut c, porep_request("porep-1", wrapper(&c1_bytes, 2048)))
        .await
        .unwrap();
    assert!(
        common::verify_seal(&sealed, &bytes),
        "verify_seal refused the daemon's C2"
    );

    // Bad input: INVALID_ARGUMENT, saying what is wrong, before any SNARK
    // work; the daemon goes on serving.
    let good = wrapper(&c1_bytes, 2048);
    let bad = [
        (
            pb::SubmitProofRequest {
                registered_proof: 99,
                ..porep_request("bad-1", good.clone())
            },
            "registered_proof 99",
        ),
        (
            porep_request("bad-2", good[..good.len() / 2].to_vec()),
            "c1.json wrapper",
        ),
        (
            porep_request("bad-3", wrapper(&c1_bytes[..c1_bytes.len() - 9], 2048)),
            "C1 output",
        ),
        (
            porep_request("bad-4", wrapper(&c1_bytes, 8 << 20)),
            "SectorSize",
        ),
        (
            pb::SubmitProofRequest {
                proof_kind: 0,
                ..porep_request("bad-5", good.clone())
            },
            "proof_kind 0",
        ),
        (
            pb::SubmitProofRequest {
                proof_kind: pb::ProofKind::WindowPostPartition as i32,
                registered_proof: 77,
                ..pb::SubmitProofRequest::default()
            },
            "registered_proof 77",
        ),
    ];
    for (req, needle) in bad {
        let e = prove(&mut c, req).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{needle}: {e:?}");
        assert!(e.message().contains(needle), "{needle}: {e:?}");
    }
    let e = c
        .prove(pb::ProveRequest { submit: None })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");

    // WindowPoSt, one partition, from bincode vanilla proofs, for the
    // miner's prover id.
    let prover_id = make_prover_id(MINER);
    let post_config = window.config();
    let randomness = [9u8; 32];
    let vanilla = common::window_vanilla(&sealed, window, randomness, prover_id);
    let window_request = pb::SubmitProofRequest {
        request_id: "wdpost-1000-0".into(),
        proof_kind: pb::ProofKind::WindowPostPartition as i32,
        sector_size: 2048,
        registered_proof: WINDOW_2KIB_V1_1,
        priority: pb::Priority::High as i32,
        vanilla_proofs: bincode_proofs(
            &PostInput::request_json(
                window,
                randomness,
                prover_id,
                &vanilla,
                VanillaEncoding::Bincode,
            )
            .unwrap(),
        ),
        miner_id: MINER,
        randomness: randomness.to_vec(),
        partition_index: 0,
        ..pb::SubmitProofRequest::default()
    };
    let job = c
        .submit_proof(window_request.clone())
        .await
        .unwrap()
        .into_inner()
        .job_id;
    let job_number: u64 = job
        .strip_prefix("job-")
        .and_then(|n| n.parse().ok())
        .expect("job ids are job-<number>");
    // The same request again reaches the same job.
    let again = c
        .submit_proof(window_request.clone())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(again.job_id, job);
    let waited = c
        .await_proof(pb::AwaitProofRequest {
            job_id: job.clone(),
            timeout_ms: 1,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        waited.status(),
        pb::await_proof_response::Status::Timeout,
        "{waited:?}"
    );
    // Found by its request id too; 0 waits until the outcome.
    let done = c
        .await_proof(pb::AwaitProofRequest {
            job_id: "wdpost-1000-0".into(),
            timeout_ms: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        done.status(),
        pb::await_proof_response::Status::Completed,
        "{}",
        done.error_message
    );
    assert_eq!(done.job_id, job);
    // Its time, from the engine's timeline: the kernel regions of its one
    // partition, its witness, its parameter load (the set was not loaded).
    assert!(
        done.gpu_compute_ms > 0 && done.synthesis_ms > 0 && done.srs_load_ms > 0,
        "{}",
        done.error_message
    );
    let replicas = BTreeMap::from([(
        sealed.sector_id,
        PublicReplicaInfo::new(sealed.pre_commit.comm_r).unwrap(),
    )]);
    assert!(
        filecoin_proofs::verify_window_post::<SectorShape2KiB>(
            &post_config,
            &randomness,
            &replicas,
            prover_id,
            &done.proof,
        )
        .unwrap(),
        "verify_window_post refused the daemon's proof"
    );
    // Once proved, a repeat gets the same job (and proof) at once.
    let again = c
        .submit_proof(window_request.clone())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(again.job_id, job);
    // A retry storm: 16 submissions of one new request id at once make one
    // job, which all of them get.
    let storm = pb::SubmitProofRequest {
        request_id: "wdpost-storm".into(),
        ..window_request.clone()
    };
    let submissions: Vec<_> = (0..16)
        .map(|_| {
            let (mut c, storm) = (c.clone(), storm.clone());
            tokio::spawn(async move { c.submit_proof(storm).await.map(|r| r.into_inner().job_id) })
        })
        .collect();
    let mut storm_jobs = std::collections::BTreeSet::new();
    for s in submissions {
        storm_jobs.insert(s.await.unwrap().unwrap());
    }
    assert_eq!(storm_jobs.len(), 1, "{storm_jobs:?}");
    let storm_job = storm_jobs.pop_first().unwrap();
    assert_ne!(storm_job, job);
    let storm_done = c
        .await_proof(pb::AwaitProofRequest {
            job_id: storm_job.clone(),
            timeout_ms: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        storm_done.status(),
        pb::await_proof_response::Status::Completed,
        "{}",
        storm_done.error_message
    );

    // A request id that is another job's number names its own request:
    // awaiting and cancelling it never reach that other job.
    let other = c
        .submit_proof(pb::SubmitProofRequest {
            request_id: "wdpost-other".into(),
            ..window_request.clone()
        })
        .await
        .unwrap()
        .into_inner()
        .job_id;
    let other_number = other.strip_prefix("job-").unwrap().to_owned();
    let numeric = c
        .submit_proof(pb::SubmitProofRequest {
            request_id: other_number.clone(),
            ..window_request.clone()
        })
        .await
        .unwrap()
        .into_inner()
        .job_id;
    assert_ne!(numeric, other);
    let cancelled = c
        .cancel_proof(pb::CancelProofRequest {
            job_id: other_number.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    let reply = c
        .await_proof(pb::AwaitProofRequest {
            job_id: other_number.clone(),
            timeout_ms: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(reply.job_id, numeric, "{reply:?}");
    if cancelled.was_running {
        assert_eq!(
            reply.status(),
            pb::await_proof_response::Status::Cancelled,
            "{reply:?}"
        );
    }
    // The other job was left alone: it proves.
    let other_done = c
        .await_proof(pb::AwaitProofRequest {
            job_id: other.clone(),
            timeout_ms: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        other_done.status(),
        pb::await_proof_response::Status::Completed,
        "{}",
        other_done.error_message
    );
    // A bare job number is not a job id here.
    let e = c
        .await_proof(pb::AwaitProofRequest {
            job_id: job_number.to_string(),
            timeout_ms: 1,
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e:?}");
    // A megabyte job id: NOT_FOUND, quoting a little of it.
    let e = c
        .await_proof(pb::AwaitProofRequest {
            job_id: "j".repeat(1 << 20),
            timeout_ms: 1,
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e:?}");
    assert!(e.message().len() < 1024, "{} bytes", e.message().len());

    // SnapDeals from bincode partition proofs, no sector size (as Curio's
    // proof share sends it).
    let snap = pb::SubmitProofRequest {
        request_id: "snap-1000-1".into(),
        proof_kind: pb::ProofKind::SnapDealsUpdate as i32,
        registered_proof: UPDATE_2KIB,
        priority: pb::Priority::Normal as i32,
        vanilla_proofs: bincode_proofs(&updated.request_json_as(VanillaEncoding::Bincode).unwrap()),
        sector_number: 1,
        miner_id: MINER,
        comm_r_old: updated.comm_r_old.to_vec(),
        comm_r_new: updated.comm_r_new.to_vec(),
        comm_d_new: updated.comm_d_new.to_vec(),
        ..pb::SubmitProofRequest::default()
    };
    let bytes = prove(&mut c, snap.clone()).await.unwrap();
    assert!(
        filecoin_proofs::verify_empty_sector_update_proof::<SectorShape2KiB>(
            &updated.proof.config().unwrap(),
            &bytes,
            updated.comm_r_old,
            updated.comm_r_new,
            updated.comm_d_new,
        )
        .unwrap(),
        "verify_empty_sector_update_proof refused the daemon's proof"
    );
    // A commitment of the wrong length.
    let e = prove(
        &mut c,
        pb::SubmitProofRequest {
            request_id: "snap-bad".into(),
            comm_d_new: vec![1; 31],
            ..snap
        },
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    assert!(e.message().contains("comm_d_new must be 32 bytes"), "{e:?}");

    // Cancelled at once: CANCELLED; the same request id then proves anew.
    let job = c
        .submit_proof(porep_request("porep-cancel", good.clone()))
        .await
        .unwrap()
        .into_inner()
        .job_id;
    let cancelled = c
        .cancel_proof(pb::CancelProofRequest {
            job_id: job.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(cancelled.was_running);
    let reply = c
        .await_proof(pb::AwaitProofRequest {
            job_id: job.clone(),
            timeout_ms: 120_000,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        reply.status(),
        pb::await_proof_response::Status::Cancelled,
        "{reply:?}"
    );
    let anew = c
        .submit_proof(porep_request("porep-cancel", good.clone()))
        .await
        .unwrap()
        .into_inner()
        .job_id;
    assert_ne!(anew, job);
    let cancelled = c
        .cancel_proof(pb::CancelProofRequest {
            job_id: anew.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(cancelled.was_running);
    c.await_proof(pb::AwaitProofRequest {
        job_id: anew,
        timeout_ms: 0,
    })
    .await
    .unwrap();
    let unknown = c
        .cancel_proof(pb::CancelProofRequest {
            job_id: "no-such-job".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!unknown.was_running);
    let e = c
        .await_proof(pb::AwaitProofRequest {
            job_id: "987654321".into(),
            timeout_ms: 1,
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e:?}");

    // Status and metrics: 3 proofs done, no queue left.
    let status = c
        .get_status(pb::GetStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    assert!(status.total_proofs_completed >= 3, "{status:?}");
    assert_eq!(
        status
            .queues
            .iter()
            .map(|q| q.pending + q.in_progress)
            .sum::<u32>(),
        0,
        "{status:?}"
    );
    assert_eq!(status.loaded_srs.len(), 3, "{status:?}");
    // Under Curio's circuit ids.
    let mut srs: Vec<&str> = status
        .loaded_srs
        .iter()
        .map(|s| s.circuit_id.as_str())
        .collect();
    srs.sort();
    assert_eq!(srs, ["porep-2k", "snap-2k", "wpost-2k"], "{status:?}");
    assert!(
        status.gpus.is_empty() == (common::expected_backend() == "cpu"),
        "{status:?}"
    );
    let metrics = c
        .get_metrics(pb::GetMetricsRequest {})
        .await
        .unwrap()
        .into_inner()
        .prometheus_text;
    assert!(metrics.contains("cuzk_jobs_total"), "{metrics}");
    // PreloadSRS / EvictSRS by Curio's circuit ids: the sets the proofs
    // above loaded are found resident under them.
    for id in ["porep-2k", "wpost-2k", "snap-2k"] {
        let reply = c
            .preload_srs(pb::PreloadSrsRequest {
                circuit_id: id.into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert!(reply.already_loaded, "{id}: {reply:?}");
    }
    let reply = c
        .evict_srs(pb::EvictSrsRequest {
            circuit_id: "porep-2k".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(reply.was_loaded && reply.freed_bytes > 0, "{reply:?}");
    let reply = c
        .preload_srs(pb::PreloadSrsRequest {
            circuit_id: "porep-2k".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!reply.already_loaded, "{reply:?}");
    for (id, code) in [
        ("porep-3k", Code::InvalidArgument),
        ("proof-32g", Code::InvalidArgument),
        ("porep-8m", Code::NotFound),
    ] {
        let e = c
            .preload_srs(pb::PreloadSrsRequest {
                circuit_id: id.into(),
            })
            .await
            .unwrap_err();
        assert_eq!(e.code(), code, "{id}: {e:?}");
    }

    common::stop_daemon(running).await;
}
