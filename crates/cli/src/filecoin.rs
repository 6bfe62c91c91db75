//! `cuzk prove porep-c2 | winning-post | window-post | snap-deals`: Filecoin
//! proofs from their vanilla proofs, through the engine (`cuzk-filecoin`).
//!
//! These are parsed apart from the rest of `cuzk prove` (which proves
//! built-in circuits): `main` hands the command line over when its second
//! word names a Filecoin proof kind.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};
use cuzk_engine::{Engine, EngineConfig};
use cuzk_filecoin::post::PostInput;
use cuzk_filecoin::{C1Output, PostKind, SealProof, UpdateInput};

use cuzk_cli::commands::{PriorityArg, proof_bar, runtime};
use cuzk_cli::daemon::Address;
use cuzk_cli::daemon::request::priority_to_proto;
use cuzk_cli::{client, proto};

/// The `cuzk prove` kinds handled here.
pub const KINDS: [&str; 4] = ["porep-c2", "winning-post", "window-post", "snap-deals"];

#[derive(Debug, Parser)]
#[command(
    name = "cuzk prove",
    about = "Prove a Filecoin proof from its vanilla proofs, with filecoin-proofs' parameter files"
)]
struct FilecoinCli {
    #[command(subcommand)]
    kind: Kind,
}

#[derive(Debug, Subcommand)]
enum Kind {
    /// PoRep commit phase 2 from the JSON output of commit phase 1 (filecoin-proofs'
    /// SealCommitPhase1Output, or filecoin-proofs-api's with `registered_proof`).
    PorepC2 {
        /// The C1 output (JSON).
        #[arg(long)]
        c1: PathBuf,
        /// Where to write the proof (192 bytes per partition, as filecoin-proofs writes it).
        #[arg(long)]
        out: PathBuf,
        /// The registered proof, e.g. StackedDrg32GiBV1_1 (default: the file's, else V1_1 of the
        /// sector size read from the vanilla proofs).
        #[arg(long)]
        registered_proof: Option<SealProof>,
        #[command(flatten)]
        common: Common,
    },
    /// WinningPoSt from a request file: {registered_proof, randomness, prover_id,
    /// vanilla_proofs} with filecoin-proofs' FallbackPoStSectorProof JSON.
    WinningPost {
        #[arg(long)]
        input: PathBuf,
        #[arg(long)]
        out: PathBuf,
        #[command(flatten)]
        common: Common,
    },
    /// WindowPoSt from a request file (as for winning-post).
    WindowPost {
        #[arg(long)]
        input: PathBuf,
        #[arg(long)]
        out: PathBuf,
        #[command(flatten)]
        common: Common,
    },
    /// SnapDeals (empty sector update) from a request file: {registered_proof (e.g.
    /// StackedDrg32GiBV1), comm_r_old, comm_r_new, comm_d_new, vanilla_proofs} with
    /// filecoin-proofs' PartitionProof JSON (the output of generate_partition_proofs).
    SnapDeals {
        /// The request file (JSON).
        #[arg(long, visible_alias = "input")]
        request: PathBuf,
        /// Where to write the proof (192 bytes per partition, as filecoin-proofs writes it).
        #[arg(long)]
        out: PathBuf,
        #[command(flatten)]
        common: Common,
    },
}

#[derive(Debug, Args)]
struct Common {
    /// Directory of filecoin-proofs' parameter files (v28-*.params, .vk). Default: the
    /// FIL_PROOFS_PARAMETER_CACHE environment variable, else /var/tmp/filecoin-proof-parameters.
    #[arg(long)]
    param_cache: Option<PathBuf>,
    /// Verify the proof with storage-proofs' verifier (as filecoin-proofs' verify functions do)
    /// before writing it.
    #[arg(long)]
    verify: bool,
    /// Engine configuration file (TOML, see docs/engine.example.toml).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Engine setting overrides, key=value (e.g. --set backend=cpu).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Check every parameter point for subgroup membership while loading (slow for large
    /// files; filecoin-proofs' parameter files are usually checked by their published digests).
    #[arg(long)]
    subgroup_check: bool,
    /// Prove through the daemon at this address (unix:/run/cuzk.sock, a socket path, or
    /// 127.0.0.1:7400) instead of in this process: it proves with its own parameter cache and
    /// verifies the proof before replying. --param-cache is then only read for --verify when the
    /// daemon did not verify.
    #[arg(long, value_name = "ADDR")]
    daemon: Option<Address>,
    /// With --daemon: the job's priority (default: the kind's; WinningPoSt critical, WindowPoSt
    /// high, PoRep C2 and SnapDeals normal).
    #[arg(long, value_enum, requires = "daemon")]
    priority: Option<PriorityArg>,
}

/// Runs `cuzk prove <kind> ...` when `args` name one of [`KINDS`]; `None`
/// leaves the command line to the main parser. Usage errors and `--help`
/// exit the process as clap does everywhere else.
pub fn try_run(args: &[OsString]) -> Option<Result<()>> {
    let is = |i: usize, s: &str| args.get(i).is_some_and(|a| a == s);
    if !is(1, "prove") || !KINDS.iter().any(|k| is(2, k)) {
        return None;
    }
    let cli = FilecoinCli::try_parse_from(&args[1..]).unwrap_or_else(|e| e.exit());
    Some(run(cli.kind))
}

fn engine(common: &Common) -> Result<Engine> {
    let mut config = match &common.config {
        Some(path) => EngineConfig::from_file(path)?,
        None => EngineConfig::default(),
    };
    config.params_subgroup_check = common.subgroup_check;
    let config = config.with_overrides(common.set.iter().map(String::as_str))?;
    Ok(Engine::new(config)?)
}

fn param_dir(common: &Common) -> PathBuf {
    common
        .param_cache
        .clone()
        .unwrap_or_else(cuzk_filecoin::params::default_dir)
}

fn write_proof(out: &Path, bytes: &[u8]) -> Result<()> {
    cuzk_groth16_cuda::write_atomically(out, |w| std::io::Write::write_all(w, bytes))
        .with_context(|| format!("writing the proof to {}", out.display()))
}

/// Proves through a fresh engine, verifies when asked (nothing is written
/// when the proof does not verify), writes the proof atomically and prints
/// what was written, for every kind of Filecoin proof.
fn prove_verify_write(
    common: &Common,
    out: &Path,
    what: String,
    partitions: Option<usize>,
    prove: impl FnOnce(&Engine, &Path) -> Result<Vec<u8>>,
    verify: impl FnOnce(&Path, &[u8]) -> Result<bool>,
) -> Result<()> {
    let dir = param_dir(common);
    let engine = engine(common)?;
    let start = Instant::now();
    let bytes = prove(&engine, &dir)?;
    let took = start.elapsed();
    if common.verify && !verify(&dir, &bytes)? {
        bail!("the proof does not verify; nothing was written");
    }
    write_proof(out, &bytes)?;
    let partitions = partitions.map_or(String::new(), |n| format!("{n} partition(s), "));
    println!(
        "wrote {what} ({partitions}{} bytes) to {} in {took:.2?} ({} backend){}",
        bytes.len(),
        out.display(),
        engine.config().backend,
        if common.verify { "; verified" } else { "" }
    );
    Ok(())
}

/// Proves through the daemon: sends the input file's bytes, waits for the
/// proof (the daemon verified it unless told not to), verifies it here when
/// --verify asks and the daemon did not, writes it atomically.
fn prove_remote(
    common: &Common,
    address: &Address,
    out: &Path,
    what: &str,
    kind: proto::filecoin_proof::Kind,
    verify_here: impl FnOnce(&Path, &[u8]) -> Result<bool>,
) -> Result<()> {
    let request = proto::ProveRequest {
        priority: common.priority.map_or(proto::Priority::Unspecified, |p| {
            priority_to_proto(p.into())
        }) as i32,
        filecoin: Some(proto::FilecoinProof { kind: Some(kind) }),
        ..proto::ProveRequest::default()
    };
    let finished = runtime()?.block_on(async {
        let mut c = client::connect(address).await?;
        let stream = c
            .prove(request)
            .await
            .map_err(|s| client::call_error("the daemon refused the request", s))?
            .into_inner();
        let bar = proof_bar(0, false);
        bar.set_message(what.to_owned());
        let done = client::follow(stream, |_, progress| {
            bar.set_length(u64::from(progress.partitions));
            bar.set_position(u64::from(progress.proved));
        })
        .await;
        bar.finish_and_clear();
        done
    })?;
    if finished.proof.is_empty() {
        bail!(
            "daemon job {} sent no Filecoin proof bytes (is the daemon older than this client?)",
            finished.job_id
        );
    }
    let verified = if finished.verified {
        true
    } else if common.verify {
        if !verify_here(&param_dir(common), &finished.proof)? {
            bail!(
                "the proof of daemon job {} does not verify; nothing was written",
                finished.job_id
            );
        }
        true
    } else {
        false
    };
    write_proof(out, &finished.proof)?;
    println!(
        "wrote {what} ({} bytes) to {} in {:.2} s (daemon job {}){}",
        finished.proof.len(),
        out.display(),
        finished.seconds,
        finished.job_id,
        match (finished.verified, verified) {
            (true, _) => "; verified by the daemon",
            (false, true) => "; verified",
            _ => "",
        }
    );
    Ok(())
}

fn read_input(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))
}

fn run(kind: Kind) -> Result<()> {
    match kind {
        Kind::PorepC2 {
            c1,
            out,
            registered_proof,
            common,
        } if common.daemon.is_some() => {
            let address = common
                .daemon
                .clone()
                .unwrap_or_else(cuzk_cli::daemon::default_address);
            let kind = proto::filecoin_proof::Kind::PorepC2(proto::PoRepC2 {
                c1_json: read_input(&c1)?,
                registered_proof: registered_proof.map(|p| p.to_string()).unwrap_or_default(),
            });
            prove_remote(
                &common,
                &address,
                &out,
                "PoRep C2 proof",
                kind,
                |dir, bytes| {
                    let input = C1Output::from_file(&c1, registered_proof)?;
                    Ok(input.verify(dir, bytes)?)
                },
            )
        }
        Kind::WinningPost { input, out, common } if common.daemon.is_some() => {
            post_remote(PostKind::Winning, &input, &out, &common)
        }
        Kind::WindowPost { input, out, common } if common.daemon.is_some() => {
            post_remote(PostKind::Window, &input, &out, &common)
        }
        Kind::SnapDeals {
            request,
            out,
            common,
        } if common.daemon.is_some() => {
            let address = common
                .daemon
                .clone()
                .unwrap_or_else(cuzk_cli::daemon::default_address);
            let kind = proto::filecoin_proof::Kind::SnapDeals(read_input(&request)?);
            prove_remote(
                &common,
                &address,
                &out,
                "SnapDeals proof",
                kind,
                |dir, bytes| Ok(UpdateInput::from_file(&request)?.verify(dir, bytes)?),
            )
        }
        Kind::PorepC2 {
            c1,
            out,
            registered_proof,
            common,
        } => {
            let input = C1Output::from_file(&c1, registered_proof)
                .with_context(|| format!("reading {}", c1.display()))?;
            input
                .check_vanilla()
                .with_context(|| format!("checking {}", c1.display()))?;
            let what = format!("PoRep C2 proof of {}", input.proof());
            prove_verify_write(
                &common,
                &out,
                what,
                Some(input.partitions()),
                |engine, dir| Ok(input.prove(engine, dir, None)?.bytes),
                |dir, bytes| Ok(input.verify(dir, bytes)?),
            )
        }
        Kind::WinningPost { input, out, common } => post(PostKind::Winning, &input, &out, &common),
        Kind::WindowPost { input, out, common } => post(PostKind::Window, &input, &out, &common),
        Kind::SnapDeals {
            request,
            out,
            common,
        } => snap_deals(&request, &out, &common),
    }
}

fn snap_deals(request: &Path, out: &Path, common: &Common) -> Result<()> {
    let input = UpdateInput::from_file(request)
        .with_context(|| format!("reading {}", request.display()))?;
    // A mismatch of commitments and vanilla proofs is named here, before any
    // SNARK work (as porep-c2 checks its C1).
    input
        .check_vanilla()
        .with_context(|| format!("checking {}", request.display()))?;
    let what = format!("SnapDeals proof of {}", input.proof());
    prove_verify_write(
        common,
        out,
        what,
        Some(input.partitions()),
        |engine, dir| Ok(input.prove(engine, dir, None)?.bytes),
        |dir, bytes| Ok(input.verify(dir, bytes)?),
    )
}

fn post_remote(kind: PostKind, input: &Path, out: &Path, common: &Common) -> Result<()> {
    let address = common
        .daemon
        .clone()
        .unwrap_or_else(cuzk_cli::daemon::default_address);
    let bytes = read_input(input)?;
    let (what, kind_proto) = match kind {
        PostKind::Winning => (
            "WinningPoSt proof",
            proto::filecoin_proof::Kind::WinningPost(bytes),
        ),
        PostKind::Window => (
            "WindowPoSt proof",
            proto::filecoin_proof::Kind::WindowPost(bytes),
        ),
    };
    prove_remote(common, &address, out, what, kind_proto, |dir, proof| {
        Ok(PostInput::from_file(input, Some(kind))?.verify(dir, proof)?)
    })
}

fn post(kind: PostKind, input: &Path, out: &Path, common: &Common) -> Result<()> {
    let request = PostInput::from_file(input, Some(kind))
        .with_context(|| format!("reading {}", input.display()))?;
    let what = format!("{} proof", request.proof());
    prove_verify_write(
        common,
        out,
        what,
        None,
        |engine, dir| Ok(request.prove(engine, dir, None)?.bytes),
        |dir, bytes| Ok(request.verify(dir, bytes)?),
    )
}
