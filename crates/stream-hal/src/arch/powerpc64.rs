//! powerpc64 backend (little- and big-endian; CI runs ppc64le).
//!
//! * Copy and record stores: plain stores; the Power ISA has no non-temporal store (its touch
//!   hints prefetch, the opposite of what a write-once store wants).
//! * Clear: `dcbz` (zeroes a block without reading it) where [`crate::cpu_features`] gives the
//!   block size, as Linux's `clear_page`; `write_bytes` without it (never guessed: `dcbz`
//!   zeroes the whole block around its address).
//! * Drain: `sync`.
//!
//! Why this barrier and these hints: `docs/stream-hal.md` in the repository.

use core::ptr;

use crate::CpuFeatures;

/// The instructions of this backend, one function each. Under `cfg(stream_hal_emulate)` each is
/// replaced by an ordinary Rust access of the same bytes.
pub(crate) mod insn {
    #[cfg(not(stream_hal_emulate))]
    use core::arch::asm;

    /// `dcbz 0, p`: zeroes the whole `block`-byte data-cache block that contains `p`.
    ///
    /// # Safety
    ///
    /// `block` is the processor's data-cache block size, and the whole block containing `p`
    /// must be valid for writes and cacheable.
    #[inline(always)]
    pub(super) unsafe fn dcbz(p: *mut u8, block: usize) {
        #[cfg(not(stream_hal_emulate))]
        // SAFETY: the caller guarantees the block around `p` is writable, cacheable memory of
        // this block size; `dcbz` writes exactly that block, changes no register or condition
        // field, uses no stack.
        unsafe {
            let _ = block;
            asm!("dcbz 0, {p}", p = in(reg_nonzero) p, options(nostack, preserves_flags));
        }
        #[cfg(stream_hal_emulate)]
        // SAFETY: the caller guarantees the block containing `p` is writable; `block` is the
        // `dcbz` block size, a power of two.
        unsafe {
            crate::emulation::weak_zero_block(p, block);
        }
    }

    barrier!(
        /// `sync`: see the backend's documentation.
        sync = "sync"
    );

    prefetch_hint!(
        /// `dcbt 0, p`: a touch hint; never raises an exception (an inaccessible block is not
        /// fetched).
        dcbt(reg_nonzero) = "dcbt 0, {p}"
    );
}

/// `AT_DCACHEBSIZE` (arch/powerpc/include/uapi/asm/auxvec.h).
const AT_DCACHEBSIZE: core::ffi::c_ulong = 19;

/// Linux with glibc or musl: the `dcbz` block size from the kernel's `AT_DCACHEBSIZE`.
/// Elsewhere, and when emulating, `None`: a kernel passes the device tree's
/// `d-cache-block-size` with [`crate::set_cpu_features`].
pub(crate) fn detect_cpu_features() -> Option<CpuFeatures> {
    let block = super::auxval(AT_DCACHEBSIZE)?;
    Some(CpuFeatures::NONE.with_dcbz(usize::try_from(block).ok().and_then(crate::BlockSize::new)))
}

/// The caches from Linux's sysfs (with the `std` feature); elsewhere the caller passes them
/// with [`crate::set_cache_info`].
pub(crate) use crate::cache::detect_from_sysfs as detect_cache_info;

/// Plain `memcpy`: see the module documentation.
///
/// # Safety
///
/// `src` readable and `dst` writable for `len` bytes, no overlap.
#[inline]
pub(crate) unsafe fn memcpy_nontemporal(dst: *mut u8, src: *const u8, len: usize) {
    // SAFETY: same contract.
    unsafe { ptr::copy_nonoverlapping(src, dst, len) }
}

/// Plain stores of a `size`-byte record (`size` is a compile-time constant at every call site).
///
/// # Safety
///
/// `src` readable and `dst` writable for `size` bytes, no overlap.
#[inline(always)]
pub(crate) unsafe fn store_record(dst: *mut u8, src: *const u8, size: usize) {
    // SAFETY: same contract.
    unsafe { ptr::copy_nonoverlapping(src, dst, size) }
}

/// As [`store_record`].
pub(crate) use self::store_record as store_record_words;

/// Plain stores of `N` words.
///
/// # Safety
///
/// `dst` writable for `8 * N` bytes and 8-byte aligned.
#[inline(always)]
pub(crate) unsafe fn store_words<const N: usize>(dst: *mut u64, words: [u64; N]) {
    // SAFETY: the caller guarantees `dst` is writable and aligned for `[u64; N]`.
    unsafe { dst.cast::<[u64; N]>().write(words) }
}

// `drain` is `sync` (see the module documentation), `prefetch` is `dcbt`.
pub(crate) use insn::{dcbt as prefetch, sync as drain};

/// The benchmark's kit ([`crate::arch::kit`]): `dcbf` of a range; no wide fill.
#[cfg(feature = "bench-kit")]
pub(crate) mod kit {
    pub(crate) use crate::arch::kit::none::wide_fill_methods;

    /// `dcbf 0, p`: writes back (if modified) and invalidates the data-cache block holding `p`.
    ///
    /// # Safety
    ///
    /// `p` is valid for reads (a mapped address: the instruction faults like a load).
    #[inline(always)]
    unsafe fn dcbf(p: *const u8) {
        #[cfg(not(stream_hal_emulate))]
        // SAFETY: the caller guarantees `p` is readable, so the instruction cannot fault; it
        // changes no value in memory and no register.
        unsafe {
            core::arch::asm!("dcbf 0, {p}", p = in(reg_nonzero) p, options(nostack, preserves_flags));
        }
        #[cfg(stream_hal_emulate)]
        // SAFETY: as above.
        unsafe {
            crate::emulation::flush_line(p);
        }
    }

    /// See [`crate::arch::kit::flush_cache_range`]: `sync`, `dcbf` of every data-cache block,
    /// `sync` (Linux's `flush_dcache_range`). The block is the one [`crate::cpu_features`]
    /// reports, else 32 bytes, the smallest any 64-bit POWER processor has (a smaller step only
    /// flushes blocks twice).
    ///
    /// # Safety
    ///
    /// `start..start + len` is valid for reads.
    #[inline]
    pub(crate) unsafe fn flush_cache_range(start: *const u8, len: usize) -> bool {
        let block = super::dcbz_block().unwrap_or(32);
        super::insn::sync();
        let flush = |p| {
            // SAFETY: `for_each_line` passes only addresses inside the range, which is readable.
            unsafe { dcbf(p) }
        };
        // SAFETY: the range is readable (caller) and the block size is a power of two.
        unsafe { crate::arch::kit::for_each_line(start, len, block, flush) };
        super::insn::sync();
        true
    }
}

/// The `dcbz` block size, if [`crate::cpu_features`] gives one.
#[inline]
fn dcbz_block() -> Option<usize> {
    crate::cpu_features().dcbz().map(crate::BlockSize::bytes)
}

/// See [`crate::clear`]: `dcbz` where the block size is known, else `write_bytes`.
///
/// # Safety
///
/// `dst` writable (cacheable) for `len` bytes.
#[inline]
pub(crate) unsafe fn clear(dst: *mut u8, len: usize) {
    match dcbz_block() {
        // SAFETY: the caller guarantees `len` writable bytes; the block size is the
        // processor's (detected, or vouched for by `set_cpu_features`).
        Some(block) => unsafe { clear_dcbz(dst, len, block) },
        // SAFETY: same contract.
        None => unsafe { ptr::write_bytes(dst, 0, len) },
    }
}

// `dcbz` is the only clearing instruction, and there is no non-temporal store to clear with:
// the cached and the streaming clear are `clear`.
pub(crate) use self::{clear as clear_cached, clear as clear_streaming};

/// `dcbz` or `write_bytes`.
pub(crate) fn streaming_clear_method() -> &'static str {
    if dcbz_block().is_some() { "dcbz" } else { "write_bytes" }
}

/// Zeroes `len` bytes with `dcbz` on every whole, aligned block and normal stores on the edges.
///
/// # Safety
///
/// `dst` writable (cacheable) for `len` bytes; `block` is the processor's data-cache block
/// size (a power of two).
unsafe fn clear_dcbz(dst: *mut u8, len: usize, block: usize) {
    // SAFETY: the caller's contract; `block` is the processor's block size (a power of two) and
    // the memory is cacheable, so `insn::dcbz` zeroes exactly the `block`-aligned block it is
    // given.
    unsafe { super::blocks::zero_blocks(dst, len, block, insn::dcbz) }
}

#[cfg(test)]
mod tests {
    //! `dcbz` zeroes exactly the range with the processor's block size (qemu-user's POWER9
    //! reports 128 bytes), and under emulation with several sizes.
    use super::*;
    use crate::arch::testing::check_clears;
    use std::vec;

    #[test]
    fn dcbz_path_zeroes_exactly_the_range() {
        let blocks = if cfg!(stream_hal_emulate) {
            vec![32, 128]
        } else {
            match dcbz_block() {
                Some(block) => vec![block],
                None => return,
            }
        };
        let (offsets, lens): (&[usize], &[usize]) = if cfg!(miri) {
            (&[0, 1, 127], &[0, 1, 128, 300])
        } else {
            (&[0, 1, 8, 31, 32, 127, 128], &[0, 1, 31, 32, 127, 128, 129, 4096, 3 * 4096 + 17])
        };
        for block in blocks {
            // SAFETY: the closure is only called with ranges inside check_clear's buffer;
            // `block` is the processor's block size (or an emulated one).
            check_clears(|p, n| unsafe { clear_dcbz(p, n, block) }, offsets, lens, 256);
        }
    }
}
