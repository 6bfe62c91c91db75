//! What the engine reports: the timeline of a bench run (every stage, a
//! summary, a Chrome trace) and the status naming where each job evaluates
//! a/b/c and why.

use crate::common::*;
use cuzk_engine::{ParamsRef, ProofRequest, ShapeId};

use super::MIB;

#[test]
fn the_timeline_records_every_stage_and_summarizes() {
    let engine = engine(256 * MIB);
    engine.register_params("p", params("porep:9")).unwrap();
    let (proofs, report, timeline) = cuzk_engine::bench::run(
        &engine,
        &ShapeId::from("porep:9"),
        &ParamsRef::Key("p".into()),
        4,
        |seed| builtin("porep:9", seed),
    )
    .unwrap();
    assert_eq!(proofs.len(), 4);
    // The warm-up job is not in the measured timeline.
    let jobs: std::collections::BTreeSet<u64> = timeline.spans.iter().map(|s| s.job).collect();
    assert_eq!(jobs.len(), 1);
    for stage in [
        "witness",
        "spmv",
        "check",
        "prep",
        "kernel_region",
        "epilogue",
        "h (ntt)",
        "msm h",
    ] {
        let n = timeline.spans.iter().filter(|s| s.stage == stage).count();
        assert_eq!(n, 4, "{stage}");
    }
    // Where a/b/c were evaluated, and why, is on every spmv span.
    for span in timeline.spans.iter().filter(|s| s.stage == "spmv") {
        let note = span
            .note
            .as_deref()
            .expect("spmv spans carry the a/b/c choice");
        assert!(note.contains("cpu backend"), "{note}");
    }
    let s = &report.summary;
    assert_eq!(s.proofs, 4);
    assert!(s.proofs_per_second > 0.0);
    assert_eq!(s.devices.len(), 1);
    assert_eq!(s.devices[0].kernel_regions, 4);
    assert!(s.devices[0].busy_fraction > 0.0 && s.devices[0].busy_fraction <= 1.0);
    assert!(
        s.stages
            .iter()
            .any(|x| x.stage == "kernel_region" && x.median_ms > 0.0)
    );
    eprintln!("{s}");
    let trace = timeline.chrome_trace();
    let text = serde_json::to_string(&trace).unwrap();
    let back: serde_json::Value = serde_json::from_str(&text).unwrap();
    let events = back["traceEvents"].as_array().unwrap();
    assert!(events.iter().filter(|e| e["ph"] == "X").count() >= 4 * 8);
    assert!(
        events
            .iter()
            .all(|e| e["ph"] != "X" || e["dur"].as_u64().is_some())
    );
}

#[test]
fn the_status_names_where_each_job_evaluates_abc_and_why() {
    let engine = engine(256 * MIB);
    engine.register_params("chain", params("chain:40")).unwrap();
    let handle = engine
        .submit(ProofRequest::new(
            "chain:40",
            ParamsRef::Key("chain".into()),
            (0..3).map(|s| Chain::good(40, s)).collect(),
        ))
        .unwrap();
    // The job stays in the status until its handle is waited on.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let abc = loop {
        let status = engine.status();
        assert_eq!(status.jobs.len(), 1);
        if let Some(abc) = status.jobs[0].abc.clone() {
            break abc;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no a/b/c choice in the status"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    assert_eq!(abc.on, "host");
    assert!(abc.reason.contains("cpu backend"), "{}", abc.reason);
    let json = serde_json::to_value(engine.status()).unwrap();
    assert_eq!(json["jobs"][0]["abc"]["on"], "host");
    assert_eq!(handle.wait_blocking().unwrap().len(), 3);
}

/// a/b/c on the host: one partition's SpMV and check at a time (the
/// engine's gate), so the partition whose witness was done first has its
/// a/b/c first. Eight partitions on four synthesis threads with room for
/// all their witnesses at once (without the gate, their SpMVs overlapped
/// here): no two partitions' [spmv, check] intervals overlap, and the
/// partitions that found the gate taken say so in "spmv wait" spans.
#[test]
fn host_spmvs_run_one_at_a_time() {
    let mut config = config(1024 * MIB);
    config.synthesis_concurrency = cuzk_engine::Auto::Value(4);
    config.synthesis_ahead = cuzk_engine::Auto::Value(8);
    let engine = cuzk_engine::Engine::new(config).unwrap();
    engine.register_params("p", params("porep:14")).unwrap();
    let (proofs, _, timeline) = cuzk_engine::bench::run(
        &engine,
        &ShapeId::from("porep:14"),
        &ParamsRef::Key("p".into()),
        8,
        |seed| builtin("porep:14", seed),
    )
    .unwrap();
    assert_eq!(proofs.len(), 8);
    // [start of spmv, end of check] of each partition.
    let mut runs = Vec::new();
    for spmv in timeline.spans.iter().filter(|s| s.stage == "spmv") {
        let check = timeline
            .spans
            .iter()
            .find(|s| s.stage == "check" && s.job == spmv.job && s.partition == spmv.partition)
            .expect("a check after each spmv");
        runs.push((spmv.start_us, check.end_us, spmv.job, spmv.partition));
    }
    assert_eq!(runs.len(), 8);
    runs.sort();
    for w in runs.windows(2) {
        assert!(
            w[0].1 <= w[1].0,
            "partitions' host SpMVs overlap: {:?} and {:?}",
            w[0],
            w[1]
        );
    }
    let waits: Vec<_> = timeline
        .spans
        .iter()
        .filter(|s| s.stage == "spmv wait")
        .collect();
    for wait in &waits {
        let note = wait.note.as_deref().unwrap_or_default();
        assert!(note.contains("one at a time"), "{note}");
        // A wait is another partition's SpMV and check running.
        assert!(
            runs.iter().any(|&(start, end, job, partition)| {
                (job, partition) != (wait.job, wait.partition)
                    && start < wait.end_us
                    && end > wait.start_us
            }),
            "a wait beside no other partition's SpMV: {wait:?}"
        );
    }
    eprintln!("{} of 8 partitions waited for the gate", waits.len());
}
