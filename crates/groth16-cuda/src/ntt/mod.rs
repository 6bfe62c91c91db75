//! NTTs over BLS12-381's Fr on the GPU (PTX module `ntt`), and the H
//! polynomial of a Groth16 proof from device-resident a, b, c.
//!
//! [`GpuNtt`] plans each domain size once ([`plan::DomainPlan`]: the passes
//! and the small twiddle and scaling tables, uploaded and kept on the device)
//! and launches the passes on the GPU's stream. The results equal
//! bellperson's `EvaluationDomain` bit for bit (same omega, same coset
//! generator, same scalings): field arithmetic is exact, so any correct
//! transform gives the same canonical bytes; the tests compare against
//! [`crate::cpu::compute_h`] and `EvaluationDomain` directly.
//!
//! The H computation makes 7 transforms of 3 passes at 2^26 (plus one fused
//! bit-reversal), each pass one read and one write of the vector, and is
//! bound by field multiplications, not memory: on an H200 a 2^26 H takes
//! 252 ms against 208 ms for its multiplications at the measured Fr rate
//! and 23 ms for its bytes at the measured copy bandwidth
//! (`examples/ntt_bench.rs`, bench-data/ntt/2026-11-29-ea85b80-h.json).

pub mod plan;

use std::{
    collections::HashMap,
    mem::{size_of, size_of_val},
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use blstrs::Scalar;
use cudarc::driver::{
    CudaStream, DevicePtr, DevicePtrMut, DeviceRepr, LaunchConfig, result as cu_result,
};

use crate::{
    Groth16Error, Result,
    cuda::{DeviceBuffer, Gpu},
};
use plan::{
    DomainPlan, Launch, MAX_LOG2, Op, POST_BITREV_SCALE, PRE_AB_MINUS_C, TableSpec, Vector,
};
pub use plan::{Stages, TableLayout};

/// The PTX module's name.
const MODULE: &str = "ntt";

// SAFETY: `PassParams` is `repr(C)`, `Copy`, made only of `u32` fields (no
// padding, no pointers), with the field order of `ntt_pass_params` in
// kernels/ntt/ntt.cuh, so its bytes are the kernel's parameter.
unsafe impl DeviceRepr for plan::PassParams {}
// SAFETY: as above, for `ntt_bitrev_params`.
unsafe impl DeviceRepr for plan::BitrevParams {}

/// How [`GpuNtt::compute_h_from_host`] uploads its inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Upload {
    /// a on the GPU's stream, b and c on a second stream while a is being
    /// transformed (fully asynchronous only from pinned host memory).
    Overlapped,
    /// Everything on the GPU's stream, one after the other.
    Serial,
}

/// The elementwise operations of [`GpuNtt::pointwise`] (`NTT_POINTWISE_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Pointwise {
    /// x = x * y.
    Mul = 0,
    /// x = x - y.
    Sub = 1,
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

/// The pass kernel variants of `kernels/ntt.cu` (`NTT_PASS_KERNELS`): how
/// the stages run ([`Stages`]), threads per block, and the blocks per SM
/// the register allocation must allow. All give the same values; they
/// differ in speed, chosen by measurement (`examples/ntt_bench.rs` times
/// each beside the default in one run). The default, stage pairs at 128
/// threads, measured fastest on an H200 in every table layout at 2^24 and
/// 2^26 (bench-data/ntt/2026-12-05-65c4aed-pass-variants.json: H at 2^26
/// 155.8 ms against radix-2's 175.0, both with the fused bit-reversal).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PassKernel {
    /// Radix-2 stages, 256 threads (74-78 registers, 3 blocks per SM).
    Radix2,
    /// Radix-2 stages, 128 threads held to 6 blocks per SM (70-72 registers).
    Radix2T128,
    /// Radix-2 stages, 256 threads held to 64 registers (4 blocks per SM;
    /// a few spilled words).
    Radix2T256B4,
    /// Stage pairs, 256 threads (78-88 registers).
    Radix4,
    /// Stage pairs, 256 threads held to 3 blocks per SM (77-78 registers).
    Radix4T256B3,
    /// Stage pairs, 128 threads held to 6 blocks per SM (77-78 registers).
    #[default]
    Radix4T128B6,
    /// Stage pairs, 256 threads held to 64 registers (4 blocks per SM;
    /// a few spilled words).
    Radix4T256B4,
}

impl PassKernel {
    /// Every variant, the default first.
    pub const ALL: [PassKernel; 7] = [
        PassKernel::Radix4T128B6,
        PassKernel::Radix2,
        PassKernel::Radix2T128,
        PassKernel::Radix2T256B4,
        PassKernel::Radix4,
        PassKernel::Radix4T256B3,
        PassKernel::Radix4T256B4,
    ];

    /// The suffix of its entry points, `ntt_{dif,dit}_pass<suffix>_bls12_381`.
    pub fn suffix(self) -> &'static str {
        match self {
            PassKernel::Radix2 => "",
            PassKernel::Radix2T128 => "_r2_t128",
            PassKernel::Radix2T256B4 => "_r2_t256_b4",
            PassKernel::Radix4 => "_r4_t256",
            PassKernel::Radix4T256B3 => "_r4_t256_b3",
            PassKernel::Radix4T128B6 => "_r4_t128_b6",
            PassKernel::Radix4T256B4 => "_r4_t256_b4",
        }
    }

    /// Threads per block it is compiled for.
    pub fn threads(self) -> u32 {
        match self {
            PassKernel::Radix2T128 | PassKernel::Radix4T128B6 => 128,
            _ => plan::THREADS,
        }
    }

    /// How it runs the stages.
    pub fn stages(self) -> Stages {
        match self {
            PassKernel::Radix2 | PassKernel::Radix2T128 | PassKernel::Radix2T256B4 => {
                Stages::Radix2
            }
            _ => Stages::Radix4,
        }
    }

    /// The entry point of a DIT (`dit`) or DIF pass.
    pub fn entry_point(self, dit: bool) -> String {
        let dir = if dit { "dit" } else { "dif" };
        format!("ntt_{dir}_pass{}_bls12_381", self.suffix())
    }
}

/// Tuning of [`GpuNtt`]; [`NttConfig::default`] is what the prover uses:
/// stage pairs at 128 threads, small tables, the fused final bit-reversal
/// (each measured faster than the alternative on an H200, none costing
/// memory). Whole tables are the caller's choice ([`GpuOptions::ntt`]).
///
/// [`GpuOptions::ntt`]: crate::GpuOptions::ntt
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NttConfig {
    /// The pass kernel variant.
    pub pass_kernel: PassKernel,
    /// How large the tables may be ([`TableLayout`]): the default keeps
    /// every table within 8 MiB; [`TableLayout::WHOLE`] saves H about 10%
    /// of its multiplications for three tables of 32 * 2^log2 bytes (6 GiB
    /// at 2^26). A `GpuNtt` keeps the tables of every domain size it has
    /// run for its lifetime.
    pub tables: TableLayout,
    /// H's final bit-reversal done by the last pass of its last inverse
    /// transform, writing natural order into the second vector (one launch
    /// and one read and write of the vector fewer;
    /// [`DomainPlan::with_fused_bitrev`]); the entry points hand back the
    /// buffers so that h is where their callers expect it.
    pub fused_bitrev: bool,
}

impl Default for NttConfig {
    fn default() -> Self {
        NttConfig {
            pass_kernel: PassKernel::default(),
            tables: TableLayout::default(),
            fused_bitrev: true,
        }
    }
}

/// A domain's plan and its tables on the device.
struct Domain {
    plan: DomainPlan,
    tables: Vec<DeviceBuffer<Scalar>>,
}

/// The NTT kernels of one GPU, with the tables of every domain size used so
/// far cached on the device. Cheap to share (`&self` everywhere); launches go
/// to the calling thread's stream ([`Gpu::stream`]).
pub struct GpuNtt {
    gpu: Arc<Gpu>,
    config: NttConfig,
    domains: Mutex<HashMap<u32, Arc<Domain>>>,
    /// The second stream of [`Upload::Overlapped`], created on first use.
    copy_stream: Mutex<Option<Arc<CudaStream>>>,
}

impl std::fmt::Debug for GpuNtt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut sizes: Vec<u32> = lock(&self.domains).keys().copied().collect();
        sizes.sort_unstable();
        f.debug_struct("GpuNtt")
            .field("gpu", &self.gpu.ordinal())
            .field("config", &self.config)
            .field("domains_log2", &sizes)
            .finish()
    }
}

impl GpuNtt {
    /// The NTT of `gpu`; nothing is loaded or allocated until first use.
    pub fn new(gpu: Arc<Gpu>) -> Self {
        Self::with_config(gpu, NttConfig::default())
    }

    /// [`GpuNtt::new`] with another configuration.
    pub fn with_config(gpu: Arc<Gpu>, config: NttConfig) -> Self {
        GpuNtt {
            gpu,
            config,
            domains: Mutex::new(HashMap::new()),
            copy_stream: Mutex::new(None),
        }
    }

    /// The GPU it runs on.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    /// Its configuration.
    pub fn config(&self) -> NttConfig {
        self.config
    }

    /// Loads the module and builds the tables of a 2^log2 domain now, to
    /// take that one-time work out of a measurement.
    pub fn prepare(&self, log2: u32) -> Result<()> {
        self.gpu.load_module(MODULE)?;
        if log2 > 0 {
            self.domain(log2)?;
        }
        Ok(())
    }

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
        let _s = tracing::debug_span!("ntt_h_two_buffers", log2, n).entered();
        let main = Arc::clone(self.gpu.stream());
        let mut x = self.gpu.alloc_zeros::<Scalar>(m)?;
        let mut y = self.gpu.alloc_zeros::<Scalar>(m)?;
        let result = self.h_two_buffers_queued([a, b, c], log2, &main, copy, &mut x, &mut y);
        // The host slices may be released once this returns.
        let waited = copy
            .synchronize()
            .map_err(cuda_error("waiting for the copy stream"));
        result.and(waited)?;
        drop(y);
        Ok(x)
    }

    fn h_two_buffers_queued(
        &self,
        [a, b, c]: [&[Scalar]; 3],
        log2: u32,
        main: &Arc<CudaStream>,
        copy: &Arc<CudaStream>,
        x: &mut DeviceBuffer<Scalar>,
        y: &mut DeviceBuffer<Scalar>,
    ) -> Result<()> {
        self.gpu.bind("uploading a, b, c for the NTT")?;
        if !Arc::ptr_eq(main, copy) {
            // Nothing on the copy stream may write the new buffers before
            // their allocation on the main stream.
            copy.join(main).map_err(cuda_error(
                "ordering the copy stream after the GPU's stream",
            ))?;
        }
        upload_padded(main, x, a)?;
        if log2 == 0 {
            return Ok(());
        }
        let domain = self.domain(log2)?;
        let coset = domain.plan.launches(Op::HCoset);
        self.run(&domain, &coset, x, None, None)?;
        // cudarc orders the launches reading y after its upload on `copy`,
        // and the next upload into y after those reads.
        upload_padded(copy, y, b)?;
        self.run(&domain, &coset, y, None, None)?;
        self.pointwise(x, y, Pointwise::Mul)?;
        upload_padded(copy, y, c)?;
        self.run(&domain, &coset, y, None, None)?;
        self.pointwise(x, y, Pointwise::Sub)?;
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

    /// bellperson's `EvaluationDomain::fft` of `x` (2^log2 elements) in place.
    pub fn fft(&self, x: &mut DeviceBuffer<Scalar>, log2: u32) -> Result<()> {
        self.transform(Op::Fft, x, log2)
    }

    /// bellperson's `EvaluationDomain::ifft` (with the 1/m scaling).
    pub fn ifft(&self, x: &mut DeviceBuffer<Scalar>, log2: u32) -> Result<()> {
        self.transform(Op::Ifft, x, log2)
    }

    /// bellperson's `EvaluationDomain::coset_fft`.
    pub fn coset_fft(&self, x: &mut DeviceBuffer<Scalar>, log2: u32) -> Result<()> {
        self.transform(Op::CosetFft, x, log2)
    }

    /// bellperson's `EvaluationDomain::icoset_fft`.
    pub fn icoset_fft(&self, x: &mut DeviceBuffer<Scalar>, log2: u32) -> Result<()> {
        self.transform(Op::IcosetFft, x, log2)
    }

    /// Low level: queues `launches`, made by [`DomainPlan::launches`] (or
    /// its parts) for a domain of 2^log2, on vectors a, b, c of that size
    /// (b and c as the launches need them). For timing the passes one by one.
    /// A launch the domain's plan does not make is refused
    /// ([`DomainPlan::is_planned`]).
    pub fn run_launches(
        &self,
        log2: u32,
        launches: &[Launch],
        a: &mut DeviceBuffer<Scalar>,
        b: Option<&mut DeviceBuffer<Scalar>>,
        c: Option<&mut DeviceBuffer<Scalar>>,
    ) -> Result<()> {
        check_len("a", a, log2)?;
        for (what, v) in [("b", b.as_deref()), ("c", c.as_deref())] {
            if let Some(v) = v {
                check_len(what, v, log2)?;
            }
        }
        if log2 == 0 {
            return Ok(());
        }
        let domain = self.domain(log2)?;
        if let Some(l) = launches.iter().find(|l| !domain.plan.is_planned(l)) {
            return Err(Groth16Error::NttSize {
                detail: format!("a launch the plan of 2^{log2} does not make: {l:?}"),
            });
        }
        self.run(&domain, launches, a, b, c)
    }

    fn transform(&self, op: Op, x: &mut DeviceBuffer<Scalar>, log2: u32) -> Result<()> {
        check_len("the vector", x, log2)?;
        if log2 == 0 {
            // Every transform of one element is the identity.
            return Ok(());
        }
        let domain = self.domain(log2)?;
        self.run(&domain, &domain.plan.launches(op), x, None, None)
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

    /// The plan and device tables of a 2^log2 domain, built on first use.
    fn domain(&self, log2: u32) -> Result<Arc<Domain>> {
        let mut domains = lock(&self.domains);
        if let Some(d) = domains.get(&log2) {
            return Ok(Arc::clone(d));
        }
        let _s = tracing::debug_span!("ntt_tables", log2).entered();
        let plan = DomainPlan::with_layout(log2, self.config.tables)?
            .with_fused_bitrev(self.config.fused_bitrev);
        let tables = plan
            .tables()
            .iter()
            .map(|t: &TableSpec| self.gpu.upload(&t.values()))
            .collect::<Result<Vec<_>>>()?;
        let domain = Arc::new(Domain { plan, tables });
        domains.insert(log2, Arc::clone(&domain));
        Ok(domain)
    }

    /// Queues `launches` on the GPU's stream.
    fn run(
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

fn check_len(what: &str, v: &DeviceBuffer<Scalar>, log2: u32) -> Result<()> {
    if log2 > MAX_LOG2 {
        return Err(Groth16Error::NttSize {
            detail: format!("a domain of 2^{log2} elements; the NTT takes up to 2^{MAX_LOG2}"),
        });
    }
    if v.len() != 1usize << log2 {
        return Err(Groth16Error::NttSize {
            detail: format!(
                "{what} holds {} elements, the domain 2^{log2} = {}",
                v.len(),
                1usize << log2
            ),
        });
    }
    Ok(())
}

/// Copies `src` into the start of `dst` on `stream` and zeroes the rest.
fn upload_padded(
    stream: &Arc<CudaStream>,
    dst: &mut DeviceBuffer<Scalar>,
    src: &[Scalar],
) -> Result<()> {
    let len = dst.len();
    if src.len() > len {
        return Err(Groth16Error::CopyLength {
            what: "into an NTT buffer",
            device: len,
            host: src.len(),
        });
    }
    // Records the writes below as the buffer's last write when dropped.
    let (ptr, _record) = dst.slice_mut().device_ptr_mut(stream);
    if !src.is_empty() {
        // SAFETY: `ptr` holds `len >= src.len()` elements of `Scalar` in the
        // GPU's context (the caller bound it); `src` stays borrowed until the
        // caller has waited for the stream.
        unsafe { cu_result::memcpy_htod_async(ptr, src, stream.cu_stream()) }
            .map_err(cuda_error("uploading an NTT input"))?;
    }
    let tail = (len - src.len()) * size_of::<Scalar>();
    if tail > 0 {
        let start = ptr + size_of_val(src) as u64;
        // SAFETY: [start, start + tail) is the end of the same allocation.
        unsafe { cu_result::memset_d8_async(start, 0, tail, stream.cu_stream()) }
            .map_err(cuda_error("zero-padding an NTT input"))?;
    }
    Ok(())
}

fn cuda_error(what: &'static str) -> impl FnOnce(cudarc::driver::DriverError) -> Groth16Error {
    move |err| Groth16Error::Cuda {
        what: what.to_owned(),
        detail: err.to_string(),
    }
}

/// The caches stay consistent if a holder panicked; ignore poisoning.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each variant's suffix, threads and stages are those the module
    /// instantiates (`NTT_PASS_KERNELS(suffix, r4, threads, min_blocks)` in
    /// kernels/ntt.cu), and no instantiation lacks a variant.
    #[test]
    fn pass_kernels_match_the_module() {
        let source = include_str!("../../../../kernels/ntt.cu");
        let lines: Vec<Vec<&str>> = source
            .lines()
            .filter_map(|l| l.strip_prefix("NTT_PASS_KERNELS("))
            .map(|l| l.trim_end_matches(')').split(',').map(str::trim).collect())
            .collect();
        assert_eq!(lines.len(), PassKernel::ALL.len(), "{lines:?}");
        for k in PassKernel::ALL {
            let line = lines
                .iter()
                .find(|l| l[0] == k.suffix())
                .unwrap_or_else(|| panic!("{k:?}: no NTT_PASS_KERNELS({}, ...)", k.suffix()));
            assert_eq!(line[1] == "true", k.stages() == Stages::Radix4, "{k:?}");
            assert_eq!(line[2], k.threads().to_string(), "{k:?}");
        }
        // The names the macro makes are those entry_point gives.
        for dir in ["dif", "dit"] {
            let made = format!("ntt_{dir}_pass##SUFFIX##_bls12_381(");
            assert!(
                source.contains(&made),
                "kernels/ntt.cu no longer makes {made}"
            );
        }
        assert_eq!(
            PassKernel::Radix4.entry_point(true),
            "ntt_dit_pass_r4_t256_bls12_381"
        );
        assert_eq!(PassKernel::ALL[0], PassKernel::default());
        assert_eq!(
            PassKernel::default().entry_point(false),
            "ntt_dif_pass_r4_t128_b6_bls12_381"
        );
        assert_eq!(
            PassKernel::Radix2.entry_point(false),
            "ntt_dif_pass_bls12_381"
        );
        // The prover's default: stage pairs, small tables, the fused
        // bit-reversal (all measured faster; none costs memory).
        let d = NttConfig::default();
        assert_eq!(d.pass_kernel, PassKernel::Radix4T128B6);
        assert_eq!(d.tables, TableLayout::SMALL);
        assert!(d.fused_bitrev);
    }
}
