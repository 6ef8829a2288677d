//! Controls of the emulated backends (only with `--cfg stream_hal_emulate`).
//!
//! Under `cfg(stream_hal_emulate)` the x86-64 and aarch64 backends keep all of their Rust code
//! (address arithmetic, alignment steps, edge handling, the loads of the source) and replace
//! each instruction with an ordinary Rust access of the same bytes and alignment, so Miri and
//! the sanitizers check that code on any host:
//!
//! ```sh
//! RUSTFLAGS="--cfg stream_hal_emulate" cargo +nightly miri test -p stream-hal
//! RUSTFLAGS="--cfg stream_hal_emulate" cargo +nightly miri test -p stream-hal --target aarch64-unknown-linux-gnu
//! ```
//!
//! [`backend`](crate::backend) then reports [`Backend::Emulated`](crate::Backend::Emulated).
//! CPUID is never executed (set x86-64 features with [`set_cpu_features`](crate::set_cpu_features)
//! to run the `clzero` path); `DCZID_EL0` reads the value given to [`set_dczid`].
//!
//! The emulation also counts the weakly ordered stores (`movnti`, `movntdq`, `clzero`, `stnp`)
//! issued since the last drain (`sfence`, `dmb ish`): [`undrained_stores`]. A test that streams
//! on one thread can check that every path, unwinding included, ends with a drain.

use core::sync::atomic::{AtomicU64, Ordering};

/// The emulated `DCZID_EL0`: 4 = `dc zva` permitted with 64-byte blocks, as on most cores.
static DCZID: AtomicU64 = AtomicU64::new(4);

/// Weakly ordered stores since the last drain, over all threads.
static UNDRAINED: AtomicU64 = AtomicU64::new(0);

/// How many weakly ordered stores (`movnti`, `movntdq`, `clzero`, `stnp`) were issued since the
/// last drain (`sfence` or `dmb ish`), counted over all threads: a drain on any thread resets
/// it, so read it in a test that streams on one thread.
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
