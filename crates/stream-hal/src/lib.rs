#![doc = include_str!("../README.md")]
#![no_std]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

#[cfg(any(test, feature = "std"))]
extern crate std;

// Removed features name their replacement (rustdoc, which documents every feature, passes).
#[cfg(all(feature = "no-cpuid", not(doc)))]
compile_error!(
    "stream-hal's `no-cpuid` feature was removed: a dependency's feature would turn detection off \
     for the whole build. Set `STREAM_HAL_NO_CPUID = \"1\"` in the `[env]` table of the final \
     binary's .cargo/config.toml (or `--cfg stream_hal_no_cpuid` in its rustflags), and drop the \
     feature"
);
#[cfg(all(feature = "force-generic", not(doc)))]
compile_error!(
    "stream-hal's `force-generic` feature was removed: a dependency's feature would change the \
     backend for the whole build. Set `STREAM_HAL_FORCE_GENERIC = \"1\"` in the `[env]` table of \
     the final binary's .cargo/config.toml (or `--cfg stream_hal_force_generic` in its \
     rustflags), and drop the feature"
);

mod arch;
mod backend;
mod cache;
mod cpu;
#[cfg(stream_hal_emulate)]
pub mod emulation;
mod fill;
mod record;
mod slice;
mod writer;

pub use backend::{Arch, Backend, BuildConfig, GenericReason};

pub use cache::{
    CacheInfo, CacheSource, NoCacheInfo, READ_SOON_FALLBACK, Reuse, WRITE_ONCE_FLOOR, auto_threshold,
    cache_info, set_cache_info, streaming_threshold,
};
pub use cpu::{BlockSize, CpuFeatures, cpu_features, restrict_cpu_features, set_cpu_features};
pub use fill::{FillMode, fill_records, template_fill, template_fill_with};
pub use record::Record;
pub use slice::{SliceError, clear_pages_in, clear_slice, copy_nontemporal, copy_to_uninit, fill_bytes};
pub use writer::{StreamWriter, WriterFull, fill, fill_with, scope};

/// The measurement kit of the repository's benchmark (`bench-kit` feature): wider fills than
/// the library's own and cache flushing for cold runs. Unstable and not part of the API.
#[cfg(feature = "bench-kit")]
#[doc(hidden)]
pub use arch::kit as bench_kit;

/// Paths the exported macros use; not part of the API.
#[doc(hidden)]
pub mod __private {
    #[cfg(feature = "bytemuck")]
    pub use bytemuck;
    #[cfg(feature = "zerocopy")]
    pub use zerocopy;
}

/// Size of the pages [`clear_pages`] clears (4 KiB); other sizes: [`clear_pages_of`].
pub const PAGE_SIZE: usize = 4096;

/// A base page size, for the page-counted clears ([`clear_pages_of`], [`clear_pages_in`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PageSize {
    /// 4 KiB: x86-64, and arm64's default.
    Size4K,
    /// 16 KiB: arm64 with 16 KiB granules.
    Size16K,
    /// 64 KiB: arm64 with 64 KiB granules (some server distributions), ppc64.
    Size64K,
}

impl PageSize {
    /// The size in bytes.
    #[must_use]
    pub const fn bytes(self) -> usize {
        match self {
            PageSize::Size4K => 4 << 10,
            PageSize::Size16K => 16 << 10,
            PageSize::Size64K => 64 << 10,
        }
    }

    /// The page size of `bytes` bytes, if it is one of the supported sizes.
    #[must_use]
    pub const fn from_bytes(bytes: usize) -> Option<PageSize> {
        match bytes {
            0x1000 => Some(PageSize::Size4K),
            0x4000 => Some(PageSize::Size16K),
            0x10000 => Some(PageSize::Size64K),
            _ => None,
        }
    }
}

/// `memcpy` with streaming stores on the aligned body (normal stores on the edges); any
/// alignment and length. It does **not** fence: call [`drain`] before anything reads,
/// overwrites or publishes `dst`.
///
/// # Safety
///
/// * `src` must be valid for reads of `len` bytes, and those bytes must be initialized (the
///   streaming backends load them as integers and vectors);
/// * `dst` must be valid for writes of `len` bytes;
/// * the two regions must not overlap;
/// * until [`drain`] has run on this thread, no code may read or write `dst[..len]` (on x86-64
///   the streaming stores are not ordered with later accesses, and the Rust memory model treats
///   such an access as a data race).
#[inline]
pub unsafe fn memcpy_nontemporal(dst: *mut u8, src: *const u8, len: usize) {
    // SAFETY: forwarded verbatim; the caller upholds the contract above, which is the contract
    // of every backend's `memcpy_nontemporal`.
    unsafe { arch::memcpy_nontemporal(dst, src, len) }
}

/// Orders this thread's earlier streaming stores before its later loads and stores (x86-64
/// `sfence`, aarch64 `dmb ish`, riscv64 `fence w, rw`, powerpc64 `sync`; generic: nothing).
#[inline]
pub fn drain() {
    arch::drain();
}

/// Hints the CPU to cache the line holding `p` for a read soon; never faults, whatever `p`
/// points to, and changes nothing a program can observe.
#[inline(always)]
pub fn prefetch<T>(p: *const T) {
    arch::prefetch(p.cast());
}

/// Smallest range (bytes) the x86-64 [`clear`] (and riscv64 without Zicboz) streams: 1 MiB,
/// past a private L2; below it cached stores keep the pages for the caller about to use them.
pub const CLEAR_STREAMING_MIN: usize = 1 << 20;

/// Smallest range (bytes) the x86-64 [`clear`] hands back to one `rep stosb` on AMD CPUs
/// without `CLZERO` ([`CpuFeatures::large_rep_stosb`]): 512 MiB, from where AMD's fast-string
/// microcode stores non-temporally itself. Other CPUs stream from [`CLEAR_STREAMING_MIN`] up.
pub const CLEAR_REP_LARGE_MIN: usize = 512 << 20;

/// Zeroes `len` bytes at `dst` with the architecture's best bulk primitive for that size (the
/// table in the [crate documentation](crate)); any alignment and length. [`clear_cached`] and
/// [`clear_streaming`] force one method.
///
/// # Safety
///
/// * `dst` must be valid for writes of `len` bytes;
/// * the range may be written with streaming stores: until [`drain`] has run on this thread, no
///   code may read or write it, and it must not be published to another thread before that
///   (the safe [`clear_slice`] drains for you).
#[inline]
pub unsafe fn clear(dst: *mut u8, len: usize) {
    // SAFETY: forwarded verbatim; the caller upholds the contract above.
    unsafe { arch::clear(dst, len) }
}

/// [`clear`] of `npages` 4 KiB pages ([`PAGE_SIZE`]): Linux's `clear_pages(addr, npages)`.
///
/// # Safety
///
/// As for [`clear`], with `len = npages * 4096`; that product must not overflow `usize`.
#[inline]
pub unsafe fn clear_pages(dst: *mut u8, npages: usize) {
    // SAFETY: the caller guarantees `npages * PAGE_SIZE` writable bytes (without overflow) and
    // the drain rule of `clear`.
    unsafe { arch::clear(dst, npages * PAGE_SIZE) }
}

/// [`clear`] of `npages` pages of `page_size`.
///
/// # Safety
///
/// As for [`clear`], with `len = npages * page_size.bytes()`; that product must not overflow
/// `usize`.
#[inline]
pub unsafe fn clear_pages_of(dst: *mut u8, npages: usize, page_size: PageSize) {
    // SAFETY: the caller guarantees `npages * page_size` writable bytes (without overflow) and
    // the drain rule of `clear`.
    unsafe { arch::clear(dst, npages * page_size.bytes()) }
}

/// [`clear`] with the cached method whatever the size (x86-64 `rep stosb`, aarch64 the
/// temporal MOPS set or `dc zva`, the block-zeroing instruction or `write_bytes` elsewhere).
///
/// # Safety
///
/// As for [`clear`].
#[inline]
pub unsafe fn clear_cached(dst: *mut u8, len: usize) {
    // SAFETY: forwarded verbatim.
    unsafe { arch::clear_cached(dst, len) }
}

/// [`clear`] with streaming stores whatever the size ([`streaming_clear_method`] says which).
///
/// # Safety
///
/// As for [`clear`].
#[inline]
pub unsafe fn clear_streaming(dst: *mut u8, len: usize) {
    // SAFETY: forwarded verbatim.
    unsafe { arch::clear_streaming(dst, len) }
}

/// The instruction [`clear_streaming`] uses with the CPU features in effect (`clzero`,
/// `movntdq`, `movnti`, `stnp`, `ntl.all sd`, `dcbz` or `write_bytes`), for a boot log.
#[must_use]
pub fn streaming_clear_method() -> &'static str {
    arch::streaming_clear_method()
}

/// Stores one `T` at `dst` with streaming stores, a sequence fixed at compile time. Does **not**
/// fence. The bytes of `*src` are copied: for a `T` that is not `Copy`, the caller decides what
/// becomes of `*src` afterwards.
///
/// If `*src` was just patched with 8-byte stores, the 16-byte reload stalls store forwarding:
/// build the record as a value or use [`store_record_words`].
///
/// # Safety
///
/// * `dst` must be valid for writes of `size_of::<T>()` bytes and must not overlap `src`;
/// * no other thread may write `*src` during the call (this matters only for types with
///   interior mutability: the bytes are read with plain loads);
/// * the same no-access-before-[`drain`] rule as for [`memcpy_nontemporal`] applies to `dst`.
#[inline(always)]
pub unsafe fn store_record<T: Record>(dst: *mut T, src: &T) {
    // SAFETY: `src` is a valid reference, so readable for `size_of::<T>()` bytes, all
    // initialized because `T: Record`; the caller upholds the rest.
    unsafe { arch::store_record(dst.cast::<u8>(), core::ptr::from_ref(src).cast::<u8>(), size_of::<T>()) }
}

/// [`store_record`] reading `src` with 8-byte loads only, for a `src` just patched by 8-byte
/// stores.
///
/// # Safety
///
/// As for [`store_record`].
#[inline(always)]
pub unsafe fn store_record_words<T: Record>(dst: *mut T, src: &T) {
    // SAFETY: as for `store_record`.
    unsafe {
        arch::store_record_words(dst.cast::<u8>(), core::ptr::from_ref(src).cast::<u8>(), size_of::<T>())
    }
}

/// Stores `N` 64-bit words given **by value** with streaming stores: a record built in
/// registers reaches the store without a round trip through memory. Does **not** fence.
///
/// # Safety
///
/// `dst` must be valid for writes of `8 * N` bytes and 8-byte aligned. The same
/// no-access-before-[`drain`] rule as for [`memcpy_nontemporal`] applies.
#[inline(always)]
pub unsafe fn store_words<const N: usize>(dst: *mut [u64; N], words: [u64; N]) {
    // SAFETY: forwarded; the caller upholds the contract above.
    unsafe { arch::store_words(dst.cast::<u64>(), words) }
}
/// The generic backend's functions (normal stores, no [`drain`] needed), compiled on every
/// target to compare the native backend against.
pub mod generic {
    pub use crate::arch::generic::{clear, memcpy_nontemporal};
}

/// Which backend this build uses and, when generic, why. Decided at compile time.
#[must_use]
pub const fn backend() -> Backend {
    arch::BACKEND
}

/// The backend and switches of this build ([`BuildConfig`]), for compile-time assertions.
#[must_use]
pub const fn build_config() -> BuildConfig {
    BuildConfig {
        backend: arch::BACKEND,
        no_cpuid: cfg!(stream_hal_no_cpuid),
        force_generic: cfg!(stream_hal_force_generic),
    }
}

impl CpuFeatures {
    /// Detects the features (x86-64 `CPUID`, Linux `AT_HWCAP2`, `riscv_hwprobe` or
    /// `AT_DCACHEBSIZE`); `None` where there is nothing to detect with. Runs even with `--cfg
    /// stream_hal_no_cpuid`, which only stops the crate from calling it by itself.
    #[must_use]
    pub fn detect() -> Option<CpuFeatures> {
        arch::detect_cpu_features()
    }
}

impl CacheInfo {
    /// Detects the caches now, uncached, even with `--cfg stream_hal_no_cpuid` (`CPUID` of the
    /// calling CPU, else sysfs CPU 0 with `std`). Where CPUs differ, pass the filling CPUs'
    /// caches with [`set_cache_info`].
    #[must_use]
    pub fn detect() -> CacheInfo {
        arch::detect_cache_info()
    }
}
