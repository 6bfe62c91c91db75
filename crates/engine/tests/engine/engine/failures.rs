//! Jobs that end without proofs: cancellation gives back memory and
//! permits, impossible requests are refused with their numbers (also the GPU
//! backend where it cannot run), and a failing partition fails its own job
//! with the cause while the others are proved.

use crate::common::*;
use cuzk_engine::{Backend, EngineConfig, EngineError, ParamsRef, ProgressStage, ProofRequest};

use super::MIB;

#[test]
fn cancelling_a_job_gives_back_its_memory_and_permits() {
    let dir = tempfile::tempdir().unwrap();
    let path = ParamsRef::File(params_file(dir.path(), "porep:10"));
    let engine = engine(128 * MIB);
    let request = |n: u64| {
        ProofRequest::new(
            "porep:10",
            path.clone(),
            (0..n).map(|s| builtin("porep:10", s)).collect(),
        )
    };
    // Warm up: PCE recorded, parameters loaded.
    engine.submit(request(1)).unwrap().wait_blocking().unwrap();
    engine.trim_pinned();
    let start = engine.memory();
    let start_stats = engine.stats();
    assert_eq!(start.working_set_bytes, 0);
    assert_eq!(start_stats.dispatch_in_flight, 0);

    let mut job = engine.submit(request(16)).unwrap();
    let mut events = job.take_events().unwrap();
    while let Some(e) = events.blocking_recv() {
        if e.stage == ProgressStage::Proved {
            break;
        }
    }
    let busy = engine.stats();
    eprintln!(
        "cancel: before {start:?}\ncancel: running {:?}, {} permits held",
        busy.memory, busy.dispatch_in_flight
    );
    assert!(busy.memory.working_set_bytes > 0);
    let id = job.id();
    job.cancel();
    let err = job.wait_blocking().unwrap_err();
    assert!(
        matches!(err, EngineError::Cancelled { job } if job == id),
        "{err:?}"
    );
    let after = engine.stats();
    eprintln!(
        "cancel: after {:?}, {} permits held, {} queued",
        after.memory, after.dispatch_in_flight, after.queued_partitions
    );
    assert_eq!(after.memory.working_set_bytes, 0);
    assert_eq!(
        engine.budget().charged(),
        start.pce_bytes + start.params_bytes
    );
    assert_eq!(after.dispatch_in_flight, 0);
    assert_eq!(after.queued_partitions, 0);
    assert_eq!(after.scheduler.queued, 0);
    assert_eq!(after.scheduler.devices[0].item_bytes, 0);
    assert_eq!(after.scheduler.devices[0].busy_workers, 0);
    assert_eq!(after.pinned.leases_outstanding, 0);
    engine.trim_pinned();
    assert_eq!(
        engine.memory(),
        start,
        "the budget is back where it started"
    );

    // The engine still proves.
    assert_eq!(
        engine
            .submit(request(2))
            .unwrap()
            .wait_blocking()
            .unwrap()
            .len(),
        2
    );
}

#[test]
fn impossible_requests_are_refused_with_their_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let path = ParamsRef::File(params_file(dir.path(), "porep:10"));
    const BUDGET: u64 = 256 << 10;
    let engine = engine(BUDGET);
    let job = engine
        .submit(ProofRequest::new(
            "porep:10",
            path.clone(),
            vec![builtin("porep:10", 1)],
        ))
        .unwrap();
    let id = job.id();
    let err = job.wait_blocking().unwrap_err();
    let EngineError::JobNeverFits {
        job,
        need_bytes,
        pce_bytes,
        params_bytes,
        working_set_bytes,
        budget_bytes,
    } = err
    else {
        panic!("expected JobNeverFits, got {err:?}");
    };
    assert_eq!(job, id);
    assert_eq!(budget_bytes, BUDGET);
    assert_eq!(need_bytes, pce_bytes + params_bytes + working_set_bytes);
    assert!(
        need_bytes > budget_bytes && pce_bytes > 0 && params_bytes > 0 && working_set_bytes > 0
    );
    let text = err.to_string();
    eprintln!("refusal: {text}");
    assert!(
        text.contains("can never fit in the host memory budget"),
        "{text}"
    );
    assert!(text.contains(&format!("{need_bytes} bytes")), "{text}");
    assert!(text.contains("(262144 bytes)"), "{text}");
    assert_eq!(engine.budget().charged(), 0);

    let err = engine.preload_params(&path).unwrap_err();
    assert!(matches!(err, EngineError::NeverFits { .. }), "{err:?}");

    // Refusals that need no work come from submit itself.
    let empty: Vec<Chain> = vec![];
    assert!(matches!(
        engine.submit(ProofRequest::new("x", path.clone(), empty)),
        Err(EngineError::EmptyRequest)
    ));
    assert!(matches!(
        engine.submit(
            ProofRequest::new("x", path.clone(), vec![Chain::good(4, 0)]).with_randomness(vec![])
        ),
        Err(EngineError::RandomnessMismatch {
            partitions: 1,
            pairs: 0
        })
    ));
    assert!(matches!(
        engine.submit(ProofRequest::new(
            "x",
            ParamsRef::Key("nope".into()),
            vec![Chain::good(4, 0)]
        )),
        Err(EngineError::ParamsNotRegistered { .. })
    ));
    // The GPU backend where it cannot run: on a machine without a usable GPU
    // any `backend = "gpu"` engine; with one, an engine on a GPU the driver
    // does not see.
    let has_gpu = cuzk_gpu_sched::testing::gpu_expected("impossible_requests_are_refused");
    let gpu = EngineConfig {
        backend: Backend::Gpu,
        gpus: has_gpu.then(|| vec![4096]),
        ..config(MIB)
    };
    // The one-shot commands' prover is chosen the same way.
    let one_shot = cuzk_engine::open_prover(&gpu).err();
    let err = cuzk_engine::Engine::new(gpu).unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(err, EngineError::BackendUnavailable { backend: "gpu", .. }),
        "{err:?}"
    );
    assert!(text.contains("backend `gpu` is not available"), "{text}");
    assert_eq!(one_shot.map(|e| e.to_string()), Some(text.clone()));
    if has_gpu {
        assert!(
            text.contains("gpus names GPU 4096, but the driver sees"),
            "{text}"
        );
    }
    let cpu = EngineConfig {
        backend: Backend::Cpu,
        ..config(MIB)
    };
    assert_eq!(cuzk_engine::open_prover(&cpu).unwrap().name(), "cpu");
    let auto = EngineConfig {
        backend: Backend::Auto,
        ..config(MIB)
    };
    assert_eq!(
        cuzk_engine::open_prover(&auto).unwrap().name(),
        if has_gpu { "cuda" } else { "cpu" }
    );
}

#[test]
fn a_failing_partition_fails_its_job_with_the_cause_and_spares_the_others() {
    let engine = engine(256 * MIB);
    engine.register_params("c", params("chain:30")).unwrap();
    let request = |partitions: Vec<Chain>| {
        ProofRequest::new("chain:30", ParamsRef::Key("c".into()), partitions)
    };
    let with = |k: usize, f: fn(&mut Chain)| -> Vec<Chain> {
        (0..4)
            .map(|i| {
                let mut c = Chain::good(30, i);
                if i as usize == k {
                    f(&mut c);
                }
                c
            })
            .collect()
    };
    let good_before = engine.submit(request(with(9, |_| {}))).unwrap();
    let lies = engine.submit(request(with(2, |c| c.lie = true))).unwrap();
    let fails = engine.submit(request(with(1, |c| c.fail = true))).unwrap();
    let panics = engine.submit(request(with(3, |c| c.panic = true))).unwrap();
    let good_after = engine.submit(request(with(9, |_| {}))).unwrap();

    let err = lies.wait_blocking().unwrap_err();
    assert!(
        matches!(&err, EngineError::PartitionSynthesis { partition: 2, source, .. }
            if source.to_string().contains("constraint 15 fails")),
        "{err:?}"
    );
    let err = fails.wait_blocking().unwrap_err();
    assert!(
        matches!(&err, EngineError::PartitionSynthesis { partition: 1, .. }),
        "{err:?}"
    );
    let err = panics.wait_blocking().unwrap_err();
    assert!(
        matches!(&err, EngineError::Panicked { partition: 3, stage: "witness", message, .. }
            if message.contains("on purpose")),
        "{err:?}"
    );
    eprintln!("failure: {err}");
    assert_eq!(good_before.wait_blocking().unwrap().len(), 4);
    assert_eq!(good_after.wait_blocking().unwrap().len(), 4);
    assert_eq!(engine.memory().working_set_bytes, 0);
}
