//! The struct pages of the device memory that holds the device's own memmap (the altmap part):
//! `move_pfn_range_to_zone()` → `memmap_init_range(..., MEMINIT_HOTPLUG, altmap,
//! MIGRATE_MOVABLE)`, which `memremap_pages()` runs before `memmap_init_zone_device()`.

use super::plan;
use super::{DevPagemap, InitOptions, InitReport, ZoneDeviceRange};
use crate::InitError;
use crate::hooks::InitHooks;
use crate::memmap::Memmap;
use crate::memmap::engine::with_store;
use crate::model::flags::MigrateType;
use crate::model::page::StructPage;

/// `move_pfn_range_to_zone(zone, start_pfn, nr_pages, altmap, MIGRATE_MOVABLE, false)` for a
/// ZONE_DEVICE range, as `pagemap_range()` calls it before [`memmap_init_zone_device`]: the
/// altmap's struct pages (skipping its `reserve` PFNs at the base) become reserved ZONE_DEVICE
/// pages through `__init_single_page` and `__SetPageReserved`, each pageblock-aligned one with
/// `MIGRATE_MOVABLE` and `cond_resched()`. Without an altmap it does nothing, as the kernel.
/// Only the memmap part of the kernel function is modelled.
///
/// # Errors
///
/// The errors of [`memmap_init_zone_device`] for the same range and pagemap (nothing written).
///
/// [`memmap_init_zone_device`]: super::memmap_init_zone_device
pub fn move_pfn_range_to_zone<P: StructPage, H: InitHooks>(
    memmap: &mut Memmap<'_, P>,
    range: &ZoneDeviceRange,
    pgmap: &DevPagemap,
    opts: &InitOptions,
    hooks: &mut H,
) -> Result<InitReport, InitError> {
    let planned = plan::plan(memmap, range, pgmap)?;
    let part = match (planned, pgmap.altmap) {
        (Some(p), Some(a)) => {
            let start = if range.start_pfn == a.base_pfn { a.base_pfn + a.reserve } else { range.start_pfn };
            // `plan` checked that the altmap part ends inside the range (it is where the
            // zone device init starts).
            Some((p, start, p.start)).filter(|&(_, start, end)| start < end)
        }
        _ => None,
    };
    let Some((plan, start, end)) = part else {
        let resolved = opts.fill.resolve(memmap.config(), hooks, 0);
        return Ok(InitReport::new(opts, (range.start_pfn, range.start_pfn), 0, resolved, 0));
    };
    let n = end - start;
    let (used, reason) = opts.fill.resolve(memmap.config(), hooks, n.saturating_mul(P::SIZE as u64));
    let zone_nid = (plan.zone, plan.nid);
    let drains = with_store!(used, S => {
        // The first page through the slow path, the rest copied from it.
        memmap.init_hotplug_page(start, zone_nid, MigrateType::Movable, hooks);
        memmap.copy_hotplug_run::<S, H>((start, end), MigrateType::Movable, hooks)
    }, slow => {
        for pfn in start..end {
            memmap.init_hotplug_page(pfn, zone_nid, MigrateType::Movable, hooks);
        }
        0
    });
    Ok(InitReport::new(opts, (start, end), n, (used, reason), drains))
}
