//! The simulator's scenarios, its unit tests: a GPU kept busy by two
//! workers, critical work overtaking bulk, reactive dispatch, cancellation,
//! and a thousand random workloads that must keep every invariant.

use super::*;
use crate::GpuSchedError;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn item(bytes: u64, synth: u64, prep: u64, kernel: u64, epilogue: u64) -> SimItem {
    SimItem {
        bytes,
        synth,
        prep,
        kernel,
        epilogue,
        fail: None,
    }
}

fn assert_clean(report: &Report) {
    assert!(
        report.violations.is_empty(),
        "{} violations, first: {:?}",
        report.violations.len(),
        &report.violations[..report.violations.len().min(5)]
    );
    assert!(report.leftovers.is_empty(), "{:?}", report.leftovers);
    assert!(
        report.outcomes.iter().all(Option::is_some),
        "a job never ended"
    );
}

/// A PoRep-like stream: prep + epilogue (at most 70 ticks) shorter than
/// a kernel region (at least 80).
fn pipeline(workers: usize, devices: usize) -> Report {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let items = (0..60)
        .map(|_| {
            item(
                10,
                rng.gen_range(40..=60),
                rng.gen_range(20..=40),
                rng.gen_range(80..=120),
                rng.gen_range(10..=30),
            )
        })
        .collect();
    let setup = SimSetup {
        capacities: vec![1000; devices],
        margin: 0,
        workers_per_device: workers,
        bound: Some(4 * devices),
    };
    let job = SimJob {
        arrival: 0,
        priority: Priority::Normal,
        items,
        cancel_at: None,
    };
    let report = simulate(&setup, &[job]);
    assert_clean(&report);
    assert_eq!(report.tallies[0].completed, 60);
    report
}

#[test]
fn two_workers_keep_the_gpu_busy_and_one_does_not() {
    let one = pipeline(1, 1).busy(0);
    let two = pipeline(2, 1).busy(0);
    let multi = pipeline(2, 2);
    let (d0, d1) = (multi.busy(0), multi.busy(1));
    eprintln!(
        "simulated GPU busy between first and last kernel region: 1 worker {one:.3}, \
         2 workers {two:.3}; 2 GPUs x 2 workers {d0:.3} / {d1:.3}"
    );
    assert!(two >= 0.95, "2 workers: busy {two:.3}");
    assert!(one < 0.8, "1 worker: busy {one:.3}");
    assert!(d0 >= 0.95 && d1 >= 0.95, "2 GPUs: busy {d0:.3} / {d1:.3}");
    // Both GPUs took a share of the work.
    assert!(multi.kernels.iter().filter(|k| k.device == 1).count() >= 25);
}

#[test]
fn critical_work_overtakes_bulk_at_partition_granularity() {
    let bulk = SimJob {
        arrival: 0,
        priority: Priority::Normal,
        items: vec![item(10, 0, 10, 100, 10); 20],
        cancel_at: None,
    };
    let urgent = SimJob {
        arrival: 350,
        priority: Priority::Critical,
        items: vec![item(10, 0, 10, 100, 10); 3],
        cancel_at: None,
    };
    let setup = SimSetup {
        capacities: vec![1000],
        margin: 0,
        workers_per_device: 2,
        bound: None,
    };
    let report = simulate(&setup, &[bulk, urgent]);
    assert_clean(&report);
    let arrival = 350;
    let last_critical = report
        .kernels
        .iter()
        .filter(|k| k.job == 1)
        .map(|k| k.start)
        .max()
        .unwrap();
    let overtaken_by: Vec<u32> = report
        .kernels
        .iter()
        .filter(|k| k.job == 0 && k.start > arrival && k.start < last_critical)
        .map(|k| k.partition)
        .collect();
    // Only bulk partitions already on a worker at the arrival may run
    // their kernel region before the critical ones.
    for partition in &overtaken_by {
        assert!(report.assigned_at[&(0, *partition)] <= arrival);
    }
    assert!(
        overtaken_by.len() < setup.workers_per_device,
        "{overtaken_by:?}"
    );
    let order: Vec<(usize, u32)> = report
        .kernels
        .iter()
        .map(|k| (k.job, k.partition))
        .collect();
    eprintln!(
        "kernel order around the critical arrival: {:?}",
        &order[..8]
    );
}

#[test]
fn reactive_dispatch_starts_one_synthesis_per_completion() {
    let bound = 3;
    let job = SimJob {
        arrival: 0,
        priority: Priority::Normal,
        items: vec![item(10, 5, 10, 50, 10); 30],
        cancel_at: None,
    };
    let setup = SimSetup {
        capacities: vec![1000],
        margin: 0,
        workers_per_device: 2,
        bound: Some(bound),
    };
    let report = simulate(&setup, &[job]);
    assert_clean(&report);
    assert_eq!(report.max_in_flight, bound);
    // After the first `bound`, each synthesis starts at a completion,
    // and never more at one tick than completions at that tick.
    assert!(report.synth_starts[..bound].iter().all(|&t| t == 0));
    let mut ends: HashMap<u64, usize> = HashMap::new();
    for &t in &report.item_ends {
        *ends.entry(t).or_default() += 1;
    }
    let mut starts: HashMap<u64, usize> = HashMap::new();
    for &t in &report.synth_starts[bound..] {
        *starts.entry(t).or_default() += 1;
    }
    for (t, n) in starts {
        assert!(n <= ends.get(&t).copied().unwrap_or(0), "{n} starts at {t}");
    }
}

#[test]
fn cancellation_leaves_no_permit_or_reservation_behind() {
    let setup = SimSetup {
        capacities: vec![100, 60],
        margin: 10,
        workers_per_device: 2,
        bound: Some(5),
    };
    let jobs = [
        SimJob {
            arrival: 0,
            priority: Priority::Normal,
            items: vec![item(30, 10, 10, 60, 10); 12],
            cancel_at: Some(150),
        },
        SimJob {
            arrival: 20,
            priority: Priority::High,
            items: vec![item(40, 10, 10, 60, 10); 4],
            cancel_at: None,
        },
        SimJob {
            arrival: 40,
            priority: Priority::Low,
            items: vec![item(20, 10, 10, 60, 10); 6],
            cancel_at: Some(100),
        },
    ];
    let report = simulate(&setup, &jobs);
    assert_clean(&report);
    assert_eq!(report.tallies[1].completed, 4);
    for (j, tally) in report.tallies.iter().enumerate() {
        let total = tally.completed + tally.cancelled + tally.refused + tally.failed;
        assert_eq!(total, jobs[j].items.len(), "job {j}: {tally:?}");
    }
    assert!(report.tallies[0].cancelled > 0);
    assert!(matches!(
        report.outcomes[0],
        Some(Err(GpuSchedError::JobCancelled { .. }))
    ));
}

fn random_workload(rng: &mut ChaCha8Rng) -> (SimSetup, Vec<SimJob>) {
    let devices = rng.gen_range(1..=3);
    let capacities: Vec<u64> = (0..devices).map(|_| rng.gen_range(100..=400)).collect();
    let margin = rng.gen_range(0..=30);
    let largest = capacities.iter().max().copied().unwrap_or(0);
    let bound = rng.gen_bool(0.7).then(|| rng.gen_range(1..=8));
    let priorities = [
        Priority::Low,
        Priority::Normal,
        Priority::High,
        Priority::Critical,
    ];
    let jobs = (0..rng.gen_range(1..=6))
        .map(|_| {
            let items = (0..rng.gen_range(0..=10))
                .map(|_| SimItem {
                    // Now and then more than any device holds.
                    bytes: rng.gen_range(0..=largest + largest / 8),
                    synth: rng.gen_range(0..=30),
                    prep: rng.gen_range(0..=40),
                    kernel: rng.gen_range(1..=60),
                    epilogue: rng.gen_range(0..=30),
                    fail: match rng.gen_range(0..40) {
                        0 => Some(Phase::Prep),
                        1 => Some(Phase::Kernel),
                        2 => Some(Phase::Epilogue),
                        _ => None,
                    },
                })
                .collect();
            SimJob {
                arrival: rng.gen_range(0..=300),
                priority: priorities[rng.gen_range(0..4)],
                items,
                cancel_at: rng.gen_bool(0.3).then(|| rng.gen_range(0..=600)),
            }
        })
        .collect();
    let setup = SimSetup {
        capacities,
        margin,
        workers_per_device: 2,
        bound,
    };
    (setup, jobs)
}

#[test]
fn a_thousand_random_workloads_keep_every_invariant() {
    let mut rng = ChaCha8Rng::seed_from_u64(0x5eed);
    let (mut items, mut refused, mut cancelled, mut failed) = (0, 0, 0, 0);
    for round in 0..1000 {
        let (setup, jobs) = random_workload(&mut rng);
        let report = simulate(&setup, &jobs);
        assert!(
            report.violations.is_empty() && report.leftovers.is_empty(),
            "workload {round} {setup:?}: {:?} {:?}",
            &report.violations[..report.violations.len().min(5)],
            report.leftovers
        );
        for (d, &max) in report.max_item_bytes.iter().enumerate() {
            assert!(max <= setup.capacities[d] - setup.margin.min(setup.capacities[d]));
        }
        if let Some(bound) = setup.bound {
            assert!(report.max_in_flight <= bound);
        }
        for (j, job) in jobs.iter().enumerate() {
            let tally = report.tallies[j];
            let total = tally.completed + tally.cancelled + tally.refused + tally.failed;
            assert_eq!(
                total,
                job.items.len(),
                "workload {round} job {j}: {tally:?}"
            );
            let outcome = report.outcomes[j].clone().expect("every job ends");
            match outcome {
                Ok(summary) => {
                    assert_eq!(summary.completed, tally.completed);
                    assert_eq!(tally.completed + tally.refused, job.items.len());
                }
                Err(GpuSchedError::JobCancelled { .. }) => assert!(job.cancel_at.is_some()),
                Err(GpuSchedError::PhaseFailed { .. }) => assert!(tally.failed > 0),
                Err(other) => panic!("workload {round} job {j}: {other}"),
            }
            items += job.items.len();
            refused += tally.refused;
            cancelled += tally.cancelled;
            failed += tally.failed;
        }
    }
    eprintln!(
        "1000 workloads: {items} items, {refused} refused, {cancelled} cancelled, \
         {failed} failed"
    );
    // The workloads did exercise refusals, cancellations and failures.
    assert!(refused > 0 && cancelled > 0 && failed > 0);
}
