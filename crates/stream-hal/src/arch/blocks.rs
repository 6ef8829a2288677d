//! The edge handling shared by the cache-block zeroing instructions (`clzero`, `dc zva`,
//! `cbo.zero`, `dcbz`): each zeroes the whole aligned block around its address, so only whole
//! blocks inside the range may be given to it.

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
