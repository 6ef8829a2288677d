//! The struct page layout (field offsets, the 72-byte `WANT_PAGE_VIRTUAL` layout, the folio
//! overlay on pages 1 to 3) and the page-flags layout (where node, zone, section and the other
//! fields sit in `page->flags`), checked against values written out from the kernel headers
//! (`include/linux/mm_types.h`, `include/linux/page-flags-layout.h`).

mod support;

use memmap_core::Named;
use memmap_core::{
    DevPagemap, KernelConfig, MemoryType, Page64, Page72, Strategy, StructPage, compound_nr_pages, folio,
    offsets, vmemmap_can_optimize,
};
use support::{range, run};

// ---------------------------------------------------------------- struct page layout

#[test]
fn size_is_64_and_offsets_match_the_kernel() {
    assert_eq!(size_of::<Page64>(), 64);
    assert_eq!(align_of::<Page64>(), 8);
    assert_eq!(Page64::SIZE, 64);
    // The `#[repr(C)]` mirror of the C struct is checked against these at compile time.
    let expect = [
        (offsets::FLAGS, 0),
        (offsets::LRU_NEXT, 8),
        (offsets::LRU_PREV, 16),
        (offsets::MAPPING, 24),
        (offsets::INDEX, 32),
        (offsets::PRIVATE, 40),
        (offsets::MAPCOUNT, 48),
        (offsets::REFCOUNT, 52),
        (offsets::MEMCG_DATA, 56),
    ];
    for (got, want) in expect {
        assert_eq!(got, want);
    }
    // The accessors read exactly those bytes.
    let mut bytes = [0u8; 64];
    for (i, b) in bytes.iter_mut().enumerate() {
        *b = i as u8;
    }
    let words: [u64; 8] =
        core::array::from_fn(|i| u64::from_ne_bytes(bytes[i * 8..i * 8 + 8].try_into().unwrap()));
    let mut p = Page64::ZEROED;
    p.words_mut().copy_from_slice(&words);
    let at8 = |o: usize| u64::from_ne_bytes(bytes[o..o + 8].try_into().unwrap());
    let at4 = |o: usize| u32::from_ne_bytes(bytes[o..o + 4].try_into().unwrap());
    assert_eq!(p.flags(), at8(offsets::FLAGS));
    assert_eq!(p.pgmap(), at8(offsets::PGMAP));
    assert_eq!(p.compound_head(), at8(offsets::COMPOUND_HEAD));
    assert_eq!(p.u64_at(memmap_core::offsets::ZONE_DEVICE_DATA), at8(offsets::ZONE_DEVICE_DATA));
    assert_eq!(p.u64_at(memmap_core::offsets::MAPPING), at8(offsets::MAPPING));
    assert_eq!(p.u64_at(memmap_core::offsets::INDEX), at8(offsets::INDEX));
    assert_eq!(p.u64_at(memmap_core::offsets::PRIVATE), at8(offsets::PRIVATE));
    assert_eq!(p.mapcount() as u32, at4(offsets::MAPCOUNT));
    assert_eq!(p.refcount() as u32, at4(offsets::REFCOUNT));
    assert_eq!(p.u64_at(memmap_core::offsets::MEMCG_DATA), at8(offsets::MEMCG_DATA));
}

#[test]
fn want_page_virtual_layout_is_72_bytes_with_virtual_at_64() {
    assert_eq!(size_of::<Page72>(), 72);
    assert_eq!(offsets::VIRTUAL, 64);
    let mut p = Page72::ZEROED;
    p.set_u64_at(offsets::VIRTUAL, 0xffff_8880_1234_5000);
    assert_eq!(p.words()[8], 0xffff_8880_1234_5000);
    assert_eq!(Page64::ZEROED.virtual_address(), None);
}

#[test]
fn non_power_of_two_size_turns_vmemmap_optimizations_off() {
    let cfg = KernelConfig::X86_64;
    let pgmap = DevPagemap::new(MemoryType::Generic).with_vmemmap_shift(9);
    assert!(vmemmap_can_optimize(&cfg, Page64::SIZE, &pgmap));
    assert_eq!(compound_nr_pages(&cfg, Page64::SIZE, &pgmap), 128);
    assert!(!vmemmap_can_optimize(&cfg, Page72::SIZE, &pgmap));
    assert_eq!(compound_nr_pages(&cfg, Page72::SIZE, &pgmap), 512);
}

/// Runs a devdax init of one compound page of `order` and returns the run.
fn one_compound(order: u32) -> support::Run<Page64> {
    let cfg = KernelConfig::X86_64;
    let ppc = 1u64 << order;
    let pgmap = DevPagemap::new(MemoryType::Generic).with_vmemmap_shift(order);
    run::<Page64>(cfg, &range(&cfg, 1 << 20, ppc), &pgmap, Strategy::Slow, false).unwrap()
}

/// Reads a folio field (byte offset from the head, 64-byte layout) out of the run's pages.
fn folio_u64(r: &support::Run<Page64>, head: u64, off: usize) -> u64 {
    let (i, o) = (off / 64, off % 64); // 64-byte struct pages
    r.page(head + i as u64).u64_at(o)
}

fn folio_u32(r: &support::Run<Page64>, head: u64, off: usize) -> u32 {
    let (i, o) = (off / 64, off % 64); // 64-byte struct pages
    r.page(head + i as u64).u32_at(o)
}

/// The bytes of struct pages `head..head + 4` as one array: the `struct folio` overlay.
fn folio_bytes(r: &support::Run<Page64>, head: u64) -> Vec<u8> {
    (head..head + 4)
        .flat_map(|pfn| r.page(pfn).words().iter().flat_map(|w| w.to_ne_bytes()).collect::<Vec<_>>())
        .collect()
}

fn at_u32(b: &[u8], off: usize) -> u32 {
    u32::from_ne_bytes(b[off..off + 4].try_into().unwrap())
}

fn at_u64(b: &[u8], off: usize) -> u64 {
    u64::from_ne_bytes(b[off..off + 8].try_into().unwrap())
}

#[test]
fn folio_fields_land_on_page_words() {
    let r = one_compound(9);
    let head = 1 << 20;
    // The folio constants against `include/linux/mm_types.h` are a unit test of the model.
    // And the raw bytes at those offsets hold what prep_compound_head (and prep_compound_tail
    // for the `_head_N` words) stored.
    let b = folio_bytes(&r, head);
    assert_eq!(at_u64(&b, 64) & 0xff, 9, "folio order in _flags_1");
    // Linux 7.2 with HVO built in: `compound_info` = GENMASK(63, 9 + 6) | 1 for an order-9
    // folio of 64-byte struct pages (read from Debian's 7.2 kernel under QEMU).
    let tail_word = 0xffff_ffff_ffff_8001;
    for off in [72, 136, 200] {
        assert_eq!(at_u64(&b, off), tail_word, "_head_N at {off}");
    }
    // And through the typed accessors.
    assert_eq!(folio_u64(&r, head, folio::FLAGS_1) & 0xff, 9, "order in _flags_1");
    assert_eq!(folio_u32(&r, head, 80 /* large_mapcount */) as i32, -1);
    assert_eq!(folio_u32(&r, head, 84 /* nr_pages_mapped */), 0);
    assert_eq!(folio_u32(&r, head, 88 /* entire_mapcount */) as i32, -1);
    assert_eq!(folio_u32(&r, head, 92 /* pincount */), 0);
    assert_eq!(folio_u32(&r, head, 96 /* mm_id_mapcount */) as i32, -1);
    assert_eq!(folio_u32(&r, head, 96 /* mm_id_mapcount */ + 4) as i32, -1);
    assert_eq!(folio_u64(&r, head, 104 /* mm_ids */), 0);
    assert_eq!(folio_u32(&r, head, 120 /* nr_pages */), 512);
}

/// `_mapcount_1` and `_refcount_1` are page\[1\]'s `_mapcount` and `_refcount`: folio bytes 112
/// and 116 hold -1 (`__init_single_page`) and 0 (`set_page_count(page, 0)` of a tail).
#[test]
fn mapcount_1_and_refcount_1_alias_page1() {
    let r = one_compound(9);
    let b = folio_bytes(&r, 1 << 20);
    assert_eq!(at_u32(&b, 112) as i32, -1);
    assert_eq!(at_u32(&b, 116), 0);
    assert_eq!(r.page((1 << 20) + 1).mapcount(), -1);
    assert_eq!(r.page((1 << 20) + 1).refcount(), 0);
}

#[test]
fn entire_mapcount_and_pincount_overwrite_tail_mapping_of_page1() {
    // prep_compound_head ran after prep_compound_tail(head, 1): page[1].mapping is no longer
    // TAIL_MAPPING but {_entire_mapcount = -1, _pincount = 0}.
    for order in [1, 2, 9] {
        let r = one_compound(order);
        let m = r.page((1 << 20) + 1).u64_at(memmap_core::offsets::MAPPING);
        assert_ne!(m, KernelConfig::X86_64.tail_mapping(), "order {order}");
        let bytes = m.to_ne_bytes();
        assert_eq!(i32::from_ne_bytes(bytes[..4].try_into().unwrap()), -1, "_entire_mapcount");
        assert_eq!(i32::from_ne_bytes(bytes[4..].try_into().unwrap()), 0, "_pincount");
    }
}

#[test]
fn deferred_list_overwrites_page2_mapping_only_for_order_above_1() {
    let cfg = KernelConfig::X86_64;
    let head = 1u64 << 20;
    let r = one_compound(2);
    let list = support::vaddr::<Page64>(&cfg, head + 2) + 16;
    assert_eq!(r.page(head + 2).u64_at(16), list, "_deferred_list.next");
    assert_eq!(
        r.page(head + 2).u64_at(memmap_core::offsets::MAPPING),
        list,
        "_deferred_list.prev overwrites page[2].mapping"
    );
    // Order 1 has no page[2] to touch: the next struct page is not part of the compound.
    let r = one_compound(1);
    assert!(support::is_guard(r.page(head + 2)));
}

// ---------------------------------------------------------------- page-flags layout
// (the layout's own checks are unit tests of `model/config/layout.rs`)

/// Initialized flags: PFN-independent with VMEMMAP (template-safe), changing at every
/// 32768-PFN boundary without it.
#[test]
fn initialized_flags_depend_on_the_pfn_only_without_vmemmap() {
    for cfg in KernelConfig::ALL.iter().copied() {
        let start = 32768 - 4;
        let r = run::<Page64>(
            cfg,
            &range(&cfg, start, 8),
            &DevPagemap::new(MemoryType::FsDax),
            Strategy::Slow,
            false,
        )
        .unwrap();
        let before = r.page(32767).flags();
        let after = r.page(32768).flags();
        assert_eq!(r.page(32766).flags(), before);
        assert_eq!(r.page(32769).flags(), after);
        if cfg.sparsemem_vmemmap {
            assert_eq!(before, after, "{}", cfg.name);
        } else {
            assert_ne!(before, after, "{}", cfg.name);
            let l = cfg.flags_layout().unwrap();
            assert_eq!((l.section(before), l.section(after)), (0, 1));
        }
    }
}

#[test]
fn pages_per_section() {
    assert_eq!(KernelConfig::X86_64.pages_per_section(), 32768);
    assert_eq!(KernelConfig::ARM64.pages_per_section(), 32768);
    let arm64_64k = KernelConfig { page_shift: 16, section_size_bits: 29, ..KernelConfig::ARM64 };
    assert_eq!(arm64_64k.pages_per_section(), 8192);
    assert_eq!(KernelConfig::X86_64.pageblock_nr_pages(), 512);
}
