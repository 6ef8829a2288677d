//! The crate's error type.

use core::fmt;

use vm_memory::{GuestAddress, GuestMemoryError};

use crate::backing::BackingKind;

/// Why a range could not be written, populated or reset.
///
/// The range checks ([`Error::AddressOverflow`], [`Error::OutOfRange`], [`Error::EmptyPattern`],
/// [`Error::CannotDiscard`], and [`Error::Memory`] from the check) run before anything is
/// written: nothing was written when one of them is returned. [`Error::Os`] comes from the work
/// itself (a system call on the host mapping failed part of the way): what was done before it is
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
            _ => None,
        }
    }
}
