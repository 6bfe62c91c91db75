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
}
