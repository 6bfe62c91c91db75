//! `cuzk prove porep-c2 | window-post` end to end: a real 2 KiB sector
//! sealed here, seeded test parameters in a test directory, the binary's
//! proof accepted by filecoin-proofs' `verify_window_post`; bad input gives
//! an error naming the problem and writes nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use cuzk_filecoin::post::{self, PostInput};
use cuzk_filecoin::{PostKind, PostProof, SealProof, SectorSize, testing};
use filecoin_proofs::{
    PrivateReplicaInfo, PublicReplicaInfo, SectorShape2KiB, generate_fallback_sector_challenges,
    generate_single_vanilla_proof,
};
use storage_proofs_core::api_version::ApiVersion;

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

#[test]
fn filecoin_proofs_from_the_command_line() {
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cuzk-cli-filecoin");
    let params = root.join("params-seed-5eedf11e");
    std::fs::create_dir_all(&params).unwrap();
    std::fs::create_dir_all(root.join("parents")).unwrap();
    // SAFETY: this binary has one test, and it sets these before anything
    // reads the environment.
    unsafe {
        std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", &params);
        std::env::set_var("FIL_PROOFS_PARENT_CACHE", root.join("parents"));
    }
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
    post::generate_test_params(proof, &params, 0x5EED_F11E).unwrap();
    let config = proof.config();
    let randomness = [4u8; 32];
    let replica = PrivateReplicaInfo::<SectorShape2KiB>::new(
        sealed.replica.clone(),
        sealed.pre_commit.comm_r,
        sealed.cache.clone(),
    )
    .unwrap();
    let challenges = generate_fallback_sector_challenges::<SectorShape2KiB>(
        &config,
        &randomness,
        &[sealed.sector_id],
        sealed.prover_id,
    )
    .unwrap();
    let vanilla = vec![
        generate_single_vanilla_proof(
            &config,
            sealed.sector_id,
            &replica,
            &challenges[&sealed.sector_id],
        )
        .unwrap(),
    ];
    let request = work.path().join("window.json");
    std::fs::write(
        &request,
        PostInput::request_json(proof, randomness, sealed.prover_id, &vanilla).unwrap(),
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
        s(&params),
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
        s(&params),
    ]);
    assert!(!out.status.success());
    assert!(text(&out).contains("not a WinningPoSt"), "{}", text(&out));
}
