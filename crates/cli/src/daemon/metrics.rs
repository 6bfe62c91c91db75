//! The daemon's Prometheus metrics: counters and histograms fed as jobs end
//! and as the engine's timeline records spans, gauges read from the engine
//! at scrape time. Served as text on `/metrics` and by the `Metrics` call.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use cuzk_engine::{Engine, Lane, Priority, Span};
use prometheus::{
    Encoder, GaugeVec, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder,
};

/// The window of `cuzk_device_busy_fraction`.
pub const BUSY_WINDOW: Duration = Duration::from_secs(60);

/// Every metric the daemon exports (names in docs/DAEMON.md).
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    jobs: IntCounterVec,
    proofs_done: IntCounterVec,
    proofs_failed: IntCounterVec,
    job_seconds: HistogramVec,
    verify_seconds: HistogramVec,
    stage_seconds: HistogramVec,
    rejected: IntCounterVec,
    connections_refused: IntCounterVec,
    busy_total: prometheus::CounterVec,
    busy_fraction: GaugeVec,
    memory: IntGaugeVec,
    budget: IntGauge,
    pinned: IntGaugeVec,
    queue: IntGaugeVec,
    jobs_now: IntGaugeVec,
    resident_params: IntGauge,
    loads: IntCounterVec,
    /// The engine's load counts at the last render, to feed `loads`; then
    /// its park and eviction counts, to feed `swaps`.
    loads_seen: Mutex<[u64; 5]>,
    swaps: IntCounterVec,
    dispatch: IntGauge,
    busy: Mutex<HashMap<usize, VecDeque<(Instant, Instant)>>>,
}

fn family(circuit: &str) -> &str {
    circuit.split(':').next().unwrap_or(circuit)
}

impl Metrics {
    pub fn new() -> Result<Arc<Self>> {
        let registry = Registry::new_custom(Some("cuzk".into()), None)?;
        let counter = |name: &str, help: &str, labels: &[&str]| -> Result<IntCounterVec> {
            let c = IntCounterVec::new(Opts::new(name, help), labels)?;
            registry.register(Box::new(c.clone()))?;
            Ok(c)
        };
        let gauge = |name: &str, help: &str, labels: &[&str]| -> Result<IntGaugeVec> {
            let g = IntGaugeVec::new(Opts::new(name, help), labels)?;
            registry.register(Box::new(g.clone()))?;
            Ok(g)
        };
        let single = |name: &str, help: &str| -> Result<IntGauge> {
            let g = IntGauge::new(name, help)?;
            registry.register(Box::new(g.clone()))?;
            Ok(g)
        };
        let seconds = |name: &str, help: &str, labels: &[&str]| -> Result<HistogramVec> {
            let buckets = prometheus::exponential_buckets(0.001, 2.0, 22)?;
            let h = HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets), labels)?;
            registry.register(Box::new(h.clone()))?;
            Ok(h)
        };
        let busy_total = prometheus::CounterVec::new(
            Opts::new(
                "device_busy_seconds_total",
                "Seconds a device spent in kernel regions",
            ),
            &["device"],
        )?;
        registry.register(Box::new(busy_total.clone()))?;
        let busy_fraction = GaugeVec::new(
            Opts::new(
                "device_busy_fraction",
                "Fraction of the last 60 s a device spent in kernel regions",
            ),
            &["device"],
        )?;
        registry.register(Box::new(busy_fraction.clone()))?;
        Ok(Arc::new(Metrics {
            jobs: counter(
                "jobs_total",
                "Jobs ended, by circuit family, priority and outcome (done, failed, cancelled)",
                &["kind", "priority", "outcome"],
            )?,
            proofs_done: counter(
                "proofs_done_total",
                "Proofs (partitions) delivered, by circuit family and priority",
                &["kind", "priority"],
            )?,
            proofs_failed: counter(
                "proofs_failed_total",
                "Proofs (partitions) of jobs that failed or were cancelled",
                &["kind", "priority"],
            )?,
            job_seconds: seconds(
                "job_duration_seconds",
                "From submission to the end of a job",
                &["kind", "priority"],
            )?,
            verify_seconds: seconds(
                "verify_duration_seconds",
                "Verification of each Filecoin proof before it is returned, by kind and result \
                 (ok, failed)",
                &["kind", "result"],
            )?,
            stage_seconds: seconds(
                "stage_duration_seconds",
                "Duration of each pipeline stage of each partition",
                &["stage"],
            )?,
            rejected: counter(
                "requests_rejected_total",
                "Requests refused before a job was made, by gRPC status code",
                &["code"],
            )?,
            connections_refused: counter(
                "connections_refused_total",
                "TCP connections closed at accept: the peer is not in allowed_clients, by \
                 listener (grpc, metrics)",
                &["listener"],
            )?,
            busy_total,
            busy_fraction,
            memory: gauge(
                "memory_bytes",
                "Host memory budget use by kind (pce, params, working_set, pinned_idle, used, \
                 available)",
                &["kind"],
            )?,
            budget: single("memory_budget_bytes", "The host memory budget")?,
            pinned: gauge(
                "pinned_bytes",
                "Pinned pool bytes by state (held, leased, idle, peak_held)",
                &["state"],
            )?,
            queue: gauge(
                "queued_partitions",
                "Partitions of admitted jobs waiting for synthesis, by priority",
                &["priority"],
            )?,
            jobs_now: gauge(
                "jobs",
                "Jobs in the engine by priority and phase (waiting, running)",
                &["priority", "phase"],
            )?,
            resident_params: single("resident_params", "Parameter sets resident now")?,
            loads: counter(
                "loads_total",
                "What the engine read or made because it was not resident: params (a parameter \
                 file read), pce_recorded (a PCE recorded from its circuit), pce_disk (a PCE read \
                 from pce_cache_dir)",
                &["what"],
            )?,
            loads_seen: Mutex::new([0; 5]),
            swaps: counter(
                "swaps_total",
                "Parameter swaps for higher-priority jobs: park (a job gave its parameters and \
                 PCE up at a partition boundary), params_evicted (an idle parameter set dropped \
                 to make room)",
                &["what"],
            )?,
            dispatch: single(
                "dispatch_in_flight",
                "Partitions between synthesis start and proof (reactive dispatch permits)",
            )?,
            busy: Mutex::new(HashMap::new()),
            registry,
        }))
    }

    /// Feeds one timeline span (the engine's observer hook).
    pub fn observe_span(&self, span: &Span, now: Instant) {
        let seconds = span.duration_us() as f64 / 1e6;
        self.stage_seconds
            .with_label_values(&[span.stage])
            .observe(seconds);
        if span.stage == cuzk_engine::timeline::KERNEL_REGION
            && let Lane::Device(d) = span.lane
        {
            self.busy_total
                .with_label_values(&[&d.to_string()])
                .inc_by(seconds);
            let start = now
                .checked_sub(Duration::from_micros(span.duration_us()))
                .unwrap_or(now);
            let mut busy = self.busy.lock().unwrap_or_else(PoisonError::into_inner);
            let q = busy.entry(d).or_default();
            q.push_back((start, now));
            while q.len() > 4096 {
                q.pop_front();
            }
        }
    }

    pub fn job_ended(
        &self,
        circuit: &str,
        priority: Priority,
        outcome: &str,
        partitions: u32,
        took: Duration,
    ) {
        let (kind, p) = (family(circuit), priority.to_string());
        self.jobs.with_label_values(&[kind, &p, outcome]).inc();
        let proofs = if outcome == "done" {
            &self.proofs_done
        } else {
            &self.proofs_failed
        };
        proofs
            .with_label_values(&[kind, &p])
            .inc_by(u64::from(partitions));
        self.job_seconds
            .with_label_values(&[kind, &p])
            .observe(took.as_secs_f64());
    }

    /// One proof verified before its reply (`ok`: it verified).
    pub fn verified(&self, circuit: &str, ok: bool, took: Duration) {
        self.verify_seconds
            .with_label_values(&[family(circuit), if ok { "ok" } else { "failed" }])
            .observe(took.as_secs_f64());
    }

    pub fn rejected(&self, code: tonic::Code) {
        self.rejected
            .with_label_values(&[&format!("{code:?}")])
            .inc();
    }

    /// A TCP connection closed at accept (`allowed_clients`).
    pub fn refuse_connection(&self, listener: &str) {
        self.connections_refused
            .with_label_values(&[listener])
            .inc();
    }

    /// Reads the engine's gauges and renders every metric as text.
    pub fn render(&self, engine: &Engine) -> String {
        let status = engine.status();
        let m = status.memory;
        self.budget.set(m.budget_bytes as i64);
        for (kind, v) in [
            ("pce", m.pce_bytes),
            ("params", m.params_bytes),
            ("working_set", m.working_set_bytes),
            ("pinned_idle", m.pinned_idle_bytes),
            ("used", m.used_bytes),
            ("available", m.available_bytes),
        ] {
            self.memory.with_label_values(&[kind]).set(v as i64);
        }
        let p = status.pinned;
        for (state, v) in [
            ("held", p.bytes_held),
            ("leased", p.bytes_leased),
            ("idle", p.bytes_idle),
            ("peak_held", p.peak_bytes_held),
        ] {
            self.pinned.with_label_values(&[state]).set(v as i64);
        }
        for q in &status.queues {
            let pr = q.priority.to_string();
            self.queue
                .with_label_values(&[&pr])
                .set(q.queued_partitions as i64);
            self.jobs_now
                .with_label_values(&[&pr, "waiting"])
                .set(q.waiting_jobs as i64);
            self.jobs_now
                .with_label_values(&[&pr, "running"])
                .set(q.running_jobs as i64);
        }
        self.resident_params.set(status.params.len() as i64);
        {
            let stats = engine.stats();
            let now = [
                stats.params_loads,
                stats.pce_recorded,
                stats.pce_loaded_from_disk,
                stats.parks,
                stats.params_evicted,
            ];
            let mut seen = self
                .loads_seen
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let labels = [
                (&self.loads, "params"),
                (&self.loads, "pce_recorded"),
                (&self.loads, "pce_disk"),
                (&self.swaps, "park"),
                (&self.swaps, "params_evicted"),
            ];
            for (i, (family, what)) in labels.into_iter().enumerate() {
                family
                    .with_label_values(&[what])
                    .inc_by(now[i].saturating_sub(seen[i]));
            }
            *seen = now;
        }
        self.dispatch.set(status.dispatch_in_flight as i64);
        let now = Instant::now();
        let from = now.checked_sub(BUSY_WINDOW).unwrap_or(now);
        {
            let mut busy = self.busy.lock().unwrap_or_else(PoisonError::into_inner);
            for d in &status.devices {
                busy.entry(d.ordinal).or_default();
            }
            for (device, q) in busy.iter_mut() {
                while q.front().is_some_and(|&(_, e)| e < from) {
                    q.pop_front();
                }
                let inside: Duration = q
                    .iter()
                    .map(|&(s, e)| e.saturating_duration_since(s.max(from)))
                    .sum();
                let fraction = (inside.as_secs_f64() / BUSY_WINDOW.as_secs_f64()).min(1.0);
                self.busy_fraction
                    .with_label_values(&[&device.to_string()])
                    .set(fraction);
            }
        }
        let mut out = Vec::new();
        // Encoding into a Vec fails only on a metric family the registry
        // itself refused, which it never hands out.
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut out) {
            tracing::error!("encoding metrics: {e}");
        }
        String::from_utf8_lossy(&out).into_owned()
    }
}

/// Serves `GET /metrics` on `addr` until `stop` resolves; returns the bound
/// address (for port 0) and the server's task.
pub async fn serve(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    engine: Arc<Engine>,
    stop: tokio::sync::watch::Receiver<bool>,
    gate: super::allow::Gate,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    use hyper::body::Incoming;
    use hyper::{Request, Response, StatusCode};

    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen for metrics on {addr}"))?;
    let bound = listener.local_addr()?;
    let task = tokio::spawn(async move {
        let mut stop = stop;
        loop {
            let accepted = tokio::select! {
                a = listener.accept() => a,
                _ = stop.wait_for(|s| *s) => return,
            };
            let Ok((stream, peer)) = accepted else {
                continue;
            };
            if !gate.admit(peer.ip(), "metrics") {
                continue;
            }
            let (metrics, engine) = (Arc::clone(&metrics), Arc::clone(&engine));
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let (metrics, engine) = (Arc::clone(&metrics), Arc::clone(&engine));
                    async move {
                        if req.uri().path() == "/metrics" {
                            let text = tokio::task::spawn_blocking(move || metrics.render(&engine))
                                .await
                                .unwrap_or_default();
                            Response::builder()
                                .header("content-type", "text/plain; version=0.0.4")
                                .body(text)
                        } else {
                            Response::builder()
                                .status(StatusCode::NOT_FOUND)
                                .body("cuzk serves /metrics only\n".to_owned())
                        }
                    }
                });
                let io = hyper_util::rt::TokioIo::new(stream);
                let conn = hyper::server::conn::http1::Builder::new()
                    .timer(hyper_util::rt::TokioTimer::new())
                    .header_read_timeout(Duration::from_secs(10))
                    .serve_connection(io, service);
                if let Err(e) = conn.await {
                    tracing::debug!("metrics connection: {e}");
                }
            });
        }
    });
    Ok((bound, task))
}
