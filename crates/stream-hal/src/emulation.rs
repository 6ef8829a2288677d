//! Controls of the emulated backends (only with `--cfg stream_hal_emulate`).
//!
//! The native backends keep all their Rust code and replace each instruction with an ordinary
//! access of the same bytes and alignment, so Miri and the sanitizers check that code on any
//! host. Nothing is detected: the features are what
//! [`set_cpu_features`](crate::set_cpu_features) says, so claiming an instruction runs its path
//! through the emulation. The counters let a test check that every path ends with a drain
//! ([`undrained_stores`]) and which clear method ran ([`block_zeroes`], [`memory_sets`]).

use core::sync::atomic::{AtomicU64, Ordering};

/// The emulated `DCZID_EL0`: 4 = `dc zva` permitted with 64-byte blocks, as on most cores.
static DCZID: AtomicU64 = AtomicU64::new(4);

/// Weakly ordered stores since the last drain, over all threads.
static UNDRAINED: AtomicU64 = AtomicU64::new(0);

/// Block-zeroing instructions executed, over all threads.
static BLOCK_ZEROES: AtomicU64 = AtomicU64::new(0);

/// Block-zeroing instructions (`clzero`, `dc zva`, `cbo.zero`, `dcbz`) executed since the
/// program started, over all threads: compare two readings around a clear.
#[must_use]
pub fn block_zeroes() -> u64 {
    // Relaxed: a statistic, as `undrained_stores`.
    BLOCK_ZEROES.load(Ordering::Relaxed)
}

/// MOPS memory-set sequences executed, over all threads.
static MEMORY_SETS: AtomicU64 = AtomicU64::new(0);

/// aarch64 MOPS memory-set sequences executed since the program started, over all threads;
/// read it as [`block_zeroes`].
#[must_use]
pub fn memory_sets() -> u64 {
    // Relaxed: a statistic, as `undrained_stores`.
    MEMORY_SETS.load(Ordering::Relaxed)
}

/// An emulated MOPS set of zero: one byte-granular write, counted in [`memory_sets`] and, for
/// the non-temporal form, in [`undrained_stores`].
///
/// # Safety
///
/// `dst` is valid for writes of `len` bytes.
#[allow(dead_code)] // used by the aarch64 backend only
pub(crate) unsafe fn memory_set_zero(dst: *mut u8, len: usize, nontemporal: bool) {
    // SAFETY: the caller guarantees `len` writable bytes at `dst`; `u8` has no alignment.
    unsafe { core::ptr::write_bytes(dst, 0, len) };
    // Relaxed: a counter with no data published through it.
    MEMORY_SETS.fetch_add(1, Ordering::Relaxed);
    if nontemporal {
        note_weak_store();
    }
}

/// Counts one block-zeroing instruction (called by the emulated instructions).
pub(crate) fn note_block_zero() {
    // Relaxed: a counter with no data published through it.
    BLOCK_ZEROES.fetch_add(1, Ordering::Relaxed);
}

/// Streaming stores issued since the last drain, over all threads (a drain on any thread
/// resets it): read it in a test that streams on one thread.
#[must_use]
pub fn undrained_stores() -> u64 {
    // Relaxed: a statistic; the stores and fences it counts are ordered by their own thread.
    UNDRAINED.load(Ordering::Relaxed)
}

/// Counts one weakly ordered store (called by the emulated store instructions).
pub(crate) fn note_weak_store() {
    // Relaxed: a counter with no data published through it.
    UNDRAINED.fetch_add(1, Ordering::Relaxed);
}

/// Resets the count (called by the emulated drain instructions).
pub(crate) fn note_drain() {
    // Relaxed: as above.
    UNDRAINED.store(0, Ordering::Relaxed);
}

/// Every emulated drain: a sequentially consistent fence and the [`undrained_stores`] reset.
pub(crate) fn drain() {
    core::sync::atomic::fence(Ordering::SeqCst);
    note_drain();
}

/// Every emulated block-zeroing instruction: zeroes the `block`-aligned `block` bytes around
/// `p`, as the real one does; counted in [`block_zeroes`].
///
/// # Safety
///
/// `block` is a power of two and the `block`-aligned block of `block` bytes containing `p` is
/// valid for writes.
pub(crate) unsafe fn zero_block(p: *mut u8, block: usize) {
    let start = p.wrapping_sub(p.addr() & (block - 1));
    // SAFETY: `start` is the start of the block containing `p` (`block` is a power of two),
    // which the caller guarantees is valid for `block` bytes of writes.
    unsafe { core::ptr::write_bytes(start, 0, block) };
    note_block_zero();
}

/// Every emulated streaming store: a typed write of `value` at `dst` (each instruction picks a
/// `T` with its alignment requirement, so misalignment is caught), counted in
/// [`undrained_stores`].
///
/// # Safety
///
/// `dst` is valid for writes of a `T` and aligned for `T`.
#[inline(always)]
#[allow(dead_code)] // powerpc64 has no streaming store instruction, only `dcbz`
pub(crate) unsafe fn weak_store<T>(dst: *mut T, value: T) {
    // SAFETY: the caller guarantees `dst` is valid and aligned for a write of `T`.
    unsafe { dst.write(value) };
    note_weak_store();
}

/// What every emulated streaming block-zeroing instruction (`clzero`, `cbo.zero`, `dcbz`) does:
/// [`zero_block`], counted as a streaming store in [`undrained_stores`] too.
///
/// # Safety
///
/// As [`zero_block`].
#[allow(dead_code)] // aarch64's only block zeroing, `dc zva`, is not counted as a streaming store
pub(crate) unsafe fn weak_zero_block(p: *mut u8, block: usize) {
    note_weak_store();
    // SAFETY: the caller's contract is `zero_block`'s.
    unsafe { zero_block(p, block) };
}

/// Sets what the emulated aarch64 backend reads from `DCZID_EL0`: bits 3:0 `BS` (the `dc zva`
/// block is `4 << BS` bytes), bit 4 `DZP` (`dc zva` prohibited, the `stnp` fallback runs).
pub fn set_dczid(value: u64) {
    DCZID.store(value, Ordering::Relaxed);
}

/// The emulated `DCZID_EL0`.
#[must_use]
pub fn dczid() -> u64 {
    DCZID.load(Ordering::Relaxed)
}

/// Every emulated cache-line flush: a read of the byte at `p`, so Miri checks the address
/// arithmetic (the real instruction changes no value).
///
/// # Safety
///
/// `p` is valid for reads of one byte.
#[allow(dead_code)] // unused by the generic backend
pub(crate) unsafe fn flush_line(p: *const u8) {
    // SAFETY: the caller guarantees `p` is readable.
    let _ = unsafe { core::ptr::read_volatile(p) };
}
