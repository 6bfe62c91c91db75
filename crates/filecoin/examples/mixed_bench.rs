//! A WindowPoSt submitted in the middle of a PoRep C2 stream, on a host
//! memory budget that cannot hold both parameter sets: what the swap (the
//! PoRep jobs park, their set is evicted, the PoSt's is loaded, then the
//! PoRep set is loaded again) costs the PoSt's latency and the PoRep
//! stream's throughput. Synthetic inputs ([`cuzk_filecoin::synthetic`]), the
//! blank circuits' PCEs (recorded, or read from `--pce-dir`), and fake
//! parameters (the prover's work is the real one, the proofs do not verify)
//! given to the engine through `Engine::register_params_loader`, so the
//! engine evicts and reloads them as it does parameter files. A reload is a
//! regeneration of the same fake parameters (same seed, same bytes), not a
//! file read: each is timed and reported (`fake_params_make/...`).
//!
//! ```text
//! cargo run --release -p cuzk-filecoin --example mixed_bench -- \
//!     [--seal-proof StackedDrg32GiBV1_1] [--post-proof StackedDrgWindow32GiBV1_2] \
//!     [--sectors N] [--porep-jobs 1] [--after 2] --budget 100GB --pce-dir DIR \
//!     [--out DIR] [--porep-alone] [--engine key=value ...] [--json REV CMD]
//! ```
//!
//! In this order, on one engine: (a) the PoSt alone on the warm engine
//! (its set preloaded, one warm-up proof): its latency, submission to
//! proof; (b) `--porep-jobs` PoRep C2 jobs (NORMAL) submitted together and,
//! once `--after` of their partitions are proved, the PoSt (HIGH): its
//! latency, the PoRep partitions per second before its submission and after
//! its proof, the engine's parks, evictions and loads, and the timeline
//! (`--out`); (c) with `--porep-alone`, the same PoRep jobs alone: their
//! throughput without a swap. The same request proves the same bytes in
//! every scenario (fixed r and s): the PoSt's in (a) and (b), the PoRep
//! jobs' in (b) and (c), checked (fake parameters: nothing verifies).

// The benchmark examples' shared arguments, by path.
#[path = "../../groth16-cuda/examples/common/args.rs"]
mod args;
use args::JsonRecord;
// What the Filecoin benchmark examples share, in common/ beside them.
mod common;
use common::{Loading, Results, Watchdog};

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use bellperson::Circuit;
use blstrs::{G1Affine, G2Affine, Scalar};
use clap::Parser;
use cuzk_engine::{
    ByteSize, Engine, EngineStats, JobHandle, ParamsLoader, ParamsRef, Priority, ProofRequest,
    WitnessWith,
};
use cuzk_filecoin::post::PostInput;
use cuzk_filecoin::{
    BlankPce, C1Output, Partitions, PartitionsVisitor, PostProof, SealProof, porep, post,
    proofs_to_bytes, shape_id, synthetic,
};
use cuzk_synth::Pce;
use ff::Field;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

/// A WindowPoSt in the middle of a PoRep C2 stream on a budget that holds
/// one parameter set: the swap's cost.
#[derive(Debug, Parser)]
#[command(name = "mixed_bench", args_override_self = true)]
struct Args {
    /// The PoRep C2's seal proof.
    #[arg(long, value_name = "NAME", default_value = "StackedDrg32GiBV1_1")]
    seal_proof: SealProof,
    /// The PoSt's proof.
    #[arg(long, value_name = "NAME", default_value = "StackedDrgWindow32GiBV1_2")]
    post_proof: PostProof,
    /// The PoSt's sectors (default: one partition's worth).
    #[arg(long, value_name = "N")]
    sectors: Option<usize>,
    /// The synthetic inputs' and the fake parameters' seed.
    #[arg(long, value_name = "N", default_value_t = 1)]
    seed: u64,
    /// PoRep C2 jobs (all partitions each) submitted together in (b).
    #[arg(long, value_name = "N", default_value_t = 1)]
    porep_jobs: usize,
    /// PoRep partitions proved in (b) before the PoSt is submitted (the
    /// rate before needs at least 2).
    #[arg(long, value_name = "K", default_value_t = 2)]
    after: usize,
    /// The engine's host memory budget (e.g. 100GB, 96GiB); default the
    /// engine's own.
    #[arg(long, value_name = "BYTES")]
    budget: Option<ByteSize>,
    /// Where the blank PCEs are found, or recorded and written.
    #[arg(long, value_name = "DIR", default_value_os_t = std::env::temp_dir().join("cuzk-c2-bench-pce"))]
    pce_dir: PathBuf,
    /// Stop once both PCEs are in --pce-dir (a first call where one call's
    /// time is limited).
    #[arg(long)]
    pce_only: bool,
    /// Fail a scenario (with the engine's state on stderr, dumped every
    /// 120 s before that) once no partition has been proved for this many
    /// seconds (time while the bench's loader makes a parameter set does
    /// not count); what was measured before is still written.
    #[arg(long, value_name = "SECS", default_value_t = 900)]
    stall_timeout: u64,
    /// (c): the same PoRep jobs alone, after (b).
    #[arg(long)]
    porep_alone: bool,
    /// Write (b)'s timeline (Chrome trace) into this directory.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// An engine option (see docs/engine.example.toml), e.g.
    /// `gpu_params=resident`; repeatable.
    #[arg(long = "engine", value_name = "KEY=VALUE")]
    overrides: Vec<String>,
    #[command(flatten)]
    json: JsonRecord,
}

/// mimalloc, or the system's allocator with `CUZK_ALLOCATOR=system`.
#[global_allocator]
static ALLOC: cuzk_synth::allocator::Allocator = cuzk_synth::allocator::Allocator;

fn main() -> Result<()> {
    common::init_tracing("info");
    let args = Args::parse();
    ensure!(args.porep_jobs > 0, "--porep-jobs must be at least 1");
    ensure!(args.after >= 1, "--after must be at least 1");
    let (seal, window, seed) = (args.seal_proof, args.post_proof, args.seed);
    let mut results = Results::new(format!("mixed/{seal}+{window}"));

    let s = synthetic::generate_json(seal, seed)?;
    results.add(
        "synthetic_c1",
        "s",
        s.seconds,
        format!("seed {seed}: {} partitions", s.partitions),
    );
    let c1 = C1Output::from_json(&s.json, Some(seal))?;
    let post_input = common::synthetic_post(window, args.sectors, seed, &mut results)?;
    // Fake parameters: no parameter files are read.
    let no_files = Path::new("");
    let outcome = c1.visit_partitions(
        no_files,
        PorepVisit {
            args: &args,
            post: &post_input,
            results: &mut results,
        },
    )?;
    // What was measured is written even when a later scenario failed.
    results.finish(args.json.get())?;
    outcome
}

/// The PoRep's typed partitions, then the PoSt's.
struct PorepVisit<'a> {
    args: &'a Args,
    post: &'a PostInput,
    results: &'a mut Results,
}

impl PartitionsVisitor for PorepVisit<'_> {
    type Output = Result<()>;

    fn visit<P>(self, porep: Partitions<P>) -> Result<()>
    where
        P: Circuit<Scalar> + Clone + Send + Sync + 'static,
    {
        let PorepVisit {
            args,
            post,
            results,
        } = self;
        post.visit_partitions(
            Path::new(""),
            PostVisit {
                args,
                porep,
                results,
            },
        )?
    }
}

struct PostVisit<'a, P> {
    args: &'a Args,
    porep: Partitions<P>,
    results: &'a mut Results,
}

impl<P> PartitionsVisitor for PostVisit<'_, P>
where
    P: Circuit<Scalar> + Clone + Send + Sync + 'static,
{
    type Output = Result<()>;

    fn visit<Q>(self, post: Partitions<Q>) -> Result<()>
    where
        Q: Circuit<Scalar> + Clone + Send + Sync + 'static,
    {
        run(self.args, self.porep, post, self.results)
    }
}

/// One proof kind's shape, PCE-derived sizes and fake-parameter loader.
struct Set {
    name: &'static str,
    params: ParamsRef,
    /// Seconds of each call of the loader (the first load, then reloads).
    makes: Arc<Mutex<Vec<f64>>>,
}

impl Set {
    fn makes(&self) -> Vec<f64> {
        self.makes.lock().map(|m| m.clone()).unwrap_or_default()
    }
}

/// The blank circuit's PCE, from `--pce-dir` or recorded and written there.
fn blank_pce(
    args: &Args,
    shape: &str,
    name: &str,
    record: impl FnOnce() -> cuzk_filecoin::Result<BlankPce>,
    results: &mut Results,
) -> Result<Pce> {
    common::blank_pce(&args.pce_dir, shape, Some(name), true, record, results)?
        .context("a wanted PCE is returned")
}

/// What `fake_params` reads of a PCE (its counts and densities) and nothing
/// else: the loader keeps this, not the matrices (gigabytes at 32 GiB, which
/// the engine holds on its budget when it needs them). The constraint
/// count is `a`'s rows: a row index of zeros, never touched, so pages the
/// allocator maps zeroed and the process never writes.
fn skeleton(pce: &Pce) -> Pce {
    let a = cuzk_synth::pce::Csr {
        row_ptr: vec![0; pce.num_constraints() + 1],
        ..Default::default()
    };
    Pce {
        num_inputs: pce.num_inputs,
        num_aux: pce.num_aux,
        a,
        b: Default::default(),
        c: Default::default(),
        coeff_table: Vec::new(),
        a_aux_density: pce.a_aux_density.clone(),
        b_input_density: pce.b_input_density.clone(),
        b_aux_density: pce.b_aux_density.clone(),
        names: None,
        released: None,
        memo: Default::default(),
    }
}

/// The in-memory bytes of `fake_params(pce)` (`cuzk_engine::cache::params_bytes`
/// of it), from the counts: what the loader is registered with.
fn fake_bytes(pce: &Pce) -> u64 {
    let b = pce.b_query_len();
    let g1 = (pce.domain_size() - 1) + pce.num_aux + pce.a_query_len() + b + pce.num_inputs + 3;
    let g2 = b + 3;
    (g1 * size_of::<G1Affine>() + g2 * size_of::<G2Affine>()) as u64
}

/// Registers `pce`'s fake parameters with `engine` under a loader that
/// makes them (again) on each call, timed.
fn register(
    engine: &Engine,
    name: &'static str,
    shape: &str,
    pce: &Pce,
    seed: u64,
    loading: &Loading,
) -> Result<Set> {
    let skeleton = Arc::new(skeleton(pce));
    let bytes = fake_bytes(pce);
    let makes = Arc::new(Mutex::new(Vec::new()));
    let key = format!("fake {shape}");
    let loader: ParamsLoader = {
        let makes = Arc::clone(&makes);
        let loading = loading.clone();
        Arc::new(move || {
            let _loading = loading.enter();
            let t = Instant::now();
            let made = cuzk_groth16_cuda::fake::fake_params(&skeleton, seed);
            let took = t.elapsed().as_secs_f64();
            let actual = cuzk_engine::cache::params_bytes(&made);
            if actual != bytes {
                return Err(format!("fake parameters of {actual} bytes, {bytes} expected").into());
            }
            if let Ok(mut m) = makes.lock() {
                m.push(took);
            }
            tracing::info!(
                name,
                seconds = took,
                "fake parameters made (a load or a reload)"
            );
            Ok(made)
        })
    };
    engine.register_params_loader(key.clone(), bytes, loader)?;
    Ok(Set {
        name,
        params: ParamsRef::Key(key),
        makes,
    })
}

/// (r, s) for each of `parts` partitions, fixed by `tag`: a request made
/// twice proves the same bytes.
fn randomness(parts: usize, tag: u64) -> Vec<(Scalar, Scalar)> {
    let mut rng = ChaCha20Rng::seed_from_u64(0x6d69_7865_6400_0000 ^ tag);
    (0..parts)
        .map(|_| (Scalar::random(&mut rng), Scalar::random(&mut rng)))
        .collect()
}

fn request<C: Circuit<Scalar> + Clone + Send + 'static>(
    shape: &str,
    set: &Set,
    parts: &Partitions<C>,
    priority: Priority,
    tag: u64,
) -> ProofRequest<C> {
    let witness: WitnessWith<C> = parts.witness;
    ProofRequest::new(shape, set.params.clone(), parts.circuits.clone())
        .with_witness(witness)
        .with_priority(priority)
        .with_randomness(randomness(parts.circuits.len(), tag))
}

/// A stream of PoRep jobs and, optionally, a job submitted once `after` of
/// their partitions are proved: when each PoRep partition was proved, when
/// the other was submitted and proved, and every job's proof bytes.
struct Stream {
    start: Instant,
    proved_at: Vec<Instant>,
    submitted: Option<Instant>,
    ended: Option<Instant>,
    porep: Vec<Vec<u8>>,
    other: Option<Vec<u8>>,
}

fn stream(
    engine: &Engine,
    watchdog: &mut Watchdog,
    porep: Vec<ProofRequest<impl Circuit<Scalar> + Clone + Send + 'static>>,
    mut then: Option<(
        usize,
        ProofRequest<impl Circuit<Scalar> + Clone + Send + 'static>,
    )>,
) -> Result<Stream> {
    let start = Instant::now();
    let jobs = porep
        .into_iter()
        .map(|r| engine.submit(r))
        .collect::<cuzk_engine::Result<Vec<JobHandle>>>()?;
    let mut seen = vec![0; jobs.len()];
    let mut proved_at = Vec::new();
    let (mut other, mut submitted, mut ended) = (None::<JobHandle>, None, None);
    loop {
        let now = Instant::now();
        let mut all_done = true;
        for (job, seen) in jobs.iter().zip(&mut seen) {
            let p = job.progress();
            proved_at.extend((*seen..p.proved).map(|_| now));
            *seen = p.proved;
            all_done &= p.finished;
        }
        if let Some((after, _)) = &then
            && proved_at.len() >= *after
            && let Some((_, r)) = then.take()
        {
            other = Some(engine.submit(r)?);
            submitted = Some(Instant::now());
        }
        if ended.is_none()
            && let Some(o) = &other
            && o.progress().finished
        {
            ended = Some(now);
        }
        let other_done = then.is_none() && (other.is_none() || ended.is_some());
        if all_done && other_done {
            break;
        }
        // A stream that ended before `after` partitions were proved.
        ensure!(!all_done || then.is_none(), "the PoRep jobs ended first");
        let other_progress = other.as_ref().map_or(0, |o| 1 + o.progress().proved);
        watchdog.check(engine, (proved_at.len() + other_progress) as u64)?;
        std::thread::sleep(Duration::from_millis(2));
    }
    let porep = jobs
        .into_iter()
        .map(|j| j.wait_blocking().map(|p| proofs_to_bytes(&p)))
        .collect::<cuzk_engine::Result<Vec<_>>>()?;
    let other = match other {
        Some(o) => Some(proofs_to_bytes(&o.wait_blocking()?)),
        None => None,
    };
    Ok(Stream {
        start,
        proved_at,
        submitted,
        ended,
        porep,
        other,
    })
}

/// Partitions per second over `times` (first to last), `NaN` under two.
fn rate(times: &[Instant]) -> f64 {
    match (times.first(), times.last()) {
        (Some(a), Some(b)) if times.len() >= 2 => {
            (times.len() - 1) as f64 / b.duration_since(*a).as_secs_f64()
        }
        _ => f64::NAN,
    }
}

fn run<P, Q>(
    args: &Args,
    porep: Partitions<P>,
    post: Partitions<Q>,
    results: &mut Results,
) -> Result<()>
where
    P: Circuit<Scalar> + Clone + Send + Sync + 'static,
    Q: Circuit<Scalar> + Clone + Send + Sync + 'static,
{
    let (seal, window, seed) = (args.seal_proof, args.post_proof, args.seed);
    let porep_shape = shape_id(&porep.params);
    let post_shape = shape_id(&post.params);
    let porep_pce = blank_pce(
        args,
        &porep_shape,
        "porep",
        || porep::blank_pce(seal),
        results,
    )?;
    let post_pce = blank_pce(
        args,
        &post_shape,
        "post",
        || post::blank_pce(window),
        results,
    )?;
    if args.pce_only {
        return Ok(());
    }

    let mut config =
        common::engine_config(args.overrides.iter().map(String::as_str), &args.pce_dir)?;
    if let Some(budget) = args.budget {
        config.host_memory_budget = cuzk_engine::Auto::Value(budget);
    }
    let engine = Engine::new(config)?;
    let loading = Loading::default();
    let porep_set = register(&engine, "porep", &porep_shape, &porep_pce, seed, &loading)?;
    let post_set = register(&engine, "post", &post_shape, &post_pce, seed, &loading)?;
    let gb = |b: u64| b as f64 / 1e9;
    let sizes = format!(
        "budget {:.1} GB; PoRep set {:.1} GB + PCE {:.1} GB, PoSt set {:.1} GB + PCE {:.1} GB \
         (PCEs in memory), fake parameters seed {seed}",
        gb(engine.budget().total()),
        gb(fake_bytes(&porep_pce)),
        gb(porep_pce.bytes() as u64),
        gb(fake_bytes(&post_pce)),
        gb(post_pce.bytes() as u64),
    );
    eprintln!("{sizes}");
    drop((porep_pce, post_pce));
    let porep_parts = porep.circuits.len();
    ensure!(
        args.after < args.porep_jobs * porep_parts,
        "--after must be below the PoRep partitions ({})",
        args.porep_jobs * porep_parts
    );
    // Tags of the fixed (r, s): the PoSt's, its warm-up's, PoRep job j's.
    const POST: u64 = 1 << 32;
    const WARM: u64 = 2 << 32;
    let post_request = |tag| request(&post_shape, &post_set, &post, Priority::High, tag);
    let porep_requests = || {
        (0..args.porep_jobs as u64)
            .map(|j| request(&porep_shape, &porep_set, &porep, Priority::Normal, j))
            .collect::<Vec<_>>()
    };

    // (a) The PoSt alone, its set and PCE resident.
    let t = Instant::now();
    engine.preload_params(&post_set.params)?;
    let notes = "the PoSt's fake parameters made by the loader (no file read)".to_owned();
    results.add("a/post_preload", "s", t.elapsed().as_secs_f64(), notes);
    let t = Instant::now();
    let mut watchdog =
        Watchdog::with_loading(Duration::from_secs(args.stall_timeout), loading.clone());
    watchdog.wait(&engine, engine.submit(post_request(WARM))?)?;
    let notes = "one PoSt (other r, s), not measured: PCE read from disk, set to the prover".into();
    results.add("a/post_warm_up", "s", t.elapsed().as_secs_f64(), notes);
    let t = Instant::now();
    let post_alone = proofs_to_bytes(&watchdog.wait(&engine, engine.submit(post_request(POST))?)?);
    let notes = format!("submission to proof, warm engine; {sizes}");
    results.add("a/post_latency", "s", t.elapsed().as_secs_f64(), notes);

    // (b) The PoRep stream, the PoSt submitted in it.
    engine.timeline().clear();
    let before = engine.stats();
    let makes_before = (porep_set.makes().len(), post_set.makes().len());
    let b = stream(
        &engine,
        &mut watchdog,
        porep_requests(),
        Some((args.after, post_request(POST))),
    )?;
    let after = engine.stats();
    let (Some(submitted), Some(ended)) = (b.submitted, b.ended) else {
        anyhow::bail!("the PoSt was not submitted in the stream");
    };
    ensure!(
        b.other.as_deref() == Some(&post_alone[..]),
        "the PoSt's proof in the stream differs from the one alone"
    );
    let latency = ended.duration_since(submitted).as_secs_f64();
    let post_makes = post_set.makes()[makes_before.1..].to_vec();
    let regen = post_makes.iter().fold(0.0, |a, b| a + b);
    let delta = |f: fn(&EngineStats) -> u64| f(&after) - f(&before);
    let counts = format!(
        "{} parks, {} parameter sets evicted, {} parameter loads ({} PoRep, {} PoSt), {} PCE reads",
        delta(|s| s.parks),
        delta(|s| s.params_evicted),
        delta(|s| s.params_loads),
        porep_set.makes().len() - makes_before.0,
        post_makes.len(),
        delta(|s| s.pce_loaded_from_disk),
    );
    results.add(
        "b/post_latency",
        "s",
        latency,
        format!(
            "submission (after {} PoRep partitions) to proof, with the swap; of it {regen:.1} s \
             making the PoSt's fake parameters again (a regeneration: a file read would take \
             its own time instead); {counts}; proof bytes equal to (a)'s",
            args.after
        ),
    );
    results.add(
        "b/post_latency_less_regeneration",
        "s",
        latency - regen,
        "the latency less the loader's time: with a parameter file, add its read (60.8 GB \
         at 32 GiB: about 30 s at 2 GB/s)"
            .into(),
    );
    for (name, n) in [
        ("parks", delta(|s| s.parks)),
        ("params_evicted", delta(|s| s.params_evicted)),
        ("params_loads", delta(|s| s.params_loads)),
    ] {
        results.add(&format!("b/{name}"), "count", n as f64, "in (b)".into());
    }
    let (pre, rest): (Vec<Instant>, Vec<Instant>) =
        b.proved_at.iter().partition(|t| **t <= submitted);
    let post_after: Vec<Instant> = rest.iter().copied().filter(|t| *t > ended).collect();
    results.add(
        "b/porep_rate_before",
        "partitions/s",
        rate(&pre),
        format!(
            "{} PoRep partitions proved before the PoSt's submission, first to last ({:.1} s \
             after the stream's submission: parameters made, PCE read)",
            pre.len(),
            pre.first()
                .map_or(f64::NAN, |t| t.duration_since(b.start).as_secs_f64())
        ),
    );
    let from_post = post_after.last().map_or(f64::NAN, |l| {
        post_after.len() as f64 / l.duration_since(ended).as_secs_f64()
    });
    results.add(
        "b/porep_rate_after",
        "partitions/s",
        from_post,
        format!(
            "{} PoRep partitions proved after the PoSt's proof, from that proof (the PoRep \
             set's reload included: {:.1} s of regeneration) to the last; {} proved between \
             submission and proof",
            post_after.len(),
            porep_set.makes()[makes_before.0..]
                .iter()
                .skip(1)
                .fold(0.0, |a, b| a + b),
            rest.len() - post_after.len()
        ),
    );
    results.add(
        "b/porep_rate_after_steady",
        "partitions/s",
        rate(&post_after),
        "the same partitions, first to last (no reload)".into(),
    );
    for (set, makes) in [
        (&porep_set, porep_set.makes()),
        (&post_set, post_set.makes()),
    ] {
        for (i, s) in makes.iter().enumerate() {
            let what = if i == 0 { "first load" } else { "a reload" };
            let notes = format!(
                "{what}: fake parameters made in memory by the loader, {} threads (a reload \
                 is this regeneration, not a file read)",
                rayon::current_num_threads()
            );
            results.add(
                &format!("fake_params_make/{}_{i}", set.name),
                "s",
                *s,
                notes,
            );
        }
    }
    if let Some(out) = &args.out {
        let timeline = engine.timeline().snapshot();
        let trace = common::write_trace(out, "mixed", &timeline.chrome_trace())?;
        eprintln!("wrote {}", trace.display());
    }

    // (c) The same PoRep jobs alone.
    if args.porep_alone {
        let none: Option<(usize, ProofRequest<Q>)> = None;
        let c = stream(&engine, &mut watchdog, porep_requests(), none)?;
        ensure!(
            c.porep == b.porep,
            "the PoRep proofs alone differ from those with the swap"
        );
        let wall = c.proved_at.last().context("no PoRep partition proved")?;
        results.add(
            "c/porep_rate",
            "partitions/s",
            rate(&c.proved_at),
            format!(
                "{} PoRep partitions alone, first to last ({:.1} s from submission to the \
                 last); proof bytes equal to (b)'s",
                c.proved_at.len(),
                wall.duration_since(c.start).as_secs_f64()
            ),
        );
    }
    Ok(())
}
