//! `cargo xtask kernels` (alias `ptx`): CUDA sources in `kernels/` ->
//! fatbins in `kernels/fatbin/`, plus `kernels/fatbin/manifest.json`, and the
//! check that keeps them in step.
//!
//! Every top-level `kernels/<stem>.cu` is one module, compiled to
//! `kernels/fatbin/<stem>.fatbin`: machine code (SASS) for each of
//! [`SASS_ARCHS`] and compute_80 PTX, which the driver JIT-compiles only on a
//! GPU none of the SASS fits (newer ones, e.g. sm_120). The manifest records:
//!
//! ```json
//! {
//!   "generated_by": "cargo xtask kernels",
//!   "nvcc_version": "Cuda compilation tools, release 11.8, V11.8.89",
//!   "targets": ["sm_80", "sm_86", "sm_89", "sm_90", "compute_80"],
//!   "source_hash": "<sha256 hex of all kernel sources, see source_hash()>",
//!   "modules": [
//!     { "name": "msm", "fatbin": "msm.fatbin", "sha256": "<sha256 hex of msm.fatbin>" }
//!   ]
//! }
//! ```
//!
//! `nvcc_version` is `null` when there are no modules (nvcc is then not run).
//! [`check`] compares a kernels directory with its manifest; a test runs it
//! on the real `kernels/`, so sources edited without regenerating fail
//! `cargo test`.

use std::{
    fmt::Write as _,
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Where the fatbins and the manifest live, relative to the kernels directory.
pub const OUT_DIR: &str = "fatbin";
pub const MANIFEST_FILE: &str = "manifest.json";
/// The extension of a compiled module.
const EXTENSION: &str = "fatbin";
/// Real architectures each fatbin carries machine code for: Ampere (A100:
/// sm_80; consumer and workstation cards: sm_86), Ada (sm_89) and Hopper
/// (sm_90). A GPU of one of these loads its module without JIT compilation.
pub const SASS_ARCHS: [&str; 4] = ["sm_80", "sm_86", "sm_89", "sm_90"];
/// The virtual architecture of the PTX each fatbin also carries: the driver
/// JIT-compiles it for a GPU newer than every SASS (Blackwell, ...).
pub const PTX_ARCH: &str = "compute_80";
const GENERATED_BY: &str = "cargo xtask kernels";
/// File extensions that count as kernel sources for the hash.
const SOURCE_EXTENSIONS: [&str; 4] = ["cu", "cuh", "h", "hpp"];

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub generated_by: String,
    pub nvcc_version: Option<String>,
    /// What each fatbin holds: `sm_XY` machine code, `compute_XY` PTX.
    pub targets: Vec<String>,
    pub source_hash: String,
    pub modules: Vec<Module>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Module {
    /// The `.cu` file's stem; Rust loads the module under this name.
    pub name: String,
    /// The fatbin file, relative to `kernels/fatbin/`.
    pub fatbin: String,
    /// sha256 (hex) of the fatbin file.
    pub sha256: String,
}

/// The targets a fatbin is built for, in the manifest's spelling.
pub fn default_targets() -> Vec<String> {
    SASS_ARCHS
        .iter()
        .copied()
        .chain([PTX_ARCH])
        .map(str::to_owned)
        .collect()
}

/// Turns one `.cu` file into a fatbin. [`Nvcc`] is the real one; tests use
/// a fake.
pub trait KernelCompiler {
    /// The version line written into the manifest; only asked for when
    /// there is at least one module.
    fn version(&self) -> Result<String>;
    /// What the fatbins hold (`sm_90`, `compute_80`, ...).
    fn targets(&self) -> Vec<String>;
    /// Compiles `kernels/<module>.cu` into `kernels/fatbin/<module>.fatbin`.
    fn compile(&self, kernels: &Path, module: &str) -> Result<()>;
}

/// nvcc: `$NVCC`, else `nvcc` on `PATH`, else `/usr/local/cuda/bin/nvcc`.
#[derive(Debug)]
pub struct Nvcc {
    path: PathBuf,
    targets: Vec<String>,
}

impl Nvcc {
    pub fn new() -> Self {
        let path = std::env::var_os("NVCC")
            .map(PathBuf::from)
            .or_else(|| find_on_path("nvcc"))
            .or_else(|| {
                let cuda = PathBuf::from("/usr/local/cuda/bin/nvcc");
                cuda.is_file().then_some(cuda)
            })
            .unwrap_or_else(|| PathBuf::from("nvcc"));
        Nvcc {
            path,
            targets: default_targets(),
        }
    }

    fn run(&self, command: &mut Command) -> Result<std::process::Output> {
        command.output().map_err(|e| {
            let hint = if e.kind() == std::io::ErrorKind::NotFound {
                "nvcc was not found: install the CUDA toolkit as kernels/README.md \
                 describes, or set NVCC to the nvcc binary"
            } else {
                "could not start nvcc"
            };
            anyhow::Error::new(e).context(format!("{hint} (tried {})", self.path.display()))
        })
    }
}

/// nvcc's `-gencode` arguments for `targets`: `sm_XY` -> machine code for
/// sm_XY, `compute_XY` -> PTX for compute_XY.
pub fn gencode_args(targets: &[String]) -> Result<Vec<String>> {
    targets
        .iter()
        .map(|t| {
            if let Some(v) = t.strip_prefix("sm_") {
                Ok(format!("arch=compute_{v},code=sm_{v}"))
            } else if t.starts_with("compute_") {
                Ok(format!("arch={t},code={t}"))
            } else {
                bail!("target {t:?} is neither sm_XY (machine code) nor compute_XY (PTX)")
            }
        })
        .flat_map(|g| match g {
            Ok(g) => vec![Ok("-gencode".to_owned()), Ok(g)],
            Err(e) => vec![Err(e)],
        })
        .collect()
}

impl KernelCompiler for Nvcc {
    fn version(&self) -> Result<String> {
        let output = self.run(Command::new(&self.path).arg("--version"))?;
        if !output.status.success() {
            bail!(
                "`{} --version` failed ({}):\n{}",
                self.path.display(),
                output.status,
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let stdout = String::from_utf8_lossy(&output.stdout);
        // "Cuda compilation tools, release 11.8, V11.8.89"
        stdout
            .lines()
            .find(|l| l.starts_with("Cuda compilation tools"))
            .or_else(|| stdout.lines().rev().find(|l| !l.trim().is_empty()))
            .map(|l| l.trim().to_owned())
            .with_context(|| format!("`{} --version` printed nothing", self.path.display()))
    }

    fn targets(&self) -> Vec<String> {
        self.targets.clone()
    }

    fn compile(&self, kernels: &Path, module: &str) -> Result<()> {
        // Run from the directory above kernels/ with relative paths, so the
        // command is the one in kernels/README.md and no absolute path can
        // end up in the output.
        let (root, dir) = split_parent(kernels)?;
        let mut command = Command::new(&self.path);
        command
            .current_dir(root)
            .arg("--fatbin")
            .args(gencode_args(&self.targets)?)
            // The architectures are compiled in parallel, one thread each.
            .args(["--threads", "0"])
            // Compressed fatbins: the driver unpacks them when loading.
            .args(["-Xfatbin=-compress-all", "-O3", "-std=c++17", "-I"])
            .arg(dir)
            .arg("-o")
            .arg(format!("{dir}/{OUT_DIR}/{module}.{EXTENSION}"))
            .arg(format!("{dir}/{module}.cu"));
        eprintln!("+ {}", show_command(&command));
        let output = self.run(&mut command)?;
        if !output.status.success() {
            bail!(
                "nvcc failed on {dir}/{module}.cu ({}):\n{}{}",
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(())
    }
}

/// Compiles every module, removes fatbins of modules that no longer exist
/// and writes the manifest. Without modules the compiler is never called.
pub fn generate(kernels: &Path, compiler: &dyn KernelCompiler) -> Result<Manifest> {
    let names = module_names(kernels)?;
    let source_hash = source_hash(kernels)?;
    let out_dir = kernels.join(OUT_DIR);
    fs::create_dir_all(&out_dir).with_context(|| format!("creating {}", out_dir.display()))?;

    let nvcc_version = if names.is_empty() {
        None
    } else {
        Some(compiler.version()?)
    };
    let mut modules = Vec::with_capacity(names.len());
    for name in &names {
        compiler
            .compile(kernels, name)
            .with_context(|| format!("compiling kernel module {name}"))?;
        let fatbin = format!("{name}.{EXTENSION}");
        let sha256 = file_sha256(&out_dir.join(&fatbin))?;
        modules.push(Module {
            name: name.clone(),
            fatbin,
            sha256,
        });
    }
    for stale in stale_outputs(kernels, &names)? {
        let path = out_dir.join(&stale);
        eprintln!("removing stale {}", path.display());
        fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
    }

    let manifest = Manifest {
        generated_by: GENERATED_BY.to_owned(),
        nvcc_version,
        targets: compiler.targets(),
        source_hash,
        modules,
    };
    let mut json = serde_json::to_string_pretty(&manifest)?;
    json.push('\n');
    let path = out_dir.join(MANIFEST_FILE);
    fs::write(&path, json).with_context(|| format!("writing {}", path.display()))?;
    Ok(manifest)
}

/// Everything that makes `kernels/fatbin/` disagree with the sources; empty
/// when they match. Each line names the file at fault.
pub fn check(kernels: &Path) -> Result<Vec<String>> {
    let path = kernels.join(OUT_DIR).join(MANIFEST_FILE);
    let manifest = match fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str::<Manifest>(&text)
            .with_context(|| format!("parsing {}", path.display()))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(vec![format!("{} does not exist", path.display())]);
        }
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };

    let mut problems = Vec::new();
    let hash = source_hash(kernels)?;
    if hash != manifest.source_hash {
        problems.push(format!(
            "kernel sources hash to {hash}, the manifest says {}",
            manifest.source_hash
        ));
    }
    let targets = default_targets();
    if !manifest.modules.is_empty() && manifest.targets != targets {
        problems.push(format!(
            "the fatbins hold {:?}, the build wants {targets:?}",
            manifest.targets
        ));
    }
    let names = module_names(kernels)?;
    let listed: Vec<&str> = manifest.modules.iter().map(|m| m.name.as_str()).collect();
    if names != listed {
        problems.push(format!(
            "modules (kernels/*.cu) are {names:?}, the manifest lists {listed:?}"
        ));
    }
    let out_dir = kernels.join(OUT_DIR);
    for module in &manifest.modules {
        let path = out_dir.join(&module.fatbin);
        if !path.is_file() {
            problems.push(format!("{} is missing", path.display()));
            continue;
        }
        let sha256 = file_sha256(&path)?;
        if sha256 != module.sha256 {
            problems.push(format!(
                "{} has sha256 {sha256}, the manifest says {}",
                path.display(),
                module.sha256
            ));
        }
    }
    for stale in stale_outputs(kernels, &listed)? {
        problems.push(format!(
            "{} is not in the manifest",
            out_dir.join(stale).display()
        ));
    }
    Ok(problems)
}
/// The stems of the top-level `.cu` files, sorted: one module each.
pub fn module_names(kernels: &Path) -> Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in read_dir(kernels)? {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "cu") && path.is_file() {
            let name = path
                .file_stem()
                .and_then(|s| s.to_str())
                .filter(|s| {
                    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                })
                .with_context(|| {
                    format!(
                        "{}: a module name may only hold ASCII letters, digits and _",
                        path.display()
                    )
                })?;
            names.push(name.to_owned());
        }
    }
    names.sort();
    Ok(names)
}

/// sha256 (hex) over every kernel source: each file under `kernels/` with
/// extension cu, cuh, h or hpp, except under `kernels/fatbin/`, in order of its
/// `/`-separated relative path. Per file the hash takes the path, a NUL, the
/// content length as 8 little-endian bytes, then the content, so renaming or
/// moving a file changes the hash as much as editing it.
pub fn source_hash(kernels: &Path) -> Result<String> {
    let mut files = Vec::new();
    collect_sources(kernels, kernels, &mut files)?;
    files.sort();
    let mut hasher = Sha256::new();
    for rel in &files {
        let path = kernels.join(rel);
        let content = fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        hasher.update(rel.as_bytes());
        hasher.update([0]);
        hasher.update((content.len() as u64).to_le_bytes());
        hasher.update(&content);
    }
    Ok(hex::encode(hasher.finalize()))
}

fn collect_sources(kernels: &Path, dir: &Path, files: &mut Vec<String>) -> Result<()> {
    for entry in read_dir(dir)? {
        let path = entry.path();
        if path.is_dir() {
            if path != kernels.join(OUT_DIR) {
                collect_sources(kernels, &path, files)?;
            }
        } else if path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| SOURCE_EXTENSIONS.contains(&e))
        {
            let rel = path.strip_prefix(kernels)?;
            let parts: Vec<&str> = rel
                .components()
                .map(|c| {
                    c.as_os_str()
                        .to_str()
                        .with_context(|| format!("{}: file name is not UTF-8", path.display()))
                })
                .collect::<Result<_>>()?;
            files.push(parts.join("/"));
        }
    }
    Ok(())
}

/// `.fatbin` files in `kernels/fatbin/` that belong to none of `modules`.
fn stale_outputs(kernels: &Path, modules: &[impl AsRef<str>]) -> Result<Vec<String>> {
    let dir = kernels.join(OUT_DIR);
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let mut stale = Vec::new();
    for entry in read_dir(&dir)? {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == EXTENSION) {
            let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
            if !modules.iter().any(|m| m.as_ref() == stem) {
                stale.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
    }
    stale.sort();
    Ok(stale)
}

fn read_dir(dir: &Path) -> Result<Vec<fs::DirEntry>> {
    fs::read_dir(dir)
        .and_then(|entries| entries.collect::<std::io::Result<Vec<_>>>())
        .with_context(|| format!("reading directory {}", dir.display()))
}

fn file_sha256(path: &Path) -> Result<String> {
    let content = fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(hex::encode(Sha256::digest(&content)))
}

fn find_on_path(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

/// `/a/b/kernels` -> (`/a/b`, `kernels`).
fn split_parent(kernels: &Path) -> Result<(&Path, &str)> {
    let dir = kernels
        .file_name()
        .and_then(|n| n.to_str())
        .with_context(|| format!("{}: not a usable kernels directory", kernels.display()))?;
    let root = kernels.parent().filter(|p| !p.as_os_str().is_empty());
    Ok((root.unwrap_or(Path::new(".")), dir))
}

fn show_command(command: &Command) -> String {
    let mut text = command.get_program().to_string_lossy().into_owned();
    for arg in command.get_args() {
        let _ = write!(text, " {}", arg.to_string_lossy());
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The real `kernels/` directory, next to this crate.
    fn repo_kernels() -> PathBuf {
        let xtask = Path::new(env!("CARGO_MANIFEST_DIR"));
        xtask.parent().expect("xtask/ has a parent").join("kernels")
    }

    #[test]
    fn kernel_manifest_matches_kernel_sources() {
        let problems = check(&repo_kernels()).expect("checking kernels/");
        assert!(
            problems.is_empty(),
            "kernels/fatbin/ is out of date with the kernel sources; run `cargo xtask kernels` \
             (needs nvcc, see kernels/README.md) and commit the result:\n  {}",
            problems.join("\n  ")
        );
    }

    /// Writes a fake fatbin whose content depends on the source, so a changed
    /// source gives a changed fatbin hash, as with nvcc.
    #[derive(Debug)]
    struct FakeCompiler;

    impl KernelCompiler for FakeCompiler {
        fn version(&self) -> Result<String> {
            Ok("fake nvcc 0.0".into())
        }
        fn targets(&self) -> Vec<String> {
            default_targets()
        }
        fn compile(&self, kernels: &Path, module: &str) -> Result<()> {
            let source = fs::read_to_string(kernels.join(format!("{module}.cu")))?;
            fs::write(
                kernels.join(OUT_DIR).join(format!("{module}.fatbin")),
                format!("// fatbin of\n{source}"),
            )?;
            Ok(())
        }
    }

    /// A compiler that must not be used: generating with no modules must
    /// not need nvcc.
    #[derive(Debug)]
    struct NoCompiler;

    impl KernelCompiler for NoCompiler {
        fn version(&self) -> Result<String> {
            bail!("nvcc was not found")
        }
        fn targets(&self) -> Vec<String> {
            default_targets()
        }
        fn compile(&self, _: &Path, _: &str) -> Result<()> {
            bail!("nvcc was not found")
        }
    }

    fn write(dir: &Path, rel: &str, content: &str) {
        let path = dir.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }

    fn kernels_with_sources() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "ff/field.cuh",
            "template<class P> struct fp {};",
        );
        write(dir.path(), "ec/xyzz.cuh", "struct xyzz {};");
        write(
            dir.path(),
            "msm.cu",
            "#include \"ff/field.cuh\"\nextern \"C\" {}",
        );
        write(dir.path(), "ntt.cu", "extern \"C\" {}");
        dir
    }

    #[test]
    fn empty_dir_needs_no_nvcc() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "README.md", "# kernels");
        let manifest = generate(dir.path(), &NoCompiler).unwrap();
        assert_eq!(manifest.nvcc_version, None);
        assert!(manifest.modules.is_empty());
        // sha256 of nothing.
        assert_eq!(
            manifest.source_hash,
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(check(dir.path()).unwrap(), Vec::<String>::new());
        let text = fs::read_to_string(dir.path().join("fatbin/manifest.json")).unwrap();
        assert!(text.contains("\"nvcc_version\": null"), "{text}");
        assert!(text.contains("\"modules\": []"), "{text}");
    }

    #[test]
    fn missing_manifest_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let problems = check(dir.path()).unwrap();
        assert_eq!(problems.len(), 1);
        assert!(
            problems[0].ends_with("manifest.json does not exist"),
            "{problems:?}"
        );
    }

    #[test]
    fn generate_then_check_round_trips() {
        let dir = kernels_with_sources();
        let manifest = generate(dir.path(), &FakeCompiler).unwrap();
        assert_eq!(manifest.nvcc_version.as_deref(), Some("fake nvcc 0.0"));
        let names: Vec<_> = manifest.modules.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["msm", "ntt"]);
        assert_eq!(manifest.modules[0].fatbin, "msm.fatbin");
        assert_eq!(check(dir.path()).unwrap(), Vec::<String>::new());
        // Same sources, same manifest.
        assert_eq!(generate(dir.path(), &FakeCompiler).unwrap(), manifest);
    }

    #[test]
    fn header_edit_changes_hash_and_fails_check() {
        let dir = kernels_with_sources();
        let before = source_hash(dir.path()).unwrap();
        generate(dir.path(), &FakeCompiler).unwrap();
        write(
            dir.path(),
            "ff/field.cuh",
            "template<class P> struct fp { int x; };",
        );
        assert_ne!(source_hash(dir.path()).unwrap(), before);
        let problems = check(dir.path()).unwrap();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].starts_with("kernel sources hash to"),
            "{problems:?}"
        );
    }

    #[test]
    fn rename_changes_hash() {
        let dir = kernels_with_sources();
        let before = source_hash(dir.path()).unwrap();
        fs::rename(
            dir.path().join("ec/xyzz.cuh"),
            dir.path().join("ec/jacobian.cuh"),
        )
        .unwrap();
        assert_ne!(source_hash(dir.path()).unwrap(), before);
        // Moving content between files with the same concatenation changes it too.
        let dir2 = tempfile::tempdir().unwrap();
        write(dir2.path(), "a.h", "ab");
        write(dir2.path(), "b.h", "");
        let split = source_hash(dir2.path()).unwrap();
        write(dir2.path(), "a.h", "a");
        write(dir2.path(), "b.h", "b");
        assert_ne!(source_hash(dir2.path()).unwrap(), split);
    }

    #[test]
    fn only_sources_outside_the_output_count() {
        let dir = kernels_with_sources();
        let before = source_hash(dir.path()).unwrap();
        write(dir.path(), "fatbin/msm.fatbin", "// generated");
        write(dir.path(), "fatbin/stray.cuh", "// not a source");
        write(dir.path(), "README.md", "# docs");
        write(dir.path(), "msm/notes.txt", "tuning notes");
        assert_eq!(source_hash(dir.path()).unwrap(), before);
        // A nested directory named fatbin is not the generated one.
        write(dir.path(), "msm/fatbin/helper.cuh", "// a source");
        assert_ne!(source_hash(dir.path()).unwrap(), before);
        // Every listed extension counts.
        for (i, ext) in SOURCE_EXTENSIONS.iter().enumerate() {
            let before = source_hash(dir.path()).unwrap();
            write(dir.path(), &format!("extra/x{i}.{ext}"), "x");
            assert_ne!(source_hash(dir.path()).unwrap(), before, "{ext}");
        }
    }

    #[test]
    fn only_top_level_cu_files_are_modules() {
        let dir = kernels_with_sources();
        write(dir.path(), "msm/pippenger.cu", "// included, not a module");
        assert_eq!(module_names(dir.path()).unwrap(), ["msm", "ntt"]);
        write(dir.path(), "bad-name.cu", "");
        let err = module_names(dir.path()).unwrap_err();
        assert!(err.to_string().contains("bad-name.cu"), "{err:#}");
    }

    #[test]
    fn removed_module_is_stale() {
        let dir = kernels_with_sources();
        generate(dir.path(), &FakeCompiler).unwrap();
        fs::remove_file(dir.path().join("ntt.cu")).unwrap();
        let problems = check(dir.path()).unwrap();
        assert!(
            problems
                .iter()
                .any(|p| p.contains(r#"are ["msm"], the manifest lists ["msm", "ntt"]"#)),
            "{problems:?}"
        );
        // Regenerating drops the module and its fatbin.
        let manifest = generate(dir.path(), &FakeCompiler).unwrap();
        assert_eq!(manifest.modules.len(), 1);
        assert!(!dir.path().join("fatbin/ntt.fatbin").exists());
        assert_eq!(check(dir.path()).unwrap(), Vec::<String>::new());
    }

    #[test]
    fn stray_fatbin_is_reported_and_removed() {
        let dir = kernels_with_sources();
        generate(dir.path(), &FakeCompiler).unwrap();
        write(dir.path(), "fatbin/old.fatbin", "// from a deleted module");
        let problems = check(dir.path()).unwrap();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].ends_with("old.fatbin is not in the manifest"),
            "{problems:?}"
        );
        generate(dir.path(), &FakeCompiler).unwrap();
        assert!(!dir.path().join("fatbin/old.fatbin").exists());
    }

    #[test]
    fn missing_or_edited_fatbin_fails_check() {
        let dir = kernels_with_sources();
        generate(dir.path(), &FakeCompiler).unwrap();
        write(dir.path(), "fatbin/msm.fatbin", "// hand-edited");
        fs::remove_file(dir.path().join("fatbin/ntt.fatbin")).unwrap();
        let problems = check(dir.path()).unwrap();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[0].contains("msm.fatbin has sha256"),
            "{problems:?}"
        );
        assert!(
            problems[1].ends_with("ntt.fatbin is missing"),
            "{problems:?}"
        );
    }

    #[test]
    fn missing_nvcc_says_how_to_install() {
        let dir = kernels_with_sources();
        let nvcc = Nvcc {
            path: dir.path().join("no-such-nvcc"),
            targets: default_targets(),
        };
        let err = generate(dir.path(), &nvcc).unwrap_err();
        let text = format!("{err:#}");
        assert!(text.contains("nvcc was not found"), "{text}");
        assert!(text.contains("kernels/README.md"), "{text}");
    }

    #[test]
    fn gencode_covers_every_target() {
        let args = gencode_args(&default_targets()).unwrap();
        assert_eq!(
            args,
            [
                "-gencode",
                "arch=compute_80,code=sm_80",
                "-gencode",
                "arch=compute_86,code=sm_86",
                "-gencode",
                "arch=compute_89,code=sm_89",
                "-gencode",
                "arch=compute_90,code=sm_90",
                "-gencode",
                "arch=compute_80,code=compute_80",
            ]
        );
        let err = gencode_args(&["sm90".to_owned()]).unwrap_err();
        assert!(err.to_string().contains("\"sm90\""), "{err:#}");
    }

    #[test]
    fn other_targets_fail_check() {
        let dir = kernels_with_sources();
        generate(dir.path(), &FakeCompiler).unwrap();
        let path = dir.path().join("fatbin/manifest.json");
        let text = fs::read_to_string(&path).unwrap();
        fs::write(&path, text.replace("\"sm_89\",", "")).unwrap();
        let problems = check(dir.path()).unwrap();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("the build wants"), "{problems:?}");
    }
}
