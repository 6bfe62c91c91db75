//! The options of a [`GpuProver`](super::GpuProver): where parameter sets
//! and partitions are placed, streaming, per-worker streams and the NTT's
//! tuning.

use super::upload::BOUNCE_BYTES;
#[cfg(doc)]
use super::{GpuProver, stage_on_device, stream_chunk_for_device_memory};
use crate::ntt::NttConfig;
pub use crate::streamed::Query;
#[cfg(doc)]
use crate::{
    AbcInput,
    cuda::Gpu,
    msm::{DeviceBases, multiples_window_bits},
    ntt::GpuNtt,
};

/// Where a parameter set's bases live while proofs use them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ParamsPlacement {
    /// Resident when the set fits in free device memory beside two
    /// partitions' working memory (their staged buffers, and the prover's
    /// MSM scratch, streaming chunks and twiddles once); else as many of
    /// its queries as fit there, in the order of [`ResidentQueries::AUTO_ORDER`],
    /// the others streamed; with partitions staged in host memory, streamed.
    #[default]
    Auto,
    /// Always uploaded once and kept (fails if it does not fit).
    Resident,
    /// Always streamed from host memory, chunk by chunk, in every MSM.
    Streamed,
    /// These queries uploaded once and kept (fails if they do not fit),
    /// the others streamed.
    Queries(ResidentQueries),
}

/// Which of a parameter set's five queries are kept in device memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ResidentQueries {
    pub h: bool,
    pub l: bool,
    pub a: bool,
    pub b_g1: bool,
    pub b_g2: bool,
}

impl ResidentQueries {
    pub const ALL: Self = ResidentQueries {
        h: true,
        l: true,
        a: true,
        b_g1: true,
        b_g2: true,
    };
    pub const NONE: Self = ResidentQueries {
        h: false,
        l: false,
        a: false,
        b_g1: false,
        b_g2: false,
    };
    /// The order in which [`ParamsPlacement::Auto`] keeps the queries of a
    /// set that does not fit whole, each one only if it fits beside those
    /// kept before it: by the kernel-region time a gigabyte resident saves
    /// against streaming it, as measured on an H100 for a 32 GiB PoRep
    /// partition (streamed against resident, ms: A 226 against 104, L 228
    /// against 117, H 1328 against 1160, B_G2 190 against 121, B_G1 66
    /// against 37; bench-data/filecoin/2026-12-07-6face44-porep32g-c2-resident-h100.json).
    /// A and L are copy-bound when streamed; H's copies hide under its own
    /// long MSM.
    pub const AUTO_ORDER: [Query; 5] = [Query::A, Query::L, Query::H, Query::BG2, Query::BG1];

    /// Whether `q` is kept.
    pub fn has(&self, q: Query) -> bool {
        match q {
            Query::H => self.h,
            Query::L => self.l,
            Query::A => self.a,
            Query::BG1 => self.b_g1,
            Query::BG2 => self.b_g2,
        }
    }

    /// Keeps `q` too.
    pub fn with(mut self, q: Query) -> Self {
        match q {
            Query::H => self.h = true,
            Query::L => self.l = true,
            Query::A => self.a = true,
            Query::BG1 => self.b_g1 = true,
            Query::BG2 => self.b_g2 = true,
        }
        self
    }

    /// How many queries are kept.
    pub fn count(&self) -> usize {
        Query::ALL.iter().filter(|&&q| self.has(q)).count()
    }
}

impl std::fmt::Display for ResidentQueries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kept: Vec<&str> = Query::ALL
            .iter()
            .filter(|&&q| self.has(q))
            .map(|q| q.name())
            .collect();
        if kept.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&kept.join(","))
        }
    }
}

impl std::str::FromStr for ResidentQueries {
    type Err = String;

    /// A comma-separated list of query names (`h`, `l`, `a`, `b_g1`,
    /// `b_g2`), `all` or `none`.
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "all" => return Ok(Self::ALL),
            "none" | "" => return Ok(Self::NONE),
            _ => {}
        }
        s.split(',').try_fold(Self::NONE, |kept, name| {
            let name = name.trim();
            Query::ALL
                .into_iter()
                .find(|q| q.name() == name)
                .map(|q| kept.with(q))
                .ok_or_else(|| {
                    format!(
                        "unknown query {name:?} in {s:?}: expected a comma-separated list of \
                         h, l, a, b_g1, b_g2 (or all, none)"
                    )
                })
        })
    }
}

/// Where a partition's a, b, c and witness wait between `prepare` and its
/// kernel region.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Staging {
    /// On the device when two partitions' staged buffers fit the (limited)
    /// card beside what the prover keeps for the kernel region
    /// ([`stage_on_device`]), else in host memory.
    #[default]
    Auto,
    /// On the device: prepare uploads a, b, c (or evaluates them there)
    /// and the witness; the kernel region starts on the NTTs at once. Two
    /// partitions of a 32 GiB PoRep (17 GB each) need 34 GB.
    Device,
    /// In host memory: a, b, c are evaluated on the CPU and uploaded in the
    /// kernel region, where H is computed with three vectors on the device
    /// where the card has room for them
    /// ([`GpuNtt::compute_h_three_buffers_with`]: b's and c's copies under
    /// a's and b's transforms), else with two
    /// ([`GpuNtt::compute_h_two_buffers`]: c's copy after a *= b), and the
    /// witness is uploaded under MSM H; parameters are streamed unless
    /// placed [`ParamsPlacement::Resident`]. A partition then needs no
    /// device memory of its own outside the kernel region, and the region
    /// needs two or three domain-sized vectors.
    Host,
}

/// Options of a [`GpuProver`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuOptions {
    pub params: ParamsPlacement,
    /// Bases (used variables) per streamed MSM chunk (on the device at
    /// once, twice: the chunk being summed and the next one
    /// being copied); `None`: sized for the (limited) card by
    /// [`stream_chunk_for_device_memory`].
    pub stream_chunk: Option<usize>,
    /// Page-lock a streamed parameter set's host vectors (once per set,
    /// `cuMemHostRegister`; undone when the set is let go), so chunks are
    /// copied at the link's full speed and under the previous chunk's MSM;
    /// false: copied from pageable memory, one after the other.
    pub pin_streamed: bool,
    /// Upload a partition's witness (and a, b, c when staged on the
    /// device) through two page-locked bounce buffers of this many bytes
    /// ([`BOUNCE_BYTES`] by default), each filled by a few threads while
    /// the other's piece crosses the link, instead of straight from its
    /// pageable vectors (7.5-8.7 GB/s on an H200 against 55 GB/s
    /// page-locked). A vector no larger than one buffer is copied as it
    /// is. `None`: pageable copies.
    pub bounce_bytes: Option<usize>,
    /// Given [`AbcInput::FromPce`], evaluate a/b/c on the GPU from a PCE
    /// kept in device memory (uploaded once per shape) and check the
    /// witness there, uploading only the witness; else on the CPU.
    pub gpu_abc: bool,
    /// Run each calling thread's (each engine worker's) copies and kernels
    /// on a stream of its own ([`Gpu::own_stream`]), so one worker's
    /// uploads and prepare kernels run beside the other's kernel region
    /// instead of queueing behind it; false: every worker on the GPU's one
    /// shared stream.
    pub stream_per_worker: bool,
    /// Behave as on a card with this many bytes of device memory
    /// ([`Gpu::set_memory_limit`]: placement, free-memory checks and this
    /// crate's device buffers see that card); `None`: the card's own. Per
    /// device and process: the latest prover opened on a GPU sets it.
    pub memory_limit: Option<u64>,
    /// Where partitions wait between prepare and their kernel region.
    pub staging: Staging,
    /// With a resident parameter set, also keep its queries' window
    /// multiples ([`DeviceBases::with_window_multiples`], window size by
    /// [`multiples_window_bits`]) where device memory allows beside the
    /// set and two partitions: H first, then B_G2, L, A and B_G1, each only
    /// if its multiples fit. Their bytes count as the set's (the engine's
    /// device budget holds them). They make a 2^24-scalar G1 MSM about
    /// 1.17x faster but take windows(c) - 1 more copies of the query (11
    /// for 2^24 bases: 17.7 GB for a G1 query): off by default, for
    /// cards with room to spare (one parameter set on an H200).
    pub window_multiples: bool,
    /// The NTT's pass kernel, table layout and final bit-reversal
    /// ([`NttConfig`]); its tables count in the kernel region's device bytes.
    pub ntt: NttConfig,
}

impl Default for GpuOptions {
    fn default() -> Self {
        GpuOptions {
            params: ParamsPlacement::Auto,
            stream_chunk: None,
            pin_streamed: true,
            bounce_bytes: Some(BOUNCE_BYTES),
            gpu_abc: true,
            stream_per_worker: true,
            memory_limit: None,
            staging: Staging::Auto,
            window_multiples: false,
            ntt: NttConfig::default(),
        }
    }
}
