//! The per-folio kernel operations of the boot path (`mm/mm_init.c`, `mm/hugetlb.c`) on a
//! memmap-core [`Memmap`], and the tail-init strategies (`docs/hugetlb-init.md`).

use memmap_core::offsets;
use memmap_core::{
    FillOptions, InitHooks, ListSelf, Memmap, MigrateType, PageType, Strategy, StrategyReason, StructPage,
};

use crate::hstate::Hstate;

/// `enum hugetlb_page_flags` bit `HPG_vmemmap_optimized`, kept in the head's `private` word
/// (`folio->private`). \[recalled\] order of ≈6.15: `HPG_restore_reserve` 0, `HPG_migratable` 1,
/// `HPG_temporary` 2, `HPG_freed` 3, `HPG_vmemmap_optimized` 4, `HPG_raw_hwp_unreliable` 5,
/// `HPG_cma` 6.
pub(crate) const HPG_VMEMMAP_OPTIMIZED: u32 = 4;

/// `HPG_freed`: the folio is on the hstate's free list (`folio_set_hugetlb_freed`).
pub(crate) const HPG_FREED: u32 = 3;

/// Byte offsets of the hugetlb folio fields inside the page that holds them (page\[3\] from
/// 6.15, page\[2\] before), for 64- and 72-byte layouts alike.
pub(crate) mod folio3 {
    /// `_hugetlb_subpool` (+16: folio byte 208 from 6.15, 144 before, with 64-byte pages).
    pub(crate) const HUGETLB_SUBPOOL: usize = 16;
    /// `_hugetlb_cgroup` (the page's `mapping`), only with `CONFIG_CGROUP_HUGETLB`.
    pub(crate) const HUGETLB_CGROUP: usize = 24;
    /// `_hugetlb_cgroup_rsvd` (the page's `index`), only with `CONFIG_CGROUP_HUGETLB`.
    pub(crate) const HUGETLB_CGROUP_RSVD: usize = 32;

    const _: () = {
        use memmap_core::folio;
        assert!(folio::HUGETLB_SUBPOOL == 3 * 64 + HUGETLB_SUBPOOL);
        assert!(folio::HUGETLB_CGROUP == 3 * 64 + HUGETLB_CGROUP);
        assert!(folio::HUGETLB_CGROUP_RSVD == 3 * 64 + HUGETLB_CGROUP_RSVD);
        assert!(folio::v6_12::HUGETLB_SUBPOOL == 2 * 64 + HUGETLB_SUBPOOL);
        assert!(folio::v6_12::HUGETLB_CGROUP == 2 * 64 + HUGETLB_CGROUP);
        assert!(folio::v6_12::HUGETLB_CGROUP_RSVD == 2 * 64 + HUGETLB_CGROUP_RSVD);
    };
}

/// The head of a boot-time gigantic page as `memmap_init_reserved_pages()` leaves it:
/// `__init_single_page()`, MOVABLE pageblock, `PG_reserved`, refcount 1.
///
/// # Panics
///
/// If `pfn` is outside the memmap.
pub(crate) fn reserve_bootmem_head<P: StructPage, H: InitHooks>(
    m: &mut Memmap<'_, P>,
    pfn: u64,
    zone: u32,
    nid: u32,
    hooks: &mut H,
) {
    m.init_single_page(pfn, zone, nid, hooks);
    if m.pageblock_aligned(pfn) {
        m.set_pageblock_migratetype(pfn, MigrateType::Movable);
    }
    m.set_flag(pfn, m.config().behaviour().page_flags.reserved);
}

/// `hugetlb_folio_init_tail_vmemmap(folio, start, end)`: initializes tails
/// `[head + start, head + end)` with the head's zone and node, by `opts`' strategy as
/// memmap-core resolves it.
///
/// * Slow: per page `__init_single_page()`, `prep_compound_tail()`, `set_page_count(page, 0)`.
/// * Template: the first tail through the slow path, every other tail a copy of it with
///   `lru.prev`, the section bits and `virtual` refreshed (see `docs/hugetlb-init.md`).
/// * Streaming: the same records streamed, drained before returning.
///
/// `start >= end` is a no-op.
///
/// # Panics
///
/// If a tail is outside the memmap or `end` exceeds the folio.
pub(crate) fn hugetlb_folio_init_tail_vmemmap<P: StructPage, H: InitHooks>(
    m: &mut Memmap<'_, P>,
    head_pfn: u64,
    order: u32,
    start: u64,
    end: u64,
    opts: &FillOptions,
    hooks: &mut H,
) -> TailInit {
    assert!(order < 64 && end <= 1 << order, "tail range beyond the folio");
    let pages = end.saturating_sub(start);
    let (used, reason) = opts.resolve(m.config(), hooks, pages.saturating_mul(P::SIZE as u64));
    let mut out = TailInit { used, reason, pages, drains: 0 };
    if pages == 0 {
        return out;
    }
    let first = head_pfn.checked_add(start).filter(|&f| m.contains_range(f, pages));
    assert!(first.is_some(), "tails [{head_pfn:#x} + {start}, +{pages}) outside the memmap");
    let head = m.read(head_pfn);
    let folio =
        Folio { head_pfn, order, zone: m.layout().zone(head.flags()), nid: m.layout().node(head.flags()) };
    out.drains = folio.init_tails(m, start, end, used, hooks);
    out
}

/// A folio whose tails are being initialized, with the zone and node every tail copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Folio {
    /// The head's PFN.
    pub(crate) head_pfn: u64,
    /// The compound order.
    pub(crate) order: u32,
    /// The zone index.
    pub(crate) zone: u32,
    /// The node id.
    pub(crate) nid: u32,
}

impl Folio {
    /// Tails `[head + start, head + end)` with a resolved strategy (`used`): the body of
    /// [`hugetlb_folio_init_tail_vmemmap`], also run on one piece of a folio by the parallel
    /// tail init (whose view of the memmap need not hold the head). Returns the drains.
    pub(crate) fn init_tails<P: StructPage, H: InitHooks>(
        &self,
        m: &mut Memmap<'_, P>,
        start: u64,
        end: u64,
        used: Strategy,
        hooks: &mut H,
    ) -> u64 {
        let tails = (self.head_pfn + start, self.head_pfn + end);
        m.fill_run(tails, ListSelf::Prev, used, |m, pfn| self.init_tail_slow(m, pfn, hooks))
            .unwrap_or_else(|e| unreachable!("the caller checked that the tails are in the memmap: {e}"))
            .drains
    }

    /// One tail, the kernel's way.
    #[inline]
    fn init_tail_slow<P: StructPage, H: InitHooks>(&self, m: &mut Memmap<'_, P>, pfn: u64, hooks: &mut H) {
        m.init_single_page(pfn, self.zone, self.nid, hooks);
        m.prep_compound_tail(self.head_pfn, pfn - self.head_pfn, self.order);
        m.set_page_count(pfn, 0, hooks);
        let cfg = m.config();
        if !cfg.behaviour().gigantic_tail_mapping && self.order > cfg.max_page_order {
            // 6.1's `__prep_compound_gigantic_page()` sets no TAIL_MAPPING: `mapping` stays
            // the 0 of `__init_single_page()` (page[1]'s is overwritten by
            // `prep_compound_head()` either way).
            m.page_mut(pfn).set_u64_at(offsets::MAPPING, 0);
        }
    }
}

/// `hugetlb_folio_init_vmemmap(folio, h, nr_pages)`: `__folio_clear_reserved()`,
/// `__folio_set_head()`, `folio_ref_freeze(folio, 1)`, tails `1..nr_pages` through
/// [`hugetlb_folio_init_tail_vmemmap`], then `prep_compound_head()`.
///
/// # Panics
///
/// If the folio is outside the memmap, or the head's refcount is not 1 (`VM_BUG_ON(!ret)` of
/// the freeze: the head did not come from the reserved-region path).
pub(crate) fn hugetlb_folio_init_vmemmap<P: StructPage, H: InitHooks>(
    m: &mut Memmap<'_, P>,
    head_pfn: u64,
    hstate: Hstate,
    nr_pages: u64,
    opts: &FillOptions,
    hooks: &mut H,
) -> TailInit {
    let bits = m.config().behaviour().page_flags;
    m.clear_flag(head_pfn, bits.reserved);
    m.set_flag(head_pfn, bits.head);
    assert!(m.page_ref_freeze(head_pfn, 1), "folio_ref_freeze(head {head_pfn:#x}, 1) failed");
    let tails = hugetlb_folio_init_tail_vmemmap(m, head_pfn, hstate.order(), 1, nr_pages, opts, hooks);
    m.prep_compound_head(head_pfn, hstate.order());
    tails
}

/// `init_new_hugetlb_folio(h, folio)`: the hugetlb page type, an empty `lru`, and NULL subpool
/// and (with `CONFIG_CGROUP_HUGETLB`) cgroup pointers, in the page
/// [`FolioLayout::hugetlb_fields_page`](memmap_core::FolioLayout::hugetlb_fields_page) names.
/// 6.1 ([`FolioLayout::FolioDtor`](memmap_core::FolioLayout::FolioDtor)) sets `_folio_dtor` to
/// `HUGETLB_PAGE_DTOR` in page\[1\] and NULLs the `private` words of pages 1 to 3 instead.
///
/// # Panics
///
/// If page\[3\] of the folio is outside the memmap.
pub(crate) fn init_new_hugetlb_folio<P: StructPage>(m: &mut Memmap<'_, P>, head_pfn: u64) {
    let layout = m.config().behaviour().folio_layout;
    assert!(m.contains_range(head_pfn, 4), "folio head pages [{head_pfn:#x}, +4) outside the memmap");
    let page3 = head_pfn + layout.hugetlb_fields_page();
    let head_vaddr = m.vaddr(head_pfn);
    let cgroup = m.config().cgroup_hugetlb;
    if layout == memmap_core::FolioLayout::FolioDtor {
        let list = head_vaddr.wrapping_add(offsets::LRU_NEXT as u64);
        let mut head = m.page_mut(head_pfn);
        head.set_u64_once_at(offsets::LRU_NEXT, list);
        head.set_u64_once_at(offsets::LRU_PREV, list);
        m.page_mut(head_pfn + 1).set_u8_at(DTOR_OFFSET, memmap_core::folio::v6_1::HUGETLB_PAGE_DTOR);
        let last = if cgroup { 3 } else { 1 };
        for i in 1..=last {
            m.page_mut(head_pfn + i).set_u64_at(offsets::PRIVATE, 0);
        }
        return;
    }
    let mut head = m.page_mut(head_pfn);
    // __folio_set_hugetlb(): page->page_type = PGTY_hugetlb << 24
    head.set_u32_at(offsets::PAGE_TYPE, PageType::word(PageType::HUGETLB));
    // INIT_LIST_HEAD(&folio->lru): WRITE_ONCE(next, list); WRITE_ONCE(prev, list)
    let list = head_vaddr.wrapping_add(offsets::LRU_NEXT as u64);
    head.set_u64_once_at(offsets::LRU_NEXT, list);
    head.set_u64_once_at(offsets::LRU_PREV, list);
    let mut p3 = m.page_mut(page3);
    // hugetlb_set_folio_subpool(folio, NULL)
    p3.set_u64_at(folio3::HUGETLB_SUBPOOL, 0);
    if cgroup {
        p3.set_u64_at(folio3::HUGETLB_CGROUP, 0);
        p3.set_u64_at(folio3::HUGETLB_CGROUP_RSVD, 0);
    }
}

/// `_folio_dtor` in page\[1\] (6.1).
const DTOR_OFFSET: usize = memmap_core::folio::v6_1::FOLIO_DTOR - 64;

/// Whether `head` and `page1` are the first two struct pages of a hugetlb folio of `order`:
/// `PG_head`, and the hugetlb page type with the order in page\[1\]'s flags, or in 6.1
/// (no page type) `_folio_dtor == HUGETLB_PAGE_DTOR` with `_folio_order`.
#[must_use]
pub(crate) fn is_hugetlb_head<P: StructPage>(
    cfg: &memmap_core::KernelConfig,
    head: &P,
    page1: &P,
    order: u32,
) -> bool {
    let b = cfg.behaviour();
    if !head.test_flag(b.page_flags.head) {
        return false;
    }
    if b.folio_layout == memmap_core::FolioLayout::FolioDtor {
        let mut bytes = [0u8; 128];
        page1.to_bytes(&mut bytes[..P::SIZE]);
        return bytes[DTOR_OFFSET] == memmap_core::folio::v6_1::HUGETLB_PAGE_DTOR
            && u32::from(bytes[DTOR_OFFSET + 1]) == order;
    }
    head.page_type() == PageType::word(PageType::HUGETLB) && page1.flags() & 0xff == u64::from(order)
}

/// `hugetlb_bootmem_init_migratetype(folio, h)`: `MIGRATE_MOVABLE` on every pageblock of the
/// folio. A folio smaller than a pageblock (which the kernel never passes) sets its pageblock
/// MOVABLE, the type the buddy allocator hands such folios out of.
///
/// # Panics
///
/// If the folio is outside the memmap or its head is not aligned to the smaller of a pageblock
/// and the folio (`WARN_ON_ONCE(!pageblock_aligned(folio_pfn(folio)))`, fatal here); both are
/// checked before anything is written.
pub(crate) fn hugetlb_bootmem_init_migratetype<P: StructPage>(
    m: &mut Memmap<'_, P>,
    head_pfn: u64,
    hstate: Hstate,
) {
    let step = m.config().pageblock_nr_pages();
    let nr = hstate.nr_pages();
    assert!(head_pfn % step.min(nr) == 0, "head {head_pfn:#x} not pageblock-aligned");
    assert!(m.contains_range(head_pfn, nr), "folio at {head_pfn:#x} outside the memmap");
    let mut i = 0;
    while i < nr {
        m.set_pageblock_migratetype(head_pfn + i, MigrateType::Movable);
        i += step;
    }
}

/// `enqueue_hugetlb_folio(h, folio)` for a folio on no list yet: added first on the list at
/// `list_head`, before `first`, and `HPG_freed` set. Returns the new first folio (`head_pfn`).
///
/// # Panics
///
/// If `head_pfn` or `first` is outside the memmap.
pub(crate) fn enqueue_hugetlb_folio<P: StructPage>(
    m: &mut Memmap<'_, P>,
    head_pfn: u64,
    list_head: u64,
    first: Option<u64>,
) -> u64 {
    assert!(m.contains(head_pfn), "pfn {head_pfn:#x} outside memmap");
    let lru = |m: &Memmap<'_, P>, pfn: u64| m.vaddr(pfn).wrapping_add(offsets::LRU_NEXT as u64);
    let next = first.map_or(list_head, |f| lru(m, f));
    let new = lru(m, head_pfn);
    if let Some(f) = first {
        assert!(m.contains(f), "pfn {f:#x} outside memmap");
        m.page_mut(f).set_u64_once_at(offsets::LRU_PREV, new);
    }
    let mut head = m.page_mut(head_pfn);
    head.set_u64_once_at(offsets::LRU_NEXT, next);
    head.set_u64_once_at(offsets::LRU_PREV, list_head);
    head.set_u64_at(offsets::PRIVATE, head.u64_at(offsets::PRIVATE) | (1 << HPG_FREED));
    head_pfn
}

/// `folio_test_hugetlb_vmemmap_optimized(folio)` on a head page.
#[must_use]
pub(crate) fn folio_test_hugetlb_vmemmap_optimized<P: StructPage>(head: &P) -> bool {
    head.u64_at(memmap_core::offsets::PRIVATE) & (1 << HPG_VMEMMAP_OPTIMIZED) != 0
}

/// Sets or clears `HPG_vmemmap_optimized` in the head's `private`
/// (`folio_set/clear_hugetlb_vmemmap_optimized`).
///
/// # Panics
///
/// If `head_pfn` is outside the memmap.
pub(crate) fn folio_assign_hugetlb_vmemmap_optimized<P: StructPage>(
    m: &mut Memmap<'_, P>,
    head_pfn: u64,
    on: bool,
) {
    assert!(m.contains(head_pfn), "pfn {head_pfn:#x} outside memmap");
    let mut p = m.page_mut(head_pfn);
    let v = p.u64_at(offsets::PRIVATE);
    let bit = 1u64 << HPG_VMEMMAP_OPTIMIZED;
    p.set_u64_at(offsets::PRIVATE, if on { v | bit } else { v & !bit });
}

/// Whether the struct page is the head of an initialized hugetlb folio of `hstate`
/// (`PG_head`, hugetlb page type, page\[1\] order; 6.1: the hugetlb `_folio_dtor`) with
/// `HPG_vmemmap_optimized` set, in a kernel configured as `cfg`.
#[must_use]
pub(crate) fn is_optimized_hugetlb_head<P: StructPage>(
    cfg: &memmap_core::KernelConfig,
    head: &P,
    page1: &P,
    hstate: Hstate,
) -> bool {
    is_hugetlb_head(cfg, head, page1, hstate.order()) && folio_test_hugetlb_vmemmap_optimized(head)
}

/// How one folio's fallback tails were initialized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct TailInit {
    /// Strategy used (never [`Strategy::Auto`]).
    pub used: Strategy,
    /// Why that strategy ran.
    pub reason: StrategyReason,
    /// Tail struct pages written.
    pub pages: u64,
    /// `stream_hal::drain()` calls.
    pub drains: u64,
}
