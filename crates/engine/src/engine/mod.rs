//! The pipeline: jobs are admitted (PCE, parameters and one working set
//! charged to the budget), their partitions queue by priority, a dispatcher
//! hands the first one to a free synthesis thread once a dispatch permit and
//! a working set are in hand, the synthesis thread makes the witness and
//! a/b/c in pinned buffers and submits a work item to `gpu-sched`, whose
//! workers run prepare / kernel region / assembly. See the crate docs for
//! why this cannot deadlock.
//!
//! `job` holds a job's state and handle and one partition's phases,
//! `admission` gets a job into memory, `pipeline` runs the threads; this
//! module builds the engine and is its API.

mod admission;
mod job;
mod pipeline;
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
use crate::cache::{Cache, ParamsRef, Reclaimer, ShapeId, params_bytes};
use crate::config::{Backend, ByteSize, EngineConfig, GpuParams, GpuStaging};
use crate::error::{EngineError, Result};
use crate::pce_file::{self, ShapeCounts};
use crate::timeline::{EPILOGUE, KERNEL_REGION, Lane, Timeline};

use admission::*;
use job::*;
use pipeline::*;
use ready::{Pacing, Ready, ReadySlot};

pub use job::{
    JobCanceller, JobHandle, JobProgress, ProgressEvent, ProgressStage, ProofRequest, WitnessWith,
};
pub use status::{
    AbcStatus, DeviceStatus, EngineStatus, JobPhase, JobStatus, PRIORITIES, PinnedStatus,
    QueueStatus, ResidentStatus,
};

/// Capacity of the CPU backend's pseudo-device: it reserves no device
/// memory (its `device_bytes` is 0), so anything large works.
const CPU_DEVICE_CAPACITY: u64 = 1 << 50;

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

/// The configuration as the engine runs it, "auto" resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResolvedConfig {
    /// The prover's name (`cpu`, `cuda`).
    pub backend: &'static str,
    /// (ordinal, capacity) of each device; the CPU backend has one
    /// pseudo-device.
    pub devices: Vec<(usize, u64)>,
    pub workers_per_device: usize,
    pub synthesis_concurrency: usize,
    pub dispatch_bound: usize,
    /// Partitions whose witness is made in parallel parts, admitted to
    /// synthesis or finished and not yet taken by a worker, at most (per
    /// priority class and those above it).
    pub synthesis_ahead: usize,
    pub host_memory_budget: u64,
    pub pce_cache_dir: Option<PathBuf>,
    pub params_subgroup_check: bool,
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
}

/// Each device's standing reservation for what its prover holds once,
/// whatever the partitions in flight ([`Prover::shared_device_bytes`]),
/// grown to the largest shape proved so far: partitions then reserve only
/// their own buffers ([`Prover::device_bytes`]), so two in flight on one
/// GPU count the shared part once.
#[derive(Default)]
pub(crate) struct HeldOnce {
    /// Per device (scheduler order), reservations adding up to what is held.
    by_device: Mutex<Vec<Vec<Reservation>>>,
}

impl HeldOnce {
    /// Makes every device's standing reservations add up to at least
    /// `bytes`, waiting for room (no new partition starts on a device
    /// meanwhile); what is held already stays held on error.
    ///
    /// # Errors
    /// [`GpuSchedError::ReservationNeverFits`] naming `bytes` and the
    /// device's usable bytes when a device can never hold them.
    pub(crate) fn ensure(&self, scheduler: &Scheduler, bytes: u64) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        let mut held = self
            .by_device
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let devices = scheduler.devices().len();
        if held.len() < devices {
            held.resize_with(devices, Vec::new);
        }
        for (index, parts) in held.iter_mut().enumerate() {
            let have: u64 = parts.iter().map(Reservation::bytes).sum();
            if have >= bytes {
                continue;
            }
            let memory = scheduler.device_memory(index)?;
            match memory.reserve(bytes - have, &CancelToken::new()) {
                Ok(more) => parts.push(more),
                Err(GpuSchedError::ReservationNeverFits { ordinal, .. }) => {
                    return Err(GpuSchedError::ReservationNeverFits {
                        ordinal,
                        need_bytes: bytes,
                        usable_bytes: memory.usable_bytes(),
                    }
                    .into());
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }
}

/// How often the engine read a parameter file or got a PCE, since it
/// started: what a cache that works keeps low.
#[derive(Debug, Default)]
pub(crate) struct Loads {
    pub(crate) params: std::sync::atomic::AtomicU64,
    pub(crate) pce_recorded: std::sync::atomic::AtomicU64,
    pub(crate) pce_from_disk: std::sync::atomic::AtomicU64,
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

/// The prover of each device: one CUDA prover per GPU, or one prover shared
/// by every device.
pub(crate) struct Provers {
    first: Arc<dyn Prover>,
    by_device: Vec<(usize, Arc<dyn Prover>)>,
    /// Per device ordinal, a standing reservation of what its prover holds
    /// across proofs ([`Prover::held_device_bytes`]: resident parameters,
    /// device PCEs), kept equal to it by [`Provers::account`].
    held: Mutex<Vec<(usize, Reservation)>>,
}

impl Provers {
    fn new(first: Arc<dyn Prover>, by_device: Vec<(usize, Arc<dyn Prover>)>) -> Self {
        Provers {
            first,
            by_device,
            held: Mutex::new(Vec::new()),
        }
    }

    fn one(prover: Arc<dyn Prover>) -> Self {
        Self::new(prover, Vec::new())
    }

    /// Every device's prover frees what it keeps for parameter sets nobody
    /// holds any more; the bytes freed.
    pub(crate) fn release_unused(&self) -> u64 {
        if self.by_device.is_empty() {
            return self.first.release_unused();
        }
        self.by_device.iter().map(|(_, p)| p.release_unused()).sum()
    }

    /// Every device's prover frees all it keeps that no proof is using
    /// ([`Prover::release_idle`]); the bytes freed.
    pub(crate) fn release_idle(&self) -> u64 {
        if self.by_device.is_empty() {
            return self.first.release_idle();
        }
        self.by_device.iter().map(|(_, p)| p.release_idle()).sum()
    }

    /// Device `ordinal`'s prover frees all it keeps that no proof is using;
    /// the bytes freed.
    pub(crate) fn release_idle_on(&self, ordinal: usize) -> u64 {
        self.get(ordinal).release_idle()
    }

    /// Brings device `ordinal`'s standing reservation to what its prover
    /// holds now. The new size is held before the old is let go (the
    /// memory is allocated already, so it is held even past what fits:
    /// partitions that no longer fit beside it wait).
    pub(crate) fn account(&self, ordinal: usize, memory: &DeviceMemory) {
        // Read under the lock: two callers never install sizes out of order.
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let bytes = self.get(ordinal).held_device_bytes();
        let current = held.iter().position(|(o, _)| *o == ordinal);
        if current.map_or(0, |i| held[i].1.bytes()) == bytes {
            return;
        }
        let new = match bytes {
            0 => None,
            _ => match memory.hold(bytes) {
                Ok(r) => Some(r),
                Err(e) => {
                    tracing::warn!(ordinal, bytes, "holding the prover's device memory: {e}");
                    return;
                }
            },
        };
        if let Some(i) = current {
            held.swap_remove(i);
        }
        if let Some(r) = new {
            held.push((ordinal, r));
        }
    }

    /// [`Provers::account`] for every device of `scheduler`.
    pub(crate) fn account_all(&self, scheduler: &Scheduler) {
        for (index, spec) in scheduler.devices().iter().enumerate() {
            if let Ok(memory) = scheduler.device_memory(index) {
                self.account(spec.ordinal, &memory);
            }
        }
    }

    /// The prover of device `ordinal`.
    pub(crate) fn get(&self, ordinal: usize) -> &Arc<dyn Prover> {
        self.by_device
            .iter()
            .find(|(o, _)| *o == ordinal)
            .map_or(&self.first, |(_, p)| p)
    }
}

/// A CUDA prover and a device spec for every GPU the config selects (all
/// the driver sees, or `only`'s ordinals); the reason when there is none.
fn open_gpus(
    config: &EngineConfig,
    only: Option<&[DeviceSpec]>,
) -> std::result::Result<(Provers, Vec<DeviceSpec>), String> {
    let found = cuzk_gpu_sched::discover().map_err(|e| e.to_string())?;
    if found.is_empty() {
        return Err("the CUDA driver sees no GPU (or is not installed)".into());
    }
    let wanted = |ordinal: usize| {
        only.is_none_or(|d| d.iter().any(|s| s.ordinal == ordinal))
            && config.gpus.as_ref().is_none_or(|g| g.contains(&ordinal))
    };
    if let Some(g) = &config.gpus
        && let Some(missing) = g.iter().find(|o| !found.iter().any(|d| d.ordinal == **o))
    {
        return Err(format!(
            "gpus names GPU {missing}, but the driver sees {} (numbered from 0)",
            found.len()
        ));
    }
    let options = GpuOptions {
        params: match config.gpu_params {
            GpuParams::Auto => ParamsPlacement::Auto,
            GpuParams::Resident => ParamsPlacement::Resident,
            GpuParams::Streamed => ParamsPlacement::Streamed,
        },
        gpu_abc: config.gpu_abc,
        pin_streamed: config.gpu_pin_streamed,
        stream_per_worker: config.gpu_stream_per_worker,
        memory_limit: config.device_memory_limit.map(|b| b.0),
        staging: match config.gpu_staging {
            GpuStaging::Auto => Staging::Auto,
            GpuStaging::Device => Staging::Device,
            GpuStaging::Host => Staging::Host,
        },
        window_multiples: config.gpu_window_multiples,
        ..GpuOptions::default()
    };
    let mut by_device = Vec::new();
    let mut specs = Vec::new();
    for info in found.iter().filter(|d| wanted(d.ordinal)) {
        let prover = GpuProver::with_options(info.ordinal, options)
            .map_err(|e| format!("GPU {} ({}): {e}", info.ordinal, info.name))?;
        by_device.push((info.ordinal, Arc::new(prover) as Arc<dyn Prover>));
        specs.push(limited_spec(
            only.and_then(|d| d.iter().find(|s| s.ordinal == info.ordinal).copied())
                .unwrap_or(DeviceSpec::from(info)),
            config.device_memory_limit,
        ));
    }
    let Some((_, first)) = by_device.first() else {
        return Err("no GPU is left after the gpus setting and the requested devices".into());
    };
    Ok((Provers::new(Arc::clone(first), by_device), specs))
}

/// A device as the scheduler sees it under `device_memory_limit`: no more
/// memory than the limit.
fn limited_spec(spec: DeviceSpec, limit: Option<ByteSize>) -> DeviceSpec {
    DeviceSpec {
        capacity_bytes: limit.map_or(spec.capacity_bytes, |l| l.0.min(spec.capacity_bytes)),
        ..spec
    }
}

/// The provers of `config.backend` and the devices they run on (`None`:
/// the CPU pseudo-device, or `devices` as given).
fn choose_provers(
    config: &EngineConfig,
    devices: Option<Vec<DeviceSpec>>,
) -> Result<(Provers, Option<Vec<DeviceSpec>>)> {
    // A mistake in the limit is the user's to fix, not a reason to fall
    // back to the CPU.
    if let Some(limit) = config.device_memory_limit
        && limit.0 <= config.device_memory_margin.0
    {
        return Err(EngineError::Config(format!(
            "device_memory_limit {limit} leaves nothing above device_memory_margin {}",
            config.device_memory_margin
        )));
    }
    Ok(match config.backend {
        Backend::Cpu => (Provers::one(Arc::new(CpuProver)), devices),
        Backend::Gpu => match open_gpus(config, devices.as_deref()) {
            Ok((provers, devices)) => (provers, Some(devices)),
            Err(reason) => {
                return Err(EngineError::BackendUnavailable {
                    backend: "gpu",
                    reason,
                });
            }
        },
        Backend::Auto => match open_gpus(config, devices.as_deref()) {
            Ok((provers, devices)) => (provers, Some(devices)),
            Err(reason) => {
                tracing::info!(%reason, "no usable GPU: proving on the CPU");
                (Provers::one(Arc::new(CpuProver)), devices)
            }
        },
    })
}

/// The prover an engine built with `config` proves with on its first
/// device, chosen the same way (`backend`, `gpus`, `gpu_params`,
/// `gpu_abc`): for one-shot callers that prove single partitions with
/// [`prove_partition`] rather than through an engine.
///
/// # Errors
/// [`EngineError::BackendUnavailable`] for `backend = "gpu"` without a
/// usable GPU.
pub fn open_prover(config: &EngineConfig) -> Result<Arc<dyn Prover>> {
    Ok(choose_provers(config, None)?.0.first)
}

/// Builds an [`Engine`] with a given prover and devices (the GPU backend
/// plugs in here).
pub struct EngineBuilder {
    config: EngineConfig,
    prover: Option<Arc<dyn Prover>>,
    devices: Option<Vec<DeviceSpec>>,
}

impl fmt::Debug for EngineBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EngineBuilder")
            .field("config", &self.config)
            .field("prover", &self.prover)
            .field("devices", &self.devices)
            .finish()
    }
}

impl EngineBuilder {
    /// A builder with `config` and the backend it names.
    pub fn new(config: EngineConfig) -> Self {
        EngineBuilder {
            config,
            prover: None,
            devices: None,
        }
    }

    /// Proves with `prover` instead of the configured backend.
    pub fn prover(mut self, prover: Arc<dyn Prover>) -> Self {
        self.prover = Some(prover);
        self
    }

    /// Runs on these devices (GPU mode: two workers per device by default,
    /// pinned host buffers) instead of the CPU pseudo-device.
    pub fn devices(mut self, devices: Vec<DeviceSpec>) -> Self {
        self.devices = Some(devices);
        self
    }

    /// Starts the engine's threads.
    pub fn build(self) -> Result<Engine> {
        let EngineBuilder {
            config,
            prover,
            devices,
        } = self;
        let (provers, devices) = match prover {
            Some(p) => (Provers::one(p), devices),
            None => choose_provers(&config, devices)?,
        };
        let prover = Arc::clone(&provers.first);
        let gpu_mode = devices.is_some();
        let devices = devices.unwrap_or_else(|| {
            vec![DeviceSpec {
                ordinal: 0,
                capacity_bytes: CPU_DEVICE_CAPACITY,
            }]
        });
        let Some(first) = devices.first().copied() else {
            return Err(EngineError::Config(
                "the engine needs at least one device".into(),
            ));
        };
        let positive = |name: &str, v: usize| {
            if v == 0 {
                Err(EngineError::Config(format!("{name} must be at least 1")))
            } else {
                Ok(v)
            }
        };
        let workers = positive(
            "workers_per_device",
            config
                .workers_per_device
                .or_else(|| if gpu_mode { 2 } else { 1 }),
        )?;
        let synthesis = positive(
            "synthesis_concurrency",
            config.synthesis_concurrency.or_else(|| {
                if gpu_mode {
                    let cores = thread::available_parallelism().map_or(4, |n| n.get());
                    cores.max(2)
                } else {
                    1
                }
            }),
        )?;
        let bound = positive(
            "dispatch_bound",
            config
                .dispatch_bound
                .or_else(|| workers * devices.len() + synthesis),
        )?;
        let ahead = positive(
            "synthesis_ahead",
            config
                .synthesis_ahead
                .or_else(|| 2 * workers * devices.len()),
        )?;
        let budget_bytes = config.host_budget_bytes()?;
        if let Some(dir) = &config.pce_cache_dir {
            std::fs::create_dir_all(dir).map_err(|source| EngineError::PceIo {
                path: dir.clone(),
                source,
            })?;
        }
        let pool = if gpu_mode {
            Pool::pinned_or_fallback(first.ordinal, PoolConfig::unbounded())
                .map_err(EngineError::PinnedPool)?
        } else {
            Pool::fallback(PoolConfig::unbounded())
        };
        let scheduler = Scheduler::new(
            SchedulerConfig {
                workers_per_device: workers,
                memory_margin_bytes: if gpu_mode {
                    config.device_memory_margin.0
                } else {
                    0
                },
            },
            devices.clone(),
        )?;
        let signal = Arc::new(Signal::default());
        let budget = MemoryBudget::with_signal(budget_bytes, Arc::clone(&signal));
        let pces = Arc::new(Cache::new());
        let params = Arc::new(Cache::new());
        let reclaimer = Arc::new(Reclaimer {
            pool: pool.clone(),
            pces: Arc::clone(&pces),
            params: Arc::clone(&params),
        });
        let weak: Weak<dyn Reclaim> = Arc::downgrade(&(Arc::clone(&reclaimer) as Arc<dyn Reclaim>));
        budget.set_reclaimer(weak);
        let resolved = ResolvedConfig {
            backend: prover.name(),
            devices: devices
                .iter()
                .map(|d| (d.ordinal, d.capacity_bytes))
                .collect(),
            workers_per_device: workers,
            synthesis_concurrency: synthesis,
            dispatch_bound: bound,
            synthesis_ahead: ahead,
            host_memory_budget: budget_bytes,
            pce_cache_dir: config.pce_cache_dir.clone(),
            params_subgroup_check: config.params_subgroup_check,
        };
        tracing::info!(config = ?resolved, "engine starting");
        let ready = Arc::new(Ready::new(ahead));
        let provers = Arc::new(provers);
        // Held device memory (resident parameters, PCEs) in the way of the
        // next partition on an idle device: what no proof uses is freed.
        {
            let provers = Arc::clone(&provers);
            scheduler.on_memory_pressure(Arc::new(move |memory: &DeviceMemory| {
                let ordinal = memory.ordinal();
                let freed = provers.release_idle_on(ordinal);
                provers.account(ordinal, memory);
                tracing::info!(
                    ordinal,
                    freed,
                    "device memory held across proofs was in the way of the next partition"
                );
            }));
        }
        let shared = Arc::new(Shared {
            config: resolved,
            signal,
            budget,
            timeline: Arc::new(Timeline::new(config.timeline_capacity)),
            prover,
            provers: Arc::clone(&provers),
            pool,
            pces,
            params,
            _reclaimer: reclaimer,
            admission: Admission::default(),
            state: Mutex::new(State {
                idle_synthesis: synthesis,
                unbound_permit: None,
                ..State::default()
            }),
            bound: DispatchBound::new(bound)?,
            ready,
            stop: CancelToken::new(),
            scheduler,
            held_once: HeldOnce::default(),
            loads: Loads::default(),
        });
        let mut engine = Engine {
            shared,
            threads: Vec::new(),
        };
        let spawn = |name: String, what, f: Box<dyn FnOnce() + Send>| {
            thread::Builder::new()
                .name(name)
                .spawn(f)
                .map_err(|source| EngineError::Spawn { what, source })
        };
        let s = Arc::clone(&engine.shared);
        engine.threads.push(spawn(
            "cuzk-dispatch".into(),
            "dispatcher",
            Box::new(move || dispatcher_main(&s)),
        )?);
        for index in 0..synthesis {
            let s = Arc::clone(&engine.shared);
            engine.threads.push(spawn(
                format!("cuzk-synth-{index}"),
                "synthesis",
                Box::new(move || synthesis_main(&s, index)),
            )?);
        }
        Ok(engine)
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
        {
            return Err(EngineError::ParamsNotRegistered { key: key.clone() });
        }

        let mut parts = partitions.into_iter();
        let first = Arc::new(Mutex::new(parts.next()));
        let record: RecordFn = {
            let first = Arc::clone(&first);
            Box::new(move || {
                let circuit = first
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .as_ref()
                    .cloned()
                    .ok_or_else(|| {
                        EngineError::Internal(
                            "the first partition was taken before the PCE was recorded".into(),
                        )
                    })?;
                Ok(Pce::record(circuit)?)
            })
        };
        let mut witnesses: Vec<WitnessFn> = Vec::with_capacity(n);
        witnesses.push(Box::new(move |inputs, aux| {
            let circuit = first.lock().unwrap_or_else(PoisonError::into_inner).take();
            match circuit {
                Some(c) => witness(c, inputs, aux),
                None => Err(SynthError::Synthesis(
                    bellperson::SynthesisError::AssignmentMissing,
                )),
            }
        }));
        witnesses.extend(
            parts.map(|c| Box::new(move |inputs, aux| witness(c, inputs, aux)) as WitnessFn),
        );

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
            }),
        });
        let shared = Arc::clone(&self.shared);
        let driven = Arc::clone(&job);
        let driver = thread::Builder::new()
            .name(format!("cuzk-job-{}", job.id.0))
            .spawn(move || drive(&shared, &driven, witnesses, record))
            .map_err(|source| EngineError::Spawn {
                what: "job",
                source,
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
    /// not be reloaded; [`Engine::evict_params`] removes it.
    pub fn register_params(
        &self,
        key: impl Into<String>,
        params: Arc<Parameters<Bls12>>,
    ) -> Result<()> {
        let key = ParamsRef::Key(key.into());
        let bytes = params_bytes(&params);
        let shared = &*self.shared;
        loop {
            let Some(slot) = shared
                .admission
                .acquire(&shared.signal, Priority::High, &|| shared.shut_down())
            else {
                return Err(EngineError::EngineShutDown);
            };
            match wait_charge(shared, &slot, bytes, None, &|| shared.shut_down()) {
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
        let ParamsRef::File(path) = params else {
            return if shared.params.contains(params) {
                Ok(())
            } else {
                Err(EngineError::ParamsNotRegistered {
                    key: params.to_string(),
                })
            };
        };
        loop {
            let Some(slot) = shared
                .admission
                .acquire(&shared.signal, Priority::High, &|| shared.shut_down())
            else {
                return Err(EngineError::EngineShutDown);
            };
            if shared.params.contains(params) {
                return Ok(());
            }
            let bytes = file_len(path, file)?;
            if bytes > shared.budget.total() {
                return Err(EngineError::NeverFits {
                    what: "a parameter set",
                    need_bytes: bytes,
                    budget_bytes: shared.budget.total(),
                });
            }
            match wait_charge(shared, &slot, bytes, None, &|| shared.shut_down()) {
                Ok((mut charge, _)) => {
                    let charge = charge.split(bytes, ChargeKind::Params);
                    let loaded = load_params(shared, path, file)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_memory_limit_caps_what_the_scheduler_sees() {
        let card = DeviceSpec {
            ordinal: 1,
            capacity_bytes: 80 << 30,
        };
        assert_eq!(limited_spec(card, None), card);
        let small = limited_spec(card, Some(ByteSize(16 << 30)));
        assert_eq!(small.capacity_bytes, 16 << 30);
        assert_eq!(small.ordinal, 1);
        // A limit above the card changes nothing.
        assert_eq!(limited_spec(card, Some(ByteSize(200 << 30))), card);
    }

    #[test]
    fn a_device_memory_limit_within_the_margin_is_a_config_error() {
        let config = EngineConfig {
            backend: Backend::Cpu,
            device_memory_limit: Some(ByteSize(1 << 30)),
            device_memory_margin: ByteSize(1 << 30),
            ..EngineConfig::default()
        };
        let Err(err) = choose_provers(&config, None) else {
            panic!("a 1 GiB limit with a 1 GiB margin was accepted");
        };
        assert!(matches!(err, EngineError::Config(_)), "{err}");
        assert!(err.to_string().contains("device_memory_limit"), "{err}");
    }
}
