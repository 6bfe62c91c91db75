//! a/b/c on the GPU from the device-resident PCE (`cuzk_groth16_cuda::spmv`)
//! beside the CPU SpMV (`cuzk_synth`, all cores) for PoRep-shaped circuits
//! (`porep:K`, 2^K constraints, A/B/C ≈ 2.4/1.0/2.2 entries per row), per
//! partition:
//! - the one-time PCE upload (packing on the CPU + copies, wall clock) and
//!   the device memory it takes, reported apart;
//! - GPU SpMV alone (`GpuSpmv::evaluate_into` into a, b, c of the domain
//!   size, CUDA events) against `cuzk_synth::spmv::evaluate_into`, and GPU
//!   SpMV + the GPU satisfaction check (`first_unsatisfied`, synchronised
//!   wall clock) against `cuzk_synth::evaluate` (SpMV + check, the CPU
//!   path's step);
//! - the bytes a partition sends over PCIe: with CPU a/b/c, a, b, c zero-padded
//!   to m plus the witness (3·m·32 + w·32, what `GpuProver::prepare`
//!   uploads); with GPU a/b/c, the witness alone; and the time of each
//!   upload from page-locked memory (synchronised wall clock);
//! - a partition's a/b/c step both ways: CPU SpMV + check + upload of a, b,
//!   c and w, against upload of w + GPU SpMV + check.
//!
//! The GPU's a, b, c are compared with the CPU's bit for bit; a difference
//! fails the run (after the JSON is written). One warm-up, then the median
//! of 7 GPU runs and 3 CPU runs (1 from 2^24 on).
//! Writes the bench-data JSON to stdout; progress to stderr.
//!
//! Usage: spmv_bench <short git revision> <the command line, for the record> [K ...]
//! (K defaults to 20 22 24).

#[path = "common/args.rs"]
mod args;
#[path = "common/mod.rs"]
mod common;
#[path = "common/events.rs"]
mod events;
use args::OptionalRecord;
use common::{Stat, machine, today};
use events::time_events;

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, ensure};
use blstrs::Scalar;
use clap::Parser;
use cuzk_groth16_cuda::cuda::{DeviceBuffer, Gpu};
use cuzk_groth16_cuda::spmv::{self, DevicePce, GpuSpmv};
use cuzk_pinned_pool::{Pool, PoolConfig, Request, TypedLease};
use cuzk_synth::circuits::{CircuitSpec, DEFAULT_BOOL_PERCENT, Family};
use cuzk_synth::{Pce, Witness};
use ff::Field;
use serde_json::{Value, json};

const GPU_RUNS: usize = 7;

/// a/b/c on GPU 0 from the device-resident PCE beside the CPU SpMV, for
/// PoRep-shaped circuits; writes the bench-data JSON to stdout, progress to
/// stderr.
#[derive(Debug, Parser)]
#[command(name = "spmv_bench", args_override_self = true)]
struct Args {
    #[command(flatten)]
    record: OptionalRecord,
    /// Circuit sizes: `porep:K`, 2^K constraints each.
    #[arg(value_name = "K", default_values_t = [20, 22, 24])]
    sizes: Vec<u32>,
}

fn log(msg: impl AsRef<str>) {
    eprintln!("[spmv_bench] {}", msg.as_ref());
}

/// Wall-clock seconds of `f`, one warm-up then `runs` runs.
fn time_wall(runs: usize, mut f: impl FnMut() -> Result<()>) -> Result<Stat> {
    f()?;
    let mut t = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        f()?;
        t.push(start.elapsed().as_secs_f64());
    }
    Ok(Stat::of(t))
}

/// GPU seconds of what `f` queues, by CUDA events; one warm-up.
fn time_gpu(gpu: &Arc<Gpu>, mut f: impl FnMut() -> Result<()>) -> Result<Stat> {
    time_events(gpu, GPU_RUNS, |setup| if setup { Ok(()) } else { f() })
}

fn pinned(pool: &Pool, v: &[Scalar]) -> Result<TypedLease<Scalar>> {
    let lease = pool.lease(Request::elems::<Scalar>(v.len()))?;
    // SAFETY: Scalar is four u64 limbs: no padding, no pointers, every bit
    // pattern a value; the bytes are overwritten right away.
    let mut t = unsafe { lease.into_typed_unchecked::<Scalar>() }?;
    t.copy_from_slice(v);
    Ok(t)
}

/// What `GpuProver::prepare` does with host a/b/c: a zeroed buffer of m,
/// then the first n elements copied in.
fn upload_padded(gpu: &Arc<Gpu>, v: &[Scalar], m: usize) -> Result<DeviceBuffer<Scalar>> {
    let mut buf = gpu.alloc_zeros::<Scalar>(m)?;
    buf.copy_from_host_at(0, v)?;
    Ok(buf)
}

fn result(name: String, s: Stat, unit: &str) -> Value {
    s.result(name, unit)
}

fn with_baseline(mut r: Value, baseline: &str, base: Stat) -> Value {
    r["baseline"] = json!({"name": baseline, "median": base.median});
    r["ratio_vs_baseline"] = json!(base.median / r["median"].as_f64().unwrap_or(f64::NAN));
    r
}

fn count(name: String, value: u64, unit: &str, notes: &str) -> Value {
    json!({
        "name": name,
        "unit": unit,
        "median": value, "min": value, "max": value, "runs": 1,
        "notes": notes,
    })
}

fn main() -> Result<()> {
    let args = Args::parse();
    let revision = args.record.revision_or_unknown();
    let command = args.record.command_or_argv();
    let sizes = args.sizes;
    let gpu = Gpu::get(0).context("this benchmark needs a GPU")?;
    let spmv = GpuSpmv::new(Arc::clone(&gpu));
    spmv.prepare()?;
    let pool = Pool::pinned(gpu.ordinal(), PoolConfig::unbounded())?;
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mut results: Vec<Value> = Vec::new();
    let mut failures: Vec<String> = Vec::new();

    for k in sizes {
        let spec = CircuitSpec {
            family: Family::PorepShaped {
                bool_percent: DEFAULT_BOOL_PERCENT,
            },
            size: k,
        };
        spec.validate().map_err(|e| anyhow::anyhow!("{e}"))?;
        let tag = format!("porep/2^{k}");
        log(format!("{spec}: recording the PCE and a witness"));
        let circuit = spec.build(1);
        let pce = Pce::record(circuit.clone())?;
        let witness = Witness::synthesize(circuit)?;
        let m = pce.domain_size();
        let rows = pce.num_constraints();
        let w_host: Vec<Scalar> = witness.inputs.iter().chain(&witness.aux).copied().collect();
        let cpu_runs = if k >= 24 { 1 } else { 3 };

        // The one-time upload, and what it takes on the device.
        let predicted = spmv::device_bytes(&pce);
        let start = Instant::now();
        let dpce = DevicePce::upload(&gpu, &pce)?;
        gpu.synchronize()?;
        let upload_s = start.elapsed().as_secs_f64();
        let sizes = dpce.sizes();
        log(format!(
            "{spec}: PCE uploaded in {upload_s:.2} s, {:.1} MiB on the device ({} rows, words \
             A/B/C {}/{}/{}, host CSR {:.1} MiB)",
            dpce.device_bytes() as f64 / (1 << 20) as f64,
            rows,
            sizes[0].words,
            sizes[1].words,
            sizes[2].words,
            pce.bytes() as f64 / (1 << 20) as f64,
        ));
        if predicted != dpce.device_bytes() {
            failures.push(format!(
                "{spec}: device_bytes predicted {predicted}, the upload took {}",
                dpce.device_bytes()
            ));
        }
        let mut r = result(
            format!("spmv/pce_upload/{tag}"),
            Stat::of(vec![upload_s]),
            "s",
        );
        r["notes"] = json!(format!(
            "one-time per circuit shape, not per partition: pack on the CPU ({cpus} threads) and \
             copy from pageable memory; {} bytes on the device (host CSR {} bytes); words \
             A/B/C {}/{}/{}, long rows (warp/block) A {}/{} B {}/{} C {}/{}",
            dpce.device_bytes(),
            pce.bytes(),
            sizes[0].words,
            sizes[1].words,
            sizes[2].words,
            sizes[0].warp_rows,
            sizes[0].block_rows,
            sizes[1].warp_rows,
            sizes[1].block_rows,
            sizes[2].warp_rows,
            sizes[2].block_rows,
        ));
        results.push(r);
        results.push(count(
            format!("spmv/pce_device_bytes/{tag}"),
            dpce.device_bytes(),
            "bytes",
            "device memory of the resident PCE (spmv::device_bytes)",
        ));

        // CPU: SpMV alone and SpMV + the satisfaction check.
        log(format!("{spec}: CPU SpMV, {cpu_runs} runs"));
        let (mut ca, mut cb, mut cc) = (
            vec![Scalar::ZERO; rows],
            vec![Scalar::ZERO; rows],
            vec![Scalar::ZERO; rows],
        );
        let cpu_spmv = time_wall(cpu_runs, || {
            Ok(cuzk_synth::spmv::evaluate_into(
                &pce, &witness, &mut ca, &mut cb, &mut cc,
            )?)
        })?;
        let mut abc = None;
        let cpu_checked = time_wall(cpu_runs, || {
            abc = Some(cuzk_synth::evaluate(&pce, &witness)?);
            Ok(())
        })?;
        let abc = abc.context("the CPU evaluation ran")?;

        // GPU: the witness upload (pinned), SpMV, SpMV + check.
        log(format!("{spec}: GPU SpMV, {GPU_RUNS} runs"));
        let w_pinned = pinned(&pool, &w_host)?;
        let mut dw = gpu.alloc_zeros::<Scalar>(w_host.len())?;
        let h2d_w = time_wall(GPU_RUNS, || {
            let mut fresh = gpu.alloc_zeros::<Scalar>(w_host.len())?;
            fresh.copy_from_host(&w_pinned)?;
            dw = fresh;
            Ok(())
        })?;
        let mut a = gpu.alloc_zeros::<Scalar>(m)?;
        let mut b = gpu.alloc_zeros::<Scalar>(m)?;
        let mut c = gpu.alloc_zeros::<Scalar>(m)?;
        let gpu_spmv = time_gpu(&gpu, || {
            Ok(spmv.evaluate_into(&dpce, &dw, &mut a, &mut b, &mut c)?)
        })?;
        let mut unsatisfied = None;
        let gpu_checked = time_wall(GPU_RUNS, || {
            spmv.evaluate_into(&dpce, &dw, &mut a, &mut b, &mut c)?;
            unsatisfied = spmv.first_unsatisfied(&dpce, &a, &b, &c)?;
            Ok(())
        })?;
        if let Some(row) = unsatisfied {
            failures.push(format!(
                "{spec}: the GPU check reports row {row} unsatisfied"
            ));
        }
        for (name, dev, host) in [("a", &a, &abc.a), ("b", &b, &abc.b), ("c", &c, &abc.c)] {
            let got = dev.download()?;
            let same = got[..rows] == host[..] && got[rows..].iter().all(|x| x.is_zero_vartime());
            if !same {
                failures.push(format!("{spec}: GPU {name} differs from the CPU's"));
            }
        }
        drop((a, b, c));

        // The CPU path's upload of a, b, c (padded to m) and w, from pinned memory.
        log(format!("{spec}: uploads of a/b/c"));
        let (pa, pb, pc) = (
            pinned(&pool, &abc.a)?,
            pinned(&pool, &abc.b)?,
            pinned(&pool, &abc.c)?,
        );
        let h2d_abc = time_wall(GPU_RUNS, || {
            let bufs = [
                upload_padded(&gpu, &pa, m)?,
                upload_padded(&gpu, &pb, m)?,
                upload_padded(&gpu, &pc, m)?,
            ];
            drop(bufs);
            Ok(())
        })?;
        drop((pa, pb, pc, w_pinned));
        pool.trim();

        let gpu_note = "CUDA events around GpuSpmv::evaluate_into, a/b/c of the domain size";
        let mut r = with_baseline(
            result(format!("spmv/gpu/{tag}"), gpu_spmv, "s"),
            &format!("cpu-spmv-{cpus}t (cuzk_synth::spmv::evaluate_into)"),
            cpu_spmv,
        );
        r["notes"] = json!(gpu_note);
        results.push(r);
        let mut r = with_baseline(
            result(format!("spmv/gpu+check/{tag}"), gpu_checked, "s"),
            &format!("cpu-spmv+check-{cpus}t (cuzk_synth::evaluate)"),
            cpu_checked,
        );
        r["notes"] = json!("evaluate_into + first_unsatisfied, synchronised wall clock");
        results.push(r);
        results.push(result(format!("spmv/cpu/{tag}"), cpu_spmv, "s"));
        results.push(result(format!("spmv/cpu+check/{tag}"), cpu_checked, "s"));

        // Bytes over PCIe per partition, and the transfers' times.
        let w_bytes = w_host.len() as u64 * 32;
        let abc_bytes = 3 * m as u64 * 32;
        results.push(count(
            format!("spmv/pcie_bytes/{tag}/cpu-abc"),
            abc_bytes + w_bytes,
            "bytes",
            "per partition with CPU a/b/c: a, b, c zero-padded to m (3·m·32) + the witness",
        ));
        results.push(count(
            format!("spmv/pcie_bytes/{tag}/gpu-abc"),
            w_bytes,
            "bytes",
            "per partition with GPU a/b/c: the witness alone",
        ));
        let mut r = result(format!("spmv/h2d/{tag}/abc+w"), add(h2d_abc, h2d_w), "s");
        r["derived"] = json!({"gb_per_s": (abc_bytes + w_bytes) as f64 / 1e9 / (h2d_abc.median + h2d_w.median)});
        r["notes"] = json!(
            "a, b, c padded uploads and the witness upload, from page-locked memory (medians added)"
        );
        results.push(r);
        let mut r = result(format!("spmv/h2d/{tag}/w"), h2d_w, "s");
        r["derived"] = json!({"gb_per_s": w_bytes as f64 / 1e9 / h2d_w.median});
        results.push(r);

        // A partition's a/b/c step, both ways.
        let cpu_path = add(cpu_checked, add(h2d_abc, h2d_w));
        let gpu_path = add(h2d_w, gpu_checked);
        let mut r = with_baseline(
            result(format!("spmv/partition/{tag}/gpu-abc"), gpu_path, "s"),
            "cpu-abc: CPU SpMV + check, upload of a/b/c and w",
            cpu_path,
        );
        r["notes"] = json!("upload of w + GPU SpMV + GPU check (medians added)");
        results.push(r);
        results.push(result(
            format!("spmv/partition/{tag}/cpu-abc"),
            cpu_path,
            "s",
        ));
        log(format!(
            "{spec}: CPU SpMV {:.1} ms (+check {:.1} ms), GPU SpMV {:.2} ms (+check {:.2} ms), \
             PCIe {:.0} MiB -> {:.0} MiB, partition {:.1} ms -> {:.1} ms",
            cpu_spmv.median * 1e3,
            cpu_checked.median * 1e3,
            gpu_spmv.median * 1e3,
            gpu_checked.median * 1e3,
            (abc_bytes + w_bytes) as f64 / (1 << 20) as f64,
            w_bytes as f64 / (1 << 20) as f64,
            cpu_path.median * 1e3,
            gpu_path.median * 1e3,
        ));
        drop(dpce);
    }

    let doc = json!({
        "revision": revision,
        "date": today(),
        "machine": machine(gpu.name(), json!({})),
        "command": command,
        "results": results,
    });
    println!("{}", serde_json::to_string_pretty(&doc)?);
    ensure!(failures.is_empty(), "{}", failures.join("; "));
    Ok(())
}

/// Two stats added median to median (min to min, max to max): the time of
/// two steps run one after the other.
fn add(x: Stat, y: Stat) -> Stat {
    Stat {
        median: x.median + y.median,
        min: x.min + y.min,
        max: x.max + y.max,
        runs: x.runs.min(y.runs),
    }
}
