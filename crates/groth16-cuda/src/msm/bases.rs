//! Where an MSM's inputs live on the device: a parameter query's bases
//! ([`DeviceBases`], optionally with every window's multiples, and their CPU
//! twin [`window_multiples_cpu`]) and its density bitmap ([`DeviceDensity`]).

use std::sync::Arc;

use group::Group;

use super::launch::CURVE_BLOCK;
use super::{MAX_LEN, MAX_WINDOW, MIN_WINDOW, MsmAffine, windows};
use crate::cuda::{DeviceBuffer, Gpu, grid_1d};
use crate::{Groth16Error, Result};

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
    pub(super) points: DeviceBuffer<A>,
    /// The number of bases.
    pub(super) len: usize,
    /// With multiples: their window size.
    pub(super) multiples_of: Option<u32>,
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
    pub(super) bits: DeviceBuffer<u64>,
    pub(super) prefix: DeviceBuffer<u32>,
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

#[cfg(test)]
mod tests {
    use blstrs::{G1Affine, G1Projective, G2Affine, Scalar};
    use ff::Field;

    use super::*;

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
}
