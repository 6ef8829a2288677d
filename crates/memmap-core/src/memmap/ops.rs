//! The kernel's per-page operations, step for step (`mm/mm_init.c`, `mm/internal.h`,
//! `include/linux/mm.h`, `include/linux/page_ref.h`), as methods of [`Memmap`]: the slow path,
//! the kernel's stores in the kernel's order (the `atomic_set()`/`WRITE_ONCE()` ones volatile
//! here too), which the template and streaming paths are tested against byte for byte.

use crate::hooks::{InitHooks, PageRefEvent};
use crate::memmap::Memmap;

/// `enum bootmem_type`: what a boot-memory page recorded by
/// [`Memmap::get_page_bootmem`] holds (the value from 7.2; 11 more before).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum BootmemType {
    /// `SECTION_INFO`: a section's memmap; `info` is the section number.
    Section = 1,
    /// `MIX_SECTION_INFO`: a section's usemap (`mem_section_usage`); `info` is the section number.
    MixSection = 2,
    /// `NODE_INFO`: the node's `pglist_data`; `info` is the node id.
    Node = 3,
}
/// The sections x86-64's `register_page_bootmem_info_node()` registers, as `f(nid, section)`
/// once per registration: each node of `nodes` (`(nid, span, memory)`) steps from its first
/// pfn a section at a time to its end, and registers each stepped section that has a memmap
/// (one of `sections`, ascending) and whose stepped pfn `early_pfn_to_nid()` puts in the node
/// (the node whose memory holds it; outside all memory, the first node). A section two nodes
/// step into is registered twice; one a node's steps miss, not at all. Other architectures have
/// no `HAVE_BOOTMEM_INFO_NODE` and register nothing (and from 7.3 no release does:
/// [`Behaviour::bootmem_info_registered`](crate::Behaviour::bootmem_info_registered)).
pub fn bootmem_info_sections(
    cfg: &crate::KernelConfig,
    nodes: &[(u32, crate::PfnRange, &[crate::PfnRange])],
    sections: &[u64],
    mut f: impl FnMut(u32, u64),
) {
    if cfg.arch != crate::Arch::X86_64 {
        return;
    }
    let pps = cfg.pages_per_section();
    let first_nid = nodes.iter().map(|n| n.0).min().unwrap_or(0);
    let nid_of =
        |pfn: u64| nodes.iter().find(|n| n.2.iter().any(|m| m.contains(pfn))).map_or(first_nid, |n| n.0);
    for &(nid, span, _) in nodes {
        for &section in sections {
            // The node's step inside this section, if it has one.
            let (lo, hi) = (section.saturating_mul(pps), section.saturating_mul(pps).saturating_add(pps));
            let pfn =
                span.start.saturating_add(lo.saturating_sub(span.start).div_ceil(pps).saturating_mul(pps));
            if pfn >= lo && pfn < hi && pfn < span.end && nid_of(pfn) == nid {
                f(nid, section);
            }
        }
    }
}

use crate::FolioLayout;
use crate::model::flags::{KASAN_TAG_KERNEL, MigrateType, PageType};
use crate::model::page::{StructPage, folio, offsets};

/// `-1` as stored in an `atomic_t`.
const MINUS_ONE: u32 = u32::MAX;

impl<P: StructPage> Memmap<'_, P> {
    /// Whether `page_ref_tracepoint_active(page_ref_set)` is true: the configuration has
    /// `CONFIG_DEBUG_PAGE_REF` and the hook reports the tracepoint enabled.
    #[inline(always)]
    pub fn page_ref_tracepoint_active<H: InitHooks>(&self, hooks: &H) -> bool {
        self.config().debug_page_ref && hooks.page_ref_tracepoint_enabled()
    }

    /// `set_page_count(page, v)`: `atomic_set(&page->_refcount, v)`, then the `page_ref_set`
    /// tracepoint if it is active.
    ///
    /// # Panics
    ///
    /// If `pfn` is outside the memmap.
    #[inline]
    pub fn set_page_count<H: InitHooks>(&mut self, pfn: u64, v: i32, hooks: &mut H) {
        self.page_mut(pfn).set_u32_once_at(offsets::REFCOUNT, v as u32);
        if self.page_ref_tracepoint_active(hooks) {
            let page = self.read(pfn);
            let event = PageRefEvent {
                pfn,
                flags: page.flags(),
                count: page.refcount(),
                mapcount: page.mapcount(),
                mapping: page.u64_at(crate::offsets::MAPPING),
                migratetype: self.pageblock_migratetype(pfn),
                val: v,
            };
            hooks.page_ref_set(&event);
        }
    }

    /// `get_page_bootmem(info, page, type)` on the reserved struct page of `pfn`: memory
    /// hot-remove's record that the page holds boot-time metadata, in the release's encoding
    /// ([`Behaviour::bootmem_type_in_private`](crate::Behaviour::bootmem_type_in_private)).
    ///
    /// # Panics
    ///
    /// If `pfn` is outside the memmap.
    pub fn get_page_bootmem(&mut self, pfn: u64, info: u64, ty: BootmemType) {
        let b = self.cfg.behaviour();
        let mut p = self.page_mut(pfn);
        if b.bootmem_type_in_private {
            p.set_u64_at(offsets::PRIVATE, info << 4 | ty as u64);
        } else {
            p.set_u64_at(offsets::INDEX, ty as u64 + 11);
            let f = p.u64_at(offsets::FLAGS);
            p.set_u64_at(offsets::FLAGS, f | 1 << b.page_flags.private);
            p.set_u64_at(offsets::PRIVATE, info);
        }
        let count = p.u32_at(offsets::REFCOUNT);
        p.set_u32_at(offsets::REFCOUNT, count.wrapping_add(1));
    }

    /// `__init_single_page(page, pfn, zone, nid)`, in the kernel's order:
    /// `mm_zero_struct_page` → `set_page_links` → `init_page_count` → `_mapcount = -1` →
    /// `page_cpupid_reset_last` → `page_kasan_tag_reset` → `INIT_LIST_HEAD(&page->lru)` →
    /// `set_page_address` (`WANT_PAGE_VIRTUAL`; 64-bit kernels have no highmem zone).
    ///
    /// # Panics
    ///
    /// If `pfn` is outside the memmap.
    #[inline]
    pub fn init_single_page<H: InitHooks>(&mut self, pfn: u64, zone: u32, nid: u32, hooks: &mut H) {
        let layout = *self.layout();
        let cfg = *self.config();
        let vaddr = self.vaddr(pfn);
        let mut page = self.page_mut(pfn);
        // 1. mm_zero_struct_page()
        page.write(&P::ZEROED);
        // 2. set_page_links(): zone, node, [section]
        let flags = layout.set_links(page.u64_at(offsets::FLAGS), zone, nid, cfg.pfn_to_section_nr(pfn));
        page.set_u64_at(offsets::FLAGS, flags);
        // 3. init_page_count() = set_page_count(page, 1)
        self.set_page_count(pfn, 1, hooks);
        let mut page = self.page_mut(pfn);
        // 4. atomic_set(&page->_mapcount, -1)
        page.set_u32_once_at(offsets::MAPCOUNT, MINUS_ONE);
        // 5. page_cpupid_reset_last()
        if layout.last_cpupid_width != 0 {
            page.set_u64_at(offsets::FLAGS, layout.cpupid_reset_last(page.u64_at(offsets::FLAGS)));
        }
        // 6. page_kasan_tag_reset(): only tag-based KASAN keeps a tag in flags.
        if cfg.kasan && layout.kasan_tag_width != 0 {
            page.set_u64_at(
                offsets::FLAGS,
                layout.kasan_tag_set(page.u64_at(offsets::FLAGS), KASAN_TAG_KERNEL),
            );
        }
        // 7. INIT_LIST_HEAD(&page->lru): WRITE_ONCE(next, list); prev = list
        page.set_u64_once_at(offsets::LRU_NEXT, vaddr.wrapping_add(offsets::LRU_NEXT as u64));
        page.set_u64_at(offsets::LRU_PREV, vaddr.wrapping_add(offsets::LRU_NEXT as u64));
        // 8. set_page_address(page, __va(pfn << PAGE_SHIFT))
        if P::WANT_PAGE_VIRTUAL {
            page.set_u64_at(offsets::VIRTUAL, cfg.pfn_to_virt(pfn));
        }
    }

    /// One iteration of `memmap_init_range()`'s loop in `MEMINIT_HOTPLUG` context:
    /// `__init_single_page()`, then `__SetPageReserved()` for `ZONE_DEVICE` (the release's
    /// `PG_reserved`) or `__SetPageOffline()` for memory onlined into another zone, and at a
    /// pageblock-aligned PFN the pageblock's migrate type `mt` and `cond_resched()`.
    ///
    /// # Panics
    ///
    /// If `pfn` is outside the memmap.
    pub(crate) fn init_hotplug_page<H: InitHooks>(
        &mut self,
        pfn: u64,
        (zone, nid): (u32, u32),
        mt: MigrateType,
        hooks: &mut H,
    ) {
        self.init_single_page(pfn, zone, nid, hooks);
        if zone == self.config().zone_device() {
            self.set_flag(pfn, self.config().behaviour().page_flags.reserved);
        } else {
            self.page_mut(pfn).set_u32_at(offsets::PAGE_TYPE, PageType::word(PageType::OFFLINE));
        }
        if self.pageblock_aligned(pfn) {
            self.set_pageblock_migratetype(pfn, mt);
            hooks.cond_resched(pfn);
        }
    }

    /// Sets flag bit `bit` with a plain read-modify-write (`__SetPageReserved`,
    /// `__SetPageHead`, ...).
    ///
    /// `page->flags` is one 64-bit word: a `bit` of 64 or more names no flag, and setting it
    /// changes nothing (as [`StructPage::test_flag`] reads such a bit as clear).
    ///
    /// # Panics
    ///
    /// If `pfn` is outside the memmap.
    #[inline]
    pub fn set_flag(&mut self, pfn: u64, bit: u32) {
        let mut page = self.page_mut(pfn);
        let Some(mask) = 1u64.checked_shl(bit) else { return };
        page.set_u64_at(offsets::FLAGS, page.u64_at(offsets::FLAGS) | mask);
    }

    /// Clears flag bit `bit` with a plain read-modify-write (`__ClearPageReserved`, ...).
    ///
    /// A `bit` of 64 or more names no flag of the 64-bit `page->flags`: nothing changes.
    ///
    /// # Panics
    ///
    /// If `pfn` is outside the memmap.
    #[inline]
    pub fn clear_flag(&mut self, pfn: u64, bit: u32) {
        let mut page = self.page_mut(pfn);
        let Some(mask) = 1u64.checked_shl(bit) else { return };
        page.set_u64_at(offsets::FLAGS, page.u64_at(offsets::FLAGS) & !mask);
    }

    /// `page_folio(page)`: the PFN of the folio `pfn` belongs to
    /// ([`KernelConfig::compound_head_of`](crate::KernelConfig::compound_head_of)); `None` if a
    /// tail's head is not a struct page of this memmap.
    ///
    /// # Panics
    ///
    /// If `pfn` is outside the memmap.
    #[must_use]
    pub(crate) fn page_folio(&self, pfn: u64) -> Option<u64> {
        let word = self.read(pfn).compound_head();
        match self.config().compound_head_of(word, self.vaddr(pfn), P::SIZE) {
            None => Some(pfn),
            Some(head) => self.vaddr_to_pfn(head),
        }
    }

    /// `prep_compound_tail(head, tail_idx)` of a compound page of `order`:
    /// `mapping = TAIL_MAPPING`, `set_compound_head(p, head)` (`WRITE_ONCE` of
    /// [`KernelConfig::compound_head_word`](crate::KernelConfig::compound_head_word)), `set_page_private(p, 0)`.
    ///
    /// # Panics
    ///
    /// If the tail (`head_pfn + tail_idx`, which may lie past the end of the `u64` PFN
    /// space) is outside the memmap.
    #[inline]
    pub fn prep_compound_tail(&mut self, head_pfn: u64, tail_idx: u64, order: u32) {
        let pfn = head_pfn.checked_add(tail_idx).filter(|&p| self.contains(p));
        let Some(pfn) = pfn else {
            panic!("tail {tail_idx:#x} of head {head_pfn:#x} outside memmap");
        };
        let word = self.config().compound_head_word(self.vaddr(head_pfn), order, P::SIZE);
        let tail_mapping = self.config().tail_mapping();
        let mut p = self.page_mut(pfn);
        p.set_u64_at(offsets::MAPPING, tail_mapping);
        p.set_u64_once_at(offsets::COMPOUND_HEAD, word);
        p.set_u64_at(offsets::PRIVATE, 0);
    }

    /// `prep_compound_head(page, order)` on the folio at `head_pfn`, in the folio layout of the
    /// modelled release ([`Behaviour::folio_layout`](crate::Behaviour::folio_layout)): the
    /// order and page count, the mapcounts and pincount, and from 6.15 the `_mm_ids` and (order
    /// > 1) `_deferred_list`.
    ///
    /// Returns `false` when `folio_set_order()` would `WARN_ON_ONCE` (order 0, or the head
    /// lacks `PG_head`): then, as in the kernel, the order and page count are not set but the
    /// rest still runs.
    ///
    /// # Panics
    ///
    /// If the head, page\[1\] or (for order > 1 with the 6.15+ layout) page\[2\] is outside the
    /// memmap; nothing is written then.
    pub fn prep_compound_head(&mut self, head_pfn: u64, order: u32) -> bool {
        let cfg = *self.config();
        let layout = cfg.behaviour().folio_layout;
        let deferred_list = layout == FolioLayout::MmIds && order > 1;
        let pages = if deferred_list { 3 } else { 2 };
        assert!(self.contains_range(head_pfn, pages), "folio pages [{head_pfn:#x}, +{pages}) outside memmap");
        let p1 = head_pfn + 1;
        let nr_pages_u32 = 1u32.checked_shl(order).unwrap_or(0);
        if layout == FolioLayout::FolioDtor {
            let mut page1 = self.page_mut(p1);
            page1.set_u8_at(DTOR_DTOR, folio::v6_1::COMPOUND_PAGE_DTOR);
            // Orders of 256 and more do not exist (MAX_VMEMMAP_SHIFT); the byte keeps the low
            // bits as the kernel's `unsigned char` would.
            page1.set_u8_at(DTOR_ORDER, order as u8);
            page1.set_u32_at(DTOR_NR_PAGES, nr_pages_u32);
            page1.set_u32_once_at(DTOR_TOTAL_MAPCOUNT, MINUS_ONE);
            page1.set_u32_once_at(DTOR_PINCOUNT, 0);
            return true;
        }
        let head_is_large = self.read(head_pfn).test_flag(cfg.behaviour().page_flags.head);
        let ok = order != 0 && head_is_large;
        let list = self.vaddr(head_pfn + 2).wrapping_add(DEFERRED_LIST as u64);
        let mut page1 = self.page_mut(p1);
        // folio_set_order()
        if ok {
            let flags_1 = page1.u64_at(offsets::FLAGS);
            page1.set_u64_at(offsets::FLAGS, (flags_1 & !0xff) | u64::from(order));
            match layout {
                FolioLayout::MmIds if cfg.nr_pages_in_large_folio => {
                    page1.set_u32_at(NR_PAGES, nr_pages_u32);
                }
                FolioLayout::MmIds | FolioLayout::FolioDtor => {}
                FolioLayout::NrPages => page1.set_u32_at(OLD_FOLIO_NR_PAGES, nr_pages_u32),
            }
        }
        match layout {
            FolioLayout::MmIds => {
                // atomic_set(&folio->_large_mapcount, -1)
                page1.set_u32_once_at(LARGE_MAPCOUNT, MINUS_ONE);
                if cfg.page_mapcount {
                    // atomic_set(&folio->_nr_pages_mapped, 0)
                    page1.set_u32_once_at(NR_PAGES_MAPPED, 0);
                }
                if cfg.mm_id {
                    page1.set_u64_at(MM_IDS, 0);
                    page1.set_u32_at(MM_ID_MAPCOUNT, MINUS_ONE);
                    page1.set_u32_at(MM_ID_MAPCOUNT + 4, MINUS_ONE);
                }
                // IS_ENABLED(CONFIG_64BIT) || order > 1
                page1.set_u32_once_at(PINCOUNT, 0);
                page1.set_u32_once_at(ENTIRE_MAPCOUNT, MINUS_ONE);
            }
            FolioLayout::FolioDtor => {}
            FolioLayout::NrPages => {
                page1.set_u32_once_at(OLD_LARGE_MAPCOUNT, MINUS_ONE);
                page1.set_u32_once_at(OLD_ENTIRE_MAPCOUNT, MINUS_ONE);
                page1.set_u32_once_at(OLD_NR_PAGES_MAPPED, 0);
                page1.set_u32_once_at(OLD_PINCOUNT, 0);
            }
        }
        if deferred_list {
            // INIT_LIST_HEAD(&folio->_deferred_list)
            let mut page2 = self.page_mut(head_pfn + 2);
            page2.set_u64_once_at(DEFERRED_LIST, list);
            page2.set_u64_at(DEFERRED_LIST + 8, list);
        }
        ok
    }

    /// `folio_ref_freeze(folio, count)` / `page_ref_freeze`: `cmpxchg(_refcount, count, 0)`.
    /// Returns whether the count was `count` (and is now 0).
    ///
    /// # Panics
    ///
    /// If `pfn` is outside the memmap.
    pub fn page_ref_freeze(&mut self, pfn: u64, count: i32) -> bool {
        let page = self.read(pfn);
        if page.refcount() != count {
            return false;
        }
        self.page_mut(pfn).set_u32_once_at(offsets::REFCOUNT, 0);
        true
    }

    /// `pageblock_aligned(pfn)`.
    #[inline(always)]
    #[must_use]
    pub fn pageblock_aligned(&self, pfn: u64) -> bool {
        pfn & (self.config().pageblock_nr_pages() - 1) == 0
    }

    /// `set_pageblock_migratetype(page, MIGRATE_MOVABLE)` followed by `cond_resched()`: what
    /// every initializer does at a pageblock-aligned PFN.
    #[inline]
    pub(crate) fn pageblock_init<H: InitHooks>(&mut self, pfn: u64, hooks: &mut H) {
        self.set_pageblock_migratetype(pfn, MigrateType::Movable);
        hooks.cond_resched(pfn);
    }

    /// `pageblock_migratetype_init_range(pfn, nr_pages, MIGRATE_MOVABLE)` (7.2's ZONE_DEVICE
    /// init): `MIGRATE_MOVABLE` for every pageblock that starts in `[pageblock_align(pfn),
    /// pfn + nr_pages)` (`pageblock_align` rounds up), with `cond_resched()` after each
    /// section-aligned one.
    ///
    /// # Panics
    ///
    /// If a pageblock that starts in the range is outside the memmap, or as
    /// [`Memmap::set_pageblock_migratetype`].
    pub(crate) fn pageblock_migratetype_init_range<H: InitHooks>(
        &mut self,
        pfn: u64,
        nr_pages: u64,
        hooks: &mut H,
    ) {
        let bs = self.config().pageblock_nr_pages();
        let pps = self.config().pages_per_section();
        let end = pfn.saturating_add(nr_pages);
        let mut p = pfn.div_ceil(bs).saturating_mul(bs);
        while p < end {
            self.set_pageblock_migratetype(p, MigrateType::Movable);
            if p % pps == 0 {
                hooks.cond_resched(p);
            }
            p += bs;
        }
    }

    /// [`Memmap::pageblock_init`] on `n` consecutive pageblocks from the pageblock-aligned
    /// `pfn`, in ascending order, with one bounds check for the run (but on classic SPARSEMEM).
    ///
    /// # Panics
    ///
    /// If a pageblock of the run is outside the memmap, or as [`Memmap::set_pageblock_migratetype`].
    pub(crate) fn pageblock_init_run<H: InitHooks>(&mut self, pfn: u64, n: u64, hooks: &mut H) {
        let bs = self.config().pageblock_nr_pages();
        self.pageblock_movable_run(pfn, n);
        for k in 0..n {
            hooks.cond_resched(pfn + k * bs);
        }
    }
}

/// The folio fields inside page\[1\] and page\[2\]: the [`folio`] offsets less their page's
/// start (valid for any `struct page` size: `struct folio` pads each of its pages to it).
const LARGE_MAPCOUNT: usize = folio::LARGE_MAPCOUNT - 64;
const NR_PAGES_MAPPED: usize = folio::NR_PAGES_MAPPED - 64;
const ENTIRE_MAPCOUNT: usize = folio::ENTIRE_MAPCOUNT - 64;
const PINCOUNT: usize = folio::PINCOUNT - 64;
const MM_ID_MAPCOUNT: usize = folio::MM_ID_MAPCOUNT - 64;
const MM_IDS: usize = folio::MM_IDS - 64;
const NR_PAGES: usize = folio::NR_PAGES - 64;
const DEFERRED_LIST: usize = folio::DEFERRED_LIST - 128;
/// The same for the layout before 6.15 ([`FolioLayout::NrPages`]).
const OLD_LARGE_MAPCOUNT: usize = folio::v6_12::LARGE_MAPCOUNT - 64;
const OLD_ENTIRE_MAPCOUNT: usize = folio::v6_12::ENTIRE_MAPCOUNT - 64;
const OLD_NR_PAGES_MAPPED: usize = folio::v6_12::NR_PAGES_MAPPED - 64;
const OLD_PINCOUNT: usize = folio::v6_12::PINCOUNT - 64;
const OLD_FOLIO_NR_PAGES: usize = folio::v6_12::FOLIO_NR_PAGES - 64;
/// The same for 6.1's layout ([`FolioLayout::FolioDtor`]).
const DTOR_DTOR: usize = folio::v6_1::FOLIO_DTOR - 64;
const DTOR_ORDER: usize = folio::v6_1::FOLIO_ORDER - 64;
const DTOR_TOTAL_MAPCOUNT: usize = folio::v6_1::TOTAL_MAPCOUNT - 64;
const DTOR_PINCOUNT: usize = folio::v6_1::PINCOUNT - 64;
const DTOR_NR_PAGES: usize = folio::v6_1::FOLIO_NR_PAGES - 64;
