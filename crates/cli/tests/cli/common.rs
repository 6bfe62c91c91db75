//! Shared by the cli's Filecoin tests: the test parameter and parent caches
//! (cuzk-filecoin's tests use the same parameter directory and seed, so
//! the files are made once), a daemon serving Filecoin requests on the CPU
//! backend, and sealed 2 KiB sectors.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::Duration;

use cuzk_cli::daemon::{self, Address, DaemonConfig, Running};
use cuzk_engine::{Auto, Backend, ByteSize, Engine, EngineConfig};
use cuzk_filecoin::testing::{self, SealedSector, UpdatedSector};
use cuzk_filecoin::{PostProof, SealProof, SectorSize, UpdateProof, porep, post, update};
use filecoin_proofs::{
    FallbackPoStSectorProof, PrivateReplicaInfo, SectorShape2KiB,
    generate_fallback_sector_challenges, generate_single_vanilla_proof,
};

/// Seed of the test parameters (cuzk-filecoin's tests use the same one).
pub const PARAM_SEED: u64 = 0x5EED_F11E;

/// Points filecoin-proofs' caches at test directories (once, before any
/// test reads them) and returns the parameter directory,
/// `target/tmp/cuzk-filecoin/params-seed-5eedf11e`.
pub fn init() -> &'static Path {
    static PARAMS: OnceLock<PathBuf> = OnceLock::new();
    PARAMS.get_or_init(|| {
        let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
        let params = tmp
            .join("cuzk-filecoin")
            .join(format!("params-seed-{PARAM_SEED:x}"));
        let parents = tmp.join("cuzk-cli").join("parents");
        std::fs::create_dir_all(&params).unwrap();
        std::fs::create_dir_all(&parents).unwrap();
        // SAFETY: set once, before any test of this binary calls into
        // filecoin-proofs (every such test calls `init` first and waits on
        // this OnceLock); nothing else in these tests touches the
        // environment.
        unsafe {
            std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", &params);
            std::env::set_var("FIL_PROOFS_PARENT_CACHE", &parents);
        }
        params
    })
}

/// The engine of the test daemons: the GPU backend where the machine has
/// a usable GPU (and must, with CUZK_REQUIRE_GPU=1), else the CPU; a 6 GiB
/// budget.
pub fn engine_config() -> EngineConfig {
    EngineConfig {
        backend: Backend::Auto,
        host_memory_budget: Auto::Value(ByteSize(6 << 30)),
        ..EngineConfig::default()
    }
}

/// The backend the test daemons must report: `cuda` where a GPU is usable.
pub fn expected_backend() -> &'static str {
    if cuzk_gpu_sched::testing::gpu_expected("cli Filecoin daemon tests") {
        "cuda"
    } else {
        "cpu"
    }
}

/// The configuration of a daemon on `dir/cuzk.sock`, proving Filecoin
/// requests with the parameters in `params`.
pub fn daemon_config(dir: &Path, params: &Path) -> DaemonConfig {
    DaemonConfig {
        listen: Address::Unix(dir.join("cuzk.sock")),
        metrics_listen: "127.0.0.1:0".into(),
        filecoin_params_dir: Some(params.to_owned()),
        engine: engine_config(),
        ..DaemonConfig::default()
    }
}

/// A daemon in this process serving as `config` says.
pub async fn start_daemon_with(config: DaemonConfig) -> Running {
    let engine = Engine::new(config.engine.clone()).unwrap();
    daemon::start(config, engine).await.unwrap()
}

/// A daemon in this process as [`daemon_config`] makes it.
pub async fn start_daemon(dir: &Path, params: &Path) -> Running {
    start_daemon_with(daemon_config(dir, params)).await
}

pub async fn stop_daemon(running: Running) {
    running.shutdown(false);
    tokio::time::timeout(Duration::from_secs(120), running.wait())
        .await
        .expect("the daemon stops")
        .unwrap();
}

/// A 2 KiB sector sealed under `work/sector`, and a CC one sealed and then
/// updated with data (SnapDeals) under `work/cc`, from `seed` on; with the
/// test parameters of PoRep, `window` and SnapDeals made (or found) in
/// `params`.
pub async fn sectors(
    work: &Path,
    params: &Path,
    seed: u64,
    window: PostProof,
) -> (
    SealedSector<SectorShape2KiB>,
    UpdatedSector<SectorShape2KiB>,
) {
    let (work, params) = (work.to_owned(), params.to_owned());
    tokio::task::spawn_blocking(move || {
        let proof = SealProof::v1_1(SectorSize::KIB2);
        let dir = work.join("sector");
        std::fs::create_dir_all(&dir).unwrap();
        let sealed = testing::seal::<SectorShape2KiB>(proof, &dir, seed).unwrap();
        let dir = work.join("cc");
        std::fs::create_dir_all(&dir).unwrap();
        let cc = testing::seal_cc::<SectorShape2KiB>(proof, &dir, seed + 1).unwrap();
        let updated = testing::update(&cc, &dir, seed + 2).unwrap();
        porep::generate_test_params(proof, &params, PARAM_SEED).unwrap();
        post::generate_test_params(window, &params, PARAM_SEED).unwrap();
        update::generate_test_params(
            UpdateProof::new(SectorSize::KIB2).unwrap(),
            &params,
            PARAM_SEED,
        )
        .unwrap();
        (sealed, updated)
    })
    .await
    .unwrap()
}

/// The vanilla proof of `sealed` for a `window` PoSt with `randomness`,
/// for prover `prover_id` (one sector, as filecoin-proofs makes it).
pub fn window_vanilla(
    sealed: &SealedSector<SectorShape2KiB>,
    window: PostProof,
    randomness: [u8; 32],
    prover_id: [u8; 32],
) -> Vec<FallbackPoStSectorProof<SectorShape2KiB>> {
    let config = window.config();
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
        prover_id,
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

/// filecoin-proofs' `verify_seal` of C2 bytes for `sealed`.
pub fn verify_seal(sealed: &SealedSector<SectorShape2KiB>, bytes: &[u8]) -> bool {
    sealed.verify_seal(bytes).unwrap()
}

/// The daemon's status.
pub async fn status(c: &mut cuzk_cli::client::Client) -> cuzk_cli::proto::StatusReply {
    c.status(cuzk_cli::proto::StatusRequest {})
        .await
        .unwrap()
        .into_inner()
}

/// No job, nothing in flight, no working set, no pinned lease.
pub fn idle(s: &cuzk_cli::proto::StatusReply) -> bool {
    let m = s.memory.unwrap();
    let p = s.pinned.unwrap();
    // Ended jobs may keep their outcome for later awaits (result_ttl_s).
    s.jobs.iter().all(|j| j.state == "ended")
        && s.dispatch_in_flight == 0
        && m.working_set_bytes == 0
        && p.bytes_leased == 0
        && p.leases_outstanding == 0
        && s.queues
            .iter()
            .all(|q| q.waiting_jobs == 0 && q.admitted_jobs == 0 && q.queued_partitions == 0)
}

/// The `cuzk` binary, as a command to run.
pub fn cuzk_command() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cuzk"))
}

/// Runs `cmd`, asserting it succeeds; its stdout.
pub fn run_ok(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// `cuzk ARGS`, run to its end.
pub fn cuzk_output(args: &[&str]) -> Output {
    cuzk_command().args(args).output().expect("run cuzk")
}

/// `cuzk ARGS`, asserting it succeeds; its stdout.
pub fn cuzk_ok(args: &[&str]) -> String {
    run_ok(cuzk_command().args(args))
}
