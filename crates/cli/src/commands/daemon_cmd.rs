//! `cuzk daemon`: builds the engine and serves it until SIGTERM, ctrl-c or
//! the `Shutdown` call.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use cuzk_engine::Engine;

use super::runtime;
use crate::daemon::{self, Address, DaemonConfig};

/// `cuzk daemon`.
#[derive(Debug, clap::Args)]
pub struct DaemonArgs {
    /// The daemon's configuration file (docs/daemon.example.toml); the
    /// options below override it.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Where to listen: a Unix socket path (`unix:PATH` or a path) or
    /// `127.0.0.1:PORT`.
    #[arg(long)]
    pub listen: Option<Address>,
    /// Where to serve Prometheus metrics (`127.0.0.1:9477`), or `off`.
    #[arg(long)]
    pub metrics_listen: Option<String>,
    /// A directory whose parameter files requests may name (repeatable).
    #[arg(long = "params-dir")]
    pub params_dirs: Vec<PathBuf>,
    /// A named parameter set, `NAME=PATH` (repeatable).
    #[arg(long = "param-set", value_name = "NAME=PATH")]
    pub param_sets: Vec<String>,
    /// Parameter sets to load at startup, by name or path (repeatable).
    #[arg(long)]
    pub preload: Vec<String>,
    /// A daemon setting as `key=value` (repeatable), e.g. `max_partitions=64`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub settings: Vec<String>,
    /// An engine setting as `key=value` (repeatable), e.g. `backend=cpu`.
    #[arg(long = "engine", value_name = "KEY=VALUE")]
    pub engine: Vec<String>,
    /// Read and check the configuration (file, options, directories), say
    /// what is wrong or print where it would listen, and exit without
    /// serving (for a systemd unit's ExecStartPre or before a restart).
    #[arg(long)]
    pub check: bool,
}

fn config(args: &DaemonArgs) -> Result<DaemonConfig> {
    let mut c = match &args.config {
        Some(path) => DaemonConfig::from_file(path)?,
        None => DaemonConfig::default(),
    };
    if !args.settings.is_empty() {
        let mut table = toml::Table::try_from(&c)?;
        for s in &args.settings {
            let Some((k, v)) = s.split_once('=') else {
                bail!("--set `{s}` is not of the form key=value");
            };
            let value: toml::Value = format!("v = {}", v.trim())
                .parse::<toml::Table>()
                .ok()
                .and_then(|mut t| t.remove("v"))
                .unwrap_or_else(|| toml::Value::String(v.trim().to_owned()));
            table.insert(k.trim().to_owned(), value);
        }
        c = table.try_into().context("--set")?;
    }
    if let Some(l) = &args.listen {
        c.listen = l.clone();
    }
    if let Some(m) = &args.metrics_listen {
        c.metrics_listen = m.clone();
    }
    c.params_dirs.extend(args.params_dirs.iter().cloned());
    for s in &args.param_sets {
        let Some((name, path)) = s.split_once('=') else {
            bail!("--param-set `{s}` is not of the form NAME=PATH");
        };
        c.param_sets.insert(name.to_owned(), PathBuf::from(path));
    }
    c.preload.extend(args.preload.iter().cloned());
    c.engine = c
        .engine
        .with_overrides(args.engine.iter().map(String::as_str))?;
    Ok(c)
}

/// Runs the daemon in the foreground.
pub fn daemon(args: DaemonArgs) -> Result<()> {
    let config = config(&args)?;
    config.check()?;
    if args.check {
        for warning in config.exposure_warnings() {
            tracing::warn!("{warning}");
        }
        println!(
            "cuzk daemon: the configuration is valid (listen {}, metrics {})",
            config.listen,
            config
                .metrics_addr()?
                .map_or_else(|| "off".into(), |a| a.to_string())
        );
        return Ok(());
    }
    let engine = Engine::new(config.engine.clone()).context("starting the engine")?;
    runtime()?.block_on(async move {
        let running = daemon::start(config, engine).await?;
        println!(
            "cuzk daemon listening on {}{}",
            running.address,
            running
                .metrics_address
                .map(|a| format!(", metrics on http://{a}/metrics"))
                .unwrap_or_default()
        );
        let d = std::sync::Arc::clone(&running.daemon);
        tokio::spawn(async move {
            use tokio::signal::unix::{SignalKind, signal};
            let (Ok(mut term), Ok(mut int)) = (
                signal(SignalKind::terminate()),
                signal(SignalKind::interrupt()),
            ) else {
                tracing::error!("cannot install signal handlers");
                return;
            };
            let mut first = true;
            loop {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                }
                if first {
                    eprintln!(
                        "shutting down: running jobs may finish (signal again to cancel them)"
                    );
                } else {
                    eprintln!("cancelling running jobs");
                }
                d.request_shutdown(!first);
                first = false;
            }
        });
        running.wait().await
    })
}
