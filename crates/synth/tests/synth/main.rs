//! cuzk-synth: one test executable.

mod instance_memory;
mod spmv_naive;
