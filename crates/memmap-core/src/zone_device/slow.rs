//! The slow path: the kernel's `__init_zone_device_page()` and `memmap_init_compound()`, store
//! for store.

use super::plan::Plan;
use super::{DevPagemap, MAX_VMEMMAP_SHIFT};
use crate::FolioLayout;
use crate::InitError;
use crate::hooks::InitHooks;
use crate::memmap::Memmap;
use crate::model::page::{StructPage, offsets};

impl<P: StructPage> Memmap<'_, P> {
    /// `__init_zone_device_page(page, pfn, zone_idx, nid, pgmap)`: `__init_single_page`,
    /// `PG_reserved`, `folio->pgmap`, `zone_device_data = NULL`, the refcount of the memory
    /// type ([`MemoryType::head_refcount`](super::MemoryType::head_refcount)), and before 7.2
    /// the pageblock's migrate type (with `cond_resched()`) at a pageblock-aligned PFN.
    ///
    /// # Panics
    ///
    /// If `pfn` is outside the memmap.
    pub(crate) fn init_zone_device_page<H: InitHooks>(
        &mut self,
        pfn: u64,
        zone: u32,
        nid: u32,
        pgmap: &DevPagemap,
        hooks: &mut H,
    ) {
        self.init_single_page(pfn, zone, nid, hooks);
        // "Mark page reserved as it will need to wait for onlining phase for it to be fully
        // initialized."
        self.set_flag(pfn, self.config().behaviour().page_flags.reserved);
        // page_folio(page)->pgmap = pgmap: the folio of a fresh page is the page itself (its
        // word 8 is `&page->lru`, which never has bit 0 set).
        let folio = self.page_folio(pfn).unwrap_or(pfn);
        self.page_mut(folio).set_u64_at(offsets::PGMAP, pgmap.addr);
        // page->zone_device_data = NULL
        self.page_mut(pfn).set_u64_at(offsets::ZONE_DEVICE_DATA, 0);
        // Before 7.2 the migrate type was set here, for initialized pageblock-aligned pages only;
        // 7.2 sets it for the whole range afterwards (`pageblock_migratetype_init_range`).
        if !self.config().behaviour().zone_device_pageblock_range && self.pageblock_aligned(pfn) {
            self.pageblock_init(pfn, hooks);
        }
        if pgmap.memory_type.head_refcount(&self.config().behaviour()) == 0 {
            self.set_page_count(pfn, 0, hooks);
        }
    }

    /// `memmap_init_compound(head, head_pfn, zone_idx, nid, pgmap, nr_pages)`, v6.18+ order;
    /// `nr_pages` counts the head too (`compound_nr_pages()`).
    ///
    /// # Errors
    ///
    /// Checked before anything is written: [`InitError::VmemmapShiftTooLarge`] for a
    /// `vmemmap_shift` above [`MAX_VMEMMAP_SHIFT`], [`InitError::RangeOverflow`] when
    /// `head_pfn + nr_pages` overflows `u64`, [`InitError::OutOfRange`] when the pages written
    /// are not all in the memmap.
    pub fn memmap_init_compound<H: InitHooks>(
        &mut self,
        head_pfn: u64,
        zone: u32,
        nid: u32,
        pgmap: &DevPagemap,
        nr_pages: u64,
        hooks: &mut H,
    ) -> Result<(), InitError> {
        let order = pgmap.vmemmap_shift;
        if order > MAX_VMEMMAP_SHIFT {
            return Err(InitError::VmemmapShiftTooLarge { shift: order, max: MAX_VMEMMAP_SHIFT });
        }
        let end = head_pfn
            .checked_add(nr_pages)
            .ok_or(InitError::RangeOverflow { start_pfn: head_pfn, nr_pages })?;
        let folio_layout = self.config().behaviour().folio_layout;
        let folio_pages = if folio_layout == FolioLayout::MmIds && order > 1 { 3 } else { 2 };
        let touched = nr_pages.max(folio_pages);
        if !self.contains_range(head_pfn, touched) {
            return Err(InitError::OutOfRange {
                start_pfn: head_pfn,
                nr_pages: touched,
                memmap_start: self.base_pfn(),
                memmap_end: self.end_pfn(),
            });
        }
        self.compound_pages(head_pfn, end, zone, nid, pgmap, hooks);
        Ok(())
    }

    /// The body of [`Memmap::memmap_init_compound`] for the compound page `[head_pfn, end)`,
    /// whose pages (with page\[1\] and page\[2\]) the caller checked are in the memmap.
    fn compound_pages<H: InitHooks>(
        &mut self,
        head_pfn: u64,
        end: u64,
        zone: u32,
        nid: u32,
        pgmap: &DevPagemap,
        hooks: &mut H,
    ) {
        self.set_flag(head_pfn, self.config().behaviour().page_flags.head);
        for pfn in head_pfn + 1..end {
            self.init_zone_device_page(pfn, zone, nid, pgmap, hooks);
            self.prep_compound_tail(head_pfn, pfn - head_pfn, pgmap.vmemmap_shift);
            self.set_page_count(pfn, 0, hooks);
        }
        self.prep_compound_head(head_pfn, pgmap.vmemmap_shift);
    }
}

/// The kernel's loop.
pub(super) fn run_slow<P: StructPage, H: InitHooks>(
    m: &mut Memmap<'_, P>,
    plan: &Plan,
    pgmap: &DevPagemap,
    hooks: &mut H,
) {
    let mut pfn = plan.start;
    while pfn < plan.end {
        m.init_zone_device_page(pfn, plan.zone, plan.nid, pgmap, hooks);
        if plan.pageblock_range && plan.section_aligned(pfn) {
            hooks.cond_resched(pfn);
        }
        if plan.pfns_per_compound != 1 {
            // `plan::plan` checked that the range holds whole compound pages (of at least two
            // pages, three from order 2) inside the memmap.
            let end = pfn + plan.compound_pages_at(pfn);
            m.compound_pages(pfn, end, plan.zone, plan.nid, pgmap, hooks);
        }
        pfn += plan.pfns_per_compound;
    }
    if plan.pageblock_range {
        m.pageblock_migratetype_init_range(plan.start, plan.end - plan.start, hooks);
    }
}
