//! Built by `ci/nostd.sh` for a custom target specification, `x86_64-unknown-mykernel.json`,
//! that the script prints from nightly's `x86_64-unknown-none` and keeps under a name no target parser knows (the way kernels such as
//! Rust-for-Linux name theirs). The assertions run at compile time: the build fails unless
//! stream-hal chose its x86-64 streaming backend, in the `movnti`-only form that a soft-float
//! target needs. The script then looks for `movnti` (and the absence of SSE) in the object code.
#![no_std]

use stream_hal::{Backend, backend};

const _: () = assert!(backend().is_streaming(), "stream-hal fell back to a non-streaming backend");
const _: () = assert!(
    matches!(backend(), Backend::X86_64 { vector: false }),
    "stream-hal did not pick the movnti-only x86-64 backend"
);

/// Zeroes `len` bytes at `dst` through stream-hal and drains: object code for the script to
/// disassemble (a `#[no_mangle]` function is code-generated even in an rlib).
///
/// # Safety
///
/// `dst` must be valid for writes of `len` bytes, and nothing else may access them during the
/// call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn custom_target_clear(dst: *mut u8, len: usize) {
    // SAFETY: the caller guarantees `len` writable bytes at `dst` with no other access; the
    // drain below orders the streaming stores before the function returns.
    unsafe { stream_hal::clear_streaming(dst, len) };
    stream_hal::drain();
}

/// Copies `len` bytes from `src` to `dst` with streaming stores and drains.
///
/// # Safety
///
/// `src` must be valid for reads and `dst` for writes of `len` bytes, initialized and not
/// overlapping, and nothing else may access `dst` during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn custom_target_copy(dst: *mut u8, src: *const u8, len: usize) {
    // SAFETY: the caller guarantees the contract of `memcpy_nontemporal`; drained before return.
    unsafe { stream_hal::memcpy_nontemporal(dst, src, len) };
    stream_hal::drain();
}
