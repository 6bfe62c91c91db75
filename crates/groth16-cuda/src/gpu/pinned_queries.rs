//! The page-locked host queries of parameter sets streamed whole or in
//! part ([`PinnedQueries`]): each streamed query registered with the driver
//! the first time it streams, cached per set, let go once the set is.

use std::sync::{Arc, OnceLock, Weak};

use bellperson::groth16::Parameters;
use blstrs::{G1Affine, G2Affine};
use cuzk_pinned_pool::{Pool, RegisteredShared};

#[cfg(doc)]
use super::GpuOptions;
use super::param_sets::WeakQueries;
use super::{GpuProver, Query, ResidentQueries, poisoned};
use crate::{Bls12, Result};

/// A streamed parameter set's host queries, page-locked for as long as the
/// set lives: each query streamed in some kernel region registered with the
/// driver once, when first streamed (`Some(None)` where the driver refused:
/// that query streams from pageable memory); the queries kept on the device
/// are left pageable, since only streamed ones cross the link per proof.
pub(super) struct PinnedQueries {
    host: WeakQueries,
    h: OnceLock<Option<RegisteredShared<G1Affine>>>,
    l: OnceLock<Option<RegisteredShared<G1Affine>>>,
    a: OnceLock<Option<RegisteredShared<G1Affine>>>,
    b_g1: OnceLock<Option<RegisteredShared<G1Affine>>>,
    b_g2: OnceLock<Option<RegisteredShared<G2Affine>>>,
}

/// Whether `slot` holds a registration of its query.
fn registered<T>(slot: &OnceLock<Option<RegisteredShared<T>>>) -> Option<&RegisteredShared<T>> {
    slot.get().and_then(Option::as_ref)
}

impl PinnedQueries {
    /// An entry for `p` with no query registered yet.
    fn new(p: &Parameters<Bls12>) -> Self {
        PinnedQueries {
            host: WeakQueries::of(p),
            h: OnceLock::new(),
            l: OnceLock::new(),
            a: OnceLock::new(),
            b_g1: OnceLock::new(),
            b_g2: OnceLock::new(),
        }
    }

    pub(super) fn is(&self, p: &Parameters<Bls12>) -> bool {
        self.host.is(p)
    }

    /// Registers every query of `p` (this entry's set) that `kept` leaves
    /// to be streamed and is not registered yet; returns the bytes this
    /// call page-locked. A query the driver refuses is not asked again.
    fn pin_streamed(&self, pool: &Pool, p: &Parameters<Bls12>, kept: ResidentQueries) -> u64 {
        fn pin<T>(
            slot: &OnceLock<Option<RegisteredShared<T>>>,
            pool: &Pool,
            data: &Arc<Vec<T>>,
            what: &str,
        ) -> u64 {
            let mut bytes = 0;
            slot.get_or_init(|| match pool.register_shared(Arc::clone(data)) {
                Ok(r) => {
                    bytes = if r.is_pinned() {
                        size_of_val(&*r) as u64
                    } else {
                        0
                    };
                    Some(r)
                }
                Err(e) => {
                    tracing::warn!(
                        "page-locking the {what} query failed, it streams from pageable memory: {e}"
                    );
                    None
                }
            });
            bytes
        }
        let mut bytes = 0;
        if !kept.has(Query::H) {
            bytes += pin(&self.h, pool, &p.h, "h");
        }
        if !kept.has(Query::L) {
            bytes += pin(&self.l, pool, &p.l, "l");
        }
        if !kept.has(Query::A) {
            bytes += pin(&self.a, pool, &p.a, "a");
        }
        if !kept.has(Query::BG1) {
            bytes += pin(&self.b_g1, pool, &p.b_g1, "b_g1");
        }
        if !kept.has(Query::BG2) {
            bytes += pin(&self.b_g2, pool, &p.b_g2, "b_g2");
        }
        bytes
    }

    /// The queries registered so far.
    fn registered(&self) -> ResidentQueries {
        let mut q = ResidentQueries::NONE;
        for (query, has) in [
            (Query::H, registered(&self.h).is_some()),
            (Query::L, registered(&self.l).is_some()),
            (Query::A, registered(&self.a).is_some()),
            (Query::BG1, registered(&self.b_g1).is_some()),
            (Query::BG2, registered(&self.b_g2).is_some()),
        ] {
            if has {
                q = q.with(query);
            }
        }
        q
    }

    /// Whether nobody but these registrations holds any of the queries
    /// (the set was evicted or dropped): then they are let go.
    fn orphaned(&self) -> bool {
        fn others<T>(w: &Weak<Vec<T>>, slot: &OnceLock<Option<RegisteredShared<T>>>) -> usize {
            w.strong_count()
                .saturating_sub(usize::from(registered(slot).is_some()))
        }
        let w = &self.host;
        others(&w.h, &self.h) == 0
            && others(&w.l, &self.l) == 0
            && others(&w.a, &self.a) == 0
            && others(&w.b_g1, &self.b_g1) == 0
            && others(&w.b_g2, &self.b_g2) == 0
    }

    pub(super) fn pinned_bytes(&self) -> u64 {
        fn bytes<T>(slot: &OnceLock<Option<RegisteredShared<T>>>) -> u64 {
            registered(slot)
                .filter(|r| r.is_pinned())
                .map_or(0, |r| size_of_val(&**r) as u64)
        }
        bytes(&self.h) + bytes(&self.l) + bytes(&self.a) + bytes(&self.b_g1) + bytes(&self.b_g2)
    }
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
    /// The page-locked host queries of a set whose queries outside `kept`
    /// stream in this kernel region: those queries registered with the
    /// driver now if needed (once per set, cached while it lives), the kept
    /// ones left pageable; `None` when pinning is off
    /// ([`GpuOptions::pin_streamed`]) or there is no pinned pool.
    /// Registrations of sets nobody else holds any more are undone first.
    pub(super) fn pinned_queries(
        &self,
        params: &Parameters<Bls12>,
        kept: ResidentQueries,
    ) -> Result<Option<Arc<PinnedQueries>>> {
        if !self.options.pin_streamed {
            return Ok(None);
        }
        let Some(pool) = self.host_pool() else {
            return Ok(None);
        };
        let mut cache = self.pinned.lock().map_err(|_| poisoned())?;
        drop(take_pinned_orphans(&mut cache));
        let p = match cache.iter().find(|p| p.is(params)) {
            Some(p) => p.clone(),
            None => {
                let p = Arc::new(PinnedQueries::new(params));
                cache.push(p.clone());
                p
            }
        };
        let _s = tracing::info_span!("pin_params").entered();
        let start = std::time::Instant::now();
        let bytes = p.pin_streamed(pool, params, kept);
        if bytes > 0 {
            tracing::info!(
                gpu = self.gpu.ordinal(),
                bytes,
                total = p.pinned_bytes(),
                queries = %p.registered(),
                seconds = start.elapsed().as_secs_f64(),
                "page-locked the streamed queries of a parameter set"
            );
        }
        Ok(Some(p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cuzk_synth::Pce;

    #[test]
    fn only_streamed_queries_are_registered_and_more_as_more_stream() {
        use cuzk_pinned_pool::PoolConfig;
        use cuzk_synth::circuits::CircuitSpec;
        let spec: CircuitSpec = "porep:10".parse().unwrap();
        let pce = Pce::record(spec.build(0)).unwrap();
        let p = crate::fake::fake_params(&pce, 1);
        // The fallback pool registers without page-locking: what is asked
        // for is recorded all the same.
        let pool = Pool::fallback(PoolConfig::unbounded());
        let entry = PinnedQueries::new(&p);
        assert!(entry.is(&p));
        assert_eq!(entry.registered(), ResidentQueries::NONE);
        // H and A kept on the device: only L, B_G1 and B_G2 registered.
        let kept = ResidentQueries::NONE.with(Query::H).with(Query::A);
        assert_eq!(entry.pin_streamed(&pool, &p, kept), 0);
        let streamed = ResidentQueries::NONE
            .with(Query::L)
            .with(Query::BG1)
            .with(Query::BG2);
        assert_eq!(entry.registered(), streamed);
        let l = registered(&entry.l).map(|r| r as *const RegisteredShared<G1Affine>);
        // The same placement again registers nothing new.
        entry.pin_streamed(&pool, &p, kept);
        assert_eq!(entry.registered(), streamed);
        // Streamed whole later (the set no longer fits): H and A added, the
        // registrations made before kept as they are.
        entry.pin_streamed(&pool, &p, ResidentQueries::NONE);
        assert_eq!(entry.registered(), ResidentQueries::ALL);
        assert_eq!(
            registered(&entry.l).map(|r| r as *const RegisteredShared<G1Affine>),
            l
        );
        assert_eq!(entry.pinned_bytes(), 0, "the fallback pool locks nothing");
        // The registrations alone do not keep the set: once its owner lets
        // it go, the entry is an orphan.
        assert!(!entry.orphaned());
        drop(p);
        assert!(entry.orphaned());
    }
}
