//! Synthetic SnapDeals partition proofs of a CC sector that was never
//! sealed, updated with data that was never written.

use std::collections::BTreeMap;
use std::time::Instant;

use blstrs::Scalar as Fr;
use filecoin_hashers::{HashFunction, Hasher};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use storage_proofs_core::merkle::MerkleTreeTrait;

use crate::error::{FilecoinError, Result};
use crate::sector::UpdateProof;

use super::sparse_tree::{SparseTree, tree_shape};
use super::{Filler, commitment};

/// SnapDeals vanilla partition proofs of a CC sector that was never sealed,
/// updated with data that was never written.
#[derive(Debug)]
pub struct SyntheticUpdate {
    pub proof: UpdateProof,
    pub comm_r_old: [u8; 32],
    pub comm_r_new: [u8; 32],
    pub comm_d_new: [u8; 32],
    /// The request file ([`crate::update::UpdateRequest`] JSON).
    pub json: Vec<u8>,
    pub seconds: f64,
}

/// Generates a SnapDeals request (every partition's vanilla proof) from
/// `seed`: the old replica holds one value everywhere, the new data
/// another, so tree_r_old and tree_d_new are one hash per level; the new
/// replica is old + data × rho(phi, high bits of the node), as
/// storage-proofs encodes it, which makes tree_r_new 2^h runs of equal
/// leaves (h from the sector's update configuration); comm_c is drawn from
/// the seed, comm_r_old / comm_r_new = Poseidon(comm_c, root), and the
/// challenges are storage-proofs' own for comm_r_new. Checked with
/// storage-proofs' vanilla verifier before it is returned.
pub fn update_json(proof: UpdateProof, seed: u64) -> Result<SyntheticUpdate> {
    with_tree!(proof.sector_size(), update_for(proof, seed))
}

fn update_for<Tree>(proof: UpdateProof, seed: u64) -> Result<SyntheticUpdate>
where
    Tree: 'static + MerkleTreeTrait<Hasher = storage_proofs_update::constants::TreeRHasher>,
{
    use storage_proofs_update::constants::{TreeDDomain, TreeDHasher, TreeRDomain};
    use storage_proofs_update::{ChallengeProof, Challenges, PartitionProof, PublicParams};
    let start = Instant::now();
    let _s = tracing::info_span!("synthetic_update", %proof, seed).entered();
    let bytes = proof.sector_size().bytes();
    let h = filecoin_proofs::SectorUpdateConfig::from_porep_config(&proof.config()?).h;
    let pp = PublicParams::from_sector_size(bytes);
    let nodes = pp.sector_nodes;
    let bits = pp.challenge_bit_len;

    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let fill = Filler::from_rng(&mut rng);
    let data: TreeDDomain = fill.repr(b"update data", 0, 0).into();
    let old: TreeRDomain = fill.repr(b"old replica", 0, 0).into();
    let comm_c: TreeRDomain = fill.repr(b"update comm_c", 0, 0).into();

    let tree_d = SparseTree::<TreeDHasher>::new(&vec![2; bits], &[bits], data, BTreeMap::new())?;
    let comm_d_new = tree_d.root();
    let (arities, segments) = tree_shape::<Tree>(nodes)?;
    let tree_r_old = SparseTree::<Tree::Hasher>::new(&arities, &segments, old, BTreeMap::new())?;
    let hash2 = <<Tree::Hasher as Hasher>::Function as HashFunction<_>>::hash2;
    let comm_r_old = hash2(&comm_c, &tree_r_old.root());
    let phi = storage_proofs_update::phi(&comm_d_new, &comm_r_old);
    let (old_fr, data_fr): (Fr, Fr) = (old.into(), data.into());
    let runs = (0..1usize << h)
        .map(|high| {
            let rho = storage_proofs_update::rho(&phi, high as u32);
            (
                high << (bits - h),
                TreeRDomain::from(old_fr + data_fr * rho),
            )
        })
        .collect();
    let tree_r_new = SparseTree::<Tree::Hasher>::from_runs(&arities, &segments, runs)?;
    let comm_r_new = hash2(&comm_c, &tree_r_new.root());

    let apex_height = bits - pp.partition_bit_len - pp.apex_leaf_bit_len;
    let apex = tree_d.node(apex_height, 0);
    let vanilla: Vec<PartitionProof<Tree>> = (0..pp.partition_count)
        .map(|k| PartitionProof {
            comm_c,
            apex_leafs: vec![apex; pp.apex_leaf_count],
            challenge_proofs: Challenges::new(nodes, comm_r_new, k)
                .map(|c| {
                    let c = c as usize;
                    ChallengeProof {
                        proof_r_old: tree_r_old.proof(c),
                        proof_d_new: tree_d.proof(c),
                        proof_r_new: tree_r_new.proof(c),
                    }
                })
                .collect(),
        })
        .collect();
    let json = crate::update::UpdateInput::request_json(
        proof,
        commitment(&comm_r_old),
        commitment(&comm_r_new),
        commitment(&comm_d_new),
        &vanilla,
        crate::vanilla::VanillaEncoding::Json,
    )?;
    crate::update::UpdateInput::from_json(&json)?
        .check_vanilla()
        .map_err(|e| FilecoinError::Proofs {
            context: "the synthetic SnapDeals request (a generator bug)",
            message: e.to_string(),
        })?;
    let seconds = start.elapsed().as_secs_f64();
    tracing::info!(%proof, seed, h, partitions = vanilla.len(), seconds, "synthetic SnapDeals generated");
    Ok(SyntheticUpdate {
        proof,
        comm_r_old: commitment(&comm_r_old),
        comm_r_new: commitment(&comm_r_new),
        comm_d_new: commitment(&comm_d_new),
        json,
        seconds,
    })
}
