//! Kernel configuration as data ([`KernelConfig`]: the Kconfig values that shape `struct
//! page`, the architecture's constants and the release), and the page-flags layout computed
//! from it ([`FlagsLayout`], `include/linux/page-flags-layout.h`).

mod layout;
use super::version::{Behaviour, KernelVersion};
pub use layout::{ConfigError, FlagsLayout};

/// The architecture of a modelled kernel (which `.config` it accepts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Arch {
    /// x86-64 (`CONFIG_X86_64`).
    X86_64,
    /// arm64 (`CONFIG_ARM64`).
    Arm64,
    /// riscv64 (`CONFIG_RISCV`).
    Riscv64,
    /// 64-bit POWER, Book3S (`CONFIG_PPC64`).
    Powerpc64,
}

impl Arch {
    /// Every architecture.
    pub(crate) const ALL: [Arch; 4] = [Arch::X86_64, Arch::Arm64, Arch::Riscv64, Arch::Powerpc64];

    /// The Kconfig symbol a `.config` of this architecture sets.
    #[must_use]
    pub(crate) const fn kconfig_symbol(self) -> &'static str {
        match self {
            Arch::X86_64 => "CONFIG_X86_64",
            Arch::Arm64 => "CONFIG_ARM64",
            Arch::Riscv64 => "CONFIG_RISCV",
            Arch::Powerpc64 => "CONFIG_PPC64",
        }
    }

    /// The architecture's name (`x86_64`, `arm64`, `riscv64`, `powerpc64`).
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64",
            Arch::Arm64 => "arm64",
            Arch::Riscv64 => "riscv64",
            Arch::Powerpc64 => "powerpc64",
        }
    }
}

/// The kernel being modelled. Every field is a Kconfig option or an architecture constant.
///
/// Construct one from a preset ([`KernelConfig::X86_64`], [`KernelConfig::ARM64`],
/// [`KernelConfig::X86_64_CLASSIC_SPARSE`]) and adjust fields; [`KernelConfig::flags_layout`]
/// validates the result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelConfig {
    /// Preset name (for reports and dumps).
    pub name: &'static str,
    /// The architecture.
    pub arch: Arch,
    /// `POISON_POINTER_DELTA` (`CONFIG_ILLEGAL_POINTER_VALUE`): 0xdead000000000000 on x86-64,
    /// arm64 and riscv64, 0x5deadbeef0000000 on powerpc64. The list poison and `TAIL_MAPPING`
    /// are offsets from it ([`KernelConfig::list_poison`], [`KernelConfig::tail_mapping`]).
    pub poison_pointer_delta: u64,
    /// `PAGE_SHIFT` (12: 4 KiB pages).
    pub page_shift: u32,
    /// `SECTION_SIZE_BITS` (27 on x86-64 and arm64 with 4 KiB pages: 128 MiB sections).
    pub section_size_bits: u32,
    /// `MAX_PHYSMEM_BITS` (46 on x86-64 with 4-level paging, 48 on arm64 with 48-bit PA).
    pub max_physmem_bits: u32,
    /// `CONFIG_SPARSEMEM_VMEMMAP`. When false (classic SPARSEMEM) the section number is kept
    /// in `page->flags` (`SECTION_IN_PAGE_FLAGS`) and flags depend on the PFN.
    pub sparsemem_vmemmap: bool,
    /// `CONFIG_NODES_SHIFT`.
    pub nodes_shift: u32,
    /// `MAX_NR_ZONES`, counting `ZONE_DEVICE`, which is always the last zone.
    pub max_nr_zones: u32,
    /// `__NR_PAGEFLAGS` of the modelled build: it bounds the fields' layout and places
    /// [`pg_uninitialized_2m`](crate::pg_uninitialized_2m); no byte an initializer writes
    /// depends on it.
    /// The presets leave out `PG_young` and `PG_idle` (`CONFIG_PAGE_IDLE_FLAG`, counted by
    /// [`KernelConfig::with_kconfig`]), which would leave no bit for that flag.
    pub nr_pageflags: u32,
    /// `LAST_CPUPID_SHIFT` = `LAST__PID_SHIFT` (8) + `NR_CPUS_BITS` with
    /// `CONFIG_NUMA_BALANCING`; 0 without it.
    pub last_cpupid_shift: u32,
    /// `KASAN_TAG_WIDTH`: 8 with `KASAN_SW_TAGS`, 4 with `KASAN_HW_TAGS`, else 0.
    pub kasan_tag_width: u32,
    /// `LRU_GEN_WIDTH` (multi-gen LRU: `order_base_2(MAX_NR_GENS + 1)` = 3), 0 without MGLRU.
    pub lru_gen_width: u32,
    /// `__LRU_REFS_WIDTH` (`MAX_NR_TIERS - 2` = 2 with MGLRU), 0 without.
    pub lru_refs_width: u32,
    /// `pageblock_order` (9: 2 MiB pageblocks).
    pub pageblock_order: u32,
    /// `MAX_PAGE_ORDER` (10 on x86-64 and arm64 with 4 KiB pages).
    pub max_page_order: u32,
    /// `PAGE_OFFSET`: `__va(phys) = PAGE_OFFSET + phys` (for `page->virtual`).
    pub page_offset: u64,
    /// Start of the vmemmap: the modelled address of the `struct page` of PFN 0.
    pub vmemmap_start: u64,
    /// `CONFIG_KASAN` (generic or tag-based): the template fast paths are off.
    pub kasan: bool,
    /// `CONFIG_KMSAN`: the template fast paths are off.
    pub kmsan: bool,
    /// `CONFIG_DEBUG_PAGE_REF`: the `page_ref_set` tracepoint exists (whether it is enabled is
    /// a run-time question for [`crate::InitHooks`]).
    pub debug_page_ref: bool,
    /// `CONFIG_DEBUG_VM`: `page_init_poison()` fills the memmap the kernel maps after boot
    /// (`sparse_add_section()`) with [`crate::PAGE_POISON_BYTE`], so a struct page no init
    /// writes there reads as poison rather than as the memory's old bytes.
    pub debug_vm: bool,
    /// `NR_PAGES_IN_LARGE_FOLIO` (`CONFIG_MEMCG || CONFIG_SLAB_OBJ_EXT`): folios keep
    /// `_nr_pages` at byte 120.
    pub nr_pages_in_large_folio: bool,
    /// `CONFIG_PAGE_MAPCOUNT`: `prep_compound_head` zeroes `_nr_pages_mapped`.
    pub page_mapcount: bool,
    /// `CONFIG_MM_ID`: `prep_compound_head` sets `_mm_ids` and `_mm_id_mapcount`.
    pub mm_id: bool,
    /// `CONFIG_ARCH_WANT_OPTIMIZE_DAX_VMEMMAP`: ZONE_DEVICE compound pages share tail vmemmap
    /// pages, so only 128 struct pages per compound are written.
    pub optimize_dax_vmemmap: bool,
    /// `CONFIG_HUGETLB_PAGE_OPTIMIZE_VMEMMAP` (HVO is available to `hugetlb-init`).
    pub hugetlb_vmemmap: bool,
    /// `CONFIG_SPARSEMEM_VMEMMAP_PREINIT` (x86-64): boot-time gigantic pages are optimized
    /// before `memmap_init()`, so their shared tail page holds what `memmap_init()` wrote
    /// through it; without it they are optimized after boot onto a zeroed tail page.
    pub sparsemem_vmemmap_preinit: bool,
    /// `CONFIG_CGROUP_HUGETLB` (hugetlb folios carry cgroup pointers in page\[3\]).
    pub cgroup_hugetlb: bool,
    /// `CONFIG_RISCV_ISA_SVNAPOT` on riscv64 (with a CPU that has Svnapot, as QEMU's `max`):
    /// `arch_hugetlb_valid_size()` also accepts the NAPOT sizes (64 KiB), which hugetlb-init
    /// then models as an hstate. Ignored on other architectures.
    pub riscv_svnapot: bool,
    /// The release modelled: selects the behaviours that changed between releases
    /// ([`KernelConfig::behaviour`]).
    pub version: KernelVersion,
}

impl KernelConfig {
    /// x86-64 as Debian builds Linux 7.2 (`linux-image-7.2.13+deb14-amd64`, compared byte for
    /// byte under QEMU): 4-level paging, SPARSEMEM_VMEMMAP, 1024 nodes (`NODES_SHIFT` 10), zones
    /// DMA, DMA32, NORMAL, MOVABLE, DEVICE, NUMA balancing with `NR_CPUS` 8192, multi-gen LRU,
    /// MEMCG, `CONFIG_MM_ID`, DAX vmemmap optimization and HVO. Flags: node in bits 63..54, zone
    /// 53..51, last cpupid 50..30.
    pub const X86_64: KernelConfig = KernelConfig {
        name: "x86_64",
        arch: Arch::X86_64,
        poison_pointer_delta: 0xdead_0000_0000_0000,
        page_shift: 12,
        section_size_bits: 27,
        max_physmem_bits: 46,
        sparsemem_vmemmap: true,
        nodes_shift: 10,
        max_nr_zones: 5,
        // PG_locked..PG_dropbehind (20) + mlocked + uncached (x86 PAT) + hwpoison.
        nr_pageflags: 23,
        last_cpupid_shift: 8 + 13,
        kasan_tag_width: 0,
        lru_gen_width: 3,
        lru_refs_width: 2,
        pageblock_order: 9,
        max_page_order: 10,
        page_offset: 0xffff_8880_0000_0000,
        vmemmap_start: 0xffff_ea00_0000_0000,
        kasan: false,
        kmsan: false,
        debug_page_ref: false,
        debug_vm: false,
        nr_pages_in_large_folio: true,
        page_mapcount: true,
        mm_id: true,
        optimize_dax_vmemmap: true,
        hugetlb_vmemmap: true,
        sparsemem_vmemmap_preinit: true,
        cgroup_hugetlb: true,
        riscv_svnapot: false,
        version: KernelVersion::V7_2,
    };

    /// arm64 as Debian builds Linux 7.2 (`linux-image-7.2.13+deb14-arm64`, compared under
    /// QEMU): 4 KiB pages, 52-bit VA and PA, SPARSEMEM_VMEMMAP, 16 nodes (`NODES_SHIFT` 4), the
    /// same five zones, NUMA balancing with `NR_CPUS` 512, MGLRU, MTE's `PG_arch_2`/`PG_arch_3`.
    /// No HVO (Debian's arm64 config lacks `CONFIG_HUGETLB_PAGE_OPTIMIZE_VMEMMAP`, so tails keep
    /// the `head | 1` encoding) and no DAX vmemmap optimization. `PAGE_OFFSET` and `vmemmap` are
    /// those of QEMU's `virt` machine (RAM from 1 GiB, 52-bit VA, `nokaslr`).
    pub const ARM64: KernelConfig = KernelConfig {
        name: "arm64",
        arch: Arch::Arm64,
        max_physmem_bits: 52,
        nodes_shift: 4,
        // PG_locked..PG_dropbehind (20) + mlocked + hwpoison + arch_2 + arch_3.
        nr_pageflags: 24,
        last_cpupid_shift: 8 + 9,
        page_offset: 0xfff0_0000_0000_0000,
        vmemmap_start: 0xffff_c1ff_bf00_0000,
        optimize_dax_vmemmap: false,
        hugetlb_vmemmap: false,
        sparsemem_vmemmap_preinit: false,
        // The rest as Debian's x86-64 build of the same release.
        ..KernelConfig::X86_64
    };

    /// [`KernelConfig::ARM64`] with 16 KiB pages, as Debian builds Linux 7.2
    /// (`linux-image-7.2.13+deb14-arm64-16k`, compared under QEMU's `virt` machine):
    /// `MAX_PAGE_ORDER` 11, `pageblock_order` 11 (the 32 MiB PMD huge page), 128 MiB sections of
    /// 8192 pages; `vmemmap` as the guest's `mem_section` says (RAM from 1 GiB).
    pub const ARM64_16K: KernelConfig = KernelConfig {
        name: "arm64-16k",
        page_shift: 14,
        pageblock_order: 11,
        max_page_order: 11,
        vmemmap_start: 0xffff_f03f_bfc0_0000,
        ..KernelConfig::ARM64
    };

    /// riscv64 as Debian builds Linux 7.2 (`linux-image-7.2.13+deb14-riscv64`, compared under
    /// QEMU's `virt` machine with Sv39 paging, `no4lvl`): 4 KiB pages, SPARSEMEM_VMEMMAP,
    /// 4 nodes (`NODES_SHIFT` 2), zones DMA32, NORMAL, MOVABLE, DEVICE, NUMA balancing with
    /// `NR_CPUS` 256, MGLRU, HVO and DAX vmemmap optimization, Svnapot (64 KiB NAPOT huge
    /// pages), no `MEMORY_FAILURE` (no `PG_hwpoison`). `vmemmap` is Sv39's `VMEMMAP_START` (pfn 0's struct page, as the
    /// guest's `mem_section` says; RAM starts at 2 GiB), `PAGE_OFFSET` Sv39's direct map.
    pub const RISCV64: KernelConfig = KernelConfig {
        name: "riscv64",
        arch: Arch::Riscv64,
        max_physmem_bits: 56,
        nodes_shift: 2,
        max_nr_zones: 4,
        // PG_locked..PG_dropbehind (20) + mlocked.
        nr_pageflags: 21,
        last_cpupid_shift: 8 + 8,
        page_offset: 0xffff_ffd6_0000_0000,
        vmemmap_start: 0xffff_ffc5_0000_0000,
        sparsemem_vmemmap_preinit: false,
        riscv_svnapot: true,
        // The rest as Debian's x86-64 build of the same release.
        ..KernelConfig::X86_64
    };

    /// Little-endian 64-bit POWER as Debian builds Linux 7.2
    /// (`linux-image-7.2.13+deb14-powerpc64le`, compared under QEMU's `pseries` machine, radix
    /// MMU): 4 KiB pages, 16 MiB sections, `MAX_PAGE_ORDER` 12, SPARSEMEM_VMEMMAP, 256 nodes
    /// (`NODES_SHIFT` 8), zones NORMAL, MOVABLE, DEVICE, NUMA balancing with `NR_CPUS` 2048,
    /// MGLRU, DAX vmemmap optimization, no HVO, `POISON_POINTER_DELTA` 0x5deadbeef0000000. The
    /// radix vmemmap at 0xc00c000000000000, the linear map at 0xc000000000000000.
    pub const PPC64EL: KernelConfig = KernelConfig {
        name: "ppc64el",
        arch: Arch::Powerpc64,
        poison_pointer_delta: 0x5dea_dbee_f000_0000,
        section_size_bits: 24,
        max_physmem_bits: 51,
        nodes_shift: 8,
        max_nr_zones: 3,
        // PG_locked..PG_dropbehind (20) + mlocked + hwpoison.
        nr_pageflags: 22,
        last_cpupid_shift: 8 + 11,
        max_page_order: 12,
        page_offset: 0xc000_0000_0000_0000,
        vmemmap_start: 0xc00c_0000_0000_0000,
        hugetlb_vmemmap: false,
        sparsemem_vmemmap_preinit: false,
        // The rest as Debian's x86-64 build (`pageblock_order` is a variable here, set to the
        // 2 MiB huge page's order).
        ..KernelConfig::X86_64
    };

    /// [`KernelConfig::PPC64EL`] with 64 KiB pages, as Debian builds Linux 7.2
    /// (`linux-image-7.2.13+deb14-powerpc64le-64k`, compared under QEMU): `MAX_PAGE_ORDER` 8,
    /// `pageblock_order` 5 (the 2 MiB huge page's order, radix), 16 MiB sections of 256 pages.
    pub const PPC64EL_64K: KernelConfig = KernelConfig {
        name: "ppc64el-64k",
        page_shift: 16,
        pageblock_order: 5,
        max_page_order: 8,
        ..KernelConfig::PPC64EL
    };

    /// x86-64 as Debian builds Linux 6.12 (`linux-image-6.12.95+deb12-amd64` from
    /// bookworm-backports, compared under QEMU): the flags layout of [`KernelConfig::X86_64`],
    /// the 6.12 behaviours ([`KernelVersion::V6_12`]), no `CONFIG_MM_ID` or
    /// `CONFIG_PAGE_MAPCOUNT` (the 6.12 folio layout has neither).
    pub const X86_64_6_12: KernelConfig = KernelConfig {
        name: "x86_64-6.12",
        page_mapcount: false,
        mm_id: false,
        version: KernelVersion::V6_12,
        ..KernelConfig::X86_64
    };

    /// x86-64 with classic SPARSEMEM (no VMEMMAP): the 19-bit section number
    /// (`MAX_PHYSMEM_BITS - SECTION_SIZE_BITS` = 46 - 27) lives in flags bits 63..45, so flags
    /// change at every 32768-PFN boundary and templates must refresh them. NUMA balancing is off
    /// in this preset because `LAST_CPUPID` would no longer fit in `page->flags` (the kernel would
    /// move it to a `_last_cpupid` field and change `sizeof(struct page)`).
    pub const X86_64_CLASSIC_SPARSE: KernelConfig = KernelConfig {
        name: "x86_64-classic-sparse",
        sparsemem_vmemmap: false,
        sparsemem_vmemmap_preinit: false,
        last_cpupid_shift: 0,
        optimize_dax_vmemmap: false,
        hugetlb_vmemmap: false,
        ..KernelConfig::X86_64
    };

    /// The behaviours of the modelled kernel that changed between releases: those of
    /// [`KernelConfig::version`], with the ones that also depend on the configuration
    /// applied (the `compound_info` mask and HVO's shared tail pages need
    /// `CONFIG_HUGETLB_PAGE_OPTIMIZE_VMEMMAP`).
    #[must_use]
    pub const fn behaviour(&self) -> Behaviour {
        let mut b = self.version.behaviour();
        b.compound_info_mask = b.compound_info_mask && self.hugetlb_vmemmap;
        b.hvo_shared_tail = b.hvo_shared_tail && self.hugetlb_vmemmap;
        b
    }

    /// The same configuration modelling another release.
    #[must_use]
    pub const fn with_version(mut self, version: KernelVersion) -> Self {
        self.version = version;
        self
    }

    /// `LIST_POISON1` (`next`) and `LIST_POISON2` (`prev`): what `list_del()` leaves in a
    /// list entry, `0x100` and `0x122` past [`KernelConfig::poison_pointer_delta`].
    #[must_use]
    pub const fn list_poison(&self) -> (u64, u64) {
        (self.poison_pointer_delta.wrapping_add(0x100), self.poison_pointer_delta.wrapping_add(0x122))
    }

    /// `TAIL_MAPPING`, the `mapping` of a compound page's tails: `0x400` past
    /// [`KernelConfig::poison_pointer_delta`].
    #[must_use]
    pub const fn tail_mapping(&self) -> u64 {
        self.poison_pointer_delta.wrapping_add(0x400)
    }

    /// `ZONE_NORMAL`'s index: after `ZONE_DMA` and `ZONE_DMA32` where the configuration has
    /// them, before `ZONE_MOVABLE` and `ZONE_DEVICE` (2 on x86-64 and arm64, 1 on riscv64, 0 on
    /// powerpc64; 64-bit kernels have no `ZONE_HIGHMEM`).
    #[must_use]
    pub const fn zone_normal(&self) -> u32 {
        self.max_nr_zones.saturating_sub(3)
    }

    /// `ZONE_DEVICE`'s index: the last zone.
    #[must_use]
    pub const fn zone_device(&self) -> u32 {
        // Saturating: a configuration without zones (which `flags_layout` refuses) answers 0.
        self.max_nr_zones.saturating_sub(1)
    }

    /// `PAGE_SIZE`.
    #[must_use]
    pub const fn page_size(&self) -> u64 {
        pow2(self.page_shift)
    }

    /// `PFN_SECTION_SHIFT` = `SECTION_SIZE_BITS - PAGE_SHIFT`.
    #[must_use]
    pub const fn pfn_section_shift(&self) -> u32 {
        self.section_size_bits.saturating_sub(self.page_shift)
    }

    /// `PAGES_PER_SECTION`.
    #[must_use]
    pub const fn pages_per_section(&self) -> u64 {
        pow2(self.pfn_section_shift())
    }

    /// `pageblock_nr_pages`.
    #[must_use]
    pub const fn pageblock_nr_pages(&self) -> u64 {
        pow2(self.pageblock_order)
    }

    /// `MAX_ORDER_NR_PAGES`.
    #[must_use]
    pub const fn max_order_nr_pages(&self) -> u64 {
        pow2(self.max_page_order)
    }

    /// `__va(pfn << PAGE_SHIFT)`.
    #[must_use]
    pub const fn pfn_to_virt(&self, pfn: u64) -> u64 {
        self.page_offset.wrapping_add(pfn.wrapping_shl(self.page_shift))
    }

    /// One past the largest PFN the configuration can address: `1 << (MAX_PHYSMEM_BITS -
    /// PAGE_SHIFT)`. Memmaps end at or below it, which keeps PFN arithmetic far from overflow.
    #[must_use]
    pub const fn max_pfn(&self) -> u64 {
        // Saturates where the shift reaches 64 (a configuration no validation has seen).
        match 1u64.checked_shl(self.max_physmem_bits.saturating_sub(self.page_shift)) {
            Some(n) => n,
            None => u64::MAX,
        }
    }

    /// `pfn_to_section_nr(pfn)`.
    #[must_use]
    pub const fn pfn_to_section_nr(&self, pfn: u64) -> u64 {
        match pfn.checked_shr(self.pfn_section_shift()) {
            Some(s) => s,
            None => 0,
        }
    }

    /// `set_compound_head(page, head, order)`: the word a tail page of the compound page of
    /// `order` whose head's struct page is at `head_vaddr` keeps at byte 8 (`compound_info`),
    /// for struct pages of `page_size` bytes. Bit 0 marks a tail. With the mask encoding
    /// ([`Behaviour::compound_info_mask`] and a power-of-two struct page) it is
    /// `GENMASK(63, order + log2(page_size)) | 1`, the same for every tail of every compound
    /// page of that order (`0xffffffffffff8001` for 2 MiB, `0xffffffffff000001` for 1 GiB with
    /// 64-byte pages); otherwise `head + 1`.
    #[must_use]
    pub const fn compound_head_word(&self, head_vaddr: u64, order: u32, page_size: usize) -> u64 {
        if self.compound_info_has_mask(page_size) {
            // Saturating: an order that leaves no mask bit (64 and more) gives just the tail bit.
            let low = order.saturating_add(page_size.trailing_zeros());
            let mask = if low >= 64 { 0 } else { u64::MAX << low };
            mask | 1
        } else {
            head_vaddr.wrapping_add(1)
        }
    }

    /// `compound_info_has_mask()` for struct pages of `page_size` bytes.
    #[must_use]
    pub(crate) const fn compound_info_has_mask(&self, page_size: usize) -> bool {
        self.behaviour().compound_info_mask && page_size.is_power_of_two()
    }

    /// `_compound_head(page)`: the address of the head's struct page if the word at byte 8 of the
    /// page at `page_vaddr` marks a tail (bit 0 set), `None` for a head or a single page.
    #[must_use]
    pub const fn compound_head_of(&self, word: u64, page_vaddr: u64, page_size: usize) -> Option<u64> {
        if word & 1 == 0 {
            None
        } else if self.compound_info_has_mask(page_size) {
            Some(page_vaddr & (word & !1))
        } else {
            Some(word - 1)
        }
    }

    /// Computes and validates the page-flags layout.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] when the fields do not fit in a 64-bit `page->flags` the way the kernel
    /// requires (where the kernel has a `#error`), or when they would need a layout change this
    /// model does not implement (`NODE_NOT_IN_PAGE_FLAGS`, `LAST_CPUPID_NOT_IN_PAGE_FLAGS`).
    pub const fn flags_layout(&self) -> Result<FlagsLayout, ConfigError> {
        FlagsLayout::compute(self)
    }
}

/// `1 << shift`, saturating at `u64::MAX` (for configurations that were never validated).
const fn pow2(shift: u32) -> u64 {
    if shift >= 64 { u64::MAX } else { 1 << shift }
}

/// The presets, named by their [`KernelConfig::name`].
impl crate::Named for KernelConfig {
    const ALL: &'static [KernelConfig] = &[
        KernelConfig::X86_64,
        KernelConfig::ARM64,
        KernelConfig::ARM64_16K,
        KernelConfig::RISCV64,
        KernelConfig::PPC64EL,
        KernelConfig::PPC64EL_64K,
        KernelConfig::X86_64_CLASSIC_SPARSE,
        KernelConfig::X86_64_6_12,
    ];

    fn name(self) -> &'static str {
        self.name
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Named;

    #[test]
    fn x86_64_layout_matches_the_worked_example() {
        // NODES_SHIFT 10, MAX_NR_ZONES 5, 23 page flags: node in 63..54, zone in 53..51, last
        // cpupid in 50..30, as in the flags of Debian's 7.2 kernel booted under QEMU.
        let l = KernelConfig::X86_64.flags_layout().unwrap();
        assert_eq!((l.nodes_pgshift, l.nodes_width), (54, 10));
        assert_eq!((l.zones_pgshift, l.zones_width), (51, 3));
        assert_eq!(l.sections_width, 0);
        assert_eq!(l.sections_pgshift, 0);
        assert_eq!((l.last_cpupid_pgshift, l.last_cpupid_width), (30, 21));
        assert_eq!((l.lru_gen_pgshift, l.lru_refs_pgshift), (27, 25));
    }

    #[test]
    fn classic_sparse_puts_the_section_on_top() {
        let l = KernelConfig::X86_64_CLASSIC_SPARSE.flags_layout().unwrap();
        assert_eq!((l.sections_pgshift, l.sections_width), (45, 19));
        assert_eq!((l.nodes_pgshift, l.zones_pgshift), (35, 32));
        assert!(l.section_in_page_flags());
    }

    #[test]
    fn zone_width_follows_max_nr_zones() {
        for (zones, width) in [(1, 0), (2, 1), (3, 2), (4, 2), (5, 3), (8, 3)] {
            let cfg = KernelConfig { max_nr_zones: zones, ..KernelConfig::X86_64 };
            assert_eq!(cfg.flags_layout().unwrap().zones_width, width, "MAX_NR_ZONES {zones}");
        }
        let cfg = KernelConfig { max_nr_zones: 9, ..KernelConfig::X86_64 };
        assert_eq!(cfg.flags_layout(), Err(ConfigError::TooManyZones(9)));
    }

    #[test]
    fn fields_that_do_not_fit_are_rejected() {
        let cfg = KernelConfig { last_cpupid_shift: 8 + 13, ..KernelConfig::X86_64_CLASSIC_SPARSE };
        assert_eq!(cfg.flags_layout(), Err(ConfigError::LastCpupidNotInPageFlags));
        let cfg = KernelConfig { nodes_shift: 40, ..KernelConfig::X86_64 };
        assert_eq!(cfg.flags_layout(), Err(ConfigError::NodeNotInPageFlags));
        let cfg = KernelConfig {
            kasan_tag_width: 8,
            nodes_shift: 30,
            last_cpupid_shift: 0,
            ..KernelConfig::X86_64
        };
        assert_eq!(cfg.flags_layout(), Err(ConfigError::KasanTagDoesNotFit));
    }

    #[test]
    fn presets_are_found_by_name() {
        for p in KernelConfig::ALL.iter().copied() {
            assert_eq!(KernelConfig::from_name(p.name), Some(p));
            assert!(p.flags_layout().is_ok(), "{}", p.name);
        }
        assert_eq!(KernelConfig::from_name("mips"), None);
    }
}
