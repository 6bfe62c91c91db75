//! Concurrent clients of mixed priority get proofs that verify (and, with
//! explicit (r, s), match bellperson byte for byte); the status, metrics
//! (also over HTTP), preload/evict and timeline calls that follow.

use blstrs::Scalar;
use cuzk_cli::client;
use cuzk_cli::proto::{self, prove_request::Randomness};
use cuzk_synth::circuits::CircuitSpec;
use ff::{Field, PrimeField};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

use super::{TestDaemon, by_name, by_path, params, params_file, prove, request, verify};
use crate::common::status;

fn scalar_bytes(s: Scalar) -> Vec<u8> {
    s.to_repr().as_ref().to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_clients_of_mixed_priority_get_correct_proofs() {
    // A named set outside params_dirs: the operator configured it.
    let elsewhere = tempfile::tempdir().unwrap();
    let named = params_file(elsewhere.path(), "porep:6");
    let d = TestDaemon::start(|c| {
        c.param_sets.insert("porep6".into(), named.clone());
    })
    .await;
    let chain6 = params_file(&d.params_dir(), "mul-chain:6");

    let mut tasks = Vec::new();
    for client in 0..4u64 {
        let mut c = d.client().await;
        let chain6 = chain6.clone();
        tasks.push(tokio::spawn(async move {
            let mut rng = ChaCha20Rng::seed_from_u64(client);
            let mut made = Vec::new();
            for job in 0..3u64 {
                let priority = [
                    proto::Priority::Low,
                    proto::Priority::Normal,
                    proto::Priority::High,
                    proto::Priority::Critical,
                ][rng.gen_range(0..4)];
                let (spec, params) = if (client + job) % 2 == 0 {
                    ("mul-chain:6", by_path(&chain6))
                } else {
                    ("porep:6", by_name("porep6"))
                };
                let n = rng.gen_range(1..=3u64);
                let seeds: Vec<u64> = (0..n).map(|i| 100 * client + 10 * job + i).collect();
                let mut req = request(spec, seeds.clone(), params, priority);
                req.randomness = Some(Randomness::RsSeed(client * 7 + job));
                let proofs = if job == 1 {
                    // Submit, then await on the same connection.
                    let id = c.submit(req).await.unwrap().into_inner().job_id;
                    let s = c
                        .await_job(proto::AwaitRequest { job_id: id })
                        .await
                        .unwrap()
                        .into_inner();
                    client::follow(s, |_, _| {}).await.unwrap().proofs
                } else {
                    prove(&mut c, req).await.unwrap()
                };
                assert_eq!(proofs.len(), seeds.len());
                made.push((spec, seeds, proofs));
            }
            made
        }));
    }
    let mut total = 0;
    for t in tasks {
        for (spec, seeds, proofs) in t.await.unwrap() {
            for (seed, bytes) in seeds.iter().zip(&proofs) {
                verify(spec, *seed, bytes);
                total += 1;
            }
        }
    }
    assert!(total >= 12);

    // Explicit (r, s): byte-identical to bellperson's create_proof.
    let mut c = d.client().await;
    let mut rng = ChaCha20Rng::seed_from_u64(9);
    let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
    let mut req = request(
        "mul-chain:6",
        vec![42],
        by_path(&chain6),
        proto::Priority::Normal,
    );
    req.randomness = Some(Randomness::Explicit(proto::ExplicitRandomness {
        partitions: vec![proto::Randomness {
            r: scalar_bytes(r),
            s: scalar_bytes(s),
        }],
    }));
    let ours = prove(&mut c, req).await.unwrap();
    let circuit: CircuitSpec = "mul-chain:6".parse().unwrap();
    let theirs =
        bellperson::groth16::create_proof(circuit.build(42), &*params("mul-chain:6"), r, s)
            .unwrap();
    let mut want = Vec::new();
    theirs.write(&mut want).unwrap();
    assert_eq!(ours[0], want, "byte-identical to bellperson");

    // Status names the resident sets; metrics count what was done.
    let st = status(&mut c).await;
    assert_eq!(st.backend, "cpu");
    assert_eq!(st.queues.len(), 4);
    assert_eq!(st.devices.len(), 1);
    assert!(
        st.params
            .iter()
            .any(|p| p.id.ends_with("mul-chain-6.params")),
        "{st:?}"
    );
    assert!(st.cached_shapes.contains(&"porep:6".to_owned()));
    let text = c
        .metrics(proto::MetricsRequest {})
        .await
        .unwrap()
        .into_inner()
        .text;
    for name in [
        "cuzk_proofs_done_total{kind=\"mul-chain\"",
        "cuzk_jobs_total{",
        "cuzk_stage_duration_seconds_bucket{stage=\"kernel_region\"",
        "cuzk_device_busy_seconds_total{device=\"0\"}",
        "cuzk_device_busy_fraction{device=\"0\"}",
        "cuzk_memory_bytes{kind=\"working_set\"} 0",
        "cuzk_pinned_bytes{state=\"leased\"} 0",
        "cuzk_memory_budget_bytes 2147483648",
    ] {
        assert!(text.contains(name), "metrics lack {name}:\n{text}");
    }
    // The same text over HTTP on the metrics port.
    let addr = d.running.as_ref().unwrap().metrics_address.unwrap();
    let http = tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    })
    .await
    .unwrap();
    assert!(http.starts_with("HTTP/1.1 200"), "{http}");
    assert!(http.contains("cuzk_proofs_done_total"), "{http}");

    // Preload / evict through the API.
    let evicted = c
        .evict(proto::ParamsRequest {
            params: by_name("porep6"),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(evicted.was_resident);
    let loaded = c
        .preload(proto::ParamsRequest {
            params: by_name("porep6"),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!loaded.was_resident);
    // The timeline of the last run.
    let t = c
        .timeline(proto::TimelineRequest { all: true })
        .await
        .unwrap()
        .into_inner();
    let trace: serde_json::Value = serde_json::from_str(&t.chrome_trace_json).unwrap();
    assert!(!trace["traceEvents"].as_array().unwrap().is_empty());
    d.stop().await;
}
