//! Curio's client interface, `cuzk.v1.ProvingEngine`
//! (`proto/curio/cuzk/v1/proving.proto`), served next to `cuzk.v1.Cuzk` on
//! the same socket, so Curio's Go code (`lib/cuzk`) proves through this
//! daemon unchanged.
//!
//! Each request is turned into the inputs cuzk's own Filecoin requests
//! parse to, then checked, submitted, tracked and verified exactly as they
//! are (`daemon::filecoin`):
//!
//! - PoRep C2: `vanilla_proof` is Curio's c1.json wrapper `{"SectorNum",
//!   "Phase1Out", "SectorSize"}`, `Phase1Out` the base64 of the commit
//!   phase 1 output's JSON (filecoin-proofs-api's or filecoin-proofs' form);
//! - WindowPoSt (one partition) and WinningPoSt: one bincode
//!   `FallbackPoStSectorProof` per sector, the prover id made from
//!   `miner_id` ([`make_prover_id`]);
//! - SnapDeals: one bincode `PartitionProof` per partition and the three
//!   commitments.
//!
//! Registered proofs come as Filecoin's numbers ([`seal_proof_name`],
//! [`post_proof_name`], [`update_proof_name`]). Job ids are the daemon's
//! own, as `job-<n>` (apart from any request id); a job is also found by its
//! `request_id`, and a repeated request id reaches its earlier job.
//!
//! Here: the service and its request-id claims; in [`input`], each
//! request parsed and checked into cuzk's own input.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::watch;

use tonic::{Code, Request, Response, Status};

use super::Daemon;
use super::config::DaemonConfig;
use super::filecoin;
use super::jobs::{Api, Outcome, Tracked};
use super::request::quoted;
use super::service::{Service, blocking};
use crate::curio_proto as pb;
use pb::await_proof_response::Status as AwaitStatus;
use pb::proving_engine_server::ProvingEngine;

mod input;

use input::invalid;
pub use input::{check, make_prover_id, post_proof_name, seal_proof_name, update_proof_name};

/// What a request id stands for.
#[derive(Debug, Clone)]
enum Seen {
    /// A call is checking and submitting the request: repeats wait for it.
    Submitting {
        digest: u64,
        done: watch::Receiver<Option<Result<u64, Status>>>,
    },
    /// The job made for it.
    Job { digest: u64, job: u64 },
}

impl Seen {
    fn digest(&self) -> u64 {
        match self {
            Seen::Submitting { digest, .. } | Seen::Job { digest, .. } => *digest,
        }
    }
}

/// The prefix of the job ids this service hands out (`job-144`): apart
/// from any decimal or other request id a client may choose.
const JOB_PREFIX: &str = "job-";

/// A job's id as `cuzk.v1.ProvingEngine` names it.
pub fn curio_job_id(job: u64) -> String {
    format!("{JOB_PREFIX}{job}")
}

/// `cuzk.v1.ProvingEngine` over one daemon.
#[derive(Debug)]
pub struct CurioService {
    daemon: Arc<Daemon>,
    /// request_id -> its job (or the call making it), while the daemon
    /// still tracks the job.
    requests: Mutex<HashMap<String, Seen>>,
}

/// What a submission found under its request id.
enum Found {
    /// Its job: running, or ended with its proof.
    Job(Arc<Tracked>),
    /// Another call is submitting the same request: wait for its job.
    Wait(watch::Receiver<Option<Result<u64, Status>>>),
    /// Nothing to reuse: this call submits, and tells waiters through
    /// the sender.
    Submit(watch::Sender<Option<Result<u64, Status>>>),
}

/// A digest of everything a request asks to be proved (not its priority):
/// a repeated request id reaches its earlier job only with the same one.
fn digest(r: &pb::SubmitProofRequest) -> u64 {
    let mut h = DefaultHasher::new();
    (
        r.proof_kind,
        r.sector_size,
        r.registered_proof,
        &r.vanilla_proof,
        &r.vanilla_proofs,
        r.sector_number,
        r.miner_id,
        &r.randomness,
        r.partition_index,
        &r.comm_r_old,
        &r.comm_r_new,
        &r.comm_d_new,
    )
        .hash(&mut h);
    h.finish()
}

/// The reply to an await of job `t`: its outcome, or `None` when the wait
/// ended first; the timing fields from the job's timeline so far.
fn await_reply(t: &Tracked, now_us: u64, outcome: Option<Outcome>) -> pb::AwaitProofResponse {
    let timing = match &outcome {
        Some(Ok(p)) => p.timing.clone(),
        _ => None,
    }
    .unwrap_or_else(|| t.timing.report(now_us));
    let mut r = pb::AwaitProofResponse {
        job_id: curio_job_id(t.id),
        queue_wait_ms: timing.queue_wait_ms,
        srs_load_ms: timing.params_load_ms,
        synthesis_ms: timing.synthesis_ms,
        gpu_compute_ms: timing.gpu_compute_ms,
        ..pb::AwaitProofResponse::default()
    };
    let status = match outcome {
        None => AwaitStatus::Timeout,
        Some(Ok(p)) => {
            r.total_ms = (p.seconds * 1000.0).round() as u64;
            // A built-in circuit's job (from cuzk.v1.Cuzk) has partition
            // proofs only.
            r.proof = if p.proof.is_empty() {
                p.proofs.concat()
            } else {
                p.proof
            };
            AwaitStatus::Completed
        }
        Some(Err(s)) => {
            r.error_message = s.message().to_owned();
            if s.code() == Code::Cancelled {
                AwaitStatus::Cancelled
            } else {
                AwaitStatus::Failed
            }
        }
    };
    r.status = status as i32;
    r
}

/// Jobs ended as done and as failed, from the daemon's `cuzk_jobs_total`.
fn job_totals(metrics: &str) -> (u64, u64) {
    let (mut done, mut failed) = (0u64, 0u64);
    for line in metrics.lines() {
        let Some(rest) = line.strip_prefix("cuzk_jobs_total{") else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let Ok(v) = value.trim().parse::<f64>() else {
            continue;
        };
        // Counters: whole, non-negative numbers.
        let v = v as u64;
        if labels.contains("outcome=\"done\"") {
            done += v;
        } else if labels.contains("outcome=\"failed\"") {
            failed += v;
        }
    }
    (done, failed)
}

/// Curio's name of a job's kind, from its circuit label
/// (`porep-c2:StackedDrg2KiBV1_1`); built-in circuits by their family.
fn kind_name(circuit: &str) -> String {
    match circuit.split(':').next().unwrap_or(circuit) {
        "snap-deals" => "snap-update".into(),
        other => other.into(),
    }
}

impl CurioService {
    pub fn new(daemon: Arc<Daemon>) -> Self {
        CurioService {
            daemon,
            requests: Mutex::new(HashMap::new()),
        }
    }

    fn requests(&self) -> MutexGuard<'_, HashMap<String, Seen>> {
        self.requests.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The engine timeline's present.
    fn now_us(&self) -> u64 {
        self.daemon
            .engine
            .timeline()
            .micros(std::time::Instant::now())
    }

    /// Counts a refusal before passing it on.
    fn refuse(&self, s: Status) -> Status {
        self.daemon.metrics.rejected(s.code());
        super::request::bounded(s)
    }

    /// The job `id` names: a request id first (whatever its form), else a
    /// job id this service handed out (`job-144`). A bare job number is
    /// not a job id here: it would reach jobs of other clients.
    fn find(&self, id: &str) -> Option<Arc<Tracked>> {
        if let Some(Seen::Job { job, .. }) = self.requests().get(id) {
            return self.daemon.jobs.get(*job);
        }
        let n = id.strip_prefix(JOB_PREFIX)?.parse::<u64>().ok()?;
        self.daemon.jobs.get(n).filter(|t| t.api == Api::Curio)
    }

    fn not_found(id: &str) -> Status {
        Status::not_found(format!(
            "no job {}: never submitted here, or its outcome expired (result_ttl_s)",
            quoted(id)
        ))
    }

    /// Looks up `request_id` and, in the same critical section, claims it
    /// when nothing reusable is there: an earlier job with the same digest
    /// while it runs or once it has its proof, or a call submitting the
    /// same request now. A failed or cancelled job is proved again; a
    /// request id reused with other inputs names the new job from now on.
    fn claim(&self, request_id: &str, digest: u64) -> Found {
        let mut requests = self.requests();
        if let Some(seen) = requests.get(request_id).filter(|s| s.digest() == digest) {
            match seen {
                // A claim whose call went away without a word (its sender
                // dropped) is stale: this call claims the id anew.
                Seen::Submitting { done, .. } => {
                    if done.has_changed().is_ok() || done.borrow().is_some() {
                        return Found::Wait(done.clone());
                    }
                }
                Seen::Job { job, .. } => {
                    if let Some(t) = self.daemon.jobs.get(*job)
                        && t.succeeded() != Some(false)
                    {
                        return Found::Job(t);
                    }
                }
            }
        }
        let jobs = &self.daemon.jobs;
        requests.retain(|_, s| match s {
            Seen::Submitting { .. } => true,
            Seen::Job { job, .. } => jobs.get(*job).is_some(),
        });
        let (tx, rx) = watch::channel(None);
        requests.insert(request_id.to_owned(), Seen::Submitting { digest, done: rx });
        Found::Submit(tx)
    }

    async fn submit(&self, req: pb::SubmitProofRequest) -> Result<Arc<Tracked>, Status> {
        let req = Arc::new(req);
        let request_id = req.request_id.clone();
        if request_id.is_empty() {
            return self.submit_new(&req).await;
        }
        let r = Arc::clone(&req);
        let digest = blocking(move || digest(&r)).await?;
        loop {
            match self.claim(&request_id, digest) {
                Found::Job(t) => {
                    tracing::info!(job = t.id, request_id = %quoted(&request_id), "Curio request repeated: its job already exists");
                    return Ok(t);
                }
                Found::Wait(mut done) => {
                    // The submitting call always says how it went: its
                    // sender goes (and the wait ends) when it returns.
                    let outcome = done
                        .wait_for(Option::is_some)
                        .await
                        .ok()
                        .and_then(|r| (*r).clone());
                    match outcome {
                        Some(Ok(job)) => {
                            if let Some(t) = self.daemon.jobs.get(job) {
                                return Ok(t);
                            }
                        }
                        Some(Err(s)) => return Err(s),
                        // Its call was dropped before it knew: claim again.
                        None => {}
                    }
                }
                Found::Submit(tx) => {
                    let made = self.submit_new(&req).await;
                    let mut requests = self.requests();
                    match &made {
                        Ok(t) => {
                            requests.insert(request_id.clone(), Seen::Job { digest, job: t.id });
                        }
                        Err(_) => {
                            if matches!(requests.get(&request_id), Some(Seen::Submitting { digest: d, .. }) if *d == digest)
                            {
                                requests.remove(&request_id);
                            }
                        }
                    }
                    drop(requests);
                    tx.send_replace(Some(made.as_ref().map(|t| t.id).map_err(Clone::clone)));
                    return made;
                }
            }
        }
    }

    /// Checks and submits a request as a new job.
    async fn submit_new(&self, req: &Arc<pb::SubmitProofRequest>) -> Result<Arc<Tracked>, Status> {
        let daemon = &self.daemon;
        let _admitted = Service(Arc::clone(daemon)).admit()?;
        let config = daemon.config.clone();
        let r = Arc::clone(req);
        let checked = blocking(move || check(&config, &r))
            .await?
            .map_err(|s| self.refuse(s))?;
        let t = filecoin::submit_checked(daemon, checked, Api::Curio)
            .await
            .map_err(|s| self.refuse(s))?;
        tracing::info!(job = t.id, request_id = %quoted(&req.request_id), miner = req.miner_id, "Curio request submitted");
        Ok(t)
    }
}

#[tonic::async_trait]
impl ProvingEngine for CurioService {
    async fn submit_proof(
        &self,
        req: Request<pb::SubmitProofRequest>,
    ) -> Result<Response<pb::SubmitProofResponse>, Status> {
        let t = self.submit(req.into_inner()).await?;
        let ahead = self
            .daemon
            .jobs
            .all()
            .iter()
            .filter(|j| j.id < t.id && !j.ended())
            .count();
        Ok(Response::new(pb::SubmitProofResponse {
            job_id: curio_job_id(t.id),
            queue_position: u32::try_from(ahead).unwrap_or(u32::MAX),
            assigned_gpu: String::new(),
        }))
    }

    async fn await_proof(
        &self,
        req: Request<pb::AwaitProofRequest>,
    ) -> Result<Response<pb::AwaitProofResponse>, Status> {
        let req = req.into_inner();
        let t = self
            .find(&req.job_id)
            .ok_or_else(|| Self::not_found(&req.job_id))?;
        let timeout = (req.timeout_ms > 0).then(|| Duration::from_millis(req.timeout_ms));
        let outcome = t.outcome(timeout).await;
        Ok(Response::new(await_reply(&t, self.now_us(), outcome)))
    }

    async fn prove(
        &self,
        req: Request<pb::ProveRequest>,
    ) -> Result<Response<pb::ProveResponse>, Status> {
        let submit = req.into_inner().submit.ok_or_else(|| {
            self.refuse(invalid(
                "ProveRequest has no `submit`: the request to prove".into(),
            ))
        })?;
        let t = self.submit(submit).await?;
        // Should the caller go away, the job goes on: a repeat of the
        // request (same request_id) finds it.
        let outcome = t.outcome(None).await;
        Ok(Response::new(pb::ProveResponse {
            result: Some(await_reply(&t, self.now_us(), outcome)),
        }))
    }

    async fn cancel_proof(
        &self,
        req: Request<pb::CancelProofRequest>,
    ) -> Result<Response<pb::CancelProofResponse>, Status> {
        let was_running = match self.find(&req.get_ref().job_id) {
            Some(t) => {
                let running = !t.ended();
                t.cancel();
                running
            }
            None => false,
        };
        Ok(Response::new(pb::CancelProofResponse { was_running }))
    }

    async fn get_status(
        &self,
        _: Request<pb::GetStatusRequest>,
    ) -> Result<Response<pb::GetStatusResponse>, Status> {
        let daemon = Arc::clone(&self.daemon);
        let (s, metrics) =
            blocking(move || (daemon.status(), daemon.metrics.render(&daemon.engine))).await?;
        let (done, failed) = job_totals(&metrics);
        let config = self.daemon.config.clone();
        let curio_ids = blocking(move || curio_circuit_ids(&config)).await?;
        let mut queues: Vec<pb::QueueStatus> = Vec::new();
        for j in &s.jobs {
            let kind = kind_name(&j.circuit);
            let i = match queues.iter().position(|q| q.proof_kind == kind) {
                Some(i) => i,
                None => {
                    queues.push(pb::QueueStatus {
                        proof_kind: kind,
                        ..pb::QueueStatus::default()
                    });
                    queues.len() - 1
                }
            };
            match j.state.as_str() {
                "waiting" => queues[i].pending += 1,
                "running" => queues[i].in_progress += 1,
                _ => {}
            }
        }
        let backend = s.backend.clone();
        // The CPU backend's one pseudo-device is not a GPU.
        let devices = if backend == "cuda" {
            s.devices.as_slice()
        } else {
            &[]
        };
        Ok(Response::new(pb::GetStatusResponse {
            gpus: devices
                .iter()
                .map(|d| {
                    // Its first current job (the lowest id), as this API
                    // names jobs: a job of cuzk.v1.Cuzk by its number.
                    let current = d.current_jobs.first().and_then(|&id| {
                        let t = self.daemon.jobs.get(id)?;
                        let name = match t.api {
                            Api::Curio => curio_job_id(id),
                            Api::Cuzk => id.to_string(),
                        };
                        Some((name, kind_name(&t.circuit)))
                    });
                    let (current_job_id, current_proof_kind) = current.unwrap_or_default();
                    pb::GpuStatus {
                        ordinal: u32::try_from(d.ordinal).unwrap_or(u32::MAX),
                        name: format!("{backend} device {}", d.ordinal),
                        vram_total_bytes: d.capacity_bytes,
                        vram_free_bytes: d.capacity_bytes.saturating_sub(d.reserved_bytes),
                        current_job_id,
                        current_proof_kind,
                    }
                })
                .collect(),
            loaded_srs: s
                .params
                .iter()
                .map(|p| pb::SrsStatus {
                    circuit_id: curio_ids
                        .get(&p.id)
                        .cloned()
                        .unwrap_or_else(|| p.id.clone()),
                    tier: pb::srs_status::Tier::Hot as i32,
                    size_bytes: p.bytes,
                    ref_count: p.users,
                })
                .collect(),
            queues,
            total_proofs_completed: done,
            total_proofs_failed: failed,
            uptime_seconds: s.uptime_seconds as u64,
            pinned_memory_bytes: s.pinned.map_or(0, |p| p.bytes_held),
            pinned_memory_limit_bytes: 0,
        }))
    }

    async fn get_metrics(
        &self,
        _: Request<pb::GetMetricsRequest>,
    ) -> Result<Response<pb::GetMetricsResponse>, Status> {
        let daemon = Arc::clone(&self.daemon);
        let prometheus_text = blocking(move || daemon.metrics.render(&daemon.engine)).await?;
        Ok(Response::new(pb::GetMetricsResponse { prometheus_text }))
    }

    async fn preload_srs(
        &self,
        req: Request<pb::PreloadSrsRequest>,
    ) -> Result<Response<pb::PreloadSrsResponse>, Status> {
        let params = srs_params(&self.daemon.config, &req.get_ref().circuit_id)
            .map_err(|s| self.refuse(s))?;
        let (already_loaded, took) = Service(Arc::clone(&self.daemon))
            .preload_params(params.into())
            .await?;
        Ok(Response::new(pb::PreloadSrsResponse {
            already_loaded,
            load_time_ms: took.as_millis() as u64,
        }))
    }

    async fn evict_srs(
        &self,
        req: Request<pb::EvictSrsRequest>,
    ) -> Result<Response<pb::EvictSrsResponse>, Status> {
        let params = srs_params(&self.daemon.config, &req.get_ref().circuit_id)
            .map_err(|s| self.refuse(s))?;
        let id = params.to_string();
        let bytes = self
            .daemon
            .engine
            .status()
            .params
            .iter()
            .find(|r| r.id == id)
            .map_or(0, |r| r.bytes);
        // Off the async threads: freeing a GPU's copy waits for the device.
        let daemon = Arc::clone(&self.daemon);
        let was_loaded = blocking(move || daemon.engine.evict_params(&params))
            .await?
            .map_err(|e| self.refuse(super::request::status_of(&e)))?;
        Ok(Response::new(pb::EvictSrsResponse {
            was_loaded,
            freed_bytes: if was_loaded { bytes } else { 0 },
        }))
    }
}

/// Curio's circuit ids of the parameter files present in the daemon's
/// Filecoin parameter cache, by the engine's id of each file.
fn curio_circuit_ids(config: &DaemonConfig) -> HashMap<String, String> {
    let mut ids = HashMap::new();
    for kind in ["porep", "wpost", "winning", "snap"] {
        for size in ["2k", "8m", "512m", "32g", "64g"] {
            let id = format!("{kind}-{size}");
            if let Ok(params) = srs_params(config, &id) {
                ids.entry(params.to_string()).or_insert(id);
            }
        }
    }
    ids
}

/// Curio's circuit id (`porep-32g`, `wpost-32g`, `winning-32g`, `snap-32g`;
/// sizes `2k`, `8m`, `512m`, `32g`, `64g`) as the parameter file of that
/// circuit in the daemon's Filecoin parameter cache: PoRep as
/// StackedDrg<size>V1_1, WindowPoSt as StackedDrgWindow<size>V1_1,
/// WinningPoSt as StackedDrgWinning<size>V1, SnapDeals as StackedDrg<size>V1.
pub fn srs_params(config: &DaemonConfig, id: &str) -> Result<cuzk_engine::ParamsRef, Status> {
    use crate::proto::params_spec::Source;
    let unknown = || {
        invalid(format!(
            "unknown circuit id {}: expected porep-, wpost-, winning- or snap- followed by \
             2k, 8m, 512m, 32g or 64g (e.g. porep-32g)",
            quoted(id)
        ))
    };
    let (kind, size) = id.split_once('-').ok_or_else(unknown)?;
    let size = match size.to_ascii_lowercase().as_str() {
        "2k" | "2kib" => "2KiB",
        "8m" | "8mib" => "8MiB",
        "512m" | "512mib" => "512MiB",
        "32g" | "32gib" => "32GiB",
        "64g" | "64gib" => "64GiB",
        _ => return Err(unknown()),
    };
    let source = match kind.to_ascii_lowercase().as_str() {
        "porep" => Source::SealProof(format!("StackedDrg{size}V1_1")),
        "wpost" => Source::PostProof(format!("StackedDrgWindow{size}V1_1")),
        "winning" => Source::PostProof(format!("StackedDrgWinning{size}V1")),
        "snap" => Source::UpdateProof(format!("StackedDrg{size}V1")),
        _ => return Err(unknown()),
    };
    super::request::resolve_params(
        config,
        Some(&crate::proto::ParamsSpec {
            source: Some(source),
        }),
    )
    .map(|r| r.params)
}
