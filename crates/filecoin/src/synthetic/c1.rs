//! Synthetic PoRep C1 outputs: the challenged nodes' labels, columns and
//! Merkle paths, as SDR and storage-proofs make them (see the parent's docs).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use blstrs::Scalar as Fr;
use filecoin_hashers::{Domain, HashFunction, Hasher};
use filecoin_proofs::{DefaultPieceDomain, DefaultPieceHasher, SealCommitPhase1Output};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use serde_json::Value;
use sha2::{Digest, Sha256};
use storage_proofs_core::drgraph::Graph;
use storage_proofs_core::merkle::{MerkleProof, MerkleTreeTrait};
use storage_proofs_porep::stacked::{
    self, Column, ColumnProof, EncodingProof, LabelingProof, ReplicaColumnProof, TOTAL_PARENTS,
    generate_replica_id,
};

use crate::error::{FilecoinError, Result};
use crate::porep;
use crate::sector::{SealProof, SealVersion};

use super::sparse_tree::{SparseTree, tree_shape};
use super::{Filler, WHAT, commitment, field_bytes};

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
