//! The PTX modules embedded in this build.
//!
//! Each module is `kernels/<name>.cu`, compiled by `cargo xtask ptx` to
//! `kernels/ptx/<name>.ptx`, which is committed and embedded here with
//! `include_str!`: the crate builds without nvcc, and the driver JIT-compiles
//! the PTX for whatever GPU runs it. [`MODULES`] lists them, one line per
//! module; a test checks it against `kernels/ptx/manifest.json`, so a module
//! added by `cargo xtask ptx` and not listed here (or the other way round)
//! fails `cargo test`.

/// One PTX module: the name Rust loads it by (the `.cu` file's stem) and its
/// PTX text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PtxModule {
    /// The module's name: `kernels/<name>.cu`.
    pub name: &'static str,
    /// The PTX text (NUL-free; the driver JIT-compiles it when loading).
    pub ptx: &'static str,
}

impl PtxModule {
    /// A module of PTX text that is not one of [`MODULES`], e.g. a test's own
    /// kernels. [`Gpu::kernel_in`](super::Gpu::kernel_in) loads it like an
    /// embedded one; its name must differ from every embedded module's.
    pub const fn new(name: &'static str, ptx: &'static str) -> Self {
        PtxModule { name, ptx }
    }
}

/// `embed!("name")`: the module compiled from `kernels/name.cu`.
macro_rules! embed {
    ($name:literal) => {
        PtxModule {
            name: $name,
            ptx: include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../kernels/ptx/",
                $name,
                ".ptx"
            )),
        }
    };
}

/// Every PTX module of this build, one line per module, sorted by name as in
/// `kernels/ptx/manifest.json`.
#[rustfmt::skip]
pub static MODULES: &[PtxModule] = &[
    embed!("arith"),
    embed!("arith_bench"),
    embed!("msm"),
    embed!("msm_g1"),
    embed!("msm_g2"),
    embed!("ntt"),
    embed!("setup"),
    embed!("spmv"),
];

/// The embedded module called `name`.
pub fn find(name: &str) -> Option<&'static PtxModule> {
    MODULES.iter().find(|m| m.name == name)
}

/// The names of the embedded modules, for error messages: `arith, msm`, or
/// `none` when there are none.
pub(crate) fn embedded_names() -> String {
    if MODULES.is_empty() {
        "none".to_owned()
    } else {
        MODULES
            .iter()
            .map(|m| m.name)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The manifest `cargo xtask ptx` wrote, read at compile time so the test
    /// binary checks the same files it embeds, wherever it runs.
    const MANIFEST: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../kernels/ptx/manifest.json"
    ));

    #[test]
    fn registry_matches_manifest() {
        let manifest: serde_json::Value =
            serde_json::from_str(MANIFEST).expect("kernels/ptx/manifest.json is not JSON");
        let listed = manifest["modules"]
            .as_array()
            .expect("kernels/ptx/manifest.json has no \"modules\" list");
        let in_manifest: Vec<(&str, &str)> = listed
            .iter()
            .map(|m| {
                (
                    m["name"].as_str().expect("a module without a name"),
                    m["ptx"].as_str().expect("a module without a ptx file"),
                )
            })
            .collect();
        let names: Vec<&str> = MODULES.iter().map(|m| m.name).collect();
        let manifest_names: Vec<&str> = in_manifest.iter().map(|(name, _)| *name).collect();
        assert_eq!(
            names, manifest_names,
            "crates/groth16-cuda/src/cuda/ptx.rs embeds {names:?}, kernels/ptx/manifest.json \
             lists {manifest_names:?}: add (or remove) one `embed!(\"<name>\")` line per module \
             in MODULES"
        );
        for (name, ptx) in in_manifest {
            assert_eq!(ptx, format!("{name}.ptx"), "module {name}");
        }
    }

    #[test]
    fn embedded_ptx_is_loadable_text() {
        for module in MODULES {
            assert!(!module.ptx.contains('\0'), "{} holds a NUL", module.name);
            assert!(
                module.ptx.contains(".entry"),
                "{}.ptx has no kernel entry point",
                module.name
            );
        }
    }

    #[test]
    fn find_and_names() {
        assert_eq!(find("no_such_module"), None);
        for module in MODULES {
            assert_eq!(find(module.name), Some(module));
        }
        let names = embedded_names();
        if MODULES.is_empty() {
            assert_eq!(names, "none");
        } else {
            assert!(names.contains(MODULES[0].name), "{names}");
        }
    }
}
