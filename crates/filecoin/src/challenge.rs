//! One PoRep challenge's witness with the labels' SHA-256 made natively.
//!
//! Three quarters of a PoRep challenge's witness time is the SHA-256 of
//! each layer's label (`create_label`), and most of that is bellperson's
//! gadget building linear combinations a witness system throws away.
//! [`synthesize`] assigns exactly the values storage-proofs' circuit of one
//! challenge assigns, in the same order, making the label's SHA-256 with
//! [`cuzk_synth::native::sha256`] (bellperson's variables and values,
//! computed natively) and everything else with the same storage-proofs,
//! neptune and bellperson gadgets storage-proofs calls. It is for witness
//! systems only: the variables it hands the gadgets for the head (the
//! commitments and the replica id, which the head's own synthesis
//! allocated) are stand-ins with the right values, so the constraints it
//! would produce do not refer to the head's variables. The PCE is always
//! recorded from storage-proofs' own circuit, and the tests compare this
//! witness with storage-proofs' value for value.

use bellperson::gadgets::boolean::Boolean;
use bellperson::gadgets::multipack;
use bellperson::gadgets::num::AllocatedNum;
use bellperson::gadgets::uint32::UInt32;
use bellperson::{ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use cuzk_synth::WitnessCs;
use ff::PrimeField;
use filecoin_hashers::{Hasher, POSEIDON_CONSTANTS_2, POSEIDON_CONSTANTS_11, PoseidonArity};
use filecoin_proofs::constants::DefaultPieceHasher;
use storage_proofs_core::gadgets::encode::encode;
use storage_proofs_core::gadgets::por::{AuthPath, PoRCircuit};
use storage_proofs_core::gadgets::uint64::UInt64;
use storage_proofs_core::gadgets::variables::Root;
use storage_proofs_core::merkle::{DiskStore, MerkleTreeTrait, MerkleTreeWrapper};
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
    mut cs: CS,
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
    let digest = cuzk_synth::native::sha256::sha256(cs.namespace(|| "hash"), &preimage)?;
    let bits = reverse_bit_numbering(digest);
    multipack::pack_bits(
        cs.namespace(|| "result_num"),
        &bits[..Scalar::CAPACITY as usize],
    )
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
    inclusion(
        cs.namespace(|| "comm_d_inclusion"),
        proof.comm_d_path,
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
