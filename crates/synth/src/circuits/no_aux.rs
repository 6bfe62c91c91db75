//! `no-aux:N`: only public inputs, no aux variables at all, so bellperson's
//! L query and every aux-side vector are empty: x_i * x_(i+1) = y_i for
//! i < N, every x and y an input. Inputs land in A, B and C.
//! 3N+2 constraints in total (N rows, 2N+2 inputs with ONE).

use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar;

use super::{Family, check_size, random_nonzero, witness_rng};

/// See the module docs of `no_aux`.
#[derive(Clone, Debug)]
pub struct NoAux {
    count: u32,
    witness_seed: u64,
}

impl NoAux {
    pub fn new(count: u32, witness_seed: u64) -> Self {
        NoAux {
            count,
            witness_seed,
        }
    }
}

impl Circuit<Scalar> for NoAux {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        check_size(Family::NoAux, self.count)?;
        let mut witness = witness_rng("no-aux", self.witness_seed);
        let mut x_value = random_nonzero(&mut witness);
        let mut x = cs.alloc_input(|| "x0", || Ok(x_value))?;
        for i in 0..self.count {
            let next_value = random_nonzero(&mut witness);
            let next = cs.alloc_input(|| format!("x{}", i + 1), || Ok(next_value))?;
            let y_value = x_value * next_value;
            let y = cs.alloc_input(|| format!("y{i}"), || Ok(y_value))?;
            cs.enforce(
                || format!("product {i}"),
                |lc| lc + x,
                |lc| lc + next,
                |lc| lc + y,
            );
            (x, x_value) = (next, next_value);
        }
        Ok(())
    }
}
