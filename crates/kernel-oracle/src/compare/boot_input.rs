//! The model's inputs of a boot configuration ([`super::boot`]): each node of the guest laid
//! out from what the guest reported (its zones, `/proc/iomem`'s System RAM, the pages it left
//! `PG_reserved` or allocated since, the frames behind its vmemmap).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result, bail};
use memmap_core::{Arch, KernelConfig, PfnRange, ReservedRange, ZoneSpan};
use serde::{Deserialize, Serialize};

use crate::facts::zones::{Class, classify};
use crate::facts::{Facts, Region, STRUCT_PAGE, iomem_ranges};

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
    /// Pages in free buddy blocks when the guest was stopped, as the dump holds them.
    pub free: u64,
}

/// The struct pages of a kernel zone (all, or a golden sample), each with its kernel class.
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
    /// The pageblocks' migrate types ([`NO_SECTION`](crate::facts::NO_SECTION) where the section is absent).
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
    /// The vmemmap's frames in the node and the section whose memmap each holds (`SECTION_INFO`).
    pub frames: BTreeMap<u64, u64>,
}

/// The vmemmap frames of a zone and the section whose memmap each holds, from `vmemmap_gpa`.
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

/// The layout of a node from its zones' classes, `ram` and the vmemmap frames.
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
