//! What is submitted: a work item (job, partition, device memory, permit),
//! its three phases chained so each hands its result to the next, and the
//! context a phase runs in.

use std::fmt;

use super::{DeviceMemory, JobHandle};
use crate::{CancelToken, DispatchPermit, JobId, Phase, Priority, Result};

/// What a phase returns on failure; the scheduler keeps its error chain as
/// text in [`GpuSchedError::PhaseFailed`](crate::GpuSchedError::PhaseFailed).
/// A caller that needs its own typed error back sends it out from the phase
/// (e.g. on a channel it captured).
pub type PhaseError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// The three phases of a work item, run in order on one worker. Each hands
/// its result to the next.
pub struct Phases {
    pub(super) inner: Box<dyn RunPhase>,
}

impl fmt::Debug for Phases {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Phases { .. }")
    }
}

impl Phases {
    /// `prep` runs outside the kernel lock, `kernel` inside it, `epilogue`
    /// outside it again.
    pub fn new<A, B, P, K, E>(prep: P, kernel: K, epilogue: E) -> Self
    where
        A: Send + 'static,
        B: Send + 'static,
        P: FnOnce(&WorkerContext) -> Result<A, PhaseError> + Send + 'static,
        K: FnOnce(&WorkerContext, A) -> Result<B, PhaseError> + Send + 'static,
        E: FnOnce(&WorkerContext, B) -> Result<(), PhaseError> + Send + 'static,
    {
        Self {
            inner: Box::new(Chain::Prep(prep, kernel, epilogue)),
        }
    }
}

pub(super) trait RunPhase: Send {
    fn run(&mut self, phase: Phase, ctx: &WorkerContext) -> Result<(), PhaseError>;
}

enum Chain<A, B, P, K, E> {
    Prep(P, K, E),
    Kernel(A, K, E),
    Epilogue(B, E),
    Done,
}

impl<A, B, P, K, E> RunPhase for Chain<A, B, P, K, E>
where
    A: Send,
    B: Send,
    P: FnOnce(&WorkerContext) -> Result<A, PhaseError> + Send,
    K: FnOnce(&WorkerContext, A) -> Result<B, PhaseError> + Send,
    E: FnOnce(&WorkerContext, B) -> Result<(), PhaseError> + Send,
{
    fn run(&mut self, phase: Phase, ctx: &WorkerContext) -> Result<(), PhaseError> {
        match (std::mem::replace(self, Chain::Done), phase) {
            (Chain::Prep(prep, kernel, epilogue), Phase::Prep) => {
                *self = Chain::Kernel(prep(ctx)?, kernel, epilogue);
                Ok(())
            }
            (Chain::Kernel(a, kernel, epilogue), Phase::Kernel) => {
                *self = Chain::Epilogue(kernel(ctx, a)?, epilogue);
                Ok(())
            }
            (Chain::Epilogue(b, epilogue), Phase::Epilogue) => epilogue(ctx, b),
            // The worker runs the phases in order, once each.
            (_, phase) => Err(format!("{phase} run out of order").into()),
        }
    }
}

/// One partition's GPU work: its job, partition index and priority (the
/// job's), the device memory it needs while on a worker, and its phases.
#[derive(Debug)]
pub struct WorkItem {
    pub(super) scheduler: u64,
    pub(super) job: JobId,
    pub(super) priority: Priority,
    pub(super) partition: u32,
    pub(super) device_bytes: u64,
    pub(super) phases: Phases,
    pub(super) permit: Option<DispatchPermit>,
    pub(super) token: CancelToken,
}

impl WorkItem {
    /// `device_bytes` are reserved on the chosen device before prep and
    /// released after the epilogue.
    pub fn new(job: &JobHandle, partition: u32, device_bytes: u64, phases: Phases) -> Self {
        Self {
            scheduler: job.inner.shared.id,
            job: job.inner.id,
            priority: job.inner.priority,
            partition,
            device_bytes,
            phases,
            permit: None,
            token: job.inner.token.clone(),
        }
    }

    /// Holds `permit` until the item is done, failed, cancelled or refused.
    pub fn with_permit(mut self, permit: DispatchPermit) -> Self {
        self.permit = Some(permit);
        self
    }

    /// The job.
    pub fn job(&self) -> JobId {
        self.job
    }

    /// The partition index.
    pub fn partition(&self) -> u32 {
        self.partition
    }

    /// The priority class (the job's).
    pub fn priority(&self) -> Priority {
        self.priority
    }

    /// The device memory it needs.
    pub fn device_bytes(&self) -> u64 {
        self.device_bytes
    }
}

/// What the scheduler stores for an item.
pub(super) struct Payload {
    pub(super) phases: Phases,
    pub(super) permit: Option<DispatchPermit>,
    pub(super) token: CancelToken,
}

impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Payload { .. }")
    }
}

/// Where a phase runs, passed to each phase.
#[derive(Debug)]
pub struct WorkerContext {
    pub(super) device_index: usize,
    pub(super) ordinal: usize,
    pub(super) worker: usize,
    pub(super) job: JobId,
    pub(super) partition: u32,
    pub(super) priority: Priority,
    pub(super) device_bytes: u64,
    pub(super) token: CancelToken,
    pub(super) memory: DeviceMemory,
}

impl WorkerContext {
    /// Driver ordinal of the device.
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// Index of the device in the scheduler's device list.
    pub fn device_index(&self) -> usize {
        self.device_index
    }

    /// The worker within its device, `0..workers_per_device`.
    pub fn worker(&self) -> usize {
        self.worker
    }

    /// The item's job.
    pub fn job(&self) -> JobId {
        self.job
    }

    /// The item's partition index.
    pub fn partition(&self) -> u32 {
        self.partition
    }

    /// The item's priority class.
    pub fn priority(&self) -> Priority {
        self.priority
    }

    /// Device memory reserved for this item.
    pub fn device_bytes(&self) -> u64 {
        self.device_bytes
    }

    /// Whether the job was cancelled; a long phase may check it and return
    /// early (the scheduler never interrupts a phase).
    pub fn is_cancelled(&self) -> bool {
        self.token.is_cancelled()
    }

    /// The job's cancellation token.
    pub fn cancel_token(&self) -> &CancelToken {
        &self.token
    }

    /// The device's memory, for `try_reserve` of extra buffers.
    pub fn device_memory(&self) -> &DeviceMemory {
        &self.memory
    }
}
