//! The aarch64 part of the benchmark's kit ([`crate::arch::kit`]): `dc civac` of a range, no
//! wide fill.

#[cfg(not(stream_hal_emulate))]
use core::arch::asm;

pub(crate) use crate::arch::kit::none::wide_fill_methods;

/// `dc civac, p`: cleans (writes back) and invalidates the data-cache line holding `p` to
/// the point of coherency.
///
/// # Safety
///
/// `p` is valid for reads (a mapped address: the instruction faults like a load). At EL0
/// `SCTLR_EL1.UCI` must be set, as Linux sets it.
#[inline(always)]
unsafe fn dc_civac(p: *const u8) {
    #[cfg(not(stream_hal_emulate))]
    // SAFETY: the caller guarantees `p` is readable (and EL0 access is enabled), so the
    // instruction cannot fault; it changes no value in memory, no register and no flag.
    unsafe {
        asm!("dc civac, {}", in(reg) p, options(nostack, preserves_flags));
    }
    #[cfg(stream_hal_emulate)]
    // SAFETY: as above.
    unsafe {
        crate::emulation::flush_line(p);
    }
}

mod fence {
    barrier!(
        /// `dsb sy`: waits until every earlier memory access and cache maintenance completes.
        dsb_sy = "dsb sy"
    );
}
use fence::dsb_sy;

/// `mrs CTR_EL0` (readable at EL0 where `SCTLR_EL1.UCT` is set, as Linux sets it);
/// emulated: `DminLine` 4 (64-byte lines).
#[inline]
fn read_ctr() -> u64 {
    #[cfg(not(stream_hal_emulate))]
    {
        let value: u64;
        // SAFETY: `mrs` of CTR_EL0 is permitted at EL1 and, under Linux, at EL0; it reads
        // no memory and changes no flags.
        unsafe { asm!("mrs {}, ctr_el0", out(reg) value, options(nomem, nostack, preserves_flags)) };
        value
    }
    #[cfg(stream_hal_emulate)]
    {
        4 << 16
    }
}

/// See [`crate::arch::kit::flush_cache_range`]: `dc civac` of every line of `CTR_EL0.DminLine` (the
/// smallest data-cache line, `4 << DminLine` bytes), then `dsb sy`: Linux's
/// `dcache_clean_inval_poc`.
///
/// # Safety
///
/// `start..start + len` is valid for reads.
#[inline]
pub(crate) unsafe fn flush_cache_range(start: *const u8, len: usize) -> bool {
    let line = 4usize << ((read_ctr() >> 16) & 0xf);
    let flush = |p| {
        // SAFETY: `for_each_line` passes only addresses inside the range, which is readable.
        unsafe { dc_civac(p) }
    };
    // SAFETY: the range is readable (caller) and `line` is a power of two.
    unsafe { crate::arch::kit::for_each_line(start, len, line, flush) };
    dsb_sy();
    true
}
