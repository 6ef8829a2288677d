//! Parallel zero and fill over any [`GuestMemory`]: the replacement of
//! `memmap_core::clear_parallel`, without a `&mut [u8]` over guest RAM.

use vm_memory::bitmap::{BS, Bitmap};
use vm_memory::{GuestAddress, GuestMemory, GuestMemoryBackend};

use crate::backing::RegionBacking;
use crate::engine::{self, MIN_CHUNK, RegionPart, Start, Stop, WorkReport, Workers};
use crate::error::Error;
use crate::fault::prepare_part;
use crate::range::slice_pieces;
use crate::serial::{staging, stream_pattern};

/// Zeroes `len` guest bytes from `addr` on with `workers` ([`Workers`]); each worker streams,
/// drains and marks dirty its chunks. With one worker it is [`zero`](crate::zero), byte for
/// byte.
///
/// # Errors
///
/// As for [`zero`](crate::zero): the whole range is checked first and nothing is written if
/// part of it is not guest memory or cannot be written; a refusal of the kernel to fault pages
/// in ([`Unwritable::Refused`](crate::Unwritable::Refused)) comes from the worker whose part it
/// is, after other parts may have been written (drained and marked dirty).
pub fn zero_parallel<M>(
    mem: &M,
    addr: GuestAddress,
    len: usize,
    workers: &Workers,
) -> Result<WorkReport, Error>
where
    M: GuestMemory + ?Sized,
    <M::PhysicalMemory as GuestMemoryBackend>::R: RegionBacking,
    for<'a> BS<'a, M::Bitmap>: Sync,
{
    if len == 0 {
        return Ok(WorkReport::default());
    }
    let s = slice_pieces(mem, addr, len)?;
    engine::run(
        &s.pieces,
        workers,
        MIN_CHUNK,
        Start::for_stores(&s.pieces),
        &Stop::new(None),
        |_, p, off, n, _| {
            prepare_part(p, off, n)?;
            zero_part(p, off, n);
            Ok(n)
        },
    )
}

/// Sets `len` guest bytes from `addr` on to `value` with `workers` (see [`zero_parallel`]);
/// a zero `value` is [`zero_parallel`].
///
/// # Errors
///
/// As for [`zero_parallel`].
pub fn fill_parallel<M>(
    mem: &M,
    addr: GuestAddress,
    len: usize,
    value: u8,
    workers: &Workers,
) -> Result<WorkReport, Error>
where
    M: GuestMemory + ?Sized,
    <M::PhysicalMemory as GuestMemoryBackend>::R: RegionBacking,
    for<'a> BS<'a, M::Bitmap>: Sync,
{
    if value == 0 {
        return zero_parallel(mem, addr, len, workers);
    }
    fill_pattern_parallel(mem, addr, len, &[value], workers)
}

/// Writes `pattern` over and over into `len` guest bytes from `addr` on with `workers` (byte
/// `addr + i` gets `pattern[i % pattern.len()]`, whatever region or worker writes it; see
/// [`zero_parallel`]).
///
/// # Errors
///
/// [`Error::EmptyPattern`] for an empty `pattern` and `len > 0`; otherwise as for
/// [`zero_parallel`].
pub fn fill_pattern_parallel<M>(
    mem: &M,
    addr: GuestAddress,
    len: usize,
    pattern: &[u8],
    workers: &Workers,
) -> Result<WorkReport, Error>
where
    M: GuestMemory + ?Sized,
    <M::PhysicalMemory as GuestMemoryBackend>::R: RegionBacking,
    for<'a> BS<'a, M::Bitmap>: Sync,
{
    if len == 0 {
        return Ok(WorkReport::default());
    }
    if pattern.is_empty() {
        return Err(Error::EmptyPattern);
    }
    let s = slice_pieces(mem, addr, len)?;
    let (staging, period, body) = staging(pattern, len);
    let staging = &staging[..];
    engine::run(
        &s.pieces,
        workers,
        MIN_CHUNK,
        Start::for_stores(&s.pieces),
        &Stop::new(None),
        |_, p, off, n, _| {
            prepare_part(p, off, n)?;
            let dst = (p.host + off) as *mut u8;
            // SAFETY: `[dst, dst + n)` is bytes `off..off + n` of the piece, inside the `p.len`
            // bytes of a `VolatileSlice` kept alive (with its pointer guard) until the work is
            // done, so valid for writes; the engine hands every byte of the range to exactly one
            // call, so no two workers write the same bytes; no Rust reference covers guest RAM
            // (only raw pointers and volatile accessors reach it), and `staging` is this call's own
            // buffer. Drained below before the bytes are reported done.
            unsafe { stream_pattern(dst, n, p.range_off + off as u64, staging, period, body) };
            stream_hal::drain();
            p.bitmap.mark_dirty(off, n);
            Ok(n)
        },
    )
}

/// Zeroes bytes `off..off + n` of `p` with streaming stores, drains, marks them dirty. The
/// caller has made the stores safe first ([`prepare_part`]).
pub(crate) fn zero_part<B: Bitmap>(p: &RegionPart<'_, B>, off: usize, n: usize) {
    let dst = (p.host + off) as *mut u8;
    // SAFETY: `[dst, dst + n)` lies inside the piece's `p.len` bytes (the engine's parts do),
    // which are a `VolatileSlice`'s (or a region's) host memory kept mapped until the work is
    // done: valid for writes. Each byte is handed to exactly one worker, and no Rust reference
    // covers guest RAM, so nothing else in this program accesses these bytes except through raw
    // pointers or volatile accessors (the guest's and vm-memory's own accesses, from outside
    // the abstract machine).
    unsafe { stream_hal::clear(dst, n) };
    // Orders the streaming stores before the dirty bits and before the worker reports the
    // part done (the join at the end of the call then publishes them to the caller).
    stream_hal::drain();
    p.bitmap.mark_dirty(off, n);
}
