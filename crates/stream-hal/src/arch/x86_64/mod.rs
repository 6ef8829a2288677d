//! x86-64 backend: `movntdq` (with SSE2) and `movnti` streaming stores, `sfence`, and the
//! clear size bands of [`crate::CLEAR_STREAMING_MIN`] and [`crate::CLEAR_REP_LARGE_MIN`] (the
//! table in the crate documentation). Without SSE (`x86_64-unknown-none`, soft-float kernels)
//! everything is `movnti` from general-purpose registers, as Linux's `__memcpy_flushcache`.
//!
//! Records are moved in registers (16-byte loads feed `movntdq`, 8-byte loads `movnti`). Every
//! instruction goes through [`insn`], which `cfg(stream_hal_emulate)` emulates.

use core::ptr;

use crate::CpuFeatures;

/// Whether 16-byte `movntdq` stores are available in this build (SSE2 enabled at compile time).
pub(crate) const VECTOR: bool = cfg!(target_feature = "sse2");

mod clear;
mod insn;
#[cfg(feature = "bench-kit")]
pub(crate) mod kit;

pub(crate) use clear::{clear, clear_cached, clear_streaming, streaming_clear_method};
// `drain` is `sfence`, `prefetch` is `prefetcht0` (see `insn`).
pub(crate) use insn::{prefetcht0 as prefetch, sfence as drain};

/// Detects `CLZERO` and the AMD/Hygon vendor (see [`CpuFeatures`]) with CPUID; `None` when
/// emulating.
pub(crate) fn detect_cpu_features() -> Option<CpuFeatures> {
    #[cfg(not(stream_hal_emulate))]
    {
        let (_, b, c, d) = insn::cpuid(0);
        let amd = crate::arch::x86_cache::amd_vendor(b, c, d);
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
        super::x86_cache::from_cpuid(&mut detect_cache_info_cpuid)
    }
    #[cfg(stream_hal_emulate)]
    crate::CacheInfo::unknown(crate::NoCacheInfo::NoSource)
}

/// The CPUID the cache decoder reads through, as a named function: its instruction stays in
/// a symbol `ci/nostd.sh` can attribute to [`detect_cache_info`] (inlined into the `dyn FnMut`
/// shim it had a generic name).
#[cfg(not(stream_hal_emulate))]
#[inline(never)]
fn detect_cache_info_cpuid(leaf: u32, subleaf: u32) -> [u32; 4] {
    insn::cpuid_count(leaf, subleaf)
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
    match dst.addr() % 16 {
        // SAFETY: `dst` is 16-byte aligned; `0 <= size`.
        0 if size >= 16 => return unsafe { store_pairs_from::<false>(dst, src, size, 0) },
        8 if size >= 24 => {
            // SAFETY: `size >= 8`, so word 0 is inside both ranges; then `dst + 8` is 16-byte
            // aligned and `8 <= size`.
            unsafe {
                insn::movnti64(dst, ptr::read_unaligned(src.cast::<u64>()));
                return store_pairs_from::<false>(dst, src, size, 8);
            }
        }
        _ => {}
    }
    // SAFETY: as for this function.
    unsafe { store_words_from(dst, src, size, 0) }
}

/// Loads 16 bytes from `src` as two 8-byte loads and stores them with `movntdq`. The loads are
/// volatile so the compiler cannot merge them into one 16-byte load, which would stall store
/// forwarding on bytes just written by 8-byte stores.
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

/// Streams `[start, size)` of a record with `movntdq` per 16 bytes, then the 8/4/1-byte rest:
/// loaded with one 16-byte load ([`copy16`]), or with `WORDS` as two 8-byte loads
/// ([`copy16_from_words`]). `start` is a constant at every call site, so the loop unrolls
/// completely.
///
/// # Safety
///
/// `src` readable (initialized; with `WORDS` 8-aligned) and `dst` writable for `size` bytes;
/// `dst + start` 16-byte aligned; `start <= size`.
#[cfg(target_feature = "sse2")]
#[inline(always)]
unsafe fn store_pairs_from<const WORDS: bool>(dst: *mut u8, src: *const u8, size: usize, start: usize) {
    let mut off = start;
    while off + 16 <= size {
        // SAFETY: `dst + off` is 16-byte aligned (`dst + start` is, `off - start` is a multiple
        // of 16) and `off + 16 <= size`; with `WORDS`, `src + off` stays 8-aligned.
        unsafe {
            if WORDS {
                copy16_from_words(dst.add(off), src.add(off));
            } else {
                copy16(dst.add(off), src.add(off));
            }
        }
        off += 16;
    }
    // SAFETY: as for this function; `off <= size`.
    unsafe { store_words_from(dst, src, size, off) };
}

/// See `arch/mod.rs`: 8-byte loads only; word pairs with `movntdq` where SSE2 and the
/// alignments allow, else `movnti` per word.
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
            0 => return unsafe { store_pairs_from::<true>(dst, src, size, 0) },
            8 => {
                // SAFETY: `size >= 16 > 8`, so word 0 is inside both ranges; then `dst + 8` is
                // 16-byte aligned and `8 <= size`.
                unsafe {
                    insn::movnti64(dst, src.cast::<u64>().read_volatile());
                    return store_pairs_from::<true>(dst, src, size, 8);
                }
            }
            _ => {}
        }
    }
    // SAFETY: same contract.
    unsafe { store_words_from(dst, src, size, 0) }
}

/// See `arch/mod.rs`: word pairs combined in XMM registers and stored with `movntdq` (after one
/// `movnti` when `dst` is 8 mod 16), a last odd word with `movnti`.
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

/// See [`crate::memcpy_nontemporal`]: normal head bytes, `movnti` to 16-byte alignment,
/// `movntdq` (or without SSE2 `movnti`) on the body, `movnti` and normal stores on the tail.
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
