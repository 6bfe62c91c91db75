//! The engine on the CPU backend: proofs byte-identical to bellperson,
//! priorities, cancellation that gives everything back, refusals with
//! numbers, failures confined to their job, the PCE directory, the
//! parameter manager, and the timeline.

use crate::common;
use std::sync::atomic::Ordering;

use crate::common::*;
use bellperson::groth16::{create_proof, prepare_verifying_key, verify_proof};
use blstrs::Scalar;
use cuzk_engine::{
    Backend, EngineConfig, EngineError, ParamsRef, Priority, ProgressStage, ProofRequest, ShapeId,
};
use cuzk_synth::Witness;
use ff::Field;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;

const MIB: u64 = 1 << 20;

#[test]
fn multi_partition_jobs_are_byte_identical_to_bellperson() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(512 * MIB);
    let mut rng = ChaCha20Rng::seed_from_u64(11);
    for spec in ["porep:9", "mul-chain:8"] {
        let params = params(spec);
        let path = params_file(dir.path(), spec);
        let seeds = [3u64, 1, 4, 1, 5];
        let randomness: Vec<(Scalar, Scalar)> = seeds
            .iter()
            .map(|_| (Scalar::random(&mut rng), Scalar::random(&mut rng)))
            .collect();
        let mut job = engine
            .submit(
                ProofRequest::new(
                    spec,
                    ParamsRef::File(path),
                    seeds.iter().map(|&s| builtin(spec, s)).collect(),
                )
                .with_randomness(randomness.clone()),
            )
            .unwrap();
        let mut events = job.take_events().unwrap();
        let proofs = job.wait_blocking().unwrap();
        assert_eq!(proofs.len(), seeds.len());
        let pvk = prepare_verifying_key(&params.vk);
        for (i, (&seed, (r, s))) in seeds.iter().zip(&randomness).enumerate() {
            let theirs = create_proof(builtin(spec, seed), &*params, *r, *s).unwrap();
            assert_eq!(bytes(&proofs[i]), bytes(&theirs), "{spec} partition {i}");
            let witness = Witness::synthesize(builtin(spec, seed)).unwrap();
            assert!(verify_proof(&pvk, &proofs[i], witness.public_inputs()).unwrap());
        }
        let mut stages = Vec::new();
        while let Ok(e) = events.try_recv() {
            stages.push(e.stage);
        }
        assert_eq!(stages.first(), Some(&ProgressStage::Admitted), "{stages:?}");
        assert_eq!(stages.last(), Some(&ProgressStage::Finished), "{stages:?}");
        let proved = stages
            .iter()
            .filter(|s| **s == ProgressStage::Proved)
            .count();
        assert_eq!(proved, seeds.len());
        eprintln!(
            "{spec}: {} partitions byte-identical to bellperson",
            seeds.len()
        );
    }
    let stats = engine.stats();
    assert_eq!((stats.cached_shapes, stats.resident_params), (2, 2));
    assert_eq!(stats.memory.working_set_bytes, 0);
    assert_eq!(stats.dispatch_in_flight, 0);
}

#[test]
fn the_async_wait_gives_proofs_in_partition_order() {
    let engine = engine(256 * MIB);
    engine.register_params("chain", params("chain:40")).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let seeds: Vec<u64> = (0..6).collect();
    let job = |priority| {
        engine
            .submit(
                ProofRequest::new(
                    "chain:40",
                    ParamsRef::Key("chain".into()),
                    seeds.iter().map(|&s| Chain::good(40, s)).collect(),
                )
                .with_priority(priority),
            )
            .unwrap()
    };
    let (a, b) = (job(Priority::Low), job(Priority::Critical));
    let (a, b) = runtime.block_on(async { tokio::join!(a.wait(), b.wait()) });
    let pvk = prepare_verifying_key(&params("chain:40").vk);
    for proofs in [a.unwrap(), b.unwrap()] {
        for (seed, proof) in seeds.iter().zip(&proofs) {
            let out = Chain::good(40, *seed).output();
            assert!(verify_proof(&pvk, proof, &[out]).unwrap(), "seed {seed}");
        }
    }
}

#[test]
fn a_high_job_submitted_during_a_long_normal_job_finishes_first() {
    let engine = engine(512 * MIB);
    engine.register_params("p", params("mul-chain:10")).unwrap();
    let request = |n: u64, seed0: u64, priority| {
        ProofRequest::new(
            "mul-chain:10",
            ParamsRef::Key("p".into()),
            (seed0..seed0 + n)
                .map(|s| builtin("mul-chain:10", s))
                .collect(),
        )
        .with_priority(priority)
    };
    const NORMAL: u64 = 12;
    let mut normal = engine
        .submit(request(NORMAL, 100, Priority::Normal))
        .unwrap();
    let mut normal_events = normal.take_events().unwrap();
    // Let the NORMAL job get going: its first proof is out.
    while let Some(e) = normal_events.blocking_recv() {
        if e.stage == ProgressStage::Proved {
            break;
        }
    }
    let high = engine.submit(request(2, 1, Priority::High)).unwrap();
    let normal_done_at_high_submit = normal.progress().proved;
    high.wait_blocking().unwrap();
    let normal_done_at_high_end = normal.progress().proved;
    eprintln!(
        "priority: NORMAL had {normal_done_at_high_submit}/{NORMAL} proofs when HIGH was \
         submitted and {normal_done_at_high_end}/{NORMAL} when HIGH finished"
    );
    assert!(
        (normal_done_at_high_end as u64) < NORMAL,
        "HIGH finished after NORMAL"
    );
    // At most the partitions in flight when HIGH came (the dispatch bound)
    // and the one the dispatcher was placing finish in between.
    let bound = engine.config().dispatch_bound;
    assert!(
        normal_done_at_high_end <= normal_done_at_high_submit + bound + 1,
        "{normal_done_at_high_submit} -> {normal_done_at_high_end} with bound {bound}"
    );
    assert_eq!(normal.wait_blocking().unwrap().len(), NORMAL as usize);
}

/// A chain whose witness enters the parts gate, as a witness made in
/// parallel parts (PoRep's) does.
#[derive(Clone, Debug)]
struct Gated(Chain);

impl bellperson::Circuit<Scalar> for Gated {
    fn synthesize<CS: bellperson::ConstraintSystem<Scalar>>(
        self,
        cs: &mut CS,
    ) -> Result<(), bellperson::SynthesisError> {
        let _pass = cuzk_synth::PartsGate::global().enter(1);
        self.0.synthesize(cs)
    }
}

/// `synthesis_ahead`: with witnesses made in parts far faster than the
/// (CPU) prover proves them, at most that many partitions are admitted to
/// synthesis or wait for the worker, whatever the synthesis threads; the
/// job still gets all its proofs, bellperson's. With a larger value more
/// are at once (up to the dispatch bound).
#[test]
fn witnesses_made_in_parts_stay_at_most_synthesis_ahead_ahead_of_the_worker() {
    use std::sync::atomic::{AtomicBool, AtomicUsize};
    const N: usize = 256;
    let spec = format!("chain:{N}");
    let run = |ahead: usize| -> usize {
        let mut config = config(512 * MIB);
        config.synthesis_concurrency = cuzk_engine::Auto::Value(4);
        config.synthesis_ahead = cuzk_engine::Auto::Value(ahead);
        let engine = cuzk_engine::Engine::new(config).unwrap();
        assert_eq!(engine.config().synthesis_ahead, ahead);
        engine.register_params("chain", params(&spec)).unwrap();
        let circuits: Vec<Gated> = (0..10).map(|s| Gated(Chain::good(N, s))).collect();
        let (done, most) = (AtomicBool::new(false), AtomicUsize::new(0));
        let proofs = std::thread::scope(|scope| {
            scope.spawn(|| {
                while !done.load(Ordering::SeqCst) {
                    most.fetch_max(engine.stats().ready_partitions, Ordering::SeqCst);
                    std::thread::sleep(std::time::Duration::from_micros(100));
                }
            });
            let proofs = engine
                .submit(ProofRequest::new(
                    spec.as_str(),
                    ParamsRef::Key("chain".into()),
                    circuits.clone(),
                ))
                .unwrap()
                .wait_blocking()
                .unwrap();
            done.store(true, Ordering::SeqCst);
            proofs
        });
        assert_eq!(proofs.len(), 10);
        // Every proof verifies (pacing only changes when witnesses start).
        let pvk = prepare_verifying_key(&params(&spec).vk);
        for (proof, c) in proofs.iter().zip(&circuits) {
            assert!(verify_proof(&pvk, proof, &[c.0.output()]).unwrap());
        }
        assert_eq!(engine.stats().ready_partitions, 0);
        most.load(Ordering::SeqCst)
    };
    let most = run(1);
    eprintln!("synthesis_ahead 1: at most {most} partitions counted at once");
    // Over 1: the limit failed; 0: the sampler never saw a counted one.
    assert_eq!(most, 1, "partitions counted at once with synthesis_ahead 1");
    // 1 worker + 4 synthesis threads: up to 4 wait for the worker.
    let most = run(8);
    eprintln!("synthesis_ahead 8: at most {most} partitions counted at once");
    assert!(most > 1, "only {most} at once with synthesis_ahead 8");
}

#[test]
fn an_open_parameter_file_is_read_from_its_handle_not_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let spec = "porep:9";
    let params = params(spec);
    let good = params_file(dir.path(), spec);
    let path = dir.path().join("swapped.params");
    std::fs::copy(&good, &path).unwrap();
    let opened = || std::fs::File::open(&path).unwrap();
    let (for_job, for_preload) = (opened(), opened());
    // The name now holds something else (another file in its place); the
    // handles still hold the file that was opened.
    std::fs::remove_file(&path).unwrap();
    std::fs::write(&path, b"not a parameter file").unwrap();
    let key = ParamsRef::File(path.clone());
    let (r, s) = (Scalar::from(3u64), Scalar::from(5u64));
    let request = || {
        ProofRequest::new(spec, key.clone(), vec![builtin(spec, 2)]).with_randomness(vec![(r, s)])
    };

    // By path: the bytes there now, refused.
    let engine = engine(512 * MIB);
    let err = engine
        .submit(request())
        .unwrap()
        .wait_blocking()
        .unwrap_err();
    assert!(matches!(err, EngineError::Params { .. }), "{err:?}");
    // By the handle: the file that was opened, proving as bellperson does.
    let proofs = engine
        .submit(request().with_params_file(for_job))
        .unwrap()
        .wait_blocking()
        .unwrap();
    let theirs = create_proof(builtin(spec, 2), &*params, r, s).unwrap();
    assert_eq!(bytes(&proofs[0]), bytes(&theirs));
    assert_eq!(engine.stats().resident_params, 1);

    // Preloading from a handle, in a fresh engine.
    let engine = common::engine(512 * MIB);
    let err = engine.preload_params(&key).unwrap_err();
    assert!(matches!(err, EngineError::Params { .. }), "{err:?}");
    engine.preload_params_from(&key, for_preload).unwrap();
    assert!(engine.has_params(&key));
    let proofs = engine.submit(request()).unwrap().wait_blocking().unwrap();
    assert_eq!(bytes(&proofs[0]), bytes(&theirs));
}

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

#[test]
fn the_pce_directory_is_written_once_and_loaded_instead_of_recording() {
    let dir = tempfile::tempdir().unwrap();
    let pce_dir = dir.path().join("pce");
    let cfg = EngineConfig {
        pce_cache_dir: Some(pce_dir.clone()),
        ..config(256 * MIB)
    };
    let run = |cfg: &EngineConfig| {
        let engine = cuzk_engine::Engine::new(cfg.clone()).unwrap();
        engine.register_params("c", params("chain:50")).unwrap();
        let before = CHAIN_CLONES.load(Ordering::SeqCst);
        let proofs = engine
            .submit(ProofRequest::new(
                "chain:50",
                ParamsRef::Key("c".into()),
                (0..3).map(|s| Chain::good(50, s)).collect(),
            ))
            .unwrap()
            .wait_blocking()
            .unwrap();
        assert_eq!(proofs.len(), 3);
        CHAIN_CLONES.load(Ordering::SeqCst) - before
    };
    // Other tests clone chains too; only this shape id uses this directory.
    let recorded = run(&cfg);
    assert!(recorded >= 1, "the first engine records the PCE");
    let files: Vec<_> = std::fs::read_dir(&pce_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let written = std::fs::metadata(&files[0]).unwrap().modified().unwrap();
    // A second engine loads the file: the circuit is never cloned to record.
    let engine = cuzk_engine::Engine::new(cfg.clone()).unwrap();
    engine.register_params("c", params("chain:50")).unwrap();
    let job = engine
        .submit(ProofRequest::new(
            "chain:50",
            ParamsRef::Key("c".into()),
            vec![Chain::good(50, 7)],
        ))
        .unwrap();
    job.wait_blocking().unwrap();
    assert!(engine.has_pce(&ShapeId::from("chain:50")));
    assert_eq!(
        std::fs::metadata(&files[0]).unwrap().modified().unwrap(),
        written
    );
    drop(engine);

    // A damaged file is set aside and the shape recorded again.
    let mut bytes = std::fs::read(&files[0]).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0xff;
    std::fs::write(&files[0], &bytes).unwrap();
    assert!(run(&cfg) >= 1);
    let names: Vec<String> = std::fs::read_dir(&pce_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names.iter().any(|n| n.ends_with(".pce.bad")), "{names:?}");
}

#[test]
fn parameters_are_shared_preloaded_and_evicted_under_pressure() {
    let dir = tempfile::tempdir().unwrap();
    let a = ParamsRef::File(params_file(dir.path(), "porep:10"));
    let b = ParamsRef::File(params_file(dir.path(), "mul-chain:10"));
    let size = |r: &ParamsRef| match r {
        ParamsRef::File(p) => std::fs::metadata(p).unwrap().len(),
        ParamsRef::Key(_) => unreachable!(),
    };
    // Room for either job (file sizes are a little above the in-memory
    // sizes `need` counts), not for both parameter sets at once.
    let budget = need("porep:10").max(need("mul-chain:10")) + 64 * 1024;
    assert!(budget < need("porep:10") + need("mul-chain:10"));
    let engine = engine(budget);
    engine.preload_params(&a).unwrap();
    assert!(engine.has_params(&a));
    assert_eq!(engine.memory().params_bytes, size(&a));

    let mut job = engine
        .submit(ProofRequest::new(
            "porep:10",
            a.clone(),
            (0..6).map(|s| builtin("porep:10", s)).collect(),
        ))
        .unwrap();
    let mut events = job.take_events().unwrap();
    while let Some(e) = events.blocking_recv() {
        if e.stage == ProgressStage::Admitted {
            break;
        }
    }
    // Admitted and not done: the job holds the parameters.
    let err = engine.evict_params(&a).unwrap_err();
    assert!(
        matches!(err, EngineError::ParamsInUse { holds, .. } if holds >= 1),
        "{err:?}"
    );
    assert!(err.to_string().contains("in use by running jobs"), "{err}");
    job.wait_blocking().unwrap();
    assert!(engine.has_params(&a), "idle parameters stay resident");

    // Another parameter set does not fit beside the first: the idle one goes.
    let proofs = engine
        .submit(ProofRequest::new(
            "mul-chain:10",
            b.clone(),
            vec![builtin("mul-chain:10", 1)],
        ))
        .unwrap()
        .wait_blocking()
        .unwrap();
    assert_eq!(proofs.len(), 1);
    assert!(engine.has_params(&b));
    assert!(!engine.has_params(&a), "evicted under pressure");
    let m = engine.memory();
    eprintln!("params: budget {budget}, after the switch {m:?}");
    assert!(m.used_bytes <= m.budget_bytes);
    assert!(engine.evict_params(&b).unwrap());
    assert!(!engine.evict_params(&b).unwrap());
}

/// On a budget with room for one working set, the a/b/c buffers a finished
/// job left idle in the pinned pool serve the next job: its working-set
/// charge takes them over instead of having the budget free them to make
/// room (and the pool page-lock new ones, seconds at full size).
#[test]
fn the_next_job_reuses_the_abc_buffers_a_finished_job_left_idle() {
    let dir = tempfile::tempdir().unwrap();
    let params = ParamsRef::File(params_file(dir.path(), "porep:10"));
    let pce = cuzk_synth::Pce::record(builtin("porep:10", 0)).unwrap();
    let abc = 3 * cuzk_pinned_pool::size_class(pce.num_constraints() * 32).unwrap() as u64;
    // One working set fits, not one beside another's idle a/b/c buffers.
    let budget = need("porep:10") + abc / 2;
    let engine = engine(budget);
    let run = |seed: u64| {
        engine
            .submit(ProofRequest::new(
                "porep:10",
                params.clone(),
                (0..3).map(|s| builtin("porep:10", seed + s)).collect(),
            ))
            .unwrap()
            .wait_blocking()
            .unwrap()
    };
    assert_eq!(run(0).len(), 3);
    let first = engine.stats().pinned;
    assert_eq!(first.bytes_idle as u64, abc, "{first:?}");
    assert_eq!(run(10).len(), 3);
    let second = engine.stats().pinned;
    assert_eq!(
        (second.allocations, second.frees),
        (first.allocations, first.frees),
        "the second job allocated or freed: {first:?} then {second:?}"
    );
    assert!(second.reuses >= first.reuses + 3, "{second:?}");
    assert_eq!(second.bytes_idle as u64, abc, "{second:?}");
    let m = engine.memory();
    assert!(m.used_bytes <= m.budget_bytes, "{m:?}");
}

/// The CPU prover, plus what a backend that keeps copies of parameter sets
/// does: it remembers (weakly) each set it proved with and, when asked,
/// forgets those nobody holds any more.
#[derive(Debug, Default)]
struct Keeping {
    inner: cuzk_groth16_cuda::CpuProver,
    seen: std::sync::Mutex<Vec<std::sync::Weak<Vec<blstrs::G1Affine>>>>,
}

impl cuzk_groth16_cuda::Prover for Keeping {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn prepare(
        &self,
        input: cuzk_groth16_cuda::ProverInput<'_>,
        params: &bellperson::groth16::Parameters<cuzk_groth16_cuda::Bls12>,
        timings: &mut cuzk_groth16_cuda::StageTimings,
    ) -> cuzk_groth16_cuda::Result<cuzk_groth16_cuda::Staged> {
        let mut seen = self.seen.lock().unwrap();
        if !seen
            .iter()
            .any(|w| std::ptr::eq(w.as_ptr(), std::sync::Arc::as_ptr(&params.h)))
        {
            seen.push(std::sync::Arc::downgrade(&params.h));
        }
        drop(seen);
        self.inner.prepare(input, params, timings)
    }

    fn kernel_region(
        &self,
        input: cuzk_groth16_cuda::ProverInput<'_>,
        params: &bellperson::groth16::Parameters<cuzk_groth16_cuda::Bls12>,
        staged: cuzk_groth16_cuda::Staged,
        timings: &mut cuzk_groth16_cuda::StageTimings,
    ) -> cuzk_groth16_cuda::Result<cuzk_groth16_cuda::MsmResults> {
        self.inner.kernel_region(input, params, staged, timings)
    }

    fn release_unused(&self) -> u64 {
        let mut seen = self.seen.lock().unwrap();
        let before = seen.len();
        seen.retain(|w| w.strong_count() > 0);
        (before - seen.len()) as u64
    }
}

/// Evicting a parameter set (by hand, or everything idle) drops the
/// engine's copy and then has the backend free what it kept for it: a
/// GPU's copy of an evicted set does not outlive it.
#[test]
fn evicting_parameters_has_the_backend_free_its_copies() {
    let dir = tempfile::tempdir().unwrap();
    let a = ParamsRef::File(params_file(dir.path(), "porep:10"));
    let b = ParamsRef::File(params_file(dir.path(), "mul-chain:10"));
    let keeping = std::sync::Arc::new(Keeping::default());
    let engine = cuzk_engine::Engine::builder(config(256 * MIB))
        .prover(keeping.clone())
        .build()
        .unwrap();
    let prove = |spec: &str, params: &ParamsRef| {
        let proofs = engine
            .submit(ProofRequest::new(
                spec,
                params.clone(),
                vec![builtin(spec, 1)],
            ))
            .unwrap()
            .wait_blocking()
            .unwrap();
        assert_eq!(proofs.len(), 1);
    };
    prove("porep:10", &a);
    prove("mul-chain:10", &b);
    // (sets the backend keeps, those still held by someone)
    let kept = || {
        let seen = keeping.seen.lock().unwrap();
        let live = seen.iter().filter(|w| w.strong_count() > 0).count();
        (seen.len(), live)
    };
    assert_eq!(kept(), (2, 2));
    // Evicted by hand: the engine's copy is gone and the backend was told.
    assert!(engine.evict_params(&a).unwrap());
    assert_eq!(kept(), (1, 1), "the backend still keeps the evicted set");
    // A reload is a new set, proved with; everything idle evicted after.
    prove("porep:10", &a);
    assert_eq!(kept(), (2, 2));
    engine.evict_idle();
    assert_eq!(kept(), (0, 0));
}

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

/// A partition whose a/b/c the backend evaluates on its device holds no
/// a/b/c buffers on the host: its working set is the rest, exactly.
#[test]
fn a_working_set_with_abc_on_the_device_has_no_abc_buffers() {
    let counts = cuzk_engine::pce_file::ShapeCounts {
        num_inputs: 5,
        num_aux: 1_000,
        num_constraints: 3_000,
    };
    let prover = cuzk_groth16_cuda::CpuProver;
    let host = cuzk_engine::working_set_bytes_for(counts, &prover, false);
    let device = cuzk_engine::working_set_bytes_for(counts, &prover, true);
    assert_eq!(host, cuzk_engine::working_set_bytes(counts, &prover));
    let abc = 3 * cuzk_pinned_pool::size_class(3_000 * 32).unwrap() as u64;
    assert_eq!(host - device, abc);
    assert!(device >= 1_005 * 32, "the witness is in it");
}

/// The CPU prover, declaring device memory as a GPU backend does: `own`
/// bytes per partition in flight and, held once for a shape, 40 MiB (or 70
/// MiB for shapes of more than 2,000 constraints).
#[derive(Debug, Default)]
struct Sharing {
    inner: cuzk_groth16_cuda::CpuProver,
}

impl cuzk_groth16_cuda::Prover for Sharing {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn device_bytes(&self, _pce: &cuzk_synth::Pce) -> u64 {
        10 * MIB
    }

    fn shared_device_bytes(&self, pce: &cuzk_synth::Pce) -> u64 {
        if pce.num_constraints() > 2000 {
            70 * MIB
        } else {
            40 * MIB
        }
    }

    fn prepare(
        &self,
        input: cuzk_groth16_cuda::ProverInput<'_>,
        params: &bellperson::groth16::Parameters<cuzk_groth16_cuda::Bls12>,
        timings: &mut cuzk_groth16_cuda::StageTimings,
    ) -> cuzk_groth16_cuda::Result<cuzk_groth16_cuda::Staged> {
        self.inner.prepare(input, params, timings)
    }

    fn kernel_region(
        &self,
        input: cuzk_groth16_cuda::ProverInput<'_>,
        params: &bellperson::groth16::Parameters<cuzk_groth16_cuda::Bls12>,
        staged: cuzk_groth16_cuda::Staged,
        timings: &mut cuzk_groth16_cuda::StageTimings,
    ) -> cuzk_groth16_cuda::Result<cuzk_groth16_cuda::MsmResults> {
        self.inner.kernel_region(input, params, staged, timings)
    }
}

/// What a prover holds once for a shape is one standing reservation per
/// device, not part of every partition's: on a 64 MiB device, partitions of
/// 10 MiB beside 40 MiB held once prove (and the 40 MiB stay reserved after
/// the job, as the prover keeps them); a shape whose shared part can never
/// fit fails with the bytes named, and the engine goes on serving.
#[test]
fn what_a_prover_holds_once_is_reserved_once_per_device() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(512 * MIB);
    config.device_memory_margin = cuzk_engine::ByteSize(MIB);
    let engine = cuzk_engine::Engine::builder(config)
        .prover(std::sync::Arc::new(Sharing::default()))
        .devices(vec![cuzk_gpu_sched::DeviceSpec {
            ordinal: 0,
            capacity_bytes: 64 * MIB,
        }])
        .build()
        .unwrap();
    let reserved = || engine.status().devices[0].reserved_bytes;
    assert_eq!(reserved(), 0);
    let small = ParamsRef::File(params_file(dir.path(), "mul-chain:10"));
    let proofs = engine
        .submit(ProofRequest::new(
            "mul-chain:10",
            small.clone(),
            (1..=4).map(|s| builtin("mul-chain:10", s)).collect(),
        ))
        .unwrap()
        .wait_blocking()
        .unwrap();
    assert_eq!(proofs.len(), 4);
    assert_eq!(reserved(), 40 * MIB, "the shared part stays reserved, once");

    // 70 MiB never fit in 63 usable: a clear error, the job fails alone.
    let big = ParamsRef::File(params_file(dir.path(), "porep:12"));
    let err = engine
        .submit(ProofRequest::new(
            "porep:12",
            big,
            vec![builtin("porep:12", 1)],
        ))
        .unwrap()
        .wait_blocking()
        .unwrap_err();
    let text = err.to_string();
    assert!(text.contains(&(70 * MIB).to_string()), "{text}");
    assert_eq!(reserved(), 40 * MIB);
    // Still serving.
    let proofs = engine
        .submit(ProofRequest::new(
            "mul-chain:10",
            small,
            vec![builtin("mul-chain:10", 9)],
        ))
        .unwrap()
        .wait_blocking()
        .unwrap();
    assert_eq!(proofs.len(), 1);
}

/// The CPU prover, holding device memory across proofs as the GPU backend
/// does with a resident parameter set: `hold` bytes from its first kernel
/// region on, until it is asked to let go of what no proof uses.
#[derive(Debug, Default)]
struct Holding {
    inner: cuzk_groth16_cuda::CpuProver,
    hold: u64,
    held: std::sync::atomic::AtomicU64,
    released: std::sync::atomic::AtomicU64,
}

impl cuzk_groth16_cuda::Prover for Holding {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn device_bytes(&self, _pce: &cuzk_synth::Pce) -> u64 {
        10 * MIB
    }

    fn held_device_bytes(&self) -> u64 {
        self.held.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn release_idle(&self) -> u64 {
        self.released
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.held.swap(0, std::sync::atomic::Ordering::SeqCst)
    }

    fn prepare(
        &self,
        input: cuzk_groth16_cuda::ProverInput<'_>,
        params: &bellperson::groth16::Parameters<cuzk_groth16_cuda::Bls12>,
        timings: &mut cuzk_groth16_cuda::StageTimings,
    ) -> cuzk_groth16_cuda::Result<cuzk_groth16_cuda::Staged> {
        self.inner.prepare(input, params, timings)
    }

    fn kernel_region(
        &self,
        input: cuzk_groth16_cuda::ProverInput<'_>,
        params: &bellperson::groth16::Parameters<cuzk_groth16_cuda::Bls12>,
        staged: cuzk_groth16_cuda::Staged,
        timings: &mut cuzk_groth16_cuda::StageTimings,
    ) -> cuzk_groth16_cuda::Result<cuzk_groth16_cuda::MsmResults> {
        self.held
            .store(self.hold, std::sync::atomic::Ordering::SeqCst);
        self.inner.kernel_region(input, params, staged, timings)
    }
}

/// What a prover holds across proofs (a resident parameter set, device
/// PCEs) is a standing reservation on its device from the phase that
/// allocated it until it is freed: after a job the 20 MiB stay reserved;
/// `evict_idle` frees them and the reservation goes with them.
#[test]
fn what_a_prover_keeps_on_the_device_is_reserved_until_evicted() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(512 * MIB);
    config.device_memory_margin = cuzk_engine::ByteSize(MIB);
    let prover = std::sync::Arc::new(Holding {
        hold: 20 * MIB,
        ..Holding::default()
    });
    let engine = cuzk_engine::Engine::builder(config)
        .prover(prover.clone())
        .devices(vec![cuzk_gpu_sched::DeviceSpec {
            ordinal: 0,
            capacity_bytes: 64 * MIB,
        }])
        .build()
        .unwrap();
    let reserved = || engine.status().devices[0].reserved_bytes;
    assert_eq!(reserved(), 0);
    let params = ParamsRef::File(params_file(dir.path(), "mul-chain:10"));
    let proofs = engine
        .submit(ProofRequest::new(
            "mul-chain:10",
            params.clone(),
            (1..=3).map(|s| builtin("mul-chain:10", s)).collect(),
        ))
        .unwrap()
        .wait_blocking()
        .unwrap();
    assert_eq!(proofs.len(), 3);
    assert_eq!(reserved(), 20 * MIB, "what the prover keeps stays reserved");
    engine.evict_idle();
    assert_eq!(cuzk_groth16_cuda::Prover::held_device_bytes(&*prover), 0);
    assert_eq!(reserved(), 0, "freed, and no longer reserved");
    // Held again by the next job's kernel region.
    engine
        .submit(ProofRequest::new(
            "mul-chain:10",
            params,
            vec![builtin("mul-chain:10", 7)],
        ))
        .unwrap()
        .wait_blocking()
        .unwrap();
    assert_eq!(reserved(), 20 * MIB);
}

/// Held memory yields to work: with 55 MiB held on a 64 MiB device, a
/// 10 MiB partition does not fit beside it, so each time the device goes
/// idle with one waiting, the prover is asked to free what no proof uses,
/// and every partition is proved (none refused, none left waiting).
#[test]
fn held_device_memory_is_given_back_when_it_is_in_the_way() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(512 * MIB);
    config.device_memory_margin = cuzk_engine::ByteSize(MIB);
    let prover = std::sync::Arc::new(Holding {
        hold: 55 * MIB,
        ..Holding::default()
    });
    let engine = cuzk_engine::Engine::builder(config)
        .prover(prover.clone())
        .devices(vec![cuzk_gpu_sched::DeviceSpec {
            ordinal: 0,
            capacity_bytes: 64 * MIB,
        }])
        .build()
        .unwrap();
    let params = ParamsRef::File(params_file(dir.path(), "mul-chain:10"));
    let proofs = engine
        .submit(ProofRequest::new(
            "mul-chain:10",
            params,
            (1..=4).map(|s| builtin("mul-chain:10", s)).collect(),
        ))
        .unwrap()
        .wait_blocking()
        .unwrap();
    assert_eq!(proofs.len(), 4);
    let released = prover.released.load(std::sync::atomic::Ordering::SeqCst);
    assert!(released >= 1, "the held memory was never asked back");
    assert_eq!(engine.status().devices[0].reserved_bytes, 55 * MIB);
}
