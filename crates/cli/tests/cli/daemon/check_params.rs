//! `check_params = true`: a Filecoin parameter or verifying-key file that
//! fails `cuzk params check` is refused (FAILED_PRECONDITION, naming the
//! file and what is wrong) before it is used, for a preload by registered
//! proof and for a proof: a file under a name filecoin-proofs publishes
//! with other bytes (wrong digest), a damaged verifying key of an unlisted
//! circuit; a file that passed is checked again once it changes. Without
//! the setting the same files are used unchecked.

use std::path::Path;

use cuzk_cli::proto::{self, filecoin_proof::Kind, params_spec::Source};
use cuzk_filecoin::params_check::DigestTable;
use cuzk_filecoin::{ParamFiles, PostProof};
use tonic::Code;

use super::{TestDaemon, params_file};

/// Listed in filecoin-proofs' parameters.json.
const LISTED: &str = "StackedDrgWindow2KiBV1_1";
/// A test sector size: its circuit's files are not listed.
const UNLISTED: &str = "StackedDrgWindow4KiBV1_1";

fn preload(name: &str) -> proto::ParamsRequest {
    proto::ParamsRequest {
        params: Some(proto::ParamsSpec {
            source: Some(Source::PostProof(name.into())),
        }),
    }
}

/// `name`'s files in `dir`, holding some Groth16 parameters (not the
/// circuit's: nothing is proved here) and their verifying key.
fn files(dir: &Path, name: &str) -> (ParamFiles, Vec<u8>) {
    let proof: PostProof = name.parse().unwrap();
    let files = cuzk_filecoin::post::param_files_for(proof, dir).unwrap();
    let made = params_file(dir, "mul-chain:6");
    std::fs::copy(&made, &files.params).unwrap();
    let vk = cuzk_groth16_cuda::read_verifying_key(&files.params).unwrap();
    let mut b = Vec::new();
    vk.write(&mut b).unwrap();
    std::fs::write(&files.vk, &b).unwrap();
    (files, b)
}

fn refused(e: tonic::Status, file: &Path, what: &str) {
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    let m = e.message();
    assert!(m.starts_with("check_params: "), "{m}");
    assert!(m.contains(&file.display().to_string()), "{m}");
    assert!(m.contains(what), "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_params_refuses_a_damaged_file_before_using_it() {
    let cache = tempfile::tempdir().unwrap();
    let (listed, _) = files(cache.path(), LISTED);
    let (unlisted, good_vk) = files(cache.path(), UNLISTED);
    let name = listed.params.file_name().unwrap().to_str().unwrap();
    let expected = DigestTable::official().unwrap().digest(name).unwrap();
    // One byte of alpha_g1 changed: no longer a curve point.
    let mut bad_vk = good_vk.clone();
    bad_vk[40] ^= 0x10;
    std::fs::write(&unlisted.vk, &bad_vk).unwrap();

    let cache_dir = cache.path().to_owned();
    let d = TestDaemon::start(|c| {
        c.filecoin_params_dir = Some(cache_dir.clone());
        c.check_params = true;
    })
    .await;
    let mut c = d.client().await;
    // Under a published name, other bytes.
    let wrong = format!("wrong digest (expected {expected}, got ");
    let e = c.preload(preload(LISTED)).await.unwrap_err();
    refused(e, &listed.params, &wrong);
    // A proof of that circuit: refused before its partitions are built.
    let json = cuzk_filecoin::synthetic::post_json(LISTED.parse().unwrap(), 1, 3)
        .unwrap()
        .json;
    let req = proto::ProveRequest {
        filecoin: Some(proto::FilecoinProof {
            kind: Some(Kind::WindowPost(json)),
        }),
        ..proto::ProveRequest::default()
    };
    let e = c.prove(req).await.unwrap_err();
    refused(e, &listed.params, &wrong);

    // Unlisted: the structure is checked, the verifying key's points too.
    let e = c.preload(preload(UNLISTED)).await.unwrap_err();
    refused(
        e,
        &unlisted.vk,
        "unlisted: bad structure (verifying key: alpha_g1 is not a point",
    );
    // Mended, the files pass and the set loads.
    std::fs::write(&unlisted.vk, &good_vk).unwrap();
    let r = c.preload(preload(UNLISTED)).await.unwrap().into_inner();
    assert!(!r.was_resident);
    // Changed after it passed (cut short): checked again, refused.
    let params = std::fs::read(&unlisted.params).unwrap();
    let short = params.len() - 1;
    std::fs::write(&unlisted.params, &params[..short]).unwrap();
    let e = c.preload(preload(UNLISTED)).await.unwrap_err();
    refused(e, &unlisted.params, &format!("truncated ({short} bytes;"));
    d.stop().await;

    // Without the setting (the default) nothing is checked: the file under
    // the published name loads.
    let d = TestDaemon::start(|c| c.filecoin_params_dir = Some(cache_dir.clone())).await;
    let r = d.client().await.preload(preload(LISTED)).await.unwrap();
    assert!(!r.into_inner().was_resident);
    d.stop().await;
}
