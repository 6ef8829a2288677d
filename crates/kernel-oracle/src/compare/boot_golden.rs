//! Golden extracts of the boot configurations, so that `cargo test` boots the model on real
//! guests' layouts offline: `golden/<kernel>/<config>/boot.json` (the kernel's facts, the model's
//! inputs per node, per zone its counters, pageblocks, class counts and sampled runs) and
//! `pages.bin.gz` (the sampled struct pages). The sample keeps every free head, every page used
//! since boot or holding a merge's poison, every reserved page referenced after boot, and of every
//! run of one class its ends and every 1024th page.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result, bail};
use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use memmap_core::offsets;
use memmap_core::{KernelConfig, PfnRange, ReservedRange};
use serde::{Deserialize, Serialize};

use crate::compare::boot::{KernelCounts, KernelPages, KernelZone, NodeInput};
use crate::facts::zones::Class;
use crate::facts::{Facts, JSON_LIMITS, KernelFacts, MAX_JSON_BYTES, MAX_PAGES_BYTES, MAX_REGION_PAGES};

/// The extract's description.
pub const JSON_FILE: &str = "boot.json";

/// `boot.json`'s format.
pub const FORMAT: u32 = 1;
/// Every 1024th page of a run is kept.
const STRIDE: u64 = 1024;
/// Tails kept after each free block's head.
const HEAD_TAILS: u64 = 4;

/// `boot.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BootGolden {
    /// [`FORMAT`].
    pub format: u32,
    /// Configuration name.
    pub config: String,
    /// The kernel.
    pub kernel: KernelFacts,
    /// Size of the vmemmap area (pointers inside it are struct page pointers).
    pub vmemmap_size: u64,
    /// The guest's `/proc/cmdline` (it says how the kernel initialized the memmap:
    /// [`kernel_mode`](crate::compare::boot::kernel_mode)); older extracts have none.
    #[serde(default)]
    pub cmdline: String,
    /// The nodes.
    pub nodes: Vec<NodeGolden>,
}

/// One node of `boot.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeGolden {
    /// Node id.
    pub nid: u32,
    /// Memory ranges `[start, end)`.
    pub memory: Vec<(u64, u64)>,
    /// Reserved ranges `[start, end)`.
    pub reserved: Vec<(u64, u64)>,
    /// Runs `[start, end)` of pages allocated after boot.
    pub taken: Vec<(u64, u64)>,
    /// Runs of vmemmap frames `(first frame, frames, section)`.
    pub frames: Vec<(u64, u64, u64)>,
    /// The last zone's samples run on to its section's end ([`NodeInput::section_tail`]).
    #[serde(default)]
    pub section_tail: bool,
    /// The zones.
    pub zones: Vec<ZoneGolden>,
}

/// One zone of `boot.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ZoneGolden {
    /// Zone index.
    pub zone: u32,
    /// Zone name.
    pub name: String,
    /// First pfn.
    pub start_pfn: u64,
    /// Pages spanned.
    pub nr_pages: u64,
    /// First pfn of the first pageblock.
    pub pageblock_first_pfn: u64,
    /// The pageblocks' migrate types, two hex digits each.
    pub pageblocks: String,
    /// The kernel's counters.
    pub counts: KernelCounts,
    /// Pages of each comparison class ([`crate::compare::boot::CmpClass::ALL`]) in the whole zone.
    pub class_pages: Vec<u64>,
    /// Runs of sampled pfns `(first, pages, class)`, ascending, the class as in [`Class::ALL`].
    pub samples: Vec<(u64, u64, u8)>,
}

/// The pfns of `z` the extract keeps.
fn sample(z: &KernelZone, keep: &dyn Fn(u64) -> bool) -> Vec<u64> {
    let mut out = Vec::new();
    let mut prev: Option<Class> = None;
    let mut after_head = u64::MAX;
    let pfns: Vec<u64> = z.pfns().collect();
    for (i, &pfn) in pfns.iter().enumerate() {
        let c = z.class(pfn);
        let next = pfns.get(i + 1).and_then(|&p| z.class(p));
        let edge = c != prev || c != next;
        if c == Some(Class::FreeHead) {
            after_head = pfn;
        }
        // The first tails of a free block show how it was freed (whole, or page by page with
        // the merges' poison).
        let first_tails = pfn.wrapping_sub(after_head) <= HEAD_TAILS;
        if edge || first_tails || pfn % STRIDE == 0 || keep(pfn) {
            out.push(pfn);
        }
        prev = c;
    }
    out
}

/// Writes the golden extract of the boot run in `dump` under `golden/<kernel>/<config>/`.
///
/// # Errors
///
/// The run's files cannot be read, the model differs from the run (only equal runs become
/// golden extracts), or the extract cannot be written.
pub fn write(dump: &Path, facts: &Facts, golden: &Path) -> Result<()> {
    let kernel = crate::files::name("the facts' kernel id", &facts.kernel.id)?;
    let config = crate::files::name("the facts' configuration", &facts.config)?;
    let (cfg, nodes) = crate::compare::boot::inputs(dump, facts)?;
    let mode = crate::compare::boot::kernel_mode(&facts.cmdline);
    let results = crate::compare::boot::compare_nodes(&cfg, facts.vmemmap_size, mode, &nodes)?;
    if !crate::compare::boot::equal(&results) {
        bail!("{}: the model differs from the guest, so no golden extract is written", dump.display());
    }
    let mut pages = Vec::new();
    let mut out_nodes = Vec::new();
    for (n, r) in nodes.iter().zip(&results) {
        let mut zones = Vec::new();
        for (z, zr) in n.zones.iter().zip(&r.zones) {
            let keep = |pfn: u64| {
                let k = z.page(pfn).unwrap_or(&[0; 64]);
                let c = crate::compare::boot::class_of(&cfg, n, pfn, k);
                let poison = crate::facts::read::word(k, offsets::LRU_NEXT) == cfg.list_poison().0;
                poison
                    || matches!(
                        c,
                        crate::compare::boot::CmpClass::FreeUsed
                            | crate::compare::boot::CmpClass::ReservedReferenced
                    )
            };
            let kept = sample(z, &keep);
            let mut samples: Vec<(u64, u64, u8)> = Vec::new();
            for &pfn in &kept {
                pages.extend_from_slice(z.page(pfn).context("a sampled page outside its zone")?);
                let class =
                    z.class(pfn).map_or(0, |c| Class::ALL.iter().position(|&k| k == c).unwrap_or(0) as u8);
                match samples.last_mut() {
                    Some(last) if last.0 + last.1 == pfn && last.2 == class => last.1 += 1,
                    _ => samples.push((pfn, 1, class)),
                }
            }
            zones.push(ZoneGolden {
                zone: z.zone,
                name: z.name.clone(),
                start_pfn: z.start_pfn,
                nr_pages: z.nr_pages,
                pageblock_first_pfn: z.pageblock_first_pfn,
                pageblocks: z.pageblocks.iter().map(|b| format!("{b:02x}")).collect(),
                counts: z.counts,
                class_pages: zr.classes.iter().map(|c| c.pages).collect(),
                samples,
            });
        }
        let l = crate::compare::boot::node_layout(n);
        let (memory, reserved, taken, frames) = (l.memory, l.reserved, l.taken, l.bootmem);
        out_nodes.push(NodeGolden {
            nid: n.nid,
            memory,
            reserved,
            taken,
            frames,
            section_tail: l.section_tail,
            zones,
        });
    }
    let g = BootGolden {
        format: FORMAT,
        config: facts.config.clone(),
        kernel: facts.kernel.clone(),
        vmemmap_size: facts.vmemmap_size,
        cmdline: facts.cmdline.clone(),
        nodes: out_nodes,
    };
    let out = crate::files::create_dirs_below(golden, &Path::new(kernel).join(config))?;
    crate::files::write_file(&out.join("boot.json"), (serde_json::to_string(&g)? + "\n").as_bytes())?;
    let mut gz = GzEncoder::new(Vec::new(), Compression::best());
    gz.write_all(&pages)?;
    crate::files::write_file(&out.join("pages.bin.gz"), &gz.finish()?)?;
    eprintln!("  golden boot extract: {} ({} struct pages kept)", out.display(), pages.len() / 64);
    Ok(())
}

/// A boot golden extract read back: the model's configuration, the vmemmap size and the nodes.
#[derive(Debug)]
pub struct LoadedBoot {
    /// `boot.json`.
    pub golden: BootGolden,
    /// The model configuration of its kernel.
    pub cfg: KernelConfig,
    /// The nodes, with their sampled pages.
    pub nodes: Vec<NodeInput>,
}

/// Reads `dir`'s extract, checking every size and range before anything is allocated from it.
///
/// # Errors
///
/// Missing, oversized or malformed files, or contents that disagree.
pub fn load(dir: &Path) -> Result<LoadedBoot> {
    let json = memmap_dump::read_file(&dir.join("boot.json"), MAX_JSON_BYTES, memmap_dump::Links::Follow)?;
    let gz = memmap_dump::read_file(&dir.join("pages.bin.gz"), MAX_PAGES_BYTES, memmap_dump::Links::Follow)?;
    parse(dir, &json, &gz)
}

/// [`load`] from the files' contents (`dir` names them in errors).
///
/// # Errors
///
/// As [`load`].
pub fn parse(dir: &Path, json: &[u8], gz: &[u8]) -> Result<LoadedBoot> {
    memmap_dump::check_json(json, &JSON_LIMITS, &dir.join("boot.json"))?;
    let golden: BootGolden =
        serde_json::from_slice(json).with_context(|| format!("{}/boot.json", dir.display()))?;
    if golden.format != FORMAT {
        bail!("{}/boot.json: format {} (expected {FORMAT})", dir.display(), golden.format);
    }
    let cfg = crate::facts::model_config(&golden.kernel.kconfig, &golden.kernel.release)?;
    let mut sampled = 0u64;
    for n in &golden.nodes {
        check_node(n, golden.vmemmap_size)
            .with_context(|| format!("{}/boot.json: node {}", dir.display(), n.nid))?;
        sampled += n.zones.iter().flat_map(|z| &z.samples).map(|s| s.1).sum::<u64>();
    }
    let want = sampled.checked_mul(64).filter(|&b| b <= MAX_PAGES_BYTES).context("too many sampled pages")?;
    let raw = memmap_dump::read_capped(GzDecoder::new(gz), MAX_PAGES_BYTES, gz.len() as u64)?
        .with_context(|| format!("{}/pages.bin.gz: more than {MAX_PAGES_BYTES} bytes", dir.display()))?;
    if raw.len() as u64 != want {
        bail!("{}/pages.bin.gz: {} bytes, the samples {want}", dir.display(), raw.len());
    }
    let mut pages = raw.chunks_exact(64);
    let mut nodes = Vec::new();
    for n in &golden.nodes {
        let mut zones = Vec::new();
        for z in &n.zones {
            let mut m = BTreeMap::new();
            for &(first, count, class) in &z.samples {
                let class = *Class::ALL.get(class as usize).context("a sample's class")?;
                for pfn in first..first + count {
                    let page: [u8; 64] = pages.next().context("pages.bin.gz too short")?.try_into()?;
                    m.insert(pfn, (class, page));
                }
            }
            // Pairs of ASCII hex digits (`check_node`).
            let pageblocks =
                z.pageblocks.as_bytes().chunks_exact(2).map(|d| (hex(d[0]) << 4) | hex(d[1])).collect();
            zones.push(KernelZone {
                zone: z.zone,
                name: z.name.clone(),
                start_pfn: z.start_pfn,
                nr_pages: z.nr_pages,
                pageblock_first_pfn: z.pageblock_first_pfn,
                pageblocks,
                counts: z.counts,
                pages: KernelPages::Sample(m),
            });
        }
        let mut frames: Vec<(u64, u64)> =
            n.frames.iter().flat_map(|&(f, c, s)| (f..f + c).map(move |f| (f, s))).collect();
        frames.sort_unstable();
        nodes.push(NodeInput {
            nid: n.nid,
            zones,
            memory: n.memory.iter().map(|&(s, e)| PfnRange::new(s, e)).collect(),
            reserved: n.reserved.iter().map(|&(s, e)| ReservedRange::new(s, e)).collect(),
            taken: n.taken.iter().flat_map(|&(s, e)| s..e).collect(),
            frames,
            section_tail: n.section_tail,
        });
    }
    Ok(LoadedBoot { golden, cfg, nodes })
}

/// The value of an ASCII hex digit.
fn hex(d: u8) -> u8 {
    (d as char).to_digit(16).map_or(0, |v| v as u8)
}

/// The ranges of a node inside its zones, the zones within [`MAX_REGION_PAGES`] and the
/// vmemmap, the samples ascending inside their zone, the taken pages and vmemmap frames no more
/// than the zones' pages (loading lists them one by one), the pageblocks hex digit pairs, so
/// that loading allocates within the limits.
fn check_node(n: &NodeGolden, vmemmap_size: u64) -> Result<()> {
    if vmemmap_size == 0 || vmemmap_size % 64 != 0 {
        bail!("vmemmap_size {vmemmap_size:#x} is not a whole number of struct pages");
    }
    let span = n.zones.first().map(|z| z.start_pfn).unwrap_or(0)
        ..n.zones.last().map_or(0, |z| z.start_pfn.saturating_add(z.nr_pages));
    let mut total = 0u64;
    for z in &n.zones {
        let end = z.start_pfn.checked_add(z.nr_pages);
        if z.nr_pages > MAX_REGION_PAGES || end.is_none_or(|e| e > 1 << 52 || e > vmemmap_size / 64) {
            bail!("zone {}: {} pages at {:#x}", z.zone, z.nr_pages, z.start_pfn);
        }
        total += z.nr_pages;
        if total > 4 * MAX_REGION_PAGES {
            bail!("more than {} pages", 4 * MAX_REGION_PAGES);
        }
        // Two digits per pageblock of at least 32 pages (pageblock_order 5: ppc64el's 64 KiB
        // pages).
        if z.pageblocks.len() as u64 > z.nr_pages / 16 + 8 {
            bail!("zone {}: {} pageblock digits", z.zone, z.pageblocks.len());
        }
        if z.pageblocks.len() % 2 != 0 || !z.pageblocks.bytes().all(|b| b.is_ascii_hexdigit()) {
            bail!("zone {}: pageblocks are not pairs of hex digits", z.zone);
        }
        // The last zone of a node with a section tail may run on up to a section (at most
        // 2^20 pages on every configuration) past its end.
        let tail = if n.section_tail && std::ptr::eq(z, n.zones.last().unwrap_or(z)) { 1 << 20 } else { 0 };
        let mut next = z.start_pfn;
        for &(first, count, _) in &z.samples {
            if first < next || first.checked_add(count).is_none_or(|e| e > z.start_pfn + z.nr_pages + tail) {
                bail!("zone {}: samples not ascending inside the zone", z.zone);
            }
            next = first + count;
        }
    }
    let inside = |r: &(u64, u64)| r.0 <= r.1 && span.start <= r.0 && r.1 <= span.end;
    if !n.memory.iter().chain(&n.reserved).chain(&n.taken).all(inside) {
        bail!("a range outside the node's zones");
    }
    if !n.frames.iter().all(|&(f, c, _)| f.checked_add(c).is_some_and(|e| span.start <= f && e <= span.end)) {
        bail!("vmemmap frames outside the node's zones");
    }
    // Zones need not be adjacent: a range across a gap is inside the span but not the zones.
    let listed = n
        .taken
        .iter()
        .map(|&(s, e)| e - s)
        .chain(n.frames.iter().map(|f| f.1))
        .try_fold(0u64, u64::checked_add);
    if listed.is_none_or(|l| l > total) {
        bail!("more taken pages and vmemmap frames than the zones' {total} pages");
    }
    Ok(())
}
