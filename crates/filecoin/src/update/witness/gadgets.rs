//! The SnapDeals circuit's own gadgets, written again from storage-proofs-
//! update's private ones (`apex_por`, `gen_challenge_bits`,
//! `get_challenge_high_bits`) and storage-proofs-core's
//! `por_no_challenge_input`, with their hashes made natively when asked:
//! the apex tree and TreeD paths (SHA-256) and the TreeR paths (Poseidon).

use super::*;

/// The apex tree over this partition's apex leaves (SHA-256, TreeD's
/// hash) and its root's path to comm_d_new along the partition's bits.
pub(super) fn apex<Tree, CS>(
    cs: &mut CS,
    ctx: &Context<Tree>,
    part: usize,
    native: bool,
) -> Result<(), SynthesisError>
where
    Tree: MerkleTreeTrait<Hasher = TreeRHasher>,
    CS: ConstraintSystem<Fr>,
{
    let mut cs = cs.namespace(|| "apex_gadget");
    for &(row, i) in &ctx.apex_hashes[ctx.apex_range(part)] {
        let pair = &ctx.apex_tree[row][2 * i..2 * i + 2];
        let cs =
            cs.namespace(|| format!("apex_tree generation hash (tree_row={row}, siblings={i})"));
        if native {
            sha256_nodes(cs, pair)?;
        } else {
            <TreeDHasher as Hasher>::Function::hash2_circuit(cs, &pair[0], &pair[1])?;
        }
    }
    if part + 1 < ctx.apex_parts {
        return Ok(());
    }
    let head = &ctx.head;
    let root = ctx
        .apex_tree
        .last()
        .and_then(|r| r.first())
        .ok_or_else(|| malformed("no apex leaves".into()))?;
    tree_d_path(
        cs.namespace(|| "partition-tree por"),
        head.partition_bits.clone(),
        root.clone(),
        head.partition_path.clone(),
        &head.comm_d_new,
        native,
    )
}

/// storage-proofs-core's `por_no_challenge_input` over TreeD (binary,
/// SHA-256), its hashes made natively with `native` on: per level the node
/// placed beside its sibling by the challenge's bit (`insert`) and their
/// SHA-256 ([`sha256_nodes`]). The root comparison is a constraint only.
pub(super) fn tree_d_path<CS: ConstraintSystem<Fr>>(
    mut cs: CS,
    bits: Vec<AllocatedBit>,
    leaf: AllocatedNum<Fr>,
    path: Vec<Vec<AllocatedNum<Fr>>>,
    root: &AllocatedNum<Fr>,
    native: bool,
) -> Result<(), SynthesisError> {
    if !native {
        return por_no_challenge_input::<TreeD, _>(cs, bits, leaf, path, root.clone());
    }
    if bits.len() != path.len() || path.iter().any(|s| s.len() != 1) {
        return Err(malformed(format!(
            "a TreeD path of {} levels for {} challenge bits",
            path.len(),
            bits.len()
        )));
    }
    let mut cur = leaf;
    for (height, (bit, sibling)) in bits.into_iter().zip(path).enumerate() {
        let pair = insert(
            &mut cs.namespace(|| format!("merkle proof insert (height={height})")),
            &cur,
            &[Boolean::from(bit)],
            &sibling,
        )?;
        cur = sha256_nodes(
            cs.namespace(|| format!("merkle proof hash (height={height})")),
            &pair,
        )?;
    }
    Ok(())
}

/// TreeD's node from its children as `Sha256Function` makes it in a
/// circuit (`hash2_circuit`, `hash_multi_leaf_circuit`): each child's 255
/// bits padded to 256 and reversed per byte, their SHA-256 by
/// [`cuzk_synth::native::sha256`] (bellperson's gadget's values, natively),
/// reversed per byte and packed into a field element.
fn sha256_nodes<CS: ConstraintSystem<Fr>>(
    mut cs: CS,
    nodes: &[AllocatedNum<Fr>],
) -> Result<AllocatedNum<Fr>, SynthesisError> {
    let mut preimage = Vec::with_capacity(nodes.len() * 256);
    for (i, node) in nodes.iter().enumerate() {
        let bits = node.to_bits_le(cs.namespace(|| format!("{i}_num_into_bits")))?;
        preimage.extend(reverse_bit_numbering(bits));
    }
    let digest = cuzk_synth::native::sha256::sha256(cs.namespace(|| "hash"), &preimage)?;
    let bits = reverse_bit_numbering(digest);
    pack_bits(cs.namespace(|| "pack_le"), &bits[..Fr::CAPACITY as usize])
}

/// The aux values of one apex tree hash and of one level of the apex
/// root's path ([`apex`]: the node placed beside its sibling, their hash),
/// each measured once on a scratch system (natively: the same count).
pub(super) fn apex_aux<Tree: MerkleTreeTrait<Hasher = TreeRHasher>>(
    ctx: &Context<Tree>,
) -> Result<(usize, usize), SynthesisError> {
    let mut cs = WitnessCs::part();
    let x = ctx.head.comm_d_new.clone();
    let before = cs.aux_len();
    sha256_nodes(cs.namespace(|| "h"), &[x.clone(), x.clone()])?;
    let hash = cs.aux_len() - before;
    let bit = AllocatedBit::alloc(cs.namespace(|| "b"), Some(false))?;
    let before = cs.aux_len();
    tree_d_path(
        cs.namespace(|| "p"),
        vec![bit],
        x.clone(),
        vec![vec![x.clone()]],
        &x,
        true,
    )?;
    Ok((hash, cs.aux_len() - before))
}

/// Every challenge's bits below the partition's: cut from Poseidon
/// digests of comm_r_new and a digest index (k × digests + j).
pub(super) fn gen_challenge_bits<Tree, CS>(
    cs: &mut CS,
    c: &Shape<Tree>,
    head: &Head,
    native: bool,
) -> Result<Vec<Vec<AllocatedBit>>, SynthesisError>
where
    Tree: MerkleTreeTrait<Hasher = TreeRHasher>,
    CS: ConstraintSystem<Fr>,
{
    let mut cs = cs.namespace(|| "gen_challenge_bits");
    let challenges = c.pp.challenge_count;
    let per_challenge = c.below_partition();
    let per_digest = Fr::CAPACITY as usize / per_challenge;
    let digests = challenges.div_ceil(per_digest);
    let mut out = Vec::with_capacity(challenges);
    for j in 0..digests {
        let index = head
            .partition
            .get_value()
            .map(|k| k * Fr::from(digests as u64) + Fr::from(j as u64));
        let index = alloc(&mut cs, || format!("digest_index_{j}"), index)?;
        let digest = poseidon(
            cs.namespace(|| format!("digest_{j}")),
            vec![head.comm_r_new.clone(), index],
            &POSEIDON_CONSTANTS_GEN_RANDOMNESS,
            native,
        )?;
        let bits = field_into_allocated_bits_le(
            cs.namespace(|| format!("digest_{j}_bits")),
            digest.get_value(),
        )?;
        let take = (challenges - out.len()).min(per_digest);
        out.extend(bits.chunks(per_challenge).take(take).map(<[_]>::to_vec));
    }
    Ok(out)
}

/// The challenge's `h` high bits packed, for the one `h` that h_select
/// selects (zero for the others, then their sum).
pub(super) fn high_bits<CS: ConstraintSystem<Fr>>(
    mut cs: CS,
    c_bits: &[AllocatedBit],
    h_select_bits: &[AllocatedBit],
    hs: &[usize],
) -> Result<AllocatedNum<Fr>, SynthesisError> {
    if h_select_bits.len() != hs.len() {
        return Err(malformed(
            "h_select bits and h values differ in count".into(),
        ));
    }
    let bits = booleans(c_bits);
    let mut sum = Some(Fr::from(0u64));
    for (k, (h, selected)) in hs.iter().zip(h_select_bits).enumerate() {
        let high = pack_bits(
            cs.namespace(|| format!("c_high (h={h}, k={k})")),
            &bits[bits.len() - h..],
        )?;
        let value = match selected.get_value() {
            Some(true) => high.get_value(),
            Some(false) => Some(Fr::from(0u64)),
            None => None,
        };
        let or_zero = alloc(&mut cs, || format!("c_high_or_zero (h={h}, k={k})"), value)?;
        sum = sum.zip(or_zero.get_value()).map(|(s, v)| s + v);
    }
    alloc(&mut cs, || "c_high_selected".into(), sum)
}

/// storage-proofs-core's `por_no_challenge_input` over a Poseidon tree of
/// arities `U` (base), `V` (sub-tree, 0 for none) and `W` (top tree): per
/// level, the node placed among its siblings by the challenge's bits
/// (`insert`) and their hash, made by [`crate::poseidon::poseidon_hash`].
/// The root comparison is a constraint only: nothing to allocate.
pub(super) fn por_native<U, V, W, CS>(
    mut cs: CS,
    bits: Vec<AllocatedBit>,
    leaf: AllocatedNum<Fr>,
    path: Vec<Vec<AllocatedNum<Fr>>>,
) -> Result<(), SynthesisError>
where
    U: PoseidonArity,
    V: PoseidonArity,
    W: PoseidonArity,
    CS: ConstraintSystem<Fr>,
{
    let (base, sub, top) = (U::to_usize(), V::to_usize(), W::to_usize());
    let upper = usize::from(sub > 0) + usize::from(top > 0);
    let base_levels = path
        .len()
        .checked_sub(upper)
        .ok_or_else(|| malformed(format!("a TreeR path of {} levels", path.len())))?;
    let mut cur = leaf;
    let mut bits = bits.into_iter().map(Boolean::from);
    for (height, siblings) in path.into_iter().enumerate() {
        let arity = if height < base_levels {
            base
        } else if height == base_levels && sub > 0 {
            sub
        } else {
            top
        };
        if siblings.len() + 1 != arity {
            return Err(malformed(format!(
                "{} siblings at a TreeR level of arity {arity}",
                siblings.len()
            )));
        }
        let index: Vec<Boolean> = bits
            .by_ref()
            .take(arity.trailing_zeros() as usize)
            .collect();
        if index.len() != arity.trailing_zeros() as usize {
            return Err(malformed("too few challenge bits for a TreeR path".into()));
        }
        let preimage = insert(
            &mut cs.namespace(|| format!("merkle proof insert (height={height})")),
            &cur,
            &index,
            &siblings,
        )?;
        let hash = cs.namespace(|| format!("merkle proof hash (height={height})"));
        cur = match arity {
            a if a == base => crate::poseidon::poseidon_hash(hash, &preimage, U::PARAMETERS()),
            a if a == sub => crate::poseidon::poseidon_hash(hash, &preimage, V::PARAMETERS()),
            _ => crate::poseidon::poseidon_hash(hash, &preimage, W::PARAMETERS()),
        }?;
    }
    if bits.next().is_some() {
        return Err(malformed("challenge bits left over a TreeR path".into()));
    }
    Ok(())
}
