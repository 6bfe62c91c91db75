//! A partition's uploads (its witness; a, b, c staged on the device, or
//! from the host in the kernel region)
//! through page-locked bounce buffers ([`GpuOptions::bounce_bytes`]), and
//! the prover's pinned host pool they and streamed parameter sets use.
//!
//! [`GpuOptions::bounce_bytes`]: super::GpuOptions::bounce_bytes

use blstrs::Scalar;
use cuzk_pinned_pool::{CpuAccess, Lease, Pool, PoolConfig, Request};
use cuzk_synth::{Pce, Witness};
use rayon::prelude::*;

use super::GpuProver;
use super::stages::on_prep_pool;
use crate::Result;
use crate::cuda::{DeviceBuffer, DeviceElem};

/// Bytes of each of an upload's two bounce buffers by default. A 4 GB witness is 16
/// pieces; each piece's copy across the link (5 ms at 55 GB/s) runs under
/// the next piece's copy into the other buffer. The buffers go back to the
/// prover's pool after each upload and are reused by the next: at most two
/// per worker uploading at once (1 GiB for a GPU's two workers), outside
/// the engine's host budget. Larger pieces wait behind fewer of the other
/// worker's streamed parameter chunks on the link: on an H100 a 32 GiB PoRep
/// C2 took 23.5-24.0 s a proof with 256 MiB pieces against 24.7-24.9 s with
/// 32 MiB ones, in the same run (docs/BENCHMARKS.md).
pub const BOUNCE_BYTES: usize = 256 << 20;

/// Host-side pieces of a bounce buffer's fill: each a task of the prepare
/// pool.
const FILL_PIECE: usize = 1 << 20;

impl GpuProver {
    /// The GPU's pinned host pool, made on first use; `None` (with a
    /// warning once) where the driver cannot page-lock memory.
    pub(super) fn host_pool(&self) -> Option<&Pool> {
        self.host_pool
            .get_or_init(|| {
                Pool::pinned(self.gpu.ordinal(), PoolConfig::unbounded())
                    .map_err(|e| {
                        tracing::warn!(
                            gpu = self.gpu.ordinal(),
                            "no pinned host pool: streamed parameters and uploads stay pageable: {e}"
                        )
                    })
                    .ok()
            })
            .as_ref()
    }

    /// Two bounce buffers from the pinned pool, or `None` (pageable
    /// copies) when uploads are not bounced, the source is no larger than
    /// one buffer, or page-locked memory cannot be had.
    fn bounce_buffers(&self, bytes: usize) -> Option<[Lease; 2]> {
        let size = self.options.bounce_bytes.filter(|&b| b > 0 && bytes > b)?;
        let pool = self.host_pool()?;
        let lease = || {
            pool.lease(Request::bytes(size).access(CpuAccess::WriteOnly))
                .map_err(|e| {
                    tracing::warn!(
                        gpu = self.gpu.ordinal(),
                        "no page-locked bounce buffer, the upload is pageable: {e}"
                    )
                })
                .ok()
        };
        Some([lease()?, lease()?])
    }

    /// `dst[offset..offset + src.len()] = src`: through bounce buffers
    /// (filled by the prepare pool's threads) where
    /// [`GpuOptions::bounce_bytes`](super::GpuOptions::bounce_bytes)
    /// asks for it and they can be had, else a pageable copy.
    pub(super) fn upload_at<T: DeviceElem>(
        &self,
        dst: &mut DeviceBuffer<T>,
        offset: usize,
        src: &[T],
    ) -> Result<()> {
        match self.bounce_buffers(size_of_val(src)) {
            Some(mut bounce) => dst.copy_from_host_through(offset, src, &mut bounce, parallel_fill),
            None => dst.copy_from_host_at(offset, src),
        }
    }

    /// `dst = src` then zeros, queued on `stream` (the kernel region's
    /// [`HostUpload`](crate::ntt::HostUpload) of a, b and c staged on the
    /// host): a plain asynchronous copy from page-locked memory; from
    /// pageable memory through bounce buffers where
    /// [`GpuOptions::bounce_bytes`](super::GpuOptions::bounce_bytes) asks
    /// for them and they can be had (waiting for the copy), else a
    /// pageable copy.
    pub(super) fn upload_padded_on(
        &self,
        stream: &std::sync::Arc<cudarc::driver::CudaStream>,
        dst: &mut DeviceBuffer<Scalar>,
        src: &[Scalar],
    ) -> Result<()> {
        if !crate::cuda::is_page_locked(&self.gpu, src)
            && let Some(mut bounce) = self.bounce_buffers(size_of_val(src))
        {
            return crate::ntt::upload_padded_through(stream, dst, src, &mut bounce, parallel_fill);
        }
        crate::ntt::upload_padded_on(stream, dst, src)
    }

    /// A new device vector of `len` elements: `src` then zeros.
    pub(super) fn upload_padded(&self, src: &[Scalar], len: usize) -> Result<DeviceBuffer<Scalar>> {
        let mut buf = self.gpu.alloc_zeros::<Scalar>(len)?;
        self.upload_at(&mut buf, 0, src)?;
        Ok(buf)
    }

    /// The witness of a partition of `pce`'s shape as one device vector:
    /// inputs, then aux.
    pub(super) fn upload_witness(
        &self,
        pce: &Pce,
        witness: &Witness,
    ) -> Result<DeviceBuffer<Scalar>> {
        let mut w = self
            .gpu
            .alloc_zeros::<Scalar>(pce.num_inputs + pce.num_aux)?;
        self.upload_at(&mut w, 0, &witness.inputs)?;
        self.upload_at(&mut w, pce.num_inputs, &witness.aux)?;
        Ok(w)
    }
}

/// `dst.copy_from_slice(src)` in pieces on the prepare pool: on rayon's
/// global pool it would queue behind other partitions' witness tasks.
fn parallel_fill(dst: &mut [u8], src: &[u8]) {
    on_prep_pool(|| {
        dst.par_chunks_mut(FILL_PIECE)
            .zip(src.par_chunks(FILL_PIECE))
            .for_each(|(d, s)| d.copy_from_slice(s));
    });
}
