//! # stream-vm-memory: guest memory for VMMs over `vm-memory`
//!
//! Zero, fill, copy, populate (prefault) and reset guest RAM from safe code, for any
//! [`GuestMemory`] (a [`GuestMemoryMmap`](vm_memory::GuestMemoryMmap), an IOMMU view, your own
//! backend): ranges checked before anything is written, streaming stores drained before the
//! dirty bitmap is marked, parallel and NUMA-pinned where asked.
//!
//! ## What to call first
//!
//! | you want to | call |
//! |---|---|
//! | fault a new guest's memory in before it boots (what Cloud Hypervisor's and QEMU's `prefault` do) | [`populate`] / [`populate_all`] with [`PopulateOptions`] |
//! | make memory read as zero again: a VM reset or reboot, a pooled region handed to the next guest, scrubbing hugetlbfs memory | [`reset`] with [`ResetPolicy::Auto`] |
//! | zero or fill a large range on every core | [`zero_parallel`], [`fill_parallel`], [`fill_pattern_parallel`] |
//! | zero, fill or copy on the calling thread (a page, a firmware image) | [`zero`], [`fill`], [`fill_pattern`], [`write()`] |
//!
//! Do not zero fresh memory: anonymous memory already reads as zero, and writing it only
//! faults it in more slowly than [`populate`] does. Zeroing pays when memory is *reused*.
//!
//! The parallel functions take [`Workers`]: a [`Threads`] policy (the workspace's, from
//! `stream-par`: [`Threads::One`], [`Threads::Fixed`], [`Threads::Auto`]) and a
//! [`Placement`]. With [`Placement::Auto`], on a host with two or more NUMA nodes, each worker
//! is pinned to the CPUs of the node that holds its memory (learned from the kernel, see
//! [`numa`]); a VMM that knows where it bound its zones can say so with
//! [`Placement::Topology`].
//!
//! [`Threads::Auto`] measures the machine's bandwidth once per process, on the first call of
//! 8 MiB or more that asks for it: that call is slower by the search and the process's peak
//! resident memory grows by the search's 256 MiB buffer (freed afterwards). A VMM that cannot
//! pay that on its first reset passes [`Threads::Fixed`] (the count it wants), or resolves the
//! policy at start-up, before a guest runs: [`Threads::resolve`] measures then and returns the
//! [`Threads::Fixed`] count to pass from there on.
//!
//! ## Guarantees of every call
//!
//! * a range may span several regions, at any alignment;
//! * the whole range is checked first, and a typed [`Error`] is returned without writing
//!   anything if part of it is not guest memory (a hole, past the end, past 2^64), cannot be
//!   written ([`Error::Unwritable`]: mapped without `PROT_WRITE`, pages past the end of a
//!   mapped file) or (for [`reset`]) cannot be discarded as asked; a zero-length range is a
//!   no-op;
//! * no store takes a signal. Each region says what its stores need ([`Stores`], from
//!   `vm-memory`'s record of its `mmap`): private anonymous memory is written directly; where
//!   the kernel may refuse a page (hugetlbfs with an empty pool, a full tmpfs, a file system,
//!   a device mapping, memory of unknown backing) the pages are first faulted in with
//!   `MADV_POPULATE_WRITE`, all of them or, for shmem, those not resident, and the kernel's
//!   refusal comes back as [`Unwritable::Refused`] where a store would have killed the
//!   process (`vm-memory`'s own `write_slice` takes the signal). On a host without that
//!   advice such memory is refused up front ([`Unwritable::Unchecked`]). What no check made
//!   before a store can see: a file that someone truncates, or punches a hole in, while the
//!   call runs (seal a memfd with `F_SEAL_SHRINK` to rule that out), a page the kernel evicts
//!   between the check and the store and then cannot read back (an I/O error), and a mapping
//!   changed behind `vm-memory`'s back by `unsafe` code (`mprotect`, `munmap`,
//!   `MADV_GUARD_INSTALL`, `userfaultfd` in its `SIGBUS` mode);
//! * nothing forms a `&mut [u8]` (or any reference) over guest RAM: stores go through the raw
//!   pointers of `vm-memory`'s [`VolatileSlice`](vm_memory::VolatileSlice)s and regions;
//! * streaming stores are drained ([`stream_hal::drain`]) by the worker that made them before
//!   it marks the bytes dirty and before the call returns, so the bytes are visible to whatever
//!   the caller does next (resuming a vCPU, a migration thread reading the dirty bitmap);
//! * every written or discarded byte is marked dirty ([`Bitmap::mark_dirty`]), as `vm-memory`'s
//!   own writes are (a discarded page reads as zero: it changed). Populating changes no byte and
//!   marks nothing.
//!
//! What the store checks cost: on private anonymous memory only the region lookup; on shmem
//! a `mincore` per 16 MiB, and per call a `statx` of the region's file (its size, which can
//! change; its file system is asked once per mount) and a one-page `MADV_POPULATE_WRITE`.
//! Where every page is faulted in first the walk is per huge page on hugetlbfs (cheap), per
//! 4 KiB page elsewhere (a file on another file system, unknown backing: on resident memory
//! about as long as the zero itself; a region type that knows better says so in its
//! [`RegionBacking`]). Figures: `docs/performance/vmm-notes.md`.
//!
//! ## Concurrent guest access
//!
//! Like `vm-memory`'s own writes, these functions may run while vCPUs access the same memory;
//! a running guest can then see the new bytes in any order (streaming stores are weakly
//! ordered). Once the function has returned, every byte is written and ordered before the
//! calling thread's next store, so a guest that is told afterwards (an interrupt, a used-ring
//! update) sees all of it.
//!
//! ## Example
//!
//! ```
//! use vm_memory::bitmap::{AtomicBitmap, Bitmap};
//! use vm_memory::{Bytes, GuestAddress, GuestMemoryBackend, GuestMemoryMmap};
//!
//! // Two adjacent 64 KiB regions; the range below crosses from the first into the second.
//! let mem = GuestMemoryMmap::<AtomicBitmap>::from_ranges(&[
//!     (GuestAddress(0), 0x1_0000),
//!     (GuestAddress(0x1_0000), 0x1_0000),
//! ])?;
//! mem.write_slice(&[0xaa; 0x2_0000], GuestAddress(0))?;
//! mem.iter().for_each(|r| vm_memory::MmapRegion::bitmap(r).reset()); // a migration round starts clean
//!
//! stream_vm_memory::zero(&mem, GuestAddress(0xf000), 0x2000)?;
//!
//! let mut back = [0xffu8; 0x2000];
//! mem.read_slice(&mut back, GuestAddress(0xf000))?;
//! assert!(back.iter().all(|&b| b == 0));
//! assert!(mem.find_region(GuestAddress(0x1_0000)).unwrap().bitmap().dirty_at(0));
//!
//! // A hole or an address past the end is an error, and nothing is written.
//! let err = stream_vm_memory::zero(&mem, GuestAddress(0x1_f000), 0x2000).unwrap_err();
//! assert!(matches!(err, stream_vm_memory::Error::OutOfRange { .. }));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Crate features
//!
//! None of its own. It depends on `vm-memory` with `backend-mmap` and `backend-bitmap`
//! (for [`GuestMemoryMmap`](vm_memory::GuestMemoryMmap) and its dirty bitmap), on
//! `stream-par` (`std`: the [`Threads`] policy and the padata runner; name the policy as
//! `stream_par::Threads`) and on
//! `stream-hal` with its default features; a VMM that wants `stream-hal`'s switches sets them in
//! its build's `RUSTFLAGS` (`--cfg stream_hal_no_cpuid`, `--cfg stream_hal_force_generic`).
//!
//! ## no_std use
//!
//! None: `vm-memory` needs `std` (it maps guest memory with the host's `mmap`). A `no_std`
//! guest kernel uses `stream-hal` directly.
//!
//! ## MSRV
//!
//! Rust 1.85 (edition 2024), the workspace's `rust-version`, checked in CI with the versions
//! in the repository's `Cargo.lock`.
//!
//! ## Performance
//!
//! How fast populate and reset are against the VMMs' own algorithms and the machine's limits
//! is measured by `memmap-bench guest-memory`; the figures and the commands that produced
//! them are in the repository's `docs/performance/` (`vmm-notes.md`, `populate-baselines.md`).

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

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

pub use backing::{BASE_PAGE, BackingKind, HostBacking, RegionBacking, Stores};
pub use engine::{Cancel, ChunkReport, GroupReport, MIN_CHUNK, Placement, WorkReport, Workers};
pub use error::{Error, HostOp, Unwritable};
pub use fault::POPULATE_STEP;
pub use parallel::{fill_parallel, fill_pattern_parallel, zero_parallel};
pub use plan::CHUNK_ALIGN;
pub use populate::{
    HugePageAdvice, PopulateMethod, PopulateOptions, PopulateReport, THP_SIZE, advise_huge_pages, populate,
    populate_all,
};
pub use reset::{ResetPolicy, ResetReport, reset};
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
