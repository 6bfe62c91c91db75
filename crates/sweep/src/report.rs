//! What a sweep writes: one bench-data JSON document (area `sweep`) and one
//! CSV per run, named `<date>-<revision>[-<label>]`, with the plots beside
//! them. The JSON holds everything the plots are drawn from, so
//! `cuzk-sweep plot` redraws them from a saved file.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use cuzk_engine::bench::grid::{Grid, Point};
use cuzk_engine::bench::{Machine, Spread};
use serde::{Deserialize, Serialize};

/// A sweep's bench-data document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepDoc {
    pub revision: String,
    pub date: String,
    pub machine: Machine,
    /// The exact command line.
    pub command: String,
    /// What was swept.
    pub sweep: SweepSetup,
    /// One per circuit and grid point that ran, in the order they ran.
    pub results: Vec<PointResult>,
    /// The circuits and grid points that failed, with the error.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<Failure>,
}

/// A circuit at a grid point that could not be measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    pub circuit: String,
    pub settings: Point,
    /// The error chain.
    pub error: String,
}

/// The sweep's fixed settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepSetup {
    /// Circuit specs, e.g. `porep:20`.
    pub circuits: Vec<String>,
    /// Partitions per measured job.
    pub partitions: usize,
    /// Measured jobs per grid point (after one warm-up partition).
    pub repeats: usize,
    pub grid: Grid,
    /// `key=value` settings applied to every point before the grid's.
    pub engine: Vec<String>,
    /// `fake`, `generated`, or parameter files.
    pub params: String,
}

/// The measurements of one circuit at one grid point.
///
/// `median`/`min`/`max`/`q1`/`q3` are seconds per partition (a job's wall
/// time over its partitions) over the repeats, as bench-data expects;
/// `derived.proofs_per_s` is partitions per second at that median.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PointResult {
    /// `sweep/<backend>/<circuit>/<partitions>p/<point>`, e.g.
    /// `sweep/cuda/porep-22/10p/workers_per_device=2`.
    pub name: String,
    pub unit: String,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub q1: f64,
    pub q3: f64,
    pub runs: usize,
    pub derived: Derived,
    pub circuit: String,
    pub partitions: usize,
    /// The grid's value of each swept key at this point.
    pub settings: Point,
    /// The prover backend that ran (`cpu`, `cuda`).
    pub backend: String,
    /// The engine's resolved sizes at this point.
    pub resolved: Resolved,
    /// Partitions per second of each repeat, summarised.
    pub proofs_per_s: Spread,
    /// The least busy device's busy fraction of each repeat, summarised.
    pub gpu_busy: Spread,
    /// Each repeat's wall time, in order.
    pub wall_s: Vec<f64>,
    /// Per-stage medians of the repeat whose wall time is the median.
    pub stages: Vec<StageMedian>,
    pub notes: String,
}

/// Rates at the median (bench-data's `derived`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Derived {
    pub proofs_per_s: f64,
    pub gpu_busy: f64,
}

/// What the engine made of the settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resolved {
    pub devices: usize,
    pub workers_per_device: usize,
    pub synthesis_concurrency: usize,
    pub dispatch_bound: usize,
}

/// One stage's median in one job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageMedian {
    pub stage: String,
    pub count: usize,
    pub median_ms: f64,
}

/// The file stem of a run: `<date>-<revision>[-<label>]`.
pub fn stem(date: &str, revision: &str, label: Option<&str>) -> String {
    let date = if date.is_empty() { "undated" } else { date };
    let mut s = format!("{date}-{}", file_safe(revision));
    if let Some(label) = label.filter(|l| !l.is_empty()) {
        s.push('-');
        s.push_str(&file_safe(label));
    }
    s
}

/// `text` with anything but letters, digits, `.`, `_` and `-` as `_`.
pub fn file_safe(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

impl SweepDoc {
    /// Writes `<dir>/<stem>.json` and `<dir>/<stem>.csv` (each through a
    /// temporary file, so a reader never sees half of one); returns their
    /// paths.
    pub fn write(&self, dir: &Path, stem: &str) -> Result<(PathBuf, PathBuf)> {
        let json = dir.join(format!("{stem}.json"));
        let csv = dir.join(format!("{stem}.csv"));
        write_atomically(&json, &serde_json::to_vec_pretty(self)?)?;
        write_atomically(&csv, self.csv().as_bytes())?;
        Ok((json, csv))
    }

    /// Reads a document [`SweepDoc::write`] wrote.
    pub fn read(path: &Path) -> Result<SweepDoc> {
        let text = fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        serde_json::from_slice(&text)
            .with_context(|| format!("{} is not a cuzk-sweep JSON document", path.display()))
    }

    /// One header line, then one line per result.
    pub fn csv(&self) -> String {
        let keys: Vec<&str> = self.sweep.grid.keys().collect();
        let mut header = vec!["circuit", "partitions", "backend"];
        header.extend(&keys);
        header.extend([
            "workers_per_device_resolved",
            "synthesis_concurrency_resolved",
            "repeats",
            "proofs_per_s_median",
            "proofs_per_s_min",
            "proofs_per_s_max",
            "proofs_per_s_q1",
            "proofs_per_s_q3",
            "s_per_partition_median",
            "s_per_partition_min",
            "s_per_partition_max",
            "gpu_busy_median",
            "gpu_busy_min",
            "gpu_busy_max",
        ]);
        let mut out = header.join(",");
        out.push('\n');
        for r in &self.results {
            let mut row = vec![
                csv_field(&r.circuit),
                r.partitions.to_string(),
                csv_field(&r.backend),
            ];
            row.extend(
                keys.iter()
                    .map(|k| csv_field(r.settings.get(k).unwrap_or(""))),
            );
            row.extend([
                r.resolved.workers_per_device.to_string(),
                r.resolved.synthesis_concurrency.to_string(),
                r.runs.to_string(),
            ]);
            row.extend(
                [
                    r.proofs_per_s.median,
                    r.proofs_per_s.min,
                    r.proofs_per_s.max,
                    r.proofs_per_s.q1,
                    r.proofs_per_s.q3,
                    r.median,
                    r.min,
                    r.max,
                    r.gpu_busy.median,
                    r.gpu_busy.min,
                    r.gpu_busy.max,
                ]
                .iter()
                .map(|v| format!("{v:.6}")),
            );
            let _ = writeln!(out, "{}", row.join(","));
        }
        out
    }
}

/// A CSV field, quoted when it holds a comma, a quote or a line break.
fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_owned()
    }
}

/// Writes `bytes` to `path` atomically (cuzk-groth16-cuda's
/// `write_atomically`: a uniquely named temporary sibling, then a rename).
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    cuzk_groth16_cuda::write_atomically(path, |w| std::io::Write::write_all(w, bytes))
        .with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stems_and_csv_fields_are_safe() {
        assert_eq!(stem("2026-12-01", "3f2c1ab", None), "2026-12-01-3f2c1ab");
        assert_eq!(
            stem("", "3f2c1ab-dirty", Some("porep 22/gpu")),
            "undated-3f2c1ab-dirty-porep_22_gpu"
        );
        assert_eq!(csv_field("porep:20"), "porep:20");
        assert_eq!(csv_field("[0,1]"), "\"[0,1]\"");
        assert_eq!(csv_field("a\"b"), "\"a\"\"b\"");
    }
}
