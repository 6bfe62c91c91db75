//! Shared by the Filecoin tests: test-only parameter and parent caches
//! under the target directory (never the production paths), one engine,
//! and one sealed 2 KiB sector (or one updated CC sector) per test binary.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use blstrs::Scalar;
use cuzk_engine::{Backend, Engine, EngineConfig};
use cuzk_filecoin::testing::{self, SealedSector, UpdatedSector};
use cuzk_filecoin::{PostKind, PostProof, SealProof, SectorSize};
use ff::Field;
use filecoin_proofs::{
    FallbackPoStSectorProof, PrivateReplicaInfo, SectorShape2KiB,
    generate_fallback_sector_challenges, generate_single_vanilla_proof,
};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use storage_proofs_core::api_version::ApiVersion;

/// Seed of the test parameters: a directory per seed, so generated
/// parameters are reused by later runs (the file names are keyed by the
/// circuit's identifier).
pub const PARAM_SEED: u64 = 0x5EED_F11E;

/// `target/tmp/cuzk-filecoin`: kept between runs, outside every production
/// path.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cuzk-filecoin")
}

/// Points filecoin-proofs' parameter and parent caches at test directories
/// (once, before anything reads its settings) and returns the parameter
/// directory.
pub fn init() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let params = root().join(format!("params-seed-{PARAM_SEED:x}"));
        let parents = root().join("parents");
        std::fs::create_dir_all(&params).unwrap();
        std::fs::create_dir_all(&parents).unwrap();
        // SAFETY: set once, before any test of this binary calls into
        // filecoin-proofs (every test calls `init` first and waits on this
        // OnceLock); nothing else in these tests touches the environment.
        unsafe {
            std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", &params);
            std::env::set_var("FIL_PROOFS_PARENT_CACHE", &parents);
        }
        params
    })
}

/// One engine for the binary (its PCE and parameter caches are shared):
/// the GPU backend when the machine has a usable GPU, else the CPU, and it
/// checks that it got that one (with `CUZK_REQUIRE_GPU=1` the GPU must be
/// there and used). Parameters are generated here, so the slow subgroup
/// check is skipped.
pub fn engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        let config = EngineConfig {
            backend: Backend::Auto,
            params_subgroup_check: false,
            ..EngineConfig::default()
        };
        let engine = Engine::new(config).unwrap();
        let want = if cuzk_gpu_sched::testing::gpu_expected("filecoin engine") {
            "cuda"
        } else {
            "cpu"
        };
        assert_eq!(
            engine.config().backend,
            want,
            "the engine chose the {} backend where the {want} backend was expected",
            engine.config().backend
        );
        engine
    })
}

/// A 2 KiB sector sealed with `StackedDrg2KiBV1_1` (once per binary).
pub fn sealed_2kib() -> &'static SealedSector<SectorShape2KiB> {
    static SEALED: OnceLock<SealedSector<SectorShape2KiB>> = OnceLock::new();
    SEALED.get_or_init(|| {
        init();
        // One directory per test binary, replaced on every run.
        let exe = std::env::current_exe().unwrap();
        let name = exe.file_stem().unwrap().to_string_lossy().into_owned();
        let dir = root().join(format!("sector-2kib-{name}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let start = std::time::Instant::now();
        let sealed = testing::seal(SealProof::v1_1(SectorSize::KIB2), &dir, 7).unwrap();
        eprintln!("sealed a 2 KiB sector in {:.2?}", start.elapsed());
        sealed
    })
}

/// A 2 KiB CC sector sealed with `StackedDrg2KiBV1_1`, then updated with
/// new data as SnapDeals does (once per binary).
pub fn updated_2kib() -> &'static UpdatedSector<SectorShape2KiB> {
    static UPDATED: OnceLock<UpdatedSector<SectorShape2KiB>> = OnceLock::new();
    UPDATED.get_or_init(|| {
        init();
        let exe = std::env::current_exe().unwrap();
        let name = exe.file_stem().unwrap().to_string_lossy().into_owned();
        let dir = root().join(format!("cc-2kib-{name}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let start = std::time::Instant::now();
        let sealed = testing::seal_cc(SealProof::v1_1(SectorSize::KIB2), &dir, 11).unwrap();
        let updated = testing::update(&sealed, &dir, 12).unwrap();
        eprintln!(
            "sealed a 2 KiB CC sector and updated it in {:.2?}",
            start.elapsed()
        );
        updated
    })
}

/// (r, s) per partition from a seed.
pub fn randomness(partitions: usize, seed: u64) -> Vec<(Scalar, Scalar)> {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    (0..partitions)
        .map(|_| (Scalar::random(&mut rng), Scalar::random(&mut rng)))
        .collect()
}

/// The 2 KiB PoSt proof of `kind` (WinningPoSt V1_0_0, WindowPoSt V1_1_0).
pub fn post_proof(kind: PostKind) -> PostProof {
    PostProof {
        kind,
        sector_size: SectorSize::KIB2,
        api_version: match kind {
            PostKind::Winning => ApiVersion::V1_0_0,
            PostKind::Window => ApiVersion::V1_1_0,
        },
    }
}

/// The vanilla proof of [`sealed_2kib`] for a `proof` PoSt with
/// `randomness`, as filecoin-proofs makes it.
pub fn post_vanilla(
    proof: PostProof,
    randomness: [u8; 32],
) -> Vec<FallbackPoStSectorProof<SectorShape2KiB>> {
    let sealed = sealed_2kib();
    let config = proof.config();
    let replica = PrivateReplicaInfo::<SectorShape2KiB>::new(
        sealed.replica.clone(),
        sealed.pre_commit.comm_r,
        sealed.cache.clone(),
    )
    .unwrap();
    let challenges = generate_fallback_sector_challenges::<SectorShape2KiB>(
        &config,
        &randomness,
        &[sealed.sector_id],
        sealed.prover_id,
    )
    .unwrap();
    vec![
        generate_single_vanilla_proof(
            &config,
            sealed.sector_id,
            &replica,
            &challenges[&sealed.sector_id],
        )
        .unwrap(),
    ]
}
