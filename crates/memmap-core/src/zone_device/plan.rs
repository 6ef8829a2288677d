//! Validation of a `memmap_init_zone_device` call: everything is checked before anything is
//! written.

use super::{DevPagemap, MAX_VMEMMAP_SHIFT, ZoneDeviceRange, compound_nr_pages};
use crate::InitError;
use crate::memmap::Memmap;
use crate::model::page::StructPage;

/// The validated work of one `memmap_init_zone_device` call.
#[derive(Debug, Clone, Copy)]
pub(super) struct Plan {
    pub(super) zone: u32,
    pub(super) nid: u32,
    /// First PFN initialized (after the altmap part).
    pub(super) start: u64,
    pub(super) end: u64,
    /// `1 << vmemmap_shift`.
    pub(super) pfns_per_compound: u64,
    /// Struct pages written per compound page outside early sections ([`compound_nr_pages`]).
    pub(super) compound_pages: u64,
    /// `vmemmap_shift`.
    pub(super) order: u32,
    /// Compound heads below `early_end` and at or above `early_from` are in early sections
    /// whose memmap is not deduplicated and, from 7.2 on, get every struct page written (none
    /// before 7.2: `(0, u64::MAX)`; see [`ZoneDeviceRange::is_early`]).
    pub(super) early_end: u64,
    /// See `early_end`.
    pub(super) early_from: u64,
    /// `PAGES_PER_SECTION`.
    pub(super) pages_per_section: u64,
    /// Pageblock migrate types are set in a pass over the range after the struct pages
    /// (7.2: `pageblock_migratetype_init_range()`), not per initialized page.
    pub(super) pageblock_range: bool,
}

impl Plan {
    /// `compound_nr_pages(pfn, altmap, pgmap)` for the compound page whose head is `head`.
    pub(super) fn compound_pages_at(&self, head: u64) -> u64 {
        if head < self.early_end || head >= self.early_from {
            self.pfns_per_compound
        } else {
            self.compound_pages
        }
    }

    /// Struct pages written in all.
    pub(super) fn pages_written(&self) -> u64 {
        let span = self.end - self.start;
        if self.pfns_per_compound == 1 {
            return span;
        }
        // Heads in early sections: [start, early_end) and [early_from, end), rounded to whole
        // compound pages.
        let ppc = self.pfns_per_compound;
        let heads = span / ppc;
        let below = |pfn: u64| pfn.clamp(self.start, self.end).saturating_sub(self.start).div_ceil(ppc);
        let early_heads = (below(self.early_end) + heads - below(self.early_from)).min(heads);
        early_heads * self.pfns_per_compound + (heads - early_heads) * self.compound_pages
    }

    /// Whether `pfn` is the first of a memory section (`IS_ALIGNED(pfn, PAGES_PER_SECTION)`).
    pub(super) fn section_aligned(&self, pfn: u64) -> bool {
        pfn % self.pages_per_section == 0
    }
}

/// Validates a call: `Ok(None)` for zero pages, a plan otherwise (possibly empty: an altmap
/// that covers the whole range).
pub(super) fn plan<P: StructPage>(
    memmap: &Memmap<'_, P>,
    range: &ZoneDeviceRange,
    pgmap: &DevPagemap,
) -> Result<Option<Plan>, InitError> {
    let cfg = memmap.config();
    if range.zone != cfg.zone_device() {
        return Err(InitError::NotZoneDevice { zone: range.zone, zone_device: cfg.zone_device() });
    }
    if u64::from(range.nid) > memmap.layout().nodes_mask() {
        return Err(InitError::NodeOutOfRange { nid: range.nid, max: memmap.layout().nodes_mask() as u32 });
    }
    if pgmap.vmemmap_shift > MAX_VMEMMAP_SHIFT {
        return Err(InitError::VmemmapShiftTooLarge { shift: pgmap.vmemmap_shift, max: MAX_VMEMMAP_SHIFT });
    }
    let Some(end) = range.start_pfn.checked_add(range.nr_pages) else {
        return Err(InitError::RangeOverflow { start_pfn: range.start_pfn, nr_pages: range.nr_pages });
    };
    if range.nr_pages == 0 {
        return Ok(None);
    }
    if !memmap.contains_range(range.start_pfn, range.nr_pages) {
        return Err(InitError::OutOfRange {
            start_pfn: range.start_pfn,
            nr_pages: range.nr_pages,
            memmap_start: memmap.base_pfn(),
            memmap_end: memmap.end_pfn(),
        });
    }
    let mut start = range.start_pfn;
    if let Some(a) = pgmap.altmap {
        let altmap_end = a.reserve.checked_add(a.free).and_then(|o| a.base_pfn.checked_add(o));
        if a.base_pfn < range.start_pfn || altmap_end.is_none_or(|e| e > end) {
            return Err(InitError::AltmapOutsideRange {
                base_pfn: a.base_pfn,
                reserve: a.reserve,
                free: a.free,
                start_pfn: range.start_pfn,
                end_pfn: end,
            });
        }
        // The memmap_init_range() call before this one initialized the altmap part.
        start = altmap_end.expect("checked above");
    }
    let ppc = pgmap.vmemmap_nr();
    if start % ppc != 0 || (end - start) % ppc != 0 {
        return Err(InitError::Misaligned {
            start_pfn: start,
            nr_pages: end - start,
            pfns_per_compound: ppc,
        });
    }
    let compound_pages = compound_nr_pages(cfg, P::SIZE, pgmap);
    // `compound_nr_pages()` returns every page for a head in an early section from 7.2 on;
    // before, early sections got the deduplicated count too (and kept stale struct pages).
    let pps = cfg.pages_per_section();
    let (early_end, early_from) = if cfg.behaviour().zone_device_early_sections && compound_pages < ppc {
        (range.boot_memory_end_pfn.div_ceil(pps).saturating_mul(pps), range.boot_memory_above_pfn / pps * pps)
    } else {
        (0, u64::MAX)
    };
    Ok(Some(Plan {
        zone: range.zone,
        nid: range.nid,
        start,
        end,
        pfns_per_compound: ppc,
        compound_pages,
        order: pgmap.vmemmap_shift,
        early_end,
        early_from,
        pages_per_section: cfg.pages_per_section(),
        pageblock_range: cfg.behaviour().zone_device_pageblock_range,
    }))
}
