//! Inputs a careless or hostile caller passes to hugetlb-init's safe API: each is a typed error
//! or a correct result, never an arithmetic panic, a wrap, an `unreachable!` or a hang.

use hugetlb_init::{
    BootParams, BootRequest, Hstate, HugeBootmemPage, HugetlbError, HugetlbNode, HvoMode, ModelRemap,
    NodeSpec, boot, boot_placed, hugepage_freelist_addr,
};
use memmap_core::{
    FillOptions, InitError, KernelConfig, Memmap, NoHooks, Page64, Strategy, StructPage, pageblocks_needed,
};
#[allow(unused_imports)] // the std prelude, for the unit-test build of a no_std crate
use std::{borrow::ToOwned, boxed::Box, format, string::String, string::ToString, vec, vec::Vec};

fn h2m() -> Hstate {
    Hstate::new(&KernelConfig::X86_64, 2 << 20).unwrap()
}

fn h1g() -> Hstate {
    Hstate::new(&KernelConfig::X86_64, 1 << 30).unwrap()
}

fn params() -> BootParams {
    BootParams::new(Strategy::Slow, HvoMode::On.params())
}

/// The panic message of `f`, which must panic.
fn panic_message(f: impl FnOnce()) -> String {
    let e = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).expect_err("expected a panic");
    e.downcast_ref::<String>().cloned().or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string())).unwrap()
}

/// A node whose memory ends past the configuration's last pfn is refused when its vmemmap is
/// created, with memmap-core's typed error (`OwnedBoot::new` accepted it and the boot then
/// reached an `unreachable!`: exit 101 in `memmap-bench dump hugetlb --place`).
#[cfg(all(feature = "std", target_os = "linux"))]
#[test]
fn a_vmemmap_past_the_last_pfn_is_refused_before_the_boot() {
    use hugetlb_init::OwnedBoot;
    use hugetlb_init::memfd::MemfdVmemmap;
    let cfg = KernelConfig::X86_64;
    let max = cfg.max_pfn();
    for (start, nr) in [(max, 512), (max - 256, 512), (u64::MAX - 511, 512), (0xffff_ffff_fffc_0000, 1 << 18)]
    {
        let spec = NodeSpec::new(0, start, nr);
        let booted = std::panic::catch_unwind(|| {
            let mut machine = OwnedBoot::<Page64>::new(cfg, &[spec], false)?;
            machine
                .boot(&BootRequest::per_node(h2m(), 1), &params())
                .map(|_| ())
                .map_err(|e| std::io::Error::other(e.to_string()))
        });
        let e = booted.expect("no panic").expect_err("refused");
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{start:#x}: {e}");
        let typed = e.get_ref().and_then(|e| e.downcast_ref::<InitError>()).copied();
        assert!(
            matches!(typed, Some(InitError::BeyondMaxPfn { .. } | InitError::RangeOverflow { .. })),
            "{start:#x}: {e}"
        );
        let v = MemfdVmemmap::<Page64>::new(cfg, start, nr, 1, false).unwrap_err();
        assert_eq!(v.kind(), std::io::ErrorKind::InvalidInput);
    }
    // The last 2 MiB below the last pfn boots.
    let mut machine = OwnedBoot::<Page64>::new(cfg, &[NodeSpec::new(0, max - 512, 512)], false).unwrap();
    let r = machine.boot(&BootRequest::per_node(h2m(), 1), &params()).unwrap();
    assert_eq!(r.folios, 1);
}

/// Sizes past the `u64` PFN space in the node helpers saturate, and the boot refuses the
/// node (`count * pages_per_huge_page`, `nid * nr` and the aligned bottom of `capacity`
/// overflowed); `total` answers at once for any node count (it counted node by node, so
/// `usize::MAX` nodes hung).
#[test]
fn node_helpers_saturate_and_the_boot_refuses_what_does_not_fit() {
    for count in [u64::MAX, 1 << 63, 1 << 46] {
        let spec = NodeSpec::packed(7, h1g(), count);
        assert!(spec.start_pfn.checked_add(spec.nr_pages).is_none(), "{count:#x}: {spec:?}");
        let e = hugetlb_init::bootmem::validate_with(1, |_| spec, &BootRequest::per_node(h1g(), 1));
        assert_eq!(e, Err(HugetlbError::RangeOverflow { nid: 7 }));
    }
    assert_eq!(NodeSpec::packed(0, h2m(), 0).nr_pages, 0);
    for start in [u64::MAX, u64::MAX - 1, u64::MAX - 511] {
        assert_eq!(NodeSpec::new(0, start, 0).capacity(h1g()), 0);
        assert_eq!(NodeSpec::new(0, start, u64::MAX).capacity(h2m()), 0);
    }
    let r = HugeBootmemPage { head_pfn: u64::MAX - 100, hstate: h2m(), ..HugeBootmemPage::EMPTY };
    assert_eq!(r.pfns(), u64::MAX - 100..u64::MAX);
    let t = std::time::Instant::now();
    assert_eq!(BootRequest::per_node(h2m(), 3).total(usize::MAX), 3u64.saturating_mul(usize::MAX as u64));
    assert_eq!(BootRequest::per_node(h2m(), 0).total(usize::MAX), 0);
    assert!(t.elapsed() < std::time::Duration::from_secs(1));
    let each = [1, 2, 3];
    let req = BootRequest { hstate: h2m(), pages: hugetlb_init::PagesPerNode::Each(&each) };
    assert_eq!((req.total(2), req.total(usize::MAX)), (3, 6));
    // A modelled kernel address: it wraps for node ids no kernel has.
    let _ = hugepage_freelist_addr(h2m(), u32::MAX);
}

/// Placed folios at the top of the PFN space are refused as folios outside their node
/// (the overlap check's `head + nr` overflowed before the records were validated).
#[test]
fn placed_folios_past_the_pfn_space_are_refused() {
    let cfg = KernelConfig::X86_64;
    let base = 1 << 20;
    let mut pages = vec![Page64::ZEROED; 1024];
    let mut pb = vec![0u8; pageblocks_needed(&cfg, base, 1024)];
    let memmap = Memmap::new(cfg, base, &mut pages, &mut pb).unwrap();
    let mut nodes = [HugetlbNode::new(NodeSpec::new(0, base, 1024), memmap, ModelRemap::default(), NoHooks)];
    for head in [u64::MAX - 1023, u64::MAX - 511, 1 << 63] {
        let mut records = [
            HugeBootmemPage { head_pfn: base, ..HugeBootmemPage::EMPTY },
            HugeBootmemPage { head_pfn: head, ..HugeBootmemPage::EMPTY },
        ];
        let e = boot_placed(&mut nodes, &mut records, &params());
        assert_eq!(e.unwrap_err(), HugetlbError::FolioOutsideNode { head_pfn: head, nid: 0 }, "{head:#x}");
    }
    // A record of a node the machine does not have: not in its node's group.
    let mut stray = [
        HugeBootmemPage { head_pfn: base, ..HugeBootmemPage::EMPTY },
        HugeBootmemPage { head_pfn: base + 512, nid: 1, ..HugeBootmemPage::EMPTY },
    ];
    let e = boot_placed(&mut nodes, &mut stray, &params());
    assert_eq!(e.unwrap_err(), HugetlbError::RecordsNotGrouped { index: 1 });
    let mut overlapping = [
        HugeBootmemPage { head_pfn: base, ..HugeBootmemPage::EMPTY },
        HugeBootmemPage { head_pfn: base, ..HugeBootmemPage::EMPTY },
    ];
    let e = boot_placed(&mut nodes, &mut overlapping, &params());
    assert_eq!(e.unwrap_err(), HugetlbError::FoliosOverlap { a: base, b: base });
    let mut records = [HugeBootmemPage::EMPTY; 2];
    assert!(boot(&mut nodes, &BootRequest::per_node(h2m(), 2), &params(), &mut records).is_ok());
}

/// The per-folio steps and the node's byte copy with pfns and counts past the memmap panic
/// with their documented "outside the memmap" message before writing, not with an arithmetic
/// overflow (`head + start`, `head + 3`, `nr * sizeof(struct page)`).
#[test]
fn folio_steps_past_the_pfn_space_fail_their_bounds_check() {
    let cfg = KernelConfig::X86_64;
    let base = 1 << 20;
    let mut pages = vec![Page64::ZEROED; 1024];
    let mut pb = vec![0u8; pageblocks_needed(&cfg, base, 1024)];
    let opts = FillOptions::new(Strategy::Template);
    {
        let mut m = Memmap::new(cfg, base, &mut pages, &mut pb).unwrap();
        for head in [u64::MAX, u64::MAX - 1, u64::MAX - 511] {
            let msg = panic_message(|| {
                hugetlb_init::folio::hugetlb_folio_init_tail_vmemmap(
                    &mut m,
                    head,
                    9,
                    1,
                    512,
                    &opts,
                    &mut NoHooks,
                );
            });
            assert!(msg.contains("outside the memmap"), "{head:#x}: {msg}");
            let msg = panic_message(|| hugetlb_init::folio::init_new_hugetlb_folio(&mut m, head));
            assert!(msg.contains("outside the memmap"), "{head:#x}: {msg}");
        }
        let msg = panic_message(|| {
            hugetlb_init::folio::hugetlb_bootmem_init_migratetype(&mut m, base + 512, h1g())
        });
        assert!(msg.contains("outside the memmap"), "{msg}");
        assert!(m.pageblock_bytes().iter().all(|&b| b == memmap_core::PAGEBLOCK_UNSET), "nothing written");
    }
    let memmap = Memmap::new(cfg, base, &mut pages, &mut pb).unwrap();
    let node = HugetlbNode::new(NodeSpec::new(0, base, 1024), memmap, ModelRemap::default(), NoHooks);
    let mut out = vec![0u8; Page64::SIZE];
    for nr in [u64::MAX, 1 << 63, 1 << 58] {
        let msg = panic_message(|| node.copy_bytes(base, nr, &mut out));
        assert!(msg.contains("range outside memmap"), "{nr:#x}: {msg}");
    }
}

/// HVO's shared tail page with a boot range reaching past the memmap (and past the PFN space):
/// the search is cut to the memmap, so it ends at once and never builds a scratch memmap past
/// the configuration's last pfn (an `unreachable!`), nor walks 2^58 candidates.
#[test]
fn the_shared_tail_search_stays_inside_the_memmap() {
    let cfg = KernelConfig::X86_64;
    // One 1 GiB folio's head and page[1] at the very top of the configuration's pfn space.
    let head = cfg.max_pfn() - (1 << 18);
    let mut pages = vec![Page64::ZEROED; 2];
    let mut pb = vec![0u8; pageblocks_needed(&cfg, head, 2)];
    let mut m = Memmap::new(cfg, head, &mut pages, &mut pb).unwrap();
    let bits = cfg.behaviour().page_flags;
    m.init_single_page(head, 2, 0, &mut NoHooks);
    m.init_single_page(head + 1, 2, 0, &mut NoHooks);
    m.set_flag(head, bits.head);
    let mut h = m.read(head);
    h.set_u32_at(
        memmap_core::offsets::PAGE_TYPE,
        memmap_core::PageType::word(memmap_core::PageType::HUGETLB),
    );
    m.write(head, h);
    let mut p1 = m.read(head + 1);
    p1.set_u64_at(memmap_core::offsets::FLAGS, (p1.flags() & !0xff) | 18);
    m.write(head + 1, p1);
    let t = std::time::Instant::now();
    let mut remap = ModelRemap::default();
    let outcome = hugetlb_init::hvo::hugetlb_vmemmap_optimize_folio(
        &mut m,
        &mut remap,
        head,
        h1g(),
        &HvoMode::On.params(),
        0,
        head..u64::MAX,
    );
    assert!(t.elapsed() < std::time::Duration::from_secs(5));
    // The model's remap cannot place a shared tail page in a two-page memmap: a typed HVO
    // failure, the folio as before.
    assert!(matches!(outcome, hugetlb_init::HvoOutcome::Failed(_)), "{outcome:?}");
}
