//! The GPU prover's device stages, timed with CUDA events: prepare
//! (checks, a/b/c, the uploads of a partition staged on the device) and the
//! kernel region (H by NTTs, then the five MSMs against resident or
//! streamed bases).

use bellperson::groth16::Parameters;
use blstrs::Scalar;
use cuzk_synth::Abc;

#[cfg(doc)]
use super::Staging;
use super::memory::staged_bytes;
use super::{GpuProver, ResidentQueries, poisoned};
use crate::cuda::{DeviceBuffer, Gpu, GpuEvent};
use crate::prover::{AbcInput, MsmResults, Prover, ProverInput, StageTimings, Staged};
use crate::spmv::PceShapeKey;
use crate::streamed::{Query, Streamer};
use crate::{Bls12, Groth16Error, Result, check_params};

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

/// Runs `f` (parallel work of `prepare`, such as the PCE's fingerprint) on a
/// small pool of its own: on rayon's global pool it would queue behind the
/// witness tasks of partitions being synthesized (seconds each), and the
/// next kernel region would wait for it.
pub(super) fn on_prep_pool<T: Send>(f: impl FnOnce() -> T + Send) -> T {
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
        let w = timings.time("h2d", || self.upload_witness(pce, input.witness))?;
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
        Ok(Staged::holding_witness(GpuStaged::Device { a, b, c, w }))
    }

    /// [`Prover::prepare`]: checks, a/b/c on the GPU or the CPU, and the
    /// uploads of a partition staged on the device.
    pub(super) fn prepare_partition(
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
            Ok(GpuStaged::Device {
                a: self.upload_padded(a, m)?,
                b: self.upload_padded(b, m)?,
                c: self.upload_padded(c, m)?,
                w: self.upload_witness(pce, input.witness)?,
            })
        })?;
        clock.mark(g, "h2d")?;
        clock.finish(timings)?;
        Ok(Staged::holding_witness(staged))
    }

    /// [`Prover::kernel_region`]: H by NTTs, then the five MSMs against
    /// resident or streamed bases.
    pub(super) fn run_kernel_region(
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
        let kept = resident.as_ref().map_or(ResidentQueries::NONE, |r| r.kept);
        // A set streamed whole or in part: page-locked (once), the shape's
        // chunks planned (once), and the first chunk of the first streamed
        // query copied under the NTTs.
        let mut streamed = match kept {
            ResidentQueries::ALL => None,
            _ => {
                let pinned = timings.time("params pin", || self.pinned_queries(params, kept))?;
                let shape = timings.time("params plan", || self.streamed_shape(pce))?;
                let mut streamer =
                    Streamer::new(g, &self.msm, self.copy_stream()?, params, shape, kept)?;
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
                // Page-locked a/b/c cross the link under the transforms;
                // pageable ones through bounce buffers.
                let upload = |stream: &_, dst: &mut _, src: &[Scalar]| {
                    self.upload_padded_on(stream, dst, src)
                };
                // A third vector where the (limited) card has room for it,
                // as counted in the kernel region's bytes: c's copy then runs
                // under b's transforms rather than after a *= b.
                let h = if self.host_h_vectors(pce) >= 3 {
                    timings.time("h (ntt, a/b/c from host, three vectors)", || {
                        self.ntt
                            .compute_h_three_buffers_with(ha, hb, hc, log2, &copy, &upload)
                    })?
                } else {
                    timings.time("h (ntt, a/b/c from host)", || {
                        self.ntt
                            .compute_h_two_buffers_with(ha, hb, hc, log2, &copy, &upload)
                    })?
                };
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
                    let w = self.upload_witness(pce, input.witness)?;
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
            // Each MSM against its resident bases, or streamed.
            let dens = match &resident {
                Some(_) => Some(self.densities(pce)?),
                None => None,
            };
            let mut st = streamed.as_mut().map(|(st, _)| st);
            let res = resident.as_deref();
            // A G1 query's MSM (its scalars from `offset` when streamed).
            let mut g1 = |timings: &mut StageTimings,
                          q: Query,
                          scalars: &DeviceBuffer<Scalar>,
                          offset: usize| {
                let (resident_stage, streamed_stage) = msm_stages(q);
                match (res.and_then(|r| r.g1(q)), &dens) {
                    (Some(bases), Some(d)) => timings.time(resident_stage, || {
                        self.msm.g1_dense(bases, scalars, d.of(q))
                    }),
                    _ => timings.time(streamed_stage, || {
                        st.as_deref_mut()
                            .ok_or_else(poisoned)?
                            .g1(q, scalars, offset)
                    }),
                }
            };
            let h = g1(timings, Query::H, &a, 0)?;
            clock.mark(g, "msm h")?;
            drop(a);
            let w = witness(timings)?;
            let l = g1(timings, Query::L, &w, pce.num_inputs)?;
            clock.mark(g, "msm l")?;
            let a = g1(timings, Query::A, &w, 0)?;
            clock.mark(g, "msm a")?;
            let b_g1 = g1(timings, Query::BG1, &w, 0)?;
            clock.mark(g, "msm b_g1")?;
            let (resident_stage, streamed_stage) = msm_stages(Query::BG2);
            let b_g2 = match (res.and_then(|r| r.b_g2.as_ref()), &dens) {
                (Some(bases), Some(d)) => timings.time(resident_stage, || {
                    self.msm.g2_dense(bases, &w, d.of(Query::BG2))
                })?,
                _ => timings.time(streamed_stage, || st.ok_or_else(poisoned)?.g2(&w))?,
            };
            clock.mark(g, "msm b_g2")?;
            Ok::<_, Groth16Error>((h, l, a, b_g1, b_g2))
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

/// The stage names of a query's MSM, resident and streamed.
fn msm_stages(q: Query) -> (&'static str, &'static str) {
    match q {
        Query::H => ("msm h", "msm h (streamed)"),
        Query::L => ("msm l", "msm l (streamed)"),
        Query::A => ("msm a", "msm a (streamed)"),
        Query::BG1 => ("msm b_g1", "msm b_g1 (streamed)"),
        Query::BG2 => ("msm b_g2", "msm b_g2 (streamed)"),
    }
}
