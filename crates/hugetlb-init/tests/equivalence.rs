//! The central property for hugetlb: Template, Streaming and Auto tail init produce the same
//! struct pages (raw storage and the vmemmap view), pageblocks, `cond_resched` calls, tracepoint
//! events and per-folio outcomes as the Slow path, and leave the guard struct pages and the
//! memory outside the folios untouched.
//!
//! Random: configuration preset (every preset: x86-64 with HVO, arm64 4 and 16 KiB without,
//! riscv64 with, ppc64el 4 and 64 KiB without, classic SPARSEMEM with PFN-dependent flags; and
//! arm64 with 64 KiB pages), CGROUP_HUGETLB, layout (64/72 bytes), hstate (any of the
//! configuration's, those of more than 8192 struct pages rarely: 1G, 16G and arm64 4K's 32M
//! too), number of nodes and pages per node, node ids, zone, HVO on/off/failing every n-th
//! folio (HVO forced on where the preset lacks it, half the time), tracepoint.
//! Every strategy also runs with the fallback tails spread over three threads within each node
//! (`BootParams::tail_threads`), which must give the same bytes, pageblocks, calls and events.

mod common;

use common::{Booted, boot_model, h1g, params};
use hugetlb_init::{
    BootParams, BootRequest, Hstate, Hstates, HvoFault, HvoParams, NodeSpec, PagesPerNode, TailPageOrigin,
};
use memmap_core::Named;
use memmap_core::{KernelConfig, Page64, Page72, Strategy, StrategyReason, StructPage};
use proptest::prelude::*;
use proptest::strategy::Strategy as _;
use stream_par::Threads;

#[derive(Debug, Clone)]
struct Case {
    cfg: KernelConfig,
    layout72: bool,
    hstate: Hstate,
    specs: Vec<NodeSpec>,
    counts: Vec<u64>,
    hvo: HvoParams,
    tracepoint: bool,
}

/// arm64 with 64 KiB pages (Debian builds none, so no preset): 512 MiB sections and
/// pageblocks, `MAX_PAGE_ORDER` 13; hstates 16G, 512M, 2M.
const ARM64_64K: KernelConfig = KernelConfig {
    name: "arm64-64k",
    page_shift: 16,
    section_size_bits: 29,
    pageblock_order: 13,
    max_page_order: 13,
    ..KernelConfig::ARM64
};

/// Folios of more struct pages than this are drawn rarely (1 GiB of 4 KiB pages is 262,144).
const BIG_FOLIO: u64 = 8192;

/// One of `cfg`'s hstates: the big ones (over [`BIG_FOLIO`] struct pages) when `big` and the
/// configuration has any, else a small one; `which` picks among them. Under Miri the smallest.
fn pick_hstate(cfg: &KernelConfig, big: bool, which: prop::sample::Index) -> Hstate {
    let all = Hstates::of(cfg);
    if cfg!(miri) {
        return all.iter().last().expect("every preset has an hstate");
    }
    let (large, small): (Vec<Hstate>, Vec<Hstate>) = all.iter().partition(|h| h.nr_pages() > BIG_FOLIO);
    let from = if big && !large.is_empty() { large } else { small };
    from[which.index(from.len())]
}

fn case() -> impl proptest::strategy::Strategy<Value = Case> {
    let max_count: u64 = if cfg!(miri) { 1 } else { 3 };
    let configs: Vec<KernelConfig> = KernelConfig::ALL.iter().copied().chain([ARM64_64K]).collect();
    (
        // Every preset's page size and architecture (4, 16 and 64 KiB pages), each with its
        // own hstates.
        prop::sample::select(configs),
        any::<bool>(),
        any::<bool>(),
        (0u32..8, any::<prop::sample::Index>()),
        prop::collection::vec((0..=max_count, 0u64..2, 0u32..3), 1..=if cfg!(miri) { 2 } else { 3 }),
        0u32..4,
        (0u32..3, 1u32..4),
        any::<bool>(),
        0u32..16,
        (0u8..3, any::<bool>(), any::<bool>()),
    )
        .prop_map(
            |(
                preset,
                cgroup,
                layout72,
                (big, which),
                nodes,
                zone,
                (hvo_kind, every),
                tracepoint,
                nid_base,
                (old, runtime, force_hvo),
            )| {
                // The preset's release, 6.12 or 6.1 (its flag bits and hugetlb `_folio_dtor`).
                let preset = match old {
                    1 => preset.with_version(memmap_core::KernelVersion::V6_12),
                    2 => preset.with_version(memmap_core::KernelVersion::V6_1),
                    _ => preset,
                };
                // HVO built in half the time where the preset lacks it (arm64, ppc64el: the
                // 16 and 64 KiB page arithmetic of HVO is checked on the model alone).
                let hugetlb_vmemmap = preset.hugetlb_vmemmap || force_hvo;
                let cfg =
                    KernelConfig { cgroup_hugetlb: cgroup, debug_page_ref: true, hugetlb_vmemmap, ..preset };
                let hstate = pick_hstate(&cfg, big == 0, which);
                let nr = hstate.nr_pages();
                let mut start = 1u64 << 20;
                // Distinct node ids the configuration has (3 is prime to every power of two),
                // and a zone below ZONE_DEVICE.
                let nids = (1u32 << cfg.nodes_shift).min(16);
                let zone = zone.min(cfg.zone_device() - 1);
                let mut specs = Vec::new();
                let mut counts = Vec::new();
                for (i, &(count, slack, misalign)) in nodes.iter().enumerate() {
                    // Some unaligned memory below and above, so top-down allocation has to align.
                    let lead = u64::from(misalign) * 100;
                    let pages = lead + (count + slack) * nr + u64::from(misalign) * 37;
                    specs.push(NodeSpec {
                        nid: (nid_base + 3 * i as u32) % nids,
                        zone,
                        start_pfn: start,
                        nr_pages: pages,
                    });
                    counts.push(count);
                    start += pages.div_ceil(nr) * nr + nr;
                }
                if counts.iter().all(|&c| c == 0) {
                    // At least one page: one more node, above the others, holding exactly one.
                    let nid = (nid_base + 3 * specs.len() as u32) % nids;
                    specs.push(NodeSpec { nid, zone, start_pfn: start, nr_pages: nr });
                    counts.push(1);
                }
                let tail_page = if runtime { TailPageOrigin::Runtime } else { TailPageOrigin::Boot };
                let hvo = match hvo_kind {
                    0 => HvoParams { boot_option: true, fault: HvoFault::None, tail_page },
                    1 => HvoParams { boot_option: false, fault: HvoFault::None, tail_page },
                    _ => HvoParams { boot_option: true, fault: HvoFault::PageTable { every }, tail_page },
                };
                Case { cfg, layout72, hstate, specs, counts, hvo, tracepoint }
            },
        )
}

fn compare<P: StructPage>(slow: &Booted<P>, fast: &Booted<P>, s: Strategy) -> Result<(), TestCaseError> {
    fast.untouched_outside_folios().map_err(|e| TestCaseError::fail(format!("{s}: {e}")))?;
    for (a, b) in slow.nodes.iter().zip(&fast.nodes) {
        if let Some(i) = (0..a.raw.len()).find(|&i| a.raw[i] != b.raw[i]) {
            return Err(TestCaseError::fail(format!(
                "{s}: struct page of pfn {:#x} differs\n slow: {:?}\n fast: {:?}",
                a.base + i as u64,
                a.raw[i],
                b.raw[i]
            )));
        }
        prop_assert!(a.view == b.view, "{} vmemmap view differs", s);
        prop_assert_eq!(&a.pageblocks, &b.pageblocks, "{} pageblocks", s);
        prop_assert_eq!(&a.resched, &b.resched, "{} cond_resched", s);
    }
    for (a, b) in slow.records.iter().zip(&fast.records) {
        prop_assert_eq!((a.head_pfn, a.nid, a.hstate, a.flags), (b.head_pfn, b.nid, b.hstate, b.flags));
        prop_assert_eq!(a.outcome.hvo, b.outcome.hvo);
        prop_assert_eq!(a.outcome.fallback.map(|f| f.pages), b.outcome.fallback.map(|f| f.pages));
    }
    Ok(())
}

fn check<P: StructPage>(c: &Case) -> Result<(), TestCaseError> {
    let req = BootRequest { hstate: c.hstate, pages: PagesPerNode::Each(&c.counts) };
    // The reference: the slow path without the tracepoint. With the tracepoint active every
    // request runs the slow path; then what is checked is the fallback and its events (the
    // bytes are still compared, which shows the tracepoint changes none).
    let slow = boot_model::<P>(c.cfg, &c.specs, &req, &params(Strategy::Slow, c.hvo), false)
        .map_err(|(e, _)| TestCaseError::fail(format!("slow boot failed: {e}")))?;
    slow.untouched_outside_folios().map_err(TestCaseError::fail)?;
    let traced = if c.tracepoint {
        Some(
            boot_model::<P>(c.cfg, &c.specs, &req, &params(Strategy::Slow, c.hvo), true)
                .map_err(|(e, _)| TestCaseError::fail(format!("traced slow boot failed: {e}")))?,
        )
    } else {
        None
    };
    let runs = [Strategy::Template, Strategy::Streaming, Strategy::Auto, Strategy::Slow]
        .into_iter()
        .flat_map(|s| [(s, Threads::One), (s, Threads::Fixed(3))])
        .filter(|&(s, t)| s != Strategy::Slow || t != Threads::One);
    for (s, threads) in runs {
        let p = BootParams { tail_threads: threads, ..params(s, c.hvo) };
        let fast = boot_model::<P>(c.cfg, &c.specs, &req, &p, c.tracepoint).map_err(|(e, _)| {
            TestCaseError::fail(format!("{s} ({threads} tail threads) boot failed: {e}"))
        })?;
        compare(&slow, &fast, s)?;
        match &traced {
            Some(traced) => {
                if let Some((used, reason)) = fast.report.fallback_strategy {
                    let why = if s == Strategy::Slow {
                        StrategyReason::Requested
                    } else {
                        StrategyReason::PageRefTracepoint
                    };
                    prop_assert_eq!((used, reason), (Strategy::Slow, why));
                }
                for (a, b) in traced.nodes.iter().zip(&fast.nodes) {
                    prop_assert_eq!(&a.events, &b.events, "{} tracepoint events", s);
                }
            }
            None => {
                prop_assert!(fast.nodes.iter().all(|n| n.events.is_empty()));
                if let Some((used, _)) = fast.report.fallback_strategy {
                    if s != Strategy::Auto {
                        prop_assert_eq!(used, s, "the fast path ran");
                    }
                }
            }
        }
    }
    Ok(())
}

fn config() -> ProptestConfig {
    ProptestConfig {
        // Under Miri one case (each runs the slow, template and streaming tails; about 110 s).
        cases: if cfg!(miri) { 1 } else { env_cases(48) },
        max_shrink_iters: 500,
        // Miri's isolation forbids the file system (getcwd) that failure persistence needs.
        failure_persistence: if cfg!(miri) { None } else { ProptestConfig::default().failure_persistence },
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn template_and_streaming_tails_equal_slow(c in case()) {
        if c.layout72 { check::<Page72>(&c)?; } else { check::<Page64>(&c)?; }
    }
}

/// `PROPTEST_CASES` from the environment (CI lowers it under emulation), else `default`.
fn env_cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The parallel tail init really splits: two 1 GiB folios without HVO, streamed on two threads,
/// drain once per section-sized piece (16) instead of once per folio (2) in the fallback, with
/// the same bytes (the gather's own tails 1..64 drain once per folio in both). Not under Miri:
/// a million struct pages (the property test above covers threaded tails there on 2 MiB folios).
#[test]
#[cfg_attr(miri, ignore)]
fn tail_threads_split_gigantic_folios() {
    let cfg = KernelConfig::X86_64;
    let h = h1g();
    let specs = [NodeSpec { nid: 0, zone: 2, start_pfn: 1 << 20, nr_pages: 2 * h.nr_pages() }];
    let req = BootRequest { hstate: h, pages: PagesPerNode::Each(&[2]) };
    let hvo = HvoParams { boot_option: false, fault: HvoFault::None, tail_page: TailPageOrigin::Boot };
    let one = boot_model::<Page64>(cfg, &specs, &req, &params(Strategy::Streaming, hvo), false).unwrap();
    let par = boot_model::<Page64>(
        cfg,
        &specs,
        &req,
        &BootParams { tail_threads: Threads::Fixed(2), ..params(Strategy::Streaming, hvo) },
        false,
    )
    .unwrap();
    assert_eq!(one.report.drains, 2 + 2);
    assert_eq!(par.report.drains, 2 + 16);
    assert_eq!(one.report.fallback_pages, par.report.fallback_pages);
    assert!(one.nodes[0].raw == par.nodes[0].raw && one.nodes[0].pageblocks == par.nodes[0].pageblocks);
}
