//! The cuzk proving pipeline: circuits in, proofs out.
//!
//! The engine owns policy: what runs next, one host memory budget,
//! priorities, what stays resident. It drives the crates below it: `synth`
//! (PCE recording, witness, SpMV), `groth16-cuda` (a [`Prover`] backend),
//! `pinned-pool` (a/b/c buffers) and `gpu-sched` (workers, the kernel-region
//! lock, reactive dispatch). It never launches kernels and never touches
//! device memory itself: that is the backends' mechanism.
//!
//! # Use
//!
//! ```no_run
//! use cuzk_engine::{Engine, EngineConfig, ParamsRef, ProofRequest, Priority};
//! use cuzk_synth::circuits::CircuitSpec;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let engine = Engine::new(EngineConfig::default())?;
//! let spec: CircuitSpec = "porep:12".parse()?;
//! let partitions = (1..=10).map(|seed| spec.build(seed)).collect();
//! let mut job = engine.submit(
//!     ProofRequest::new("porep:12", ParamsRef::File("porep-12.params".into()), partitions)
//!         .with_priority(Priority::Normal),
//! )?;
//! let mut events = job.take_events().expect("events are taken once");
//! std::thread::spawn(move || while let Some(e) = events.blocking_recv() { println!("{e:?}") });
//! let proofs = job.wait_blocking()?; // or `job.wait().await` in async code
//! # let _ = proofs;
//! # Ok(())
//! # }
//! ```
//!
//! # How a job runs
//!
//! 1. **Admission** (the job's own thread; one job at a time, by priority
//!    then arrival): the shape's PCE comes from the cache, from the PCE
//!    directory, or is recorded from a clone of the first partition; the
//!    parameters come from the parameter manager or are loaded. What is not
//!    resident yet, plus one partition's *working set* (witness, a/b/c,
//!    backend scratch), is charged to the budget in one charge. That working
//!    set stays reserved for the job. A job whose PCE, parameters and one
//!    working set together exceed the budget is refused
//!    ([`EngineError::JobNeverFits`], with the numbers).
//! 2. **Dispatch** (one thread): when a synthesis thread is free, take a
//!    dispatch permit (`gpu-sched`'s [`DispatchBound`]: reactive dispatch),
//!    then, in queue order (priority, then job, then partition), the first
//!    partition whose job's reserved working set is free or that gets a new
//!    working-set charge from the budget. Once one job is refused by the
//!    budget, later (lower or equal) ones may only use their reserved
//!    working sets, so a lower class never takes memory a higher one waits
//!    for.
//! 3. **Synthesis** (`synthesis_concurrency` threads): witness, a/b/c by
//!    SpMV into pinned leases, the satisfaction check (or, when the job was
//!    admitted with a/b/c on the device, the witness alone: its working set
//!    is charged without a/b/c); then a `gpu-sched` work item holding the
//!    permit and the working set.
//! 4. **GPU workers** (`gpu-sched`): prep = [`Prover::prepare`], kernel
//!    region = [`Prover::kernel_region`] under the device's lock, epilogue =
//!    release the working set, [`cuzk_groth16_cuda::assemble`], deliver.
//! 5. The job's thread waits until every partition is done *and released*,
//!    then drops its reserved working set and its hold on PCE and
//!    parameters, and sends the proofs in partition order.
//!
//! A failure in one partition fails its job with the cause
//! ([`EngineError::PartitionSynthesis`], [`EngineError::PartitionProve`],
//! [`EngineError::Panicked`]) and cancels its other partitions; other jobs
//! run on.
//!
//! # Why it cannot deadlock
//!
//! Every admitted job owns one reserved working set, so it can always run a
//! partition without any memory anybody else holds. Partitions in flight
//! hold a permit and a working set and never wait for anything but a worker
//! and the kernel lock, which only other items in flight hold, so they
//! always finish and give both back. The dispatcher holds a permit while it
//! waits for a working set only when the first queued job's reserved one is
//! in use by one of that job's partitions in flight, which will return it
//! (with every permit held by the dispatcher, nothing is in flight, so every
//! reserved working set is free).
//! Only the admission holder waits for memory while holding any, and only
//! for what admitted jobs free by finishing; it gives everything up when a
//! higher-priority job waits for admission. While it waits, partitions of
//! lower classes run on their reserved working sets only, so memory frees
//! up for it; lower jobs whose parameter set or PCE it does not need
//! dispatch nothing more and, once none of their partitions is in flight,
//! *park*: they drop their holds on parameters and PCE and their reserved
//! working set, so the reclaimer can evict them (a set a partition in
//! flight uses is held by it, so never idle, never evicted). A parked job
//! holds nothing and waits for nothing but admission, which it asks for
//! again, by its priority, once no higher class holds or waits for it; its
//! PCE, if evicted, is recorded again from a partition it has not
//! synthesized yet (it parks only with partitions queued), its known size
//! charged first. A steady stream of higher jobs on another set keeps it
//! parked while it lasts. A job whose parameters were registered by value
//! (they could not be reloaded) never parks. The randomized test of 200
//! jobs under a tight budget checks it.
//!
//! # Memory accounting
//!
//! Each byte is charged once ([`MemoryBudget`], [`ChargeKind`]): PCEs and
//! parameters by their caches, working sets by the partitions (a/b/c by the
//! size class of their pinned leases). Idle pinned buffers are not charged
//! but count as used until trimmed; a working-set charge first takes over
//! idle a/b/c buffers of its size (so a finished job's buffers serve the
//! next job instead of being freed and page-locked again); when a charge
//! does not fit, idle pinned buffers are freed first, then idle PCEs, then
//! idle parameters, least recently used first, and only when all of that
//! together covers the shortfall (an evicted set costs a reload). Two
//! allocations are outside the budget: a PCE while it is first recorded
//! (once per shape, before its size is known; admission is serialized, so
//! at most one at a time; a parked job recording it again charges its size
//! first), and the backends' internal allocations beyond the working-set
//! estimate.
//!
//! # Devices
//!
//! Without a GPU backend the CPU prover runs on one pseudo-device with
//! unlimited device memory (it reserves none) and one worker: its kernel
//! region already uses every core, so a second worker would only compete for
//! them. A GPU backend plugs in with [`EngineBuilder::prover`] and
//! [`EngineBuilder::devices`]: two workers per GPU by default, a/b/c in
//! page-locked buffers, device memory reserved through
//! [`Prover::device_bytes`].

pub mod bench;
pub mod budget;
pub mod cache;
pub mod config;
mod engine;
pub mod error;
pub mod pce_file;
pub mod timeline;

use std::time::Instant;

use bellperson::Circuit;
use bellperson::groth16::Parameters;
use blstrs::Scalar;
use cuzk_groth16_cuda::{AbcInput, Bls12, ProofOutput, Prover, ProverInput, StageTimings};
use cuzk_synth::{Pce, Witness};

pub use budget::{Charge, ChargeKind, MemoryBudget, MemoryReport};
pub use cache::{ParamsRef, ShapeId};
pub use config::{Auto, Backend, ByteSize, EngineConfig, GpuParams, GpuStaging};
pub use cuzk_gpu_sched::{DeviceSpec, DispatchBound, JobId, Priority};
/// The page-locked pool's counters ([`EngineStats::pinned`]).
pub use cuzk_pinned_pool::PoolStats;
pub use engine::{
    AbcStatus, DeviceStatus, Engine, EngineBuilder, EngineStats, EngineStatus, JobCanceller,
    JobHandle, JobPhase, JobProgress, JobStatus, PRIORITIES, ParamsLoader, PinnedStatus,
    ProgressEvent, ProgressStage, ProofRequest, QueueStatus, ResidentStatus, ResolvedConfig,
    WitnessWith, open_prover, working_set_bytes, working_set_bytes_for,
};
pub use error::{EngineError, Result};
pub use timeline::{Lane, Span, SpanObserver, Timeline, TimelineData, TimelineSummary};

/// Proves one partition: synthesizes `circuit`'s witness, evaluates a/b/c
/// with `pce` (recorded from a circuit of the same shape), refuses a witness
/// that does not satisfy the circuit, and proves with `prover`.
///
/// The parameters are checked against the PCE before any work is done.
pub fn prove_partition<C: Circuit<Scalar>>(
    prover: &dyn Prover,
    pce: &Pce,
    circuit: C,
    params: &Parameters<Bls12>,
    r: Scalar,
    s: Scalar,
) -> Result<ProofOutput> {
    cuzk_groth16_cuda::check_params(params, pce)?;
    let mut timings = StageTimings::default();
    let start = Instant::now();
    let witness = Witness::synthesize_with_capacity(circuit, pce.num_inputs, pce.num_aux)?;
    timings.push("witness", start.elapsed());
    let abc = timings.time("spmv", || cuzk_synth::evaluate(pce, &witness))?;
    let out = prover.prove(
        ProverInput {
            pce,
            witness: &witness,
            abc: AbcInput::Evaluated {
                a: &abc.a,
                b: &abc.b,
                c: &abc.c,
            },
        },
        params,
        r,
        s,
    )?;
    timings.0.extend(out.timings.0);
    timings.1.extend(out.timings.1);
    Ok(ProofOutput {
        proof: out.proof,
        timings,
    })
}

#[cfg(test)]
mod tests {
    use bellperson::groth16::generate_random_parameters;
    use bellperson::{ConstraintSystem, SynthesisError};
    use cuzk_groth16_cuda::CpuProver;
    use cuzk_synth::SynthError;
    use ff::Field;
    use rand_chacha::ChaCha20Rng;
    use rand_core::SeedableRng;

    use super::*;

    /// x^2 = y, x^2 = z: with `lie`, z gets a wrong value.
    #[derive(Clone)]
    struct Squares {
        lie: bool,
    }

    impl Circuit<Scalar> for Squares {
        fn synthesize<CS: ConstraintSystem<Scalar>>(
            self,
            cs: &mut CS,
        ) -> std::result::Result<(), SynthesisError> {
            let x = cs.alloc(|| "x", || Ok(Scalar::from(3)))?;
            let y = cs.alloc_input(|| "y", || Ok(Scalar::from(9)))?;
            let z = cs.alloc(|| "z", || Ok(Scalar::from(if self.lie { 10 } else { 9 })))?;
            cs.enforce(|| "y = x^2", |lc| lc + x, |lc| lc + x, |lc| lc + y);
            cs.enforce(|| "z = x^2", |lc| lc + x, |lc| lc + x, |lc| lc + z);
            Ok(())
        }
    }

    #[test]
    fn unsatisfied_witness_is_refused_with_the_constraint_index() {
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let params =
            generate_random_parameters::<Bls12, _, _>(Squares { lie: false }, &mut rng).unwrap();
        let pce = Pce::record(Squares { lie: false }).unwrap();
        let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));

        prove_partition(&CpuProver, &pce, Squares { lie: false }, &params, r, s).unwrap();
        let err =
            prove_partition(&CpuProver, &pce, Squares { lie: true }, &params, r, s).unwrap_err();
        assert!(
            matches!(
                err,
                EngineError::Synth(SynthError::Unsatisfied { index: 1, .. })
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("constraint 1 fails"), "{err}");
    }
}
