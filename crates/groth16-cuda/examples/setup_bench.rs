//! Time of Groth16 parameter generation on the GPU (`cuzk_groth16_cuda::setup`)
//! for the PoRep-shaped circuit (`porep:K`, exactly 2^K constraints) at the
//! sizes given, beside bellperson's `generate_parameters` and cuzk's own CPU
//! path on the same machine where they finish in reasonable time.
//!
//! Per size: the PCE is recorded (timed apart: `cuzk setup --gpu` does it
//! too), then `runs` generations into a parameter file in `--dir` (removed
//! at the end), each with the per-stage times of [`SetupReport`]: QAP
//! evaluation, tables, every section's fixed-base multiplications, GPU
//! kernel time (CUDA events), writer busy time and the tail after the last
//! point, total. One warm-up generation of a small circuit first loads the
//! PTX. Where bellperson runs (`--bellperson-max`), its file for the same
//! toxic waste is compared with ours byte for byte. With `--prove`, the
//! parameters are read back and one proof made on the GPU
//! (`GpuProver`) is checked byte for byte against bellperson's
//! `create_proof` with the same r and s (up to `--bellperson-max`) and
//! verified with bellperson's `verify_proof`.
//!
//! `--windows 10,12,16` also times the fixed-base kernels alone per window
//! width (2^22 random G1 scalars, 2^20 G2), for tuning the default.
//!
//! Usage: setup_bench <short git revision> <command line for the record>
//!        [--sizes 24] [--runs 1] [--bellperson-max 16] [--cpu-max 18]
//!        [--prove] [--windows 10,12,14,16,18] [--window 12] [--dir /tmp]
//! Writes the bench-data JSON (area `setup`) to stdout; progress to stderr.

#[path = "common/args.rs"]
mod args;
#[path = "common/mod.rs"]
mod common;
use args::{List, Record};
use common::{Stat, machine, result, today};

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use bellperson::groth16::{Parameters, create_proof, prepare_verifying_key, verify_proof};
use blstrs::Scalar;
use clap::Parser;
use cuzk_groth16_cuda::setup::{
    DEFAULT_WINDOW_BITS, GpuFixedBase, SetupOptions, SetupReport, ToxicWaste,
    generate_parameters_file,
};
use cuzk_groth16_cuda::{AbcInput, Bls12, GpuProver, Prover, ProverInput, read_params};
use cuzk_synth::circuits::CircuitSpec;
use cuzk_synth::{Pce, Witness};
use ff::Field;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use serde_json::{Value, json};

/// Time of Groth16 parameter generation on GPU 0 for `porep:K` circuits,
/// beside bellperson's `generate_parameters` and cuzk's CPU path; writes
/// the bench-data JSON (area `setup`) to stdout, progress to stderr.
#[derive(Debug, Parser)]
#[command(name = "setup_bench", args_override_self = true)]
struct Args {
    #[command(flatten)]
    record: Record,
    /// Circuit sizes, comma-separated: `porep:K`, 2^K constraints each.
    #[arg(long, value_name = "K,..", default_value = "24")]
    sizes: List<u32>,
    /// Timed generations per size.
    #[arg(long, default_value_t = 1)]
    runs: usize,
    /// Largest K bellperson's `generate_parameters` runs at (its file is
    /// compared with ours byte for byte).
    #[arg(long, value_name = "K", default_value_t = 16)]
    bellperson_max: u32,
    /// Largest K cuzk's CPU path runs at.
    #[arg(long, value_name = "K", default_value_t = 18)]
    cpu_max: u32,
    /// Read the parameters back, prove once on the GPU and verify the proof.
    #[arg(long)]
    prove: bool,
    /// Also time the fixed-base kernels alone at each of these window
    /// widths, comma-separated (2^22 random G1 scalars, 2^20 G2).
    #[arg(long, value_name = "BITS,..")]
    windows: Option<List<u32>>,
    /// The fixed-base window width of the generations.
    #[arg(long, value_name = "BITS", default_value_t = DEFAULT_WINDOW_BITS)]
    window: u32,
    /// Where the parameter files are written (removed at the end).
    #[arg(long, default_value_os_t = std::env::temp_dir())]
    dir: PathBuf,
}

/// Per-stage seconds of a report, by stage name.
fn stages(r: &SetupReport) -> Vec<(String, f64)> {
    let mut v = vec![
        ("qap".to_owned(), r.qap_s),
        ("tables".to_owned(), r.tables_s),
    ];
    for s in &r.sections {
        v.push((format!("points/{}", s.name), s.compute_s));
    }
    v.push(("gpu-kernels-events".to_owned(), r.kernel_s));
    v.push(("writer-busy".to_owned(), r.write_busy_s));
    v.push(("write-tail".to_owned(), r.write_tail_s));
    v.push(("total".to_owned(), r.total_s));
    v
}

fn log_report(spec: &CircuitSpec, r: &SetupReport) {
    let parts: Vec<String> = stages(r)
        .iter()
        .map(|(s, t)| format!("{s} {t:.3}"))
        .collect();
    eprintln!(
        "{spec}: {}, window {} bits ({} points, {:.2} GB): {} s",
        r.backend,
        r.window_bits,
        r.sections.iter().map(|s| s.points).sum::<usize>(),
        r.bytes as f64 / 1e9,
        parts.join(", ")
    );
}

fn bellperson_file(spec: &CircuitSpec, waste: &ToxicWaste) -> Result<(Vec<u8>, f64)> {
    let t = Instant::now();
    let params: Parameters<Bls12> = bellperson::groth16::generate_parameters(
        spec.build(0),
        waste.g1,
        waste.g2,
        waste.alpha,
        waste.beta,
        waste.gamma,
        waste.delta,
        waste.tau,
    )?;
    let mut bytes = Vec::new();
    params.write(&mut bytes)?;
    Ok((bytes, t.elapsed().as_secs_f64()))
}

/// Times the fixed-base kernels alone per window width.
fn window_sweep(windows: &[u32], results: &mut Vec<Value>) -> Result<()> {
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let waste = ToxicWaste::random(&mut rng);
    let g1_scalars: Vec<Scalar> = (0..1 << 22).map(|_| Scalar::random(&mut rng)).collect();
    let g2_scalars = &g1_scalars[..1 << 20];
    for &c in windows {
        let mut fb = GpuFixedBase::new(0, &waste.g1, &waste.g2, c)?;
        fb.g1(&g1_scalars[..1 << 16])?; // warm-up
        for (curve, n) in [("g1", g1_scalars.len()), ("g2", g2_scalars.len())] {
            let mut wall = Vec::new();
            let mut kernels = Vec::new();
            for _ in 0..3 {
                let before = fb.kernel_ms();
                let t = Instant::now();
                if curve == "g1" {
                    fb.g1(&g1_scalars)?;
                } else {
                    fb.g2(g2_scalars)?;
                }
                wall.push(t.elapsed().as_secs_f64());
                kernels.push((fb.kernel_ms() - before) / 1e3);
            }
            let k_med = Stat::of(kernels.clone()).median;
            eprintln!(
                "fixed-base {curve} 2^{} window {c}: wall {:.3} s, kernels {k_med:.3} s",
                n.trailing_zeros(),
                Stat::of(wall.clone()).median
            );
            let log2 = n.trailing_zeros();
            results.push(result(
                format!("setup/fixed-base/{curve}/2^{log2}/random/window={c}/kernels"),
                &kernels,
                json!({"derived": {"points_per_s": n as f64 / k_med},
                       "notes": "CUDA events around the multiplication and affine kernels"}),
            ));
            results.push(result(
                format!("setup/fixed-base/{curve}/2^{log2}/random/window={c}/wall"),
                &wall,
                json!({"notes": "upload, kernels, download of affine points"}),
            ));
        }
    }
    Ok(())
}

fn prove_and_verify(
    spec: &CircuitSpec,
    pce: &Pce,
    path: &std::path::Path,
    check_bellperson: bool,
) -> Result<Value> {
    let t = Instant::now();
    let params = read_params(path, false)?;
    let read_s = t.elapsed().as_secs_f64();
    let gpu = GpuProver::new(0)?;
    let witness = Witness::synthesize_with_capacity(spec.build(1), pce.num_inputs, pce.num_aux)?;
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
    let t = Instant::now();
    let proof = gpu
        .prove(
            ProverInput {
                pce,
                witness: &witness,
                abc: AbcInput::FromPce,
            },
            &params,
            r,
            s,
        )?
        .proof;
    let prove_s = t.elapsed().as_secs_f64();
    let pvk = prepare_verifying_key(&params.vk);
    let verified = verify_proof(&pvk, &proof, witness.public_inputs())?;
    let mut same = Value::Null;
    if check_bellperson {
        let theirs = create_proof(spec.build(1), &params, r, s)?;
        let (mut a, mut b) = (Vec::new(), Vec::new());
        proof.write(&mut a)?;
        theirs.write(&mut b)?;
        same = Value::Bool(a == b);
    }
    eprintln!(
        "{spec}: parameters read in {read_s:.1} s, GPU proof in {prove_s:.2} s (incl. parameter \
         upload), verifies: {verified}, byte-identical to bellperson: {same}"
    );
    if !verified {
        bail!("{spec}: the proof made with the generated parameters does not verify");
    }
    Ok(json!({
        "verified": verified,
        "proof_byte_identical_to_bellperson": same,
        "read_params_s": read_s,
        "prove_s_incl_upload": prove_s,
    }))
}

fn main() -> Result<()> {
    let args = Args::parse();
    if args.runs == 0 {
        bail!("--runs must be at least 1");
    }
    let gpu = cuzk_groth16_cuda::cuda::Gpu::get(0).context("this benchmark needs a GPU")?;
    let gpu_name = gpu.name().to_owned();
    eprintln!("GPU 0: {gpu_name}");
    let mut results = Vec::new();
    let options = SetupOptions {
        window_bits: Some(args.window),
        ..SetupOptions::gpu(0)
    };

    // Warm-up: JIT of the PTX module, first allocations.
    {
        let spec: CircuitSpec = "porep:10".parse()?;
        let pce = Pce::record(spec.build(0))?;
        let path = args.dir.join("cuzk-setup-bench-warmup.params");
        let t = Instant::now();
        generate_parameters_file(&path, &pce, &ToxicWaste::from_seed(1), &options)?;
        eprintln!("warm-up ({spec}) in {:.2?}", t.elapsed());
        std::fs::remove_file(&path)?;
    }
    if let Some(windows) = &args.windows {
        window_sweep(windows, &mut results)?;
    }

    for &k in &args.sizes {
        let spec: CircuitSpec = format!("porep:{k}").parse()?;
        let size = format!("2^{k}");
        let t = Instant::now();
        let pce = Pce::record(spec.build(0))?;
        let record_s = t.elapsed().as_secs_f64();
        eprintln!(
            "{spec}: PCE recorded in {record_s:.1} s ({} inputs, {} aux)",
            pce.num_inputs, pce.num_aux
        );
        results.push(result(
            format!("setup/pce-record/{size}/porep"),
            &[record_s],
            json!({"notes": "Pce::record, single-threaded circuit synthesis; cuzk setup --gpu does it first"}),
        ));
        let waste = ToxicWaste::from_seed(u64::from(k));
        let path = args.dir.join(format!("cuzk-setup-bench-porep-{k}.params"));

        let mut reports = Vec::new();
        for run in 0..args.runs {
            let report = generate_parameters_file(&path, &pce, &waste, &options)?;
            eprint!("run {run}: ");
            log_report(&spec, &report);
            reports.push(report);
        }
        let totals: Vec<f64> = reports.iter().map(|r| r.total_s).collect();
        let total_med = Stat::of(totals.clone()).median;

        // bellperson on the same toxic waste, bytes compared.
        let mut baseline = None;
        let mut identical = Value::Null;
        if k <= args.bellperson_max {
            eprintln!("{spec}: bellperson generate_parameters on the CPU ...");
            let (theirs, bp_s) = bellperson_file(&spec, &waste)?;
            let ours = std::fs::read(&path)?;
            let same = ours == theirs;
            eprintln!("{spec}: bellperson {bp_s:.1} s, byte-identical: {same}");
            if !same {
                bail!("{spec}: the GPU parameters differ from bellperson's");
            }
            identical = Value::Bool(same);
            baseline = Some(bp_s);
            results.push(result(
                format!("setup/bellperson-cpu/{size}/porep/generate_parameters"),
                &[bp_s],
                json!({"notes": "one run; circuit synthesis included, file writing excluded"}),
            ));
        }
        // cuzk's CPU path on the same toxic waste.
        if k <= args.cpu_max {
            let cpu_path = args
                .dir
                .join(format!("cuzk-setup-bench-porep-{k}-cpu.params"));
            let cpu = generate_parameters_file(&cpu_path, &pce, &waste, &SetupOptions::cpu())?;
            log_report(&spec, &cpu);
            let same = std::fs::read(&cpu_path)? == std::fs::read(&path)?;
            std::fs::remove_file(&cpu_path)?;
            if !same {
                bail!("{spec}: the CPU and GPU paths wrote different files");
            }
            results.push(result(
                format!("setup/cuzk-cpu/{size}/porep/total"),
                &[cpu.total_s],
                json!({"notes": format!(
                    "cuzk's CPU fixed-base path (window {} bits, chosen by size), same file as \
                     the GPU's (checked)",
                    cpu.window_bits
                )}),
            ));
        }

        let mut extra = match baseline {
            Some(bp) => json!({
                "baseline": {"name": "bellperson-cpu-generate_parameters", "median": bp},
                "ratio_vs_baseline": bp / total_med,
            }),
            None => json!({}),
        };
        let last = reports.last().context("at least one run")?;
        if let Value::Object(o) = &mut extra {
            o.insert(
                "derived".into(),
                json!({
                    "points_per_s": last.sections.iter().map(|s| s.points).sum::<usize>() as f64
                        / total_med,
                    "gb_per_s": last.bytes as f64 / 1e9 / total_med,
                }),
            );
            o.insert("byte_identical_to_bellperson".into(), identical);
            o.insert(
                "notes".into(),
                json!(format!(
                    "{} bytes written to {} (fsync included); window {} bits; chunk {} scalars; \
                     PCE recording ({record_s:.1} s) not included",
                    last.bytes,
                    args.dir.display(),
                    last.window_bits,
                    last.chunk_len
                )),
            );
        }
        results.push(result(
            format!("setup/gpu/{size}/porep/total"),
            &totals,
            extra,
        ));
        let with_record: Vec<f64> = totals.iter().map(|t| t + record_s).collect();
        results.push(result(
            format!("setup/gpu/{size}/porep/total-with-pce-record"),
            &with_record,
            json!({"notes": "what `cuzk setup --gpu` takes: PCE recording plus generation"}),
        ));
        let names: Vec<String> = stages(last).into_iter().map(|(n, _)| n).collect();
        for (i, name) in names.iter().enumerate() {
            if name == "total" {
                continue;
            }
            let v: Vec<f64> = reports.iter().map(|r| stages(r)[i].1).collect();
            results.push(result(
                format!("setup/gpu/{size}/porep/stage/{name}"),
                &v,
                json!({}),
            ));
        }

        if args.prove {
            let proof = prove_and_verify(&spec, &pce, &path, k <= args.bellperson_max)?;
            results.push(result(
                format!("setup/gpu/{size}/porep/proof-with-generated-params"),
                &[proof["prove_s_incl_upload"].as_f64().unwrap_or(0.0)],
                proof,
            ));
        }
        std::fs::remove_file(&path)?;
    }

    let out = json!({
        "revision": args.record.revision,
        "date": today(),
        "machine": machine(&gpu_name, json!({})),
        "command": args.record.command,
        "results": results,
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}
