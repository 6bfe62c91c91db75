//! `cuzk daemon` end to end on the CPU backend: concurrent clients of mixed
//! priority get proofs that verify (and match bellperson byte for byte);
//! bad requests get errors while other work goes on; a client that goes
//! away frees its job; shutdown under load leaves no partial output; a soak
//! of 500 small proofs with cancellations returns memory to idle.
//!
//! The shared pieces are here (parameters made once, a daemon serving in
//! this process, request builders); the tests are in one file per area.

mod bad_requests;
mod c_core;
mod check_params;
mod clients;
mod command_line;
mod operations;
mod ownership;
mod parsing;
mod shutdown;
mod soak;
mod status_waiting;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use bellperson::groth16::{
    Parameters, generate_random_parameters, prepare_verifying_key, verify_proof,
};
use cuzk_cli::client::{self, Client};
use cuzk_cli::daemon::{self, Address, DaemonConfig, Running};
use cuzk_cli::proto::{self, params_spec::Source};
use cuzk_engine::{Auto, Backend, ByteSize, Engine, EngineConfig};
use cuzk_groth16_cuda::Bls12;
use cuzk_synth::Witness;
use cuzk_synth::circuits::CircuitSpec;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use tonic::Code;

use crate::common::status;

/// Parameters per circuit, made once per test binary (seeded).
pub(super) fn params(spec: &str) -> Arc<Parameters<Bls12>> {
    static CACHE: OnceLock<Mutex<BTreeMap<String, Arc<Parameters<Bls12>>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(p) = cache.lock().unwrap().get(spec) {
        return Arc::clone(p);
    }
    let s: CircuitSpec = spec.parse().unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(0x5EED);
    let p = Arc::new(generate_random_parameters(s.build(0), &mut rng).unwrap());
    cache
        .lock()
        .unwrap()
        .entry(spec.into())
        .or_insert(p)
        .clone()
}

/// `spec`'s parameters written under `dir`.
pub(super) fn params_file(dir: &Path, spec: &str) -> PathBuf {
    let path = dir.join(format!("{}.params", spec.replace(':', "-")));
    if !path.exists() {
        cuzk_groth16_cuda::write_params(&path, &params(spec)).unwrap();
    }
    path
}

pub(super) fn verify(spec: &str, seed: u64, bytes: &[u8]) {
    let p = params(spec);
    let proof = bellperson::groth16::Proof::<Bls12>::read(bytes).unwrap();
    let circuit: CircuitSpec = spec.parse().unwrap();
    let w = Witness::synthesize(circuit.build(seed)).unwrap();
    assert!(
        verify_proof(&prepare_verifying_key(&p.vk), &proof, w.public_inputs()).unwrap(),
        "{spec} seed {seed}: the proof does not verify"
    );
}

/// A daemon serving in this process on a socket in a temporary directory.
pub(super) struct TestDaemon {
    pub(super) dir: tempfile::TempDir,
    pub(super) running: Option<Running>,
    pub(super) address: Address,
}

impl TestDaemon {
    pub(super) async fn start(tweak: impl FnOnce(&mut DaemonConfig)) -> TestDaemon {
        let dir = tempfile::tempdir().unwrap();
        let params_dir = dir.path().join("params");
        std::fs::create_dir(&params_dir).unwrap();
        let mut config = DaemonConfig {
            listen: Address::Unix(dir.path().join("cuzk.sock")),
            metrics_listen: "127.0.0.1:0".into(),
            params_dirs: vec![params_dir],
            engine: EngineConfig {
                backend: Backend::Cpu,
                host_memory_budget: Auto::Value(ByteSize(2 << 30)),
                ..EngineConfig::default()
            },
            ..DaemonConfig::default()
        };
        tweak(&mut config);
        let engine = Engine::new(config.engine.clone()).unwrap();
        let running = daemon::start(config, engine).await.unwrap();
        let address = running.address.clone();
        TestDaemon {
            dir,
            running: Some(running),
            address,
        }
    }

    pub(super) fn params_dir(&self) -> PathBuf {
        self.dir.path().join("params")
    }

    pub(super) fn socket(&self) -> PathBuf {
        match &self.address {
            Address::Unix(p) => p.clone(),
            Address::Tcp(_) => unreachable!(),
        }
    }

    pub(super) async fn client(&self) -> Client {
        client::connect(&self.address).await.unwrap()
    }

    pub(super) async fn stop(mut self) {
        let running = self.running.take().unwrap();
        running.shutdown(false);
        tokio::time::timeout(Duration::from_secs(60), running.wait())
            .await
            .expect("the daemon stops")
            .unwrap();
        assert!(!self.socket().exists(), "the socket is removed");
    }
}

pub(super) fn by_path(p: &Path) -> Option<proto::ParamsSpec> {
    Some(proto::ParamsSpec {
        source: Some(Source::Path(p.to_string_lossy().into_owned())),
    })
}

pub(super) fn by_name(n: &str) -> Option<proto::ParamsSpec> {
    Some(proto::ParamsSpec {
        source: Some(Source::Name(n.into())),
    })
}

pub(super) fn request(
    circuit: &str,
    seeds: Vec<u64>,
    params: Option<proto::ParamsSpec>,
    priority: proto::Priority,
) -> proto::ProveRequest {
    proto::ProveRequest {
        circuit: circuit.into(),
        witness_seeds: seeds,
        params,
        priority: priority as i32,
        randomness: None,
        filecoin: None,
    }
}

pub(super) async fn prove(
    c: &mut Client,
    req: proto::ProveRequest,
) -> Result<Vec<Vec<u8>>, tonic::Status> {
    let stream = c.prove(req).await?.into_inner();
    match client::follow(stream, |_, _| {}).await {
        Ok(f) => Ok(f.proofs),
        Err(e) => Err(tonic::Status::unknown(format!("{e:#}"))),
    }
}

/// The outcome of a job's stream as a status code and message.
pub(super) async fn prove_code(c: &mut Client, req: proto::ProveRequest) -> (Code, String) {
    let mut stream = match c.prove(req).await {
        Ok(s) => s.into_inner(),
        Err(s) => return (s.code(), s.message().to_owned()),
    };
    loop {
        match stream.message().await {
            Ok(Some(proto::JobUpdate {
                update: Some(proto::job_update::Update::Proofs(_)),
                ..
            })) => return (Code::Ok, String::new()),
            Ok(Some(_)) => {}
            Ok(None) => return (Code::Unknown, "stream ended without outcome".into()),
            Err(s) => return (s.code(), s.message().to_owned()),
        }
    }
}

/// Waits until `cond` holds for the daemon's status (at most 60 s).
pub(super) async fn wait_status(
    c: &mut Client,
    what: &str,
    cond: impl Fn(&proto::StatusReply) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = status(c).await;
        if cond(&s) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {s:#?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub(super) use crate::common::{cuzk_command as cuzk, run_ok};
