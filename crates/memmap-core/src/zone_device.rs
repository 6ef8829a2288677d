//! ZONE_DEVICE memmap initialization: `memmap_init_zone_device()` with the slow, template and
//! streaming strategies.
//!
//! * [`Strategy::Slow`] is the kernel's code (`__init_zone_device_page()` per PFN,
//!   `memmap_init_compound()` per compound page).
//! * [`Strategy::Template`] is the Li Zhe series: the first head page is initialized through the
//!   slow path and copied as the head template; each compound page's first tail (page\[1\]) is
//!   initialized through the slow path and copied as that compound's tail template; every other
//!   page is a copy of its template with only the PFN-dependent fields refreshed (section bits
//!   when they live in `page->flags`, `virtual` under `WANT_PAGE_VIRTUAL`).
//! * [`Strategy::Streaming`] is the template path with `stream_hal` streaming stores, following
//!   the upstream ordering rules: nothing reads a streamed page back or rewrites it with normal
//!   stores before a drain. Pageblock-aligned pages are written with normal stores because
//!   `set_pageblock_migratetype()` may read them back (as upstream does). Upstream then drains
//!   before `memmap_init_compound()` reads the head, before `prep_compound_head()` and before
//!   returning ([`DrainPolicy::Upstream`]); by default ([`DrainPolicy::Minimal`]) the head and
//!   page\[2\] are written with normal stores too, so those two reads touch no streamed memory
//!   and the one drain before returning is the only one needed. A drain per compound page waits
//!   for the write-combining buffers every 128 struct pages and halves the devdax throughput.
//! * [`Strategy::Auto`] applies the kernel's rules: the slow path when the `page_ref_set`
//!   tracepoint is active, when KASAN or KMSAN is configured, or when `stream-hal` reports a
//!   sanitizer build; otherwise streaming when the struct pages to write reach
//!   [`InitOptions::streaming_threshold_bytes`], the cached template below it.
//!
//! Template and Streaming also fall back to Slow when the tracepoint is active or KASAN/KMSAN is
//! configured, as `zone_device_page_init_optimization_enabled()` does, so every strategy emits
//! the same tracepoint events and `cond_resched` calls and produces the same bytes.

use core::fmt;

use crate::flags::{PG, VMEMMAP_RESERVE_NR};
use crate::hooks::InitHooks;
use crate::init::wr64;
use crate::memmap::Memmap;
use crate::page::{StructPage, offsets};
use crate::{InitError, Strategy, StrategyReason};

/// `enum memory_type` (`include/linux/memremap.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
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

impl MemoryType {
    /// All memory types.
    pub const ALL: [MemoryType; 5] = [
        MemoryType::Private,
        MemoryType::Coherent,
        MemoryType::FsDax,
        MemoryType::Generic,
        MemoryType::PciP2pdma,
    ];

    /// The refcount a head or single page has after `__init_zone_device_page()`: 1 for
    /// GENERIC, 0 for the others (baseline: FS_DAX refcount 0).
    #[must_use]
    pub const fn head_refcount(self) -> i32 {
        match self {
            MemoryType::Generic => 1,
            MemoryType::Private | MemoryType::Coherent | MemoryType::FsDax | MemoryType::PciP2pdma => 0,
        }
    }

    /// Name as the CLI spells it (`private`, `coherent`, `fsdax`, `generic`, `p2pdma`).
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            MemoryType::Private => "private",
            MemoryType::Coherent => "coherent",
            MemoryType::FsDax => "fsdax",
            MemoryType::Generic => "generic",
            MemoryType::PciP2pdma => "p2pdma",
        }
    }

    /// Parses [`MemoryType::name`].
    #[must_use]
    pub fn from_name(s: &str) -> Option<MemoryType> {
        Self::ALL.into_iter().find(|t| t.name() == s)
    }
}

impl fmt::Display for MemoryType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
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
    pub const DEFAULT_ADDR: u64 = 0xffff_8881_0420_0000;

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
/// (pgmap_vmemmap_nr(pgmap) * sizeof(struct page)) >> PAGE_SHIFT > VMEMMAP_RESERVE_NR`.
#[must_use]
pub fn vmemmap_can_optimize(cfg: &crate::KernelConfig, page_size: usize, pgmap: &DevPagemap) -> bool {
    cfg.optimize_dax_vmemmap
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
/// pgmap)` other than the pagemap.
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
}

/// Where [`Strategy::Streaming`] drains (see `run_template` in the source for the details).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
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

/// How to initialize.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InitOptions {
    /// The requested strategy.
    pub strategy: Strategy,
    /// Where the streaming path drains.
    pub drains: DrainPolicy,
    /// [`Strategy::Auto`] streams when at least this many bytes of struct pages are written;
    /// below it the cached template wins (a destination small enough to stay in cache is
    /// faster with normal stores; see `nt-store-measurements.md`).
    pub streaming_threshold_bytes: u64,
}

impl InitOptions {
    /// Default [`InitOptions::streaming_threshold_bytes`]: 1 MiB of struct pages (64 MiB of
    /// device memory with 64-byte pages). Measured on the project machine, streaming wins for
    /// cold write-once destinations from 1 MiB up.
    pub const DEFAULT_STREAMING_THRESHOLD: u64 = 1 << 20;

    /// Options for `strategy` with the default threshold.
    #[must_use]
    pub const fn new(strategy: Strategy) -> Self {
        InitOptions {
            strategy,
            drains: DrainPolicy::Minimal,
            streaming_threshold_bytes: Self::DEFAULT_STREAMING_THRESHOLD,
        }
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

/// What an init call did: the `pr_debug` line of `memmap_init_zone_device()` and more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    /// Wall time of the call (`std` only).
    pub elapsed: Option<core::time::Duration>,
}

impl InitReport {
    /// The kernel's `pr_debug("%s initialised %lu pages in %ums\n", ...)` line.
    #[must_use]
    pub fn pr_debug(&self) -> PrDebug<'_> {
        PrDebug(self)
    }
}

/// Display adapter for [`InitReport::pr_debug`].
#[derive(Debug)]
pub struct PrDebug<'a>(&'a InitReport);

impl fmt::Display for PrDebug<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.elapsed.map_or(0, |d| d.as_millis());
        write!(f, "memmap_init_zone_device initialised {} pages in {}ms", self.0.nr_pages, ms)
    }
}

/// The validated work of one `memmap_init_zone_device` call.
#[derive(Debug, Clone, Copy)]
struct Plan {
    zone: u32,
    nid: u32,
    start: u64,
    end: u64,
    pfns_per_compound: u64,
    compound_pages: u64,
    order: u32,
}

impl Plan {
    fn pages_written(&self) -> u64 {
        let span = self.end - self.start;
        if self.pfns_per_compound == 1 { span } else { span / self.pfns_per_compound * self.compound_pages }
    }
}

fn plan<P: StructPage>(
    memmap: &Memmap<'_, P>,
    range: &ZoneDeviceRange,
    pgmap: &DevPagemap,
) -> Result<Option<Plan>, InitError> {
    let cfg = memmap.config();
    if range.zone != cfg.zone_device() {
        return Err(InitError::NotZoneDevice { zone: range.zone, zone_device: cfg.zone_device() });
    }
    if u64::from(range.nid) > memmap.layout().nodes_mask() {
        return Err(InitError::NodeOutOfRange { nid: range.nid, max: memmap.layout().nodes_mask() as u32 });
    }
    if pgmap.vmemmap_shift > MAX_VMEMMAP_SHIFT {
        return Err(InitError::VmemmapShiftTooLarge { shift: pgmap.vmemmap_shift, max: MAX_VMEMMAP_SHIFT });
    }
    let Some(end) = range.start_pfn.checked_add(range.nr_pages) else {
        return Err(InitError::RangeOverflow);
    };
    if range.nr_pages == 0 {
        return Ok(None);
    }
    if !memmap.contains_range(range.start_pfn, range.nr_pages) {
        return Err(InitError::OutOfRange {
            start_pfn: range.start_pfn,
            nr_pages: range.nr_pages,
            memmap_start: memmap.base_pfn(),
            memmap_end: memmap.end_pfn(),
        });
    }
    let mut start = range.start_pfn;
    if let Some(a) = pgmap.altmap {
        let altmap_end = a.reserve.checked_add(a.free).and_then(|o| a.base_pfn.checked_add(o));
        if a.base_pfn < range.start_pfn || altmap_end.is_none_or(|e| e > end) {
            return Err(InitError::AltmapOutsideRange {
                base_pfn: a.base_pfn,
                reserve: a.reserve,
                free: a.free,
                start_pfn: range.start_pfn,
                end_pfn: end,
            });
        }
        // The memmap_init_range() call before this one initialized the altmap part.
        start = altmap_end.expect("checked above");
    }
    let ppc = pgmap.vmemmap_nr();
    if start % ppc != 0 || (end - start) % ppc != 0 {
        return Err(InitError::Misaligned {
            start_pfn: start,
            nr_pages: end - start,
            pfns_per_compound: ppc,
        });
    }
    Ok(Some(Plan {
        zone: range.zone,
        nid: range.nid,
        start,
        end,
        pfns_per_compound: ppc,
        compound_pages: compound_nr_pages(cfg, P::SIZE, pgmap),
        order: pgmap.vmemmap_shift,
    }))
}

/// Decides the strategy actually used (see the module documentation).
fn resolve<P: StructPage, H: InitHooks>(
    memmap: &Memmap<'_, P>,
    opts: &InitOptions,
    hooks: &H,
    bytes: u64,
) -> (Strategy, StrategyReason) {
    crate::shared::resolve_strategy(memmap, opts.strategy, opts.streaming_threshold_bytes, hooks, bytes)
}

#[cfg(feature = "std")]
type Clock = std::time::Instant;

#[cfg(feature = "std")]
fn clock_start() -> Option<Clock> {
    Some(Clock::now())
}

#[cfg(not(feature = "std"))]
fn clock_start() -> Option<()> {
    None
}

#[cfg(feature = "std")]
fn clock_elapsed(start: Option<Clock>) -> Option<core::time::Duration> {
    start.map(|s| s.elapsed())
}

#[cfg(not(feature = "std"))]
fn clock_elapsed(_start: Option<()>) -> Option<core::time::Duration> {
    None
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
    let clock = clock_start();
    // Nothing to write: a zero-length range, or an altmap that covers the whole range (the
    // kernel's loop then runs from `start_pfn + vmem_altmap_offset()` to `end_pfn`, zero times).
    let empty = match plan(memmap, range, pgmap)? {
        Some(plan) if plan.start < plan.end => Ok(plan),
        Some(plan) => Err(plan.start),
        None => Err(range.start_pfn),
    };
    let plan = match empty {
        Ok(plan) => plan,
        Err(start_pfn) => {
            let (used, reason) = resolve(memmap, opts, hooks, 0);
            return Ok(InitReport {
                start_pfn,
                nr_pages: 0,
                pages_initialized: 0,
                requested: opts.strategy,
                used,
                reason,
                backend: stream_hal::backend(),
                drains: 0,
                elapsed: clock_elapsed(clock),
            });
        }
    };
    let written = plan.pages_written();
    let (used, reason) = resolve(memmap, opts, hooks, written * P::SIZE as u64);
    let drains = match used {
        Strategy::Template => run_template::<P, H, Cached>(memmap, &plan, pgmap, opts.drains, hooks),
        Strategy::Streaming => run_template::<P, H, Streamed>(memmap, &plan, pgmap, opts.drains, hooks),
        _ => {
            run_slow(memmap, &plan, pgmap, hooks);
            0
        }
    };
    Ok(InitReport {
        start_pfn: plan.start,
        nr_pages: plan.end - plan.start,
        pages_initialized: written,
        requested: opts.strategy,
        used,
        reason,
        backend: stream_hal::backend(),
        drains,
        elapsed: clock_elapsed(clock),
    })
}

impl<P: StructPage> Memmap<'_, P> {
    /// `__init_zone_device_page(page, pfn, zone_idx, nid, pgmap)`.
    ///
    /// # Panics
    ///
    /// If `pfn` is outside the memmap.
    pub fn init_zone_device_page<H: InitHooks>(
        &mut self,
        pfn: u64,
        zone: u32,
        nid: u32,
        pgmap: &DevPagemap,
        hooks: &mut H,
    ) {
        self.init_single_page(pfn, zone, nid, hooks);
        // "Mark page reserved as it will need to wait for onlining phase for it to be fully
        // initialized."
        self.set_flag(pfn, PG::RESERVED);
        // page_folio(page)->pgmap = pgmap: the folio of a fresh page is the page itself.
        let folio = self.page_folio(pfn);
        // SAFETY: `page_folio` returns a PFN of this memmap, and `pfn` was checked by
        // `init_single_page`; both fields are inside their pages.
        unsafe {
            wr64(self.page_ptr(folio), offsets::PGMAP, pgmap.addr);
            // page->zone_device_data = NULL
            wr64(self.page_ptr(pfn), offsets::ZONE_DEVICE_DATA, 0);
        }
        if self.pageblock_aligned(pfn) {
            self.pageblock_init(pfn, hooks);
        }
        if pgmap.memory_type.head_refcount() == 0 {
            self.set_page_count(pfn, 0, hooks);
        }
    }

    /// `memmap_init_compound(head, head_pfn, zone_idx, nid, pgmap, nr_pages)`, v6.18+ order:
    /// `__SetPageHead(head)`, then per tail `__init_zone_device_page` +
    /// `prep_compound_tail` + `set_page_count(page, 0)`, then `prep_compound_head` after the
    /// loop.
    ///
    /// # Panics
    ///
    /// If the compound page is outside the memmap.
    pub fn memmap_init_compound<H: InitHooks>(
        &mut self,
        head_pfn: u64,
        zone: u32,
        nid: u32,
        pgmap: &DevPagemap,
        nr_pages: u64,
        hooks: &mut H,
    ) {
        self.set_flag(head_pfn, PG::HEAD);
        for pfn in head_pfn + 1..head_pfn + nr_pages {
            self.init_zone_device_page(pfn, zone, nid, pgmap, hooks);
            self.prep_compound_tail(head_pfn, pfn - head_pfn);
            self.set_page_count(pfn, 0, hooks);
        }
        self.prep_compound_head(head_pfn, pgmap.vmemmap_shift);
    }
}

/// The kernel's loop.
fn run_slow<P: StructPage, H: InitHooks>(
    m: &mut Memmap<'_, P>,
    plan: &Plan,
    pgmap: &DevPagemap,
    hooks: &mut H,
) {
    let mut pfn = plan.start;
    while pfn < plan.end {
        m.init_zone_device_page(pfn, plan.zone, plan.nid, pgmap, hooks);
        if plan.pfns_per_compound != 1 {
            m.memmap_init_compound(pfn, plan.zone, plan.nid, pgmap, plan.compound_pages, hooks);
        }
        pfn += plan.pfns_per_compound;
    }
}

/// How template copies are stored.
trait Store {
    const STREAMING: bool;
    /// Stores a record that is constant across the loop (kept in registers by the optimizer).
    ///
    /// # Safety
    ///
    /// `dst` valid for writes of one `P`.
    unsafe fn store<P: StructPage>(dst: *mut P, src: &P);
    /// Stores a record patched per page, given by value (built in registers).
    ///
    /// # Safety
    ///
    /// `dst` valid for writes of one `P`.
    unsafe fn store_patched<P: StructPage>(dst: *mut P, rec: P);
}

/// Normal (cached) stores.
struct Cached;
impl Store for Cached {
    const STREAMING: bool = false;
    #[inline(always)]
    unsafe fn store<P: StructPage>(dst: *mut P, src: &P) {
        // SAFETY: the caller guarantees `dst` is writable.
        unsafe { dst.write(*src) }
    }
    #[inline(always)]
    unsafe fn store_patched<P: StructPage>(dst: *mut P, rec: P) {
        // SAFETY: the caller guarantees `dst` is writable.
        unsafe { dst.write(rec) }
    }
}

/// stream-hal streaming stores.
struct Streamed;
impl Store for Streamed {
    const STREAMING: bool = true;
    #[inline(always)]
    unsafe fn store<P: StructPage>(dst: *mut P, src: &P) {
        // SAFETY: the caller guarantees `dst` is writable; callers drain before any read.
        unsafe { stream_hal::store_record(dst, src) }
    }
    #[inline(always)]
    unsafe fn store_patched<P: StructPage>(dst: *mut P, rec: P) {
        // SAFETY: as for `store`; memmap struct pages are 8-aligned.
        unsafe { rec.store_streaming(dst) }
    }
}

/// Refreshes the PFN-dependent fields of a template for `pfn`: the section bits when they live
/// in flags (`set_page_section_from_pfn`) and `virtual` (`set_page_address`).
#[inline(always)]
fn refresh<P: StructPage>(m: &Memmap<'_, P>, t: &mut P, pfn: u64) {
    m.refresh_template(t, pfn);
}

/// Copies `tmpl` (refreshed per PFN) into every page of `[from, to)`: pageblock-aligned pages
/// with normal stores followed by `set_pageblock_migratetype` and `cond_resched`, the others with
/// `S`. The loop runs one pageblock at a time so the inner loop is a bare sequence of record
/// stores; section bits (which change every 32768 PFNs, a multiple of the pageblock size) are
/// refreshed once per pageblock, `virtual` per PFN in registers.
fn template_run<P: StructPage, H: InitHooks, S: Store>(
    m: &mut Memmap<'_, P>,
    from: u64,
    to: u64,
    tmpl: &mut P,
    hooks: &mut H,
) {
    let section_dep = m.layout().section_in_page_flags();
    let pb = m.config().pageblock_nr_pages();
    let mut pfn = from;
    while pfn < to {
        let seg_end = (pfn | (pb - 1)).saturating_add(1).min(to);
        if section_dep {
            refresh_section(m, tmpl, pfn);
        }
        if pfn & (pb - 1) == 0 {
            let mut rec = *tmpl;
            refresh(m, &mut rec, pfn);
            // SAFETY: `pfn` is in the memmap (the plan was validated against it).
            unsafe { Cached::store(m.page_ptr(pfn), &rec) };
            m.pageblock_init(pfn, hooks);
            pfn += 1;
        }
        // SAFETY: `[pfn, seg_end)` is inside the validated range.
        let base = unsafe { m.page_ptr(pfn) };
        let t = *tmpl;
        for i in 0..seg_end - pfn {
            // SAFETY: `pfn + i < seg_end <= to`, inside the memmap.
            let dst = unsafe { base.add(i as usize) };
            if P::WANT_PAGE_VIRTUAL {
                let mut rec = t;
                rec.set_virtual_address(m.config().pfn_to_virt(pfn + i));
                // SAFETY: `dst` is a writable struct page of the memmap.
                unsafe { S::store_patched(dst, rec) };
            } else {
                // SAFETY: as above.
                unsafe { S::store(dst, &t) };
            }
        }
        pfn = seg_end;
    }
}

#[inline(always)]
fn refresh_section<P: StructPage>(m: &Memmap<'_, P>, t: &mut P, pfn: u64) {
    let f = m.layout().set_section(t.flags(), m.config().pfn_to_section_nr(pfn));
    t.set_flags(f);
}

/// The template (cached or streaming) loop; returns the number of drains.
///
/// With [`DrainPolicy::Minimal`] every page that is later read back or partly rewritten with
/// normal stores is itself written with normal stores: the compound head (`__SetPageHead` reads
/// it), page\[1\] (seeded through the slow path) and page\[2\] (`prep_compound_head` writes its
/// `_deferred_list`), and every pageblock-aligned page (`set_pageblock_migratetype` may read it).
/// No streamed byte is ever touched again before the drain at return, so that one drain is the
/// only one needed. [`DrainPolicy::Upstream`] streams the head and page\[2\] like the other
/// tails and drains where the Linux series does: before `memmap_init_compound` reads the head,
/// before `prep_compound_head`, and before returning.
fn run_template<P: StructPage, H: InitHooks, S: Store>(
    m: &mut Memmap<'_, P>,
    plan: &Plan,
    pgmap: &DevPagemap,
    policy: DrainPolicy,
    hooks: &mut H,
) -> u64 {
    let mut drains = 0;
    let mut streamed = false;
    let upstream = policy == DrainPolicy::Upstream;
    // Upstream drains at its three points unconditionally; the minimal policy only when
    // something was streamed since the last drain.
    let drain = |drains: &mut u64, streamed: &mut bool| {
        if S::STREAMING && (*streamed || upstream) {
            stream_hal::drain();
            *drains += 1;
            *streamed = false;
        }
    };
    // Seed the head template from the first real struct page, through the slow path.
    m.init_zone_device_page(plan.start, plan.zone, plan.nid, pgmap, hooks);
    let mut head_tmpl = m.read(plan.start);

    if plan.pfns_per_compound == 1 {
        template_run::<P, H, S>(m, plan.start + 1, plan.end, &mut head_tmpl, hooks);
        streamed = true;
        drain(&mut drains, &mut streamed);
        return drains;
    }

    if upstream {
        // The Linux series: per compound, the head from the head template, a drain before
        // memmap_init_compound() reads it, page[1] seeded through the slow path as the tail
        // template, the tails streamed, a drain before prep_compound_head().
        let mut head = plan.start;
        while head < plan.end {
            if head != plan.start {
                template_run::<P, H, S>(m, head, head + 1, &mut head_tmpl, hooks);
                streamed = true;
            }
            drain(&mut drains, &mut streamed);
            m.set_flag(head, PG::HEAD);
            let first_tail = head + 1;
            m.init_zone_device_page(first_tail, plan.zone, plan.nid, pgmap, hooks);
            m.prep_compound_tail(head, 1);
            m.set_page_count(first_tail, 0, hooks);
            let mut tail_tmpl = m.read(first_tail);
            if head + 2 < head + plan.compound_pages {
                template_run::<P, H, S>(m, head + 2, head + plan.compound_pages, &mut tail_tmpl, hooks);
                streamed = true;
            }
            drain(&mut drains, &mut streamed);
            m.prep_compound_head(head, plan.order);
            head += plan.pfns_per_compound;
        }
        drain(&mut drains, &mut streamed);
        return drains;
    }

    // Minimal: the first compound page is built in memory with normal stores where it is read
    // back (head, page[1], page[2]), which seeds three more templates: the final head, page[1]
    // and page[2] as `__SetPageHead` and `prep_compound_head` leave them. Every later compound
    // page is then streamed record by record, each template refreshed in registers with its
    // PFN-dependent fields (section bits, `virtual`) and its compound-dependent pointers
    // (`compound_head`, the `_deferred_list` self-pointers). Nothing streamed is ever read
    // back or rewritten, so the one drain before returning is the only one needed.
    let first = plan.start;
    m.set_flag(first, PG::HEAD);
    m.init_zone_device_page(first + 1, plan.zone, plan.nid, pgmap, hooks);
    m.prep_compound_tail(first, 1);
    m.set_page_count(first + 1, 0, hooks);
    let mut tail_tmpl = m.read(first + 1);
    let end = first + plan.compound_pages;
    if first + 2 < end {
        template_run::<P, H, Cached>(m, first + 2, first + 3, &mut tail_tmpl, hooks);
    }
    if first + 3 < end {
        template_run::<P, H, S>(m, first + 3, end, &mut tail_tmpl, hooks);
        streamed = true;
    }
    m.prep_compound_head(first, plan.order);
    let head_final = m.read(first);
    let page1_final = m.read(first + 1);
    let page2_final = (plan.compound_pages > 2).then(|| m.read(first + 2));
    let section_dep = m.layout().section_in_page_flags();

    let mut head = first + plan.pfns_per_compound;
    while head < plan.end {
        let head_vaddr = m.vaddr(head);
        // Head: pageblock-aligned heads get `set_pageblock_migratetype`, which on classic
        // SPARSEMEM reads the page back: those are stored normally.
        let mut rec = head_final;
        m.refresh_template(&mut rec, head);
        // SAFETY: `head` is inside the validated range.
        let dst = unsafe { m.page_ptr(head) };
        if m.pageblock_aligned(head) {
            if section_dep {
                // SAFETY: `dst` is a writable struct page of the memmap.
                unsafe { Cached::store_patched(dst, rec) };
            } else {
                // SAFETY: as above; nothing reads it before the final drain.
                unsafe { S::store_patched(dst, rec) };
            }
            m.pageblock_init(head, hooks);
        } else {
            // SAFETY: as above.
            unsafe { S::store_patched(dst, rec) };
        }
        // page[1]: the folio counters of prep_compound_head, the compound head pointer.
        let mut rec = page1_final;
        rec.set_u64_at(offsets::COMPOUND_HEAD, head_vaddr + 1);
        m.refresh_template(&mut rec, head + 1);
        // SAFETY: `head + 1` is inside the range (compound pages have at least two pages).
        unsafe { S::store_patched(m.page_ptr(head + 1), rec) };
        if let Some(p2) = page2_final {
            // page[2]: the `_deferred_list` self-pointers (order > 1).
            let mut rec = p2;
            rec.set_u64_at(offsets::COMPOUND_HEAD, head_vaddr + 1);
            if plan.order > 1 {
                let list = m.vaddr(head + 2) + offsets::LRU_PREV as u64;
                rec.set_u64_at(offsets::LRU_PREV, list);
                rec.set_u64_at(offsets::MAPPING, list);
            }
            m.refresh_template(&mut rec, head + 2);
            // SAFETY: `head + 2` is inside the range (`compound_pages > 2`).
            unsafe { S::store_patched(m.page_ptr(head + 2), rec) };
        }
        tail_tmpl.set_u64_at(offsets::COMPOUND_HEAD, head_vaddr + 1);
        let end = head + plan.compound_pages;
        if head + 3 < end {
            template_run::<P, H, S>(m, head + 3, end, &mut tail_tmpl, hooks);
        }
        streamed = true;
        head += plan.pfns_per_compound;
    }
    drain(&mut drains, &mut streamed);
    drains
}
