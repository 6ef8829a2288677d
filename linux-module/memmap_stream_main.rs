// SPDX-License-Identifier: GPL-2.0 OR MIT

//! memmap_stream: stream-hal and memmap-core run inside the Linux kernel they model.
//!
//! At load the module
//!
//! 1. clears and copies freshly allocated pages with stream-hal's streaming stores
//!    (`clear_pages`, `memcpy_nontemporal`), with preemption off from the first store to the
//!    `drain`, and checks every byte (and the guard bytes around each copy);
//! 2. runs memmap-core's ZONE_DEVICE initializer (`move_pfn_range_to_zone` for an altmap's
//!    part, then `memmap_init_zone_device`; slow, template and streaming) for the first
//!    ZONE_DEVICE range of a `memmap=` pmem region into a vmalloc buffer, with the kernel's own
//!    `dev_pagemap` address, vmemmap address, `.config` and release, and compares it word by
//!    word with the kernel's struct pages (`pfn_to_page()`), in place, and the pageblocks'
//!    migrate types with the section's pageblock bitmap.
//!
//! Each result is one `memmap_stream:` line in the kernel log; any difference fails the load
//! with `EIO`, so `insmod` fails too.
//!
//! Then it registers memmap-core's streaming ZONE_DEVICE init as the kernel's memmap provider
//! (the hook `kernel-oracle build` patches into `memmap_init_zone_device()`): from then on every
//! bind of a pmem or dax device has its struct pages written by the crates, until the module is
//! unloaded. Writing to `/sys/module/memmap_stream/parameters/check` compares the namespace
//! with memmap-core's slow path again, as after load (`EIO` when one word differs).

use kernel::prelude::*;
use memmap_core::{
    DevPagemap, InitHooks, InitOptions, KernelConfig, KernelVersion, Memmap, MemoryType, Page64, Strategy,
    StructPage, VmemAltmap, ZoneDeviceRange,
};
use memmap_core::{Kconfig, Named};

module! {
    type: MemmapStream,
    name: "memmap_stream",
    authors: ["memmap-stream"],
    description: "stream-hal and memmap-core checked against the kernel's own memmap",
    license: "Dual MIT/GPL",
}

/// The kernel's `.config`, which the model reads its options from.
const KCONFIG: &str = include_str!(concat!(env!("OBJTREE"), "/.config"));

/// The release the module is built for (`uname -r`): the model's behaviours follow it.
const RELEASE: &str = env!("KERNELRELEASE");

// The model's struct page is the kernel's.
const _: () = assert!(core::mem::size_of::<kernel::bindings::page>() == Page64::SIZE);

/// One ZONE_DEVICE range as `memmap_init_zone_device()` saw it (`struct mms_namespace` of
/// `memmap_stream_glue.c`).
#[repr(C)]
#[derive(Default)]
struct Namespace {
    start_pfn: u64,
    nr_pages: u64,
    pgmap: u64,
    vmemmap_addr: u64,
    altmap_base_pfn: u64,
    altmap_reserve: u64,
    altmap_free: u64,
    memory_type: u32,
    vmemmap_shift: u32,
    has_altmap: u32,
    nid: i32,
    early_first: u32,
    early_last: u32,
}

unsafe extern "C" {
    fn mms_find_namespace(out: *mut Namespace) -> i32;
    fn mms_put_namespace(pgmap: u64);
    fn mms_pageblock_migratetype(pfn: u64) -> u32;
    fn mms_alloc_pages(order: u32) -> *mut u8;
    fn mms_free_pages(addr: *mut u8, order: u32);
    fn mms_preempt_disable();
    fn mms_preempt_enable();
    fn mms_cond_resched();
    fn mms_ktime_ns() -> u64;
    fn mms_register_provider() -> i32;
    fn mms_unregister_provider();
}

/// The loaded module: the provider is registered while it lives.
struct MemmapStream;

impl Drop for MemmapStream {
    fn drop(&mut self) {
        // SAFETY: `init` registered the provider before returning this value; unregistering
        // returns once no `memmap_init_zone_device()` can call into this module any more.
        unsafe { mms_unregister_provider() };
        pr_info!("provider unregistered: the kernel's own loop initializes ZONE_DEVICE memmaps again\n");
    }
}

/// Prints a value of the crates' `core::fmt::Display` through the kernel's own `Display`,
/// which the `pr_*!` macros take.
struct Shown<T>(T);

impl<T: core::fmt::Display> kernel::fmt::Display for Shown<T> {
    fn fmt(&self, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
        core::fmt::Display::fmt(&self.0, f)
    }
}

impl kernel::Module for MemmapStream {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        pr_info!(
            "stream-hal backend {}, streaming clear {}\n",
            stream_hal::backend().name(),
            stream_hal::streaming_clear_method()
        );
        check_clears_and_copies()?;
        compare_namespace(&[Strategy::Slow, Strategy::Template, Strategy::Streaming])?;
        pr_info!("all checks passed\n");
        // SAFETY: the provider is a static of the glue with this module as its owner; `Drop`
        // unregisters it.
        let err = unsafe { mms_register_provider() };
        if err != 0 {
            pr_err!("the kernel has another ZONE_DEVICE memmap provider ({})\n", err);
            return Err(Error::from_errno(err));
        }
        pr_info!("registered as the ZONE_DEVICE memmap provider\n");
        Ok(MemmapStream)
    }
}

/// Preemption off while it lives (`preempt_disable()`/`preempt_enable()`): streaming stores
/// and their `drain` stay on one CPU.
struct NoPreempt;

impl NoPreempt {
    fn new() -> Self {
        // SAFETY: `preempt_disable()` has no precondition; `Drop` pairs it.
        unsafe { mms_preempt_disable() };
        NoPreempt
    }
}

impl Drop for NoPreempt {
    fn drop(&mut self) {
        // SAFETY: pairs the `preempt_disable()` of `new`.
        unsafe { mms_preempt_enable() };
    }
}

/// 2^order pages from the page allocator, freed on drop.
struct Pages {
    addr: *mut u8,
    order: u32,
}

impl Pages {
    fn new(order: u32) -> Result<Self> {
        // SAFETY: `alloc_pages(GFP_KERNEL, order)` may sleep; module init runs in process
        // context with preemption on.
        let addr = unsafe { mms_alloc_pages(order) };
        if addr.is_null() {
            return Err(ENOMEM);
        }
        Ok(Pages { addr, order })
    }

    fn len(&self) -> usize {
        (1usize << self.order) * kernel::page::PAGE_SIZE
    }

    fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: `addr` is the direct-map address of 2^order pages this value owns, so
        // `len()` bytes are valid, aligned for `u8` and not aliased while `self` is borrowed.
        unsafe { core::slice::from_raw_parts_mut(self.addr, self.len()) }
    }
}

impl Drop for Pages {
    fn drop(&mut self) {
        // SAFETY: `addr` came from `alloc_pages` of this `order` and is freed once.
        unsafe { mms_free_pages(self.addr, self.order) };
    }
}

/// Clears and copies with streaming stores, rounds of `ORDER` pages, and checks every byte.
fn check_clears_and_copies() -> Result {
    const ORDER: u32 = 4;
    const ROUNDS: usize = 64;
    // (offset, length) of the copies inside the destination: whole pages, and unaligned heads
    // and tails around the 16-byte bodies.
    const COPIES: [(usize, usize); 4] = [(0, 65536), (7, 4096 + 13), (64, 60000), (4095, 1)];
    // Every copy fits in the 2^ORDER pages of its destination (and so its source).
    const _: () = {
        let mut i = 0;
        while i < COPIES.len() {
            assert!(COPIES[i].0 + COPIES[i].1 <= (1 << ORDER) * 4096);
            i += 1;
        }
    };
    let (mut cleared, mut copied) = (0usize, 0usize);
    for round in 0..ROUNDS {
        let mut dst = Pages::new(ORDER)?;
        let mut src = Pages::new(ORDER)?;
        let dst = dst.bytes();
        dst.fill(0xa5);
        {
            let _np = NoPreempt::new();
            // SAFETY: `dst` is valid for writes of `(1 << ORDER) * 4096` bytes (2^ORDER pages
            // owned here; the product is 65536, no overflow); nothing reads, writes or
            // publishes it before the `drain` below, on this CPU (preemption is off).
            unsafe { stream_hal::clear_pages(dst.as_mut_ptr(), 1 << ORDER) };
            stream_hal::drain();
        }
        if let Some(at) = dst.iter().position(|&b| b != 0) {
            pr_err!("clear_pages left byte {:#x} at offset {} (round {})\n", dst[at], at, round);
            return Err(EIO);
        }
        cleared += dst.len();

        let src = src.bytes();
        for (i, b) in src.iter_mut().enumerate() {
            *b = (i as u8) ^ (round as u8).wrapping_mul(31) ^ ((i >> 8) as u8);
        }
        for &(off, len) in &COPIES {
            dst.fill(0x5a);
            {
                let _np = NoPreempt::new();
                // SAFETY: `src` is valid for reads of `len <= src.len()` initialized bytes (filled
                // above); `dst + off` for writes of `len` bytes (`off + len <= dst.len()` for
                // every entry of `COPIES`); `dst` and `src` are distinct allocations, so they
                // do not overlap; nothing touches `dst` before the `drain` below, on this CPU.
                unsafe { stream_hal::memcpy_nontemporal(dst.as_mut_ptr().add(off), src.as_ptr(), len) };
                stream_hal::drain();
            }
            let copy_ok = dst[off..off + len] == src[..len];
            let guards_ok =
                dst[..off].iter().all(|&b| b == 0x5a) && dst[off + len..].iter().all(|&b| b == 0x5a);
            if !copy_ok || !guards_ok {
                pr_err!(
                    "memcpy_nontemporal of {} bytes at offset {} (round {}): copy {}, guard bytes {}\n",
                    len,
                    off,
                    round,
                    if copy_ok { "equal" } else { "DIFFERS" },
                    if guards_ok { "intact" } else { "OVERWRITTEN" }
                );
                return Err(EIO);
            }
            copied += len;
        }
    }
    pr_info!(
        "clear_pages: {} bytes in {} rounds of {} pages zero; memcpy_nontemporal: {} bytes equal, guard bytes intact\n",
        cleared,
        ROUNDS,
        1 << ORDER,
        copied
    );
    Ok(())
}

/// `cond_resched()` at the model's pageblock-aligned pfns, as the kernel's initializer calls
/// it: the streaming stores issued so far are drained first, on the CPU that issued them,
/// and preemption is off again before the next store.
struct Resched {
    calls: u64,
}

impl InitHooks for Resched {
    fn cond_resched(&mut self, _pfn: u64) {
        stream_hal::drain();
        // SAFETY: the caller holds a `NoPreempt` across the initializer: this enables
        // preemption for the reschedule and disables it again before returning.
        unsafe {
            mms_preempt_enable();
            mms_cond_resched();
            mms_preempt_disable();
        }
        self.calls += 1;
    }
}

/// The model's configuration, parsed once (the provider runs on every bind).
static CONFIG: kernel::sync::SetOnce<KernelConfig> = kernel::sync::SetOnce::new();

/// The model's configuration: the x86-64 base with the kernel's `.config` and release.
fn kernel_config() -> Result<KernelConfig> {
    if let Some(cfg) = CONFIG.as_ref() {
        return Ok(*cfg);
    }
    let cfg = parse_kernel_config()?;
    CONFIG.populate(cfg);
    Ok(cfg)
}

fn parse_kernel_config() -> Result<KernelConfig> {
    let version = KernelVersion::parse(RELEASE).ok_or_else(|| {
        pr_err!("the release {} is not one the model parses\n", RELEASE);
        EINVAL
    })?;
    KernelConfig::X86_64.with_kconfig(&Kconfig::new(KCONFIG)).map(|c| c.with_version(version)).map_err(|e| {
        pr_err!("the kernel's .config: {}\n", Shown(e));
        EINVAL
    })
}

/// The model's `MemoryType` of the kernel's `enum memory_type`.
fn memory_type(value: u32) -> Option<MemoryType> {
    MemoryType::ALL.iter().copied().find(|&t| t as u32 == value)
}

/// The namespace's `dev_pagemap` reference, put on drop.
struct PgmapRef(u64);

impl Drop for PgmapRef {
    fn drop(&mut self) {
        // SAFETY: `self.0` is the `dev_pagemap` whose reference `mms_find_namespace` took.
        unsafe { mms_put_namespace(self.0) };
    }
}

/// Compares the first namespace of a `memmap=` region with the model's `strategies`.
fn compare_namespace(strategies: &[Strategy]) -> Result {
    let mut ns = Namespace::default();
    // SAFETY: `ns` is a valid, writable `struct mms_namespace`.
    if unsafe { mms_find_namespace(&mut ns) } != 0 {
        pr_err!("no ZONE_DEVICE range in a memmap= pmem region\n");
        return Err(ENODEV);
    }
    let _pgmap_ref = PgmapRef(ns.pgmap);
    let cfg = kernel_config()?;
    let (range, pgmap) = model_range(&cfg, &ns)?;
    pr_info!(
        "namespace pfns {:#x}..{:#x} ({} pages), {}, vmemmap_shift {}, altmap reserve {} free {}, node {}\n",
        ns.start_pfn,
        ns.start_pfn + ns.nr_pages,
        ns.nr_pages,
        pgmap.memory_type.name(),
        ns.vmemmap_shift,
        ns.altmap_reserve,
        ns.altmap_free,
        range.nid
    );
    for &strategy in strategies {
        compare_strategy(&cfg, &ns, &range, &pgmap, strategy)?;
    }
    Ok(())
}

/// The model's range and pagemap of a namespace.
fn model_range(cfg: &KernelConfig, ns: &Namespace) -> Result<(ZoneDeviceRange, DevPagemap)> {
    let Some(ty) = memory_type(ns.memory_type) else {
        pr_err!("memory type {} is not one the model knows\n", ns.memory_type);
        return Err(EINVAL);
    };
    if ns.early_first != 0 || ns.early_last != 0 {
        pr_err!("the range shares a section with boot memory; not compared here\n");
        return Err(EINVAL);
    }
    let mut pgmap = DevPagemap::new(ty).with_vmemmap_shift(ns.vmemmap_shift);
    pgmap.addr = ns.pgmap;
    if ns.has_altmap != 0 {
        pgmap = pgmap.with_altmap(VmemAltmap {
            base_pfn: ns.altmap_base_pfn,
            reserve: ns.altmap_reserve,
            free: ns.altmap_free,
        });
    }
    let nid = u32::try_from(ns.nid).map_err(|_| EINVAL)?;
    Ok((ZoneDeviceRange::new(cfg.zone_device(), nid, ns.start_pfn, ns.nr_pages), pgmap))
}

/// `memmap_init_zone_device()`'s provider (called by the glue with the module held): writes the
/// struct pages `memmap_init_zone_device(zone, ns.start_pfn, ns.nr_pages, pgmap)` initializes
/// (those after the altmap's) in the kernel's vmemmap with memmap-core's streaming init, and
/// drains before returning. 0 when every one is written; a negative errno has the kernel's
/// loop write them all.
#[unsafe(no_mangle)]
extern "C" fn mms_provider_init(ns: *const Namespace) -> i32 {
    // SAFETY: the glue passes its own `struct mms_namespace`, valid and unchanged for the call.
    let ns = unsafe { &*ns };
    match provide(ns) {
        Ok(()) => 0,
        Err(e) => {
            pr_err!(
                "provider: pfns {:#x}..{:#x} left to the kernel's loop ({:?})\n",
                ns.start_pfn,
                ns.start_pfn + ns.nr_pages,
                e
            );
            e.to_errno()
        }
    }
}

fn provide(ns: &Namespace) -> Result {
    let cfg = kernel_config()?;
    if ns.early_first != 0 || ns.early_last != 0 {
        // The model needs where boot memory ends to know which compound pages it shares: the
        // kernel's loop writes such a range.
        return Err(EINVAL);
    }
    let (range, pgmap) = model_range(&cfg, ns)?;
    let len = usize::try_from(ns.nr_pages).map_err(|_| EINVAL)?;
    let base = ns
        .start_pfn
        .checked_mul(Page64::SIZE as u64)
        .and_then(|o| ns.vmemmap_addr.checked_add(o))
        .ok_or(EINVAL)?;
    let pages = core::ptr::NonNull::new(base as *mut Page64).ok_or(EINVAL)?;
    let mut pageblocks = VVec::<u8>::from_elem(
        0,
        memmap_core::pageblocks_needed(&cfg, ns.start_pfn, ns.nr_pages),
        GFP_KERNEL,
    )?;
    // SAFETY: `pages` is `pfn_to_page(ns.start_pfn)`. `memremap_pages()` mapped the range's
    // memmap (`arch_add_memory()` -> `sparse_add_section()`) before it called
    // `memmap_init_zone_device()`, so the `len` struct pages from there are mapped, readable
    // (poison, zeros or an earlier bind's bytes; every bit pattern is a valid `Page64`) and
    // writable. Until `memmap_init_zone_device()` returns nothing else writes them or reads them
    // as initialized: ZONE_DEVICE pfns are never online (`pfn_to_online_page()` skips them) and
    // the pagemap hands out its references only afterwards (`percpu_ref_get_many()`), which is
    // what the kernel's own loop relies on too. Struct pages the DAX vmemmap optimization maps
    // onto another are neither read nor written by the model (it writes only those with memory
    // of their own, see `vmemmap_alias`), so the aliasing is never observed through this
    // memmap. `pageblocks` is this function's own buffer.
    let mut memmap = unsafe { Memmap::from_raw_parts(cfg, ns.start_pfn, pages, len, &mut pageblocks) }
        .map_err(|e| {
            pr_err!("provider memmap: {}\n", Shown(e));
            EINVAL
        })?
        .with_vaddr_base(base);
    let opts = InitOptions::new(Strategy::Streaming);
    let mut hooks = Resched { calls: 0 };
    // SAFETY: reading the clock has no precondition.
    let t0 = unsafe { mms_ktime_ns() };
    let report = {
        let _np = NoPreempt::new();
        let report = memmap_core::memmap_init_zone_device(&mut memmap, &range, &pgmap, &opts, &mut hooks);
        stream_hal::drain();
        report
    }
    .map_err(|e| {
        pr_err!("provider init: {}\n", Shown(e));
        EINVAL
    })?;
    // SAFETY: as above.
    let ns_taken = unsafe { mms_ktime_ns() } - t0;
    pr_info!(
        "provider: pfns {:#x}..{:#x}: {} struct pages written ({}, backend {}, {} drains, {} cond_resched) in {} us\n",
        report.start_pfn,
        report.start_pfn + report.nr_pages,
        report.pages_initialized,
        report.used.name(),
        report.backend.name(),
        report.drains,
        hooks.calls,
        ns_taken / 1000
    );
    Ok(())
}

/// `check`'s setter: the namespace compared with memmap-core's slow path (0 or `-EIO`).
#[unsafe(no_mangle)]
extern "C" fn mms_check() -> i32 {
    match compare_namespace(&[Strategy::Slow]) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// Runs the model with `strategy` into a vmalloc buffer and compares it with the kernel's
/// struct pages and pageblocks.
fn compare_strategy(
    cfg: &KernelConfig,
    ns: &Namespace,
    range: &ZoneDeviceRange,
    pgmap: &DevPagemap,
    strategy: Strategy,
) -> Result {
    let n = usize::try_from(ns.nr_pages).map_err(|_| EINVAL)?;
    let mut pages = VVec::<Page64>::with_capacity(n, GFP_KERNEL)?;
    let mut pageblocks =
        VVec::<u8>::from_elem(0, memmap_core::pageblocks_needed(cfg, ns.start_pfn, ns.nr_pages), GFP_KERNEL)?;
    let storage = &mut pages.spare_capacity_mut()[..n];
    let mut memmap = Memmap::from_uninit(*cfg, ns.start_pfn, storage, &mut pageblocks)
        .map_err(|e| {
            pr_err!("model memmap: {}\n", Shown(e));
            EINVAL
        })?
        .with_vaddr_base(ns.vmemmap_addr + ns.start_pfn * Page64::SIZE as u64);
    let opts = InitOptions::new(strategy);
    let mut hooks = Resched { calls: 0 };
    let (first, report) = {
        let _np = NoPreempt::new();
        let altmap_part = memmap_core::move_pfn_range_to_zone(&mut memmap, range, pgmap, &opts, &mut hooks);
        let report = altmap_part.and_then(|a| {
            memmap_core::memmap_init_zone_device(&mut memmap, range, pgmap, &opts, &mut hooks).map(|r| (a, r))
        });
        stream_hal::drain();
        report
    }
    .map(|(a, r)| (if a.nr_pages > 0 { a.start_pfn } else { r.start_pfn }, r))
    .map_err(|e| {
        pr_err!("{} init: {}\n", strategy.name(), Shown(e));
        EINVAL
    })?;
    // Struct pages the vmemmap optimization deduplicated read as their vmemmap page's source.
    let mut aliases = 0u64;
    if memmap_core::vmemmap_can_optimize(cfg, Page64::SIZE, pgmap) {
        for pfn in report.start_pfn..report.start_pfn + report.nr_pages {
            if let Some(src) = memmap_core::vmemmap_alias::<Page64>(cfg, range, pgmap, pfn) {
                memmap.write(pfn, memmap.read(src));
                aliases += 1;
            }
        }
    }
    let end = ns.start_pfn + ns.nr_pages;
    let (mut equal, mut differ) = (0u64, 0u64);
    for pfn in first..end {
        let model = memmap.read(pfn);
        let addr = (ns.vmemmap_addr + pfn * Page64::SIZE as u64) as *const u64;
        let mut kernel = [0u64; 8];
        for (i, w) in kernel.iter_mut().enumerate() {
            // SAFETY: `addr` is `pfn_to_page(pfn)`, a struct page of the namespace's mapped
            // memmap (the pgmap reference keeps it), 64 bytes, 8-byte aligned; read volatile
            // because the kernel owns it.
            *w = unsafe { core::ptr::read_volatile(addr.add(i)) };
        }
        if model.words() == kernel {
            equal += 1;
            continue;
        }
        if differ == 0 {
            let i = (0..8).find(|&i| model.words()[i] != kernel[i]).unwrap_or(0);
            pr_err!(
                "{}: first difference at pfn {:#x}, byte {}: kernel {:#018x}, model {:#018x}\n",
                strategy.name(),
                pfn,
                i * 8,
                kernel[i],
                model.words()[i]
            );
        }
        differ += 1;
    }
    let (mut pb_equal, mut pb_differ, mut pb_unset) = (0u64, 0u64, 0u64);
    let order = cfg.pageblock_order;
    let mut pfn = first >> order << order;
    while pfn < end {
        let at = pfn.max(first);
        match memmap.pageblock_migratetype(at) {
            // SAFETY: `at` is a pfn of the namespace, whose sections are present while the
            // pgmap reference is held.
            Some(mt) if mt as u32 == unsafe { mms_pageblock_migratetype(at) } => pb_equal += 1,
            Some(_) => pb_differ += 1,
            None => pb_unset += 1,
        }
        pfn += 1 << order;
    }
    pr_info!(
        "{} ({} used, {} drains, {} cond_resched, {} deduplicated): {} of {} struct pages equal to the kernel's, {} differ (pfns {:#x}..{:#x}; {} reserved altmap pages before them not initialized by either); pageblocks {} equal, {} differ, {} not set by the model\n",
        strategy.name(),
        report.used.name(),
        report.drains,
        hooks.calls,
        aliases,
        equal,
        end - first,
        differ,
        first,
        end,
        first - ns.start_pfn,
        pb_equal,
        pb_differ,
        pb_unset
    );
    if differ != 0 || pb_differ != 0 {
        return Err(EIO);
    }
    Ok(())
}
