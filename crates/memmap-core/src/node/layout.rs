//! The memblock-shaped inputs of boot-time memmap init, modelled minimally: a node's zone
//! spans, its memory ranges (`memblock.memory`, with holes between them) and its reserved ranges
//! (`memblock.reserved`, some flagged `MEMBLOCK_RSRV_NOINIT`).
//!
//! All ranges are PFN ranges `[start, end)`. Empty ranges are allowed and ignored. Free ranges
//! (`for_each_free_mem_pfn_range_in_zone`) are memory minus every reserved range, clamped to a
//! zone; holes are the PFNs of the node span that no memory range covers.

use core::fmt;

/// A PFN range `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PfnRange {
    /// First PFN.
    pub start: u64,
    /// One past the last PFN.
    pub end: u64,
}

impl PfnRange {
    /// `[start, end)`.
    #[must_use]
    pub const fn new(start: u64, end: u64) -> Self {
        PfnRange { start, end }
    }

    /// Number of PFNs (0 if `end <= start`).
    #[must_use]
    pub const fn len(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }

    /// Whether the range is empty.
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        self.end <= self.start
    }

    /// Whether `pfn` is in the range.
    #[must_use]
    pub const fn contains(&self, pfn: u64) -> bool {
        pfn >= self.start && pfn < self.end
    }
}

/// A reserved range (`memblock.reserved`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReservedRange {
    /// The PFNs.
    pub range: PfnRange,
    /// `MEMBLOCK_RSRV_NOINIT`: `reserve_bootmem_region()` skips it, so its struct pages are
    /// left to the owner (hugetlb gigantic pages) wherever boot init did not reach them.
    pub noinit: bool,
}

impl ReservedRange {
    /// A normal reserved range.
    #[must_use]
    pub const fn new(start: u64, end: u64) -> Self {
        ReservedRange { range: PfnRange::new(start, end), noinit: false }
    }

    /// A `MEMBLOCK_RSRV_NOINIT` reserved range.
    #[must_use]
    pub const fn noinit(start: u64, end: u64) -> Self {
        ReservedRange { range: PfnRange::new(start, end), noinit: true }
    }
}

/// A zone of the node: `zone_idx` and the spanned PFNs `[zone_start_pfn, zone_end_pfn)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ZoneSpan {
    /// `zone_idx(zone)` (`ZONE_DMA` 0, `ZONE_DMA32` 1, `ZONE_NORMAL` 2, `ZONE_MOVABLE` 3 in the
    /// presets). `ZONE_DEVICE` is not a boot zone.
    pub zone: u32,
    /// The spanned PFNs.
    pub span: PfnRange,
}

impl ZoneSpan {
    /// Zone `zone` spanning `[start, end)`.
    #[must_use]
    pub const fn new(zone: u32, start: u64, end: u64) -> Self {
        ZoneSpan { zone, span: PfnRange::new(start, end) }
    }
}

/// One node's boot memory layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeLayout<'r> {
    /// `pgdat->node_id`.
    pub nid: u32,
    /// The node's zones, sorted by PFN, non-overlapping, each non-empty, with increasing zone
    /// indexes (the highest zone is last: it is the one deferred init defers).
    pub zones: &'r [ZoneSpan],
    /// Memory ranges, sorted and non-overlapping, inside the node span.
    pub memory: &'r [PfnRange],
    /// Reserved ranges, sorted and non-overlapping, inside the zone spans.
    pub reserved: &'r [ReservedRange],
}

/// Why a [`NodeLayout`] was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LayoutError {
    /// The node has no zone.
    NoZones,
    /// Zone `index` is empty, overlaps or precedes the previous one, or its zone index does
    /// not increase.
    ZonesNotSorted {
        /// Position in [`NodeLayout::zones`].
        index: usize,
    },
    /// A zone index is not a boot zone of the configuration (it is `ZONE_DEVICE` or beyond).
    BadZoneIndex {
        /// The zone index.
        zone: u32,
    },
    /// Memory range `index` overlaps or precedes the previous one.
    MemoryNotSorted {
        /// Position in [`NodeLayout::memory`].
        index: usize,
    },
    /// Reserved range `index` overlaps or precedes the previous one.
    ReservedNotSorted {
        /// Position in [`NodeLayout::reserved`].
        index: usize,
    },
    /// A memory range is outside the node span.
    MemoryOutsideNode {
        /// The range.
        range: PfnRange,
    },
    /// A reserved range is not inside the zone spans.
    ReservedOutsideZones {
        /// The range.
        range: PfnRange,
    },
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            LayoutError::NoZones => f.write_str("node has no zone"),
            LayoutError::ZonesNotSorted { index } => {
                write!(f, "zone #{index} is empty, unsorted or overlapping")
            }
            LayoutError::BadZoneIndex { zone } => write!(f, "zone index {zone} is not a boot zone"),
            LayoutError::MemoryNotSorted { index } => {
                write!(f, "memory range #{index} is unsorted or overlapping")
            }
            LayoutError::ReservedNotSorted { index } => {
                write!(f, "reserved range #{index} is unsorted or overlapping")
            }
            LayoutError::MemoryOutsideNode { range } => {
                write!(f, "memory [{:#x}, {:#x}) is outside the node span", range.start, range.end)
            }
            LayoutError::ReservedOutsideZones { range } => {
                write!(f, "reserved [{:#x}, {:#x}) is not inside the zones", range.start, range.end)
            }
        }
    }
}

impl core::error::Error for LayoutError {}

fn sorted<T>(items: &[T], range: impl Fn(&T) -> PfnRange) -> Result<(), usize> {
    let mut prev_end = 0;
    for (i, it) in items.iter().enumerate() {
        let r = range(it);
        if r.is_empty() {
            continue;
        }
        if r.start < prev_end {
            return Err(i);
        }
        prev_end = r.end;
    }
    Ok(())
}

impl<'r> NodeLayout<'r> {
    /// Checks the layout against the rules of the field documentation; `boot_zones` is the
    /// number of zone indexes that may appear (`MAX_NR_ZONES - 1`: every zone but `ZONE_DEVICE`).
    ///
    /// # Errors
    ///
    /// The first [`LayoutError`] found.
    pub fn validate(&self, boot_zones: u32) -> Result<(), LayoutError> {
        if self.zones.is_empty() {
            return Err(LayoutError::NoZones);
        }
        let mut prev: Option<&ZoneSpan> = None;
        for (index, z) in self.zones.iter().enumerate() {
            if z.zone >= boot_zones {
                return Err(LayoutError::BadZoneIndex { zone: z.zone });
            }
            if z.span.is_empty() || prev.is_some_and(|p| p.span.end > z.span.start || p.zone >= z.zone) {
                return Err(LayoutError::ZonesNotSorted { index });
            }
            prev = Some(z);
        }
        sorted(self.memory, |r| *r).map_err(|index| LayoutError::MemoryNotSorted { index })?;
        sorted(self.reserved, |r| r.range).map_err(|index| LayoutError::ReservedNotSorted { index })?;
        let span = self.span();
        for m in self.memory.iter().filter(|m| !m.is_empty()) {
            if m.start < span.start || m.end > span.end {
                return Err(LayoutError::MemoryOutsideNode { range: *m });
            }
        }
        for r in self.reserved.iter().filter(|r| !r.range.is_empty()) {
            // Every PFN of the range must be in some zone.
            let mut pfn = r.range.start;
            while pfn < r.range.end {
                match self.zone_of(pfn) {
                    Some(z) => pfn = z.span.end,
                    None => return Err(LayoutError::ReservedOutsideZones { range: r.range }),
                }
            }
        }
        Ok(())
    }

    /// The node span `[node_start_pfn, pgdat_end_pfn)`: from the first zone's start to the last
    /// zone's end.
    ///
    /// # Panics
    ///
    /// If there is no zone.
    #[must_use]
    pub fn span(&self) -> PfnRange {
        PfnRange::new(self.zones[0].span.start, self.zones[self.zones.len() - 1].span.end)
    }

    /// The highest zone (the last one): the only one deferred init defers.
    ///
    /// # Panics
    ///
    /// If there is no zone.
    #[must_use]
    pub(crate) fn highest_zone(&self) -> ZoneSpan {
        self.zones[self.zones.len() - 1]
    }

    /// The zone spanning `pfn`.
    #[must_use]
    pub(crate) fn zone_of(&self, pfn: u64) -> Option<&ZoneSpan> {
        self.zones.iter().find(|z| z.span.contains(pfn))
    }

    /// The zone with index `zone`.
    #[must_use]
    pub fn zone(&self, zone: u32) -> Option<&ZoneSpan> {
        self.zones.iter().find(|z| z.zone == zone)
    }

    /// Whether `pfn` is in a memory range (not a hole).
    #[must_use]
    pub fn is_memory(&self, pfn: u64) -> bool {
        self.memory.iter().any(|m| m.contains(pfn))
    }

    /// The reserved range containing `pfn`, if any.
    #[must_use]
    pub(crate) fn reserved_at(&self, pfn: u64) -> Option<&ReservedRange> {
        self.reserved.iter().find(|r| r.range.contains(pfn))
    }

    /// Whether `pfn` is free memory (in memory and in no reserved range).
    #[must_use]
    pub fn is_free(&self, pfn: u64) -> bool {
        self.is_memory(pfn) && self.reserved_at(pfn).is_none()
    }

    /// The first free range of `zone` that ends after `from`, starting no earlier than `from`
    /// (`deferred_init_mem_pfn_range_in_zone` / one step of
    /// `for_each_free_mem_pfn_range_in_zone_from`).
    #[must_use]
    pub(crate) fn next_free_range(&self, zone: &ZoneSpan, from: u64) -> Option<PfnRange> {
        for m in self.memory {
            let lo = m.start.max(zone.span.start).max(from);
            let hi = m.end.min(zone.span.end);
            if lo >= hi {
                continue;
            }
            let mut cur = lo;
            for r in self.reserved {
                if r.range.is_empty() || r.range.end <= cur {
                    continue;
                }
                if r.range.start >= hi {
                    break;
                }
                if r.range.start > cur {
                    return Some(PfnRange::new(cur, r.range.start));
                }
                cur = cur.max(r.range.end);
                if cur >= hi {
                    break;
                }
            }
            if cur < hi {
                return Some(PfnRange::new(cur, hi));
            }
        }
        None
    }

    /// Iterates the free ranges of `zone` from `from` on.
    pub(crate) fn free_ranges(&self, zone: ZoneSpan, from: u64) -> impl Iterator<Item = PfnRange> + '_ {
        let mut next = from;
        core::iter::from_fn(move || {
            let r = self.next_free_range(&zone, next)?;
            next = r.end;
            Some(r)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    #[test]
    fn free_ranges_subtract_reserved_and_clamp_to_the_zone() {
        let zones = [ZoneSpan::new(1, 0, 100), ZoneSpan::new(2, 100, 300)];
        let memory = [PfnRange::new(10, 150), PfnRange::new(200, 300)];
        let reserved = [ReservedRange::new(20, 30), ReservedRange::noinit(140, 210)];
        let l = NodeLayout { nid: 0, zones: &zones, memory: &memory, reserved: &reserved };
        l.validate(4).unwrap();
        let z1: Vec<_> = l.free_ranges(zones[0], 0).collect();
        assert_eq!(z1, [PfnRange::new(10, 20), PfnRange::new(30, 100)]);
        let z2: Vec<_> = l.free_ranges(zones[1], 0).collect();
        assert_eq!(z2, [PfnRange::new(100, 140), PfnRange::new(210, 300)]);
        assert_eq!(l.next_free_range(&zones[1], 120), Some(PfnRange::new(120, 140)));
        assert!(l.is_free(35) && !l.is_free(25) && !l.is_free(5) && !l.is_free(170));
    }

    #[test]
    fn bad_layouts_are_typed_errors() {
        let zones = [ZoneSpan::new(2, 0, 100), ZoneSpan::new(1, 100, 200)];
        let l = NodeLayout { nid: 0, zones: &zones, memory: &[], reserved: &[] };
        assert_eq!(l.validate(4), Err(LayoutError::ZonesNotSorted { index: 1 }));
        let zones = [ZoneSpan::new(4, 0, 100)];
        let l = NodeLayout { nid: 0, zones: &zones, memory: &[], reserved: &[] };
        assert_eq!(l.validate(4), Err(LayoutError::BadZoneIndex { zone: 4 }));
        let zones = [ZoneSpan::new(2, 0, 100)];
        let mem = [PfnRange::new(50, 60), PfnRange::new(55, 70)];
        let l = NodeLayout { nid: 0, zones: &zones, memory: &mem, reserved: &[] };
        assert_eq!(l.validate(4), Err(LayoutError::MemoryNotSorted { index: 1 }));
        let mem = [PfnRange::new(50, 160)];
        let l = NodeLayout { nid: 0, zones: &zones, memory: &mem, reserved: &[] };
        assert_eq!(l.validate(4), Err(LayoutError::MemoryOutsideNode { range: mem[0] }));
        let res = [ReservedRange::new(90, 120)];
        let l = NodeLayout { nid: 0, zones: &zones, memory: &[], reserved: &res };
        assert_eq!(l.validate(4), Err(LayoutError::ReservedOutsideZones { range: res[0].range }));
        let l = NodeLayout { nid: 0, zones: &[], memory: &[], reserved: &[] };
        assert_eq!(l.validate(4), Err(LayoutError::NoZones));
    }
}
