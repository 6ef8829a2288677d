//! Boot-time gigantic pages and HVO: what the head, the reserved tails and the fallback tails
//! hold after the boot, for 2 MiB and 1 GiB pages (2 MiB only under Miri), with HVO on, off and
//! failing, plus the typed errors and the HVO availability rules.

use super::common::{
    self, Booted, NOINIT_WORD, boot_model, h1g, h2m, hstates, is_filled, packed, params, vaddr,
};
use hugetlb_init::boot::{gather_bootmem_prealloc, hugetlb_bootmem_alloc};
use hugetlb_init::folio::HPG_VMEMMAP_OPTIMIZED;
use hugetlb_init::folio::{hugetlb_folio_init_vmemmap, reserve_bootmem_head};
use hugetlb_init::{
    BootRequest, Hstate, HugeBootmemPage, HugetlbError, HugetlbNode, HvoError, HvoFault, HvoMode, HvoOutcome,
    HvoParams, ModelRemap, NodeSpec, PagesPerNode,
};
use memmap_core::{
    FillOptions, InitHooks, KernelConfig, Memmap, MigrateType, NoHooks, PG, Page64, PageType, Strategy,
    StructPage, pageblocks_needed,
};
use memmap_core::{Named, offsets};
#[allow(unused_imports)] // the std prelude, for the unit-test build of a no_std crate
use std::{borrow::ToOwned, boxed::Box, format, string::String, string::ToString, vec, vec::Vec};

pub(super) const STRATEGIES: [Strategy; 3] = [Strategy::Slow, Strategy::Template, Strategy::Streaming];

pub(super) fn cfg() -> KernelConfig {
    KernelConfig::X86_64
}

/// Boots `count` pages per node on `nodes` nodes.
pub(super) fn run<P: StructPage>(
    cfg: KernelConfig,
    h: Hstate,
    nodes: u32,
    count: u64,
    s: Strategy,
    hvo: HvoMode,
) -> Booted<P> {
    // In the configuration's ZONE_NORMAL (ppc64el has no DMA zones).
    let specs: Vec<NodeSpec> =
        packed(h, nodes, count).into_iter().map(|s| NodeSpec { zone: cfg.zone_normal(), ..s }).collect();
    let b = boot_model::<P>(cfg, &specs, &BootRequest::per_node(h, count), &params(s, hvo.params()), false)
        .unwrap_or_else(|(e, _)| panic!("boot failed: {e}"));
    b.untouched_outside_folios().unwrap();
    b
}

/// Every (hstate, HVO mode, strategy) combination: two nodes with two 2 MiB folios each, or one
/// node with one 1 GiB folio (to keep the debug build fast).
fn each_case(mut f: impl FnMut(Hstate, HvoMode, Strategy, &Booted<Page64>)) {
    for h in hstates() {
        for &hvo in HvoMode::ALL {
            for s in STRATEGIES {
                // Miri: one 2 MiB folio per case.
                let small = h == h1g() || cfg!(miri);
                let b = if small { run(cfg(), h, 1, 1, s, hvo) } else { run(cfg(), h, 2, 2, s, hvo) };
                f(h, hvo, s, &b);
            }
        }
    }
}

// ------------------------------------------------------------------- the folios' struct pages

/// "After boot, the head of a bootmem gigantic page has `_refcount == 0`, PG_reserved clear,
/// PG_head set, and hugetlb page_type (`PGTY_hugetlb << 24` in `page_type`)." It is on its
/// node's free list (`enqueue_hugetlb_folio`): the folios of a node in PFN order between the
/// list head, as Linux 6.12 and 7.2 leave them, with `HPG_freed`.
#[test]
fn head_refcount_0_not_reserved_head_hugetlb_type() {
    each_case(|h, hvo, s, b| {
        for (i, r) in b.records.iter().enumerate() {
            let head = b.page(r.head_pfn);
            let what = format!("{h} {hvo:?} {s} head {:#x}", r.head_pfn);
            assert_eq!(head.refcount(), 0, "{what}");
            assert!(!head.test_flag(PG::RESERVED), "{what}");
            assert!(head.test_flag(PG::HEAD), "{what}");
            assert_eq!(head.page_type(), PageType::word(PageType::HUGETLB), "{what}");
            assert_eq!(head.page_type(), 0xf400_0000, "{what}");
            // The free list: head -> folios of the node in PFN order -> head.
            let list_head = hugetlb_init::hugepage_freelist_addr(h, r.nid);
            let lru = |pfn: u64| vaddr::<Page64>(&b.cfg, pfn) + 8;
            let same_node = |j: usize| b.records.get(j).filter(|o| o.nid == r.nid);
            let next = i.checked_add(1).and_then(same_node).map_or(list_head, |o| lru(o.head_pfn));
            let prev = i.checked_sub(1).and_then(same_node).map_or(list_head, |o| lru(o.head_pfn));
            assert_eq!(
                (head.u64_at(offsets::LRU_NEXT), head.u64_at(offsets::LRU_PREV)),
                (next, prev),
                "{what}"
            );
            assert_eq!(
                head.u64_at(offsets::PRIVATE) >> hugetlb_init::folio::HPG_FREED & 1,
                1,
                "{what}: HPG_freed"
            );
            let l = b.cfg.flags_layout().unwrap();
            assert_eq!(l.node(head.flags()), r.nid, "{what}");
            assert_eq!(l.zone(head.flags()), hugetlb_init::bootmem::ZONE_NORMAL, "{what}");
            // folio->private: HPG_vmemmap_optimized exactly when HVO optimized the folio.
            assert_eq!(
                head.u64_at(offsets::PRIVATE) >> HPG_VMEMMAP_OPTIMIZED & 1 == 1,
                r.outcome.optimized(),
                "{what}"
            );
            assert_eq!(r.outcome.optimized(), hvo == HvoMode::On, "{what}");
        }
    });
}

/// Checks one tail `idx` of the folio at `head` against the tail invariants (docs/kernel-model.md) and the folio
/// overlay of page\[1..3\].
pub(super) fn check_tail<P: StructPage>(b: &Booted<P>, head: u64, h: Hstate, idx: u64) -> Result<(), String> {
    let cfg = b.cfg;
    let l = cfg.flags_layout().unwrap();
    let hp = b.page(head);
    let p = b.page(head + idx);
    let va = |pfn: u64| vaddr::<P>(&cfg, pfn);
    let err = |what: &str| Err(format!("tail {idx} of {head:#x} ({h}): {what}: {p:?}"));
    if l.zone(p.flags()) != l.zone(hp.flags()) || l.node(p.flags()) != l.node(hp.flags()) {
        return err("zone/nid differ from the head's");
    }
    if p.test_flag(PG::HEAD) || p.test_flag(PG::RESERVED) {
        return err("PG_head or PG_reserved on a tail");
    }
    // Linux 7.1+ with HVO built in: the mask GENMASK(63, order + log2(sizeof(struct page))) | 1
    // that turns the tail's own address into the head's; before (and without HVO): head | 1.
    let want = if cfg.behaviour().compound_info_mask && P::SIZE == 64 {
        (u64::MAX << (h.order() + 6)) | 1
    } else {
        va(head) + 1
    };
    if p.compound_head() != want {
        return err("compound_head is not the compound_info of the head");
    }
    if cfg.compound_head_of(p.compound_head(), va(head + idx), P::SIZE) != Some(va(head)) {
        return err("compound_head does not lead to the head");
    }
    if p.refcount() != 0 {
        return err("_refcount != 0");
    }
    if p.mapcount() != -1 {
        return err("_mapcount != -1");
    }
    if p.u64_at(offsets::PRIVATE) != 0 {
        return err("private != 0");
    }
    let expect_mapping = match idx {
        // _entire_mapcount = -1 (low half), _pincount = 0 (high half).
        1 => u64::from(u32::MAX),
        // _deferred_list.prev (6.18+ order: prep_compound_head after the tails).
        2 => va(head + 2) + 16,
        // _hugetlb_cgroup = NULL under CONFIG_CGROUP_HUGETLB.
        3 if cfg.cgroup_hugetlb => 0,
        _ => cfg.tail_mapping(),
    };
    if p.u64_at(offsets::MAPPING) != expect_mapping {
        return err("mapping");
    }
    let expect_word16 = match idx {
        // _large_mapcount = -1, _nr_pages_mapped = 0.
        1 => u64::from(u32::MAX),
        2 => va(head + 2) + 16,
        // _hugetlb_subpool = NULL.
        3 => 0,
        // INIT_LIST_HEAD(&page->lru).prev survives prep_compound_tail().
        _ => va(head + idx) + 8,
    };
    if p.u64_at(offsets::LRU_PREV) != expect_word16 {
        return err("word 16");
    }
    let expect_index = if idx == 1 && cfg.mm_id { u64::MAX } else { 0 };
    if p.u64_at(offsets::INDEX) != expect_index {
        return err("index");
    }
    let expect_memcg = if idx == 1 && cfg.nr_pages_in_large_folio { 1u64 << h.order() } else { 0 };
    if p.u64_at(offsets::MEMCG_DATA) & 0xffff_ffff != expect_memcg {
        return err("memcg_data / _nr_pages");
    }
    if idx == 1 && p.flags() & 0xff != u64::from(h.order()) {
        return err("page[1] order");
    }
    if let Some(v) = p.virtual_address() {
        if v != cfg.pfn_to_virt(head + idx) {
            return err("virtual");
        }
    }
    Ok(())
}

/// "Tails 1..63 always have: zone/nid equal to the head's; `compound_head == head|1`;
/// `mapping == TAIL_MAPPING`, except on page\[1\]–page\[3\] (page\[3\].mapping becomes
/// `_hugetlb_cgroup = NULL` under CGROUP_HUGETLB); `private == 0`; `_refcount == 0`;
/// `_mapcount == -1`."
#[test]
fn tails_1_to_63_always_initialized() {
    each_case(|h, hvo, s, b| {
        for r in &b.records {
            for idx in 1..64 {
                check_tail(b, r.head_pfn, h, idx).unwrap_or_else(|e| panic!("{hvo:?} {s}: {e}"));
            }
        }
    });
}

/// Without CGROUP_HUGETLB page\[3\].mapping stays TAIL_MAPPING (the cgroup fields do not
/// exist).
#[test]
fn page3_mapping_without_cgroup_hugetlb_is_tail_mapping() {
    let cfg = KernelConfig { cgroup_hugetlb: false, ..cfg() };
    for s in STRATEGIES {
        let b = run::<Page64>(cfg, h2m(), 1, 1, s, HvoMode::Off);
        let head = b.records[0].head_pfn;
        assert_eq!(b.page(head + 3).u64_at(offsets::MAPPING), cfg.tail_mapping());
        check_tail(&b, head, h2m(), 3).unwrap();
    }
}

/// "Without HVO, the same holds for tails 64..nr-1."
#[test]
fn without_hvo_every_tail_is_initialized() {
    each_case(|h, hvo, s, b| {
        if hvo == HvoMode::On {
            return;
        }
        for r in &b.records {
            assert!(!r.outcome.optimized());
            let fb = r.outcome.fallback.expect("fallback ran");
            assert_eq!(fb.pages, h.nr_pages() - 64, "{s}");
            for idx in 64..h.nr_pages() {
                check_tail(b, r.head_pfn, h, idx).unwrap_or_else(|e| panic!("{hvo:?} {s}: {e}"));
            }
        }
    });
}

/// With HVO no struct page beyond the head vmemmap page's 64 is written by the init code (the
/// storage keeps the fill it had), and the fallback does not run. That the MMU then shows
/// struct page `64 * k + j` as struct page `j` (Linux 6.x) or as slot `j` of the node's shared
/// tail page (7.1+) is checked on a real remapped vmemmap in `real_hvo.rs`; the model's view is
/// compared with that real one there too. From 7.1 the model keeps the shared tail page in
/// vmemmap page 1 of one folio per node and hstate (freed memory in the kernel).
#[test]
fn with_hvo_tails_beyond_the_head_vmemmap_page_are_never_written() {
    each_case(|h, hvo, s, b| {
        if hvo != HvoMode::On {
            return;
        }
        let shared = b.cfg.behaviour().hvo_shared_tail;
        let mut holders = std::collections::BTreeMap::<u32, u32>::new();
        for r in &b.records {
            assert!(matches!(r.outcome.hvo, HvoOutcome::Optimized { .. }), "{s}");
            assert_eq!(r.outcome.fallback, None, "{s}: the fallback must not run on an optimized folio");
            if shared && !is_filled(&b.raw(r.head_pfn + 64), NOINIT_WORD) {
                *holders.entry(r.nid).or_default() += 1;
            }
            for idx in 64..h.nr_pages() {
                if shared && idx < 128 {
                    continue;
                }
                let pfn = r.head_pfn + idx;
                assert!(
                    is_filled(&b.raw(pfn), NOINIT_WORD),
                    "{s}: tail {idx} (pfn {pfn:#x}) of an optimized folio was written"
                );
            }
            // The 64 struct pages of the head vmemmap page were all written.
            assert!((0..64).all(|idx| !is_filled(&b.raw(r.head_pfn + idx), NOINIT_WORD)));
        }
        assert!(holders.values().all(|&n| n == 1), "{s}: one shared tail page per node: {holders:?}");
    });
}

/// HVO failing (injected page-table allocation failure) runs the fallback and leaves exactly the
/// bytes, pageblocks and hook calls of a boot with `hugetlb_free_vmemmap=off`.
#[test]
fn failed_hvo_produces_the_bytes_of_a_boot_without_hvo() {
    for h in hstates() {
        for s in STRATEGIES {
            let (nodes, count) = if h == h1g() || cfg!(miri) { (1, 1) } else { (2, 3) };
            let off = run::<Page64>(cfg(), h, nodes, count, s, HvoMode::Off);
            let fail = run::<Page64>(cfg(), h, nodes, count, s, HvoMode::Fail);
            for r in &fail.records {
                assert_eq!(r.outcome.hvo, HvoOutcome::Failed(HvoError::NoMemory));
            }
            assert_eq!(fail.report.hvo_failed, fail.records.len() as u64);
            for (a, b) in off.nodes.iter().zip(&fail.nodes) {
                assert!(a.raw == b.raw, "{h} {s}: struct pages differ");
                assert_eq!(a.pageblocks, b.pageblocks);
                assert_eq!(a.resched, b.resched);
            }
        }
    }
}

/// Only some folios failing: those fall back, the others are optimized, per node list position.
#[test]
fn partial_hvo_failure_falls_back_per_folio() {
    let p = params(
        Strategy::Template,
        HvoParams { fault: HvoFault::PageTable { every: 2 }, ..HvoMode::On.params() },
    );
    let b = boot_model::<Page64>(cfg(), &packed(h2m(), 2, 3), &BootRequest::per_node(h2m(), 3), &p, false)
        .unwrap();
    // folio_list is built with list_add(): list position 0 is the last folio processed.
    for node in b.records.chunks(3) {
        let opt: Vec<bool> = node.iter().map(|r| r.outcome.optimized()).collect();
        assert_eq!(opt, [false, true, false]);
    }
    let shared = b.cfg.behaviour().hvo_shared_tail;
    let l = b.cfg.flags_layout().unwrap();
    for r in &b.records {
        let first_optimized = b.records.iter().find(|o| o.nid == r.nid && o.outcome.optimized());
        for idx in 1..h2m().nr_pages() {
            if r.outcome.optimized() && idx >= 64 {
                let p = b.page(r.head_pfn + idx);
                if shared {
                    // One shared tail page per node: every optimized folio reads the same
                    // `init_compound_tail()` struct pages.
                    let other = first_optimized.unwrap().head_pfn + idx;
                    assert_eq!(p, b.page(other));
                    assert_eq!(p.compound_head(), 0xffff_ffff_ffff_8001);
                    assert_eq!(
                        (p.u64_at(offsets::MAPPING), p.u64_at(offsets::PRIVATE), p.mapcount()),
                        (b.cfg.tail_mapping(), 0, -1)
                    );
                    assert_eq!(
                        (l.node(p.flags()), l.zone(p.flags())),
                        (r.nid, hugetlb_init::bootmem::ZONE_NORMAL)
                    );
                } else {
                    assert_eq!(p, b.page(r.head_pfn + idx % 64));
                }
            } else {
                check_tail(&b, r.head_pfn, h2m(), idx).unwrap();
            }
        }
    }
    assert_eq!((b.report.optimized, b.report.hvo_failed, b.report.fallback_folios), (2, 4, 4));
}

/// A failed head-copy allocation does not make HVO fail (the current head page is reused).
#[test]
fn failed_head_copy_allocation_still_optimizes() {
    let p =
        params(Strategy::Slow, HvoParams { fault: HvoFault::HeadCopy { every: 1 }, ..HvoMode::On.params() });
    let b = boot_model::<Page64>(cfg(), &packed(h2m(), 1, 2), &BootRequest::per_node(h2m(), 2), &p, false)
        .unwrap();
    for r in &b.records {
        assert_eq!(r.outcome.hvo, HvoOutcome::Optimized { head_copied: false, freed_pages: 7 });
    }
}

/// "The head must be initialized by the generic code before the tails, because tails read the
/// zone and nid from it." The tails take zone and node from the head's flags, whatever the
/// node says; and a gather over heads that did not come from the reserved-region path is
/// refused before anything is written.
#[test]
fn head_is_initialized_first_and_tails_read_zone_and_nid_from_it() {
    let cfg = cfg();
    let l = cfg.flags_layout().unwrap();
    let spec = NodeSpec::packed(0, h2m(), 1);
    for s in STRATEGIES {
        let mut pages = vec![common::filled::<Page64>(NOINIT_WORD); spec.nr_pages as usize];
        let mut pb = vec![0; pageblocks_needed(&cfg, spec.start_pfn, spec.nr_pages)];
        let mut m = Memmap::new(cfg, spec.start_pfn, &mut pages, &mut pb).unwrap();
        let head = spec.start_pfn;
        // A head in ZONE_DMA32 of node 5: the tails follow it.
        reserve_bootmem_head(&mut m, head, 1, 5, &mut NoHooks);
        assert_eq!((m.read(head).refcount(), m.read(head).test_flag(PG::RESERVED)), (1, true));
        hugetlb_folio_init_vmemmap(&mut m, head, h2m(), 64, &FillOptions::new(s), &mut NoHooks);
        for pfn in head + 1..head + 64 {
            let f = m.read(pfn).flags();
            assert_eq!((l.zone(f), l.node(f)), (1, 5), "{s}: tail {pfn:#x}");
        }
    }
    // Gather without the reserved heads: refused, nothing written.
    let mut pages = vec![common::filled::<Page64>(NOINIT_WORD); spec.nr_pages as usize];
    let mut pb = vec![0; pageblocks_needed(&cfg, spec.start_pfn, spec.nr_pages)];
    let before = pages.clone();
    {
        let m = Memmap::new(cfg, spec.start_pfn, &mut pages, &mut pb).unwrap();
        let mut nodes = [HugetlbNode::new(spec, m, ModelRemap::default(), NoHooks)];
        let mut rec = [HugeBootmemPage::EMPTY; 1];
        let req = BootRequest::per_node(h2m(), 1);
        assert_eq!(hugetlb_bootmem_alloc(&nodes, &req, &mut rec), Ok(1));
        let err =
            gather_bootmem_prealloc(&mut nodes, &mut rec, &params(Strategy::Slow, HvoMode::On.params()));
        assert_eq!(err, Err(HugetlbError::HeadNotReserved { pfn: spec.start_pfn }));
    }
    assert!(pages == before, "a refused gather wrote struct pages");
}

/// "`prep_compound_head` runs last, and only after the head's PG_head is set." If it ran before
/// the tails, their initialization would wipe the folio words of page\[1\] and page\[2\]; if
/// PG_head were not set, `folio_set_order()` would not store the order.
#[test]
fn prep_compound_head_runs_last_after_pg_head() {
    each_case(|h, hvo, s, b| {
        for r in &b.records {
            let p1 = b.page(r.head_pfn + 1);
            let p2 = b.page(r.head_pfn + 2);
            let what = format!("{h} {hvo:?} {s}");
            assert_eq!(p1.flags() & 0xff, u64::from(h.order()), "{what}: order (PG_head set first)");
            assert_eq!(
                p1.u64_at(offsets::MAPPING),
                u64::from(u32::MAX),
                "{what}: _entire_mapcount/_pincount survived"
            );
            assert_eq!(p1.u32_at(16), u32::MAX, "{what}: _large_mapcount");
            let list = vaddr::<Page64>(&b.cfg, r.head_pfn + 2) + 16;
            assert_eq!(
                (p2.u64_at(offsets::LRU_PREV), p2.u64_at(offsets::MAPPING)),
                (list, list),
                "{what}: _deferred_list self-pointers"
            );
        }
    });
}

/// "Every MOVABLE pageblock of the gigantic page is set (`hugetlb_bootmem_init_migratetype`)."
/// Pageblocks outside the folios stay unset.
#[test]
fn every_pageblock_of_every_folio_is_movable() {
    each_case(|_, hvo, s, b| {
        let pb = b.cfg.pageblock_nr_pages();
        for n in &b.nodes {
            let mut pfn = n.base & !(pb - 1);
            while pfn < n.base + n.raw.len() as u64 {
                let probe = pfn.max(n.base);
                let expect = if b.in_folio(probe) {
                    MigrateType::Movable.value()
                } else {
                    memmap_core::PAGEBLOCK_UNSET
                };
                assert_eq!(b.pageblock(probe), expect, "{hvo:?} {s}: pageblock at {pfn:#x}");
                pfn += pb;
            }
        }
    });
}

/// Hooks that record which thread gathered the node and make each node take long enough that
/// every worker gets one.
#[derive(Debug, Default)]
struct ThreadHooks {
    threads: Vec<std::thread::ThreadId>,
}

impl InitHooks for ThreadHooks {
    fn cond_resched(&mut self, _pfn: u64) {
        self.threads.push(std::thread::current().id());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// "padata: one work item per node (`min_chunk = align = 1`)": each node is gathered exactly
/// once, by one worker, on at most `min(nr_node_ids, nodes with memory)` threads, and the
/// calling thread is one of them. (NUMA placement of the workers is not modelled.)
#[test]
#[cfg_attr(miri, ignore = "sleeps and threads; the plan arithmetic is unit-tested")]
fn padata_one_work_item_per_node_and_the_caller_participates() {
    let cfg = cfg();
    let mut specs = packed(h2m(), 4, 2);
    specs[3].nr_pages = 0; // a memoryless node: no thread for it
    let counts = [2, 2, 2, 0];
    let req = BootRequest { hstate: h2m(), pages: PagesPerNode::Each(&counts) };
    let mut stores: Vec<(Vec<Page64>, Vec<u8>)> = specs
        .iter()
        .map(|s| {
            (
                vec![Page64::ZEROED; s.nr_pages.max(1) as usize],
                vec![0; pageblocks_needed(&cfg, s.start_pfn, s.nr_pages.max(1))],
            )
        })
        .collect();
    let mut nodes: Vec<HugetlbNode<'_, Page64, ModelRemap, ThreadHooks>> = stores
        .iter_mut()
        .zip(&specs)
        .map(|((p, pb), s)| {
            HugetlbNode::new(
                *s,
                Memmap::new(cfg, s.start_pfn, p, pb).unwrap(),
                ModelRemap::default(),
                ThreadHooks::default(),
            )
        })
        .collect();
    let mut rec = vec![HugeBootmemPage::EMPTY; 6];
    let report =
        hugetlb_init::boot(&mut nodes, &req, &params(Strategy::Template, HvoMode::On.params()), &mut rec)
            .unwrap();
    assert_eq!(report.nworks, 3, "nworks = min(nr_node_ids 4, nodes with memory 3)");
    let mut threads = Vec::new();
    for n in &nodes[..3] {
        // cond_resched once per folio, all on one thread.
        assert_eq!(n.hooks.threads.len(), 2);
        assert!(n.hooks.threads.windows(2).all(|w| w[0] == w[1]), "a node was split across workers");
        threads.push(n.hooks.threads[0]);
    }
    threads.sort_unstable_by_key(|t| format!("{t:?}"));
    threads.dedup();
    assert_eq!(threads.len(), 3, "each of the 3 workers gathers one node");
    assert!(threads.contains(&std::thread::current().id()), "the caller participates");
    assert_eq!(nodes.iter().filter(|n| n.report.on_caller_thread && n.report.folios > 0).count(), 1);
    assert!(rec.iter().all(|r| r.outcome.initialized));
}
