//! What parsing a hostile `meta.json` allocates: a counting allocator measures the peak of
//! `parse_meta` on files at the reader's limits in the shapes that cost the most per byte
//! (arrays of one-digit numbers, of one-entry objects, of nested one-element arrays, of short
//! strings; one long string), and on files just over them (refused before the parse).
//!
//! One test in this binary, so nothing else allocates while it measures.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use memmap_core::{KernelConfig, MemoryType, Strategy};
use memmap_dump::read::{MAX_META_BYTES, MAX_META_VALUES};
use memmap_dump::{DumpError, ZoneDeviceDump, parse_meta};

/// The system allocator, counting the bytes live and their peak.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so the
// `GlobalAlloc` contract `System` keeps is kept; the counters only observe the sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(layout.size(), Ordering::SeqCst) + layout.size();
        PEAK.fetch_max(live, Ordering::SeqCst);
        // SAFETY: the caller's `layout` has a non-zero size, as `GlobalAlloc::alloc` requires
        // of its caller; it is passed on unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::SeqCst);
        // SAFETY: `ptr` was returned by `alloc` (so by `System.alloc`) with this `layout`, as
        // the caller guarantees.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// The peak bytes allocated by `parse_meta(json)` above what was live before, and whether it
/// parsed.
fn peak_of(json: &[u8]) -> (usize, Result<(), DumpError>) {
    let before = LIVE.load(Ordering::SeqCst);
    PEAK.store(before, Ordering::SeqCst);
    let r = parse_meta(json, Path::new("meta.json")).map(drop);
    (PEAK.load(Ordering::SeqCst) - before, r)
}

/// A real zone-device `meta.json` with `extra` (a JSON value's text) under a key of its own.
fn with_extra(base: &str, extra: &str) -> Vec<u8> {
    let head = base.trim_end().strip_suffix('}').expect("an object");
    format!("{head}, \"extra\": {extra}}}").into_bytes()
}

/// `[E,E,...,E]` of `n` elements.
fn array(elem: &str, n: usize) -> String {
    let mut s = String::with_capacity(n * (elem.len() + 1) + 2);
    s.push('[');
    for i in 0..n {
        if i > 0 {
            s.push(',');
        }
        s.push_str(elem);
    }
    s.push(']');
    s
}

#[test]
fn parsing_a_meta_json_at_its_limits_allocates_a_bounded_amount() {
    let base = ZoneDeviceDump {
        config: KernelConfig::X86_64,
        layout72: false,
        memory_type: MemoryType::Generic,
        vmemmap_shift: 9,
        altmap: None,
        start_pfn: 0x100000,
        nr_pages: 4096,
        nid: 0,
        strategy: Strategy::Auto,
        page_ref_trace: false,
        boot_memory_end_pfn: 0,
    }
    .run()
    .expect("a small dump");
    let base = serde_json::to_string_pretty(&base.meta).expect("serialize");
    // The bound the reader's documentation states.
    let bound = |len: usize| 100 * MAX_META_VALUES as usize + 2 * len;
    // Elements and their counted values (an array 4, an object 8, a scalar, string or key 1).
    let shapes = [("0", 1), ("\"a\"", 1), ("{\"a\":0}", 10), ("[0]", 5), ("[]", 4), ("{}", 8)];
    for (elem, weight) in shapes {
        // As many as fit beside the base file's own values, and then twice that.
        let n = (MAX_META_VALUES as usize - 4096) / weight;
        let json = with_extra(&base, &array(elem, n));
        let (peak, r) = peak_of(&json);
        assert!(r.is_ok(), "{elem}: {r:?}");
        assert!(
            peak <= bound(json.len()),
            "{elem} x {n}: {peak} bytes allocated, bound {}",
            bound(json.len())
        );
        eprintln!("{elem} x {n}: {} bytes, peak {peak} ({} per value)", json.len(), peak / (n * weight));
        let json = with_extra(&base, &array(elem, 2 * n));
        let (peak, r) = peak_of(&json);
        assert!(matches!(r, Err(DumpError::JsonLimit { .. })), "{elem} x {}: {r:?}", 2 * n);
        assert!(peak < 4096, "{elem}: refused after allocating {peak} bytes");
    }
    // One string as long as the file may be.
    let long = format!("\"{}\"", "x".repeat(MAX_META_BYTES as usize - base.len() - 64));
    let json = with_extra(&base, &long);
    let (peak, r) = peak_of(&json);
    assert!(r.is_ok(), "{r:?}");
    assert!(peak <= 2 * json.len() + (1 << 20), "a long string: {peak} bytes allocated");
    // Nesting deeper than the limit is refused before the parser recurses.
    let deep = with_extra(&base, &("[".repeat(40) + &"]".repeat(40)));
    assert!(matches!(peak_of(&deep).1, Err(DumpError::JsonLimit { what: "levels of nesting", .. })));
}
