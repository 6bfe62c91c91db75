//! `mul-chain:K`: x_{i+1} = x_i * (x_i + k_i), a chain of full-field
//! multiplications whose B side carries a constant, with a public input at
//! each end. Exactly 2^K constraints in total, so it fills its domain: the
//! simplest dense-scalar workload (every witness value is a random-looking
//! field element, unlike the mostly 0/1 values of Filecoin circuits).

use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use ff::Field;

use super::{Family, check_size, random_nonzero, structure_rng, witness_rng};

/// See the module docs of `mul_chain`. Layout: inputs ONE, x_0, y; aux
/// x_1..=x_n with n = 2^K - 4; rows: n chain steps, then x_n * ONE = y; plus
/// bellperson's 3 input rows.
#[derive(Clone, Debug)]
pub struct MulChain {
    log_size: u32,
    witness_seed: u64,
}

impl MulChain {
    pub fn new(log_size: u32, witness_seed: u64) -> Self {
        MulChain {
            log_size,
            witness_seed,
        }
    }
}

/// Rows besides the chain steps: the output binding and bellperson's three
/// input rows (ONE, x_0, y).
const FIXED_ROWS: usize = 4;

impl Circuit<Scalar> for MulChain {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        check_size(Family::MulChain, self.log_size)?;
        let steps = (1usize << self.log_size) - FIXED_ROWS;
        let mut constants = structure_rng("mul-chain", &[u64::from(self.log_size)]);
        let mut witness = witness_rng("mul-chain", self.witness_seed);

        let mut value = random_nonzero(&mut witness);
        let mut var = cs.alloc_input(|| "x0", || Ok(value))?;
        for i in 0..steps {
            let k = Scalar::random(&mut constants);
            let next_value = value * (value + k);
            let next = cs.alloc(|| format!("x{}", i + 1), || Ok(next_value))?;
            cs.enforce(
                || format!("step {i}"),
                |lc| lc + var,
                |lc| lc + var + (k, CS::one()),
                |lc| lc + next,
            );
            var = next;
            value = next_value;
        }
        let out = cs.alloc_input(|| "y", || Ok(value))?;
        cs.enforce(
            || "output",
            |lc| lc + var,
            |lc| lc + CS::one(),
            |lc| lc + out,
        );
        Ok(())
    }
}
