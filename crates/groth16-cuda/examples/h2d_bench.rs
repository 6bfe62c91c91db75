//! Host-to-device copy bandwidth on GPU 0, the figures streamed parameters
//! are measured against: one buffer of `--mib` MiB copied from ordinary
//! (pageable) memory, from a page-locked lease of the pinned pool (the
//! link's peak as cuzk reaches it), and from a shared vector page-locked in
//! place (`Pool::register_shared`, what a streamed parameter set uses),
//! `--runs` times each, wall clock around a copy and the wait for it.
//!
//! Usage: h2d_bench <short git revision> <command line for the record>
//!        [--mib 1024] [--runs 5]
//! Writes the bench-data JSON (area `h2d`, GB/s) to stdout; progress to stderr.

#[path = "common/args.rs"]
mod args;
#[path = "common/mod.rs"]
mod common;
use args::OptionalRecord;
use common::{Stat, machine, today};

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, ensure};
use blstrs::Scalar;
use clap::Parser;
use cuzk_groth16_cuda::cuda::Gpu;
use cuzk_pinned_pool::{Pool, PoolConfig, Request};
use ff::Field;
use serde_json::json;

/// Host-to-device copy bandwidth on GPU 0 from pageable memory, a pinned
/// pool lease and a shared vector page-locked in place; writes the
/// bench-data JSON (GB/s) to stdout, progress to stderr.
#[derive(Debug, Parser)]
#[command(name = "h2d_bench", args_override_self = true)]
struct Args {
    #[command(flatten)]
    record: OptionalRecord,
    /// MiB per copy.
    #[arg(long, default_value_t = 1024)]
    mib: usize,
    /// Copies per kind of host memory.
    #[arg(long, default_value_t = 5)]
    runs: usize,
}

fn main() -> Result<()> {
    let args = Args::parse();
    ensure!(
        args.mib > 0 && args.runs > 0,
        "--mib and --runs must be positive"
    );
    let gpu = Gpu::get(0).context("opening GPU 0")?;
    let n = (args.mib << 20) / size_of::<Scalar>();
    let bytes = (n * size_of::<Scalar>()) as f64;
    let mut device = gpu.alloc_zeros::<Scalar>(n)?;
    let time = |src: &[Scalar], device: &mut cuzk_groth16_cuda::cuda::DeviceBuffer<Scalar>| {
        (0..args.runs)
            .map(|_| {
                let t = Instant::now();
                device.copy_from_host(src)?;
                Ok(bytes / t.elapsed().as_secs_f64() / 1e9)
            })
            .collect::<Result<Vec<f64>>>()
    };

    let pageable: Vec<Scalar> = (0..n as u64).map(Scalar::from).collect();
    let from_pageable = time(&pageable, &mut device)?;
    eprintln!("[h2d_bench] pageable {from_pageable:.1?} GB/s");

    let pool = Pool::pinned(0, PoolConfig::unbounded()).context("opening the pinned pool")?;
    let mut lease = pool.lease(Request::elems::<u64>(n * 4))?;
    ensure!(lease.is_pinned(), "the lease is not page-locked");
    // SAFETY: a Scalar is four u64 limbs with no invalid bit patterns among
    // those written here (copies of valid Scalars).
    let pinned: &mut [Scalar] = unsafe { lease.as_mut_slice_of_unchecked::<Scalar>()? };
    pinned.copy_from_slice(&pageable);
    let from_lease = time(pinned, &mut device)?;
    eprintln!("[h2d_bench] pinned lease {from_lease:.1?} GB/s");

    let shared = Arc::new(pageable);
    let registered = pool.register_shared(Arc::clone(&shared))?;
    ensure!(
        registered.is_pinned(),
        "the shared vector is not page-locked"
    );
    let from_registered = time(&registered, &mut device)?;
    eprintln!("[h2d_bench] registered in place {from_registered:.1?} GB/s");
    // The copies arrived whole.
    let back = device.download()?;
    ensure!(back[n - 1] == Scalar::from((n - 1) as u64) && back[1] != Scalar::ZERO);

    let results: Vec<_> = [
        ("pageable", from_pageable),
        ("pinned-lease", from_lease),
        ("registered-shared", from_registered),
    ]
    .into_iter()
    .map(|(kind, samples)| Stat::of(samples).result(format!("h2d/{kind}/{}MiB", args.mib), "GB/s"))
    .collect();
    let out = json!({
        "command": args.record.command.unwrap_or_default(),
        "date": today(),
        "machine": machine(gpu.name(), json!({})),
        "results": results,
        "revision": args.record.revision.unwrap_or_default(),
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}
