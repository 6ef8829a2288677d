//! A generic template fill for any `T: Copy` record.
//!
//! Not every kernel's frame metadata is a Linux `struct page`: Asterinas writes one 64-byte
//! `MetaSlot` per frame in a plain loop, Redox zero-fills `PageInfo` arrays. The template idea
//! carries over unchanged: build one record, copy it into every slot, patch only what depends on
//! the index. This module does that over caller-provided `&mut [MaybeUninit<T>]` with normal or
//! streaming stores, and hands back `&mut [T]` only after the streaming stores are drained.
//!
//! ```
//! use core::mem::MaybeUninit;
//! use memmap_core::{FillMode, template_fill_with};
//!
//! /// Per-frame metadata of a hypothetical Rust kernel: 64 bytes, like Asterinas' `MetaSlot`.
//! #[derive(Clone, Copy)]
//! #[repr(C, align(64))]
//! struct FrameMeta {
//!     paddr: u64,
//!     refcount: u32,
//!     kind: u32,
//!     next_free: u64,
//!     storage: [u64; 5],
//! }
//!
//! const FREE: FrameMeta = FrameMeta { paddr: 0, refcount: 0, kind: 7, next_free: u64::MAX, storage: [0; 5] };
//!
//! // The metadata array of a 64 MiB region at physical address 1 GiB.
//! let mut slots = vec![MaybeUninit::<FrameMeta>::uninit(); 16384];
//! let frames = template_fill_with(&mut slots, &FREE, FillMode::Auto { threshold_bytes: 1 << 20 }, |i, m| {
//!     m.paddr = (1 << 30) + (i as u64) * 4096;
//! });
//! assert_eq!(frames[3].paddr, (1 << 30) + 3 * 4096);
//! assert_eq!(frames[3].kind, 7);
//! ```

use core::mem::MaybeUninit;

/// How [`template_fill`] and [`template_fill_with`] store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FillMode {
    /// Normal stores.
    Cached,
    /// `stream-hal` streaming stores, drained before returning.
    Streaming,
    /// Streaming when the slots take at least `threshold_bytes`, normal stores below.
    Auto {
        /// Size from which to stream.
        threshold_bytes: usize,
    },
}

impl FillMode {
    fn streams<T>(self, len: usize) -> bool {
        match self {
            FillMode::Cached => false,
            FillMode::Streaming => true,
            FillMode::Auto { threshold_bytes } => len.saturating_mul(size_of::<T>()) >= threshold_bytes,
        }
    }
}

/// Copies `template` into every slot and returns the slots initialized.
pub fn template_fill<'a, T: Copy>(
    slots: &'a mut [MaybeUninit<T>],
    template: &T,
    mode: FillMode,
) -> &'a mut [T] {
    if mode.streams::<T>(slots.len()) {
        return stream_hal::fill(slots, template);
    }
    let t = *template;
    for s in slots.iter_mut() {
        s.write(t);
    }
    // SAFETY: every slot was written above.
    unsafe { assume_init_slice(slots) }
}

/// Copies `template` into every slot after `patch(index, &mut copy)` and returns the slots
/// initialized. The copy is a local value the optimizer keeps in registers, so patching it does
/// not reload a patched template from memory.
pub fn template_fill_with<'a, T: Copy>(
    slots: &'a mut [MaybeUninit<T>],
    template: &T,
    mode: FillMode,
    mut patch: impl FnMut(usize, &mut T),
) -> &'a mut [T] {
    let t = *template;
    let make = move |i: usize| {
        let mut r = t;
        patch(i, &mut r);
        r
    };
    if mode.streams::<T>(slots.len()) {
        return stream_hal::fill_with(slots, make);
    }
    let mut make = make;
    for (i, s) in slots.iter_mut().enumerate() {
        s.write(make(i));
    }
    // SAFETY: every slot was written above.
    unsafe { assume_init_slice(slots) }
}

/// # Safety
///
/// Every element of `slots` must be initialized.
unsafe fn assume_init_slice<T>(slots: &mut [MaybeUninit<T>]) -> &mut [T] {
    // SAFETY: `MaybeUninit<T>` has the layout of `T`, and the caller guarantees every element is
    // initialized.
    unsafe { &mut *(core::ptr::from_mut(slots) as *mut [T]) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec;

    #[test]
    fn every_mode_writes_the_same_records() {
        for mode in [FillMode::Cached, FillMode::Streaming, FillMode::Auto { threshold_bytes: 100 }] {
            let mut slots = vec![MaybeUninit::<[u32; 3]>::uninit(); 50];
            let out = template_fill_with(&mut slots, &[1, 2, 3], mode, |i, r| r[1] = i as u32);
            for (i, r) in out.iter().enumerate() {
                assert_eq!(*r, [1, i as u32, 3], "{mode:?}");
            }
            let mut slots = vec![MaybeUninit::<u16>::uninit(); 7];
            assert_eq!(template_fill(&mut slots, &9, mode), &[9; 7]);
        }
    }

    #[test]
    fn auto_switches_at_the_threshold() {
        assert!(!FillMode::Auto { threshold_bytes: 64 }.streams::<u64>(7));
        assert!(FillMode::Auto { threshold_bytes: 64 }.streams::<u64>(8));
    }
}
