//! Property tests of the buddy allocator over nodes with deferred, on-demand and eager init:
//! allocations never hand out an uninitialized struct page nor the same page twice, freeing
//! everything merges the free lists back to exactly the zone's free pages in maximal blocks,
//! and a block expanded on demand is byte-identical to the same block initialized at boot.

mod support;

use memmap_core::Named;
use std::collections::BTreeMap;

use memmap_core::{
    BootOptions, FillOptions, Gfp, InitMode, KernelConfig, PageBlock, PfnRange, ReservedRange,
    Strategy as InitStrategy, StructPage, ZoneSpan,
};
use memmap_core::{Node, NodeLayout, Page64, pg_uninitialized_2m};
use proptest::prelude::*;
use support::{Storage, free_blocks, free_map, is_guard, layouts, maximal_blocks, tiny};

const NID: u32 = 3;

#[derive(Debug, Clone)]
enum Op {
    Alloc { zone: u32, order: u32 },
    Free(usize),
    DeferredInit,
    Expand(u64),
}

fn ops(max_order: u32, n: usize) -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        6 => (1u32..3, 0..=max_order).prop_map(|(zone, order)| Op::Alloc { zone, order }),
        4 => any::<usize>().prop_map(Op::Free),
        1 => Just(Op::DeferredInit),
        1 => any::<u64>().prop_map(Op::Expand),
    ];
    prop::collection::vec(op, 0..n)
}

fn strategies() -> impl Strategy<Value = InitStrategy> {
    prop::sample::select(vec![InitStrategy::Slow, InitStrategy::Template, InitStrategy::Streaming])
}

fn check_block(node: &mut Node<'_, Page64>, cfg: &KernelConfig, b: &PageBlock) {
    let fl = cfg.flags_layout().unwrap();
    let flagged = |p: &Page64| pg_uninitialized_2m(cfg).is_some_and(|bit| p.test_flag(bit));
    for pfn in b.pfn()..b.pfn() + b.nr_pages() {
        let p = node.read_page(pfn);
        assert!(!is_guard(&p), "uninitialized struct page {pfn:#x} handed out");
        assert_eq!(fl.zone(p.flags()), b.zone(), "pfn {pfn:#x}");
        assert_eq!(fl.node(p.flags()), NID, "pfn {pfn:#x}");
        assert_eq!(p.mapcount(), -1, "pfn {pfn:#x}");
        assert!(!flagged(&p) || node.options().mode != InitMode::OnDemand);
        assert_eq!(p.refcount(), i32::from(pfn == b.pfn()), "pfn {pfn:#x}");
    }
}

proptest! {
    #![proptest_config(support::sized(48, 1))]

    #[test]
    fn random_alloc_free_never_hands_out_uninitialized_or_duplicate_pages(
        layout in layouts(NID),
        mode in prop::sample::select(InitMode::ALL.to_vec()),
        strategy in strategies(),
        ops in ops(tiny().max_page_order, if cfg!(miri) { 12 } else { 80 }),
    ) {
        let cfg = tiny();
        let l = layout.node();
        let mut st = Storage::new(&cfg, l.span(), false);
        let opts = BootOptions { fill: FillOptions::new(strategy), ..BootOptions::new(mode) };
        let (mut node, _) = st.boot(cfg, l, &opts);
        let mut held: Vec<PageBlock> = Vec::new();
        let mut owner: BTreeMap<u64, u64> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Alloc { zone, order } => {
                    if let Ok(b) = node.alloc_pages(zone, order, Gfp::NONE) {
                        check_block(&mut node, &cfg, &b);
                        for p in b.pfn()..b.pfn() + b.nr_pages() {
                            prop_assert!(owner.insert(p, b.pfn()).is_none(), "pfn {:#x} handed out twice", p);
                        }
                        held.push(b);
                    }
                }
                Op::Free(i) if !held.is_empty() => {
                    let b = held.swap_remove(i % held.len());
                    for p in b.pfn()..b.pfn() + b.nr_pages() {
                        owner.remove(&p);
                    }
                    node.free_pages(b).unwrap();
                }
                Op::Free(_) => {}
                Op::DeferredInit => {
                    node.deferred_init_memmap_serial();
                }
                Op::Expand(x) => {
                    let span = node.layout().span();
                    let _ = node.ensure_initialized(span.start + x % span.len(), 1);
                }
            }
        }
        node.deferred_init_memmap(stream_par::Threads::Fixed(2));
        for b in held.drain(..) {
            node.free_pages(b).unwrap();
        }
        for z in &layout.zones {
            let expected = maximal_blocks(&free_map(&l, z.span), z.span.start, cfg.max_page_order);
            prop_assert_eq!(free_blocks(&node, z.zone), expected);
            let free = (z.span.start..z.span.end).filter(|&p| l.is_free(p)).count() as u64;
            prop_assert_eq!(node.zone_free_pages(z.zone), free);
            prop_assert_eq!(node.zone_managed_pages(z.zone), free);
        }
    }

    #[test]
    fn a_block_expanded_on_demand_equals_the_block_initialized_at_boot(
        layout in layouts(NID),
        strategy in strategies(),
        pick in any::<u64>(),
    ) {
        let cfg = tiny();
        let l = layout.node();
        let span = l.span();
        let mut eager_st = Storage::new(&cfg, span, false);
        let (mut eager, _) = eager_st.boot(cfg, l, &BootOptions { fill: FillOptions::new(InitStrategy::Slow), ..BootOptions::new(InitMode::Eager) });
        let mut od_st = Storage::new(&cfg, span, false);
        let (mut od, _) = od_st.boot(cfg, l, &BootOptions { fill: FillOptions::new(strategy), ..BootOptions::new(InitMode::OnDemand) });
        let bs = cfg.pageblock_nr_pages();
        let bit = pg_uninitialized_2m(od.config()).unwrap();
        let flagged: Vec<u64> = (span.start..span.end)
            .step_by(1)
            .filter(|&p| p % bs == 0)
            .filter(|&p| od.read_page(p).test_flag(bit))
            .collect();
        prop_assume!(!flagged.is_empty());
        let base = flagged[(pick % flagged.len() as u64) as usize];
        prop_assert_eq!(od.ensure_initialized(base, 1), 1);
        for pfn in base..base + bs {
            prop_assert_eq!(od.read_page(pfn), eager.read_page(pfn), "pfn {:#x}", pfn);
        }
        prop_assert_eq!(od.pageblock_migratetype(base), eager.pageblock_migratetype(base));
    }
}

/// The node keeps working through a full drain and refill of every zone in every mode.
#[test]
fn drain_and_refill_every_zone() {
    let cfg = tiny();
    let pps = cfg.pages_per_section();
    let zones = [ZoneSpan::new(1, pps, 2 * pps), ZoneSpan::new(2, 2 * pps, 5 * pps)];
    let memory = [PfnRange::new(pps + 1, 5 * pps - 7)];
    let reserved = [ReservedRange::new(3 * pps + 3, 3 * pps + 9)];
    let l = NodeLayout { nid: NID, zones: &zones, memory: &memory, reserved: &reserved };
    for mode in InitMode::ALL.iter().copied() {
        let mut st = Storage::new(&cfg, l.span(), false);
        let (node, _) = st.boot(cfg, l, &BootOptions::new(mode));
        for z in &zones {
            let mut held = Vec::new();
            for order in (0..=cfg.max_page_order).rev() {
                while let Ok(b) = node.alloc_pages(z.zone, order, Gfp::NONE) {
                    held.push(b);
                }
            }
            let got: u64 = held.iter().map(PageBlock::nr_pages).sum();
            let free = (z.span.start..z.span.end).filter(|&p| l.is_free(p)).count() as u64;
            assert_eq!(got, free, "{mode} zone {}", z.zone);
            assert_eq!(node.zone_free_pages(z.zone), 0);
            for b in held {
                node.free_pages(b).unwrap();
            }
            assert_eq!(
                free_blocks(&node, z.zone),
                maximal_blocks(&free_map(&l, z.span), z.span.start, cfg.max_page_order)
            );
        }
    }
}
