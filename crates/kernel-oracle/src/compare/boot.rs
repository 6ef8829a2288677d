//! The model side of the boot configurations: each guest node's layout booted by the model on
//! every init path and every struct page compared by its kernel class
//! ([`crate::facts::zones::Class`]); what each class compares is tabled in
//! `docs/kernel-oracle.md` ("Boot configurations").

use std::path::Path;

use anyhow::{Context, Result, anyhow};
use memmap_core::{
    BootOrder, BootmemType, FlagsLayout, InitMode, KernelConfig, MigrateType, Strategy, ZoneSpan,
};
use memmap_dump::{Dump, NodeDump, ZoneCounts};

use crate::facts::zones::Class;
use crate::facts::{Facts, NO_SECTION, STRUCT_PAGE};

/// The offset of `lru` in a struct page.
const LRU: u64 = memmap_core::offsets::LRU_NEXT as u64;

pub use super::boot_input::{KernelCounts, KernelPages, KernelZone, NodeInput, inputs};
pub use super::boot_report::{
    ClassCount, CmpClass, NodeResult, PageblockCount, PathOutcome, ZoneResult, equal, render,
};

/// The migrate types an allocation gives a MOVABLE pageblock it steals.
const STEAL_TYPES: [u8; 3] = [0, 2, 3];

/// The init paths run on each layout, the reference first: the kernel's (deferred, slow path).
pub const PATHS: [(InitMode, BootOrder, Strategy); 6] = [
    (InitMode::Deferred, BootOrder::Kernel, Strategy::Slow),
    (InitMode::Eager, BootOrder::Kernel, Strategy::Slow),
    (InitMode::Eager, BootOrder::Fused, Strategy::Streaming),
    (InitMode::Deferred, BootOrder::Kernel, Strategy::Streaming),
    (InitMode::Deferred, BootOrder::Fused, Strategy::Streaming),
    (InitMode::OnDemand, BootOrder::Fused, Strategy::Streaming),
];

fn path_name((mode, order, strategy): (InitMode, BootOrder, Strategy)) -> String {
    format!("{mode:?}/{order:?}/{}", strategy.name()).to_lowercase()
}

/// The nodes' layouts as `memmap-bench dump node --node-layout` reads them.
#[must_use]
pub fn layout_file(facts: &Facts, nodes: &[NodeInput]) -> memmap_dump::LayoutFile {
    memmap_dump::LayoutFile {
        format: memmap_dump::node::LAYOUT_FORMAT,
        source: format!("kernel-oracle: {} {} ({})", facts.kernel.id, facts.config, facts.kernel.release),
        nodes: nodes.iter().map(node_layout).collect(),
    }
}

/// The layout of node `n`: its ranges, and its taken pages and vmemmap frames as runs.
#[must_use]
pub fn node_layout(n: &NodeInput) -> memmap_dump::NodeLayoutJson {
    let mut taken: Vec<(u64, u64)> = Vec::new();
    for &p in &n.taken {
        match taken.last_mut() {
            Some(last) if last.1 == p => last.1 += 1,
            _ => taken.push((p, p + 1)),
        }
    }
    let mut bootmem: Vec<(u64, u64, u64)> = Vec::new();
    for &(f, s) in &n.frames {
        match bootmem.last_mut() {
            Some(last) if last.0 + last.1 == f && last.2 == s => last.1 += 1,
            _ => bootmem.push((f, 1, s)),
        }
    }
    memmap_dump::NodeLayoutJson {
        nid: n.nid,
        zones: n.zones.iter().map(|z| (z.zone, z.start_pfn, z.start_pfn + z.nr_pages)).collect(),
        memory: n.memory.iter().map(|m| (m.start, m.end)).collect(),
        reserved: n.reserved.iter().map(|r| (r.range.start, r.range.end)).collect(),
        taken,
        bootmem,
    }
}

/// Compares every boot node of the run in `dir` with the model.
///
/// # Errors
///
/// As [`inputs`] and [`compare_nodes`].
pub fn compare(dir: &Path, facts: &Facts) -> Result<Vec<NodeResult>> {
    let (cfg, nodes) = inputs(dir, facts)?;
    compare_nodes(&cfg, facts.vmemmap_size, &nodes)
}

/// Boots the model on each node's layout on every path of [`PATHS`] and compares it with the
/// kernel's zones.
///
/// # Errors
///
/// The model refuses the reference path's layout.
pub fn compare_nodes(cfg: &KernelConfig, vmemmap_size: u64, nodes: &[NodeInput]) -> Result<Vec<NodeResult>> {
    nodes.iter().map(|n| compare_node(cfg, vmemmap_size, n)).collect()
}

/// Where the dump `b` of another path first differs from the reference `a`, and how many struct
/// pages differ only as the kernels' paths differ too: a merge's poison in `lru` in the reference
/// (deferred init frees a partly reserved block page by page) and self-pointers in `b` (eager
/// boot frees it in aligned blocks).
fn path_difference(a: &Dump, b: &Dump, poison: (u64, u64)) -> (Option<String>, u64) {
    let mut poison_only = 0;
    let (ma, mb) = (a.memmap(), b.memmap());
    if ma.len() != mb.len() {
        return (Some("sizes differ".into()), 0);
    }
    for (i, (pa, pb)) in ma.chunks_exact(64).zip(mb.chunks_exact(64)).enumerate() {
        if pa == pb {
            continue;
        }
        let pfn = a.meta.start_pfn + i as u64;
        let own = a.meta.page_addr_base + i as u64 * STRUCT_PAGE + LRU;
        let others_equal = [0, 3, 4, 5, 6, 7].iter().all(|&w| word(pa, w) == word(pb, w));
        if others_equal && (word(pa, 1), word(pa, 2)) == poison && (word(pb, 1), word(pb, 2)) == (own, own) {
            poison_only += 1;
            continue;
        }
        let w = (0..8).find(|&w| word(pa, w) != word(pb, w)).unwrap_or(0);
        return (
            Some(format!("pfn {pfn:#x} word {w}: {:#x} against {:#x}", word(pa, w), word(pb, w))),
            poison_only,
        );
    }
    for key in ["pageblock_migratetypes", "zones"] {
        if a.meta.detail.get(key) != b.meta.detail.get(key) {
            return (Some(format!("{key} differ")), poison_only);
        }
    }
    (None, poison_only)
}

fn compare_node(cfg: &KernelConfig, vmemmap_size: u64, n: &NodeInput) -> Result<NodeResult> {
    let nid = n.nid;
    let mut spec = NodeDump {
        config: *cfg,
        layout72: false,
        nid,
        zones: n.zones.iter().map(|z| ZoneSpan::new(z.zone, z.start_pfn, z.start_pfn + z.nr_pages)).collect(),
        memory: n.memory.clone(),
        reserved: n.reserved.clone(),
        mode: PATHS[0].0,
        order: PATHS[0].1,
        strategy: PATHS[0].2,
        taken: n.taken.clone(),
        bootmem: n.frames.iter().map(|&(f, section)| (f, section, BootmemType::Section)).collect(),
    };
    let reference = spec.run().map_err(|e| anyhow!("model of node {nid}: {e}"))?;
    let mut paths = Vec::new();
    for &p in &PATHS[1..] {
        (spec.mode, spec.order, spec.strategy) = p;
        let same = match spec.run() {
            Err(e) => PathOutcome::Refused(e.to_string()),
            Ok(other) => match path_difference(&reference, &other, cfg.list_poison()) {
                (None, poison_only) => PathOutcome::Same { poison_only },
                (Some(d), _) => PathOutcome::Differs(d),
            },
        };
        paths.push((path_name(p), same));
    }
    let model_zones: Vec<ZoneCounts> = serde_json::from_value(
        reference.meta.detail.get("zones").cloned().context("the model dump has no zone counts")?,
    )?;
    let model_pbs: Vec<Option<u8>> = serde_json::from_value(
        reference.meta.detail.get("pageblock_migratetypes").cloned().context("no pageblocks")?,
    )?;
    let flags = cfg.flags_layout().map_err(|e| anyhow!("{e:?}"))?;
    let ctx = Ctx { cfg, vmemmap_size, flags, model: &reference, node: n };
    let mut results = Vec::new();
    for z in &n.zones {
        let m = model_zones
            .iter()
            .find(|m| m.zone == z.zone)
            .with_context(|| format!("node {nid} zone {}: no model counts", z.zone))?;
        let k = z.counts;
        let mut res = ctx.zone(z);
        res.pageblocks = ctx.pageblocks(z, &model_pbs);
        res.counts = vec![
            ("spanned", k.spanned, m.spanned),
            ("present", k.present, m.present),
            ("managed", k.managed, m.managed),
            ("free", k.free, m.free),
        ];
        results.push(res);
    }
    Ok(NodeResult {
        nid,
        zones: results,
        paths,
        reference: path_name(PATHS[0]),
        taken: spec.taken.len() as u64,
        bootmem: spec.bootmem.len() as u64,
    })
}

/// The comparison class of the kernel's struct page `k` of `pfn` in node `node`.
#[must_use]
pub fn class_of(cfg: &KernelConfig, node: &NodeInput, pfn: u64, k: &[u8]) -> CmpClass {
    let zone = node.zones.iter().find_map(|z| z.class(pfn));
    let own = cfg.vmemmap_start + pfn * STRUCT_PAGE + LRU;
    let lru = (word(k, 1), word(k, 2));
    let init_lru = lru == (own, own) || lru == cfg.list_poison();
    match zone {
        Some(Class::FreeHead | Class::FreeTail) if word(k, 4) != 0 => CmpClass::FreeUsed,
        Some(Class::FreeTail) if !init_lru => CmpClass::FreeUsed,
        Some(Class::FreeHead) => CmpClass::FreeHead,
        Some(Class::FreeTail) => CmpClass::FreeTail,
        Some(Class::Reserved) if node.is_frame(pfn) => CmpClass::ReservedVmemmap,
        Some(Class::Reserved) if u32::from_le_bytes([k[52], k[53], k[54], k[55]]) > 1 => {
            CmpClass::ReservedReferenced
        }
        Some(Class::Reserved) => CmpClass::Reserved,
        Some(Class::Absent) => CmpClass::Absent,
        _ => CmpClass::Allocated,
    }
}

/// Word `i` (of 8) of a struct page.
fn word(page: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(page[i * 8..i * 8 + 8].try_into().unwrap_or_default())
}

/// What the per-page comparison needs.
struct Ctx<'c> {
    cfg: &'c KernelConfig,
    vmemmap_size: u64,
    flags: FlagsLayout,
    model: &'c Dump,
    node: &'c NodeInput,
}

impl Ctx<'_> {
    fn model_page(&self, pfn: u64) -> Option<&[u8]> {
        let i = usize::try_from(pfn.checked_sub(self.model.meta.start_pfn)?).ok()?;
        self.model.memmap().get(i * 64..(i + 1) * 64)
    }

    fn is_memory(&self, pfn: u64) -> bool {
        self.node.memory.iter().any(|m| m.contains(pfn))
    }

    /// The words of `k` and `m` at `idx` that differ, described; `None` when all are equal.
    fn words(pfn: u64, k: &[u8], m: &[u8], idx: &[usize]) -> Option<String> {
        let d: Vec<String> = idx
            .iter()
            .filter(|&&i| word(k, i) != word(m, i))
            .map(|&i| format!("word {i}: kernel {:#x}, model {:#x}", word(k, i), word(m, i)))
            .collect();
        (!d.is_empty()).then(|| format!("pfn {pfn:#x}: {}", d.join("; ")))
    }

    /// Where a free head's `lru` link points: fine if out of the vmemmap (a list head) or at
    /// the list node of a free head of `order` in this zone of `classes`.
    fn link_ok(&self, value: u64, order: u64, page_of: &dyn Fn(u64) -> Option<(Class, u64)>) -> bool {
        let base = self.cfg.vmemmap_start;
        let Some(off) = value.checked_sub(base + LRU) else { return true };
        if off >= self.vmemmap_size {
            return true;
        }
        off % STRUCT_PAGE == 0 && page_of(off / STRUCT_PAGE) == Some((Class::FreeHead, order))
    }

    fn class_of(&self, pfn: u64, k: &[u8]) -> CmpClass {
        class_of(self.cfg, self.node, pfn, k)
    }

    fn zone(&self, z: &KernelZone) -> ZoneResult {
        let mut classes = vec![ClassCount::default(); CmpClass::ALL.len()];
        let all: Vec<usize> = (0..8).collect();
        let reserved_bit = 1u64 << self.cfg.behaviour().page_flags.reserved;
        let ids = |f: u64| (self.flags.zone(f), self.flags.node(f), self.flags.section(f));
        let kernel_of = |pfn: u64| {
            let kz = self.node.zones.iter().find(|z| z.page(pfn).is_some())?;
            Some((kz.class(pfn)?, word(kz.page(pfn)?, 5)))
        };
        let model_of = |pfn: u64| {
            let p = self.model_page(pfn)?;
            let buddy =
                u32::from_le_bytes([p[48], p[49], p[50], p[51]]) == memmap_core::buddy_page_type(self.cfg);
            Some((if buddy { Class::FreeHead } else { Class::Allocated }, word(p, 5)))
        };
        for pfn in z.pfns() {
            let (Some(k), m) = (z.page(pfn), self.model_page(pfn)) else { continue };
            let mut class = self.class_of(pfn, k);
            if let (CmpClass::FreeTail, Some(m)) = (class, m) {
                let own = self.cfg.vmemmap_start + pfn * STRUCT_PAGE + LRU;
                let poison = self.cfg.list_poison();
                if (word(k, 1), word(k, 2)) == poison && (word(m, 1), word(m, 2)) == (own, own) {
                    class = CmpClass::FreeMerged;
                }
            }
            let diff = match (class, m) {
                (CmpClass::Absent, m) => {
                    if self.is_memory(pfn) {
                        Some(format!("pfn {pfn:#x}: memory in the layout"))
                    } else {
                        m.filter(|m| m.iter().any(|&b| b != 0)).map(|_| {
                            format!("pfn {pfn:#x}: the model wrote a struct page in a section without memory")
                        })
                    }
                }
                (_, None) => Some(format!("pfn {pfn:#x}: not in the model's memmap")),
                (CmpClass::FreeHead, Some(m)) => Self::words(pfn, k, m, &[0, 3, 4, 5, 6, 7]).or_else(|| {
                    let order = word(k, 5);
                    let bad = [1, 2].iter().find(|&&w| {
                        !self.link_ok(word(k, w), order, &kernel_of)
                            || !self.link_ok(word(m, w), order, &model_of)
                    });
                    bad.map(|w| format!("pfn {pfn:#x}: lru word {w} links to no free block of order {order}"))
                }),
                (CmpClass::FreeUsed, Some(m)) => Self::words(pfn, k, m, &[0, 3, 5, 6, 7]),
                (CmpClass::FreeMerged, Some(m)) => Self::words(pfn, k, m, &[0, 3, 4, 5, 6, 7]),
                (CmpClass::FreeTail | CmpClass::Reserved | CmpClass::ReservedVmemmap, Some(m)) => {
                    Self::words(pfn, k, m, &all)
                }
                (CmpClass::ReservedReferenced, Some(m)) => {
                    let (kf, mf) = (word(k, 0), word(m, 0));
                    (ids(kf) != ids(mf) || (kf ^ mf) & reserved_bit != 0)
                        .then(|| format!("pfn {pfn:#x}: flags kernel {kf:#x}, model {mf:#x}"))
                }
                (CmpClass::Allocated, Some(m)) => {
                    let (kf, mf) = (word(k, 0), word(m, 0));
                    if !self.is_memory(pfn) {
                        Some(format!("pfn {pfn:#x}: allocated in the guest, no memory in the layout"))
                    } else {
                        (ids(kf) != ids(mf))
                            .then(|| format!("pfn {pfn:#x}: flags kernel {kf:#x}, model {mf:#x}"))
                    }
                }
            };
            classes[CmpClass::ALL.iter().position(|&c| c == class).unwrap_or(0)].add(diff);
        }
        ZoneResult {
            nid: self.node.nid,
            name: z.name.clone(),
            classes,
            pageblocks: PageblockCount::default(),
            counts: Vec::new(),
        }
    }

    fn pageblocks(&self, z: &KernelZone, model: &[Option<u8>]) -> PageblockCount {
        let mut c = PageblockCount::default();
        let pb = self.cfg.pageblock_nr_pages();
        let first = z.pageblock_first_pfn;
        let model_first = self.model.meta.start_pfn & !(pb - 1);
        for (i, &k) in z.pageblocks.iter().enumerate() {
            let pfn = first + i as u64 * pb;
            let m = pfn
                .checked_sub(model_first)
                .and_then(|o| model.get((o / pb) as usize))
                .copied()
                .flatten()
                .unwrap_or(0);
            let block = pfn.max(z.start_pfn)..(pfn + pb).min(z.start_pfn + z.nr_pages);
            let differ = |c: &mut PageblockCount, why: String| {
                c.differ += 1;
                c.first.get_or_insert(format!("pageblock {pfn:#x}: {why}"));
            };
            if k == NO_SECTION {
                if block.clone().any(|p| self.is_memory(p)) {
                    differ(&mut c, "no section in the guest, memory in the layout".into());
                } else {
                    c.absent += 1;
                }
            } else if k == m {
                c.equal += 1;
            } else if m == MigrateType::Movable.value() && STEAL_TYPES.contains(&k) {
                c.changed_by_allocation += 1;
            } else {
                differ(&mut c, format!("kernel {k}, model {m}"));
            }
        }
        c
    }
}
