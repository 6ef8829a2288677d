//! [`FlagsLayout`]: `include/linux/page-flags-layout.h` and the `*_PGOFF`/`*_PGSHIFT`
//! arithmetic of `include/linux/mmzone.h`, evaluated for one [`KernelConfig`].

use core::fmt;

use super::KernelConfig;

/// Why a [`KernelConfig`] cannot be modelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// `MAX_NR_ZONES` is 0 or above 8 (`ZONES_SHIFT` is defined only up to 3).
    TooManyZones(u32),
    /// A size parameter is out of range (page shift, section bits, pageblock order...).
    BadParameter(&'static str),
    /// `__NR_PAGEFLAGS` leaves no room for the fields.
    PageFlagsFull {
        /// Bits the fields need.
        needed: u32,
        /// Bits available (`64 - NR_PAGEFLAGS`).
        available: u32,
    },
    /// The node id does not fit in `page->flags`: the kernel would define
    /// `NODE_NOT_IN_PAGE_FLAGS` (or `#error` with VMEMMAP). Not modelled.
    NodeNotInPageFlags,
    /// `LAST_CPUPID` does not fit: the kernel would add `_last_cpupid` to `struct page`. Not
    /// modelled (it changes `sizeof(struct page)`).
    LastCpupidNotInPageFlags,
    /// KASAN tag does not fit ("KASAN: not enough bits in page flags for tag").
    KasanTagDoesNotFit,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::TooManyZones(n) => write!(f, "MAX_NR_ZONES = {n} is outside 1..=8"),
            ConfigError::BadParameter(what) => write!(f, "bad kernel config parameter: {what}"),
            ConfigError::PageFlagsFull { needed, available } => {
                write!(f, "page->flags fields need {needed} bits but only {available} are free")
            }
            ConfigError::NodeNotInPageFlags => f.write_str("node id does not fit in page->flags"),
            ConfigError::LastCpupidNotInPageFlags => {
                f.write_str("LAST_CPUPID does not fit in page->flags (would add _last_cpupid)")
            }
            ConfigError::KasanTagDoesNotFit => f.write_str("KASAN tag does not fit in page->flags"),
        }
    }
}

impl core::error::Error for ConfigError {}

/// Positions of the non-flag fields of `page->flags`, computed as
/// `include/linux/page-flags-layout.h` and `include/linux/mmzone.h` do.
///
/// Layout, high bits first: `| SECTION | NODE | ZONE | LAST_CPUPID | KASAN_TAG | LRU_GEN |
/// LRU_REFS | ... | FLAGS |`. A field of width 0 is absent and has shift 0
/// (`X_PGSHIFT = X_PGOFF * (X_WIDTH != 0)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlagsLayout {
    /// `SECTIONS_WIDTH` (0 under SPARSEMEM_VMEMMAP).
    pub sections_width: u32,
    /// `SECTIONS_PGSHIFT`.
    pub sections_pgshift: u32,
    /// `NODES_WIDTH`.
    pub nodes_width: u32,
    /// `NODES_PGSHIFT`.
    pub nodes_pgshift: u32,
    /// `ZONES_WIDTH`.
    pub zones_width: u32,
    /// `ZONES_PGSHIFT`.
    pub zones_pgshift: u32,
    /// `LAST_CPUPID_WIDTH`.
    pub last_cpupid_width: u32,
    /// `LAST_CPUPID_PGSHIFT`.
    pub last_cpupid_pgshift: u32,
    /// `LAST_CPUPID_SHIFT` (the mask width, used even where the field is absent).
    pub last_cpupid_shift: u32,
    /// `KASAN_TAG_WIDTH`.
    pub kasan_tag_width: u32,
    /// `KASAN_TAG_PGSHIFT`.
    pub kasan_tag_pgshift: u32,
    /// `LRU_GEN_WIDTH`.
    pub lru_gen_width: u32,
    /// `LRU_GEN_PGSHIFT`.
    pub lru_gen_pgshift: u32,
    /// `LRU_REFS_WIDTH`.
    pub lru_refs_width: u32,
    /// `LRU_REFS_PGSHIFT`.
    pub lru_refs_pgshift: u32,
    /// `NR_PAGEFLAGS`.
    pub nr_pageflags: u32,
}

const BITS_PER_LONG: u32 = 64;

const fn zones_shift(max_nr_zones: u32) -> Option<u32> {
    match max_nr_zones {
        1 => Some(0),
        2 => Some(1),
        3..=4 => Some(2),
        5..=8 => Some(3),
        _ => None,
    }
}

const fn shift_if(width: u32, pgoff: u32) -> u32 {
    if width != 0 { pgoff } else { 0 }
}

const fn mask(width: u32) -> u64 {
    if width == 0 {
        0
    } else if width >= 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    }
}

impl FlagsLayout {
    /// See [`KernelConfig::flags_layout`].
    ///
    /// # Errors
    ///
    /// As [`KernelConfig::flags_layout`].
    pub(crate) const fn compute(cfg: &KernelConfig) -> Result<FlagsLayout, ConfigError> {
        if cfg.page_shift < 10 || cfg.page_shift > 18 {
            return Err(ConfigError::BadParameter("page_shift must be in 10..=18"));
        }
        if cfg.section_size_bits <= cfg.page_shift || cfg.section_size_bits > cfg.max_physmem_bits {
            return Err(ConfigError::BadParameter(
                "section_size_bits must be in (page_shift, max_physmem_bits]",
            ));
        }
        if cfg.max_physmem_bits > 52 + 4 {
            return Err(ConfigError::BadParameter("max_physmem_bits must be at most 56"));
        }
        if cfg.pageblock_order > cfg.pfn_section_shift() || cfg.max_page_order > cfg.pfn_section_shift() {
            return Err(ConfigError::BadParameter(
                "pageblock_order and max_page_order must fit in a section",
            ));
        }
        if cfg.nr_pageflags >= BITS_PER_LONG {
            return Err(ConfigError::BadParameter("nr_pageflags must be below 64"));
        }
        // Every field width is at most a word, so the sums below cannot overflow.
        if cfg.nodes_shift > BITS_PER_LONG
            || cfg.last_cpupid_shift > BITS_PER_LONG
            || cfg.kasan_tag_width > BITS_PER_LONG
            || cfg.lru_gen_width > BITS_PER_LONG
            || cfg.lru_refs_width > BITS_PER_LONG
        {
            return Err(ConfigError::BadParameter("a page->flags field is wider than 64 bits"));
        }
        let Some(zones_width) = zones_shift(cfg.max_nr_zones) else {
            return Err(ConfigError::TooManyZones(cfg.max_nr_zones));
        };
        let available = BITS_PER_LONG - cfg.nr_pageflags;
        let sections_width =
            if cfg.sparsemem_vmemmap { 0 } else { cfg.max_physmem_bits - cfg.section_size_bits };
        // NODES_WIDTH, then KASAN_TAG_WIDTH, then LAST_CPUPID_WIDTH must fit next to zones,
        // MGLRU and sections, or the kernel moves the field out of `page->flags` (not modelled).
        let (nodes_width, last_cpupid_width) = (cfg.nodes_shift, cfg.last_cpupid_shift);
        let mut used = zones_width + cfg.lru_gen_width + sections_width + nodes_width;
        if used > available {
            return Err(ConfigError::NodeNotInPageFlags);
        }
        used += cfg.kasan_tag_width;
        if used > available {
            return Err(ConfigError::KasanTagDoesNotFit);
        }
        used += last_cpupid_width;
        if used > available {
            return Err(ConfigError::LastCpupidNotInPageFlags);
        }
        // LRU_REFS_WIDTH = min(__LRU_REFS_WIDTH, what is left).
        let left = available - used;
        let lru_refs_width = if cfg.lru_refs_width < left { cfg.lru_refs_width } else { left };

        let sections_pgoff = BITS_PER_LONG - sections_width;
        let nodes_pgoff = sections_pgoff - nodes_width;
        let zones_pgoff = nodes_pgoff - zones_width;
        let last_cpupid_pgoff = zones_pgoff - last_cpupid_width;
        let kasan_tag_pgoff = last_cpupid_pgoff - cfg.kasan_tag_width;
        let lru_gen_pgoff = kasan_tag_pgoff - cfg.lru_gen_width;
        let lru_refs_pgoff = lru_gen_pgoff - lru_refs_width;

        Ok(FlagsLayout {
            sections_width,
            sections_pgshift: shift_if(sections_width, sections_pgoff),
            nodes_width,
            nodes_pgshift: shift_if(nodes_width, nodes_pgoff),
            zones_width,
            zones_pgshift: shift_if(zones_width, zones_pgoff),
            last_cpupid_width,
            last_cpupid_pgshift: shift_if(last_cpupid_width, last_cpupid_pgoff),
            last_cpupid_shift: cfg.last_cpupid_shift,
            kasan_tag_width: cfg.kasan_tag_width,
            kasan_tag_pgshift: shift_if(cfg.kasan_tag_width, kasan_tag_pgoff),
            lru_gen_width: cfg.lru_gen_width,
            lru_gen_pgshift: shift_if(cfg.lru_gen_width, lru_gen_pgoff),
            lru_refs_width,
            lru_refs_pgshift: shift_if(lru_refs_width, lru_refs_pgoff),
            nr_pageflags: cfg.nr_pageflags,
        })
    }

    /// `ZONES_MASK`.
    #[must_use]
    pub(crate) const fn zones_mask(&self) -> u64 {
        mask(self.zones_width)
    }

    /// `NODES_MASK`.
    #[must_use]
    pub const fn nodes_mask(&self) -> u64 {
        mask(self.nodes_width)
    }

    /// `SECTIONS_MASK`.
    #[must_use]
    pub(crate) const fn sections_mask(&self) -> u64 {
        mask(self.sections_width)
    }

    /// `SECTION_IN_PAGE_FLAGS`: flags depend on the PFN.
    #[must_use]
    pub(crate) const fn section_in_page_flags(&self) -> bool {
        self.sections_width != 0
    }

    /// `set_page_zone`: clears the zone field, then ORs the new value in.
    #[must_use]
    pub const fn set_zone(&self, flags: u64, zone: u32) -> u64 {
        let m = self.zones_mask();
        (flags & !(m << self.zones_pgshift)) | ((zone as u64 & m) << self.zones_pgshift)
    }

    /// `set_page_node`.
    #[must_use]
    pub const fn set_node(&self, flags: u64, node: u32) -> u64 {
        let m = self.nodes_mask();
        (flags & !(m << self.nodes_pgshift)) | ((node as u64 & m) << self.nodes_pgshift)
    }

    /// `set_page_section` (only meaningful with `SECTION_IN_PAGE_FLAGS`; a no-op otherwise,
    /// because the mask is empty).
    #[must_use]
    pub(crate) const fn set_section(&self, flags: u64, section: u64) -> u64 {
        let m = self.sections_mask();
        (flags & !(m << self.sections_pgshift)) | ((section & m) << self.sections_pgshift)
    }

    /// `page_zonenum`.
    #[must_use]
    pub const fn zone(&self, flags: u64) -> u32 {
        ((flags >> self.zones_pgshift) & self.zones_mask()) as u32
    }

    /// `page_to_nid` (node in flags).
    #[must_use]
    pub const fn node(&self, flags: u64) -> u32 {
        ((flags >> self.nodes_pgshift) & self.nodes_mask()) as u32
    }

    /// `page_to_section`.
    #[must_use]
    pub const fn section(&self, flags: u64) -> u64 {
        (flags >> self.sections_pgshift) & self.sections_mask()
    }

    /// `page_cpupid_reset_last` applied to `flags`: the LAST_CPUPID field all ones
    /// (`LAST_CPUPID_MASK` is from `LAST_CPUPID_SHIFT`, not the width).
    #[must_use]
    pub(crate) const fn cpupid_reset_last(&self, flags: u64) -> u64 {
        if self.last_cpupid_width == 0 {
            flags
        } else {
            flags | (mask(self.last_cpupid_shift) << self.last_cpupid_pgshift)
        }
    }

    /// `page_kasan_tag_set(page, tag)`: stores `tag ^ 0xff` in the KASAN tag field.
    #[must_use]
    pub(crate) const fn kasan_tag_set(&self, flags: u64, tag: u8) -> u64 {
        let m = mask(self.kasan_tag_width);
        let stored = (tag ^ 0xff) as u64 & m;
        (flags & !(m << self.kasan_tag_pgshift)) | (stored << self.kasan_tag_pgshift)
    }

    /// `set_page_links(page, zone, node, pfn)` on the given flags.
    #[must_use]
    pub(crate) const fn set_links(&self, flags: u64, zone: u32, node: u32, section: u64) -> u64 {
        let f = self.set_zone(flags, zone);
        let f = self.set_node(f, node);
        if self.section_in_page_flags() { self.set_section(f, section) } else { f }
    }
}

#[cfg(test)]
mod tests;
