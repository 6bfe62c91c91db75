//! Fixed-base scalar multiplication: many scalars times one generator, from a
//! table of multiples of the generator, with signed-digit windows.
//!
//! This is the CPU twin of `kernels/setup/fixed_base.cuh`, and the table the
//! GPU uses is built here. For a window of `c` bits there are
//! [`windows`]`(c) = ceil(256 / c)` windows; window k's row holds
//! `d * 2^(c k) * G` for the digits d in `1..=2^(c - 1)`. A scalar's signed
//! digits `d_k` in `[-2^(c-1), 2^(c-1)]` satisfy `s = sum_k d_k 2^(c k)`, so
//! `s * G` is one mixed addition (or subtraction) of a table point per nonzero
//! digit, with no doubling: about 22 additions at c = 12, where a
//! double-and-add multiplication does 255 doublings and a few dozen additions.

use std::ops::Neg;

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::Field;
use group::{Curve, Group};
use rayon::prelude::*;

use crate::{Groth16Error, Result};

/// The window width used when none is asked for: on the GPU the G1 table
/// (22 windows of 2048 points, 4.3 MB) stays in L2.
pub const DEFAULT_WINDOW_BITS: u32 = 12;
/// Window widths the table and the kernels take. At 20 bits the tables hold
/// 13 windows of 2^19 points (650 MB in G1, 1.3 GB in G2): larger ones cost
/// more to build and to hold than the additions they save.
pub const WINDOW_BITS: std::ops::RangeInclusive<u32> = 2..=20;

pub use crate::digits::{signed_digits, windows};

/// Points in a table for `c`-bit windows.
pub fn table_len(c: u32) -> usize {
    windows(c) as usize * (1usize << (c - 1))
}

/// The widest window the automatic CPU choice takes: its tables stay below
/// 100 MB (G2) and take about a second to build on 2 cores.
const CPU_MAX_AUTO_WINDOW: u32 = 16;

/// The window width that minimises the CPU's work for `g1` G1 and `g2` G2
/// multiplications: table building (one addition per table point) plus one
/// addition per window per scalar, G2 operations counted three times G1's.
/// Small circuits get small tables, large ones fewer additions.
pub fn cpu_window_bits(g1: usize, g2: usize) -> u32 {
    (*WINDOW_BITS.start()..=CPU_MAX_AUTO_WINDOW)
        .min_by_key(|&c| {
            let (t, w) = (table_len(c) as u128, u128::from(windows(c)));
            (t + g1 as u128 * w) + 3 * (t + g2 as u128 * w)
        })
        .unwrap_or(DEFAULT_WINDOW_BITS)
}

/// Refuses window widths outside [`WINDOW_BITS`].
pub fn check_window_bits(c: u32) -> Result<()> {
    if WINDOW_BITS.contains(&c) {
        Ok(())
    } else {
        Err(Groth16Error::SetupWindow {
            bits: c,
            min: *WINDOW_BITS.start(),
            max: *WINDOW_BITS.end(),
        })
    }
}

/// The table for generator `g` and `c`-bit windows, row after row:
/// `table[k * 2^(c-1) + d - 1] = d * 2^(c k) * g`. Rows are built in
/// parallel, each by repeated addition and one batch normalisation.
pub fn build_table<G>(g: &G, c: u32) -> Result<Vec<G::AffineRepr>>
where
    G: Curve + Group<Scalar = Scalar> + Send + Sync,
    G::AffineRepr: Copy + Default + Send + Sync,
{
    check_window_bits(c)?;
    let half = 1usize << (c - 1);
    let rows: Vec<Vec<G::AffineRepr>> = (0..windows(c))
        .into_par_iter()
        .map(|k| {
            let base = *g * Scalar::from(2u64).pow_vartime([u64::from(c * k)]);
            let mut multiples = Vec::with_capacity(half);
            let mut acc = base;
            for _ in 0..half {
                multiples.push(acc);
                acc += base;
            }
            let mut row = vec![G::AffineRepr::default(); half];
            G::batch_normalize(&multiples, &mut row);
            row
        })
        .collect();
    Ok(rows.concat())
}

/// `s * g` from `g`'s table: the CPU twin of `setup_fixed_base_mul`.
pub fn mul_with_table<G>(table: &[G::AffineRepr], c: u32, s: &Scalar) -> G
where
    G: Curve,
    G::AffineRepr: Copy + Neg<Output = G::AffineRepr>,
{
    let half = 1usize << (c - 1);
    let mut acc = G::identity();
    for (k, d) in signed_digits(s, c).into_iter().enumerate() {
        if d == 0 {
            continue;
        }
        let p = table[k * half + d.unsigned_abs() as usize - 1];
        if d < 0 {
            acc += -p;
        } else {
            acc += p;
        }
    }
    acc
}

/// Scalars per parallel task (and per batch normalisation) on the CPU.
const CPU_TASK: usize = 1 << 10;

fn mul_many<G>(table: &[G::AffineRepr], c: u32, scalars: &[Scalar]) -> Vec<G::AffineRepr>
where
    G: Curve + Send + Sync,
    G::AffineRepr: Copy + Default + Neg<Output = G::AffineRepr> + Send + Sync,
{
    let mut out = vec![G::AffineRepr::default(); scalars.len()];
    out.par_chunks_mut(CPU_TASK)
        .zip(scalars.par_chunks(CPU_TASK))
        .for_each(|(out, scalars)| {
            let points: Vec<G> = scalars
                .iter()
                .map(|s| mul_with_table::<G>(table, c, s))
                .collect();
            G::batch_normalize(&points, out);
        });
    out
}

/// Fixed-base multiplication on the CPU (all cores), by the same table and
/// digits as the GPU kernels: the reference the GPU path is tested against,
/// and the CPU path of `cuzk`'s generator.
#[derive(Clone, Debug)]
pub struct CpuFixedBase {
    c: u32,
    g1_table: Vec<G1Affine>,
    g2_table: Vec<G2Affine>,
}

impl CpuFixedBase {
    /// Tables for the generators `g1` and `g2` with `c`-bit windows.
    pub fn new(g1: &G1Projective, g2: &G2Projective, c: u32) -> Result<Self> {
        let _s = tracing::info_span!("setup_tables", c).entered();
        Ok(CpuFixedBase {
            c,
            g1_table: build_table(g1, c)?,
            g2_table: build_table(g2, c)?,
        })
    }

    /// `s * g1` for every scalar, in affine form (the identity for 0).
    pub fn g1(&self, scalars: &[Scalar]) -> Vec<G1Affine> {
        mul_many::<G1Projective>(&self.g1_table, self.c, scalars)
    }

    /// `s * g2` for every scalar, in affine form (the identity for 0).
    pub fn g2(&self, scalars: &[Scalar]) -> Vec<G2Affine> {
        mul_many::<G2Projective>(&self.g2_table, self.c, scalars)
    }

    /// The G1 table, as the GPU receives it.
    pub fn g1_table(&self) -> &[G1Affine] {
        &self.g1_table
    }

    /// The G2 table, as the GPU receives it.
    pub fn g2_table(&self) -> &[G2Affine] {
        &self.g2_table
    }

    /// The window width in bits.
    pub fn window_bits(&self) -> u32 {
        self.c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digits::tests::edge_scalars;
    use group::prime::PrimeCurveAffine;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    #[test]
    fn table_rows_are_digit_multiples() {
        let g = G1Projective::generator() * Scalar::from(7u64);
        for c in [2, 3, 5] {
            let table = build_table(&g, c).unwrap();
            assert_eq!(table.len(), table_len(c));
            let half = 1usize << (c - 1);
            for k in 0..windows(c) as usize {
                for d in 1..=half {
                    let want = g
                        * (Scalar::from(d as u64)
                            * Scalar::from(2u64).pow_vartime([u64::from(c) * k as u64]));
                    assert_eq!(
                        table[k * half + d - 1],
                        want.to_affine(),
                        "c {c} k {k} d {d}"
                    );
                }
            }
        }
    }

    #[test]
    fn cpu_window_grows_with_the_work() {
        assert!(cpu_window_bits(0, 0) <= 3);
        let mut last = 0;
        for log2 in [4, 8, 12, 16, 20, 24, 28] {
            let c = cpu_window_bits(1 << log2, 1 << (log2 - 2));
            assert!(WINDOW_BITS.contains(&c) && c >= last, "2^{log2}: {c}");
            last = c;
        }
        assert_eq!(last, CPU_MAX_AUTO_WINDOW);
        assert!(cpu_window_bits(1 << 20, 1 << 18) >= 12);
    }

    #[test]
    fn window_bits_are_checked() {
        for c in [0, 1, 21, 64] {
            let err = build_table(&G1Projective::generator(), c).unwrap_err();
            assert!(err.to_string().contains(&format!("{c} bits")), "{err}");
        }
    }

    fn check_curve<G>(g: G, c: u32, scalars: &[Scalar], table: &[G::AffineRepr])
    where
        G: Curve + Group<Scalar = Scalar> + Send + Sync,
        G::AffineRepr: Copy
            + Default
            + Neg<Output = G::AffineRepr>
            + Send
            + Sync
            + PartialEq
            + std::fmt::Debug,
    {
        let got = mul_many::<G>(table, c, scalars);
        for (s, p) in scalars.iter().zip(&got) {
            assert_eq!(*p, (g * s).to_affine(), "c = {c}");
        }
    }

    #[test]
    fn cpu_twin_matches_scalar_multiplication() {
        let mut rng = ChaCha20Rng::seed_from_u64(2);
        let g1 = G1Projective::random(&mut rng);
        let g2 = G2Projective::random(&mut rng);
        for c in [2, 7, 12, 16] {
            let mut scalars = edge_scalars(c);
            scalars.extend((0..40).map(|_| Scalar::random(&mut rng)));
            // Repeated scalars and a scalar with its negation side by side.
            scalars.push(scalars[scalars.len() - 1]);
            scalars.push(-scalars[scalars.len() - 1]);
            let fb = CpuFixedBase::new(&g1, &g2, c).unwrap();
            check_curve(g1, c, &scalars, fb.g1_table());
            if c != 16 {
                check_curve(g2, c, &scalars, fb.g2_table());
            }
        }
    }

    #[test]
    fn zero_gives_the_identity_and_lengths_are_kept() {
        let fb =
            CpuFixedBase::new(&G1Projective::generator(), &G2Projective::generator(), 4).unwrap();
        assert!(fb.g1(&[]).is_empty());
        let scalars = vec![Scalar::ZERO; CPU_TASK + 3];
        assert!(fb.g1(&scalars).iter().all(|p| bool::from(p.is_identity())));
        assert!(fb.g2(&scalars).iter().all(|p| bool::from(p.is_identity())));
    }
}
