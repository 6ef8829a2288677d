//! Memory hotplug: onlining a hot-added range into `ZONE_NORMAL` or `ZONE_MOVABLE`
//! (`mm/memory_hotplug.c`); the kernel's steps are documented on [`online_pages`].

use core::fmt;

use crate::InitError;
use crate::fill::{FillOptions, Strategy, StrategyReason};
use crate::freelist::{FreeLists, Rules, ZoneFreeLists, zone_struct_addr};
use crate::hooks::InitHooks;
use crate::memmap::engine::with_store;
use crate::memmap::{Memmap, PageAccess};
use crate::model::config::KernelConfig;
use crate::model::flags::MigrateType;
use crate::model::page::{StructPage, offsets};

/// The zone a hot-added range is onlined into (`online` / `online_kernel` gives
/// `ZONE_NORMAL` for memory above the boot memory, `online_movable` `ZONE_MOVABLE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HotplugTarget {
    /// `ZONE_NORMAL`: the zone two below `ZONE_DEVICE` (the presets' zones are DMA, DMA32,
    /// NORMAL, MOVABLE, DEVICE).
    Normal,
    /// `ZONE_MOVABLE`: the zone right below `ZONE_DEVICE`.
    Movable,
}

crate::named!(HotplugTarget { Normal => "normal", Movable => "movable" });

impl HotplugTarget {
    /// The zone index in `cfg`.
    #[must_use]
    pub const fn zone(self, cfg: &KernelConfig) -> u32 {
        match self {
            HotplugTarget::Normal => cfg.zone_device().saturating_sub(2),
            HotplugTarget::Movable => cfg.zone_device().saturating_sub(1),
        }
    }
}

/// Why a range could not be onlined. Nothing is written when one is returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum HotplugError {
    /// The memmap does not cover the range, or the configuration is invalid.
    Init(InitError),
    /// The zone is not one memory can be onlined into (it must be below `ZONE_DEVICE`).
    BadZone {
        /// Zone given.
        zone: u32,
        /// `ZONE_DEVICE`.
        zone_device: u32,
    },
    /// `online_pages()`'s alignment rule: the start must be pageblock-aligned and the end
    /// section-aligned.
    Misaligned {
        /// First pfn.
        start_pfn: u64,
        /// Pages.
        nr_pages: u64,
    },
    /// `MAX_PAGE_ORDER` is not below 24 or `pageblock_order` is above it.
    UnsupportedOrders {
        /// `max_page_order`.
        max_page_order: u32,
        /// `pageblock_order`.
        pageblock_order: u32,
    },
    /// The [`HotplugZone`] was made for another configuration than the memmap's.
    ZoneConfigMismatch,
    /// [`take_free_block`]: no free block starts at the pfn.
    NotFree {
        /// The pfn.
        pfn: u64,
    },
}

impl fmt::Display for HotplugError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            HotplugError::Init(e) => write!(f, "{e}"),
            HotplugError::BadZone { zone, zone_device } => {
                write!(f, "zone {zone} cannot take hot-added memory (ZONE_DEVICE is {zone_device})")
            }
            HotplugError::Misaligned { start_pfn, nr_pages } => write!(
                f,
                "pfns {start_pfn:#x} + {nr_pages}: the start must be pageblock-aligned and the end section-aligned"
            ),
            HotplugError::UnsupportedOrders { max_page_order, pageblock_order } => {
                write!(f, "MAX_PAGE_ORDER {max_page_order} / pageblock_order {pageblock_order} not supported")
            }
            HotplugError::ZoneConfigMismatch => {
                f.write_str("the hotplug zone was made for another kernel configuration")
            }
            HotplugError::NotFree { pfn } => write!(f, "no free block starts at pfn {pfn:#x}"),
        }
    }
}

impl core::error::Error for HotplugError {}

impl From<InitError> for HotplugError {
    fn from(e: InitError) -> Self {
        HotplugError::Init(e)
    }
}

/// The free lists and counters of the zone that hot-added memory is onlined into:
/// `zone->free_area[order].free_list[mt]` heads (at modelled addresses), `nr_free`,
/// `managed_pages`, `present_pages`. The listed blocks are struct pages of the caller's memmap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HotplugZone {
    cfg: KernelConfig,
    /// `cfg`'s buddy rules, computed once (the free-list steps ask for them per page).
    rules: Rules,
    nid: u32,
    zone: u32,
    lists: FreeLists,
    managed_pages: u64,
    present_pages: u64,
}

impl HotplugZone {
    /// Zone `zone` of node `nid` with empty free lists.
    ///
    /// # Errors
    ///
    /// [`HotplugError::BadZone`] for `ZONE_DEVICE` and above, [`HotplugError::UnsupportedOrders`],
    /// [`HotplugError::Init`] for an invalid configuration or a node id that does not fit.
    pub fn new(cfg: &KernelConfig, nid: u32, zone: u32) -> Result<HotplugZone, HotplugError> {
        let layout = cfg.flags_layout().map_err(InitError::Config)?;
        if zone >= cfg.zone_device() {
            return Err(HotplugError::BadZone { zone, zone_device: cfg.zone_device() });
        }
        if u64::from(nid) > layout.nodes_mask() {
            return Err(InitError::NodeOutOfRange { nid, max: layout.nodes_mask() as u32 }.into());
        }
        if !Rules::orders_supported(cfg) {
            return Err(HotplugError::UnsupportedOrders {
                max_page_order: cfg.max_page_order,
                pageblock_order: cfg.pageblock_order,
            });
        }
        Ok(HotplugZone {
            cfg: *cfg,
            rules: Rules::of(cfg),
            nid,
            zone,
            lists: FreeLists::new(zone_struct_addr(cfg, nid, zone)),
            managed_pages: 0,
            present_pages: 0,
        })
    }

    /// Zone `target` of node `nid` with empty free lists (see [`HotplugZone::new`]).
    ///
    /// # Errors
    ///
    /// As [`HotplugZone::new`].
    pub fn for_target(
        cfg: &KernelConfig,
        nid: u32,
        target: HotplugTarget,
    ) -> Result<HotplugZone, HotplugError> {
        Self::new(cfg, nid, target.zone(cfg))
    }

    /// The node id.
    #[must_use]
    pub fn nid(&self) -> u32 {
        self.nid
    }

    /// The zone index.
    #[must_use]
    pub fn zone(&self) -> u32 {
        self.zone
    }

    /// The modelled address of `zone->free_area[order].free_list[mt]` (what the first and last
    /// block of a list point to).
    #[must_use]
    pub fn free_list_addr(&self, order: u32, mt: MigrateType) -> u64 {
        self.lists.head_addr(order, mt)
    }

    /// `free_area[order].nr_free` of migrate type `mt` (0 for orders beyond the model's).
    #[must_use]
    pub fn nr_free(&self, order: u32, mt: MigrateType) -> u64 {
        self.lists.nr_free(order, mt)
    }

    /// Pages handed to the buddy allocator by onlining (`managed_pages`).
    #[must_use]
    pub fn managed_pages(&self) -> u64 {
        self.managed_pages
    }

    /// Pages onlined (`present_pages`).
    #[must_use]
    pub fn present_pages(&self) -> u64 {
        self.present_pages
    }

    /// The first pfn of every block on the free list of `order` and `mt`, in list order, by
    /// walking the links through `memmap` (`f` is called per block). Stops at a link that
    /// leaves the memmap, and after as many blocks as the list counts ([`HotplugZone::nr_free`]).
    pub fn for_each_free_block<P: StructPage>(
        &self,
        memmap: &Memmap<'_, P>,
        order: u32,
        mt: MigrateType,
        f: impl FnMut(u64),
    ) {
        let page_of = |node: u64| {
            let pfn = memmap.vaddr_to_pfn(node.wrapping_sub(offsets::LRU_NEXT as u64))?;
            Some((pfn, memmap.read(pfn).u64_at(crate::offsets::LRU_NEXT)))
        };
        self.lists.walk(order, mt, page_of, f);
    }
}

/// Options of [`online_pages`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OnlineOptions {
    /// How the struct pages are written.
    pub fill: FillOptions,
}

impl OnlineOptions {
    /// `strategy` with the default threshold.
    #[must_use]
    pub const fn new(strategy: Strategy) -> Self {
        OnlineOptions { fill: FillOptions::new(strategy) }
    }
}

/// What [`online_pages`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct OnlineReport {
    /// First pfn.
    pub start_pfn: u64,
    /// Pages onlined.
    pub nr_pages: u64,
    /// The strategy requested.
    pub requested: Strategy,
    /// The strategy used.
    pub used: Strategy,
    /// Why `used` is what it is (requested, a tracepoint, KASAN, a sanitizer build, the threshold).
    pub reason: StrategyReason,
    /// `generic_online_page()` calls (chunks of `online_pages_range()`).
    pub chunks: u64,
    /// `stream_hal::drain()` calls.
    pub drains: u64,
}

/// `online_pages(pfn, nr_pages, zone)` of one memory block: initializes the struct pages of
/// `[start_pfn, start_pfn + nr_pages)` as hot-added memory of `zone`, frees them to `zone`'s
/// free lists with the pageblocks isolated, and undoes the isolation. A zero-length range is a
/// no-op.
///
/// The caller keeps the [`HotplugZone`] across the memory blocks it onlines; `memmap` must
/// also cover memory onlined into the zone before (the allocator looks at buddies there).
/// Every strategy leaves the same bytes, pageblocks, hook calls and free lists.
///
/// # Errors
///
/// [`HotplugError`] (nothing is written): a range outside the memmap, a start that is not
/// pageblock-aligned or an end that is not section-aligned, a zone of another configuration.
pub fn online_pages<P: StructPage, H: InitHooks>(
    memmap: &mut Memmap<'_, P>,
    zone: &mut HotplugZone,
    start_pfn: u64,
    nr_pages: u64,
    opts: &OnlineOptions,
    hooks: &mut H,
) -> Result<OnlineReport, HotplugError> {
    let cfg = *memmap.config();
    if cfg != zone.cfg {
        return Err(HotplugError::ZoneConfigMismatch);
    }
    let bytes = nr_pages.saturating_mul(P::SIZE as u64);
    let (used, reason) = opts.fill.resolve(memmap.config(), hooks, bytes);
    let mut report = OnlineReport {
        start_pfn,
        nr_pages,
        requested: opts.fill.strategy,
        used,
        reason,
        chunks: 0,
        drains: 0,
    };
    if nr_pages == 0 {
        return Ok(report);
    }
    if !memmap.contains_range(start_pfn, nr_pages) {
        return Err(InitError::OutOfRange {
            start_pfn,
            nr_pages,
            memmap_start: memmap.base_pfn(),
            memmap_end: memmap.end_pfn(),
        }
        .into());
    }
    let end = start_pfn + nr_pages;
    if start_pfn % cfg.pageblock_nr_pages() != 0 || end % cfg.pages_per_section() != 0 {
        return Err(HotplugError::Misaligned { start_pfn, nr_pages });
    }
    // 1. move_pfn_range_to_zone() → memmap_init_range(MEMINIT_HOTPLUG, MIGRATE_ISOLATE), and
    // for the template paths also the per-page part of __free_pages_core().
    let per_page_free = with_store!(used, S => {
        // The first struct page through the slow path and taken to what `__free_pages_core()`
        // leaves, then copied into the rest (drained before the free-list steps read anything).
        memmap.init_hotplug_page(start_pfn, (zone.zone, zone.nid), MigrateType::Isolate, hooks);
        let mut tmpl = memmap.read(start_pfn);
        tmpl.set_u32_at(offsets::PAGE_TYPE, u32::MAX);
        tmpl.set_u32_at(offsets::REFCOUNT, 0);
        memmap.write(start_pfn, tmpl);
        report.drains = memmap.copy_hotplug_run::<S, H>((start_pfn, end), MigrateType::Isolate, hooks);
        false
    }, slow => {
        for pfn in start_pfn..end {
            memmap.init_hotplug_page(pfn, (zone.zone, zone.nid), MigrateType::Isolate, hooks);
        }
        true
    });
    // 2. online_pages_range() and 3. undo_isolate_page_range().
    let mut b = Buddy { m: memmap, z: zone };
    let mut pfn = start_pfn;
    while pfn < end {
        let order = if pfn == 0 { cfg.max_page_order } else { cfg.max_page_order.min(pfn.trailing_zeros()) };
        let n = 1u64 << order;
        if per_page_free {
            // The per-page part of `__free_pages_core(page, order, MEMINIT_HOTPLUG)`:
            // `__ClearPageOffline()` (`page_type = UINT_MAX`) and `set_page_count(page, 0)`.
            for p in pfn..pfn + n {
                let mut page = b.m.read(p);
                page.set_u32_at(offsets::PAGE_TYPE, u32::MAX);
                b.m.write(p, page);
                b.m.set_page_count(p, 0, hooks);
            }
        }
        b.z.managed_pages = b.z.managed_pages.saturating_add(n);
        b.free_one_page(pfn, order, true);
        report.chunks += 1;
        pfn += n;
    }
    b.undo_isolate_page_range(start_pfn, end);
    zone.present_pages = zone.present_pages.saturating_add(nr_pages);
    Ok(report)
}

/// Takes the free block that starts at `pfn` off its free list, as an allocation of the whole
/// block does first (`__rmqueue_smallest()` → `del_page_from_free_list()`: `LIST_POISON1/2`
/// in its `lru`, no buddy type, `private` 0); returns its order.
///
/// # Errors
///
/// [`HotplugError::NotFree`] when no free block of `zone` starts at `pfn` (nothing changes),
/// [`HotplugError::ZoneConfigMismatch`].
pub fn take_free_block<P: StructPage>(
    memmap: &mut Memmap<'_, P>,
    zone: &mut HotplugZone,
    pfn: u64,
) -> Result<u32, HotplugError> {
    if *memmap.config() != zone.cfg {
        return Err(HotplugError::ZoneConfigMismatch);
    }
    let mut b = Buddy { m: memmap, z: zone };
    if !b.is_buddy(pfn) {
        return Err(HotplugError::NotFree { pfn });
    }
    let (l, f) = (b.m.layout(), b.m.read(pfn).flags());
    let (order, mt) = (b.order_of(pfn), b.migratetype(pfn));
    // A struct page that looks free but is of another zone or on none of this zone's lists
    // (written by the caller, or onlined through another memmap) is not taken.
    if l.zone(f) != b.z.zone || l.node(f) != b.z.nid || !b.linked(pfn, order, mt) {
        return Err(HotplugError::NotFree { pfn });
    }
    b.del(pfn, order, mt);
    Ok(order)
}

/// The free-list steps of onlining ([`ZoneFreeLists`]) on the struct pages of a [`Memmap`]
/// and the list heads of a [`HotplugZone`], before and from 6.10.
struct Buddy<'m, 'a, P: StructPage> {
    m: &'m mut Memmap<'a, P>,
    z: &'m mut HotplugZone,
}

impl<P: StructPage> ZoneFreeLists for Buddy<'_, '_, P> {
    const LIST_HARDENED: bool = true;
    const MERGE_LIKELY: bool = true;

    fn lists(&self) -> &FreeLists {
        &self.z.lists
    }
    fn lists_mut(&mut self) -> &mut FreeLists {
        &mut self.z.lists
    }
    #[inline(always)]
    fn rules(&self) -> Rules {
        self.z.rules
    }
    fn word(&self, pfn: u64, off: usize) -> u64 {
        PageAccess::word(&*self.m, pfn, off)
    }
    fn set_word(&mut self, pfn: u64, off: usize, v: u64) {
        self.m.page_mut(pfn).set_u64_at(off, v);
    }
    fn set_u32(&mut self, pfn: u64, off: usize, v: u32) {
        self.m.page_mut(pfn).set_u32_at(off, v);
    }
    fn list_node(&self, pfn: u64) -> u64 {
        self.m.vaddr(pfn).wrapping_add(offsets::LRU_NEXT as u64)
    }
    fn pfn_of_node(&self, entry: u64) -> Option<u64> {
        self.m.vaddr_to_pfn(entry.wrapping_sub(offsets::LRU_NEXT as u64))
    }
    /// A pfn outside the memmap is no free block, and neither is a struct page whose order (in
    /// `private`) no free block can have: the caller's memmap may hold anything outside the
    /// ranges onlined into this zone.
    fn is_buddy(&self, pfn: u64) -> bool {
        self.m.contains(pfn)
            && self.m.read(pfn).page_type() == self.rules().buddy_type
            && self.word(pfn, offsets::PRIVATE) <= u64::from(self.z.cfg.max_page_order)
    }
    fn same_zone(&self, pfn: u64, buddy: u64) -> bool {
        let l = self.m.layout();
        let (a, b) = (self.m.read(pfn).flags(), self.m.read(buddy).flags());
        l.zone(a) == l.zone(b) && l.node(a) == l.node(b)
    }
    /// A pageblock never set reads as MOVABLE: only pageblocks of onlined memory hold free
    /// blocks.
    fn migratetype(&self, pfn: u64) -> MigrateType {
        self.m.pageblock_migratetype(pfn).unwrap_or(MigrateType::Movable)
    }
    fn set_migratetype(&mut self, pfn: u64, mt: MigrateType) {
        self.m.set_pageblock_migratetype(pfn, mt);
    }
}
