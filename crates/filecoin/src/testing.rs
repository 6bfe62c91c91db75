//! Real inputs for tests and benchmarks: seals a small sector with
//! filecoin-proofs' own pre-commit and commit phase 1, so a C1 output (and
//! a replica for PoSt) exists without any outside data, and updates a
//! sealed CC sector with new data (`encode_into`) for the vanilla proofs of
//! SnapDeals.
//!
//! filecoin-proofs writes its graph parent cache under
//! `FIL_PROOFS_PARENT_CACHE`; point it (and `FIL_PROOFS_PARAMETER_CACHE`)
//! at a test directory before the first call into filecoin-proofs.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use filecoin_proofs::{
    PaddedBytesAmount, PartitionProof, PieceInfo, SealCommitPhase1Output, SealPreCommitOutput,
    SectorUpdateConfig, TreeRHasher, UnpaddedBytesAmount, add_piece, encode_into,
    generate_partition_proofs, generate_piece_commitment, seal_commit_phase1,
    seal_pre_commit_phase1, seal_pre_commit_phase2,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_core::sector::SectorId;

use crate::error::{FilecoinError, Result};
use crate::sector::{SealProof, UpdateProof};
use crate::update::UpdateInput;
use crate::vanilla::VanillaEncoding;

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

    /// Whether filecoin-proofs' `verify_seal` accepts `c2` (C2 proof bytes)
    /// for this sector.
    pub fn verify_seal(&self, c2: &[u8]) -> Result<bool> {
        filecoin_proofs::verify_seal::<Tree>(
            &self.proof.config()?,
            self.pre_commit.comm_r,
            self.pre_commit.comm_d,
            self.prover_id,
            self.sector_id,
            self.ticket,
            self.seed,
            c2,
        )
        .map_err(FilecoinError::proofs("verify_seal"))
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
    seal_sector(proof, dir, seed, false)
}

/// Seals one committed-capacity (CC) sector under `dir`: as [`seal`], but
/// the data is all zeros, as for a sector that SnapDeals later fills
/// ([`update`]).
pub fn seal_cc<Tree: 'static + MerkleTreeTrait>(
    proof: SealProof,
    dir: &Path,
    seed: u64,
) -> Result<SealedSector<Tree>> {
    seal_sector(proof, dir, seed, true)
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> FilecoinError {
    let path = path.to_owned();
    move |source| FilecoinError::Io { path, source }
}

/// Writes `data` as one piece filling a sector: `<name>` (the raw piece)
/// and `<name>-staged` (fr32-padded, as pre-commit and `encode_into` read
/// it). Returns the piece's info and the staged file.
fn stage_piece(dir: &Path, name: &str, data: &[u8]) -> Result<(PieceInfo, PathBuf)> {
    let unpadded = UnpaddedBytesAmount(data.len() as u64);
    let piece = dir.join(name);
    File::create(&piece)
        .and_then(|mut f| f.write_all(data))
        .map_err(io_error(&piece))?;
    let open = |p: &Path| File::open(p).map_err(io_error(p));
    let piece_info: PieceInfo = generate_piece_commitment(open(&piece)?, unpadded)
        .map_err(FilecoinError::proofs("piece commitment"))?;
    let staged = dir.join(format!("{name}-staged"));
    let staged_file = File::create(&staged).map_err(io_error(&staged))?;
    add_piece(open(&piece)?, staged_file, unpadded, &[])
        .map_err(FilecoinError::proofs("add piece"))?;
    Ok((piece_info, staged))
}

fn seal_sector<Tree: 'static + MerkleTreeTrait>(
    proof: SealProof,
    dir: &Path,
    seed: u64,
    cc: bool,
) -> Result<SealedSector<Tree>> {
    let config = proof.config()?;
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let cache = dir.join("cache");
    fs::create_dir_all(&cache).map_err(io_error(&cache))?;
    let unpadded = UnpaddedBytesAmount::from(PaddedBytesAmount(proof.sector_size.bytes()));
    // Drawn for CC too, so the ids below follow from `seed` the same way.
    let mut data: Vec<u8> = (0..u64::from(unpadded)).map(|_| rng.r#gen()).collect();
    if cc {
        data.fill(0);
    }
    let (piece_info, staged) = stage_piece(dir, "piece", &data)?;
    let replica = dir.join("sealed");
    File::create(&replica).map_err(io_error(&replica))?;

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

/// A sector whose CC replica was updated with new data (SnapDeals), and
/// the vanilla proofs of the update.
pub struct UpdatedSector<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>> {
    pub proof: UpdateProof,
    pub comm_r_old: [u8; 32],
    pub comm_r_new: [u8; 32],
    pub comm_d_new: [u8; 32],
    /// `generate_partition_proofs`' output, in partition order.
    pub vanilla_proofs: Vec<PartitionProof<Tree>>,
    /// The updated replica and its cache directory.
    pub replica: PathBuf,
    pub cache: PathBuf,
}

// By hand: storage-proofs-update's proofs have no `Debug`.
impl<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>> std::fmt::Debug
    for UpdatedSector<Tree>
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpdatedSector")
            .field("proof", &self.proof)
            .field("comm_r_old", &self.comm_r_old)
            .field("comm_r_new", &self.comm_r_new)
            .field("comm_d_new", &self.comm_d_new)
            .field("partitions", &self.vanilla_proofs.len())
            .field("replica", &self.replica)
            .field("cache", &self.cache)
            .finish()
    }
}

impl<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>> UpdatedSector<Tree> {
    /// The update as cuzk's SnapDeals request JSON
    /// ([`crate::update::UpdateRequest`]), vanilla proofs as JSON.
    pub fn request_json(&self) -> Result<Vec<u8>> {
        self.request_json_as(VanillaEncoding::Json)
    }

    /// The same, with the vanilla proofs in `encoding`.
    pub fn request_json_as(&self, encoding: VanillaEncoding) -> Result<Vec<u8>> {
        UpdateInput::request_json(
            self.proof,
            self.comm_r_old,
            self.comm_r_new,
            self.comm_d_new,
            &self.vanilla_proofs,
            encoding,
        )
    }
}

/// Updates a sealed (CC) sector with a piece of random (seeded) data under
/// `dir`, as a SnapDeals prover does: filecoin-proofs' `encode_into` makes
/// the new replica, `generate_partition_proofs` the vanilla proofs that
/// the update proof proves.
pub fn update<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    sealed: &SealedSector<Tree>,
    dir: &Path,
    seed: u64,
) -> Result<UpdatedSector<Tree>> {
    let proof = UpdateProof::new(sealed.proof.sector_size)?;
    let config = SectorUpdateConfig::from_porep_config(&proof.config()?);
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let unpadded = UnpaddedBytesAmount::from(PaddedBytesAmount(proof.sector_size().bytes()));
    let data: Vec<u8> = (0..u64::from(unpadded)).map(|_| rng.r#gen()).collect();
    let (piece_info, staged) = stage_piece(dir, "update-piece", &data)?;
    let cache = dir.join("update-cache");
    fs::create_dir_all(&cache).map_err(io_error(&cache))?;
    // encode_into maps the new replica writable: it must exist at full size.
    let replica = dir.join("updated");
    File::create(&replica)
        .and_then(|f| f.set_len(proof.sector_size().bytes()))
        .map_err(io_error(&replica))?;
    let encoded = encode_into::<Tree>(
        &config,
        &replica,
        &cache,
        &sealed.replica,
        &sealed.cache,
        &staged,
        &[piece_info],
    )
    .map_err(FilecoinError::proofs("SnapDeals encode_into"))?;
    let comm_r_old = sealed.pre_commit.comm_r;
    let vanilla_proofs = generate_partition_proofs::<Tree>(
        config,
        comm_r_old,
        encoded.comm_r_new,
        encoded.comm_d_new,
        &sealed.replica,
        &sealed.cache,
        &replica,
        &cache,
    )
    .map_err(FilecoinError::proofs("SnapDeals generate_partition_proofs"))?;
    Ok(UpdatedSector {
        proof,
        comm_r_old,
        comm_r_new: encoded.comm_r_new,
        comm_d_new: encoded.comm_d_new,
        vanilla_proofs,
        replica,
        cache,
    })
}
