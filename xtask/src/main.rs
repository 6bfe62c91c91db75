//! Project automation, run as `cargo xtask <command>` from anywhere in the
//! workspace.
//!
//! - `cargo xtask ptx [--arch compute_80]`: compile `kernels/*.cu` to PTX in
//!   `kernels/ptx/` and rewrite its manifest (needs nvcc only when there is
//!   at least one module; `NVCC` overrides the nvcc path).

use std::{
    path::{Path, PathBuf},
    process::ExitCode,
};

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

mod ptx;

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
    /// Compile every kernels/*.cu to kernels/ptx/<stem>.ptx and write
    /// kernels/ptx/manifest.json (nvcc from $NVCC, PATH or /usr/local/cuda).
    Ptx {
        /// Virtual architecture passed to nvcc as -arch.
        #[arg(long, default_value = ptx::DEFAULT_ARCH)]
        arch: String,
        /// Kernels directory [default: kernels/ in the workspace].
        #[arg(long, value_name = "DIR")]
        kernels: Option<PathBuf>,
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
        Cmd::Ptx { arch, kernels } => {
            let kernels = kernels.unwrap_or_else(|| workspace_root().join("kernels"));
            let manifest =
                ptx::generate(&kernels, &ptx::Nvcc::new(Some(arch))).context("cargo xtask ptx")?;
            let problems = ptx::check(&kernels)?;
            anyhow::ensure!(
                problems.is_empty(),
                "the manifest just written does not check: {problems:?}"
            );
            eprintln!(
                "wrote {} ({} module{}, sources {})",
                kernels
                    .join(ptx::PTX_DIR)
                    .join(ptx::MANIFEST_FILE)
                    .display(),
                manifest.modules.len(),
                if manifest.modules.len() == 1 { "" } else { "s" },
                &manifest.source_hash[..12]
            );
            Ok(())
        }
    }
}

/// The workspace root: the directory above this crate.
fn workspace_root() -> PathBuf {
    let xtask = Path::new(env!("CARGO_MANIFEST_DIR"));
    xtask.parent().unwrap_or(xtask).to_path_buf()
}
