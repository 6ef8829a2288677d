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
    /// Struct pages written per compound page ([`compound_nr_pages`]).
    pub(super) compound_pages: u64,
    /// `vmemmap_shift`.
    pub(super) order: u32,
}

impl Plan {
    /// Struct pages written in all.
    pub(super) fn pages_written(&self) -> u64 {
        let span = self.end - self.start;
        if self.pfns_per_compound == 1 { span } else { span / self.pfns_per_compound * self.compound_pages }
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
        return Err(InitError::RangeOverflow);
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
    Ok(Some(Plan {
        zone: range.zone,
        nid: range.nid,
        start,
        end,
        pfns_per_compound: ppc,
        compound_pages: compound_nr_pages(cfg, P::SIZE, pgmap),
        order: pgmap.vmemmap_shift,
    }))
}
