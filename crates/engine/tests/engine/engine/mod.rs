//! The engine on the CPU backend: proofs byte-identical to bellperson,
//! priorities, cancellation that gives everything back, refusals with
//! numbers, failures confined to their job, the PCE directory, the
//! parameter manager, and the timeline.
//!
//! One file per area; the circuits, parameters and engines they share are
//! in `crate::common`.

mod device_memory;
mod failures;
mod host_memory;
mod host_pce;
mod params_and_pce;
mod proofs;
mod scheduling;
mod status_and_timeline;

pub(super) const MIB: u64 = 1 << 20;
