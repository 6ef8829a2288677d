//! The central property: for every configuration, the Template and Streaming (and Auto) paths
//! produce a memmap byte-identical to the Slow path, with identical pageblock migrate types,
//! identical `cond_resched` calls and identical tracepoint events, and leave the guard struct
//! pages around the range untouched.
//!
//! Random: memory type, `vmemmap_shift` in {0, 1..=9, 18}, altmap on/off with random
//! reserve/free, start PFN (including ranges that cross a 32768-PFN section boundary, where
//! classic SPARSEMEM flags change), page count, 64/72-byte layout, VMEMMAP/classic-sparse/arm64
//! config, kernel release (6.12 or 7.2), boot memory reaching into the range's first sections
//! (early sections), tracepoint on/off, node id. Each run first initializes the altmap part
//! (`move_pfn_range_to_zone`), as `memremap_pages()` does, with the same strategy.

mod support;

use memmap_core::Named;
use memmap_core::{
    DevPagemap, DrainPolicy, InitOptions, KernelConfig, KernelVersion, MemoryType, Page64, Page72, Strategy,
    StrategyReason, StructPage, VmemAltmap, ZoneDeviceRange,
};
use proptest::prelude::*;
use proptest::strategy::Strategy as _;
use support::{range, run_full, with_debug_page_ref};

#[derive(Debug, Clone)]
struct Case {
    cfg: KernelConfig,
    layout72: bool,
    range: ZoneDeviceRange,
    pgmap: DevPagemap,
    tracepoint: bool,
}

fn shifts() -> impl proptest::strategy::Strategy<Value = u32> {
    if cfg!(miri) {
        prop_oneof![Just(0u32), 1u32..=3].boxed()
    } else {
        prop_oneof![4 => 0u32..=9, 1 => Just(18u32)].boxed()
    }
}

fn case() -> impl proptest::strategy::Strategy<Value = Case> {
    (
        prop::sample::select(KernelConfig::ALL.to_vec()),
        any::<bool>(),
        prop::sample::select(MemoryType::ALL.to_vec()),
        shifts(),
        any::<bool>(),
        (0u64..4, 0u64..=1000),
        (0u64..64, 0u64..4, 0u64..3),
        any::<bool>(),
        0u32..4,
        any::<u64>(),
        (0u8..3, 0u64..4),
    )
        .prop_map(
            |(
                cfg,
                layout72,
                memory_type,
                shift,
                altmap,
                (reserve_units, split),
                (section, near, compounds),
                tracepoint,
                nid,
                addr_salt,
                (old_kernel, boot_sections),
            )| {
                // The preset's release, 6.12, or 6.1 (another page flag order and folio
                // layout, the DAX vmemmap optimization without the arch option).
                let cfg = match old_kernel {
                    1 => cfg.with_version(KernelVersion::V6_12),
                    2 => cfg.with_version(KernelVersion::V6_1),
                    _ => cfg,
                };
                let ppc = 1u64 << shift;
                // Number of compound pages: keep the 1 GiB case to one, small cases larger.
                let budget = if cfg!(miri) { 24 } else { 3000 };
                let count = if shift >= 12 {
                    1
                } else {
                    1 + (compounds * 997 + reserve_units * 131) % (budget / ppc).max(1)
                };
                let count = count.max(if altmap { reserve_units + 1 } else { 1 });
                // Start near a section boundary sometimes, aligned to the compound size.
                let sec = cfg.pages_per_section();
                let raw_start = section * sec
                    + if near == 0 { sec.saturating_sub((count / 2) * ppc) } else { near * 4096 };
                let start = (raw_start / ppc) * ppc;
                let nr = count * ppc;
                let mut pgmap = DevPagemap::new(memory_type).with_vmemmap_shift(shift);
                pgmap.addr += (addr_salt % 4096) * 64;
                if altmap {
                    // reserve + free is a whole number of compounds, split at random.
                    let offset = reserve_units.min(count - 1) * ppc;
                    let reserve = split.min(offset);
                    pgmap =
                        pgmap.with_altmap(VmemAltmap { base_pfn: start, reserve, free: offset - reserve });
                }
                let cfg = with_debug_page_ref(cfg);
                let nid = nid & cfg.flags_layout().unwrap().nodes_mask() as u32;
                Case {
                    cfg,
                    layout72,
                    // Boot memory up to 0-3 sections past the start: the first compound pages
                    // are then in early sections.
                    range: ZoneDeviceRange { nid, ..range(&cfg, start, nr) }.with_boot_memory_end(
                        if boot_sections == 0 { 0 } else { start + (boot_sections - 1) * sec + 1 },
                    ),
                    pgmap,
                    tracepoint,
                }
            },
        )
}

fn check<P: StructPage>(c: &Case) -> Result<(), TestCaseError> {
    // The reference: the slow path, without the tracepoint.
    let run = |opts: InitOptions, tracepoint: bool| {
        run_full::<P>(c.cfg, &c.range, &c.pgmap, opts, tracepoint, true)
    };
    let slow = run(InitOptions::new(Strategy::Slow), false).expect("valid case");
    prop_assert!(slow.guard_intact(&c.range), "slow path wrote outside the range");
    // With the tracepoint active every request runs the slow path (that is what is checked
    // then: the fallback, its reason, and that it emits the slow path's events); the bytes
    // are still compared with the reference, which shows the tracepoint changes none.
    let traced = c.tracepoint.then(|| run(InitOptions::new(Strategy::Slow), true).expect("valid case"));
    let options = [
        InitOptions::new(Strategy::Template),
        InitOptions::new(Strategy::Streaming),
        InitOptions::new(Strategy::Streaming).with_drains(DrainPolicy::Upstream),
        InitOptions::new(Strategy::Auto),
    ];
    for opts in options {
        let s = opts.fill.strategy;
        let fast = run(opts, c.tracepoint).expect("valid case");
        prop_assert!(fast.guard_intact(&c.range), "{s} wrote outside the range");
        if let Some(i) = (0..slow.pages.len()).find(|&i| slow.pages[i] != fast.pages[i]) {
            let pfn = slow.base_pfn + i as u64;
            return Err(TestCaseError::fail(format!(
                "{s}: struct page of pfn {pfn:#x} differs\n slow: {:?}\n fast: {:?}",
                slow.pages[i], fast.pages[i]
            )));
        }
        prop_assert_eq!(&slow.pageblocks, &fast.pageblocks, "{} pageblocks", s);
        prop_assert_eq!(&slow.resched, &fast.resched, "{} cond_resched calls", s);
        prop_assert_eq!(slow.report.nr_pages, fast.report.nr_pages);
        prop_assert_eq!(slow.report.pages_initialized, fast.report.pages_initialized);
        match &traced {
            Some(traced) => {
                prop_assert_eq!(
                    (fast.report.used, fast.report.reason),
                    (Strategy::Slow, StrategyReason::PageRefTracepoint),
                    "an active tracepoint must force the slow path"
                );
                prop_assert!(!traced.events.is_empty());
                prop_assert_eq!(&traced.events, &fast.events, "{} tracepoint events", s);
            }
            None => {
                prop_assert!(fast.events.is_empty());
                if s != Strategy::Auto {
                    prop_assert_eq!(fast.report.used, s, "the fast path ran");
                }
            }
        }
    }
    Ok(())
}

fn config() -> ProptestConfig {
    ProptestConfig { max_shrink_iters: 2000, ..support::sized(160, 4) }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn template_and_streaming_equal_slow(c in case()) {
        if c.layout72 { check::<Page72>(&c)?; } else { check::<Page64>(&c)?; }
    }
}

/// A deterministic sweep of the corners the random search could take long to hit: every memory
/// type × compound order 0/1/2/9 × altmap on/off × both layouts × every preset.
#[test]
fn corner_matrix_equal_slow() {
    // Under Miri (about 10^4 times slower) a representative slice of the matrix.
    let shifts: &[u32] = if cfg!(miri) { &[0, 2] } else { &[0, 1, 2, 9] };
    let presets: &[KernelConfig] =
        if cfg!(miri) { &[KernelConfig::X86_64_CLASSIC_SPARSE] } else { KernelConfig::ALL };
    let types: &[MemoryType] =
        if cfg!(miri) { &[MemoryType::FsDax, MemoryType::Generic] } else { MemoryType::ALL };
    let tracepoints: &[bool] = if cfg!(miri) { &[false] } else { &[false, true] };
    for &cfg in presets {
        for &ty in types {
            for &shift in shifts {
                for altmap in [false, true] {
                    for &tracepoint in tracepoints {
                        let ppc = 1u64 << shift;
                        // A range straddling a section boundary: compound pages of more
                        // than half a section (64 KiB pages: 256-page sections) have none.
                        let Some(start) = cfg.pages_per_section().checked_sub(2 * ppc.max(4)) else {
                            continue;
                        };
                        let nr = 4 * ppc.max(4);
                        let mut pgmap = DevPagemap::new(ty).with_vmemmap_shift(shift);
                        if altmap {
                            pgmap = pgmap.with_altmap(VmemAltmap {
                                base_pfn: start,
                                reserve: ppc.max(4) / 2,
                                free: ppc.max(4) / 2,
                            });
                        }
                        let c = Case {
                            cfg: with_debug_page_ref(cfg),
                            layout72: false,
                            range: range(&cfg, start, nr),
                            pgmap,
                            tracepoint,
                        };
                        check::<Page64>(&c).unwrap_or_else(|e| panic!("{c:?}: {e}"));
                        check::<Page72>(&c).unwrap_or_else(|e| panic!("{c:?}: {e}"));
                    }
                }
            }
        }
    }
}
