//! The readers of what users and guests hand the oracle and the dump tools, hostile: JSON held
//! to its limits before it is parsed (a `facts.json`, and `meta.json`s built to be deep or to
//! hold many values in the shapes that cost the most per byte), module decompression (gzip in
//! process, xz and zstd as programs) against a small maximum, a kernel image's release, and
//! the one check names from data pass before they name a path. Every input gives a typed error
//! or a result within its stated bound, never a panic; libFuzzer's RSS limit (2 GiB in
//! `ci/fuzz.sh`) catches an allocation the limits do not bound.
//!
//! The first byte chooses the reader (modulo 6), the rest is its input:
//!
//! * 0: `Facts::parse` of raw bytes; a parsed `Facts` keeps the validated geometry;
//! * 1: `parse_meta` of a `meta.json` built from `(shape, count, depth)`: a committed dump's
//!   metadata with an extra key holding `count` copies of a shape nested `depth` deep;
//! * 2, 3, 4: `modules::decompress` as gzip, xz and zstd with a 1 MiB maximum (xz and zstd only
//!   where installed): at most 1 MiB comes out;
//! * 5: `image_release_of` (a release it returns is one plain file name) and `files::name` of
//!   the input as text (an accepted name is one path component).
#![no_main]

use std::path::{Component, Path};

use arbitrary::{Arbitrary, Unstructured};
use kernel_oracle::facts::{Facts, MAX_REGION_PAGES, MAX_REGIONS, MAX_TOTAL_PAGES};
use kernel_oracle::kernel;
use kernel_oracle::kernel::modules::{self, Compression};
use libfuzzer_sys::fuzz_target;
use memmap_dump::{DumpError, parse_meta};

/// A committed dump's metadata (seed 1 of corpus/dump_reader: a zone-device dump).
const META: &str = r#"{"format":1,"kind":"zone-device","config":"x86_64","endianness":"little",
"start_pfn":1048576,"nr_pages":8,"struct_page_size":72,"page_addr_base":18446719884497780736,
"page_addr_base_hex":"0xffffea0002400000","zone":4,"nid":0,"flags_layout":{"zones_pgshift":51,
"zones_width":3,"nodes_pgshift":54,"nodes_width":10,"sections_pgshift":0,"sections_width":0,
"last_cpupid_pgshift":30,"last_cpupid_width":21},"pg_bits":{"reserved":13,"head":6,
"hugetlb_page_type":4093640704},"movable_pageblock_pfns":[1048576],"resched_pfns":0,
"page_ref_events":0,"strategy":"streaming","strategy_requested":"streaming",
"strategy_reason":"requested","backend":"x86_64","vmemmap_shift":2,"init_start_pfn":1048576}"#;

/// Shapes that cost the most per byte once parsed.
const SHAPES: [&str; 8] = ["0", "null", "\"\"", "\"a\"", "[]", "{}", "[0]", "{\"a\":0}"];

#[derive(Debug, Arbitrary)]
struct Amplified {
    shape: u8,
    /// Copies, times 64 (up to 4 Mi: past the value limit).
    count: u16,
    /// Nesting of the copies' array (up to 255: past the depth limit).
    depth: u8,
    /// Put the copies where a typed field expects them (`movable_pageblock_pfns`).
    typed: bool,
}

fn amplified(a: &Amplified) -> String {
    let elem = SHAPES[usize::from(a.shape) % SHAPES.len()];
    let n = usize::from(a.count) * 64;
    let mut list = String::with_capacity(n * (elem.len() + 1) + 2 * usize::from(a.depth) + 2);
    list.extend(std::iter::repeat_n('[', usize::from(a.depth)));
    list.push('[');
    for i in 0..n {
        if i > 0 {
            list.push(',');
        }
        list.push_str(elem);
    }
    list.push(']');
    list.extend(std::iter::repeat_n(']', usize::from(a.depth)));
    let head = META.trim_end().strip_suffix('}').expect("an object");
    if a.typed {
        head.replace("\"movable_pageblock_pfns\":[1048576]", &format!("\"movable_pageblock_pfns\":{list}"))
            + "}"
    } else {
        format!("{head},\"extra\":{list}}}")
    }
}

fn facts(data: &[u8]) {
    match Facts::parse(data, Path::new("facts.json")) {
        Ok(f) => {
            // What compare relies on, checked before it reads anything.
            assert!(f.regions.len() <= MAX_REGIONS);
            assert!(f.regions.iter().map(|r| r.nr_pages).sum::<u64>() <= MAX_TOTAL_PAGES);
            for r in &f.regions {
                assert!((1..=MAX_REGION_PAGES).contains(&r.nr_pages));
                assert!(r.start_pfn.checked_add(r.nr_pages).is_some_and(|e| e <= f.vmemmap_size / 64));
            }
        }
        Err(e) => assert!(format!("{e:#}").contains("facts.json"), "{e:#}"),
    }
}

fn meta(data: &[u8]) {
    let Ok(a) = Amplified::arbitrary(&mut Unstructured::new(data)) else { return };
    let json = amplified(&a);
    match parse_meta(json.as_bytes(), Path::new("meta.json")) {
        Ok((m, len)) => assert_eq!(Some(len), m.nr_pages.checked_mul(m.struct_page_size as u64)),
        Err(
            DumpError::JsonLimit { .. }
            | DumpError::TooLarge { .. }
            | DumpError::Json { .. }
            | DumpError::Invalid { .. },
        ) => {}
        Err(e) => panic!("an unexpected error: {e}"),
    }
}

fn decompress(how: Compression, data: &[u8]) {
    const MAX: u64 = 1 << 20;
    let tool = match how {
        Compression::Xz => "xz",
        Compression::Zstd => "zstd",
        _ => "",
    };
    if !tool.is_empty() && !kernel_oracle::cmd::on_path(tool) {
        return;
    }
    if let Ok(out) = modules::decompress(Path::new("m.ko"), data, how, MAX) {
        assert!(out.len() as u64 <= MAX);
    }
}

fn names(data: &[u8]) {
    if let Ok((_, release)) = kernel::image_release_of(data) {
        assert!(kernel_oracle::files::name("release", &release).is_ok());
    }
    let text = String::from_utf8_lossy(data);
    if let Ok(n) = kernel_oracle::files::name("name", &text) {
        let parts: Vec<_> = Path::new(n).components().collect();
        assert!(matches!(parts[..], [Component::Normal(c)] if c == n), "{n:?}: {parts:?}");
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    match mode % 6 {
        0 => facts(rest),
        1 => meta(rest),
        2 => decompress(Compression::Gzip, rest),
        3 => decompress(Compression::Xz, rest),
        4 => decompress(Compression::Zstd, rest),
        _ => names(rest),
    }
});
