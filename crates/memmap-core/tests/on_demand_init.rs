//! On-demand struct page init (the 2013 RFC: one initialized struct page per 2 MiB block at
//! boot, the rest expanded on first allocator use), and the buddy allocator's typed errors.

mod support;

use memmap_core::{
    AllocError, BootOptions, BootOrder, FillOptions, FreeError, Gfp, InitMode, KernelConfig, Memmap, NoHooks,
    Node, NodeError, NodeLayout, NodeParts, PG, Page64, PfnRange, ReservedRange, Strategy, StructPage,
    ZoneSpan, pageblocks_needed, pg_uninitialized_2m,
};
use support::{Storage, cfg, is_guard, layout};

const NID: u32 = 0;
const ZONE: u32 = 2;

/// A zone of 8 blocks whose memory starts 3 pages into the first block and ends 5 pages
/// before the last block's end, with a reserved range inside block 4.
fn blocks_layout(cfg: &KernelConfig) -> (Vec<ZoneSpan>, Vec<PfnRange>, Vec<ReservedRange>) {
    let bs = cfg.pageblock_nr_pages();
    let s0 = 4 * cfg.max_order_nr_pages();
    let zones = vec![ZoneSpan::new(ZONE, s0, s0 + 8 * bs)];
    let memory = vec![PfnRange::new(s0 + 3, s0 + 8 * bs - 5)];
    let reserved = vec![ReservedRange::new(s0 + 4 * bs + 2, s0 + 4 * bs + 6)];
    (zones, memory, reserved)
}

/// Boots [`blocks_layout`] on demand (with its reserved range if `reserved`) and runs `test` on
/// the configuration, the layout and the node.
fn on_demand_blocks(reserved: bool, test: impl FnOnce(KernelConfig, NodeLayout<'_>, &mut Node<'_, Page64>)) {
    let cfg = cfg();
    let (zones, memory, res) = blocks_layout(&cfg);
    let l = layout(NID, &zones, &memory, if reserved { &res[..] } else { &[] });
    let mut st = Storage::new(&cfg, l.span(), false);
    let (mut node, _) = st.boot(cfg, l, &BootOptions::new(InitMode::OnDemand));
    test(cfg, l, &mut node);
}

/// Exactly one initialized struct page, carrying the flag, per whole 2 MiB block of a memory
/// range; blocks cut by a range edge are initialized fully and unflagged.
#[test]
fn ondemand_one_initialized_page_and_the_flag_per_block() {
    on_demand_blocks(false, |cfg, l, node| {
        let bs = cfg.pageblock_nr_pages();
        let bit = pg_uninitialized_2m(node.config()).unwrap();
        assert_eq!(Some(bit), pg_uninitialized_2m(&cfg));
        assert_eq!(bit, cfg.nr_pageflags);
        let s0 = l.zones[0].span.start;
        for b in 0..8 {
            let base = s0 + b * bs;
            let p = node.read_page(base);
            let edge = b == 0 || b == 7;
            assert_eq!(p.test_flag(bit), !edge, "block {b}");
            for pfn in base + 1..base + bs {
                let q = node.read_page(pfn);
                assert_eq!(is_guard(&q), !edge, "block {b} pfn {pfn:#x}");
            }
            assert_eq!(node.is_initialized(base + 1), edge);
        }
        assert_eq!(node.stats().expansions.load(std::sync::atomic::Ordering::Relaxed), 0);
    });
}

/// Expansion happens before the allocator uses a block, once: the allocated pages are
/// initialized, a second expansion request does nothing and changes no byte.
#[test]
fn ondemand_expansion_is_idempotent_and_precedes_allocator_use() {
    on_demand_blocks(false, |cfg, _, node| {
        let bs = cfg.pageblock_nr_pages();
        let bit = pg_uninitialized_2m(node.config()).unwrap();
        let block = node.alloc_pages(ZONE, 0, Gfp::NONE).expect("a page");
        let pfn = block.pfn();
        let base = pfn & !(bs - 1);
        let fl = cfg.flags_layout().unwrap();
        let expansions = node.stats().expansions.load(std::sync::atomic::Ordering::Relaxed);
        assert!(expansions <= 1);
        let p = node.read_page(pfn);
        assert_eq!((fl.zone(p.flags()), p.refcount(), p.mapcount()), (ZONE, 1, -1));
        assert!(!p.test_flag(bit));
        for q in base..base + bs {
            let page = node.read_page(q);
            assert!(!is_guard(&page) && !page.test_flag(bit), "pfn {q:#x} of the block in use");
        }
        let before: Vec<Page64> = (base..base + bs).map(|q| node.read_page(q)).collect();
        assert_eq!(node.ensure_initialized(base, bs), 0, "already expanded");
        let after: Vec<Page64> = (base..base + bs).map(|q| node.read_page(q)).collect();
        assert_eq!(before, after);
        node.free_pages(block).unwrap();
    });
}

/// The flag is part of `PAGE_FLAGS_CHECK_AT_PREP` and `PAGE_FLAGS_CHECK_AT_FREE`.
#[test]
fn ondemand_flag_is_checked_at_free_and_at_prep() {
    on_demand_blocks(false, |_, l, node| {
        let bit = 1u64 << pg_uninitialized_2m(node.config()).unwrap();
        assert_ne!(node.page_flags_check_at_prep() & bit, 0);
        assert_ne!(node.page_flags_check_at_free() & bit, 0);
        assert_ne!(node.page_flags_check_at_free() & 1 << PG::RESERVED, 0);
        // A whole-zone drain hands out only pages whose flag is clear (prep would refuse them).
        let mut blocks = Vec::new();
        while let Ok(b) = node.alloc_pages(ZONE, 0, Gfp::NONE) {
            blocks.push(b);
        }
        let free_pfns = (l.zones[0].span.start..l.zones[0].span.end).filter(|&p| l.is_free(p)).count();
        assert_eq!(blocks.len(), free_pfns);
        for b in blocks {
            node.free_pages(b).unwrap();
        }
    });
}

/// Expanded pages copy zone, node and reference count from the base page: 0 for a free block,
/// 1 for a block expanded at boot by `reserve_bootmem_region()`.
#[test]
fn ondemand_expanded_pages_copy_zone_nid_and_count_from_the_base() {
    on_demand_blocks(true, |cfg, l, node| {
        let bs = cfg.pageblock_nr_pages();
        let fl = cfg.flags_layout().unwrap();
        let s0 = l.zones[0].span.start;
        // Block 4 holds a reserved range: expanded at boot, before the base was freed (count 1).
        let b4 = s0 + 4 * bs;
        assert!(node.is_initialized(b4 + 1));
        for q in b4 + 1..b4 + bs {
            let p = node.read_page(q);
            let reserved = l.reserved[0].range.contains(q);
            assert_eq!(p.test_flag(PG::RESERVED), reserved);
            // Free pages of the block were then freed (count 0); reserved ones keep the copy (1).
            assert_eq!(p.refcount(), i32::from(reserved), "pfn {q:#x}");
        }
        // Block 2 is free: its base has count 0 when expanded.
        let b2 = s0 + 2 * bs;
        assert_eq!(node.read_page(b2).refcount(), 0);
        assert_eq!(node.ensure_initialized(b2, 1), 1);
        for q in b2 + 1..b2 + bs {
            let p = node.read_page(q);
            assert_eq!(
                (fl.zone(p.flags()), fl.node(p.flags()), p.refcount(), p.mapcount()),
                (ZONE, NID, 0, -1)
            );
        }
    });
}

// ---------------------------------------------------------------- typed errors

fn simple_node_storage(cfg: &KernelConfig) -> (Vec<ZoneSpan>, Vec<PfnRange>) {
    let mo = cfg.max_order_nr_pages();
    (vec![ZoneSpan::new(ZONE, 2 * mo, 6 * mo)], vec![PfnRange::new(2 * mo, 6 * mo)])
}

#[test]
fn double_free_and_freeing_unallocated_pages_are_typed_errors() {
    let cfg = cfg();
    let (zones, memory) = simple_node_storage(&cfg);
    let reserved = [ReservedRange::new(zones[0].span.start + 40, zones[0].span.start + 41)];
    let l = layout(NID, &zones, &memory, &reserved);
    for mode in [InitMode::Eager, InitMode::OnDemand] {
        let mut st = Storage::new(&cfg, l.span(), false);
        let (node, _) = st.boot(cfg, l, &BootOptions::new(mode));
        let free_before = node.zone_free_pages(ZONE);
        let b = node.alloc_pages(ZONE, 2, Gfp::NONE).unwrap();
        let (pfn, order) = b.into_raw();
        // SAFETY: the handle was given up with `into_raw`; no handle is alive.
        unsafe {
            node.free_pages_raw(pfn, order).unwrap();
            assert_eq!(node.free_pages_raw(pfn, order), Err(FreeError::DoubleFree { pfn }), "{mode}");
            assert_eq!(node.free_pages_raw(pfn + 1, 0), Err(FreeError::DoubleFree { pfn: pfn + 1 }));
            assert_eq!(
                node.free_pages_raw(pfn + 1, 1),
                Err(FreeError::Misaligned { pfn: pfn + 1, order: 1 })
            );
            assert_eq!(
                node.free_pages_raw(pfn, 20),
                Err(FreeError::OrderTooLarge { order: 20, max: cfg.max_page_order })
            );
            assert_eq!(node.free_pages_raw(1, 0), Err(FreeError::NotInZone { pfn: 1 }));
            // A reserved page was never handed out.
            let r = reserved[0].range.start;
            assert_eq!(node.free_pages_raw(r, 0), Err(FreeError::NotAllocated { pfn: r }));
        }
        // An allocated page freed with a larger order overlaps free pages: refused whole.
        let a = node.alloc_pages(ZONE, 0, Gfp::NONE).unwrap();
        let (apfn, _) = a.into_raw();
        let big = apfn & !((1 << cfg.max_page_order) - 1);
        // SAFETY: no live handle.
        let e = unsafe { node.free_pages_raw(big, cfg.max_page_order) };
        assert!(
            matches!(
                e,
                Err(FreeError::NotAllocated { .. }
                    | FreeError::BadPage { .. }
                    | FreeError::DoubleFree { .. }
                    | FreeError::Uninitialized { .. })
            ),
            "{e:?}"
        );
        // SAFETY: no live handle.
        unsafe { node.free_pages_raw(apfn, 0).unwrap() };
        assert_eq!(node.zone_free_pages(ZONE), free_before, "{mode}: nothing lost or corrupted");
    }
}

#[test]
fn bad_allocation_requests_are_typed_errors() {
    let cfg = cfg();
    let (zones, memory) = simple_node_storage(&cfg);
    let l = layout(NID, &zones, &memory, &[]);
    let mut st = Storage::new(&cfg, l.span(), false);
    let (node, _) = st.boot(cfg, l, &BootOptions::new(InitMode::Eager));
    assert_eq!(
        node.alloc_pages(ZONE, cfg.max_page_order + 1, Gfp::NONE),
        Err(AllocError::OrderTooLarge { order: cfg.max_page_order + 1, max: cfg.max_page_order })
    );
    assert_eq!(node.alloc_pages(1, 0, Gfp::NONE), Err(AllocError::NoSuchZone { zone: 1 }));
    let mut held = Vec::new();
    while let Ok(b) = node.alloc_pages(ZONE, cfg.max_page_order, Gfp::NONE) {
        held.push(b);
    }
    assert_eq!(held.len(), 4);
    assert_eq!(node.alloc_pages(ZONE, 0, Gfp::NONE), Err(AllocError::NoMemory));
    for b in held {
        node.free_pages(b).unwrap();
    }
}

#[test]
fn bad_node_inputs_are_typed_errors() {
    let cfg = cfg();
    let (zones, memory) = simple_node_storage(&cfg);
    let l = layout(NID, &zones, &memory, &[]);
    let span = l.span();
    let mut pages = vec![Page64::ZEROED; span.end as usize];
    let mut pb = vec![0; pageblocks_needed(&cfg, 0, span.end)];
    let need = Node::<Page64>::states_needed(&cfg, span);
    let mut states = vec![0u8; need];
    let boot =
        |pages: &mut Vec<Page64>, pb: &mut Vec<u8>, cfg: KernelConfig, mode, states: &mut [u8], arena| {
            let memmap = Memmap::new(cfg, 0, pages, pb).unwrap();
            let parts = NodeParts { memmap, layout: l, states, arena, hooks: NoHooks };
            Node::boot(parts, &BootOptions::new(mode)).map(|_| ()).unwrap_err()
        };
    assert_eq!(
        boot(&mut pages, &mut pb, cfg, InitMode::Eager, &mut states[..need - 1], None),
        NodeError::StatesTooShort { needed: need, got: need - 1 }
    );
    let mut small = vec![0u8; 4096];
    let arena = memmap_core::PhysArena::new(span.start, &mut small).unwrap();
    assert_eq!(
        boot(&mut pages, &mut pb, cfg, InitMode::Eager, &mut states, Some(arena)),
        NodeError::ArenaTooSmall
    );
    // A configuration whose LRU refs field starts right after the page flags.
    let full = KernelConfig { nr_pageflags: 25, ..cfg };
    assert_eq!(pg_uninitialized_2m(&full), None);
    assert_eq!(
        boot(&mut pages, &mut pb, full, InitMode::OnDemand, &mut states, None),
        NodeError::NoFlagBitForOnDemand
    );
    // A memmap that does not cover the node.
    let mut short = vec![Page64::ZEROED; (span.end - 1) as usize];
    let memmap = Memmap::new(cfg, 0, &mut short, &mut pb).unwrap();
    let parts = NodeParts { memmap, layout: l, states: &mut states, arena: None, hooks: NoHooks };
    assert!(matches!(Node::boot(parts, &BootOptions::new(InitMode::Eager)), Err(NodeError::Init(_))));
    // A bad layout.
    let bad = [ZoneSpan::new(ZONE, 10, 5)];
    let memmap = Memmap::new(cfg, 0, &mut pages, &mut pb).unwrap();
    let parts = NodeParts {
        memmap,
        layout: layout(NID, &bad, &[], &[]),
        states: &mut states,
        arena: None,
        hooks: NoHooks,
    };
    assert!(matches!(Node::boot(parts, &BootOptions::new(InitMode::Eager)), Err(NodeError::Layout(_))));
    // No zone at all (regression: the node's span was taken before the layout was checked).
    let memmap = Memmap::new(cfg, 0, &mut pages, &mut pb).unwrap();
    let parts = NodeParts {
        memmap,
        layout: layout(NID, &[], &[], &[]),
        states: &mut states,
        arena: None,
        hooks: NoHooks,
    };
    assert!(matches!(Node::boot(parts, &BootOptions::new(InitMode::Eager)), Err(NodeError::Layout(_))));
}

/// A block partly covered by a NOINIT reservation: its free part goes to the buddy allocator at
/// boot and the reserved pages stay out with the count of 1 they were initialized with. Expanded
/// on demand, in either boot order, the block equals the block initialized eagerly (regression:
/// freeing the block's base page in a chunk smaller than the block used to leave the expansion
/// copying its zero count into the reserved pages).
#[test]
fn a_block_partly_reserved_noinit_expands_to_the_eager_bytes() {
    let cfg = support::tiny();
    let pps = cfg.pages_per_section();
    let bs = cfg.pageblock_nr_pages();
    let zones = [ZoneSpan::new(2, pps, 3 * pps)];
    let memory = [PfnRange::new(pps, 3 * pps)];
    let b = pps + 4 * bs;
    let half = bs / 2;
    for reserved in [
        [ReservedRange::noinit(b + half, b + bs)],
        [ReservedRange::noinit(b, b + half)],
        [ReservedRange::noinit(b + 3, b + 5)],
    ] {
        let l = NodeLayout { nid: 0, zones: &zones, memory: &memory, reserved: &reserved };
        let mut es = Storage::new(&cfg, l.span(), false);
        let eager_opts =
            BootOptions { fill: FillOptions::new(Strategy::Slow), ..BootOptions::new(InitMode::Eager) };
        let (mut eager, _) = es.boot(cfg, l, &eager_opts);
        for order in [BootOrder::Kernel, BootOrder::Fused] {
            let mut os = Storage::new(&cfg, l.span(), false);
            let (mut od, _) = os.boot(cfg, l, &BootOptions { order, ..BootOptions::new(InitMode::OnDemand) });
            let _ = od.ensure_initialized(b, bs);
            for pfn in b..b + bs {
                assert_eq!(od.read_page(pfn), eager.read_page(pfn), "{reserved:?} {order:?} pfn {pfn:#x}");
            }
        }
    }
}
