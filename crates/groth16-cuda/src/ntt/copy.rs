//! Copies into and between the NTT's device vectors: zero-padded uploads of
//! H's inputs and device-to-device copies.

use std::{mem::size_of, sync::Arc};

use blstrs::Scalar;
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut, result as cu_result};

use super::cuda_error;
use cuzk_pinned_pool::Lease;

use crate::{Groth16Error, Result, cuda::DeviceBuffer};

/// Copies `src` into `dst` (same length) on the GPU's stream, asynchronously:
/// for restoring inputs between timed runs and for measuring the device's
/// copy bandwidth. (A general device-to-device copy belongs on
/// `DeviceBuffer`; it lives here until the runtime layer has one.)
pub fn copy_device(dst: &mut DeviceBuffer<Scalar>, src: &DeviceBuffer<Scalar>) -> Result<()> {
    if dst.len() != src.len() {
        return Err(Groth16Error::CopyLength {
            what: "between device buffers",
            device: dst.len(),
            host: src.len(),
        });
    }
    if src.gpu().ordinal() != dst.gpu().ordinal() {
        return Err(Groth16Error::Cuda {
            what: "copying between device buffers".to_owned(),
            detail: format!(
                "the buffers are on GPUs {} and {}",
                src.gpu().ordinal(),
                dst.gpu().ordinal()
            ),
        });
    }
    let gpu = Arc::clone(dst.gpu());
    gpu.bind("copying between device buffers")?;
    let stream = gpu.stream();
    let bytes = src.size_bytes();
    let (s, _rs) = src.slice().device_ptr(stream);
    let (d, _rd) = dst.slice_mut().device_ptr_mut(stream);
    // SAFETY: both allocations hold `bytes` bytes in this GPU's context
    // (bound above) and are distinct (one is borrowed mutably); the copy is
    // ordered on the stream after their earlier users.
    unsafe { cu_result::memcpy_dtod_async(d, s, bytes, stream.cu_stream()) }
        .map_err(cuda_error("copying between device buffers"))
}

/// Zeroes `dst` from element `n` on (queued on `stream`) after checking that
/// `n` elements fit: the padding of an upload of `n` host elements.
fn zero_from(stream: &Arc<CudaStream>, dst: &mut DeviceBuffer<Scalar>, n: usize) -> Result<()> {
    let len = dst.len();
    if n > len {
        return Err(Groth16Error::CopyLength {
            what: "into an NTT buffer",
            device: len,
            host: n,
        });
    }
    let tail = (len - n) * size_of::<Scalar>();
    if tail > 0 {
        // Records the memset as the buffer's last write when dropped.
        let (ptr, _record) = dst.slice_mut().device_ptr_mut(stream);
        let start = ptr + (n * size_of::<Scalar>()) as u64;
        // SAFETY: [start, start + tail) is the end of `dst`'s allocation, in
        // the GPU's context (the caller bound it).
        unsafe { cu_result::memset_d8_async(start, 0, tail, stream.cu_stream()) }
            .map_err(cuda_error("zero-padding an NTT input"))?;
    }
    Ok(())
}

/// Copies `src` into the start of `dst` on `stream` and zeroes the rest.
pub(super) fn upload_padded(
    stream: &Arc<CudaStream>,
    dst: &mut DeviceBuffer<Scalar>,
    src: &[Scalar],
) -> Result<()> {
    zero_from(stream, dst, src.len())?;
    if !src.is_empty() {
        // Records the copy as the buffer's last write when dropped.
        let (ptr, _record) = dst.slice_mut().device_ptr_mut(stream);
        // SAFETY: `ptr` holds `len >= src.len()` elements of `Scalar` (checked
        // above) in the GPU's context (the caller bound it); `src` stays
        // borrowed until the caller has waited for the stream.
        unsafe { cu_result::memcpy_htod_async(ptr, src, stream.cu_stream()) }
            .map_err(cuda_error("uploading an NTT input"))?;
    }
    Ok(())
}

/// [`upload_padded`] through two page-locked bounce buffers
/// ([`DeviceBuffer::copy_from_host_through_on`], `fill` copying each
/// piece into one) for a pageable `src`: the zeros are queued on `stream`
/// first, then the pieces; returns once the pieces are on the device.
pub fn upload_padded_through(
    stream: &Arc<CudaStream>,
    dst: &mut DeviceBuffer<Scalar>,
    src: &[Scalar],
    bounce: &mut [Lease; 2],
    fill: impl Fn(&mut [u8], &[u8]),
) -> Result<()> {
    zero_from(stream, dst, src.len())?;
    dst.copy_from_host_through_on(stream, 0, src, bounce, fill)
}
