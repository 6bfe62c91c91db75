//! `repeated-vars:N`: linear combinations that name a variable more than
//! once. bellperson's `LinearCombination` merges repeats into one term, and a
//! repeat that cancels leaves a term with coefficient exactly zero, which the
//! prover's density trackers skip. A PCE and its density bitmaps must do the
//! same. Per block (x, y random aux):
//!
//! 1. `(x + y + x + 2x) * (y + y) = z`: repeats, one interleaved with another
//!    variable (A = 4x + y, B = 2y);
//! 2. `(y + x - x + k·x - k·x) * (ONE) = y`: x cancels to a zero coefficient
//!    inside one lc while x is used elsewhere (k a random constant);
//! 3. `(x + 3g - 3g) * (y + g - g) = g`: g appears in A and B only with
//!    cancelling coefficients, so its A and B density is zero; C keeps it
//!    constrained (bellperson refuses an aux with no nonzero coefficient).
//!
//! Plus one public input u with `(u + u - u) * (ONE + u - u) = u`: an input
//! whose B density is zero. 3N+3 constraints in total (3N + 1 rows, ONE and u).

use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use ff::Field;

use super::{Family, check_size, random_nonzero, structure_rng, witness_rng};

/// See the module docs of `repeated_vars`.
#[derive(Clone, Debug)]
pub struct RepeatedVars {
    blocks: u32,
    witness_seed: u64,
}

impl RepeatedVars {
    pub fn new(blocks: u32, witness_seed: u64) -> Self {
        RepeatedVars {
            blocks,
            witness_seed,
        }
    }
}

impl Circuit<Scalar> for RepeatedVars {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        check_size(Family::RepeatedVars, self.blocks)?;
        let mut constants = structure_rng("repeated-vars", &[u64::from(self.blocks)]);
        let mut witness = witness_rng("repeated-vars", self.witness_seed);
        let two = Scalar::ONE.double();
        let three = two + Scalar::ONE;

        let u_value = random_nonzero(&mut witness);
        let u = cs.alloc_input(|| "u", || Ok(u_value))?;
        cs.enforce(
            || "input with zero B density",
            |lc| lc + u + u - u,
            |lc| lc + CS::one() + u - u,
            |lc| lc + u,
        );

        for i in 0..self.blocks {
            let x_value = random_nonzero(&mut witness);
            let y_value = random_nonzero(&mut witness);
            let x = cs.alloc(|| format!("x{i}"), || Ok(x_value))?;
            let y = cs.alloc(|| format!("y{i}"), || Ok(y_value))?;

            let z_value = (x_value.double().double() + y_value) * y_value.double();
            let z = cs.alloc(|| format!("z{i}"), || Ok(z_value))?;
            cs.enforce(
                || format!("repeats {i}"),
                |lc| lc + x + y + x + (two, x),
                |lc| lc + y + y,
                |lc| lc + z,
            );

            let k = random_nonzero(&mut constants);
            cs.enforce(
                || format!("cancels {i}"),
                |lc| lc + y + x - x + (k, x) - (k, x),
                |lc| lc + CS::one(),
                |lc| lc + y,
            );

            let g_value = x_value * y_value;
            let g = cs.alloc(|| format!("g{i}"), || Ok(g_value))?;
            cs.enforce(
                || format!("zero A and B density {i}"),
                |lc| lc + x + (three, g) - (three, g),
                |lc| lc + y + g - g,
                |lc| lc + g,
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::circuits::tests::Recorder;
    use crate::circuits::{CircuitSpec, Family};
    use bellperson::Index;

    #[test]
    fn cancelled_terms_stay_as_explicit_zeros() {
        let spec = CircuitSpec {
            family: Family::RepeatedVars,
            size: 2,
        };
        let cs = Recorder::record(&spec, 1);
        let rows = &cs.rows;
        // Row 0: u has coefficient 1 in A, 0 in B next to ONE.
        let b0: Vec<_> = rows[0][1]
            .iter()
            .map(|(v, k)| (v.get_unchecked(), *k))
            .collect();
        assert_eq!(
            b0,
            vec![
                (Index::Input(0), Scalar::ONE),
                (Index::Input(1), Scalar::ZERO)
            ]
        );
        // Block 0 is rows 1..=3; aux x=0, y=1, z=2, g=3.
        let a1: Vec<_> = rows[1][0]
            .iter()
            .map(|(v, k)| (v.get_unchecked(), *k))
            .collect();
        assert_eq!(
            a1,
            vec![
                (Index::Aux(0), Scalar::from(4u64)),
                (Index::Aux(1), Scalar::ONE)
            ]
        );
        let a2: Vec<_> = rows[2][0]
            .iter()
            .map(|(v, k)| (v.get_unchecked(), *k))
            .collect();
        assert_eq!(
            a2,
            vec![(Index::Aux(0), Scalar::ZERO), (Index::Aux(1), Scalar::ONE)]
        );
        // g (aux 3) is never nonzero in A or B, always in C.
        let g = 3;
        for row in rows {
            for lc in &row[..2] {
                for (i, k) in lc.iter_aux() {
                    assert!(*i != g || bool::from(k.is_zero()));
                }
            }
        }
        assert!(
            rows[3][2]
                .iter_aux()
                .any(|(i, k)| *i == g && *k == Scalar::ONE)
        );
    }
}
