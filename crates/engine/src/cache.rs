//! The PCE cache (recorded matrices per circuit shape) and the parameter
//! manager (each parameter set loaded once, shared by every job that uses
//! it). Both hold their entries' budget charges; an entry is *idle* when no
//! job holds it, and idle entries are evicted least recently used first when
//! memory is needed, or on request.

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use bellperson::groth16::Parameters;
use blstrs::{G1Affine, G2Affine};
use cuzk_groth16_cuda::Bls12;
use cuzk_pinned_pool::Pool;
use cuzk_synth::Pce;

use crate::budget::{Charge, Reclaim};

/// Names a circuit shape: every partition of every job with this id must
/// have the same R1CS. Change the id when the circuit changes (it also names
/// the on-disk PCE).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShapeId(pub String);

impl fmt::Display for ShapeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for ShapeId {
    fn from(s: &str) -> Self {
        ShapeId(s.to_owned())
    }
}

impl From<String> for ShapeId {
    fn from(s: String) -> Self {
        ShapeId(s)
    }
}

/// Which parameter set a job uses.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ParamsRef {
    /// A file in bellperson's format, loaded on first use (charged by its
    /// size), kept resident while memory allows and reloaded if evicted.
    File(PathBuf),
    /// A set registered under a key: handed over with
    /// `Engine::register_params` (never evicted under pressure, since it
    /// could not be reloaded; only on request), or made by the loader given
    /// to `Engine::register_params_loader` (loaded on first use, evicted
    /// like a file's and made again by the loader).
    Key(String),
}

impl fmt::Display for ParamsRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamsRef::File(p) => write!(f, "{}", p.display()),
            ParamsRef::Key(k) => write!(f, "`{k}`"),
        }
    }
}

impl From<PathBuf> for ParamsRef {
    fn from(p: PathBuf) -> Self {
        ParamsRef::File(p)
    }
}

impl From<&std::path::Path> for ParamsRef {
    fn from(p: &std::path::Path) -> Self {
        ParamsRef::File(p.to_owned())
    }
}

/// Host bytes of a parameter set in memory.
pub fn params_bytes(p: &Parameters<Bls12>) -> u64 {
    let g1 = size_of::<G1Affine>() as u64;
    let g2 = size_of::<G2Affine>() as u64;
    let g1_points = p.h.len() + p.l.len() + p.a.len() + p.b_g1.len() + p.vk.ic.len() + 3;
    let g2_points = p.b_g2.len() + 3;
    g1_points as u64 * g1 + g2_points as u64 * g2
}

struct Entry<T> {
    value: Arc<T>,
    charge: Charge,
    last_used: u64,
    evictable: bool,
}

/// A cache of shared values with budget charges, evicting idle entries
/// least recently used first.
pub(crate) struct Cache<K, T> {
    entries: Mutex<HashMap<K, Entry<T>>>,
    tick: AtomicU64,
    /// Values replaced by lighter ones ([`Cache::replace_lighter`]), held
    /// weakly (freed with their last holder), each with the part of its
    /// charge the lighter value does not need: released by the first
    /// [`Cache::sweep`] after that.
    retired: Mutex<Vec<(Weak<T>, Charge)>>,
}

impl<K: std::hash::Hash + Eq + Clone, T> Cache<K, T> {
    pub(crate) fn new() -> Self {
        Cache {
            entries: Mutex::new(HashMap::new()),
            tick: AtomicU64::new(0),
            retired: Mutex::new(Vec::new()),
        }
    }

    fn retired(&self) -> MutexGuard<'_, Vec<(Weak<T>, Charge)>> {
        self.retired.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Puts `new` in `key`'s place if its value is still `old`, keeping
    /// `keep` bytes of the entry's charge for it. The rest of the charge
    /// stays until `old`'s last holder has dropped it (the cache keeps it
    /// only weakly) and a [`Cache::sweep`] sees that, so the budget counts
    /// the memory until it is free. Returns whether the value was replaced.
    pub(crate) fn replace_lighter(&self, key: &K, old: &Arc<T>, new: Arc<T>, keep: u64) -> bool {
        let retired = {
            let mut entries = self.lock();
            let Some(e) = entries.get_mut(key) else {
                return false;
            };
            if !Arc::ptr_eq(&e.value, old) {
                return false;
            }
            let kind = e.charge.kind();
            let rest = e.charge.bytes().saturating_sub(keep);
            let freed = e.charge.split(rest, kind);
            (std::mem::replace(&mut e.value, new), freed)
        };
        let (value, charge) = retired;
        self.retired().push((Arc::downgrade(&value), charge));
        // The cache's hold goes now (a large free when it was the last).
        drop(value);
        self.sweep();
        true
    }

    /// Releases the charges of replaced values nobody holds any more
    /// (their memory is free already); returns their bytes. Cheap: called
    /// on every lookup.
    pub(crate) fn sweep(&self) -> u64 {
        let gone: Vec<(Weak<T>, Charge)> = {
            let mut retired = self.retired();
            if retired.is_empty() {
                return 0;
            }
            let (gone, kept) = std::mem::take(&mut *retired)
                .into_iter()
                .partition(|(v, _)| v.strong_count() == 0);
            *retired = kept;
            gone
        };
        let bytes = gone.iter().map(|(_, c)| c.bytes()).sum();
        // Dropped outside the lock: charges take the budget's lock (and
        // wake its waiters).
        drop(gone);
        bytes
    }

    /// Bytes still charged to replaced values someone holds.
    #[cfg(test)]
    pub(crate) fn retired_bytes(&self) -> u64 {
        self.retired().iter().map(|(_, c)| c.bytes()).sum()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<K, Entry<T>>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn tick(&self) -> u64 {
        self.tick.fetch_add(1, Ordering::Relaxed)
    }

    /// The value, now held by the caller (so not idle until dropped).
    pub(crate) fn get(&self, key: &K) -> Option<Arc<T>> {
        self.sweep();
        let tick = self.tick();
        let mut entries = self.lock();
        let e = entries.get_mut(key)?;
        e.last_used = tick;
        Some(Arc::clone(&e.value))
    }

    /// Whether `key` is cached.
    pub(crate) fn contains(&self, key: &K) -> bool {
        self.lock().contains_key(key)
    }

    /// Adds `value` with its charge (replacing any entry of the same key)
    /// and returns it.
    pub(crate) fn insert(&self, key: K, value: Arc<T>, charge: Charge, evictable: bool) -> Arc<T> {
        let tick = self.tick();
        let old = self.lock().insert(
            key,
            Entry {
                value: Arc::clone(&value),
                charge,
                last_used: tick,
                evictable,
            },
        );
        drop(old);
        value
    }

    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    /// Each entry as (name, charged bytes, holders other than the cache).
    pub(crate) fn entries(&self, name: impl Fn(&K) -> String) -> Vec<(String, u64, usize)> {
        self.lock()
            .iter()
            .map(|(k, e)| (name(k), e.charge.bytes(), Arc::strong_count(&e.value) - 1))
            .collect()
    }

    /// Whether `key` is cached and may be evicted when idle (a parameter
    /// set registered by value may not: it could not be reloaded).
    pub(crate) fn evictable(&self, key: &K) -> bool {
        self.lock().get(key).is_some_and(|e| e.evictable)
    }

    /// The bytes [`Cache::evict_idle`] could free now: idle evictable
    /// entries' charges.
    pub(crate) fn idle_bytes(&self) -> u64 {
        let retired: u64 = self
            .retired()
            .iter()
            .filter(|(v, _)| v.strong_count() == 0)
            .map(|(_, c)| c.bytes())
            .sum();
        retired
            + self
                .lock()
                .values()
                .filter(|e| e.evictable && Arc::strong_count(&e.value) == 1)
                .map(|e| e.charge.bytes())
                .sum::<u64>()
    }

    /// Evicts idle evictable entries, least recently used first, until at
    /// least `need` bytes are freed; returns the bytes freed.
    pub(crate) fn evict_idle(&self, need: u64) -> u64 {
        self.evict_idle_with(need, |_, _, _| {})
    }

    /// [`Cache::evict_idle`], calling `each` with every entry evicted, its
    /// charged bytes and when its drop began (after the drop).
    pub(crate) fn evict_idle_with(
        &self,
        need: u64,
        mut each: impl FnMut(&K, u64, std::time::Instant),
    ) -> u64 {
        // Charges of replaced values nobody holds are free already.
        let swept = self.sweep();
        let need = need.saturating_sub(swept);
        let victims = {
            let mut entries = self.lock();
            let mut idle: Vec<(u64, K)> = entries
                .iter()
                .filter(|(_, e)| e.evictable && Arc::strong_count(&e.value) == 1)
                .map(|(k, e)| (e.last_used, k.clone()))
                .collect();
            idle.sort_unstable_by_key(|(t, _)| *t);
            let mut freed = 0;
            let mut victims = Vec::new();
            for (_, key) in idle {
                if freed >= need {
                    break;
                }
                if let Some(e) = entries.remove(&key) {
                    freed += e.charge.bytes();
                    victims.push((key, e));
                }
            }
            victims
        };
        // Dropped outside the lock: large frees, and charges take the
        // budget's lock.
        let mut freed = swept;
        for (key, entry) in victims {
            let bytes = entry.charge.bytes();
            let start = std::time::Instant::now();
            drop(entry);
            freed += bytes;
            each(&key, bytes, start);
        }
        freed
    }

    /// Removes `key` if no job holds it: `Ok(true)` if removed, `Ok(false)`
    /// if absent, `Err(users)` if in use.
    pub(crate) fn remove_if_idle(&self, key: &K) -> Result<bool, usize> {
        let removed = {
            let mut entries = self.lock();
            match entries.get(key) {
                None => return Ok(false),
                Some(e) if Arc::strong_count(&e.value) > 1 => {
                    return Err(Arc::strong_count(&e.value) - 1);
                }
                Some(_) => entries.remove(key),
            }
        };
        drop(removed);
        Ok(true)
    }
}

/// Frees memory for the budget: idle pinned buffers first (cheapest to get
/// back), then idle PCEs (re-recorded or reloaded from disk), then idle
/// parameters (reloaded from their file or loader).
pub(crate) struct Reclaimer {
    pub(crate) pool: Pool,
    pub(crate) pces: Arc<Cache<ShapeId, Pce>>,
    pub(crate) params: Arc<Cache<ParamsRef, Parameters<Bls12>>>,
    /// Told of every PCE and parameter set evicted (the engine records and
    /// counts them); set once, after the engine's state exists.
    pub(crate) on_evict: std::sync::OnceLock<EvictHook>,
}

/// What [`Reclaimer`] evicted: its name, bytes, and when its drop began.
pub(crate) enum Evicted<'a> {
    Pce(&'a ShapeId),
    Params(&'a ParamsRef),
}

/// Called with each entry the reclaimer evicts.
pub(crate) type EvictHook = Box<dyn Fn(Evicted<'_>, u64, std::time::Instant) + Send + Sync>;

impl Reclaim for Reclaimer {
    fn uncharged_idle_bytes(&self) -> u64 {
        self.pool.stats().bytes_idle as u64
    }

    fn reclaim(&self, need: u64) -> u64 {
        // All or nothing: freeing less than `need` makes no charge fit, and
        // an evicted parameter set costs a reload (tens of seconds at
        // 32 GiB), so nothing goes until everything idle covers the need
        // (e.g. once every job yielding to a waiting admission has parked).
        let idle =
            self.pool.stats().bytes_idle as u64 + self.pces.idle_bytes() + self.params.idle_bytes();
        if idle < need {
            tracing::debug!(
                need,
                idle,
                "too little idle memory to reclaim for the budget"
            );
            return 0;
        }
        // The oldest idle buffers first, only as many as needed.
        let held = self.pool.stats().bytes_held;
        let target = held.saturating_sub(usize::try_from(need).unwrap_or(usize::MAX));
        let mut freed = self.pool.trim_to(target) as u64;
        let hook = self.on_evict.get();
        if freed < need {
            freed += self.pces.evict_idle_with(need - freed, |k, bytes, at| {
                if let Some(f) = hook {
                    f(Evicted::Pce(k), bytes, at);
                }
            });
        }
        if freed < need {
            freed += self.params.evict_idle_with(need - freed, |k, bytes, at| {
                if let Some(f) = hook {
                    f(Evicted::Params(k), bytes, at);
                }
            });
        }
        if freed > 0 {
            tracing::debug!(need, freed, "memory reclaimed for the budget");
        }
        freed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::{ChargeKind, MemoryBudget};

    #[test]
    fn idle_entries_are_evicted_lru_and_held_ones_never() {
        let budget = MemoryBudget::new(1000);
        let cache: Cache<&str, u32> = Cache::new();
        let charge = |n| budget.try_charge(n, ChargeKind::Pce).unwrap().unwrap();
        cache.insert("a", Arc::new(1), charge(100), true);
        cache.insert("b", Arc::new(2), charge(100), true);
        cache.insert("pinned", Arc::new(3), charge(100), false);
        let held = cache.get(&"a").unwrap();
        // "b" is the only idle evictable entry.
        assert_eq!(cache.evict_idle(1000), 100);
        assert!(!cache.contains(&"b"));
        assert_eq!(budget.charged(), 200);
        assert_eq!(cache.remove_if_idle(&"a"), Err(1));
        drop(held);
        cache.insert("c", Arc::new(4), charge(50), true);
        // "a" was used before "c": it goes first, and that is enough.
        assert_eq!(cache.evict_idle(10), 100);
        assert!(cache.contains(&"c"));
        assert_eq!(cache.remove_if_idle(&"pinned"), Ok(true));
        assert_eq!(cache.remove_if_idle(&"pinned"), Ok(false));
        assert_eq!((cache.len(), budget.charged()), (1, 50));
    }

    #[test]
    fn a_lighter_value_keeps_part_of_the_charge_and_the_rest_goes_with_the_last_holder() {
        let budget = MemoryBudget::new(1000);
        let cache: Cache<&str, u32> = Cache::new();
        let charge = budget.try_charge(600, ChargeKind::Pce).unwrap().unwrap();
        let full = cache.insert("shape", Arc::new(1), charge, true);
        let light = Arc::new(2);
        // Only in place of the value it was asked to replace.
        assert!(!cache.replace_lighter(&"shape", &Arc::new(1), Arc::clone(&light), 100));
        assert!(!cache.replace_lighter(&"absent", &full, Arc::clone(&light), 100));
        assert!(cache.replace_lighter(&"shape", &full, Arc::clone(&light), 100));
        assert!(Arc::ptr_eq(&cache.get(&"shape").unwrap(), &light));
        // A partition still holds the whole value: all 600 bytes charged,
        // and nothing of it is idle.
        assert_eq!((budget.charged(), cache.retired_bytes()), (600, 500));
        assert_eq!(cache.sweep(), 0);
        drop(light);
        assert_eq!(
            cache.idle_bytes(),
            100,
            "the lighter entry is idle, the whole value held"
        );
        drop(full);
        assert_eq!(
            cache.idle_bytes(),
            600,
            "the retired 500 and the idle entry's 100"
        );
        assert_eq!(
            cache.evict_idle(1),
            500,
            "sweeping frees enough: the entry stays"
        );
        assert!(cache.contains(&"shape"));
        assert_eq!((budget.charged(), cache.retired_bytes()), (100, 0));
    }

    #[test]
    fn idle_bytes_count_idle_evictable_entries_only() {
        let budget = MemoryBudget::new(1000);
        let cache: Cache<&str, u32> = Cache::new();
        let charge = |n| budget.try_charge(n, ChargeKind::Params).unwrap().unwrap();
        cache.insert("idle", Arc::new(1), charge(100), true);
        cache.insert("held", Arc::new(2), charge(200), true);
        cache.insert("by value", Arc::new(3), charge(300), false);
        let held = cache.get(&"held").unwrap();
        assert_eq!(cache.idle_bytes(), 100);
        assert!(cache.evictable(&"idle") && cache.evictable(&"held"));
        assert!(!cache.evictable(&"by value") && !cache.evictable(&"absent"));
        drop(held);
        assert_eq!(cache.idle_bytes(), 300);
        // What idle_bytes counts is what evict_idle can free.
        assert_eq!(cache.evict_idle(u64::MAX), 300);
        assert_eq!((cache.idle_bytes(), budget.charged()), (0, 300));
    }

    #[test]
    fn each_eviction_is_reported_with_its_bytes_and_a_held_entry_never() {
        let budget = MemoryBudget::new(1000);
        let cache: Cache<&str, u32> = Cache::new();
        let charge = |n| budget.try_charge(n, ChargeKind::Params).unwrap().unwrap();
        cache.insert("old", Arc::new(1), charge(300), true);
        cache.insert("held", Arc::new(2), charge(200), true);
        cache.insert("new", Arc::new(3), charge(100), true);
        let held = cache.get(&"held").unwrap();
        let mut seen = Vec::new();
        let freed = cache.evict_idle_with(u64::MAX, |k, bytes, _| seen.push((*k, bytes)));
        assert_eq!(freed, 400);
        assert_eq!(seen, [("old", 300), ("new", 100)]);
        assert!(cache.contains(&"held"));
        assert_eq!(budget.charged(), 200);
        drop(held);
        assert_eq!(cache.evict_idle_with(1, |_, _, _| {}), 200);
    }
}
