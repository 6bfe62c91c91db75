//! Parameter swaps: a lower-priority job gives its parameter set and PCE
//! up, at a partition boundary, to a higher-priority job whose admission
//! waits for the memory, and takes them back through admission after it.
//!
//! While the admission holder of a higher class waits for memory (the
//! admission's gate), every admitted job of a lower class that holds a
//! parameter set or PCE the holder does not need dispatches no new
//! partition ([`pick`] skips it); once none of its partitions is in flight
//! its thread parks it ([`try_park`]): its holds on parameters and PCE and
//! its reserved working set are dropped, so those entries are idle and the
//! budget's reclaimer may evict them. Entries in use by a partition in
//! flight are never idle (each partition holds them), so never evicted.
//! A parked job comes back ([`resume`]) once no higher class holds or waits
//! for admission, through admission like a new job (by its priority, one
//! load at a time, a set already reloaded by another job taken from the
//! cache); then its remaining partitions dispatch with the (r, s) fixed at
//! submission, so its proofs are the ones it would have made.

use super::*;

/// What a job waits for now, for [`JobStatus::waiting`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) enum Wait {
    /// Nothing (admitted and running, or ended).
    #[default]
    None,
    /// The admission slot.
    Admission,
    /// Host memory of this many bytes, holding the admission slot.
    Memory(u64),
    /// Its parameter file being read (again, after a park, if `reload`).
    Loading { reload: bool },
    /// Its PCE being recorded from its circuit (no PCE cached or on disk).
    Recording,
}

/// A job parked: when, and for whom.
#[derive(Debug, Clone, Copy)]
pub(super) struct Parked {
    pub(super) since: Instant,
    pub(super) for_job: u64,
    pub(super) for_priority: Priority,
}

impl Parked {
    /// The park of `job` is over (it is admitted again, or it ended): the
    /// parked period goes on its timeline.
    pub(super) fn end(self, shared: &Shared, job: &JobState) {
        let note: Arc<str> = Arc::from(format!(
            "parameters yielded to job {} ({})",
            self.for_job, self.for_priority
        ));
        shared
            .timeline
            .record_noted(job.id.0, 0, Lane::Host, 0, PARKED, self.since, Some(note));
        tracing::info!(
            job = job.id.0,
            parked_seconds = self.since.elapsed().as_secs_f64(),
            "job resumed after yielding its parameters"
        );
    }
}

/// Counts one partition of a job in flight, from the moment the dispatcher
/// takes it from the queue until its work is dropped (after its epilogue,
/// or when it fails or its job ends): a job parks only with none.
pub(super) struct Flight {
    job: Arc<JobState>,
}

impl Flight {
    /// Takes over the count `pick` added to `job`'s `in_flight`.
    pub(super) fn adopt(job: &Arc<JobState>) -> Flight {
        Flight {
            job: Arc::clone(job),
        }
    }
}

impl Drop for Flight {
    fn drop(&mut self) {
        {
            let mut st = self.job.lock();
            st.in_flight = st.in_flight.saturating_sub(1);
        }
        // A job waiting to park, or an admission waiting for what it holds.
        self.job.signal.bump();
    }
}

/// Parks `job` if a higher-priority admission waits for memory that its
/// parameters or PCE could give, and none of its partitions is in flight;
/// whether it parked.
pub(super) fn try_park(shared: &Shared, job: &JobState) -> bool {
    let Some((for_job, for_priority)) = yields(shared, job) else {
        return false;
    };
    let held = {
        let mut st = job.lock();
        // Nothing left to dispatch: it ends soon and frees all anyway.
        if st.terminated || st.parked.is_some() || st.in_flight > 0 || st.queued == 0 {
            return false;
        }
        let (Some(params), Some(pce)) = (st.params.take(), st.pce.take()) else {
            return false;
        };
        st.parked = Some(Parked {
            since: Instant::now(),
            for_job,
            for_priority,
        });
        // From here it waits for its parameters, which the `parked` span
        // tells: a wait for the budget starts afresh after the resume.
        st.budget_wait = None;
        (params, pce, st.spare.take())
    };
    Loads::count(&shared.loads.parks);
    tracing::info!(
        job = job.id.0,
        params = %job.params_ref,
        shape = %job.shape,
        for_job,
        for_priority = %for_priority,
        "job parked: parameters and PCE yielded to a higher-priority job"
    );
    let (params, pce, spare) = held;
    drop((params, pce));
    if let Some(spare) = spare {
        release(spare);
    }
    shared.signal.bump();
    true
}

/// The higher-priority job (and its priority) that `job` gives its
/// parameters and PCE up to, if one waits for memory and needs another set
/// or PCE. A job whose parameter set may not be evicted (registered by
/// value: it could not be reloaded) never yields: parking it would free
/// only its PCE and working set, perhaps too little for the waiting job,
/// and it would then wait as long as that job does.
pub(super) fn yields(shared: &Shared, job: &JobState) -> Option<(u64, Priority)> {
    let to = shared
        .admission
        .yields_to(job.priority, &job.shape, &job.params_ref)?;
    shared.params.evictable(&job.params_ref).then_some(to)
}

/// A parked job comes back once no higher class holds or waits for
/// admission: admitted again (its PCE and parameters reloaded if they were
/// evicted); `false` if it may not come back yet.
pub(super) fn resume(shared: &Shared, job: &JobState, record: &RecordFn) -> bool {
    if shared.admission.higher_pending(job.priority) {
        return false;
    }
    tracing::info!(job = job.id.0, params = %job.params_ref, "parked job asks for admission again");
    match admit(shared, job, record) {
        Ok(()) => shared.signal.bump(),
        Err(e) => {
            job.terminate(Some(e));
            shared.signal.bump()
        }
    };
    true
}

/// The engine's side of an eviction by the budget's reclaimer: a span on
/// the timeline (on the job whose admission holds the slot, else job 0), a
/// count, a log line.
pub(super) fn on_evict(shared: &Shared, what: Evicted<'_>, bytes: u64, at: Instant) {
    let (stage, name) = match what {
        Evicted::Pce(shape) => (PCE_EVICT, format!("PCE {shape}")),
        Evicted::Params(params) => {
            Loads::count(&shared.loads.params_evicted);
            // Its copies on the devices go too (a reload uploads anew).
            shared.provers.release_unused();
            shared.provers.account_all(&shared.scheduler);
            (PARAMS_EVICT, format!("parameters {params}"))
        }
    };
    let for_job = shared
        .admission
        .holder()
        .and_then(|(job, _)| job)
        .unwrap_or(0);
    tracing::info!(evicted = %name, bytes, for_job, "evicted to make room");
    let note: Arc<str> = Arc::from(format!("{name}: {bytes} bytes"));
    shared
        .timeline
        .record_noted(for_job, 0, Lane::Host, 0, stage, at, Some(note));
}

/// Why `job` is not running now, in words for an operator; `None` when it
/// runs or ended.
pub(super) fn waiting_reason(shared: &Shared, job: &JobState, st: &JobMut) -> Option<String> {
    if st.finished || st.terminated {
        return None;
    }
    let now = match st.wait {
        Wait::Loading { reload: true } => Some("reloading parameters".to_owned()),
        Wait::Loading { reload: false } => Some("loading parameters".to_owned()),
        Wait::Recording => Some("recording its PCE".to_owned()),
        Wait::Memory(bytes) => Some(format!(
            "admission: waiting for {:.1} GiB of host memory",
            bytes as f64 / (1u64 << 30) as f64
        )),
        Wait::Admission | Wait::None => None,
    };
    // A parked job says so until it is admitted again, with what its
    // re-admission waits for now.
    if let Some(p) = &st.parked {
        let parked = format!(
            "parked: parameters yielded to job {} ({})",
            p.for_job, p.for_priority
        );
        return Some(match now {
            Some(now) => format!("{parked}; {now}"),
            None => parked,
        });
    }
    if now.is_some() {
        return now;
    }
    if st.wait == Wait::Admission {
        return Some(match shared.admission.holder() {
            Some((Some(id), p)) if id != job.id.0 => {
                format!("admission: queued behind job {id} ({p})")
            }
            Some((None, _)) => "admission: queued behind a parameter preload".into(),
            _ => "admission: queued".into(),
        });
    }
    if st.params.is_some()
        && st.queued > 0
        && let Some((id, p)) = yields(shared, job)
    {
        return Some(format!(
            "yielding: parameters go to job {id} ({p}) once its partitions in flight are done"
        ));
    }
    None
}
