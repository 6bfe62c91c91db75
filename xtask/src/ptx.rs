//! `cargo xtask ptx`: CUDA sources in `kernels/` -> PTX in `kernels/ptx/`,
//! plus `kernels/ptx/manifest.json`, and the check that keeps them in step.
//!
//! Every top-level `kernels/<stem>.cu` is one PTX module, compiled to
//! `kernels/ptx/<stem>.ptx`. The manifest records:
//!
//! ```json
//! {
//!   "generated_by": "cargo xtask ptx",
//!   "nvcc_version": "Cuda compilation tools, release 11.8, V11.8.89",
//!   "arch": "compute_80",
//!   "source_hash": "<sha256 hex of all kernel sources, see source_hash()>",
//!   "modules": [
//!     { "name": "msm", "ptx": "msm.ptx", "sha256": "<sha256 hex of msm.ptx>" }
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

/// Where the PTX and the manifest live, relative to the kernels directory.
pub const PTX_DIR: &str = "ptx";
pub const MANIFEST_FILE: &str = "manifest.json";
/// The virtual architecture the committed PTX targets: sm_80 PTX is JIT-ed by
/// the driver for Ampere, Ada, Hopper and Blackwell.
pub const DEFAULT_ARCH: &str = "compute_80";
const GENERATED_BY: &str = "cargo xtask ptx";
/// File extensions that count as kernel sources for the hash.
const SOURCE_EXTENSIONS: [&str; 4] = ["cu", "cuh", "h", "hpp"];

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub generated_by: String,
    pub nvcc_version: Option<String>,
    pub arch: String,
    pub source_hash: String,
    pub modules: Vec<Module>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Module {
    /// The `.cu` file's stem; Rust loads the module under this name.
    pub name: String,
    /// The PTX file, relative to `kernels/ptx/`.
    pub ptx: String,
    /// sha256 (hex) of the PTX file.
    pub sha256: String,
}

/// Turns one `.cu` file into PTX. [`Nvcc`] is the real one; tests use a fake.
pub trait PtxCompiler {
    /// The version line written into the manifest; only asked for when
    /// there is at least one module.
    fn version(&self) -> Result<String>;
    /// The virtual architecture the PTX is for, e.g. `compute_80`.
    fn arch(&self) -> &str;
    /// Compiles `kernels/<module>.cu` into `kernels/ptx/<module>.ptx`.
    fn compile(&self, kernels: &Path, module: &str) -> Result<()>;
}

/// nvcc: `$NVCC`, else `nvcc` on `PATH`, else `/usr/local/cuda/bin/nvcc`.
#[derive(Debug)]
pub struct Nvcc {
    path: PathBuf,
    arch: String,
}

impl Nvcc {
    pub fn new(arch: Option<String>) -> Self {
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
            arch: arch.unwrap_or_else(|| DEFAULT_ARCH.to_owned()),
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

impl PtxCompiler for Nvcc {
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

    fn arch(&self) -> &str {
        &self.arch
    }

    fn compile(&self, kernels: &Path, module: &str) -> Result<()> {
        // Run from the directory above kernels/ with relative paths, so the
        // command is the one in kernels/README.md and no absolute path can
        // end up in the PTX.
        let (root, dir) = split_parent(kernels)?;
        let mut command = Command::new(&self.path);
        command
            .current_dir(root)
            .arg("--ptx")
            .arg(format!("-arch={}", self.arch))
            .args(["-O3", "-std=c++17", "-I"])
            .arg(dir)
            .arg("-o")
            .arg(format!("{dir}/{PTX_DIR}/{module}.ptx"))
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

/// Compiles every module, removes PTX of modules that no longer exist and
/// writes the manifest. Without modules the compiler is never called.
pub fn generate(kernels: &Path, compiler: &dyn PtxCompiler) -> Result<Manifest> {
    let names = module_names(kernels)?;
    let source_hash = source_hash(kernels)?;
    let ptx_dir = kernels.join(PTX_DIR);
    fs::create_dir_all(&ptx_dir).with_context(|| format!("creating {}", ptx_dir.display()))?;

    let nvcc_version = if names.is_empty() {
        None
    } else {
        Some(compiler.version()?)
    };
    let mut modules = Vec::with_capacity(names.len());
    for name in &names {
        compiler
            .compile(kernels, name)
            .with_context(|| format!("compiling PTX module {name}"))?;
        let ptx = format!("{name}.ptx");
        let sha256 = file_sha256(&ptx_dir.join(&ptx))?;
        modules.push(Module {
            name: name.clone(),
            ptx,
            sha256,
        });
    }
    for stale in stale_ptx(kernels, &names)? {
        let path = ptx_dir.join(&stale);
        eprintln!("removing stale {}", path.display());
        fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
    }

    let manifest = Manifest {
        generated_by: GENERATED_BY.to_owned(),
        nvcc_version,
        arch: compiler.arch().to_owned(),
        source_hash,
        modules,
    };
    let mut json = serde_json::to_string_pretty(&manifest)?;
    json.push('\n');
    let path = ptx_dir.join(MANIFEST_FILE);
    fs::write(&path, json).with_context(|| format!("writing {}", path.display()))?;
    Ok(manifest)
}

/// Everything that makes `kernels/ptx/` disagree with the sources; empty
/// when they match. Each line names the file at fault.
pub fn check(kernels: &Path) -> Result<Vec<String>> {
    let path = kernels.join(PTX_DIR).join(MANIFEST_FILE);
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
    let names = module_names(kernels)?;
    let listed: Vec<&str> = manifest.modules.iter().map(|m| m.name.as_str()).collect();
    if names != listed {
        problems.push(format!(
            "modules (kernels/*.cu) are {names:?}, the manifest lists {listed:?}"
        ));
    }
    let ptx_dir = kernels.join(PTX_DIR);
    for module in &manifest.modules {
        let path = ptx_dir.join(&module.ptx);
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
    for stale in stale_ptx(kernels, &listed)? {
        problems.push(format!(
            "{} is not in the manifest",
            ptx_dir.join(stale).display()
        ));
    }
    Ok(problems)
}

/// The stems of the top-level `.cu` files, sorted: one PTX module each.
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
/// extension cu, cuh, h or hpp, except under `kernels/ptx/`, in order of its
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
            if path != kernels.join(PTX_DIR) {
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

/// `.ptx` files in `kernels/ptx/` that belong to none of `modules`.
fn stale_ptx(kernels: &Path, modules: &[impl AsRef<str>]) -> Result<Vec<String>> {
    let dir = kernels.join(PTX_DIR);
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let mut stale = Vec::new();
    for entry in read_dir(&dir)? {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "ptx") {
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
    fn ptx_manifest_matches_kernel_sources() {
        let problems = check(&repo_kernels()).expect("checking kernels/");
        assert!(
            problems.is_empty(),
            "kernels/ptx/ is out of date with the kernel sources; run `cargo xtask ptx` \
             (needs nvcc, see kernels/README.md) and commit the result:\n  {}",
            problems.join("\n  ")
        );
    }

    /// Writes a fake PTX whose content depends on the source, so a changed
    /// source gives a changed PTX hash, as with nvcc.
    #[derive(Debug)]
    struct FakeCompiler;

    impl PtxCompiler for FakeCompiler {
        fn version(&self) -> Result<String> {
            Ok("fake nvcc 0.0".into())
        }
        fn arch(&self) -> &str {
            DEFAULT_ARCH
        }
        fn compile(&self, kernels: &Path, module: &str) -> Result<()> {
            let source = fs::read_to_string(kernels.join(format!("{module}.cu")))?;
            fs::write(
                kernels.join(PTX_DIR).join(format!("{module}.ptx")),
                format!("// ptx of\n{source}"),
            )?;
            Ok(())
        }
    }

    /// A compiler that must not be used: generating with no modules must
    /// not need nvcc.
    #[derive(Debug)]
    struct NoCompiler;

    impl PtxCompiler for NoCompiler {
        fn version(&self) -> Result<String> {
            bail!("nvcc was not found")
        }
        fn arch(&self) -> &str {
            DEFAULT_ARCH
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
        let text = fs::read_to_string(dir.path().join("ptx/manifest.json")).unwrap();
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
        assert_eq!(manifest.modules[0].ptx, "msm.ptx");
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
    fn only_sources_outside_ptx_count() {
        let dir = kernels_with_sources();
        let before = source_hash(dir.path()).unwrap();
        write(dir.path(), "ptx/msm.ptx", "// generated");
        write(dir.path(), "ptx/stray.cuh", "// not a source");
        write(dir.path(), "README.md", "# docs");
        write(dir.path(), "msm/notes.txt", "tuning notes");
        assert_eq!(source_hash(dir.path()).unwrap(), before);
        // A nested directory named ptx is not the generated one.
        write(dir.path(), "msm/ptx/helper.cuh", "// a source");
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
        // Regenerating drops the module and its PTX.
        let manifest = generate(dir.path(), &FakeCompiler).unwrap();
        assert_eq!(manifest.modules.len(), 1);
        assert!(!dir.path().join("ptx/ntt.ptx").exists());
        assert_eq!(check(dir.path()).unwrap(), Vec::<String>::new());
    }

    #[test]
    fn stray_ptx_is_reported_and_removed() {
        let dir = kernels_with_sources();
        generate(dir.path(), &FakeCompiler).unwrap();
        write(dir.path(), "ptx/old.ptx", "// from a deleted module");
        let problems = check(dir.path()).unwrap();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].ends_with("old.ptx is not in the manifest"),
            "{problems:?}"
        );
        generate(dir.path(), &FakeCompiler).unwrap();
        assert!(!dir.path().join("ptx/old.ptx").exists());
    }

    #[test]
    fn missing_or_edited_ptx_fails_check() {
        let dir = kernels_with_sources();
        generate(dir.path(), &FakeCompiler).unwrap();
        write(dir.path(), "ptx/msm.ptx", "// hand-edited");
        fs::remove_file(dir.path().join("ptx/ntt.ptx")).unwrap();
        let problems = check(dir.path()).unwrap();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].contains("msm.ptx has sha256"), "{problems:?}");
        assert!(problems[1].ends_with("ntt.ptx is missing"), "{problems:?}");
    }

    #[test]
    fn missing_nvcc_says_how_to_install() {
        let dir = kernels_with_sources();
        let nvcc = Nvcc {
            path: dir.path().join("no-such-nvcc"),
            arch: DEFAULT_ARCH.into(),
        };
        let err = generate(dir.path(), &nvcc).unwrap_err();
        let text = format!("{err:#}");
        assert!(text.contains("nvcc was not found"), "{text}");
        assert!(text.contains("kernels/README.md"), "{text}");
    }
}
