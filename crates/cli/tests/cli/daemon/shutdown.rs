//! Work that ends early: a client that goes away (a dropped stream, a killed
//! process) frees its job; SIGTERM under load finishes the running jobs and
//! leaves no partial output; a `Shutdown` call that cancels running jobs
//! leaves nothing running and no memory held.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cuzk_cli::client;
use cuzk_cli::daemon::Address;
use cuzk_cli::proto;
use tonic::Code;

use super::{
    TestDaemon, by_path, cuzk, params_file, prove, prove_code, request, verify, wait_status,
};
use crate::common::{idle, status};

fn kill(child: &Child, signal: &str) {
    let ok = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {signal} {}", child.id());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_client_that_goes_away_frees_its_job() {
    let d = TestDaemon::start(|_| {}).await;
    let chain10 = params_file(&d.params_dir(), "mul-chain:10");
    let mut c = d.client().await;
    let idle_memory = {
        // Warm up: PCE and parameters resident, the idle figures after it.
        prove(
            &mut c,
            request(
                "mul-chain:10",
                vec![1],
                by_path(&chain10),
                proto::Priority::Normal,
            ),
        )
        .await
        .unwrap();
        wait_status(&mut c, "idle", idle).await;
        status(&mut c).await.memory.unwrap()
    };

    // 1. A task of this process drops its stream (and connection).
    let task = {
        let mut other = d.client().await;
        let req = request(
            "mul-chain:10",
            (1..=40).collect(),
            by_path(&chain10),
            proto::Priority::High,
        );
        tokio::spawn(async move { prove(&mut other, req).await })
    };
    wait_status(&mut c, "the job to prove", |s| {
        s.jobs.iter().any(|j| j.proved >= 1)
    })
    .await;
    task.abort();
    wait_status(&mut c, "the job to go", idle).await;

    // 2. A `cuzk prove --daemon` process killed mid-job.
    let out = d.dir.path().join("killed.proof");
    let mut child = cuzk()
        .args([
            "prove",
            "--circuit",
            "mul-chain:10",
            "--partitions",
            "40",
            "--daemon",
        ])
        .arg(d.socket())
        .arg("--params")
        .arg(&chain10)
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_status(&mut c, "the process's job to prove", |s| {
        s.jobs.iter().any(|j| j.proved >= 1)
    })
    .await;
    kill(&child, "-KILL");
    child.wait().unwrap();
    wait_status(&mut c, "the killed client's job to go", idle).await;
    assert!(!out.exists());
    let after = status(&mut c).await.memory.unwrap();
    assert_eq!(after.working_set_bytes, 0);
    assert_eq!(
        (after.pce_bytes, after.params_bytes),
        (idle_memory.pce_bytes, idle_memory.params_bytes)
    );
    let text = c
        .metrics(proto::MetricsRequest {})
        .await
        .unwrap()
        .into_inner()
        .text;
    assert!(
        text.contains(
            "cuzk_jobs_total{kind=\"mul-chain\",outcome=\"cancelled\",priority=\"high\"} 1"
        ),
        "{text}"
    );
    d.stop().await;
}

/// Waits for a process to exit (at most `limit`).
fn wait_exit(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("process {} did not exit within {limit:?}", child.id());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigterm_under_load_finishes_running_jobs_and_leaves_no_partial_output() {
    let dir = tempfile::tempdir().unwrap();
    let params_dir = dir.path().join("params");
    let out_dir = dir.path().join("out");
    std::fs::create_dir_all(&params_dir).unwrap();
    std::fs::create_dir_all(&out_dir).unwrap();
    let chain8 = params_file(&params_dir, "mul-chain:8");
    let socket = dir.path().join("d.sock");
    let mut daemon = cuzk()
        .args([
            "daemon",
            "--metrics-listen",
            "off",
            "--engine",
            "backend=cpu",
        ])
        .arg("--listen")
        .arg(&socket)
        .arg("--params-dir")
        .arg(&params_dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let address = Address::Unix(socket.clone());
    let mut c = {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(c) = client::connect(&address).await {
                break c;
            }
            assert!(Instant::now() < deadline, "the daemon did not come up");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let clients: Vec<(PathBuf, Child)> = (0..6)
        .map(|i| {
            let out = out_dir.join(format!("{i}.proof"));
            let child = cuzk()
                .args([
                    "prove",
                    "--circuit",
                    "mul-chain:8",
                    "--partitions",
                    "4",
                    "--json",
                ])
                .args(["--witness-seed", &(10 * i + 1).to_string(), "--daemon"])
                .arg(&socket)
                .arg("--params")
                .arg(&chain8)
                .arg("--out")
                .arg(&out)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            (out, child)
        })
        .collect();
    wait_status(&mut c, "jobs in flight", |s| {
        s.jobs.iter().any(|j| j.proved >= 1)
    })
    .await;
    kill(&daemon, "-TERM");
    // Once the daemon says it is draining, new requests are refused (unless
    // it finished draining first and is gone).
    let draining = loop {
        match c.status(proto::StatusRequest {}).await {
            Ok(s) if s.get_ref().shutting_down => break true,
            Ok(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            Err(_) => break false,
        }
    };
    if draining {
        let late = request(
            "mul-chain:8",
            vec![1],
            by_path(&chain8),
            proto::Priority::Normal,
        );
        let (code, message) = prove_code(&mut c, late).await;
        assert_ne!(code, Code::Ok, "{message}");
    }
    drop(c);
    let status = wait_exit(&mut daemon, Duration::from_secs(120));
    assert!(status.success(), "daemon exit: {status:?}");
    assert!(!socket.exists(), "the socket is removed");
    let mut delivered = 0;
    for (i, (out, mut child)) in clients.into_iter().enumerate() {
        let status = wait_exit(&mut child, Duration::from_secs(60));
        let mut stderr = String::new();
        std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
        if status.success() {
            let bytes = std::fs::read(&out).unwrap();
            assert_eq!(bytes.len(), 4 * 192, "{}", out.display());
            for (k, proof) in bytes.chunks(192).enumerate() {
                verify("mul-chain:8", 10 * i as u64 + 1 + k as u64, proof);
            }
            delivered += 1;
        } else {
            assert!(!out.exists(), "a failed client left {}", out.display());
            assert!(stderr.contains("error:"), "{stderr}");
            assert!(!stderr.contains("panicked"), "{stderr}");
        }
    }
    assert!(delivered >= 1, "jobs in flight at SIGTERM finish");
    let left: Vec<_> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".proof"))
        .collect();
    assert!(left.is_empty(), "partial files left: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn shutdown_call_cancelling_running_jobs_leaves_nothing_running() {
    let d = TestDaemon::start(|_| {}).await;
    let chain10 = params_file(&d.params_dir(), "mul-chain:10");
    let mut c = d.client().await;
    let jobs: Vec<_> = (0..3)
        .map(|i| {
            let address = d.address.clone();
            let chain10 = chain10.clone();
            tokio::spawn(async move {
                let mut c = client::connect(&address).await.unwrap();
                let req = request(
                    "mul-chain:10",
                    (0..30).map(|k| 100 * i + k).collect(),
                    by_path(&chain10),
                    proto::Priority::Normal,
                );
                prove_code(&mut c, req).await
            })
        })
        .collect();
    wait_status(&mut c, "jobs in flight", |s| {
        s.jobs.iter().any(|j| j.proved >= 1)
    })
    .await;
    let reply = c
        .shutdown(proto::ShutdownRequest {
            cancel_running: true,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(reply.running_jobs >= 1);
    for j in jobs {
        let (code, message) = j.await.unwrap();
        assert!(
            matches!(code, Code::Cancelled | Code::Unavailable),
            "{code:?}: {message}"
        );
    }
    let mut d = d;
    let running = d.running.take().unwrap();
    let engine = Arc::clone(&running.daemon.engine);
    tokio::time::timeout(Duration::from_secs(60), running.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(!d.socket().exists());
    let s = engine.status();
    assert!(
        s.jobs
            .iter()
            .all(|j| j.phase == cuzk_engine::JobPhase::Ended),
        "{s:?}"
    );
    assert_eq!(s.memory.working_set_bytes, 0);
    assert_eq!(s.pinned.bytes_leased, 0);
}
