//! One SnapDeals partition's witness from a synthetic update (no sector,
//! no parameters), made four ways, each run checked equal:
//!
//! - storage-proofs-update's sequential synthesis on one thread (what the
//!   engine ran before `update::witness`);
//! - `update::witness_with` on a pool of one thread (the parts' own cost);
//! - `update::witness_with` on rayon's pool, the size known (as the engine
//!   knows it from the PCE), the hashes (Poseidon, TreeD's SHA-256) by
//!   neptune's and bellperson's gadgets and made natively (the default).
//!
//! Then where the time goes in storage-proofs-update's sequential
//! synthesis, by gadget (`cuzk_synth::Profile`, one thread).
//!
//! ```text
//! cargo run --release -p cuzk-filecoin --example update_witness_bench -- \
//!     --update-proof StackedDrg8MiBV1 --runs 3 [--json REV CMD]
//! ```
//!
//! At aa9bc8a, a 32 GiB partition (80,978,488 aux) on 16 cores of the H100
//! host: sequential 34.6 s, parts native 0.31 s (112x), parts with the
//! gadgets 2.46 s (14x), parts native on one thread 4.33 s (8x); 94% of the
//! sequential time is TreeD's SHA-256.

// The benchmark examples' shared arguments and result entries, by path.
#[path = "../../groth16-cuda/examples/common/args.rs"]
mod args;
#[path = "../../groth16-cuda/examples/common/mod.rs"]
mod common;
use args::JsonRecord;

use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use clap::Parser;
use cuzk_filecoin::update::{self, UpdateCircuit};
use cuzk_filecoin::{SectorSize, UpdateProof, synthetic};
use cuzk_synth::{Profile, Witness};
use filecoin_proofs::{PartitionProof, SectorShape2KiB, SectorShape8MiB, SectorShape32GiB};
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_update::constants::TreeRHasher;

#[derive(Debug, Parser)]
struct Args {
    /// E.g. StackedDrg2KiBV1, StackedDrg8MiBV1, StackedDrg32GiBV1.
    #[arg(long, default_value = "StackedDrg8MiBV1")]
    update_proof: UpdateProof,
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Namespace depth of the profile.
    #[arg(long, default_value_t = 3)]
    depth: usize,
    #[command(flatten)]
    json: JsonRecord,
}

fn main() -> Result<()> {
    let args = Args::parse();
    match args.update_proof.sector_size() {
        SectorSize::KIB2 => run::<SectorShape2KiB>(&args),
        SectorSize::MIB8 => run::<SectorShape8MiB>(&args),
        SectorSize::GIB32 => run::<SectorShape32GiB>(&args),
        s => anyhow::bail!("{s} sectors: this benchmark knows 2 KiB, 8 MiB and 32 GiB"),
    }
}

fn run<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(args: &Args) -> Result<()> {
    let proof = args.update_proof;
    let s = synthetic::update_json(proof, 1)?;
    let request: serde_json::Value = serde_json::from_slice(&s.json)?;
    let vanilla: Vec<PartitionProof<Tree>> =
        serde_json::from_value(request["vanilla_proofs"].clone())?;
    let dir = std::env::temp_dir();
    let circuit: UpdateCircuit<Tree> = update::partitions(
        proof,
        s.comm_r_old,
        s.comm_r_new,
        s.comm_d_new,
        &vanilla,
        &dir,
    )?
    .circuits
    .remove(0);
    let one = rayon::ThreadPoolBuilder::new().num_threads(1).build()?;
    let reference = one.install(|| Witness::synthesize_with_capacity(circuit.clone(), 0, 0))?;
    let (inputs, aux) = (reference.inputs.len(), reference.aux.len());
    let threads = rayon::current_num_threads();
    eprintln!(
        "{proof}: {inputs} inputs, {aux} aux; {threads} threads, {} cores",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let mut t = [(); 4].map(|()| Vec::new());
    for run in 0..args.runs {
        let mut time = |i: usize, what: &str, f: &dyn Fn() -> cuzk_synth::Result<Witness>| {
            let start = Instant::now();
            let w = f()?;
            t[i].push(start.elapsed());
            ensure!(w == reference, "run {run}: {what} differs");
            Ok(())
        };
        time(0, "one thread", &|| {
            one.install(|| Witness::synthesize_with_capacity(circuit.clone(), inputs, aux))
        })?;
        time(1, "parts on one thread", &|| {
            one.install(|| update::witness_with(circuit.clone(), inputs, aux, true))
        })?;
        time(2, "parts (gadgets)", &|| {
            update::witness_with(circuit.clone(), inputs, aux, false)
        })?;
        time(3, "parts (native)", &|| {
            update::witness_with(circuit.clone(), inputs, aux, true)
        })?;
        eprintln!(
            "run {run}: sequential {:.3?}, parts native on one thread {:.3?}, parts: gadgets \
             {:.3?}, native {:.3?}",
            t[0][run], t[1][run], t[2][run], t[3][run]
        );
    }
    let secs = |v: &[Duration]| v.iter().map(Duration::as_secs_f64).collect::<Vec<_>>();
    let samples = [&t[0], &t[1], &t[2], &t[3]].map(|v| secs(v));
    let [seq, one_parts, gadget, native] = t.map(median);
    let x = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64();
    eprintln!(
        "{proof}, {aux} aux, {threads} threads, median of {}: sequential (one thread) \
         {seq:.3?}, parts native on one thread {one_parts:.3?}, parts with the gadgets \
         {gadget:.3?}, parts native {native:.3?}; sequential / parts: native {:.2}x, gadgets \
         {:.2}x, native on one thread {:.2}x",
        args.runs,
        x(seq, native),
        x(seq, gadget),
        x(seq, one_parts),
    );

    if let Some((revision, command)) = args.json.get() {
        let names = [
            "sequential-1t",
            "parts-native-1t",
            "parts-gadgets",
            "parts-native",
        ];
        let notes = format!(
            "{inputs} inputs, {aux} aux; {threads} threads; every run checked equal to \
             storage-proofs-update's sequential witness"
        );
        let prefix = format!("witness/{proof}/partition0");
        let results = common::results_vs(&prefix, &names, &samples, 0, &notes);
        let doc = cuzk_engine::bench::bench_doc(revision, command, results);
        println!("{}", serde_json::to_string_pretty(&doc)?);
    }

    let profile = one.install(|| Profile::of(circuit, args.depth))?;
    let (mut sha, mut poseidon, mut other) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    for e in &profile.entries {
        let p = &e.path;
        if p.contains("to_apex_leaf") || p.contains("apex_gadget") {
            sha += e.time;
        } else if p.contains("por tree_r")
            || p.contains("rho")
            || p.contains("phi")
            || p.contains("calc")
            || p.contains("digest_#/")
        {
            poseidon += e.time;
        } else {
            other += e.time;
        }
    }
    for e in profile.entries.iter().take(16) {
        eprintln!("{:>10.3?} {:>10} values  {}", e.time, e.values, e.path);
    }
    let sum = (sha + poseidon + other).as_secs_f64();
    let pct = |d: Duration| 100.0 * d.as_secs_f64() / sum;
    eprintln!(
        "by gadget (storage-proofs-update, one thread, profiled {:.3?}): TreeD paths and the \
         apex tree (SHA-256) {sha:.3?} ({:.1}%), TreeR paths and other Poseidon {poseidon:.3?} \
         ({:.1}%), other {other:.3?} ({:.1}%)",
        profile.total,
        pct(sha),
        pct(poseidon),
        pct(other)
    );
    Ok(())
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}
