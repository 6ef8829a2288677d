//! aarch64 backend.
//!
//! * Streaming stores: `stnp` of general-purpose registers (valid without FP/SIMD) on the
//!   16-byte-aligned body, normal stores on the edges; pairs only at naturally aligned
//!   addresses, so `+strict-align` targets work.
//! * Clear: the non-temporal MOPS set `SETPN`/`SETMN`/`SETEN` where [`crate::cpu_features`]
//!   reports FEAT_MOPS, else `dc zva` unless `DCZID_EL0.DZP` prohibits it, else
//!   `stnp xzr, xzr`: the paths of Linux's `arch/arm64/lib/clear_page.S`.
//!
//! The MOPS sequences and the barrier: `docs/stream-hal.md` in the repository.

use core::ptr;

use super::dczid::{self, ZeroMethod};

use super::load64;

mod insn;
#[cfg(feature = "bench-kit")]
pub(crate) mod kit;

// `drain` is `dmb ish` (see the module documentation), `prefetch` is `prfm pldl1keep`.
pub(crate) use insn::{dmb_ish as drain, prfm_pldl1keep as prefetch};

/// `AT_HWCAP2` (include/uapi/linux/auxvec.h).
const AT_HWCAP2: core::ffi::c_ulong = 26;

/// `HWCAP2_MOPS` (arch/arm64/include/uapi/asm/hwcap.h): FEAT_MOPS, set only when the kernel
/// has enabled the instructions for user space (`SCTLR_EL1.MSCEn`).
const HWCAP2_MOPS: u64 = 1 << 43;

/// The features an `AT_HWCAP2` value describes: FEAT_MOPS.
fn features_from_hwcap2(hwcap2: u64) -> crate::CpuFeatures {
    crate::CpuFeatures::NONE.with_mops(hwcap2 & HWCAP2_MOPS != 0)
}

/// Linux: FEAT_MOPS from `AT_HWCAP2`. Elsewhere, and when emulating, `None`: a bare-metal
/// kernel passes what it found with [`crate::set_cpu_features`].
pub(crate) fn detect_cpu_features() -> Option<crate::CpuFeatures> {
    super::auxval(AT_HWCAP2).map(features_from_hwcap2)
}

/// The caches from Linux's sysfs (`CCSIDR_EL1` traps at EL0); elsewhere the caller passes
/// them with [`crate::set_cache_info`].
pub(crate) use crate::cache::detect_from_sysfs as detect_cache_info;

/// 4 bytes from `src`, any alignment.
///
/// # Safety
///
/// `src` readable for 4 bytes.
#[inline(always)]
unsafe fn load32(src: *const u8) -> u32 {
    // SAFETY: the caller guarantees 4 readable bytes.
    unsafe { ptr::read_unaligned(src.cast::<u32>()) }
}

/// See `arch/mod.rs`: `N` words given by value, stored as `stnp` pairs (a last odd word as a
/// pair of 32-bit halves).
///
/// # Safety
///
/// `dst` writable for `8 * N` bytes and 8-byte aligned.
#[inline(always)]
pub(crate) unsafe fn store_words<const N: usize>(dst: *mut u64, words: [u64; N]) {
    let mut i = 0;
    while i + 2 <= N {
        // SAFETY: words `i`, `i + 1` are inside the 8-aligned record.
        unsafe { insn::stnp64(dst.add(i).cast::<u8>(), words[i], words[i + 1]) };
        i += 2;
    }
    if i < N {
        // SAFETY: word `i` is inside the record and 8-aligned (so 4-aligned).
        unsafe { insn::stnp32(dst.add(i).cast::<u8>(), words[i] as u32, (words[i] >> 32) as u32) };
    }
}

/// See `arch/mod.rs`. `size` is a compile-time constant at every call site.
///
/// # Safety
///
/// `src` readable and `dst` writable for `size` bytes, no overlap.
#[inline(always)]
pub(crate) unsafe fn store_record(dst: *mut u8, src: *const u8, size: usize) {
    if dst.addr() % 8 != 0 {
        // SAFETY: as for this function. Pair stores to a misaligned address could fault on
        // strict-alignment systems, so such records are stored normally.
        unsafe { ptr::copy_nonoverlapping(src, dst, size) };
        return;
    }
    let mut off = 0;
    while off + 16 <= size {
        // SAFETY: `off + 16 <= size`; `dst + off` is 8-byte aligned.
        unsafe { insn::stnp64(dst.add(off), load64(src.add(off)), load64(src.add(off + 8))) };
        off += 16;
    }
    if off + 8 <= size {
        // SAFETY: `off + 8 <= size`; `dst + off` is 8-byte (so 4-byte) aligned.
        unsafe { insn::stnp32(dst.add(off), load32(src.add(off)), load32(src.add(off + 4))) };
        off += 8;
    }
    if off < size {
        // SAFETY: `size - off < 8` bytes remain in both ranges.
        unsafe { ptr::copy_nonoverlapping(src.add(off), dst.add(off), size - off) };
    }
}

/// aarch64 has no single-register non-temporal store; the 8-byte-load variant is the same
/// sequence (loads are already 8 bytes wide here).
pub(crate) use self::store_record as store_record_words;

/// See [`crate::memcpy_nontemporal`]: `stnp` pairs on the 16-byte-aligned body.
///
/// # Safety
///
/// `src` readable and `dst` writable for `len` bytes, no overlap.
#[inline(never)]
pub(crate) unsafe fn memcpy_nontemporal(dst: *mut u8, src: *const u8, len: usize) {
    let (mut d, mut s, mut n) = (dst, src, len);
    let head = d.addr().wrapping_neg() & 15;
    if head != 0 {
        let h = head.min(n);
        // SAFETY: `h <= n` bytes are inside both ranges.
        unsafe { ptr::copy_nonoverlapping(s, d, h) };
        // SAFETY: advancing by `h <= n`.
        unsafe { (d, s) = (d.add(h), s.add(h)) };
        n -= h;
    }
    while n >= 64 {
        // SAFETY: 64 bytes remain; `d` is 16-byte aligned.
        unsafe {
            insn::stnp64(d, load64(s), load64(s.add(8)));
            insn::stnp64(d.add(16), load64(s.add(16)), load64(s.add(24)));
            insn::stnp64(d.add(32), load64(s.add(32)), load64(s.add(40)));
            insn::stnp64(d.add(48), load64(s.add(48)), load64(s.add(56)));
        }
        // SAFETY: advancing by 64 <= n.
        unsafe { (d, s) = (d.add(64), s.add(64)) };
        n -= 64;
    }
    while n >= 16 {
        // SAFETY: 16 bytes remain; `d` is 16-byte aligned.
        unsafe { insn::stnp64(d, load64(s), load64(s.add(8))) };
        // SAFETY: advancing by 16 <= n.
        unsafe { (d, s) = (d.add(16), s.add(16)) };
        n -= 16;
    }
    if n != 0 {
        // SAFETY: `n < 16` bytes remain in both ranges.
        unsafe { ptr::copy_nonoverlapping(s, d, n) };
    }
}

/// How [`clear`] and [`clear_cached`] zero on this CPU now: FEAT_MOPS where
/// [`crate::cpu_features`] reports it, else what `DCZID_EL0` says.
fn zero_method() -> ZeroMethod {
    dczid::select(crate::cpu_features().mops(), insn::read_dczid)
}

/// See [`crate::clear`] and the module documentation.
///
/// # Safety
///
/// `dst` writable for `len` bytes.
#[inline]
pub(crate) unsafe fn clear(dst: *mut u8, len: usize) {
    match zero_method() {
        // SAFETY: the caller guarantees `dst..dst+len` is writable; FEAT_MOPS is in effect
        // (`cpu_features` says so: detected from the kernel's HWCAP2_MOPS, or vouched for by
        // the caller of `set_cpu_features`, whose contract includes the instructions being
        // enabled): `clear_mops_nt`'s contract.
        ZeroMethod::Mops => unsafe { clear_mops_nt(dst, len) },
        // SAFETY: the caller guarantees `dst..dst+len` is writable; `dc zva` is permitted and
        // `block_bytes` is this CPU's block size (both from DCZID_EL0).
        ZeroMethod::DcZva { block_bytes } => unsafe { clear_dc_zva(dst, len, block_bytes) },
        // SAFETY: as above.
        ZeroMethod::Prohibited => unsafe { clear_stnp(dst, len) },
    }
}

/// The temporal MOPS set (`SETP`/`SETM`/`SETE`) where FEAT_MOPS is in effect, else `dc zva`
/// where permitted, else the `stnp` fallback.
///
/// # Safety
///
/// `dst` writable for `len` bytes.
#[inline]
pub(crate) unsafe fn clear_cached(dst: *mut u8, len: usize) {
    match zero_method() {
        // SAFETY: as in `clear`: `len` writable bytes (caller) and FEAT_MOPS in effect.
        ZeroMethod::Mops => unsafe { clear_mops(dst, len) },
        // SAFETY: as in `clear`.
        ZeroMethod::DcZva { block_bytes } => unsafe { clear_dc_zva(dst, len, block_bytes) },
        // SAFETY: as in `clear`.
        ZeroMethod::Prohibited => unsafe { clear_stnp(dst, len) },
    }
}

/// The method [`clear_streaming`] uses.
pub(crate) fn streaming_clear_method() -> &'static str {
    "stnp"
}

/// Always the `stnp xzr, xzr` non-temporal loop.
///
/// # Safety
///
/// `dst` writable for `len` bytes.
#[inline]
pub(crate) unsafe fn clear_streaming(dst: *mut u8, len: usize) {
    // SAFETY: same contract.
    unsafe { clear_stnp(dst, len) }
}

/// [`clear`]'s MOPS path: `SETPN`/`SETMN`/`SETEN` of zero over the range. Not inlined, so
/// that the memory-set instructions sit in this function and [`clear_mops`] only (CI's
/// object-code check looks for them there).
///
/// # Safety
///
/// `dst` writable for `len` bytes; FEAT_MOPS is implemented and enabled at this exception
/// level.
#[inline(never)]
unsafe fn clear_mops_nt(dst: *mut u8, len: usize) {
    // SAFETY: the caller's contract is `insn::set_zero`'s: `len` writable bytes at `dst`,
    // FEAT_MOPS implemented and enabled. No edge handling: the memory-set instructions take any
    // address and size.
    unsafe { insn::set_zero::<true>(dst, len) }
}

/// [`clear_cached`]'s MOPS path: `SETP`/`SETM`/`SETE` of zero over the range.
///
/// # Safety
///
/// As for [`clear_mops_nt`].
#[inline(never)]
unsafe fn clear_mops(dst: *mut u8, len: usize) {
    // SAFETY: the caller's contract is `insn::set_zero`'s, as in `clear_mops_nt`.
    unsafe { insn::set_zero::<false>(dst, len) }
}

/// Zeroes `len` bytes with `dc zva` on every whole `block`-byte block and normal stores on the
/// misaligned edges (a `dc zva` on a partial block would zero bytes outside the range).
///
/// # Safety
///
/// `dst` writable for `len` bytes; `block` is the `dc zva` block size of this CPU (a power of
/// two) and `dc zva` is not prohibited.
unsafe fn clear_dc_zva(dst: *mut u8, len: usize, block: usize) {
    // SAFETY: the caller's contract; `block` is a power of two and `dc zva` may run, so
    // `insn::dc_zva` zeroes exactly the `block`-aligned block it is given.
    unsafe { crate::arch::blocks::zero_blocks(dst, len, block, insn::dc_zva) }
}

/// Zeroes `len` bytes with `stnp xzr, xzr` on the 16-byte-aligned body (64 bytes per
/// iteration, as Linux's fallback) and normal stores on the edges.
///
/// # Safety
///
/// `dst` writable for `len` bytes.
unsafe fn clear_stnp(dst: *mut u8, len: usize) {
    // SAFETY: the caller guarantees `len` writable bytes; 16 divides 64; `stnp_zero64` and
    // `stnp_zero16` write exactly their 64 or 16 bytes at the 16-byte-aligned addresses
    // `zero_streamed` gives them.
    unsafe {
        crate::arch::blocks::zero_streamed(dst, len, 16, insn::stnp_zero64, (16, insn::stnp_zero16));
    }
}

#[cfg(test)]
mod tests {
    //! The clearing paths run here on real aarch64 code (under qemu-user in CI), whatever
    //! `DCZID_EL0.DZP` says on the machine, so the `stnp` fallback is exercised too; the MOPS
    //! paths where the CPU has FEAT_MOPS (`qemu-aarch64 -cpu max`; ci/arches.sh also runs these
    //! tests under `-cpu neoverse-n1`, which lacks it). Under emulation the `dc zva` path runs
    //! with several block sizes, and the MOPS paths always.
    use super::*;
    #[cfg(stream_hal_emulate)]
    use crate::arch::testing::check_clear;
    use crate::arch::testing::check_clears;
    use std::vec;
    use std::vec::Vec;

    const PAGE: usize = 4096;

    /// Guard bytes after a cleared range: past the largest block (2 KiB) `dc zva` may have.
    const GUARD: usize = 2048 + 64;

    fn offsets_and_lens() -> (&'static [usize], &'static [usize]) {
        if cfg!(miri) {
            (&[0, 1, 16, 63], &[0, 1, 15, 64, 65, 200])
        } else {
            (&[0, 1, 8, 15, 16, 63, 64, 100], &[0, 1, 15, 16, 63, 64, 65, 4096, 3 * 4096 + 17])
        }
    }

    #[test]
    fn dc_zva_path_zeroes_exactly_the_range() {
        let blocks = if cfg!(stream_hal_emulate) {
            vec![16, 64, 256]
        } else {
            match dczid::decode(insn::read_dczid()) {
                ZeroMethod::DcZva { block_bytes } => vec![block_bytes],
                // DC ZVA prohibited on this machine: the fallback test covers it. (`decode`
                // never gives `Mops`: that is `select`'s.)
                ZeroMethod::Prohibited | ZeroMethod::Mops => return,
            }
        };
        let (offsets, lens) = offsets_and_lens();
        for block in blocks {
            // SAFETY: the closure is only called with ranges inside check_clear's buffer;
            // `block` is the CPU's block size (or an emulated one) and DC ZVA is permitted.
            check_clears(|p, n| unsafe { clear_dc_zva(p, n, block) }, offsets, lens, GUARD);
        }
    }

    /// Clears `len` bytes at `offset` of a buffer of varying non-zero bytes with `clear` and
    /// compares the whole buffer with the slow path: a copy whose bytes in the range were set
    /// to zero one at a time.
    fn check_against_slow_path(clear: impl Fn(*mut u8, usize), offset: usize, len: usize) {
        let mut buf: Vec<u8> = (0..offset + len + GUARD).map(|i| (i * 31 + 7) as u8 | 1).collect();
        let mut want = buf.clone();
        for b in &mut want[offset..offset + len] {
            *b = 0;
        }
        clear(buf.as_mut_ptr().wrapping_add(offset), len);
        drain();
        let first = buf.iter().zip(&want).position(|(a, b)| a != b);
        assert!(first.is_none(), "offset {offset}, len {len}: first wrong byte at {first:?}");
    }

    /// Whether the MOPS paths may run here: emulated, or FEAT_MOPS in effect (detected from
    /// `HWCAP2_MOPS`: `qemu-aarch64 -cpu max`, Armv8.8 and Armv9.3 cores).
    fn mops_runs_here() -> bool {
        cfg!(stream_hal_emulate) || crate::cpu_features().mops()
    }

    /// Both MOPS sequences (`SETP` for `clear_cached`, `SETPN` for `clear`) zero exactly the
    /// range at odd offsets and sizes, up to more than a megabyte, as the slow path does.
    #[test]
    fn mops_paths_zero_exactly_the_range() {
        if !mops_runs_here() {
            std::eprintln!("FEAT_MOPS is not in effect on this CPU: the MOPS paths are not run");
            return;
        }
        let (offsets, lens) = offsets_and_lens();
        let more: &[usize] = &[4097, 5 * PAGE + 1, (1 << 20) + 4095];
        let paths: [unsafe fn(*mut u8, usize); 2] = [clear_mops, clear_mops_nt];
        for set in paths {
            // SAFETY: `clear_mops`'s and `clear_mops_nt`'s contract: the closure is only called
            // with ranges inside check_clear's buffer, and FEAT_MOPS is in effect (detected
            // from HWCAP2_MOPS) or emulated.
            let clear = |p, n| unsafe { set(p, n) };
            check_clears(clear, offsets, lens, GUARD);
            // Under Miri, `check_clears` alone: the same offsets and lengths through the same
            // code, where a second pass would double a two-minute test.
            if cfg!(miri) {
                continue;
            }
            for &offset in offsets {
                for &len in lens.iter().chain(more) {
                    check_against_slow_path(clear, offset, len);
                }
            }
        }
    }

    /// `clear` and `clear_cached` take the MOPS path exactly when FEAT_MOPS is in effect, and
    /// it is in effect exactly where CI says the CPU model has it (`STREAM_HAL_EXPECT_FEATURES`
    /// with `mops=yes` under `qemu-aarch64 -cpu max`, `mops=no` under `-cpu neoverse-n1`).
    #[test]
    fn clear_uses_mops_exactly_where_it_is_in_effect() {
        let mops = crate::cpu_features().mops();
        let method = zero_method();
        std::eprintln!("FEAT_MOPS in effect: {mops}; clear and clear_cached use {method:?}");
        assert_eq!(method == ZeroMethod::Mops, mops, "{method:?}");
        let expect = std::env::var("STREAM_HAL_EXPECT_FEATURES").unwrap_or_default();
        if expect.split(',').any(|item| item == "mops=yes") {
            assert!(mops, "FEAT_MOPS expected on this CPU model, not detected");
        }
        if expect.split(',').any(|item| item == "mops=no") {
            assert!(!mops, "FEAT_MOPS claimed on a CPU model without it");
        }
    }

    #[test]
    fn hwcap2_bit_43_is_mops() {
        assert!(features_from_hwcap2(HWCAP2_MOPS).mops());
        assert!(features_from_hwcap2(u64::MAX).mops());
        assert!(!features_from_hwcap2(!HWCAP2_MOPS).mops());
        assert_eq!(features_from_hwcap2(0), crate::CpuFeatures::NONE);
    }

    /// Under emulation, claiming FEAT_MOPS sends `clear` and `clear_cached` to the memory-set
    /// sequences (counted by the emulation), and removing it sends them back to `DCZID_EL0`'s
    /// method; the bytes are right either way.
    #[cfg(stream_hal_emulate)]
    #[test]
    fn clear_follows_the_claimed_mops() {
        use crate::emulation::memory_sets;
        let before = crate::cpu_features();
        for mops in [true, false] {
            // SAFETY: an emulated build executes no memory-set instruction: the emulation
            // writes the range with ordinary stores.
            unsafe { crate::set_cpu_features(crate::CpuFeatures::NONE.with_mops(mops)) };
            assert_eq!(zero_method() == ZeroMethod::Mops, mops);
            let sets = memory_sets();
            // SAFETY: the closures are only called with ranges inside check_clear's buffer.
            check_clear(|p, n| unsafe { clear(p, n) }, 3, 4096 + 5, GUARD);
            // SAFETY: as above.
            check_clear(|p, n| unsafe { clear_cached(p, n) }, 17, 300, GUARD);
            if mops {
                // Other tests may run sequences meanwhile: at least these two ran.
                assert!(memory_sets() >= sets + 2, "clear and clear_cached did not use MOPS");
            }
        }
        // SAFETY: `before` was in effect when the test started (nothing is detected here).
        unsafe { crate::set_cpu_features(before) };
    }

    #[test]
    fn stnp_fallback_zeroes_exactly_the_range() {
        let (offsets, lens) = offsets_and_lens();
        // SAFETY: the closure is only called with ranges inside check_clear's buffer.
        check_clears(|p, n| unsafe { clear_stnp(p, n) }, offsets, lens, GUARD);
    }

    #[test]
    fn dczid_reports_a_usable_block_size() {
        match dczid::decode(insn::read_dczid()) {
            ZeroMethod::DcZva { block_bytes } => {
                assert!(block_bytes.is_power_of_two() && (4..=2048).contains(&block_bytes));
            }
            ZeroMethod::Prohibited => {}
            ZeroMethod::Mops => unreachable!("decode gives a DCZID_EL0 method"),
        }
    }

    /// Clearing whole page-aligned pages through either path writes exactly those pages and
    /// stops at the page boundary, as arm64's `clear_page` does.
    #[test]
    fn clear_stops_at_the_page_boundary() {
        let mut buf = vec![0xa5u8; 5 * PAGE];
        let off = buf.as_ptr().addr().wrapping_neg() & (PAGE - 1);
        for npages in [1usize, 2] {
            buf.fill(0xa5);
            let p = buf.as_mut_ptr().wrapping_add(off);
            // SAFETY: `off + npages + 2` pages are inside the 5-page buffer.
            unsafe {
                clear(p, npages * PAGE);
                clear_stnp(p.add(npages * PAGE + PAGE), PAGE);
            }
            drain();
            let end = off + npages * PAGE;
            assert!(buf[off..end].iter().all(|&x| x == 0));
            assert!(buf[end..end + PAGE].iter().all(|&x| x == 0xa5), "stopped at the page boundary");
            assert!(buf[end + PAGE..end + 2 * PAGE].iter().all(|&x| x == 0));
            assert!(buf[..off].iter().all(|&x| x == 0xa5));
        }
    }

    /// Under emulation, `DCZID_EL0.DZP` set sends `clear` to the `stnp` fallback and clear to
    /// the `dc zva` path, both zeroing exactly the range.
    #[cfg(stream_hal_emulate)]
    #[test]
    fn clear_follows_the_emulated_dczid() {
        let (offsets, lens) = offsets_and_lens();
        for dczid in [4u64, 2, 1 << 4 | 4] {
            crate::emulation::set_dczid(dczid);
            // SAFETY: the closure is only called with ranges inside check_clear's buffer.
            check_clears(|p, n| unsafe { clear(p, n) }, offsets, lens, GUARD);
        }
        crate::emulation::set_dczid(4);
    }
}
