//! Where buffers come from: the CUDA driver (page-locked) or the ordinary
//! allocator (the fallback on machines without a GPU).

use std::{alloc::Layout, ffi::c_void, fmt, ptr::NonNull};

use cudarc::driver::{
    DriverError, result,
    sys::{self, CUresult},
};

use crate::{ALIGN, CpuAccess, PinnedError, Result};

/// The allocator behind one pool.
#[derive(Debug)]
pub(crate) enum Backend {
    Pinned(CudaHost),
    Fallback,
}

impl Backend {
    pub(crate) fn is_pinned(&self) -> bool {
        matches!(self, Backend::Pinned(_))
    }

    pub(crate) fn device(&self) -> Option<usize> {
        match self {
            Backend::Pinned(host) => Some(host.ordinal),
            Backend::Fallback => None,
        }
    }

    /// Allocates `bytes` (a size class: non-zero, a multiple of [`ALIGN`])
    /// aligned to [`ALIGN`], zero-filled so that every byte is initialised.
    pub(crate) fn alloc(&self, bytes: usize, access: CpuAccess) -> Result<NonNull<u8>> {
        let _span =
            tracing::debug_span!("pinned_alloc", bytes, pinned = self.is_pinned()).entered();
        match self {
            Backend::Pinned(host) => host.alloc(bytes, access),
            Backend::Fallback => {
                let layout = fallback_layout(bytes)?;
                // SAFETY: `layout` has a non-zero size (size classes are at
                // least one page).
                let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
                NonNull::new(ptr).ok_or(PinnedError::OutOfHostMemory { bytes })
            }
        }
    }

    /// Frees a buffer from [`Backend::alloc`]; errors are logged, never raised,
    /// because this runs in `Drop`.
    ///
    /// # Safety
    /// `ptr` came from `self.alloc(bytes, _)` and is not used afterwards.
    pub(crate) unsafe fn free(&self, ptr: NonNull<u8>, bytes: usize) {
        match self {
            Backend::Pinned(host) => host.free(ptr, bytes),
            Backend::Fallback => match fallback_layout(bytes) {
                // SAFETY: the caller passes a pointer from `alloc_zeroed` with
                // this same layout (same size, same alignment).
                Ok(layout) => unsafe { std::alloc::dealloc(ptr.as_ptr(), layout) },
                Err(error) => tracing::error!(%error, "pinned-pool: cannot free a fallback buffer"),
            },
        }
    }
}

fn fallback_layout(bytes: usize) -> Result<Layout> {
    Layout::from_size_align(bytes, ALIGN).map_err(|_| PinnedError::TooLarge {
        requested: bytes,
        class_bytes: None,
        capacity: usize::MAX,
    })
}

/// A device's primary context, retained for as long as any buffer allocated
/// in it lives (page-locked allocations die with their context).
pub(crate) struct CudaHost {
    pub(crate) ordinal: usize,
    device: sys::CUdevice,
    ctx: sys::CUcontext,
}

impl fmt::Debug for CudaHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudaHost")
            .field("ordinal", &self.ordinal)
            .finish_non_exhaustive()
    }
}

// SAFETY: a CUcontext is a handle the driver API accepts from any thread;
// this type only pushes it onto the calling thread's context stack around
// each call and pops it again.
unsafe impl Send for CudaHost {}
// SAFETY: as above; `&CudaHost` offers nothing that mutates shared state
// outside the driver, which is thread-safe.
unsafe impl Sync for CudaHost {}

fn driver(call: &'static str, bytes: usize) -> impl FnOnce(DriverError) -> PinnedError {
    move |DriverError(code)| PinnedError::Driver { call, bytes, code }
}

impl CudaHost {
    /// Retains the primary context of device `ordinal`.
    pub(crate) fn open(ordinal: usize) -> Result<Self> {
        // Without libcuda, cudarc panics on the first driver call instead of
        // returning an error, so look for the library first.
        // SAFETY: this only tries to load the driver library under its usual
        // names; loading it runs libcuda's own initialisers, which every
        // process that uses CUDA runs anyway. No symbol is called.
        if !unsafe { sys::is_culib_present() } {
            return Err(PinnedError::NoDriver);
        }
        match result::init() {
            Ok(()) => {}
            Err(DriverError(CUresult::CUDA_ERROR_NO_DEVICE)) => {
                return Err(PinnedError::NoDevice { ordinal, count: 0 });
            }
            Err(error) => return Err(driver("cuInit", 0)(error)),
        }
        let count = match result::device::get_count() {
            Ok(count) => usize::try_from(count).unwrap_or(0),
            Err(DriverError(CUresult::CUDA_ERROR_NO_DEVICE)) => 0,
            Err(error) => return Err(driver("cuDeviceGetCount", 0)(error)),
        };
        if ordinal >= count {
            return Err(PinnedError::NoDevice { ordinal, count });
        }
        let ordinal_c =
            i32::try_from(ordinal).map_err(|_| PinnedError::NoDevice { ordinal, count })?;
        let device = result::device::get(ordinal_c).map_err(driver("cuDeviceGet", 0))?;
        // SAFETY: `device` came from cuDeviceGet after a successful cuInit.
        // The matching release is in `Drop`.
        let ctx = unsafe { result::primary_ctx::retain(device) }
            .map_err(driver("cuDevicePrimaryCtxRetain", 0))?;
        Ok(CudaHost {
            ordinal,
            device,
            ctx,
        })
    }

    /// Runs `f` with this device's primary context current on the calling
    /// thread, restoring whatever was current before.
    pub(crate) fn with_context<R>(
        &self,
        bytes: usize,
        f: impl FnOnce() -> Result<R, DriverError>,
        call: &'static str,
    ) -> Result<R> {
        // SAFETY: `self.ctx` is the primary context retained in `open` and
        // released only in `Drop`, so it is alive.
        unsafe { sys::cuCtxPushCurrent_v2(self.ctx) }
            .result()
            .map_err(driver("cuCtxPushCurrent", bytes))?;
        let out = f().map_err(driver(call, bytes));
        let mut popped = std::ptr::null_mut();
        // SAFETY: pops the context pushed above; `popped` is a valid out pointer.
        if let Err(error) = unsafe { sys::cuCtxPopCurrent_v2(&mut popped) }.result() {
            tracing::error!(?error, "pinned-pool: cuCtxPopCurrent failed");
        }
        out
    }

    fn alloc(&self, bytes: usize, access: CpuAccess) -> Result<NonNull<u8>> {
        let flags = match access {
            CpuAccess::ReadWrite => sys::CU_MEMHOSTALLOC_PORTABLE,
            CpuAccess::WriteOnly => {
                sys::CU_MEMHOSTALLOC_PORTABLE | sys::CU_MEMHOSTALLOC_WRITECOMBINED
            }
        };
        let raw = self.with_context(
            bytes,
            // SAFETY: a plain allocation with valid flags; the memory it returns
            // is zero-filled below before anyone reads it.
            || unsafe { result::malloc_host(bytes, flags) },
            "cuMemHostAlloc",
        )?;
        let ptr = NonNull::new(raw.cast::<u8>()).ok_or(PinnedError::Driver {
            call: "cuMemHostAlloc",
            bytes,
            code: CUresult::CUDA_ERROR_OUT_OF_MEMORY,
        })?;
        debug_assert_eq!(
            ptr.as_ptr() as usize % ALIGN,
            0,
            "cuMemHostAlloc is page-aligned"
        );
        // Reused buffers hand out the previous lease's bytes, which are
        // initialised; a fresh buffer must be initialised once too so that
        // `&[u8]` views of it are sound.
        // SAFETY: the driver just returned `bytes` writable bytes at `ptr`.
        unsafe { ptr.as_ptr().write_bytes(0, bytes) };
        Ok(ptr)
    }

    fn free(&self, ptr: NonNull<u8>, bytes: usize) {
        let freed = self.with_context(
            bytes,
            // SAFETY: the caller of `Backend::free` passes a pointer from
            // cuMemHostAlloc that nothing uses any more.
            || unsafe { result::free_host(ptr.as_ptr().cast::<c_void>()) },
            "cuMemFreeHost",
        );
        if let Err(error) = freed {
            tracing::error!(%error, "pinned-pool: freeing a pinned buffer failed");
        }
    }

    /// Page-locks `bytes` bytes at `ptr` (portable to every context).
    ///
    /// # Safety
    /// The caller holds `bytes` bytes at `ptr` exclusively, and keeps them
    /// alive and in place until [`CudaHost::unregister`].
    pub(crate) unsafe fn register(&self, ptr: *mut c_void, bytes: usize) -> Result<()> {
        let flags = sys::CU_MEMHOSTREGISTER_PORTABLE;
        self.with_context(
            bytes,
            || {
                // SAFETY: the caller's promise; registering does not change
                // the contents of the memory.
                unsafe { sys::cuMemHostRegister_v2(ptr, bytes, flags) }.result()
            },
            "cuMemHostRegister",
        )
    }

    /// Undoes [`CudaHost::register`]; errors are logged (this runs in `Drop`).
    ///
    /// # Safety
    /// `ptr` was registered by `register` and not yet unregistered.
    pub(crate) unsafe fn unregister(&self, ptr: *mut c_void, bytes: usize) {
        let done = self.with_context(
            bytes,
            // SAFETY: the caller's promise.
            || unsafe { sys::cuMemHostUnregister(ptr) }.result(),
            "cuMemHostUnregister",
        );
        if let Err(error) = done {
            tracing::error!(%error, "pinned-pool: unregistering host memory failed");
        }
    }
}

impl Drop for CudaHost {
    fn drop(&mut self) {
        // SAFETY: `device` is the device whose primary context `open` retained;
        // every buffer allocated in it has been freed (the pool's shared state,
        // which owns this, drops last).
        if let Err(error) = unsafe { result::primary_ctx::release(self.device) } {
            tracing::error!(?error, "pinned-pool: releasing the primary context failed");
        }
    }
}
