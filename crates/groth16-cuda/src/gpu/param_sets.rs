//! Parameter sets on the prover's GPU: resident device copies (with their
//! window multiples where device memory allows), cached per set and let go
//! once the set is; the page-locked host queries of streamed sets are in
//! `pinned_queries.rs`.

use std::sync::{Arc, Weak};

use bellperson::groth16::Parameters;
use blstrs::{G1Affine, G2Affine};
use cuzk_synth::Pce;

#[cfg(doc)]
use super::GpuOptions;
use super::memory::staged_bytes;
use super::pinned_queries::take_pinned_orphans;
use super::{
    GpuProver, ParamsPlacement, Query, ResidentQueries, params_device_bytes, poisoned,
    queries_device_bytes, query_device_bytes,
};
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
    /// Device bytes of the copies.
    pub(super) bytes: u64,
    /// The queries on the device; the others are streamed in every MSM.
    pub(super) kept: ResidentQueries,
    pub(super) h: Option<DeviceBases<G1Affine>>,
    pub(super) l: Option<DeviceBases<G1Affine>>,
    pub(super) a: Option<DeviceBases<G1Affine>>,
    pub(super) b_g1: Option<DeviceBases<G1Affine>>,
    pub(super) b_g2: Option<DeviceBases<G2Affine>>,
}

/// A parameter set's five queries, held weakly.
pub(super) struct WeakQueries {
    pub(super) h: Weak<Vec<G1Affine>>,
    pub(super) l: Weak<Vec<G1Affine>>,
    pub(super) a: Weak<Vec<G1Affine>>,
    pub(super) b_g1: Weak<Vec<G1Affine>>,
    pub(super) b_g2: Weak<Vec<G2Affine>>,
}

impl WeakQueries {
    /// Whether these are `p`'s queries (by address).
    pub(super) fn is(&self, p: &Parameters<Bls12>) -> bool {
        std::ptr::eq(self.h.as_ptr(), Arc::as_ptr(&p.h))
            && std::ptr::eq(self.l.as_ptr(), Arc::as_ptr(&p.l))
            && std::ptr::eq(self.a.as_ptr(), Arc::as_ptr(&p.a))
            && std::ptr::eq(self.b_g1.as_ptr(), Arc::as_ptr(&p.b_g1))
            && std::ptr::eq(self.b_g2.as_ptr(), Arc::as_ptr(&p.b_g2))
    }

    pub(super) fn of(p: &Parameters<Bls12>) -> Self {
        WeakQueries {
            h: Arc::downgrade(&p.h),
            l: Arc::downgrade(&p.l),
            a: Arc::downgrade(&p.a),
            b_g1: Arc::downgrade(&p.b_g1),
            b_g2: Arc::downgrade(&p.b_g2),
        }
    }
}

impl ResidentParams {
    /// The resident bases of G1 query `q`, if kept (B_G2 has none in G1).
    pub(super) fn g1(&self, q: Query) -> Option<&DeviceBases<G1Affine>> {
        match q {
            Query::H => self.h.as_ref(),
            Query::L => self.l.as_ref(),
            Query::A => self.a.as_ref(),
            Query::BG1 => self.b_g1.as_ref(),
            Query::BG2 => None,
        }
    }

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

/// Device memory a set kept in part leaves free beyond two partitions'
/// needs: the streamed plan and density tables of its shape (a bit per
/// variable and query, tens of MB at 2^27), allocated after the upload.
const PARTIAL_MARGIN: u64 = 256 << 20;

/// The queries [`ParamsPlacement::Auto`] keeps on the device of a set that
/// does not fit whole in `room` bytes: in [`ResidentQueries::AUTO_ORDER`],
/// each non-empty query that fits in what those kept before it left.
fn partial_plan(p: &Parameters<Bls12>, room: u64) -> ResidentQueries {
    more_queries_plan(p, ResidentQueries::NONE, room)
}

/// The queries `kept` (those already on the device) plus, in
/// [`ResidentQueries::AUTO_ORDER`], each other non-empty query that fits in
/// what those added before it left of `room`.
fn more_queries_plan(p: &Parameters<Bls12>, kept: ResidentQueries, room: u64) -> ResidentQueries {
    let mut left = room;
    let mut plan = kept;
    for q in ResidentQueries::AUTO_ORDER {
        let bytes = query_device_bytes(p, q);
        if !kept.has(q) && bytes > 0 && bytes <= left {
            left -= bytes;
            plan = plan.with(q);
        }
    }
    plan
}

/// The window sizes of the multiples a resident set keeps, in the order
/// (h, b_g2, l, a, b_g1), within `room` bytes of device memory: each query
/// of `kept` in that order gets its multiples ([`multiples_window_bits`]
/// of its length) if they fit in what the ones before left, less
/// [`MULTIPLES_MARGIN`].
fn multiples_plan(p: &Parameters<Bls12>, room: u64, kept: ResidentQueries) -> [Option<u32>; 5] {
    let mut left = room.saturating_sub(MULTIPLES_MARGIN);
    let mut plan = [None; 5];
    for (c, (q, len, point)) in plan.iter_mut().zip(multiples_order(p)) {
        if len < 2 || !kept.has(q) {
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

/// (query, bases, bytes per point) of the queries in [`multiples_plan`]'s
/// order: h, b_g2, l, a, b_g1.
fn multiples_order(p: &Parameters<Bls12>) -> [(Query, usize, usize); 5] {
    let (g1, g2) = (size_of::<G1Affine>(), size_of::<G2Affine>());
    [
        (Query::H, p.h.len(), g1),
        (Query::BG2, p.b_g2.len(), g2),
        (Query::L, p.l.len(), g1),
        (Query::A, p.a.len(), g1),
        (Query::BG1, p.b_g1.len(), g1),
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
        .map(|(&(_, len, point), c)| c.map_or(0, |c| multiples_bytes(len, point, c)))
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

/// Whether `p` is new to `seen`, the sets already reported as streamed
/// whole; records it if so. Sets since dropped are forgotten first, so a
/// reloaded set (a new set at perhaps the same addresses) is reported again.
fn first_report(seen: &mut Vec<WeakQueries>, p: &Parameters<Bls12>) -> bool {
    seen.retain(|w| w.h.strong_count() > 0);
    if seen.iter().any(|w| w.is(p)) {
        return false;
    }
    seen.push(WeakQueries::of(p));
    true
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

impl GpuProver {
    /// The parameter set's resident copy (of all its queries, or of those
    /// that fit), uploaded now if needed; `None` when it is to be streamed
    /// whole (by the options, or because no query fits beside two
    /// partitions of `pce`).
    pub(super) fn resident(
        &self,
        params: &Parameters<Bls12>,
        pce: &Pce,
    ) -> Result<Option<Arc<ResidentParams>>> {
        // Page-locked queries of sets dropped since let go first: their
        // registrations hold the streamed queries, and a set kept in part
        // is not seen as dropped while they do.
        drop(take_pinned_orphans(
            &mut *self.pinned.lock().map_err(|_| poisoned())?,
        ));
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
        // Device memory the kernel regions of two partitions need beside
        // the set, asked in a partition's kernel region: its staged buffers
        // are allocated, free memory has lost them already. (The shared
        // scratch, chunk buffers and twiddles may be held already too and
        // are still counted: cautious.)
        let beside = || self.two_partitions_bytes(pce) - staged_bytes(pce);
        if let Some(i) = cache.iter().position(|r| r.is(params)) {
            // A set kept in part under `Auto` takes the queries that fit
            // now (another set's copy freed since, say), when no other
            // kernel region holds it.
            if matches!(self.options.params, ParamsPlacement::Auto)
                && self.stages_on_device(pce)
                && cache[i].kept != ResidentQueries::ALL
                && Arc::strong_count(&cache[i]) == 1
            {
                let (free, _) = self.gpu.mem_info()?;
                let room = free.saturating_sub(beside()).saturating_sub(PARTIAL_MARGIN);
                let plan = more_queries_plan(params, cache[i].kept, room);
                if plan != cache[i].kept {
                    let r = cache.swap_remove(i);
                    let grown = self.keep_more(params, r, plan)?;
                    cache.push(grown.clone());
                    if grown.kept == ResidentQueries::ALL {
                        // Nothing of it streams any more: its host queries
                        // are unlocked (no streamer holds them between
                        // kernel regions). Lock order: params, then pinned.
                        let mut pinned = self.pinned.lock().map_err(|_| poisoned())?;
                        pinned.retain(|p| !(p.is(params) && Arc::strong_count(p) == 1));
                    }
                    return Ok(Some(grown));
                }
            }
            return Ok(Some(cache[i].clone()));
        }
        let need = params_device_bytes(params);
        // The queries kept, and the device memory left for window
        // multiples once they are placed.
        let (kept, room) = match self.options.params {
            ParamsPlacement::Streamed => return Ok(None),
            // Partitions staged in host memory: their device memory is
            // counted with the streamed MSMs' chunks and scratch.
            ParamsPlacement::Auto if !self.stages_on_device(pce) => return Ok(None),
            ParamsPlacement::Auto => {
                let (free, _) = self.gpu.mem_info()?;
                let avail = free.saturating_sub(beside());
                if need <= avail {
                    (ResidentQueries::ALL, avail - need)
                } else {
                    // Kept in part, the set is streamed too: the shape's
                    // streamed plan and density tables, allocated after the
                    // upload and counted nowhere else, need room beside it.
                    let kept = partial_plan(params, avail.saturating_sub(PARTIAL_MARGIN));
                    if kept == ResidentQueries::NONE {
                        // Asked again in every kernel region (room may open
                        // up); said once a set.
                        let first = {
                            let mut seen = self.streamed_whole.lock().map_err(|_| poisoned())?;
                            first_report(&mut seen, params)
                        };
                        if first {
                            tracing::warn!(
                                gpu = self.gpu.ordinal(),
                                need,
                                free,
                                "no query of the parameter set fits beside two partitions in \
                                 device memory: streaming them all from host memory in every \
                                 MSM (slower)"
                            );
                        }
                        return Ok(None);
                    }
                    let bytes = queries_device_bytes(params, kept);
                    tracing::warn!(
                        gpu = self.gpu.ordinal(),
                        need,
                        free,
                        resident = bytes,
                        "the parameter set does not fit whole beside two partitions in device \
                         memory: keeping its queries {kept} resident, streaming the others from \
                         host memory in every MSM (slower)"
                    );
                    (kept, avail - bytes)
                }
            }
            placement @ (ParamsPlacement::Resident | ParamsPlacement::Queries(_)) => {
                let kept = match placement {
                    ParamsPlacement::Queries(kept) => kept,
                    _ => ResidentQueries::ALL,
                };
                if kept == ResidentQueries::NONE {
                    return Ok(None);
                }
                let bytes = queries_device_bytes(params, kept);
                self.gpu.ensure_free(bytes, || {
                    format!("to keep the parameter set's queries {kept} resident ({placement:?})")
                })?;
                let (free, _) = self.gpu.mem_info()?;
                (kept, free.saturating_sub(bytes.saturating_add(beside())))
            }
        };
        let _s = tracing::info_span!("upload_params").entered();
        let c = if self.options.window_multiples {
            multiples_plan(params, room, kept)
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
        fn upload<A: MsmAffine>(
            gpu: &Arc<Gpu>,
            kept: bool,
            bases: &[A],
            c: Option<u32>,
            query: &str,
        ) -> Result<Option<DeviceBases<A>>> {
            kept.then(|| upload_query(gpu, bases, c, query)).transpose()
        }
        let h = upload(gpu, kept.h, &params.h, c[0], "h")?;
        let b_g2 = upload(gpu, kept.b_g2, &params.b_g2, c[1], "b_g2")?;
        let l = upload(gpu, kept.l, &params.l, c[2], "l")?;
        let a = upload(gpu, kept.a, &params.a, c[3], "a")?;
        let b_g1 = upload(gpu, kept.b_g1, &params.b_g1, c[4], "b_g1")?;
        // What the copies take: the queries kept, plus the multiples made.
        let bytes = [&h, &l, &a, &b_g1]
            .iter()
            .filter_map(|q| q.as_ref())
            .map(|q| q.device_bytes())
            .sum::<u64>()
            + b_g2.as_ref().map_or(0, |q| q.device_bytes());
        let r = Arc::new(ResidentParams {
            host: WeakQueries::of(params),
            bytes,
            kept,
            h,
            l,
            a,
            b_g1,
            b_g2,
        });
        cache.push(r.clone());
        Ok(Some(r))
    }

    /// `r` (a set kept in part, held by nobody else) with the queries of
    /// `plan` it lacks uploaded beside those it has (without window
    /// multiples). If an upload fails, the set stays as it was.
    fn keep_more(
        &self,
        params: &Parameters<Bls12>,
        r: Arc<ResidentParams>,
        plan: ResidentQueries,
    ) -> Result<Arc<ResidentParams>> {
        // Held by nobody else (the caller checked under the cache's lock).
        let mut r = match Arc::try_unwrap(r) {
            Ok(r) => r,
            Err(r) => return Ok(r),
        };
        let added = ResidentQueries {
            h: plan.h && !r.kept.h,
            l: plan.l && !r.kept.l,
            a: plan.a && !r.kept.a,
            b_g1: plan.b_g1 && !r.kept.b_g1,
            b_g2: plan.b_g2 && !r.kept.b_g2,
        };
        let _s = tracing::info_span!("upload_params", more = %added).entered();
        let gpu = &self.gpu;
        fn add<A: MsmAffine>(
            gpu: &Arc<Gpu>,
            slot: &mut Option<DeviceBases<A>>,
            bytes: &mut u64,
            add: bool,
            bases: &[A],
        ) -> Result<()> {
            if add && slot.is_none() {
                let d = DeviceBases::upload(gpu, bases)?;
                *bytes += d.device_bytes();
                *slot = Some(d);
            }
            Ok(())
        }
        let mut bytes = r.bytes;
        let outcome = add(gpu, &mut r.h, &mut bytes, added.h, &params.h)
            .and_then(|()| add(gpu, &mut r.l, &mut bytes, added.l, &params.l))
            .and_then(|()| add(gpu, &mut r.a, &mut bytes, added.a, &params.a))
            .and_then(|()| add(gpu, &mut r.b_g1, &mut bytes, added.b_g1, &params.b_g1))
            .and_then(|()| add(gpu, &mut r.b_g2, &mut bytes, added.b_g2, &params.b_g2));
        // What was uploaded stays counted, whether or not all of it came.
        r.bytes = bytes;
        r.kept = ResidentQueries {
            h: r.h.is_some(),
            l: r.l.is_some(),
            a: r.a.is_some(),
            b_g1: r.b_g1.is_some(),
            b_g2: r.b_g2.is_some(),
        };
        match outcome {
            Ok(()) => tracing::info!(
                gpu = gpu.ordinal(),
                bytes,
                kept = %r.kept,
                "room opened up on the device: the parameter set kept in part now keeps its \
                 queries {}",
                r.kept
            ),
            Err(e) => tracing::warn!(
                gpu = gpu.ordinal(),
                kept = %r.kept,
                "keeping more queries of the parameter set failed, they stay streamed: {e}"
            ),
        }
        Ok(Arc::new(r))
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
    fn a_set_kept_in_part_adds_the_queries_that_fit_in_order() {
        use cuzk_synth::circuits::CircuitSpec;
        let spec: CircuitSpec = "porep:10".parse().unwrap();
        let pce = Pce::record(spec.build(0)).unwrap();
        let p = crate::fake::fake_params(&pce, 1);
        let size = |q| query_device_bytes(&p, q);
        let a = ResidentQueries::NONE.with(Query::A);
        // No room: as it was.
        assert_eq!(more_queries_plan(&p, a, 0), a);
        // Room for L (next in AUTO_ORDER): A and L.
        assert_eq!(more_queries_plan(&p, a, size(Query::L)), a.with(Query::L));
        // A and L kept, room for H alone: H added.
        let l_and_a = a.with(Query::L);
        assert_eq!(
            more_queries_plan(&p, l_and_a, size(Query::H)),
            l_and_a.with(Query::H)
        );
        // Room for all: all; a set whole stays whole.
        let all: u64 = Query::ALL.iter().map(|&q| size(q)).sum();
        assert_eq!(more_queries_plan(&p, a, all), ResidentQueries::ALL);
        assert_eq!(
            more_queries_plan(&p, ResidentQueries::ALL, all),
            ResidentQueries::ALL
        );
    }

    #[test]
    fn window_multiples_go_to_the_queries_in_order_while_they_fit() {
        use cuzk_synth::circuits::CircuitSpec;
        let spec: CircuitSpec = "porep:12".parse().unwrap();
        let pce = Pce::record(spec.build(0)).unwrap();
        let p = crate::fake::fake_params(&pce, 1);
        let order = multiples_order(&p);
        let every = ResidentQueries::ALL;
        let bytes: Vec<u64> = order
            .iter()
            .map(|&(_, len, point)| multiples_bytes(len, point, multiples_window_bits(len)))
            .collect();
        // No room (or only the margin): none.
        assert_eq!(multiples_plan(&p, 0, every), [None; 5]);
        assert_eq!(multiples_plan(&p, MULTIPLES_MARGIN, every), [None; 5]);
        // Room for H's alone: H's only, with its window.
        let h = multiples_plan(&p, MULTIPLES_MARGIN + bytes[0], every);
        assert_eq!(h[0], Some(multiples_window_bits(p.h.len())));
        assert_eq!(h[1..], [None; 4]);
        assert_eq!(multiples_extra_bytes(&p, &h), bytes[0]);
        // Room for all: every query's, and the bytes add up.
        let all = multiples_plan(&p, MULTIPLES_MARGIN + bytes.iter().sum::<u64>(), every);
        assert!(all.iter().all(Option::is_some), "{all:?}");
        assert_eq!(multiples_extra_bytes(&p, &all), bytes.iter().sum::<u64>());
        // H's and B_G2's do not fit, L's does: a later query may still fit.
        let later = multiples_plan(&p, MULTIPLES_MARGIN + bytes[2], every);
        assert_eq!(later[0], None);
        assert!(later[2].is_some(), "{later:?}");
        // Only the queries kept get multiples: with H streamed, room for
        // H's goes to the next ones that fit.
        let no_h = ResidentQueries {
            h: false,
            ..ResidentQueries::ALL
        };
        let skip = multiples_plan(&p, MULTIPLES_MARGIN + bytes[0], no_h);
        assert_eq!(skip[0], None);
        assert!(skip[1..].iter().any(Option::is_some), "{skip:?}");
        assert_eq!(
            multiples_plan(&p, u64::MAX, ResidentQueries::NONE),
            [None; 5]
        );
        // Each query's multiples are windows(c) - 1 copies of it.
        let c = multiples_window_bits(p.h.len());
        assert_eq!(
            bytes[0],
            u64::from(windows(c) - 1) * (p.h.len() * size_of::<G1Affine>()) as u64
        );
    }

    #[test]
    fn a_set_that_does_not_fit_keeps_the_queries_that_do_in_the_auto_order() {
        use cuzk_synth::circuits::CircuitSpec;
        let spec: CircuitSpec = "porep:12".parse().unwrap();
        let pce = Pce::record(spec.build(0)).unwrap();
        let p = crate::fake::fake_params(&pce, 1);
        let bytes = |q| query_device_bytes(&p, q);
        let [a, l, h, b_g2, b_g1] = ResidentQueries::AUTO_ORDER.map(bytes);
        assert!(a > 0 && l > 0 && h > 0 && b_g2 > 0 && b_g1 > 0);
        // The five add up to the whole set.
        assert_eq!(a + l + h + b_g2 + b_g1, params_device_bytes(&p));
        assert_eq!(
            queries_device_bytes(&p, ResidentQueries::ALL),
            params_device_bytes(&p)
        );
        // Nothing fits: nothing kept; everything fits: everything.
        assert_eq!(partial_plan(&p, 0), ResidentQueries::NONE);
        let least = a.min(l).min(h).min(b_g2).min(b_g1);
        assert_eq!(partial_plan(&p, least - 1), ResidentQueries::NONE);
        assert_eq!(
            partial_plan(&p, params_device_bytes(&p)),
            ResidentQueries::ALL
        );
        // A, then L: a prefix of the order while it fits.
        let only_a = ResidentQueries::NONE.with(Query::A);
        assert_eq!(partial_plan(&p, a), only_a);
        assert_eq!(partial_plan(&p, a + l), only_a.with(Query::L));
        // A query that does not fit is passed over for a later one that
        // does: room for A, L and B_G1 but not H or B_G2.
        let smaller = h.min(b_g2);
        assert!(b_g1 < smaller, "B_G1 {b_g1} bytes, H {h}, B_G2 {b_g2}");
        let kept = partial_plan(&p, a + l + b_g1);
        assert_eq!(kept, only_a.with(Query::L).with(Query::BG1));
        assert_eq!(queries_device_bytes(&p, kept), a + l + b_g1);
        // What is kept never exceeds the room.
        for room in [a, a + l, a + l + h, a + l + h + b_g2 - 1, a + b_g2 + h] {
            let kept = partial_plan(&p, room);
            assert!(queries_device_bytes(&p, kept) <= room, "{kept} in {room}");
        }
    }

    #[test]
    fn a_set_streamed_whole_is_reported_once_while_it_lives() {
        use cuzk_synth::circuits::CircuitSpec;
        let spec: CircuitSpec = "porep:12".parse().unwrap();
        let pce = Pce::record(spec.build(0)).unwrap();
        let p = crate::fake::fake_params(&pce, 1);
        let q = crate::fake::fake_params(&pce, 2);
        let mut seen = Vec::new();
        assert!(first_report(&mut seen, &p));
        assert!(!first_report(&mut seen, &p));
        assert!(first_report(&mut seen, &q), "another set is reported too");
        assert!(!first_report(&mut seen, &q));
        // Dropped, its record goes; a set loaded again is reported again.
        drop(p);
        let again = crate::fake::fake_params(&pce, 1);
        assert!(first_report(&mut seen, &again));
        assert_eq!(seen.len(), 2, "the dropped set's record is gone");
    }

    #[test]
    fn resident_queries_are_named_and_parsed() {
        let q: ResidentQueries = "a, l,b_g2".parse().unwrap();
        assert_eq!(
            q,
            ResidentQueries::NONE
                .with(Query::A)
                .with(Query::L)
                .with(Query::BG2)
        );
        assert_eq!(q.to_string(), "l,a,b_g2");
        assert_eq!(q.count(), 3);
        assert_eq!("all".parse::<ResidentQueries>(), Ok(ResidentQueries::ALL));
        assert_eq!(ResidentQueries::ALL.to_string(), "h,l,a,b_g1,b_g2");
        assert_eq!("none".parse::<ResidentQueries>(), Ok(ResidentQueries::NONE));
        assert_eq!(ResidentQueries::NONE.to_string(), "none");
        let e = "a,c".parse::<ResidentQueries>().unwrap_err();
        assert!(e.contains("unknown query \"c\""), "{e}");
        for q in Query::ALL {
            assert_eq!(
                q.name().parse::<ResidentQueries>(),
                Ok(ResidentQueries::NONE.with(q))
            );
        }
    }
}
