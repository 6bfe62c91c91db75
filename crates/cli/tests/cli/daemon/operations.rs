//! Running `cuzk daemon` as an operator would: who may connect over TCP
//! (`allowed_clients`), what is cleaned at start (stale PCE temporary
//! files), configs and settings refused before anything starts, log lines
//! fit for a file or journald, and the shipped systemd unit.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime};

use cuzk_cli::daemon::{self, Address, DaemonConfig};
use cuzk_cli::proto::{self, cuzk_client::CuzkClient};
use cuzk_engine::{Auto, Backend, ByteSize, Engine, EngineConfig};
use tonic::Code;

use super::{TestDaemon, cuzk};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `cmd` with its output captured, killed after 20 s (a config read
/// that blocks must fail the test, not hang it).
fn run_bounded(cmd: &mut Command) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{cmd:?} still running after 20 s:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn stderr_of_failure(cmd: &mut Command) -> String {
    let out = run_bounded(cmd);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{cmd:?} succeeded:\n{stderr}");
    stderr
}

fn config_on_tcp(allowed: &[&str]) -> DaemonConfig {
    DaemonConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        metrics_listen: "127.0.0.1:0".into(),
        allowed_clients: allowed.iter().map(|s| s.parse().unwrap()).collect(),
        engine: EngineConfig {
            backend: Backend::Cpu,
            host_memory_budget: Auto::Value(ByteSize(1 << 30)),
            ..EngineConfig::default()
        },
        ..DaemonConfig::default()
    }
}

/// A daemon on 127.0.0.1 that allows only 10.0.0.0/8 closes a local
/// client's connection at accept (the call fails UNAVAILABLE, the metrics
/// port answers nothing, the refusals are counted); with 127.0.0.0/8 the
/// same client is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_clients_outside_allowed_clients_are_closed_at_accept() {
    for (allowed, served) in [(["10.0.0.0/8"], false), (["127.0.0.0/8"], true)] {
        let config = config_on_tcp(&allowed);
        let engine = Engine::new(config.engine.clone()).unwrap();
        let running = daemon::start(config, engine).await.unwrap();
        let Address::Tcp(addr) = running.address else {
            panic!("{}", running.address)
        };
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(10))
            .connect_lazy();
        let reply = CuzkClient::new(channel)
            .status(proto::StatusRequest {})
            .await;
        let metrics = running.metrics_address.unwrap();
        let scraped = tokio::task::spawn_blocking(move || {
            use std::io::{Read, Write};
            let mut s = std::net::TcpStream::connect(metrics).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            // A refused peer may see the write fail: the reply is what counts.
            let _ = s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n");
            let mut text = String::new();
            let _ = s.read_to_string(&mut text);
            text
        })
        .await
        .unwrap();
        let counted = running.daemon.metrics.render(&running.daemon.engine);
        if served {
            reply.unwrap();
            assert!(scraped.contains("cuzk_memory_budget_bytes"), "{scraped}");
        } else {
            // Closed before the server said a word: grpc-go (Curio) and
            // C-core report UNAVAILABLE; tonic, whose HTTP/2 handshake does
            // not wait for the server, UNKNOWN "transport error", or
            // CANCELLED when hyper sees the close while the call is in
            // flight (its source: the connection closed).
            let status = reply.unwrap_err();
            let closed = format!("{status:?}").contains("connection closed");
            assert!(
                status.code() == Code::Unavailable
                    || (status.code() == Code::Unknown && status.message() == "transport error")
                    || (status.code() == Code::Cancelled && closed),
                "{status:?}"
            );
            assert_eq!(scraped, "", "the metrics port answered a refused peer");
            for listener in ["grpc", "metrics"] {
                let line = format!("cuzk_connections_refused_total{{listener=\"{listener}\"}}");
                assert!(
                    counted
                        .lines()
                        .any(|l| l.starts_with(&line) && !l.ends_with(" 0")),
                    "{line} not counted:\n{counted}"
                );
            }
        }
        running.shutdown(true);
        tokio::time::timeout(Duration::from_secs(30), running.wait())
            .await
            .unwrap()
            .unwrap();
    }
}

/// Temporary files left by PCE writers that died (today's tempfile names
/// and the older `.NAME.tmp-PID`) are removed when the daemon starts; a
/// recent one, a set-aside `.bad` and every other file stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_pce_temporary_files_are_removed_at_start() {
    let pce = tempfile::tempdir().unwrap();
    let dead = {
        let mut child = Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    };
    let hour_ago = SystemTime::now() - Duration::from_secs(3600);
    let stale = [
        format!(".porep_12-0a1b.pce.tmp-{dead}"),
        ".porep_12-0a1b.pce.Qx7Tz2.tmp".to_owned(),
    ];
    let kept = [
        ".porep_12-0a1b.pce.Rr8Uv3.tmp", // being written: changed just now
        "porep_12-0a1b.pce",
        "porep_12-0a1b.pce.bad",
        ".notes.txt.Qx7Tz2.tmp",
        "notes.txt",
    ];
    for name in stale.iter().map(String::as_str).chain(kept) {
        let f = std::fs::File::create(pce.path().join(name)).unwrap();
        if name != kept[0] {
            f.set_modified(hour_ago).unwrap();
        }
    }
    let dir = pce.path().to_owned();
    let d = TestDaemon::start(move |c| c.engine.pce_cache_dir = Some(dir)).await;
    let mut left: Vec<String> = std::fs::read_dir(pce.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    let mut want: Vec<String> = kept.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(left, want);
    d.stop().await;
}

/// A config that is a FIFO or a device, or over 1 MiB, is refused at once
/// with what is wrong; settings under which nothing could be served are
/// refused naming the setting and its value.
#[test]
fn configs_and_settings_that_cannot_work_are_refused_before_start() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("daemon.toml");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    // Under a memory limit: an endless read must fail, not fill the machine.
    for (config, want) in [
        (fifo.as_path(), "is a FIFO (named pipe), not a regular file"),
        (
            Path::new("/dev/zero"),
            "is a character device, not a regular file",
        ),
    ] {
        let err = stderr_of_failure(
            Command::new("sh")
                .arg("-c")
                .arg("ulimit -v 4000000; exec \"$0\" daemon --check --config \"$1\"")
                .arg(env!("CARGO_BIN_EXE_cuzk"))
                .arg(config),
        );
        assert!(err.contains(want), "{}: {err}", config.display());
    }
    for (set, want) in [
        (
            "socket_mode=0o777",
            "socket_mode = 0o777 lets every local user",
        ),
        (
            "socket_mode=0o4600",
            "socket_mode = 0o4600 has bits outside 0o777",
        ),
        (
            "max_request_bytes=0",
            "max_request_bytes = 0 bytes is too small",
        ),
        (
            "max_constraints=0",
            "max_constraints = 0 refuses every request",
        ),
        (
            "params_dirs=[\"/nonexistent/params\"]",
            "params_dirs: /nonexistent/params",
        ),
        (
            "allowed_clients=[\"10.0.0.0/33\"]",
            "`10.0.0.0/33` is neither a network",
        ),
    ] {
        let err = stderr_of_failure(cuzk().args(["daemon", "--check", "--set", set]));
        assert!(err.contains(want), "{set}: {err}");
    }
    for (engine, want) in [
        ("host_memory_budget=1", "host_memory_budget = 1 bytes"),
        (
            "pce_cache_dir=/proc/1",
            "pce_cache_dir = /proc/1 is under /proc",
        ),
    ] {
        let err = stderr_of_failure(cuzk().args(["daemon", "--check", "--engine", engine]));
        assert!(err.contains(want), "{engine}: {err}");
    }
}

/// Log lines carry no colour escapes when stderr is not a terminal (a file,
/// a pipe, journald), nor on a terminal with NO_COLOR set; on a terminal
/// without it they do (so the check below can see escapes at all).
#[test]
fn log_lines_are_plain_unless_a_terminal_wants_colour() {
    let args = [
        "daemon",
        "--check",
        "--listen",
        "0.0.0.0:7400",
        "--metrics-listen",
        "off",
        "--set",
        "allow_remote=true",
    ];
    let out = run_bounded(cuzk().args(args).env_remove("NO_COLOR"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("WARN") && stderr.contains("any host that can reach this port"),
        "the exposure warning is logged: {stderr}"
    );
    assert!(
        !stderr.contains('\x1b'),
        "colour escapes in a pipe: {stderr:?}"
    );

    // `script` runs the command on a pseudo-terminal.
    if Command::new("script").arg("--version").output().is_err() {
        println!("skipping the terminal half: no `script` (util-linux) on this machine");
        return;
    }
    let on_terminal = |no_color: Option<&str>| {
        let line = std::iter::once(env!("CARGO_BIN_EXE_cuzk"))
            .chain(args)
            .collect::<Vec<_>>()
            .join(" ");
        let mut cmd = Command::new("script");
        cmd.args(["-qec", &line, "/dev/null"])
            .env_remove("NO_COLOR");
        if let Some(v) = no_color {
            cmd.env("NO_COLOR", v);
        }
        let out = run_bounded(&mut cmd);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(text.contains("any host that can reach"), "{text}");
        text
    };
    assert!(
        on_terminal(None).contains('\x1b'),
        "no colour on a terminal"
    );
    assert!(
        !on_terminal(Some("1")).contains('\x1b'),
        "colour with NO_COLOR"
    );
}

/// Keys systemd 252 knows in the sections the unit uses (systemd.unit,
/// systemd.service, systemd.exec, systemd.kill, systemd.resource-control).
const UNIT_KEYS: &[(&str, &[&str])] = &[
    (
        "Unit",
        &[
            "Description",
            "Documentation",
            "Wants",
            "Requires",
            "After",
            "Before",
        ],
    ),
    (
        "Service",
        &[
            "Type",
            "User",
            "Group",
            "Environment",
            "ExecStartPre",
            "ExecStart",
            "KillSignal",
            "KillMode",
            "TimeoutStopSec",
            "TimeoutStartSec",
            "Restart",
            "RestartSec",
            "RuntimeDirectory",
            "RuntimeDirectoryMode",
            "CacheDirectory",
            "StateDirectory",
            "UMask",
            "LimitMEMLOCK",
            "LimitNOFILE",
            "DevicePolicy",
            "DeviceAllow",
            "NoNewPrivileges",
            "ProtectSystem",
            "ProtectHome",
            "PrivateTmp",
            "ProtectKernelTunables",
            "ProtectKernelModules",
            "ProtectKernelLogs",
            "ProtectControlGroups",
            "ProtectClock",
            "ProtectHostname",
            "RestrictNamespaces",
            "RestrictRealtime",
            "RestrictSUIDSGID",
            "LockPersonality",
            "RestrictAddressFamilies",
            "SystemCallArchitectures",
        ],
    ),
    ("Install", &["WantedBy"]),
];

/// contrib/systemd/cuzk.service: sections of known keys; its commands,
/// run as written but for the binary and with the example config in
/// /etc/cuzk/daemon.toml's place, check the config and listen where
/// RuntimeDirectory makes room; it leaves the drain time to finish; and
/// `systemd-analyze verify` finds nothing to say where it exists.
#[test]
fn the_systemd_unit_is_well_formed_and_its_commands_run() {
    let unit_path = repo().join("contrib/systemd/cuzk.service");
    let text = std::fs::read_to_string(&unit_path).unwrap();
    let mut section = None;
    let mut keys: Vec<(String, String, String)> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            assert!(
                UNIT_KEYS.iter().any(|(s, _)| *s == name),
                "line {}: unknown section [{name}]",
                n + 1
            );
            section = Some(name.to_owned());
            continue;
        }
        let s = section
            .clone()
            .unwrap_or_else(|| panic!("line {}: key before any section", n + 1));
        let (k, v) = line
            .split_once('=')
            .unwrap_or_else(|| panic!("line {}: not key=value: {line}", n + 1));
        let known = UNIT_KEYS.iter().find(|(name, _)| *name == s).unwrap().1;
        assert!(
            known.contains(&k.trim()),
            "line {}: unknown key {k} in [{s}]",
            n + 1
        );
        keys.push((s, k.trim().to_owned(), v.trim().to_owned()));
    }
    let get = |k: &str| -> Vec<&str> {
        keys.iter()
            .filter(|(_, key, _)| key == k)
            .map(|(_, _, v)| v.as_str())
            .collect()
    };
    for (k, v) in [
        ("KillSignal", "SIGTERM"),
        ("Restart", "on-failure"),
        ("LimitMEMLOCK", "infinity"),
        ("RuntimeDirectory", "cuzk"),
        ("User", "cuzk"),
    ] {
        assert_eq!(get(k), [v], "{k}");
    }
    let example = repo().join("docs/daemon.example.toml");
    let grace = DaemonConfig::from_file(&example).unwrap().shutdown_grace_s;
    let stop: f64 = get("TimeoutStopSec")[0].parse().unwrap();
    assert!(
        stop > grace + 10.0,
        "TimeoutStopSec {stop} within the drain"
    );

    let env: Vec<(&str, &str)> = get("Environment")
        .into_iter()
        .map(|e| e.split_once('=').unwrap())
        .collect();
    let commands = [get("ExecStartPre"), get("ExecStart")].concat();
    assert_eq!(commands.len(), 2);
    for command in commands {
        let mut words = command.split_whitespace();
        assert_eq!(words.next(), Some("/usr/local/bin/cuzk"), "{command}");
        let mut cmd = cuzk();
        cmd.env_clear().envs(env.iter().copied());
        for w in words {
            if w == "/etc/cuzk/daemon.toml" {
                cmd.arg(&example);
            } else {
                cmd.arg(w);
            }
        }
        if !command.contains("--check") {
            cmd.arg("--check");
        }
        let out = run_bounded(&mut cmd);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{command}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            stdout.contains("listen unix:/run/cuzk/cuzk.sock"),
            "{stdout}"
        );
    }

    let verified = Command::new("systemd-analyze").arg("--version").output();
    if verified.is_err() {
        println!("skipping systemd-analyze verify: systemd-analyze is not installed");
        return;
    }
    // verify wants the binary ExecStart names to exist: the one just built.
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("cuzk.service");
    std::fs::write(
        &copy,
        text.replace("/usr/local/bin/cuzk", env!("CARGO_BIN_EXE_cuzk")),
    )
    .unwrap();
    let out = run_bounded(Command::new("systemd-analyze").arg("verify").arg(&copy));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && said.trim().is_empty(),
        "systemd-analyze verify: {said}"
    );
}

/// DAEMON.md's worked example (a GPU node serving three Curio machines)
/// is a config the daemon reads as meant: remote, three allowed clients,
/// nothing to warn about.
#[test]
fn the_deployment_example_config_reads_as_documented() {
    let doc = std::fs::read_to_string(repo().join("docs/DAEMON.md")).unwrap();
    let block = doc
        .split("```toml")
        .skip(1)
        .map(|b| b.split("```").next().unwrap())
        .find(|b| b.contains("allowed_clients = ["))
        .expect("DAEMON.md has the worked example");
    let c = DaemonConfig::from_toml_str(block).unwrap();
    assert!(c.allow_remote);
    assert_eq!(c.allowed_clients.len(), 3);
    assert!(matches!(c.listen, Address::Tcp(a) if !a.ip().is_loopback()));
    assert_eq!(c.exposure_warnings(), Vec::<String>::new());
    let open = DaemonConfig {
        allowed_clients: Vec::new(),
        ..c
    };
    assert_eq!(open.exposure_warnings().len(), 1);
}
