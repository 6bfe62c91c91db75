//! Multi-scalar multiplication on the GPU, over BLS12-381's G1 and G2.
//!
//! [`DeviceBases`] keeps a parameter query's affine points resident on one
//! GPU (uploaded once); [`GpuMsm`] computes sum_i s_i * P_i for scalars
//! already on the device (the h of the NTT, or an uploaded witness), and
//! [`DeviceDensity`] gives bellperson's density-filtered layout, where only
//! the variables a query uses have a point.
//!
//! One MSM, in the order of the kernels (modules `msm`, `msm_g1`, `msm_g2`;
//! kernels/msm/*.cuh describe each):
//!
//! 1. **classify**: each scalar to canonical form; zeros (and variables the
//!    density leaves out) are dropped, ones go to one list, the rest to
//!    another with their canonical values. The two counts come back to the
//!    host, which sizes everything after from them.
//! 2. **ones** (when [`MsmConfig::ones_separately`]; measured not to win on
//!    an H200, so off by default): the bases of scalars equal to 1 are
//!    summed by a tree of mixed additions. Otherwise a one is a single entry
//!    of window 0's bucket 1 in Pippenger, which the segmented accumulation
//!    spreads over many threads just the same.
//! 3. **Pippenger** on the others, with signed-digit windows of c bits
//!    ([`plan::window_bits`] from their number): per pass of windows, a
//!    histogram of (window, |digit|) keys, an exclusive scan and a scatter
//!    sort the nonzero digits by bucket (a counting sort with warp-aggregated
//!    atomics); bucket accumulation sums each bucket's points in XYZZ over
//!    fixed-length segments of the sorted list, so big buckets (skewed
//!    scalars) spread over many threads, with a few short levels to finish
//!    runs that cross segments (or, as the variants
//!    [`Accumulate::BatchAffine128`] / `256`, in affine coordinates with one
//!    inversion shared by many segments' additions; CPU twin
//!    [`accumulate_batch_affine_cpu`]); then per window sum_j j * B_j by running
//!    sums over parts and a merge tree. The window sums come back and the
//!    host combines them (c doublings per window: microseconds on the CPU).
//!
//! Nothing here synchronises with the host except the readback of the
//! counts after step 1, of each pass's entry count, and of the results.
//!
//! The files: [`MsmAffine`] in `curve`; the device inputs ([`DeviceBases`],
//! [`DeviceDensity`]) in `bases`; [`MsmConfig`] and [`Accumulate`] in
//! `config`; the host-side sizing in `plan`; the scratch, its bound and its
//! buffers, in `scratch`; the kernel launch sequences in `launch`; the MSM
//! carried over calls ([`CarriedMsm`]) in `carried`; the CPU twins of the
//! accumulation and reduction in `batch_affine` and `reduce`.

mod bases;
mod batch_affine;
mod carried;
mod config;
mod curve;
mod launch;
mod plan;
mod reduce;
mod scratch;

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use group::Group;

use crate::cuda::{DeviceBuffer, Gpu};
use crate::{Groth16Error, Result};
use config::window_for;
use launch::Run;
use scratch::Scratch;

pub use bases::{DeviceBases, DeviceDensity, window_multiples_cpu};
pub use batch_affine::accumulate_batch_affine_cpu;
pub use carried::CarriedMsm;
pub use config::{Accumulate, MsmConfig};
pub use curve::MsmAffine;
pub use plan::{
    MAX_WINDOW, MIN_WINDOW, batch_affine_segment_len, carried_window_bits, multiples_window_bits,
    window_bits, windows,
};
pub use reduce::reduce_cpu;

/// Bases and variables are indexed with 31 bits on the device (the top bit
/// of a sorted entry is the digit's sign).
const MAX_LEN: usize = (1 << 31) - 1;

/// Multi-scalar multiplications on one GPU, with scratch buffers kept
/// between calls (they only grow). Calls on one `GpuMsm` run one at a time.
#[derive(Debug)]
pub struct GpuMsm {
    gpu: Arc<Gpu>,
    config: MsmConfig,
    scratch: Mutex<Scratch>,
}

impl GpuMsm {
    /// MSMs on `gpu` with the default configuration.
    pub fn new(gpu: Arc<Gpu>) -> Self {
        Self::with_config(gpu, MsmConfig::default())
    }

    /// MSMs on `gpu` tuned by `config`.
    pub fn with_config(gpu: Arc<Gpu>, config: MsmConfig) -> Self {
        GpuMsm {
            gpu,
            config,
            scratch: Mutex::new(Scratch::default()),
        }
    }

    /// The GPU these MSMs run on.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    /// The configuration.
    pub fn config(&self) -> &MsmConfig {
        &self.config
    }

    /// Loads the PTX modules (JIT compilation takes seconds the first time),
    /// so that a measurement or a latency-sensitive first proof does not pay
    /// for it.
    pub fn warm_up(&self) -> Result<()> {
        for module in ["msm", "msm_g1", "msm_g2"] {
            self.gpu.load_module(module)?;
        }
        Ok(())
    }

    /// An upper bound on the device scratch (bytes) that MSMs of up to `n`
    /// scalars on both curves make this `GpuMsm` hold: the per-scalar
    /// buffers, one pass's sorted entries and bucket counts, and each
    /// curve's buckets and first-level partial sums. The scratch only
    /// grows, so this is what a caller reserves once per `GpuMsm`. It
    /// holds MSMs carried over calls of up to `n` scalars each too
    /// ([`MsmConfig::scratch_bound`]).
    pub fn scratch_bound(&self, n: usize) -> u64 {
        self.config.scratch_bound(n)
    }

    /// Device bytes of the scratch this `GpuMsm` holds now (at most
    /// [`GpuMsm::scratch_bound`] of the largest MSM it ran).
    pub fn scratch_bytes(&self) -> u64 {
        self.lock().bytes()
    }

    /// The phase times of the latest call, when [`MsmConfig::profile`] is
    /// set: (phase, seconds), in order.
    pub fn last_profile(&self) -> Vec<(&'static str, f64)> {
        self.lock().profile.clone()
    }

    /// sum scalars\[i\] * bases\[i\] for i < scalars.len() (which must not
    /// exceed bases.len()); scalars in Montgomery form, the bytes of
    /// `&[blstrs::Scalar]`.
    pub fn g1(
        &self,
        bases: &DeviceBases<G1Affine>,
        scalars: &DeviceBuffer<Scalar>,
    ) -> Result<G1Projective> {
        self.msm(bases, scalars, None)
    }

    /// [`GpuMsm::g1`] over G2.
    pub fn g2(
        &self,
        bases: &DeviceBases<G2Affine>,
        scalars: &DeviceBuffer<Scalar>,
    ) -> Result<G2Projective> {
        self.msm(bases, scalars, None)
    }

    /// Density-filtered, bellperson's layout: `scalars` holds every variable
    /// (inputs then aux, as in the witness; at least `density.len()` of
    /// them); `density` marks which are used; the used ones, in order, pair
    /// with bases\[0..density.count()\].
    pub fn g1_dense(
        &self,
        bases: &DeviceBases<G1Affine>,
        scalars: &DeviceBuffer<Scalar>,
        density: &DeviceDensity,
    ) -> Result<G1Projective> {
        self.msm(bases, scalars, Some(density))
    }

    /// [`GpuMsm::g1_dense`] over G2.
    pub fn g2_dense(
        &self,
        bases: &DeviceBases<G2Affine>,
        scalars: &DeviceBuffer<Scalar>,
        density: &DeviceDensity,
    ) -> Result<G2Projective> {
        self.msm(bases, scalars, Some(density))
    }

    /// The MSM over either curve: [`GpuMsm::g1`] without a density,
    /// [`GpuMsm::g1_dense`] with one.
    pub fn msm<A: MsmAffine>(
        &self,
        bases: &DeviceBases<A>,
        scalars: &DeviceBuffer<Scalar>,
        density: Option<&DeviceDensity>,
    ) -> Result<A::Projective> {
        let Some((n, used)) = checked_len(bases, scalars, 0, density)? else {
            return Ok(A::Projective::identity());
        };
        let _span =
            tracing::debug_span!("msm", curve = A::CURVE, n, gpu = self.gpu.ordinal()).entered();
        let mut scratch = self.lock();
        scratch.profile.clear();
        let mut run = Run {
            gpu: &self.gpu,
            config: &self.config,
            s: &mut scratch,
            phase_start: Instant::now(),
        };
        run.msm::<A>(bases, &scalars.range(0, n as usize)?, density, used)
    }

    /// One MSM summed over several calls ([`CarriedMsm::add`]), each with
    /// its own bases and scalars, that together cover at most `n` scalars
    /// in about `chunks` calls: the chunks of a query whose bases are
    /// streamed. Pippenger's buckets carry from one call to the next and
    /// are reduced once ([`CarriedMsm::finish`]), with one window size for
    /// all of them (chosen for `n` scalars in `chunks` chunks,
    /// [`carried_window_bits`]): one reduction instead of one per
    /// chunk. Holds this `GpuMsm` until finished or dropped.
    pub fn carried<A: MsmAffine>(&self, n: usize, chunks: usize) -> Result<CarriedMsm<'_, A>> {
        let c = window_for::<A>(&self.config, n, chunks)?;
        let mut carried = CarriedMsm {
            gpu: &self.gpu,
            config: &self.config,
            s: self.lock(),
            c,
            ones: A::Projective::identity(),
        };
        carried.s.profile.clear();
        carried.run().clear_buckets::<A>(c, windows(c))?;
        Ok(carried)
    }

    fn lock(&self) -> MutexGuard<'_, Scratch> {
        // The scratch holds no invariant a panicking holder could break:
        // every call sizes and clears what it uses.
        self.scratch.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The scalars an MSM of `bases` and `scalars[offset..]` (filtered by
/// `density`) takes: (n, used), the variables the MSM reads and how many of
/// them pair with a base, or None when it takes none; an error when the
/// shapes do not agree or exceed the kernels' indices.
fn checked_len<A: MsmAffine>(
    bases: &DeviceBases<A>,
    scalars: &DeviceBuffer<Scalar>,
    offset: usize,
    density: Option<&DeviceDensity>,
) -> Result<Option<(u32, usize)>> {
    let Some(held) = scalars.len().checked_sub(offset) else {
        return Err(Groth16Error::MsmShape {
            detail: format!(
                "the scalars start at {offset} but the scalar buffer holds only {}",
                scalars.len()
            ),
        });
    };
    let (n, used) = match density {
        None => (held, held),
        Some(d) => {
            if held < d.len() {
                return Err(Groth16Error::MsmShape {
                    detail: format!(
                        "the density covers {} variables but the scalar buffer holds only {held} \
                         from {offset} on",
                        d.len(),
                    ),
                });
            }
            (d.len(), d.count())
        }
    };
    if used > bases.len() {
        return Err(Groth16Error::MsmTooFewBases {
            needed: used,
            available: bases.len(),
        });
    }
    if n > MAX_LEN {
        return Err(Groth16Error::MsmShape {
            detail: format!("{n} scalars are more than the {MAX_LEN} one MSM can index"),
        });
    }
    // n <= MAX_LEN < 2^31.
    Ok((n > 0).then_some((n as u32, used)))
}

/// sum scalars\[i\] * bases\[i\] over G1 on `gpu`, from host slices (uploads
/// both, for tests and one-off uses).
pub fn msm_g1_host(gpu: &Arc<Gpu>, bases: &[G1Affine], scalars: &[Scalar]) -> Result<G1Projective> {
    let bases = DeviceBases::upload(gpu, bases)?;
    let scalars = gpu.upload(scalars)?;
    GpuMsm::new(Arc::clone(gpu)).g1(&bases, &scalars)
}

/// [`msm_g1_host`] over G2.
pub fn msm_g2_host(gpu: &Arc<Gpu>, bases: &[G2Affine], scalars: &[Scalar]) -> Result<G2Projective> {
    let bases = DeviceBases::upload(gpu, bases)?;
    let scalars = gpu.upload(scalars)?;
    GpuMsm::new(Arc::clone(gpu)).g2(&bases, &scalars)
}
