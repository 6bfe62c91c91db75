//! One kernel launch of a plan, as plain data: the pass and bit-reversal
//! parameters (the kernels' parameter layouts), the vectors they work on,
//! their cost, and the operations a plan has launch sequences for.

#[cfg(doc)]
use super::DomainPlan;
use super::{SplitTable, TableId, j_major};
use crate::ntt::Stages;

/// Threads per block of the default pass kernels (the variants of
/// `crate::ntt::PassKernel` have their own).
pub const THREADS: u32 = 256;
/// Threads per block of the bit-reversal kernel.
pub const BITREV_THREADS: u32 = 256;

/// Kernel parameters of one pass; the layout of `ntt_pass_params`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PassParams {
    pub log_m: u32,
    pub lo: u32,
    pub bits: u32,
    pub log_cols: u32,
    pub inverse: u32,
    pub pre: u32,
    pub post: u32,
    pub tw_bits: u32,
    pub tw_l: u32,
    pub sc_l: u32,
}

/// Kernel parameters of the bit-reversal; the layout of `ntt_bitrev_params`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BitrevParams {
    pub log_m: u32,
    pub scale: u32,
    pub sc_l: u32,
}

/// `NTT_PRE_*`: nothing, or `x = x * b - c` as the pass loads.
pub const PRE_NONE: u32 = 0;
pub const PRE_AB_MINUS_C: u32 = 1;
/// `NTT_POST_*`: nothing, `x *= scale(rev(index))` as the pass stores, or
/// `out[rev(index)] = x * scale(rev(index))` (the last DIF pass writing
/// natural order into another vector, with the bit-reversal's scaling).
pub const POST_NONE: u32 = 0;
pub const POST_SCALE_REV: u32 = 1;
pub const POST_BITREV_SCALE: u32 = 2;
/// `NTT_SCALE_*` of the bit-reversal.
pub const SCALE_NONE: u32 = 0;
pub const SCALE_CONST: u32 = 1;
pub const SCALE_DST: u32 = 2;
pub const SCALE_SRC: u32 = 3;

/// One of the three device vectors an operation works on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vector {
    A,
    B,
    C,
}

/// One kernel launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Launch {
    /// `ntt_dif_pass` or `ntt_dit_pass` over `x`, in `grid` blocks (of the
    /// pass kernel variant's threads); with `PRE_AB_MINUS_C` it also reads B
    /// and C (`x` is A).
    Pass {
        dit: bool,
        grid: u32,
        x: Vector,
        /// The vector written with `POST_BITREV_SCALE` (never `x`, and not
        /// read by the launch); `x` otherwise.
        out: Vector,
        radix: TableId,
        tw: SplitTable,
        sc: SplitTable,
        params: PassParams,
    },
    /// `ntt_bitrev` over `x`, in `grid` blocks of [`BITREV_THREADS`].
    Bitrev {
        grid: u32,
        x: Vector,
        sc: SplitTable,
        params: BitrevParams,
    },
}

impl Launch {
    /// Bytes the launch reads and writes in device memory, not counting the
    /// small tables (which stay in cache): each element read and written once,
    /// B and C read once more for the pointwise step.
    pub fn bytes(&self) -> u64 {
        const ELEM: u64 = 32;
        match self {
            Launch::Pass { params, .. } => {
                let m = 1u64 << params.log_m;
                let vectors = if params.pre == PRE_AB_MINUS_C { 4 } else { 2 };
                vectors * ELEM * m
            }
            Launch::Bitrev { params, .. } => 2 * ELEM * (1u64 << params.log_m),
        }
    }

    /// [`Launch::multiplications`] of a pass kernel whose stages run as
    /// `stages`, counted as a warp issues them. With stage pairs, a quad
    /// with j = 0 skips three of its four twiddles (those of 1): in the pair
    /// (0, 1), which a pass of an even number of bits has, that is every
    /// quad, one multiplication in four elements fewer than radix-2 stages
    /// (which skip stage 0's); in a pair at st >= 1 numbered j first
    /// ([`j_major`]) the 2^-st of its quads with j = 0 fill whole warps,
    /// which skip 3 * 2^-(st + 2) multiplications an element; so do those
    /// of passes over 2^lc >= 32 columns, whose warps hold one row's
    /// columns. Elsewhere a warp mixing j = 0 with others issues them all.
    pub fn multiplications_with(&self, stages: Stages) -> u64 {
        let radix2 = self.multiplications();
        match (self, stages) {
            (Launch::Pass { params: p, .. }, Stages::Radix4 | Stages::Radix4Plain)
                if p.bits >= 2 =>
            {
                let m = 1u64 << p.log_m;
                let odd = p.bits % 2;
                let mut skipped = if odd == 0 { m / 4 } else { 0 };
                // The pairs' lower stages: 0, 2, 4, .. or 1, 3, 5, ..
                let mut st = 2 - odd;
                while st + 1 < p.bits {
                    // j is one across a warp where the quads are numbered
                    // j first, or where a warp's 32 quads are columns of
                    // one row (2^lc >= 32).
                    let uniform = (stages == Stages::Radix4 && j_major(st, p.log_cols, p.bits))
                        || p.log_cols >= 5;
                    if uniform {
                        skipped += (3 * m) >> (st + 2);
                    }
                    st += 2;
                }
                radix2 - skipped
            }
            _ => radix2,
        }
    }

    /// Field multiplications the launch does with radix-2 stages (the
    /// kernels' cost model; [`Launch::multiplications_with`] for stage
    /// pairs): per
    /// pass, one per butterfly outside stage 0 (whose twiddles are 1), one
    /// per element for the four-step factor (two with a split table), one for
    /// the pointwise product and two for a scale from a split table (one
    /// from a whole one); the bit-reversal's scaling likewise.
    pub fn multiplications(&self) -> u64 {
        match self {
            Launch::Pass { params: p, .. } => {
                let m = 1u64 << p.log_m;
                let mut per_elem2 = u64::from(p.bits - 1); // butterflies: (bits - 1) * m / 2
                if p.tw_bits != 0 {
                    per_elem2 += if p.tw_l < p.tw_bits { 4 } else { 2 };
                }
                if p.pre == PRE_AB_MINUS_C {
                    per_elem2 += 2;
                }
                if p.post == POST_SCALE_REV || p.post == POST_BITREV_SCALE {
                    per_elem2 += if p.sc_l < p.log_m { 4 } else { 2 };
                }
                per_elem2 * m / 2
            }
            Launch::Bitrev { params: p, .. } => {
                let m = 1u64 << p.log_m;
                match p.scale {
                    SCALE_NONE => 0,
                    SCALE_CONST => m,
                    _ if p.sc_l >= p.log_m => m,
                    _ => 2 * m,
                }
            }
        }
    }
}

/// An operation on a domain of 2^log2 elements, as bellperson's
/// `EvaluationDomain` defines it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `fft`: natural order in and out.
    Fft,
    /// `ifft` (with the 1/m scaling).
    Ifft,
    /// `coset_fft`: multiply coefficient i by g^i, then `fft`.
    CosetFft,
    /// `icoset_fft`: `ifft`, then multiply coefficient i by g^-i.
    IcosetFft,
    /// The H polynomial from evaluations a, b, c (in A, B, C): iNTT, coset
    /// NTT, a*b - c, division by Z on the coset, inverse coset NTT; the
    /// result is in [`DomainPlan::h_result`] (A, or B with the fused
    /// bit-reversal; its last element is not part of h).
    H,
    /// H's first half for one vector, in A: iNTT and coset NTT (the vector's
    /// values on the coset, natural order). [`Op::H`] is `HCoset` of a, b
    /// and c, then a*b - c pointwise, then [`Op::HFinish`]: with the
    /// pointwise step apart, H needs only two vectors on the device at once.
    HCoset,
    /// H's end, from a*b - c on the coset in A: the division by Z and the
    /// inverse coset NTT, into [`DomainPlan::h_result`] (with the fused
    /// bit-reversal B, a second vector; the last element is not part of h).
    HFinish,
}
