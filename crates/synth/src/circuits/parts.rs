//! `parts:N`: N independent parts synthesized the way WindowPoSt
//! synthesizes its sectors: on a constraint system that is extensible
//! (`ConstraintSystem::is_extensible`, as bellperson's prover is), each part
//! in its own system (`CS::new()`, a temporary ONE input first) in parallel,
//! then appended in order with `extend`; on any other system, one part
//! after the other. Both ways give the same variables and constraints.
//!
//! Each part: a public input x, then 32 rows x_(j+1) = x_j * (x_j + k_j)
//! with per-part constants k_j (so parts intern their coefficients in
//! different orders), a row (x + 3) * 1 = y using ONE in B, and y * (-1) =
//! z. 35N+1 constraints in total (34 per part, then bellperson's row per
//! public input: one per part and ONE); N in 1..=4096.

use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use ff::Field;
use rayon::prelude::*;

use super::{Family, check_size, random_nonzero, structure_rng, witness_rng};

/// Multiplication rows per part.
const ROWS: usize = 32;

/// See the module docs of `parts`.
#[derive(Clone, Debug)]
pub struct Parts {
    count: u32,
    witness_seed: u64,
    /// One after the other even on an extensible system (for tests).
    sequential: bool,
}

impl Parts {
    pub fn new(count: u32, witness_seed: u64) -> Self {
        Parts {
            count,
            witness_seed,
            sequential: false,
        }
    }

    /// The same circuit, synthesized one part after the other whatever the
    /// constraint system: the layout the extensible way must reproduce.
    pub fn sequential(mut self) -> Self {
        self.sequential = true;
        self
    }
}

/// Part `i`'s constants and its starting value.
fn part_data(count: u32, witness_seed: u64, i: u32) -> (Vec<Scalar>, Scalar) {
    let mut structure = structure_rng("parts", &[u64::from(count), u64::from(i)]);
    let ks = (0..ROWS).map(|_| random_nonzero(&mut structure)).collect();
    let mut witness = witness_rng("parts", witness_seed ^ (u64::from(i) << 32));
    (ks, random_nonzero(&mut witness))
}

fn synthesize_part<CS: ConstraintSystem<Scalar>>(
    cs: &mut CS,
    ks: &[Scalar],
    x0: Scalar,
) -> Result<(), SynthesisError> {
    let mut value = x0;
    let mut x = cs.alloc_input(|| "x", || Ok(value))?;
    for (j, k) in ks.iter().enumerate() {
        let next = value * (value + k);
        let out = cs.alloc(|| format!("x{}", j + 1), || Ok(next))?;
        let k = *k;
        cs.enforce(
            || format!("step {j}"),
            |lc| lc + x,
            |lc| lc + x + (k, CS::one()),
            |lc| lc + out,
        );
        (x, value) = (out, next);
    }
    let three = Scalar::from(3u64);
    let y_value = value + three;
    let y = cs.alloc(|| "y", || Ok(y_value))?;
    cs.enforce(
        || "plus three",
        |lc| lc + x + (three, CS::one()),
        |lc| lc + CS::one(),
        |lc| lc + y,
    );
    let z = cs.alloc(|| "z", || Ok(-y_value))?;
    cs.enforce(|| "negate", |lc| lc + y, |lc| lc - CS::one(), |lc| lc + z);
    Ok(())
}

impl Circuit<Scalar> for Parts {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        check_size(Family::Parts, self.count)?;
        let (count, seed) = (self.count, self.witness_seed);
        if CS::is_extensible() && !self.sequential {
            let parts = (0..count)
                .into_par_iter()
                .map(|i| {
                    let mut part = CS::new();
                    part.alloc_input(|| "temp ONE", || Ok(Scalar::ONE))?;
                    let (ks, x0) = part_data(count, seed, i);
                    synthesize_part(&mut part.namespace(|| format!("part {i}")), &ks, x0)?;
                    Ok(part)
                })
                .collect::<Result<Vec<CS>, SynthesisError>>()?;
            for part in &parts {
                cs.extend(part);
            }
        } else {
            for i in 0..count {
                let (ks, x0) = part_data(count, seed, i);
                synthesize_part(&mut cs.namespace(|| format!("part {i}")), &ks, x0)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Pce, Witness};

    fn same_pce(x: &Pce, y: &Pce) {
        assert_eq!((x.num_inputs, x.num_aux), (y.num_inputs, y.num_aux));
        for (m, n) in [(&x.a, &y.a), (&x.b, &y.b), (&x.c, &y.c)] {
            assert_eq!(m.rows(), n.rows());
            for i in 0..m.rows() {
                assert_eq!(m.row(i), n.row(i), "row {i}");
            }
        }
        assert_eq!(x.coeff_table, y.coeff_table);
        for (d, e) in [
            (&x.a_aux_density, &y.a_aux_density),
            (&x.b_input_density, &y.b_input_density),
            (&x.b_aux_density, &y.b_aux_density),
        ] {
            assert_eq!(d.iter().collect::<Vec<_>>(), e.iter().collect::<Vec<_>>());
        }
    }

    #[test]
    fn extending_gives_the_layout_of_one_part_after_the_other() {
        for count in [1, 2, 7] {
            let extended = Pce::record(Parts::new(count, 0)).unwrap();
            let sequential = Pce::record(Parts::new(count, 0).sequential()).unwrap();
            same_pce(&extended, &sequential);
            assert_eq!(extended.num_inputs, 1 + count as usize);
            assert_eq!(extended.num_constraints(), 35 * count as usize + 1);
            // ONE is used in B by every part: its B density bit is set once.
            assert!(extended.b_input_density.get(0));

            let w = Witness::synthesize(Parts::new(count, 5)).unwrap();
            let v = Witness::synthesize(Parts::new(count, 5).sequential()).unwrap();
            assert_eq!(w, v);
            assert_eq!(w.inputs.len(), extended.num_inputs);
            assert_eq!(w.aux.len(), extended.num_aux);
            crate::evaluate(&extended, &w).expect("the extended witness satisfies the PCE");
        }
    }

    #[test]
    fn names_survive_extension() {
        let pce = Pce::record_with_names(Parts::new(3, 0)).unwrap();
        let names = pce.names.as_ref().unwrap();
        assert_eq!(names.len(), pce.num_constraints());
        // Parts are recorded without names; their rows are numbered.
        assert_eq!(names[0], "extended/0");
        assert!(names.last().unwrap().starts_with("input constraint"));
    }
}
