//! `cuzk synthetic-c1`, `synthetic-post`, `synthetic-snap`: Filecoin inputs
//! generated without a sealed sector, written for `cuzk prove`.

use anyhow::Result;

use crate::{SyntheticC1Args, SyntheticPostArgs, SyntheticSnapArgs};

/// `cuzk synthetic-c1`.
pub(crate) fn synthetic_c1(args: &SyntheticC1Args) -> Result<()> {
    let proof: cuzk_filecoin::SealProof = args.seal_proof.parse()?;
    let s = cuzk_filecoin::synthetic::generate_json(proof, args.seed)?;
    cuzk_groth16_cuda::write_atomically(&args.out, |w| std::io::Write::write_all(w, &s.json))?;
    println!(
        "wrote a synthetic {proof} C1 (seed {}) to {} in {:.3} s: {} partitions, {} challenges, \
         {} bytes",
        args.seed,
        args.out.display(),
        s.seconds,
        s.partitions,
        s.challenges,
        s.json.len()
    );
    println!("prover_id  {}", hex::encode(s.prover_id));
    println!("sector_id  {}", s.sector_id);
    println!("comm_r     {}", hex::encode(s.comm_r));
    println!("comm_d     {}", hex::encode(s.comm_d));
    println!("ticket     {}", hex::encode(s.ticket));
    println!("seed       {}", hex::encode(s.seed));
    Ok(())
}

/// `cuzk synthetic-post`.
pub(crate) fn synthetic_post(args: &SyntheticPostArgs) -> Result<()> {
    let proof: cuzk_filecoin::PostProof = args.post_proof.parse()?;
    let s = cuzk_filecoin::synthetic::post_json(proof, args.sectors, args.seed)?;
    cuzk_groth16_cuda::write_atomically(&args.out, |w| std::io::Write::write_all(w, &s.json))?;
    println!(
        "wrote a synthetic {proof} request over {} sectors (seed {}) to {} in {:.3} s, {} bytes",
        s.replicas.len(),
        args.seed,
        args.out.display(),
        s.seconds,
        s.json.len()
    );
    println!("prover_id   {}", hex::encode(s.prover_id));
    println!("randomness  {}", hex::encode(s.randomness));
    Ok(())
}

/// `cuzk synthetic-snap`.
pub(crate) fn synthetic_snap(args: &SyntheticSnapArgs) -> Result<()> {
    let proof: cuzk_filecoin::UpdateProof = args.update_proof.parse()?;
    let s = cuzk_filecoin::synthetic::update_json(proof, args.seed)?;
    cuzk_groth16_cuda::write_atomically(&args.out, |w| std::io::Write::write_all(w, &s.json))?;
    println!(
        "wrote a synthetic {proof} SnapDeals request (seed {}) to {} in {:.3} s, {} bytes",
        args.seed,
        args.out.display(),
        s.seconds,
        s.json.len()
    );
    println!("comm_r_old  {}", hex::encode(s.comm_r_old));
    println!("comm_r_new  {}", hex::encode(s.comm_r_new));
    println!("comm_d_new  {}", hex::encode(s.comm_d_new));
    Ok(())
}
