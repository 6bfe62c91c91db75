//! `cuzk prove` and `cuzk verify` of a built-in circuit in this process,
//! and the prover a `--backend` names.

use std::path::Path;

use anyhow::{Context, Result, bail};
use bellperson::groth16::{Proof, prepare_verifying_key, verify_proof};
use blstrs::Scalar;
use cuzk_groth16_cuda::{Bls12, Prover};
use cuzk_synth::{Pce, Witness};
use ff::Field;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

use crate::{Backend, Instance};

/// The prover of `backend`, chosen by the engine as an engine with that
/// backend chooses it.
pub(crate) fn make_prover(backend: Backend) -> Result<std::sync::Arc<dyn Prover>> {
    let config = cuzk_engine::EngineConfig {
        backend: match backend {
            Backend::Auto => cuzk_engine::Backend::Auto,
            Backend::Gpu => cuzk_engine::Backend::Gpu,
            Backend::Cpu => cuzk_engine::Backend::Cpu,
        },
        ..cuzk_engine::EngineConfig::default()
    };
    cuzk_engine::open_prover(&config).map_err(|e| match backend {
        Backend::Gpu => anyhow::anyhow!("{e}; use --backend cpu"),
        _ => e.into(),
    })
}

pub(crate) fn randomness(seed: Option<u64>) -> (Scalar, Scalar) {
    let mut rng = match seed {
        Some(s) => ChaCha20Rng::seed_from_u64(s),
        None => ChaCha20Rng::from_entropy(),
    };
    (Scalar::random(&mut rng), Scalar::random(&mut rng))
}

pub(crate) fn proof_bytes(proof: &Proof<Bls12>) -> Vec<u8> {
    let mut v = Vec::with_capacity(192);
    // Writing into a Vec cannot fail.
    let _ = proof.write(&mut v);
    v
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn prove_cmd(
    instance: &Instance,
    params_path: &Path,
    out: &Path,
    rs_seed: Option<u64>,
    no_verify: bool,
    backend: Backend,
    trusted_params: bool,
    (timeline, json): (Option<&Path>, bool),
) -> Result<()> {
    let circuit = &instance.circuit;
    let params = cuzk_groth16_cuda::read_params(params_path, !trusted_params)?;
    let fake = cuzk_groth16_cuda::fake::is_fake(&params.vk);
    if fake {
        eprintln!(
            "WARNING: {} holds FAKE parameters (cuzk setup --fake): the proof will be made for \
             timing but it can NEVER verify",
            params_path.display()
        );
    }
    let pce = Pce::record(circuit.build(0)).with_context(|| format!("recording {circuit}"))?;
    let (r, s) = randomness(rs_seed);
    let prover = make_prover(backend)?;
    let output = cuzk_engine::prove_partition(
        prover.as_ref(),
        &pce,
        circuit.build(instance.witness_seed),
        &params,
        r,
        s,
    )
    .with_context(|| format!("proving {circuit}"))?;
    if !no_verify && !fake {
        let inputs = Witness::synthesize(circuit.build(instance.witness_seed))?;
        let pvk = prepare_verifying_key(&params.vk);
        if !verify_proof(&pvk, &output.proof, inputs.public_inputs())? {
            bail!(
                "the proof does not verify against {}: the parameters were made for another \
                 circuit of the same shape; nothing was written",
                params_path.display()
            );
        }
    }
    let bytes = proof_bytes(&output.proof);
    cuzk_groth16_cuda::write_atomically(out, |w| std::io::Write::write_all(w, &bytes))?;
    if let Some(path) = timeline {
        cuzk_cli::commands::write_trace(
            path,
            &cuzk_cli::commands::stage_timeline(&output.timings),
        )?;
    }
    if json {
        let stages: serde_json::Map<String, serde_json::Value> = output
            .timings
            .0
            .iter()
            .map(|(stage, d)| (stage.to_string(), d.as_secs_f64().into()))
            .collect();
        println!(
            "{}",
            serde_json::json!({
                "circuit": circuit.to_string(),
                "out": out,
                "backend": prover.name(),
                "seconds": output.timings.total().as_secs_f64(),
                "stages": stages,
                "verified": !no_verify && !fake,
            })
        );
        return Ok(());
    }
    println!(
        "wrote {}proof of {circuit} to {} ({} backend, {:.2?})",
        if fake {
            "UNVERIFIABLE (fake parameters) "
        } else {
            ""
        },
        out.display(),
        prover.name(),
        output.timings.total()
    );
    Ok(())
}

fn read_proof(path: &Path) -> Result<Proof<Bls12>> {
    let bytes = std::fs::read(path)
        .with_context(|| format!("cannot read proof file {}", path.display()))?;
    if bytes.len() != 192 {
        bail!(
            "proof file {} has {} bytes; a Groth16 proof over BLS12-381 has 192",
            path.display(),
            bytes.len()
        );
    }
    Proof::read(&bytes[..]).with_context(|| {
        format!(
            "proof file {} does not hold valid curve points",
            path.display()
        )
    })
}

pub(crate) fn verify_cmd(instance: &Instance, params_path: &Path, proof_path: &Path) -> Result<()> {
    let vk = cuzk_groth16_cuda::read_verifying_key(params_path)?;
    if cuzk_groth16_cuda::fake::is_fake(&vk) {
        bail!(
            "{} holds FAKE parameters (cuzk setup --fake): no proof can verify against them",
            params_path.display()
        );
    }
    let proof = read_proof(proof_path)?;
    let witness = Witness::synthesize(instance.circuit.build(instance.witness_seed))?;
    let inputs = witness.public_inputs();
    if inputs.len() + 1 != vk.ic.len() {
        bail!(
            "the verifying key in {} expects {} public inputs but {} has {}: these parameters are \
             for another circuit",
            params_path.display(),
            vk.ic.len().saturating_sub(1),
            instance.circuit,
            inputs.len()
        );
    }
    let pvk = prepare_verifying_key(&vk);
    if verify_proof(&pvk, &proof, inputs)? {
        println!("proof {} verifies", proof_path.display());
        Ok(())
    } else {
        bail!(
            "proof {} does NOT verify for {} with witness seed {}",
            proof_path.display(),
            instance.circuit,
            instance.witness_seed
        )
    }
}
