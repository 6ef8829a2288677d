//! Where a struct page sits in its region: its compound page and role ([`Geometry`]), and the
//! names of its fields by role ([`field_name`]).

use crate::facts::Region;

/// Name of the field at byte `offset` of a struct page that plays `role`.
#[must_use]
pub fn field_name(role: &str, offset: usize) -> &'static str {
    match (role, offset / 8) {
        ("page[1]", 0) => "_flags_1 (order in bits 0-7)",
        ("page[1]", 1) => "_head_1 (compound_head/compound_info)",
        ("page[1]", 2) => "_large_mapcount/_entire_mapcount (@16)",
        ("page[1]", 3) => "_nr_pages_mapped/_pincount or _mm_id (@24)",
        ("page[1]", 4) => "@32 (_mm_id/_pincount)",
        ("page[1]", 5) => "@40 (_mm_id_mapcount)",
        ("page[1]", 6) => "@48 (_mapcount/_refcount of page[1])",
        ("page[1]", 7) => "_nr_pages (@56)",
        ("page[2]", 2) => "_deferred_list.next (@16)",
        ("page[2]", 3) => "_deferred_list.prev (@24)",
        _ => memmap_dump::diff::field_name(offset),
    }
}

/// Geometry of a region: how its pfns are grouped into compound pages.
#[derive(Debug, Clone, Copy)]
pub struct Geometry {
    /// First pfn of the region.
    pub start_pfn: u64,
    /// First initialized pfn (compound pages start here).
    pub init_start: u64,
    /// Pages per compound page (1: none).
    pub compound: u64,
}

impl Geometry {
    /// The geometry of a region from its facts.
    #[must_use]
    pub fn of(r: &Region) -> Geometry {
        let compound = match (r.vmemmap_shift, r.folio) {
            (_, Some(f)) => 1u64 << f.order,
            (Some(s), None) => 1u64 << s,
            _ => 1,
        };
        Geometry { start_pfn: r.start_pfn, init_start: r.init_start_pfn.unwrap_or(r.start_pfn), compound }
    }

    /// Index within its compound page, or `None` before the initialized range.
    #[must_use]
    pub fn index(&self, pfn: u64) -> Option<u64> {
        (pfn >= self.init_start).then(|| (pfn - self.init_start) % self.compound)
    }

    /// The struct page's role: `head`, `page[1]`..`page[3]`, `tail`, `page`, `altmap`.
    #[must_use]
    pub fn role(&self, pfn: u64) -> &'static str {
        match self.index(pfn) {
            None => "before init (altmap)",
            Some(_) if self.compound == 1 => "page",
            Some(0) => "head",
            Some(1) => "page[1]",
            Some(2) => "page[2]",
            Some(3) => "page[3]",
            Some(_) => "tail",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_follow_the_compound_geometry() {
        let g = Geometry { start_pfn: 0x1000, init_start: 0x1200, compound: 512 };
        assert_eq!(g.role(0x11ff), "before init (altmap)");
        assert_eq!(g.role(0x1200), "head");
        assert_eq!(g.role(0x1401), "page[1]");
        assert_eq!(g.role(0x1404), "tail");
        assert_eq!(Geometry { compound: 1, ..g }.role(0x1300), "page");
    }
}
