//! # stream-hal: write-once streaming stores, portable
//!
//! `stream-hal` is the small hardware abstraction that the Linux memmap-init work asked for
//! (Alistair Popple's review of the 2026 zone-device template series: *"implement a memcpy
//! variant that is optimised for write-once streaming operations that can transparently
//! degrade to memcpy on unoptimised architectures"*). It has one public surface and a backend
//! per architecture, chosen once per build:
//!
//! | backend | copy | [`drain`] | [`clear_pages`] |
//! |---|---|---|---|
//! | x86-64, SSE2 enabled | `movntdq` (16 B) on the 16-byte-aligned body, `movnti` (4/8 B) to reach it, cached stores for the 0-3 edge bytes | `sfence` | `rep stosb` below 1 MiB; from 1 MiB `clzero` (AMD, see [`cpu_features`]) or `movntdq` zero stores (on AMD without `clzero` up to 512 MiB, then `rep stosb`) |
//! | x86-64 without SSE (`x86_64-unknown-none` and other soft-float kernel targets) | `movnti` from general-purpose registers | `sfence` | as above with `movnti` instead of `movntdq` |
//! | aarch64 | `stnp` pairs of general-purpose registers on the 16-byte-aligned body, cached edges | `dmb ish` | FEAT_MOPS `setpn`/`setmn`/`seten` over the whole range where [`cpu_features`] reports it (Linux: `HWCAP2_MOPS`), as Linux's `clear_page`; else `dc zva` blocks of `4 << DCZID_EL0.BS` bytes, or `stnp xzr, xzr` when `DCZID_EL0.DZP` forbids `dc zva` |
//! | riscv64 | `sd` preceded by the Zihintntl hint `ntl.all` on the 8-byte-aligned body, cached edges | `fence w, rw` | Zicboz `cbo.zero` blocks where [`cpu_features`] reports Zicboz (Linux: `riscv_hwprobe`); else `write_bytes` below 1 MiB and `ntl.all` zero stores from there |
//! | powerpc64 | `copy_nonoverlapping` (the ISA has no non-temporal store) | `sync` | `dcbz` blocks where [`cpu_features`] gives the block size (Linux: `AT_DCACHEBSIZE`); else `write_bytes` |
//! | generic (loongarch64, other targets, any sanitizer, Miri, `--cfg stream_hal_force_generic`) | `copy_nonoverlapping` | nothing | `write_bytes` |
//!
//! loongarch64 is generic on purpose: LoongArch has no non-temporal store and no
//! cache-block-zeroing instruction (Linux's own `clear_page` and `copy_page` there are loops of
//! plain `st.d`), so [`backend()`] reports [`GenericReason::NoStreamingInstructions`].
//!
//! [`backend()`] tells which one this build uses and, for the generic one, why. The choice comes
//! from `cfg(target_arch)` and `cfg(target_feature)`, so a custom kernel target (a target JSON
//! built with `-Zbuild-std`) gets the backend of its architecture. The module documentation of
//! `src/arch/riscv64.rs` and `src/arch/powerpc64.rs` says why those instructions, hints and
//! barriers.
//!
//! ## What to call first
//!
//! * Initializing an array of records (frame metadata, page tables, descriptors): the safe
//!   [`fill`], [`fill_with`], [`template_fill_with`] or, for several kinds of records in one
//!   pass, [`scope`]. Records implement [`Record`] (no padding bytes): through a derive with
//!   the `bytemuck` or `zerocopy` feature, or with an `unsafe impl`.
//! * Copying or zeroing a buffer you hold as a slice: [`copy_nontemporal`],
//!   [`copy_to_uninit`], [`clear_slice`], [`clear_pages_in`].
//! * Kernel-shaped raw code over pointers: [`memcpy_nontemporal`], [`clear`],
//!   [`clear_pages`], [`store_record`], [`store_words`], then one [`drain`] per batch.
//! * Choosing between normal and streaming stores by size: [`FillMode::AUTO`] (the fills'
//!   mode argument) streams records written once from 4 KiB up; see [Auto](#auto-when-a-fill-streams).
//! * Early boot, where feature detection must not run (`CPUID` traps in confidential guests)
//!   or cannot (a bare-metal riscv64 or powerpc64 kernel): `STREAM_HAL_NO_CPUID=1` (or `--cfg
//!   stream_hal_no_cpuid`), [`build_config`] to assert it at compile time, and
//!   [`set_cpu_features`] with what the kernel found before the first clear. See
//!   [Using it in a kernel](#using-it-in-a-kernel).
//!
//! ## Auto: when a fill streams
//!
//! [`FillMode::AUTO`] (and memmap-core's `Strategy::Auto`, which uses the same rule) streams
//! a fill of `bytes` when `bytes >=` [`streaming_threshold`]`(reuse, &`[`cache_info`]`())`:
//!
//! * the caller's [`Reuse`] hint: [`Reuse::WriteOnce`] (the default, [`FillMode::AUTO`]) for
//!   records written once and read much later, a kernel's frame metadata at boot: they stream
//!   from [`WRITE_ONCE_FLOOR`] (4 KiB) whatever the cache, so they neither push the caller's
//!   data out of the cache nor are read from memory before being overwritten.
//!   [`Reuse::ReadSoon`] ([`FillMode::READ_SOON`]) for records read right after the fill:
//!   they stream only from three quarters of one CPU's share of the last-level cache, glibc's
//!   non-temporal threshold for `memcpy` (12 MiB on a 2-vCPU guest with 32 MiB of L3);
//! * the machine's caches, [`cache_info`]: `CPUID` on x86-64 (leaf 4 on Intel, `0x8000_001D`
//!   on AMD), Linux's sysfs elsewhere (with the `std` feature), detected on first use and
//!   cached like the CPU features; [`CacheInfo::source`] says where they came from, as
//!   [`backend()`] says which backend runs (`cargo run -p stream-hal --example cache` prints
//!   both). Nothing is detected under `STREAM_HAL_NO_CPUID`, on bare metal (on aarch64
//!   `CCSIDR_EL1` traps at EL0) or under Miri: a kernel passes what it found with the safe
//!   [`set_cache_info`] (safe because a wrong size only costs speed).
//!
//! To override: [`FillMode::Auto`]`{ threshold_bytes }` takes a threshold measured by the
//! caller, [`FillMode::Cached`] and [`FillMode::Streaming`] one method whatever the size.
//! The x86-64 and riscv64 [`clear`] keep their own fixed size ([`CLEAR_STREAMING_MIN`]).
//!
//! ## Configuration
//!
//! Two switches are build settings, not Cargo features: each changes what the crate does for
//! the whole program, so it belongs to whoever builds the final binary, and a library deep in
//! the dependency graph must not be able to turn it on for everyone (Cargo unifies features).
//! Each is an environment variable read by the build script and, equivalently, a `--cfg` flag:
//!
//! * `STREAM_HAL_FORCE_GENERIC=1` or `--cfg stream_hal_force_generic`: use the generic
//!   (plain-store) backend even where a streaming one exists.
//! * `STREAM_HAL_NO_CPUID=1` or `--cfg stream_hal_no_cpuid`: never detect CPU features
//!   implicitly (no `CPUID`, no `riscv_hwprobe`, no auxiliary vector); without
//!   [`set_cpu_features`] the optional features are taken as absent, and
//!   [`wide_fill_methods`] is empty.
//!
//! Prefer the variable, in the `[env]` table of the final binary's `.cargo/config.toml`:
//!
//! ```toml
//! [env]
//! STREAM_HAL_NO_CPUID = "1"
//! ```
//!
//! A `RUSTFLAGS` in the environment (a CI job's, a developer's `-C target-cpu=native`)
//! replaces every `rustflags` of `.cargo/config.toml` without a warning, and a `--cfg` kept
//! there with it; `[env]` stays. The variable takes `1` or `true` (on), `0`, `false` or an
//! empty value (off); any other value fails the build with a message naming it. Either way,
//! [`build_config`] says at compile time what the build got, so that a kernel can assert it
//! (`const _: () = assert!(stream_hal::build_config().no_cpuid, "...")`). The `--cfg` flags
//! are declared to `unexpected_cfgs` by the build script; they are the only way for a build
//! system that does not run build scripts. The Cargo features `no-cpuid` and `force-generic`
//! that these switches once were now fail the build with a message naming the variable.
//!
//! Cargo features, all off by default:
//!
//! * `std`: reads the cache sizes from Linux's sysfs on the targets without `CPUID`
//!   (aarch64, riscv64, powerpc64 and the rest; see [`CacheInfo::detect`]). It links `std`;
//!   memmap-core's `std` feature turns it on. Nothing else changes;
//! * `bytemuck`: `bytemuck_record!(Type)` implements [`Record`] for a `bytemuck::NoUninit`
//!   type, so `#[derive(NoUninit)]` (or `Pod`) proves a record has no padding and no `unsafe`
//!   is written;
//! * `zerocopy`: `zerocopy_record!(Type)` does the same for a type that derives
//!   `zerocopy::IntoBytes` and `zerocopy::Immutable`.
//!
//! (A blanket `impl<T: NoUninit> Record for T` would overlap with the crate's own impls for
//! primitives and arrays, and the two features' impls with each other, so a macro per type
//! implements it instead; see [`Record`] for what is checked by whom.)
//!
//! ## MSRV
//!
//! Rust 1.85 (edition 2024), the workspace's `rust-version`; CI checks it with the
//! repository's `Cargo.lock`. Raising it is a minor-version change.
//!
//! ## no_std use
//!
//! The crate is always `#![no_std]` and needs no `alloc` (the `std` feature only reads sysfs
//! for the cache sizes): a kernel depends on it as it is,
//!
//! ```toml
//! [dependencies]
//! stream-hal = "0.1"
//! ```
//!
//! (with `STREAM_HAL_NO_CPUID = "1"` in the `[env]` table of the kernel's
//! `.cargo/config.toml` where detection must not run) and builds for `x86_64-unknown-none` (soft-float: the
//! `movnti`-only backend), `aarch64-unknown-none`, `riscv64gc-unknown-none-elf`,
//! `loongarch64-unknown-none` (generic), or its own target JSON with `-Zbuild-std=core`: the
//! backend follows the specification's `arch` and `features`, not its name (CI builds one for
//! a custom `x86_64-unknown-mykernel.json` and checks the backend and its instructions).
//! Without `std` there is no implicit feature detection beyond `CPUID` itself on x86-64 (none
//! on bare-metal aarch64, where `DCZID_EL0` is read directly and FEAT_MOPS is the kernel's to
//! pass; none on bare-metal riscv64 and powerpc64): a kernel that detects its CPU's features
//! early passes them with [`set_cpu_features`].
//!
//! ## Using it in a kernel
//!
//! The crate's rules are stated for "this thread"; in a kernel they read as follows.
//! `crates/example-kernel` in the repository is a small kernel crate to copy.
//!
//! * **The drain belongs to the CPU that issued the stores.** [`drain`] orders the streaming
//!   stores of the CPU it runs on (`sfence`, `dmb`, `fence`, `sync` are per-CPU). If the task
//!   that streams can be preempted and migrated to another CPU before it calls [`drain`], the
//!   drain runs on the wrong CPU and the first CPU's stores stay unordered. Keep the stores and
//!   their drain on one CPU (disable preemption or migration across the batch, as Linux does
//!   around its non-temporal copies), or make sure the context switch itself orders them (on
//!   x86-64 a serializing or locked instruction on the switch path orders non-temporal
//!   stores; a kernel must check its own switch path for one). The safe API ([`scope`],
//!   [`fill`], [`clear_slice`], ...) drains before it returns, so the window is the call.
//! * **Interrupts.** An interrupt handler that reads the destination of stores not yet
//!   drained may see old data: on x86-64 the non-temporal stores can still sit in
//!   write-combining buffers, and taking an interrupt is not a fence for them. Do not let a
//!   handler read memory that is being streamed; a handler that streams itself must [`drain`]
//!   before it returns, like any other code. The functions never block, allocate or take
//!   locks, so they may run with interrupts off and in handlers.
//! * **Other CPUs and devices.** Publish streamed memory to another CPU only after [`drain`]
//!   and with a release store (or a lock), as for any data. A device that reads the memory
//!   with DMA needs what the platform needs for normal stores too (cache maintenance on
//!   non-coherent systems): [`drain`] is a CPU barrier only. Use the crate on normal,
//!   cacheable memory: `dcbz` faults on caching-inhibited memory, `dc zva` on Device memory.
//! * **Vector state.** Only an x86-64 target with SSE2 enabled uses vector (`xmm`) registers;
//!   the soft-float `x86_64-unknown-none` gets the `movnti`-only backend, and aarch64,
//!   riscv64 and powerpc64 use general-purpose registers only. A kernel that does not save
//!   vector state builds for a soft-float target. [`wide_fill_methods`] (`ymm`/`zmm`) is
//!   never used by the library itself.
//! * **CPU features with `STREAM_HAL_NO_CPUID=1`** (or `--cfg stream_hal_no_cpuid`): nothing
//!   optional is used until the kernel says so: no `clzero`, `cbo.zero`, `dcbz` or MOPS memory
//!   set; the clears fall back to `rep stosb`/`movnti`, `dc zva`/`stnp`, hinted stores or
//!   `write_bytes`, all correct. The kernel detects the features itself (CPUID from a #VC-safe
//!   path; `ID_AA64ISAR2_EL1.MOPS` at EL1; the device tree's `riscv,isa-extensions`
//!   containing `zicboz` and `riscv,cboz-block-size`; `d-cache-block-size` on powerpc), and
//!   calls the `unsafe` [`set_cpu_features`] once per boot, before the first clear on any CPU.
//!   On riscv64 `cbo.zero` must also be enabled for the kernel's privilege level
//!   (`menvcfg.CBZE`, which the M-mode firmware sets for S-mode; OpenSBI does when the hart
//!   has Zicboz), else it traps as an illegal instruction. On a system whose CPUs differ, pass
//!   only what every CPU has. Without the switch, x86-64 runs `CPUID` on the first clear of
//!   1 MiB or more; `const _: () = assert!(stream_hal::build_config().no_cpuid)` makes a build
//!   that lost the switch fail instead.
//! * **Caches.** With `STREAM_HAL_NO_CPUID=1`, and on bare-metal aarch64, riscv64 and
//!   powerpc64 in any case, [`cache_info`] knows nothing until the kernel calls
//!   [`set_cache_info`] with what it read (`CLIDR_EL1`/`CCSIDR_EL1` at EL1, `CPUID` leaf 4 or
//!   `0x8000_001D` from a #VC-safe path, the device tree's cache nodes). Until then
//!   [`FillMode::AUTO`] still streams write-once records from 4 KiB, and
//!   [`FillMode::READ_SOON`] from 1 MiB ([`READ_SOON_FALLBACK`]).
//! * **Custom targets** (a target JSON built with `-Zbuild-std=core`): the backend follows the
//!   target's `arch` and `features` (for x86-64: SSE2 or not). When the kernel has no C
//!   library, build `core` with the memory functions too, `-Zbuild-std=core
//!   -Zbuild-std-features=compiler-builtins-mem`: the generic paths and the edges call
//!   `memcpy` and `memset` (`copy_nonoverlapping`, `write_bytes`), and without a definition the
//!   link fails with undefined `memcpy`/`memset`. The built-in `-none` targets get them from
//!   `compiler_builtins` already.
//! * **Instrumented kernels** (a KASAN-like build): use `STREAM_HAL_FORCE_GENERIC=1`, so
//!   the instrumentation sees every store. Rust's own sanitizers switch the backend off by
//!   themselves (see [`backend()`]).
//!
//! ## The ordering rule, and how this crate enforces it
//!
//! Streaming stores are weakly ordered: on x86-64 a later normal store (say, a flag that
//! publishes the buffer) can become visible before them, and the Rust memory model treats them
//! as if "another thread" performed them until a fence runs (see the safety notes of
//! `core::arch::x86_64::_mm_sfence`). So:
//!
//! * the raw, kernel-shaped API — [`memcpy_nontemporal`], [`store_record`], [`clear`],
//!   [`clear_pages`] — is `unsafe` and leaves the fence to the caller, who must call [`drain`]
//!   before the destination is read, written by other code, or published;
//! * the safe API — [`scope`], [`fill`], [`fill_with`], [`template_fill`],
//!   [`copy_nontemporal`], [`copy_to_uninit`], [`clear_slice`], [`clear_pages_in`] — drains
//!   before it hands the memory back, on every path including unwinding. A [`StreamWriter`] only exists inside [`scope`], so it cannot be leaked with
//!   `mem::forget` to skip the fence: reading or publishing streamed memory before the drain
//!   cannot be written in safe code.
//!
//! ## Fixed-size records
//!
//! [`store_record`] stores one `T` with a sequence of streaming stores whose length is a
//! compile-time constant (it is monomorphized on `T`), so for the 8- to 128-byte records this
//! crate is built for (a Linux `struct page` is 56 to 96 bytes) the compiler emits straight-line
//! stores and no runtime copy loop — what the upstream open-coded `switch (sizeof(struct page))`
//! tried to get, without putting arch code in the caller.
//!
//! ## Example
//!
//! ```
//! use core::mem::MaybeUninit;
//!
//! #[derive(Clone, Copy, PartialEq, Debug)]
//! #[repr(C, align(64))]
//! struct Slot { words: [u64; 8] }
//! // SAFETY: eight `u64`s fill the 64 bytes: no padding.
//! unsafe impl stream_hal::Record for Slot {}
//!
//! let mut memory = vec![MaybeUninit::<Slot>::uninit(); 1024];
//! // Each slot gets the template with its index patched into word 0; the writer drains
//! // (sfence on x86-64) before `slots` is handed back.
//! let template = Slot { words: [7; 8] };
//! let slots = stream_hal::fill_with(&mut memory, |i| {
//!     let mut s = template;
//!     s.words[0] = i as u64;
//!     s
//! });
//! assert_eq!(slots[5].words[0], 5);
//! assert_eq!(slots[5].words[1], 7);
//! ```
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

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
mod arch;
mod cache;
mod cpu;
#[cfg(stream_hal_emulate)]
pub mod emulation;
mod fill;
mod record;
mod writer;

use core::fmt;
use core::mem::MaybeUninit;

pub use cache::{
    CacheInfo, CacheSource, MAX_CACHE_LEVELS, NoCacheInfo, READ_SOON_FALLBACK, Reuse, WRITE_ONCE_FLOOR,
    auto_threshold, cache_info, set_cache_info, streaming_threshold,
};
pub use cpu::{BlockSize, CpuFeatures, cpu_features, restrict_cpu_features, set_cpu_features};
pub use fill::{FillMode, fill_records, template_fill, template_fill_with};
pub use record::Record;
pub use writer::{StreamWriter, WriterFull, fill, fill_with, scope};

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
    /// 16 KiB: arm64 with 16 KiB granules (Apple silicon).
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
/// A hint only: it never faults, whatever `p` points to (so it is safe to call with any
/// pointer), has no effect on program semantics, and is not held back by locks or fences, so
/// a loop that takes a lock per item can issue the prefetch for an item a few iterations ahead
/// and overlap its cache miss with the current item's work (the serial miss-per-lock pattern
/// of a boot-time free pass). x86-64: `prefetcht0`. aarch64: `prfm pldl1keep`. riscv64:
/// Zicbop `prefetch.r` (a no-op hint on harts without Zicbop). powerpc64: `dcbt`. Generic
/// backend (and therefore Miri and sanitizer builds): nothing.
#[inline(always)]
pub fn prefetch<T>(p: *const T) {
    arch::prefetch(p.cast());
}

/// Writes back and invalidates every cache line that holds a byte of `data`, and waits until
/// that is done: when it returns `true`, no cache of any CPU holds the range and memory has its
/// contents. Returns `false`, having done nothing, where the backend has no such instruction
/// (the generic backend, so also under Miri and the sanitizers; riscv64).
///
/// For measurements: a timed write followed by this call pays for the write-back that cached
/// stores defer (a template copy leaves its lines dirty in the caches, streaming stores
/// leave none), and a buffer flushed before a timed run starts it with the range in no cache.
/// It changes no value, so any readable data may be flushed, shared or not.
///
/// x86-64: `clflush` per 64-byte line between two `mfence`s. aarch64: `dc civac` per
/// `CTR_EL0.DminLine` line, then `dsb sy` (at EL0 this needs `SCTLR_EL1.UCI` and `UCT`, which
/// Linux sets). powerpc64: `dcbf` per data-cache block between two `sync`s.
#[inline]
pub fn flush_cache_range<T>(data: &[T]) -> bool {
    // SAFETY: a shared slice is valid for reads of all its bytes.
    unsafe { arch::flush_cache_range(data.as_ptr().cast(), core::mem::size_of_val(data)) }
}

/// Smallest range (bytes) the x86-64 [`clear`] (and the riscv64 one without Zicboz) clears
/// with streaming stores: 1 MiB, twice Zen 3's per-core L2. Below it cached stores keep the
/// pages in cache for the caller who is about to use them.
pub const CLEAR_STREAMING_MIN: usize = 1 << 20;

/// Smallest range (bytes) the x86-64 [`clear`] hands back to one `rep stosb` on AMD CPUs
/// without `CLZERO` ([`CpuFeatures::large_rep_stosb`]): 512 MiB. From about that size AMD's
/// fast-string microcode uses its own non-temporal protocol and beats `movntdq` stores; below
/// it (on AMD Zen 3 measured from 1 MiB to 256 MiB) it stays on the cached path at about a
/// third of the streaming rate. Intel's stays on the cached path at every size (half the
/// `movntdq` rate from 1 MiB to 2 GiB on a Xeon guest), so Intel CPUs stream from
/// [`CLEAR_STREAMING_MIN`] up, as AMD CPUs with `CLZERO` do.
pub const CLEAR_REP_LARGE_MIN: usize = 512 << 20;

/// Zeroes `len` bytes at `dst` with the architecture's best bulk primitive for that size.
///
/// This is the `clear_pages()` range primitive of the 2026 Linux batch-clear series, in bytes:
/// one call for a whole high-order allocation instead of one `clear_page()` per page.
///
/// * x86-64: `rep stosb` (Linux's choice on ERMS CPUs) below [`CLEAR_STREAMING_MIN`];
///   streaming zeroing from there up: `clzero` per 64-byte line where [`cpu_features`] reports
///   it (AMD), else `movntdq` (or `movnti` without SSE), on AMD CPUs without `CLZERO` up to
///   [`CLEAR_REP_LARGE_MIN`] and `rep stosb` beyond. On 2 MiB ranges AMD Zen 3 measured 9.3 GB/s for `rep stosb` (it stays
///   on the cached path), 25.0 for `movntdq` and 27.7 for `clzero`.
/// * aarch64: where [`cpu_features`] reports FEAT_MOPS (Linux: `HWCAP2_MOPS`), one
///   `setpn`/`setmn`/`seten` (non-temporal memory set) sequence over the range, as Linux's
///   `clear_page`; else `dc zva` in blocks of `4 << DCZID_EL0.BS` bytes, or `stnp xzr, xzr`
///   when `DCZID_EL0.DZP` prohibits `dc zva`.
/// * riscv64: `cbo.zero` blocks where [`cpu_features`] reports Zicboz; else `write_bytes`
///   below [`CLEAR_STREAMING_MIN`] and `ntl.all`-hinted zero stores from there.
/// * powerpc64: `dcbz` blocks where [`cpu_features`] gives the block size; else `write_bytes`.
/// * generic: `write_bytes`.
///
/// Any alignment and length are accepted (edges are cleared with normal stores), but
/// page-aligned ranges are the fast case. [`clear_cached`] and [`clear_streaming`] force one
/// method.
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

/// [`clear`] with the cached method whatever the size: x86-64 one `rep stosb`, aarch64 the
/// temporal MOPS memory set `setp`/`setm`/`sete` with FEAT_MOPS, else `dc zva` (or `stnp` where
/// prohibited), riscv64 `cbo.zero` (or `write_bytes` without Zicboz),
/// powerpc64 `dcbz` (or `write_bytes`), generic `write_bytes`.
///
/// # Safety
///
/// As for [`clear`].
#[inline]
pub unsafe fn clear_cached(dst: *mut u8, len: usize) {
    // SAFETY: forwarded verbatim.
    unsafe { arch::clear_cached(dst, len) }
}

/// [`clear`] with streaming stores whatever the size ([`streaming_clear_method`] says which:
/// x86-64 `clzero` or `movntdq`/`movnti` of zero, aarch64 `stnp xzr, xzr`, riscv64
/// `ntl.all`-hinted `sd`, powerpc64 `dcbz` (or `write_bytes`: it has no non-temporal store),
/// generic `write_bytes`).
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
/// `movntdq`, `movnti`, `stnp`, `ntl.all sd`, `dcbz` or `write_bytes`.
#[must_use]
pub fn streaming_clear_method() -> &'static str {
    arch::streaming_clear_method()
}

/// A streaming fill loop of one register width ([`wide_fill_methods`]).
#[derive(Debug, Clone, Copy)]
pub struct FillMethod {
    /// The instruction and register width: `vmovntdq_ymm`, `vmovntdq_zmm`.
    pub name: &'static str,
    fill: unsafe fn(*mut [u64; 8], usize, &[u64; 8]),
}

impl FillMethod {
    /// Stores `line` into each of the `lines` 64-byte lines at `dst` with this method's
    /// streaming stores. Does **not** fence.
    ///
    /// # Safety
    ///
    /// * `dst` is 64-byte aligned and valid for writes of `lines * 64` bytes (the product does
    ///   not overflow);
    /// * until [`drain`] has run on this thread, no code reads or writes those bytes, and they
    ///   are not published to another thread before that.
    #[inline]
    pub unsafe fn fill(&self, dst: *mut [u64; 8], lines: usize, line: &[u64; 8]) {
        // SAFETY: forwarded; a `FillMethod` is only made by `wide_fill_methods`, for a width the
        // CPU and OS support, and the caller upholds the rest of the contract above.
        unsafe { (self.fill)(dst, lines, line) }
    }
}

/// The streaming fills of registers wider than the library's own paths use, that this CPU has:
/// `vmovntdq` of `ymm` (AVX, with the OS saving the state) and of `zmm` (AVX-512F) on x86-64,
/// narrowest first, detected with `CPUID` and `XGETBV` on every call.
///
/// They exist so that a benchmark can check whether wider stores reach a higher fill rate than
/// [`fill`] (SSE2 `movntdq`) on a given CPU: the limit a fill is judged against is the best
/// method of the machine. The library does not use them itself: a kernel must save the
/// vector state before it touches `ymm`/`zmm` registers, and on the CPUs measured so far the
/// wider stores reach the same rate. Empty on aarch64, riscv64 and powerpc64, on x86-64 targets
/// without SSE (the soft-float kernel targets), on the generic backend (so under Miri and
/// sanitizers), in emulated builds and with `--cfg stream_hal_no_cpuid`.
pub fn wide_fill_methods() -> impl Iterator<Item = FillMethod> {
    arch::wide_fill_methods()
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
/// of it stalls store-to-load forwarding (measured 3x slower than no template at all). Build the
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

/// The backend this build of `stream-hal` uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Backend {
    /// x86-64 streaming stores with an `sfence` drain.
    X86_64 {
        /// `true` when SSE2 is enabled, so 16-byte `movntdq` stores are used for aligned runs;
        /// `false` on soft-float kernel targets such as `x86_64-unknown-none`, where only the
        /// general-purpose-register `movnti` is used.
        vector: bool,
    },
    /// aarch64 `stnp` streaming stores with a `dmb ish` drain, `dc zva` clearing (MOPS memory
    /// sets where [`cpu_features`] reports FEAT_MOPS).
    Aarch64,
    /// riscv64: `ntl.all`-hinted stores with a `fence w, rw` drain, Zicboz `cbo.zero` clearing
    /// where [`cpu_features`] reports it.
    Riscv64,
    /// powerpc64: plain copies (the ISA has no non-temporal store) with a `sync` drain, `dcbz`
    /// clearing where [`cpu_features`] gives the block size. Not [streaming](Backend::is_streaming).
    Powerpc64,
    /// Plain stores (`copy_nonoverlapping`, `write_bytes`); the reason says why.
    Generic(GenericReason),
    /// An architecture's backend with its instructions emulated by ordinary accesses, for
    /// checking it under Miri and the sanitizers (`--cfg stream_hal_emulate`; see
    /// [`emulation`](crate#emulation)). Nothing is streamed.
    Emulated(Arch),
}

/// An architecture with a streaming backend (for [`Backend::Emulated`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Arch {
    /// x86-64, with or without SSE2 (see [`Backend::X86_64`]).
    X86_64 {
        /// SSE2 enabled.
        vector: bool,
    },
    /// aarch64.
    Aarch64,
    /// riscv64.
    Riscv64,
    /// powerpc64.
    Powerpc64,
}

/// Why a build uses the generic backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GenericReason {
    /// The target architecture has no streaming backend (the architecture is named).
    UnsupportedTarget(&'static str),
    /// A sanitizer is enabled (named as rustc names it: `address`, `memory`, `thread`,
    /// `hwaddress`, `leak`, ...; several are comma-separated). Sanitizers cannot see inside
    /// inline assembly, so the generic backend keeps every store visible to them.
    Sanitizer(&'static str),
    /// The build runs under Miri, which cannot execute inline assembly.
    Miri,
    /// `--cfg stream_hal_force_generic` is set.
    ForceGeneric,
    /// The architecture (named) has no streaming store and no block-zeroing instruction, so
    /// plain stores are its best: loongarch64.
    NoStreamingInstructions(&'static str),
}

impl Backend {
    /// `true` if this backend issues streaming (non-temporal) stores: x86-64, aarch64 and
    /// riscv64 (`ntl.all`-hinted stores). powerpc64 only zeroes with `dcbz`.
    #[must_use]
    pub const fn is_streaming(&self) -> bool {
        matches!(self, Backend::X86_64 { .. } | Backend::Aarch64 | Backend::Riscv64)
    }

    /// Short machine-readable name: `x86_64`, `x86_64-movnti`, `aarch64`, `riscv64`,
    /// `powerpc64`, `generic`, or one of those architecture names followed by `-emulated`
    /// (`x86_64-movnti-emulated`, ...).
    #[must_use]
    pub const fn name(&self) -> &'static str {
        match self {
            Backend::X86_64 { vector: true } => "x86_64",
            Backend::X86_64 { vector: false } => "x86_64-movnti",
            Backend::Aarch64 => "aarch64",
            Backend::Riscv64 => "riscv64",
            Backend::Powerpc64 => "powerpc64",
            Backend::Generic(_) => "generic",
            Backend::Emulated(Arch::X86_64 { vector: true }) => "x86_64-emulated",
            Backend::Emulated(Arch::X86_64 { vector: false }) => "x86_64-movnti-emulated",
            Backend::Emulated(Arch::Aarch64) => "aarch64-emulated",
            Backend::Emulated(Arch::Riscv64) => "riscv64-emulated",
            Backend::Emulated(Arch::Powerpc64) => "powerpc64-emulated",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Backend::X86_64 { vector: true } => f.write_str("x86-64 streaming (movntdq + movnti, sfence)"),
            Backend::X86_64 { vector: false } => f.write_str("x86-64 streaming (movnti only, sfence)"),
            Backend::Aarch64 => f.write_str("aarch64 streaming (stnp, dmb ish, dc zva)"),
            Backend::Riscv64 => {
                f.write_str("riscv64 streaming (ntl.all + sd, fence w,rw, cbo.zero with Zicboz)")
            }
            Backend::Powerpc64 => f.write_str("powerpc64 (plain copies, sync, dcbz)"),
            Backend::Generic(reason) => write!(f, "generic ({reason})"),
            Backend::Emulated(Arch::X86_64 { vector: true }) => {
                f.write_str("x86-64 backend, instructions emulated (movntdq + movnti)")
            }
            Backend::Emulated(Arch::X86_64 { vector: false }) => {
                f.write_str("x86-64 backend, instructions emulated (movnti only)")
            }
            Backend::Emulated(Arch::Aarch64) => f.write_str("aarch64 backend, instructions emulated"),
            Backend::Emulated(Arch::Riscv64) => f.write_str("riscv64 backend, instructions emulated"),
            Backend::Emulated(Arch::Powerpc64) => f.write_str("powerpc64 backend, instructions emulated"),
        }
    }
}

impl fmt::Display for GenericReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GenericReason::UnsupportedTarget(arch) => write!(f, "unsupported target: {arch}"),
            GenericReason::Sanitizer(name) => write!(f, "sanitizer: {name}"),
            GenericReason::Miri => f.write_str("Miri"),
            GenericReason::ForceGeneric => f.write_str("cfg stream_hal_force_generic"),
            GenericReason::NoStreamingInstructions(arch) => {
                write!(f, "{arch} has no streaming store or block-zeroing instruction")
            }
        }
    }
}

/// Which backend this build uses and, when generic, why. Decided at compile time.
#[must_use]
pub const fn backend() -> Backend {
    arch::BACKEND
}

/// What this build of `stream-hal` was compiled with: the backend and the two switches.
///
/// Returned by the `const fn` [`build_config`], so that a kernel asserts at compile time that
/// its build took the switches it relies on; the image then cannot be built without them (a
/// `RUSTFLAGS` in the environment replaces every `rustflags` of `.cargo/config.toml`, and with
/// them a `--cfg` kept there):
///
/// ```
/// use stream_hal::{Backend, BuildConfig, build_config};
///
/// /// The stream-hal build a soft-float x86-64 kernel in a confidential guest expects: no
/// /// `CPUID` of stream-hal's own (it traps there) and the `movnti`-only backend.
/// const fn as_expected(c: BuildConfig) -> bool {
///     c.no_cpuid && matches!(c.backend, Backend::X86_64 { vector: false })
/// }
/// // The kernel writes:
/// // const _: () = assert!(
/// //     as_expected(build_config()),
/// //     "stream-hal built without STREAM_HAL_NO_CPUID=1 or for the wrong target",
/// // );
/// // This doctest is a hosted build with detection on, where the expectation is false:
/// const _: () = assert!(!as_expected(build_config()));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct BuildConfig {
    /// The backend ([`backend()`]).
    pub backend: Backend,
    /// Implicit CPU feature detection is off (`STREAM_HAL_NO_CPUID=1` or `--cfg
    /// stream_hal_no_cpuid`): no `CPUID`, `riscv_hwprobe` or auxiliary vector; only what
    /// [`set_cpu_features`] passes is used.
    pub no_cpuid: bool,
    /// The generic backend was forced (`STREAM_HAL_FORCE_GENERIC=1` or `--cfg
    /// stream_hal_force_generic`).
    pub force_generic: bool,
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

/// The portable reference implementation, compiled on every target.
///
/// These are the generic backend's functions, exported so that users (and this crate's own
/// differential tests) can compare the native backend against them on one host. They issue
/// only normal stores, so they need no [`drain`].
pub mod generic {
    pub use crate::arch::generic::{clear, memcpy_nontemporal};
}
