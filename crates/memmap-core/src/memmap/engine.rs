//! The copy engine of the access path: runs of struct pages copied from a template for every
//! initializer; [`crate::fill`] decides which strategy runs.
//!
//! The template loop (`copy_run`, reached through [`Memmap::fill_run`](crate::Memmap::fill_run))
//! refreshes what depends on the PFN (section bits, `virtual`, the `lru` self-pointers); pages
//! that may be read back mid-run are stored normally. Streaming runs drain through `Streaming`.

use core::ptr::NonNull;

use crate::fill::Strategy;
use crate::model::config::{FlagsLayout, KernelConfig};
use crate::model::page::{StructPage, offsets};

/// Which `lru` words of a template copy hold the page's own list address (`INIT_LIST_HEAD`'s
/// self-pointers, `&page->lru`), and so are refreshed for every PFN.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ListSelf {
    /// Neither (ZONE_DEVICE pages: `lru.next` is the pgmap or the compound head, `lru.prev`
    /// `zone_device_data`).
    Neither,
    /// `lru.prev` only (compound tails: `lru.next` became the compound head word).
    Prev,
    /// Both (a page fresh from `__init_single_page`).
    Both,
}

/// How template copies are stored: normal stores, or `stream-hal` streaming stores that the
/// run's owner drains before anything reads the pages.
pub(crate) trait Store {
    /// Whether the stores are streaming (need a drain).
    const STREAMING: bool;
    /// Stores `rec` at `dst`.
    ///
    /// # Safety
    ///
    /// `dst` valid for writes of one `P` and aligned for it; with [`Store::STREAMING`], nothing
    /// may access `*dst` before `stream_hal::drain()` runs on this thread.
    unsafe fn store<P: StructPage>(dst: *mut P, rec: P);
}

/// Normal (cached) stores.
pub(crate) struct Cached;

impl Store for Cached {
    const STREAMING: bool = false;
    #[inline(always)]
    unsafe fn store<P: StructPage>(dst: *mut P, rec: P) {
        // SAFETY: the caller guarantees `dst` is writable and aligned.
        unsafe { dst.write(rec) }
    }
}

/// `stream-hal` streaming stores of the record's words, by value.
pub(crate) struct Streamed;

impl Store for Streamed {
    const STREAMING: bool = true;
    #[inline(always)]
    unsafe fn store<P: StructPage>(dst: *mut P, rec: P) {
        // SAFETY: the caller guarantees `dst` is writable and aligned (struct pages are 8-byte
        // aligned, which `store_words` needs), and that nothing touches it before the drain.
        unsafe { rec.store_streaming(dst) }
    }
}

/// The stores a template run is made with: the kind of store, as a value, before
/// [`with_store!`] turns it into the type `Cached` or `Streamed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stores {
    /// Normal stores ([`Cached`]).
    Cached,
    /// `stream-hal` streaming stores ([`Streamed`]).
    Streamed,
}

impl Stores {
    /// The stores of a run with the resolved strategy `used`: streaming for
    /// [`Strategy::Streaming`], normal for any other.
    #[must_use]
    pub(crate) const fn of(used: Strategy) -> Stores {
        match used {
            Strategy::Streaming => Stores::Streamed,
            Strategy::Slow | Strategy::Template | Strategy::Auto => Stores::Cached,
        }
    }
}

/// The one dispatch to a store type, for every initializer. Two forms:
///
/// * `with_store!(stores, S => body)`: `body` compiled once with the type `S` = [`Cached`] and
///   once with `S` = [`Streamed`], run for the [`Stores`] value `stores`;
/// * `with_store!(used, S => template, slow => slow)`: for a resolved [`Strategy`] `used`, the
///   `slow` expression (the kernel's per-page code) for [`Strategy::Slow`] (and `Auto`, which
///   [`resolve`] never returns), else `template` with the stores of [`Stores::of`].
macro_rules! with_store {
    ($used:expr, $S:ident => $template:expr, slow => $slow:expr $(,)?) => {
        match $used {
            $crate::fill::Strategy::Slow | $crate::fill::Strategy::Auto => $slow,
            used @ ($crate::fill::Strategy::Template | $crate::fill::Strategy::Streaming) => {
                $crate::memmap::engine::with_store!($crate::memmap::engine::Stores::of(used), $S => $template)
            }
        }
    };
    ($stores:expr, $S:ident => $body:expr $(,)?) => {
        match $stores {
            $crate::memmap::engine::Stores::Cached => {
                type $S = $crate::memmap::engine::Cached;
                $body
            }
            $crate::memmap::engine::Stores::Streamed => {
                type $S = $crate::memmap::engine::Streamed;
                $body
            }
        }
    };
}
pub(crate) use with_store;

/// Raw access to struct pages indexed by PFN, with the modelled kernel address of each: what
/// the engine writes through. A copy of a memmap's (or a node's) storage pointer.
#[derive(Clone, Copy)]
pub(crate) struct Pages<P> {
    ptr: NonNull<P>,
    base_pfn: u64,
    vaddr_base: u64,
}

// SAFETY: `Pages` is a pointer into storage that its owner (a memmap view, or a node holding
// one) borrows exclusively; the owner's rules decide which thread accesses which page, so
// sending or sharing the pointer itself introduces no data race.
unsafe impl<P: Send> Send for Pages<P> {}
// SAFETY: as above.
unsafe impl<P: Sync> Sync for Pages<P> {}

impl<P: StructPage> Pages<P> {
    /// # Safety
    ///
    /// `ptr` must point at the struct page of `base_pfn` in storage that outlives every use of
    /// the result; `vaddr_base` is that page's modelled kernel address.
    pub(crate) const unsafe fn new(ptr: NonNull<P>, base_pfn: u64, vaddr_base: u64) -> Self {
        Pages { ptr, base_pfn, vaddr_base }
    }

    /// Pointer to the struct page of `pfn`.
    ///
    /// # Safety
    ///
    /// `pfn` must be inside the storage.
    #[inline(always)]
    pub(crate) unsafe fn ptr(&self, pfn: u64) -> *mut P {
        // SAFETY: the caller guarantees `pfn - base_pfn` indexes the storage.
        unsafe { self.ptr.as_ptr().add((pfn - self.base_pfn) as usize) }
    }

    /// The host address of the struct page of `pfn`, for a cache hint only (computed with
    /// wrapping arithmetic, never dereferenced here).
    #[inline(always)]
    pub(crate) fn addr(&self, pfn: u64) -> *const P {
        self.ptr.as_ptr().wrapping_add(pfn.wrapping_sub(self.base_pfn) as usize)
    }

    /// The modelled kernel address of the struct page of `pfn` (`pfn_to_page`).
    #[inline(always)]
    pub(crate) fn vaddr(&self, pfn: u64) -> u64 {
        self.vaddr_base.wrapping_add(pfn.wrapping_sub(self.base_pfn).wrapping_mul(P::SIZE as u64))
    }

    /// The PFN of the struct page whose `lru` list node is at `list_vaddr`, if that is the
    /// list node of a struct page at or after the storage's first (the caller checks the end).
    #[inline(always)]
    pub(crate) fn pfn_of_list(&self, list_vaddr: u64) -> Option<u64> {
        let off = list_vaddr.wrapping_sub(offsets::LRU_NEXT as u64).wrapping_sub(self.vaddr_base);
        (off % P::SIZE as u64 == 0).then(|| self.base_pfn.wrapping_add(off / P::SIZE as u64))
    }
}

/// The per-PFN refresh of a template copy: one place for every field that depends on where the
/// copy goes.
#[derive(Clone, Copy)]
pub(crate) struct Refresh<'c> {
    cfg: &'c KernelConfig,
    layout: &'c FlagsLayout,
    list: ListSelf,
}

impl<'c> Refresh<'c> {
    pub(crate) const fn new(cfg: &'c KernelConfig, layout: &'c FlagsLayout, list: ListSelf) -> Self {
        Refresh { cfg, layout, list }
    }

    /// Sets the section bits of `t` for `pfn` (`set_page_section`, only where the section lives
    /// in `page->flags`). Sections are whole pageblocks, so a run refreshes them once per
    /// pageblock.
    #[inline(always)]
    pub(crate) fn section(&self, t: &mut impl StructPage, pfn: u64) {
        if self.layout.section_in_page_flags() {
            t.set_u64_at(offsets::FLAGS, self.layout.set_section(t.flags(), self.cfg.pfn_to_section_nr(pfn)));
        }
    }

    /// The fields that change with every PFN: `virtual` and the list self-pointers, for the
    /// page at `vaddr`.
    #[inline(always)]
    pub(crate) fn per_pfn<P: StructPage>(&self, mut rec: P, pfn: u64, vaddr: u64) -> P {
        let list = vaddr.wrapping_add(offsets::LRU_NEXT as u64);
        match self.list {
            ListSelf::Neither => {}
            ListSelf::Prev => rec.set_u64_at(offsets::LRU_PREV, list),
            ListSelf::Both => {
                rec.set_u64_at(offsets::LRU_NEXT, list);
                rec.set_u64_at(offsets::LRU_PREV, list);
            }
        }
        if P::WANT_PAGE_VIRTUAL {
            rec.set_u64_at(offsets::VIRTUAL, self.cfg.pfn_to_virt(pfn));
        }
        rec
    }

    /// The whole refresh for one PFN (section bits included): `memmap_init_page_from_template()`.
    #[inline(always)]
    pub(crate) fn record<P: StructPage>(&self, t: &P, pfn: u64, vaddr: u64) -> P {
        let mut rec = *t;
        self.section(&mut rec, pfn);
        self.per_pfn(rec, pfn, vaddr)
    }
}

/// What the template loop does with the first struct page of a pageblock segment that an
/// [`Edges`] takes.
pub(crate) enum Edge<P> {
    /// Store this record normally, then call [`Edges::stored`] (the page may be read back).
    Normal(P),
    /// Store this record with the run's stores.
    Run(P),
}

/// The pages of a template run that differ from a plain refreshed copy: [`copy_run`] asks
/// [`Edges::takes`] at the first PFN of every pageblock segment and has [`Edges::finish`]
/// finish the refreshed record of those it takes.
pub(crate) trait Edges<P: StructPage> {
    /// Only the first struct page of each pageblock is written (a strided run).
    const FIRSTS_ONLY: bool = false;
    /// Whether the segment's first PFN `pfn` is an edge (`aligned`: it starts a pageblock).
    fn takes(&self, pfn: u64, aligned: bool) -> bool;
    /// The edge's record, from the refreshed copy `rec`.
    fn finish(&mut self, pfn: u64, rec: P) -> Edge<P>;
    /// After an [`Edge::Normal`] record was stored at `pfn`.
    fn stored(&mut self, _pfn: u64) {}
}

/// No edges: every page a refreshed copy.
pub(crate) struct Plain;

impl<P: StructPage> Edges<P> for Plain {
    #[inline(always)]
    fn takes(&self, _pfn: u64, _aligned: bool) -> bool {
        false
    }
    #[inline(always)]
    fn finish(&mut self, _pfn: u64, rec: P) -> Edge<P> {
        Edge::Run(rec)
    }
}

/// Pageblock-aligned pages stored normally and then handed to the callback
/// (`set_pageblock_migratetype`, `cond_resched`, which may read the page back).
pub(crate) struct AtPageblock<F>(pub(crate) F);

impl<P: StructPage, F: FnMut(u64)> Edges<P> for AtPageblock<F> {
    #[inline(always)]
    fn takes(&self, _pfn: u64, aligned: bool) -> bool {
        aligned
    }
    #[inline(always)]
    fn finish(&mut self, _pfn: u64, rec: P) -> Edge<P> {
        Edge::Normal(rec)
    }
    #[inline(always)]
    fn stored(&mut self, pfn: u64) {
        (self.0)(pfn);
    }
}

/// A run written once in its final state: the first page of every `block`-aligned block (a
/// power of two, a multiple of the pageblock) is finished by `head` in registers before it is
/// stored (a free block's buddy links and order).
pub(crate) struct PageblockHeads<F> {
    pub(crate) block: u64,
    pub(crate) head: F,
}

impl<P: StructPage, F: FnMut(u64, &mut P)> Edges<P> for PageblockHeads<F> {
    #[inline(always)]
    fn takes(&self, pfn: u64, _aligned: bool) -> bool {
        pfn & (self.block - 1) == 0
    }
    #[inline(always)]
    fn finish(&mut self, pfn: u64, mut rec: P) -> Edge<P> {
        (self.head)(pfn, &mut rec);
        Edge::Run(rec)
    }
}

/// Only the first struct page of every pageblock of a pageblock-aligned run, each finished by
/// `patch` in registers before it is stored (the first struct pages of a run of blocks,
/// written once in their final state).
pub(crate) struct PageblockFirsts<F>(pub(crate) F);

impl<P: StructPage, F: FnMut(u64, &mut P)> Edges<P> for PageblockFirsts<F> {
    const FIRSTS_ONLY: bool = true;
    #[inline(always)]
    fn takes(&self, _pfn: u64, _aligned: bool) -> bool {
        true
    }
    #[inline(always)]
    fn finish(&mut self, pfn: u64, mut rec: P) -> Edge<P> {
        (self.0)(pfn, &mut rec);
        Edge::Run(rec)
    }
}

/// The template loop, the one loop of every template copy: a refreshed copy of `tmpl` into
/// the struct pages of `[from, to)` with `S`, one pageblock segment at a time; the first page
/// of a segment goes through `edges`. `tmpl` keeps the last segment's section bits.
///
/// # Safety
///
/// `[from, to)` must be inside `pages`' storage and owned by the caller (no other thread
/// accesses those struct pages during the call); with `S::STREAMING`, the caller drains before
/// anything reads them (the [`Edge::Normal`] pages are stored normally and may be read).
#[inline(always)]
pub(crate) unsafe fn copy_run<P: StructPage, S: Store, E: Edges<P>>(
    pages: Pages<P>,
    refresh: &Refresh<'_>,
    (from, to): (u64, u64),
    tmpl: &mut P,
    edges: &mut E,
) {
    let pb = refresh.cfg.pageblock_nr_pages();
    debug_assert!(!E::FIRSTS_ONLY || from & (pb - 1) == 0, "a strided run starts at a pageblock");
    let mut pfn = from;
    while pfn < to {
        let seg_end = (pfn | (pb - 1)).saturating_add(1).min(to);
        refresh.section(tmpl, pfn);
        if edges.takes(pfn, pfn & (pb - 1) == 0) {
            let rec = refresh.per_pfn(*tmpl, pfn, pages.vaddr(pfn));
            match edges.finish(pfn, rec) {
                Edge::Normal(rec) => {
                    // SAFETY: `pfn` is in `[from, to)`, inside the storage and owned (caller).
                    unsafe { Cached::store(pages.ptr(pfn), rec) };
                    edges.stored(pfn);
                }
                // SAFETY: as above; the caller's contract covers the run's stores.
                Edge::Run(rec) => unsafe { S::store(pages.ptr(pfn), rec) },
            }
            pfn += 1;
        }
        if !E::FIRSTS_ONLY {
            // The segment lies in one pageblock, so `tmpl`'s section bits hold for all of it.
            let mut vaddr = pages.vaddr(pfn);
            for p in pfn..seg_end {
                let rec = refresh.per_pfn(*tmpl, p, vaddr);
                // SAFETY: `p` is in `[from, to)`; the caller's contract covers the store.
                unsafe { S::store(pages.ptr(p), rec) };
                vaddr = vaddr.wrapping_add(P::SIZE as u64);
            }
        }
        pfn = seg_end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::page::Page72;

    #[test]
    fn a_record_gets_its_section_bits_virtual_and_list_pointers() {
        let cfg = KernelConfig::X86_64_CLASSIC_SPARSE;
        let layout = cfg.flags_layout().unwrap();
        let pfn = 3 * cfg.pages_per_section() + 5;
        let mut t = Page72::ZEROED;
        t.set_u64_at(offsets::LRU_NEXT, 0x1111);
        t.set_u64_at(offsets::LRU_PREV, 0x2222);
        for (list, next, prev) in [
            (ListSelf::Neither, 0x1111, 0x2222),
            (ListSelf::Prev, 0x1111, 0x9008),
            (ListSelf::Both, 0x9008, 0x9008),
        ] {
            let r = Refresh::new(&cfg, &layout, list).record(&t, pfn, 0x9000);
            assert_eq!(layout.section(r.flags()), 3);
            assert_eq!(r.virtual_address(), Some(0xffff_8880_0000_0000 + (pfn << 12)));
            assert_eq!(
                (r.u64_at(crate::offsets::LRU_NEXT), r.u64_at(crate::offsets::LRU_PREV)),
                (next, prev),
                "{list:?}"
            );
        }
    }
}
