//! The CUDA backend: whole proofs on the GPU, byte-identical to bellperson.
//!
//! prepare (outside any lock): checks, a/b/c from the PCE when the caller
//! did not evaluate them, and the uploads of a, b, c (zero-padded to the
//! domain size) and of the witness. kernel_region: H by NTTs in device
//! memory (b and c are freed as soon as it is done), then the five MSMs
//! against parameter bases that stay resident on the device across proofs.
//! The epilogue ([`assemble`](crate::assemble)) runs on the CPU.
//!
//! Parameters stay resident on the device when they fit beside the proofs'
//! working memory ([`ParamsPlacement::Auto`]); otherwise every MSM streams
//! its bases from host memory in chunks ([`GpuOptions::stream_chunk`])
//! variables: the set's host vectors are page-locked once
//! ([`GpuOptions::pin_streamed`]), and the next chunk is copied on a copy
//! stream while the MSM of the current one runs (two chunk buffers on the
//! device). Device memory is checked
//! before it is allocated: a proof that cannot fit fails with
//! [`Groth16Error::DeviceOutOfMemory`] naming what was needed and what was
//! free. Each device stage is timed with CUDA events
//! ([`StageTimings::gpu`](crate::StageTimings::gpu)).

use std::sync::{Arc, Mutex, OnceLock, Weak};

use bellperson::groth16::Parameters;
use blstrs::{G1Affine, G2Affine, Scalar};
use cudarc::driver::CudaStream;
use cuzk_pinned_pool::{Pool, PoolConfig, RegisteredShared};
use cuzk_synth::{Abc, Density, Pce};

use crate::cuda::{DeviceBuffer, Gpu, GpuEvent, OwnStream};
use crate::msm::{
    DeviceBases, DeviceDensity, GpuMsm, MsmAffine, MsmConfig, multiples_window_bits, windows,
};
use crate::ntt::{GpuNtt, NttConfig};
use crate::prover::{
    AbcInput, AbcPlacement, MsmResults, Prover, ProverInput, StageTimings, Staged,
};
use crate::spmv::{DevicePce, GpuSpmv, PceShapeKey};
use crate::streamed::{Query, ShapeKey, StreamedShape, Streamer};
use crate::{Bls12, Groth16Error, Result, check_params};

/// Parameter bases resident on one GPU, kept while the parameter set lives.
struct ResidentParams {
    /// The host set's five queries, held weakly: the host vectors are freed
    /// as soon as their owner (the engine's parameter cache) lets them go,
    /// and a `Weak` keeps its allocation's address from being reused, so the
    /// addresses still identify the set.
    host: WeakQueries,
    /// Device bytes of the five copies.
    bytes: u64,
    h: DeviceBases<G1Affine>,
    l: DeviceBases<G1Affine>,
    a: DeviceBases<G1Affine>,
    b_g1: DeviceBases<G1Affine>,
    b_g2: DeviceBases<G2Affine>,
}

/// A parameter set's five queries, held weakly.
struct WeakQueries {
    h: Weak<Vec<G1Affine>>,
    l: Weak<Vec<G1Affine>>,
    a: Weak<Vec<G1Affine>>,
    b_g1: Weak<Vec<G1Affine>>,
    b_g2: Weak<Vec<G2Affine>>,
}

impl WeakQueries {
    /// Whether these are `p`'s queries (by address).
    fn is(&self, p: &Parameters<Bls12>) -> bool {
        std::ptr::eq(self.h.as_ptr(), Arc::as_ptr(&p.h))
            && std::ptr::eq(self.l.as_ptr(), Arc::as_ptr(&p.l))
            && std::ptr::eq(self.a.as_ptr(), Arc::as_ptr(&p.a))
            && std::ptr::eq(self.b_g1.as_ptr(), Arc::as_ptr(&p.b_g1))
            && std::ptr::eq(self.b_g2.as_ptr(), Arc::as_ptr(&p.b_g2))
    }

    fn of(p: &Parameters<Bls12>) -> Self {
        WeakQueries {
            h: Arc::downgrade(&p.h),
            l: Arc::downgrade(&p.l),
            a: Arc::downgrade(&p.a),
            b_g1: Arc::downgrade(&p.b_g1),
            b_g2: Arc::downgrade(&p.b_g2),
        }
    }
}

/// A streamed parameter set's host queries, page-locked for as long as the
/// set lives (each query registered with the driver, `None` where the
/// driver refused: that query streams from pageable memory).
struct PinnedQueries {
    host: WeakQueries,
    h: Option<RegisteredShared<G1Affine>>,
    l: Option<RegisteredShared<G1Affine>>,
    a: Option<RegisteredShared<G1Affine>>,
    b_g1: Option<RegisteredShared<G1Affine>>,
    b_g2: Option<RegisteredShared<G2Affine>>,
}

impl PinnedQueries {
    fn is(&self, p: &Parameters<Bls12>) -> bool {
        self.host.is(p)
    }

    /// Whether nobody but these registrations holds any of the queries
    /// (the set was evicted or dropped): then they are let go.
    fn orphaned(&self) -> bool {
        fn others<T>(w: &Weak<Vec<T>>, held: bool) -> usize {
            w.strong_count().saturating_sub(usize::from(held))
        }
        let w = &self.host;
        others(&w.h, self.h.is_some()) == 0
            && others(&w.l, self.l.is_some()) == 0
            && others(&w.a, self.a.is_some()) == 0
            && others(&w.b_g1, self.b_g1.is_some()) == 0
            && others(&w.b_g2, self.b_g2.is_some()) == 0
    }

    fn pinned_bytes(&self) -> u64 {
        fn bytes<T>(r: &Option<RegisteredShared<T>>) -> u64 {
            r.as_ref()
                .filter(|r| r.is_pinned())
                .map_or(0, |r| size_of_val(&**r) as u64)
        }
        bytes(&self.h) + bytes(&self.l) + bytes(&self.a) + bytes(&self.b_g1) + bytes(&self.b_g2)
    }
}

impl ResidentParams {
    fn is(&self, p: &Parameters<Bls12>) -> bool {
        self.host.is(p)
    }

    /// Whether the host set is gone (nobody holds any of its queries).
    fn orphaned(&self) -> bool {
        let w = &self.host;
        [
            w.h.strong_count(),
            w.l.strong_count(),
            w.a.strong_count(),
            w.b_g1.strong_count(),
            w.b_g2.strong_count(),
        ] == [0; 5]
    }
}

impl ShapeDensities {
    fn device_bytes(&self) -> u64 {
        [&self.h, &self.l, &self.a, &self.b]
            .iter()
            .map(|d| d.device_bytes())
            .sum()
    }
}

/// Densities of one circuit shape on the device, over `[inputs | aux]`.
struct ShapeDensities {
    key: ShapeKey,
    /// H: the first m-1 of m coefficients.
    h: DeviceDensity,
    /// L: the aux variables.
    l: DeviceDensity,
    /// A: every input, then the aux used in A.
    a: DeviceDensity,
    /// B: the inputs and aux used in B.
    b: DeviceDensity,
}

/// Where a parameter set's bases live while proofs use them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ParamsPlacement {
    /// Resident when the set fits in free device memory beside two
    /// partitions' working memory (their staged buffers, and the prover's
    /// MSM scratch and twiddles once), else streamed.
    #[default]
    Auto,
    /// Always uploaded once and kept (fails if it does not fit).
    Resident,
    /// Always streamed from host memory, chunk by chunk, in every MSM.
    Streamed,
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
    /// kernel region, where H is computed with two vectors on the device at
    /// once ([`GpuNtt::compute_h_two_buffers`]: each one's copy under the
    /// previous one's transform) and the witness is uploaded under MSM H;
    /// parameters are streamed unless placed [`ParamsPlacement::Resident`].
    /// A partition then needs no device memory of its own outside the
    /// kernel region, and the region needs two domain-sized vectors.
    Host,
}

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
            gpu_abc: true,
            stream_per_worker: true,
            memory_limit: None,
            staging: Staging::Auto,
            window_multiples: false,
            ntt: NttConfig::default(),
        }
    }
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
    let g1 = std::mem::size_of::<G1Affine>() as u64;
    let g2 = std::mem::size_of::<G2Affine>() as u64;
    (p.h.len() + p.l.len() + p.a.len() + p.b_g1.len()) as u64 * g1 + p.b_g2.len() as u64 * g2
}

/// Device memory kept free while window multiples are made: the XYZZ and
/// affine scratch of one chunk of G2 bases (2^22 points), with room over.
const MULTIPLES_MARGIN: u64 = 3 << 30;

/// The window sizes of the multiples a resident set keeps, in the order
/// (h, b_g2, l, a, b_g1), within `room` bytes of device memory: each query
/// in that order gets its multiples ([`multiples_window_bits`] of its
/// length) if they fit in what the ones before left, less
/// [`MULTIPLES_MARGIN`].
fn multiples_plan(p: &Parameters<Bls12>, room: u64) -> [Option<u32>; 5] {
    let mut left = room.saturating_sub(MULTIPLES_MARGIN);
    let mut plan = [None; 5];
    for (c, (len, point)) in plan.iter_mut().zip(multiples_order(p)) {
        if len < 2 {
            continue;
        }
        let w = multiples_window_bits(len);
        let bytes = multiples_bytes(len, point, w);
        if bytes <= left {
            left -= bytes;
            *c = Some(w);
        }
    }
    plan
}

/// (bases, bytes per point) of the queries in [`multiples_plan`]'s order:
/// h, b_g2, l, a, b_g1.
fn multiples_order(p: &Parameters<Bls12>) -> [(usize, usize); 5] {
    let (g1, g2) = (size_of::<G1Affine>(), size_of::<G2Affine>());
    [
        (p.h.len(), g1),
        (p.b_g2.len(), g2),
        (p.l.len(), g1),
        (p.a.len(), g1),
        (p.b_g1.len(), g1),
    ]
}

/// Bytes window multiples of `c` bits add to `len` bases of `point` bytes.
fn multiples_bytes(len: usize, point: usize, c: u32) -> u64 {
    (u64::from(windows(c)) - 1) * len as u64 * point as u64
}

/// Bytes the multiples of `plan` (in [`multiples_plan`]'s order) add.
fn multiples_extra_bytes(p: &Parameters<Bls12>, plan: &[Option<u32>; 5]) -> u64 {
    multiples_order(p)
        .iter()
        .zip(plan)
        .map(|(&(len, point), c)| c.map_or(0, |c| multiples_bytes(len, point, c)))
        .sum()
}

/// One query of a resident set on the device, with its window multiples of
/// `c` bits when given; when making them fails (device memory short of the
/// plan), the plain bases instead, with a warning: the set stays usable.
fn upload_query<A: MsmAffine>(
    gpu: &Arc<Gpu>,
    bases: &[A],
    c: Option<u32>,
    query: &str,
) -> Result<DeviceBases<A>> {
    let plain = DeviceBases::upload(gpu, bases)?;
    let Some(c) = c else {
        return Ok(plain);
    };
    match plain.with_window_multiples(c) {
        Ok(with) => Ok(with),
        Err(e) => {
            tracing::warn!(
                gpu = gpu.ordinal(),
                query,
                "keeping the plain bases without window multiples: {e}"
            );
            DeviceBases::upload(gpu, bases)
        }
    }
}

/// GPU-time marks in a stream: each [`mark`](EventClock::mark) closes a
/// stage begun at the previous mark.
struct EventClock {
    start: GpuEvent,
    stages: Vec<(&'static str, GpuEvent)>,
}

impl EventClock {
    fn start(gpu: &Gpu) -> Result<Self> {
        Ok(EventClock {
            start: gpu.event()?,
            stages: Vec::new(),
        })
    }

    fn mark(&mut self, gpu: &Gpu, stage: &'static str) -> Result<()> {
        self.stages.push((stage, gpu.event()?));
        Ok(())
    }

    fn finish(self, timings: &mut StageTimings) -> Result<()> {
        let mut prev = &self.start;
        for (stage, end) in &self.stages {
            let ms = end.ms_since(prev)?;
            timings.push_gpu(stage, std::time::Duration::from_secs_f64(ms.max(0.0) / 1e3));
            prev = end;
        }
        Ok(())
    }
}

/// What prepare stages for the kernel region.
// `Staged` boxes it: the variants' sizes cost nothing.
#[allow(clippy::large_enum_variant)]
enum GpuStaged {
    /// Uploaded by prepare ([`Staging::Device`]).
    Device {
        a: DeviceBuffer<Scalar>,
        b: DeviceBuffer<Scalar>,
        c: DeviceBuffer<Scalar>,
        w: DeviceBuffer<Scalar>,
    },
    /// In host memory ([`Staging::Host`]): a, b, c evaluated by prepare,
    /// or `None` when the caller gave them ([`AbcInput::Evaluated`], read
    /// again from the kernel region's input).
    Host { abc: Option<Abc> },
}

/// Takes out of `cache` the resident copies whose host set is gone and that
/// no proof holds now (a proof in its kernel region holds its own `Arc`).
fn take_orphans(cache: &mut Vec<Arc<ResidentParams>>) -> Vec<Arc<ResidentParams>> {
    let (orphans, kept): (Vec<_>, Vec<_>) = std::mem::take(cache)
        .into_iter()
        .partition(|r| r.orphaned() && Arc::strong_count(r) == 1);
    *cache = kept;
    orphans
}

/// Takes out of `cache` the page-locked sets nobody else holds now.
fn take_pinned_orphans(cache: &mut Vec<Arc<PinnedQueries>>) -> Vec<Arc<PinnedQueries>> {
    let (orphans, kept): (Vec<_>, Vec<_>) = std::mem::take(cache)
        .into_iter()
        .partition(|p| p.orphaned() && Arc::strong_count(p) == 1);
    *cache = kept;
    orphans
}

/// The CUDA prover of one GPU.
pub struct GpuProver {
    gpu: Arc<Gpu>,
    options: GpuOptions,
    /// Bases per streamed chunk ([`GpuOptions::stream_chunk`]).
    chunk: usize,
    ntt: GpuNtt,
    msm: GpuMsm,
    spmv: GpuSpmv,
    /// PCEs resident for GPU a/b/c, one per shape.
    pces: Mutex<Vec<Arc<DevicePce>>>,
    params: Mutex<Vec<Arc<ResidentParams>>>,
    /// Streamed sets' page-locked host queries.
    pinned: Mutex<Vec<Arc<PinnedQueries>>>,
    /// Registers host memory with the driver (`None`: no pinned pool).
    host_pool: OnceLock<Option<Pool>>,
    /// The stream streamed chunks are copied on, created on first use.
    copy_stream: Mutex<Option<Arc<CudaStream>>>,
    shapes: Mutex<Vec<Arc<ShapeDensities>>>,
    /// Streamed MSM plans, one per shape and chunk size.
    streamed: Mutex<Vec<Arc<StreamedShape>>>,
}

impl std::fmt::Debug for GpuProver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuProver")
            .field("gpu", &self.gpu.ordinal())
            .finish_non_exhaustive()
    }
}

/// Runs `f` (parallel work of `prepare`, such as the PCE's fingerprint) on a
/// small pool of its own: on rayon's global pool it would queue behind the
/// witness tasks of partitions being synthesized (seconds each), and the
/// next kernel region would wait for it.
fn on_prep_pool<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    static POOL: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();
    let pool = POOL.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        rayon::ThreadPoolBuilder::new()
            .num_threads(cores.clamp(1, 4))
            .thread_name(|i| format!("cuzk-prep-{i}"))
            .build()
            .ok()
    });
    match pool {
        Some(pool) => pool.install(f),
        None => f(),
    }
}

/// A circuit shape's key in the prover's caches: its sizes and densities.
fn shape_key(pce: &Pce) -> ShapeKey {
    (
        pce.num_inputs,
        pce.num_aux,
        pce.num_constraints(),
        density_hash(&pce.a_aux_density)
            ^ density_hash(&pce.b_input_density).rotate_left(21)
            ^ density_hash(&pce.b_aux_density).rotate_left(42),
    )
}

fn density_hash(d: &Density) -> u64 {
    // FNV-1a over the bitmap's words, not its bits (every kernel region
    // asks): cheap, and enough to tell shapes apart in a cache that also
    // compares the counts.
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ d.len() as u64;
    for &w in d.words() {
        h = (h ^ w).wrapping_mul(0x100_0000_01b3);
    }
    h
}

impl GpuProver {
    /// The prover of GPU `ordinal`.
    pub fn new(ordinal: usize) -> Result<Self> {
        Self::with_options(ordinal, GpuOptions::default())
    }

    /// The prover of GPU `ordinal` with `options`.
    pub fn with_options(ordinal: usize, options: GpuOptions) -> Result<Self> {
        if options.stream_chunk == Some(0) {
            return Err(Groth16Error::MsmShape {
                detail: "a streamed MSM chunk of 0 bases".into(),
            });
        }
        let gpu = Gpu::get(ordinal)?;
        gpu.set_memory_limit(options.memory_limit)?;
        // The MSM scratch and the streamed chunks sized for the (limited)
        // card: on a 16 GiB card fewer entries per sorting pass, so a 2^24
        // partition fits at all.
        let (_, total) = gpu.mem_info()?;
        let msm_config = MsmConfig::for_device_memory(total);
        let chunk = options
            .stream_chunk
            .unwrap_or_else(|| stream_chunk_for_device_memory(total));
        tracing::debug!(
            gpu = ordinal,
            total,
            ?msm_config,
            chunk,
            "MSM configuration"
        );
        Ok(GpuProver {
            options,
            chunk,
            ntt: GpuNtt::with_config(gpu.clone(), options.ntt),
            msm: GpuMsm::with_config(gpu.clone(), msm_config),
            spmv: GpuSpmv::new(gpu.clone()),
            pces: Mutex::new(Vec::new()),
            gpu,
            params: Mutex::new(Vec::new()),
            pinned: Mutex::new(Vec::new()),
            host_pool: OnceLock::new(),
            copy_stream: Mutex::new(None),
            shapes: Mutex::new(Vec::new()),
            streamed: Mutex::new(Vec::new()),
        })
    }

    /// The GPU this prover runs on.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    /// The parameter set's resident copy, uploaded now if needed; `None`
    /// when it is to be streamed (by the options, or because it does not
    /// fit beside two partitions of `pce`).
    fn resident(
        &self,
        params: &Parameters<Bls12>,
        pce: &Pce,
    ) -> Result<Option<Arc<ResidentParams>>> {
        let mut cache = self.params.lock().map_err(|_| poisoned())?;
        // Copies of sets dropped since (an evicted set reloaded is a new
        // set): freed before anything is measured or uploaded, so a reload
        // replaces the old copy instead of sitting beside it. Frees are
        // stream-ordered: the synchronization gives the memory back before
        // free memory is read below.
        let orphans = take_orphans(&mut cache);
        if !orphans.is_empty() {
            drop(orphans);
            self.gpu.synchronize_device()?;
        }
        if let Some(r) = cache.iter().find(|r| r.is(params)) {
            return Ok(Some(r.clone()));
        }
        let need = params_device_bytes(params);
        // Device memory left for window multiples once the set is placed.
        let room;
        match self.options.params {
            ParamsPlacement::Streamed => return Ok(None),
            // Partitions staged in host memory: their device memory is
            // counted with the streamed MSMs' chunks and scratch.
            ParamsPlacement::Auto if !self.stages_on_device(pce) => return Ok(None),
            ParamsPlacement::Auto => {
                let (free, _) = self.gpu.mem_info()?;
                // Asked in a partition's kernel region: its staged buffers
                // are allocated, `free` has lost them already. (The shared
                // scratch and twiddles may be held already too and are
                // still counted: cautious.)
                let beside = self.two_partitions_bytes(pce) - staged_bytes(pce);
                room = free.saturating_sub(need.saturating_add(beside));
                if need.saturating_add(beside) > free {
                    tracing::warn!(
                        gpu = self.gpu.ordinal(),
                        need,
                        free,
                        "the parameters do not fit beside two partitions in device memory: \
                         streaming them from host memory in every MSM (slower)"
                    );
                    return Ok(None);
                }
            }
            ParamsPlacement::Resident => {
                self.gpu.ensure_free(need, || {
                    "to keep the parameter set resident (ParamsPlacement::Resident)".into()
                })?;
                let (free, _) = self.gpu.mem_info()?;
                let beside = self.two_partitions_bytes(pce) - staged_bytes(pce);
                room = free.saturating_sub(need.saturating_add(beside));
            }
        }
        let _s = tracing::info_span!("upload_params").entered();
        let c = if self.options.window_multiples {
            multiples_plan(params, room)
        } else {
            [None; 5]
        };
        let extra = multiples_extra_bytes(params, &c);
        if extra > 0 {
            tracing::info!(
                gpu = self.gpu.ordinal(),
                bytes = extra,
                windows = ?c,
                "keeping window multiples of the parameter set (h, b_g2, l, a, b_g1)"
            );
        }
        let gpu = &self.gpu;
        let h = upload_query(gpu, &params.h, c[0], "h")?;
        let b_g2 = upload_query(gpu, &params.b_g2, c[1], "b_g2")?;
        let l = upload_query(gpu, &params.l, c[2], "l")?;
        let a = upload_query(gpu, &params.a, c[3], "a")?;
        let b_g1 = upload_query(gpu, &params.b_g1, c[4], "b_g1")?;
        // What the copies take: the plain set, plus the multiples made.
        let bytes = [&h, &l, &a, &b_g1]
            .iter()
            .map(|q| q.device_bytes())
            .sum::<u64>()
            + b_g2.device_bytes();
        let r = Arc::new(ResidentParams {
            host: WeakQueries::of(params),
            bytes,
            h,
            l,
            a,
            b_g1,
            b_g2,
        });
        cache.push(r.clone());
        Ok(Some(r))
    }

    /// The page-locked host queries of a streamed set, registered now if
    /// needed ([`GpuOptions::pin_streamed`]); `None` when pinning is off or
    /// there is no pinned pool. Registrations of sets nobody else holds any
    /// more are undone first.
    fn pinned_queries(&self, params: &Parameters<Bls12>) -> Result<Option<Arc<PinnedQueries>>> {
        if !self.options.pin_streamed {
            return Ok(None);
        }
        let pool = self.host_pool.get_or_init(|| {
            Pool::pinned(self.gpu.ordinal(), PoolConfig::unbounded())
                .map_err(|e| {
                    tracing::warn!(
                        gpu = self.gpu.ordinal(),
                        "no pinned host pool: streamed parameters stay pageable: {e}"
                    )
                })
                .ok()
        });
        let Some(pool) = pool else {
            return Ok(None);
        };
        let mut cache = self.pinned.lock().map_err(|_| poisoned())?;
        drop(take_pinned_orphans(&mut cache));
        if let Some(p) = cache.iter().find(|p| p.is(params)) {
            return Ok(Some(p.clone()));
        }
        let _s = tracing::info_span!("pin_params").entered();
        let start = std::time::Instant::now();
        fn pin<T>(pool: &Pool, data: &Arc<Vec<T>>, what: &str) -> Option<RegisteredShared<T>> {
            match pool.register_shared(Arc::clone(data)) {
                Ok(r) => Some(r),
                Err(e) => {
                    tracing::warn!(
                        "page-locking the {what} query failed, it streams from pageable memory: {e}"
                    );
                    None
                }
            }
        }
        let p = Arc::new(PinnedQueries {
            host: WeakQueries::of(params),
            h: pin(pool, &params.h, "h"),
            l: pin(pool, &params.l, "l"),
            a: pin(pool, &params.a, "a"),
            b_g1: pin(pool, &params.b_g1, "b_g1"),
            b_g2: pin(pool, &params.b_g2, "b_g2"),
        });
        tracing::info!(
            gpu = self.gpu.ordinal(),
            bytes = p.pinned_bytes(),
            seconds = start.elapsed().as_secs_f64(),
            "page-locked a streamed parameter set"
        );
        cache.push(p.clone());
        Ok(Some(p))
    }

    /// The calling thread's own stream while the guard lives, where
    /// [`GpuOptions::stream_per_worker`] asks for it.
    fn own_stream(&self) -> Result<Option<OwnStream>> {
        if self.options.stream_per_worker {
            self.gpu.own_stream().map(Some)
        } else {
            Ok(None)
        }
    }

    /// The stream streamed chunks are copied on.
    fn copy_stream(&self) -> Result<Arc<CudaStream>> {
        let mut slot = self.copy_stream.lock().map_err(|_| poisoned())?;
        if let Some(stream) = slot.as_ref() {
            return Ok(Arc::clone(stream));
        }
        let stream = self
            .gpu
            .cuda_context()
            .new_stream()
            .map_err(|e| Groth16Error::Cuda {
                what: format!("creating a copy stream on GPU {}", self.gpu.ordinal()),
                detail: format!("{e:?}"),
            })?;
        *slot = Some(Arc::clone(&stream));
        Ok(stream)
    }

    /// The plan of `pce`'s streamed MSMs for this prover's chunk size,
    /// made and put on the device once per shape.
    fn streamed_shape(&self, pce: &Pce) -> Result<Arc<StreamedShape>> {
        let key = shape_key(pce);
        let chunk = self.chunk_for(pce, self.stages_on_device(pce));
        let mut cache = self.streamed.lock().map_err(|_| poisoned())?;
        if let Some(s) = cache.iter().find(|s| s.key == key && s.chunk == chunk) {
            return Ok(s.clone());
        }
        let s = Arc::new(StreamedShape::new(&self.gpu, pce, key, chunk)?);
        cache.push(s.clone());
        Ok(s)
    }

    /// The shape's PCE on the device, uploaded now if needed.
    fn device_pce(&self, pce: &Pce, key: &PceShapeKey) -> Result<Arc<DevicePce>> {
        let mut cache = self.pces.lock().map_err(|_| poisoned())?;
        if let Some(d) = cache.iter().find(|d| d.key() == key) {
            return Ok(d.clone());
        }
        self.gpu.ensure_free(crate::spmv::device_bytes(pce), || {
            "to keep the circuit's matrices (PCE) on the device".into()
        })?;
        let d = Arc::new(DevicePce::upload(&self.gpu, pce)?);
        cache.push(d.clone());
        Ok(d)
    }

    /// Drops the device PCEs no proof is using.
    pub fn evict_pces(&self) {
        if let Ok(mut cache) = self.pces.lock() {
            cache.retain(|r| Arc::strong_count(r) > 1);
        }
    }

    /// Drops the device copies of every parameter set no proof is using.
    pub fn evict_params(&self) {
        if let Ok(mut cache) = self.params.lock() {
            cache.retain(|r| Arc::strong_count(r) > 1);
        }
    }

    fn densities(&self, pce: &Pce) -> Result<Arc<ShapeDensities>> {
        let key = shape_key(pce);
        let mut cache = self.shapes.lock().map_err(|_| poisoned())?;
        if let Some(s) = cache.iter().find(|s| s.key == key) {
            return Ok(s.clone());
        }
        let (ni, na, m) = (pce.num_inputs, pce.num_aux, pce.domain_size());
        let vars = ni + na;
        let g = &self.gpu;
        let s = Arc::new(ShapeDensities {
            key,
            h: DeviceDensity::upload(g, (0..m).map(|i| i + 1 < m), m)?,
            l: DeviceDensity::upload(g, (0..vars).map(|i| i >= ni), vars)?,
            a: DeviceDensity::upload(
                g,
                (0..ni).map(|_| true).chain(pce.a_aux_density.iter()),
                vars,
            )?,
            b: DeviceDensity::upload(
                g,
                pce.b_input_density.iter().chain(pce.b_aux_density.iter()),
                vars,
            )?,
        });
        cache.push(s.clone());
        Ok(s)
    }
}

fn poisoned() -> Groth16Error {
    Groth16Error::Cuda {
        what: "the GPU prover's caches".into(),
        detail: "a thread panicked while holding them".into(),
    }
}

/// a, b, c of a partition: the caller's, or those prepare evaluated.
fn abc_slices<'s>(
    abc: &AbcInput<'s>,
    owned: Option<&'s Abc>,
) -> Result<(&'s [Scalar], &'s [Scalar], &'s [Scalar])> {
    match (abc, owned) {
        (AbcInput::Evaluated { a, b, c }, _) => Ok((a, b, c)),
        (AbcInput::FromPce, Some(abc)) => Ok((&abc.a, &abc.b, &abc.c)),
        (AbcInput::FromPce, None) => Err(Groth16Error::NotPrepared { backend: "cuda" }),
    }
}

fn upload_padded(gpu: &Arc<Gpu>, v: &[Scalar], m: usize) -> Result<DeviceBuffer<Scalar>> {
    let mut buf = gpu.alloc_zeros::<Scalar>(m)?;
    buf.copy_from_host_at(0, v)?;
    Ok(buf)
}

impl GpuProver {
    /// prepare with a/b/c evaluated on the GPU: upload the witness only,
    /// SpMV against the resident PCE, and the satisfaction check there.
    fn prepare_gpu_abc(
        &self,
        input: ProverInput<'_>,
        timings: &mut StageTimings,
    ) -> Result<Staged> {
        let pce = input.pce;
        let g = &self.gpu;
        let key = timings.time("pce key", || on_prep_pool(|| PceShapeKey::of(pce)));
        let dpce = timings.time("pce upload", || self.device_pce(pce, &key))?;
        let m = pce.domain_size();
        g.ensure_free(staged_bytes(pce), || {
            format!(
                "staging a, b, c ({m} elements each) and the witness of a {}-constraint partition",
                pce.num_constraints()
            )
        })?;
        let mut clock = EventClock::start(g)?;
        let w = timings.time("h2d", || -> Result<DeviceBuffer<Scalar>> {
            let mut w = g.alloc_zeros::<Scalar>(pce.num_inputs + pce.num_aux)?;
            w.copy_from_host_at(0, &input.witness.inputs)?;
            w.copy_from_host_at(pce.num_inputs, &input.witness.aux)?;
            Ok(w)
        })?;
        clock.mark(g, "h2d")?;
        let (a, b, c) = timings.time("spmv (gpu)", || self.spmv.evaluate(&dpce, &w, m))?;
        clock.mark(g, "spmv")?;
        let bad = timings.time("check (gpu)", || {
            self.spmv.first_unsatisfied(&dpce, &a, &b, &c)
        })?;
        clock.mark(g, "check")?;
        clock.finish(timings)?;
        if let Some(index) = bad {
            let path = pce.names.as_ref().and_then(|n| n.get(index).cloned());
            return Err(cuzk_synth::SynthError::Unsatisfied { index, path }.into());
        }
        Ok(Staged::new(GpuStaged::Device { a, b, c, w }))
    }

    /// Device memory two partitions of `pce`'s shape need at once (both
    /// workers of a GPU), beside the parameter set and the PCE: each its
    /// own staged buffers, and once for both what the prover keeps and
    /// uses one kernel region at a time (the MSMs' scratch, behind one
    /// lock, and the NTT's twiddles, one copy per size). Taking twice
    /// [`Prover::device_bytes`] counted those twice, and a 32 GiB PoRep's
    /// 47 GB set was streamed on an H200 (17-18 s per partition against
    /// 5.1-5.3 s with it resident).
    fn two_partitions_bytes(&self, pce: &Pce) -> u64 {
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
    fn stages_on_device(&self, pce: &Pce) -> bool {
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
    fn shared_bytes(&self, pce: &Pce, on_device: bool) -> u64 {
        kernel_region_bytes(
            pce.domain_log2(),
            pce.num_inputs + pce.num_aux,
            self.chunk_for(pce, on_device),
            &|chunk| self.msm.scratch_bound(chunk),
            self.options.params,
            on_device,
            self.options.ntt,
        )
    }

    /// Bases per streamed chunk for partitions of `pce`'s shape: the
    /// prover's chunk, or for partitions staged in host memory (when the
    /// options name no chunk) [`host_staged_chunk`] on this card.
    fn chunk_for(&self, pce: &Pce, on_device: bool) -> usize {
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
        && kernel_region_bytes(log2, vars, chunk, &scratch, params, false, ntt) + STAGING_MARGIN
            > total
    {
        chunk /= 2;
    }
    chunk
}

/// What a prover keeps on the device for the kernel regions of partitions
/// of a 2^log2 domain and `vars` variables ([`Prover::shared_device_bytes`]),
/// with `chunk` bases per streamed chunk, the MSMs' scratch bound
/// `scratch`, parameters placed `params` and partitions staged on the
/// device (`on_device`) or in host memory.
fn kernel_region_bytes(
    log2: u32,
    vars: usize,
    chunk: usize,
    scratch: &impl Fn(usize) -> u64,
    params: ParamsPlacement,
    on_device: bool,
    ntt: NttConfig,
) -> u64 {
    // The NTT's tables of the domain; the MSMs' scratch (kept by GpuMsm
    // across proofs) for the whole query when the parameters may be
    // resident, for a chunk when they are streamed; for streamed MSMs
    // the two chunk buffers (of G2 bases at most: at the switch from G1
    // two G1 buffers and one G2; the scalars are read in place); with host
    // staging, the kernel region's two domain-sized vectors (H's; the
    // witness comes after h is freed). One of each per prover, used
    // inside the kernel region, which one partition at a time runs.
    let m = 1usize << log2;
    let chunk = chunk.min(m.max(vars));
    let chunks = chunk as u64 * 2 * std::mem::size_of::<G2Affine>() as u64;
    let streams_only = matches!(params, ParamsPlacement::Streamed)
        || (!on_device && !matches!(params, ParamsPlacement::Resident));
    let scratch = if streams_only {
        scratch(chunk)
    } else {
        scratch(m.max(vars))
    };
    let vectors = if on_device { 0 } else { 2 * m as u64 * 32 };
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
fn staged_bytes(pce: &Pce) -> u64 {
    (3 * pce.domain_size() as u64 + (pce.num_inputs + pce.num_aux) as u64) * 32
}

impl Prover for GpuProver {
    fn release_unused(&self) -> u64 {
        // Page-locked host copies of streamed sets no longer held: unlocked
        // (and so freed, the registrations held the last references).
        if let Ok(mut pinned) = self.pinned.lock() {
            let gone = take_pinned_orphans(&mut pinned);
            if !gone.is_empty() {
                let bytes: u64 = gone.iter().map(|p| p.pinned_bytes()).sum();
                drop(gone);
                tracing::info!(
                    gpu = self.gpu.ordinal(),
                    bytes,
                    "unlocked the host copies of streamed parameter sets no longer held"
                );
            }
        }
        let orphans = match self.params.lock() {
            Ok(mut cache) => take_orphans(&mut cache),
            Err(_) => return 0,
        };
        let bytes = orphans.iter().map(|r| r.bytes).sum();
        // Freed outside the lock, in stream order; the synchronization
        // hands the memory back to the driver now (the stream-ordered
        // allocator returns freed memory at synchronizations), so a caller
        // that evicted a set sees it free.
        drop(orphans);
        if bytes > 0 {
            if let Err(e) = self.gpu.synchronize_device() {
                tracing::warn!(gpu = self.gpu.ordinal(), "after freeing parameters: {e}");
            }
            tracing::info!(
                gpu = self.gpu.ordinal(),
                bytes,
                "freed the device copies of parameter sets no longer held"
            );
        }
        bytes
    }

    fn name(&self) -> &'static str {
        "cuda"
    }

    fn held_device_bytes(&self) -> u64 {
        fn sum<T>(cache: &Mutex<Vec<Arc<T>>>, bytes: impl Fn(&T) -> u64) -> u64 {
            cache.lock().map_or(0, |c| c.iter().map(|x| bytes(x)).sum())
        }
        sum(&self.params, |r| r.bytes)
            + sum(&self.pces, DevicePce::device_bytes)
            + sum(&self.shapes, ShapeDensities::device_bytes)
            + sum(&self.streamed, StreamedShape::device_bytes)
    }

    fn release_idle(&self) -> u64 {
        let mut freed = self.release_unused();
        fn drop_unused<T>(cache: &Mutex<Vec<Arc<T>>>, bytes: impl Fn(&T) -> u64) -> u64 {
            let Ok(mut cache) = cache.lock() else {
                return 0;
            };
            let (gone, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut *cache)
                .into_iter()
                .partition(|x| Arc::strong_count(x) == 1);
            *cache = kept;
            gone.iter().map(|x| bytes(x)).sum()
        }
        // Resident copies no kernel region is using, even of sets still
        // held (a later proof uploads them again, or streams them).
        let resident = drop_unused(&self.params, |r| r.bytes);
        let tables = resident
            + drop_unused(&self.pces, DevicePce::device_bytes)
            + drop_unused(&self.shapes, ShapeDensities::device_bytes)
            + drop_unused(&self.streamed, StreamedShape::device_bytes);
        if tables > 0 {
            // Freed in stream order; the synchronization hands the memory
            // back to the driver now.
            if let Err(e) = self.gpu.synchronize_device() {
                tracing::warn!(
                    gpu = self.gpu.ordinal(),
                    "after freeing idle device memory: {e}"
                );
            }
            tracing::info!(
                gpu = self.gpu.ordinal(),
                bytes = tables,
                resident,
                "freed the resident parameters, device PCEs and shape tables no proof is using"
            );
        }
        freed += tables;
        freed
    }

    fn device_bytes(&self, pce: &Pce) -> u64 {
        // a, b, c over the domain and the witness, when staged on the
        // device; nothing outside the kernel region when staged on the host.
        if self.stages_on_device(pce) {
            staged_bytes(pce)
        } else {
            0
        }
    }

    fn shared_device_bytes(&self, pce: &Pce) -> u64 {
        self.shared_bytes(pce, self.stages_on_device(pce))
    }

    fn abc_placement(&self, pce: &Pce) -> AbcPlacement {
        let ordinal = self.gpu.ordinal();
        if !self.options.gpu_abc {
            return AbcPlacement::host("gpu_abc is off in the configuration");
        }
        let resident = self
            .pces
            .lock()
            .map(|c| c.iter().any(|d| d.rows() == pce.num_constraints()))
            .unwrap_or(false);
        if !self.stages_on_device(pce) {
            return AbcPlacement::host(format!(
                "partitions of this shape wait in host memory: two do not fit GPU {ordinal}'s \
                 (limited) memory staged"
            ));
        }
        if resident {
            return AbcPlacement::device(format!("the PCE is resident on GPU {ordinal}"));
        }
        // Fits beside two partitions' working memory.
        let pce_bytes = crate::spmv::device_bytes(pce);
        let need = pce_bytes + self.two_partitions_bytes(pce);
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        match self.gpu.mem_info() {
            Ok((free, _)) if need <= free => AbcPlacement::device(format!(
                "the PCE ({:.2} GiB) fits beside two partitions in GPU {ordinal}'s {:.2} GiB free",
                gib(pce_bytes),
                gib(free)
            )),
            Ok((free, _)) => AbcPlacement::host(format!(
                "the PCE ({:.2} GiB) and two partitions ({:.2} GiB in all) do not fit in GPU \
                 {ordinal}'s {:.2} GiB free",
                gib(pce_bytes),
                gib(need),
                gib(free)
            )),
            Err(e) => AbcPlacement::host(format!("GPU {ordinal}'s free memory is unknown: {e}")),
        }
    }

    fn prepare(
        &self,
        input: ProverInput<'_>,
        params: &Parameters<Bls12>,
        timings: &mut StageTimings,
    ) -> Result<Staged> {
        let pce = input.pce;
        check_params(params, pce)?;
        cuzk_synth::spmv::check_shape(pce, input.witness)?;
        let _own = self.own_stream()?;
        let on_device = self.stages_on_device(pce);
        if matches!(input.abc, AbcInput::FromPce) && self.options.gpu_abc && on_device {
            return self.prepare_gpu_abc(input, timings);
        }
        let owned = match input.abc {
            AbcInput::Evaluated { .. } => None,
            AbcInput::FromPce => {
                Some(timings.time("spmv", || cuzk_synth::evaluate(pce, input.witness))?)
            }
        };
        if !on_device {
            // Uploaded in the kernel region, two vectors at a time.
            return Ok(Staged::new(GpuStaged::Host { abc: owned }));
        }
        let (a, b, c) = abc_slices(&input.abc, owned.as_ref())?;
        let m = pce.domain_size();
        let g = &self.gpu;
        g.ensure_free(staged_bytes(pce), || {
            format!(
                "staging a, b, c ({m} elements each) and the witness of a {}-constraint partition",
                pce.num_constraints()
            )
        })?;
        let mut clock = EventClock::start(g)?;
        let staged = timings.time("h2d", || -> Result<GpuStaged> {
            let w_len = pce.num_inputs + pce.num_aux;
            let mut w = g.alloc_zeros::<Scalar>(w_len)?;
            w.copy_from_host_at(0, &input.witness.inputs)?;
            w.copy_from_host_at(pce.num_inputs, &input.witness.aux)?;
            Ok(GpuStaged::Device {
                a: upload_padded(g, a, m)?,
                b: upload_padded(g, b, m)?,
                c: upload_padded(g, c, m)?,
                w,
            })
        })?;
        clock.mark(g, "h2d")?;
        clock.finish(timings)?;
        Ok(Staged::new(staged))
    }

    fn kernel_region(
        &self,
        input: ProverInput<'_>,
        params: &Parameters<Bls12>,
        staged: Staged,
        timings: &mut StageTimings,
    ) -> Result<MsmResults> {
        let pce = input.pce;
        let Some(staged) = staged.take::<GpuStaged>() else {
            return Err(Groth16Error::NotPrepared {
                backend: self.name(),
            });
        };
        let _own = self.own_stream()?;
        let g = &self.gpu;
        let mut clock = EventClock::start(g)?;
        let resident = timings.time("params", || self.resident(params, pce))?;
        // A streamed set: page-locked (once), the shape's chunks planned
        // (once), and the first chunk of H copied under the NTTs.
        let mut streamed = match resident {
            Some(_) => None,
            None => {
                let pinned = timings.time("params pin", || self.pinned_queries(params))?;
                let shape = timings.time("params plan", || self.streamed_shape(pce))?;
                let mut streamer = Streamer::new(g, &self.msm, self.copy_stream()?, params, shape)?;
                streamer.prefetch()?;
                Some((streamer, pinned))
            }
        };
        clock.mark(g, "params h2d")?;
        let log2 = pce.domain_log2();
        let (a, mut w) = match staged {
            GpuStaged::Device {
                mut a,
                mut b,
                mut c,
                w,
            } => {
                timings.time("h (ntt)", || {
                    self.ntt.compute_h(&mut a, &mut b, &mut c, log2)
                })?;
                (a, Some(w))
            }
            GpuStaged::Host { abc } => {
                let (ha, hb, hc) = abc_slices(&input.abc, abc.as_ref())?;
                let copy = self.copy_stream()?;
                let h = timings.time("h (ntt, a/b/c from host)", || {
                    self.ntt.compute_h_two_buffers(ha, hb, hc, log2, &copy)
                })?;
                (h, None)
            }
        };
        clock.mark(g, "h (ntt)")?;
        let results = std::thread::scope(|scope| {
            // Staged on the host: the witness is uploaded under MSM H by a
            // helper thread (on the GPU's shared stream; from pageable memory a
            // copy blocks its thread) into the room H's second vector had.
            let mut pending = w.is_none().then(|| {
                scope.spawn(|| {
                    let t = std::time::Instant::now();
                    let mut w = g.alloc_zeros::<Scalar>(pce.num_inputs + pce.num_aux)?;
                    w.copy_from_host_at(0, &input.witness.inputs)?;
                    w.copy_from_host_at(pce.num_inputs, &input.witness.aux)?;
                    Ok::<_, Groth16Error>((w, t.elapsed()))
                })
            });
            let mut witness = |timings: &mut StageTimings| -> Result<DeviceBuffer<Scalar>> {
                if let Some(w) = w.take() {
                    return Ok(w);
                }
                let upload = pending.take().ok_or_else(poisoned)?;
                let (w, took) = timings.time("witness h2d (wait)", || {
                    upload.join().map_err(|_| Groth16Error::Cuda {
                        what: "uploading the witness".into(),
                        detail: "the upload thread panicked".into(),
                    })
                })??;
                timings.push_overlapped(
                    "witness h2d",
                    took,
                    format!(
                        "{} bytes under MSM H, on a helper thread",
                        size_of_val(&input.witness.inputs[..])
                            + size_of_val(&input.witness.aux[..])
                    ),
                );
                Ok(w)
            };
            let (h, l, a, b_g1, b_g2) = match (resident, &mut streamed) {
                (Some(resident), _) => {
                    let dens = self.densities(pce)?;
                    let h =
                        timings.time("msm h", || self.msm.g1_dense(&resident.h, &a, &dens.h))?;
                    clock.mark(g, "msm h")?;
                    drop(a);
                    let w = witness(timings)?;
                    let l =
                        timings.time("msm l", || self.msm.g1_dense(&resident.l, &w, &dens.l))?;
                    clock.mark(g, "msm l")?;
                    let a =
                        timings.time("msm a", || self.msm.g1_dense(&resident.a, &w, &dens.a))?;
                    clock.mark(g, "msm a")?;
                    let b_g1 = timings.time("msm b_g1", || {
                        self.msm.g1_dense(&resident.b_g1, &w, &dens.b)
                    })?;
                    clock.mark(g, "msm b_g1")?;
                    let b_g2 = timings.time("msm b_g2", || {
                        self.msm.g2_dense(&resident.b_g2, &w, &dens.b)
                    })?;
                    clock.mark(g, "msm b_g2")?;
                    (h, l, a, b_g1, b_g2)
                }
                (None, Some((st, _))) => {
                    let ni = pce.num_inputs;
                    let h = timings.time("msm h (streamed)", || st.g1(Query::H, &a, 0))?;
                    clock.mark(g, "msm h")?;
                    drop(a);
                    let w = witness(timings)?;
                    let l = timings.time("msm l (streamed)", || st.g1(Query::L, &w, ni))?;
                    clock.mark(g, "msm l")?;
                    let a = timings.time("msm a (streamed)", || st.g1(Query::A, &w, 0))?;
                    clock.mark(g, "msm a")?;
                    let b_g1 = timings.time("msm b_g1 (streamed)", || st.g1(Query::BG1, &w, 0))?;
                    clock.mark(g, "msm b_g1")?;
                    let b_g2 = timings.time("msm b_g2 (streamed)", || st.g2(&w))?;
                    clock.mark(g, "msm b_g2")?;
                    (h, l, a, b_g1, b_g2)
                }
                (None, None) => return Err(poisoned()),
            };
            Ok((h, l, a, b_g1, b_g2))
        });
        let (h, l, a, b_g1, b_g2) = results?;
        if let Some((st, pinned)) = streamed {
            let (bytes, copy, chunks, waited) = st.finish()?;
            // GPU time of the parameter copies themselves (on the copy
            // stream, under the NTTs and MSMs when pinned): bytes / this is
            // the bandwidth the streaming achieved.
            let secs = copy.as_secs_f64();
            let gb_per_s = if secs > 0.0 {
                bytes as f64 / secs / 1e9
            } else {
                0.0
            };
            timings.push_overlapped(
                "streamed h2d",
                copy,
                format!(
                    "{bytes} bytes of parameters copied in {:.1} ms of copy time: {gb_per_s:.1} GB/s ({}); {chunks} chunks, {waited} of whose MSMs were queued before their copy was done",
                    secs * 1e3,
                    if pinned.is_some() { "page-locked" } else { "pageable" }
                ),
            );
            drop(pinned);
        }
        clock.finish(timings)?;
        Ok(MsmResults {
            h,
            l,
            a,
            b_g1,
            b_g2,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    #[test]
    fn window_multiples_go_to_the_queries_in_order_while_they_fit() {
        use cuzk_synth::circuits::CircuitSpec;
        let spec: CircuitSpec = "porep:12".parse().unwrap();
        let pce = Pce::record(spec.build(0)).unwrap();
        let p = crate::fake::fake_params(&pce, 1);
        let order = multiples_order(&p);
        let bytes: Vec<u64> = order
            .iter()
            .map(|&(len, point)| multiples_bytes(len, point, multiples_window_bits(len)))
            .collect();
        // No room (or only the margin): none.
        assert_eq!(multiples_plan(&p, 0), [None; 5]);
        assert_eq!(multiples_plan(&p, MULTIPLES_MARGIN), [None; 5]);
        // Room for H's alone: H's only, with its window.
        let h = multiples_plan(&p, MULTIPLES_MARGIN + bytes[0]);
        assert_eq!(h[0], Some(multiples_window_bits(p.h.len())));
        assert_eq!(h[1..], [None; 4]);
        assert_eq!(multiples_extra_bytes(&p, &h), bytes[0]);
        // Room for all: every query's, and the bytes add up.
        let all = multiples_plan(&p, MULTIPLES_MARGIN + bytes.iter().sum::<u64>());
        assert!(all.iter().all(Option::is_some), "{all:?}");
        assert_eq!(multiples_extra_bytes(&p, &all), bytes.iter().sum::<u64>());
        // H's and B_G2's do not fit, L's does: a later query may still fit.
        let later = multiples_plan(&p, MULTIPLES_MARGIN + bytes[2]);
        assert_eq!(later[0], None);
        assert!(later[2].is_some(), "{later:?}");
        // Each query's multiples are windows(c) - 1 copies of it.
        let c = multiples_window_bits(p.h.len());
        assert_eq!(
            bytes[0],
            u64::from(windows(c) - 1) * (p.h.len() * size_of::<G1Affine>()) as u64
        );
    }

    /// What the kernel region keeps and whether partitions are staged on
    /// the device, as a prover on a card of `total` bytes decides (its MSM
    /// configuration and chunk follow the card).
    fn decide(log2: u32, vars: usize, total: u64) -> (bool, u64, u64, usize) {
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
        let shared = |on_device| {
            let chunk = if on_device { chunk } else { host_chunk };
            kernel_region_bytes(
                log2,
                vars,
                chunk,
                &scratch,
                ParamsPlacement::Auto,
                on_device,
                ntt,
            )
        };
        let staged = (3u64 << log2) * 32 + vars as u64 * 32;
        let device = stage_on_device(staged, shared(true), total);
        (device, shared(true), shared(false), host_chunk)
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
            let (device, _, host_region, chunk) = decide(27, vars, card);
            assert!(!device, "{card}: two 17 GB partitions cannot be staged");
            eprintln!(
                "{} GiB: host-staged chunks of {chunk}, region {host_region}",
                card / GIB
            );
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
}
