//! Comparing two dumps: the first differing struct page and field.
//!
//! Two dumps are compared only if they describe the same thing: same `format`, `kind`,
//! `endianness`, `config`, `struct_page_size`, `start_pfn` and `nr_pages`; otherwise
//! [`Incomparable`] says which field differs (exit status 2). Comparable dumps are compared
//! struct page by struct page, a chunk at a time, so two 100 GiB-device dumps do not need
//! memory for both.

use std::fmt;
use std::io::{self, Read};
use std::path::Path;

use crate::read::{OpenDump, validate_meta};
use crate::write::{MEMMAP_FILE, META_FILE};
use crate::{DumpError, DumpMeta};

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

/// Checks that `a` and `b` describe the same memmap geometry, model and byte order.
///
/// # Errors
///
/// The first field that differs.
pub fn comparable(a: &DumpMeta, b: &DumpMeta) -> Result<(), Incomparable> {
    let fields: [(&'static str, String, String); 7] = [
        ("format", a.format.to_string(), b.format.to_string()),
        ("kind", a.kind.clone(), b.kind.clone()),
        ("endianness", a.endianness.clone(), b.endianness.clone()),
        ("config", a.config.clone(), b.config.clone()),
        ("struct_page_size", a.struct_page_size.to_string(), b.struct_page_size.to_string()),
        ("start_pfn", format!("{:#x}", a.start_pfn), format!("{:#x}", b.start_pfn)),
        ("nr_pages", a.nr_pages.to_string(), b.nr_pages.to_string()),
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
        /// PFN of the first differing struct page (or of the pageblock, for pageblock-only
        /// differences).
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

/// Compares two opened dumps (see [`crate::open_dump`]), reading both a chunk at a time.
///
/// # Errors
///
/// [`DiffError::Incomparable`] before reading anything, or [`DiffError::Read`] naming the file
/// when a read fails or a file shrank since it was opened.
pub fn diff_dumps(a: &mut OpenDump, b: &mut OpenDump) -> Result<DiffResult, DiffError> {
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
    let r = compare(&a.meta, &mut a.memmap, &mut b.memmap, |which, e| {
        read_err(if which == 0 { &pa } else { &pb })(e)
    })?;
    Ok(check_metadata(r, &a.meta, &b.meta))
}

/// Compares two dumps held in memory (each validated by [`crate::parse_dump`]).
///
/// # Errors
///
/// [`DiffError::Incomparable`] when the dumps describe different things,
/// [`DiffError::Read`] when a slice's length is not what its metadata says.
pub fn diff(a: (&DumpMeta, &[u8]), b: (&DumpMeta, &[u8])) -> Result<DiffResult, DiffError> {
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
    let r = compare(a.0, &mut ra, &mut rb, |_, e| {
        DiffError::Read(DumpError::Io { path: MEMMAP_FILE.into(), op: "read", source: e })
    })?;
    Ok(check_metadata(r, a.0, b.0))
}

/// Byte comparison of `nr_pages` struct pages read from `ra` and `rb`, then the metadata.
fn compare<E>(
    meta: &DumpMeta,
    ra: &mut impl Read,
    rb: &mut impl Read,
    err: impl Fn(usize, io::Error) -> E,
) -> Result<DiffResult, E> {
    let size = meta.struct_page_size;
    let big = meta.endianness == "big";
    let mut first = None;
    let mut differing = 0u64;
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
            if pa == pb {
                continue;
            }
            differing += 1;
            if first.is_none() {
                let off = pa.iter().zip(pb).position(|(x, y)| x != y).unwrap_or(0);
                // Report the whole field: 4-byte fields at 48 and 52, 8-byte fields elsewhere.
                let (start, len) = if (48..56).contains(&off) { (off & !3, 4) } else { (off & !7, 8) };
                first = Some((base + i as u64, start, word(pa, start, len, big), word(pb, start, len, big)));
            }
        }
        left -= n as u64;
        base += n as u64;
    }
    if let Some((pfn, offset, a, b)) = first {
        return Ok(DiffResult::Differs {
            pfn,
            field: field_name(offset),
            offset,
            a,
            b,
            differing_pages: differing,
        });
    }
    Ok(DiffResult::Identical { pages: meta.nr_pages })
}

/// After identical struct pages: the pageblocks and hook counts.
fn check_metadata(r: DiffResult, ma: &DumpMeta, mb: &DumpMeta) -> DiffResult {
    if !matches!(r, DiffResult::Identical { .. }) {
        return r;
    }
    if ma.movable_pageblock_pfns != mb.movable_pageblock_pfns {
        return DiffResult::Metadata(format!(
            "MOVABLE pageblocks differ ({} vs {})",
            ma.movable_pageblock_pfns.len(),
            mb.movable_pageblock_pfns.len()
        ));
    }
    if ma.resched_pfns != mb.resched_pfns || ma.page_ref_events != mb.page_ref_events {
        return DiffResult::Metadata(format!(
            "hook counts differ (cond_resched {} vs {}, page_ref_set {} vs {})",
            ma.resched_pfns, mb.resched_pfns, ma.page_ref_events, mb.page_ref_events
        ));
    }
    r
}
