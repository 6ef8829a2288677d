//! The checks `memmap-bench dump` makes before any work: pfns past the configuration's last
//! one, ZONE_DEVICE ranges the kernel refuses, and memory checks sized from what the dump
//! really maps and records. The command lines are parsed against a fixed machine
//! ([`MemInfo::with_available`]), so nothing here depends on the host's memory; the ones that
//! are refused are also run, to see the exit status.

mod common;

use memmap_bench::cli::{CliError, Invocation, parse};
use memmap_bench::memory::MemInfo;

/// 20 GiB available of 24: a run may use 18.
fn machine() -> MemInfo {
    MemInfo::with_available(20 << 30, 24 << 30)
}

/// The refusal of `args` (after `memmap-bench`) on [`machine`].
fn refusal(args: &[&str]) -> String {
    match parse(std::iter::once("memmap-bench").chain(args.iter().copied()), &machine()) {
        Err(CliError::Usage(m)) => m,
        Err(CliError::Clap(e)) => panic!("{args:?}: a clap error: {e}"),
        Ok(inv) => panic!("{args:?}: accepted: {inv:?}"),
    }
}

fn accepted(args: &[&str]) -> Invocation {
    parse(std::iter::once("memmap-bench").chain(args.iter().copied()), &machine())
        .unwrap_or_else(|e| panic!("{args:?}: refused: {e:?}"))
}

/// Runs the binary: its exit status and stderr.
fn run(args: &[&str]) -> (Option<i32>, String) {
    let out = common::program().args(args).output().expect("run memmap-bench");
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// `dump hugetlb --place` past the configuration's last pfn is refused with exit status 2 and
/// the last pfn named (it reached an `unreachable!` in hugetlb-init: exit 101).
#[test]
fn a_placed_folio_past_the_last_pfn_is_refused() {
    for (hstate, place) in [("1G", "0xfffffffffffc0000@0"), ("2M", "0x400000000@0"), ("2M", "0x3fffffe01@1")]
    {
        let m =
            refusal(&["dump", "hugetlb", "--hstate", hstate, "--place", place, "--out", "/nonexistent/x"]);
        assert!(m.contains("past pfn 0x3ffffffff, the configuration's last (MAX_PHYSMEM_BITS 46)"), "{m}");
        let (code, err) =
            run(&["dump", "hugetlb", "--hstate", hstate, "--place", place, "--out", "/nonexistent/x"]);
        assert_eq!(code, Some(2), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    accepted(&["dump", "hugetlb", "--hstate", "2M", "--place", "0x3fffffe00@0", "--out", "/nonexistent/x"]);
}

/// `dump hugetlb --place` checks memory for every struct page from the lowest head to the end
/// of the highest folio, which it maps twice (the vmemmap, then `memmap.bin`): two far-apart
/// pfns used to pass a check sized from `--count` (0 there) and then fault in tens of GiB.
#[test]
fn placed_folios_far_apart_are_checked_for_their_span() {
    let m = refusal(&[
        "dump",
        "hugetlb",
        "--hstate",
        "2M",
        "--place",
        "0x1000@0",
        "--place",
        "0x10000000@0",
        "--out",
        "/nonexistent/x",
    ]);
    assert!(
        m.contains("every struct page from the lowest --place head 0x1000 to the end of the highest folio 0x10000200: 268431872 pages"),
        "{m}"
    );
    assert!(m.contains("needs 32 GiB - 438 KiB of memory"), "{m}");
    // Close together they fit.
    accepted(&[
        "dump",
        "hugetlb",
        "--hstate",
        "2M",
        "--place",
        "0x100000@0",
        "--place",
        "0x100800@0",
        "--out",
        "/nonexistent/x",
    ]);
}

/// `dump hotplug --page-ref-trace` counts its tracepoint events (two per page, 40 bytes each)
/// in its memory check, as `dump zone-device` does: a memmap of 9 GiB fits the machine's
/// 18 GiB, with its 11.25 GiB of events it does not.
#[test]
fn hotplug_tracepoint_events_count_in_the_memory_check() {
    let pages = (9u64 << 30) / 64;
    let p = pages.to_string();
    let base = ["dump", "hotplug", "--pages", &p, "--out", "/nonexistent/x"];
    accepted(&base);
    let m = refusal(&[&base[..], &["--page-ref-trace"]].concat());
    assert!(m.contains("the dump (memmap and tracepoint events) needs 20.2"), "{m}");
}

/// `dump zone-device --page-ref-trace` of compound `private` pages records three events per
/// tail (`init_page_count()`, the memory type's `set_page_count(0)`, the tail's own): the
/// check counts three, which bounds what a run records.
#[test]
fn zone_device_tracepoint_events_are_counted_per_memory_type() {
    // 64 + 3 * 40 = 184 bytes per page: 110 M pages need 18.9 GiB (with two events per page,
    // as before, 14.8 GiB would have passed).
    let private = ["dump", "zone-device", "--memory-type", "private", "--vmemmap-shift", "9"];
    let p = (215_040u64 * 512).to_string();
    let args = [&private[..], &["--pages", &p, "--out", "/nonexistent/x"]].concat();
    accepted(&args);
    let m = refusal(&[&args[..], &["--page-ref-trace"]].concat());
    assert!(m.contains("tracepoint events"), "{m}");
    // What one real run records stays within the count (the 72-byte layout writes every
    // struct page: no vmemmap deduplication).
    let dir = std::env::temp_dir().join(format!("memmap-bench-dump-checks-{}", std::process::id()));
    let d = dir.to_str().unwrap();
    let (code, err) =
        run(&[&private[..], &["--pages", "1024", "--layout", "72", "--page-ref-trace", "--out", d]].concat());
    assert_eq!(code, Some(0), "{err}");
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("meta.json")).unwrap()).unwrap();
    let events = meta["page_ref_events"].as_u64().unwrap();
    assert!(events > 2 * 1024 && events <= 3 * 1024, "{events}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A ZONE_DEVICE range the kernel maps no pages for is refused with the kernel's reason and
/// exit status 2, before any output: a 1 MiB-aligned fsdax namespace ("misaligned, unable to
/// map"), a devdax range not made of whole 2 MiB sub-sections ("Misaligned __add_pages").
#[test]
fn zone_device_ranges_the_kernel_refuses_are_refused() {
    let dir = std::env::temp_dir().join(format!("memmap-bench-unmappable-{}", std::process::id()));
    let d = dir.to_str().unwrap();
    let cases = [
        (
            ["--memory-type", "fsdax", "--start-pfn", "0x100100", "--pages", "262144"],
            "misaligned, unable to map",
        ),
        (
            ["--memory-type", "generic", "--start-pfn", "0x100000", "--pages", "1000"],
            "Misaligned __add_pages",
        ),
        (["--memory-type", "private", "--start-pfn", "0x100040", "--pages", "512"], "Misaligned __add_pages"),
    ];
    for (extra, needle) in cases {
        let args = [&["dump", "zone-device"][..], &extra[..], &["--out", d]].concat();
        let m = refusal(&args);
        assert!(m.contains(needle) && m.contains("multiples of 512 pages"), "{m}");
        let (code, err) = run(&args);
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains(needle), "{err}");
        assert!(!dir.exists(), "nothing is written");
    }
    // The golden extracts' namespaces (4 GiB, 1 GiB and the early-section one) are accepted.
    for (t, start, n) in [("fsdax", "0x100000", "262144"), ("generic", "0x104000", "245760")] {
        accepted(&[
            "dump",
            "zone-device",
            "--memory-type",
            t,
            "--start-pfn",
            start,
            "--pages",
            n,
            "--out",
            d,
        ]);
    }
}
