//! What the NTT kernels are asked to do, as plain data: the passes of a
//! transform, the small tables they read, and the launch sequence of each
//! operation. Nothing here touches a GPU, so all of it is tested on CI,
//! including [`DomainPlan::run_on_cpu`], which executes a launch sequence
//! on the CPU with the kernels' own index arithmetic (their CPU twin).
//!
//! The kernels are in `kernels/ntt/ntt.cuh`; its header comment explains the
//! algorithm (passes of up to 2^10 elements per block in shared memory, the
//! four-step factor per element per pass, DIF for natural-to-bit-reversed and
//! DIT for bit-reversed-to-natural order).

use blstrs::Scalar;
use ff::{Field, PrimeField};
use rayon::prelude::*;

use crate::{Groth16Error, Result};

/// At most 2^LOG_BLOCK elements per block (`NTT_LOG_BLOCK`): 32 KiB of shared
/// memory, and the order of the stage-twiddle table.
pub const LOG_BLOCK: u32 = 10;
/// Threads per block of the default pass kernels (the variants of
/// `crate::ntt::PassKernel` have their own).
pub const THREADS: u32 = 256;
/// Threads per block of the bit-reversal kernel.
pub const BITREV_THREADS: u32 = 256;
/// The most bits a pass above the bottom one takes. Such a pass reads rows of
/// 2^(LOG_BLOCK - bits) consecutive elements, so 9 bits still reads 64-byte
/// runs; a 2^26 transform is then 10 + 8 + 8 bits. Not tuned: the passes are
/// bound by multiplications (each at 80-85% of the Fr multiplication rate,
/// H200, bench-data/ntt/2026-11-29-ea85b80-h.json), so the split of bits
/// mainly moves the per-element factor multiplications around.
pub const MAX_UPPER_BITS: u32 = 9;
/// Factor tables of up to 2^18 entries (8 MiB, which stays in L2) are read
/// with one lookup per element; larger ones are split in two halves whose
/// product costs one extra multiplication (only the top pass of a transform
/// above 2^18 needs that). The default of [`DomainPlan::new`];
/// [`DomainPlan::with_layout`] takes another bound ([`TableLayout`]).
pub const MAX_SINGLE_TABLE_LOG: u32 = 18;

/// How large a plan's tables may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableLayout {
    /// Factor tables of up to 2^factor_single_log entries are read with one
    /// lookup; larger ones are split in two (one multiplication an element
    /// more). A pass's factor table has 2^hi entries (hi: one past its top
    /// bit).
    pub factor_single_log: u32,
    /// H's coset scaling and final scaling from whole tables of 2^log2
    /// entries (one multiplication an element fewer each) instead of split
    /// pairs of about 2^(log2/2).
    pub whole_scales: bool,
}

impl TableLayout {
    /// Every table within 2^18 entries (8 MiB): the default.
    pub const SMALL: TableLayout = TableLayout {
        factor_single_log: MAX_SINGLE_TABLE_LOG,
        whole_scales: false,
    };
    /// Every table whole: at 2^26 the top pass's factor and H's two scalings
    /// are three tables of 2^26 entries (6 GiB), and H does 11 * 2^26
    /// multiplications fewer (one an element in each of its seven top passes,
    /// its three coset scalings and its final scaling). From 2^28 up a middle
    /// pass's factor table is whole too.
    pub const WHOLE: TableLayout = TableLayout {
        factor_single_log: MAX_LOG2,
        whole_scales: true,
    };
}

impl Default for TableLayout {
    fn default() -> Self {
        TableLayout::SMALL
    }
}

/// How a pass runs its radix-2 stages in shared memory: one stage per round
/// trip (`ntt_stage`), or two (`ntt_stage_pair`: the same butterflies on a
/// quad of rows in registers, with a lone stage 0 when the pass has an odd
/// number of bits). Both give the same values; [`DomainPlan::run_on_cpu_with`]
/// follows either's index arithmetic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stages {
    Radix2,
    Radix4,
}
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

    /// Field multiplications the launch does (the kernels' cost model): per
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

/// The 2^log-th root of unity bellperson uses for a domain of that size:
/// `ROOT_OF_UNITY` squared `S - log` times.
pub fn omega(log: u32) -> Scalar {
    let mut w = Scalar::ROOT_OF_UNITY;
    for _ in log..Scalar::S {
        w = w.square();
    }
    w
}

/// Everything about a domain of 2^log2 elements that the kernels need: its
/// passes, its tables and the launch sequences of the [`Op`]s.
#[derive(Clone, Debug)]
pub struct DomainPlan {
    log2: u32,
    passes: Vec<Pass>,
    tables: Vec<TableSpec>,
    one: TableId,
    radix: TableId,
    /// Per pass (bottom first): the factor tables, `None` for the bottom pass.
    factors: Vec<Option<SplitTable>>,
    /// minv * g^e at the bit-reversed index e (the coset step after the first iNTT).
    coset_post: SplitTable,
    /// minv / Z(g) * g^-i (the end of H).
    h_final: SplitTable,
    /// g^i (coset_fft).
    coset_pre: SplitTable,
    /// minv * g^-i (icoset_fft).
    icoset: SplitTable,
    /// [minv] (ifft).
    minv: SplitTable,
    /// H's last pass writes natural order into B (`POST_BITREV_SCALE`)
    /// instead of a bit-reversal launch over A.
    fused_bitrev: bool,
}

impl DomainPlan {
    /// The plan of a domain of 2^log2 elements, 1 <= log2 <= [`MAX_LOG2`].
    pub fn new(log2: u32) -> Result<Self> {
        Self::with_layout(log2, TableLayout::SMALL)
    }

    /// [`DomainPlan::new`] with the tables laid out as `layout` says.
    pub fn with_layout(log2: u32, layout: TableLayout) -> Result<Self> {
        if log2 == 0 || log2 > MAX_LOG2 {
            return Err(Groth16Error::NttSize {
                detail: format!("a domain of 2^{log2} elements; the NTT takes 2^1 to 2^{MAX_LOG2}"),
            });
        }
        let passes = passes(log2);
        let mut plan = DomainPlan {
            log2,
            passes: passes.clone(),
            tables: Vec::new(),
            one: 0,
            radix: 0,
            factors: Vec::new(),
            coset_post: SplitTable { lo: 0, hi: 0, l: 0 },
            h_final: SplitTable { lo: 0, hi: 0, l: 0 },
            coset_pre: SplitTable { lo: 0, hi: 0, l: 0 },
            icoset: SplitTable { lo: 0, hi: 0, l: 0 },
            minv: SplitTable { lo: 0, hi: 0, l: 0 },
            fused_bitrev: false,
        };
        let one = Scalar::ONE;
        plan.one = plan.table(one, one, 0);
        plan.radix = plan.table(omega(LOG_BLOCK), one, LOG_BLOCK);
        for pass in &passes {
            let factor = if pass.lo == 0 {
                None
            } else {
                let hi = pass.hi();
                let w = omega(hi);
                Some(if hi <= layout.factor_single_log {
                    plan.single(w, one, hi)
                } else {
                    plan.split(w, one, hi)
                })
            };
            plan.factors.push(factor);
        }

        let m = 1u64 << log2;
        let g = Scalar::MULTIPLICATIVE_GENERATOR;
        let ginv = invert(g)?;
        let minv = invert(Scalar::from(m))?;
        let zinv = invert(g.pow_vartime([m]) - Scalar::ONE)?;
        // After the first iNTT, position p holds coefficient e = rev(p); the
        // bottom pass multiplies it by minv * g^e = lo[e mod 2^l] * hi[e >> l]
        // with l = log2 - bottom bits.
        let bottom = passes[0].bits;
        let l = log2 - bottom;
        // H's two scalings (one multiplication an element fewer each when
        // their tables are whole; CosetFft and IcosetFft keep split tables).
        if layout.whole_scales {
            plan.coset_post = plan.single(g, minv, log2);
            plan.h_final = plan.single(ginv, minv * zinv, log2);
        } else {
            plan.coset_post = SplitTable {
                lo: plan.table(g, minv, l),
                hi: plan.table(g.pow_vartime([1u64 << l]), one, bottom),
                l,
            };
            plan.h_final = plan.split(ginv, minv * zinv, log2);
        }
        plan.coset_pre = plan.split(g, one, log2);
        plan.icoset = plan.split(ginv, minv, log2);
        plan.minv = SplitTable {
            lo: plan.table(one, minv, 0),
            hi: plan.one,
            l: 0,
        };
        Ok(plan)
    }

    /// This plan with H's final bit-reversal fused into the last pass of
    /// its last inverse transform (`on`), which then writes natural order
    /// into B with the final scaling: one launch and one read and write of
    /// the vector fewer. Domains of one pass (up to 2^LOG_BLOCK) keep the
    /// bit-reversal launch: their pass also reads B for a*b - c.
    pub fn with_fused_bitrev(mut self, on: bool) -> Self {
        self.fused_bitrev = on && self.passes.len() > 1;
        self
    }

    /// Where [`Op::H`] and [`Op::HFinish`] leave h: A, or B with the fused
    /// bit-reversal.
    pub fn h_result(&self) -> Vector {
        if self.fused_bitrev {
            Vector::B
        } else {
            Vector::A
        }
    }

    /// The domain's log2 size.
    pub fn log2(&self) -> u32 {
        self.log2
    }

    /// The passes of a transform, bottom first.
    pub fn passes(&self) -> &[Pass] {
        &self.passes
    }

    /// The tables the launches refer to by [`TableId`].
    pub fn tables(&self) -> &[TableSpec] {
        &self.tables
    }

    /// The id of `scale * base^i, i < 2^log_len`, added unless present.
    fn table(&mut self, base: Scalar, scale: Scalar, log_len: u32) -> TableId {
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
    fn split(&mut self, base: Scalar, scale: Scalar, log: u32) -> SplitTable {
        let l = log.div_ceil(2);
        SplitTable {
            lo: self.table(base, scale, l),
            hi: self.table(base.pow_vartime([1u64 << l]), Scalar::ONE, log - l),
            l,
        }
    }

    /// `scale * base^e` for e < 2^log as one table (`hi` is the placeholder
    /// and never read: e >> log is 0).
    fn single(&mut self, base: Scalar, scale: Scalar, log: u32) -> SplitTable {
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

    fn no_table(&self) -> SplitTable {
        SplitTable {
            lo: self.one,
            hi: self.one,
            l: 0,
        }
    }

    /// A whole DIF transform of `x` (natural order in, bit-reversed out),
    /// with `pre` fused into the first pass and, when `coset_post`, the
    /// coset scaling of the coefficients fused into the last.
    pub fn dif(&self, x: Vector, inverse: bool, pre: u32, coset_post: bool) -> Vec<Launch> {
        let post = if coset_post {
            POST_SCALE_REV
        } else {
            POST_NONE
        };
        self.dif_post(x, inverse, pre, post)
    }

    /// A whole DIF transform with `post` (`POST_*`) in its last pass.
    fn dif_post(&self, x: Vector, inverse: bool, pre: u32, post: u32) -> Vec<Launch> {
        let top = self.passes.len() - 1;
        (0..self.passes.len())
            .rev()
            .map(|i| {
                let pre = if i == top { pre } else { PRE_NONE };
                let post = if i == 0 { post } else { POST_NONE };
                self.pass(i, false, x, inverse, pre, post)
            })
            .collect()
    }

    /// A whole DIT transform of `x` (bit-reversed order in, natural out).
    pub fn dit(&self, x: Vector, inverse: bool) -> Vec<Launch> {
        (0..self.passes.len())
            .map(|i| self.pass(i, true, x, inverse, PRE_NONE, POST_NONE))
            .collect()
    }

    fn pass(&self, i: usize, dit: bool, x: Vector, inverse: bool, pre: u32, post: u32) -> Launch {
        let pass = self.passes[i];
        let tw = self.factors[i].unwrap_or(self.no_table());
        let (sc, out) = match post {
            POST_SCALE_REV => (self.coset_post, x),
            POST_BITREV_SCALE => (self.h_final, Vector::B),
            _ => (self.no_table(), x),
        };
        Launch::Pass {
            dit,
            grid: 1 << (self.log2 - pass.bits - pass.log_cols),
            x,
            out,
            radix: self.radix,
            tw,
            sc,
            params: PassParams {
                log_m: self.log2,
                lo: pass.lo,
                bits: pass.bits,
                log_cols: pass.log_cols,
                inverse: u32::from(inverse),
                pre,
                post,
                tw_bits: if pass.lo == 0 { 0 } else { pass.hi() },
                tw_l: tw.l,
                sc_l: sc.l,
            },
        }
    }

    fn bitrev(&self, x: Vector, scale: u32, sc: SplitTable) -> Launch {
        Launch::Bitrev {
            grid: (1u32 << self.log2).div_ceil(BITREV_THREADS),
            x,
            sc,
            params: BitrevParams {
                log_m: self.log2,
                scale,
                sc_l: sc.l,
            },
        }
    }

    /// The launch sequence of `op` (on A for the transforms).
    pub fn launches(&self, op: Op) -> Vec<Launch> {
        use Vector::{A, B, C};
        let mut out = Vec::new();
        match op {
            Op::Fft => {
                out.extend(self.dif(A, false, PRE_NONE, false));
                out.push(self.bitrev(A, SCALE_NONE, self.no_table()));
            }
            Op::Ifft => {
                out.extend(self.dif(A, true, PRE_NONE, false));
                out.push(self.bitrev(A, SCALE_CONST, self.minv));
            }
            Op::CosetFft => {
                out.push(self.bitrev(A, SCALE_SRC, self.coset_pre));
                out.extend(self.dit(A, false));
            }
            Op::IcosetFft => {
                out.extend(self.dif(A, true, PRE_NONE, false));
                out.push(self.bitrev(A, SCALE_DST, self.icoset));
            }
            Op::H => {
                // iNTT and the coset scaling (with 1/m): coefficients in
                // bit-reversed order, times minv * g^i.
                for x in [A, B, C] {
                    out.extend(self.dif(x, true, PRE_NONE, true));
                }
                // Coset NTT: natural order again.
                for x in [A, B, C] {
                    out.extend(self.dit(x, false));
                }
                // a*b - c fused into the first pass of the last iNTT;
                // natural order, times minv * g^-i / Z(g).
                out.extend(self.finish(PRE_AB_MINUS_C));
            }
            Op::HCoset => {
                out.extend(self.dif(A, true, PRE_NONE, true));
                out.extend(self.dit(A, false));
            }
            Op::HFinish => out.extend(self.finish(PRE_NONE)),
        }
        out
    }

    /// H's last inverse transform of A with `pre` in its first pass, then
    /// natural order times minv * g^-i / Z(g): a bit-reversal launch, or
    /// the last pass writing B ([`DomainPlan::with_fused_bitrev`]).
    fn finish(&self, pre: u32) -> Vec<Launch> {
        if self.fused_bitrev {
            return self.dif_post(Vector::A, true, pre, POST_BITREV_SCALE);
        }
        let mut out = self.dif(Vector::A, true, pre, false);
        out.push(self.bitrev(Vector::A, SCALE_DST, self.h_final));
        out
    }

    /// Whether `launch` is one this plan makes (one of the [`Op`]s' launches,
    /// or a pass of [`DomainPlan::dif`] / [`DomainPlan::dit`] on any vector
    /// in either direction). Launches from elsewhere could send the kernels
    /// outside their buffers, so [`crate::ntt::GpuNtt::run_launches`] takes
    /// only these.
    pub fn is_planned(&self, launch: &Launch) -> bool {
        use Vector::{A, B, C};
        let ops = [
            Op::Fft,
            Op::Ifft,
            Op::CosetFft,
            Op::IcosetFft,
            Op::H,
            Op::HCoset,
            Op::HFinish,
        ];
        if ops.iter().any(|&op| self.launches(op).contains(launch)) {
            return true;
        }
        [A, B, C].into_iter().any(|x| {
            [false, true].into_iter().any(|inverse| {
                self.dif(x, inverse, PRE_NONE, false).contains(launch)
                    || self.dif(x, inverse, PRE_NONE, true).contains(launch)
                    || self.dit(x, inverse).contains(launch)
            })
        })
    }

    /// Runs `launches` on the CPU with the kernels' index arithmetic, block
    /// by block; `tables` are the values of [`DomainPlan::tables`]. The CPU
    /// twin of the kernels, for tests.
    pub fn run_on_cpu(
        &self,
        launches: &[Launch],
        tables: &[Vec<Scalar>],
        vectors: [&mut [Scalar]; 3],
    ) {
        self.run_on_cpu_with(Stages::Radix2, launches, tables, vectors);
    }

    /// [`DomainPlan::run_on_cpu`] with the passes' stages run as `stages`
    /// (the twin of the kernel variant that runs them so).
    pub fn run_on_cpu_with(
        &self,
        stages: Stages,
        launches: &[Launch],
        tables: &[Vec<Scalar>],
        vectors: [&mut [Scalar]; 3],
    ) {
        let [a, b, c] = vectors;
        for launch in launches {
            match *launch {
                Launch::Pass {
                    dit,
                    grid,
                    x,
                    out,
                    radix,
                    tw,
                    sc,
                    params,
                } => {
                    let t = |s: SplitTable| (&tables[s.lo][..], &tables[s.hi][..]);
                    // The pointwise step reads B and C while it writes A;
                    // the fused bit-reversal writes B from A (the plan never
                    // has one pass do both).
                    let (x, pre, out): (&mut [Scalar], _, _) = match (x, out) {
                        (Vector::A, Vector::B) if params.post == POST_BITREV_SCALE => {
                            assert_ne!(
                                params.pre, PRE_AB_MINUS_C,
                                "a pass reading and scattering into B"
                            );
                            (&mut *a, None, Some(&mut *b))
                        }
                        (Vector::A, _) if params.pre == PRE_AB_MINUS_C => {
                            (&mut *a, Some((&*b, &*c)), None)
                        }
                        (Vector::A, _) => (&mut *a, None, None),
                        (Vector::B, _) => (&mut *b, None, None),
                        (Vector::C, _) => (&mut *c, None, None),
                    };
                    let stages_of = |st| cpu_stages(stages, dit, st);
                    cpu_pass(
                        dit,
                        grid,
                        x,
                        pre,
                        out,
                        &tables[radix],
                        t(tw),
                        t(sc),
                        &params,
                        stages_of,
                    );
                }
                Launch::Bitrev { x, sc, params, .. } => {
                    let x: &mut [Scalar] = match x {
                        Vector::A => &mut *a,
                        Vector::B => &mut *b,
                        Vector::C => &mut *c,
                    };
                    cpu_bitrev(x, (&tables[sc.lo], &tables[sc.hi]), &params);
                }
            }
        }
    }
}

fn invert(x: Scalar) -> Result<Scalar> {
    Option::from(x.invert()).ok_or_else(|| Groth16Error::NttSize {
        detail: "a domain constant (m, or Z on the coset) is not invertible".to_owned(),
    })
}

fn rev(x: u32, bits: u32) -> u32 {
    if bits == 0 {
        0
    } else {
        x.reverse_bits() >> (32 - bits)
    }
}

fn table_pow(t: (&[Scalar], &[Scalar]), l: u32, e: u32) -> Scalar {
    let mask = if l >= 32 { u32::MAX } else { (1 << l) - 1 };
    let mut f = t.0[(e & mask) as usize];
    let h = if l >= 32 { 0 } else { e >> l };
    if h != 0 {
        f *= t.1[h as usize];
    }
    f
}

fn factor(p: &PassParams, tw: (&[Scalar], &[Scalar]), col: u32, row: u32) -> Option<Scalar> {
    let mut e = col * rev(row, p.bits);
    if e == 0 {
        return None;
    }
    if p.inverse != 0 {
        e = (1 << p.tw_bits) - e;
    }
    Some(table_pow(tw, p.tw_l, e))
}

/// The stage steps of a pass of `bits` stages, in order: `(st, false)` one
/// radix-2 stage st, `(st, true)` the pair st, st + 1 (`ntt_pass`'s loops).
fn cpu_stages(stages: Stages, dit: bool, bits: u32) -> Vec<(u32, bool)> {
    match stages {
        Stages::Radix2 => (0..bits)
            .map(|i| (if dit { i } else { bits - 1 - i }, false))
            .collect(),
        Stages::Radix4 => {
            let odd = bits & 1;
            let mut out = Vec::new();
            if dit && odd == 1 {
                out.push((0, false));
            }
            let mut i = 0;
            while i + 1 < bits {
                out.push((if dit { odd + i } else { bits - 2 - i }, true));
                i += 2;
            }
            if !dit && odd == 1 {
                out.push((0, false));
            }
            out
        }
    }
}

/// `ntt_stage_twiddle`: omega_{2^(st+1)}^j (or its inverse) from the radix table.
fn stage_twiddle(radix: &[Scalar], j: u32, st: u32, inverse: bool) -> Scalar {
    let mut e = j << (LOG_BLOCK - 1 - st);
    if inverse {
        e = ((1 << LOG_BLOCK) - e) & ((1 << LOG_BLOCK) - 1);
    }
    radix[e as usize]
}

/// `ntt_quad`: the shared-memory index of quad q's first row for the stage
/// pair (st, st + 1), and the row's bits below st.
fn quad(q: u32, st: u32, lc: u32) -> (usize, u32) {
    let col = q & ((1 << lc) - 1);
    let qq = q >> lc;
    let j = qq & ((1 << st) - 1);
    let row = ((qq >> st) << (st + 2)) | j;
    (((row << lc) | col) as usize, j)
}

/// One radix-2 stage over the block (`ntt_stage`).
fn cpu_stage(sm: &mut [Scalar], radix: &[Scalar], dit: bool, st: u32, lc: u32, inverse: bool) {
    let n = sm.len() as u32;
    for q in 0..n / 2 {
        let col = q & ((1 << lc) - 1);
        let qq = q >> lc;
        let j = qq & ((1 << st) - 1);
        let row = ((qq >> st) << (st + 1)) | j;
        let i0 = ((row << lc) | col) as usize;
        let i1 = i0 + (1usize << (st + lc));
        let w = stage_twiddle(radix, j, st, inverse);
        let (u, v) = (sm[i0], sm[i1]);
        if dit {
            let v = if st != 0 { v * w } else { v };
            sm[i0] = u + v;
            sm[i1] = u - v;
        } else {
            let d = u - v;
            sm[i0] = u + v;
            sm[i1] = if st != 0 { d * w } else { d };
        }
    }
}

/// Stages st and st + 1 on quads of rows (`ntt_stage_pair`).
fn cpu_stage_pair(sm: &mut [Scalar], radix: &[Scalar], dit: bool, st: u32, lc: u32, inverse: bool) {
    let n = sm.len() as u32;
    let h = 1usize << (st + lc);
    for q in 0..n / 4 {
        let (i0, j) = quad(q, st, lc);
        let (x0, mut x1, x2, mut x3) = (sm[i0], sm[i0 + h], sm[i0 + 2 * h], sm[i0 + 3 * h]);
        let wa = stage_twiddle(radix, j, st + 1, inverse);
        let wb = stage_twiddle(radix, j + (1 << st), st + 1, inverse);
        if dit {
            if st != 0 {
                let w = stage_twiddle(radix, j, st, inverse);
                x1 *= w;
                x3 *= w;
            }
            let (y0, y1) = (x0 + x1, x0 - x1);
            let (y2, y3) = ((x2 + x3) * wa, (x2 - x3) * wb);
            sm[i0] = y0 + y2;
            sm[i0 + h] = y1 + y3;
            sm[i0 + 2 * h] = y0 - y2;
            sm[i0 + 3 * h] = y1 - y3;
        } else {
            let (y0, y2) = (x0 + x2, (x0 - x2) * wa);
            let (y1, y3) = (x1 + x3, (x1 - x3) * wb);
            let (mut d0, mut d1) = (y0 - y1, y2 - y3);
            if st != 0 {
                let w = stage_twiddle(radix, j, st, inverse);
                d0 *= w;
                d1 *= w;
            }
            sm[i0] = y0 + y1;
            sm[i0 + h] = d0;
            sm[i0 + 2 * h] = y2 + y3;
            sm[i0 + 3 * h] = d1;
        }
    }
}

/// `ntt_pass` of kernels/ntt/ntt.cuh, block by block, with the stage steps
/// `stages(bits)` gives.
#[allow(clippy::too_many_arguments)]
fn cpu_pass(
    dit: bool,
    grid: u32,
    x: &mut [Scalar],
    pre: Option<(&[Scalar], &[Scalar])>,
    mut out: Option<&mut [Scalar]>,
    radix: &[Scalar],
    tw: (&[Scalar], &[Scalar]),
    sc: (&[Scalar], &[Scalar]),
    p: &PassParams,
    stages: impl Fn(u32) -> Vec<(u32, bool)>,
) {
    let (lo, lc) = (p.lo, p.log_cols);
    let n = 1u32 << (p.bits + lc);
    let col_mask = (1u32 << lc) - 1;
    let col_blocks_log = lo - lc;
    let steps = stages(p.bits);
    let inverse = p.inverse != 0;
    let mut sm = vec![Scalar::ZERO; n as usize];
    for block in 0..grid {
        let c0 = (block & ((1 << col_blocks_log) - 1)) << lc;
        let base = ((block >> col_blocks_log) << (lo + p.bits)) + c0;
        for l in 0..n {
            let (row, col) = (l >> lc, l & col_mask);
            let g = (base + (row << lo) + col) as usize;
            let mut v = x[g];
            if let Some((b, c)) = pre {
                v = v * b[g] - c[g];
            }
            if dit
                && p.tw_bits != 0
                && let Some(f) = factor(p, tw, c0 + col, row)
            {
                v *= f;
            }
            sm[l as usize] = v;
        }
        for &(st, pair) in &steps {
            if pair {
                cpu_stage_pair(&mut sm, radix, dit, st, lc, inverse);
            } else {
                cpu_stage(&mut sm, radix, dit, st, lc, inverse);
            }
        }
        for l in 0..n {
            let (row, col) = (l >> lc, l & col_mask);
            let g = base + (row << lo) + col;
            let mut v = sm[l as usize];
            if !dit
                && p.tw_bits != 0
                && let Some(f) = factor(p, tw, c0 + col, row)
            {
                v *= f;
            }
            if p.post == POST_SCALE_REV {
                v *= table_pow(sc, p.sc_l, rev(g, p.log_m));
            }
            if p.post == POST_BITREV_SCALE {
                let i = rev(g, p.log_m);
                let out = out
                    .as_deref_mut()
                    .expect("POST_BITREV_SCALE writes another vector");
                out[i as usize] = v * table_pow(sc, p.sc_l, i);
            } else {
                x[g as usize] = v;
            }
        }
    }
}

/// `ntt_bitrev` of kernels/ntt/ntt.cuh.
fn cpu_bitrev(x: &mut [Scalar], sc: (&[Scalar], &[Scalar]), p: &BitrevParams) {
    for i in 0..1u32 << p.log_m {
        let r = rev(i, p.log_m);
        if i > r {
            continue;
        }
        let (mut xi, mut xr) = (x[i as usize], x[r as usize]);
        match p.scale {
            SCALE_CONST => {
                xi *= sc.0[0];
                xr *= sc.0[0];
            }
            SCALE_DST => {
                xr *= table_pow(sc, p.sc_l, i);
                xi *= table_pow(sc, p.sc_l, r);
            }
            SCALE_SRC => {
                xr *= table_pow(sc, p.sc_l, r);
                xi *= table_pow(sc, p.sc_l, i);
            }
            _ => {}
        }
        x[i as usize] = xr;
        x[r as usize] = xi;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::compute_h;
    use bellperson::domain::EvaluationDomain;
    use ec_gpu_gen::threadpool::Worker;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    fn random(n: usize, seed: u64) -> Vec<Scalar> {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        (0..n).map(|_| Scalar::random(&mut rng)).collect()
    }

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

    #[test]
    fn plan_rejects_bad_sizes() {
        assert!(DomainPlan::new(0).is_err());
        assert!(DomainPlan::new(MAX_LOG2 + 1).is_err());
        let plan = DomainPlan::new(26).unwrap();
        // Small tables only: none above 2^18 entries.
        assert!(
            plan.tables()
                .iter()
                .all(|t| t.log_len <= MAX_SINGLE_TABLE_LOG)
        );
        let h = plan.launches(Op::H);
        assert_eq!(h.len(), 3 * 3 + 3 * 3 + 3 + 1);
        let bytes: u64 = h.iter().map(Launch::bytes).sum();
        assert_eq!(bytes, (21 * 64 + 64 + 64) << 26);
        assert!(h.iter().all(|l| plan.is_planned(l)));
        let Launch::Pass { params, .. } = h[0] else {
            panic!("H starts with a pass");
        };
        for bad in [
            PassParams {
                log_m: 27,
                ..params
            },
            PassParams { lo: 17, ..params },
        ] {
            let mut l = h[0];
            if let Launch::Pass { params, .. } = &mut l {
                *params = bad;
            }
            assert!(!plan.is_planned(&l), "{bad:?}");
        }
    }

    fn run_with(
        stages: Stages,
        plan: &DomainPlan,
        op: Op,
        a: &mut [Scalar],
        b: &mut [Scalar],
        c: &mut [Scalar],
    ) {
        let tables: Vec<Vec<Scalar>> = plan.tables().iter().map(TableSpec::values).collect();
        plan.run_on_cpu_with(stages, &plan.launches(op), &tables, [a, b, c]);
    }

    /// The CPU twin of the kernels computes what bellperson computes, for
    /// one-pass, two-pass and three-pass sizes (three passes start at 2^20,
    /// which is too slow here unoptimised, so MAX_UPPER_BITS is what keeps
    /// 2^11..2^19 at two).
    #[test]
    fn cpu_twin_matches_bellperson() {
        twin_matches_bellperson(Stages::Radix2);
    }

    /// The same with the stages in pairs (the `_r4` kernels), over passes of
    /// both parities of bits, so the lone stage 0 runs first in DIT and last
    /// in DIF.
    #[test]
    fn cpu_twin_radix4_matches_bellperson() {
        twin_matches_bellperson(Stages::Radix4);
    }

    fn twin_matches_bellperson(stages: Stages) {
        let worker = Worker::new();
        for log2 in (1..=12).chain([15, 19]) {
            let m = 1usize << log2;
            let plan = DomainPlan::new(log2).unwrap();
            let x = random(m, u64::from(log2));
            let mut zeros = vec![Scalar::ZERO; m];
            let mut zeros2 = zeros.clone();
            type Step = fn(&mut EvaluationDomain<Scalar>, &Worker);
            let ops: [(Op, Step); 4] = [
                (Op::Fft, |d, w| d.fft(w, &mut None).unwrap()),
                (Op::Ifft, |d, w| d.ifft(w, &mut None).unwrap()),
                (Op::CosetFft, |d, w| d.coset_fft(w, &mut None).unwrap()),
                (Op::IcosetFft, |d, w| d.icoset_fft(w, &mut None).unwrap()),
            ];
            for (op, step) in ops {
                let mut want = EvaluationDomain::from_coeffs(x.clone()).unwrap();
                step(&mut want, &worker);
                let mut got = x.clone();
                run_with(stages, &plan, op, &mut got, &mut zeros, &mut zeros2);
                assert!(got == want.as_ref(), "{op:?} at 2^{log2}, {stages:?}");
            }
            check_h_with(stages, &plan, x);
        }
    }

    fn check_h(plan: &DomainPlan, a: Vec<Scalar>) {
        check_h_with(Stages::Radix2, plan, a);
    }

    fn check_h_with(stages: Stages, plan: &DomainPlan, a: Vec<Scalar>) {
        let run = |plan: &DomainPlan, op, a: &mut [Scalar], b: &mut [Scalar], c: &mut [Scalar]| {
            run_with(stages, plan, op, a, b, c)
        };
        let m = a.len();
        let (mut a, mut b, mut c) = (a, random(m, 100), random(m, 200));
        let want = compute_h(&a, &b, &c).unwrap();
        // In two buffers: each vector to the coset alone, then the pointwise
        // step (the GPU's `ntt_pointwise`), then the end.
        let mut two = a.clone();
        let mut other = b.clone();
        let mut none = vec![Scalar::ZERO; 1];
        let mut none2 = none.clone();
        run(plan, Op::HCoset, &mut two, &mut none, &mut none2);
        run(plan, Op::HCoset, &mut other, &mut none, &mut none2);
        two.iter_mut().zip(&other).for_each(|(x, y)| *x *= y);
        other.copy_from_slice(&c);
        run(plan, Op::HCoset, &mut other, &mut none, &mut none2);
        two.iter_mut().zip(&other).for_each(|(x, y)| *x -= y);
        // The other buffer is free now; the fused bit-reversal writes it.
        run(plan, Op::HFinish, &mut two, &mut other, &mut none2);
        let h = if plan.h_result() == Vector::B {
            &other
        } else {
            &two
        };
        assert!(
            h[..m - 1] == want[..],
            "H in two buffers at 2^{}",
            plan.log2()
        );
        // Fused, in three.
        run(plan, Op::H, &mut a, &mut b, &mut c);
        let h = if plan.h_result() == Vector::B { &b } else { &a };
        assert!(h[..m - 1] == want[..], "H at 2^{}", plan.log2());
    }

    /// H with the bit-reversal fused into the last pass: the same h (in B),
    /// one launch and 2m element moves fewer, for every stage order and
    /// table layout; a one-pass domain keeps the bit-reversal launch.
    #[test]
    fn fused_bitrev_gives_the_same_h() {
        let bytes = |p: &DomainPlan| -> u64 { p.launches(Op::H).iter().map(Launch::bytes).sum() };
        let muls =
            |p: &DomainPlan| -> u64 { p.launches(Op::H).iter().map(Launch::multiplications).sum() };
        for log2 in [11, 13, 19] {
            for layout in [TableLayout::SMALL, TableLayout::WHOLE] {
                let plain = DomainPlan::with_layout(log2, layout).unwrap();
                let fused = plain.clone().with_fused_bitrev(true);
                assert_eq!(fused.h_result(), Vector::B);
                let (hp, hf) = (plain.launches(Op::H), fused.launches(Op::H));
                assert_eq!(hf.len() + 1, hp.len());
                assert!(!hf.iter().any(|l| matches!(l, Launch::Bitrev { .. })));
                assert_eq!(bytes(&plain) - bytes(&fused), 64 << log2);
                assert_eq!(muls(&plain), muls(&fused));
                assert!(hf.iter().all(|l| fused.is_planned(l)));
                assert!(!plain.is_planned(hf.last().unwrap()));
                for stages in [Stages::Radix2, Stages::Radix4] {
                    check_h_with(stages, &fused, random(1 << log2, u64::from(log2) + 7));
                }
            }
        }
        let small = DomainPlan::new(9).unwrap().with_fused_bitrev(true);
        assert_eq!(small.h_result(), Vector::A);
        check_h(&small, random(1 << 9, 9));
    }

    /// DIT with the inverse root (planned, though no Op uses it yet): a
    /// bit-reversal with the 1/m scaling and an inverse DIT is ifft.
    #[test]
    fn cpu_twin_inverse_dit_is_ifft() {
        let worker = Worker::new();
        for log2 in [1, 6, 10, 13] {
            let plan = DomainPlan::new(log2).unwrap();
            let x = random(1 << log2, 300 + u64::from(log2));
            let mut want = EvaluationDomain::from_coeffs(x.clone()).unwrap();
            want.ifft(&worker, &mut None).unwrap();
            let mut launches = vec![plan.bitrev(Vector::A, SCALE_CONST, plan.minv)];
            launches.extend(plan.dit(Vector::A, true));
            assert!(launches.iter().all(|l| plan.is_planned(l)));
            let tables: Vec<Vec<Scalar>> = plan.tables().iter().map(TableSpec::values).collect();
            let mut got = x;
            let (mut b, mut c) = (vec![Scalar::ZERO; 1], vec![Scalar::ZERO; 1]);
            plan.run_on_cpu(&launches, &tables, [&mut got, &mut b, &mut c]);
            assert!(got == want.as_ref(), "2^{log2}");
        }
    }

    /// Three passes, the top one with a split factor table.
    #[test]
    fn cpu_twin_h_three_passes() {
        let plan = DomainPlan::new(20).unwrap();
        assert_eq!(plan.passes().len(), 3);
        check_h(&plan, random(1 << 20, 20));
    }

    /// Radix-4 stage steps are the radix-2 stages in the same order, paired.
    #[test]
    fn stage_pairs_run_every_stage_once_in_order() {
        for bits in 1..=LOG_BLOCK {
            for dit in [false, true] {
                let flat: Vec<u32> = cpu_stages(Stages::Radix4, dit, bits)
                    .into_iter()
                    .flat_map(|(st, pair)| match (pair, dit) {
                        (false, _) => vec![st],
                        (true, true) => vec![st, st + 1],
                        (true, false) => vec![st + 1, st],
                    })
                    .collect();
                let want: Vec<u32> = cpu_stages(Stages::Radix2, dit, bits)
                    .into_iter()
                    .map(|(st, _)| st)
                    .collect();
                assert_eq!(flat, want, "bits {bits}, dit {dit}");
                let pairs = cpu_stages(Stages::Radix4, dit, bits)
                    .iter()
                    .filter(|s| s.1)
                    .count();
                assert_eq!(pairs as u32, bits / 2);
            }
        }
    }

    /// A quad's butterflies are exactly the radix-2 butterflies of its two
    /// stages, with the same twiddle indices: every pair of each stage once.
    #[test]
    fn quads_hold_the_butterflies_of_both_stages() {
        for (bits, lc) in [(2, 0), (3, 1), (8, 2), (9, 1), (10, 0), (6, 4)] {
            let n = 1u32 << (bits + lc);
            for st in 0..bits - 1 {
                // Radix-2: (i0, i1) -> j, per stage.
                let pairs = |stage: u32| {
                    let mut v: Vec<(usize, usize, u32)> = (0..n / 2)
                        .map(|q| {
                            let col = q & ((1 << lc) - 1);
                            let qq = q >> lc;
                            let j = qq & ((1 << stage) - 1);
                            let row = ((qq >> stage) << (stage + 1)) | j;
                            let i0 = ((row << lc) | col) as usize;
                            (i0, i0 + (1usize << (stage + lc)), j)
                        })
                        .collect();
                    v.sort_unstable();
                    v
                };
                let h = 1usize << (st + lc);
                let (mut low, mut high) = (Vec::new(), Vec::new());
                for q in 0..n / 4 {
                    let (i0, j) = quad(q, st, lc);
                    assert!(i0 + 3 * h < n as usize);
                    low.push((i0, i0 + h, j));
                    low.push((i0 + 2 * h, i0 + 3 * h, j));
                    high.push((i0, i0 + 2 * h, j));
                    high.push((i0 + h, i0 + 3 * h, j + (1 << st)));
                }
                low.sort_unstable();
                high.sort_unstable();
                assert_eq!(low, pairs(st), "bits {bits}, lc {lc}, stage {st}");
                assert_eq!(
                    high,
                    pairs(st + 1),
                    "bits {bits}, lc {lc}, stage {}",
                    st + 1
                );
            }
        }
    }

    /// With whole tables the top pass reads its factor from one table
    /// (2^log2 entries), and so do H's scalings: the same H with one
    /// multiplication an element fewer in each, in both stage orders. Small
    /// domains get whole scaling tables only when asked.
    #[test]
    fn single_factor_table_gives_the_same_h() {
        let log2 = 19;
        let split = DomainPlan::new(log2).unwrap();
        let single = DomainPlan::with_layout(log2, TableLayout::WHOLE).unwrap();
        assert!(
            split
                .tables()
                .iter()
                .all(|t| t.log_len <= MAX_SINGLE_TABLE_LOG)
        );
        assert!(single.tables().iter().any(|t| t.log_len == log2));
        let muls =
            |p: &DomainPlan| -> u64 { p.launches(Op::H).iter().map(Launch::multiplications).sum() };
        // Seven top passes, three coset scalings, one final scaling.
        assert_eq!(muls(&split) - muls(&single), 11 << log2);
        assert!(single.launches(Op::H).iter().all(|l| single.is_planned(l)));
        let a = random(1 << log2, 19);
        check_h_with(Stages::Radix2, &single, a.clone());
        check_h_with(Stages::Radix4, &single, a);
        let small = DomainPlan::new(8).unwrap();
        let whole = DomainPlan::with_layout(8, TableLayout::WHOLE).unwrap();
        assert_eq!(muls(&small) - muls(&whole), 4 << 8);
        check_h_with(Stages::Radix4, &whole, random(1 << 8, 8));
    }
}
