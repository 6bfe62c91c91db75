//! One PoRep partition's witness, made several ways from a synthetic C1 of
//! any sector size (no sealed sector, no parameters):
//!
//! - bellperson: its prover's own synthesis (`ProvingAssignment`: values,
//!   densities and the A, B, C evaluations), reached through
//!   `create_proof_batch` with a parameter source that stops the prover at
//!   the first thing it asks of the parameters, right after synthesis; on
//!   one thread, as bellperson synthesizes one partition;
//! - cuzk, sequential: storage-proofs' circuit on cuzk's witness system, one
//!   thread;
//! - cuzk, parallel: cuzk's PoRep circuit with the partition's challenges
//!   synthesized in parallel on every core, first with every value by
//!   storage-proofs' circuit, then with the SHA-256 (the labels', tree D's
//!   path) made natively (what the engine does), each checked equal to the sequential witness.
//!
//! `--concurrent K` also makes K partitions' parallel witnesses at once on
//! K threads (as the engine's synthesis threads do), with huge pages for
//! the witness buffers off, on, and off again (`cuzk_synth::set_huge_pages`),
//! reporting wall time and the process's user and system CPU time of each.
//!
//! `--profile DEPTH` also prints (and records) where one challenge's
//! synthesis spends its time, by namespace path cut to DEPTH components
//! (`cuzk_synth::Profile`: SHA-256 labeling, Poseidon column hashes, the
//! Merkle paths, encoding), on one thread.
//!
//! ```text
//! cargo run --release -p cuzk-filecoin --example witness_bench -- \
//!     --seal-proof StackedDrg32GiBV1_1 [--seed 1] [--partition 0] [--runs 1] \
//!     [--skip-bellperson] [--skip-sequential] [--concurrent K] [--profile DEPTH] [--json REV CMD]
//! ```

// The benchmark examples' shared arguments, by path.
#[path = "../../groth16-cuda/examples/common/args.rs"]
mod args;
use args::JsonRecord;
// What the Filecoin benchmark examples share, in common/ beside them.
mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use bellperson::SynthesisError;
use bellperson::groth16::{ParameterSource, VerifyingKey, create_proof_batch};
use blstrs::{Bls12, G1Affine, G2Affine, Scalar};
use clap::Parser;
use cuzk_filecoin::{SealProof, porep, synthetic};
use cuzk_synth::Witness;
use ff::Field;
use storage_proofs_core::merkle::MerkleTreeTrait;

/// One PoRep partition's witness from a synthetic C1 of any sector size,
/// made by bellperson's prover and by cuzk (sequential, parallel, native
/// SHA-256), each checked against the sequential one.
#[derive(Debug, Parser)]
#[command(name = "witness_bench", args_override_self = true)]
struct Args {
    /// The seal proof whose partition is made (e.g. `StackedDrg32GiBV1_1`).
    #[arg(
        long = "seal-proof",
        value_name = "NAME",
        default_value = "StackedDrg2KiBV1_1"
    )]
    proof: SealProof,
    /// The synthetic C1's seed.
    #[arg(long, value_name = "N", default_value_t = 1)]
    seed: u64,
    /// Which partition's witness.
    #[arg(long, value_name = "K", default_value_t = 0)]
    partition: usize,
    /// Runs of each way.
    #[arg(long, value_name = "N", default_value_t = 1)]
    runs: usize,
    /// Leave out bellperson's synthesis.
    #[arg(long)]
    skip_bellperson: bool,
    /// Leave out cuzk's sequential synthesis (storage-proofs' circuit, one
    /// thread).
    #[arg(long)]
    skip_sequential: bool,
    /// Also print and record where one challenge's synthesis spends its
    /// time, by namespace path cut to DEPTH components.
    #[arg(long, value_name = "DEPTH")]
    profile: Option<usize>,
    /// Also make K partitions' parallel witnesses at once on K threads, with
    /// huge pages off, on and off again.
    #[arg(long, value_name = "K")]
    concurrent: Option<usize>,
    #[command(flatten)]
    json: JsonRecord,
}

/// A parameter source that answers nothing: bellperson's prover asks it for
/// the verifying key right after synthesizing, and stops there.
struct StopAfterSynthesis;

const STOP: &str = "stopped after synthesis";

impl ParameterSource<Bls12> for StopAfterSynthesis {
    type G1Builder = (Arc<Vec<G1Affine>>, usize);
    type G2Builder = (Arc<Vec<G2Affine>>, usize);

    fn get_vk(&self, _: usize) -> Result<&VerifyingKey<Bls12>, SynthesisError> {
        Err(stop())
    }
    fn get_h(&self, _: usize) -> Result<Self::G1Builder, SynthesisError> {
        Err(stop())
    }
    fn get_l(&self, _: usize) -> Result<Self::G1Builder, SynthesisError> {
        Err(stop())
    }
    fn get_a(
        &self,
        _: usize,
        _: usize,
    ) -> Result<(Self::G1Builder, Self::G1Builder), SynthesisError> {
        Err(stop())
    }
    fn get_b_g1(
        &self,
        _: usize,
        _: usize,
    ) -> Result<(Self::G1Builder, Self::G1Builder), SynthesisError> {
        Err(stop())
    }
    fn get_b_g2(
        &self,
        _: usize,
        _: usize,
    ) -> Result<(Self::G2Builder, Self::G2Builder), SynthesisError> {
        Err(stop())
    }
}

fn stop() -> SynthesisError {
    SynthesisError::IoError(std::io::Error::other(STOP))
}

/// Runs `f` on a pool of `threads` threads.
fn on_threads<T: Send>(threads: usize, f: impl FnOnce() -> T + Send) -> Result<T> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()?;
    Ok(pool.install(f))
}

/// mimalloc, or the system's allocator with `CUZK_ALLOCATOR=system`.
#[global_allocator]
static ALLOC: cuzk_synth::allocator::Allocator = cuzk_synth::allocator::Allocator;

fn main() -> Result<()> {
    common::init_tracing("warn");
    let args = Args::parse();
    ensure!(args.runs > 0, "--runs must be at least 1");
    use cuzk_filecoin::sector::Shape;
    match args.proof.sector_size.shape() {
        Shape::Base => run::<filecoin_proofs::SectorShapeBase>(&args),
        Shape::Sub2 => run::<filecoin_proofs::SectorShapeSub2>(&args),
        Shape::Sub8 => run::<filecoin_proofs::SectorShapeSub8>(&args),
        Shape::Top2 => run::<filecoin_proofs::SectorShapeTop2>(&args),
    }
}

/// Median, min and max of `times` in seconds.
fn stats(times: &[Duration]) -> (f64, f64, f64) {
    let mut s: Vec<f64> = times.iter().map(Duration::as_secs_f64).collect();
    s.sort_by(f64::total_cmp);
    (s[s.len() / 2], s[0], s[s.len() - 1])
}

fn run<Tree: 'static + MerkleTreeTrait>(args: &Args) -> Result<()> {
    let proof = args.proof;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let s = synthetic::generate::<Tree>(proof, args.seed)?;
    eprintln!(
        "synthetic C1: {:.2} s; allocator {}",
        s.seconds,
        cuzk_synth::allocator::active_name()
    );
    let k = args.partition;
    let theirs = porep::stacked_circuits(&s.c1, proof)?;
    let ours = porep::partitions(&s.c1, proof, std::path::Path::new(""))?.circuits;
    ensure!(
        k < ours.len(),
        "partition {k} asked for; {proof} has {}",
        ours.len()
    );
    let (theirs, ours) = (&theirs[k], &ours[k]);
    let challenges = ours.challenges();

    // cuzk, sequential: also gives the sizes the engine would take from the
    // PCE (under --skip-sequential, an untimed parallel witness gives them,
    // and the timed ones are compared with it).
    let mut seq_times = Vec::new();
    let mut reference = None;
    if !args.skip_sequential {
        for _ in 0..args.runs {
            let c = theirs.clone();
            let t = Instant::now();
            let w = on_threads(1, || Witness::synthesize(c))??;
            seq_times.push(t.elapsed());
            reference = Some(w);
        }
    } else {
        reference = Some(ours.clone().witness_with(0, 0, false)?);
    }
    let reference = reference.context("no run")?;
    let (inputs, aux) = (reference.inputs.len(), reference.aux.len());
    eprintln!(
        "cuzk sequential: {:.2?} ({inputs} inputs, {aux} aux, {challenges} challenges)",
        seq_times
    );

    // Both ways: the SHA-256 (labels, tree D's path) by storage-proofs' circuit
    // (bellperson's gadget), then made natively (the default).
    let (mut sp_times, mut par_times) = (Vec::new(), Vec::new());
    for native in [false, true] {
        for _ in 0..args.runs {
            let c = ours.clone();
            let t = Instant::now();
            let w = c.witness_with(inputs, aux, native)?;
            let d = t.elapsed();
            if native {
                &mut par_times
            } else {
                &mut sp_times
            }
            .push(d);
            ensure!(
                w == reference,
                "the parallel witness (native SHA-256 {native}) differs from the {} one",
                if !args.skip_sequential {
                    "sequential"
                } else {
                    "first parallel"
                }
            );
        }
    }
    drop(reference);
    eprintln!(
        "cuzk parallel ({} threads): SHA-256 by storage-proofs' circuit {:.2?}, native {:.2?}",
        rayon::current_num_threads(),
        sp_times,
        par_times
    );

    let mut bp_times = Vec::new();
    if !args.skip_bellperson {
        for _ in 0..args.runs {
            let c = theirs.clone();
            let t = Instant::now();
            let res = on_threads(1, || {
                create_proof_batch(
                    vec![c],
                    StopAfterSynthesis,
                    vec![Scalar::ONE],
                    vec![Scalar::ONE],
                )
            })?;
            bp_times.push(t.elapsed());
            match res {
                Err(SynthesisError::IoError(e)) if e.to_string() == STOP => {}
                Err(e) => bail!("bellperson failed before its parameters were asked for: {e}"),
                Ok(_) => bail!("bellperson made a proof without parameters"),
            }
        }
        eprintln!("bellperson (1 thread): {:.2?}", bp_times);
    }

    // K partitions' parallel witnesses at once, huge pages on and off.
    let mut concurrent = Vec::new();
    if let Some(k) = args.concurrent {
        // Off, on, off again: the order's own effect shows.
        for on in [false, true, false] {
            cuzk_synth::set_huge_pages(on);
            let before = cpu_seconds();
            let t = Instant::now();
            std::thread::scope(|scope| -> Result<()> {
                let handles: Vec<_> = (0..k)
                    .map(|_| {
                        let c = ours.clone();
                        scope.spawn(move || {
                            let n = c.witness(inputs, aux).map(|w| w.aux.len());
                            (n, t.elapsed())
                        })
                    })
                    .collect();
                let mut ends = Vec::new();
                for h in handles {
                    let (n, end) = h
                        .join()
                        .map_err(|_| anyhow::anyhow!("a witness thread panicked"))?;
                    let n = n?;
                    ends.push(end);
                    ensure!(
                        n == aux,
                        "a concurrent witness has {n} aux values, not {aux}"
                    );
                }
                ends.sort();
                eprintln!("  witnesses ended at {ends:.2?}");
                Ok(())
            })?;
            let wall = t.elapsed();
            let after = cpu_seconds();
            let (user, sys) = (after.0 - before.0, after.1 - before.1);
            eprintln!(
                "{k} partitions at once, huge pages {}: {wall:.2?}, user {user:.1} s, system {sys:.1} s",
                if on { "on" } else { "off" }
            );
            concurrent.push((on, wall, user, sys));
        }
        cuzk_synth::set_huge_pages(true);
    }

    // One challenge's synthesis by namespace (head + challenge 0, as the
    // parallel witness synthesizes each part), one thread.
    let profile = match args.profile {
        Some(depth) => {
            let one = ours.first_challenges(1);
            let p = on_threads(1, || cuzk_synth::Profile::of(one, depth))??;
            eprintln!("one challenge (with the head), by namespace to depth {depth}:\n{p}");
            Some(p)
        }
        None => None,
    };

    let name = |what: &str| format!("witness/{proof}/partition{k}/{what}");
    let entry = |name: String, times: &[Duration], notes: String| {
        let (median, min, max) = stats(times);
        serde_json::json!({
            "name": name, "unit": "s",
            "median": median, "min": min, "max": max, "runs": times.len(),
            "notes": notes,
        })
    };
    let sizes = format!(
        "{challenges} challenges, {inputs} inputs, {aux} aux values; allocator {} ({})",
        cuzk_synth::allocator::active_name(),
        cuzk_synth::allocator::ENV
    );
    let mut results = Vec::new();
    let with_baseline = |mut e: serde_json::Value, base: &[Duration], base_name: &str| {
        if !base.is_empty() {
            let b = stats(base).0;
            let m = e["median"].as_f64().unwrap_or(f64::NAN);
            e["baseline"] = serde_json::json!({"name": base_name, "median": b});
            e["ratio_vs_baseline"] = serde_json::json!(b / m);
        }
        e
    };
    if !bp_times.is_empty() {
        results.push(entry(
            name("bellperson-1t"),
            &bp_times,
            format!(
                "bellperson's create_proof_batch up to its first parameter request \
                 (its synthesis: values, densities, A/B/C evaluations), one thread; {sizes}"
            ),
        ));
    }
    if !seq_times.is_empty() {
        results.push(with_baseline(
            entry(
                name("cuzk-sequential-1t"),
                &seq_times,
                format!("storage-proofs' circuit on cuzk's witness system, one thread; {sizes}"),
            ),
            &bp_times,
            "bellperson-1t",
        ));
    }
    results.push(with_baseline(
        entry(
            name(&format!(
                "cuzk-parallel-{}t-storage-proofs-sha256",
                rayon::current_num_threads()
            )),
            &sp_times,
            format!(
                "challenges in parallel on rayon's pool ({} threads, {cores} cores), every \
                 value by storage-proofs' circuit (bellperson's SHA-256 gadget), equal to the \
                 {} witness; {sizes}",
                rayon::current_num_threads(),
                if !args.skip_sequential {
                    "sequential"
                } else {
                    "first parallel"
                }
            ),
        ),
        &bp_times,
        "bellperson-1t",
    ));
    results.push(with_baseline(
        entry(
            name(&format!("cuzk-parallel-{}t", rayon::current_num_threads())),
            &par_times,
            format!(
                "challenges in parallel on rayon's pool ({} threads, {cores} cores), the \
                 SHA-256 (labels, tree D's path) made natively (cuzk_synth::native), equal to the {} witness; \
                 {sizes}",
                rayon::current_num_threads(),
                if !args.skip_sequential {
                    "sequential"
                } else {
                    "first parallel"
                }
            ),
        ),
        &bp_times,
        "bellperson-1t",
    ));
    if let Some(k) = args.concurrent {
        for (run, &(on, wall, user, sys)) in concurrent.iter().enumerate() {
            let t = wall.as_secs_f64();
            results.push(serde_json::json!({
                "name": name(&format!(
                    "cuzk-parallel-{k}-at-once/huge-pages-{}/run{run}",
                    if on { "on" } else { "off" }
                )),
                "unit": "s", "median": t, "min": t, "max": t, "runs": 1,
                "notes": format!(
                    "{k} copies of this partition's parallel witness at once on {k} threads \
                     (rayon's pool of {} threads shared, PartsGate ordering), huge pages for \
                     witness buffers {}; {:.3} s per partition; process CPU time meanwhile: \
                     user {user:.1} s, system {sys:.1} s; {sizes}",
                    rayon::current_num_threads(),
                    if on { "on (MADV_HUGEPAGE)" } else { "off" },
                    t / k as f64,
                ),
            }));
        }
    }
    if let Some(p) = &profile {
        let sum: f64 = p.entries.iter().map(|e| e.time.as_secs_f64()).sum();
        results.push(serde_json::json!({
            "name": name("profile-one-challenge"), "unit": "s",
            "median": p.total.as_secs_f64(), "min": p.total.as_secs_f64(),
            "max": p.total.as_secs_f64(), "runs": 1,
            "notes": "head + challenge 0 synthesized on cuzk's witness system on one thread, \
                      timed by namespace (clock read at every namespace event, so slower than \
                      an unprofiled synthesis; read the shares)",
        }));
        for e in p.entries.iter().take(20) {
            let t = e.time.as_secs_f64();
            results.push(serde_json::json!({
                "name": name(&format!("profile-one-challenge/{}", if e.path.is_empty() { "(top)" } else { &e.path })),
                "unit": "s", "median": t, "min": t, "max": t, "runs": 1,
                "notes": format!(
                    "{:.1}% of the profiled time, {} values allocated; time with this \
                     namespace path open (deeper ones cut off and included), digits as #",
                    100.0 * t / sum.max(f64::MIN_POSITIVE),
                    e.values
                ),
            }));
        }
    }
    for r in &results {
        eprintln!(
            "{}: {:.3} s (x{:.2} vs bellperson)",
            r["name"].as_str().unwrap_or(""),
            r["median"].as_f64().unwrap_or(f64::NAN),
            r["ratio_vs_baseline"].as_f64().unwrap_or(f64::NAN)
        );
    }
    common::print_bench_doc(args.json.get(), results)
}

/// This process's (user, system) CPU seconds so far, from /proc/self/stat
/// (clock ticks of 1/100 s); zeros where it cannot be read.
fn cpu_seconds() -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces) in parentheses.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 100.0
    };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 here.
    (ticks(11), ticks(12))
}
