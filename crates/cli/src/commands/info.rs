//! `cuzk status`, `cuzk devices`, `cuzk timeline`, `cuzk params`.

use std::path::PathBuf;

use anyhow::{Context, Result};
use cuzk_engine::error::fmt_bytes;
use serde_json::{Value, json};

use super::{DaemonAddr, runtime, write_file};
use crate::client::{self, call_error};
use crate::proto;

/// `cuzk status`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub daemon: DaemonAddr,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

fn priority_name(p: i32) -> &'static str {
    match proto::Priority::try_from(p) {
        Ok(proto::Priority::Low) => "low",
        Ok(proto::Priority::High) => "high",
        Ok(proto::Priority::Critical) => "critical",
        _ => "normal",
    }
}

/// The status reply as JSON (stable names, priorities as words).
pub fn status_json(s: &proto::StatusReply) -> Value {
    let m = s.memory.unwrap_or_default();
    let p = s.pinned.unwrap_or_default();
    json!({
        "backend": s.backend,
        "uptime_seconds": s.uptime_seconds,
        "shutting_down": s.shutting_down,
        "workers_per_device": s.workers_per_device,
        "synthesis_concurrency": s.synthesis_concurrency,
        "dispatch": {"in_flight": s.dispatch_in_flight, "bound": s.dispatch_bound},
        "queues": s.queues.iter().map(|q| json!({
            "priority": priority_name(q.priority),
            "waiting_jobs": q.waiting_jobs,
            "admitted_jobs": q.admitted_jobs,
            "queued_partitions": q.queued_partitions,
        })).collect::<Vec<_>>(),
        "devices": s.devices.iter().map(|d| json!({
            "ordinal": d.ordinal,
            "workers": d.workers,
            "busy_workers": d.busy_workers,
            "capacity_bytes": d.capacity_bytes,
            "reserved_bytes": d.reserved_bytes,
            "kernel_busy": d.kernel_busy,
        })).collect::<Vec<_>>(),
        "memory": {
            "budget_bytes": m.budget_bytes,
            "pce_bytes": m.pce_bytes,
            "params_bytes": m.params_bytes,
            "working_set_bytes": m.working_set_bytes,
            "pinned_idle_bytes": m.pinned_idle_bytes,
            "used_bytes": m.used_bytes,
            "available_bytes": m.available_bytes,
        },
        "pinned": {
            "bytes_held": p.bytes_held,
            "bytes_leased": p.bytes_leased,
            "bytes_idle": p.bytes_idle,
            "buffers_held": p.buffers_held,
            "leases_outstanding": p.leases_outstanding,
            "peak_bytes_held": p.peak_bytes_held,
        },
        "params": s.params.iter().map(|r| json!({
            "id": r.id, "bytes": r.bytes, "users": r.users,
        })).collect::<Vec<_>>(),
        "cached_shapes": s.cached_shapes,
        "jobs": s.jobs.iter().map(|j| json!({
            "job_id": j.job_id,
            "priority": priority_name(j.priority),
            "circuit": j.circuit,
            "partitions": j.partitions,
            "proved": j.proved,
            "state": j.state,
            "abc": j.abc,
            "abc_reason": j.abc_reason,
            "waiting": j.waiting,
        })).collect::<Vec<_>>(),
    })
}

fn print_status(s: &proto::StatusReply) {
    let m = s.memory.unwrap_or_default();
    let p = s.pinned.unwrap_or_default();
    println!(
        "cuzk daemon: {} backend, up {:.0} s{}",
        s.backend,
        s.uptime_seconds,
        if s.shutting_down {
            ", SHUTTING DOWN"
        } else {
            ""
        }
    );
    println!("queues (waiting jobs / admitted jobs / queued partitions):");
    for q in &s.queues {
        println!(
            "  {:<9} {:>4} / {:>4} / {:>6}",
            priority_name(q.priority),
            q.waiting_jobs,
            q.admitted_jobs,
            q.queued_partitions
        );
    }
    println!(
        "devices ({} workers each, {} synthesis threads, {}/{} dispatch permits in use):",
        s.workers_per_device, s.synthesis_concurrency, s.dispatch_in_flight, s.dispatch_bound
    );
    for d in &s.devices {
        println!(
            "  device {}: {}/{} workers busy, kernel {}, {} reserved",
            d.ordinal,
            d.busy_workers,
            d.workers,
            if d.kernel_busy { "busy" } else { "idle" },
            fmt_bytes(d.reserved_bytes)
        );
    }
    println!("memory budget {}:", fmt_bytes(m.budget_bytes));
    for (what, v) in [
        ("PCE", m.pce_bytes),
        ("parameters", m.params_bytes),
        ("working sets", m.working_set_bytes),
        ("idle pinned", m.pinned_idle_bytes),
        ("used", m.used_bytes),
        ("available", m.available_bytes),
    ] {
        println!("  {what:<13} {}", fmt_bytes(v));
    }
    println!(
        "pinned pool: {} held ({} leased in {} leases, {} idle), {} buffers",
        fmt_bytes(p.bytes_held),
        fmt_bytes(p.bytes_leased),
        p.leases_outstanding,
        fmt_bytes(p.bytes_idle),
        p.buffers_held
    );
    println!("resident parameter sets:");
    if s.params.is_empty() {
        println!("  none");
    }
    for r in &s.params {
        println!(
            "  {} ({}, {} jobs using it)",
            r.id,
            fmt_bytes(r.bytes),
            r.users
        );
    }
    println!("cached circuit shapes: {}", s.cached_shapes.join(", "));
    println!("jobs:");
    if s.jobs.is_empty() {
        println!("  none");
    }
    for j in &s.jobs {
        println!(
            "  {:>6} {:<8} {:<16} {}/{} proved, {}",
            j.job_id,
            priority_name(j.priority),
            j.circuit,
            j.proved,
            j.partitions,
            j.state
        );
        if let Some(waiting) = &j.waiting {
            println!("         {waiting}");
        }
        if !j.abc.is_empty() {
            println!("         a/b/c on the {}: {}", j.abc, j.abc_reason);
        }
    }
}

/// `cuzk status`.
pub fn status(args: StatusArgs) -> Result<()> {
    let reply = runtime()?.block_on(async {
        let mut c = client::connect(&args.daemon.address()).await?;
        c.status(proto::StatusRequest {})
            .await
            .map_err(|s| call_error("status", s))
    })?;
    let s = reply.into_inner();
    if args.json {
        println!("{}", status_json(&s));
    } else {
        print_status(&s);
    }
    Ok(())
}

/// `cuzk devices`.
#[derive(Debug, clap::Args)]
pub struct DevicesArgs {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `cuzk devices`: the CUDA devices this machine's driver sees.
pub fn devices(args: DevicesArgs) -> Result<()> {
    use cuzk_gpu_sched::Probe;
    let found = cuzk_gpu_sched::probe();
    let (list, reason, hint) = match &found {
        Ok(probe) => (
            probe.devices().to_vec(),
            probe.no_gpu_reason().map(str::to_owned),
            match probe {
                Probe::NoDriverLibrary => "install the NVIDIA driver (it provides libcuda.so.1)",
                Probe::Devices(_) => "check nvidia-smi and CUDA_VISIBLE_DEVICES",
            },
        ),
        Err(e) => (
            Vec::new(),
            Some(e.to_string()),
            "check the driver with nvidia-smi",
        ),
    };
    if args.json {
        println!(
            "{}",
            json!({
                "devices": list.iter().map(|d| json!({
                    "ordinal": d.ordinal,
                    "name": d.name,
                    "total_memory_bytes": d.total_memory_bytes,
                    "compute_capability": [d.compute_capability.0, d.compute_capability.1],
                    "multiprocessors": d.multiprocessors,
                })).collect::<Vec<_>>(),
                "no_gpu_reason": reason,
            })
        );
    } else if let Some(reason) = reason {
        println!("no GPU: {reason}; {hint}, or prove on the CPU with --backend cpu");
    } else {
        for d in &list {
            println!("{d}");
        }
    }
    Ok(())
}

/// `cuzk timeline`.
#[derive(Debug, clap::Args)]
pub struct TimelineArgs {
    #[command(flatten)]
    pub daemon: DaemonAddr,
    /// Where to write the Chrome-trace JSON (open it in Perfetto).
    #[arg(long)]
    pub out: PathBuf,
    /// Every span the daemon keeps, not only the last run's (a run: a stretch
    /// during which the daemon always had a job).
    #[arg(long)]
    pub all: bool,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `cuzk timeline`: the daemon's last run as a Chrome trace.
pub fn timeline(args: TimelineArgs) -> Result<()> {
    let reply = runtime()?.block_on(async {
        let mut c = client::connect(&args.daemon.address()).await?;
        c.timeline(proto::TimelineRequest { all: args.all })
            .await
            .map_err(|s| call_error("timeline", s))
    })?;
    let t = reply.into_inner();
    write_file(&args.out, t.chrome_trace_json.as_bytes())
        .with_context(|| format!("writing {}", args.out.display()))?;
    if args.json {
        println!("{}", t.summary_json);
    } else {
        let summary: Value = serde_json::from_str(&t.summary_json).unwrap_or(Value::Null);
        println!(
            "wrote {} spans to {} ({} proofs, {:.3} s window, {:.2} proofs/s)",
            t.spans,
            args.out.display(),
            summary["proofs"],
            summary["window_s"].as_f64().unwrap_or(0.0),
            summary["proofs_per_second"].as_f64().unwrap_or(0.0)
        );
    }
    Ok(())
}

/// `cuzk params`.
#[derive(Debug, clap::Args)]
pub struct ParamsArgs {
    #[command(subcommand)]
    pub action: ParamsAction,
}

/// What to do with a parameter set.
#[derive(Debug, clap::Subcommand)]
pub enum ParamsAction {
    /// Load a parameter set into the daemon now and keep it resident.
    Preload(ParamsTarget),
    /// Drop a resident parameter set from the daemon.
    Evict(ParamsTarget),
    /// Check a Filecoin parameter directory's files (no daemon): each
    /// against the digest filecoin-proofs publishes for its name, or, for
    /// files it does not list, for its structure; one verdict per file, a
    /// non-zero exit when any is bad.
    Check(super::ParamsCheckArgs),
}

/// A parameter set by path, by name, or by the Filecoin registered proof
/// whose parameters (in the daemon's filecoin_params_dir) it is.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("which").required(true).multiple(false)))]
pub struct ParamsTarget {
    #[command(flatten)]
    pub daemon: DaemonAddr,
    /// A parameter file inside the daemon's params_dirs.
    #[arg(long, group = "which")]
    pub params: Option<PathBuf>,
    /// A parameter set the daemon's configuration names.
    #[arg(long, group = "which")]
    pub params_set: Option<String>,
    /// The PoRep C2 parameters of a registered seal proof, e.g.
    /// StackedDrg32GiBV1_1.
    #[arg(long, group = "which")]
    pub seal_proof: Option<String>,
    /// The PoSt parameters of a registered PoSt proof, e.g.
    /// StackedDrgWindow32GiBV1_1 or StackedDrgWinning32GiBV1.
    #[arg(long, group = "which")]
    pub post_proof: Option<String>,
    /// The SnapDeals parameters of a registered update proof, e.g.
    /// StackedDrg32GiBV1.
    #[arg(long, group = "which")]
    pub update_proof: Option<String>,
}

impl ParamsTarget {
    fn spec(&self) -> Result<proto::ParamsSpec> {
        use proto::params_spec::Source;
        let registered = match (&self.seal_proof, &self.post_proof, &self.update_proof) {
            (Some(n), _, _) => Some(Source::SealProof(n.clone())),
            (_, Some(n), _) => Some(Source::PostProof(n.clone())),
            (_, _, Some(n)) => Some(Source::UpdateProof(n.clone())),
            _ => None,
        };
        match registered {
            Some(source) => Ok(proto::ParamsSpec {
                source: Some(source),
            }),
            None => super::params_spec(self.params.as_deref(), self.params_set.as_deref()),
        }
    }
}

/// `cuzk params preload|evict|check`.
pub fn params(args: ParamsArgs) -> Result<()> {
    let (preload, target) = match &args.action {
        ParamsAction::Preload(t) => (true, t),
        ParamsAction::Evict(t) => (false, t),
        ParamsAction::Check(check) => return super::params_check(check),
    };
    let spec = target.spec()?;
    let reply = runtime()?.block_on(async {
        let mut c = client::connect(&target.daemon.address()).await?;
        let req = proto::ParamsRequest { params: Some(spec) };
        if preload {
            c.preload(req).await.map_err(|s| call_error("preload", s))
        } else {
            c.evict(req).await.map_err(|s| call_error("evict", s))
        }
    })?;
    let r = reply.into_inner();
    println!(
        "{} {}",
        r.id,
        match (preload, r.was_resident) {
            (true, true) => "was already resident",
            (true, false) => "loaded and resident",
            (false, true) => "evicted",
            (false, false) => "was not resident",
        }
    );
    Ok(())
}
