//! Page flag bit numbers, page types and migrate types of the modelled kernel baseline.
//!
//! The `enum pageflags` order of 6.14 and later (`PG_locked` 0 ... `PG_reserved` 13 ...
//! `PG_dropbehind` 19), flags in one `unsigned long`. The initializers take the bits they write
//! from the modelled release's [`Behaviour::page_flags`](crate::Behaviour::page_flags) (6.1 has
//! `PG_reserved` 12 and `PG_head` 16, 6.12 `PG_mlocked` 19).

/// The `enum pageflags` bit numbers the model uses (v6.14+ order, `include/linux/page-flags.h`).
#[allow(missing_docs)]
pub struct PG;

#[allow(missing_docs)]
impl PG {
    pub(crate) const LOCKED: u32 = 0;
    pub(crate) const WRITEBACK: u32 = 1;
    pub const LRU: u32 = 5;
    /// "Must be in bit 6".
    pub const HEAD: u32 = 6;
    pub(crate) const ACTIVE: u32 = 8;
    pub const RESERVED: u32 = 13;
    pub const PRIVATE: u32 = 14;
    pub(crate) const PRIVATE_2: u32 = 15;
    pub(crate) const UNEVICTABLE: u32 = 18;
    pub(crate) const MLOCKED: u32 = 20;
}

/// The page types the model writes, stored in the top byte of `page_type` (`PGTY_* << 24`,
/// `include/linux/page-flags.h`). `page_type == 0xffff_ffff` (`_mapcount == -1`) means no type.
#[allow(missing_docs)]
pub struct PageType;

#[allow(missing_docs)]
impl PageType {
    pub(crate) const BUDDY: u8 = 0xf0;
    pub(crate) const OFFLINE: u8 = 0xf1;
    pub const HUGETLB: u8 = 0xf4;

    /// The `page_type` word of a page of type `ty`: `ty << 24`.
    #[must_use]
    pub const fn word(ty: u8) -> u32 {
        (ty as u32) << 24
    }
}

/// Migrate types kept per pageblock (`enum migratetype`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
#[non_exhaustive]
pub enum MigrateType {
    /// `MIGRATE_UNMOVABLE` (0).
    Unmovable = 0,
    /// `MIGRATE_MOVABLE` (1).
    Movable = 1,
    /// `MIGRATE_RECLAIMABLE` (2).
    Reclaimable = 2,
    /// `MIGRATE_ISOLATE` (5 with `CONFIG_CMA`), what memory hotplug gives the pageblocks of a
    /// range while it is onlined (from 6.16 a bit of its own, reported as this value).
    Isolate = 5,
}

impl MigrateType {
    /// `migratetype_is_mergeable()`: a free block of this type may merge with a buddy of
    /// another such type (`mt < MIGRATE_PCPTYPES`); an isolated one never does.
    #[must_use]
    pub(crate) const fn is_mergeable(self) -> bool {
        !matches!(self, MigrateType::Isolate)
    }

    /// The stored value.
    #[must_use]
    pub const fn value(self) -> u8 {
        self as u8
    }

    /// Decodes a stored value.
    #[must_use]
    pub const fn from_value(v: u8) -> Option<MigrateType> {
        match v {
            0 => Some(MigrateType::Unmovable),
            1 => Some(MigrateType::Movable),
            2 => Some(MigrateType::Reclaimable),
            5 => Some(MigrateType::Isolate),
            _ => None,
        }
    }
}

/// `VMEMMAP_RESERVE_NR`: vmemmap pages of a ZONE_DEVICE compound page that are unique when the
/// DAX vmemmap optimization applies (the rest map the second one again).
pub(crate) const VMEMMAP_RESERVE_NR: u64 = 2;

/// `KASAN_TAG_KERNEL`, the tag `page_kasan_tag_reset` sets.
pub(crate) const KASAN_TAG_KERNEL: u8 = 0xff;
