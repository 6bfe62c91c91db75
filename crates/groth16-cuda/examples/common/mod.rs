//! What the benchmark examples (and cuzk-peers) share, `#[path]`-included,
//! not an example itself: the facts every bench-data file records about the
//! run, run statistics and result entries. Each includer uses part of it.
//! CUDA-event timing is in `events.rs` beside it, the examples' shared
//! command-line pieces (clap) in `args.rs`.
#![allow(dead_code)]

use serde_json::{Value, json};

/// Today's date as `YYYY-MM-DD`, or empty when `date` is unavailable.
pub fn today() -> String {
    command_line("date", &["+%Y-%m-%d"])
}

/// The NVIDIA driver version from nvidia-smi, or empty without it.
pub fn driver_version() -> String {
    command_line(
        "nvidia-smi",
        &["--query-gpu=driver_version", "--format=csv,noheader"],
    )
}

/// The first GPU's name from nvidia-smi, or empty without it (for runs
/// that hold no `Gpu` handle of their own).
pub fn gpu_name() -> String {
    command_line("nvidia-smi", &["--query-gpu=name", "--format=csv,noheader"])
}

/// The first line a command prints, trimmed; empty when it cannot run.
fn command_line(cmd: &str, args: &[&str]) -> String {
    std::process::Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.lines().next().unwrap_or("").trim().to_owned())
        .unwrap_or_default()
}

/// The `machine` block of a bench-data file: the GPU's name, the driver,
/// the CPU count, and `extra`'s fields (an object) after them.
pub fn machine(gpu: &str, extra: Value) -> Value {
    let mut m = json!({
        "gpu": gpu,
        "driver": driver_version(),
        "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
    });
    if let (Value::Object(m), Value::Object(e)) = (&mut m, extra) {
        m.extend(e);
    }
    m
}

/// Median, min, max and count of a run's samples.
#[derive(Clone, Copy, Debug)]
pub struct Stat {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub runs: usize,
}

impl Stat {
    /// The statistics of `samples` (at least one).
    pub fn of(mut samples: Vec<f64>) -> Stat {
        assert!(!samples.is_empty(), "a run takes at least one sample");
        samples.sort_by(f64::total_cmp);
        Stat {
            median: samples[samples.len() / 2],
            min: samples[0],
            max: samples[samples.len() - 1],
            runs: samples.len(),
        }
    }

    /// A bench-data result entry: name, unit, median, min, max, runs.
    pub fn result(&self, name: impl Into<String>, unit: &str) -> Value {
        json!({
            "name": name.into(),
            "unit": unit,
            "median": self.median, "min": self.min, "max": self.max, "runs": self.runs,
        })
    }
}

/// A result entry in seconds from `samples`, with `extra`'s fields (an
/// object) added.
pub fn result(name: String, samples: &[f64], extra: Value) -> Value {
    let mut r = Stat::of(samples.to_vec()).result(name, "s");
    if let (Value::Object(r), Value::Object(e)) = (&mut r, extra) {
        r.extend(e);
    }
    r
}

/// One result entry in seconds per variant (`prefix/name`), each beside
/// the variant `baseline` of the same run (its name and median):
/// `ratio_vs_baseline` is the baseline's median over the variant's, so
/// larger is faster.
pub fn results_vs(
    prefix: &str,
    names: &[&str],
    samples: &[Vec<f64>],
    baseline: usize,
    notes: &str,
) -> Vec<Value> {
    let base = Stat::of(samples[baseline].clone()).median;
    names
        .iter()
        .zip(samples)
        .map(|(name, v)| {
            let median = Stat::of(v.clone()).median;
            result(
                format!("{prefix}/{name}"),
                v,
                json!({
                    "baseline": {"name": names[baseline], "median": base},
                    "ratio_vs_baseline": base / median,
                    "notes": notes,
                }),
            )
        })
        .collect()
}
