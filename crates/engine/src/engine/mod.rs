//! The pipeline: jobs are admitted (PCE, parameters and one working set
//! charged to the budget), their partitions queue by priority, a dispatcher
//! hands the first one to a free synthesis thread once a dispatch permit and
//! a working set are in hand, the synthesis thread makes the witness and
//! a/b/c in pinned buffers and submits a work item to `gpu-sched`, whose
//! workers run prepare / kernel region / assembly. See the crate docs for
//! why this cannot deadlock.
//!
//! `job` holds a job's state and handle and one partition's phases,
//! `admission` gets a job into memory, `park` has a lower job give its
//! parameters up to a higher one and take them back, `pipeline` runs the
//! threads,
//! `builder` resolves the configuration and starts the engine, `provers`
//! chooses each device's prover and holds the device memory it keeps; this
//! module holds the state they share and is the engine's API.

mod admission;
mod builder;
mod host_pce;
mod job;
mod loader;
mod park;
mod pipeline;
mod provers;
mod ready;
mod status;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use bellperson::Circuit;
use bellperson::groth16::{Parameters, Proof};
use blstrs::Scalar;
use cuzk_gpu_sched::{
    CancelToken, DeviceMemory, DeviceSpec, DispatchBound, DispatchPermit, GpuSchedError,
    JobHandle as GpuJob, JobId, JobSummary, PhaseError, Phases, Priority, Reservation, Scheduler,
    SchedulerConfig, SchedulerSnapshot, WorkItem, WorkerContext,
};
use cuzk_groth16_cuda::{
    AbcInput, AbcPlacement, Bls12, CpuProver, GpuOptions, GpuProver, Groth16Error, MsmResults,
    ParamsPlacement, Prover, ProverInput, StageTimings, Staged, Staging,
};
use cuzk_pinned_pool::{Lease, PinnedError, Pool, PoolConfig, PoolStats, Request};
use cuzk_synth::{Pce, SynthError, Witness};
use ff::Field;
use serde::Serialize;
use tokio::sync::{mpsc, oneshot};

use crate::budget::{Charge, ChargeKind, MemoryBudget, MemoryReport, Reclaim, Signal};
use crate::cache::{Cache, EvictHook, Evicted, ParamsRef, Reclaimer, ShapeId, params_bytes};
use crate::config::{Backend, ByteSize, EngineConfig, GpuParams, GpuStaging};
use crate::error::{EngineError, Result};
use crate::pce_file::{self, ShapeCounts};
use crate::timeline::{
    ABC_AHEAD, BUDGET_WAIT, EPILOGUE, KERNEL_REGION, Lane, PACED, PARAMS_EVICT, PARAMS_LOAD,
    PARKED, PCE_EVICT, Span, Timeline, WITNESS,
};

use admission::*;
use job::*;
use loader::*;
use park::*;
use pipeline::*;
use provers::*;
use ready::{Pacing, Ready, ReadySlot};

pub use builder::{EngineBuilder, ResolvedConfig};
pub use job::{
    JobCanceller, JobHandle, JobProgress, ProgressEvent, ProgressStage, ProofRequest, WitnessWith,
};
pub use loader::ParamsLoader;
pub use provers::open_prover;
pub use status::{
    AbcStatus, DeviceStatus, EngineStatus, JobPhase, JobStatus, PRIORITIES, PinnedStatus,
    QueueStatus, ResidentStatus,
};

struct Pending {
    job: Arc<JobState>,
    witness: WitnessFn,
}

struct Task {
    job: Arc<JobState>,
    partition: u32,
    witness: WitnessFn,
    permit: DispatchPermit,
    ws: WsCharge,
    flight: Flight,
}

type QueueKey = (Reverse<Priority>, u64, u32);

#[derive(Default)]
struct State {
    shutdown: bool,
    queue: BTreeMap<QueueKey, Pending>,
    tasks: VecDeque<Task>,
    idle_synthesis: usize,
    /// The job on whose behalf the dispatcher is taking, or holds, a permit
    /// not yet bound to a partition.
    unbound_permit: Option<u64>,
    jobs: Vec<Weak<JobState>>,
    drivers: Vec<JoinHandle<()>>,
}
pub(crate) struct Shared {
    config: ResolvedConfig,
    signal: Arc<Signal>,
    budget: MemoryBudget,
    timeline: Arc<Timeline>,
    /// The first device's prover: sizes reservations and names the backend.
    prover: Arc<dyn Prover>,
    /// The prover of each device.
    provers: Arc<Provers>,
    pool: Pool,
    pces: Arc<Cache<ShapeId, Pce>>,
    params: Arc<Cache<ParamsRef, Parameters<Bls12>>>,
    /// Kept alive here; the budget holds it weakly.
    _reclaimer: Arc<Reclaimer>,
    admission: Admission,
    state: Mutex<State>,
    bound: DispatchBound,
    /// Partitions whose witness is made in parts, admitted to synthesis and
    /// not yet taken by a worker (`synthesis_ahead`).
    ready: Arc<Ready>,
    /// Cancelled at shutdown: wakes the dispatcher's permit wait.
    stop: CancelToken,
    scheduler: Scheduler,
    /// What each device's prover holds once (MSM scratch, twiddles), as a
    /// standing reservation.
    held_once: HeldOnce,
    loads: Loads,
    /// The loaders of keys registered with `register_params_loader`.
    loaders: Loaders,
    /// Held by a synthesis thread across a host SpMV and its satisfaction
    /// check (a/b/c on the host): one at a time on all cores, so the
    /// partition whose witness was done first is ready first (two at once
    /// took twice as long each, and the GPU waited for both).
    host_spmv: Mutex<()>,
}
/// How often the engine read a parameter file or got a PCE, since it
/// started: what a cache that works keeps low.
#[derive(Debug, Default)]
pub(crate) struct Loads {
    pub(crate) params: std::sync::atomic::AtomicU64,
    pub(crate) pce_recorded: std::sync::atomic::AtomicU64,
    pub(crate) pce_from_disk: std::sync::atomic::AtomicU64,
    /// Jobs that gave their parameters up to a higher-priority job.
    pub(crate) parks: std::sync::atomic::AtomicU64,
    /// Parameter sets evicted to make room (not by `evict_params`).
    pub(crate) params_evicted: std::sync::atomic::AtomicU64,
}

impl Loads {
    pub(crate) fn count(counter: &std::sync::atomic::AtomicU64) {
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn remove_queued(&self, job: &JobState) {
        let removed: Vec<Pending> = {
            let mut st = self.lock();
            let from = (Reverse(job.priority), job.id.0, 0);
            let to = (Reverse(job.priority), job.id.0, u32::MAX);
            let keys: Vec<QueueKey> = st.queue.range(from..=to).map(|(k, _)| *k).collect();
            let removed: Vec<Pending> = keys.iter().filter_map(|k| st.queue.remove(k)).collect();
            let mut j = job.lock();
            let n = removed.len() as u32;
            j.queued = j.queued.saturating_sub(n);
            j.to_dispatch = j.to_dispatch.saturating_sub(n);
            removed
        };
        // Circuits are user code: dropped outside every lock.
        drop(removed);
    }

    fn shut_down(&self) -> bool {
        self.lock().shutdown
    }
}

/// The bytes one partition of this shape holds while in flight with a/b/c
/// evaluated on the host: the witness, a/b/c (in pinned buffers, by size
/// class) and what the backend allocates on the host in its kernel region.
pub fn working_set_bytes(counts: ShapeCounts, prover: &dyn Prover) -> u64 {
    working_set_bytes_for(counts, prover, false)
}

/// [`working_set_bytes`] for a partition whose a/b/c the backend evaluates
/// on its device (`abc_on_device`: no a/b/c buffers on the host) or not.
pub fn working_set_bytes_for(counts: ShapeCounts, prover: &dyn Prover, abc_on_device: bool) -> u64 {
    const SCALAR: u64 = 32;
    let vars = (counts.num_inputs + counts.num_aux) as u64;
    let n = counts.num_constraints as u64;
    let abc_one = cuzk_pinned_pool::size_class(counts.num_constraints.saturating_mul(32))
        .map_or(u64::MAX / 8, |c| c as u64);
    let abc = if abc_on_device { 0 } else { 3 * abc_one };
    vars * SCALAR + abc + backend_host_bytes(counts, prover, n, vars)
}

fn backend_host_bytes(counts: ShapeCounts, prover: &dyn Prover, n: u64, vars: u64) -> u64 {
    let _ = counts;
    if prover.name() == "cpu" {
        // compute_h copies a, b, c into domain-sized vectors; the MSMs
        // convert the witness and h to byte representations.
        let m = n.next_power_of_two();
        3 * m * 32 + (vars + m) * 32
    } else {
        // A GPU backend stages through the pinned a/b/c and its device
        // memory; its host scratch is small and not yet reported by the
        // Prover trait.
        0
    }
}
/// Counters of a running engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineStats {
    pub memory: MemoryReport,
    /// Dispatch permits held now (partitions between synthesis and done).
    pub dispatch_in_flight: usize,
    pub dispatch_bound: usize,
    /// Partitions of admitted jobs waiting for synthesis.
    pub queued_partitions: usize,
    /// Partitions whose witness is made in parts, admitted to synthesis and
    /// not yet taken by a worker (at most `synthesis_ahead` per class).
    pub ready_partitions: usize,
    pub cached_shapes: usize,
    pub resident_params: usize,
    pub pinned: PoolStats,
    pub scheduler: SchedulerSnapshot,
    /// Parameter files read since the engine started (each load of a set
    /// that was not resident, preloads included).
    pub params_loads: u64,
    /// PCEs recorded from their circuit since the engine started.
    pub pce_recorded: u64,
    /// PCEs read from `pce_cache_dir` since the engine started.
    pub pce_loaded_from_disk: u64,
    /// Times a job gave its parameters and PCE up at a partition boundary
    /// to a higher-priority job that needed the memory.
    pub parks: u64,
    /// Parameter sets evicted to make room for a charge.
    pub params_evicted: u64,
}

/// The proving engine: see the crate documentation.
///
/// Dropping it fails every unfinished job with [`EngineError::ShutDown`] and
/// waits for the threads to stop (a running phase is never interrupted).
pub struct Engine {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("config", &self.shared.config)
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// An engine with `config`'s backend.
    pub fn new(config: EngineConfig) -> Result<Engine> {
        EngineBuilder::new(config).build()
    }

    /// A builder, to choose the prover and devices.
    pub fn builder(config: EngineConfig) -> EngineBuilder {
        EngineBuilder::new(config)
    }

    /// The configuration as resolved.
    pub fn config(&self) -> &ResolvedConfig {
        &self.shared.config
    }

    /// The host memory budget.
    pub fn budget(&self) -> &MemoryBudget {
        &self.shared.budget
    }

    /// Where the budget's memory is now.
    pub fn memory(&self) -> MemoryReport {
        self.shared.budget.report()
    }

    /// The timeline of every stage of every partition.
    pub fn timeline(&self) -> &Timeline {
        &self.shared.timeline
    }

    /// Counters now.
    pub fn stats(&self) -> EngineStats {
        let queued_partitions = self.shared.lock().queue.len();
        EngineStats {
            memory: self.memory(),
            dispatch_in_flight: self.shared.bound.in_flight(),
            dispatch_bound: self.shared.bound.bound(),
            queued_partitions,
            ready_partitions: self.shared.ready.total(),
            cached_shapes: self.shared.pces.len(),
            resident_params: self.shared.params.len(),
            pinned: self.shared.pool.stats(),
            scheduler: self.shared.scheduler.snapshot(),
            params_loads: self.shared.loads.params.load(Ordering::Relaxed),
            pce_recorded: self.shared.loads.pce_recorded.load(Ordering::Relaxed),
            pce_loaded_from_disk: self.shared.loads.pce_from_disk.load(Ordering::Relaxed),
            parks: self.shared.loads.parks.load(Ordering::Relaxed),
            params_evicted: self.shared.loads.params_evicted.load(Ordering::Relaxed),
        }
    }

    /// Frees every idle pinned buffer, PCE and parameter set; returns the
    /// bytes freed.
    pub fn evict_idle(&self) -> u64 {
        let pinned = self.shared.pool.trim() as u64;
        let freed = pinned
            + self.shared.pces.evict_idle(u64::MAX)
            + self.shared.params.evict_idle(u64::MAX);
        // The devices' copies of the sets just dropped, and their PCEs and
        // shape tables no proof is using.
        self.shared.provers.release_idle();
        self.shared.provers.account_all(&self.shared.scheduler);
        self.shared.signal.bump();
        freed
    }

    /// Frees idle pinned buffers only; returns the bytes freed.
    pub fn trim_pinned(&self) -> u64 {
        let freed = self.shared.pool.trim() as u64;
        self.shared.signal.bump();
        freed
    }

    /// Submits a proof request; the returned handle waits for the proofs,
    /// reports progress and cancels.
    ///
    /// The first partition is cloned to record the shape's PCE when the
    /// shape is not cached (in memory or in the PCE directory).
    ///
    /// # Errors
    /// Refusals that need no work: an empty request, randomness for another
    /// number of partitions, unregistered parameters, a shut-down engine.
    /// Everything else (memory that can never fit, bad parameters, failed
    /// partitions) comes from [`JobHandle::wait`].
    pub fn submit<C>(&self, request: ProofRequest<C>) -> Result<JobHandle>
    where
        C: Circuit<Scalar> + Clone + Send + 'static,
    {
        let ProofRequest {
            shape,
            params,
            partitions,
            priority,
            randomness,
            params_file,
            witness,
        } = request;
        let n = partitions.len();
        if n == 0 {
            return Err(EngineError::EmptyRequest);
        }
        let count = u32::try_from(n).map_err(|_| EngineError::TooManyPartitions {
            partitions: n,
            max: u32::MAX as usize,
        })?;
        let randomness = match randomness {
            Some(pairs) if pairs.len() != n => {
                return Err(EngineError::RandomnessMismatch {
                    partitions: n,
                    pairs: pairs.len(),
                });
            }
            Some(pairs) => pairs,
            None => {
                let mut rng = rand::rngs::OsRng;
                (0..n)
                    .map(|_| (Scalar::random(&mut rng), Scalar::random(&mut rng)))
                    .collect()
            }
        };
        if let ParamsRef::Key(key) = &params
            && !self.shared.params.contains(&params)
            && !self.shared.loaders.has(&params)
        {
            return Err(EngineError::ParamsNotRegistered { key: key.clone() });
        }

        // Each partition's circuit in a slot its witness takes it from; the
        // PCE is recorded from a clone of the first one still there: at
        // admission the first partition, and when a job that parked comes
        // back with its PCE evicted, any it has not synthesized yet (a job
        // parks only with partitions queued).
        let slots: Arc<Vec<Mutex<Option<C>>>> = Arc::new(
            partitions
                .into_iter()
                .map(|c| Mutex::new(Some(c)))
                .collect(),
        );
        let record: RecordFn = {
            let slots = Arc::clone(&slots);
            Box::new(move || {
                let circuit = slots.iter().find_map(|slot| {
                    slot.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .as_ref()
                        .cloned()
                });
                let circuit = circuit.ok_or_else(|| {
                    EngineError::Internal(
                        "every partition was taken before the PCE was recorded".into(),
                    )
                })?;
                Ok(Pce::record(circuit)?)
            })
        };
        let witnesses: Vec<WitnessFn> = (0..n)
            .map(|k| {
                let slots = Arc::clone(&slots);
                Box::new(move |inputs, aux, copy| {
                    let Some(slot) = slots.get(k) else {
                        return Err(SynthError::Synthesis(
                            bellperson::SynthesisError::AssignmentMissing,
                        ));
                    };
                    // A copy for a witness that may yield (before its parts
                    // start): the circuit stays for its next try. Cloning a
                    // 32 GiB WindowPoSt circuit took 20-45 ms on two cores,
                    // so a witness that need not wait goes without.
                    let circuit = {
                        let mut slot = slot.lock().unwrap_or_else(PoisonError::into_inner);
                        if copy { slot.clone() } else { slot.take() }
                    };
                    let Some(c) = circuit else {
                        return Err(SynthError::Synthesis(
                            bellperson::SynthesisError::AssignmentMissing,
                        ));
                    };
                    let made = witness(c, inputs, aux);
                    if copy && !matches!(made, Err(SynthError::Yielded)) {
                        let original = slot.lock().unwrap_or_else(PoisonError::into_inner).take();
                        drop(original);
                    }
                    made
                }) as WitnessFn
            })
            .collect();
        drop(slots);

        let (result_tx, result_rx) = oneshot::channel();
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let mut st = self.shared.lock();
        if st.shutdown {
            return Err(EngineError::EngineShutDown);
        }
        let gpu = self.shared.scheduler.create_job(priority);
        let job = Arc::new(JobState {
            id: gpu.id(),
            priority,
            arrival: self.shared.admission.arrive(priority),
            shape,
            params_ref: params,
            params_file,
            partitions: count,
            randomness,
            token: gpu.cancel_token().clone(),
            signal: Arc::clone(&self.shared.signal),
            timeline: Arc::clone(&self.shared.timeline),
            events: events_tx,
            shared: Arc::downgrade(&self.shared),
            st: Mutex::new(JobMut {
                gpu: Some(gpu),
                terminated: false,
                cancelled: false,
                finished: false,
                error: None,
                proofs: vec![None; n],
                proved: 0,
                to_dispatch: count,
                queued: 0,
                spare: None,
                ws_bytes: 0,
                pce: None,
                params: None,
                result: Some(result_tx),
                abc: None,
                in_flight: 0,
                parked: None,
                wait: Wait::Admission,
                pce_bytes: 0,
                budget_wait: None,
            }),
        });
        let shared = Arc::clone(&self.shared);
        let driven = Arc::clone(&job);
        let driver = thread::Builder::new()
            .name(format!("cuzk-job-{}", job.id.0))
            .spawn(move || drive(&shared, &driven, witnesses, record))
            .map_err(|source| {
                self.shared.admission.leave(priority, job.arrival);
                EngineError::Spawn {
                    what: "job",
                    source,
                }
            })?;
        st.drivers.retain(|d| !d.is_finished());
        st.drivers.push(driver);
        st.jobs.retain(|j| j.strong_count() > 0);
        st.jobs.push(Arc::downgrade(&job));
        drop(st);
        Ok(JobHandle {
            job,
            result: result_rx,
            events: Some(events_rx),
        })
    }

    /// Hands the engine a parameter set under `key` (for
    /// [`ParamsRef::Key`]), charged to the budget (waiting for room) by its
    /// in-memory size. It is never evicted under pressure, since it could
    /// not be reloaded; [`Engine::evict_params`] removes it. A set that may
    /// be evicted and made again: [`Engine::register_params_loader`].
    pub fn register_params(
        &self,
        key: impl Into<String>,
        params: Arc<Parameters<Bls12>>,
    ) -> Result<()> {
        let key = ParamsRef::Key(key.into());
        let bytes = params_bytes(&params);
        let shared = &*self.shared;
        loop {
            let Some(slot) =
                shared
                    .admission
                    .acquire(&shared.signal, Priority::High, None, &|| shared.shut_down())
            else {
                return Err(EngineError::EngineShutDown);
            };
            match wait_charge(shared, &slot, bytes, None, None, &|| shared.shut_down()) {
                Ok((mut charge, _)) => {
                    let charge = charge.split(bytes, ChargeKind::Params);
                    shared.params.insert(key, params, charge, false);
                    return Ok(());
                }
                Err(AdmitError::Fail(e)) => return Err(e),
                Err(AdmitError::Yield | AdmitError::Retry) => continue,
            }
        }
    }

    /// Loads a parameter file now (waiting for room in the budget), so the
    /// first job that uses it does not wait for it. It stays resident until
    /// memory is needed or [`Engine::evict_params`].
    pub fn preload_params(&self, params: &ParamsRef) -> Result<()> {
        self.preload(params, None)
    }

    /// [`Engine::preload_params`] reading the file from `file`, opened by
    /// the caller (e.g. after checking where it is), if the set is not
    /// resident.
    pub fn preload_params_from(&self, params: &ParamsRef, file: std::fs::File) -> Result<()> {
        self.preload(params, Some(&file))
    }

    fn preload(&self, params: &ParamsRef, file: Option<&std::fs::File>) -> Result<()> {
        let shared = &*self.shared;
        if shared.params.contains(params) {
            return Ok(());
        }
        // A file, or a key's loader (a key with neither is an error).
        let source = Source::of(shared, params, file)?;
        loop {
            let Some(slot) =
                shared
                    .admission
                    .acquire(&shared.signal, Priority::High, None, &|| shared.shut_down())
            else {
                return Err(EngineError::EngineShutDown);
            };
            if shared.params.contains(params) {
                return Ok(());
            }
            let bytes = source.bytes()?;
            if bytes > shared.budget.total() {
                return Err(EngineError::NeverFits {
                    what: "a parameter set",
                    need_bytes: bytes,
                    budget_bytes: shared.budget.total(),
                });
            }
            match wait_charge(shared, &slot, bytes, None, None, &|| shared.shut_down()) {
                Ok((mut charge, _)) => {
                    let charge = charge.split(bytes, ChargeKind::Params);
                    let loaded = source.load(shared)?;
                    shared
                        .params
                        .insert(params.clone(), Arc::new(loaded), charge, true);
                    return Ok(());
                }
                Err(AdmitError::Fail(e)) => return Err(e),
                Err(AdmitError::Yield | AdmitError::Retry) => continue,
            }
        }
    }

    /// Drops a parameter set now: `Ok(true)` if it was resident,
    /// `Ok(false)` if not.
    ///
    /// # Errors
    /// [`EngineError::ParamsInUse`] while a job uses it.
    pub fn evict_params(&self, params: &ParamsRef) -> Result<bool> {
        let removed = self.shared.params.remove_if_idle(params).map_err(|holds| {
            EngineError::ParamsInUse {
                id: params.to_string(),
                holds,
            }
        })?;
        if removed {
            // Its copies on the devices go too (a reload uploads anew).
            self.shared.provers.release_unused();
            self.shared.provers.account_all(&self.shared.scheduler);
        }
        self.shared.signal.bump();
        Ok(removed)
    }

    /// Whether `shape`'s PCE is in memory.
    pub fn has_pce(&self, shape: &ShapeId) -> bool {
        self.shared.pces.contains(shape)
    }

    /// Whether `params` are resident.
    pub fn has_params(&self, params: &ParamsRef) -> bool {
        self.shared.params.contains(params)
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let (jobs, drivers) = {
            let mut st = self.shared.lock();
            st.shutdown = true;
            (
                std::mem::take(&mut st.jobs),
                std::mem::take(&mut st.drivers),
            )
        };
        for job in jobs.iter().filter_map(Weak::upgrade) {
            job.terminate(Some(EngineError::ShutDown { job: job.id }));
        }
        self.shared.stop.cancel();
        self.shared.signal.bump();
        for t in self.threads.drain(..).chain(drivers) {
            if t.join().is_err() {
                tracing::error!("an engine thread panicked");
            }
        }
    }
}
