//! Throughput of the engine: one job of N partitions of a built-in circuit,
//! for each worker count asked for, with the timeline (Chrome-trace JSON)
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
//! `cuzk setup` first. `--engine key=value` sets any engine option (see
//! docs/engine.example.toml), e.g. `--engine backend=gpu`.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use bellperson::groth16::generate_random_parameters;
use cuzk_engine::{Auto, Engine, EngineConfig, ParamsRef, ShapeId};
use cuzk_synth::circuits::CircuitSpec;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;

struct Args {
    circuit: CircuitSpec,
    partitions: usize,
    workers: Vec<usize>,
    params: Option<PathBuf>,
    out: Option<PathBuf>,
    overrides: Vec<String>,
}

fn args() -> Result<Args> {
    let mut a = Args {
        circuit: "porep:12".parse()?,
        partitions: 10,
        workers: vec![1, 2],
        params: None,
        out: None,
        overrides: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--circuit" => a.circuit = value()?.parse()?,
            "--partitions" => a.partitions = value()?.parse()?,
            "--workers" => {
                a.workers = value()?
                    .split(',')
                    .map(|w| w.trim().parse())
                    .collect::<Result<_, _>>()?
            }
            "--params" => a.params = Some(value()?.into()),
            "--out" => a.out = Some(value()?.into()),
            "--engine" => a.overrides.push(value()?),
            "--help" | "-h" => {
                println!(
                    "engine_bench --circuit SPEC --partitions N --workers 1,2 [--params FILE] \
                     [--out DIR] [--engine key=value ...]"
                );
                std::process::exit(0);
            }
            other => bail!("unknown argument `{other}` (try --help)"),
        }
    }
    Ok(a)
}

fn main() -> Result<()> {
    let args = args()?;
    let spec = args.circuit.clone();
    let shape = ShapeId(spec.to_string());
    let dir = tempfile::tempdir()?;
    let params_path = match &args.params {
        Some(p) => p.clone(),
        None => {
            eprintln!("generating parameters for {spec} with bellperson...");
            let mut rng = ChaCha20Rng::seed_from_u64(1);
            let params = generate_random_parameters(spec.build(0), &mut rng)?;
            let path = dir.path().join("params");
            cuzk_groth16_cuda::write_params(&path, &params)?;
            path
        }
    };
    let params = ParamsRef::File(params_path);
    if let Some(out) = &args.out {
        std::fs::create_dir_all(out)?;
    }
    for &workers in &args.workers {
        let mut config =
            EngineConfig::default().with_overrides(args.overrides.iter().map(String::as_str))?;
        config.workers_per_device = Auto::Value(workers);
        let engine = Engine::new(config)?;
        let circuit = {
            let spec = spec.clone();
            Arc::new(move |seed| spec.build(seed))
        };
        let (proofs, report, timeline) =
            cuzk_engine::bench::run(&engine, &shape, &params, args.partitions, |s| circuit(s))?;
        anyhow::ensure!(proofs.len() == args.partitions, "missing proofs");
        println!(
            "{spec}, {} partitions, {workers} worker(s) per device, backend {}: {:.3} s, {:.3} s per partition",
            args.partitions, report.config.backend, report.wall_s, report.seconds_per_partition
        );
        println!("{}", report.summary);
        if let Some(out) = &args.out {
            let stem = format!(
                "{}-{}p-{workers}w",
                spec.to_string().replace(':', "_"),
                args.partitions
            );
            let trace = out.join(format!("timeline-{stem}.json"));
            std::fs::write(&trace, serde_json::to_vec(&timeline.chrome_trace())?)?;
            let summary = out.join(format!("summary-{stem}.json"));
            std::fs::write(&summary, serde_json::to_vec_pretty(&report)?)?;
            println!("wrote {} and {}", trace.display(), summary.display());
        }
    }
    Ok(())
}
