//! The comparison of every region of one configuration with the model ([`compare_regions`]):
//! the model run per region kind, the struct pages left out on both sides, and the pages
//! compared.

use std::collections::BTreeMap;

use anyhow::{Context, Result, bail};
use memmap_core::offsets;

use super::meta::{StaleField, compare_pageblocks, model_symbols, stale_fields, stale_ranges};
use super::{
    FirstDiff, Geometry, Group, Normalizer, SP, aliased_vmemmap_pages, compare_pages, content_aliased,
    kernel_normalizer,
};
use crate::compare::model::{self, ModelDump};
use crate::facts::{Facts, Region};

/// Comparison of one kernel region with the model.
#[derive(Debug, Clone)]
pub struct RegionResult {
    /// Human label of the region.
    pub label: String,
    /// `memmap-bench` arguments of the model side.
    pub model_argv: Vec<String>,
    /// Struct pages compared (those the kernel side has).
    pub pages: u64,
    /// Struct pages that differ after normalization.
    pub differing_pages: u64,
    /// The first difference.
    pub first: Option<FirstDiff>,
    /// All differences, grouped.
    pub groups: Vec<Group>,
    /// Pageblock migrate types: `None` when not compared, else the differences (empty: equal).
    pub pageblocks: Option<Vec<String>>,
    /// Struct pages the modelled kernel leaves as they were (`stale_pfn_ranges`), not compared.
    pub stale_pages: u64,
    /// History-dependent fields (`stale_fields`) and how many struct pages each, not compared.
    pub stale_fields: Vec<(String, u64)>,
    /// hotplug: struct pages of the blocks the guest allocated from after onlining (taken off the
    /// model's free list), not compared, nor their pageblocks.
    pub allocated_pages: u64,
}

/// The kernel side of one region for [`compare_regions`]: its struct pages (the whole region,
/// pfn order) and, when only some were read (a golden extract), which.
pub type KernelRegion = (Vec<u8>, Option<Vec<bool>>);

/// Runs the model (in memory) for every region of `facts` and compares it with the kernel's
/// struct pages `kernel(i)` of region `i`. Struct pages the kernel side does not have are not
/// compared.
///
/// # Errors
///
/// The kernel pages cannot be read or the model fails.
pub fn compare_regions(
    facts: &Facts,
    mut kernel: impl FnMut(usize) -> Result<KernelRegion>,
) -> Result<Vec<RegionResult>> {
    let mut results = Vec::new();
    let mut renames: BTreeMap<String, String> = BTreeMap::new();
    let mut models = Models::new(facts);
    let shared = shared_hugetlb_gpas(facts, &models.hugetlb);
    // The hot-added blocks are the kernel's `MAX_PAGE_ORDER` blocks (12 on ppc64el, 8 with 64 KiB
    // pages there).
    let cfg = model::kernel_config(facts)?.0;
    let max_order = cfg.max_page_order;
    for (i, r) in facts.regions.iter().enumerate() {
        let (kbytes, known) = kernel(i)?;
        let kn = kernel_normalizer(facts, r);
        let geo = Geometry::of(r);
        let aliased = aliased_vmemmap_pages(r, &shared);
        let side = models.side(r)?;
        let m_aliased = content_aliased(&side.bytes, side.start_pfn);
        if r.kind == "hotplug" {
            check_allocated_heads(r, max_order, &kbytes, known.as_deref())?;
        }
        let mut cmp = Blanked { k: kbytes, m: side.bytes };
        if let Some(known) = &known {
            cmp.unknown(known);
        }
        let stale_pages = cmp.stale(&side.stale, geo.start_pfn, side.start_pfn);
        let allocated_pages = if r.kind == "hotplug" { cmp.allocated_blocks(r, max_order) } else { 0 };
        let stale_fields = cmp.stale_fields(&side.stale_fields, side.start_pfn, r.nr_pages, known.as_deref());
        let (differing, first, groups) = compare_pages(
            geo,
            &cmp.k,
            &kn,
            &cmp.m,
            side.start_pfn,
            &side.normalizer,
            &aliased,
            &m_aliased,
            &mut renames,
        );
        results.push(RegionResult {
            label: region_label(r, geo),
            model_argv: side.argv,
            pages: known.as_ref().map_or(r.nr_pages, |k| k.iter().filter(|&&x| x).count() as u64),
            differing_pages: differing,
            first,
            groups,
            pageblocks: side.pageblocks,
            stale_pages,
            stale_fields,
            allocated_pages,
        });
    }
    Ok(results)
}

/// Gpas shared between hugetlb regions (a node-wide shared tail page).
fn shared_hugetlb_gpas(facts: &Facts, hugetlb: &[usize]) -> Vec<u64> {
    let mut gpa_regions: BTreeMap<u64, usize> = BTreeMap::new();
    for &i in hugetlb {
        let set: std::collections::BTreeSet<u64> =
            facts.regions[i].vmemmap_gpa.iter().flatten().copied().collect();
        for g in set {
            *gpa_regions.entry(g).or_default() += 1;
        }
    }
    gpa_regions.iter().filter(|(_, c)| **c > 1).map(|(g, _)| *g).collect()
}

/// The model side of one region: its struct pages and what is not to be compared.
struct ModelSide {
    /// The model's struct pages, compared index for index with the kernel's.
    bytes: Vec<u8>,
    /// The pfn of the first of them (model numbering).
    start_pfn: u64,
    /// How the model's pointers are read.
    normalizer: Normalizer,
    /// `memmap-bench` arguments of the run.
    argv: Vec<String>,
    /// The pageblock comparison, where the region kind has one.
    pageblocks: Option<Vec<String>>,
    /// Struct pages the model leaves as they were (`stale_pfn_ranges`).
    stale: Vec<(u64, u64)>,
    /// Fields the model declares history-dependent (`stale_fields`).
    stale_fields: Vec<StaleField>,
}

/// Runs the model for one configuration's regions, one run for all hugetlb folios.
struct Models<'f> {
    facts: &'f Facts,
    /// The indices of the hugetlb regions.
    hugetlb: Vec<usize>,
    /// The hugetlb run and its folios `(head pfn, nid)` sorted by node, then pfn.
    hugetlb_model: Option<(ModelDump, Vec<(u64, u32)>)>,
}

impl<'f> Models<'f> {
    fn new(facts: &'f Facts) -> Self {
        let hugetlb = (0..facts.regions.len()).filter(|&i| facts.regions[i].kind == "hugetlb").collect();
        Models { facts, hugetlb, hugetlb_model: None }
    }

    /// The model side of region `r`.
    fn side(&mut self, r: &Region) -> Result<ModelSide> {
        match r.kind.as_str() {
            "zone-device" => self.zone_device(r),
            "hugetlb" => self.hugetlb(r),
            "hotplug" => self.hotplug(r),
            "boot" => bail!("a boot dump has no model side yet (the model does not lay out a booted guest)"),
            other => bail!("unknown region kind {other}"),
        }
    }

    fn zone_device(&self, r: &Region) -> Result<ModelSide> {
        let md = ModelDump::run(&model::zone_device_spec(self.facts, r)?)?;
        let pgmap = md.meta.detail.get("pgmap_addr").and_then(serde_json::Value::as_u64);
        let normalizer = Normalizer {
            vmemmap_base: md.vmemmap_base,
            vmemmap_size: md.span(),
            pgmap,
            ..Normalizer::default()
        };
        // A pageblock whose first struct page the kernel leaves as it was keeps its bits too.
        let stale = stale_ranges(&md.meta);
        let untouched = |pfn: u64| stale.iter().any(|&(a, b)| (a..b).contains(&pfn));
        Ok(ModelSide {
            pageblocks: compare_pageblocks(r, self.facts.pageblock_order, &md.meta, untouched),
            stale,
            stale_fields: Vec::new(),
            bytes: md.bytes,
            start_pfn: md.start_pfn,
            normalizer,
            argv: md.argv,
        })
    }

    /// The model's folio for kernel folio `r`: a node's k-th folio against the model's k-th.
    fn hugetlb(&mut self, r: &Region) -> Result<ModelSide> {
        let facts = self.facts;
        if self.hugetlb_model.is_none() {
            let md = ModelDump::run(&model::hugetlb_spec(facts)?)?;
            let mut folios: Vec<(u64, u32)> = md
                .meta
                .detail
                .get("folios")
                .and_then(serde_json::Value::as_array)
                .context("model meta has no folios")?
                .iter()
                .filter_map(|f| Some((f.get("head_pfn")?.as_u64()?, f.get("nid")?.as_u64()? as u32)))
                .collect();
            folios.sort_by_key(|&(p, n)| (n, p));
            self.hugetlb_model = Some((md, folios));
        }
        let (md, folios) = self.hugetlb_model.as_ref().context("model")?;
        let rank = self
            .hugetlb
            .iter()
            .filter(|&&j| facts.regions[j].nid == r.nid && facts.regions[j].start_pfn < r.start_pfn)
            .count();
        let (head, _) = *folios
            .iter()
            .filter(|f| f.1 == r.nid)
            .nth(rank)
            .with_context(|| format!("the model has no folio {rank} on node {}", r.nid))?;
        let off = ((head - md.start_pfn) as usize) * SP;
        let len = (r.nr_pages as usize) * SP;
        if off + len > md.bytes.len() {
            bail!("model folio at {head:#x} is shorter than the kernel's");
        }
        let normalizer = Normalizer {
            vmemmap_base: md.vmemmap_base,
            vmemmap_size: md.span(),
            pgmap: None,
            kimage: model_symbols(&md.meta),
            folio_heads: folios.iter().map(|&(p, n)| (n, p)).collect(),
            direct_map: None,
        };
        Ok(ModelSide {
            bytes: md.bytes[off..off + len].to_vec(),
            start_pfn: head,
            normalizer,
            argv: md.argv.clone(),
            pageblocks: None,
            stale: Vec::new(),
            stale_fields: stale_fields(&md.meta),
        })
    }

    /// The hot-added range, the pageblocks of the blocks the guest allocated from left out.
    fn hotplug(&self, r: &Region) -> Result<ModelSide> {
        let md = ModelDump::run(&model::hotplug_spec(self.facts, r)?)?;
        let cfg = model::kernel_config(self.facts)?.0;
        let page_offset = cfg.page_offset;
        let normalizer = Normalizer {
            vmemmap_base: md.vmemmap_base,
            vmemmap_size: md.span(),
            direct_map: Some((page_offset, 1u64 << 46)),
            ..Normalizer::default()
        };
        let block = cfg.max_order_nr_pages();
        let taken = &r.allocated_blocks;
        let pageblocks = compare_pageblocks(r, self.facts.pageblock_order, &md.meta, |pfn| {
            taken.contains(&(pfn & !(block - 1)))
        });
        Ok(ModelSide {
            bytes: md.bytes,
            start_pfn: md.start_pfn,
            normalizer,
            argv: md.argv,
            pageblocks,
            stale: Vec::new(),
            stale_fields: Vec::new(),
        })
    }
}

/// Both sides' struct pages, what is not compared zeroed on both sides.
struct Blanked {
    /// The kernel's.
    k: Vec<u8>,
    /// The model's.
    m: Vec<u8>,
}

impl Blanked {
    /// Blanks bytes `k_at` of the kernel side and `m_at` of the model side; whether both exist.
    fn blank(&mut self, k_at: std::ops::Range<usize>, m_at: std::ops::Range<usize>) -> bool {
        if let (Some(kp), Some(mp)) = (self.k.get_mut(k_at), self.m.get_mut(m_at)) {
            kp.fill(0);
            mp.fill(0);
            true
        } else {
            false
        }
    }

    /// Blanks the struct pages the kernel side does not have (`known[i]` false).
    fn unknown(&mut self, known: &[bool]) {
        for (ki, _) in known.iter().enumerate().filter(|(_, k)| !**k) {
            self.blank(ki * SP..(ki + 1) * SP, ki * SP..(ki + 1) * SP);
        }
    }

    /// Blanks the model's stale struct pages the kernel left as they were too; returns how many.
    fn stale(&mut self, stale: &[(u64, u64)], k_start: u64, m_start: u64) -> u64 {
        let mut n = 0;
        for &(a, b) in stale {
            for pfn in a..b {
                let (ki, mi) = (pfn.wrapping_sub(k_start) as usize, pfn.wrapping_sub(m_start) as usize);
                // Only a struct page the kernel left as it was too is left out: one the kernel
                // initialized as a compound tail (bit 0 of its compound word) is compared, so a
                // model that wrongly declares pages stale differs instead of hiding them.
                let head = ki * SP + offsets::COMPOUND_HEAD;
                let kernel_tail = self.k.get(head..head + 8).is_some_and(|w| w[0] & 1 == 1);
                if kernel_tail {
                    continue;
                }
                if self.blank(ki * SP..(ki + 1) * SP, mi * SP..(mi + 1) * SP) {
                    n += 1;
                }
            }
        }
        n
    }

    /// hotplug: blanks the blocks the guest allocated from after onlining (checked against the
    /// kernel's heads by [`check_allocated_heads`]); returns the struct pages blanked.
    fn allocated_blocks(&mut self, r: &Region, max_order: u32) -> u64 {
        let block = 1u64 << max_order;
        let mut n = 0;
        let mut pfn = r.start_pfn.next_multiple_of(block);
        while pfn + block <= r.start_pfn + r.nr_pages {
            if r.allocated_blocks.contains(&pfn) {
                let i = (pfn - r.start_pfn) as usize;
                for k in i..i + block as usize {
                    if self.blank(k * SP..(k + 1) * SP, k * SP..(k + 1) * SP) {
                        n += 1;
                    }
                }
            }
            pfn += block;
        }
        n
    }

    /// Blanks each stale field where the kernel holds one of its history values; returns per field
    /// how many struct pages.
    fn stale_fields(
        &mut self,
        fields: &[StaleField],
        m_start: u64,
        nr_pages: u64,
        known: Option<&[bool]>,
    ) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        for f in fields {
            let mut n = 0;
            for &(a, b) in &f.ranges {
                for pfn in a.max(m_start)..b.min(m_start + nr_pages) {
                    let i = (pfn - m_start) as usize;
                    if known.is_some_and(|k| !k.get(i).copied().unwrap_or(false)) {
                        continue;
                    }
                    let at = i * SP + f.offset;
                    let history = self.k.get(at..at + 8).is_some_and(|w| {
                        f.values.contains(&u64::from_le_bytes(w.try_into().unwrap_or([0; 8])))
                    });
                    if history && self.blank(at..at + f.len, at..at + f.len) {
                        n += 1;
                    }
                }
            }
            if n > 0 {
                out.push((f.field.clone(), n));
            }
        }
        out
    }
}

/// hotplug: the kernel's heads (`kbytes`, as read) must confirm the blocks the facts say the
/// guest allocated from: those are not free `MAX_PAGE_ORDER` blocks, every other one is.
fn check_allocated_heads(r: &Region, order: u32, kbytes: &[u8], known: Option<&[bool]>) -> Result<()> {
    let block = 1u64 << order;
    let end = r.start_pfn + r.nr_pages;
    let mut pfn = r.start_pfn.next_multiple_of(block);
    while pfn + block <= end {
        let i = (pfn - r.start_pfn) as usize;
        let head_known = known.is_none_or(|k| k.get(i).copied().unwrap_or(false));
        let taken = r.allocated_blocks.contains(&pfn);
        if let Some(head) = kbytes.get(i * SP..(i + 1) * SP).filter(|_| head_known) {
            let free = crate::facts::read::is_free_block_head(head, order);
            if free == taken {
                bail!(
                    "hotplug block {pfn:#x}: the facts say {}, the kernel's head says {}",
                    if taken { "allocated" } else { "free" },
                    if free { "free" } else { "allocated" }
                );
            }
        }
        pfn += block;
    }
    Ok(())
}

/// Human label of region `r`: the folio, the hot-added range or the namespace.
fn region_label(r: &Region, geo: Geometry) -> String {
    match &r.folio {
        Some(f) => format!(
            "hugetlb {} folio at pfn {:#x} (node {})",
            r.hstate.as_deref().unwrap_or("?"),
            f.head_pfn,
            f.nid
        ),
        None if r.kind == "hotplug" => format!(
            "hot-added pfns [{:#x}, {:#x}) {} (zone {}, node {})",
            r.start_pfn,
            r.start_pfn + r.nr_pages,
            r.online_type.as_deref().unwrap_or("?"),
            r.zone,
            r.nid
        ),
        None => format!(
            "{} map={} align={} pfns [{:#x}, {:#x}) init from {:#x} (node {})",
            r.mode.as_deref().unwrap_or("?"),
            r.map.as_deref().unwrap_or("?"),
            r.align.unwrap_or(0),
            r.start_pfn,
            r.start_pfn + r.nr_pages,
            geo.init_start,
            r.nid
        ),
    }
}
