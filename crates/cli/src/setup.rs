//! `cuzk setup`: Groth16 parameters for a built-in circuit (bellperson on
//! the CPU, GPU kernels, or fake ones for timing) or for a Filecoin circuit.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use bellperson::groth16::Parameters;
use cuzk_groth16_cuda::Bls12;
use cuzk_synth::Pce;
use cuzk_synth::circuits::CircuitSpec;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

use crate::FilecoinCircuit;
use crate::pce::peak_rss;

/// `cuzk setup`: a built-in `circuit`'s parameters written to the file
/// `out`, or without one the Filecoin circuit `filecoin` names.
pub(crate) fn setup_cmd(
    circuit: Option<CircuitSpec>,
    filecoin: &FilecoinCircuit,
    fake: bool,
    gpu: bool,
    seed: Option<u64>,
    out: &Path,
    pce_dir: Option<&Path>,
) -> Result<()> {
    let Some(circuit) = circuit else {
        return setup_filecoin(filecoin, fake, gpu, seed, out, pce_dir);
    };
    if pce_dir.is_some() {
        bail!("--pce-dir is for Filecoin circuits (--seal-proof, --post-proof, --update-proof)");
    }
    let start = Instant::now();
    if gpu {
        return setup_gpu(&circuit, seed, out);
    }
    if fake {
        let pce = Pce::record(circuit.build(0))?;
        cuzk_groth16_cuda::fake::write_fake_params(out, &pce, seed.unwrap_or(0))?;
        println!(
            "wrote FAKE parameters for {circuit} to {} ({:.2?}): for timing only, proofs \
             made with them never verify",
            out.display(),
            start.elapsed()
        );
        return Ok(());
    }
    let params = setup(&circuit, seed)?;
    cuzk_groth16_cuda::write_params(out, &params)?;
    println!(
        "wrote parameters for {circuit} to {} ({:.2?})",
        out.display(),
        start.elapsed()
    );
    Ok(())
}

/// `cuzk setup --seal-proof|--post-proof|--update-proof NAME --out DIR`.
fn setup_filecoin(
    which: &FilecoinCircuit,
    fake: bool,
    gpu: bool,
    seed: Option<u64>,
    dir: &Path,
    pce_dir: Option<&Path>,
) -> Result<()> {
    use cuzk_filecoin::params::Setup;
    let start = Instant::now();
    if gpu {
        // Before the circuit is recorded, which takes minutes at full size.
        cuzk_groth16_cuda::cuda::Gpu::get(0)
            .context("cuzk setup --gpu needs a CUDA GPU; leave out --gpu to generate on the CPU")?;
    }
    let (files, sector_size) = match (&which.seal_proof, &which.post_proof, &which.update_proof) {
        (Some(n), _, _) => {
            let p: cuzk_filecoin::SealProof = n.parse()?;
            (
                cuzk_filecoin::porep::param_files_for(p, dir)?,
                p.sector_size,
            )
        }
        (_, Some(n), _) => {
            let p: cuzk_filecoin::PostProof = n.parse()?;
            (cuzk_filecoin::post::param_files_for(p, dir)?, p.sector_size)
        }
        (_, _, Some(n)) => {
            let p: cuzk_filecoin::UpdateProof = n.parse()?;
            (
                cuzk_filecoin::update::param_files_for(p, dir)?,
                p.sector_size(),
            )
        }
        _ => bail!("give --circuit, --seal-proof, --post-proof or --update-proof"),
    };
    let shape = cuzk_filecoin::shape_id(&files);
    let on_disk = pce_dir
        .map(|d| d.join(cuzk_engine::pce_file::file_name(&shape)))
        .filter(|p| p.is_file());
    let pce = match on_disk {
        Some(path) => {
            let t = Instant::now();
            let pce = cuzk_engine::pce_file::read_pce(&path, &shape, None)?;
            println!(
                "read the PCE from {} in {:.3} s",
                path.display(),
                t.elapsed().as_secs_f64()
            );
            pce
        }
        None => {
            let blank = match (&which.seal_proof, &which.post_proof) {
                (Some(n), _) => cuzk_filecoin::porep::blank_pce(n.parse()?),
                (_, Some(n)) => cuzk_filecoin::post::blank_pce(n.parse()?),
                _ => cuzk_filecoin::update::blank_pce(
                    which.update_proof.as_deref().unwrap_or_default().parse()?,
                ),
            }?;
            println!(
                "recorded the blank circuit in {:.3} s ({} constraints)",
                blank.record_seconds,
                blank.pce.num_constraints()
            );
            if let Some(d) = pce_dir {
                let t = Instant::now();
                let path = blank.write_to(d)?;
                println!(
                    "wrote the PCE to {} in {:.3} s",
                    path.display(),
                    t.elapsed().as_secs_f64()
                );
            }
            blank.pce
        }
    };
    let how = match (fake, gpu) {
        (true, _) => Setup::Fake,
        (_, true) => Setup::Gpu(0),
        _ => Setup::Cpu,
    };
    let done = cuzk_filecoin::params::setup_from_pce(&files, &pce, sector_size.bytes(), seed, how)?;
    println!(
        "wrote {}parameters for {} to {} ({:.2} GB) in {:.3} s on {}; {:.3} s in all{}",
        if fake { "FAKE " } else { "" },
        files.id,
        files.params.display(),
        done.params_bytes as f64 / 1e9,
        done.seconds,
        done.backend,
        start.elapsed().as_secs_f64(),
        if fake {
            ": for timing only, proofs made with them never verify"
        } else {
            ""
        }
    );
    if let Some(peak) = peak_rss() {
        println!("peak resident memory: {peak}");
    }
    Ok(())
}

pub(crate) fn setup(circuit: &CircuitSpec, seed: Option<u64>) -> Result<Parameters<Bls12>> {
    let mut rng = match seed {
        Some(s) => ChaCha20Rng::seed_from_u64(s),
        None => ChaCha20Rng::from_entropy(),
    };
    bellperson::groth16::generate_random_parameters::<Bls12, _, _>(circuit.build(0), &mut rng)
        .with_context(|| format!("generating parameters for {circuit}"))
}

/// `cuzk setup --gpu`: the toxic waste drawn as bellperson's
/// `generate_random_parameters` draws it from the same RNG, so a `--seed`
/// gives the file `cuzk setup` (bellperson) writes.
fn setup_gpu(circuit: &CircuitSpec, seed: Option<u64>, out: &Path) -> Result<()> {
    use cuzk_groth16_cuda::setup::{SetupOptions, ToxicWaste, generate_parameters_file};
    let start = Instant::now();
    // Before the circuit is recorded, which takes long at large sizes.
    cuzk_groth16_cuda::cuda::Gpu::get(0).context(
        "cuzk setup --gpu needs a CUDA GPU; leave out --gpu to use bellperson on the CPU",
    )?;
    let waste = match seed {
        Some(s) => ToxicWaste::from_seed(s),
        None => ToxicWaste::random(&mut ChaCha20Rng::from_entropy()),
    };
    let pce = Pce::record(circuit.build(0)).with_context(|| format!("recording {circuit}"))?;
    let recorded = start.elapsed();
    let report =
        generate_parameters_file(out, &pce, &waste, &SetupOptions::gpu(0)).with_context(|| {
            format!(
                "generating parameters for {circuit} on the GPU (leave out --gpu to generate \
                 them with bellperson on the CPU)"
            )
        })?;
    let points: usize = report.sections.iter().map(|s| s.points).sum();
    println!(
        "wrote parameters for {circuit} to {} ({:.2?}: circuit recorded in {recorded:.2?}, QAP \
         {:.2} s, {points} points on {} with GPU kernels {:.2} s, {:.2} GB written)",
        out.display(),
        start.elapsed(),
        report.qap_s,
        report.backend,
        report.kernel_s,
        report.bytes as f64 / 1e9
    );
    Ok(())
}
