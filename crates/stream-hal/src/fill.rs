//! Template fills: one record copied into every slot with the per-index fields patched, handed
//! back as `&mut [T]` only after the streaming stores are drained.
//!
//! ```
//! use core::mem::MaybeUninit;
//! use stream_hal::{FillMode, Record, template_fill_with};
//!
//! /// Per-frame metadata of a hypothetical Rust kernel: 64 bytes, no padding.
//! #[derive(Clone, Copy)]
//! #[repr(C, align(64))]
//! struct FrameMeta {
//!     paddr: u64,
//!     refcount: u32,
//!     kind: u32,
//!     next_free: u64,
//!     storage: [u64; 5],
//! }
//! // SAFETY: repr(C), all fields are records, 8 + 4 + 4 + 8 + 40 = 64 bytes: no padding.
//! unsafe impl Record for FrameMeta {}
//!
//! const FREE: FrameMeta = FrameMeta { paddr: 0, refcount: 0, kind: 7, next_free: u64::MAX, storage: [0; 5] };
//!
//! // The metadata array of a 64 MiB region at physical address 1 GiB.
//! let mut slots = vec![MaybeUninit::<FrameMeta>::uninit(); 16384];
//! let frames = template_fill_with(&mut slots, &FREE, FillMode::AUTO, |i, m| {
//!     m.paddr = (1 << 30) + (i as u64) * 4096;
//! });
//! assert_eq!(frames[3].paddr, (1 << 30) + 3 * 4096);
//! assert_eq!(frames[3].kind, 7);
//! ```
//!
//! Types that are not `Copy` (atomics, `UnsafeCell`) are filled with [`fill_records`], which
//! builds each record by value; see [`Record`] for an example.

use core::mem::MaybeUninit;

use crate::{Record, Reuse};

/// How a fill stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FillMode {
    /// Normal stores.
    Cached,
    /// Streaming stores, drained before returning.
    Streaming,
    /// Streaming when the slots take at least `threshold_bytes`, normal stores below: an
    /// explicit threshold, for a caller who measured its own.
    Auto {
        /// Size from which to stream.
        threshold_bytes: usize,
    },
    /// Streaming when the slots take at least [`auto_threshold(reuse)`](crate::auto_threshold):
    /// the threshold of this machine's caches ([`cache_info`](crate::cache_info)) for a
    /// destination reused as the hint says ([`streaming_threshold`](crate::streaming_threshold)
    /// gives the rule).
    Reuse(Reuse),
}

impl FillMode {
    /// [`FillMode::Reuse`] with [`Reuse::WriteOnce`], the default: records written once and
    /// read much later stream from [`WRITE_ONCE_FLOOR`](crate::WRITE_ONCE_FLOOR) (4 KiB) up.
    /// A caller that reads them right after the fill passes
    /// [`FillMode::READ_SOON`]; one with a measured threshold of its own,
    /// [`FillMode::Auto`].
    pub const AUTO: FillMode = FillMode::Reuse(Reuse::WriteOnce);

    /// [`FillMode::Reuse`] with [`Reuse::ReadSoon`]: stream only what one CPU's share of the
    /// last-level cache could not hold.
    pub const READ_SOON: FillMode = FillMode::Reuse(Reuse::ReadSoon);

    /// The size from which a fill in this mode streams: 0 for [`FillMode::Streaming`],
    /// `usize::MAX` for [`FillMode::Cached`] (which never streams, even then).
    #[must_use]
    pub fn threshold(self) -> usize {
        match self {
            FillMode::Cached => usize::MAX,
            FillMode::Streaming => 0,
            FillMode::Auto { threshold_bytes } => threshold_bytes,
            FillMode::Reuse(reuse) => crate::auto_threshold(reuse),
        }
    }

    /// Whether a fill of `bytes` bytes streams in this mode.
    #[must_use]
    pub fn streams(self, bytes: usize) -> bool {
        match self {
            FillMode::Cached => false,
            mode => bytes >= mode.threshold(),
        }
    }
}

/// Fills slot `i` with `f(i)`, in order, and returns the slots initialized (drained when
/// streamed). Works for any [`Record`], `Copy` or not.
pub fn fill_records<T: Record>(
    slots: &mut [MaybeUninit<T>],
    mode: FillMode,
    mut f: impl FnMut(usize) -> T,
) -> &mut [T] {
    if mode.streams(size_of_val(slots)) {
        return crate::fill_with(slots, f);
    }
    for (i, s) in slots.iter_mut().enumerate() {
        s.write(f(i));
    }
    // SAFETY: every slot was written above.
    unsafe { assume_init_slice(slots) }
}

/// Copies `template` into every slot and returns the slots initialized.
pub fn template_fill<'a, T: Record + Copy>(
    slots: &'a mut [MaybeUninit<T>],
    template: &T,
    mode: FillMode,
) -> &'a mut [T] {
    if mode.streams(size_of_val(slots)) {
        return crate::fill(slots, template);
    }
    let t = *template;
    for s in slots.iter_mut() {
        s.write(t);
    }
    // SAFETY: every slot was written above.
    unsafe { assume_init_slice(slots) }
}

/// Copies `template` into every slot after `patch(index, &mut copy)` and returns the slots
/// initialized. The copy is a local value kept in registers (no store-forwarding stall).
pub fn template_fill_with<'a, T: Record + Copy>(
    slots: &'a mut [MaybeUninit<T>],
    template: &T,
    mode: FillMode,
    mut patch: impl FnMut(usize, &mut T),
) -> &'a mut [T] {
    let t = *template;
    fill_records(slots, mode, move |i| {
        let mut r = t;
        patch(i, &mut r);
        r
    })
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
        for mode in
            [FillMode::Cached, FillMode::Streaming, FillMode::Auto { threshold_bytes: 100 }, FillMode::AUTO]
        {
            let mut slots = vec![MaybeUninit::<[u32; 3]>::uninit(); 50];
            let out = template_fill_with(&mut slots, &[1, 2, 3], mode, |i, r| r[1] = i as u32);
            for (i, r) in out.iter().enumerate() {
                assert_eq!(*r, [1, i as u32, 3], "{mode:?}");
            }
            let mut slots = vec![MaybeUninit::<u16>::uninit(); 7];
            assert_eq!(template_fill(&mut slots, &9, mode), &[9; 7]);
            let mut slots: vec::Vec<MaybeUninit<core::sync::atomic::AtomicU64>> =
                (0..9).map(|_| MaybeUninit::uninit()).collect();
            let out = fill_records(&mut slots, mode, |i| core::sync::atomic::AtomicU64::new(i as u64 * 3));
            assert!(
                out.iter()
                    .enumerate()
                    .all(|(i, a)| a.load(core::sync::atomic::Ordering::Relaxed) == i as u64 * 3)
            );
        }
    }

    #[test]
    fn auto_switches_at_the_threshold() {
        assert!(!FillMode::Auto { threshold_bytes: 64 }.streams(63));
        assert!(FillMode::Auto { threshold_bytes: 64 }.streams(64));
        assert!(!FillMode::Cached.streams(usize::MAX) && FillMode::Streaming.streams(0));
    }

    #[test]
    fn the_reuse_modes_take_the_rule_of_this_machine() {
        let cache = crate::cache_info();
        for reuse in [Reuse::WriteOnce, Reuse::ReadSoon] {
            let t = crate::streaming_threshold(reuse, &cache);
            let mode = FillMode::Reuse(reuse);
            assert_eq!(mode.threshold(), t, "{reuse} on {cache}");
            assert!(!mode.streams(t - 1) && mode.streams(t), "{reuse} on {cache}");
        }
        assert_eq!(FillMode::AUTO, FillMode::Reuse(Reuse::WriteOnce));
    }

    #[test]
    fn the_default_streams_write_once_records_from_one_page() {
        // Whatever the cache: 64 KiB of records was below the old fixed 1 MiB.
        assert!(FillMode::AUTO.streams(4096) && FillMode::AUTO.streams(64 << 10));
        assert!(!FillMode::AUTO.streams(4095));
    }
}
