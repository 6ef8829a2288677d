//! Backend selection. The build script decides (`cfg(stream_hal_backend = ...)`); this module
//! maps the decision to one implementation of the crate-internal surface:
//!
//! * `unsafe fn memcpy_nontemporal(dst: *mut u8, src: *const u8, len: usize)`
//! * `fn drain()`
//! * `fn prefetch(p: *const u8)` — a cache hint that never faults
//! * `unsafe fn clear_pages(dst: *mut u8, npages: usize)`
//! * `unsafe fn store_record(dst: *mut u8, src: *const u8, size: usize)` — `size` is always a
//!   compile-time constant at the call site (`size_of::<T>()`), and the function is
//!   `#[inline(always)]`, so every branch on it folds away
//! * `unsafe fn store_record_words(dst: *mut u8, src: *const u8, size: usize)`
//! * `unsafe fn store_words<const N: usize>(dst: *mut u64, words: [u64; N])`
//! * `const BACKEND: Backend`
//!
//! `cfg(miri)` is checked here as well as in the build script, so that a build script that was
//! not rerun under Miri can never put inline assembly in front of the interpreter.

pub(crate) mod dczid;
pub(crate) mod generic;
pub(crate) mod x86_clear;

cfg_if::cfg_if! {
    if #[cfg(all(stream_hal_backend = "x86_64", target_arch = "x86_64", not(miri)))] {
        mod x86_64;
        pub(crate) use self::x86_64::{
            clear_pages, clear_pages_cached, clear_pages_streaming, drain, memcpy_nontemporal, prefetch, store_record,
            store_record_words, store_words, streaming_clear_method,
        };
        pub(crate) const BACKEND: crate::Backend = crate::Backend::X86_64 { vector: x86_64::VECTOR };
    } else if #[cfg(all(stream_hal_backend = "aarch64", target_arch = "aarch64", not(miri)))] {
        mod aarch64;
        pub(crate) use self::aarch64::{
            clear_pages, clear_pages_cached, clear_pages_streaming, drain, memcpy_nontemporal, prefetch, store_record,
            store_record_words, store_words, streaming_clear_method,
        };
        pub(crate) const BACKEND: crate::Backend = crate::Backend::Aarch64;
    } else {
        pub(crate) use self::generic::{
            clear_pages, clear_pages_cached, clear_pages_streaming, drain, memcpy_nontemporal, prefetch, store_record,
            store_record_words, store_words, streaming_clear_method,
        };
        pub(crate) const BACKEND: crate::Backend = crate::Backend::Generic(generic_reason());
    }
}

/// The reason recorded by the build script, as a [`crate::GenericReason`].
#[allow(dead_code)] // unused when a streaming backend is selected
const fn generic_reason() -> crate::GenericReason {
    if cfg!(miri) {
        return crate::GenericReason::Miri;
    }
    let reason = env!("STREAM_HAL_GENERIC_REASON");
    let detail = env!("STREAM_HAL_GENERIC_DETAIL");
    if const_eq(reason, "force-generic") {
        crate::GenericReason::ForceGeneric
    } else if const_eq(reason, "miri") {
        crate::GenericReason::Miri
    } else if const_eq(reason, "sanitizer") {
        crate::GenericReason::Sanitizer(detail)
    } else if const_eq(reason, "unsupported-target") {
        crate::GenericReason::UnsupportedTarget(detail)
    } else {
        // The build script chose a native backend for an architecture this module was not
        // compiled for (a custom target whose name says x86_64 but whose `target_arch` does
        // not): report the architecture as unsupported.
        crate::GenericReason::UnsupportedTarget(env!("STREAM_HAL_TARGET_ARCH"))
    }
}

/// `str` equality usable in a `const fn`.
#[allow(dead_code)]
const fn const_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}
