//! HVO's availability rules and the configurations' page sizes and layouts, then the tracepoint
//! and error cases of the boot.

use super::common::{NOINIT_WORD, boot_model, h1g, h2m, hs, is_filled, packed, params};
use hugetlb_init::folio::folio3;
use hugetlb_init::hstate::hugetlb_vmemmap_reserve_pages;
use hugetlb_init::{
    BootRequest, Hstate, HugeBootmemPage, HugetlbError, HugetlbNode, HvoMode, HvoOutcome, HvoUnavailable,
    ModelRemap, NodeSpec,
};
use memmap_core::{KernelConfig, Memmap, NoHooks, Page64, Page72, Strategy, StructPage};
use memmap_core::{Named, offsets};
#[allow(unused_imports)] // the std prelude, for the unit-test build of a no_std crate
use std::{borrow::ToOwned, boxed::Box, format, string::String, string::ToString, vec, vec::Vec};

use super::gigantic_pages::{STRATEGIES, cfg, check_tail, run};

// ------------------------------------------------------------------- HVO availability

#[test]
fn hvo_unavailable_config_boot_option_layout_and_non_vmemmap() {
    let check = |cfg: KernelConfig, size: u64, hvo: HvoMode, layout72: bool, why: HvoUnavailable| {
        let h = hs(&cfg, size);
        let b_out = if layout72 {
            let b = run::<Page72>(cfg, h, 1, 2, Strategy::Template, hvo);
            (b.records.clone(), b.report)
        } else {
            let b = run::<Page64>(cfg, h, 1, 2, Strategy::Template, hvo);
            (b.records.clone(), b.report)
        };
        assert_eq!(b_out.1.hvo, Err(why), "{} {h}", cfg.name);
        for r in &b_out.0 {
            assert_eq!(r.outcome.hvo, HvoOutcome::Unavailable(why));
            assert!(r.outcome.fallback.is_some());
        }
    };
    let m2 = 2 << 20;
    check(
        KernelConfig { hugetlb_vmemmap: false, ..cfg() },
        m2,
        HvoMode::On,
        false,
        HvoUnavailable::ConfigOff,
    );
    check(KernelConfig::ARM64, m2, HvoMode::On, false, HvoUnavailable::ConfigOff);
    check(cfg(), m2, HvoMode::Off, false, HvoUnavailable::BootOptionOff);
    check(cfg(), m2, HvoMode::On, true, HvoUnavailable::StructPageNotPowerOfTwo);
    let classic = KernelConfig { hugetlb_vmemmap: true, ..KernelConfig::X86_64_CLASSIC_SPARSE };
    check(classic, m2, HvoMode::On, false, HvoUnavailable::NoSparsememVmemmap);
    // hugetlb_vmemmap_optimizable_size() == 0: the struct pages fit in the one vmemmap page HVO
    // keeps. riscv64's 64 KiB NAPOT pages (16 struct pages; riscv64 has HVO), and, with HVO
    // built in, 2 MiB pages of 16 KiB (128 struct pages, 256 per vmemmap page) and of 64 KiB
    // (32, 1024 per page) base pages.
    check(KernelConfig::RISCV64, 64 << 10, HvoMode::On, false, HvoUnavailable::NothingToFree);
    for preset in [KernelConfig::ARM64_16K, KernelConfig::PPC64EL_64K] {
        let cfg = KernelConfig { hugetlb_vmemmap: true, ..preset };
        check(cfg, m2, HvoMode::On, false, HvoUnavailable::NothingToFree);
    }
}

/// HVO with 16 and 64 KiB base pages (the model alone: no Debian kernel of those page sizes
/// builds HVO): the head vmemmap page keeps 256 or 1024 struct pages, the rest is freed
/// (`hugetlb_vmemmap_optimizable_size()` / `PAGE_SIZE` pages), nothing past the kept page is
/// written, and the tails read through the vmemmap are those of the shared tail page (7.1+).
#[test]
fn hvo_keeps_one_vmemmap_page_of_the_configurations_page_size() {
    let cases = [
        (KernelConfig::ARM64_16K, 32u64 << 20, 256u64, 7u64),
        (KernelConfig::ARM64_16K, 1 << 30, 256, 255),
        (KernelConfig::PPC64EL_64K, 1 << 30, 1024, 15),
    ];
    for (preset, size, reserve, freed) in cases {
        let cfg = KernelConfig { hugetlb_vmemmap: true, ..preset };
        let h = hs(&cfg, size);
        assert_eq!(h.vmemmap_reserve_pages::<Page64>(), reserve);
        for s in STRATEGIES {
            let b = run::<Page64>(cfg, h, 1, 2, s, HvoMode::On);
            let what = format!("{} {h} {s}", cfg.name);
            assert_eq!(b.report.hvo, Ok(()), "{what}");
            for r in &b.records {
                assert_eq!(
                    r.outcome.hvo,
                    HvoOutcome::Optimized { head_copied: false, freed_pages: freed },
                    "{what}"
                );
                for idx in 1..reserve {
                    check_tail(&b, r.head_pfn, h, idx).unwrap_or_else(|e| panic!("{what}: {e}"));
                }
                // Past the kept page and the model's shared tail page (vmemmap page 1 of one
                // folio), nothing was written.
                for idx in 2 * reserve..h.nr_pages() {
                    assert!(is_filled(&b.raw(r.head_pfn + idx), NOINIT_WORD), "{what}: tail {idx} written");
                }
                let tail = b.page(r.head_pfn + reserve + 3);
                assert_eq!(
                    tail,
                    b.page(r.head_pfn + h.nr_pages() - reserve + 3),
                    "{what}: one shared tail page"
                );
                assert_eq!(
                    (tail.u64_at(offsets::MAPPING), tail.mapcount(), tail.refcount()),
                    (cfg.tail_mapping(), -1, 0),
                    "{what}"
                );
            }
        }
    }
}

/// With the 72-byte layout `HUGETLB_VMEMMAP_RESERVE_PAGES` is 4096 / 72 = 56: the first call
/// initializes tails 1..55 and the fallback 56..nr; every tail is right.
#[test]
fn layout72_reserve_is_56_and_every_tail_is_initialized() {
    assert_eq!(hugetlb_vmemmap_reserve_pages::<Page72>(&cfg()), 56);
    for s in STRATEGIES {
        let b = run::<Page72>(cfg(), h2m(), 1, 1, s, HvoMode::On);
        let r = b.records[0];
        assert_eq!(r.outcome.fallback.unwrap().pages, 512 - 56);
        for idx in 1..512 {
            check_tail(&b, r.head_pfn, h2m(), idx).unwrap();
        }
    }
}

/// With the `page_ref_set` tracepoint on, every strategy falls back to the slow path and emits
/// one event per `set_page_count`/`init_page_count`: the head's `init_page_count`, then per
/// tail written `init_page_count(1)` and `set_page_count(0)`.
#[test]
fn tracepoint_forces_slow_and_counts_events() {
    let cfg = KernelConfig { debug_page_ref: true, ..cfg() };
    for &hvo in HvoMode::ALL {
        let mut slow_events = None;
        for s in [Strategy::Slow, Strategy::Template, Strategy::Streaming, Strategy::Auto] {
            let b = boot_model::<Page64>(
                cfg,
                &packed(h2m(), 1, 2),
                &BootRequest::per_node(h2m(), 2),
                &params(s, hvo.params()),
                true,
            )
            .unwrap();
            let tails_written = if hvo == HvoMode::On { 63 } else { 511 };
            assert_eq!(b.nodes[0].events.len() as u64, 2 * (1 + 2 * tails_written), "{hvo:?} {s}");
            if hvo != HvoMode::On {
                assert_eq!(b.report.fallback_strategy.unwrap().0, Strategy::Slow, "{s}");
            }
            match &slow_events {
                None => slow_events = Some(b.nodes[0].events.clone()),
                Some(e) => assert_eq!(e, &b.nodes[0].events, "{hvo:?} {s}: events differ from Slow"),
            }
        }
    }
}

// ------------------------------------------------------------------- typed errors

#[test]
fn bad_input_is_a_typed_error_and_writes_nothing() {
    let cfg = cfg();
    let h = h2m();
    let p = params(Strategy::Streaming, HvoMode::On.params());
    let err = |specs: &[NodeSpec], req: BootRequest<'_>| {
        boot_model::<Page64>(cfg, specs, &req, &p, true).unwrap_err()
    };
    let two = packed(h, 2, 2);
    assert_eq!(err(&two, BootRequest::per_node(h, 0)), (HugetlbError::ZeroPages, true));
    assert_eq!(
        err(&two, BootRequest::per_node(h, 3)),
        (HugetlbError::RangeTooSmall { nid: 0, hstate: h, requested: 3, fit: 2 }, true)
    );
    assert_eq!(
        err(&two, BootRequest::per_node(h1g(), 1)),
        (HugetlbError::RangeTooSmall { nid: 0, hstate: h1g(), requested: 1, fit: 0 }, true)
    );
    let mut memoryless = two.clone();
    memoryless[1].nr_pages = 0;
    assert_eq!(
        err(&memoryless, BootRequest::per_node(h, 1)),
        (HugetlbError::NodeWithoutMemory { nid: 1 }, true)
    );
    let mut far = two.clone();
    far[1].nid = 1024;
    assert_eq!(
        err(&far, BootRequest::per_node(h, 1)),
        (HugetlbError::NodeOutOfRange { nid: 1024, max: 1023 }, true)
    );
    let mut dev = two.clone();
    dev[0].zone = cfg.zone_device();
    assert_eq!(
        err(&dev, BootRequest::per_node(h, 1)).0,
        HugetlbError::BadZone { nid: 0, zone: 4, zone_device: 4 }
    );
    let supported = hugetlb_init::Hstates::of(&cfg);
    assert_eq!(Hstate::new(&cfg, 4 << 20), Err(HugetlbError::UnsupportedHstate { size: 4 << 20, supported }));
    // An hstate of another configuration: x86-64's 2 MiB on a 16 KiB-page x86-64 (which has
    // no huge page size at all), and on arm64 (whose 2 MiB is another slot of `hstates[]`).
    let big = KernelConfig { page_shift: 14, ..cfg };
    let none = hugetlb_init::Hstates::of(&big);
    assert!(none.is_empty());
    assert_eq!(
        boot_model::<Page64>(big, &two, &BootRequest::per_node(h, 1), &p, false).unwrap_err(),
        (HugetlbError::HstateNotOfConfig { hstate: h, nid: 0, supported: none }, true)
    );
    let arm64 = KernelConfig::ARM64;
    assert_eq!(
        boot_model::<Page64>(arm64, &two, &BootRequest::per_node(h, 1), &p, false).unwrap_err(),
        (
            HugetlbError::HstateNotOfConfig {
                hstate: h,
                nid: 0,
                supported: hugetlb_init::Hstates::of(&arm64)
            },
            true
        )
    );
    let arm64_2m = hs(&arm64, 2 << 20);
    assert!(boot_model::<Page64>(arm64, &two, &BootRequest::per_node(arm64_2m, 1), &p, false).is_ok());
}

/// A node whose memory is not inside its memmap is refused.
#[test]
fn node_outside_its_memmap_is_refused() {
    let cfg = cfg();
    let spec = NodeSpec::packed(0, h2m(), 2);
    let mut pages = vec![Page64::ZEROED; 512];
    let mut pb = vec![0; 2];
    let r = {
        let m = Memmap::new(cfg, spec.start_pfn, &mut pages, &mut pb).unwrap();
        let mut nodes = [HugetlbNode::new(spec, m, ModelRemap::default(), NoHooks)];
        let mut rec = [HugeBootmemPage::EMPTY; 2];
        hugetlb_init::boot(
            &mut nodes,
            &BootRequest::per_node(h2m(), 1),
            &params(Strategy::Slow, HvoMode::On.params()),
            &mut rec,
        )
    };
    assert_eq!(
        r,
        Err(HugetlbError::NodeOutsideMemmap {
            nid: 0,
            start_pfn: spec.start_pfn,
            nr_pages: 1024,
            memmap_start: spec.start_pfn,
            memmap_end: spec.start_pfn + 512,
        })
    );
    assert!(pages.iter().all(|p| *p == Page64::ZEROED));
}

/// The 6.5 head checks hold at the word level too: `page_type` is the word at byte 48.
#[test]
fn page_type_is_stored_at_byte_48() {
    let b = run::<Page64>(cfg(), h2m(), 1, 1, Strategy::Slow, HvoMode::Off);
    let head = b.page(b.records[0].head_pfn);
    let mut bytes = [0u8; 64];
    head.to_bytes(&mut bytes);
    assert_eq!(&bytes[offsets::PAGE_TYPE..offsets::PAGE_TYPE + 4], &0xf400_0000u32.to_ne_bytes());
    // page[3]: subpool and cgroup pointers NULL at their folio offsets.
    let p3 = b.page(b.records[0].head_pfn + 3);
    assert_eq!(p3.u64_at(folio3::HUGETLB_SUBPOOL), 0);
    assert_eq!(p3.u64_at(folio3::HUGETLB_CGROUP), 0);
    assert_eq!(p3.u64_at(folio3::HUGETLB_CGROUP_RSVD), 0);
}
