//! Residency: which pages of a range are in memory, asked of the kernel with as few system
//! calls as the answer allows (`PAGEMAP_SCAN`, `mincore`, `lseek(SEEK_DATA)`, `cachestat`),
//! and the rule that turns it into [`reset`](crate::reset)'s path per page ([`reset_path`]).

use crate::backing::BackingKind;
use crate::error::Error;
use crate::sys;

/// The path [`ResetPolicy::Auto`](crate::ResetPolicy::Auto) takes for a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResetPath {
    /// Streaming zero in place.
    InPlace,
    /// Discard.
    Discard,
}

/// The rule of [`ResetPolicy::Auto`](crate::ResetPolicy::Auto) for one page of kind `kind`:
/// resident memory is zeroed in place (a refault would clear it again), memory that is not is
/// discarded (zeroing would fault it in) where discarded pages read as zero
/// (`docs/performance/reset-sweep.txt`).
#[must_use]
pub const fn reset_path(kind: BackingKind, resident: bool) -> ResetPath {
    if !resident && kind.discards_to_zero() { ResetPath::Discard } else { ResetPath::InPlace }
}

/// Calls `act` for the whole pages `[a, b)` of a shared file mapping (`file` at offset `off_a`)
/// as runs by [`reset_path`]: holes (`lseek(SEEK_DATA)`) read as zero already and go to
/// `absent`; in the data, `mincore` finds the resident runs. By `mincore` alone if the file
/// cannot say.
pub(crate) fn for_each_data_run(
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
pub(crate) struct FileAt<'f> {
    pub(crate) file: &'f std::fs::File,
    pub(crate) a: usize,
    pub(crate) off_a: u64,
}

/// The residency walk of private anonymous memory or of a shmem file mapping (`file`): whole
/// pages of `page` bytes of `kind`, each run handed to `act` with its path by [`reset_path`],
/// and `absent` told of the pages that read as zero already and are left as they are: of
/// private memory, those with no page-table entry; of a shmem file, those with no entry here
/// that are a hole of the file ([`MappedWalk::skip`]).
pub(crate) struct MappedWalk<'w, 'f> {
    pub(crate) kind: BackingKind,
    pub(crate) page: usize,
    pub(crate) file: Option<FileAt<'f>>,
    pub(crate) act: &'w mut dyn FnMut(usize, usize, ResetPath) -> Result<(), Error>,
    pub(crate) absent: &'w mut dyn FnMut(usize, usize),
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
    pub(crate) fn runs(&mut self, a: usize, b: usize) -> Result<(), Error> {
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

/// Base pages up to which [`MappedWalk::runs`] asks the page tables about every page
/// (512 KiB of 4 KiB pages: the scan of that many present pages costs less than the one more
/// system call the probe and `mincore` would make).
const SCAN_ALL_PAGES: usize = 128;

/// Base pages asked of `mincore` at a time (the vector lives on the stack): 4096, 16 MiB of
/// 4 KiB pages.
pub(crate) const MINCORE_BATCH: usize = 4096;

/// Calls `act(x, y, path)` for the whole pages `[a, b)` (multiples of `page`) as maximal runs
/// of one path by [`reset_path`], in address order: a page is resident if any of its base
/// pages is (`mincore`, asked 16 MiB at a time); resident if the kernel cannot say.
pub(crate) fn for_each_resident_run(
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
