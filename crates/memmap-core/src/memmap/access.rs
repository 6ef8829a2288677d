//! The safe door to one struct page of a [`Memmap`]: [`PageMut`], a handle on the page's bytes
//! for as long as the memmap is borrowed mutably, with the field reads and writes the kernel's
//! per-page code makes (plain and `WRITE_ONCE`/`atomic_set` stores of 8-, 4- and 1-byte
//! fields). Every field offset is checked against the struct page's size, so a handle cannot
//! reach outside its page; with the constant offsets of [`offsets`](crate::offsets)
//! the checks fold away.

use core::marker::PhantomData;
use core::mem::size_of;
use core::ptr::NonNull;

use crate::memmap::Memmap;
use crate::memmap::engine::{AtPageblock, Edges, ListSelf, Pages, Refresh, Store, copy_run};
use crate::model::page::StructPage;

/// Exclusive access to the bytes of one struct page of a [`Memmap`] ([`Memmap::page_mut`]).
///
/// Stores are made in place, one field at a time, as the kernel's per-page code makes them (so
/// a slow path keeps the kernel's store order); [`PageMut::read`] and [`PageMut::write`] move
/// the whole page by value.
///
/// # Panics
///
/// Every field access panics if the field is not inside the struct page or not aligned to its
/// size.
pub struct PageMut<'p, P: StructPage> {
    page: NonNull<P>,
    _borrow: PhantomData<&'p mut P>,
}

impl<P: StructPage> core::fmt::Debug for PageMut<'_, P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_tuple("PageMut").field(&self.read()).finish()
    }
}

impl<'p, P: StructPage> PageMut<'p, P> {
    /// The handle of the struct page at `page`.
    ///
    /// # Safety
    ///
    /// For `'p`, `page` is valid for reads and writes of one `P`, aligned, initialized, not
    /// accessed through any other path, and no streamed store to it is pending.
    pub(crate) const unsafe fn new(page: NonNull<P>) -> Self {
        PageMut { page, _borrow: PhantomData }
    }

    /// Pointer to the `T` field at byte `offset`, checked to lie inside the page and be aligned.
    #[inline(always)]
    #[track_caller]
    fn field<T>(&self, offset: usize) -> *mut T {
        let size = size_of::<T>();
        assert!(
            offset % size == 0 && offset.checked_add(size).is_some_and(|end| end <= P::SIZE),
            "field at byte {offset} ({size} bytes) is not inside a {}-byte struct page",
            P::SIZE
        );
        // SAFETY: `offset + size <= P::SIZE` (checked), so the field is inside the page the
        // handle owns (constructor); struct pages are 8-aligned, so `offset % size == 0` makes
        // the field aligned for `T` of 1, 4 or 8 bytes.
        unsafe { self.page.as_ptr().cast::<u8>().add(offset).cast::<T>() }
    }

    /// The 8-byte field at byte `offset`.
    #[inline(always)]
    #[track_caller]
    #[must_use]
    pub fn u64_at(&self, offset: usize) -> u64 {
        let p = self.field::<u64>(offset);
        // SAFETY: inside the owned, initialized page and aligned (`field`).
        unsafe { p.read() }
    }

    /// Sets the 8-byte field at byte `offset` (a plain store).
    #[inline(always)]
    #[track_caller]
    pub fn set_u64_at(&mut self, offset: usize, v: u64) {
        let p = self.field::<u64>(offset);
        // SAFETY: inside the owned, writable page and aligned (`field`).
        unsafe { p.write(v) }
    }

    /// `WRITE_ONCE` of the 8-byte field at byte `offset`: a volatile store, which the compiler
    /// neither merges with neighbouring stores nor drops.
    #[inline(always)]
    #[track_caller]
    pub fn set_u64_once_at(&mut self, offset: usize, v: u64) {
        let p = self.field::<u64>(offset);
        // SAFETY: as in `set_u64_at`.
        unsafe { p.write_volatile(v) }
    }

    /// The 4-byte field at byte `offset`.
    #[inline(always)]
    #[track_caller]
    #[must_use]
    pub fn u32_at(&self, offset: usize) -> u32 {
        let p = self.field::<u32>(offset);
        // SAFETY: as in `u64_at`.
        unsafe { p.read() }
    }

    /// Sets the 4-byte field at byte `offset` (a plain store).
    #[inline(always)]
    #[track_caller]
    pub fn set_u32_at(&mut self, offset: usize, v: u32) {
        let p = self.field::<u32>(offset);
        // SAFETY: as in `set_u64_at`.
        unsafe { p.write(v) }
    }

    /// `atomic_set`/`WRITE_ONCE` of the 4-byte field at byte `offset` (a volatile store).
    #[inline(always)]
    #[track_caller]
    pub(crate) fn set_u32_once_at(&mut self, offset: usize, v: u32) {
        let p = self.field::<u32>(offset);
        // SAFETY: as in `set_u64_at`.
        unsafe { p.write_volatile(v) }
    }

    /// Sets the byte at `offset`.
    #[inline(always)]
    #[track_caller]
    pub fn set_u8_at(&mut self, offset: usize, v: u8) {
        let p = self.field::<u8>(offset);
        // SAFETY: as in `set_u64_at`.
        unsafe { p.write(v) }
    }

    /// The whole struct page, by value.
    #[inline(always)]
    #[must_use]
    pub fn read(&self) -> P {
        // SAFETY: the handle owns the initialized, aligned page (constructor).
        unsafe { self.page.as_ptr().read() }
    }

    /// Overwrites the whole struct page.
    #[inline(always)]
    pub fn write(&mut self, page: &P) {
        // SAFETY: the handle owns the writable, aligned page (constructor).
        unsafe { self.page.as_ptr().write(*page) }
    }
}

impl<P: StructPage> Memmap<'_, P> {
    /// The struct page of `pfn` as a [`PageMut`], for field-by-field reads and writes while
    /// the memmap is borrowed.
    ///
    /// # Panics
    ///
    /// If `pfn` is outside the memmap.
    #[inline(always)]
    #[track_caller]
    pub fn page_mut(&mut self, pfn: u64) -> PageMut<'_, P> {
        let page = self.slot(pfn);
        // SAFETY: `slot` checked that `pfn` is in the memmap, whose storage is initialized,
        // aligned and writable where initializers write (constructor contract); `&mut self`
        // keeps every other access path of this memmap away for the handle's life, and no
        // memmap method returns with a streamed store pending.
        unsafe { PageMut::new(page) }
    }

    /// The host address of the struct page of `pfn` (not the modelled [`Memmap::vaddr`]), for
    /// callers that manage the storage's mapping themselves; dereferencing it is their business.
    ///
    /// # Panics
    ///
    /// If `pfn` is outside the memmap.
    #[must_use]
    #[track_caller]
    pub fn host_ptr(&self, pfn: u64) -> *const P {
        self.slot(pfn).as_ptr().cast_const()
    }
}

/// The one set of struct-page primitives of every owner of struct pages in this crate: the
/// memmap view, the node's range handles and its zone guard. An owner says which struct pages
/// it may touch ([`PageAccess::window`]) and where they are ([`PageAccess::pages`]); every read,
/// write and template run goes through the provided methods, which check the PFN (a run once,
/// not per page) and drain a streaming run before they return.
///
/// # Safety
///
/// An implementor guarantees, for as long as it lives: every PFN of `window()` is inside the
/// storage of `pages()`, which is initialized, aligned and valid for reads and writes there;
/// no other thread reads or writes those struct pages; and no streamed store to them is
/// pending when a method of this trait runs (every streaming run of this trait drains first).
pub(crate) unsafe trait PageAccess<P: StructPage> {
    /// The storage and the modelled addresses.
    fn pages(&self) -> Pages<P>;
    /// The PFNs this owner may touch, `[start, end)`.
    fn window(&self) -> (u64, u64);

    /// Whether `pfn` is in the window.
    #[inline(always)]
    fn owns(&self, pfn: u64) -> bool {
        let (start, end) = self.window();
        start <= pfn && pfn < end
    }

    /// The slot of `pfn`, checked against the window.
    #[inline(always)]
    #[track_caller]
    fn slot(&self, pfn: u64) -> NonNull<P> {
        let (start, end) = self.window();
        assert!(start <= pfn && pfn < end, "struct page {pfn:#x} is not owned here ({start:#x}..{end:#x})");
        // SAFETY: `pfn` is in the window, inside the storage (the trait's contract).
        unsafe { NonNull::new_unchecked(self.pages().ptr(pfn)) }
    }

    /// The struct page of `pfn`, by value.
    #[inline(always)]
    #[track_caller]
    fn read(&self, pfn: u64) -> P {
        let page = self.slot(pfn);
        // SAFETY: owned, initialized and aligned, no streamed store pending (the contract).
        unsafe { page.as_ptr().read() }
    }

    /// The struct page of `pfn` as a [`PageMut`].
    #[inline(always)]
    #[track_caller]
    fn page_mut(&mut self, pfn: u64) -> PageMut<'_, P> {
        let page = self.slot(pfn);
        // SAFETY: as in `read`, and `&mut self` keeps the owner's other paths away.
        unsafe { PageMut::new(page) }
    }

    /// The 8-byte word at `offset` of the struct page of `pfn`.
    #[inline(always)]
    #[track_caller]
    fn word(&self, pfn: u64, offset: usize) -> u64 {
        let page = self.slot(pfn);
        // SAFETY: as in `read`; the handle's checks keep the field inside the page.
        unsafe { PageMut::new(page) }.u64_at(offset)
    }

    /// Sets the 8-byte word at `offset` of the struct page of `pfn`.
    #[inline(always)]
    #[track_caller]
    fn set_word(&mut self, pfn: u64, offset: usize, v: u64) {
        self.page_mut(pfn).set_u64_at(offset, v);
    }

    /// The modelled kernel address of the struct page of `pfn`.
    #[inline(always)]
    fn vaddr(&self, pfn: u64) -> u64 {
        self.pages().vaddr(pfn)
    }

    /// The PFN of the struct page whose `lru` list node is at the modelled address
    /// `list_vaddr`, if it is one of the window's.
    #[inline(always)]
    fn pfn_of_list(&self, list_vaddr: u64) -> Option<u64> {
        let pfn = self.pages().pfn_of_list(list_vaddr)?;
        self.owns(pfn).then_some(pfn)
    }

    /// The template loop ([`copy_run`]) on `[from, to)` with `S`'s stores and `edges`, checked
    /// once against the window; a streaming run drains before it returns (or unwinds).
    ///
    /// # Panics
    ///
    /// If `[from, to)` is not inside the window.
    #[inline(always)]
    #[track_caller]
    fn copy_run<S: Store, E: Edges<P>>(
        &mut self,
        refresh: &Refresh<'_>,
        (from, to): (u64, u64),
        tmpl: &mut P,
        edges: &mut E,
    ) -> bool {
        if from >= to {
            return false;
        }
        let (start, end) = self.window();
        assert!(start <= from && to <= end, "{from:#x}..{to:#x} is not inside the handle");
        let session = Streaming::new(S::STREAMING);
        // SAFETY: `[from, to)` is inside the window (checked), owned and inside the storage
        // (the trait's contract; `&mut self` for the call); the session drains a streaming run
        // before this returns or unwinds; the `Edge::Normal` pages are stored normally.
        unsafe { copy_run::<P, S, E>(self.pages(), refresh, (from, to), tmpl, edges) };
        session.finish()
    }
}

/// A session of template runs that may stream: it drains on [`Streaming::drain`],
/// [`Streaming::finish`] and on drop (also when a hook panics mid-run) if something was
/// streamed since the last drain.
#[must_use = "a streaming session drains when it is finished or dropped"]
pub(crate) struct Streaming {
    /// Something was (or, from [`Streaming::new`], may have been) streamed since the last drain.
    pending: bool,
}

impl Streaming {
    /// A session whose runs stream (`streaming`: drain at the end) or not.
    #[inline(always)]
    pub(crate) const fn new(streaming: bool) -> Self {
        Streaming { pending: streaming }
    }

    /// Drains now if something was streamed since the last drain; returns whether it drained.
    #[inline(always)]
    pub(crate) fn drain(&mut self) -> bool {
        let drained = self.pending;
        if drained {
            stream_hal::drain();
            self.pending = false;
        }
        drained
    }

    /// Ends the session with [`Streaming::drain`]; returns whether it drained.
    #[inline(always)]
    pub(crate) fn finish(mut self) -> bool {
        self.drain()
    }
}

impl Drop for Streaming {
    fn drop(&mut self) {
        if self.pending {
            stream_hal::drain();
        }
    }
}

// SAFETY: the window is the whole memmap, inside its storage, which `&mut Memmap` (every
// method that writes takes it) or `&Memmap` (reads) borrows; a memmap is not shared between
// threads while borrowed mutably, and no memmap method returns with a streamed store pending.
unsafe impl<P: StructPage> PageAccess<P> for Memmap<'_, P> {
    #[inline(always)]
    fn pages(&self) -> Pages<P> {
        self.raw_pages()
    }
    #[inline(always)]
    fn window(&self) -> (u64, u64) {
        (self.base_pfn(), self.end_pfn())
    }
}

/// The pageblock work at a pageblock-aligned PFN of [`Memmap::copy_run_pageblocks`]: it
/// reaches that one (normally stored) page only, so the run's streamed pages stay untouched.
pub(crate) struct PageblockWork<'w, 'a, P: StructPage> {
    m: &'w mut Memmap<'a, P>,
    pfn: u64,
}

/// The pageblock callback of [`Memmap::copy_run_pageblocks`].
pub(crate) type AtPageblockFn<'f, P> = dyn FnMut(&mut PageblockWork<'_, '_, P>) + 'f;

impl<P: StructPage> PageblockWork<'_, '_, P> {
    /// The pageblock-aligned PFN.
    #[inline(always)]
    pub(crate) fn pfn(&self) -> u64 {
        self.pfn
    }

    /// `set_pageblock_migratetype(page, mt)`.
    #[inline(always)]
    pub(crate) fn set_migratetype(&mut self, mt: crate::MigrateType) {
        self.m.set_pageblock_migratetype(self.pfn, mt);
    }

    /// `set_pageblock_migratetype(page, MIGRATE_MOVABLE)` and `cond_resched()`.
    #[inline(always)]
    pub(crate) fn pageblock_init<H: crate::InitHooks>(&mut self, hooks: &mut H) {
        self.m.pageblock_init(self.pfn, hooks);
    }
}

impl<P: StructPage> Memmap<'_, P> {
    /// The template loop on `[from, to)` of this memmap with `S`'s stores: pageblock-aligned
    /// pages are stored normally and handed to `at` for their pageblock work; with `at` `None`
    /// every page is a plain refreshed copy. Checked once against the memmap; returns whether
    /// it drained. Streamed stores are *not* drained here: `session` (the caller's, spanning
    /// several runs) orders them before anything reads the pages.
    ///
    /// # Panics
    ///
    /// If `[from, to)` is not inside the memmap.
    #[inline(always)]
    #[track_caller]
    pub(crate) fn copy_run_pageblocks<S: Store>(
        &mut self,
        session: &mut Streaming,
        refresh: &Refresh<'_>,
        (from, to): (u64, u64),
        tmpl: &mut P,
        at: Option<&mut AtPageblockFn<'_, P>>,
    ) {
        if from >= to {
            return;
        }
        assert!(self.contains_range(from, to - from), "{from:#x}..{to:#x} is not inside the memmap");
        session.pending |= S::STREAMING;
        let pages = self.raw_pages();
        match at {
            // SAFETY: `[from, to)` is inside the memmap (checked), which `&mut self` borrows
            // exclusively; the session drains the streamed stores before anything reads them.
            None => unsafe {
                copy_run::<P, S, _>(pages, refresh, (from, to), tmpl, &mut crate::memmap::engine::Plain)
            },
            Some(at) => {
                let mut edge = |pfn: u64| at(&mut PageblockWork { m: self, pfn });
                // SAFETY: as above; the pages handed to `at` are stored normally, and the
                // `PageblockWork` reaches those only (the memmap's storage is reached through
                // raw pointers, which the callback's reborrow of `self` leaves valid).
                unsafe { copy_run::<P, S, _>(pages, refresh, (from, to), tmpl, &mut AtPageblock(&mut edge)) };
            }
        }
    }

    /// The template form of `memmap_init_range()`'s `MEMINIT_HOTPLUG` loop after its first
    /// page: the (initialized) struct page of `start` copied into the rest of `[start, end)`,
    /// pageblock-aligned pages then getting `mt` and `cond_resched()`. Drains before it returns
    /// (or unwinds); returns the number of drains.
    ///
    /// # Panics
    ///
    /// If `[start, end)` is not inside the memmap.
    #[track_caller]
    pub(crate) fn copy_hotplug_run<S: Store, H: crate::InitHooks>(
        &mut self,
        (start, end): (u64, u64),
        mt: crate::MigrateType,
        hooks: &mut H,
    ) -> u64 {
        let mut tmpl = self.read(start);
        let (cfg, layout) = (*self.config(), *self.layout());
        let refresh = Refresh::new(&cfg, &layout, ListSelf::Both);
        let mut session = Streaming::new(S::STREAMING);
        let mut at_pageblock = |w: &mut PageblockWork<'_, '_, P>| {
            w.set_migratetype(mt);
            hooks.cond_resched(w.pfn());
        };
        self.copy_run_pageblocks::<S>(
            &mut session,
            &refresh,
            (start + 1, end),
            &mut tmpl,
            Some(&mut at_pageblock),
        );
        u64::from(session.finish())
    }

    /// Stores `rec` at `pfn` with `S`'s store, one record of a template run of the caller's
    /// `session` (which drains streamed stores before anything reads them).
    ///
    /// # Panics
    ///
    /// If `pfn` is outside the memmap.
    ///
    /// # Safety
    ///
    /// With `S::STREAMING`, nothing reads or writes the struct page of `pfn` through this
    /// memmap (or any other path) before `session` drains.
    #[inline(always)]
    #[track_caller]
    pub(crate) unsafe fn store_in<S: Store>(&mut self, session: &mut Streaming, pfn: u64, rec: P) {
        let page = self.slot(pfn);
        session.pending |= S::STREAMING;
        // SAFETY: `page` is a writable, aligned struct page of the memmap (`slot`, constructor
        // contract); the caller keeps it untouched until the session drains.
        unsafe { S::store(page.as_ptr(), rec) };
    }
}

#[cfg(test)]
mod tests {
    use crate::model::page::{Page64, Page72, offsets};
    use crate::{KernelConfig, Memmap, StructPage};
    use std::vec;

    #[test]
    fn a_page_handle_writes_its_fields_and_no_others() {
        let mut pages = vec![Page72::ZEROED; 3];
        let mut pb = vec![0; 1];
        let mut m = Memmap::new(KernelConfig::X86_64, 10, &mut pages, &mut pb).unwrap();
        let mut p = m.page_mut(11);
        p.set_u64_at(offsets::LRU_NEXT, 0x1122);
        p.set_u64_once_at(offsets::PRIVATE, 7);
        p.set_u32_at(offsets::REFCOUNT, 3);
        p.set_u32_once_at(offsets::MAPCOUNT, u32::MAX);
        p.set_u8_at(64 + 7, 0xab);
        assert_eq!((p.u64_at(offsets::LRU_NEXT), p.u32_at(offsets::REFCOUNT)), (0x1122, 3));
        let page = p.read();
        assert_eq!((page.u64_at(crate::offsets::PRIVATE), page.refcount(), page.mapcount()), (7, 3, -1));
        assert_eq!(page.u64_at(64).to_ne_bytes()[7], 0xab);
        assert_eq!(m.read(10), Page72::ZEROED);
        assert_eq!(m.read(12), Page72::ZEROED);
        let mut q = m.page_mut(12);
        q.write(&page);
        assert_eq!(m.read(12), page);
        assert_eq!(m.host_ptr(11).wrapping_add(1), m.host_ptr(12));
    }

    #[test]
    fn a_field_outside_the_page_or_misaligned_is_refused() {
        let mut pages = vec![Page64::ZEROED; 1];
        let mut pb = vec![0; 1];
        let mut m = Memmap::new(KernelConfig::X86_64, 0, &mut pages, &mut pb).unwrap();
        for (offset, wide) in [(64, true), (60, true), (4, true), (64, false), (2, false)] {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let mut p = m.page_mut(0);
                if wide { p.set_u64_at(offset, 1) } else { p.set_u32_at(offset, 1) }
            }));
            assert!(r.is_err(), "offset {offset}");
        }
        assert_eq!(m.read(0), Page64::ZEROED);
        assert!(std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| m.host_ptr(1))).is_err());
    }
}
