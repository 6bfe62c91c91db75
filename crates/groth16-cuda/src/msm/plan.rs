//! Host-side sizing of a GPU MSM: the window size, how many windows one
//! pass sorts, and how the kernels split their work. Pure functions, tested
//! on machines without a GPU.

/// The narrowest and widest windows the kernels take (kernels/msm/digits.cuh,
/// `MSM_MAX_WINDOW`): 2^c and the signed digits fit in 32 bits.
pub const MIN_WINDOW: u32 = 2;
/// See [`MIN_WINDOW`].
pub const MAX_WINDOW: u32 = 24;

/// Cost of one (bucket, point) entry relative to a mixed addition: the
/// addition itself plus its share of the histogram, the scatter and the
/// loads.
const ENTRY_COST: f64 = 1.15;
/// Cost of one bucket: two full XYZZ additions in the reduction (about 1.4
/// mixed additions each) plus clearing and counting it.
const BUCKET_COST: f64 = 3.0;

pub use crate::digits::windows;

/// Buckets per window with `c`-bit signed digits (digits 1 ..= 2^(c-1)).
pub fn buckets_per_window(c: u32) -> u64 {
    1 << (c - 1)
}

/// The window size for `m` scalars that are neither 0 nor 1, among those
/// whose buckets (all windows together) number at most `max_buckets`.
///
/// Minimises m * windows(c) * ENTRY_COST + windows(c) * 2^(c-1) *
/// BUCKET_COST: wider windows mean fewer entries to sort and add but more
/// buckets to reduce. For 2^20 scalars this picks 16 bits, for 2^22 18,
/// for 2^24 20, for 2^26 22 (tested below). Measured on an H200, G1 random
/// scalars (bench-data/msm/2026-11-29-ea85b80-pippenger.json): at 2^20,
/// 13..18 bits took 38.5, 37.9, 36.3, 34.7, 35.9, 42.0 ms (16 best); at
/// 2^24, 17..22 bits took 333, 336, 333, 317, 356, 401 ms (20 best).
pub fn window_bits(m: usize, max_buckets: u64) -> u32 {
    cheapest_window(max_buckets, |c: u32| {
        let w = f64::from(windows(c));
        m as f64 * w * ENTRY_COST + w * buckets_per_window(c) as f64 * BUCKET_COST
    })
}

/// Cost of one bucket of an MSM over bases with window multiples (one set
/// of buckets for all windows), relative to a mixed addition: the
/// reduction's additions plus the wider scatter. Measured on an H200, G1
/// random scalars (bench-data/msm/2026-12-04-c351d0b-window-multiples.json):
/// at 2^24, 20/22/24-bit windows took 112.2/109.5/115.8 ms (reduction
/// 3.5/6.0/15.8 ms), at 2^26 443.4/426.9/421.4 ms.
const MULTIPLES_BUCKET_COST: f64 = 5.0;

/// The window size of the multiples of `n` bases
/// ([`crate::msm::DeviceBases::with_window_multiples`]): m * windows(c) *
/// ENTRY_COST + 2^(c-1) * MULTIPLES_BUCKET_COST for m = n scalars (one set
/// of buckets), among the windows whose multiples stay within 2^31 - 1
/// points. 2^24 bases take 22 bits, 2^26 take 24 (tested below), as
/// measured fastest.
pub fn multiples_window_bits(n: usize) -> u32 {
    let n = n.max(1);
    let cost = |c: u32| {
        n as f64 * f64::from(windows(c)) * ENTRY_COST
            + buckets_per_window(c) as f64 * MULTIPLES_BUCKET_COST
    };
    let mut best = None;
    for c in MIN_WINDOW..=MAX_WINDOW {
        if (windows(c) as u64) * (n as u64) >= 1 << 31 {
            continue;
        }
        if best.is_none_or(|b| cost(c) < cost(b)) {
            best = Some(c);
        }
    }
    best.unwrap_or(MAX_WINDOW)
}

/// The window of least `cost` among those whose buckets (all windows
/// together) number at most `max_buckets`; the narrowest when none fits.
fn cheapest_window(max_buckets: u64, cost: impl Fn(u32) -> f64) -> u32 {
    let mut best = MIN_WINDOW;
    for c in MIN_WINDOW..=MAX_WINDOW {
        if u64::from(windows(c)) * buckets_per_window(c) > max_buckets {
            break;
        }
        if cost(c) < cost(best) {
            best = c;
        }
    }
    best
}

/// Cost of a bucket's run starting in a chunk of a carried MSM (loading
/// the bucket, then storing it), relative to a mixed addition. Measured on
/// an H200: a 32 GiB PoRep partition's H (2^27 random scalars) streamed in
/// 32 chunks of 2^22 with 20-bit windows took 3.66 s, in 8 chunks of 2^24
/// with 21-bit windows 3.12 s (13 windows both): 109 M more run starts
/// cost 540 ms, 4.95 ns each against 1.45 ns an entry.
const TOUCH_COST: f64 = 3.9;

/// The window size of an MSM carried over `chunks` chunks of about
/// `n / chunks` scalars each, whose buckets (all windows) number at most
/// `max_buckets`: [`window_bits`]' cost plus, per chunk and window, one
/// run start for each bucket the chunk touches (at most one per scalar).
/// Never wider than [`window_bits`] for one chunk's scalars (`n / chunks`
/// rounded up), so the scratch bound of a chunk holds the buckets of the
/// whole MSM, and device memory reserved for chunks of a streamed query
/// does not grow with the query; many chunks favour narrower windows. For
/// 2^27 scalars: 16 bits in 32 chunks, 20 in 8 (tested below).
pub fn carried_window_bits(n: usize, chunks: usize, max_buckets: u64) -> u32 {
    let k = chunks.max(1);
    let (chunks, per_chunk) = (k as f64, n as f64 / k as f64);
    let best = cheapest_window(max_buckets, |c: u32| {
        let w = f64::from(windows(c));
        let nb = buckets_per_window(c) as f64;
        n as f64 * w * ENTRY_COST
            + w * nb * BUCKET_COST
            + chunks * w * nb.min(per_chunk) * TOUCH_COST
    });
    best.min(window_bits(n.div_ceil(k), max_buckets))
}

/// How many windows one pass sorts: as many as keep the pass's entries
/// (at most one per scalar and window) within `max_entries`, at least one.
pub fn windows_per_pass(m: usize, c: u32, max_entries: usize) -> u32 {
    let fit = (max_entries / m.max(1)).min(windows(c) as usize);
    u32::try_from(fit).unwrap_or(u32::MAX).max(1)
}

/// Entries per thread of a segmented sum over `len` elements: a power of
/// two in [min, 256], about len >> shift, so that large inputs give each
/// thread long runs (fewer partial sums for the next level) while small
/// ones still spread over enough threads. With shift 18, 2^24 random
/// scalars (about 2^27.7 entries) get 256 per thread, 870k threads.
pub fn segment_len(len: u64, shift: u32, min: u32) -> u32 {
    let target = prev_pow2(len >> shift);
    u32::try_from(target).unwrap_or(u32::MAX).clamp(min, 256)
}

/// The shortest segment of the batch-affine accumulation.
pub const BATCH_AFFINE_MIN_SEGMENT: u32 = 16;

/// Entries per segment of the batch-affine accumulation over `len` entries
/// with `chains` segments a thread: a power of two in [16, 256], about len /
/// (chains * 2^17), so that the kernel has about 2^17 threads (an H200
/// holds 132 * 384 of them at once at its 168 registers) and each step's
/// inversion is shared by `chains` additions. Its segments are short: a
/// thread's state grows with `chains`, not with their length.
pub fn batch_affine_segment_len(len: u64, chains: u32) -> u32 {
    let target = prev_pow2(len / (u64::from(chains.max(1)) << 17));
    u32::try_from(target)
        .unwrap_or(u32::MAX)
        .clamp(BATCH_AFFINE_MIN_SEGMENT, 256)
}

/// log2 of the buckets each thread of the reduction's first step takes:
/// enough parts that all windows together give about 2^16 threads, each
/// part a power of two no longer than a window.
pub fn part_log2(total_buckets: u64, per_window: u64) -> u32 {
    let len = prev_pow2((total_buckets >> 16).max(1)).min(per_window);
    len.trailing_zeros()
}

/// The largest power of two not above x (1 for x = 0).
fn prev_pow2(x: u64) -> u64 {
    if x == 0 {
        1
    } else {
        1 << (63 - x.leading_zeros())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_cover_the_scalar_with_room_for_the_carry() {
        for c in MIN_WINDOW..=MAX_WINDOW {
            let w = windows(c);
            assert!(w * c >= 256 && (w - 1) * c < 256, "c = {c}");
        }
        assert_eq!(windows(16), 16);
        assert_eq!(windows(20), 13);
        assert_eq!(windows(22), 12);
    }

    #[test]
    fn multiples_windows_grow_with_size_and_stay_indexable() {
        assert_eq!(multiples_window_bits(1 << 24), 22);
        assert_eq!(multiples_window_bits(1 << 26), 24);
        let mut last = MIN_WINDOW;
        for log in 0..31 {
            let n = 1usize << log;
            let c = multiples_window_bits(n);
            assert!((MIN_WINDOW..=MAX_WINDOW).contains(&c), "2^{log}: {c}");
            assert!(c >= last, "2^{log}: {c} after {last}");
            // One set of buckets affords wider windows than per-window sets.
            assert!(c >= window_bits(n, u64::MAX), "2^{log}: {c}");
            if log < 27 {
                assert!(u64::from(windows(c)) * (n as u64) < 1 << 31, "2^{log}: {c}");
            }
            last = c;
        }
        assert_eq!(multiples_window_bits(0), multiples_window_bits(1));
    }

    #[test]
    fn window_choice_grows_with_size_and_respects_memory() {
        let unlimited = u64::MAX;
        assert_eq!(window_bits(1 << 20, unlimited), 16);
        assert_eq!(window_bits(1 << 22, unlimited), 18);
        assert_eq!(window_bits(1 << 24, unlimited), 20);
        assert_eq!(window_bits(1 << 26, unlimited), 22);
        let mut last = MIN_WINDOW;
        for log in 0..31 {
            let c = window_bits(1 << log, unlimited);
            assert!((MIN_WINDOW..=MAX_WINDOW).contains(&c));
            assert!(c >= last, "2^{log}: {c} after {last}");
            last = c;
        }
        // A bucket budget caps the window.
        let cap = u64::from(windows(18)) * buckets_per_window(18);
        assert_eq!(window_bits(1 << 26, cap), 18);
        assert_eq!(window_bits(1, 0), MIN_WINDOW);
    }

    #[test]
    fn carried_windows_narrow_with_more_chunks() {
        let unlimited = u64::MAX;
        // The 32 GiB PoRep's H on 16 and 32 GiB cards (bucket budgets of
        // 2 and 4 GiB of G1 XYZZ points).
        let (g1_16, g1_32) = ((2u64 << 30) / 192, (4u64 << 30) / 192);
        assert_eq!(carried_window_bits(1 << 27, 32, g1_16), 16);
        assert_eq!(carried_window_bits(1 << 27, 8, g1_32), 20);
        // One chunk: near the plain choice (a load per bucket more).
        for log in [10, 16, 20, 24, 26] {
            let plain = window_bits(1 << log, unlimited);
            let one = carried_window_bits(1 << log, 1, unlimited);
            assert!(
                one <= plain && one + 2 >= plain,
                "2^{log}: {one} vs {plain}"
            );
        }
        // More chunks (of at least 2^16 scalars) never widen the window;
        // budgets cap it.
        for log in [20, 22, 27] {
            let mut last = MAX_WINDOW;
            for chunks in [1, 2, 8, 16, 32, 128, 1 << 11].map(|k| k.min(1 << (log - 16))) {
                let c = carried_window_bits(1 << log, chunks, unlimited);
                assert!((MIN_WINDOW..=MAX_WINDOW).contains(&c));
                assert!(c <= last, "2^{log} in {chunks}: {c} after {last}");
                last = c;
            }
        }
        let cap = u64::from(windows(14)) * buckets_per_window(14);
        assert!(carried_window_bits(1 << 27, 1, cap) <= 14);
        assert_eq!(carried_window_bits(0, 0, 0), MIN_WINDOW);
    }

    #[test]
    fn carried_windows_are_never_wider_than_a_chunks() {
        // What lets a chunk's scratch bound hold a carried MSM's buckets:
        // n scalars in k chunks of at most `chunk` (n <= k * chunk).
        let unlimited = u64::MAX;
        for log in [0, 8, 16, 20, 22, 23, 24] {
            let chunk = 1usize << log;
            let plain = window_bits(chunk, unlimited);
            for k in [1, 2, 3, 7, 16, 33, 1000] {
                for n in [1, chunk / 2 + 1, chunk, k * chunk / 2 + 1, k * chunk] {
                    if n > k * chunk {
                        continue;
                    }
                    let c = carried_window_bits(n, k, unlimited);
                    assert!(c <= plain, "{n} in {k} chunks of 2^{log}: {c} > {plain}");
                }
            }
        }
        // Skewed splits too: a query of 33M bases in 4 chunks of 2^23.
        assert!(carried_window_bits(33_112_282, 4, unlimited) <= window_bits(1 << 23, unlimited));
    }

    #[test]
    fn passes_split_windows_by_the_entry_budget() {
        assert_eq!(windows_per_pass(1 << 24, 20, 1 << 28), 13);
        assert_eq!(windows_per_pass(1 << 26, 22, 1 << 28), 4);
        assert_eq!(windows_per_pass(1 << 30, 22, 1 << 28), 1);
        assert_eq!(windows_per_pass(0, 16, 1 << 28), 16);
    }

    #[test]
    fn segment_lengths_are_clamped_powers_of_two() {
        assert_eq!(segment_len(0, 18, 32), 32);
        assert_eq!(segment_len(1000, 18, 32), 32);
        assert_eq!(segment_len(1 << 24, 18, 32), 64);
        assert_eq!(segment_len((1 << 24) * 13, 18, 32), 256);
        assert_eq!(segment_len(u64::MAX, 18, 32), 256);
        assert_eq!(segment_len(100, 17, 16), 16);
    }

    #[test]
    fn batch_affine_segments_are_clamped_powers_of_two() {
        assert_eq!(batch_affine_segment_len(0, 128), 16);
        assert_eq!(batch_affine_segment_len(1000, 256), 16);
        // 2^24 random scalars with window multiples: about 2^27.6 entries.
        assert_eq!(batch_affine_segment_len(200_000_000, 128), 16);
        assert_eq!(batch_affine_segment_len(1 << 32, 128), 256);
        assert_eq!(batch_affine_segment_len(1 << 31, 256), 64);
        assert_eq!(batch_affine_segment_len(u64::MAX, 1), 256);
        assert_eq!(batch_affine_segment_len(1 << 30, 0), 256);
    }

    #[test]
    fn reduction_parts_divide_the_window() {
        assert_eq!(part_log2(13 << 19, 1 << 19), 6);
        assert_eq!(part_log2(16 << 15, 1 << 15), 3);
        assert_eq!(part_log2(128 * 2, 2), 0);
        assert_eq!(part_log2(1 << 40, 1 << 10), 10);
    }
}
