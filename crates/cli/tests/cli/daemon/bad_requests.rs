//! Bad requests (unknown circuits, out-of-range sizes, parameters outside
//! the allowed directories, oversized or malformed messages, unknown jobs)
//! get the right error codes while a long job goes on being served.

use std::path::Path;

use cuzk_cli::client;
use cuzk_cli::daemon::Address;
use cuzk_cli::proto::{self, prove_request::Randomness};
use cuzk_engine::ByteSize;
use tonic::Code;

use super::{
    TestDaemon, by_name, by_path, params_file, prove, prove_code, request, verify, wait_status,
};
use crate::common::idle;

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
