//! x86-64 backend.
//!
//! * Streaming stores: `movntdq` (16 bytes from an XMM register; needs a 16-byte-aligned
//!   destination) when SSE2 is enabled at compile time, and `movnti` (4 or 8 bytes from a
//!   general-purpose register; any alignment) to reach that alignment, for the tail, and for
//!   everything on targets without SSE such as `x86_64-unknown-none` (soft-float: the kernel
//!   may not touch vector registers, exactly like Linux's `__memcpy_flushcache`). The 0-3 bytes
//!   that cannot be stored by `movnti` are stored normally.
//! * Drain: `sfence`, which orders all earlier non-temporal stores before every later store.
//! * Clear: one `rep stosb` over the whole range. On CPUs with ERMS (every x86-64 this project
//!   targets, and Linux's first choice in `clear_page`/`clear_pages`) it is as fast as any
//!   streaming loop measured on our machines, and microcode switches to non-temporal fills for
//!   large counts by itself.
//!
//! Records are moved in registers: 16-byte loads feed `movntdq`, 8-byte loads feed `movnti`;
//! nothing is written to memory and reloaded with a different width inside this module.

use core::arch::asm;
use core::ptr;

use crate::PAGE_SIZE;

/// Whether 16-byte `movntdq` stores are available in this build (SSE2 enabled at compile time).
pub(crate) const VECTOR: bool = cfg!(target_feature = "sse2");

/// One 8-byte non-temporal store of `value` at `dst`.
///
/// # Safety
///
/// `dst` must be valid for writes of 8 bytes (any alignment: `movnti` has no alignment
/// requirement).
#[inline(always)]
unsafe fn movnti64(dst: *mut u8, value: u64) {
    // SAFETY: the caller guarantees `dst..dst+8` is writable; `movnti` only writes those bytes,
    // does not touch the stack and leaves the flags alone.
    unsafe {
        asm!(
            "movnti qword ptr [{dst}], {value}",
            dst = in(reg) dst,
            value = in(reg) value,
            options(nostack, preserves_flags),
        );
    }
}

/// One 4-byte non-temporal store of `value` at `dst`.
///
/// # Safety
///
/// `dst` must be valid for writes of 4 bytes.
#[inline(always)]
unsafe fn movnti32(dst: *mut u8, value: u32) {
    // SAFETY: the caller guarantees `dst..dst+4` is writable; `movnti` only writes those bytes.
    unsafe {
        asm!(
            "movnti dword ptr [{dst}], {value:e}",
            dst = in(reg) dst,
            value = in(reg) value,
            options(nostack, preserves_flags),
        );
    }
}

/// Loads 16 bytes from `src` (any alignment) and stores them at `dst` with `movntdq`.
///
/// # Safety
///
/// `src` readable for 16 bytes; `dst` writable for 16 bytes and 16-byte aligned.
#[cfg(target_feature = "sse2")]
#[inline(always)]
unsafe fn movntdq(dst: *mut u8, src: *const u8) {
    use core::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
    // SAFETY: SSE2 is enabled at compile time (cfg above), so both intrinsics may be called; the
    // caller guarantees `src` is readable and `dst` writable and 16-byte aligned for 16 bytes.
    unsafe {
        let value = _mm_loadu_si128(src.cast::<__m128i>());
        _mm_stream_si128(dst.cast::<__m128i>(), value);
    }
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
/// `src` readable and `dst` writable for `size` bytes, no overlap.
#[inline(always)]
unsafe fn store_words_from(dst: *mut u8, src: *const u8, size: usize, mut off: usize) {
    while off + 8 <= size {
        // SAFETY: `off + 8 <= size`, so both 8-byte accesses are inside the caller's ranges.
        unsafe { movnti64(dst.add(off), ptr::read_unaligned(src.add(off).cast::<u64>())) };
        off += 8;
    }
    if off + 4 <= size {
        // SAFETY: `off + 4 <= size`.
        unsafe { movnti32(dst.add(off), ptr::read_unaligned(src.add(off).cast::<u32>())) };
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
/// `src` readable and `dst` writable for `size` bytes, no overlap.
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
                unsafe { movntdq(dst.add(off), src.add(off)) };
                off += 16;
            }
            // SAFETY: as for this function; `off <= size`.
            unsafe { store_words_from(dst, src, size, off) };
            return;
        }
        if misalign == 8 && size >= 24 {
            // SAFETY: `size >= 8`.
            unsafe { movnti64(dst, ptr::read_unaligned(src.cast::<u64>())) };
            let mut off = 8;
            while off + 16 <= size {
                // SAFETY: `dst + 8` is 16-byte aligned, `off` stays `8 + 16k`, `off + 16 <= size`.
                unsafe { movntdq(dst.add(off), src.add(off)) };
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
/// `src` readable for 16 bytes and 8-byte aligned; `dst` writable for 16 bytes and 16-byte
/// aligned.
#[cfg(target_feature = "sse2")]
#[inline(always)]
unsafe fn movntdq_from_words(dst: *mut u8, src: *const u8) {
    use core::arch::x86_64::{__m128i, _mm_set_epi64x, _mm_stream_si128};
    // SAFETY: the caller guarantees 16 readable, 8-aligned bytes at `src`.
    let (lo, hi) = unsafe { (src.cast::<i64>().read_volatile(), src.add(8).cast::<i64>().read_volatile()) };
    // SAFETY: SSE2 is enabled at compile time; the caller guarantees `dst` is writable and
    // 16-byte aligned.
    unsafe { _mm_stream_si128(dst.cast::<__m128i>(), _mm_set_epi64x(hi, lo)) };
}

/// Streams `[start, size)` of a record in 16-byte pairs of words, then the 8/4/1-byte rest.
/// `start` is a constant at both call sites, so the loop unrolls completely.
///
/// # Safety
///
/// `src` readable (8-aligned) and `dst` writable for `size` bytes; `dst + start` 16-byte
/// aligned.
#[cfg(target_feature = "sse2")]
#[inline(always)]
unsafe fn store_pairs_from(dst: *mut u8, src: *const u8, size: usize, start: usize) {
    let mut off = start;
    while off + 16 <= size {
        // SAFETY: `dst + off` is 16-byte aligned (`dst + start` is, `off - start` is a multiple
        // of 16) and `off + 16 <= size`.
        unsafe { movntdq_from_words(dst.add(off), src.add(off)) };
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
/// `src` readable and `dst` writable for `size` bytes, no overlap.
#[inline(always)]
pub(crate) unsafe fn store_record_words(dst: *mut u8, src: *const u8, size: usize) {
    #[cfg(target_feature = "sse2")]
    if size >= 16 && src.addr() % 8 == 0 {
        match dst.addr() % 16 {
            // SAFETY: `dst` is 16-byte aligned; `src` 8-aligned.
            0 => return unsafe { store_pairs_from(dst, src, size, 0) },
            8 => {
                // SAFETY: `size >= 16 > 8`; then `dst + 8` is 16-byte aligned.
                unsafe {
                    movnti64(dst, src.cast::<u64>().read_volatile());
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
            // SAFETY: word 0 is inside the record; then `dst + 1` is 16-byte aligned.
            unsafe {
                movnti64(dst.cast::<u8>(), words[0]);
                store_word_pairs::<N, 1>(dst, &words);
            }
        }
    }
    #[cfg(not(target_feature = "sse2"))]
    {
        let mut i = 0;
        while i < N {
            // SAFETY: word `i` is inside the record.
            unsafe { movnti64(dst.add(i).cast::<u8>(), words[i]) };
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
    use core::arch::x86_64::{__m128i, _mm_set_epi64x, _mm_stream_si128};
    let mut i = FIRST;
    while i + 2 <= N {
        // SAFETY: SSE2 is enabled; `dst + i` is 16-byte aligned (`dst + FIRST` is, `i - FIRST` is
        // even) and words `i`, `i + 1` are inside the record.
        unsafe {
            _mm_stream_si128(
                dst.add(i).cast::<__m128i>(),
                _mm_set_epi64x(words[i + 1] as i64, words[i] as i64),
            )
        };
        i += 2;
    }
    if i < N {
        // SAFETY: word `i` is inside the record.
        unsafe { movnti64(dst.add(i).cast::<u8>(), words[i]) };
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
/// `src` readable and `dst` writable for `len` bytes, no overlap.
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
        unsafe { movnti32(d, ptr::read_unaligned(s.cast::<u32>())) };
        // SAFETY: advancing by 4 <= n.
        unsafe { (d, s) = (d.add(4), s.add(4)) };
        n -= 4;
    }

    #[cfg(target_feature = "sse2")]
    {
        if n >= 8 && d.addr() & 8 != 0 {
            // SAFETY: 8 bytes remain in both ranges.
            unsafe { movnti64(d, ptr::read_unaligned(s.cast::<u64>())) };
            // SAFETY: advancing by 8 <= n.
            unsafe { (d, s) = (d.add(8), s.add(8)) };
            n -= 8;
        }
        // `d` is now 16-byte aligned whenever at least 16 bytes remain.
        while n >= 64 {
            // SAFETY: 64 bytes remain; `d` is 16-byte aligned, so each of the four 16-byte
            // destinations is too.
            unsafe {
                movntdq(d, s);
                movntdq(d.add(16), s.add(16));
                movntdq(d.add(32), s.add(32));
                movntdq(d.add(48), s.add(48));
            }
            // SAFETY: advancing by 64 <= n.
            unsafe { (d, s) = (d.add(64), s.add(64)) };
            n -= 64;
        }
        while n >= 16 {
            // SAFETY: 16 bytes remain and `d` is 16-byte aligned.
            unsafe { movntdq(d, s) };
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
                movnti64(d, ptr::read_unaligned(s.cast::<u64>()));
                movnti64(d.add(8), ptr::read_unaligned(s.add(8).cast::<u64>()));
                movnti64(d.add(16), ptr::read_unaligned(s.add(16).cast::<u64>()));
                movnti64(d.add(24), ptr::read_unaligned(s.add(24).cast::<u64>()));
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
    // SAFETY: `sfence` has no operands and no preconditions. It is deliberately not marked
    // `nomem`, so the compiler also treats it as a memory barrier and keeps memory accesses on
    // their side of it.
    unsafe { asm!("sfence", options(nostack, preserves_flags)) };
}

/// `prefetcht0`: a hint to bring the line holding `p` into every cache level. Prefetches never
/// fault (an unmapped or invalid address is ignored) and are not ordered by `lock`ed
/// instructions or fences, so a prefetch issued ahead of a lock still overlaps with it. Part of
/// every x86-64 CPU (it does not use SSE registers, so kernel targets without SSE have it too).
#[inline(always)]
pub(crate) fn prefetch(p: *const u8) {
    // SAFETY: `prefetcht0` reads no architectural state through `p` (it cannot fault and has no
    // visible effect besides timing), writes nothing and changes no flags.
    unsafe { asm!("prefetcht0 [{}]", in(reg) p, options(nostack, preserves_flags, readonly)) };
}

/// See [`crate::clear_pages`]: `rep stosb` for ranges the CPU's fast-string microcode clears
/// well (below [`crate::CLEAR_STREAMING_MIN`], where the pages are likely reused from cache, and,
/// on CPUs without `CLZERO`, from [`crate::CLEAR_REP_LARGE_MIN`] up, where the microcode
/// switches to its own non-temporal protocol), streaming zeroing in between (`clzero` where
/// available, else `movntdq`).
///
/// # Safety
///
/// `dst` writable for `npages * 4096` bytes; the product does not overflow.
#[inline]
pub(crate) unsafe fn clear_pages(dst: *mut u8, npages: usize) {
    let len = npages * PAGE_SIZE;
    // With CLZERO the streaming path beats `rep stosb` at every large size (measured 31.2 vs
    // 29.9 GB/s at 1 GiB on Zen 3); without it only up to CLEAR_REP_LARGE_MIN.
    let streaming_max = if has_clzero() { usize::MAX } else { crate::CLEAR_REP_LARGE_MIN };
    if len >= crate::CLEAR_STREAMING_MIN && len < streaming_max {
        // SAFETY: same contract.
        unsafe { clear_pages_streaming(dst, npages) }
    } else {
        // SAFETY: same contract.
        unsafe { clear_pages_cached(dst, npages) }
    }
}

/// One `rep stosb` of `npages * 4096` bytes (Linux's `clear_page_erms`/`clear_pages` on ERMS).
///
/// # Safety
///
/// `dst` writable for `npages * 4096` bytes; the product does not overflow.
#[inline]
pub(crate) unsafe fn clear_pages_cached(dst: *mut u8, npages: usize) {
    let len = npages * PAGE_SIZE;
    // SAFETY: `rep stosb` writes exactly `rcx = len` bytes of `al = 0` upward from `rdi = dst`
    // (the direction flag is clear on entry to inline assembly, as Rust requires), which the
    // caller guarantees is writable. It changes no flags and does not use the stack.
    unsafe {
        asm!(
            "rep stosb",
            inout("rcx") len => _,
            inout("rdi") dst => _,
            in("al") 0u8,
            options(nostack, preserves_flags),
        );
    }
}

/// Whether the CPU has `CLZERO` (AMD: CPUID `0x8000_0008`, EBX bit 0), detected on first use
/// and cached. `CLZERO` zeroes a whole 64-byte line without reading it, weakly ordered like a
/// non-temporal store (AMD APM: "software should use an SFENCE ... to enforce memory ordering
/// of CLZERO"), and on Zen 3 it is the fastest way to zero memory (measured 27.7 GB/s on 2 MiB
/// ranges against 25.0 for `movntdq` and 9.3 for `rep stosb`).
pub(crate) fn has_clzero() -> bool {
    use core::sync::atomic::{AtomicU8, Ordering};
    static STATE: AtomicU8 = AtomicU8::new(0); // 0: not yet detected, 1: absent, 2: present
    match STATE.load(Ordering::Relaxed) {
        1 => false,
        2 => true,
        _ => {
            let present = detect_clzero();
            STATE.store(if present { 2 } else { 1 }, Ordering::Relaxed);
            present
        }
    }
}

fn detect_clzero() -> bool {
    use core::arch::x86_64::__cpuid;
    // SAFETY: `cpuid` exists on every x86-64 CPU and only reads identification registers
    // (`__cpuid` is an `unsafe fn` on older toolchains, a safe one on newer).
    #[allow(unused_unsafe)]
    let max_extended = unsafe { __cpuid(0x8000_0000) }.eax;
    if max_extended < 0x8000_0008 {
        return false;
    }
    // SAFETY: as above; the leaf exists (checked).
    #[allow(unused_unsafe)]
    let ebx = unsafe { __cpuid(0x8000_0008) }.ebx;
    ebx & 1 != 0
}

/// Zeroes `npages * 4096` bytes with streaming stores: `clzero` per 64-byte line where the CPU
/// has it, else `movntdq` of a zero register (64 bytes per iteration) with SSE2, else `movnti`
/// of a zero general-purpose register. Normal stores for a misaligned head or tail. Does not
/// fence.
///
/// # Safety
///
/// `dst` writable for `npages * 4096` bytes; the product does not overflow.
#[inline(never)]
pub(crate) unsafe fn clear_pages_streaming(dst: *mut u8, npages: usize) {
    let len = npages * PAGE_SIZE;
    if has_clzero() {
        // SAFETY: same contract; the CPU has CLZERO.
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
    let head = (dst.addr().wrapping_neg() & 63).min(len);
    // SAFETY: `head <= len` bytes at `dst` are writable.
    unsafe { ptr::write_bytes(dst, 0, head) };
    let mut p = dst.wrapping_add(head);
    let mut n = len - head;
    while n >= 64 {
        // SAFETY: `p` is 64-byte aligned and the whole line `p..p+64` lies inside the range, so
        // `clzero` (which zeroes the line containing `rax`) writes only allowed bytes. It
        // changes no flags and does not use the stack.
        unsafe { asm!("clzero", in("rax") p, options(nostack, preserves_flags)) };
        p = p.wrapping_add(64);
        n -= 64;
    }
    // SAFETY: the last `n < 64` bytes are inside the range.
    unsafe { ptr::write_bytes(p, 0, n) };
}

/// Zeroes `len` bytes with `movntdq` of a zero register (64 bytes per iteration) with SSE2,
/// `movnti` of a zero general-purpose register without; normal stores on the edges.
///
/// # Safety
///
/// `dst` writable for `len` bytes.
unsafe fn clear_movnt(dst: *mut u8, len: usize) {
    let head = (dst.addr().wrapping_neg() & 15).min(len);
    // SAFETY: `head <= len` bytes at `dst` are writable.
    unsafe { ptr::write_bytes(dst, 0, head) };
    let mut p = dst.wrapping_add(head);
    let mut n = len - head;
    #[cfg(target_feature = "sse2")]
    {
        use core::arch::x86_64::{__m128i, _mm_setzero_si128, _mm_stream_si128};
        // SAFETY: SSE2 is enabled at compile time.
        let zero = unsafe { _mm_setzero_si128() };
        while n >= 64 {
            // SAFETY: 64 writable bytes at the 16-byte-aligned `p`.
            unsafe {
                _mm_stream_si128(p.cast::<__m128i>(), zero);
                _mm_stream_si128(p.add(16).cast::<__m128i>(), zero);
                _mm_stream_si128(p.add(32).cast::<__m128i>(), zero);
                _mm_stream_si128(p.add(48).cast::<__m128i>(), zero);
            }
            p = p.wrapping_add(64);
            n -= 64;
        }
    }
    while n >= 8 {
        // SAFETY: 8 writable bytes at `p`.
        unsafe { movnti64(p, 0) };
        p = p.wrapping_add(8);
        n -= 8;
    }
    // SAFETY: the last `n < 8` bytes are inside the range.
    unsafe { ptr::write_bytes(p, 0, n) };
}

/// The method [`clear_pages_streaming`] uses on this CPU.
pub(crate) fn streaming_clear_method() -> &'static str {
    if has_clzero() {
        "clzero"
    } else if cfg!(target_feature = "sse2") {
        "movntdq"
    } else {
        "movnti"
    }
}

/// `clear_pages` through the alternative `variant` (see `arch/x86_clear.rs`): `rep stosb` with
/// `rcx = len`, `rep stosq` with `rcx = len >> 3`, or the 64-byte unrolled loop with
/// `rcx = len >> 6`: Linux's `ALTERNATIVE_2` choice, modelled for the §7.5 checks.
/// [`clear_pages`] itself uses `rep stosb` or streaming stores by size.
///
/// # Safety
///
/// `dst` writable for `npages * 4096` bytes; the product does not overflow.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) unsafe fn clear_pages_variant(
    variant: super::x86_clear::X86ClearVariant,
    dst: *mut u8,
    npages: usize,
) {
    use super::x86_clear::X86ClearVariant;
    let len = npages * PAGE_SIZE;
    let count = variant.count(len);
    match variant {
        // SAFETY: as in `clear_pages`: exactly `rcx` bytes of `al` from `rdi`, which the
        // caller guarantees are writable.
        X86ClearVariant::RepStosb => unsafe {
            asm!(
                "rep stosb",
                inout("rcx") count => _,
                inout("rdi") dst => _,
                in("al") 0u8,
                options(nostack, preserves_flags),
            );
        },
        // SAFETY: `rep stosq` writes `rcx` 8-byte words of `rax` upward from `rdi`: `count * 8 =
        // len` bytes (len is a multiple of 4096), all writable per the caller.
        X86ClearVariant::RepStosq => unsafe {
            asm!(
                "rep stosq",
                inout("rcx") count => _,
                inout("rdi") dst => _,
                in("rax") 0u64,
                options(nostack, preserves_flags),
            );
        },
        // SAFETY: `memzero_page_aligned_unrolled`: `rcx` iterations of eight 8-byte stores of
        // `rax` and a 64-byte advance: `count * 64 = len` bytes, writable per the caller. The
        // loop changes flags (`dec`), so `preserves_flags` is not claimed. A zero count skips
        // the loop.
        X86ClearVariant::Unrolled64 => unsafe {
            asm!(
                "test {n}, {n}",
                "jz 3f",
                "2:",
                "mov qword ptr [{p}], {z}",
                "mov qword ptr [{p} + 8], {z}",
                "mov qword ptr [{p} + 16], {z}",
                "mov qword ptr [{p} + 24], {z}",
                "mov qword ptr [{p} + 32], {z}",
                "mov qword ptr [{p} + 40], {z}",
                "mov qword ptr [{p} + 48], {z}",
                "mov qword ptr [{p} + 56], {z}",
                "lea {p}, [{p} + 64]",
                "dec {n}",
                "jnz 2b",
                "3:",
                n = inout(reg) count => _,
                p = inout(reg) dst => _,
                z = in(reg) 0u64,
                options(nostack),
            );
        },
    }
}

#[cfg(test)]
mod tests {
    //! Each `clear_pages` alternative zeroes exactly its range (guard bytes on both sides).
    use super::*;
    use crate::arch::x86_clear::X86ClearVariant;
    use std::vec;

    #[test]
    fn s7_5_each_x86_alternative_zeroes_exactly_npages() {
        for v in [X86ClearVariant::RepStosb, X86ClearVariant::RepStosq, X86ClearVariant::Unrolled64] {
            for offset in [0usize, 8, 64, 4096] {
                for npages in [0usize, 1, 2, 5] {
                    let len = npages * PAGE_SIZE;
                    let mut buf = vec![0xa5u8; offset + len + 4096];
                    // SAFETY: `offset + len` bytes are inside `buf`.
                    unsafe { clear_pages_variant(v, buf.as_mut_ptr().add(offset), npages) };
                    assert!(buf[..offset].iter().all(|&b| b == 0xa5), "{v:?}: bytes before changed");
                    assert!(buf[offset..offset + len].iter().all(|&b| b == 0), "{v:?}: range not zeroed");
                    assert!(buf[offset + len..].iter().all(|&b| b == 0xa5), "{v:?}: bytes after changed");
                }
            }
        }
    }

    /// Both streaming clear bodies, whatever this CPU has (CLZERO is only run where present).
    #[test]
    fn streaming_clear_bodies_zero_exactly_the_range() {
        for offset in [0usize, 1, 8, 63, 64, 100, 4096] {
            for len in [0usize, 1, 63, 64, 65, 4096, 3 * 4096 + 17, 1 << 20] {
                let mut buf = vec![0xa5u8; offset + len + 128];
                // SAFETY: `offset + len` bytes are inside `buf`.
                unsafe { clear_movnt(buf.as_mut_ptr().add(offset), len) };
                drain();
                assert!(
                    buf[..offset].iter().all(|&b| b == 0xa5)
                        && buf[offset + len..].iter().all(|&b| b == 0xa5)
                );
                assert!(buf[offset..offset + len].iter().all(|&b| b == 0), "movnt offset {offset} len {len}");
                if has_clzero() {
                    buf.fill(0xa5);
                    // SAFETY: as above; the CPU has CLZERO.
                    unsafe { clear_clzero(buf.as_mut_ptr().add(offset), len) };
                    drain();
                    assert!(
                        buf[..offset].iter().all(|&b| b == 0xa5)
                            && buf[offset + len..].iter().all(|&b| b == 0xa5)
                    );
                    assert!(
                        buf[offset..offset + len].iter().all(|&b| b == 0),
                        "clzero offset {offset} len {len}"
                    );
                }
            }
        }
    }

    #[test]
    fn s7_5_clear_page_equals_clear_pages_of_one() {
        let mut a = vec![0x5au8; 3 * PAGE_SIZE];
        let mut b = a.clone();
        // SAFETY: one page at offset 4096 of 3-page buffers.
        unsafe {
            clear_pages(a.as_mut_ptr().add(PAGE_SIZE), 1);
            clear_pages_variant(X86ClearVariant::RepStosb, b.as_mut_ptr().add(PAGE_SIZE), 1);
        }
        assert_eq!(a, b);
        assert!(a[PAGE_SIZE..2 * PAGE_SIZE].iter().all(|&x| x == 0));
    }
}
