//! `cuzk-sweep`: the engine's throughput over a grid of settings (any
//! engine configuration key, `--grid key=v1,v2,...`, every combination) and
//! circuit sizes, with repeats. Per run it writes one bench-data JSON
//! document (area `sweep`: revision, GPU, driver, command line, and per
//! grid point the median, spread and quartiles of seconds per partition,
//! proofs/s and the GPU busy fraction), one CSV, and SVG plots of
//! throughput and busy fraction against each swept key.
//!
//! It is a tool, like the `cuzk` binary: errors are `anyhow` chains and it
//! prints progress. It ships as one binary to the GPU machine, which has no
//! cargo (`cargo xtask sweep bundle`); `cargo xtask sweep run` runs it here
//! and `cargo xtask sweep plot` redraws the plots of saved JSON. The
//! measuring itself is `cuzk_engine::bench`, which `engine_bench` shares; this
//! crate never proves anything any other way.

pub mod cli;
pub mod plot;
pub mod report;
pub mod run;

pub use report::SweepDoc;
pub use run::{Plan, Written, run};
