//! Ownership of a node's struct pages as types: the one place where a thread's exclusive access
//! to struct pages is established, so that everything after it reads and writes safely.
//!
//! A node is shared between threads (the booting thread, padata workers, allocating threads),
//! and each struct page is written by the one thread that owns it at that moment. Ownership is
//! handed over at a few points only, and each makes a handle:
//!
//! * [`Owned`], a PFN range: the whole node while [`Node::boot`](super::Node::boot) runs (the
//!   node is not shared yet), a deferred-init padata chunk, the deferred range taken under the
//!   resize lock, a block whose [`BlockStates::run_once`](crate::sync::BlockStates::run_once) this
//!   thread won, and an allocation (taken off the free lists under the zone lock, then held
//!   through its [`PageBlock`](crate::PageBlock)).
//! * [`LockedZone`], the zone lock: its holder owns the struct pages of the zone's free blocks
//!   (the list heads and their links, the buddies it merges), and nothing else.
//!
//! The handles' methods are safe: the proof is made once, in the `unsafe` constructor at the
//! hand-over point. A range handle checks every PFN against its range (a miss is a bug and
//! panics rather than touching a page another thread owns), and its streaming runs drain
//! before they return (also when a hook panics), so no handle leaves a streamed page unfenced
//! and several handles may be used on one thread (a boot that expands an on-demand block
//! through the block's own handle).

use core::marker::PhantomData;

use crate::fill::{DrainGuard, Pages, Refresh, Store};
use crate::memmap::ops::{rd64, wr32, wr32_once, wr64, wr64_once};
use crate::model::page::StructPage;
use crate::node::buddy::FreeArea;
use crate::sync::SpinGuard;

/// Exclusive access to the struct pages `[start, end)` of a node for `'o` (see the
/// [module documentation](self)).
pub(in crate::node) struct Owned<'o, P: StructPage> {
    pages: Pages<P>,
    start: u64,
    end: u64,
    _owner: PhantomData<&'o mut P>,
}

impl<'o, P: StructPage> Owned<'o, P> {
    /// The handle of `[start, end)`.
    ///
    /// # Safety
    ///
    /// * `[start, end)` is inside `pages`' storage, which outlives `'o`;
    /// * for `'o`, no other thread reads or writes those struct pages.
    pub(crate) unsafe fn new(pages: Pages<P>, start: u64, end: u64) -> Self {
        Owned { pages, start, end: end.max(start), _owner: PhantomData }
    }

    /// Whether `pfn` is in the handle's range.
    #[inline(always)]
    pub(crate) fn contains(&self, pfn: u64) -> bool {
        self.start <= pfn && pfn < self.end
    }

    #[inline(always)]
    #[track_caller]
    fn ptr(&self, pfn: u64) -> *mut P {
        assert!(
            self.contains(pfn),
            "struct page {pfn:#x} is not owned here ({:#x}..{:#x})",
            self.start,
            self.end
        );
        // SAFETY: `pfn` is in `[start, end)`, inside the storage (the constructor's contract).
        unsafe { self.pages.ptr(pfn) }
    }

    /// The struct page of `pfn`, by value.
    #[inline(always)]
    #[track_caller]
    pub(crate) fn read(&self, pfn: u64) -> P {
        let p = self.ptr(pfn);
        // SAFETY: owned (constructor), aligned (storage of `P`); no streamed store is pending
        // (every streaming run of a handle drains before it returns).
        unsafe { p.read() }
    }

    /// The 8-byte word at `offset` of the struct page of `pfn`.
    #[inline(always)]
    #[track_caller]
    pub(crate) fn word(&self, pfn: u64, offset: usize) -> u64 {
        let p = self.ptr(pfn);
        // SAFETY: as in `read`; the field is inside the page.
        unsafe { rd64(p, offset) }
    }

    /// Sets the 8-byte word at `offset` of the struct page of `pfn`.
    #[inline(always)]
    #[track_caller]
    pub(crate) fn set_word(&mut self, pfn: u64, offset: usize, v: u64) {
        let p = self.ptr(pfn);
        // SAFETY: owned (constructor); the field is inside the page; no streamed store is
        // pending.
        unsafe { wr64(p, offset, v) }
    }

    /// Sets the 4-byte word at `offset` of the struct page of `pfn` (`WRITE_ONCE` when
    /// `once`).
    #[inline(always)]
    #[track_caller]
    pub(crate) fn set_word32(&mut self, pfn: u64, offset: usize, v: u32, once: bool) {
        let p = self.ptr(pfn);
        // SAFETY: as in `set_word`.
        unsafe {
            if once {
                wr32_once(p, offset, v);
            } else {
                wr32(p, offset, v);
            }
        }
    }

    /// The template loop of the fill engine ([`crate::fill`]) on `[from, to)`, with `S`'s
    /// stores: see its documentation. A streaming run drains before it returns (or unwinds).
    #[inline(always)]
    #[track_caller]
    pub(crate) fn copy_run<S: Store>(
        &mut self,
        refresh: &Refresh<'_>,
        (from, to): (u64, u64),
        tmpl: &mut P,
        pageblock: Option<&mut dyn FnMut(u64)>,
    ) {
        if from >= to {
            return;
        }
        assert!(self.start <= from && to <= self.end, "{from:#x}..{to:#x} is not inside the handle");
        let guard = DrainGuard::new(S::STREAMING);
        // SAFETY: `[from, to)` is inside the handle's range, owned (constructor); the guard
        // drains a streaming run before this returns or unwinds. The pages handed to
        // `pageblock` are stored normally.
        unsafe { crate::fill::copy_run::<P, S>(self.pages, refresh, from, to, tmpl, pageblock) };
        guard.finish();
    }

    /// The final-state template loop ([`crate::fill::copy_run_heads`]) on `[from, to)`, every
    /// `block`-aligned page finished by `head` before `S` stores it. A streaming run drains
    /// before it returns (or unwinds).
    #[inline(always)]
    #[track_caller]
    pub(crate) fn copy_run_heads<S: Store>(
        &mut self,
        refresh: &Refresh<'_>,
        (from, to, block): (u64, u64, u64),
        tmpl: &mut P,
        head: impl FnMut(u64, &mut P),
    ) {
        if from >= to {
            return;
        }
        assert!(self.start <= from && to <= self.end, "{from:#x}..{to:#x} is not inside the handle");
        let guard = DrainGuard::new(S::STREAMING);
        // SAFETY: as in `copy_run`.
        unsafe { crate::fill::copy_run_heads::<P, S>(self.pages, refresh, (from, to, block), tmpl, head) };
        guard.finish();
    }

    /// The strided template loop ([`crate::fill::copy_strided`]) on every `stride`-th PFN of
    /// `[from, to)`, each record finished by `patch` before `S` stores it.
    #[inline(always)]
    #[track_caller]
    pub(crate) fn copy_strided<S: Store>(
        &mut self,
        refresh: &Refresh<'_>,
        (from, to, stride): (u64, u64, u64),
        tmpl: &mut P,
        patch: impl FnMut(u64, &mut P),
    ) {
        if from >= to {
            return;
        }
        assert!(self.start <= from && to <= self.end, "{from:#x}..{to:#x} is not inside the handle");
        let guard = DrainGuard::new(S::STREAMING);
        // SAFETY: as in `copy_run`.
        unsafe { crate::fill::copy_strided::<P, S>(self.pages, refresh, (from, to, stride), tmpl, patch) };
        guard.finish();
    }
}

/// A zone's free lists under the zone lock, with the struct pages the lock holder owns: those
/// of the zone's free blocks (see the [module documentation](self)).
pub(in crate::node) struct LockedZone<'z, P: StructPage> {
    /// The free lists and counters.
    pub(in crate::node) area: SpinGuard<'z, FreeArea>,
    pages: Pages<P>,
    span: (u64, u64),
}

impl<'z, P: StructPage> LockedZone<'z, P> {
    /// The zone of `area` with access to the struct pages of its free blocks.
    ///
    /// # Safety
    ///
    /// `area` is the lock guard of the zone spanning `[span.0, span.1)`, inside `pages`'
    /// storage; every thread follows the buddy allocator's rule: a struct page that heads a
    /// free block (or is a buddy being merged) is read or written only under its zone's lock,
    /// and the methods of this type are used on such pages only (and on the block being freed
    /// into the zone, which the caller also owns).
    pub(in crate::node) unsafe fn new(
        area: SpinGuard<'z, FreeArea>,
        pages: Pages<P>,
        span: (u64, u64),
    ) -> Self {
        LockedZone { area, pages, span }
    }

    #[inline(always)]
    #[track_caller]
    fn ptr(&self, pfn: u64) -> *mut P {
        assert!(self.span.0 <= pfn && pfn < self.span.1, "struct page {pfn:#x} is outside the zone");
        // SAFETY: inside the zone's span, inside the storage (constructor).
        unsafe { self.pages.ptr(pfn) }
    }

    /// The struct page of the free page `pfn`.
    #[inline(always)]
    #[track_caller]
    pub(crate) fn read(&self, pfn: u64) -> P {
        let p = self.ptr(pfn);
        // SAFETY: a free block's page: owned by the lock holder (constructor).
        unsafe { p.read() }
    }

    /// The 8-byte word at `offset` of the free page `pfn`.
    #[inline(always)]
    #[track_caller]
    pub(crate) fn word(&self, pfn: u64, offset: usize) -> u64 {
        let p = self.ptr(pfn);
        // SAFETY: as in `read`; the field is inside the page.
        unsafe { rd64(p, offset) }
    }

    /// Sets the 8-byte word at `offset` of the free page `pfn` (`WRITE_ONCE` when `once`).
    #[inline(always)]
    #[track_caller]
    pub(crate) fn set_word(&mut self, pfn: u64, offset: usize, v: u64, once: bool) {
        let p = self.ptr(pfn);
        // SAFETY: as in `read`.
        unsafe {
            if once {
                wr64_once(p, offset, v);
            } else {
                wr64(p, offset, v);
            }
        }
    }

    /// Sets the 4-byte word at `offset` of the free page `pfn`.
    #[inline(always)]
    #[track_caller]
    pub(crate) fn set_word32(&mut self, pfn: u64, offset: usize, v: u32) {
        let p = self.ptr(pfn);
        // SAFETY: as in `read`.
        unsafe { wr32(p, offset, v) }
    }

    /// The PFN of the struct page whose `lru` node is at `list_vaddr`.
    #[inline(always)]
    pub(crate) fn pfn_of_list(&self, list_vaddr: u64) -> u64 {
        self.pages.pfn_of_list(list_vaddr)
    }

    /// The modelled kernel address of the struct page of `pfn`.
    #[inline(always)]
    pub(crate) fn vaddr(&self, pfn: u64) -> u64 {
        self.pages.vaddr(pfn)
    }
}
