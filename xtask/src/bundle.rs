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
//!              tests/cuzk-groth16-cuda.test.gpu_runtime, tests/cuzk-synth.lib
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

use std::{
    collections::BTreeMap,
    fmt::Write as _,
    fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::{Context, Result, bail, ensure};
use serde_json::Value;

/// The run script, with `@BUILD_ROOT@` replaced by the workspace root.
const RUN_SH: &str = include_str!("bundle_run.sh");
/// The packed executables and their lists, inside the bundle folder.
const PAYLOAD: &str = "payload.tar.xz";
/// xz's settings: a fast match finder with a window larger than several
/// executables. Every test executable, the examples and cuzk at 6dcd031
/// (397 MiB stripped): 23.4 MiB in 30 s here, where gzip -6 made 225 MiB.
const XZ_FILTER: &str = "--lzma2=preset=1,dict=256MiB";
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

/// One executable in the bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// File name under `tests/` (or `bin/`).
    pub name: String,
    /// The package's directory relative to the workspace root.
    pub crate_dir: String,
    /// `lib`, `bin`, `test`, `bench` or `example`.
    pub kind: String,
    /// Where cargo put it.
    pub executable: PathBuf,
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
    if staging.exists() {
        fs::remove_dir_all(&staging).with_context(|| format!("removing {}", staging.display()))?;
    }
    fs::create_dir_all(staging.join("tests"))
        .with_context(|| format!("creating {}", staging.display()))?;
    fs::create_dir_all(staging.join("bin"))?;

    let mut bundled_tests = Vec::new();
    let mut tests_tsv = String::from("# name\tcrate dir\tkind\n");
    for test in &tests {
        let size = strip_into(&test.executable, &staging.join("tests").join(&test.name))?;
        writeln!(
            tests_tsv,
            "{}\t{}\t{}",
            test.name, test.crate_dir, test.kind
        )?;
        bundled_tests.push((test.clone(), size));
    }
    fs::write(staging.join("tests.tsv"), tests_tsv)?;

    // bins.tsv: the cuzk binary, and where the tests built with it expect
    // it (`env!("CARGO_BIN_EXE_cuzk")` is target/release/cuzk).
    let mut bins = Vec::new();
    let mut bins_tsv = String::from("# bundle path\tpath the tests expect, from the build root\n");
    let cuzk_size = strip_into(&cuzk.executable, &staging.join("bin").join(CLI_BIN))?;
    bins.push((format!("bin/{CLI_BIN}"), cuzk_size));
    let mut expected: Vec<&Path> = test_bins
        .iter()
        .filter(|b| b.name == CLI_BIN)
        .map(|b| b.executable.as_path())
        .collect();
    expected.push(&cuzk.executable);
    expected.sort();
    expected.dedup();
    for path in expected {
        let rel = path.strip_prefix(root).unwrap_or(path);
        writeln!(bins_tsv, "bin/{CLI_BIN}\t{}", rel.display())?;
    }
    // Other workspace binaries the integration tests run
    // (`env!("CARGO_BIN_EXE_cuzk-sweep")`), placed the same way.
    let mut others: Vec<&Entry> = test_bins
        .iter()
        .filter(|b| b.kind == "bin" && b.name != CLI_BIN && b.crate_dir != "xtask")
        .collect();
    others.sort_by(|a, b| a.name.cmp(&b.name));
    others.dedup_by(|a, b| a.name == b.name);
    for other in others {
        ensure!(
            is_plain_name(&other.name),
            "binary {} cannot go into bin/ under its name",
            other.name
        );
        let size = strip_into(&other.executable, &staging.join("bin").join(&other.name))?;
        bins.push((format!("bin/{}", other.name), size));
        let rel = other
            .executable
            .strip_prefix(root)
            .unwrap_or(&other.executable);
        writeln!(bins_tsv, "bin/{}\t{}", other.name, rel.display())?;
    }
    fs::write(staging.join("bins.tsv"), bins_tsv)?;
    for example in test_bins.iter().filter(|b| b.kind == "example") {
        ensure!(
            example.name != CLI_BIN
                && is_plain_name(&example.name)
                && !bins
                    .iter()
                    .any(|(b, _)| *b == format!("bin/{}", example.name)),
            "example {} cannot go into bin/ under its name",
            example.name
        );
        let size = strip_into(
            &example.executable,
            &staging.join("bin").join(&example.name),
        )?;
        bins.push((format!("bin/{}", example.name), size));
    }

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
    pack(&staging, &dir.join(PAYLOAD))?;
    write_run_sh(dir, root)?;

    let bundle = Bundle {
        dir: dir.clone(),
        staging,
        tests: bundled_tests,
        bins,
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

/// Packs the staging folder's lists and executables into `payload` (tar,
/// then xz with [`XZ_FILTER`]).
fn pack(staging: &Path, payload: &Path) -> Result<()> {
    let mut tar = Command::new("tar");
    tar.arg("-cf")
        .arg("-")
        .arg("-C")
        .arg(staging)
        .args(["tests.tsv", "bins.tsv", "tests", "bin"])
        .stdout(Stdio::piped());
    let mut tar_child = tar
        .spawn()
        .with_context(|| format!("running {}", show(&tar)))?;
    let tar_out = tar_child.stdout.take().context("tar's output")?;
    let out =
        fs::File::create(payload).with_context(|| format!("creating {}", payload.display()))?;
    let mut xz = Command::new("xz");
    xz.args(["-T1", XZ_FILTER, "-c"]).stdin(tar_out).stdout(out);
    let xz_status = xz
        .status()
        .with_context(|| format!("running {} (is xz installed?)", show(&xz)))?;
    let tar_status = tar_child.wait().context("waiting for tar")?;
    ensure!(tar_status.success(), "{} failed ({tar_status})", show(&tar));
    ensure!(xz_status.success(), "{} failed ({xz_status})", show(&xz));
    Ok(())
}

/// `dir/run.sh`, with the build root filled in.
fn write_run_sh(dir: &Path, root: &Path) -> Result<()> {
    let script = RUN_SH.replace("@BUILD_ROOT@", &root.display().to_string());
    let run_sh = dir.join("run.sh");
    fs::write(&run_sh, script)?;
    make_executable(&run_sh)
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

#[derive(Debug)]
pub(crate) struct Package {
    name: String,
    /// Directory relative to the workspace root, `/`-separated.
    dir: String,
}

/// Workspace packages by manifest path, and the target directory.
pub(crate) fn workspace_packages(
    root: &Path,
    cargo: &std::ffi::OsStr,
) -> Result<(BTreeMap<PathBuf, Package>, PathBuf)> {
    let output = Command::new(cargo)
        .current_dir(root)
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .stderr(Stdio::inherit())
        .output()
        .context("running cargo metadata")?;
    ensure!(
        output.status.success(),
        "cargo metadata failed ({})",
        output.status
    );
    let metadata: Value =
        serde_json::from_slice(&output.stdout).context("parsing cargo metadata's output")?;
    let mut packages = BTreeMap::new();
    for package in metadata["packages"].as_array().into_iter().flatten() {
        let (Some(name), Some(manifest)) =
            (package["name"].as_str(), package["manifest_path"].as_str())
        else {
            bail!("cargo metadata lists a package without a name or manifest path");
        };
        let manifest = PathBuf::from(manifest);
        let dir = manifest.parent().unwrap_or(root);
        let dir = relative_slash_path(dir.strip_prefix(root).unwrap_or(dir));
        packages.insert(
            manifest,
            Package {
                name: name.to_owned(),
                dir: if dir.is_empty() { ".".to_owned() } else { dir },
            },
        );
    }
    let target_dir = metadata["target_directory"]
        .as_str()
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    Ok((packages, target_dir))
}

/// The package names `--only` asks for (`None`: the whole workspace).
fn select_packages(
    packages: &BTreeMap<PathBuf, Package>,
    only: &[String],
) -> Result<Option<Vec<String>>> {
    if only.is_empty() {
        return Ok(None);
    }
    let names: Vec<&str> = packages.values().map(|p| p.name.as_str()).collect();
    only.iter()
        .map(|wanted| {
            let prefixed = format!("cuzk-{wanted}");
            names
                .iter()
                .find(|&&n| n == wanted || n == prefixed)
                .map(|n| (*n).to_owned())
                .with_context(|| {
                    format!("--only {wanted}: no such workspace package (packages: {names:?})")
                })
        })
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

/// Runs a cargo command with JSON messages on stdout (diagnostics rendered to
/// stderr as usual) and returns the messages.
pub(crate) fn cargo_json(root: &Path, command: &mut Command) -> Result<Vec<Value>> {
    command
        .current_dir(root)
        .arg("--message-format=json-render-diagnostics")
        .stderr(Stdio::inherit());
    eprintln!("+ {}", show(command));
    let output = command
        .output()
        .with_context(|| format!("running {}", show(command)))?;
    ensure!(
        output.status.success(),
        "{} failed ({})",
        show(command),
        output.status
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).with_context(|| format!("parsing cargo's message {l}")))
        .collect()
}

/// Test executables (`profile.test`) and other executables among cargo's
/// `compiler-artifact` messages, sorted by name.
pub(crate) fn parse_artifacts(
    messages: &[Value],
    root: &Path,
    packages: &BTreeMap<PathBuf, Package>,
) -> Result<(Vec<Entry>, Vec<Entry>)> {
    let mut tests = Vec::new();
    let mut bins = Vec::new();
    for message in messages {
        if message["reason"] != "compiler-artifact" {
            continue;
        }
        let Some(executable) = message["executable"].as_str() else {
            continue;
        };
        let manifest = message["manifest_path"]
            .as_str()
            .context("a compiler-artifact message without manifest_path")?;
        let Some(package) = packages.get(Path::new(manifest)) else {
            continue; // not a workspace package
        };
        let target = message["target"]["name"]
            .as_str()
            .context("a compiler-artifact message without target.name")?;
        let kind = message["target"]["kind"][0]
            .as_str()
            .context("a compiler-artifact message without target.kind")?;
        let is_test = message["profile"]["test"].as_bool().unwrap_or(false);
        let name = if is_test {
            bundle_name(&package.name, kind, target)
        } else {
            target.to_owned()
        };
        let executable = PathBuf::from(executable);
        let executable = if executable.is_absolute() {
            executable
        } else {
            root.join(executable)
        };
        let entry = Entry {
            name,
            crate_dir: package.dir.clone(),
            kind: kind.to_owned(),
            executable,
        };
        if is_test {
            tests.push(entry);
        } else {
            bins.push(entry);
        }
    }
    tests.sort_by(|a, b| a.name.cmp(&b.name));
    tests.dedup_by(|a, b| a.name == b.name);
    let names: Vec<&str> = tests.iter().map(|t| t.name.as_str()).collect();
    ensure!(
        names.iter().all(|n| is_plain_name(n)),
        "a test executable name holds characters run.sh cannot take: {names:?}"
    );
    Ok((tests, bins))
}

/// `cuzk-synth.lib`, `cuzk-cli.bin.cuzk`, `cuzk-groth16-cuda.test.gpu_runtime`.
fn bundle_name(package: &str, kind: &str, target: &str) -> String {
    match kind {
        "lib" | "rlib" | "proc-macro" => format!("{package}.lib"),
        _ => format!("{package}.{kind}.{target}"),
    }
}

fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// Copies `src` to `dst` without debug information; returns the size.
pub(crate) fn strip_into(src: &Path, dst: &Path) -> Result<u64> {
    // --strip-debug keeps the symbol table, so panics and backtraces on the
    // GPU machine still name functions; the debug info is most of the size.
    let status = Command::new("strip")
        .arg("--strip-debug")
        .arg("-o")
        .arg(dst)
        .arg(src)
        .status()
        .context("running strip (binutils) failed to start")?;
    ensure!(
        status.success(),
        "strip --strip-debug -o {} {} failed ({status})",
        dst.display(),
        src.display()
    );
    Ok(fs::metadata(dst)?.len())
}

#[cfg(unix)]
pub(crate) fn make_executable(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut permissions = fs::metadata(path)?.permissions();
    permissions.set_mode(0o755);
    fs::set_permissions(path, permissions).with_context(|| format!("chmod {}", path.display()))
}

#[cfg(not(unix))]
pub(crate) fn make_executable(_: &Path) -> Result<()> {
    Ok(())
}

pub(crate) fn is_empty_dir(dir: &Path) -> Result<bool> {
    Ok(fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .next()
        .is_none())
}

pub(crate) fn dir_size(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        let meta = entry.metadata()?;
        total += if meta.is_dir() {
            dir_size(&entry.path())?
        } else {
            meta.len()
        };
    }
    Ok(total)
}

/// Bytes of the files the transfer to the GPU machine sends besides carried paths: tracked
/// files and untracked files git does not ignore.
pub(crate) fn working_tree_bytes(root: &Path) -> Result<u64> {
    let output = Command::new("git")
        .current_dir(root)
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .output()
        .context("running git ls-files")?;
    ensure!(output.status.success(), "git ls-files failed");
    let mut total = 0;
    for path in output.stdout.split(|&b| b == 0).filter(|p| !p.is_empty()) {
        let path = root.join(String::from_utf8_lossy(path).as_ref());
        total += fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    }
    Ok(total)
}

fn relative_slash_path(path: &Path) -> String {
    path.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

pub(crate) fn show(command: &Command) -> String {
    std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ")
}

pub(crate) fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1u32 << 20)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packages(root: &Path) -> BTreeMap<PathBuf, Package> {
        [
            ("crates/groth16-cuda", "cuzk-groth16-cuda"),
            ("xtask", "xtask"),
        ]
        .into_iter()
        .map(|(dir, name)| {
            (
                root.join(dir).join("Cargo.toml"),
                Package {
                    name: name.into(),
                    dir: dir.into(),
                },
            )
        })
        .collect()
    }

    fn artifact(root: &Path, dir: &str, kind: &str, target: &str, test: bool, exe: &str) -> Value {
        serde_json::json!({
            "reason": "compiler-artifact",
            "package_id": "path+file:///somewhere#0.1.0",
            "manifest_path": root.join(dir).join("Cargo.toml"),
            "target": {"kind": [kind], "crate_types": [kind], "name": target},
            "profile": {"test": test},
            "executable": exe,
        })
    }

    #[test]
    fn artifacts_become_named_entries() {
        let root = Path::new("/ws");
        let packages = packages(root);
        let messages = vec![
            serde_json::json!({"reason": "build-script-executed"}),
            artifact(
                root,
                "crates/groth16-cuda",
                "test",
                "gpu_runtime",
                true,
                "/ws/target/release/deps/gpu_runtime-1",
            ),
            artifact(
                root,
                "crates/groth16-cuda",
                "lib",
                "cuzk_groth16_cuda",
                true,
                "/ws/target/release/deps/cuzk_groth16_cuda-2",
            ),
            artifact(
                root,
                "xtask",
                "bin",
                "xtask",
                true,
                "/ws/target/release/deps/xtask-3",
            ),
            // The library itself (no executable) and a binary built for tests.
            serde_json::json!({
                "reason": "compiler-artifact",
                "manifest_path": "/ws/crates/groth16-cuda/Cargo.toml",
                "target": {"kind": ["lib"], "name": "cuzk_groth16_cuda"},
                "profile": {"test": false},
                "executable": null,
            }),
            artifact(
                root,
                "xtask",
                "bin",
                "xtask",
                false,
                "/ws/target/release/xtask",
            ),
            artifact(
                root,
                "crates/groth16-cuda",
                "example",
                "arith_bench",
                false,
                "/ws/target/release/examples/arith_bench",
            ),
            // Not a workspace package.
            artifact(
                root,
                "../registry/foo",
                "test",
                "foo",
                true,
                "/ws/target/release/deps/foo-4",
            ),
        ];
        let (tests, bins) = parse_artifacts(&messages, root, &packages).unwrap();
        let names: Vec<&str> = tests.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "cuzk-groth16-cuda.lib",
                "cuzk-groth16-cuda.test.gpu_runtime",
                "xtask.bin.xtask"
            ]
        );
        assert_eq!(tests[1].crate_dir, "crates/groth16-cuda");
        assert_eq!(tests[1].kind, "test");
        assert_eq!(
            tests[1].executable,
            Path::new("/ws/target/release/deps/gpu_runtime-1")
        );
        assert_eq!(bins.len(), 2);
        assert_eq!(bins[0].name, "xtask");
        assert_eq!(bins[0].kind, "bin");
        assert_eq!(bins[0].executable, Path::new("/ws/target/release/xtask"));
        assert_eq!(bins[1].name, "arith_bench");
        assert_eq!(bins[1].kind, "example");
    }

    #[test]
    fn only_takes_names_with_or_without_prefix() {
        let packages = packages(Path::new("/ws"));
        assert_eq!(select_packages(&packages, &[]).unwrap(), None);
        assert_eq!(
            select_packages(&packages, &["groth16-cuda".into(), "xtask".into()]).unwrap(),
            Some(vec!["cuzk-groth16-cuda".to_owned(), "xtask".to_owned()])
        );
        assert_eq!(
            select_packages(&packages, &["cuzk-groth16-cuda".into()]).unwrap(),
            Some(vec!["cuzk-groth16-cuda".to_owned()])
        );
        let err = select_packages(&packages, &["nope".into()]).unwrap_err();
        assert!(err.to_string().contains("--only nope"), "{err:#}");
    }

    #[test]
    fn run_script_parses() {
        assert!(RUN_SH.starts_with("#!/usr/bin/env bash\n"));
        assert!(RUN_SH.contains("@BUILD_ROOT@"));
        // bash -n parses the script without running it.
        let script = RUN_SH.replace("@BUILD_ROOT@", "/ws");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.sh");
        fs::write(&path, script).unwrap();
        let status = Command::new("bash").arg("-n").arg(&path).status().unwrap();
        assert!(status.success(), "run.sh does not parse");
    }

    /// A bundle of one fake test executable that prints the environment it
    /// was given, packed and run as on the GPU machine: what run.sh really
    /// sets, not what its text mentions.
    #[cfg(unix)]
    #[test]
    fn run_script_requires_the_gpu_by_default() {
        let ws = tempfile::tempdir().unwrap();
        let root = ws.path();
        fs::write(root.join("Cargo.toml"), "[workspace]\nmembers = []\n").unwrap();
        fs::create_dir_all(root.join("crates/fake")).unwrap();
        let staging = root.join("staging");
        fs::create_dir_all(staging.join("tests")).unwrap();
        fs::create_dir_all(staging.join("bin")).unwrap();
        fs::write(
            staging.join("tests.tsv"),
            "# name\tcrate dir\tkind\nfake.test.env\tcrates/fake\ttest\n",
        )
        .unwrap();
        fs::write(staging.join("bins.tsv"), "# bundle path\texpected\n").unwrap();
        let test = staging.join("tests/fake.test.env");
        fs::write(
            &test,
            "#!/bin/sh\necho \"require=${CUZK_REQUIRE_GPU-unset} dir=$(basename \"$PWD\")\"\n\
             echo 'test result: ok. 3 passed; 0 failed; 0 ignored'\n",
        )
        .unwrap();
        make_executable(&test).unwrap();
        let cuzk = staging.join("bin/cuzk");
        fs::write(&cuzk, "#!/bin/sh\nexit 0\n").unwrap();
        make_executable(&cuzk).unwrap();
        let bundle = root.join(".device/bundle");
        fs::create_dir_all(&bundle).unwrap();
        pack(&staging, &bundle.join(PAYLOAD)).unwrap();
        write_run_sh(&bundle, root).unwrap();

        let run = |require: Option<&str>| -> (bool, String, String) {
            let out = root.join(format!("out-{}", require.unwrap_or("default")));
            let mut command = Command::new("bash");
            command
                .arg(bundle.join("run.sh"))
                .arg("fake.test")
                .current_dir(root)
                .env("OUT", &out)
                .env("TMPDIR", root)
                .env_remove("CUZK_REQUIRE_GPU");
            if let Some(v) = require {
                command.env("CUZK_REQUIRE_GPU", v);
            }
            let status = command.status().unwrap();
            let log = fs::read_to_string(out.join("fake.test.env.log")).unwrap_or_default();
            let summary = fs::read_to_string(out.join("summary.txt")).unwrap_or_default();
            (status.success(), log, summary)
        };
        let (ok, log, summary) = run(None);
        assert!(ok, "{summary}");
        assert!(log.contains("require=1 dir=fake"), "{log}");
        assert!(summary.contains("CUZK_REQUIRE_GPU=1"), "{summary}");
        assert!(
            summary.contains("PASS  fake.test.env") && summary.contains("3 passed, 0 failed"),
            "{summary}"
        );
        // An explicit setting is passed on as it is.
        let (ok, log, _) = run(Some("0"));
        assert!(ok);
        assert!(log.contains("require=0 dir=fake"), "{log}");
    }
}
