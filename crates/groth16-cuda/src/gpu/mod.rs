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
//! working memory ([`ParamsPlacement::Auto`]), or as many of its queries
//! as fit ([`ResidentQueries::AUTO_ORDER`]); every other MSM streams
//! its bases from host memory in chunks ([`GpuOptions::stream_chunk`])
//! variables: the set's host vectors are page-locked once
//! ([`GpuOptions::pin_streamed`]), and the next chunk is copied on a copy
//! stream while the MSM of the current one runs (two chunk buffers on the
//! device). Device memory is checked
//! before it is allocated: a proof that cannot fit fails with
//! [`Groth16Error::DeviceOutOfMemory`] naming what was needed and what was
//! free. Each device stage is timed with CUDA events
//! ([`StageTimings::gpu`](crate::StageTimings::gpu)).
//!
//! Here: the prover type and its [`Prover`] implementation. Beside it:
//! `options` ([`GpuOptions`]), `memory` (device-memory accounting and the
//! sizing rules that follow from the card), `param_sets` (resident and
//! page-locked parameter sets), `shapes` (per-shape device state) and
//! `stages` (prepare and the kernel region).

mod memory;
mod options;
mod param_sets;
mod pinned_queries;
mod shapes;
mod stages;
mod upload;

use std::sync::{Arc, Mutex, OnceLock};

use bellperson::groth16::Parameters;
use cudarc::driver::CudaStream;
use cuzk_pinned_pool::Pool;
use cuzk_synth::Pce;

pub use memory::{
    params_device_bytes, queries_device_bytes, query_device_bytes, stage_on_device,
    stream_chunk_for_device_memory,
};
pub use options::{GpuOptions, ParamsPlacement, Query, ResidentQueries, Staging};
pub use upload::BOUNCE_BYTES;

use crate::cuda::{Gpu, OwnStream};
use crate::msm::{GpuMsm, MsmConfig};
use crate::ntt::GpuNtt;
use crate::prover::{AbcPlacement, MsmResults, Prover, ProverInput, StageTimings, Staged};
use crate::spmv::{DevicePce, GpuSpmv};
use crate::streamed::StreamedShape;
use crate::{Bls12, Groth16Error, Result};
use memory::staged_bytes;
use param_sets::{ResidentParams, WeakQueries, take_orphans};
use pinned_queries::{PinnedQueries, take_pinned_orphans};
use shapes::ShapeDensities;

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
    /// Taken by the one worker reading a released PCE's matrices again for
    /// an upload ([`GpuProver::device_pce`]), so a GPU's two workers never
    /// read the same file at once; lookups in `pces` do not wait for it.
    pce_reload: Mutex<()>,
    params: Mutex<Vec<Arc<ResidentParams>>>,
    /// Streamed sets' page-locked host queries.
    pinned: Mutex<Vec<Arc<PinnedQueries>>>,
    /// Sets already reported as streamed whole under `Auto` (no query fits
    /// beside two partitions): reported once each, not in every kernel
    /// region.
    streamed_whole: Mutex<Vec<WeakQueries>>,
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
            pce_reload: Mutex::new(()),
            gpu,
            params: Mutex::new(Vec::new()),
            pinned: Mutex::new(Vec::new()),
            streamed_whole: Mutex::new(Vec::new()),
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
}

fn poisoned() -> Groth16Error {
    Groth16Error::Cuda {
        what: "the GPU prover's caches".into(),
        detail: "a thread panicked while holding them".into(),
    }
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

    fn holds_pce(&self, pce: &Pce) -> bool {
        let key = crate::spmv::PceShapeKey::of(pce);
        self.pces
            .lock()
            .is_ok_and(|c| c.iter().any(|d| *d.key() == key))
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
            Ok((free, _)) => AbcPlacement::host_short_of_room(format!(
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
        self.prepare_partition(input, params, timings)
    }

    fn kernel_region(
        &self,
        input: ProverInput<'_>,
        params: &Parameters<Bls12>,
        staged: Staged,
        timings: &mut StageTimings,
    ) -> Result<MsmResults> {
        self.run_kernel_region(input, params, staged, timings)
    }
}
