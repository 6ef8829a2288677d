//! What the oracle's readers allocate on hostile input, measured by a counting allocator: a
//! `facts.json` and a golden `extract.json` at their JSON limits in the shapes that cost the
//! most per byte (and just over them: refused before the parse), module decompression bombs
//! (gzip, xz, zstd), and a gzip'd arm64 `Image` with no banner.
//!
//! One test in this binary, so nothing else allocates while it measures.

use std::path::Path;

use kernel_oracle::compare::golden::Golden;
use kernel_oracle::facts::{FACTS_LIMITS, Facts, JSON_LIMITS};
use kernel_oracle::kernel::modules::{self, MAX_MODULE_BYTES};
use kernel_oracle::kernel::{self, MAX_BINARY_BYTES};

// The counting allocator and the JSON shapes memmap-dump's reader tests use too.
#[path = "../../memmap-dump/tests/common/peak.rs"]
mod peak;

use peak::{array, peak_of};

#[global_allocator]
static ALLOC: peak::Counting = peak::Counting;

/// A committed `facts.json` as a JSON value, with its regions' `vmemmap_gpa` and the guest's
/// text blocks as they are.
fn golden_facts() -> (serde_json::Value, Vec<u8>, Vec<u8>) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("golden/7.2-amd64/devdax-2m-dev");
    let facts = std::fs::read(dir.join("facts.json")).unwrap();
    let extract = std::fs::read(dir.join("extract.json")).unwrap();
    let pages = std::fs::read(dir.join("pages.bin.gz")).unwrap();
    (serde_json::from_slice(&facts).unwrap(), extract, pages)
}

/// `facts` with `key` of its first region (or, for `guest`, of the facts) replaced by `text`.
fn with(facts: &serde_json::Value, region_key: Option<&str>, key: &str, text: &str) -> Vec<u8> {
    let mut f = facts.clone();
    let marker = "\"@@REPLACE@@\"";
    match region_key {
        Some(_) => f["regions"][0][key] = serde_json::Value::from("@@REPLACE@@"),
        None => f[key] = serde_json::Value::from("@@REPLACE@@"),
    }
    serde_json::to_string(&f).unwrap().replace(marker, text).into_bytes()
}

fn facts_at_their_limits() {
    let (facts, _, _) = golden_facts();
    let limit = FACTS_LIMITS.max_values as usize;
    let bound = |len: usize| 100 * limit + 2 * len;
    let base_values = 8192;
    // Elements, their counted values, and where they go.
    let shapes: [(Option<&str>, &str, &str, usize); 4] = [
        (Some("r"), "vmemmap_gpa", "0", 1),
        (Some("r"), "vmemmap_gpa", "null", 1),
        (Some("r"), "pageblock_migratetypes", "1", 1),
        (Some("r"), "allocated_blocks", "7", 1),
    ];
    for (region, key, elem, weight) in shapes {
        let n = (limit - base_values) / weight;
        let json = with(&facts, region, key, &array(elem, n));
        let (peak, _) = peak_of(|| Facts::parse(&json, Path::new("facts.json")).map(drop));
        assert!(
            peak <= bound(json.len()),
            "{key} of {elem} x {n}: {peak} bytes, bound {}",
            bound(json.len())
        );
        eprintln!("facts {key} {elem} x {n}: {} bytes, peak {peak}", json.len());
        let json = with(&facts, region, key, &array(elem, 2 * n));
        let (peak, r) = peak_of(|| Facts::parse(&json, Path::new("facts.json")).map(drop));
        let e = format!("{:#}", r.unwrap_err());
        assert!(e.contains("JSON values") && peak < 4096, "{key}: {e} after {peak} bytes");
    }
    // Maps of short strings: the guest's text blocks and the kernel's symbols.
    for key in ["guest", "kernel_symbols"] {
        let n = (limit - base_values) / 2;
        let map: Vec<String> = (0..n).map(|i| format!("\"{i:x}\":\"\"")).collect();
        let json = with(&facts, None, key, &format!("{{{}}}", map.join(",")));
        let (peak, _) = peak_of(|| Facts::parse(&json, Path::new("facts.json")).map(drop));
        assert!(peak <= bound(json.len()), "{key}: {peak} bytes, bound {}", bound(json.len()));
        eprintln!("facts {key} x {n}: {} bytes, peak {peak}", json.len());
    }
}

fn golden_extract_at_its_limits() {
    let (facts, extract, pages) = golden_facts();
    let facts = serde_json::to_vec(&facts).unwrap();
    let limit = JSON_LIMITS.max_values as usize;
    let n = (limit - 4096) / 2;
    let gpa: Vec<String> = (0..n).map(|i| format!("\"{i}\":0")).collect();
    let hostile = format!("{{\"regions\":[{{\"runs\":[],\"gpa\":{{{}}}}}]}}", gpa.join(","));
    let (peak, r) = peak_of(|| Golden::parse(Path::new("g"), &facts, hostile.as_bytes(), &pages).map(drop));
    assert!(r.is_err());
    let bound = 100 * limit + 2 * hostile.len();
    assert!(peak <= bound, "extract gpa x {n}: {peak} bytes, bound {bound}");
    eprintln!("extract gpa x {n}: {} bytes, peak {peak}", hostile.len());
    let (_, r) = peak_of(|| Golden::parse(Path::new("g"), &facts, &extract, &pages).map(drop));
    assert!(r.is_ok(), "{r:?}");
}

/// `n` gzip members of 1 MiB of zeros each.
fn gzip_bomb(n: usize) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    std::io::Write::write_all(&mut gz, &vec![0u8; 1 << 20]).unwrap();
    gz.finish().unwrap().repeat(n)
}

fn decompression_bombs() {
    let dir = tempfile::Builder::new().prefix("oracle-peak-").tempdir().unwrap();
    // The decompressed bytes are read into a buffer that never grows past the limit + 1 (with
    // the old buffer beside the new one while it grows: under twice that).
    let bound = (MAX_MODULE_BYTES as usize + 1) * 2 + (1 << 20);
    for suffix in ["gz", "xz", "zst"] {
        let Some(frame) = frame(suffix) else {
            eprintln!("skipped .ko.{suffix}: its compressor is not installed");
            continue;
        };
        check_bomb(dir.path(), suffix, &frame, bound);
    }
}

/// One compressed frame of 1 MiB of zeros (`None`: the compressor is not installed).
fn frame(suffix: &str) -> Option<Vec<u8>> {
    let tool = match suffix {
        "gz" => return Some(gzip_bomb(1)),
        "xz" => "xz",
        _ => "zstd",
    };
    match kernel_oracle::cmd::filter(tool, &["-c"], &vec![0u8; 1 << 20], 1 << 20) {
        Ok(kernel_oracle::cmd::Filtered::Output(v)) => Some(v),
        _ => None,
    }
}

fn check_bomb(dir: &Path, suffix: &str, frame: &[u8], bound: usize) {
    // 200 MiB of zeros.
    let path = dir.join(format!("nd_pmem.ko.{suffix}"));
    std::fs::write(&path, frame.repeat(200)).unwrap();
    let (peak, r) = peak_of(|| modules::module_bytes(&path).map(drop));
    assert!(r.is_err(), "{suffix}: a 200 MiB module accepted");
    assert!(peak <= bound, "{suffix}: {peak} bytes allocated, bound {bound}");
    eprintln!("module .ko.{suffix} bomb: peak {peak}");
}

fn image_bomb() {
    // A gzip'd arm64 Image of 300 MiB (zeros after the header), no banner: read as a stream to
    // MAX_BINARY_BYTES, in a window.
    let mut head = vec![0u8; 1 << 20];
    head[0x38..0x3c].copy_from_slice(b"ARM\x64");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    std::io::Write::write_all(&mut gz, &head).unwrap();
    let mut raw = gz.finish().unwrap();
    raw.extend(gzip_bomb(300));
    let (peak, r) = peak_of(|| kernel::image_release_of(&raw).map(drop));
    let e = r.unwrap_err().to_string();
    assert!(e.contains("without a `Linux version` banner"), "{e}");
    assert!(peak < 2 << 20, "a {MAX_BINARY_BYTES}-byte image read in {peak} bytes");
    eprintln!("arm64 Image gzip bomb: peak {peak}");
}

#[test]
fn hostile_inputs_allocate_bounded_amounts() {
    facts_at_their_limits();
    golden_extract_at_its_limits();
    decompression_bombs();
    image_bomb();
}
