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

use super::{DeviceBuffer, DeviceElem, GpuEvent};
use crate::{Groth16Error, Result};

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
        gpu.bind(&what(0))?;
        let stream = std::sync::Arc::clone(gpu.stream());
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
                    let (ptr, _record) = view.device_ptr_mut(&stream);
                    // SAFETY: `ptr` is `piece.len()` elements of this buffer, in
                    // this GPU's context (bound above); `buf` is page-locked and
                    // not written again until this copy's event has passed (or
                    // the stream is synchronized below), and it outlives both.
                    unsafe { cu_result::memcpy_htod_async(ptr, &*buf, stream.cu_stream()) }
                        .map_err(super::gpu::driver_error(|| what(i * per)))?;
                }
                copied[slot] = Some(gpu.event_on(&stream)?);
            }
            Ok(())
        })();
        // Waited for also after a failed step: no copy may still read the
        // buffers once they go back to the caller.
        let done = gpu.synchronize_for(&what(0));
        queued.and(done)
    }
}
