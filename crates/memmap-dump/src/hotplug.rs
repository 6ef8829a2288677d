//! `dump hotplug`: a hot-added range onlined memory block by memory block
//! ([`memmap_core::online_pages`]) into `ZONE_NORMAL` or `ZONE_MOVABLE`, in memory.

use memmap_core::{
    HotplugTarget, HotplugZone, KernelConfig, MigrateType, OnlineOptions, OwnedMemmap, Page64, Page72,
    RecordingHooks, Strategy,
};

use crate::error::DumpError;
use crate::meta::{DumpMeta, Placement, Written};
use crate::model::{Dump, DumpLayout, invalid, map_error, struct_page_bytes, traced};

/// Options of `dump hotplug`.
#[derive(Debug, Clone)]
pub struct HotplugDump {
    /// Kernel config.
    pub config: KernelConfig,
    /// 72-byte `WANT_PAGE_VIRTUAL` layout instead of 64.
    pub layout72: bool,
    /// First pfn of the hot-added range.
    pub start_pfn: u64,
    /// Pages of the range.
    pub nr_pages: u64,
    /// The zone it is onlined into.
    pub target: HotplugTarget,
    /// Node id.
    pub nid: u32,
    /// Pages per memory block, one `online_pages()` each in ascending order (0: the whole range).
    pub memory_block_pages: u64,
    /// Strategy.
    pub strategy: Strategy,
    /// Enable `CONFIG_DEBUG_PAGE_REF` and the `page_ref_set` tracepoint.
    pub page_ref_trace: bool,
    /// Free blocks taken off the free list after onlining (an allocation's
    /// `del_page_from_free_list()`), by first pfn: what a guest allocated from before it was
    /// read. Their struct pages are listed in `allocated_pfn_ranges` (not modelled beyond the
    /// list removal).
    pub taken: Vec<u64>,
}

impl HotplugDump {
    /// Onlines the range on a fresh memmap and returns the dump.
    ///
    /// # Errors
    ///
    /// [`DumpError::Input`] carrying the typed error of [`memmap_core::online_pages`] or
    /// [`memmap_core::take_free_block`], [`DumpError::Map`] when the memmap cannot be mapped.
    pub fn run(&self) -> Result<Dump, DumpError> {
        if self.layout72 { hotplug_as::<Page72>(self) } else { hotplug_as::<Page64>(self) }
    }

    /// `sizeof(struct page)` of the chosen layout.
    #[must_use]
    pub fn struct_page_size(&self) -> u64 {
        struct_page_bytes(self.layout72)
    }
}

fn hotplug_as<P: DumpLayout>(opts: &HotplugDump) -> Result<Dump, DumpError> {
    let cfg = traced(opts.config, opts.page_ref_trace);
    let layout = cfg.flags_layout().map_err(invalid)?;
    let n = usize::try_from(opts.nr_pages).map_err(invalid)?;
    let mut zone = HotplugZone::for_target(&cfg, opts.nid, opts.target).map_err(invalid)?;
    let mut owned = OwnedMemmap::<P>::new(cfg, opts.start_pfn, opts.nr_pages)
        .map_err(map_error(format!("map a memmap of {} struct pages", opts.nr_pages)))?;
    let mut hooks = RecordingHooks::new(opts.page_ref_trace);
    let block = if opts.memory_block_pages == 0 { opts.nr_pages.max(1) } else { opts.memory_block_pages };
    let online = OnlineOptions::new(opts.strategy);
    let t = std::time::Instant::now();
    let (reports, page_addr_base, movable, free_blocks) = {
        let mut memmap = owned.memmap();
        let mut reports = Vec::new();
        let mut pfn = opts.start_pfn;
        let end = opts.start_pfn.saturating_add(opts.nr_pages);
        while pfn < end {
            let nr = block.min(end - pfn);
            reports.push(
                memmap_core::online_pages(&mut memmap, &mut zone, pfn, nr, &online, &mut hooks)
                    .map_err(invalid)?,
            );
            pfn += nr;
        }
        for &p in &opts.taken {
            if !memmap.contains(p) {
                return Err(invalid(format!("taken block {p:#x} is outside the range")));
            }
            memmap_core::take_free_block(&mut memmap, &mut zone, p).map_err(invalid)?;
        }
        let movable: Vec<u64> =
            memmap.pageblocks_with(opts.start_pfn, opts.nr_pages, MigrateType::Movable).collect();
        let mut free_blocks = Vec::new();
        zone.for_each_free_block(&memmap, cfg.max_page_order, MigrateType::Movable, |p| free_blocks.push(p));
        (reports, memmap.vaddr(opts.start_pfn), movable, free_blocks)
    };
    let took = t.elapsed();
    let first = reports.first();
    let used = first.map_or(opts.strategy, |r| r.used);
    let reason = first.map_or_else(|| "empty range".to_string(), |r| r.reason.to_string());
    let mut detail = serde_json::Map::new();
    detail.insert("kernel_version".into(), cfg.version.to_string().into());
    detail.insert("hotplug_zone".into(), opts.target.name().into());
    detail.insert("hotplug_zone_index".into(), zone.zone().into());
    detail.insert("memory_block_pages".into(), block.into());
    detail.insert("online_pages_calls".into(), (reports.len() as u64).into());
    detail.insert("chunks".into(), reports.iter().map(|r| r.chunks).sum::<u64>().into());
    detail.insert("drains".into(), reports.iter().map(|r| r.drains).sum::<u64>().into());
    detail.insert("managed_pages".into(), zone.managed_pages().into());
    detail.insert("online_ms".into(), serde_json::json!(took.as_secs_f64() * 1e3));
    detail.insert("max_order_free_blocks".into(), serde_json::json!(free_blocks));
    detail.insert("taken_blocks".into(), serde_json::json!(opts.taken));
    // The modelled addresses of the zone's free-list heads the struct pages point to.
    let mut lists = serde_json::Map::new();
    for order in 0..=cfg.max_page_order {
        for (mt, name) in [(MigrateType::Movable, "MOVABLE"), (MigrateType::Isolate, "ISOLATE")] {
            lists.insert(
                format!("{:#x}", zone.free_list_addr(order, mt)),
                format!("zone[{}].free_area[{order}].free_list[{name}]", zone.zone()).into(),
            );
        }
    }
    detail.insert("free_list_heads".into(), lists.into());
    let at = Placement {
        start_pfn: opts.start_pfn,
        nr_pages: opts.nr_pages,
        page_addr_base,
        zone: zone.zone(),
        nid: opts.nid,
    };
    let how = Written { used, requested: opts.strategy, reason };
    let meta = DumpMeta {
        movable_pageblock_pfns: movable,
        resched_pfns: hooks.resched_pfns.len() as u64,
        page_ref_events: hooks.page_ref_events.len() as u64,
        detail,
        ..DumpMeta::of("hotplug", &cfg, &layout, P::SIZE, at, how)
    };
    Ok(Dump::from_owned::<P>(meta, owned, n * P::SIZE))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dump(strategy: Strategy, taken: Vec<u64>) -> Dump {
        HotplugDump {
            config: KernelConfig::X86_64,
            layout72: false,
            start_pfn: 0x100000,
            nr_pages: 0x10000,
            target: HotplugTarget::Normal,
            nid: 0,
            memory_block_pages: 0x8000,
            strategy,
            page_ref_trace: false,
            taken,
        }
        .run()
        .unwrap()
    }

    #[test]
    fn strategies_give_the_same_dump_and_taken_blocks_leave_the_list() {
        let slow = dump(Strategy::Slow, vec![]);
        let fast = dump(Strategy::Streaming, vec![]);
        assert_eq!(slow.memmap(), fast.memmap());
        assert_eq!(slow.meta.movable_pageblock_pfns, fast.meta.movable_pageblock_pfns);
        assert_eq!(slow.meta.kind, "hotplug");
        let blocks = slow.meta.detail["max_order_free_blocks"].as_array().unwrap().len();
        assert_eq!(blocks, 64);
        let taken = dump(Strategy::Streaming, vec![0x100000]);
        let left = taken.meta.detail["max_order_free_blocks"].as_array().unwrap();
        assert_eq!(left.len(), 63);
        assert_eq!(left[0].as_u64(), Some(0x100400));
        assert!(
            HotplugDump { taken: vec![0x100001], ..hotplug_opts() }.run().is_err(),
            "a pfn where no free block starts is refused"
        );
    }

    fn hotplug_opts() -> HotplugDump {
        HotplugDump {
            config: KernelConfig::X86_64,
            layout72: false,
            start_pfn: 0x100000,
            nr_pages: 0x8000,
            target: HotplugTarget::Movable,
            nid: 0,
            memory_block_pages: 0,
            strategy: Strategy::Auto,
            page_ref_trace: false,
            taken: vec![],
        }
    }
}
