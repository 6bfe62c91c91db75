//! cuzk-groth16-cuda: one test executable; the `gpu_*` modules run on a CUDA device and skip without one (fail with CUZK_REQUIRE_GPU=1).

mod bellperson_compat;
mod gpu_arith;
mod gpu_msm;
mod gpu_ntt;
mod gpu_prover;
mod gpu_runtime;
mod gpu_setup;
mod gpu_spmv;
mod setup_cpu;
