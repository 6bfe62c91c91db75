//! Real inputs for tests and benchmarks: seals a small sector with
//! filecoin-proofs' own pre-commit and commit phase 1, so a C1 output (and
//! a replica for PoSt and SnapDeals) exists without any outside data.
//!
//! filecoin-proofs writes its graph parent cache under
//! `FIL_PROOFS_PARENT_CACHE`; point it (and `FIL_PROOFS_PARAMETER_CACHE`)
//! at a test directory before the first call into filecoin-proofs.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use filecoin_proofs::{
    PaddedBytesAmount, PieceInfo, SealCommitPhase1Output, SealPreCommitOutput, UnpaddedBytesAmount,
    add_piece, generate_piece_commitment, seal_commit_phase1, seal_pre_commit_phase1,
    seal_pre_commit_phase2,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_core::sector::SectorId;

use crate::error::{FilecoinError, Result};
use crate::sector::SealProof;

/// A sealed sector and everything its proofs need.
#[derive(Debug)]
pub struct SealedSector<Tree: 'static + MerkleTreeTrait> {
    pub proof: SealProof,
    pub prover_id: [u8; 32],
    pub sector_id: SectorId,
    pub ticket: [u8; 32],
    pub seed: [u8; 32],
    pub pre_commit: SealPreCommitOutput,
    /// The commit phase 1 output: what C2 proves.
    pub c1: SealCommitPhase1Output<Tree>,
    /// The sealed replica and its cache directory (trees, aux files).
    pub replica: PathBuf,
    pub cache: PathBuf,
}

impl<Tree: 'static + MerkleTreeTrait> SealedSector<Tree> {
    /// The C1 output as JSON, as filecoin-proofs serializes it.
    pub fn c1_json(&self) -> Result<Vec<u8>> {
        serde_json::to_vec(&self.c1).map_err(|e| FilecoinError::BadInput {
            what: "C1 output",
            detail: e.to_string(),
        })
    }
}

/// Seals one sector of random (seeded) data under `dir` with `proof`'s
/// configuration: piece, pre-commit phases 1 and 2, commit phase 1. Every
/// id and every byte of data follows from `seed`.
pub fn seal<Tree: 'static + MerkleTreeTrait>(
    proof: SealProof,
    dir: &Path,
    seed: u64,
) -> Result<SealedSector<Tree>> {
    let config = proof.config()?;
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| FilecoinError::Io { path, source }
    };
    let cache = dir.join("cache");
    fs::create_dir_all(&cache).map_err(io(&cache))?;
    let unpadded = UnpaddedBytesAmount::from(PaddedBytesAmount(proof.sector_size.bytes()));
    let data: Vec<u8> = (0..u64::from(unpadded)).map(|_| rng.r#gen()).collect();
    let piece = dir.join("piece");
    File::create(&piece)
        .and_then(|mut f| f.write_all(&data))
        .map_err(io(&piece))?;
    let open = |p: &Path| File::open(p).map_err(io(p));
    let piece_info: PieceInfo = generate_piece_commitment(open(&piece)?, unpadded)
        .map_err(FilecoinError::proofs("piece commitment"))?;
    let staged = dir.join("staged");
    let staged_file = File::create(&staged).map_err(io(&staged))?;
    add_piece(open(&piece)?, staged_file, unpadded, &[])
        .map_err(FilecoinError::proofs("add piece"))?;
    let replica = dir.join("sealed");
    File::create(&replica).map_err(io(&replica))?;

    // Field elements need their top bits clear: keep ids below 2^254.
    let mut prover_id: [u8; 32] = rng.r#gen();
    prover_id[31] &= 0x3f;
    let sector_id = SectorId::from(rng.r#gen::<u64>());
    let ticket: [u8; 32] = rng.r#gen();
    let mut seed_bytes: [u8; 32] = rng.r#gen();
    seed_bytes[0] |= 1;
    let pieces = vec![piece_info];
    let p1 = seal_pre_commit_phase1::<_, _, _, Tree>(
        &config, &cache, &staged, &replica, prover_id, sector_id, ticket, &pieces,
    )
    .map_err(FilecoinError::proofs("seal pre-commit phase 1"))?;
    let pre_commit = seal_pre_commit_phase2(&config, p1, &cache, &replica)
        .map_err(FilecoinError::proofs("seal pre-commit phase 2"))?;
    let c1 = seal_commit_phase1::<&Path, Tree>(
        &config,
        &cache,
        &replica,
        prover_id,
        sector_id,
        ticket,
        seed_bytes,
        pre_commit.clone(),
        &pieces,
    )
    .map_err(FilecoinError::proofs("seal commit phase 1"))?;
    Ok(SealedSector {
        proof,
        prover_id,
        sector_id,
        ticket,
        seed: seed_bytes,
        pre_commit,
        c1,
        replica,
        cache,
    })
}
