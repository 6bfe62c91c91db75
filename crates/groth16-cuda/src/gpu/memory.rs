//! Device-memory accounting of the GPU prover: what a parameter set, a
//! staged partition and the kernel region take, and the sizing rules that
//! follow from the card (staging on the device or in host memory, streamed
//! MSM chunks).

use bellperson::groth16::Parameters;
use blstrs::{G1Affine, G2Affine};
use cuzk_synth::Pce;

#[cfg(doc)]
use super::GpuOptions;
use super::{GpuProver, ParamsPlacement, Query, ResidentQueries, Staging};
use crate::Bls12;
#[cfg(doc)]
use crate::Prover;
use crate::ntt::NttConfig;

/// Room left free on a card when deciding how partitions are staged and
/// streamed: the engine's default `device_memory_margin`.
const STAGING_MARGIN: u64 = 1 << 30;

/// Whether a partition is staged on the device under [`Staging::Auto`]: two
/// partitions' staged buffers (`staged` bytes each, both workers of a GPU),
/// what the prover keeps for its kernel regions (`shared`) and a 1 GiB
/// margin (the engine's default `device_memory_margin`) fit in `total`.
pub fn stage_on_device(staged: u64, shared: u64, total: u64) -> bool {
    staged
        .saturating_mul(2)
        .saturating_add(shared)
        .saturating_add(STAGING_MARGIN)
        <= total
}

/// Bases per streamed MSM chunk on a card of `total` bytes: the
/// largest power of two from 2^20 to 2^24 whose two chunk buffers of G2
/// bases take at most a fifth of the card (2^23 on a 16 GiB card, 2^24 on
/// 32 GiB and more). Larger chunks mean fewer sorting passes and host
/// round trips per query (a query's chunks add into one set of buckets,
/// reduced once); two buffers let the next chunk's copy run under the
/// current one's MSM.
pub fn stream_chunk_for_device_memory(total: u64) -> usize {
    let per_variable = 2 * std::mem::size_of::<G2Affine>() as u64;
    let fit = total / 5 / per_variable;
    let chunk = if fit == 0 { 1 } else { 1u64 << fit.ilog2() };
    chunk.clamp(1 << 20, 1 << 24) as usize
}

/// Bytes of a parameter set's five queries on the device (affine points).
pub fn params_device_bytes(p: &Parameters<Bls12>) -> u64 {
    queries_device_bytes(p, ResidentQueries::ALL)
}

/// Bytes of one query of a parameter set on the device (affine points).
pub fn query_device_bytes(p: &Parameters<Bls12>, q: Query) -> u64 {
    let g1 = std::mem::size_of::<G1Affine>() as u64;
    let g2 = std::mem::size_of::<G2Affine>() as u64;
    match q {
        Query::H => p.h.len() as u64 * g1,
        Query::L => p.l.len() as u64 * g1,
        Query::A => p.a.len() as u64 * g1,
        Query::BG1 => p.b_g1.len() as u64 * g1,
        Query::BG2 => p.b_g2.len() as u64 * g2,
    }
}

/// Bytes of the queries `kept` of a parameter set on the device.
pub fn queries_device_bytes(p: &Parameters<Bls12>, kept: ResidentQueries) -> u64 {
    Query::ALL
        .into_iter()
        .filter(|&q| kept.has(q))
        .map(|q| query_device_bytes(p, q))
        .sum()
}

impl GpuProver {
    /// Device memory two partitions of `pce`'s shape need at once (both
    /// workers of a GPU), beside the parameter set and the PCE: each its
    /// own staged buffers, and once for both what the prover keeps and
    /// uses one kernel region at a time (the MSMs' scratch, behind one
    /// lock, and the NTT's twiddles, one copy per size). Taking twice
    /// [`Prover::device_bytes`] counted those twice, and a 32 GiB PoRep's
    /// 47 GB set was streamed on an H200 (17-18 s per partition against
    /// 5.1-5.3 s with it resident).
    pub(super) fn two_partitions_bytes(&self, pce: &Pce) -> u64 {
        2 * staged_bytes(pce) + self.shared_bytes(pce, true)
    }

    /// The (limited) card's total memory; 0 when the driver cannot say
    /// (then nothing is staged on the device and chunks are the smallest).
    fn card_total(&self) -> u64 {
        self.gpu.mem_info().map_or(0, |(_, total)| total)
    }

    /// Whether partitions of `pce`'s shape are staged on the device
    /// ([`GpuOptions::staging`]; under `Auto` by [`stage_on_device`] on the
    /// (limited) card's total memory, so the answer is the same at every
    /// call).
    pub(super) fn stages_on_device(&self, pce: &Pce) -> bool {
        match self.options.staging {
            Staging::Device => true,
            Staging::Host => false,
            Staging::Auto => stage_on_device(
                staged_bytes(pce),
                self.shared_bytes(pce, true),
                self.card_total(),
            ),
        }
    }

    /// [`Prover::shared_device_bytes`] with partitions staged on the device
    /// (`on_device`) or in host memory.
    pub(super) fn shared_bytes(&self, pce: &Pce, on_device: bool) -> u64 {
        let vectors = if on_device {
            0
        } else {
            self.host_h_vectors(pce)
        };
        kernel_region_bytes(
            pce.domain_log2(),
            pce.num_inputs + pce.num_aux,
            self.chunk_for(pce, on_device),
            &|chunk| self.msm.scratch_bound(chunk),
            self.options.params,
            vectors,
            self.options.ntt,
        )
    }

    /// Domain-sized vectors the kernel region of a partition of `pce`'s
    /// shape staged in host memory allocates for H: [`host_h_vectors`] on
    /// this (limited) card with its host-staged chunk.
    pub(super) fn host_h_vectors(&self, pce: &Pce) -> u64 {
        host_h_vectors(
            pce.domain_log2(),
            pce.num_inputs + pce.num_aux,
            self.chunk_for(pce, false),
            |chunk| self.msm.scratch_bound(chunk),
            self.options.params,
            self.card_total(),
            self.options.ntt,
        )
    }

    /// Bases per streamed chunk for partitions of `pce`'s shape: the
    /// prover's chunk, or for partitions staged in host memory (when the
    /// options name no chunk) [`host_staged_chunk`] on this card.
    pub(super) fn chunk_for(&self, pce: &Pce, on_device: bool) -> usize {
        if on_device || self.options.stream_chunk.is_some() {
            return self.chunk;
        }
        let total = self.card_total();
        host_staged_chunk(
            pce.domain_log2(),
            pce.num_inputs + pce.num_aux,
            self.chunk,
            |chunk| self.msm.scratch_bound(chunk),
            self.options.params,
            total,
            self.options.ntt,
        )
    }
}

/// Bases per streamed chunk for partitions staged in host memory: the
/// largest power of two from 2^20 up to `chunk` whose kernel region
/// ([`kernel_region_bytes`], two domain-sized vectors beside the chunk
/// buffers and the MSM scratch of a chunk) fits a card of `total` bytes with
/// the 1 GiB margin. A 32 GiB PoRep partition on a 16 GiB card: 2^22
/// (14.5 GB) instead of 2^23 (18.2 GB).
fn host_staged_chunk(
    log2: u32,
    vars: usize,
    chunk: usize,
    scratch: impl Fn(usize) -> u64,
    params: ParamsPlacement,
    total: u64,
    ntt: NttConfig,
) -> usize {
    let mut chunk = chunk;
    while chunk > 1 << 20
        && kernel_region_bytes(log2, vars, chunk, &scratch, params, 2, ntt) + STAGING_MARGIN > total
    {
        chunk /= 2;
    }
    chunk
}

/// Domain-sized vectors for H in the kernel region of a partition staged
/// in host memory, with `chunk` bases per streamed chunk
/// ([`host_staged_chunk`]): three when they fit a card of `total` bytes
/// with the 1 GiB margin (c's copy then runs under b's transforms,
/// [`GpuNtt::compute_h_three_buffers_with`]), else two (c's copy waits
/// for `a *= b`). A 32 GiB PoRep partition: three on a 32 GiB card, two on
/// a 16 GiB one.
///
/// [`GpuNtt::compute_h_three_buffers_with`]: crate::ntt::GpuNtt::compute_h_three_buffers_with
fn host_h_vectors(
    log2: u32,
    vars: usize,
    chunk: usize,
    scratch: impl Fn(usize) -> u64,
    params: ParamsPlacement,
    total: u64,
    ntt: NttConfig,
) -> u64 {
    let three = kernel_region_bytes(log2, vars, chunk, &scratch, params, 3, ntt);
    if three + STAGING_MARGIN <= total {
        3
    } else {
        2
    }
}

/// What a prover keeps on the device for the kernel regions of partitions
/// of a 2^log2 domain and `vars` variables ([`Prover::shared_device_bytes`]),
/// with `chunk` bases per streamed chunk, the MSMs' scratch bound
/// `scratch`, parameters placed `params`, and partitions staged on the
/// device (`host_vectors` 0) or in host memory, where H takes
/// `host_vectors` (2 or 3) domain-sized vectors in the region.
fn kernel_region_bytes(
    log2: u32,
    vars: usize,
    chunk: usize,
    scratch: &impl Fn(usize) -> u64,
    params: ParamsPlacement,
    host_vectors: u64,
    ntt: NttConfig,
) -> u64 {
    let on_device = host_vectors == 0;
    // The NTT's tables of the domain; the MSMs' scratch (kept by GpuMsm
    // across proofs) for the whole query when the parameters may be
    // resident, for a chunk when they are streamed; for streamed MSMs
    // the two chunk buffers (of G2 bases at most: at the switch from G1
    // two G1 buffers and one G2; the scalars are read in place); with host
    // staging, the kernel region's two or three domain-sized vectors (H's;
    // the witness comes after all but h are freed). One of each per prover, used
    // inside the kernel region, which one partition at a time runs.
    let m = 1usize << log2;
    let chunk = chunk.min(m.max(vars));
    let chunks = chunk as u64 * 2 * std::mem::size_of::<G2Affine>() as u64;
    let streams_only = matches!(params, ParamsPlacement::Streamed)
        || (!on_device && matches!(params, ParamsPlacement::Auto))
        || params == ParamsPlacement::Queries(ResidentQueries::NONE);
    let scratch = if streams_only {
        scratch(chunk)
    } else {
        scratch(m.max(vars))
    };
    let vectors = host_vectors * m as u64 * 32;
    ntt_table_bytes(log2, ntt) + scratch + chunks + vectors
}

/// Device bytes of the NTT's tables for a 2^log2 domain: with the default
/// [`NttConfig`] a few square-root sized tables (1.6 MB at 2^27); with
/// whole tables three of 2^log2 elements. One domain size: a prover whose
/// partitions come in several sizes keeps each one's tables.
fn ntt_table_bytes(log2: u32, ntt: NttConfig) -> u64 {
    match crate::ntt::plan::DomainPlan::with_layout(log2.max(1), ntt.tables) {
        Ok(plan) => plan.tables().iter().map(|t| 32u64 << t.log_len).sum(),
        // Sizes the NTT refuses fail when it runs; counted as m elements.
        Err(_) => 32u64 << log2.min(40),
    }
}

/// Bytes prepare allocates: a, b, c over the domain and the witness.
pub(super) fn staged_bytes(pce: &Pce) -> u64 {
    (3 * pce.domain_size() as u64 + (pce.num_inputs + pce.num_aux) as u64) * 32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msm::MsmConfig;

    const GIB: u64 = 1 << 30;

    /// What the kernel region keeps and whether partitions are staged on
    /// the device, as a prover on a card of `total` bytes decides (its MSM
    /// configuration and chunk follow the card).
    fn decide(log2: u32, vars: usize, total: u64) -> (bool, u64, u64, usize, u64) {
        let msm = MsmConfig::for_device_memory(total);
        let scratch = |chunk| msm.scratch_bound(chunk);
        let chunk = stream_chunk_for_device_memory(total);
        let ntt = NttConfig::default();
        let host_chunk = host_staged_chunk(
            log2,
            vars,
            chunk,
            scratch,
            ParamsPlacement::Auto,
            total,
            ntt,
        );
        assert!(host_chunk <= chunk && host_chunk.is_power_of_two());
        let vectors = host_h_vectors(
            log2,
            vars,
            host_chunk,
            scratch,
            ParamsPlacement::Auto,
            total,
            ntt,
        );
        let shared = |on_device| {
            let (chunk, vectors) = if on_device {
                (chunk, 0)
            } else {
                (host_chunk, vectors)
            };
            kernel_region_bytes(
                log2,
                vars,
                chunk,
                &scratch,
                ParamsPlacement::Auto,
                vectors,
                ntt,
            )
        };
        let staged = (3u64 << log2) * 32 + vars as u64 * 32;
        let device = stage_on_device(staged, shared(true), total);
        (device, shared(true), shared(false), host_chunk, vectors)
    }

    /// A 32 GiB PoRep partition (2^27 domain, 130,278,869 variables + 1
    /// input... counted as the PCE counts them) is staged in host memory
    /// on 16 and 32 GiB cards and then needs less than the card in its
    /// kernel region; on an H200 it is staged on the device. porep:24-sized
    /// partitions stay on the device even on a 16 GiB card.
    #[test]
    fn big_partitions_wait_in_host_memory_on_small_cards() {
        let vars = 130_278_869 + 1;
        for card in [16 * GIB, 32 * GIB] {
            let (device, _, host_region, chunk, vectors) = decide(27, vars, card);
            assert!(!device, "{card}: two 17 GB partitions cannot be staged");
            eprintln!(
                "{} GiB: host-staged chunks of {chunk}, {vectors} vectors for H, region \
                 {host_region}",
                card / GIB
            );
            // A third vector for H (c's copy under b's transforms) fits
            // beside the largest chunks on 32 GiB, not on 16 GiB; the chunk
            // is chosen first, with two.
            let want = if card == 16 * GIB { 2 } else { 3 };
            assert_eq!(vectors, want, "{} GiB", card / GIB);
            // The MSM scratch of a chunk (its buckets too: a carried MSM's
            // windows are never wider than a chunk's) is small beside the
            // vectors: chunks of 2^23 bases on 16 GiB, 2^24 (the most) on
            // 32 GiB.
            let want = if card == 16 * GIB { 1 << 23 } else { 1 << 24 };
            assert_eq!(chunk, want, "{} GiB", card / GIB);
            assert!(
                host_region + GIB <= card,
                "{} GiB: the host-staged kernel region needs {host_region} bytes",
                card / GIB
            );
        }
        let (device, ..) = decide(27, vars, 141 * GIB);
        assert!(device, "an H200 stages two 32 GiB partitions");
        for card in [16 * GIB, 32 * GIB, 141 * GIB] {
            let (device, ..) = decide(24, 16_800_000, card);
            assert!(device, "{} GiB: porep:24 staged on the device", card / GIB);
        }
        // The decision is monotone in the card's size.
        let mut was = false;
        for gib in 8..=256 {
            let (device, ..) = decide(27, vars, gib * GIB);
            assert!(device || !was, "{gib} GiB");
            was = device;
        }
    }

    /// Three vectors exactly when the region with three and the margin fit
    /// the card: at the boundary byte, one byte less gives two.
    #[test]
    fn a_third_h_vector_only_where_it_fits() {
        let (log2, vars, chunk) = (20, 1 << 20, 1 << 20);
        let scratch = |c: usize| c as u64 * 8;
        let ntt = NttConfig::default();
        let region =
            |v| kernel_region_bytes(log2, vars, chunk, &scratch, ParamsPlacement::Auto, v, ntt);
        // Each vector is m scalars of 32 bytes.
        assert_eq!(region(3) - region(2), 32 << log2);
        assert_eq!(region(2) - region(0), 64 << log2);
        let fit = region(3) + STAGING_MARGIN;
        let vectors = |total| {
            host_h_vectors(
                log2,
                vars,
                chunk,
                scratch,
                ParamsPlacement::Auto,
                total,
                ntt,
            )
        };
        assert_eq!(vectors(fit), 3);
        assert_eq!(vectors(fit - 1), 2);
        assert_eq!(vectors(0), 2, "an unknown card size takes two");
        assert_eq!(vectors(u64::MAX), 3);
    }

    /// The NTT's tables are a few square-root-sized tables, not twiddles
    /// for every element: what the kernel region used to count for them
    /// (2m elements, 8.6 GB at 2^27) was most of a 16 GiB card.
    #[test]
    fn ntt_tables_are_small() {
        let small = NttConfig::default();
        for log2 in [1, 10, 20, 24, 27] {
            let bytes = ntt_table_bytes(log2, small);
            assert!(bytes > 0 && bytes <= 64 << 20, "2^{log2}: {bytes}");
        }
        assert!(ntt_table_bytes(27, small) < (32u64 << 27) / 100);
        // Whole tables: the top pass's factor and H's two scalings, each
        // 2^log2 elements, are counted.
        let whole = NttConfig {
            tables: crate::ntt::TableLayout::WHOLE,
            ..small
        };
        let bytes = ntt_table_bytes(26, whole);
        let three = 3 * (32u64 << 26);
        assert!((three..three + (64 << 20)).contains(&bytes), "{bytes}");
    }

    #[test]
    fn streamed_chunks_follow_the_device_memory() {
        assert_eq!(stream_chunk_for_device_memory(16 * GIB), 1 << 23);
        assert_eq!(stream_chunk_for_device_memory(8 * GIB), 1 << 22);
        assert_eq!(stream_chunk_for_device_memory(32 * GIB), 1 << 24);
        assert_eq!(stream_chunk_for_device_memory(141 * GIB), 1 << 24);
        for total in [0, 1, GIB, u64::MAX] {
            let c = stream_chunk_for_device_memory(total);
            assert!(
                c.is_power_of_two() && (1 << 20..=1 << 24).contains(&c),
                "{total}: {c}"
            );
        }
        // Two buffers of G2 bases within a fifth of the card, down to 4 GiB.
        for gib in 4..=64 {
            let c = stream_chunk_for_device_memory(gib * GIB) as u64;
            assert!(2 * c * 192 <= gib * GIB / 5 || c == 1 << 20, "{gib} GiB");
        }
    }

    /// A set kept in part counts the whole-query MSM scratch as a resident
    /// one does, staged on the device or in host memory (its kept queries'
    /// MSMs run whole), where `Auto` with host staging streams everything
    /// and counts a chunk's scratch only.
    #[test]
    fn a_partly_resident_set_counts_the_whole_query_scratch() {
        let msm = MsmConfig::for_device_memory(80 * GIB);
        let scratch = |chunk| msm.scratch_bound(chunk);
        let (log2, vars, chunk) = (27, 130_278_870, 1 << 22);
        let ntt = NttConfig::default();
        let kept = ParamsPlacement::Queries(ResidentQueries::NONE.with(Query::A));
        for vectors in [0, 2, 3] {
            let bytes = |p| kernel_region_bytes(log2, vars, chunk, &scratch, p, vectors, ntt);
            // Keeping none is streaming.
            assert_eq!(
                bytes(ParamsPlacement::Queries(ResidentQueries::NONE)),
                bytes(ParamsPlacement::Streamed)
            );
            assert_eq!(bytes(kept), bytes(ParamsPlacement::Resident), "{vectors}");
            assert!(bytes(kept) > bytes(ParamsPlacement::Streamed), "{vectors}");
            if vectors == 0 {
                assert_eq!(bytes(ParamsPlacement::Auto), bytes(kept));
            } else {
                assert_eq!(
                    bytes(ParamsPlacement::Auto),
                    bytes(ParamsPlacement::Streamed)
                );
            }
        }
    }
}
