//! `cuzk daemon`: the engine behind a gRPC service (`proto/cuzk.proto`) on
//! a Unix socket or a loopback TCP port, Prometheus metrics on a local
//! port, and a graceful shutdown (SIGTERM, ctrl-c or the `Shutdown` call):
//! no new requests, running jobs finish within `shutdown_grace_s` or are
//! cancelled, every awaiting client gets its outcome, then the socket goes.
//!
//! The daemon never writes proofs to disk: they go back to the client as
//! bytes, and the client writes them (atomically).

pub mod allow;
mod authority;
mod cleanup;
pub mod config;
pub mod curio;
pub mod filecoin;
pub mod jobs;
pub mod metrics;
pub mod parse_budget;
pub mod request;
pub mod service;
pub mod timing;

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use cuzk_engine::Engine;
use tokio::sync::{Notify, watch};
use tokio_stream::wrappers::{TcpListenerStream, UnixListenerStream};

pub use config::{Address, DaemonConfig, default_address};

use jobs::Jobs;
use metrics::Metrics;

/// How the daemon was asked to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// Let running jobs finish (within the grace period).
    Drain,
    /// Cancel running jobs.
    Cancel,
}

/// The daemon's shared state.
#[derive(Debug)]
pub struct Daemon {
    pub config: DaemonConfig,
    pub engine: Arc<Engine>,
    pub metrics: Arc<Metrics>,
    pub jobs: Jobs,
    pub started: Instant,
    stop: watch::Sender<Option<Stop>>,
    /// Woken whenever a job ends.
    changed: Notify,
    /// Requests admitted and not yet tracked as jobs (or refused): counted
    /// with the unfinished jobs against `max_jobs`, so requests arriving
    /// together cannot all pass the check.
    submitting: std::sync::atomic::AtomicUsize,
}

impl Daemon {
    /// Whether a shutdown has begun (new requests are refused).
    pub fn draining(&self) -> bool {
        self.stop.borrow().is_some()
    }

    /// Begins a shutdown; a second request may only make it harsher.
    pub fn request_shutdown(&self, cancel: bool) {
        let want = if cancel { Stop::Cancel } else { Stop::Drain };
        self.stop.send_modify(|s| {
            if *s != Some(Stop::Cancel) {
                *s = Some(want);
            }
        });
    }

    async fn wait_idle(&self) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.jobs.unfinished() == 0 {
                return;
            }
            changed.await;
        }
    }
}

/// A daemon that is serving.
#[derive(Debug)]
pub struct Running {
    /// Where it listens (a TCP port 0 resolved).
    pub address: Address,
    /// Where `/metrics` is served, if anywhere.
    pub metrics_address: Option<SocketAddr>,
    pub daemon: Arc<Daemon>,
    task: tokio::task::JoinHandle<Result<()>>,
}

impl Running {
    /// Begins a shutdown (as SIGTERM does with `cancel = false`).
    pub fn shutdown(&self, cancel: bool) {
        self.daemon.request_shutdown(cancel);
    }

    /// Waits for the daemon to stop.
    pub async fn wait(self) -> Result<()> {
        self.task.await.context("the daemon task failed")?
    }
}

fn bind_unix(path: &Path, mode: u32) -> Result<tokio::net::UnixListener> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.exists() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create the socket directory {}", dir.display()))?;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        } else if is_shared_tmp_dir(dir) {
            // The fallback /tmp/cuzk-<uid>: anyone may have made it first.
            let meta = std::fs::symlink_metadata(dir)
                .with_context(|| format!("cannot read {}", dir.display()))?;
            let uid = std::fs::metadata("/proc/self").map_or(u32::MAX, |m| m.uid());
            if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
                bail!(
                    "the socket directory {} is not a directory of this user's with mode 0700 \
                     (owner uid {}, mode {:o}); remove it or listen elsewhere",
                    dir.display(),
                    meta.uid(),
                    meta.mode() & 0o7777
                );
            }
        }
    }
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            bail!(
                "{} exists and is not a socket; remove it or listen elsewhere",
                path.display()
            );
        }
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            bail!(
                "another daemon is listening on {} (stop it, or listen elsewhere)",
                path.display()
            );
        }
        // A socket left by a daemon that died: nobody answers on it.
        std::fs::remove_file(path)
            .with_context(|| format!("cannot remove the stale socket {}", path.display()))?;
    }
    let listener = tokio::net::UnixListener::bind(path)
        .with_context(|| format!("cannot listen on {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("cannot set the mode of {}", path.display()))?;
    Ok(listener)
}

/// `/tmp/cuzk-<something>`: the default socket's directory when there is no
/// `XDG_RUNTIME_DIR`, in a directory every user can write to.
fn is_shared_tmp_dir(dir: &Path) -> bool {
    dir.parent() == Some(Path::new("/tmp"))
        && dir
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("cuzk-"))
}

/// Starts serving `engine` as `config` says. Call inside a tokio runtime.
pub async fn start(config: DaemonConfig, engine: Engine) -> Result<Running> {
    config.check()?;
    if let Some(dir) = &config.engine.pce_cache_dir {
        cleanup::sweep_pce_dir(dir, std::time::SystemTime::now());
    }
    let engine = Arc::new(engine);
    let metrics = Metrics::new()?;
    {
        let m = Arc::clone(&metrics);
        engine
            .timeline()
            .add_observer(Box::new(move |span| m.observe_span(span, Instant::now())));
    }
    let (stop, _) = watch::channel(None);
    let daemon = Arc::new(Daemon {
        config,
        engine,
        metrics,
        jobs: Jobs::default(),
        started: Instant::now(),
        stop,
        changed: Notify::new(),
        submitting: std::sync::atomic::AtomicUsize::new(0),
    });
    {
        // Weak: the engine (and so its observers) lives inside the daemon.
        let d = Arc::downgrade(&daemon);
        daemon.engine.timeline().add_observer(Box::new(move |span| {
            if let Some(d) = d.upgrade() {
                d.jobs.timings.observe(span);
            }
        }));
    }
    for p in &daemon.config.preload {
        let spec = crate::proto::ParamsSpec {
            source: Some(if daemon.config.param_sets.contains_key(p) {
                crate::proto::params_spec::Source::Name(p.clone())
            } else {
                crate::proto::params_spec::Source::Path(p.clone())
            }),
        };
        let resolved = request::resolve_params(&daemon.config, Some(&spec))
            .map_err(|s| anyhow::anyhow!("preload `{p}`: {}", s.message()))?;
        let engine = Arc::clone(&daemon.engine);
        tokio::task::spawn_blocking(move || match resolved.file {
            Some(file) => engine.preload_params_from(&resolved.params, file),
            None => engine.preload_params(&resolved.params),
        })
        .await?
        .with_context(|| format!("preload `{p}`"))?;
    }

    let (server_stop_tx, server_stop) = watch::channel(false);
    let metrics_address = match daemon.config.metrics_addr()? {
        Some(addr) => {
            let (bound, _task) = metrics::serve(
                addr,
                Arc::clone(&daemon.metrics),
                Arc::clone(&daemon.engine),
                server_stop.clone(),
                allow::Gate::new(&daemon.config.allowed_clients, Arc::clone(&daemon.metrics)),
            )
            .await?;
            Some(bound)
        }
        None => None,
    };

    let service = crate::proto::cuzk_server::CuzkServer::new(service::Service(Arc::clone(&daemon)))
        .max_decoding_message_size(
            usize::try_from(daemon.config.max_request_bytes.0).unwrap_or(usize::MAX),
        );
    let curio = crate::curio_proto::proving_engine_server::ProvingEngineServer::new(
        curio::CurioService::new(Arc::clone(&daemon)),
    )
    .max_decoding_message_size(
        usize::try_from(daemon.config.max_request_bytes.0).unwrap_or(usize::MAX),
    );
    let router = tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(Duration::from_secs(30)))
        .http2_keepalive_timeout(Some(Duration::from_secs(20)))
        .layer(parse_budget::ParseLimitLayer(
            parse_budget::ParseBudget::new(daemon.config.max_parsing_bytes.0),
        ))
        .add_service(service)
        .add_service(curio);
    let mut server_stop_wait = server_stop.clone();
    let stopped = async move {
        let _ = server_stop_wait.wait_for(|s| *s).await;
    };
    let (address, socket, server) = match &daemon.config.listen {
        Address::Unix(path) => {
            let listener = bind_unix(path, daemon.config.socket_mode)?;
            // C-core clients send the socket path as :authority, which the
            // server refuses: authority.rs reads it as `localhost`.
            let incoming = tokio_stream::StreamExt::map(UnixListenerStream::new(listener), |s| {
                s.map(authority::FixAuthority::new)
            });
            let server = tokio::spawn(router.serve_with_incoming_shutdown(incoming, stopped));
            (Address::Unix(path.clone()), Some(path.clone()), server)
        }
        Address::Tcp(addr) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on {addr}"))?;
            let bound = listener.local_addr()?;
            // Peers outside allowed_clients are closed at accept, before
            // any HTTP/2 or gRPC is read.
            let gate =
                allow::Gate::new(&daemon.config.allowed_clients, Arc::clone(&daemon.metrics));
            let incoming = gate.filter(TcpListenerStream::new(listener), "grpc");
            let server = tokio::spawn(router.serve_with_incoming_shutdown(incoming, stopped));
            (Address::Tcp(bound), None, server)
        }
    };
    tracing::info!(%address, ?metrics_address, "cuzk daemon listening");
    for warning in daemon.config.exposure_warnings() {
        tracing::warn!("{warning}");
    }

    let d = Arc::clone(&daemon);
    let task = tokio::spawn(async move {
        let reaper = {
            let d = Arc::clone(&d);
            tokio::spawn(async move {
                let ttl = Duration::from_secs_f64(d.config.result_ttl_s);
                let mut tick = tokio::time::interval(Duration::from_secs(1));
                loop {
                    tick.tick().await;
                    d.jobs.expire(ttl);
                }
            })
        };
        let result = lifecycle(&d, server, server_stop_tx).await;
        reaper.abort();
        if let Some(path) = socket {
            remove_socket(&path);
        }
        // Dropping the engine joins its threads: not on the runtime.
        let engine = Arc::clone(&d.engine);
        drop(d);
        let _ = tokio::task::spawn_blocking(move || drop(engine)).await;
        result
    });
    Ok(Running {
        address,
        metrics_address,
        daemon,
        task,
    })
}

fn remove_socket(path: &PathBuf) {
    if let Err(e) = std::fs::remove_file(path)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!("cannot remove the socket {}: {e}", path.display());
    }
}

type ServerTask = tokio::task::JoinHandle<Result<(), tonic::transport::Error>>;

/// Serves until asked to stop, then drains: refuse new work, let jobs
/// finish (or cancel them), let clients read their outcomes, close.
async fn lifecycle(
    d: &Arc<Daemon>,
    mut server: ServerTask,
    server_stop: watch::Sender<bool>,
) -> Result<()> {
    let mut stop = d.stop.subscribe();
    tokio::select! {
        r = &mut server => {
            // The server ended by itself: an error on the listener.
            d.request_shutdown(true);
            d.jobs.cancel_all();
            return match r {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(e).context("the gRPC server failed"),
                Err(e) => Err(e).context("the gRPC server task failed"),
            };
        }
        _ = stop.wait_for(Option::is_some) => {}
    }
    let grace = Duration::from_secs_f64(d.config.shutdown_grace_s);
    let running = d.jobs.unfinished();
    tracing::info!(running, "shutting down: no new requests");
    if *stop.borrow() == Some(Stop::Drain) && running > 0 {
        tokio::select! {
            _ = d.wait_idle() => {}
            _ = tokio::time::sleep(grace) => {
                tracing::warn!("shutdown grace period over: cancelling the jobs left");
            }
            _ = stop.wait_for(|s| *s == Some(Stop::Cancel)) => {
                tracing::info!("cancelling running jobs");
            }
        }
    }
    d.jobs.cancel_all();
    // Cancelled jobs end at their next phase boundary.
    d.wait_idle().await;
    // Let every awaiting stream send its outcome, then close: the server
    // waits for open calls, within a bound.
    let _ = server_stop.send(true);
    match tokio::time::timeout(Duration::from_secs(10), &mut server).await {
        Ok(Ok(Ok(()))) => {}
        Ok(Ok(Err(e))) => tracing::warn!("the gRPC server ended with: {e}"),
        Ok(Err(e)) => tracing::warn!("the gRPC server task failed: {e}"),
        Err(_) => {
            tracing::warn!("clients kept calls open past the shutdown: closing them");
            server.abort();
        }
    }
    tracing::info!("cuzk daemon stopped");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_that_is_not_a_socket_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cuzk.sock");
        std::fs::write(&path, b"precious").unwrap();
        let err = bind_unix(&path, 0o600).unwrap_err().to_string();
        assert!(err.contains("is not a socket"), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), b"precious");
    }

    #[test]
    fn a_shared_socket_directory_open_to_others_is_refused() {
        assert!(is_shared_tmp_dir(Path::new("/tmp/cuzk-1000")));
        assert!(!is_shared_tmp_dir(Path::new("/run/user/1000")));
        assert!(!is_shared_tmp_dir(Path::new("/tmp/other")));
        let dir = PathBuf::from(format!("/tmp/cuzk-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let err = bind_unix(&dir.join("cuzk.sock"), 0o600)
            .unwrap_err()
            .to_string();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(err.contains("mode 0700"), "{err}");
    }
}
