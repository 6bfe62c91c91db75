//! Additions of [`Word`]s modulo 2³² (bellperson's `UInt32::addmany`) and
//! their equalities, packed into shared constraints as bellperson's `MultiEq`
//! packs them, with the linear combinations built only inside `enforce`.

use bellperson::gadgets::boolean::{AllocatedBit, Boolean};
use bellperson::{ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::{Field, PrimeField};

use super::uint32::Word;

/// The sum of 2 to 10 words modulo 2³², as bellperson's `UInt32::addmany`
/// on a `MultiEq`: `sums` holds the equality for the compression
/// function's packed constraints.
pub(super) fn addmany<CS: ConstraintSystem<Scalar>>(
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
pub(super) struct Sums {
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
    pub(super) fn finish<CS: ConstraintSystem<Scalar>>(&mut self, cs: &mut CS) {
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
