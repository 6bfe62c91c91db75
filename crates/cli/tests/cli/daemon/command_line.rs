//! The `cuzk` command line around a running daemon: `status`, `timeline`,
//! `params evict`, `bench` (through the daemon and in process), `devices`
//! and `prove --timeline --json`.

use super::{TestDaemon, cuzk, params_file, run_ok};

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
