//! The heap allocator cuzk's programs install (the `cuzk` command and
//! daemon, the bench programs): mimalloc, or the system's allocator when
//! `CUZK_ALLOCATOR=system` is set when the process starts.
//!
//! Witness synthesis runs storage-proofs' and bellperson's gadget code,
//! which allocates and frees small vectors (bits, linear combinations) for
//! nearly every value it assigns: hundreds of millions per 32 GiB PoRep
//! partition, from every core at once. The choice is made once, at the
//! process's first allocation, and never changes (memory is always freed
//! by the allocator that gave it). A program opts in with
//!
//! ```text
//! #[global_allocator]
//! static ALLOC: cuzk_synth::allocator::Allocator = cuzk_synth::allocator::Allocator;
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU8, Ordering};

/// The environment variable that picks the allocator (`system` or
/// `mimalloc`; anything else, or unset, is mimalloc).
pub const ENV: &str = "CUZK_ALLOCATOR";

/// Which allocator the process uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// mimalloc: per-thread heaps, no lock shared by the cores.
    Mimalloc,
    /// The C library's malloc.
    System,
}

impl Kind {
    /// The allocator a value of [`ENV`] asks for.
    pub fn from_env_value(value: Option<&[u8]>) -> Kind {
        match value {
            Some(v) if v.eq_ignore_ascii_case(b"system") => Kind::System,
            _ => Kind::Mimalloc,
        }
    }

    /// Its name, as reports print it.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Mimalloc => "mimalloc",
            Kind::System => "system",
        }
    }
}

const UNSET: u8 = 0;
const MIMALLOC: u8 = 1;
const SYSTEM: u8 = 2;

static CHOICE: AtomicU8 = AtomicU8::new(UNSET);

/// Reads [`ENV`] without allocating (this runs inside the first allocation).
fn choose() -> u8 {
    let value = {
        #[cfg(unix)]
        {
            // SAFETY: getenv takes a NUL-terminated name and returns either
            // null or a NUL-terminated string owned by the environment;
            // it is only read here, before returning, and nothing in this
            // process changes the environment while it starts.
            unsafe {
                let p = libc::getenv(c"CUZK_ALLOCATOR".as_ptr());
                (!p.is_null()).then(|| std::ffi::CStr::from_ptr(p).to_bytes())
            }
        }
        #[cfg(not(unix))]
        {
            None::<&[u8]>
        }
    };
    let want = match Kind::from_env_value(value) {
        Kind::Mimalloc => MIMALLOC,
        Kind::System => SYSTEM,
    };
    // The first thread to choose wins; every later allocation sees it.
    match CHOICE.compare_exchange(UNSET, want, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => want,
        Err(chosen) => chosen,
    }
}

#[inline]
fn choice() -> u8 {
    match CHOICE.load(Ordering::Acquire) {
        UNSET => choose(),
        c => c,
    }
}

/// The allocator in use: [`Kind::Mimalloc`] or [`Kind::System`] once the
/// process has allocated (that is, always, by the time `main` runs) in a
/// program that installed [`Allocator`]; [`None`] in one that did not.
pub fn active() -> Option<Kind> {
    match CHOICE.load(Ordering::Acquire) {
        MIMALLOC => Some(Kind::Mimalloc),
        SYSTEM => Some(Kind::System),
        _ => None,
    }
}

/// The name of the allocator in use, `"system"` where cuzk's is not
/// installed (as the bench reports record it).
pub fn active_name() -> &'static str {
    active().map_or("system", Kind::name)
}

/// A [`GlobalAlloc`] that is mimalloc or the system's, chosen once by
/// [`ENV`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Allocator;

// SAFETY: every call goes to one allocator, fixed at the first call and
// never changed, so memory is always returned to the allocator that gave
// it; both allocators uphold GlobalAlloc's contract themselves.
unsafe impl GlobalAlloc for Allocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe {
            if choice() == SYSTEM {
                System.alloc(layout)
            } else {
                mimalloc::MiMalloc.alloc(layout)
            }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        unsafe {
            if choice() == SYSTEM {
                System.alloc_zeroed(layout)
            } else {
                mimalloc::MiMalloc.alloc_zeroed(layout)
            }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` of the same (fixed) allocator.
        unsafe {
            if choice() == SYSTEM {
                System.dealloc(ptr, layout)
            } else {
                mimalloc::MiMalloc.dealloc(ptr, layout)
            }
        }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as in `dealloc`.
        unsafe {
            if choice() == SYSTEM {
                System.realloc(ptr, layout, new_size)
            } else {
                mimalloc::MiMalloc.realloc(ptr, layout, new_size)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_value_picks_the_allocator() {
        assert_eq!(Kind::from_env_value(None), Kind::Mimalloc);
        assert_eq!(Kind::from_env_value(Some(b"system")), Kind::System);
        assert_eq!(Kind::from_env_value(Some(b"SYSTEM")), Kind::System);
        assert_eq!(Kind::from_env_value(Some(b"mimalloc")), Kind::Mimalloc);
        assert_eq!(Kind::from_env_value(Some(b"")), Kind::Mimalloc);
        assert_eq!(Kind::System.name(), "system");
        assert_eq!(Kind::Mimalloc.name(), "mimalloc");
    }

    #[test]
    fn both_allocators_hand_out_usable_memory() {
        // Direct calls, whatever the test binary's own allocator is.
        for (kind, a) in [
            (Kind::System, &System as &dyn GlobalAlloc),
            (Kind::Mimalloc, &mimalloc::MiMalloc as &dyn GlobalAlloc),
        ] {
            for (size, align) in [(1, 1), (24, 8), (4096, 64), (3 << 20, 4096)] {
                let layout = Layout::from_size_align(size, align).unwrap();
                // SAFETY: non-zero size; the memory is written inside its
                // layout, grown once by realloc and freed by the same
                // allocator with the layout it has then.
                unsafe {
                    let p = a.alloc_zeroed(layout);
                    assert!(!p.is_null(), "{kind:?} {size}");
                    assert_eq!(p as usize % align, 0);
                    assert!(std::slice::from_raw_parts(p, size).iter().all(|&b| b == 0));
                    p.write_bytes(0xA5, size);
                    let q = a.realloc(p, layout, size * 2);
                    assert!(!q.is_null());
                    assert!(
                        std::slice::from_raw_parts(q, size)
                            .iter()
                            .all(|&b| b == 0xA5)
                    );
                    a.dealloc(q, Layout::from_size_align(size * 2, align).unwrap());
                }
            }
        }
    }
}
