//! Throughput runs: N partitions of one shape through an engine, with the
//! timeline and its summary. `examples/engine_bench.rs` wraps this for the
//! command line; on the GPU machine the same call measures the GPU backend.

use std::time::Instant;

use bellperson::Circuit;
use bellperson::groth16::Proof;
use blstrs::Scalar;
use cuzk_groth16_cuda::Bls12;
use serde::Serialize;

use crate::cache::{ParamsRef, ShapeId};
use crate::engine::{Engine, ProofRequest, ResolvedConfig};
use crate::error::Result;
use crate::timeline::{TimelineData, TimelineSummary};

/// What one measured job gave.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    pub shape: String,
    pub partitions: usize,
    /// From submission to the last proof.
    pub wall_s: f64,
    /// `wall_s / partitions`.
    pub seconds_per_partition: f64,
    pub config: ResolvedConfig,
    pub summary: TimelineSummary,
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
    let warm = ProofRequest::new(shape.clone(), params.clone(), vec![circuit(0)]);
    engine.submit(warm)?.wait_blocking()?;
    engine.timeline().clear();

    let circuits = (1..=partitions as u64).map(&circuit).collect();
    let start = Instant::now();
    let proofs = engine
        .submit(ProofRequest::new(shape.clone(), params.clone(), circuits))?
        .wait_blocking()?;
    let wall_s = start.elapsed().as_secs_f64();
    let timeline = engine.timeline().snapshot();
    let report = BenchReport {
        shape: shape.to_string(),
        partitions,
        wall_s,
        seconds_per_partition: wall_s / partitions.max(1) as f64,
        config: engine.config().clone(),
        summary: timeline.summary(),
    };
    Ok((proofs, report, timeline))
}
