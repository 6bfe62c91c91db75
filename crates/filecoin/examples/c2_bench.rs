//! A PoRep C2 of any sector size through the engine, without a sealed
//! sector: a synthetic C1 ([`cuzk_filecoin::synthetic`]), the partition
//! circuits filecoin-proofs builds from it, and either real parameters
//! (`--param-cache DIR`, filecoin-proofs' names) or fake ones made in memory
//! from the blank circuit's PCE (`--fake-params`: the prover's work is the
//! same, the proofs do not verify; for timing only).
//!
//! ```text
//! cargo run --release -p cuzk-filecoin --example c2_bench -- \
//!     --seal-proof StackedDrg32GiBV1_1 --fake-params --pce-dir /data/pce \
//!     --out DIR [--jobs 1] [--engine key=value ...] [--json REV CMD]
//! ```
//!
//! What it prints and records: synthetic C1 time; the blank PCE recorded
//! (or found in `--pce-dir`) and written there, so the engine reads it from
//! disk as a daemon does; the fake parameters' time (also with real
//! parameters under `--time-fake-params`, made and dropped); one warm-up partition
//! (PCE read, parameters uploaded; not measured); then `--jobs` C2 proofs
//! (all partitions each) measured: seconds per C2, per-partition stage
//! medians, the device's busy fraction, peak host RSS, and the Chrome trace
//! (`DIR/timeline-*.json`). Each partition's witness is synthesized with its
//! challenges in parallel, as the engine does for PoRep, or one challenge
//! after the other under `--sequential-witness`. With real parameters every proof is checked by
//! storage-proofs' verifier (what verify_seal runs).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, bail, ensure};
use cuzk_engine::bench::{Machine, today};
use cuzk_engine::{Engine, EngineConfig, ParamsRef, ShapeId};
use cuzk_filecoin::{C1Output, SealProof, porep, proofs_to_bytes, shape_id, synthetic};
use storage_proofs_core::merkle::MerkleTreeTrait;

struct Args {
    proof: SealProof,
    seed: u64,
    jobs: usize,
    fake_params: bool,
    time_fake_params: bool,
    param_cache: Option<PathBuf>,
    pce_dir: PathBuf,
    out: Option<PathBuf>,
    overrides: Vec<String>,
    json: Option<(String, String)>,
    /// Synthesize each partition's witness one challenge after the other
    /// (storage-proofs' order, one thread) instead of in parallel.
    sequential_witness: bool,
}

fn args() -> Result<Args> {
    let mut a = Args {
        proof: "StackedDrg2KiBV1_1".parse()?,
        seed: 1,
        jobs: 1,
        fake_params: false,
        time_fake_params: false,
        param_cache: None,
        pce_dir: std::env::temp_dir().join("cuzk-c2-bench-pce"),
        out: None,
        overrides: Vec::new(),
        json: None,
        sequential_witness: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--seal-proof" => a.proof = value()?.parse()?,
            "--seed" => a.seed = value()?.parse()?,
            "--jobs" => a.jobs = value()?.parse()?,
            "--fake-params" => a.fake_params = true,
            "--sequential-witness" => a.sequential_witness = true,
            "--time-fake-params" => a.time_fake_params = true,
            "--param-cache" => a.param_cache = Some(value()?.into()),
            "--pce-dir" => a.pce_dir = value()?.into(),
            "--out" => a.out = Some(value()?.into()),
            "--engine" => a.overrides.push(value()?),
            "--json" => {
                let rev = value()?;
                let cmd = it.next().context("--json needs REV and CMD")?;
                a.json = Some((rev, cmd));
            }
            "--help" | "-h" => {
                println!(
                    "c2_bench --seal-proof NAME [--seed N] (--fake-params | --param-cache DIR) \
                     [--time-fake-params] [--pce-dir DIR] [--jobs N] [--out DIR] [--engine key=value ...] \
                     [--sequential-witness] [--json REV CMD]"
                );
                std::process::exit(0);
            }
            other => bail!("unknown argument `{other}` (try --help)"),
        }
    }
    ensure!(
        a.fake_params != a.param_cache.is_some(),
        "give exactly one of --fake-params and --param-cache"
    );
    ensure!(a.jobs > 0, "--jobs must be at least 1");
    Ok(a)
}

/// This process's peak resident memory in bytes (Linux VmHWM).
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = args()?;
    use cuzk_filecoin::sector::Shape;
    match args.proof.sector_size.shape() {
        Shape::Base => run::<filecoin_proofs::SectorShapeBase>(&args),
        Shape::Sub2 => run::<filecoin_proofs::SectorShapeSub2>(&args),
        Shape::Sub8 => run::<filecoin_proofs::SectorShapeSub8>(&args),
        Shape::Top2 => run::<filecoin_proofs::SectorShapeTop2>(&args),
    }
}

fn run<Tree: 'static + MerkleTreeTrait>(args: &Args) -> Result<()> {
    let proof = args.proof;
    let mut results = Vec::new();
    let mut result = |name: &str, unit: &str, value: f64, notes: String| {
        eprintln!("{name}: {value:.3} {unit} ({notes})");
        results.push(serde_json::json!({
            "name": format!("c2/{proof}/{name}"),
            "unit": unit,
            "median": value, "min": value, "max": value, "runs": 1,
            "notes": notes,
        }));
    };

    let s = synthetic::generate::<Tree>(proof, args.seed)?;
    result(
        "synthetic_c1",
        "s",
        s.seconds,
        format!(
            "seed {}: {} partitions, {} challenges, vanilla proofs checked",
            args.seed,
            s.c1.vanilla_proofs.len(),
            s.c1.vanilla_proofs.iter().map(Vec::len).sum::<usize>()
        ),
    );
    let dir = args.param_cache.clone().unwrap_or_default();
    let partitions = porep::partitions(&s.c1, proof, &dir)?;
    let shape = shape_id(&partitions.params);
    let n = partitions.circuits.len();

    // The PCE on disk where the engine reads it: read from there if it is
    // there, else recorded from the blank circuit and written there.
    let pce_path = args.pce_dir.join(cuzk_engine::pce_file::file_name(&shape));
    let want_pce = args.fake_params || args.time_fake_params;
    let mut pce = None;
    if pce_path.exists() {
        if want_pce {
            let t = Instant::now();
            pce = Some(cuzk_engine::pce_file::read_pce(&pce_path, &shape, None)?);
            result(
                "pce_read",
                "s",
                t.elapsed().as_secs_f64(),
                pce_path.display().to_string(),
            );
        }
    } else {
        let blank = porep::blank_pce(proof)?;
        result(
            "pce_record",
            "s",
            blank.record_seconds,
            format!(
                "blank circuit, {} constraints, one thread",
                blank.pce.num_constraints()
            ),
        );
        let t = Instant::now();
        blank.write_to(&args.pce_dir)?;
        result(
            "pce_write",
            "s",
            t.elapsed().as_secs_f64(),
            pce_path.display().to_string(),
        );
        if want_pce {
            pce = Some(blank.pce);
        }
    }

    let mut config =
        EngineConfig::default().with_overrides(args.overrides.iter().map(String::as_str))?;
    config.pce_cache_dir = Some(args.pce_dir.clone());
    let engine = Engine::new(config)?;
    let mut fake = None;
    if let Some(pce) = pce.take() {
        let t = Instant::now();
        let made = cuzk_groth16_cuda::fake::fake_params(&pce, 1);
        result(
            "fake_params",
            "s",
            t.elapsed().as_secs_f64(),
            format!(
                "in memory, {} threads: h {}, l {}, a {}, b_g1 {}, b_g2 {} points",
                rayon::current_num_threads(),
                made.h.len(),
                made.l.len(),
                made.a.len(),
                made.b_g1.len(),
                made.b_g2.len()
            ),
        );
        if args.fake_params {
            fake = Some(made);
        }
    }
    let params = match fake {
        Some(fake) => {
            let key = format!("fake {shape}");
            engine.register_params(key.clone(), Arc::new(fake))?;
            ParamsRef::Key(key)
        }
        None => ParamsRef::File(partitions.params.existing_params()?.to_owned()),
    };

    let shape_id = ShapeId(shape.clone());
    let circuits = partitions.circuits;
    let witness = if args.sequential_witness {
        cuzk_synth::Witness::synthesize_with_capacity
    } else {
        partitions.witness
    };
    let t = Instant::now();
    cuzk_engine::bench::warm_up_with(
        &engine,
        &shape_id,
        &params,
        |_| circuits[0].clone(),
        witness,
    )?;
    result(
        "warm_up_partition",
        "s",
        t.elapsed().as_secs_f64(),
        "one partition: PCE read from disk, parameters to the prover, witness, proof".into(),
    );

    let c1 = if args.fake_params {
        None
    } else {
        Some(C1Output::from_json(
            &serde_json::to_vec(&s.c1)?,
            Some(proof),
        )?)
    };
    for job in 0..args.jobs {
        let (proofs, report, timeline) = cuzk_engine::bench::measure_with(
            &engine,
            &shape_id,
            &params,
            n,
            |i| circuits[(i as usize - 1) % n].clone(),
            witness,
        )?;
        ensure!(proofs.len() == n, "missing proofs");
        eprintln!("{}", report.summary);
        let verified = match &c1 {
            Some(c1) => {
                let ok = c1.verify(&dir, &proofs_to_bytes(&proofs))?;
                ensure!(ok, "the C2 proof does not verify");
                "verified"
            }
            None => "fake parameters, not verifiable",
        };
        let stages = report
            .summary
            .stages
            .iter()
            .map(|st| format!("{} {:.0} ms", st.stage, st.median_ms))
            .collect::<Vec<_>>()
            .join(", ");
        result(
            &format!("proof_{job}"),
            "s",
            report.wall_s,
            format!(
                "one C2 of {n} partitions ({verified}), {} witness, backend {}, {} workers/device; \
                 {:.3} s per partition; gpu busy {:.3}; per-partition medians: {stages}; \
                 largest gaps: {:?}",
                if args.sequential_witness {
                    "sequential"
                } else {
                    "parallel"
                },
                report.config.backend,
                report.config.workers_per_device,
                report.seconds_per_partition,
                report.busy_fraction(),
                report
                    .summary
                    .devices
                    .iter()
                    .map(|d| &d.largest_gaps)
                    .collect::<Vec<_>>()
            ),
        );
        if let Some(out) = &args.out {
            std::fs::create_dir_all(out)?;
            let stem = format!("{proof}-job{job}");
            let trace = out.join(format!("timeline-{stem}.json"));
            std::fs::write(&trace, serde_json::to_vec(&timeline.chrome_trace())?)?;
            let summary = out.join(format!("summary-{stem}.json"));
            std::fs::write(&summary, serde_json::to_vec_pretty(&report)?)?;
            eprintln!("wrote {} and {}", trace.display(), summary.display());
        }
    }
    result(
        "peak_rss",
        "GiB",
        peak_rss() as f64 / (1u64 << 30) as f64,
        "this process's VmHWM at the end".into(),
    );
    if let Some((revision, command)) = &args.json {
        let doc = serde_json::json!({
            "revision": revision,
            "date": today(),
            "machine": Machine::detect(),
            "command": command,
            "results": results,
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
    }
    Ok(())
}
