//! The model's inputs of a boot configuration ([`super::boot`]): each node of the guest laid
//! out from what the guest reported (its zones, `/proc/iomem`'s System RAM, the pages it left
//! `PG_reserved` or allocated since, the frames behind its vmemmap).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result, bail};
use memmap_core::{Arch, KernelConfig, PfnRange, ReservedRange, ZoneSpan};
use serde::{Deserialize, Serialize};

use crate::facts::zones::{Class, classify};
use crate::facts::{Facts, STRUCT_PAGE, iomem_ranges};

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
    /// The vmemmap frames in the node that `register_page_bootmem_info_node()` gives a
    /// `get_page_bootmem(section, frame, SECTION_INFO)`, once per call, as `(frame, section)`
    /// sorted (a frame whose section two nodes register comes twice).
    pub frames: Vec<(u64, u64)>,
    /// The node holds the machine's last memory and its last zone's struct pages run on to the
    /// section's end ([`memmap_dump::NodeDump::section_tail`]).
    pub section_tail: bool,
}

impl NodeInput {
    /// Whether `pfn` is a vmemmap frame the kernel registered.
    #[must_use]
    pub fn is_frame(&self, pfn: u64) -> bool {
        self.frames.binary_search_by(|&(f, _)| f.cmp(&pfn)).is_ok()
    }
}

/// The frame behind each 4 KiB vmemmap page the boot regions map, by vmemmap page.
fn vmemmap_pages(facts: &Facts) -> BTreeMap<u64, u64> {
    let mut out = BTreeMap::new();
    for r in facts.regions.iter().filter(|r| r.kind == "boot") {
        let first_vpage = (facts.vmemmap_base + r.start_pfn * STRUCT_PAGE) / 4096;
        for (i, gpa) in r.vmemmap_gpa.iter().enumerate() {
            if let Some(gpa) = gpa {
                out.insert(first_vpage + i as u64, gpa >> 12);
            }
        }
    }
    out
}

/// The `get_page_bootmem(section, frame, SECTION_INFO)` calls of x86-64's
/// `register_page_bootmem_info_node()` for every node, as `(frame, section)`: the sections
/// [`memmap_core::bootmem_info_sections`] registers, each with the frames the regions map its
/// memmap to (a frame they do not map is left out).
fn bootmem_calls(
    vpages: &BTreeMap<u64, u64>,
    vmemmap_base: u64,
    cfg: &KernelConfig,
    nodes: &[(u32, PfnRange, Vec<PfnRange>)],
) -> Vec<(u64, u64)> {
    let pps = cfg.pages_per_section();
    let vpages_per_section = (pps * STRUCT_PAGE).div_ceil(4096);
    let base_vpage = vmemmap_base / 4096;
    let sections: std::collections::BTreeSet<u64> =
        vpages.keys().map(|&v| (v - base_vpage.min(v)) * 4096 / STRUCT_PAGE / pps).collect();
    let sections: Vec<u64> = sections.into_iter().collect();
    let nodes: Vec<(u32, PfnRange, &[PfnRange])> = nodes.iter().map(|(n, s, m)| (*n, *s, &m[..])).collect();
    let mut calls = Vec::new();
    memmap_core::bootmem_info_sections(cfg, &nodes, &sections, |_, section| {
        let first = (vmemmap_base + section * pps * STRUCT_PAGE) / 4096;
        calls.extend(
            (first..first + vpages_per_section).filter_map(|v| vpages.get(&v).map(|&f| (f, section))),
        );
    });
    calls
}

/// The byte ranges `[start, end)` of `memblock.reserved` the guest's `memblock=debug` log shows:
/// each `memblock_reserve` added, each `memblock_free`/`memblock_phys_free` taken out, in log
/// order (reservations before the option is parsed are not logged; they hold the kernel, inside
/// memory).
fn logged_reservations(log: &str) -> Result<Vec<(u64, u64)>> {
    let mut set: Vec<(u64, u64)> = Vec::new();
    let mut lines = 0usize;
    for line in log.lines() {
        let (add, rest) = if let Some(r) = line.split("memblock_reserve: [").nth(1) {
            (true, r)
        } else if let Some(r) =
            line.split("memblock_free: [").nth(1).or_else(|| line.split("memblock_phys_free: [").nth(1))
        {
            (false, r)
        } else {
            continue;
        };
        let Some((a, b)) = rest.split(']').next().and_then(|r| r.split_once('-')) else { continue };
        let hex = |t: &str| u64::from_str_radix(t.trim().trim_start_matches("0x"), 16).ok();
        let (Some(a), Some(b)) = (hex(a), hex(b)) else { continue };
        let Some(end) = b.checked_add(1).filter(|&e| e > a) else { continue };
        // Each line costs a pass over the set: a guest logs hundreds.
        lines += 1;
        if lines > MAX_MEMBLOCK_LINES {
            bail!("more than {MAX_MEMBLOCK_LINES} memblock reservations and frees in the guest's log");
        }
        // Take [a, end) out, then put it back in when reserving.
        let mut next = Vec::with_capacity(set.len() + 2);
        for &(s, e) in &set {
            if e <= a || end <= s {
                next.push((s, e));
                continue;
            }
            if s < a {
                next.push((s, a));
            }
            if end < e {
                next.push((end, e));
            }
        }
        if add {
            next.push((a, end));
        }
        next.sort_unstable();
        set = next;
    }
    Ok(set)
}

/// The most memblock reservations and frees read from a guest's log.
const MAX_MEMBLOCK_LINES: usize = 1 << 14;

/// The reserved pages outside memory, from the guest's log ([`logged_reservations`]): the
/// pfns `reserve_bootmem_region()` covers (`PFN_DOWN(start)` to `PFN_UP(end)`), less `ram`,
/// in sections that hold memory (`pfn_valid()`), inside the nodes' `spans`.
fn reserved_outside_memory(
    log: &str,
    ram: &[PfnRange],
    cfg: &KernelConfig,
    spans: &[PfnRange],
) -> Result<Vec<PfnRange>> {
    let pps = cfg.pages_per_section();
    let page = 1u64 << cfg.page_shift;
    let mut out: Vec<PfnRange> = Vec::new();
    let reserved = logged_reservations(log)?;
    let clipped = reserved.iter().flat_map(|&(a, e)| {
        let (first, end) = (a >> cfg.page_shift, e.div_ceil(page));
        spans.iter().map(move |s| (first.max(s.start), end.min(s.end))).filter(|(f, e)| f < e)
    });
    for (first, end) in clipped {
        let mut pfn = first;
        while pfn < end {
            // The next boundary: a memory range's start or end, or the section's end.
            let in_ram = ram.iter().find(|r| r.contains(pfn));
            let stop = match in_ram {
                Some(r) => r.end.min(end),
                None => ram.iter().map(|r| r.start).filter(|&s| s > pfn).min().unwrap_or(end).min(end),
            };
            let stop = stop.min((pfn / pps + 1) * pps).max(pfn + 1);
            let section = (pfn / pps * pps, pfn / pps * pps + pps);
            if in_ram.is_none() && ram.iter().any(|r| r.start < section.1 && section.0 < r.end) {
                match out.last_mut() {
                    Some(l) if l.end == pfn => l.end = stop,
                    _ => out.push(PfnRange::new(pfn, stop)),
                }
            }
            pfn = stop;
        }
    }
    out.sort_by_key(|r| r.start);
    Ok(out)
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
    let mut nodes = Vec::new();
    for nid in nids {
        let mut zones = Vec::new();
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
            zones.push(KernelZone {
                zone: r.zone,
                name: r.zone_name.clone().unwrap_or_default(),
                start_pfn: r.start_pfn,
                // The zone's span; the last zone's dump runs on to its section's end.
                nr_pages: k.spanned.min(r.nr_pages),
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
        nodes.push((nid, zones));
    }
    let spans: Vec<(u32, PfnRange, Vec<PfnRange>)> = nodes
        .iter()
        .map(|(nid, zones)| {
            let spans: Vec<ZoneSpan> =
                zones.iter().map(|z| ZoneSpan::new(z.zone, z.start_pfn, z.start_pfn + z.nr_pages)).collect();
            let start = zones.first().map_or(0, |z| z.start_pfn);
            let end = zones.iter().map(|z| z.start_pfn + z.nr_pages).max().unwrap_or(start);
            (*nid, PfnRange::new(start, end), node_memory(&ram, &spans))
        })
        .collect();
    let calls = bootmem_calls(&vmemmap_pages(facts), facts.vmemmap_base, &cfg, &spans);
    // The console log of a run (a golden extract keeps the layout instead).
    let log = memmap_dump::read_user_bytes(&dir.join("console.log"), 64 << 20)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let node_spans: Vec<PfnRange> = spans.iter().map(|s| s.1).collect();
    let outside = reserved_outside_memory(&log, &ram, &cfg, &node_spans)?;
    Ok((cfg, nodes.into_iter().map(|(nid, zones)| node_input(nid, zones, &ram, &calls, &outside)).collect()))
}

/// The layout of a node from its zones' classes, `ram` and the registration calls of every node
/// (those on its reserved pages are its frames).
fn node_input(
    nid: u32,
    zones: Vec<KernelZone>,
    ram: &[PfnRange],
    calls: &[(u64, u64)],
    outside: &[PfnRange],
) -> NodeInput {
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
    // memblock.reserved outside memory, inside the zones' spans.
    for z in &zones {
        let (zs, ze) = (z.start_pfn, z.start_pfn + z.nr_pages);
        for r in outside.iter().filter(|r| r.start < ze && zs < r.end) {
            reserved.push(ReservedRange::new(r.start.max(zs), r.end.min(ze)));
        }
    }
    reserved.sort_by_key(|r| r.range.start);
    let mut merged: Vec<ReservedRange> = Vec::with_capacity(reserved.len());
    for r in reserved {
        match merged.last_mut() {
            Some(last) if last.range.end >= r.range.start => last.range.end = last.range.end.max(r.range.end),
            _ => merged.push(r),
        }
    }
    let reserved = merged;
    let mut frames: Vec<(u64, u64)> = calls
        .iter()
        .copied()
        .filter(|&(f, _)| {
            zones.iter().find(|z| z.contains(f)).and_then(|z| z.class(f)) == Some(Class::Reserved)
        })
        .collect();
    frames.sort_unstable();
    let section_tail = zones.iter().any(|z| z.pfns().last().is_some_and(|p| p >= z.start_pfn + z.nr_pages));
    NodeInput { nid, zones, memory, reserved, taken, frames, section_tail }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The log's reservations less its frees, byte exact; outside memory, by whole pages of
    /// sections that hold memory.
    #[test]
    fn reservations_outside_memory_come_from_the_memblock_log() {
        let log = "\
[    0.19] memblock_reserve: [0x000000007ffe21a8-0x000000007ffe229b] acpi_reserve_initial_tables+0x51/0x61
[    0.19] memblock_reserve: [0x000000007ffe0000-0x000000007ffe21a7] acpi_reserve_initial_tables+0x51/0x61
[    0.20] memblock_reserve: [0x0000000010000000-0x0000000010ffffff] memblock_alloc_range_nid+0xb0/0x13d
[    0.21] memblock_phys_free: [0x0000000010800000-0x0000000010ffffff] pcpu_embed_first_chunk+0x216/0x70f
[    0.22] memblock_reserve: [0x00000000fee00000-0x00000000fee00fff] a section without memory
[    0.23] memblock_reserve: [0xzz-0x1] garbage
[    0.24] memblock_free: [0x000000007ffe2000-0x000000007ffe2fff] gives the third page back
";
        assert_eq!(
            logged_reservations(log).unwrap(),
            [(0x1000_0000, 0x1080_0000), (0x7ffe_0000, 0x7ffe_2000), (0xfee0_0000, 0xfee0_1000)]
        );
        let cfg = KernelConfig::X86_64;
        let ram = [PfnRange::new(0x100, 0x7ffe0), PfnRange::new(0x10_0000, 0x14_0000)];
        let spans = [PfnRange::new(0, 0x14_0000)];
        assert_eq!(
            reserved_outside_memory(log, &ram, &cfg, &spans).unwrap(),
            [PfnRange::new(0x7ffe0, 0x7ffe2)]
        );
        // Hostile logs: a reservation of everything is clipped to the nodes (no walk of 2^52
        // pfns), and a log of a million lines is refused, not read in quadratic time.
        let all = "memblock_reserve: [0x0-0xfffffffffffffffe] x\n";
        let t = std::time::Instant::now();
        assert_eq!(reserved_outside_memory(all, &ram, &cfg, &spans).unwrap().len(), 2);
        let many: String = (0..1_000_000u64)
            .map(|i| format!("memblock_reserve: [{:#x}-{:#x}] x\n", i * 8192, i * 8192 + 100))
            .collect();
        assert!(logged_reservations(&many).unwrap_err().to_string().contains("more than"));
        assert!(t.elapsed().as_secs() < 30, "{:?}", t.elapsed());
    }

    /// x86-64's walk: node 1 starts 64 MiB into section 32, which node 0 ends in, so both
    /// register it; a node whose steps miss its last section leaves that one out.
    #[test]
    fn sections_are_registered_as_each_node_steps_through_them() {
        let cfg = KernelConfig::X86_64;
        let pps = cfg.pages_per_section();
        let base = cfg.vmemmap_start;
        // Every section of [0, 48) mapped, its first vmemmap page on frame 1000 + section.
        let per = pps * STRUCT_PAGE / 4096;
        let vpages: BTreeMap<u64, u64> =
            (0..48).map(|sec| ((base + sec * pps * STRUCT_PAGE) / 4096, 1000 + sec)).collect();
        assert_eq!(per, 512);
        let r = |s: u64, e: u64| PfnRange::new(s, e);
        let split = 32 * pps + pps / 2;
        let nodes = [(0, r(0, split), vec![r(0, split)]), (1, r(split, 48 * pps), vec![r(split, 48 * pps)])];
        let calls = bootmem_calls(&vpages, base, &cfg, &nodes);
        assert_eq!(calls.iter().filter(|c| c.1 == 32).count(), 2);
        assert_eq!(calls.len(), 48 + 1);
        // Node 1 from 0x4000 into section 32 to 0x4000 into section 47: its steps land in 32..=46
        // only, and section 47 (node 1's memory) is registered by nobody.
        let short = [
            (0, r(0, split), vec![r(0, split)]),
            (1, r(split, 47 * pps + pps / 2), vec![r(split, 47 * pps + pps / 2)]),
        ];
        let calls = bootmem_calls(&vpages, base, &cfg, &short);
        assert!(!calls.iter().any(|c| c.1 == 47));
        // A stepped pfn outside every node's memory counts as the first node's.
        let hole = [
            (0, r(0, 16 * pps), vec![r(0, 16 * pps)]),
            (1, r(16 * pps, 32 * pps), vec![r(20 * pps, 32 * pps)]),
        ];
        let calls = bootmem_calls(&vpages, base, &cfg, &hole);
        assert!(!calls.iter().any(|c| (16..20).contains(&c.1)));
    }
}
