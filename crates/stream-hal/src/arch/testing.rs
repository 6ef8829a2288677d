//! What the backends' tests share: a clear checked against guard bytes on both sides.

use std::vec;

/// Runs `clear` on `len` bytes at `offset` into a buffer of `0xa5` bytes with `guard` more
/// after the range (at least the backend's largest zeroing block), drains, and checks that
/// exactly the range was zeroed.
pub(crate) fn check_clear(clear: impl Fn(*mut u8, usize), offset: usize, len: usize, guard: usize) {
    let mut buf = vec![0xa5u8; offset + len + guard];
    clear(buf.as_mut_ptr().wrapping_add(offset), len);
    super::drain();
    assert!(
        buf[..offset].iter().all(|&b| b == 0xa5),
        "bytes before the range changed: offset {offset}, len {len}"
    );
    assert!(
        buf[offset..offset + len].iter().all(|&b| b == 0),
        "range not zeroed: offset {offset}, len {len}"
    );
    assert!(
        buf[offset + len..].iter().all(|&b| b == 0xa5),
        "bytes after the range changed: offset {offset}, len {len}"
    );
}

/// [`check_clear`] at every offset of `offsets` with every length of `lens`.
pub(crate) fn check_clears(clear: impl Fn(*mut u8, usize), offsets: &[usize], lens: &[usize], guard: usize) {
    for &offset in offsets {
        for &len in lens {
            check_clear(&clear, offset, len, guard);
        }
    }
}
