//! # stream-vm-memory: streaming zero, fill and copy into `vm-memory` guest memory
//!
//! A VMM that zeroes or fills guest RAM (balloon deflation, a fresh memory slot, a reset, a
//! firmware image) wants streaming stores: the host will not read those bytes, so they should
//! not evict its working set. Doing it by hand over [`vm_memory`] means the unsafe
//! `stream_hal::clear`, tail handling, a drain and a manual `mark_dirty` for every region the
//! range touches; without the last one a live migration misses the pages. `vm-memory` itself
//! has no bulk zero or fill (its [`Bytes::write_slice`](vm_memory::Bytes::write_slice) needs a
//! source buffer as long as the range).
//!
//! This crate does it safely, for any [`GuestMemory`] (a [`GuestMemoryMmap`](vm_memory::GuestMemoryMmap),
//! an IOMMU view, your own backend):
//!
//! | function | writes | method |
//! |---|---|---|
//! | [`zero`] | zeros | [`stream_hal::clear`]: `rep stosb` below 1 MiB per region piece, streaming (`clzero`, `movntdq`, `movnti`, `dc zva`, `stnp`) from there up |
//! | [`fill`] | one byte value | [`zero`] for 0, else streaming copies of a 64 KiB staging buffer |
//! | [`fill_pattern`] | a byte pattern repeated from `addr` on | streaming copies of a staging buffer of whole repetitions |
//! | [`write()`] | a host buffer | [`stream_hal::memcpy_nontemporal`] |
//!
//! Each of them:
//!
//! * takes a [`GuestAddress`] and a length that may span several regions, at any alignment;
//! * checks the whole range first and returns a typed [`Error`] without writing anything if
//!   part of it is not guest memory (a hole, past the end, past 2^64);
//! * never forms a `&mut [u8]` (or any reference) over guest RAM: the stores go through the raw
//!   pointers of `vm-memory`'s [`VolatileSlice`](vm_memory::VolatileSlice)s;
//! * drains ([`stream_hal::drain`]) each region's stores before marking it dirty and before
//!   returning, so the bytes are visible to anything the caller does next (resuming a vCPU,
//!   injecting an interrupt, a migration thread reading the dirty bitmap);
//! * marks every written byte dirty in the region's bitmap ([`Bitmap::mark_dirty`]), as
//!   `vm-memory`'s own writes do.
//!
//! The methods of [`GuestMemoryStreamExt`] are the same functions in method form.
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
//! (for [`GuestMemoryMmap`](vm_memory::GuestMemoryMmap) and its dirty bitmap) and on
//! `stream-hal` with its default features; a VMM that wants `stream-hal`'s `no-cpuid` or
//! `force-generic` enables them on its own `stream-hal` dependency (Cargo unifies the features).
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
//! ## Measured
//!
//! The crate's README has the comparison with `write_slice` of zeros on 4 GiB of guest memory
//! (`cargo bench -p stream-vm-memory --bench zero`).

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
use core::fmt;

use vm_memory::bitmap::Bitmap;
use vm_memory::{GuestAddress, GuestMemory, GuestMemoryError, Permissions};

/// Size of the staging buffer that [`fill`] and [`fill_pattern`] stream from: large enough
/// that the per-copy overhead vanishes, small enough to stay in L2 while it is read over and
/// over.
const STAGING_BYTES: usize = 64 << 10;

/// Why a range could not be written. Nothing was written when one is returned, except for
/// [`Error::Memory`] raised by a [`GuestMemory`] whose translation changed during the call
/// (see its documentation).
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
    /// [`fill_pattern`] was given an empty pattern for a non-empty range.
    EmptyPattern,
    /// Any other error of the [`GuestMemory`] (an IOMMU translation failure or a missing write
    /// permission, say), passed on. With a plain [`GuestMemoryBackend`](vm_memory::GuestMemoryBackend)
    /// (which is immutable) it can only come from the check before any write; an IOMMU whose
    /// mappings change while the call runs can make it come after some regions were written
    /// (those are drained and marked dirty).
    Memory(GuestMemoryError),
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
            Error::Memory(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Memory(e) => Some(e),
            _ => None,
        }
    }
}

/// What to store into each piece of the range.
enum Source<'s> {
    /// Zeros.
    Zero,
    /// `staging` holds whole repetitions of a `period`-byte pattern, one more than `body`
    /// bytes' worth, so that a copy of up to `body` bytes can start at any phase.
    Pattern { staging: &'s [u8], period: usize, body: usize },
    /// The caller's buffer, as long as the range.
    Buffer(&'s [u8]),
}

/// Checks that `addr..addr + len` is guest memory, writable as far as `mem` can tell.
fn check<M: GuestMemory + ?Sized>(mem: &M, addr: GuestAddress, len: usize) -> Result<(), Error> {
    // The range may end exactly at 2^64 (its last byte at u64::MAX), not beyond.
    if u128::from(addr.0) + len as u128 > 1u128 << 64 {
        return Err(Error::AddressOverflow { addr, len });
    }
    let mut covered = 0usize;
    for slice in mem.get_slices(addr, len, Permissions::Write).map_err(|e| classify(e, addr, len, covered))? {
        match slice {
            Ok(s) => covered += s.len(),
            Err(e) => return Err(classify(e, addr, len, covered)),
        }
    }
    Ok(())
}

/// Turns a `vm-memory` error for the range into this crate's error; `covered` bytes from
/// `addr` on were found to be guest memory before it.
fn classify(e: GuestMemoryError, addr: GuestAddress, len: usize, covered: usize) -> Error {
    match e {
        GuestMemoryError::InvalidGuestAddress(first_invalid) => {
            Error::OutOfRange { addr, len, first_invalid }
        }
        // The range was checked not to pass 2^64, so this can only mean it ends exactly there
        // with more requested than the regions hold; report the first byte past the last one.
        GuestMemoryError::GuestAddressOverflow => {
            Error::OutOfRange { addr, len, first_invalid: GuestAddress(addr.0.wrapping_add(covered as u64)) }
        }
        e => Error::Memory(e),
    }
}

/// Writes `src` into `addr..addr + len` region piece by region piece: streams, drains, marks
/// dirty.
fn write_range<M: GuestMemory + ?Sized>(
    mem: &M,
    addr: GuestAddress,
    len: usize,
    src: Source<'_>,
) -> Result<(), Error> {
    if len == 0 {
        return Ok(());
    }
    check(mem, addr, len)?;
    let mut done = 0usize;
    for slice in mem.get_slices(addr, len, Permissions::Write).map_err(|e| classify(e, addr, len, done))? {
        let slice = slice.map_err(|e| classify(e, addr, len, done))?;
        let n = slice.len();
        // Keeps the mapping alive (and, for backends that map on demand, mapped for writing)
        // while the raw pointer is in use.
        let guard = slice.ptr_guard_mut();
        let dst = guard.as_ptr();
        debug_assert_eq!(guard.len(), n);
        match src {
            Source::Zero => {
                // SAFETY: `dst` comes from a `VolatileSlice` of `n` bytes, whose construction
                // contract (upheld by the `GuestMemory` implementation) is that the memory is
                // valid for reads and writes of `n` bytes for the slice's lifetime, which
                // `slice` and `guard` extend past this call. No Rust reference covers guest
                // RAM (vm-memory hands out only raw pointers and volatile accessors), so no
                // Rust code can read or write these bytes between the stores and the `drain`
                // below except through such raw accesses, which vm-memory treats as accesses
                // from outside the abstract machine (the guest's), as it does for its own
                // writes.
                unsafe { stream_hal::clear(dst, n) };
            }
            Source::Pattern { staging, period, body } => {
                let mut off = 0;
                while off < n {
                    let phase = (done + off) % period;
                    let piece = body.min(n - off);
                    // `staging` holds `body + period` bytes, so `phase + piece` is in bounds.
                    let from = &staging[phase..phase + piece];
                    // SAFETY: `dst + off .. dst + off + piece` lies in the slice's `n` writable
                    // bytes (see the `Zero` case for why writing them is sound); `from` is an
                    // initialized host buffer this function allocated, so it cannot overlap
                    // guest RAM; drained below before the bytes are handed back.
                    unsafe { stream_hal::memcpy_nontemporal(dst.add(off), from.as_ptr(), piece) };
                    off += piece;
                }
            }
            Source::Buffer(buf) => {
                let from = &buf[done..done + n];
                // SAFETY: `dst` is writable for `n` bytes (see the `Zero` case); `from` is
                // `n` initialized bytes of the caller's `&[u8]`. They do not overlap: guest RAM
                // is written here, and a shared reference's bytes may not be written while it
                // lives, so a `&[u8]` over this guest RAM could not exist soundly (vm-memory's
                // safe API does not create one). Drained below.
                unsafe { stream_hal::memcpy_nontemporal(dst, from.as_ptr(), n) };
            }
        }
        // Every streaming store above is ordered before the dirty bits are set (a migration
        // thread that sees a bit and copies the page reads the new bytes) and before return.
        stream_hal::drain();
        // (`guard` lives to the end of this iteration: the mapping stays until after the drain.)
        slice.bitmap().mark_dirty(0, n);
        done += n;
    }
    debug_assert_eq!(done, len);
    Ok(())
}

/// Zeroes `len` guest bytes from `addr` on, across as many regions as the range spans; drains,
/// then marks them dirty.
///
/// # Errors
///
/// [`Error::OutOfRange`] or [`Error::AddressOverflow`] if part of the range is not guest
/// memory, [`Error::Memory`] for other errors of `mem`; nothing is written then.
pub fn zero<M: GuestMemory + ?Sized>(mem: &M, addr: GuestAddress, len: usize) -> Result<(), Error> {
    write_range(mem, addr, len, Source::Zero)
}

/// Sets `len` guest bytes from `addr` on to `value`; drains, then marks them dirty. A zero
/// `value` is [`zero`].
///
/// # Errors
///
/// As for [`zero`].
pub fn fill<M: GuestMemory + ?Sized>(
    mem: &M,
    addr: GuestAddress,
    len: usize,
    value: u8,
) -> Result<(), Error> {
    if value == 0 {
        return zero(mem, addr, len);
    }
    fill_pattern(mem, addr, len, &[value])
}

/// Writes `pattern` over and over into `len` guest bytes from `addr` on (byte `addr + i` gets
/// `pattern[i % pattern.len()]`, whatever regions the range crosses); drains, then marks them
/// dirty. The last repetition is cut short where the range ends.
///
/// # Errors
///
/// [`Error::EmptyPattern`] for an empty `pattern` and `len > 0`; otherwise as for [`zero`].
pub fn fill_pattern<M: GuestMemory + ?Sized>(
    mem: &M,
    addr: GuestAddress,
    len: usize,
    pattern: &[u8],
) -> Result<(), Error> {
    if len == 0 {
        return Ok(());
    }
    if pattern.is_empty() {
        return Err(Error::EmptyPattern);
    }
    check(mem, addr, len)?;
    let period = pattern.len();
    // Whole repetitions filling at least the staging size (or the range, if shorter), plus one
    // so that a piece can start at any phase.
    let reps = STAGING_BYTES.min(len).div_ceil(period);
    let body = reps * period;
    let staging: Vec<u8> = pattern.iter().copied().cycle().take(body + period).collect();
    write_range(mem, addr, len, Source::Pattern { staging: &staging, period, body })
}

/// Copies `src` into guest memory at `addr` with streaming stores, across as many regions as
/// it spans; drains, then marks the bytes dirty. The streaming counterpart of
/// [`Bytes::write_slice`](vm_memory::Bytes::write_slice), for data the host will not read back
/// soon (a kernel or firmware image, a restored snapshot).
///
/// # Errors
///
/// As for [`zero`], for the range `addr..addr + src.len()`.
pub fn write<M: GuestMemory + ?Sized>(mem: &M, addr: GuestAddress, src: &[u8]) -> Result<(), Error> {
    write_range(mem, addr, src.len(), Source::Buffer(src))
}

/// The functions of this crate as methods of every [`GuestMemory`].
pub trait GuestMemoryStreamExt: GuestMemory {
    /// [`zero`].
    ///
    /// # Errors
    ///
    /// As for [`zero`].
    fn stream_zero(&self, addr: GuestAddress, len: usize) -> Result<(), Error> {
        zero(self, addr, len)
    }

    /// [`fill`].
    ///
    /// # Errors
    ///
    /// As for [`fill`].
    fn stream_fill(&self, addr: GuestAddress, len: usize, value: u8) -> Result<(), Error> {
        fill(self, addr, len, value)
    }

    /// [`fill_pattern`].
    ///
    /// # Errors
    ///
    /// As for [`fill_pattern`].
    fn stream_fill_pattern(&self, addr: GuestAddress, len: usize, pattern: &[u8]) -> Result<(), Error> {
        fill_pattern(self, addr, len, pattern)
    }

    /// [`write()`].
    ///
    /// # Errors
    ///
    /// As for [`write()`].
    fn stream_write(&self, addr: GuestAddress, src: &[u8]) -> Result<(), Error> {
        write(self, addr, src)
    }
}

impl<M: GuestMemory + ?Sized> GuestMemoryStreamExt for M {}
