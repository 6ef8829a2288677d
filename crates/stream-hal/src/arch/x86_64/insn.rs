//! The instructions of the x86-64 backend, one function each. Under `cfg(stream_hal_emulate)`
//! each is replaced by an ordinary Rust access of the same bytes with the same alignment
//! requirement.

#[cfg(not(stream_hal_emulate))]
use core::arch::asm;
#[cfg(target_feature = "sse2")]
use core::arch::x86_64::__m128i;

/// One 8-byte non-temporal store (`movnti`) of `value` at `dst`.
///
/// # Safety
///
/// `dst` must be valid for writes of 8 bytes (any alignment: `movnti` has no alignment
/// requirement).
#[inline(always)]
pub(crate) unsafe fn movnti64(dst: *mut u8, value: u64) {
    #[cfg(not(stream_hal_emulate))]
    // SAFETY: the caller guarantees `dst..dst+8` is writable; `movnti` writes exactly those
    // bytes, does not touch the stack and leaves the flags alone.
    unsafe {
        asm!(
            "movnti qword ptr [{dst}], {value}",
            dst = in(reg) dst,
            value = in(reg) value,
            options(nostack, preserves_flags),
        );
    }
    #[cfg(stream_hal_emulate)]
    // SAFETY: the caller guarantees 8 writable bytes at `dst`; a byte array has no
    // alignment requirement, like `movnti`.
    unsafe {
        crate::emulation::weak_store(dst.cast::<[u8; 8]>(), value.to_ne_bytes());
    }
}

/// One 4-byte non-temporal store (`movnti`) of `value` at `dst`.
///
/// # Safety
///
/// `dst` must be valid for writes of 4 bytes (any alignment).
#[inline(always)]
pub(crate) unsafe fn movnti32(dst: *mut u8, value: u32) {
    #[cfg(not(stream_hal_emulate))]
    // SAFETY: the caller guarantees `dst..dst+4` is writable; `movnti` writes exactly those.
    unsafe {
        asm!(
            "movnti dword ptr [{dst}], {value:e}",
            dst = in(reg) dst,
            value = in(reg) value,
            options(nostack, preserves_flags),
        );
    }
    #[cfg(stream_hal_emulate)]
    // SAFETY: the caller guarantees 4 writable bytes at `dst`; no alignment needed.
    unsafe {
        crate::emulation::weak_store(dst.cast::<[u8; 4]>(), value.to_ne_bytes());
    }
}

/// One 16-byte non-temporal store (`movntdq`) of `value` at `dst`.
///
/// # Safety
///
/// `dst` must be valid for writes of 16 bytes and 16-byte aligned (`movntdq` faults
/// otherwise).
#[cfg(target_feature = "sse2")]
#[inline(always)]
pub(crate) unsafe fn movntdq(dst: *mut u8, value: __m128i) {
    #[cfg(not(stream_hal_emulate))]
    // SAFETY: SSE2 is enabled at compile time (cfg above), so the intrinsic may be called;
    // the caller guarantees `dst` is writable for 16 bytes and 16-byte aligned.
    unsafe {
        core::arch::x86_64::_mm_stream_si128(dst.cast::<__m128i>(), value);
    }
    #[cfg(stream_hal_emulate)]
    // SAFETY: as above; a typed `__m128i` write requires the same 16-byte alignment as
    // `movntdq`, so an emulated misaligned store is reported, as the real one would fault.
    unsafe {
        crate::emulation::weak_store(dst.cast::<__m128i>(), value);
    }
}

barrier!(
    /// `sfence`: every earlier non-temporal store of this thread is ordered before every later
    /// store (and, as the Rust intrinsics documentation states it, before any later access).
    sfence = "sfence"
);

prefetch_hint!(
    /// `prefetcht0 [p]`: a hint to bring the line holding `p` into every cache level. It never
    /// faults and is not ordered by `lock`ed instructions or fences, so a prefetch issued ahead
    /// of a lock still overlaps with it. It uses no SSE register: every x86-64 target has it.
    prefetcht0(reg) = "prefetcht0 [{p}]"
);

/// `rep stosb` of `len` zero bytes from `dst`.
///
/// # Safety
///
/// `dst` must be valid for writes of `len` bytes.
#[inline(always)]
pub(crate) unsafe fn rep_stosb_zero(dst: *mut u8, len: usize) {
    #[cfg(not(stream_hal_emulate))]
    // SAFETY: `rep stosb` writes exactly `rcx = len` bytes of `al = 0` upward from
    // `rdi = dst` (the direction flag is clear on entry to inline assembly, as Rust
    // requires), which the caller guarantees is writable. It changes no flags and does not
    // use the stack.
    unsafe {
        asm!(
            "rep stosb",
            inout("rcx") len => _,
            inout("rdi") dst => _,
            in("al") 0u8,
            options(nostack, preserves_flags),
        );
    }
    #[cfg(stream_hal_emulate)]
    // SAFETY: the caller guarantees `len` writable bytes at `dst`.
    unsafe {
        core::ptr::write_bytes(dst, 0, len);
    }
}

/// `clzero`: zeroes the whole 64-byte line that contains `p` (the instruction ignores the low
/// six address bits).
///
/// # Safety
///
/// The CPU has `CLZERO`, and the whole line containing `p` must be valid for writes.
#[inline(always)]
pub(crate) unsafe fn clzero(p: *mut u8) {
    #[cfg(not(stream_hal_emulate))]
    // SAFETY: the caller guarantees the CPU has CLZERO and that the line containing `rax` is
    // writable; `clzero` writes exactly that line, changes no flags and does not use the
    // stack.
    unsafe {
        asm!("clzero", in("rax") p, options(nostack, preserves_flags));
    }
    #[cfg(stream_hal_emulate)]
    // SAFETY: the caller guarantees the 64-byte line containing `p` is writable.
    unsafe {
        crate::emulation::weak_zero_block(p, 64);
    }
}

/// Reads CPUID leaf `leaf` (subleaf 0): `(eax, ebx, ecx, edx)`.
#[cfg(not(stream_hal_emulate))]
pub(crate) fn cpuid(leaf: u32) -> (u32, u32, u32, u32) {
    // SAFETY: `cpuid` exists on every x86-64 CPU and only reads identification registers
    // (`__cpuid` is an `unsafe fn` on older toolchains, a safe one on newer).
    #[allow(unused_unsafe)]
    let r = unsafe { core::arch::x86_64::__cpuid(leaf) };
    (r.eax, r.ebx, r.ecx, r.edx)
}

/// Reads CPUID leaf `leaf`, subleaf `sub`: `[eax, ebx, ecx, edx]`.
#[cfg(not(stream_hal_emulate))]
pub(crate) fn cpuid_count(leaf: u32, sub: u32) -> [u32; 4] {
    // SAFETY: as in `cpuid`: the instruction exists on every x86-64 CPU and only reads
    // identification registers; a leaf above the maximum returns data, never faults.
    #[allow(unused_unsafe)]
    let r = unsafe { core::arch::x86_64::__cpuid_count(leaf, sub) };
    [r.eax, r.ebx, r.ecx, r.edx]
}
