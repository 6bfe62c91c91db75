//! Admission: one job at a time, by priority then arrival, gets its PCE,
//! parameters and one working set into memory with a single charge.

use super::*;

/// Admission is one job at a time, by priority then arrival: the holder
/// charges everything its job needs at once, so no two jobs each hold part
/// of what the other waits for.
#[derive(Default)]
pub(super) struct Admission {
    pub(super) st: Mutex<AdmissionState>,
}

#[derive(Default)]
pub(super) struct AdmissionState {
    pub(super) held: bool,
    /// The holder's job (`None`: a preload or registration) and priority.
    pub(super) holder: Option<(Option<u64>, Priority)>,
    /// By priority, then arrival ticket ([`Admission::arrive`]).
    pub(super) waiting: BTreeSet<(Reverse<Priority>, u64)>,
    pub(super) next: u64,
    /// Set while the holder waits for memory: partitions of lower jobs then
    /// run only on their reserved working sets, and lower jobs that hold
    /// what the holder does not need park (see `park`).
    pub(super) gate: Option<Gate>,
}

/// The admission holder waiting for memory.
#[derive(Clone)]
pub(super) struct Gate {
    pub(super) priority: Priority,
    /// The job, and what it needs; `None` for a preload or registration
    /// (which no job parks for).
    pub(super) claimant: Option<Claimant>,
}

/// A job asking for admission and what it needs in memory.
#[derive(Clone)]
pub(super) struct Claimant {
    pub(super) job: u64,
    pub(super) shape: ShapeId,
    pub(super) params: ParamsRef,
    /// The job's arrival ticket, taken when it was submitted.
    pub(super) arrival: u64,
}

impl Claimant {
    pub(super) fn of(job: &JobState) -> Claimant {
        Claimant {
            job: job.id.0,
            shape: job.shape.clone(),
            params: job.params_ref.clone(),
            arrival: job.arrival,
        }
    }
}

impl Admission {
    pub(super) fn lock(&self) -> MutexGuard<'_, AdmissionState> {
        self.st.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes an arrival ticket and puts it in line at `priority` (a job's
    /// when it is submitted, a preload's when it asks): jobs of one priority are admitted in the order they were
    /// submitted, whichever of their threads first asks for the slot, and a
    /// job that yields or parks keeps its place. The job's
    /// [`Admission::acquire`] (or [`Admission::leave`]) takes it out of
    /// line.
    pub(super) fn arrive(&self, priority: Priority) -> u64 {
        let mut st = self.lock();
        let t = st.next;
        st.next += 1;
        st.waiting.insert((Reverse(priority), t));
        t
    }

    /// Takes an arrival ticket out of line (its job never asks).
    pub(super) fn leave(&self, priority: Priority, ticket: u64) {
        self.lock().waiting.remove(&(Reverse(priority), ticket));
    }

    /// Waits for the admission slot (in the order of the claimant's arrival
    /// ticket, or of this call without one); `None` once `stop()` holds.
    pub(super) fn acquire<'a>(
        &'a self,
        signal: &'a Signal,
        priority: Priority,
        claimant: Option<Claimant>,
        stop: &dyn Fn() -> bool,
    ) -> Option<AdmissionSlot<'a>> {
        let ticket = match &claimant {
            Some(c) => {
                // In line already since it arrived, unless it yielded.
                self.lock().waiting.insert((Reverse(priority), c.arrival));
                c.arrival
            }
            None => self.arrive(priority),
        };
        loop {
            let seen = signal.current();
            // Asked before this lock is taken: `stop` takes a job's or the
            // engine's lock, which others hold while they ask the admission
            // (status, dispatch), so the admission's lock stays a leaf.
            let stopped = stop();
            {
                let mut st = self.lock();
                if stopped {
                    st.waiting.remove(&(Reverse(priority), ticket));
                    drop(st);
                    signal.bump();
                    return None;
                }
                if !st.held && st.waiting.first() == Some(&(Reverse(priority), ticket)) {
                    st.waiting.pop_first();
                    st.held = true;
                    st.holder = Some((claimant.as_ref().map(|c| c.job), priority));
                    return Some(AdmissionSlot {
                        admission: self,
                        signal,
                        priority,
                        claimant,
                    });
                }
            }
            signal.wait_past(seen);
        }
    }

    /// Whether a partition of `priority` must leave free memory to the
    /// admission holder.
    pub(super) fn gates(&self, priority: Priority) -> bool {
        self.lock()
            .gate
            .as_ref()
            .is_some_and(|g| g.priority > priority)
    }

    /// The job (and its priority) that an admitted job of `priority` using
    /// `shape` and `params` must give its parameters and PCE up to: a
    /// higher-priority job waiting for memory that needs another parameter
    /// set or PCE (so that releasing this job's can help).
    pub(super) fn yields_to(
        &self,
        priority: Priority,
        shape: &ShapeId,
        params: &ParamsRef,
    ) -> Option<(u64, Priority)> {
        let st = self.lock();
        let gate = st.gate.as_ref().filter(|g| g.priority > priority)?;
        let c = gate.claimant.as_ref()?;
        (c.shape != *shape || c.params != *params).then_some((c.job, gate.priority))
    }

    /// Whether a job of a higher class than `priority` holds or waits for
    /// the admission slot: a parked job of `priority` does not come back
    /// before it is in.
    pub(super) fn higher_pending(&self, priority: Priority) -> bool {
        let st = self.lock();
        st.holder.is_some_and(|(_, p)| p > priority)
            || st
                .waiting
                .first()
                .is_some_and(|(Reverse(p), _)| *p > priority)
    }

    /// The holder's job (`None`: a preload or registration) and priority.
    pub(super) fn holder(&self) -> Option<(Option<u64>, Priority)> {
        self.lock().holder
    }
}

pub(super) struct AdmissionSlot<'a> {
    pub(super) admission: &'a Admission,
    pub(super) signal: &'a Signal,
    pub(super) priority: Priority,
    pub(super) claimant: Option<Claimant>,
}

impl AdmissionSlot<'_> {
    pub(super) fn higher_waiting(&self) -> bool {
        self.admission
            .lock()
            .waiting
            .first()
            .is_some_and(|(Reverse(p), _)| *p > self.priority)
    }

    /// Every change wakes the waiters: lower jobs re-check whether to park
    /// (gate on) or may go on (gate off).
    pub(super) fn set_gate(&self, on: bool) {
        let changed = {
            let mut st = self.admission.lock();
            let changed = st.gate.is_some() != on;
            if changed {
                st.gate = on.then(|| Gate {
                    priority: self.priority,
                    claimant: self.claimant.clone(),
                });
            }
            changed
        };
        if changed {
            self.signal.bump();
        }
    }
}

impl Drop for AdmissionSlot<'_> {
    fn drop(&mut self) {
        {
            let mut st = self.admission.lock();
            st.held = false;
            st.holder = None;
            st.gate = None;
        }
        self.signal.bump();
    }
}

pub(super) enum AdmitError {
    /// A higher-priority job waits for admission: give up everything held
    /// and queue again behind it.
    Yield,
    /// The on-disk PCE was bad and is set aside: try again without it.
    Retry,
    Fail(EngineError),
}

impl From<EngineError> for AdmitError {
    fn from(e: EngineError) -> Self {
        AdmitError::Fail(e)
    }
}

/// The size of the parameter file at `path`, or of `file` (that file,
/// already open) when given.
pub(super) fn file_len(path: &std::path::Path, file: Option<&std::fs::File>) -> Result<u64> {
    match file {
        Some(f) => f.metadata(),
        None => std::fs::metadata(path),
    }
    .map(|m| m.len())
    .map_err(|source| EngineError::ParamsIo {
        path: path.to_owned(),
        source,
    })
}

/// Reads the parameter file at `path`, or from `file` (that file, already
/// open) when given.
pub(super) fn load_params(
    shared: &Shared,
    path: &std::path::Path,
    file: Option<&std::fs::File>,
) -> Result<Parameters<Bls12>> {
    let checked = shared.config.params_subgroup_check;
    let read = match file {
        Some(f) => f
            .try_clone()
            .map_err(|source| EngineError::ParamsIo {
                path: path.to_owned(),
                source,
            })
            .and_then(|f| {
                cuzk_groth16_cuda::read_params_from(f, path, checked).map_err(|source| {
                    EngineError::Params {
                        id: path.display().to_string(),
                        source,
                    }
                })
            }),
        None => {
            cuzk_groth16_cuda::read_params(path, checked).map_err(|source| EngineError::Params {
                id: path.display().to_string(),
                source,
            })
        }
    };
    let params = read?;
    Loads::count(&shared.loads.params);
    Ok(params)
}

/// Charges `need` for the admission holder, waiting for room; yields to a
/// higher-priority job waiting for admission. With `abc_len`, idle a/b/c
/// buffers of that many constraints are taken over by the charge
/// ([`charge_working_set`]).
pub(super) fn wait_charge(
    shared: &Shared,
    slot: &AdmissionSlot<'_>,
    need: u64,
    abc_len: Option<usize>,
    job: Option<&JobState>,
    stop: &dyn Fn() -> bool,
) -> std::result::Result<(Charge, Option<AbcBuffers>), AdmitError> {
    loop {
        let seen = shared.signal.current();
        if let Some(charged) = charge_working_set(shared, need, abc_len)? {
            slot.set_gate(false);
            return Ok(charged);
        }
        if stop() {
            slot.set_gate(false);
            return Err(AdmitError::Fail(EngineError::WaitCancelled {
                waiting_for: "host memory",
            }));
        }
        if slot.higher_waiting() {
            slot.set_gate(false);
            return Err(AdmitError::Yield);
        }
        if let Some(job) = job {
            job.lock().wait = Wait::Memory(need);
        }
        slot.set_gate(true);
        shared.signal.wait_past(seen);
    }
}

/// An admission's charge and the idle a/b/c buffers it took over, released
/// in one step ([`release`]) if an early return drops them, so the buffers
/// never count as idle while the charge still holds their bytes.
struct Held {
    charge: Charge,
    abc: Option<AbcBuffers>,
}

impl Held {
    /// All of the charge and the buffers, leaving nothing to release.
    fn take(&mut self) -> (Charge, Option<AbcBuffers>) {
        let all = self.charge.split(self.charge.bytes(), self.charge.kind());
        (all, self.abc.take())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        release(self.take());
    }
}

pub(super) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

pub(super) enum PceSource {
    Cached(Arc<Pce>),
    Disk(PathBuf, pce_file::PceFileInfo),
    Recorded(Box<Pce>),
}

/// The on-disk PCE of `shape`, if the directory is set and holds a readable
/// header for it; a bad file is set aside (renamed `.bad`) and logged.
pub(super) fn disk_pce(
    shared: &Shared,
    shape: &ShapeId,
) -> Option<(PathBuf, pce_file::PceFileInfo)> {
    let dir = shared.config.pce_cache_dir.as_ref()?;
    let path = dir.join(pce_file::file_name(&shape.0));
    if !path.exists() {
        return None;
    }
    match pce_file::read_pce_info(&path) {
        Ok(info) if info.shape == shape.0 => Some((path, info)),
        Ok(info) => {
            tracing::warn!(path = %path.display(), found = %info.shape, expected = %shape,
                "PCE file is for another shape; recording instead");
            None
        }
        Err(error) => {
            set_aside(&path, &error);
            None
        }
    }
}

pub(super) fn set_aside(path: &std::path::Path, error: &EngineError) {
    let bad = path.with_extension("pce.bad");
    tracing::warn!(%error, moved_to = %bad.display(), "unusable PCE file set aside; recording instead");
    if let Err(e) = std::fs::rename(path, &bad) {
        tracing::warn!(error = %e, path = %path.display(), "could not set the PCE file aside");
    }
}

pub(super) fn record_pce(job: &JobState, record: &RecordFn) -> Result<Pce> {
    let _s = tracing::info_span!("pce_record", job = job.id.0, shape = %job.shape).entered();
    match panic::catch_unwind(AssertUnwindSafe(record)) {
        Ok(Ok(pce)) => Ok(pce),
        Ok(Err(EngineError::Synth(source))) => Err(EngineError::PartitionSynthesis {
            job: job.id,
            partition: 0,
            source,
        }),
        Ok(Err(e)) => Err(e),
        Err(panic) => Err(EngineError::Panicked {
            job: job.id,
            partition: 0,
            stage: "pce_record",
            message: panic_message(&*panic),
        }),
    }
}

/// Gets everything `job` needs into memory and charged, in one charge.
pub(super) fn try_admit(
    shared: &Shared,
    job: &JobState,
    slot: &AdmissionSlot<'_>,
    record: &RecordFn,
) -> std::result::Result<(), AdmitError> {
    let stop = || job.is_terminated();
    // A job admitted before (parked since, its PCE evicted) knows its PCE's
    // size: that is charged before the PCE is recorded again, so the
    // recording stays within the budget. (A first recording cannot know
    // it; the crate docs say so.)
    let mut pre: Option<Charge> = None;
    let cached = shared.pces.get(&job.shape).filter(|p| {
        // Matrices released while every device keeps them: a job whose
        // a/b/c the host evaluates reads them again (from the file, as
        // when not cached; the entry then holds them again).
        let host = p.is_released() && !shared.prover.abc_placement(p).on_device;
        if host {
            tracing::info!(
                job = job.id.0,
                shape = %job.shape,
                "the PCE's matrices were released from host memory and this job's a/b/c are \
                 evaluated on the host: reading them again"
            );
        }
        !host
    });
    let source = match cached {
        Some(p) => PceSource::Cached(p),
        None => match disk_pce(shared, &job.shape) {
            Some((path, info)) => PceSource::Disk(path, info),
            None => {
                let known = job.lock().pce_bytes;
                if known > 0 {
                    pre = Some(wait_charge(shared, slot, known, None, Some(job), &stop)?.0);
                }
                job.lock().wait = Wait::Recording;
                PceSource::Recorded(Box::new(record_pce(job, record)?))
            }
        },
    };
    let (counts, pce_bytes, pce_cached) = match &source {
        PceSource::Cached(p) => (ShapeCounts::of(p), p.bytes() as u64, true),
        PceSource::Recorded(p) => (ShapeCounts::of(p), p.bytes() as u64, false),
        PceSource::Disk(_, info) => (
            ShapeCounts {
                num_inputs: info.num_inputs,
                num_aux: info.num_aux,
                num_constraints: info.num_constraints,
            },
            info.file_bytes,
            false,
        ),
    };
    let cached_params = shared.params.get(&job.params_ref);
    // Where the set comes from if it is not resident: its file or its
    // key's loader.
    let (params_bytes_now, params_source) = match &cached_params {
        Some(p) => (params_bytes(p), None),
        None => {
            let source = Source::of(shared, &job.params_ref, job.params_file.as_deref())?;
            (source.bytes()?, Some(source))
        }
    };
    let ws = working_set_bytes(counts, &*shared.prover);
    let total = shared.budget.total();
    let need_all = pce_bytes + params_bytes_now + ws;
    if need_all > total {
        return Err(EngineError::JobNeverFits {
            job: job.id,
            need_bytes: need_all,
            pce_bytes,
            params_bytes: params_bytes_now,
            working_set_bytes: ws,
            budget_bytes: total,
        }
        .into());
    }
    let need_now = ws
        + if pce_cached { 0 } else { pce_bytes }
        + if cached_params.is_some() {
            0
        } else {
            params_bytes_now
        };
    // The a/b/c buffers a finished job left idle are taken over here if the
    // host evaluates them; given back below if the device does.
    let abc_len = Some(counts.num_constraints);
    let pre_bytes = pre.as_ref().map_or(0, Charge::bytes);
    let (mut charge, abc) = wait_charge(
        shared,
        slot,
        need_now.saturating_sub(pre_bytes),
        abc_len,
        Some(job),
        &stop,
    )?;
    if let Some(pre) = pre {
        charge.absorb(pre);
    }
    {
        // Charged: what is left is reading what is not resident.
        let mut st = job.lock();
        let reload = st.parked.is_some();
        st.wait = if pce_cached && cached_params.is_some() {
            Wait::Admission
        } else {
            Wait::Loading { reload }
        };
    }
    let mut held = Held { charge, abc };
    let charge = &mut held.charge;

    let pce = match source {
        PceSource::Cached(p) => p,
        PceSource::Recorded(pce) => {
            Loads::count(&shared.loads.pce_recorded);
            let c = charge.split(pce_bytes, ChargeKind::Pce);
            if let Some(dir) = &shared.config.pce_cache_dir {
                let path = dir.join(pce_file::file_name(&job.shape.0));
                if let Err(error) = pce_file::write_pce(&path, &job.shape.0, &pce) {
                    tracing::warn!(%error, "could not write the PCE file; continuing without it");
                }
            }
            shared
                .pces
                .insert(job.shape.clone(), Arc::from(pce), c, true)
        }
        PceSource::Disk(path, _) => match timed_read(&path, &job.shape.0, counts) {
            Ok((pce, took)) => {
                Loads::count(&shared.loads.pce_from_disk);
                tracing::info!(
                    shape = %job.shape,
                    path = %path.display(),
                    seconds = took.as_secs_f64(),
                    "PCE read from disk"
                );
                let c = charge.split(pce_bytes, ChargeKind::Pce);
                shared
                    .pces
                    .insert(job.shape.clone(), Arc::new(pce), c, true)
            }
            Err(error) => {
                set_aside(&path, &error);
                return Err(AdmitError::Retry);
            }
        },
    };
    let params = match (cached_params, params_source) {
        (Some(p), _) => p,
        (None, None) => {
            return Err(EngineError::ParamsNotRegistered {
                key: job.params_ref.to_string(),
            }
            .into());
        }
        (None, Some(source)) => {
            let c = charge.split(params_bytes_now, ChargeKind::Params);
            let reload = job.lock().parked.is_some();
            tracing::info!(
                job = job.id.0,
                params = %job.params_ref,
                bytes = params_bytes_now,
                reload,
                "loading parameters"
            );
            let start = Instant::now();
            let loaded = source.load(shared)?;
            // The job waited for this load: its timeline says so.
            shared
                .timeline
                .record_since(job.id.0, 0, Lane::Host, 0, PARAMS_LOAD, start);
            shared
                .params
                .insert(job.params_ref.clone(), Arc::new(loaded), c, true)
        }
    };
    cuzk_groth16_cuda::check_params(&params, &pce).map_err(|source| EngineError::Params {
        id: job.params_ref.to_string(),
        source,
    })?;
    // Where the job's a/b/c are evaluated is decided once, here: on the
    // device its partitions need no a/b/c buffers on the host, so their
    // working set is the witness (what was charged beyond it goes back).
    let mut placement = shared.prover.abc_placement(&pce);
    if placement.short_of_room && release_idle_devices(shared) > 0 {
        // Device memory held for shapes and sets no job uses (a swap's
        // leftovers) was in the way: at 41cd267 on an H100, a PoRep job
        // after a WindowPoSt swap found the WindowPoSt's device PCE there
        // and ran with a/b/c on the host (0.362 partitions/s against 0.472
        // once it was freed first).
        placement = shared.prover.abc_placement(&pce);
    }
    if !placement.on_device && pce.is_released() {
        // The device's room changed since the check above: once more, so
        // the host's SpMV gets the matrices read again (the charge goes).
        tracing::info!(
            job = job.id.0,
            "a/b/c moved to the host during admission; admitting again with the PCE's matrices"
        );
        return Err(AdmitError::Retry);
    }
    tracing::info!(
        job = job.id.0,
        on_device = placement.on_device,
        "a/b/c {}: {}",
        if placement.on_device {
            "on the GPU"
        } else {
            "on the host"
        },
        placement.reason
    );
    let ws = if placement.on_device {
        let small = working_set_bytes_for(counts, &*shared.prover, true);
        // The buffers go back idle with the bytes that paid for them.
        let unused = held
            .charge
            .split(ws.saturating_sub(small), ChargeKind::WorkingSet);
        release((unused, held.abc.take()));
        small
    } else {
        lease_abc_ahead(shared, job, &mut held, counts.num_constraints, ws);
        ws
    };
    let mut st = job.lock();
    st.ws_bytes = ws;
    st.abc = Some(placement);
    st.spare = Some(held.take());
    st.pce_bytes = pce_bytes;
    st.pce = Some(pce);
    st.params = Some(params);
    st.wait = Wait::None;
    let parked = st.parked.take();
    drop(st);
    if let Some(parked) = parked {
        parked.end(shared, job);
    }
    Ok(())
}

/// Partitions whose a/b/c wait on the host, in flight at once at most: one
/// in each worker and `synthesis_ahead` made ahead of them (never more than
/// the dispatch bound).
fn abc_in_flight(config: &ResolvedConfig) -> usize {
    let workers = config.workers_per_device * config.devices.len().max(1);
    (workers + config.synthesis_ahead).min(config.dispatch_bound)
}

/// Leases a/b/c buffers, before a job whose a/b/c wait on the host starts
/// its first partition, for as many of its partitions as can be in flight
/// at once ([`abc_in_flight`]) and as the budget has room for now, then
/// gives them back to the pool idle, where those partitions' working sets
/// take them over. Page-locking the three 4.3 GB buffers of a 32 GiB PoRep
/// partition takes seconds and stalls the driver's other calls: done here,
/// before the job's first kernel region, instead of beside the kernel
/// regions of a freshly started engine's first proof. The spare working
/// set's buffers come first (its charge pays for them); each further set
/// only where a whole working set (`ws` bytes) fits beside everything held
/// now, idle memory included, without reclaiming anything, so no partition
/// later has to free them to make room for its witness. Idle buffers of the
/// size class are taken over, not leased twice. A lease that fails stops
/// this with a warning: the partitions lease their own.
fn lease_abc_ahead(shared: &Shared, job: &JobState, held: &mut Held, n: usize, ws: u64) {
    let start = Instant::now();
    let pool = &shared.pool;
    let before = pool.stats().allocations;
    let lease = || {
        AbcBuffers::lease(pool, n)
            .inspect_err(|e| {
                tracing::warn!(job = job.id.0, error = %e, "a/b/c buffers not leased ahead");
            })
            .ok()
    };
    if held.abc.is_none() {
        match lease() {
            Some(abc) => held.abc = Some(abc),
            None => return,
        }
    }
    let mut ahead = Vec::new();
    for _ in 1..abc_in_flight(&shared.config) {
        let Ok(Some((charge, idle))) =
            shared
                .budget
                .try_charge_taking_spare(ws, ChargeKind::WorkingSet, || AbcBuffers::reuse(pool, n))
        else {
            break;
        };
        let Some(abc) = idle.or_else(lease) else {
            drop(charge);
            break;
        };
        ahead.push((charge, Some(abc)));
    }
    let sets = ahead.len() + 1;
    for set in ahead {
        release(set);
    }
    let allocated = pool.stats().allocations - before;
    if allocated > 0 {
        tracing::info!(
            job = job.id.0,
            sets,
            allocated,
            pinned = pool.is_pinned(),
            seconds = start.elapsed().as_secs_f64(),
            "a/b/c buffers leased ahead"
        );
        let note = format!(
            "a/b/c buffers of {sets} partitions in flight leased ahead: {allocated} allocated{}",
            if pool.is_pinned() {
                " (page-locked)"
            } else {
                ""
            }
        );
        shared.timeline.record_noted(
            job.id.0,
            0,
            Lane::Host,
            0,
            ABC_AHEAD,
            start,
            Some(note.into()),
        );
    }
}

/// A PCE file read, and how long the read took.
fn timed_read(
    path: &std::path::Path,
    shape: &str,
    counts: ShapeCounts,
) -> Result<(Pce, std::time::Duration)> {
    let start = std::time::Instant::now();
    pce_file::read_pce(path, shape, Some(counts)).map(|p| (p, start.elapsed()))
}

pub(super) fn admit(shared: &Shared, job: &JobState, record: &RecordFn) -> Result<()> {
    loop {
        let stop = || job.is_terminated();
        job.lock().wait = Wait::Admission;
        let claimant = Some(Claimant::of(job));
        let Some(slot) = shared
            .admission
            .acquire(&shared.signal, job.priority, claimant, &stop)
        else {
            return Err(EngineError::Cancelled { job: job.id });
        };
        let _s = tracing::info_span!("admission", job = job.id.0).entered();
        loop {
            match try_admit(shared, job, &slot, record) {
                Ok(()) => return Ok(()),
                Err(AdmitError::Fail(e)) => return Err(e),
                Err(AdmitError::Retry) => {}
                Err(AdmitError::Yield) => {
                    tracing::debug!(job = job.id.0, "admission yields to a higher-priority job");
                    break;
                }
            }
        }
    }
}

/// Frees the device memory held across proofs that no job uses (resident
/// parameters, device PCEs, shape tables: [`Prover::release_idle`]) on each
/// device none of whose workers runs an item now, as the scheduler's
/// pressure hook does, and accounts for what stays held; the bytes freed.
fn release_idle_devices(shared: &Shared) -> u64 {
    let mut freed = 0;
    for (index, spec) in shared.scheduler.devices().iter().enumerate() {
        let Ok(memory) = shared.scheduler.device_memory(index) else {
            continue;
        };
        if memory.is_idle() {
            freed += shared.provers.release_idle_on(spec.ordinal);
            shared.provers.account(spec.ordinal, &memory);
        }
    }
    freed
}
