//! The instructions of the aarch64 backend, one function each, emulated under
//! `cfg(stream_hal_emulate)` (`DCZID_EL0` then reads [`crate::emulation::set_dczid`]'s value).

#[cfg(not(stream_hal_emulate))]
use core::arch::asm;

/// `stnp` of two 64-bit registers: `a` at `dst`, `b` at `dst + 8`.
///
/// # Safety
///
/// `dst` writable for 16 bytes and 8-byte aligned (pair stores are only issued to aligned
/// addresses, which keeps them legal where `SCTLR_ELx.A` enforces alignment).
#[inline(always)]
pub(crate) unsafe fn stnp64(dst: *mut u8, a: u64, b: u64) {
    #[cfg(not(stream_hal_emulate))]
    // SAFETY: the caller guarantees `dst..dst+16` is writable and aligned for the pair;
    // `stnp` writes exactly those bytes and neither uses the stack nor changes flags.
    unsafe {
        asm!(
            "stnp {a}, {b}, [{dst}]",
            a = in(reg) a,
            b = in(reg) b,
            dst = in(reg) dst,
            options(nostack, preserves_flags),
        );
    }
    #[cfg(stream_hal_emulate)]
    // SAFETY: the caller guarantees 16 writable, 8-aligned bytes; a typed `[u64; 2]` write requires
    // that alignment, so a misaligned emulated pair is reported.
    unsafe {
        crate::emulation::weak_store(dst.cast::<[u64; 2]>(), [a, b]);
    }
}

/// `stnp` of two 32-bit registers: `a` at `dst`, `b` at `dst + 4`.
///
/// # Safety
///
/// `dst` writable for 8 bytes and 4-byte aligned.
#[inline(always)]
pub(crate) unsafe fn stnp32(dst: *mut u8, a: u32, b: u32) {
    #[cfg(not(stream_hal_emulate))]
    // SAFETY: the caller guarantees `dst..dst+8` is writable and aligned for the pair.
    unsafe {
        asm!(
            "stnp {a:w}, {b:w}, [{dst}]",
            a = in(reg) a,
            b = in(reg) b,
            dst = in(reg) dst,
            options(nostack, preserves_flags),
        );
    }
    #[cfg(stream_hal_emulate)]
    // SAFETY: the caller guarantees 8 writable, 4-aligned bytes.
    unsafe {
        crate::emulation::weak_store(dst.cast::<[u32; 2]>(), [a, b]);
    }
}

/// `stnp xzr, xzr` on 64 bytes: four zero pairs at `p`, `p + 16`, `p + 32`, `p + 48`.
///
/// # Safety
///
/// `p` writable for 64 bytes and 16-byte aligned.
#[inline(always)]
pub(crate) unsafe fn stnp_zero64(p: *mut u8) {
    #[cfg(not(stream_hal_emulate))]
    // SAFETY: the caller guarantees 64 writable bytes at the 16-byte-aligned `p`; the four
    // pair stores write exactly those.
    unsafe {
        asm!(
            "stnp xzr, xzr, [{p}]",
            "stnp xzr, xzr, [{p}, #16]",
            "stnp xzr, xzr, [{p}, #32]",
            "stnp xzr, xzr, [{p}, #48]",
            p = in(reg) p,
            options(nostack, preserves_flags),
        );
    }
    #[cfg(stream_hal_emulate)]
    // SAFETY: the caller guarantees 64 writable bytes at the 16-byte-aligned `p`.
    unsafe {
        crate::emulation::weak_store(p.cast::<[u128; 4]>(), [0; 4]);
    }
}

/// `stnp xzr, xzr` on 16 bytes.
///
/// # Safety
///
/// `p` writable for 16 bytes and 16-byte aligned.
#[inline(always)]
pub(crate) unsafe fn stnp_zero16(p: *mut u8) {
    #[cfg(not(stream_hal_emulate))]
    // SAFETY: the caller guarantees 16 writable bytes at the 16-byte-aligned `p`.
    unsafe {
        asm!("stnp xzr, xzr, [{p}]", p = in(reg) p, options(nostack, preserves_flags));
    }
    #[cfg(stream_hal_emulate)]
    // SAFETY: as above.
    unsafe {
        crate::emulation::weak_store(p.cast::<u128>(), 0);
    }
}

/// `dc zva`: zeroes the whole `block`-byte block that contains `p` (the instruction ignores
/// the address bits below the block size).
///
/// # Safety
///
/// `dc zva` is permitted, `block` is this CPU's block size, and the whole block containing
/// `p` must be valid for writes.
#[inline(always)]
pub(crate) unsafe fn dc_zva(p: *mut u8, block: usize) {
    #[cfg(not(stream_hal_emulate))]
    // SAFETY: the caller guarantees `dc zva` is permitted and the block around `p` is
    // writable; `dc zva` writes exactly that block, changes no flags, uses no stack.
    unsafe {
        let _ = block;
        asm!("dc zva, {}", in(reg) p, options(nostack, preserves_flags));
    }
    #[cfg(stream_hal_emulate)]
    // SAFETY: the caller guarantees the block containing `p` is writable; `block` is the
    // `DCZID_EL0` block size, a power of two.
    unsafe {
        crate::emulation::zero_block(p, block);
    }
}

/// One memory set of zero: `len` zero bytes at `dst`, any alignment. `SETPN`/`SETMN`/`SETEN`
/// (the non-temporal set, Linux's `clear_page`) with `NT`, `SETP`/`SETM`/`SETE` without.
///
/// # Safety
///
/// FEAT_MOPS is implemented and enabled at this exception level; `dst` is valid for writes
/// of `len` bytes.
#[inline(always)]
pub(crate) unsafe fn set_zero<const NT: bool>(dst: *mut u8, len: usize) {
    // The prologue, main and epilogue of one set; `$n` is the non-temporal suffix or none.
    #[cfg(not(stream_hal_emulate))]
    macro_rules! set {
        ($n:literal) => {
            asm!(
                ".arch_extension mops",
                concat!("setp", $n, " [{d}]!, {n}!, xzr"),
                concat!("setm", $n, " [{d}]!, {n}!, xzr"),
                concat!("sete", $n, " [{d}]!, {n}!, xzr"),
                d = inout(reg) dst => _,
                n = inout(reg) len => _,
                options(nostack),
            )
        };
    }
    #[cfg(not(stream_hal_emulate))]
    // SAFETY: the caller guarantees that the instructions exist and are enabled (so none is
    // undefined) and that `dst..dst + len` is writable; with `Xs = xzr` the triple writes
    // exactly those `len` zero bytes: the architecture saturates only a size with bit 63
    // set, and a range valid for writes lies in one allocated object, which Rust bounds by
    // `isize::MAX` bytes. The three are consecutive in one block, as the architecture requires,
    // with distinct `Xd` and `Xn` (two operands) and neither the zero register; both are
    // written back (declared `inout`, discarded), `NZCV` is written (no `preserves_flags`),
    // no stack is used.
    unsafe {
        if NT {
            set!("n");
        } else {
            set!("");
        }
    }
    #[cfg(stream_hal_emulate)]
    // SAFETY: the caller guarantees `len` writable bytes at `dst`.
    unsafe {
        crate::emulation::memory_set_zero(dst, len, NT);
    }
}

barrier!(
    /// `dmb ish`: see the backend's documentation for why the full inner-shareable barrier.
    dmb_ish = "dmb ish"
);

prefetch_hint!(
    /// `prfm pldl1keep, [p]`: a hint to bring the line holding `p` into L1 for reading. It never
    /// faults (Arm ARM: a PRFM to an address that would abort is ignored).
    prfm_pldl1keep(reg) = "prfm pldl1keep, [{p}]"
);

/// `mrs DCZID_EL0`.
#[inline]
pub(crate) fn read_dczid() -> u64 {
    #[cfg(not(stream_hal_emulate))]
    {
        let value: u64;
        // SAFETY: `mrs` of DCZID_EL0 is permitted at every exception level this code runs
        // at, reads no memory and changes no flags.
        unsafe { asm!("mrs {}, dczid_el0", out(reg) value, options(nomem, nostack, preserves_flags)) };
        value
    }
    #[cfg(stream_hal_emulate)]
    crate::emulation::dczid()
}
