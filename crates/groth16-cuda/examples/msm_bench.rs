//! Throughput of the GPU MSM (`cuzk_groth16_cuda::msm`) beside bellperson's
//! CPU multiexp (ec-gpu-gen's `multiexp_cpu`, all cores) on the same
//! machine: G1 at 2^20, 2^22, 2^24 and 2^26 points and G2 at 2^22 and 2^24,
//! each with random full-width scalars and with Filecoin-shaped ones (35%
//! zeros, 35% ones, the rest random). Also the window sizes around the
//! chosen one (G1, random, 2^20 and 2^24), ones left to Pippenger against
//! summed apart (G1, Filecoin-shaped, 2^24), a per-phase profile at 2^24,
//! and the accumulation kernel's variants (G1 at 2^24, G2 at 2^22), the
//! fastest of which is used for every other figure of its curve (the
//! JSON's "config" names it), and G1 at 2^24 and 2^26, G2 at 2^24, over
//! bases carrying their window multiples (`DeviceBases::with_window_multiples`,
//! window sizes from MSM_BENCH_MULTIPLES, default 20,22,24, and
//! MSM_BENCH_G2_MULTIPLES, default 20,22). Bases are resident and scalars already on the
//! GPU, as the prover has them; a run is one `GpuMsm` call, result on the
//! host (wall clock: the call waits for its result). One warm-up, then the
//! median of 5 runs (3 at the largest sizes).
//!
//! The CPU baseline runs once per size, after all GPU timings, in a fixed
//! order of priority (G1 random up to 2^24 first), each only where it is
//! predicted to finish within a minute (linearly from the series' size
//! below; a series' first size from G1 random, three times that for G2) and
//! within what is left of a total budget (MSM_BENCH_CPU_BUDGET_S, default
//! 120 s: device time is shared). Its result is checked against the GPU's.
//! Writes the bench-data JSON to stdout; progress to stderr.
//!
//! Usage: msm_bench <short git revision> <the command line, for the record>
//! Environment variables pick the sizes, variants and budget (`Args`'s
//! help); MSM_BENCH_VARIANTS_ONLY=1 checks each variant against the first,
//! and times the merge fans on the same sizes, G1 also over bases with
//! window multiples.

#[path = "common/args.rs"]
mod args;
#[path = "common/mod.rs"]
mod common;
#[path = "msm_bench/multiples.rs"]
mod multiples;
#[path = "msm_bench/tuning.rs"]
mod tuning;
use args::OptionalRecord;
use common::{Stat, machine, today};
use multiples::window_multiples;
use tuning::{merge_fans, pick_accumulate, scatter_batches, time_merge_fans, time_scatter_batches};

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use blstrs::{G1Affine, G2Affine, Scalar};
use clap::Parser;
use cuzk_groth16_cuda::cuda::{DeviceBuffer, Gpu};
use cuzk_groth16_cuda::msm::{DeviceBases, GpuMsm, MsmAffine, MsmConfig, window_bits};
use ec_gpu_gen::multiexp_cpu::{FullDensity, multiexp_cpu};
use ec_gpu_gen::threadpool::Worker;
use ff::{Field, PrimeField};
use group::prime::PrimeCurveAffine;
use group::{Curve, Group};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;
use serde_json::{Value, json};

/// A CPU baseline is run only when predicted to finish within this.
const CPU_LIMIT_S: f64 = 60.0;

/// Throughput of the GPU MSM on GPU 0 beside bellperson's CPU multiexp (G1
/// and G2, random and Filecoin-shaped scalars, window sizes, accumulation
/// variants, bases with window multiples); writes the bench-data JSON to
/// stdout, progress to stderr.
#[derive(Debug, Parser)]
#[command(
    name = "msm_bench",
    args_override_self = true,
    after_help = "Environment:
  MSM_BENCH_MAX_LOG2       largest G1 size, log2 (default 26)
  MSM_BENCH_G2_MAX_LOG2    largest G2 size, log2 (default 24)
  MSM_BENCH_CPU_BUDGET_S   seconds all CPU baselines together may take (default 120)
  MSM_BENCH_ACCUMULATE     accumulation variants to time, comma-separated
                           `Accumulate` names (default the five XYZZ ones)
  MSM_BENCH_VARIANTS_ONLY  1: time only the variants and merge fans (G1 at 2^24
                           or the G1 cap, G2 at 2^22 or the G2 cap)
  MSM_BENCH_MERGE_FAN      bucket reduction merge fans to time, comma-separated
                           log2 values (`MsmConfig::merge_fan_log2`; default none)
  MSM_BENCH_SCATTER        scatter batches to time, comma-separated
                           (`MsmConfig::scatter_batch`; default none): G1 2^24
                           random and Filecoin-shaped, plain and with window
                           multiples, G2 2^22 random
  MSM_BENCH_MULTIPLES      G1 window sizes of bases with window multiples
                           (default 20,22,24; empty: none)
  MSM_BENCH_G2_MULTIPLES   the same for G2 (default 20,22)"
)]
struct Args {
    #[command(flatten)]
    record: OptionalRecord,
}

trait BenchCurve:
    PrimeCurveAffine<Scalar = Scalar>
    + MsmAffine<Projective = <Self as PrimeCurveAffine>::Curve>
    + Send
    + Sync
{
    const NAME: &'static str;
}
impl BenchCurve for G1Affine {
    const NAME: &'static str = "g1";
}
impl BenchCurve for G2Affine {
    const NAME: &'static str = "g2";
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Random,
    Filecoin,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Random => "random",
            Kind::Filecoin => "filecoin",
        }
    }
}

fn log(msg: impl AsRef<str>) {
    eprintln!("[msm_bench] {}", msg.as_ref());
}

/// n random points: per thread a random start and repeated additions of a
/// random step, normalised in parallel (hashing to the curve 2^26 times
/// would take minutes).
fn random_points<A: BenchCurve>(n: usize, seed: u64) -> Vec<A> {
    let chunk = 1 << 16;
    let mut out = vec![A::identity(); n];
    out.par_chunks_mut(chunk).enumerate().for_each(|(i, o)| {
        let mut rng =
            ChaCha20Rng::seed_from_u64(seed ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let step = A::Curve::random(&mut rng);
        let mut p = A::Curve::random(&mut rng);
        let mut proj = Vec::with_capacity(o.len());
        for _ in 0..o.len() {
            proj.push(p);
            p += step;
        }
        A::Curve::batch_normalize(&proj, o);
    });
    out
}

fn scalars(kind: Kind, n: usize, seed: u64) -> Vec<Scalar> {
    let chunk = 1 << 16;
    let mut out = vec![Scalar::ZERO; n];
    out.par_chunks_mut(chunk).enumerate().for_each(|(i, o)| {
        let mut rng =
            ChaCha20Rng::seed_from_u64(seed ^ (i as u64 + 1).wrapping_mul(0xd1b5_4a32_d192_ed03));
        for s in o {
            *s = match kind {
                Kind::Random => Scalar::random(&mut rng),
                Kind::Filecoin => match rng.gen_range(0..100) {
                    0..35 => Scalar::ZERO,
                    35..70 => Scalar::ONE,
                    _ => Scalar::random(&mut rng),
                },
            };
        }
    });
    out
}

/// One warm-up, then `runs` timed calls.
fn time_gpu<T>(runs: usize, mut f: impl FnMut() -> Result<T>) -> Result<(Stat, T)> {
    let mut last = f()?;
    let mut t = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        last = f()?;
        t.push(start.elapsed().as_secs_f64());
    }
    Ok((Stat::of(t), last))
}

fn cpu_msm<A: BenchCurve>(bases: &[A], scalars: &[Scalar]) -> Result<(f64, A::Curve)> {
    let bases = Arc::new(bases[..scalars.len()].to_vec());
    let exps: Arc<Vec<[u8; 32]>> = Arc::new(scalars.par_iter().map(|s| s.to_repr()).collect());
    let worker = Worker::new();
    let start = Instant::now();
    let r = multiexp_cpu::<_, _, A, _>(&worker, (bases, 0), FullDensity, exps)
        .wait()
        .map_err(|e| anyhow::anyhow!("CPU multiexp: {e}"))?;
    Ok((start.elapsed().as_secs_f64(), r))
}

fn result(name: String, s: &Stat, n: usize, baseline: Option<f64>, notes: String) -> Value {
    let mut v = json!({
        "name": name,
        "unit": "s",
        "median": s.median, "min": s.min, "max": s.max, "runs": s.runs,
        "derived": {"points_per_s": n as f64 / s.median},
        "notes": notes,
    });
    if let Some(b) = baseline {
        v["baseline"] = json!({"name": "bellperson-cpu-multiexp", "median": b, "runs": 1});
        v["ratio_vs_baseline"] = json!(b / s.median);
    }
    v
}

/// One GPU measurement, kept until its CPU baseline has had its chance.
struct Measured<A: BenchCurve> {
    curve: &'static str,
    kind: Kind,
    lg: u32,
    scalars: Vec<Scalar>,
    gpu: A,
    stat: Stat,
    window: u32,
}

/// GPU MSMs of one curve and scalar kind over increasing sizes.
fn series<A: BenchCurve>(
    msm: &GpuMsm,
    gpu: &Arc<Gpu>,
    bases: &DeviceBases<A>,
    kind: Kind,
    logs: &[u32],
) -> Result<Vec<Measured<A>>> {
    let mut out = Vec::new();
    for &lg in logs {
        let n = 1usize << lg;
        let s = scalars(kind, n, 1000 + u64::from(lg));
        let d: DeviceBuffer<Scalar> = gpu.upload(&s)?;
        let runs = if lg >= 25 || (A::NAME == "g2" && lg >= 24) {
            3
        } else {
            5
        };
        let (stat, got) = time_gpu(runs, || Ok(msm.msm(bases, &d, None)?))?;
        log(format!(
            "{} {} 2^{lg}: GPU {:.4} s ({:.3e} points/s)",
            A::NAME,
            kind.name(),
            stat.median,
            n as f64 / stat.median
        ));
        out.push(Measured {
            curve: A::NAME,
            kind,
            lg,
            window: window_bits_for::<A>(&s),
            scalars: s,
            gpu: got.to_affine(),
            stat,
        });
    }
    Ok(out)
}

/// Runs the CPU baseline of `m` if `predicted` fits the minute and the
/// budget; returns its result entry and the CPU time, if it ran.
fn baseline<A: BenchCurve>(
    host: &[A],
    m: &Measured<A>,
    predicted: f64,
    budget: &mut f64,
) -> Result<(Value, Option<f64>)> {
    let n = 1usize << m.lg;
    let mut notes = format!("window {} bits", m.window);
    let baseline = if predicted <= CPU_LIMIT_S && predicted <= *budget {
        let (t, want) = cpu_msm(host, &m.scalars)?;
        *budget -= t;
        if want.to_affine() == m.gpu {
            notes.push_str("; GPU result equals the CPU baseline's");
        } else {
            log(format!(
                "MISMATCH: {} {} 2^{}: GPU and CPU results differ",
                m.curve,
                m.kind.name(),
                m.lg
            ));
            notes.push_str("; MISMATCH: GPU result differs from the CPU baseline's");
        }
        log(format!(
            "{} {} 2^{}: CPU {t:.3} s",
            m.curve,
            m.kind.name(),
            m.lg
        ));
        Some(t)
    } else {
        notes.push_str(&format!(
            "; no CPU baseline: predicted {predicted:.0} s, over the {CPU_LIMIT_S} s limit or the \
             {:.0} s left of the baseline budget",
            budget.max(0.0)
        ));
        None
    };
    let name = format!("msm/{}/2^{}/{}", m.curve, m.lg, m.kind.name());
    Ok((result(name, &m.stat, n, baseline, notes), baseline))
}

/// The window the default configuration picks for these scalars: from the
/// number that are neither 0 nor 1.
fn window_bits_for<A: BenchCurve>(s: &[Scalar]) -> u32 {
    let m = s
        .par_iter()
        .filter(|x| !bool::from(x.is_zero()) && **x != Scalar::ONE)
        .count();
    let point_bytes = 4 * std::mem::size_of::<A::Coord>() as u64;
    window_bits(m, MsmConfig::default().max_bucket_bytes / point_bytes)
}

fn main() -> Result<()> {
    let args = Args::parse();
    let revision = args.record.revision_or_unknown();
    let command = args.record.command_or_argv();
    let env_log = |k: &str, d: u32| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let max_log = env_log("MSM_BENCH_MAX_LOG2", 26);
    let g2_max_log = env_log("MSM_BENCH_G2_MAX_LOG2", 24);
    let gpu = Gpu::get(0).context("this benchmark needs a GPU")?;
    GpuMsm::new(Arc::clone(&gpu)).warm_up()?;
    let mut extra = Vec::new();

    let mut budget = env_log("MSM_BENCH_CPU_BUDGET_S", 120) as f64;
    let variants_only = env_log("MSM_BENCH_VARIANTS_ONLY", 0) == 1;

    // G1.
    let start = Instant::now();
    let g1_host = random_points::<G1Affine>(1 << max_log, 1);
    log(format!(
        "2^{max_log} G1 bases in {:.1} s",
        start.elapsed().as_secs_f64()
    ));
    let bases = DeviceBases::upload(&gpu, &g1_host)?;
    let g1_config = pick_accumulate(&gpu, &bases, max_log.min(24), &mut extra)?;
    if variants_only {
        let lg = max_log.min(24);
        time_merge_fans(&gpu, &bases, lg, "plain", g1_config, &mut extra)?;
        for kind in [Kind::Random, Kind::Filecoin] {
            time_scatter_batches(&gpu, &bases, lg, kind, "plain", g1_config, &mut extra)?;
        }
        drop(bases);
        if !merge_fans()?.is_empty() || !scatter_batches()?.is_empty() {
            let n = 1usize << lg;
            let c = cuzk_groth16_cuda::msm::multiples_window_bits(n);
            let bases = DeviceBases::upload(&gpu, &g1_host[..n])?.with_window_multiples(c)?;
            time_merge_fans(&gpu, &bases, lg, "multiples", g1_config, &mut extra)?;
            let kind = Kind::Random;
            time_scatter_batches(&gpu, &bases, lg, kind, "multiples", g1_config, &mut extra)?;
        }
        let g2_host = random_points::<G2Affine>(1 << g2_max_log.min(22), 2);
        let bases = DeviceBases::upload(&gpu, &g2_host)?;
        let g2_lg = g2_max_log.min(22);
        let g2_config = pick_accumulate(&gpu, &bases, g2_lg, &mut extra)?;
        time_merge_fans(&gpu, &bases, g2_lg, "plain", g2_config, &mut extra)?;
        let kind = Kind::Random;
        time_scatter_batches(&gpu, &bases, g2_lg, kind, "plain", g2_config, &mut extra)?;
        return write_doc(&revision, &gpu, &command, g1_config, g2_config, extra);
    }
    let msm = GpuMsm::with_config(Arc::clone(&gpu), g1_config);
    let logs: Vec<u32> = [20, 22, 24, 26]
        .into_iter()
        .filter(|&l| l <= max_log)
        .collect();
    let g1_random = series(&msm, &gpu, &bases, Kind::Random, &logs)?;
    let g1_filecoin = series(&msm, &gpu, &bases, Kind::Filecoin, &logs)?;

    // Window sizes around the model's choice, and ones apart or not.
    for lg in [20u32, 24].into_iter().filter(|&l| l <= max_log) {
        let n = 1usize << lg;
        let s = scalars(Kind::Random, n, 2000 + u64::from(lg));
        let d = gpu.upload(&s)?;
        let chosen = window_bits(n, MsmConfig::default().max_bucket_bytes / 192);
        for c in chosen.saturating_sub(3)..=chosen + 2 {
            let m = GpuMsm::with_config(
                Arc::clone(&gpu),
                MsmConfig {
                    window_bits: Some(c),
                    ..g1_config
                },
            );
            let (stat, _) = time_gpu(5, || Ok(m.g1(&bases, &d)?))?;
            log(format!("g1 random 2^{lg} window {c}: {:.4} s", stat.median));
            extra.push(result(
                format!("msm/g1/2^{lg}/random/window={c}"),
                &stat,
                n,
                None,
                format!("window sweep; the model picks {chosen}"),
            ));
        }
    }
    if max_log >= 24 {
        let n = 1usize << 24;
        let s = scalars(Kind::Filecoin, n, 3000);
        let d = gpu.upload(&s)?;
        for (label, ones_separately) in [("ones-apart", true), ("ones-in-pippenger", false)] {
            let m = GpuMsm::with_config(
                Arc::clone(&gpu),
                MsmConfig {
                    ones_separately,
                    ..g1_config
                },
            );
            let (stat, _) = time_gpu(5, || Ok(m.g1(&bases, &d)?))?;
            log(format!("g1 filecoin 2^24 {label}: {:.4} s", stat.median));
            extra.push(result(
                format!("msm/g1/2^24/filecoin/{label}"),
                &stat,
                n,
                None,
                "ones split".into(),
            ));
        }
        for kind in [Kind::Random, Kind::Filecoin] {
            let s = scalars(kind, n, 4000);
            let d = gpu.upload(&s)?;
            let m = GpuMsm::with_config(
                Arc::clone(&gpu),
                MsmConfig {
                    profile: true,
                    ..g1_config
                },
            );
            let (stat, _) = time_gpu(3, || Ok(m.g1(&bases, &d)?))?;
            let phases: Vec<String> = m
                .last_profile()
                .iter()
                .map(|(p, t)| format!("{p} {:.2} ms", t * 1e3))
                .collect();
            log(format!(
                "g1 {} 2^24 profile: {}",
                kind.name(),
                phases.join(", ")
            ));
            extra.push(result(
                format!("msm/g1/2^24/{}/profiled", kind.name()),
                &stat,
                n,
                None,
                format!(
                    "waits after each phase; phases of the last run: {}",
                    phases.join(", ")
                ),
            ));
        }
    }
    drop(bases);
    window_multiples(
        &gpu,
        &g1_host,
        max_log,
        g1_config,
        &g1_random,
        ("MSM_BENCH_MULTIPLES", "20,22,24"),
        &mut extra,
    )?;

    // G2.
    let start = Instant::now();
    let g2_host = random_points::<G2Affine>(1 << g2_max_log, 2);
    log(format!(
        "2^{g2_max_log} G2 bases in {:.1} s",
        start.elapsed().as_secs_f64()
    ));
    let bases = DeviceBases::upload(&gpu, &g2_host)?;
    let g2_config = pick_accumulate(&gpu, &bases, g2_max_log.min(22), &mut extra)?;
    let msm = GpuMsm::with_config(Arc::clone(&gpu), g2_config);
    let logs: Vec<u32> = [22, 24].into_iter().filter(|&l| l <= g2_max_log).collect();
    let g2_random = series(&msm, &gpu, &bases, Kind::Random, &logs)?;
    let g2_filecoin = series(&msm, &gpu, &bases, Kind::Filecoin, &logs)?;
    drop(bases);
    window_multiples(
        &gpu,
        &g2_host,
        g2_max_log,
        g2_config,
        &g2_random,
        ("MSM_BENCH_G2_MULTIPLES", "20,22"),
        &mut extra,
    )?;

    // CPU baselines within the budget: the small sizes of every series
    // first, then the larger ones. A series' first size is predicted from
    // G1 random at that size (three times that for G2).
    let mut last: HashMap<(&str, &str), (usize, f64)> = HashMap::new();
    let mut entries: Vec<(u32, usize, Value)> = Vec::new();
    // (log2 size, series, curve, kind), in the order their baselines run.
    let series_index = |curve: &str, kind: Kind| match (curve, kind) {
        ("g1", Kind::Random) => 0,
        ("g2", Kind::Random) => 1,
        ("g1", Kind::Filecoin) => 2,
        _ => 3,
    };
    let order: Vec<(u32, usize, &str, Kind)> = [
        (20, "g1", Kind::Random),
        (20, "g1", Kind::Filecoin),
        (22, "g1", Kind::Random),
        (24, "g1", Kind::Random),
        (22, "g2", Kind::Random),
        (22, "g1", Kind::Filecoin),
        (22, "g2", Kind::Filecoin),
        (24, "g1", Kind::Filecoin),
        (24, "g2", Kind::Random),
        (24, "g2", Kind::Filecoin),
        (26, "g1", Kind::Random),
        (26, "g1", Kind::Filecoin),
    ]
    .into_iter()
    .map(|(lg, curve, kind)| (lg, series_index(curve, kind), curve, kind))
    .collect();
    for (lg, i, curve, kind) in order {
        let n = 1usize << lg;
        let predicted = match last.get(&(curve, kind.name())) {
            Some(&(k, t)) => t * n as f64 / k as f64,
            None => last.get(&("g1", "random")).map_or(0.0, |&(k, t)| {
                t * n as f64 / k as f64 * if curve == "g2" { 3.0 } else { 1.0 }
            }),
        };
        let done = if curve == "g1" {
            let list = if kind == Kind::Random {
                &g1_random
            } else {
                &g1_filecoin
            };
            match list.iter().find(|m| m.lg == lg) {
                Some(m) => Some(baseline(&g1_host, m, predicted, &mut budget)?),
                None => None,
            }
        } else {
            let list = if kind == Kind::Random {
                &g2_random
            } else {
                &g2_filecoin
            };
            match list.iter().find(|m| m.lg == lg) {
                Some(m) => Some(baseline(&g2_host, m, predicted, &mut budget)?),
                None => None,
            }
        };
        if let Some((entry, t)) = done {
            if let Some(t) = t {
                last.insert((curve, kind.name()), (n, t));
            }
            entries.push((lg, i, entry));
        }
    }
    entries.sort_by_key(|&(lg, i, _)| (i, lg));
    let mut results: Vec<Value> = entries.into_iter().map(|(_, _, v)| v).collect();
    results.extend(extra);
    write_doc(&revision, &gpu, &command, g1_config, g2_config, results)
}

/// The bench-data document, to stdout.
fn write_doc(
    revision: &str,
    gpu: &Gpu,
    command: &str,
    g1_config: MsmConfig,
    g2_config: MsmConfig,
    results: Vec<Value>,
) -> Result<()> {
    let doc = json!({
        "revision": revision,
        "date": today(),
        "machine": machine(gpu.name(), json!({})),
        "command": command,
        "config": {
            "g1": format!("{g1_config:?}"),
            "g2": format!("{g2_config:?}"),
        },
        "results": results,
    });
    println!("{}", serde_json::to_string_pretty(&doc)?);
    Ok(())
}
