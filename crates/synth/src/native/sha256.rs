//! SHA-256 with the variables, values and constraints of
//! `bellperson::gadgets::sha256::sha256`, made without building linear
//! combinations up front.
//!
//! bellperson's gadget spends most of a witness's time on linear
//! combinations that a witness-only system ([`WitnessCs`](crate::WitnessCs),
//! [`PartCs`](crate::PartCs)) never reads: every 32-bit addition sums its
//! operands' bits into one and `MultiEq` packs several additions' into a
//! growing pair it clones each time. Here word values are summed as native
//! integers, the result bits are allocated with [`AllocatedBit::alloc`]
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

use bellperson::gadgets::boolean::{AllocatedBit, Boolean};
use bellperson::{ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::{Field, PrimeField};

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

/// A 32-bit word of the gadget: its bits, least significant first, and its
/// value when every bit's value is known (bellperson's `UInt32`).
#[derive(Clone)]
pub struct Word {
    bits: [Boolean; 32],
    value: Option<u32>,
}

impl std::fmt::Debug for Word {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let constant = self.bits.iter().filter(|b| b.is_constant()).count();
        f.debug_struct("Word")
            .field("value", &self.value)
            .field("constant_bits", &constant)
            .finish()
    }
}

impl Word {
    /// A constant word (no variables).
    pub fn constant(value: u32) -> Word {
        Word {
            bits: std::array::from_fn(|i| Boolean::Constant((value >> i) & 1 == 1)),
            value: Some(value),
        }
    }

    /// The word of 32 bits, most significant first.
    pub fn from_bits_be(bits: &[Boolean]) -> Word {
        assert_eq!(bits.len(), 32);
        let mut value = Some(0u32);
        for b in bits {
            value = match (value, b.get_value()) {
                (Some(v), Some(bit)) => Some((v << 1) | u32::from(bit)),
                _ => None,
            };
        }
        Word {
            bits: std::array::from_fn(|i| bits[31 - i].clone()),
            value,
        }
    }

    /// The word's bits, most significant first.
    pub fn into_bits_be(self) -> impl Iterator<Item = Boolean> {
        self.bits.into_iter().rev()
    }

    /// The word's bits, least significant first.
    pub fn bits(&self) -> &[Boolean; 32] {
        &self.bits
    }

    /// The word's value, when known.
    pub fn value(&self) -> Option<u32> {
        self.value
    }

    fn is_constant(&self) -> bool {
        self.bits.iter().all(Boolean::is_constant)
    }

    /// Rotated right by `by` bits (no allocation).
    pub fn rotr(&self, by: usize) -> Word {
        let by = by % 32;
        Word {
            bits: std::array::from_fn(|i| self.bits[(i + by) % 32].clone()),
            value: self.value.map(|v| v.rotate_right(by as u32)),
        }
    }

    /// Shifted right by `by` bits, zeros in (no allocation).
    pub fn shr(&self, by: usize) -> Word {
        let by = by % 32;
        Word {
            bits: std::array::from_fn(|i| {
                self.bits
                    .get(i + by)
                    .cloned()
                    .unwrap_or(Boolean::Constant(false))
            }),
            value: self.value.map(|v| v >> by),
        }
    }

    /// Bitwise xor: bellpepper's `Boolean::xor` bit by bit, least
    /// significant first.
    pub fn xor<CS: ConstraintSystem<Scalar>>(
        &self,
        mut cs: CS,
        other: &Word,
    ) -> Result<Word, SynthesisError> {
        let mut bits = std::array::from_fn(|_| Boolean::Constant(false));
        for (i, bit) in bits.iter_mut().enumerate() {
            *bit = Boolean::xor(
                cs.namespace(|| format!("xor of bit {i}")),
                &self.bits[i],
                &other.bits[i],
            )?;
        }
        Ok(Word {
            bits,
            value: self.value.zip(other.value).map(|(a, b)| a ^ b),
        })
    }

    /// (e and f) xor ((not e) and g), bit by bit with bellpepper's
    /// `Boolean::sha256_ch`.
    pub fn sha256_ch<CS: ConstraintSystem<Scalar>>(
        mut cs: CS,
        e: &Word,
        f: &Word,
        g: &Word,
    ) -> Result<Word, SynthesisError> {
        let mut bits = std::array::from_fn(|_| Boolean::Constant(false));
        for (i, bit) in bits.iter_mut().enumerate() {
            *bit = Boolean::sha256_ch(
                cs.namespace(|| format!("ch {i}")),
                &e.bits[i],
                &f.bits[i],
                &g.bits[i],
            )?;
        }
        let value = match (e.value, f.value, g.value) {
            (Some(e), Some(f), Some(g)) => Some((e & f) ^ (!e & g)),
            _ => None,
        };
        Ok(Word { bits, value })
    }

    /// (a and b) xor (a and c) xor (b and c), bit by bit with bellpepper's
    /// `Boolean::sha256_maj`.
    pub fn sha256_maj<CS: ConstraintSystem<Scalar>>(
        mut cs: CS,
        a: &Word,
        b: &Word,
        c: &Word,
    ) -> Result<Word, SynthesisError> {
        let mut bits = std::array::from_fn(|_| Boolean::Constant(false));
        for (i, bit) in bits.iter_mut().enumerate() {
            *bit = Boolean::sha256_maj(
                cs.namespace(|| format!("maj {i}")),
                &a.bits[i],
                &b.bits[i],
                &c.bits[i],
            )?;
        }
        let value = match (a.value, b.value, c.value) {
            (Some(a), Some(b), Some(c)) => Some((a & b) ^ (a & c) ^ (b & c)),
            _ => None,
        };
        Ok(Word { bits, value })
    }
}

/// The sum of 2 to 10 words modulo 2³², as bellperson's `UInt32::addmany`
/// on a `MultiEq`: `sums` holds the equality for the compression
/// function's packed constraints.
fn addmany<CS: ConstraintSystem<Scalar>>(
    mut cs: CS,
    sums: &mut Sums,
    operands: &[&Word],
) -> Result<Word, SynthesisError> {
    assert!((2..=10).contains(&operands.len()));

    let mut total = Some(0u64);
    let mut all_constant = true;
    for op in operands {
        total = total.zip(op.value).map(|(t, v)| t + u64::from(v));
        all_constant &= op.is_constant();
    }
    let modular = total.map(|t| t as u32);
    if all_constant && let Some(v) = modular {
        return Ok(Word::constant(v));
    }

    // As many result bits as the largest possible sum needs.
    let max = operands.len() as u64 * u64::from(u32::MAX);
    let n = (u64::BITS - max.leading_zeros()) as usize;
    let mut result = [0u64; 64];
    let mut bits = std::array::from_fn(|_| Boolean::Constant(false));
    for (i, code) in result.iter_mut().enumerate().take(n) {
        let bit = AllocatedBit::alloc(
            cs.namespace(|| format!("result bit {i}")),
            total.map(|t| (t >> i) & 1 == 1),
        )?;
        *code = pack_var(bit.get_variable());
        if i < 32 {
            bits[i] = Boolean::Is(bit);
        }
    }
    sums.enforce_equal(&mut cs, operands, &result[..n]);

    Ok(Word {
        bits,
        value: modular,
    })
}

/// Boolean kinds in a packed bit: the two low bits, then whether the
/// variable is an input, then its index.
const KIND_FALSE: u64 = 0;
const KIND_TRUE: u64 = 1;
const KIND_IS: u64 = 2;
const KIND_NOT: u64 = 3;
const INPUT: u64 = 4;

fn pack_var(v: Variable) -> u64 {
    match v.get_unchecked() {
        Index::Input(i) => ((i as u64) << 3) | INPUT,
        Index::Aux(i) => (i as u64) << 3,
    }
}

fn unpack_var(code: u64) -> Variable {
    let i = (code >> 3) as usize;
    Variable(if code & INPUT != 0 {
        Index::Input(i)
    } else {
        Index::Aux(i)
    })
}

fn pack(b: &Boolean) -> u64 {
    match b {
        Boolean::Constant(false) => KIND_FALSE,
        Boolean::Constant(true) => KIND_TRUE,
        Boolean::Is(a) => pack_var(a.get_variable()) | KIND_IS,
        Boolean::Not(a) => pack_var(a.get_variable()) | KIND_NOT,
    }
}

/// `coeff` times a packed bit, the way `Boolean::lc(one, coeff)` makes it.
fn bit_lc(code: u64, one: Variable, coeff: Scalar) -> LinearCombination<Scalar> {
    let zero = LinearCombination::zero();
    match code & 3 {
        KIND_FALSE => zero,
        KIND_TRUE => zero + (coeff, one),
        KIND_IS => zero + (coeff, unpack_var(code)),
        _ => zero + (coeff, one) - (coeff, unpack_var(code)),
    }
}

/// One addition waiting in [`Sums`]: its operands' packed bits (32 each)
/// then its result's, from `start` in [`Sums::codes`].
#[derive(Debug)]
struct Pending {
    start: usize,
    operands: usize,
    result_bits: usize,
    /// Bits used before it: its equality is scaled by 2^shift.
    shift: usize,
}

/// bellperson's `MultiEq` with its linear combinations deferred: the
/// additions whose equalities share the next constraint, packed, turned
/// into linear combinations only inside `enforce`'s closures.
#[derive(Debug, Default)]
struct Sums {
    ops: usize,
    bits_used: usize,
    codes: Vec<u64>,
    pending: Vec<Pending>,
}

impl Sums {
    /// `MultiEq::enforce_equal(num_bits, operands' sum, result)`: the
    /// pending equalities are enforced first when this one would take the
    /// total past the field's capacity.
    fn enforce_equal<CS: ConstraintSystem<Scalar>>(
        &mut self,
        cs: &mut CS,
        operands: &[&Word],
        result: &[u64],
    ) {
        let num_bits = result.len();
        if Scalar::CAPACITY as usize <= self.bits_used + num_bits {
            self.flush(cs);
        }
        assert!((Scalar::CAPACITY as usize) > self.bits_used + num_bits);
        self.pending.push(Pending {
            start: self.codes.len(),
            operands: operands.len(),
            result_bits: num_bits,
            shift: self.bits_used,
        });
        for op in operands {
            self.codes.extend(op.bits.iter().map(pack));
        }
        self.codes.extend_from_slice(result);
        self.bits_used += num_bits;
    }

    /// What `MultiEq` enforces when it is dropped.
    fn finish<CS: ConstraintSystem<Scalar>>(&mut self, cs: &mut CS) {
        if self.bits_used > 0 {
            self.flush(cs);
        }
    }

    fn flush<CS: ConstraintSystem<Scalar>>(&mut self, cs: &mut CS) {
        let ops = self.ops;
        let (codes, pending) = (&self.codes, &self.pending);
        cs.enforce(
            || format!("multieq {ops}"),
            |_| Self::side(codes, pending, CS::one(), true),
            |lc| lc + CS::one(),
            |_| Self::side(codes, pending, CS::one(), false),
        );
        self.codes.clear();
        self.pending.clear();
        self.bits_used = 0;
        self.ops += 1;
    }

    /// The packed left side (the operands' sums) or right side (the
    /// results), built in bellperson's order.
    fn side(
        codes: &[u64],
        pending: &[Pending],
        one: Variable,
        operands: bool,
    ) -> LinearCombination<Scalar> {
        let mut side = LinearCombination::zero();
        for p in pending {
            let ops_end = p.start + 32 * p.operands;
            let mut lc = LinearCombination::zero();
            if operands {
                for word in codes[p.start..ops_end].chunks(32) {
                    let mut coeff = Scalar::ONE;
                    for &code in word {
                        lc = lc + &bit_lc(code, one, coeff);
                        coeff = coeff.double();
                    }
                }
            } else {
                let mut coeff = Scalar::ONE;
                for &code in &codes[ops_end..ops_end + p.result_bits] {
                    lc = lc + (coeff, unpack_var(code));
                    coeff = coeff.double();
                }
            }
            let scale = Scalar::from(2u64).pow_vartime([p.shift as u64]);
            side = side + (scale, &lc);
        }
        side
    }
}

#[cfg(test)]
mod tests {
    use bellperson::Circuit;
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
