#![doc = include_str!("../README.md")]
#![no_std]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

#[cfg(any(test, feature = "std"))]
extern crate std;

use core::fmt;

/// The phases `hugetlb-init` announces through [`InitHooks::phase`](memmap_core::InitHooks::phase),
/// for a caller that times them.
pub mod phase {
    /// One node's gather (`gather_bootmem_prealloc_node`: head and reserve init, HVO, the
    /// fallback tails, migrate types).
    pub const GATHER_NODE: &str = "hugetlb_gather_node";
    /// The fallback tail init (the tails HVO did not cover,
    /// `hugetlb_folio_init_tail_vmemmap(folio, RESERVE, nr)`), the time the upstream series
    /// is about; announced once around a node's whole list.
    pub const FALLBACK_TAILS: &str = "hugetlb_fallback_tails";
}

mod boot;
mod bootmem;
mod folio;
mod gather;
mod hstate;
mod hvo;
#[cfg(all(feature = "std", target_os = "linux"))]
mod memfd;
mod node;
#[cfg(all(feature = "std", target_os = "linux"))]
mod owned;

pub use boot::{BootParams, BootReport, HugetlbNode, NodeReport, boot, boot_placed};
pub use bootmem::{BootRequest, FolioOutcome, HugeBootmemPage, NodeSpec, PagesPerNode};
pub use folio::TailInit;
pub use hstate::{Hstate, Hstates, HugePageLevel, hugepage_freelist_addr};
pub use hvo::{
    HvoError, HvoFault, HvoMode, HvoOutcome, HvoParams, HvoUnavailable, ModelRemap, RemapAlloc, RemapDone,
    SharedTailInit, TailPageOrigin, TailTarget, VmemmapRemap, hvo_availability,
};
#[cfg(all(feature = "std", target_os = "linux"))]
pub use owned::{BootError, OwnedBoot};

/// Bad input to the boot. Nothing is written when one is returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum HugetlbError {
    /// The request asks for no page on any node.
    ZeroPages,
    /// Not a huge page size of the configuration's architecture and page size
    /// (`arch_hugetlb_valid_size()` refuses it).
    UnsupportedHstate {
        /// Size asked for, in bytes.
        size: u64,
        /// The sizes the configuration has.
        supported: Hstates,
    },
    /// An hstate of another configuration (another page size or architecture) than the
    /// node's memmap.
    HstateNotOfConfig {
        /// The hstate.
        hstate: Hstate,
        /// The node.
        nid: u32,
        /// The sizes the node's configuration has.
        supported: Hstates,
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
    /// Two folios given to [`boot_placed`] overlap.
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
            HugetlbError::UnsupportedHstate { size, supported } => {
                write!(f, "unsupported huge page size {size:#x} (the configuration has {supported})")
            }
            HugetlbError::HstateNotOfConfig { hstate, nid, supported } => write!(
                f,
                "node {nid}: the {hstate} hstate of {} KiB pages is not one of its configuration's ({supported})",
                1u64 << hstate.page_shift().saturating_sub(10)
            ),
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

/// `Send` under `std` (the nodes are gathered on parallel threads), nothing without it.
#[cfg(feature = "std")]
pub trait MaybeSend: Send {}
#[cfg(feature = "std")]
impl<T: Send> MaybeSend for T {}
/// `Send` under `std` (the nodes are gathered on parallel threads), nothing without it.
#[cfg(not(feature = "std"))]
pub trait MaybeSend {}
#[cfg(not(feature = "std"))]
impl<T> MaybeSend for T {}

#[cfg(test)]
extern crate self as hugetlb_init;

#[cfg(all(test, not(miri)))]
mod tests;
