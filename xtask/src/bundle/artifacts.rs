//! What cargo built, as bundle entries: the workspace's packages (cargo
//! metadata), cargo's JSON messages, and the test and other executables
//! among their `compiler-artifact`s, named as they go into the bundle.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::{Context, Result, bail, ensure};
use serde_json::Value;

use super::files::show;

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
pub(super) fn select_packages(
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

/// `cuzk-synth.lib`, `cuzk-cli.bin.cuzk`, `cuzk-groth16-cuda.test.groth16_cuda`.
fn bundle_name(package: &str, kind: &str, target: &str) -> String {
    match kind {
        "lib" | "rlib" | "proc-macro" => format!("{package}.lib"),
        _ => format!("{package}.{kind}.{target}"),
    }
}

pub(super) fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

fn relative_slash_path(path: &Path) -> String {
    path.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
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
}
