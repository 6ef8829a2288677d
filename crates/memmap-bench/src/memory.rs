//! What a run needs from the machine's memory ([`MemoryNeed`]), with checked arithmetic, and its
//! [`check`] against the machine before any work, so a size that cannot work is refused with a
//! message instead of an out-of-memory kill.

use std::fmt;

use crate::cgroup::{self, CgroupMemory};
use crate::size::Bytes;

/// A size computation overflowed `u64`: more bytes than a 64-bit machine can address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overflow {
    /// What was being computed.
    pub what: String,
}

impl fmt::Display for Overflow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} overflows a 64-bit byte count", self.what)
    }
}

impl std::error::Error for Overflow {}

/// `a * b`, or an [`Overflow`] naming `what`.
pub fn mul(a: u64, b: u64, what: &str) -> Result<u64, Overflow> {
    a.checked_mul(b).ok_or_else(|| Overflow { what: what.to_string() })
}

/// `a + b`, or an [`Overflow`] naming `what`.
pub fn add(a: u64, b: u64, what: &str) -> Result<u64, Overflow> {
    a.checked_add(b).ok_or_else(|| Overflow { what: what.to_string() })
}

/// The memory a run needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemoryNeed {
    /// Bytes written or faulted in (they must fit in available memory).
    pub resident: u64,
    /// Bytes of address space mapped at the same time.
    pub mapped: u64,
    /// The largest single mapping (the kernel's heuristic overcommit refuses one larger than
    /// RAM plus swap).
    pub largest_mapping: u64,
}

impl MemoryNeed {
    /// One mapping of `bytes`, all of it resident.
    #[must_use]
    pub const fn resident(bytes: u64) -> Self {
        MemoryNeed { resident: bytes, mapped: bytes, largest_mapping: bytes }
    }

    /// `self` and `other` at the same time.
    pub fn and(self, other: MemoryNeed) -> Result<MemoryNeed, Overflow> {
        Ok(MemoryNeed {
            resident: add(self.resident, other.resident, "the memory needed")?,
            mapped: add(self.mapped, other.mapped, "the address space needed")?,
            largest_mapping: self.largest_mapping.max(other.largest_mapping),
        })
    }

    /// `n` copies of `self` at the same time.
    pub fn times(self, n: u64) -> Result<MemoryNeed, Overflow> {
        Ok(MemoryNeed {
            resident: mul(self.resident, n, "the memory needed")?,
            mapped: mul(self.mapped, n, "the address space needed")?,
            largest_mapping: self.largest_mapping,
        })
    }

    /// The larger of two needs that come one after the other.
    #[must_use]
    pub fn max(self, other: MemoryNeed) -> MemoryNeed {
        MemoryNeed {
            resident: self.resident.max(other.resident),
            mapped: self.mapped.max(other.mapped),
            largest_mapping: self.largest_mapping.max(other.largest_mapping),
        }
    }
}

/// `page_ref_set` events recorded per struct page, at most: `init_page_count()`, the memory
/// type's and a compound tail's `set_page_count(page, 0)`.
const MAX_EVENTS_PER_PAGE: u64 = 3;

/// The tracepoint events a dump records: with the tracepoint on, `per_page` events per struct
/// page, their vector's capacity mapped (the `cond_resched()` pfns are too few to count).
fn recorded_events(nr_pages: u64, trace: Option<u64>) -> Result<MemoryNeed, Overflow> {
    let Some(per_page) = trace else { return Ok(MemoryNeed::default()) };
    let size = size_of::<memmap_core::PageRefEvent>() as u64;
    let events = mul(nr_pages, per_page, "the dump's tracepoint events")?;
    let events = mul(events, size, "the dump's tracepoint events")?;
    let mapped = mul(events, 2, "the dump's tracepoint events")?;
    Ok(MemoryNeed { resident: events, mapped, largest_mapping: mapped })
}

/// The memory `memmap-bench dump zone-device` needs: the memmap, its pageblock bits and the
/// traced events.
pub fn zone_device_dump_need(d: &memmap_dump::ZoneDeviceDump) -> Result<MemoryNeed, Overflow> {
    let memmap = mul(d.nr_pages, d.struct_page_size(), "the dump's memmap")?;
    let trace = d.page_ref_trace.then(|| {
        let behaviour = d.config.behaviour();
        let refcount_zero = u64::from(d.memory_type.head_refcount(&behaviour) == 0);
        let tail = u64::from(d.vmemmap_shift > 0);
        (1 + refcount_zero + tail).min(MAX_EVENTS_PER_PAGE)
    });
    MemoryNeed::resident(memmap)
        .and(MemoryNeed::resident(d.nr_pages / 512 + 1))?
        .and(recorded_events(d.nr_pages, trace)?)
}

/// The memory `memmap-bench dump hotplug` needs: the memmap, its pageblock bits and the traced
/// events (two per page).
pub fn hotplug_dump_need(d: &memmap_dump::HotplugDump) -> Result<MemoryNeed, Overflow> {
    let memmap = mul(d.nr_pages, d.struct_page_size(), "the dump's memmap")?;
    MemoryNeed::resident(memmap)
        .and(MemoryNeed::resident(d.nr_pages / 512 + 1))?
        .and(recorded_events(d.nr_pages, d.page_ref_trace.then_some(2))?)
}

/// The memory `memmap-bench dump node` needs for a node spanning `span_pages` pfns: the memmap,
/// its pageblock bits, and one `u64` per page for the layout file's lists.
pub fn node_dump_need(span_pages: u64, struct_page_size: u64) -> Result<MemoryNeed, Overflow> {
    let memmap = mul(span_pages, struct_page_size, "the dump's memmap")?;
    MemoryNeed::resident(memmap)
        .and(MemoryNeed::resident(span_pages / 512 + 1))?
        .and(MemoryNeed::resident(mul(span_pages, 8, "the node's page lists")?))
}

/// Bytes a dump keeps per hugetlb folio besides struct pages (boot record, copy, JSON), at most.
pub const HUGETLB_PER_FOLIO_BYTES: u64 = 1024;

/// The memory `memmap-bench dump hugetlb` needs: every node's memfd vmemmap (all resident until
/// HVO frees it), the copy written as `memmap.bin`, a spare page per folio for HVO and
/// [`HUGETLB_PER_FOLIO_BYTES`] per folio.
///
/// # Errors
///
/// On overflow (a placed folio that passes the end of the `u64` PFN space included).
pub fn hugetlb_dump_need(d: &memmap_dump::HugetlbDump) -> Result<MemoryNeed, Overflow> {
    let nr = d.hstate.nr_pages();
    let size = d.struct_page_size();
    let (vmemmap, copy_pages, folios) = if d.placed.is_empty() {
        let folios = mul(u64::from(d.nodes), d.count, "the number of huge pages")?;
        let per_node = mul(mul(d.count, nr, "the struct pages of a node")?, size, "a node's vmemmap")?;
        let all = mul(per_node, u64::from(d.nodes), "the dump's vmemmap")?;
        let vmemmap = MemoryNeed { resident: all, mapped: all, largest_mapping: per_node };
        (vmemmap, mul(folios, nr, "the number of struct pages")?, folios)
    } else {
        let mut vmemmap = MemoryNeed::default();
        for pages in placed_node_spans(&d.placed, nr)? {
            vmemmap = vmemmap.and(MemoryNeed::resident(mul(pages, size, "a node's vmemmap")?))?;
        }
        let lo = d.placed.iter().map(|p| p.0).min().unwrap_or(0);
        let hi = d.placed.iter().map(|p| p.0).max().unwrap_or(0);
        (vmemmap, add(hi, nr, "the end of the highest folio")? - lo, d.placed.len() as u64)
    };
    let copy = MemoryNeed::resident(mul(copy_pages, size, "the dump's memmap")?);
    // Written through the memfd, never mapped as such.
    let spare =
        MemoryNeed { resident: mul(folios, 4096, "the spare vmemmap pages")?, mapped: 0, largest_mapping: 0 };
    let per_folio = MemoryNeed::resident(mul(folios, HUGETLB_PER_FOLIO_BYTES, "the folio records")?);
    vmemmap.and(copy)?.and(spare)?.and(per_folio)
}

/// The pages of each node's vmemmap from its lowest placed head to the end of its highest folio.
fn placed_node_spans(placed: &[(u64, u32)], nr: u64) -> Result<Vec<u64>, Overflow> {
    let mut spans = Vec::new();
    for group in placed.chunk_by(|a, b| a.1 == b.1) {
        let lo = group.iter().map(|p| p.0).min().unwrap_or(0);
        let hi = group.iter().map(|p| p.0).max().unwrap_or(0);
        spans.push(add(hi, nr, "the end of the highest folio")? - lo);
    }
    Ok(spans)
}

/// What the machine offers, read from `/proc` and `getrlimit` (each `None` where unknown).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemInfo {
    /// `MemAvailable`.
    pub available: Option<u64>,
    /// `MemTotal`.
    pub total: Option<u64>,
    /// `SwapTotal`.
    pub swap_total: Option<u64>,
    /// `CommitLimit`.
    pub commit_limit: Option<u64>,
    /// `Committed_AS`.
    pub committed: Option<u64>,
    /// `/proc/sys/vm/overcommit_memory` (0 heuristic, 1 always, 2 strict).
    pub overcommit: Option<u32>,
    /// `RLIMIT_AS` (`None`: unlimited or unknown).
    pub rlimit_as: Option<u64>,
    /// The tightest memory-cgroup limit and the room under it ([`cgroup`]).
    pub cgroup: Option<CgroupMemory>,
}

/// The user address space a process can map, conservatively: 128 TiB on 64-bit targets (4-level
/// paging), 2 GiB on 32-bit ones.
pub const USER_ADDRESS_SPACE: u64 = if usize::BITS >= 64 { 1 << 47 } else { 1 << 31 };

/// Share of the room ([`MemInfo::room`]) a run may use (the rest is left to the system and the bench itself).
const AVAILABLE_SHARE: (u64, u64) = (9, 10);

impl MemInfo {
    /// Reads the machine's values with the `procfs` crate (each `None` where unreadable).
    #[must_use]
    pub fn read() -> MemInfo {
        use procfs::Current as _;
        let mem = procfs::Meminfo::current().ok();
        let overcommit = std::fs::read_to_string("/proc/sys/vm/overcommit_memory")
            .ok()
            .and_then(|s| s.trim().parse().ok());
        let rlimit_as =
            procfs::process::Process::myself().and_then(|p| p.limits()).ok().and_then(|l| {
                match l.max_address_space.soft_limit {
                    procfs::process::LimitValue::Value(v) => Some(v),
                    procfs::process::LimitValue::Unlimited => None,
                }
            });
        MemInfo {
            available: mem.as_ref().and_then(|m| m.mem_available),
            total: mem.as_ref().map(|m| m.mem_total),
            swap_total: mem.as_ref().map(|m| m.swap_total),
            commit_limit: mem.as_ref().and_then(|m| m.commit_limit),
            committed: mem.as_ref().map(|m| m.committed_as),
            overcommit,
            rlimit_as,
            cgroup: cgroup::read(),
        }
    }

    /// The bytes a run can make resident: `MemAvailable`, or the cgroup's room where less.
    #[must_use]
    pub fn room(&self) -> Option<u64> {
        self.binding_cgroup().map(|c| c.room).or(self.available)
    }

    /// The memory cgroup, where it sets [`room`](Self::room).
    #[must_use]
    pub fn binding_cgroup(&self) -> Option<&CgroupMemory> {
        self.cgroup.as_ref().filter(|c| self.available.is_none_or(|a| c.room < a))
    }

    /// What [`room`](Self::room) is, for messages (`MemAvailable 20 GiB`, or the cgroup's room).
    #[must_use]
    pub fn room_text(&self) -> String {
        match self.binding_cgroup() {
            Some(c) => format!(
                "{} left under the memory cgroup's {} limit, {}",
                Bytes(c.room),
                Bytes(c.limit),
                c.dir.display()
            ),
            None => format!("MemAvailable {}", Bytes(self.available.unwrap_or(0))),
        }
    }

    /// The resident bytes a run may use, the largest budget: 90% of the [`room`](Self::room).
    #[must_use]
    pub fn usable(&self) -> Option<u64> {
        self.room().map(|a| a / AVAILABLE_SHARE.1 * AVAILABLE_SHARE.0)
    }

    /// The default memory budget of a timing run: two thirds of the [`room`](Self::room).
    #[must_use]
    pub fn default_budget(&self) -> Option<u64> {
        self.room().map(|a| a / 3 * 2)
    }

    /// A machine with `available` of `total` bytes, heuristic overcommit, no swap and no limits.
    #[must_use]
    pub const fn with_available(available: u64, total: u64) -> MemInfo {
        MemInfo {
            available: Some(available),
            total: Some(total),
            swap_total: Some(0),
            commit_limit: Some(total / 2),
            committed: Some(0),
            overcommit: Some(0),
            rlimit_as: None,
            cgroup: None,
        }
    }
}

/// Why a run cannot get the memory it needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemoryError {
    /// The size arithmetic overflowed.
    Overflow(Overflow),
    /// Not enough available memory.
    Resident {
        /// Who needs it.
        who: String,
        /// Bytes needed.
        need: u64,
        /// The most a run may use: [`MemInfo::usable`].
        usable: u64,
        /// What is available: [`MemInfo::room_text`].
        available: String,
    },
    /// More than the memory budget (`--memory-budget`); the command adds what to do
    /// (`Budget::advice` in [`crate::budget`]).
    Budget {
        /// Who needs it.
        who: String,
        /// Bytes needed.
        need: u64,
        /// What the bench itself keeps resident besides, counted against the budget.
        own: u64,
        /// The budget in bytes.
        budget: u64,
        /// Where the budget came from, in parentheses (`(--memory-budget)`, `(2/3 of
        /// MemAvailable 20 GiB; --memory-budget sets it)`).
        source: String,
    },
    /// More address space than the process can map.
    AddressSpace {
        /// Who needs it.
        who: String,
        /// Bytes needed.
        need: u64,
        /// The limit.
        limit: u64,
        /// Which limit.
        which: &'static str,
    },
}

impl fmt::Display for MemoryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MemoryError::Overflow(o) => write!(f, "{o}: use a smaller size"),
            MemoryError::Resident { who, need, usable, available } => {
                let (need, usable) = Bytes::distinct(*need, *usable);
                write!(
                    f,
                    "{who} needs {need} of memory, more than the {usable} a run may use (90% of \
                     {available}); use a smaller size"
                )
            }
            MemoryError::Budget { who, need, own, budget, source } => {
                let total = need.saturating_add(*own);
                let (total, budget) = Bytes::distinct(total, *budget);
                write!(
                    f,
                    "{who} needs {} of memory, {total} with the bench's own {}: more than the memory \
                     budget {budget} {source}",
                    Bytes(*need),
                    Bytes(*own)
                )
            }
            MemoryError::AddressSpace { who, need, limit, which } => {
                let (need, limit) = Bytes::distinct(*need, *limit);
                write!(
                    f,
                    "{who} maps {need} of address space, more than {which} ({limit}); use a smaller size"
                )
            }
        }
    }
}

impl std::error::Error for MemoryError {}

impl From<Overflow> for MemoryError {
    fn from(o: Overflow) -> Self {
        MemoryError::Overflow(o)
    }
}

/// Checks `need` (of `who`, for messages) against `info`.
///
/// # Errors
///
/// The first limit `need` exceeds.
pub fn check(who: &str, need: &MemoryNeed, info: &MemInfo) -> Result<(), MemoryError> {
    let space = |limit: u64, which: &'static str, need: u64| {
        if need > limit {
            Err(MemoryError::AddressSpace { who: who.to_string(), need, limit, which })
        } else {
            Ok(())
        }
    };
    space(USER_ADDRESS_SPACE, "the user address space", need.mapped)?;
    if let Some(limit) = info.rlimit_as {
        space(limit, "the address-space limit (ulimit -v)", need.mapped)?;
    }
    match info.overcommit {
        // Heuristic overcommit refuses a single mapping larger than RAM plus swap.
        Some(0) => {
            if let (Some(total), Some(swap)) = (info.total, info.swap_total) {
                space(total.saturating_add(swap), "RAM plus swap", need.largest_mapping)?;
            }
        }
        // Strict overcommit: every private writable mapping is committed.
        Some(2) => {
            if let (Some(limit), Some(used)) = (info.commit_limit, info.committed) {
                space(
                    limit.saturating_sub(used),
                    "the commit limit left (vm.overcommit_memory=2)",
                    need.mapped,
                )?;
            }
        }
        _ => {}
    }
    if let (Some(usable), Some(_)) = (info.usable(), info.room()) {
        if need.resident > usable {
            return Err(MemoryError::Resident {
                who: who.to_string(),
                need: need.resident,
                usable,
                available: info.room_text(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// One mapping of `mapped` bytes of which `resident` are touched.
    fn sparse(mapped: u64, resident: u64) -> MemoryNeed {
        MemoryNeed { resident, mapped, largest_mapping: mapped }
    }

    /// This project's machine: 24 GiB, 20 available, heuristic overcommit, no swap.
    pub(crate) fn info() -> MemInfo {
        MemInfo {
            available: Some(20 << 30),
            total: Some(24 << 30),
            swap_total: Some(0),
            commit_limit: Some(12 << 30),
            committed: Some(1 << 30),
            overcommit: Some(0),
            rlimit_as: None,
            cgroup: None,
        }
    }

    #[test]
    fn needs_are_checked_against_each_limit() {
        let i = info();
        assert_eq!(check("x", &MemoryNeed::resident(1 << 30), &i), Ok(()));
        assert!(matches!(check("x", &MemoryNeed::resident(19 << 30), &i), Err(MemoryError::Resident { .. })));
        // Sparse: little resident, but one mapping larger than RAM + swap.
        let e = check("x", &sparse(30 << 30, 1 << 20), &i).unwrap_err();
        assert!(e.to_string().contains("RAM plus swap"), "{e}");
        // Several mappings each below RAM: fine under the heuristic.
        let many = sparse(10 << 30, 1 << 20).times(3).unwrap();
        assert_eq!(check("x", &many, &i), Ok(()));
        let strict = MemInfo { overcommit: Some(2), ..i.clone() };
        assert!(check("x", &many, &strict).unwrap_err().to_string().contains("commit limit"));
        let limited = MemInfo { rlimit_as: Some(1 << 30), ..i };
        assert!(check("x", &sparse(2 << 30, 0), &limited).unwrap_err().to_string().contains("ulimit"));
        let huge = sparse(1 << 50, 0);
        assert!(
            check("x", &huge, &MemInfo::default()).unwrap_err().to_string().contains("user address space")
        );
        // Unknown machine: only the address-space bound applies.
        assert_eq!(check("x", &MemoryNeed::resident(1 << 40), &MemInfo::default()), Ok(()));
    }

    #[test]
    fn arithmetic_is_checked() {
        let a = MemoryNeed::resident(u64::MAX / 2 + 1);
        assert!(a.and(a).is_err());
        assert!(a.times(2).is_err());
        assert_eq!(a.times(1), Ok(a));
        assert!(mul(1 << 40, 1 << 40, "x").is_err());
    }
}
