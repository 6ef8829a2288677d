//! Clearing pages with init_on_alloc: allocations are zeroed exactly, in one
//! `clear_pages` call or one per page, neighbours keep their bytes, and the init_on_alloc /
//! init_on_free / `__GFP_ZERO` / `__GFP_SKIP_ZERO` rules decide whether anything is zeroed.

mod support;

use std::collections::BTreeSet;

use memmap_core::{
    BootOptions, ClearMode, Gfp, InitMode, InitPolicy, KernelConfig, Node, NodeLayout, Page64, PfnRange,
    ZoneSpan,
};
use support::{Storage, tiny};

const ZONE: u32 = 2;
const PATTERN: u8 = 0xa5;
const PAGE: usize = 4096;

fn zone_layout(cfg: &KernelConfig, blocks: u64) -> (Vec<ZoneSpan>, Vec<PfnRange>) {
    let mo = cfg.max_order_nr_pages();
    (vec![ZoneSpan::new(ZONE, mo, (1 + blocks) * mo)], vec![PfnRange::new(mo, (1 + blocks) * mo)])
}

fn policy(clear: ClearMode) -> InitPolicy {
    InitPolicy { init_on_alloc: true, clear, ..InitPolicy::default() }
}

/// Whether every byte of `bytes` is `v` (a slice comparison: one `memcmp`, cheap under Miri).
fn all(bytes: &[u8], v: u8) -> bool {
    bytes.chunks(PAGE).all(|c| c == &[v; PAGE][..c.len()])
}

/// Arena bytes of `pfn` (the storage starts one page before the node span).
fn page_bytes(arena: &[u8], base: u64, pfn: u64) -> &[u8] {
    let off = (pfn - base) as usize * PAGE;
    &arena[off..off + PAGE]
}

/// Exactly `npages × 4096` bytes become zero and nothing outside them changes: every allocation
/// of every order reads back zero, and every page never allocated (inside and around the node,
/// including guard pages) keeps its pattern.
#[test]
fn allocations_read_back_zero_and_neighbours_are_untouched() {
    let cfg = tiny();
    let (zones, memory) = zone_layout(&cfg, 2);
    let l = NodeLayout { nid: 0, zones: &zones, memory: &memory, reserved: &[] };
    for clear in [ClearMode::PerPage, ClearMode::Batch] {
        let mut st = Storage::new(&cfg, l.span(), true);
        let base = st.base;
        let n_pages = st.arena.len() / PAGE;
        let opts = BootOptions { policy: policy(clear), ..BootOptions::new(InitMode::Eager) };
        let (mut node, _) = st.boot(cfg, l, &opts);
        let mut zeroed = BTreeSet::new();
        let orders: Vec<u32> = if cfg!(miri) {
            vec![cfg.max_page_order, 0, 1]
        } else {
            (0..=cfg.max_page_order).rev().chain(0..3).collect()
        };
        for order in orders {
            let mut b = node.alloc_pages(ZONE, order, Gfp::NONE).unwrap();
            let contents = node.block_contents(&mut b).unwrap();
            assert_eq!(contents.len(), PAGE << order);
            assert!(all(contents, 0), "{clear:?} order {order} not zeroed");
            contents.fill(0x3c); // the user writes its data
            zeroed.extend(b.pfn()..b.pfn() + b.nr_pages());
            let arena = node.arena_mut().unwrap().bytes();
            for i in 0..n_pages as u64 {
                let pfn = base + i;
                let bytes = page_bytes(arena, base, pfn);
                if !zeroed.contains(&pfn) {
                    assert!(all(bytes, PATTERN), "{clear:?}: neighbour pfn {pfn:#x} changed");
                }
            }
            node.free_pages(b).unwrap();
        }
    }
}

/// `clear_page == clear_pages(·, 1)`: the per-page loop and the batch call leave the same bytes.
#[test]
fn clear_page_loop_equals_one_clear_pages_call() {
    let cfg = tiny();
    let (zones, memory) = zone_layout(&cfg, 2);
    let l = NodeLayout { nid: 0, zones: &zones, memory: &memory, reserved: &[] };
    let run = |clear| {
        let mut st = Storage::new(&cfg, l.span(), true);
        // A recognisable, non-uniform background (251 is prime: no page looks like another).
        let pattern: Vec<u8> = (0..251u32).map(|i| (i * 7 % 251) as u8).collect();
        for chunk in st.arena.chunks_mut(251) {
            chunk.copy_from_slice(&pattern[..chunk.len()]);
        }
        let opts = BootOptions { policy: policy(clear), ..BootOptions::new(InitMode::Eager) };
        let (mut node, _) = st.boot(cfg, l, &opts);
        let held: Vec<_> =
            [3, 0, 5, 1].iter().map(|&o| node.alloc_pages(ZONE, o, Gfp::NONE).unwrap()).collect();
        let bytes = node.arena_mut().unwrap().bytes().to_vec();
        for b in held {
            node.free_pages(b).unwrap();
        }
        bytes
    };
    let per_page = run(ClearMode::PerPage);
    let batch = run(ClearMode::Batch);
    assert!(per_page.contains(&0) && per_page.contains(&1));
    assert_eq!(per_page, batch);
}

/// init_on_alloc zeroes only when init_on_free is off and `__GFP_SKIP_ZERO` (with hardware
/// tag-based KASAN) does not skip it; `__GFP_ZERO` zeroes without init_on_alloc; init_on_free
/// zeroes at free (boot frees included) instead; page poisoning turns both keys off.
#[test]
fn init_on_alloc_zeroes_only_when_init_on_free_is_off_and_skip_rules_allow() {
    let cfg = tiny();
    let (zones, memory) = zone_layout(&cfg, 1);
    let l = NodeLayout { nid: 0, zones: &zones, memory: &memory, reserved: &[] };
    let on = InitPolicy { init_on_alloc: true, ..InitPolicy::default() };
    let cases: [(InitPolicy, Gfp, bool); 7] = [
        (InitPolicy::default(), Gfp::NONE, false),
        (InitPolicy::default(), Gfp::ZERO, true),
        (on, Gfp::NONE, true),
        (on, Gfp::SKIP_ZERO, true),
        (InitPolicy { kasan_hw_tags: true, ..on }, Gfp::SKIP_ZERO, false),
        (InitPolicy { kasan_hw_tags: true, ..on }, Gfp::NONE, true),
        (InitPolicy { page_poisoning: true, ..on }, Gfp::NONE, false),
    ];
    for (policy, gfp, zeroed) in cases {
        let mut st = Storage::new(&cfg, l.span(), true);
        let opts = BootOptions { policy, ..BootOptions::new(InitMode::Eager) };
        let (node, _) = st.boot(cfg, l, &opts);
        let mut b = node.alloc_pages(ZONE, 2, gfp).unwrap();
        let c = node.block_contents(&mut b).unwrap();
        let expect = if zeroed { 0 } else { PATTERN };
        assert!(all(c, expect), "{policy:?} {gfp:?}");
        node.free_pages(b).unwrap();
    }
    // init_on_free: pages are zeroed when freed (at boot too), so allocation need not zero.
    // (`InitPolicy`'s unit test checks the same table on the policy alone.)
    let both = InitPolicy { init_on_free: true, ..on };
    let mut st = Storage::new(&cfg, l.span(), true);
    let base = st.base;
    let opts = BootOptions { policy: both, ..BootOptions::new(InitMode::Eager) };
    let (mut node, _) = st.boot(cfg, l, &opts);
    let span = l.span();
    {
        let arena = node.arena_mut().unwrap().bytes();
        assert!(all(page_bytes(arena, base, span.start), 0), "boot free zeroed");
        assert!(all(page_bytes(arena, base, span.start - 1), PATTERN), "guard page kept");
    }
    let mut b = node.alloc_pages(ZONE, 1, Gfp::NONE).unwrap();
    node.block_contents(&mut b).unwrap().fill(0x77);
    let pfn = b.pfn();
    node.free_pages(b).unwrap();
    let arena = node.arena_mut().unwrap().bytes();
    assert!(all(page_bytes(arena, base, pfn + 1), 0), "zeroed at free");
}

/// 16 MiB of 2 MiB allocations from an mmap-backed arena, batch and per page.
#[cfg(not(miri))]
#[test]
fn order_9_allocations_in_an_owned_arena_read_back_zero() {
    use memmap_core::{Memmap, NoHooks, NodeParts, OwnedArena, OwnedMemmap, PfnRange as R};
    let cfg = KernelConfig::X86_64;
    let base = 1u64 << 20;
    let n = 4096u64;
    for clear in [ClearMode::PerPage, ClearMode::Batch] {
        let zones = [ZoneSpan::new(ZONE, base, base + n)];
        let memory = [R::new(base, base + n)];
        let l = NodeLayout { nid: 0, zones: &zones, memory: &memory, reserved: &[] };
        let mut mm = OwnedMemmap::<Page64>::new(cfg, base, n).unwrap();
        let mut arena = OwnedArena::new(base, n).unwrap();
        arena.arena().bytes_mut().fill(PATTERN);
        let mut states = vec![0u8; Node::<Page64>::states_needed(&cfg, l.span())];
        let memmap: Memmap<'_, Page64> = mm.memmap();
        let parts =
            NodeParts { memmap, layout: l, states: &mut states, arena: Some(arena.arena()), hooks: NoHooks };
        let opts = BootOptions { policy: policy(clear), ..BootOptions::new(InitMode::Eager) };
        let (node, _) = Node::boot(parts, &opts).unwrap();
        let mut held = Vec::new();
        while let Ok(mut b) = node.alloc_pages(ZONE, 9, Gfp::NONE) {
            assert!(all(node.block_contents(&mut b).unwrap(), 0), "{clear:?}");
            held.push(b);
        }
        assert_eq!(held.len(), 8);
        for b in held {
            node.free_pages(b).unwrap();
        }
    }
}
