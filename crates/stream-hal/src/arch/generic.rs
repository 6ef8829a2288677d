//! Generic backend: plain stores through `copy_nonoverlapping` and `write_bytes`.
//!
//! Used on targets without a streaming backend, under every sanitizer (so that the sanitizer
//! instruments every store), under Miri, and with `--cfg stream_hal_force_generic`. It is compiled on
//! every target and exported as [`crate::generic`] so that the native backend can be tested
//! against it on one host.

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

/// No cache-maintenance instruction: nothing is flushed (the caller learns it from `false`).
///
/// # Safety
///
/// None beyond the surface's (`start..start + len` readable); nothing is accessed.
#[inline(always)]
#[allow(dead_code)] // unused when a streaming backend is selected
pub(crate) unsafe fn flush_cache_range(_start: *const u8, _len: usize) -> bool {
    false
}

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

/// Same as [`clear`] (the generic backend has one way to clear).
///
/// # Safety
///
/// As for [`clear`].
#[inline]
#[allow(dead_code)] // unused when a streaming backend is selected
pub(crate) unsafe fn clear_cached(dst: *mut u8, len: usize) {
    // SAFETY: same contract.
    unsafe { clear(dst, len) }
}

/// The method [`clear_streaming`] uses.
#[allow(dead_code)] // unused when a streaming backend is selected
pub(crate) fn streaming_clear_method() -> &'static str {
    "write_bytes"
}

/// Same as [`clear`] (the generic backend has one way to clear).
///
/// # Safety
///
/// As for [`clear`].
#[inline]
#[allow(dead_code)] // unused when a streaming backend is selected
pub(crate) unsafe fn clear_streaming(dst: *mut u8, len: usize) {
    // SAFETY: same contract.
    unsafe { clear(dst, len) }
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

/// Same as [`store_record`]: with normal stores the load width does not matter.
///
/// # Safety
///
/// As for [`store_record`].
#[inline(always)]
#[allow(dead_code)] // unused when a streaming backend is selected
pub(crate) unsafe fn store_record_words(dst: *mut u8, src: *const u8, size: usize) {
    // SAFETY: same contract as `store_record`.
    unsafe { store_record(dst, src, size) }
}

/// No wide registers: see [`crate::wide_fill_methods`].
#[allow(dead_code)] // unused when a streaming backend is selected
pub(crate) fn wide_fill_methods() -> impl Iterator<Item = crate::FillMethod> {
    core::iter::empty()
}
