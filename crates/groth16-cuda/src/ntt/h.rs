//! The H polynomial of a Groth16 proof on the GPU: from device-resident
//! a, b, c, from host a, b, c with three device vectors (their uploads
//! overlapped with the first transform) or with two.

use std::sync::Arc;

use blstrs::Scalar;
use cudarc::driver::{CudaStream, DevicePtr, result as cu_result};

#[cfg(doc)]
use super::NttConfig;
use super::copy::upload_padded;
use super::plan::{MAX_LOG2, Op, Vector};
use super::{GpuNtt, Pointwise, check_len, cuda_error, lock};
#[cfg(doc)]
use crate::cuda::Gpu;
use crate::{Groth16Error, Result, cuda::DeviceBuffer};

/// How [`GpuNtt::compute_h_from_host`] uploads its inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Upload {
    /// a on the GPU's stream, b and c on a second stream while a is being
    /// transformed (fully asynchronous only from pinned host memory).
    Overlapped,
    /// Everything on the GPU's stream, one after the other.
    Serial,
}

/// How [`GpuNtt::compute_h_two_buffers_with`] puts a host vector at the
/// start of a device vector and zeroes the rest, queued on the given
/// stream: [`upload_padded_on`] (a plain asynchronous copy) or the
/// caller's own (e.g. through page-locked bounce buffers when the host
/// vector is pageable). It may return before the copy is done only if the
/// host vector is page-locked.
pub type HostUpload<'u> =
    dyn Fn(&Arc<CudaStream>, &mut DeviceBuffer<Scalar>, &[Scalar]) -> Result<()> + 'u;

/// `dst = src` then zeros, queued on `stream` as one asynchronous copy
/// (synchronous from pageable memory, where the driver stages it) and a
/// memset: the default [`HostUpload`].
pub fn upload_padded_on(
    stream: &Arc<CudaStream>,
    dst: &mut DeviceBuffer<Scalar>,
    src: &[Scalar],
) -> Result<()> {
    upload_padded(stream, dst, src)
}

/// Device buffers for [`GpuNtt::compute_h_from_host`]: three vectors of
/// 2^log2 elements, allocated once and reused. Scratch between calls: h
/// ends in `a`, or in `b` with [`NttConfig::fused_bitrev`], and is copied
/// to the caller's `out` either way.
#[derive(Debug)]
pub struct HBuffers {
    pub a: DeviceBuffer<Scalar>,
    pub b: DeviceBuffer<Scalar>,
    pub c: DeviceBuffer<Scalar>,
    log2: u32,
}

impl HBuffers {
    /// The buffers' log2 length.
    pub fn log2(&self) -> u32 {
        self.log2
    }
}

impl GpuNtt {
    /// Computes h into `a` from device-resident a, b, c of m = 2^log2
    /// elements each (the caller zero-pads from n to m): afterwards
    /// `a[0..m-1]` is h exactly as [`crate::cpu::compute_h`] gives it
    /// (`a[m-1]` is unspecified). b and c are used as scratch; with
    /// [`NttConfig::fused_bitrev`] h is computed into b's buffer and the two
    /// buffers are swapped, so `a` may come back holding the other
    /// allocation (both have m elements).
    ///
    /// Asynchronous: the kernels are queued on the GPU's stream; a later
    /// copy or [`Gpu::synchronize`] waits for them and reports their faults.
    pub fn compute_h(
        &self,
        a: &mut DeviceBuffer<Scalar>,
        b: &mut DeviceBuffer<Scalar>,
        c: &mut DeviceBuffer<Scalar>,
        log2: u32,
    ) -> Result<()> {
        for (what, v) in [("a", &*a), ("b", &*b), ("c", &*c)] {
            check_len(what, v, log2)?;
        }
        if log2 == 0 {
            // m = 1: h has no coefficient.
            return Ok(());
        }
        let _s = tracing::debug_span!("ntt_h", log2).entered();
        let domain = self.domain(log2)?;
        self.run(
            &domain,
            &domain.plan.launches(Op::H),
            a,
            Some(&mut *b),
            Some(c),
        )?;
        if domain.plan.h_result() == Vector::B {
            // Both hold exactly m elements (checked above).
            std::mem::swap(a, b);
        }
        Ok(())
    }

    /// h from host a, b, c (n <= m = 2^log2 elements each, zero-padded on
    /// the device) with only two vectors of m elements on the device at
    /// once, for partitions whose three do not fit: a to the coset
    /// ([`Op::HCoset`]) in the returned buffer while b is copied on `copy`,
    /// then b, a *= b; c into b's buffer, c to the coset, a -= c, and
    /// [`Op::HFinish`]. The result is [`GpuNtt::compute_h`]'s: h in
    /// `[0, m-1)` of the returned buffer. Waits for the copies (so the host
    /// slices are free when it returns; from pageable memory the copies are
    /// synchronous anyway); the kernels stay queued on the GPU's stream.
    pub fn compute_h_two_buffers(
        &self,
        a: &[Scalar],
        b: &[Scalar],
        c: &[Scalar],
        log2: u32,
        copy: &Arc<CudaStream>,
    ) -> Result<DeviceBuffer<Scalar>> {
        self.compute_h_two_buffers_with(a, b, c, log2, copy, &upload_padded_on)
    }

    /// [`GpuNtt::compute_h_two_buffers`] with the host vectors put on the
    /// device by `upload` (a on the GPU's stream, b and c on `copy`).
    pub fn compute_h_two_buffers_with(
        &self,
        a: &[Scalar],
        b: &[Scalar],
        c: &[Scalar],
        log2: u32,
        copy: &Arc<CudaStream>,
        upload: &HostUpload<'_>,
    ) -> Result<DeviceBuffer<Scalar>> {
        self.h_from_host_vectors([a, b, c], log2, copy, upload, false)
    }

    /// [`GpuNtt::compute_h_two_buffers_with`] with a third device vector
    /// for c, where the card has room for it: the same launches in the same
    /// order (so h is the same to the bit), but c's copy no longer waits for
    /// `a *= b` to free b's buffer. It is queued on `copy` right after b's
    /// and runs under b's transforms; only a's copy is left before the
    /// first transform. The third vector is freed before this returns.
    pub fn compute_h_three_buffers_with(
        &self,
        a: &[Scalar],
        b: &[Scalar],
        c: &[Scalar],
        log2: u32,
        copy: &Arc<CudaStream>,
        upload: &HostUpload<'_>,
    ) -> Result<DeviceBuffer<Scalar>> {
        self.h_from_host_vectors([a, b, c], log2, copy, upload, true)
    }

    /// H from host a, b, c with two device vectors, or three (`third`):
    /// allocates them, queues the launches, waits for the copies (the host
    /// slices may be released once this returns) and returns h's vector.
    fn h_from_host_vectors(
        &self,
        [a, b, c]: [&[Scalar]; 3],
        log2: u32,
        copy: &Arc<CudaStream>,
        upload: &HostUpload<'_>,
        third: bool,
    ) -> Result<DeviceBuffer<Scalar>> {
        check_host_abc(a, b, c, log2)?;
        let _s =
            tracing::debug_span!("ntt_h_from_host_vectors", log2, n = a.len(), third).entered();
        let main = Arc::clone(self.gpu.stream());
        let m = 1usize << log2;
        let mut x = self.gpu.alloc_zeros::<Scalar>(m)?;
        let mut y = self.gpu.alloc_zeros::<Scalar>(m)?;
        let mut z = if third {
            Some(self.gpu.alloc_zeros::<Scalar>(m)?)
        } else {
            None
        };
        let result = self.h_two_buffers_queued(
            [a, b, c],
            log2,
            [&main, copy],
            upload,
            &mut x,
            &mut y,
            z.as_mut(),
        );
        let waited = copy
            .synchronize()
            .map_err(cuda_error("waiting for the copy stream"));
        result.and(waited)?;
        drop((y, z));
        Ok(x)
    }

    /// The launches of H from host vectors in `x` and `y`, and c in `z`
    /// when there is a third vector (else in `y` once `a *= b` has read it).
    #[allow(clippy::too_many_arguments)]
    fn h_two_buffers_queued(
        &self,
        [a, b, c]: [&[Scalar]; 3],
        log2: u32,
        [main, copy]: [&Arc<CudaStream>; 2],
        upload: &HostUpload<'_>,
        x: &mut DeviceBuffer<Scalar>,
        y: &mut DeviceBuffer<Scalar>,
        z: Option<&mut DeviceBuffer<Scalar>>,
    ) -> Result<()> {
        self.gpu.bind("uploading a, b, c for the NTT")?;
        if !Arc::ptr_eq(main, copy) {
            // Nothing on the copy stream may write the new buffers before
            // their allocation on the main stream.
            copy.join(main).map_err(cuda_error(
                "ordering the copy stream after the GPU's stream",
            ))?;
        }
        upload(main, x, a)?;
        if log2 == 0 {
            return Ok(());
        }
        let domain = self.domain(log2)?;
        let coset = domain.plan.launches(Op::HCoset);
        self.run(&domain, &coset, x, None, None)?;
        // cudarc orders the launches reading y after its upload on `copy`,
        // and the next upload into y after those reads.
        upload(copy, y, b)?;
        self.run(&domain, &coset, y, None, None)?;
        match z {
            Some(z) => {
                // Queued behind b's copy: under b's transforms.
                upload(copy, z, c)?;
                self.pointwise(x, y, Pointwise::Mul)?;
                self.run(&domain, &coset, z, None, None)?;
                self.pointwise(x, z, Pointwise::Sub)?;
            }
            None => {
                self.pointwise(x, y, Pointwise::Mul)?;
                upload(copy, y, c)?;
                self.run(&domain, &coset, y, None, None)?;
                self.pointwise(x, y, Pointwise::Sub)?;
            }
        }
        self.run(
            &domain,
            &domain.plan.launches(Op::HFinish),
            x,
            Some(&mut *y),
            None,
        )?;
        if domain.plan.h_result() == Vector::B {
            std::mem::swap(x, y);
        }
        Ok(())
    }

    /// Host convenience: the same output as [`crate::cpu::compute_h`]`(a, b,
    /// c)` for any n = a.len() (zero-padded to the next power of two m; h has
    /// m - 1 coefficients). Waits for the GPU.
    pub fn compute_h_host(&self, a: &[Scalar], b: &[Scalar], c: &[Scalar]) -> Result<Vec<Scalar>> {
        let log2 = h_log2(a, b, c)?;
        let m = 1usize << log2;
        let mut bufs = self.alloc_h_buffers(log2)?;
        let mut out = vec![Scalar::from(0u64); m - 1];
        self.compute_h_from_host(a, b, c, &mut out, &mut bufs, Upload::Serial)?;
        Ok(out)
    }

    /// Three device vectors of 2^log2 elements for
    /// [`GpuNtt::compute_h_from_host`].
    pub fn alloc_h_buffers(&self, log2: u32) -> Result<HBuffers> {
        if log2 > MAX_LOG2 {
            return Err(Groth16Error::NttSize {
                detail: format!("buffers of 2^{log2} elements; the NTT takes up to 2^{MAX_LOG2}"),
            });
        }
        let m = 1usize << log2;
        Ok(HBuffers {
            a: self.gpu.alloc_zeros(m)?,
            b: self.gpu.alloc_zeros(m)?,
            c: self.gpu.alloc_zeros(m)?,
            log2,
        })
    }

    /// h from host a, b, c of n <= 2^bufs.log2 elements (zero-padded on the
    /// device) into `out`, which takes the m - 1 coefficients. With
    /// [`Upload::Overlapped`] the upload of b and c runs on a second stream
    /// while a is being transformed; that overlap needs page-locked host
    /// memory (e.g. leases of `cuzk-pinned-pool`): from pageable memory the
    /// driver copies synchronously and the result is the same, only slower.
    /// Waits for the GPU before returning, also on errors, so the host
    /// slices are never read after the call.
    pub fn compute_h_from_host(
        &self,
        a: &[Scalar],
        b: &[Scalar],
        c: &[Scalar],
        out: &mut [Scalar],
        bufs: &mut HBuffers,
        upload: Upload,
    ) -> Result<()> {
        let log2 = bufs.log2;
        let m = 1usize << log2;
        let n = a.len();
        if b.len() != n || c.len() != n || n > m || out.len() != m - 1 {
            return Err(Groth16Error::NttSize {
                detail: format!(
                    "a, b, c of {}, {}, {} elements into buffers of 2^{log2} and an output of {} \
                     (a, b, c must have the same length n <= m, the output m - 1 = {})",
                    n,
                    b.len(),
                    c.len(),
                    out.len(),
                    m - 1
                ),
            });
        }
        let _s = tracing::debug_span!("ntt_h_from_host", log2, n, ?upload).entered();
        let main = Arc::clone(self.gpu.stream());
        let copy = match upload {
            Upload::Overlapped => self.copy_stream()?,
            Upload::Serial => Arc::clone(&main),
        };
        let result = self.h_from_host_queued(a, b, c, out, bufs, &main, &copy);
        // Whatever happened, nothing may still read the host slices or write
        // `out` once this returns.
        let waited = self.gpu.synchronize().and_then(|()| {
            copy.synchronize()
                .map_err(cuda_error("waiting for the copy stream"))
        });
        result.and(waited)
    }

    #[allow(clippy::too_many_arguments)]
    fn h_from_host_queued(
        &self,
        a: &[Scalar],
        b: &[Scalar],
        c: &[Scalar],
        out: &mut [Scalar],
        bufs: &mut HBuffers,
        main: &Arc<CudaStream>,
        copy: &Arc<CudaStream>,
    ) -> Result<()> {
        let log2 = bufs.log2;
        let domain = if log2 == 0 {
            None
        } else {
            Some(self.domain(log2)?)
        };
        self.gpu.bind("uploading a, b, c for the NTT")?;
        if !Arc::ptr_eq(main, copy) {
            // The copy stream must not write the buffers before their
            // allocation and earlier users on the main stream are done.
            copy.join(main).map_err(cuda_error(
                "ordering the copy stream after the GPU's stream",
            ))?;
        }
        upload_padded(main, &mut bufs.a, a)?;
        upload_padded(copy, &mut bufs.b, b)?;
        upload_padded(copy, &mut bufs.c, c)?;
        if let Some(domain) = &domain {
            // The launches that read b and c wait for their uploads: cudarc
            // records each buffer's last write on the stream that made it and
            // makes the launching stream wait for it.
            let launches = domain.plan.launches(Op::H);
            self.run(
                domain,
                &launches,
                &mut bufs.a,
                Some(&mut bufs.b),
                Some(&mut bufs.c),
            )?;
        }
        if out.is_empty() {
            return Ok(());
        }
        let h = match domain.map(|d| d.plan.h_result()) {
            Some(Vector::B) => &bufs.b,
            _ => &bufs.a,
        };
        let (src, _record) = h.slice().device_ptr(main);
        // SAFETY: `src` holds m >= out.len() elements of `Scalar` in this
        // GPU's context (bound above); `out` is valid for writes of its
        // length, and the caller waits for the stream before `out` is used
        // or released (compute_h_from_host synchronizes on every path).
        unsafe { cu_result::memcpy_dtoh_async(out, src, main.cu_stream()) }
            .map_err(cuda_error("downloading h"))
    }

    /// The second stream, created on first use.
    fn copy_stream(&self) -> Result<Arc<CudaStream>> {
        let mut slot = lock(&self.copy_stream);
        if let Some(stream) = slot.as_ref() {
            return Ok(Arc::clone(stream));
        }
        let stream = self
            .gpu
            .cuda_context()
            .new_stream()
            .map_err(cuda_error("creating the NTT's copy stream"))?;
        *slot = Some(Arc::clone(&stream));
        Ok(stream)
    }
}

/// Host a, b, c for H over a domain of 2^log2: the same length n <= m each.
fn check_host_abc(a: &[Scalar], b: &[Scalar], c: &[Scalar], log2: u32) -> Result<()> {
    if log2 > MAX_LOG2 {
        return Err(Groth16Error::NttSize {
            detail: format!("h over 2^{log2}; the NTT takes up to 2^{MAX_LOG2}"),
        });
    }
    let m = 1usize << log2;
    let n = a.len();
    if b.len() != n || c.len() != n || n > m {
        return Err(Groth16Error::NttSize {
            detail: format!(
                "a, b, c of {}, {}, {} elements over a domain of 2^{log2} (the same length \
                 n <= m = {m} for each)",
                n,
                b.len(),
                c.len()
            ),
        });
    }
    Ok(())
}

/// The log2 domain size of `compute_h` for a, b, c (bellperson's rule).
fn h_log2(a: &[Scalar], b: &[Scalar], c: &[Scalar]) -> Result<u32> {
    let n = a.len();
    for (what, v) in [("b", b), ("c", c)] {
        if v.len() != n {
            return Err(cuzk_synth::SynthError::LengthMismatch {
                what,
                expected: n,
                found: v.len(),
            }
            .into());
        }
    }
    let m = n.max(1).next_power_of_two();
    let log2 = m.trailing_zeros();
    if log2 > MAX_LOG2 {
        return Err(Groth16Error::DomainTooLarge { constraints: n });
    }
    Ok(log2)
}
