//! Populate (prefault) guest memory: `MADV_POPULATE_WRITE` in parallel, NUMA-pinned and
//! cancellable, with transparent-huge-page advice where the region allows it.

use std::sync::atomic::{AtomicU8, Ordering};

use vm_memory::bitmap::BS;
use vm_memory::{GuestAddress, GuestMemoryBackend, GuestMemoryRegion};

use crate::backing::{RegionBacking, Stores};
use crate::engine::{self, Cancel, MIN_CHUNK, RegionPart, Start, Stop, WorkReport, Workers};
use crate::error::{Error, HostOp};
use crate::fault::POPULATE_STEP;
use crate::range::{RegionPieces, all_region_pieces, region_pieces};
use crate::sys::{self, Advice};

/// The transparent huge page size of x86-64 and 4 KiB-page arm64 hosts.
pub(crate) const THP_SIZE: usize = 2 << 20;

/// How pages are faulted in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PopulateMethod {
    /// `MADV_POPULATE_WRITE` where the host has it
    /// ([`HostSupport::populate_write`](crate::HostSupport::populate_write)), else
    /// [`PopulateMethod::Touch`]. The kernel's refusal of the advice for a mapping (`EINVAL`) is
    /// an error, never a reason to touch.
    #[default]
    Auto,
    /// `MADV_POPULATE_WRITE` only: where it is unavailable, [`Error::Os`].
    Madvise,
    /// One write fault per page: a compare-and-swap of one byte with itself (a vCPU's
    /// concurrent write is not lost). Only where a store cannot raise a signal
    /// ([`Stores::Direct`]); other memory takes `MADV_POPULATE_WRITE`, or is refused up front
    /// ([`Unwritable::Unchecked`](crate::Unwritable::Unchecked)) on a host without it.
    Touch,
}

/// Transparent huge pages for the populated memory.
///
/// The default is [`HugePageAdvice::Advise`] (fewer, larger faults); on a host that must
/// compact memory to find 2 MiB blocks, pass [`HugePageAdvice::Leave`]. The advice is the
/// call's: a VMM that decides THP per memory zone (its own `madvise` when it maps the zone)
/// passes [`HugePageAdvice::Leave`], or calls [`populate`] once per zone with that zone's
/// advice, rather than [`populate_all`] with one advice for every region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum HugePageAdvice {
    /// `madvise(MADV_HUGEPAGE)` on the 2 MiB-aligned part of each anonymous or shmem/memfd
    /// region piece (not hugetlbfs) before populating. The advice stays on the mapping after
    /// the call. A kernel without THP refuses it, which is not an error
    /// ([`PopulateReport::huge_advised`]).
    #[default]
    Advise,
    /// Leave the mapping's advice as it is.
    Leave,
}

/// What [`populate`] does.
#[derive(Debug, Clone, Default)]
pub struct PopulateOptions {
    /// Workers and placement.
    pub workers: Workers,
    /// How pages are faulted in.
    pub method: PopulateMethod,
    /// Huge-page advice.
    pub huge_pages: HugePageAdvice,
    /// A token to stop early.
    pub cancel: Option<Cancel>,
}

impl PopulateOptions {
    /// `workers`, [`PopulateMethod::Auto`], [`HugePageAdvice::Advise`], no cancellation.
    #[must_use]
    pub fn new(workers: Workers) -> PopulateOptions {
        PopulateOptions { workers, ..PopulateOptions::default() }
    }
}

/// What [`populate`] did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PopulateReport {
    /// Bytes asked for.
    pub requested: u64,
    /// Bytes of the range whose pages are now faulted in.
    pub populated: u64,
    /// Whether the call stopped early because of its [`Cancel`] token.
    pub cancelled: bool,
    /// The guest ranges populated, merged and sorted: all of the range unless cancelled
    /// (populating is idempotent: call again to finish).
    pub done: Vec<(GuestAddress, u64)>,
    /// The method used: [`PopulateMethod::Madvise`] or [`PopulateMethod::Touch`].
    pub method: PopulateMethod,
    /// The huge-page advice the call was given ([`PopulateOptions::huge_pages`]).
    pub huge_pages: HugePageAdvice,
    /// Bytes given `MADV_HUGEPAGE` (0 when left, for hugetlbfs, or refused).
    pub huge_advised: u64,
    /// The workers' report.
    pub work: WorkReport,
}

/// Faults in the pages of `len` guest bytes from `addr` on for writing, in parallel (see
/// [`Workers`]), with huge-page advice where the region allows, stopping early when
/// `options.cancel` is cancelled. No byte changes, so nothing is marked dirty; the first and
/// last page of the range are faulted in whole.
///
/// # Errors
///
/// Before anything is done: [`Error::OutOfRange`] or [`Error::AddressOverflow`] if part of the
/// range is not guest memory; [`Error::Unwritable`] if part of it is mapped without
/// `PROT_WRITE` ([`Unwritable::Protection`](crate::Unwritable::Protection)), lies past the end
/// of a mapped file ([`Unwritable::PastEndOfFile`](crate::Unwritable::PastEndOfFile)), or
/// would be touched where a store could raise a signal on a host without
/// `MADV_POPULATE_WRITE` ([`Unwritable::Unchecked`](crate::Unwritable::Unchecked)). During the
/// work, after the chunks before it were populated: [`Error::Os`] for
/// [`HostOp::PopulateWrite`] when the kernel cannot populate (`EINVAL`: the mapping does not
/// allow writes, such as a device mapping; `EFAULT`: a hugetlbfs pool without free pages, a
/// file hole that cannot be filled; `ENOMEM`: the memory is not there).
pub fn populate<M>(
    mem: &M,
    addr: GuestAddress,
    len: usize,
    options: &PopulateOptions,
) -> Result<PopulateReport, Error>
where
    M: GuestMemoryBackend + ?Sized,
    M::R: RegionBacking,
    for<'a> BS<'a, <M::R as GuestMemoryRegion>::B>: Sync,
{
    if len == 0 {
        return Ok(PopulateReport {
            method: resolved(options.method),
            huge_pages: options.huge_pages,
            ..PopulateReport::default()
        });
    }
    let pieces = region_pieces(mem, addr, len)?;
    populate_pieces(&pieces, len as u64, options)
}

/// [`populate`] of every region of `mem`, whole.
///
/// # Errors
///
/// As for [`populate`].
pub fn populate_all<M>(mem: &M, options: &PopulateOptions) -> Result<PopulateReport, Error>
where
    M: GuestMemoryBackend + ?Sized,
    M::R: RegionBacking,
    for<'a> BS<'a, <M::R as GuestMemoryRegion>::B>: Sync,
{
    let pieces = all_region_pieces(mem)?;
    populate_pieces(&pieces, pieces.total(), options)
}

/// `madvise(MADV_HUGEPAGE)` as [`HugePageAdvice::Advise`] does, without populating; returns
/// the bytes advised.
///
/// # Errors
///
/// As for [`populate`] for the range; a refused advice (a kernel without THP) is not an error,
/// its bytes are not counted.
pub fn advise_huge_pages<M>(mem: &M, addr: GuestAddress, len: usize) -> Result<u64, Error>
where
    M: GuestMemoryBackend + ?Sized,
    M::R: RegionBacking,
{
    if len == 0 {
        return Ok(0);
    }
    let pieces = region_pieces(mem, addr, len)?;
    Ok(advise(&pieces))
}

/// The advice on every piece that takes it; the bytes advised.
fn advise<B: vm_memory::bitmap::Bitmap>(pieces: &RegionPieces<'_, B>) -> u64 {
    let mut advised = 0;
    for p in pieces.pieces.iter().filter(|p| p.backing.kind.takes_huge_page_advice() && !p.backing.hugetlb) {
        let a = p.host.next_multiple_of(THP_SIZE);
        let b = (p.host + p.len) / THP_SIZE * THP_SIZE;
        if a < b {
            // SAFETY: `[a, b)` is inside the piece, which is mapped for the whole call (its
            // `VolatileSlice` and guard live in `pieces`); MADV_HUGEPAGE changes no byte.
            if unsafe { sys::madvise(a, b - a, Advice::HugePage) }.is_ok() {
                advised += (b - a) as u64;
            }
        }
    }
    advised
}

/// The method a call with `method` uses: [`PopulateMethod::Auto`] is `Madvise` where the host
/// has `MADV_POPULATE_WRITE` (probed once per process), `Touch` where not.
pub(crate) fn resolved(method: PopulateMethod) -> PopulateMethod {
    match method {
        PopulateMethod::Auto if sys::takes_effect(Advice::PopulateWrite) => PopulateMethod::Madvise,
        PopulateMethod::Auto | PopulateMethod::Touch => PopulateMethod::Touch,
        PopulateMethod::Madvise => PopulateMethod::Madvise,
    }
}

fn populate_pieces<B>(
    pieces: &RegionPieces<'_, B>,
    requested: u64,
    options: &PopulateOptions,
) -> Result<PopulateReport, Error>
where
    B: vm_memory::bitmap::Bitmap,
    for<'a> BS<'a, B>: Sync,
{
    let method = resolved(options.method);
    if method == PopulateMethod::Touch {
        // Memory whose stores could raise a signal is faulted in with MADV_POPULATE_WRITE even
        // under Touch: refused up front where the host has none.
        pieces.check_fault_in()?;
    }
    let huge_advised = if options.huge_pages == HugePageAdvice::Advise { advise(pieces) } else { 0 };
    let stop = Stop::new(options.cancel.as_ref());
    let work = engine::run(
        &pieces.pieces,
        &options.workers,
        MIN_CHUNK,
        Start::Together,
        &stop,
        |_, p, off, n, stop| populate_part(p, off, n, method, stop),
    )?;
    let mut done: Vec<(GuestAddress, u64)> = Vec::new();
    for c in &work.chunks {
        match done.last_mut() {
            Some((a, l)) if a.0 + *l == c.addr.0 => *l += c.len,
            _ => done.push((c.addr, c.len)),
        }
    }
    Ok(PopulateReport {
        requested,
        populated: work.bytes,
        cancelled: stop.cancelled() && work.bytes < requested,
        done,
        method,
        huge_pages: options.huge_pages,
        huge_advised,
        work,
    })
}

/// Populates bytes `off..off + n` of `p` (whole pages) in steps of [`POPULATE_STEP`], checking
/// `stop` between steps, with `method` ([`resolved`]); the bytes done.
pub(crate) fn populate_part<B>(
    p: &RegionPart<'_, B>,
    off: usize,
    n: usize,
    method: PopulateMethod,
    stop: &Stop<'_>,
) -> Result<usize, Error> {
    let page = p.backing.page_size.max(1);
    let (lo, hi) = (p.host + off, p.host + off + n);
    // Whole pages, inside the region's mapping (which covers whole pages: the kernel maps a
    // region of odd length up to its next page boundary).
    let start = (lo / page * page).max(p.region_host);
    let end = hi.next_multiple_of(page).min(p.region_host + p.region_len.next_multiple_of(page));
    let step = POPULATE_STEP.next_multiple_of(page);
    let touch_here = method == PopulateMethod::Touch && p.backing.stores() == Stores::Direct;
    let mut at = start;
    while at < end {
        if stop.stopped() {
            break;
        }
        let m = step.min(end - at);
        if touch_here {
            // SAFETY: `[at, at + m)` is whole pages of the region's mapping, kept mapped for
            // the whole call, where a store cannot raise a signal (`Stores::Direct`); see
            // `touch` for why its accesses are allowed.
            unsafe { touch(at, m, page) };
        } else {
            // SAFETY: as above (mapped); MADV_POPULATE_WRITE changes no byte, and reports a
            // page it cannot fault in as an error instead of a signal.
            if let Err(source) = unsafe { sys::madvise(at, m, Advice::PopulateWrite) } {
                return Err(Error::Os {
                    op: HostOp::PopulateWrite,
                    addr: GuestAddress(p.guest.0.wrapping_add((at as u64).wrapping_sub(p.host as u64))),
                    len: m as u64,
                    source,
                });
            }
        }
        at += m;
    }
    Ok(at.min(hi).saturating_sub(lo))
}

/// Takes a write fault on every `page`-sized page of `[host, host + len)` without changing a
/// byte: a compare-and-swap of the page's first byte with its own value.
///
/// # Safety
///
/// `[host, host + len)` is mapped for reads and writes for the whole call and covered by no
/// Rust reference (guest RAM reached through `vm-memory`'s raw pointers); `host` and `len` are
/// multiples of `page`. (That a store there cannot raise a signal is the caller's check too,
/// for the process's sake, not for soundness.)
unsafe fn touch(host: usize, len: usize, page: usize) {
    let mut at = host;
    while at < host + len {
        // SAFETY: `at` is inside the mapped range (the caller's contract), so valid for reads
        // and writes of one byte, and `u8` needs no alignment. The byte is only ever accessed
        // here atomically; other accesses to guest RAM are vm-memory's volatile ones and the
        // guest's, from outside this program's abstract machine, and a hardware
        // compare-and-swap of a byte with itself cannot undo a concurrent store to it (it
        // fails and retries with the new value).
        let byte = unsafe { AtomicU8::from_ptr(at as *mut u8) };
        // Relaxed: the swap publishes nothing; it only needs to be a write. (A fetch_or(0)
        // would do, but compilers may lower an idempotent read-modify-write to a plain load,
        // which takes no write fault; a compare-and-swap is kept as a store.)
        let mut v = byte.load(Ordering::Relaxed);
        while let Err(now) = byte.compare_exchange_weak(v, v, Ordering::Relaxed, Ordering::Relaxed) {
            v = now;
        }
        at += page;
    }
}
