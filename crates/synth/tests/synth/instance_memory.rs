//! A queue of built-in instances holds no circuit data: 1,024 partitions of
//! the largest sha256 circuit (what a daemon request may ask for) cost a
//! few bytes each until one is synthesized, where building them costs each
//! its preimage. Measured with a counting allocator that counts each thread's
//! allocations apart, so tests running beside this one in the same test
//! executable do not add to its counts.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use cuzk_synth::circuits::CircuitSpec;

struct Counting;

thread_local! {
    // A const-initialised `Cell<usize>` has no destructor, so the allocator
    // may touch it at any point of a thread's life, its teardown included.
    static ALLOCATED: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator, only counting.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATED.with(|a| a.set(a.get().wrapping_add(layout.size())));
        // SAFETY: the caller's layout, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: a pointer this allocator (the system's) gave.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocated_by<T>(f: impl FnOnce() -> T) -> (usize, T) {
    let before = ALLOCATED.with(Cell::get);
    let out = f();
    (ALLOCATED.with(Cell::get).wrapping_sub(before), out)
}

#[test]
fn instances_allocate_their_circuits_only_when_synthesized() {
    let spec: CircuitSpec = "sha256:4096".parse().unwrap();
    let partitions = 1024u64;
    let (lazy, instances) = allocated_by(|| {
        (0..partitions)
            .map(|seed| spec.instance(seed))
            .collect::<Vec<_>>()
    });
    let (built, circuits) = allocated_by(|| {
        (0..partitions)
            .map(|seed| spec.build(seed))
            .collect::<Vec<_>>()
    });
    eprintln!("{partitions} partitions of {spec}: {lazy} bytes as instances, {built} bytes built");
    // Each built circuit holds its 4,096-block preimage (256 KiB).
    assert!(
        built as u64 >= partitions * 4096 * 64 - partitions * 64,
        "{built}"
    );
    // The instances: the vector of (spec, seed) pairs and nothing else.
    assert!(
        lazy <= instances.len() * std::mem::size_of_val(&instances[0]) + 64,
        "{lazy}"
    );
    drop((instances, circuits));
}
