//! `cuzk prove porep-c2 | window-post | snap-deals` end to end: real 2 KiB
//! sectors sealed (and, for SnapDeals, updated) here, seeded test
//! parameters in a test directory, the binary's proofs accepted by
//! filecoin-proofs' `verify_window_post` and
//! `verify_empty_sector_update_proof`; bad input gives an error naming the
//! problem and writes nothing.

use crate::common;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use cuzk_filecoin::post::{self, PostInput};
use cuzk_filecoin::{PostKind, PostProof, SealProof, SectorSize, testing, update};
use filecoin_proofs::{PublicReplicaInfo, SectorShape2KiB};
use storage_proofs_core::api_version::ApiVersion;

use crate::common::{PARAM_SEED, init};

fn cuzk(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cuzk"))
        .args(args)
        .output()
        .expect("cuzk runs")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `cuzk prove <what> <input flag> INPUT --out OUT --param-cache PARAMS`,
/// which must succeed.
fn prove_file(what: &[&str], input: &Path, out: &Path, params: &Path) {
    let mut args = vec!["prove"];
    args.extend_from_slice(what);
    args.extend([s(input), "--out", s(out), "--param-cache", s(params)]);
    let run = cuzk(&args);
    assert!(run.status.success(), "{}", text(&run));
}

/// Runs cuzk with `args`, which must fail saying `says` and leave no
/// `out` file.
fn refused(args: &[&str], says: &str, out: &Path) {
    let run = cuzk(args);
    assert!(!run.status.success(), "{args:?} succeeded");
    assert!(text(&run).contains(says), "{}", text(&run));
    assert!(!out.exists(), "{} was left behind", out.display());
}

/// Runs cuzk with `args`, which must succeed; its output.
fn succeeds(args: &[&str]) -> String {
    let run = cuzk(args);
    assert!(run.status.success(), "{}", text(&run));
    text(&run)
}

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn bytes32(v: &serde_json::Value) -> [u8; 32] {
    serde_json::from_value(v.clone()).unwrap()
}

#[test]
fn filecoin_proofs_from_the_command_line() {
    let params = init();
    let work = tempfile::tempdir().unwrap();
    let sector = work.path().join("sector");
    std::fs::create_dir_all(&sector).unwrap();
    let sealed =
        testing::seal::<SectorShape2KiB>(SealProof::v1_1(SectorSize::KIB2), &sector, 3).unwrap();

    let out = cuzk(&["prove", "porep-c2", "--help"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("--c1"), "{}", text(&out));

    // A truncated C1: refused, nothing written.
    let c1 = sealed.c1_json().unwrap();
    let truncated = work.path().join("truncated.json");
    std::fs::write(&truncated, &c1[..c1.len() - 7]).unwrap();
    let proof_path = work.path().join("c2.proof");
    let out = cuzk(&[
        "prove",
        "porep-c2",
        "--c1",
        s(&truncated),
        "--out",
        s(&proof_path),
    ]);
    assert!(!out.status.success());
    assert!(text(&out).contains("truncated"), "{}", text(&out));
    assert!(!proof_path.exists());

    // A good C1 but no parameters: the missing file and the convention.
    let good = work.path().join("c1.json");
    std::fs::write(&good, &c1).unwrap();
    let empty = work.path().join("no-params");
    let out = cuzk(&[
        "prove",
        "porep-c2",
        "--c1",
        s(&good),
        "--out",
        s(&proof_path),
        "--param-cache",
        s(&empty),
    ]);
    assert!(!out.status.success());
    let t = text(&out);
    assert!(
        t.contains("no Groth16 parameters at") && t.contains(".params"),
        "{t}"
    );
    // ...or another sector size asked for.
    let out = cuzk(&[
        "prove",
        "porep-c2",
        "--c1",
        s(&good),
        "--out",
        s(&proof_path),
        "--registered-proof",
        "StackedDrg8MiBV1_1",
    ]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("is for 2KiB sectors, but 8MiB"),
        "{}",
        text(&out)
    );

    // WindowPoSt end to end.
    let proof = PostProof {
        kind: PostKind::Window,
        sector_size: SectorSize::KIB2,
        api_version: ApiVersion::V1_1_0,
    };
    post::generate_test_params(proof, params, PARAM_SEED).unwrap();
    let config = proof.config();
    let randomness = [4u8; 32];
    let vanilla = common::window_vanilla(&sealed, proof, randomness, sealed.prover_id);
    let request = work.path().join("window.json");
    std::fs::write(
        &request,
        PostInput::request_json(
            proof,
            randomness,
            sealed.prover_id,
            &vanilla,
            cuzk_filecoin::VanillaEncoding::Json,
        )
        .unwrap(),
    )
    .unwrap();
    let window_proof = work.path().join("window.proof");
    let out = cuzk(&[
        "prove",
        "window-post",
        "--input",
        s(&request),
        "--out",
        s(&window_proof),
        "--param-cache",
        s(params),
        "--verify",
        "--set",
        "backend=cpu",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("verified"), "{}", text(&out));
    let bytes = std::fs::read(&window_proof).unwrap();
    let replicas = BTreeMap::from([(
        sealed.sector_id,
        PublicReplicaInfo::new(sealed.pre_commit.comm_r).unwrap(),
    )]);
    assert!(
        filecoin_proofs::verify_window_post::<SectorShape2KiB>(
            &config,
            &randomness,
            &replicas,
            sealed.prover_id,
            &bytes,
        )
        .unwrap()
    );
    // The same request as a WinningPoSt: refused by kind.
    let out = cuzk(&[
        "prove",
        "winning-post",
        "--input",
        s(&request),
        "--out",
        s(&window_proof),
        "--param-cache",
        s(params),
    ]);
    assert!(!out.status.success());
    assert!(text(&out).contains("not a WinningPoSt"), "{}", text(&out));
}

#[test]
fn snap_deals_from_the_command_line() {
    let params = init();
    let work = tempfile::tempdir().unwrap();
    let sector = work.path().join("sector");
    std::fs::create_dir_all(&sector).unwrap();
    let sealed =
        testing::seal_cc::<SectorShape2KiB>(SealProof::v1_1(SectorSize::KIB2), &sector, 5).unwrap();
    let updated = testing::update(&sealed, &sector, 6).unwrap();
    update::generate_test_params(updated.proof, params, PARAM_SEED).unwrap();

    let out = cuzk(&["prove", "snap-deals", "--help"]);
    assert!(out.status.success(), "{}", text(&out));
    let t = text(&out);
    assert!(t.contains("--request") && t.contains("--verify"), "{t}");

    let json = updated.request_json().unwrap();
    let request = work.path().join("update.json");
    std::fs::write(&request, &json).unwrap();
    let proof_path = work.path().join("update.proof");
    let prove = |request: &Path, extra: &[&str]| {
        let mut args = vec![
            "prove",
            "snap-deals",
            "--request",
            s(request),
            "--out",
            s(&proof_path),
            "--set",
            "backend=cpu",
        ];
        args.extend_from_slice(extra);
        cuzk(&args)
    };
    let edited = |name: &str, f: &dyn Fn(&mut serde_json::Value)| {
        let mut v: serde_json::Value = serde_json::from_slice(&json).unwrap();
        f(&mut v);
        let path = work.path().join(name);
        std::fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
        path
    };

    // A truncated request: refused, nothing written.
    let truncated = work.path().join("truncated.json");
    std::fs::write(&truncated, &json[..json.len() - 9]).unwrap();
    let out = prove(&truncated, &[]);
    assert!(!out.status.success());
    assert!(text(&out).contains("truncated"), "{}", text(&out));
    assert!(!proof_path.exists());
    // ...for another sector size.
    let other = edited("other.json", &|v| {
        v["registered_proof"] = "StackedDrg32GiBV1".into()
    });
    let out = prove(&other, &[]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("is for 2KiB sectors, but 32GiB"),
        "{}",
        text(&out)
    );
    // ...with a commitment that is not the update's.
    let wrong = edited("wrong.json", &|v| {
        let byte = &mut v["comm_d_new"][3];
        *byte = (byte.as_u64().unwrap() ^ 4).into();
    });
    let out = prove(&wrong, &[]);
    assert!(!out.status.success());
    let t = text(&out);
    assert!(
        t.contains("do not verify against its comm_r_old, comm_r_new and comm_d_new"),
        "{t}"
    );
    assert!(!t.contains("panicked"), "{t}");
    // ...without its parameters.
    let empty = work.path().join("no-params");
    let out = prove(&request, &["--param-cache", s(&empty)]);
    assert!(!out.status.success());
    let t = text(&out);
    assert!(
        t.contains("no Groth16 parameters at") && t.contains("v28-empty-sector-update-"),
        "{t}"
    );
    assert!(!proof_path.exists());

    // The proof (`--input`, as window-post names it, is the same option).
    let out = cuzk(&[
        "prove",
        "snap-deals",
        "--input",
        s(&request),
        "--out",
        s(&proof_path),
        "--param-cache",
        s(params),
        "--verify",
        "--set",
        "backend=cpu",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let t = text(&out);
    assert!(
        t.contains("wrote SnapDeals proof of StackedDrg2KiBV1 (1 partition(s), 192 bytes)")
            && t.contains("verified"),
        "{t}"
    );
    let bytes = std::fs::read(&proof_path).unwrap();
    let config = updated.proof.config().unwrap();
    assert!(
        filecoin_proofs::verify_empty_sector_update_proof::<SectorShape2KiB>(
            &config,
            &bytes,
            updated.comm_r_old,
            updated.comm_r_new,
            updated.comm_d_new,
        )
        .unwrap(),
        "verify_empty_sector_update_proof refused the binary's proof"
    );
}

#[test]
fn a_synthetic_c1_from_the_command_line_proves_and_verify_seal_accepts_it() {
    let params = init();
    let work = tempfile::tempdir().unwrap();
    let c1 = work.path().join("c1.json");

    // What the generator cannot serve: a clear error, no file.
    for (proof, says) in [
        ("StackedDrg3KiBV1_1", "unknown registered proof"),
        (
            "StackedDrg2KiBV1_1_Feat_SyntheticPoRep",
            "makes interactive PoRep C1s",
        ),
    ] {
        refused(
            &["synthetic-c1", "--seal-proof", proof, "--out", s(&c1)],
            says,
            &c1,
        );
    }
    let out = cuzk(&[
        "synthetic-c1",
        "--seal-proof",
        "StackedDrg2KiBV1_1",
        "--seed",
        "x",
    ]);
    assert!(!out.status.success());
    assert!(text(&out).contains("--seed"), "{}", text(&out));

    let proof = SealProof::v1_1(SectorSize::KIB2);
    cuzk_filecoin::porep::generate_test_params(proof, params, PARAM_SEED).unwrap();
    let said = succeeds(&[
        "synthetic-c1",
        "--seal-proof",
        "StackedDrg2KiBV1_1",
        "--seed",
        "9",
        "--out",
        s(&c1),
    ]);
    assert!(said.contains("1 partitions"), "{said}");

    let proof_path = work.path().join("c2.proof");
    prove_file(&["porep-c2", "--c1"], &c1, &proof_path, params);

    let v = read_json(&c1);
    let bytes32 = |key: &str| bytes32(&v[key]);
    let accepted = filecoin_proofs::verify_seal::<SectorShape2KiB>(
        &proof.config().unwrap(),
        bytes32("comm_r"),
        bytes32("comm_d"),
        bytes32("prover_id"),
        v["sector_id"].as_u64().unwrap().into(),
        bytes32("ticket"),
        bytes32("seed"),
        &std::fs::read(&proof_path).unwrap(),
    )
    .unwrap();
    assert!(accepted, "verify_seal refused the C2 of a synthetic C1");
}

#[test]
fn setup_writes_a_filecoin_circuits_parameters_under_filecoin_proofs_names() {
    let params = init();
    let work = tempfile::tempdir().unwrap();
    let proof = PostProof {
        kind: PostKind::Window,
        sector_size: SectorSize::KIB2,
        api_version: ApiVersion::V1_1_0,
    };
    // The library's seeded test parameters (bellperson's bytes for the seed).
    post::generate_test_params(proof, params, PARAM_SEED).unwrap();
    let theirs = post::param_files_for(proof, params).unwrap();

    let dir = work.path().join("params");
    let pce = work.path().join("pce");
    let seed = PARAM_SEED.to_string();
    let out = cuzk(&[
        "setup",
        "--post-proof",
        "StackedDrgWindow2KiBV1_1",
        "--seed",
        &seed,
        "--out",
        s(&dir),
        "--pce-dir",
        s(&pce),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("recorded the blank circuit"),
        "{}",
        text(&out)
    );
    let ours = post::param_files_for(proof, &dir).unwrap();
    for (a, b) in [
        (&ours.params, &theirs.params),
        (&ours.vk, &theirs.vk),
        (&ours.meta, &theirs.meta),
    ] {
        assert!(
            std::fs::read(a).unwrap() == std::fs::read(b).unwrap(),
            "{} differs from {}",
            a.display(),
            b.display()
        );
    }
    assert_eq!(std::fs::read_dir(&pce).unwrap().count(), 1);

    // Fake ones, from the PCE now on disk: same names, marked fake.
    let fake_dir = work.path().join("fake");
    let out = cuzk(&[
        "setup",
        "--fake",
        "--post-proof",
        "StackedDrgWindow2KiBV1_1",
        "--out",
        s(&fake_dir),
        "--pce-dir",
        s(&pce),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let t = text(&out);
    assert!(t.contains("read the PCE from") && t.contains("FAKE"), "{t}");
    let fake = post::param_files_for(proof, &fake_dir).unwrap();
    let vk = cuzk_groth16_cuda::read_verifying_key(&fake.params).unwrap();
    assert!(cuzk_groth16_cuda::fake::is_fake(&vk));
    assert!(fake.vk.is_file() && fake.meta.is_file());

    // A name that is not a registered proof, and --pce-dir without one.
    let out = cuzk(&[
        "setup",
        "--post-proof",
        "StackedDrgWindow3KiBV1_1",
        "--out",
        s(&dir),
    ]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("StackedDrgWindow3KiBV1_1"),
        "{}",
        text(&out)
    );
    let out = cuzk(&[
        "setup",
        "--circuit",
        "porep:8",
        "--out",
        s(&work.path().join("x.params")),
        "--pce-dir",
        s(&pce),
    ]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("--pce-dir is for Filecoin circuits"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_synthetic_window_post_from_the_command_line_verifies() {
    let params = init();
    let work = tempfile::tempdir().unwrap();
    let request = work.path().join("window.json");
    let proof = PostProof {
        kind: PostKind::Window,
        sector_size: SectorSize::KIB2,
        api_version: ApiVersion::V1_1_0,
    };
    post::generate_test_params(proof, params, PARAM_SEED).unwrap();

    // Sizes it cannot serve: a clear error, no file.
    refused(
        &[
            "synthetic-post",
            "--post-proof",
            "StackedDrgWinning2KiBV1",
            "--sectors",
            "3",
            "--out",
            s(&request),
        ],
        "3 sectors asked for",
        &request,
    );
    succeeds(&[
        "synthetic-post",
        "--post-proof",
        "StackedDrgWindow2KiBV1_1",
        "--sectors",
        "3",
        "--seed",
        "4",
        "--out",
        s(&request),
    ]);
    let proof_path = work.path().join("window.proof");
    prove_file(&["window-post", "--input"], &request, &proof_path, params);

    let v = read_json(&request);
    let replicas: BTreeMap<_, _> = v["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["sector_id"].as_u64().unwrap().into(),
                PublicReplicaInfo::new(bytes32(&r["comm_r"])).unwrap(),
            )
        })
        .collect();
    assert_eq!(replicas.len(), 3);
    let accepted = filecoin_proofs::verify_window_post::<SectorShape2KiB>(
        &proof.config(),
        &bytes32(&v["randomness"]),
        &replicas,
        bytes32(&v["prover_id"]),
        &std::fs::read(&proof_path).unwrap(),
    )
    .unwrap();
    assert!(
        accepted,
        "verify_window_post refused the proof of synthetic sectors"
    );
}

#[test]
fn a_synthetic_snap_deals_request_from_the_command_line_proves_and_verifies() {
    let params = init();
    let work = tempfile::tempdir().unwrap();
    let request = work.path().join("snap.json");
    let proof = cuzk_filecoin::UpdateProof::new(SectorSize::KIB2).unwrap();
    update::generate_test_params(proof, params, PARAM_SEED).unwrap();

    refused(
        &[
            "synthetic-snap",
            "--update-proof",
            "StackedDrg1GiBV1",
            "--out",
            s(&request),
        ],
        "1GiB",
        &request,
    );
    succeeds(&[
        "synthetic-snap",
        "--update-proof",
        "StackedDrg2KiBV1",
        "--seed",
        "5",
        "--out",
        s(&request),
    ]);
    let proof_path = work.path().join("snap.proof");
    let said = succeeds(&[
        "prove",
        "snap-deals",
        "--request",
        s(&request),
        "--out",
        s(&proof_path),
        "--param-cache",
        s(params),
        "--verify",
    ]);
    assert!(said.contains("verified"), "{said}");
    let v = read_json(&request);
    let accepted = filecoin_proofs::verify_empty_sector_update_proof::<SectorShape2KiB>(
        &proof.config().unwrap(),
        &std::fs::read(&proof_path).unwrap(),
        bytes32(&v["comm_r_old"]),
        bytes32(&v["comm_r_new"]),
        bytes32(&v["comm_d_new"]),
    )
    .unwrap();
    assert!(
        accepted,
        "filecoin-proofs refused the SnapDeals proof of a synthetic sector"
    );
}
