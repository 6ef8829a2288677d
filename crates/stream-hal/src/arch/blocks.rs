//! The edge handling shared by the clears: the cache-block zeroing instructions (`clzero`,
//! `dc zva`, `cbo.zero`, `dcbz`), each of which zeroes the whole aligned block around its
//! address, so only whole blocks inside the range may be given to it, and the streaming-store
//! clears (`movntdq`/`movnti`, `stnp`, `ntl.all`-hinted `sd`), which store zeroes 64 bytes at a
//! time from an aligned address.

use core::ptr;

/// Zeroes `dst..dst + len`: plain stores up to the first `block` boundary, `zero_block(p, block)`
/// on every whole `block`-aligned block after it, plain stores on the last `< block` bytes.
///
/// # Safety
///
/// * `dst` is valid for writes of `len` bytes;
/// * `block` is a power of two;
/// * `zero_block(p, block)` may be called for any `block`-aligned `p` whose `block` bytes are
///   valid for writes (the backend has checked that its instruction may run and that it zeroes
///   `block` bytes), and writes only those bytes.
#[inline(always)]
#[allow(dead_code)] // unused when the generic backend is selected
pub(crate) unsafe fn zero_blocks(
    dst: *mut u8,
    len: usize,
    block: usize,
    zero_block: unsafe fn(*mut u8, usize),
) {
    debug_assert!(block.is_power_of_two());
    let head = (dst.addr().wrapping_neg() & (block - 1)).min(len);
    // SAFETY: `head <= len` bytes at `dst` are writable.
    unsafe { ptr::write_bytes(dst, 0, head) };
    let mut p = dst.wrapping_add(head);
    let mut n = len - head;
    while n >= block {
        // SAFETY: `p` is `block`-aligned (when `n >= block` the head reached a block boundary:
        // `head` was not cut short by `len`) and `p..p + block` lies inside the range, which is
        // what the caller's contract for `zero_block` requires.
        unsafe { zero_block(p, block) };
        p = p.wrapping_add(block);
        n -= block;
    }
    // SAFETY: the last `n < block` bytes, `p..dst + len`, are inside the range.
    unsafe { ptr::write_bytes(p, 0, n) };
}

/// Zeroes `dst..dst + len`: plain stores up to the first `align` boundary, `wide(p)` on every
/// 64 bytes after it, then `narrow.1(p)` on every `narrow.0` bytes, plain stores on the last
/// `< narrow.0` bytes.
///
/// # Safety
///
/// * `dst` is valid for writes of `len` bytes;
/// * `align` is a power of two that divides 64 and is a multiple of `narrow.0`, which is not
///   zero;
/// * `wide(p)` may be called for any `align`-aligned `p` whose 64 bytes are valid for writes
///   and writes only those; `narrow.1(p)` likewise for `narrow.0` bytes at a `narrow.0`-aligned
///   `p`.
#[inline(always)]
#[allow(dead_code)] // unused when the generic backend is selected
pub(crate) unsafe fn zero_streamed(
    dst: *mut u8,
    len: usize,
    align: usize,
    wide: unsafe fn(*mut u8),
    narrow: (usize, unsafe fn(*mut u8)),
) {
    debug_assert!(align.is_power_of_two() && 64 % align == 0);
    debug_assert!(narrow.0 != 0 && align % narrow.0 == 0);
    let head = (dst.addr().wrapping_neg() & (align - 1)).min(len);
    // SAFETY: `head <= len` bytes at `dst` are writable.
    unsafe { ptr::write_bytes(dst, 0, head) };
    let mut p = dst.wrapping_add(head);
    let mut n = len - head;
    while n >= 64 {
        // SAFETY: `p` is `align`-aligned (when `n >= 64` the head reached an `align` boundary,
        // not cut short by `len`, and `align` divides the 64-byte steps) and `p..p + 64` lies
        // inside the range.
        unsafe { wide(p) };
        p = p.wrapping_add(64);
        n -= 64;
    }
    while n >= narrow.0 {
        // SAFETY: `p` is `narrow.0`-aligned (when this loop runs the head reached an `align`
        // boundary, and `p` has moved by multiples of 64 and `narrow.0` since, all multiples of
        // `narrow.0`) and `p..p + narrow.0` lies inside the range.
        unsafe { (narrow.1)(p) };
        p = p.wrapping_add(narrow.0);
        n -= narrow.0;
    }
    // SAFETY: the last `n < narrow.0` bytes, `p..dst + len`, are inside the range.
    unsafe { ptr::write_bytes(p, 0, n) };
}
