//! The payload: the executables stripped into a staging folder under the
//! target directory with their lists (`tests.tsv`, `bins.tsv`), then packed
//! into one xz-compressed tar.

use std::{
    fmt::Write as _,
    fs,
    path::Path,
    process::{Command, Stdio},
};

use anyhow::{Context, Result, ensure};

use super::CLI_BIN;
use super::artifacts::{Entry, is_plain_name};
use super::files::{show, strip_into};

/// The packed executables and their lists, inside the bundle folder.
pub(super) const PAYLOAD: &str = "payload.tar.xz";
/// xz's settings: a fast match finder with a window larger than several
/// executables. Every test executable, the examples and cuzk at 6dcd031
/// (397 MiB stripped): 23.4 MiB in 30 s here, where gzip -6 made 225 MiB.
const XZ_FILTER: &str = "--lzma2=preset=1,dict=256MiB";

/// What went into the staging folder, with stripped sizes.
#[derive(Debug)]
pub(super) struct Staged {
    /// Test executables.
    pub tests: Vec<(Entry, u64)>,
    /// `bin/...` files.
    pub bins: Vec<(String, u64)>,
}

/// Fills `staging` (replaced if it exists) with the test executables, the
/// cuzk binary, the other workspace binaries the tests run and the examples,
/// stripped, and their lists.
pub(super) fn stage(
    root: &Path,
    staging: &Path,
    tests: &[Entry],
    test_bins: &[Entry],
    cuzk: &Entry,
) -> Result<Staged> {
    if staging.exists() {
        fs::remove_dir_all(staging).with_context(|| format!("removing {}", staging.display()))?;
    }
    fs::create_dir_all(staging.join("tests"))
        .with_context(|| format!("creating {}", staging.display()))?;
    fs::create_dir_all(staging.join("bin"))?;

    let mut bundled_tests = Vec::new();
    let mut tests_tsv = String::from("# name\tcrate dir\tkind\n");
    for test in tests {
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
    Ok(Staged {
        tests: bundled_tests,
        bins,
    })
}

/// Packs the staging folder's lists and executables into `payload` (tar,
/// then xz with [`XZ_FILTER`]).
pub(super) fn pack(staging: &Path, payload: &Path) -> Result<()> {
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
