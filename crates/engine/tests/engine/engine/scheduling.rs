//! Scheduling: a HIGH job submitted during a long NORMAL one finishes first
//! (within the dispatch bound), and `synthesis_ahead` bounds how far
//! witnesses made in parts run ahead of the worker.

use std::sync::atomic::Ordering;

use crate::common::*;
use bellperson::groth16::{prepare_verifying_key, verify_proof};
use blstrs::Scalar;
use cuzk_engine::{ParamsRef, Priority, ProgressStage, ProofRequest};

use super::MIB;

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
        if ahead == 1 {
            // Witnesses that waited for room say so in the timeline: a
            // `paced` sub-stage inside the partition's witness, noted.
            let spans = engine.timeline().snapshot().spans;
            let paced: Vec<_> = spans.iter().filter(|s| s.stage == "paced").collect();
            assert!(!paced.is_empty(), "no paced span with synthesis_ahead 1");
            for p in &paced {
                assert_eq!(p.depth, 1, "{p:?}");
                assert!(
                    p.note
                        .as_deref()
                        .is_some_and(|n| n.contains("synthesis_ahead = 1")),
                    "{p:?}"
                );
                let within = spans.iter().any(|w| {
                    w.stage == "witness"
                        && w.partition == p.partition
                        && w.start_us <= p.start_us
                        && p.end_us <= w.end_us
                });
                assert!(within, "{p:?} is not inside its partition's witness");
            }
        }
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

/// Jobs of one priority are admitted in the order they were submitted,
/// whichever of their threads asks first: on a budget with room for one
/// working set, each is admitted after the one submitted before it ends.
#[test]
fn jobs_of_one_priority_are_admitted_in_the_order_they_were_submitted() {
    const SPEC: &str = "mul-chain:10";
    let pce = cuzk_synth::Pce::record(builtin(SPEC, 0)).unwrap();
    let ws = cuzk_engine::working_set_bytes(
        cuzk_engine::pce_file::ShapeCounts::of(&pce),
        &cuzk_groth16_cuda::CpuProver,
    );
    let engine = engine(need(SPEC) + ws / 2);
    engine.register_params("p", params(SPEC)).unwrap();
    const JOBS: u64 = 8;
    let mut jobs: Vec<_> = (0..JOBS)
        .map(|seed| {
            engine
                .submit(ProofRequest::new(
                    SPEC,
                    ParamsRef::Key("p".into()),
                    vec![builtin(SPEC, seed)],
                ))
                .unwrap()
        })
        .collect();
    let events: Vec<_> = jobs.iter_mut().map(|j| j.take_events().unwrap()).collect();
    for job in jobs {
        assert_eq!(job.wait_blocking().unwrap().len(), 1);
    }
    let admitted: Vec<_> = events
        .into_iter()
        .map(|mut events| {
            let mut at = None;
            while let Ok(e) = events.try_recv() {
                if e.stage == ProgressStage::Admitted {
                    at = Some(e.at);
                }
            }
            at.expect("a job without an Admitted event")
        })
        .collect();
    assert!(
        admitted.windows(2).all(|w| w[0] < w[1]),
        "admitted at {admitted:?} (in the order of submission)"
    );
}
