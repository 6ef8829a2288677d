//! x86-64 clearing: `rep stosb` for small ranges, streaming zeroing (`clzero`, or `movntdq` /
//! `movnti` of zero) from [`crate::CLEAR_STREAMING_MIN`] up, `rep stosb` again from
//! [`crate::CLEAR_REP_LARGE_MIN`] on AMD CPUs without `CLZERO`.

use super::insn;
use crate::CpuFeatures;

/// Whether `clzero` may be used: [`crate::cpu_features`] says the CPU has it.
#[inline]
fn has_clzero() -> bool {
    crate::cpu_features().clzero
}

/// See [`crate::clear`]: `rep stosb` below [`crate::CLEAR_STREAMING_MIN`] and, on AMD without
/// `CLZERO`, from [`crate::CLEAR_REP_LARGE_MIN`] up; streaming zeroing otherwise.
///
/// # Safety
///
/// `dst` writable for `len` bytes.
#[inline]
pub(crate) unsafe fn clear(dst: *mut u8, len: usize) {
    if streams(len, crate::cpu_features()) {
        // SAFETY: same contract.
        unsafe { clear_streaming(dst, len) }
    } else {
        // SAFETY: same contract.
        unsafe { clear_cached(dst, len) }
    }
}

/// Whether [`clear`] streams `len` bytes on a CPU with features `f` (else one `rep stosb`).
/// `clzero` beats `rep stosb` at every large size on AMD and `movntdq` beats it at every size
/// from 1 MiB on Intel (docs/performance/clear-methods.md); only on AMD without
/// `CLZERO` does `rep stosb` win, from `CLEAR_REP_LARGE_MIN`.
#[inline]
fn streams(len: usize, f: CpuFeatures) -> bool {
    let streaming_max =
        if f.large_rep_stosb() && !f.clzero { crate::CLEAR_REP_LARGE_MIN } else { usize::MAX };
    len >= crate::CLEAR_STREAMING_MIN && len < streaming_max
}

/// One `rep stosb` of `len` bytes (Linux's `clear_page_erms`/`clear_pages` on ERMS).
///
/// # Safety
///
/// `dst` writable for `len` bytes.
#[inline]
pub(crate) unsafe fn clear_cached(dst: *mut u8, len: usize) {
    // SAFETY: same contract.
    unsafe { insn::rep_stosb_zero(dst, len) }
}

/// Zeroes `len` bytes with streaming stores (`clzero` where the CPU has it, else
/// [`clear_movnt`]). Does not fence.
///
/// # Safety
///
/// `dst` writable for `len` bytes.
#[inline(never)]
pub(crate) unsafe fn clear_streaming(dst: *mut u8, len: usize) {
    if has_clzero() {
        // SAFETY: same contract; the CPU has CLZERO (cpu_features says so).
        unsafe { clear_clzero(dst, len) }
    } else {
        // SAFETY: same contract.
        unsafe { clear_movnt(dst, len) }
    }
}

/// Zeroes `len` bytes: `clzero` on every whole, aligned 64-byte line, normal stores on the
/// edges (a `clzero` on a partial line would zero bytes outside the range).
///
/// # Safety
///
/// `dst` writable for `len` bytes; the CPU has `CLZERO`.
unsafe fn clear_clzero(dst: *mut u8, len: usize) {
    /// `clzero` in the shape `zero_blocks` takes (its block is always 64 bytes).
    ///
    /// # Safety
    ///
    /// As `insn::clzero`.
    #[inline(always)]
    unsafe fn clzero_line(p: *mut u8, _block: usize) {
        // SAFETY: the caller's contract.
        unsafe { insn::clzero(p) }
    }
    // SAFETY: the caller's contract; 64 is a power of two and the CPU has CLZERO, so
    // `clzero_line` zeroes exactly the 64-byte-aligned line it is given.
    unsafe { crate::arch::blocks::zero_blocks(dst, len, 64, clzero_line) }
}

/// Zeroes `len` bytes with `movntdq` of a zero register (64 bytes per iteration) with SSE2,
/// `movnti` of a zero general-purpose register without; normal stores on the edges.
///
/// # Safety
///
/// `dst` writable for `len` bytes.
unsafe fn clear_movnt(dst: *mut u8, len: usize) {
    /// 64 zero bytes at the 16-byte-aligned `p`: four `movntdq` with SSE2, eight `movnti`
    /// without.
    ///
    /// # Safety
    ///
    /// 64 writable bytes at the 16-byte-aligned `p`.
    #[inline(always)]
    unsafe fn zero64(p: *mut u8) {
        #[cfg(target_feature = "sse2")]
        {
            // SAFETY: SSE2 is enabled at compile time (an `unsafe fn` before Rust 1.87's safe
            // target-feature calls).
            #[allow(unused_unsafe)]
            let zero = unsafe { core::arch::x86_64::_mm_setzero_si128() };
            // SAFETY: 64 writable bytes at the 16-byte-aligned `p` (the caller's contract).
            unsafe {
                insn::movntdq(p, zero);
                insn::movntdq(p.add(16), zero);
                insn::movntdq(p.add(32), zero);
                insn::movntdq(p.add(48), zero);
            }
        }
        #[cfg(not(target_feature = "sse2"))]
        for i in 0..8 {
            // SAFETY: 64 writable bytes at `p` (the caller's contract); `movnti` needs no
            // alignment.
            unsafe { insn::movnti64(p.add(8 * i), 0) };
        }
    }
    /// 8 zero bytes at `p` with `movnti`.
    ///
    /// # Safety
    ///
    /// 8 writable bytes at `p`.
    #[inline(always)]
    unsafe fn zero8(p: *mut u8) {
        // SAFETY: the caller's contract.
        unsafe { insn::movnti64(p, 0) };
    }
    // SAFETY: the caller guarantees `len` writable bytes; 16 divides 64 and is a multiple of 8;
    // `zero64` and `zero8` write exactly their bytes at the addresses `zero_streamed` gives them
    // (16-byte-aligned for `zero64`).
    unsafe { crate::arch::blocks::zero_streamed(dst, len, 16, zero64, (8, zero8)) };
}

/// The method [`clear_streaming`] uses on this CPU.
pub(crate) fn streaming_clear_method() -> &'static str {
    if has_clzero() {
        "clzero"
    } else if cfg!(target_feature = "sse2") {
        "movntdq"
    } else {
        "movnti"
    }
}

#[cfg(test)]
mod tests {
    //! Both streaming clear bodies zero exactly their range. The `clzero` body runs where the CPU
    //! has the instruction, and always under emulation.
    use super::*;
    use crate::drain;
    use std::vec;

    fn check(f: unsafe fn(*mut u8, usize), name: &str) {
        let lens: &[usize] = if cfg!(miri) {
            &[0, 1, 63, 64, 65, 200]
        } else {
            &[0, 1, 63, 64, 65, 4096, 3 * 4096 + 17, 1 << 20]
        };
        let offsets: &[usize] = if cfg!(miri) { &[0, 1, 63, 64] } else { &[0, 1, 8, 63, 64, 100, 4096] };
        for &offset in offsets {
            for &len in lens {
                let mut buf = vec![0xa5u8; offset + len + 128];
                // SAFETY: `offset + len` bytes are inside `buf`.
                unsafe { f(buf.as_mut_ptr().add(offset), len) };
                drain();
                assert!(
                    buf[..offset].iter().all(|&b| b == 0xa5)
                        && buf[offset + len..].iter().all(|&b| b == 0xa5),
                    "{name}: bytes outside the range changed (offset {offset} len {len})"
                );
                assert!(
                    buf[offset..offset + len].iter().all(|&b| b == 0),
                    "{name}: offset {offset} len {len}"
                );
            }
        }
    }

    #[test]
    fn clear_streams_from_1_mib_and_goes_back_to_rep_stosb_only_on_amd_without_clzero() {
        use crate::{CLEAR_REP_LARGE_MIN as LARGE, CLEAR_STREAMING_MIN as MIN, CpuFeatures};
        let intel = CpuFeatures::NONE;
        let amd = CpuFeatures::NONE.with_large_rep_stosb(true);
        let zen = amd.with_clzero(true);
        for f in [intel, amd, zen] {
            assert!(!super::streams(4096, f) && !super::streams(MIN - 1, f), "{f:?}");
            assert!(super::streams(MIN, f) && super::streams(LARGE - 1, f), "{f:?}");
        }
        for len in [LARGE, 4 << 30, 1 << 46] {
            assert!(super::streams(len, intel), "{len}");
            assert!(!super::streams(len, amd), "{len}");
            assert!(super::streams(len, zen), "{len}");
        }
    }

    #[test]
    fn movnt_clear_zeroes_exactly_the_range() {
        check(clear_movnt, "movnt");
    }

    #[test]
    fn clzero_clear_zeroes_exactly_the_range() {
        if has_clzero() || cfg!(stream_hal_emulate) {
            check(clear_clzero, "clzero");
        }
    }

    #[test]
    fn rep_stosb_clear_zeroes_exactly_the_range() {
        check(clear_cached, "rep stosb");
    }
}
