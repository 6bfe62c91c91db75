//! The pool: size-classed idle buffers, a capacity, waiting, stats.

use std::{
    collections::BTreeMap,
    fmt,
    ptr::NonNull,
    sync::{
        Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use crate::{
    PinnedError, Registered, RegisteredShared, Result,
    backend::{Backend, CudaHost},
    class::size_class,
    lease::Lease,
};

/// How the CPU will touch a buffer; buffers of the two kinds are never mixed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum CpuAccess {
    /// The CPU writes and reads the buffer (device-to-host results, a/b/c
    /// that the CPU checks): plain cached page-locked memory.
    #[default]
    ReadWrite,
    /// The CPU only writes the buffer, sequentially, and the GPU reads it
    /// (host-to-device staging): write-combined page-locked memory, which
    /// some systems copy across the link faster, but which is uncached, so
    /// CPU reads of it are very slow (still sound, just slow). On the H200
    /// machine (PCIe gen5 x16) it was no faster than `ReadWrite`: 55.2 vs
    /// 55.3 GB/s host-to-device at 1 GiB
    /// (bench-data/pinned/2026-11-29-be8b6d6-pool.json), so prefer
    /// `ReadWrite` unless a measurement says otherwise. Ordinary memory in
    /// fallback mode.
    WriteOnly,
}

/// What a lease does when the pool's capacity is reached.
#[derive(Debug, Clone, Default)]
pub enum WhenFull {
    /// Fail at once with [`PinnedError::CapacityReached`].
    #[default]
    Fail,
    /// Wait for leases to come back: at most `timeout` (forever when `None`),
    /// then [`PinnedError::Timeout`]; [`PinnedError::Cancelled`] as soon as
    /// `cancel` is cancelled.
    Wait {
        timeout: Option<Duration>,
        cancel: Option<CancelToken>,
    },
}

impl WhenFull {
    /// Wait at most `timeout`.
    pub fn wait(timeout: Duration) -> Self {
        WhenFull::Wait {
            timeout: Some(timeout),
            cancel: None,
        }
    }

    /// Wait until a lease comes back, however long that takes (or until
    /// cancelled, with [`WhenFull::with_cancel`]).
    pub fn wait_forever() -> Self {
        WhenFull::Wait {
            timeout: None,
            cancel: None,
        }
    }

    /// Makes a wait cancellable through `token` (no effect on `Fail`).
    pub fn with_cancel(self, token: CancelToken) -> Self {
        match self {
            WhenFull::Fail => WhenFull::Fail,
            WhenFull::Wait { timeout, .. } => WhenFull::Wait {
                timeout,
                cancel: Some(token),
            },
        }
    }
}

/// What to lease: a size in bytes, the CPU access kind, and what to do when
/// the pool is full. Built with [`Request::bytes`] or [`Request::elems`].
#[derive(Debug, Clone)]
pub struct Request {
    bytes: usize,
    access: CpuAccess,
    when_full: WhenFull,
}

impl Request {
    /// `bytes` bytes, [`CpuAccess::ReadWrite`], failing when the pool is full.
    pub fn bytes(bytes: usize) -> Self {
        Request {
            bytes,
            access: CpuAccess::default(),
            when_full: WhenFull::default(),
        }
    }

    /// Room for `count` values of `T` (an impossible size is refused by
    /// [`Pool::lease`] as [`PinnedError::TooLarge`]).
    pub fn elems<T>(count: usize) -> Self {
        Request::bytes(count.saturating_mul(size_of::<T>()))
    }

    /// Sets the CPU access kind (see [`CpuAccess`]).
    pub fn access(mut self, access: CpuAccess) -> Self {
        self.access = access;
        self
    }

    /// Sets what happens when the pool is full (see [`WhenFull`]).
    pub fn when_full(mut self, when_full: WhenFull) -> Self {
        self.when_full = when_full;
        self
    }

    /// The requested length in bytes.
    pub fn len_bytes(&self) -> usize {
        self.bytes
    }
}

/// How a pool is set up.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct PoolConfig {
    /// The most bytes the pool holds at once (idle and leased buffers, and
    /// allocations in flight), or `None` for no limit.
    pub capacity_bytes: Option<usize>,
}

impl PoolConfig {
    /// No capacity limit.
    pub fn unbounded() -> Self {
        PoolConfig::default()
    }

    /// At most `bytes` held at once.
    pub fn with_capacity(bytes: usize) -> Self {
        PoolConfig {
            capacity_bytes: Some(bytes),
        }
    }
}

/// A snapshot of a pool's counters. Byte counts are of whole buffers (size
/// classes), not of the lengths asked for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Buffers allocated from the driver (or the allocator in fallback mode).
    pub allocations: u64,
    /// Leases served by an idle buffer, with no allocation.
    pub reuses: u64,
    /// Buffers given back to the driver (trimmed, evicted, or returned after
    /// the pool was dropped).
    pub frees: u64,
    /// Leases that had to wait for room.
    pub waits: u64,
    /// Leases refused because the pool was full (fail, timeout or cancel).
    pub refusals: u64,
    /// Bytes in buffers the pool holds now (idle plus leased).
    pub bytes_held: usize,
    /// Bytes in buffers leased out now.
    pub bytes_leased: usize,
    /// Bytes in idle buffers now.
    pub bytes_idle: usize,
    /// The most bytes ever held at once.
    pub peak_bytes_held: usize,
    /// The most bytes ever leased at once.
    pub peak_bytes_leased: usize,
    /// Buffers held now (idle plus leased).
    pub buffers_held: usize,
    /// Leases outstanding now.
    pub leases_outstanding: usize,
    /// The configured capacity, if any.
    pub capacity_bytes: Option<usize>,
}

/// A buffer the pool owns: its address, size class and access kind.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawBuf {
    pub(crate) ptr: NonNull<u8>,
    pub(crate) class: usize,
    pub(crate) access: CpuAccess,
}

// SAFETY: a RawBuf is the sole handle to a heap buffer that no thread-local
// state is tied to (page-locked memory is process-wide); ownership moves
// between the pool's idle lists and one lease at a time.
unsafe impl Send for RawBuf {}

#[derive(Debug)]
struct Idle {
    buf: RawBuf,
    /// When it went idle (a counter), for evicting the oldest first.
    since: u64,
}

#[derive(Debug, Default)]
struct State {
    /// The pool handle has been dropped: returned buffers are freed.
    closed: bool,
    idle: BTreeMap<(usize, CpuAccess), Vec<Idle>>,
    tick: u64,
    /// Bytes being allocated or freed outside the lock, counted against the
    /// capacity until done.
    pending: usize,
    stats: PoolStats,
}

impl State {
    fn take_idle(&mut self, key: (usize, CpuAccess)) -> Option<RawBuf> {
        let list = self.idle.get_mut(&key)?;
        // The most recently returned buffer: its pages are the warmest.
        let buf = list.pop()?.buf;
        if list.is_empty() {
            self.idle.remove(&key);
        }
        self.stats.bytes_idle -= buf.class;
        Some(buf)
    }

    fn put_idle(&mut self, buf: RawBuf) {
        self.tick += 1;
        self.stats.bytes_idle += buf.class;
        self.idle
            .entry((buf.class, buf.access))
            .or_default()
            .push(Idle {
                buf,
                since: self.tick,
            });
    }

    /// Removes the oldest idle buffers until at least `need` bytes are out
    /// (or none is left); they stop counting as held.
    fn evict(&mut self, need: usize) -> Vec<RawBuf> {
        let mut all: Vec<(u64, (usize, CpuAccess))> = self
            .idle
            .iter()
            .flat_map(|(key, list)| list.iter().map(|idle| (idle.since, *key)))
            .collect();
        all.sort_unstable();
        let mut out = Vec::new();
        let mut got = 0;
        for (since, key) in all {
            if got >= need {
                break;
            }
            let Some(list) = self.idle.get_mut(&key) else {
                continue;
            };
            let Some(at) = list.iter().position(|idle| idle.since == since) else {
                continue;
            };
            let buf = list.remove(at).buf;
            if list.is_empty() {
                self.idle.remove(&key);
            }
            got += buf.class;
            self.drop_held(buf);
            out.push(buf);
        }
        out
    }

    fn drop_held(&mut self, buf: RawBuf) {
        self.stats.bytes_idle -= buf.class;
        self.stats.bytes_held -= buf.class;
        self.stats.buffers_held -= 1;
        self.stats.frees += 1;
    }

    fn lease_out(&mut self, class: usize) {
        let s = &mut self.stats;
        s.bytes_leased += class;
        s.leases_outstanding += 1;
        s.peak_bytes_leased = s.peak_bytes_leased.max(s.bytes_leased);
    }

    fn committed(&self) -> usize {
        self.stats.bytes_held + self.pending
    }
}

/// What the pool's handles, its leases and its registrations share.
pub(crate) struct Shared {
    pub(crate) backend: Backend,
    capacity: usize,
    state: Mutex<State>,
    returned: Condvar,
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared")
            .field("backend", &self.backend)
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing panics while holding the lock; if something did, the
        // counters are still the best record there is.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes a leased buffer back: idle again, or freed if the pool is gone.
    pub(crate) fn give_back(&self, buf: RawBuf) {
        let mut state = self.lock();
        state.stats.bytes_leased -= buf.class;
        state.stats.leases_outstanding -= 1;
        if state.closed {
            state.stats.bytes_held -= buf.class;
            state.stats.buffers_held -= 1;
            state.stats.frees += 1;
            drop(state);
            // SAFETY: the buffer came from this backend and its lease is gone.
            unsafe { self.backend.free(buf.ptr, buf.class) };
        } else {
            state.put_idle(buf);
            drop(state);
            self.returned.notify_all();
        }
    }

    /// Frees buffers already taken out of the idle lists, keeping their bytes
    /// counted as pending until the driver is done.
    fn free_all(&self, bufs: Vec<RawBuf>) {
        for buf in bufs {
            // SAFETY: the buffers were idle (no lease) and are out of the lists.
            unsafe { self.backend.free(buf.ptr, buf.class) };
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // Every lease and handle is gone; free whatever is still idle before
        // the backend (and with it the CUDA context) drops.
        let state = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
        let idle = std::mem::take(&mut state.idle);
        for idle in idle.into_values().flatten() {
            // SAFETY: nothing else can reach an idle buffer now.
            unsafe { self.backend.free(idle.buf.ptr, idle.buf.class) };
        }
    }
}

/// Dropping the last [`Pool`] handle closes the pool: idle buffers are freed
/// now, leased ones when they come back.
#[derive(Debug)]
struct Owner {
    shared: Arc<Shared>,
}

impl Drop for Owner {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.closed = true;
        let idle = std::mem::take(&mut state.idle);
        let bufs: Vec<RawBuf> = idle.into_values().flatten().map(|idle| idle.buf).collect();
        for buf in &bufs {
            state.drop_held(*buf);
        }
        drop(state);
        self.shared.free_all(bufs);
    }
}

/// A pool of page-locked host buffers for one device (or of ordinary memory
/// in fallback mode). Cheap to clone: clones share the buffers.
///
/// Dropping the last handle while leases are outstanding is safe: the leases
/// stay valid and their buffers are freed when they are dropped.
#[derive(Debug, Clone)]
pub struct Pool {
    owner: Arc<Owner>,
}

impl Pool {
    /// A pool of page-locked buffers allocated in device `ordinal`'s primary
    /// context (portable to every context).
    ///
    /// Fails with [`PinnedError::NoDriver`] or [`PinnedError::NoDevice`] where
    /// there is no GPU; see [`Pool::pinned_or_fallback`].
    pub fn pinned(ordinal: usize, config: PoolConfig) -> Result<Pool> {
        let host = CudaHost::open(ordinal)?;
        Ok(Pool::with_backend(Backend::Pinned(host), config))
    }

    /// A pool of ordinary page-aligned memory with the same API; its leases
    /// say [`Lease::is_pinned`] `false`.
    pub fn fallback(config: PoolConfig) -> Pool {
        Pool::with_backend(Backend::Fallback, config)
    }

    /// [`Pool::pinned`] where the driver sees device `ordinal`, else (no
    /// driver library, no such device) [`Pool::fallback`], logged at `warn`.
    /// Other driver errors are returned: a broken driver is not a CPU machine.
    pub fn pinned_or_fallback(ordinal: usize, config: PoolConfig) -> Result<Pool> {
        match CudaHost::open(ordinal) {
            Ok(host) => Ok(Pool::with_backend(Backend::Pinned(host), config)),
            Err(error @ (PinnedError::NoDriver | PinnedError::NoDevice { .. })) => {
                tracing::warn!(%error, "pinned-pool: using ordinary (not page-locked) memory");
                Ok(Pool::fallback(config))
            }
            Err(error) => Err(error),
        }
    }

    fn with_backend(backend: Backend, config: PoolConfig) -> Pool {
        let capacity = config.capacity_bytes.unwrap_or(usize::MAX);
        let state = State {
            stats: PoolStats {
                capacity_bytes: config.capacity_bytes,
                ..PoolStats::default()
            },
            ..State::default()
        };
        let shared = Arc::new(Shared {
            backend,
            capacity,
            state: Mutex::new(state),
            returned: Condvar::new(),
        });
        Pool {
            owner: Arc::new(Owner { shared }),
        }
    }

    fn shared(&self) -> &Arc<Shared> {
        &self.owner.shared
    }

    /// Whether this pool's buffers are page-locked (false in fallback mode).
    pub fn is_pinned(&self) -> bool {
        self.shared().backend.is_pinned()
    }

    /// The device whose context allocates the buffers (`None` in fallback mode).
    pub fn device(&self) -> Option<usize> {
        self.shared().backend.device()
    }

    /// The counters now.
    pub fn stats(&self) -> PoolStats {
        self.shared().lock().stats
    }

    /// Leases a buffer of at least `request.len_bytes()` bytes.
    ///
    /// An idle buffer of the same size class and access kind is reused when
    /// there is one. Otherwise a buffer is allocated if it fits in the
    /// capacity, after freeing the oldest idle buffers of other classes if
    /// that makes it fit. Otherwise the request's [`WhenFull`] decides: fail
    /// now, or wait for a lease to come back and try again.
    ///
    /// The buffer's contents are unspecified (zeros when fresh, the previous
    /// lease's bytes when reused).
    ///
    /// Waiters are not queued in order: a small request may be served while
    /// a large one keeps waiting for room.
    pub fn lease(&self, request: Request) -> Result<Lease> {
        let shared = self.shared();
        let requested = request.bytes;
        let class = match size_class(requested) {
            Some(class) if class <= shared.capacity => class,
            class_bytes => {
                return Err(PinnedError::TooLarge {
                    requested,
                    class_bytes,
                    capacity: shared.capacity,
                });
            }
        };
        let key = (class, request.access);
        let (timeout, cancel) = match &request.when_full {
            WhenFull::Fail => (None, None),
            WhenFull::Wait { timeout, cancel } => (*timeout, cancel.as_ref()),
        };
        let _listening = cancel.map(|token| token.listen(shared));
        let started = Instant::now();
        let deadline = timeout.and_then(|t| started.checked_add(t));
        let mut waited = false;

        let mut state = shared.lock();
        loop {
            if cancel.is_some_and(CancelToken::is_cancelled) {
                state.stats.refusals += 1;
                return Err(PinnedError::Cancelled { requested });
            }
            if let Some(buf) = state.take_idle(key) {
                state.stats.reuses += 1;
                state.lease_out(class);
                return Ok(Lease::new(buf, requested, Arc::clone(shared)));
            }
            let headroom = shared.capacity.saturating_sub(state.committed());
            if class <= headroom.saturating_add(state.stats.bytes_idle) {
                let victims = state.evict(class.saturating_sub(headroom));
                let evicted: usize = victims.iter().map(|buf| buf.class).sum();
                // The evicted bytes stay counted until freed, and the new
                // buffer's until allocated: the capacity is never exceeded.
                let reserve = class.max(evicted);
                state.pending += reserve;
                drop(state);

                shared.free_all(victims);
                let allocated = shared.backend.alloc(class, request.access);

                let mut state = shared.lock();
                state.pending -= reserve;
                let lease = allocated.map(|ptr| {
                    let s = &mut state.stats;
                    s.allocations += 1;
                    s.bytes_held += class;
                    s.buffers_held += 1;
                    s.peak_bytes_held = s.peak_bytes_held.max(s.bytes_held);
                    state.lease_out(class);
                    let buf = RawBuf {
                        ptr,
                        class,
                        access: request.access,
                    };
                    Lease::new(buf, requested, Arc::clone(shared))
                });
                drop(state);
                // Room may have been freed (evicted more than allocated, or
                // the allocation failed).
                shared.returned.notify_all();
                return lease;
            }

            // Full: whatever is not leased is being allocated or freed.
            let full = |state: &State| PinnedError::CapacityReached {
                requested,
                class_bytes: class,
                capacity: shared.capacity,
                leased: state.stats.bytes_leased,
                pending: state.pending,
            };
            if matches!(request.when_full, WhenFull::Fail) {
                let error = full(&state);
                state.stats.refusals += 1;
                return Err(error);
            }
            if !waited {
                waited = true;
                state.stats.waits += 1;
                tracing::debug!(
                    requested,
                    class,
                    "pinned-pool: full, waiting for a lease to come back"
                );
            }
            state = match deadline {
                None => shared
                    .returned
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner),
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        state.stats.refusals += 1;
                        return Err(PinnedError::Timeout {
                            requested,
                            waited: now - started,
                            capacity: shared.capacity,
                            leased: state.stats.bytes_leased,
                        });
                    }
                    shared
                        .returned
                        .wait_timeout(state, deadline - now)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
            };
        }
    }

    /// Leases an idle buffer of the request's size class and access kind if
    /// the pool has one, else `None`: never allocates, frees or waits (the
    /// request's [`WhenFull`] is not used). For callers that account for
    /// idle buffers elsewhere and want to take one over before counting
    /// anything new.
    pub fn reuse(&self, request: &Request) -> Option<Lease> {
        let shared = self.shared();
        let class = size_class(request.bytes).filter(|&class| class <= shared.capacity)?;
        let mut state = shared.lock();
        let buf = state.take_idle((class, request.access))?;
        state.stats.reuses += 1;
        state.lease_out(class);
        Some(Lease::new(buf, request.bytes, Arc::clone(shared)))
    }

    /// Frees every idle buffer; returns the bytes freed.
    pub fn trim(&self) -> usize {
        self.trim_to(0)
    }

    /// Frees the oldest idle buffers until the pool holds at most `bytes`
    /// (or no idle buffer is left); returns the bytes freed.
    pub fn trim_to(&self, bytes: usize) -> usize {
        let shared = self.shared();
        let mut state = shared.lock();
        let over = state.stats.bytes_held.saturating_sub(bytes);
        let victims = state.evict(over);
        let freed: usize = victims.iter().map(|buf| buf.class).sum();
        state.pending += freed;
        drop(state);
        shared.free_all(victims);
        shared.lock().pending -= freed;
        shared.returned.notify_all();
        freed
    }

    /// Page-locks `slice`, memory this pool did not allocate, until the
    /// returned guard is dropped (`cuMemHostRegister`, portable to every
    /// context). The guard derefs to the slice.
    ///
    /// In fallback mode nothing is registered and the guard says
    /// [`Registered::is_pinned`] `false`. An empty slice is never registered.
    ///
    /// Registration locks whole pages: registering two slices that share a
    /// page fails with the driver's `CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED`.
    /// Registering is slow (like allocating pinned memory): register large,
    /// long-lived buffers, not per copy.
    pub fn register<'a, T>(&self, slice: &'a mut [T]) -> Result<Registered<'a, T>> {
        Registered::new(Arc::clone(self.shared()), slice)
    }

    /// Page-locks the elements of a shared vector (a parameter set's query,
    /// read by several threads) until the returned guard is dropped; the
    /// guard keeps a clone of `data`, so the memory lives at least as long.
    /// As [`Pool::register`] otherwise: nothing is registered in fallback
    /// mode or for an empty vector, and memory another guard (or another
    /// caller) registered already is refused by the driver
    /// (`CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED`).
    pub fn register_shared<T>(&self, data: Arc<Vec<T>>) -> Result<RegisteredShared<T>> {
        RegisteredShared::new(Arc::clone(self.shared()), data)
    }
}

/// Cancels waits for room ([`WhenFull::Wait`]) from another thread. Cheap to
/// clone; every clone cancels the same waits. Once cancelled, it stays so.
#[derive(Clone, Default)]
pub struct CancelToken {
    inner: Arc<CancelInner>,
}

#[derive(Default)]
struct CancelInner {
    cancelled: AtomicBool,
    /// Pools with a wait on this token in progress.
    listeners: Mutex<Vec<Weak<Shared>>>,
}

impl fmt::Debug for CancelToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancelToken")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

impl CancelToken {
    /// A token not yet cancelled.
    pub fn new() -> Self {
        CancelToken::default()
    }

    /// Whether [`CancelToken::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::SeqCst)
    }

    /// Cancels every wait on this token, now and later: they return
    /// [`PinnedError::Cancelled`].
    pub fn cancel(&self) {
        self.inner.cancelled.store(true, Ordering::SeqCst);
        let listeners = self
            .inner
            .listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for shared in listeners.iter().filter_map(Weak::upgrade) {
            // Taking the pool's lock orders this wake-up after a waiter's
            // check of the flag, so the wake-up cannot be lost.
            drop(shared.lock());
            shared.returned.notify_all();
        }
    }

    fn listen<'t>(&'t self, shared: &Arc<Shared>) -> Listening<'t> {
        let weak = Arc::downgrade(shared);
        self.inner
            .listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(weak.clone());
        Listening { token: self, weak }
    }
}

/// Removes a waiting pool from its token's listeners when the wait ends.
struct Listening<'t> {
    token: &'t CancelToken,
    weak: Weak<Shared>,
}

impl Drop for Listening<'_> {
    fn drop(&mut self) {
        let mut listeners = self
            .token
            .inner
            .listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(at) = listeners.iter().position(|w| w.ptr_eq(&self.weak)) {
            listeners.swap_remove(at);
        }
    }
}
