//! The daemon under Filecoin load (on the GPU where there is one, else the
//! CPU): a WinningPoSt sent while a 10-partition job runs finishes before
//! it, and one sent while PoRep C2 jobs are queued and running overtakes
//! them (CRITICAL by default); and a bounded soak of mixed 2 KiB
//! Filecoin requests (PoRep C2, SnapDeals, WindowPoSt, WinningPoSt) from 6
//! clients with random priorities and cancellations returns proofs that
//! filecoin-proofs' verifiers accept and leaves the memory budget and the
//! pinned pool idle.
//!
//! Beside the soak, 4 clients watch random jobs and leave at random (no job
//! is lost to them) and a Curio client sends WinningPoSt requests as retry
//! storms by request id (one job each, never duplicated).
//!
//! `CUZK_FILECOIN_SOAK_REQUESTS` sets the soak's size: 200 by default on a
//! machine that has (or must have, `CUZK_REQUIRE_GPU=1`) a GPU, 12 on the
//! CPU backend, where each PoRep C2 or SnapDeals proof takes tens of
//! seconds (the first four requests are one of each kind, the fifth is
//! cancelled at once, the sixth's client goes away, so every path runs at
//! any size of 6 or more);
//! `CUZK_LONG_JOB` the built-in circuit of the 10-partition job (`porep:14`
//! by default, with fake parameters: its proofs are for timing only);
//! `CUZK_LATENCY_JSON` a file to write the timings to in bench-data's
//! format (with `CUZK_REVISION`, `CUZK_DATE` and `CUZK_COMMAND`).

use crate::common;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::common::{idle, status};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use cuzk_cli::client::{self, Client};
use cuzk_cli::curio_proto as pb;
use cuzk_cli::daemon::curio::make_prover_id;
use cuzk_cli::proto::{self, filecoin_proof::Kind};
use cuzk_filecoin::post::PostInput;
use cuzk_filecoin::{PostKind, PostProof, SectorSize, VanillaEncoding};
use cuzk_synth::Pce;
use cuzk_synth::circuits::CircuitSpec;
use filecoin_proofs::{PublicReplicaInfo, SectorShape2KiB};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use storage_proofs_core::api_version::ApiVersion;

mod bench_record;
mod side_clients;

use bench_record::{one, write_bench_data};
use side_clients::{CURIO_MINER, curio_retries, watch_and_leave};

const KINDS: [&str; 4] = ["porep-c2", "snap-deals", "window-post", "winning-post"];

fn request(kind: Kind, priority: proto::Priority) -> proto::ProveRequest {
    proto::ProveRequest {
        filecoin: Some(proto::FilecoinProof { kind: Some(kind) }),
        priority: priority as i32,
        ..proto::ProveRequest::default()
    }
}

async fn wait_idle(c: &mut Client, what: &str) -> proto::StatusReply {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let s = status(c).await;
        if idle(&s) {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {s:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Proves through the daemon; the proof bytes, which the daemon says it
/// verified.
async fn prove(c: &mut Client, req: proto::ProveRequest) -> Vec<u8> {
    let stream = c.prove(req).await.unwrap().into_inner();
    let done = client::follow(stream, |_, _| {}).await.unwrap();
    assert!(done.verified, "the daemon did not verify the proof");
    done.proof
}

/// Awaits a submitted job: its proof bytes and when they came.
async fn await_job(c: &mut Client, id: u64) -> (Vec<u8>, Instant) {
    let stream = c
        .await_job(proto::AwaitRequest { job_id: id })
        .await
        .unwrap()
        .into_inner();
    let done = client::follow(stream, |_, _| {}).await.unwrap();
    assert!(done.verified, "job {id}: not verified by the daemon");
    (done.proof, Instant::now())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn winning_post_overtakes_porep_and_a_mixed_soak_verifies_and_ends_idle() {
    let params = common::init();
    let work = tempfile::tempdir().unwrap();
    let window = PostProof {
        kind: PostKind::Window,
        sector_size: SectorSize::KIB2,
        api_version: ApiVersion::V1_1_0,
    };
    let winning = PostProof {
        kind: PostKind::Winning,
        sector_size: SectorSize::KIB2,
        api_version: ApiVersion::V1_0_0,
    };
    let (sealed, updated) = common::sectors(work.path(), params, 41, window).await;
    {
        let params = params.to_owned();
        tokio::task::spawn_blocking(move || {
            cuzk_filecoin::post::generate_test_params(winning, &params, common::PARAM_SEED)
        })
        .await
        .unwrap()
        .unwrap();
    }

    // The four requests, as `cuzk prove` reads them.
    let randomness = [7u8; 32];
    let post_json = |proof: PostProof| {
        let vanilla = common::window_vanilla(&sealed, proof, randomness, sealed.prover_id);
        PostInput::request_json(
            proof,
            randomness,
            sealed.prover_id,
            &vanilla,
            VanillaEncoding::Json,
        )
        .unwrap()
    };
    let payloads = [
        Kind::PorepC2(proto::PoRepC2 {
            c1_json: sealed.c1_json().unwrap(),
            registered_proof: String::new(),
        }),
        Kind::SnapDeals(updated.request_json().unwrap()),
        Kind::WindowPost(post_json(window)),
        Kind::WinningPost(post_json(winning)),
    ];
    let replicas = BTreeMap::from([(
        sealed.sector_id,
        PublicReplicaInfo::new(sealed.pre_commit.comm_r).unwrap(),
    )]);
    let verify = |kind: usize, bytes: &[u8]| -> bool {
        match kind {
            0 => common::verify_seal(&sealed, bytes),
            1 => filecoin_proofs::verify_empty_sector_update_proof::<SectorShape2KiB>(
                &updated.proof.config().unwrap(),
                bytes,
                updated.comm_r_old,
                updated.comm_r_new,
                updated.comm_d_new,
            )
            .unwrap(),
            2 => filecoin_proofs::verify_window_post::<SectorShape2KiB>(
                &window.config(),
                &randomness,
                &replicas,
                sealed.prover_id,
                bytes,
            )
            .unwrap(),
            _ => filecoin_proofs::verify_winning_post::<SectorShape2KiB>(
                &winning.config(),
                &randomness,
                &[(
                    sealed.sector_id,
                    PublicReplicaInfo::new(sealed.pre_commit.comm_r).unwrap(),
                )],
                sealed.prover_id,
                bytes,
            )
            .unwrap(),
        }
    };

    // WinningPoSt as Curio's client sends it (bincode vanilla proofs for
    // its miner's prover id), for the soak's retry storms.
    let curio_prover = make_prover_id(CURIO_MINER);
    let curio_winning = {
        let vanilla = common::window_vanilla(&sealed, winning, randomness, curio_prover);
        let json = PostInput::request_json(
            winning,
            randomness,
            curio_prover,
            &vanilla,
            VanillaEncoding::Bincode,
        )
        .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
        pb::SubmitProofRequest {
            proof_kind: pb::ProofKind::WinningPost as i32,
            sector_size: 2048,
            // StackedDrgWinning2KiBV1 as Filecoin numbers it.
            registered_proof: 0,
            vanilla_proofs: v["vanilla_proofs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| STANDARD.decode(s.as_str().unwrap()).unwrap())
                .collect(),
            miner_id: CURIO_MINER,
            randomness: randomness.to_vec(),
            ..pb::SubmitProofRequest::default()
        }
    };
    let verify_curio = |bytes: &[u8]| -> bool {
        filecoin_proofs::verify_winning_post::<SectorShape2KiB>(
            &winning.config(),
            &randomness,
            &[(
                sealed.sector_id,
                PublicReplicaInfo::new(sealed.pre_commit.comm_r).unwrap(),
            )],
            curio_prover,
            bytes,
        )
        .unwrap()
    };

    // The long job's circuit and its (fake) parameters, in the directory
    // requests may name parameter files in.
    let long_spec: CircuitSpec = std::env::var("CUZK_LONG_JOB")
        .unwrap_or_else(|_| "porep:14".into())
        .parse()
        .unwrap();
    let builtin = work.path().join("builtin");
    std::fs::create_dir_all(&builtin).unwrap();
    let long_params = builtin.join(format!("{long_spec}.fake.params"));
    {
        let (spec, path) = (long_spec.clone(), long_params.clone());
        let start = Instant::now();
        tokio::task::spawn_blocking(move || {
            let pce = Pce::record(spec.build(0)).unwrap();
            cuzk_groth16_cuda::fake::write_fake_params(&path, &pce, 3).unwrap();
        })
        .await
        .unwrap();
        eprintln!("fake parameters of {long_spec}: {:.2?}", start.elapsed());
    }

    let mut config = common::daemon_config(work.path(), params);
    config.params_dirs = vec![builtin.clone()];
    let running = common::start_daemon_with(config).await;
    let address = running.address.clone();
    let mut c = client::connect(&address).await.unwrap();

    // Warm-up: every kind once (parameters loaded, PCEs recorded), each
    // proof accepted by its verifier; the time of each, for the log.
    let mut took = Vec::new();
    for (i, kind) in payloads.iter().enumerate() {
        let start = Instant::now();
        let bytes = prove(&mut c, request(kind.clone(), proto::Priority::Unspecified)).await;
        took.push(start.elapsed());
        assert!(verify(i, &bytes), "{}: the verifier refused it", KINDS[i]);
    }
    eprintln!("warm-up, one proof of each kind: {KINDS:?} took {took:.2?}");
    wait_idle(&mut c, "idle after the warm-up").await;

    // A WinningPoSt sent while a 10-partition job (NORMAL) runs, once the
    // job's first partition is proved: it finishes while the job still has
    // partitions to prove (it goes ahead of the job's partitions that had
    // not started).
    let partitions = 10u32;
    let long = proto::ProveRequest {
        circuit: long_spec.to_string(),
        witness_seeds: (1..=u64::from(partitions)).collect(),
        params: Some(proto::ParamsSpec {
            source: Some(proto::params_spec::Source::Path(
                long_params.display().to_string(),
            )),
        }),
        priority: proto::Priority::Normal as i32,
        ..proto::ProveRequest::default()
    };
    let (first_tx, first_rx) = tokio::sync::oneshot::channel::<Instant>();
    let long_task = {
        let address = address.clone();
        tokio::spawn(async move {
            let mut c = client::connect(&address).await.unwrap();
            let start = Instant::now();
            let stream = c.prove(long).await.unwrap().into_inner();
            let mut proved_at = Vec::new();
            let mut first_tx = Some(first_tx);
            let done = client::follow(stream, |_, p| {
                if p.stage == "proved" {
                    let now = Instant::now();
                    proved_at.push(now);
                    if let Some(tx) = first_tx.take() {
                        let _ = tx.send(now);
                    }
                }
            })
            .await
            .unwrap();
            assert_eq!(done.proofs.len(), 10);
            (start, proved_at, Instant::now())
        })
    };
    let first = first_rx.await.unwrap();
    let sent = Instant::now();
    let bytes = prove(
        &mut c,
        request(payloads[3].clone(), proto::Priority::Unspecified),
    )
    .await;
    let winning_done = Instant::now();
    assert!(verify(3, &bytes), "the WinningPoSt did not verify");
    let (long_start, proved_at, long_done) = long_task.await.unwrap();
    let before = proved_at.iter().filter(|t| **t <= sent).count();
    let during = proved_at
        .iter()
        .filter(|t| **t > sent && **t <= winning_done)
        .count();
    let latency = winning_done - sent;
    let per_partition = (long_done - first) / (partitions - 1);
    eprintln!(
        "WinningPoSt during a {partitions}-partition {long_spec} job: {latency:.3?} from send to \
         proof ({before} partitions proved before it was sent, {during} while it ran); the job \
         took {:.3?}, {per_partition:.3?} per partition after the first",
        long_done - long_start
    );
    let mut results = vec![
        one(
            &format!("daemon/winning-post-2kib/latency-during/{partitions}x{long_spec}"),
            latency,
            &format!(
                "from send to proof; sent once the job's first partition was proved; \
                 {before} partitions proved before it was sent, {during} while it ran"
            ),
        ),
        one(
            &format!("daemon/{long_spec}/{partitions}-partition-job"),
            long_done - long_start,
            "the whole job, the WinningPoSt's interruption included",
        ),
        one(
            &format!("daemon/{long_spec}/per-partition-after-first"),
            per_partition,
            "(job end - first partition proved) / (partitions - 1)",
        ),
    ];
    for (kind, t) in KINDS.iter().zip(&took) {
        results.push(one(
            &format!("daemon/{kind}-2kib/first-proof"),
            *t,
            "the first proof of its kind: parameters loaded and PCE recorded first",
        ));
    }
    assert!(
        winning_done < long_done,
        "the WinningPoSt finished after the {partitions}-partition job it was sent during"
    );
    assert!(
        before + during < partitions as usize,
        "every partition of the long job was proved before the WinningPoSt finished"
    );
    wait_idle(&mut c, "idle after the long job").await;

    // A WinningPoSt (CRITICAL by default) sent while two PoRep C2 jobs
    // (NORMAL by default) are queued and running finishes before the
    // second.
    let porep_jobs = 2;
    let mut ids = Vec::new();
    for _ in 0..porep_jobs {
        let reply = c
            .submit(request(payloads[0].clone(), proto::Priority::Unspecified))
            .await
            .unwrap()
            .into_inner();
        ids.push(reply.job_id);
    }
    let mut waiters = Vec::new();
    for id in ids.iter().copied() {
        let address = address.clone();
        waiters.push(tokio::spawn(async move {
            let mut c = client::connect(&address).await.unwrap();
            await_job(&mut c, id).await
        }));
    }
    let sent = Instant::now();
    let stream = c
        .prove(request(payloads[3].clone(), proto::Priority::Unspecified))
        .await
        .unwrap()
        .into_inner();
    let mut winning_priority = None;
    let watcher = {
        let address = address.clone();
        tokio::spawn(async move {
            // The WinningPoSt's class as the daemon reports it.
            let mut c = client::connect(&address).await.unwrap();
            for _ in 0..200 {
                let s = status(&mut c).await;
                if let Some(j) = s
                    .jobs
                    .iter()
                    .find(|j| j.circuit.starts_with("winning-post"))
                {
                    return Some(j.priority);
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            None
        })
    };
    let done = client::follow(stream, |_, _| {}).await.unwrap();
    let winning_done = Instant::now();
    assert!(done.verified && verify(3, &done.proof));
    if let Some(p) = watcher.await.unwrap() {
        winning_priority = Some(p);
    }
    let mut porep_done = Vec::new();
    for w in waiters {
        let (bytes, at) = w.await.unwrap();
        assert!(verify(0, &bytes), "a PoRep C2 of the queue did not verify");
        porep_done.push(at);
    }
    let after = porep_done.iter().filter(|t| **t > winning_done).count();
    results.push(one(
        &format!("daemon/winning-post-2kib/latency-behind/{porep_jobs}x-porep-c2-2kib"),
        winning_done - sent,
        &format!("{after} of the {porep_jobs} PoRep C2 jobs sent before it finished after it"),
    ));
    eprintln!(
        "WinningPoSt sent behind {porep_jobs} PoRep C2 jobs: done in {:.2?}; {after} of them \
         finished after it",
        winning_done - sent
    );
    assert!(
        after >= 1,
        "the WinningPoSt finished after {} of the {porep_jobs} PoRep C2 jobs sent before it",
        porep_jobs - after
    );
    if let Some(p) = winning_priority {
        assert_eq!(p, proto::Priority::Critical as i32, "WinningPoSt's class");
    }
    let baseline = wait_idle(&mut c, "idle after the priority check").await;

    // The soak.
    let on_gpu = common::expected_backend() == "cuda";
    let total: u64 = std::env::var("CUZK_FILECOIN_SOAK_REQUESTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if on_gpu { 200 } else { 12 });
    assert!(
        total >= 6,
        "CUZK_FILECOIN_SOAK_REQUESTS: at least 6 requests"
    );
    let soak_start = Instant::now();
    let next = Arc::new(AtomicU64::new(0));
    let payloads = Arc::new(payloads);
    let mut tasks = Vec::new();
    for client in 0..6u64 {
        let (address, next, payloads) = (address.clone(), Arc::clone(&next), Arc::clone(&payloads));
        tasks.push(tokio::spawn(async move {
            let mut c = client::connect(&address).await.unwrap();
            let mut rng = ChaCha20Rng::seed_from_u64(4200 + client);
            let (mut cancelled, mut proofs) = (0u64, Vec::new());
            loop {
                let n = next.fetch_add(1, Ordering::SeqCst);
                if n >= total {
                    break;
                }
                // PoRep C2 and SnapDeals cost the most (tens of seconds
                // each on a CPU): fewer of them; the first four requests
                // are one of each kind, never cancelled.
                let kind = match (n, rng.gen_range(0..40)) {
                    (0..4, _) => n as usize,
                    (4, _) => 0,
                    (_, 0) => 0,
                    (_, 1) => 1,
                    (_, 2..=7) => 3,
                    _ => 2,
                };
                let priority = [
                    proto::Priority::Unspecified,
                    proto::Priority::Low,
                    proto::Priority::Normal,
                    proto::Priority::High,
                    proto::Priority::Critical,
                ][rng.gen_range(0..5)];
                let req = request(payloads[kind].clone(), priority);
                let mode = match n {
                    0..4 => 9,
                    // A PoRep C2 cancelled at once (so at least one
                    // request of any soak is cancelled), then a client
                    // that goes away: every path at any size.
                    4 => 0,
                    5 => 1,
                    _ => rng.gen_range(0..10),
                };
                match mode {
                    // Cancel through the API, at once or a little later.
                    0 => {
                        let id = c.submit(req).await.unwrap().into_inner().job_id;
                        let wait = if n == 4 { 0 } else { rng.gen_range(0..40) };
                        tokio::time::sleep(Duration::from_millis(wait)).await;
                        c.cancel(proto::CancelRequest { job_id: id }).await.unwrap();
                        let s = c
                            .await_job(proto::AwaitRequest { job_id: id })
                            .await
                            .unwrap();
                        match client::follow(s.into_inner(), |_, _| {}).await {
                            Ok(f) => {
                                assert!(f.verified);
                                proofs.push((kind, f.proof));
                            }
                            Err(e) => {
                                assert!(format!("{e:#}").contains("cancelled"), "{e:#}");
                                cancelled += 1;
                            }
                        }
                    }
                    // Go away after a moment (the daemon cancels the job).
                    1 => {
                        let mut s = c.prove(req).await.unwrap().into_inner();
                        let wait = Duration::from_millis(rng.gen_range(0..40));
                        let got = tokio::time::timeout(wait, async {
                            loop {
                                match s.message().await {
                                    Ok(Some(proto::JobUpdate {
                                        update: Some(proto::job_update::Update::Proofs(p)),
                                        ..
                                    })) => return p,
                                    Ok(Some(_)) => {}
                                    other => panic!("{other:?}"),
                                }
                            }
                        })
                        .await;
                        match got {
                            Ok(p) => {
                                assert!(p.verified);
                                proofs.push((kind, p.proof));
                            }
                            Err(_) => cancelled += 1,
                        }
                    }
                    _ => proofs.push((kind, prove(&mut c, req).await)),
                }
            }
            (cancelled, proofs)
        }));
    }
    // Beside them: 4 clients that watch random unfinished jobs and leave at
    // random (a watcher never cancels: a job lost to one would fail its
    // submitter's request above), and a Curio client whose WinningPoSt
    // requests come as retry storms by request id (one job each).
    let soak_done = Arc::new(AtomicBool::new(false));
    let watchers: Vec<_> = (0..4u64)
        .map(|w| {
            let (address, soak_done) = (address.clone(), Arc::clone(&soak_done));
            tokio::spawn(async move { watch_and_leave(&address, 7700 + w, &soak_done).await })
        })
        .collect();
    let curio_requests = if on_gpu { 20 } else { 3 };
    let curio_task = {
        let (address, request) = (address.clone(), curio_winning.clone());
        tokio::spawn(async move { curio_retries(&address, request, curio_requests).await })
    };
    let (mut cancelled, mut by_kind) = (0, [0u32; 4]);
    for t in tasks {
        let (c_, proofs) = t.await.unwrap();
        cancelled += c_;
        for (kind, bytes) in proofs {
            assert!(
                verify(kind, &bytes),
                "{}: the verifier refused it",
                KINDS[kind]
            );
            by_kind[kind] += 1;
        }
    }
    let curio_proofs = curio_task.await.unwrap();
    soak_done.store(true, Ordering::SeqCst);
    let mut left = 0;
    for w in watchers {
        left += w.await.unwrap();
    }
    assert!(left > 0, "no watcher ever left a job");
    assert_eq!(curio_proofs.len(), curio_requests);
    for bytes in &curio_proofs {
        assert!(
            verify_curio(bytes),
            "Curio's WinningPoSt: the verifier refused it"
        );
    }
    eprintln!(
        "soak: watchers left {left} jobs; {curio_requests} Curio requests by retry storms, one \
         job each, verified"
    );
    let soak_took = soak_start.elapsed();
    let verified: u32 = by_kind.iter().sum();
    let mut soak = one(
        &format!("daemon/soak/{total}-mixed-2kib-requests-6-clients"),
        soak_took,
        &format!("verified {by_kind:?} of {KINDS:?}, {cancelled} cancelled; random priorities"),
    );
    soak["derived"] = serde_json::json!({
        "proofs_per_s": f64::from(verified) / soak_took.as_secs_f64(),
    });
    results.push(soak);
    if let Ok(path) = std::env::var("CUZK_LATENCY_JSON") {
        write_bench_data(&path, results);
    }
    eprintln!("soak: {total} requests; verified {by_kind:?} ({KINDS:?}), {cancelled} cancelled");
    assert!(cancelled > 0, "no request was cancelled");
    assert!(
        by_kind.iter().all(|n| *n > 0),
        "a kind was never proved: {by_kind:?}"
    );
    assert_eq!(u64::from(verified) + cancelled, total);

    // Back to idle: no working set, no pinned lease; what stays charged is
    // the resident parameter sets and PCEs (which ones depends on what the
    // budget evicted under load and loaded again), each set once, none in
    // use, within the budget.
    let after = wait_idle(&mut c, "idle after the soak").await;
    let (m0, m1) = (baseline.memory.unwrap(), after.memory.unwrap());
    eprintln!(
        "resident before the soak: PCEs {} B, parameters {} B ({} sets); after: {} B, {} B ({} \
         sets)",
        m0.pce_bytes,
        m0.params_bytes,
        baseline.params.len(),
        m1.pce_bytes,
        m1.params_bytes,
        after.params.len()
    );
    assert_eq!(m1.working_set_bytes, 0);
    assert_eq!(
        m1.used_bytes,
        m1.pce_bytes + m1.params_bytes + m1.pinned_idle_bytes
    );
    assert!(m1.used_bytes <= m1.budget_bytes, "{m1:?}");
    let mut ids: Vec<&str> = after.params.iter().map(|p| p.id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(
        ids.len(),
        after.params.len(),
        "a set resident twice: {:?}",
        after.params
    );
    assert!(
        after.params.iter().all(|p| p.users == 0),
        "{:?}",
        after.params
    );
    assert_eq!(
        after.params.iter().map(|p| p.bytes).sum::<u64>(),
        m1.params_bytes,
        "{:?}",
        after.params
    );
    let p = after.pinned.unwrap();
    assert_eq!((p.bytes_leased, p.leases_outstanding), (0, 0));
    assert_eq!(p.bytes_held, p.bytes_idle);
    assert_eq!(after.backend, common::expected_backend());
    common::stop_daemon(running).await;
}
