//! One MSM summed over several calls ([`CarriedMsm`], from
//! [`GpuMsm::carried`](super::GpuMsm::carried)): the chunks of a query
//! whose bases are streamed, with Pippenger's buckets carried from call to
//! call and reduced once.

use std::sync::{Arc, MutexGuard};
use std::time::Instant;

use blstrs::Scalar;
use group::Group;

use super::launch::Run;
use super::scratch::Scratch;
use super::{DeviceBases, DeviceDensity, MsmAffine, MsmConfig, checked_len};
use crate::Result;
use crate::cuda::{DeviceBuffer, Gpu};

/// An MSM summed over several calls
/// ([`GpuMsm::carried`](super::GpuMsm::carried)).
#[derive(Debug)]
pub struct CarriedMsm<'a, A: MsmAffine> {
    pub(super) gpu: &'a Arc<Gpu>,
    pub(super) config: &'a MsmConfig,
    pub(super) s: MutexGuard<'a, Scratch>,
    /// The window size of every call.
    pub(super) c: u32,
    /// The bases of scalars equal to 1, when summed apart.
    pub(super) ones: A::Projective,
}

impl<A: MsmAffine> CarriedMsm<'_, A> {
    pub(super) fn run(&mut self) -> Run<'_> {
        Run {
            gpu: self.gpu,
            config: self.config,
            s: &mut self.s,
            phase_start: Instant::now(),
        }
    }

    /// The window size (bits) of every call.
    pub fn window_bits(&self) -> u32 {
        self.c
    }

    /// Adds sum scalars\[i\] * bases\[i\] (in
    /// [`GpuMsm::msm`](super::GpuMsm::msm)'s layout, `density` as there) to
    /// the MSM.
    pub fn add(
        &mut self,
        bases: &DeviceBases<A>,
        scalars: &DeviceBuffer<Scalar>,
        density: Option<&DeviceDensity>,
    ) -> Result<()> {
        self.add_at(bases, scalars, 0, density)
    }

    /// [`CarriedMsm::add`] with the scalars from `scalars[offset]` on: the
    /// chunk of a query whose variables start at `offset` in a proof's
    /// scalars, read in place.
    pub fn add_at(
        &mut self,
        bases: &DeviceBases<A>,
        scalars: &DeviceBuffer<Scalar>,
        offset: usize,
        density: Option<&DeviceDensity>,
    ) -> Result<()> {
        let Some((n, used)) = checked_len(bases, scalars, offset, density)? else {
            return Ok(());
        };
        let _span = tracing::debug_span!("msm chunk", curve = A::CURVE, n).entered();
        let c = self.c;
        let mut run = self.run();
        let (n1, m) = run.classify(&scalars.range(offset, n as usize)?, density, used)?;
        run.phase("classify")?;
        let mut ones = A::Projective::identity();
        if n1 > 0 {
            ones = run.sum_ones::<A>(bases, n1)?;
            run.phase("ones")?;
        }
        if m > 0 {
            run.passes::<A>(bases, m, c, true, 0)?;
        }
        self.ones += ones;
        Ok(())
    }

    /// The sum of every call's MSM: the buckets reduced once.
    pub fn finish(mut self) -> Result<A::Projective> {
        let c = self.c;
        let sum = self.run().finish_buckets::<A>(c)?;
        Ok(sum + self.ones)
    }
}
