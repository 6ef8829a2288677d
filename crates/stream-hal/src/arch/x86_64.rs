//! x86-64 backend.
//!
//! * Streaming stores: `movntdq` (16 bytes from an XMM register; needs a 16-byte-aligned
//!   destination) when SSE2 is enabled at compile time, and `movnti` (4 or 8 bytes from a
//!   general-purpose register; any alignment) to reach that alignment, for the tail, and for
//!   everything on targets without SSE such as `x86_64-unknown-none` (soft-float: the kernel
//!   may not touch vector registers, exactly like Linux's `__memcpy_flushcache`). The 0-3 bytes
//!   that cannot be stored by `movnti` are stored normally.
//! * Drain: `sfence`, which orders all earlier non-temporal stores before every later store.
//! * Clear: `rep stosb` for small ranges (the caller is about to use them from cache), streaming
//!   zeroing from [`crate::CLEAR_STREAMING_MIN`] up: `clzero` where [`crate::cpu_features`]
//!   reports it, else `movntdq`/`movnti`, except that on AMD CPUs without `CLZERO` ranges from
//!   [`crate::CLEAR_REP_LARGE_MIN`] up take one `rep stosb`, where AMD's fast-string microcode
//!   uses its own non-temporal protocol (Intel's stays on the cached path at every size).
//!
//! Records are moved in registers: 16-byte loads feed `movntdq`, 8-byte loads feed `movnti`;
//! nothing is written to memory and reloaded with a different width inside this module.
//!
//! Every instruction is issued through the [`insn`] module. Under `cfg(stream_hal_emulate)`
//! each is replaced by an ordinary Rust access of the same bytes with the same alignment
//! requirement, and everything else in this file (the address arithmetic, the edges, the loads
//! of the source) stays as it is, so that Miri and the sanitizers check it.

use core::ptr;

use crate::CpuFeatures;

/// Whether 16-byte `movntdq` stores are available in this build (SSE2 enabled at compile time).
pub(crate) const VECTOR: bool = cfg!(target_feature = "sse2");

/// The instructions of this backend, one function each.
mod insn {
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
    pub(super) unsafe fn movnti64(dst: *mut u8, value: u64) {
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
    pub(super) unsafe fn movnti32(dst: *mut u8, value: u32) {
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
    pub(super) unsafe fn movntdq(dst: *mut u8, value: __m128i) {
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

    /// `sfence`.
    #[inline(always)]
    pub(super) fn sfence() {
        #[cfg(not(stream_hal_emulate))]
        // SAFETY: `sfence` has no operands and no preconditions. It is deliberately not marked
        // `nomem`, so the compiler also treats it as a memory barrier and keeps memory accesses
        // on their side of it.
        unsafe {
            asm!("sfence", options(nostack, preserves_flags));
        }
        #[cfg(stream_hal_emulate)]
        crate::emulation::drain();
    }

    /// `clflush [p]`: writes back (if dirty) and invalidates the cache line holding `p` in
    /// every cache level of every CPU.
    ///
    /// # Safety
    ///
    /// `p` is valid for reads (a mapped address: `clflush` faults like a one-byte load).
    #[inline(always)]
    pub(super) unsafe fn clflush(p: *const u8) {
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

    /// `mfence`: every earlier load, store and `clflush` completes before any later one.
    #[inline(always)]
    pub(super) fn mfence() {
        #[cfg(not(stream_hal_emulate))]
        // SAFETY: `mfence` has no operands and no preconditions; not `nomem`, so it is also a
        // compiler barrier.
        unsafe {
            asm!("mfence", options(nostack, preserves_flags));
        }
        #[cfg(stream_hal_emulate)]
        crate::emulation::drain();
    }

    /// `prefetcht0 [p]`: a hint; never faults.
    #[inline(always)]
    pub(super) fn prefetcht0(p: *const u8) {
        #[cfg(not(stream_hal_emulate))]
        // SAFETY: `prefetcht0` reads no architectural state through `p` (it cannot fault and has
        // no visible effect besides timing), writes nothing and changes no flags.
        unsafe {
            asm!("prefetcht0 [{}]", in(reg) p, options(nostack, preserves_flags, readonly));
        }
        #[cfg(stream_hal_emulate)]
        let _ = p;
    }

    /// `rep stosb` of `len` zero bytes from `dst`.
    ///
    /// # Safety
    ///
    /// `dst` must be valid for writes of `len` bytes.
    #[inline(always)]
    pub(super) unsafe fn rep_stosb_zero(dst: *mut u8, len: usize) {
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
    pub(super) unsafe fn clzero(p: *mut u8) {
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
    pub(super) fn cpuid(leaf: u32) -> (u32, u32, u32, u32) {
        // SAFETY: `cpuid` exists on every x86-64 CPU and only reads identification registers
        // (`__cpuid` is an `unsafe fn` on older toolchains, a safe one on newer).
        #[allow(unused_unsafe)]
        let r = unsafe { core::arch::x86_64::__cpuid(leaf) };
        (r.eax, r.ebx, r.ecx, r.edx)
    }

    /// Reads CPUID leaf `leaf`, subleaf `sub`: `[eax, ebx, ecx, edx]`.
    #[cfg(not(stream_hal_emulate))]
    pub(super) fn cpuid_count(leaf: u32, sub: u32) -> [u32; 4] {
        // SAFETY: as in `cpuid`: the instruction exists on every x86-64 CPU and only reads
        // identification registers; a leaf above the maximum returns data, never faults.
        #[allow(unused_unsafe)]
        let r = unsafe { core::arch::x86_64::__cpuid_count(leaf, sub) };
        [r.eax, r.ebx, r.ecx, r.edx]
    }
}

/// Detects the CPU features this backend uses with CPUID: `CLZERO` is CPUID `0x8000_0008`, EBX
/// bit 0 (AMD); `rep stosb` is the faster large clear on AMD and Hygon CPUs (the vendor string
/// of leaf 0, in EBX, EDX, ECX). `None` when emulating (no CPUID: the features are whatever
/// [`crate::set_cpu_features`] says).
pub(crate) fn detect_cpu_features() -> Option<CpuFeatures> {
    #[cfg(not(stream_hal_emulate))]
    {
        let (_, b, c, d) = insn::cpuid(0);
        let mut vendor = [0u8; 12];
        vendor[..4].copy_from_slice(&b.to_le_bytes());
        vendor[4..8].copy_from_slice(&d.to_le_bytes());
        vendor[8..].copy_from_slice(&c.to_le_bytes());
        let amd = &vendor == b"AuthenticAMD" || &vendor == b"HygonGenuine";
        let (max_extended, ..) = insn::cpuid(0x8000_0000);
        let clzero = max_extended >= 0x8000_0008 && insn::cpuid(0x8000_0008).1 & 1 != 0;
        Some(CpuFeatures::NONE.with_clzero(clzero).with_large_rep_stosb(amd))
    }
    #[cfg(stream_hal_emulate)]
    None
}

/// The caches `CPUID` reports (leaf 4 on Intel, `0x8000_001D` on AMD; see
/// [`crate::CacheInfo::detect`]). Nothing when emulating: the caller passes them with
/// [`crate::set_cache_info`].
pub(crate) fn detect_cache_info() -> crate::CacheInfo {
    #[cfg(not(stream_hal_emulate))]
    {
        super::x86_cache::from_cpuid(&mut insn::cpuid_count)
    }
    #[cfg(stream_hal_emulate)]
    crate::CacheInfo::unknown(crate::NoCacheInfo::NoSource)
}

/// Loads 16 bytes from `src` (any alignment) and stores them at `dst` with `movntdq`.
///
/// # Safety
///
/// `src` readable for 16 initialized bytes; `dst` writable for 16 bytes and 16-byte aligned.
#[cfg(target_feature = "sse2")]
#[inline(always)]
unsafe fn copy16(dst: *mut u8, src: *const u8) {
    use core::arch::x86_64::{__m128i, _mm_loadu_si128};
    // SAFETY: SSE2 is enabled at compile time; the caller guarantees 16 readable, initialized
    // bytes at `src` (`loadu` has no alignment requirement).
    let value = unsafe { _mm_loadu_si128(src.cast::<__m128i>()) };
    // SAFETY: the caller guarantees `dst` is writable and 16-byte aligned for 16 bytes.
    unsafe { insn::movntdq(dst, value) };
}

/// Copies `n < 16` bytes with normal stores (the misaligned edges).
///
/// # Safety
///
/// `src` readable and `dst` writable for `n` bytes, no overlap.
#[inline(always)]
unsafe fn copy_edge(dst: *mut u8, src: *const u8, n: usize) {
    // SAFETY: the caller guarantees both ranges are valid for `n` bytes and disjoint.
    unsafe { ptr::copy_nonoverlapping(src, dst, n) }
}

/// Streams `size - off` bytes starting at offset `off` with `movnti` (8, then 4 bytes), and
/// stores the last 0-3 bytes normally.
///
/// # Safety
///
/// `src` readable (initialized) and `dst` writable for `size` bytes, no overlap; `off <= size`.
#[inline(always)]
unsafe fn store_words_from(dst: *mut u8, src: *const u8, size: usize, mut off: usize) {
    while off + 8 <= size {
        // SAFETY: `off + 8 <= size`, so both 8-byte accesses are inside the caller's ranges.
        unsafe { insn::movnti64(dst.add(off), ptr::read_unaligned(src.add(off).cast::<u64>())) };
        off += 8;
    }
    if off + 4 <= size {
        // SAFETY: `off + 4 <= size`.
        unsafe { insn::movnti32(dst.add(off), ptr::read_unaligned(src.add(off).cast::<u32>())) };
        off += 4;
    }
    if off < size {
        // SAFETY: `off < size`, so `size - off` bytes remain in both ranges.
        unsafe { copy_edge(dst.add(off), src.add(off), size - off) };
    }
}

/// See `arch/mod.rs`. `size` is a compile-time constant at every call site.
///
/// # Safety
///
/// `src` readable (initialized) and `dst` writable for `size` bytes, no overlap.
#[inline(always)]
pub(crate) unsafe fn store_record(dst: *mut u8, src: *const u8, size: usize) {
    #[cfg(target_feature = "sse2")]
    {
        let misalign = dst.addr() % 16;
        if misalign == 0 && size >= 16 {
            let mut off = 0;
            while off + 16 <= size {
                // SAFETY: `dst + off` is 16-byte aligned (dst is, off is a multiple of 16) and
                // `off + 16 <= size`.
                unsafe { copy16(dst.add(off), src.add(off)) };
                off += 16;
            }
            // SAFETY: as for this function; `off <= size`.
            unsafe { store_words_from(dst, src, size, off) };
            return;
        }
        if misalign == 8 && size >= 24 {
            // SAFETY: `size >= 8`.
            unsafe { insn::movnti64(dst, ptr::read_unaligned(src.cast::<u64>())) };
            let mut off = 8;
            while off + 16 <= size {
                // SAFETY: `dst + 8` is 16-byte aligned, `off` stays `8 + 16k`, `off + 16 <= size`.
                unsafe { copy16(dst.add(off), src.add(off)) };
                off += 16;
            }
            // SAFETY: as for this function; `off <= size`.
            unsafe { store_words_from(dst, src, size, off) };
            return;
        }
    }
    // SAFETY: as for this function.
    unsafe { store_words_from(dst, src, size, 0) }
}

/// Loads 16 bytes from `src` as two 8-byte loads, combines them in an XMM register and stores
/// them at `dst` with `movntdq`.
///
/// The loads are volatile so that the compiler cannot merge them back into one 16-byte load:
/// that wider load of bytes just written by 8-byte stores (a record patched per page) would
/// miss store-to-load forwarding and stall (measured 3x slower than even the slow path).
///
/// # Safety
///
/// `src` readable for 16 initialized bytes and 8-byte aligned; `dst` writable for 16 bytes and
/// 16-byte aligned.
#[cfg(target_feature = "sse2")]
#[inline(always)]
unsafe fn copy16_from_words(dst: *mut u8, src: *const u8) {
    use core::arch::x86_64::_mm_set_epi64x;
    // SAFETY: the caller guarantees 16 readable, 8-aligned, initialized bytes at `src`.
    let (lo, hi) = unsafe { (src.cast::<i64>().read_volatile(), src.add(8).cast::<i64>().read_volatile()) };
    // SAFETY: SSE2 is enabled at compile time; the caller guarantees `dst` is writable and
    // 16-byte aligned.
    unsafe { insn::movntdq(dst, _mm_set_epi64x(hi, lo)) };
}

/// Streams `[start, size)` of a record in 16-byte pairs of words, then the 8/4/1-byte rest.
/// `start` is a constant at both call sites, so the loop unrolls completely.
///
/// # Safety
///
/// `src` readable (8-aligned, initialized) and `dst` writable for `size` bytes; `dst + start`
/// 16-byte aligned; `start <= size`.
#[cfg(target_feature = "sse2")]
#[inline(always)]
unsafe fn store_pairs_from(dst: *mut u8, src: *const u8, size: usize, start: usize) {
    let mut off = start;
    while off + 16 <= size {
        // SAFETY: `dst + off` is 16-byte aligned (`dst + start` is, `off - start` is a multiple
        // of 16) and `off + 16 <= size`; `src + off` stays 8-aligned.
        unsafe { copy16_from_words(dst.add(off), src.add(off)) };
        off += 16;
    }
    // SAFETY: as for this function; `off <= size`.
    unsafe { store_words_from(dst, src, size, off) };
}

/// See `arch/mod.rs`: the record is read with 8-byte loads only (never a wider load of bytes
/// that may have just been written by 8-byte stores). With SSE2, an 8-byte-aligned source and a
/// 16-byte-aligned (or 8-mod-16) destination, pairs of words are combined in XMM registers and
/// stored with `movntdq`; otherwise each word is stored with `movnti`.
///
/// # Safety
///
/// `src` readable (initialized) and `dst` writable for `size` bytes, no overlap.
#[inline(always)]
pub(crate) unsafe fn store_record_words(dst: *mut u8, src: *const u8, size: usize) {
    #[cfg(target_feature = "sse2")]
    if size >= 16 && src.addr() % 8 == 0 {
        match dst.addr() % 16 {
            // SAFETY: `dst` is 16-byte aligned; `src` 8-aligned; `0 <= size`.
            0 => return unsafe { store_pairs_from(dst, src, size, 0) },
            8 => {
                // SAFETY: `size >= 16 > 8`, so word 0 is inside both ranges; then `dst + 8` is
                // 16-byte aligned and `8 <= size`.
                unsafe {
                    insn::movnti64(dst, src.cast::<u64>().read_volatile());
                    return store_pairs_from(dst, src, size, 8);
                }
            }
            _ => {}
        }
    }
    // SAFETY: same contract.
    unsafe { store_words_from(dst, src, size, 0) }
}

/// See `arch/mod.rs`: stores `N` words given by value. Pairs of words are combined in XMM
/// registers (`_mm_set_epi64x`) and stored with `movntdq` when the destination is 16-byte
/// aligned (after one `movnti` when it is 8 mod 16); a last odd word gets a `movnti`. Nothing is
/// loaded from memory: a record built in registers stays there.
///
/// # Safety
///
/// `dst` writable for `8 * N` bytes and 8-byte aligned.
#[inline(always)]
pub(crate) unsafe fn store_words<const N: usize>(dst: *mut u64, words: [u64; N]) {
    #[cfg(target_feature = "sse2")]
    {
        // Two straight-line paths with constant word indices (so the optimizer unrolls them and
        // keeps `words` in registers): a 16-byte-aligned record, and one that is 8 mod 16.
        if dst.addr() % 16 == 0 {
            // SAFETY: `dst` is 16-byte aligned and writable for `8 * N` bytes.
            unsafe { store_word_pairs::<N, 0>(dst, &words) };
        } else if N > 0 {
            // SAFETY: word 0 is inside the record; `dst` is 8-aligned and not 16-aligned, so
            // `dst + 1` is 16-byte aligned.
            unsafe {
                insn::movnti64(dst.cast::<u8>(), words[0]);
                store_word_pairs::<N, 1>(dst, &words);
            }
        }
    }
    #[cfg(not(target_feature = "sse2"))]
    {
        let mut i = 0;
        while i < N {
            // SAFETY: word `i` is inside the record.
            unsafe { insn::movnti64(dst.add(i).cast::<u8>(), words[i]) };
            i += 1;
        }
    }
}

/// Streams words `FIRST..N` of a record: pairs with `movntdq`, a last odd word with `movnti`.
///
/// # Safety
///
/// `dst` writable for `8 * N` bytes; `dst + FIRST` 16-byte aligned.
#[cfg(target_feature = "sse2")]
#[inline(always)]
unsafe fn store_word_pairs<const N: usize, const FIRST: usize>(dst: *mut u64, words: &[u64; N]) {
    use core::arch::x86_64::_mm_set_epi64x;
    let mut i = FIRST;
    while i + 2 <= N {
        // SAFETY: `dst + i` is 16-byte aligned (`dst + FIRST` is, `i - FIRST` is even) and
        // words `i`, `i + 1` are inside the record.
        unsafe {
            insn::movntdq(dst.add(i).cast::<u8>(), _mm_set_epi64x(words[i + 1] as i64, words[i] as i64));
        }
        i += 2;
    }
    if i < N {
        // SAFETY: word `i` is inside the record.
        unsafe { insn::movnti64(dst.add(i).cast::<u8>(), words[i]) };
    }
}

/// See [`crate::memcpy_nontemporal`].
///
/// Layout of the stores: 0-3 normal head bytes up to 4-byte alignment, one `movnti` dword and
/// one `movnti` qword to reach 16-byte alignment, then 64-byte blocks of four `movntdq`, then
/// `movntdq` per 16 bytes, then `movnti` for the 8- and 4-byte remainder, then 0-3 normal tail
/// bytes. Without SSE2 the 16-byte steps are 8-byte `movnti` steps, four per 32-byte block.
///
/// # Safety
///
/// `src` readable (initialized) and `dst` writable for `len` bytes, no overlap.
#[inline(never)]
pub(crate) unsafe fn memcpy_nontemporal(dst: *mut u8, src: *const u8, len: usize) {
    let (mut d, mut s, mut n) = (dst, src, len);

    // Normal stores for the bytes before the first 4-byte boundary.
    let head = d.addr().wrapping_neg() & 3;
    if head != 0 {
        let h = head.min(n);
        // SAFETY: `h <= n`, so the edge lies inside both ranges.
        unsafe { copy_edge(d, s, h) };
        // SAFETY: advancing by `h <= n` stays within (or one past) both ranges.
        unsafe { (d, s) = (d.add(h), s.add(h)) };
        n -= h;
    }
    if n >= 4 && d.addr() & 4 != 0 {
        // SAFETY: 4 bytes remain in both ranges.
        unsafe { insn::movnti32(d, ptr::read_unaligned(s.cast::<u32>())) };
        // SAFETY: advancing by 4 <= n.
        unsafe { (d, s) = (d.add(4), s.add(4)) };
        n -= 4;
    }

    #[cfg(target_feature = "sse2")]
    {
        if n >= 8 && d.addr() & 8 != 0 {
            // SAFETY: 8 bytes remain in both ranges.
            unsafe { insn::movnti64(d, ptr::read_unaligned(s.cast::<u64>())) };
            // SAFETY: advancing by 8 <= n.
            unsafe { (d, s) = (d.add(8), s.add(8)) };
            n -= 8;
        }
        // `d` is now 16-byte aligned whenever at least 16 bytes remain.
        while n >= 64 {
            // SAFETY: 64 bytes remain; `d` is 16-byte aligned, so each of the four 16-byte
            // destinations is too.
            unsafe {
                copy16(d, s);
                copy16(d.add(16), s.add(16));
                copy16(d.add(32), s.add(32));
                copy16(d.add(48), s.add(48));
            }
            // SAFETY: advancing by 64 <= n.
            unsafe { (d, s) = (d.add(64), s.add(64)) };
            n -= 64;
        }
        while n >= 16 {
            // SAFETY: 16 bytes remain and `d` is 16-byte aligned.
            unsafe { copy16(d, s) };
            // SAFETY: advancing by 16 <= n.
            unsafe { (d, s) = (d.add(16), s.add(16)) };
            n -= 16;
        }
    }
    #[cfg(not(target_feature = "sse2"))]
    {
        while n >= 32 {
            // SAFETY: 32 bytes remain in both ranges.
            unsafe {
                insn::movnti64(d, ptr::read_unaligned(s.cast::<u64>()));
                insn::movnti64(d.add(8), ptr::read_unaligned(s.add(8).cast::<u64>()));
                insn::movnti64(d.add(16), ptr::read_unaligned(s.add(16).cast::<u64>()));
                insn::movnti64(d.add(24), ptr::read_unaligned(s.add(24).cast::<u64>()));
            }
            // SAFETY: advancing by 32 <= n.
            unsafe { (d, s) = (d.add(32), s.add(32)) };
            n -= 32;
        }
    }

    // SAFETY: `n` bytes remain in both ranges; this streams the 8/4-byte remainder and stores
    // the last 0-3 bytes normally.
    unsafe { store_words_from(d, s, n, 0) };
}

/// `sfence`: every earlier non-temporal store of this thread is ordered before every later
/// store (and, as the Rust intrinsics documentation states it, before any later access).
#[inline(always)]
pub(crate) fn drain() {
    insn::sfence();
}

/// `prefetcht0`: a hint to bring the line holding `p` into every cache level. Prefetches never
/// fault (an unmapped or invalid address is ignored) and are not ordered by `lock`ed
/// instructions or fences, so a prefetch issued ahead of a lock still overlaps with it. Part of
/// every x86-64 CPU (it does not use SSE registers, so kernel targets without SSE have it too).
#[inline(always)]
pub(crate) fn prefetch(p: *const u8) {
    insn::prefetcht0(p);
}

/// See [`crate::flush_cache_range`]: `clflush` of every 64-byte line between two `mfence`s
/// (Linux's `clflush_cache_range` order: the first orders earlier stores, streaming ones
/// included, before the flushes; the second waits for the flushes). `clflush` is part of every
/// x86-64 CPU (CPUID.1:EDX.CLFSH is in the baseline with SSE2; it uses no SSE register, so
/// soft-float kernel targets have it too) and every x86-64 CPU's line is 64 bytes (a larger
/// one would only be flushed more than once).
///
/// # Safety
///
/// `start..start + len` is valid for reads.
#[inline]
pub(crate) unsafe fn flush_cache_range(start: *const u8, len: usize) -> bool {
    insn::mfence();
    let flush = |p| {
        // SAFETY: `for_each_line` passes only addresses inside the range, which is readable.
        unsafe { insn::clflush(p) }
    };
    // SAFETY: the range is readable (caller) and 64 is a power of two.
    unsafe { super::for_each_line(start, len, 64, flush) };
    insn::mfence();
    true
}

/// Whether `clzero` may be used: [`crate::cpu_features`] says the CPU has it.
#[inline]
fn has_clzero() -> bool {
    crate::cpu_features().clzero
}

/// See [`crate::clear`]: `rep stosb` for ranges the CPU's fast-string microcode clears well
/// (below [`crate::CLEAR_STREAMING_MIN`], where the pages are likely reused from cache, and, on
/// AMD CPUs without `CLZERO`, from [`crate::CLEAR_REP_LARGE_MIN`] up, where the microcode
/// switches to its own non-temporal protocol), streaming zeroing otherwise (`clzero` where
/// available, else `movntdq`).
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
/// from 1 MiB on Intel (twice its rate: docs/performance/clear-methods.md); only on AMD without
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

/// Zeroes `len` bytes with streaming stores: `clzero` per 64-byte line where the CPU has it,
/// else `movntdq` of a zero register (64 bytes per iteration) with SSE2, else `movnti` of a zero
/// general-purpose register. Normal stores for a misaligned head or tail. Does not fence.
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
    unsafe { super::blocks::zero_blocks(dst, len, 64, clzero_line) }
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
    unsafe { super::blocks::zero_streamed(dst, len, 16, zero64, (8, zero8)) };
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

/// `vmovntdq` line fills of 32- and 64-byte registers ([`crate::wide_fill_methods`]): not
/// used by the library's own paths (a kernel must save the vector state before it touches
/// `ymm`/`zmm` registers), measured against them by benchmarks. Only in native builds with SSE
/// enabled at compile time: the emulated backend has no wide registers to emulate, and a
/// target without SSE (x86_64-unknown-none, soft-float kernels) keeps vector registers out of
/// its code altogether.
#[cfg(all(not(stream_hal_emulate), target_feature = "sse2"))]
mod wide {
    use core::arch::asm;

    use super::insn::cpuid;
    use crate::FillMethod;

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

/// See [`crate::wide_fill_methods`].
pub(crate) fn wide_fill_methods() -> impl Iterator<Item = crate::FillMethod> {
    #[cfg(all(not(stream_hal_emulate), target_feature = "sse2"))]
    return wide::methods();
    #[cfg(not(all(not(stream_hal_emulate), target_feature = "sse2")))]
    return core::iter::empty();
}

#[cfg(test)]
mod tests {
    //! Both streaming clear bodies zero exactly their range. The `clzero` body runs where the CPU
    //! has the instruction, and always under emulation.
    use super::*;
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
    fn wide_fills_write_exactly_their_lines() {
        #[repr(C, align(64))]
        #[derive(Clone, Copy)]
        struct Line([u64; 8]);
        let line = [0x0102_0304_0506_0708, 2, 3, 4, 5, 6, 7, u64::MAX];
        let methods: std::vec::Vec<crate::FillMethod> = super::wide_fill_methods().collect();
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
