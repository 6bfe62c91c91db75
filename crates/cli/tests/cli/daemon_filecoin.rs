//! The daemon proving Filecoin proofs for clients (on the GPU where there
//! is one, else the CPU; the backend that ran is checked): a 2 KiB
//! PoRep C2 from its C1 output, a 2 KiB WindowPoSt and a 2 KiB SnapDeals,
//! each verified by the daemon before the reply and accepted by
//! filecoin-proofs' own verifiers, and byte-identical to the same proof
//! made in-process with the same (r, s); bad input refused with its
//! own gRPC code while the daemon goes on serving; `cuzk prove
//! window-post --daemon`; Preload and Evict by registered proof name.

use crate::common;
use std::collections::BTreeMap;
use std::process::Command;

use blstrs::Scalar;
use cuzk_cli::client::{self, Client};
use cuzk_cli::daemon::Address;
use cuzk_cli::proto::{self, filecoin_proof::Kind, prove_request::Randomness};
use cuzk_engine::Engine;
use cuzk_filecoin::post::PostInput;
use cuzk_filecoin::{C1Output, PostKind, PostProof, SectorSize};
use ff::{Field, PrimeField};
use filecoin_proofs::{PublicReplicaInfo, SectorShape2KiB};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use storage_proofs_core::api_version::ApiVersion;
use tonic::Code;

fn request(kind: Kind, randomness: Option<Vec<(Scalar, Scalar)>>) -> proto::ProveRequest {
    proto::ProveRequest {
        filecoin: Some(proto::FilecoinProof { kind: Some(kind) }),
        randomness: randomness.map(|rs| {
            Randomness::Explicit(proto::ExplicitRandomness {
                partitions: rs
                    .iter()
                    .map(|(r, s)| proto::Randomness {
                        r: r.to_repr().to_vec(),
                        s: s.to_repr().to_vec(),
                    })
                    .collect(),
            })
        }),
        ..proto::ProveRequest::default()
    }
}

/// Proves through the daemon; the reply's proof bytes, checked to have
/// been verified by the daemon.
async fn prove(c: &mut Client, req: proto::ProveRequest) -> Result<Vec<u8>, tonic::Status> {
    let stream = c.prove(req).await?.into_inner();
    let done = client::follow(stream, |_, _| {})
        .await
        .map_err(|e| tonic::Status::unknown(format!("{e:#}")))?;
    assert!(
        done.verified,
        "the daemon did not say it verified the proof"
    );
    assert_eq!(done.proof, done.proofs.concat());
    Ok(done.proof)
}

/// The daemon's Prometheus text.
async fn metrics(c: &mut Client) -> String {
    c.metrics(proto::MetricsRequest {})
        .await
        .unwrap()
        .into_inner()
        .text
}

/// Runs the `cuzk` binary: whether it succeeded, and what it printed.
async fn cuzk(args: Vec<String>) -> (bool, String) {
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_cuzk"))
            .args(&args)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// The proof bytes `prove` makes in this process, on a fresh engine
/// configured as the test daemons' engines are.
async fn in_process(prove: impl FnOnce(&Engine) -> Vec<u8> + Send + 'static) -> Vec<u8> {
    tokio::task::spawn_blocking(move || prove(&Engine::new(common::engine_config()).unwrap()))
        .await
        .unwrap()
}

fn porep_c2(c1: &[u8], registered: &str) -> Kind {
    Kind::PorepC2(proto::PoRepC2 {
        c1_json: c1.to_vec(),
        registered_proof: registered.into(),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_daemon_proves_and_verifies_filecoin_proofs() {
    let params = common::init();
    let work = tempfile::tempdir().unwrap();
    let window = PostProof {
        kind: PostKind::Window,
        sector_size: SectorSize::KIB2,
        api_version: ApiVersion::V1_1_0,
    };
    let (sealed, updated) = common::sectors(work.path(), params, 21, window).await;

    // PCEs kept on disk, for the restart at the end.
    let pce_dir = work.path().join("pce");
    let mut config = common::daemon_config(work.path(), params);
    config.engine.pce_cache_dir = Some(pce_dir.clone());
    let running = common::start_daemon_with(config).await;
    let address = running.address.clone();
    let mut c = client::connect(&address).await.unwrap();

    // PoRep C2 with fixed (r, s): the bytes of the same proof made
    // in-process, and verify_seal accepts them.
    let c1_json = sealed.c1_json().unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    let rs = vec![(Scalar::random(&mut rng), Scalar::random(&mut rng))];
    let bytes = prove(&mut c, request(porep_c2(&c1_json, ""), Some(rs.clone())))
        .await
        .unwrap();
    let ours = {
        let (c1_json, params, rs) = (c1_json.clone(), params.to_owned(), rs.clone());
        in_process(move |engine| {
            let c1 = C1Output::from_json(&c1_json, None).unwrap();
            c1.prove(engine, &params, Some(rs)).unwrap().bytes
        })
        .await
    };
    assert_eq!(
        bytes, ours,
        "the daemon's C2 differs from the in-process one"
    );
    assert!(
        common::verify_seal(&sealed, &bytes),
        "verify_seal refused the daemon's C2"
    );

    // Bad input: each refused with its code, before any SNARK work.
    let mut altered: serde_json::Value = serde_json::from_slice(&c1_json).unwrap();
    let byte = &mut altered["comm_r"][5];
    *byte = (byte.as_u64().unwrap() ^ 0x10).into();
    let altered = serde_json::to_vec(&altered).unwrap();
    for (kind, code, needle) in [
        (
            porep_c2(&c1_json[..c1_json.len() - 11], ""),
            Code::InvalidArgument,
            "truncated",
        ),
        (
            porep_c2(&c1_json, "StackedDrg8MiBV1_1"),
            Code::InvalidArgument,
            "is for 2KiB sectors, but 8MiB",
        ),
        (
            porep_c2(&c1_json, "StackedDrg3KiBV1_1"),
            Code::InvalidArgument,
            "unknown registered proof",
        ),
        (porep_c2(&altered, ""), Code::InvalidArgument, ""),
        (
            Kind::WinningPost(b"{}".to_vec()),
            Code::InvalidArgument,
            "PoSt request",
        ),
    ] {
        let e = prove(&mut c, request(kind, None)).await.unwrap_err();
        assert_eq!(e.code(), code, "{needle}: {e:?}");
        assert!(e.message().contains(needle), "{needle}: {e:?}");
    }
    // A Filecoin request that also names a circuit.
    let mixed = proto::ProveRequest {
        circuit: "mul-chain:4".into(),
        ..request(porep_c2(&c1_json, ""), None)
    };
    let e = prove(&mut c, mixed).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");

    // WindowPoSt, from the request file `cuzk prove window-post` reads.
    let post_config = window.config();
    let randomness = [9u8; 32];
    let vanilla = common::window_vanilla(&sealed, window, randomness, sealed.prover_id);
    let window_json = PostInput::request_json(
        window,
        randomness,
        sealed.prover_id,
        &vanilla,
        cuzk_filecoin::VanillaEncoding::Json,
    )
    .unwrap();
    let window_rs = vec![(Scalar::random(&mut rng), Scalar::random(&mut rng))];
    let bytes = prove(
        &mut c,
        request(
            Kind::WindowPost(window_json.clone()),
            Some(window_rs.clone()),
        ),
    )
    .await
    .unwrap();
    let ours = {
        let (json, params, rs) = (window_json.clone(), params.to_owned(), window_rs);
        in_process(move |engine| {
            let input = PostInput::from_json(&json, Some(PostKind::Window)).unwrap();
            input.prove(engine, &params, Some(rs)).unwrap().bytes
        })
        .await
    };
    assert_eq!(
        bytes, ours,
        "the daemon's WindowPoSt differs from the in-process one"
    );
    let replicas = BTreeMap::from([(
        sealed.sector_id,
        PublicReplicaInfo::new(sealed.pre_commit.comm_r).unwrap(),
    )]);
    let verify_window = |bytes: &[u8]| {
        filecoin_proofs::verify_window_post::<SectorShape2KiB>(
            &post_config,
            &randomness,
            &replicas,
            sealed.prover_id,
            bytes,
        )
        .unwrap()
    };
    assert!(
        verify_window(&bytes),
        "verify_window_post refused the daemon's proof"
    );
    // The same request sent as a WinningPoSt is refused by kind.
    let e = prove(
        &mut c,
        request(Kind::WinningPost(window_json.clone()), None),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");

    // SnapDeals, with fixed (r, s): the in-process proof's bytes.
    let snap_json = updated.request_json().unwrap();
    let snap_rs: Vec<_> = (0..cuzk_filecoin::UpdateInput::from_json(&snap_json)
        .unwrap()
        .partitions())
        .map(|_| (Scalar::random(&mut rng), Scalar::random(&mut rng)))
        .collect();
    let bytes = prove(
        &mut c,
        request(Kind::SnapDeals(snap_json.clone()), Some(snap_rs.clone())),
    )
    .await
    .unwrap();
    let ours = {
        let (params, rs) = (params.to_owned(), snap_rs);
        in_process(move |engine| {
            let input = cuzk_filecoin::UpdateInput::from_json(&snap_json).unwrap();
            input.prove(engine, &params, Some(rs)).unwrap().bytes
        })
        .await
    };
    assert_eq!(
        bytes, ours,
        "the daemon's SnapDeals proof differs from the in-process one"
    );
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

    // The command line through the daemon (a WindowPoSt: the same path as
    // every kind, and the cheapest proof).
    let request_path = work.path().join("window.json");
    std::fs::write(&request_path, &window_json).unwrap();
    let out_path = work.path().join("window.proof");
    let socket = match &address {
        Address::Unix(p) => p.clone(),
        Address::Tcp(_) => unreachable!(),
    };
    let args = [
        "prove".to_owned(),
        "window-post".into(),
        "--input".into(),
        request_path.display().to_string(),
        "--out".into(),
        out_path.display().to_string(),
        "--daemon".into(),
        format!("unix:{}", socket.display()),
        "--priority".into(),
        "critical".into(),
    ];
    let (success, text) = cuzk(args.to_vec()).await;
    assert!(success, "{text}");
    assert!(text.contains("verified by the daemon"), "{text}");
    assert!(verify_window(&std::fs::read(&out_path).unwrap()));

    // The parameters of each circuit were loaded once and kept: one
    // resident set per circuit after 4 proofs of 3 circuits.
    let status = c
        .status(proto::StatusRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status.params.len(), 3, "{:?}", status.params);
    assert_eq!(status.backend, common::expected_backend());
    let loads = |text: &str, what: &str| -> u64 {
        let key = format!("cuzk_loads_total{{what=\"{what}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&key))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {key} in the metrics:\n{text}"))
    };
    let text = metrics(&mut c).await;
    assert_eq!(loads(&text, "params"), 3, "each parameter file read once");
    assert_eq!(loads(&text, "pce_recorded"), 3, "each PCE recorded once");
    assert_eq!(loads(&text, "pce_disk"), 0);
    // Nothing waited for memory: no job parked, no set evicted.
    for what in ["park", "params_evicted"] {
        let key = format!("cuzk_swaps_total{{what=\"{what}\"}} 0");
        assert!(
            text.lines().any(|l| l == key),
            "no {key} in the metrics:\n{text}"
        );
    }

    // Preload and Evict by registered proof name find the same sets.
    let by_proof = |source: proto::params_spec::Source| proto::ParamsRequest {
        params: Some(proto::ParamsSpec {
            source: Some(source),
        }),
    };
    use proto::params_spec::Source;
    for source in [
        Source::SealProof("StackedDrg2KiBV1_1".into()),
        Source::PostProof("StackedDrgWindow2KiBV1_1".into()),
        Source::UpdateProof("StackedDrg2KiBV1".into()),
    ] {
        let reply = c
            .preload(by_proof(source.clone()))
            .await
            .unwrap()
            .into_inner();
        assert!(reply.was_resident, "{source:?}: {reply:?}");
        let reply = c
            .evict(by_proof(source.clone()))
            .await
            .unwrap()
            .into_inner();
        assert!(reply.was_resident, "{source:?}: {reply:?}");
        let reply = c
            .preload(by_proof(source.clone()))
            .await
            .unwrap()
            .into_inner();
        assert!(!reply.was_resident, "{source:?}: {reply:?}");
    }
    // The same from the command line.
    for (action, flag, name, said) in [
        (
            "preload",
            "--seal-proof",
            "StackedDrg2KiBV1_1",
            "was already resident",
        ),
        (
            "evict",
            "--post-proof",
            "StackedDrgWindow2KiBV1_1",
            "evicted",
        ),
        (
            "preload",
            "--update-proof",
            "StackedDrg2KiBV1",
            "was already resident",
        ),
    ] {
        let args = [
            "params".to_owned(),
            action.into(),
            flag.into(),
            name.into(),
            "--daemon".into(),
            format!("unix:{}", socket.display()),
        ];
        let (success, text) = cuzk(args.to_vec()).await;
        assert!(success, "{action} {flag} {name}: {text}");
        assert!(text.contains(said), "{action} {flag} {name}: {text}");
    }
    let e = c
        .preload(by_proof(Source::SealProof("StackedDrg3KiBV1_1".into())))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    let e = c
        .preload(by_proof(Source::SealProof("StackedDrg8MiBV1_1".into())))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e:?}");
    common::stop_daemon(running).await;

    // After a restart the PCE comes from disk, not from recording.
    let restarted = work.path().join("restarted");
    std::fs::create_dir_all(&restarted).unwrap();
    let mut config = common::daemon_config(&restarted, params);
    config.engine.pce_cache_dir = Some(pce_dir);
    let running = common::start_daemon_with(config).await;
    let mut c = client::connect(&running.address).await.unwrap();
    let bytes = prove(&mut c, request(Kind::WindowPost(window_json.clone()), None))
        .await
        .unwrap();
    assert!(verify_window(&bytes));
    let text = metrics(&mut c).await;
    assert_eq!(loads(&text, "pce_disk"), 1, "the PCE read from disk");
    assert_eq!(loads(&text, "pce_recorded"), 0, "nothing recorded again");
    common::stop_daemon(running).await;

    // Without parameter files: the daemon's precondition, named.
    let empty = work.path().join("no-params");
    std::fs::create_dir_all(&empty).unwrap();
    let other = work.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let running = common::start_daemon(&other, &empty).await;
    let mut c = client::connect(&running.address).await.unwrap();
    let e = prove(&mut c, request(porep_c2(&c1_json, ""), None))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    assert!(e.message().contains("no Groth16 parameters at"), "{e:?}");
    common::stop_daemon(running).await;
}
