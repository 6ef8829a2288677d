//! riscv64 backend.
//!
//! * Streaming stores: `sd` of general-purpose registers on the 8-byte-aligned body, each
//!   preceded by the Zihintntl hint `ntl.all`; normal stores for the misaligned edges.
//! * Drain: `fence w, rw`.
//! * Clear: Zicboz `cbo.zero` on every whole block where [`crate::cpu_features`] reports Zicboz
//!   (with its block size), as Linux's `arch/riscv/lib/clear_page.S` does; without it,
//!   `write_bytes` below [`crate::CLEAR_STREAMING_MIN`] and `ntl.all`-hinted zero stores from
//!   there.
//!
//! Misaligned accesses may trap and be emulated slowly, so stores are naturally aligned (the
//! source is read with `read_unaligned`). The barrier and hints: `docs/stream-hal.md`.

use core::ptr;

use crate::CpuFeatures;

/// The instructions of this backend, one function each, emulated under
/// `cfg(stream_hal_emulate)`.
use super::load64;

mod insn {
    #[cfg(not(stream_hal_emulate))]
    use core::arch::asm;

    /// Eight `ntl.all; sd` pairs: `w[i]` at `dst + 8 i`.
    ///
    /// # Safety
    ///
    /// `dst` writable for 64 bytes and 8-byte aligned.
    #[inline(always)]
    pub(super) unsafe fn ntl_sd8(dst: *mut u8, w: [u64; 8]) {
        #[cfg(not(stream_hal_emulate))]
        // SAFETY: the caller guarantees `dst..dst+64` is writable and 8-byte aligned, so each of
        // the eight `sd` writes 8 aligned bytes inside it. `ntl.all` is a HINT (`add x0, x0, x5`):
        // it writes no register (x0) and no memory. No stack use, and RISC-V has no flags.
        unsafe {
            asm!(
                ".option push",
                ".option arch, +zihintntl",
                "ntl.all", "sd {0}, 0({p})",
                "ntl.all", "sd {1}, 8({p})",
                "ntl.all", "sd {2}, 16({p})",
                "ntl.all", "sd {3}, 24({p})",
                "ntl.all", "sd {4}, 32({p})",
                "ntl.all", "sd {5}, 40({p})",
                "ntl.all", "sd {6}, 48({p})",
                "ntl.all", "sd {7}, 56({p})",
                ".option pop",
                in(reg) w[0], in(reg) w[1], in(reg) w[2], in(reg) w[3],
                in(reg) w[4], in(reg) w[5], in(reg) w[6], in(reg) w[7],
                p = in(reg) dst,
                options(nostack, preserves_flags),
            );
        }
        #[cfg(stream_hal_emulate)]
        // SAFETY: the caller guarantees 64 writable, 8-aligned bytes; typed `u64` writes need
        // that alignment, so a misaligned emulated store is reported.
        unsafe {
            crate::emulation::weak_store(dst.cast::<[u64; 8]>(), w);
        }
    }

    /// One `ntl.all; sd` of `value` at `dst`.
    ///
    /// # Safety
    ///
    /// `dst` writable for 8 bytes and 8-byte aligned.
    #[inline(always)]
    pub(super) unsafe fn ntl_sd(dst: *mut u8, value: u64) {
        #[cfg(not(stream_hal_emulate))]
        // SAFETY: the caller guarantees 8 writable, aligned bytes at `dst`; the hint writes
        // nothing (see `ntl_sd8`).
        unsafe {
            asm!(
                ".option push",
                ".option arch, +zihintntl",
                "ntl.all",
                "sd {v}, 0({p})",
                ".option pop",
                v = in(reg) value,
                p = in(reg) dst,
                options(nostack, preserves_flags),
            );
        }
        #[cfg(stream_hal_emulate)]
        // SAFETY: as above; a typed write needs the same alignment.
        unsafe {
            crate::emulation::weak_store(dst.cast::<u64>(), value);
        }
    }

    /// `cbo.zero`: zeroes the whole `block`-byte cache block that contains `p`.
    ///
    /// # Safety
    ///
    /// The hart has Zicboz, `cbo.zero` is enabled for the current privilege level, `block` is
    /// its block size, and the whole block containing `p` must be valid for writes.
    #[inline(always)]
    pub(super) unsafe fn cbo_zero(p: *mut u8, block: usize) {
        #[cfg(not(stream_hal_emulate))]
        // SAFETY: the caller guarantees Zicboz is present and enabled and that the block around
        // `p` is writable; `cbo.zero` writes exactly that block and no register, uses no stack.
        unsafe {
            let _ = block;
            asm!(
                ".option push",
                ".option arch, +zicboz",
                "cbo.zero ({p})",
                ".option pop",
                p = in(reg) p,
                options(nostack, preserves_flags),
            );
        }
        #[cfg(stream_hal_emulate)]
        // SAFETY: the caller guarantees the block containing `p` is writable; `block` is the
        // Zicboz block size, a power of two.
        unsafe {
            crate::emulation::weak_zero_block(p, block);
        }
    }

    barrier!(
        /// `fence w, rw`: see the backend's documentation.
        fence_w_rw = "fence w, rw"
    );

    prefetch_hint!(
        /// Zicbop `prefetch.r 0(p)`: a HINT encoding (`ori x0, p, 0`), a no-op where Zicbop is
        /// missing; never faults.
        prefetch_r(reg) = ".option push", ".option arch, +zicbop", "prefetch.r 0({p})", ".option pop"
    );

    /// The Linux `riscv_hwprobe` syscall: fills in the values of `pairs` (key, value) for all
    /// online harts. Returns 0 on success, a negative errno otherwise (`-ENOSYS` on kernels
    /// before 6.4).
    #[cfg(all(target_os = "linux", not(stream_hal_emulate)))]
    pub(super) fn riscv_hwprobe(pairs: &mut [[u64; 2]]) -> isize {
        /// `__NR_riscv_hwprobe` (arch/riscv/include/uapi/asm/unistd.h).
        const NR_RISCV_HWPROBE: usize = 258;
        let ret: isize;
        // SAFETY: the syscall reads and writes `pairs.len()` 16-byte `struct riscv_hwprobe`
        // entries at `pairs`, which is a valid exclusive slice of that many `[u64; 2]` (same
        // layout: `__s64 key; __u64 value;`); cpusetsize 0 and cpus NULL mean all online harts,
        // flags 0. `ecall` clobbers only a0 (the result, declared) in the Linux syscall ABI.
        unsafe {
            asm!(
                "ecall",
                inlateout("a0") pairs.as_mut_ptr() => ret,
                in("a1") pairs.len(),
                in("a2") 0usize,
                in("a3") 0usize,
                in("a4") 0usize,
                in("a7") NR_RISCV_HWPROBE,
                options(nostack, preserves_flags),
            );
        }
        ret
    }
}

/// `RISCV_HWPROBE_KEY_IMA_EXT_0`.
#[cfg_attr(not(all(target_os = "linux", not(stream_hal_emulate))), allow(dead_code))]
const KEY_IMA_EXT_0: u64 = 4;
/// `RISCV_HWPROBE_EXT_ZICBOZ`, a bit of the `IMA_EXT_0` value.
#[cfg_attr(not(all(target_os = "linux", not(stream_hal_emulate))), allow(dead_code))]
const EXT_ZICBOZ: u64 = 1 << 6;
/// `RISCV_HWPROBE_KEY_ZICBOZ_BLOCK_SIZE`.
#[cfg_attr(not(all(target_os = "linux", not(stream_hal_emulate))), allow(dead_code))]
const KEY_ZICBOZ_BLOCK_SIZE: u64 = 6;

/// The features the `riscv_hwprobe` answer `pairs` (for [`KEY_IMA_EXT_0`] and
/// [`KEY_ZICBOZ_BLOCK_SIZE`], in that order) describes: Zicboz only when the kernel knows both
/// keys, reports the extension on every hart and gives a usable block size.
#[cfg_attr(not(any(test, all(target_os = "linux", not(stream_hal_emulate)))), allow(dead_code))]
fn features_from_hwprobe(pairs: [[u64; 2]; 2]) -> CpuFeatures {
    let [[ext_key, ext], [bs_key, bs]] = pairs;
    let known = ext_key == KEY_IMA_EXT_0 && bs_key == KEY_ZICBOZ_BLOCK_SIZE;
    let block = if known && ext & EXT_ZICBOZ != 0 {
        usize::try_from(bs).ok().and_then(crate::BlockSize::new)
    } else {
        None
    };
    CpuFeatures::NONE.with_zicboz(block)
}

/// Linux: Zicboz and its block size from `riscv_hwprobe` (over all online harts). Elsewhere,
/// and when emulating, `None`: a kernel passes it with [`crate::set_cpu_features`].
pub(crate) fn detect_cpu_features() -> Option<CpuFeatures> {
    #[cfg(all(target_os = "linux", not(stream_hal_emulate)))]
    {
        let mut pairs = [[KEY_IMA_EXT_0, 0], [KEY_ZICBOZ_BLOCK_SIZE, 0]];
        if insn::riscv_hwprobe(&mut pairs) != 0 {
            // ENOSYS (a kernel before 6.4, or qemu-user before 8.2): nothing is known.
            return Some(CpuFeatures::NONE);
        }
        Some(features_from_hwprobe(pairs))
    }
    #[cfg(not(all(target_os = "linux", not(stream_hal_emulate))))]
    None
}

/// The caches from Linux's sysfs (with the `std` feature); elsewhere the caller passes them
/// with [`crate::set_cache_info`].
pub(crate) use crate::cache::detect_from_sysfs as detect_cache_info;

/// Copies `len` bytes with `ntl.all`-hinted `sd` on the 8-byte-aligned body.
///
/// # Safety
///
/// `src` readable (initialized) and `dst` writable for `len` bytes, no overlap.
#[inline(never)]
pub(crate) unsafe fn memcpy_nontemporal(dst: *mut u8, src: *const u8, len: usize) {
    let (mut d, mut s, mut n) = (dst, src, len);
    let head = (d.addr().wrapping_neg() & 7).min(n);
    // SAFETY: `head <= n` bytes are inside both ranges.
    unsafe { ptr::copy_nonoverlapping(s, d, head) };
    // SAFETY: advancing by `head <= n`.
    unsafe { (d, s) = (d.add(head), s.add(head)) };
    n -= head;
    while n >= 64 {
        // SAFETY: 64 bytes remain in both ranges; `d` is 8-byte aligned (the head reached an
        // 8-byte boundary whenever bytes remain).
        unsafe {
            let w: [u64; 8] = core::array::from_fn(|i| load64(s.add(8 * i)));
            insn::ntl_sd8(d, w);
        }
        // SAFETY: advancing by 64 <= n.
        unsafe { (d, s) = (d.add(64), s.add(64)) };
        n -= 64;
    }
    while n >= 8 {
        // SAFETY: 8 bytes remain; `d` is 8-byte aligned.
        unsafe { insn::ntl_sd(d, load64(s)) };
        // SAFETY: advancing by 8 <= n.
        unsafe { (d, s) = (d.add(8), s.add(8)) };
        n -= 8;
    }
    // SAFETY: the last `n < 8` bytes are inside both ranges.
    unsafe { ptr::copy_nonoverlapping(s, d, n) };
}

/// See `arch/mod.rs`: a hinted `sd` per whole word of an 8-aligned destination, normal stores
/// otherwise.
///
/// # Safety
///
/// `src` readable (initialized) and `dst` writable for `size` bytes, no overlap.
#[inline(always)]
pub(crate) unsafe fn store_record(dst: *mut u8, src: *const u8, size: usize) {
    if dst.addr() % 8 != 0 {
        // SAFETY: as for this function; misaligned `sd` could trap, so such records are stored
        // normally.
        unsafe { ptr::copy_nonoverlapping(src, dst, size) };
        return;
    }
    let mut off = 0;
    while off + 8 <= size {
        // SAFETY: `off + 8 <= size`; `dst + off` is 8-byte aligned.
        unsafe { insn::ntl_sd(dst.add(off), load64(src.add(off))) };
        off += 8;
    }
    if off < size {
        // SAFETY: `size - off < 8` bytes remain in both ranges.
        unsafe { ptr::copy_nonoverlapping(src.add(off), dst.add(off), size - off) };
    }
}

/// Loads are already 8 bytes wide in [`store_record`]: the same sequence.
pub(crate) use self::store_record as store_record_words;

/// See `arch/mod.rs`: `N` words given by value, one hinted `sd` each.
///
/// # Safety
///
/// `dst` writable for `8 * N` bytes and 8-byte aligned.
#[inline(always)]
pub(crate) unsafe fn store_words<const N: usize>(dst: *mut u64, words: [u64; N]) {
    let mut i = 0;
    while i < N {
        // SAFETY: word `i` is inside the 8-aligned record.
        unsafe { insn::ntl_sd(dst.add(i).cast::<u8>(), words[i]) };
        i += 1;
    }
}

// `drain` is `fence w, rw` (see the module documentation), `prefetch` is Zicbop `prefetch.r`.
pub(crate) use insn::{fence_w_rw as drain, prefetch_r as prefetch};

/// The benchmark's kit: nothing (Zicbom's `cbo.flush` is not detected).
#[cfg(feature = "bench-kit")]
pub(crate) use super::kit::none as kit;

/// The `cbo.zero` block size, if [`crate::cpu_features`] reports Zicboz.
#[inline]
fn zicboz_block() -> Option<usize> {
    crate::cpu_features().zicboz().map(crate::BlockSize::bytes)
}

/// See [`crate::clear`]: `cbo.zero` where Zicboz is present, else `write_bytes` below
/// [`crate::CLEAR_STREAMING_MIN`] and hinted zero stores from there.
///
/// # Safety
///
/// `dst` writable for `len` bytes.
#[inline]
pub(crate) unsafe fn clear(dst: *mut u8, len: usize) {
    match zicboz_block() {
        // SAFETY: the caller guarantees `len` writable bytes; Zicboz is present with this block
        // size (cpu_features says so: detected, or vouched for by `set_cpu_features`).
        Some(block) => unsafe { clear_cbo_zero(dst, len, block) },
        // SAFETY: same contract.
        None if len >= crate::CLEAR_STREAMING_MIN => unsafe { clear_ntl(dst, len) },
        // SAFETY: same contract.
        None => unsafe { ptr::write_bytes(dst, 0, len) },
    }
}

/// `cbo.zero` where Zicboz is present (it zeroes whole blocks in the cache, like `dc zva`),
/// else `write_bytes`.
///
/// # Safety
///
/// `dst` writable for `len` bytes.
#[inline]
pub(crate) unsafe fn clear_cached(dst: *mut u8, len: usize) {
    match zicboz_block() {
        // SAFETY: as in `clear`.
        Some(block) => unsafe { clear_cbo_zero(dst, len, block) },
        // SAFETY: same contract.
        None => unsafe { ptr::write_bytes(dst, 0, len) },
    }
}

/// Always the `ntl.all`-hinted zero stores.
///
/// # Safety
///
/// `dst` writable for `len` bytes.
#[inline]
pub(crate) unsafe fn clear_streaming(dst: *mut u8, len: usize) {
    // SAFETY: same contract.
    unsafe { clear_ntl(dst, len) }
}

/// The method [`clear_streaming`] uses.
pub(crate) fn streaming_clear_method() -> &'static str {
    "ntl.all sd"
}

/// Zeroes `len` bytes with `cbo.zero` on every whole, aligned `block` and normal stores on the
/// edges (a `cbo.zero` on a partial block would zero bytes outside the range).
///
/// # Safety
///
/// `dst` writable for `len` bytes; the hart has Zicboz enabled with block size `block` (a power
/// of two).
unsafe fn clear_cbo_zero(dst: *mut u8, len: usize, block: usize) {
    // SAFETY: the caller's contract; `block` is a power of two and the hart has Zicboz with
    // that block size, so `insn::cbo_zero` zeroes exactly the `block`-aligned block it is given.
    unsafe { super::blocks::zero_blocks(dst, len, block, insn::cbo_zero) }
}

/// Zeroes `len` bytes with hinted `sd` of zero on the 8-byte-aligned body (64 bytes per
/// iteration) and normal stores on the edges.
///
/// # Safety
///
/// `dst` writable for `len` bytes.
unsafe fn clear_ntl(dst: *mut u8, len: usize) {
    /// 64 zero bytes at the 8-byte-aligned `p`, with hinted stores.
    ///
    /// # Safety
    ///
    /// 64 writable bytes at the 8-byte-aligned `p`.
    #[inline(always)]
    unsafe fn zero64(p: *mut u8) {
        // SAFETY: the caller's contract.
        unsafe { insn::ntl_sd8(p, [0; 8]) };
    }
    /// 8 zero bytes at the 8-byte-aligned `p`, with a hinted store.
    ///
    /// # Safety
    ///
    /// 8 writable bytes at the 8-byte-aligned `p`.
    #[inline(always)]
    unsafe fn zero8(p: *mut u8) {
        // SAFETY: the caller's contract.
        unsafe { insn::ntl_sd(p, 0) };
    }
    // SAFETY: the caller guarantees `len` writable bytes; 8 divides 64; `zero64` and `zero8`
    // write exactly their bytes at the 8-byte-aligned addresses `zero_streamed` gives them.
    unsafe { super::blocks::zero_streamed(dst, len, 8, zero64, (8, zero8)) };
}

#[cfg(test)]
mod tests {
    //! Both clear bodies zero exactly their range: the hinted stores everywhere, `cbo.zero` with
    //! the hart's block size where it has Zicboz (qemu-user `-cpu rv64,zicboz=true` in CI) and
    //! with several block sizes under emulation.
    use super::*;
    use crate::arch::testing::check_clears;
    use std::vec;

    /// Guard bytes after a cleared range: past the largest `cbo.zero` block (4 KiB).
    const GUARD: usize = 4096 + 64;

    fn offsets_and_lens() -> (&'static [usize], &'static [usize]) {
        if cfg!(miri) {
            (&[0, 1, 8, 63], &[0, 1, 7, 64, 65, 200])
        } else {
            (&[0, 1, 7, 8, 15, 63, 64, 100], &[0, 1, 7, 8, 63, 64, 65, 4096, 3 * 4096 + 17])
        }
    }

    #[test]
    fn cbo_zero_path_zeroes_exactly_the_range() {
        let blocks = if cfg!(stream_hal_emulate) {
            vec![16, 64, 256]
        } else {
            match zicboz_block() {
                Some(block) => vec![block],
                // No Zicboz on this hart: `cbo.zero` would be an illegal instruction.
                None => return,
            }
        };
        let (offsets, lens) = offsets_and_lens();
        for block in blocks {
            // SAFETY: the closure is only called with ranges inside check_clear's buffer;
            // `block` is the hart's detected block size (or an emulated one) and Zicboz is
            // present.
            check_clears(|p, n| unsafe { clear_cbo_zero(p, n, block) }, offsets, lens, GUARD);
        }
    }

    #[test]
    fn ntl_clear_zeroes_exactly_the_range() {
        let (offsets, lens) = offsets_and_lens();
        // SAFETY: the closure is only called with ranges inside check_clear's buffer.
        check_clears(|p, n| unsafe { clear_ntl(p, n) }, offsets, lens, GUARD);
    }

    #[test]
    fn hwprobe_answers_are_decoded() {
        let b64 = crate::BlockSize::new(64);
        let yes = [[KEY_IMA_EXT_0, EXT_ZICBOZ | 1], [KEY_ZICBOZ_BLOCK_SIZE, 64]];
        assert_eq!(features_from_hwprobe(yes).zicboz(), b64);
        // The extension bit clear, a key the kernel does not know (-1), or an unusable block
        // size: no Zicboz.
        let no = [[KEY_IMA_EXT_0, 1], [KEY_ZICBOZ_BLOCK_SIZE, 64]];
        assert_eq!(features_from_hwprobe(no).zicboz(), None);
        let unknown = [[KEY_IMA_EXT_0, EXT_ZICBOZ], [u64::MAX, 0]];
        assert_eq!(features_from_hwprobe(unknown).zicboz(), None);
        let odd = [[KEY_IMA_EXT_0, EXT_ZICBOZ], [KEY_ZICBOZ_BLOCK_SIZE, 48]];
        assert_eq!(features_from_hwprobe(odd).zicboz(), None);
    }
}
