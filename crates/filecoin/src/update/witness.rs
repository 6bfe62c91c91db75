//! A SnapDeals partition's witness on every core: its head and each of its
//! challenges are parts synthesized in parallel straight into their places
//! in the partition's witness, with exactly the layout (values and order of
//! inputs and aux) of storage-proofs-update's sequential synthesis of
//! `EmptySectorUpdateCircuit`.
//!
//! That synthesis is a head and then one block per challenge. The head:
//! `k_and_h_select` (public) and its bits, the partition packed from them,
//! comm_r_old, comm_d_new, comm_r_new (public), phi = Poseidon(comm_d_new,
//! comm_r_old), comm_c, the two TreeR roots, the apex leaves, the
//! partition's path in TreeD, the two comm_r = Poseidon(comm_c, root)
//! checks, the apex tree (SHA-256) and its path to comm_d_new, and last
//! every challenge's bits, cut from Poseidon digests of comm_r_new and the
//! partition. A challenge: its high bits (for rho), rho = Poseidon(phi,
//! high), its leaves and the new label, its paths in TreeR old and new
//! (Poseidon) and its path to its apex leaf in TreeD (SHA-256). No input
//! is allocated after the head.
//!
//! A challenge reads the head's challenge bits, partition and h-select
//! bits, phi, roots and apex leaves; a witness system keeps no constraints,
//! so only their values matter, and a challenge synthesized on its own with
//! stand-ins (the same values allocated on a scratch system) assigns what
//! it assigns in place. The head is cut in parts too: everything up to
//! the comm_r checks; the apex tree (127 SHA-256 hashes at 8 MiB and
//! 32 GiB: more than half of an 8 MiB partition's work, seven 32 GiB
//! challenges' worth) in parts of 16 hashes, their children stand-ins made
//! with TreeD's own hash, the last with the apex root's path; and the
//! challenge bits.
//! storage-proofs-update keeps its gadgets private (`pub(crate) mod
//! gadgets`), so this module writes them again from reading them
//! (`apex_por`, `gen_challenge_bits`, `get_challenge_high_bits`,
//! `label_r_new`), calling the public gadgets they call
//! (bellperson's bits and packing, storage-proofs-core's `insert`,
//! `select` and `por_no_challenge_input`, SHA-256's `hash2_circuit`) as
//! they call them. Constraints are left out: a witness system drops them.
//!
//! With `native` on, every Poseidon hash (phi, the comm_r checks, the
//! digests, rho, and each TreeR path level) is made by
//! [`crate::poseidon::poseidon_hash`] and every SHA-256 of TreeD (the apex
//! tree, the partition's path, each challenge's path to its apex leaf) by
//! [`cuzk_synth::native::sha256`], around the same bit decompositions,
//! `insert` and packing: the values of neptune's and bellperson's gadgets,
//! several times faster. Off, they are those gadgets (storage-proofs-core's
//! `por_no_challenge_input` for the paths). The PCE and proving keys
//! always come from storage-proofs-update's own circuit; the
//! tests compare this witness with its sequential one value for value.

use bellperson::gadgets::boolean::{AllocatedBit, Boolean, field_into_allocated_bits_le};
use bellperson::gadgets::multipack::pack_bits;
use bellperson::gadgets::num::AllocatedNum;
use bellperson::{ConstraintSystem, SynthesisError};
use blstrs::Scalar as Fr;
use ff::{PrimeField, PrimeFieldBits};
use filecoin_hashers::{HashFunction, Hasher, PoseidonArity};
use neptune::poseidon::{Arity, PoseidonConstants};
use rayon::prelude::*;
use storage_proofs_core::gadgets::insertion::{insert, select};
use storage_proofs_core::gadgets::por::por_no_challenge_input;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_core::util::reverse_bit_numbering;
use storage_proofs_update::circuit::{ChallengeProof, PrivateInputs};
use storage_proofs_update::constants::{
    POSEIDON_CONSTANTS_GEN_RANDOMNESS, TreeD, TreeDDomain, TreeDHasher, TreeRHasher, hs,
};
use storage_proofs_update::{EmptySectorUpdateCircuit, PublicParams};

use cuzk_synth::{PartCs, PartsGate, SynthError, Witness, WitnessCs};
use typenum::U2;

use super::UpdateCircuit;

mod gadgets;

use gadgets::{apex, apex_aux, gen_challenge_bits, high_bits, por_native, tree_d_path};

/// The witness of a SnapDeals partition made in parts on rayon's pool
/// (see the module docs): exactly `Witness::synthesize_with_capacity(
/// circuit, inputs, aux)`. With `aux` known (from the PCE) every part is
/// written straight into its place ([`Witness::fill_sized_parts`]);
/// `aux == 0` synthesizes each part on a system of its own and joins them
/// ([`Witness::from_parts`]).
///
/// Follows the PoSt switch ([`crate::post::native_poseidon`],
/// `CUZK_NATIVE_POSEIDON=0`): while it is off this is storage-proofs-
/// update's own sequential synthesis, as before the parts.
///
/// Refused with [`SynthError::PartMismatch`] where `aux` does not fit the
/// circuit's shape; a circuit storage-proofs-update would assert on is an
/// error, not a panic.
pub fn witness<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    circuit: UpdateCircuit<Tree>,
    inputs: usize,
    aux: usize,
) -> cuzk_synth::Result<Witness> {
    if crate::post::native_poseidon() {
        witness_with(circuit, inputs, aux, true)
    } else {
        Witness::synthesize_with_capacity(circuit, inputs, aux)
    }
}

/// [`witness`]'s parts with their Poseidon and SHA-256 hashes made
/// natively or by neptune's and bellperson's gadgets (and the paths by
/// storage-proofs-core's `por_no_challenge_input`), as `native` says,
/// whatever the switch.
pub fn witness_with<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    circuit: UpdateCircuit<Tree>,
    inputs: usize,
    aux: usize,
    native: bool,
) -> cuzk_synth::Result<Witness> {
    let c = Shape::check(circuit.0)?;
    let n = c.proofs().len();
    // The head's values the other parts read, on a scratch system: the
    // head before the apex tree and the challenge bits (no SHA-256, a
    // dozen Poseidon hashes).
    let mut scratch = WitnessCs::part();
    let stand_in = head(&mut scratch, &c, native)?;
    let head_aux = scratch.aux_len();
    let bits = gen_challenge_bits(&mut scratch, &c, &stand_in, native)?;
    let gen_aux = scratch.aux_len() - head_aux;
    let apex_tree = apex_tree(&mut scratch, &stand_in.apex_leafs)?;
    let apex_hashes: Vec<(usize, usize)> = apex_tree
        .iter()
        .enumerate()
        .flat_map(|(row, nodes)| (0..nodes.len() / 2).map(move |i| (row, i)))
        .collect();
    let apex_parts = apex_hashes.len().div_ceil(APEX_HASHES_PER_PART).max(1);
    let ctx = Context {
        c,
        head: stand_in,
        bits,
        apex_tree,
        apex_hashes,
        apex_parts,
    };

    let parts: Vec<Part> = std::iter::once(Part::Head)
        .chain((0..apex_parts).map(Part::Apex))
        .chain(std::iter::once(Part::Gen))
        .chain((0..n).map(Part::Challenge))
        .collect();
    let _s = tracing::info_span!("update_witness", aux, parts = parts.len(), native).entered();
    let pass = PartsGate::global().try_enter(parts.len())?;
    let cs = WitnessCs::with_capacity(inputs, aux);
    if aux > 0 {
        let (hash_aux, level_aux) = apex_aux(&ctx)?;
        let apex_part_aux = |j: usize| {
            let path = if j + 1 == ctx.apex_parts {
                ctx.c.pp.partition_bit_len * level_aux
            } else {
                0
            };
            ctx.apex_range(j).len() * hash_aux + path
        };
        let apex_aux: usize = (0..apex_parts).map(apex_part_aux).sum();
        let bad = || SynthError::PartMismatch {
            part: 0,
            what: "aux count",
        };
        let rest = aux
            .checked_sub(head_aux + apex_aux + gen_aux)
            .ok_or_else(bad)?;
        let per = match n {
            0 if rest == 0 => 0,
            0 => return Err(bad()),
            n if rest.is_multiple_of(n) => rest / n,
            _ => return Err(bad()),
        };
        let sized = parts
            .into_iter()
            .map(|p| match p {
                Part::Head => (head_aux, p),
                Part::Apex(j) => (apex_part_aux(j), p),
                Part::Gen => (gen_aux, p),
                Part::Challenge(_) => (per, p),
            })
            .collect();
        let w = cs.into_witness().fill_sized_parts(sized, |cs, part| {
            let done = synthesize_part::<Tree, PartCs<'_>>(cs, &ctx, part, native);
            pass.part_done();
            Ok(done?)
        });
        drop(pass);
        return w;
    }
    let done = parts
        .into_par_iter()
        .map(|part| {
            let mut cs = WitnessCs::part();
            let done = synthesize_part::<Tree, _>(&mut cs, &ctx, part, native);
            pass.part_done();
            done?;
            Ok(cs.into_witness())
        })
        .collect::<cuzk_synth::Result<Vec<_>>>()?;
    drop(pass);
    Witness::from_parts(cs.into_witness(), done, inputs, aux)
}

/// One part of a partition's synthesis, in the order of the witness.
#[derive(Clone, Copy, Debug)]
enum Part {
    /// Inputs, commitments, phi, private inputs and the comm_r checks.
    Head,
    /// Apex tree hashes `ctx.apex_range(.0)`; the last part also the apex
    /// root's path to comm_d_new.
    Apex(usize),
    /// Every challenge's bits.
    Gen,
    /// Challenge `.0`'s rho, label and three paths.
    Challenge(usize),
}

/// The circuit, checked as storage-proofs-update asserts on it.
struct Shape<Tree: MerkleTreeTrait<Hasher = TreeRHasher>> {
    pp: PublicParams,
    k_and_h_select: Option<Fr>,
    comm_r_old: Option<Fr>,
    comm_d_new: Option<Fr>,
    comm_r_new: Option<Fr>,
    priv_inputs: PrivateInputs<Tree>,
}

fn malformed(what: String) -> SynthesisError {
    SynthesisError::IoError(std::io::Error::other(what))
}

impl<Tree: MerkleTreeTrait<Hasher = TreeRHasher>> Shape<Tree> {
    fn check(c: EmptySectorUpdateCircuit<Tree>) -> Result<Self, SynthesisError> {
        let pp = c.pub_params;
        let p = &c.priv_inputs;
        if p.apex_leafs.len() != pp.apex_leaf_count
            || p.challenge_proofs.len() != pp.challenge_count
        {
            return Err(malformed(format!(
                "{} apex leaves and {} challenges, the sector has {} and {}",
                p.apex_leafs.len(),
                p.challenge_proofs.len(),
                pp.apex_leaf_count,
                pp.challenge_count
            )));
        }
        let cut = pp.challenge_bit_len - pp.partition_bit_len;
        if let Some(i) = p.challenge_proofs.iter().position(|c| {
            c.path_d_new.len() != pp.challenge_bit_len || c.path_d_new.iter().any(|s| s.len() != 1)
        }) {
            return Err(malformed(format!(
                "challenge {i}: a TreeD path that is not the sector's"
            )));
        }
        let first = p.challenge_proofs.first().map(|c| c.path_d_new.get(cut..));
        if let Some(first) = first {
            let Some(first) = first else {
                return Err(malformed("a TreeD path shorter than the sector's".into()));
            };
            if p.challenge_proofs[1..]
                .iter()
                .any(|c| c.path_d_new.get(cut..) != Some(first))
            {
                return Err(malformed(
                    "challenges with different partition paths in TreeD".into(),
                ));
            }
        }
        if let Some(v) = c.pub_inputs.k_and_h_select {
            let bits: Vec<bool> = v.to_le_bits().into_iter().collect();
            let k = bits[..pp.partition_bit_len]
                .iter()
                .rev()
                .fold(0usize, |k, b| (k << 1) | usize::from(*b));
            let h_bits = pp.partition_bit_len + hs(pp.sector_nodes).len();
            let selected = bits[pp.partition_bit_len..h_bits].iter().filter(|b| **b);
            if k >= pp.partition_count || selected.count() != 1 || bits[h_bits..].contains(&true) {
                return Err(malformed(format!(
                    "k_and_h_select {v:?} is not a partition index and one h"
                )));
            }
        }
        Ok(Shape {
            pp,
            k_and_h_select: c.pub_inputs.k_and_h_select,
            comm_r_old: c.pub_inputs.comm_r_old,
            comm_d_new: c.pub_inputs.comm_d_new,
            comm_r_new: c.pub_inputs.comm_r_new,
            priv_inputs: c.priv_inputs,
        })
    }

    fn proofs(&self) -> &[ChallengeProof<Tree>] {
        &self.priv_inputs.challenge_proofs
    }

    /// Challenge bits below the partition's, and below the apex leaves'.
    fn below_partition(&self) -> usize {
        self.pp.challenge_bit_len - self.pp.partition_bit_len
    }

    fn below_apex(&self) -> usize {
        self.below_partition() - self.pp.apex_leaf_bit_len
    }
}

/// The head's variables the other parts read.
struct Head {
    partition_bits: Vec<AllocatedBit>,
    h_select_bits: Vec<AllocatedBit>,
    partition: AllocatedNum<Fr>,
    comm_d_new: AllocatedNum<Fr>,
    comm_r_new: AllocatedNum<Fr>,
    phi: AllocatedNum<Fr>,
    root_r_old: AllocatedNum<Fr>,
    root_r_new: AllocatedNum<Fr>,
    apex_leafs: Vec<AllocatedNum<Fr>>,
    partition_path: Vec<Vec<AllocatedNum<Fr>>>,
}

/// Stand-ins for the head's variables and each challenge's bits (below
/// the partition's), allocated on a scratch system.
struct Context<Tree: MerkleTreeTrait<Hasher = TreeRHasher>> {
    c: Shape<Tree>,
    head: Head,
    bits: Vec<Vec<AllocatedBit>>,
    /// The apex tree's rows from the apex leaves to its root.
    apex_tree: Vec<Vec<AllocatedNum<Fr>>>,
    /// Its hashes in the circuit's order: (row of the children, pair).
    apex_hashes: Vec<(usize, usize)>,
    apex_parts: usize,
}

/// Apex tree hashes per part: 127 at 8 MiB and 32 GiB, which alone are
/// more than half of an 8 MiB partition's SHA-256 and as much as seven of
/// a 32 GiB partition's challenges (19 hashes in TreeD each), so they are
/// cut into parts of about a challenge's size.
const APEX_HASHES_PER_PART: usize = 16;

impl<Tree: MerkleTreeTrait<Hasher = TreeRHasher>> Context<Tree> {
    /// The apex tree hashes of apex part `j`.
    fn apex_range(&self, j: usize) -> std::ops::Range<usize> {
        let n = self.apex_hashes.len();
        (j * APEX_HASHES_PER_PART).min(n)..((j + 1) * APEX_HASHES_PER_PART).min(n)
    }
}

/// Stand-ins for the apex tree: its rows up from the leaves, each node
/// TreeD's hash of its children (`Sha256Function::hash2`, the value the
/// circuit's `hash2_circuit` packs: TreeD is built with it).
fn apex_tree<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    leafs: &[AllocatedNum<Fr>],
) -> Result<Vec<Vec<AllocatedNum<Fr>>>, SynthesisError> {
    let mut rows = vec![leafs.to_vec()];
    while let Some(row) = rows.last().filter(|r| r.len() > 1) {
        let next = row
            .chunks(2)
            .map(|pair| {
                let value = match pair {
                    [a, b] => a.get_value().zip(b.get_value()).map(|(a, b)| {
                        let (a, b) = (TreeDDomain::from(a), TreeDDomain::from(b));
                        Fr::from(<TreeDHasher as Hasher>::Function::hash2(&a, &b))
                    }),
                    _ => return Err(malformed("an odd apex tree row".into())),
                };
                alloc(&mut *cs, || "apex node".into(), value)
            })
            .collect::<Result<Vec<_>, _>>()?;
        rows.push(next);
    }
    Ok(rows)
}

fn alloc<CS: ConstraintSystem<Fr>>(
    mut cs: CS,
    name: impl FnOnce() -> String,
    value: Option<Fr>,
) -> Result<AllocatedNum<Fr>, SynthesisError> {
    AllocatedNum::alloc(cs.namespace(name), || {
        value.ok_or(SynthesisError::AssignmentMissing)
    })
}

/// A Poseidon hash as neptune's legacy gadget makes it, natively or not.
fn poseidon<CS, A>(
    cs: CS,
    preimage: Vec<AllocatedNum<Fr>>,
    constants: &PoseidonConstants<Fr, A>,
    native: bool,
) -> Result<AllocatedNum<Fr>, SynthesisError>
where
    CS: ConstraintSystem<Fr>,
    A: Arity<Fr>,
{
    if native {
        crate::poseidon::poseidon_hash(cs, &preimage, constants)
    } else {
        neptune::circuit::poseidon_hash(cs, preimage, constants)
    }
}

fn booleans(bits: &[AllocatedBit]) -> Vec<Boolean> {
    bits.iter().cloned().map(Boolean::from).collect()
}

/// The head up to the comm_r checks, as the circuit allocates it.
fn head<Tree, CS>(cs: &mut CS, c: &Shape<Tree>, native: bool) -> Result<Head, SynthesisError>
where
    Tree: MerkleTreeTrait<Hasher = TreeRHasher>,
    CS: ConstraintSystem<Fr>,
{
    let pp = &c.pp;
    let k_and_h_select = alloc(&mut *cs, || "k_and_h_select".into(), c.k_and_h_select)?;
    k_and_h_select.inputize(cs.namespace(|| "k_and_h_select (public input)"))?;
    let bit_len = pp.partition_bit_len + hs(pp.sector_nodes).len();
    let values: Vec<Option<bool>> = match k_and_h_select.get_value() {
        Some(v) => v.to_le_bits().into_iter().take(bit_len).map(Some).collect(),
        None => vec![None; bit_len],
    };
    let mut bits = values
        .into_iter()
        .enumerate()
        .map(|(i, b)| AllocatedBit::alloc(cs.namespace(|| format!("k_and_h_select_bit_{i}")), b))
        .collect::<Result<Vec<_>, _>>()?;
    let h_select_bits = bits.split_off(pp.partition_bit_len);
    let partition_bits = bits;
    let partition = pack_bits(
        cs.namespace(|| "pack partition bits"),
        &booleans(&partition_bits),
    )?;

    let mut public = |name: &'static str, input: &'static str, value| {
        let num = alloc(&mut *cs, || name.into(), value)?;
        num.inputize(cs.namespace(|| input))?;
        Ok::<_, SynthesisError>(num)
    };
    let comm_r_old = public("comm_r_old", "comm_r_old_input", c.comm_r_old)?;
    let comm_d_new = public("comm_d_new", "comm_d_new_input", c.comm_d_new)?;
    let comm_r_new = public("comm_r_new", "comm_r_new_input", c.comm_r_new)?;
    let phi = poseidon(
        cs.namespace(|| "phi"),
        vec![comm_d_new.clone(), comm_r_old],
        &POSEIDON_CONSTANTS_GEN_RANDOMNESS,
        native,
    )?;

    let p = &c.priv_inputs;
    let comm_c = alloc(&mut *cs, || "comm_c".into(), p.comm_c)?;
    let root_r_old = alloc(&mut *cs, || "root_r_old".into(), p.root_r_old)?;
    let root_r_new = alloc(&mut *cs, || "root_r_new".into(), p.root_r_new)?;
    let apex_leafs = p
        .apex_leafs
        .iter()
        .enumerate()
        .map(|(i, v)| alloc(&mut *cs, || format!("apex_leaf_{i}"), *v))
        .collect::<Result<Vec<_>, _>>()?;
    let partition_path = match c.proofs().first() {
        Some(first) => first.path_d_new[c.below_partition()..]
            .iter()
            .enumerate()
            .map(|(i, s)| {
                alloc(&mut *cs, || format!("partition_path_sibling_{i}"), s[0]).map(|s| vec![s])
            })
            .collect::<Result<Vec<_>, _>>()?,
        None => Vec::new(),
    };
    // comm_r = H(comm_c || root) for both replicas (TreeR's hash2_circuit:
    // Poseidon of arity 2 with filecoin-hashers' constants).
    for (name, root) in [
        ("comm_r_old_calc", &root_r_old),
        ("comm_r_new_calc", &root_r_new),
    ] {
        poseidon(
            cs.namespace(|| name),
            vec![comm_c.clone(), root.clone()],
            U2::PARAMETERS(),
            native,
        )?;
    }
    Ok(Head {
        partition_bits,
        h_select_bits,
        partition,
        comm_d_new,
        comm_r_new,
        phi,
        root_r_old,
        root_r_new,
        apex_leafs,
        partition_path,
    })
}

fn synthesize_part<Tree, CS>(
    cs: &mut CS,
    ctx: &Context<Tree>,
    part: Part,
    native: bool,
) -> Result<(), SynthesisError>
where
    Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>,
    CS: ConstraintSystem<Fr>,
{
    match part {
        Part::Head => head(cs, &ctx.c, native).map(drop),
        Part::Apex(j) => apex(cs, ctx, j, native),
        Part::Gen => gen_challenge_bits(cs, &ctx.c, &ctx.head, native).map(drop),
        Part::Challenge(i) => challenge::<Tree, _>(cs, ctx, i, native),
    }
}

/// Challenge `i`'s block, as the circuit's loop allocates it.
fn challenge<Tree, CS>(
    cs: &mut CS,
    ctx: &Context<Tree>,
    i: usize,
    native: bool,
) -> Result<(), SynthesisError>
where
    Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>,
    CS: ConstraintSystem<Fr>,
{
    let (c, head) = (&ctx.c, &ctx.head);
    let proof = &c.proofs()[i];
    let c_bits: Vec<AllocatedBit> = ctx.bits[i]
        .iter()
        .chain(&head.partition_bits)
        .cloned()
        .collect();
    let c_high = high_bits(
        cs.namespace(|| format!("get_challenge_high_bits (c_index={i})")),
        &c_bits,
        &head.h_select_bits,
        &hs(c.pp.sector_nodes),
    )?;
    let rho = poseidon(
        cs.namespace(|| format!("rho (c_index={i})")),
        vec![head.phi.clone(), c_high],
        &POSEIDON_CONSTANTS_GEN_RANDOMNESS,
        native,
    )?;
    let leaf_r_old = alloc(
        &mut *cs,
        || format!("leaf_r_old (c_index={i})"),
        proof.leaf_r_old,
    )?;
    let leaf_d_new = alloc(
        &mut *cs,
        || format!("leaf_d_new (c_index={i})"),
        proof.leaf_d_new,
    )?;
    // label_r_new = label_r_old + label_d_new * rho.
    let leaf_r_new = {
        let mut cs = cs.namespace(|| format!("leaf_r_new (c_index={i})"));
        let d_rho = leaf_d_new.mul(cs.namespace(|| "label_d_new * rho"), &rho)?;
        let value = leaf_r_old
            .get_value()
            .zip(d_rho.get_value())
            .map(|(a, b)| a + b);
        alloc(&mut cs, || "label_r_new".into(), value)?
    };
    if let (Some(found), Some(given)) = (leaf_r_new.get_value(), proof.leaf_r_new)
        && found != given
    {
        return Err(malformed(format!(
            "challenge {i}: leaf_r_new is not leaf_r_old + leaf_d_new * rho"
        )));
    }

    for (tree, leaf, root, path) in [
        ("r_old", leaf_r_old, &head.root_r_old, &proof.path_r_old),
        ("r_new", leaf_r_new, &head.root_r_new, &proof.path_r_new),
    ] {
        let path = path
            .iter()
            .enumerate()
            .map(|(row, siblings)| {
                siblings
                    .iter()
                    .enumerate()
                    .map(|(s, v)| {
                        alloc(
                            &mut *cs,
                            || {
                                format!(
                                    "path_{tree} sibling (c_index={i}, tree_row={row}, \
                                     sibling_index={s})"
                                )
                            },
                            *v,
                        )
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .collect::<Result<Vec<_>, _>>()?;
        let cs = cs.namespace(|| format!("por tree_{tree} (c_index={i})"));
        if native {
            por_native::<Tree::Arity, Tree::SubTreeArity, Tree::TopTreeArity, _>(
                cs,
                c_bits.clone(),
                leaf,
                path,
            )?;
        } else {
            por_no_challenge_input::<Tree, _>(cs, c_bits.clone(), leaf, path, root.clone())?;
        }
    }

    let below_apex = c.below_apex();
    let apex_bits = booleans(&c_bits[below_apex..c.below_partition()]);
    let apex_leaf = select(
        cs.namespace(|| format!("select_apex_leaf (c_index={i})")),
        &head.apex_leafs,
        &apex_bits,
    )?;
    let path = proof
        .path_d_new
        .iter()
        .take(below_apex)
        .enumerate()
        .map(|(row, s)| {
            alloc(
                &mut *cs,
                || format!("path_to_apex_leaf sibling (c_index={i}, tree_row={row})"),
                s[0],
            )
            .map(|s| vec![s])
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut bits = c_bits;
    bits.truncate(below_apex);
    tree_d_path(
        cs.namespace(|| format!("por to_apex_leaf (c_index={i})")),
        bits,
        leaf_d_new,
        path,
        &apex_leaf,
        native,
    )
}
