//! Ownership of a node's struct pages as types: the one place where a thread's exclusive access
//! to struct pages is established, so that everything after it reads and writes safely.
//!
//! Each struct page is written by the one thread that owns it at that moment. Ownership is
//! handed over at a few points, each making a handle: [`Owned`], a PFN range (the node during
//! boot, a padata chunk, a won block, an allocation), and
//! [`LockedZone`](crate::node::buddy::LockedZone), the zone lock, whose holder owns the struct
//! pages of the zone's free blocks. The proof is made once, in the `unsafe` constructor; the
//! handles' methods are safe, check every PFN (a miss panics) and drain their streaming runs.

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
