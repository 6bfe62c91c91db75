//! Fixed-base scalar multiplication on the GPU (PTX module `setup`): the
//! generator's table uploaded once, then per chunk of scalars one kernel
//! that multiplies (one thread per scalar, XYZZ) and one that converts to
//! affine (batch inversion per thread), and the affine points, in blst's
//! layout, back to the host.

use std::sync::Arc;

use blstrs::{Fp, Fp2, G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use group::prime::PrimeCurveAffine;

use super::fixed_base::{build_table, check_window_bits, windows};
use crate::cuda::{DeviceBuffer, DeviceElem, Gpu, grid_1d};
use crate::{Groth16Error, Result};

/// Threads per block; `SETUP_THREADS` in kernels/setup/fixed_base.cuh.
const BLOCK: u32 = 128;
/// Points per thread of the affine conversion: one field inversion (about
/// 570 multiplications in Fq) shared by this many points, against about 9
/// multiplications per point for the batch itself.
const POINTS_PER_INVERSION: usize = 32;
/// The most scalars one chunk takes: 2^22 G2 scalars hold 2.5 GB of device
/// memory (scalar, XYZZ point and affine point: 608 bytes each).
pub const MAX_CHUNK: usize = 1 << 22;

/// The curve-specific parts of the GPU path.
trait SetupCurve: DeviceElem + PrimeCurveAffine<Scalar = Scalar> {
    /// The coordinate field; an XYZZ point is four of them.
    type Coord: DeviceElem;
    /// `g1` or `g2`: kernels are `setup_<op>_<curve>_bls12_381`.
    const CURVE: &'static str;
}

impl SetupCurve for G1Affine {
    type Coord = Fp;
    const CURVE: &'static str = "g1";
}

impl SetupCurve for G2Affine {
    type Coord = Fp2;
    const CURVE: &'static str = "g2";
}

/// Device bytes per scalar of a chunk: the scalar, its XYZZ point and its
/// affine point.
fn bytes_per_scalar<C: SetupCurve>() -> usize {
    size_of::<Scalar>() + 4 * size_of::<C::Coord>() + size_of::<C>()
}

/// Fixed-base multiplication by one G1 and one G2 generator on one GPU,
/// the tables resident on the device.
pub struct GpuFixedBase {
    gpu: Arc<Gpu>,
    c: u32,
    g1_table: DeviceBuffer<G1Affine>,
    g2_table: DeviceBuffer<G2Affine>,
    chunk_len: usize,
    kernel_ms: f64,
}

impl std::fmt::Debug for GpuFixedBase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuFixedBase")
            .field("gpu", &self.gpu.ordinal())
            .field("window_bits", &self.c)
            .field("chunk_len", &self.chunk_len)
            .finish_non_exhaustive()
    }
}

impl GpuFixedBase {
    /// Builds the tables of `g1` and `g2` for `c`-bit windows on the CPU and
    /// uploads them to GPU `ordinal`. Chunks hold up to [`MAX_CHUNK`]
    /// scalars, fewer when a quarter of the free device memory is less.
    pub fn new(ordinal: usize, g1: &G1Projective, g2: &G2Projective, c: u32) -> Result<Self> {
        check_window_bits(c)?;
        let gpu = Gpu::get(ordinal)?;
        gpu.load_module("setup")?;
        let _s = tracing::info_span!("setup_tables", c, gpu = ordinal).entered();
        let g1_table = gpu.upload(&build_table(g1, c)?)?;
        let g2_table = gpu.upload(&build_table(g2, c)?)?;
        let (free, _) = gpu.mem_info()?;
        let by_memory = (free as usize / 4) / bytes_per_scalar::<G2Affine>();
        let chunk_len = MAX_CHUNK.min(by_memory.max(1 << 16));
        Ok(GpuFixedBase {
            gpu,
            c,
            g1_table,
            g2_table,
            chunk_len,
            kernel_ms: 0.0,
        })
    }

    /// Limits chunks to `len` scalars (at least 1): the same results, more
    /// launches. For tests of chunk boundaries and for small devices.
    pub fn with_chunk_len(mut self, len: usize) -> Self {
        self.chunk_len = len.clamp(1, MAX_CHUNK);
        self
    }

    /// Scalars per chunk.
    pub fn chunk_len(&self) -> usize {
        self.chunk_len
    }

    /// The window width in bits.
    pub fn window_bits(&self) -> u32 {
        self.c
    }

    /// The GPU it runs on.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    /// GPU time of the kernels so far, in milliseconds (CUDA events).
    pub fn kernel_ms(&self) -> f64 {
        self.kernel_ms
    }

    /// `s * g1` for every scalar, in affine form (the identity for 0).
    pub fn g1(&mut self, scalars: &[Scalar]) -> Result<Vec<G1Affine>> {
        let (gpu, c, len) = (Arc::clone(&self.gpu), self.c, self.chunk_len);
        run(&gpu, &self.g1_table, c, len, scalars, &mut self.kernel_ms)
    }

    /// `s * g2` for every scalar, in affine form (the identity for 0).
    pub fn g2(&mut self, scalars: &[Scalar]) -> Result<Vec<G2Affine>> {
        let (gpu, c, len) = (Arc::clone(&self.gpu), self.c, self.chunk_len);
        run(&gpu, &self.g2_table, c, len, scalars, &mut self.kernel_ms)
    }
}

fn run<C: SetupCurve>(
    gpu: &Arc<Gpu>,
    table: &DeviceBuffer<C>,
    c: u32,
    chunk_len: usize,
    scalars: &[Scalar],
    kernel_ms: &mut f64,
) -> Result<Vec<C>> {
    let _s =
        tracing::debug_span!("setup_fixed_base", curve = C::CURVE, n = scalars.len()).entered();
    let mul = gpu.kernel(
        "setup",
        &format!("setup_fixed_base_mul_{}_bls12_381", C::CURVE),
    )?;
    let to_affine = gpu.kernel("setup", &format!("setup_to_affine_{}_bls12_381", C::CURVE))?;
    let mut out = vec![C::identity(); scalars.len()];
    let w = windows(c);
    for (scalars, out) in scalars.chunks(chunk_len).zip(out.chunks_mut(chunk_len)) {
        let n = u32::try_from(scalars.len()).map_err(|_| Groth16Error::Cuda {
            what: "sizing a fixed-base chunk".to_owned(),
            detail: format!("{} scalars do not fit 32-bit indices", scalars.len()),
        })?;
        let s = gpu.upload(scalars)?;
        let mut xyzz = gpu.alloc_zeros::<C::Coord>(4 * scalars.len())?;
        let mut affine = gpu.alloc_zeros::<C>(scalars.len())?;
        let start = gpu.event()?;
        // SAFETY: setup_fixed_base_mul_<G>_bls12_381(const affine_t<F>*
        // table, uint32_t c, uint32_t windows, const fr_t* scalars, uint32_t
        // n, xyzz_t<F>* out): the table holds windows(c) * 2^(c-1) points
        // (built for this c), scalars n elements, out n XYZZ points (4n
        // coordinates); the kernel touches index i < n only.
        unsafe {
            mul.args()
                .buf(table)
                .arg(&c)
                .arg(&w)
                .buf(&s)
                .arg(&n)
                .buf_mut(&mut xyzz)
                .launch(grid_1d(scalars.len(), BLOCK)?)?;
        }
        let threads = scalars.len().div_ceil(POINTS_PER_INVERSION);
        // SAFETY: setup_to_affine_<G>_bls12_381(const xyzz_t<F>* in,
        // uint32_t n, affine_t<F>* out): in holds n XYZZ points and out n
        // affine points; thread t touches indices t + k * (grid threads) < n.
        unsafe {
            to_affine
                .args()
                .buf(&xyzz)
                .arg(&n)
                .buf_mut(&mut affine)
                .launch(grid_1d(threads, BLOCK)?)?;
        }
        let end = gpu.event()?;
        affine.copy_to_host(out)?;
        *kernel_ms += end.ms_since(&start)?;
    }
    Ok(out)
}
