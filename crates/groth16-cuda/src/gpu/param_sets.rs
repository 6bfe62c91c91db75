//! Parameter sets on the prover's GPU: resident device copies (with their
//! window multiples where device memory allows) and the page-locked host
//! queries of streamed sets, cached per set and let go once the set is.

use std::sync::{Arc, Weak};

use bellperson::groth16::Parameters;
use blstrs::{G1Affine, G2Affine};
use cuzk_pinned_pool::{Pool, RegisteredShared};
use cuzk_synth::Pce;

#[cfg(doc)]
use super::GpuOptions;
use super::memory::staged_bytes;
use super::{GpuProver, ParamsPlacement, params_device_bytes, poisoned};
use crate::cuda::Gpu;
use crate::msm::{DeviceBases, MsmAffine, multiples_window_bits, windows};
use crate::{Bls12, Result};

/// Parameter bases resident on one GPU, kept while the parameter set lives.
pub(super) struct ResidentParams {
    /// The host set's five queries, held weakly: the host vectors are freed
    /// as soon as their owner (the engine's parameter cache) lets them go,
    /// and a `Weak` keeps its allocation's address from being reused, so the
    /// addresses still identify the set.
    host: WeakQueries,
    /// Device bytes of the five copies.
    pub(super) bytes: u64,
    pub(super) h: DeviceBases<G1Affine>,
    pub(super) l: DeviceBases<G1Affine>,
    pub(super) a: DeviceBases<G1Affine>,
    pub(super) b_g1: DeviceBases<G1Affine>,
    pub(super) b_g2: DeviceBases<G2Affine>,
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
pub(super) struct PinnedQueries {
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

    pub(super) fn pinned_bytes(&self) -> u64 {
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

/// Takes out of `cache` the resident copies whose host set is gone and that
/// no proof holds now (a proof in its kernel region holds its own `Arc`).
pub(super) fn take_orphans(cache: &mut Vec<Arc<ResidentParams>>) -> Vec<Arc<ResidentParams>> {
    let (orphans, kept): (Vec<_>, Vec<_>) = std::mem::take(cache)
        .into_iter()
        .partition(|r| r.orphaned() && Arc::strong_count(r) == 1);
    *cache = kept;
    orphans
}

/// Takes out of `cache` the page-locked sets nobody else holds now.
pub(super) fn take_pinned_orphans(cache: &mut Vec<Arc<PinnedQueries>>) -> Vec<Arc<PinnedQueries>> {
    let (orphans, kept): (Vec<_>, Vec<_>) = std::mem::take(cache)
        .into_iter()
        .partition(|p| p.orphaned() && Arc::strong_count(p) == 1);
    *cache = kept;
    orphans
}

impl GpuProver {
    /// The parameter set's resident copy, uploaded now if needed; `None`
    /// when it is to be streamed (by the options, or because it does not
    /// fit beside two partitions of `pce`).
    pub(super) fn resident(
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
    pub(super) fn pinned_queries(
        &self,
        params: &Parameters<Bls12>,
    ) -> Result<Option<Arc<PinnedQueries>>> {
        if !self.options.pin_streamed {
            return Ok(None);
        }
        let Some(pool) = self.host_pool() else {
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

    /// Drops the device copies of every parameter set no proof is using.
    pub fn evict_params(&self) {
        if let Ok(mut cache) = self.params.lock() {
            cache.retain(|r| Arc::strong_count(r) > 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
