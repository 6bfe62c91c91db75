//! Poseidon witnesses made natively: neptune's legacy Poseidon circuit
//! (`neptune::circuit::poseidon_hash`, the one storage-proofs' Poseidon
//! trees and commitments are proved with) and storage-proofs' Merkle
//! inclusion path over a Poseidon tree (`PoRCircuit`).
//!
//! The gadget keeps its state as linear combinations (`Num`s) and allocates
//! a variable where it needs one: each S-box's input, square, fourth power
//! and result, and the hash at the end. A witness system throws the linear
//! combinations away, and a `Num`'s value is just the sum of its terms'
//! values, so [`poseidon_hash`] keeps the state as field elements and
//! allocates the same values, in the same order and under the same names,
//! with plain field arithmetic (about 17 times faster). [`inclusion`]
//! follows `PoRCircuit::synthesize` step by step (storage-proofs' and
//! bellperson's own gadgets for the index bits, the insertion and the
//! packed index) with [`poseidon_hash`] for each level's hash.
//!
//! Neither adds the Poseidon constraints: they are for witness systems only
//! (`cuzk_synth::WitnessCs`, a part's system), never for recording a PCE or
//! a proving key, which always come from storage-proofs' own circuit. The
//! tests compare them with the gadgets value for value (and name for name).

use bellperson::gadgets::boolean::{AllocatedBit, Boolean};
use bellperson::gadgets::multipack;
use bellperson::gadgets::num::AllocatedNum;
use bellperson::{ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use ff::Field;
use filecoin_hashers::PoseidonArity;
use neptune::hash_type::HashType;
use neptune::poseidon::{Arity, PoseidonConstants};
use storage_proofs_core::gadgets::constraint;
use storage_proofs_core::gadgets::insertion::insert;
use storage_proofs_core::gadgets::variables::Root;

/// A Merkle inclusion path as a vanilla proof holds it
/// (`MerkleProofTrait::as_options`): per level from the leaf, the node's
/// siblings and its place among them; the base tree's levels, then the
/// sub-tree's and the top tree's (one each, where the tree has them).
pub type PathOptions = Vec<(Vec<Option<Scalar>>, Option<usize>)>;

fn malformed(what: String) -> SynthesisError {
    SynthesisError::IoError(std::io::Error::other(what))
}

/// The witness of `neptune::circuit::poseidon_hash(cs, preimage,
/// constants)`: every value the gadget allocates, in its order and under
/// its names, and the hash, allocated last as the gadget allocates it.
/// No constraints (see the module documentation).
///
/// A preimage value that is not assigned is `AssignmentMissing`, as the
/// gadget's first allocation is on a witness system; a preimage of another
/// length than the arity is refused (the gadget panics).
pub fn poseidon_hash<CS, A>(
    mut cs: CS,
    preimage: &[AllocatedNum<Scalar>],
    constants: &PoseidonConstants<Scalar, A>,
) -> Result<AllocatedNum<Scalar>, SynthesisError>
where
    CS: ConstraintSystem<Scalar>,
    A: Arity<Scalar>,
{
    let arity = A::to_usize();
    if preimage.len() != arity {
        return Err(malformed(format!(
            "a Poseidon preimage of {} elements for arity {arity}",
            preimage.len()
        )));
    }
    if let HashType::ConstantLength(length) = constants.hash_type
        && length != arity
    {
        return Err(malformed(format!(
            "a constant-length Poseidon of {length} elements for arity {arity} (the legacy \
             circuit pads nothing)"
        )));
    }
    let mut state = Vec::with_capacity(arity + 1);
    state.push(constants.domain_tag);
    for x in preimage {
        state.push(x.get_value().ok_or(SynthesisError::AssignmentMissing)?);
    }
    let mut p = Permutation {
        constants,
        next: vec![Scalar::ZERO; state.len()],
        state,
        offset: 0,
        round: 0,
    };
    let half = constants.full_rounds / 2;
    p.first_round(cs.namespace(|| "first round"))?;
    for i in 1..half {
        p.full_round(cs.namespace(|| format!("initial full round {i}")), false)?;
    }
    for i in 0..constants.partial_rounds {
        p.partial_round(cs.namespace(|| format!("partial round {i}")))?;
    }
    for i in 0..half.saturating_sub(1) {
        p.full_round(cs.namespace(|| format!("final full round {i}")), false)?;
    }
    p.full_round(cs.namespace(|| "terminal full round"), true)?;
    let hash = p.state[1];
    AllocatedNum::alloc(
        cs.namespace(|| "hash result")
            .namespace(|| "allocate for Elt::Num"),
        || Ok(hash),
    )
}

/// The legacy circuit's permutation on values: the state, the next round
/// constant to use and the rounds done (which pick the MDS matrix).
struct Permutation<'a, A: Arity<Scalar>> {
    constants: &'a PoseidonConstants<Scalar, A>,
    state: Vec<Scalar>,
    /// Scratch for the MDS product.
    next: Vec<Scalar>,
    offset: usize,
    round: usize,
}

impl<A: Arity<Scalar>> Permutation<'_, A> {
    /// The first full round: round keys added before and after each S-box;
    /// the domain tag's S-box is a constant (nothing allocated), the
    /// preimage's are already allocated, so each allocates its square, its
    /// fourth power and its result.
    fn first_round<CS: ConstraintSystem<Scalar>>(
        &mut self,
        mut cs: CS,
    ) -> Result<(), SynthesisError> {
        let w = self.state.len();
        let keys = &self.constants.compressed_round_constants[self.offset..self.offset + 2 * w];
        let (pre, post) = keys.split_at(w);
        self.offset += 2 * w;
        let tag = self.state[0] + pre[0];
        self.state[0] = tag.square().square() * tag + post[0];
        for i in 1..w {
            let cs = &mut cs.namespace(|| format!("quintic s-box {i}"));
            let l = self.state[i] + pre[i];
            let l2 = l.square();
            AllocatedNum::alloc(
                cs.namespace(|| "(l+rk)^2").namespace(|| "squared sum"),
                || Ok(l2),
            )?;
            let l4 = l2.square();
            cs.namespace(|| "l^4").alloc(|| "squared num", || Ok(l4))?;
            let l5 = l4 * l + post[i];
            AllocatedNum::alloc(
                cs.namespace(|| "l4 * (l + rk)").namespace(|| "mul_sum"),
                || Ok(l5),
            )?;
            self.state[i] = l5;
        }
        self.product_mds();
        Ok(())
    }

    /// A later full round: an S-box on every element, a round key added
    /// after each but in the last round.
    fn full_round<CS: ConstraintSystem<Scalar>>(
        &mut self,
        mut cs: CS,
        last: bool,
    ) -> Result<(), SynthesisError> {
        let w = self.state.len();
        let keys = if last {
            None
        } else {
            let keys = &self.constants.compressed_round_constants[self.offset..self.offset + w];
            self.offset += w;
            Some(keys)
        };
        for i in 0..w {
            let key = keys.map(|k| k[i]);
            self.state[i] = s_box(
                &mut cs.namespace(|| format!("quintic s-box {i}")),
                self.state[i],
                key,
            )?;
        }
        self.product_mds();
        Ok(())
    }

    /// A partial round: one S-box, on the first element.
    fn partial_round<CS: ConstraintSystem<Scalar>>(
        &mut self,
        mut cs: CS,
    ) -> Result<(), SynthesisError> {
        let key = self.constants.compressed_round_constants[self.offset];
        self.offset += 1;
        self.state[0] = s_box(
            &mut cs.namespace(|| "solitary quintic s-box"),
            self.state[0],
            Some(key),
        )?;
        self.product_mds();
        Ok(())
    }

    /// The state times the round's MDS matrix, as the legacy circuit picks
    /// it: the pre-sparse matrix after the first half of the full rounds,
    /// a sparse one after each partial round but the last, else M.
    fn product_mds(&mut self) {
        let c = self.constants;
        let sparse_offset = c.half_full_rounds - 1;
        if self.round == sparse_offset {
            self.dense(&c.pre_sparse_matrix);
        } else if self.round > sparse_offset && self.round < c.half_full_rounds + c.partial_rounds {
            let m = &c.sparse_matrixes[self.round - sparse_offset - 1];
            // Its first column is dense (w_hat), its first row v_rest, the
            // rest of its diagonal ones.
            let first = self.state[0];
            self.next[0] = dot(&self.state, &m.w_hat);
            for j in 1..self.state.len() {
                self.next[j] = self.state[j] + first * m.v_rest[j - 1];
            }
            std::mem::swap(&mut self.state, &mut self.next);
        } else {
            self.dense(&c.mds_matrices.m);
        }
        self.round += 1;
    }

    /// state[j] = sum over i of state[i] * m[i][j].
    fn dense(&mut self, m: &[Vec<Scalar>]) {
        for j in 0..self.state.len() {
            self.next[j] = self.state.iter().zip(m).map(|(x, row)| *x * row[j]).sum();
        }
        std::mem::swap(&mut self.state, &mut self.next);
    }
}

fn dot(a: &[Scalar], b: &[Scalar]) -> Scalar {
    a.iter().zip(b).map(|(x, y)| *x * y).sum()
}

/// The gadget's `quintic_s_box` on a state element that is a linear
/// combination: allocates it, its square, its fourth power and its fifth
/// power plus `key`, which it returns.
fn s_box<CS: ConstraintSystem<Scalar>>(
    cs: &mut CS,
    l: Scalar,
    key: Option<Scalar>,
) -> Result<Scalar, SynthesisError> {
    AllocatedNum::alloc(
        cs.namespace(|| "S-box input")
            .namespace(|| "allocate for Elt::Num"),
        || Ok(l),
    )?;
    let l2 = l.square();
    cs.namespace(|| "l^2").alloc(|| "squared num", || Ok(l2))?;
    let l4 = l2.square();
    cs.namespace(|| "l^4").alloc(|| "squared num", || Ok(l4))?;
    let mut l5 = l4 * l;
    if let Some(key) = key {
        l5 += key;
    }
    AllocatedNum::alloc(
        cs.namespace(|| "(l4 * l) + rk)").namespace(|| "mul_sum"),
        || Ok(l5),
    )?;
    Ok(l5)
}

/// The witness of storage-proofs' Merkle inclusion gadget over a Poseidon
/// tree of arities `U` (base), `V` (sub-tree, 0 for none) and `W` (top
/// tree): `PoRCircuit::<Tree>::synthesize(cs, leaf, path.into(), root,
/// true)`, its hashes made by [`poseidon_hash`] with filecoin-hashers'
/// constants (as `PoseidonFunction::hash_multi_leaf_circuit` makes them).
///
/// Step by step as storage-proofs: the leaf (`value`); per level of the
/// base, then the sub-tree, then the top tree, the node's place in bits
/// (`AllocatedBit`, least significant first), the siblings, the node put
/// among them (storage-proofs' `insert`) and their hash; then every place
/// bit packed into public inputs (bellperson's `pack_into_inputs`: the
/// leaf's index) and the root (`root_value`: nothing allocated for a
/// `Root::Var`) compared with the computed one. The root stays private.
///
/// A path whose levels do not fit the arities is refused (storage-proofs'
/// gadget panics on it).
pub fn inclusion<U, V, W, CS>(
    mut cs: CS,
    leaf: Root<Scalar>,
    path: &[(Vec<Option<Scalar>>, Option<usize>)],
    root: Root<Scalar>,
) -> Result<(), SynthesisError>
where
    U: PoseidonArity,
    V: PoseidonArity,
    W: PoseidonArity,
    CS: ConstraintSystem<Scalar>,
{
    let (has_sub, has_top) = (V::to_usize() > 0, W::to_usize() > 0);
    if has_top && !has_sub {
        return Err(malformed("a top tree without a sub-tree".into()));
    }
    let upper = usize::from(has_sub) + usize::from(has_top);
    let base_levels = path.len().checked_sub(upper).ok_or_else(|| {
        malformed(format!(
            "a path of {} levels over a tree with {upper} levels above its base",
            path.len()
        ))
    })?;
    let (base, upper) = path.split_at(base_levels);
    let (sub, top) = upper.split_at(usize::from(has_sub));

    let cur = leaf.allocated(cs.namespace(|| "value"))?;
    let (cur, mut bits) = sub_path::<U, _>(cs.namespace(|| "base"), cur, base)?;
    let (cur, sub_bits) = sub_path::<V, _>(cs.namespace(|| "sub"), cur, sub)?;
    let (computed_root, top_bits) = sub_path::<W, _>(cs.namespace(|| "top"), cur, top)?;
    bits.extend(sub_bits);
    bits.extend(top_bits);

    multipack::pack_into_inputs(cs.namespace(|| "path"), &bits)?;
    let root = root.allocated(cs.namespace(|| "root_value"))?;
    constraint::equal(&mut cs, || "enforce root is correct", &computed_root, &root);
    Ok(())
}

/// One tree's levels of a path (storage-proofs' `SubPath::synthesize`):
/// the node they lead to and the places' bits.
fn sub_path<A, CS>(
    mut cs: CS,
    mut cur: AllocatedNum<Scalar>,
    levels: &[(Vec<Option<Scalar>>, Option<usize>)],
) -> Result<(AllocatedNum<Scalar>, Vec<Boolean>), SynthesisError>
where
    A: PoseidonArity,
    CS: ConstraintSystem<Scalar>,
{
    let arity = A::to_usize();
    if arity == 0 {
        return match levels.len() {
            0 => Ok((cur, Vec::new())),
            n => Err(malformed(format!(
                "{n} levels for a tree that is not there"
            ))),
        };
    }
    if !arity.is_power_of_two() {
        return Err(malformed(format!("arity {arity} is not a power of two")));
    }
    let bit_count = arity.trailing_zeros() as usize;
    let mut bits = Vec::with_capacity(levels.len() * bit_count);
    for (level, (siblings, place)) in levels.iter().enumerate() {
        if siblings.len() != arity - 1 {
            return Err(malformed(format!(
                "{} siblings at a level of arity {arity}",
                siblings.len()
            )));
        }
        let cs = &mut cs.namespace(|| format!("merkle tree hash {level}"));
        let mut place_bits = Vec::with_capacity(bit_count);
        for i in 0..bit_count {
            let bit = AllocatedBit::alloc(
                cs.namespace(|| format!("index bit {i}")),
                place.map(|p| (p >> i) & 1 == 1),
            )?;
            place_bits.push(Boolean::from(bit));
        }
        bits.extend_from_slice(&place_bits);
        let siblings = siblings
            .iter()
            .enumerate()
            .map(|(i, s)| {
                AllocatedNum::alloc(cs.namespace(|| format!("path element {i}")), || {
                    s.ok_or(SynthesisError::AssignmentMissing)
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let nodes = insert(cs, &cur, &place_bits, &siblings)?;
        cur = poseidon_hash(
            cs.namespace(|| "computation of commitment hash"),
            &nodes,
            A::PARAMETERS(),
        )?;
    }
    Ok((cur, bits))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellperson::util_cs::test_cs::TestConstraintSystem;
    use cuzk_synth::{Witness, WitnessCs};
    use filecoin_hashers::poseidon::{PoseidonDomain, PoseidonHasher};
    use filecoin_hashers::{
        POSEIDON_CONSTANTS_2, POSEIDON_CONSTANTS_4, POSEIDON_CONSTANTS_8, POSEIDON_CONSTANTS_11,
    };
    use neptune::Poseidon;
    use rand_chacha::ChaCha20Rng;
    use rand_chacha::rand_core::{RngCore, SeedableRng};
    use storage_proofs_core::gadgets::por::{AuthPath, PoRCircuit};
    use storage_proofs_core::merkle::{DiskStore, MerkleTreeWrapper};
    use typenum::{U0, U2, U4, U8};

    /// The variables' names a `TestConstraintSystem` recorded (no
    /// constraints).
    fn names(cs: &TestConstraintSystem<Scalar>) -> Vec<String> {
        cs.pretty_print_list()
            .into_iter()
            .filter(|l| l.starts_with("INPUT ") || l.starts_with("AUX "))
            .collect()
    }

    /// The preimage allocated on `cs`, then hashed by `hash`: the witness
    /// and the hash's value.
    fn hash_on<CS, A, F>(
        mut cs: CS,
        values: &[Scalar],
        constants: &PoseidonConstants<Scalar, A>,
        hash: F,
    ) -> (CS, Scalar)
    where
        CS: ConstraintSystem<Scalar>,
        A: Arity<Scalar>,
        F: FnOnce(
            &mut CS,
            Vec<AllocatedNum<Scalar>>,
            &PoseidonConstants<Scalar, A>,
        ) -> Result<AllocatedNum<Scalar>, SynthesisError>,
    {
        let nums = values
            .iter()
            .enumerate()
            .map(|(i, v)| AllocatedNum::alloc(cs.namespace(|| format!("x{i}")), || Ok(*v)))
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let out = hash(&mut cs, nums, constants).unwrap();
        let value = out.get_value().unwrap();
        (cs, value)
    }

    fn gadget<CS: ConstraintSystem<Scalar>, A: Arity<Scalar>>(
        cs: &mut CS,
        nums: Vec<AllocatedNum<Scalar>>,
        constants: &PoseidonConstants<Scalar, A>,
    ) -> Result<AllocatedNum<Scalar>, SynthesisError> {
        neptune::circuit::poseidon_hash(cs.namespace(|| "poseidon"), nums, constants)
    }

    fn native<CS: ConstraintSystem<Scalar>, A: Arity<Scalar>>(
        cs: &mut CS,
        nums: Vec<AllocatedNum<Scalar>>,
        constants: &PoseidonConstants<Scalar, A>,
    ) -> Result<AllocatedNum<Scalar>, SynthesisError> {
        poseidon_hash(cs.namespace(|| "poseidon"), &nums, constants)
    }

    /// Random preimages and edge cases: all zero, all p - 1, one nonzero
    /// element (first and last), ones.
    fn preimages(arity: usize, rng: &mut ChaCha20Rng) -> Vec<Vec<Scalar>> {
        let mut out = vec![
            vec![Scalar::ZERO; arity],
            vec![-Scalar::ONE; arity],
            vec![Scalar::ONE; arity],
        ];
        for at in [0, arity - 1] {
            let mut v = vec![Scalar::ZERO; arity];
            v[at] = Scalar::from(rng.next_u64());
            out.push(v);
        }
        out.extend((0..8).map(|_| (0..arity).map(|_| Scalar::random(&mut *rng)).collect()));
        out
    }

    fn native_is_the_gadget<A: Arity<Scalar>>(constants: &PoseidonConstants<Scalar, A>) {
        let arity = A::to_usize();
        let mut rng = ChaCha20Rng::seed_from_u64(arity as u64);
        for (case, values) in preimages(arity, &mut rng).into_iter().enumerate() {
            let what = format!("arity {arity}, case {case}");
            let (theirs, their_hash) = hash_on(WitnessCs::part(), &values, constants, gadget);
            let (ours, our_hash) = hash_on(WitnessCs::part(), &values, constants, native);
            let (theirs, ours): (Witness, Witness) = (theirs.into_witness(), ours.into_witness());
            assert_eq!(ours.aux.len(), theirs.aux.len(), "{what}: aux count");
            assert!(ours == theirs, "{what}: values");
            assert_eq!(our_hash, their_hash, "{what}: hash");
            assert_eq!(
                ours.aux.last(),
                Some(&our_hash),
                "{what}: hash allocated last"
            );
            let expected = Poseidon::new_with_preimage(&values, constants).hash();
            assert_eq!(our_hash, expected, "{what}: neptune's native hash");
        }
        // Names too, once.
        let values: Vec<Scalar> = (0..arity).map(|_| Scalar::random(&mut rng)).collect();
        let (theirs, _) = hash_on(TestConstraintSystem::new(), &values, constants, gadget);
        let (ours, _) = hash_on(TestConstraintSystem::new(), &values, constants, native);
        assert_eq!(names(&ours), names(&theirs), "arity {arity}: names");
        assert_eq!(ours.scalar_aux(), theirs.scalar_aux());
        assert!(theirs.is_satisfied());
    }

    #[test]
    fn native_poseidon_is_neptune_legacy_circuit_arity_2() {
        native_is_the_gadget(&*POSEIDON_CONSTANTS_2);
    }

    #[test]
    fn native_poseidon_is_neptune_legacy_circuit_arity_4() {
        native_is_the_gadget(&*POSEIDON_CONSTANTS_4);
    }

    #[test]
    fn native_poseidon_is_neptune_legacy_circuit_arity_8() {
        native_is_the_gadget(&*POSEIDON_CONSTANTS_8);
    }

    #[test]
    fn native_poseidon_is_neptune_legacy_circuit_arity_11() {
        native_is_the_gadget(&*POSEIDON_CONSTANTS_11);
    }

    #[test]
    fn native_poseidon_refuses_what_the_gadget_cannot_hash() {
        let mut cs = WitnessCs::part();
        let x = AllocatedNum::alloc(&mut cs, || Ok(Scalar::ONE)).unwrap();
        let e = poseidon_hash(&mut cs, std::slice::from_ref(&x), &*POSEIDON_CONSTANTS_2)
            .map(|_| ())
            .unwrap_err();
        assert!(matches!(e, SynthesisError::IoError(_)), "{e:?}");
        assert!(poseidon_hash(&mut cs, &[x.clone(), x], &*POSEIDON_CONSTANTS_2).is_ok());
        // No value to hash (a system that assigns none): it is missing.
        let mut blank = bellperson::util_cs::metric_cs::MetricCS::<Scalar>::new();
        let nums = (0..2)
            .map(|_| AllocatedNum::alloc(&mut blank, || Ok(Scalar::ONE)).unwrap())
            .collect::<Vec<_>>();
        assert_eq!(nums[0].get_value(), None);
        let e = poseidon_hash(&mut blank, &nums, &*POSEIDON_CONSTANTS_2)
            .map(|_| ())
            .unwrap_err();
        assert!(matches!(e, SynthesisError::AssignmentMissing), "{e:?}");
    }

    /// A random path over a tree of arities `U`, `V`, `W`: `base` base
    /// levels and one per upper tree; each place from `place(level,
    /// arity)`.
    fn random_path<U: PoseidonArity, V: PoseidonArity, W: PoseidonArity>(
        rng: &mut ChaCha20Rng,
        base: usize,
        place: impl Fn(usize, usize) -> usize,
    ) -> PathOptions {
        let arities = std::iter::repeat_n(U::to_usize(), base).chain(
            [V::to_usize(), W::to_usize()]
                .into_iter()
                .filter(|&a| a > 0),
        );
        arities
            .enumerate()
            .map(|(level, arity)| {
                let siblings = (1..arity)
                    .map(|_| Some(Scalar::random(&mut *rng)))
                    .collect();
                (siblings, Some(place(level, arity)))
            })
            .collect()
    }

    type PoseidonTree<U, V, W> =
        MerkleTreeWrapper<PoseidonHasher, DiskStore<PoseidonDomain>, U, V, W>;

    /// The root allocated first, then the path from `leaf` by storage-proofs'
    /// gadget (`native` false) or natively.
    fn path_on<CS, U, V, W>(
        mut cs: CS,
        leaf: Scalar,
        path: &PathOptions,
        root: Scalar,
        native: bool,
    ) -> CS
    where
        CS: ConstraintSystem<Scalar>,
        U: PoseidonArity,
        V: PoseidonArity,
        W: PoseidonArity,
    {
        let root = AllocatedNum::alloc(cs.namespace(|| "comm_r_last"), || Ok(root)).unwrap();
        let ns = cs.namespace(|| "challenge_inclusion_0");
        if native {
            inclusion::<U, V, W, _>(ns, Root::Val(Some(leaf)), path, Root::Var(root))
        } else {
            PoRCircuit::<PoseidonTree<U, V, W>>::synthesize(
                ns,
                Root::Val(Some(leaf)),
                AuthPath::from(path.clone()),
                Root::Var(root),
                true,
            )
        }
        .unwrap();
        cs
    }

    /// A node's place at a level of a path, from the level and its arity.
    type Place = Box<dyn Fn(usize, usize) -> usize>;

    fn inclusion_is_por_circuit<U, V, W>()
    where
        U: PoseidonArity,
        V: PoseidonArity,
        W: PoseidonArity,
    {
        let shape = format!("{}-{}-{}", U::to_usize(), V::to_usize(), W::to_usize());
        let mut rng = ChaCha20Rng::seed_from_u64(U::to_usize() as u64 * 100 + V::to_usize() as u64);
        let salt = rng.next_u64() as usize;
        let places: [(&str, Place); 5] = [
            ("first", Box::new(|_, _| 0)),
            ("last", Box::new(|_, a| a - 1)),
            // 1, 3, 5, ...: bits that read differently in reverse.
            ("odd", Box::new(|l, a| (2 * l + 1) % a)),
            (
                "alternating",
                Box::new(|l, a| if l % 2 == 0 { 0 } else { a - 1 }),
            ),
            (
                "random",
                Box::new(move |l, a| (salt >> (3 * l)).wrapping_add(l) % a),
            ),
        ];
        for (name, place) in &places {
            for base in [1, 3] {
                let what = format!("{shape}, {base} base levels, {name} places");
                let path = random_path::<U, V, W>(&mut rng, base, place);
                let (leaf, root) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
                let theirs = path_on::<_, U, V, W>(WitnessCs::part(), leaf, &path, root, false)
                    .into_witness();
                let ours = path_on::<_, U, V, W>(WitnessCs::part(), leaf, &path, root, true)
                    .into_witness();
                assert_eq!(ours.inputs.len(), theirs.inputs.len(), "{what}: inputs");
                assert_eq!(ours.inputs, theirs.inputs, "{what}: the packed index");
                assert_eq!(ours.aux.len(), theirs.aux.len(), "{what}: aux count");
                assert!(ours == theirs, "{what}: values");

                let theirs =
                    path_on::<_, U, V, W>(TestConstraintSystem::new(), leaf, &path, root, false);
                let ours =
                    path_on::<_, U, V, W>(TestConstraintSystem::new(), leaf, &path, root, true);
                assert_eq!(names(&ours), names(&theirs), "{what}: names");
            }
        }
        // A path that does not fit the tree is refused, not a panic.
        let mut path = random_path::<U, V, W>(&mut rng, 2, |_, _| 0);
        path[0].0.pop();
        let mut cs = WitnessCs::part();
        let root = AllocatedNum::alloc(&mut cs, || Ok(Scalar::ONE)).unwrap();
        let e = inclusion::<U, V, W, _>(
            &mut cs,
            Root::Val(Some(Scalar::ONE)),
            &path,
            Root::Var(root),
        );
        assert!(
            matches!(e, Err(SynthesisError::IoError(_))),
            "{shape}: {e:?}"
        );
    }

    #[test]
    fn poseidon_inclusion_is_por_circuit_8_0_0() {
        inclusion_is_por_circuit::<U8, U0, U0>();
    }

    #[test]
    fn poseidon_inclusion_is_por_circuit_8_2_0() {
        inclusion_is_por_circuit::<U8, U2, U0>();
    }

    #[test]
    fn poseidon_inclusion_is_por_circuit_8_4_0() {
        inclusion_is_por_circuit::<U8, U4, U0>();
    }

    #[test]
    fn poseidon_inclusion_is_por_circuit_8_8_0() {
        inclusion_is_por_circuit::<U8, U8, U0>();
    }

    #[test]
    fn poseidon_inclusion_is_por_circuit_8_8_2() {
        inclusion_is_por_circuit::<U8, U8, U2>();
    }

    #[test]
    fn poseidon_inclusion_of_a_binary_tree_is_por_circuit() {
        inclusion_is_por_circuit::<U2, U0, U0>();
    }
}
