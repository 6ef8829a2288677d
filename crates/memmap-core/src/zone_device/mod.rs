//! ZONE_DEVICE memmap initialization: `memmap_init_zone_device()` with the slow, template and
//! streaming strategies.
//!
//! Slow is the kernel's code (`__init_zone_device_page()`, `memmap_init_compound()`); Template
//! copies a head template and each compound page's first tail, refreshing the PFN-dependent
//! fields; Streaming does the same with streaming stores, never reading a streamed page back
//! before a drain. All emit the same bytes, events and `cond_resched` calls.

mod altmap;
mod mappable;
#[cfg(feature = "std")]
mod parallel;
mod plan;
mod slow;
mod template;
mod unmappable;

pub use altmap::move_pfn_range_to_zone;
pub use mappable::{check_memremap_pages, hotplug_align_pages};
#[cfg(feature = "std")]
pub use parallel::{ParallelInit, memmap_init_zone_device_parallel};
pub(crate) use unmappable::KernelMessage;
pub use unmappable::Unmappable;

use crate::Behaviour;
use crate::InitError;
use crate::fill::{FillOptions, Strategy, StrategyReason};
use crate::hooks::InitHooks;
use crate::memmap::Memmap;
use crate::memmap::engine::with_store;
use crate::model::flags::VMEMMAP_RESERVE_NR;
use crate::model::page::StructPage;

/// `enum memory_type` (`include/linux/memremap.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
#[non_exhaustive]
pub enum MemoryType {
    /// `MEMORY_DEVICE_PRIVATE` (1).
    Private = 1,
    /// `MEMORY_DEVICE_COHERENT` (2).
    Coherent = 2,
    /// `MEMORY_DEVICE_FS_DAX` (3).
    FsDax = 3,
    /// `MEMORY_DEVICE_GENERIC` (4): device-dax.
    Generic = 4,
    /// `MEMORY_DEVICE_PCI_P2PDMA` (5).
    PciP2pdma = 5,
}

// The names as the CLI spells them.
crate::named!(MemoryType {
    Private => "private",
    Coherent => "coherent",
    FsDax => "fsdax",
    Generic => "generic",
    PciP2pdma => "p2pdma",
});

impl MemoryType {
    /// The refcount a head or single page has after `__init_zone_device_page()` in a kernel
    /// with `behaviour`: 0, but 1 for GENERIC and (before 6.15) FS_DAX.
    #[must_use]
    pub const fn head_refcount(self, behaviour: &Behaviour) -> i32 {
        match self {
            MemoryType::Generic => 1,
            MemoryType::FsDax => !behaviour.fsdax_refcount_zero as i32,
            MemoryType::Private | MemoryType::Coherent | MemoryType::PciP2pdma => 0,
        }
    }
}

/// `struct vmem_altmap`: device memory that holds its own memmap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VmemAltmap {
    /// `base_pfn`: first PFN of the device range.
    pub base_pfn: u64,
    /// `reserve`: PFNs reserved for the driver at the start.
    pub reserve: u64,
    /// `free`: PFNs available for the memmap after the reserve.
    pub free: u64,
}

impl VmemAltmap {
    /// `vmem_altmap_offset(altmap)` = `reserve + free` (saturating).
    #[must_use]
    pub const fn offset(&self) -> u64 {
        self.reserve.saturating_add(self.free)
    }
}

/// Largest `vmemmap_shift` accepted: a 1 GiB compound page with 4 KiB base pages
/// (`PUD_ORDER`), the largest device-dax alignment.
pub const MAX_VMEMMAP_SHIFT: u32 = 18;

/// `struct dev_pagemap`, the fields memmap init reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DevPagemap {
    /// `type`.
    pub memory_type: MemoryType,
    /// `vmemmap_shift`: compound pages of `1 << vmemmap_shift` base pages (0: none).
    pub vmemmap_shift: u32,
    /// `altmap`, present when `PGMAP_ALTMAP_VALID` is set.
    pub altmap: Option<VmemAltmap>,
    /// The modelled kernel address of the `struct dev_pagemap` (what `folio->pgmap` holds).
    pub addr: u64,
}

impl DevPagemap {
    /// A default modelled address for the `struct dev_pagemap` (an x86-64 direct-map address).
    pub(crate) const DEFAULT_ADDR: u64 = 0xffff_8881_0420_0000;

    /// A pagemap of `memory_type` without compound pages or altmap.
    #[must_use]
    pub const fn new(memory_type: MemoryType) -> Self {
        DevPagemap { memory_type, vmemmap_shift: 0, altmap: None, addr: Self::DEFAULT_ADDR }
    }

    /// With compound pages of `1 << shift` base pages.
    #[must_use]
    pub const fn with_vmemmap_shift(mut self, shift: u32) -> Self {
        self.vmemmap_shift = shift;
        self
    }

    /// With an altmap.
    #[must_use]
    pub const fn with_altmap(mut self, altmap: VmemAltmap) -> Self {
        self.altmap = Some(altmap);
        self
    }

    /// `pgmap_vmemmap_nr(pgmap)` = `1 << vmemmap_shift`, saturating at `u64::MAX` for shifts of
    /// 64 and more (which [`memmap_init_zone_device`] refuses: [`MAX_VMEMMAP_SHIFT`]).
    #[must_use]
    pub const fn vmemmap_nr(&self) -> u64 {
        if self.vmemmap_shift >= 64 { u64::MAX } else { 1 << self.vmemmap_shift }
    }
}

/// `vmemmap_can_optimize(altmap, pgmap)` for a struct page of `page_size` bytes:
/// `CONFIG_ARCH_WANT_OPTIMIZE_DAX_VMEMMAP && is_power_of_2(sizeof(struct page)) && !altmap &&
/// (pgmap_vmemmap_nr(pgmap) * sizeof(struct page)) >> PAGE_SHIFT > VMEMMAP_RESERVE_NR`, with
/// `CONFIG_SPARSEMEM_VMEMMAP` (and no arch option before
/// [`Behaviour::dax_vmemmap_needs_arch_option`](crate::Behaviour::dax_vmemmap_needs_arch_option)).
#[must_use]
pub fn vmemmap_can_optimize(cfg: &crate::KernelConfig, page_size: usize, pgmap: &DevPagemap) -> bool {
    (cfg.optimize_dax_vmemmap || !cfg.behaviour().dax_vmemmap_needs_arch_option)
        && cfg.sparsemem_vmemmap
        && page_size.is_power_of_two()
        && pgmap.altmap.is_none()
        && (pgmap.vmemmap_nr().saturating_mul(page_size as u64)) >> cfg.page_shift > VMEMMAP_RESERVE_NR
}

/// `compound_nr_pages(altmap, pgmap)`: the struct pages written per compound page: all of them,
/// or `VMEMMAP_RESERVE_NR * (PAGE_SIZE / sizeof(struct page))` (128 for 64-byte pages) when
/// the DAX vmemmap optimization applies, because the later vmemmap pages all map the second one.
#[must_use]
pub fn compound_nr_pages(cfg: &crate::KernelConfig, page_size: usize, pgmap: &DevPagemap) -> u64 {
    if vmemmap_can_optimize(cfg, page_size, pgmap) {
        VMEMMAP_RESERVE_NR * (cfg.page_size() / page_size as u64)
    } else {
        pgmap.vmemmap_nr()
    }
}

/// What to initialize: the arguments of `memmap_init_zone_device(zone, start_pfn, nr_pages,
/// pgmap)` other than the pagemap, and where boot memory ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZoneDeviceRange {
    /// `zone_idx(zone)`: must be `ZONE_DEVICE`.
    pub zone: u32,
    /// `pgdat->node_id`.
    pub nid: u32,
    /// `start_pfn`.
    pub start_pfn: u64,
    /// `nr_pages`.
    pub nr_pages: u64,
    /// The end of boot memory: sections holding a PFN below it are *early* (`SECTION_IS_EARLY`),
    /// their boot memmap never deduplicated, so from 7.2 `compound_nr_pages()` initializes every
    /// struct page of a compound page there. 0 (the usual case) when no section is early.
    pub boot_memory_end_pfn: u64,
    /// The first PFN of boot memory above the range: sections holding a PFN at or above it are
    /// early (a namespace carved out of RAM below more RAM). `u64::MAX` (the usual case) when none.
    pub boot_memory_above_pfn: u64,
}

impl ZoneDeviceRange {
    /// `nr_pages` pages from `start_pfn` on node `nid` in `zone`, in sections of their own.
    #[must_use]
    pub const fn new(zone: u32, nid: u32, start_pfn: u64, nr_pages: u64) -> Self {
        ZoneDeviceRange {
            zone,
            nid,
            start_pfn,
            nr_pages,
            boot_memory_end_pfn: 0,
            boot_memory_above_pfn: u64::MAX,
        }
    }

    /// With boot memory from `pfn` up (see [`ZoneDeviceRange::boot_memory_above_pfn`]).
    #[must_use]
    pub const fn with_boot_memory_above(mut self, pfn: u64) -> Self {
        self.boot_memory_above_pfn = pfn;
        self
    }

    /// Whether the compound page whose head is `head` lies in an early section: below
    /// [`ZoneDeviceRange::boot_memory_end_pfn`]'s sections or in those from
    /// [`ZoneDeviceRange::boot_memory_above_pfn`]'s up.
    #[must_use]
    pub const fn is_early(&self, cfg: &crate::KernelConfig, head: u64) -> bool {
        let pps = cfg.pages_per_section();
        head < self.boot_memory_end_pfn.div_ceil(pps).saturating_mul(pps)
            || head >= self.boot_memory_above_pfn / pps * pps
    }

    /// With boot memory up to `pfn` (see [`ZoneDeviceRange::boot_memory_end_pfn`]).
    #[must_use]
    pub const fn with_boot_memory_end(mut self, pfn: u64) -> Self {
        self.boot_memory_end_pfn = pfn;
        self
    }
}

/// The struct page whose contents the kernel's vmemmap shows at `pfn`'s place after
/// `memmap_init_zone_device(range, pgmap)`: `Some(source)` when the DAX vmemmap optimization
/// maps it onto another one (`vmemmap_populate_compound_pages()`), `None` when it has memory of
/// its own. The model writes only the latter; a reader wanting the kernel's view copies sources.
#[must_use]
pub fn vmemmap_alias<P: StructPage>(
    cfg: &crate::KernelConfig,
    range: &ZoneDeviceRange,
    pgmap: &DevPagemap,
    pfn: u64,
) -> Option<u64> {
    let ppc = pgmap.vmemmap_nr();
    let end = range.start_pfn.checked_add(range.nr_pages)?;
    if !vmemmap_can_optimize(cfg, P::SIZE, pgmap) || pfn < range.start_pfn || pfn >= end || ppc <= 1 {
        return None;
    }
    let per_page = cfg.page_size() / P::SIZE as u64;
    let head = range.start_pfn + (pfn - range.start_pfn) / ppc * ppc;
    let idx = pfn - head;
    // In an early section every struct page is the boot memmap's own: written in full from
    // 7.2 on, left as it was before.
    if idx < VMEMMAP_RESERVE_NR * per_page || range.is_early(cfg, head) {
        return None;
    }
    Some(head + per_page * (VMEMMAP_RESERVE_NR - 1) + idx % per_page)
}

/// Where [`Strategy::Streaming`] drains (see `run_template` in the source for the details).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum DrainPolicy {
    /// The pages that are read back or partly rewritten later (compound head, page\[1\],
    /// page\[2\], pageblock-aligned pages) are written with normal stores, so no streamed byte
    /// is touched before the one drain at return.
    #[default]
    Minimal,
    /// As the Linux series: stream the head and page\[2\] too, and drain before
    /// `memmap_init_compound`, before `prep_compound_head` and before returning (two drains per
    /// compound page).
    Upstream,
}

/// How to initialize a ZONE_DEVICE range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InitOptions {
    /// The strategy request (and the [`Strategy::Auto`] threshold).
    pub fill: FillOptions,
    /// Where the streaming path drains.
    pub drains: DrainPolicy,
}

impl InitOptions {
    /// Options for `strategy` with the default threshold and drain policy.
    #[must_use]
    pub const fn new(strategy: Strategy) -> Self {
        InitOptions { fill: FillOptions::new(strategy), drains: DrainPolicy::Minimal }
    }

    /// With the [`Strategy::Auto`] threshold set ([`FillOptions::threshold_bytes`]).
    #[must_use]
    pub const fn with_threshold(mut self, bytes: usize) -> Self {
        self.fill = self.fill.with_threshold(bytes);
        self
    }

    /// With the given drain policy.
    #[must_use]
    pub const fn with_drains(mut self, drains: DrainPolicy) -> Self {
        self.drains = drains;
        self
    }
}

impl Default for InitOptions {
    fn default() -> Self {
        Self::new(Strategy::Auto)
    }
}

/// What an init call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct InitReport {
    /// First PFN initialized (after skipping the altmap part).
    pub start_pfn: u64,
    /// `nr_pages` as the kernel's `pr_debug` reports it: after the altmap adjustment.
    pub nr_pages: u64,
    /// Struct pages actually written (fewer than `nr_pages` with the DAX vmemmap optimization).
    pub pages_initialized: u64,
    /// The strategy requested.
    pub requested: Strategy,
    /// The strategy used (never [`Strategy::Auto`]).
    pub used: Strategy,
    /// Why `used` was chosen.
    pub reason: StrategyReason,
    /// The stream-hal backend in effect.
    pub backend: stream_hal::Backend,
    /// Number of `drain()` calls made.
    pub drains: u64,
}

impl InitReport {
    /// The report of a call with `opts` over `[start_pfn, end_pfn)` that wrote `written` struct
    /// pages with the strategy `used` (for `reason`) and `drains` drains.
    pub(crate) fn new(
        opts: &InitOptions,
        (start_pfn, end_pfn): (u64, u64),
        written: u64,
        (used, reason): (Strategy, StrategyReason),
        drains: u64,
    ) -> Self {
        InitReport {
            start_pfn,
            nr_pages: end_pfn - start_pfn,
            pages_initialized: written,
            requested: opts.fill.strategy,
            used,
            reason,
            backend: stream_hal::backend(),
            drains,
        }
    }
}

/// `memmap_init_zone_device(zone, start_pfn, nr_pages, pgmap)`.
///
/// Validates everything before writing anything: on error nothing is written. Zero pages is a
/// no-op that returns a report with `nr_pages == 0`.
///
/// # Errors
///
/// [`InitError::NotZoneDevice`], [`InitError::NodeOutOfRange`],
/// [`InitError::VmemmapShiftTooLarge`], [`InitError::RangeOverflow`],
/// [`InitError::OutOfRange`] (range not in the memmap), [`InitError::AltmapOutsideRange`],
/// [`InitError::Misaligned`] (start or length not a multiple of the compound size).
pub fn memmap_init_zone_device<P: StructPage, H: InitHooks>(
    memmap: &mut Memmap<'_, P>,
    range: &ZoneDeviceRange,
    pgmap: &DevPagemap,
    opts: &InitOptions,
    hooks: &mut H,
) -> Result<InitReport, InitError> {
    // Nothing to write: a zero-length range, or an altmap that covers the whole range (the
    // kernel's loop then runs from `start_pfn + vmem_altmap_offset()` to `end_pfn`, zero times).
    let empty = match plan::plan(memmap, range, pgmap)? {
        Some(plan) if plan.start < plan.end => Ok(plan),
        Some(plan) => Err(plan.start),
        None => Err(range.start_pfn),
    };
    let plan = match empty {
        Ok(plan) => plan,
        Err(start_pfn) => {
            let resolved = opts.fill.resolve(memmap.config(), hooks, 0);
            return Ok(InitReport::new(opts, (start_pfn, start_pfn), 0, resolved, 0));
        }
    };
    let written = plan.pages_written();
    let (used, reason) = opts.fill.resolve(memmap.config(), hooks, written.saturating_mul(P::SIZE as u64));
    let drains = run_plan(memmap, &plan, pgmap, opts.drains, used, hooks);
    Ok(InitReport::new(opts, (plan.start, plan.end), written, (used, reason), drains))
}

/// Runs a validated plan with the resolved strategy `used`; returns the drains.
fn run_plan<P: StructPage, H: InitHooks>(
    memmap: &mut Memmap<'_, P>,
    plan: &plan::Plan,
    pgmap: &DevPagemap,
    drains: DrainPolicy,
    used: Strategy,
    hooks: &mut H,
) -> u64 {
    with_store!(used, S => template::run_template::<P, H, S>(memmap, plan, pgmap, drains, hooks), slow => {
        slow::run_slow(memmap, plan, pgmap, hooks);
        0
    })
}
