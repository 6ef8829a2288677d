//! The dump reader and diff on arbitrary `meta.json` + `memmap.bin` bytes: a typed error or a
//! validated dump, never a panic; a validated dump diffs identical with itself, and a one-byte
//! change is found at the right PFN.
//!
//! Input layout: two bytes (little-endian) giving the length of `meta.json`, then `meta.json`,
//! then `memmap.bin`. The seed corpus holds real dumps in that layout.
#![no_main]

use libfuzzer_sys::fuzz_target;
use memmap_dump::diff::{DiffResult, diff};
use memmap_dump::parse_dump;

fuzz_target!(|data: &[u8]| {
    let Some((len, rest)) = data.split_first_chunk::<2>() else { return };
    let n = usize::from(u16::from_le_bytes(*len)).min(rest.len());
    let (meta_json, memmap) = rest.split_at(n);
    let Ok(meta) = parse_dump(meta_json, memmap) else { return };
    // A validated dump: its length is exactly what the metadata says.
    assert_eq!(Some(memmap.len() as u64), meta.nr_pages.checked_mul(meta.struct_page_size as u64));
    let same = diff((&meta, memmap), (&meta, memmap)).expect("a dump is comparable with itself");
    assert_eq!(same, DiffResult::Identical { pages: meta.nr_pages });
    if memmap.is_empty() {
        return;
    }
    // Flip one byte, chosen by the input, and the diff must name its struct page.
    let at = usize::from(data[0]) * 257 % memmap.len();
    let mut other = memmap.to_vec();
    other[at] ^= 0x80;
    match diff((&meta, memmap), (&meta, &other)) {
        Ok(DiffResult::Differs { pfn, offset, differing_pages, .. }) => {
            assert_eq!(pfn, meta.start_pfn + (at / meta.struct_page_size) as u64);
            let off = at % meta.struct_page_size;
            assert!(offset <= off && off < offset + 8, "field at {offset} covers byte {off}");
            assert_eq!(differing_pages, 1);
        }
        other => panic!("a flipped byte at {at} not found: {other:?}"),
    }
    // Re-serialized metadata (what `dump` writes) is accepted again, with the same geometry.
    let text = serde_json::to_vec(&meta).expect("serialize");
    let again = parse_dump(&text, memmap).expect("round trip");
    assert_eq!(
        (again.start_pfn, again.nr_pages, again.struct_page_size),
        (meta.start_pfn, meta.nr_pages, meta.struct_page_size)
    );
});
