//! GPU mechanism for cuzk: which CUDA devices exist, and (to come) the
//! per-GPU kernel-region lock, the workers bound to each device, priority
//! queues and dispatch of work to workers.
//!
//! Only device discovery ([`discover`]) and the shared GPU-test helper
//! ([`testing::gpu_or_skip`]) exist so far.
//!
//! This crate decides *which worker may launch kernels on which device and
//! when*; it must never know about proofs, curves, circuits or parameters.
//! The engine owns policy (what runs next, budgets); this crate only provides
//! the mechanism, so nothing here depends on bellperson, blstrs or any other
//! cuzk crate.
//!
//! The CUDA driver (libcuda) is loaded at run time by cudarc: this crate
//! builds and its tests run on machines with no driver and no GPU, where
//! [`discover`] returns an empty list.

mod device;
pub mod testing;

pub use cudarc::driver::sys::CUresult;
pub use device::{DeviceInfo, discover};

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
}

/// `Result` with this crate's error.
pub type Result<T, E = GpuSchedError> = std::result::Result<T, E>;
