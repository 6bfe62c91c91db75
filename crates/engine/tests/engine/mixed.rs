//! Mixed workloads on a budget that holds one parameter set at a time: a
//! HIGH job on another set, submitted while NORMAL jobs of many partitions
//! run, gets its set in because the NORMAL jobs park at a partition
//! boundary (their parameters and PCE evicted), and the NORMAL jobs reload
//! them (once for both) and finish after it, with the proofs they would
//! have made anyway.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::*;
use bellperson::groth16::{prepare_verifying_key, verify_proof};
use blstrs::Scalar;
use cuzk_engine::pce_file::ShapeCounts;
use cuzk_engine::timeline::{ABC_AHEAD, BUDGET_WAIT, PARAMS_EVICT, PARAMS_LOAD, PARKED, PCE_EVICT};
use cuzk_engine::{Engine, EngineError, JobHandle, ParamsRef, Priority, ProofRequest, Span};
use cuzk_groth16_cuda::{Bls12, CpuProver};
use ff::Field;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;

/// The NORMAL job's shape (many partitions) and the HIGH job's.
const LOW_N: usize = 2000;
const HIGH_N: usize = 1500;
const LOW_PARTS: usize = 16;
/// A second NORMAL job on the NORMAL job's set.
const LOW2_PARTS: usize = 6;
const LOW2_SEED: u64 = 100;
const HIGH_PARTS: usize = 4;

fn spec(n: usize) -> String {
    format!("chain:{n}")
}

/// PCE + parameter file + one working set of `chain:n`, as admission
/// charges them (a set loaded from its file is charged by the file's size),
/// and the working set alone.
fn need_of(dir: &Path, n: usize) -> (u64, u64) {
    let pce = cuzk_synth::Pce::record(Chain::good(n, 0)).unwrap();
    let file = std::fs::metadata(params_file(dir, &spec(n))).unwrap().len();
    let ws = cuzk_engine::working_set_bytes(ShapeCounts::of(&pce), &CpuProver);
    (pce.bytes() as u64 + file + ws, ws)
}

fn randomness(parts: usize, seed: u64) -> Vec<(Scalar, Scalar)> {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    (0..parts)
        .map(|_| (Scalar::random(&mut rng), Scalar::random(&mut rng)))
        .collect()
}

fn request(dir: &Path, n: usize, parts: usize, priority: Priority) -> ProofRequest<Chain> {
    request_from(dir, n, 0, parts, priority)
}

/// Partitions of seeds `first..first + parts`.
fn request_from(
    dir: &Path,
    n: usize,
    first: u64,
    parts: usize,
    priority: Priority,
) -> ProofRequest<Chain> {
    ProofRequest::new(
        spec(n),
        ParamsRef::File(params_file(dir, &spec(n))),
        (first..first + parts as u64)
            .map(|s| Chain::good(n, s))
            .collect(),
    )
    .with_priority(priority)
    .with_randomness(randomness(parts, n as u64 + first))
}

/// Waits until `job` has proved a partition.
fn first_proof(job: &JobHandle) {
    let deadline = Instant::now() + Duration::from_secs(600);
    while job.progress().proved == 0 {
        assert!(Instant::now() < deadline, "no partition proved in time");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Samples the engine until stopped: the budget is never exceeded, and
/// every job's `waiting` text seen.
struct Monitor {
    done: Arc<AtomicBool>,
    seen: Arc<Mutex<BTreeSet<(u64, String)>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Monitor {
    fn start(engine: &Arc<Engine>) -> Monitor {
        let done = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(BTreeSet::new()));
        let thread = {
            let (engine, done, seen) = (Arc::clone(engine), Arc::clone(&done), Arc::clone(&seen));
            std::thread::spawn(move || {
                while !done.load(Ordering::SeqCst) {
                    let m = engine.memory();
                    assert!(m.used_bytes <= m.budget_bytes, "over budget: {m:?}");
                    let charged = engine.budget().charged();
                    assert!(charged <= engine.budget().total(), "charged {charged}");
                    for j in engine.status().jobs {
                        if let Some(w) = j.waiting {
                            seen.lock().unwrap().insert((j.id, w));
                        }
                    }
                    std::thread::sleep(Duration::from_micros(500));
                }
            })
        };
        Monitor {
            done,
            seen,
            thread: Some(thread),
        }
    }

    fn stop(mut self) -> BTreeSet<(u64, String)> {
        self.done.store(true, Ordering::SeqCst);
        self.thread.take().unwrap().join().unwrap();
        std::mem::take(&mut *self.seen.lock().unwrap())
    }
}

/// Waits on a job in a thread; the time it ended.
fn wait_in_thread(
    job: JobHandle,
) -> std::thread::JoinHandle<(
    cuzk_engine::Result<Vec<bellperson::groth16::Proof<Bls12>>>,
    Instant,
)> {
    std::thread::spawn(move || {
        let r = job.wait_blocking();
        (r, Instant::now())
    })
}

/// The proofs of the same requests on an unlimited budget.
fn reference(dir: &Path) -> [Vec<Vec<u8>>; 3] {
    let engine = engine(1 << 40);
    let jobs = [
        request(dir, LOW_N, LOW_PARTS, Priority::Normal),
        request_from(dir, LOW_N, LOW2_SEED, LOW2_PARTS, Priority::Normal),
        request(dir, HIGH_N, HIGH_PARTS, Priority::High),
    ]
    .map(|r| engine.submit(r).unwrap());
    jobs.map(|j| j.wait_blocking().unwrap().iter().map(bytes).collect())
}

fn verify(n: usize, proofs: &[bellperson::groth16::Proof<Bls12>]) {
    verify_from(n, 0, proofs)
}

fn verify_from(n: usize, first: u64, proofs: &[bellperson::groth16::Proof<Bls12>]) {
    let pvk = prepare_verifying_key(&params(&spec(n)).vk);
    for (k, proof) in proofs.iter().enumerate() {
        let seed = first + k as u64;
        let input = Chain::good(n, seed).output();
        assert!(
            verify_proof(&pvk, proof, &[input]).unwrap(),
            "chain:{n} seed {seed}"
        );
    }
}

/// Spans of `stage` on `job`.
fn spans<'a>(all: &'a [Span], job: u64, stage: &str) -> Vec<&'a Span> {
    all.iter()
        .filter(|s| s.job == job && s.stage == stage)
        .collect()
}

#[test]
fn a_high_job_gets_its_set_in_by_parking_the_normal_jobs_which_reload_it_once_and_finish() {
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let (need_low, ws_low) = need_of(dir.path(), LOW_N);
    let (need_high, _) = need_of(dir.path(), HIGH_N);
    // One set (with its PCE and a second working set: both NORMAL jobs
    // run) fits, never both sets.
    let budget = need_low.max(need_high) + ws_low;
    assert!(need_low + need_high > budget);
    let [ref_low, ref_low2, ref_high] = reference(dir.path());

    let engine = Arc::new(engine(budget));
    let monitor = Monitor::start(&engine);
    let low = engine
        .submit(request(dir.path(), LOW_N, LOW_PARTS, Priority::Normal))
        .unwrap();
    let low2 = engine
        .submit(request_from(
            dir.path(),
            LOW_N,
            LOW2_SEED,
            LOW2_PARTS,
            Priority::Normal,
        ))
        .unwrap();
    let (low_id, low2_id) = (low.id().0, low2.id().0);
    first_proof(&low);
    let high = engine
        .submit(request(dir.path(), HIGH_N, HIGH_PARTS, Priority::High))
        .unwrap();
    let high_id = high.id().0;
    let [low, low2, high] = [low, low2, high].map(wait_in_thread);
    let (low, low_end) = low.join().unwrap();
    let (low2, low2_end) = low2.join().unwrap();
    let (high, high_end) = high.join().unwrap();
    let seen = monitor.stop();
    let (low, low2, high) = (low.unwrap(), low2.unwrap(), high.unwrap());

    // The proofs are the ones an unlimited budget makes, and verify.
    assert_eq!(low.iter().map(bytes).collect::<Vec<_>>(), ref_low);
    assert_eq!(low2.iter().map(bytes).collect::<Vec<_>>(), ref_low2);
    assert_eq!(high.iter().map(bytes).collect::<Vec<_>>(), ref_high);
    verify(LOW_N, &low);
    verify_from(LOW_N, LOW2_SEED, &low2);
    verify(HIGH_N, &high);
    assert!(
        high_end < low_end,
        "the HIGH job ended after the NORMAL one"
    );

    // Loaded: the NORMAL set, the HIGH set, the NORMAL set again (once for
    // both NORMAL jobs, if both parked).
    let stats = engine.stats();
    assert_eq!(stats.params_loads, 3, "{stats:#?}");
    assert!(stats.parks >= 1, "{stats:#?}");
    assert!(stats.params_evicted >= 2, "{stats:#?}");
    assert_eq!(stats.memory.working_set_bytes, 0);
    assert_eq!(stats.pinned.leases_outstanding, 0);

    // The swap on the timeline: the NORMAL job parked, its set evicted (by
    // name and size) for the HIGH job, then loaded again.
    let timeline = engine.timeline().snapshot().spans;
    let low_path = params_file(dir.path(), &spec(LOW_N)).display().to_string();
    assert!(!spans(&timeline, low_id, PARKED).is_empty(), "no park span");
    let evicted: Vec<&Span> = timeline
        .iter()
        .filter(|s| s.stage == PARAMS_EVICT)
        .collect();
    assert!(
        evicted
            .iter()
            .any(|s| s.job == high_id && s.note.as_deref().is_some_and(|n| n.contains(&low_path))),
        "{evicted:#?}"
    );
    let loads = |job| spans(&timeline, job, PARAMS_LOAD).len();
    assert_eq!(loads(low_id) + loads(low2_id), 2);
    assert_eq!(loads(high_id), 1);
    // The second NORMAL job (whose partitions run on its reserved working
    // set beside the first one's) parked too if it still had partitions
    // queued; else it ended first, or waited for admission behind the HIGH
    // job. A park span per park.
    let parks = |job| spans(&timeline, job, PARKED).len() as u64;
    assert_eq!(parks(low_id) + parks(low2_id), stats.parks);
    if parks(low2_id) > 0 {
        assert!(high_end < low2_end, "the HIGH job ended after a parked job");
    }

    // No set was evicted while a partition of a job using it was in flight
    // (from its witness to its epilogue).
    for e in &evicted {
        let of_low = e.note.as_deref().is_some_and(|n| n.contains(&low_path));
        let users = if of_low {
            vec![low_id, low2_id]
        } else {
            vec![high_id]
        };
        for p in 0..LOW_PARTS as u32 {
            let mine: Vec<&Span> = timeline
                .iter()
                .filter(|s| users.contains(&s.job) && s.partition == p)
                .filter(|s| {
                    // Waiting for a working set is before the partition is
                    // in flight.
                    ![
                        PARAMS_LOAD,
                        PARKED,
                        PARAMS_EVICT,
                        PCE_EVICT,
                        BUDGET_WAIT,
                        ABC_AHEAD,
                    ]
                    .contains(&s.stage)
                })
                .collect();
            for job in &users {
                let theirs = mine.iter().filter(|s| s.job == *job);
                let (Some(from), Some(to)) = (
                    theirs.clone().map(|s| s.start_us).min(),
                    theirs.map(|s| s.end_us).max(),
                ) else {
                    continue;
                };
                assert!(
                    !(from < e.start_us && e.start_us < to),
                    "{} evicted at {} us while partition {p} of job {job} ran ({from}..{to} us)",
                    e.note.as_deref().unwrap_or_default(),
                    e.start_us
                );
            }
        }
    }

    // The status said so while it happened.
    let parked = format!("parked: parameters yielded to job {high_id} (high)");
    assert!(
        seen.iter()
            .any(|(id, w)| *id == low_id && w.starts_with(&parked)),
        "{seen:#?}"
    );
    eprintln!(
        "swap: budget {budget}, {} loads, {} parks, {} evictions, {:.2?}",
        stats.params_loads,
        stats.parks,
        stats.params_evicted,
        started.elapsed()
    );
}

#[test]
fn no_swap_when_both_sets_fit() {
    let dir = tempfile::tempdir().unwrap();
    let (need_low, ws_low) = need_of(dir.path(), LOW_N);
    let (need_high, _) = need_of(dir.path(), HIGH_N);
    let engine = Arc::new(engine(need_low + need_high + 2 * ws_low));
    let monitor = Monitor::start(&engine);
    let low = engine
        .submit(request(dir.path(), LOW_N, LOW_PARTS, Priority::Normal))
        .unwrap();
    first_proof(&low);
    let high = engine
        .submit(request(dir.path(), HIGH_N, HIGH_PARTS, Priority::High))
        .unwrap();
    verify(HIGH_N, &high.wait_blocking().unwrap());
    verify(LOW_N, &low.wait_blocking().unwrap());
    monitor.stop();
    let stats = engine.stats();
    assert_eq!(
        (stats.params_loads, stats.parks, stats.params_evicted),
        (2, 0, 0),
        "{stats:#?}"
    );
}

#[test]
fn a_parked_job_cancelled_ends_cleanly_and_the_high_job_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let (need_low, ws_low) = need_of(dir.path(), LOW_N);
    let (need_high, _) = need_of(dir.path(), HIGH_N);
    let engine = Arc::new(engine(need_low.max(need_high) + ws_low));
    let low = engine
        .submit(request(dir.path(), LOW_N, LOW_PARTS, Priority::Normal))
        .unwrap();
    let low_id = low.id().0;
    first_proof(&low);
    let high = engine
        .submit(request(dir.path(), HIGH_N, 3 * HIGH_PARTS, Priority::High))
        .unwrap();
    // Parked from the HIGH job's admission until after its last proof.
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let status = engine.status();
        let me = status.jobs.iter().find(|j| j.id == low_id).unwrap();
        if me
            .waiting
            .as_deref()
            .is_some_and(|w| w.starts_with("parked"))
        {
            break;
        }
        assert!(Instant::now() < deadline, "never parked: {status:#?}");
        std::thread::sleep(Duration::from_micros(200));
    }
    low.cancel();
    let e = low.wait_blocking().unwrap_err();
    assert!(matches!(e, EngineError::Cancelled { .. }), "{e:?}");
    verify(HIGH_N, &high.wait_blocking().unwrap());
    let stats = engine.stats();
    assert_eq!(stats.params_loads, 2, "{stats:#?}");
    assert_eq!(stats.memory.working_set_bytes, 0);
    assert_eq!(stats.queued_partitions, 0);
    assert_eq!(stats.dispatch_in_flight, 0);
    assert_eq!(stats.pinned.leases_outstanding, 0);
    let timeline = engine.timeline().snapshot().spans;
    assert_eq!(spans(&timeline, low_id, PARKED).len(), 1);
    assert!(engine.status().params.iter().all(|p| p.users == 0));
}

/// `wait_blocking` with a deadline: a hang fails the test instead of
/// holding the test run.
fn wait_within(job: JobHandle, secs: u64, what: &str) -> Vec<bellperson::groth16::Proof<Bls12>> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(job.wait_blocking());
    });
    rx.recv_timeout(Duration::from_secs(secs))
        .unwrap_or_else(|_| panic!("{what}: no result within {secs} s"))
        .unwrap()
}

/// mixed_bench's order on one engine whose budget holds one set at a time:
/// (a) a HIGH job alone, (b) a NORMAL job on the other set with the HIGH
/// job's set submitted again mid-way, (c) the NORMAL set's job alone again.
/// Each needs the set the one before evicted; every job finishes.
#[test]
fn jobs_one_after_another_each_reload_the_set_the_one_before_evicted() {
    let dir = tempfile::tempdir().unwrap();
    let (need_low, ws_low) = need_of(dir.path(), LOW_N);
    let (need_high, _) = need_of(dir.path(), HIGH_N);
    let engine = Arc::new(engine(need_low.max(need_high) + ws_low));
    let high = engine
        .submit(request(dir.path(), HIGH_N, 1, Priority::High))
        .unwrap();
    verify(HIGH_N, &wait_within(high, 300, "(a) the HIGH job alone"));
    let low = engine
        .submit(request(dir.path(), LOW_N, LOW_PARTS, Priority::Normal))
        .unwrap();
    first_proof(&low);
    let high = engine
        .submit(request(dir.path(), HIGH_N, 1, Priority::High))
        .unwrap();
    verify(HIGH_N, &wait_within(high, 300, "(b) the HIGH job mid-way"));
    verify(LOW_N, &wait_within(low, 300, "(b) the NORMAL job"));
    let again = engine
        .submit(request(dir.path(), LOW_N, LOW_PARTS, Priority::Normal))
        .unwrap();
    verify(LOW_N, &wait_within(again, 300, "(c) the NORMAL job alone"));
    let stats = engine.stats();
    assert_eq!(stats.memory.working_set_bytes, 0, "{stats:#?}");
    assert_eq!(stats.queued_partitions, 0);
    assert_eq!(stats.dispatch_in_flight, 0);
}
