//! The normalizing comparator: kernel struct pages against the model's, every byte, after
//! mapping pointers to symbols by class.
//!
//! Each 8-byte word of a struct page is turned into a [`Sym`]:
//!
//! * a pointer into the vmemmap becomes `page(+d)+off|tag`: the struct page `d` pfns away from
//!   the page holding the word, byte `off` in it, low tag bits `tag` (so `page(+0)+8` is a
//!   self-pointing `lru`, `page(-5)+0|1` a tail's `compound_head` of a head 5 pages back);
//! * the region's `pgmap` pointer becomes `PGMAP`;
//! * a pointer into the kernel image becomes its `System.map` name (`hstates+0x58`);
//! * anything else stays a raw value.
//!
//! Two regions match when every word's symbol is equal. The class checks
//! ([`class_checks`]) verify what the symbols assume: all pgmap words of a range are equal,
//! aliased vmemmap pages read identically, self pointers point at their own list head, and
//! every tail's `compound_head`/`compound_info` resolves to its head.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result, bail};

use crate::facts::{Facts, Region};
use crate::model::{self, ModelDump};

/// Bytes per struct page.
const SP: usize = 64;

/// One word after normalization.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Sym {
    /// A plain value.
    Raw(u64),
    /// A pointer into struct page `own + delta`, byte `off`, with low tag bits `tag`.
    Page {
        /// Pfn distance from the page holding the word.
        delta: i64,
        /// Byte offset in the target struct page (a multiple of 8).
        off: u8,
        /// Low tag bits (`1` for `compound_head`).
        tag: u8,
    },
    /// A pointer into the head struct page of the compound page holding the word (a tail's
    /// `compound_head`: `HEAD+0|1`).
    Head {
        /// Byte offset in the head.
        off: u8,
        /// Low tag bits.
        tag: u8,
    },
    /// In an aliased vmemmap page (dedup or HVO): a pointer into the same slot of another
    /// vmemmap page, i.e. a self pointer written when the shared frame was initialized at its
    /// original address.
    AliasSelf {
        /// Byte offset.
        off: u8,
        /// Low tag bits.
        tag: u8,
    },
    /// The head struct page of the huge page folio of rank `rank` (PFN order) on node `nid`.
    FolioHead {
        /// The node id.
        nid: u32,
        /// Rank among the node's folios.
        rank: usize,
        /// Byte offset.
        off: u8,
        /// Low tag bits.
        tag: u8,
    },
    /// The region's `dev_pagemap`.
    Pgmap,
    /// A kernel-image address, by name.
    Kimage(String),
    /// A direct-map address (kernel data such as `zone->free_area[]` list heads), in the
    /// regions whose normalizer names them ([`Normalizer::direct_map`]).
    Direct(u64),
}

impl std::fmt::Display for Sym {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Sym::Raw(v) => write!(f, "{v:#018x}"),
            Sym::Page { delta, off, tag } => {
                write!(f, "page({delta:+})+{off}")?;
                if *tag != 0 {
                    write!(f, "|{tag}")?;
                }
                Ok(())
            }
            Sym::Head { off, tag } => {
                write!(f, "HEAD+{off}")?;
                if *tag != 0 {
                    write!(f, "|{tag}")?;
                }
                Ok(())
            }
            Sym::AliasSelf { off, tag } => {
                write!(f, "ALIAS_SELF+{off}")?;
                if *tag != 0 {
                    write!(f, "|{tag}")?;
                }
                Ok(())
            }
            Sym::FolioHead { nid, rank, off, tag } => {
                write!(f, "FOLIO[node {nid} #{rank}]+{off}")?;
                if *tag != 0 {
                    write!(f, "|{tag}")?;
                }
                Ok(())
            }
            Sym::Pgmap => write!(f, "PGMAP"),
            Sym::Kimage(n) => write!(f, "&{n}"),
            Sym::Direct(a) => write!(f, "&dm:{a:#x}"),
        }
    }
}

/// How one side's pointers are read.
#[derive(Debug, Clone, Default)]
pub struct Normalizer {
    /// Address of the struct page of pfn 0.
    pub vmemmap_base: u64,
    /// Size of the vmemmap area.
    pub vmemmap_size: u64,
    /// The region's pgmap pointer.
    pub pgmap: Option<u64>,
    /// Kernel-image addresses and their names.
    pub kimage: BTreeMap<u64, String>,
    /// The heads of the huge page folios of the comparison, per node in PFN order: a pointer
    /// into another folio's head is read by the folio's rank (the hstate free lists), since
    /// the model packs its folios while a kernel places them where memory was free.
    pub folio_heads: Vec<(u32, u64)>,
    /// The direct map `[start, start + size)`: pointers into it become [`Sym::Direct`] and are
    /// matched by consistent renaming like kernel-image addresses (the free-list heads in
    /// `struct zone` that hot-added blocks link to). `None`: such pointers stay raw values.
    pub direct_map: Option<(u64, u64)>,
}

impl Normalizer {
    /// The symbol of word `v` held by the struct page of `pfn`.
    #[must_use]
    pub fn sym(&self, pfn: u64, v: u64) -> Sym {
        if self.pgmap == Some(v) && v != 0 {
            return Sym::Pgmap;
        }
        if let Some(n) = self.kimage.get(&v) {
            return Sym::Kimage(n.clone());
        }
        if v >= self.vmemmap_base && v - self.vmemmap_base < self.vmemmap_size {
            let rel = v - self.vmemmap_base;
            let target = rel / SP as u64;
            let within = (rel % SP as u64) as u8;
            if let Some(&(nid, _)) = self.folio_heads.iter().find(|&&(_, h)| h == target && h != pfn) {
                let rank = self.folio_heads.iter().filter(|&&(n, h)| n == nid && h < target).count();
                return Sym::FolioHead { nid, rank, off: within & !7, tag: within & 7 };
            }
            return Sym::Page { delta: target as i64 - pfn as i64, off: within & !7, tag: within & 7 };
        }
        if let Some((lo, size)) = self.direct_map {
            if v >= lo && v - lo < size {
                return Sym::Direct(v);
            }
        }
        Sym::Raw(v)
    }
}

/// Name of the field at byte `offset` of a struct page that plays `role`.
#[must_use]
pub fn field_name(role: &str, offset: usize) -> &'static str {
    match (role, offset / 8) {
        ("page[1]", 0) => "_flags_1 (order in bits 0-7)",
        ("page[1]", 1) => "_head_1 (compound_head/compound_info)",
        ("page[1]", 2) => "_large_mapcount/_entire_mapcount (@16)",
        ("page[1]", 3) => "_nr_pages_mapped/_pincount or _mm_id (@24)",
        ("page[1]", 4) => "@32 (_mm_id/_pincount)",
        ("page[1]", 5) => "@40 (_mm_id_mapcount)",
        ("page[1]", 6) => "@48 (_mapcount/_refcount of page[1])",
        ("page[1]", 7) => "_nr_pages (@56)",
        ("page[2]", 2) => "_deferred_list.next (@16)",
        ("page[2]", 3) => "_deferred_list.prev (@24)",
        (_, 0) => "flags",
        (_, 1) => "lru.next/compound_head/pgmap (@8)",
        (_, 2) => "lru.prev/zone_device_data (@16)",
        (_, 3) => "mapping",
        (_, 4) => "index",
        (_, 5) => "private",
        (_, 6) if offset % 8 < 4 => "_mapcount/page_type",
        (_, 6) => "_refcount",
        (_, 7) => "memcg_data",
        _ => "(beyond struct page)",
    }
}

fn word(b: &[u8], off: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[off..off + 8]);
    u64::from_le_bytes(w)
}

/// Geometry of a region: how its pfns are grouped into compound pages.
#[derive(Debug, Clone, Copy)]
pub struct Geometry {
    /// First pfn of the region.
    pub start_pfn: u64,
    /// First initialized pfn (compound pages start here).
    pub init_start: u64,
    /// Pages per compound page (1: none).
    pub compound: u64,
}

impl Geometry {
    /// The geometry of a region from its facts.
    #[must_use]
    pub fn of(r: &Region) -> Geometry {
        let compound = match (r.vmemmap_shift, r.folio) {
            (_, Some(f)) => 1u64 << f.order,
            (Some(s), None) => 1u64 << s,
            _ => 1,
        };
        Geometry { start_pfn: r.start_pfn, init_start: r.init_start_pfn.unwrap_or(r.start_pfn), compound }
    }

    /// Index within its compound page, or `None` before the initialized range.
    #[must_use]
    pub fn index(&self, pfn: u64) -> Option<u64> {
        (pfn >= self.init_start).then(|| (pfn - self.init_start) % self.compound)
    }

    /// `head`, `page[1]`, `page[2]`, `page[3]`, `tail`, `page` (not compound), `altmap`
    /// (before the initialized range).
    #[must_use]
    pub fn role(&self, pfn: u64) -> &'static str {
        match self.index(pfn) {
            None => "before init (altmap)",
            Some(_) if self.compound == 1 => "page",
            Some(0) => "head",
            Some(1) => "page[1]",
            Some(2) => "page[2]",
            Some(3) => "page[3]",
            Some(_) => "tail",
        }
    }
}

/// Vmemmap pages of a region whose guest-physical address appears more than once (aliased by
/// vmemmap dedup or HVO), or that are shared with another region (`shared` gpas).
#[must_use]
pub fn aliased_vmemmap_pages(r: &Region, shared: &[u64]) -> Vec<bool> {
    let mut count: BTreeMap<u64, usize> = BTreeMap::new();
    for g in r.vmemmap_gpa.iter().flatten() {
        *count.entry(*g).or_default() += 1;
    }
    r.vmemmap_gpa.iter().map(|g| g.is_some_and(|g| count[&g] > 1 || shared.contains(&g))).collect()
}

/// One group of identical differences.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// Page role (`head`, `tail (aliased vmemmap)`, ...).
    pub role: String,
    /// Field name.
    pub field: String,
    /// Kernel symbol.
    pub kernel: String,
    /// Model symbol.
    pub model: String,
    /// Struct pages in the group.
    pub count: u64,
    /// First pfn (kernel numbering).
    pub first_pfn: u64,
    /// Last pfn.
    pub last_pfn: u64,
}

/// The first difference, `memmap-bench diff` style.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirstDiff {
    /// Kernel pfn.
    pub pfn: u64,
    /// Role.
    pub role: String,
    /// Field.
    pub field: String,
    /// Byte offset.
    pub offset: usize,
    /// Kernel raw word.
    pub kernel: u64,
    /// Model raw word.
    pub model: u64,
}

/// Result of one class check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// What was checked.
    pub name: String,
    /// `None` when it holds, else why not.
    pub failure: Option<String>,
}

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
    /// Struct pages the modelled kernel leaves as they were (the model's `stale_pfn_ranges`:
    /// their contents depend on what the memory held before), not compared.
    pub stale_pages: u64,
    /// Struct page fields the model declares history-dependent (`stale_fields`: field name and
    /// how many struct pages), not compared.
    pub stale_fields: Vec<(String, u64)>,
    /// hotplug: struct pages of the `MAX_PAGE_ORDER` blocks the guest allocated from after
    /// onlining (the kernel's head is not a free block of that order; the model takes them off
    /// its free list), not compared, nor are their pageblocks.
    pub allocated_pages: u64,
}

/// The model's `kernel_symbols` (`"0x..."` address to name) from its `meta.json`.
fn model_symbols(meta: &serde_json::Value) -> BTreeMap<u64, String> {
    meta.get("kernel_symbols")
        .and_then(serde_json::Value::as_object)
        .map(|o| {
            o.iter()
                .filter_map(|(a, n)| {
                    let a = u64::from_str_radix(a.strip_prefix("0x")?, 16).ok()?;
                    Some((a, n.as_str()?.to_string()))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The model's `stale_pfn_ranges` (`[start, end)` pairs) from its `meta.json`.
fn stale_ranges(meta: &serde_json::Value) -> Vec<(u64, u64)> {
    meta.get("stale_pfn_ranges").map(stale_ranges_in).unwrap_or_default()
}

/// A struct page field the model declares history-dependent (its `meta.json`'s
/// `stale_fields`): in the listed struct pages, the word at `offset` may hold, instead of the
/// model's value, one of `history_values` that an earlier owner of the memory left there.
/// Only a kernel value among `values` is left out (the model's own value compares equal anyway).
#[derive(Debug, Clone, PartialEq, Eq)]
struct StaleField {
    field: String,
    offset: usize,
    len: usize,
    ranges: Vec<(u64, u64)>,
    values: Vec<u64>,
}

/// The model's `stale_fields` from its `meta.json`.
fn stale_fields(meta: &serde_json::Value) -> Vec<StaleField> {
    meta.get("stale_fields")
        .and_then(serde_json::Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|f| {
                    let offset = usize::try_from(f.get("offset")?.as_u64()?).ok()?;
                    let len = usize::try_from(f.get("len")?.as_u64()?).ok()?;
                    (offset + len <= SP && len == 8).then_some(())?;
                    Some(StaleField {
                        field: f.get("field")?.as_str()?.to_string(),
                        offset,
                        len,
                        ranges: stale_ranges_in(f.get("pfn_ranges")?),
                        values: f
                            .get("history_values")?
                            .as_array()?
                            .iter()
                            .filter_map(|v| u64::from_str_radix(v.as_str()?.strip_prefix("0x")?, 16).ok())
                            .collect(),
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `[start, end)` pairs.
fn stale_ranges_in(v: &serde_json::Value) -> Vec<(u64, u64)> {
    v.as_array()
        .map(|a| a.iter().filter_map(|r| Some((r.get(0)?.as_u64()?, r.get(1)?.as_u64()?))).collect())
        .unwrap_or_default()
}

/// Compares the kernel's MOVABLE pageblocks with the model's `movable_pageblock_pfns`.
fn compare_pageblocks(r: &Region, model_meta: &serde_json::Value) -> Option<Vec<String>> {
    compare_pageblocks_except(r, model_meta, |_| false)
}

/// [`compare_pageblocks`] leaving out the pageblocks `skip` names.
fn compare_pageblocks_except(
    r: &Region,
    model_meta: &serde_json::Value,
    skip: impl Fn(u64) -> bool,
) -> Option<Vec<String>> {
    let first = r.pageblock_first_pfn?;
    let model: std::collections::BTreeSet<u64> = model_meta
        .get("movable_pageblock_pfns")?
        .as_array()?
        .iter()
        .filter_map(serde_json::Value::as_u64)
        .collect();
    let mut out = Vec::new();
    for (i, &mt) in r.pageblock_migratetypes.iter().enumerate() {
        let pfn = first + i as u64 * 512;
        if skip(pfn) {
            continue;
        }
        let k_movable = mt == 1;
        if k_movable != model.contains(&pfn) {
            out.push(format!(
                "pageblock {pfn:#x}: kernel migratetype {mt}, model {}",
                if model.contains(&pfn) { "MOVABLE" } else { "not MOVABLE" }
            ));
        }
    }
    Some(out)
}

/// Comparison of one configuration.
#[derive(Debug, Clone)]
pub struct DirResult {
    /// `kernel/config`.
    pub label: String,
    /// Per region.
    pub regions: Vec<RegionResult>,
    /// Kernel-side class checks.
    pub checks: Vec<Check>,
    /// Kernel warnings seen in the guest.
    pub warnings: Vec<String>,
}

/// The kernel-side normalizer of region `r`.
#[must_use]
pub fn kernel_normalizer(facts: &Facts, r: &Region) -> Normalizer {
    let kimage = facts
        .kernel_symbols
        .iter()
        .filter_map(|(k, v)| Some((u64::from_str_radix(k.strip_prefix("0x")?, 16).ok()?, v.clone())))
        .collect();
    let folio_heads = facts.regions.iter().filter_map(|x| x.folio.map(|f| (f.nid, f.head_pfn))).collect();
    // x86-64 with `nokaslr` and 4-level paging: the direct map at 0xffff888000000000, 64 TiB.
    let direct_map = (r.kind == "hotplug").then_some((0xffff_8880_0000_0000, 1u64 << 46));
    Normalizer {
        vmemmap_base: facts.vmemmap_base,
        vmemmap_size: facts.vmemmap_size,
        pgmap: r.pgmap_addr,
        kimage,
        folio_heads,
        direct_map,
    }
}

/// Refines a page pointer by class: into the compound head ([`Sym::Head`]), or, in an aliased
/// vmemmap page, into the same slot of another vmemmap page ([`Sym::AliasSelf`]). `pfn` is in
/// `geo`'s numbering (the model side is compared at the same offsets). A compound head is
/// never an alias (its vmemmap page is the compound page's own; with 6.x HVO the fake heads
/// alias *it*), so its pointers to other heads (the hstate free list) stay page pointers.
#[must_use]
pub fn classify(geo: Geometry, pfn: u64, s: Sym, aliased: bool) -> Sym {
    let per = (4096 / SP) as i64;
    match s {
        Sym::Page { delta, off, tag } => {
            let idx = geo.index(pfn);
            if let Some(idx) = idx {
                if geo.compound > 1 && idx > 0 && delta == -(idx as i64) {
                    return Sym::Head { off, tag };
                }
            }
            let head = geo.compound > 1 && idx == Some(0);
            if aliased && !head && delta != 0 && delta % per == 0 {
                return Sym::AliasSelf { off, tag };
            }
            s
        }
        other => other,
    }
}

/// Vmemmap pages (4 KiB blocks of `bytes`, whose first struct page is pfn `start_pfn`) that
/// read byte for byte like another block: how aliasing shows in a dump without frame
/// addresses (the model's).
#[must_use]
pub fn content_aliased(bytes: &[u8], start_pfn: u64) -> Vec<bool> {
    let first = (start_pfn * SP as u64 / 4096) * 4096 / SP as u64;
    let skip = ((start_pfn - first) as usize) * SP;
    // The 4 KiB blocks (the first one partial when the dump starts inside a vmemmap page).
    let mut blocks: Vec<&[u8]> = Vec::new();
    let rest = if skip == 0 {
        bytes
    } else {
        let cut = (4096 - skip).min(bytes.len());
        blocks.push(&bytes[..cut]);
        &bytes[cut..]
    };
    blocks.extend(rest.chunks(4096));
    // Every block that reads like another one is aliased, the first of them too: in a kernel
    // all vmemmap pages that map one frame are aliases of each other.
    let mut count: std::collections::HashMap<&[u8], usize> = std::collections::HashMap::new();
    for b in &blocks {
        *count.entry(b).or_default() += 1;
    }
    blocks.iter().map(|b| count[b] > 1).collect()
}

/// Compares kernel struct pages `k` (pfns `geo.start_pfn..`) with model struct pages `m`
/// (pfns `m_start..`), page by page after normalization. `aliased[i]` marks kernel vmemmap
/// page `i` (64 struct pages each, counted from the region's first vmemmap page) as aliased.
///
/// Kernel-image pointers (`&name` on both sides) are matched by consistent renaming: the first
/// time a kernel symbol meets a model symbol the two are paired in `renames`, and afterwards
/// each side must keep its partner (the model's addresses of kernel data, such as the hstate
/// free lists, are modelled, not the build's).
#[must_use]
#[allow(clippy::too_many_arguments)]
pub fn compare_pages(
    geo: Geometry,
    k: &[u8],
    kn: &Normalizer,
    m: &[u8],
    m_start: u64,
    mn: &Normalizer,
    aliased: &[bool],
    m_aliased: &[bool],
    renames: &mut BTreeMap<String, String>,
) -> (u64, Option<FirstDiff>, Vec<Group>) {
    let m_first_vpage = m_start * SP as u64 / 4096;
    let n = (k.len() / SP).min(m.len() / SP);
    let first_vpage = geo.start_pfn * SP as u64 / 4096;
    let mut groups: BTreeMap<(String, String, String, String), Group> = BTreeMap::new();
    let mut first = None;
    let mut differing = 0;
    for i in 0..n {
        let kpfn = geo.start_pfn + i as u64;
        let mpfn = m_start + i as u64;
        let kp = &k[i * SP..(i + 1) * SP];
        let mp = &m[i * SP..(i + 1) * SP];
        let vpage = (kpfn * SP as u64 / 4096 - first_vpage) as usize;
        let mut role = geo.role(kpfn).to_string();
        if aliased.get(vpage).copied().unwrap_or(false) {
            role.push_str(" (aliased vmemmap)");
        }
        let mut page_differs = false;
        for w in 0..SP / 8 {
            let (kv, mv) = (word(kp, w * 8), word(mp, w * 8));
            let k_alias = aliased.get(vpage).copied().unwrap_or(false);
            let m_alias =
                m_aliased.get((mpfn * SP as u64 / 4096 - m_first_vpage) as usize).copied().unwrap_or(false);
            let (ks, ms) = (
                classify(geo, kpfn, kn.sym(kpfn, kv), k_alias),
                classify(geo, kpfn, mn.sym(mpfn, mv), m_alias),
            );
            if ks == ms {
                continue;
            }
            let renamed = match (&ks, &ms) {
                (Sym::Kimage(_), Sym::Kimage(_)) | (Sym::Direct(_), Sym::Direct(_)) => {
                    Some((ks.to_string(), ms.to_string()))
                }
                _ => None,
            };
            if let Some((kname, mname)) = renamed {
                let taken = renames.iter().any(|(kk, mm)| *mm == mname && *kk != kname);
                match renames.get(&kname) {
                    Some(partner) if *partner == mname => continue,
                    None if !taken => {
                        renames.insert(kname, mname);
                        continue;
                    }
                    _ => {}
                }
            }
            page_differs = true;
            // Name the 4-byte half that differs in the _mapcount/_refcount word.
            let off = if w == 6 && (kv & 0xffff_ffff) == (mv & 0xffff_ffff) { 52 } else { w * 8 };
            let field = field_name(geo.role(kpfn), off).to_string();
            if first.is_none() {
                first = Some(FirstDiff {
                    pfn: kpfn,
                    role: role.clone(),
                    field: field.clone(),
                    offset: off,
                    kernel: kv,
                    model: mv,
                });
            }
            let key = (role.clone(), field.clone(), ks.to_string(), ms.to_string());
            let g = groups.entry(key).or_insert_with(|| Group {
                role: role.clone(),
                field,
                kernel: ks.to_string(),
                model: ms.to_string(),
                count: 0,
                first_pfn: kpfn,
                last_pfn: kpfn,
            });
            g.count += 1;
            g.last_pfn = kpfn;
        }
        if page_differs {
            differing += 1;
        }
    }
    let mut groups: Vec<Group> = groups.into_values().collect();
    groups.sort_by_key(|g| (g.first_pfn, g.role.clone(), g.field.clone()));
    (differing, first, groups)
}

/// Struct pages of one region to check: `(pfn, 64 bytes)` in pfn order (the whole region, or
/// the runs of a golden extract), and the guest-physical frame of each vmemmap page
/// (`pfn * 64 / 4096`) where known.
pub struct PageSet<'a> {
    /// The region.
    pub region: &'a Region,
    /// Its pages.
    pub pages: Vec<(u64, &'a [u8])>,
    /// Vmemmap page number to frame.
    pub gpa: BTreeMap<u64, u64>,
}

impl<'a> PageSet<'a> {
    /// The whole region from its dump bytes and facts.
    #[must_use]
    pub fn whole(region: &'a Region, bytes: &'a [u8]) -> Self {
        let first_vpage = region.start_pfn * SP as u64 / 4096;
        let pages =
            bytes.chunks_exact(SP).enumerate().map(|(i, p)| (region.start_pfn + i as u64, p)).collect();
        let gpa = region
            .vmemmap_gpa
            .iter()
            .enumerate()
            .filter_map(|(i, g)| g.map(|g| (first_vpage + i as u64, g)))
            .collect();
        PageSet { region, pages, gpa }
    }
}

/// The class checks of the regions of one configuration (see the module documentation):
/// per region, the pgmap words are equal, self pointers point at their own list head and tails
/// resolve to their head; over all regions, struct pages read through the same vmemmap frame
/// and slot are identical (aliased vmemmap pages, including a node-wide HVO tail page shared
/// by several folios).
#[must_use]
pub fn class_checks(facts: &Facts, sets: &[PageSet<'_>]) -> Vec<Check> {
    let mut out = Vec::new();
    for set in sets {
        let r = set.region;
        let geo = Geometry::of(r);
        let kn = kernel_normalizer(facts, r);
        let what = format!("region at pfn {:#x}", r.start_pfn);
        if r.kind == "zone-device" {
            let mut bad = None;
            let mut seen = 0;
            for &(pfn, p) in &set.pages {
                if geo.index(pfn) == Some(0) || (geo.compound == 1 && geo.index(pfn).is_some()) {
                    seen += 1;
                    let v = word(p, 8);
                    if Some(v) != r.pgmap_addr && bad.is_none() {
                        bad = Some(format!("pfn {pfn:#x} holds {v:#x}"));
                    }
                }
            }
            out.push(Check {
                name: format!("{what}: pgmap words equal ({seen} pages)"),
                failure: bad.or_else(|| (seen == 0).then(|| "no page holds a pgmap".into())),
            });
        }
        let mut bad_self = None;
        let mut bad_tail = None;
        let mut selfs = 0;
        let mut tails = 0;
        let mut fake_heads = 0;
        let mut stale = 0;
        let mut frame_uses: BTreeMap<u64, usize> = BTreeMap::new();
        for g in set.gpa.values() {
            *frame_uses.entry(*g).or_default() += 1;
        }
        let aliased = |pfn: u64| set.gpa.get(&(pfn * SP as u64 / 4096)).is_some_and(|g| frame_uses[g] > 1);
        for &(pfn, p) in &set.pages {
            if p.iter().all(|&b| b == 0) {
                continue;
            }
            for w in 1..SP / 8 {
                if let Sym::Page { delta: 0, off, tag: 0 } = kn.sym(pfn, word(p, w * 8)) {
                    selfs += 1;
                    let o = off as usize;
                    if o != w * 8 && o + 8 != w * 8 && bad_self.is_none() {
                        bad_self = Some(format!("pfn {pfn:#x} word @{} points at its own @{o}", w * 8));
                    }
                }
            }
            let ch = word(p, 8);
            if let Some(idx) = geo.index(pfn).filter(|&x| x > 0 && geo.compound > 1) {
                let head_addr = facts.vmemmap_base + (pfn - idx) * SP as u64;
                let own = facts.vmemmap_base + pfn * SP as u64;
                if ch & 1 == 0 && aliased(pfn) {
                    // A tail read through a frame that also holds the head (Linux 6.x HVO
                    // maps every tail vmemmap page onto the first): a "fake head", which
                    // page_fixed_fake_head() sees through. The frame check covers its bytes.
                    fake_heads += 1;
                    continue;
                }
                if ch & 1 == 0
                    && r.kind == "zone-device"
                    && ch != r.pgmap_addr.unwrap_or(0)
                    && word(p, 0) & (1 << 6) == 0
                {
                    // Not written as a tail at all: a struct page left from an earlier
                    // mapping of the range (its own pgmap pointer, no PG_head). Linux before
                    // "mm/mm_init: fix uninitialized struct pages for ZONE_DEVICE" leaves
                    // tails 128.. of compound pages in early sections like this.
                    stale += 1;
                    continue;
                }
                tails += 1;
                let resolved = if ch & 1 == 0 {
                    None
                } else if ch == head_addr + 1 {
                    Some(head_addr)
                } else {
                    // Linux 7.x compound_info: a mask; the head is the tail's own address masked.
                    Some(own & (ch & !1))
                };
                // A tail read through an aliased frame carries the compound word of the page
                // the frame was first written for; with the mask form that is the same head.
                if resolved != Some(head_addr) && bad_tail.is_none() {
                    bad_tail = Some(format!(
                        "pfn {pfn:#x}: compound word {ch:#x} does not resolve to head {head_addr:#x}"
                    ));
                }
            }
        }
        out.push(Check {
            name: format!("{what}: self pointers point at their own list head ({selfs})"),
            failure: bad_self,
        });
        if geo.compound > 1 {
            out.push(Check {
                name: format!(
                    "{what}: tails resolve to their head ({tails}; {fake_heads} fake heads read through aliased frames; \
                     {stale} stale struct pages never initialized as tails)"
                ),
                failure: bad_tail,
            });
        }
    }
    // Same frame and slot => same bytes.
    let mut by_frame: BTreeMap<(u64, u64), (u64, &[u8])> = BTreeMap::new();
    let mut bad = None;
    let mut aliases = 0u64;
    let mut frames_per_region: Vec<std::collections::BTreeSet<u64>> = Vec::new();
    for set in sets {
        let mut frames = std::collections::BTreeSet::new();
        for &(pfn, p) in &set.pages {
            let vpage = pfn * SP as u64 / 4096;
            let Some(&g) = set.gpa.get(&vpage) else { continue };
            frames.insert(g);
            let slot = pfn % (4096 / SP as u64);
            match by_frame.get(&(g, slot)) {
                Some(&(first, q)) => {
                    aliases += 1;
                    if q != p && bad.is_none() {
                        bad = Some(format!(
                            "pfns {first:#x} and {pfn:#x} share frame {g:#x} but read differently"
                        ));
                    }
                }
                None => {
                    by_frame.insert((g, slot), (pfn, p));
                }
            }
        }
        frames_per_region.push(frames);
    }
    out.push(Check {
        name: format!("struct pages read through one vmemmap frame are identical ({aliases} aliased reads)"),
        failure: bad,
    });
    let shared = if frames_per_region.len() > 1 {
        let first = &frames_per_region[0];
        first.iter().filter(|g| frames_per_region[1..].iter().all(|f| f.contains(g))).count()
    } else {
        0
    };
    if shared > 0 {
        out.push(Check {
            name: format!("{shared} vmemmap frame(s) shared by every region (a node-wide shared tail page)"),
            failure: None,
        });
    }
    out
}

/// Runs the model for every region of a dump directory and compares.
///
/// # Errors
///
/// The dumps cannot be read or the model fails.
pub fn compare_dir(dir: &Path, facts: &Facts) -> Result<DirResult> {
    let mut all_bytes: Vec<Vec<u8>> = Vec::new();
    for i in 0..facts.regions.len() {
        all_bytes.push(facts.region_bytes(dir, i)?);
    }
    let results = compare_regions(facts, |i| Ok((all_bytes[i].clone(), None)))?;
    let sets: Vec<PageSet<'_>> =
        facts.regions.iter().zip(&all_bytes).map(|(r, b)| PageSet::whole(r, b)).collect();
    let checks = class_checks(facts, &sets);
    Ok(DirResult {
        label: format!("{}/{}", facts.kernel.id, facts.config),
        regions: results,
        checks,
        warnings: facts.warnings.clone(),
    })
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
    kernel: impl Fn(usize) -> Result<KernelRegion>,
) -> Result<Vec<RegionResult>> {
    let mut results = Vec::new();
    let mut renames: BTreeMap<String, String> = BTreeMap::new();
    let mut hugetlb_model: Option<(ModelDump, Vec<(u64, u32)>)> = None;
    let hugetlb: Vec<usize> =
        (0..facts.regions.len()).filter(|&i| facts.regions[i].kind == "hugetlb").collect();
    // Gpas shared between hugetlb regions (a node-wide shared tail page).
    let mut gpa_regions: BTreeMap<u64, usize> = BTreeMap::new();
    for &i in &hugetlb {
        let set: std::collections::BTreeSet<u64> =
            facts.regions[i].vmemmap_gpa.iter().flatten().copied().collect();
        for g in set {
            *gpa_regions.entry(g).or_default() += 1;
        }
    }
    let shared: Vec<u64> = gpa_regions.iter().filter(|(_, c)| **c > 1).map(|(g, _)| *g).collect();
    for (i, r) in facts.regions.iter().enumerate() {
        let (kbytes, known) = kernel(i)?;
        let kn = kernel_normalizer(facts, r);
        let geo = Geometry::of(r);
        let aliased = aliased_vmemmap_pages(r, &shared);
        let mut pageblocks = None;
        let mut stale = Vec::new();
        let mut fields = Vec::new();
        let (mbytes, m_start, mn, argv) = match r.kind.as_str() {
            "zone-device" => {
                let md = ModelDump::run(&model::zone_device_spec(facts, r)?)?;
                let pgmap = md.meta.get("pgmap_addr").and_then(serde_json::Value::as_u64);
                let mn = Normalizer {
                    vmemmap_base: md.vmemmap_base,
                    vmemmap_size: md.span(),
                    pgmap,
                    ..Normalizer::default()
                };
                pageblocks = compare_pageblocks(r, &md.meta);
                stale = stale_ranges(&md.meta);
                (md.bytes, md.start_pfn, mn, md.argv)
            }
            "hugetlb" => {
                if hugetlb_model.is_none() {
                    let md = ModelDump::run(&model::hugetlb_spec(facts)?)?;
                    let mut folios: Vec<(u64, u32)> = md
                        .meta
                        .get("folios")
                        .and_then(serde_json::Value::as_array)
                        .context("model meta has no folios")?
                        .iter()
                        .filter_map(|f| Some((f.get("head_pfn")?.as_u64()?, f.get("nid")?.as_u64()? as u32)))
                        .collect();
                    folios.sort_by_key(|&(p, n)| (n, p));
                    hugetlb_model = Some((md, folios));
                }
                let (md, folios) = hugetlb_model.as_ref().context("model")?;
                fields = stale_fields(&md.meta);
                // The k-th kernel folio of a node is compared with the model's k-th of that node.
                let rank = hugetlb
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
                let mn = Normalizer {
                    vmemmap_base: md.vmemmap_base,
                    vmemmap_size: md.span(),
                    pgmap: None,
                    kimage: model_symbols(&md.meta),
                    folio_heads: folios.iter().map(|&(p, n)| (n, p)).collect(),
                    direct_map: None,
                };
                (md.bytes[off..off + len].to_vec(), head, mn, md.argv.clone())
            }
            "hotplug" => {
                let md = ModelDump::run(&model::hotplug_spec(facts, r)?)?;
                let page_offset = model::kernel_config(facts)?.0.page_offset;
                let mn = Normalizer {
                    vmemmap_base: md.vmemmap_base,
                    vmemmap_size: md.span(),
                    direct_map: Some((page_offset, 1u64 << 46)),
                    ..Normalizer::default()
                };
                let block = 1u64 << crate::run::MAX_PAGE_ORDER;
                let taken = &r.allocated_blocks;
                pageblocks =
                    compare_pageblocks_except(r, &md.meta, |pfn| taken.contains(&(pfn & !(block - 1))));
                (md.bytes, md.start_pfn, mn, md.argv)
            }
            other => bail!("unknown region kind {other}"),
        };
        let m_aliased = content_aliased(&mbytes, m_start);
        // Stale struct pages are compared as equal: blank them on both sides.
        let (mut kbytes_cmp, mut mbytes_cmp) = (kbytes.clone(), mbytes.clone());
        let mut stale_pages = 0;
        if let Some(known) = &known {
            // The model's pages are compared index for index with the region's.
            for (ki, _) in known.iter().enumerate().filter(|(_, k)| !**k) {
                if let (Some(kp), Some(mp)) =
                    (kbytes_cmp.get_mut(ki * SP..(ki + 1) * SP), mbytes_cmp.get_mut(ki * SP..(ki + 1) * SP))
                {
                    kp.fill(0);
                    mp.fill(0);
                }
            }
        }
        for &(a, b) in &stale {
            for pfn in a..b {
                let (ki, mi) = (pfn.wrapping_sub(geo.start_pfn) as usize, pfn.wrapping_sub(m_start) as usize);
                // Only a struct page the kernel left as it was too is left out: one the kernel
                // initialized as a compound tail (bit 0 of its compound word) is compared, so a
                // model that wrongly declares pages stale differs instead of hiding them.
                let kernel_tail = kbytes_cmp.get(ki * SP + 8..ki * SP + 16).is_some_and(|w| w[0] & 1 == 1);
                if kernel_tail {
                    continue;
                }
                if let (Some(kp), Some(mp)) =
                    (kbytes_cmp.get_mut(ki * SP..(ki + 1) * SP), mbytes_cmp.get_mut(mi * SP..(mi + 1) * SP))
                {
                    kp.fill(0);
                    mp.fill(0);
                    stale_pages += 1;
                }
            }
        }
        // hotplug: the blocks the guest allocated from after onlining, which the kernel's heads
        // confirm: a head the extract holds must not be a free MAX_PAGE_ORDER block, and every
        // other block's head must be one.
        let mut allocated_pages = 0;
        if r.kind == "hotplug" {
            let order = crate::run::MAX_PAGE_ORDER;
            let block = 1u64 << order;
            let mut pfn = r.start_pfn.next_multiple_of(block);
            while pfn + block <= r.start_pfn + r.nr_pages {
                let i = (pfn - r.start_pfn) as usize;
                let head_known = known.as_ref().is_none_or(|k| k.get(i).copied().unwrap_or(false));
                let taken = r.allocated_blocks.contains(&pfn);
                if head_known {
                    let free = crate::run::is_free_block_head(&kbytes[i * SP..(i + 1) * SP], order);
                    if free == taken {
                        bail!(
                            "hotplug block {pfn:#x}: the facts say {}, the kernel's head says {}",
                            if taken { "allocated" } else { "free" },
                            if free { "free" } else { "allocated" }
                        );
                    }
                }
                if taken {
                    for k in i..i + block as usize {
                        if let (Some(kp), Some(mp)) = (
                            kbytes_cmp.get_mut(k * SP..(k + 1) * SP),
                            mbytes_cmp.get_mut(k * SP..(k + 1) * SP),
                        ) {
                            kp.fill(0);
                            mp.fill(0);
                            allocated_pages += 1;
                        }
                    }
                }
                pfn += block;
            }
        }
        let mut stale_field_pages = Vec::new();
        for f in &fields {
            let mut n = 0;
            for &(a, b) in &f.ranges {
                for pfn in a.max(m_start)..b.min(m_start + r.nr_pages) {
                    let i = (pfn - m_start) as usize;
                    if known.as_ref().is_some_and(|k| !k.get(i).copied().unwrap_or(false)) {
                        continue;
                    }
                    let at = i * SP + f.offset;
                    let history = kbytes_cmp.get(at..at + 8).is_some_and(|w| {
                        f.values.contains(&u64::from_le_bytes(w.try_into().unwrap_or([0; 8])))
                    });
                    if !history {
                        continue;
                    }
                    if let (Some(kp), Some(mp)) =
                        (kbytes_cmp.get_mut(at..at + f.len), mbytes_cmp.get_mut(at..at + f.len))
                    {
                        kp.fill(0);
                        mp.fill(0);
                        n += 1;
                    }
                }
            }
            if n > 0 {
                stale_field_pages.push((f.field.clone(), n));
            }
        }
        let (differing, first, groups) = compare_pages(
            geo,
            &kbytes_cmp,
            &kn,
            &mbytes_cmp,
            m_start,
            &mn,
            &aliased,
            &m_aliased,
            &mut renames,
        );
        let label = match &r.folio {
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
        };
        results.push(RegionResult {
            label,
            model_argv: argv,
            pages: known.as_ref().map_or(r.nr_pages, |k| k.iter().filter(|&&x| x).count() as u64),
            differing_pages: differing,
            first,
            groups,
            pageblocks,
            stale_pages,
            stale_fields: stale_field_pages,
            allocated_pages,
        });
    }
    Ok(results)
}

/// Whether any struct page or pageblock differs from the model.
#[must_use]
pub fn differs(r: &DirResult) -> bool {
    r.regions.iter().any(|x| x.differing_pages > 0 || x.pageblocks.as_ref().is_some_and(|d| !d.is_empty()))
}

/// One-line verdict.
#[must_use]
pub fn verdict(r: &DirResult) -> String {
    let diff: u64 = r.regions.iter().map(|x| x.differing_pages).sum();
    let pb: usize = r.regions.iter().filter_map(|x| x.pageblocks.as_ref()).map(Vec::len).sum();
    let pages: u64 = r.regions.iter().map(|x| x.pages).sum();
    let checks_ok = r.checks.iter().all(|c| c.failure.is_none());
    let groups: usize = r.regions.iter().map(|x| x.groups.len()).sum();
    format!(
        "{} of {pages} struct pages differ ({groups} difference groups), {pb} pageblock types differ; class checks {}",
        diff,
        if checks_ok { "pass" } else { "FAIL" }
    )
}

/// The report of one configuration.
#[must_use]
pub fn render(r: &DirResult, verbose: bool) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "### {}", r.label);
    for w in &r.warnings {
        let _ = writeln!(s, "kernel warning: {w}");
    }
    for c in &r.checks {
        let _ = writeln!(s, "check {}: {}", c.name, c.failure.as_deref().unwrap_or("ok"));
    }
    for reg in &r.regions {
        let _ = writeln!(s, "- {}: {} of {} struct pages differ", reg.label, reg.differing_pages, reg.pages);
        let _ = writeln!(s, "  model: memmap-bench {}", reg.model_argv.join(" "));
        if reg.stale_pages > 0 {
            let _ = writeln!(
                s,
                "  {} struct pages the kernel leaves as they were (not compared: they hold what the memory held before)",
                reg.stale_pages
            );
        }
        if reg.allocated_pages > 0 {
            let _ = writeln!(
                s,
                "  {} struct pages of blocks the guest allocated from after onlining (their heads are no free MAX_PAGE_ORDER block; not compared, the model takes the blocks off its free list)",
                reg.allocated_pages
            );
        }
        for (field, n) in &reg.stale_fields {
            let _ = writeln!(
                s,
                "  {field} of {n} struct pages holds a value the allocator left there (declared by the model, not compared)"
            );
        }
        match &reg.pageblocks {
            Some(d) if d.is_empty() => {
                let _ = writeln!(s, "  pageblock migrate types: identical");
            }
            Some(d) => {
                let _ = writeln!(s, "  pageblock migrate types: {} differ; first: {}", d.len(), d[0]);
            }
            None => {}
        }
        if let Some(f) = &reg.first {
            let _ = writeln!(
                s,
                "  first difference at pfn {:#x} ({}), field {} (byte {}): kernel = {:#018x}, model = {:#018x}",
                f.pfn, f.role, f.field, f.offset, f.kernel, f.model
            );
        }
        let limit = if verbose { usize::MAX } else { 12 };
        for g in reg.groups.iter().take(limit) {
            let _ = writeln!(
                s,
                "  | {} | {} | kernel {} | model {} | {} pages, pfns {:#x}..={:#x} |",
                g.role, g.field, g.kernel, g.model, g.count, g.first_pfn, g.last_pfn
            );
        }
        if reg.groups.len() > limit {
            let _ = writeln!(s, "  ... {} more groups (--verbose)", reg.groups.len() - limit);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geo() -> Geometry {
        Geometry { start_pfn: 0x1000, init_start: 0x1000, compound: 512 }
    }

    #[test]
    fn pointers_become_symbols() {
        let n = Normalizer {
            vmemmap_base: 0xffff_ea00_0000_0000,
            vmemmap_size: 1 << 40,
            pgmap: Some(0xffff_8880_0000_1000),
            kimage: BTreeMap::new(),
            folio_heads: Vec::new(),
            direct_map: None,
        };
        let own = 0x1005u64;
        let addr = |pfn: u64| 0xffff_ea00_0000_0000 + pfn * 64;
        assert_eq!(n.sym(own, addr(own) + 8), Sym::Page { delta: 0, off: 8, tag: 0 });
        assert_eq!(classify(geo(), own, n.sym(own, addr(0x1000) + 1), false), Sym::Head { off: 0, tag: 1 });
        assert_eq!(n.sym(own, 0xffff_8880_0000_1000), Sym::Pgmap);
        assert_eq!(n.sym(own, 0xdead_0000_0000_0400), Sym::Raw(0xdead_0000_0000_0400));
        // An aliased page's self pointer written for the same slot 64 pages away.
        assert_eq!(
            classify(geo(), own, n.sym(own, addr(own + 128) + 8), true),
            Sym::AliasSelf { off: 8, tag: 0 }
        );
        assert_eq!(
            classify(geo(), own, n.sym(own, addr(own + 128) + 8), false),
            Sym::Page { delta: 128, off: 8, tag: 0 }
        );
    }

    #[test]
    fn roles_follow_the_compound_geometry() {
        let g = Geometry { start_pfn: 0x1000, init_start: 0x1200, compound: 512 };
        assert_eq!(g.role(0x11ff), "before init (altmap)");
        assert_eq!(g.role(0x1200), "head");
        assert_eq!(g.role(0x1401), "page[1]");
        assert_eq!(g.role(0x1404), "tail");
        assert_eq!(Geometry { compound: 1, ..g }.role(0x1300), "page");
    }

    #[test]
    fn differences_are_grouped_and_the_first_is_named() {
        let n = Normalizer::default();
        let g = Geometry { start_pfn: 10, init_start: 10, compound: 1 };
        let k = vec![0u8; 64 * 3];
        let mut m = k.clone();
        m[64 + 52] = 1; // _refcount of the second page
        m[128 + 52] = 1;
        let (differing, first, groups) = compare_pages(g, &k, &n, &m, 10, &n, &[], &[], &mut BTreeMap::new());
        assert_eq!(differing, 2);
        let f = first.expect("a difference");
        assert_eq!((f.pfn, f.field.as_str(), f.offset), (11, "_refcount", 52));
        assert_eq!(groups.len(), 1);
        assert_eq!((groups[0].count, groups[0].first_pfn, groups[0].last_pfn), (2, 11, 12));
    }

    #[test]
    fn identical_blocks_are_content_aliases() {
        // Every vmemmap page that reads like another is an alias, the first of them too.
        let mut b = vec![0u8; 4096 * 3];
        b[0] = 1;
        b[4096] = 2;
        b[8192] = 2;
        assert_eq!(content_aliased(&b, 0), vec![false, true, true]);
        // A dump starting inside a vmemmap page: the partial first block is a block of its own.
        let c = vec![0u8; 4096 + 64];
        assert_eq!(content_aliased(&c, 63), vec![false, false]);
        let d = vec![7u8; 64 + 4096 * 2];
        assert_eq!(content_aliased(&d, 63), vec![false, true, true]);
    }
}
