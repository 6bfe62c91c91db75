//! PoRep C2 of a real 2 KiB sector: cuzk (the engine, backend "auto": the
//! GPU when the engine has one, else the CPU) beside filecoin-proofs' own
//! `seal_commit_phase2` (bellperson on the CPU) on the same machine, the
//! same C1 output and the same parameters.
//!
//! The sector is sealed first with filecoin-proofs (pre-commit 1 and 2,
//! commit 1) and seeded test parameters are generated into the work
//! directory unless they are there (they cannot be downloaded here; with
//! the same seed they are the same parameters every time). Both provers
//! get one warm-up run (parameter loading, cuzk's PCE recording), then
//! `runs` timed runs each; every cuzk proof is checked with
//! filecoin-proofs' `verify_seal` (seal_commit_phase2 checks its own).
//!
//! Usage: porep_c2_bench <short git revision> <command line for the record>
//!        [--runs 3] [--dir DIR] [--backend auto|cpu|gpu]
//! DIR (default: $TMPDIR/cuzk-filecoin-bench) holds the parameter and
//! parent caches and the sector. Writes the bench-data JSON (area
//! `filecoin`) to stdout; progress to stderr.

// The benchmark examples' run facts, statistics and arguments, shared by path.
#[path = "../../groth16-cuda/examples/common/args.rs"]
mod args;
#[path = "../../groth16-cuda/examples/common/mod.rs"]
mod common;
use args::Record;

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Result, bail};
use clap::Parser;
use cuzk_engine::{Backend, Engine, EngineConfig};
use cuzk_filecoin::porep::generate_test_params;
use cuzk_filecoin::testing;
use cuzk_filecoin::{C1Output, SealProof, SectorSize};
use filecoin_proofs::SectorShape2KiB;
use serde_json::{Value, json};

/// PoRep C2 of a real 2 KiB sector: cuzk's engine beside filecoin-proofs'
/// `seal_commit_phase2`, same C1 output and parameters; writes the
/// bench-data JSON (area `filecoin`) to stdout, progress to stderr.
#[derive(Debug, Parser)]
#[command(name = "porep_c2_bench", args_override_self = true)]
struct Args {
    #[command(flatten)]
    record: Record,
    /// Timed runs of each prover (after one warm-up).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Holds the parameter and parent caches and the sector.
    #[arg(long, default_value_os_t = std::env::temp_dir().join("cuzk-filecoin-bench"))]
    dir: PathBuf,
    /// cuzk's engine backend: auto (the GPU when the engine has one), cpu or
    /// gpu.
    #[arg(long, value_name = "auto|cpu|gpu", default_value = "auto", value_parser = backend)]
    backend: Backend,
}

/// `--backend`'s value.
fn backend(value: &str) -> Result<Backend> {
    Ok(match value {
        "auto" => Backend::Auto,
        "cpu" => Backend::Cpu,
        "gpu" => Backend::Gpu,
        other => bail!("--backend takes auto, cpu or gpu, not {other}"),
    })
}

fn main() -> Result<()> {
    let args = Args::parse();
    if args.runs == 0 {
        bail!("--runs must be at least 1");
    }
    let params = args.dir.join("params");
    let parents = args.dir.join("parents");
    std::fs::create_dir_all(&params)?;
    std::fs::create_dir_all(&parents)?;
    // SAFETY: the process is single-threaded here and nothing has read
    // the environment yet; filecoin-proofs reads these once, later.
    unsafe {
        std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", &params);
        std::env::set_var("FIL_PROOFS_PARENT_CACHE", &parents);
    }
    let proof = SealProof::v1_1(SectorSize::KIB2);
    let config = proof.config()?;

    let start = Instant::now();
    let sector_dir = args.dir.join("sector");
    let _ = std::fs::remove_dir_all(&sector_dir);
    std::fs::create_dir_all(&sector_dir)?;
    let sealed = testing::seal::<SectorShape2KiB>(proof, &sector_dir, 7)?;
    eprintln!("sealed a 2 KiB sector: {:.2?}", start.elapsed());
    let start = Instant::now();
    let generated = generate_test_params(proof, &params, 0x5EED_F11E)?;
    eprintln!(
        "parameters {}: {:.2?}",
        if generated { "generated" } else { "cached" },
        start.elapsed()
    );

    let c1 = C1Output::from_json(&sealed.c1_json()?, Some(proof))?;
    let engine = Engine::new(EngineConfig {
        backend: args.backend,
        params_subgroup_check: false,
        ..EngineConfig::default()
    })?;
    let backend = engine.config().backend;
    let verify = |bytes: &[u8]| -> Result<()> {
        if !sealed.verify_seal(bytes)? {
            bail!("verify_seal refused cuzk's proof");
        }
        Ok(())
    };

    let mut cuzk = Vec::new();
    for run in 0..=args.runs {
        let start = Instant::now();
        let c2 = c1.prove(&engine, &params, None)?;
        let t = start.elapsed().as_secs_f64();
        verify(&c2.bytes)?;
        eprintln!(
            "cuzk ({backend}) {}: {t:.3} s, verified",
            if run == 0 { "warm-up" } else { "run" }
        );
        if run > 0 {
            cuzk.push(t);
        }
    }

    let mut theirs = Vec::new();
    for run in 0..=args.runs {
        let c1_typed: filecoin_proofs::SealCommitPhase1Output<SectorShape2KiB> =
            serde_json::from_slice(&sealed.c1_json()?)?;
        let start = Instant::now();
        filecoin_proofs::seal_commit_phase2(&config, c1_typed, sealed.prover_id, sealed.sector_id)?;
        let t = start.elapsed().as_secs_f64();
        eprintln!(
            "filecoin-proofs seal_commit_phase2 (CPU) {}: {t:.3} s",
            if run == 0 { "warm-up" } else { "run" }
        );
        if run > 0 {
            theirs.push(t);
        }
    }

    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let common::Stat {
        median, min, max, ..
    } = common::Stat::of(cuzk.clone());
    let common::Stat {
        median: base,
        min: base_min,
        max: base_max,
        ..
    } = common::Stat::of(theirs.clone());
    eprintln!(
        "PoRep C2 2KiB: cuzk ({backend}) median {median:.3} s, filecoin-proofs CPU median \
         {base:.3} s ({base_min:.3}..{base_max:.3}), ratio {:.2}",
        base / median
    );
    let out: Value = json!({
        "revision": args.record.revision,
        "date": common::today(),
        "machine": common::machine(&common::gpu_name(), json!({})),
        "command": args.record.command,
        "results": [
            {
                "name": format!("filecoin/porep-c2/2KiB/{backend}"),
                "unit": "s",
                "median": median, "min": min, "max": max, "runs": cuzk.len(),
                "derived": {"proofs_per_s": 1.0 / median},
                "baseline": {
                    "name": format!("filecoin-proofs-seal_commit_phase2-cpu-{cpus}t"),
                    "median": base,
                },
                "ratio_vs_baseline": base / median,
                "notes": "one partition; cuzk's time is submit to proofs through the engine \
                          (witness, SpMV, prover); seal_commit_phase2's includes its own \
                          parameter mapping and verify_seal; seeded test parameters"
            },
            {
                "name": format!("filecoin/porep-c2/2KiB/filecoin-proofs-cpu-{cpus}t"),
                "unit": "s",
                "median": base, "min": base_min, "max": base_max, "runs": theirs.len(),
            }
        ],
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}
