//! `Node::take_page_off_buddy` leaves the free lists in the buddy allocator's canonical form:
//! after taking any set of free pages, the free blocks are exactly the largest aligned blocks of
//! the pages left free that no taken page splits, in every init mode and boot order, and what
//! is left can still be allocated page by page.

mod support;

use memmap_core::{
    BootOptions, BootOrder, FillOptions, Gfp, InitMode, NodeLayout, PfnRange, ReservedRange, Strategy,
    ZoneSpan,
};
use proptest::prelude::*;
use support::{Storage, free_blocks, tiny};

const ZONES: [ZoneSpan; 2] = [ZoneSpan::new(1, 256, 512), ZoneSpan::new(2, 512, 1280)];
const MEMORY: [PfnRange; 2] = [PfnRange::new(256, 900), PfnRange::new(960, 1280)];
const RESERVED: [ReservedRange; 1] = [ReservedRange::new(300, 310)];

/// The canonical free blocks of `free` pages inside `[start, end)`: greedy largest aligned
/// blocks, at most `max` order, inside the zone.
fn canonical(free: &[bool], base: u64, start: u64, end: u64, max: u32) -> Vec<(u64, u32)> {
    let mut out = Vec::new();
    let mut pfn = start;
    while pfn < end {
        if !free[(pfn - base) as usize] {
            pfn += 1;
            continue;
        }
        let mut order = max.min(pfn.trailing_zeros());
        while pfn + (1 << order) > end || (pfn..pfn + (1 << order)).any(|p| !free[(p - base) as usize]) {
            order -= 1;
        }
        out.push((pfn, order));
        pfn += 1 << order;
    }
    out
}

fn check(mode: InitMode, order: BootOrder, taken: &[u64]) {
    let cfg = tiny();
    let layout = NodeLayout { nid: 0, zones: &ZONES, memory: &MEMORY, reserved: &RESERVED };
    let opts = BootOptions { order, fill: FillOptions::new(Strategy::Streaming), ..BootOptions::new(mode) };
    let mut st = Storage::new(&cfg, layout.span(), false);
    let (node, _) = st.boot(cfg, layout, &opts);
    node.deferred_init_memmap_serial();
    let span = layout.span();
    let mut free: Vec<bool> = (span.start..span.end).map(|p| layout.is_free(p)).collect();
    for &pfn in taken {
        let slot = span.contains(pfn).then(|| (pfn - span.start) as usize);
        let was = slot.is_some_and(|i| free[i]);
        assert_eq!(node.take_page_off_buddy(pfn), was, "{mode:?} {order:?}: pfn {pfn:#x}");
        if let Some(i) = slot {
            free[i] = false;
        }
    }
    for z in ZONES {
        let want = canonical(&free, span.start, z.span.start, z.span.end, cfg.max_page_order);
        assert_eq!(free_blocks(&node, z.zone), want, "{mode:?} {order:?}: zone {}", z.zone);
        let pages: u64 = want.iter().map(|&(_, o)| 1u64 << o).sum();
        assert_eq!(node.zone_free_pages(z.zone), pages);
        let mut n = 0;
        while node.alloc_pages(z.zone, 0, Gfp::NONE).is_ok() {
            n += 1;
        }
        assert_eq!(n, pages, "{mode:?} {order:?}: zone {}", z.zone);
    }
}

#[test]
fn taking_nothing_free_changes_nothing_and_a_taken_page_cannot_be_taken_twice() {
    check(InitMode::Eager, BootOrder::Kernel, &[300, 305, 900, 1279, 1279, 600, 600, 100_000]);
}

proptest! {
    #![proptest_config(support::sized(48, 1))]
    #[test]
    fn the_free_lists_stay_canonical(
        taken in proptest::collection::vec(256u64..1280, 0..40),
        mode in prop_oneof![Just(InitMode::Eager), Just(InitMode::Deferred), Just(InitMode::OnDemand)],
        fused in any::<bool>(),
    ) {
        check(mode, if fused { BootOrder::Fused } else { BootOrder::Kernel }, &taken);
    }
}
