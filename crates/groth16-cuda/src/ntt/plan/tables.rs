//! The twiddle and scaling tables a plan puts on the device: powers of a
//! root of unity or of the coset generator, whole or split in two halves,
//! and how a kernel reads one.

use blstrs::Scalar;
use ff::{Field, PrimeField};
use rayon::prelude::*;

use super::DomainPlan;
#[cfg(doc)]
use super::TableLayout;

/// Factor tables of up to 2^18 entries (8 MiB, which stays in L2) are read
/// with one lookup per element; larger ones are split in two halves whose
/// product costs one extra multiplication (only the top pass of a transform
/// above 2^18 needs that). The default of [`DomainPlan::new`];
/// [`DomainPlan::with_layout`] takes another bound ([`TableLayout`]).
pub const MAX_SINGLE_TABLE_LOG: u32 = 18;

/// A table on the device: `scale * base^i` for `i < 2^log_len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableSpec {
    pub base: Scalar,
    pub scale: Scalar,
    pub log_len: u32,
}

impl TableSpec {
    /// The table's values, computed in parallel chunks.
    pub fn values(&self) -> Vec<Scalar> {
        const CHUNK: usize = 1 << 12;
        let len = 1usize << self.log_len;
        let mut out = vec![Scalar::ZERO; len];
        out.par_chunks_mut(CHUNK)
            .enumerate()
            .for_each(|(i, chunk)| {
                let mut v = self.scale * self.base.pow_vartime([(i * CHUNK) as u64]);
                for x in chunk {
                    *x = v;
                    v *= self.base;
                }
            });
        out
    }
}

/// An index into [`DomainPlan::tables`].
pub type TableId = usize;

/// A two-level table: `lo[e mod 2^l] * hi[e >> l]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitTable {
    pub lo: TableId,
    pub hi: TableId,
    pub l: u32,
}

/// The 2^log-th root of unity bellperson uses for a domain of that size:
/// `ROOT_OF_UNITY` squared `S - log` times.
pub fn omega(log: u32) -> Scalar {
    let mut w = Scalar::ROOT_OF_UNITY;
    for _ in log..Scalar::S {
        w = w.square();
    }
    w
}

impl DomainPlan {
    /// The id of `scale * base^i, i < 2^log_len`, added unless present.
    pub(super) fn table(&mut self, base: Scalar, scale: Scalar, log_len: u32) -> TableId {
        let spec = TableSpec {
            base,
            scale,
            log_len,
        };
        if let Some(id) = self.tables.iter().position(|t| *t == spec) {
            return id;
        }
        self.tables.push(spec);
        self.tables.len() - 1
    }

    /// `scale * base^e` for e < 2^log as two tables of about 2^(log/2).
    pub(super) fn split(&mut self, base: Scalar, scale: Scalar, log: u32) -> SplitTable {
        let l = log.div_ceil(2);
        SplitTable {
            lo: self.table(base, scale, l),
            hi: self.table(base.pow_vartime([1u64 << l]), Scalar::ONE, log - l),
            l,
        }
    }

    /// `scale * base^e` for e < 2^log as one table (`hi` is the placeholder
    /// and never read: e >> log is 0).
    pub(super) fn single(&mut self, base: Scalar, scale: Scalar, log: u32) -> SplitTable {
        SplitTable {
            lo: self.table(base, scale, log),
            hi: self.one,
            l: log,
        }
    }

    /// A one-element table (the value 1), passed where a launch reads no table.
    pub fn placeholder(&self) -> TableId {
        self.one
    }

    pub(super) fn no_table(&self) -> SplitTable {
        SplitTable {
            lo: self.one,
            hi: self.one,
            l: 0,
        }
    }
}

pub(super) fn table_pow(t: (&[Scalar], &[Scalar]), l: u32, e: u32) -> Scalar {
    let mask = if l >= 32 { u32::MAX } else { (1 << l) - 1 };
    let mut f = t.0[(e & mask) as usize];
    let h = if l >= 32 { 0 } else { e >> l };
    if h != 0 {
        f *= t.1[h as usize];
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ntt::plan::LOG_BLOCK;
    use bellperson::domain::EvaluationDomain;
    use ec_gpu_gen::threadpool::Worker;

    #[test]
    fn omega_matches_bellperson() {
        let w = omega(5);
        assert_eq!(w.pow_vartime([32u64]), Scalar::ONE);
        assert_ne!(w.pow_vartime([16u64]), Scalar::ONE);
        // bellperson's fft of (0, 1, 0, ...) is omega^i.
        let mut v = vec![Scalar::ZERO; 32];
        v[1] = Scalar::ONE;
        let mut d = EvaluationDomain::from_coeffs(v).unwrap();
        d.fft(&Worker::new(), &mut None).unwrap();
        assert_eq!(d.as_ref()[1], w);
        assert_eq!(omega(LOG_BLOCK).pow_vartime([1u64 << 9]), -Scalar::ONE);
    }

    #[test]
    fn table_values() {
        let spec = TableSpec {
            base: Scalar::from(3u64),
            scale: Scalar::from(5u64),
            log_len: 13,
        };
        let v = spec.values();
        assert_eq!(v.len(), 1 << 13);
        for i in [0usize, 1, 4095, 4096, 4097, 8191] {
            assert_eq!(
                v[i],
                Scalar::from(5u64) * Scalar::from(3u64).pow_vartime([i as u64])
            );
        }
    }

    #[test]
    fn split_tables_give_every_power() {
        let mut plan = DomainPlan::new(5).unwrap();
        let w = omega(21);
        let s = plan.split(w, Scalar::from(7u64), 21);
        let lo = plan.tables[s.lo].values();
        let hi = plan.tables[s.hi].values();
        assert_eq!(s.l, 11);
        for e in [0u32, 1, 2047, 2048, 2049, (1 << 21) - 1, 123_456] {
            assert_eq!(
                table_pow((&lo, &hi), s.l, e),
                Scalar::from(7u64) * w.pow_vartime([u64::from(e)]),
                "e = {e}"
            );
        }
    }
}
