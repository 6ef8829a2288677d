//! A node writes the encodings of its configuration's release: `PG_reserved` (bit 12 on 6.1,
//! 13 from 6.12), the `page_type` of a free block's head (`~PG_buddy` = `0xffffff7f` on 6.1,
//! `PGTY_buddy << 24` from 6.12) and its `PAGE_FLAGS_CHECK_AT_FREE` (6.1's with `PG_slab`,
//! `PG_mlocked` at 19 on 6.12 and at 20 from 6.14), in every init mode, boot order and
//! strategy; the kernel's order and the fused boot leave the same bytes on each release, and
//! what the node allocates it can free and merge again.

mod support;

use memmap_core::{
    BootOptions, BootOrder, FillOptions, Gfp, InitMode, KernelConfig, KernelVersion, NodeLayout, Page64,
    PageFlagBits, PfnRange, ReservedRange, Strategy, StructPage, ZoneSpan, buddy_page_type,
};
use support::{Storage, free_blocks, tiny};

const NID: u32 = 1;
const ZONE: u32 = 2;

/// A zone of three sections with a hole and a reserved range (tiny: 256-page sections,
/// 16-page pageblocks, `MAX_PAGE_ORDER` 6).
const ZONES: [ZoneSpan; 1] = [ZoneSpan::new(ZONE, 256, 1024)];
const MEMORY: [PfnRange; 2] = [PfnRange::new(256, 600), PfnRange::new(640, 1024)];
const RESERVED: [ReservedRange; 1] = [ReservedRange::new(300, 310)];

fn layout() -> NodeLayout<'static> {
    NodeLayout { nid: NID, zones: &ZONES, memory: &MEMORY, reserved: &RESERVED }
}

/// The release's encodings, as the kernel headers give them.
struct Expected {
    reserved: u32,
    buddy_type: u32,
    check_at_free: u64,
}

fn releases() -> [(KernelVersion, Expected); 3] {
    [
        (KernelVersion::V6_1, Expected { reserved: 12, buddy_type: 0xffff_ff7f, check_at_free: 0x30_f231 }),
        (KernelVersion::V6_12, Expected { reserved: 13, buddy_type: 0xf000_0000, check_at_free: 0x0c_e123 }),
        (KernelVersion::V7_2, Expected { reserved: 13, buddy_type: 0xf000_0000, check_at_free: 0x14_e123 }),
    ]
}

/// Boots `cfg` with `opts`, checks the release's encodings, allocates and frees everything
/// (the free lists must be what boot left), and returns the struct pages.
fn boot_and_check(cfg: KernelConfig, want: &Expected, opts: &BootOptions) -> Vec<Page64> {
    let what = format!("{} {:?} {:?} {:?}", cfg.version, opts.mode, opts.order, opts.fill.strategy);
    let l = layout();
    let mut st = Storage::new(&cfg, l.span(), false);
    let (mut node, _) = st.boot(cfg, l, opts);
    let flag_bits = (1u64 << cfg.nr_pageflags) - 1;
    assert_eq!(node.page_flags_check_at_free() & flag_bits, want.check_at_free, "{what}");
    let other = if want.reserved == 12 { 13 } else { 12 };
    let holes_and_reserved = (300..310).chain(600..640);
    for pfn in holes_and_reserved {
        let p = node.read_page(pfn);
        assert!(p.test_flag(want.reserved), "{what}: PG_reserved of pfn {pfn:#x}");
        assert!(!p.test_flag(other), "{what}: bit {other} of pfn {pfn:#x}");
    }
    let blocks = free_blocks(&node, ZONE);
    assert!(!blocks.is_empty(), "{what}");
    for &(pfn, order) in &blocks {
        let p = node.read_page(pfn);
        assert_eq!(p.page_type(), want.buddy_type, "{what}: free block head {pfn:#x}");
        assert_eq!(p.u64_at(memmap_core::offsets::PRIVATE), u64::from(order), "{what}");
        assert!(!p.test_flag(want.reserved), "{what}: a free page is not reserved");
    }
    let free = |p: u64| blocks.iter().any(|&(b, o)| b <= p && p < b + (1 << o));
    let free_pages: Vec<u64> = (256..1024).filter(|&p| node.is_initialized(p) && free(p)).collect();
    for pfn in free_pages {
        assert!(!node.read_page(pfn).test_flag(want.reserved), "{what}: free pfn {pfn:#x}");
    }
    let mut held = Vec::new();
    for order in (0..=cfg.max_page_order).rev() {
        while let Ok(b) = node.alloc_pages(ZONE, order, Gfp::NONE) {
            held.push(b);
        }
    }
    assert!(!held.is_empty(), "{what}");
    for b in held {
        let head = node.block_page(&b, b.pfn()).expect("own block");
        assert_eq!(head.page_type(), u32::MAX, "{what}: an allocated head has no type");
        node.free_pages(b).expect("free");
    }
    if opts.mode == InitMode::Eager {
        // Everything boot freed merges back into the same blocks.
        assert_eq!(free_blocks(&node, ZONE), blocks, "{what}");
    }
    let _ = node.into_memmap();
    st.pages
}

#[test]
fn a_node_writes_its_releases_bits() {
    for (v, (version, want)) in releases().into_iter().enumerate() {
        let cfg = tiny().with_version(version);
        assert!(cfg.nr_pageflags >= 22, "the flags checked fit below the fields");
        assert_eq!(buddy_page_type(&cfg), want.buddy_type);
        assert_eq!(cfg.behaviour().page_flags.reserved, want.reserved);
        let modes = [InitMode::Eager, InitMode::Deferred, InitMode::OnDemand];
        let strategies = [Strategy::Slow, Strategy::Template, Strategy::Streaming];
        for (i, mode) in modes.into_iter().enumerate() {
            for (j, strategy) in strategies.into_iter().enumerate() {
                // Under Miri, one of the nine pairs per release: each mode and each strategy
                // once over the three releases (54 boots took five minutes).
                if cfg!(miri) && (i != v || j != (v + 1) % 3) {
                    continue;
                }
                let kernel = BootOptions {
                    fill: FillOptions::new(strategy),
                    order: BootOrder::Kernel,
                    ..BootOptions::new(mode)
                };
                let fused = BootOptions { order: BootOrder::Fused, ..kernel };
                let a = boot_and_check(cfg, &want, &kernel);
                let b = boot_and_check(cfg, &want, &fused);
                assert!(a == b, "{version} {mode:?} {strategy}: kernel order and fused boot differ");
            }
        }
    }
}

#[test]
#[cfg_attr(miri, ignore = "the releases' encodings: a_node_writes_its_releases_bits boots each")]
fn the_releases_differ_only_where_their_encodings_do() {
    let opts = BootOptions::new(InitMode::Eager);
    let [(v6_1, a), (v6_12, b), (v7_2, c)] = releases();
    let old = boot_and_check(tiny().with_version(v6_1), &a, &opts);
    let mid = boot_and_check(tiny().with_version(v6_12), &b, &opts);
    let new = boot_and_check(tiny().with_version(v7_2), &c, &opts);
    // 6.12 and 7.2 share the boot-time encodings; the free check is not in the bytes.
    assert!(mid == new);
    assert_eq!(PageFlagBits::V6_12.reserved, PageFlagBits::V6_14.reserved);
    // 6.1 differs in the reserved pages' flags and the free block heads' type only.
    let l = layout();
    for (i, (p, q)) in old.iter().zip(&new).enumerate() {
        if p != q {
            let pfn = i as u64 + l.span().start - 1;
            let reserved = (300..310).contains(&pfn) || (600..640).contains(&pfn);
            let head = p.page_type() == a.buddy_type && q.page_type() == c.buddy_type;
            assert!(reserved || head, "pfn {pfn:#x} differs between 6.1 and 7.2");
        }
    }
}

/// 6.1's `init_reserved_page()` takes a reserved page's node from its pfn: outside memory
/// that is node 0, which spans no zone there, so deferred init leaves the page node 0's, zone
/// `MAX_NR_ZONES`; eager init and later releases keep the hole's node and zone. Every boot
/// order and strategy agrees.
#[test]
#[cfg_attr(miri, ignore = "eighteen boots; the rule is one loop")]
fn reserved_pages_outside_memory_belong_to_node_0_on_6_1_deferred() {
    const OUTSIDE: [ReservedRange; 2] = [ReservedRange::new(300, 310), ReservedRange::new(610, 612)];
    let l = NodeLayout { nid: NID, zones: &ZONES, memory: &MEMORY, reserved: &OUTSIDE };
    for version in [KernelVersion::V6_1, KernelVersion::V6_12] {
        let cfg = tiny().with_version(version);
        let flags = cfg.flags_layout().unwrap();
        for mode in [InitMode::Eager, InitMode::Deferred] {
            for order in [BootOrder::Kernel, BootOrder::Fused] {
                for strategy in [Strategy::Slow, Strategy::Template, Strategy::Streaming] {
                    let opts =
                        BootOptions { fill: FillOptions::new(strategy), order, ..BootOptions::new(mode) };
                    let mut st = Storage::new(&cfg, l.span(), false);
                    let (mut node, _) = st.boot(cfg, l, &opts);
                    let rehomed = version == KernelVersion::V6_1 && mode == InitMode::Deferred;
                    let want = if rehomed { (cfg.max_nr_zones, 0) } else { (ZONE, NID) };
                    for pfn in [609, 610, 611, 612] {
                        let p = node.read_page(pfn);
                        let f = p.u64_at(memmap_core::offsets::FLAGS);
                        let got = (flags.zone(f), flags.node(f));
                        let what = format!("{version} {mode:?} {order:?} {strategy}: pfn {pfn}");
                        assert_eq!(got, if (610..612).contains(&pfn) { want } else { (ZONE, NID) }, "{what}");
                        assert!(p.test_flag(cfg.behaviour().page_flags.reserved), "{what}");
                    }
                    let _ = node.into_memmap();
                }
            }
        }
    }
}
