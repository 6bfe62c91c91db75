//! What the engine keeps between jobs: parameter sets (read from an open
//! handle, shared, preloaded, evicted under pressure or by hand, with the
//! backend told to free its copies) and the PCE directory (written once,
//! loaded instead of recording, a damaged file set aside).

use std::sync::atomic::Ordering;

use crate::common;
use crate::common::*;
use bellperson::groth16::create_proof;
use blstrs::Scalar;
use cuzk_engine::{EngineConfig, EngineError, ParamsRef, ProgressStage, ProofRequest, ShapeId};

use super::MIB;

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
