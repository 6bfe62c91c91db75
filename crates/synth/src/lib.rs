//! Constraint systems for cuzk: turn any `bellperson::Circuit<blstrs::Scalar>`
//! into the data the GPU prover needs.
//!
//! - [`pce`]: a recording constraint system that captures the R1CS once per
//!   circuit shape as CSR matrices A, B, C (the pre-compiled constraint
//!   evaluator, PCE) plus bellperson's density bitmaps.
//! - [`allocator`]: the heap allocator cuzk's programs install (mimalloc).
//! - [`witness`]: a witness-only constraint system (values, no constraints).
//! - [`gate`]: first come, first served entry for witnesses synthesized in
//!   parts on rayon's pool.
//! - [`profile`]: witness synthesis time by namespace path.
//! - [`native`]: gadgets computed natively for witnesses (SHA-256), the
//!   same variables, values and constraints as bellperson's.
//! - [`spmv`]: a = A·w, b = B·w, c = C·w in parallel, and the row-by-row
//!   satisfaction check.
//! - [`circuits`]: built-in circuits for tests, demos and benchmarks.
//!
//! This crate never links CUDA and knows nothing about devices or scheduling.

pub mod allocator;
pub mod circuits;
pub mod error;
pub mod gate;
pub mod native;
pub mod pce;
pub mod profile;
pub mod spmv;
pub mod witness;

pub use error::{Result, SynthError};
pub use gate::PartsGate;
pub use pce::{Csr, Density, MatrixSource, Pce, PceMemo, RecordingCs, Released};
pub use profile::Profile;
pub use spmv::{Abc, check_satisfied, evaluate};
pub use witness::{PartCs, Witness, WitnessCs, huge_pages, set_huge_pages};
