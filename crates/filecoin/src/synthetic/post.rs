//! Synthetic WinningPoSt and WindowPoSt vanilla proofs over sectors that
//! were never sealed.

use std::time::Instant;

use filecoin_hashers::{HashFunction, Hasher};
use filecoin_proofs::FallbackPoStSectorProof;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use serde_json::Value;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_core::sector::SectorId;
use storage_proofs_post::fallback;

use crate::error::{FilecoinError, Result};
use crate::sector::{PostKind, PostProof};

use super::sparse_tree::{SparseTree, tree_shape};
use super::{Filler, commitment, field_bytes};

/// Vanilla PoSt proofs of sectors that were never sealed, and what the
/// verifiers need beside them.
#[derive(Debug)]
pub struct SyntheticPost<Tree: 'static + MerkleTreeTrait> {
    pub proof: PostProof,
    pub prover_id: [u8; 32],
    pub randomness: [u8; 32],
    /// Every sector's id and comm_r (the verifiers' replica infos).
    pub replicas: Vec<(u64, [u8; 32])>,
    /// One per sector, as filecoin-proofs' `generate_single_vanilla_proof`
    /// makes them.
    pub vanilla: Vec<FallbackPoStSectorProof<Tree>>,
    pub seconds: f64,
}

/// [`SyntheticPost`] as a PoSt request file ([`crate::post::PostRequest`]
/// JSON, plus `replicas`: `[{"sector_id", "comm_r"}]` for the verifiers).
#[derive(Debug, Clone)]
pub struct SyntheticPostJson {
    pub proof: PostProof,
    pub prover_id: [u8; 32],
    pub randomness: [u8; 32],
    pub replicas: Vec<(u64, [u8; 32])>,
    pub json: Vec<u8>,
    pub seconds: f64,
}

/// Generates a WinningPoSt or WindowPoSt request over `sectors` sectors
/// from `seed` (see [`post_vanilla`]) as JSON.
pub fn post_json(proof: PostProof, sectors: usize, seed: u64) -> Result<SyntheticPostJson> {
    with_tree!(proof.sector_size, post_json_for(proof, sectors, seed))
}

fn post_json_for<Tree: 'static + MerkleTreeTrait>(
    proof: PostProof,
    sectors: usize,
    seed: u64,
) -> Result<SyntheticPostJson> {
    let s = post_vanilla::<Tree>(proof, sectors, seed)?;
    let json = crate::post::PostInput::request_json(
        proof,
        s.randomness,
        s.prover_id,
        &s.vanilla,
        crate::vanilla::VanillaEncoding::Json,
    )?;
    let mut value: Value = serde_json::from_slice(&json).map_err(|e| FilecoinError::BadInput {
        what: WHAT_POST,
        detail: e.to_string(),
    })?;
    if let Value::Object(map) = &mut value {
        let replicas = s
            .replicas
            .iter()
            .map(|(id, comm_r)| serde_json::json!({"sector_id": id, "comm_r": comm_r}))
            .collect();
        map.insert("replicas".into(), Value::Array(replicas));
    }
    let json = serde_json::to_vec(&value).map_err(|e| FilecoinError::BadInput {
        what: WHAT_POST,
        detail: e.to_string(),
    })?;
    Ok(SyntheticPostJson {
        proof,
        prover_id: s.prover_id,
        randomness: s.randomness,
        replicas: s.replicas,
        json,
        seconds: s.seconds,
    })
}

const WHAT_POST: &str = "synthetic PoSt";

/// Vanilla PoSt proofs of `sectors` sectors that were never sealed,
/// deterministic from `seed`: each sector's tree_r_last is sparse (its
/// challenged leaves drawn from the seed, one filler leaf elsewhere), its
/// comm_c drawn from the seed and comm_r = Poseidon(comm_c, comm_r_last);
/// the challenges are filecoin-proofs' own for the prover id, randomness
/// and sector ids. filecoin-proofs' `verify_winning_post` /
/// `verify_window_post` accept their proofs given [`SyntheticPost::replicas`].
pub fn post_vanilla<Tree: 'static + MerkleTreeTrait>(
    proof: PostProof,
    sectors: usize,
    seed: u64,
) -> Result<SyntheticPost<Tree>> {
    let start = Instant::now();
    let _s = tracing::info_span!("synthetic_post", %proof, sectors, seed).entered();
    let config = proof.config();
    let max = match proof.kind {
        PostKind::Winning => config.sector_count,
        // Any number of partitions; a bound that keeps the request sane.
        PostKind::Window => config.sector_count * 64,
    };
    if sectors == 0 || sectors > max {
        return Err(FilecoinError::BadInput {
            what: WHAT_POST,
            detail: format!(
                "{sectors} sectors asked for; a {proof} request over synthetic sectors holds 1 to \
                 {max}"
            ),
        });
    }
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let prover_id = field_bytes(&mut rng);
    let randomness = field_bytes(&mut rng);
    let fill = Filler::from_rng(&mut rng);
    let first: u64 = rng.gen_range(0..1 << 40);
    let ids: Vec<SectorId> = (0..sectors as u64)
        .map(|i| SectorId::from(first + i))
        .collect();
    let challenges = filecoin_proofs::generate_fallback_sector_challenges::<Tree>(
        &config,
        &randomness,
        &ids,
        prover_id,
    )
    .map_err(FilecoinError::proofs("PoSt challenges"))?;

    type D<T> = <<T as MerkleTreeTrait>::Hasher as Hasher>::Domain;
    let nodes = proof.sector_size.nodes() as usize;
    let (arities, segments) = tree_shape::<Tree>(nodes)?;
    let mut replicas = Vec::with_capacity(sectors);
    let mut vanilla = Vec::with_capacity(sectors);
    for id in ids {
        let sector = u64::from(id);
        let leaves_of = challenges.get(&id).ok_or_else(|| FilecoinError::Proofs {
            context: "PoSt challenges",
            message: format!("none for sector {sector}"),
        })?;
        let leaves = leaves_of
            .iter()
            .map(|&c| {
                (
                    c as usize,
                    D::<Tree>::from(fill.repr(b"replica", sector, c)),
                )
            })
            .collect();
        let tree = SparseTree::<Tree::Hasher>::new(
            &arities,
            &segments,
            fill.repr(b"post tree_r_last", sector, 0).into(),
            leaves,
        )?;
        let comm_c: D<Tree> = fill.repr(b"comm_c", sector, 0).into();
        let comm_r_last = tree.root();
        let comm_r =
            <<Tree::Hasher as Hasher>::Function as HashFunction<_>>::hash2(&comm_c, &comm_r_last);
        let inclusion_proofs = leaves_of.iter().map(|&c| tree.proof(c as usize)).collect();
        replicas.push((sector, commitment(&comm_r)));
        vanilla.push(FallbackPoStSectorProof {
            sector_id: id,
            comm_r,
            vanilla_proof: fallback::Proof {
                sectors: vec![fallback::SectorProof {
                    inclusion_proofs,
                    comm_c,
                    comm_r_last,
                }],
            },
        });
    }
    let seconds = start.elapsed().as_secs_f64();
    tracing::info!(%proof, sectors, seconds, "synthetic PoSt vanilla proofs generated");
    Ok(SyntheticPost {
        proof,
        prover_id,
        randomness,
        replicas,
        vanilla,
        seconds,
    })
}
