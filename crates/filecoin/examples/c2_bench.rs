//! A Filecoin proof of any sector size through the engine, without a
//! sealed sector: a PoRep C2 from a synthetic C1 (`--seal-proof`), a
//! SnapDeals proof from a synthetic update (`--update-proof`) or a
//! WinningPoSt / WindowPoSt from synthetic vanilla proofs (`--post-proof`,
//! `--sectors N`, default one partition's worth) ([`cuzk_filecoin::synthetic`]);
//! the partition circuits filecoin-proofs builds from them, and either real
//! parameters (`--param-cache DIR`, filecoin-proofs' names) or fake ones made
//! in memory from the blank circuit's PCE (`--fake-params`: the prover's
//! work is the same, the proofs do not verify; for timing only).
//!
//! ```text
//! cargo run --release -p cuzk-filecoin --example c2_bench -- \
//!     --seal-proof StackedDrg32GiBV1_1 --fake-params --pce-dir /data/pce \
//!     --out DIR [--jobs 1] [--together 1] [--engine key=value ...] [--json REV CMD]
//! ```
//!
//! What it prints and records: the synthetic input's time; the blank PCE
//! recorded (or found in `--pce-dir`) and written there, so the engine reads
//! it from disk as a daemon does; the fake parameters' time (also with real
//! parameters under `--time-fake-params`, made and dropped); one warm-up
//! partition (PCE read, parameters uploaded; not measured); then for each
//! K of `--together` (default 1), `--jobs` measurements of K proofs (all
//! partitions each) submitted at once: seconds per proof and per partition, per-partition stage
//! medians, the device's busy fraction, peak host RSS, and the Chrome trace
//! (`DIR/timeline-*.json`). A PoRep partition's witness is synthesized with
//! its challenges in parallel, as the engine does for PoRep, or one
//! challenge after the other under `--sequential-witness`. With real
//! parameters every proof is checked by storage-proofs' verifier.

// The benchmark examples' shared arguments, by path.
#[path = "../../groth16-cuda/examples/common/args.rs"]
mod args;
use args::{JsonRecord, List};
// What the Filecoin benchmark examples share, in common/ beside them.
mod common;
use common::Results;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, ensure};
use bellperson::Circuit;
use blstrs::Scalar;
use clap::{ArgGroup, Parser};
use cuzk_engine::{Engine, ParamsRef, ShapeId};
use cuzk_filecoin::post::PostInput;
use cuzk_filecoin::{
    BlankPce, C1Output, Partitions, PartitionsVisitor, PostProof, SealProof, UpdateInput,
    UpdateProof, porep, post, proofs_to_bytes, shape_id, synthetic, update,
};

/// What is proved.
#[derive(Clone, Copy)]
enum Kind {
    PoRep(SealProof),
    Update(UpdateProof),
    Post(PostProof),
}

/// A Filecoin proof of any sector size through the engine, from a
/// synthetic input (no sealed sector), with real or fake parameters.
#[derive(Debug, Parser)]
#[command(name = "c2_bench", args_override_self = true)]
#[command(group = ArgGroup::new("kind").required(true))]
struct Args {
    /// A PoRep C2 of this seal proof, from a synthetic C1 (e.g.
    /// `StackedDrg32GiBV1_1`).
    #[arg(long, value_name = "NAME", group = "kind")]
    seal_proof: Option<SealProof>,
    /// A SnapDeals proof of this update proof, from a synthetic update.
    #[arg(long, value_name = "NAME", group = "kind")]
    update_proof: Option<UpdateProof>,
    /// A WinningPoSt / WindowPoSt of this PoSt proof, from synthetic vanilla
    /// proofs.
    #[arg(long, value_name = "NAME", group = "kind")]
    post_proof: Option<PostProof>,
    /// WinningPoSt / WindowPoSt sectors (default: one partition's worth).
    #[arg(long, value_name = "N")]
    sectors: Option<usize>,
    /// The synthetic input's seed.
    #[arg(long, value_name = "N", default_value_t = 1)]
    seed: u64,
    /// Measurements for each value of --together.
    #[arg(long, value_name = "N", default_value_t = 1)]
    jobs: usize,
    /// For each value K, `jobs` measurements of K proofs submitted at once.
    #[arg(long, value_name = "K,..", default_value = "1")]
    together: List<usize>,
    /// Fake parameters made in memory from the blank circuit's PCE (the
    /// prover's work is the same, the proofs do not verify; for timing
    /// only). Exactly one of this and --param-cache.
    #[arg(long)]
    fake_params: bool,
    /// Also time making fake parameters when proving with real ones (made
    /// and dropped).
    #[arg(long)]
    time_fake_params: bool,
    /// Real parameters: a directory of filecoin-proofs' parameter files.
    #[arg(long, value_name = "DIR")]
    param_cache: Option<PathBuf>,
    /// Where the blank PCE is found, or recorded and written.
    #[arg(long, value_name = "DIR", default_value_os_t = std::env::temp_dir().join("cuzk-c2-bench-pce"))]
    pce_dir: PathBuf,
    /// Write each measurement's Chrome trace and summary into this directory.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// An engine option (see docs/engine.example.toml), e.g.
    /// `gpu_params=resident`; repeatable.
    #[arg(long = "engine", value_name = "KEY=VALUE")]
    overrides: Vec<String>,
    /// An engine measured one after the other with the others on the same
    /// input, PCE and fake parameters: its name and overrides on top of
    /// --engine's (commas inside brackets stay: `two:gpus=[0,1]`);
    /// repeatable.
    #[arg(long = "variant", value_name = "NAME[:KEY=VALUE,..]", value_parser = variant)]
    variants: Vec<(String, Vec<String>)>,
    #[command(flatten)]
    json: JsonRecord,
    /// Synthesize each PoRep partition's witness one challenge after the
    /// other (storage-proofs' order, one thread) instead of in parallel.
    #[arg(long)]
    sequential_witness: bool,
}

impl Args {
    /// What is proved: the one of --seal-proof, --update-proof and
    /// --post-proof given.
    fn kind(&self) -> Option<Kind> {
        self.seal_proof
            .map(Kind::PoRep)
            .or(self.update_proof.map(Kind::Update))
            .or(self.post_proof.map(Kind::Post))
    }
}

/// `--variant NAME[:key=value,...]`: the name and its overrides.
fn variant(v: &str) -> Result<(String, Vec<String>)> {
    let (name, rest) = v.split_once(':').unwrap_or((v, ""));
    ensure!(!name.is_empty(), "--variant NAME[:key=value,...]");
    // Commas inside brackets stay: `two:gpus=[0,1]`.
    let overrides = cuzk_engine::bench::grid::split_values(rest)
        .map_err(|why| anyhow::anyhow!("--variant {v}: {why}"))?
        .into_iter()
        .filter(|kv| !kv.is_empty())
        .collect();
    Ok((name.to_owned(), overrides))
}

/// The checks clap's attributes do not express.
fn check(a: &Args) -> Result<()> {
    ensure!(
        a.fake_params != a.param_cache.is_some(),
        "give exactly one of --fake-params and --param-cache"
    );
    ensure!(a.jobs > 0, "--jobs must be at least 1");
    ensure!(
        a.together.iter().all(|&k| k > 0),
        "--together takes proof counts of at least 1"
    );
    Ok(())
}

/// The parsed synthetic input.
enum Input {
    PoRep(C1Output),
    Update(UpdateInput),
    Post(PostInput),
}

impl Input {
    fn visit<V: PartitionsVisitor>(&self, dir: &Path, v: V) -> Result<V::Output> {
        Ok(match self {
            Input::PoRep(c1) => c1.visit_partitions(dir, v)?,
            Input::Update(u) => u.visit_partitions(dir, v)?,
            Input::Post(p) => p.visit_partitions(dir, v)?,
        })
    }

    fn verify(&self, dir: &Path, bytes: &[u8]) -> Result<bool> {
        Ok(match self {
            Input::PoRep(c1) => c1.verify(dir, bytes)?,
            Input::Update(u) => u.verify(dir, bytes)?,
            Input::Post(p) => p.verify(dir, bytes)?,
        })
    }
}

/// mimalloc, or the system's allocator with `CUZK_ALLOCATOR=system`.
#[global_allocator]
static ALLOC: cuzk_synth::allocator::Allocator = cuzk_synth::allocator::Allocator;

fn main() -> Result<()> {
    common::init_tracing("info");
    let args = Args::parse();
    check(&args)?;
    let kind = args.kind().context("no proof kind")?;
    let mut results = Results::new(match kind {
        Kind::PoRep(p) => format!("c2/{p}"),
        Kind::Update(p) => format!("snap/{p}"),
        Kind::Post(p) => format!("post/{p}"),
    });
    let seed = args.seed;
    let (input, blank): (Input, Box<dyn Fn() -> cuzk_filecoin::Result<BlankPce>>) = match kind {
        Kind::PoRep(proof) => {
            let s = synthetic::generate_json(proof, seed)?;
            results.add(
                "synthetic_c1",
                "s",
                s.seconds,
                format!(
                    "seed {seed}: {} partitions, {} challenges, vanilla proofs checked",
                    s.partitions, s.challenges
                ),
            );
            let c1 = C1Output::from_json(&s.json, Some(proof))?;
            (Input::PoRep(c1), Box::new(move || porep::blank_pce(proof)))
        }
        Kind::Update(proof) => {
            let s = synthetic::update_json(proof, seed)?;
            let u = UpdateInput::from_json(&s.json)?;
            results.add(
                "synthetic_update",
                "s",
                s.seconds,
                format!(
                    "seed {seed}: {} partitions, vanilla proofs checked",
                    u.partitions()
                ),
            );
            (Input::Update(u), Box::new(move || update::blank_pce(proof)))
        }
        Kind::Post(proof) => {
            let p = common::synthetic_post(proof, args.sectors, seed, &mut results)?;
            (Input::Post(p), Box::new(move || post::blank_pce(proof)))
        }
    };
    let dir = args.param_cache.clone().unwrap_or_default();
    let outcome = input
        .visit(
            &dir,
            Bench {
                args: &args,
                input: &input,
                dir: &dir,
                blank: &*blank,
                results: &mut results,
            },
        )
        .and_then(|r| r);
    // What was measured before a failure is written too.
    results.finish(args.json.get())?;
    outcome
}

/// The measurement, on the typed partitions.
struct Bench<'a> {
    args: &'a Args,
    input: &'a Input,
    dir: &'a Path,
    blank: &'a dyn Fn() -> cuzk_filecoin::Result<BlankPce>,
    results: &'a mut Results,
}

impl PartitionsVisitor for Bench<'_> {
    type Output = Result<()>;

    fn visit<C>(self, partitions: Partitions<C>) -> Result<()>
    where
        C: Circuit<Scalar> + Clone + Send + Sync + 'static,
    {
        let Bench {
            args,
            input,
            dir,
            blank,
            results,
        } = self;
        let shape = shape_id(&partitions.params);
        let n = partitions.circuits.len();

        // The PCE on disk where the engine reads it, in memory only for
        // fake parameters.
        let want_pce = args.fake_params || args.time_fake_params;
        let mut pce = common::blank_pce(&args.pce_dir, &shape, None, want_pce, blank, results)?;

        let mut fake = None;
        if let Some(pce) = pce.take() {
            let t = Instant::now();
            let made = cuzk_groth16_cuda::fake::fake_params(&pce, 1);
            results.add(
                "fake_params",
                "s",
                t.elapsed().as_secs_f64(),
                format!(
                    "in memory, {} threads: h {}, l {}, a {}, b_g1 {}, b_g2 {} points",
                    rayon::current_num_threads(),
                    made.h.len(),
                    made.l.len(),
                    made.a.len(),
                    made.b_g1.len(),
                    made.b_g2.len()
                ),
            );
            if args.fake_params {
                fake = Some(Arc::new(made));
            }
        }
        drop(pce);

        let shape_id = ShapeId(shape.clone());
        let circuits = partitions.circuits;
        let sequential = args.sequential_witness;
        let witness = if sequential {
            cuzk_synth::Witness::synthesize_with_capacity
        } else {
            partitions.witness
        };
        // One engine per variant (the base configuration alone without
        // --variant), each dropped before the next is built.
        let variants = if args.variants.is_empty() {
            vec![(String::new(), Vec::new())]
        } else {
            args.variants.clone()
        };
        // A variant that fails (say, a placement that does not fit) is
        // reported and the next one still runs; the figures of every
        // variant that ran are written either way.
        let mut failed = None;
        for (variant, extra) in &variants {
            let outcome = (|| -> Result<()> {
                let named = |label: &str| {
                    if variant.is_empty() {
                        label.to_owned()
                    } else {
                        format!("{variant}/{label}")
                    }
                };
                let overrides = args.overrides.iter().chain(extra.iter());
                let config = common::engine_config(overrides.map(String::as_str), &args.pce_dir)?;
                // This variant's own peak, from what is resident now (the
                // circuits, fake parameters) on.
                let reset = common::reset_peak_rss();
                // What the variant starts from: the circuits and fake
                // parameters, plus whatever earlier variants left resident.
                let rss_at_start = common::rss_now();
                let engine = Engine::new(config)?;
                let params = match &fake {
                    Some(fake) => {
                        let key = format!("fake {shape}");
                        engine.register_params(key.clone(), Arc::clone(fake))?;
                        ParamsRef::Key(key)
                    }
                    None => ParamsRef::File(partitions.params.existing_params()?.to_owned()),
                };
                let t = Instant::now();
                cuzk_engine::bench::warm_up_with(
                    &engine,
                    &shape_id,
                    &params,
                    |_| circuits[0].clone(),
                    witness,
                )?;
                results.add(
                    &named("warm_up_partition"),
                    "s",
                    t.elapsed().as_secs_f64(),
                    "one partition: PCE read from disk, parameters to the prover, witness, proof"
                        .into(),
                );

                for (together, job) in args
                    .together
                    .iter()
                    .flat_map(|&k| (0..args.jobs).map(move |j| (k, j)))
                {
                    let label = named(&if together > 1 {
                        format!("proof_x{together}_{job}")
                    } else {
                        format!("proof_{job}")
                    });
                    // The page-locked pool across the measurement: buffers
                    // allocated (page-locked anew) against reused ones.
                    let pool_before = engine.stats().pinned;
                    let (proofs, report, timeline) = cuzk_engine::bench::measure_jobs_with(
                        &engine,
                        &shape_id,
                        &params,
                        together,
                        n,
                        |i| circuits[(i as usize - 1) % n].clone(),
                        witness,
                    )?;
                    ensure!(proofs.len() == together * n, "missing proofs");
                    eprintln!("{}", report.summary);
                    let pool = pinned_pool_note(&pool_before, &engine.stats().pinned);
                    eprintln!("{pool}");
                    let verified = if args.fake_params {
                        "fake parameters, not verifiable"
                    } else {
                        for (k, one) in proofs.chunks(n).enumerate() {
                            let ok = input.verify(dir, &proofs_to_bytes(one))?;
                            ensure!(ok, "proof {k} of measurement {job} does not verify");
                        }
                        "verified"
                    };
                    let stages = report
                        .summary
                        .stages
                        .iter()
                        .map(|st| format!("{} {:.0} ms", st.stage, st.median_ms))
                        .collect::<Vec<_>>()
                        .join(", ");
                    results.add(
                    &label,
                    "s",
                    report.wall_s / together as f64,
                    format!(
                        "wall time per proof of {n} partitions, {together} proof(s) submitted at once \
                         (wall {:.3} s; {verified}), {} witness, backend {}, {} workers/device; \
                         {:.3} s per partition; gpu busy {:.3}; per-partition medians: {stages}; \
                         {pool}; largest gaps: {:?}",
                        report.wall_s,
                        if sequential {
                            "sequential"
                        } else {
                            "circuit's own"
                        },
                        report.config.backend,
                        report.config.workers_per_device,
                        report.seconds_per_partition,
                        report.busy_fraction(),
                        report
                            .summary
                            .devices
                            .iter()
                            .map(|d| &d.largest_gaps)
                            .collect::<Vec<_>>()
                    ),
                );
                    if let Some(out) = &args.out {
                        let stem = format!(
                            "{}-{}",
                            results.prefix.rsplit('/').next().unwrap_or("proof"),
                            label.replace('/', "-")
                        );
                        let trace = common::write_trace(out, &stem, &timeline.chrome_trace())?;
                        let summary = out.join(format!("summary-{stem}.json"));
                        std::fs::write(&summary, serde_json::to_vec_pretty(&report)?)?;
                        eprintln!("wrote {} and {}", trace.display(), summary.display());
                    }
                }
                results.add(
                    &named("peak_rss"),
                    "GiB",
                    common::peak_rss() as f64 / (1u64 << 30) as f64,
                    match &reset {
                        Ok(()) => format!(
                            "this process's VmHWM over this variant (engine, warm-up, proofs; \
                             reset at its start, when {:.2} GiB were resident: the circuits, \
                             fake parameters and what earlier variants left)",
                            rss_at_start as f64 / (1u64 << 30) as f64
                        ),
                        Err(e) => format!("this process's VmHWM so far (not reset: {e})"),
                    },
                );
                drop(engine);
                Ok(())
            })();
            if let Err(e) = outcome {
                eprintln!("variant {variant:?} failed, going on with the next: {e:#}");
                failed.get_or_insert(e.context(format!("variant {variant:?}")));
            }
        }
        failed.map_or(Ok(()), Err)
    }
}

/// What the engine's page-locked pool did between two snapshots: buffers
/// page-locked anew (each a driver registration of a partition's buffer,
/// seconds at 32 GiB sizes) against leases served by idle ones, buffers
/// given back, and leases that waited for room.
fn pinned_pool_note(before: &cuzk_engine::PoolStats, after: &cuzk_engine::PoolStats) -> String {
    let gb = |b: usize| b as f64 / 1e9;
    format!(
        "pinned pool: {} buffers allocated, {} leases reused, {} freed, {} waited; held {:.1} GB \
         after ({:.1} GB before, peak {:.1} GB)",
        after.allocations - before.allocations,
        after.reuses - before.reuses,
        after.frees - before.frees,
        after.waits - before.waits,
        gb(after.bytes_held),
        gb(before.bytes_held),
        gb(after.peak_bytes_held),
    )
}
