//! `cuzk status` tells the operator why a job waits: the engine's
//! `waiting` text reaches the daemon's status reply and the command line,
//! in its text and `--json` forms, and goes once the job is admitted.

use std::path::Path;

use cuzk_engine::pce_file::ShapeCounts;
use cuzk_groth16_cuda::CpuProver;

use super::*;

/// `cuzk status` and `cuzk status --json` against `sock`, run as processes.
async fn cli_status(sock: &Path) -> (String, serde_json::Value) {
    let sock = sock.to_owned();
    tokio::task::spawn_blocking(move || {
        let text = run_ok(cuzk().args(["status", "--daemon"]).arg(&sock));
        let json = run_ok(cuzk().args(["status", "--json", "--daemon"]).arg(&sock));
        (text, serde_json::from_str(&json).unwrap())
    })
    .await
    .unwrap()
}

/// The `waiting` line under job `id`'s line in `cuzk status`'s text, if any
/// (the job line is followed by indented detail lines).
fn waiting_line(text: &str, id: u64) -> Option<&str> {
    let mut lines = text.lines().skip_while(|l| *l != "jobs:").skip(1);
    lines.find(|l| l.split_whitespace().next() == Some(&id.to_string()))?;
    lines
        .take_while(|l| l.starts_with("         "))
        .map(str::trim)
        .find(|l| !l.starts_with("a/b/c on the "))
}

fn job_json(status: &serde_json::Value, id: u64) -> Option<&serde_json::Value> {
    status["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["job_id"] == id)
}

fn waits_for_host_memory(s: &proto::StatusReply, id: u64) -> bool {
    s.jobs.iter().any(|j| {
        j.job_id == id
            && j.waiting
                .as_deref()
                .is_some_and(|w| w.contains("host memory"))
    })
}

/// A budget that holds the PCE, the parameters and one working set of a
/// circuit but not a second working set: while one job of the circuit
/// runs, a second waits for admission, and `cuzk status` (text and JSON)
/// says it waits for host memory; once the first ends, the second is
/// admitted, proves, and no longer says it waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn status_shows_a_job_waiting_for_host_memory_until_admitted() {
    let spec = "mul-chain:10";
    let files = tempfile::tempdir().unwrap();
    let path = params_file(files.path(), spec);
    let circuit: CircuitSpec = spec.parse().unwrap();
    let pce = cuzk_synth::Pce::record(circuit.build(0)).unwrap();
    let ws = cuzk_engine::working_set_bytes(ShapeCounts::of(&pce), &CpuProver);
    let one_job = pce.bytes() as u64 + std::fs::metadata(&path).unwrap().len() + ws;
    let budget = one_job + ws / 2;
    assert!(
        budget >= 1 << 20,
        "{spec} is too small for a daemon's budget"
    );
    let allowed = files.path().to_owned();
    let d = TestDaemon::start(move |c| {
        c.params_dirs.push(allowed);
        c.engine.host_memory_budget = Auto::Value(ByteSize(budget));
    })
    .await;
    let mut c = d.client().await;

    // The first job has far more partitions than the test needs: it ends
    // when cancelled, so it cannot end before the second job was seen
    // waiting.
    let long = request(
        spec,
        (0..1000).collect(),
        by_path(&path),
        proto::Priority::Normal,
    );
    let first = c.submit(long).await.unwrap().into_inner().job_id;
    let first_stream = c
        .await_job(proto::AwaitRequest { job_id: first })
        .await
        .unwrap()
        .into_inner();
    // Followed from now on, so that its updates never back up.
    let first_done = tokio::spawn(client::follow(first_stream, |_, _| {}));
    wait_status(&mut c, "the first job running", |s| {
        s.jobs.iter().any(|j| j.job_id == first && j.proved > 0)
    })
    .await;

    let seed = 7;
    let second = c
        .submit(request(
            spec,
            vec![seed],
            by_path(&path),
            proto::Priority::Normal,
        ))
        .await
        .unwrap()
        .into_inner()
        .job_id;
    let second_stream = c
        .await_job(proto::AwaitRequest { job_id: second })
        .await
        .unwrap()
        .into_inner();
    let second_done = tokio::spawn(client::follow(second_stream, |_, _| {}));
    wait_status(&mut c, "the second job waiting for host memory", |s| {
        waits_for_host_memory(s, second)
    })
    .await;

    let (text, json) = cli_status(&d.socket()).await;
    let line = waiting_line(&text, second).unwrap_or_else(|| panic!("no waiting line:\n{text}"));
    assert!(
        line.starts_with("admission:") && line.contains("host memory"),
        "{line:?} in\n{text}"
    );
    assert_eq!(waiting_line(&text, first), None, "{text}");
    let waiting = job_json(&json, second).unwrap()["waiting"]
        .as_str()
        .unwrap_or_else(|| panic!("no waiting text: {json:#}"));
    assert!(
        waiting.starts_with("admission:") && waiting.contains("host memory"),
        "{waiting:?}"
    );
    assert_eq!(waiting, line, "text and JSON say the same");
    assert!(
        job_json(&json, first).unwrap()["waiting"].is_null(),
        "{json:#}"
    );

    // The first job ends; the second is admitted and proves.
    c.cancel(proto::CancelRequest { job_id: first })
        .await
        .unwrap();
    let e = tokio::time::timeout(Duration::from_secs(60), first_done)
        .await
        .expect("the cancelled job ends")
        .unwrap()
        .unwrap_err();
    assert!(format!("{e:#}").contains("cancelled"), "{e:#}");
    let done = tokio::time::timeout(Duration::from_secs(60), second_done)
        .await
        .expect("the second job ends once the first is gone")
        .unwrap()
        .unwrap();
    assert_eq!(done.proofs.len(), 1);
    verify(spec, seed, &done.proofs[0]);

    let (text, json) = cli_status(&d.socket()).await;
    assert_eq!(waiting_line(&text, second), None, "{text}");
    assert!(!text.contains("admission:"), "{text}");
    if let Some(j) = job_json(&json, second) {
        assert!(j["waiting"].is_null(), "{json:#}");
    }
    d.stop().await;
}
