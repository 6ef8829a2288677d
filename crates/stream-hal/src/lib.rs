#![doc = include_str!("../README.md")]
#![no_std]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

#[cfg(any(test, feature = "std"))]
extern crate std;

// The Cargo features these switches once were: a dependency that still turns one on gets told
// what replaced it instead of an unknown-feature error (rustdoc, which documents every feature,
// is let through).
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

/// Size of the pages [`clear_pages`] clears: 4 KiB, the base page of x86-64 and of arm64's
/// default configuration. Other page sizes: [`clear_pages_of`].
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

/// Copies `len` bytes from `src` to `dst` with write-once streaming stores where the backend has
/// them; the result is the same as `memcpy`.
///
/// Any alignment of `dst` and `src` and any length (including 0) is accepted. Misaligned edge
/// bytes are written with normal stores, the aligned body with streaming stores (see the table
/// in the [crate documentation](crate)). It does **not** fence: call [`drain`] before anything
/// reads, overwrites or publishes `dst`.
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

/// Orders every streaming store this thread issued before the call before any load or store
/// that follows it.
///
/// x86-64: `sfence`. aarch64: `dmb ish` (see `arch/aarch64.rs` for why a full inner-shareable
/// barrier and not `dmb ishst`). riscv64: `fence w, rw`. powerpc64: `sync` (see their module
/// documentation). Generic backend: nothing, because it only issues normal stores.
#[inline]
pub fn drain() {
    arch::drain();
}

/// Hints the CPU to bring the cache line holding `p` into the caches, for a read (or a
/// read-modify-write) that follows soon.
///
/// A hint only: it never faults, whatever `p` points to, and changes nothing a program can
/// observe, so a loop can prefetch an item a few iterations ahead of the one it works on.
/// x86-64 `prefetcht0`, aarch64 `prfm pldl1keep`, riscv64 Zicbop `prefetch.r`, powerpc64
/// `dcbt`; nothing on the generic backend.
#[inline(always)]
pub fn prefetch<T>(p: *const T) {
    arch::prefetch(p.cast());
}

/// Smallest range (bytes) the x86-64 [`clear`] (and the riscv64 one without Zicboz) clears
/// with streaming stores: 1 MiB, larger than a core's private L2. Below it cached stores keep
/// the pages in cache for the caller who is about to use them.
pub const CLEAR_STREAMING_MIN: usize = 1 << 20;

/// Smallest range (bytes) the x86-64 [`clear`] hands back to one `rep stosb` on AMD CPUs
/// without `CLZERO` ([`CpuFeatures::large_rep_stosb`]): 512 MiB, from where AMD's fast-string
/// microcode stores non-temporally itself. Other CPUs stream from [`CLEAR_STREAMING_MIN`] up.
pub const CLEAR_REP_LARGE_MIN: usize = 512 << 20;

/// Zeroes `len` bytes at `dst` with the architecture's best bulk primitive for that size.
///
/// The `clear_pages()` range primitive of the Linux batch-clear series, in bytes: one call
/// for a whole high-order allocation. Which instruction per architecture and size (with
/// [`CLEAR_STREAMING_MIN`], [`CLEAR_REP_LARGE_MIN`] and the [`cpu_features`] in effect): the
/// table in the [crate documentation](crate). Any alignment and length are accepted (edges get
/// normal stores); [`clear_cached`] and [`clear_streaming`] force one method.
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

/// [`clear`] of `npages` pages of `page_size` (a 16 KiB-page or 64 KiB-page kernel passes its
/// own page count and size).
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

/// What [`clear_streaming`] (and [`clear`] for large ranges) uses on this CPU: `clzero`,
/// `movntdq`, `movnti`, `stnp`, `ntl.all sd`, `dcbz` or `write_bytes`. For a boot log or a
/// report, beside [`backend()`]: it also depends on the CPU features in effect.
#[must_use]
pub fn streaming_clear_method() -> &'static str {
    arch::streaming_clear_method()
}

/// Stores one `T` at `dst` with streaming stores, as a fixed sequence of stores whose length
/// is known at compile time (no runtime copy loop for records of 8 to 128 bytes).
///
/// On x86-64 with SSE2 a 16-byte-aligned destination gets `movntdq` stores loaded with 16-byte
/// loads; otherwise `movnti` stores loaded with 8-byte loads. Edge bytes of records whose size
/// is not a multiple of 4 are stored normally. Does **not** fence. The bytes of `*src` are
/// copied: for a `T` that is not `Copy`, the caller decides what becomes of `*src` afterwards
/// (the safe writer forgets it, having moved it into the slot).
///
/// Performance note: if you just patched `*src` in memory with 8-byte stores, a 16-byte reload
/// of it stalls store-to-load forwarding (slower than no template at all). Build the
/// record as a value (the optimizer keeps it in registers) or use [`store_record_words`], which
/// reloads with the same 8-byte width.
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

/// Like [`store_record`], but reads `src` with 8-byte loads only, which is the fast choice when
/// `src` was just patched in memory by 8-byte stores (a wider load of such bytes stalls store
/// forwarding). On x86-64 with SSE2 the words are paired in XMM registers and stored with
/// `movntdq`; without SSE2 (and for misaligned destinations) each word gets a `movnti`.
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

/// Stores a record of `N` 64-bit words given **by value** with streaming stores (x86-64:
/// `movntdq` of word pairs combined in registers, `movnti` for an odd word or an 8-mod-16
/// destination; aarch64: `stnp`). Nothing is read from memory, so a record built in registers
/// (a template copy with per-page fields patched) goes from registers to the store without a
/// round trip through the stack: the fastest way to stream records that change per slot.
/// Does **not** fence.
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
/// The portable reference implementation, compiled on every target.
///
/// These are the generic backend's functions, exported so that users (and this crate's own
/// differential tests) can compare the native backend against them on one host. They issue
/// only normal stores, so they need no [`drain`].
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
    /// Detects the features (x86-64: `CPUID`; aarch64 Linux: `AT_HWCAP2`; riscv64 Linux:
    /// `riscv_hwprobe`; powerpc64 Linux: `AT_DCACHEBSIZE`). `None` where there is nothing to
    /// detect with (other architectures and operating systems, the generic backend, emulated
    /// builds). It runs the detection even with `--cfg stream_hal_no_cpuid`, which only stops the
    /// crate from calling it by itself.
    #[must_use]
    pub fn detect() -> Option<CpuFeatures> {
        arch::detect_cpu_features()
    }
}

impl CacheInfo {
    /// Detects the caches now, without caching the answer (even with `--cfg
    /// stream_hal_no_cpuid`, which only stops the crate from calling it by itself): `CPUID` on
    /// x86-64, Linux's sysfs elsewhere with `std`, nothing on bare metal and under Miri (see
    /// the crate documentation). `CPUID` describes the CPU the call runs on, sysfs CPU 0:
    /// where CPUs differ, pass the caches of the CPUs that fill with [`set_cache_info`].
    #[must_use]
    pub fn detect() -> CacheInfo {
        arch::detect_cache_info()
    }
}
