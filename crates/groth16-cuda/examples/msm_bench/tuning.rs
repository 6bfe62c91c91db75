//! msm_bench's tuning runs (`#[path]`-included by `msm_bench.rs`): the
//! accumulation kernel's variants, the fastest of which the other figures
//! use, the bucket reduction's merge fans and the scatter's batches.

use std::sync::Arc;

use anyhow::{Context, Result};
use cuzk_groth16_cuda::cuda::Gpu;
use cuzk_groth16_cuda::msm::{Accumulate, DeviceBases, GpuMsm, MsmConfig};
use serde_json::Value;

use crate::{BenchCurve, Kind, log, result, scalars, time_gpu};

/// The accumulation kernel's variants to time: MSM_BENCH_ACCUMULATE
/// (comma-separated names as `Accumulate`'s Debug writes them), by default
/// the five XYZZ variants. The batch-affine ones reserve gigabytes of local
/// memory in the process's context once launched, so they are timed in a
/// run of their own (with MSM_BENCH_VARIANTS_ONLY=1).
fn accumulate_variants() -> Result<Vec<Accumulate>> {
    let all = [
        Accumulate::Plain,
        Accumulate::Prefetch,
        Accumulate::Prefetch128,
        Accumulate::PlainV4,
        Accumulate::Prefetch128V4,
        Accumulate::BatchAffine128,
        Accumulate::BatchAffine256,
    ];
    let Ok(list) = std::env::var("MSM_BENCH_ACCUMULATE") else {
        return Ok(all[..5].to_vec());
    };
    list.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|name| {
            all.iter()
                .find(|a| format!("{a:?}") == name.trim())
                .copied()
                .with_context(|| {
                    format!("MSM_BENCH_ACCUMULATE: unknown variant {name:?}; known: {all:?}")
                })
        })
        .collect()
}

/// The bucket reduction's merge fans to time (MSM_BENCH_MERGE_FAN, comma-
/// separated log2 values; unset: none).
pub(crate) fn merge_fans() -> Result<Vec<u32>> {
    env_numbers("MSM_BENCH_MERGE_FAN", "a log2 fan")
}

/// The comma-separated numbers of environment variable `var` (unset: none).
fn env_numbers(var: &str, what: &str) -> Result<Vec<u32>> {
    let Ok(list) = std::env::var(var) else {
        return Ok(Vec::new());
    };
    list.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|v| {
            v.trim()
                .parse()
                .with_context(|| format!("{var}: {v:?} is not {what}"))
        })
        .collect()
}

/// Times each merge fan of the bucket reduction on 2^lg random scalars
/// (`what` names the bases), with one profiled run each for the reduction
/// phase; every sum checked against the first fan's.
pub(crate) fn time_merge_fans<A: BenchCurve>(
    gpu: &Arc<Gpu>,
    bases: &DeviceBases<A>,
    lg: u32,
    what: &str,
    config: MsmConfig,
    extra: &mut Vec<Value>,
) -> Result<()> {
    let n = 1usize << lg;
    let d = gpu.upload(&scalars(Kind::Random, n, 7000 + u64::from(lg)))?;
    let mut first: Option<(u32, A::Curve)> = None;
    for fan in merge_fans()? {
        let config = MsmConfig {
            merge_fan_log2: fan,
            ..config
        };
        let m = GpuMsm::with_config(Arc::clone(gpu), config);
        let (stat, got) = time_gpu(3, || Ok(m.msm(bases, &d, None)?))?;
        match first {
            None => first = Some((fan, got)),
            Some((f, want)) => anyhow::ensure!(
                got == want,
                "{} {what} 2^{lg}: merge fan 2^{fan} differs from 2^{f}",
                A::NAME
            ),
        }
        let p = GpuMsm::with_config(
            Arc::clone(gpu),
            MsmConfig {
                profile: true,
                ..config
            },
        );
        p.msm(bases, &d, None)?;
        let reduction = p
            .last_profile()
            .iter()
            .find(|(phase, _)| *phase == "bucket reduction")
            .map_or(f64::NAN, |(_, t)| *t);
        log(format!(
            "{} {what} random 2^{lg} merge fan 2^{fan}: {:.4} s (reduction {:.2} ms)",
            A::NAME,
            stat.median,
            reduction * 1e3
        ));
        extra.push(result(
            format!("msm/{}/2^{lg}/random/{what}/merge_fan_log2={fan}", A::NAME),
            &stat,
            n,
            None,
            format!(
                "bucket reduction's merge, 2^{fan} ranges a launch; a profiled run's bucket \
                 reduction phase {:.2} ms",
                reduction * 1e3
            ),
        ));
    }
    Ok(())
}

/// Times the accumulation kernel's variants on 2^lg random scalars and
/// returns the configuration with the fastest, recording each.
pub(crate) fn pick_accumulate<A: BenchCurve>(
    gpu: &Arc<Gpu>,
    bases: &DeviceBases<A>,
    lg: u32,
    extra: &mut Vec<Value>,
) -> Result<MsmConfig> {
    let n = 1usize << lg;
    let d = gpu.upload(&scalars(Kind::Random, n, 5000 + u64::from(lg)))?;
    let mut best = (f64::MAX, MsmConfig::default());
    let mut first: Option<(Accumulate, A::Curve)> = None;
    for accumulate in accumulate_variants()? {
        let config = MsmConfig {
            accumulate,
            ..MsmConfig::default()
        };
        let m = GpuMsm::with_config(Arc::clone(gpu), config);
        let (stat, got) = time_gpu(3, || Ok(m.msm(bases, &d, None)?))?;
        // Every variant's sum against the first's, in the same run.
        match first {
            None => first = Some((accumulate, got)),
            Some((v, want)) => anyhow::ensure!(
                got == want,
                "{} random 2^{lg}: {accumulate:?} differs from {v:?}",
                A::NAME
            ),
        }
        log(format!(
            "{} random 2^{lg} {accumulate:?}: {:.4} s",
            A::NAME,
            stat.median
        ));
        extra.push(result(
            format!("msm/{}/2^{lg}/random/accumulate={accumulate:?}", A::NAME),
            &stat,
            n,
            None,
            "accumulation kernel variant; the fastest is used for this curve's other results"
                .into(),
        ));
        if stat.median < best.0 {
            best = (stat.median, config);
        }
    }
    Ok(best.1)
}

/// The scatter batches to time (MSM_BENCH_SCATTER, comma-separated
/// `MsmConfig::scatter_batch` values; unset: none).
pub(crate) fn scatter_batches() -> Result<Vec<u32>> {
    env_numbers("MSM_BENCH_SCATTER", "a batch size")
}

/// Times each scatter batch on 2^lg scalars of `kind` (`what` names the
/// bases), with one profiled run each for the scatter phase; every sum
/// checked against the first batch's.
pub(crate) fn time_scatter_batches<A: BenchCurve>(
    gpu: &Arc<Gpu>,
    bases: &DeviceBases<A>,
    lg: u32,
    kind: Kind,
    what: &str,
    config: MsmConfig,
    extra: &mut Vec<Value>,
) -> Result<()> {
    let n = 1usize << lg;
    let d = gpu.upload(&scalars(kind, n, 8000 + u64::from(lg)))?;
    let mut first: Option<(u32, A::Curve)> = None;
    for batch in scatter_batches()? {
        let config = MsmConfig {
            scatter_batch: batch,
            ..config
        };
        let m = GpuMsm::with_config(Arc::clone(gpu), config);
        let (stat, got) = time_gpu(5, || Ok(m.msm(bases, &d, None)?))?;
        match first {
            None => first = Some((batch, got)),
            Some((b, want)) => anyhow::ensure!(
                got == want,
                "{} {what} {} 2^{lg}: scatter batch {batch} differs from {b}",
                A::NAME,
                kind.name()
            ),
        }
        let p = GpuMsm::with_config(
            Arc::clone(gpu),
            MsmConfig {
                profile: true,
                ..config
            },
        );
        p.msm(bases, &d, None)?;
        let phases: Vec<String> = p
            .last_profile()
            .iter()
            .map(|(phase, t)| format!("{phase} {:.2} ms", t * 1e3))
            .collect();
        log(format!(
            "{} {what} {} 2^{lg} scatter batch {batch}: {:.4} s ({})",
            A::NAME,
            kind.name(),
            stat.median,
            phases.join(", ")
        ));
        extra.push(result(
            format!(
                "msm/{}/2^{lg}/{}/{what}/scatter_batch={batch}",
                A::NAME,
                kind.name()
            ),
            &stat,
            n,
            None,
            format!(
                "windows whose sorting atomics a scatter thread has in flight; the sum equals \
                 the first batch's; a profiled run's phases: {}",
                phases.join(", ")
            ),
        ));
    }
    Ok(())
}
