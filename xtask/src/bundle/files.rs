//! Small file and process helpers the bundle and the sweep's bundle share:
//! stripping an executable into place, permissions, sizes, and how a
//! command or a byte count is shown.

use std::{fs, path::Path, process::Command};

use anyhow::{Context, Result, ensure};

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
