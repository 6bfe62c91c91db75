//! One partition of a Filecoin proof, at any sector size, proved by cuzk and
//! by the peer on the same circuit, parameters, r and s.
//!
//! The input is cuzk's synthetic one (`cuzk_filecoin::synthetic`, from
//! `--seed`: a PoRep C1, a SnapDeals update or PoSt vanilla proofs), the
//! circuit is the partition circuit filecoin-proofs builds from it
//! (storage-proofs' synthesis), the parameters are fake ones made from its
//! PCE (the prover's work is that of real ones; the proofs compare byte for
//! byte but do not verify). In order, so that each side has the host and the
//! device to itself:
//!
//! 1. the synthetic input, the partition's PCE recorded, the fake parameters;
//! 2. cuzk: one warm-up proof (parameters uploaded, not measured), then
//!    `--runs` proofs, each its witness (the engine's: PoRep's challenges in
//!    parallel) and the prover, timed apart;
//! 3. the GPU's copies freed and the PCE dropped; the peer loads the
//!    parameters (SupraSeal: from a file written into the work directory,
//!    after which this process lets go of its own copy);
//! 4. the peer: `--peer-runs` proofs with the first runs' r and s, each
//!    bellperson's `create_proof` (its own synthesis, then its prover), the
//!    synthesis told apart from the rest by the time bellperson logs
//!    "starting proof timer".

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use bellperson::Circuit;
use blstrs::Scalar;
use cuzk_filecoin::post::PostInput;
use cuzk_filecoin::{
    C1Output, Partitions, PartitionsVisitor, PostProof, SealProof, UpdateInput, UpdateProof,
    synthetic,
};
use cuzk_groth16_cuda::cuda::Gpu;
use cuzk_groth16_cuda::fake::fake_params;
use cuzk_groth16_cuda::{
    AbcInput, CpuProver, GpuOptions, GpuProver, ParamsPlacement, Prover, ProverInput,
    params_device_bytes,
};
use cuzk_synth::Pce;
use ff::Field;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use serde_json::{Value, json};

use crate::common::{self, Stat, result};
use crate::{Args, Report, peer, proof_bytes};

/// Which Filecoin proof.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    PoRep(SealProof),
    Update(UpdateProof),
    Post(PostProof),
}

/// The synthetic input, parsed.
enum Input {
    PoRep(C1Output),
    Update(UpdateInput),
    Post(PostInput),
}

impl Input {
    fn visit<V: PartitionsVisitor>(&self, v: V) -> Result<V::Output> {
        let dir = Path::new("");
        Ok(match self {
            Input::PoRep(c1) => c1.visit_partitions(dir, v)?,
            Input::Update(u) => u.visit_partitions(dir, v)?,
            Input::Post(p) => p.visit_partitions(dir, v)?,
        })
    }
}

/// The synthetic input of `kind`, with what to call it in result names and
/// a line on what it is.
fn input(kind: Kind, seed: u64, sectors: Option<usize>) -> Result<(Input, String, String)> {
    Ok(match kind {
        Kind::PoRep(proof) => {
            let s = synthetic::generate_json(proof, seed)?;
            let note = format!(
                "synthetic C1, seed {seed}: {} partitions, {} challenges, made in {:.1} s",
                s.partitions, s.challenges, s.seconds
            );
            let c1 = C1Output::from_json(&s.json, Some(proof))?;
            (Input::PoRep(c1), format!("porep-c2/{proof}"), note)
        }
        Kind::Update(proof) => {
            let s = synthetic::update_json(proof, seed)?;
            let u = UpdateInput::from_json(&s.json)?;
            let note = format!(
                "synthetic update, seed {seed}: {} partitions, made in {:.1} s",
                u.partitions(),
                s.seconds
            );
            (Input::Update(u), format!("snap-deals/{proof}"), note)
        }
        Kind::Post(proof) => {
            let sectors = sectors.unwrap_or(proof.config().sector_count);
            let s = synthetic::post_json(proof, sectors, seed)?;
            let p = PostInput::from_json(&s.json, Some(proof.kind))?;
            let note = format!(
                "synthetic vanilla proofs, seed {seed}: {sectors} sectors, {} partitions, \
                 made in {:.1} s",
                p.partitions()?,
                s.seconds
            );
            (Input::Post(p), format!("post/{proof}"), note)
        }
    })
}

pub fn run(args: &Args, kind: Kind, workdir: &Path) -> Result<()> {
    bellperson_log::install();
    let t = Instant::now();
    let (input, name, note) = input(kind, args.seed, args.sectors)?;
    eprintln!("{name}: {note} ({:.1?})", t.elapsed());
    input.visit(Partition {
        args,
        name,
        note,
        workdir,
    })?
}

/// The measurement, on the typed partitions.
struct Partition<'a> {
    args: &'a Args,
    name: String,
    note: String,
    workdir: &'a Path,
}

/// cuzk's prover, the name of what it runs on, and its GPU (to read its
/// memory) unless it is the CPU prover.
struct Opened {
    prover: Box<dyn Prover>,
    name: String,
    device: Option<Arc<Gpu>>,
}

/// cuzk's prover: the GPU, or its CPU prover under `--cpu`.
fn open_prover(cpu: bool, placement: ParamsPlacement) -> Result<Opened> {
    if cpu {
        return Ok(Opened {
            prover: Box::new(CpuProver),
            name: "none (cuzk's CPU prover)".into(),
            device: None,
        });
    }
    let options = GpuOptions {
        params: placement,
        ..GpuOptions::default()
    };
    let gpu = GpuProver::with_options(0, options).context(
        "cuzk's side of the comparison needs a GPU (--cpu runs it on cuzk's CPU prover)",
    )?;
    Ok(Opened {
        name: gpu.gpu().name().to_owned(),
        device: Some(gpu.gpu().clone()),
        prover: Box::new(gpu),
    })
}

impl PartitionsVisitor for Partition<'_> {
    type Output = Result<()>;

    fn visit<C>(self, partitions: Partitions<C>) -> Result<()>
    where
        C: Circuit<Scalar> + Clone + Send + Sync + 'static,
    {
        let args = self.args;
        let k = args.partition;
        let count = partitions.circuits.len();
        let Some(circuit) = partitions.circuits.get(k).cloned() else {
            bail!(
                "--partition {k}: {} has {count} partition(s)",
                partitions.label
            );
        };
        let witness_fn = partitions.witness;
        drop(partitions);
        let prefix = format!("peers/{}/partition{k}", self.name);
        if let Some(dir) = &args.peer_from {
            let saved = Saved::read(dir)?;
            if saved.run != self.run_id() {
                bail!(
                    "{} was saved for {:?}; these arguments ask for {:?} (the same proof, \
                     seed, partition and sectors as the --save run are needed)",
                    dir.display(),
                    saved.run,
                    self.run_id()
                );
            }
            let report = self.report(&saved.gpu);
            let mut setup = saved.setup.clone();
            let t = Instant::now();
            let file = dir.join(PARAMS_FILE);
            let peer = peer::Peer::open(&file)?;
            if args.remove_params {
                std::fs::remove_file(&file)
                    .with_context(|| format!("removing {}", file.display()))?;
            }
            setup.push(once(
                &prefix,
                "peer_load",
                t.elapsed().as_secs_f64(),
                format!(
                    "{}: the parameter file cuzk's side wrote, read (SupraSeal: into its \
                     pinned SRS, waited for)",
                    peer::NAME
                ),
            ));
            return peer_side(&report, &prefix, &peer, circuit, &saved, setup, args);
        }

        let Opened {
            prover,
            name: gpu_name,
            device,
        } = open_prover(args.cpu, args.placement.unwrap_or_default())?;
        eprintln!("cuzk on {gpu_name}; peer: {}", peer::NAME);
        let report = self.report(&gpu_name);
        let mut setup = Vec::new();

        let t = Instant::now();
        let pce = Pce::record(circuit.clone())?;
        setup.push(once(
            &prefix,
            "pce_record",
            t.elapsed().as_secs_f64(),
            format!(
                "{} constraints, {} inputs, {} aux; {}",
                pce.num_constraints(),
                pce.num_inputs,
                pce.num_aux,
                self.note
            ),
        ));
        let t = Instant::now();
        let params = Arc::new(fake_params(&pce, 42));
        setup.push(once(
            &prefix,
            "fake_params",
            t.elapsed().as_secs_f64(),
            "cuzk's fake parameters from the PCE, seed 42".into(),
        ));

        let prove = |witness: &cuzk_synth::Witness, r: Scalar, s: Scalar| -> Result<Vec<u8>> {
            let abc;
            let abc_input = if prover.evaluates_abc(&pce) {
                AbcInput::FromPce
            } else {
                abc = cuzk_synth::evaluate(&pce, witness)?;
                AbcInput::Evaluated {
                    a: &abc.a,
                    b: &abc.b,
                    c: &abc.c,
                }
            };
            let input = ProverInput {
                pce: &pce,
                witness,
                abc: abc_input,
            };
            Ok(proof_bytes(&prover.prove(input, &params, r, s)?.proof))
        };

        // Warm-up: modules, parameter upload, scratch.
        let t = Instant::now();
        let witness = witness_fn(circuit.clone(), pce.num_inputs, pce.num_aux)?;
        prove(&witness, Scalar::ONE, Scalar::ONE)?;
        drop(witness);
        setup.push(once(
            &prefix,
            "cuzk_warm_up",
            t.elapsed().as_secs_f64(),
            "one proof: witness, parameters uploaded, the prover's first use".into(),
        ));
        if let Some(device) = &device {
            // Buffers freed in stream order are back once it is idle.
            device.synchronize()?;
            let (free, total) = device.mem_info()?;
            let gib = (total - free) as f64 / GIB;
            let notes = format!(
                "cuMemGetInfo's total less free after the warm-up proof, placement {:?} \
                 (the parameters take {:.1} GiB when resident; cuzk's buffers hold {:.1} GiB)",
                args.placement.unwrap_or_default(),
                params_device_bytes(&params) as f64 / GIB,
                device.allocated_bytes() as f64 / GIB
            );
            eprintln!("device memory in use: {gib:.1} GiB ({notes})");
            setup.push(json!({
                "name": format!("{prefix}/device_used_after_warm_up"),
                "unit": "GiB",
                "median": gib, "min": gib, "max": gib, "runs": 1,
                "notes": notes,
            }));
        }

        let mut rng = ChaCha20Rng::seed_from_u64(args.seed ^ ((k as u64) << 32));
        let mut saved = Saved {
            run: self.run_id(),
            gpu: gpu_name,
            setup: Vec::new(),
            rs: (0..args.runs)
                .map(|_| (Scalar::random(&mut rng), Scalar::random(&mut rng)))
                .collect(),
            proofs: Vec::new(),
            witness: Vec::new(),
            prove: Vec::new(),
            total: Vec::new(),
        };
        for &(r, s) in &saved.rs {
            let t = Instant::now();
            let witness = witness_fn(circuit.clone(), pce.num_inputs, pce.num_aux)?;
            let w = t.elapsed();
            saved.proofs.push(prove(&witness, r, s)?);
            let all = t.elapsed();
            saved.witness.push(w.as_secs_f64());
            saved.prove.push((all - w).as_secs_f64());
            saved.total.push(all.as_secs_f64());
            eprintln!("cuzk: {all:.3?} (witness {w:.3?})");
        }
        drop(prover); // the device copies
        drop(pce);

        if let Some(dir) = &args.save {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            let t = Instant::now();
            cuzk_groth16_cuda::write_params(&dir.join(PARAMS_FILE), &params)?;
            setup.push(once(
                &prefix,
                "params_write",
                t.elapsed().as_secs_f64(),
                format!(
                    "the parameters written for the peer, {:.1} GB",
                    file_gb(&dir.join(PARAMS_FILE))
                ),
            ));
            saved.setup = setup;
            saved.write(dir)?;
            let mut all = saved.setup.clone();
            all.extend(results(&prefix, &saved, &[], &[], &[], true));
            all.push(peak_rss(&prefix, "cuzk's side"));
            report.write(&all, &[])?;
            println!("{}", serde_json::to_string_pretty(&report.json(&all, &[]))?);
            return Ok(());
        }

        let t = Instant::now();
        let peer = peer::Peer::load(params, self.workdir)?;
        setup.push(once(
            &prefix,
            "peer_load",
            t.elapsed().as_secs_f64(),
            format!(
                "{}: the parameters made ready for it (SupraSeal: written to a file and \
                 read into its SRS; it reads on in the background into its first proof)",
                peer::NAME
            ),
        ));
        peer_side(&report, &prefix, &peer, circuit, &saved, setup, args)
    }
}

impl Partition<'_> {
    /// What a `--save` run proved, which a `--peer-from` run must match.
    fn run_id(&self) -> String {
        let a = self.args;
        format!(
            "{} partition {} seed {} sectors {:?}",
            self.name, a.partition, a.seed, a.sectors
        )
    }

    fn report(&self, gpu_name: &str) -> Report {
        Report {
            head: json!({
                "revision": self.args.revision,
                "date": common::today(),
                "machine": common::machine(gpu_name, json!({})),
                "command": self.args.command,
            }),
            out: self.args.out.clone(),
        }
    }
}

/// The parameter file of a run in two processes.
const PARAMS_FILE: &str = "peer.params";

const GIB: f64 = (1u64 << 30) as f64;

fn file_gb(path: &Path) -> f64 {
    std::fs::metadata(path).map_or(0.0, |m| m.len() as f64 / 1e9)
}

/// One setup step's result entry.
fn once(prefix: &str, what: &str, seconds: f64, notes: String) -> Value {
    eprintln!("{what}: {seconds:.3} s ({notes})");
    result(
        format!("{prefix}/setup/{what}"),
        &[seconds],
        json!({ "notes": notes }),
    )
}

fn peak_rss(prefix: &str, what: &str) -> Value {
    let gib = peak_rss_gib();
    json!({
        "name": format!("{prefix}/peak_rss"),
        "unit": "GiB",
        "median": gib, "min": gib, "max": gib, "runs": 1,
        "notes": format!("the VmHWM of {what}'s process at its end"),
    })
}

/// cuzk's side of a run: what the peer's side needs and reports.
struct Saved {
    /// [`Partition::run_id`] of the run that saved it.
    run: String,
    gpu: String,
    setup: Vec<Value>,
    rs: Vec<(Scalar, Scalar)>,
    proofs: Vec<Vec<u8>>,
    witness: Vec<f64>,
    prove: Vec<f64>,
    total: Vec<f64>,
}

const SAVED_FILE: &str = "cuzk.json";

impl Saved {
    fn write(&self, dir: &Path) -> Result<()> {
        let doc = json!({
            "run": self.run,
            "gpu": self.gpu,
            "setup": self.setup,
            "rs": self.rs.iter().map(|(r, s)| [hex(&r.to_bytes_le()), hex(&s.to_bytes_le())])
                .collect::<Vec<_>>(),
            "proofs": self.proofs.iter().map(|p| hex(p)).collect::<Vec<_>>(),
            "witness": self.witness,
            "prove": self.prove,
            "total": self.total,
        });
        let path = dir.join(SAVED_FILE);
        std::fs::write(&path, serde_json::to_vec_pretty(&doc)?)
            .with_context(|| format!("writing {}", path.display()))
    }

    fn read(dir: &Path) -> Result<Saved> {
        let path = dir.join(SAVED_FILE);
        let doc: Value = serde_json::from_slice(
            &std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?,
        )
        .with_context(|| format!("parsing {}", path.display()))?;
        let bad = || format!("{} is not what --save writes", path.display());
        let scalar = |v: &Value| -> Result<Scalar> {
            let bytes: [u8; 32] = unhex(v.as_str().with_context(bad)?)
                .with_context(bad)?
                .try_into()
                .ok()
                .with_context(bad)?;
            Option::from(Scalar::from_bytes_le(&bytes)).with_context(bad)
        };
        let floats = |key: &str| -> Result<Vec<f64>> {
            doc[key]
                .as_array()
                .with_context(bad)?
                .iter()
                .map(|v| v.as_f64().with_context(bad))
                .collect()
        };
        let saved = Saved {
            run: doc["run"].as_str().with_context(bad)?.to_owned(),
            gpu: doc["gpu"].as_str().with_context(bad)?.to_owned(),
            setup: doc["setup"].as_array().with_context(bad)?.clone(),
            rs: doc["rs"]
                .as_array()
                .with_context(bad)?
                .iter()
                .map(|pair| Ok((scalar(&pair[0])?, scalar(&pair[1])?)))
                .collect::<Result<_>>()?,
            proofs: doc["proofs"]
                .as_array()
                .with_context(bad)?
                .iter()
                .map(|p| unhex(p.as_str().with_context(bad)?).with_context(bad))
                .collect::<Result<_>>()?,
            witness: floats("witness")?,
            prove: floats("prove")?,
            total: floats("total")?,
        };
        let n = saved.rs.len();
        let lens = [
            saved.proofs.len(),
            saved.witness.len(),
            saved.prove.len(),
            saved.total.len(),
        ];
        if n == 0 || lens.iter().any(|&l| l != n) {
            bail!("{}: runs of unequal or zero count", bad());
        }
        Ok(saved)
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The peer's proofs with cuzk's r and s, compared with cuzk's bytes; the
/// report rewritten after each.
fn peer_side<C: Circuit<Scalar> + Clone + Send>(
    report: &Report,
    prefix: &str,
    peer: &peer::Peer,
    circuit: C,
    saved: &Saved,
    setup: Vec<Value>,
    args: &Args,
) -> Result<()> {
    let (mut theirs, mut synth, mut prove) = (Vec::new(), Vec::new(), Vec::new());
    let mut identical = true;
    let entries = |theirs: &[f64], synth: &[f64], prove: &[f64], identical: bool| {
        let mut v = setup.clone();
        v.extend(results(prefix, saved, theirs, synth, prove, identical));
        v
    };
    let runs = args.peer_runs.min(saved.rs.len());
    for (i, &(r, s)) in saved.rs.iter().take(runs).enumerate() {
        bellperson_log::reset();
        let t = Instant::now();
        let proof = peer.prove(circuit.clone(), r, s)?;
        let all = t.elapsed().as_secs_f64();
        let syn = bellperson_log::synthesized_after(t).unwrap_or(f64::NAN);
        let same = proof_bytes(&proof) == saved.proofs[i];
        identical &= same;
        theirs.push(all);
        synth.push(syn);
        prove.push(all - syn);
        eprintln!(
            "{}: {all:.3} s (synthesis {syn:.3} s), byte-identical: {same}",
            peer::NAME
        );
        report.write(&entries(&theirs, &synth, &prove, identical), &[])?;
    }
    let mut all = entries(&theirs, &synth, &prove, identical);
    all.push(peak_rss(
        prefix,
        if args.peer_from.is_some() {
            "the peer's side"
        } else {
            "both sides"
        },
    ));
    report.write(&all, &[])?;
    println!("{}", serde_json::to_string_pretty(&report.json(&all, &[]))?);
    if !identical {
        bail!("the proofs differ from {}'s", peer::NAME);
    }
    Ok(())
}

/// The result entries of both sides (cuzk's alone while `theirs` is empty).
fn results(
    prefix: &str,
    saved: &Saved,
    theirs: &[f64],
    synth: &[f64],
    their_prove: &[f64],
    identical: bool,
) -> Vec<Value> {
    let mut v = vec![
        result(format!("{prefix}/cuzk/witness"), &saved.witness, json!({})),
        result(
            format!("{prefix}/cuzk/prove"),
            &saved.prove,
            json!({"notes": "cuzk's prover from the witness to the proof (where the parameters \
                              were: device_used_after_warm_up)"}),
        ),
    ];
    if theirs.is_empty() {
        v.push(result(
            format!("{prefix}/cuzk/total"),
            &saved.total,
            json!({}),
        ));
        return v;
    }
    let median = Stat::of(theirs.to_vec()).median;
    v.push(result(
        format!("{prefix}/cuzk/total"),
        &saved.total,
        json!({
            "baseline": {"name": peer::NAME, "median": median, "runs": theirs.len()},
            "ratio_vs_baseline": median / Stat::of(saved.total.clone()).median,
            "byte_identical_to_baseline": identical,
            "notes": "witness + prove; fake parameters, the same for both provers, same r and s",
        }),
    ));
    v.push(result(
        format!("{prefix}/{}/create_proof", peer::NAME),
        theirs,
        json!({"notes": "bellperson::groth16::create_proof, its own synthesis included"}),
    ));
    v.push(result(
        format!("{prefix}/{}/synthesis", peer::NAME),
        synth,
        json!({"notes": "from the call to bellperson's \"starting proof timer\" log line \
                         (null where the line never came)"}),
    ));
    v.push(result(
        format!("{prefix}/{}/prove", peer::NAME),
        their_prove,
        json!({"notes": "create_proof less its synthesis"}),
    ));
    v
}

/// This process's peak resident set (VmHWM), GiB; 0 where unknown.
fn peak_rss_gib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0);
    kb as f64 / (1u64 << 20) as f64
}

/// When bellperson's prover finished synthesizing: it logs "starting proof
/// timer" right after synthesis, in its CPU and its SupraSeal prover alike.
mod bellperson_log {
    use super::*;

    static MARK: Mutex<Option<Instant>> = Mutex::new(None);

    struct Marker;

    impl log::Log for Marker {
        fn enabled(&self, m: &log::Metadata<'_>) -> bool {
            m.target().starts_with("bellperson")
        }

        fn log(&self, record: &log::Record<'_>) {
            if self.enabled(record.metadata())
                && record.args().to_string() == "starting proof timer"
            {
                *MARK.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
            }
        }

        fn flush(&self) {}
    }

    static LOGGER: Marker = Marker;

    pub fn install() {
        if log::set_logger(&LOGGER).is_ok() {
            log::set_max_level(log::LevelFilter::Info);
        }
    }

    pub fn reset() {
        *MARK.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// Seconds from `start` to the mark, if bellperson logged it since.
    pub fn synthesized_after(start: Instant) -> Option<f64> {
        MARK.lock()
            .unwrap_or_else(|e| e.into_inner())
            .and_then(|t| t.checked_duration_since(start))
            .map(|d| d.as_secs_f64())
    }
}
