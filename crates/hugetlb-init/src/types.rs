//! The types the other modules share: the huge page sizes ([`Hstate`]), bad input, HVO's
//! outcome, a folio's tail init. This
//! module imports nothing else of the crate, so the boot path's modules form a chain
//! (`types` → `bootmem`, `folio` → `hvo` → `boot`) without cycles.

use core::fmt;

use memmap_core::{Strategy, StrategyReason, StructPage};

/// Bad input to the boot. Nothing is written when one is returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum HugetlbError {
    /// The request asks for no page on any node.
    ZeroPages,
    /// Not a supported huge page size (2 MiB or 1 GiB with 4 KiB base pages).
    UnsupportedHstate {
        /// Size asked for, in bytes.
        size: u64,
    },
    /// The configuration's base page is not 4 KiB.
    UnsupportedBasePage {
        /// `PAGE_SHIFT` of the configuration.
        page_shift: u32,
    },
    /// `pageblock_order` above the 2 MiB hstate's order (heads must be pageblock-aligned).
    PageblockLargerThanHstate {
        /// `pageblock_order`.
        pageblock_order: u32,
    },
    /// A node's range cannot hold the pages asked for on it.
    RangeTooSmall {
        /// The node id.
        nid: u32,
        /// Page size.
        hstate: Hstate,
        /// Pages asked for.
        requested: u64,
        /// Aligned pages that fit.
        fit: u64,
    },
    /// Pages were asked for on a node without memory.
    NodeWithoutMemory {
        /// The node id.
        nid: u32,
    },
    /// A per-node count list does not match the node list.
    CountsMismatch {
        /// Nodes.
        nodes: usize,
        /// Counts given.
        counts: usize,
    },
    /// Two nodes have the same id.
    DuplicateNode {
        /// The node id.
        nid: u32,
    },
    /// Two nodes' ranges overlap.
    NodesOverlap {
        /// First node.
        a: u32,
        /// Second node.
        b: u32,
    },
    /// A node's PFN range overflows `u64`.
    RangeOverflow {
        /// The node id.
        nid: u32,
    },
    /// The record storage is too short for the request.
    RecordsTooShort {
        /// Records needed.
        needed: usize,
        /// Records given.
        got: usize,
    },
    /// The node id does not fit in the flags' node field.
    NodeOutOfRange {
        /// The node id.
        nid: u32,
        /// Largest id.
        max: u32,
    },
    /// The node's zone is not a memory zone below `ZONE_DEVICE`.
    BadZone {
        /// The node id.
        nid: u32,
        /// Zone given.
        zone: u32,
        /// `ZONE_DEVICE`.
        zone_device: u32,
    },
    /// A node's memory is not inside its memmap.
    NodeOutsideMemmap {
        /// The node id.
        nid: u32,
        /// Node start.
        start_pfn: u64,
        /// Node pages.
        nr_pages: u64,
        /// Memmap start.
        memmap_start: u64,
        /// Memmap end.
        memmap_end: u64,
    },
    /// The records are not grouped by node in node order (first offending index).
    RecordsNotGrouped {
        /// Index.
        index: usize,
    },
    /// A record's folio is misaligned or not inside its node's memory.
    FolioOutsideNode {
        /// Head PFN.
        head_pfn: u64,
        /// The node id.
        nid: u32,
    },
    /// A head is not as the reserved-region path leaves it (refcount 1, `PG_reserved`).
    HeadNotReserved {
        /// Head PFN.
        pfn: u64,
    },
    /// Two folios given to [`boot_placed`](crate::boot_placed) overlap.
    FoliosOverlap {
        /// Head PFN of one.
        a: u64,
        /// Head PFN of the other.
        b: u64,
    },
}

impl fmt::Display for HugetlbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            HugetlbError::ZeroPages => f.write_str("no huge pages requested"),
            HugetlbError::UnsupportedHstate { size } => {
                write!(f, "unsupported huge page size {size:#x} (2 MiB and 1 GiB are supported)")
            }
            HugetlbError::UnsupportedBasePage { page_shift } => {
                write!(f, "base pages of 2^{page_shift} bytes (only 4 KiB is supported)")
            }
            HugetlbError::PageblockLargerThanHstate { pageblock_order } => {
                write!(f, "pageblock_order {pageblock_order} is larger than the 2 MiB hstate")
            }
            HugetlbError::RangeTooSmall { nid, hstate, requested, fit } => {
                write!(f, "node {nid}: {requested} pages of {hstate} requested, only {fit} fit in its memory")
            }
            HugetlbError::NodeWithoutMemory { nid } => write!(f, "node {nid} has no memory"),
            HugetlbError::CountsMismatch { nodes, counts } => {
                write!(f, "{counts} per-node counts for {nodes} nodes")
            }
            HugetlbError::DuplicateNode { nid } => write!(f, "node {nid} listed twice"),
            HugetlbError::NodesOverlap { a, b } => write!(f, "nodes {a} and {b} overlap"),
            HugetlbError::RangeOverflow { nid } => write!(f, "node {nid}: pfn range overflows"),
            HugetlbError::RecordsTooShort { needed, got } => {
                write!(f, "{got} huge_bootmem_page records given, {needed} needed")
            }
            HugetlbError::NodeOutOfRange { nid, max } => write!(f, "node {nid} does not fit (max {max})"),
            HugetlbError::BadZone { nid, zone, zone_device } => {
                write!(f, "node {nid}: zone {zone} is not a memory zone below ZONE_DEVICE ({zone_device})")
            }
            HugetlbError::NodeOutsideMemmap { nid, start_pfn, nr_pages, memmap_start, memmap_end } => write!(
                f,
                "node {nid}: pfns [{start_pfn:#x}, +{nr_pages}) not inside its memmap [{memmap_start:#x}, {memmap_end:#x})"
            ),
            HugetlbError::RecordsNotGrouped { index } => {
                write!(f, "huge_bootmem_page records not grouped by node in node order (index {index})")
            }
            HugetlbError::FolioOutsideNode { head_pfn, nid } => {
                write!(f, "folio at {head_pfn:#x} is misaligned or outside node {nid}")
            }
            HugetlbError::HeadNotReserved { pfn } => {
                write!(f, "head {pfn:#x} is not a reserved page with refcount 1")
            }
            HugetlbError::FoliosOverlap { a, b } => write!(f, "the folios at {a:#x} and {b:#x} overlap"),
        }
    }
}

impl core::error::Error for HugetlbError {}

/// Why HVO does not run at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HvoUnavailable {
    /// `CONFIG_HUGETLB_PAGE_OPTIMIZE_VMEMMAP` is not set ([`KernelConfig::hugetlb_vmemmap`](memmap_core::KernelConfig::hugetlb_vmemmap)).
    ConfigOff,
    /// The configuration is not SPARSEMEM_VMEMMAP, which HVO depends on.
    NoSparsememVmemmap,
    /// Booted with `hugetlb_free_vmemmap=off` ([`HvoParams::boot_option`](crate::HvoParams::boot_option) false).
    BootOptionOff,
    /// `sizeof(struct page)` is not a power of two (72-byte layout): nothing is optimizable.
    StructPageNotPowerOfTwo,
}

impl fmt::Display for HvoUnavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HvoUnavailable::ConfigOff => "CONFIG_HUGETLB_PAGE_OPTIMIZE_VMEMMAP is off",
            HvoUnavailable::NoSparsememVmemmap => "not SPARSEMEM_VMEMMAP",
            HvoUnavailable::BootOptionOff => "hugetlb_free_vmemmap=off",
            HvoUnavailable::StructPageNotPowerOfTwo => "sizeof(struct page) is not a power of two",
        })
    }
}

/// Why HVO failed for one folio.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HvoError {
    /// `-ENOMEM`: the page-table page for splitting the vmemmap PMD could not be allocated.
    NoMemory,
    /// The real (memfd) remapping failed with this errno (e.g. `ENOMEM` when the process runs
    /// out of `vm.max_map_count` mappings); the folio's vmemmap was restored.
    Remap {
        /// `errno`.
        errno: i32,
    },
}

impl fmt::Display for HvoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HvoError::NoMemory => f.write_str("-ENOMEM (vmemmap page-table allocation failed)"),
            HvoError::Remap { errno } => write!(f, "vmemmap remap failed, errno {errno}"),
        }
    }
}

/// What HVO did to one folio.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum HvoOutcome {
    /// The folio has not reached `prep_and_add_bootmem_folios()` yet.
    #[default]
    NotAttempted,
    /// Optimized: the tail vmemmap pages map the head vmemmap page read-only.
    Optimized {
        /// A new page received a copy of the head vmemmap page (false: the current head page
        /// was kept, after a failed allocation or in the no_std model).
        head_copied: bool,
        /// Old vmemmap pages freed.
        freed_pages: u64,
    },
    /// HVO does not run.
    Unavailable(HvoUnavailable),
    /// HVO failed; the folio is as before.
    Failed(HvoError),
}

/// How one folio's fallback tails were initialized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct TailInit {
    /// Strategy used (never [`Strategy::Auto`]).
    pub used: Strategy,
    /// Why that strategy ran.
    pub reason: StrategyReason,
    /// Tail struct pages written.
    pub pages: u64,
    /// `stream_hal::drain()` calls.
    pub drains: u64,
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

/// `PAGE_SHIFT` of the modelled kernels: hstates are defined for 4 KiB base pages.
pub const PAGE_SHIFT: u32 = 12;

/// `PAGE_SIZE`.
pub const PAGE_SIZE: u64 = 1 << PAGE_SHIFT;

/// `HUGETLB_VMEMMAP_RESERVE_SIZE`: "Reserve one vmemmap page, all vmemmap addresses are mapped
/// to it".
pub const HUGETLB_VMEMMAP_RESERVE_SIZE: u64 = PAGE_SIZE;

/// `HUGETLB_VMEMMAP_RESERVE_PAGES` = `HUGETLB_VMEMMAP_RESERVE_SIZE / sizeof(struct page)`:
/// the struct pages of the first vmemmap page of a huge page, which HVO keeps unique and which
/// `hugetlb_folio_init_vmemmap()` always initializes (head plus tails `1..RESERVE`).
///
/// 64 for the 64-byte layout. For the 72-byte layout the C integer division gives 56 (the
/// 57th struct page straddles the page boundary); HVO is off with that layout anyway, so the
/// fallback initializes tails `56..nr` and the bytes are the same as with any other split.
#[must_use]
pub const fn hugetlb_vmemmap_reserve_pages<P: StructPage>() -> u64 {
    HUGETLB_VMEMMAP_RESERVE_SIZE / P::SIZE as u64
}

/// The modelled kernel address of `hstates[]`, the array of `struct hstate` in the kernel
/// image. Real kernels place it where their build puts it; a comparison with a real kernel
/// matches the two by name (see [`hugepage_freelist_addr`]).
pub const HSTATES_ADDR: u64 = 0xffff_ffff_8400_0000;

/// The modelled size of one `struct hstate` in [`HSTATES_ADDR`]'s array.
pub const HSTATE_MODEL_SIZE: u64 = 0x1_0000;

/// The modelled offset of `hugepage_freelists[]` (one `struct list_head` per node) in a
/// `struct hstate`.
pub const HUGEPAGE_FREELISTS_OFFSET: u64 = 0x100;

/// The modelled address of `&h->hugepage_freelists[nid]` for `hstate` (`hstates[]` slot 0 for
/// 1 GiB pages, 1 for 2 MiB, as x86-64 registers them: gigantic first): the list head the
/// free folios' `lru` links point to at either end.
#[must_use]
pub const fn hugepage_freelist_addr(hstate: Hstate, nid: u32) -> u64 {
    let slot = if hstate.order() == Hstate::H1G.order() { 0 } else { 1 };
    // A modelled kernel address: it wraps, as pointer arithmetic does, for node ids no kernel
    // has (`nid * 16` reaches 64 GiB, past the top of the address space from `hstates[]`).
    (HSTATES_ADDR + slot * HSTATE_MODEL_SIZE + HUGEPAGE_FREELISTS_OFFSET).wrapping_add(nid as u64 * 16)
}

/// A huge page size (`struct hstate`), for 4 KiB base pages: 2 MiB (order 9) or 1 GiB
/// (order 18).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Hstate {
    order: u32,
}

impl Hstate {
    /// 2 MiB pages (`PMD_ORDER`, order 9).
    pub const H2M: Hstate = Hstate { order: 9 };
    /// 1 GiB pages (`PUD_ORDER`, order 18).
    pub const H1G: Hstate = Hstate { order: 18 };
    /// Every supported hstate, smallest first.
    pub const ALL: [Hstate; 2] = [Hstate::H2M, Hstate::H1G];

    /// The hstate of `bytes`-sized pages.
    ///
    /// # Errors
    ///
    /// [`HugetlbError::UnsupportedHstate`] unless `bytes` is 2 MiB or 1 GiB.
    pub const fn from_size(bytes: u64) -> Result<Hstate, HugetlbError> {
        match bytes {
            0x20_0000 => Ok(Hstate::H2M),
            0x4000_0000 => Ok(Hstate::H1G),
            _ => Err(HugetlbError::UnsupportedHstate { size: bytes }),
        }
    }

    /// The hstate of order `order` (`huge_page_order`).
    ///
    /// # Errors
    ///
    /// [`HugetlbError::UnsupportedHstate`] unless `order` is 9 or 18.
    pub const fn from_order(order: u32) -> Result<Hstate, HugetlbError> {
        match order {
            9 => Ok(Hstate::H2M),
            18 => Ok(Hstate::H1G),
            _ => Err(HugetlbError::UnsupportedHstate {
                size: if order < 52 { PAGE_SIZE << order } else { u64::MAX },
            }),
        }
    }

    /// `huge_page_order(h)`.
    #[must_use]
    pub const fn order(self) -> u32 {
        self.order
    }

    /// `pages_per_huge_page(h)`.
    #[must_use]
    pub const fn nr_pages(self) -> u64 {
        1 << self.order
    }

    /// `huge_page_size(h)` in bytes.
    #[must_use]
    pub const fn size(self) -> u64 {
        PAGE_SIZE << self.order
    }

    /// `hugepagesz=` spelling: `2M` or `1G`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        if self.order == 9 { "2M" } else { "1G" }
    }

    /// Parses [`Hstate::name`] (case-insensitive suffix).
    #[must_use]
    pub fn from_name(s: &str) -> Option<Hstate> {
        match s {
            "2M" | "2m" => Some(Hstate::H2M),
            "1G" | "1g" => Some(Hstate::H1G),
            _ => None,
        }
    }

    /// `hugetlb_vmemmap_size(h)` = `pages_per_huge_page(h) * sizeof(struct page)`: 32 KiB for
    /// 2 MiB pages and 16 MiB for 1 GiB pages with the 64-byte layout.
    #[must_use]
    pub const fn vmemmap_size<P: StructPage>(self) -> u64 {
        self.nr_pages() * P::SIZE as u64
    }

    /// Number of vmemmap pages (4 KiB) a huge page's struct pages span.
    #[must_use]
    pub const fn vmemmap_pages<P: StructPage>(self) -> u64 {
        self.vmemmap_size::<P>().div_ceil(PAGE_SIZE)
    }

    /// `hugetlb_vmemmap_optimizable_size(h)`: what HVO can free, `vmemmap_size - PAGE_SIZE`,
    /// or 0 when `sizeof(struct page)` is not a power of two ("struct page crosses page
    /// boundaries").
    #[must_use]
    pub const fn vmemmap_optimizable_size<P: StructPage>(self) -> u64 {
        if !P::SIZE.is_power_of_two() {
            return 0;
        }
        self.vmemmap_size::<P>().saturating_sub(HUGETLB_VMEMMAP_RESERVE_SIZE)
    }
}

impl fmt::Display for Hstate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// By hand: an `Hstate` is a struct of an order, and [`Hstate::from_name`] also takes the
/// lower-case suffix.
impl memmap_core::Named for Hstate {
    const ALL: &'static [Hstate] = &Hstate::ALL;

    fn name(self) -> &'static str {
        Hstate::name(self)
    }

    fn from_name(s: &str) -> Option<Hstate> {
        Hstate::from_name(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memmap_core::{Page64, Page72};

    #[test]
    fn sizes_and_vmemmap_arithmetic_match_the_kernel_table() {
        // 2 MiB -> 32 KiB of vmemmap (8 pages, 7 freed); 1 GiB -> 16 MiB
        // (4096 pages, 4095 freed).
        assert_eq!(Hstate::H2M.vmemmap_size::<Page64>(), 32 << 10);
        assert_eq!(Hstate::H2M.vmemmap_optimizable_size::<Page64>() / PAGE_SIZE, 7);
        assert_eq!(Hstate::H1G.vmemmap_size::<Page64>(), 16 << 20);
        assert_eq!(Hstate::H1G.vmemmap_optimizable_size::<Page64>() / PAGE_SIZE, 4095);
        assert_eq!(Hstate::H1G.vmemmap_optimizable_size::<Page72>(), 0);
        assert_eq!(hugetlb_vmemmap_reserve_pages::<Page64>(), 64);
        assert_eq!(hugetlb_vmemmap_reserve_pages::<Page72>(), 56);
    }

    #[test]
    fn only_2m_and_1g_are_hstates() {
        assert_eq!(Hstate::from_size(2 << 20), Ok(Hstate::H2M));
        assert_eq!(Hstate::from_size(1 << 30), Ok(Hstate::H1G));
        assert_eq!(Hstate::from_size(4 << 20), Err(HugetlbError::UnsupportedHstate { size: 4 << 20 }));
        assert_eq!(Hstate::from_size(0), Err(HugetlbError::UnsupportedHstate { size: 0 }));
        assert_eq!(Hstate::from_order(10), Err(HugetlbError::UnsupportedHstate { size: 4 << 20 }));
        assert_eq!(Hstate::from_name("1G"), Some(Hstate::H1G));
        assert_eq!(Hstate::from_name("3M"), None);
    }
}
