//! `cuzk daemon` end to end on the CPU backend: concurrent clients of mixed
//! priority get proofs that verify (and match bellperson byte for byte);
//! bad requests get errors while other work goes on; a client that goes
//! away frees its job; shutdown under load leaves no partial output; a soak
//! of 500 small proofs with cancellations returns memory to idle.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use bellperson::groth16::{
    Parameters, generate_random_parameters, prepare_verifying_key, verify_proof,
};
use blstrs::Scalar;
use cuzk_cli::client::{self, Client};
use cuzk_cli::daemon::{self, Address, DaemonConfig, Running};
use cuzk_cli::proto::{self, params_spec::Source, prove_request::Randomness};
use cuzk_engine::{Auto, Backend, ByteSize, Engine, EngineConfig};
use cuzk_groth16_cuda::Bls12;
use cuzk_synth::Witness;
use cuzk_synth::circuits::CircuitSpec;
use ff::{Field, PrimeField};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use tonic::Code;

use crate::common::{idle, status};

// ---------------------------------------------------------------- helpers

/// Parameters per circuit, made once per test binary (seeded).
fn params(spec: &str) -> Arc<Parameters<Bls12>> {
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
fn params_file(dir: &Path, spec: &str) -> PathBuf {
    let path = dir.join(format!("{}.params", spec.replace(':', "-")));
    if !path.exists() {
        cuzk_groth16_cuda::write_params(&path, &params(spec)).unwrap();
    }
    path
}

fn verify(spec: &str, seed: u64, bytes: &[u8]) {
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
struct TestDaemon {
    dir: tempfile::TempDir,
    running: Option<Running>,
    address: Address,
}

impl TestDaemon {
    async fn start(tweak: impl FnOnce(&mut DaemonConfig)) -> TestDaemon {
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

    fn params_dir(&self) -> PathBuf {
        self.dir.path().join("params")
    }

    fn socket(&self) -> PathBuf {
        match &self.address {
            Address::Unix(p) => p.clone(),
            Address::Tcp(_) => unreachable!(),
        }
    }

    async fn client(&self) -> Client {
        client::connect(&self.address).await.unwrap()
    }

    async fn stop(mut self) {
        let running = self.running.take().unwrap();
        running.shutdown(false);
        tokio::time::timeout(Duration::from_secs(60), running.wait())
            .await
            .expect("the daemon stops")
            .unwrap();
        assert!(!self.socket().exists(), "the socket is removed");
    }
}

fn by_path(p: &Path) -> Option<proto::ParamsSpec> {
    Some(proto::ParamsSpec {
        source: Some(Source::Path(p.to_string_lossy().into_owned())),
    })
}

fn by_name(n: &str) -> Option<proto::ParamsSpec> {
    Some(proto::ParamsSpec {
        source: Some(Source::Name(n.into())),
    })
}

fn request(
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

async fn prove(c: &mut Client, req: proto::ProveRequest) -> Result<Vec<Vec<u8>>, tonic::Status> {
    let stream = c.prove(req).await?.into_inner();
    match client::follow(stream, |_, _| {}).await {
        Ok(f) => Ok(f.proofs),
        Err(e) => Err(tonic::Status::unknown(format!("{e:#}"))),
    }
}

/// The outcome of a job's stream as a status code and message.
async fn prove_code(c: &mut Client, req: proto::ProveRequest) -> (Code, String) {
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
async fn wait_status(c: &mut Client, what: &str, cond: impl Fn(&proto::StatusReply) -> bool) {
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

fn scalar_bytes(s: Scalar) -> Vec<u8> {
    s.to_repr().as_ref().to_vec()
}

// ---------------------------------------------------------------- tests

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_clients_of_mixed_priority_get_correct_proofs() {
    // A named set outside params_dirs: the operator configured it.
    let elsewhere = tempfile::tempdir().unwrap();
    let named = params_file(elsewhere.path(), "porep:6");
    let d = TestDaemon::start(|c| {
        c.param_sets.insert("porep6".into(), named.clone());
    })
    .await;
    let chain6 = params_file(&d.params_dir(), "mul-chain:6");

    let mut tasks = Vec::new();
    for client in 0..4u64 {
        let mut c = d.client().await;
        let chain6 = chain6.clone();
        tasks.push(tokio::spawn(async move {
            let mut rng = ChaCha20Rng::seed_from_u64(client);
            let mut made = Vec::new();
            for job in 0..3u64 {
                let priority = [
                    proto::Priority::Low,
                    proto::Priority::Normal,
                    proto::Priority::High,
                    proto::Priority::Critical,
                ][rng.gen_range(0..4)];
                let (spec, params) = if (client + job) % 2 == 0 {
                    ("mul-chain:6", by_path(&chain6))
                } else {
                    ("porep:6", by_name("porep6"))
                };
                let n = rng.gen_range(1..=3u64);
                let seeds: Vec<u64> = (0..n).map(|i| 100 * client + 10 * job + i).collect();
                let mut req = request(spec, seeds.clone(), params, priority);
                req.randomness = Some(Randomness::RsSeed(client * 7 + job));
                let proofs = if job == 1 {
                    // Submit, then await on the same connection.
                    let id = c.submit(req).await.unwrap().into_inner().job_id;
                    let s = c
                        .await_job(proto::AwaitRequest { job_id: id })
                        .await
                        .unwrap()
                        .into_inner();
                    client::follow(s, |_, _| {}).await.unwrap().proofs
                } else {
                    prove(&mut c, req).await.unwrap()
                };
                assert_eq!(proofs.len(), seeds.len());
                made.push((spec, seeds, proofs));
            }
            made
        }));
    }
    let mut total = 0;
    for t in tasks {
        for (spec, seeds, proofs) in t.await.unwrap() {
            for (seed, bytes) in seeds.iter().zip(&proofs) {
                verify(spec, *seed, bytes);
                total += 1;
            }
        }
    }
    assert!(total >= 12);

    // Explicit (r, s): byte-identical to bellperson's create_proof.
    let mut c = d.client().await;
    let mut rng = ChaCha20Rng::seed_from_u64(9);
    let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
    let mut req = request(
        "mul-chain:6",
        vec![42],
        by_path(&chain6),
        proto::Priority::Normal,
    );
    req.randomness = Some(Randomness::Explicit(proto::ExplicitRandomness {
        partitions: vec![proto::Randomness {
            r: scalar_bytes(r),
            s: scalar_bytes(s),
        }],
    }));
    let ours = prove(&mut c, req).await.unwrap();
    let circuit: CircuitSpec = "mul-chain:6".parse().unwrap();
    let theirs =
        bellperson::groth16::create_proof(circuit.build(42), &*params("mul-chain:6"), r, s)
            .unwrap();
    let mut want = Vec::new();
    theirs.write(&mut want).unwrap();
    assert_eq!(ours[0], want, "byte-identical to bellperson");

    // Status names the resident sets; metrics count what was done.
    let st = status(&mut c).await;
    assert_eq!(st.backend, "cpu");
    assert_eq!(st.queues.len(), 4);
    assert_eq!(st.devices.len(), 1);
    assert!(
        st.params
            .iter()
            .any(|p| p.id.ends_with("mul-chain-6.params")),
        "{st:?}"
    );
    assert!(st.cached_shapes.contains(&"porep:6".to_owned()));
    let text = c
        .metrics(proto::MetricsRequest {})
        .await
        .unwrap()
        .into_inner()
        .text;
    for name in [
        "cuzk_proofs_done_total{kind=\"mul-chain\"",
        "cuzk_jobs_total{",
        "cuzk_stage_duration_seconds_bucket{stage=\"kernel_region\"",
        "cuzk_device_busy_seconds_total{device=\"0\"}",
        "cuzk_device_busy_fraction{device=\"0\"}",
        "cuzk_memory_bytes{kind=\"working_set\"} 0",
        "cuzk_pinned_bytes{state=\"leased\"} 0",
        "cuzk_memory_budget_bytes 2147483648",
    ] {
        assert!(text.contains(name), "metrics lack {name}:\n{text}");
    }
    // The same text over HTTP on the metrics port.
    let addr = d.running.as_ref().unwrap().metrics_address.unwrap();
    let http = tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    })
    .await
    .unwrap();
    assert!(http.starts_with("HTTP/1.1 200"), "{http}");
    assert!(http.contains("cuzk_proofs_done_total"), "{http}");

    // Preload / evict through the API.
    let evicted = c
        .evict(proto::ParamsRequest {
            params: by_name("porep6"),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(evicted.was_resident);
    let loaded = c
        .preload(proto::ParamsRequest {
            params: by_name("porep6"),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!loaded.was_resident);
    // The timeline of the last run.
    let t = c
        .timeline(proto::TimelineRequest { all: true })
        .await
        .unwrap()
        .into_inner();
    let trace: serde_json::Value = serde_json::from_str(&t.chrome_trace_json).unwrap();
    assert!(!trace["traceEvents"].as_array().unwrap().is_empty());
    d.stop().await;
}

/// Sends raw bytes as a `Submit` request: a message that is not protobuf.
async fn raw_submit(path: &Path, body: Vec<u8>) -> tonic::Status {
    use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};

    #[derive(Debug, Default, Clone)]
    struct Raw;
    impl Encoder for Raw {
        type Item = Vec<u8>;
        type Error = tonic::Status;
        fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
            bytes::BufMut::put_slice(dst, &item);
            Ok(())
        }
    }
    impl Decoder for Raw {
        type Item = Vec<u8>;
        type Error = tonic::Status;
        fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, tonic::Status> {
            let mut v = vec![0; bytes::Buf::remaining(src)];
            bytes::Buf::copy_to_slice(src, &mut v);
            Ok(Some(v))
        }
    }
    impl Codec for Raw {
        type Encode = Vec<u8>;
        type Decode = Vec<u8>;
        type Encoder = Raw;
        type Decoder = Raw;
        fn encoder(&mut self) -> Raw {
            Raw
        }
        fn decoder(&mut self) -> Raw {
            Raw
        }
    }
    let channel = client::channel(&Address::Unix(path.to_owned()))
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    let path = tonic::codegen::http::uri::PathAndQuery::from_static("/cuzk.v1.Cuzk/Submit");
    grpc.unary(tonic::Request::new(body), path, Raw)
        .await
        .unwrap_err()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_requests_get_errors_while_other_work_goes_on() {
    let d = TestDaemon::start(|c| {
        c.max_request_bytes = ByteSize(64 << 10);
        c.max_partitions = 16;
        c.max_constraints = 1 << 12;
    })
    .await;
    let chain8 = params_file(&d.params_dir(), "mul-chain:8");
    let chain7 = params_file(&d.params_dir(), "mul-chain:7");
    let outside_dir = tempfile::tempdir().unwrap();
    let outside = params_file(outside_dir.path(), "mul-chain:8");
    std::os::unix::fs::symlink(&outside, d.params_dir().join("link.params")).unwrap();

    // A job that keeps running while the bad requests come in.
    let mut c = d.client().await;
    let seeds: Vec<u64> = (1..=6).collect();
    let long = {
        let mut c = d.client().await;
        let req = request(
            "mul-chain:8",
            seeds.clone(),
            by_path(&chain8),
            proto::Priority::Low,
        );
        tokio::spawn(async move { prove(&mut c, req).await })
    };
    wait_status(&mut c, "the long job to start", |s| !s.jobs.is_empty()).await;

    let n = proto::Priority::Normal;
    let ok = by_path(&chain8);
    let cases: Vec<(proto::ProveRequest, Code, &str)> = vec![
        (
            request("nope:3", vec![1], ok.clone(), n),
            Code::InvalidArgument,
            "nope",
        ),
        (
            request("mul-chain:99", vec![1], ok.clone(), n),
            Code::InvalidArgument,
            "out of range",
        ),
        (
            request("", vec![1], ok.clone(), n),
            Code::InvalidArgument,
            "circuit",
        ),
        (
            request("mul-chain:8", vec![], ok.clone(), n),
            Code::InvalidArgument,
            "no partitions",
        ),
        (
            request("mul-chain:8", vec![1], None, n),
            Code::InvalidArgument,
            "no parameter set",
        ),
        (
            proto::ProveRequest {
                priority: 17,
                ..request("mul-chain:8", vec![1], ok.clone(), n)
            },
            Code::InvalidArgument,
            "priority",
        ),
        (
            proto::ProveRequest {
                randomness: Some(Randomness::Explicit(proto::ExplicitRandomness {
                    partitions: vec![proto::Randomness {
                        r: vec![0xff; 32],
                        s: vec![1; 32],
                    }],
                })),
                ..request("mul-chain:8", vec![1], ok.clone(), n)
            },
            Code::InvalidArgument,
            "canonical",
        ),
        (
            proto::ProveRequest {
                randomness: Some(Randomness::Explicit(proto::ExplicitRandomness {
                    partitions: vec![],
                })),
                ..request("mul-chain:8", vec![1], ok.clone(), n)
            },
            Code::InvalidArgument,
            "(r, s) pairs",
        ),
        (
            request("mul-chain:8", (0..17).collect(), ok.clone(), n),
            Code::ResourceExhausted,
            "max_partitions",
        ),
        (
            request("mul-chain:13", vec![1], ok.clone(), n),
            Code::ResourceExhausted,
            "max_constraints",
        ),
        (
            request("mul-chain:8", vec![1], by_name("nope"), n),
            Code::NotFound,
            "unknown parameter set",
        ),
        (
            request("mul-chain:8", vec![1], by_path(&outside), n),
            Code::PermissionDenied,
            "outside",
        ),
        (
            request(
                "mul-chain:8",
                vec![1],
                by_path(&d.params_dir().join("../x.params")),
                n,
            ),
            Code::PermissionDenied,
            "outside",
        ),
        (
            request("mul-chain:8", vec![1], by_path(Path::new("link.params")), n),
            Code::PermissionDenied,
            "outside",
        ),
        (
            request(
                "mul-chain:8",
                vec![1],
                by_path(&d.params_dir().join("missing.params")),
                n,
            ),
            Code::NotFound,
            "missing",
        ),
        // Parameters of another circuit: refused by the engine's check.
        (
            request("mul-chain:8", vec![1], by_path(&chain7), n),
            Code::FailedPrecondition,
            "parameters",
        ),
    ];
    for (req, code, text) in cases {
        let (got, message) = prove_code(&mut c, req.clone()).await;
        assert_eq!(got, code, "{req:?}: {message}");
        assert!(
            message.contains(text),
            "{req:?}: `{message}` lacks `{text}`"
        );
    }
    // An oversized message (over 64 KiB of seeds).
    let huge = request("mul-chain:8", (0..20_000).collect(), ok.clone(), n);
    let (got, message) = prove_code(&mut c, huge).await;
    assert!(
        matches!(got, Code::OutOfRange | Code::ResourceExhausted),
        "{got:?}: {message}"
    );
    // Bytes that are not a protobuf message.
    let st = raw_submit(&d.socket(), vec![0xff; 40]).await;
    assert_ne!(st.code(), Code::Ok);
    // Unknown jobs.
    let e = c
        .await_job(proto::AwaitRequest { job_id: 999_999 })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert!(
        !c.cancel(proto::CancelRequest { job_id: 999_999 })
            .await
            .unwrap()
            .into_inner()
            .found
    );

    // The long job was served throughout, and a new good one still is.
    let proofs = long.await.unwrap().unwrap();
    for (seed, p) in seeds.iter().zip(&proofs) {
        verify("mul-chain:8", *seed, p);
    }
    let again = prove(&mut c, request("mul-chain:8", vec![7], ok, n))
        .await
        .unwrap();
    verify("mul-chain:8", 7, &again[0]);
    let text = c
        .metrics(proto::MetricsRequest {})
        .await
        .unwrap()
        .into_inner()
        .text;
    assert!(
        text.contains("cuzk_requests_rejected_total{code=\"InvalidArgument\"}"),
        "{text}"
    );
    wait_status(&mut c, "idle", idle).await;
    d.stop().await;
}

fn cuzk() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cuzk"))
}

fn kill(child: &Child, signal: &str) {
    let ok = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {signal} {}", child.id());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_client_that_goes_away_frees_its_job() {
    let d = TestDaemon::start(|_| {}).await;
    let chain10 = params_file(&d.params_dir(), "mul-chain:10");
    let mut c = d.client().await;
    let idle_memory = {
        // Warm up: PCE and parameters resident, the idle figures after it.
        prove(
            &mut c,
            request(
                "mul-chain:10",
                vec![1],
                by_path(&chain10),
                proto::Priority::Normal,
            ),
        )
        .await
        .unwrap();
        wait_status(&mut c, "idle", idle).await;
        status(&mut c).await.memory.unwrap()
    };

    // 1. A task of this process drops its stream (and connection).
    let task = {
        let mut other = d.client().await;
        let req = request(
            "mul-chain:10",
            (1..=40).collect(),
            by_path(&chain10),
            proto::Priority::High,
        );
        tokio::spawn(async move { prove(&mut other, req).await })
    };
    wait_status(&mut c, "the job to prove", |s| {
        s.jobs.iter().any(|j| j.proved >= 1)
    })
    .await;
    task.abort();
    wait_status(&mut c, "the job to go", idle).await;

    // 2. A `cuzk prove --daemon` process killed mid-job.
    let out = d.dir.path().join("killed.proof");
    let mut child = cuzk()
        .args([
            "prove",
            "--circuit",
            "mul-chain:10",
            "--partitions",
            "40",
            "--daemon",
        ])
        .arg(d.socket())
        .arg("--params")
        .arg(&chain10)
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_status(&mut c, "the process's job to prove", |s| {
        s.jobs.iter().any(|j| j.proved >= 1)
    })
    .await;
    kill(&child, "-KILL");
    child.wait().unwrap();
    wait_status(&mut c, "the killed client's job to go", idle).await;
    assert!(!out.exists());
    let after = status(&mut c).await.memory.unwrap();
    assert_eq!(after.working_set_bytes, 0);
    assert_eq!(
        (after.pce_bytes, after.params_bytes),
        (idle_memory.pce_bytes, idle_memory.params_bytes)
    );
    let text = c
        .metrics(proto::MetricsRequest {})
        .await
        .unwrap()
        .into_inner()
        .text;
    assert!(
        text.contains(
            "cuzk_jobs_total{kind=\"mul-chain\",outcome=\"cancelled\",priority=\"high\"} 1"
        ),
        "{text}"
    );
    d.stop().await;
}

/// Waits for a process to exit (at most `limit`).
fn wait_exit(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("process {} did not exit within {limit:?}", child.id());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigterm_under_load_finishes_running_jobs_and_leaves_no_partial_output() {
    let dir = tempfile::tempdir().unwrap();
    let params_dir = dir.path().join("params");
    let out_dir = dir.path().join("out");
    std::fs::create_dir_all(&params_dir).unwrap();
    std::fs::create_dir_all(&out_dir).unwrap();
    let chain8 = params_file(&params_dir, "mul-chain:8");
    let socket = dir.path().join("d.sock");
    let mut daemon = cuzk()
        .args([
            "daemon",
            "--metrics-listen",
            "off",
            "--engine",
            "backend=cpu",
        ])
        .arg("--listen")
        .arg(&socket)
        .arg("--params-dir")
        .arg(&params_dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let address = Address::Unix(socket.clone());
    let mut c = {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(c) = client::connect(&address).await {
                break c;
            }
            assert!(Instant::now() < deadline, "the daemon did not come up");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let clients: Vec<(PathBuf, Child)> = (0..6)
        .map(|i| {
            let out = out_dir.join(format!("{i}.proof"));
            let child = cuzk()
                .args([
                    "prove",
                    "--circuit",
                    "mul-chain:8",
                    "--partitions",
                    "4",
                    "--json",
                ])
                .args(["--witness-seed", &(10 * i + 1).to_string(), "--daemon"])
                .arg(&socket)
                .arg("--params")
                .arg(&chain8)
                .arg("--out")
                .arg(&out)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            (out, child)
        })
        .collect();
    wait_status(&mut c, "jobs in flight", |s| {
        s.jobs.iter().any(|j| j.proved >= 1)
    })
    .await;
    kill(&daemon, "-TERM");
    // Once the daemon says it is draining, new requests are refused (unless
    // it finished draining first and is gone).
    let draining = loop {
        match c.status(proto::StatusRequest {}).await {
            Ok(s) if s.get_ref().shutting_down => break true,
            Ok(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            Err(_) => break false,
        }
    };
    if draining {
        let late = request(
            "mul-chain:8",
            vec![1],
            by_path(&chain8),
            proto::Priority::Normal,
        );
        let (code, message) = prove_code(&mut c, late).await;
        assert_ne!(code, Code::Ok, "{message}");
    }
    drop(c);
    let status = wait_exit(&mut daemon, Duration::from_secs(120));
    assert!(status.success(), "daemon exit: {status:?}");
    assert!(!socket.exists(), "the socket is removed");
    let mut delivered = 0;
    for (i, (out, mut child)) in clients.into_iter().enumerate() {
        let status = wait_exit(&mut child, Duration::from_secs(60));
        let mut stderr = String::new();
        std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
        if status.success() {
            let bytes = std::fs::read(&out).unwrap();
            assert_eq!(bytes.len(), 4 * 192, "{}", out.display());
            for (k, proof) in bytes.chunks(192).enumerate() {
                verify("mul-chain:8", 10 * i as u64 + 1 + k as u64, proof);
            }
            delivered += 1;
        } else {
            assert!(!out.exists(), "a failed client left {}", out.display());
            assert!(stderr.contains("error:"), "{stderr}");
            assert!(!stderr.contains("panicked"), "{stderr}");
        }
    }
    assert!(delivered >= 1, "jobs in flight at SIGTERM finish");
    let left: Vec<_> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".proof"))
        .collect();
    assert!(left.is_empty(), "partial files left: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn shutdown_call_cancelling_running_jobs_leaves_nothing_running() {
    let d = TestDaemon::start(|_| {}).await;
    let chain10 = params_file(&d.params_dir(), "mul-chain:10");
    let mut c = d.client().await;
    let jobs: Vec<_> = (0..3)
        .map(|i| {
            let address = d.address.clone();
            let chain10 = chain10.clone();
            tokio::spawn(async move {
                let mut c = client::connect(&address).await.unwrap();
                let req = request(
                    "mul-chain:10",
                    (0..30).map(|k| 100 * i + k).collect(),
                    by_path(&chain10),
                    proto::Priority::Normal,
                );
                prove_code(&mut c, req).await
            })
        })
        .collect();
    wait_status(&mut c, "jobs in flight", |s| {
        s.jobs.iter().any(|j| j.proved >= 1)
    })
    .await;
    let reply = c
        .shutdown(proto::ShutdownRequest {
            cancel_running: true,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(reply.running_jobs >= 1);
    for j in jobs {
        let (code, message) = j.await.unwrap();
        assert!(
            matches!(code, Code::Cancelled | Code::Unavailable),
            "{code:?}: {message}"
        );
    }
    let mut d = d;
    let running = d.running.take().unwrap();
    let engine = Arc::clone(&running.daemon.engine);
    tokio::time::timeout(Duration::from_secs(60), running.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(!d.socket().exists());
    let s = engine.status();
    assert!(
        s.jobs
            .iter()
            .all(|j| j.phase == cuzk_engine::JobPhase::Ended),
        "{s:?}"
    );
    assert_eq!(s.memory.working_set_bytes, 0);
    assert_eq!(s.pinned.bytes_leased, 0);
}

/// 500 small proofs from several clients with random priorities; about one
/// job in six is cancelled (through `Cancel` or by dropping its stream).
/// Every delivered proof verifies, and the memory budget and pinned pool
/// return to their idle figures.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn soak_500_small_proofs_with_cancellations() {
    let total: u64 = std::env::var("CUZK_SOAK_PROOFS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500);
    let d = TestDaemon::start(|c| {
        c.engine.host_memory_budget = Auto::Value(ByteSize(64 << 20));
    })
    .await;
    let spec = "mul-chain:4";
    let path = params_file(&d.params_dir(), spec);
    let mut c = d.client().await;
    prove(
        &mut c,
        request(spec, vec![0], by_path(&path), proto::Priority::Normal),
    )
    .await
    .unwrap();
    wait_status(&mut c, "idle after warm-up", idle).await;
    let baseline = status(&mut c).await;

    let next = Arc::new(std::sync::atomic::AtomicU64::new(1));
    let clients = 6;
    let mut tasks = Vec::new();
    for client in 0..clients {
        let (address, path, next) = (d.address.clone(), path.clone(), Arc::clone(&next));
        tasks.push(tokio::spawn(async move {
            let mut c = client::connect(&address).await.unwrap();
            let mut rng = ChaCha20Rng::seed_from_u64(1000 + client);
            let (mut done, mut cancelled, mut proofs) = (0u64, 0u64, Vec::new());
            loop {
                let n = rng.gen_range(1..=2u64);
                let first = next.fetch_add(n, std::sync::atomic::Ordering::SeqCst);
                if first > total {
                    break;
                }
                let seeds: Vec<u64> = (first..first + n).filter(|s| *s <= total).collect();
                let priority = [
                    proto::Priority::Low,
                    proto::Priority::Normal,
                    proto::Priority::High,
                    proto::Priority::Critical,
                ][rng.gen_range(0..4)];
                let req = request(spec, seeds.clone(), by_path(&path), priority);
                match rng.gen_range(0..12) {
                    // Cancel through the API, right away or a little later.
                    0 => {
                        let id = c.submit(req).await.unwrap().into_inner().job_id;
                        tokio::time::sleep(Duration::from_millis(rng.gen_range(0..30))).await;
                        c.cancel(proto::CancelRequest { job_id: id }).await.unwrap();
                        let s = c.await_job(proto::AwaitRequest { job_id: id }).await;
                        match s {
                            Ok(s) => match client::follow(s.into_inner(), |_, _| {}).await {
                                Ok(f) => {
                                    proofs.push((seeds, f.proofs));
                                    done += 1;
                                }
                                Err(e) => {
                                    assert!(format!("{e:#}").contains("cancelled"), "{e:#}");
                                    cancelled += 1;
                                }
                            },
                            Err(e) => panic!("await after cancel: {e:?}"),
                        }
                    }
                    // Drop the stream after a moment.
                    1 => {
                        let mut s = c.prove(req).await.unwrap().into_inner();
                        let wait = Duration::from_millis(rng.gen_range(0..30));
                        match tokio::time::timeout(wait, async {
                            loop {
                                match s.message().await {
                                    Ok(Some(proto::JobUpdate {
                                        update: Some(proto::job_update::Update::Proofs(p)),
                                        ..
                                    })) => return Some(p.proofs),
                                    Ok(Some(_)) => {}
                                    other => panic!("{other:?}"),
                                }
                            }
                        })
                        .await
                        {
                            Ok(Some(p)) => {
                                proofs.push((seeds, p));
                                done += 1;
                            }
                            _ => cancelled += 1,
                        }
                    }
                    _ => {
                        let p = prove(&mut c, req).await.unwrap();
                        proofs.push((seeds, p));
                        done += 1;
                    }
                }
            }
            (done, cancelled, proofs)
        }));
    }
    let (mut done, mut cancelled, mut verified) = (0, 0, 0);
    for t in tasks {
        let (d_, c_, proofs) = t.await.unwrap();
        done += d_;
        cancelled += c_;
        for (seeds, ps) in proofs {
            assert_eq!(seeds.len(), ps.len());
            for (seed, p) in seeds.iter().zip(&ps) {
                verify(spec, *seed, p);
                verified += 1;
            }
        }
    }
    assert!(
        cancelled > 0 && done > 0,
        "done {done}, cancelled {cancelled}"
    );
    assert!(
        verified >= total / 2,
        "{verified} of {total} proofs delivered"
    );
    wait_status(&mut c, "idle after the soak", idle).await;
    let after = status(&mut c).await;
    let (m0, m1) = (baseline.memory.unwrap(), after.memory.unwrap());
    assert_eq!(m1.working_set_bytes, 0);
    assert_eq!(
        (m1.pce_bytes, m1.params_bytes),
        (m0.pce_bytes, m0.params_bytes)
    );
    assert_eq!(
        m1.used_bytes,
        m1.pce_bytes + m1.params_bytes + m1.pinned_idle_bytes
    );
    let p = after.pinned.unwrap();
    assert_eq!((p.bytes_leased, p.leases_outstanding), (0, 0));
    assert_eq!(p.bytes_held, p.bytes_idle);
    eprintln!(
        "soak: {verified} proofs verified, {done} jobs done, {cancelled} cancelled; pinned {} B \
         idle",
        p.bytes_idle
    );
    d.stop().await;
}

fn run_ok(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The command line around the daemon: `status`, `timeline`, `params`,
/// `bench` (both ways), `devices`, `prove --timeline --json`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn command_line_status_timeline_bench_devices() {
    let d = TestDaemon::start(|_| {}).await;
    let chain5 = params_file(&d.params_dir(), "mul-chain:5");
    let sock = d.socket();
    let dir = d.dir.path().to_owned();
    let chain = chain5.clone();
    tokio::task::spawn_blocking(move || {
        let bench: serde_json::Value = serde_json::from_str(&run_ok(
            cuzk()
                .args([
                    "bench",
                    "--circuit",
                    "mul-chain:5",
                    "--jobs",
                    "4",
                    "--partitions",
                    "2",
                ])
                .args(["--verify", "--json", "--daemon"])
                .arg(&sock)
                .arg("--params")
                .arg(&chain)
                .arg("--timeline")
                .arg(dir.join("bench.json")),
        ))
        .unwrap();
        assert_eq!(bench["mode"], "daemon");
        assert_eq!(bench["proofs"], 8);
        assert_eq!(bench["verified"], true);
        assert_eq!(bench["timeline"]["proofs"], 8);
        let trace: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("bench.json")).unwrap()).unwrap();
        assert!(trace["traceEvents"].as_array().unwrap().len() > 8);

        let status: serde_json::Value = serde_json::from_str(&run_ok(
            cuzk().args(["status", "--json", "--daemon"]).arg(&sock),
        ))
        .unwrap();
        assert_eq!(status["backend"], "cpu");
        assert_eq!(status["queues"][0]["priority"], "critical");
        assert_eq!(status["memory"]["working_set_bytes"], 0);
        let text = run_ok(cuzk().args(["status", "--daemon"]).arg(&sock));
        assert!(text.contains("resident parameter sets:"), "{text}");

        let out = run_ok(
            cuzk()
                .args(["timeline", "--daemon"])
                .arg(&sock)
                .arg("--out")
                .arg(dir.join("last.json")),
        );
        assert!(out.contains("8 proofs"), "{out}");
        assert!(dir.join("last.json").exists());

        let out = run_ok(
            cuzk()
                .args(["params", "evict", "--daemon"])
                .arg(&sock)
                .arg("--params")
                .arg(&chain),
        );
        assert!(out.contains("evicted"), "{out}");

        // In process: generated parameters, verified proofs, a timeline.
        let bench: serde_json::Value = serde_json::from_str(&run_ok(cuzk().args([
            "bench",
            "--circuit",
            "mul-chain:4",
            "--jobs",
            "3",
            "--verify",
            "--json",
            "--engine",
            "backend=cpu",
        ])))
        .unwrap();
        assert_eq!(bench["mode"], "in-process");
        assert_eq!(bench["proofs"], 3);

        let devices = run_ok(cuzk().args(["devices"]));
        let json: serde_json::Value =
            serde_json::from_str(&run_ok(cuzk().args(["devices", "--json"]))).unwrap();
        // The same answer as the probe, with its reason when there is no GPU.
        let probe = cuzk_gpu_sched::probe().unwrap();
        assert_eq!(
            json["devices"].as_array().unwrap().len(),
            probe.devices().len()
        );
        match probe.no_gpu_reason() {
            Some(reason) => {
                assert_eq!(json["no_gpu_reason"], reason);
                assert!(
                    devices.starts_with(&format!("no GPU: {reason}; ")),
                    "{devices}"
                );
                assert!(devices.contains("--backend cpu"), "{devices}");
            }
            None => {
                assert!(json["no_gpu_reason"].is_null());
                assert_eq!(devices.lines().count(), probe.devices().len(), "{devices}");
            }
        }

        let out: serde_json::Value = serde_json::from_str(&run_ok(
            cuzk()
                .args([
                    "prove",
                    "--circuit",
                    "mul-chain:5",
                    "--backend",
                    "cpu",
                    "--json",
                ])
                .arg("--params")
                .arg(&chain)
                .arg("--out")
                .arg(dir.join("p.proof"))
                .arg("--timeline")
                .arg(dir.join("prove.json")),
        ))
        .unwrap();
        assert_eq!(out["verified"], true);
        assert!(dir.join("prove.json").exists());
    })
    .await
    .unwrap();
    d.stop().await;
}
