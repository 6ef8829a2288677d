//! What parsing a hostile `meta.json` allocates: a counting allocator measures the peak of
//! `parse_meta` on files at the reader's limits in the shapes that cost the most per byte
//! (arrays of one-digit numbers, of one-entry objects, of nested one-element arrays, of short
//! strings; one long string), and on files just over them (refused before the parse).
//!
//! One test in this binary, so nothing else allocates while it measures.

use std::path::Path;

use memmap_core::{KernelConfig, MemoryType, Strategy};
use memmap_dump::read::{MAX_META_BYTES, MAX_META_VALUES};
use memmap_dump::{DumpError, ZoneDeviceDump, parse_meta};

mod common;

use common::peak::{self, array};

#[global_allocator]
static ALLOC: peak::Counting = peak::Counting;

/// The peak bytes allocated by `parse_meta(json)` above what was live before, and whether it
/// parsed.
fn peak_of(json: &[u8]) -> (usize, Result<(), DumpError>) {
    peak::peak_of(|| parse_meta(json, Path::new("meta.json")).map(drop))
}

/// A real zone-device `meta.json` with `extra` (a JSON value's text) under a key of its own.
fn with_extra(base: &str, extra: &str) -> Vec<u8> {
    let head = base.trim_end().strip_suffix('}').expect("an object");
    format!("{head}, \"extra\": {extra}}}").into_bytes()
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
        boot_memory_above_pfn: u64::MAX,
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
