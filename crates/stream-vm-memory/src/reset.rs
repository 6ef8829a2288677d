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
use crate::range::region_pieces;
use crate::sys::{self, Advice};

/// How [`reset`] makes the range read as zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ResetPolicy {
    /// The faster path, page by page, by the rule of [`reset_path`]: resident pages are zeroed in place, pages that are not resident (never
    /// faulted in, discarded before, swapped out) are discarded where the backing allows it,
    /// so that they stay out of memory and read as zero. Residency is kept as it was: what was
    /// resident is resident and zero, the rest is not faulted in.
    ///
    /// Residency is asked of the kernel: `mincore` (one call per 16 MiB). Of private anonymous
    /// memory that is not resident, only the pages swapped out need a discard: the page tables
    /// tell them from pages with no entry (never faulted in, or discarded before), which read
    /// as zero already and are left as they are, counted as discarded (`PAGEMAP_SCAN` on
    /// `/proc/self/pagemap`, Linux 6.7; before it, all are discarded). Of a shmem file
    /// (memfd, tmpfs), the same scan finds the pages mapped here, and the page cache is asked
    /// about the others with one `cachestat` per run (Linux 6.5), where `mincore` would look
    /// every page of a hole up (a file on disk goes by `mincore`: its data need not be in the
    /// page cache); for 16 MiB or more of a shared file its holes are first skipped with
    /// `lseek(SEEK_DATA)` (on a second, read-only description of it, so the caller's file
    /// offset does not move), where `mincore` would look every page of a hole up in the page
    /// cache; a hole reads as zero already and is left as it is, counted as discarded. A
    /// region piece of 16 MiB or more that is out of memory as a whole (no page-table entry,
    /// or all hole) is found so by one such call on the calling thread, and where all of a
    /// range of up to 128 MiB is, no worker starts.
    #[default]
    Auto,
    /// Streaming zero in place ([`zero_parallel`](crate::zero_parallel)): the pages stay where
    /// they are, resident.
    InPlace,
    /// Give the pages back to the host and let them be faulted in again as zero pages:
    /// `MADV_DONTNEED` for private anonymous memory, `MADV_REMOVE` for shared anonymous
    /// memory, a punched hole (`fallocate(PUNCH_HOLE)`) for shared file mappings (memfd,
    /// hugetlbfs). Partial pages at the ends of the range are zeroed in place. With
    /// `repopulate`, the discarded pages are faulted back in right away
    /// ([`populate`](crate::populate)'s `MADV_POPULATE_WRITE`), as a VMM that prefaults its
    /// guest memory wants.
    Discard {
        /// Fault the pages back in.
        repopulate: bool,
    },
}

/// The path [`ResetPolicy::Auto`] takes for a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResetPath {
    /// Streaming zero in place.
    InPlace,
    /// Discard.
    Discard,
}

/// The rule of [`ResetPolicy::Auto`] for one page of memory of kind `kind`, `resident` or not
/// (as `mincore`, or for a shared file its data extents, report it).
///
/// On resident memory, zeroing in place is faster than discard and refault at every size (the
/// refault costs the kernel's page clearing plus a fault per page); on memory that is not
/// resident, discarding is faster (it does nearly nothing, while zeroing in place faults every
/// page in first). The sweep behind the rule: `docs/performance/reset-sweep.txt`. Memory whose discard would not
/// read as zero (a private file mapping, an unknown backing) is always zeroed in place.
#[must_use]
pub const fn reset_path(kind: BackingKind, resident: bool) -> ResetPath {
    if !resident && kind.discards_to_zero() { ResetPath::Discard } else { ResetPath::InPlace }
}

/// What [`reset`] did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResetReport {
    /// Bytes zeroed in place (partial pages of a discard included).
    pub in_place: u64,
    /// Bytes discarded, or, under [`ResetPolicy::Auto`], left as they were because they are out
    /// of memory and read as zero already (private anonymous pages with no page-table entry,
    /// the holes of a shared file).
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
    /// Discard where not resident ([`reset_path`]).
    Auto,
    /// Out of memory as a whole and read as zero already ([`wholly_absent`]): nothing to do
    /// but count and mark dirty.
    Absent,
    Discard {
        repopulate: bool,
    },
}

/// Makes `len` guest bytes from `addr` on read as zero, with `workers` (see [`Workers`]), by
/// `policy`, and marks them dirty: every byte, zeroed or discarded (a discarded page reads as
/// zero, so it changed).
///
/// Ranges may span regions of different backings; each region piece takes its own path under
/// [`ResetPolicy::Auto`]. The zeroing is drained before each part is marked dirty, and
/// before return.
///
/// Where a store could raise a signal ([`Stores`](crate::Stores)), the pages zeroed in place
/// are faulted in for writing first, as [`zero`](crate::zero) does.
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
    let pieces = region_pieces(mem, addr, len)?;
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
    let one = Workers::one();
    let alone = len <= ABSENT_ALONE && actions.iter().all(|a| *a == Action::Absent);
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

/// Whether all of `p` is out of memory and reads as zero already, as [`ResetPolicy::Auto`]
/// leaves such pages: private anonymous memory with no page-table entry (one `PAGEMAP_SCAN`
/// that stops at the first entry), a hole of a shared file (`file`, its read-only second
/// description: one `lseek(SEEK_DATA)`). `false` where it cannot say, and for a piece of
/// partial pages or of huge pages.
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
    /// Each page by [`reset_path`]; a refused discard is done in place. With the file of a
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

/// Calls `act` for the whole pages `[a, b)` of a shared file mapping as runs by
/// [`reset_path`]: the file's holes (`lseek(SEEK_DATA)` on `file`, whose offset `a` maps,
/// skips them without looking at every page) read as zero already and nothing maps them:
/// `absent` is told of them and nothing is done; from the data on, `mincore`
/// (cheap where the pages are mapped here) finds the resident run, zeroed in place; a
/// non-resident run inside the data (swapped-out pages) is discarded. All in place if the
/// file cannot say.
fn for_each_data_run(
    file: &std::fs::File,
    a: usize,
    b: usize,
    page: usize,
    off_a: u64,
    act: &mut dyn FnMut(usize, usize, ResetPath) -> Result<(), Error>,
    absent: &mut dyn FnMut(usize, usize),
) -> Result<(), Error> {
    let base = sys::base_page();
    if page != base {
        return for_each_resident_run(BackingKind::SharedFile, a, b, page, act);
    }
    let mut vec = [0u8; MINCORE_BATCH];
    let mut at = a;
    while at < b {
        let off = off_a + (at - a) as u64;
        let end = off_a + (b - a) as u64;
        let data = match sys::data_extent_start(file, off, end) {
            Ok(d) => d,
            // The file cannot say: the rest by mincore.
            Err(_) => return for_each_resident_run(BackingKind::SharedFile, at, b, page, act),
        };
        let Some(d) = data else {
            absent(at, b);
            return Ok(());
        };
        // The hole before the data, in whole pages.
        let d = (a + (d - off_a) as usize) / page * page;
        if d > at {
            absent(at, d.min(b));
            at = d.min(b);
            continue;
        }
        let y = (at + MINCORE_BATCH * base).min(b);
        let n = (y - at).div_ceil(base);
        let flags = &mut vec[..n];
        if sys::mincore_into(at, y - at, flags).is_err() {
            flags.fill(1);
        }
        let resident = flags[0] & 1 == 1;
        let k = run_end(flags, 1, resident);
        let z = (at + k * base).min(y);
        act(at, z, reset_path(BackingKind::SharedFile, resident))?;
        at = z;
    }
    Ok(())
}

/// The file of a shmem file mapping (memfd, tmpfs), for telling its holes: host address `a`
/// maps offset `off_a` of `file`.
#[derive(Clone, Copy)]
struct FileAt<'f> {
    file: &'f std::fs::File,
    a: usize,
    off_a: u64,
}

/// The residency walk of private anonymous memory or of a shmem file mapping (`file`): whole
/// pages of `page` bytes of `kind`, each run handed to `act` with its path by [`reset_path`],
/// and `absent` told of the pages that read as zero already and are left as they are: of
/// private memory, those with no page-table entry; of a shmem file, those with no entry here
/// that are a hole of the file ([`MappedWalk::skip`]).
struct MappedWalk<'w, 'f> {
    kind: BackingKind,
    page: usize,
    file: Option<FileAt<'f>>,
    act: &'w mut dyn FnMut(usize, usize, ResetPath) -> Result<(), Error>,
    absent: &'w mut dyn FnMut(usize, usize),
}

impl MappedWalk<'_, '_> {
    /// Walks the whole pages `[a, b)` with as few system calls as the residency allows (each
    /// costs as much as zeroing tens of KiB):
    ///
    /// * up to [`SCAN_ALL_PAGES`]: one `PAGEMAP_SCAN` ([`MappedWalk::scanned`]) says for every
    ///   page;
    /// * above, one `PAGEMAP_SCAN` that stops at the first page with an entry: none (memory
    ///   discarded before, or never used) ends the call, a swapped page goes on by the page
    ///   tables, a present one by `mincore` ([`for_each_resident_run`]: cheaper per present
    ///   page than the scan), whose runs that are not resident go to
    ///   [`MappedWalk::scanned`].
    ///
    /// Huge pages (hugetlbfs), and a kernel without `PAGEMAP_SCAN` (before 6.7): `mincore`
    /// alone.
    fn runs(&mut self, a: usize, b: usize) -> Result<(), Error> {
        let base = sys::base_page();
        let from = if self.page != base {
            a
        } else if b - a <= SCAN_ALL_PAGES * base {
            return self.scanned(a, b);
        } else {
            match sys::pagemap_first(a, b) {
                Ok(None) => return self.skip(a, b),
                Ok(Some((x, sys::Mapped::Swapped))) if (a..b).contains(&x) => {
                    self.skip(a, x)?;
                    return self.scanned(x, b);
                }
                Ok(Some((x, sys::Mapped::Present))) if (a..b).contains(&x) => {
                    self.skip(a, x)?;
                    x
                }
                _ => a,
            }
        };
        let (kind, page) = (self.kind, self.page);
        for_each_resident_run(kind, from, b, page, &mut |x, y, path| match path {
            ResetPath::InPlace => (self.act)(x, y, path),
            ResetPath::Discard => self.scanned(x, y),
        })
    }

    /// The whole pages `[u, v)`, which have no page-table entry here: of private memory they
    /// read as zero already, `absent` is told; of a shmem file, so are those of a hole (one
    /// `cachestat` call whatever the length, where `mincore` would look every page up
    /// in the page cache), and the rest (data not mapped here, or a kernel before 6.5) go by
    /// `mincore`.
    fn skip(&mut self, u: usize, v: usize) -> Result<(), Error> {
        if u >= v {
            return Ok(());
        }
        let hole = match self.file {
            None => true,
            Some(f) => matches!(sys::is_hole(f.file, f.off_a + (u - f.a) as u64, (v - u) as u64), Ok(true)),
        };
        if hole {
            (self.absent)(u, v);
            Ok(())
        } else {
            for_each_resident_run(BackingKind::SharedFile, u, v, self.page, self.act)
        }
    }

    /// Resets the whole pages `[a, b)` by what the page tables hold ([`sys::pagemap_runs`],
    /// one `PAGEMAP_SCAN` per 64 runs, Linux 6.7): present pages are zeroed in place, pages
    /// swapped out discarded, and pages with no entry go to [`MappedWalk::skip`] (of private
    /// memory, they read as zero already and nothing is done: a `MADV_DONTNEED` of them costs
    /// as much as the scan). Where the kernel cannot
    /// scan, `mincore` decides.
    fn scanned(&mut self, a: usize, b: usize) -> Result<(), Error> {
        /// Why the scan stopped: the kernel (`mincore` decides the rest), or `act`.
        enum Stop {
            Kernel,
            Act(Error),
        }
        impl From<std::io::Error> for Stop {
            fn from(_: std::io::Error) -> Stop {
                Stop::Kernel
            }
        }
        let page = self.page;
        // Everything below `at` is done (zeroed, discarded, or found absent).
        let at = std::cell::Cell::new(a);
        let mut run = |x: usize, y: usize, what: sys::Mapped| -> Result<(), Stop> {
            // Whole pages of the mapping (the kernel reports huge pages whole), inside `[a, b)`.
            let (x, y) = ((x / page * page).max(at.get()), y.next_multiple_of(page).min(b));
            if x >= y {
                return Ok(());
            }
            self.skip(at.get(), x).map_err(Stop::Act)?;
            let path = match what {
                sys::Mapped::Present => ResetPath::InPlace,
                sys::Mapped::Swapped => ResetPath::Discard,
            };
            (self.act)(x, y, path).map_err(Stop::Act)?;
            at.set(y);
            Ok(())
        };
        match sys::pagemap_runs(a, b, &mut run) {
            Ok(()) => self.skip(at.get(), b),
            Err(Stop::Act(e)) => Err(e),
            // The kernel cannot say (before Linux 6.7, or it stopped answering): `mincore` for
            // the rest, its runs that are not resident discarded.
            Err(Stop::Kernel) => for_each_resident_run(self.kind, at.get(), b, page, self.act),
        }
    }
}

/// The largest range [`reset`] leaves to the calling thread alone when all of it is out of
/// memory: 128 MiB. What is left to do is marking its pages dirty, and vm-memory's
/// `AtomicBitmap` sets one bit per page with an atomic operation, which below this size takes
/// less than starting a second worker (docs/performance/reset-sweep.txt).
const ABSENT_ALONE: usize = 128 << 20;

/// Base pages up to which [`MappedWalk::runs`] asks the page tables about every page
/// (512 KiB of 4 KiB pages: the scan of that many present pages costs less than the one more
/// system call the probe and `mincore` would make).
const SCAN_ALL_PAGES: usize = 128;

/// Base pages asked of `mincore` at a time (the vector lives on the stack): 4096, 16 MiB of
/// 4 KiB pages.
const MINCORE_BATCH: usize = 4096;

/// Calls `act(x, y, path)` for the whole pages `[a, b)` (multiples of `page`) as maximal runs
/// of one path by [`reset_path`], in address order: a page is resident if any of its base
/// pages is (`mincore`, asked 16 MiB at a time); resident if the kernel cannot say.
fn for_each_resident_run(
    kind: BackingKind,
    a: usize,
    b: usize,
    page: usize,
    act: &mut dyn FnMut(usize, usize, ResetPath) -> Result<(), Error>,
) -> Result<(), Error> {
    let base = sys::base_page();
    let per = (page / base).max(1);
    // Whole pages per batch, at least one.
    let batch_pages = (MINCORE_BATCH / per).max(1);
    let mut vec = [0u8; MINCORE_BATCH];
    let mut run: Option<(usize, usize, ResetPath)> = None;
    let mut emit = |px: usize, py: usize, path: ResetPath| -> Result<(), Error> {
        run = match run {
            Some((rx, _, rp)) if rp == path => Some((rx, py, rp)),
            Some((rx, ry, rp)) => {
                act(rx, ry, rp)?;
                Some((px, py, path))
            }
            None => Some((px, py, path)),
        };
        Ok(())
    };
    let mut x = a;
    while x < b {
        let y = (x + batch_pages * page).min(b);
        if per > MINCORE_BATCH {
            // A page of more base pages than the batch (1 GiB hugetlbfs pages) is asked about
            // its first base page only: a hugetlbfs page is resident whole or not at all.
            let resident = sys::mincore_into(x, base, &mut vec[..1]).map_or(true, |()| vec[0] & 1 == 1);
            emit(x, y, reset_path(kind, resident))?;
        } else {
            let n = (y - x).div_ceil(base);
            let flags = &mut vec[..n];
            if sys::mincore_into(x, y - x, flags).is_err() {
                // The kernel cannot say: resident.
                flags.fill(1);
            }
            if per == 1 {
                // Base pages: runs found a word at a time.
                let mut i = 0;
                while i < n {
                    let resident = flags[i] & 1 == 1;
                    let j = run_end(flags, i + 1, resident);
                    emit(x + i * page, (x + j * page).min(y), reset_path(kind, resident))?;
                    i = j;
                }
            } else {
                for (i, bytes) in flags.chunks(per).enumerate() {
                    let resident = bytes.iter().any(|&v| v & 1 == 1);
                    emit(x + i * page, (x + (i + 1) * page).min(y), reset_path(kind, resident))?;
                }
            }
        }
        x = y;
    }
    match run {
        Some((rx, ry, rp)) => act(rx, ry, rp),
        None => Ok(()),
    }
}

/// The first index at or after `i` whose `mincore` bit (bit 0) is not `resident` (or the
/// length), eight entries at a time where they agree.
pub(crate) fn run_end(flags: &[u8], mut i: usize, resident: bool) -> usize {
    const BIT0: u64 = 0x0101_0101_0101_0101;
    let want = if resident { BIT0 } else { 0 };
    while i < flags.len() && i % 8 != 0 {
        if (flags[i] & 1 == 1) != resident {
            return i;
        }
        i += 1;
    }
    while let Some(word) = flags.get(i..i + 8) {
        let mut w = [0u8; 8];
        w.copy_from_slice(word);
        if u64::from_ne_bytes(w) & BIT0 != want {
            break;
        }
        i += 8;
    }
    while i < flags.len() {
        if (flags[i] & 1 == 1) != resident {
            return i;
        }
        i += 1;
    }
    i
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_end_where_residency_changes() {
        let mut v = vec![1u8; 37];
        v[0] = 0;
        v[20] = 0;
        v[21] = 0x80; // other bits than bit 0 do not count
        assert_eq!(run_end(&v, 1, true), 20);
        assert_eq!(run_end(&v, 20, false), 22);
        assert_eq!(run_end(&v, 22, true), 37);
        assert_eq!(run_end(&v, 0, false), 1);
        assert_eq!(run_end(&[0; 64], 3, false), 64);
        assert_eq!(run_end(&[], 0, true), 0);
        for k in 0..40 {
            let mut w = vec![0u8; 40];
            w[k] = 1;
            assert_eq!(run_end(&w, 0, false), k, "{k}");
        }
    }
}
