//! The crate's error type.

use core::fmt;

use vm_memory::{GuestAddress, GuestMemoryError};

use crate::backing::BackingKind;

/// Why a range could not be written, populated or reset.
///
/// The range checks ([`Error::AddressOverflow`], [`Error::OutOfRange`], [`Error::EmptyPattern`],
/// [`Error::CannotDiscard`], [`Error::Unwritable`] other than [`Unwritable::Refused`], and
/// [`Error::Memory`] from the check) run before anything is written: nothing was written when
/// one of them is returned. [`Error::Os`] and [`Unwritable::Refused`] come from the work itself
/// (a system call on the host mapping failed part of the way): what was done before it is
/// drained and marked dirty. [`Error::Memory`] raised by a [`GuestMemory`](vm_memory::GuestMemory)
/// whose translation changed during the call (an IOMMU) can also come part of the way.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// `addr + len` is past the end of the 64-bit guest physical address space.
    AddressOverflow {
        /// Start of the range.
        addr: GuestAddress,
        /// Length of the range in bytes.
        len: usize,
    },
    /// Part of the range is not guest memory: it starts outside every region, or runs into a
    /// hole between regions or past the last one.
    OutOfRange {
        /// Start of the range.
        addr: GuestAddress,
        /// Length of the range in bytes.
        len: usize,
        /// The first address of the range that no region covers.
        first_invalid: GuestAddress,
    },
    /// [`fill_pattern`](crate::fill_pattern) was given an empty pattern for a non-empty range.
    EmptyPattern,
    /// [`ResetPolicy::Discard`](crate::ResetPolicy::Discard) was asked for memory whose
    /// discarded pages would not read as zero (a private file mapping reads the file again) or
    /// whose backing is not known.
    CannotDiscard {
        /// Start of the part of the range that cannot be discarded.
        addr: GuestAddress,
        /// Its length in bytes.
        len: u64,
        /// How that memory is backed.
        backing: BackingKind,
    },
    /// Part of the range cannot be written without a signal (`SIGSEGV`, `SIGBUS`) killing the
    /// process, so it is not written (see [`Stores`](crate::Stores) for how this is found).
    Unwritable {
        /// Guest address of the first byte that cannot be written (for
        /// [`Unwritable::Refused`], of the first byte of the refused call).
        addr: GuestAddress,
        /// Bytes from there on of the range (of the region, or of the refused call) that cannot
        /// be written.
        len: u64,
        /// Why the bytes cannot be written: a protection without write, past the end of the
        /// backing file, refused by the kernel, or not checked.
        why: Unwritable,
    },
    /// A system call on the host mapping failed.
    Os {
        /// What was asked of the kernel.
        op: HostOp,
        /// Guest address of the first byte of the failed call.
        addr: GuestAddress,
        /// Bytes the call covered.
        len: u64,
        /// The error the kernel returned.
        source: std::io::Error,
    },
    /// Any other error of the [`GuestMemory`](vm_memory::GuestMemory) (an IOMMU translation
    /// failure or a missing write permission, say), passed on.
    Memory(GuestMemoryError),
}

/// Why a guest range cannot be written, in [`Error::Unwritable`].
#[derive(Debug)]
#[non_exhaustive]
pub enum Unwritable {
    /// The region is mapped without `PROT_WRITE` (read-only, or `PROT_NONE`), as
    /// `vm-memory`'s record of its `mmap` says ([`Stores::Refused`](crate::Stores::Refused)).
    Protection {
        /// The mapping's protection (`PROT_*` bits).
        prot: i32,
    },
    /// The range reaches pages of a file mapping past the end of the file, where a store
    /// raises `SIGBUS` (the file is shorter than the region: made so, or truncated since).
    PastEndOfFile {
        /// The file's length in bytes.
        file_len: u64,
        /// The file offset of the region's first byte.
        file_offset: u64,
    },
    /// The kernel refused to fault the pages in for writing (`madvise(MADV_POPULATE_WRITE)`,
    /// asked before the stores where a store could raise a signal), with this error:
    /// `EINVAL` the mapping does not allow writes (read-only, or a `VM_PFNMAP`/`VM_IO`
    /// device mapping), `EFAULT` a store would raise `SIGBUS` or `SIGSEGV` (a hugetlbfs pool
    /// without free pages, a page past the end of a file, a full file system), `ENOMEM`
    /// memory not mapped or out of memory, `EHWPOISON` a poisoned page.
    Refused(std::io::Error),
    /// A store could raise a signal here (memory of this kind, see
    /// [`Stores::FaultInAll`](crate::Stores::FaultInAll)) and this host cannot fault pages in
    /// without storing: it has no `MADV_POPULATE_WRITE` ([`HostSupport::populate_write`](crate::HostSupport::populate_write):
    /// a kernel before 5.14, an emulator that ignores `madvise`).
    Unchecked {
        /// How the memory is backed.
        backing: BackingKind,
    },
}

impl fmt::Display for Unwritable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unwritable::Protection { prot } => {
                write!(
                    f,
                    "the region is mapped without PROT_WRITE (prot {prot:#x}); a writable mapping is needed"
                )
            }
            Unwritable::PastEndOfFile { file_len, file_offset } => write!(
                f,
                "its pages lie past the end of the mapped file (the file has {file_len:#x} bytes, the region maps \
                 it from offset {file_offset:#x}); a store there raises SIGBUS: extend the file first"
            ),
            Unwritable::Refused(e) => write!(
                f,
                "the kernel refused to fault its pages in for writing (madvise(MADV_POPULATE_WRITE): {e}){}",
                refusal_meaning(e)
            ),
            Unwritable::Unchecked { backing } => write!(
                f,
                "a store into {} could raise a signal, and this host has no MADV_POPULATE_WRITE to fault the \
                 pages in safely first (a kernel before 5.14, or an emulator that ignores madvise)",
                backing.describe()
            ),
        }
    }
}

/// What the kernel's answer to `MADV_POPULATE_WRITE` means for a store, for messages.
fn refusal_meaning(e: &std::io::Error) -> &'static str {
    #[cfg(target_os = "linux")]
    match e.raw_os_error() {
        Some(libc::EINVAL) => return ": the mapping does not allow writes (read-only, or a device mapping)",
        Some(libc::EFAULT) => {
            return ": a store would raise SIGBUS (a hugetlbfs pool without free pages, a page past the end of \
                    a file, a full file system)";
        }
        Some(libc::ENOMEM) => return ": the memory is not mapped, or out of memory",
        Some(libc::EHWPOISON) => return ": a hardware-poisoned page",
        _ => {}
    }
    let _ = e;
    ""
}

/// The host operations this crate asks the kernel for, named in [`Error::Os`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HostOp {
    /// `madvise(MADV_POPULATE_WRITE)`.
    PopulateWrite,
    /// `madvise(MADV_HUGEPAGE)`.
    HugePageAdvice,
    /// `madvise(MADV_DONTNEED)`.
    DontNeed,
    /// `madvise(MADV_REMOVE)`.
    Remove,
    /// `fallocate(FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE)`.
    PunchHole,
}

impl HostOp {
    /// The call as the kernel names it.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            HostOp::PopulateWrite => "madvise(MADV_POPULATE_WRITE)",
            HostOp::HugePageAdvice => "madvise(MADV_HUGEPAGE)",
            HostOp::DontNeed => "madvise(MADV_DONTNEED)",
            HostOp::Remove => "madvise(MADV_REMOVE)",
            HostOp::PunchHole => "fallocate(PUNCH_HOLE)",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::AddressOverflow { addr, len } => {
                write!(f, "guest range {:#x} + {len:#x} bytes is past the end of the address space", addr.0)
            }
            Error::OutOfRange { addr, len, first_invalid } => write!(
                f,
                "guest range {:#x} + {len:#x} bytes is not guest memory from {:#x} on",
                addr.0, first_invalid.0
            ),
            Error::EmptyPattern => f.write_str("fill pattern is empty"),
            Error::CannotDiscard { addr, len, backing } => write!(
                f,
                "guest range {:#x} + {len:#x} bytes cannot be discarded to zeros ({})",
                addr.0,
                backing.describe()
            ),
            Error::Unwritable { addr, len, why } => {
                write!(f, "guest range {:#x} + {len:#x} bytes cannot be written: {why}", addr.0)
            }
            Error::Os { op, addr, len, source } => {
                write!(f, "{} on guest range {:#x} + {len:#x} bytes failed: {source}", op.name(), addr.0)
            }
            Error::Memory(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Memory(e) => Some(e),
            Error::Os { source, .. } => Some(source),
            Error::Unwritable { why: Unwritable::Refused(e), .. } => Some(e),
            _ => None,
        }
    }
}
