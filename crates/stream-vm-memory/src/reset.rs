//! Reset: make a guest range read as zero again, in place (streaming zero) or by discarding
//! its pages (and, optionally, faulting them back in).

use std::sync::atomic::{AtomicU64, Ordering};

use vm_memory::bitmap::{BS, Bitmap};
use vm_memory::{GuestAddress, GuestMemoryBackend, GuestMemoryRegion};

use crate::backing::{BackingKind, HostBacking, RegionBacking, Stores};
use crate::engine::{self, MIN_CHUNK, RegionPart, Start, Stop, WorkReport, Workers};
use crate::error::{Error, HostOp};
use crate::fault::{prepare, prepare_part};
use crate::parallel::zero_part;
use crate::populate::{PopulateMethod, populate_part, resolved};
use crate::range::{RegionPieces, all_region_pieces, region_pieces};
use crate::residency::{
    FileAt, MINCORE_BATCH, MappedWalk, ResetPath, for_each_data_run, for_each_resident_run,
};
use crate::sys::{self, Advice};

/// How [`reset`] makes the range read as zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ResetPolicy {
    /// Page by page, by the rule of [`reset_path`](crate::reset_path): resident pages are
    /// zeroed in place, pages that are not resident are discarded where the backing allows it,
    /// so residency stays as it was.
    ///
    /// Residency is asked of the kernel (`mincore`; the page tables through `PAGEMAP_SCAN`
    /// from Linux 6.7, the page cache through `cachestat` from 6.5 and `lseek(SEEK_DATA)`).
    /// Pages that are out of memory and read as zero already (no page-table entry, a file
    /// hole) are left as they are and counted as discarded; where a whole range of up to
    /// 128 MiB is, no worker starts.
    #[default]
    Auto,
    /// Streaming zero in place ([`zero_parallel`](crate::zero_parallel)): the pages stay where
    /// they are, resident.
    InPlace,
    /// Give the pages back to the host (`MADV_DONTNEED` for private anonymous memory,
    /// `MADV_REMOVE` for shared anonymous memory, a punched hole for memfd and hugetlbfs);
    /// partial pages at the ends are zeroed in place. With `repopulate`, the discarded pages
    /// are faulted back in right away, as for [`populate`](crate::populate).
    Discard {
        /// Fault the pages back in.
        repopulate: bool,
    },
}

/// What [`reset`] did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResetReport {
    /// Bytes zeroed in place (partial pages of a discard included).
    pub in_place: u64,
    /// Bytes discarded, or, under [`ResetPolicy::Auto`], left out of memory as they were.
    pub discarded: u64,
    /// Bytes faulted back in after the discard.
    pub repopulated: u64,
    /// The workers' report.
    pub work: WorkReport,
}

/// What to do with one piece.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    InPlace,
    /// Discard where not resident ([`reset_path`](crate::reset_path)).
    Auto,
    /// Out of memory as a whole and read as zero already ([`wholly_absent`]): nothing to do
    /// but count and mark dirty.
    Absent,
    Discard {
        repopulate: bool,
    },
}

/// Makes `len` guest bytes from `addr` on read as zero, with `workers` (see [`Workers`]), by
/// `policy`, and marks every byte dirty (a discarded page changed too). Each region piece
/// takes its own path; where a store could raise a signal ([`Stores`](crate::Stores)), pages
/// zeroed in place are faulted in for writing first, as [`zero`](crate::zero) does.
///
/// # Errors
///
/// Before anything is written: [`Error::OutOfRange`] or [`Error::AddressOverflow`] if part of
/// the range is not guest memory, [`Error::Unwritable`] if part of it is mapped without
/// `PROT_WRITE`, lies past the end of a mapped file, or needs a check this host cannot make
/// (as for [`zero`](crate::zero), under every policy), [`Error::CannotDiscard`] if `Discard`
/// is forced on memory whose discarded pages would not read as zero (a private file mapping)
/// or of unknown backing. During the work: [`Error::Os`] when a forced discard or a repopulate
/// is refused by the kernel (`EINVAL` on `mlock`ed memory, say; under [`ResetPolicy::Auto`]
/// such a part is zeroed in place instead), [`Error::Unwritable`] with
/// [`Unwritable::Refused`](crate::Unwritable::Refused) when the kernel refuses to fault in a
/// page to be zeroed in place (an empty hugetlbfs pool).
pub fn reset<M>(
    mem: &M,
    addr: GuestAddress,
    len: usize,
    policy: ResetPolicy,
    workers: &Workers,
) -> Result<ResetReport, Error>
where
    M: GuestMemoryBackend + ?Sized,
    M::R: RegionBacking,
    for<'a> BS<'a, <M::R as GuestMemoryRegion>::B>: Sync,
{
    if len == 0 {
        return Ok(ResetReport::default());
    }
    reset_pieces(&region_pieces(mem, addr, len)?, len as u64, policy, workers)
}

/// [`reset`] of every region of `mem`, whole: a guest's reboot, holes (a PCI hole between two
/// regions) and all.
///
/// # Errors
///
/// As for [`reset`]; nothing is written when a region is refused up front.
pub fn reset_all<M>(mem: &M, policy: ResetPolicy, workers: &Workers) -> Result<ResetReport, Error>
where
    M: GuestMemoryBackend + ?Sized,
    M::R: RegionBacking,
    for<'a> BS<'a, <M::R as GuestMemoryRegion>::B>: Sync,
{
    let pieces = all_region_pieces(mem)?;
    reset_pieces(&pieces, pieces.total(), policy, workers)
}

fn reset_pieces<B>(
    pieces: &RegionPieces<'_, B>,
    len: u64,
    policy: ResetPolicy,
    workers: &Workers,
) -> Result<ResetReport, Error>
where
    B: Bitmap,
    for<'a> BS<'a, B>: Sync,
{
    pieces.check_fault_in()?;
    let mut actions = Vec::with_capacity(pieces.pieces.len());
    for p in &pieces.pieces {
        let a = match policy {
            ResetPolicy::InPlace => Action::InPlace,
            ResetPolicy::Discard { repopulate } => {
                if !p.backing.kind.discards_to_zero() {
                    return Err(Error::CannotDiscard {
                        addr: p.guest,
                        len: p.len as u64,
                        backing: p.backing.kind,
                    });
                }
                Action::Discard { repopulate }
            }
            ResetPolicy::Auto if p.backing.kind.discards_to_zero() => Action::Auto,
            ResetPolicy::Auto => Action::InPlace,
        };
        actions.push(a);
    }
    // Residency of shared files (memfd, tmpfs) comes from the file's holes (`lseek`): two
    // calls per extent instead of a page-cache lookup per page, through a description of its
    // own so that the caller's file offset does not move.
    let probes: Vec<Option<std::fs::File>> = pieces
        .pieces
        .iter()
        .zip(&actions)
        .map(|(p, a)| match (a, p.backing.kind, p.backing.file) {
            // Below one mincore batch, the page tables and `cachestat` say
            // (`MappedWalk`) without opening the file again.
            (Action::Auto, BackingKind::SharedFile, Some((f, _)))
                if !p.backing.hugetlb && p.len >= MINCORE_BATCH * sys::base_page() =>
            {
                sys::reopen_readonly(f).ok()
            }
            _ => None,
        })
        .collect();
    // A piece that is out of memory as a whole needs nothing but its dirty bits, and one call
    // on this thread says so; when every piece is, and the range is small enough that marking
    // it on one thread costs less than starting another, no worker starts.
    for (k, p) in pieces.pieces.iter().enumerate() {
        if actions[k] == Action::Auto && p.len as u64 >= 2 * MIN_CHUNK && wholly_absent(p, probes[k].as_ref())
        {
            actions[k] = Action::Absent;
        }
    }
    let one = Workers::new(stream_par::Threads::One);
    let alone = len <= ABSENT_ALONE as u64 && actions.iter().all(|a| *a == Action::Absent);
    let workers = if alone { &one } else { workers };
    let counters = Counters::default();
    let work = engine::run(
        &pieces.pieces,
        workers,
        MIN_CHUNK,
        if matches!(policy, ResetPolicy::Discard { repopulate: true }) {
            Start::Together
        } else {
            Start::for_stores(&pieces.pieces)
        },
        &Stop::new(None),
        |k, p, off, n, stop| match actions[k] {
            Action::InPlace => {
                prepare_part(p, off, n)?;
                zero_part(p, off, n);
                counters.in_place.fetch_add(n as u64, Ordering::Relaxed);
                Ok(n)
            }
            Action::Auto => discard_part(p, off, n, Mode::Auto(probes[k].as_ref()), &counters, stop),
            Action::Absent => {
                counters.discarded.fetch_add(n as u64, Ordering::Relaxed);
                p.bitmap.mark_dirty(off, n);
                Ok(n)
            }
            Action::Discard { repopulate } => {
                discard_part(p, off, n, Mode::Forced { repopulate }, &counters, stop)
            }
        },
    )?;
    // Relaxed: the workers have all joined (the scope's join orders their increments before
    // these loads).
    Ok(ResetReport {
        in_place: counters.in_place.load(Ordering::Relaxed),
        discarded: counters.discarded.load(Ordering::Relaxed),
        repopulated: counters.repopulated.load(Ordering::Relaxed),
        work,
    })
}

#[derive(Default)]
struct Counters {
    in_place: AtomicU64,
    discarded: AtomicU64,
    repopulated: AtomicU64,
}

/// Whether all of `p` is out of memory and reads as zero already: private anonymous memory
/// with no page-table entry, or a hole of a shared file (`file`, its read-only second
/// description). `false` where it cannot say, and for partial or huge pages.
fn wholly_absent<B>(p: &RegionPart<'_, B>, file: Option<&std::fs::File>) -> bool {
    let base = sys::base_page();
    if p.backing.page_size != base || p.host % base != 0 || p.len % base != 0 {
        return false;
    }
    match (p.backing.kind, file, p.backing.file) {
        (BackingKind::PrivateAnonymous, _, _) => {
            matches!(sys::pagemap_first(p.host, p.host + p.len), Ok(None))
        }
        (BackingKind::SharedFile, Some(f), Some((_, start))) => {
            let off = start + (p.host - p.region_host) as u64;
            matches!(sys::data_extent_start(f, off, off + p.len as u64), Ok(None))
        }
        _ => false,
    }
}

/// How [`discard_part`] treats the whole pages of a part.
#[derive(Debug, Clone, Copy)]
enum Mode<'f> {
    /// Each page by [`reset_path`](crate::reset_path); a refused discard is done in place. With the file of a
    /// shared file mapping, residency is its data extents.
    Auto(Option<&'f std::fs::File>),
    /// Every page discarded; a refused discard is an error.
    Forced { repopulate: bool },
}

/// Resets bytes `off..off + n` of `p`: the partial pages at the ends in place, the whole pages
/// by `mode`; then marks the part dirty.
fn discard_part<B: Bitmap>(
    p: &RegionPart<'_, B>,
    off: usize,
    n: usize,
    mode: Mode<'_>,
    counters: &Counters,
    stop: &Stop<'_>,
) -> Result<usize, Error> {
    let page = p.backing.page_size.max(1);
    let (lo, hi) = (p.host + off, p.host + off + n);
    let a = lo.next_multiple_of(page).min(hi);
    let b = (hi / page * page).max(a);
    let guest_of = |x: usize| GuestAddress(p.guest.0 + (x - p.host) as u64);
    let ends = [(lo, a), (b, hi)];
    for (x, y) in ends {
        prepare(&p.backing, guest_of(x), x, y - x)?;
    }
    let mut in_place = 0u64;
    for (x, y) in ends {
        if x < y {
            // SAFETY: `[x, y)` is inside the part, whose bytes are valid for writes and handed
            // to this worker alone (see `zero_part`); drained below.
            unsafe { stream_hal::clear(x as *mut u8, y - x) };
            in_place += (y - x) as u64;
        }
    }
    // The whole pages, as runs of one path each.
    let mut act = |x: usize, y: usize, path: ResetPath| -> Result<(), Error> {
        if path == ResetPath::Discard {
            // SAFETY: `[x, y)` is whole pages inside the part (mapped for the whole call,
            // handed to this worker alone, covered by no Rust reference): replacing its bytes
            // with zeros is exactly what the caller asked of `reset`.
            match unsafe { discard(&p.backing, p.region_host, x, y - x) } {
                Ok(()) => {
                    counters.discarded.fetch_add((y - x) as u64, Ordering::Relaxed);
                    if let Mode::Forced { repopulate: true } = mode {
                        let method = resolved(PopulateMethod::Auto);
                        let done = populate_part(p, x - p.host, y - x, method, stop)?;
                        counters.repopulated.fetch_add(done as u64, Ordering::Relaxed);
                    }
                    return Ok(());
                }
                Err((op, source)) if matches!(mode, Mode::Forced { .. }) => {
                    return Err(Error::Os { op, addr: guest_of(x), len: (y - x) as u64, source });
                }
                // Auto: the kernel refused (mlocked memory, a file system without hole
                // punching): the same zeros, in place.
                Err(_) => {}
            }
        }
        prepare(&p.backing, guest_of(x), x, y - x)?;
        // SAFETY: as for the partial pages above.
        unsafe { stream_hal::clear(x as *mut u8, y - x) };
        in_place += (y - x) as u64;
        Ok(())
    };
    let mut absent = |u: usize, v: usize| {
        counters.discarded.fetch_add((v - u) as u64, Ordering::Relaxed);
    };
    let kind = p.backing.kind;
    let done = match (mode, p.backing.file) {
        (Mode::Forced { .. }, _) if a < b => act(a, b, ResetPath::Discard),
        (Mode::Forced { .. }, _) => Ok(()),
        (Mode::Auto(Some(file)), Some((_, start))) => {
            for_each_data_run(file, a, b, page, start + (a - p.region_host) as u64, &mut act, &mut absent)
        }
        (Mode::Auto(_), _) if kind == BackingKind::PrivateAnonymous => {
            MappedWalk { kind, page, file: None, act: &mut act, absent: &mut absent }.runs(a, b)
        }
        // A page the page cache neither holds nor remembers is a hole only of shmem (memfd,
        // tmpfs: the one file backing given `FaultInAbsent`); a file on disk may hold data that
        // was never read.
        (Mode::Auto(_), Some((file, start)))
            if kind == BackingKind::SharedFile && p.backing.stores() == Stores::FaultInAbsent =>
        {
            let file = Some(FileAt { file, a, off_a: start + (a - p.region_host) as u64 });
            MappedWalk { kind, page, file, act: &mut act, absent: &mut absent }.runs(a, b)
        }
        (Mode::Auto(_), _) => for_each_resident_run(kind, a, b, page, &mut act),
    };
    if let Err(e) = done {
        // What was zeroed or discarded before the error changed: drained and marked dirty (the
        // whole part, a superset: a dirty bit says a byte may have changed).
        stream_hal::drain();
        p.bitmap.mark_dirty(off, n);
        return Err(e);
    }
    // The streaming stores before the dirty bits and before the part is reported done.
    stream_hal::drain();
    counters.in_place.fetch_add(in_place, Ordering::Relaxed);
    // After the discards returned: the pages read as zero from here on.
    p.bitmap.mark_dirty(off, n);
    Ok(n)
}

/// The largest range [`reset`] leaves to the calling thread alone when all of it is out of
/// memory: marking 128 MiB dirty takes less than starting a second worker.
const ABSENT_ALONE: usize = 128 << 20;

/// Discards `[host, host + len)` (whole pages) of memory backed by `backing`, whose mapping
/// starts at `region_host`.
///
/// # Safety
///
/// The range is mapped for the whole call, and the caller may replace its bytes with zeros.
unsafe fn discard(
    backing: &HostBacking<'_>,
    region_host: usize,
    host: usize,
    len: usize,
) -> Result<(), (HostOp, std::io::Error)> {
    match (backing.kind, backing.file) {
        (BackingKind::PrivateAnonymous, _) => {
            // SAFETY: the caller's contract: mapped, and its bytes may become zeros.
            unsafe { sys::madvise(host, len, Advice::DontNeed) }.map_err(|e| (HostOp::DontNeed, e))
        }
        (BackingKind::SharedAnonymous, _) => {
            // SAFETY: as above.
            unsafe { sys::madvise(host, len, Advice::Remove) }.map_err(|e| (HostOp::Remove, e))
        }
        (BackingKind::SharedFile, Some((file, start))) => {
            sys::punch_hole(file, start + (host - region_host) as u64, len as u64)
                .map_err(|e| (HostOp::PunchHole, e))
        }
        _ => Err((HostOp::DontNeed, std::io::ErrorKind::Unsupported.into())),
    }
}
