//! `facts.json`: what the host learned about one guest configuration, written next to the raw
//! struct page dumps (`region-N.bin`, the struct pages of each region in pfn order).

pub mod read;
pub mod symbols;
pub mod zones;

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result, anyhow, bail};
use memmap_core::Kconfig;
use memmap_core::{KernelConfig, KernelVersion, PfnRange};
use serde::{Deserialize, Serialize};

/// A `(package, version)` pair.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Package {
    /// Package name.
    pub name: String,
    /// Version.
    pub version: String,
}

/// `sizeof(struct page)` of every kernel the oracle boots (no `WANT_PAGE_VIRTUAL`).
pub const STRUCT_PAGE: u64 = size_of::<memmap_core::Page64>() as u64;

/// The migrate type recorded for a pageblock whose section is not present.
pub const NO_SECTION: u8 = 0xff;

/// The model configuration of a kernel from its `.config` symbols (`n` when unset) and its
/// release: the preset of the `.config`'s architecture and page size with the symbols applied
/// ([`KernelConfig::from_kconfig`]), modelling the release's `MAJOR.MINOR`.
///
/// # Errors
///
/// The release is not `MAJOR.MINOR...`, or the `.config` is refused.
pub fn model_config(kconfig: &BTreeMap<String, String>, release: &str) -> Result<KernelConfig> {
    let version = KernelVersion::parse(release)
        .with_context(|| format!("kernel release {release:?} is not MAJOR.MINOR..."))?;
    let lookup = |s: &str| kconfig.get(s).map(String::as_str);
    let cfg = KernelConfig::from_kconfig(&Kconfig::from_fn(&lookup))
        .map_err(|e| anyhow!("the kernel's .config: {e}"))?;
    Ok(cfg.with_version(version))
}

/// `memblock.memory` as `/proc/iomem` shows it, in pages of `1 << page_shift` bytes: the
/// top-level System RAM ranges, and with `nomap` the top-level `Reserved` ones (riscv64's no-map
/// memory, which has reserved struct pages; on x86-64 they are e820's, no memory). A range at
/// the top of the address space ends at pfn `2^64 >> page_shift`.
#[must_use]
pub fn iomem_ranges(iomem: &str, nomap: bool, page_shift: u32) -> Vec<PfnRange> {
    let mut v: Vec<PfnRange> = iomem
        .lines()
        .filter(|l| {
            !l.starts_with(' ') && (l.ends_with(": System RAM") || (nomap && l.ends_with(": Reserved")))
        })
        .filter_map(|l| {
            let (start, end) = l.split(" : ").next()?.split_once('-')?;
            let start = u64::from_str_radix(start.trim(), 16).ok()?;
            let end = u128::from(u64::from_str_radix(end.trim(), 16).ok()?) + 1;
            let r = PfnRange::new(start.div_ceil(1 << page_shift), (end >> page_shift) as u64);
            (!r.is_empty()).then_some(r)
        })
        .collect();
    v.sort_by_key(|r| r.start);
    v
}

/// The top-level `System RAM` ranges of `/proc/iomem` in 4 KiB pfns.
#[must_use]
pub fn system_ram(iomem: &str) -> Vec<PfnRange> {
    iomem_ranges(iomem, false, 12)
}

/// Version of the facts format.
pub const FORMAT: u32 = 1;

/// The kernel a dump came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelFacts {
    /// Oracle kernel id (`7.2-amd64`).
    pub id: String,
    /// `uname -r` in the guest.
    pub release: String,
    /// `/proc/version` in the guest.
    pub version: String,
    /// Debian suite.
    pub suite: String,
    /// Debian architecture.
    pub arch: String,
    /// Packages the kernel came from.
    pub packages: Vec<Package>,
    /// The `.config` symbols that shape `struct page` (`n` when unset).
    pub kconfig: BTreeMap<String, String>,
}

/// One gigantic or huge page (hugetlb folio).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Folio {
    /// Head pfn.
    pub head_pfn: u64,
    /// Order.
    pub order: u32,
    /// The node id.
    pub nid: u32,
    /// Position on the node's hstate free list (0: first), read from the heads' `lru` links.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_pos: Option<u32>,
}

/// A pfn range whose struct pages were dumped.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Region {
    /// `zone-device`, `hugetlb`, `hotplug` or `boot`.
    pub kind: String,
    /// The dump file, relative to `facts.json`.
    pub file: String,
    /// First pfn.
    pub start_pfn: u64,
    /// Struct pages in the file.
    pub nr_pages: u64,
    /// Node id.
    pub nid: u32,
    /// Zone index of the pages (from the flags).
    pub zone: u32,
    /// ZONE_DEVICE: `fsdax` or `generic` (`pgmap->type`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_type: Option<String>,
    /// ZONE_DEVICE: ndctl mode (`fsdax`, `devdax`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// ZONE_DEVICE: ndctl map (`mem`, `dev`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub map: Option<String>,
    /// ZONE_DEVICE: the namespace's holder device (`pfn0.0`, `dax0.0`; empty: a raw namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<String>,
    /// ZONE_DEVICE: alignment in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub align: Option<u64>,
    /// ZONE_DEVICE: `pgmap->vmemmap_shift`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vmemmap_shift: Option<u32>,
    /// ZONE_DEVICE: the altmap (`map=dev`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub altmap: Option<memmap_dump::AltmapJson>,
    /// ZONE_DEVICE: first pfn `memmap_init_zone_device` initializes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_start_pfn: Option<u64>,
    /// ZONE_DEVICE: the `pgmap` pointer found in the struct pages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pgmap_addr: Option<u64>,
    /// hugetlb: hstate name (`2M`, `1G`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hstate: Option<String>,
    /// hugetlb: HVO requested (`hugetlb_free_vmemmap=on`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hvo: Option<bool>,
    /// hugetlb: allocated at boot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot: Option<bool>,
    /// hugetlb: the folio.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub folio: Option<Folio>,
    /// boot: the zone's name in `/proc/zoneinfo` (`DMA`, `DMA32`, `Normal`, `Movable`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone_name: Option<String>,
    /// hotplug: what the guest wrote to the blocks' `state` (`online_kernel`, `online_movable`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub online_type: Option<String>,
    /// hotplug: pages per memory block, each one `online_pages()` call in ascending order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_block_pages: Option<u64>,
    /// hotplug: first pfns of the `MAX_PAGE_ORDER` blocks whose head the guest shows not free:
    /// allocated from after onlining. Not compared; the model takes them off its free list.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allocated_blocks: Vec<u64>,
    /// First pfn of the first pageblock overlapping the region (with `pageblock_migratetypes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pageblock_first_pfn: Option<u64>,
    /// Migrate type (`get_pageblock_migratetype`, 1 = MOVABLE) of every pageblock overlapping
    /// the region, read from `mem_section[]->usage->pageblock_flags` in guest memory.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pageblock_migratetypes: Vec<u8>,
    /// Guest-physical address of each 4 KiB vmemmap page backing the region (`null`: unmapped),
    /// read with QEMU's `gva2gpa`: equal addresses are aliased vmemmap pages.
    pub vmemmap_gpa: Vec<Option<u64>>,
}

impl Region {
    /// A region of `kind` dumped to `file`, without the kind-specific facts yet.
    #[must_use]
    pub fn new(kind: &str, file: String, start_pfn: u64, nr_pages: u64, nid: u32, zone: u32) -> Region {
        Region { kind: kind.into(), file, start_pfn, nr_pages, nid, zone, ..Region::default() }
    }
}

/// Everything learned about one configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Facts {
    /// [`FORMAT`].
    pub format: u32,
    /// Configuration name.
    pub config: String,
    /// The kernel.
    pub kernel: KernelFacts,
    /// `qemu --version`.
    pub qemu_version: String,
    /// The QEMU command line.
    pub qemu_argv: Vec<String>,
    /// `/proc/cmdline`.
    pub cmdline: String,
    /// Address of the struct page of pfn 0.
    pub vmemmap_base: u64,
    /// Size of the vmemmap area in bytes (pointers inside it are struct page pointers).
    pub vmemmap_size: u64,
    /// `sizeof(struct page)`.
    pub struct_page_size: u64,
    /// The kernel's `pageblock_order` (9 where a run did not record it).
    #[serde(default = "default_pageblock_order")]
    pub pageblock_order: u32,
    /// Kernel image range `[_text, _end)` from `System.map`.
    pub kernel_image: (u64, u64),
    /// Names of the kernel-image addresses found in the dumped struct pages.
    pub kernel_symbols: BTreeMap<String, String>,
    /// Node ids.
    pub nodes: Vec<u32>,
    /// Kernel warnings (`WARNING:` lines) in the guest's log.
    pub warnings: Vec<String>,
    /// Guest text blocks: `iomem`, `ndctl`, `nd`, `hugepages`, `zoneinfo`.
    pub guest: BTreeMap<String, String>,
    /// The dumped regions.
    pub regions: Vec<Region>,
}

fn default_pageblock_order() -> u32 {
    9
}

/// The largest `facts.json` read (a two-node hugetlb run's is about 2 MiB).
pub const MAX_FACTS_BYTES: u64 = 16 << 20;

/// The limits a `facts.json` is held to before it is parsed ([`memmap_dump::check_json`]); a
/// run's facts at [`MAX_TOTAL_PAGES`] hold about 80 Ki values, and a parse stays under 90 MiB
/// (`tests/json_peak.rs`).
pub const FACTS_LIMITS: memmap_dump::JsonLimits =
    memmap_dump::JsonLimits { max_bytes: MAX_FACTS_BYTES, max_values: 512 << 10, max_depth: 16 };

/// The most bytes a golden extract's `facts.json`, `extract.json` or `boot.json` may hold.
pub const MAX_JSON_BYTES: u64 = 4 << 20;
/// The limits a golden `facts.json` and `extract.json` are held to before they are parsed
/// (the committed ones hold at most 3.5 Ki values; a parse stays under 40 MiB).
pub const JSON_LIMITS: memmap_dump::JsonLimits =
    memmap_dump::JsonLimits { max_bytes: MAX_JSON_BYTES, max_values: 256 << 10, max_depth: 16 };
/// The most bytes a golden extract's `pages.bin.gz` may hold, compressed or decompressed.
pub const MAX_PAGES_BYTES: u64 = 16 << 20;
/// The most regions a configuration may have (a boot-time hugetlb run has 64 folios).
pub const MAX_REGIONS: usize = 64;
/// The most struct pages a region may span (8 GiB of memory): the model is run for the whole
/// region and the comparison buffers its struct pages.
pub const MAX_REGION_PAGES: u64 = 1 << 21;
/// The most struct pages all regions of a configuration may span together: `compare` holds
/// them all at once (4 Mi pages, 256 MiB; the configurations have at most 768 Ki).
pub const MAX_TOTAL_PAGES: u64 = 1 << 22;
/// The largest compound order (`vmemmap_shift`, folio order) accepted (PUD pages are 18).
pub const MAX_COMPOUND_ORDER: u32 = 30;
/// The largest node id accepted (`CONFIG_NODES_SHIFT` 10).
pub const MAX_NID: u32 = 1023;
/// The region kinds.
pub const REGION_KINDS: [&str; 4] = ["zone-device", "hugetlb", "hotplug", "boot"];

impl Facts {
    /// Reads `dir/facts.json`: a regular file of at most [`MAX_FACTS_BYTES`], parsed and
    /// checked by [`Facts::parse`].
    ///
    /// # Errors
    ///
    /// `dir` is not a directory, the file is missing or not regular, or [`Facts::parse`]'s
    /// errors; each naming the path.
    pub fn load(dir: &Path) -> Result<Facts> {
        match std::fs::metadata(dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => bail!("{}: not a directory (a dump directory OUT/<kernel>/<config>)", dir.display()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!("{}: does not exist", dir.display()),
            Err(e) => bail!("{}: {e}", dir.display()),
        }
        let p = dir.join("facts.json");
        let bytes = memmap_dump::read_user_bytes(&p, MAX_FACTS_BYTES)?;
        Facts::parse(&bytes, &p)
    }

    /// Parses the text of a `facts.json` (`path` names it in errors) within [`FACTS_LIMITS`], of
    /// the known [`FORMAT`] and with a geometry [`Facts::validate`] accepts.
    ///
    /// # Errors
    ///
    /// The limits, the JSON, the format or the geometry, naming `path`.
    pub fn parse(json: &[u8], path: &Path) -> Result<Facts> {
        memmap_dump::check_json(json, &FACTS_LIMITS, path)?;
        let f: Facts = serde_json::from_slice(json).with_context(|| format!("parsing {}", path.display()))?;
        if f.format != FORMAT {
            bail!("{}: format {} (expected {FORMAT})", path.display(), f.format);
        }
        f.validate().map_err(|what| anyhow::anyhow!("{}: {what}", path.display()))?;
        Ok(f)
    }

    /// Checks what the readers of a configuration rely on, so that reading its regions cannot
    /// overflow or allocate past [`MAX_TOTAL_PAGES`]: plain file names, 64-byte struct pages, at
    /// most [`MAX_REGIONS`] regions within [`MAX_REGION_PAGES`] inside the vmemmap, orders up to
    /// [`MAX_COMPOUND_ORDER`], node ids up to [`MAX_NID`], every pfn named inside its region.
    ///
    /// # Errors
    ///
    /// What is wrong, naming the field and the region.
    pub fn validate(&self) -> Result<(), String> {
        let plain = |what: &str, v: &str| crate::files::name(what, v).map(drop).map_err(|e| e.to_string());
        plain("kernel id", &self.kernel.id)?;
        plain("configuration", &self.config)?;
        if self.struct_page_size != 64 {
            return Err(format!(
                "struct_page_size {} (the oracle reads 64-byte struct pages)",
                self.struct_page_size
            ));
        }
        if self.vmemmap_base.checked_add(self.vmemmap_size).is_none() {
            return Err(format!(
                "vmemmap [{:#x}, +{:#x}) wraps around the address space",
                self.vmemmap_base, self.vmemmap_size
            ));
        }
        if self.regions.len() > MAX_REGIONS {
            return Err(format!("{} regions (at most {MAX_REGIONS})", self.regions.len()));
        }
        let mut total = 0u64;
        for (i, r) in self.regions.iter().enumerate() {
            self.validate_region(i, r)?;
            total += r.nr_pages;
        }
        if total > MAX_TOTAL_PAGES {
            return Err(format!("{total} struct pages in all regions (at most {MAX_TOTAL_PAGES})"));
        }
        Ok(())
    }

    /// [`Facts::validate`] of region `i`.
    fn validate_region(&self, i: usize, r: &Region) -> Result<(), String> {
        let what = format!("region {i} (pfn {:#x}, {} pages)", r.start_pfn, r.nr_pages);
        if !REGION_KINDS.contains(&r.kind.as_str()) {
            return Err(format!("{what}: kind {:?} (expected one of {})", r.kind, REGION_KINDS.join(", ")));
        }
        if r.nr_pages == 0 || r.nr_pages > MAX_REGION_PAGES {
            return Err(format!("{what}: not 1 to {MAX_REGION_PAGES} struct pages"));
        }
        // Every struct page of the region lies inside the vmemmap.
        let end = r.start_pfn.checked_add(r.nr_pages).filter(|&e| e <= self.vmemmap_size / 64);
        let Some(end) = end else {
            return Err(format!("{what}: struct pages outside the vmemmap ({:#x} bytes)", self.vmemmap_size));
        };
        let inside = |p: u64| (r.start_pfn..=end).contains(&p);
        let orders = [r.vmemmap_shift, r.folio.map(|f| f.order)];
        if let Some(o) = orders.into_iter().flatten().find(|&o| o > MAX_COMPOUND_ORDER) {
            return Err(format!("{what}: compound order {o} (at most {MAX_COMPOUND_ORDER})"));
        }
        if r.nid > MAX_NID || r.folio.is_some_and(|f| f.nid > MAX_NID) {
            return Err(format!("{what}: node id above {MAX_NID}"));
        }
        if r.init_start_pfn.is_some_and(|p| !inside(p)) || r.folio.is_some_and(|f| !inside(f.head_pfn)) {
            return Err(format!("{what}: init_start_pfn or folio head_pfn outside the region"));
        }
        if r.altmap.is_some_and(|a| a.reserve.checked_add(a.free).is_none_or(|n| n > r.nr_pages)) {
            return Err(format!("{what}: an altmap larger than the region"));
        }
        if r.memory_block_pages == Some(0) || r.allocated_blocks.iter().any(|&b| !inside(b)) {
            return Err(format!("{what}: memory_block_pages 0 or allocated_blocks outside the region"));
        }
        if let Some(first) = r.pageblock_first_pfn {
            let pb = 1u64 << self.pageblock_order.min(20);
            let blocks_end =
                (r.pageblock_migratetypes.len() as u64).checked_mul(pb).and_then(|n| n.checked_add(first));
            if first > r.start_pfn || blocks_end.is_none_or(|b| b > end + pb) {
                return Err(format!("{what}: pageblocks do not cover the region"));
            }
        }
        // One frame per 4 KiB vmemmap page the region touches, at most.
        if r.vmemmap_gpa.len() as u64 > r.nr_pages / 64 + 2 {
            return Err(format!("{what}: {} vmemmap frames for its struct pages", r.vmemmap_gpa.len()));
        }
        Ok(())
    }

    /// Writes `dir/facts.json` (`dir` exists; see [`crate::files`]).
    ///
    /// # Errors
    ///
    /// I/O errors.
    pub fn save(&self, dir: &Path) -> Result<()> {
        crate::files::write_file(
            &dir.join("facts.json"),
            (serde_json::to_string_pretty(self)? + "\n").as_bytes(),
        )
    }

    /// Reads region `i`'s struct pages from `dir/FILE`: a plain file name, not a link, of exactly
    /// the region's size.
    ///
    /// # Errors
    ///
    /// I/O errors, a file name that leaves `dir`, or a size that disagrees with the facts.
    pub fn region_bytes(&self, dir: &Path, i: usize) -> Result<Vec<u8>> {
        let r = self.regions.get(i).context("no such region")?;
        let name = crate::files::name(
            &format!("region {i}'s file in {}", dir.join("facts.json").display()),
            &r.file,
        )?;
        let expect = r
            .nr_pages
            .checked_mul(self.struct_page_size)
            .filter(|&n| n <= MAX_REGION_PAGES * 64)
            .with_context(|| format!("{}: {} pages (at most {MAX_REGION_PAGES})", r.file, r.nr_pages))?;
        // Its name came from the facts: the dump directory's own file, not a link out of it.
        let path = dir.join(name);
        let bytes = memmap_dump::read_file(&path, expect, memmap_dump::Links::Refuse)?;
        if bytes.len() as u64 != expect {
            bail!(
                "{}: {} bytes, the facts say {} struct pages of 64 bytes",
                path.display(),
                bytes.len(),
                r.nr_pages
            );
        }
        Ok(bytes)
    }
}
