//! `cuzk bench`: many jobs of a built-in circuit, in process or through the
//! daemon, with a progress bar, throughput and latency, and the timeline.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use bellperson::groth16::Parameters;
use cuzk_engine::{Engine, EngineConfig, ParamsRef, ProofRequest, ShapeId};
use cuzk_groth16_cuda::Bls12;
use cuzk_synth::circuits::{BuiltinCircuit, CircuitSpec};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use serde_json::{Value, json};

use super::{DaemonAddr, PriorityArg, Verifier, proof_bar, runtime, write_file, write_trace};
use crate::client;
use crate::daemon::request::{priority_to_proto, seeded_randomness};
use crate::proto;

/// `cuzk bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Built-in circuit, e.g. `porep:12` (see `cuzk circuits`).
    #[arg(long, default_value = "mul-chain:10")]
    pub circuit: CircuitSpec,
    /// Jobs to run.
    #[arg(long, default_value_t = 8)]
    pub jobs: u32,
    /// Partitions per job.
    #[arg(long, default_value_t = 1)]
    pub partitions: u32,
    /// Jobs in flight at once.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// Priority of every job.
    #[arg(long, value_enum, default_value_t = PriorityArg::Normal)]
    pub priority: PriorityArg,
    /// Parameter file. In process without it, parameters are generated
    /// (seeded) in memory first; through the daemon it must be inside the
    /// daemon's params_dirs.
    #[arg(long)]
    pub params: Option<PathBuf>,
    /// A parameter set the daemon's configuration names (with --daemon).
    #[arg(long, requires = "use_daemon")]
    pub params_set: Option<String>,
    /// Go through the daemon (see --daemon); otherwise run the engine in
    /// this process.
    #[arg(long = "via-daemon", id = "use_daemon")]
    pub use_daemon: bool,
    #[command(flatten)]
    pub daemon: DaemonAddr,
    /// Seed of every job's r and s (reproducible proofs).
    #[arg(long)]
    pub rs_seed: Option<u64>,
    /// Verify every proof (needs the parameters locally).
    #[arg(long)]
    pub verify: bool,
    /// Write the run's Chrome-trace JSON here.
    #[arg(long)]
    pub timeline: Option<PathBuf>,
    /// The engine's configuration file, in process.
    #[arg(long)]
    pub engine_config: Option<PathBuf>,
    /// An engine setting as `key=value` (repeatable), in process.
    #[arg(long = "engine", value_name = "KEY=VALUE")]
    pub engine: Vec<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

struct JobResult {
    job: u32,
    latency: Duration,
    proofs: Vec<Vec<u8>>,
}

fn seeds(job: u32, partitions: u32) -> Vec<u64> {
    (0..partitions)
        .map(|p| u64::from(job) * u64::from(partitions) + u64::from(p) + 1)
        .collect()
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// `cuzk bench`.
pub fn bench(args: BenchArgs) -> Result<()> {
    if args.jobs == 0 || args.partitions == 0 || args.concurrency == 0 {
        bail!("--jobs, --partitions and --concurrency must be at least 1");
    }
    let use_daemon = args.use_daemon || args.daemon.daemon.is_some();
    let start = Instant::now();
    let (results, summary, mode, verifier): (Vec<JobResult>, Value, _, _) = if use_daemon {
        let (r, s) = through_daemon(&args)?;
        let v = match &args.params {
            Some(p) if args.verify => Verifier::from_file(p, &args.circuit)?,
            _ if args.verify => bail!("--verify through the daemon needs --params FILE"),
            _ => None,
        };
        (r, s, "daemon", v)
    } else {
        let (r, s, v) = in_process(&args)?;
        (r, s, "in-process", v)
    };
    let wall = start.elapsed();
    if let Some(v) = &verifier {
        for r in &results {
            for (bytes, seed) in r.proofs.iter().zip(seeds(r.job, args.partitions)) {
                v.check(bytes, seed)?;
            }
        }
    }
    let proofs: usize = results.iter().map(|r| r.proofs.len()).sum();
    let mut lat: Vec<f64> = results.iter().map(|r| r.latency.as_secs_f64()).collect();
    lat.sort_by(f64::total_cmp);
    let out = json!({
        "mode": mode,
        "circuit": args.circuit.to_string(),
        "jobs": args.jobs,
        "partitions_per_job": args.partitions,
        "concurrency": args.concurrency,
        "proofs": proofs,
        "verified": verifier.is_some(),
        "wall_seconds": wall.as_secs_f64(),
        "proofs_per_second": proofs as f64 / wall.as_secs_f64(),
        "job_latency_seconds": {
            "p50": percentile(&lat, 0.5),
            "p90": percentile(&lat, 0.9),
            "max": lat.last().copied().unwrap_or(0.0),
        },
        "timeline": summary,
    });
    if args.json {
        println!("{out}");
    } else {
        println!(
            "{} proofs of {} ({} jobs x {} partitions, {} at once, {mode}) in {:.3} s: {:.2} \
             proofs/s{}",
            proofs,
            args.circuit,
            args.jobs,
            args.partitions,
            args.concurrency,
            wall.as_secs_f64(),
            proofs as f64 / wall.as_secs_f64(),
            if verifier.is_some() {
                ", all verified"
            } else {
                ""
            }
        );
        println!(
            "job latency: p50 {:.3} s, p90 {:.3} s, max {:.3} s",
            percentile(&lat, 0.5),
            percentile(&lat, 0.9),
            lat.last().copied().unwrap_or(0.0)
        );
        let f = |v: &Value| v.as_f64().unwrap_or(0.0);
        for d in summary["devices"].as_array().into_iter().flatten() {
            println!(
                "device {}: {} kernel regions, busy {:.1}% of {:.3} s",
                d["device"],
                d["kernel_regions"],
                f(&d["busy_fraction"]) * 100.0,
                f(&d["window_s"])
            );
        }
        for st in summary["stages"].as_array().into_iter().flatten() {
            println!(
                "  {:<16} median {:>9.3} ms  x{}",
                st["stage"].as_str().unwrap_or("?"),
                f(&st["median_ms"]),
                st["count"]
            );
        }
    }
    Ok(())
}

fn engine_config(args: &BenchArgs) -> Result<EngineConfig> {
    let c = match &args.engine_config {
        Some(p) => EngineConfig::from_file(p)?,
        None => EngineConfig::default(),
    };
    Ok(c.with_overrides(args.engine.iter().map(String::as_str))?)
}

type InProcess = (Vec<JobResult>, Value, Option<Verifier>);

fn in_process(args: &BenchArgs) -> Result<InProcess> {
    let engine = Arc::new(Engine::new(engine_config(args)?)?);
    let spec = args.circuit.clone();
    let (params, verifier) = match &args.params {
        Some(p) => {
            let v = if args.verify {
                Verifier::from_file(p, &spec)?
            } else {
                None
            };
            (ParamsRef::File(p.clone()), v)
        }
        None => {
            eprintln!("generating parameters for {spec} (seeded; give --params to reuse a file)");
            let mut rng = ChaCha20Rng::seed_from_u64(1);
            let p: Parameters<Bls12> =
                bellperson::groth16::generate_random_parameters(spec.build(0), &mut rng)
                    .with_context(|| format!("generating parameters for {spec}"))?;
            let p = Arc::new(p);
            let v = if args.verify {
                Some(Verifier::from_vk(&p.vk, &spec))
            } else {
                None
            };
            engine.register_params("bench", p)?;
            (ParamsRef::Key("bench".into()), v)
        }
    };
    engine.timeline().clear();
    let total = u64::from(args.jobs) * u64::from(args.partitions);
    let bar = proof_bar(total, args.json);
    let results = runtime()?.block_on(async {
        let limit = Arc::new(tokio::sync::Semaphore::new(args.concurrency));
        let mut tasks = Vec::new();
        for job in 0..args.jobs {
            let permit = Arc::clone(&limit).acquire_owned().await?;
            let parts = seeds(job, args.partitions)
                .into_iter()
                .map(|s| spec.build(s))
                .collect();
            let mut request = ProofRequest::new(ShapeId(spec.to_string()), params.clone(), parts)
                .with_witness(BuiltinCircuit::witness)
                .with_priority(args.priority.into());
            if let Some(seed) = args.rs_seed {
                request = request.with_randomness(seeded_randomness(
                    seed ^ u64::from(job),
                    args.partitions as usize,
                ));
            }
            let submitted = Instant::now();
            let mut handle = engine.submit(request)?;
            let mut events = handle.take_events();
            let bar = bar.clone();
            tasks.push(tokio::spawn(async move {
                let ticker = tokio::spawn(async move {
                    while let Some(e) = events.as_mut()?.recv().await {
                        if e.stage == cuzk_engine::ProgressStage::Proved {
                            bar.inc(1);
                        }
                    }
                    Some(())
                });
                let proofs = handle.wait().await;
                ticker.abort();
                drop(permit);
                let proofs = proofs?;
                Ok::<_, anyhow::Error>(JobResult {
                    job,
                    latency: submitted.elapsed(),
                    proofs: proofs.iter().map(proof_bytes).collect(),
                })
            }));
        }
        let mut results = Vec::new();
        for t in tasks {
            results.push(t.await??);
        }
        Ok::<_, anyhow::Error>(results)
    })?;
    bar.finish_and_clear();
    let data = engine.timeline().snapshot();
    if let Some(path) = &args.timeline {
        write_trace(path, &data)?;
    }
    Ok((
        results,
        serde_json::to_value(data.summary()).unwrap_or(Value::Null),
        verifier,
    ))
}

fn proof_bytes(p: &bellperson::groth16::Proof<Bls12>) -> Vec<u8> {
    let mut v = Vec::with_capacity(192);
    // Writing into a Vec cannot fail.
    let _ = p.write(&mut v);
    v
}

fn through_daemon(args: &BenchArgs) -> Result<(Vec<JobResult>, Value)> {
    let address = args.daemon.address();
    let params = super::params_spec(args.params.as_deref(), args.params_set.as_deref())?;
    let total = u64::from(args.jobs) * u64::from(args.partitions);
    let bar = proof_bar(total, args.json);
    let rt = runtime()?;
    let (results, trace) = rt.block_on(async {
        let c = client::connect(&address).await?;
        let limit = Arc::new(tokio::sync::Semaphore::new(args.concurrency));
        let mut tasks = Vec::new();
        for job in 0..args.jobs {
            let permit = Arc::clone(&limit).acquire_owned().await?;
            let request = proto::ProveRequest {
                circuit: args.circuit.to_string(),
                witness_seeds: seeds(job, args.partitions),
                params: Some(params.clone()),
                priority: priority_to_proto(args.priority.into()) as i32,
                randomness: args
                    .rs_seed
                    .map(|s| proto::prove_request::Randomness::RsSeed(s ^ u64::from(job))),
                filecoin: None,
            };
            let mut c = c.clone();
            let bar = bar.clone();
            tasks.push(tokio::spawn(async move {
                let submitted = Instant::now();
                let stream = c
                    .prove(request)
                    .await
                    .map_err(|s| client::call_error("the daemon refused a job", s))?
                    .into_inner();
                let mut seen = 0u64;
                let done = client::follow(stream, |_, p| {
                    let now = u64::from(p.proved);
                    if now > seen {
                        bar.inc(now - seen);
                        seen = now;
                    }
                })
                .await?;
                drop(permit);
                Ok::<_, anyhow::Error>(JobResult {
                    job,
                    latency: submitted.elapsed(),
                    proofs: done.proofs,
                })
            }));
        }
        let mut results = Vec::new();
        for t in tasks {
            results.push(t.await??);
        }
        let mut c = c;
        let trace = c
            .timeline(proto::TimelineRequest { all: false })
            .await
            .map_err(|s| client::call_error("timeline", s))?
            .into_inner();
        Ok::<_, anyhow::Error>((results, trace))
    })?;
    bar.finish_and_clear();
    if let Some(path) = &args.timeline {
        write_file(path, trace.chrome_trace_json.as_bytes())?;
    }
    let summary = serde_json::from_str(&trace.summary_json).unwrap_or(Value::Null);
    Ok((results, summary))
}
