//! memmap-core's public ZONE_DEVICE init with arbitrary configurations, memmap placement,
//! ranges, vmemmap shifts, altmaps, struct page layouts and strategies.
//!
//! Every input is either a typed error that wrote nothing (the memmap, its pageblocks and the
//! hooks untouched), the same error the slow path gives; or a result byte-identical to
//! [`Strategy::Slow`] on the same input: struct pages, pageblock migrate types, `cond_resched`
//! calls, tracepoint events and report. Guard struct pages around the memmap's slice (storage
//! the memmap does not own) are never written. The range's refusal by the kernel
//! (`check_memremap_pages`) matches the alignment it names, and the per-page operations
//! (`set_flag`, `memmap_init_compound`, `prep_compound_head`/`_tail`, `pageblocks_with`) take
//! arbitrary pfns, counts, orders and bits without an arithmetic panic.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use memmap_core::Named;
use memmap_core::{
    DevPagemap, DrainPolicy, InitError, InitOptions, InitReport, KernelConfig, Memmap, MemoryType, NoHooks,
    Page64, Page72, RecordingHooks, Strategy, StructPage, VmemAltmap, ZoneDeviceRange, check_memremap_pages,
    hotplug_align_pages, memmap_init_zone_device, pageblocks_needed,
};

/// Struct pages on each side of the memmap's slice.
const GUARD: usize = 4;
/// What untouched storage holds.
const GUARD_WORD: u64 = 0x5a5a_5a5a_5a5a_5a5a;
/// The largest memmap built.
const MAX_PAGES: u64 = 4096;

/// A bug found here, now fixed (`fuzz/regressions/zone_device_init/vaddr-base-overflow`, which
/// CI replays): memmap-core computed list self-pointers as `vaddr + offset` without wrapping,
/// which overflowed (a panic with overflow checks) for a `Memmap::with_vaddr_base` within a
/// struct page of `u64::MAX`; it now wraps modulo 2^64 like the kernel. `true` would keep
/// bases 1 MiB below the top again, should a similar bug need to be kept out of the way.
const VADDR_OVERFLOW_OPEN: bool = false;

#[derive(Debug, Arbitrary)]
enum Base {
    /// A PFN at a section boundary (section index).
    Section(u8),
    /// Near the configuration's last PFN (distance below it).
    NearTop(u16),
    /// Anywhere.
    Raw(u64),
}

#[derive(Debug, Arbitrary)]
struct Input {
    preset: u8,
    debug_page_ref: bool,
    optimize_dax_vmemmap: bool,
    tracepoint: bool,
    layout72: bool,
    base: Base,
    /// Memmap length (modulo [`MAX_PAGES`] + 1).
    memmap_pages: u16,
    /// Range start relative to the memmap's base.
    start_delta: i32,
    /// Range length: small, or any `u64`.
    range_pages: Result<u16, u64>,
    memory_type: u8,
    vmemmap_shift: u8,
    /// `(base delta from the range start, reserve, free)`.
    altmap: Option<(i16, u16, u16)>,
    zone_delta: u8,
    nid: u16,
    strategy: u8,
    upstream_drains: bool,
    threshold: Option<u16>,
    /// The modelled address of the first struct page (default: from the config's vmemmap).
    vaddr_base: Option<u64>,
    /// End of boot memory relative to the range start (early sections), if any.
    boot_memory_end: Option<i32>,
    /// The per-page operations with arbitrary arguments on the same memmap: `(pfn delta from
    /// the base, count or tail index, order or flag bit, which)`.
    ops: Vec<(i32, u64, u32, u8)>,
}

/// Everything one run left behind.
#[derive(Debug, PartialEq)]
struct Outcome<P> {
    result: Result<InitReportCmp, InitError>,
    storage: Vec<P>,
    pageblocks: Vec<u8>,
    hooks: RecordingHooks,
}

/// The report without the fields that name the strategy.
#[derive(Debug, PartialEq)]
struct InitReportCmp {
    start_pfn: u64,
    nr_pages: u64,
    pages_initialized: u64,
}

impl From<InitReport> for InitReportCmp {
    fn from(r: InitReport) -> Self {
        InitReportCmp { start_pfn: r.start_pfn, nr_pages: r.nr_pages, pages_initialized: r.pages_initialized }
    }
}

fn guard<P: StructPage>() -> P {
    let mut p = P::ZEROED;
    p.words_mut().fill(GUARD_WORD);
    p
}

/// What both runs of an input share.
struct Case {
    cfg: KernelConfig,
    base: u64,
    n: usize,
    range: ZoneDeviceRange,
    pgmap: DevPagemap,
    tracepoint: bool,
    vaddr_base: Option<u64>,
}

/// One run; `None` when the memmap itself is refused (then nothing else is tried).
fn run<P: StructPage>(c: &Case, opts: &InitOptions) -> Option<Outcome<P>> {
    let Case { cfg, base, n, ref range, ref pgmap, tracepoint, vaddr_base } = *c;
    let mut storage = vec![guard::<P>(); n + 2 * GUARD];
    let mut pageblocks = vec![0xeeu8; pageblocks_needed(&cfg, base, n as u64)];
    let mut hooks = RecordingHooks::new(tracepoint);
    let result = {
        let mut memmap = Memmap::new(cfg, base, &mut storage[GUARD..GUARD + n], &mut pageblocks).ok()?;
        if let Some(v) = vaddr_base {
            memmap = memmap.with_vaddr_base(v);
        }
        memmap_init_zone_device(&mut memmap, range, pgmap, opts, &mut hooks)
    };
    let g = guard::<P>();
    assert!(
        storage[..GUARD].iter().chain(&storage[GUARD + n..]).all(|p| *p == g),
        "a guard page was written"
    );
    if result.is_err() {
        assert!(storage.iter().all(|p| *p == g), "an error wrote struct pages");
        assert!(hooks.resched_pfns.is_empty() && hooks.page_ref_events.is_empty(), "an error called hooks");
    }
    Some(Outcome { result: result.map(InitReportCmp::from), storage, pageblocks, hooks })
}

/// The kernel's refusal of the range ([`check_memremap_pages`]) agrees with the alignment it
/// names: never a panic, `Ok` exactly when the range is whole sub-sections (sections without
/// SPARSEMEM_VMEMMAP) and, for FS_DAX, starts and ends on 2 MiB.
fn check_mappable(cfg: &KernelConfig, range: &ZoneDeviceRange, pgmap: &DevPagemap) {
    let r = check_memremap_pages(cfg, range, pgmap);
    let Some(end) = range.start_pfn.checked_add(range.nr_pages) else {
        assert!(matches!(r, Err(InitError::RangeOverflow { .. })), "{r:?}");
        return;
    };
    let align = hotplug_align_pages(cfg);
    let sub = 1u64 << (21 - cfg.page_shift);
    let pmem_ok = pgmap.memory_type != MemoryType::FsDax || (range.start_pfn | end) % sub == 0;
    let ok = pmem_ok && (range.start_pfn | range.nr_pages) % align == 0;
    assert_eq!(r.is_ok(), ok, "{range:?} {pgmap:?}: {r:?}");
    if let Err(e) = r {
        assert!(matches!(e, InitError::NotMappable { .. }), "{e:?}");
        let _ = e.to_string();
    }
}

/// The per-page operations of the memmap with arbitrary pfns, counts, orders and bits: each
/// works or returns its typed error having written nothing; no arithmetic overflow, no write
/// outside the memmap's slice. A pfn outside the memmap is the documented panic of the
/// per-page accessors (libFuzzer aborts on any panic), so those calls are made only where the
/// pages they touch are in the memmap; `memmap_init_compound` and `pageblocks_with` take
/// anything.
fn per_page_ops<P: StructPage>(cfg: KernelConfig, base: u64, n: usize, ops: &[(i32, u64, u32, u8)]) {
    let mut storage = vec![guard::<P>(); n + 2 * GUARD];
    let mut pageblocks = vec![0xeeu8; pageblocks_needed(&cfg, base, n as u64)];
    let Ok(mut memmap) = Memmap::new(cfg, base, &mut storage[GUARD..GUARD + n], &mut pageblocks) else {
        return;
    };
    for &(delta, count, order, which) in ops.iter().take(16) {
        let pfn = base.wrapping_add_signed(i64::from(delta));
        match which % 5 {
            0 if memmap.contains(pfn) => {
                let before = memmap.read(pfn);
                memmap.set_flag(pfn, order);
                assert_eq!(memmap.read(pfn).test_flag(order), order < 64);
                memmap.clear_flag(pfn, order);
                assert!(!memmap.read(pfn).test_flag(order));
                if order >= 64 {
                    assert_eq!(memmap.read(pfn), before, "a flag bit of {order} changed the page");
                }
            }
            1 => {
                let before: Vec<P> = (memmap.base_pfn()..memmap.end_pfn()).map(|p| memmap.read(p)).collect();
                let pgmap = DevPagemap::new(MemoryType::Generic).with_vmemmap_shift(order % 70);
                let r = memmap.memmap_init_compound(pfn, cfg.zone_device(), 0, &pgmap, count, &mut NoHooks);
                if r.is_err() {
                    let after = (memmap.base_pfn()..memmap.end_pfn()).map(|p| memmap.read(p));
                    assert!(after.eq(before.iter().copied()), "{r:?} wrote struct pages");
                }
            }
            2 if pfn.checked_add(count % 4096).is_some_and(|t| memmap.contains(t)) => {
                memmap.prep_compound_tail(pfn, count % 4096, order);
            }
            3 if memmap.contains_range(pfn, 3) => {
                let _ = memmap.prep_compound_head(pfn, order);
            }
            4 => {
                let got: Vec<u64> =
                    memmap.pageblocks_with(pfn, count, memmap_core::MigrateType::Movable).collect();
                let pb = cfg.pageblock_nr_pages();
                assert!(
                    got.iter().all(|&b| b < memmap.end_pfn() && b.saturating_add(pb) > memmap.base_pfn())
                );
                assert!(got.windows(2).all(|w| w[0] < w[1]));
            }
            _ => {}
        }
    }
    drop(memmap);
    let g = guard::<P>();
    assert!(
        storage[..GUARD].iter().chain(&storage[GUARD + n..]).all(|p| *p == g),
        "a guard page was written"
    );
}

fn check<P: StructPage>(input: &Input) {
    let presets = KernelConfig::ALL;
    let cfg = KernelConfig {
        debug_page_ref: input.debug_page_ref,
        optimize_dax_vmemmap: input.optimize_dax_vmemmap,
        ..presets[usize::from(input.preset) % presets.len()]
    };
    let n = u64::from(input.memmap_pages) % (MAX_PAGES + 1);
    let base = match input.base {
        Base::Section(s) => u64::from(s) * cfg.pages_per_section(),
        Base::NearTop(d) => cfg.max_pfn().saturating_sub(n + u64::from(d)),
        Base::Raw(b) => b,
    };
    let start_pfn = base.wrapping_add_signed(i64::from(input.start_delta));
    let nr_pages = match input.range_pages {
        Ok(k) => u64::from(k),
        Err(k) => k,
    };
    let types = MemoryType::ALL;
    let mut pgmap = DevPagemap::new(types[usize::from(input.memory_type) % types.len()])
        .with_vmemmap_shift(u32::from(input.vmemmap_shift % 24));
    if let Some((delta, reserve, free)) = input.altmap {
        let base_pfn = start_pfn.wrapping_add_signed(i64::from(delta));
        pgmap =
            pgmap.with_altmap(VmemAltmap { base_pfn, reserve: u64::from(reserve), free: u64::from(free) });
    }
    let range = ZoneDeviceRange::new(
        cfg.zone_device().wrapping_sub(u32::from(input.zone_delta % 3)),
        u32::from(input.nid) % 1100,
        start_pfn,
        nr_pages,
    )
    .with_boot_memory_end(input.boot_memory_end.map_or(0, |d| start_pfn.wrapping_add_signed(i64::from(d))));
    let strategy = Strategy::ALL[usize::from(input.strategy) % Strategy::ALL.len()];
    let mut opts = InitOptions::new(strategy);
    if input.upstream_drains {
        opts = opts.with_drains(DrainPolicy::Upstream);
    }
    if let Some(t) = input.threshold {
        opts.fill.threshold_bytes = Some(usize::from(t));
    }
    let vaddr_base =
        input.vaddr_base.map(|v| if VADDR_OVERFLOW_OPEN { v.min(u64::MAX - (1 << 20)) } else { v });
    check_mappable(&cfg, &range, &pgmap);
    per_page_ops::<P>(cfg, base, n as usize, &input.ops);
    let case = Case { cfg, base, n: n as usize, range, pgmap, tracepoint: input.tracepoint, vaddr_base };
    let Some(got) = run::<P>(&case, &opts) else { return };
    let slow = run::<P>(&case, &InitOptions::new(Strategy::Slow)).expect("the same memmap is accepted twice");
    assert_eq!(got.result, slow.result, "{strategy}: result differs from the slow path");
    if got.storage != slow.storage {
        let first = got.storage.iter().zip(&slow.storage).position(|(a, b)| a != b);
        panic!("{strategy}: struct pages differ from the slow path (first at storage index {first:?})");
    }
    assert_eq!(got.pageblocks, slow.pageblocks, "{strategy}: pageblocks differ");
    assert_eq!(got.hooks, slow.hooks, "{strategy}: hook calls differ");
}

fuzz_target!(|input: Input| {
    if input.layout72 {
        check::<Page72>(&input);
    } else {
        check::<Page64>(&input);
    }
});
