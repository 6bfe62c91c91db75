//! The daemon's jobs: each engine job with the channels its awaiters read,
//! its outcome kept until it is delivered (or expires), and the "run" the
//! timeline call reports.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use cuzk_engine::{JobCanceller, JobHandle, Priority, ProgressStage};
use tokio::sync::{broadcast, mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;

use super::Daemon;
use super::request::status_of;
use super::timing::{Timing, Timings};
use crate::proto;

/// How a job ended, as its awaiters receive it.
pub type Outcome = Result<proto::Proofs, Status>;

/// Checks a Filecoin proof's bytes before the reply: `Ok(true)` when it
/// verifies, `Ok(false)` when it does not, `Err` when it could not be
/// checked. Runs on a blocking thread.
pub type Verifier = Box<dyn FnOnce(&[u8]) -> Result<bool, String> + Send>;

/// What a job proves, for its outcome.
pub enum JobKind {
    /// A built-in circuit: the partition proofs.
    Builtin,
    /// A Filecoin proof: also the bytes filecoin-proofs writes, checked by
    /// the verifier (when the daemon verifies) before they are returned.
    Filecoin(Option<Verifier>),
}

impl std::fmt::Debug for JobKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JobKind::Builtin => f.write_str("Builtin"),
            JobKind::Filecoin(v) => write!(f, "Filecoin(verify: {})", v.is_some()),
        }
    }
}

/// The interface a job was submitted through: each names jobs its own way
/// (`cuzk.v1.ProvingEngine` as `job-<id>` or by request id).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// `cuzk.v1.Cuzk`.
    Cuzk,
    /// Curio's `cuzk.v1.ProvingEngine`.
    Curio,
}

/// One job the daemon tracks.
#[derive(Debug)]
pub struct Tracked {
    pub id: u64,
    pub circuit: String,
    pub priority: Priority,
    pub partitions: u32,
    pub api: Api,
    pub proved: AtomicU32,
    /// Where its time went (from the engine's timeline).
    pub timing: Arc<Timing>,
    canceller: JobCanceller,
    progress: broadcast::Sender<proto::Progress>,
    result: watch::Sender<Option<Outcome>>,
    ended_at: Mutex<Option<Instant>>,
    /// Its awaiter went away: forget it as soon as it ends.
    abandoned: AtomicBool,
}

impl Tracked {
    pub fn cancel(&self) {
        self.canceller.cancel();
    }

    pub fn ended(&self) -> bool {
        self.result.borrow().is_some()
    }

    /// The job's outcome, waiting for it at most `timeout` (`None`: until
    /// it comes); `None` when it has none by then. Unlike [`Jobs::stream`],
    /// this neither takes the outcome away nor cancels the job when the
    /// wait ends first or the caller goes away.
    pub async fn outcome(&self, timeout: Option<Duration>) -> Option<Outcome> {
        let mut rx = self.result.subscribe();
        let wait = async move {
            rx.wait_for(Option::is_some)
                .await
                .ok()
                .and_then(|r| (*r).clone())
        };
        match timeout {
            None => wait.await,
            Some(t) => tokio::time::timeout(t, wait).await.ok().flatten(),
        }
    }

    /// Whether the job ended with its proofs: `None` while it runs.
    pub fn succeeded(&self) -> Option<bool> {
        self.result.borrow().as_ref().map(Result::is_ok)
    }

    fn ended_at(&self) -> Option<Instant> {
        *self.ended_at.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Who reads a job's stream: the call that submitted the job (its
/// disconnect cancels the job) or anyone else watching it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watcher {
    /// `cuzk.v1.Cuzk/Prove`'s own stream.
    Submitter,
    /// `AwaitJob`: a watcher that may leave at any time.
    Other,
}

/// Jobs by id and the current run.
#[derive(Debug, Default)]
pub struct Jobs {
    map: Mutex<HashMap<u64, Arc<Tracked>>>,
    run: Mutex<Run>,
    /// Every job's timing, filled by the engine's timeline.
    pub timings: Timings,
    /// The highest job id tracked so far.
    latest: AtomicU64,
}

/// A run: a stretch of time during which the daemon always had a job.
#[derive(Debug, Default)]
struct Run {
    jobs: BTreeSet<u64>,
    active: usize,
}

impl Jobs {
    fn map(&self) -> MutexGuard<'_, HashMap<u64, Arc<Tracked>>> {
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn run(&self) -> MutexGuard<'_, Run> {
        self.run.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn get(&self, id: u64) -> Option<Arc<Tracked>> {
        self.map().get(&id).cloned()
    }

    pub fn all(&self) -> Vec<Arc<Tracked>> {
        let mut v: Vec<_> = self.map().values().cloned().collect();
        v.sort_by_key(|t| t.id);
        v
    }

    /// Jobs not yet ended.
    pub fn unfinished(&self) -> usize {
        self.map().values().filter(|t| !t.ended()).count()
    }

    pub fn cancel_all(&self) {
        for t in self.all() {
            t.cancel();
        }
    }

    /// The jobs of the current (or last) run.
    pub fn run_jobs(&self) -> BTreeSet<u64> {
        self.run().jobs.clone()
    }

    fn forget(&self, id: u64) {
        self.map().remove(&id);
        self.timings.retain(|j| j != id);
    }

    /// Drops ended jobs whose outcome nobody fetched within `ttl`, and the
    /// timings of jobs no longer tracked (a job not tracked yet, with a
    /// higher id, keeps its timing).
    pub fn expire(&self, ttl: Duration) {
        let now = Instant::now();
        let mut map = self.map();
        map.retain(|_, t| {
            t.ended_at()
                .is_none_or(|at| now.saturating_duration_since(at) < ttl)
        });
        let latest = self.latest.load(Ordering::SeqCst);
        self.timings
            .retain(|id| id > latest || map.contains_key(&id));
    }

    /// Starts tracking a job the engine accepted, and the task that follows
    /// it to its end.
    pub fn track(
        daemon: &Arc<Daemon>,
        mut handle: JobHandle,
        circuit: String,
        partitions: u32,
        kind: JobKind,
        api: Api,
    ) -> Arc<Tracked> {
        let (progress, _) = broadcast::channel(256);
        let (result, _) = watch::channel(None);
        let id = handle.id().0;
        let timing = daemon.jobs.timings.of(id);
        let timeline = daemon.engine.timeline();
        timing.submitted(timeline.micros(Instant::now()));
        let tracked = Arc::new(Tracked {
            id,
            circuit,
            priority: handle.priority(),
            partitions,
            api,
            proved: AtomicU32::new(0),
            timing,
            canceller: handle.canceller(),
            progress,
            result,
            ended_at: Mutex::new(None),
            abandoned: AtomicBool::new(false),
        });
        daemon.jobs.map().insert(tracked.id, Arc::clone(&tracked));
        daemon.jobs.latest.fetch_max(tracked.id, Ordering::SeqCst);
        {
            let mut run = daemon.jobs.run();
            if run.active == 0 {
                run.jobs.clear();
            }
            run.active += 1;
            run.jobs.insert(tracked.id);
        }
        let (daemon, t) = (Arc::clone(daemon), Arc::clone(&tracked));
        let mut events = handle.take_events();
        let started = Instant::now();
        tokio::spawn(async move {
            let wait = handle.wait();
            tokio::pin!(wait);
            let forward = |t: &Tracked, e: cuzk_engine::ProgressEvent| {
                let stage = match e.stage {
                    ProgressStage::Admitted => "admitted",
                    ProgressStage::SynthesisStarted => "synthesis_started",
                    ProgressStage::Synthesized => "synthesized",
                    ProgressStage::ProvingStarted => "proving_started",
                    ProgressStage::Proved => {
                        t.proved.fetch_add(1, Ordering::Relaxed);
                        "proved"
                    }
                    // The outcome says these.
                    _ => return,
                };
                // No receiver is fine: nobody awaits yet.
                let _ = t.progress.send(proto::Progress {
                    partition: e.partition,
                    stage: stage.into(),
                    partitions: t.partitions,
                    proved: t.proved.load(Ordering::Relaxed),
                });
            };
            let result = loop {
                tokio::select! {
                    biased;
                    e = async { events.as_mut()?.recv().await }, if events.is_some() => match e {
                        Some(e) => forward(&t, e),
                        None => events = None,
                    },
                    r = &mut wait => break r,
                }
            };
            if let Some(ev) = events.as_mut() {
                while let Ok(e) = ev.try_recv() {
                    forward(&t, e);
                }
            }
            let took = started.elapsed();
            let (outcome, label) = match result {
                Ok(proofs) => {
                    let bytes: Vec<Vec<u8>> = proofs
                        .iter()
                        .map(|p| {
                            let mut v = Vec::with_capacity(192);
                            // Writing into a Vec cannot fail.
                            let _ = p.write(&mut v);
                            v
                        })
                        .collect();
                    let reply = proto::Proofs {
                        seconds: took.as_secs_f64(),
                        timing: Some(
                            t.timing
                                .report(daemon.engine.timeline().micros(Instant::now())),
                        ),
                        ..proto::Proofs::default()
                    };
                    match kind {
                        JobKind::Builtin => (
                            Ok(proto::Proofs {
                                proofs: bytes,
                                ..reply
                            }),
                            "done",
                        ),
                        JobKind::Filecoin(verifier) => {
                            let proof = bytes.concat();
                            let checked = match verifier {
                                None => Ok((false, 0.0)),
                                Some(verify) => {
                                    let (circuit, metrics) =
                                        (t.circuit.clone(), Arc::clone(&daemon.metrics));
                                    let proof = proof.clone();
                                    tokio::task::spawn_blocking(move || {
                                        let start = Instant::now();
                                        let verdict = verify(&proof);
                                        let secs = start.elapsed();
                                        metrics.verified(
                                            &circuit,
                                            matches!(verdict, Ok(true)),
                                            secs,
                                        );
                                        verdict.map(|ok| (ok, secs.as_secs_f64()))
                                    })
                                    .await
                                    .unwrap_or_else(|e| Err(format!("the verifier failed: {e}")))
                                    .and_then(|(ok, secs)| {
                                        if ok {
                                            Ok((true, secs))
                                        } else {
                                            Err("it does not verify; it is not returned".into())
                                        }
                                    })
                                }
                            };
                            match checked {
                                Ok((verified, verify_seconds)) => (
                                    Ok(proto::Proofs {
                                        proofs: bytes,
                                        proof,
                                        verified,
                                        verify_seconds,
                                        ..reply
                                    }),
                                    "done",
                                ),
                                Err(why) => {
                                    tracing::error!(
                                        job = t.id,
                                        circuit = %t.circuit,
                                        %why,
                                        "a proof failed verification"
                                    );
                                    (
                                        Err(Status::internal(format!(
                                            "job {}: the {} proof failed verification: {why}",
                                            t.id, t.circuit
                                        ))),
                                        "failed",
                                    )
                                }
                            }
                        }
                    }
                }
                Err(e) => {
                    let label = match e {
                        cuzk_engine::EngineError::Cancelled { .. } => "cancelled",
                        _ => "failed",
                    };
                    (Err(status_of(&e)), label)
                }
            };
            daemon
                .metrics
                .job_ended(&t.circuit, t.priority, label, t.partitions, took);
            *t.ended_at.lock().unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
            t.result.send_replace(Some(outcome));
            if t.abandoned.load(Ordering::SeqCst) {
                daemon.jobs.forget(t.id);
            }
            let mut run = daemon.jobs.run();
            run.active = run.active.saturating_sub(1);
            drop(run);
            daemon.changed.notify_waiters();
        });
        tracked
    }

    /// A stream of the job's progress, then its proofs (or its error). If
    /// the submitter's stream ([`Watcher::Submitter`]) is dropped before the
    /// outcome is sent (the client went away), the job is cancelled; a
    /// watcher's stream ([`Watcher::Other`], `AwaitJob`) never cancels it.
    pub fn stream(
        daemon: &Arc<Daemon>,
        t: Arc<Tracked>,
        who: Watcher,
    ) -> ReceiverStream<Result<proto::JobUpdate, Status>> {
        let (tx, rx) = mpsc::channel(64);
        let daemon = Arc::clone(daemon);
        tokio::spawn(async move {
            let mut progress = t.progress.subscribe();
            let mut result = t.result.subscribe();
            let id = t.id;
            let abandon = |t: &Tracked| {
                if who == Watcher::Other {
                    // Someone watching: the job is not theirs to end.
                    return;
                }
                if !t.ended() {
                    tracing::info!(job = t.id, "the client went away: cancelling its job");
                    t.abandoned.store(true, Ordering::SeqCst);
                    t.cancel();
                }
                if t.ended() {
                    daemon.jobs.forget(t.id);
                }
            };
            loop {
                let outcome = result.borrow_and_update().clone();
                if let Some(outcome) = outcome {
                    let update = outcome.map(|proofs| proto::JobUpdate {
                        job_id: id,
                        update: Some(proto::job_update::Update::Proofs(proofs)),
                    });
                    // Delivered or not, the submitter's outcome is gone
                    // from here; for watchers it stays (result_ttl_s), so
                    // a monitor never takes it from the submitter.
                    let _ = tx.send(update).await;
                    if who == Watcher::Submitter {
                        daemon.jobs.forget(id);
                    }
                    return;
                }
                tokio::select! {
                    biased;
                    _ = tx.closed() => return abandon(&t),
                    r = result.changed() => if r.is_err() { return },
                    p = progress.recv() => match p {
                        Ok(p) => {
                            let update = proto::JobUpdate {
                                job_id: id,
                                update: Some(proto::job_update::Update::Progress(p)),
                            };
                            if tx.send(Ok(update)).await.is_err() {
                                return abandon(&t);
                            }
                        }
                        // A slow reader misses progress, never the outcome.
                        Err(broadcast::error::RecvError::Lagged(_)) => {}
                        Err(broadcast::error::RecvError::Closed) => {
                            if result.changed().await.is_err() {
                                return;
                            }
                        }
                    },
                }
            }
        });
        ReceiverStream::new(rx)
    }
}
