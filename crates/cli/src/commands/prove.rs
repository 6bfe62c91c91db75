//! `cuzk prove --daemon`: one job through the daemon.

use std::path::PathBuf;

use anyhow::{Result, bail};
use cuzk_synth::circuits::CircuitSpec;
use serde_json::json;

use super::{PriorityArg, Verifier, params_spec, proof_bar, runtime, write_file};
use crate::client;
use crate::daemon::Address;
use crate::daemon::request::priority_to_proto;
use crate::proto;

/// What `cuzk prove` asks of a daemon.
#[derive(Debug)]
pub struct RemoteProve {
    pub address: Address,
    pub circuit: CircuitSpec,
    pub witness_seed: u64,
    /// Partitions, with witness seeds `witness_seed + i`.
    pub partitions: u32,
    pub params: Option<PathBuf>,
    pub params_set: Option<String>,
    pub out: PathBuf,
    pub rs_seed: Option<u64>,
    pub priority: PriorityArg,
    pub no_verify: bool,
    pub json: bool,
}

/// Proves through the daemon, verifies with the local parameter file when
/// there is one, and writes the proofs (concatenated, partition order).
pub fn prove_remote(p: RemoteProve) -> Result<()> {
    if p.partitions == 0 {
        bail!("--partitions must be at least 1");
    }
    let seeds: Vec<u64> = (0..u64::from(p.partitions))
        .map(|i| p.witness_seed + i)
        .collect();
    let request = proto::ProveRequest {
        circuit: p.circuit.to_string(),
        witness_seeds: seeds.clone(),
        params: Some(params_spec(p.params.as_deref(), p.params_set.as_deref())?),
        priority: priority_to_proto(p.priority.into()) as i32,
        randomness: p.rs_seed.map(proto::prove_request::Randomness::RsSeed),
        filecoin: None,
    };
    let finished = runtime()?.block_on(async {
        let mut c = client::connect(&p.address).await?;
        let stream = c
            .prove(request)
            .await
            .map_err(|s| client::call_error("the daemon refused the request", s))?
            .into_inner();
        let bar = proof_bar(u64::from(p.partitions), p.json);
        bar.set_message(p.circuit.to_string());
        let done = client::follow(stream, |_, progress| {
            bar.set_position(u64::from(progress.proved));
        })
        .await;
        bar.finish_and_clear();
        done
    })?;
    if finished.proofs.len() != seeds.len() {
        bail!(
            "the daemon sent {} proofs for {} partitions",
            finished.proofs.len(),
            seeds.len()
        );
    }
    let mut verified = false;
    if !p.no_verify {
        match &p.params {
            Some(path) => {
                if let Some(v) = Verifier::from_file(path, &p.circuit)? {
                    for (bytes, &seed) in finished.proofs.iter().zip(&seeds) {
                        v.check(bytes, seed).map_err(|e| {
                            e.context(format!(
                                "job {}: nothing was written to {}",
                                finished.job_id,
                                p.out.display()
                            ))
                        })?;
                    }
                    verified = true;
                }
            }
            None => eprintln!(
                "note: not verified (the parameter set is named, not a local file: give --params \
                 to verify)"
            ),
        }
    }
    let all: Vec<u8> = finished.proofs.concat();
    write_file(&p.out, &all)?;
    if p.json {
        println!(
            "{}",
            json!({
                "job_id": finished.job_id,
                "circuit": p.circuit.to_string(),
                "partitions": p.partitions,
                "out": p.out,
                "seconds": finished.seconds,
                "verified": verified,
            })
        );
    } else {
        println!(
            "wrote {} proof{} of {} to {} (daemon job {}, {:.3} s{})",
            p.partitions,
            if p.partitions == 1 { "" } else { "s" },
            p.circuit,
            p.out.display(),
            finished.job_id,
            finished.seconds,
            if verified { ", verified" } else { "" }
        );
    }
    Ok(())
}
