//! How long a fresh process takes to load every device-code module on GPU 0:
//! the fatbins' machine code as shipped, beside the same fatbins' compute_80
//! PTX JIT-compiled by the driver (`CUDA_FORCE_PTX_JIT=1`: what every fresh
//! machine paid when the modules were PTX only), both with the driver's
//! compute cache off (`CUDA_CACHE_DISABLE=1`), each run in a new process.
//!
//! Results: `load/all/<n> modules/fatbin` (the library's modules and the
//! test-only ones, one after the other, wall clock) with the JIT runs as its
//! baseline, and the same per module. Writes the bench-data JSON to stdout;
//! progress to stderr.
//!
//! Usage: module_load <short git revision> <the command line, for the record>
//!        [--runs N (default 5)] [--jit-runs N (default 1)]

#[path = "common/args.rs"]
mod args;
#[path = "common/mod.rs"]
mod common;
use args::OptionalRecord;
use common::{Stat, machine, today};

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail, ensure};
use clap::Parser;
use cuzk_groth16_cuda::cuda::{DeviceModule, Gpu, modules};
use serde_json::{Value, json};

/// How long a fresh process takes to load every device-code module on GPU 0,
/// fatbin machine code beside the PTX JIT-compiled; writes the bench-data
/// JSON to stdout, progress to stderr.
#[derive(Debug, Parser)]
#[command(name = "module_load", args_override_self = true)]
struct Args {
    #[command(flatten)]
    record: OptionalRecord,
    /// Fresh processes loading the fatbins' machine code.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Fresh processes JIT-compiling the PTX instead.
    #[arg(long, default_value_t = 1)]
    jit_runs: usize,
    /// Internal: load once in this process and print seconds per module.
    #[arg(long, hide = true)]
    child: bool,
}

fn log(msg: impl AsRef<str>) {
    eprintln!("[module_load] {}", msg.as_ref());
}

/// Every module: the library's and the test-only ones.
fn all_modules() -> Vec<DeviceModule> {
    let mut all: Vec<DeviceModule> = modules::MODULES.to_vec();
    all.push(cuzk_groth16_cuda::fatbin_module!("arith"));
    all.push(cuzk_groth16_cuda::fatbin_module!("arith_bench"));
    all
}

/// One fresh load: the context first (not counted), then each module.
fn child() -> Result<()> {
    let gpu = Gpu::get(0).context("opening GPU 0")?;
    let mut seconds = BTreeMap::new();
    for module in all_modules() {
        let start = Instant::now();
        gpu.load(&module)
            .with_context(|| format!("loading {}", module.name))?;
        seconds.insert(module.name, start.elapsed().as_secs_f64());
    }
    println!("{}", serde_json::to_string(&seconds)?);
    Ok(())
}

/// Runs `runs` fresh children with `env` and returns seconds per module.
fn measure(runs: usize, env: &[(&str, &str)]) -> Result<BTreeMap<String, Vec<f64>>> {
    let exe = std::env::current_exe().context("finding this executable")?;
    let mut samples: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for run in 0..runs {
        let mut command = Command::new(&exe);
        command.arg("--child").env("CUDA_CACHE_DISABLE", "1");
        command.env_remove("CUDA_FORCE_PTX_JIT");
        for (k, v) in env {
            command.env(k, v);
        }
        let output = command.output().context("running a child")?;
        if !output.status.success() {
            bail!(
                "child run {run} ({env:?}) failed ({}):\n{}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let line = String::from_utf8_lossy(&output.stdout);
        let seconds: BTreeMap<String, f64> =
            serde_json::from_str(line.trim()).context("reading a child's timings")?;
        let total: f64 = seconds.values().sum();
        log(format!("run {run} {env:?}: {total:.3} s"));
        for (name, s) in seconds {
            samples.entry(name).or_default().push(s);
        }
    }
    Ok(samples)
}

fn totals(samples: &BTreeMap<String, Vec<f64>>) -> Vec<f64> {
    let runs = samples.values().map(Vec::len).min().unwrap_or(0);
    (0..runs)
        .map(|i| samples.values().map(|v| v[i]).sum())
        .collect()
}

fn main() -> Result<()> {
    let args = Args::parse();
    if args.child {
        return child();
    }
    ensure!(args.runs > 0, "--runs must be at least 1");
    let gpu = Gpu::get(0).context("opening GPU 0")?;
    let gpu_name = gpu.name().to_owned();
    drop(gpu);

    let fatbin = measure(args.runs, &[])?;
    let jit = if args.jit_runs > 0 {
        Some(measure(args.jit_runs, &[("CUDA_FORCE_PTX_JIT", "1")])?)
    } else {
        None
    };

    let mut results = Vec::new();
    let entry = |name: String, ours: Vec<f64>, base: Option<Vec<f64>>, notes: &str| -> Value {
        let stat = Stat::of(ours);
        let mut v = stat.result(name, "s");
        if let Some(base) = base {
            let b = Stat::of(base);
            v["baseline"] = json!({"name": "compute_80 PTX, JIT (CUDA_FORCE_PTX_JIT=1)", "median": b.median, "runs": b.runs});
            v["ratio_vs_baseline"] = json!(b.median / stat.median);
        }
        v["notes"] = json!(notes);
        v
    };
    let n = fatbin.len();
    results.push(entry(
        format!("load/all/{n} modules/fatbin"),
        totals(&fatbin),
        jit.as_ref().map(totals),
        "every module one after the other in a fresh process, CUDA_CACHE_DISABLE=1; the \
         context's creation is not counted",
    ));
    for (name, samples) in &fatbin {
        results.push(entry(
            format!("load/{name}/fatbin"),
            samples.clone(),
            jit.as_ref().and_then(|j| j.get(name).cloned()),
            "",
        ));
    }
    let out = json!({
        "revision": args.record.revision.unwrap_or_default(),
        "date": today(),
        "machine": machine(&gpu_name, json!({})),
        "command": args.record.command.unwrap_or_default(),
        "results": results,
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}
