//! `cargo xtask bundle`: the release test executables of the workspace and
//! the `cuzk` binary, stripped, in one folder with a script that runs them on
//! the GPU machine (which has no cargo).
//!
//! The bundle (default `.device/bundle/`, git-ignored) holds two files, so
//! what the transfer to the GPU machine carries stays small:
//!
//! ```text
//! run.sh           runs the tests, then `cuzk demo` (see the script's header)
//! payload.tar.xz   the files below, unpacked by run.sh on the GPU machine
//!                  (xz with a 256 MiB window: the executables share most of
//!                  their bytes, device code included, and a window that
//!                  spans several of them stores each shared part about
//!                  once; gzip's 32 KiB window stored it once per executable)
//! ```
//!
//! The payload, also left unpacked in `target/bundle/`:
//!
//! ```text
//! tests.tsv    one line per test executable: name, crate dir, kind
//! bins.tsv     one line per binary: bundle path, path the tests expect it at
//!              (`cuzk`, and every other workspace binary an integration
//!              test runs, e.g. `cuzk-sweep`)
//! tests/<pkg>.<kind>[.<target>]   the test executables, e.g.
//!              tests/cuzk-groth16-cuda.test.groth16_cuda, tests/cuzk-synth.lib
//! bin/cuzk     the cuzk binary
//! bin/<bin>    the other workspace binaries the tests run (cuzk-sweep)
//! bin/<name>   the examples of the bundled packages (`cargo test` builds
//!              them), e.g. bin/arith_bench, for runs by hand
//! ```
//!
//! Tests are run with their crate directory as working directory, as
//! `cargo test` does. Paths compiled into the executables
//! (`env!("CARGO_MANIFEST_DIR")`, `env!("CARGO_BIN_EXE_cuzk")`) point into
//! the workspace they were built in; `run.sh` makes those paths exist on the
//! GPU machine (a link from the build path to the copied tree).

mod artifacts;
mod files;
mod payload;
mod run_script;

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result, ensure};

pub use artifacts::Entry;
// What the sweep's bundle (`crate::sweep`) shares with this one.
pub(crate) use artifacts::{cargo_json, parse_artifacts, workspace_packages};
pub(crate) use files::{
    dir_size, is_empty_dir, make_executable, mib, show, strip_into, working_tree_bytes,
};

use artifacts::select_packages;
use payload::PAYLOAD;

/// The package whose binary `run.sh` runs as `cuzk demo`.
const CLI_PACKAGE: &str = "cuzk-cli";
const CLI_BIN: &str = "cuzk";

/// What `cargo xtask bundle` was asked for.
#[derive(Debug)]
pub struct Options {
    /// Only these packages' tests (names with or without the `cuzk-`
    /// prefix); every workspace package when empty.
    pub only: Vec<String>,
    /// The bundle folder; replaced if it exists.
    pub out: PathBuf,
    /// Refuse a bundle larger than this many MiB.
    pub max_mib: u64,
}

/// What was bundled, for the report.
#[derive(Debug)]
pub struct Bundle {
    /// The bundle: run.sh and the packed files.
    pub dir: PathBuf,
    /// The same files unpacked, under the target directory.
    pub staging: PathBuf,
    /// Test executables with their stripped sizes.
    pub tests: Vec<(Entry, u64)>,
    /// `bin/...` files with their stripped sizes.
    pub bins: Vec<(String, u64)>,
    /// Bytes of the files unpacked.
    pub unpacked_bytes: u64,
    /// Bytes of the bundle folder, what the transfer to the GPU machine carries.
    pub total_bytes: u64,
}

pub fn run(root: &Path, options: &Options) -> Result<Bundle> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let (packages, target_dir) = workspace_packages(root, &cargo)?;
    let selected = select_packages(&packages, &options.only)?;

    let mut test_cmd = Command::new(&cargo);
    test_cmd.args(["test", "--release", "--no-run"]);
    match &selected {
        None => {
            test_cmd.arg("--workspace");
        }
        Some(names) => {
            for name in names {
                test_cmd.args(["--package", name]);
            }
        }
    }
    let test_messages = cargo_json(root, &mut test_cmd)?;
    let (tests, test_bins) = parse_artifacts(&test_messages, root, &packages)?;
    ensure!(
        !tests.is_empty(),
        "cargo test --no-run reported no test executable"
    );

    let mut cli_cmd = Command::new(&cargo);
    cli_cmd.args([
        "build",
        "--release",
        "--package",
        CLI_PACKAGE,
        "--bin",
        CLI_BIN,
    ]);
    let cli_messages = cargo_json(root, &mut cli_cmd)?;
    let (_, cli_bins) = parse_artifacts(&cli_messages, root, &packages)?;
    let cuzk = cli_bins
        .iter()
        .find(|b| b.name == CLI_BIN)
        .with_context(|| format!("cargo build reported no {CLI_BIN} binary"))?;

    // The files, uncompressed, in a staging folder under target/ (kept, to
    // look at or run here), then packed into the bundle.
    let staging = target_dir.join("bundle");
    let staged = payload::stage(root, &staging, &tests, &test_bins, cuzk)?;

    // The bundle: run.sh and the packed files, nothing else, so what the
    // transfer to the GPU machine carries is small.
    let dir = &options.out;
    if dir.exists() {
        ensure!(
            dir.join("run.sh").is_file() || is_empty_dir(dir)?,
            "{} exists and is not a bundle (no run.sh); remove it or pick another --out",
            dir.display()
        );
        fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    payload::pack(&staging, &dir.join(PAYLOAD))?;
    run_script::write_run_sh(dir, root)?;

    let bundle = Bundle {
        dir: dir.clone(),
        staging,
        tests: staged.tests,
        bins: staged.bins,
        unpacked_bytes: dir_size(&target_dir.join("bundle"))?,
        total_bytes: dir_size(dir)?,
    };
    let max = options.max_mib << 20;
    ensure!(
        bundle.total_bytes <= max,
        "the bundle in {} is {:.1} MiB, over the {} MiB limit (the transfer to the GPU machine carries at most \
         64 MiB with the working tree); bundle fewer packages with --only, e.g. \
         `cargo xtask bundle --only groth16-cuda,gpu-sched`",
        dir.display(),
        mib(bundle.total_bytes),
        options.max_mib
    );
    Ok(bundle)
}

/// Prints what is in the bundle and how much room it takes.
pub fn report(root: &Path, bundle: &Bundle) -> Result<()> {
    for (entry, size) in &bundle.tests {
        eprintln!("  tests/{:<48} {:>6.1} MiB", entry.name, mib(*size));
    }
    for (name, size) in &bundle.bins {
        eprintln!("  {name:<54} {:>6.1} MiB", mib(*size));
    }
    let tree = working_tree_bytes(root).unwrap_or(0);
    eprintln!(
        "bundle {}: {} test executables, {:.1} MiB packed ({:.1} MiB unpacked in {}); with \
         the working tree ({:.1} MiB) {:.1} of the 64 MiB the transfer to the GPU machine carries",
        bundle.dir.display(),
        bundle.tests.len(),
        mib(bundle.total_bytes),
        mib(bundle.unpacked_bytes),
        bundle.staging.display(),
        mib(tree),
        mib(tree + bundle.total_bytes)
    );
    let rel = bundle.dir.strip_prefix(root).unwrap_or(&bundle.dir);
    eprintln!(
        "run it there with: bash {}/run.sh [FILTER] [TEST ARGS...]   (carry {})",
        rel.display(),
        rel.display()
    );
    Ok(())
}
