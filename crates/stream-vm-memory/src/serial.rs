//! The one-thread functions: zero, fill, pattern fill and streaming copy on the calling
//! thread, region piece by region piece.

use vm_memory::bitmap::Bitmap;
use vm_memory::{GuestAddress, GuestMemory, GuestMemoryBackend, Permissions};

use crate::backing::RegionBacking;
use crate::error::Error;
use crate::fault::{check_refusals, prepare};
use crate::range::{check, classify, slice_backing};

/// Size of the staging buffer that [`fill`] and [`fill_pattern`] stream from: large enough
/// that the per-copy overhead vanishes, small enough to stay in L2 while it is read over and
/// over.
pub(crate) const STAGING_BYTES: usize = 64 << 10;

/// What to store into each piece of the range.
pub(crate) enum Source<'s> {
    /// Zeros.
    Zero,
    /// A pattern repeated over the range (not empty), staged once the range is checked.
    Pattern(&'s [u8]),
    /// The caller's buffer, as long as the range.
    Buffer(&'s [u8]),
}

/// Writes `src` into `addr..addr + len`: checks the whole range first, then per region piece
/// [`prepare`]s, streams, drains, marks dirty.
fn write_range<M>(mem: &M, addr: GuestAddress, len: usize, src: Source<'_>) -> Result<(), Error>
where
    M: GuestMemory + ?Sized,
    <M::PhysicalMemory as GuestMemoryBackend>::R: RegionBacking,
{
    if len == 0 {
        return Ok(());
    }
    let first = check(mem, addr, len)?;
    // The pattern's staging buffer (see [`staging`]), once the range is known to be good.
    let staged = match src {
        Source::Pattern(pattern) => staging(pattern, len),
        _ => (Vec::new(), 1, 0),
    };
    let mut done = 0usize;
    for slice in mem.get_slices(addr, len, Permissions::Write).map_err(|e| classify(e, addr, len, done))? {
        let slice = slice.map_err(|e| classify(e, addr, len, done))?;
        let n = slice.len();
        // Keeps the mapping alive (and, for backends that map on demand, mapped for writing)
        // while the raw pointer is in use.
        let guard = slice.ptr_guard_mut();
        let dst = guard.as_ptr();
        debug_assert_eq!(guard.len(), n);
        let guest = GuestAddress(addr.0.wrapping_add(done as u64));
        // The first slice's backing as `check` found it (the same mapping), the others anew
        // (checked anew: the slices of a translation that changed since `check` may differ).
        let backing = match first {
            Some((host, sb)) if done == 0 && host == dst as usize => sb.backing,
            _ => {
                let sb = slice_backing(mem, guest, dst as usize, n);
                check_refusals(&sb.backing, guest, sb.region_off, n)?;
                sb.backing
            }
        };
        prepare(&backing, guest, dst as usize, n)?;
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
            Source::Pattern(_) => {
                let (staging, period, body) = (&staged.0[..], staged.1, staged.2);
                // SAFETY: `dst` is writable for `n` bytes and no reference covers it (see the
                // `Zero` case); `staging` is a buffer this crate allocated. Drained below.
                unsafe { stream_pattern(dst, n, done as u64, staging, period, body) };
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
/// Before anything is written: [`Error::OutOfRange`] or [`Error::AddressOverflow`] if part of
/// the range is not guest memory, [`Error::Unwritable`] if part of it is mapped without
/// `PROT_WRITE` ([`Unwritable::Protection`](crate::Unwritable::Protection)), lies past the end
/// of a mapped file ([`Unwritable::PastEndOfFile`](crate::Unwritable::PastEndOfFile)) or needs
/// a check this host cannot make ([`Unwritable::Unchecked`](crate::Unwritable::Unchecked)),
/// [`Error::Memory`] for other errors of `mem`. During the work, after the regions before it
/// were written: [`Error::Unwritable`] with [`Unwritable::Refused`](crate::Unwritable::Refused)
/// where the kernel refuses to fault pages in for writing (an empty hugetlbfs pool, a full
/// file system, a device mapping of unknown backing), instead of the signal a store would take.
pub fn zero<M>(mem: &M, addr: GuestAddress, len: usize) -> Result<(), Error>
where
    M: GuestMemory + ?Sized,
    <M::PhysicalMemory as GuestMemoryBackend>::R: RegionBacking,
{
    write_range(mem, addr, len, Source::Zero)
}

/// Sets `len` guest bytes from `addr` on to `value`; drains, then marks them dirty. A zero
/// `value` is [`zero`].
///
/// # Errors
///
/// As for [`zero`].
pub fn fill<M>(mem: &M, addr: GuestAddress, len: usize, value: u8) -> Result<(), Error>
where
    M: GuestMemory + ?Sized,
    <M::PhysicalMemory as GuestMemoryBackend>::R: RegionBacking,
{
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
pub fn fill_pattern<M>(mem: &M, addr: GuestAddress, len: usize, pattern: &[u8]) -> Result<(), Error>
where
    M: GuestMemory + ?Sized,
    <M::PhysicalMemory as GuestMemoryBackend>::R: RegionBacking,
{
    if len == 0 {
        return Ok(());
    }
    if pattern.is_empty() {
        return Err(Error::EmptyPattern);
    }
    write_range(mem, addr, len, Source::Pattern(pattern))
}

/// The staging buffer for `pattern` over `len` bytes: whole repetitions filling at least the
/// staging size (or the range, if shorter), plus one so that a copy can start at any phase;
/// with the period and the copy size (`body`).
pub(crate) fn staging(pattern: &[u8], len: usize) -> (Vec<u8>, usize, usize) {
    let period = pattern.len();
    let reps = STAGING_BYTES.min(len).div_ceil(period);
    let body = reps * period;
    (pattern.iter().copied().cycle().take(body + period).collect(), period, body)
}

/// Streams the pattern of `staging` (see [`staging`]) into `[dst, dst + n)`, the first byte
/// being byte `phase0` of the repeating pattern (mod `period`). Not drained.
///
/// # Safety
///
/// `[dst, dst + n)` is valid for writes, and no Rust reference covers it (guest RAM reached
/// through a `VolatileSlice`'s pointer); `staging` does not overlap it.
pub(crate) unsafe fn stream_pattern(
    dst: *mut u8,
    n: usize,
    phase0: u64,
    staging: &[u8],
    period: usize,
    body: usize,
) {
    let mut off = 0;
    while off < n {
        let phase = ((phase0 + off as u64) % period as u64) as usize;
        let piece = body.min(n - off);
        // `staging` holds `body + period` bytes, so `phase + piece` is in bounds.
        let from = &staging[phase..phase + piece];
        // SAFETY: `dst + off .. dst + off + piece` lies in the `n` writable bytes (the
        // caller's contract); `from` is initialized host memory that does not overlap them.
        unsafe { stream_hal::memcpy_nontemporal(dst.add(off), from.as_ptr(), piece) };
        off += piece;
    }
}

/// [`Bytes::write_slice`](vm_memory::Bytes::write_slice) with streaming stores, for data the
/// host will not read back soon; drains, then marks the bytes dirty.
///
/// # Errors
///
/// As for [`zero`], for the range `addr..addr + src.len()`.
pub fn write<M>(mem: &M, addr: GuestAddress, src: &[u8]) -> Result<(), Error>
where
    M: GuestMemory + ?Sized,
    <M::PhysicalMemory as GuestMemoryBackend>::R: RegionBacking,
{
    write_range(mem, addr, src.len(), Source::Buffer(src))
}
