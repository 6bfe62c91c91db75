//! The soak's side clients: watchers that await random jobs and leave,
//! and a Curio client sending WinningPoSt requests as retry storms.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use cuzk_cli::client;
use cuzk_cli::curio_proto::{self as pb, proving_engine_client::ProvingEngineClient};
use cuzk_cli::proto;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

use crate::common::status;

/// The miner of the soak's Curio requests.
pub const CURIO_MINER: u64 = 1000;

/// Watches random unfinished jobs (`AwaitJob`) and leaves each after a
/// random moment, until `done`; how many it left.
pub async fn watch_and_leave(
    address: &cuzk_cli::daemon::Address,
    seed: u64,
    done: &AtomicBool,
) -> u64 {
    let mut c = client::connect(address).await.unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut left = 0;
    while !done.load(Ordering::SeqCst) {
        let s = status(&mut c).await;
        let running: Vec<u64> = s
            .jobs
            .iter()
            .filter(|j| j.state != "ended")
            .map(|j| j.job_id)
            .collect();
        if running.is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        }
        let id = running[rng.gen_range(0..running.len())];
        // The job may have ended and gone since the status.
        let Ok(stream) = c.await_job(proto::AwaitRequest { job_id: id }).await else {
            continue;
        };
        let mut stream = stream.into_inner();
        let stay = Duration::from_millis(rng.gen_range(0..60));
        let _ = tokio::time::timeout(stay, stream.message()).await;
        drop(stream);
        left += 1;
    }
    left
}

/// Curio's client retrying: each of `n` WinningPoSt requests is sent three
/// times at once and once more a moment later, all with its request id;
/// every submission of a request gets the same job, each request its own;
/// the proofs, awaited by job id.
pub async fn curio_retries(
    address: &cuzk_cli::daemon::Address,
    request: pb::SubmitProofRequest,
    n: usize,
) -> Vec<Vec<u8>> {
    let c = ProvingEngineClient::new(client::channel(address).await.unwrap());
    let mut rng = ChaCha20Rng::seed_from_u64(99);
    let (mut jobs, mut proofs) = (BTreeSet::new(), Vec::new());
    for i in 0..n {
        let req = pb::SubmitProofRequest {
            request_id: format!("soak-winning-{i}"),
            ..request.clone()
        };
        let storm: Vec<_> = (0..3)
            .map(|_| {
                let (mut c, req) = (c.clone(), req.clone());
                tokio::spawn(async move { c.submit_proof(req).await.unwrap().into_inner().job_id })
            })
            .collect();
        let mut ids = BTreeSet::new();
        for s in storm {
            ids.insert(s.await.unwrap());
        }
        tokio::time::sleep(Duration::from_millis(rng.gen_range(0..100))).await;
        let mut c = c.clone();
        ids.insert(
            c.submit_proof(req.clone())
                .await
                .unwrap()
                .into_inner()
                .job_id,
        );
        assert_eq!(ids.len(), 1, "request {i}: one request id made {ids:?}");
        let id = ids.pop_first().unwrap();
        assert!(
            jobs.insert(id.clone()),
            "request {i} reached another's job {id}"
        );
        let reply = c
            .await_proof(pb::AwaitProofRequest {
                job_id: id,
                timeout_ms: 0,
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            reply.status(),
            pb::await_proof_response::Status::Completed,
            "request {i}: {}",
            reply.error_message
        );
        proofs.push(reply.proof);
    }
    proofs
}
