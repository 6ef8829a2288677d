//! Boot-time allocation of gigantic pages (`mm/hugetlb.c` `alloc_bootmem()`), modelled on
//! simulated per-node physical ranges (the modelling choices: `docs/hugetlb-init.md`).

use crate::HugetlbError;
use crate::folio::TailInit;
use crate::hstate::{Hstate, Hstates};
use crate::hvo::HvoOutcome;

/// `ZONE_NORMAL` of the x86-64 preset, where boot-time gigantic pages normally land (other
/// configurations: [`KernelConfig::zone_normal`](memmap_core::KernelConfig::zone_normal)).
pub(crate) const ZONE_NORMAL: u32 = memmap_core::KernelConfig::X86_64.zone_normal();

/// One NUMA node's memory in the simulated machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NodeSpec {
    /// Node id (`nid`).
    pub nid: u32,
    /// Zone index of the whole range (`zone_idx`). Must be a real zone below `ZONE_DEVICE`.
    pub zone: u32,
    /// First PFN of the node's memory.
    pub start_pfn: u64,
    /// Pages of memory (0: a memoryless node).
    pub nr_pages: u64,
}

impl NodeSpec {
    /// A node of `nr_pages` pages from `start_pfn` in `ZONE_NORMAL`.
    #[must_use]
    pub const fn new(nid: u32, start_pfn: u64, nr_pages: u64) -> NodeSpec {
        NodeSpec { nid, zone: ZONE_NORMAL, start_pfn, nr_pages }
    }

    /// One past the last PFN (saturating).
    #[must_use]
    pub const fn end_pfn(&self) -> u64 {
        self.start_pfn.saturating_add(self.nr_pages)
    }

    /// Node `nid` of a machine whose nodes each hold exactly `count` pages of `hstate` and are
    /// laid out back to back from `PACKED_BASE_ADDR` (4 GiB: PFN `0x100000` with 4 KiB pages,
    /// `0x40000` with 16 KiB, `0x10000` with 64 KiB; rounded up to the huge page size),
    /// `ZONE_NORMAL`. What the bench program and the tests use to build "K gigantic pages on N
    /// nodes".
    ///
    /// A layout that does not fit in the `u64` PFN space saturates: its `start_pfn +
    /// nr_pages` then overflows, which every boot refuses ([`HugetlbError::RangeOverflow`]),
    /// as memmap construction refuses a range past the configuration's last PFN.
    #[must_use]
    pub const fn packed(nid: u32, hstate: Hstate, count: u64) -> NodeSpec {
        let nr = count.saturating_mul(hstate.nr_pages());
        let base = align_up(PACKED_BASE_ADDR >> hstate.page_shift(), hstate.nr_pages());
        NodeSpec::new(nid, base.saturating_add((nid as u64).saturating_mul(nr)), nr)
    }

    /// Huge pages of `hstate` that fit in the node (aligned, top-down).
    #[must_use]
    pub const fn capacity(&self, hstate: Hstate) -> u64 {
        let nr = hstate.nr_pages();
        let top = align_down(self.end_pfn(), nr);
        // Rounded up without passing u64::MAX: no huge page starts above the last aligned PFN.
        let bottom = match self.start_pfn.checked_next_multiple_of(nr) {
            Some(b) => b,
            None => return 0,
        };
        if top > bottom { (top - bottom) / nr } else { 0 }
    }
}

/// Where [`NodeSpec::packed`] layouts start: 4 GiB, in bytes.
pub(crate) const PACKED_BASE_ADDR: u64 = 1 << 32;

const fn align_up(x: u64, a: u64) -> u64 {
    x.div_ceil(a) * a
}

const fn align_down(x: u64, a: u64) -> u64 {
    x / a * a
}

/// How many pages each node gets (`hugepages=N` or the node-specific `hugepages=0:N,1:M`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PagesPerNode<'a> {
    /// The same count on every node.
    Same(u64),
    /// `counts[i]` pages on the `i`-th node of the node list.
    Each(&'a [u64]),
}

/// A boot-time huge page request: `hugepagesz=<hstate> hugepages=<pages>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BootRequest<'a> {
    /// The page size.
    pub hstate: Hstate,
    /// Pages per node.
    pub pages: PagesPerNode<'a>,
}

impl<'a> BootRequest<'a> {
    /// `count` pages of `hstate` on every node.
    #[must_use]
    pub const fn per_node(hstate: Hstate, count: u64) -> Self {
        BootRequest { hstate, pages: PagesPerNode::Same(count) }
    }

    /// The count for the `i`-th node.
    #[must_use]
    pub fn count(&self, i: usize) -> u64 {
        match self.pages {
            PagesPerNode::Same(n) => n,
            PagesPerNode::Each(c) => c.get(i).copied().unwrap_or(0),
        }
    }

    /// Total pages over `nodes` nodes (saturating; computed without visiting nodes that have
    /// no count, so any `nodes` is answered at once).
    #[must_use]
    pub fn total(&self, nodes: usize) -> u64 {
        match self.pages {
            PagesPerNode::Same(n) => n.saturating_mul(nodes as u64),
            PagesPerNode::Each(c) => c.iter().take(nodes).fold(0u64, |acc, &n| acc.saturating_add(n)),
        }
    }
}

/// `HUGE_BOOTMEM_ZONES_VALID` (the value is this model's): `hugetlb_bootmem_page_zones_valid()`
/// found the page inside one zone.
pub(crate) const ZONES_VALID: u32 = 1 << 1;

/// `struct huge_bootmem_page` plus what the boot did to the folio.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HugeBootmemPage {
    /// PFN of the head page (the record's address in the kernel: it sits in the page).
    pub head_pfn: u64,
    /// The node whose list holds the record (`listnode`).
    pub nid: u32,
    /// `hstate`.
    pub hstate: Hstate,
    /// `flags`: 0 when allocated, bit 1 (`HUGE_BOOTMEM_ZONES_VALID`) once the gather found the
    /// page inside one zone.
    pub flags: u32,
    /// The boot's outcome for this folio.
    pub outcome: FolioOutcome,
}

/// The hstate of [`HugeBootmemPage::EMPTY`]: x86-64's 2 MiB, a placeholder every boot
/// overwrites.
const PLACEHOLDER: Hstate = match Hstates::of(&memmap_core::KernelConfig::X86_64).get(1) {
    Some(h) => h,
    None => panic!("x86-64 has two hstates"),
};

impl HugeBootmemPage {
    /// An empty record (for sizing caller storage; its hstate is a placeholder that
    /// [`crate::boot()`] overwrites and [`crate::boot_placed`] takes from the caller).
    pub const EMPTY: HugeBootmemPage = HugeBootmemPage {
        head_pfn: 0,
        nid: 0,
        hstate: PLACEHOLDER,
        flags: 0,
        outcome: FolioOutcome { initialized: false, hvo: HvoOutcome::NotAttempted, fallback: None },
    };

    /// PFN range `[head, head + nr)` of the folio, ending at `u64::MAX` for a head so close to
    /// it that the folio does not fit (no boot accepts such a record:
    /// [`HugetlbError::FolioOutsideNode`]).
    #[must_use]
    pub const fn pfns(&self) -> core::ops::Range<u64> {
        self.head_pfn..self.head_pfn.saturating_add(self.hstate.nr_pages())
    }
}

impl Default for HugeBootmemPage {
    fn default() -> Self {
        Self::EMPTY
    }
}

/// Checks the node list (node `i` is `node(i)`) and the request; returns the total page count.
/// The errors are [`alloc_with`]'s.
pub(crate) fn validate_with(
    n_nodes: usize,
    node: impl Fn(usize) -> NodeSpec,
    request: &BootRequest<'_>,
) -> Result<u64, HugetlbError> {
    if let PagesPerNode::Each(c) = request.pages {
        if c.len() != n_nodes {
            return Err(HugetlbError::CountsMismatch { nodes: n_nodes, counts: c.len() });
        }
    }
    for i in 0..n_nodes {
        let n = node(i);
        if n.start_pfn.checked_add(n.nr_pages).is_none() {
            return Err(HugetlbError::RangeOverflow { nid: n.nid });
        }
        for j in 0..i {
            let m = node(j);
            if m.nid == n.nid {
                return Err(HugetlbError::DuplicateNode { nid: n.nid });
            }
            let overlap = n.start_pfn < m.end_pfn() && m.start_pfn < n.end_pfn();
            if overlap && n.nr_pages != 0 && m.nr_pages != 0 {
                return Err(HugetlbError::NodesOverlap { a: m.nid, b: n.nid });
            }
        }
    }
    let total = request.total(n_nodes);
    if total == 0 {
        return Err(HugetlbError::ZeroPages);
    }
    for i in 0..n_nodes {
        let n = node(i);
        let want = request.count(i);
        if want == 0 {
            continue;
        }
        if n.nr_pages == 0 {
            return Err(HugetlbError::NodeWithoutMemory { nid: n.nid });
        }
        let fit = n.capacity(request.hstate);
        if want > fit {
            return Err(HugetlbError::RangeTooSmall {
                nid: n.nid,
                hstate: request.hstate,
                requested: want,
                fit,
            });
        }
    }
    Ok(total)
}

/// `hugetlb_hstate_alloc_pages()` for a gigantic hstate on every node: computes where memblock
/// puts each page and fills `records[..total]` (grouped by node in node order, each group in
/// `huge_boot_pages[nid]` list order: allocation order when `list_tail`
/// ([`Behaviour::hugetlb_boot_list_tail`](memmap_core::Behaviour::hugetlb_boot_list_tail)), else
/// its reverse). Writes no struct page. Returns the total.
///
/// # Errors
///
/// Nothing is written to `records` when one is returned:
/// [`HugetlbError::ZeroPages`] (the request asks for no page at all),
/// [`HugetlbError::CountsMismatch`], [`HugetlbError::DuplicateNode`],
/// [`HugetlbError::NodesOverlap`], [`HugetlbError::RangeOverflow`],
/// [`HugetlbError::NodeWithoutMemory`] (pages requested on a node with no memory),
/// [`HugetlbError::RangeTooSmall`] (fewer aligned huge pages fit than requested),
/// [`HugetlbError::RecordsTooShort`].
pub(crate) fn alloc_with(
    n_nodes: usize,
    node: impl Fn(usize) -> NodeSpec,
    request: &BootRequest<'_>,
    list_tail: bool,
    records: &mut [HugeBootmemPage],
) -> Result<usize, HugetlbError> {
    let total = validate_with(n_nodes, &node, request)?;
    let total = usize::try_from(total)
        .map_err(|_| HugetlbError::RecordsTooShort { needed: usize::MAX, got: records.len() })?;
    if records.len() < total {
        return Err(HugetlbError::RecordsTooShort { needed: total, got: records.len() });
    }
    let nr = request.hstate.nr_pages();
    let mut out = 0;
    for i in 0..n_nodes {
        let n = node(i);
        let count = request.count(i);
        let top = align_down(n.end_pfn(), nr);
        // Allocation k (k = 0, 1, ...) lands at top - (k + 1) * nr; list_add_tail() keeps
        // allocation order, list_add() puts the last allocation first (list position j holds
        // allocation count - 1 - j).
        for j in 0..count {
            let k = if list_tail { j } else { count - 1 - j };
            records[out] = HugeBootmemPage {
                head_pfn: top - (k + 1) * nr,
                nid: n.nid,
                hstate: request.hstate,
                flags: 0,
                outcome: FolioOutcome::default(),
            };
            out += 1;
        }
    }
    Ok(out)
}

/// What the boot did to one folio.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct FolioOutcome {
    /// The folio went through `hugetlb_folio_init_vmemmap` and `init_new_hugetlb_folio`.
    pub initialized: bool,
    /// What HVO did.
    pub hvo: HvoOutcome,
    /// The fallback `hugetlb_folio_init_tail_vmemmap(folio, RESERVE, nr)`, when HVO did not
    /// cover the folio.
    pub fallback: Option<TailInit>,
}

impl FolioOutcome {
    /// Whether HVO optimized the folio (`folio_test_hugetlb_vmemmap_optimized`).
    #[must_use]
    pub const fn optimized(&self) -> bool {
        matches!(self.hvo, HvoOutcome::Optimized { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memmap_core::KernelConfig;

    const CFG: KernelConfig = KernelConfig::X86_64;

    fn alloc_bootmem_huge_pages(
        nodes: &[NodeSpec],
        request: &BootRequest<'_>,
        records: &mut [HugeBootmemPage],
    ) -> Result<usize, HugetlbError> {
        alloc_with(nodes.len(), |i| nodes[i], request, false, records)
    }

    fn h2m() -> Hstate {
        Hstate::new(&CFG, 2 << 20).unwrap()
    }

    fn h1g() -> Hstate {
        Hstate::new(&CFG, 1 << 30).unwrap()
    }

    #[test]
    fn pages_are_stacked_top_down_and_listed_in_the_releases_order() {
        let nodes = [NodeSpec::new(0, 1000, 3 * 512 + 700), NodeSpec::new(1, 1 << 20, 1024)];
        let mut rec = [HugeBootmemPage::EMPTY; 4];
        let req = BootRequest { hstate: h2m(), pages: PagesPerNode::Each(&[2, 2]) };
        assert_eq!(alloc_bootmem_huge_pages(&nodes, &req, &mut rec), Ok(4));
        // Node 0 ends at pfn 3236; top aligned = 3072; allocations at 2560 then 2048.
        assert_eq!(
            rec.map(|r| (r.nid, r.head_pfn)),
            [(0, 2048), (0, 2560), (1, (1 << 20)), (1, (1 << 20) + 512)]
        );
        assert_eq!(nodes[0].capacity(h2m()), 4);
        // From 7.3 (list_add_tail) the list keeps allocation order.
        assert_eq!(alloc_with(nodes.len(), |i| nodes[i], &req, true, &mut rec), Ok(4));
        assert_eq!(
            rec.map(|r| (r.nid, r.head_pfn)),
            [(0, 2560), (0, 2048), (1, (1 << 20) + 512), (1, (1 << 20))]
        );
    }

    #[test]
    fn bad_requests_are_typed_errors_and_write_nothing() {
        let nodes = [NodeSpec::new(0, 0, 1024), NodeSpec::new(1, 4096, 0)];
        let mut rec = [HugeBootmemPage::EMPTY; 8];
        let err =
            |req: BootRequest<'_>, rec: &mut [HugeBootmemPage]| alloc_bootmem_huge_pages(&nodes, &req, rec);
        assert_eq!(err(BootRequest::per_node(h2m(), 0), &mut rec), Err(HugetlbError::ZeroPages));
        assert_eq!(
            err(BootRequest::per_node(h2m(), 1), &mut rec),
            Err(HugetlbError::NodeWithoutMemory { nid: 1 })
        );
        assert_eq!(
            err(BootRequest { hstate: h2m(), pages: PagesPerNode::Each(&[3, 0]) }, &mut rec),
            Err(HugetlbError::RangeTooSmall { nid: 0, hstate: h2m(), requested: 3, fit: 2 })
        );
        assert_eq!(
            err(BootRequest { hstate: h1g(), pages: PagesPerNode::Each(&[1, 0]) }, &mut rec),
            Err(HugetlbError::RangeTooSmall { nid: 0, hstate: h1g(), requested: 1, fit: 0 })
        );
        assert_eq!(
            err(BootRequest { hstate: h2m(), pages: PagesPerNode::Each(&[1]) }, &mut rec),
            Err(HugetlbError::CountsMismatch { nodes: 2, counts: 1 })
        );
        assert_eq!(
            err(BootRequest { hstate: h2m(), pages: PagesPerNode::Each(&[2, 0]) }, &mut rec[..1]),
            Err(HugetlbError::RecordsTooShort { needed: 2, got: 1 })
        );
        assert!(rec.iter().all(|r| *r == HugeBootmemPage::EMPTY));
        let dup = [NodeSpec::new(0, 0, 1024), NodeSpec::new(0, 4096, 1024)];
        assert_eq!(
            alloc_bootmem_huge_pages(&dup, &BootRequest::per_node(h2m(), 1), &mut rec),
            Err(HugetlbError::DuplicateNode { nid: 0 })
        );
        let overlap = [NodeSpec::new(0, 0, 1024), NodeSpec::new(1, 512, 1024)];
        assert_eq!(
            alloc_bootmem_huge_pages(&overlap, &BootRequest::per_node(h2m(), 1), &mut rec),
            Err(HugetlbError::NodesOverlap { a: 0, b: 1 })
        );
    }
}
