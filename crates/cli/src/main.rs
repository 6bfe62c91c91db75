//! `cuzk`: Groth16 proofs for bellperson circuits, from the command line.
//!
//! One-shot commands today: `setup` (parameters for a built-in circuit),
//! `prove`, `verify`, `demo` (all three in one go, with per-stage timings)
//! and `circuits` (the built-in circuit families).

mod filecoin;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use bellperson::groth16::{Parameters, Proof, prepare_verifying_key, verify_proof};
use blstrs::Scalar;
use clap::{Parser, Subcommand};
use cuzk_groth16_cuda::{Bls12, Prover};
use cuzk_synth::circuits::CircuitSpec;
use cuzk_synth::{Pce, Witness};
use ff::Field;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

#[derive(Debug, Parser)]
#[command(
    name = "cuzk",
    version,
    about = "Groth16 proving for bellperson circuits over BLS12-381"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Generate random Groth16 parameters for a built-in circuit (bellperson's file format).
    Setup {
        /// Write FAKE parameters: the right sizes, filled with cheap pseudo-random points, for
        /// timing at sizes where a real setup takes too long. Proofs made with them never verify.
        #[arg(long)]
        fake: bool,
        /// Generate on GPU 0: the file bellperson writes for the same toxic waste (the same
        /// `--seed` gives the same bytes), with every query point computed on the GPU. An error
        /// without a usable GPU. Without this flag bellperson generates on the CPU.
        #[arg(long, conflicts_with = "fake")]
        gpu: bool,
        /// Built-in circuit, e.g. `porep:12` (see `cuzk circuits`).
        #[arg(long, required_unless_present_any = ["seal_proof", "post_proof", "update_proof"])]
        circuit: Option<CircuitSpec>,
        #[command(flatten)]
        filecoin: FilecoinCircuit,
        /// Where to write the parameters: a file for a built-in circuit; for a Filecoin circuit
        /// a parameter directory, where they go under filecoin-proofs' names (.params, .vk,
        /// .meta).
        #[arg(long)]
        out: PathBuf,
        /// For a Filecoin circuit: a PCE directory (the engine's pce_cache_dir). Its PCE is
        /// read from there if it is there, else recorded from the blank circuit and written
        /// there.
        #[arg(long)]
        pce_dir: Option<PathBuf>,
        /// Seed for the toxic waste, for reproducible test parameters. Without it the
        /// parameters come from the operating system's randomness.
        #[arg(long)]
        seed: Option<u64>,
    },
    /// Prove an instance of a built-in circuit, in this process or through a daemon.
    /// Filecoin proofs: `cuzk prove porep-c2|winning-post|window-post|snap-deals --help`.
    Prove {
        #[command(flatten)]
        instance: Instance,
        /// Parameters made by `cuzk setup` (or any bellperson parameter file for this circuit).
        #[arg(long, required_unless_present = "params_set")]
        params: Option<PathBuf>,
        /// A parameter set the daemon's configuration names (with --daemon).
        #[arg(long, requires = "daemon", conflicts_with = "params")]
        params_set: Option<String>,
        /// Prove through the daemon at this address (a Unix socket path or 127.0.0.1:PORT).
        #[arg(long, value_name = "ADDR")]
        daemon: Option<cuzk_cli::daemon::Address>,
        /// Partitions (with --daemon): witness seeds witness-seed, witness-seed + 1, ...; the
        /// proofs are written one after another.
        #[arg(long, default_value_t = 1, requires = "daemon")]
        partitions: u32,
        /// Priority of the job (with --daemon).
        #[arg(long, value_enum, default_value_t = cuzk_cli::commands::PriorityArg::Normal)]
        priority: cuzk_cli::commands::PriorityArg,
        /// Write the proof's stage timeline as Chrome-trace JSON here (in process; for a
        /// daemon's runs see `cuzk timeline`).
        #[arg(long, conflicts_with = "daemon")]
        timeline: Option<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Where to write the 192-byte proof.
        #[arg(long)]
        out: PathBuf,
        /// Seed for r and s, to reproduce a proof exactly. Without it r and s come from the
        /// operating system's randomness, as a zero-knowledge proof needs.
        #[arg(long)]
        rs_seed: Option<u64>,
        /// Do not verify the proof before writing it.
        #[arg(long)]
        no_verify: bool,
        /// Where to prove: the CUDA backend, the CPU backend, or the GPU when there is one.
        #[arg(long, value_enum, default_value_t = Backend::Auto)]
        backend: Backend,
        /// Skip the subgroup check of every parameter point (points are still checked to be on
        /// the curve): for large parameter files whose integrity is checked another way (a
        /// digest). The full check costs about 25 µs per point.
        #[arg(long)]
        trusted_params: bool,
    },
    /// Verify a proof of a built-in circuit instance.
    Verify {
        #[command(flatten)]
        instance: Instance,
        /// Parameters (only the verifying key at their start is read).
        #[arg(long)]
        params: PathBuf,
        /// The proof file.
        #[arg(long)]
        proof: PathBuf,
    },
    /// Setup, prove and verify a small built-in circuit in one go, with per-stage timings,
    /// and check the proof against bellperson's own prover byte for byte.
    Demo {
        /// Built-in circuit.
        #[arg(long, default_value = "porep:12")]
        circuit: CircuitSpec,
        /// Where to prove: the CUDA backend, the CPU backend, or the GPU when there is one.
        #[arg(long, value_enum, default_value_t = Backend::Auto)]
        backend: Backend,
    },
    /// List the built-in circuit families.
    Circuits,
    /// Serve proofs over gRPC (a Unix socket by default) with status and metrics.
    Daemon(cuzk_cli::commands::DaemonArgs),
    /// Prove many jobs of a built-in circuit, in process or through the daemon.
    Bench(cuzk_cli::commands::BenchArgs),
    /// A daemon's queues, workers, memory and resident parameter sets.
    Status(cuzk_cli::commands::StatusArgs),
    /// The CUDA devices this machine has.
    Devices(cuzk_cli::commands::DevicesArgs),
    /// Write a daemon's last run as Chrome-trace JSON (opens in Perfetto).
    Timeline(cuzk_cli::commands::TimelineArgs),
    /// Preload or evict a daemon's parameter set.
    Params(cuzk_cli::commands::ParamsArgs),
    /// Record the PCE of a Filecoin circuit from its blank circuit (no sector needed) into a
    /// PCE directory (the engine's pce_cache_dir), where proofs of that circuit then read it
    /// instead of recording it.
    Pce(PceArgs),
    /// Generate a PoRep commit phase 1 output (C1) without a sealed sector: consistent
    /// vanilla proofs of any sector size, deterministic from a seed, for proving C2 at sizes
    /// that cannot be sealed here. Writes the C1 JSON (with the prover and sector ids that
    /// verify_seal needs) for `cuzk prove porep-c2`.
    SyntheticC1(SyntheticC1Args),
    /// Generate a WinningPoSt or WindowPoSt request over sectors that were never sealed:
    /// consistent vanilla proofs (sparse trees, filecoin-proofs' challenges), deterministic
    /// from a seed, for `cuzk prove winning-post|window-post --input FILE`; the file also lists
    /// each sector's id and comm_r for the verifiers.
    SyntheticPost(SyntheticPostArgs),
    /// Generate a SnapDeals request (every partition's vanilla proof) for a CC sector that was
    /// never sealed, updated with data that was never written: consistent, deterministic from
    /// a seed, for `cuzk prove snap-deals --request FILE`.
    SyntheticSnap(SyntheticSnapArgs),
}

/// `cuzk synthetic-snap`.
#[derive(Debug, clap::Args)]
struct SyntheticSnapArgs {
    /// The registered update proof, e.g. StackedDrg32GiBV1.
    #[arg(long)]
    update_proof: String,
    /// Everything in the request follows from it.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// The request JSON file to write (replaced atomically).
    #[arg(long)]
    out: PathBuf,
}

/// `cuzk synthetic-post`.
#[derive(Debug, clap::Args)]
struct SyntheticPostArgs {
    /// The registered PoSt proof, e.g. StackedDrgWindow32GiBV1_1.
    #[arg(long)]
    post_proof: String,
    /// Sectors proved (WindowPoSt: one partition holds the proof type's sector count, e.g.
    /// 2349 at 32 GiB; WinningPoSt: 1).
    #[arg(long, default_value_t = 1)]
    sectors: usize,
    /// Everything in the request follows from it.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// The request JSON file to write (replaced atomically).
    #[arg(long)]
    out: PathBuf,
}

/// A Filecoin circuit named by its registered proof.
#[derive(Debug, clap::Args)]
#[group(multiple = false, conflicts_with = "circuit")]
struct FilecoinCircuit {
    /// The PoRep C2 circuit of a registered seal proof, e.g. StackedDrg32GiBV1_1.
    #[arg(long)]
    seal_proof: Option<String>,
    /// The PoSt circuit of a registered PoSt proof, e.g. StackedDrgWindow32GiBV1_1.
    #[arg(long)]
    post_proof: Option<String>,
    /// The SnapDeals circuit of a registered update proof, e.g. StackedDrg32GiBV1.
    #[arg(long)]
    update_proof: Option<String>,
}

/// `cuzk synthetic-c1`.
#[derive(Debug, clap::Args)]
struct SyntheticC1Args {
    /// The registered seal proof, e.g. StackedDrg32GiBV1_1 (interactive PoRep).
    #[arg(long)]
    seal_proof: String,
    /// Everything in the C1 follows from it.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// The C1 JSON file to write (replaced atomically).
    #[arg(long)]
    out: PathBuf,
}

/// `cuzk pce`: which circuit, and where its PCE goes.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("circuit").required(true).multiple(false)))]
struct PceArgs {
    /// The PoRep C2 circuit of a registered seal proof, e.g. StackedDrg32GiBV1_1.
    #[arg(long, group = "circuit")]
    seal_proof: Option<String>,
    /// The PoSt circuit of a registered PoSt proof, e.g. StackedDrgWindow32GiBV1_1.
    #[arg(long, group = "circuit")]
    post_proof: Option<String>,
    /// The SnapDeals circuit of a registered update proof, e.g. StackedDrg32GiBV1.
    #[arg(long, group = "circuit")]
    update_proof: Option<String>,
    /// The PCE directory (the engine's pce_cache_dir).
    #[arg(long)]
    out_dir: PathBuf,
    /// Then read the file back as an engine does, timed.
    #[arg(long)]
    read_back: bool,
}

/// Which prover backend to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Backend {
    /// The GPU when the CUDA driver and a device are there, else the CPU.
    Auto,
    /// The CUDA backend on GPU 0 (an error without one).
    Gpu,
    /// The CPU backend.
    Cpu,
}

/// The prover of `backend`, chosen by the engine as an engine with that
/// backend chooses it.
fn make_prover(backend: Backend) -> Result<std::sync::Arc<dyn Prover>> {
    let config = cuzk_engine::EngineConfig {
        backend: match backend {
            Backend::Auto => cuzk_engine::Backend::Auto,
            Backend::Gpu => cuzk_engine::Backend::Gpu,
            Backend::Cpu => cuzk_engine::Backend::Cpu,
        },
        ..cuzk_engine::EngineConfig::default()
    };
    cuzk_engine::open_prover(&config).map_err(|e| match backend {
        Backend::Gpu => anyhow::anyhow!("{e}; use --backend cpu"),
        _ => e.into(),
    })
}

/// A built-in circuit instance: its shape and the seed of its witness.
#[derive(Debug, clap::Args)]
struct Instance {
    /// Built-in circuit, e.g. `porep:12` (see `cuzk circuits`).
    #[arg(long)]
    circuit: CircuitSpec,
    /// Seed of the witness values (the public inputs follow from it).
    #[arg(long, default_value_t = 1)]
    witness_seed: u64,
}

/// mimalloc (witness generation allocates and frees small vectors on every
/// core), or the system's allocator with `CUZK_ALLOCATOR=system`.
#[global_allocator]
static ALLOC: cuzk_synth::allocator::Allocator = cuzk_synth::allocator::Allocator;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    // `cuzk prove porep-c2|winning-post|window-post|snap-deals ...`: Filecoin proofs
    // (filecoin.rs).
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let result = filecoin::try_run(&argv).unwrap_or_else(|| run(Cli::parse_from(&argv)));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Setup {
            fake,
            gpu,
            circuit,
            filecoin,
            out,
            pce_dir,
            seed,
        } => {
            let Some(circuit) = circuit else {
                return setup_filecoin(&filecoin, fake, gpu, seed, &out, pce_dir.as_deref());
            };
            if pce_dir.is_some() {
                bail!(
                    "--pce-dir is for Filecoin circuits (--seal-proof, --post-proof, --update-proof)"
                );
            }
            let start = Instant::now();
            if gpu {
                return setup_gpu(&circuit, seed, &out);
            }
            if fake {
                let pce = Pce::record(circuit.build(0))?;
                cuzk_groth16_cuda::fake::write_fake_params(&out, &pce, seed.unwrap_or(0))?;
                println!(
                    "wrote FAKE parameters for {circuit} to {} ({:.2?}): for timing only, proofs \
                     made with them never verify",
                    out.display(),
                    start.elapsed()
                );
                return Ok(());
            }
            let params = setup(&circuit, seed)?;
            cuzk_groth16_cuda::write_params(&out, &params)?;
            println!(
                "wrote parameters for {circuit} to {} ({:.2?})",
                out.display(),
                start.elapsed()
            );
            Ok(())
        }
        Command::Prove {
            instance,
            params,
            params_set,
            daemon: Some(address),
            partitions,
            priority,
            out,
            rs_seed,
            no_verify,
            json,
            ..
        } => cuzk_cli::commands::prove_remote(cuzk_cli::commands::RemoteProve {
            address,
            circuit: instance.circuit,
            witness_seed: instance.witness_seed,
            partitions,
            params,
            params_set,
            out,
            rs_seed,
            priority,
            no_verify,
            json,
        }),
        Command::Prove {
            instance,
            params,
            out,
            rs_seed,
            no_verify,
            backend,
            trusted_params,
            timeline,
            json,
            ..
        } => prove_cmd(
            &instance,
            params
                .as_deref()
                .context("--params is needed without --daemon")?,
            &out,
            rs_seed,
            no_verify,
            backend,
            trusted_params,
            (timeline.as_deref(), json),
        ),
        Command::Verify {
            instance,
            params,
            proof,
        } => verify_cmd(&instance, &params, &proof),
        Command::Demo { circuit, backend } => demo(&circuit, backend),
        Command::Circuits => {
            for (name, what) in CircuitSpec::families() {
                println!("{name:<16} {what}");
            }
            Ok(())
        }
        Command::Daemon(args) => cuzk_cli::commands::daemon(args),
        Command::Bench(args) => cuzk_cli::commands::bench(args),
        Command::Status(args) => cuzk_cli::commands::status(args),
        Command::Devices(args) => cuzk_cli::commands::devices(args),
        Command::Timeline(args) => cuzk_cli::commands::timeline(args),
        Command::Params(args) => cuzk_cli::commands::params(args),
        Command::Pce(args) => record_blank_pce(&args),
        Command::SyntheticC1(args) => synthetic_c1(&args),
        Command::SyntheticPost(args) => synthetic_post(&args),
        Command::SyntheticSnap(args) => synthetic_snap(&args),
    }
}

/// `cuzk setup --seal-proof|--post-proof|--update-proof NAME --out DIR`.
fn setup_filecoin(
    which: &FilecoinCircuit,
    fake: bool,
    gpu: bool,
    seed: Option<u64>,
    dir: &Path,
    pce_dir: Option<&Path>,
) -> Result<()> {
    use cuzk_filecoin::params::Setup;
    let start = Instant::now();
    if gpu {
        // Before the circuit is recorded, which takes minutes at full size.
        cuzk_groth16_cuda::cuda::Gpu::get(0)
            .context("cuzk setup --gpu needs a CUDA GPU; leave out --gpu to generate on the CPU")?;
    }
    let (files, sector_size) = match (&which.seal_proof, &which.post_proof, &which.update_proof) {
        (Some(n), _, _) => {
            let p: cuzk_filecoin::SealProof = n.parse()?;
            (
                cuzk_filecoin::porep::param_files_for(p, dir)?,
                p.sector_size,
            )
        }
        (_, Some(n), _) => {
            let p: cuzk_filecoin::PostProof = n.parse()?;
            (cuzk_filecoin::post::param_files_for(p, dir)?, p.sector_size)
        }
        (_, _, Some(n)) => {
            let p: cuzk_filecoin::UpdateProof = n.parse()?;
            (
                cuzk_filecoin::update::param_files_for(p, dir)?,
                p.sector_size(),
            )
        }
        _ => bail!("give --circuit, --seal-proof, --post-proof or --update-proof"),
    };
    let shape = cuzk_filecoin::shape_id(&files);
    let on_disk = pce_dir
        .map(|d| d.join(cuzk_engine::pce_file::file_name(&shape)))
        .filter(|p| p.is_file());
    let pce = match on_disk {
        Some(path) => {
            let t = Instant::now();
            let pce = cuzk_engine::pce_file::read_pce(&path, &shape, None)?;
            println!(
                "read the PCE from {} in {:.3} s",
                path.display(),
                t.elapsed().as_secs_f64()
            );
            pce
        }
        None => {
            let blank = match (&which.seal_proof, &which.post_proof) {
                (Some(n), _) => cuzk_filecoin::porep::blank_pce(n.parse()?),
                (_, Some(n)) => cuzk_filecoin::post::blank_pce(n.parse()?),
                _ => cuzk_filecoin::update::blank_pce(
                    which.update_proof.as_deref().unwrap_or_default().parse()?,
                ),
            }?;
            println!(
                "recorded the blank circuit in {:.3} s ({} constraints)",
                blank.record_seconds,
                blank.pce.num_constraints()
            );
            if let Some(d) = pce_dir {
                let t = Instant::now();
                let path = blank.write_to(d)?;
                println!(
                    "wrote the PCE to {} in {:.3} s",
                    path.display(),
                    t.elapsed().as_secs_f64()
                );
            }
            blank.pce
        }
    };
    let how = match (fake, gpu) {
        (true, _) => Setup::Fake,
        (_, true) => Setup::Gpu(0),
        _ => Setup::Cpu,
    };
    let done = cuzk_filecoin::params::setup_from_pce(&files, &pce, sector_size.bytes(), seed, how)?;
    println!(
        "wrote {}parameters for {} to {} ({:.2} GB) in {:.3} s on {}; {:.3} s in all{}",
        if fake { "FAKE " } else { "" },
        files.id,
        files.params.display(),
        done.params_bytes as f64 / 1e9,
        done.seconds,
        done.backend,
        start.elapsed().as_secs_f64(),
        if fake {
            ": for timing only, proofs made with them never verify"
        } else {
            ""
        }
    );
    if let Some(peak) = peak_rss() {
        println!("peak resident memory: {peak}");
    }
    Ok(())
}

/// `cuzk synthetic-post`.
fn synthetic_post(args: &SyntheticPostArgs) -> Result<()> {
    let proof: cuzk_filecoin::PostProof = args.post_proof.parse()?;
    let s = cuzk_filecoin::synthetic::post_json(proof, args.sectors, args.seed)?;
    cuzk_groth16_cuda::write_atomically(&args.out, |w| std::io::Write::write_all(w, &s.json))?;
    println!(
        "wrote a synthetic {proof} request over {} sectors (seed {}) to {} in {:.3} s, {} bytes",
        s.replicas.len(),
        args.seed,
        args.out.display(),
        s.seconds,
        s.json.len()
    );
    println!("prover_id   {}", hex::encode(s.prover_id));
    println!("randomness  {}", hex::encode(s.randomness));
    Ok(())
}

/// `cuzk synthetic-snap`.
fn synthetic_snap(args: &SyntheticSnapArgs) -> Result<()> {
    let proof: cuzk_filecoin::UpdateProof = args.update_proof.parse()?;
    let s = cuzk_filecoin::synthetic::update_json(proof, args.seed)?;
    cuzk_groth16_cuda::write_atomically(&args.out, |w| std::io::Write::write_all(w, &s.json))?;
    println!(
        "wrote a synthetic {proof} SnapDeals request (seed {}) to {} in {:.3} s, {} bytes",
        args.seed,
        args.out.display(),
        s.seconds,
        s.json.len()
    );
    println!("comm_r_old  {}", hex::encode(s.comm_r_old));
    println!("comm_r_new  {}", hex::encode(s.comm_r_new));
    println!("comm_d_new  {}", hex::encode(s.comm_d_new));
    Ok(())
}

/// `cuzk synthetic-c1`.
fn synthetic_c1(args: &SyntheticC1Args) -> Result<()> {
    let proof: cuzk_filecoin::SealProof = args.seal_proof.parse()?;
    let s = cuzk_filecoin::synthetic::generate_json(proof, args.seed)?;
    cuzk_groth16_cuda::write_atomically(&args.out, |w| std::io::Write::write_all(w, &s.json))?;
    println!(
        "wrote a synthetic {proof} C1 (seed {}) to {} in {:.3} s: {} partitions, {} challenges, \
         {} bytes",
        args.seed,
        args.out.display(),
        s.seconds,
        s.partitions,
        s.challenges,
        s.json.len()
    );
    println!("prover_id  {}", hex::encode(s.prover_id));
    println!("sector_id  {}", s.sector_id);
    println!("comm_r     {}", hex::encode(s.comm_r));
    println!("comm_d     {}", hex::encode(s.comm_d));
    println!("ticket     {}", hex::encode(s.ticket));
    println!("seed       {}", hex::encode(s.seed));
    Ok(())
}

/// `cuzk pce`.
fn record_blank_pce(args: &PceArgs) -> Result<()> {
    let blank = match (&args.seal_proof, &args.post_proof, &args.update_proof) {
        (Some(n), _, _) => cuzk_filecoin::porep::blank_pce(n.parse()?),
        (_, Some(n), _) => cuzk_filecoin::post::blank_pce(n.parse()?),
        (_, _, Some(n)) => cuzk_filecoin::update::blank_pce(n.parse()?),
        _ => bail!("give --seal-proof, --post-proof or --update-proof"),
    }?;
    let pce = &blank.pce;
    println!(
        "recorded {} in {:.3} s: {} constraints, {} inputs, {} aux; nnz A/B/C {}/{}/{}; {} bytes in \
         memory",
        blank.shape,
        blank.record_seconds,
        pce.num_constraints(),
        pce.num_inputs,
        pce.num_aux,
        pce.a.nnz(),
        pce.b.nnz(),
        pce.c.nnz(),
        pce.bytes()
    );
    if let Some(peak) = peak_rss() {
        println!("peak resident memory after recording: {peak}");
    }
    let t = Instant::now();
    let path = blank.write_to(&args.out_dir)?;
    let len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    println!(
        "wrote {} ({len} bytes) in {:.3} s",
        path.display(),
        t.elapsed().as_secs_f64()
    );
    if args.read_back {
        // Read as an engine reads it, with the recorded PCE dropped first.
        let counts = cuzk_engine::pce_file::ShapeCounts::of(pce);
        let shape = blank.shape.clone();
        drop(blank);
        let t = Instant::now();
        let read = cuzk_engine::pce_file::read_pce(&path, &shape, Some(counts))?;
        println!(
            "read it back in {:.3} s ({} constraints)",
            t.elapsed().as_secs_f64(),
            read.num_constraints()
        );
        if let Some(peak) = peak_rss() {
            println!("peak resident memory: {peak}");
        }
    }
    Ok(())
}

/// This process's peak resident memory as the kernel reports it (Linux).
fn peak_rss() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .map(|v| v.trim().to_owned())
}

fn setup(circuit: &CircuitSpec, seed: Option<u64>) -> Result<Parameters<Bls12>> {
    let mut rng = match seed {
        Some(s) => ChaCha20Rng::seed_from_u64(s),
        None => ChaCha20Rng::from_entropy(),
    };
    bellperson::groth16::generate_random_parameters::<Bls12, _, _>(circuit.build(0), &mut rng)
        .with_context(|| format!("generating parameters for {circuit}"))
}

/// `cuzk setup --gpu`: the toxic waste drawn as bellperson's
/// `generate_random_parameters` draws it from the same RNG, so a `--seed`
/// gives the file `cuzk setup` (bellperson) writes.
fn setup_gpu(circuit: &CircuitSpec, seed: Option<u64>, out: &Path) -> Result<()> {
    use cuzk_groth16_cuda::setup::{SetupOptions, ToxicWaste, generate_parameters_file};
    let start = Instant::now();
    // Before the circuit is recorded, which takes long at large sizes.
    cuzk_groth16_cuda::cuda::Gpu::get(0).context(
        "cuzk setup --gpu needs a CUDA GPU; leave out --gpu to use bellperson on the CPU",
    )?;
    let waste = match seed {
        Some(s) => ToxicWaste::from_seed(s),
        None => ToxicWaste::random(&mut ChaCha20Rng::from_entropy()),
    };
    let pce = Pce::record(circuit.build(0)).with_context(|| format!("recording {circuit}"))?;
    let recorded = start.elapsed();
    let report =
        generate_parameters_file(out, &pce, &waste, &SetupOptions::gpu(0)).with_context(|| {
            format!(
                "generating parameters for {circuit} on the GPU (leave out --gpu to generate \
                 them with bellperson on the CPU)"
            )
        })?;
    let points: usize = report.sections.iter().map(|s| s.points).sum();
    println!(
        "wrote parameters for {circuit} to {} ({:.2?}: circuit recorded in {recorded:.2?}, QAP \
         {:.2} s, {points} points on {} with GPU kernels {:.2} s, {:.2} GB written)",
        out.display(),
        start.elapsed(),
        report.qap_s,
        report.backend,
        report.kernel_s,
        report.bytes as f64 / 1e9
    );
    Ok(())
}

fn randomness(seed: Option<u64>) -> (Scalar, Scalar) {
    let mut rng = match seed {
        Some(s) => ChaCha20Rng::seed_from_u64(s),
        None => ChaCha20Rng::from_entropy(),
    };
    (Scalar::random(&mut rng), Scalar::random(&mut rng))
}

fn proof_bytes(proof: &Proof<Bls12>) -> Vec<u8> {
    let mut v = Vec::with_capacity(192);
    // Writing into a Vec cannot fail.
    let _ = proof.write(&mut v);
    v
}

#[allow(clippy::too_many_arguments)]
fn prove_cmd(
    instance: &Instance,
    params_path: &Path,
    out: &Path,
    rs_seed: Option<u64>,
    no_verify: bool,
    backend: Backend,
    trusted_params: bool,
    (timeline, json): (Option<&Path>, bool),
) -> Result<()> {
    let circuit = &instance.circuit;
    let params = cuzk_groth16_cuda::read_params(params_path, !trusted_params)?;
    let fake = cuzk_groth16_cuda::fake::is_fake(&params.vk);
    if fake {
        eprintln!(
            "WARNING: {} holds FAKE parameters (cuzk setup --fake): the proof will be made for \
             timing but it can NEVER verify",
            params_path.display()
        );
    }
    let pce = Pce::record(circuit.build(0)).with_context(|| format!("recording {circuit}"))?;
    let (r, s) = randomness(rs_seed);
    let prover = make_prover(backend)?;
    let output = cuzk_engine::prove_partition(
        prover.as_ref(),
        &pce,
        circuit.build(instance.witness_seed),
        &params,
        r,
        s,
    )
    .with_context(|| format!("proving {circuit}"))?;
    if !no_verify && !fake {
        let inputs = Witness::synthesize(circuit.build(instance.witness_seed))?;
        let pvk = prepare_verifying_key(&params.vk);
        if !verify_proof(&pvk, &output.proof, inputs.public_inputs())? {
            bail!(
                "the proof does not verify against {}: the parameters were made for another \
                 circuit of the same shape; nothing was written",
                params_path.display()
            );
        }
    }
    let bytes = proof_bytes(&output.proof);
    cuzk_groth16_cuda::write_atomically(out, |w| std::io::Write::write_all(w, &bytes))?;
    if let Some(path) = timeline {
        cuzk_cli::commands::write_trace(
            path,
            &cuzk_cli::commands::stage_timeline(&output.timings),
        )?;
    }
    if json {
        let stages: serde_json::Map<String, serde_json::Value> = output
            .timings
            .0
            .iter()
            .map(|(stage, d)| (stage.to_string(), d.as_secs_f64().into()))
            .collect();
        println!(
            "{}",
            serde_json::json!({
                "circuit": circuit.to_string(),
                "out": out,
                "backend": prover.name(),
                "seconds": output.timings.total().as_secs_f64(),
                "stages": stages,
                "verified": !no_verify && !fake,
            })
        );
        return Ok(());
    }
    println!(
        "wrote {}proof of {circuit} to {} ({} backend, {:.2?})",
        if fake {
            "UNVERIFIABLE (fake parameters) "
        } else {
            ""
        },
        out.display(),
        prover.name(),
        output.timings.total()
    );
    Ok(())
}

fn read_proof(path: &Path) -> Result<Proof<Bls12>> {
    let bytes = std::fs::read(path)
        .with_context(|| format!("cannot read proof file {}", path.display()))?;
    if bytes.len() != 192 {
        bail!(
            "proof file {} has {} bytes; a Groth16 proof over BLS12-381 has 192",
            path.display(),
            bytes.len()
        );
    }
    Proof::read(&bytes[..]).with_context(|| {
        format!(
            "proof file {} does not hold valid curve points",
            path.display()
        )
    })
}

fn verify_cmd(instance: &Instance, params_path: &Path, proof_path: &Path) -> Result<()> {
    let vk = cuzk_groth16_cuda::read_verifying_key(params_path)?;
    if cuzk_groth16_cuda::fake::is_fake(&vk) {
        bail!(
            "{} holds FAKE parameters (cuzk setup --fake): no proof can verify against them",
            params_path.display()
        );
    }
    let proof = read_proof(proof_path)?;
    let witness = Witness::synthesize(instance.circuit.build(instance.witness_seed))?;
    let inputs = witness.public_inputs();
    if inputs.len() + 1 != vk.ic.len() {
        bail!(
            "the verifying key in {} expects {} public inputs but {} has {}: these parameters are \
             for another circuit",
            params_path.display(),
            vk.ic.len().saturating_sub(1),
            instance.circuit,
            inputs.len()
        );
    }
    let pvk = prepare_verifying_key(&vk);
    if verify_proof(&pvk, &proof, inputs)? {
        println!("proof {} verifies", proof_path.display());
        Ok(())
    } else {
        bail!(
            "proof {} does NOT verify for {} with witness seed {}",
            proof_path.display(),
            instance.circuit,
            instance.witness_seed
        )
    }
}

fn demo(circuit: &CircuitSpec, backend: Backend) -> Result<()> {
    println!("cuzk demo: {circuit}");
    let prover = make_prover(backend)?;
    let t = Instant::now();
    let params = setup(circuit, Some(1))?;
    println!(
        "  setup        {:>10.3} ms  (bellperson parameter generation)",
        ms(t)
    );

    let t = Instant::now();
    let pce = Pce::record(circuit.build(0))?;
    println!(
        "  record PCE   {:>10.3} ms  ({} constraints, domain 2^{}, {} inputs, {} aux; nnz A/B/C {}/{}/{})",
        ms(t),
        pce.num_constraints(),
        pce.domain_log2(),
        pce.num_inputs,
        pce.num_aux,
        pce.a.nnz(),
        pce.b.nnz(),
        pce.c.nnz()
    );

    let (r, s) = randomness(Some(2));
    let out = cuzk_engine::prove_partition(prover.as_ref(), &pce, circuit.build(1), &params, r, s)?;
    print!("{}", out.timings);
    println!(
        "  prove total  {:>10.3} ms  ({} backend)",
        out.timings.total().as_secs_f64() * 1e3,
        prover.name()
    );

    let witness = Witness::synthesize(circuit.build(1))?;
    let t = Instant::now();
    let pvk = prepare_verifying_key(&params.vk);
    let ok = verify_proof(&pvk, &out.proof, witness.public_inputs())?;
    println!("  verify       {:>10.3} ms", ms(t));

    let t = Instant::now();
    let theirs = bellperson::groth16::create_proof(circuit.build(1), &params, r, s)?;
    let same = proof_bytes(&theirs) == proof_bytes(&out.proof);
    println!(
        "  bellperson   {:>10.3} ms  (its create_proof, same r and s)",
        ms(t)
    );

    println!("proof: {}", hex(&proof_bytes(&out.proof)));
    println!("verified: {}", if ok { "yes" } else { "NO" });
    println!(
        "byte-identical to bellperson: {}",
        if same { "yes" } else { "NO" }
    );
    if !ok || !same {
        bail!("the demo proof failed its checks");
    }
    Ok(())
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
