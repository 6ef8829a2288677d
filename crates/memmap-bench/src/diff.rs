//! `memmap-bench diff A B`: the first differing struct page and field of two dumps.

use std::fmt;

use crate::dump::DumpMeta;

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

/// The outcome of comparing two dumps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiffResult {
    /// Same geometry, same bytes, same pageblocks and hook counts.
    Identical {
        /// Struct pages compared.
        pages: u64,
    },
    /// The dumps cover different PFNs or struct page sizes: not comparable byte for byte.
    Geometry(String),
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
    pub fn exit_code(&self) -> i32 {
        i32::from(!matches!(self, DiffResult::Identical { .. }))
    }
}

impl fmt::Display for DiffResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DiffResult::Identical { pages } => {
                write!(f, "identical: {pages} struct pages, pageblocks and hook counts")
            }
            DiffResult::Geometry(why) => write!(f, "different geometry: {why}"),
            DiffResult::Differs { pfn, field, offset, a, b, differing_pages } => write!(
                f,
                "first difference at pfn {pfn:#x}, field {field} (byte {offset}): A = {a:#018x}, B = {b:#018x}\n\
                 {differing_pages} struct page(s) differ"
            ),
            DiffResult::Metadata(why) => write!(f, "struct pages identical, but {why}"),
        }
    }
}

fn word(bytes: &[u8], off: usize, size: usize) -> u64 {
    let mut b = [0u8; 8];
    b[..size].copy_from_slice(&bytes[off..off + size]);
    u64::from_ne_bytes(b)
}

/// Compares two dumps.
///
/// # Panics
///
/// Never: a differing pair of struct pages always has a differing byte.
#[must_use]
pub fn diff(a: (&DumpMeta, &[u8]), b: (&DumpMeta, &[u8])) -> DiffResult {
    let (ma, ba) = a;
    let (mb, bb) = b;
    if ma.struct_page_size != mb.struct_page_size {
        return DiffResult::Geometry(format!(
            "struct page size {} vs {}",
            ma.struct_page_size, mb.struct_page_size
        ));
    }
    if (ma.start_pfn, ma.nr_pages) != (mb.start_pfn, mb.nr_pages) {
        return DiffResult::Geometry(format!(
            "pfns [{:#x}, +{}) vs [{:#x}, +{})",
            ma.start_pfn, ma.nr_pages, mb.start_pfn, mb.nr_pages
        ));
    }
    let size = ma.struct_page_size;
    let mut first = None;
    let mut differing = 0u64;
    for (i, (pa, pb)) in ba.chunks_exact(size).zip(bb.chunks_exact(size)).enumerate() {
        if pa == pb {
            continue;
        }
        differing += 1;
        if first.is_none() {
            let off = (0..size).find(|&o| pa[o] != pb[o]).expect("chunks differ");
            // Report the whole field: 4-byte fields at 48 and 52, 8-byte fields elsewhere.
            let (start, len) = if (48..56).contains(&off) { (off & !3, 4) } else { (off & !7, 8) };
            first = Some((ma.start_pfn + i as u64, start, word(pa, start, len), word(pb, start, len)));
        }
    }
    if let Some((pfn, offset, a, b)) = first {
        return DiffResult::Differs {
            pfn,
            field: field_name(offset),
            offset,
            a,
            b,
            differing_pages: differing,
        };
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
    DiffResult::Identical { pages: ma.nr_pages }
}
