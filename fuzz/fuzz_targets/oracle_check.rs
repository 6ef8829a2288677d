//! What `kernel-oracle check` reads, hostile: the three files of a golden extract
//! (`facts.json`, `extract.json`, `pages.bin.gz`) through `Golden::parse`, the function
//! `Golden::load` (and so `check`) hands them to. Every input is a `GoldenError` or an extract
//! on which the class checks, the page lists and (for small extracts) the comparison with the
//! model run without a panic; libFuzzer's RSS limit (2 GiB in `ci/fuzz.sh`) catches an
//! unbounded allocation, a gzip bomb included.
//!
//! The first byte chooses the input's form (bit 0) and whether an extract small enough is also
//! compared with the model (bit 1: a model run per input, some milliseconds):
//!
//! * bit 0 clear: raw files, `u32` little-endian lengths of `facts.json` and `extract.json`, then the
//!   three files back to back (the seeds hold the committed extracts in this form);
//! * bit 0 set: structured edits of one of four committed extracts (numbers in its facts and runs,
//!   regions or runs dropped, the guest's `iomem` or a `System RAM` line of it, the page bytes
//!   cut, grown or replaced by a gzip bomb), so that the fuzzer reaches the geometry checks past the JSON parser.
#![no_main]

use std::path::Path;
use std::sync::OnceLock;

use arbitrary::{Arbitrary, Unstructured};
use kernel_oracle::compare::golden::Golden;
use kernel_oracle::facts::MAX_PAGES_BYTES;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

macro_rules! extract {
    ($dir:literal) => {
        (
            include_bytes!(concat!("../../crates/kernel-oracle/golden/", $dir, "/facts.json")).as_slice(),
            include_bytes!(concat!("../../crates/kernel-oracle/golden/", $dir, "/extract.json")).as_slice(),
            include_bytes!(concat!("../../crates/kernel-oracle/golden/", $dir, "/pages.bin.gz")).as_slice(),
        )
    };
}

/// ZONE_DEVICE with an altmap; ZONE_DEVICE and hugetlb on two nodes; small hugetlb folios on
/// amd64 and arm64.
const REAL: [(&[u8], &[u8], &[u8]); 4] = [
    extract!("7.2-amd64/devdax-2m-dev"),
    extract!("7.2-amd64/numa2-hugetlb-1g-hvo-on-devdax-2m"),
    extract!("6.12-amd64/hugetlb-2m-hvo-on"),
    extract!("7.2-arm64/arm64-hugetlb-2m"),
];

/// A number field of the facts (`region` picks the region) or of the extract's runs.
#[derive(Debug, Arbitrary)]
enum Field {
    VmemmapBase,
    VmemmapSize,
    StructPageSize,
    Format,
    StartPfn(u8),
    NrPages(u8),
    VmemmapShift(u8),
    InitStartPfn(u8),
    PageblockFirstPfn(u8),
    Nid(u8),
    FolioOrder(u8),
    FolioHead(u8),
    FolioNid(u8),
    AltmapReserve(u8),
    AltmapFree(u8),
    RunStart(u8, u8),
    RunPages(u8, u8),
}

#[derive(Debug, Arbitrary)]
enum Edit {
    /// A field set to a value near a real one (`delta`) or anywhere (`raw`).
    Set {
        field: Field,
        value: Result<i32, u64>,
    },
    DropRegion(u8),
    DropRun(u8, u8),
    Iomem(String),
    /// A top-level `System RAM` line added to the guest's iomem (`start-end`, inclusive, hex).
    IomemRam(u64, u64),
}

#[derive(Debug, Arbitrary)]
enum PagesEdit {
    Keep,
    /// Cut (negative) or grow (positive) the decompressed pages by that many bytes.
    Resize(i32),
    /// Arbitrary bytes, not gzip.
    Garbage(Vec<u8>),
    /// A gzip stream that inflates past `MAX_PAGES_BYTES`.
    Bomb,
}

#[derive(Debug, Arbitrary)]
struct Edits {
    which: u8,
    edits: Vec<Edit>,
    pages: PagesEdit,
}

fn region<'a>(v: &'a mut Value, i: u8) -> Option<&'a mut Value> {
    let rs = v.get_mut("regions")?.as_array_mut()?;
    let n = rs.len();
    (n > 0).then(|| &mut rs[usize::from(i) % n])
}

/// The number at `v`, moved: a delta keeps it near a real value, `raw` replaces it.
fn set(v: Option<&mut Value>, value: &Result<i32, u64>) {
    let Some(v) = v else { return };
    let old = v.as_u64().unwrap_or(0);
    *v = Value::from(match *value {
        Ok(d) => old.wrapping_add_signed(i64::from(d)),
        Err(raw) => raw,
    });
}

fn apply(facts: &mut Value, extract: &mut Value, e: &Edit) {
    match e {
        Edit::Set { field, value } => {
            fn f<'v>(name: &str, i: &u8, facts: &'v mut Value) -> Option<&'v mut Value> {
                region(facts, *i).map(|r| &mut r[name])
            }
            let target = match field {
                Field::VmemmapBase => Some(&mut facts["vmemmap_base"]),
                Field::VmemmapSize => Some(&mut facts["vmemmap_size"]),
                Field::StructPageSize => Some(&mut facts["struct_page_size"]),
                Field::Format => Some(&mut facts["format"]),
                Field::StartPfn(i) => f("start_pfn", i, facts),
                Field::NrPages(i) => f("nr_pages", i, facts),
                Field::VmemmapShift(i) => f("vmemmap_shift", i, facts),
                Field::InitStartPfn(i) => f("init_start_pfn", i, facts),
                Field::PageblockFirstPfn(i) => f("pageblock_first_pfn", i, facts),
                Field::Nid(i) => f("nid", i, facts),
                Field::FolioOrder(i) => region(facts, *i).map(|r| &mut r["folio"]["order"]),
                Field::FolioHead(i) => region(facts, *i).map(|r| &mut r["folio"]["head_pfn"]),
                Field::FolioNid(i) => region(facts, *i).map(|r| &mut r["folio"]["nid"]),
                Field::AltmapReserve(i) => region(facts, *i).map(|r| &mut r["altmap"]["reserve"]),
                Field::AltmapFree(i) => region(facts, *i).map(|r| &mut r["altmap"]["free"]),
                Field::RunStart(i, j) | Field::RunPages(i, j) => region(extract, *i).and_then(|r| {
                    let runs = r.get_mut("runs")?.as_array_mut()?;
                    let n = runs.len();
                    let name = if matches!(field, Field::RunStart(..)) { "start_pfn" } else { "nr_pages" };
                    (n > 0).then(|| &mut runs[usize::from(*j) % n][name])
                }),
            };
            // Only fields that hold a number (or objects that exist) are edited.
            if target.as_ref().is_some_and(|t| t.is_number() || t.is_null()) {
                set(target, value);
            }
        }
        Edit::DropRegion(i) => {
            for v in [facts, extract] {
                if let Some(rs) = v.get_mut("regions").and_then(Value::as_array_mut) {
                    if !rs.is_empty() {
                        let n = rs.len();
                        rs.remove(usize::from(*i) % n);
                    }
                }
            }
        }
        Edit::DropRun(i, j) => {
            if let Some(runs) = region(extract, *i).and_then(|r| r.get_mut("runs")?.as_array_mut()) {
                if !runs.is_empty() {
                    let n = runs.len();
                    runs.remove(usize::from(*j) % n);
                }
            }
        }
        Edit::Iomem(s) => facts["guest"]["iomem"] = Value::from(s.as_str()),
        Edit::IomemRam(start, end) => {
            let old = facts["guest"]["iomem"].as_str().unwrap_or_default().to_string();
            facts["guest"]["iomem"] = Value::from(format!("{start:x}-{end:x} : System RAM\n{old}"));
        }
    }
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(bytes).expect("in memory");
    gz.finish().expect("in memory")
}

fn gunzip(gz: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(gz).read_to_end(&mut out).expect("a committed extract");
    out
}

/// A small gzip stream of zeros that inflates to 1 MiB more than the limit.
fn bomb() -> &'static [u8] {
    static BOMB: OnceLock<Vec<u8>> = OnceLock::new();
    BOMB.get_or_init(|| gzip(&vec![0u8; (MAX_PAGES_BYTES + (1 << 20)) as usize]))
}

/// The three files of a structured input.
fn edited(u: &mut Unstructured<'_>) -> arbitrary::Result<(Vec<u8>, Vec<u8>, Vec<u8>)> {
    let e = Edits::arbitrary(u)?;
    let (f, x, p) = REAL[usize::from(e.which) % REAL.len()];
    let mut facts: Value = serde_json::from_slice(f).expect("committed facts");
    let mut extract: Value = serde_json::from_slice(x).expect("committed extract");
    // What check does not read (most of the bytes: the guest's text blocks but iomem, the QEMU
    // command line), so that each input parses fast.
    if let Some(g) = facts.get_mut("guest").and_then(Value::as_object_mut) {
        g.retain(|k, _| k == "iomem");
    }
    facts["qemu_argv"] = Value::Array(Vec::new());
    for edit in e.edits.iter().take(8) {
        apply(&mut facts, &mut extract, edit);
    }
    let pages = match e.pages {
        PagesEdit::Keep => p.to_vec(),
        PagesEdit::Resize(d) => {
            let mut raw = gunzip(p);
            let len = raw.len().saturating_add_signed(d.clamp(-(1 << 20), 1 << 20) as isize);
            raw.resize(len, 0x5a);
            gzip(&raw)
        }
        PagesEdit::Garbage(g) => g,
        PagesEdit::Bomb => bomb().to_vec(),
    };
    let facts = serde_json::to_vec(&facts).expect("serialize");
    let extract = serde_json::to_vec(&extract).expect("serialize");
    Ok((facts, extract, pages))
}

/// The three files of a raw input.
fn raw(data: &[u8]) -> Option<(&[u8], &[u8], &[u8])> {
    let (a, rest) = data.split_first_chunk::<4>()?;
    let (b, rest) = rest.split_first_chunk::<4>()?;
    let a = (u32::from_le_bytes(*a) as usize).min(rest.len());
    let (facts, rest) = rest.split_at(a);
    let b = (u32::from_le_bytes(*b) as usize).min(rest.len());
    let (extract, pages) = rest.split_at(b);
    Some((facts, extract, pages))
}

fn check(facts: &[u8], extract: &[u8], pages: &[u8], with_model: bool) {
    let dir = Path::new("golden/fuzz");
    let g = match Golden::parse(dir, facts, extract, pages) {
        Ok(g) => g,
        Err(e) => {
            // A typed error that says what is wrong.
            assert!(!e.to_string().is_empty());
            return;
        }
    };
    // The pages are exactly the runs' struct pages.
    for (i, e) in g.extract.regions.iter().enumerate() {
        let n: u64 = e.runs.iter().map(|r| r.nr_pages).sum();
        assert_eq!(g.pages(i).len() as u64, n);
    }
    let _ = g.checks();
    // The comparison with the model, for extracts small enough to run it per input (the
    // model's own inputs are fuzzed by size_args): ZONE_DEVICE regions of a few thousand
    // pages, hugetlb with 2 MiB folios on few nodes.
    let small = with_model
        && g.facts.regions.iter().all(|r| {
            r.nr_pages <= 4096 && (r.kind != "hugetlb" || (r.hstate.as_deref() == Some("2M") && r.nid < 4))
        });
    if small {
        // The model runs in memory: nothing is written.
        let _ = g.compare_with_model();
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let with_model = mode & 2 != 0;
    if mode & 1 == 0 {
        if let Some((f, x, p)) = raw(rest) {
            check(f, x, p, with_model);
        }
    } else if let Ok((f, x, p)) = edited(&mut Unstructured::new(rest)) {
        check(&f, &x, &p, with_model);
    }
});
