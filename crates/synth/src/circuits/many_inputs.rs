//! `many-inputs:N`: 2^N public inputs u_i, each used in A and B of
//! u_i * u_i = s_i (s_i aux), and the squares summed in one long row
//! (sum s_i) * ONE = t. Stresses the input side (IC query, input density,
//! per-input appended rows) and a row with 2^N terms.
//! 2^(N+1)+2 constraints in total (2^N + 1 rows, 2^N + 1 inputs with ONE).

use bellperson::{Circuit, ConstraintSystem, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;

use super::{Family, check_size, random_nonzero, witness_rng};

/// See the module docs of `many_inputs`.
#[derive(Clone, Debug)]
pub struct ManyInputs {
    log_inputs: u32,
    witness_seed: u64,
}

impl ManyInputs {
    pub fn new(log_inputs: u32, witness_seed: u64) -> Self {
        ManyInputs {
            log_inputs,
            witness_seed,
        }
    }
}

impl Circuit<Scalar> for ManyInputs {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        check_size(Family::ManyInputs, self.log_inputs)?;
        let n = 1usize << self.log_inputs;
        let mut witness = witness_rng("many-inputs", self.witness_seed);
        // All inputs first, as real circuits do: the input block is contiguous.
        let inputs = (0..n)
            .map(|i| {
                let value = random_nonzero(&mut witness);
                Ok((cs.alloc_input(|| format!("u{i}"), || Ok(value))?, value))
            })
            .collect::<Result<Vec<(Variable, Scalar)>, SynthesisError>>()?;

        let mut squares = Vec::with_capacity(n);
        let mut sum = Scalar::ZERO;
        for (i, &(u, value)) in inputs.iter().enumerate() {
            let square = value.square();
            let s = cs.alloc(|| format!("s{i}"), || Ok(square))?;
            cs.enforce(
                || format!("square {i}"),
                |lc| lc + u,
                |lc| lc + u,
                |lc| lc + s,
            );
            squares.push(s);
            sum += square;
        }
        let t = cs.alloc(|| "t", || Ok(sum))?;
        cs.enforce(
            || "sum",
            |lc| squares.iter().fold(lc, |lc, &s| lc + s),
            |lc| lc + CS::one(),
            |lc| lc + t,
        );
        Ok(())
    }
}
