//! Parameter sets registered with a loader (`register_params_loader`): made
//! on first use, evicted under pressure for a higher job like a file's set,
//! made again by the loader, and the proofs those of a file-backed set.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::common::*;
use blstrs::Scalar;
use cuzk_engine::cache::params_bytes;
use cuzk_engine::pce_file::ShapeCounts;
use cuzk_engine::timeline::{PARAMS_LOAD, PARKED};
use cuzk_engine::{Engine, EngineError, ParamsLoader, ParamsRef, Priority, ProofRequest};
use cuzk_groth16_cuda::CpuProver;
use ff::Field;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;

const LOW: &str = "chain:2000";
const HIGH: &str = "chain:1500";
const LOW_PARTS: usize = 12;
const HIGH_PARTS: usize = 3;

/// A loader of `spec`'s parameters that counts its calls.
fn counting_loader(spec: &'static str) -> (ParamsLoader, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let loader: ParamsLoader = Arc::new(move || {
        counted.fetch_add(1, Ordering::SeqCst);
        Ok((*params(spec)).clone())
    });
    (loader, calls)
}

/// PCE + parameters in memory + one working set of `spec`, and the working
/// set alone.
fn need_of(spec: &str) -> (u64, u64) {
    let n = spec.strip_prefix("chain:").unwrap().parse().unwrap();
    let pce = cuzk_synth::Pce::record(Chain::good(n, 0)).unwrap();
    let ws = cuzk_engine::working_set_bytes(ShapeCounts::of(&pce), &CpuProver);
    (pce.bytes() as u64 + params_bytes(&params(spec)) + ws, ws)
}

fn request(spec: &str, params: ParamsRef, parts: usize, priority: Priority) -> ProofRequest<Chain> {
    let n: usize = spec.strip_prefix("chain:").unwrap().parse().unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(n as u64);
    let randomness = (0..parts)
        .map(|_| (Scalar::random(&mut rng), Scalar::random(&mut rng)))
        .collect();
    ProofRequest::new(
        spec,
        params,
        (0..parts as u64).map(|s| Chain::good(n, s)).collect(),
    )
    .with_priority(priority)
    .with_randomness(randomness)
}

fn proofs_of(engine: &Engine, request: ProofRequest<Chain>) -> Vec<Vec<u8>> {
    let job = engine.submit(request).unwrap();
    job.wait_blocking().unwrap().iter().map(bytes).collect()
}

#[test]
fn a_loader_set_is_made_on_first_use_evicted_for_a_higher_job_and_made_again() {
    let dir = tempfile::tempdir().unwrap();
    let low_file = ParamsRef::File(params_file(dir.path(), LOW));
    let high_file = ParamsRef::File(params_file(dir.path(), HIGH));
    // The file-backed proofs on an unlimited budget.
    let reference = engine(1 << 40);
    let ref_low = proofs_of(
        &reference,
        request(LOW, low_file.clone(), LOW_PARTS, Priority::Normal),
    );
    let ref_high = proofs_of(
        &reference,
        request(HIGH, high_file.clone(), HIGH_PARTS, Priority::High),
    );
    drop(reference);

    let (need_low, ws_low) = need_of(LOW);
    let file_high = std::fs::metadata(params_file(dir.path(), HIGH))
        .unwrap()
        .len();
    let (need_high, _) = need_of(HIGH);
    let need_high = need_high - params_bytes(&params(HIGH)) + file_high;
    // One set at a time, never both.
    let budget = need_low.max(need_high) + ws_low;
    assert!(need_low + need_high > budget);
    let engine = engine(budget);
    let (loader, calls) = counting_loader(LOW);
    let low_key = ParamsRef::Key("low".into());
    engine
        .register_params_loader("low", params_bytes(&params(LOW)), loader)
        .unwrap();
    // Registered, not loaded.
    assert!(!engine.has_params(&low_key));
    assert_eq!(calls.load(Ordering::SeqCst), 0);

    let low = engine
        .submit(request(LOW, low_key.clone(), LOW_PARTS, Priority::Normal))
        .unwrap();
    let low_id = low.id().0;
    let deadline = Instant::now() + Duration::from_secs(600);
    while low.progress().proved == 0 {
        assert!(Instant::now() < deadline, "no partition proved in time");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let high = engine
        .submit(request(HIGH, high_file, HIGH_PARTS, Priority::High))
        .unwrap();
    let high: Vec<Vec<u8>> = high.wait_blocking().unwrap().iter().map(bytes).collect();
    let low: Vec<Vec<u8>> = low.wait_blocking().unwrap().iter().map(bytes).collect();
    assert_eq!(low, ref_low, "the loader's set proves what the file's does");
    assert_eq!(high, ref_high);

    // Made, evicted for the HIGH job's file, made again by the loader.
    let stats = engine.stats();
    assert_eq!(calls.load(Ordering::SeqCst), 2, "{stats:#?}");
    assert_eq!(stats.params_loads, 3, "{stats:#?}");
    assert!(stats.parks >= 1 && stats.params_evicted >= 1, "{stats:#?}");
    let timeline = engine.timeline().snapshot().spans;
    let of_low = |stage: &str| {
        timeline
            .iter()
            .filter(|s| s.job == low_id && s.stage == stage)
            .count()
    };
    assert_eq!((of_low(PARAMS_LOAD), of_low(PARKED)), (2, 1));

    // evict_params drops it; a preload makes it again.
    assert!(engine.has_params(&low_key));
    assert!(engine.evict_params(&low_key).unwrap());
    assert!(!engine.has_params(&low_key));
    engine.preload_params(&low_key).unwrap();
    assert!(engine.has_params(&low_key));
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(engine.stats().params_loads, 4);
}

#[test]
fn a_failing_loader_fails_the_job_and_a_key_without_one_is_refused() {
    let engine = engine(1 << 40);
    let failing: ParamsLoader = Arc::new(|| Err("no such set".into()));
    engine
        .register_params_loader("broken", 1 << 20, failing)
        .unwrap();
    let job = engine
        .submit(request(
            "chain:30",
            ParamsRef::Key("broken".into()),
            1,
            Priority::Normal,
        ))
        .unwrap();
    let e = job.wait_blocking().unwrap_err();
    assert!(
        matches!(&e, EngineError::ParamsLoader { key, .. } if key == "broken"),
        "{e:?}"
    );
    assert!(e.to_string().contains("no such set"), "{e}");
    assert_eq!(engine.stats().params_loads, 0);
    assert!(matches!(
        engine.preload_params(&ParamsRef::Key("nope".into())),
        Err(EngineError::ParamsNotRegistered { .. })
    ));
    // A set larger than the whole budget is refused when registered.
    let small = self::engine(1 << 20);
    let (loader, _) = counting_loader("chain:30");
    assert!(matches!(
        small.register_params_loader("big", 1 << 30, loader),
        Err(EngineError::NeverFits { .. })
    ));
}
