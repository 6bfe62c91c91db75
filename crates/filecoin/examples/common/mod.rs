//! What the Filecoin benchmark examples share (`mod common;`, not an example
//! itself): their log setup, the results they record (printed as they come,
//! then the bench-data JSON on stdout), peak host memory, the synthetic PoSt
//! input, the blank PCE kept on disk where the engine reads it, the engine
//! configuration from `--engine` and the Chrome trace written under `--out`.
//! Each includer uses part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Result;
use cuzk_engine::EngineConfig;
use cuzk_filecoin::post::PostInput;
use cuzk_filecoin::{BlankPce, PostProof, synthetic};
use cuzk_synth::Pce;
use serde_json::Value;

pub mod stacks;

/// Logs to stderr, filtered by `RUST_LOG`, else by `default` (e.g. "info").
pub fn init_tracing(default: &str) {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| default.into()),
        )
        .with_writer(std::io::stderr)
        .init();
}

/// The results recorded so far (bench-data entries).
pub struct Results {
    /// What every entry's name starts with (`c2/StackedDrg32GiBV1_1`).
    pub prefix: String,
    pub entries: Vec<Value>,
}

impl Results {
    pub fn new(prefix: String) -> Results {
        Results {
            prefix,
            entries: Vec::new(),
        }
    }

    /// One measurement (a single run), printed to stderr as it is recorded.
    pub fn add(&mut self, name: &str, unit: &str, value: f64, notes: String) {
        eprintln!("{name}: {value:.3} {unit} ({notes})");
        self.entries.push(serde_json::json!({
            "name": format!("{}/{name}", self.prefix),
            "unit": unit,
            "median": value, "min": value, "max": value, "runs": 1,
            "notes": notes,
        }));
    }

    /// Records this process's peak resident memory, then prints the
    /// bench-data JSON when `--json` gave a revision and command line.
    pub fn finish(mut self, json: Option<(&str, &str)>) -> Result<()> {
        self.add(
            "peak_rss",
            "GiB",
            peak_rss() as f64 / (1u64 << 30) as f64,
            "this process's VmHWM at the end".into(),
        );
        print_bench_doc(json, self.entries)
    }
}

/// Prints the bench-data JSON of `results` to stdout when `--json` gave a
/// revision and command line.
pub fn print_bench_doc(json: Option<(&str, &str)>, results: Vec<Value>) -> Result<()> {
    if let Some((revision, command)) = json {
        let doc = cuzk_engine::bench::bench_doc(revision, command, results);
        println!("{}", serde_json::to_string_pretty(&doc)?);
    }
    Ok(())
}

/// Resets this process's peak resident memory (VmHWM) to what is resident
/// now (Linux: `5` into `/proc/self/clear_refs`), so [`peak_rss`] measures
/// from here.
pub fn reset_peak_rss() -> std::io::Result<()> {
    std::fs::write("/proc/self/clear_refs", "5")
}

/// This process's peak resident memory in bytes (Linux VmHWM).
pub fn peak_rss() -> u64 {
    status_bytes("VmHWM:")
}

/// This process's resident memory now in bytes (Linux VmRSS).
pub fn rss_now() -> u64 {
    status_bytes("VmRSS:")
}

/// A `kB` line of /proc/self/status in bytes; 0 where unknown.
fn status_bytes(key: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// A synthetic WinningPoSt / WindowPoSt input of `sectors` sectors
/// (default: one partition's worth) from `seed`, timed as `synthetic_post`.
pub fn synthetic_post(
    proof: PostProof,
    sectors: Option<usize>,
    seed: u64,
    results: &mut Results,
) -> Result<PostInput> {
    let sectors = sectors.unwrap_or(proof.config().sector_count);
    let s = synthetic::post_json(proof, sectors, seed)?;
    let p = PostInput::from_json(&s.json, Some(proof.kind))?;
    results.add(
        "synthetic_post",
        "s",
        s.seconds,
        format!(
            "seed {seed}: {sectors} sectors, {} partitions",
            p.partitions()?
        ),
    );
    Ok(p)
}

/// The blank circuit's PCE of `shape` on disk in `pce_dir`, where the engine
/// reads it: read from there if it is there, else recorded by `record` and
/// written there. Returns it when `want` (and only then reads it from disk).
/// Timed as `pce_read`, `pce_record` and `pce_write`, each followed by
/// `/{tag}` when a tag is given.
pub fn blank_pce(
    pce_dir: &Path,
    shape: &str,
    tag: Option<&str>,
    want: bool,
    record: impl FnOnce() -> cuzk_filecoin::Result<BlankPce>,
    results: &mut Results,
) -> Result<Option<Pce>> {
    let named = |what: &str| match tag {
        Some(tag) => format!("{what}/{tag}"),
        None => what.to_owned(),
    };
    let path = pce_dir.join(cuzk_engine::pce_file::file_name(shape));
    if path.exists() {
        if !want {
            return Ok(None);
        }
        let t = Instant::now();
        let pce = cuzk_engine::pce_file::read_pce(&path, shape, None)?;
        let notes = path.display().to_string();
        results.add(&named("pce_read"), "s", t.elapsed().as_secs_f64(), notes);
        return Ok(Some(pce));
    }
    let blank = record()?;
    let notes = format!(
        "blank circuit, {} constraints, one thread",
        blank.pce.num_constraints()
    );
    results.add(&named("pce_record"), "s", blank.record_seconds, notes);
    let t = Instant::now();
    blank.write_to(pce_dir)?;
    let notes = path.display().to_string();
    results.add(&named("pce_write"), "s", t.elapsed().as_secs_f64(), notes);
    Ok(want.then_some(blank.pce))
}

/// The default engine configuration with `--engine`'s `overrides` applied,
/// reading and writing PCEs in `pce_dir`.
pub fn engine_config<'a>(
    overrides: impl IntoIterator<Item = &'a str>,
    pce_dir: &Path,
) -> Result<EngineConfig> {
    let mut config = EngineConfig::default().with_overrides(overrides)?;
    config.pce_cache_dir = Some(pce_dir.to_owned());
    Ok(config)
}

/// Writes a Chrome trace (`TimelineData::chrome_trace`) to
/// `out/timeline-{stem}.json`, making `out` first; returns the file's path.
pub fn write_trace(out: &Path, stem: &str, trace: &Value) -> Result<PathBuf> {
    std::fs::create_dir_all(out)?;
    let path = out.join(format!("timeline-{stem}.json"));
    std::fs::write(&path, serde_json::to_vec(trace)?)?;
    Ok(path)
}

/// Stall diagnostics for a benchmark's wait loop: after every `DUMP_AFTER`
/// (or `limit`, if shorter) without progress, every thread's stack
/// ([`stacks`]) and the engine's counters and status go to stderr (what
/// each job waits for, the budget, the devices' reservations), and after
/// `limit` without progress the wait fails, so a benchmark that cannot go
/// on ends with what it measured and why instead of holding its machine.
/// Time while the benchmark's own parameter loader runs ([`Loading`]) is
/// not a stall: making a 32 GiB set takes longer than a partition.
pub struct Watchdog {
    limit: std::time::Duration,
    mark: u64,
    since: Instant,
    dumped: Instant,
    loading: Loading,
}

/// How many of a benchmark's parameter loaders run now; a loader holds a
/// [`Loading::enter`] guard while it makes a set.
#[derive(Clone, Default)]
pub struct Loading(std::sync::Arc<std::sync::atomic::AtomicUsize>);

/// Counts one running loader until dropped.
pub struct LoadingGuard(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl Loading {
    pub fn enter(&self) -> LoadingGuard {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        LoadingGuard(std::sync::Arc::clone(&self.0))
    }

    pub fn running(&self) -> usize {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for LoadingGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Time without progress between two dumps of the engine's state.
const DUMP_AFTER: std::time::Duration = std::time::Duration::from_secs(120);

impl Watchdog {
    pub fn new(limit: std::time::Duration) -> Watchdog {
        let now = Instant::now();
        Watchdog {
            limit,
            mark: 0,
            since: now,
            dumped: now,
            loading: Loading::default(),
        }
    }

    /// The same, not counting time while a loader of `loading` runs.
    pub fn with_loading(limit: std::time::Duration, loading: Loading) -> Watchdog {
        Watchdog {
            loading,
            ..Watchdog::new(limit)
        }
    }

    /// `progress`: a count that grows while work gets done (partitions
    /// proved, jobs ended). An error once it has not grown for `limit`
    /// outside the loaders' time.
    pub fn check(&mut self, engine: &cuzk_engine::Engine, progress: u64) -> Result<()> {
        let now = Instant::now();
        if progress != self.mark || self.loading.running() > 0 {
            self.mark = progress;
            self.since = now;
            self.dumped = now;
            return Ok(());
        }
        let stalled = now.duration_since(self.since);
        if now.duration_since(self.dumped) >= DUMP_AFTER.min(self.limit) {
            self.dumped = now;
            eprintln!(
                "watchdog: no progress for {:.0} s; every thread's stack, then the engine's state",
                stalled.as_secs_f64()
            );
            // The stacks first: they need no lock of the engine's, which a
            // stuck thread may hold (the state is then asked for with a
            // time limit).
            stacks::dump();
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::scope(|scope| {
                scope.spawn(move || {
                    let stats = format!("{:#?}", engine.stats());
                    let status = serde_json::to_string_pretty(&engine.status())
                        .unwrap_or_else(|e| format!("not serialized: {e}"));
                    let _ = tx.send((stats, status));
                });
                match rx.recv_timeout(std::time::Duration::from_secs(10)) {
                    Ok((stats, status)) => {
                        eprintln!("watchdog: engine stats: {stats}");
                        eprintln!("watchdog: engine status: {status}");
                    }
                    Err(_) => eprintln!(
                        "watchdog: the engine's stats and status did not come within 10 s \
                         (a lock is held: see the stacks above); waiting for them"
                    ),
                }
            });
        }
        anyhow::ensure!(
            stalled < self.limit,
            "no progress for {:.0} s (--stall-timeout): the engine's state is above",
            stalled.as_secs_f64()
        );
        Ok(())
    }

    /// Waits for `job` as `wait_blocking` does, checking for a stall.
    pub fn wait(
        &mut self,
        engine: &cuzk_engine::Engine,
        job: cuzk_engine::JobHandle,
    ) -> Result<Vec<bellperson::groth16::Proof<cuzk_groth16_cuda::Bls12>>> {
        let start = self.mark;
        loop {
            let p = job.progress();
            if p.finished {
                return Ok(job.wait_blocking()?);
            }
            self.check(engine, start + 1 + p.proved as u64)?;
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}
