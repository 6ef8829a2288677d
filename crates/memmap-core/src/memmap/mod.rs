//! The memmap: PFN-indexed `struct page` storage plus the per-pageblock migrate types, over
//! caller storage (or [`OwnedMemmap`](crate::OwnedMemmap) under `std`).
//!
//! Struct pages hold pointers (`lru` to itself, a tail's `compound_head` to its head), so each
//! has a modelled kernel address, `vmemmap_start + pfn * sizeof(struct page)` by default
//! ([`Memmap::with_vaddr_base`]): the bytes do not depend on where the buffer lives. Pages are
//! read and written by value or through a [`PageMut`]; the memmap never hands out references
//! into itself, which keeps it sound over remapped storage where pages alias (HVO).

mod access;
pub(crate) mod engine;
pub(crate) mod ops;
#[cfg(feature = "std")]
pub(crate) mod owned;
pub(crate) mod template;

pub use access::PageMut;
pub(crate) use access::{AtPageblockFn, PageAccess, PageblockWork, Streaming};

use core::fmt;
use core::marker::PhantomData;
use core::mem::MaybeUninit;
use core::ptr::NonNull;

use crate::InitError;
use crate::model::config::{FlagsLayout, KernelConfig};
use crate::model::flags::MigrateType;
use crate::model::page::StructPage;

/// Value of a pageblock byte that no initializer has set.
pub const PAGEBLOCK_UNSET: u8 = 0xff;

/// `PAGE_POISON_PATTERN`: what `page_init_poison` fills fresh memmap memory with
/// (`CONFIG_DEBUG_VM` builds), so reading an uninitialized struct page is recognisable.
pub const PAGE_POISON_BYTE: u8 = 0xff;

/// A PFN-indexed view of `struct page` storage and its pageblock migrate types.
pub struct Memmap<'a, P: StructPage> {
    pages: NonNull<P>,
    len: usize,
    base_pfn: u64,
    vaddr_base: u64,
    pageblocks: NonNull<u8>,
    pageblocks_len: usize,
    cfg: KernelConfig,
    layout: FlagsLayout,
    _borrow: PhantomData<&'a mut [P]>,
}

// SAFETY: a `Memmap` is an exclusive borrow of `[P]` and `[u8]` (both `Send`); it is `Send` for
// the same reason `&mut [P]` is.
unsafe impl<P: StructPage> Send for Memmap<'_, P> {}

impl<P: StructPage> fmt::Debug for Memmap<'_, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Memmap")
            .field("base_pfn", &self.base_pfn)
            .field("nr_pages", &self.len)
            .field("struct_page_size", &P::SIZE)
            .field("vaddr_base", &format_args!("{:#x}", self.vaddr_base))
            .field("config", &self.cfg.name)
            .finish()
    }
}

/// Number of pageblock bytes a memmap of `nr_pages` pages starting at `base_pfn` needs
/// (saturating at `usize::MAX` for ranges no memmap can have; [`Memmap::new`] refuses those).
#[must_use]
pub const fn pageblocks_needed(cfg: &KernelConfig, base_pfn: u64, nr_pages: u64) -> usize {
    if nr_pages == 0 {
        return 0;
    }
    let order = if cfg.pageblock_order < 64 { cfg.pageblock_order } else { 63 };
    let first = base_pfn >> order;
    let last = base_pfn.saturating_add(nr_pages - 1) >> order;
    let n = last - first + 1;
    if n > usize::MAX as u64 { usize::MAX } else { n as usize }
}

impl<'a, P: StructPage> Memmap<'a, P> {
    /// A memmap over initialized storage: `pages[i]` is the struct page of `base_pfn + i`, and
    /// `pageblocks` has one byte per pageblock overlapping the range
    /// ([`pageblocks_needed`]); the pageblock bytes are reset to [`PAGEBLOCK_UNSET`].
    ///
    /// # Errors
    ///
    /// [`InitError::Config`] if the configuration is invalid, [`InitError::PageblocksTooShort`]
    /// if `pageblocks` is too short, [`InitError::RangeOverflow`] if the PFN range overflows.
    pub fn new(
        cfg: KernelConfig,
        base_pfn: u64,
        pages: &'a mut [P],
        pageblocks: &'a mut [u8],
    ) -> Result<Self, InitError> {
        let len = pages.len();
        // SAFETY: `pages` and `pageblocks` are exclusive borrows for `'a`, initialized, and the
        // view is bounded by their lengths.
        unsafe { Self::from_raw_parts(cfg, base_pfn, NonNull::from(pages).cast(), len, pageblocks) }
    }

    /// A memmap over uninitialized storage. The pages are first filled with
    /// [`PAGE_POISON_BYTE`] (streamed, like the kernel's `page_init_poison` of fresh memmap
    /// memory), so that every later read sees initialized bytes.
    ///
    /// # Errors
    ///
    /// As for [`Memmap::new`].
    pub fn from_uninit(
        cfg: KernelConfig,
        base_pfn: u64,
        pages: &'a mut [MaybeUninit<P>],
        pageblocks: &'a mut [u8],
    ) -> Result<Self, InitError> {
        let len = pages.len();
        let ptr = pages.as_mut_ptr().cast::<u8>();
        // SAFETY: the slice is valid for `len * SIZE` bytes of writes and `u8` has no invalid
        // values; the copy source is a one-page buffer repeated (stream-hal's copy does not
        // fence, so drain below before any read).
        unsafe {
            let poison = [PAGE_POISON_BYTE; 128];
            let bytes = len * P::SIZE;
            let mut off = 0;
            while off < bytes {
                let n = (bytes - off).min(poison.len());
                stream_hal::memcpy_nontemporal(ptr.add(off), poison.as_ptr(), n);
                off += n;
            }
        }
        stream_hal::drain();
        // SAFETY: every byte of `pages` is now initialized (poison), and `P` is plain words, for
        // which every bit pattern is valid.
        unsafe { Self::from_raw_parts(cfg, base_pfn, NonNull::from(pages).cast(), len, pageblocks) }
    }

    /// A memmap over raw storage.
    ///
    /// # Safety
    ///
    /// For `'a`, `pages` must be valid for reads of `len` initialized `P`s, exclusively used
    /// through this memmap, and valid for writes at every page the caller's initializers will
    /// write (read-only parts are allowed where nothing writes, e.g. HVO-remapped vmemmap).
    /// `pageblocks` must not be accessed elsewhere for `'a`.
    ///
    /// # Errors
    ///
    /// As for [`Memmap::new`].
    pub unsafe fn from_raw_parts(
        cfg: KernelConfig,
        base_pfn: u64,
        pages: NonNull<P>,
        len: usize,
        pageblocks: &'a mut [u8],
    ) -> Result<Self, InitError> {
        let layout = cfg.flags_layout().map_err(InitError::Config)?;
        let Some(end) = base_pfn.checked_add(len as u64) else {
            return Err(InitError::RangeOverflow { start_pfn: base_pfn, nr_pages: len as u64 });
        };
        if end > cfg.max_pfn() {
            return Err(InitError::BeyondMaxPfn { end_pfn: end, max_pfn: cfg.max_pfn() });
        }
        let needed = pageblocks_needed(&cfg, base_pfn, len as u64);
        if pageblocks.len() < needed {
            return Err(InitError::PageblocksTooShort { needed, got: pageblocks.len() });
        }
        pageblocks[..needed].fill(PAGEBLOCK_UNSET);
        let vaddr_base = cfg.vmemmap_start.wrapping_add(base_pfn.wrapping_mul(P::SIZE as u64));
        Ok(Memmap {
            pages,
            len,
            base_pfn,
            vaddr_base,
            pageblocks: NonNull::from(&mut pageblocks[..needed]).cast(),
            pageblocks_len: needed,
            cfg,
            layout,
            _borrow: PhantomData,
        })
    }

    /// Sets the modelled virtual address of the struct page of `base_pfn`.
    #[must_use]
    pub fn with_vaddr_base(mut self, vaddr: u64) -> Self {
        self.vaddr_base = vaddr;
        self
    }

    /// The kernel configuration.
    #[must_use]
    pub fn config(&self) -> &KernelConfig {
        &self.cfg
    }

    /// The page-flags layout of the configuration.
    #[must_use]
    pub fn layout(&self) -> &FlagsLayout {
        &self.layout
    }

    /// First PFN.
    #[must_use]
    pub fn base_pfn(&self) -> u64 {
        self.base_pfn
    }

    /// One past the last PFN.
    #[must_use]
    pub fn end_pfn(&self) -> u64 {
        self.base_pfn + self.len as u64
    }

    /// Number of struct pages.
    #[must_use]
    pub fn nr_pages(&self) -> usize {
        self.len
    }

    /// Whether `pfn` is in the memmap.
    #[must_use]
    pub fn contains(&self, pfn: u64) -> bool {
        pfn >= self.base_pfn && pfn < self.end_pfn()
    }

    /// Whether `[start, start + nr)` is in the memmap.
    #[must_use]
    pub fn contains_range(&self, start: u64, nr: u64) -> bool {
        start >= self.base_pfn && start.checked_add(nr).is_some_and(|end| end <= self.end_pfn())
    }

    /// The modelled address of the struct page of `pfn` (`pfn_to_page(pfn)`).
    #[must_use]
    pub fn vaddr(&self, pfn: u64) -> u64 {
        self.vaddr_base.wrapping_add(pfn.wrapping_sub(self.base_pfn).wrapping_mul(P::SIZE as u64))
    }

    /// The PFN of the struct page at modelled address `vaddr` (`page_to_pfn`), if it is in this
    /// memmap and a struct page boundary.
    #[must_use]
    pub(crate) fn vaddr_to_pfn(&self, vaddr: u64) -> Option<u64> {
        let off = vaddr.checked_sub(self.vaddr_base)?;
        if off % P::SIZE as u64 != 0 {
            return None;
        }
        let pfn = self.base_pfn.checked_add(off / P::SIZE as u64)?;
        self.contains(pfn).then_some(pfn)
    }

    /// The struct page of `pfn`, by value.
    ///
    /// # Panics
    ///
    /// If `pfn` is outside the memmap.
    #[must_use]
    #[track_caller]
    pub fn read(&self, pfn: u64) -> P {
        let page = self.slot(pfn);
        // SAFETY: in the memmap (`slot`), whose storage is initialized and readable
        // (constructor contract); no memmap method returns with a streamed store pending.
        unsafe { page.as_ptr().read() }
    }

    /// Overwrites the struct page of `pfn`.
    ///
    /// # Panics
    ///
    /// If `pfn` is outside the memmap.
    #[track_caller]
    pub fn write(&mut self, pfn: u64, page: P) {
        self.page_mut(pfn).write(&page);
    }

    /// The storage as the fill engine writes it: a copy of the pointer with the PFN and address
    /// bases. Valid as long as this view's borrow.
    pub(crate) fn raw_pages(&self) -> crate::memmap::engine::Pages<P> {
        // SAFETY: `self.pages` points at the struct page of `base_pfn` in storage this view
        // borrows for `'a`, and `vaddr_base` is that page's modelled address.
        unsafe { crate::memmap::engine::Pages::new(self.pages, self.base_pfn, self.vaddr_base) }
    }

    /// The storage slot of the struct page of `pfn`: the one place where a PFN becomes a host
    /// pointer, checked against the memmap.
    ///
    /// # Panics
    ///
    /// If `pfn` is outside the memmap.
    #[inline(always)]
    #[track_caller]
    fn slot(&self, pfn: u64) -> NonNull<P> {
        assert!(self.contains(pfn), "pfn {pfn:#x} outside memmap");
        // SAFETY: `pfn - base_pfn < len` (checked), so the offset stays inside the storage.
        unsafe { self.pages.add((pfn - self.base_pfn) as usize) }
    }

    /// Index of `pfn`'s pageblock in the pageblock array.
    fn pageblock_index(&self, pfn: u64) -> usize {
        ((pfn >> self.cfg.pageblock_order) - (self.base_pfn >> self.cfg.pageblock_order)) as usize
    }

    /// The migrate type stored for `pfn`'s pageblock (`None` if never set).
    ///
    /// # Panics
    ///
    /// If `pfn` is outside the memmap.
    #[must_use]
    pub fn pageblock_migratetype(&self, pfn: u64) -> Option<MigrateType> {
        assert!(self.contains(pfn), "pfn {pfn:#x} outside memmap");
        let i = self.pageblock_index(pfn);
        debug_assert!(i < self.pageblocks_len);
        // SAFETY: `i < pageblocks_len` for every pfn in the memmap (the constructor sized the
        // array with `pageblocks_needed`).
        MigrateType::from_value(unsafe { self.pageblocks.as_ptr().add(i).read() })
    }

    /// The raw pageblock bytes ([`PAGEBLOCK_UNSET`] where never set).
    #[must_use]
    pub fn pageblock_bytes(&self) -> &[u8] {
        // SAFETY: the array is exclusively borrowed for `'a` and `pageblocks_len` long.
        unsafe { core::slice::from_raw_parts(self.pageblocks.as_ptr(), self.pageblocks_len) }
    }

    /// Stores `mt` for the `n` consecutive pageblocks from `pfn`'s.
    pub(crate) fn store_pageblocks(&mut self, pfn: u64, n: u64, mt: MigrateType) {
        let i = self.pageblock_index(pfn);
        let n = usize::try_from(n).expect("pageblock count fits usize");
        assert!(i + n <= self.pageblocks_len, "pageblocks of pfn {pfn:#x} outside the pageblock array");
        // SAFETY: bounds checked above; exclusive borrow.
        unsafe { self.pageblocks.as_ptr().add(i).write_bytes(mt.value(), n) };
    }

    /// `set_pageblock_migratetype(page, MIGRATE_MOVABLE)` on the `n` pageblocks from `pfn` (a
    /// pageblock-aligned PFN), as a loop of [`Memmap::set_pageblock_migratetype`] does.
    pub(crate) fn pageblock_movable_run(&mut self, pfn: u64, n: u64) {
        let bs = self.cfg.pageblock_nr_pages();
        if self.layout.section_in_page_flags() {
            for k in 0..n {
                self.set_pageblock_migratetype(pfn + k * bs, MigrateType::Movable);
            }
        } else if n > 0 {
            assert!(
                self.contains(pfn) && self.contains(pfn + (n - 1) * bs),
                "pageblocks of pfn {pfn:#x} + {n} outside memmap"
            );
            self.store_pageblocks(pfn, n, MigrateType::Movable);
        }
    }

    /// `set_pageblock_migratetype(pfn_to_page(pfn), mt)`.
    ///
    /// Like the kernel, this finds the pageblock through `page_to_pfn(page)`, which on classic
    /// SPARSEMEM reads the section back out of the page's flags (checked against the PFN).
    ///
    /// # Panics
    ///
    /// If `pfn` is outside the memmap, or (classic SPARSEMEM) the page's section bits do not
    /// match its PFN, i.e. the page was not initialized.
    pub fn set_pageblock_migratetype(&mut self, pfn: u64, mt: MigrateType) {
        assert!(self.contains(pfn), "pfn {pfn:#x} outside memmap");
        if self.layout.section_in_page_flags() {
            // page_to_pfn() -> page_to_section(page): a load of the flags just written.
            let flags = self.read(pfn).words()[0];
            let section = self.layout.section(flags);
            assert_eq!(
                section,
                self.cfg.pfn_to_section_nr(pfn) & self.layout.sections_mask(),
                "set_pageblock_migratetype: page {pfn:#x} has foreign section bits (not initialized?)"
            );
        }
        self.store_pageblocks(pfn, 1, mt);
    }

    /// A shorter-lived view of the same memmap (to split it without giving it up).
    #[must_use]
    pub fn reborrow(&mut self) -> Memmap<'_, P> {
        Memmap { _borrow: PhantomData, ..*self }
    }

    /// Splits the memmap at `pfn` into `[base, pfn)` and `[pfn, end)`, two independent views
    /// (one per thread, say). `pfn` must be pageblock-aligned, or the first or one-past-the-last
    /// PFN. Use [`Memmap::reborrow`] to split a memmap you want to keep.
    ///
    /// # Errors
    ///
    /// [`InitError::Misaligned`] if `pfn` is not pageblock-aligned,
    /// [`InitError::OutOfRange`] if it is not inside `[base, end]`.
    pub fn split_at(self, pfn: u64) -> Result<(Memmap<'a, P>, Memmap<'a, P>), InitError> {
        let pb = self.cfg.pageblock_nr_pages();
        if pfn < self.base_pfn || pfn > self.end_pfn() {
            return Err(InitError::OutOfRange {
                start_pfn: pfn,
                nr_pages: 0,
                memmap_start: self.base_pfn,
                memmap_end: self.end_pfn(),
            });
        }
        if pfn % pb != 0 && pfn != self.base_pfn && pfn != self.end_pfn() {
            return Err(InitError::Misaligned { start_pfn: pfn, nr_pages: 0, pfns_per_compound: pb });
        }
        let left_len = (pfn - self.base_pfn) as usize;
        let left_pb = if left_len == 0 { 0 } else { self.pageblock_index(pfn - 1) + 1 };
        // SAFETY: `left_len <= len` and `left_pb <= pageblocks_len` (the split pfn is inside the
        // memmap and pageblock-aligned, so the pageblocks left of it are exactly the first
        // `left_pb`); the two halves are disjoint and inherit this view's exclusive borrow.
        let (right_pages, right_pb) = unsafe { (self.pages.add(left_len), self.pageblocks.add(left_pb)) };
        let right = Memmap {
            pages: right_pages,
            len: self.len - left_len,
            base_pfn: pfn,
            vaddr_base: self.vaddr(pfn),
            pageblocks: right_pb,
            pageblocks_len: self.pageblocks_len - left_pb,
            ..self
        };
        Ok((Memmap { len: left_len, pageblocks_len: left_pb, ..self }, right))
    }

    /// PFNs at the start of every pageblock overlapping both `[start, start + nr)` and the
    /// memmap whose migrate type is `mt`, in ascending order (only the memmap's own pageblocks
    /// are visited, whatever `nr`).
    pub fn pageblocks_with(&self, start: u64, nr: u64, mt: MigrateType) -> impl Iterator<Item = u64> + '_ {
        let order = self.cfg.pageblock_order;
        // The overlap of the two ranges; empty when they do not meet.
        let lo = start.max(self.base_pfn);
        let hi = start.saturating_add(nr).min(self.end_pfn());
        let (first, last) = if lo < hi { (lo >> order, ((hi - 1) >> order) + 1) } else { (0, 0) };
        (first..last).map(move |b| b << order).filter(move |&pfn| {
            let probe = pfn.max(self.base_pfn);
            self.pageblock_migratetype(probe) == Some(mt)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::page::Page64;
    use std::vec;

    #[test]
    fn pageblocks_cover_partial_blocks_at_both_ends() {
        let cfg = KernelConfig::X86_64;
        assert_eq!(pageblocks_needed(&cfg, 0, 0), 0);
        assert_eq!(pageblocks_needed(&cfg, 0, 512), 1);
        assert_eq!(pageblocks_needed(&cfg, 511, 2), 2);
        assert_eq!(pageblocks_needed(&cfg, 100, 1024), 3);
    }

    #[test]
    fn vaddr_follows_pfn_to_page() {
        let cfg = KernelConfig::X86_64;
        let mut pages = vec![Page64::ZEROED; 16];
        let mut pb = vec![0; 1];
        let m = Memmap::new(cfg, 0x1000, &mut pages, &mut pb).unwrap();
        assert_eq!(m.vaddr(0x1000), 0xffff_ea00_0000_0000 + 0x1000 * 64);
        assert_eq!(m.vaddr_to_pfn(m.vaddr(0x100f)), Some(0x100f));
        assert_eq!(m.vaddr_to_pfn(m.vaddr(0x1010)), None);
        assert_eq!(m.vaddr_to_pfn(m.vaddr(0x1001) + 8), None);
    }

    /// `pageblock_init_run` leaves the pageblock bits and `cond_resched()` calls that
    /// `pageblock_init` on each block leaves, on a vmemmap and a classic-SPARSEMEM config, and
    /// refuses a run past the memmap.
    #[test]
    fn pageblock_init_run_equals_pageblock_init_per_block() {
        use crate::hooks::RecordingHooks;
        for cfg in [KernelConfig::X86_64, KernelConfig::X86_64_CLASSIC_SPARSE] {
            let (base, n) = (3 * 512, 8 * 512 + 100);
            let run = |one_by_one: bool| {
                let mut pages = vec![Page64::ZEROED; n];
                let mut pb = vec![0; pageblocks_needed(&cfg, base, n as u64)];
                let mut hooks = RecordingHooks::default();
                let mut m = Memmap::new(cfg, base, &mut pages, &mut pb).unwrap();
                for b in (base + 512..base + 6 * 512).step_by(512) {
                    m.init_single_page(b, 2, 0, &mut hooks);
                }
                if one_by_one {
                    for b in (base + 512..base + 6 * 512).step_by(512) {
                        m.pageblock_init(b, &mut hooks);
                    }
                } else {
                    m.pageblock_init_run(base + 512, 5, &mut hooks);
                    m.pageblock_init_run(base + 512, 0, &mut hooks);
                }
                let _ = m;
                (pb, hooks.resched_pfns)
            };
            assert_eq!(run(true), run(false), "{}", cfg.name);
            let mut pages = vec![Page64::ZEROED; n];
            let mut pb = vec![0; pageblocks_needed(&cfg, base, n as u64)];
            let outside = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let mut m = Memmap::new(cfg, base, &mut pages, &mut pb).unwrap();
                m.pageblock_init_run(base + 512, 9, &mut crate::NoHooks);
            }));
            assert!(outside.is_err(), "a run past the memmap is refused");
        }
    }

    #[test]
    fn short_pageblock_array_is_an_error() {
        let mut pages = vec![Page64::ZEROED; 1024];
        let mut pb = vec![0; 1];
        let err = Memmap::new(KernelConfig::X86_64, 0, &mut pages, &mut pb).unwrap_err();
        assert_eq!(err, InitError::PageblocksTooShort { needed: 2, got: 1 });
    }

    #[test]
    fn split_halves_are_disjoint_views_of_the_same_storage() {
        let cfg = KernelConfig::X86_64;
        let mut pages = vec![Page64::ZEROED; 2048];
        let mut pb = vec![0; 5];
        let mut m = Memmap::new(cfg, 100, &mut pages, &mut pb).unwrap();
        assert!(m.reborrow().split_at(99).is_err() && m.reborrow().split_at(2149).is_err());
        assert!(m.reborrow().split_at(600).is_err(), "not pageblock-aligned");
        let (mut a, mut b) = m.reborrow().split_at(1024).unwrap();
        assert_eq!((a.base_pfn(), a.end_pfn(), b.base_pfn(), b.end_pfn()), (100, 1024, 1024, 2148));
        assert_eq!(b.vaddr(1024), a.vaddr(1023) + 64);
        a.set_pageblock_migratetype(1023, MigrateType::Movable);
        b.set_pageblock_migratetype(1024, MigrateType::Reclaimable);
        let mut p = Page64::ZEROED;
        p.set_u64_at(crate::offsets::FLAGS, 7);
        b.write(1024, p);
        assert_eq!(m.read(1024).flags(), 7);
        assert_eq!(m.pageblock_migratetype(1023), Some(MigrateType::Movable));
        assert_eq!(m.pageblock_migratetype(1024), Some(MigrateType::Reclaimable));
        assert_eq!(m.pageblock_migratetype(1536), None);
        let (a, b) = m.split_at(100).unwrap();
        assert_eq!((a.nr_pages(), b.nr_pages()), (0, 2048));
    }

    #[test]
    fn uninit_storage_is_poisoned() {
        let mut pages = vec![MaybeUninit::<Page64>::uninit(); 3];
        let mut pb = vec![0; 1];
        let m = Memmap::from_uninit(KernelConfig::X86_64, 0, &mut pages, &mut pb).unwrap();
        assert!(m.read(2).words().iter().all(|&w| w == u64::MAX));
    }
}
