//! `cuzk demo`: setup, prove and verify a small built-in circuit with
//! per-stage timings, checked byte for byte against bellperson's prover.

use std::time::Instant;

use anyhow::{Result, bail};
use bellperson::groth16::{prepare_verifying_key, verify_proof};
use cuzk_synth::circuits::CircuitSpec;
use cuzk_synth::{Pce, Witness};

use crate::Backend;
use crate::prove::{make_prover, proof_bytes, randomness};
use crate::setup::setup;

pub(crate) fn demo(circuit: &CircuitSpec, backend: Backend) -> Result<()> {
    println!("cuzk demo: {circuit}");
    let prover = make_prover(backend)?;
    let t = Instant::now();
    let params = setup(circuit, Some(1))?;
    println!(
        "  setup        {:>10.3} ms  (bellperson parameter generation)",
        ms(t)
    );

    let t = Instant::now();
    let pce = Pce::record(circuit.build(0))?;
    println!(
        "  record PCE   {:>10.3} ms  ({} constraints, domain 2^{}, {} inputs, {} aux; nnz A/B/C {}/{}/{})",
        ms(t),
        pce.num_constraints(),
        pce.domain_log2(),
        pce.num_inputs,
        pce.num_aux,
        pce.nnz()[0],
        pce.nnz()[1],
        pce.nnz()[2]
    );

    let (r, s) = randomness(Some(2));
    let out = cuzk_engine::prove_partition(prover.as_ref(), &pce, circuit.build(1), &params, r, s)?;
    print!("{}", out.timings);
    println!(
        "  prove total  {:>10.3} ms  ({} backend)",
        out.timings.total().as_secs_f64() * 1e3,
        prover.name()
    );

    let witness = Witness::synthesize(circuit.build(1))?;
    let t = Instant::now();
    let pvk = prepare_verifying_key(&params.vk);
    let ok = verify_proof(&pvk, &out.proof, witness.public_inputs())?;
    println!("  verify       {:>10.3} ms", ms(t));

    let t = Instant::now();
    let theirs = bellperson::groth16::create_proof(circuit.build(1), &params, r, s)?;
    let same = proof_bytes(&theirs) == proof_bytes(&out.proof);
    println!(
        "  bellperson   {:>10.3} ms  (its create_proof, same r and s)",
        ms(t)
    );

    println!("proof: {}", hex(&proof_bytes(&out.proof)));
    println!("verified: {}", if ok { "yes" } else { "NO" });
    println!(
        "byte-identical to bellperson: {}",
        if same { "yes" } else { "NO" }
    );
    if !ok || !same {
        bail!("the demo proof failed its checks");
    }
    Ok(())
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
