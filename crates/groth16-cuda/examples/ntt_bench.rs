//! The H polynomial on the GPU (module `ntt`) at 2^22, 2^24 and 2^26:
//! - device-resident a, b, c (`GpuNtt::compute_h`), timed with CUDA events,
//!   beside bellperson's CPU H computation (`cpu::compute_h`, wall clock, all
//!   cores) on the same data, whose output the GPU's must equal bit for bit;
//! - beside two bounds measured in the same run: the bytes the passes move
//!   over the device-to-device copy bandwidth (cuMemcpyDtoD of 2 GiB,
//!   counting bytes read plus written), and the field multiplications the
//!   kernels do over the Fr multiplication rate of `arith_bench`;
//! - from pinned host memory (`GpuNtt::compute_h_from_host`), uploads
//!   serial vs overlapped with the first transforms on a second stream.
//!
//! - every other pass kernel variant and table layout (`NttConfig`),
//!   device-resident, on the same data, each against the default timed
//!   first in the same run (`NTT_BENCH_VARIANTS=0` leaves them out;
//!   `NTT_BENCH_VARIANTS=layouts` times only the default kernel with the
//!   tables partly whole: the top pass's factors, or H's scalings).
//!
//! One warm-up, then the median of 7 GPU runs (3 CPU runs, 1 at 2^26).
//! `NTT_BENCH_SIZES=24,26` picks the sizes (default 22, 24, 26). Writes the
//! bench-data JSON to stdout.
//!
//! Usage: ntt_bench <short git revision> <the command line, for the record>

#[path = "common/args.rs"]
mod args;
#[path = "common/mod.rs"]
mod common;
#[path = "common/events.rs"]
mod events;
use args::OptionalRecord;
use common::{Stat, machine, today};
use events::time_events;

use std::{sync::Arc, time::Instant};

use anyhow::{Context, Result, ensure};
use blstrs::Scalar;
use clap::Parser;
use cudarc::driver::sys::CUevent_flags;
use cuzk_groth16_cuda::{
    cpu::compute_h,
    cuda::{DeviceBuffer, DeviceModule, Gpu, grid_1d},
    ntt::{
        GpuNtt, NttConfig, PassKernel, TableLayout, Upload, copy_device,
        plan::{DomainPlan, Launch, Op},
    },
};
use cuzk_pinned_pool::{Pool, PoolConfig, Request, TypedLease};
use ff::Field;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;
use serde_json::{Value, json};

/// The bench-only module of throughput kernels (the Fr multiply rate).
const ARITH_BENCH: DeviceModule = cuzk_groth16_cuda::fatbin_module!("arith_bench");

const RUNS: usize = 7;
const SIZES: [u32; 3] = [22, 24, 26];

/// The H polynomial on GPU 0 beside bellperson's CPU H computation, the
/// copy-bandwidth and multiply-rate bounds, uploads from pinned memory and
/// every NTT variant beside the default; writes the bench-data JSON to
/// stdout.
#[derive(Debug, Parser)]
#[command(
    name = "ntt_bench",
    args_override_self = true,
    after_help = "Environment:
  NTT_BENCH_SIZES     log2 sizes, comma-separated (default 22,24,26)
  NTT_BENCH_VARIANTS  0: time the default configuration alone; layouts:
                      beside it only its kernel with tables partly whole"
)]
struct Args {
    #[command(flatten)]
    record: OptionalRecord,
}

/// Times `step(false)` with CUDA events on the GPU's stream: one warm-up,
/// then RUNS runs, each after an untimed `step(true)` (the setup). Seconds.
fn time_gpu(gpu: &Arc<Gpu>, step: impl FnMut(bool) -> Result<()>) -> Result<Stat> {
    time_events(gpu, RUNS, step)
}

/// Times `ntt.compute_h` on `work` (a, b, c), each run after restoring it
/// from `inputs`.
fn time_h(
    gpu: &Arc<Gpu>,
    ntt: &GpuNtt,
    log2: u32,
    work: [&mut DeviceBuffer<Scalar>; 3],
    inputs: [&DeviceBuffer<Scalar>; 3],
) -> Result<Stat> {
    let [wa, wb, wc] = work;
    time_gpu(gpu, |setup| {
        if setup {
            for (w, p) in [&mut *wa, &mut *wb, &mut *wc].into_iter().zip(inputs) {
                copy_device(w, p)?;
            }
        } else {
            ntt.compute_h(wa, wb, wc, log2)?;
        }
        Ok(())
    })
}

fn random(n: usize, seed: u64) -> Vec<Scalar> {
    const CHUNK: usize = 1 << 14;
    let mut v = vec![Scalar::ZERO; n];
    v.par_chunks_mut(CHUNK).enumerate().for_each(|(i, chunk)| {
        let mut rng = ChaCha20Rng::seed_from_u64(seed << 32 | i as u64);
        for x in chunk {
            *x = Scalar::random(&mut rng);
        }
    });
    v
}

/// The table layouts between small and whole.
const PARTLY_WHOLE: [(&str, TableLayout); 2] = [
    ("whole-factors", TableLayout::WHOLE_FACTORS),
    ("whole-scales", TableLayout::WHOLE_SCALES),
];

/// The configurations timed beside the default: each pass kernel variant
/// with small and whole tables, each with and without the fused
/// bit-reversal, and the default kernel with tables partly whole
/// ([`PARTLY_WHOLE`]); `layouts_only`: the last, and the default kernel
/// without its swizzle ([`PassKernel::Radix4T128B6Plain`]), alone.
fn ntt_variants(layouts_only: bool) -> Vec<(String, NttConfig)> {
    let mut out = Vec::new();
    // The default kernel before its swizzled slots and j-first pairs.
    out.push((
        format!("{:?}-small", PassKernel::Radix4T128B6Plain),
        NttConfig {
            pass_kernel: PassKernel::Radix4T128B6Plain,
            ..NttConfig::default()
        },
    ));
    for (label, tables) in PARTLY_WHOLE {
        out.push((
            format!("{:?}-{label}", NttConfig::default().pass_kernel),
            NttConfig {
                tables,
                ..NttConfig::default()
            },
        ));
    }
    if layouts_only {
        return out;
    }
    for pass_kernel in PassKernel::ALL {
        for (label, tables) in [("small", TableLayout::SMALL), ("whole", TableLayout::WHOLE)] {
            for fused_bitrev in [false, true] {
                let config = NttConfig {
                    pass_kernel,
                    tables,
                    fused_bitrev,
                };
                if config != NttConfig::default() && !out.iter().any(|(_, c)| *c == config) {
                    let fused = if fused_bitrev { "-fused" } else { "" };
                    out.push((format!("{pass_kernel:?}-{label}{fused}"), config));
                }
            }
        }
    }
    out
}

fn pinned(pool: &Pool, v: &[Scalar]) -> Result<TypedLease<Scalar>> {
    let lease = pool.lease(Request::elems::<Scalar>(v.len()))?;
    // SAFETY: Scalar is four u64 limbs: no padding, no pointers, every bit
    // pattern a value; the bytes are overwritten right away.
    let mut t = unsafe { lease.into_typed_unchecked::<Scalar>() }?;
    t.copy_from_slice(v);
    Ok(t)
}

fn main() -> Result<()> {
    let args = Args::parse();
    let revision = args.record.revision_or_unknown();
    let command = args.record.command_or_argv();
    let gpu = Gpu::get(0).context("this benchmark needs a GPU")?;
    let ntt = GpuNtt::new(Arc::clone(&gpu));
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    // NTT_BENCH_VARIANTS=0 times the default configuration alone;
    // NTT_BENCH_VARIANTS=layouts beside it only the partly whole tables.
    let which = std::env::var("NTT_BENCH_VARIANTS").unwrap_or_default();
    let variants = which != "0";
    let layouts_only = which == "layouts";
    // NTT_BENCH_SIZES=24,26 takes those sizes only.
    let sizes: Vec<u32> = match std::env::var("NTT_BENCH_SIZES") {
        Ok(v) => v
            .split(',')
            .map(|x| {
                x.trim()
                    .parse::<u32>()
                    .context("NTT_BENCH_SIZES: log2 sizes like 24,26")
            })
            .collect::<Result<_>>()?,
        Err(_) => SIZES.to_vec(),
    };
    let mut results: Vec<Value> = Vec::new();

    // Ceiling 1: device-to-device copy bandwidth, bytes read + written.
    let copy_bw = {
        let n = 1usize << 26;
        let src = gpu.upload(&random(n, 1))?;
        let mut dst = gpu.alloc_zeros::<Scalar>(n)?;
        let s = time_gpu(&gpu, |setup| {
            if !setup {
                copy_device(&mut dst, &src)?;
            }
            Ok(())
        })?;
        let bytes = 2.0 * src.size_bytes() as f64;
        let bw = bytes / s.median;
        results.push(json!({
            "name": "ntt/memcpy_dtod/2^31B",
            "unit": "s",
            "median": s.median, "min": s.min, "max": s.max, "runs": s.runs,
            "derived": {"gb_per_s": bw / 1e9},
            "notes": "cuMemcpyDtoDAsync of 2 GiB; bandwidth counts bytes read plus bytes written",
        }));
        eprintln!("copy bandwidth {:.0} GB/s", bw / 1e9);
        bw
    };

    // Ceiling 2: Fr Montgomery multiplications per second (the arith_bench
    // kernel: two dependent chains per thread, everything inlined).
    let mul_rate = {
        let n = 1usize << 20;
        let iters = 1024u32;
        let k = gpu.kernel_in(&ARITH_BENCH, "arith_bench_mul_fr_bls12_381")?;
        let mut buf = gpu.upload(&random(n, 2))?;
        let nn = n as u32;
        let s = time_gpu(&gpu, |setup| {
            if setup {
                return Ok(());
            }
            // SAFETY: arith_bench_mul_fr_bls12_381(fr_t* data, uint32_t
            // iters, uint32_t n): the buffer holds n elements and thread i
            // touches data[i], data[i+1 mod n], data[i+2 mod n] only.
            unsafe {
                k.args()
                    .buf_mut(&mut buf)
                    .arg(&iters)
                    .arg(&nn)
                    .launch(grid_1d(n, 256)?)?;
            }
            Ok(())
        })?;
        let rate = 2.0 * f64::from(iters) * n as f64 / s.median;
        results.push(json!({
            "name": "ntt/fr_mul/2^20x2048/random",
            "unit": "s",
            "median": s.median, "min": s.min, "max": s.max, "runs": s.runs,
            "derived": {"mul_per_s": rate},
            "notes": "arith_bench_mul_fr_bls12_381: the Fr multiplication rate the compute bound uses",
        }));
        eprintln!("Fr mul rate {rate:.3e}/s");
        rate
    };

    let pool = Pool::pinned(gpu.ordinal(), PoolConfig::unbounded())?;
    // Checks that failed: reported after the JSON, so the timings survive.
    let mut failures: Vec<String> = Vec::new();
    for log2 in sizes {
        let m = 1usize << log2;
        let seed = u64::from(log2) * 10;
        let (a, b, c) = (random(m, seed), random(m, seed + 1), random(m, seed + 2));

        // The CPU baseline, whose output is also the reference.
        let cpu_runs = if log2 >= 26 { 1 } else { 3 };
        let mut t = Vec::new();
        let mut want = Vec::new();
        for _ in 0..cpu_runs {
            let start = Instant::now();
            want = compute_h(&a, &b, &c)?;
            t.push(start.elapsed().as_secs_f64());
        }
        let cpu = Stat::of(t);
        eprintln!("2^{log2}: CPU {:.3} s", cpu.median);

        // Device-resident, the default configuration's plan (its launches
        // are timed one by one below, through the default `ntt`).
        let plan = DomainPlan::with_layout(log2, ntt.config().tables)?
            .with_fused_bitrev(ntt.config().fused_bitrev);
        let launches = plan.launches(Op::H);
        let bytes: u64 = launches.iter().map(Launch::bytes).sum();
        let stages = ntt.config().pass_kernel.stages();
        let muls: u64 = launches
            .iter()
            .map(|l| l.multiplications_with(stages))
            .sum();
        ntt.prepare(log2)?;
        let (pa, pb, pc) = (gpu.upload(&a)?, gpu.upload(&b)?, gpu.upload(&c)?);
        let (mut wa, mut wb, mut wc) = (
            gpu.alloc_zeros::<Scalar>(m)?,
            gpu.alloc_zeros::<Scalar>(m)?,
            gpu.alloc_zeros::<Scalar>(m)?,
        );
        let s = time_h(
            &gpu,
            &ntt,
            log2,
            [&mut wa, &mut wb, &mut wc],
            [&pa, &pb, &pc],
        )?;
        let got = wa.download()?;
        let exact = got[..m - 1] == want[..];
        if !exact {
            failures.push(format!("2^{log2}: the GPU's h differs from cpu::compute_h"));
        }
        // The other pass kernels and table layouts, on the same data, each
        // against the default timed above.
        if variants {
            for (label, config) in ntt_variants(layouts_only) {
                let v = GpuNtt::with_config(Arc::clone(&gpu), config);
                v.prepare(log2)?;
                let vplan = DomainPlan::with_layout(log2, config.tables)?
                    .with_fused_bitrev(config.fused_bitrev);
                let vmuls: u64 = vplan
                    .launches(Op::H)
                    .iter()
                    .map(|l| l.multiplications_with(config.pass_kernel.stages()))
                    .sum();
                let vs = time_h(&gpu, &v, log2, [&mut wa, &mut wb, &mut wc], [&pa, &pb, &pc])?;
                let vexact = wa.download()?[..m - 1] == want[..];
                if !vexact {
                    failures.push(format!("2^{log2} {label}: h differs from cpu::compute_h"));
                }
                eprintln!(
                    "2^{log2}: {label} {:.4} s (default {:.4} s)",
                    vs.median, s.median
                );
                results.push(json!({
                    "name": format!("ntt/h/2^{log2}/random/{label}"),
                    "unit": "s",
                    "median": vs.median, "min": vs.min, "max": vs.max, "runs": vs.runs,
                    "derived": {
                        "mul_per_s": vmuls as f64 / vs.median,
                        "fraction_of_mul_bound": vmuls as f64 / mul_rate / vs.median,
                    },
                    "baseline": {"name": "default NttConfig, same run", "median": s.median, "min": s.min, "max": s.max, "runs": s.runs},
                    "ratio_vs_baseline": s.median / vs.median,
                    "bit_exact_vs_cpu": vexact,
                    "notes": format!(
                        "device-resident a, b, c; {config:?}; {vmuls:.3e} Fr multiplications; h {} cpu::compute_h bit for bit",
                        if vexact { "equals" } else { "DIFFERS FROM" }
                    ),
                }));
            }
        }
        // Each launch alone (one run after the timed ones), to see where the
        // time goes.
        copy_device(&mut wa, &pa)?;
        copy_device(&mut wb, &pb)?;
        copy_device(&mut wc, &pc)?;
        let mut launch_ms = Vec::new();
        for launch in &launches {
            let start = gpu
                .stream()
                .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
            ntt.run_launches(
                log2,
                std::slice::from_ref(launch),
                &mut wa,
                Some(&mut wb),
                Some(&mut wc),
            )?;
            let end = gpu
                .stream()
                .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
            end.synchronize()?;
            let what = match launch {
                Launch::Pass { dit, params, .. } => format!(
                    "{} lo={} bits={}{}{}",
                    if *dit { "dit" } else { "dif" },
                    params.lo,
                    params.bits,
                    if params.pre != 0 { " +a*b-c" } else { "" },
                    match params.post {
                        0 => "",
                        1 => " +coset",
                        _ => " +bitrev+scale",
                    }
                ),
                Launch::Bitrev { .. } => "bitrev+scale".to_owned(),
            };
            launch_ms.push(json!({
                "launch": what,
                "ms": f64::from(start.elapsed_ms(&end)?),
                "bytes": launch.bytes(),
                "muls": launch.multiplications_with(stages),
            }));
        }
        drop((pa, pb, pc, wa, wb, wc));
        let bw_bound = bytes as f64 / copy_bw;
        let mul_bound = muls as f64 / mul_rate;
        eprintln!(
            "2^{log2}: GPU {:.4} s, bandwidth bound {:.4} s, multiplication bound {:.4} s",
            s.median, bw_bound, mul_bound
        );
        let passes = plan.passes().iter().map(|p| p.bits).collect::<Vec<_>>();
        results.push(json!({
            "name": format!("ntt/h/2^{log2}/random"),
            "unit": "s",
            "median": s.median, "min": s.min, "max": s.max, "runs": s.runs,
            "derived": {
                "gb_per_s": bytes as f64 / s.median / 1e9,
                "mul_per_s": muls as f64 / s.median,
                "fraction_of_bandwidth_bound": bw_bound / s.median,
                "fraction_of_mul_bound": mul_bound / s.median,
            },
            "baseline": {"name": format!("bellperson-cpu-{cpus}t"), "median": cpu.median, "min": cpu.min, "max": cpu.max, "runs": cpu.runs},
            "ratio_vs_baseline": cpu.median / s.median,
            "bound": {"name": "pass-bytes / device-copy-bandwidth", "value": bw_bound},
            "compute_bound": {"name": "kernel multiplications / Fr mul rate", "value": mul_bound},
            "bit_exact_vs_cpu": exact,
            "launches": launch_ms,
            "notes": format!(
                "device-resident a, b, c; {} launches, passes of {passes:?} bits per transform; {:.3e} bytes moved, {:.3e} Fr multiplications; h {} cpu::compute_h bit for bit",
                launches.len(), bytes as f64, muls as f64,
                if exact { "equals" } else { "DIFFERS FROM" }
            ),
        }));

        // From pinned host memory, serial vs overlapped uploads.
        let (ha, hb, hc) = (pinned(&pool, &a)?, pinned(&pool, &b)?, pinned(&pool, &c)?);
        let mut out = pinned(&pool, &vec![Scalar::ZERO; m - 1])?;
        let mut bufs = ntt.alloc_h_buffers(log2)?;
        let mut host = Vec::new();
        for upload in [Upload::Serial, Upload::Overlapped] {
            let s = time_gpu(&gpu, |setup| {
                if !setup {
                    ntt.compute_h_from_host(&ha, &hb, &hc, &mut out, &mut bufs, upload)?;
                }
                Ok(())
            })?;
            let exact = out[..] == want[..];
            if !exact {
                failures.push(format!(
                    "2^{log2} {upload:?}: h differs from cpu::compute_h"
                ));
            }
            eprintln!("2^{log2}: from host, {upload:?} {:.4} s", s.median);
            host.push((s, exact));
        }
        for (i, label) in ["serial", "overlapped"].into_iter().enumerate() {
            let (s, exact) = host[i];
            let mut r = json!({
                "name": format!("ntt/h_from_host/2^{log2}/{label}"),
                "unit": "s",
                "median": s.median, "min": s.min, "max": s.max, "runs": s.runs,
                "bit_exact_vs_cpu": exact,
                "notes": format!(
                    "a, b, c from pinned host memory (3 x {} MiB up), h back ({} MiB), including the H computation; {}",
                    (m * 32) >> 20, ((m - 1) * 32) >> 20,
                    if i == 0 { "all copies on the compute stream" } else { "b and c uploaded on a second stream while a is transformed" }
                ),
            });
            if i == 1 {
                r["baseline"] = json!({"name": "serial uploads", "median": host[0].0.median});
                r["ratio_vs_baseline"] = json!(host[0].0.median / s.median);
            }
            results.push(r);
        }
        drop((ha, hb, hc, out, bufs));
        pool.trim();
    }

    let doc = json!({
        "revision": revision,
        "date": today(),
        "machine": machine(gpu.name(), json!({
            "copy_bandwidth_gb_per_s": copy_bw / 1e9,
            "fr_mul_per_s": mul_rate,
        })),
        "command": command,
        "results": results,
    });
    println!("{}", serde_json::to_string_pretty(&doc)?);
    ensure!(failures.is_empty(), "{}", failures.join("; "));
    Ok(())
}
