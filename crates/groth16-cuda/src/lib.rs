//! Groth16 prover backends for BLS12-381.
//!
//! A [`Prover`] takes a recorded circuit shape (the PCE), a witness, its
//! a/b/c evaluations (or lets the backend compute them), the parameters and
//! the randomness r and s, and returns a `bellperson::groth16::Proof` that is
//! byte-identical to what `bellperson::groth16::create_proof` makes from the
//! same inputs. [`CpuProver`] is built from bellperson's own building blocks
//! and is the reference every GPU routine is compared with; the CUDA backend
//! comes behind the same trait.
//!
//! This crate proves one partition at a time. It never schedules: which
//! worker runs what, and when, is decided by `gpu-sched` and the engine.

pub mod cpu;
pub mod cuda;
pub mod digits;
pub mod error;
pub mod fake;
pub mod gpu;
pub mod mont;
pub mod msm;
pub mod ntt;
pub mod params;
pub mod prover;
pub mod setup;
pub mod spmv;
mod streamed;

pub use cpu::CpuProver;
pub use error::{Groth16Error, Result};
pub use gpu::{
    BOUNCE_BYTES, GpuOptions, GpuProver, ParamsPlacement, Query, ResidentQueries, Staging,
    params_device_bytes, stage_on_device,
};
pub use msm::{Accumulate, DeviceBases, DeviceDensity, GpuMsm, MsmConfig};
pub use ntt::{GpuNtt, HBuffers, Pointwise, Upload};
pub use params::{
    check_params, read_params, read_params_from, read_verifying_key, write_atomically, write_params,
};
pub use prover::{
    AbcInput, AbcPlacement, MsmResults, ProofOutput, Prover, ProverInput, StageTimings, Staged,
    assemble,
};
pub use setup::{
    SetupBackend, SetupOptions, SetupReport, ToxicWaste, generate_parameters_file, write_parameters,
};
pub use spmv::{DevicePce, GpuSpmv, PceShapeKey};

/// The pairing engine every cuzk proof is over.
pub type Bls12 = blstrs::Bls12;
