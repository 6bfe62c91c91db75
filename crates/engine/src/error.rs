//! The engine's errors: what the user asked for that cannot be done, and what
//! failed in which job and partition.

use std::path::PathBuf;

use cuzk_gpu_sched::{GpuSchedError, JobId};
use cuzk_groth16_cuda::Groth16Error;
use cuzk_pinned_pool::PinnedError;
use cuzk_synth::SynthError;

/// Bytes as `12.3 MiB (12897484 bytes)`, for messages that name numbers.
pub fn fmt_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} bytes");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {} ({bytes} bytes)", UNITS[unit])
}

/// What went wrong in the pipeline.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// Synthesis outside a job (`prove_partition`).
    #[error(transparent)]
    Synth(#[from] SynthError),

    /// Proving outside a job (`prove_partition`).
    #[error(transparent)]
    Groth16(#[from] Groth16Error),

    /// A partition's witness, SpMV or satisfaction check failed.
    #[error("{job} partition {partition}: synthesis failed: {source}")]
    PartitionSynthesis {
        job: JobId,
        partition: u32,
        #[source]
        source: SynthError,
    },

    /// A partition's backend stage failed.
    #[error("{job} partition {partition}: {stage} failed: {source}")]
    PartitionProve {
        job: JobId,
        partition: u32,
        stage: &'static str,
        #[source]
        source: Groth16Error,
    },

    /// User code (a circuit's `synthesize`) panicked.
    #[error("{job} partition {partition}: {stage} panicked: {message}")]
    Panicked {
        job: JobId,
        partition: u32,
        stage: &'static str,
        message: String,
    },

    /// The job can never fit in the host memory budget, however long it waits.
    #[error(
        "{job} can never fit in the host memory budget: it needs {} at once (PCE {} + parameters \
         {} + one partition's working set {}) but the budget is {}; raise host_memory_budget or \
         prove a smaller circuit",
        fmt_bytes(*need_bytes), fmt_bytes(*pce_bytes), fmt_bytes(*params_bytes),
        fmt_bytes(*working_set_bytes), fmt_bytes(*budget_bytes)
    )]
    JobNeverFits {
        job: JobId,
        need_bytes: u64,
        pce_bytes: u64,
        params_bytes: u64,
        working_set_bytes: u64,
        budget_bytes: u64,
    },

    /// A single charge larger than the whole budget.
    #[error(
        "{what} needs {} but the whole host memory budget is {}",
        fmt_bytes(*need_bytes), fmt_bytes(*budget_bytes)
    )]
    NeverFits {
        what: &'static str,
        need_bytes: u64,
        budget_bytes: u64,
    },

    /// The job was cancelled through its handle.
    #[error("{job} was cancelled")]
    Cancelled { job: JobId },

    /// A wait was given up because its caller asked to stop.
    #[error("cancelled while waiting for {waiting_for}")]
    WaitCancelled { waiting_for: &'static str },

    /// The engine was dropped while the job was running.
    #[error("the engine shut down before {job} finished")]
    ShutDown { job: JobId },

    /// The engine is shutting down and takes no more work.
    #[error("the engine is shutting down: no more requests are accepted")]
    EngineShutDown,

    /// A request without partitions.
    #[error("a proof request needs at least one partition")]
    EmptyRequest,

    /// Explicit randomness for a different number of partitions.
    #[error("the request has {partitions} partitions but {pairs} (r, s) pairs")]
    RandomnessMismatch { partitions: usize, pairs: usize },

    /// More partitions than the scheduler can number.
    #[error("a request has {partitions} partitions; at most {max} are supported")]
    TooManyPartitions { partitions: usize, max: usize },

    /// `ParamsRef::Key` that was never registered.
    #[error(
        "no parameters registered under key `{key}` (Engine::register_params or \
         register_params_loader first)"
    )]
    ParamsNotRegistered { key: String },

    /// The loader registered under `key` failed (or panicked).
    #[error("parameters `{key}`: the loader failed: {source}")]
    ParamsLoader {
        key: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// Parameters could not be read or do not fit the circuit.
    #[error("parameters {id}: {source}")]
    Params {
        id: String,
        #[source]
        source: Groth16Error,
    },

    /// The parameter file's size could not be read.
    #[error("parameters {path}: {source}")]
    ParamsIo {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// Explicit eviction of parameters a job still uses.
    #[error(
        "parameters {id} are in use by running jobs ({holds} references held) and cannot be \
         evicted now"
    )]
    ParamsInUse { id: String, holds: usize },

    /// The on-disk PCE could not be read or written.
    #[error("PCE file {path}: {source}")]
    PceIo {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The on-disk PCE is shorter than its header says.
    #[error(
        "PCE file {path} is truncated: it has {found_bytes} bytes but its header promises {expected_bytes}"
    )]
    PceTruncated {
        path: PathBuf,
        expected_bytes: u64,
        found_bytes: u64,
    },

    /// The on-disk PCE is damaged or not a PCE file.
    #[error("PCE file {path} is corrupt: {detail}")]
    PceCorrupt { path: PathBuf, detail: String },

    /// The on-disk PCE was written by another format version.
    #[error("PCE file {path} has format version {found}; this build reads version {supported}")]
    PceVersion {
        path: PathBuf,
        found: u32,
        supported: u32,
    },

    /// The on-disk PCE is of another circuit shape.
    #[error("PCE file {path} is for {what} {found}, expected {expected}")]
    PceShapeMismatch {
        path: PathBuf,
        what: &'static str,
        expected: String,
        found: String,
    },

    /// The configuration is invalid.
    #[error("engine configuration: {0}")]
    Config(String),

    /// The configuration file could not be read.
    #[error("engine configuration {path}: {source}")]
    ConfigIo {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A backend that this build cannot run.
    #[error("backend `{backend}` is not available: {reason}")]
    BackendUnavailable {
        backend: &'static str,
        reason: String,
    },

    /// The GPU scheduler refused or failed.
    #[error(transparent)]
    Scheduler(#[from] GpuSchedError),

    /// A pinned buffer could not be leased.
    #[error("{job} partition {partition}: pinned buffer: {source}")]
    Pinned {
        job: JobId,
        partition: u32,
        #[source]
        source: PinnedError,
    },

    /// The pinned pool could not be created.
    #[error("pinned pool: {0}")]
    PinnedPool(#[source] PinnedError),

    /// The operating system refused a thread.
    #[error("could not start the engine's {what} thread: {source}")]
    Spawn {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },

    /// A broken internal invariant (a bug: reported, never a panic).
    #[error("internal error: {0}")]
    Internal(String),

    /// The job ended with proofs missing (a bug: reported, never a panic).
    #[error("{job} ended with {missing} of its proofs missing")]
    Incomplete { job: JobId, missing: usize },
}

/// `Result` with [`EngineError`].
pub type Result<T, E = EngineError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_human_and_exact() {
        assert_eq!(fmt_bytes(5), "5 bytes");
        assert_eq!(fmt_bytes(1536), "1.5 KiB (1536 bytes)");
        assert_eq!(fmt_bytes(3 << 30), "3.0 GiB (3221225472 bytes)");
    }
}
