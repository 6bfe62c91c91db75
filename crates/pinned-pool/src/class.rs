//! Size classes: which buffer size serves a request.

/// Alignment of every pool buffer (a page): any element type whose alignment
/// is at most this can be viewed in a lease.
pub const ALIGN: usize = 4096;

/// The smallest buffer the pool hands out.
pub const MIN_CLASS: usize = ALIGN;

/// The size of the buffer that serves a request of `bytes` bytes, or `None`
/// when that would overflow `usize`.
///
/// Four classes per doubling (2^k, 1.25·2^k, 1.5·2^k, 1.75·2^k), each a whole
/// number of pages: a buffer is at most 25% larger than asked for, and the
/// common power-of-two sizes (a 2^27-element vector) fit exactly. Coarser
/// classes would waste pinned memory at multi-GiB sizes; finer ones would
/// lower reuse between requests of nearby sizes.
pub fn size_class(bytes: usize) -> Option<usize> {
    if bytes <= MIN_CLASS {
        return Some(MIN_CLASS);
    }
    let log2 = usize::BITS - 1 - bytes.leading_zeros();
    let step = (1usize << (log2 - 2)).max(ALIGN);
    bytes.checked_next_multiple_of(step)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_requests_get_one_page() {
        assert_eq!(size_class(0), Some(4096));
        assert_eq!(size_class(1), Some(4096));
        assert_eq!(size_class(4096), Some(4096));
    }

    #[test]
    fn classes_are_pages_and_within_a_quarter() {
        for bytes in
            (1..5000usize)
                .map(|i| i * 997)
                .chain([1 << 20, (1 << 30) + 1, 3 << 30, (1 << 32) - 1])
        {
            let class = size_class(bytes).unwrap();
            assert!(class >= bytes, "{bytes} -> {class}");
            assert_eq!(class % ALIGN, 0, "{bytes} -> {class}");
            assert!(class <= bytes.max(MIN_CLASS) * 5 / 4 + ALIGN, "{bytes}");
        }
    }

    #[test]
    fn powers_of_two_fit_exactly_and_steps_are_quarters() {
        assert_eq!(size_class(1 << 30), Some(1 << 30));
        assert_eq!(size_class((1 << 30) + 1), Some(5 << 28));
        assert_eq!(size_class(6 << 28), Some(6 << 28));
        assert_eq!(size_class((6 << 28) + 1), Some(7 << 28));
        assert_eq!(size_class(4097), Some(8192));
        // PoRep-32G: 130,278,869 scalars of 32 bytes (3.88 GiB) -> 4 GiB.
        let porep = 130_278_869usize * 32;
        assert_eq!(size_class(porep), Some(1 << 32));
        // 2^31 + 1 bytes -> 2.5 GiB, not the 4 GiB of power-of-two classes.
        assert_eq!(size_class((1 << 31) + 1), Some(5 << 29));
    }

    #[test]
    fn overflow_is_none() {
        assert_eq!(size_class(usize::MAX), None);
        assert_eq!(size_class(usize::MAX - 5), None);
    }
}
