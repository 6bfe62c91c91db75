//! Filecoin inputs without a sealed sector, deterministic from a seed, for
//! proving at sizes nobody here can seal (32 GiB and 64 GiB): PoRep C1
//! outputs ([`generate`], [`generate_json`]), WinningPoSt / WindowPoSt
//! vanilla proofs ([`post_vanilla`], [`post_json`]) and SnapDeals partition
//! proofs ([`update_json`]). The PoRep and SnapDeals ones are checked with
//! storage-proofs' own vanilla verifier before they are returned; the
//! Merkle trees are kept as runs of equal leaves (`SparseTree`), so a
//! 32 GiB tree costs one hash per run and level.
//!
//! What the PoRep C1 is made of, and how it stays consistent:
//! - every node of the sector holds the same data value (a field element
//!   drawn from the seed), so tree_d is a full binary tree whose every
//!   level is one repeated hash: comm_d costs one hash per level, and the
//!   replica id (prover id, sector id, ticket, comm_d, porep id) and then
//!   the challenges of every partition follow as filecoin-proofs derives
//!   them;
//! - the labels of every challenged node are computed exactly as SDR
//!   computes them (SHA-256 of the replica id, layer, node and its 37
//!   parent labels: the 6 base parents of the same layer and, above layer
//!   1, the 8 expander parents of the layer below), from the columns of its
//!   parents; a parent that is not itself challenged gets a deterministic
//!   filler column, a challenged one its computed column (layer by layer,
//!   in node order, so one node's column is the same wherever it appears);
//! - the replica value of a challenged node is its last label plus its
//!   data (SDR's encoding);
//! - tree_c (column hashes) and tree_r_last (replica values) are sparse:
//!   the leaves of challenged nodes and their parents are real, every other
//!   leaf is one filler value, so only the nodes on the opened paths are
//!   hashed (the rest of each level is one repeated hash);
//! - comm_r = Poseidon(comm_c, comm_r_last), as storage-proofs computes it.
//!
//! The result is checked with storage-proofs' own vanilla verifier
//! (`verify_all_partitions`, the sanity check filecoin-proofs makes after
//! commit phase 1) before it is returned. Its C2 proofs are accepted by
//! `verify_seal` given the prover id and sector id returned with it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use blstrs::Scalar as Fr;
use filecoin_hashers::{Domain, HashFunction, Hasher};
use filecoin_proofs::{
    DefaultPieceDomain, DefaultPieceHasher, FallbackPoStSectorProof, SealCommitPhase1Output,
};
use merkletree::hash::Algorithm;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use serde_json::Value;
use sha2::{Digest, Sha256};
use storage_proofs_core::drgraph::Graph;
use storage_proofs_core::merkle::{MerkleProof, MerkleTreeTrait};
use storage_proofs_core::sector::SectorId;
use storage_proofs_porep::stacked::{
    self, Column, ColumnProof, EncodingProof, LabelingProof, ReplicaColumnProof, TOTAL_PARENTS,
    generate_replica_id,
};
use storage_proofs_post::fallback;
use typenum::Unsigned;

use crate::error::{FilecoinError, Result};
use crate::porep;
use crate::sector::{PostKind, PostProof, SealProof, SealVersion, UpdateProof};

const WHAT: &str = "synthetic C1";

/// A generated C1 and the ids `verify_seal` needs beside it.
#[derive(Debug)]
pub struct SyntheticC1<Tree: 'static + MerkleTreeTrait> {
    pub proof: SealProof,
    pub prover_id: [u8; 32],
    pub sector_id: u64,
    /// filecoin-proofs' commit phase 1 output: comm_r, comm_d, replica id,
    /// seed, ticket and the vanilla proofs of every partition.
    pub c1: SealCommitPhase1Output<Tree>,
    /// Seconds spent generating (vanilla check included).
    pub seconds: f64,
}

/// A generated C1 as JSON (see [`generate_json`]).
#[derive(Debug, Clone)]
pub struct SyntheticC1Json {
    pub proof: SealProof,
    pub prover_id: [u8; 32],
    pub sector_id: u64,
    pub comm_r: [u8; 32],
    pub comm_d: [u8; 32],
    pub ticket: [u8; 32],
    pub seed: [u8; 32],
    pub partitions: usize,
    pub challenges: usize,
    /// filecoin-proofs' C1 output as JSON, plus `registered_proof`, and
    /// `prover_id` and `sector_id`, which verify_seal needs and a C1 output
    /// does not carry; [`crate::C1Output::from_json`] reads it.
    pub json: Vec<u8>,
    pub seconds: f64,
}

/// Generates the C1 of `proof` from `seed` (see the module docs) as JSON.
pub fn generate_json(proof: SealProof, seed: u64) -> Result<SyntheticC1Json> {
    with_tree!(proof.sector_size, json_for(proof, seed))
}

fn json_for<Tree: 'static + MerkleTreeTrait>(
    proof: SealProof,
    seed: u64,
) -> Result<SyntheticC1Json> {
    let s = generate::<Tree>(proof, seed)?;
    let to_json = |e: serde_json::Error| FilecoinError::BadInput {
        what: WHAT,
        detail: format!("could not be written as JSON: {e}"),
    };
    let mut value = serde_json::to_value(&s.c1).map_err(to_json)?;
    if let Value::Object(map) = &mut value {
        map.insert("registered_proof".into(), proof.to_string().into());
        map.insert(
            "prover_id".into(),
            serde_json::to_value(s.prover_id).map_err(to_json)?,
        );
        map.insert("sector_id".into(), s.sector_id.into());
    }
    let json = serde_json::to_vec(&value).map_err(to_json)?;
    Ok(SyntheticC1Json {
        proof,
        prover_id: s.prover_id,
        sector_id: s.sector_id,
        comm_r: s.c1.comm_r,
        comm_d: s.c1.comm_d,
        ticket: s.c1.ticket,
        seed: s.c1.seed,
        partitions: s.c1.vanilla_proofs.len(),
        challenges: s.c1.vanilla_proofs.iter().map(Vec::len).sum(),
        json,
        seconds: s.seconds,
    })
}

/// Generates the C1 of `proof` (an interactive PoRep: V1 or V1_1) from
/// `seed`; everything in it follows from the two.
pub fn generate<Tree: 'static + MerkleTreeTrait>(
    proof: SealProof,
    seed: u64,
) -> Result<SyntheticC1<Tree>> {
    let start = Instant::now();
    let _s = tracing::info_span!("synthetic_c1", %proof, seed).entered();
    match proof.version {
        SealVersion::V1 | SealVersion::V1_1 => {}
        SealVersion::V1_1SyntheticPoRep | SealVersion::V1_2NonInteractivePoRep => {
            return Err(FilecoinError::BadInput {
                what: WHAT,
                detail: format!(
                    "{proof} derives its challenges from comm_r (synthetic or non-interactive \
                     PoRep); the generator makes interactive PoRep C1s: ask for \
                     StackedDrg{}V1_1",
                    proof.sector_size
                ),
            });
        }
    }
    let config = proof.config()?;
    let (pub_params, _) = porep::setup::<Tree>(&config, None)?;
    let vp = &pub_params.vanilla_params;
    let graph = &vp.graph;
    let layers = vp.num_layers;
    let nodes = graph.size();

    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let prover_id = field_bytes(&mut rng);
    let sector_id: u64 = rng.r#gen();
    let ticket = field_bytes(&mut rng);
    let challenge_seed = field_bytes(&mut rng);
    let fill = Filler::from_rng(&mut rng);

    // tree_d: every node holds `data`.
    let data: DefaultPieceDomain = fill.repr(b"data", 0, 0).into();
    let d_arities = vec![2; nodes.trailing_zeros() as usize];
    let tree_d = SparseTree::<DefaultPieceHasher>::new(
        &d_arities,
        &[d_arities.len()],
        data,
        BTreeMap::new(),
    )?;
    let comm_d_domain = tree_d.root();
    let comm_d = commitment(&comm_d_domain);
    let replica_id = generate_replica_id::<Tree::Hasher, _>(
        &prover_id,
        sector_id,
        &ticket,
        comm_d_domain,
        &config.porep_id,
    );

    let pub_inputs = stacked::PublicInputs::<<Tree::Hasher as Hasher>::Domain, DefaultPieceDomain> {
        replica_id,
        seed: Some(challenge_seed),
        tau: None,
        k: None,
    };
    let partitions = usize::from(config.partitions);
    let challenges: Vec<Vec<usize>> = (0..partitions)
        .map(|k| pub_inputs.challenges(&vp.challenges, nodes, Some(k)))
        .collect();
    let challenged: BTreeSet<usize> = challenges.iter().flatten().copied().collect();

    // Parents of every challenged node.
    let base_degree = graph.base_graph().degree();
    let mut parents: BTreeMap<usize, Vec<u32>> = BTreeMap::new();
    for &c in &challenged {
        let mut p = vec![0u32; graph.degree()];
        graph
            .parents(c, &mut p)
            .map_err(FilecoinError::proofs("the SDR graph's parents"))?;
        parents.insert(c, p);
    }

    // Labels of the challenged nodes, layer by layer, in node order.
    type D<T> = <<T as MerkleTreeTrait>::Hasher as Hasher>::Domain;
    let filler_label = |node: usize, layer: usize| -> D<Tree> {
        fill.repr(b"label", node as u64, layer as u64).into()
    };
    let mut labels: BTreeMap<usize, Vec<D<Tree>>> =
        challenged.iter().map(|&c| (c, Vec::new())).collect();
    // parents_data[c][layer - 1]: the 37 parent labels hashed into c's label.
    let mut parents_data: BTreeMap<usize, Vec<Vec<D<Tree>>>> = BTreeMap::new();
    for layer in 1..=layers {
        for &c in &challenged {
            let label_of =
                |node: u32, layer: usize| -> Result<D<Tree>> {
                    let node = node as usize;
                    match labels.get(&node) {
                        None => Ok(filler_label(node, layer)),
                        Some(rows) => rows.get(layer - 1).copied().ok_or_else(|| {
                            FilecoinError::BadInput {
                                what: WHAT,
                                detail: format!(
                                    "node {c} of {proof} has parent {node} not below it in layer \
                                 {layer}; the generator cannot order their labels"
                                ),
                            }
                        }),
                    }
                };
            let p = &parents[&c];
            let mut data = Vec::with_capacity(p.len());
            for (i, &parent) in p.iter().enumerate() {
                if i < base_degree {
                    data.push(label_of(parent, layer)?);
                } else if layer > 1 {
                    data.push(label_of(parent, layer - 1)?);
                }
            }
            let mut full = vec![D::<Tree>::default(); TOTAL_PARENTS];
            for chunk in full.chunks_mut(data.len()) {
                chunk.copy_from_slice(&data[..chunk.len()]);
            }
            let label = create_label(&replica_id, layer as u32, c as u64, &full);
            if let Some(rows) = labels.get_mut(&c) {
                rows.push(label);
            }
            parents_data.entry(c).or_default().push(full);
        }
    }

    // Columns of the challenged nodes and of their parents.
    let mut columns: BTreeMap<usize, Vec<D<Tree>>> = BTreeMap::new();
    for (&c, p) in &parents {
        for &node in std::iter::once(&(c as u32)).chain(p.iter()) {
            let node = node as usize;
            columns
                .entry(node)
                .or_insert_with(|| match labels.get(&node) {
                    Some(rows) => rows.clone(),
                    None => (1..=layers).map(|l| filler_label(node, l)).collect(),
                });
        }
    }
    let column = |node: usize| -> Result<Column<Tree::Hasher>> {
        Column::new(node as u32, columns[&node].clone())
            .map_err(FilecoinError::proofs("a synthetic column"))
    };
    let mut c_leaves = BTreeMap::new();
    for &node in columns.keys() {
        c_leaves.insert(node, D::<Tree>::from(column(node)?.hash()));
    }
    let (arities, segments) = tree_shape::<Tree>(nodes)?;
    let tree_c = SparseTree::<Tree::Hasher>::new(
        &arities,
        &segments,
        fill.repr(b"tree_c", 0, 0).into(),
        c_leaves,
    )?;
    let data_fr: Fr = data.into();
    let r_leaves = labels
        .iter()
        .map(|(&c, rows)| {
            let key: Fr = rows[layers - 1].into();
            (c, D::<Tree>::from(key + data_fr))
        })
        .collect();
    let tree_r = SparseTree::<Tree::Hasher>::new(
        &arities,
        &segments,
        fill.repr(b"tree_r_last", 0, 0).into(),
        r_leaves,
    )?;
    let comm_c = tree_c.root();
    let comm_r_last = tree_r.root();
    let comm_r =
        <<Tree::Hasher as Hasher>::Function as HashFunction<_>>::hash2(&comm_c, &comm_r_last);

    type Proof<T> = MerkleProof<
        <T as MerkleTreeTrait>::Hasher,
        <T as MerkleTreeTrait>::Arity,
        <T as MerkleTreeTrait>::SubTreeArity,
        <T as MerkleTreeTrait>::TopTreeArity,
    >;
    let column_proof = |node: usize| -> Result<ColumnProof<Proof<Tree>>> {
        ColumnProof::from_column(column(node)?, tree_c.proof(node))
            .map_err(FilecoinError::proofs("a synthetic column proof"))
    };
    let mut vanilla_proofs = Vec::with_capacity(partitions);
    for partition in &challenges {
        let mut proofs = Vec::with_capacity(partition.len());
        for &c in partition {
            let p = &parents[&c];
            let rcp = ReplicaColumnProof {
                c_x: column_proof(c)?,
                drg_parents: p[..base_degree]
                    .iter()
                    .map(|&n| column_proof(n as usize))
                    .collect::<Result<_>>()?,
                exp_parents: p[base_degree..]
                    .iter()
                    .map(|&n| column_proof(n as usize))
                    .collect::<Result<_>>()?,
            };
            let data_of = &parents_data[&c];
            proofs.push(stacked::Proof::<Tree, DefaultPieceHasher> {
                comm_d_proofs: tree_d.proof(c),
                comm_r_last_proof: tree_r.proof(c),
                replica_column_proofs: rcp,
                labeling_proofs: (1..=layers)
                    .map(|l| LabelingProof::new(l as u32, c as u64, data_of[l - 1].clone()))
                    .collect(),
                encoding_proof: EncodingProof::new(
                    layers as u32,
                    c as u64,
                    data_of[layers - 1].clone(),
                ),
            });
        }
        vanilla_proofs.push(proofs);
    }

    let c1 = SealCommitPhase1Output {
        vanilla_proofs,
        comm_r: commitment(&comm_r),
        comm_d,
        replica_id,
        seed: challenge_seed,
        ticket,
    };
    porep::check_vanilla(&c1, proof).map_err(|e| FilecoinError::Proofs {
        context: "the synthetic C1 (a generator bug)",
        message: e.to_string(),
    })?;
    let seconds = start.elapsed().as_secs_f64();
    tracing::info!(
        %proof,
        seed,
        partitions,
        challenges = challenged.len(),
        columns = columns.len(),
        seconds,
        "synthetic C1 generated"
    );
    Ok(SyntheticC1 {
        proof,
        prover_id,
        sector_id,
        c1,
        seconds,
    })
}

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

/// 32 random bytes with the top two bits cleared: a canonical field element
/// (ids, tickets and seeds that filecoin-proofs may read as one).
fn field_bytes(rng: &mut ChaCha20Rng) -> [u8; 32] {
    let mut b = [0u8; 32];
    rng.fill(&mut b[..]);
    b[31] &= 0x3f;
    b
}

fn commitment<D: Domain>(d: &D) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

/// SDR's label of `node` in `layer`: SHA-256 of the replica id, the layer
/// (big endian u32) and node (big endian u64) padded to 64 bytes, then the
/// 37 parent labels; the digest with its top two bits cleared, as a field
/// element (storage-proofs' `LabelingProof` computes the same).
fn create_label<D: Domain>(replica_id: &D, layer: u32, node: u64, parents: &[D]) -> D {
    let mut buffer = [0u8; 64];
    buffer[..32].copy_from_slice(replica_id.as_ref());
    buffer[32..36].copy_from_slice(&layer.to_be_bytes());
    buffer[36..44].copy_from_slice(&node.to_be_bytes());
    let mut hasher = Sha256::new();
    hasher.update(buffer);
    for p in parents {
        hasher.update(p.as_ref());
    }
    let mut out: [u8; 32] = hasher.finalize().into();
    out[31] &= 0b0011_1111;
    out.into()
}

/// Deterministic field elements from the seed's key.
struct Filler {
    key: [u8; 32],
}

impl Filler {
    /// The next 32 bytes of `rng` as the key.
    fn from_rng(rng: &mut ChaCha20Rng) -> Filler {
        let mut key = [0u8; 32];
        rng.fill(&mut key[..]);
        Filler { key }
    }

    /// SHA-256(tag, key, a, b) with its top two bits cleared: below 2^254,
    /// so always a canonical field element.
    fn repr(&self, tag: &[u8], a: u64, b: u64) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(b"cuzk synthetic C1 ");
        h.update(tag);
        h.update(self.key);
        h.update(a.to_le_bytes());
        h.update(b.to_le_bytes());
        let mut out: [u8; 32] = h.finalize().into();
        out[31] &= 0b0011_1111;
        out
    }
}

/// The arity of every level of `Tree`'s tree over `nodes` leaves (bottom
/// up) and how many levels each path segment (base, sub, top) has.
fn tree_shape<Tree: MerkleTreeTrait>(nodes: usize) -> Result<(Vec<usize>, Vec<usize>)> {
    let base = Tree::Arity::to_usize();
    let sub = Tree::SubTreeArity::to_usize();
    let top = Tree::TopTreeArity::to_usize();
    let mut per_base = nodes / sub.max(1) / top.max(1);
    let mut height = 0;
    while per_base > 1 && per_base.is_multiple_of(base) {
        per_base /= base;
        height += 1;
    }
    if per_base != 1 {
        return Err(FilecoinError::BadInput {
            what: WHAT,
            detail: format!("{nodes} nodes do not make a tree of arities {base}/{sub}/{top}"),
        });
    }
    let mut arities = vec![base; height];
    let mut segments = vec![height];
    for extra in [sub, top] {
        if extra > 0 {
            arities.push(extra);
            segments.push(1);
        }
    }
    Ok((arities, segments))
}

/// A Merkle tree kept as runs: each level is a list of runs of equal
/// nodes, so a tree whose leaves are one filler value except at a few
/// places (or a few long runs of equal values) costs one hash per run and
/// level, never one per node.
struct SparseTree<H: Hasher> {
    arities: Vec<usize>,
    /// levels[l]: (first index, value) of each run, in index order; a run
    /// ends where the next begins (the last at the level's end).
    levels: Vec<Vec<(usize, H::Domain)>>,
}

impl<H: Hasher> SparseTree<H> {
    /// Every leaf `filler` except `leaves`. `arities` per level (bottom
    /// up); `segments`: levels per path segment (the hash's height counts
    /// from 0 in each, as storage-proofs' inclusion paths do).
    fn new(
        arities: &[usize],
        segments: &[usize],
        filler: H::Domain,
        leaves: BTreeMap<usize, H::Domain>,
    ) -> Result<Self> {
        let total: usize = arities.iter().product();
        let mut runs = vec![(0, filler)];
        for (&i, &v) in &leaves {
            if i >= total {
                return Err(FilecoinError::BadInput {
                    what: WHAT,
                    detail: format!("leaf {i} outside a tree of {total} leaves"),
                });
            }
            push_run(&mut runs, i, v);
            if i + 1 < total {
                push_run(&mut runs, i + 1, filler);
            }
        }
        Self::from_runs(arities, segments, runs)
    }

    /// Leaves given as runs: (first index, value), starting at 0, in order.
    fn from_runs(
        arities: &[usize],
        segments: &[usize],
        leaves: Vec<(usize, H::Domain)>,
    ) -> Result<Self> {
        let total: usize = arities.iter().product();
        let ordered = leaves.windows(2).all(|w| w[0].0 < w[1].0);
        if leaves.first().map(|r| r.0) != Some(0) || !ordered || leaves.iter().any(|r| r.0 >= total)
        {
            return Err(FilecoinError::BadInput {
                what: WHAT,
                detail: format!("leaf runs that do not tile a tree of {total} leaves"),
            });
        }
        let heights: Vec<usize> = segments.iter().flat_map(|&n| 0..n).collect();
        let mut f = H::Function::default();
        let mut levels = vec![leaves];
        let mut len = total;
        for (l, &arity) in arities.iter().enumerate() {
            let below = &levels[l];
            let mut above: Vec<(usize, H::Domain)> = Vec::new();
            let mut whole: std::collections::HashMap<H::Domain, H::Domain> = Default::default();
            let groups = len / arity;
            let mut g = 0;
            while g < groups {
                let first = g * arity;
                let i = below.partition_point(|r| r.0 <= first) - 1;
                let run_end = below.get(i + 1).map_or(len, |r| r.0);
                if (g + 1) * arity <= run_end {
                    // Groups inside one run: one hash for all of them.
                    let v = below[i].1;
                    let h = *whole.entry(v).or_insert_with(|| {
                        f.reset();
                        f.multi_node(&vec![v; arity], heights[l])
                    });
                    push_run(&mut above, g, h);
                    g = run_end / arity;
                } else {
                    let children: Vec<H::Domain> =
                        (first..first + arity).map(|j| run_at(below, j)).collect();
                    f.reset();
                    push_run(&mut above, g, f.multi_node(&children, heights[l]));
                    g += 1;
                }
            }
            levels.push(above);
            len = groups;
        }
        Ok(SparseTree {
            arities: arities.to_vec(),
            levels,
        })
    }

    fn node(&self, level: usize, index: usize) -> H::Domain {
        run_at(&self.levels[level], index)
    }

    fn root(&self) -> H::Domain {
        self.node(self.arities.len(), 0)
    }

    /// The inclusion proof of `leaf`, in storage-proofs' form (base path,
    /// then the sub-tree and top-tree elements).
    fn proof<A, B, C>(&self, leaf: usize) -> MerkleProof<H, A, B, C>
    where
        A: filecoin_hashers::PoseidonArity,
        B: filecoin_hashers::PoseidonArity,
        C: filecoin_hashers::PoseidonArity,
    {
        let mut index = leaf;
        let mut path = Vec::with_capacity(self.arities.len());
        for (l, &arity) in self.arities.iter().enumerate() {
            let group = index / arity;
            let pos = index % arity;
            let siblings = (0..arity)
                .filter(|&j| j != pos)
                .map(|j| self.node(l, group * arity + j))
                .collect();
            path.push((siblings, pos));
            index = group;
        }
        MerkleProof::from_parts(self.node(0, leaf), self.root(), path)
    }
}

/// Appends a run starting at `start`, merged into the last one when equal.
fn push_run<D: PartialEq>(runs: &mut Vec<(usize, D)>, start: usize, value: D) {
    match runs.last_mut() {
        Some(last) if last.1 == value => {}
        Some(last) if last.0 == start => last.1 = value,
        _ => runs.push((start, value)),
    }
}

/// The value at `index` of a level kept as runs.
fn run_at<D: Copy>(runs: &[(usize, D)], index: usize) -> D {
    runs[runs.partition_point(|r| r.0 <= index) - 1].1
}

#[cfg(test)]
mod tests {
    use super::*;
    use filecoin_proofs::SectorShape2KiB;

    #[test]
    fn tree_shapes_match_the_sector_shapes() {
        assert_eq!(
            tree_shape::<SectorShape2KiB>(64).unwrap(),
            (vec![8, 8], vec![2])
        );
        assert_eq!(
            tree_shape::<filecoin_proofs::SectorShape32GiB>(1 << 30).unwrap(),
            (vec![8; 10], vec![9, 1])
        );
        assert_eq!(
            tree_shape::<filecoin_proofs::SectorShape64GiB>(1 << 31).unwrap(),
            (vec![8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 2], vec![9, 1, 1])
        );
        assert!(tree_shape::<SectorShape2KiB>(96).is_err());
    }

    #[test]
    fn a_sparse_tree_equals_the_full_tree() {
        use filecoin_hashers::poseidon::PoseidonHasher;
        type D = <PoseidonHasher as Hasher>::Domain;
        let fill = Filler { key: [7; 32] };
        let filler: D = fill.repr(b"f", 0, 0).into();
        let known: BTreeMap<usize, D> = [3usize, 17, 40, 63]
            .iter()
            .map(|&i| (i, D::from(fill.repr(b"leaf", i as u64, 0))))
            .collect();
        let sparse =
            SparseTree::<PoseidonHasher>::new(&[8, 8], &[2], filler, known.clone()).unwrap();
        // The same tree hashed in full.
        let mut level: Vec<D> = (0..64).map(|i| *known.get(&i).unwrap_or(&filler)).collect();
        let mut f = <PoseidonHasher as Hasher>::Function::default();
        for height in 0..2 {
            level = level
                .chunks(8)
                .map(|c| {
                    f.reset();
                    f.multi_node(c, height)
                })
                .collect();
        }
        assert_eq!(sparse.root(), level[0]);
        // Leaves as runs (two halves, as SnapDeals' replica with h = 1).
        let (a, b) = (filler, D::from(fill.repr(b"other", 0, 0)));
        let runs =
            SparseTree::<PoseidonHasher>::from_runs(&[8, 8], &[2], vec![(0, a), (32, b)]).unwrap();
        let mut full: Vec<D> = (0..64).map(|i| if i < 32 { a } else { b }).collect();
        for height in 0..2 {
            full = full
                .chunks(8)
                .map(|c| {
                    f.reset();
                    f.multi_node(c, height)
                })
                .collect();
        }
        assert_eq!(runs.root(), full[0]);
        assert!(SparseTree::<PoseidonHasher>::from_runs(&[8, 8], &[2], vec![(1, a)]).is_err());
        use storage_proofs_core::merkle::MerkleProofTrait;
        for leaf in [3, 17, 5, 63] {
            let p: MerkleProof<PoseidonHasher, typenum::U8> = sparse.proof(leaf);
            assert!(p.validate(leaf), "leaf {leaf}");
            assert_eq!(p.leaf(), *known.get(&leaf).unwrap_or(&filler));
        }
    }
}
