//! The x86-64 part of the benchmark's kit ([`crate::arch::kit`]): `clflush` of a range, and
//! the `vmovntdq` fills of `ymm` and `zmm` registers.

#[cfg(not(stream_hal_emulate))]
use core::arch::asm;

/// `clflush [p]`: writes back (if dirty) and invalidates the cache line holding `p` in
/// every cache level of every CPU.
///
/// # Safety
///
/// `p` is valid for reads (a mapped address: `clflush` faults like a one-byte load).
#[inline(always)]
unsafe fn clflush(p: *const u8) {
    #[cfg(not(stream_hal_emulate))]
    // SAFETY: the caller guarantees `p` is readable, so the instruction cannot fault; it
    // changes no value in memory (it only moves the line out of the caches), no register
    // and no flag.
    unsafe {
        asm!("clflush [{}]", in(reg) p, options(nostack, preserves_flags));
    }
    #[cfg(stream_hal_emulate)]
    // SAFETY: as above.
    unsafe {
        crate::emulation::flush_line(p);
    }
}

mod fence {
    barrier!(
        /// `mfence`: every earlier load, store and `clflush` completes before any later one.
        mfence = "mfence"
    );
}
use fence::mfence;

/// See [`crate::arch::kit::flush_cache_range`]: `clflush` of every 64-byte line between two
/// `mfence`s (Linux's `clflush_cache_range`: earlier stores before, the flushes done after).
/// `clflush` is baseline x86-64 and uses no SSE register.
///
/// # Safety
///
/// `start..start + len` is valid for reads.
#[inline]
pub(crate) unsafe fn flush_cache_range(start: *const u8, len: usize) -> bool {
    mfence();
    let flush = |p| {
        // SAFETY: `for_each_line` passes only addresses inside the range, which is readable.
        unsafe { clflush(p) }
    };
    // SAFETY: the range is readable (caller) and 64 is a power of two.
    unsafe { crate::arch::kit::for_each_line(start, len, 64, flush) };
    mfence();
    true
}

/// `vmovntdq` line fills of 32- and 64-byte registers (not the library's: a kernel must save
/// vector state first). Native builds with SSE only.
#[cfg(all(not(stream_hal_emulate), target_feature = "sse2"))]
mod wide {
    use core::arch::asm;

    use super::super::insn::cpuid;
    use crate::arch::kit::FillMethod;

    /// `XGETBV` with `ECX = 0`: the OS-enabled state components (`XCR0`).
    ///
    /// # Safety
    ///
    /// The CPU reports `OSXSAVE` (CPUID leaf 1, `ECX` bit 27); without it `XGETBV` faults.
    unsafe fn xcr0() -> u64 {
        let (lo, hi): (u32, u32);
        // SAFETY: the caller checked OSXSAVE, so XGETBV with ECX = 0 exists and only reads
        // XCR0 into EDX:EAX; no memory or stack is touched.
        unsafe {
            asm!("xgetbv", in("ecx") 0u32, out("eax") lo, out("edx") hi, options(nomem, nostack, preserves_flags));
        }
        (u64::from(hi) << 32) | u64::from(lo)
    }

    /// Which widths the CPU has and the OS enabled: `(ymm, zmm)`.
    fn detect() -> (bool, bool) {
        let (max_leaf, ..) = cpuid(0);
        let (_, _, ecx1, _) = cpuid(1);
        let (osxsave, avx) = (ecx1 & (1 << 27) != 0, ecx1 & (1 << 28) != 0);
        if !osxsave {
            return (false, false);
        }
        // SAFETY: OSXSAVE is set (checked above).
        let xcr0 = unsafe { xcr0() };
        // XCR0 bits 1 (SSE) and 2 (AVX upper halves); 5-7 (opmask, ZMM0-15 upper, ZMM16-31).
        let ymm = avx && xcr0 & 0b110 == 0b110;
        // Leaf 7 subleaf 0, EBX bit 16: AVX512F.
        let avx512f = max_leaf >= 7 && cpuid(7).1 & (1 << 16) != 0;
        (ymm, ymm && avx512f && xcr0 & 0xe0 == 0xe0)
    }

    /// # Safety
    ///
    /// [`FillMethod::fill`]'s contract, and the CPU and OS support AVX (checked by [`methods`]).
    unsafe fn fill_ymm(dst: *mut [u64; 8], lines: usize, line: &[u64; 8]) {
        if lines == 0 {
            return;
        }
        // SAFETY: `line` is 64 readable bytes (two unaligned 32-byte loads); `dst` is 64-byte
        // aligned and writable for `lines * 64` bytes, so every `vmovntdq` of 32 bytes at
        // `p` and `p + 32` (for `p` = dst, dst + 64, ..., `lines` times, `lines >= 1`) is
        // aligned and inside it; AVX is present and OS-enabled (the caller). Registers: the
        // loop writes all of ymm0 and ymm1, and the closing `vzeroupper` (which leaves no
        // dirty upper state for the SSE code that follows) zeroes bits 128 and up of every
        // vector register. `clobber_abi("C")` declares all of that: on x86-64 it clobbers
        // xmm0-31 as whole registers (their ymm and zmm extensions included) on both the
        // SysV and Windows ABIs, so compiled code keeps no vector value in a register across
        // this block, even when it is inlined into AVX code. The flags are changed by
        // `add`/`dec` (no `preserves_flags`); the stack is not used.
        unsafe {
            asm!(
                "vmovdqu ymm0, [rsi]",
                "vmovdqu ymm1, [rsi + 32]",
                "2:",
                "vmovntdq [rdi], ymm0",
                "vmovntdq [rdi + 32], ymm1",
                "add rdi, 64",
                "dec rcx",
                "jnz 2b",
                "vzeroupper",
                // Explicit registers: `clobber_abi` allows no register-class outputs.
                in("rsi") line.as_ptr(),
                inout("rdi") dst => _,
                inout("rcx") lines => _,
                clobber_abi("C"),
                options(nostack),
            );
        }
    }

    /// # Safety
    ///
    /// [`FillMethod::fill`]'s contract, and the CPU and OS support AVX-512F (checked by
    /// [`methods`]).
    unsafe fn fill_zmm(dst: *mut [u64; 8], lines: usize, line: &[u64; 8]) {
        if lines == 0 {
            return;
        }
        // SAFETY: `line` is 64 readable bytes (one unaligned 64-byte load); `dst` is 64-byte
        // aligned and writable for `lines * 64` bytes, so every 64-byte `vmovntdq` at `p` (for
        // `p` = dst, dst + 64, ..., `lines >= 1` times) is aligned and inside it; AVX-512F is
        // present and OS-enabled (the caller). Registers: the loop writes all of zmm0 and
        // `vzeroupper` zeroes bits 128 and up of zmm0-15 (clearing the upper state before SSE
        // code runs); `clobber_abi("C")` declares xmm0-31 clobbered as whole registers (zmm
        // included) and the opmask registers k1-7 too, so no compiled code keeps a vector value
        // in a register across this block, even inlined into AVX-512 code. The flags are
        // changed by `add`/`dec`; the stack is not used.
        unsafe {
            asm!(
                "vmovdqu64 zmm0, [rsi]",
                "2:",
                "vmovntdq [rdi], zmm0",
                "add rdi, 64",
                "dec rcx",
                "jnz 2b",
                "vzeroupper",
                // Explicit registers: `clobber_abi` allows no register-class outputs.
                in("rsi") line.as_ptr(),
                inout("rdi") dst => _,
                inout("rcx") lines => _,
                clobber_abi("C"),
                options(nostack),
            );
        }
    }

    /// The wide fills this CPU has, narrowest first (CPUID and XGETBV on every call).
    pub(crate) fn methods() -> impl Iterator<Item = FillMethod> {
        let (ymm, zmm) = if cfg!(stream_hal_no_cpuid) { (false, false) } else { detect() };
        [
            ymm.then_some(FillMethod { name: "vmovntdq_ymm", fill: fill_ymm }),
            zmm.then_some(FillMethod { name: "vmovntdq_zmm", fill: fill_zmm }),
        ]
        .into_iter()
        .flatten()
    }
}

/// See [`crate::arch::kit::wide_fill_methods`].
pub(crate) fn wide_fill_methods() -> impl Iterator<Item = crate::arch::kit::FillMethod> {
    #[cfg(all(not(stream_hal_emulate), target_feature = "sse2"))]
    return wide::methods();
    #[cfg(not(all(not(stream_hal_emulate), target_feature = "sse2")))]
    return core::iter::empty();
}

#[cfg(test)]
mod tests {
    #[test]
    fn wide_fills_write_exactly_their_lines() {
        #[repr(C, align(64))]
        #[derive(Clone, Copy)]
        struct Line([u64; 8]);
        let line = [0x0102_0304_0506_0708, 2, 3, 4, 5, 6, 7, u64::MAX];
        let methods: std::vec::Vec<crate::arch::kit::FillMethod> = super::wide_fill_methods().collect();
        for m in &methods {
            for lines in [0usize, 1, 2, 3, 17, 64] {
                // One guard line on each side.
                let mut buf = std::vec![Line([0xeeee_eeee_eeee_eeee; 8]); lines + 2];
                // SAFETY: lines 1..=lines of `buf` are 64-byte aligned and writable, nothing
                // else touches `buf` until the drain below.
                unsafe { m.fill(buf.as_mut_ptr().add(1).cast(), lines, &line) };
                crate::drain();
                assert_eq!(buf[0].0, [0xeeee_eeee_eeee_eeee; 8], "{}: guard before", m.name);
                assert_eq!(buf[lines + 1].0, [0xeeee_eeee_eeee_eeee; 8], "{}: guard after", m.name);
                assert!(buf[1..=lines].iter().all(|l| l.0 == line), "{}: {lines} lines", m.name);
            }
        }
        // Tell the log which widths this CPU ran (AVX-512 only on such machines).
        std::eprintln!(
            "wide fills tested: {:?}",
            methods.iter().map(|m| m.name).collect::<std::vec::Vec<_>>()
        );
    }
}
