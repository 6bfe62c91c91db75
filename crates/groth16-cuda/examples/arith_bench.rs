//! Throughput of the CUDA field and curve arithmetic (module `arith_bench`):
//! Fr and Fq Montgomery multiplications and squarings per second and G1
//! XYZZ mixed additions per second, each beside the device's 32-bit integer
//! multiply-add peak (SM count x 64 IMAD lanes x clock). Timed with CUDA
//! events; one warm-up, then the median of 7 runs. Writes the bench-data
//! JSON to stdout.
//!
//! Usage: arith_bench <short git revision> <the command line, for the record>

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

use anyhow::{Context, Result};
use blstrs::{Fp, G1Affine, G1Projective, Scalar};
use clap::Parser;
use cudarc::driver::sys::CUdevice_attribute;
use cuzk_groth16_cuda::cuda::{DeviceBuffer, DeviceElem, DeviceModule, Gpu, grid_1d};
use ff::Field;
use group::{Curve, Group};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use serde_json::json;

/// IMADs per Montgomery multiplication with N 32-bit limbs in kernels/ff/mont.cuh:
/// per limb of b, four chains of N multiply-adds plus one multiply for m.
const fn imads_per_mul(n: u64) -> u64 {
    n * (4 * n + 1)
}
/// IMADs per squaring (`mont_t::sqr`): N(N - 1) for the cross products, 2N
/// for the squares, N rows of 2N + 1 for the reduction.
const fn imads_per_sqr(n: u64) -> u64 {
    3 * n * n + 2 * n
}
/// The bench-only module of throughput kernels.
const ARITH_BENCH: DeviceModule = cuzk_groth16_cuda::fatbin_module!("arith_bench");

const RUNS: usize = 7;

/// Throughput of the CUDA field and curve arithmetic on GPU 0 (Fr and Fq
/// multiplications and squarings, G1 XYZZ mixed additions); writes the
/// bench-data JSON to stdout.
#[derive(Debug, Parser)]
#[command(name = "arith_bench", args_override_self = true)]
struct Args {
    #[command(flatten)]
    record: OptionalRecord,
}

/// Times `launch` with CUDA events: one warm-up, then RUNS timed runs (seconds).
fn time(gpu: &Arc<Gpu>, mut launch: impl FnMut() -> Result<()>) -> Result<Stat> {
    time_events(gpu, RUNS, |setup| if setup { Ok(()) } else { launch() })
}

fn bench_mul<T: DeviceElem>(gpu: &Arc<Gpu>, kernel: &str, data: &[T], iters: u32) -> Result<Stat> {
    let k = gpu.kernel_in(&ARITH_BENCH, kernel)?;
    let mut buf: DeviceBuffer<T> = gpu.upload(data)?;
    let n = data.len() as u32;
    time(gpu, || {
        // SAFETY: arith_bench_mul_*(T* data, uint32_t iters, uint32_t n):
        // the buffer holds n elements and thread i touches data[i], data[i+1
        // mod n] and data[i+2 mod n] only.
        unsafe {
            k.args()
                .buf_mut(&mut buf)
                .arg(&iters)
                .arg(&n)
                .launch(grid_1d(n as usize, 256)?)?;
        }
        Ok(())
    })
}

fn main() -> Result<()> {
    let args = Args::parse();
    let revision = args.record.revision_or_unknown();
    let command = args.record.command_or_argv();
    let gpu = Gpu::get(0).context("this benchmark needs a GPU")?;
    let ctx = gpu.cuda_context();
    let sms = ctx.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u64;
    let clock_khz = ctx.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)? as u64;
    // 64 INT32 multiply-add lanes per SM on sm_80 and sm_90.
    let imad_peak = (sms * 64 * clock_khz * 1000) as f64;

    let mut rng = ChaCha20Rng::seed_from_u64(9);
    let n: usize = 1 << 20;
    let mut results = Vec::new();

    let fr: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
    let iters = 512u32;
    let s = bench_mul(&gpu, "arith_bench_mul_fr_bls12_381", &fr, iters)?;
    let muls = 2.0 * iters as f64 * n as f64;
    results.push(result(
        "arith/fr_mul/2^20x1024/random",
        &s,
        muls,
        imad_peak / imads_per_mul(8) as f64,
        imads_per_mul(8),
    ));

    let fq: Vec<Fp> = (0..n).map(|_| Fp::random(&mut rng)).collect();
    let iters = 128u32;
    let s = bench_mul(&gpu, "arith_bench_mul_fq_bls12_381", &fq, iters)?;
    let muls = 2.0 * iters as f64 * n as f64;
    results.push(result(
        "arith/fq_mul/2^20x256/random",
        &s,
        muls,
        imad_peak / imads_per_mul(12) as f64,
        imads_per_mul(12),
    ));

    let s = bench_mul(&gpu, "arith_bench_sqr_fr_bls12_381", &fr, 512)?;
    results.push(result(
        "arith/fr_sqr/2^20x1024/random",
        &s,
        2.0 * 512.0 * n as f64,
        imad_peak / imads_per_sqr(8) as f64,
        imads_per_sqr(8),
    ));
    let s = bench_mul(&gpu, "arith_bench_sqr_fq_bls12_381", &fq, 128)?;
    results.push(result(
        "arith/fq_sqr/2^20x256/random",
        &s,
        2.0 * 128.0 * n as f64,
        imad_peak / imads_per_sqr(12) as f64,
        imads_per_sqr(12),
    ));

    // XYZZ mixed addition (madd-2008-s): 8 Fq multiplications (u2, s2, ppp,
    // q2, two for y3, zz, zzz) and 2 squarings (pp, r^2).
    let table_len = 1024usize;
    let pts: Vec<G1Projective> = (0..table_len)
        .map(|_| G1Projective::random(&mut rng))
        .collect();
    let mut table = vec![G1Affine::default(); table_len];
    G1Projective::batch_normalize(&pts, &mut table);
    let k = gpu.kernel_in(&ARITH_BENCH, "arith_bench_madd_g1_bls12_381")?;
    let dtable = gpu.upload(&table)?;
    let mut out = gpu.alloc_zeros::<G1Projective>(n)?;
    let (iters, tl, nn) = (64u32, table_len as u32, n as u32);
    let s = time(&gpu, || {
        // SAFETY: arith_bench_madd_g1_bls12_381(const g1_affine_t* table,
        // uint32_t table_len, g1_jacobian_t* out, uint32_t iters, uint32_t n):
        // table holds table_len points, out holds n; thread i reads table
        // entries modulo table_len and writes out[i] only.
        unsafe {
            k.args()
                .buf(&dtable)
                .arg(&tl)
                .buf_mut(&mut out)
                .arg(&iters)
                .arg(&nn)
                .launch(grid_1d(n, 256)?)?;
        }
        Ok(())
    })?;
    let adds = iters as f64 * n as f64;
    let madd_imads = 8 * imads_per_mul(12) + 2 * imads_per_sqr(12);
    results.push(result(
        "arith/g1_xyzz_madd/2^20x64/random",
        &s,
        adds,
        imad_peak / madd_imads as f64,
        madd_imads,
    ));

    let doc = json!({
        "revision": revision,
        "date": today(),
        "machine": machine(gpu.name(), json!({
            "sms": sms,
            "clock_mhz": clock_khz / 1000,
            "imad_peak_per_s": imad_peak,
        })),
        "command": command,
        "results": results,
    });
    println!("{}", serde_json::to_string_pretty(&doc)?);
    Ok(())
}

fn result(
    name: &str,
    s: &Stat,
    ops: f64,
    bound_ops_per_s: f64,
    imads_per_op: u64,
) -> serde_json::Value {
    let rate = ops / s.median;
    json!({
        "name": name,
        "unit": "s",
        "median": s.median, "min": s.min, "max": s.max, "runs": s.runs,
        "derived": {"mul_per_s": rate, "fraction_of_imad_bound": rate / bound_ops_per_s},
        "bound": {"name": format!("imad-peak / {imads_per_op} IMADs per op"), "value": ops / bound_ops_per_s},
        "notes": format!("{ops:.3e} operations per run; rate {rate:.3e}/s vs IMAD-bound {bound_ops_per_s:.3e}/s"),
    })
}
