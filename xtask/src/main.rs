//! Project automation, run as `cargo xtask <command>` from anywhere in the
//! workspace.
//!
//! - `cargo xtask kernels` (alias `ptx`): compile `kernels/*.cu` to fatbins
//!   (SASS for sm_80/86/89/90 and compute_80 PTX) in `kernels/fatbin/` and
//!   rewrite its manifest (needs nvcc only when there is at least one module;
//!   `NVCC` overrides the nvcc path).
//! - `cargo xtask bundle [--only groth16-cuda,gpu-sched]`: build the release
//!   test executables and the `cuzk` binary, strip them and gather them with
//!   a run script in `.device/bundle/`, for the GPU machine (no cargo there):
//!   `bash .device/bundle/run.sh [FILTER] [TEST ARGS...]`.
//! - `cargo xtask sweep bundle [--out DIR] [--with-cuzk]`: the `cuzk-sweep`
//!   binary, stripped and packed with run.sh into `.device/sweep/` for the GPU
//!   machine: `bash .device/sweep/run.sh --circuit ... --grid key=v1,v2 ...`.
//! - `cargo xtask sweep run -- ARGS`: builds and runs `cuzk-sweep run ARGS`
//!   here (CPU backend without a GPU).
//! - `cargo xtask sweep plot JSON... [--out DIR]`: redraws the SVGs of saved
//!   sweep results.
//! - `cargo xtask figures [FILE...]`: every figure the README (or FILE)
//!   quotes beside a bench-data file is in that file (also a test).

use std::{
    path::{Path, PathBuf},
    process::ExitCode,
};

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

mod bundle;
mod figures;
mod kernels;
mod sweep;

#[derive(Debug, Parser)]
#[command(
    name = "cargo xtask",
    bin_name = "cargo xtask",
    about = "cuzk project automation"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Compile every kernels/*.cu to kernels/fatbin/<stem>.fatbin (SASS for
    /// sm_80, sm_86, sm_89, sm_90 and compute_80 PTX) and write
    /// kernels/fatbin/manifest.json (nvcc from $NVCC, PATH or /usr/local/cuda).
    #[command(visible_alias = "ptx")]
    Kernels {
        /// Kernels directory [default: kernels/ in the workspace].
        #[arg(long, value_name = "DIR")]
        kernels: Option<PathBuf>,
    },
    /// Build the release test executables and the cuzk binary, strip them and
    /// put them with run.sh into .device/bundle/ for the GPU machine.
    Bundle {
        /// Only these packages' tests (comma-separated; the `cuzk-` prefix
        /// may be left out), e.g. `groth16-cuda,gpu-sched`.
        #[arg(long, value_delimiter = ',', value_name = "PACKAGES")]
        only: Vec<String>,
        /// The bundle folder [default: .device/bundle in the workspace];
        /// replaced when it holds a bundle.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// Refuse a bundle larger than this (the transfer to the GPU machine carries 64 MiB
        /// with the working tree).
        #[arg(long, default_value_t = 60, value_name = "MIB")]
        max_mib: u64,
    },
    /// Engine sweeps over a grid of settings (the cuzk-sweep binary): bundle
    /// it for the GPU machine, run it here, or redraw saved plots.
    Sweep {
        #[command(subcommand)]
        command: SweepCmd,
    },
    /// Check that every figure a Markdown file quotes beside a
    /// bench-data/*.json file is a value of that file (README.md by default).
    Figures {
        /// Markdown files, relative to the workspace root.
        #[arg(value_name = "FILE")]
        files: Vec<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
enum SweepCmd {
    /// Build cuzk-sweep in release, strip it and pack it with run.sh and its
    /// git revision into .device/sweep/ for the GPU machine.
    Bundle {
        /// The bundle folder [default: .device/sweep in the workspace];
        /// replaced when it holds a bundle.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// Also bundle the cuzk binary (e.g. for `cuzk setup --gpu` there).
        #[arg(long)]
        with_cuzk: bool,
        /// Also bundle the criterion benches of groth16-cuda and synth
        /// (`run.sh bench [FILTER] [CRITERION ARGS]` there).
        #[arg(long)]
        with_benches: bool,
        /// Refuse a bundle larger than this.
        #[arg(long, default_value_t = 60, value_name = "MIB")]
        max_mib: u64,
    },
    /// Build cuzk-sweep and run `cuzk-sweep run --rev <revision> ARGS` here.
    Run {
        /// A debug build instead of release (quicker to build, slower to run).
        #[arg(long)]
        debug: bool,
        /// Arguments of `cuzk-sweep run` (after `--`), e.g. --circuit porep:10
        /// --grid workers_per_device=1,2 --engine backend=cpu.
        #[arg(last = true, value_name = "ARGS")]
        args: Vec<String>,
    },
    /// Redraw the SVGs of saved sweep JSON files (beside each, or into --out).
    Plot {
        #[arg(required = true, value_name = "JSON")]
        files: Vec<PathBuf>,
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Cmd::Kernels { kernels } => {
            let kernels = kernels.unwrap_or_else(|| workspace_root().join("kernels"));
            let manifest = kernels::generate(&kernels, &kernels::Nvcc::new())
                .context("cargo xtask kernels")?;
            let problems = kernels::check(&kernels)?;
            anyhow::ensure!(
                problems.is_empty(),
                "the manifest just written does not check: {problems:?}"
            );
            eprintln!(
                "wrote {} ({} module{}, sources {})",
                kernels
                    .join(kernels::OUT_DIR)
                    .join(kernels::MANIFEST_FILE)
                    .display(),
                manifest.modules.len(),
                if manifest.modules.len() == 1 { "" } else { "s" },
                &manifest.source_hash[..12]
            );
            Ok(())
        }
        Cmd::Bundle { only, out, max_mib } => {
            let root = workspace_root();
            let options = bundle::Options {
                only,
                out: out.unwrap_or_else(|| root.join(".device").join("bundle")),
                max_mib,
            };
            let made = bundle::run(&root, &options).context("cargo xtask bundle")?;
            bundle::report(&root, &made)
        }
        Cmd::Figures { files } => {
            let root = workspace_root();
            let files = if files.is_empty() {
                vec![PathBuf::from("README.md")]
            } else {
                files
            };
            for file in files {
                let text = std::fs::read_to_string(root.join(&file))
                    .with_context(|| format!("reading {}", file.display()))?;
                let n = figures::check(&text, &file.display().to_string(), &root)?;
                eprintln!(
                    "{}: {n} figures, each found in its bench-data file",
                    file.display()
                );
            }
            Ok(())
        }
        Cmd::Sweep { command } => {
            let root = workspace_root();
            match command {
                SweepCmd::Bundle {
                    out,
                    with_cuzk,
                    with_benches,
                    max_mib,
                } => {
                    let options = sweep::BundleOptions {
                        out: out.unwrap_or_else(|| root.join(".device").join("sweep")),
                        with_cuzk,
                        with_benches,
                        max_mib,
                    };
                    sweep::bundle(&root, &options).context("cargo xtask sweep bundle")?;
                    Ok(())
                }
                SweepCmd::Run { debug, args } => {
                    sweep::run_binary(&root, debug, &sweep::run_args(&root, &args))
                        .context("cargo xtask sweep run")
                }
                SweepCmd::Plot { files, out } => {
                    sweep::run_binary(&root, false, &sweep::plot_args(&files, out.as_deref()))
                        .context("cargo xtask sweep plot")
                }
            }
        }
    }
}

/// The workspace root: the directory above this crate.
fn workspace_root() -> PathBuf {
    let xtask = Path::new(env!("CARGO_MANIFEST_DIR"));
    xtask.parent().unwrap_or(xtask).to_path_buf()
}
