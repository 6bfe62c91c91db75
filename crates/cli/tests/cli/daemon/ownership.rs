//! Clients sharing the daemon cannot hurt each other's jobs: watchers of a
//! job come and go without cancelling it (only its submitter's own stream,
//! or an explicit Cancel, does), and an error quoting a client's huge
//! value still reaches that client as the error it is.

use super::*;

/// Follows an `AwaitJob` stream to its end: the proofs, or the error.
async fn watch(c: &mut Client, id: u64) -> Result<Vec<Vec<u8>>, String> {
    let s = c
        .await_job(proto::AwaitRequest { job_id: id })
        .await
        .map_err(|e| e.to_string())?;
    client::follow(s.into_inner(), |_, _| {})
        .await
        .map(|f| f.proofs)
        .map_err(|e| format!("{e:#}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_watcher_leaving_does_not_cancel_the_job_for_the_others() {
    let d = TestDaemon::start(|_| {}).await;
    let chain10 = params_file(&d.params_dir(), "mul-chain:10");
    let mut c = d.client().await;
    let seeds: Vec<u64> = (1..=40).collect();
    let id = c
        .submit(request(
            "mul-chain:10",
            seeds.clone(),
            by_path(&chain10),
            proto::Priority::Normal,
        ))
        .await
        .unwrap()
        .into_inner()
        .job_id;
    // Three watchers on their own connections; a fourth that leaves as
    // soon as its stream is open, and a fifth after the first progress.
    let watchers: Vec<_> = (0..3)
        .map(|_| {
            let address = d.address.clone();
            tokio::spawn(async move {
                let mut c = client::connect(&address).await.unwrap();
                watch(&mut c, id).await
            })
        })
        .collect();
    {
        let mut leaver = d.client().await;
        let s = leaver
            .await_job(proto::AwaitRequest { job_id: id })
            .await
            .unwrap();
        drop(s);
        drop(leaver);
    }
    {
        let mut leaver = d.client().await;
        let mut s = leaver
            .await_job(proto::AwaitRequest { job_id: id })
            .await
            .unwrap()
            .into_inner();
        let first = s.message().await.unwrap().expect("a first update");
        assert!(
            matches!(first.update, Some(proto::job_update::Update::Progress(_))),
            "the job ended before a watcher could leave it: {first:?}"
        );
        drop(s);
        drop(leaver);
    }
    // The job still runs after both left, and ends with every proof for
    // each watcher left.
    wait_status(&mut c, "the job's first proofs", |s| {
        s.jobs.iter().any(|j| j.job_id == id && j.proved > 0)
    })
    .await;
    for w in watchers {
        let proofs = w.await.unwrap().expect("the job finishes for its watchers");
        assert_eq!(proofs.len(), seeds.len());
        for (seed, bytes) in seeds.iter().zip(&proofs).step_by(13) {
            verify("mul-chain:10", *seed, bytes);
        }
    }
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_submitters_own_stream_still_cancels_when_it_leaves() {
    let d = TestDaemon::start(|_| {}).await;
    let chain10 = params_file(&d.params_dir(), "mul-chain:10");
    let mut c = d.client().await;
    let mut s = c
        .prove(request(
            "mul-chain:10",
            (1..=40).collect(),
            by_path(&chain10),
            proto::Priority::Normal,
        ))
        .await
        .unwrap()
        .into_inner();
    let first = s.message().await.unwrap().unwrap();
    let id = first.job_id;
    // A watcher stays; the submitter goes.
    let mut w = d.client().await;
    let watcher = tokio::spawn(async move { watch(&mut w, id).await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    drop(s);
    let e = watcher.await.unwrap().unwrap_err();
    assert!(e.contains("cancelled"), "{e}");
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_quote_at_most_a_few_hundred_bytes_of_a_clients_value() {
    let d = TestDaemon::start(|_| {}).await;
    let mut c = d.client().await;
    let huge = "x".repeat(1 << 20);
    // A circuit spec, a parameter set's name and path, a megabyte each.
    let cases = [
        request(&huge, vec![1], by_name("porep6"), proto::Priority::Normal),
        request(
            "mul-chain:6",
            vec![1],
            by_name(&huge),
            proto::Priority::Normal,
        ),
        request(
            "mul-chain:6",
            vec![1],
            by_path(Path::new(&huge)),
            proto::Priority::Normal,
        ),
    ];
    for (i, req) in cases.into_iter().enumerate() {
        let (code, message) = prove_code(&mut c, req).await;
        assert!(
            matches!(
                code,
                Code::InvalidArgument | Code::NotFound | Code::PermissionDenied
            ),
            "case {i}: {code:?} {}",
            &message[..message.len().min(300)]
        );
        assert!(
            message.len() <= 1200,
            "case {i}: a message of {} bytes",
            message.len()
        );
        assert!(message.contains("bytes"), "case {i}: {message}");
    }
    // The daemon goes on serving.
    let chain6 = params_file(&d.params_dir(), "mul-chain:6");
    let proofs = prove(
        &mut c,
        request(
            "mul-chain:6",
            vec![3],
            by_path(&chain6),
            proto::Priority::Normal,
        ),
    )
    .await
    .unwrap();
    verify("mul-chain:6", 3, &proofs[0]);
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn status_and_the_reply_carry_the_jobs_timing() {
    let d = TestDaemon::start(|_| {}).await;
    let chain10 = params_file(&d.params_dir(), "mul-chain:10");
    let mut c = d.client().await;
    let stream = c
        .prove(request(
            "mul-chain:10",
            (1..=10).collect(),
            by_path(&chain10),
            proto::Priority::Normal,
        ))
        .await
        .unwrap()
        .into_inner();
    let waiter = tokio::spawn(client::follow(stream, |_, _| {}));
    wait_status(&mut c, "a partition proved, the timing filled", |s| {
        s.jobs.iter().any(|j| {
            let t = j.timing.clone().unwrap_or_default();
            j.proved > 0 && t.synthesis_ms > 0 && t.gpu_compute_ms > 0 && t.params_load_ms > 0
        })
    })
    .await;
    let s = status(&mut c).await;
    let job = s.jobs.iter().find(|j| j.proved > 0).unwrap();
    // Where the job's partitions ran is named, for the job and its device.
    let timing = job.timing.clone().unwrap();
    assert_eq!(timing.devices, vec![0], "{timing:?}");
    if job.state != "ended" {
        assert!(
            s.devices
                .iter()
                .any(|dev| dev.current_jobs.contains(&job.job_id)),
            "{s:#?}"
        );
    }
    let done = waiter.await.unwrap().unwrap();
    let reply = done.timing.expect("the reply's timing");
    assert!(reply.gpu_compute_ms >= timing.gpu_compute_ms, "{reply:?}");
    assert!(reply.synthesis_ms >= timing.synthesis_ms, "{reply:?}");
    assert!(reply.params_load_ms > 0, "{reply:?}");
    // The reply's GPU time is the job's kernel regions in the timeline.
    let trace = c
        .timeline(proto::TimelineRequest { all: true })
        .await
        .unwrap()
        .into_inner()
        .chrome_trace_json;
    let trace: serde_json::Value = serde_json::from_str(&trace).unwrap();
    let events = trace
        .as_array()
        .or_else(|| trace["traceEvents"].as_array())
        .expect("trace events");
    let kernel_us: u64 = events
        .iter()
        .filter(|e| e["name"] == "kernel_region" && e["args"]["job"] == job.job_id)
        .map(|e| e["dur"].as_u64().unwrap())
        .sum();
    assert!(kernel_us > 0);
    assert_eq!(reply.gpu_compute_ms, kernel_us.div_ceil(1000), "{reply:?}");
    d.stop().await;
}
