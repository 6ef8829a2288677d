//! The safe slice entry points: a copy or a clear of memory held as a slice, drained before
//! the borrow ends.

use core::fmt;
use core::mem::MaybeUninit;

use crate::{FillMode, PageSize, clear, clear_cached, clear_streaming, drain, memcpy_nontemporal};

/// Error of the safe slice entry points ([`copy_nontemporal`], [`copy_to_uninit`],
/// [`clear_pages_in`]). Nothing was written when one is returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SliceError {
    /// Source and destination lengths differ.
    LengthMismatch {
        /// Destination length in bytes.
        dst: usize,
        /// Source length in bytes.
        src: usize,
    },
    /// The slice given to [`clear_pages_in`] is not a whole number of pages.
    NotWholePages {
        /// Length in bytes.
        len: usize,
        /// The page size asked for, in bytes.
        page_size: usize,
    },
}

impl fmt::Display for SliceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            SliceError::LengthMismatch { dst, src } => {
                write!(f, "destination is {dst} bytes but source is {src} bytes")
            }
            SliceError::NotWholePages { len, page_size } => {
                write!(f, "{len} bytes is not a whole number of {page_size}-byte pages")
            }
        }
    }
}

impl core::error::Error for SliceError {}

/// Safe streaming copy between two equally long slices; drains before returning.
///
/// # Errors
///
/// [`SliceError::LengthMismatch`] if the lengths differ (nothing is written).
pub fn copy_nontemporal(dst: &mut [u8], src: &[u8]) -> Result<(), SliceError> {
    if dst.len() != src.len() {
        return Err(SliceError::LengthMismatch { dst: dst.len(), src: src.len() });
    }
    // SAFETY: `src` is a valid `&[u8]`, readable and initialized for `len` bytes; `dst` is
    // writable for `len` bytes; a `&mut` and a `&` cannot overlap. `drain` runs before the
    // borrow of `dst` ends, so no access can race the streaming stores.
    unsafe { memcpy_nontemporal(dst.as_mut_ptr(), src.as_ptr(), dst.len()) };
    drain();
    Ok(())
}

/// Safe streaming copy into uninitialized memory; drains, then returns the destination
/// initialized.
///
/// # Errors
///
/// [`SliceError::LengthMismatch`] if the lengths differ (nothing is written).
pub fn copy_to_uninit<'a>(dst: &'a mut [MaybeUninit<u8>], src: &[u8]) -> Result<&'a mut [u8], SliceError> {
    if dst.len() != src.len() {
        return Err(SliceError::LengthMismatch { dst: dst.len(), src: src.len() });
    }
    let len = dst.len();
    let ptr = dst.as_mut_ptr().cast::<u8>();
    // SAFETY: as in `copy_nontemporal`: `src` readable and initialized for `len` bytes, `dst`
    // writable for `len` bytes (writing through `MaybeUninit<u8>` needs no initialization), no
    // overlap; drained before the memory is handed back.
    unsafe { memcpy_nontemporal(ptr, src.as_ptr(), len) };
    drain();
    // SAFETY: all `len` bytes were written above and ordered by the drain; the result borrows
    // `dst` exclusively for `'a`.
    Ok(unsafe { core::slice::from_raw_parts_mut(ptr, len) })
}

/// Safe [`clear`] of a whole slice, any length; drains before returning.
pub fn clear_slice(dst: &mut [u8]) {
    // SAFETY: `dst` is writable for its whole length; `drain` runs before the borrow ends.
    unsafe { clear(dst.as_mut_ptr(), dst.len()) };
    drain();
}

/// Safe memset: every byte of `dst` becomes `value`, with streaming stores when `mode` streams
/// at this length; drains before returning. With 0 it is the safe form of [`clear_streaming`]
/// and [`clear_cached`].
///
/// ```
/// use stream_hal::{FillMode, fill_bytes};
/// let mut buf = vec![0u8; 1 << 20];
/// fill_bytes(&mut buf[3..], 0xa5, FillMode::Streaming);
/// assert!(buf[..3].iter().all(|&b| b == 0) && buf[3..].iter().all(|&b| b == 0xa5));
/// ```
pub fn fill_bytes(dst: &mut [u8], value: u8, mode: FillMode) {
    if !mode.streams(dst.len()) {
        if value == 0 {
            // SAFETY: `dst` is writable for its whole length; the cached method issues normal
            // stores, and `drain` (a no-op for them) keeps the contract of `clear` regardless.
            unsafe { clear_cached(dst.as_mut_ptr(), dst.len()) };
            drain();
        } else {
            dst.fill(value);
        }
        return;
    }
    if value == 0 {
        // SAFETY: `dst` is writable for its whole length; `drain` runs before the borrow ends.
        unsafe { clear_streaming(dst.as_mut_ptr(), dst.len()) };
        drain();
        return;
    }
    // SAFETY: every bit pattern of 8 bytes is a valid `MaybeUninit<u64>`, and only initialized
    // `u64`s are written through the middle view below, so `dst`'s bytes stay initialized.
    let (head, words, tail) = unsafe { dst.align_to_mut::<MaybeUninit<u64>>() };
    head.fill(value);
    tail.fill(value);
    // `fill` streams the word into every slot and drains before returning.
    crate::fill(words, &u64::from_ne_bytes([value; 8]));
}

/// Safe [`clear`] of a slice of whole pages of `page_size`; drains before returning.
///
/// # Errors
///
/// [`SliceError::NotWholePages`] if `dst.len()` is not a multiple of the page size (nothing is
/// written).
pub fn clear_pages_in(dst: &mut [u8], page_size: PageSize) -> Result<(), SliceError> {
    if dst.len() % page_size.bytes() != 0 {
        return Err(SliceError::NotWholePages { len: dst.len(), page_size: page_size.bytes() });
    }
    clear_slice(dst);
    Ok(())
}
