//! A soak: 500 small proofs (`CUZK_SOAK_PROOFS`) with cancellations, after
//! which the memory budget and the pinned pool are back at their idle
//! figures.

use std::sync::Arc;
use std::time::Duration;

use cuzk_cli::client;
use cuzk_cli::proto;
use cuzk_engine::{Auto, ByteSize};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

use super::{TestDaemon, by_path, params_file, prove, request, verify, wait_status};
use crate::common::{idle, status};

/// 500 small proofs from several clients with random priorities; about one
/// job in six is cancelled (through `Cancel` or by dropping its stream).
/// Every delivered proof verifies, and the memory budget and pinned pool
/// return to their idle figures.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn soak_500_small_proofs_with_cancellations() {
    let total: u64 = std::env::var("CUZK_SOAK_PROOFS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500);
    let d = TestDaemon::start(|c| {
        c.engine.host_memory_budget = Auto::Value(ByteSize(64 << 20));
    })
    .await;
    let spec = "mul-chain:4";
    let path = params_file(&d.params_dir(), spec);
    let mut c = d.client().await;
    prove(
        &mut c,
        request(spec, vec![0], by_path(&path), proto::Priority::Normal),
    )
    .await
    .unwrap();
    wait_status(&mut c, "idle after warm-up", idle).await;
    let baseline = status(&mut c).await;

    let next = Arc::new(std::sync::atomic::AtomicU64::new(1));
    let clients = 6;
    let mut tasks = Vec::new();
    for client in 0..clients {
        let (address, path, next) = (d.address.clone(), path.clone(), Arc::clone(&next));
        tasks.push(tokio::spawn(async move {
            let mut c = client::connect(&address).await.unwrap();
            let mut rng = ChaCha20Rng::seed_from_u64(1000 + client);
            let (mut done, mut cancelled, mut proofs) = (0u64, 0u64, Vec::new());
            loop {
                let n = rng.gen_range(1..=2u64);
                let first = next.fetch_add(n, std::sync::atomic::Ordering::SeqCst);
                if first > total {
                    break;
                }
                let seeds: Vec<u64> = (first..first + n).filter(|s| *s <= total).collect();
                let priority = [
                    proto::Priority::Low,
                    proto::Priority::Normal,
                    proto::Priority::High,
                    proto::Priority::Critical,
                ][rng.gen_range(0..4)];
                let req = request(spec, seeds.clone(), by_path(&path), priority);
                match rng.gen_range(0..12) {
                    // Cancel through the API, right away or a little later.
                    0 => {
                        let id = c.submit(req).await.unwrap().into_inner().job_id;
                        tokio::time::sleep(Duration::from_millis(rng.gen_range(0..30))).await;
                        c.cancel(proto::CancelRequest { job_id: id }).await.unwrap();
                        let s = c.await_job(proto::AwaitRequest { job_id: id }).await;
                        match s {
                            Ok(s) => match client::follow(s.into_inner(), |_, _| {}).await {
                                Ok(f) => {
                                    proofs.push((seeds, f.proofs));
                                    done += 1;
                                }
                                Err(e) => {
                                    assert!(format!("{e:#}").contains("cancelled"), "{e:#}");
                                    cancelled += 1;
                                }
                            },
                            Err(e) => panic!("await after cancel: {e:?}"),
                        }
                    }
                    // Drop the stream after a moment.
                    1 => {
                        let mut s = c.prove(req).await.unwrap().into_inner();
                        let wait = Duration::from_millis(rng.gen_range(0..30));
                        match tokio::time::timeout(wait, async {
                            loop {
                                match s.message().await {
                                    Ok(Some(proto::JobUpdate {
                                        update: Some(proto::job_update::Update::Proofs(p)),
                                        ..
                                    })) => return Some(p.proofs),
                                    Ok(Some(_)) => {}
                                    other => panic!("{other:?}"),
                                }
                            }
                        })
                        .await
                        {
                            Ok(Some(p)) => {
                                proofs.push((seeds, p));
                                done += 1;
                            }
                            _ => cancelled += 1,
                        }
                    }
                    _ => {
                        let p = prove(&mut c, req).await.unwrap();
                        proofs.push((seeds, p));
                        done += 1;
                    }
                }
            }
            (done, cancelled, proofs)
        }));
    }
    let (mut done, mut cancelled, mut verified) = (0, 0, 0);
    for t in tasks {
        let (d_, c_, proofs) = t.await.unwrap();
        done += d_;
        cancelled += c_;
        for (seeds, ps) in proofs {
            assert_eq!(seeds.len(), ps.len());
            for (seed, p) in seeds.iter().zip(&ps) {
                verify(spec, *seed, p);
                verified += 1;
            }
        }
    }
    assert!(
        cancelled > 0 && done > 0,
        "done {done}, cancelled {cancelled}"
    );
    assert!(
        verified >= total / 2,
        "{verified} of {total} proofs delivered"
    );
    wait_status(&mut c, "idle after the soak", idle).await;
    let after = status(&mut c).await;
    let (m0, m1) = (baseline.memory.unwrap(), after.memory.unwrap());
    assert_eq!(m1.working_set_bytes, 0);
    assert_eq!(
        (m1.pce_bytes, m1.params_bytes),
        (m0.pce_bytes, m0.params_bytes)
    );
    assert_eq!(
        m1.used_bytes,
        m1.pce_bytes + m1.params_bytes + m1.pinned_idle_bytes
    );
    let p = after.pinned.unwrap();
    assert_eq!((p.bytes_leased, p.leases_outstanding), (0, 0));
    assert_eq!(p.bytes_held, p.bytes_idle);
    eprintln!(
        "soak: {verified} proofs verified, {done} jobs done, {cancelled} cancelled; pinned {} B \
         idle",
        p.bytes_idle
    );
    d.stop().await;
}
