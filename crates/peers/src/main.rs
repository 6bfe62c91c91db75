//! cuzk beside a peer prover in one run, on the same circuit, the same
//! parameters, r and s, with the proofs compared byte for byte. Two kinds of
//! circuit:
//!
//! - `porep:K` (exactly 2^K constraints; `--sizes`), as below;
//! - one partition of a Filecoin proof at any sector size (`--seal-proof`,
//!   `--update-proof`, `--post-proof` with `--sectors`; `--partition`,
//!   `--seed`): see the `filecoin` module.
//!
//! The peer is bellperson's `create_proof`: its CPU prover in a default
//! build, its SupraSeal GPU prover when built with `--features supraseal`
//! (bellperson's `cuda-supraseal` replaces the prover for the whole build,
//! so the two peers are two builds of this binary).
//!
//! Both sides are timed from a circuit to a proof (synthesis included:
//! bellperson's `create_proof` synthesizes the circuit itself); cuzk's
//! figure without synthesis is reported beside it. Parameters are fake
//! (cuzk's cheap pseudo-random points of the right counts, the same work
//! for every prover; the proofs compare byte for byte but do not verify);
//! SupraSeal reads them from a file, written once per size into the work
//! directory. Per size: one cuzk warm-up proof (modules, parameter upload),
//! then `--runs` cuzk proofs and `--peer-runs` peer proofs, run i of both
//! with the same witness seed, r and s.
//!
//! ```text
//! cuzk-peers <short git revision> <command line for the record>
//!     [--sizes 20,22] [--runs 3] [--peer-runs 2] [--workdir DIR] [--out FILE]
//! cuzk-peers <rev> <command> --seal-proof StackedDrg32GiBV1_1 [--partition 0] [--seed 1]
//!     [--runs 2] [--peer-runs 1] [--workdir DIR] [--out FILE] [--cpu]
//!     [--save DIR | --peer-from DIR [--remove-params]]
//!     [--placement auto|resident|streamed]
//! ```
//! Writes the bench-data JSON (area `peers`) to stdout at the end, and with
//! `--out` also to FILE after every peer proof (so a run cut short by a
//! time limit keeps what it measured); progress to stderr. `--cpu` proves
//! cuzk's side on its CPU prover (a Filecoin partition only: to check the
//! tool where there is no GPU). `--save DIR` stops after cuzk's side,
//! leaving its proofs, r, s and results and the parameter file in DIR; a
//! second process with the same arguments and `--peer-from DIR` runs the
//! peer's side from them and reports both (each side then has a process,
//! and a time limit, of its own); `--remove-params` then removes the
//! parameter file once the peer has read it. `--placement` is where cuzk keeps a
//! Filecoin partition's parameters on the GPU (`ParamsPlacement`; `auto`,
//! the default, is what the engine does); the device memory in use after
//! the warm-up proof is reported beside the parameters' size, which shows
//! what `auto` chose.

// The benchmark examples' run facts and result entries, shared by path.
#[path = "../../groth16-cuda/examples/common/mod.rs"]
mod common;
use common::{Stat, result};

mod filecoin;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use bellperson::Circuit;
use bellperson::groth16::{Parameters, Proof};
use blstrs::Scalar;
use cuzk_groth16_cuda::fake::fake_params;
use cuzk_groth16_cuda::{AbcInput, Bls12, GpuProver, ParamsPlacement, Prover, ProverInput};
use cuzk_synth::circuits::CircuitSpec;
use cuzk_synth::{Pce, Witness};
use ff::Field;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use serde_json::{Value, json};

/// bellperson's CPU prover.
#[cfg(not(feature = "supraseal"))]
mod peer {
    use super::*;

    pub const NAME: &str = "bellperson-cpu";

    /// Holds the parameters it proves with.
    pub struct Peer(Arc<Parameters<Bls12>>);

    impl Peer {
        pub fn load(params: Arc<Parameters<Bls12>>, _dir: &Path) -> Result<Self> {
            Ok(Peer(params))
        }

        /// From a parameter file (bellperson's layout).
        pub fn open(file: &Path) -> Result<Self> {
            Ok(Peer(Arc::new(cuzk_groth16_cuda::read_params(file, false)?)))
        }

        pub fn prove<C: Circuit<Scalar> + Send>(
            &self,
            circuit: C,
            r: Scalar,
            s: Scalar,
        ) -> Result<Proof<Bls12>> {
            Ok(bellperson::groth16::create_proof(circuit, &*self.0, r, s)?)
        }
    }
}

/// bellperson's SupraSeal prover: parameters from a file into its own SRS.
#[cfg(feature = "supraseal")]
mod peer {
    use super::*;
    use bellperson::groth16::SuprasealParameters;

    pub const NAME: &str = "bellperson-supraseal";

    pub struct Peer(SuprasealParameters<Bls12>);

    impl Peer {
        /// Writes the parameters to a file in `dir`, lets go of them (the
        /// memory is freed when this was the last holder), and has SupraSeal
        /// read the file; the file is removed once read.
        pub fn load(params: Arc<Parameters<Bls12>>, dir: &Path) -> Result<Self> {
            let file = dir.join("peer.params");
            cuzk_groth16_cuda::write_params(&file, &params)?;
            drop(params);
            let srs = Self::open(&file);
            std::fs::remove_file(&file).ok();
            srs
        }

        /// From a parameter file (bellperson's layout), read by SupraSeal:
        /// returns once SupraSeal has read all of it into its own (pinned)
        /// memory, so the read is timed here and not inside the first
        /// proof, and the file may be removed.
        pub fn open(file: &Path) -> Result<Self> {
            let srs = SuprasealParameters::new(file.to_owned())
                .with_context(|| format!("SupraSeal reading {}", file.display()))?;
            wait_unmapped(file)?;
            Ok(Peer(srs))
        }

        pub fn prove<C: Circuit<Scalar> + Send>(
            &self,
            circuit: C,
            r: Scalar,
            s: Scalar,
        ) -> Result<Proof<Bls12>> {
            Ok(bellperson::groth16::create_proof::<
                Bls12,
                _,
                &SuprasealParameters<Bls12>,
            >(circuit, &self.0, r, s)?)
        }
    }

    /// SupraSeal maps the file and unmaps it when its background read has
    /// finished (it offers no call to wait for that): waits until no mapping
    /// of `file` is left in this process (an hour at most).
    fn wait_unmapped(file: &Path) -> Result<()> {
        let path =
            std::fs::canonicalize(file).with_context(|| format!("resolving {}", file.display()))?;
        let path = path.to_string_lossy().into_owned();
        let start = Instant::now();
        loop {
            let maps = std::fs::read_to_string("/proc/self/maps")
                .context("reading /proc/self/maps to see whether SupraSeal's read is done")?;
            // address, permissions, offset, device, inode, then the path.
            let mapped = maps
                .lines()
                .any(|l| l.split_whitespace().skip(5).collect::<Vec<_>>().join(" ") == path);
            if !mapped {
                return Ok(());
            }
            if start.elapsed() > std::time::Duration::from_secs(3600) {
                bail!("SupraSeal still maps {path} after an hour: its read did not finish");
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}

struct Args {
    revision: String,
    command: String,
    sizes: Vec<u32>,
    runs: usize,
    peer_runs: usize,
    workdir: PathBuf,
    out: Option<PathBuf>,
    /// One partition of a Filecoin proof instead of `porep:K`.
    filecoin: Option<filecoin::Kind>,
    seed: u64,
    sectors: Option<usize>,
    partition: usize,
    /// cuzk's side on its CPU prover (no GPU needed; to check the tool).
    cpu: bool,
    /// A Filecoin partition in two processes: cuzk's side saves its proofs
    /// and the parameter file here (`--save`), the peer's reads them
    /// (`--peer-from`).
    save: Option<PathBuf>,
    peer_from: Option<PathBuf>,
    /// Where cuzk keeps a Filecoin partition's parameters on the GPU
    /// (`None`: not given, `Auto`).
    placement: Option<ParamsPlacement>,
    /// With `--peer-from`: remove the parameter file once the peer has read
    /// it (a file in /dev/shm is memory the peer's proof may need).
    remove_params: bool,
}

fn args() -> Result<Args> {
    let mut it = std::env::args().skip(1);
    let revision = it.next().context("missing <short git revision>")?;
    let command = it.next().context("missing <command line>")?;
    let mut a = Args {
        revision,
        command,
        sizes: vec![20, 22],
        runs: 3,
        peer_runs: 2,
        workdir: std::env::temp_dir(),
        out: None,
        filecoin: None,
        seed: 1,
        sectors: None,
        partition: 0,
        cpu: false,
        save: None,
        peer_from: None,
        placement: None,
        remove_params: false,
    };
    while let Some(flag) = it.next() {
        if flag == "--cpu" {
            a.cpu = true;
            continue;
        }
        if flag == "--remove-params" {
            a.remove_params = true;
            continue;
        }
        let value = it.next().with_context(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--seal-proof" => a.filecoin = Some(filecoin::Kind::PoRep(value.parse()?)),
            "--update-proof" => a.filecoin = Some(filecoin::Kind::Update(value.parse()?)),
            "--post-proof" => a.filecoin = Some(filecoin::Kind::Post(value.parse()?)),
            "--seed" => a.seed = value.parse().context("--seed takes a number")?,
            "--sectors" => a.sectors = Some(value.parse().context("--sectors takes a count")?),
            "--partition" => a.partition = value.parse().context("--partition takes an index")?,
            "--save" => a.save = Some(value.into()),
            "--peer-from" => a.peer_from = Some(value.into()),
            "--placement" => {
                a.placement = Some(match value.as_str() {
                    "auto" => ParamsPlacement::Auto,
                    "resident" => ParamsPlacement::Resident,
                    "streamed" => ParamsPlacement::Streamed,
                    other => bail!("--placement takes auto, resident or streamed, not {other:?}"),
                })
            }
            "--sizes" => {
                a.sizes = value
                    .split(',')
                    .map(|s| s.trim().parse::<u32>())
                    .collect::<std::result::Result<_, _>>()
                    .context("--sizes takes comma-separated log2 sizes")?
            }
            "--runs" => a.runs = value.parse().context("--runs takes a count")?,
            "--peer-runs" => a.peer_runs = value.parse().context("--peer-runs takes a count")?,
            "--workdir" => a.workdir = value.into(),
            "--out" => a.out = Some(value.into()),
            other => bail!("unknown flag {other}"),
        }
    }
    if a.runs == 0 || a.peer_runs == 0 || a.peer_runs > a.runs {
        bail!("need 1 <= --peer-runs <= --runs");
    }
    if a.filecoin.is_none() && (a.cpu || a.save.is_some() || a.peer_from.is_some()) {
        bail!(
            "--cpu, --save and --peer-from are for a Filecoin partition \
             (--seal-proof, --update-proof, --post-proof)"
        );
    }
    if a.placement.is_some() && (a.filecoin.is_none() || a.cpu || a.peer_from.is_some()) {
        bail!(
            "--placement is for cuzk's GPU side of a Filecoin partition \
             (not with --cpu or --peer-from, nor with --sizes)"
        );
    }
    if a.remove_params && a.peer_from.is_none() {
        bail!("--remove-params removes the parameter file of --peer-from DIR: give that too");
    }
    if a.save.is_some() && a.peer_from.is_some() {
        bail!("--save is cuzk's half of a run, --peer-from the peer's: one at a time");
    }
    Ok(a)
}

fn proof_bytes(p: &Proof<Bls12>) -> Vec<u8> {
    let mut v = Vec::with_capacity(192);
    p.write(&mut v).expect("writing to a Vec cannot fail");
    v
}

/// The three results of one size: cuzk with and without synthesis, the peer.
fn size_results(
    size: &str,
    included: &[f64],
    excluded: &[f64],
    theirs: &[f64],
    identical: bool,
    peer_load: f64,
) -> Vec<Value> {
    let peer_median = Stat::of(theirs.to_vec()).median;
    vec![
        result(
            format!("peers/{size}/porep/cuzk/synthesis-included"),
            included,
            json!({
                "baseline": {"name": peer::NAME, "median": peer_median, "runs": theirs.len()},
                "ratio_vs_baseline": peer_median / Stat::of(included.to_vec()).median,
                "byte_identical_to_baseline": identical,
                "notes": "GPU 0, a/b/c on the GPU, parameters resident (uploaded in a warm-up \
                          proof); fake parameters, the same for both provers",
            }),
        ),
        result(
            format!("peers/{size}/porep/cuzk/synthesis-excluded"),
            excluded,
            json!({}),
        ),
        result(
            format!("peers/{size}/porep/{}/create_proof", peer::NAME),
            theirs,
            json!({
                "notes": format!(
                    "bellperson::groth16::create_proof, its own synthesis included; \
                     parameters loaded in {peer_load:.3} s (not included)"
                ),
            }),
        ),
    ]
}

/// The bench-data document, also rewritten into `--out` as results come.
struct Report {
    head: Value,
    out: Option<PathBuf>,
}

impl Report {
    fn json(&self, done: &[Value], partial: &[Value]) -> Value {
        let mut doc = self.head.clone();
        doc["results"] = done.iter().chain(partial).cloned().collect();
        doc
    }

    fn write(&self, done: &[Value], partial: &[Value]) -> Result<()> {
        let Some(path) = &self.out else {
            return Ok(());
        };
        let text = serde_json::to_string_pretty(&self.json(done, partial))?;
        let tmp = path.with_extension("json.partial");
        std::fs::write(&tmp, text)
            .and_then(|()| std::fs::rename(&tmp, path))
            .with_context(|| format!("writing {}", path.display()))
    }
}

fn main() -> Result<()> {
    let args = args()?;
    let workdir = tempfile::tempdir_in(&args.workdir)
        .with_context(|| format!("a work directory in {}", args.workdir.display()))?;
    if let Some(kind) = args.filecoin {
        return filecoin::run(&args, kind, workdir.path());
    }
    let gpu = GpuProver::new(0).context("cuzk's side of the comparison needs a GPU")?;
    let gpu_name = gpu.gpu().name().to_owned();
    eprintln!("GPU 0: {gpu_name}; peer: {}", peer::NAME);
    let report = Report {
        head: json!({
            "revision": args.revision,
            "date": common::today(),
            "machine": common::machine(&gpu_name, json!({})),
            "command": args.command,
        }),
        out: args.out.clone(),
    };
    let mut results = Vec::new();
    for &k in &args.sizes {
        let spec: CircuitSpec = format!("porep:{k}").parse()?;
        let size = format!("2^{k}");
        let pce = Pce::record(spec.build(0))?;
        let params = Arc::new(fake_params(&pce, 42));
        let t = Instant::now();
        let peer = peer::Peer::load(params.clone(), workdir.path())?;
        let peer_load = t.elapsed().as_secs_f64();

        // Warm-up: loads the modules, uploads the parameters, grows scratch.
        let witness =
            Witness::synthesize_with_capacity(spec.build(1), pce.num_inputs, pce.num_aux)?;
        let input = ProverInput {
            pce: &pce,
            witness: &witness,
            abc: AbcInput::FromPce,
        };
        gpu.prove(input, &params, Scalar::ONE, Scalar::ONE)?;
        drop(witness);

        let mut rng = ChaCha20Rng::seed_from_u64(u64::from(k));
        let runs: Vec<(u64, Scalar, Scalar)> = (0..args.runs)
            .map(|i| {
                (
                    2 + i as u64,
                    Scalar::random(&mut rng),
                    Scalar::random(&mut rng),
                )
            })
            .collect();
        let (mut included, mut excluded, mut ours) = (Vec::new(), Vec::new(), Vec::new());
        for &(seed, r, s) in &runs {
            let t = Instant::now();
            let witness =
                Witness::synthesize_with_capacity(spec.build(seed), pce.num_inputs, pce.num_aux)?;
            let synth = t.elapsed();
            let out = gpu.prove(
                ProverInput {
                    pce: &pce,
                    witness: &witness,
                    abc: AbcInput::FromPce,
                },
                &params,
                r,
                s,
            )?;
            let all = t.elapsed();
            included.push(all.as_secs_f64());
            excluded.push((all - synth).as_secs_f64());
            ours.push(proof_bytes(&out.proof));
            eprintln!("{spec}: cuzk {all:.3?} (synthesis {synth:.3?})");
        }

        let mut theirs = Vec::new();
        let mut identical = true;
        for (i, &(seed, r, s)) in runs.iter().take(args.peer_runs).enumerate() {
            let t = Instant::now();
            let proof = peer.prove(spec.build(seed), r, s)?;
            let d = t.elapsed();
            let same = proof_bytes(&proof) == ours[i];
            identical &= same;
            theirs.push(d.as_secs_f64());
            eprintln!("{spec}: {} {d:.3?}, byte-identical: {same}", peer::NAME);
            // A run cut short (a time limit) keeps what it measured.
            let partial = size_results(&size, &included, &excluded, &theirs, identical, peer_load);
            report.write(&results, &partial)?;
        }

        results.extend(size_results(
            &size, &included, &excluded, &theirs, identical, peer_load,
        ));
        report.write(&results, &[])?;
        gpu.evict_params();
    }
    println!(
        "{}",
        serde_json::to_string_pretty(&report.json(&results, &[]))?
    );
    Ok(())
}
