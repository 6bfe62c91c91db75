//! Uploads from ordinary (pageable) host memory through two page-locked
//! bounce buffers: [`DeviceBuffer::copy_from_host_through`].
//!
//! The driver copies pageable memory at 7.5-8.7 GB/s on an H200 and
//! page-locked memory at 55 GB/s (bench-data/pinned/*-h2d.json), so a
//! 4 GB witness takes about 0.5 s the plain way. Here each piece of the
//! source is copied into one page-locked buffer by the caller's threads
//! while the other buffer's piece crosses the link, so the upload runs at
//! the host's copy speed instead.

use std::mem::size_of;

use cudarc::driver::{DevicePtrMut, result as cu_result};
use cuzk_pinned_pool::Lease;

use super::{DeviceBuffer, DeviceElem, Gpu, GpuEvent};
use crate::{Groth16Error, Result};

/// Whether the driver knows `host` (its first and last bytes) as
/// page-locked host memory, so a copy from it runs asynchronously at the
/// link's speed: buffers of a pinned pool or registered with the driver.
/// Ordinary memory, an empty slice, or any failure of the query: `false`
/// (the caller then bounces the copy, which is correct for any memory).
pub fn is_page_locked<T>(gpu: &Gpu, host: &[T]) -> bool {
    if host.is_empty()
        || gpu
            .bind("asking whether host memory is page-locked")
            .is_err()
    {
        return false;
    }
    let first = host.as_ptr() as usize;
    let last = first + size_of_val(host) - 1;
    [first, last].iter().all(|&address| {
        let mut kind: std::ffi::c_uint = 0;
        // SAFETY: the query reads nothing at `address`; it writes one
        // `unsigned int` (CUmemorytype) into `kind`, which outlives it. The
        // GPU's context is bound to this thread above.
        let result = unsafe {
            cudarc::driver::sys::cuPointerGetAttribute(
                (&raw mut kind).cast(),
                cudarc::driver::sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                address as cudarc::driver::sys::CUdeviceptr,
            )
        };
        result == cudarc::driver::sys::CUresult::CUDA_SUCCESS
            && kind == cudarc::driver::sys::CUmemorytype::CU_MEMORYTYPE_HOST as std::ffi::c_uint
    })
}

impl<T: DeviceElem> DeviceBuffer<T> {
    /// Overwrites elements `offset..offset + src.len()` with `src`, as
    /// [`copy_from_host_at`](Self::copy_from_host_at) does, through the
    /// two page-locked buffers `bounce`: pieces of as many whole elements
    /// as the smaller buffer holds are copied into them in turn by `fill`
    /// (given the buffer's bytes and the piece's; e.g. a parallel memcpy
    /// on a thread pool), each piece's copy to the device queued on the
    /// calling thread's stream as soon as it is in its buffer, so the next
    /// piece is filled while it crosses. A buffer is refilled only after
    /// its previous piece's copy has completed. Returns once the whole
    /// copy is complete. The leases must be page-locked
    /// ([`Lease::is_pinned`]): a copy from pageable memory would be
    /// synchronous and gain nothing.
    pub fn copy_from_host_through(
        &mut self,
        offset: usize,
        src: &[T],
        bounce: &mut [Lease; 2],
        fill: impl Fn(&mut [u8], &[u8]),
    ) -> Result<()> {
        let gpu = std::sync::Arc::clone(self.gpu());
        gpu.bind(&format!(
            "copying {} x {} to GPU {} through page-locked buffers",
            src.len(),
            super::buffer::short_type_name::<T>(),
            gpu.ordinal()
        ))?;
        let stream = std::sync::Arc::clone(gpu.stream());
        self.copy_from_host_through_on(&stream, offset, src, bounce, fill)
    }

    /// [`copy_from_host_through`](Self::copy_from_host_through) with the
    /// pieces' copies queued on `stream` (a stream of this buffer's GPU,
    /// e.g. a copy stream beside the one its kernels run on; the caller has
    /// bound the GPU's context to the thread). The copies are ordered
    /// after the buffer's earlier users on other streams and recorded as
    /// its latest writes, as any copy of this layer; it returns once they
    /// are complete (and so whatever was queued on `stream` before them),
    /// without waiting for anything queued on `stream` after them.
    pub fn copy_from_host_through_on(
        &mut self,
        stream: &std::sync::Arc<cudarc::driver::CudaStream>,
        offset: usize,
        src: &[T],
        bounce: &mut [Lease; 2],
        fill: impl Fn(&mut [u8], &[u8]),
    ) -> Result<()> {
        let end = offset.checked_add(src.len()).filter(|&e| e <= self.len());
        if end.is_none() {
            return Err(Groth16Error::CopyLength {
                what: "from the host at an offset past the end",
                device: self.len(),
                host: offset.saturating_add(src.len()),
            });
        }
        let per = bounce[0].len().min(bounce[1].len()) / size_of::<T>();
        if bounce.iter().any(|b| !b.is_pinned()) || per == 0 {
            return Err(Groth16Error::Cuda {
                what: "uploading through bounce buffers".to_owned(),
                detail: format!(
                    "the bounce buffers must be page-locked and hold at least one {}",
                    super::buffer::short_type_name::<T>()
                ),
            });
        }
        if src.is_empty() {
            return Ok(());
        }
        let gpu = std::sync::Arc::clone(self.gpu());
        let what = |at: usize| {
            format!(
                "copying {} x {} to GPU {} at offset {} through page-locked buffers",
                src.len(),
                super::buffer::short_type_name::<T>(),
                gpu.ordinal(),
                offset + at
            )
        };
        // The event after each buffer's latest copy: the buffer may be
        // refilled once it has passed.
        let mut copied: [Option<GpuEvent>; 2] = [None, None];
        let queued = (|| -> Result<()> {
            for (i, piece) in src.chunks(per).enumerate() {
                let slot = i % 2;
                if let Some(done) = copied[slot].take() {
                    done.wait(&what(i * per))?;
                }
                let bytes = size_of_val(piece);
                // SAFETY: `DeviceElem` types are plain bytes without padding, so
                // the piece may be read as its bytes.
                let src_bytes =
                    unsafe { std::slice::from_raw_parts(piece.as_ptr().cast::<u8>(), bytes) };
                let buf = &mut bounce[slot].as_bytes_mut()[..bytes];
                fill(buf, src_bytes);
                let at = offset + i * per;
                {
                    let mut view = self.slice_mut().slice_mut(at..at + piece.len());
                    // Orders the copy after the buffer's earlier users and
                    // records it as the buffer's latest write when dropped.
                    let (ptr, _record) = view.device_ptr_mut(stream);
                    // SAFETY: `ptr` is `piece.len()` elements of this buffer, in
                    // this GPU's context (bound by the caller); `buf` is
                    // page-locked and not written again until this copy's event
                    // has passed (waited for below in any case), and it
                    // outlives both.
                    unsafe { cu_result::memcpy_htod_async(ptr, &*buf, stream.cu_stream()) }
                        .map_err(super::gpu::driver_error(|| what(i * per)))?;
                }
                copied[slot] = Some(gpu.event_on(stream)?);
            }
            Ok(())
        })();
        // Waited for also after a failed step: no copy may still read the
        // buffers once they go back to the caller. Each slot's event follows
        // its earlier copies on the same stream; after a failure a copy may
        // have no event (its recording or an earlier wait failed), so the
        // whole stream is waited for instead.
        let events = match &queued {
            Ok(()) => copied
                .iter()
                .flatten()
                .try_for_each(|event| event.wait(&what(0))),
            Err(_) => Ok(()),
        };
        if queued.is_err() || events.is_err() {
            let synced = stream
                .synchronize()
                .map_err(super::gpu::driver_error(|| what(0)));
            return queued.and(events).and(synced);
        }
        Ok(())
    }
}
