//! Comparing two dumps: every differing struct page counted by field and by role, the first
//! few of each role shown, and the pageblocks and hook counts compared ([`DiffReport`]).
//!
//! Two dumps compare when they describe the same memory the same way (the preset's *name* may
//! differ); otherwise [`Incomparable`] says what differs. The struct pages are read a chunk at a
//! time. A struct page's *role* (`head`, `page[1]`, `page[2]`, `tail`, `aliased` for a
//! deduplicated or HVO vmemmap, `page`, `before-init` for the altmap part) comes from the metadata.

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, Read};
use std::path::Path;

use crate::read::{OpenDump, validate_meta};
use crate::write::{MEMMAP_FILE, META_FILE};

mod report;
use crate::{DumpError, DumpMeta};
pub use report::{DiffReport, FieldCount, FieldDiff, HookCounts, PageDiff, PageblockDiff, RoleCount};

/// Name of the `struct page` field at byte `offset` of a struct page (64- or 72-byte layout).
#[must_use]
pub fn field_name(offset: usize) -> &'static str {
    match offset {
        0..=7 => "flags",
        8..=15 => "lru.next/compound_head/pgmap (@8)",
        16..=23 => "lru.prev/zone_device_data (@16)",
        24..=31 => "mapping",
        32..=39 => "index",
        40..=47 => "private",
        48..=51 => "_mapcount/page_type",
        52..=55 => "_refcount",
        56..=63 => "memcg_data",
        64..=71 => "virtual",
        _ => "(beyond struct page)",
    }
}

/// The fields of a struct page as `(offset, len)`: 8-byte words, the two 4-byte halves at 48.
const FIELDS: [(usize, usize); 10] =
    [(0, 8), (8, 8), (16, 8), (24, 8), (32, 8), (40, 8), (48, 4), (52, 4), (56, 8), (64, 8)];

/// Examples kept per role.
pub const EXAMPLES_PER_ROLE: usize = 3;

/// Two dumps that cannot be compared byte for byte, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incomparable {
    /// The field that differs.
    pub field: &'static str,
    /// Its value in A.
    pub a: String,
    /// Its value in B.
    pub b: String,
}

impl fmt::Display for Incomparable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the dumps cannot be compared: {} differs (A: {}, B: {})", self.field, self.a, self.b)
    }
}

impl std::error::Error for Incomparable {}

/// Checks that `a` and `b` describe the same memory the same way (not the preset names).
///
/// # Errors
///
/// The first field that differs.
pub fn comparable(a: &DumpMeta, b: &DumpMeta) -> Result<(), Incomparable> {
    let version = |m: &DumpMeta| m.detail.get("kernel_version").and_then(|v| v.as_str()).map(str::to_string);
    let release = match (version(a), version(b)) {
        (Some(x), Some(y)) => (x, y),
        _ => (String::new(), String::new()),
    };
    let fields: [(&'static str, String, String); 9] = [
        ("format", a.format.to_string(), b.format.to_string()),
        ("kind", a.kind.clone(), b.kind.clone()),
        ("endianness", a.endianness.clone(), b.endianness.clone()),
        ("struct_page_size", a.struct_page_size.to_string(), b.struct_page_size.to_string()),
        ("start_pfn", format!("{:#x}", a.start_pfn), format!("{:#x}", b.start_pfn)),
        ("nr_pages", a.nr_pages.to_string(), b.nr_pages.to_string()),
        ("flags_layout", format!("{:?}", a.flags_layout), format!("{:?}", b.flags_layout)),
        ("pg_bits", format!("{:?}", a.pg_bits), format!("{:?}", b.pg_bits)),
        ("kernel_version", release.0, release.1),
    ];
    match fields.into_iter().find(|(_, x, y)| x != y) {
        Some((field, a, b)) => Err(Incomparable { field, a, b }),
        None => Ok(()),
    }
}

/// The outcome of comparing two dumps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiffResult {
    /// Same geometry, same bytes, same pageblocks and hook counts.
    Identical {
        /// Struct pages compared.
        pages: u64,
    },
    /// The first difference.
    Differs {
        /// PFN of the first differing struct page (or pageblock, for pageblock-only differences).
        pfn: u64,
        /// Field name.
        field: &'static str,
        /// Byte offset of the field in the struct page.
        offset: usize,
        /// The field's value in A.
        a: u64,
        /// The field's value in B.
        b: u64,
        /// Number of differing struct pages in all.
        differing_pages: u64,
    },
    /// Struct pages identical, but pageblock migrate types or hook counts differ.
    Metadata(String),
}

impl DiffResult {
    /// Exit status: 0 identical, 1 different.
    #[must_use]
    pub fn exit_code(&self) -> u8 {
        u8::from(!matches!(self, DiffResult::Identical { .. }))
    }
}

impl fmt::Display for DiffResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DiffResult::Identical { pages } => {
                write!(f, "identical: {pages} struct pages, pageblocks and hook counts")
            }
            DiffResult::Differs { pfn, field, offset, a, b, differing_pages } => write!(
                f,
                "first difference at pfn {pfn:#x}, field {field} (byte {offset}): A = {a:#018x}, B = {b:#018x}\n\
                 {differing_pages} struct page(s) differ"
            ),
            DiffResult::Metadata(why) => write!(f, "struct pages identical, but {why}"),
        }
    }
}

/// The `size`-byte word at `off`, in the dump's byte order.
fn word(bytes: &[u8], off: usize, size: usize, big: bool) -> u64 {
    let mut b = [0u8; 8];
    if big {
        b[8 - size..].copy_from_slice(&bytes[off..off + size]);
        u64::from_be_bytes(b)
    } else {
        b[..size].copy_from_slice(&bytes[off..off + size]);
        u64::from_le_bytes(b)
    }
}

/// Struct pages compared per read.
const CHUNK_PAGES: usize = 1 << 14;

/// Why a diff could not be made.
#[derive(Debug)]
pub enum DiffError {
    /// The dumps describe different things.
    Incomparable(Incomparable),
    /// Reading a dump failed.
    Read(DumpError),
}

impl fmt::Display for DiffError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DiffError::Incomparable(e) => write!(f, "{e}"),
            DiffError::Read(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for DiffError {}

/// Compares two opened dumps (see [`crate::open_dump`]) a chunk at a time into a [`DiffReport`].
///
/// # Errors
///
/// [`DiffError::Incomparable`] before reading anything, or [`DiffError::Read`] naming the file
/// when a read fails or a file shrank since it was opened.
pub fn diff_dumps_report(a: &mut OpenDump, b: &mut OpenDump) -> Result<DiffReport, DiffError> {
    validate_meta(&a.meta, &a.dir.join(META_FILE)).map_err(DiffError::Read)?;
    validate_meta(&b.meta, &b.dir.join(META_FILE)).map_err(DiffError::Read)?;
    comparable(&a.meta, &b.meta).map_err(DiffError::Incomparable)?;
    let (pa, pb) = (a.memmap_path.clone(), b.memmap_path.clone());
    let read_err = |path: &std::path::Path| {
        let path = path.to_path_buf();
        move |e: io::Error| {
            DiffError::Read(if e.kind() == io::ErrorKind::UnexpectedEof {
                DumpError::Changed { path }
            } else {
                DumpError::Io { path, op: "read", source: e }
            })
        }
    };
    let meta_b = b.meta.clone();
    compare(&a.meta, &meta_b, &mut a.memmap, &mut b.memmap, |which, e| {
        read_err(if which == 0 { &pa } else { &pb })(e)
    })
}

/// The summary of [`diff_report`].
///
/// # Errors
///
/// As [`diff_report`].
pub fn diff(a: (&DumpMeta, &[u8]), b: (&DumpMeta, &[u8])) -> Result<DiffResult, DiffError> {
    diff_report(a, b).map(|r| r.summary)
}

/// Compares two dumps held in memory (each validated by [`crate::parse_dump`]) into a
/// [`DiffReport`].
///
/// # Errors
///
/// [`DiffError::Incomparable`] when the dumps describe different things,
/// [`DiffError::Read`] when a slice's length is not what its metadata says.
pub fn diff_report(a: (&DumpMeta, &[u8]), b: (&DumpMeta, &[u8])) -> Result<DiffReport, DiffError> {
    for (m, bytes) in [a, b] {
        let len = validate_meta(m, Path::new(META_FILE)).map_err(DiffError::Read)?;
        if bytes.len() as u64 != len {
            return Err(DiffError::Read(DumpError::SizeMismatch {
                path: MEMMAP_FILE.into(),
                len: bytes.len() as u64,
                nr_pages: m.nr_pages,
                struct_page_size: m.struct_page_size as u64,
            }));
        }
    }
    comparable(a.0, b.0).map_err(DiffError::Incomparable)?;
    let (mut ra, mut rb) = (a.1, b.1);
    compare(a.0, b.0, &mut ra, &mut rb, |_, e| {
        DiffError::Read(DumpError::Io { path: MEMMAP_FILE.into(), op: "read", source: e })
    })
}

/// The role of each pfn, from a dump's metadata.
struct Roles {
    kind: Kind,
}

enum Kind {
    Plain,
    Compound { init_start: u64, nr: u64, written: u64 },
    Folios(Vec<(u64, u64, bool)>),
}

impl Roles {
    fn of(m: &DumpMeta) -> Roles {
        let d = &m.detail;
        let u = |k: &str| d.get(k).and_then(serde_json::Value::as_u64);
        let kind = match m.kind.as_str() {
            "zone-device" => {
                // `validate_meta` keeps the order below 64.
                let shift = u("vmemmap_shift").and_then(|s| u32::try_from(s).ok()).unwrap_or(0);
                let nr = 1u64.checked_shl(shift).unwrap_or(1);
                let init_start = u("init_start_pfn").unwrap_or(m.start_pfn);
                let written = u("compound_nr_pages").unwrap_or(nr).min(nr);
                if nr > 1 {
                    Kind::Compound { init_start, nr, written }
                } else if init_start > m.start_pfn {
                    Kind::Compound { init_start, nr: 1, written: 1 }
                } else {
                    Kind::Plain
                }
            }
            "hugetlb" => {
                let mut v: Vec<(u64, u64, bool)> = d
                    .get("folios")
                    .and_then(serde_json::Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|f| {
                                let head = f.get("head_pfn")?.as_u64()?;
                                let order = f.get("order")?.as_u64()?;
                                let opt =
                                    f.get("optimized").and_then(serde_json::Value::as_bool).unwrap_or(false);
                                Some((head, 1u64.checked_shl(u32::try_from(order).ok()?)?, opt))
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                v.sort_unstable();
                Kind::Folios(v)
            }
            _ => Kind::Plain,
        };
        Roles { kind }
    }

    fn role(&self, pfn: u64, size: usize) -> &'static str {
        match &self.kind {
            Kind::Plain => "page",
            Kind::Compound { init_start, nr, written } => {
                if pfn < *init_start {
                    return "before-init";
                }
                match (pfn - init_start) % nr {
                    _ if *nr == 1 => "page",
                    0 => "head",
                    1 => "page[1]",
                    2 => "page[2]",
                    i if i >= *written => "aliased",
                    _ => "tail",
                }
            }
            Kind::Folios(v) => {
                let i = v.partition_point(|f| f.0 <= pfn);
                let Some(&(head, nr, optimized)) = i.checked_sub(1).and_then(|i| v.get(i)) else {
                    return "page";
                };
                // `pfn >= head` (the partition point), and `head + nr` may pass `u64::MAX`.
                if pfn - head >= nr {
                    return "page";
                }
                let reserve = (4096 / size.max(1)) as u64;
                match pfn - head {
                    0 => "head",
                    1 => "page[1]",
                    2 => "page[2]",
                    k if optimized && k >= reserve => "aliased",
                    _ => "tail",
                }
            }
        }
    }
}

/// Byte comparison of the struct pages read from `ra` and `rb`, then the pageblocks and hooks.
fn compare<E>(
    meta: &DumpMeta,
    meta_b: &DumpMeta,
    ra: &mut impl Read,
    rb: &mut impl Read,
    err: impl Fn(usize, io::Error) -> E,
) -> Result<DiffReport, E> {
    let size = meta.struct_page_size;
    let big = meta.endianness == "big";
    let roles = Roles::of(meta);
    let mut tally = PageTally::default();
    let mut left = meta.nr_pages;
    let mut base = meta.start_pfn;
    let cap = CHUNK_PAGES.min(usize::try_from(left).unwrap_or(usize::MAX));
    let (mut ba, mut bb) = (vec![0u8; cap * size], vec![0u8; cap * size]);
    while left > 0 {
        let n = CHUNK_PAGES.min(usize::try_from(left).unwrap_or(usize::MAX));
        let (ca, cb) = (&mut ba[..n * size], &mut bb[..n * size]);
        ra.read_exact(ca).map_err(|e| err(0, e))?;
        rb.read_exact(cb).map_err(|e| err(1, e))?;
        for (i, (pa, pb)) in ca.chunks_exact(size).zip(cb.chunks_exact(size)).enumerate() {
            if pa != pb {
                let pfn = base + i as u64;
                tally.add(PageDiff { pfn, role: roles.role(pfn, size), fields: field_diffs(pa, pb, big) });
            }
        }
        left -= n as u64;
        base += n as u64;
    }
    let pageblocks = pageblock_diff(meta, meta_b);
    let hooks = hook_diff(meta, meta_b);
    let summary = summarize(meta, meta_b, &tally, pageblocks.as_ref(), hooks.as_ref());
    Ok(DiffReport {
        summary,
        pages: meta.nr_pages,
        differing_pages: tally.differing,
        first: tally.first,
        fields: tally
            .by_field
            .into_iter()
            .map(|(offset, pages)| FieldCount { field: field_name(offset), offset, pages })
            .collect(),
        roles: tally.by_role.into_values().collect(),
        pageblocks,
        hooks,
        configs: (meta.config != meta_b.config).then(|| (meta.config.clone(), meta_b.config.clone())),
    })
}

/// The differing pages counted as [`compare`] meets them: in all, per field and per role.
#[derive(Default)]
struct PageTally {
    /// The lowest differing page.
    first: Option<PageDiff>,
    /// Pages that differ in at least one byte.
    differing: u64,
    /// Differing pages per field offset.
    by_field: BTreeMap<usize, u64>,
    /// Differing pages per role, with the first [`EXAMPLES_PER_ROLE`] as examples.
    by_role: BTreeMap<&'static str, RoleCount>,
}

impl PageTally {
    /// Counts one differing page (pages come in PFN order, so the first one added is the lowest).
    fn add(&mut self, page: PageDiff) {
        self.differing += 1;
        for f in &page.fields {
            *self.by_field.entry(f.offset).or_default() += 1;
        }
        let role = page.role;
        let r =
            self.by_role.entry(role).or_insert_with(|| RoleCount { role, pages: 0, examples: Vec::new() });
        r.pages += 1;
        if r.examples.len() < EXAMPLES_PER_ROLE {
            r.examples.push(page.clone());
        }
        if self.first.is_none() {
            self.first = Some(page);
        }
    }
}

/// The named fields that differ between two struct pages, read in the dump's byte order.
fn field_diffs(pa: &[u8], pb: &[u8], big: bool) -> Vec<FieldDiff> {
    let size = pa.len();
    FIELDS
        .iter()
        .filter(|&&(off, len)| off + len <= size && pa[off..off + len] != pb[off..off + len])
        .map(|&(off, len)| FieldDiff {
            field: field_name(off),
            offset: off,
            a: word(pa, off, len, big),
            b: word(pb, off, len, big),
        })
        .collect()
}

/// The MOVABLE pageblocks only one dump has, if any.
fn pageblock_diff(meta: &DumpMeta, meta_b: &DumpMeta) -> Option<PageblockDiff> {
    let sa: std::collections::BTreeSet<u64> = meta.movable_pageblock_pfns.iter().copied().collect();
    let sb: std::collections::BTreeSet<u64> = meta_b.movable_pageblock_pfns.iter().copied().collect();
    let only_a: Vec<u64> = sa.difference(&sb).copied().collect();
    let only_b: Vec<u64> = sb.difference(&sa).copied().collect();
    (!only_a.is_empty() || !only_b.is_empty()).then_some(PageblockDiff { only_a, only_b })
}

/// Both dumps' hook counts, when they differ.
fn hook_diff(meta: &DumpMeta, meta_b: &DumpMeta) -> Option<HookCounts> {
    (meta.resched_pfns != meta_b.resched_pfns || meta.page_ref_events != meta_b.page_ref_events).then_some(
        HookCounts {
            cond_resched: (meta.resched_pfns, meta_b.resched_pfns),
            page_ref_set: (meta.page_ref_events, meta_b.page_ref_events),
        },
    )
}

/// The one-line verdict: the first differing page's first field, else the pageblocks, else the
/// hook counts, else identical.
fn summarize(
    meta: &DumpMeta,
    meta_b: &DumpMeta,
    tally: &PageTally,
    pageblocks: Option<&PageblockDiff>,
    hooks: Option<&HookCounts>,
) -> DiffResult {
    match (&tally.first, pageblocks, hooks) {
        (Some(p), _, _) => {
            let f = p.fields.first().cloned().unwrap_or(FieldDiff { field: "flags", offset: 0, a: 0, b: 0 });
            DiffResult::Differs {
                pfn: p.pfn,
                field: f.field,
                offset: f.offset,
                a: f.a,
                b: f.b,
                differing_pages: tally.differing,
            }
        }
        (None, Some(_), _) => DiffResult::Metadata(format!(
            "MOVABLE pageblocks differ ({} vs {})",
            meta.movable_pageblock_pfns.len(),
            meta_b.movable_pageblock_pfns.len()
        )),
        (None, None, Some(h)) => DiffResult::Metadata(format!(
            "hook counts differ (cond_resched {} vs {}, page_ref_set {} vs {})",
            h.cond_resched.0, h.cond_resched.1, h.page_ref_set.0, h.page_ref_set.1
        )),
        (None, None, None) => DiffResult::Identical { pages: meta.nr_pages },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ZoneDeviceDump;
    use memmap_core::{KernelConfig, KernelVersion, MemoryType, Strategy};

    fn zd(config: KernelConfig, memory_type: MemoryType, shift: u32) -> crate::Dump {
        ZoneDeviceDump {
            config,
            layout72: false,
            memory_type,
            vmemmap_shift: shift,
            altmap: None,
            start_pfn: 0x100000,
            nr_pages: 2048,
            nid: 0,
            strategy: Strategy::Auto,
            page_ref_trace: false,
            boot_memory_end_pfn: 0,
            boot_memory_above_pfn: u64::MAX,
        }
        .run()
        .unwrap()
    }

    #[test]
    fn presets_are_compared_by_content_not_by_name() {
        let a = zd(KernelConfig::X86_64_6_12, MemoryType::Generic, 9);
        let b = zd(KernelConfig::X86_64.with_version(KernelVersion::V6_12), MemoryType::Generic, 9);
        assert_ne!(a.meta.config, b.meta.config);
        let r = diff_report((&a.meta, a.memmap()), (&b.meta, b.memmap())).unwrap();
        assert_eq!(r.summary, DiffResult::Identical { pages: 2048 });
        assert_eq!(r.configs, Some((a.meta.config.clone(), b.meta.config.clone())));
        // Another release is not the same content.
        let c = zd(KernelConfig::X86_64, MemoryType::Generic, 9);
        let e = diff_report((&a.meta, a.memmap()), (&c.meta, c.memmap())).unwrap_err();
        assert!(matches!(e, DiffError::Incomparable(Incomparable { field: "kernel_version", .. })), "{e}");
    }

    #[test]
    fn differences_are_counted_by_field_and_role_with_examples() {
        let a = zd(KernelConfig::X86_64, MemoryType::Generic, 9);
        let mut bytes = a.memmap().to_vec();
        let page = |pfn: u64| (pfn - 0x100000) as usize * 64;
        // _refcount of the second head, flags of page[1], mapping of five tails.
        bytes[page(0x100200) + 52] ^= 1;
        bytes[page(0x100001)] ^= 0x10;
        for t in 10..15 {
            bytes[page(0x100000 + t) + 24] ^= 1;
        }
        let mut mb = a.meta.clone();
        mb.movable_pageblock_pfns.retain(|&p| p != 0x100400);
        mb.resched_pfns += 1;
        let r = diff_report((&a.meta, a.memmap()), (&mb, &bytes)).unwrap();
        assert_eq!(r.differing_pages, 7);
        let role = |n: &str| r.roles.iter().find(|x| x.role == n).map(|x| x.pages);
        assert_eq!((role("head"), role("page[1]"), role("tail")), (Some(1), Some(1), Some(5)));
        let tail = r.roles.iter().find(|x| x.role == "tail").unwrap();
        assert_eq!(tail.examples.len(), EXAMPLES_PER_ROLE);
        assert_eq!(tail.examples[0].pfn, 0x10000a);
        assert_eq!(tail.examples[0].fields[0].field, "mapping");
        let field = |n: &str| r.fields.iter().find(|x| x.field == n).map(|x| x.pages);
        assert_eq!((field("_refcount"), field("flags"), field("mapping")), (Some(1), Some(1), Some(5)));
        // Pageblocks and hooks are reported although struct pages differ too.
        assert_eq!(r.pageblocks, Some(PageblockDiff { only_a: vec![0x100400], only_b: vec![] }));
        assert_eq!(r.hooks.map(|h| h.cond_resched), Some((a.meta.resched_pfns, a.meta.resched_pfns + 1)));
        assert!(matches!(r.summary, DiffResult::Differs { pfn: 0x100001, differing_pages: 7, .. }));
        let text = r.to_string();
        assert!(
            text.contains("role tail: 5 struct page(s)")
                && text.contains("pageblocks: 1 MOVABLE only in A (0x100400)"),
            "{text}"
        );
        let j = r.to_json();
        assert_eq!(j["identical"], false);
        assert_eq!(j["differing_pages"], 7);
        assert_eq!(j["roles"].as_array().map(Vec::len), Some(3));
        assert_eq!(j["pageblocks"]["only_a"][0], 0x100400);
    }

    #[test]
    fn deduplicated_struct_pages_are_aliased() {
        let a = zd(KernelConfig::X86_64, MemoryType::Generic, 9);
        let mut bytes = a.memmap().to_vec();
        bytes[300 * 64 + 24] ^= 1;
        let r = diff_report((&a.meta, a.memmap()), (&a.meta, &bytes)).unwrap();
        assert_eq!(r.roles.iter().map(|x| x.role).collect::<Vec<_>>(), ["aliased"]);
    }

    #[test]
    fn roles_near_the_top_of_the_pfn_space_do_not_overflow() {
        let a = zd(KernelConfig::X86_64, MemoryType::Generic, 0);
        let mut m = a.meta.clone();
        m.kind = "hugetlb".into();
        m.detail.clear();
        (m.start_pfn, m.nr_pages) = (u64::MAX - 4, 4);
        // A folio whose end lies past u64::MAX: its head and the pages after it.
        m.detail.insert("folios".into(), serde_json::json!([{ "head_pfn": u64::MAX - 2, "order": 9 }]));
        let (x, mut y) = (vec![0u8; 4 * 64], vec![0u8; 4 * 64]);
        for p in 0..4 {
            y[p * 64] = 1;
        }
        let r = diff_report((&m, &x), (&m, &y)).unwrap();
        let roles: Vec<_> = r.roles.iter().map(|c| (c.role, c.pages)).collect();
        assert_eq!(roles, [("head", 1), ("page", 2), ("page[1]", 1)]);
    }

    #[test]
    fn orders_the_roles_cannot_hold_are_refused_not_truncated() {
        let a = zd(KernelConfig::X86_64, MemoryType::Generic, 9);
        let mut m = a.meta.clone();
        // 2^32 + 9 once read as 9.
        m.detail.insert("vmemmap_shift".into(), ((1u64 << 32) + 9).into());
        let e = diff_report((&m, a.memmap()), (&m, a.memmap())).unwrap_err();
        assert!(
            e.to_string().contains("field vmemmap_shift: 4294967305 (expected an order from 0 to 63)"),
            "{e}"
        );
        let mut m = a.meta.clone();
        m.detail.insert("folios".into(), serde_json::json!([{ "head_pfn": 0x100000, "order": 64 }]));
        let e = diff_report((&m, a.memmap()), (&m, a.memmap())).unwrap_err();
        assert!(e.to_string().contains("field folios: folio 0: "), "{e}");
    }
}
