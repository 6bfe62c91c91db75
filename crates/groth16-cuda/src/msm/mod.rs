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

mod batch_affine;
mod plan;
mod reduce;

use std::any::Any;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use blstrs::{Fp, Fp2, G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::Field;
use group::Group;

use crate::cuda::{DeviceBuffer, DeviceElem, DeviceRange, Gpu, Kernel, LaunchConfig, grid_1d};
use crate::{Groth16Error, Result};

pub use batch_affine::accumulate_batch_affine_cpu;
pub use plan::{
    MAX_WINDOW, MIN_WINDOW, batch_affine_segment_len, carried_window_bits, multiples_window_bits,
    window_bits, windows,
};
pub use reduce::reduce_cpu;

/// Threads per block of the curve kernels; must equal `MSM_CURVE_THREADS` in
/// kernels/msm/pippenger.cuh (their `__launch_bounds__`).
const CURVE_BLOCK: u32 = 128;
/// Threads per block of the scalar kernels (module `msm`).
const SCALAR_BLOCK: u32 = 256;
/// Elements per thread in the levels after the first of every segmented sum
/// (their lists are short).
const PARTIALS_PER: u32 = 32;
/// Elements per thread of the scan kernels.
const SCAN_PER: u32 = 64;
/// Bases and variables are indexed with 31 bits on the device (the top bit
/// of a sorted entry is the digit's sign).
const MAX_LEN: usize = (1 << 31) - 1;

mod sealed {
    pub trait Sealed {}
    impl Sealed for blstrs::G1Affine {}
    impl Sealed for blstrs::G2Affine {}
}

/// The affine point types an MSM runs over: [`G1Affine`] and [`G2Affine`].
pub trait MsmAffine: DeviceElem + sealed::Sealed {
    /// The result type.
    type Projective: Group + Copy + Send + Sync + std::fmt::Debug;
    /// The coordinate field; an XYZZ point is four of them on the device.
    type Coord: DeviceElem + Field;
    /// `g1` or `g2`: the kernels are `msm_<op>_<curve>_bls12_381` in module
    /// `msm_<curve>`.
    const CURVE: &'static str;
    /// The module of the curve kernels.
    const MODULE: &'static str;
    /// What [`Accumulate::Auto`] means for this curve (never `Auto`).
    const FASTEST_ACCUMULATE: Accumulate;
    /// The point x/ZZ, y/ZZZ from XYZZ coordinates, as blst's Jacobian
    /// (x = X/Z^2, y = Y/Z^3): Z = ZZ ZZZ, X = x ZZ ZZZ^2, Y = y ZZ^3 ZZZ^2.
    fn from_xyzz(xyzz: &[Self::Coord]) -> Self::Projective;
    /// The affine coordinates (x, y) as the device holds them: (0, 0) for
    /// the identity.
    fn xy(&self) -> [Self::Coord; 2];
}

/// The Jacobian coordinates of an XYZZ point, or None for the identity.
fn xyzz_to_jacobian<F: Field>(p: &[F]) -> Option<(F, F, F)> {
    let (x, y, zz, zzz) = (p[0], p[1], p[2], p[3]);
    if bool::from(zz.is_zero()) {
        return None;
    }
    let zzz2 = zzz.square();
    Some((x * zz * zzz2, y * zz.square() * zz * zzz2, zz * zzz))
}

impl MsmAffine for G1Affine {
    type Projective = G1Projective;
    type Coord = Fp;
    const CURVE: &'static str = "g1";
    const MODULE: &'static str = "msm_g1";
    const FASTEST_ACCUMULATE: Accumulate = Accumulate::PlainV4;
    fn from_xyzz(xyzz: &[Fp]) -> G1Projective {
        match xyzz_to_jacobian(xyzz) {
            Some((x, y, z)) => G1Projective::from_raw_unchecked(x, y, z),
            None => G1Projective::identity(),
        }
    }
    fn xy(&self) -> [Fp; 2] {
        [self.x(), self.y()]
    }
}

impl MsmAffine for G2Affine {
    type Projective = G2Projective;
    type Coord = Fp2;
    const CURVE: &'static str = "g2";
    const MODULE: &'static str = "msm_g2";
    const FASTEST_ACCUMULATE: Accumulate = Accumulate::PlainV4;
    fn from_xyzz(xyzz: &[Fp2]) -> G2Projective {
        match xyzz_to_jacobian(xyzz) {
            Some((x, y, z)) => G2Projective::from_raw_unchecked(x, y, z),
            None => G2Projective::identity(),
        }
    }
    fn xy(&self) -> [Fp2; 2] {
        [self.x(), self.y()]
    }
}

/// A parameter query's affine points, resident in one GPU's memory: upload
/// once per parameter set, then use in any number of MSMs on that GPU.
///
/// Optionally with the multiples of every base for every window of a
/// fixed window size ([`DeviceBases::with_window_multiples`]): 2^(c k) P_i
/// for k < windows(c), made on the GPU once. An MSM over such bases puts
/// every window's digits into one set of buckets (the entry names the
/// multiple), so it reduces 2^(c-1) buckets once instead of per window and
/// combines no windows, and wider windows (fewer of them, so fewer
/// additions) pay off. The cost is memory: windows(c) copies of the bases
/// ([`DeviceBases::device_bytes`]), allocated through the GPU's memory
/// accounting like any buffer.
#[derive(Debug)]
pub struct DeviceBases<A: MsmAffine> {
    /// The bases, then (with multiples) window 1's multiples of them, and
    /// so on: `windows * len` points.
    points: DeviceBuffer<A>,
    /// The number of bases.
    len: usize,
    /// With multiples: their window size.
    multiples_of: Option<u32>,
}

/// Bases per launch when making window multiples: bounds the XYZZ and
/// affine scratch (2^22 G1 points: 800 MB and 400 MB).
const MULTIPLES_CHUNK: usize = 1 << 22;
/// Points per field inversion in the affine conversion of window multiples
/// (kernels/setup's to_affine, Montgomery's batch inversion per thread).
const MULTIPLES_PER_INVERSION: usize = 32;

impl<A: MsmAffine> DeviceBases<A> {
    /// Copies `bases` to the GPU. Identity points are allowed (they add
    /// nothing).
    pub fn upload(gpu: &Arc<Gpu>, bases: &[A]) -> Result<Self> {
        if bases.len() > MAX_LEN {
            return Err(Groth16Error::MsmShape {
                detail: format!(
                    "{} bases are more than the {MAX_LEN} one MSM can index",
                    bases.len()
                ),
            });
        }
        Ok(DeviceBases {
            points: gpu.upload(bases)?,
            len: bases.len(),
            multiples_of: None,
        })
    }

    /// Room for `len` points, contents unset (filled by the caller before
    /// an MSM reads them).
    pub(crate) fn alloc(gpu: &Arc<Gpu>, len: usize) -> Result<Self> {
        if len > MAX_LEN {
            return Err(Groth16Error::MsmShape {
                detail: format!("{len} bases are more than the {MAX_LEN} one MSM can index"),
            });
        }
        Ok(DeviceBases {
            points: DeviceBuffer::alloc(gpu, len, false)?,
            len,
            multiples_of: None,
        })
    }

    /// The same bases with their multiples for every window of `c` bits
    /// (see [`DeviceBases`]), made on this GPU: windows(c) * len points in
    /// all. Errors when `c` is outside the kernels' windows, when the
    /// multiples would need indices past 2^31, or when device memory is
    /// short (then the plain bases are dropped too: upload again).
    pub fn with_window_multiples(self, c: u32) -> Result<Self> {
        if !(MIN_WINDOW..=MAX_WINDOW).contains(&c) {
            return Err(Groth16Error::MsmShape {
                detail: format!(
                    "a window of {c} bits; the kernels take {MIN_WINDOW} to {MAX_WINDOW}"
                ),
            });
        }
        let n = self.len;
        let w = windows(c) as usize;
        let total = n.checked_mul(w).filter(|&t| t <= MAX_LEN);
        let Some(total) = total else {
            return Err(Groth16Error::MsmShape {
                detail: format!(
                    "{n} bases times {w} windows of {c} bits are more than the {MAX_LEN} points \
                     one MSM can index: take a narrower window or fewer bases"
                ),
            });
        };
        let gpu = Arc::clone(self.points.gpu());
        let mut table = DeviceBuffer::<A>::alloc(&gpu, total, false)?;
        table.copy_range_from(0, &self.points, 0, n)?;
        drop(self);
        if n > 0 && w > 1 {
            let shift = gpu.kernel(A::MODULE, &format!("msm_shift_{}_bls12_381", A::CURVE))?;
            let to_affine =
                gpu.kernel("setup", &format!("setup_to_affine_{}_bls12_381", A::CURVE))?;
            let chunk = n.min(MULTIPLES_CHUNK);
            let mut xyzz = DeviceBuffer::<A::Coord>::alloc(&gpu, 4 * chunk, false)?;
            let mut affine = DeviceBuffer::<A>::alloc(&gpu, chunk, false)?;
            for k in 1..w {
                for a in (0..n).step_by(chunk) {
                    let len = chunk.min(n - a);
                    // len <= MULTIPLES_CHUNK < 2^32.
                    let len32 = len as u32;
                    {
                        let prev = table.range((k - 1) * n + a, len)?;
                        // SAFETY: msm_shift_<G>_bls12_381(const affine_t*
                        // in, uint32_t n, uint32_t c, xyzz_t* out): thread
                        // i < len reads in[i] (the range holds len points,
                        // written by the copy or the previous window's
                        // conversion, ordered before on the stream) and
                        // writes out[i] (xyzz holds chunk >= len XYZZ
                        // points, 4 coordinates each).
                        unsafe {
                            shift
                                .args()
                                .range(&prev)
                                .arg(&len32)
                                .arg(&c)
                                .buf_mut(&mut xyzz)
                                .launch(grid_1d(len, CURVE_BLOCK)?)?;
                        }
                    }
                    let threads = len.div_ceil(MULTIPLES_PER_INVERSION);
                    // SAFETY: setup_to_affine_<G>_bls12_381(const xyzz_t*
                    // in, uint32_t n, affine_t* out): in holds len XYZZ
                    // points (chunk >= len) and out chunk >= len affine
                    // points; thread t touches indices t + j * (grid
                    // threads) < len only.
                    unsafe {
                        to_affine
                            .args()
                            .buf(&xyzz)
                            .arg(&len32)
                            .buf_mut(&mut affine)
                            .launch(grid_1d(threads, CURVE_BLOCK)?)?;
                    }
                    table.copy_range_from(k * n + a, &affine, 0, len)?;
                }
            }
            gpu.synchronize()?;
        }
        Ok(DeviceBases {
            points: table,
            len: n,
            multiples_of: Some(c),
        })
    }

    /// The window size of the multiples these bases carry, if any.
    pub fn multiples_window(&self) -> Option<u32> {
        self.multiples_of
    }

    /// Device memory the points take (with multiples: all windows').
    pub fn device_bytes(&self) -> u64 {
        self.points.size_bytes() as u64
    }

    /// The points, to fill.
    pub(crate) fn buffer_mut(&mut self) -> &mut DeviceBuffer<A> {
        &mut self.points
    }

    /// The number of bases (not counting multiples).
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when there is no point.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The points, for kernels of other stages: the bases first (indices
    /// below [`DeviceBases::len`]), then any multiples.
    pub fn buffer(&self) -> &DeviceBuffer<A> {
        &self.points
    }
}

/// The CPU twin of [`DeviceBases::with_window_multiples`]: the bases, then
/// for each window k in 1..windows(c) the multiples 2^(c k) P_i, window
/// after window (the device buffer's layout).
pub fn window_multiples_cpu<A>(bases: &[A], c: u32) -> Vec<A>
where
    A: MsmAffine,
    A::Projective: group::Curve<AffineRepr = A> + From<A>,
{
    use group::Curve;
    use rayon::prelude::*;
    let n = bases.len();
    let w = windows(c) as usize;
    let mut out = bases.to_vec();
    out.reserve(n * (w - 1));
    let mut proj: Vec<A::Projective> = bases.par_iter().map(|&b| b.into()).collect();
    let mut affine = bases.to_vec();
    for _ in 1..w {
        proj.par_iter_mut().for_each(|p| {
            for _ in 0..c {
                *p = p.double();
            }
        });
        A::Projective::batch_normalize(&proj, &mut affine);
        out.extend_from_slice(&affine);
    }
    out
}

/// Which variables a parameter query has a point for (bellperson's density
/// bitmap), on the device: bit i of word i/64, and per word the number of
/// used variables before it, so a kernel finds variable i's point in O(1).
#[derive(Debug)]
pub struct DeviceDensity {
    bits: DeviceBuffer<u64>,
    prefix: DeviceBuffer<u32>,
    len: usize,
    count: usize,
}

impl DeviceDensity {
    /// Uploads the first `len` items of `used` (one per variable, in the
    /// witness's order: inputs, then aux).
    pub fn upload(gpu: &Arc<Gpu>, used: impl Iterator<Item = bool>, len: usize) -> Result<Self> {
        if len > MAX_LEN {
            return Err(Groth16Error::MsmShape {
                detail: format!(
                    "a density over {len} variables is more than the {MAX_LEN} one MSM can index"
                ),
            });
        }
        let mut words = vec![0u64; len.div_ceil(64).max(1)];
        let mut seen = 0;
        for (i, bit) in used.take(len).enumerate() {
            if bit {
                words[i / 64] |= 1 << (i % 64);
            }
            seen += 1;
        }
        if seen != len {
            return Err(Groth16Error::MsmShape {
                detail: format!("the density was to cover {len} variables but gave only {seen}"),
            });
        }
        Self::from_words(gpu, words, len)
    }

    /// Uploads a bitmap of `len` variables: bit `i % 64` of `words[i / 64]`
    /// (bits past `len` are ignored).
    pub fn from_words(gpu: &Arc<Gpu>, mut words: Vec<u64>, len: usize) -> Result<Self> {
        if len > MAX_LEN {
            return Err(Groth16Error::MsmShape {
                detail: format!(
                    "a density over {len} variables is more than the {MAX_LEN} one MSM can index"
                ),
            });
        }
        let n = len.div_ceil(64);
        if words.len() < n {
            return Err(Groth16Error::MsmShape {
                detail: format!(
                    "a density over {len} variables needs {n} words, not {}",
                    words.len()
                ),
            });
        }
        words.truncate(n.max(1));
        words.resize(n.max(1), 0);
        if !len.is_multiple_of(64) {
            words[n - 1] &= (1u64 << (len % 64)) - 1;
        }
        let mut prefix = Vec::with_capacity(words.len());
        let mut count = 0usize;
        for w in &words {
            // count <= len < 2^31 (checked above).
            prefix.push(count as u32);
            count += w.count_ones() as usize;
        }
        Ok(DeviceDensity {
            bits: gpu.upload(&words)?,
            prefix: gpu.upload(&prefix)?,
            len,
            count,
        })
    }

    /// The number of variables covered.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Device bytes of the bitmap and its prefix counts.
    pub fn device_bytes(&self) -> u64 {
        (self.bits.size_bytes() + self.prefix.size_bytes()) as u64
    }

    /// True when it covers no variable.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The number of used variables: the length of the filtered query.
    pub fn count(&self) -> usize {
        self.count
    }
}

/// Tuning of [`GpuMsm`]; [`MsmConfig::default`] is what the prover uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MsmConfig {
    /// A fixed window size (2..=24 bits) instead of [`window_bits`]' choice.
    pub window_bits: Option<u32>,
    /// Sum the bases of scalars equal to 1 apart (true) or leave those
    /// scalars to Pippenger, where each is one entry of window 0's bucket 1
    /// (false, the default). Measured on an H200, G1, 2^24 Filecoin-shaped
    /// scalars (35% ones): 141.7 ms apart, 140.1 ms in Pippenger
    /// (bench-data/msm/2026-11-29-ea85b80-pippenger.json, `ones-apart` and
    /// `ones-in-pippenger`; 167.8 against 163.4 ms with the first kernels):
    /// bucket accumulation's segments add the ones' bases as fast as the
    /// separate sum does, and sorting one digit per one costs no more than
    /// the separate pass's extra launches and partial-sum levels.
    pub ones_separately: bool,
    /// The variant of the bucket accumulation kernel.
    pub accumulate: Accumulate,
    /// At most this many (bucket, point) entries per sorting pass (8 bytes
    /// each); more windows take more passes.
    pub max_entries_per_pass: usize,
    /// At most this many bytes of buckets (XYZZ points: 192 bytes in G1,
    /// 384 in G2) over all windows; caps the window size.
    pub max_bucket_bytes: u64,
    /// Wait for the GPU after each phase and record the phase times
    /// ([`GpuMsm::last_profile`]); for measurements only.
    pub profile: bool,
    /// log2 of the ranges each launch of the bucket reduction's merge
    /// combines: 1 (the default) merges pairs, one launch per level
    /// (`msm_bucket_merge`, 16 launches over 2^16 parts); k > 1 merges 2^k
    /// ranges a launch with one scaling each (`msm_bucket_merge_fan`,
    /// ceil(16 / k) launches). Clamped to 1..=8. Measured on an H200
    /// (bench-data/msm/2026-12-05-a4c7353-merge-fan.json): k = 2 saves
    /// 0.6-1.3 ms of the reduction (1% of a G1 2^24 MSM, within noise),
    /// k = 4 is level, k = 8 loses 11-39 ms; the pairwise merge stays.
    pub merge_fan_log2: u32,
}

impl Default for MsmConfig {
    fn default() -> Self {
        MsmConfig {
            window_bits: None,
            ones_separately: false,
            accumulate: Accumulate::Auto,
            max_entries_per_pass: 1 << 28,
            max_bucket_bytes: 8 << 30,
            profile: false,
            merge_fan_log2: 1,
        }
    }
}

impl MsmConfig {
    /// An upper bound on the device scratch (bytes) MSMs of up to `n`
    /// scalars on both curves need with this configuration
    /// ([`GpuMsm::scratch_bound`]); it also holds MSMs carried over calls
    /// of up to `n` scalars each ([`GpuMsm::carried`]), whose windows are
    /// never wider than one call's ([`carried_window_bits`]).
    pub fn scratch_bound(&self, n: usize) -> u64 {
        let n = n.max(1);
        let per_scalar = 40 * n as u64;
        let curve = |point_bytes: u64| {
            let c = match self.window_bits {
                Some(c) => c.clamp(MIN_WINDOW, MAX_WINDOW),
                None => window_bits(n, self.max_bucket_bytes / point_bytes),
            };
            let nb = plan::buckets_per_window(c);
            // A narrower window may be taken (a carried MSM's, more of
            // them per pass): the widest pass of any window up to c.
            let (sort, lists) = (MIN_WINDOW..=c)
                .map(|c| {
                    let group = u64::from(plan::windows_per_pass(n, c, self.max_entries_per_pass));
                    let entries = n as u64 * group;
                    let batch_affine = self.accumulate.chains::<G1Affine>().is_some()
                        || self.accumulate.chains::<G2Affine>().is_some();
                    let l = if batch_affine {
                        max_batch_affine_segments(entries)
                    } else {
                        max_partials(entries, 18, 32)
                    };
                    let sort = 8 * entries + 8 * group * plan::buckets_per_window(c) + 64;
                    // Level 1's list and level 2's (1/PARTIALS_PER of it).
                    let lists = (l + l.div_ceil(u64::from(PARTIALS_PER)) + 2) * (4 + point_bytes);
                    (sort, lists)
                })
                .fold((0, 0), |(s, l), (s2, l2)| (s.max(s2), l.max(l2)));
            // Scalars equal to 1 summed apart: lists of their own sizes.
            let lists = if self.ones_separately {
                let l = max_partials(n as u64, 17, 16);
                lists.max((l + l.div_ceil(u64::from(PARTIALS_PER)) + 2) * (4 + point_bytes))
            } else {
                lists
            };
            let buckets = u64::from(windows(c)) * nb * point_bytes;
            // The reduction's two lists: at most 2^17 parts over all windows.
            let reduce = 2 * (1 << 17) * point_bytes;
            (sort, buckets + lists + reduce)
        };
        let (sort1, own1) = curve(4 * 48);
        let (sort2, own2) = curve(4 * 96);
        // Scan levels, the output point and the density stand-ins: small.
        per_scalar + sort1.max(sort2) + own1 + own2 + (16 << 20)
    }

    /// Bytes of scratch per (bucket, point) entry of a pass, both curves
    /// held at once: 8 sorted, and each curve's first-level partial sums
    /// (one per 32 entries at most, point and index, two copies).
    const SCRATCH_PER_ENTRY: u64 = 8 + 2 * (4 + 4 * 48) / 32 + 2 * (4 + 4 * 96) / 32;

    /// The default configuration, with the scratch sized for a card of
    /// `total` bytes of device memory (a `device_memory_limit`, or the
    /// card's own): the entries of a sorting pass take at most a fifth of
    /// it, and the buckets an eighth (both as in [`MsmConfig::default`]
    /// on a card of 64 GiB or more). Fewer entries per pass mean more passes
    /// over the same entries; narrower windows, more entries. On a
    /// 16 GiB card a 2^24-scalar MSM's scratch bound drops from 7.6 GB to
    /// 4.4 GB (6.2 GB on a 32 GiB card; tested below).
    pub fn for_device_memory(total: u64) -> MsmConfig {
        let default = MsmConfig::default();
        let room = total / 5 / Self::SCRATCH_PER_ENTRY;
        let entries = if room == 0 {
            1
        } else {
            1usize << room.ilog2().min(usize::BITS - 1)
        };
        MsmConfig {
            max_entries_per_pass: entries.clamp(1 << 20, default.max_entries_per_pass),
            max_bucket_bytes: (total / 8).clamp(64 << 20, default.max_bucket_bytes),
            ..default
        }
    }
}

/// Variants of the bucket accumulation kernel (kernels/msm/pippenger.cuh,
/// `msm_accumulate`), which does nearly all of an MSM's additions.
///
/// Measured on an H200 (bench-data/msm/2026-11-29-ea85b80-pippenger.json):
/// G1, 2^24 random scalars: plain 318 ms, prefetch 382 ms, prefetch128 370
/// ms; G2, 2^22 random: plain 247 ms, prefetch 249 ms, prefetch128 228 ms.
/// With the two-half-sum multiplication and the dedicated squaring
/// (bench-data/msm/2026-12-04-782971c-sqr-v4.json): G1 2^24 plain 131.8 ms,
/// prefetch 131.7, prefetch128 144.9, plain_v4 128.3, prefetch128_v4 141.7;
/// G2 2^22 plain 183.3, prefetch 184.3, prefetch128 180.5, plain_v4 181.3,
/// prefetch128_v4 181.3. With G2's Fq2 multiplication on lazy reduction
/// (bench-data/msm/2026-12-04-fa5c174-g2-lazy-fq2.json): G2 2^22 plain
/// 144.2, prefetch 145.1, prefetch128 156.4, plain_v4 137.8, prefetch128_v4
/// 154.6. [`Accumulate::Auto`] takes the fastest per curve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accumulate {
    /// The measured fastest for the curve: [`Accumulate::PlainV4`] for both.
    Auto,
    /// Each addition loads its entry, then its base.
    Plain,
    /// The next base is prefetched during each addition (162 registers in
    /// G1, so 12 warps per SM instead of 16).
    Prefetch,
    /// [`Accumulate::Prefetch`] held to 128 registers (4 blocks per SM).
    Prefetch128,
    /// [`Accumulate::Plain`] with the bases read by 16-byte loads.
    PlainV4,
    /// [`Accumulate::Prefetch128`] with the bases read by 16-byte loads.
    Prefetch128V4,
    /// Batch-affine additions: each thread runs 128 segments side by side,
    /// their running sums in affine coordinates, and one step's additions
    /// (one per segment) share one field inversion (Montgomery's trick).
    /// Segments of [`plan::batch_affine_segment_len`] entries. Its local
    /// memory (32 KB a thread in G1, 64 KB in G2, for every thread the GPU
    /// can hold at once, reserved by the driver at the first launch) is not
    /// in [`MsmConfig::scratch_bound`]: a variant to measure, not a default.
    BatchAffine128,
    /// [`Accumulate::BatchAffine128`] with 256 segments a thread: half the
    /// inversions, twice the local memory.
    BatchAffine256,
}

impl Accumulate {
    /// The kernel's `<op>` in `msm_<op>_<curve>_bls12_381`.
    fn op<A: MsmAffine>(self) -> &'static str {
        match self {
            Accumulate::Auto => A::FASTEST_ACCUMULATE.op::<A>(),
            Accumulate::Plain => "accumulate_plain",
            Accumulate::Prefetch => "accumulate_prefetch",
            Accumulate::Prefetch128 => "accumulate_prefetch128",
            Accumulate::PlainV4 => "accumulate_plain_v4",
            Accumulate::Prefetch128V4 => "accumulate_prefetch128_v4",
            Accumulate::BatchAffine128 => "accumulate_ba128",
            Accumulate::BatchAffine256 => "accumulate_ba256",
        }
    }

    /// The segments a thread runs side by side in the batch-affine variants
    /// (the kernel's K); None for the others.
    pub fn chains<A: MsmAffine>(self) -> Option<u32> {
        match self {
            Accumulate::Auto => A::FASTEST_ACCUMULATE.chains::<A>(),
            Accumulate::BatchAffine128 => Some(128),
            Accumulate::BatchAffine256 => Some(256),
            _ => None,
        }
    }
}

/// Multi-scalar multiplications on one GPU, with scratch buffers kept
/// between calls (they only grow). Calls on one `GpuMsm` run one at a time.
#[derive(Debug)]
pub struct GpuMsm {
    gpu: Arc<Gpu>,
    config: MsmConfig,
    scratch: Mutex<Scratch>,
}

/// Device scratch, reused across calls.
#[derive(Debug, Default)]
struct Scratch {
    /// counters[0]: ones, counters[1]: others (classify).
    counters: Option<DeviceBuffer<u32>>,
    ones_idx: Option<DeviceBuffer<u32>>,
    other_idx: Option<DeviceBuffer<u32>>,
    /// Canonical (not Montgomery) values of the other scalars.
    other_scalars: Option<DeviceBuffer<Scalar>>,
    /// Stand-ins for the density's buffers when there is none.
    no_bits: Option<DeviceBuffer<u64>>,
    no_prefix: Option<DeviceBuffer<u32>>,
    counts: Option<DeviceBuffer<u32>>,
    offsets: Option<DeviceBuffer<u32>>,
    total: Option<DeviceBuffer<u32>>,
    /// Per scan level: partial sums and their scan.
    scan_levels: Vec<(DeviceBuffer<u32>, DeviceBuffer<u32>)>,
    /// Sorted (bucket, base | sign) pairs, as the kernels' uint2.
    entries: Option<DeviceBuffer<u64>>,
    list_keys: [Option<DeviceBuffer<u32>>; 2],
    /// One [`CurveScratch`] per curve used so far (G1: of `Fp`, G2: `Fp2`).
    curves: Vec<Box<dyn Any + Send>>,
    profile: Vec<(&'static str, f64)>,
}

impl Scratch {
    /// Device bytes of every buffer held (kept beside the fields, so a
    /// field added here is counted here).
    fn bytes(&self) -> u64 {
        let curves: u64 = self
            .curves
            .iter()
            .map(|c| {
                c.downcast_ref::<CurveScratch<Fp>>()
                    .map(CurveScratch::bytes)
                    .or_else(|| {
                        c.downcast_ref::<CurveScratch<Fp2>>()
                            .map(CurveScratch::bytes)
                    })
                    .unwrap_or(0)
            })
            .sum();
        let levels: u64 = self
            .scan_levels
            .iter()
            .map(|(a, b)| (a.size_bytes() + b.size_bytes()) as u64)
            .sum();
        opt_bytes(&self.counters)
            + opt_bytes(&self.ones_idx)
            + opt_bytes(&self.other_idx)
            + opt_bytes(&self.other_scalars)
            + opt_bytes(&self.no_bits)
            + opt_bytes(&self.no_prefix)
            + opt_bytes(&self.counts)
            + opt_bytes(&self.offsets)
            + opt_bytes(&self.total)
            + opt_bytes(&self.entries)
            + opt_bytes(&self.list_keys[0])
            + opt_bytes(&self.list_keys[1])
            + levels
            + curves
    }
}

/// Device bytes of a buffer, if there is one.
fn opt_bytes<T: DeviceElem>(b: &Option<DeviceBuffer<T>>) -> u64 {
    b.as_ref().map_or(0, |b| b.size_bytes() as u64)
}

/// XYZZ buffers of one curve (four coordinates per point).
#[derive(Debug)]
struct CurveScratch<F: DeviceElem> {
    buckets: Option<DeviceBuffer<F>>,
    lists: [Option<DeviceBuffer<F>>; 2],
    t: Option<DeviceBuffer<F>>,
    r: Option<DeviceBuffer<F>>,
    out: Option<DeviceBuffer<F>>,
}

impl<F: DeviceElem> CurveScratch<F> {
    fn bytes(&self) -> u64 {
        opt_bytes(&self.buckets)
            + opt_bytes(&self.lists[0])
            + opt_bytes(&self.lists[1])
            + opt_bytes(&self.t)
            + opt_bytes(&self.r)
            + opt_bytes(&self.out)
    }
}

impl<F: DeviceElem> Default for CurveScratch<F> {
    fn default() -> Self {
        CurveScratch {
            buckets: None,
            lists: [None, None],
            t: None,
            r: None,
            out: None,
        }
    }
}

/// The XYZZ scratch of the curve with coordinates `F`, made on first use.
fn curve_scratch<F: DeviceElem>(curves: &mut Vec<Box<dyn Any + Send>>) -> &mut CurveScratch<F> {
    if !curves.iter().any(|c| c.is::<CurveScratch<F>>()) {
        curves.push(Box::new(CurveScratch::<F>::default()));
    }
    curves
        .iter_mut()
        .find_map(|c| c.downcast_mut::<CurveScratch<F>>())
        .unwrap_or_else(|| unreachable!("pushed just above when missing"))
}

/// A scratch buffer that an earlier step of the same call should have made:
/// a bug here, reported rather than panicking.
fn scratch_missing(which: &str) -> Groth16Error {
    Groth16Error::MsmShape {
        detail: format!("internal error: an MSM scratch buffer is missing ({which})"),
    }
}

/// `slot`'s buffer with room for at least `len` elements, reallocated
/// (contents lost) when it is smaller.
fn ensure<'a, T: DeviceElem>(
    gpu: &Arc<Gpu>,
    slot: &'a mut Option<DeviceBuffer<T>>,
    len: usize,
) -> Result<&'a mut DeviceBuffer<T>> {
    if slot.as_ref().is_none_or(|b| b.len() < len) {
        // Free the old buffer first, so the peak is the new size only.
        *slot = None;
    }
    match slot {
        Some(buffer) => Ok(buffer),
        None => Ok(slot.insert(DeviceBuffer::alloc(gpu, len, false)?)),
    }
}

/// Sets the first `len` elements of `buf` to zero bytes (identity points,
/// zero counts), in stream order.
fn clear<T: DeviceElem>(gpu: &Gpu, buf: &mut DeviceBuffer<T>, len: usize) -> Result<()> {
    if len == 0 {
        return Ok(());
    }
    let what = || {
        format!(
            "clearing {len} elements of an MSM buffer on GPU {}",
            gpu.ordinal()
        )
    };
    if len > buf.len() {
        return Err(Groth16Error::Cuda {
            what: what(),
            detail: format!("the buffer holds only {} elements", buf.len()),
        });
    }
    let mut view = buf.slice_mut().slice_mut(0..len);
    gpu.stream()
        .memset_zeros(&mut view)
        .map_err(|err| Groth16Error::Cuda {
            what: what(),
            detail: format!("{err:?}"),
        })
}

fn u32_of(x: usize, what: &str) -> Result<u32> {
    u32::try_from(x).map_err(|_| Groth16Error::MsmShape {
        detail: format!("{what} is {x}, more than 32-bit kernel indices allow"),
    })
}

/// The most first-level partial sums a segmented sum (bucket accumulation:
/// `shift` 18, `min` 32; the ones: 17, 16) makes over up to `entries`
/// elements: one per segment, whose length ([`plan::segment_len`]) grows
/// with the list, so the count peaks at the end or just below a power of
/// two where segments double.
fn max_partials(entries: u64, shift: u32, min: u32) -> u64 {
    let segments = |e: u64| e.div_ceil(u64::from(plan::segment_len(e, shift, min)));
    let mut most = segments(entries);
    let mut edge = 2u64;
    while edge <= entries {
        most = most.max(segments(edge - 1));
        edge *= 2;
    }
    most
}

/// The most segments the batch-affine accumulation cuts up to `entries`
/// entries into: its segments are never shorter than 16 entries.
fn max_batch_affine_segments(entries: u64) -> u64 {
    entries.div_ceil(u64::from(plan::BATCH_AFFINE_MIN_SEGMENT))
}

fn grid(threads: u64, block: u32) -> Result<LaunchConfig> {
    grid_1d(usize::try_from(threads).unwrap_or(usize::MAX), block)
}

/// The window size of an MSM over `n` scalars that are neither 0 nor 1, in
/// `chunks` chunks whose buckets carry (1: a plain MSM): the
/// configuration's, or [`window_bits`]' ([`carried_window_bits`]')
/// choice within its bucket budget.
fn window_for<A: MsmAffine>(config: &MsmConfig, n: usize, chunks: usize) -> Result<u32> {
    let point_bytes = 4 * std::mem::size_of::<A::Coord>() as u64;
    let max_buckets = config.max_bucket_bytes / point_bytes;
    match config.window_bits {
        Some(c) if (MIN_WINDOW..=MAX_WINDOW).contains(&c) => Ok(c),
        Some(c) => Err(Groth16Error::MsmShape {
            detail: format!("a window of {c} bits; the kernels take {MIN_WINDOW} to {MAX_WINDOW}"),
        }),
        None if chunks <= 1 => Ok(window_bits(n, max_buckets)),
        None => Ok(plan::carried_window_bits(n, chunks, max_buckets)),
    }
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

/// An MSM summed over several calls ([`GpuMsm::carried`]).
#[derive(Debug)]
pub struct CarriedMsm<'a, A: MsmAffine> {
    gpu: &'a Arc<Gpu>,
    config: &'a MsmConfig,
    s: MutexGuard<'a, Scratch>,
    /// The window size of every call.
    c: u32,
    /// The bases of scalars equal to 1, when summed apart.
    ones: A::Projective,
}

impl<A: MsmAffine> CarriedMsm<'_, A> {
    fn run(&mut self) -> Run<'_> {
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

    /// Adds sum scalars\[i\] * bases\[i\] (in [`GpuMsm::msm`]'s layout,
    /// `density` as there) to the MSM.
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

/// One MSM in progress: the launches, in order.
struct Run<'a> {
    gpu: &'a Arc<Gpu>,
    config: &'a MsmConfig,
    s: &'a mut Scratch,
    phase_start: Instant,
}

impl Run<'_> {
    fn kernel(&self, module: &str, op: &str, curve: Option<&str>) -> Result<Kernel> {
        let name = match curve {
            Some(c) => format!("msm_{op}_{c}_bls12_381"),
            None => format!("msm_{op}_bls12_381"),
        };
        self.gpu.kernel(module, &name)
    }

    /// Ends a phase of the profile (waiting for the GPU) when profiling.
    fn phase(&mut self, name: &'static str) -> Result<()> {
        if self.config.profile {
            self.gpu.synchronize()?;
            let now = Instant::now();
            self.s
                .profile
                .push((name, now.duration_since(self.phase_start).as_secs_f64()));
            self.phase_start = now;
        }
        Ok(())
    }

    fn msm<A: MsmAffine>(
        &mut self,
        bases: &DeviceBases<A>,
        scalars: &DeviceRange<'_, Scalar>,
        density: Option<&DeviceDensity>,
        used: usize,
    ) -> Result<A::Projective> {
        let (n1, m) = self.classify(scalars, density, used)?;
        self.phase("classify")?;
        let mut result = A::Projective::identity();
        if n1 > 0 {
            result += self.sum_ones::<A>(bases, n1)?;
            self.phase("ones")?;
        }
        if m > 0 {
            result += self.pippenger::<A>(bases, m)?;
        }
        Ok(result)
    }

    /// Step 1: returns (ones, others) of the scalars (every variable the
    /// density covers, at most 2^31), `used` of which the density marks
    /// (all of them without one).
    fn classify(
        &mut self,
        scalars: &DeviceRange<'_, Scalar>,
        density: Option<&DeviceDensity>,
        used: usize,
    ) -> Result<(u32, u32)> {
        let gpu = self.gpu;
        // Checked by the caller (checked_len): n <= MAX_LEN < 2^31.
        let n = scalars.len() as u32;
        let k = self.kernel("msm", "classify", None)?;
        let s = &mut *self.s;
        let counters = ensure(gpu, &mut s.counters, 2)?;
        clear(gpu, counters, 2)?;
        // One slot per used variable: the kernel skips the others.
        let ones_idx = ensure(gpu, &mut s.ones_idx, used)?;
        let other_idx = ensure(gpu, &mut s.other_idx, used)?;
        let other = ensure(gpu, &mut s.other_scalars, used)?;
        let no_bits = ensure(gpu, &mut s.no_bits, 1)?;
        let no_prefix = ensure(gpu, &mut s.no_prefix, 1)?;
        let (bits, prefix, use_density) = match density {
            Some(d) => (&d.bits, &d.prefix, 1u32),
            None => (&*no_bits, &*no_prefix, 0u32),
        };
        let ones_sep = u32::from(self.config.ones_separately);
        // SAFETY: msm_classify_bls12_381(const fr_t* scalars, uint32_t n,
        // const uint64_t* dens_bits, const uint32_t* dens_prefix, uint32_t
        // use_density, uint32_t ones_separately, uint32_t* counters,
        // uint32_t* ones_idx, uint32_t* other_idx, fr_t* other_scalars):
        // thread i < n reads scalars[i] (the range holds n) and, with a
        // density, word i/64 of bits and prefix (the density covers n
        // variables: checked by the caller); only a used variable (all
        // without a density) writes, one slot of ones_idx or
        // other_idx/other_scalars below `used` (the counters count used
        // variables only), each allocated with `used` elements, and
        // counters[0..2].
        unsafe {
            k.args()
                .range(scalars)
                .arg(&n)
                .buf(bits)
                .buf(prefix)
                .arg(&use_density)
                .arg(&ones_sep)
                .buf_mut(counters)
                .buf_mut(ones_idx)
                .buf_mut(other_idx)
                .buf_mut(other)
                .launch(grid(u64::from(n), SCALAR_BLOCK)?)?;
        }
        let c = counters.download()?;
        Ok((c[0], c[1]))
    }

    /// Step 2: the sum of the bases of the n1 scalars equal to 1.
    fn sum_ones<A: MsmAffine>(&mut self, bases: &DeviceBases<A>, n1: u32) -> Result<A::Projective> {
        let gpu = self.gpu;
        let sum_bases = self.kernel(A::MODULE, "sum_bases", Some(A::CURVE))?;
        let sum_points = self.kernel(A::MODULE, "sum_points", Some(A::CURVE))?;
        let gather = self.kernel(A::MODULE, "gather", Some(A::CURVE))?;
        let per = plan::segment_len(u64::from(n1), 17, 16);
        let mut l = n1.div_ceil(per);
        let s = &mut *self.s;
        let ones_idx = match &s.ones_idx {
            Some(b) => b,
            None => return Err(scratch_missing("classify allocated it")),
        };
        let cs = curve_scratch::<A::Coord>(&mut s.curves);
        let [la, lb] = &mut cs.lists;
        let mut src = ensure(gpu, la, 4 * l as usize)?;
        let mut dst = ensure(gpu, lb, 4 * l.div_ceil(PARTIALS_PER) as usize)?;
        // SAFETY: msm_sum_bases_<c>_bls12_381(const affine_t* bases, const
        // uint32_t* idx, uint32_t n, uint32_t per, xyzz_t* out): thread s
        // reads idx[j] for j < n1 (classify wrote n1 entries) and the bases
        // they name (indices of used variables, below bases.len(): checked
        // by the caller), and writes out[s] for s < ceil(n1 / per) = l
        // points, which `src` holds (4 coordinates each).
        unsafe {
            sum_bases
                .args()
                .buf(&bases.points)
                .buf(ones_idx)
                .arg(&n1)
                .arg(&per)
                .buf_mut(src)
                .launch(grid(u64::from(l), CURVE_BLOCK)?)?;
        }
        while l > 1 {
            let next = l.div_ceil(PARTIALS_PER);
            // SAFETY: msm_sum_points_<c>_bls12_381(const xyzz_t* in,
            // uint32_t n, uint32_t per, xyzz_t* out): reads in[0..l) (src
            // holds l points), writes out[0..next) (dst holds next points).
            unsafe {
                sum_points
                    .args()
                    .buf(src)
                    .arg(&l)
                    .arg(&PARTIALS_PER)
                    .buf_mut(dst)
                    .launch(grid(u64::from(next), CURVE_BLOCK)?)?;
            }
            l = next;
            std::mem::swap(&mut src, &mut dst);
        }
        let out = ensure(gpu, &mut cs.out, 4)?;
        let one = 1u32;
        // SAFETY: msm_gather_<c>_bls12_381(const xyzz_t* in, uint32_t n,
        // uint32_t stride, xyzz_t* out): copies in[0] (src holds >= 1 point)
        // to out[0] (out holds >= 1 point).
        unsafe {
            gather
                .args()
                .buf(src)
                .arg(&one)
                .arg(&one)
                .buf_mut(out)
                .launch(grid(1, CURVE_BLOCK)?)?;
        }
        let host = out.download()?;
        Ok(A::from_xyzz(&host[..4]))
    }

    /// Step 3: Pippenger over the m other scalars; with window multiples
    /// of the bases, in their window size and one set of buckets.
    fn pippenger<A: MsmAffine>(&mut self, bases: &DeviceBases<A>, m: u32) -> Result<A::Projective> {
        if let Some(c) = bases.multiples_of {
            let stride = u32_of(bases.len, "bases")?;
            self.clear_buckets::<A>(c, 1)?;
            self.passes::<A>(bases, m, c, false, stride)?;
            let nb32 = u32_of(plan::buckets_per_window(c) as usize, "buckets per window")?;
            let sums = self.reduce::<A>(1, nb32)?;
            self.phase("bucket reduction")?;
            return Ok(A::from_xyzz(&sums[..4]));
        }
        let c = window_for::<A>(self.config, m as usize, 1)?;
        self.clear_buckets::<A>(c, windows(c))?;
        self.passes::<A>(bases, m, c, false, 0)?;
        self.finish_buckets::<A>(c)
    }

    /// Room for the buckets of `w_all` windows of `c` bits, set to the
    /// identity.
    fn clear_buckets<A: MsmAffine>(&mut self, c: u32, w_all: u32) -> Result<()> {
        let gpu = self.gpu;
        let total_buckets = u64::from(w_all) * plan::buckets_per_window(c);
        let cs = curve_scratch::<A::Coord>(&mut self.s.curves);
        let buckets = ensure(gpu, &mut cs.buckets, 4 * total_buckets as usize)?;
        clear(gpu, buckets, 4 * total_buckets as usize)
    }

    /// The sorting passes and bucket accumulation of the m other scalars
    /// with windows of `c` bits, into buckets cleared by the caller;
    /// with `carry`, added to what the buckets hold (the buckets of one
    /// query summed over several calls). With `fold_stride` > 0 the bases
    /// carry window multiples (window w's at w * fold_stride) and every
    /// window shares one set of buckets, so passes after the first carry.
    fn passes<A: MsmAffine>(
        &mut self,
        bases: &DeviceBases<A>,
        m: u32,
        c: u32,
        carry: bool,
        fold_stride: u32,
    ) -> Result<()> {
        let gpu = self.gpu;
        let w_all = windows(c);
        let nb = plan::buckets_per_window(c);
        let group = plan::windows_per_pass(m as usize, c, self.config.max_entries_per_pass);
        let max_entries = u64::from(m) * u64::from(group);
        // Entries and segment starts stay below 2^32 in the kernels' u32
        // arithmetic (start + per with per <= 256).
        if max_entries + 256 >= 1 << 32 {
            return Err(Groth16Error::MsmShape {
                detail: format!(
                    "{m} scalars x {group} windows per pass overflow 32-bit entry indices"
                ),
            });
        }
        let nb32 = u32_of(nb as usize, "buckets per window")?;
        let _span = tracing::debug_span!("pippenger", m, c, windows = w_all, group).entered();

        let histogram = self.kernel("msm", "histogram", None)?;
        let scatter = self.kernel("msm", "scatter", None)?;
        let accumulate =
            self.kernel(A::MODULE, self.config.accumulate.op::<A>(), Some(A::CURVE))?;
        let partials = self.kernel(A::MODULE, "accumulate_partials", Some(A::CURVE))?;

        let fold = u32::from(fold_stride > 0);
        let kg_max = if fold == 1 { nb } else { u64::from(group) * nb };
        {
            let s = &mut *self.s;
            ensure(gpu, &mut s.counts, kg_max as usize)?;
            ensure(gpu, &mut s.offsets, kg_max as usize + 1)?;
            ensure(gpu, &mut s.total, 1)?;
            ensure(gpu, &mut s.entries, max_entries as usize)?;
        }
        self.phase("pippenger setup")?;

        let mut w0 = 0;
        while w0 < w_all {
            let w1 = (w0 + group).min(w_all);
            let kg = if fold == 1 { nb32 } else { (w1 - w0) * nb32 };
            let carry = u32::from(carry || (fold == 1 && w0 > 0));
            {
                let s = &mut *self.s;
                let (Some(other), Some(counts)) = (&s.other_scalars, &mut s.counts) else {
                    return Err(scratch_missing("allocated above"));
                };
                clear(gpu, counts, kg as usize)?;
                // SAFETY: msm_histogram_bls12_381(const fr_t* scalars,
                // uint32_t m, uint32_t c, uint32_t w0, uint32_t w1, uint32_t*
                // counts, uint32_t fold): thread i < m reads scalars[i]
                // (classify wrote m canonical scalars) and increments
                // counts[(w - w0) * nb + |d| - 1] < (w1 - w0) * nb = kg, or
                // with fold counts[|d| - 1] < nb = kg; kg <= counts.len().
                unsafe {
                    histogram
                        .args()
                        .buf(other)
                        .arg(&m)
                        .arg(&c)
                        .arg(&w0)
                        .arg(&w1)
                        .buf_mut(counts)
                        .arg(&fold)
                        .launch(grid(u64::from(m), SCALAR_BLOCK)?)?;
                }
            }
            let e = self.scan(kg)?;
            self.phase("sort: histogram + scan")?;
            if e > 0 {
                {
                    let s = &mut *self.s;
                    let (Some(other), Some(idx), Some(offsets), Some(entries)) = (
                        &s.other_scalars,
                        &s.other_idx,
                        &mut s.offsets,
                        &mut s.entries,
                    ) else {
                        return Err(scratch_missing("allocated above"));
                    };
                    // SAFETY: msm_scatter_bls12_381(const fr_t* scalars,
                    // const uint32_t* idx, uint32_t m, uint32_t c, uint32_t
                    // w0, uint32_t w1, uint32_t* offsets, uint2* entries,
                    // uint32_t fold_stride): thread i < m reads scalars[i]
                    // and idx[i]; it advances offsets[key] for keys below
                    // kg (offsets holds kg + 1, keys as in the histogram)
                    // and writes 8-byte entries (u64 elements) at the
                    // claimed positions, which the exclusive scan of the
                    // same digits' histogram bounds by e <= m * group =
                    // entries.len(). With fold_stride the entries name
                    // points w * fold_stride + idx[i] < windows * len, all
                    // in the bases' buffer (made with the multiples).
                    unsafe {
                        scatter
                            .args()
                            .buf(other)
                            .buf(idx)
                            .arg(&m)
                            .arg(&c)
                            .arg(&w0)
                            .arg(&w1)
                            .buf_mut(offsets)
                            .buf_mut(entries)
                            .arg(&fold_stride)
                            .launch(grid(u64::from(m), SCALAR_BLOCK)?)?;
                    }
                }
                self.phase("sort: scatter")?;
                self.accumulate::<A>(bases, &accumulate, &partials, e, carry)?;
                self.phase("accumulate")?;
            }
            w0 = w1;
        }
        Ok(())
    }

    /// Bucket reduction and window combination of the buckets of `c`-bit
    /// windows: the MSM's result (of the other scalars).
    fn finish_buckets<A: MsmAffine>(&mut self, c: u32) -> Result<A::Projective> {
        let w_all = windows(c);
        let nb32 = u32_of(plan::buckets_per_window(c) as usize, "buckets per window")?;
        let sums = self.reduce::<A>(w_all, nb32)?;
        self.phase("bucket reduction")?;
        // sum_w 2^(c w) S_w by Horner's rule: W * c doublings, cheaper on
        // the CPU (about 0.3 us each) than one GPU thread's (several us).
        let mut acc = A::Projective::identity();
        for w in (0..w_all as usize).rev() {
            for _ in 0..c {
                acc = acc.double();
            }
            acc += A::from_xyzz(&sums[4 * w..4 * w + 4]);
        }
        self.phase("window combination")?;
        Ok(acc)
    }

    /// Exclusive scan of counts[0..n) into offsets[0..=n]; returns the total.
    fn scan(&mut self, n: u32) -> Result<u32> {
        let gpu = self.gpu;
        let reduce = self.kernel("msm", "scan_reduce", None)?;
        let apply = self.kernel("msm", "scan_apply", None)?;
        // Level sizes: n, ceil(n / SCAN_PER), ... down to one thread's worth.
        let mut sizes = vec![n];
        while let Some(&last) = sizes.last() {
            if last <= SCAN_PER {
                break;
            }
            sizes.push(last.div_ceil(SCAN_PER));
        }
        let s = &mut *self.s;
        // scan_levels[l - 1] holds level l's values (the chunk sums of level
        // l - 1) and their exclusive scan, for l >= 1.
        for (l, &size) in sizes.iter().enumerate().skip(1) {
            let len = size as usize;
            if s.scan_levels.len() < l {
                s.scan_levels.push((
                    DeviceBuffer::alloc(gpu, len, false)?,
                    DeviceBuffer::alloc(gpu, len + 1, false)?,
                ));
            } else if s.scan_levels[l - 1].0.len() < len {
                s.scan_levels[l - 1] = (
                    DeviceBuffer::alloc(gpu, len, false)?,
                    DeviceBuffer::alloc(gpu, len + 1, false)?,
                );
            }
        }
        let (Some(counts), Some(offsets), Some(total), Some(unused)) =
            (&s.counts, &mut s.offsets, &mut s.total, &s.no_prefix)
        else {
            return Err(scratch_missing("allocated by the caller and by classify"));
        };
        // Upward: level l's values are the chunk sums of level l - 1.
        for l in 1..sizes.len() {
            let (lower, upper) = s.scan_levels.split_at_mut(l - 1);
            let input = if l == 1 { counts } else { &lower[l - 2].0 };
            let n_in = sizes[l - 1];
            // SAFETY: msm_scan_reduce_bls12_381(const uint32_t* in, uint32_t
            // n, uint32_t per, uint32_t* sums): thread t reads in[t*per ..
            // min(n, t*per + per)) (input holds at least n_in = sizes[l - 1])
            // and writes sums[t] for t < ceil(n_in / per) = sizes[l], the
            // length of level l's values buffer.
            unsafe {
                reduce
                    .args()
                    .buf(input)
                    .arg(&n_in)
                    .arg(&SCAN_PER)
                    .buf_mut(&mut upper[0].0)
                    .launch(grid(u64::from(sizes[l]), SCALAR_BLOCK)?)?;
            }
        }
        // Downward: scan each level's values, each chunk starting from the
        // scanned chunk sum one level up (none at the top level).
        for l in (0..sizes.len()).rev() {
            let threads = u64::from(sizes[l].div_ceil(SCAN_PER));
            let top = l + 1 == sizes.len();
            let has_base = u32::from(!top);
            let (lower, upper) = s.scan_levels.split_at_mut(l);
            let base: &DeviceBuffer<u32> = if top { unused } else { &upper[0].1 };
            let mut args;
            if l == 0 {
                args = apply.args();
                args.buf(counts)
                    .arg(&sizes[0])
                    .arg(&SCAN_PER)
                    .buf(base)
                    .arg(&has_base)
                    .buf_mut(offsets);
            } else {
                let (values, scanned) = &mut lower[l - 1];
                args = apply.args();
                args.buf(values)
                    .arg(&sizes[l])
                    .arg(&SCAN_PER)
                    .buf(base)
                    .arg(&has_base)
                    .buf_mut(scanned);
            }
            // SAFETY: msm_scan_apply_bls12_381(const uint32_t* in, uint32_t
            // n, uint32_t per, const uint32_t* base, uint32_t has_base,
            // uint32_t* out, uint32_t* total): thread t < ceil(n / per) reads
            // in[t*per .. min(n, ..)) (the level's values: sizes[l] of them),
            // base[t] only when has_base (the scan one level up holds
            // sizes[l + 1] + 1 = threads + 1 entries), and writes out[0..=n]
            // (the level's scan buffer holds sizes[l] + 1) and total[0].
            // Without a base the stand-in buffer is passed and never read.
            unsafe {
                args.buf_mut(total).launch(grid(threads, SCALAR_BLOCK)?)?;
            }
        }
        // The last apply (level 0) wrote the total of all counts.
        let t = total.download()?;
        Ok(t[0])
    }

    /// Bucket accumulation of one pass's e sorted entries.
    fn accumulate<A: MsmAffine>(
        &mut self,
        bases: &DeviceBases<A>,
        accumulate: &Kernel,
        partials: &Kernel,
        e: u32,
        carry: u32,
    ) -> Result<()> {
        let gpu = self.gpu;
        let chains = self.config.accumulate.chains::<A>();
        let per = match chains {
            Some(k) => plan::batch_affine_segment_len(u64::from(e), k),
            None => plan::segment_len(u64::from(e), 18, 32),
        };
        let mut l = e.div_ceil(per);
        // Threads of level 0: one per segment, or per `chains` segments.
        let threads = match chains {
            Some(k) => l.div_ceil(k),
            None => l,
        };
        // Level 1's list has l entries, level 2's ceil(l / PARTIALS_PER), and
        // the levels after alternate between the two buffers, shrinking.
        let (len0, len1) = (l as usize, l.div_ceil(PARTIALS_PER) as usize);
        let s = &mut *self.s;
        let [lk0, lk1] = &mut s.list_keys;
        let lk0 = ensure(gpu, lk0, len0)?;
        let lk1 = ensure(gpu, lk1, len1)?;
        let cs = curve_scratch::<A::Coord>(&mut s.curves);
        let [lv0, lv1] = &mut cs.lists;
        let lv0 = ensure(gpu, lv0, 4 * len0)?;
        let lv1 = ensure(gpu, lv1, 4 * len1)?;
        let (Some(entries), Some(buckets)) = (&s.entries, &mut cs.buckets) else {
            return Err(scratch_missing("allocated by the caller"));
        };
        // SAFETY: msm_accumulate_<variant>_<c>_bls12_381(const uint2*
        // entries, uint32_t e, uint32_t per, const affine_t* bases, xyzz_t*
        // buckets, uint32_t* out_keys, xyzz_t* out_vals, uint32_t carry):
        // with carry, a run's owner also reads its bucket; the segment s <
        // ceil(e / per) = l (thread s, or thread s / K in the batch-affine
        // kernels, which return for threads with s*K >= l) reads entries in
        // [s*per - 1, min(e, s*per + per)) (the scatter wrote e of them)
        // and prefetches or reads the
        // bases they name (the low 31 bits are indices of used variables,
        // below bases.len(), or with window multiples of their multiples,
        // below the points' buffer length); it writes buckets[key] for keys below the
        // total bucket count (the buffer holds all of them), and
        // out_keys[s], out_vals[s] with s < l (lk0 and lv0 hold l entries).
        unsafe {
            accumulate
                .args()
                .buf(entries)
                .arg(&e)
                .arg(&per)
                .buf(&bases.points)
                .buf_mut(buckets)
                .buf_mut(lk0)
                .buf_mut(lv0)
                .arg(&carry)
                .launch(grid(u64::from(threads), CURVE_BLOCK)?)?;
        }
        let (mut src_k, mut src_v, mut dst_k, mut dst_v) = (lk0, lv0, lk1, lv1);
        while l > 1 {
            let next = l.div_ceil(PARTIALS_PER);
            // SAFETY: msm_accumulate_partials_<c>_bls12_381(const uint32_t*
            // in_keys, const xyzz_t* in_vals, uint32_t l, uint32_t per,
            // xyzz_t* buckets, uint32_t* out_keys, xyzz_t* out_vals): thread
            // s < next reads the previous level's l entries (src), updates
            // buckets of keys found there (valid bucket indices), and writes
            // out_keys[s], out_vals[s]: dst holds at least next entries (the
            // first pass's dst holds ceil(l0 / PARTIALS_PER), and every
            // later list is shorter).
            unsafe {
                partials
                    .args()
                    .buf(src_k)
                    .buf(src_v)
                    .arg(&l)
                    .arg(&PARTIALS_PER)
                    .buf_mut(buckets)
                    .buf_mut(dst_k)
                    .buf_mut(dst_v)
                    .launch(grid(u64::from(next), CURVE_BLOCK)?)?;
            }
            l = next;
            std::mem::swap(&mut src_k, &mut dst_k);
            std::mem::swap(&mut src_v, &mut dst_v);
        }
        Ok(())
    }

    /// Bucket reduction: each window's sum_j (j + 1) B_j, downloaded as
    /// XYZZ coordinates (4 per window).
    fn reduce<A: MsmAffine>(&mut self, w_all: u32, nb: u32) -> Result<Vec<A::Coord>> {
        let gpu = self.gpu;
        let sums_k = self.kernel(A::MODULE, "bucket_sums", Some(A::CURVE))?;
        let merge = self.kernel(A::MODULE, "bucket_merge", Some(A::CURVE))?;
        let gather = self.kernel(A::MODULE, "gather", Some(A::CURVE))?;
        let fan_log2 = self.config.merge_fan_log2.clamp(1, 8);
        let merge_fan = match fan_log2 {
            1 => None,
            _ => Some(self.kernel(A::MODULE, "bucket_merge_fan", Some(A::CURVE))?),
        };
        let part_log2 = plan::part_log2(u64::from(w_all) * u64::from(nb), u64::from(nb));
        let parts = nb >> part_log2;
        let threads = u64::from(w_all) * u64::from(parts);
        let s = &mut *self.s;
        let cs = curve_scratch::<A::Coord>(&mut s.curves);
        let CurveScratch {
            buckets, t, r, out, ..
        } = cs;
        let Some(buckets) = buckets.as_ref() else {
            return Err(scratch_missing("allocated by the caller"));
        };
        let t = ensure(gpu, t, 4 * threads as usize)?;
        let r = ensure(gpu, r, 4 * threads as usize)?;
        // SAFETY: msm_bucket_sums_<c>_bls12_381(const xyzz_t* buckets,
        // uint32_t windows, uint32_t nb, uint32_t part_log2, xyzz_t* t,
        // xyzz_t* r): thread id < windows * parts reads buckets [w * nb + p *
        // 2^part_log2, + 2^part_log2) within windows * nb (parts * 2^part_log2
        // = nb), and writes t[id], r[id] (both hold windows * parts points).
        unsafe {
            sums_k
                .args()
                .buf(buckets)
                .arg(&w_all)
                .arg(&nb)
                .arg(&part_log2)
                .buf_mut(t)
                .buf_mut(r)
                .launch(grid(threads, CURVE_BLOCK)?)?;
        }
        if let Some(merge_fan) = &merge_fan {
            let mut level = 0u32;
            while (1u32 << level) < parts {
                // The last launch merges what is left: parts is a power of two.
                let f = fan_log2.min(parts.trailing_zeros() - level);
                let merges = u64::from(w_all) * u64::from(parts >> (level + f));
                // SAFETY: msm_bucket_merge_fan_<c>_bls12_381(xyzz_t* t,
                // xyzz_t* r, uint32_t windows, uint32_t parts, uint32_t
                // level, uint32_t fan_log2, uint32_t part_log2): thread id <
                // windows * (parts >> (level + f)) reads and writes entries
                // a + i * 2^level < (w + 1) * parts (i < 2^f) of t and r,
                // which hold windows * parts points.
                unsafe {
                    merge_fan
                        .args()
                        .buf_mut(t)
                        .buf_mut(r)
                        .arg(&w_all)
                        .arg(&parts)
                        .arg(&level)
                        .arg(&f)
                        .arg(&part_log2)
                        .launch(grid(merges, CURVE_BLOCK)?)?;
                }
                level += f;
            }
        }
        // Pairwise merges, one level a launch, unless the fan merged all.
        let mut level = if merge_fan.is_some() {
            parts.trailing_zeros()
        } else {
            0
        };
        while (1u32 << level) < parts {
            let merges = u64::from(w_all) * u64::from(parts >> (level + 1));
            // SAFETY: msm_bucket_merge_<c>_bls12_381(xyzz_t* t, xyzz_t* r,
            // uint32_t windows, uint32_t parts, uint32_t level, uint32_t
            // part_log2): thread id < windows * (parts >> (level + 1)) reads
            // and writes entries a < b < (w + 1) * parts of t and r, which
            // hold windows * parts points.
            unsafe {
                merge
                    .args()
                    .buf_mut(t)
                    .buf_mut(r)
                    .arg(&w_all)
                    .arg(&parts)
                    .arg(&level)
                    .arg(&part_log2)
                    .launch(grid(merges, CURVE_BLOCK)?)?;
            }
            level += 1;
        }
        let out = ensure(gpu, out, 4 * w_all as usize)?;
        // SAFETY: msm_gather_<c>_bls12_381(const xyzz_t* in, uint32_t n,
        // uint32_t stride, xyzz_t* out): thread i < windows copies in[i *
        // parts] (t holds windows * parts points) to out[i] (out holds at
        // least windows points).
        unsafe {
            gather
                .args()
                .buf(t)
                .arg(&w_all)
                .arg(&parts)
                .buf_mut(out)
                .launch(grid(u64::from(w_all), CURVE_BLOCK)?)?;
        }
        let mut host = out.download()?;
        host.truncate(4 * w_all as usize);
        Ok(host)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    #[test]
    fn window_multiples_cpu_are_powers_of_two_times_the_bases() {
        use group::Curve;
        use group::prime::PrimeCurveAffine;
        let g = G1Projective::generator();
        let bases: Vec<G1Affine> = vec![
            g.to_affine(),
            G1Affine::identity(),
            (g * Scalar::from(7u64)).to_affine(),
            (-g).to_affine(),
        ];
        let g2 = vec![G2Affine::generator(), G2Affine::identity()];
        for c in [2, 5, 13, 24] {
            let w = windows(c) as usize;
            let got = window_multiples_cpu(&bases, c);
            assert_eq!(got.len(), w * bases.len(), "c = {c}");
            let got2 = window_multiples_cpu(&g2, c);
            assert_eq!(got2.len(), w * g2.len(), "c = {c}");
            for k in 0..w {
                // 2^(c k) as a scalar: below r only while c k < 255, and
                // then reduced mod r, which the point's order makes equal.
                let shift = Scalar::from(2u64).pow_vartime([u64::from(c) * k as u64]);
                for (i, b) in bases.iter().enumerate() {
                    let want = (b.to_curve() * shift).to_affine();
                    assert_eq!(
                        got[k * bases.len() + i],
                        want,
                        "c = {c}, window {k}, base {i}"
                    );
                }
                for (i, b) in g2.iter().enumerate() {
                    let want = (b.to_curve() * shift).to_affine();
                    assert_eq!(
                        got2[k * g2.len() + i],
                        want,
                        "G2 c = {c}, window {k}, base {i}"
                    );
                }
            }
        }
        assert!(window_multiples_cpu::<G1Affine>(&[], 9).is_empty());
    }

    #[test]
    fn scratch_follows_the_device_memory() {
        let n = 1 << 24;
        let full = MsmConfig::default().scratch_bound(n);
        // The default (measured at 2^24 on the H200) is what a large card gets.
        assert_eq!(
            MsmConfig::for_device_memory(141 * GIB),
            MsmConfig::default()
        );
        assert_eq!(MsmConfig::for_device_memory(64 * GIB), MsmConfig::default());
        let c32 = MsmConfig::for_device_memory(32 * GIB);
        let c16 = MsmConfig::for_device_memory(16 * GIB);
        assert_eq!(c32.max_entries_per_pass, 1 << 27);
        assert_eq!(c16.max_entries_per_pass, 1 << 26);
        assert_eq!(c16.max_bucket_bytes, 2 * GIB);
        let (b32, b16) = (c32.scratch_bound(n), c16.scratch_bound(n));
        eprintln!("scratch bound at 2^24: {full} (default), {b32} (32 GiB), {b16} (16 GiB)");
        assert!(full > 7_000_000_000 && full < 8_000_000_000, "{full}");
        assert!(b16 < 4_500_000_000, "{b16}");
        assert!(b16 < b32 && b32 < full);
        // A fifth of the card for entries, an eighth for buckets: room for
        // the staged vectors and a partition's parameters beside it.
        for total in [6 * GIB, 8 * GIB, 12 * GIB, 16 * GIB, 24 * GIB, 32 * GIB] {
            let c = MsmConfig::for_device_memory(total);
            assert!(c.max_entries_per_pass.is_power_of_two());
            assert!(
                c.max_entries_per_pass as u64 * MsmConfig::SCRATCH_PER_ENTRY <= total / 5
                    || c.max_entries_per_pass == 1 << 20
            );
            assert!(c.max_bucket_bytes <= total / 8);
        }
        // Tiny or absurd totals stay within the kernels' ranges.
        for total in [0, 1, 1 << 20] {
            let c = MsmConfig::for_device_memory(total);
            assert_eq!(c.max_entries_per_pass, 1 << 20);
            assert_eq!(c.max_bucket_bytes, 64 << 20);
            assert!(c.scratch_bound(n) > 0);
        }
        assert_eq!(MsmConfig::for_device_memory(u64::MAX), MsmConfig::default());
    }

    #[test]
    fn batch_affine_lists_grow_the_scratch_bound() {
        // Its lists are longer than the XYZZ kernels': the bound grows.
        let n = 1 << 24;
        for accumulate in [Accumulate::BatchAffine128, Accumulate::BatchAffine256] {
            let ba = MsmConfig {
                accumulate,
                ..MsmConfig::default()
            };
            assert!(ba.scratch_bound(n) > MsmConfig::default().scratch_bound(n));
            assert!(accumulate.chains::<G2Affine>().is_some());
        }
        assert_eq!(Accumulate::Auto.chains::<G1Affine>(), None);
        assert_eq!(Accumulate::PlainV4.chains::<G2Affine>(), None);
    }

    #[test]
    fn partial_sum_counts_are_bounded() {
        // Every list length up to the bound, exhaustively where small and
        // around every power of two above.
        let segments = |e: u64, shift, min| e.div_ceil(u64::from(plan::segment_len(e, shift, min)));
        for (shift, min) in [(18, 32), (17, 16)] {
            let mut lens: Vec<u64> = (0..5000).collect();
            for k in 12..34 {
                let p = 1u64 << k;
                lens.extend([p - 2, p - 1, p, p + 1, p + p / 3]);
            }
            for &top in &lens {
                let bound = max_partials(top, shift, min);
                for &e in lens.iter().filter(|&&e| e <= top) {
                    assert!(
                        segments(e, shift, min) <= bound,
                        "{e} <= {top} ({shift}, {min})"
                    );
                }
            }
        }
        assert_eq!(max_partials(0, 18, 32), 0);
        assert_eq!(max_partials(32, 18, 32), 1);
        // 2^24 random scalars, 13 windows a pass: 256 per segment.
        assert_eq!(max_partials(13 << 24, 18, 32), (13 << 24) / 256);
    }

    #[test]
    fn scratch_bound_only_grows_with_the_scalars() {
        for c in [MsmConfig::default(), MsmConfig::for_device_memory(16 * GIB)] {
            let mut last = 0;
            for k in 0..=27 {
                let b = c.scratch_bound(1 << k);
                assert!(b >= last, "2^{k}");
                last = b;
            }
        }
    }
}
