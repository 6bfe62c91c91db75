//! The circuit's QAP evaluated at tau: the scalar of every parameter point,
//! exactly as bellperson 0.27's `generate_parameters` computes them, on the
//! CPU with rayon.
//!
//! bellperson takes the powers of tau over the domain (m = the smallest power
//! of two holding every constraint), turns them into the Lagrange basis
//! polynomials evaluated at tau by an inverse FFT, and sums
//! `coeff * L_row(tau)` per variable over A, B and C. Here the Lagrange values
//! come from the closed form `L_j(tau) = Z(tau) / m * w^j / (tau - w^j)` with
//! `Z(tau) = tau^m - 1` (field arithmetic is exact, so both give the same
//! elements), and the per-variable sums from a transpose of the PCE's CSR
//! matrices: rows are constraints, the sums run down columns.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use blstrs::Scalar;
use cuzk_synth::Pce;
use cuzk_synth::pce::{COEFF_MINUS_ONE, COEFF_ONE, Csr};
use ff::{BatchInverter, Field, PrimeField};
use rayon::prelude::*;

use super::ToxicWaste;
use crate::{Groth16Error, Result};

/// The scalars of every parameter query, in file order. Points are the
/// generator (G1, and G2 for `b`) times these.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QapScalars {
    /// log2 of the evaluation domain m.
    pub domain_log2: u32,
    /// `(beta * A_i(tau) + alpha * B_i(tau) + C_i(tau)) / gamma` per input
    /// (the verifying key's IC).
    pub ic: Vec<Scalar>,
    /// `tau^i * Z(tau) / delta` for i < m - 1.
    pub h: Vec<Scalar>,
    /// `(beta * A_i(tau) + alpha * B_i(tau) + C_i(tau)) / delta` per aux
    /// variable; never zero (bellperson refuses such a circuit).
    pub l: Vec<Scalar>,
    /// `A_i(tau)` for every variable (inputs, then aux) where it is not zero:
    /// bellperson drops the identity points of the A query.
    pub a: Vec<Scalar>,
    /// `B_i(tau)` where it is not zero, for the B query in G1 and in G2.
    pub b: Vec<Scalar>,
}

impl QapScalars {
    /// Points of all queries together (G1 and G2).
    pub fn total_points(&self) -> usize {
        self.ic.len() + self.h.len() + self.l.len() + self.a.len() + 2 * self.b.len()
    }
}

/// Evaluates the QAP of the circuit recorded in `pce` at the toxic waste's
/// tau. Errors when gamma or delta is zero, when the domain would exceed
/// BLS12-381's 2^31 (bellperson's limit), when the PCE is malformed, and,
/// as bellperson does, when an aux variable's L scalar is zero (a variable
/// that no constraint uses).
pub fn evaluate_qap(pce: &Pce, waste: &ToxicWaste) -> Result<QapScalars> {
    let _s = tracing::info_span!("setup_qap", constraints = pce.num_constraints()).entered();
    let pce = &*pce.with_matrices()?;
    let gamma_inv: Scalar =
        Option::from(waste.gamma.invert()).ok_or(Groth16Error::DegenerateToxicWaste {
            what: "gamma is zero",
        })?;
    let delta_inv: Scalar =
        Option::from(waste.delta.invert()).ok_or(Groth16Error::DegenerateToxicWaste {
            what: "delta is zero",
        })?;
    let n = pce.num_constraints();
    let log2 = pce.domain_log2();
    if log2 >= Scalar::S {
        return Err(Groth16Error::DomainTooLarge { constraints: n });
    }
    let num_vars = pce.num_inputs + pce.num_aux;
    for (name, m) in [("A", &pce.a), ("B", &pce.b), ("C", &pce.c)] {
        check_matrix(name, m, n, num_vars, pce.coeff_table.len())?;
    }
    let m = 1u64 << log2;
    let tau = waste.tau;

    let lagrange = lagrange_at(&tau, log2, n);
    // coeff = Z(tau) / delta; h_i = tau^i * coeff.
    let coeff = (tau.pow_vartime([m]) - Scalar::ONE) * delta_inv;
    let h = powers_times(&tau, coeff, (m - 1) as usize);

    let at = column_sums(&pce.a, &pce.coeff_table, &lagrange, num_vars);
    let a = nonzero(&at);
    let mut ext: Vec<Scalar> = at.par_iter().map(|x| *x * waste.beta).collect();
    drop(at);
    let bt = column_sums(&pce.b, &pce.coeff_table, &lagrange, num_vars);
    let b = nonzero(&bt);
    ext.par_iter_mut()
        .zip(bt.par_iter())
        .for_each(|(e, bt)| *e += *bt * waste.alpha);
    drop(bt);
    let ct = column_sums(&pce.c, &pce.coeff_table, &lagrange, num_vars);
    ext.par_iter_mut()
        .zip(ct.par_iter())
        .for_each(|(e, ct)| *e += ct);
    drop(ct);
    drop(lagrange);

    let mut l = ext.split_off(pce.num_inputs);
    let mut ic = ext;
    ic.par_iter_mut().for_each(|e| *e *= gamma_inv);
    l.par_iter_mut().for_each(|e| *e *= delta_inv);
    if let Some(index) = l.par_iter().position_first(|e| bool::from(e.is_zero())) {
        return Err(Groth16Error::UnconstrainedVariable { index });
    }
    Ok(QapScalars {
        domain_log2: log2,
        ic,
        h,
        l,
        a,
        b,
    })
}

/// A malformed matrix would index out of bounds below: refuse it by name.
fn check_matrix(
    name: &'static str,
    m: &Csr,
    rows: usize,
    cols: usize,
    coeffs: usize,
) -> Result<()> {
    let bad = |detail: String| Groth16Error::SetupPce {
        matrix: name,
        detail,
    };
    if m.row_ptr.len() != rows + 1 {
        return Err(bad(format!(
            "{} rows where the circuit has {rows} constraints",
            m.row_ptr.len().saturating_sub(1)
        )));
    }
    if m.row_ptr.first() != Some(&0)
        || m.row_ptr.last().copied() != Some(m.cols.len() as u64)
        || m.cols.len() != m.coeffs.len()
        || m.row_ptr.windows(2).any(|w| w[0] > w[1])
    {
        return Err(bad(format!(
            "row pointers, {} columns and {} coefficients do not fit together",
            m.cols.len(),
            m.coeffs.len()
        )));
    }
    if let Some(col) = m.cols.par_iter().find_any(|&&c| c as usize >= cols) {
        return Err(bad(format!("column {col} is past the {cols} variables")));
    }
    if let Some(k) = m.coeffs.par_iter().find_any(|&&k| k as usize >= coeffs) {
        return Err(bad(format!(
            "coefficient index {k} is past the table of {coeffs}"
        )));
    }
    Ok(())
}

/// Elements per parallel task of the element-wise passes.
const TASK: usize = 1 << 14;

/// `L_j(tau)` for the first `n` of the `2^log2` Lagrange basis polynomials of
/// bellperson's domain (its omega: `ROOT_OF_UNITY` squared `S - log2` times),
/// i.e. what `EvaluationDomain::ifft` makes of the powers of tau.
pub fn lagrange_at(tau: &Scalar, log2: u32, n: usize) -> Vec<Scalar> {
    let m = 1u64 << log2;
    let mut omega = Scalar::ROOT_OF_UNITY;
    for _ in log2..Scalar::S {
        omega = omega.square();
    }
    let mut out = vec![Scalar::ZERO; n];
    let z = tau.pow_vartime([m]) - Scalar::ONE;
    if bool::from(z.is_zero()) {
        // tau is the domain point w^k: L_j(tau) is 1 for j = k, else 0.
        let mut w = Scalar::ONE;
        for k in 0..m as usize {
            if w == *tau {
                if let Some(x) = out.get_mut(k) {
                    *x = Scalar::ONE;
                }
                break;
            }
            w *= omega;
        }
        return out;
    }
    // m < 2^32 is nonzero in Fr, so the inverse exists.
    let m_inv: Scalar = Option::from(Scalar::from(m).invert()).unwrap_or(Scalar::ZERO);
    let c = z * m_inv;
    out.par_chunks_mut(TASK).enumerate().for_each(|(t, chunk)| {
        let mut w = omega.pow_vartime([(t * TASK) as u64]);
        let mut ws = Vec::with_capacity(chunk.len());
        for den in chunk.iter_mut() {
            ws.push(w);
            *den = *tau - w;
            w *= omega;
        }
        // No denominator is zero: tau is not in the domain (z != 0).
        let mut scratch = vec![Scalar::ZERO; chunk.len()];
        BatchInverter::invert_with_external_scratch(chunk, &mut scratch);
        for (x, w) in chunk.iter_mut().zip(ws) {
            *x *= c * w;
        }
    });
    out
}

/// `x^i * c` for i < n.
fn powers_times(x: &Scalar, c: Scalar, n: usize) -> Vec<Scalar> {
    let mut out = vec![Scalar::ZERO; n];
    out.par_chunks_mut(TASK).enumerate().for_each(|(t, chunk)| {
        let mut p = x.pow_vartime([(t * TASK) as u64]) * c;
        for o in chunk {
            *o = p;
            p *= x;
        }
    });
    out
}

/// The nonzero elements, in order.
fn nonzero(v: &[Scalar]) -> Vec<Scalar> {
    v.par_iter()
        .filter(|x| !bool::from(x.is_zero()))
        .copied()
        .collect()
}

/// `sum_rows coeff(row, col) * lagrange[row]` for every column: SpMV with
/// the transpose. The entries are first sorted by column (a counting sort
/// whose order within a column depends on thread timing, which the exact
/// field sum does not see), then each column is summed on its own.
/// `m` must have passed [`check_matrix`].
pub fn column_sums(m: &Csr, coeffs: &[Scalar], lagrange: &[Scalar], cols: usize) -> Vec<Scalar> {
    let counts: Vec<AtomicU32> = (0..cols).map(|_| AtomicU32::new(0)).collect();
    m.cols.par_iter().for_each(|&c| {
        counts[c as usize].fetch_add(1, Ordering::Relaxed);
    });
    let mut start = Vec::with_capacity(cols + 1);
    let mut acc = 0u64;
    start.push(0);
    for c in &counts {
        acc += u64::from(c.swap(0, Ordering::Relaxed));
        start.push(acc);
    }
    // (row << 32 | coefficient index), grouped by column.
    let entries: Vec<AtomicU64> = (0..m.nnz()).map(|_| AtomicU64::new(0)).collect();
    (0..m.rows())
        .into_par_iter()
        .with_min_len(1 << 10)
        .for_each(|row| {
            let (cols, ks) = m.row(row);
            for (&c, &k) in cols.iter().zip(ks) {
                let slot = start[c as usize]
                    + u64::from(counts[c as usize].fetch_add(1, Ordering::Relaxed));
                entries[slot as usize].store((row as u64) << 32 | u64::from(k), Ordering::Relaxed);
            }
        });
    (0..cols)
        .into_par_iter()
        .with_min_len(1 << 10)
        .map(|c| {
            let mut sum = Scalar::ZERO;
            for e in &entries[start[c] as usize..start[c + 1] as usize] {
                let e = e.load(Ordering::Relaxed);
                let (row, k) = ((e >> 32) as usize, e as u32);
                let l = &lagrange[row];
                match k {
                    COEFF_ONE => sum += l,
                    COEFF_MINUS_ONE => sum -= l,
                    _ => sum += coeffs[k as usize] * l,
                }
            }
            sum
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellperson::domain::EvaluationDomain;
    use ec_gpu_gen::threadpool::Worker;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    /// bellperson's way: powers of tau over the domain, inverse FFT.
    fn bellperson_lagrange(tau: &Scalar, n: usize) -> Vec<Scalar> {
        let mut d = EvaluationDomain::from_coeffs(vec![Scalar::ZERO; n]).unwrap();
        let mut p = Scalar::ONE;
        for x in d.as_mut() {
            *x = p;
            p *= tau;
        }
        d.ifft(&Worker::new(), &mut None).unwrap();
        let mut v = d.into_coeffs();
        v.truncate(n);
        v
    }

    #[test]
    fn lagrange_matches_bellperson_ifft() {
        let mut rng = ChaCha20Rng::seed_from_u64(3);
        for n in [1, 2, 3, 5, 8, 100, 1000, TASK + 5] {
            let log2 = n.next_power_of_two().trailing_zeros();
            let mut omega = Scalar::ROOT_OF_UNITY;
            for _ in log2..Scalar::S {
                omega = omega.square();
            }
            let m = 1u64 << log2;
            // Random tau, zero, one, and points of the domain (where the
            // closed form divides by zero), also one past n.
            let mut taus = vec![
                Scalar::random(&mut rng),
                Scalar::ZERO,
                Scalar::ONE,
                -Scalar::ONE,
                omega.pow_vartime([m - 1]),
                omega.pow_vartime([(n as u64).min(m - 1)]),
            ];
            taus.push(omega.pow_vartime([(n as u64) / 2]));
            for tau in taus {
                assert_eq!(
                    lagrange_at(&tau, log2, n),
                    bellperson_lagrange(&tau, n),
                    "n = {n}"
                );
            }
        }
    }

    fn csr(rows: &[&[(u32, u32)]]) -> Csr {
        let mut m = Csr {
            row_ptr: vec![0],
            cols: vec![],
            coeffs: vec![],
        };
        for row in rows {
            for &(c, k) in *row {
                m.cols.push(c);
                m.coeffs.push(k);
            }
            m.row_ptr.push(m.cols.len() as u64);
        }
        m
    }

    #[test]
    fn column_sums_match_a_naive_sum() {
        let mut rng = ChaCha20Rng::seed_from_u64(4);
        let coeffs = vec![
            Scalar::ONE,
            -Scalar::ONE,
            Scalar::from(2u64),
            Scalar::random(&mut rng),
        ];
        let cols = 7;
        // Empty rows, an empty column (5), a column used by every row (0).
        let rows: Vec<Vec<(u32, u32)>> = (0..3000u32)
            .map(|r| match r % 4 {
                0 => vec![],
                1 => vec![(0, 0), (1, 1), (6, 3)],
                2 => vec![(0, 2), (3, 3)],
                _ => vec![(0, 1), (2, 0), (4, 2), (6, 1)],
            })
            .collect();
        let refs: Vec<&[(u32, u32)]> = rows.iter().map(|r| r.as_slice()).collect();
        let m = csr(&refs);
        check_matrix("A", &m, rows.len(), cols, coeffs.len()).unwrap();
        let lagrange: Vec<Scalar> = (0..rows.len()).map(|_| Scalar::random(&mut rng)).collect();
        let mut want = vec![Scalar::ZERO; cols];
        for (r, row) in rows.iter().enumerate() {
            for &(c, k) in row {
                want[c as usize] += coeffs[k as usize] * lagrange[r];
            }
        }
        assert_eq!(column_sums(&m, &coeffs, &lagrange, cols), want);
        assert_eq!(want[5], Scalar::ZERO);
    }

    #[test]
    fn malformed_matrices_are_refused() {
        let good = csr(&[&[(0, 0)], &[(1, 1)]]);
        check_matrix("B", &good, 2, 2, 2).unwrap();
        let cases: Vec<(Csr, &str)> = vec![
            (
                csr(&[&[(0, 0)]]),
                "1 rows where the circuit has 2 constraints",
            ),
            (
                csr(&[&[(0, 0)], &[(2, 1)]]),
                "column 2 is past the 2 variables",
            ),
            (csr(&[&[(0, 5)], &[(1, 1)]]), "coefficient index 5"),
            (
                Csr {
                    row_ptr: vec![0, 2, 1],
                    ..good.clone()
                },
                "do not fit together",
            ),
        ];
        for (m, want) in cases {
            let err = check_matrix("B", &m, 2, 2, 2).unwrap_err().to_string();
            assert!(err.contains(want), "{err}");
            assert!(err.contains("B matrix"), "{err}");
        }
    }

    #[test]
    fn powers_are_powers() {
        let x = Scalar::from(3u64);
        let c = Scalar::from(5u64);
        let v = powers_times(&x, c, TASK * 2 + 1);
        assert_eq!(v[0], c);
        for i in [1, TASK - 1, TASK, TASK + 1, 2 * TASK] {
            assert_eq!(v[i], x.pow_vartime([i as u64]) * c);
        }
        assert!(powers_times(&x, c, 0).is_empty());
    }
}
