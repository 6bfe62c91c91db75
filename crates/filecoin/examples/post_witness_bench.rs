//! One PoSt partition's witness from synthetic vanilla proofs (no sealed
//! sector, no parameters), made four ways, each run checked equal:
//!
//! - storage-proofs' synthesis on one thread (a pool of one: its sector
//!   chunks run one after the other);
//! - storage-proofs' synthesis on rayon's pool (its `par_chunks` of
//!   `window_post_synthesis_num_cpus` sector groups, then copied together:
//!   what the engine ran before `post::witness`);
//! - `post::witness`: every sector head and inclusion path a part, written
//!   in place (the size known, as the engine knows it from the PCE), the
//!   paths by storage-proofs' gadget (`post::witness_with(.., false)`,
//!   `CUZK_NATIVE_POSEIDON=0`) and with their Poseidon made natively (the
//!   default).
//!
//! Then where the time goes in storage-proofs' sequential synthesis, by
//! gadget (`cuzk_synth::Profile`): Poseidon (each tree level's
//! `computation of commitment hash`, the sector's
//! `H_comm_c_comm_r_last`), the rest of the Merkle paths (each level's
//! index bits, sibling allocations and the insert placing the node among
//! its siblings), and the rest (leaf, root, the packed index, the
//! commitments).
//!
//! Last, each Poseidon hash alone: neptune's gadget on a witness system,
//! `cuzk_filecoin::poseidon::poseidon_hash` (the same values natively) and
//! neptune's native hash (the value only).
//!
//! ```text
//! cargo run --profile test -p cuzk-filecoin --example post_witness_bench -- \
//!     --post-proof StackedDrgWindow32GiBV1_1 --sectors 64 --runs 5 [--json REV CMD]
//! ```
//!
//! A WindowPoSt partition is cut to its first `--sectors` sectors (a 32 GiB
//! one has 2,349, which is 4 GB of witness).

// The benchmark examples' shared arguments and result entries, by path.
#[path = "../../groth16-cuda/examples/common/args.rs"]
mod args;
#[path = "../../groth16-cuda/examples/common/mod.rs"]
mod common;
use args::JsonRecord;

use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use clap::Parser;
use cuzk_filecoin::post::{self, PostCircuit};
use cuzk_filecoin::{PostProof, SectorSize, synthetic};
use cuzk_synth::{Profile, Witness};
use filecoin_proofs::{SectorShape2KiB, SectorShape8MiB, SectorShape32GiB};
use storage_proofs_core::merkle::{MerkleProofTrait, MerkleTreeTrait};

#[derive(Debug, Parser)]
struct Args {
    /// E.g. StackedDrgWindow32GiBV1_1, StackedDrgWinning2KiBV1 (2 KiB,
    /// 8 MiB or 32 GiB).
    #[arg(long, default_value = "StackedDrgWindow32GiBV1_1")]
    post_proof: PostProof,
    /// Sectors of the partition kept (at most its `sector_count`).
    #[arg(long, default_value_t = 64)]
    sectors: usize,
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Namespace depth of the profile.
    #[arg(long, default_value_t = 6)]
    depth: usize,
    #[command(flatten)]
    json: JsonRecord,
}

fn main() -> Result<()> {
    let args = Args::parse();
    match args.post_proof.sector_size {
        SectorSize::KIB2 => run::<SectorShape2KiB>(&args),
        SectorSize::MIB8 => run::<SectorShape8MiB>(&args),
        SectorSize::GIB32 => run::<SectorShape32GiB>(&args),
        s => anyhow::bail!("{s} sectors: this benchmark knows 2 KiB, 8 MiB and 32 GiB"),
    }
}

fn run<Tree: 'static + MerkleTreeTrait>(args: &Args) -> Result<()> {
    let proof = args.post_proof;
    let sectors = args.sectors.min(proof.config().sector_count);
    let s = synthetic::post_vanilla::<Tree>(proof, sectors.max(1), 1)?;
    let dir = std::env::temp_dir();
    let mut circuit: PostCircuit<Tree> =
        post::partitions(proof, &s.randomness, s.prover_id, &s.vanilla, &dir)?
            .circuits
            .remove(0);
    // WindowPoSt's partition is padded to its sector_count; WinningPoSt's
    // 66 "sectors" are one sector repeated and are kept.
    if proof.kind == cuzk_filecoin::PostKind::Window {
        circuit.truncate_sectors(sectors);
    }
    let reference = Witness::synthesize_with_capacity(circuit.clone(), 0, 0)?;
    let (inputs, aux) = (reference.inputs.len(), reference.aux.len());
    let threads = rayon::current_num_threads();
    eprintln!(
        "{proof}: {} sectors, {inputs} inputs, {aux} aux; {threads} threads, {} cores",
        circuit.sectors().len(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let one = rayon::ThreadPoolBuilder::new().num_threads(1).build()?;
    let (mut t_one, mut t_sp) = (Vec::new(), Vec::new());
    let (mut t_gadget, mut t_native) = (Vec::new(), Vec::new());
    for run in 0..args.runs {
        let c = circuit.clone();
        let start = Instant::now();
        let w = one.install(|| Witness::synthesize_with_capacity(c, inputs, aux))?;
        t_one.push(start.elapsed());
        ensure!(w == reference, "run {run}: one thread differs");
        drop(w);

        let c = circuit.clone();
        let start = Instant::now();
        let w = Witness::synthesize_with_capacity(c, inputs, aux)?;
        t_sp.push(start.elapsed());
        ensure!(w == reference, "run {run}: storage-proofs' chunks differ");
        drop(w);

        let c = circuit.clone();
        let start = Instant::now();
        let w = post::witness_with(c, inputs, aux, false)?;
        t_gadget.push(start.elapsed());
        ensure!(w == reference, "run {run}: parts (Poseidon gadget) differ");
        drop(w);

        let c = circuit.clone();
        let start = Instant::now();
        let w = post::witness_with(c, inputs, aux, true)?;
        t_native.push(start.elapsed());
        ensure!(w == reference, "run {run}: parts (native Poseidon) differ");
        eprintln!(
            "run {run}: one thread {:.3?}, storage-proofs on the pool {:.3?}, parts: Poseidon \
             gadget {:.3?}, native {:.3?}",
            t_one[run], t_sp[run], t_gadget[run], t_native[run]
        );
    }
    let secs = |v: &[Duration]| v.iter().map(Duration::as_secs_f64).collect::<Vec<_>>();
    let samples = [&t_one, &t_sp, &t_gadget, &t_native].map(|v| secs(v));
    let (one, sp) = (median(t_one), median(t_sp));
    let (gadget, native) = (median(t_gadget), median(t_native));
    let x = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64();
    eprintln!(
        "{proof}, {} sectors, {aux} aux, {threads} threads, median of {}: one thread {one:.3?}, \
         storage-proofs on the pool {sp:.3?}, parts with the Poseidon gadget {gadget:.3?}, \
         parts with native Poseidon {native:.3?}; one thread / parts: gadget {:.2}x, native \
         {:.2}x; storage-proofs on the pool / native {:.2}x; gadget / native {:.2}x",
        circuit.sectors().len(),
        args.runs,
        x(one, gadget),
        x(one, native),
        x(sp, native),
        x(gadget, native),
    );

    if let Some((revision, command)) = args.json.get() {
        let names = [
            "one-thread",
            "storage-proofs-pool",
            "parts-gadget",
            "parts-native",
        ];
        let notes = format!(
            "{} sectors, {inputs} inputs, {aux} aux; {threads} threads; every run checked \
             equal to storage-proofs' sequential witness",
            circuit.sectors().len()
        );
        let prefix = format!("witness/{proof}/partition0");
        let results = common::results_vs(&prefix, &names, &samples, 0, &notes);
        let doc = cuzk_engine::bench::bench_doc(revision, command, results);
        println!("{}", serde_json::to_string_pretty(&doc)?);
    }

    let reference_circuit = circuit.clone();
    let profile = Profile::of(circuit, args.depth)?;
    let (mut poseidon, mut path, mut other) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    for e in &profile.entries {
        if e.path.contains("computation of commitment hash") || e.path.contains("H_comm_c") {
            poseidon += e.time;
        } else if e.path.contains("merkle tree hash") {
            path += e.time;
        } else {
            other += e.time;
        }
    }
    for e in profile.entries.iter().take(12) {
        eprintln!("{:>10.3?} {:>10} values  {}", e.time, e.values, e.path);
    }
    let sum = (poseidon + path + other).as_secs_f64();
    let pct = |d: Duration| 100.0 * d.as_secs_f64() / sum;
    eprintln!(
        "by gadget (storage-proofs, one thread, profiled {:.3?}): Poseidon {poseidon:.3?} \
         ({:.1}%), Merkle path without its hashes {path:.3?} ({:.1}%), other {other:.3?} \
         ({:.1}%)",
        profile.total,
        pct(poseidon),
        pct(path),
        pct(other)
    );

    // The profile reads the clock at each of Poseidon's many namespaces,
    // which inflates its share: the hashes are also timed alone, on the
    // witness system (storage-proofs' gadget, and the same values made
    // natively) and natively (the hash alone).
    let levels: Vec<usize> = s.vanilla[0].vanilla_proof.sectors[0].inclusion_proofs[0]
        .path()
        .iter()
        .map(|(siblings, _)| siblings.len() + 1)
        .collect();
    let per_arity = |a: usize| -> Result<[Duration; 3]> {
        match a {
            2 => poseidon_times::<Tree, typenum::U2>(),
            8 => poseidon_times::<Tree, typenum::U8>(),
            a => anyhow::bail!("arity {a}"),
        }
    };
    let [c2, w2, n2] = per_arity(2)?;
    let mut per_path = [Duration::ZERO; 3];
    for &a in &levels {
        let t = per_arity(a)?;
        for (sum, t) in per_path.iter_mut().zip(t) {
            *sum += t;
        }
    }
    let paths: usize = s_paths(&reference_circuit);
    let sectors = reference_circuit.sectors().len() as u32;
    let circuit_hashes = per_path[0] * paths as u32 + c2 * sectors;
    let witness_hashes = per_path[1] * paths as u32;
    let native_hashes = per_path[2] * paths as u32 + n2 * sectors;
    eprintln!(
        "Poseidon alone: arity 2 {c2:.2?} per hash as the gadget's witness, {w2:.2?} as the \
         native witness, {n2:.2?} the hash alone; a path's {} levels (arities {levels:?}) \
         {:.2?} gadget, {:.2?} native witness, {:.2?} hash alone; the partition's {paths} \
         paths and {sectors} comm_r hashes {circuit_hashes:.3?} gadget ({:.1}% of the \
         one-thread witness {one:.3?}), {native_hashes:.3?} hash alone; the paths' native \
         witness {witness_hashes:.3?}",
        levels.len(),
        per_path[0],
        per_path[1],
        per_path[2],
        100.0 * circuit_hashes.as_secs_f64() / one.as_secs_f64(),
    );
    Ok(())
}

fn s_paths<Tree: 'static + MerkleTreeTrait>(c: &PostCircuit<Tree>) -> usize {
    c.sectors().iter().map(|s| s.paths.len()).sum()
}

/// One Poseidon hash of `A` elements: its witness by the gadget
/// storage-proofs' paths use, the same witness made natively, and the hash
/// alone natively; medians per hash of a batch.
fn poseidon_times<Tree, A>() -> Result<[Duration; 3]>
where
    Tree: 'static + MerkleTreeTrait,
    A: 'static + filecoin_hashers::PoseidonArity,
{
    use bellperson::ConstraintSystem;
    use bellperson::gadgets::num::AllocatedNum;
    use blstrs::Scalar;
    use ff::Field;
    use filecoin_hashers::{HashFunction, Hasher};
    use merkletree::hash::Algorithm;
    const N: u32 = 400;
    let mut rng = rand::rngs::OsRng;
    let values: Vec<Scalar> = (0..A::to_usize())
        .map(|_| Scalar::random(&mut rng))
        .collect();
    let mut cs = cuzk_synth::WitnessCs::with_capacity(1, 0);
    let nums = values
        .iter()
        .enumerate()
        .map(|(i, v)| AllocatedNum::alloc(cs.namespace(|| format!("x{i}")), || Ok(*v)))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let domains: Vec<<Tree::Hasher as Hasher>::Domain> =
        values.iter().map(|v| (*v).into()).collect();
    let (mut gadget, mut witness, mut native) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..5 {
        let start = Instant::now();
        for i in 0..N {
            <<Tree::Hasher as Hasher>::Function as HashFunction<_>>::hash_multi_leaf_circuit::<A, _>(
                cs.namespace(|| format!("h{i}")),
                &nums,
                0,
            )?;
        }
        gadget.push(start.elapsed() / N);
        let start = Instant::now();
        for i in 0..N {
            cuzk_filecoin::poseidon::poseidon_hash(
                cs.namespace(|| format!("n{i}")),
                &nums,
                A::PARAMETERS(),
            )?;
        }
        witness.push(start.elapsed() / N);
        let mut f = <Tree::Hasher as Hasher>::Function::default();
        let start = Instant::now();
        for _ in 0..N {
            f.reset();
            std::hint::black_box(f.multi_node(&domains, 0));
        }
        native.push(start.elapsed() / N);
    }
    Ok([median(gadget), median(witness), median(native)])
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}
