//! The threads: each job's driver, the dispatcher, the synthesis threads.

use std::rc::Rc;

use super::*;

/// A job's thread: admission, queueing its partitions, waiting for them to
/// be done and released, then the result.
pub(super) fn drive(
    shared: &Arc<Shared>,
    job: &Arc<JobState>,
    witnesses: Vec<WitnessFn>,
    record: RecordFn,
) {
    let _s = tracing::info_span!("job", job = job.id.0).entered();
    let mut witnesses = Some(witnesses);
    match admit(shared, job, &record) {
        Ok(()) => {
            let mut st = shared.lock();
            let mut j = job.lock();
            if j.terminated {
                j.to_dispatch = 0;
            } else if let Some(ws) = witnesses.take() {
                j.queued = ws.len() as u32;
                for (i, witness) in ws.into_iter().enumerate() {
                    st.queue.insert(
                        (Reverse(job.priority), job.id.0, i as u32),
                        Pending {
                            job: Arc::clone(job),
                            witness,
                        },
                    );
                }
            }
            drop(j);
            drop(st);
            job.event(None, ProgressStage::Admitted);
            shared.signal.bump();
        }
        Err(e) => {
            job.terminate(Some(e));
            job.lock().to_dispatch = 0;
        }
    }
    // `record` stays: a job that parks may need its PCE recorded again.
    drop(witnesses);
    loop {
        let seen = shared.signal.current();
        let (dispatched, terminated, parked) = {
            let j = job.lock();
            (j.to_dispatch == 0, j.terminated, j.parked.is_some())
        };
        // A job that ended early may be the one the dispatcher is taking a
        // permit for, or holds one for unbound: wait for it to be given
        // back (or bound to another job's partition).
        if dispatched && !(terminated && shared.lock().unbound_permit == Some(job.id.0)) {
            break;
        }
        if !terminated {
            let acted = if parked {
                resume(shared, job, &record)
            } else {
                try_park(shared, job)
            };
            if acted {
                continue;
            }
        }
        shared.signal.wait_past(seen);
    }
    drop(record);
    // Ended while parked (cancelled, or failed to come back).
    let parked = job.lock().parked.take();
    if let Some(parked) = parked {
        parked.end(shared, job);
    }
    let outcome = job.gpu_job().map(|gpu| {
        gpu.close();
        gpu.wait()
    });
    job.finish(outcome);
}

/// Jobs whose first queued partition the dispatcher looks at, at most.
pub(super) const DISPATCH_SCAN: usize = 256;

/// The time partition `partition` of `job` waited, from `since` until
/// `until` (when its working set was charged), for a working set of `bytes`
/// the host budget had no room for (`report`: the budget at the first
/// refusal), as a noted span on the host lane.
fn record_budget_wait(
    shared: &Shared,
    job: JobId,
    partition: u32,
    bytes: u64,
    (since, until): (Instant, Instant),
    report: &MemoryReport,
) {
    let b = crate::error::fmt_bytes;
    let note = format!(
        "no room in the host memory budget for its working set of {}: {} of {} used \
         (parameters {}, PCEs {}, working sets {}, idle pinned buffers {}); \
         it waited for partitions in flight to finish",
        b(bytes),
        b(report.used_bytes),
        b(report.budget_bytes),
        b(report.params_bytes),
        b(report.pce_bytes),
        b(report.working_set_bytes),
        b(report.pinned_idle_bytes),
    );
    shared.timeline.record_between(
        job.0,
        partition,
        Lane::Host,
        0,
        BUDGET_WAIT,
        since,
        until,
        Some(Arc::from(note)),
    );
}

/// What [`pick`] picked: the partition, its job's state, its working set
/// and flight, and how long it waited for the budget, if it did (since
/// when and until when, the budget then, its working set's bytes).
pub(super) struct Picked {
    key: QueueKey,
    job: Arc<JobState>,
    ws: WsCharge,
    flight: Flight,
    waited: Option<((Instant, Instant), MemoryReport, u64)>,
}

/// The next partition to synthesize and its working set, in queue order
/// (priority, job, partition): the first job whose reserved working set is
/// free, or that can get a new one from the budget. Only the first job
/// refused by the budget stops later ones from charging it (so a lower
/// class never takes memory a higher one waits for); later jobs may still
/// run on their own reserved working sets. While an admission of a higher
/// class waits for memory, partitions of lower classes run only on their
/// reserved working sets, and those of jobs that yield their parameters to
/// it (see `park`), and of parked jobs, not at all.
pub(super) fn pick(shared: &Shared, candidates: Vec<(QueueKey, Arc<JobState>)>) -> Option<Picked> {
    let mut budget_open = true;
    for (key, job) in candidates {
        if yields(shared, &job).is_some() {
            continue;
        }
        let (spare, ws_bytes, abc_len) = {
            let mut st = job.lock();
            if st.parked.is_some() || st.params.is_none() {
                continue;
            }
            // Counted before the job's lock is let go, so that it cannot
            // park meanwhile; taken back below if no working set comes.
            st.in_flight += 1;
            (st.spare.take(), st.ws_bytes, host_abc_len(&st))
        };
        let reserved = match spare {
            Some(spare) => Some(spare),
            None if budget_open && !shared.admission.gates(job.priority) => {
                match charge_working_set(shared, ws_bytes, abc_len) {
                    Ok(Some(reserved)) => Some(reserved),
                    Ok(None) => {
                        if job.lock().budget_wait.is_none() {
                            // Read outside the job's lock: the budget's
                            // locks are never taken under it.
                            let report = shared.budget.report();
                            job.lock()
                                .budget_wait
                                .get_or_insert((Instant::now(), report));
                        }
                        None
                    }
                    Err(_) => None,
                }
            }
            None => None,
        };
        match reserved {
            Some((charge, abc)) => {
                let waited = job
                    .lock()
                    .budget_wait
                    .take()
                    .map(|(since, report)| ((since, Instant::now()), report, ws_bytes));
                let ws = WsCharge {
                    charge: Some(charge),
                    abc,
                    job: Arc::clone(&job),
                };
                let flight = Flight::adopt(&job);
                return Some(Picked {
                    key,
                    job,
                    ws,
                    flight,
                    waited,
                });
            }
            None => {
                // No bump: the dispatcher bumps once it gives up, which
                // wakes a driver waiting for this count to fall.
                let mut st = job.lock();
                st.in_flight = st.in_flight.saturating_sub(1);
                drop(st);
                budget_open = false;
            }
        }
    }
    None
}

/// How many constraints the job's a/b/c buffers on the host hold, if its
/// a/b/c are evaluated on the host.
fn host_abc_len(st: &JobMut) -> Option<usize> {
    match (&st.abc, &st.pce) {
        (Some(placement), Some(pce)) if !placement.on_device => Some(pce.num_constraints()),
        _ => None,
    }
}

/// Charges a working set of `bytes` now if it fits. With `abc_len` (a/b/c
/// on the host) it first takes over idle a/b/c buffers of that size from
/// the pinned pool, which the charge pays for: the buffers a finished job
/// left idle serve the next one instead of being freed by the budget's
/// reclaim to make room for the very charge that would reuse them.
pub(super) fn charge_working_set(
    shared: &Shared,
    bytes: u64,
    abc_len: Option<usize>,
) -> Result<Option<(Charge, Option<AbcBuffers>)>> {
    shared
        .budget
        .try_charge_taking(bytes, ChargeKind::WorkingSet, || {
            abc_len.and_then(|n| AbcBuffers::reuse(&shared.pool, n))
        })
}

pub(super) fn dispatcher_main(shared: &Shared) {
    loop {
        // A free synthesis thread and a queued partition. The permit about
        // to be taken is the queue head's job's until it is bound to a
        // partition or given back ("unbound", marked before it is asked
        // for): a driver of that job, if the job ends meanwhile, waits for
        // that, so that when a cancelled job's result is out no permit taken
        // on its behalf is still held.
        let priority = loop {
            let seen = shared.signal.current();
            {
                let mut st = shared.lock();
                if st.shutdown {
                    return;
                }
                if st.idle_synthesis > 0
                    && let Some((&key, _)) = st.queue.first_key_value()
                {
                    st.unbound_permit = Some(key.1);
                    break key.0.0;
                }
            }
            shared.signal.wait_past(seen);
        };
        // No longer holding or asking for a permit on anyone's behalf; the
        // generation of the signal's bump that says so.
        let clear = || -> u64 {
            shared.lock().unbound_permit = None;
            shared.signal.bump()
        };
        // Reactive dispatch: one permit per partition in flight.
        let permit = match shared.bound.acquire(priority, &shared.stop) {
            Ok(p) => p,
            Err(_) => {
                clear();
                return;
            }
        };
        // Gives the permit back.
        let unbind = |permit: DispatchPermit| -> u64 {
            drop(permit);
            clear()
        };
        // A partition that can have a working set now.
        loop {
            let seen = shared.signal.current();
            let candidates: Vec<(QueueKey, Arc<JobState>)> = {
                let st = shared.lock();
                if st.shutdown {
                    drop(st);
                    let _ = unbind(permit);
                    return;
                }
                let mut firsts: Vec<(QueueKey, Arc<JobState>)> = Vec::new();
                for (key, pending) in &st.queue {
                    if firsts.last().is_none_or(|(k, _)| k.1 != key.1) {
                        if firsts.len() == DISPATCH_SCAN {
                            break;
                        }
                        firsts.push((*key, Arc::clone(&pending.job)));
                    }
                }
                firsts
            };
            if candidates.is_empty() {
                let _ = unbind(permit);
                break;
            }
            let Some(Picked {
                key,
                job,
                ws,
                flight,
                waited,
            }) = pick(shared, candidates)
            else {
                // Nothing fits the budget now: the permit goes back while
                // waiting and is taken again, in priority order, after. Wait
                // only if nothing but that bump happened since `seen` (else
                // something may have changed already: look again).
                let bumped = unbind(permit);
                if bumped == seen + 1 {
                    shared.signal.wait_past(bumped);
                }
                break;
            };
            let mut st = shared.lock();
            let Some(pending) = st.queue.remove(&key) else {
                // Cancelled meanwhile.
                drop(st);
                drop((ws, flight));
                continue;
            };
            {
                let mut j = job.lock();
                j.queued = j.queued.saturating_sub(1);
            }
            st.idle_synthesis = st.idle_synthesis.saturating_sub(1);
            st.unbound_permit = None;
            let job_id = job.id;
            st.tasks.push_back(Task {
                job,
                partition: key.2,
                witness: pending.witness,
                permit,
                ws,
                flight,
            });
            drop(st);
            if let Some((span, report, bytes)) = &waited {
                // Only for a partition that goes on to synthesis.
                record_budget_wait(shared, job_id, key.2, *bytes, *span, report);
            }
            shared.signal.bump();
            break;
        }
    }
}

pub(super) fn synthesis_main(shared: &Arc<Shared>, index: usize) {
    loop {
        let task = loop {
            let seen = shared.signal.current();
            {
                let mut st = shared.lock();
                if let Some(task) = st.tasks.pop_front() {
                    break task;
                }
                if st.shutdown {
                    return;
                }
            }
            shared.signal.wait_past(seen);
        };
        let job = Arc::clone(&task.job);
        if run_task(shared, index, task) {
            job.dispatched_one();
        }
        shared.lock().idle_synthesis += 1;
        shared.signal.bump();
    }
}

/// Synthesizes a task's partition and submits it to the scheduler; false
/// when its witness yielded and the partition went back into the queue.
pub(super) fn run_task(shared: &Arc<Shared>, index: usize, task: Task) -> bool {
    let Task {
        job,
        partition,
        witness,
        permit,
        ws,
        flight,
    } = task;
    match synthesize(shared, index, &job, partition, &witness, ws, flight) {
        Ok(Synthesized::Work(mut work)) => {
            let Some(gpu) = job.gpu_job() else {
                return true;
            };
            // Every device keeps the PCE: its matrices may leave host memory.
            host_pce::release_if_held(shared, index, &mut work);
            // What the prover holds once for this shape is a standing
            // reservation; the partition reserves only its own buffers.
            let once = shared.prover.shared_device_bytes(&work.pce);
            if let Err(e) = shared.held_once.ensure(&shared.scheduler, once) {
                job.terminate(Some(e));
                return true;
            }
            let device_bytes = shared.prover.device_bytes(&work.pce);
            let item = WorkItem::new(&gpu, partition, device_bytes, work.into_phases())
                .with_permit(permit);
            // Announced before the submission: a worker may start it at once.
            job.event(Some(partition), ProgressStage::Synthesized);
            match shared.scheduler.submit(item) {
                Ok(()) => {}
                Err(GpuSchedError::JobCancelled { .. } | GpuSchedError::JobClosed { .. }) => {}
                Err(e) => job.terminate(Some(e.into())),
            }
        }
        Ok(Synthesized::Ended) => {}
        Ok(Synthesized::Yielded(ws, flight)) => {
            // Back into the queue before the flight ends: the job then
            // parks with this partition queued.
            let requeued = requeue(shared, &job, partition, witness);
            drop((ws, flight, permit));
            return !requeued;
        }
        Err(e) => job.terminate(Some(e)),
    }
    true
}

/// What [`synthesize`] made of a partition.
pub(super) enum Synthesized {
    /// Its witness and a/b/c, for the scheduler.
    Work(PartitionWork),
    /// Nothing: its job ended meanwhile.
    Ended,
    /// Nothing yet: its witness yielded before its parts started (its job
    /// gives its parameters up to a higher-priority job). Its working set
    /// and flight come back, to be let go once it is queued again.
    Yielded(WsCharge, Flight),
}

/// Puts a partition whose witness yielded back into the queue (the
/// dispatcher skips it while its job yields, so the job can park);
/// false if its job ended meanwhile.
fn requeue(shared: &Shared, job: &Arc<JobState>, partition: u32, witness: WitnessFn) -> bool {
    let mut st = shared.lock();
    {
        let mut j = job.lock();
        if j.terminated {
            return false;
        }
        j.queued += 1;
    }
    st.queue.insert(
        (Reverse(job.priority), job.id.0, partition),
        Pending {
            job: Arc::clone(job),
            witness,
        },
    );
    drop(st);
    tracing::info!(
        job = job.id.0,
        partition,
        "partition back in the queue: its witness yielded to a higher-priority job"
    );
    shared.signal.bump();
    true
}

/// Witness, a/b/c into pinned buffers, and the satisfaction check;
/// [`Synthesized::Ended`] when the job ended meanwhile.
pub(super) fn synthesize(
    shared: &Arc<Shared>,
    index: usize,
    job: &Arc<JobState>,
    partition: u32,
    witness_fn: &WitnessFn,
    mut ws: WsCharge,
    flight: Flight,
) -> Result<Synthesized> {
    if job.is_terminated() {
        return Ok(Synthesized::Ended);
    }
    // Only the counts until the witness is made: a witness may wait
    // seconds for room under `synthesis_ahead`, and the PCE it held meanwhile
    // was the full one even after the engine had swapped in a released one
    // (`host_pce`), which kept its 8.3 GiB of matrices in host memory for 15 s
    // of a 32 GiB PoRep's first proof. The job cannot park while this
    // partition is in flight, so its statics are there again afterwards
    // unless it ended.
    let Some((inputs, aux)) = job.statics().map(|(pce, _)| (pce.num_inputs, pce.num_aux)) else {
        return Ok(Synthesized::Ended);
    };
    let _s = tracing::info_span!("synthesis", job = job.id.0, partition).entered();
    job.event(Some(partition), ProgressStage::SynthesisStarted);
    let timeline = &shared.timeline;
    let synth_err = |source| EngineError::PartitionSynthesis {
        job: job.id,
        partition,
        source,
    };
    let start = Instant::now();
    // A witness made in parts enters the gate only while fewer than
    // `synthesis_ahead` such partitions wait for a worker (see `ready`).
    // While it waits there, it yields if its job is to give its parameters
    // up to a higher-priority job (see `park`): the partition goes back
    // into the queue, and the job parks once those in flight are done. Only
    // a witness that works on a copy of its circuit may yield: one made
    // where there is no room now (it will wait); the others go in with the
    // circuit itself and, should they wait after all, wait as before.
    // Witnesses starting together share the room out (`claim_start`).
    let claim = shared.ready.claim_start(job.priority);
    let copy = claim.is_none();
    let should_yield: Box<dyn Fn() -> bool> = if copy {
        let (shared, job) = (Arc::clone(shared), Arc::clone(job));
        Box::new(move || yields(&shared, &job).is_some())
    } else {
        Box::new(|| false)
    };
    let pacing = Rc::new(Pacing::new(&shared.ready, job, claim, should_yield));
    let pacer = Rc::clone(&pacing) as Rc<dyn cuzk_synth::gate::Pacer>;
    let made = panic::catch_unwind(AssertUnwindSafe(move || {
        cuzk_synth::gate::with_pacer(pacer, || witness_fn(inputs, aux, copy))
    }));
    // Counted from the gate until a worker takes the partition.
    let ready = pacing.take_slot();
    pacing.release_claim();
    let witness = match made {
        Ok(Ok(w)) => w,
        // Only a witness on a copy of its circuit may yield (its pacer asks
        // no other): the circuit is still there for its next try.
        Ok(Err(SynthError::Yielded)) if copy => return Ok(Synthesized::Yielded(ws, flight)),
        Ok(Err(SynthError::Yielded)) => {
            return Err(EngineError::Internal(format!(
                "{} partition {partition}: its witness yielded without a copy of its circuit                  (a witness function must not return SynthError::Yielded itself)",
                job.id
            )));
        }
        Ok(Err(e)) => return Err(synth_err(e)),
        Err(panic) => {
            return Err(EngineError::Panicked {
                job: job.id,
                partition,
                stage: "witness",
                message: panic_message(&*panic),
            });
        }
    };
    let Some((pce, params)) = job.statics() else {
        return Ok(Synthesized::Ended);
    };
    cuzk_synth::spmv::check_shape(&pce, &witness).map_err(synth_err)?;
    let at = timeline.record_since(job.id.0, partition, Lane::Host, index, WITNESS, start);
    if let Some((from, to)) = pacing.waited() {
        // Inside the witness: the time it waited before its parts started.
        timeline.record(Span {
            job: job.id.0,
            partition,
            worker: index,
            lane: Lane::Host,
            stage: PACED,
            start_us: timeline.micros(from),
            end_us: timeline.micros(to),
            depth: 1,
            note: Some(Arc::from(format!(
                "waited for room: synthesis_ahead = {} witnesses made on every core, \
                 of its priority or above, started and not yet taken by a GPU worker",
                pacing.ahead()
            ))),
        });
    }
    if job.is_terminated() {
        return Ok(Synthesized::Ended);
    }
    let pinned = |source| EngineError::Pinned {
        job: job.id,
        partition,
        source,
    };
    // Decided at admission with the PCE and parameters, and the working set
    // charged for it.
    let placement = job.lock().abc.clone().ok_or_else(|| {
        EngineError::Internal(format!(
            "{} partition {partition} reached synthesis without its a/b/c placement",
            job.id
        ))
    })?;
    let note: Arc<str> = Arc::from(placement.reason.as_str());
    if placement.on_device {
        // The backend evaluates and checks a/b/c on its device from the
        // resident PCE: no SpMV here, no a/b/c buffers.
        let (lane, stage) = (Lane::Host, "abc on gpu");
        timeline.record_noted(job.id.0, partition, lane, index, stage, at, Some(note));
        return Ok(Synthesized::Work(PartitionWork {
            job: Arc::clone(job),
            partition,
            pce,
            params,
            provers: Arc::clone(&shared.provers),
            timeline: Arc::clone(&shared.timeline),
            witness,
            ws,
            abc_on_device: true,
            ready,
            _flight: flight,
        }));
    }
    // The reserved working set brings the buffers of the job's previous
    // partition; otherwise lease them (the working-set charge covers them).
    let abc = match ws.abc.take() {
        Some(abc) => abc,
        None => AbcBuffers::lease(&shared.pool, pce.num_constraints()).map_err(pinned)?,
    };
    let abc = ws.abc.insert(abc);
    let visible = Duration::from_millis(1);
    if at.elapsed() >= visible {
        // Page-locking new buffers takes seconds at 32 GiB sizes.
        timeline.record_since(job.id.0, partition, Lane::Host, index, "abc lease", at);
    }
    // One host SpMV and check at a time (see `Shared::host_spmv`); the wait
    // is in the timeline when there was one.
    let asked = Instant::now();
    let gate = shared
        .host_spmv
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    // The SpMV's span starts at the gate: two partitions' never overlap.
    let at = if asked.elapsed() >= visible {
        timeline.record_noted(
            job.id.0,
            partition,
            Lane::Host,
            index,
            "spmv wait",
            asked,
            Some(Arc::from(
                "another partition's host SpMV and check ran (one at a time on all cores)",
            )),
        )
    } else {
        Instant::now()
    };
    {
        let (a, b, c) = abc.slices_mut().map_err(pinned)?;
        cuzk_synth::spmv::evaluate_into(&pce, &witness, a, b, c).map_err(synth_err)?;
    }
    let at = timeline.record_noted(
        job.id.0,
        partition,
        Lane::Host,
        index,
        "spmv",
        at,
        Some(note),
    );
    {
        let (a, b, c) = abc.slices().map_err(pinned)?;
        cuzk_synth::check_satisfied(&pce, a, b, c).map_err(synth_err)?;
    }
    // Recorded before the gate opens: the next SpMV's span starts after it.
    timeline.record_since(job.id.0, partition, Lane::Host, index, "check", at);
    drop(gate);
    Ok(Synthesized::Work(PartitionWork {
        job: Arc::clone(job),
        partition,
        pce,
        params,
        provers: Arc::clone(&shared.provers),
        timeline: Arc::clone(&shared.timeline),
        witness,
        ws,
        abc_on_device: false,
        ready,
        _flight: flight,
    }))
}
