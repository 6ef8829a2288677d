//! `dump node`: the boot memmap of one node laid out as a real machine's, booted with a chosen
//! init mode, order and strategy, run to completion, and the pages the machine had allocated
//! taken off the free lists.

use memmap_core::{
    BootOptions, BootOrder, BootmemType, FillOptions, InitMode, KernelConfig, MigrateType, Node, NodeLayout,
    NodeParts, OwnedMemmap, Page64, Page72, PfnRange, ReservedRange, Strategy, ZoneSpan,
};

use crate::error::DumpError;
use crate::meta::{DumpMeta, Placement, Written};
use crate::model::{Dump, DumpLayout, invalid, map_error, struct_page_bytes};

/// Options of `dump node`.
#[derive(Debug, Clone)]
pub struct NodeDump {
    /// Kernel config.
    pub config: KernelConfig,
    /// 72-byte `WANT_PAGE_VIRTUAL` layout instead of 64.
    pub layout72: bool,
    /// Node id.
    pub nid: u32,
    /// The node's zones, sorted by pfn.
    pub zones: Vec<ZoneSpan>,
    /// `memblock.memory` of the node, sorted.
    pub memory: Vec<PfnRange>,
    /// `memblock.reserved` of the node, sorted, inside the zones.
    pub reserved: Vec<ReservedRange>,
    /// Init mode (deferred and on-demand init are run to completion before the dump).
    pub mode: InitMode,
    /// Boot order.
    pub order: BootOrder,
    /// Strategy.
    pub strategy: Strategy,
    /// Pages taken off the free lists after boot, in order; one that is not free is an error.
    pub taken: Vec<u64>,
    /// `get_page_bootmem(info, pfn_to_page(pfn), type)` calls after boot, as `(pfn, info, type)`,
    /// made where the release registers boot memory info
    /// ([`Behaviour::bootmem_info_registered`](memmap_core::Behaviour::bootmem_info_registered));
    /// a pfn outside the node or not reserved is an error either way.
    pub bootmem: Vec<(u64, u64, BootmemType)>,
    /// The node holds the machine's last memory: `memmap_init()` runs its final
    /// `init_unavailable_range()` from the node's end to the end of that section, with the node's
    /// highest zone, and the dump covers those struct pages too.
    pub section_tail: bool,
}

/// The counters of one zone after the dump's boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ZoneCounts {
    /// Zone index.
    pub zone: u32,
    /// `zone_start_pfn`.
    pub start_pfn: u64,
    /// `spanned_pages`.
    pub spanned: u64,
    /// `present_pages`: memory inside the span.
    pub present: u64,
    /// `managed_pages`: pages given to the buddy allocator at boot.
    pub managed: u64,
    /// Pages in the free lists after the taken pages left them.
    pub free: u64,
}

impl NodeDump {
    /// Boots the node and returns the dump of its whole span.
    ///
    /// # Errors
    ///
    /// [`DumpError::Input`] for a layout the node refuses or a taken page that is not free,
    /// [`DumpError::Map`] when the memmap cannot be mapped.
    pub fn run(&self) -> Result<Dump, DumpError> {
        if self.layout72 { node_as::<Page72>(self) } else { node_as::<Page64>(self) }
    }

    /// `sizeof(struct page)` of the chosen layout.
    #[must_use]
    pub fn struct_page_size(&self) -> u64 {
        struct_page_bytes(self.layout72)
    }

    /// The layout.
    #[must_use]
    pub fn layout(&self) -> NodeLayout<'_> {
        NodeLayout { nid: self.nid, zones: &self.zones, memory: &self.memory, reserved: &self.reserved }
    }
}

fn node_as<P: DumpLayout>(opts: &NodeDump) -> Result<Dump, DumpError> {
    let cfg = opts.config;
    let flags = cfg.flags_layout().map_err(invalid)?;
    let layout = opts.layout();
    let span = layout.span();
    let pps = cfg.pages_per_section();
    let end =
        if opts.section_tail { span.end.div_ceil(pps).saturating_mul(pps).max(span.end) } else { span.end };
    let n = usize::try_from(end - span.start).map_err(invalid)?;
    let mut owned = OwnedMemmap::<P>::new(cfg, span.start, end - span.start)
        .map_err(map_error(format!("map a memmap of {} struct pages", end - span.start)))?;
    let mut states = vec![0u8; Node::<P>::states_needed(&cfg, span)];
    let boot = BootOptions {
        order: opts.order,
        fill: FillOptions::new(opts.strategy),
        ..BootOptions::new(opts.mode)
    };
    let t = std::time::Instant::now();
    let (page_addr_base, used, reason, counts, pageblocks, taken_ok, expanded) = {
        let memmap = owned.memmap();
        let parts =
            NodeParts { memmap, layout, states: &mut states, arena: None, hooks: memmap_core::NoHooks };
        let (node, _) = Node::boot(parts, &boot).map_err(|e| invalid(format!("node boot: {e:?}")))?;
        node.deferred_init_memmap_serial();
        let expanded = if opts.mode == InitMode::OnDemand { node.expand_all() } else { 0 };
        let mut taken_ok = 0u64;
        for &pfn in &opts.taken {
            if !node.take_page_off_buddy(pfn) {
                return Err(invalid(format!("taken page {pfn:#x} is not free in the model")));
            }
            taken_ok += 1;
        }
        let counts: Vec<ZoneCounts> = opts
            .zones
            .iter()
            .map(|z| ZoneCounts {
                zone: z.zone,
                start_pfn: z.span.start,
                spanned: z.span.len(),
                present: present_pages(&opts.memory, z.span),
                managed: node.zone_managed_pages(z.zone),
                free: node.zone_free_pages(z.zone),
            })
            .collect();
        let (used, reason) = node.strategy();
        let (mut memmap, _) = node.into_memmap();
        let reserved = 1u64 << cfg.behaviour().page_flags.reserved;
        // The section's tail: `init_unavailable_range()` (`__init_single_page()`, `PG_reserved`).
        let last_zone = opts.zones.iter().map(|z| z.zone).max().unwrap_or(0);
        for pfn in span.end..end {
            memmap.init_single_page(pfn, last_zone, opts.nid, &mut memmap_core::NoHooks);
            memmap.set_flag(pfn, cfg.behaviour().page_flags.reserved);
        }
        // From 7.3 the kernel registers no boot memory info: the frames stay reserved pages.
        let registered = cfg.behaviour().bootmem_info_registered;
        for &(pfn, info, ty) in &opts.bootmem {
            if !memmap.contains(pfn) || memmap.read(pfn).flags() & reserved == 0 {
                return Err(invalid(format!("bootmem page {pfn:#x} is not a reserved page of the node")));
            }
            if registered {
                memmap.get_page_bootmem(pfn, info, ty);
            }
        }
        let movable: Vec<u64> =
            memmap.pageblocks_with(span.start, span.len(), MigrateType::Movable).collect();
        let pb = cfg.pageblock_nr_pages();
        let first = span.start & !(pb - 1);
        let types: Vec<Option<u8>> = (first..span.end)
            .step_by(pb as usize)
            .map(|p| memmap.pageblock_migratetype(p.max(span.start)).map(MigrateType::value))
            .collect();
        (memmap.vaddr(span.start), used, reason.to_string(), counts, (movable, types), taken_ok, expanded)
    };
    let took = t.elapsed();
    let mut detail = serde_json::Map::new();
    detail.insert("kernel_version".into(), cfg.version.to_string().into());
    detail.insert("mode".into(), format!("{:?}", opts.mode).to_lowercase().into());
    detail.insert("boot_order".into(), format!("{:?}", opts.order).to_lowercase().into());
    detail.insert("zones".into(), serde_json::to_value(&counts).map_err(invalid)?);
    detail.insert("taken_pages".into(), taken_ok.into());
    detail.insert("blocks_expanded".into(), expanded.into());
    detail.insert("bootmem_pages".into(), opts.bootmem.len().into());
    detail.insert("boot_ms".into(), serde_json::json!(took.as_secs_f64() * 1e3));
    let at = Placement {
        start_pfn: span.start,
        nr_pages: end - span.start,
        page_addr_base,
        zone: 0,
        nid: opts.nid,
    };
    let how = Written { used, requested: opts.strategy, reason };
    let (movable, types) = pageblocks;
    detail.insert("pageblock_migratetypes".into(), serde_json::json!(types));
    let meta = DumpMeta {
        movable_pageblock_pfns: movable,
        detail,
        ..DumpMeta::of("node", &cfg, &flags, P::SIZE, at, how)
    };
    Ok(Dump::from_owned::<P>(meta, owned, n * P::SIZE))
}

/// Memory pages of `memory` inside `span`.
fn present_pages(memory: &[PfnRange], span: PfnRange) -> u64 {
    memory.iter().map(|m| m.end.min(span.end).saturating_sub(m.start.max(span.start))).sum()
}

/// `layout.json`'s format.
pub const LAYOUT_FORMAT: u32 = 1;

/// The most bytes a layout file may hold (a guest's layout is tens of kilobytes).
pub const MAX_LAYOUT_BYTES: u64 = 16 << 20;

/// The limits a layout file is held to before it is parsed.
pub const LAYOUT_JSON_LIMITS: crate::JsonLimits =
    crate::JsonLimits { max_bytes: MAX_LAYOUT_BYTES, max_values: 4 << 20, max_depth: 8 };

/// A machine's boot memory layout, node by node, in pfn ranges `[start, end)`: what
/// `kernel-oracle` writes and `memmap-bench dump node --node-layout` reads.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LayoutFile {
    /// [`LAYOUT_FORMAT`].
    pub format: u32,
    /// Where it came from (free text: the kernel and configuration).
    pub source: String,
    /// The nodes.
    pub nodes: Vec<NodeLayoutJson>,
}

/// One node of a [`LayoutFile`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NodeLayoutJson {
    /// Node id.
    pub nid: u32,
    /// Zones `(zone index, start, end)`, ascending.
    pub zones: Vec<(u32, u64, u64)>,
    /// `memblock.memory`.
    pub memory: Vec<(u64, u64)>,
    /// `memblock.reserved`.
    pub reserved: Vec<(u64, u64)>,
    /// Runs of pages allocated after boot (taken off the free lists after the boot).
    pub taken: Vec<(u64, u64)>,
    /// Runs of reserved frames holding a section's memmap `(first, frames, section)`
    /// (`get_page_bootmem(section, page, SECTION_INFO)`).
    pub bootmem: Vec<(u64, u64, u64)>,
    /// The node holds the machine's last memory ([`NodeDump::section_tail`]).
    #[serde(default)]
    pub section_tail: bool,
}

impl LayoutFile {
    /// Parses `json` (`path` names it in errors) after checking its size and shape.
    ///
    /// # Errors
    ///
    /// [`DumpError`] for oversized, malformed or another format's JSON.
    pub fn parse(json: &[u8], path: &std::path::Path) -> Result<LayoutFile, DumpError> {
        crate::check_json(json, &LAYOUT_JSON_LIMITS, path)?;
        let f: LayoutFile =
            serde_json::from_slice(json).map_err(|e| invalid(format!("{}: {e}", path.display())))?;
        if f.format != LAYOUT_FORMAT {
            return Err(invalid(format!(
                "{}: format {} (expected {LAYOUT_FORMAT})",
                path.display(),
                f.format
            )));
        }
        Ok(f)
    }

    /// The pfns node `nid`'s zones span, if the file has the node (check the memory its dump
    /// needs, [`NodeDump::struct_page_size`] bytes a page, before [`LayoutFile::node_dump`]).
    #[must_use]
    pub fn node_span(&self, nid: u32) -> Option<PfnRange> {
        let n = self.nodes.iter().find(|n| n.nid == nid)?;
        Some(PfnRange::new(n.zones.first()?.1, n.zones.last()?.2))
    }

    /// The dump of node `nid` with `mode`, `order` and `strategy` on `config`.
    ///
    /// # Errors
    ///
    /// [`DumpError::Input`] when the file has no such node, a run of taken pages or vmemmap
    /// frames is reversed or longer than the node's span.
    pub fn node_dump(
        &self,
        nid: u32,
        config: KernelConfig,
        (mode, order, strategy): (InitMode, BootOrder, Strategy),
    ) -> Result<NodeDump, DumpError> {
        let n = self
            .nodes
            .iter()
            .find(|n| n.nid == nid)
            .ok_or_else(|| invalid(format!("no node {nid} in the layout")))?;
        let span = n.zones.first().map_or(0, |z| z.1)..n.zones.last().map_or(0, |z| z.2);
        let inside = |s: u64, e: u64| s <= e && span.start <= s && e <= span.end;
        if !n.taken.iter().all(|&(s, e)| inside(s, e))
            || !n.bootmem.iter().all(|&(f, c, _)| f.checked_add(c).is_some_and(|e| inside(f, e)))
        {
            return Err(invalid(format!("node {nid}: taken pages or vmemmap frames outside its zones")));
        }
        let len = span.end - span.start;
        let taken: u64 = n.taken.iter().map(|&(s, e)| e - s).sum();
        let frames: u64 = n.bootmem.iter().map(|&(_, c, _)| c).sum();
        if taken > len || frames > len {
            return Err(invalid(format!("node {nid}: more taken pages or vmemmap frames than the node has")));
        }
        Ok(NodeDump {
            config,
            layout72: false,
            nid,
            zones: n.zones.iter().map(|&(z, s, e)| ZoneSpan::new(z, s, e)).collect(),
            memory: n.memory.iter().map(|&(s, e)| PfnRange::new(s, e)).collect(),
            reserved: n.reserved.iter().map(|&(s, e)| ReservedRange::new(s, e)).collect(),
            mode,
            order,
            strategy,
            taken: n.taken.iter().flat_map(|&(s, e)| s..e).collect(),
            bootmem: n
                .bootmem
                .iter()
                .flat_map(|&(f, c, s)| (f..f + c).map(move |f| (f, s, BootmemType::Section)))
                .collect(),
            section_tail: n.section_tail,
        })
    }
}

#[cfg(all(test, not(miri)))]
mod tests {
    use super::*;

    /// The machine's last node ending inside a section: with `section_tail` the dump runs to the
    /// section's end, those struct pages reserved, in the node's highest zone, nothing else moved.
    #[test]
    fn a_section_tail_is_initialized_as_unavailable() {
        let cfg = KernelConfig::X86_64;
        let (start, end) = (0x10_0000, 0x14_2000);
        let spec = |section_tail| NodeDump {
            config: cfg,
            layout72: false,
            nid: 0,
            zones: vec![ZoneSpan::new(2, start, end)],
            memory: vec![PfnRange::new(start, end)],
            reserved: Vec::new(),
            mode: InitMode::Deferred,
            order: BootOrder::Kernel,
            strategy: Strategy::Slow,
            taken: Vec::new(),
            bootmem: Vec::new(),
            section_tail,
        };
        let (plain, tail) = (spec(false).run().unwrap(), spec(true).run().unwrap());
        assert_eq!(plain.meta.nr_pages, end - start);
        assert_eq!(tail.meta.nr_pages, 0x14_8000 - start);
        let span = ((end - start) * 64) as usize;
        assert_eq!(plain.memmap(), &tail.memmap()[..span]);
        let flags = cfg.flags_layout().unwrap();
        let reserved = 1u64 << cfg.behaviour().page_flags.reserved;
        for page in tail.memmap()[span..].chunks_exact(64) {
            let f = u64::from_le_bytes(page[..8].try_into().unwrap());
            assert_eq!((flags.zone(f), flags.node(f), f & reserved), (2, 0, reserved));
            assert_eq!(u32::from_le_bytes(page[52..56].try_into().unwrap()), 1);
        }
    }
}
