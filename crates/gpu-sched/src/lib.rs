//! GPU mechanism for cuzk: which CUDA devices exist ([`discover`]), and a
//! [`Scheduler`] that runs opaque work items on them: per-device workers
//! (two by default), a per-device kernel-region lock granted by priority,
//! a four-class priority queue, device-memory reservations, reactive
//! dispatch ([`DispatchBound`]) and cancellation ([`CancelToken`]).
//!
//! A work item is three phases run by one worker: *prep* (outside the lock),
//! the *kernel region* (inside the device's lock) and an *epilogue* (outside
//! the lock), plus a priority and the device memory it needs. While one
//! worker of a device runs its kernel region, the other preps its next item
//! or finishes its last one, so the GPU never waits for the CPU when prep and
//! epilogue together take less time than a kernel region. The scheduling
//! model and its invariants are in `docs/ARCHITECTURE.md`, "Scheduling
//! model".
//!
//! ```no_run
//! use cuzk_gpu_sched::*;
//!
//! # fn main() -> Result<()> {
//! let devices = discover()?.iter().map(DeviceSpec::from).collect();
//! let scheduler = Scheduler::new(SchedulerConfig::default(), devices)?;
//! let bound = DispatchBound::new(4)?;
//! let job = scheduler.create_job(Priority::High);
//! for partition in 0..10 {
//!     // One partition synthesized per partition finished.
//!     let permit = bound.acquire(job.priority(), job.cancel_token())?;
//!     let phases = Phases::new(
//!         |_ctx| Ok(vec![0u8; 16]),               // prep: stage buffers
//!         |_ctx, staged| Ok(staged.len()),         // kernel region
//!         |_ctx, _points| Ok(()),                  // epilogue
//!     );
//!     scheduler.submit(WorkItem::new(&job, partition, 1 << 30, phases).with_permit(permit))?;
//! }
//! job.close();
//! let summary = job.wait()?;
//! # let _ = summary;
//! # Ok(())
//! # }
//! ```
//!
//! This crate decides *which worker may launch kernels on which device and
//! when*; it must never know about proofs, curves, circuits or parameters.
//! The engine owns policy (what runs next, budgets, priorities of jobs); this
//! crate only provides the mechanism, so nothing here depends on bellperson,
//! blstrs or any other cuzk crate.
//!
//! The CUDA driver (libcuda) is loaded at run time by cudarc: this crate
//! builds and its tests run on machines with no driver and no GPU, where
//! [`discover`] returns an empty list and the scheduler runs on fake devices
//! ([`DeviceSpec`]).

mod cancel;
mod core;
mod device;
mod permits;
mod scheduler;
#[cfg(test)]
mod sim;
pub mod testing;

use std::fmt;

pub use cancel::CancelToken;
pub use core::{DeviceSnapshot, JobSummary, SchedulerSnapshot};
pub use cudarc::driver::sys::CUresult;
pub use device::{DeviceInfo, Probe, discover, probe};
pub use permits::{DispatchBound, DispatchPermit};
pub use scheduler::{
    DeviceMemory, DeviceSpec, JobHandle, PhaseError, Phases, PressureHook, Reservation, Scheduler,
    SchedulerConfig, WorkItem, WorkerContext,
};

/// Priority class of a job. Higher classes overtake lower ones at
/// partition granularity: in the queue, at the kernel lock and for dispatch
/// permits. `Critical > High > Normal > Low`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Priority {
    /// Background work.
    Low,
    /// Bulk work (PoRep, SnapDeals in cuzk's engine).
    #[default]
    Normal,
    /// Deadline work (WindowPoSt).
    High,
    /// Work that must never wait (WinningPoSt).
    Critical,
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Priority::Low => "low",
            Priority::Normal => "normal",
            Priority::High => "high",
            Priority::Critical => "critical",
        })
    }
}

/// Identifies a job within one [`Scheduler`]. Ids grow in creation order,
/// which is the FIFO order of jobs within a priority class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct JobId(pub u64);

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "job {}", self.0)
    }
}

/// The three phases of a work item.
///
/// What each may do on the device: the kernel region may launch anything;
/// prep may copy the item's inputs to the device and launch short kernels
/// over them (for a proof: a/b/c from the circuit's matrices and the
/// witness check), on its worker's own stream, so they run beside the
/// other worker's kernel region and never queue behind it; the epilogue
/// uses no device. The lock orders the long, device-filling work;
/// prep's work overlaps it by design, and what it allocates is within the
/// item's reserved memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Before the kernel region, outside the lock: uploads, and short
    /// kernels over the item's own inputs on the worker's own stream.
    Prep,
    /// The kernel region, inside the device's kernel lock.
    Kernel,
    /// After the kernel region, outside the lock.
    Epilogue,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Phase::Prep => "prep",
            Phase::Kernel => "kernel region",
            Phase::Epilogue => "epilogue",
        })
    }
}

/// Errors of this crate.
///
/// Driver failures carry the raw `CUresult` code, whose name (e.g.
/// `CUDA_ERROR_NO_DEVICE`) is printed without calling back into the driver.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GpuSchedError {
    /// A CUDA driver API call failed; `call` names it (e.g. `cuInit`).
    #[error("CUDA driver call {call} failed: {code:?}")]
    Driver { call: &'static str, code: CUresult },
    /// A CUDA driver API call about one device failed.
    #[error("CUDA driver call {call} failed for device {ordinal}: {code:?}")]
    DeviceQuery {
        call: &'static str,
        ordinal: usize,
        code: CUresult,
    },
    /// `SchedulerConfig::workers_per_device` was 0.
    #[error("workers_per_device must be at least 1")]
    ZeroWorkers,
    /// `DispatchBound::new(0)`: nothing could ever be dispatched.
    #[error("a dispatch bound must allow at least 1 item in flight")]
    ZeroDispatchBound,
    /// Work was submitted to a scheduler that has no device.
    #[error("no GPU to run work on: the scheduler was created with zero devices")]
    NoDevices,
    /// A device index beyond the scheduler's devices.
    #[error("no device with index {index} in this scheduler")]
    NoSuchDevice { index: usize },
    /// A work item needs more device memory than any device can ever give
    /// it (capacity minus margin minus standing reservations).
    #[error(
        "{job} partition {partition} needs {need_bytes} bytes of device memory, but the \
         largest device offers {largest_usable_bytes} (capacity minus margin and standing \
         reservations)"
    )]
    ItemNeverFits {
        job: JobId,
        partition: u32,
        need_bytes: u64,
        largest_usable_bytes: u64,
    },
    /// A reservation larger than what the device can ever give.
    #[error(
        "a reservation of {need_bytes} bytes can never fit on GPU {ordinal}: it offers \
         {usable_bytes} (capacity minus margin and standing reservations)"
    )]
    ReservationNeverFits {
        ordinal: usize,
        need_bytes: u64,
        usable_bytes: u64,
    },
    /// The job was cancelled (its outcome, or a submission to it).
    #[error("{job} was cancelled")]
    JobCancelled { job: JobId },
    /// A submission to a job that was closed (or whose handles are gone).
    #[error("{job} is closed: no more work items can be submitted to it")]
    JobClosed { job: JobId },
    /// A work item built from a job of another scheduler.
    #[error("{job} belongs to another scheduler")]
    ForeignJob { job: JobId },
    /// A blocking wait was cancelled through its [`CancelToken`].
    #[error("cancelled while waiting for {waiting_for}")]
    Cancelled { waiting_for: &'static str },
    /// The scheduler was dropped.
    #[error("the GPU scheduler has shut down")]
    ShutDown,
    /// A blocking call from inside a phase, which could deadlock the device.
    #[error(
        "{call} would block inside a work item's phase, which can deadlock the device; \
         declare the memory in the WorkItem or use a non-blocking try_ call"
    )]
    BlockingInPhase { call: &'static str },
    /// A phase returned an error; `message` is its error chain.
    #[error("{job} partition {partition}: {phase} failed: {message}")]
    PhaseFailed {
        job: JobId,
        partition: u32,
        phase: Phase,
        message: String,
    },
    /// A phase panicked; the worker survived it.
    #[error("{job} partition {partition}: {phase} panicked: {message}")]
    PhasePanicked {
        job: JobId,
        partition: u32,
        phase: Phase,
        message: String,
    },
    /// The operating system refused to start a worker thread.
    #[error("could not start a worker thread for GPU {ordinal}: {message}")]
    WorkerSpawn { ordinal: usize, message: String },
}

/// `Result` with this crate's error.
pub type Result<T, E = GpuSchedError> = std::result::Result<T, E>;
