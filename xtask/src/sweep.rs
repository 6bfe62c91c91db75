//! `cargo xtask sweep`: the `cuzk-sweep` binary (crates/sweep) built,
//! bundled for the GPU machine (no cargo there), run here, or asked to
//! redraw the plots of saved results.
//!
//! - `sweep bundle [--out DIR] [--with-cuzk]`: release build, stripped, packed
//!   with its git revision into `DIR/payload.tar.gz` beside `DIR/run.sh`
//!   (default `.device/sweep/`); on the GPU machine
//!   `bash .device/sweep/run.sh --circuit ... --grid ...` runs
//!   `cuzk-sweep run` with the bundle's revision and `--out $OUT`.
//!   `--with-benches` adds the criterion benches of groth16-cuda and synth,
//!   run there with `bash .device/sweep/run.sh bench [FILTER] [ARGS]`.
//! - `sweep run [--debug] -- ARGS`: builds it and runs `cuzk-sweep run
//!   --rev <this checkout's revision> ARGS` here (the CPU backend without a
//!   GPU).
//! - `sweep plot JSON... [--out DIR]`: builds it and runs `cuzk-sweep plot`,
//!   which redraws the SVGs of saved sweep JSON (e.g. results fetched back
//!   from the GPU machine).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, ensure};

use crate::bundle::{
    cargo_json, dir_size, is_empty_dir, make_executable, mib, parse_artifacts, show, strip_into,
    working_tree_bytes, workspace_packages,
};

/// The run script, with `@REV@` replaced by the bundled revision.
const RUN_SH: &str = include_str!("sweep_run.sh");
const PACKAGE: &str = "cuzk-sweep";
const BIN: &str = "cuzk-sweep";
const CLI_PACKAGE: &str = "cuzk-cli";
const CLI_BIN: &str = "cuzk";
/// Sources that go into the sweep binary: a revision is `-dirty` when any of
/// them has uncommitted changes.
const SWEEP_SOURCES: &[&str] = &[
    "Cargo.toml",
    "kernels",
    "crates/engine",
    "crates/groth16-cuda",
    "crates/gpu-sched",
    "crates/pinned-pool",
    "crates/synth",
    "crates/sweep",
];
const CLI_SOURCES: &[&str] = &["crates/cli", "crates/filecoin"];
/// Packages whose criterion benches `--with-benches` bundles.
const BENCH_PACKAGES: &[&str] = &["cuzk-groth16-cuda", "cuzk-synth"];

/// Builds the criterion benches of [`BENCH_PACKAGES`] (bench profile) and
/// returns (target name, executable) of each.
fn build_benches(root: &Path) -> Result<Vec<(String, PathBuf)>> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let (packages, _) = workspace_packages(root, &cargo)?;
    let mut cmd = Command::new(&cargo);
    cmd.args(["bench", "--no-run"]);
    for p in BENCH_PACKAGES {
        cmd.args(["--package", p]);
    }
    let messages = cargo_json(root, &mut cmd)?;
    let (tests, _) = parse_artifacts(&messages, root, &packages)?;
    let benches: Vec<(String, PathBuf)> = tests
        .into_iter()
        .filter(|t| t.kind == "bench")
        .filter_map(|t| {
            let target = t.name.rsplit('.').next()?.to_owned();
            Some((target, t.executable))
        })
        .collect();
    ensure!(!benches.is_empty(), "{} built no bench", show(&cmd));
    Ok(benches)
}

/// What `cargo xtask sweep bundle` was asked for.
#[derive(Debug)]
pub struct BundleOptions {
    pub out: PathBuf,
    /// Also bundle the `cuzk` binary (e.g. for `cuzk setup --gpu` there).
    pub with_cuzk: bool,
    /// Also bundle the criterion benches (`run.sh bench [FILTER]`).
    pub with_benches: bool,
    pub max_mib: u64,
}

/// Builds `package`'s binary `bin` (release unless `debug`) and returns its
/// path.
fn build(root: &Path, package: &str, bin: &str, debug: bool) -> Result<PathBuf> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let (packages, _) = workspace_packages(root, &cargo)?;
    let mut cmd = Command::new(&cargo);
    cmd.arg("build");
    if !debug {
        cmd.arg("--release");
    }
    cmd.args(["--package", package, "--bin", bin]);
    let messages = cargo_json(root, &mut cmd)?;
    let (_, bins) = parse_artifacts(&messages, root, &packages)?;
    bins.into_iter()
        .find(|b| b.name == bin && b.kind == "bin")
        .map(|b| b.executable)
        .with_context(|| format!("{} reported no {bin} binary", show(&cmd)))
}

/// The short git revision of `root`, with `-dirty` when `sources` have
/// uncommitted changes; `unknown` without git.
pub fn revision(root: &Path, sources: &[&str]) -> String {
    let git = |args: &[&str]| {
        Command::new("git")
            .current_dir(root)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    let Some(rev) = git(&["rev-parse", "--short", "HEAD"]).filter(|r| !r.is_empty()) else {
        return "unknown".into();
    };
    let mut status = vec!["status", "--porcelain", "--untracked-files=no", "--"];
    status.extend(sources);
    match git(&status) {
        Some(changes) if changes.is_empty() => rev,
        _ => format!("{rev}-dirty"),
    }
}

/// Builds, strips and packs the sweep binary (and `cuzk` when asked) with
/// run.sh into `options.out`; returns the bundle's size in bytes.
pub fn bundle(root: &Path, options: &BundleOptions) -> Result<u64> {
    // Built first: a failing build leaves an existing bundle as it was.
    let sweep = build(root, PACKAGE, BIN, false)?;
    let cuzk = if options.with_cuzk {
        Some(build(root, CLI_PACKAGE, CLI_BIN, false)?)
    } else {
        None
    };
    let benches = if options.with_benches {
        build_benches(root)?
    } else {
        Vec::new()
    };
    let mut sources = SWEEP_SOURCES.to_vec();
    if options.with_cuzk {
        sources.extend(CLI_SOURCES);
    }
    let rev = revision(root, &sources);
    if rev.ends_with("-dirty") {
        eprintln!(
            "warning: uncommitted changes in {}: results will record revision {rev}",
            sources.join(" ")
        );
    }

    let dir = &options.out;
    if dir.exists() {
        ensure!(
            dir.join("run.sh").is_file() || is_empty_dir(dir)?,
            "{} exists and is not a bundle (no run.sh); remove it or pick another --out",
            dir.display()
        );
        fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    let staging = dir.join(".staging");
    let bin = staging.join("bin");
    fs::create_dir_all(&bin).with_context(|| format!("creating {}", bin.display()))?;
    let mut sizes = vec![(BIN.to_owned(), strip_into(&sweep, &bin.join(BIN))?)];
    if let Some(cuzk) = &cuzk {
        sizes.push((CLI_BIN.to_owned(), strip_into(cuzk, &bin.join(CLI_BIN))?));
    }
    for (target, exe) in &benches {
        let name = format!("bench-{target}");
        sizes.push((name.clone(), strip_into(exe, &bin.join(&name))?));
    }
    // Beside the binary, so cuzk-sweep records it when run by hand too.
    fs::write(bin.join("REV"), format!("{rev}\n"))?;
    let mut tar = Command::new("tar");
    tar.arg("-czf")
        .arg(dir.join("payload.tar.gz"))
        .arg("-C")
        .arg(&staging)
        .arg("bin");
    let status = tar
        .status()
        .with_context(|| format!("running {}", show(&tar)))?;
    ensure!(status.success(), "{} failed ({status})", show(&tar));
    fs::remove_dir_all(&staging)?;
    let run_sh = dir.join("run.sh");
    fs::write(&run_sh, RUN_SH.replace("@REV@", &rev))?;
    make_executable(&run_sh)?;

    let total = dir_size(dir)?;
    for (name, size) in &sizes {
        eprintln!("  bin/{name:<20} {:>6.1} MiB stripped", mib(*size));
    }
    let tree = working_tree_bytes(root).unwrap_or(0);
    eprintln!(
        "sweep bundle {} (revision {rev}): {:.1} MiB packed; with the working tree ({:.1} MiB) \
         {:.1} of the 64 MiB the transfer to the GPU machine carries",
        dir.display(),
        mib(total),
        mib(tree),
        mib(tree + total)
    );
    ensure!(
        total <= options.max_mib << 20,
        "the sweep bundle in {} is {:.1} MiB, over the {} MiB limit",
        dir.display(),
        mib(total),
        options.max_mib
    );
    let rel = dir.strip_prefix(root).unwrap_or(dir);
    eprintln!(
        "run it there with: bash {}/run.sh --circuit porep:20 --grid workers_per_device=1,2 \
         --engine backend=gpu --fake-params   (carry {})",
        rel.display(),
        rel.display()
    );
    Ok(total)
}

/// Builds the sweep binary and runs it with `args` (after `run --rev REV`
/// for `run`; as given for `plot`).
pub fn run_binary(root: &Path, debug: bool, args: &[String]) -> Result<()> {
    let exe = build(root, PACKAGE, BIN, debug)?;
    let mut cmd = Command::new(&exe);
    cmd.args(args);
    eprintln!("+ {}", show(&cmd));
    let status = cmd
        .status()
        .with_context(|| format!("running {}", exe.display()))?;
    ensure!(status.success(), "{BIN} failed ({status})");
    Ok(())
}

/// `cuzk-sweep run --rev REV ARGS` (a later `--rev` in ARGS wins).
pub fn run_args(root: &Path, args: &[String]) -> Vec<String> {
    let mut v = vec![
        "run".to_owned(),
        "--rev".to_owned(),
        revision(root, SWEEP_SOURCES),
    ];
    v.extend(args.iter().cloned());
    v
}

/// `cuzk-sweep plot JSON... [--out DIR]`.
pub fn plot_args(files: &[PathBuf], out: Option<&Path>) -> Vec<String> {
    let mut v = vec!["plot".to_owned()];
    v.extend(files.iter().map(|f| f.display().to_string()));
    if let Some(out) = out {
        v.push("--out".into());
        v.push(out.display().to_string());
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_script_is_complete() {
        assert!(RUN_SH.starts_with("#!/usr/bin/env bash\n"));
        assert!(RUN_SH.contains("@REV@"));
        // bash -n parses the script without running it.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.sh");
        fs::write(&path, RUN_SH.replace("@REV@", "abc1234")).unwrap();
        let status = Command::new("bash").arg("-n").arg(&path).status().unwrap();
        assert!(status.success(), "run.sh does not parse");
    }

    #[test]
    fn arguments_reach_the_binary_in_order() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let args = run_args(root, &["--circuit".into(), "porep:8".into()]);
        assert_eq!(args[0], "run");
        assert_eq!(args[1], "--rev");
        assert!(!args[2].is_empty());
        assert_eq!(&args[3..], ["--circuit", "porep:8"]);
        assert_eq!(
            plot_args(&["a.json".into(), "b.json".into()], Some(Path::new("svg"))),
            ["plot", "a.json", "b.json", "--out", "svg"]
        );
        assert_eq!(plot_args(&["a.json".into()], None), ["plot", "a.json"]);
    }

    #[test]
    fn revision_is_short_and_says_when_sources_changed() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(revision(dir.path(), &["x"]), "unknown");
        let git = |args: &[&str]| {
            let ok = Command::new("git")
                .current_dir(dir.path())
                .args([
                    "-c",
                    "user.name=t",
                    "-c",
                    "user.email=t@t",
                    "-c",
                    "commit.gpgsign=false",
                ])
                .args(args)
                .output()
                .unwrap()
                .status
                .success();
            assert!(ok, "git {args:?}");
        };
        git(&["init", "-q"]);
        fs::write(dir.path().join("a"), "1").unwrap();
        fs::write(dir.path().join("b"), "1").unwrap();
        git(&["add", "a", "b"]);
        git(&["commit", "-q", "-m", "one"]);
        let clean = revision(dir.path(), &["a"]);
        assert!(clean.len() >= 7 && !clean.contains("dirty"), "{clean}");
        fs::write(dir.path().join("b"), "2").unwrap();
        assert_eq!(revision(dir.path(), &["a"]), clean, "b is not a source");
        fs::write(dir.path().join("a"), "2").unwrap();
        assert_eq!(revision(dir.path(), &["a"]), format!("{clean}-dirty"));
    }
}
