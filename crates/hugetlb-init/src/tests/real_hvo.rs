//! Real HVO on a memfd-backed vmemmap (Linux, `std`; not under Miri, which cannot run mmap):
//! the memory saving is measured, writes to optimized tails fault, and the bytes equal the
//! no_std model's.

use memmap_core::Named;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::Command;
#[allow(unused_imports)] // the std prelude, for the unit-test build of a no_std crate
use std::{borrow::ToOwned, boxed::Box, format, string::String, string::ToString, vec, vec::Vec};

use super::common::{boot_model, h1g, h2m, packed, params};
use hugetlb_init::hstate::hugetlb_vmemmap_reserve_pages;
use hugetlb_init::memfd::MemfdVmemmap;
use hugetlb_init::{BootRequest, Hstate, HvoFault, HvoMode, HvoOutcome, HvoParams, NodeSpec, OwnedBoot};
use memmap_core::{KernelConfig, PG, Page64, Page72, Strategy, StructPage};

const SIGSEGV: i32 = 11;
/// Returned by the child when its write did *not* fault.
const WROTE: i32 = 17; // EEXIST

fn cfg() -> KernelConfig {
    KernelConfig::X86_64
}

/// K = 4 gigantic pages (2 nodes x 2, booted in parallel): with HVO the vmemmap shrinks from
/// 4 x 16 MiB to 4 x 4 KiB (one head copy each, the old pages punched out of the memfd), plus
/// from Linux 7.1 one shared tail page per node.
#[test]
fn real_hvo_resident_vmemmap_is_one_page_per_1g_folio() {
    const K: u64 = 4;
    let mut m = OwnedBoot::<Page64>::packed(cfg(), h1g(), 2, 2, true).unwrap();
    let full = K * h1g().vmemmap_size::<Page64>();
    assert_eq!(m.resident_vmemmap_bytes().unwrap(), full, "poisoned vmemmap is fully resident");
    let req = BootRequest::per_node(h1g(), 2);
    let report = m.boot(&req, &params(Strategy::Streaming, HvoMode::On.params())).unwrap();
    assert_eq!((report.folios, report.optimized, report.fallback_folios), (K, K, 0));
    let resident = m.resident_vmemmap_bytes().unwrap();
    let shared = cfg().behaviour().hvo_shared_tail;
    let tails = if shared { 2 } else { 0 };
    assert_eq!(resident, (K + tails) * 4096, "one page (the head copy) per folio, one tail page per node");
    for r in m.folios() {
        assert_eq!(r.outcome.hvo, HvoOutcome::Optimized { head_copied: true, freed_pages: 4096 });
    }
    assert_eq!(m.vmemmap(0).head_copies() + m.vmemmap(1).head_copies(), K);
    assert_eq!(m.vmemmap(0).shared_tail_pages() + m.vmemmap(1).shared_tail_pages(), tails);
    // The aliasing is done by the MMU: struct page 64k + j *is* struct page j (6.x), or slot j
    // of the node's shared tail page, the same for every folio of the node (7.1+).
    let folios = m.folios().to_vec();
    for r in &folios {
        let same_node = folios.iter().find(|o| o.nid == r.nid && o.head_pfn != r.head_pfn).unwrap();
        for idx in [64, 65, 127, 4096, 100_000, 262_143] {
            if shared {
                assert_eq!(m.read(r.head_pfn + idx), m.read(same_node.head_pfn + idx), "idx {idx}");
                assert_eq!(m.read(r.head_pfn + idx), m.read(r.head_pfn + 64 + idx % 64), "idx {idx}");
            } else {
                assert_eq!(m.read(r.head_pfn + idx), m.read(r.head_pfn + idx % 64), "idx {idx}");
            }
        }
        let p = m.read(r.head_pfn + 64 * 7).unwrap();
        assert_eq!(p.test_flag(PG::HEAD), !shared, "a fake head before 7.1, a tail from 7.1");
    }
    // Without HVO every struct page is written and resident.
    let report = m.boot(&req, &params(Strategy::Streaming, HvoMode::Off.params())).unwrap();
    assert_eq!((report.optimized, report.fallback_folios), (0, K));
    assert_eq!(m.resident_vmemmap_bytes().unwrap(), full);
}

/// A failed head-copy allocation keeps the current head page: one page per folio again, no
/// spare page used for heads (from 7.1, one for the node's shared tail page).
#[test]
fn real_hvo_without_head_copy_keeps_the_old_head_page() {
    let mut m = OwnedBoot::<Page64>::packed(cfg(), h2m(), 1, 3, true).unwrap();
    let p = params(
        Strategy::Template,
        HvoParams { fault: HvoFault::HeadCopy { every: 1 }, ..HvoMode::On.params() },
    );
    m.boot(&BootRequest::per_node(h2m(), 3), &p).unwrap();
    assert_eq!(m.vmemmap(0).head_copies(), 0);
    let tails = u64::from(cfg().behaviour().hvo_shared_tail);
    assert_eq!(m.vmemmap(0).shared_tail_pages(), tails);
    assert_eq!(m.resident_vmemmap_bytes().unwrap(), (3 + tails) * 4096);
    for r in m.folios() {
        assert_eq!(r.outcome.hvo, HvoOutcome::Optimized { head_copied: false, freed_pages: 7 });
    }
}

/// Runs `write` in a forked child (before exec) and returns how the child ended: killed by a
/// signal, or the error `write` returned when its store went through.
fn child_write(addr: usize) -> Result<i32, i32> {
    let mut cmd = Command::new("/nonexistent/never-executed");
    // SAFETY: the closure runs in the forked child before exec and only resets the SIGSEGV
    // action (async-signal-safe), performs one volatile store and builds an `io::Error` from a
    // raw code (no allocation, no lock). The store goes to a shared mapping of this test's memfd:
    // if it is (wrongly) writable, it overwrites one struct page word of a vmemmap the parent
    // does not read afterwards.
    unsafe {
        cmd.pre_exec(move || {
            // Sanitizer runtimes (ASan) catch SIGSEGV to print a report and exit(1): restore
            // the default action so the fault ends the child by the signal. signal(2) is
            // async-signal-safe.
            libc::signal(libc::SIGSEGV, libc::SIG_DFL);
            (addr as *mut u64).write_volatile(0x0bad_c0de);
            Err(std::io::Error::from_raw_os_error(WROTE))
        });
    }
    match cmd.spawn() {
        Ok(mut child) => {
            let status = child.wait().expect("wait");
            Ok(status.signal().unwrap_or(-1))
        }
        Err(e) => Err(e.raw_os_error().unwrap_or(-1)),
    }
}

/// A write to an optimized tail page is refused: the child that tries dies with SIGSEGV. The
/// same write to a tail of a folio whose HVO failed goes through (so the test can fail).
#[test]
fn real_hvo_write_to_an_optimized_tail_faults() {
    let mut m = OwnedBoot::<Page64>::packed(cfg(), h2m(), 1, 2, true).unwrap();
    // List position 0 fails (the higher folio), position 1 is optimized.
    let p =
        params(Strategy::Slow, HvoParams { fault: HvoFault::PageTable { every: 2 }, ..HvoMode::On.params() });
    m.boot(&BootRequest::per_node(h2m(), 2), &p).unwrap();
    let optimized = m.folios().iter().find(|r| r.outcome.optimized()).unwrap().head_pfn;
    let failed = m.folios().iter().find(|r| !r.outcome.optimized()).unwrap().head_pfn;
    let v = m.vmemmap(0);
    assert_eq!(child_write(v.host_addr(optimized + 100)), Ok(SIGSEGV), "write to an optimized tail");
    assert_eq!(child_write(v.host_addr(optimized + 511)), Ok(SIGSEGV), "write to the last tail");
    assert_eq!(child_write(v.host_addr(failed + 100)), Err(WROTE), "write to a normal tail");
    // The head vmemmap page stays writable (the kernel maps it PAGE_KERNEL).
    assert_eq!(child_write(v.host_addr(optimized + 5)), Err(WROTE), "write to the head vmemmap page");
}

/// `/proc/self/maps` shows the optimized tails' vmemmap pages mapped read-only and the head's
/// read-write.
#[test]
fn real_hvo_maps_tail_vmemmap_pages_read_only() {
    let mut m = OwnedBoot::<Page64>::packed(cfg(), h2m(), 1, 1, false).unwrap();
    m.boot(&BootRequest::per_node(h2m(), 1), &params(Strategy::Template, HvoMode::On.params())).unwrap();
    let head = m.folios()[0].head_pfn;
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let perms = |addr: usize| -> String {
        maps.lines()
            .find_map(|l| {
                let (range, rest) = l.split_once(' ')?;
                let (s, e) = range.split_once('-')?;
                let (s, e) = (usize::from_str_radix(s, 16).ok()?, usize::from_str_radix(e, 16).ok()?);
                (s <= addr && addr < e).then(|| rest[..3].to_string())
            })
            .unwrap_or_else(|| panic!("{addr:#x} not in /proc/self/maps"))
    };
    let v = m.vmemmap(0);
    assert_eq!(perms(v.host_addr(head)), "rw-");
    for k in 1..8 {
        assert_eq!(perms(v.host_addr(head + 64 * k)), "r--", "tail vmemmap page {k}");
    }
}

/// The real implementation and the no_std model produce the same vmemmap view, for every HVO
/// mode and strategy (x86-64 2 MiB: 2 nodes x 2; 1 GiB: one folio, Template only), and with 16
/// and 64 KiB vmemmap pages (HVO built into arm64 16K and ppc64el 64K: 32 MiB and 1 GiB pages,
/// each vmemmap page one mapping of several host pages).
#[test]
fn real_hvo_view_equals_the_model() {
    let arm16 = KernelConfig { hugetlb_vmemmap: true, ..KernelConfig::ARM64_16K };
    let ppc64 = KernelConfig { hugetlb_vmemmap: true, ..KernelConfig::PPC64EL_64K };
    let all: &[Strategy] = &[Strategy::Slow, Strategy::Template, Strategy::Streaming];
    let cases: &[(KernelConfig, Hstate, u32, u64, &[Strategy])] = &[
        (cfg(), h2m(), 2, 2, all),
        (cfg(), h1g(), 1, 1, &[Strategy::Template]),
        (arm16, Hstate::new(&arm16, 32 << 20).unwrap(), 1, 2, all),
        (ppc64, Hstate::new(&ppc64, 1 << 30).unwrap(), 1, 2, &[Strategy::Streaming]),
    ];
    for &(cfg, h, nodes, count, strategies) in cases {
        let specs: Vec<_> =
            packed(h, nodes, count).into_iter().map(|s| NodeSpec { zone: cfg.zone_normal(), ..s }).collect();
        for hvo in HvoMode::ALL.iter().copied() {
            for &s in strategies {
                let what = format!("{} {h} {hvo:?} {s}", cfg.name);
                let p = params(s, hvo.params());
                let req = BootRequest::per_node(h, count);
                let model = boot_model::<Page64>(cfg, &specs, &req, &p, false).unwrap();
                let mut real = OwnedBoot::<Page64>::packed(cfg, h, nodes, count, true).unwrap();
                let report = real.boot(&req, &p).unwrap();
                assert_eq!(
                    report.optimized,
                    if hvo == HvoMode::On { u64::from(nodes) * count } else { 0 },
                    "{what}: {:?}",
                    real.folios()
                );
                let bytes = real.folio_bytes();
                let mut i = 0;
                let mut heads: Vec<u64> = model.records.iter().map(|r| r.head_pfn).collect();
                heads.sort_unstable();
                for head in heads {
                    for pfn in head..head + h.nr_pages() {
                        let mut want = [0u8; 64];
                        model.page(pfn).to_bytes(&mut want);
                        assert!(bytes[i..i + 64] == want, "{what}: pfn {pfn:#x}");
                        i += 64;
                    }
                }
                assert_eq!(i, bytes.len());
                let outcomes: Vec<_> = real.folios().iter().map(|r| r.outcome.optimized()).collect();
                assert_eq!(outcomes, model.records.iter().map(|r| r.outcome.optimized()).collect::<Vec<_>>());
                let order = cfg.pageblock_order;
                for (a, b) in model.nodes.iter().zip(0..) {
                    let off = ((a.spec.start_pfn >> order) - (a.base >> order)) as usize;
                    let pb = real.vmemmap(b).pageblocks();
                    assert_eq!(&a.pageblocks[off..off + pb.len()], pb, "{what}: pageblocks");
                }
                if hvo == HvoMode::On {
                    // One vmemmap page (a head copy) per folio and the node's shared tail page
                    // stay resident.
                    let page = cfg.page_size();
                    let tails = u64::from(cfg.behaviour().hvo_shared_tail);
                    assert_eq!(
                        real.resident_vmemmap_bytes().unwrap(),
                        u64::from(nodes) * (count + tails) * page,
                        "{what}"
                    );
                }
            }
        }
    }
}

/// The 72-byte layout cannot be optimized: the memfd vmemmap falls back and matches the model.
#[test]
fn real_hvo_layout72_falls_back() {
    let h = h2m();
    let p = params(Strategy::Streaming, HvoMode::On.params());
    let req = BootRequest::per_node(h, 2);
    let mut real = OwnedBoot::<Page72>::packed(cfg(), h, 1, 2, true).unwrap();
    let report = real.boot(&req, &p).unwrap();
    assert_eq!((report.optimized, report.fallback_folios), (0, 2));
    let model = boot_model::<Page72>(cfg(), &packed(h, 1, 2), &req, &p, false).unwrap();
    for r in real.folios() {
        assert_eq!(r.outcome.fallback.unwrap().pages, 512 - hugetlb_vmemmap_reserve_pages::<Page72>(&cfg()));
        for pfn in r.pfns() {
            assert_eq!(real.read(pfn).unwrap(), model.page(pfn));
        }
    }
    assert_eq!(real.resident_vmemmap_bytes().unwrap(), (2 * 512 * 72u64).div_ceil(4096) * 4096);
}

/// Bad sizes are typed errors.
#[test]
fn real_hvo_vmemmap_rejects_overflowing_ranges() {
    assert!(MemfdVmemmap::<Page64>::new(cfg(), u64::MAX - 1, 4, 0, false).is_err());
    let bad = KernelConfig { max_nr_zones: 9, ..cfg() };
    assert!(MemfdVmemmap::<Page64>::new(bad, 0, 4, 0, false).is_err());
    let v = MemfdVmemmap::<Page64>::new(cfg(), 1 << 20, 512, 1, false).unwrap();
    assert_eq!(v.resident_bytes().unwrap(), 0, "nothing resident before anything is written");
    assert_eq!(v.read(1 << 20), Page64::ZEROED);
}
