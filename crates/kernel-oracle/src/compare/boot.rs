//! The model side of the boot configurations: each guest node's layout booted by the model on
//! every init path and every struct page compared by its kernel class
//! ([`crate::facts::zones::Class`]); what each class compares is tabled in
//! `docs/kernel-oracle.md` ("Boot configurations").

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
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

/// The init paths run on each layout; the reference is the one in the kernel's mode
/// ([`kernel_mode`]) on the kernel's order and slow path, compared with the guest, and the
/// others are compared with it.
pub const PATHS: [(InitMode, BootOrder, Strategy); 6] = [
    (InitMode::Deferred, BootOrder::Kernel, Strategy::Slow),
    (InitMode::Eager, BootOrder::Kernel, Strategy::Slow),
    (InitMode::Eager, BootOrder::Fused, Strategy::Streaming),
    (InitMode::Deferred, BootOrder::Kernel, Strategy::Streaming),
    (InitMode::Deferred, BootOrder::Fused, Strategy::Streaming),
    (InitMode::OnDemand, BootOrder::Fused, Strategy::Streaming),
];

/// How the guest's kernel initialized its memmap: eagerly when booted with `early_page_ext`
/// (`defer_init()` defers nothing when page extensions are set up early), deferred otherwise.
#[must_use]
pub fn kernel_mode(cmdline: &str) -> InitMode {
    if cmdline.split_whitespace().any(|a| a == "early_page_ext") {
        InitMode::Eager
    } else {
        InitMode::Deferred
    }
}

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
        section_tail: n.section_tail,
    }
}

/// Compares every boot node of the run in `dir` with the model.
///
/// # Errors
///
/// As [`inputs`] and [`compare_nodes`].
pub fn compare(dir: &Path, facts: &Facts) -> Result<Vec<NodeResult>> {
    let (cfg, nodes) = inputs(dir, facts)?;
    compare_nodes(&cfg, facts.vmemmap_size, kernel_mode(&facts.cmdline), &nodes)
}

/// Boots the model on each node's layout on every path of [`PATHS`] and compares the one in
/// the kernel's `mode` with the kernel's zones.
///
/// # Errors
///
/// The model refuses the reference path's layout.
pub fn compare_nodes(
    cfg: &KernelConfig,
    vmemmap_size: u64,
    mode: InitMode,
    nodes: &[NodeInput],
) -> Result<Vec<NodeResult>> {
    nodes.iter().map(|n| compare_node(cfg, vmemmap_size, mode, n)).collect()
}

/// Where the dump `b` of another path first differs from the reference `a`, and how many struct
/// pages differ only as the kernels' paths differ too: a merge's poison in `lru` on the deferred
/// side (deferred init frees a partly reserved block page by page) and self-pointers on the
/// other (eager boot frees it in aligned blocks), either way round; and, before 6.12, a
/// reserved page outside memory that deferred init gives node 0 and zone `MAX_NR_ZONES`
/// (`Behaviour::reserved_page_nid_by_pfn`), in only its zone and node bits. Returns the
/// difference and those two counts.
fn path_difference(cfg: &KernelConfig, a: &Dump, b: &Dump) -> (Option<String>, u64, u64) {
    let poison = cfg.list_poison();
    let (mut poison_only, mut rehomed) = (0, 0);
    let (ma, mb) = (a.memmap(), b.memmap());
    if ma.len() != mb.len() {
        return (Some("sizes differ".into()), 0, 0);
    }
    let layout = cfg.flags_layout().ok();
    let moved_to_node0 = |fa: u64, fb: u64| {
        layout.is_some_and(|l| {
            let rest = |f: u64| l.set_node(l.set_zone(f, 0), 0);
            let node0 = |f: u64| (l.zone(f), l.node(f)) == (cfg.max_nr_zones, 0);
            cfg.behaviour().reserved_page_nid_by_pfn && rest(fa) == rest(fb) && (node0(fa) || node0(fb))
        })
    };
    for (i, (pa, pb)) in ma.chunks_exact(64).zip(mb.chunks_exact(64)).enumerate() {
        if pa == pb {
            continue;
        }
        let pfn = a.meta.start_pfn + i as u64;
        let own = a.meta.page_addr_base + i as u64 * STRUCT_PAGE + LRU;
        let others_equal = [0, 3, 4, 5, 6, 7].iter().all(|&w| word(pa, w) == word(pb, w));
        let (la, lb) = ((word(pa, 1), word(pa, 2)), (word(pb, 1), word(pb, 2)));
        if others_equal && ((la == poison && lb == (own, own)) || (la == (own, own) && lb == poison)) {
            poison_only += 1;
            continue;
        }
        if (1..8).all(|w| word(pa, w) == word(pb, w)) && moved_to_node0(word(pa, 0), word(pb, 0)) {
            rehomed += 1;
            continue;
        }
        let w = (0..8).find(|&w| word(pa, w) != word(pb, w)).unwrap_or(0);
        return (
            Some(format!("pfn {pfn:#x} word {w}: {:#x} against {:#x}", word(pa, w), word(pb, w))),
            poison_only,
            rehomed,
        );
    }
    for key in ["pageblock_migratetypes", "zones"] {
        if a.meta.detail.get(key) != b.meta.detail.get(key) {
            return (Some(format!("{key} differ")), poison_only, rehomed);
        }
    }
    (None, poison_only, rehomed)
}

fn compare_node(cfg: &KernelConfig, vmemmap_size: u64, mode: InitMode, n: &NodeInput) -> Result<NodeResult> {
    let nid = n.nid;
    let reference = (mode, BootOrder::Kernel, Strategy::Slow);
    let mut spec = NodeDump {
        config: *cfg,
        layout72: false,
        nid,
        zones: n.zones.iter().map(|z| ZoneSpan::new(z.zone, z.start_pfn, z.start_pfn + z.nr_pages)).collect(),
        memory: n.memory.clone(),
        reserved: n.reserved.clone(),
        mode: reference.0,
        order: reference.1,
        strategy: reference.2,
        taken: n.taken.clone(),
        bootmem: n.frames.iter().map(|&(f, section)| (f, section, BootmemType::Section)).collect(),
        section_tail: n.section_tail,
    };
    let reference_dump = spec.run().map_err(|e| anyhow!("model of node {nid}: {e}"))?;
    let mut paths = Vec::new();
    for &p in PATHS.iter().filter(|&&p| p != reference) {
        (spec.mode, spec.order, spec.strategy) = p;
        let same = match spec.run() {
            Err(e) => PathOutcome::Refused(e.to_string()),
            Ok(other) => match path_difference(cfg, &reference_dump, &other) {
                (None, poison_only, rehomed) => PathOutcome::Same { poison_only, rehomed },
                (Some(d), ..) => PathOutcome::Differs(d),
            },
        };
        paths.push((path_name(p), same));
    }
    let model_zones: Vec<ZoneCounts> = serde_json::from_value(
        reference_dump.meta.detail.get("zones").cloned().context("the model dump has no zone counts")?,
    )?;
    let model_pbs: Vec<Option<u8>> = serde_json::from_value(
        reference_dump.meta.detail.get("pageblock_migratetypes").cloned().context("no pageblocks")?,
    )?;
    let flags = cfg.flags_layout().map_err(|e| anyhow!("{e:?}"))?;
    let ctx = Ctx {
        cfg,
        vmemmap_size,
        flags,
        model: &reference_dump,
        node: n,
        model_pbs: &model_pbs,
        list_heads: RefCell::new(BTreeMap::new()),
        moved: BTreeSet::new(),
        kernel_lists: BTreeMap::new(),
        model_lists: BTreeMap::new(),
    };
    let moved: BTreeSet<u64> = n
        .zones
        .iter()
        .flat_map(|z| {
            let ctx = &ctx;
            z.pfns().filter(move |&pfn| {
                z.class(pfn) == Some(Class::FreeHead) && {
                    let (kt, mt) = ctx.pageblock_types(z, pfn);
                    kt.is_some_and(|kt| kt != mt && kt != NO_SECTION)
                }
            })
        })
        .collect();
    let heads: Vec<u64> =
        n.zones.iter().flat_map(|z| z.pfns().filter(|&pfn| z.class(pfn) == Some(Class::FreeHead))).collect();
    let kernel_page = |pfn: u64| n.zones.iter().find_map(|z| z.page(pfn));
    let kernel_lists = ctx.lists_of(&heads, &kernel_page);
    let model_lists = ctx.lists_of(&heads, &|pfn| ctx.model_page(pfn));
    let ctx = Ctx { moved, kernel_lists, model_lists, ..ctx };
    let mut results = Vec::new();
    for z in &n.zones {
        let m = model_zones
            .iter()
            .find(|m| m.zone == z.zone)
            .with_context(|| format!("node {nid} zone {}: no model counts", z.zone))?;
        let k = z.counts;
        let mut res = ctx.zone(z);
        res.pageblocks = ctx.pageblocks(z);
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
        reference: path_name(reference),
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
    /// The model's pageblock migrate types from its node's first pageblock.
    model_pbs: &'c [Option<u8>],
    /// The free lists' heads (in the zones, outside the vmemmap) paired so far: the kernel's
    /// address to the model's, and back.
    list_heads: RefCell<BTreeMap<(bool, u64), u64>>,
    /// The kernel's free heads in pageblocks an allocation since boot gave another migrate type
    /// than the model's: the steal moved them to that type's lists.
    moved: BTreeSet<u64>,
    /// The list head each kernel free head's links reach.
    kernel_lists: BTreeMap<u64, u64>,
    /// The list head each model free head's links reach.
    model_lists: BTreeMap<u64, u64>,
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

    fn in_vmemmap(&self, v: u64) -> bool {
        v.checked_sub(self.cfg.vmemmap_start).is_some_and(|o| o < self.vmemmap_size)
    }

    /// Whether free head `pfn` is on the free list of the model that corresponds to its list in
    /// the kernel: each kernel list head (in the zone, outside the vmemmap) pairs with one model
    /// list head, the first pairing holding for every other head, both ways. `None` when a side's
    /// links reach no list head (a sample without the pages between).
    fn same_list(&self, pfn: u64) -> Option<bool> {
        let (k, m) = (*self.kernel_lists.get(&pfn)?, *self.model_lists.get(&pfn)?);
        let mut heads = self.list_heads.borrow_mut();
        Some(*heads.entry((true, k)).or_insert(m) == m && *heads.entry((false, m)).or_insert(k) == k)
    }

    /// The list head (outside the vmemmap) each of `heads` reaches through its `next` links, on
    /// the pages `page_of` gives.
    fn lists_of<'p>(&self, heads: &[u64], page_of: &dyn Fn(u64) -> Option<&'p [u8]>) -> BTreeMap<u64, u64> {
        let mut out = BTreeMap::new();
        for &h in heads {
            let mut path = vec![h];
            let mut cur = h;
            let found = loop {
                if let Some(&known) = out.get(&cur) {
                    break Some(known);
                }
                let Some(next) = page_of(cur).map(|p| word(p, 1)) else { break None };
                if !self.in_vmemmap(next) {
                    break Some(next);
                }
                let off = next - self.cfg.vmemmap_start;
                if off % STRUCT_PAGE != LRU || path.len() > heads.len() {
                    break None;
                }
                cur = off / STRUCT_PAGE;
                path.push(cur);
            };
            if let Some(list) = found {
                for p in path {
                    out.insert(p, list);
                }
            }
        }
        out
    }

    /// The migrate types of the pageblock of `pfn`: the kernel's and the model's.
    fn pageblock_types(&self, z: &KernelZone, pfn: u64) -> (Option<u8>, u8) {
        let pb = self.cfg.pageblock_nr_pages();
        let i = pfn.checked_sub(z.pageblock_first_pfn).map(|o| (o / pb) as usize);
        let model_first = self.model.meta.start_pfn & !(pb - 1);
        let m = (pfn & !(pb - 1))
            .checked_sub(model_first)
            .and_then(|o| self.model_pbs.get((o / pb) as usize))
            .copied()
            .flatten()
            .unwrap_or(0);
        (i.and_then(|i| z.pageblocks.get(i)).copied(), m)
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
            if class == CmpClass::FreeHead && self.moved.contains(&pfn) {
                class = CmpClass::FreeMoved;
            }
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
                (CmpClass::FreeHead, Some(m)) => Self::words(pfn, k, m, &[0, 3, 4, 5, 6, 7])
                    .or_else(|| {
                        let order = word(k, 5);
                        let bad = [1, 2].iter().find(|&&w| {
                            !self.link_ok(word(k, w), order, &kernel_of)
                                || !self.link_ok(word(m, w), order, &model_of)
                        });
                        bad.map(|w| {
                            format!("pfn {pfn:#x}: lru word {w} links to no free block of order {order}")
                        })
                    })
                    .or_else(|| {
                        (self.same_list(pfn) == Some(false)).then(|| {
                            format!(
                                "pfn {pfn:#x}: on another free list than the model's (order {})",
                                word(k, 5)
                            )
                        })
                    }),
                (CmpClass::FreeUsed, Some(m)) => Self::words(pfn, k, m, &[0, 3, 5, 6, 7]),
                (CmpClass::FreeMerged | CmpClass::FreeMoved, Some(m)) => {
                    Self::words(pfn, k, m, &[0, 3, 4, 5, 6, 7])
                }
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

    fn pageblocks(&self, z: &KernelZone) -> PageblockCount {
        let model = self.model_pbs;
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
