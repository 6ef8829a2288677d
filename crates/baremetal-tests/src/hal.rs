//! Every call into `stream-hal`, so that a change of its API touches only this module, and the
//! method each clear uses for a size on this machine, from the rules stream-hal documents.

use core::mem::MaybeUninit;

#[cfg(target_arch = "riscv64")]
pub(crate) use stream_hal::BlockSize;
pub(crate) use stream_hal::{PAGE_SIZE, Record};

/// `stream_hal::backend()`'s short name (`x86_64-movnti`, `aarch64`, ...).
pub(crate) fn backend_name() -> &'static str {
    stream_hal::backend().name()
}

/// `stream_hal::backend()`'s description.
pub(crate) fn backend() -> stream_hal::Backend {
    stream_hal::backend()
}

/// Hands the CPU features the kernel detected to `stream-hal` (built with
/// `--cfg stream_hal_no_cpuid`, so it never executes CPUID itself, as early boot code in a
/// confidential guest requires).
///
/// # Safety
///
/// `clzero` is true only if this CPU (the only one the kernel runs on) has `CLZERO`
/// (`amd`, the CPUID vendor, only chooses between two clears every CPU has).
#[cfg(target_arch = "x86_64")]
pub(crate) unsafe fn set_cpu_features(clzero: bool, amd: bool) {
    let features = stream_hal::CpuFeatures::NONE.with_clzero(clzero).with_large_rep_stosb(amd);
    // SAFETY: the caller guarantees the `CLZERO` claim; `large_rep_stosb` is a speed choice
    // between instructions of every x86-64 CPU; no block-zeroing feature with a block size is
    // claimed.
    unsafe { stream_hal::set_cpu_features(features) };
}

/// Hands Zicboz (with its block size), as the device tree describes the hart, to `stream-hal`.
///
/// # Safety
///
/// `block` is `Some` only if this hart (the only one running) has Zicboz with this block size
/// and may execute `cbo.zero` at its privilege level.
#[cfg(target_arch = "riscv64")]
pub(crate) unsafe fn set_zicboz(block: Option<BlockSize>) {
    // SAFETY: the caller guarantees the claim.
    unsafe { stream_hal::set_cpu_features(stream_hal::CpuFeatures::NONE.with_zicboz(block)) };
}

/// The features `stream-hal` uses (what [`set_cpu_features`] set).
#[cfg(target_arch = "x86_64")]
pub(crate) fn cpu_features() -> stream_hal::CpuFeatures {
    stream_hal::cpu_features()
}

/// What `clear_streaming` uses on this CPU (`movnti`, `clzero`, `stnp`, ...).
pub(crate) fn streaming_clear_method() -> &'static str {
    stream_hal::streaming_clear_method()
}

/// The copy under test.
///
/// # Safety
///
/// As `stream_hal::memcpy_nontemporal`: `src` readable and `dst` writable for `len` bytes, no
/// overlap, and nothing touches `dst[..len]` before [`drain`].
pub(crate) unsafe fn copy_native(dst: *mut u8, src: *const u8, len: usize) {
    // SAFETY: forwarded; the caller upholds the same contract.
    unsafe { stream_hal::memcpy_nontemporal(dst, src, len) }
}

/// The reference copy (`stream_hal::generic`), plain stores.
///
/// # Safety
///
/// `src` readable and `dst` writable for `len` bytes, no overlap.
pub(crate) unsafe fn copy_reference(dst: *mut u8, src: *const u8, len: usize) {
    // SAFETY: forwarded; the caller upholds the same contract.
    unsafe { stream_hal::generic::memcpy_nontemporal(dst, src, len) }
}

/// Orders the streaming stores before what follows (`sfence` / `dmb ish`).
pub(crate) fn drain() {
    stream_hal::drain();
}

/// The three clearing entry points.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Clear {
    /// `clear_pages`: the method chosen by size.
    BySize,
    /// `clear_cached`.
    Cached,
    /// `clear_streaming`.
    Streaming,
}

impl Clear {
    /// All three, in the order the checks run them.
    pub(crate) const ALL: [Clear; 3] = [Clear::BySize, Clear::Cached, Clear::Streaming];

    /// The function's name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Clear::BySize => "clear_pages",
            Clear::Cached => "clear_cached",
            Clear::Streaming => "clear_streaming",
        }
    }

    /// Zeroes `npages` pages at `dst` through this entry point.
    ///
    /// # Safety
    ///
    /// `dst` writable for `npages * PAGE_SIZE` bytes (no overflow), and nothing touches them
    /// before [`drain`].
    pub(crate) unsafe fn run(self, dst: *mut u8, npages: usize) {
        match self {
            // SAFETY: forwarded; the caller upholds the contract of `clear_pages`, which the
            // other two entry points share.
            Clear::BySize => unsafe { stream_hal::clear_pages(dst, npages) },
            // SAFETY: as above, for the same `npages * PAGE_SIZE` bytes.
            Clear::Cached => unsafe { stream_hal::clear_cached(dst, npages * PAGE_SIZE) },
            // SAFETY: as above.
            Clear::Streaming => unsafe { stream_hal::clear_streaming(dst, npages * PAGE_SIZE) },
        }
    }

    /// The instruction this entry point uses for `len` bytes on this machine now.
    pub(crate) fn method(self, len: usize) -> &'static str {
        match self {
            Clear::Streaming => streaming_clear_method(),
            Clear::Cached => cached_clear_method(),
            Clear::BySize => by_size_clear_method(len),
        }
    }
}

#[cfg(target_arch = "x86_64")]
fn cached_clear_method() -> &'static str {
    "rep stosb"
}

#[cfg(target_arch = "x86_64")]
fn by_size_clear_method(len: usize) -> &'static str {
    let f = stream_hal::cpu_features();
    let streaming_max =
        if f.large_rep_stosb() && !f.clzero { stream_hal::CLEAR_REP_LARGE_MIN } else { usize::MAX };
    if len >= stream_hal::CLEAR_STREAMING_MIN && len < streaming_max {
        streaming_clear_method()
    } else {
        "rep stosb"
    }
}

#[cfg(target_arch = "aarch64")]
/// `DCZID_EL0` as this exception level sees it.
pub(crate) fn dczid() -> u64 {
    let value: u64;
    // SAFETY: DCZID_EL0 is readable at EL0 and above; no side effects.
    unsafe {
        core::arch::asm!("mrs {}, dczid_el0", out(reg) value, options(nomem, nostack, preserves_flags))
    };
    value
}

#[cfg(target_arch = "aarch64")]
fn cached_clear_method() -> &'static str {
    if dczid() & (1 << 4) != 0 { "stnp" } else { "dc zva" }
}

#[cfg(target_arch = "aarch64")]
fn by_size_clear_method(_len: usize) -> &'static str {
    cached_clear_method()
}

#[cfg(target_arch = "riscv64")]
fn cached_clear_method() -> &'static str {
    if stream_hal::cpu_features().zicboz().is_some() { "cbo.zero" } else { "write_bytes" }
}

#[cfg(target_arch = "riscv64")]
fn by_size_clear_method(len: usize) -> &'static str {
    if stream_hal::cpu_features().zicboz().is_some() {
        "cbo.zero"
    } else if len >= stream_hal::CLEAR_STREAMING_MIN {
        streaming_clear_method()
    } else {
        "write_bytes"
    }
}

/// The generic backend clears with `write_bytes` whatever the entry point.
#[cfg(target_arch = "loongarch64")]
fn cached_clear_method() -> &'static str {
    "write_bytes"
}

#[cfg(target_arch = "loongarch64")]
fn by_size_clear_method(_len: usize) -> &'static str {
    "write_bytes"
}

/// Streams `f(i)` into every slot and returns them initialized (`stream_hal::fill_with`, the
/// template fill's engine: it drains before returning).
pub(crate) fn fill_with<T: Record>(slots: &mut [MaybeUninit<T>], f: impl FnMut(usize) -> T) -> &mut [T] {
    stream_hal::fill_with(slots, f)
}

/// `stream_hal::scope` with one `push`, a `fill_n` of `template`, a `fill_n` that does not fit
/// (must fail and write nothing) and a `fill_with` of the rest. Returns the drained records and
/// whether the oversized `fill_n` was refused.
pub(crate) fn scope_mixed<'a, T: Record + Copy>(
    slots: &'a mut [MaybeUninit<T>],
    first: T,
    template: &T,
    n: usize,
    rest: impl FnMut(usize) -> T,
) -> (&'a mut [T], bool) {
    stream_hal::scope(slots, |w| {
        let pushed = w.push(first).is_ok();
        let filled = w.fill_n(template, n).is_ok();
        let refused = w.fill_n(template, w.remaining() + 1).is_err();
        w.fill_with(rest);
        pushed && filled && refused
    })
}

/// Streams `N` words given by value to `dst` (`stream_hal::store_words`).
///
/// # Safety
///
/// `dst` writable for `8 * N` bytes and 8-byte aligned; nothing touches it before [`drain`].
pub(crate) unsafe fn store_words<const N: usize>(dst: *mut [u64; N], words: [u64; N]) {
    // SAFETY: forwarded; the caller upholds the same contract.
    unsafe { stream_hal::store_words(dst, words) }
}
