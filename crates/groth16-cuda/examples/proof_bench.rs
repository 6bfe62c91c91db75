//! Whole-proof time of the CUDA backend beside bellperson's CPU
//! `create_proof` on the same machine, for the PoRep-shaped circuit
//! (`porep:K`, exactly 2^K constraints) at the sizes given.
//!
//! Parameters are fake (cheap pseudo-random points of the right counts,
//! [`cuzk_groth16_cuda::fake::fake_params`]): the provers do exactly the
//! work real parameters give them, and since both get the same parameters,
//! circuit, r and s, the proofs are still compared byte for byte (they just
//! do not verify). Per size: one warm-up proof (it also uploads the
//! parameters, reported apart), then `runs` timed proofs, each from a fresh
//! witness synthesis: "synthesis excluded" is prepare + kernel region +
//! assembly with a, b, c already evaluated, "synthesis included" adds the
//! witness synthesis and the a/b/c evaluation (SpMV) of the same run.
//! Per-stage figures: wall clock for the host stages, CUDA events for the
//! device stages (H2D, H, each MSM). Each run then proves the same witness,
//! r and s again with a, b, c evaluated on the GPU from the PCE
//! (`AbcInput::FromPce`: only the witness is uploaded), checks the proof
//! bytes are the same, and reports it as "abc-on-gpu/synthesis-excluded".
//!
//! bellperson runs once per size up to `--bellperson-max` (its time
//! includes its own synthesis; its synthesis-excluded figure subtracts
//! this run's median witness + SpMV time, which does the same work, and is
//! labelled an estimate).
//!
//! Usage: proof_bench <short git revision> <command line for the record>
//!        [--sizes 20,22,24] [--runs 3] [--bellperson-max 24]
//!        [--window-multiples false] (true: resident queries keep their
//!        window multiples where the card has room, `GpuOptions::window_multiples`)
//!        [--whole-ntt-tables false] (true: the NTT's top-pass factor and H's
//!        scalings from whole tables, `TableLayout::WHOLE`)
//!        [--ntt-fused-bitrev true] (H's last pass writes natural order,
//!        `NttConfig::fused_bitrev`, as by default; false: the separate
//!        bit-reversal launch)
//! Writes the bench-data JSON (area `prover`) to stdout; progress to stderr.

#[path = "common/args.rs"]
mod args;
#[path = "common/mod.rs"]
mod common;
use args::{List, Record};
use common::{Stat, machine, result, today};

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use bellperson::groth16::{Proof, create_proof};
use blstrs::Scalar;
use clap::{ArgAction, Parser};
use cuzk_groth16_cuda::fake::fake_params;
use cuzk_groth16_cuda::ntt::{NttConfig, TableLayout};
use cuzk_groth16_cuda::{AbcInput, Bls12, GpuOptions, GpuProver, Prover, ProverInput};
use cuzk_synth::circuits::CircuitSpec;
use cuzk_synth::{Pce, Witness};
use ff::Field;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use serde_json::{Value, json};

/// Whole-proof time of the CUDA backend beside bellperson's CPU
/// `create_proof`, for `porep:K` circuits with fake parameters; writes the
/// bench-data JSON (area `prover`) to stdout, progress to stderr.
#[derive(Debug, Parser)]
#[command(name = "proof_bench", args_override_self = true)]
struct Args {
    #[command(flatten)]
    record: Record,
    /// Circuit sizes, comma-separated: `porep:K`, 2^K constraints each.
    #[arg(long, value_name = "K,..", default_value = "20,22,24")]
    sizes: List<u32>,
    /// Timed proofs per size (after one warm-up).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Largest K bellperson's CPU prover runs at (0: none).
    #[arg(long, value_name = "K", default_value_t = 24)]
    bellperson_max: u32,
    /// true: resident queries keep their window multiples where the card has
    /// room (`GpuOptions::window_multiples`).
    #[arg(long, value_name = "BOOL", action = ArgAction::Set, default_value_t = false)]
    window_multiples: bool,
    /// true: the NTT's top-pass factor and H's scalings from whole tables
    /// (`TableLayout::WHOLE`).
    #[arg(long, value_name = "BOOL", action = ArgAction::Set, default_value_t = false)]
    whole_ntt_tables: bool,
    /// true: H's last pass writes natural order (`NttConfig::fused_bitrev`);
    /// false: the separate bit-reversal launch.
    #[arg(long, value_name = "BOOL", action = ArgAction::Set, default_value_t = NttConfig::default().fused_bitrev)]
    ntt_fused_bitrev: bool,
}

fn proof_bytes(p: &Proof<Bls12>) -> Vec<u8> {
    let mut v = Vec::with_capacity(192);
    p.write(&mut v).expect("writing to a Vec cannot fail");
    v
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn main() -> Result<()> {
    let args = Args::parse();
    if args.runs == 0 {
        bail!("--runs must be at least 1");
    }
    let gpu = GpuProver::with_options(
        0,
        GpuOptions {
            window_multiples: args.window_multiples,
            ntt: NttConfig {
                tables: if args.whole_ntt_tables {
                    TableLayout::WHOLE
                } else {
                    TableLayout::SMALL
                },
                fused_bitrev: args.ntt_fused_bitrev,
                ..NttConfig::default()
            },
            ..GpuOptions::default()
        },
    )
    .context("the CUDA backend needs a GPU")?;
    let gpu_name = gpu.gpu().name().to_owned();
    eprintln!("GPU 0: {gpu_name}");
    let mut results = Vec::new();
    for &k in &args.sizes {
        let spec: CircuitSpec = format!("porep:{k}").parse()?;
        let size = format!("2^{k}");
        let t = Instant::now();
        let pce = Pce::record(spec.build(0))?;
        eprintln!("{spec}: recorded in {:.1?}", t.elapsed());
        let t = Instant::now();
        let params = fake_params(&pce, 42);
        eprintln!("{spec}: fake parameters in {:.1?}", t.elapsed());
        let mut rng = ChaCha20Rng::seed_from_u64(u64::from(k));

        // Warm-up: loads the modules, uploads the parameters, grows scratch.
        let witness =
            Witness::synthesize_with_capacity(spec.build(1), pce.num_inputs, pce.num_aux)?;
        let t = Instant::now();
        let input = ProverInput {
            pce: &pce,
            witness: &witness,
            abc: AbcInput::FromPce,
        };
        gpu.prove(input, &params, Scalar::ONE, Scalar::ONE)?;
        let warm = t.elapsed();
        eprintln!("{spec}: warm-up proof {warm:.2?} (incl. parameter upload)");
        drop(witness);

        let mut excluded = Vec::new();
        let mut included = Vec::new();
        let mut synth = Vec::new();
        let mut wall_stages: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        let mut gpu_stages: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        let mut from_pce = Vec::new();
        let mut witness_only = Vec::new();
        let mut pce_gpu_stages: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        let mut last = None;
        for run in 0..args.runs {
            let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
            let seed = 2 + run as u64;
            let t0 = Instant::now();
            let witness =
                Witness::synthesize_with_capacity(spec.build(seed), pce.num_inputs, pce.num_aux)?;
            let t_abc = Instant::now();
            let abc = cuzk_synth::evaluate(&pce, &witness)?;
            let abc_time = t_abc.elapsed();
            let synth_time = t0.elapsed();
            let t1 = Instant::now();
            let out = gpu.prove(
                ProverInput {
                    pce: &pce,
                    witness: &witness,
                    abc: AbcInput::Evaluated {
                        a: &abc.a,
                        b: &abc.b,
                        c: &abc.c,
                    },
                },
                &params,
                r,
                s,
            )?;
            let prove = t1.elapsed();
            excluded.push(secs(prove));
            included.push(secs(synth_time + prove));
            synth.push(secs(synth_time));
            for (stage, d) in &out.timings.0 {
                wall_stages.entry(stage).or_default().push(secs(*d));
            }
            for (stage, d) in out.timings.gpu() {
                gpu_stages.entry(stage).or_default().push(secs(*d));
            }
            eprintln!(
                "{spec}: run {run}: synthesis {synth_time:.2?}, proof {prove:.3?} ({})",
                out.timings
                    .gpu()
                    .iter()
                    .map(|(s, d)| format!("{s} {:.1} ms", d.as_secs_f64() * 1e3))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            // The same witness, r and s with a, b, c evaluated on the GPU
            // from the PCE: only the witness is uploaded. Same proof bytes.
            witness_only.push(secs(synth_time) - secs(abc_time));
            drop(abc);
            let t2 = Instant::now();
            let on_gpu = gpu.prove(
                ProverInput {
                    pce: &pce,
                    witness: &witness,
                    abc: AbcInput::FromPce,
                },
                &params,
                r,
                s,
            )?;
            from_pce.push(secs(t2.elapsed()));
            for (stage, d) in on_gpu.timings.gpu() {
                pce_gpu_stages.entry(stage).or_default().push(secs(*d));
            }
            anyhow::ensure!(
                proof_bytes(&on_gpu.proof) == proof_bytes(&out.proof),
                "{spec}: the proof with a, b, c evaluated on the GPU differs from the one with them given"
            );
            eprintln!(
                "{spec}: run {run}: a, b, c on the GPU: proof {:.3?}",
                t2.elapsed()
            );
            last = Some((seed, r, s, proof_bytes(&out.proof)));
        }

        let synth_median = Stat::of(synth.clone()).median;
        let mut baseline = None;
        let mut identical = Value::Null;
        if k <= args.bellperson_max {
            let (seed, r, s, ours) = last.clone().context("at least one run")?;
            eprintln!("{spec}: bellperson create_proof on the CPU ...");
            let t = Instant::now();
            let theirs = create_proof(spec.build(seed), &params, r, s)?;
            let bp = secs(t.elapsed());
            let same = proof_bytes(&theirs) == ours;
            eprintln!("{spec}: bellperson {bp:.2} s, byte-identical: {same}");
            identical = Value::Bool(same);
            baseline = Some(bp);
        }

        let base = |median_of_ours: f64, bp: Option<f64>, name: &str| -> Value {
            match bp {
                Some(bp) => json!({
                    "baseline": {"name": name, "median": bp},
                    "ratio_vs_baseline": bp / median_of_ours,
                }),
                None => json!({}),
            }
        };
        let ex_med = Stat::of(excluded.clone()).median;
        let in_med = Stat::of(included.clone()).median;
        let mut ex = base(
            ex_med,
            baseline.map(|b| (b - synth_median).max(f64::MIN_POSITIVE)),
            "bellperson-cpu-create_proof-minus-synthesis-estimate",
        );
        if let Value::Object(o) = &mut ex {
            o.insert("derived".into(), json!({"proofs_per_s": 1.0 / ex_med}));
            o.insert("byte_identical_to_bellperson".into(), identical.clone());
            o.insert(
                "notes".into(),
                json!(format!(
                    "fake parameters (same for both provers); warm-up proof incl. parameter \
                     upload {:.3} s",
                    secs(warm)
                )),
            );
        }
        results.push(result(
            format!("prover/gpu/{size}/porep/synthesis-excluded"),
            &excluded,
            ex,
        ));
        let inc = base(in_med, baseline, "bellperson-cpu-create_proof");
        results.push(result(
            format!("prover/gpu/{size}/porep/synthesis-included"),
            &included,
            inc,
        ));
        results.push(result(
            format!("prover/synthesis/{size}/porep/witness+spmv"),
            &synth,
            json!({}),
        ));
        results.push(result(
            format!("prover/gpu/{size}/porep/abc-on-gpu/synthesis-excluded"),
            &from_pce,
            json!({
                "derived": {"proofs_per_s": 1.0 / Stat::of(from_pce.clone()).median},
                "notes": "the same witnesses, r and s as synthesis-excluded, with a, b, c \
                          evaluated on the GPU from the PCE (only the witness is uploaded); \
                          the proofs are byte-identical to those"
            }),
        ));
        results.push(result(
            format!("prover/synthesis/{size}/porep/witness"),
            &witness_only,
            json!({}),
        ));
        for (stage, v) in &pce_gpu_stages {
            results.push(result(
                format!("prover/gpu/{size}/porep/abc-on-gpu/stage-gpu-events/{stage}"),
                v,
                json!({}),
            ));
        }
        if let Some(bp) = baseline {
            results.push(result(
                format!("prover/bellperson-cpu/{size}/porep/create_proof"),
                &[bp],
                json!({"notes": "one run; includes bellperson's own synthesis"}),
            ));
        }
        for (stage, v) in &wall_stages {
            results.push(result(
                format!("prover/gpu/{size}/porep/stage-wall/{stage}"),
                v,
                json!({}),
            ));
        }
        for (stage, v) in &gpu_stages {
            results.push(result(
                format!("prover/gpu/{size}/porep/stage-gpu-events/{stage}"),
                v,
                json!({}),
            ));
        }
        drop(params);
        gpu.evict_params();
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
