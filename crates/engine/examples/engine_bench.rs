//! Throughput of the engine: one job of N partitions of a built-in circuit
//! (or `--jobs K` such jobs submitted together: the steady state of a queue
//! that never runs dry), for each worker count asked for, with the timeline (Chrome-trace JSON)
//! and its summary (proofs/s, device busy fraction between the first and
//! the last kernel region, largest idle gaps, per-stage medians).
//!
//! ```text
//! cargo run --release -p cuzk-engine --example engine_bench -- \
//!     --circuit porep:22 --partitions 10 --workers 1,2 \
//!     --params porep-22.params --out bench-data/engine/run [--engine key=value ...]
//! ```
//!
//! Without `--params`, parameters are generated with bellperson (seeded):
//! fine up to about 2^12 constraints; for larger circuits make them with
//! `cuzk setup` first, or pass `--fake-params` (pseudo-random points of the
//! right counts, made in memory: the same work for the prover, proofs that
//! do not verify; for timing only). `--engine key=value` sets any engine
//! option (see docs/engine.example.toml), e.g. `--engine backend=gpu`.
//! `--json REV CMD` prints a bench-data JSON (area `engine`) to stdout at
//! the end, with the given revision and command line.

// The benchmark examples' shared arguments, by path.
#[path = "../../groth16-cuda/examples/common/args.rs"]
mod args;
use args::{JsonRecord, List};

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Result;
use clap::Parser;
use cuzk_engine::bench::{BenchParams, ParamsSource};
use cuzk_engine::{Auto, Engine, EngineConfig, ShapeId};
use cuzk_synth::circuits::{BuiltinCircuit, CircuitSpec};

/// Throughput of the engine: jobs of N partitions of a built-in circuit,
/// for each worker count, with the timeline and its summary.
#[derive(Debug, Parser)]
#[command(name = "engine_bench", args_override_self = true)]
struct Args {
    /// The built-in circuit, e.g. `porep:22`.
    #[arg(long, value_name = "SPEC", default_value = "porep:12")]
    circuit: CircuitSpec,
    /// Partitions per job.
    #[arg(long, value_name = "N", default_value_t = 10)]
    partitions: usize,
    /// Jobs submitted together.
    #[arg(long, value_name = "K", default_value_t = 1)]
    jobs: usize,
    /// Worker counts to measure, comma-separated, one run each.
    #[arg(long, value_name = "N,..", default_value = "1,2")]
    workers: List<usize>,
    /// A parameter file for the circuit (without it and without
    /// --fake-params: generated with bellperson, seeded).
    #[arg(long, value_name = "FILE")]
    params: Option<PathBuf>,
    /// Fake parameters made in memory (the prover's work is the same, the
    /// proofs do not verify; for timing only); takes precedence over
    /// --params.
    #[arg(long)]
    fake_params: bool,
    /// Write each run's Chrome trace and summary into this directory.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// An engine option (see docs/engine.example.toml), e.g. `backend=gpu`;
    /// repeatable.
    #[arg(long = "engine", value_name = "KEY=VALUE")]
    overrides: Vec<String>,
    #[command(flatten)]
    json: JsonRecord,
}

/// mimalloc, or the system's allocator with `CUZK_ALLOCATOR=system`.
#[global_allocator]
static ALLOC: cuzk_synth::allocator::Allocator = cuzk_synth::allocator::Allocator;

fn main() -> Result<()> {
    let args = Args::parse();
    anyhow::ensure!(args.jobs > 0, "--jobs must be at least 1");
    let spec = args.circuit.clone();
    let shape = ShapeId(spec.to_string());
    let source = match (&args.params, args.fake_params) {
        (_, true) => ParamsSource::Fake,
        (Some(p), false) => ParamsSource::File(p.clone()),
        (None, false) => ParamsSource::Generate,
    };
    match source {
        ParamsSource::Fake => eprintln!("making fake parameters for {spec} in memory..."),
        ParamsSource::Generate => eprintln!("generating parameters for {spec} with bellperson..."),
        ParamsSource::File(_) => {}
    }
    let params = BenchParams::prepare(&spec, &source)?;
    let mut results = Vec::new();
    if let Some(out) = &args.out {
        std::fs::create_dir_all(out)?;
    }
    for &workers in &args.workers {
        let mut config =
            EngineConfig::default().with_overrides(args.overrides.iter().map(String::as_str))?;
        config.workers_per_device = Auto::Value(workers);
        let engine = Engine::new(config)?;
        params.register(&engine)?;
        let circuit = {
            let spec = spec.clone();
            Arc::new(move |seed| spec.build(seed))
        };
        // Built-in circuits' own witness synthesis (porep:K writes its parts
        // in parallel straight into place), as `cuzk bench` and the daemon use.
        cuzk_engine::bench::warm_up_with(
            &engine,
            &shape,
            &params.params,
            |s| circuit(s),
            BuiltinCircuit::witness,
        )?;
        let (proofs, report, timeline) = cuzk_engine::bench::measure_jobs_with(
            &engine,
            &shape,
            &params.params,
            args.jobs,
            args.partitions,
            |s| circuit(s),
            BuiltinCircuit::witness,
        )?;
        anyhow::ensure!(
            proofs.len() == args.jobs * args.partitions,
            "missing proofs"
        );
        eprintln!(
            "{spec}, {} job(s) of {} partitions, {workers} worker(s) per device, backend {}: {:.3} s, {:.3} s per partition",
            args.jobs,
            args.partitions,
            report.config.backend,
            report.wall_s,
            report.seconds_per_partition
        );
        eprintln!("{}", report.summary);
        results.push(serde_json::json!({
            "name": format!(
                "engine/{}/{}/{}p{}/{workers}w",
                report.config.backend,
                spec.to_string().replace(':', "-"),
                args.partitions,
                if args.jobs > 1 { format!("x{}", args.jobs) } else { String::new() }
            ),
            "unit": "s",
            "median": report.seconds_per_partition,
            "min": report.seconds_per_partition,
            "max": report.seconds_per_partition,
            "runs": 1,
            "derived": {
                "proofs_per_s": 1.0 / report.seconds_per_partition,
                "gpu_busy": report.busy_fraction(),
            },
            "notes": format!(
                "seconds per partition of {} {}-partition job(s) submitted together (wall {:.3} s){}; gpu_busy: \
                 time inside kernel regions between the first and the last one; largest gaps: {:?}",
                args.jobs,
                args.partitions,
                report.wall_s,
                if params.is_fake() { ", fake parameters" } else { "" },
                report.summary.devices.iter().map(|d| &d.largest_gaps).collect::<Vec<_>>()
            ),
        }));
        if let Some(out) = &args.out {
            let stem = format!(
                "{}-{}p{}-{workers}w",
                spec.to_string().replace(':', "_"),
                args.partitions,
                if args.jobs > 1 {
                    format!("x{}", args.jobs)
                } else {
                    String::new()
                }
            );
            let trace = out.join(format!("timeline-{stem}.json"));
            std::fs::write(&trace, serde_json::to_vec(&timeline.chrome_trace())?)?;
            let summary = out.join(format!("summary-{stem}.json"));
            std::fs::write(&summary, serde_json::to_vec_pretty(&report)?)?;
            eprintln!("wrote {} and {}", trace.display(), summary.display());
        }
    }
    if let Some((revision, command)) = args.json.get() {
        let doc = cuzk_engine::bench::bench_doc(revision, command, results);
        println!("{}", serde_json::to_string_pretty(&doc)?);
    }
    Ok(())
}
