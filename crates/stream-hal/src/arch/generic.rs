//! Generic backend: plain stores through `copy_nonoverlapping` and `write_bytes`.
//!
//! Compiled on every target and exported as [`crate::generic`], the reference the native
//! backends are tested against.

use core::ptr;

/// Copies `len` bytes with normal stores (`copy_nonoverlapping`, i.e. `memcpy`).
///
/// # Safety
///
/// `src` must be valid for reads and `dst` for writes of `len` bytes, and the regions must not
/// overlap.
#[inline]
pub unsafe fn memcpy_nontemporal(dst: *mut u8, src: *const u8, len: usize) {
    // SAFETY: the caller guarantees both regions are valid for `len` bytes and disjoint.
    unsafe { ptr::copy_nonoverlapping(src, dst, len) }
}

/// Nothing to order: this backend issues only normal stores.
#[inline(always)]
#[allow(dead_code)] // unused when a streaming backend is selected
pub(crate) fn drain() {}

/// No prefetch instruction: a hint may be dropped (and must be, under Miri and sanitizers,
/// which could not see through one).
#[inline(always)]
#[allow(dead_code)] // unused when a streaming backend is selected
pub(crate) fn prefetch(_p: *const u8) {}

/// No CPU features to detect.
#[allow(dead_code)] // unused when a streaming backend is selected
pub(crate) fn detect_cpu_features() -> Option<crate::CpuFeatures> {
    None
}

/// The caches from Linux's sysfs (with the `std` feature); elsewhere the caller passes them
/// with [`crate::set_cache_info`].
#[allow(dead_code)] // unused when a streaming backend is selected
pub(crate) fn detect_cache_info() -> crate::CacheInfo {
    crate::cache::detect_from_sysfs()
}

/// Zeroes `len` bytes with `write_bytes` (`memset`).
///
/// # Safety
///
/// `dst` must be valid for writes of `len` bytes.
#[inline]
pub unsafe fn clear(dst: *mut u8, len: usize) {
    // SAFETY: the caller guarantees `dst` is valid for `len` bytes.
    unsafe { ptr::write_bytes(dst, 0, len) }
}

// The generic backend has one way to clear.
#[allow(unused_imports)] // unused when a streaming backend is selected
pub(crate) use self::{clear as clear_cached, clear as clear_streaming};

/// The method of the streaming clear.
#[allow(dead_code)] // unused when a streaming backend is selected
pub(crate) fn streaming_clear_method() -> &'static str {
    "write_bytes"
}

/// Stores one `size`-byte record with a normal copy (`size` is a compile-time constant at
/// every call site, so this is a fixed sequence of moves).
///
/// # Safety
///
/// `src` valid for reads and `dst` for writes of `size` bytes; no overlap.
#[inline(always)]
#[allow(dead_code)] // unused when a streaming backend is selected
pub(crate) unsafe fn store_record(dst: *mut u8, src: *const u8, size: usize) {
    // SAFETY: the caller guarantees both regions are valid for `size` bytes and disjoint.
    unsafe { ptr::copy_nonoverlapping(src, dst, size) }
}

/// Stores `N` words with normal stores.
///
/// # Safety
///
/// `dst` writable for `8 * N` bytes and 8-byte aligned.
#[inline(always)]
#[allow(dead_code)] // unused when a streaming backend is selected
pub(crate) unsafe fn store_words<const N: usize>(dst: *mut u64, words: [u64; N]) {
    // SAFETY: the caller guarantees `dst` is writable and aligned for `[u64; N]`.
    unsafe { dst.cast::<[u64; N]>().write(words) }
}

// With normal stores the load width does not matter.
#[allow(unused_imports)] // unused when a streaming backend is selected
pub(crate) use self::store_record as store_record_words;

/// The benchmark's kit: nothing (no cache-maintenance instruction, no wide register).
#[cfg(feature = "bench-kit")]
#[allow(unused_imports)] // unused when a streaming backend is selected
pub(crate) use super::kit::none as kit;
