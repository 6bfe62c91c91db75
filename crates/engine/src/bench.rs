//! Throughput runs: N partitions of one shape through an engine, with the
//! timeline and its summary, and what every benchmark front end shares:
//! parameters for a built-in circuit (a file, fake, or generated), the
//! machine's facts, medians and spreads, and grids of engine settings
//! ([`grid`]). `examples/engine_bench.rs` and the `cuzk-sweep` binary wrap
//! this for the command line; on the GPU machine the same calls measure the
//! GPU backend.
//!
//! Nothing here is on a proving path; it exists so that every front end
//! measures the same way.

pub mod grid;

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use bellperson::Circuit;
use bellperson::groth16::{Parameters, Proof, generate_random_parameters};
use blstrs::Scalar;
use cuzk_groth16_cuda::Bls12;
use cuzk_synth::circuits::CircuitSpec;
use cuzk_synth::{Pce, SynthError, Witness};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use serde::{Deserialize, Serialize};

use crate::cache::{ParamsRef, ShapeId};
use crate::engine::{Engine, ProofRequest, ResolvedConfig, WitnessWith};
use crate::error::Result;
use crate::timeline::{TimelineData, TimelineSummary};

/// What one measurement (one job, or jobs submitted together) gave.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    pub shape: String,
    /// Jobs submitted together.
    pub jobs: usize,
    /// Partitions of all the jobs.
    pub partitions: usize,
    /// From submission to the last proof.
    pub wall_s: f64,
    /// `wall_s / partitions`.
    pub seconds_per_partition: f64,
    pub config: ResolvedConfig,
    pub summary: TimelineSummary,
}

impl BenchReport {
    /// Partitions proved per second of wall time.
    pub fn proofs_per_second(&self) -> f64 {
        if self.wall_s > 0.0 {
            self.partitions as f64 / self.wall_s
        } else {
            0.0
        }
    }

    /// The busy fraction of the least busy device (see [`busy_fraction`]).
    pub fn busy_fraction(&self) -> f64 {
        busy_fraction(&self.summary)
    }
}

/// Runs one warm-up partition (records or loads the PCE, loads the
/// parameters, fills the pinned pool; not measured), clears the timeline,
/// then proves `partitions` circuits made by `circuit(i)` as one job and
/// returns the proofs, the report and the timeline.
pub fn run<C, F>(
    engine: &Engine,
    shape: &ShapeId,
    params: &ParamsRef,
    partitions: usize,
    circuit: F,
) -> Result<(Vec<Proof<Bls12>>, BenchReport, TimelineData)>
where
    C: Circuit<Scalar> + Clone + Send + 'static,
    F: Fn(u64) -> C,
{
    warm_up(engine, shape, params, &circuit)?;
    measure(engine, shape, params, partitions, circuit)
}

/// Proves one partition made by `circuit(0)` and forgets its timeline: the
/// one-time work (PCE, parameters, pinned buffers) out of a measurement.
pub fn warm_up<C, F>(engine: &Engine, shape: &ShapeId, params: &ParamsRef, circuit: F) -> Result<()>
where
    C: Circuit<Scalar> + Clone + Send + 'static,
    F: Fn(u64) -> C,
{
    warm_up_with(
        engine,
        shape,
        params,
        circuit,
        Witness::synthesize_with_capacity,
    )
}

/// [`warm_up`] with the circuits' own witness synthesis
/// ([`ProofRequest::with_witness`]).
pub fn warm_up_with<C, F>(
    engine: &Engine,
    shape: &ShapeId,
    params: &ParamsRef,
    circuit: F,
    witness: WitnessWith<C>,
) -> Result<()>
where
    C: Circuit<Scalar> + Clone + Send + 'static,
    F: Fn(u64) -> C,
{
    let warm =
        ProofRequest::new(shape.clone(), params.clone(), vec![circuit(0)]).with_witness(witness);
    engine.submit(warm)?.wait_blocking()?;
    engine.timeline().clear();
    Ok(())
}

/// Proves `partitions` circuits made by `circuit(1..=partitions)` as one
/// job on a warm engine, with the timeline of just that job (the timeline
/// is cleared first).
pub fn measure<C, F>(
    engine: &Engine,
    shape: &ShapeId,
    params: &ParamsRef,
    partitions: usize,
    circuit: F,
) -> Result<(Vec<Proof<Bls12>>, BenchReport, TimelineData)>
where
    C: Circuit<Scalar> + Clone + Send + 'static,
    F: Fn(u64) -> C,
{
    measure_with(
        engine,
        shape,
        params,
        partitions,
        circuit,
        Witness::synthesize_with_capacity,
    )
}

/// [`measure`] with the circuits' own witness synthesis
/// ([`ProofRequest::with_witness`]).
pub fn measure_with<C, F>(
    engine: &Engine,
    shape: &ShapeId,
    params: &ParamsRef,
    partitions: usize,
    circuit: F,
    witness: WitnessWith<C>,
) -> Result<(Vec<Proof<Bls12>>, BenchReport, TimelineData)>
where
    C: Circuit<Scalar> + Clone + Send + 'static,
    F: Fn(u64) -> C,
{
    measure_jobs_with(engine, shape, params, 1, partitions, circuit, witness)
}

/// Submits `jobs` jobs of `partitions` circuits each at once (job `j`
/// proves `circuit(j * partitions + 1 ..= (j + 1) * partitions)`) on a warm
/// engine and waits for all of them: the steady state of a queue that never
/// runs dry, from the first submission to the last proof. Returns the
/// proofs in job order, the report over all partitions, and the timeline of
/// just these jobs (the timeline is cleared first).
pub fn measure_jobs_with<C, F>(
    engine: &Engine,
    shape: &ShapeId,
    params: &ParamsRef,
    jobs: usize,
    partitions: usize,
    circuit: F,
    witness: WitnessWith<C>,
) -> Result<(Vec<Proof<Bls12>>, BenchReport, TimelineData)>
where
    C: Circuit<Scalar> + Clone + Send + 'static,
    F: Fn(u64) -> C,
{
    engine.timeline().clear();
    let requests: Vec<_> = (0..jobs as u64)
        .map(|j| {
            let first = j * partitions as u64 + 1;
            let circuits = (first..first + partitions as u64).map(&circuit).collect();
            ProofRequest::new(shape.clone(), params.clone(), circuits).with_witness(witness)
        })
        .collect();
    let start = Instant::now();
    let handles = requests
        .into_iter()
        .map(|r| engine.submit(r))
        .collect::<Result<Vec<_>>>()?;
    let mut proofs = Vec::with_capacity(jobs * partitions);
    for handle in handles {
        proofs.extend(handle.wait_blocking()?);
    }
    let wall_s = start.elapsed().as_secs_f64();
    let timeline = engine.timeline().snapshot();
    let total = jobs * partitions;
    let report = BenchReport {
        shape: shape.to_string(),
        jobs,
        partitions: total,
        wall_s,
        seconds_per_partition: wall_s / total.max(1) as f64,
        config: engine.config().clone(),
        summary: timeline.summary(),
    };
    Ok((proofs, report, timeline))
}

/// The busy fraction of the least busy device (time inside kernel regions
/// between its first and its last one); 0 when no device ran any.
pub fn busy_fraction(summary: &TimelineSummary) -> f64 {
    let busy = summary
        .devices
        .iter()
        .map(|d| d.busy_fraction)
        .fold(f64::INFINITY, f64::min);
    if busy.is_finite() { busy } else { 0.0 }
}

/// Where a benchmark's parameters come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParamsSource {
    /// A parameter file in bellperson's format (`cuzk setup` makes them).
    File(PathBuf),
    /// Pseudo-random points of the right counts, made in memory
    /// ([`cuzk_groth16_cuda::fake::fake_params`]): the same work for the
    /// prover, proofs that do not verify; for timing only.
    Fake,
    /// Real parameters generated with bellperson from a fixed seed: fine up
    /// to about 2^12 constraints, slow beyond.
    Generate,
}

impl ParamsSource {
    /// `file:PATH`-free names for records: `fake`, `generated`, or the path.
    pub fn describe(&self) -> String {
        match self {
            ParamsSource::File(p) => p.display().to_string(),
            ParamsSource::Fake => "fake".into(),
            ParamsSource::Generate => "generated".into(),
        }
    }
}

/// Parameters for one circuit, ready for any number of engines: what jobs
/// name, and the in-memory set each engine must be handed first.
#[derive(Clone)]
pub struct BenchParams {
    /// What a [`ProofRequest`] names.
    pub params: ParamsRef,
    in_memory: Option<(String, Arc<Parameters<Bls12>>)>,
    fake: bool,
}

impl std::fmt::Debug for BenchParams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BenchParams")
            .field("params", &self.params)
            .field("in_memory", &self.in_memory.is_some())
            .field("fake", &self.fake)
            .finish()
    }
}

impl BenchParams {
    /// Makes (or names) the parameters of `spec` from `source`.
    pub fn prepare(spec: &CircuitSpec, source: &ParamsSource) -> Result<Self> {
        Ok(match source {
            ParamsSource::File(path) => BenchParams {
                params: ParamsRef::File(path.clone()),
                in_memory: None,
                fake: false,
            },
            ParamsSource::Fake => {
                let _s = tracing::info_span!("fake_params", %spec).entered();
                let pce = Pce::record(spec.build(0))?;
                let key = format!("fake {spec}");
                BenchParams {
                    params: ParamsRef::Key(key.clone()),
                    in_memory: Some((key, Arc::new(cuzk_groth16_cuda::fake::fake_params(&pce, 1)))),
                    fake: true,
                }
            }
            ParamsSource::Generate => {
                let _s = tracing::info_span!("generate_params", %spec).entered();
                let mut rng = ChaCha20Rng::seed_from_u64(1);
                let params = generate_random_parameters(spec.build(0), &mut rng)
                    .map_err(SynthError::from)?;
                let key = format!("generated {spec}");
                BenchParams {
                    params: ParamsRef::Key(key.clone()),
                    in_memory: Some((key, Arc::new(params))),
                    fake: false,
                }
            }
        })
    }

    /// Hands the in-memory set (if any) to `engine`; call once per engine
    /// before the first job.
    pub fn register(&self, engine: &Engine) -> Result<()> {
        if let Some((key, params)) = &self.in_memory {
            engine.register_params(key.clone(), Arc::clone(params))?;
        }
        Ok(())
    }

    /// Whether these are fake parameters (proofs will not verify).
    pub fn is_fake(&self) -> bool {
        self.fake
    }
}

/// What a bench-data file records about the machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// The first CUDA device's name, `none` without one.
    pub gpu: String,
    /// The NVIDIA driver version (nvidia-smi), empty without it.
    pub driver: String,
    pub cpus: usize,
    /// The heap allocator in use (`mimalloc`, or `system`:
    /// `cuzk_synth::allocator`); empty in files written before it was kept.
    #[serde(default)]
    pub allocator: String,
}

impl Machine {
    /// This machine's facts.
    pub fn detect() -> Machine {
        Machine {
            gpu: cuzk_gpu_sched::discover()
                .ok()
                .and_then(|d| d.first().map(|d| d.name.clone()))
                .unwrap_or_else(|| "none".into()),
            driver: first_line(
                "nvidia-smi",
                &["--query-gpu=driver_version", "--format=csv,noheader"],
            ),
            cpus: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(0),
            allocator: cuzk_synth::allocator::active_name().to_owned(),
        }
    }
}

/// A bench-data document (docs/BENCHMARKS.md, the bench-data format): the
/// revision and command line given, today's date, this machine, and the
/// results.
pub fn bench_doc(
    revision: &str,
    command: &str,
    results: Vec<serde_json::Value>,
) -> serde_json::Value {
    serde_json::json!({
        "revision": revision,
        "date": today(),
        "machine": Machine::detect(),
        "command": command,
        "results": results,
    })
}

/// Today's date as `YYYY-MM-DD` (from `date`), empty when it cannot run.
pub fn today() -> String {
    first_line("date", &["+%Y-%m-%d"])
}

/// The first line a command prints, trimmed; empty when it cannot run.
fn first_line(cmd: &str, args: &[&str]) -> String {
    Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.lines().next().unwrap_or("").trim().to_owned())
        .unwrap_or_default()
}

/// The median and spread of repeated measurements.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// First and third quartiles (linear interpolation between ranks, as
    /// numpy's default), so `q3 - q1` is the interquartile range.
    pub q1: f64,
    pub q3: f64,
    pub runs: usize,
}

impl Spread {
    /// The spread of `samples`; all zero (and `runs: 0`) for none. NaNs sort
    /// last.
    pub fn of(samples: &[f64]) -> Spread {
        let mut s = samples.to_vec();
        s.sort_by(f64::total_cmp);
        let q = |p: f64| {
            if s.is_empty() {
                return 0.0;
            }
            let at = p * (s.len() - 1) as f64;
            let (lo, hi) = (at.floor() as usize, at.ceil() as usize);
            s[lo] + (s[hi] - s[lo]) * (at - lo as f64)
        };
        Spread {
            median: q(0.5),
            min: s.first().copied().unwrap_or(0.0),
            max: s.last().copied().unwrap_or(0.0),
            q1: q(0.25),
            q3: q(0.75),
            runs: s.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_has_median_quartiles_and_extremes() {
        let s = Spread::of(&[5.0, 1.0, 3.0, 2.0, 4.0]);
        assert_eq!(
            (s.median, s.min, s.max, s.q1, s.q3, s.runs),
            (3.0, 1.0, 5.0, 2.0, 4.0, 5)
        );
        let even = Spread::of(&[4.0, 1.0, 2.0, 3.0]);
        assert_eq!(even.median, 2.5);
        assert_eq!((even.q1, even.q3), (1.75, 3.25));
        let one = Spread::of(&[7.0]);
        assert_eq!(
            (one.median, one.min, one.max, one.q1, one.q3),
            (7.0, 7.0, 7.0, 7.0, 7.0)
        );
        assert_eq!(Spread::of(&[]).runs, 0);
    }

    #[test]
    fn busy_fraction_takes_the_least_busy_device_and_zero_without_one() {
        let summary = |fractions: &[f64]| TimelineSummary {
            proofs: 0,
            window_s: 0.0,
            proofs_per_second: 0.0,
            seconds_per_proof: 0.0,
            devices: fractions
                .iter()
                .enumerate()
                .map(|(device, &busy_fraction)| crate::timeline::DeviceSummary {
                    device,
                    kernel_regions: 1,
                    window_s: 1.0,
                    busy_s: busy_fraction,
                    busy_fraction,
                    largest_gaps: Vec::new(),
                    prep_s: 0.0,
                    prep_under_kernel_s: 0.0,
                })
                .collect(),
            stages: Vec::new(),
        };
        assert_eq!(busy_fraction(&summary(&[0.9, 0.5, 0.7])), 0.5);
        assert_eq!(busy_fraction(&summary(&[])), 0.0);
    }
}
