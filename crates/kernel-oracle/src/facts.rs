//! `facts.json`: what the host learned about one guest configuration, written next to the raw
//! struct page dumps (`region-N.bin`, the struct pages of each region in pfn order).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::kernel::Package;

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

/// `pgmap->altmap` of a namespace mapped with `map=dev`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Altmap {
    /// `base_pfn`.
    pub base_pfn: u64,
    /// `reserve` (pfns).
    pub reserve: u64,
    /// `free` (pfns).
    pub free: u64,
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
    /// Position on the node's hstate free list (0: first after `h->hugepage_freelists[nid]`),
    /// read from the heads' `lru` links in the guest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_pos: Option<u32>,
}

/// A pfn range whose struct pages were dumped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Region {
    /// `zone-device`, `hugetlb` or `hotplug`.
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
    /// ZONE_DEVICE: the namespace's holder device (`pfn0.0`, `dax0.0`; empty for a raw
    /// namespace, which has no info block).
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
    pub altmap: Option<Altmap>,
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
    /// hotplug: what the guest wrote to the memory blocks' `state` (`online_kernel`,
    /// `online_movable`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub online_type: Option<String>,
    /// hotplug: pages per memory block (`/sys/devices/system/memory/block_size_bytes`); each
    /// block is one `online_pages()` call, in ascending order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_block_pages: Option<u64>,
    /// hotplug: first pfns of the `MAX_PAGE_ORDER` blocks whose head the guest shows not as a
    /// free block of that order (`PageBuddy`, order in `private`): blocks allocated from after
    /// onlining. Their struct pages and pageblocks are not compared; the model takes them off
    /// its free list, as the allocation did.
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

/// The largest `facts.json` read (a two-node hugetlb run's is about 2 MiB).
pub const MAX_FACTS_BYTES: u64 = 64 << 20;

impl Facts {
    /// Reads `dir/facts.json` (a regular file of at most [`MAX_FACTS_BYTES`]).
    ///
    /// # Errors
    ///
    /// I/O or JSON errors, or an unknown format.
    pub fn load(dir: &Path) -> Result<Facts> {
        let p = dir.join("facts.json");
        let bytes = memmap_dump::read_user_bytes(&p, MAX_FACTS_BYTES)?;
        let f: Facts = serde_json::from_slice(&bytes).with_context(|| format!("parsing {}", p.display()))?;
        if f.format != FORMAT {
            bail!("{}: format {} (expected {FORMAT})", p.display(), f.format);
        }
        Ok(f)
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

    /// Reads region `i`'s struct pages: `dir/FILE`, where `FILE` (from the facts) must be a
    /// plain file name, a regular file of exactly the region's size.
    ///
    /// # Errors
    ///
    /// I/O errors, a file name that leaves `dir`, or a size that disagrees with the facts.
    pub fn region_bytes(&self, dir: &Path, i: usize) -> Result<Vec<u8>> {
        let r = self.regions.get(i).context("no such region")?;
        let name = Path::new(&r.file);
        if name.components().count() != 1
            || !matches!(name.components().next(), Some(std::path::Component::Normal(_)))
        {
            bail!("region file {:?} is not a file name inside {}", r.file, dir.display());
        }
        let expect = r
            .nr_pages
            .checked_mul(self.struct_page_size)
            .with_context(|| format!("{}: {} pages overflow", r.file, r.nr_pages))?;
        let bytes = memmap_dump::read_user_bytes(&dir.join(name), expect)?;
        if bytes.len() as u64 != expect {
            bail!("{}: {} bytes, facts say {} pages", r.file, bytes.len(), r.nr_pages);
        }
        Ok(bytes)
    }
}
