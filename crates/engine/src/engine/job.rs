//! A job: the request, its state under one lock, the caller's handle, and
//! one partition's work from synthesis through the three phases.

use super::*;

/// A proof request: one or more circuits of one shape, proved as the
/// partitions of one job with one parameter set and one priority.
#[derive(Debug, Clone)]
pub struct ProofRequest<C> {
    /// The circuits' shape; its PCE is recorded from the first partition
    /// the first time the shape is seen, or loaded from the PCE directory.
    pub shape: ShapeId,
    pub params: ParamsRef,
    /// The partitions, proved in any order, returned in this order.
    pub partitions: Vec<C>,
    pub priority: Priority,
    /// (r, s) per partition; drawn from the OS's RNG when `None`.
    pub randomness: Option<Vec<(Scalar, Scalar)>>,
    /// `params`' file, already open: read from this handle (not opened
    /// again by its path) if the set is not resident when the job is
    /// admitted.
    pub params_file: Option<Arc<std::fs::File>>,
    /// How a partition's witness is synthesized, given the sizes the PCE
    /// says it has (to reserve): [`Witness::synthesize_with_capacity`]
    /// unless the circuit has a faster way (see
    /// [`ProofRequest::with_witness`]).
    pub witness: WitnessWith<C>,
}

/// Synthesizes a circuit's witness; the arguments after the circuit are the
/// number of inputs and aux values its PCE has.
pub type WitnessWith<C> = fn(C, usize, usize) -> std::result::Result<Witness, SynthError>;

impl<C: Circuit<Scalar>> ProofRequest<C> {
    /// A NORMAL-priority request with fresh randomness.
    pub fn new(
        shape: impl Into<ShapeId>,
        params: impl Into<ParamsRef>,
        partitions: Vec<C>,
    ) -> Self {
        ProofRequest {
            shape: shape.into(),
            params: params.into(),
            partitions,
            priority: Priority::Normal,
            randomness: None,
            params_file: None,
            witness: Witness::synthesize_with_capacity::<C>,
        }
    }

    /// Synthesizes each partition's witness with `witness` instead of
    /// running the circuit on the engine's witness system: for circuits
    /// that can synthesize parts of themselves in parallel. `witness` must
    /// give exactly the values [`Witness::synthesize_with_capacity`] gives
    /// (the engine checks the result against the PCE's row by row before
    /// proving, so a wrong witness is an error, never a wrong proof).
    pub fn with_witness(mut self, witness: WitnessWith<C>) -> Self {
        self.witness = witness;
        self
    }

    /// Reads the parameter file from `file` (opened by the caller, e.g.
    /// after checking where it is) rather than opening its path again.
    pub fn with_params_file(mut self, file: std::fs::File) -> Self {
        self.params_file = Some(Arc::new(file));
        self
    }

    /// Sets the priority class.
    pub fn with_priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }

    /// Sets (r, s) for every partition, in partition order.
    pub fn with_randomness(mut self, randomness: Vec<(Scalar, Scalar)>) -> Self {
        self.randomness = Some(randomness);
        self
    }
}

/// Where a job or partition is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProgressStage {
    /// The job's PCE, parameters and reserved working set are in memory.
    Admitted,
    /// A partition's witness synthesis started.
    SynthesisStarted,
    /// A partition's a/b/c are evaluated and checked; it waits for a worker.
    Synthesized,
    /// A worker started a partition (prep, then the kernel region).
    ProvingStarted,
    /// A partition's proof is made.
    Proved,
    /// The job ended with all its proofs.
    Finished,
    /// The job failed; the message is its error.
    Failed(String),
    /// The job was cancelled.
    Cancelled,
}

/// A progress event of one job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProgressEvent {
    pub job: u64,
    /// `None` for job-level events.
    pub partition: Option<u32>,
    pub stage: ProgressStage,
    /// Since the engine started.
    pub at: Duration,
}

/// How far a job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct JobProgress {
    pub partitions: u32,
    pub proved: usize,
    pub finished: bool,
}

/// A partition's witness, given the counts and whether to work on a copy of
/// its circuit. With a copy it is callable again after it returned
/// [`SynthError::Yielded`] (the circuit is still there); after any other
/// outcome, or without a copy, the circuit is gone.
pub(super) type WitnessFn = Box<dyn Fn(usize, usize, bool) -> Result<Witness, SynthError> + Send>;
pub(super) type RecordFn = Box<dyn Fn() -> Result<Pce> + Send>;
pub(super) type JobResult = Result<Vec<Proof<Bls12>>>;

/// What an admitted job holds and how far it is; under the job's lock.
pub(super) struct JobMut {
    pub(super) gpu: Option<GpuJob>,
    pub(super) terminated: bool,
    pub(super) cancelled: bool,
    pub(super) finished: bool,
    pub(super) error: Option<EngineError>,
    pub(super) proofs: Vec<Option<Proof<Bls12>>>,
    pub(super) proved: usize,
    /// Partitions not yet submitted to the scheduler nor dropped.
    pub(super) to_dispatch: u32,
    /// Partitions in the engine's queue.
    pub(super) queued: u32,
    /// The working set reserved at admission, when no partition uses it:
    /// what guarantees an admitted job can always run one partition. It
    /// keeps the a/b/c buffers of the partition that returned it, so they
    /// are charged once (here) and reused by the next partition.
    pub(super) spare: Option<(Charge, Option<AbcBuffers>)>,
    pub(super) ws_bytes: u64,
    pub(super) pce: Option<Arc<Pce>>,
    pub(super) params: Option<Arc<Parameters<Bls12>>>,
    pub(super) result: Option<oneshot::Sender<JobResult>>,
    /// Where its partitions' a/b/c were last evaluated, and why.
    pub(super) abc: Option<AbcPlacement>,
    /// Partitions taken from the queue whose work is not yet dropped
    /// (synthesizing, waiting for a worker, proving): see [`Flight`].
    pub(super) in_flight: u32,
    /// Set while the job has given its parameters and PCE up to a
    /// higher-priority admission (see `park`).
    pub(super) parked: Option<Parked>,
    /// What the job waits for now, for the status.
    pub(super) wait: Wait,
    /// Its PCE's bytes once admitted (0 before): charged ahead if the PCE
    /// must be recorded again after a park.
    pub(super) pce_bytes: u64,
    /// Since when its next partition has waited for a working set the
    /// host budget had no room for, and the budget then (the timeline's
    /// `budget_wait` span of the partition that gets one).
    pub(super) budget_wait: Option<(Instant, MemoryReport)>,
}

pub(crate) struct JobState {
    pub(super) id: JobId,
    pub(super) priority: Priority,
    /// Its place among jobs of its priority waiting for admission
    /// ([`Admission::arrive`](super::admission::Admission::arrive)).
    pub(super) arrival: u64,
    pub(super) shape: ShapeId,
    pub(super) params_ref: ParamsRef,
    /// The parameter file opened by the submitter, read from if the set is
    /// not resident at admission.
    pub(super) params_file: Option<Arc<std::fs::File>>,
    pub(super) partitions: u32,
    pub(super) randomness: Vec<(Scalar, Scalar)>,
    pub(super) token: CancelToken,
    pub(super) signal: Arc<Signal>,
    pub(super) timeline: Arc<Timeline>,
    pub(super) events: mpsc::UnboundedSender<ProgressEvent>,
    pub(super) shared: Weak<Shared>,
    pub(super) st: Mutex<JobMut>,
}

impl JobState {
    pub(super) fn lock(&self) -> MutexGuard<'_, JobMut> {
        self.st.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn is_terminated(&self) -> bool {
        self.lock().terminated
    }

    pub(super) fn event(&self, partition: Option<u32>, stage: ProgressStage) {
        // A receiver that is gone is fine: nobody is listening.
        let _ = self.events.send(ProgressEvent {
            job: self.id.0,
            partition,
            stage,
            at: self.timeline.elapsed(),
        });
    }

    /// Ends the job early: with `error` (the first one wins), or cancelled.
    /// Queued partitions are dropped, the scheduler drops its queued items,
    /// and running ones stop at their next phase boundary.
    pub(super) fn terminate(&self, error: Option<EngineError>) {
        let spare = {
            let mut st = self.lock();
            if st.terminated {
                return;
            }
            st.terminated = true;
            match error {
                Some(e) => {
                    tracing::warn!(job = self.id.0, error = %e, "job failed");
                    st.error = Some(e);
                }
                None => st.cancelled = true,
            }
            st.spare.take()
        };
        if let Some(spare) = spare {
            release(spare);
        }
        self.token.cancel();
        if let Some(shared) = self.shared.upgrade() {
            shared.remove_queued(self);
        }
        self.signal.bump();
    }

    pub(super) fn deliver(&self, partition: u32, proof: Proof<Bls12>) {
        {
            let mut st = self.lock();
            if st.terminated {
                return;
            }
            if let Some(slot) = st.proofs.get_mut(partition as usize) {
                *slot = Some(proof);
                st.proved += 1;
            }
        }
        self.event(Some(partition), ProgressStage::Proved);
    }

    pub(super) fn dispatched_one(&self) {
        {
            let mut st = self.lock();
            st.to_dispatch = st.to_dispatch.saturating_sub(1);
        }
        self.signal.bump();
    }

    pub(super) fn statics(&self) -> Option<(Arc<Pce>, Arc<Parameters<Bls12>>)> {
        let st = self.lock();
        Some((
            Arc::clone(st.pce.as_ref()?),
            Arc::clone(st.params.as_ref()?),
        ))
    }

    pub(super) fn gpu_job(&self) -> Option<GpuJob> {
        self.lock().gpu.clone()
    }

    /// Sends the result once everything the job held is released.
    pub(super) fn finish(&self, gpu: Option<std::result::Result<JobSummary, GpuSchedError>>) {
        let (sender, result, held) = {
            let mut st = self.lock();
            st.terminated = true;
            st.finished = true;
            let spare = st.spare.take();
            let held = (st.pce.take(), st.params.take(), st.gpu.take());
            let result = if let Some(e) = st.error.take() {
                Err(e)
            } else if st.cancelled {
                Err(EngineError::Cancelled { job: self.id })
            } else if let Some(Err(e)) = gpu {
                Err(EngineError::Scheduler(e))
            } else {
                let proofs: Vec<Proof<Bls12>> =
                    st.proofs.iter_mut().filter_map(Option::take).collect();
                let missing = self.partitions as usize - proofs.len();
                if missing == 0 {
                    Ok(proofs)
                } else {
                    Err(EngineError::Incomplete {
                        job: self.id,
                        missing,
                    })
                }
            };
            (st.result.take(), result, (spare, held))
        };
        let (spare, held) = held;
        if let Some(spare) = spare {
            release(spare);
        }
        drop(held);
        self.signal.bump();
        self.event(
            None,
            match &result {
                Ok(_) => ProgressStage::Finished,
                Err(EngineError::Cancelled { .. }) => ProgressStage::Cancelled,
                Err(e) => ProgressStage::Failed(e.to_string()),
            },
        );
        if let Some(sender) = sender {
            let _ = sender.send(result);
        }
    }
}

/// A partition's working-set charge and, once leased, its a/b/c buffers
/// (which the charge covers). When dropped both go back to the job as its
/// reserved working set if the job still has queued partitions and none
/// reserved, else the charge goes back to the budget and the buffers to the
/// pool.
pub(super) struct WsCharge {
    pub(super) charge: Option<Charge>,
    pub(super) abc: Option<AbcBuffers>,
    pub(super) job: Arc<JobState>,
}

impl Drop for WsCharge {
    fn drop(&mut self) {
        let Some(charge) = self.charge.take() else {
            return;
        };
        let abc = self.abc.take();
        let back = {
            let mut st = self.job.lock();
            if !st.terminated && st.queued > 0 && st.spare.is_none() && st.parked.is_none() {
                st.spare = Some((charge, abc));
                None
            } else {
                Some((charge, abc))
            }
        };
        if let Some(reserved) = back {
            release(reserved);
        }
        self.job.signal.bump();
    }
}

/// Drops a working set: the charge and the buffers (which go idle in the
/// pinned pool) in one step of the budget, so their bytes are never counted
/// twice nor missed.
pub(super) fn release((charge, abc): (Charge, Option<AbcBuffers>)) {
    charge.release_with(move || drop(abc));
}

/// a, b and c of one partition in pinned (or fallback) buffers.
pub(super) struct AbcBuffers {
    pub(super) a: Lease,
    pub(super) b: Lease,
    pub(super) c: Lease,
}

impl AbcBuffers {
    pub(super) fn lease(pool: &Pool, n: usize) -> std::result::Result<Self, PinnedError> {
        let request = || Request::elems::<Scalar>(n);
        Ok(AbcBuffers {
            a: pool.lease(request())?,
            b: pool.lease(request())?,
            c: pool.lease(request())?,
        })
    }

    /// The three buffers from idle ones of the pool, or `None` (nothing
    /// taken) unless it holds three of their size class: a working set
    /// charged with them takes over buffers the budget counts as idle,
    /// instead of having them freed to make room and page-locked anew
    /// (seconds for a large partition, stalling the driver meanwhile).
    pub(super) fn reuse(pool: &Pool, n: usize) -> Option<Self> {
        let request = Request::elems::<Scalar>(n);
        Some(AbcBuffers {
            a: pool.reuse(&request)?,
            b: pool.reuse(&request)?,
            c: pool.reuse(&request)?,
        })
    }

    #[allow(clippy::type_complexity)]
    pub(super) fn slices(
        &self,
    ) -> std::result::Result<(&[Scalar], &[Scalar], &[Scalar]), PinnedError> {
        // SAFETY: `Scalar` is blst's `[u64; 4]` Montgomery form behind
        // `repr(transparent)`: no padding, no pointers, no `Drop`, alignment
        // 8 (at most the pool's page alignment), and every bit pattern is a
        // value (a non-canonical one would only be wrong arithmetic). The
        // SpMV writes every element before anything reads them.
        unsafe {
            Ok((
                self.a.as_slice_of_unchecked()?,
                self.b.as_slice_of_unchecked()?,
                self.c.as_slice_of_unchecked()?,
            ))
        }
    }

    #[allow(clippy::type_complexity)]
    pub(super) fn slices_mut(
        &mut self,
    ) -> std::result::Result<(&mut [Scalar], &mut [Scalar], &mut [Scalar]), PinnedError> {
        // SAFETY: as in `slices`; the three leases are distinct buffers.
        unsafe {
            Ok((
                self.a.as_mut_slice_of_unchecked()?,
                self.b.as_mut_slice_of_unchecked()?,
                self.c.as_mut_slice_of_unchecked()?,
            ))
        }
    }
}

/// One synthesized partition, from synthesis through the three phases.
pub(super) struct PartitionWork {
    pub(super) job: Arc<JobState>,
    pub(super) partition: u32,
    pub(super) pce: Arc<Pce>,
    pub(super) params: Arc<Parameters<Bls12>>,
    pub(super) provers: Arc<super::Provers>,
    pub(super) timeline: Arc<Timeline>,
    pub(super) witness: Witness,
    /// Holds the a/b/c buffers (`Some` between synthesis and the epilogue
    /// unless the backend evaluates a/b/c itself).
    pub(super) ws: WsCharge,
    /// The backend evaluates a/b/c on its device ([`AbcInput::FromPce`]).
    pub(super) abc_on_device: bool,
    /// Counts the partition as ready (synthesized, no worker yet) from its
    /// submission until a worker starts its prep.
    pub(super) ready: Option<super::ReadySlot>,
    /// Counts the partition in flight; last, so that it is dropped after
    /// `pce` and `params` when the work is dropped whole.
    pub(super) _flight: Flight,
}

/// Error text for the scheduler; the job keeps the typed error.
pub(super) fn phase_error(e: &EngineError) -> PhaseError {
    e.to_string().into()
}

impl PartitionWork {
    pub(super) fn fail(&self, stage: &'static str, source: Groth16Error) -> PhaseError {
        let e = EngineError::PartitionProve {
            job: self.job.id,
            partition: self.partition,
            stage,
            source,
        };
        let out = phase_error(&e);
        self.job.terminate(Some(e));
        out
    }

    pub(super) fn pinned_fail(&self, source: PinnedError) -> PhaseError {
        let e = EngineError::Pinned {
            job: self.job.id,
            partition: self.partition,
            source,
        };
        let out = phase_error(&e);
        self.job.terminate(Some(e));
        out
    }

    pub(super) fn input(&self) -> std::result::Result<ProverInput<'_>, PhaseError> {
        if self.abc_on_device {
            return Ok(ProverInput {
                pce: &self.pce,
                witness: &self.witness,
                abc: AbcInput::FromPce,
            });
        }
        let Some(abc) = &self.ws.abc else {
            let e = EngineError::Internal("a partition lost its a/b/c buffers".into());
            let out = phase_error(&e);
            self.job.terminate(Some(e));
            return Err(out);
        };
        let (a, b, c) = abc.slices().map_err(|e| self.pinned_fail(e))?;
        Ok(ProverInput {
            pce: &self.pce,
            witness: &self.witness,
            abc: AbcInput::Evaluated { a, b, c },
        })
    }

    pub(super) fn at(&self, ctx: &WorkerContext) -> (u64, u32, Lane, usize) {
        (
            self.job.id.0,
            self.partition,
            Lane::Device(ctx.ordinal()),
            ctx.worker(),
        )
    }

    pub(super) fn into_phases(self) -> Phases {
        Phases::new(
            |ctx: &WorkerContext| {
                let mut work = self;
                // Taken by a worker: no longer ready.
                drop(work.ready.take());
                let start = Instant::now();
                let (job, partition) = (work.job.id.0, work.partition);
                let _s = tracing::info_span!("prep", job, partition).entered();
                work.job
                    .event(Some(partition), ProgressStage::ProvingStarted);
                let mut timings = StageTimings::default();
                let staged = work.provers.get(ctx.ordinal()).prepare(
                    work.input()?,
                    &work.params,
                    &mut timings,
                );
                // A PCE it put on the device is held from now on (also when
                // the partition failed after the upload).
                work.provers.account(ctx.ordinal(), ctx.device_memory());
                let staged = staged.map_err(|e| work.fail("prepare", e))?;
                if staged.holds_witness() {
                    // On the device now: the host copy (4.2 GB for a 32 GiB
                    // PoRep partition) is freed before the kernel region
                    // rather than after it. Its working-set charge stays
                    // until the epilogue.
                    drop(std::mem::take(&mut work.witness));
                }
                let (j, p, lane, w) = work.at(ctx);
                work.timeline
                    .record_since(j, p, lane, w, crate::timeline::PREP, start);
                work.timeline
                    .record_substages((j, p, lane, w), start, &timings.0);
                Ok((work, staged))
            },
            |ctx: &WorkerContext, (work, staged): (PartitionWork, Staged)| {
                let start = Instant::now();
                let (job, partition) = (work.job.id.0, work.partition);
                let _s = tracing::info_span!("kernel_region", job, partition).entered();
                let mut timings = StageTimings::default();
                let msm = work.provers.get(ctx.ordinal()).kernel_region(
                    work.input()?,
                    &work.params,
                    staged,
                    &mut timings,
                );
                // Parameters it made resident are held from now on (also
                // when the partition failed after the upload).
                work.provers.account(ctx.ordinal(), ctx.device_memory());
                let msm = msm.map_err(|e| work.fail("kernel region", e))?;
                let (j, p, lane, w) = work.at(ctx);
                work.timeline
                    .record_since(j, p, lane, w, KERNEL_REGION, start);
                work.timeline
                    .record_substages((j, p, lane, w), start, &timings.0);
                work.timeline
                    .record_overlapped((j, p, lane, w), start, timings.overlapped());
                Ok((work, msm))
            },
            |ctx: &WorkerContext, (work, msm): (PartitionWork, MsmResults)| {
                let start = Instant::now();
                let at = work.at(ctx);
                let PartitionWork {
                    job,
                    partition,
                    params,
                    timeline,
                    witness,
                    ws,
                    pce,
                    ..
                } = work;
                let _s = tracing::info_span!("assemble", job = job.id.0, partition).entered();
                // The working set is free once the kernel region is done:
                // release it before the CPU epilogue, so the next synthesis
                // can start.
                drop((witness, ws, pce));
                let Some(&(r, s)) = job.randomness.get(partition as usize) else {
                    let e =
                        EngineError::Internal(format!("no randomness for partition {partition}"));
                    let out = phase_error(&e);
                    job.terminate(Some(e));
                    return Err(out);
                };
                let proof =
                    cuzk_groth16_cuda::assemble(&params.vk, &msm, r, s).map_err(|source| {
                        let e = EngineError::PartitionProve {
                            job: job.id,
                            partition,
                            stage: "assemble",
                            source,
                        };
                        let out = phase_error(&e);
                        job.terminate(Some(e));
                        out
                    })?;
                job.deliver(partition, proof);
                timeline.record_since(at.0, at.1, at.2, at.3, EPILOGUE, start);
                // The hold on the parameters ends before the partition stops
                // counting in flight (`_flight`, dropped with the rest of
                // `work` after this): a job that parks then leaves them idle.
                drop(params);
                Ok(())
            },
        )
    }
}

/// The caller's side of a job: progress, cancellation, the proofs.
#[derive(Debug)]
pub struct JobHandle {
    pub(super) job: Arc<JobState>,
    pub(super) result: oneshot::Receiver<JobResult>,
    pub(super) events: Option<mpsc::UnboundedReceiver<ProgressEvent>>,
}

impl fmt::Debug for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Job")
            .field("id", &self.id)
            .field("priority", &self.priority)
            .field("shape", &self.shape)
            .field("partitions", &self.partitions)
            .finish_non_exhaustive()
    }
}

/// Cancels a job from anywhere (cheap to clone).
#[derive(Debug, Clone)]
pub struct JobCanceller {
    pub(super) job: Arc<JobState>,
}

impl JobCanceller {
    /// See [`JobHandle::cancel`].
    pub fn cancel(&self) {
        self.job.terminate(None);
    }
}

impl JobHandle {
    /// The job's id (the scheduler's: ids grow in submission order).
    pub fn id(&self) -> JobId {
        self.job.id
    }

    /// The priority class.
    pub fn priority(&self) -> Priority {
        self.job.priority
    }

    /// Cancels the job: queued partitions are dropped at once, running ones
    /// stop at their next phase boundary (a kernel region is never
    /// interrupted), and everything the job holds (memory, permits) is
    /// released before [`JobHandle::wait`] returns
    /// [`EngineError::Cancelled`]. No effect on a finished job.
    pub fn cancel(&self) {
        self.job.terminate(None);
    }

    /// A handle that cancels this job, for use while waiting.
    pub fn canceller(&self) -> JobCanceller {
        JobCanceller {
            job: Arc::clone(&self.job),
        }
    }

    /// The progress events (once; later calls get `None`).
    pub fn take_events(&mut self) -> Option<mpsc::UnboundedReceiver<ProgressEvent>> {
        self.events.take()
    }

    /// How far the job is.
    pub fn progress(&self) -> JobProgress {
        let st = self.job.lock();
        JobProgress {
            partitions: self.job.partitions,
            proved: st.proved,
            finished: st.finished,
        }
    }

    /// The proofs in partition order, once the job is done and everything it
    /// held is released.
    pub async fn wait(self) -> Result<Vec<Proof<Bls12>>> {
        match self.result.await {
            Ok(result) => result,
            Err(_) => Err(EngineError::ShutDown { job: self.job.id }),
        }
    }

    /// [`JobHandle::wait`] for callers outside an async runtime (it panics
    /// inside one, as tokio's `blocking_recv` does).
    pub fn wait_blocking(self) -> Result<Vec<Proof<Bls12>>> {
        match self.result.blocking_recv() {
            Ok(result) => result,
            Err(_) => Err(EngineError::ShutDown { job: self.job.id }),
        }
    }
}
