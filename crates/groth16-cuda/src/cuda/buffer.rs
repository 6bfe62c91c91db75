//! Typed device memory: [`DeviceBuffer<T>`] for the element types of
//! [`DeviceElem`].

use std::{fmt, mem::size_of, sync::Arc};

use blstrs::{Fp, Fp2, G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use cudarc::driver::{CudaSlice, CudaView, DevicePtr, DevicePtrMut, DeviceRepr, ValidAsZeroBits};

use super::Gpu;
use crate::{Groth16Error, Result};

/// A type whose values can be copied byte for byte between host and device
/// memory and handed to kernels as they are.
///
/// Device memory holds exactly the bytes the value has in host memory: for
/// the blstrs types, Montgomery form as little-endian 64-bit limbs, points
/// as their coordinates in order (affine `x, y`; projective `x, y, z`), the
/// affine identity as all-zero bytes. Kernels declare matching structs.
///
/// # Safety
///
/// Implement only for types that are `Copy`, hold no pointers or references,
/// have no padding bytes, and for which every bit pattern of
/// `size_of::<Self>()` bytes (all zeros included) is a valid value: bytes
/// written by a kernel are read back as `Self` without any check.
pub unsafe trait DeviceElem: Copy + Send + Sync + 'static {}

// SAFETY: primitive integers are plain bytes without padding, and every bit
// pattern is a valid integer.
unsafe impl DeviceElem for u8 {}
// SAFETY: as for u8.
unsafe impl DeviceElem for u32 {}
// SAFETY: as for u8.
unsafe impl DeviceElem for u64 {}

// The blstrs types below are `#[repr(transparent)]` wrappers (blstrs 0.7.1,
// src/{scalar,fp,fp2,g1,g2}.rs) around blst's bindgen structs, which are
// `#[repr(C)]` and `Copy` and made only of `u64` limbs (blst 0.3.17,
// src/bindings.rs: `limb_t = u64`):
//   blst_fr        { l: [u64; 4] }
//   blst_fp        { l: [u64; 6] }
//   blst_fp2       { fp: [blst_fp; 2] }
//   blst_p1_affine { x, y: blst_fp }      blst_p1 { x, y, z: blst_fp }
//   blst_p2_affine { x, y: blst_fp2 }     blst_p2 { x, y, z: blst_fp2 }
// so they have alignment 8, no padding (each size is a multiple of 8 and the
// sum of the fields, checked below), no pointers, and every bit pattern is a
// value of the struct. A pattern that is not a reduced field element or not
// a point on the curve is still memory-safe to hold; it is only
// mathematically meaningless, which is the kernels' business, not Rust's.

// SAFETY: see the comment above: `[u64; 4]` in Montgomery form.
unsafe impl DeviceElem for Scalar {}
// SAFETY: see the comment above: `[u64; 6]` in Montgomery form.
unsafe impl DeviceElem for Fp {}
// SAFETY: see the comment above: two `Fp`, c0 then c1.
unsafe impl DeviceElem for Fp2 {}
// SAFETY: see the comment above: `x, y` as `Fp`; the identity is all zeros.
unsafe impl DeviceElem for G1Affine {}
// SAFETY: see the comment above: `x, y` as `Fp2`; the identity is all zeros.
unsafe impl DeviceElem for G2Affine {}
// SAFETY: see the comment above: Jacobian `x, y, z` as `Fp`.
unsafe impl DeviceElem for G1Projective {}
// SAFETY: see the comment above: Jacobian `x, y, z` as `Fp2`.
unsafe impl DeviceElem for G2Projective {}

/// Sizes and alignments the kernels rely on; a blstrs or blst upgrade that
/// changes one fails the build here.
const _: () = {
    assert!(size_of::<Scalar>() == 32);
    assert!(size_of::<Fp>() == 48);
    assert!(size_of::<Fp2>() == 96);
    assert!(size_of::<G1Affine>() == 96);
    assert!(size_of::<G2Affine>() == 192);
    assert!(size_of::<G1Projective>() == 144);
    assert!(size_of::<G2Projective>() == 288);
    assert!(std::mem::align_of::<Scalar>() == 8);
    assert!(std::mem::align_of::<Fp>() == 8);
    assert!(std::mem::align_of::<G2Projective>() == 8);
};

/// `T` as cudarc sees it. cudarc's traits are foreign and so are the blstrs
/// types, so the impls go on this local wrapper.
#[derive(Clone, Copy)]
#[repr(transparent)]
pub(crate) struct Elem<T>(pub(crate) T);

// SAFETY: `DeviceElem` guarantees plain bytes without padding or pointers,
// so the value may be copied to device memory, or into a kernel's parameter
// buffer, as it is; `repr(transparent)` keeps `T`'s layout.
unsafe impl<T: DeviceElem> DeviceRepr for Elem<T> {}
// SAFETY: `DeviceElem` guarantees that every bit pattern, zeros included, is
// a valid `T`.
unsafe impl<T: DeviceElem> ValidAsZeroBits for Elem<T> {}

fn as_elems<T: DeviceElem>(values: &[T]) -> &[Elem<T>] {
    // SAFETY: `Elem<T>` is `repr(transparent)` over `T`: same size, alignment
    // and layout, so the slice reinterpreted is the same memory.
    unsafe { std::slice::from_raw_parts(values.as_ptr().cast::<Elem<T>>(), values.len()) }
}

/// `len` elements of `T` in the memory of one GPU.
///
/// Created by [`Gpu::upload`] or [`Gpu::alloc_zeros`]; passed to kernels with
/// [`KernelArgs::buf`](super::KernelArgs::buf) and
/// [`buf_mut`](super::KernelArgs::buf_mut). Copies are ordered on the calling
/// thread's stream ([`Gpu::stream`]), after the kernels launched before
/// them (on other streams, after the buffer's last users, through cudarc's
/// per-buffer events), and each copy returns
/// only once it is complete, so host memory can be reused at once. Dropping
/// the buffer frees the memory in stream order, after the work that uses it.
pub struct DeviceBuffer<T: DeviceElem> {
    /// `max(len, 1)` elements: the driver refuses empty allocations.
    slice: CudaSlice<Elem<T>>,
    len: usize,
    gpu: Arc<Gpu>,
}

impl<T: DeviceElem> fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("type", &std::any::type_name::<T>())
            .field("len", &self.len)
            .field("gpu", &self.gpu.ordinal())
            .finish()
    }
}

/// A range of a [`DeviceBuffer`] ([`DeviceBuffer::range`]), borrowed from
/// it: kernels read it through [`KernelArgs::range`] with the buffer's
/// stream ordering (cudarc tracks the view's reads on the buffer).
///
/// [`KernelArgs::range`]: super::KernelArgs::range
pub struct DeviceRange<'b, T: DeviceElem> {
    gpu: &'b Arc<Gpu>,
    view: CudaView<'b, Elem<T>>,
    len: usize,
}

impl<T: DeviceElem> DeviceRange<'_, T> {
    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the range holds no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(crate) fn gpu(&self) -> &Arc<Gpu> {
        self.gpu
    }

    pub(crate) fn view(&self) -> &CudaView<'_, Elem<T>> {
        &self.view
    }
}

impl<T: DeviceElem> fmt::Debug for DeviceRange<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceRange")
            .field("type", &std::any::type_name::<T>())
            .field("len", &self.len)
            .field("gpu", &self.gpu.ordinal())
            .finish()
    }
}

impl<T: DeviceElem> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        // The memory goes back in stream order when `slice` drops next.
        self.gpu.uncharge((self.len.max(1) * size_of::<T>()) as u64);
    }
}

impl<T: DeviceElem> DeviceBuffer<T> {
    /// Allocates room for `len` elements, zeroed when `zeroed`, else left as
    /// the allocator gives it (every bit pattern is a valid `T`).
    pub(crate) fn alloc(gpu: &Arc<Gpu>, len: usize, zeroed: bool) -> Result<Self> {
        let what = || {
            format!(
                "allocating {len} x {} on GPU {}",
                short_type_name::<T>(),
                gpu.ordinal()
            )
        };
        // cudarc multiplies without checking.
        if len.checked_mul(size_of::<T>()).is_none() {
            return Err(Groth16Error::Cuda {
                what: what(),
                detail: "the size in bytes overflows usize".to_owned(),
            });
        }
        let stream = gpu.stream();
        let slots = len.max(1);
        let bytes = (slots * size_of::<T>()) as u64;
        gpu.charge(bytes, what)?;
        let slice = if zeroed {
            stream.alloc_zeros::<Elem<T>>(slots)
        } else {
            // SAFETY: the memory is left uninitialised, which cannot make an
            // invalid `T` (every bit pattern is one); `upload` overwrites the
            // `len` elements anyone reads before handing the buffer out.
            unsafe { stream.alloc::<Elem<T>>(slots) }
        }
        .map_err(|err| {
            gpu.uncharge(bytes);
            if err.0 == cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
                let (free, total) = gpu.mem_info().unwrap_or((0, 0));
                return Groth16Error::DeviceOutOfMemory {
                    ordinal: gpu.ordinal(),
                    what: what(),
                    need: bytes,
                    free,
                    total,
                };
            }
            super::gpu::driver_error(what)(err)
        })?;
        Ok(DeviceBuffer {
            slice,
            len,
            gpu: Arc::clone(gpu),
        })
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the buffer holds no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The size of the elements in bytes, `len() * size_of::<T>()`.
    pub fn size_bytes(&self) -> usize {
        self.len * size_of::<T>()
    }

    /// The GPU whose memory this is.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    /// Copies the buffer to a new vector, once every kernel launched before
    /// on this GPU's stream has finished.
    pub fn download(&self) -> Result<Vec<T>> {
        let mut host: Vec<T> = Vec::with_capacity(self.len);
        // SAFETY: `host` has capacity for `len` elements.
        if let Err(err) = unsafe { self.copy_out(host.as_mut_ptr(), "downloading") } {
            // The copy may have been left in flight on a failing stream:
            // leak the memory rather than free what the device may write.
            std::mem::forget(host);
            return Err(err);
        }
        // SAFETY: `copy_out` returned Ok, so the copy completed and wrote all
        // `len` elements, and every bit pattern is a valid `T` (DeviceElem).
        unsafe { host.set_len(self.len) };
        Ok(host)
    }

    /// Copies the buffer into `dst`, which must have the same length.
    pub fn copy_to_host(&self, dst: &mut [T]) -> Result<()> {
        self.check_len("to the host", dst.len())?;
        // SAFETY: `dst` is valid for writes of `len` elements.
        unsafe { self.copy_out(dst.as_mut_ptr(), "copying to the host") }
    }

    /// Overwrites the buffer with `src`, which must have the same length.
    pub fn copy_from_host(&mut self, src: &[T]) -> Result<()> {
        self.check_len("from the host", src.len())?;
        if self.len == 0 {
            return Ok(());
        }
        let ordinal = self.gpu.ordinal();
        let what = || {
            format!(
                "copying {} x {} to GPU {ordinal}",
                self.len,
                short_type_name::<T>()
            )
        };
        let stream = self.gpu.stream();
        // Lengths are equal and the slice holds max(len, 1) elements, so
        // cudarc's own length assertion holds.
        stream
            .memcpy_htod(as_elems(src), &mut self.slice)
            .map_err(super::gpu::driver_error(what))?;
        // Wait, so the caller may reuse or free `src` (pinned memory is read
        // asynchronously) and errors of the copy show here.
        self.gpu.synchronize_for(&what())
    }

    /// Overwrites elements `offset..offset + src.len()` with `src`, leaving
    /// the rest as it is: zero-padded uploads (`alloc_zeros(m)` then a copy of
    /// the first n) and buffers assembled from several host slices.
    pub fn copy_from_host_at(&mut self, offset: usize, src: &[T]) -> Result<()> {
        let end = offset.checked_add(src.len()).filter(|&e| e <= self.len);
        let Some(end) = end else {
            return Err(Groth16Error::CopyLength {
                what: "from the host at an offset past the end",
                device: self.len,
                host: offset.saturating_add(src.len()),
            });
        };
        if src.is_empty() {
            return Ok(());
        }
        let ordinal = self.gpu.ordinal();
        let what = || {
            format!(
                "copying {} x {} to GPU {ordinal} at offset {offset}",
                src.len(),
                short_type_name::<T>()
            )
        };
        let stream = self.gpu.stream();
        let mut view = self.slice.slice_mut(offset..end);
        stream
            .memcpy_htod(as_elems(src), &mut view)
            .map_err(super::gpu::driver_error(what))?;
        self.gpu.synchronize_for(&what())
    }

    fn check_len(&self, what: &'static str, host: usize) -> Result<()> {
        if host == self.len {
            Ok(())
        } else {
            Err(Groth16Error::CopyLength {
                what,
                device: self.len,
                host,
            })
        }
    }

    /// Copies all `len` elements to `dst` and waits for the copy.
    ///
    /// # Safety
    /// `dst` must be valid for writes of `len` elements of `T`.
    unsafe fn copy_out(&self, dst: *mut T, verb: &str) -> Result<()> {
        if self.len == 0 {
            return Ok(());
        }
        let ordinal = self.gpu.ordinal();
        let what = format!(
            "{verb} {} x {} from GPU {ordinal}",
            self.len,
            short_type_name::<T>()
        );
        self.gpu.bind(&what)?;
        let stream = self.gpu.stream();
        {
            // Makes the stream wait for the buffer's last writer, and records
            // this read when dropped at the end of the block.
            let (src, _record_read) = self.slice.device_ptr(stream);
            // SAFETY: `src` is a live allocation of at least `len` elements
            // of `T` in this GPU's context (bound above); the caller
            // guarantees `dst` takes `len` elements. The copy is ordered on
            // the stream after the buffer's writers.
            unsafe {
                cudarc::driver::sys::cuMemcpyDtoHAsync_v2(
                    dst.cast(),
                    src,
                    self.len * size_of::<T>(),
                    stream.cu_stream(),
                )
            }
            .result()
            .map_err(super::gpu::driver_error(|| what.clone()))?;
        }
        // `dst` may be written until the stream has finished the copy.
        self.gpu.synchronize_for(&what)
    }

    /// Copies `src[src_offset..src_offset + len]` over
    /// `self[offset..offset + len]` on the GPU's stream, asynchronously
    /// (ordered before later launches and copies on the stream).
    pub fn copy_range_from(
        &mut self,
        offset: usize,
        src: &DeviceBuffer<T>,
        src_offset: usize,
        len: usize,
    ) -> Result<()> {
        let fits = |off: usize, total: usize| off.checked_add(len).is_some_and(|e| e <= total);
        if !fits(offset, self.len) || !fits(src_offset, src.len) {
            return Err(Groth16Error::CopyLength {
                what: "between device buffers: the range runs past an end",
                device: self.len,
                host: src.len,
            });
        }
        if !Arc::ptr_eq(&self.gpu, &src.gpu) {
            return Err(Groth16Error::Cuda {
                what: "copying between device buffers".to_owned(),
                detail: format!(
                    "the buffers are on GPUs {} and {}",
                    src.gpu.ordinal(),
                    self.gpu.ordinal()
                ),
            });
        }
        if len == 0 {
            return Ok(());
        }
        let gpu = Arc::clone(&self.gpu);
        gpu.bind("copying between device buffers")?;
        let stream = gpu.stream();
        let elem = size_of::<T>() as u64;
        let (s, _rs) = src.slice.device_ptr(stream);
        let (d, _rd) = self.slice.device_ptr_mut(stream);
        // SAFETY: both ranges lie inside their allocations (checked above),
        // in this GPU's context (bound above); the buffers are distinct
        // allocations (one is borrowed mutably), and the copy is ordered on
        // the stream after their earlier users.
        unsafe {
            cudarc::driver::result::memcpy_dtod_async(
                d + offset as u64 * elem,
                s + src_offset as u64 * elem,
                len * size_of::<T>(),
                stream.cu_stream(),
            )
        }
        .map_err(super::gpu::driver_error(|| {
            "copying between device buffers".to_owned()
        }))
    }

    pub(crate) fn slice(&self) -> &CudaSlice<Elem<T>> {
        &self.slice
    }

    /// Elements `offset..offset + len`, for a kernel that reads them
    /// ([`KernelArgs::range`]) as if they were a buffer of their own; an
    /// error when the range runs past the end.
    ///
    /// [`KernelArgs::range`]: super::KernelArgs::range
    pub fn range(&self, offset: usize, len: usize) -> Result<DeviceRange<'_, T>> {
        if offset.checked_add(len).is_none_or(|end| end > self.len) {
            return Err(Groth16Error::Cuda {
                what: format!("a range of a device buffer of {}", short_type_name::<T>()),
                detail: format!(
                    "elements {offset}..{} of {} run past the end",
                    offset.saturating_add(len),
                    self.len
                ),
            });
        }
        Ok(DeviceRange {
            gpu: &self.gpu,
            // An empty range still points into the allocation (len >= 1
            // slots are allocated), so kernels get a valid pointer.
            view: self.slice.slice(offset.min(self.len)..offset + len),
            len,
        })
    }

    pub(crate) fn slice_mut(&mut self) -> &mut CudaSlice<Elem<T>> {
        &mut self.slice
    }
}

/// `Scalar` rather than `blstrs::scalar::Scalar`, for error messages.
pub(crate) fn short_type_name<T>() -> &'static str {
    let full = std::any::type_name::<T>();
    full.rsplit("::").next().unwrap_or(full)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_type_names() {
        assert_eq!(short_type_name::<Scalar>(), "Scalar");
        assert_eq!(short_type_name::<G2Affine>(), "G2Affine");
        assert_eq!(short_type_name::<u64>(), "u64");
    }

    #[test]
    fn elem_cast_keeps_bytes() {
        let values = [Scalar::from(7u64), -Scalar::from(1u64)];
        let elems = as_elems(&values);
        assert_eq!(elems.len(), 2);
        assert_eq!(elems.as_ptr().cast::<Scalar>(), values.as_ptr());
        assert!(elems[1].0 == values[1]);
    }
}
