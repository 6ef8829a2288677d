//! # hugetlb-init: boot-time HugeTLB gigantic pages, HVO and its fallback
//!
//! A byte-faithful model of how Linux prepares the `struct page`s of boot-time gigantic pages
//! (`hugepagesz=1G hugepages=N`), built on [`memmap_core`]'s struct page model and kernel
//! operations and on [`stream_hal`]'s streaming stores:
//!
//! 1. **Allocation**: N pages of a [`Hstate`] per node, top-down from each node's range, each
//!    recorded as a `huge_bootmem_page` ([`HugeBootmemPage`]); every struct page but the head
//!    is `MEMBLOCK_RSRV_NOINIT` and keeps whatever the storage held.
//! 2. **Heads** (`memmap_init_reserved_heads`): `__init_single_page()`, `MIGRATE_MOVABLE` for
//!    the pageblock, `PG_reserved`, refcount 1.
//! 3. **Gather** (`gather_bootmem_prealloc`, one worker per node under `std`):
//!    `hugetlb_folio_init_vmemmap`, `init_new_hugetlb_folio`, then per hstate
//!    `prep_and_add_bootmem_folios`: HVO, the fallback `hugetlb_folio_init_tail_vmemmap` for
//!    the folios HVO did not cover, and `MIGRATE_MOVABLE` on every pageblock.
//!
//! [`boot()`] runs all three for the release in the configuration's
//! [`KernelConfig::version`](memmap_core::KernelConfig::version), with memmap-core's struct page
//! operations and encodings. An [`Hstate`] is a huge page size the configuration's architecture
//! registers ([`Hstates::of`]); another size is [`HugetlbError::UnsupportedHstate`]. The
//! fallback tail init runs the strategy
//! [`FillOptions::resolve`](memmap_core::FillOptions::resolve) chooses.
//!
//! [`ModelRemap`] (no_std) models HVO's remapping; on Linux with `std`, [`OwnedBoot`] does it
//! for real on a memfd-backed vmemmap. Where HVO is unavailable ([`HvoUnavailable`]) or fails
//! ([`HvoFault`]), the fallback runs and the bytes are those of a boot without HVO. Design
//! notes are in `docs/hugetlb-init.md` in the repository.
//!
//! ## Crate features
//!
//! * `std` (default, enables memmap-core's `std`): the gather runs one thread per node, and on
//!   Linux the real memfd-backed HVO ([`OwnedBoot`]) is available. Without it the crate is
//!   `no_std` without `alloc`: the nodes are gathered one after the other on the caller's
//!   thread, with the [`ModelRemap`] (or the caller's own [`VmemmapRemap`]) for HVO.
//!
//! ## MSRV
//!
//! Rust 1.85 (edition 2024), the workspace's `rust-version`; CI checks it with the
//! repository's `Cargo.lock`. Raising it is a minor-version change.
//!
//! ## no_std use
//!
//! Turn the default features off (they pull in `std` here and in memmap-core):
//!
//! ```toml
//! [dependencies]
//! hugetlb-init = { version = "0.1", default-features = false }
//! memmap-core = { version = "0.1", default-features = false }
//! ```
//!
//! With the defaults on a `-none` target the build fails with `can't find crate for std`.
//! CI builds both crates this way for `x86_64-unknown-none` and `aarch64-unknown-none`.
//!
//! ## Example
//!
//! ```
//! use hugetlb_init::{
//!     BootParams, BootRequest, Hstate, HugeBootmemPage, HvoMode, ModelRemap, HugetlbNode, NodeSpec, boot,
//! };
//! use memmap_core::{KernelConfig, Memmap, NoHooks, Page64, Strategy, StructPage, pageblocks_needed};
//!
//! let cfg = KernelConfig::X86_64;
//! let h2m = Hstate::new(&cfg, 2 << 20)?; // hstates come from the configuration
//! let spec = NodeSpec::packed(0, h2m, 2); // two 2 MiB pages on node 0
//! let mut pages = vec![Page64::ZEROED; spec.nr_pages as usize];
//! let mut pb = vec![0u8; pageblocks_needed(&cfg, spec.start_pfn, spec.nr_pages)];
//! let memmap = Memmap::new(cfg, spec.start_pfn, &mut pages, &mut pb)?;
//! let mut nodes = [HugetlbNode::new(spec, memmap, ModelRemap::default(), NoHooks)];
//! let mut records = [HugeBootmemPage::EMPTY; 2];
//! let params = BootParams::new(Strategy::Streaming, HvoMode::Off.params());
//! let report = boot(&mut nodes, &BootRequest::per_node(h2m, 2), &params, &mut records)?;
//! assert_eq!((report.folios, report.optimized), (2, 0));
//! let head = nodes[0].read(records[0].head_pfn);
//! assert_eq!(head.refcount(), 0);
//! assert_eq!(head.page_type(), 0xf400_0000); // PGTY_hugetlb << 24
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
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
