//! The model side of the boot configurations: each node of the guest laid out from what the
//! guest reported (its zones, `/proc/iomem`'s System RAM, the pages it left `PG_reserved`, the
//! frames behind its vmemmap), booted by the model on every init path, the pages the guest had
//! allocated since taken off the model's free lists, and every struct page compared by class
//! ([`crate::facts::zones::Class`]), with the pageblocks and the zones' counts.
//!
//! What is compared, per kernel class:
//!
//! * a free block's head: every word but the `lru` links, which depend on the order of frees;
//!   the links are checked to point at the head of a free block of the same order and zone, or
//!   out of the memmap (the free list's head), in both memmaps;
//! * a page inside a free block, and a reserved page: every word;
//! * a reserved page holding the vmemmap: every word, after the model's `get_page_bootmem()`
//!   of the frames the guest's page tables map the vmemmap to;
//! * a reserved page referenced after boot (its count above 1 but no vmemmap frame: the
//!   usemaps' and the node data's bootmem records, the zero page): the zone, node and section
//!   bits and `PG_reserved` (the rest is the later user's);
//! * a page allocated after boot: the zone, node and section bits, which nothing changes after
//!   init (the rest is its user's); the page must be memory in the layout;
//! * no struct page: the layout has no memory there.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result, anyhow, bail};
use memmap_core::{
    Arch, BootOrder, BootmemType, FlagsLayout, InitMode, KernelConfig, MigrateType, PfnRange, ReservedRange,
    Strategy, ZoneSpan,
};
use memmap_dump::{Dump, NodeDump, ZoneCounts};

use crate::facts::zones::{Class, classify};
use crate::facts::{Facts, NO_SECTION, Region, STRUCT_PAGE, iomem_ranges};
use serde::{Deserialize, Serialize};

/// The classes the comparison counts, in report order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CmpClass {
    /// [`Class::FreeHead`].
    FreeHead,
    /// [`Class::FreeTail`].
    FreeTail,
    /// [`Class::FreeHead`] or [`Class::FreeTail`] that was in use since boot: its `index` is
    /// not 0, or (a page inside a block) its `lru` is neither init's self-pointers nor a
    /// merge's poison (a user's words). The free path resets the other words.
    FreeUsed,
    /// [`Class::FreeTail`] holding the poison of a merge (`list_del()` took it off a list as
    /// an upper buddy) where the model's boot leaves init's self-pointers: merged since boot
    /// (a page freed after boot found its buddy free). Where the model's boot leaves the same
    /// poison (deferred init frees a partly reserved block page by page), the page is a
    /// [`CmpClass::FreeTail`] and compared whole.
    FreeMerged,
    /// [`Class::Reserved`], as init left it (count 1).
    Reserved,
    /// [`Class::Reserved`] holding the vmemmap (`SECTION_INFO`), modelled.
    ReservedVmemmap,
    /// [`Class::Reserved`] with more references than init's and no vmemmap frame.
    ReservedReferenced,
    /// [`Class::Allocated`].
    Allocated,
    /// [`Class::Absent`].
    Absent,
}

impl CmpClass {
    /// Every class, in report order.
    pub const ALL: [CmpClass; 9] = [
        CmpClass::FreeHead,
        CmpClass::FreeTail,
        CmpClass::FreeUsed,
        CmpClass::FreeMerged,
        CmpClass::Reserved,
        CmpClass::ReservedVmemmap,
        CmpClass::ReservedReferenced,
        CmpClass::Allocated,
        CmpClass::Absent,
    ];

    /// The name in reports.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            CmpClass::FreeHead => "free (head)",
            CmpClass::FreeTail => "free (in a block)",
            CmpClass::FreeUsed => "free (used since boot)",
            CmpClass::FreeMerged => "free (merged since boot)",
            CmpClass::Reserved => "reserved",
            CmpClass::ReservedVmemmap => "reserved (vmemmap, bootmem info)",
            CmpClass::ReservedReferenced => "reserved (referenced after boot)",
            CmpClass::Allocated => "allocated after boot",
            CmpClass::Absent => "no struct page",
        }
    }

    /// What is compared, for reports.
    #[must_use]
    pub const fn compared(self) -> &'static str {
        match self {
            CmpClass::FreeHead => "all but lru (links checked)",
            CmpClass::FreeTail | CmpClass::Reserved | CmpClass::ReservedVmemmap => "every byte",
            CmpClass::FreeUsed => "all but lru and index",
            CmpClass::FreeMerged => "all but lru",
            CmpClass::ReservedReferenced => "zone/node/section, PG_reserved",
            CmpClass::Allocated => "zone/node/section",
            CmpClass::Absent => "no memory in the layout, nothing written",
        }
    }
}

/// Pages of one class and how many of them differ.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClassCount {
    /// Pages.
    pub pages: u64,
    /// Pages that differ.
    pub differ: u64,
    /// The first difference, described.
    pub first: Option<String>,
}

impl ClassCount {
    fn add(&mut self, differs: Option<String>) {
        self.pages += 1;
        if let Some(d) = differs {
            self.differ += 1;
            self.first.get_or_insert(d);
        }
    }
}

/// The pageblocks of one zone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageblockCount {
    /// The same migrate type.
    pub equal: u64,
    /// MOVABLE in the model, a type an allocation falls back for in the kernel (an allocation
    /// took the block for its own type since boot, `steal_suitable_fallback()`; boot sets
    /// every pageblock of memory MOVABLE and nothing else sets these types without CMA).
    pub changed_by_allocation: u64,
    /// No section: the kernel has no pageblock bits, the layout no memory.
    pub absent: u64,
    /// Differences (also an absent pageblock with memory in the layout).
    pub differ: u64,
    /// The first difference, described.
    pub first: Option<String>,
}

/// One zone's comparison.
#[derive(Debug, Clone)]
pub struct ZoneResult {
    /// Node id.
    pub nid: u32,
    /// Zone name.
    pub name: String,
    /// Per class, in [`CmpClass::ALL`] order.
    pub classes: Vec<ClassCount>,
    /// Pageblocks.
    pub pageblocks: PageblockCount,
    /// `(counter, kernel, model)`: spanned, present, managed, free.
    pub counts: Vec<(&'static str, u64, u64)>,
}

impl ZoneResult {
    /// Whether nothing differs (the counters included).
    #[must_use]
    pub fn equal(&self) -> bool {
        self.classes.iter().all(|c| c.differ == 0)
            && self.pageblocks.differ == 0
            && self.counts.iter().all(|&(_, k, m)| k == m)
    }
}

/// One node's comparison.
#[derive(Debug, Clone)]
pub struct NodeResult {
    /// Node id.
    pub nid: u32,
    /// Its zones.
    pub zones: Vec<ZoneResult>,
    /// Each other init path (mode, order, strategy), where its memmap, pageblocks or counters
    /// first differ from the reference path's (`None`: nowhere) and how many struct pages
    /// differ only in a merge's poison (as the kernels' eager and deferred paths do), or why the model refused it for
    /// this configuration (on-demand init needs a free page-flag bit).
    pub paths: Vec<(String, PathOutcome)>,
    /// The reference path.
    pub reference: String,
    /// Pages taken off the model's free lists (allocated after boot in the guest).
    pub taken: u64,
    /// `get_page_bootmem()` calls on vmemmap frames.
    pub bootmem: u64,
}

/// How another init path's model run came out against the reference path's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathOutcome {
    /// The same memmap, pageblocks and counters, but for `poison_only` struct pages that hold
    /// a merge's poison in the reference and self-pointers here (as the kernels' deferred and
    /// eager paths differ).
    Same {
        /// Those struct pages.
        poison_only: u64,
    },
    /// The first difference.
    Differs(String),
    /// The model refused the path for this configuration, and why.
    Refused(String),
}

/// `MIGRATE_UNMOVABLE`, `MIGRATE_RECLAIMABLE`, `MIGRATE_HIGHATOMIC`: the types an allocation
/// gives a MOVABLE pageblock it steals.
const STEAL_TYPES: [u8; 3] = [0, 2, 3];

/// The init paths run on each layout: the kernel's (deferred, as Debian builds it, on the slow
/// path) first, as the reference, then the others.
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

/// The memory of `zones`: `ram` clipped to each zone, adjacent pieces merged.
fn node_memory(ram: &[PfnRange], zones: &[ZoneSpan]) -> Vec<PfnRange> {
    let mut out: Vec<PfnRange> = Vec::new();
    for z in zones {
        for r in ram {
            let (s, e) = (r.start.max(z.span.start), r.end.min(z.span.end));
            if s >= e {
                continue;
            }
            match out.last_mut() {
                Some(last) if last.end == s => last.end = e,
                _ => out.push(PfnRange::new(s, e)),
            }
        }
    }
    out
}

/// The kernel's counters of a zone (`/proc/zoneinfo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelCounts {
    /// `spanned`.
    pub spanned: u64,
    /// `present`.
    pub present: u64,
    /// `managed`.
    pub managed: u64,
    /// Pages in free buddy blocks when the guest was stopped (`pages free` as the dump holds
    /// them).
    pub free: u64,
}

/// The struct pages of a kernel zone: all of them (a run's dump) or a sample (a golden
/// extract), each with its kernel class.
#[derive(Debug, Clone)]
pub enum KernelPages {
    /// Every struct page of the span, and its class.
    All {
        /// The bytes.
        bytes: Vec<u8>,
        /// The classes.
        classes: Vec<Class>,
    },
    /// Some struct pages by pfn.
    Sample(BTreeMap<u64, (Class, [u8; 64])>),
}

/// One zone of the guest.
#[derive(Debug, Clone)]
pub struct KernelZone {
    /// Zone index.
    pub zone: u32,
    /// Zone name.
    pub name: String,
    /// First pfn of the span.
    pub start_pfn: u64,
    /// Pages spanned.
    pub nr_pages: u64,
    /// First pfn of the first pageblock overlapping the span.
    pub pageblock_first_pfn: u64,
    /// The pageblocks' migrate types ([`NO_SECTION`] where the section is absent).
    pub pageblocks: Vec<u8>,
    /// The zone's counters.
    pub counts: KernelCounts,
    /// Its struct pages.
    pub pages: KernelPages,
}

impl KernelZone {
    fn contains(&self, pfn: u64) -> bool {
        pfn >= self.start_pfn && pfn - self.start_pfn < self.nr_pages
    }
    /// The struct page of `pfn`, if the zone has it.
    #[must_use]
    pub fn page(&self, pfn: u64) -> Option<&[u8]> {
        match &self.pages {
            KernelPages::All { bytes, .. } => {
                let i = usize::try_from(pfn.checked_sub(self.start_pfn)?).ok()?;
                bytes.get(i * 64..(i + 1) * 64)
            }
            KernelPages::Sample(m) => m.get(&pfn).map(|(_, p)| &p[..]),
        }
    }
    /// The class of `pfn`, if the zone has its struct page.
    #[must_use]
    pub fn class(&self, pfn: u64) -> Option<Class> {
        match &self.pages {
            KernelPages::All { classes, .. } => {
                classes.get(usize::try_from(pfn.checked_sub(self.start_pfn)?).ok()?).copied()
            }
            KernelPages::Sample(m) => m.get(&pfn).map(|(c, _)| *c),
        }
    }
    /// The pfns whose struct pages the zone has, ascending.
    pub fn pfns(&self) -> Box<dyn Iterator<Item = u64> + '_> {
        match &self.pages {
            KernelPages::All { classes, .. } => {
                Box::new((0..classes.len() as u64).map(|i| self.start_pfn + i))
            }
            KernelPages::Sample(m) => Box::new(m.keys().copied()),
        }
    }
}

/// One node of the guest and the model's inputs taken from it.
#[derive(Debug, Clone)]
pub struct NodeInput {
    /// Node id.
    pub nid: u32,
    /// Its zones, ascending.
    pub zones: Vec<KernelZone>,
    /// `memblock.memory`: the System RAM inside the zones.
    pub memory: Vec<PfnRange>,
    /// `memblock.reserved` as the booted kernel left it: the runs of `PG_reserved` memory.
    pub reserved: Vec<ReservedRange>,
    /// The pages allocated after boot, ascending.
    pub taken: Vec<u64>,
    /// The vmemmap's frames inside the node that hold reserved struct pages, and the section
    /// whose memmap each holds (`SECTION_INFO`).
    pub frames: BTreeMap<u64, u64>,
}

/// The vmemmap frames of a zone and the section whose memmap each holds, from the region's
/// `vmemmap_gpa` (one guest-physical frame per vmemmap page, from the first page holding the
/// region's first struct page).
fn vmemmap_frames(facts: &Facts, r: &Region, cfg: &KernelConfig, out: &mut BTreeMap<u64, u64>) {
    let first_vpage = (facts.vmemmap_base + r.start_pfn * STRUCT_PAGE) / 4096;
    let section_shift = cfg.section_size_bits - 12;
    for (i, gpa) in r.vmemmap_gpa.iter().enumerate() {
        let Some(gpa) = gpa else { continue };
        let vaddr = (first_vpage + i as u64) * 4096;
        let pfn = vaddr.saturating_sub(facts.vmemmap_base) / STRUCT_PAGE;
        out.entry(gpa >> 12).or_insert(pfn >> section_shift);
    }
}

/// The model's configuration of the run in `dir` and the inputs of each of its nodes.
///
/// # Errors
///
/// A boot region that cannot be read, missing guest text, a guest whose vmemmap base is not
/// the model's.
pub fn inputs(dir: &Path, facts: &Facts) -> Result<(KernelConfig, Vec<NodeInput>)> {
    let (cfg, _) = crate::compare::model::kernel_config(facts)?;
    if facts.vmemmap_base != cfg.vmemmap_start {
        bail!(
            "the guest's vmemmap is at {:#x}, the model's at {:#x}: boot configurations run with nokaslr",
            facts.vmemmap_base,
            cfg.vmemmap_start
        );
    }
    let iomem = facts.guest.get("iomem").context("the guest's iomem is not recorded")?;
    let ram = iomem_ranges(iomem, cfg.arch == Arch::Riscv64, cfg.page_shift);
    let kzones = crate::facts::zones::zones(facts.guest.get("zoneinfo-full").context("no zoneinfo-full")?)?;
    let mut nids: Vec<u32> = facts.regions.iter().filter(|r| r.kind == "boot").map(|r| r.nid).collect();
    nids.sort_unstable();
    nids.dedup();
    let mut out = Vec::new();
    for nid in nids {
        let mut zones = Vec::new();
        let mut frames = BTreeMap::new();
        for (i, r) in facts.regions.iter().enumerate().filter(|(_, r)| r.kind == "boot" && r.nid == nid) {
            let bytes = facts.region_bytes(dir, i)?;
            let first_vpage = (facts.vmemmap_base + r.start_pfn * STRUCT_PAGE) / 4096;
            let classes = classify(&bytes, r.start_pfn, &cfg, |pfn| {
                let v = ((facts.vmemmap_base + pfn * STRUCT_PAGE) / 4096 - first_vpage) as usize;
                r.vmemmap_gpa.get(v).is_some_and(Option::is_some)
            });
            let k = kzones
                .iter()
                .find(|k| k.nid == nid && k.index == r.zone)
                .with_context(|| format!("node {nid} zone {} is not in the guest's zoneinfo", r.zone))?;
            // Only x86-64's `mem_init()` registers the memmap's frames as boot memory
            // (`register_page_bootmem_info()`, arch/x86/mm/init_64.c).
            if cfg.arch == Arch::X86_64 {
                vmemmap_frames(facts, r, &cfg, &mut frames);
            }
            zones.push(KernelZone {
                zone: r.zone,
                name: r.zone_name.clone().unwrap_or_default(),
                start_pfn: r.start_pfn,
                nr_pages: r.nr_pages,
                pageblock_first_pfn: r.pageblock_first_pfn.unwrap_or(r.start_pfn),
                pageblocks: r.pageblock_migratetypes.clone(),
                // `pages free` as the dump shows it: the guest printed its counters a moment
                // before it was stopped (`run::BOOT_FREE_DRIFT`).
                counts: KernelCounts {
                    spanned: k.spanned,
                    present: k.present,
                    managed: k.managed,
                    free: crate::facts::zones::counts(&classes)[..2].iter().sum(),
                },
                pages: KernelPages::All { bytes, classes },
            });
        }
        zones.sort_by_key(|z| z.start_pfn);
        out.push(node_input(nid, zones, &ram, frames));
    }
    Ok((cfg, out))
}

/// The layout of a node from its zones' classes: memory from `ram`, reserved runs, the pages
/// taken, the vmemmap frames that hold reserved pages.
fn node_input(nid: u32, zones: Vec<KernelZone>, ram: &[PfnRange], frames: BTreeMap<u64, u64>) -> NodeInput {
    let spans: Vec<ZoneSpan> =
        zones.iter().map(|z| ZoneSpan::new(z.zone, z.start_pfn, z.start_pfn + z.nr_pages)).collect();
    let memory = node_memory(ram, &spans);
    let is_memory = |pfn: u64| memory.iter().any(|m| m.contains(pfn));
    let mut reserved: Vec<ReservedRange> = Vec::new();
    let mut taken = Vec::new();
    for z in &zones {
        for pfn in z.pfns() {
            match z.class(pfn) {
                Some(Class::Reserved) if is_memory(pfn) => match reserved.last_mut() {
                    Some(last) if last.range.end == pfn => last.range.end += 1,
                    _ => reserved.push(ReservedRange::new(pfn, pfn + 1)),
                },
                Some(Class::Allocated) if is_memory(pfn) => taken.push(pfn),
                _ => {}
            }
        }
    }
    let frames = frames
        .into_iter()
        .filter(|&(f, _)| {
            zones.iter().find(|z| z.contains(f)).and_then(|z| z.class(f)) == Some(Class::Reserved)
        })
        .collect();
    NodeInput { nid, zones, memory, reserved, taken, frames }
}

/// The nodes' layouts as `memmap-bench dump node --node-layout` reads them.
#[must_use]
pub fn layout_file(facts: &Facts, nodes: &[NodeInput]) -> memmap_dump::LayoutFile {
    let runs = |v: &mut Vec<(u64, u64)>, p: u64| match v.last_mut() {
        Some(last) if last.1 == p => last.1 += 1,
        _ => v.push((p, p + 1)),
    };
    memmap_dump::LayoutFile {
        format: memmap_dump::node::LAYOUT_FORMAT,
        source: format!("kernel-oracle: {} {} ({})", facts.kernel.id, facts.config, facts.kernel.release),
        nodes: nodes
            .iter()
            .map(|n| {
                let mut taken = Vec::new();
                for &p in &n.taken {
                    runs(&mut taken, p);
                }
                let mut bootmem: Vec<(u64, u64, u64)> = Vec::new();
                for (&f, &s) in &n.frames {
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
            })
            .collect(),
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

/// Where the dump `b` of another path first differs from the reference `a`, and how many
/// struct pages differ only in the one way the kernels' paths differ too: a free page whose
/// `lru` holds the poison of a merge in the reference (deferred init frees the pages of a
/// block that is partly reserved one by one, in ascending order, so the upper buddies merged
/// keep `list_del()`'s poison) and self-pointers in the other (eager boot frees such a block
/// in aligned blocks, `__free_pages_memory()`).
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
        let own = a.meta.page_addr_base + i as u64 * 64 + 8;
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
        bootmem: n.frames.iter().map(|(&f, &section)| (f, section, BootmemType::Section)).collect(),
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
    let own = cfg.vmemmap_start + pfn * STRUCT_PAGE + 8;
    let lru = (word(k, 1), word(k, 2));
    let init_lru = lru == (own, own) || lru == cfg.list_poison();
    match zone {
        Some(Class::FreeHead | Class::FreeTail) if word(k, 4) != 0 => CmpClass::FreeUsed,
        Some(Class::FreeTail) if !init_lru => CmpClass::FreeUsed,
        Some(Class::FreeHead) => CmpClass::FreeHead,
        Some(Class::FreeTail) => CmpClass::FreeTail,
        Some(Class::Reserved) if node.frames.contains_key(&pfn) => CmpClass::ReservedVmemmap,
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
        let Some(off) = value.checked_sub(base + 8) else { return true };
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
                let own = self.cfg.vmemmap_start + pfn * STRUCT_PAGE + 8;
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

/// The report of a run's nodes, as a table per zone.
#[must_use]
pub fn render(nodes: &[NodeResult]) -> String {
    let mut s = String::new();
    for n in nodes {
        let _ = writeln!(
            s,
            "  node {}: model {} ({} pages taken as allocated, {} vmemmap frames recorded); other paths: {}",
            n.nid,
            n.reference,
            n.taken,
            n.bootmem,
            n.paths
                .iter()
                .map(|(p, same)| match same {
                    PathOutcome::Same { poison_only: 0 } => format!("{p} same"),
                    PathOutcome::Same { poison_only } =>
                        format!("{p} same but for {poison_only} pages' merge poison"),
                    PathOutcome::Differs(d) => format!("{p} DIFFERS ({d})"),
                    PathOutcome::Refused(e) => format!("{p} refused ({e})"),
                })
                .collect::<Vec<_>>()
                .join(", ")
        );
        for z in &n.zones {
            let _ = writeln!(s, "    zone {}: {}", z.name, if z.equal() { "equal" } else { "DIFFERS" });
            for (class, c) in CmpClass::ALL.iter().zip(&z.classes).filter(|(_, c)| c.pages > 0) {
                let _ = writeln!(
                    s,
                    "      {:<34} {:>8} pages, {:>6} differ  ({})",
                    class.name(),
                    c.pages,
                    c.differ,
                    class.compared()
                );
                if let Some(f) = &c.first {
                    let _ = writeln!(s, "        first: {f}");
                }
            }
            let p = &z.pageblocks;
            let _ = writeln!(
                s,
                "      pageblocks: {} equal, {} changed by an allocation, {} without a section, {} differ",
                p.equal, p.changed_by_allocation, p.absent, p.differ
            );
            if let Some(f) = &p.first {
                let _ = writeln!(s, "        first: {f}");
            }
            let counts: Vec<String> = z
                .counts
                .iter()
                .map(
                    |&(name, k, m)| {
                        if k == m { format!("{name} {k}") } else { format!("{name} {k} (model {m})") }
                    },
                )
                .collect();
            let _ = writeln!(s, "      counts: {}", counts.join(", "));
        }
    }
    s
}

/// Whether every zone is equal and every path agrees.
#[must_use]
pub fn equal(nodes: &[NodeResult]) -> bool {
    nodes.iter().all(|n| {
        n.zones.iter().all(ZoneResult::equal)
            && n.paths.iter().all(|(_, s)| !matches!(s, PathOutcome::Differs(_)))
    })
}
