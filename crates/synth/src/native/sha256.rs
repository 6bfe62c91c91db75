//! SHA-256 with the variables, values and constraints of
//! `bellperson::gadgets::sha256::sha256`, made without building linear
//! combinations up front.
//!
//! bellperson's gadget spends most of a witness's time on linear
//! combinations that a witness-only system ([`WitnessCs`](crate::WitnessCs),
//! [`PartCs`](crate::PartCs)) never reads: every 32-bit addition sums its
//! operands' bits into one and `MultiEq` packs several additions' into a
//! growing pair it clones each time. Here word values are summed as native
//! integers, the result bits are allocated with [`AllocatedBit::alloc`](bellperson::gadgets::boolean::AllocatedBit::alloc)
//! exactly where bellperson allocates them, and the additions' packed
//! equalities are built only inside the closures passed to `enforce`: a
//! system that records constraints (the PCE recorder, bellperson's test
//! system) gets bellperson's constraints, names and term order included; a
//! witness system never calls the closures and pays for none of it.
//!
//! What follows bellperson, allocation for allocation:
//!
//! - Bit operations (xor, `ch`, `maj`) use bellpepper's [`Boolean`]
//!   functions themselves, with their constant folding: xor with a constant
//!   allocates nothing (`x` or `!x`); xor of `Is`/`Not` with `Not`/`Is`
//!   allocates the xor of the underlying bits and returns its negation;
//!   `ch` and `maj` fold constants into at most one `and` (one allocation,
//!   or none when it folds further) and otherwise allocate their result,
//!   `maj` then allocating `b and c` as well (result first).
//! - An addition of `n` words allocates `bitlen(n · (2³² − 1))` result bits
//!   (33 for two words, 34 for three or four, 35 for five to eight),
//!   however small the operands are, constants included, and keeps
//!   the low 32; it allocates nothing and returns a constant word when every
//!   operand bit is constant.
//! - `MultiEq` only groups the additions' equalities into constraints (a
//!   new one when the next would pass the field's capacity, the rest when
//!   the compression function ends); it allocates nothing.
//! - Rotations and shifts only rename bits; the padding, the length, the
//!   initial hash value and the round constants are constants.
//! - Order within a block: the message schedule w\[16..64\] first (per
//!   word: two xors for σ0, two for σ1, then the four-word addition); then
//!   per round: the deferred `e` addition (from the second round), Σ1's two
//!   xors, `ch`, the deferred `a` addition (from the second round), Σ0's two
//!   xors, `maj`; then the new hash words h0 (eight words), h1, h2, h3
//!   (two each), h4 (seven), h5, h6, h7 (two each).
use bellperson::gadgets::boolean::Boolean;
use bellperson::{ConstraintSystem, SynthesisError};
use blstrs::Scalar;

use super::multieq::{Sums, addmany};
pub use super::uint32::Word;

#[allow(clippy::unreadable_literal)]
const ROUND_CONSTANTS: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

#[allow(clippy::unreadable_literal)]
const IV: [u32; 8] = [
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
];

/// SHA-256 of `input` (bits, most significant bit of the first byte first;
/// a multiple of 8), returning the digest's 256 bits in the same order.
///
/// Allocates the same variables with the same values, enforces the same
/// constraints (under the same names) and returns the same bits as
/// `bellperson::gadgets::sha256::sha256(cs, input)`, including when values
/// are unknown.
pub fn sha256<CS: ConstraintSystem<Scalar>>(
    mut cs: CS,
    input: &[Boolean],
) -> Result<Vec<Boolean>, SynthesisError> {
    assert!(
        input.len().is_multiple_of(8),
        "SHA-256 input of {} bits",
        input.len()
    );
    let len = input.len() as u64;
    let padded_len = (input.len() + 1 + 64).next_multiple_of(512);
    let mut padded = Vec::with_capacity(padded_len);
    padded.extend_from_slice(input);
    padded.push(Boolean::Constant(true));
    padded.resize(padded_len - 64, Boolean::Constant(false));
    padded.extend(
        (0..64)
            .rev()
            .map(|i| Boolean::Constant((len >> i) & 1 == 1)),
    );

    let mut cur = iv();
    for (i, block) in padded.chunks(512).enumerate() {
        cur = sha256_compression_function(cs.namespace(|| format!("block {i}")), block, &cur)?;
    }
    Ok(cur.into_iter().flat_map(Word::into_bits_be).collect())
}

/// SHA-256's initial hash value, as constant words.
pub fn iv() -> Vec<Word> {
    IV.iter().map(|&v| Word::constant(v)).collect()
}

/// SHA-256's compression function of one 512-bit block (bits, most
/// significant first) and the current hash value: the next hash value, as
/// `bellperson::gadgets::sha256::sha256_compression_function` makes it.
pub fn sha256_compression_function<CS: ConstraintSystem<Scalar>>(
    mut cs: CS,
    input: &[Boolean],
    current: &[Word],
) -> Result<Vec<Word>, SynthesisError> {
    assert_eq!(input.len(), 512);
    assert_eq!(current.len(), 8);

    let mut sums = Sums::default();

    let mut w: Vec<Word> = Vec::with_capacity(64);
    w.extend(input.chunks(32).map(Word::from_bits_be));
    for i in 16..64 {
        let mut cs = cs.namespace(|| format!("w extension {i}"));
        let x = &w[i - 15];
        let s0 = x
            .rotr(7)
            .xor(cs.namespace(|| "first xor for s0"), &x.rotr(18))?
            .xor(cs.namespace(|| "second xor for s0"), &x.shr(3))?;
        let y = &w[i - 2];
        let s1 = y
            .rotr(17)
            .xor(cs.namespace(|| "first xor for s1"), &y.rotr(19))?
            .xor(cs.namespace(|| "second xor for s1"), &y.shr(10))?;
        let next = addmany(
            cs.namespace(|| "computation of w[i]"),
            &mut sums,
            &[&w[i - 16], &s0, &w[i - 7], &s1],
        )?;
        w.push(next);
    }

    /// What a round leaves for the next one's deferred additions:
    /// e = temp1 + d and a = temp1 + Σ0 + maj, where temp1 = h + Σ1 + ch
    /// + k + w (five words, in this order).
    struct Deferred {
        temp1: [Word; 5],
        d: Word,
        s0: Word,
        maj: Word,
    }

    let mut b = current[1].clone();
    let mut c = current[2].clone();
    let mut d = current[3].clone();
    let mut f = current[5].clone();
    let mut g = current[6].clone();
    let mut h = current[7].clone();
    let mut prev: Option<Deferred> = None;

    for (i, wi) in w.into_iter().enumerate() {
        let mut cs = cs.namespace(|| format!("compression round {i}"));

        let new_e = match &prev {
            Some(r) => addmany(
                cs.namespace(|| "deferred e computation"),
                &mut sums,
                &[
                    &r.temp1[0],
                    &r.temp1[1],
                    &r.temp1[2],
                    &r.temp1[3],
                    &r.temp1[4],
                    &r.d,
                ],
            )?,
            None => current[4].clone(),
        };
        let s1 = new_e
            .rotr(6)
            .xor(cs.namespace(|| "first xor for s1"), &new_e.rotr(11))?
            .xor(cs.namespace(|| "second xor for s1"), &new_e.rotr(25))?;
        let ch = Word::sha256_ch(cs.namespace(|| "ch"), &new_e, &f, &g)?;

        let new_a = match &prev {
            Some(r) => addmany(
                cs.namespace(|| "deferred a computation"),
                &mut sums,
                &[
                    &r.temp1[0],
                    &r.temp1[1],
                    &r.temp1[2],
                    &r.temp1[3],
                    &r.temp1[4],
                    &r.s0,
                    &r.maj,
                ],
            )?,
            None => current[0].clone(),
        };
        let s0 = new_a
            .rotr(2)
            .xor(cs.namespace(|| "first xor for s0"), &new_a.rotr(13))?
            .xor(cs.namespace(|| "second xor for s0"), &new_a.rotr(22))?;
        let maj = Word::sha256_maj(cs.namespace(|| "maj"), &new_a, &b, &c)?;

        prev = Some(Deferred {
            temp1: [h, s1, ch, Word::constant(ROUND_CONSTANTS[i]), wi],
            d,
            s0,
            maj,
        });
        h = g;
        g = f;
        f = new_e;
        d = c;
        c = b;
        b = new_a;
    }

    let r = prev.expect("64 rounds");
    let t = &r.temp1;
    let h0 = addmany(
        cs.namespace(|| "deferred h0 computation"),
        &mut sums,
        &[
            &t[0],
            &t[1],
            &t[2],
            &t[3],
            &t[4],
            &r.s0,
            &r.maj,
            &current[0],
        ],
    )?;
    let h1 = addmany(cs.namespace(|| "new h1"), &mut sums, &[&current[1], &b])?;
    let h2 = addmany(cs.namespace(|| "new h2"), &mut sums, &[&current[2], &c])?;
    let h3 = addmany(cs.namespace(|| "new h3"), &mut sums, &[&current[3], &d])?;
    let h4 = addmany(
        cs.namespace(|| "deferred h4 computation"),
        &mut sums,
        &[&t[0], &t[1], &t[2], &t[3], &t[4], &r.d, &current[4]],
    )?;
    let h5 = addmany(cs.namespace(|| "new h5"), &mut sums, &[&current[5], &f])?;
    let h6 = addmany(cs.namespace(|| "new h6"), &mut sums, &[&current[6], &g])?;
    let h7 = addmany(cs.namespace(|| "new h7"), &mut sums, &[&current[7], &h])?;

    // bellperson's MultiEq enforces what it still holds when it is dropped,
    // at the end of the compression function.
    sums.finish(&mut cs);

    Ok(vec![h0, h1, h2, h3, h4, h5, h6, h7])
}

#[cfg(test)]
mod tests {
    use bellperson::Circuit;
    use bellperson::gadgets::boolean::AllocatedBit;
    use bellperson::gadgets::sha256::sha256 as bellperson_sha256;
    use bellperson::gadgets::test::TestConstraintSystem;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use sha2::Digest;

    use super::*;
    use crate::{Pce, WitnessCs};

    /// Input lengths in bits: one block and its edges (440 is the longest
    /// input that pads into one block, 448 the shortest that needs two),
    /// several blocks, and a PoRep label's 1248 bytes.
    const LENGTHS: [usize; 12] = [
        0,
        8,
        256,
        440,
        448,
        504,
        512,
        1024,
        1536,
        2056,
        4104,
        1248 * 8,
    ];

    #[derive(Clone, Copy, Debug)]
    enum Mode {
        /// Every bit allocated.
        Allocated,
        /// Every bit constant.
        Constant,
        /// Allocated, negated allocated and constant bits at random.
        Mixed,
    }

    const MODES: [Mode; 3] = [Mode::Allocated, Mode::Constant, Mode::Mixed];

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Kind {
        Constant,
        Is,
        Not,
    }

    /// Input bits: their values and how they are given.
    fn specs(bits: usize, mode: Mode, seed: u64) -> Vec<(bool, Kind)> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ ((bits as u64) << 8));
        (0..bits)
            .map(|_| {
                let kind = match mode {
                    Mode::Allocated => Kind::Is,
                    Mode::Constant => Kind::Constant,
                    Mode::Mixed => [Kind::Constant, Kind::Is, Kind::Not][rng.gen_range(0..3)],
                };
                (rng.r#gen(), kind)
            })
            .collect()
    }

    /// Allocates the input bits (values unknown unless `values`).
    fn alloc_input<CS: ConstraintSystem<Scalar>>(
        cs: &mut CS,
        specs: &[(bool, Kind)],
        values: bool,
    ) -> Vec<Boolean> {
        specs
            .iter()
            .enumerate()
            .map(|(i, &(v, kind))| {
                let mut alloc = |v: bool| {
                    AllocatedBit::alloc(cs.namespace(|| format!("input {i}")), values.then_some(v))
                        .expect("an input bit allocates")
                };
                match kind {
                    Kind::Constant => Boolean::Constant(v),
                    Kind::Is => Boolean::Is(alloc(v)),
                    Kind::Not => Boolean::Is(alloc(!v)).not(),
                }
            })
            .collect()
    }

    fn bytes(specs: &[(bool, Kind)]) -> Vec<u8> {
        specs
            .chunks(8)
            .map(|byte| {
                byte.iter()
                    .fold(0u8, |acc, &(v, _)| (acc << 1) | u8::from(v))
            })
            .collect()
    }

    fn digest_bits(out: &[Boolean]) -> Vec<u8> {
        out.chunks(8)
            .map(|byte| {
                byte.iter().fold(0u8, |acc, b| {
                    (acc << 1) | u8::from(b.get_value().expect("output values are known"))
                })
            })
            .collect()
    }

    /// Same variant, value and variable.
    fn same(a: &Boolean, b: &Boolean) -> bool {
        match (a, b) {
            (Boolean::Constant(x), Boolean::Constant(y)) => x == y,
            (Boolean::Is(x), Boolean::Is(y)) | (Boolean::Not(x), Boolean::Not(y)) => {
                x.get_value() == y.get_value()
                    && x.get_variable().get_unchecked() == y.get_variable().get_unchecked()
            }
            _ => false,
        }
    }

    fn variant(b: &Boolean) -> &'static str {
        match b {
            Boolean::Constant(_) => "constant",
            Boolean::Is(_) => "is",
            Boolean::Not(_) => "not",
        }
    }

    #[test]
    fn witness_and_output_match_bellperson_and_the_digest() {
        for bits in LENGTHS {
            for mode in MODES {
                let specs = specs(bits, mode, 7);
                let mut theirs = WitnessCs::with_capacity(1, 0);
                let input = alloc_input(&mut theirs, &specs, true);
                let expected = bellperson_sha256(&mut theirs, &input).expect("bellperson's");
                let mut ours = WitnessCs::with_capacity(1, 0);
                let input = alloc_input(&mut ours, &specs, true);
                let out = sha256(&mut ours, &input).expect("native");

                let what = format!("{bits} bits, {mode:?}");
                assert_eq!(out.len(), 256, "{what}");
                for (i, (a, b)) in out.iter().zip(&expected).enumerate() {
                    assert!(
                        same(a, b),
                        "{what}: output bit {i}: {} {:?} vs bellperson's {} {:?}",
                        variant(a),
                        a.get_value(),
                        variant(b),
                        b.get_value()
                    );
                }
                let (ours, theirs) = (ours.into_witness(), theirs.into_witness());
                assert_eq!(ours.inputs, theirs.inputs, "{what}");
                assert_eq!(ours.aux.len(), theirs.aux.len(), "{what}");
                assert!(ours.aux == theirs.aux, "{what}: aux values differ");
                if matches!(mode, Mode::Constant) {
                    assert!(ours.aux.is_empty(), "{what}: constants allocate nothing");
                }

                let digest = sha2::Sha256::digest(bytes(&specs));
                assert_eq!(digest_bits(&out), digest.as_slice(), "{what}");
            }
        }
    }

    #[test]
    fn empty_input_digest() {
        let mut cs = WitnessCs::with_capacity(1, 0);
        let out = sha256(&mut cs, &[]).expect("native");
        let digest: Vec<u8> = (0..32)
            .map(|i| {
                u8::from_str_radix(
                    &"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
                        [2 * i..2 * i + 2],
                    16,
                )
                .expect("hex")
            })
            .collect();
        assert_eq!(digest_bits(&out), digest);
        assert!(out.iter().all(Boolean::is_constant));
        assert_eq!(cs.aux_len(), 0);
    }

    /// The input bits and SHA-256 by bellperson or natively, for the PCE
    /// recorder.
    struct Sha {
        specs: Vec<(bool, Kind)>,
        values: bool,
        native: bool,
    }

    impl Circuit<Scalar> for Sha {
        fn synthesize<CS: ConstraintSystem<Scalar>>(
            self,
            cs: &mut CS,
        ) -> Result<(), SynthesisError> {
            let input = alloc_input(cs, &self.specs, self.values);
            let cs = cs.namespace(|| "sha256");
            if self.native {
                sha256(cs, &input)?;
            } else {
                bellperson_sha256(cs, &input)?;
            }
            Ok(())
        }
    }

    #[test]
    fn constraints_match_bellperson() {
        for bits in LENGTHS {
            for mode in MODES {
                for values in [true, false] {
                    let specs = specs(bits, mode, 11);
                    let record = |native| {
                        let circuit = Sha {
                            specs: specs.clone(),
                            values,
                            native,
                        };
                        if bits <= 1024 {
                            Pce::record_with_names(circuit)
                        } else {
                            Pce::record(circuit)
                        }
                        .expect("records")
                    };
                    let (ours, theirs) = (record(true), record(false));
                    let what = format!("{bits} bits, {mode:?}, values {values}");
                    assert_eq!(ours.num_aux, theirs.num_aux, "{what}");
                    assert_eq!(ours.a.row_ptr.len(), theirs.a.row_ptr.len(), "{what}");
                    assert!(ours == theirs, "{what}: the PCEs differ");
                }
            }
        }
    }

    #[test]
    fn satisfied_with_bellpersons_names_and_constraints() {
        for bits in [0, 440, 1024] {
            for mode in MODES {
                let specs = specs(bits, mode, 13);
                let synth = |native| {
                    let mut cs = TestConstraintSystem::<Scalar>::new();
                    Sha {
                        specs: specs.clone(),
                        values: true,
                        native,
                    }
                    .synthesize(&mut cs)
                    .expect("synthesizes");
                    cs
                };
                let (ours, theirs) = (synth(true), synth(false));
                let what = format!("{bits} bits, {mode:?}");
                assert!(ours.is_satisfied(), "{what}");
                assert_eq!(ours.num_constraints(), theirs.num_constraints(), "{what}");
                assert_eq!(ours.hash(), theirs.hash(), "{what}");
                if bits == 440 {
                    assert!(ours.pretty_print() == theirs.pretty_print(), "{what}");
                }
            }
        }
    }
}
