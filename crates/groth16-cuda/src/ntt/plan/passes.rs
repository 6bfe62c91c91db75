//! How a transform's index bits are split into passes of at most a block's
//! 2^LOG_BLOCK elements, and the largest domain.

use blstrs::Scalar;
use ff::PrimeField;

/// At most 2^LOG_BLOCK elements per block (`NTT_LOG_BLOCK`): 32 KiB of shared
/// memory, and the order of the stage-twiddle table.
pub const LOG_BLOCK: u32 = 10;
/// The most bits a pass above the bottom one takes. Such a pass reads rows of
/// 2^(LOG_BLOCK - bits) consecutive elements, so 9 bits still reads 64-byte
/// runs; a 2^26 transform is then 10 + 8 + 8 bits. Not tuned: the passes are
/// bound by multiplications (each at 80-85% of the Fr multiplication rate,
/// H200, bench-data/ntt/2026-11-29-ea85b80-h.json), so the split of bits
/// mainly moves the per-element factor multiplications around.
pub const MAX_UPPER_BITS: u32 = 9;
/// The largest domain: bellperson refuses log2 >= Fr's two-adicity (32).
pub const MAX_LOG2: u32 = Scalar::S - 1;

/// One pass: the index bits `[lo, lo + bits)`, in blocks of 2^bits rows by
/// 2^log_cols neighbouring columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pass {
    pub lo: u32,
    pub bits: u32,
    pub log_cols: u32,
}

impl Pass {
    /// One past the pass's highest bit.
    pub fn hi(&self) -> u32 {
        self.lo + self.bits
    }
}

/// The passes of a 2^log2 transform, bottom (lowest bits) first: one pass of
/// up to [`LOG_BLOCK`] bits over contiguous elements, then passes of at most
/// [`MAX_UPPER_BITS`] bits each, as even as possible (smaller ones lower).
pub fn passes(log2: u32) -> Vec<Pass> {
    if log2 == 0 {
        return Vec::new();
    }
    let bottom = log2.min(LOG_BLOCK);
    let mut out = vec![Pass {
        lo: 0,
        bits: bottom,
        log_cols: 0,
    }];
    let rest = log2 - bottom;
    if rest == 0 {
        return out;
    }
    let count = rest.div_ceil(MAX_UPPER_BITS);
    let (size, extra) = (rest / count, rest % count);
    let mut lo = bottom;
    for i in 0..count {
        let bits = size + u32::from(i >= count - extra);
        out.push(Pass {
            lo,
            bits,
            log_cols: LOG_BLOCK - bits,
        });
        lo += bits;
    }
    out
}

/// `ntt_j_major` of kernels/ntt/ntt.cuh: whether the stage pair (st, st + 1)
/// of a pass of `bits` stages over 2^lc columns numbers its quads with the
/// row bits above st + 1 before j, so that each j owns a run of at least a
/// warp's 32 consecutive quads and the warps of j = 0 skip their twiddles of
/// 1 as a whole. Not at st = 0 (every quad has j = 0 there), nor where st +
/// lc > 4: there a run's rows would pile on fewer shared-memory banks than
/// the usual order's.
pub fn j_major(st: u32, lc: u32, bits: u32) -> bool {
    st >= 1 && st + lc <= 4 && bits + lc >= st + 7
}

/// `ntt_slot` of kernels/ntt/ntt.cuh: where element i of a block sits in
/// shared memory, i with its low five bits XORed by (i >> 5) << lc: a
/// permutation of each group of 32 consecutive elements.
pub fn slot(i: u32, lc: u32) -> u32 {
    i ^ (((i >> 5) << lc) & 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_cover_every_bit_once() {
        assert!(passes(0).is_empty());
        for log2 in 1..=MAX_LOG2 {
            let p = passes(log2);
            let mut next = 0;
            for (i, pass) in p.iter().enumerate() {
                assert_eq!(pass.lo, next, "log2 {log2}: {p:?}");
                assert!(pass.bits >= 1 && pass.bits + pass.log_cols <= LOG_BLOCK);
                assert!(pass.log_cols <= pass.lo, "columns come from the bits below");
                if i == 0 {
                    assert_eq!(pass.log_cols, 0);
                    assert_eq!(pass.bits, log2.min(LOG_BLOCK));
                } else {
                    assert!(pass.bits <= MAX_UPPER_BITS);
                    assert_eq!(pass.bits + pass.log_cols, LOG_BLOCK);
                }
                next = pass.hi();
            }
            assert_eq!(next, log2);
        }
        // The sizes the benchmark reports.
        let bits = |log2| passes(log2).iter().map(|p| p.bits).collect::<Vec<_>>();
        assert_eq!(bits(22), [10, 6, 6]);
        assert_eq!(bits(24), [10, 7, 7]);
        assert_eq!(bits(26), [10, 8, 8]);
        assert_eq!(bits(27), [10, 8, 9]);
        assert_eq!(bits(10), [10]);
        assert_eq!(bits(3), [3]);
    }

    /// The shared-memory slots permute each group of 32 consecutive
    /// elements (so a warp's consecutive accesses stay conflict-free), for
    /// every column count a pass has.
    #[test]
    fn slots_permute_each_group_of_32() {
        for lc in 0..=LOG_BLOCK {
            for group in 0..1u32 << (LOG_BLOCK - 5) {
                let mut seen: Vec<u32> =
                    (group * 32..group * 32 + 32).map(|i| slot(i, lc)).collect();
                seen.sort_unstable();
                assert_eq!(
                    seen,
                    (group * 32..group * 32 + 32).collect::<Vec<_>>(),
                    "lc {lc}"
                );
            }
        }
    }

    /// j first only where every j owns at least 32 quads, never at st = 0.
    #[test]
    fn j_first_pairs_have_runs_of_a_warp() {
        for bits in 2..=LOG_BLOCK {
            for lc in 0..=LOG_BLOCK - bits {
                for st in 0..bits - 1 {
                    if j_major(st, lc, bits) {
                        assert!(st >= 1);
                        assert!(bits + lc - 2 - st >= 5, "bits {bits}, lc {lc}, st {st}");
                    }
                }
            }
        }
        // The pairs at st = 2 of a 2^26 transform's passes.
        assert!(j_major(2, 0, 10) && j_major(2, 2, 8));
        assert!(!j_major(4, 2, 8) && !j_major(3, 2, 8));
    }
}
