//! a = A·w, b = B·w, c = C·w by parallel sparse matrix-vector products, and
//! the row-by-row check that (A·w)·(B·w) = C·w.

use blstrs::Scalar;
use ff::Field;
use rayon::prelude::*;

use crate::pce::{COEFF_MINUS_ONE, COEFF_ONE, Csr};
use crate::{Pce, Result, SynthError, Witness};

/// Rows per rayon task: large enough that scheduling is noise, small enough
/// to balance rows of uneven length.
const ROWS_PER_TASK: usize = 4096;

/// The evaluations of A·w, B·w and C·w, one element per constraint.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Abc {
    pub a: Vec<Scalar>,
    pub b: Vec<Scalar>,
    pub c: Vec<Scalar>,
}

/// Checks that `witness` has the shape `pce` was recorded with.
pub fn check_shape(pce: &Pce, witness: &Witness) -> Result<()> {
    if witness.inputs.len() != pce.num_inputs || witness.aux.len() != pce.num_aux {
        return Err(SynthError::ShapeMismatch {
            expected_inputs: pce.num_inputs,
            expected_aux: pce.num_aux,
            found_inputs: witness.inputs.len(),
            found_aux: witness.aux.len(),
        });
    }
    Ok(())
}

/// out = m·w for the witness `[inputs | aux]`, rows in parallel.
pub fn spmv(pce: &Pce, m: &Csr, witness: &Witness, out: &mut [Scalar]) -> Result<()> {
    check_shape(pce, witness)?;
    if out.len() != m.rows() {
        return Err(SynthError::LengthMismatch {
            what: "SpMV output",
            expected: m.rows(),
            found: out.len(),
        });
    }
    let table = &pce.coeff_table;
    out.par_chunks_mut(ROWS_PER_TASK)
        .enumerate()
        .for_each(|(chunk, out)| {
            let first = chunk * ROWS_PER_TASK;
            for (r, o) in out.iter_mut().enumerate() {
                let (cols, coeffs) = m.row(first + r);
                let mut acc = Scalar::ZERO;
                for (&col, &k) in cols.iter().zip(coeffs) {
                    let v = pce.value(&witness.inputs, &witness.aux, col);
                    match k {
                        COEFF_ONE => acc += v,
                        COEFF_MINUS_ONE => acc -= v,
                        k => acc += table[k as usize] * v,
                    }
                }
                *o = acc;
            }
        });
    Ok(())
}

/// a, b, c = A·w, B·w, C·w into caller-provided slices (pinned buffers in
/// the engine), each `pce.num_constraints()` long. Does not check
/// satisfaction: see [`check_satisfied`].
pub fn evaluate_into(
    pce: &Pce,
    witness: &Witness,
    a: &mut [Scalar],
    b: &mut [Scalar],
    c: &mut [Scalar],
) -> Result<()> {
    let _s = tracing::info_span!("spmv", rows = pce.num_constraints()).entered();
    // A PCE released from host memory is read again (slow; the engine keeps
    // the matrices where it evaluates on the CPU).
    let pce = &*pce.with_matrices()?;
    spmv(pce, &pce.a, witness, a)?;
    spmv(pce, &pce.b, witness, b)?;
    spmv(pce, &pce.c, witness, c)
}

/// a, b, c = A·w, B·w, C·w, checked row by row: a witness that does not
/// satisfy the circuit is an error naming the first failing constraint.
pub fn evaluate(pce: &Pce, witness: &Witness) -> Result<Abc> {
    let n = pce.num_constraints();
    let mut abc = Abc {
        a: vec![Scalar::ZERO; n],
        b: vec![Scalar::ZERO; n],
        c: vec![Scalar::ZERO; n],
    };
    evaluate_into(pce, witness, &mut abc.a, &mut abc.b, &mut abc.c)?;
    check_satisfied(pce, &abc.a, &abc.b, &abc.c)?;
    Ok(abc)
}

/// Checks a[i]·b[i] = c[i] for every row; reports the first row that fails,
/// with its namespace path when the PCE recorded names.
pub fn check_satisfied(pce: &Pce, a: &[Scalar], b: &[Scalar], c: &[Scalar]) -> Result<()> {
    let n = pce.num_constraints();
    for (what, v) in [("a", a), ("b", b), ("c", c)] {
        if v.len() != n {
            return Err(SynthError::LengthMismatch {
                what,
                expected: n,
                found: v.len(),
            });
        }
    }
    let first_bad = (0..n.div_ceil(ROWS_PER_TASK))
        .into_par_iter()
        .find_map_first(|chunk| {
            let start = chunk * ROWS_PER_TASK;
            (start..n.min(start + ROWS_PER_TASK)).find(|&i| a[i] * b[i] != c[i])
        });
    match first_bad {
        None => Ok(()),
        Some(index) => Err(SynthError::Unsatisfied {
            index,
            path: pce.names.as_ref().and_then(|n| n.get(index).cloned()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use bellperson::{Circuit, ConstraintSystem, SynthesisError};

    use super::*;

    /// x * y = z with an input z and a chain of squares, optionally wrong.
    #[derive(Clone)]
    struct Small {
        x: Scalar,
        bad: bool,
    }

    impl Circuit<Scalar> for Small {
        fn synthesize<CS: ConstraintSystem<Scalar>>(
            self,
            cs: &mut CS,
        ) -> std::result::Result<(), SynthesisError> {
            let mut v = self.x;
            let mut var = cs.alloc(|| "x", || Ok(v))?;
            for i in 0..5 {
                let sq = v.square();
                let wrong = if self.bad && i == 3 {
                    Scalar::ONE
                } else {
                    Scalar::ZERO
                };
                let out = cs.alloc(|| format!("sq{i}"), || Ok(sq + wrong))?;
                cs.namespace(|| format!("round {i}")).enforce(
                    || "square",
                    |lc| lc + var,
                    |lc| lc + var,
                    |lc| lc + out,
                );
                v = sq + wrong;
                var = out;
            }
            let inp = cs.alloc_input(|| "out", || Ok(v))?;
            cs.enforce(
                || "out",
                |lc| lc + CS::one(),
                |lc| lc + inp - var + var,
                |lc| lc + var + (Scalar::from(2), CS::one()) - (Scalar::from(2), CS::one()),
            );
            Ok(())
        }
    }

    #[test]
    fn unsatisfied_constraint_is_reported_by_index_and_name() {
        let c = Small {
            x: Scalar::from(7),
            bad: true,
        };
        let pce = Pce::record_with_names(c.clone()).unwrap();
        let w = Witness::synthesize(c).unwrap();
        match evaluate(&pce, &w) {
            Err(SynthError::Unsatisfied { index, path }) => {
                // Round 3 allocates a wrong square, so row 3 is the first to fail.
                assert_eq!(index, 3);
                assert_eq!(path.as_deref(), Some("round 3/square"));
            }
            other => panic!("expected Unsatisfied, got {other:?}"),
        }
        let msg = evaluate(
            &Pce::record(Small {
                x: Scalar::from(7),
                bad: true,
            })
            .unwrap(),
            &w,
        )
        .unwrap_err()
        .to_string();
        assert!(msg.contains("constraint 3"), "{msg}");
    }

    #[test]
    fn a_released_pce_evaluates_from_its_matrices_read_again() {
        let c = Small {
            x: Scalar::from(5),
            bad: false,
        };
        let pce = Pce::record(c.clone()).unwrap();
        let w = Witness::synthesize(c).unwrap();
        let full = evaluate(&pce, &w).unwrap();
        let reads = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let source = {
            let (pce, reads) = (pce.clone(), std::sync::Arc::clone(&reads));
            crate::pce::MatrixSource::new("a copy", move || {
                reads.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Ok(pce.clone())
            })
        };
        let released = pce.release_matrices(source);
        assert!(released.a.cols.is_empty() && released.b.cols.is_empty());
        let again = evaluate(&released, &w).unwrap();
        assert_eq!((again.a, again.b, again.c), (full.a, full.b, full.c));
        assert_eq!(reads.load(std::sync::atomic::Ordering::Relaxed), 1);
        // A source that fails is an error, not an evaluation of nothing.
        let gone = pce.release_matrices(crate::pce::MatrixSource::new("a deleted file", || {
            Err("no such file".to_owned())
        }));
        let msg = evaluate(&gone, &w).unwrap_err().to_string();
        assert!(
            msg.contains("a deleted file") && msg.contains("no such file"),
            "{msg}"
        );
    }

    #[test]
    fn satisfied_small_circuit_evaluates() {
        let c = Small {
            x: Scalar::from(3),
            bad: false,
        };
        let pce = Pce::record(c.clone()).unwrap();
        let w = Witness::synthesize(c).unwrap();
        let abc = evaluate(&pce, &w).unwrap();
        assert_eq!(pce.num_inputs, 2);
        assert_eq!(pce.num_aux, 6);
        // 5 squares + 1 output + 2 input constraints.
        assert_eq!(pce.num_constraints(), 8);
        assert_eq!(abc.c[0], Scalar::from(9));
        // The cancelled `- var + var` and the cancelled constants leave no entries.
        assert_eq!(pce.b.row(5).0, &[1]);
        assert_eq!(pce.c.row(5).0.len(), 1);
        // Input constraints: A = input_i, B = C = 0.
        assert_eq!(pce.a.row(6).0, &[0]);
        assert_eq!(pce.a.row(7).0, &[1]);
        assert!(pce.b.row(7).0.is_empty() && pce.c.row(7).0.is_empty());
        assert!(pce.b_input_density.get(1) && !pce.b_input_density.get(0));
    }

    #[test]
    fn witness_of_another_shape_is_refused() {
        let pce = Pce::record(Small {
            x: Scalar::ONE,
            bad: false,
        })
        .unwrap();
        let w = Witness {
            inputs: vec![Scalar::ONE],
            aux: vec![],
        };
        assert!(matches!(
            evaluate(&pce, &w),
            Err(SynthError::ShapeMismatch { .. })
        ));
    }
}
