//! Leases: RAII handles to pool buffers, as bytes or typed slices.

use std::{
    fmt,
    marker::PhantomData,
    ops::{Deref, DerefMut},
    sync::Arc,
};

use crate::{
    ALIGN, CpuAccess, PinnedError, Result,
    pool::{RawBuf, Shared},
};

/// Plain old data: a `Copy` type for which every bit pattern of its size is
/// a valid value, so a lease's bytes (zeros, or whatever the previous lease
/// left) can be viewed as a slice of it.
///
/// Implemented for the primitive integers and floats and arrays of `Pod`.
///
/// # Safety
/// Implement it only for types with no padding, no invalid bit patterns
/// (no `bool`, `char`, enums, references, `NonZero*`), no pointers, and
/// alignment at most [`ALIGN`].
///
/// A type from another crate (a field element, say) cannot implement this
/// trait there (orphan rule); view it with [`Lease::as_slice_of_unchecked`]
/// or [`Lease::into_typed_unchecked`] instead, which take the same promise
/// as an `unsafe` call.
pub unsafe trait Pod: Copy + Send + Sync + 'static {}

macro_rules! pod {
    ($($t:ty),*) => {
        // SAFETY: primitive integers and floats have no padding and every
        // bit pattern is a value.
        $(unsafe impl Pod for $t {})*
    };
}
pod!(
    u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize, f32, f64
);
// SAFETY: an array of Pod has no padding between elements and every bit
// pattern of each element is valid.
unsafe impl<T: Pod, const N: usize> Pod for [T; N] {}

/// Checks that `len_bytes` bytes at an [`ALIGN`]-aligned address can be
/// viewed as `[T]`, and returns the element count.
fn elements_of<T>(len_bytes: usize) -> Result<usize> {
    let (size, align) = (size_of::<T>(), align_of::<T>());
    if size == 0 || align > ALIGN || !len_bytes.is_multiple_of(size) {
        return Err(PinnedError::Layout {
            type_name: std::any::type_name::<T>(),
            size,
            align,
            len_bytes,
        });
    }
    Ok(len_bytes / size)
}

/// A buffer leased from a [`Pool`](crate::Pool): `len()` usable bytes (the
/// size asked for) in a buffer of `capacity()` bytes, aligned to [`ALIGN`].
/// Derefs to `[u8]`. Returned to the pool when dropped, on any thread.
pub struct Lease {
    buf: RawBuf,
    len: usize,
    shared: Arc<Shared>,
}

// SAFETY: a lease owns its buffer exclusively; `&Lease` hands out only
// shared reads, `&mut Lease` exclusive writes. Returning it (in `Drop`) goes
// through the pool's mutex.
unsafe impl Send for Lease {}
// SAFETY: as above: through `&Lease` the bytes are only read.
unsafe impl Sync for Lease {}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("ptr", &self.buf.ptr)
            .field("len", &self.len)
            .field("capacity", &self.buf.class)
            .field("access", &self.buf.access)
            .field("pinned", &self.is_pinned())
            .finish()
    }
}

impl Lease {
    pub(crate) fn new(buf: RawBuf, len: usize, shared: Arc<Shared>) -> Lease {
        debug_assert!(len <= buf.class);
        Lease { buf, len, shared }
    }

    /// Usable length in bytes (what was asked for).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the usable length is zero.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Size of the underlying buffer (its size class).
    pub fn capacity(&self) -> usize {
        self.buf.class
    }

    /// Whether the buffer is page-locked (`false` in fallback mode).
    pub fn is_pinned(&self) -> bool {
        self.shared.backend.is_pinned()
    }

    /// The CPU access kind the buffer was allocated for.
    pub fn access(&self) -> CpuAccess {
        self.buf.access
    }

    /// Address of the first byte, for handing to a copy engine.
    pub fn as_ptr(&self) -> *const u8 {
        self.buf.ptr.as_ptr()
    }

    /// Mutable address of the first byte, for handing to a copy engine.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.buf.ptr.as_ptr()
    }

    /// The usable bytes.
    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: the buffer has `class >= len` bytes, all initialised (zeroed
        // when allocated), owned by this lease until it drops.
        unsafe { std::slice::from_raw_parts(self.buf.ptr.as_ptr(), self.len) }
    }

    /// The usable bytes, writable.
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_bytes`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.buf.ptr.as_ptr(), self.len) }
    }

    /// The usable bytes as `[T]`; fails with [`PinnedError::Layout`] unless
    /// `size_of::<T>()` divides [`Lease::len`].
    pub fn as_slice_of<T: Pod>(&self) -> Result<&[T]> {
        // SAFETY: `T: Pod` is valid for every bit pattern.
        unsafe { self.as_slice_of_unchecked() }
    }

    /// The usable bytes as `[T]`, writable; see [`Lease::as_slice_of`].
    pub fn as_mut_slice_of<T: Pod>(&mut self) -> Result<&mut [T]> {
        // SAFETY: `T: Pod` is valid for every bit pattern.
        unsafe { self.as_mut_slice_of_unchecked() }
    }

    /// The usable bytes as `[T]` for a `T` that is not [`Pod`] by trait, such
    /// as another crate's field element. Layout is still checked.
    ///
    /// # Safety
    /// `T` must satisfy [`Pod`]'s contract: every bit pattern of its size is
    /// a valid `T` (the bytes are zeros or a previous lease's leftovers), no
    /// padding, no pointers, no `Drop`.
    pub unsafe fn as_slice_of_unchecked<T>(&self) -> Result<&[T]> {
        let count = elements_of::<T>(self.len)?;
        // SAFETY: the buffer is ALIGN-aligned, `align_of::<T>() <= ALIGN`,
        // `count * size_of::<T>() == len` bytes are initialised and owned by
        // this lease, and the caller vouches any bit pattern is a valid T.
        Ok(unsafe { std::slice::from_raw_parts(self.buf.ptr.as_ptr().cast::<T>(), count) })
    }

    /// Writable version of [`Lease::as_slice_of_unchecked`].
    ///
    /// # Safety
    /// As for [`Lease::as_slice_of_unchecked`].
    pub unsafe fn as_mut_slice_of_unchecked<T>(&mut self) -> Result<&mut [T]> {
        let count = elements_of::<T>(self.len)?;
        // SAFETY: as in `as_slice_of_unchecked`; `&mut self` makes it exclusive.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.buf.ptr.as_ptr().cast::<T>(), count) })
    }

    /// Turns the lease into a typed one that derefs to `[T]`; fails (and
    /// returns the buffer to the pool) unless `size_of::<T>()` divides `len`.
    pub fn into_typed<T: Pod>(self) -> Result<TypedLease<T>> {
        // SAFETY: `T: Pod` is valid for every bit pattern.
        unsafe { self.into_typed_unchecked() }
    }

    /// [`Lease::into_typed`] for a `T` that is not [`Pod`] by trait.
    ///
    /// # Safety
    /// As for [`Lease::as_slice_of_unchecked`].
    pub unsafe fn into_typed_unchecked<T>(self) -> Result<TypedLease<T>> {
        let count = elements_of::<T>(self.len)?;
        Ok(TypedLease {
            lease: self,
            count,
            _elem: PhantomData,
        })
    }
}

impl Deref for Lease {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl DerefMut for Lease {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.as_bytes_mut()
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.shared.give_back(self.buf);
    }
}

/// A [`Lease`] viewed as `[T]`; derefs to `[T]`. Made by
/// [`Lease::into_typed`] (for [`Pod`] types) or the unsafe
/// [`Lease::into_typed_unchecked`] (for the caller's own plain types).
pub struct TypedLease<T> {
    lease: Lease,
    count: usize,
    _elem: PhantomData<T>,
}

impl<T> fmt::Debug for TypedLease<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TypedLease")
            .field("elem", &std::any::type_name::<T>())
            .field("len", &self.count)
            .field("lease", &self.lease)
            .finish()
    }
}

impl<T> TypedLease<T> {
    /// Whether the buffer is page-locked (`false` in fallback mode).
    pub fn is_pinned(&self) -> bool {
        self.lease.is_pinned()
    }

    /// The underlying byte lease.
    pub fn as_lease(&self) -> &Lease {
        &self.lease
    }

    /// Back to the byte lease (the buffer stays leased).
    pub fn into_lease(self) -> Lease {
        self.lease
    }
}

impl<T> Deref for TypedLease<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `count` elements fit in the lease's bytes and the layout was
        // checked when this was made; T's validity for any bytes was promised
        // by `T: Pod` or by the caller of `into_typed_unchecked`.
        unsafe { std::slice::from_raw_parts(self.lease.as_ptr().cast::<T>(), self.count) }
    }
}

impl<T> DerefMut for TypedLease<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        let count = self.count;
        // SAFETY: as in `deref`; `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.lease.as_mut_ptr().cast::<T>(), count) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Pool, PoolConfig, Request};

    #[test]
    fn layout_checks() {
        assert_eq!(elements_of::<u64>(64).unwrap(), 8);
        assert_eq!(elements_of::<[u8; 32]>(96).unwrap(), 3);
        assert!(matches!(
            elements_of::<u64>(12),
            Err(PinnedError::Layout { size: 8, .. })
        ));
        assert!(elements_of::<()>(8).is_err());
        #[repr(align(8192))]
        struct Huge;
        assert!(elements_of::<Huge>(8192).is_err());
    }

    #[test]
    fn typed_views_share_the_bytes() {
        let pool = Pool::fallback(PoolConfig::unbounded());
        let mut lease = pool.lease(Request::elems::<u64>(1000)).unwrap();
        assert_eq!(lease.len(), 8000);
        assert!(!lease.is_pinned());
        assert_eq!(lease.as_ptr() as usize % ALIGN, 0);
        lease.as_mut_slice_of::<u64>().unwrap()[999] = 0x0102_0304_0506_0708;
        assert_eq!(lease[7992..], 0x0102_0304_0506_0708u64.to_ne_bytes());
        let err = lease.as_slice_of::<[u8; 3]>().unwrap_err();
        assert!(
            err.to_string()
                .contains("cannot view 8000 bytes as [[u8; 3]]"),
            "{err}"
        );

        let mut typed = lease.into_typed::<u32>().unwrap();
        assert_eq!(typed.len(), 2000);
        typed[0] = 7;
        let lease = typed.into_lease();
        assert_eq!(lease.as_slice_of::<u32>().unwrap()[0], 7);
        drop(lease);
        assert_eq!(pool.stats().bytes_leased, 0);
    }

    /// A caller's own plain type, as another crate would view a field element.
    #[derive(Clone, Copy)]
    #[repr(transparent)]
    struct Limbs([u64; 4]);

    #[test]
    fn caller_types_through_the_unchecked_view() {
        let pool = Pool::fallback(PoolConfig::unbounded());
        let lease = pool.lease(Request::elems::<Limbs>(3)).unwrap();
        // SAFETY: Limbs is four u64s, valid for any bytes.
        let mut typed = unsafe { lease.into_typed_unchecked::<Limbs>() }.unwrap();
        typed[2] = Limbs([1, 2, 3, 4]);
        assert_eq!(typed.len(), 3);
        assert_eq!(
            typed.as_lease().as_slice_of::<u64>().unwrap()[8..],
            [1, 2, 3, 4]
        );
    }
}
