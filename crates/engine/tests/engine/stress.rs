//! 200 randomized submissions (mixed shapes and sizes, priorities, failing
//! partitions, impossible requests, cancellations at random moments) into
//! one engine under a tight host memory budget: no deadlock, every job ends
//! with proofs that verify or with the reason it was expected to fail, the
//! budget is never exceeded, and everything is given back at the end.
//! `CUZK_STRESS_JOBS` overrides the count.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::common::*;
use bellperson::groth16::{Parameters, prepare_verifying_key, verify_proof};
use blstrs::Scalar;
use cuzk_engine::{EngineError, JobHandle, ParamsRef, Priority, ProofRequest};
use cuzk_groth16_cuda::Bls12;
use cuzk_synth::Witness;
use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};

const FEASIBLE: [&str; 4] = ["mul-chain:6", "mul-chain:7", "porep:8", "chain:100"];
const IMPOSSIBLE: &str = "porep:11";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    None,
    Lie,
    Fail,
    Panic,
}

struct Submitted {
    handle: JobHandle,
    spec: &'static str,
    seeds: Vec<u64>,
    fault: Fault,
    cancelled: bool,
}

fn pick<T: Copy>(rng: &mut ChaCha20Rng, items: &[T]) -> T {
    items[(rng.next_u64() % items.len() as u64) as usize]
}

fn jobs() -> usize {
    std::env::var("CUZK_STRESS_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200)
}

#[test]
fn randomized_submissions_under_a_tight_budget_all_end_with_a_reason() {
    let started = Instant::now();
    let needs: BTreeMap<&str, u64> = FEASIBLE.iter().map(|s| (*s, need(s))).collect();
    let largest = *needs.values().max().unwrap();
    // About two jobs' worth: jobs wait for each other, PCEs and parameters
    // are evicted and reloaded.
    let budget = largest * 2;
    let impossible = need(IMPOSSIBLE);
    assert!(impossible > budget, "{impossible} <= {budget}");
    eprintln!("stress: needs {needs:?}, budget {budget}, {IMPOSSIBLE} needs {impossible}");

    let dir = tempfile::tempdir().unwrap();
    let engine = Arc::new(engine(budget));
    for spec in FEASIBLE.iter().chain([&IMPOSSIBLE]) {
        params_file(dir.path(), spec);
    }
    let path = |spec: &str| ParamsRef::File(params_file(dir.path(), spec));

    // The budget is never exceeded, checked while everything runs.
    let done = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(AtomicU64::new(0));
    let monitor = {
        let (engine, done, peak) = (Arc::clone(&engine), Arc::clone(&done), Arc::clone(&peak));
        std::thread::spawn(move || {
            while !done.load(Ordering::SeqCst) {
                let m = engine.memory();
                peak.fetch_max(m.used_bytes, Ordering::SeqCst);
                assert!(m.used_bytes <= m.budget_bytes, "over budget: {m:?}");
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };

    let mut rng = ChaCha20Rng::seed_from_u64(200);
    let mut submitted: Vec<Submitted> = Vec::new();
    let mut cancellers = Vec::new();
    for i in 0..jobs() {
        let impossible_job = rng.next_u64() % 100 < 3;
        let fault = match rng.next_u64() % 100 {
            0..=3 => Fault::Lie,
            4..=6 => Fault::Fail,
            7..=8 => Fault::Panic,
            _ => Fault::None,
        };
        let spec = if impossible_job {
            IMPOSSIBLE
        } else if fault != Fault::None {
            "chain:100"
        } else {
            pick(&mut rng, &FEASIBLE)
        };
        let partitions = 1 + (rng.next_u64() % 4) as usize;
        let priority = pick(
            &mut rng,
            &[
                Priority::Low,
                Priority::Normal,
                Priority::High,
                Priority::Critical,
            ],
        );
        let seeds: Vec<u64> = (0..partitions).map(|k| (i * 10 + k) as u64).collect();
        // A fault needs a partition after the first (the first is cloned to
        // record the PCE, which never evaluates values).
        let fault = if partitions < 2 { Fault::None } else { fault };
        let bad = 1 + (rng.next_u64() % (partitions.max(2) as u64 - 1)) as usize;
        let handle = if let Some(n) = spec.strip_prefix("chain:") {
            let n: usize = n.parse().unwrap();
            let circuits = seeds
                .iter()
                .enumerate()
                .map(|(k, &s)| {
                    let mut c = Chain::good(n, s);
                    if k == bad {
                        match fault {
                            Fault::Lie => c.lie = true,
                            Fault::Fail => c.fail = true,
                            Fault::Panic => c.panic = true,
                            Fault::None => {}
                        }
                    }
                    c
                })
                .collect();
            engine.submit(ProofRequest::new(spec, path(spec), circuits).with_priority(priority))
        } else {
            let circuits = seeds.iter().map(|&s| builtin(spec, s)).collect();
            engine.submit(ProofRequest::new(spec, path(spec), circuits).with_priority(priority))
        }
        .unwrap();
        let cancel = rng.next_u64() % 100 < 15;
        if cancel {
            if rng.next_u64() % 2 == 0 {
                handle.cancel();
            } else {
                let c = handle.canceller();
                let delay = Duration::from_millis(rng.next_u64() % 40);
                cancellers.push(std::thread::spawn(move || {
                    std::thread::sleep(delay);
                    c.cancel();
                }));
            }
        }
        submitted.push(Submitted {
            handle,
            spec,
            seeds,
            fault,
            cancelled: cancel,
        });
        if rng.next_u64() % 8 == 0 {
            std::thread::sleep(Duration::from_millis(rng.next_u64() % 5));
        }
    }

    // Everything ends; a deadlock would stop here, so a deadline guards it.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let results = runtime.block_on(async {
        let mut out = Vec::new();
        for s in submitted {
            let id = s.handle.id();
            let waited = tokio::time::timeout(Duration::from_secs(240), s.handle.wait()).await;
            match waited {
                Ok(r) => out.push((s.spec, s.seeds, s.fault, s.cancelled, r)),
                Err(_) => panic!("job {id} did not end in time: {:#?}", engine.stats()),
            }
        }
        out
    });
    for c in cancellers {
        c.join().unwrap();
    }
    done.store(true, Ordering::SeqCst);
    monitor.join().unwrap();

    let verifying: BTreeMap<&str, Arc<Parameters<Bls12>>> =
        FEASIBLE.iter().map(|s| (*s, params(s))).collect();
    let mut outcomes: BTreeMap<&str, usize> = BTreeMap::new();
    let mut proofs_checked = 0;
    for (spec, seeds, fault, cancelled, result) in results {
        let kind = match &result {
            Ok(proofs) => {
                assert_eq!(proofs.len(), seeds.len());
                assert_eq!(fault, Fault::None, "{spec}: a faulty job succeeded");
                let pvk = prepare_verifying_key(&verifying[spec].vk);
                for (proof, &seed) in proofs.iter().zip(&seeds) {
                    let inputs: Vec<Scalar> = match spec.strip_prefix("chain:") {
                        Some(n) => vec![Chain::good(n.parse().unwrap(), seed).output()],
                        None => Witness::synthesize(builtin(spec, seed))
                            .unwrap()
                            .public_inputs()
                            .to_vec(),
                    };
                    assert!(
                        verify_proof(&pvk, proof, &inputs).unwrap(),
                        "{spec} seed {seed}"
                    );
                    proofs_checked += 1;
                }
                "proved"
            }
            Err(EngineError::Cancelled { .. }) => {
                assert!(cancelled, "{spec}: cancelled without asking");
                "cancelled"
            }
            Err(EngineError::JobNeverFits { .. }) => {
                assert_eq!(spec, IMPOSSIBLE);
                "never fits"
            }
            Err(EngineError::PartitionSynthesis { source, .. }) => {
                assert!(
                    matches!(fault, Fault::Lie | Fault::Fail),
                    "{spec}: {source}"
                );
                if fault == Fault::Lie {
                    "unsatisfied"
                } else {
                    "synthesis error"
                }
            }
            Err(EngineError::Panicked { .. }) => {
                assert_eq!(fault, Fault::Panic);
                "panicked"
            }
            Err(other) => panic!("{spec}: unexpected failure: {other}"),
        };
        if !cancelled && fault == Fault::None && spec != IMPOSSIBLE {
            assert_eq!(kind, "proved", "{spec}");
        }
        *outcomes.entry(kind).or_default() += 1;
    }
    let stats = engine.stats();
    eprintln!(
        "stress: {} jobs in {:.1?}: {outcomes:?}; {proofs_checked} proofs verified; peak used \
         {} of {budget} bytes; pinned pool {:?}",
        jobs(),
        started.elapsed(),
        peak.load(Ordering::SeqCst),
        stats.pinned
    );
    assert_eq!(outcomes.values().sum::<usize>(), jobs());
    assert_eq!(stats.memory.working_set_bytes, 0);
    assert_eq!(stats.dispatch_in_flight, 0);
    assert_eq!(stats.queued_partitions, 0);
    assert_eq!(stats.scheduler.queued, 0);
    assert_eq!(stats.pinned.leases_outstanding, 0);
    assert!(stats.memory.used_bytes <= budget);
}
