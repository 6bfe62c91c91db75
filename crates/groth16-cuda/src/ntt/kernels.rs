//! The NTT kernels' launches on the GPU: a plan's passes and
//! bit-reversals, checked against the buffers they are given, and the
//! pointwise step.

use blstrs::Scalar;
use cudarc::driver::{DeviceRepr, LaunchConfig};

use super::plan::{self, Launch, POST_BITREV_SCALE, PRE_AB_MINUS_C, Vector};
use super::{Domain, GpuNtt, MODULE};
use crate::{Groth16Error, Result, cuda::DeviceBuffer};

// SAFETY: `PassParams` is `repr(C)`, `Copy`, made only of `u32` fields (no
// padding, no pointers), with the field order of `ntt_pass_params` in
// kernels/ntt/ntt.cuh, so its bytes are the kernel's parameter.
unsafe impl DeviceRepr for plan::PassParams {}
// SAFETY: as above, for `ntt_bitrev_params`.
unsafe impl DeviceRepr for plan::BitrevParams {}

/// The elementwise operations of [`GpuNtt::pointwise`] (`NTT_POINTWISE_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Pointwise {
    /// x = x * y.
    Mul = 0,
    /// x = x - y.
    Sub = 1,
}

impl GpuNtt {
    /// x = x * y or x - y elementwise on the GPU's stream (same lengths).
    pub fn pointwise(
        &self,
        x: &mut DeviceBuffer<Scalar>,
        y: &DeviceBuffer<Scalar>,
        op: Pointwise,
    ) -> Result<()> {
        let n = x.len();
        if y.len() != n || u32::try_from(n).is_err() {
            return Err(Groth16Error::NttSize {
                detail: format!("a pointwise step over {n} and {} elements", y.len()),
            });
        }
        if n == 0 {
            return Ok(());
        }
        let kernel = self.gpu.kernel(MODULE, "ntt_pointwise_bls12_381")?;
        let n32 = n as u32;
        let config = LaunchConfig {
            grid_dim: (n32.div_ceil(plan::BITREV_THREADS), 1, 1),
            block_dim: (plan::BITREV_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let code = op as u32;
        // SAFETY: ntt_pointwise_bls12_381(fr_t* x, const fr_t* y, uint32_t n,
        // uint32_t op): arguments in that order; x and y hold n elements of
        // Scalar (fr_t's bytes) each (checked above), thread i touches index
        // i < n only.
        unsafe {
            kernel
                .args()
                .buf_mut(x)
                .buf(y)
                .arg(&n32)
                .arg(&code)
                .launch(config)?;
        }
        Ok(())
    }

    /// Queues `launches` on the GPU's stream.
    pub(super) fn run(
        &self,
        domain: &Domain,
        launches: &[Launch],
        a: &mut DeviceBuffer<Scalar>,
        mut b: Option<&mut DeviceBuffer<Scalar>>,
        mut c: Option<&mut DeviceBuffer<Scalar>>,
    ) -> Result<()> {
        let m = 1usize << domain.plan.log2();
        let t = &domain.tables;
        let missing = |what: &str| Groth16Error::NttSize {
            detail: format!("a launch needs vector {what}, which was not given"),
        };
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
                    let variant = self.config.pass_kernel;
                    let kernel = self.gpu.kernel(MODULE, &variant.entry_point(dit))?;
                    let config = LaunchConfig {
                        grid_dim: (grid, 1, 1),
                        block_dim: (variant.threads(), 1, 1),
                        shared_mem_bytes: 0,
                    };
                    let placeholder = &t[domain.plan.placeholder()];
                    let scatter = params.post == POST_BITREV_SCALE;
                    let pre = params.pre == PRE_AB_MINUS_C;
                    if scatter && (pre || x != Vector::A || out != Vector::B) {
                        // The plan never makes one; the kernel would race.
                        return Err(Groth16Error::NttSize {
                            detail: "a fused bit-reversal must read A alone and write B".into(),
                        });
                    }
                    let (xbuf, pre_b, pre_c, outbuf): (&mut DeviceBuffer<Scalar>, _, _, _) = match x
                    {
                        Vector::A if scatter => (
                            &mut *a,
                            placeholder,
                            placeholder,
                            Some(b.as_deref_mut().ok_or_else(|| missing("b"))?),
                        ),
                        Vector::A if pre => {
                            let pb: &DeviceBuffer<Scalar> =
                                b.as_deref().ok_or_else(|| missing("b"))?;
                            let pc: &DeviceBuffer<Scalar> =
                                c.as_deref().ok_or_else(|| missing("c"))?;
                            (&mut *a, pb, pc, None)
                        }
                        Vector::A => (&mut *a, placeholder, placeholder, None),
                        Vector::B => (
                            b.as_deref_mut().ok_or_else(|| missing("b"))?,
                            placeholder,
                            placeholder,
                            None,
                        ),
                        Vector::C => (
                            c.as_deref_mut().ok_or_else(|| missing("c"))?,
                            placeholder,
                            placeholder,
                            None,
                        ),
                    };
                    if xbuf.len() < m
                        || (pre && (pre_b.len() < m || pre_c.len() < m))
                        || outbuf.as_ref().is_some_and(|o| o.len() < m)
                    {
                        return Err(Groth16Error::NttSize {
                            detail: format!("a vector shorter than the domain's {m} elements"),
                        });
                    }
                    // SAFETY: ntt_{dif,dit}_pass<suffix>_bls12_381(fr_t* x, const
                    // fr_t* b, const fr_t* c, const fr_t* radix, const fr_t* tw_lo,
                    // const fr_t* tw_hi, const fr_t* sc_lo, const fr_t* sc_hi,
                    // fr_t* out, ntt_pass_params p): the arguments are in that
                    // order, Scalar has fr_t's bytes and PassParams
                    // ntt_pass_params' layout. x holds m = 2^p.log_m elements
                    // (checked above and by the callers), and the grid of the
                    // plan has each block touch only its own indices below m.
                    // b and c are read only with PRE_AB_MINUS_C, when they are
                    // the caller's m-element b and c. out is written only with
                    // POST_BITREV_SCALE, at rev(i) < m of the caller's m-element
                    // b, a buffer apart from x that the launch does not read
                    // (checked above). Table indices stay below the lengths the plan built the
                    // tables with (lo[e mod 2^l], hi[e >> l] for e below 2^bits
                    // of the table pair; the radix table has 2^10 entries). The
                    // launches come from this domain's plan (run_launches checks
                    // that for launches from outside), whose index arithmetic
                    // the CPU twin tests cover.
                    unsafe {
                        let mut args = kernel.args();
                        args.buf_mut(xbuf)
                            .buf(pre_b)
                            .buf(pre_c)
                            .buf(&t[radix])
                            .buf(&t[tw.lo])
                            .buf(&t[tw.hi])
                            .buf(&t[sc.lo])
                            .buf(&t[sc.hi]);
                        match outbuf {
                            Some(o) => args.buf_mut(o),
                            None => args.buf(placeholder),
                        };
                        args.arg(&params).launch(config)?;
                    }
                }
                Launch::Bitrev {
                    grid,
                    x,
                    sc,
                    params,
                } => {
                    let kernel = self.gpu.kernel(MODULE, "ntt_bitrev_bls12_381")?;
                    let config = LaunchConfig {
                        grid_dim: (grid, 1, 1),
                        block_dim: (plan::BITREV_THREADS, 1, 1),
                        shared_mem_bytes: 0,
                    };
                    let xbuf: &mut DeviceBuffer<Scalar> = match x {
                        Vector::A => &mut *a,
                        Vector::B => b.as_deref_mut().ok_or_else(|| missing("b"))?,
                        Vector::C => c.as_deref_mut().ok_or_else(|| missing("c"))?,
                    };
                    if xbuf.len() < m {
                        return Err(Groth16Error::NttSize {
                            detail: format!("a vector shorter than the domain's {m} elements"),
                        });
                    }
                    // SAFETY: ntt_bitrev_bls12_381(fr_t* x, const fr_t* sc_lo,
                    // const fr_t* sc_hi, ntt_bitrev_params p): arguments in that
                    // order with matching layouts; thread i touches x[i] and
                    // x[rev(i)] only for i < m = 2^p.log_m <= x.len(), and the
                    // scale tables only below their built lengths.
                    unsafe {
                        kernel
                            .args()
                            .buf_mut(xbuf)
                            .buf(&t[sc.lo])
                            .buf(&t[sc.hi])
                            .arg(&params)
                            .launch(config)?;
                    }
                }
            }
        }
        Ok(())
    }
}
