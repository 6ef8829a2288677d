//! The zone free-list model: what `struct zone`'s `free_area[]` holds and how the buddy
//! allocator encodes a free block in its head's struct page, defined once for the node's
//! allocator ([`Node`](crate::Node)) and memory hotplug ([`HotplugZone`](crate::HotplugZone)).
//!
//! * [`FreeLists`]: the list heads `zone->free_area[order].free_list[mt]` (at modelled kernel
//!   addresses, so the first and last block of a list point at a recognisable address) and
//!   their `nr_free`, per order and migrate type.
//! * [`Rules`]: the release's encodings and orders: the `page_type` of a free block's head
//!   ([`buddy_page_type`]), `MAX_PAGE_ORDER`, `pageblock_order`, and whether a free larger
//!   than a pageblock is split into pageblocks (6.10+).
//! * The list poison `list_del()` leaves ([`LIST_POISON1`], [`LIST_POISON2`]).

use crate::model::config::KernelConfig;
use crate::model::flags::{MigrateType, PageType};

/// Orders the model keeps free lists for (`MAX_PAGE_ORDER` must be below this).
pub(crate) const MAX_ORDERS: usize = 24;

/// Migrate types with a free list in the model: UNMOVABLE, MOVABLE, RECLAIMABLE, ISOLATE.
const MT_SLOTS: usize = 4;

/// `LIST_POISON1` (`0x100 + POISON_POINTER_DELTA`).
pub(crate) const LIST_POISON1: u64 = 0xdead_0000_0000_0100;
/// `LIST_POISON2` (`0x122 + POISON_POINTER_DELTA`).
pub(crate) const LIST_POISON2: u64 = 0xdead_0000_0000_0122;

/// `page_type` of an untyped page (`_mapcount == -1`): what `__ClearPageBuddy()` leaves.
pub(crate) const PAGE_TYPE_NONE: u32 = u32::MAX;

/// Modelled offset of `free_area[0]` in `struct zone`.
const FREE_AREA_OFFSET: u64 = 0x100;
/// Modelled `sizeof(struct free_area)`: `MIGRATE_TYPES` (6) list heads and `nr_free`.
const FREE_AREA_SIZE: u64 = 6 * 16 + 8;

/// Modelled kernel address of `NODE_DATA(nid)->node_zones[zone]`: a direct-map address, one
/// 256 KiB `pglist_data` per node, 0x1000 bytes per zone. Only used so the free lists hold
/// stable, recognisable list-head addresses; it wraps like the kernel's pointer arithmetic
/// (the base is the configuration's `page_offset`).
#[must_use]
pub(crate) const fn zone_struct_addr(cfg: &KernelConfig, nid: u32, zone: u32) -> u64 {
    cfg.page_offset.wrapping_add(0x7f00_0000 + nid as u64 * 0x4_0000 + 0x1000 + zone as u64 * 0x1000)
}

/// `page_type` of a free block's head in the release of `cfg`: `PGTY_buddy << 24` from 6.12,
/// `~PG_buddy` (`0xffffff7f`) before
/// ([`Behaviour::page_type_top_byte`](crate::Behaviour::page_type_top_byte)).
#[must_use]
pub const fn buddy_page_type(cfg: &KernelConfig) -> u32 {
    if cfg.behaviour().page_type_top_byte { PageType::word(PageType::BUDDY) } else { 0xffff_ff7f }
}

/// The list slot of a migrate type.
const fn slot(mt: MigrateType) -> usize {
    match mt {
        MigrateType::Unmovable => 0,
        MigrateType::Movable => 1,
        MigrateType::Reclaimable => 2,
        MigrateType::Isolate => 3,
    }
}

/// The migrate types with a list, in slot order.
const SLOT_TYPES: [MigrateType; MT_SLOTS] =
    [MigrateType::Unmovable, MigrateType::Movable, MigrateType::Reclaimable, MigrateType::Isolate];

/// `zone->free_area[]`: the list heads and `nr_free` of every order and migrate type of one
/// zone. A new one has empty lists (each head points at itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FreeLists {
    zone_addr: u64,
    /// `(next, prev)` of each list head, by order and migrate-type slot.
    heads: [[(u64, u64); MT_SLOTS]; MAX_ORDERS],
    nr_free: [[u64; MT_SLOTS]; MAX_ORDERS],
}

impl FreeLists {
    /// Empty lists of the zone at modelled address `zone_addr` ([`zone_struct_addr`]).
    pub(crate) fn new(zone_addr: u64) -> Self {
        let mut l = FreeLists {
            zone_addr,
            heads: [[(0, 0); MT_SLOTS]; MAX_ORDERS],
            nr_free: [[0; MT_SLOTS]; MAX_ORDERS],
        };
        for order in 0..MAX_ORDERS as u32 {
            for mt in SLOT_TYPES {
                let h = l.head_addr(order, mt);
                l.heads[order as usize][slot(mt)] = (h, h);
            }
        }
        l
    }

    /// The modelled address of `zone->free_area[order].free_list[mt]`.
    #[inline]
    #[must_use]
    pub(crate) const fn head_addr(&self, order: u32, mt: MigrateType) -> u64 {
        self.zone_addr
            .wrapping_add(FREE_AREA_OFFSET)
            .wrapping_add(order as u64 * FREE_AREA_SIZE)
            .wrapping_add(mt.value() as u64 * 16)
    }

    /// `(next, prev)` of the list head of `(order, mt)`.
    #[inline]
    #[must_use]
    pub(crate) fn head(&self, order: u32, mt: MigrateType) -> (u64, u64) {
        self.heads[order as usize][slot(mt)]
    }

    /// Sets `next` of the list head of `(order, mt)`.
    #[inline]
    pub(crate) fn set_head_next(&mut self, order: u32, mt: MigrateType, v: u64) {
        self.heads[order as usize][slot(mt)].0 = v;
    }

    /// Sets `prev` of the list head of `(order, mt)`.
    #[inline]
    pub(crate) fn set_head_prev(&mut self, order: u32, mt: MigrateType, v: u64) {
        self.heads[order as usize][slot(mt)].1 = v;
    }

    /// `free_area[order].nr_free` of migrate type `mt` (0 for orders beyond the model's).
    #[inline]
    #[must_use]
    pub(crate) fn nr_free(&self, order: u32, mt: MigrateType) -> u64 {
        self.nr_free.get(order as usize).map_or(0, |o| o[slot(mt)])
    }

    /// Adds `n` blocks to the count of `(order, mt)` (saturating).
    #[inline]
    pub(crate) fn add_free(&mut self, order: u32, mt: MigrateType, n: u64) {
        let c = &mut self.nr_free[order as usize][slot(mt)];
        *c = c.saturating_add(n);
    }

    /// Takes one block off the count of `(order, mt)` (saturating).
    #[inline]
    pub(crate) fn sub_free(&mut self, order: u32, mt: MigrateType) {
        let c = &mut self.nr_free[order as usize][slot(mt)];
        *c = c.saturating_sub(1);
    }
}

/// The buddy allocator's rules in one release and configuration: the encodings it writes and
/// the orders it merges and splits at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rules {
    /// `page_type` of a free block's head ([`buddy_page_type`]).
    pub(crate) buddy_type: u32,
    /// `MAX_PAGE_ORDER`.
    pub(crate) max_order: u32,
    /// `pageblock_order`.
    pub(crate) pageblock_order: u32,
    /// 6.10+: `free_one_page()` splits a block larger than a pageblock into pageblocks
    /// (`split_large_buddy()`), and undoing isolation goes through `__isolate_free_page()`
    /// ([`Behaviour::free_splits_pageblocks`](crate::Behaviour::free_splits_pageblocks)).
    pub(crate) split: bool,
}

impl Rules {
    /// The rules of `cfg`'s release.
    #[must_use]
    pub(crate) const fn of(cfg: &KernelConfig) -> Self {
        Rules {
            buddy_type: buddy_page_type(cfg),
            max_order: cfg.max_page_order,
            pageblock_order: cfg.pageblock_order,
            split: cfg.behaviour().free_splits_pageblocks,
        }
    }

    /// Whether `cfg`'s orders fit the model: `MAX_PAGE_ORDER` below [`MAX_ORDERS`] and
    /// `pageblock_order` at most `MAX_PAGE_ORDER`.
    #[must_use]
    pub(crate) const fn orders_supported(cfg: &KernelConfig) -> bool {
        (cfg.max_page_order as usize) < MAX_ORDERS && cfg.pageblock_order <= cfg.max_page_order
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_lists_point_at_their_heads_in_the_modelled_layout() {
        let cfg = KernelConfig::X86_64;
        let l = FreeLists::new(zone_struct_addr(&cfg, 1, 2));
        let zone = cfg.page_offset + 0x7f00_0000 + 0x4_0000 + 0x1000 + 2 * 0x1000;
        assert_eq!(l.head_addr(0, MigrateType::Unmovable), zone + 0x100);
        assert_eq!(l.head_addr(3, MigrateType::Isolate), zone + 0x100 + 3 * 104 + 5 * 16);
        for mt in SLOT_TYPES {
            let h = l.head_addr(10, mt);
            assert_eq!(l.head(10, mt), (h, h));
            assert_eq!(l.nr_free(10, mt), 0);
        }
        assert_eq!(l.nr_free(MAX_ORDERS as u32, MigrateType::Movable), 0);
    }

    #[test]
    fn the_buddy_type_follows_the_release() {
        let cfg = KernelConfig::X86_64;
        assert_eq!(buddy_page_type(&cfg), 0xf000_0000);
        assert_eq!(buddy_page_type(&cfg.with_version(crate::KernelVersion::V6_12)), 0xf000_0000);
        assert_eq!(buddy_page_type(&cfg.with_version(crate::KernelVersion::V6_1)), 0xffff_ff7f);
        assert!(Rules::of(&cfg).split && !Rules::of(&cfg.with_version(crate::KernelVersion::V6_1)).split);
    }
}
