//! The device code embedded in this build.
//!
//! Each module is `kernels/<name>.cu`, compiled by `cargo xtask kernels` to
//! `kernels/fatbin/<name>.fatbin` (machine code for sm_80, sm_86, sm_89 and
//! sm_90, plus compute_80 PTX that the driver JIT-compiles only for a newer
//! GPU), which is committed and embedded here with `include_bytes!`: the
//! crate builds without nvcc, and loading a module on Ampere, Ada or Hopper
//! compiles nothing.
//!
//! [`MODULES`] lists the modules this library launches, one line each. The
//! modules only tests and benchmarks launch ([`TEST_ONLY`]) are not in it:
//! this crate's tests and examples embed them themselves with
//! [`fatbin_module!`](crate::fatbin_module), so production binaries do not
//! carry them. A test checks both lists against `kernels/fatbin/manifest.json`,
//! so a module added by `cargo xtask kernels` and listed in neither (or the
//! other way round) fails `cargo test`.

/// The code of one module, as the driver's `cuModuleLoadData` takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModuleImage {
    /// A fatbin from `cargo xtask kernels`.
    Fatbin(&'static [u8]),
    /// PTX text (NUL-free), JIT-compiled by the driver when loaded: a test's
    /// own hand-written kernels.
    Ptx(&'static str),
}

/// One module: the name Rust loads it by (the `.cu` file's stem) and its
/// code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceModule {
    /// The module's name: `kernels/<name>.cu`.
    pub name: &'static str,
    pub image: ModuleImage,
}

impl DeviceModule {
    /// A module of fatbin bytes that is not one of [`MODULES`] (a test-only
    /// module, see [`fatbin_module!`](crate::fatbin_module)).
    /// [`Gpu::kernel_in`](super::Gpu::kernel_in) loads it like an embedded
    /// one; its name must differ from every embedded module's.
    pub const fn fatbin(name: &'static str, bytes: &'static [u8]) -> Self {
        DeviceModule {
            name,
            image: ModuleImage::Fatbin(bytes),
        }
    }

    /// A module of PTX text, e.g. a test's own kernels. As
    /// [`DeviceModule::fatbin`] otherwise.
    pub const fn ptx(name: &'static str, text: &'static str) -> Self {
        DeviceModule {
            name,
            image: ModuleImage::Ptx(text),
        }
    }

    /// The address of the code: two modules of one name are the same module
    /// when they share it (or their bytes).
    pub(crate) fn address(&self) -> usize {
        match self.image {
            ModuleImage::Fatbin(bytes) => bytes.as_ptr() as usize,
            ModuleImage::Ptx(text) => text.as_ptr() as usize,
        }
    }

    /// The code's bytes.
    pub(crate) fn bytes(&self) -> &'static [u8] {
        match self.image {
            ModuleImage::Fatbin(bytes) => bytes,
            ModuleImage::Ptx(text) => text.as_bytes(),
        }
    }
}

/// The first four bytes of a fatbin (its magic number, little-endian
/// 0xBA55ED50).
pub const FATBIN_MAGIC: [u8; 4] = [0x50, 0xED, 0x55, 0xBA];

/// `fatbin_module!("name")`: the module compiled from `kernels/name.cu`, as
/// a [`DeviceModule`] embedded in the crate that expands it. The path is
/// taken from that crate's `CARGO_MANIFEST_DIR`, so only this crate (its
/// library, tests, benches and examples) can expand it.
#[macro_export]
macro_rules! fatbin_module {
    ($name:literal) => {
        $crate::cuda::DeviceModule::fatbin(
            $name,
            include_bytes!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../kernels/fatbin/",
                $name,
                ".fatbin"
            )),
        )
    };
}

/// Every module this library launches, one line per module, sorted by
/// name.
#[rustfmt::skip]
pub static MODULES: &[DeviceModule] = &[
    crate::fatbin_module!("msm"),
    crate::fatbin_module!("msm_g1"),
    crate::fatbin_module!("msm_g2"),
    crate::fatbin_module!("ntt"),
    crate::fatbin_module!("setup"),
    crate::fatbin_module!("spmv"),
];

/// The modules that only tests and benchmarks launch (`arith`: every field
/// and curve operation element-wise, for the CPU-twin tests; `arith_bench`:
/// throughput kernels). Not embedded in the library: its tests and examples
/// embed them with [`fatbin_module!`](crate::fatbin_module).
pub const TEST_ONLY: &[&str] = &["arith", "arith_bench"];

/// The embedded module called `name`.
pub fn find(name: &str) -> Option<&'static DeviceModule> {
    MODULES.iter().find(|m| m.name == name)
}

/// The names of the embedded modules, for error messages: `msm, ntt`, or
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

    /// The manifest `cargo xtask kernels` wrote, read at compile time so the
    /// test binary checks the same files it embeds, wherever it runs.
    const MANIFEST: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../kernels/fatbin/manifest.json"
    ));

    #[test]
    fn registry_matches_manifest() {
        let manifest: serde_json::Value =
            serde_json::from_str(MANIFEST).expect("kernels/fatbin/manifest.json is not JSON");
        let listed = manifest["modules"]
            .as_array()
            .expect("kernels/fatbin/manifest.json has no \"modules\" list");
        let in_manifest: Vec<(&str, &str)> = listed
            .iter()
            .map(|m| {
                (
                    m["name"].as_str().expect("a module without a name"),
                    m["fatbin"]
                        .as_str()
                        .expect("a module without a fatbin file"),
                )
            })
            .collect();
        let mut known: Vec<&str> = MODULES.iter().map(|m| m.name).collect();
        known.extend(TEST_ONLY);
        known.sort_unstable();
        let manifest_names: Vec<&str> = in_manifest.iter().map(|(name, _)| *name).collect();
        assert_eq!(
            known, manifest_names,
            "crates/groth16-cuda/src/cuda/modules.rs knows {known:?} (MODULES and TEST_ONLY), \
             kernels/fatbin/manifest.json lists {manifest_names:?}: add (or remove) one line per \
             module in MODULES, or its name in TEST_ONLY"
        );
        for (name, file) in in_manifest {
            assert_eq!(file, format!("{name}.fatbin"), "module {name}");
        }
        let sorted = {
            let mut names: Vec<&str> = MODULES.iter().map(|m| m.name).collect();
            names.sort_unstable();
            names
        };
        let names: Vec<&str> = MODULES.iter().map(|m| m.name).collect();
        assert_eq!(names, sorted, "MODULES is kept sorted by name");
    }

    #[test]
    fn test_only_modules_are_not_embedded() {
        for name in TEST_ONLY {
            assert_eq!(find(name), None, "{name} is test-only but embedded");
        }
        // Its tests can still reach one.
        let arith = crate::fatbin_module!("arith");
        assert_eq!(arith.name, "arith");
        assert!(matches!(arith.image, ModuleImage::Fatbin(b) if b.starts_with(&FATBIN_MAGIC)));
    }

    #[test]
    fn embedded_modules_are_fatbins() {
        for module in MODULES {
            let ModuleImage::Fatbin(bytes) = module.image else {
                panic!("{} is not a fatbin", module.name);
            };
            assert!(
                bytes.starts_with(&FATBIN_MAGIC),
                "{}.fatbin does not start with the fatbin magic number",
                module.name
            );
            assert!(bytes.len() > 1024, "{}.fatbin is too small", module.name);
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
