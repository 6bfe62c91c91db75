//! `constant-only:N`: rows whose linear combinations hold only the ONE
//! variable (`CS::one()`) with constants, mixed with rows that combine a
//! variable and constants. Per block i (x random aux, y = 2x):
//!
//! 1. `(c1·ONE) * (c2·ONE) = (c1·c2)·ONE`, c1 = 3 + i, c2 = 5 + i
//!    (block 0 is (3)*(5) = 15);
//! 2. `(x) * (2·ONE) = y`;
//! 3. `(x + k·ONE) * (ONE + ONE) = y + 2k·ONE`, k a random constant and ONE
//!    repeated in B.
//!
//! Then once: `(ONE) * () = ()`, the shape of bellperson's own input rows, and
//! `() * () = ()`, a row with every lc empty. No public inputs besides ONE.
//! 3N+3 constraints in total (3N + 2 rows, ONE).

use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use ff::Field;

use super::{Family, check_size, random_nonzero, structure_rng, witness_rng};

/// See the module docs of `constant_only`.
#[derive(Clone, Debug)]
pub struct ConstantOnly {
    blocks: u32,
    witness_seed: u64,
}

impl ConstantOnly {
    pub fn new(blocks: u32, witness_seed: u64) -> Self {
        ConstantOnly {
            blocks,
            witness_seed,
        }
    }
}

impl Circuit<Scalar> for ConstantOnly {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        check_size(Family::ConstantOnly, self.blocks)?;
        let mut constants = structure_rng("constant-only", &[u64::from(self.blocks)]);
        let mut witness = witness_rng("constant-only", self.witness_seed);
        let two = Scalar::ONE.double();

        for i in 0..self.blocks {
            let c1 = Scalar::from(3 + u64::from(i));
            let c2 = Scalar::from(5 + u64::from(i));
            cs.enforce(
                || format!("constants {i}"),
                |lc| lc + (c1, CS::one()),
                |lc| lc + (c2, CS::one()),
                |lc| lc + (c1 * c2, CS::one()),
            );

            let x_value = random_nonzero(&mut witness);
            let y_value = x_value.double();
            let x = cs.alloc(|| format!("x{i}"), || Ok(x_value))?;
            let y = cs.alloc(|| format!("y{i}"), || Ok(y_value))?;
            cs.enforce(
                || format!("times two {i}"),
                |lc| lc + x,
                |lc| lc + (two, CS::one()),
                |lc| lc + y,
            );

            let k = random_nonzero(&mut constants);
            cs.enforce(
                || format!("mixed {i}"),
                |lc| lc + x + (k, CS::one()),
                |lc| lc + CS::one() + CS::one(),
                |lc| lc + y + (k.double(), CS::one()),
            );
        }
        cs.enforce(|| "B and C empty", |lc| lc + CS::one(), |lc| lc, |lc| lc);
        cs.enforce(|| "all empty", |lc| lc, |lc| lc, |lc| lc);
        Ok(())
    }
}
