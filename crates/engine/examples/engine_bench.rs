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
//! `cuzk setup` first, or pass `--fake-params` (pseudo-random points of the
//! right counts, made in memory: the same work for the prover, proofs that
//! do not verify; for timing only). `--engine key=value` sets any engine
//! option (see docs/engine.example.toml), e.g. `--engine backend=gpu`.
//! `--json REV CMD` prints a bench-data JSON (area `engine`) to stdout at
//! the end, with the given revision and command line.

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
    fake_params: bool,
    out: Option<PathBuf>,
    overrides: Vec<String>,
    json: Option<(String, String)>,
}

fn args() -> Result<Args> {
    let mut a = Args {
        circuit: "porep:12".parse()?,
        partitions: 10,
        workers: vec![1, 2],
        params: None,
        fake_params: false,
        out: None,
        overrides: Vec::new(),
        json: None,
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
            "--fake-params" => a.fake_params = true,
            "--json" => {
                let rev = value()?;
                let cmd = it.next().context("--json needs REV and CMD")?;
                a.json = Some((rev, cmd));
            }
            "--out" => a.out = Some(value()?.into()),
            "--engine" => a.overrides.push(value()?),
            "--help" | "-h" => {
                println!(
                    "engine_bench --circuit SPEC --partitions N --workers 1,2 [--params FILE | \
                     --fake-params] [--out DIR] [--engine key=value ...] [--json REV CMD]"
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
    let fake = if args.fake_params {
        eprintln!("making fake parameters for {spec} in memory...");
        let pce = cuzk_synth::Pce::record(spec.build(0))?;
        Some(Arc::new(cuzk_groth16_cuda::fake::fake_params(&pce, 1)))
    } else {
        None
    };
    let params = match (&args.params, &fake) {
        (_, Some(_)) => ParamsRef::Key("fake".into()),
        (Some(p), None) => ParamsRef::File(p.clone()),
        (None, None) => {
            eprintln!("generating parameters for {spec} with bellperson...");
            let mut rng = ChaCha20Rng::seed_from_u64(1);
            let params = generate_random_parameters(spec.build(0), &mut rng)?;
            let path = dir.path().join("params");
            cuzk_groth16_cuda::write_params(&path, &params)?;
            ParamsRef::File(path)
        }
    };
    let mut results = Vec::new();
    let mut gpu_name = String::new();
    if let Some(out) = &args.out {
        std::fs::create_dir_all(out)?;
    }
    for &workers in &args.workers {
        let mut config =
            EngineConfig::default().with_overrides(args.overrides.iter().map(String::as_str))?;
        config.workers_per_device = Auto::Value(workers);
        let engine = Engine::new(config)?;
        if let Some(f) = &fake {
            engine.register_params("fake", Arc::clone(f))?;
        }
        let circuit = {
            let spec = spec.clone();
            Arc::new(move |seed| spec.build(seed))
        };
        let (proofs, report, timeline) =
            cuzk_engine::bench::run(&engine, &shape, &params, args.partitions, |s| circuit(s))?;
        anyhow::ensure!(proofs.len() == args.partitions, "missing proofs");
        eprintln!(
            "{spec}, {} partitions, {workers} worker(s) per device, backend {}: {:.3} s, {:.3} s per partition",
            args.partitions, report.config.backend, report.wall_s, report.seconds_per_partition
        );
        eprintln!("{}", report.summary);
        let busy = report
            .summary
            .devices
            .iter()
            .map(|d| d.busy_fraction)
            .fold(f64::INFINITY, f64::min);
        results.push(serde_json::json!({
            "name": format!(
                "engine/{}/{}/{}p/{workers}w",
                report.config.backend,
                spec.to_string().replace(':', "-"),
                args.partitions
            ),
            "unit": "s",
            "median": report.seconds_per_partition,
            "min": report.seconds_per_partition,
            "max": report.seconds_per_partition,
            "runs": 1,
            "derived": {
                "proofs_per_s": 1.0 / report.seconds_per_partition,
                "gpu_busy": if busy.is_finite() { busy } else { 0.0 },
            },
            "notes": format!(
                "seconds per partition of one {}-partition job (wall {:.3} s){}; gpu_busy: \
                 time inside kernel regions between the first and the last one; largest gaps: {:?}",
                args.partitions,
                report.wall_s,
                if fake.is_some() { ", fake parameters" } else { "" },
                report.summary.devices.iter().map(|d| &d.largest_gaps).collect::<Vec<_>>()
            ),
        }));
        if gpu_name.is_empty() {
            gpu_name = cuzk_gpu_sched::discover()
                .ok()
                .and_then(|d| d.first().map(|d| d.name.clone()))
                .unwrap_or_else(|| "none".into());
        }
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
            eprintln!("wrote {} and {}", trace.display(), summary.display());
        }
    }
    if let Some((revision, command)) = &args.json {
        let driver = std::process::Command::new("nvidia-smi")
            .args(["--query-gpu=driver_version", "--format=csv,noheader"])
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .map(|s| s.lines().next().unwrap_or("").trim().to_owned())
            .unwrap_or_default();
        let date = std::process::Command::new("date")
            .arg("+%Y-%m-%d")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .map(|s| s.trim().to_owned())
            .unwrap_or_default();
        let doc = serde_json::json!({
            "revision": revision,
            "date": date,
            "machine": {
                "gpu": gpu_name,
                "driver": driver,
                "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
            },
            "command": command,
            "results": results,
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
    }
    Ok(())
}
