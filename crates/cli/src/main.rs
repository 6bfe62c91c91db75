//! `cuzk`: Groth16 proofs for bellperson circuits, from the command line.
//!
//! One-shot commands today: `setup` (parameters for a built-in circuit),
//! `prove`, `verify`, `demo` (all three in one go, with per-stage timings)
//! and `circuits` (the built-in circuit families).
//!
//! This file holds the command line and its dispatch; each subcommand's
//! handler lives in a module beside it (`setup`, `prove`, `demo`, `pce`,
//! `synthetic`, `filecoin`) or in the library's `commands`.

mod demo;
mod filecoin;
mod pce;
mod prove;
mod setup;
mod synthetic;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use cuzk_synth::circuits::CircuitSpec;

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
    /// Preload or evict a daemon's parameter set, or check a parameter directory's files.
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
        .with_ansi(log_colour())
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

/// Colour in log lines only for a person at a terminal: never into a file,
/// a pipe or journald, and never with `NO_COLOR` set (no-color.org).
fn log_colour() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
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
        } => setup::setup_cmd(
            circuit,
            &filecoin,
            fake,
            gpu,
            seed,
            &out,
            pce_dir.as_deref(),
        ),
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
        } => prove::prove_cmd(
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
        } => prove::verify_cmd(&instance, &params, &proof),
        Command::Demo { circuit, backend } => demo::demo(&circuit, backend),
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
        Command::Pce(args) => pce::record_blank_pce(&args),
        Command::SyntheticC1(args) => synthetic::synthetic_c1(&args),
        Command::SyntheticPost(args) => synthetic::synthetic_post(&args),
        Command::SyntheticSnap(args) => synthetic::synthetic_snap(&args),
    }
}
