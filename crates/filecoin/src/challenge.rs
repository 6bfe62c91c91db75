//! One PoRep challenge's witness with its SHA-256 made natively.
//!
//! Most of a PoRep challenge's witness time is SHA-256: of each layer's
//! label (`create_label`) and of each level of the data's path in tree D
//! (a binary SHA-256 tree), and most of that is bellperson's gadget
//! building linear combinations a witness system throws away.
//! [`synthesize`] assigns exactly the values storage-proofs' circuit of one
//! challenge assigns, in the same order, making those SHA-256s with
//! [`cuzk_synth::native::sha256`] (bellperson's variables and values,
//! computed natively) and everything else with the same storage-proofs,
//! neptune and bellperson gadgets storage-proofs calls; tree D's path
//! follows storage-proofs' Merkle inclusion gadget step by step around its
//! hashes ([`sha256_inclusion`]). It is for witness systems only: the
//! variables it hands the gadgets for the head (the commitments, tree D's
//! root among them, and the replica id, which the head's own synthesis
//! allocated) are stand-ins with the right values, so the constraints it
//! would produce do not refer to the head's variables. The PCE is always
//! recorded from storage-proofs' own circuit, and the tests compare this
//! witness with storage-proofs' value for value.

use bellperson::gadgets::boolean::{AllocatedBit, Boolean};
use bellperson::gadgets::multipack;
use bellperson::gadgets::num::AllocatedNum;
use bellperson::gadgets::uint32::UInt32;
use bellperson::{ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use cuzk_synth::WitnessCs;
use ff::PrimeField;
use filecoin_hashers::{Hasher, POSEIDON_CONSTANTS_2, POSEIDON_CONSTANTS_11, PoseidonArity};
use filecoin_proofs::constants::DefaultPieceHasher;
use storage_proofs_core::gadgets::constraint;
use storage_proofs_core::gadgets::encode::encode;
use storage_proofs_core::gadgets::insertion::insert;
use storage_proofs_core::gadgets::por::{AuthPath, PoRCircuit};
use storage_proofs_core::gadgets::uint64::UInt64;
use storage_proofs_core::gadgets::variables::Root;
use storage_proofs_core::merkle::{
    DiskStore, MerkleProofTrait, MerkleTreeTrait, MerkleTreeWrapper,
};
use storage_proofs_core::util::reverse_bit_numbering;
use storage_proofs_porep::stacked::{StackedCircuit, TOTAL_PARENTS};
use typenum::{U2, U11};

/// One challenge's vanilla proof, as C1 holds it.
type ChallengeProof<Tree> = storage_proofs_porep::stacked::Proof<Tree, DefaultPieceHasher>;

/// The values the head of a partition circuit allocated, which every
/// challenge refers to.
pub(crate) struct HeadValues {
    pub replica_id: Scalar,
    pub comm_d: Scalar,
    pub comm_c: Scalar,
    pub comm_r_last: Scalar,
}

/// Returns `v` with its element type taken from the proofs argument of
/// `_f`: storage-proofs' circuit-side challenge proof, a public type in a
/// private module, which the vanilla proof converts into.
fn as_circuit_proofs<C, A, B, D, E, F, P, R>(
    _f: fn(C, A, B, D, E, F, Vec<P>) -> R,
    v: Vec<P>,
) -> Vec<P> {
    v
}

/// Stand-ins for the head's variables: the same values, allocated on a
/// scratch system (see the module documentation).
struct Head {
    comm_d: AllocatedNum<Scalar>,
    comm_c: AllocatedNum<Scalar>,
    comm_r_last: AllocatedNum<Scalar>,
    replica_id_bits: Vec<Boolean>,
}

impl Head {
    fn new(v: &HeadValues) -> Result<Head, SynthesisError> {
        let mut scratch = WitnessCs::part();
        let mut num = |x: Scalar| AllocatedNum::alloc(&mut scratch, || Ok(x));
        let (comm_d, comm_c, comm_r_last) = (num(v.comm_d)?, num(v.comm_c)?, num(v.comm_r_last)?);
        let replica_id = num(v.replica_id)?;
        // As the head makes them: the replica id's bits, big-endian per byte.
        let replica_id_bits = reverse_bit_numbering(replica_id.to_bits_le(&mut scratch)?);
        Ok(Head {
            comm_d,
            comm_c,
            comm_r_last,
            replica_id_bits,
        })
    }
}

/// storage-proofs' Merkle inclusion gadget for `path` from `leaf` to `root`.
fn inclusion<H, U, V, W, CS>(
    cs: CS,
    path: AuthPath<H, U, V, W>,
    root: &AllocatedNum<Scalar>,
    leaf: &AllocatedNum<Scalar>,
) -> Result<(), SynthesisError>
where
    H: 'static + Hasher,
    U: 'static + PoseidonArity,
    V: 'static + PoseidonArity,
    W: 'static + PoseidonArity,
    CS: ConstraintSystem<Scalar>,
{
    PoRCircuit::<MerkleTreeWrapper<H, DiskStore<H::Domain>, U, V, W>>::synthesize(
        cs,
        Root::from_allocated::<CS>(leaf.clone()),
        path,
        Root::from_allocated::<CS>(root.clone()),
        true,
    )
}

/// The Poseidon hash of a column of labels (one per layer).
fn column_hash<CS: ConstraintSystem<Scalar>>(
    cs: CS,
    column: &[AllocatedNum<Scalar>],
) -> Result<AllocatedNum<Scalar>, SynthesisError> {
    match column.len() {
        2 => neptune::circuit::poseidon_hash::<CS, Scalar, U2>(
            cs,
            column.to_vec(),
            &POSEIDON_CONSTANTS_2,
        ),
        11 => neptune::circuit::poseidon_hash::<CS, Scalar, U11>(
            cs,
            column.to_vec(),
            &POSEIDON_CONSTANTS_11,
        ),
        n => Err(SynthesisError::IoError(std::io::Error::other(format!(
            "a column of {n} layers (PoRep columns have 2 or 11)"
        )))),
    }
}

/// A layer's label: SHA-256 of the replica id, the layer and node indices
/// and the parents' labels (each in a 32-byte slot), as a field element of
/// its first 254 bits; the SHA-256 made natively.
fn label<CS: ConstraintSystem<Scalar>>(
    cs: CS,
    replica_id: &[Boolean],
    parents: &[Vec<Boolean>],
    layer: u32,
    node: &UInt64,
) -> Result<AllocatedNum<Scalar>, SynthesisError> {
    let zero = Boolean::constant(false);
    let mut preimage = Vec::with_capacity((2 + parents.len()) * 256);
    preimage.extend_from_slice(replica_id);
    preimage.resize(preimage.len().max(256), zero.clone());
    preimage.extend(UInt32::constant(layer).into_bits_be());
    preimage.extend(node.to_bits_be());
    preimage.resize(512, zero.clone());
    for p in parents {
        preimage.extend_from_slice(p);
        preimage.resize(preimage.len().next_multiple_of(256), zero.clone());
    }
    sha256_num(cs, &preimage, "result_num")
}

/// SHA-256 of `preimage` as a field element of its first 254 bits, each
/// byte's bits reversed (as storage-proofs packs a SHA-256 digest, under
/// `packed`'s name); the SHA-256 made natively.
fn sha256_num<CS: ConstraintSystem<Scalar>>(
    mut cs: CS,
    preimage: &[Boolean],
    packed: &'static str,
) -> Result<AllocatedNum<Scalar>, SynthesisError> {
    let digest = cuzk_synth::native::sha256::sha256(cs.namespace(|| "hash"), preimage)?;
    let bits = reverse_bit_numbering(digest);
    multipack::pack_bits(cs.namespace(|| packed), &bits[..Scalar::CAPACITY as usize])
}

/// A node's path in tree D as the vanilla proof holds it
/// ([`MerkleProofTrait::as_options`]): per level from the leaf, the
/// sibling and the node's place (0 left, 1 right).
type Sha256Path = Vec<(Vec<Option<Scalar>>, Option<usize>)>;

/// storage-proofs' Merkle inclusion gadget for `path` in tree D from `leaf`
/// to `root`, with its SHA-256s made natively.
///
/// Allocates what `PoRCircuit::<tree D>::synthesize(cs, leaf, path, root,
/// true)` allocates, in the same order and under the same names, and
/// enforces the same constraints: per level, the node's place bit, the
/// sibling, the pair in order (storage-proofs' `insert`), both nodes' bits
/// and their SHA-256 (as `Sha256Function::hash_multi_leaf_circuit`); then
/// the places packed into a public input (the challenged node's index).
/// The root is private (not an input) and already allocated, so it is only
/// compared with.
fn sha256_inclusion<CS: ConstraintSystem<Scalar>>(
    mut cs: CS,
    path: Sha256Path,
    root: &AllocatedNum<Scalar>,
    leaf: &AllocatedNum<Scalar>,
) -> Result<(), SynthesisError> {
    let mut cur = leaf.clone();
    let mut places = Vec::with_capacity(path.len());
    {
        // Tree D is a base tree only: its "sub" and "top" paths are empty.
        let mut base = cs.namespace(|| "base");
        for (level, (siblings, place)) in path.into_iter().enumerate() {
            let [sibling] = <[Option<Scalar>; 1]>::try_from(siblings).map_err(|s| {
                SynthesisError::IoError(std::io::Error::other(format!(
                    "a tree D level with {} siblings (tree D is binary)",
                    s.len()
                )))
            })?;
            let cs = &mut base.namespace(|| format!("merkle tree hash {level}"));
            let bit =
                AllocatedBit::alloc(cs.namespace(|| "index bit 0"), place.map(|p| p & 1 == 1))?;
            let bit = Boolean::from(bit);
            places.push(bit.clone());
            let sibling = AllocatedNum::alloc(cs.namespace(|| "path element 0"), || {
                sibling.ok_or(SynthesisError::AssignmentMissing)
            })?;
            let pair = insert(cs, &cur, &[bit], &[sibling])?;
            cur = sha256_nodes(cs.namespace(|| "computation of commitment hash"), &pair)?;
        }
    }
    multipack::pack_into_inputs(cs.namespace(|| "path"), &places)?;
    constraint::equal(&mut cs, || "enforce root is correct", &cur, root);
    Ok(())
}

/// A tree D node from its children, as `Sha256Function`'s
/// `hash_multi_leaf_circuit` makes it: each child's 255 bits (bellperson's
/// `to_bits_le`) padded to 256 and reversed per byte, then SHA-256 packed
/// into a field element.
fn sha256_nodes<CS: ConstraintSystem<Scalar>>(
    mut cs: CS,
    nodes: &[AllocatedNum<Scalar>],
) -> Result<AllocatedNum<Scalar>, SynthesisError> {
    let mut preimage = Vec::with_capacity(nodes.len() * 256);
    for (i, node) in nodes.iter().enumerate() {
        let bits = node.to_bits_le(cs.namespace(|| format!("{i}_num_into_bits")))?;
        preimage.extend(reverse_bit_numbering(bits));
    }
    sha256_num(cs, &preimage, "pack_le")
}

/// Assigns one challenge's values on `cs` (after the head's), as
/// storage-proofs' circuit of that challenge does.
pub(crate) fn synthesize<Tree, CS>(
    cs: &mut CS,
    head: &HeadValues,
    proof: ChallengeProof<Tree>,
) -> Result<(), SynthesisError>
where
    Tree: 'static + MerkleTreeTrait,
    CS: ConstraintSystem<Scalar>,
{
    let layers = proof.labeling_proofs.len();
    let head = Head::new(head)?;
    let comm_d_path = proof.comm_d_proofs.as_options();
    let proof = as_circuit_proofs(
        StackedCircuit::<Tree, DefaultPieceHasher>::synthesize::<WitnessCs>,
        vec![proof.into()],
    )
    .pop()
    .ok_or(SynthesisError::AssignmentMissing)?;

    // The data leaf and its path in tree D.
    let data_leaf = AllocatedNum::alloc(cs.namespace(|| "data_leaf"), || {
        proof.data_leaf.ok_or(SynthesisError::AssignmentMissing)
    })?;
    sha256_inclusion(
        cs.namespace(|| "comm_d_inclusion"),
        comm_d_path,
        &head.comm_d,
        &data_leaf,
    )?;

    // The parents' columns, each hashed and its path in tree C checked:
    // the base (DRG) parents, then the expander parents.
    let mut base = Vec::with_capacity(proof.drg_parents_proofs.len());
    for parent in proof.drg_parents_proofs {
        let (column, path) = parent.alloc(cs.namespace(|| "drg_parent_num"))?;
        let hash = column.hash(cs.namespace(|| "drg_parent_constraint"))?;
        inclusion(
            cs.namespace(|| "drg_parent_inclusion"),
            path,
            &head.comm_c,
            &hash,
        )?;
        base.push(column);
    }
    let mut expander = Vec::with_capacity(proof.exp_parents_proofs.len());
    for parent in proof.exp_parents_proofs {
        let (column, path) = parent.alloc(cs.namespace(|| "exp_parent_num"))?;
        let hash = column.hash(cs.namespace(|| "exp_parent_constraint"))?;
        inclusion(
            cs.namespace(|| "exp_parent_inclusion"),
            path,
            &head.comm_c,
            &hash,
        )?;
        expander.push(column);
    }

    // The challenged node's index, a public input.
    let node = UInt64::alloc(cs.namespace(|| "challenge"), proof.challenge)?;
    node.pack_into_input(cs.namespace(|| "challenge input"))?;

    // Each layer's label from its parents' labels in the previous layers:
    // the base parents in every layer, the expander parents (one layer
    // behind) from layer 2; their bits repeated to TOTAL_PARENTS slots.
    let mut labels = Vec::with_capacity(layers);
    for layer in 1..=layers {
        let mut cs = cs.namespace(|| "labeling");
        let mut parents = Vec::with_capacity(base.len() + expander.len());
        for column in &base {
            let value = column.get_value(layer);
            parents.push(reverse_bit_numbering(
                value.to_bits_le(cs.namespace(|| "drg_parent_bits"))?,
            ));
        }
        if layer > 1 {
            for column in &expander {
                let value = column.get_value(layer - 1);
                parents.push(reverse_bit_numbering(
                    value.to_bits_le(cs.namespace(|| "exp_parent_bits"))?,
                ));
            }
        }
        let repeated: Vec<Vec<Boolean>> = parents
            .iter()
            .cycle()
            .take(TOTAL_PARENTS)
            .cloned()
            .collect();
        labels.push(label(
            cs.namespace(|| "create_label"),
            &head.replica_id_bits,
            &repeated,
            layer as u32,
            &node,
        )?);
    }
    let key = labels.last().ok_or(SynthesisError::AssignmentMissing)?;

    // The replica's node: the data leaf encoded with the last label, and
    // its path in tree R.
    let encoded = encode(cs.namespace(|| "encode_node"), key, &data_leaf)?;
    inclusion(
        cs.namespace(|| "comm_r_last_data_inclusion"),
        proof.comm_r_last_path,
        &head.comm_r_last,
        &encoded,
    )?;

    // The challenged node's own column of labels, hashed, in tree C.
    let hash = column_hash(cs.namespace(|| "c_x_column_hash"), &labels)?;
    inclusion(
        cs.namespace(|| "c_x_inclusion"),
        proof.comm_c_path,
        &head.comm_c,
        &hash,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellperson::util_cs::test_cs::TestConstraintSystem;
    use filecoin_hashers::HashFunction;
    use filecoin_hashers::sha256::{Sha256Domain, Sha256Function, Sha256Hasher};
    use typenum::U0;

    /// A tree D path of `places` (0 left, 1 right) from `leaf`, with made-up
    /// siblings, and the root it leads to.
    fn path(leaf: Scalar, places: &[usize]) -> (Sha256Path, Scalar) {
        let mut cur = Sha256Domain::from(leaf);
        let mut path = Vec::new();
        for (level, &place) in places.iter().enumerate() {
            let sibling = Sha256Domain::from(Scalar::from(1000 + level as u64));
            cur = match place {
                0 => Sha256Function::hash2(&cur, &sibling),
                _ => Sha256Function::hash2(&sibling, &cur),
            };
            path.push((vec![Some(sibling.into())], Some(place)));
        }
        (path, cur.into())
    }

    /// The leaf and the root allocated, then the path's inclusion by `f`.
    fn synthesize(
        leaf: Scalar,
        root: Scalar,
        f: impl FnOnce(
            &mut TestConstraintSystem<Scalar>,
            &AllocatedNum<Scalar>,
            &AllocatedNum<Scalar>,
        ) -> Result<(), SynthesisError>,
    ) -> TestConstraintSystem<Scalar> {
        let mut cs = TestConstraintSystem::<Scalar>::new();
        let leaf = AllocatedNum::alloc(cs.namespace(|| "leaf"), || Ok(leaf)).unwrap();
        let root = AllocatedNum::alloc(cs.namespace(|| "root"), || Ok(root)).unwrap();
        f(&mut cs, &leaf, &root).unwrap_or_else(|e| panic!("{e}"));
        cs
    }

    #[test]
    fn sha256_inclusion_is_storage_proofs_por_circuit() {
        let leaf = Scalar::from(42);
        for places in [vec![0], vec![1, 0, 1, 1, 0, 0, 1]] {
            let (path, root) = path(leaf, &places);
            let theirs = synthesize(leaf, root, |cs, leaf, root| {
                let path = AuthPath::<Sha256Hasher, U2, U0, U0>::from(path.clone());
                inclusion(cs.namespace(|| "inclusion"), path, root, leaf)
            });
            let ours = synthesize(leaf, root, |cs, leaf, root| {
                sha256_inclusion(cs.namespace(|| "inclusion"), path.clone(), root, leaf)
            });
            assert!(theirs.is_satisfied(), "{places:?}");
            assert!(ours.is_satisfied(), "{places:?}");
            // Names (of variables and constraints), values, constraints.
            assert_eq!(ours.pretty_print_list(), theirs.pretty_print_list());
            assert_eq!(ours.scalar_inputs(), theirs.scalar_inputs());
            assert_eq!(ours.scalar_aux(), theirs.scalar_aux());
            assert_eq!(ours.hash(), theirs.hash());
        }
    }
}
