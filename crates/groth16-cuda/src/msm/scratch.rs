//! An MSM's device scratch: how much of it MSMs of a given size need
//! ([`MsmConfig::scratch_bound`], and a configuration sized to a card's
//! memory), and the buffers themselves, kept between calls and grown on
//! demand.

use std::any::Any;
use std::sync::Arc;

use blstrs::{Fp, Fp2, G1Affine, G2Affine, Scalar};

use super::launch::PARTIALS_PER;
use super::{MAX_WINDOW, MIN_WINDOW, MsmConfig, plan, window_bits, windows};
use crate::cuda::{DeviceBuffer, DeviceElem, Gpu};
use crate::{Groth16Error, Result};

impl MsmConfig {
    /// An upper bound on the device scratch (bytes) MSMs of up to `n`
    /// scalars on both curves need with this configuration
    /// ([`GpuMsm::scratch_bound`](super::GpuMsm::scratch_bound)); it also
    /// holds MSMs carried over calls of up to `n` scalars each
    /// ([`GpuMsm::carried`](super::GpuMsm::carried)), whose windows are
    /// never wider than one call's
    /// ([`carried_window_bits`](plan::carried_window_bits)).
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

/// Device scratch, reused across calls.
#[derive(Debug, Default)]
pub(super) struct Scratch {
    /// counters[0]: ones, counters[1]: others (classify).
    pub(super) counters: Option<DeviceBuffer<u32>>,
    pub(super) ones_idx: Option<DeviceBuffer<u32>>,
    pub(super) other_idx: Option<DeviceBuffer<u32>>,
    /// Canonical (not Montgomery) values of the other scalars.
    pub(super) other_scalars: Option<DeviceBuffer<Scalar>>,
    /// Stand-ins for the density's buffers when there is none.
    pub(super) no_bits: Option<DeviceBuffer<u64>>,
    pub(super) no_prefix: Option<DeviceBuffer<u32>>,
    pub(super) counts: Option<DeviceBuffer<u32>>,
    pub(super) offsets: Option<DeviceBuffer<u32>>,
    pub(super) total: Option<DeviceBuffer<u32>>,
    /// Per scan level: partial sums and their scan.
    pub(super) scan_levels: Vec<(DeviceBuffer<u32>, DeviceBuffer<u32>)>,
    /// Sorted (bucket, base | sign) pairs, as the kernels' uint2.
    pub(super) entries: Option<DeviceBuffer<u64>>,
    pub(super) list_keys: [Option<DeviceBuffer<u32>>; 2],
    /// One [`CurveScratch`] per curve used so far (G1: of `Fp`, G2: `Fp2`).
    pub(super) curves: Vec<Box<dyn Any + Send>>,
    pub(super) profile: Vec<(&'static str, f64)>,
}

impl Scratch {
    /// Device bytes of every buffer held (kept beside the fields, so a
    /// field added here is counted here).
    pub(super) fn bytes(&self) -> u64 {
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
pub(super) struct CurveScratch<F: DeviceElem> {
    pub(super) buckets: Option<DeviceBuffer<F>>,
    pub(super) lists: [Option<DeviceBuffer<F>>; 2],
    pub(super) t: Option<DeviceBuffer<F>>,
    pub(super) r: Option<DeviceBuffer<F>>,
    pub(super) out: Option<DeviceBuffer<F>>,
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
pub(super) fn curve_scratch<F: DeviceElem>(
    curves: &mut Vec<Box<dyn Any + Send>>,
) -> &mut CurveScratch<F> {
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
pub(super) fn scratch_missing(which: &str) -> Groth16Error {
    Groth16Error::MsmShape {
        detail: format!("internal error: an MSM scratch buffer is missing ({which})"),
    }
}

/// `slot`'s buffer with room for at least `len` elements, reallocated
/// (contents lost) when it is smaller.
pub(super) fn ensure<'a, T: DeviceElem>(
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
pub(super) fn clear<T: DeviceElem>(gpu: &Gpu, buf: &mut DeviceBuffer<T>, len: usize) -> Result<()> {
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

#[cfg(test)]
mod tests {
    use blstrs::{G1Affine, G2Affine};

    use super::*;
    use crate::msm::Accumulate;

    const GIB: u64 = 1 << 30;

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
