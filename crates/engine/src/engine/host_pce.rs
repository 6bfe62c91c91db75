//! A PCE's matrices dropped from host memory while every device keeps them
//! (`release_host_pce`): 8.9 GB of a 32 GiB PoRep's 9 GB PCE, which the
//! host needs only to evaluate a/b/c itself or to put the PCE on a device
//! again. What stays is what every partition reads on the host (counts,
//! densities, the coefficient table, the fingerprint); the matrices come
//! back from the PCE's file in `pce_cache_dir` ([`Pce::with_matrices`]).
//!
//! The cache's entry, every job of the shape evaluating a/b/c on the device
//! and the partition that found the PCE on every device take the lighter
//! value; the budget keeps the matrices' charge until the last partition
//! still holding the whole PCE drops it (`Cache::replace_lighter`). A job
//! admitted later with a/b/c on the host reads the file again (admission's
//! `PceSource::Disk`); a device that freed its copy reads it again while it
//! uploads, outside the budget (logged as a warning).

use super::*;
use crate::timeline::PCE_RELEASE;

/// The PCE file of `shape` in `pce_cache_dir`, when there is one.
fn pce_file_of(shared: &Shared, shape: &ShapeId) -> Option<PathBuf> {
    let path = shared
        .config
        .pce_cache_dir
        .as_ref()?
        .join(pce_file::file_name(&shape.0));
    path.is_file().then_some(path)
}

/// Where `pce`'s matrices are read again: its file, checked against its
/// counts (and, by `Pce::with_matrices`, its fingerprint).
fn file_source(path: PathBuf, shape: &ShapeId, pce: &Pce) -> cuzk_synth::MatrixSource {
    let counts = ShapeCounts::of(pce);
    let shape = shape.0.clone();
    let what = format!("the PCE file {}", path.display());
    cuzk_synth::MatrixSource::new(what, move || {
        pce_file::read_pce(&path, &shape, Some(counts)).map_err(|e| e.to_string())
    })
}

/// Live jobs of `shape` that hold a PCE.
fn jobs_of(shared: &Shared, shape: &ShapeId) -> Vec<Arc<JobState>> {
    let live: Vec<Arc<JobState>> = {
        let st = shared.lock();
        st.jobs.iter().filter_map(Weak::upgrade).collect()
    };
    live.into_iter().filter(|j| j.shape == *shape).collect()
}

/// Gives every job in `jobs` that holds `full` and evaluates a/b/c on the
/// device `light` instead.
fn lighten_jobs(jobs: &[Arc<JobState>], full: &Arc<Pce>, light: &Arc<Pce>) {
    for job in jobs {
        let mut st = job.lock();
        let on_device = st.abc.as_ref().is_some_and(|p| p.on_device);
        if on_device && st.pce.as_ref().is_some_and(|p| Arc::ptr_eq(p, full)) {
            st.pce = Some(Arc::clone(light));
        }
    }
}

/// For a partition synthesized with a/b/c on the device, before its
/// submission: when every device keeps its PCE, the PCE's file is in
/// `pce_cache_dir` and no live job of the shape evaluates a/b/c on the host,
/// drops the matrices from host memory (recorded on the job's timeline as
/// `pce_release`); when another partition did so already, takes the lighter
/// value. Returns whether it released them.
pub(super) fn release_if_held(shared: &Shared, index: usize, work: &mut PartitionWork) -> bool {
    if !work.abc_on_device || !shared.config.release_host_pce || work.pce.is_released() {
        return false;
    }
    let job = Arc::clone(&work.job);
    let Some(cached) = shared.pces.get(&job.shape) else {
        return false;
    };
    if cached.is_released() {
        // Released by another partition: this one and its job follow,
        // unless the cache holds another circuit's PCE under this id.
        if cached.fingerprint() == work.pce.fingerprint() {
            lighten_jobs(std::slice::from_ref(&job), &work.pce, &cached);
            work.pce = cached;
        }
        return false;
    }
    if !Arc::ptr_eq(&cached, &work.pce) || !shared.provers.hold_pce(&work.pce) {
        return false;
    }
    let Some(path) = pce_file_of(shared, &job.shape) else {
        return false;
    };
    let jobs = jobs_of(shared, &job.shape);
    let on_host = jobs.iter().any(|j| {
        let st = j.lock();
        st.pce.is_some() && st.abc.as_ref().is_some_and(|p| !p.on_device)
    });
    if on_host {
        // Its CPU SpMV reads the matrices: they stay (releasing them would
        // free nothing while that job holds them).
        return false;
    }
    let start = Instant::now();
    let full = Arc::clone(&work.pce);
    let light = Arc::new(full.release_matrices(file_source(path.clone(), &job.shape, &full)));
    let keep = light.bytes() as u64;
    if !shared
        .pces
        .replace_lighter(&job.shape, &full, Arc::clone(&light), keep)
    {
        return false;
    }
    lighten_jobs(&jobs, &full, &light);
    work.pce = Arc::clone(&light);
    let bytes = full.matrix_bytes() as u64;
    drop((full, cached));
    tracing::info!(
        job = job.id.0,
        shape = %job.shape,
        bytes,
        path = %path.display(),
        "every device keeps the PCE: its matrices are released from host memory"
    );
    shared.timeline.record_noted(
        job.id.0,
        work.partition,
        Lane::Host,
        index,
        PCE_RELEASE,
        start,
        Some(Arc::from(format!(
            "every device keeps the PCE: its matrices ({}) leave host memory once the \
             partitions holding them finish; read again from {} where the host needs them",
            crate::error::fmt_bytes(bytes),
            path.display()
        ))),
    );
    true
}
