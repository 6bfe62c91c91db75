//! The pool's contract, on ordinary memory everywhere and on page-locked
//! memory where there is a GPU (`CUZK_REQUIRE_GPU=1` makes a missing GPU a
//! failure): reuse, concurrency without double leases or leaks, the capacity
//! (fail, wait, time out, cancel, evict), trimming, dropping the pool with
//! leases outstanding, registration, and real copies through the driver.

use std::{
    collections::HashSet,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use cuzk_gpu_sched::testing::gpu_or_skip;
use cuzk_pinned_pool::{
    CancelToken, CpuAccess, PinnedError, Pool, PoolConfig, Request, WhenFull, size_class,
};

const MIB: usize = 1 << 20;

/// A fallback pool always, and a pinned pool on device 0 when there is a GPU.
fn pools(test: &str, config: PoolConfig) -> Vec<Pool> {
    let mut pools = vec![Pool::fallback(config.clone())];
    if gpu_or_skip(test).is_some() {
        let pinned = Pool::pinned(0, config).expect("pinned pool on device 0");
        assert!(pinned.is_pinned());
        assert_eq!(pinned.device(), Some(0));
        pools.push(pinned);
    }
    pools
}

fn kind(pool: &Pool) -> &'static str {
    if pool.is_pinned() {
        "pinned"
    } else {
        "fallback"
    }
}

/// Waits (bounded) until `cond` holds; the tests' way to know a waiter waits.
fn eventually(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn reuse_counts_after_lease_return_cycles() {
    for pool in pools(
        "reuse_counts_after_lease_return_cycles",
        PoolConfig::unbounded(),
    ) {
        let kind = kind(&pool);
        const N: u64 = 50;
        for i in 0..N {
            // Sizes in one class share one buffer.
            let bytes = MIB - (i as usize % 3) * 1000;
            let mut lease = pool.lease(Request::bytes(bytes)).unwrap();
            assert_eq!(lease.len(), bytes);
            assert_eq!(lease.capacity(), MIB);
            assert_eq!(lease.is_pinned(), pool.is_pinned(), "{kind}");
            lease[0] = i as u8;
        }
        let stats = pool.stats();
        assert_eq!(
            (stats.allocations, stats.reuses),
            (1, N - 1),
            "{kind}: {stats:?}"
        );
        assert_eq!(stats.bytes_held, MIB, "{kind}");
        assert_eq!(stats.bytes_leased, 0, "{kind}");
        assert_eq!(stats.peak_bytes_leased, MIB, "{kind}");

        // Another class, and another access kind, get buffers of their own.
        for _ in 0..N {
            drop(pool.lease(Request::bytes(2 * MIB)).unwrap());
            let wc = pool
                .lease(Request::bytes(MIB).access(CpuAccess::WriteOnly))
                .unwrap();
            assert_eq!(wc.access(), CpuAccess::WriteOnly);
        }
        let stats = pool.stats();
        assert_eq!(stats.allocations, 3, "{kind}: {stats:?}");
        assert_eq!(stats.reuses, 3 * N - 3, "{kind}: {stats:?}");
        assert_eq!(stats.bytes_held, 4 * MIB, "{kind}");
        assert_eq!(stats.buffers_held, 3, "{kind}");
    }
}

#[test]
fn reuse_takes_an_idle_buffer_and_never_allocates() {
    for pool in pools(
        "reuse_takes_an_idle_buffer_and_never_allocates",
        PoolConfig::unbounded(),
    ) {
        let kind = kind(&pool);
        // Nothing idle: nothing leased, nothing allocated.
        assert!(pool.reuse(&Request::bytes(MIB)).is_none(), "{kind}");
        assert_eq!(pool.stats().allocations, 0, "{kind}");

        let mut first = pool.lease(Request::bytes(MIB)).unwrap();
        first[7] = 42;
        drop(first);
        assert_eq!(pool.stats().bytes_idle, MIB, "{kind}");
        // Another class or access kind does not take it.
        assert!(pool.reuse(&Request::bytes(2 * MIB)).is_none(), "{kind}");
        let write_only = Request::bytes(MIB).access(CpuAccess::WriteOnly);
        assert!(pool.reuse(&write_only).is_none(), "{kind}");

        let again = pool
            .reuse(&Request::bytes(MIB - 100))
            .expect("the idle buffer");
        assert_eq!((again.len(), again.capacity()), (MIB - 100, MIB), "{kind}");
        assert_eq!(again[7], 42, "{kind}: the same buffer, its bytes kept");
        // The only buffer of the class is leased now.
        assert!(pool.reuse(&Request::bytes(MIB)).is_none(), "{kind}");
        let stats = pool.stats();
        assert_eq!(
            (
                stats.allocations,
                stats.reuses,
                stats.bytes_idle,
                stats.bytes_leased
            ),
            (1, 1, 0, MIB),
            "{kind}: {stats:?}"
        );
        drop(again);
        assert_eq!(pool.stats().bytes_idle, MIB, "{kind}");
    }
}

/// The sizes `hammer` leases, in four classes.
const SIZES: [usize; 4] = [4096, 100_000, 256 * 1024, 600_000];

/// Many threads lease and return buffers of mixed classes; no buffer is ever
/// leased twice at once, every lease's bytes stay its own, and afterwards
/// nothing is leased and trimming brings the bytes held back to zero.
fn hammer(pool: &Pool, when_full: &WhenFull) {
    let kind = kind(pool);
    let start = pool.stats();
    let live = Mutex::new(HashSet::new());
    const THREADS: usize = 8;
    const ITERS: usize = 150;
    thread::scope(|s| {
        for t in 0..THREADS {
            let live = &live;
            s.spawn(move || {
                for i in 0..ITERS {
                    let bytes = SIZES[(t + i) % SIZES.len()];
                    let request = Request::bytes(bytes).when_full(when_full.clone());
                    let mut lease = pool.lease(request).unwrap();
                    let addr = lease.as_ptr() as usize;
                    assert!(
                        live.lock().unwrap().insert(addr),
                        "{kind}: {addr:#x} leased twice"
                    );
                    let tag = (t * ITERS + i) as u64;
                    lease.as_mut_slice_of::<u64>().unwrap().fill(tag);
                    thread::yield_now();
                    assert!(
                        lease
                            .as_slice_of::<u64>()
                            .unwrap()
                            .iter()
                            .all(|&x| x == tag),
                        "{kind}: another lease wrote into {addr:#x}"
                    );
                    assert!(live.lock().unwrap().remove(&addr));
                }
            });
        }
    });
    let stats = pool.stats();
    assert_eq!(stats.bytes_leased, 0, "{kind}: {stats:?}");
    assert_eq!(stats.leases_outstanding, 0, "{kind}: {stats:?}");
    assert_eq!(
        stats.allocations - stats.frees,
        stats.buffers_held as u64,
        "{kind}: {stats:?}"
    );
    assert_eq!(
        stats.allocations + stats.reuses,
        start.allocations + start.reuses + (THREADS * ITERS) as u64,
        "{kind}: {stats:?}"
    );
    if let Some(capacity) = stats.capacity_bytes {
        assert!(stats.peak_bytes_held <= capacity, "{kind}: {stats:?}");
    }
    pool.trim();
    let stats = pool.stats();
    assert_eq!(stats.bytes_held, start.bytes_held, "{kind}: {stats:?}");
    assert_eq!(stats.buffers_held, 0, "{kind}: {stats:?}");
}

#[test]
fn concurrent_leases_no_double_lease_no_leak() {
    for pool in pools(
        "concurrent_leases_no_double_lease_no_leak",
        PoolConfig::unbounded(),
    ) {
        hammer(&pool, &WhenFull::Fail);
        // Eight threads each hold at most one lease at a time, so no class
        // ever needs more than eight buffers.
        let per_thread: usize = SIZES.map(|bytes| size_class(bytes).unwrap()).iter().sum();
        assert!(pool.stats().peak_bytes_held <= 8 * per_thread);
    }
}

#[test]
fn concurrent_leases_under_a_capacity_wait_and_evict() {
    // Room for about three of the largest leases at once, eight threads:
    // threads wait, and idle buffers of other classes are evicted.
    let capacity = 3 * size_class(600_000).unwrap();
    for pool in pools(
        "concurrent_leases_under_a_capacity_wait_and_evict",
        PoolConfig::with_capacity(capacity),
    ) {
        hammer(&pool, &WhenFull::wait(Duration::from_secs(30)));
        // How often threads waited or evicted depends on the scheduler; the
        // single-threaded tests below pin those paths down.
        eprintln!("{}: {:?}", kind(&pool), pool.stats());
    }
}

#[test]
fn full_pool_fails_with_a_clear_error() {
    for pool in pools(
        "full_pool_fails_with_a_clear_error",
        PoolConfig::with_capacity(MIB),
    ) {
        let held = pool.lease(Request::bytes(MIB)).unwrap();
        let error = pool.lease(Request::bytes(10)).unwrap_err();
        assert_eq!(
            error,
            PinnedError::CapacityReached {
                requested: 10,
                class_bytes: 4096,
                capacity: MIB,
                leased: MIB,
                pending: 0
            }
        );
        assert_eq!(
            error.to_string(),
            "pinned pool full: a lease of 10 bytes (class 4096) does not fit; capacity 1048576 bytes, 1048576 bytes leased, 0 bytes being allocated or freed"
        );
        assert_eq!(pool.stats().refusals, 1);
        drop(held);
        // Room again: the idle buffer is evicted for the small one.
        let small = pool.lease(Request::bytes(10)).unwrap();
        assert_eq!(small.capacity(), 4096);
        assert_eq!(pool.stats().frees, 1);
    }
}

#[test]
fn full_pool_waits_then_proceeds_when_a_lease_returns() {
    for pool in pools(
        "full_pool_waits_then_proceeds_when_a_lease_returns",
        PoolConfig::with_capacity(MIB),
    ) {
        let kind = kind(&pool);
        for (wanted, reused) in [(MIB, true), (MIB / 2, false)] {
            let before = pool.stats();
            let held = pool.lease(Request::bytes(MIB)).unwrap();
            let got = AtomicBool::new(false);
            thread::scope(|s| {
                let waiter = s.spawn(|| {
                    let request = Request::bytes(wanted).when_full(WhenFull::wait_forever());
                    let lease = pool.lease(request);
                    got.store(true, Ordering::SeqCst);
                    lease
                });
                eventually("the lease waits", || pool.stats().waits > before.waits);
                thread::sleep(Duration::from_millis(20));
                assert!(!got.load(Ordering::SeqCst), "{kind}: served while full");
                drop(held);
                let lease = waiter.join().unwrap().unwrap();
                assert_eq!(lease.len(), wanted);
            });
            let stats = pool.stats();
            if reused {
                assert_eq!(stats.reuses, before.reuses + 1, "{kind}: {stats:?}");
            } else {
                // The returned 1 MiB buffer was evicted to make room.
                assert_eq!(stats.frees, before.frees + 1, "{kind}: {stats:?}");
            }
            assert_eq!(stats.bytes_leased, 0, "{kind}");
            pool.trim();
        }
    }
}

#[test]
fn wait_times_out_with_a_clear_error() {
    for pool in pools(
        "wait_times_out_with_a_clear_error",
        PoolConfig::with_capacity(MIB),
    ) {
        let _held = pool.lease(Request::bytes(MIB)).unwrap();
        let timeout = Duration::from_millis(50);
        let request = Request::bytes(MIB).when_full(WhenFull::wait(timeout));
        let error = pool.lease(request).unwrap_err();
        let PinnedError::Timeout {
            requested, waited, ..
        } = error
        else {
            panic!("expected a timeout, got {error:?}");
        };
        assert_eq!(requested, MIB);
        assert!(waited >= timeout, "{waited:?}");
        assert!(error.to_string().starts_with("timed out after "), "{error}");
        let stats = pool.stats();
        assert_eq!((stats.waits, stats.refusals), (1, 1));
    }
}

#[test]
fn wait_is_cancelled_by_its_token() {
    for pool in pools(
        "wait_is_cancelled_by_its_token",
        PoolConfig::with_capacity(MIB),
    ) {
        let _held = pool.lease(Request::bytes(MIB)).unwrap();
        let token = CancelToken::new();
        thread::scope(|s| {
            let waiter = s.spawn(|| {
                let when_full = WhenFull::wait_forever().with_cancel(token.clone());
                pool.lease(Request::bytes(4096).when_full(when_full))
            });
            eventually("the lease waits", || pool.stats().waits == 1);
            token.cancel();
            let error = waiter.join().unwrap().unwrap_err();
            assert_eq!(error, PinnedError::Cancelled { requested: 4096 });
        });
        // A cancelled token refuses at once, also later.
        let when_full = WhenFull::wait(Duration::from_secs(60)).with_cancel(token.clone());
        let started = Instant::now();
        assert!(matches!(
            pool.lease(Request::bytes(4096).when_full(when_full)),
            Err(PinnedError::Cancelled { .. })
        ));
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}

#[test]
fn requests_that_can_never_fit_are_refused_at_once() {
    for pool in pools(
        "requests_that_can_never_fit_are_refused_at_once",
        PoolConfig::with_capacity(MIB),
    ) {
        let request = Request::bytes(MIB + 1).when_full(WhenFull::wait_forever());
        let error = pool.lease(request).unwrap_err();
        assert_eq!(
            error,
            PinnedError::TooLarge {
                requested: MIB + 1,
                class_bytes: Some(MIB + MIB / 4),
                capacity: MIB
            }
        );
        assert!(error.to_string().contains("can never fit"), "{error}");
        let error = pool.lease(Request::elems::<u64>(usize::MAX)).unwrap_err();
        assert!(matches!(
            error,
            PinnedError::TooLarge {
                class_bytes: None,
                ..
            }
        ));
    }
}

#[test]
fn idle_buffers_are_evicted_oldest_first_to_make_room() {
    for pool in pools(
        "idle_buffers_are_evicted_oldest_first_to_make_room",
        PoolConfig::with_capacity(2 * MIB),
    ) {
        let kind = kind(&pool);
        let a = pool.lease(Request::bytes(MIB / 2)).unwrap();
        let b = pool.lease(Request::bytes(MIB / 4)).unwrap();
        let c = pool.lease(Request::bytes(MIB)).unwrap();
        drop(a); // oldest idle
        drop(b);
        drop(c);
        // 1.5 MiB needs 1.5 MiB of room: 0.25 free, so the oldest (a, 0.5 MiB),
        // then b (0.25 MiB), then c (1 MiB) go, in that order, until it fits.
        let big = pool.lease(Request::bytes(3 * MIB / 2)).unwrap();
        let stats = pool.stats();
        assert_eq!(stats.frees, 3, "{kind}: {stats:?}");
        assert_eq!(stats.bytes_held, 3 * MIB / 2, "{kind}");
        drop(big);
        let d = pool.lease(Request::bytes(MIB / 4)).unwrap();
        // 0.25 MiB fits in the 0.5 MiB of room: nothing evicted.
        assert_eq!(pool.stats().frees, 3, "{kind}");
        assert!(pool.stats().peak_bytes_held <= 2 * MIB);
        drop(d);
    }
}

#[test]
fn trim_frees_idle_buffers_only() {
    for pool in pools("trim_frees_idle_buffers_only", PoolConfig::unbounded()) {
        let kind = kind(&pool);
        let kept = pool.lease(Request::bytes(MIB)).unwrap();
        drop(pool.lease(Request::bytes(2 * MIB)).unwrap());
        drop(pool.lease(Request::bytes(4 * MIB)).unwrap());
        assert_eq!(pool.stats().bytes_idle, 6 * MIB, "{kind}");
        // Down to 5 MiB: the oldest idle buffer (2 MiB) suffices.
        assert_eq!(pool.trim_to(5 * MIB), 2 * MIB, "{kind}");
        assert_eq!(pool.trim(), 4 * MIB, "{kind}");
        let stats = pool.stats();
        assert_eq!((stats.bytes_held, stats.bytes_leased), (MIB, MIB), "{kind}");
        assert_eq!(stats.peak_bytes_held, 7 * MIB, "{kind}");
        drop(kept);
        assert_eq!(pool.trim(), MIB, "{kind}");
        assert_eq!(pool.stats().bytes_held, 0, "{kind}");
    }
}

#[test]
fn dropping_the_pool_with_leases_outstanding_is_safe() {
    for pool in pools(
        "dropping_the_pool_with_leases_outstanding_is_safe",
        PoolConfig::with_capacity(8 * MIB),
    ) {
        let pinned = pool.is_pinned();
        let mut leases: Vec<_> = (0..4)
            .map(|i| pool.lease(Request::bytes(MIB + i * 4096)).unwrap())
            .collect();
        drop(pool.lease(Request::bytes(MIB / 2)).unwrap()); // one idle buffer
        let clone = pool.clone();
        drop(pool);
        // A clone keeps the pool open.
        assert_eq!(clone.stats().leases_outstanding, 4);
        drop(clone);
        // The leases stay usable, on other threads too, and free their
        // buffers when dropped.
        let typed = leases.pop().unwrap().into_typed::<u32>().unwrap();
        thread::scope(|s| {
            for mut lease in leases {
                s.spawn(move || {
                    lease.fill(0xab);
                    assert!(lease.iter().all(|&b| b == 0xab));
                    assert_eq!(lease.is_pinned(), pinned);
                });
            }
        });
        assert!(typed.iter().all(|&x| x == 0));
        drop(typed);
    }
}

#[test]
fn registration_guard_registers_and_unregisters() {
    for pool in pools(
        "registration_guard_registers_and_unregisters",
        PoolConfig::unbounded(),
    ) {
        let kind = kind(&pool);
        let mut data: Vec<u64> = (0..(1 << 18)).collect();
        for round in 0..3 {
            // Registering the same memory again works only if the last guard
            // unregistered it.
            let mut guard = pool.register(&mut data).unwrap();
            assert_eq!(guard.is_pinned(), pool.is_pinned(), "{kind}");
            assert_eq!(guard[5], 5 + round, "{kind}");
            guard.iter_mut().for_each(|x| *x += 1);
        }
        assert_eq!(data[5], 8);
        let mut empty: [u64; 0] = [];
        assert!(!pool.register(&mut empty).unwrap().is_pinned());
        if pool.is_pinned() {
            let _first = pool.register(&mut data[..4096]).unwrap();
            let mut other = vec![0u8; 3 * MIB];
            let _second = pool.register(&mut other).unwrap();
        }
    }
}

#[test]
fn shared_registration_keeps_the_memory_and_lets_it_go() {
    for pool in pools(
        "shared_registration_keeps_the_memory_and_lets_it_go",
        PoolConfig::unbounded(),
    ) {
        let kind = kind(&pool);
        let data: Arc<Vec<u64>> = Arc::new((0..(1 << 18)).collect());
        for _ in 0..3 {
            // Registering again works only if the last guard unregistered.
            let guard = pool.register_shared(Arc::clone(&data)).unwrap();
            assert_eq!(guard.is_pinned(), pool.is_pinned(), "{kind}");
            assert_eq!(
                Arc::strong_count(&data),
                2,
                "{kind}: the guard holds a clone"
            );
            assert_eq!(guard[12345], 12345, "{kind}");
            assert!(Arc::ptr_eq(guard.data(), &data));
            // Other threads read the memory while it is registered.
            thread::scope(|s| {
                for t in 0..4u64 {
                    let guard = &guard;
                    s.spawn(move || assert_eq!(guard[(t * 1000) as usize], t * 1000));
                }
            });
        }
        assert_eq!(Arc::strong_count(&data), 1, "{kind}: the guard let it go");
        // The guard alone keeps the memory alive.
        let guard = pool.register_shared(Arc::new(vec![7u32; 1 << 20])).unwrap();
        assert_eq!(guard.iter().map(|&x| u64::from(x)).sum::<u64>(), 7 << 20);
        drop(guard);
        assert!(
            !pool
                .register_shared(Arc::new(Vec::<u8>::new()))
                .unwrap()
                .is_pinned()
        );
        if pool.is_pinned() {
            // The same memory twice: the driver refuses the second.
            let _first = pool.register_shared(Arc::clone(&data)).unwrap();
            assert!(pool.register_shared(Arc::clone(&data)).is_err(), "{kind}");
        }
    }
}

/// Real copies through the driver from and to pinned leases and registered
/// memory, and the page-locking flags each access kind gets.
#[test]
fn pinned_buffers_copy_to_and_from_the_device() {
    use cudarc::driver::{CudaContext, sys};

    let Some(_devices) = gpu_or_skip("pinned_buffers_copy_to_and_from_the_device") else {
        return;
    };
    let pool = Pool::pinned(0, PoolConfig::unbounded()).unwrap();
    let ctx = CudaContext::new(0).unwrap();
    let stream = ctx.default_stream();

    let flags = |ptr: *const u8| {
        let mut flags = 0;
        // SAFETY: `ptr` is the start of a live cuMemHostAlloc buffer and the
        // context is current on this thread (CudaContext::new binds it).
        unsafe { sys::cuMemHostGetFlags(&mut flags, ptr.cast_mut().cast()) }
            .result()
            .unwrap();
        flags
    };

    const N: usize = 3 << 20; // 24 MiB of u64
    // Lease on another thread (no context current there).
    let mut src = thread::scope(|s| {
        s.spawn(|| pool.lease(Request::elems::<u64>(N)).unwrap())
            .join()
            .unwrap()
    });
    assert!(src.is_pinned());
    let f = flags(src.as_ptr());
    assert_ne!(f & sys::CU_MEMHOSTALLOC_PORTABLE, 0, "flags {f:#x}");
    assert_eq!(f & sys::CU_MEMHOSTALLOC_WRITECOMBINED, 0, "flags {f:#x}");
    let wc = pool
        .lease(Request::bytes(4096).access(CpuAccess::WriteOnly))
        .unwrap();
    assert_ne!(flags(wc.as_ptr()) & sys::CU_MEMHOSTALLOC_WRITECOMBINED, 0);

    for (i, x) in src.as_mut_slice_of::<u64>().unwrap().iter_mut().enumerate() {
        *x = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    let device = stream
        .clone_htod(src.as_slice_of::<u64>().unwrap())
        .unwrap();
    let mut back = pool.lease(Request::elems::<u64>(N)).unwrap();
    stream
        .memcpy_dtoh(&device, back.as_mut_slice_of::<u64>().unwrap())
        .unwrap();
    stream.synchronize().unwrap();
    assert!(back.as_slice_of::<u64>().unwrap() == src.as_slice_of::<u64>().unwrap());

    let mut plain = vec![0u64; N];
    let mut registered = pool.register(&mut plain).unwrap();
    assert!(registered.is_pinned());
    stream.memcpy_dtoh(&device, &mut registered[..]).unwrap();
    stream.synchronize().unwrap();
    assert!(registered[..] == *src.as_slice_of::<u64>().unwrap());
}
