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
//!
//! Here: [`DomainPlan`], a domain's tables and launch sequences. Beside it:
//! `passes` (how a transform's index bits are split into passes), `tables`
//! (the twiddle and scaling tables), `launch` (one kernel launch and its
//! parameters) and `cpu_twin` ([`DomainPlan::run_on_cpu`]).

mod cpu_twin;
mod launch;
mod passes;
mod tables;

use blstrs::Scalar;
use ff::{Field, PrimeField};

pub use super::config::{Stages, TableLayout};
use crate::{Groth16Error, Result};
pub use launch::{
    BITREV_THREADS, BitrevParams, Launch, Op, POST_BITREV_SCALE, POST_NONE, POST_SCALE_REV,
    PRE_AB_MINUS_C, PRE_NONE, PassParams, SCALE_CONST, SCALE_DST, SCALE_NONE, SCALE_SRC, THREADS,
    Vector,
};
pub use passes::{LOG_BLOCK, MAX_LOG2, MAX_UPPER_BITS, Pass, j_major, passes, slot};
pub use tables::{MAX_SINGLE_TABLE_LOG, SplitTable, TableId, TableSpec, omega};

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
}

fn invert(x: Scalar) -> Result<Scalar> {
    Option::from(x.invert()).ok_or_else(|| Groth16Error::NttSize {
        detail: "a domain constant (m, or Z on the coset) is not invertible".to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
