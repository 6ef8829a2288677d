//! The page-flags layout (where node, zone, section and the other fields sit in
//! `page->flags`), checked against `include/linux/page-flags-layout.h`.

use super::FlagsLayout;
use crate::Named;
use crate::model::config::KernelConfig;
use proptest::prelude::*;
use std::vec;
use std::vec::Vec;

fn layouts() -> Vec<(KernelConfig, FlagsLayout)> {
    let mut v: Vec<_> = KernelConfig::ALL.iter().map(|c| (*c, c.flags_layout().unwrap())).collect();
    let arm64_64k =
        KernelConfig { name: "arm64-64k", page_shift: 16, section_size_bits: 29, ..KernelConfig::ARM64 };
    v.push((arm64_64k, arm64_64k.flags_layout().unwrap()));
    let kasan_sw =
        KernelConfig { name: "arm64-kasan-sw-tags", kasan: true, kasan_tag_width: 8, ..KernelConfig::ARM64 };
    v.push((kasan_sw, kasan_sw.flags_layout().unwrap()));
    v
}

fn field_masks(l: &FlagsLayout) -> Vec<(&'static str, u64)> {
    let m = |w: u32, s: u32| if w == 0 { 0 } else { ((1u64 << w) - 1) << s };
    vec![
        ("section", m(l.sections_width, l.sections_pgshift)),
        ("node", m(l.nodes_width, l.nodes_pgshift)),
        ("zone", m(l.zones_width, l.zones_pgshift)),
        ("last_cpupid", m(l.last_cpupid_width, l.last_cpupid_pgshift)),
        ("kasan_tag", m(l.kasan_tag_width, l.kasan_tag_pgshift)),
        ("lru_gen", m(l.lru_gen_width, l.lru_gen_pgshift)),
        ("lru_refs", m(l.lru_refs_width, l.lru_refs_pgshift)),
    ]
}

/// Bits occupied by the non-flag fields.
fn field_bits(l: &FlagsLayout) -> u32 {
    l.sections_width
        + l.nodes_width
        + l.zones_width
        + l.last_cpupid_width
        + l.kasan_tag_width
        + l.lru_gen_width
        + l.lru_refs_width
}

#[test]
fn widths_fit_and_each_field_sits_at_its_pgshift() {
    for (cfg, l) in layouts() {
        assert!(field_bits(&l) <= 64 - cfg.nr_pageflags, "{}", cfg.name);
        let masks = field_masks(&l);
        let mut union = 0u64;
        let mut next_top = 64u32;
        for (name, mask) in &masks {
            assert_eq!(union & mask, 0, "{}: {name} overlaps another field", cfg.name);
            union |= mask;
            if *mask != 0 {
                // Fields are packed downward from bit 63 in the kernel's order.
                assert_eq!(64 - mask.leading_zeros(), next_top, "{}: {name} not packed", cfg.name);
                next_top = mask.trailing_zeros();
            }
        }
        let pageflags = (1u64 << cfg.nr_pageflags) - 1;
        assert_eq!(union & pageflags, 0, "{}: fields overlap the NR_PAGEFLAGS flag bits", cfg.name);
    }
}

#[test]
fn zone_and_node_round_trip() {
    for (cfg, l) in layouts() {
        for zone in 0..cfg.max_nr_zones {
            for nid in [0, 1, l.nodes_mask() as u32 / 2, l.nodes_mask() as u32] {
                let f = l.set_links(0, zone, nid, 0);
                assert_eq!(l.zone(f), zone, "{}", cfg.name);
                assert_eq!(l.node(f), nid, "{}", cfg.name);
            }
        }
    }
}

/// With classic SPARSEMEM the section number (`pfn >> 15` with 128 MiB sections of 4 KiB
/// pages) sits in the top 19 bits of `page->flags` (`MAX_PHYSMEM_BITS - SECTION_SIZE_BITS` =
/// 46 - 27); with SPARSEMEM_VMEMMAP the flags do not depend on the PFN.
#[test]
fn section_bits_equal_pfn_section_only_with_section_in_page_flags() {
    for (cfg, l) in layouts() {
        for (pfn, section) in [(0u64, 0u64), (32767, 0), (32768, 1), (5 << 15, 5), ((1 << 30) + 7, 1 << 15)] {
            let f = l.set_links(0, 2, 1, cfg.pfn_to_section_nr(pfn));
            if l.section_in_page_flags() {
                assert_eq!(cfg.pfn_to_section_nr(pfn), section, "{}", cfg.name);
                assert_eq!(f >> 45, section, "{}: section in bits 63..45", cfg.name);
            } else {
                assert_eq!(l.section(f), 0, "{}", cfg.name);
                assert_eq!(
                    f,
                    l.set_links(0, 2, 1, 0),
                    "{}: VMEMMAP flags must not depend on the pfn",
                    cfg.name
                );
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: if cfg!(miri) { 8 } else { 256 }, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn setters_preserve_every_bit_outside_their_mask(flags: u64, zone in 0u32..8, node: u32, section: u64, which in 0usize..5) {
        let (_, l) = layouts()[which];
        let zm = l.zones_mask() << l.zones_pgshift;
        let nm = l.nodes_mask() << l.nodes_pgshift;
        let sm = l.sections_mask() << l.sections_pgshift;
        prop_assert_eq!(l.set_zone(flags, zone) & !zm, flags & !zm);
        prop_assert_eq!(l.set_node(flags, node) & !nm, flags & !nm);
        prop_assert_eq!(l.set_section(flags, section) & !sm, flags & !sm);
        // clear-then-OR: setting twice equals setting once with the last value.
        prop_assert_eq!(l.set_zone(l.set_zone(flags, zone ^ 1), zone), l.set_zone(flags, zone));
    }
}
