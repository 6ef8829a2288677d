//! `memmap_init_zone_device_parallel` is byte-identical to the one-thread
//! `memmap_init_zone_device`: struct pages (and the guard pages around the range), pageblock
//! bits, the multiset of `cond_resched` PFNs (and, before 7.2, their sequence in PFN order),
//! the report; with the tracepoint active it runs on one thread and emits the same events.
//!
//! Random: every preset, kernel 6.12 or 7.2, 64/72-byte layout, memory type, compound order
//! 0/1/9/18, altmap, early sections, 2 to 6 sections long (so the job really splits), 2 to 5
//! threads, every strategy.
#![cfg(not(miri))]

mod support;

use memmap_core::Named;
use memmap_core::{
    DevPagemap, InitOptions, KernelConfig, KernelVersion, Memmap, MemoryType, Page64, Page72, RecordingHooks,
    Strategy, StructPage, VmemAltmap, ZoneDeviceRange, memmap_init_zone_device,
    memmap_init_zone_device_parallel, move_pfn_range_to_zone, pageblocks_needed,
};
use proptest::prelude::*;
use proptest::strategy::Strategy as _;
use stream_par::Threads;
use support::{guard_page, range, with_debug_page_ref};

#[derive(Debug, Clone)]
struct Case {
    cfg: KernelConfig,
    range: ZoneDeviceRange,
    pgmap: DevPagemap,
    strategy: Strategy,
    threads: usize,
    tracepoint: bool,
    layout72: bool,
}

const GUARD: u64 = 8;

struct Out<P> {
    pages: Vec<P>,
    pageblocks: Vec<u8>,
    resched: Vec<u64>,
    events: usize,
    pages_initialized: u64,
    used: Strategy,
    threads: usize,
}

fn run<P: StructPage>(c: &Case, threads: Option<usize>) -> Out<P> {
    let base = c.range.start_pfn - GUARD;
    let n = c.range.nr_pages + 2 * GUARD;
    let mut pages = vec![guard_page::<P>(); n as usize];
    let mut pageblocks = vec![0u8; pageblocks_needed(&c.cfg, base, n)];
    let opts = InitOptions::new(c.strategy);
    let (resched, events, report, used_threads) = {
        let mut m = Memmap::new(c.cfg, base, &mut pages, &mut pageblocks).expect("memmap");
        let mut hot = RecordingHooks::new(c.tracepoint);
        move_pfn_range_to_zone(&mut m, &c.range, &c.pgmap, &opts, &mut hot).expect("valid altmap part");
        let mut resched = hot.resched_pfns;
        let mut events = hot.page_ref_events.len();
        match threads {
            None => {
                let mut h = RecordingHooks::new(c.tracepoint);
                let r = memmap_init_zone_device(&mut m, &c.range, &c.pgmap, &opts, &mut h).expect("valid");
                resched.extend(h.resched_pfns);
                events += h.page_ref_events.len();
                (resched, events, r, 1)
            }
            Some(t) => {
                let p = memmap_init_zone_device_parallel(
                    &mut m,
                    &c.range,
                    &c.pgmap,
                    &opts,
                    Threads::Fixed(t),
                    |_, _| RecordingHooks::new(c.tracepoint),
                )
                .expect("valid");
                let mut prev_end = 0;
                for ((s, e), h) in p.chunks {
                    assert!(s >= prev_end && s < e, "chunks in PFN order");
                    prev_end = e;
                    assert!(h.resched_pfns.iter().all(|&x| (s..e).contains(&x)), "resched outside its chunk");
                    resched.extend(h.resched_pfns);
                    events += h.page_ref_events.len();
                }
                (resched, events, p.report, p.threads)
            }
        }
    };
    Out {
        pages,
        pageblocks,
        resched,
        events,
        pages_initialized: report.pages_initialized,
        used: report.used,
        threads: used_threads,
    }
}

fn check<P: StructPage>(c: &Case) -> Result<(), TestCaseError> {
    let one = run::<P>(c, None);
    let par = run::<P>(c, Some(c.threads));
    if let Some(i) = (0..one.pages.len()).find(|&i| one.pages[i] != par.pages[i]) {
        return Err(TestCaseError::fail(format!(
            "struct page {i} of the view differs\n one: {:?}\n par: {:?}",
            one.pages[i], par.pages[i]
        )));
    }
    prop_assert_eq!(&one.pageblocks, &par.pageblocks);
    prop_assert_eq!(one.pages_initialized, par.pages_initialized);
    prop_assert_eq!(one.used, par.used);
    prop_assert_eq!(one.events, par.events);
    let traced = c.tracepoint && c.cfg.debug_page_ref;
    if traced {
        prop_assert_eq!(par.threads, 1, "an active tracepoint keeps the job on one thread");
        prop_assert_eq!(&one.resched, &par.resched);
    } else {
        let align = c.cfg.pages_per_section().max(c.pgmap.vmemmap_nr());
        let span = c.range.nr_pages - c.pgmap.altmap.map_or(0, |a| a.offset());
        if span >= 2 * align {
            prop_assert!(par.threads >= 2, "{} PFNs on {} threads ran on one", span, c.threads);
        }
        if c.cfg.behaviour().zone_device_pageblock_range {
            let (mut a, mut b) = (one.resched.clone(), par.resched.clone());
            a.sort_unstable();
            b.sort_unstable();
            prop_assert_eq!(a, b, "cond_resched multiset");
        } else {
            prop_assert_eq!(&one.resched, &par.resched, "cond_resched sequence");
        }
    }
    Ok(())
}

fn case() -> impl proptest::strategy::Strategy<Value = Case> {
    (
        prop::sample::select(KernelConfig::ALL.to_vec()),
        prop::sample::select(vec![None, Some(KernelVersion::V6_12), Some(KernelVersion::V6_1)]),
        prop::sample::select(MemoryType::ALL.to_vec()),
        prop::sample::select(vec![0u32, 1, 9, 18]),
        (2u64..=6, 0u64..3),
        (any::<bool>(), 0u64..4, 0u64..4),
        prop::sample::select(vec![Strategy::Slow, Strategy::Template, Strategy::Streaming, Strategy::Auto]),
        (2usize..=5, any::<bool>(), any::<bool>()),
    )
        .prop_map(
            |(
                cfg,
                old,
                ty,
                shift,
                (sections, offset),
                (altmap, units, boot),
                strategy,
                (threads, tp, l72),
            )| {
                let cfg = with_debug_page_ref(old.map_or(cfg, |v| cfg.with_version(v)));
                let sec = cfg.pages_per_section();
                let ppc = 1u64 << shift;
                // Start at a section boundary or a few compound pages before one.
                let start = (16 * sec.max(ppc) - offset * ppc.max(512)) / ppc * ppc;
                let nr = (sections * sec).div_ceil(ppc).max(2) * ppc;
                let mut pgmap = DevPagemap::new(ty).with_vmemmap_shift(shift);
                if altmap && units > 0 {
                    let off = units * ppc.max(64);
                    let off = off.min(nr - ppc) / ppc * ppc;
                    pgmap = pgmap.with_altmap(VmemAltmap {
                        base_pfn: start,
                        reserve: off / 2,
                        free: off - off / 2,
                    });
                }
                let r =
                    range(&cfg, start, nr).with_boot_memory_end(if boot >= 2 { start + sec / 2 } else { 0 });
                Case { cfg, range: r, pgmap, strategy, threads, tracepoint: tp, layout72: l72 }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { max_shrink_iters: 200, ..support::sized(48, 2) })]

    #[test]
    fn parallel_zone_device_init_equals_one_thread(c in case()) {
        if c.layout72 { check::<Page72>(&c)?; } else { check::<Page64>(&c)?; }
    }
}

#[test]
fn one_thread_policy_is_the_one_thread_function() {
    let cfg = KernelConfig::X86_64;
    let c = Case {
        cfg,
        range: range(&cfg, 1 << 20, 4 * 32768),
        pgmap: DevPagemap::new(MemoryType::Generic).with_vmemmap_shift(9),
        strategy: Strategy::Streaming,
        threads: 1,
        tracepoint: false,
        layout72: false,
    };
    let one = run::<Page64>(&c, None);
    let par = run::<Page64>(&c, Some(1));
    assert_eq!(par.threads, 1);
    assert!(one.pages == par.pages && one.resched == par.resched);
}
