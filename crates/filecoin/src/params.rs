//! Groth16 parameters under filecoin-proofs' conventions: one directory
//! (`FIL_PROOFS_PARAMETER_CACHE`, default `/var/tmp/filecoin-proof-parameters`)
//! holding `v28-<circuit id>.params`, `.vk` and `.meta` per circuit, where the
//! circuit id is storage-proofs' `cache_identifier` (a hash of the circuit's
//! public parameters).
//!
//! Test parameters ([`generate`]) are made with a seeded RNG by bellperson's
//! own generator and written under these names into a directory the caller
//! chooses (never the production default), so filecoin-proofs' own
//! verifiers find them there when `FIL_PROOFS_PARAMETER_CACHE` points at it.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use bellperson::Circuit;
use bellperson::groth16::{self, PreparedVerifyingKey, VerifyingKey};
use blstrs::{Bls12, Scalar};
use cuzk_groth16_cuda::{SetupOptions, ToxicWaste, generate_parameters_file};
use storage_proofs_core::parameter_cache::{
    ParameterSetMetadata, metadata_id, parameter_id, verifying_key_id,
};

use crate::error::{FilecoinError, Result};

/// The production parameter directory: filecoin-proofs' setting, from
/// `FIL_PROOFS_PARAMETER_CACHE` (read once per process).
pub fn default_dir() -> PathBuf {
    PathBuf::from(&storage_proofs_core::settings::SETTINGS.parameter_cache)
}

/// The files of one circuit's parameters in a parameter directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamFiles {
    /// storage-proofs' cache identifier, e.g.
    /// `stacked-proof-of-replication-merkletree-poseidon_hasher-8-0-0-sha256_hasher-<hash>`.
    pub id: String,
    pub params: PathBuf,
    pub vk: PathBuf,
    pub meta: PathBuf,
}

impl ParamFiles {
    /// The files for circuit `id` in `dir`.
    pub fn new(dir: &Path, id: String) -> ParamFiles {
        ParamFiles {
            params: dir.join(parameter_id(&id)),
            vk: dir.join(verifying_key_id(&id)),
            meta: dir.join(metadata_id(&id)),
            id,
        }
    }

    /// The `.params` file, or a clear error when it is not there.
    pub fn existing_params(&self) -> Result<&Path> {
        if self.params.is_file() {
            Ok(&self.params)
        } else {
            Err(FilecoinError::ParamsMissing {
                what: "Groth16 parameters",
                path: self.params.clone(),
            })
        }
    }

    /// Reads the verifying key (`.vk`, or the start of `.params` when
    /// there is no `.vk`) and prepares it.
    pub fn prepared_vk(&self) -> Result<PreparedVerifyingKey<Bls12>> {
        let vk = if self.vk.is_file() {
            let bytes = fs::read(&self.vk).map_err(|source| FilecoinError::Io {
                path: self.vk.clone(),
                source,
            })?;
            VerifyingKey::<Bls12>::read(&bytes[..]).map_err(|e| FilecoinError::BadInput {
                what: "verifying key file",
                detail: format!("{}: {e}", self.vk.display()),
            })?
        } else if self.params.is_file() {
            cuzk_groth16_cuda::read_verifying_key(&self.params).map_err(|e| {
                FilecoinError::BadInput {
                    what: "parameter file",
                    detail: e.to_string(),
                }
            })?
        } else {
            return Err(FilecoinError::ParamsMissing {
                what: "verifying key",
                path: self.vk.clone(),
            });
        };
        Ok(groth16::prepare_verifying_key(&vk))
    }
}

/// Makes test parameters for `blank` (the circuit with no values) from
/// the toxic waste `ToxicWaste::from_seed(seed)`, and writes `.params`,
/// `.vk` and `.meta` atomically under `files`. The file is the one
/// bellperson's `generate_random_parameters` writes with
/// `ChaCha20Rng::seed_from_u64(seed)`, byte for byte, made by
/// `cuzk-groth16-cuda`'s generator: on the GPU when there is one, else on
/// all CPU cores. Does nothing when the three files exist: the names are
/// keyed by the circuit's identifier, so a directory per seed is a cache
/// keyed by content. Returns whether it generated.
///
/// These parameters come from a known seed: they prove nothing to anyone
/// else. Use them for tests and benchmarks only, in a directory of their
/// own.
pub fn generate<C, P>(files: &ParamFiles, blank: C, pub_params: &P, seed: u64) -> Result<bool>
where
    C: Circuit<Scalar>,
    P: ParameterSetMetadata,
{
    // One generation at a time in this process: a second caller for the
    // same files waits and then finds them, instead of making them again
    // (each file is replaced atomically, so callers in other processes
    // only repeat the work).
    static GENERATING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = GENERATING.lock().unwrap_or_else(|e| e.into_inner());
    if files.params.is_file() && files.vk.is_file() && files.meta.is_file() {
        return Ok(false);
    }
    let pce = cuzk_synth::Pce::record(blank).map_err(|e| FilecoinError::Proofs {
        context: "recording the circuit for its parameters",
        message: e.to_string(),
    })?;
    let gpu = cuzk_gpu_sched::discover().is_ok_and(|d| !d.is_empty());
    let how = if gpu { Setup::Gpu(0) } else { Setup::Cpu };
    setup_from_pce(files, &pce, pub_params.sector_size(), Some(seed), how)?;
    Ok(true)
}

/// How [`setup_from_pce`] makes the parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setup {
    /// cuzk-groth16-cuda's generator on this GPU, the CPU if it fails.
    Gpu(usize),
    /// The same generator on every CPU core.
    Cpu,
    /// Fake parameters: the right counts of cheap pseudo-random points, for
    /// timing only (proofs made with them never verify; cuzk says so).
    Fake,
}

/// What [`setup_from_pce`] made.
#[derive(Debug, Clone)]
pub struct SetupDone {
    /// `gpu 0 (<name>)`, `cpu` or `fake`.
    pub backend: String,
    pub params_bytes: u64,
    pub seconds: f64,
}

/// Makes the parameters of the circuit recorded in `pce` and writes
/// `.params`, `.vk` and `.meta` atomically under `files` (replacing what is
/// there), as filecoin-proofs names them. `seed` fixes the toxic waste
/// (test parameters, the bytes bellperson's `generate_random_parameters`
/// writes with `ChaCha20Rng::seed_from_u64(seed)`); `None` draws it from
/// the operating system.
pub fn setup_from_pce(
    files: &ParamFiles,
    pce: &cuzk_synth::Pce,
    sector_size: u64,
    seed: Option<u64>,
    how: Setup,
) -> Result<SetupDone> {
    if let Some(dir) = files.params.parent() {
        fs::create_dir_all(dir).map_err(|source| FilecoinError::Io {
            path: dir.to_owned(),
            source,
        })?;
    }
    let failed = |e: cuzk_groth16_cuda::Groth16Error| FilecoinError::Proofs {
        context: "generating parameters",
        message: e.to_string(),
    };
    let start = Instant::now();
    let waste = match seed {
        Some(seed) => ToxicWaste::from_seed(seed),
        None => {
            use rand::SeedableRng;
            ToxicWaste::random(&mut rand_chacha::ChaCha20Rng::from_entropy())
        }
    };
    let backend = match how {
        Setup::Fake => {
            cuzk_groth16_cuda::fake::write_fake_params(&files.params, pce, seed.unwrap_or(0))
                .map_err(failed)?;
            "fake".to_owned()
        }
        Setup::Gpu(ordinal) => {
            generate_parameters_file(&files.params, pce, &waste, &SetupOptions::gpu(ordinal))
                .or_else(|e| {
                    tracing::warn!(error = %e, "GPU parameter generation failed; using the CPU");
                    generate_parameters_file(&files.params, pce, &waste, &SetupOptions::cpu())
                })
                .map_err(failed)?
                .backend
        }
        Setup::Cpu => {
            generate_parameters_file(&files.params, pce, &waste, &SetupOptions::cpu())
                .map_err(failed)?
                .backend
        }
    };
    let vk = cuzk_groth16_cuda::read_verifying_key(&files.params).map_err(failed)?;
    cuzk_groth16_cuda::write_atomically(&files.vk, |w| vk.write(w)).map_err(failed)?;
    let meta = format!("{{\"sector_size\":{sector_size}}}");
    cuzk_groth16_cuda::write_atomically(&files.meta, |w| w.write_all(meta.as_bytes()))
        .map_err(failed)?;
    let seconds = start.elapsed().as_secs_f64();
    let params_bytes = fs::metadata(&files.params).map_or(0, |m| m.len());
    tracing::info!(
        id = %files.id,
        %backend,
        constraints = pce.num_constraints(),
        params_bytes,
        seconds,
        "generated parameters"
    );
    Ok(SetupDone {
        backend,
        params_bytes,
        seconds,
    })
}
