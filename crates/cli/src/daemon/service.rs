//! The gRPC service: each call checks its request, then asks the engine or
//! the job registry. Blocking engine calls run on tokio's blocking threads.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use cuzk_engine::{ParamsRef, ProofRequest, ShapeId};
use cuzk_synth::circuits::Instance;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use super::Daemon;
use super::filecoin;
use super::jobs::{Api, JobKind, Jobs, Tracked, Watcher};
use super::request::{self, priority_to_proto, status_of};
use crate::proto::{self, cuzk_server::Cuzk};

/// The most spans a `Timeline` reply carries (the latest ones).
pub const MAX_TIMELINE_SPANS: usize = 200_000;

/// A request's place among the daemon's `max_jobs` until its job is
/// tracked: dropping it gives the place back.
#[derive(Debug)]
pub struct Admitted(Arc<Daemon>);

impl Drop for Admitted {
    fn drop(&mut self) {
        self.0.submitting.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The service over one daemon.
#[derive(Debug, Clone)]
pub struct Service(pub Arc<Daemon>);

type UpdateStream = ReceiverStream<Result<proto::JobUpdate, Status>>;

pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Status> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Status::internal(format!("a daemon task failed: {e}")))
}

impl Service {
    /// Counts a refusal before passing it on.
    fn refuse(&self, s: Status) -> Status {
        self.0.metrics.rejected(s.code());
        request::bounded(s)
    }

    /// Refuses new work while shutting down or at `max_jobs`; otherwise a
    /// place among the `max_jobs`, held until the job is tracked (or the
    /// request refused) and the guard dropped.
    pub fn admit(&self) -> Result<Admitted, Status> {
        let daemon = &self.0;
        if daemon.draining() {
            return Err(self.refuse(Status::unavailable(
                "the daemon is shutting down: no more requests are accepted",
            )));
        }
        let admitted = Admitted(Arc::clone(daemon));
        let before = daemon.submitting.fetch_add(1, Ordering::SeqCst);
        if daemon.jobs.unfinished() + before >= daemon.config.max_jobs {
            drop(admitted);
            return Err(self.refuse(Status::resource_exhausted(format!(
                "the daemon already has {} unfinished jobs (max_jobs)",
                daemon.config.max_jobs
            ))));
        }
        Ok(admitted)
    }

    /// Loads a parameter set now (refused while shutting down): whether it
    /// was resident already, and how long the load took.
    pub async fn preload_params(
        &self,
        resolved: request::Resolved,
    ) -> Result<(bool, std::time::Duration), Status> {
        if self.0.draining() {
            return Err(self.refuse(Status::unavailable("the daemon is shutting down")));
        }
        filecoin::check_preload(&self.0.config, &resolved)
            .await
            .map_err(|s| self.refuse(s))?;
        let engine = Arc::clone(&self.0.engine);
        blocking(move || {
            let params = &resolved.params;
            let was = engine.has_params(params);
            let start = std::time::Instant::now();
            match resolved.file {
                Some(file) => engine.preload_params_from(params, file),
                None => engine.preload_params(params),
            }
            .map(|()| (was, start.elapsed()))
        })
        .await?
        .map_err(|e| self.refuse(status_of(&e)))
    }

    async fn submit(&self, req: proto::ProveRequest) -> Result<Arc<Tracked>, Status> {
        let daemon = &self.0;
        let _admitted = self.admit()?;
        if let Some(fc) = req.filecoin.clone() {
            return self.submit_filecoin(req, fc).await;
        }
        let checked = request::check(&daemon.config, &req).map_err(|s| self.refuse(s))?;
        let circuit = checked.spec.to_string();
        let partitions = checked.seeds.len() as u32;
        let engine = Arc::clone(&daemon.engine);
        let handle = blocking(move || {
            // Instances, built when each is synthesized: their memory is
            // then inside the partition's reserved working set, not
            // allocated for every partition at once here.
            let parts = checked
                .seeds
                .iter()
                .map(|&seed| checked.spec.instance(seed))
                .collect();
            let mut request = ProofRequest::new(
                ShapeId(checked.spec.to_string()),
                checked.params.params,
                parts,
            )
            .with_witness(Instance::witness)
            .with_priority(checked.priority);
            if let Some(file) = checked.params.file {
                request = request.with_params_file(file);
            }
            if let Some(rs) = checked.randomness {
                request = request.with_randomness(rs);
            }
            engine.submit(request)
        })
        .await?
        .map_err(|e| self.refuse(status_of(&e)))?;
        tracing::info!(job = handle.id().0, %circuit, partitions, "job submitted");
        Ok(Jobs::track(
            daemon,
            handle,
            circuit,
            partitions,
            JobKind::Builtin,
            Api::Cuzk,
        ))
    }

    /// A Filecoin request: parsed and checked, then its partitions built and
    /// submitted, on blocking threads; its proof verified before the reply
    /// unless the daemon is told not to.
    async fn submit_filecoin(
        &self,
        req: proto::ProveRequest,
        fc: proto::FilecoinProof,
    ) -> Result<Arc<Tracked>, Status> {
        let daemon = &self.0;
        let config = daemon.config.clone();
        let checked = blocking(move || filecoin::check(&config, &req, &fc))
            .await?
            .map_err(|s| self.refuse(s))?;
        filecoin::submit_checked(daemon, checked, Api::Cuzk)
            .await
            .map_err(|s| self.refuse(s))
    }
}

#[tonic::async_trait]
impl Cuzk for Service {
    async fn submit(
        &self,
        req: Request<proto::ProveRequest>,
    ) -> Result<Response<proto::SubmitReply>, Status> {
        let t = Service::submit(self, req.into_inner()).await?;
        Ok(Response::new(proto::SubmitReply { job_id: t.id }))
    }

    type AwaitJobStream = UpdateStream;

    async fn await_job(
        &self,
        req: Request<proto::AwaitRequest>,
    ) -> Result<Response<UpdateStream>, Status> {
        let id = req.into_inner().job_id;
        let t = self.0.jobs.get(id).ok_or_else(|| {
            self.refuse(Status::not_found(format!(
                "no job {id}: never submitted, or its result was already delivered or expired"
            )))
        })?;
        Ok(Response::new(Jobs::stream(&self.0, t, Watcher::Other)))
    }

    type ProveStream = UpdateStream;

    async fn prove(
        &self,
        req: Request<proto::ProveRequest>,
    ) -> Result<Response<UpdateStream>, Status> {
        let t = Service::submit(self, req.into_inner()).await?;
        Ok(Response::new(Jobs::stream(&self.0, t, Watcher::Submitter)))
    }

    async fn cancel(
        &self,
        req: Request<proto::CancelRequest>,
    ) -> Result<Response<proto::CancelReply>, Status> {
        let id = req.into_inner().job_id;
        let found = match self.0.jobs.get(id) {
            Some(t) => {
                t.cancel();
                true
            }
            None => false,
        };
        Ok(Response::new(proto::CancelReply { found }))
    }

    async fn status(
        &self,
        _: Request<proto::StatusRequest>,
    ) -> Result<Response<proto::StatusReply>, Status> {
        let daemon = Arc::clone(&self.0);
        Ok(Response::new(blocking(move || daemon.status()).await?))
    }

    async fn metrics(
        &self,
        _: Request<proto::MetricsRequest>,
    ) -> Result<Response<proto::MetricsReply>, Status> {
        let daemon = Arc::clone(&self.0);
        let text = blocking(move || daemon.metrics.render(&daemon.engine)).await?;
        Ok(Response::new(proto::MetricsReply { text }))
    }

    async fn preload(
        &self,
        req: Request<proto::ParamsRequest>,
    ) -> Result<Response<proto::ParamsReply>, Status> {
        let resolved = request::resolve_params(&self.0.config, req.get_ref().params.as_ref())
            .map_err(|s| self.refuse(s))?;
        let id = resolved.params.to_string();
        let (was, _) = self.preload_params(resolved).await?;
        Ok(Response::new(proto::ParamsReply {
            id,
            was_resident: was,
        }))
    }

    async fn evict(
        &self,
        req: Request<proto::ParamsRequest>,
    ) -> Result<Response<proto::ParamsReply>, Status> {
        let params: ParamsRef =
            request::resolve_params(&self.0.config, req.get_ref().params.as_ref())
                .map_err(|s| self.refuse(s))?
                .params;
        // Off the async threads: freeing a GPU's copy waits for the device.
        let daemon = Arc::clone(&self.0);
        let id = params.to_string();
        let removed = blocking(move || daemon.engine.evict_params(&params))
            .await?
            .map_err(|e| self.refuse(status_of(&e)))?;
        Ok(Response::new(proto::ParamsReply {
            id,
            was_resident: removed,
        }))
    }

    async fn timeline(
        &self,
        req: Request<proto::TimelineRequest>,
    ) -> Result<Response<proto::TimelineReply>, Status> {
        let all = req.into_inner().all;
        let daemon = Arc::clone(&self.0);
        let reply = blocking(move || {
            let mut data = daemon.engine.timeline().snapshot();
            if !all {
                let run = daemon.jobs.run_jobs();
                data.spans.retain(|s| run.contains(&s.job));
            }
            // The latest spans only, so a reply stays within what a client
            // takes (about 150 bytes of JSON a span).
            let dropped = data.spans.len().saturating_sub(MAX_TIMELINE_SPANS);
            data.spans.drain(..dropped);
            proto::TimelineReply {
                chrome_trace_json: data.chrome_trace().to_string(),
                summary_json: serde_json::to_string(&data.summary()).unwrap_or_default(),
                spans: data.spans.len() as u64,
                dropped_spans: dropped as u64,
            }
        })
        .await?;
        Ok(Response::new(reply))
    }

    async fn shutdown(
        &self,
        req: Request<proto::ShutdownRequest>,
    ) -> Result<Response<proto::ShutdownReply>, Status> {
        let cancel = req.into_inner().cancel_running;
        let running = self.0.jobs.unfinished() as u32;
        tracing::info!(cancel, running, "shutdown requested through the API");
        self.0.request_shutdown(cancel);
        Ok(Response::new(proto::ShutdownReply {
            running_jobs: running,
        }))
    }
}

impl Daemon {
    /// The status reply: the engine's snapshot plus the daemon's jobs.
    pub fn status(&self) -> proto::StatusReply {
        let s = self.engine.status();
        let abc = |id: u64| {
            s.jobs
                .iter()
                .find(|j| j.id == id)
                .and_then(|j| j.abc.clone())
                .map(|a| (a.on.to_owned(), a.reason))
                .unwrap_or_default()
        };
        let waiting = |id: u64| {
            s.jobs
                .iter()
                .find(|j| j.id == id)
                .and_then(|j| j.waiting.clone())
        };
        let phase = |id: u64| {
            s.jobs
                .iter()
                .find(|j| j.id == id)
                .map(|j| match j.phase {
                    cuzk_engine::JobPhase::Waiting => "waiting",
                    cuzk_engine::JobPhase::Running => "running",
                    cuzk_engine::JobPhase::Ended => "ended",
                })
                .unwrap_or("ended")
        };
        let now_us = self.engine.timeline().micros(std::time::Instant::now());
        let tracked = self.jobs.all();
        // Unfinished jobs by the device their partitions last ran on.
        let current = |ordinal: usize| -> Vec<u64> {
            tracked
                .iter()
                .filter(|t| !t.ended() && t.timing.last_device() == Some(ordinal))
                .map(|t| t.id)
                .collect()
        };
        let jobs = tracked
            .iter()
            .map(|t| (t, abc(t.id)))
            .map(|(t, (abc, abc_reason))| proto::JobStatus {
                job_id: t.id,
                priority: priority_to_proto(t.priority) as i32,
                circuit: t.circuit.clone(),
                partitions: t.partitions,
                proved: t.proved.load(std::sync::atomic::Ordering::Relaxed),
                state: if t.ended() { "ended" } else { phase(t.id) }.into(),
                abc,
                abc_reason,
                timing: Some(t.timing.report(now_us)),
                waiting: if t.ended() { None } else { waiting(t.id) },
            })
            .collect();
        let m = s.memory;
        let p = s.pinned;
        proto::StatusReply {
            backend: s.config.backend.into(),
            queues: s
                .queues
                .iter()
                .map(|q| proto::QueueStatus {
                    priority: priority_to_proto(q.priority) as i32,
                    waiting_jobs: q.waiting_jobs as u32,
                    admitted_jobs: q.running_jobs as u32,
                    queued_partitions: q.queued_partitions as u32,
                })
                .collect(),
            devices: s
                .devices
                .iter()
                .map(|d| proto::DeviceStatus {
                    ordinal: d.ordinal as u64,
                    workers: d.workers as u32,
                    busy_workers: d.busy_workers as u32,
                    capacity_bytes: d.capacity_bytes,
                    reserved_bytes: d.reserved_bytes,
                    kernel_busy: d.kernel_busy,
                    current_jobs: current(d.ordinal),
                })
                .collect(),
            memory: Some(proto::MemoryStatus {
                budget_bytes: m.budget_bytes,
                pce_bytes: m.pce_bytes,
                params_bytes: m.params_bytes,
                working_set_bytes: m.working_set_bytes,
                pinned_idle_bytes: m.pinned_idle_bytes,
                used_bytes: m.used_bytes,
                available_bytes: m.available_bytes,
            }),
            pinned: Some(proto::PinnedStatus {
                bytes_held: p.bytes_held as u64,
                bytes_leased: p.bytes_leased as u64,
                bytes_idle: p.bytes_idle as u64,
                buffers_held: p.buffers_held as u64,
                leases_outstanding: p.leases_outstanding as u64,
                peak_bytes_held: p.peak_bytes_held as u64,
            }),
            params: s
                .params
                .iter()
                .map(|r| proto::ResidentParams {
                    id: r.id.clone(),
                    bytes: r.bytes,
                    users: r.users as u32,
                })
                .collect(),
            cached_shapes: s.pces.iter().map(|r| r.id.clone()).collect(),
            jobs,
            dispatch_in_flight: s.dispatch_in_flight as u64,
            dispatch_bound: s.dispatch_bound as u64,
            uptime_seconds: self.started.elapsed().as_secs_f64(),
            shutting_down: self.draining(),
            workers_per_device: s.config.workers_per_device as u32,
            synthesis_concurrency: s.config.synthesis_concurrency as u32,
        }
    }
}
