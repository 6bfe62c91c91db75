//! The tuning of a [`GpuMsm`](super::GpuMsm): [`MsmConfig`], the variants of
//! the bucket accumulation kernel ([`Accumulate`]), and the window size a
//! configuration gives an MSM, checked against the kernels' range.

use super::{MAX_WINDOW, MIN_WINDOW, MsmAffine, plan, window_bits};
use crate::{Groth16Error, Result};

/// Tuning of [`GpuMsm`](super::GpuMsm); [`MsmConfig::default`] is what the
/// prover uses.
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
    /// ([`GpuMsm::last_profile`](super::GpuMsm::last_profile)); for
    /// measurements only.
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
    /// Windows whose counting-sort atomics one thread of the scatter has
    /// in flight at once: 1 is the serial kernel (`msm_scatter`, each
    /// window's atomic awaited before the next), 4, 8 or 16 the batched
    /// one (`msm_scatter_b<B>`); other values are rounded down to one of
    /// these. Profiled on an H200 the serial scatter's warps wait on their
    /// atomics three quarters of the time (shared/profiles, 2^22), and on
    /// an H100 it was 22.8 of a G1 2^24 MSM's 133 ms. Yet the batches gain
    /// nothing: on an H100 (bench-data/msm/2026-12-07-a04503e-scatter-
    /// batch-h100.json, every sum equal) the scatter phase took 23.0 ms
    /// serial against 23.6-23.7 ms batched (G1 2^24 random; Filecoin-shaped
    /// 7.52 against 7.55; with window multiples 15.38 against 15.39-15.53;
    /// G2 2^22 4.31 against 4.49-4.58), the whole MSM 133.3 against
    /// 133.8-133.9 ms: the scatter is bound by the atomics' and random
    /// stores' traffic, not by each thread's wait. The serial kernel stays
    /// the default; the batched ones remain for measurement.
    pub scatter_batch: u32,
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
            scatter_batch: 1,
        }
    }
}

/// The scatter kernel's `<op>` (`msm_<op>_bls12_381`) for a batch of
/// `batch` windows ([`MsmConfig::scatter_batch`]): the widest kernel batch
/// at most `batch`.
pub(super) fn scatter_op(batch: u32) -> &'static str {
    match batch {
        16.. => "scatter_b16",
        8..=15 => "scatter_b8",
        4..=7 => "scatter_b4",
        _ => "scatter",
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
    pub(super) fn op<A: MsmAffine>(self) -> &'static str {
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

/// The window size of an MSM over `n` scalars that are neither 0 nor 1, in
/// `chunks` chunks whose buckets carry (1: a plain MSM): the
/// configuration's, or [`window_bits`]'
/// ([`carried_window_bits`](plan::carried_window_bits)') choice within its
/// bucket budget.
pub(super) fn window_for<A: MsmAffine>(config: &MsmConfig, n: usize, chunks: usize) -> Result<u32> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scatter_batch_picks_the_widest_kernel_batch_at_most_it() {
        let got: Vec<_> = [0, 1, 3, 4, 7, 8, 15, 16, 64]
            .into_iter()
            .map(scatter_op)
            .collect();
        assert_eq!(
            got,
            [
                "scatter",
                "scatter",
                "scatter",
                "scatter_b4",
                "scatter_b4",
                "scatter_b8",
                "scatter_b8",
                "scatter_b16",
                "scatter_b16"
            ]
        );
        // Each batched kernel is instantiated in the msm module's source.
        let src = include_str!("../../../../kernels/msm.cu");
        for b in [4, 8, 16] {
            assert!(src.contains(&format!("MSM_SCATTER_BATCHED({b})")), "{b}");
        }
    }
}
