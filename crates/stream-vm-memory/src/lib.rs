#![doc = include_str!("../README.md")]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

mod backing;
mod engine;
mod error;
mod fault;
pub mod numa;
mod parallel;
mod plan;
mod populate;
mod range;
mod reset;
mod residency;
mod serial;
mod sys;

pub use backing::{BackingKind, HostBacking, RegionBacking, Stores};
pub use engine::{Cancel, ChunkReport, GroupReport, Placement, WorkReport, Workers};
pub use error::{Error, HostOp, Unwritable};
pub use parallel::{fill_parallel, fill_pattern_parallel, zero_parallel};
pub use populate::{
    HugePageAdvice, PopulateMethod, PopulateOptions, PopulateReport, advise_huge_pages, populate,
    populate_all,
};
pub use reset::{ResetPolicy, ResetReport, reset, reset_all};
pub use residency::{ResetPath, reset_path};
pub use serial::{fill, fill_pattern, write, zero};

/// What the host does with the `madvise` advice this crate relies on, probed once per process on
/// pages of its own (an emulator such as qemu-user before 8.1 answers every `madvise` with
/// success and does nothing; a kernel before 5.14 has no `MADV_POPULATE_WRITE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostSupport {
    /// `MADV_POPULATE_WRITE` faults pages in ([`populate`] touches private anonymous pages
    /// itself otherwise).
    pub populate_write: bool,
    /// `MADV_DONTNEED` drops private anonymous pages ([`ResetPolicy::Discard`] of such memory
    /// fails with [`Error::Os`] otherwise, and [`ResetPolicy::Auto`] zeroes it in place).
    pub dontneed: bool,
    /// `MADV_REMOVE` drops shared anonymous pages (likewise for such memory).
    pub remove: bool,
}

/// The host's [`HostSupport`].
#[must_use]
pub fn host_support() -> HostSupport {
    use sys::{Advice, takes_effect};
    HostSupport {
        populate_write: takes_effect(Advice::PopulateWrite),
        dontneed: takes_effect(Advice::DontNeed),
        remove: takes_effect(Advice::Remove),
    }
}

#[cfg(doc)]
use stream_par::Threads;
#[cfg(doc)]
use vm_memory::{GuestMemory, bitmap::Bitmap};
