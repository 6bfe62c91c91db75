//! The `cuzk-sweep` binary end to end on the CPU backend: two tiny circuits
//! × a two-value grid × two repeats write a JSON document, a CSV and a plot
//! that parse and hold one result per circuit and grid point with sane
//! numbers; `cuzk-sweep plot` redraws the same plot from the JSON; a bad
//! grid key fails before any work, naming the key; a grid point the engine
//! refuses is recorded as a failure while the others are measured.

use std::path::Path;
use std::process::Command;

use cuzk_sweep::SweepDoc;

const BIN: &str = env!("CARGO_BIN_EXE_cuzk-sweep");

fn sweep(args: &[&str], dir: &Path) -> std::process::Output {
    Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .output()
        .expect("cuzk-sweep runs")
}

fn files_ending(dir: &Path, suffix: &str) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    v.sort();
    v
}

#[test]
fn a_cpu_sweep_writes_json_csv_and_plots_that_parse() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let output = sweep(
        &[
            "run",
            "--circuit",
            "porep:7,porep:8",
            "--partitions",
            "2",
            "--repeats",
            "2",
            "--grid",
            "workers_per_device=1,2",
            "--engine",
            "backend=cpu",
            "--rev",
            "test123",
            "--label",
            "cpu",
            "--timelines",
            "--out",
            out.to_str().unwrap(),
        ],
        tmp.path(),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "cuzk-sweep failed:\n{stderr}");

    let json = files_ending(&out, ".json");
    assert_eq!(json.len(), 1, "{json:?}");
    let name = json[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.ends_with("-test123-cpu.json"), "{name}");
    let stem = name.trim_end_matches(".json");

    let doc = SweepDoc::read(&json[0]).unwrap();
    assert_eq!(doc.revision, "test123");
    assert!(
        doc.command.contains("--grid workers_per_device=1,2"),
        "{}",
        doc.command
    );
    assert!(doc.machine.cpus > 0);
    assert_eq!(doc.sweep.circuits, ["porep:7", "porep:8"]);
    assert_eq!(
        doc.results.len(),
        4,
        "one result per circuit and grid point"
    );
    for (r, (circuit, workers)) in doc.results.iter().zip([
        ("porep:7", "1"),
        ("porep:7", "2"),
        ("porep:8", "1"),
        ("porep:8", "2"),
    ]) {
        assert_eq!(r.circuit, circuit);
        assert_eq!(r.settings.get("workers_per_device"), Some(workers));
        assert_eq!(r.resolved.workers_per_device.to_string(), workers);
        assert_eq!(r.backend, "cpu");
        assert_eq!(r.runs, 2);
        assert_eq!(r.wall_s.len(), 2);
        assert!(
            r.median > 0.0 && r.min <= r.median && r.median <= r.max,
            "{r:?}"
        );
        assert!(r.q1 <= r.median && r.median <= r.q3, "{r:?}");
        assert!(r.derived.proofs_per_s > 0.0, "{r:?}");
        assert!(
            (r.derived.proofs_per_s * r.median - 1.0).abs() < 1e-9,
            "proofs/s is the rate at the median"
        );
        assert!(
            r.proofs_per_s.min > 0.0 && r.proofs_per_s.max < 1e6,
            "{r:?}"
        );
        assert!(
            r.gpu_busy.min > 0.0 && r.gpu_busy.max <= 1.0,
            "busy fraction {:?}",
            r.gpu_busy
        );
        assert!(r.stages.iter().any(|s| s.stage == "kernel_region"));
        assert!(r.name.starts_with("sweep/cpu/porep-"), "{}", r.name);
        assert!(r.notes.contains("2-partition job"), "{}", r.notes);
    }

    let csv = std::fs::read_to_string(out.join(format!("{stem}.csv"))).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 1 + 4, "{csv}");
    let header: Vec<&str> = lines[0].split(',').collect();
    assert_eq!(
        &header[..4],
        ["circuit", "partitions", "backend", "workers_per_device"]
    );
    let rate = header
        .iter()
        .position(|h| *h == "proofs_per_s_median")
        .unwrap();
    for line in &lines[1..] {
        let cells: Vec<&str> = line.split(',').collect();
        assert_eq!(cells.len(), header.len(), "{line}");
        assert!(cells[rate].parse::<f64>().unwrap() > 0.0, "{line}");
    }

    let svg_path = out.join(format!("{stem}-workers_per_device.svg"));
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    for text in ["proofs/s", "GPU busy fraction", "porep:7", "porep:8"] {
        assert!(svg.contains(text), "the plot lacks {text}");
    }
    let traces = files_ending(&out.join(format!("{stem}-timelines")), ".json");
    assert_eq!(traces.len(), 4, "{traces:?}");

    // Redrawn from the JSON alone: the same plot.
    let again = tmp.path().join("again");
    let output = sweep(
        &[
            "plot",
            json[0].to_str().unwrap(),
            "--out",
            again.to_str().unwrap(),
        ],
        tmp.path(),
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let redrawn =
        std::fs::read_to_string(again.join(format!("{stem}-workers_per_device.svg"))).unwrap();
    assert_eq!(redrawn, svg);
}

#[test]
fn a_bad_grid_fails_before_any_work() {
    let tmp = tempfile::tempdir().unwrap();
    let output = sweep(
        &[
            "run",
            "--circuit",
            "porep:7",
            "--grid",
            "worker_per_device=1,2",
            "--out",
            "out",
        ],
        tmp.path(),
    );
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("worker_per_device"), "{stderr}");
    assert!(!tmp.path().join("out").exists(), "nothing was written");
}

#[test]
fn a_point_that_fails_is_recorded_and_the_others_run() {
    let tmp = tempfile::tempdir().unwrap();
    let output = sweep(
        &[
            "run",
            "--circuit",
            "porep:7",
            "--partitions",
            "1",
            "--repeats",
            "1",
            "--grid",
            "host_memory_budget=1KiB,1GiB",
            "--engine",
            "backend=cpu",
            "--rev",
            "t",
            "--out",
            "out",
        ],
        tmp.path(),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "a failed point fails the run");
    assert!(stderr.contains("1 of 2 points failed"), "{stderr}");
    let json = files_ending(&tmp.path().join("out"), ".json");
    let doc = SweepDoc::read(&json[0]).unwrap();
    assert_eq!(doc.results.len(), 1);
    assert_eq!(
        doc.results[0].settings.get("host_memory_budget"),
        Some("1GiB")
    );
    assert!(doc.results[0].derived.proofs_per_s > 0.0);
    assert_eq!(doc.failures.len(), 1);
    assert_eq!(
        doc.failures[0].settings.get("host_memory_budget"),
        Some("1KiB")
    );
    assert!(!doc.failures[0].error.is_empty());
    let svg = files_ending(&tmp.path().join("out"), ".svg");
    assert_eq!(svg.len(), 1, "the plot of what ran: {svg:?}");
}
