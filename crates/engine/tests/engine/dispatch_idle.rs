//! The dispatcher sleeps while it waits: with the budget holding one
//! partition at a time and partitions whose synthesis takes a while, the
//! dispatcher thread must not spin between budget changes. It runs alone
//! in a process of its own (`testing::alone_in_process`), so that the
//! process has exactly one engine (one `cuzk-dispatch` thread) to look at
//! in /proc.

use std::time::{Duration, Instant};

use crate::common::*;
use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use cuzk_engine::{Auto, ParamsRef, ProofRequest};

/// A chain whose synthesis first sleeps (no CPU) for a while.
#[derive(Clone, Debug)]
struct Slow(Chain, Duration);

impl Circuit<Scalar> for Slow {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        std::thread::sleep(self.1);
        self.0.synthesize(cs)
    }
}

/// CPU time (user + system, in clock ticks) of this process's threads
/// named `name`.
#[cfg(target_os = "linux")]
fn thread_ticks(name: &str) -> u64 {
    let mut ticks = 0;
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let dir = task.unwrap().path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim() != name {
            continue;
        }
        let stat = std::fs::read_to_string(dir.join("stat")).unwrap();
        // Fields after the command's closing parenthesis; utime and stime
        // are the 14th and 15th fields of the whole line.
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        ticks += fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    }
    ticks
}

#[cfg(target_os = "linux")]
#[test]
fn the_dispatcher_sleeps_while_the_budget_is_full() {
    if !cuzk_gpu_sched::testing::alone_in_process(
        "dispatch_idle::the_dispatcher_sleeps_while_the_budget_is_full",
    ) {
        return;
    }
    const N: usize = 32;
    let spec = format!("chain:{N}");
    let mut config = config(need(&spec));
    // Idle synthesis threads, so the dispatcher has a queued partition and
    // a thread for it, and only the budget stops it.
    config.synthesis_concurrency = Auto::Value(3);
    let engine = cuzk_engine::Engine::new(config).unwrap();
    engine.register_params("chain", params(&spec)).unwrap();
    let circuits: Vec<Slow> = (0..4)
        .map(|s| Slow(Chain::good(N, s), Duration::from_millis(400)))
        .collect();

    let before = thread_ticks("cuzk-dispatch");
    let start = Instant::now();
    let proofs = engine
        .submit(ProofRequest::new(
            spec.as_str(),
            ParamsRef::Key("chain".into()),
            circuits,
        ))
        .unwrap()
        .wait_blocking()
        .unwrap();
    let wall = start.elapsed();
    let ticks = thread_ticks("cuzk-dispatch") - before;
    let tick_s = 0.01; // USER_HZ is 100 on Linux
    eprintln!(
        "{} proofs in {wall:.2?}; the dispatcher used {:.2} s of CPU",
        proofs.len(),
        ticks as f64 * tick_s
    );
    assert_eq!(proofs.len(), 4);
    // One partition at a time, each sleeping 400 ms: the dispatcher waited
    // for the budget for more than a second. Spinning, it would have used
    // about as much CPU as that; sleeping, almost none.
    assert!(wall >= Duration::from_millis(1200), "{wall:?}");
    assert!(
        (ticks as f64) * tick_s < 0.25,
        "the dispatcher used {ticks} ticks of CPU in {wall:?}: it spins while it waits"
    );
}
