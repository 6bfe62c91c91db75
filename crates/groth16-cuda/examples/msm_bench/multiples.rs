//! msm_bench's runs over bases carrying their window multiples
//! (`#[path]`-included by `msm_bench.rs`).

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use blstrs::Scalar;
use cuzk_groth16_cuda::cuda::{DeviceBuffer, Gpu};
use cuzk_groth16_cuda::msm::{DeviceBases, GpuMsm, MsmConfig};
use group::Curve;
use serde_json::Value;

use crate::{BenchCurve, Kind, Measured, log, result, scalars, time_gpu};

/// Random MSMs at 2^24 and 2^26 (the scalars of the random series, at
/// most 2^max_log) over bases carrying their window multiples, for each
/// window size in `var` (comma-separated; empty: none): the time to make
/// the multiples, their device memory, the MSM times and a profile at
/// 2^24, each result checked against the plain MSM's of the same run.
pub(crate) fn window_multiples<A: BenchCurve>(
    gpu: &Arc<Gpu>,
    host: &[A],
    max_log: u32,
    config: MsmConfig,
    plain: &[Measured<A>],
    var: (&str, &str),
    extra: &mut Vec<Value>,
) -> Result<()> {
    let list = std::env::var(var.0).unwrap_or_else(|_| var.1.into());
    let windows: Vec<u32> = list
        .split(',')
        .filter(|c| !c.trim().is_empty())
        .map(|c| {
            c.trim()
                .parse()
                .with_context(|| format!("{}: window sizes, comma-separated", var.0))
        })
        .collect::<Result<_>>()?;
    let logs: Vec<u32> = [24, 26].into_iter().filter(|&l| l <= max_log).collect();
    if logs.is_empty() {
        return Ok(());
    }
    let inputs: Vec<(u32, DeviceBuffer<Scalar>)> = logs
        .iter()
        .map(|&lg| {
            // The random series' scalars where it has this size (the same
            // seed otherwise).
            let d = match plain.iter().find(|p| p.lg == lg) {
                Some(p) => gpu.upload(&p.scalars)?,
                None => gpu.upload(&scalars(Kind::Random, 1 << lg, 1000 + u64::from(lg)))?,
            };
            Ok((lg, d))
        })
        .collect::<Result<_>>()?;
    for c in windows {
        let start = Instant::now();
        // All the bases with their multiples, or (where those do not fit
        // the device, e.g. 2^26 G1 bases at c = 20 on an 80 GB card) the
        // first 2^24 for the sizes up to that.
        let (bases, fits) =
            match DeviceBases::upload(gpu, host).and_then(|b| b.with_window_multiples(c)) {
                Ok(b) => (b, max_log),
                Err(e) if max_log > 24 && host.len() >= 1 << 24 => {
                    log(format!(
                        "{} window multiples c = {c} of 2^{max_log} bases: skipped ({e}); \
                     2^24 bases instead",
                        A::NAME
                    ));
                    let b = DeviceBases::upload(gpu, &host[..1 << 24])?.with_window_multiples(c)?;
                    (b, 24)
                }
                Err(e) => return Err(e.into()),
            };
        let made = start.elapsed().as_secs_f64();
        let bytes = bases.device_bytes();
        log(format!(
            "{} window multiples c = {c}: {made:.2} s to upload and make, {:.1} GB",
            A::NAME,
            bytes as f64 / 1e9
        ));
        for (lg, d) in inputs.iter().filter(|(lg, _)| *lg <= fits) {
            let n = 1usize << lg;
            let m = GpuMsm::with_config(Arc::clone(gpu), config);
            let runs = if *lg >= 25 { 3 } else { 5 };
            let (stat, got) = time_gpu(runs, || Ok(m.msm(&bases, d, None)?))?;
            let check = match plain.iter().find(|p| p.lg == *lg) {
                Some(p) if p.gpu == got.to_affine() => "equals the plain MSM's result".to_owned(),
                Some(_) => {
                    log(format!(
                        "MISMATCH: {} random 2^{lg} with multiples of c = {c}",
                        A::NAME
                    ));
                    "MISMATCH: differs from the plain MSM's result".to_owned()
                }
                None => "no plain MSM of this size to compare with".to_owned(),
            };
            let mut notes = format!(
                "bases with window multiples of {c} bits ({:.1} GB on the device, {made:.2} s to \
                 upload and make for 2^{fits} bases); {check}",
                bytes as f64 / 1e9
            );
            if *lg == 24 {
                let p = GpuMsm::with_config(
                    Arc::clone(gpu),
                    MsmConfig {
                        profile: true,
                        ..config
                    },
                );
                p.msm(&bases, d, None)?;
                let phases: Vec<String> = p
                    .last_profile()
                    .iter()
                    .map(|(p, t)| format!("{p} {:.2} ms", t * 1e3))
                    .collect();
                notes.push_str(&format!("; profiled run's phases: {}", phases.join(", ")));
            }
            log(format!(
                "{} random 2^{lg} multiples c = {c}: {:.4} s ({:.3e} points/s); {notes}",
                A::NAME,
                stat.median,
                n as f64 / stat.median
            ));
            extra.push(result(
                format!("msm/{}/2^{lg}/random/multiples={c}", A::NAME),
                &stat,
                n,
                None,
                notes,
            ));
        }
    }
    Ok(())
}
