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
//! * [`LockedZone`](crate::node::buddy::LockedZone), the zone lock (beside the free lists it
//!   guards): its holder owns the struct pages of the zone's free blocks (the list heads and
//!   their links, the buddies it merges), and nothing else.
//!
//! The handles' methods are safe: the proof is made once, in the `unsafe` constructor at the
//! hand-over point. A range handle checks every PFN against its range (a miss is a bug and
//! panics rather than touching a page another thread owns), and its streaming runs drain
//! before they return (also when a hook panics), so no handle leaves a streamed page unfenced
//! and several handles may be used on one thread (a boot that expands an on-demand block
//! through the block's own handle).

use core::marker::PhantomData;

use crate::memmap::PageAccess;
use crate::memmap::engine::Pages;
use crate::model::page::StructPage;

/// Exclusive access to the struct pages `[start, end)` of a node for `'o` (see the
/// [module documentation](self)).
pub(in crate::node) struct Owned<'o, P: StructPage> {
    pages: Pages<P>,
    start: u64,
    end: u64,
    _owner: PhantomData<&'o mut P>,
}

impl<P: StructPage> Owned<'_, P> {
    /// The handle of `[start, end)`.
    ///
    /// # Safety
    ///
    /// * `[start, end)` is inside `pages`' storage, which outlives `'o`;
    /// * for `'o`, no other thread reads or writes those struct pages.
    pub(crate) unsafe fn new(pages: Pages<P>, start: u64, end: u64) -> Self {
        Owned { pages, start, end: end.max(start), _owner: PhantomData }
    }
}

// SAFETY: the window is the handle's range, inside the storage and owned by this thread for
// the handle's life (the constructor's contract); every streaming run of `PageAccess` drains
// before it returns, so no streamed store is pending when another method runs.
unsafe impl<P: StructPage> PageAccess<P> for Owned<'_, P> {
    #[inline(always)]
    fn pages(&self) -> Pages<P> {
        self.pages
    }
    #[inline(always)]
    fn window(&self) -> (u64, u64) {
        (self.start, self.end)
    }
}
