//! A snapshot of the whole engine for operators (a daemon's status call, a
//! metrics scrape): jobs and queues per priority, workers per device, the
//! budget, the pinned pool, what is resident.

use super::*;

/// Where a job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum JobPhase {
    /// Waiting for admission (its PCE, parameters and one working set).
    Waiting,
    /// Admitted: its partitions queue, synthesize and prove (or, parked,
    /// wait to get their parameters back: see [`JobStatus::waiting`]).
    Running,
    /// Ended (finished, failed or cancelled); its handle has not been
    /// waited on yet.
    Ended,
}

/// One job of [`EngineStatus::jobs`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobStatus {
    pub id: u64,
    #[serde(serialize_with = "priority_name")]
    pub priority: Priority,
    pub shape: String,
    pub params: String,
    pub partitions: u32,
    pub proved: usize,
    /// Partitions in the engine's queue (not yet synthesizing).
    pub queued: u32,
    pub phase: JobPhase,
    /// Where its a/b/c are evaluated (`gpu` or `host`) and why; none before
    /// its first partition is synthesized.
    pub abc: Option<AbcStatus>,
    /// Why it is not running now, in words: "admission: queued behind job
    /// 7 (high)", "admission: waiting for 48.1 GiB of host memory",
    /// "loading parameters", "yielding: ...", "parked: parameters yielded
    /// to job 9 (high)", "reloading parameters"; `None` while it runs.
    pub waiting: Option<String>,
}

/// [`JobStatus::abc`]: the engine's per-job choice of where a/b/c = A·w,
/// B·w, C·w are computed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AbcStatus {
    /// `gpu` (from the PCE resident in device memory) or `host` (SpMV).
    pub on: &'static str,
    pub reason: String,
}

/// One priority class of [`EngineStatus::queues`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueStatus {
    #[serde(serialize_with = "priority_name")]
    pub priority: Priority,
    pub waiting_jobs: usize,
    pub running_jobs: usize,
    pub queued_partitions: usize,
}

/// One device of [`EngineStatus::devices`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceStatus {
    pub ordinal: usize,
    pub workers: usize,
    pub busy_workers: usize,
    pub capacity_bytes: u64,
    /// Device memory reserved now (running items, standing reservations
    /// and what the prover holds across proofs).
    pub reserved_bytes: u64,
    /// Of it, what the prover holds across proofs (resident parameters,
    /// device PCEs), given back when it is in the way of a partition.
    pub held_bytes: u64,
    /// Whether a partition is in the device's kernel region now.
    pub kernel_busy: bool,
}

/// A resident parameter set or cached PCE.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResidentStatus {
    pub id: String,
    /// Bytes charged to the budget for it.
    pub bytes: u64,
    /// Jobs holding it now (0: idle, evictable).
    pub users: usize,
}

/// The pinned pool's figures that matter to an operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PinnedStatus {
    pub bytes_held: usize,
    pub bytes_leased: usize,
    pub bytes_idle: usize,
    pub buffers_held: usize,
    pub leases_outstanding: usize,
    pub peak_bytes_held: usize,
    pub allocations: u64,
    pub reuses: u64,
}

impl From<PoolStats> for PinnedStatus {
    fn from(p: PoolStats) -> Self {
        PinnedStatus {
            bytes_held: p.bytes_held,
            bytes_leased: p.bytes_leased,
            bytes_idle: p.bytes_idle,
            buffers_held: p.buffers_held,
            leases_outstanding: p.leases_outstanding,
            peak_bytes_held: p.peak_bytes_held,
            allocations: p.allocations,
            reuses: p.reuses,
        }
    }
}

/// Everything [`Engine::status`] reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EngineStatus {
    pub config: ResolvedConfig,
    /// Live jobs in id (submission) order.
    pub jobs: Vec<JobStatus>,
    /// One entry per priority class, highest first.
    pub queues: Vec<QueueStatus>,
    pub devices: Vec<DeviceStatus>,
    pub memory: MemoryReport,
    pub pinned: PinnedStatus,
    pub params: Vec<ResidentStatus>,
    pub pces: Vec<ResidentStatus>,
    pub dispatch_in_flight: usize,
    pub dispatch_bound: usize,
}

fn priority_name<S: serde::Serializer>(p: &Priority, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.collect_str(p)
}

/// The priority classes, highest first.
pub const PRIORITIES: [Priority; 4] = [
    Priority::Critical,
    Priority::High,
    Priority::Normal,
    Priority::Low,
];

impl Engine {
    /// A snapshot of jobs, queues, devices, memory and residency. Each part
    /// is read under its own lock, so parts may be a moment apart.
    pub fn status(&self) -> EngineStatus {
        let shared = &*self.shared;
        let live: Vec<Arc<JobState>> = {
            let st = shared.lock();
            st.jobs.iter().filter_map(Weak::upgrade).collect()
        };
        let mut jobs: Vec<JobStatus> = live
            .iter()
            .map(|job| {
                let st = job.lock();
                let phase = if st.finished {
                    JobPhase::Ended
                } else if st.pce.is_some() || (st.parked.is_some() && !st.terminated) {
                    JobPhase::Running
                } else if st.terminated {
                    JobPhase::Ended
                } else {
                    JobPhase::Waiting
                };
                JobStatus {
                    id: job.id.0,
                    priority: job.priority,
                    shape: job.shape.to_string(),
                    params: job.params_ref.to_string(),
                    partitions: job.partitions,
                    proved: st.proved,
                    queued: st.queued,
                    phase,
                    abc: st.abc.as_ref().map(|p| AbcStatus {
                        on: if p.on_device { "gpu" } else { "host" },
                        reason: p.reason.clone(),
                    }),
                    waiting: waiting_reason(shared, job, &st),
                }
            })
            .collect();
        jobs.sort_by_key(|j| j.id);
        let queued_by_priority: Vec<(Priority, usize)> = {
            let st = shared.lock();
            PRIORITIES
                .iter()
                .map(|&p| {
                    let n = st.queue.keys().filter(|(Reverse(q), _, _)| *q == p).count();
                    (p, n)
                })
                .collect()
        };
        let queues = queued_by_priority
            .into_iter()
            .map(|(priority, queued_partitions)| {
                let of = |phase| {
                    jobs.iter()
                        .filter(|j| j.priority == priority && j.phase == phase)
                        .count()
                };
                QueueStatus {
                    priority,
                    waiting_jobs: of(JobPhase::Waiting),
                    running_jobs: of(JobPhase::Running),
                    queued_partitions,
                }
            })
            .collect();
        let snapshot = shared.scheduler.snapshot();
        let devices = snapshot
            .devices
            .iter()
            .map(|d| DeviceStatus {
                ordinal: d.ordinal,
                workers: shared.config.workers_per_device,
                busy_workers: d.busy_workers,
                capacity_bytes: d.capacity_bytes,
                reserved_bytes: d.item_bytes + d.standing_bytes + d.held_bytes,
                held_bytes: d.held_bytes,
                kernel_busy: d.kernel.is_some(),
            })
            .collect();
        let resident = |entries: Vec<(String, u64, usize)>| {
            let mut v: Vec<ResidentStatus> = entries
                .into_iter()
                .map(|(id, bytes, users)| ResidentStatus { id, bytes, users })
                .collect();
            v.sort_by(|a, b| a.id.cmp(&b.id));
            v
        };
        EngineStatus {
            config: shared.config.clone(),
            jobs,
            queues,
            devices,
            memory: shared.budget.report(),
            pinned: shared.pool.stats().into(),
            params: resident(shared.params.entries(|k| k.to_string())),
            pces: resident(shared.pces.entries(|k| k.to_string())),
            dispatch_in_flight: shared.bound.in_flight(),
            dispatch_bound: shared.bound.bound(),
        }
    }
}
