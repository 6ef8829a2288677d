//! Kernel releases and what changed between them that shows in the struct pages: the one place
//! where the model depends on the version (initializers ask
//! [`KernelConfig::behaviour`](crate::KernelConfig::behaviour), never the version).

use core::fmt;

use crate::PG;

/// A kernel release, `major.minor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KernelVersion {
    /// Major number.
    pub major: u16,
    /// Minor number.
    pub minor: u16,
}

impl KernelVersion {
    /// Linux 6.1 (a long-term release; Debian 12 "bookworm").
    pub const V6_1: KernelVersion = KernelVersion::new(6, 1);
    pub(crate) const V6_5: KernelVersion = KernelVersion::new(6, 5);
    pub(crate) const V6_10: KernelVersion = KernelVersion::new(6, 10);
    /// Linux 6.12 (a long-term release; Debian 12 backports).
    pub const V6_12: KernelVersion = KernelVersion::new(6, 12);
    pub(crate) const V6_14: KernelVersion = KernelVersion::new(6, 14);
    pub(crate) const V6_15: KernelVersion = KernelVersion::new(6, 15);
    pub(crate) const V6_16: KernelVersion = KernelVersion::new(6, 16);
    pub(crate) const V6_18: KernelVersion = KernelVersion::new(6, 18);
    pub(crate) const V7_1: KernelVersion = KernelVersion::new(7, 1);
    /// Linux 7.2 (Debian sid).
    pub const V7_2: KernelVersion = KernelVersion::new(7, 2);
    /// Linux 7.3 (Debian experimental).
    pub const V7_3: KernelVersion = KernelVersion::new(7, 3);

    /// `major.minor`.
    #[must_use]
    pub const fn new(major: u16, minor: u16) -> Self {
        KernelVersion { major, minor }
    }

    /// Parses a release string's `major.minor` prefix: `7.2`, `7.2.13`, `7.2.13+deb14-amd64`,
    /// `6.12.95-1~bpo12+1`.
    #[must_use]
    pub fn parse(release: &str) -> Option<KernelVersion> {
        let mut parts = release.split(|c: char| !c.is_ascii_digit());
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        Some(KernelVersion { major, minor })
    }

    /// The behaviours of this release (those that do not also depend on the configuration; see
    /// [`KernelConfig::behaviour`](crate::KernelConfig::behaviour)).
    #[must_use]
    pub const fn behaviour(self) -> Behaviour {
        Behaviour {
            compound_info_mask: self.at_least(KernelVersion::V7_1),
            hvo_shared_tail: self.at_least(KernelVersion::V7_1),
            folio_layout: self.newest_of(
                &[(KernelVersion::V6_15, FolioLayout::MmIds), (KernelVersion::V6_12, FolioLayout::NrPages)],
                FolioLayout::FolioDtor,
            ),
            fsdax_refcount_zero: self.at_least(KernelVersion::V6_15),
            zone_device_pageblock_range: self.at_least(KernelVersion::V7_2),
            zone_device_early_sections: self.at_least(KernelVersion::V7_2),
            deferred_job_per_zone: self.at_least(KernelVersion::V6_18),
            free_splits_pageblocks: self.at_least(KernelVersion::V6_10),
            page_type_top_byte: self.at_least(KernelVersion::V6_12),
            page_flags: self.newest_of(
                &[(KernelVersion::V6_14, PageFlagBits::V6_14), (KernelVersion::V6_12, PageFlagBits::V6_12)],
                PageFlagBits::V6_1,
            ),
            dax_vmemmap_needs_arch_option: self.at_least(KernelVersion::V6_12),
            alloc_migratetype_in_index: !self.at_least(KernelVersion::V6_10),
            gigantic_tail_mapping: self.at_least(KernelVersion::V6_12),
            bootmem_type_in_private: self.at_least(KernelVersion::V7_2),
            bootmem_info_registered: !self.at_least(KernelVersion::V7_3),
            hugetlb_boot_list_tail: self.at_least(KernelVersion::V7_3),
            reserved_page_nid_by_pfn: !self.at_least(KernelVersion::V6_12),
            hugetlb_bootmem_batched: self.at_least(KernelVersion::V6_12),
            deferred_free_max_order: self.at_least(KernelVersion::V6_5),
            pageblock_bits: if self.at_least(KernelVersion::V6_16) { 8 } else { 4 },
        }
    }

    /// The value of the newest change of `changes` (each the release that made it and the
    /// value from then on, newest first) that this release has; `before` if it has none.
    const fn newest_of<T: Copy>(self, changes: &[(KernelVersion, T)], before: T) -> T {
        let mut i = 0;
        while i < changes.len() {
            if self.at_least(changes[i].0) {
                return changes[i].1;
            }
            i += 1;
        }
        before
    }

    /// `self >= v`, usable in `const fn`.
    #[must_use]
    pub(crate) const fn at_least(self, v: KernelVersion) -> bool {
        self.major > v.major || (self.major == v.major && self.minor >= v.minor)
    }
}

impl fmt::Display for KernelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// The large-folio overlay of pages 1 to 3, as `include/linux/mm_types.h` laid it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FolioLayout {
    /// 6.12 to 6.14: the 64-bit `_folio_nr_pages` in page\[1\], the hugetlb fields in page\[2\]
    /// ([`folio::v6_12`](crate::folio::v6_12)).
    NrPages,
    /// From 6.15 (`CONFIG_MM_ID`): `_mm_ids` and `_nr_pages` in page\[1\], `_deferred_list` in
    /// page\[2\], the hugetlb fields in page\[3\] ([`folio`](crate::folio)).
    MmIds,
    /// 6.1 to 6.11: `_folio_dtor` and `_folio_order` bytes in page\[1\], the hugetlb pointers in
    /// the `private` words of pages 1 to 3 ([`folio::v6_1`](crate::folio::v6_1)).
    FolioDtor,
}

impl FolioLayout {
    /// The page of the folio whose words from +16 hold the hugetlb subpool and cgroup fields
    /// (for [`FolioLayout::FolioDtor`], which keeps them in `private` words, the last page
    /// `init_new_hugetlb_folio()` needs).
    #[must_use]
    pub const fn hugetlb_fields_page(self) -> u64 {
        match self {
            FolioLayout::NrPages | FolioLayout::FolioDtor => 2,
            FolioLayout::MmIds => 3,
        }
    }
}

/// What a kernel does that changed between releases, one field per upstream change (the
/// release of each, and what the oracle saw, are in `docs/kernel-model.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Behaviour {
    /// 7.1, "mm: rework compound_head() for power-of-2 sizeof(struct page)": a tail's
    /// `compound_info` holds `GENMASK(63, order + log2(sizeof(struct page))) | 1` instead of
    /// `head | 1`, with `CONFIG_HUGETLB_PAGE_OPTIMIZE_VMEMMAP` and a power-of-two struct page
    /// ([`KernelConfig::compound_head_word`](crate::KernelConfig::compound_head_word)).
    pub compound_info_mask: bool,
    /// 7.1, "mm/hugetlb: remove fake head pages": HVO maps the optimized tail vmemmap of every
    /// folio onto one shared page per order, not onto the folio's own head page.
    pub hvo_shared_tail: bool,
    /// The folio overlay of pages 1 to 3.
    pub folio_layout: FolioLayout,
    /// 6.15, "fs/dax: properly refcount fs dax pages": `MEMORY_DEVICE_FS_DAX` pages start with
    /// `_refcount` 0, not 1.
    pub fsdax_refcount_zero: bool,
    /// 7.2, "mm/mm_init: fix pageblock migratetype for ZONE_DEVICE compound pages":
    /// `memmap_init_zone_device()` sets every pageblock's migrate type after the struct pages,
    /// not only those of the pageblock-aligned struct pages it initialized.
    pub zone_device_pageblock_range: bool,
    /// 7.2, "mm/mm_init: fix uninitialized struct pages for ZONE_DEVICE": `compound_nr_pages()`
    /// initializes every struct page of a compound page in an early section.
    pub zone_device_early_sections: bool,
    /// 6.18, "mm/mm_init: deferred_init_memmap: use a job per zone": one padata job over the
    /// deferred zone instead of one per free range (same memmap, other chunks).
    pub deferred_job_per_zone: bool,
    /// 6.10, "mm: page_isolation: prepare for hygienic freelists": frees above a pageblock are
    /// split into pageblocks (`split_large_buddy()`), and `unset_migratetype_isolate()` frees
    /// an isolated free head again (leaving `LIST_POISON1/2` in its `lru`, see
    /// [`online_pages`](crate::online_pages)).
    pub free_splits_pageblocks: bool,
    /// The page_type rework (from 6.12 in the model): the type in the top byte (`PGTY_buddy <<
    /// 24`); before, cleared bits of `PAGE_TYPE_BASE` (`~PG_buddy` = `0xffffff7f`).
    pub page_type_top_byte: bool,
    /// The bit numbers of the page flags the initializers set (`enum pageflags` changed order
    /// between 6.1 and 6.12).
    pub page_flags: PageFlagBits,
    /// From 6.12 in the model: the DAX vmemmap optimization (`vmemmap_can_optimize()`) needs
    /// `CONFIG_ARCH_WANT_OPTIMIZE_DAX_VMEMMAP`; before, only a power-of-two struct page and no
    /// altmap.
    pub dax_vmemmap_needs_arch_option: bool,
    /// Before 6.10 ("mm: page_alloc: remove pcppage migratetype caching"): a block taken from a
    /// free list keeps the list's migrate type in the head's `index`.
    pub alloc_migratetype_in_index: bool,
    /// From 6.12 in the model: the tails of a gigantic hugetlb folio get
    /// `prep_compound_tail()` (`mapping = TAIL_MAPPING`); 6.1's
    /// `__prep_compound_gigantic_page()` leaves `mapping` 0.
    pub gigantic_tail_mapping: bool,
    /// From 7.2 in the model: `get_page_bootmem()` packs its type into `private` (`info << 4 |
    /// type`) and sets no flag; before, the type in `index`, `info` in `private` and
    /// `PG_private`.
    pub bootmem_type_in_private: bool,
    /// Before 7.3, which removed `mm/bootmem_info.c` (x86-64 with `MEMORY_HOTREMOVE`): after boot,
    /// `register_page_bootmem_info()` calls `get_page_bootmem()` on the frames holding each
    /// section's memmap, usemap, page tables and the node's pgdat; from 7.3 those frames keep
    /// the reserved struct page `reserve_bootmem_region()` wrote.
    pub bootmem_info_registered: bool,
    /// From 7.3, `alloc_bootmem_huge_page()` adds each boot-time gigantic page at the tail of
    /// `huge_boot_pages[nid]` (`list_add_tail()`), so the list keeps allocation order (highest
    /// pfn first) and the free list ends in descending pfn order; before, `list_add()`.
    pub hugetlb_boot_list_tail: bool,
    /// Before 6.12 in the model (the change lies between 6.1 and 6.12): `init_reserved_page()`
    /// takes a reserved page's node from `early_pfn_to_nid()` (node 0 outside memory) instead of
    /// the reserved region's node, and with deferred init re-initializes such a page of another
    /// node as node 0's, zone `MAX_NR_ZONES`.
    pub reserved_page_nid_by_pfn: bool,
    /// From 6.12 in the model: boot-time hugetlb folios are enqueued as a batch
    /// (`prep_and_add_bootmem_folios()`), so the free list keeps ascending pfn order; before,
    /// one by one at the list's head (descending).
    pub hugetlb_bootmem_batched: bool,
    /// 6.5, "mm/page_alloc: make deferred page init free pages in MAX_ORDER blocks": deferred
    /// init frees `MAX_PAGE_ORDER` chunks (`deferred_free_pages()`), not pageblocks.
    pub deferred_free_max_order: bool,
    /// 6.16, "mm/page_isolation: make page isolation a standalone bit": bits per pageblock in
    /// a section's `pageblock_flags` (`NR_PAGEBLOCK_BITS` rounded up to a power of two), 8
    /// with `PB_migrate_isolate`, 4 before.
    pub pageblock_bits: u32,
}

/// The bit numbers in `page->flags` of the page flags the model's initializers set, and the
/// allocator's free check, from the release's `enum pageflags` (`include/linux/page-flags.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PageFlagBits {
    /// `PG_reserved`.
    pub reserved: u32,
    /// `PG_head`.
    pub head: u32,
    /// `PG_private`.
    pub private: u32,
    /// The page-flag bits of `PAGE_FLAGS_CHECK_AT_FREE`: `PG_lru`, `PG_locked`, `PG_private`,
    /// `PG_private_2`, `PG_writeback`, `PG_reserved`, `PG_active`, `PG_unevictable`,
    /// `PG_mlocked` (`CONFIG_MMU`), and before 6.10 `PG_slab` (the LRU generation field the
    /// macro also names is not a flag bit: the node adds it from the flags layout).
    pub check_at_free: u64,
}

/// `PAGE_FLAGS_CHECK_AT_FREE`'s flag bits from the bit numbers of the nine flags
/// [`PageFlagBits::check_at_free`] lists and any others of the release.
const fn check_at_free(bits: [u32; 9], others: u64) -> u64 {
    let mut mask = others;
    let mut i = 0;
    while i < bits.len() {
        mask |= 1 << bits[i];
        i += 1;
    }
    mask
}

/// [`check_at_free`] from 6.12 (the bits of [`PG`]), with `PG_mlocked` (moved by 6.14) at `mlocked`.
const fn check_at_free_from_6_12(mlocked: u32) -> u64 {
    check_at_free(
        [
            PG::LRU,
            PG::LOCKED,
            PG::PRIVATE,
            PG::PRIVATE_2,
            PG::WRITEBACK,
            PG::RESERVED,
            PG::ACTIVE,
            PG::UNEVICTABLE,
            mlocked,
        ],
        0,
    )
}

impl PageFlagBits {
    /// The order from 6.14 (**oracle**: 7.2 for `PG_reserved` and `PG_head`): `PG_head` 6
    /// ("must be in bit 6"), `PG_reserved` 13, `PG_dropbehind` 19 before `PG_mlocked` 20; the
    /// constants of [`PG`].
    pub const V6_14: PageFlagBits = PageFlagBits {
        reserved: PG::RESERVED,
        head: PG::HEAD,
        private: PG::PRIVATE,
        check_at_free: check_at_free_from_6_12(PG::MLOCKED),
    };
    /// 6.12 and 6.13 (**oracle**: 6.12 for `PG_reserved` and `PG_head`): the order of
    /// [`PageFlagBits::V6_14`] without `PG_dropbehind`, so `PG_mlocked` is 19.
    pub const V6_12: PageFlagBits =
        PageFlagBits { check_at_free: check_at_free_from_6_12(PG::MLOCKED - 1), ..PageFlagBits::V6_14 };
    /// 6.1's order (**oracle**: 6.1.176 for `PG_reserved` and `PG_head`): `PG_locked` 0,
    /// `PG_referenced`, `PG_uptodate`, `PG_dirty`, `PG_lru` 4, `PG_active` 5, `PG_workingset`,
    /// `PG_waiters` 7, `PG_error`, `PG_slab` 9, `PG_owner_priv_1`, `PG_arch_1`, `PG_reserved`
    /// 12, `PG_private` 13, `PG_private_2` 14, `PG_writeback` 15, `PG_head` 16,
    /// `PG_mappedtodisk`, `PG_reclaim`, `PG_swapbacked`, `PG_unevictable` 20, `PG_mlocked` 21;
    /// the free check also has `PG_slab`.
    pub const V6_1: PageFlagBits = PageFlagBits {
        reserved: 12,
        head: 16,
        private: 13,
        check_at_free: check_at_free([4, 0, 13, 14, 15, 12, 5, 20, 21], 1 << 9),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `PAGE_FLAGS_CHECK_AT_FREE` of each release as the kernel's headers spell it: 6.1's
    /// with `PG_slab`, 6.12's with `PG_mlocked` 19, 6.14's with `PG_mlocked` 20.
    #[test]
    fn the_free_check_follows_the_release() {
        assert_eq!(PageFlagBits::V6_1.check_at_free, 0x30_f231);
        assert_eq!(PageFlagBits::V6_12.check_at_free, 0x0c_e123);
        assert_eq!(PageFlagBits::V6_14.check_at_free, 0x14_e123);
        for b in [PageFlagBits::V6_1, PageFlagBits::V6_12, PageFlagBits::V6_14] {
            assert_ne!(b.check_at_free & 1 << b.reserved, 0);
        }
    }

    #[test]
    fn pageblocks_take_8_bits_from_6_16() {
        let bits = |major, minor| KernelVersion::new(major, minor).behaviour().pageblock_bits;
        assert_eq!((bits(6, 1), bits(6, 12), bits(6, 15)), (4, 4, 4));
        assert_eq!((bits(6, 16), bits(7, 2)), (8, 8));
    }

    #[test]
    fn releases_parse_from_their_strings() {
        assert_eq!(KernelVersion::parse("7.2.13+deb14-amd64"), Some(KernelVersion::V7_2));
        assert_eq!(KernelVersion::parse("6.12.95+deb12-amd64"), Some(KernelVersion::V6_12));
        assert_eq!(KernelVersion::parse("6.12"), Some(KernelVersion::V6_12));
        assert_eq!(KernelVersion::parse("7.3-amd64"), Some(KernelVersion::V7_3));
        assert_eq!(KernelVersion::parse("7"), None);
        assert_eq!(KernelVersion::parse("x.y"), None);
        assert_eq!(std::format!("{}", KernelVersion::V7_2), "7.2");
    }

    #[test]
    fn the_compared_releases_differ_where_the_oracle_saw_it() {
        let old = KernelVersion::V6_12.behaviour();
        let new = KernelVersion::V7_2.behaviour();
        assert!(!old.compound_info_mask && new.compound_info_mask);
        assert!(!old.hvo_shared_tail && new.hvo_shared_tail);
        assert_eq!((old.folio_layout, new.folio_layout), (FolioLayout::NrPages, FolioLayout::MmIds));
        assert!(!old.fsdax_refcount_zero && new.fsdax_refcount_zero);
        assert!(!old.zone_device_pageblock_range && new.zone_device_pageblock_range);
        assert!(!old.zone_device_early_sections && new.zone_device_early_sections);
        assert_eq!(old.page_flags, PageFlagBits::V6_12);
        assert!(old.dax_vmemmap_needs_arch_option);
        let v6_1 = KernelVersion::V6_1.behaviour();
        assert_eq!(v6_1.folio_layout, FolioLayout::FolioDtor);
        assert_eq!((v6_1.page_flags.reserved, v6_1.page_flags.head), (12, 16));
        assert_eq!(new.page_flags, PageFlagBits::V6_14);
        assert!(!v6_1.dax_vmemmap_needs_arch_option && !v6_1.page_type_top_byte);
        assert!(KernelVersion::V6_12 < KernelVersion::V6_14 && KernelVersion::V6_14 < KernelVersion::V6_15);
        assert!(KernelVersion::V6_12 < KernelVersion::V6_15 && KernelVersion::V7_1 < KernelVersion::V7_2);
        // 7.3: no boot memory info, boot gigantic pages listed in allocation order; the rest as
        // 7.2.
        let v7_3 = KernelVersion::V7_3.behaviour();
        assert!(new.bootmem_info_registered && !v7_3.bootmem_info_registered);
        assert!(!new.hugetlb_boot_list_tail && v7_3.hugetlb_boot_list_tail);
        assert_eq!(Behaviour { bootmem_info_registered: true, hugetlb_boot_list_tail: false, ..v7_3 }, new);
    }
}
