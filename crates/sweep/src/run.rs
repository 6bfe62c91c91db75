//! Runs a sweep: for each circuit, parameters once; for each grid point, a
//! fresh engine, one warm-up partition, then `repeats` measured jobs of
//! `partitions` partitions. The JSON and CSV are rewritten after every grid
//! point (a sweep cut short keeps what it measured) and the plots after
//! every circuit.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, ensure};
use cuzk_engine::bench::grid::{Grid, Point};
use cuzk_engine::bench::{self, BenchParams, BenchReport, Machine, ParamsSource, Spread};
use cuzk_engine::{Engine, EngineConfig, ShapeId, TimelineData};
use cuzk_synth::circuits::{BuiltinCircuit, CircuitSpec};

use crate::report::{
    Derived, Failure, PointResult, Resolved, StageMedian, SweepDoc, SweepSetup, file_safe, stem,
    write_atomically,
};

/// Everything a sweep needs, parsed and checked.
#[derive(Debug, Clone)]
pub struct Plan {
    pub circuits: Vec<CircuitSpec>,
    pub partitions: usize,
    pub repeats: usize,
    pub grid: Grid,
    /// `key=value` applied to every point before the grid's values.
    pub engine: Vec<String>,
    /// Parameters of each circuit (same order as `circuits`).
    pub params: Vec<ParamsSource>,
    /// Where the files go (created if missing).
    pub out: PathBuf,
    pub revision: String,
    pub label: Option<String>,
    /// The command line, for the record.
    pub command: String,
    /// Also write each point's Chrome trace (of its median repeat) into
    /// `<stem>-timelines/`.
    pub timelines: bool,
}

impl Plan {
    /// Checks what can be checked before any work: counts, and every grid
    /// value against the engine's configuration.
    pub fn check(&self) -> Result<EngineConfig> {
        ensure!(!self.circuits.is_empty(), "no circuit given (--circuit)");
        ensure!(self.partitions > 0, "--partitions must be at least 1");
        ensure!(self.repeats > 0, "--repeats must be at least 1");
        ensure!(
            self.params.len() == self.circuits.len(),
            "parameters for {} circuits, not {}",
            self.params.len(),
            self.circuits.len()
        );
        let base = EngineConfig::default()
            .with_overrides(self.engine.iter().map(String::as_str))
            .context("--engine")?;
        self.grid.validate(&base).context("--grid")?;
        Ok(base)
    }
}

/// What a finished sweep wrote. Points that failed are in
/// `doc.failures`; the rest were measured.
#[derive(Debug)]
pub struct Written {
    pub json: PathBuf,
    pub csv: PathBuf,
    pub svgs: Vec<PathBuf>,
    pub doc: SweepDoc,
}

/// Runs the sweep and writes its files; progress goes to stderr. An error
/// means nothing could run (a bad plan, an unwritable folder); a grid point
/// that fails is recorded in the document's `failures` instead.
pub fn run(plan: &Plan) -> Result<Written> {
    let base = plan.check()?;
    fs::create_dir_all(&plan.out).with_context(|| format!("creating {}", plan.out.display()))?;
    let mut doc = SweepDoc {
        revision: plan.revision.clone(),
        date: bench::today(),
        machine: Machine::detect(),
        command: plan.command.clone(),
        sweep: SweepSetup {
            circuits: plan.circuits.iter().map(ToString::to_string).collect(),
            partitions: plan.partitions,
            repeats: plan.repeats,
            grid: plan.grid.clone(),
            engine: plan.engine.clone(),
            params: describe_params(&plan.params),
        },
        results: Vec::new(),
        failures: Vec::new(),
    };
    let stem = stem(&doc.date, &doc.revision, plan.label.as_deref());
    let points = plan.grid.points();
    eprintln!(
        "sweep {stem}: {} circuit(s) x {} grid point(s) x {} repeat(s) of {} partitions; GPU: {}",
        plan.circuits.len(),
        points.len(),
        plan.repeats,
        plan.partitions,
        doc.machine.gpu
    );
    for (spec, source) in plan.circuits.iter().zip(&plan.params) {
        let t = Instant::now();
        let params = match BenchParams::prepare(spec, source) {
            Ok(p) => p,
            Err(e) => {
                // Every point of this circuit fails the same way; the other
                // circuits still run.
                let error = format!("parameters ({}): {e}", source.describe());
                eprintln!("{spec}: FAILED: {error}");
                for point in &points {
                    doc.failures.push(Failure {
                        circuit: spec.to_string(),
                        settings: point.clone(),
                        error: error.clone(),
                    });
                }
                doc.write(&plan.out, &stem)?;
                continue;
            }
        };
        eprintln!(
            "{spec}: parameters ({}) in {:.1} s",
            source.describe(),
            t.elapsed().as_secs_f64()
        );
        for point in &points {
            // A point that fails (a setting the machine cannot take, say) is
            // recorded and the sweep goes on.
            match run_point(plan, &base, spec, &params, point, &stem) {
                Ok(result) => doc.results.push(result),
                Err(e) => {
                    eprintln!("{spec} {point}: FAILED: {e:#}");
                    doc.failures.push(Failure {
                        circuit: spec.to_string(),
                        settings: point.clone(),
                        error: format!("{e:#}"),
                    });
                }
            }
            doc.write(&plan.out, &stem)?;
        }
        crate::plot::draw(&doc, &plan.out, &stem)?;
    }
    let (json, csv) = doc.write(&plan.out, &stem)?;
    let svgs = crate::plot::draw(&doc, &plan.out, &stem)?;
    Ok(Written {
        json,
        csv,
        svgs,
        doc,
    })
}

fn describe_params(params: &[ParamsSource]) -> String {
    let mut names: Vec<String> = params.iter().map(ParamsSource::describe).collect();
    names.dedup();
    names.join(", ")
}

/// One circuit at one grid point: a fresh engine, a warm-up, the repeats.
fn run_point(
    plan: &Plan,
    base: &EngineConfig,
    spec: &CircuitSpec,
    params: &BenchParams,
    point: &Point,
    stem: &str,
) -> Result<PointResult> {
    let overrides: Vec<String> = point.overrides().collect();
    let config = base
        .clone()
        .with_overrides(overrides.iter().map(String::as_str))?;
    let engine = Engine::new(config)?;
    params.register(&engine)?;
    let shape = ShapeId(spec.to_string());
    let circuit = |seed| spec.build(seed);
    let t = Instant::now();
    bench::warm_up_with(
        &engine,
        &shape,
        &params.params,
        circuit,
        BuiltinCircuit::witness,
    )?;
    let warm_s = t.elapsed().as_secs_f64();

    let mut runs: Vec<(BenchReport, TimelineData)> = Vec::with_capacity(plan.repeats);
    for repeat in 0..plan.repeats {
        let (proofs, report, timeline) = bench::measure_with(
            &engine,
            &shape,
            &params.params,
            plan.partitions,
            circuit,
            BuiltinCircuit::witness,
        )?;
        ensure!(
            proofs.len() == plan.partitions,
            "{} proofs for {} partitions",
            proofs.len(),
            plan.partitions
        );
        eprintln!(
            "{spec} {point} [{}/{}]: {:.3} s, {:.3} proofs/s, busy {:.1}%",
            repeat + 1,
            plan.repeats,
            report.wall_s,
            report.proofs_per_second(),
            report.busy_fraction() * 100.0
        );
        runs.push((report, timeline));
    }

    let seconds = Spread::of(
        &runs
            .iter()
            .map(|(r, _)| r.seconds_per_partition)
            .collect::<Vec<_>>(),
    );
    let rates = Spread::of(
        &runs
            .iter()
            .map(|(r, _)| r.proofs_per_second())
            .collect::<Vec<_>>(),
    );
    let busy = Spread::of(
        &runs
            .iter()
            .map(|(r, _)| r.busy_fraction())
            .collect::<Vec<_>>(),
    );
    // The repeat closest to the median wall time stands for the point.
    let typical = runs
        .iter()
        .min_by(|(a, _), (b, _)| {
            (a.seconds_per_partition - seconds.median)
                .abs()
                .total_cmp(&(b.seconds_per_partition - seconds.median).abs())
        })
        .context("no repeat ran")?;
    let (report, timeline) = typical;
    let config = &report.config;
    let circuit_name = file_safe(&spec.to_string().replace(':', "-"));
    if plan.timelines {
        let dir = plan.out.join(format!("{stem}-timelines"));
        fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let path = dir.join(format!(
            "{circuit_name}-{}.json",
            file_safe(&point.to_string())
        ));
        write_atomically(&path, &serde_json::to_vec(&timeline.chrome_trace())?)?;
    }
    let gaps: Vec<String> = report
        .summary
        .devices
        .iter()
        .map(|d| {
            let ms: Vec<String> = d
                .largest_gaps
                .iter()
                .map(|g| format!("{:.1}", g.ms))
                .collect();
            format!("device {}: [{}] ms", d.device, ms.join(", "))
        })
        .collect();
    Ok(PointResult {
        name: format!(
            "sweep/{}/{circuit_name}/{}p/{point}",
            config.backend, plan.partitions
        ),
        unit: "s".into(),
        median: seconds.median,
        min: seconds.min,
        max: seconds.max,
        q1: seconds.q1,
        q3: seconds.q3,
        runs: seconds.runs,
        derived: Derived {
            proofs_per_s: if seconds.median > 0.0 {
                1.0 / seconds.median
            } else {
                0.0
            },
            gpu_busy: busy.median,
        },
        circuit: spec.to_string(),
        partitions: plan.partitions,
        settings: point.clone(),
        backend: config.backend.to_owned(),
        resolved: Resolved {
            devices: config.devices.len(),
            workers_per_device: config.workers_per_device,
            synthesis_concurrency: config.synthesis_concurrency,
            dispatch_bound: config.dispatch_bound,
        },
        proofs_per_s: rates,
        gpu_busy: busy,
        wall_s: runs.iter().map(|(r, _)| r.wall_s).collect(),
        stages: report
            .summary
            .stages
            .iter()
            .map(|s| StageMedian {
                stage: s.stage.to_owned(),
                count: s.count,
                median_ms: s.median_ms,
            })
            .collect(),
        notes: format!(
            "seconds per partition of one {}-partition job (its wall time over its partitions), \
             over {} repeats after a warm-up partition ({warm_s:.2} s){}; gpu_busy: the least busy \
             device's time inside kernel regions between its first and its last; largest idle gaps \
             of the median repeat: {}",
            plan.partitions,
            plan.repeats,
            if params.is_fake() {
                "; fake parameters (proofs do not verify)"
            } else {
                ""
            },
            gaps.join("; ")
        ),
    })
}

/// Where the REV file or git says the sources are: `--rev` first, then a
/// `REV` file in the working directory or beside the executable, then
/// `git rev-parse --short HEAD`, then `unknown`.
pub fn revision(given: Option<&str>) -> String {
    if let Some(rev) = given.map(str::trim).filter(|r| !r.is_empty()) {
        return rev.to_owned();
    }
    let beside_exe = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("REV")));
    for path in [Some(PathBuf::from("REV")), beside_exe]
        .into_iter()
        .flatten()
    {
        if let Some(rev) = read_rev(&path) {
            return rev;
        }
    }
    std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

fn read_rev(path: &Path) -> Option<String> {
    let text = fs::read_to_string(path).ok()?;
    let rev = text.lines().next()?.trim();
    (!rev.is_empty()).then(|| rev.to_owned())
}
