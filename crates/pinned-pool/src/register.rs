//! Page-locking memory the pool did not allocate, for a scope.

use std::{
    ffi::c_void,
    fmt,
    ops::{Deref, DerefMut},
    sync::Arc,
};

use crate::{Result, backend::Backend, pool::Shared};

/// A slice page-locked by [`Pool::register`](crate::Pool::register) until
/// this guard drops (`cuMemHostUnregister`). Derefs to the slice.
///
/// The guard borrows the slice mutably, so the memory can be neither freed
/// nor moved while it is registered.
pub struct Registered<'a, T> {
    slice: &'a mut [T],
    /// Registered with the driver (false in fallback mode or when empty).
    pinned: bool,
    /// Keeps the device's context alive while registered.
    shared: Arc<Shared>,
}

impl<T> fmt::Debug for Registered<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registered")
            .field("ptr", &self.slice.as_ptr())
            .field("len", &self.slice.len())
            .field("bytes", &size_of_val(self.slice))
            .field("pinned", &self.pinned)
            .finish()
    }
}

impl<'a, T> Registered<'a, T> {
    pub(crate) fn new(shared: Arc<Shared>, slice: &'a mut [T]) -> Result<Self> {
        let bytes = size_of_val(slice);
        let pinned = match &shared.backend {
            Backend::Pinned(host) if bytes > 0 => {
                let _span = tracing::debug_span!("pinned_register", bytes).entered();
                // SAFETY: `slice` is borrowed mutably for 'a, the guard's
                // lifetime, so the memory stays alive, in place and ours
                // until the guard's `Drop` unregisters it.
                unsafe { host.register(slice.as_mut_ptr().cast::<c_void>(), bytes) }?;
                true
            }
            _ => false,
        };
        Ok(Registered {
            slice,
            pinned,
            shared,
        })
    }

    /// Whether the memory is page-locked (`false` in fallback mode).
    pub fn is_pinned(&self) -> bool {
        self.pinned
    }
}

impl<T> Deref for Registered<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.slice
    }
}

impl<T> DerefMut for Registered<'_, T> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.slice
    }
}

impl<T> Drop for Registered<'_, T> {
    fn drop(&mut self) {
        if let (true, Backend::Pinned(host)) = (self.pinned, &self.shared.backend) {
            let bytes = size_of_val(self.slice);
            // SAFETY: `new` registered exactly this range (`pinned` is true).
            unsafe { host.unregister(self.slice.as_mut_ptr().cast::<c_void>(), bytes) };
        }
    }
}

/// Shared memory page-locked by
/// [`Pool::register_shared`](crate::Pool::register_shared) until this guard
/// drops (`cuMemHostUnregister`). The guard holds a clone of the `Arc`, so
/// the memory stays alive and in place while it is registered; it derefs to
/// the elements.
pub struct RegisteredShared<T> {
    data: Arc<Vec<T>>,
    /// Registered with the driver by this guard (false in fallback mode,
    /// when empty, or when the driver refused).
    pinned: bool,
    /// Keeps the device's context alive while registered.
    shared: Arc<Shared>,
}

impl<T> fmt::Debug for RegisteredShared<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegisteredShared")
            .field("ptr", &self.data.as_ptr())
            .field("len", &self.data.len())
            .field("bytes", &size_of_val(self.data.as_slice()))
            .field("pinned", &self.pinned)
            .finish()
    }
}

impl<T> RegisteredShared<T> {
    pub(crate) fn new(shared: Arc<Shared>, data: Arc<Vec<T>>) -> Result<Self> {
        let bytes = size_of_val(data.as_slice());
        let pinned = match &shared.backend {
            Backend::Pinned(host) if bytes > 0 => {
                let _span = tracing::debug_span!("pinned_register_shared", bytes).entered();
                // SAFETY: the memory belongs to the `Arc`'s vector, which this
                // guard keeps alive; a vector behind an `Arc` is never
                // reallocated while another clone exists (this guard's), so
                // it stays in place until `Drop` unregisters it. Registering
                // does not change its contents, so readers elsewhere are not
                // disturbed; nothing here writes through the pointer.
                unsafe { host.register(data.as_ptr().cast_mut().cast::<c_void>(), bytes) }?;
                true
            }
            _ => false,
        };
        Ok(RegisteredShared {
            data,
            pinned,
            shared,
        })
    }

    /// Whether this guard page-locked the memory (`false` in fallback mode).
    pub fn is_pinned(&self) -> bool {
        self.pinned
    }

    /// The registered vector.
    pub fn data(&self) -> &Arc<Vec<T>> {
        &self.data
    }
}

impl<T> Deref for RegisteredShared<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.data
    }
}

impl<T> Drop for RegisteredShared<T> {
    fn drop(&mut self) {
        if let (true, Backend::Pinned(host)) = (self.pinned, &self.shared.backend) {
            let bytes = size_of_val(self.data.as_slice());
            // SAFETY: `new` registered exactly this range (`pinned` is true);
            // the vector is still alive (this guard's `Arc` drops after).
            unsafe { host.unregister(self.data.as_ptr().cast_mut().cast::<c_void>(), bytes) };
        }
    }
}
