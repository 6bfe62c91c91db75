//! The load test's timings as a bench-data file (`CUZK_LATENCY_JSON`).

use std::time::Duration;

use crate::common;

/// A one-sample result in bench-data's format.
pub fn one(name: &str, d: Duration, notes: &str) -> serde_json::Value {
    let t = d.as_secs_f64();
    serde_json::json!({
        "name": name, "unit": "s", "median": t, "min": t, "max": t, "runs": 1, "notes": notes,
    })
}

/// The first line a command prints, trimmed; empty when it cannot run.
fn first_line(cmd: &str, args: &[&str]) -> String {
    std::process::Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .map(|l| l.trim().to_owned())
        })
        .unwrap_or_default()
}

/// Writes `results` as a bench-data file (revision, date and command from
/// CUZK_REVISION, CUZK_DATE and CUZK_COMMAND, set by whoever runs it).
pub fn write_bench_data(path: &str, results: Vec<serde_json::Value>) {
    let env = |k: &str| std::env::var(k).unwrap_or_default();
    let query = |q: &str| {
        first_line(
            "nvidia-smi",
            &[&format!("--query-gpu={q}"), "--format=csv,noheader"],
        )
    };
    let json = serde_json::json!({
        "revision": env("CUZK_REVISION"),
        "date": env("CUZK_DATE"),
        "machine": {
            "gpu": query("name"),
            "driver": query("driver_version"),
            "cpus": std::thread::available_parallelism().map_or(0, |n| n.get()),
            "backend": common::expected_backend(),
        },
        "command": env("CUZK_COMMAND"),
        "results": results,
    });
    std::fs::write(path, serde_json::to_vec_pretty(&json).unwrap()).unwrap();
}
