//! Page-locked (pinned) host buffers, pooled and reused.
//!
//! Copies between host and GPU run at the link's full speed only from
//! page-locked memory: from ordinary (pageable) memory the driver copies
//! through a small staging buffer at a fraction of that speed. Allocating
//! page-locked memory is itself slow and serializes in the driver. So large
//! host buffers (a/b/c, SRS batches) are leased from a [`Pool`] that
//! allocates rarely and reuses always:
//!
//! - Buffers come in size classes ([`size_class`]: four per doubling, at
//!   most 25% slack); a request reuses an idle buffer of its class and CPU
//!   access kind ([`CpuAccess`]) before anything is allocated.
//! - A [`Lease`] is an RAII handle, usable as bytes or as a typed slice
//!   ([`Lease::as_slice_of`], [`Lease::into_typed`]); it goes back to the pool
//!   when dropped, on any thread.
//! - An optional capacity bounds the bytes the pool holds. When a request does
//!   not fit, idle buffers of other classes are freed to make room; if that is
//!   not enough the caller chooses ([`WhenFull`]): fail at once with
//!   [`PinnedError::CapacityReached`], or wait (with a timeout and a
//!   [`CancelToken`]) for leases to come back. [`Pool::trim`] frees idle
//!   buffers; [`Pool::stats`] counts allocations, reuses, bytes held, bytes
//!   leased and peaks.
//! - [`Pool::register`] page-locks memory the pool did not allocate
//!   (`cuMemHostRegister`) for as long as the returned [`Registered`] guard
//!   lives.
//! - Without a GPU ([`Pool::fallback`], or [`Pool::pinned_or_fallback`] on a
//!   machine without driver or device) the same API works over ordinary
//!   page-aligned memory and [`Lease::is_pinned`] says `false`, so code above
//!   this crate runs and is tested anywhere.
//!
//! Pinned buffers are allocated with `cuMemHostAlloc(CU_MEMHOSTALLOC_PORTABLE)`
//! in the device's primary context, so any context may copy from them; only
//! [`CpuAccess::WriteOnly`] buffers are write-combined, because CPU reads of
//! write-combined memory are uncached and very slow.
//!
//! Types the caller owns (a field element, say) can be viewed in a lease with
//! the unsafe [`Lease::as_slice_of_unchecked`] / [`Lease::into_typed_unchecked`];
//! the caller promises the type is plain old data. See [`Pod`].
//!
//! This crate must never know about proofs, curves or circuits: it deals in
//! bytes and plain element types only. It never launches kernels, never
//! allocates device memory, and never retries an allocation in a sleep loop.

mod backend;
mod class;
mod lease;
mod pool;
mod register;

pub use cudarc::driver::sys::CUresult;

pub use class::{ALIGN, MIN_CLASS, size_class};
pub use lease::{Lease, Pod, TypedLease};
pub use pool::{CancelToken, CpuAccess, Pool, PoolConfig, PoolStats, Request, WhenFull};
pub use register::{Registered, RegisteredShared};

use std::time::Duration;

/// Errors of this crate.
///
/// Driver failures carry the raw `CUresult` code, printed by name (e.g.
/// `CUDA_ERROR_OUT_OF_MEMORY`) without calling back into the driver.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PinnedError {
    /// A pinned pool was asked for on a machine without the CUDA driver.
    #[error(
        "CUDA driver library (libcuda) not found: pinned memory needs the NVIDIA driver (use Pool::fallback or Pool::pinned_or_fallback on machines without a GPU)"
    )]
    NoDriver,
    /// The driver does not see the requested device.
    #[error("CUDA device {ordinal} not found: the driver reports {count} device(s)")]
    NoDevice { ordinal: usize, count: usize },
    /// A CUDA driver API call failed; `call` names it (e.g. `cuMemHostAlloc`).
    #[error("CUDA driver call {call} failed for {bytes} bytes: {code:?}")]
    Driver {
        call: &'static str,
        bytes: usize,
        code: CUresult,
    },
    /// Ordinary (fallback) memory could not be allocated.
    #[error("out of host memory: could not allocate {bytes} bytes")]
    OutOfHostMemory { bytes: usize },
    /// The request can never be served: its size class exceeds the pool's
    /// capacity (or `usize`).
    #[error(
        "a lease of {requested} bytes can never fit: its size class is {class_bytes:?} bytes and the pool's capacity is {capacity} bytes"
    )]
    TooLarge {
        requested: usize,
        /// `None` when the size class would overflow `usize`.
        class_bytes: Option<usize>,
        capacity: usize,
    },
    /// The pool is full and the request asked not to wait ([`WhenFull::Fail`]).
    #[error(
        "pinned pool full: a lease of {requested} bytes (class {class_bytes}) does not fit; capacity {capacity} bytes, {leased} bytes leased, {pending} bytes being allocated or freed"
    )]
    CapacityReached {
        requested: usize,
        class_bytes: usize,
        capacity: usize,
        leased: usize,
        pending: usize,
    },
    /// The pool stayed full for the whole wait.
    #[error(
        "timed out after {waited:?} waiting for {requested} bytes of pinned memory (capacity {capacity} bytes, {leased} bytes leased)"
    )]
    Timeout {
        requested: usize,
        waited: Duration,
        capacity: usize,
        leased: usize,
    },
    /// The wait was cancelled through its [`CancelToken`].
    #[error("waiting for a lease of {requested} bytes was cancelled")]
    Cancelled { requested: usize },
    /// A lease's bytes cannot be viewed as the asked-for element type.
    #[error(
        "cannot view {len_bytes} bytes as [{type_name}] (size {size}, align {align}): the size must be non-zero and divide the length, and the alignment at most {ALIGN}"
    )]
    Layout {
        type_name: &'static str,
        size: usize,
        align: usize,
        len_bytes: usize,
    },
}

/// `Result` with this crate's error.
pub type Result<T, E = PinnedError> = std::result::Result<T, E>;
