//! How a region's host memory is backed, which decides what discarding, populating and
//! huge-page advice do: told by [`RegionBacking`], never guessed.

use std::fs::File;

use vm_memory::GuestMemoryRegion;
use vm_memory::GuestRegionMmap;
use vm_memory::bitmap::Bitmap;

/// The base page size this crate assumes for memory that is not hugetlbfs: 4 KiB. (On a host
/// with larger base pages every figure that depends on it stays correct, only coarser: the
/// page-granular operations round to 4 KiB boundaries, which are inside the host's pages.)
pub(crate) const BASE_PAGE: usize = 4096;

/// What kind of host memory a region is: what [`reset`](crate::reset)'s discard does to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BackingKind {
    /// `MAP_PRIVATE | MAP_ANONYMOUS` (also with `MAP_HUGETLB`): discarded with `MADV_DONTNEED`,
    /// the pages then read as zero.
    PrivateAnonymous,
    /// `MAP_SHARED | MAP_ANONYMOUS` (shmem without a file descriptor): discarded with
    /// `MADV_REMOVE`.
    SharedAnonymous,
    /// `MAP_SHARED` of a file (memfd, tmpfs, hugetlbfs, a file on disk): a hole is punched in
    /// the file (`fallocate(PUNCH_HOLE)`), which every mapping of it then reads as zero.
    SharedFile,
    /// `MAP_PRIVATE` of a file: after `MADV_DONTNEED` the pages read the file again, not zero.
    /// Never discarded.
    PrivateFile,
    /// Nothing is known (a region type that does not say, or `MmapRegion::build_raw` of a
    /// mapping made elsewhere). Never discarded; populated and zeroed like any memory.
    Unknown,
}

impl BackingKind {
    /// Whether discarded pages of this kind read as zero.
    #[must_use]
    pub(crate) const fn discards_to_zero(self) -> bool {
        matches!(self, BackingKind::PrivateAnonymous | BackingKind::SharedAnonymous | BackingKind::SharedFile)
    }

    /// Whether `MADV_HUGEPAGE` applies (anonymous memory, and shmem/memfd where the host's
    /// `shmem_enabled` honours the advice); hugetlbfs pages are huge already.
    #[must_use]
    pub(crate) const fn takes_huge_page_advice(self) -> bool {
        matches!(self, BackingKind::PrivateAnonymous | BackingKind::SharedAnonymous | BackingKind::SharedFile)
    }

    /// A few words for messages.
    #[must_use]
    pub const fn describe(self) -> &'static str {
        match self {
            BackingKind::PrivateAnonymous => "private anonymous memory",
            BackingKind::SharedAnonymous => "shared anonymous memory",
            BackingKind::SharedFile => "a shared file mapping",
            BackingKind::PrivateFile => "a private file mapping: discarded pages would read the file",
            BackingKind::Unknown => "memory of unknown backing",
        }
    }
}

/// How this crate keeps a store into a region's memory from raising `SIGSEGV` or `SIGBUS`
/// ([`HostBacking::stores`]): where the kernel may refuse a page, `MADV_POPULATE_WRITE` faults
/// it in first and reports the refusal as an error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Stores {
    /// The mapping is not writable: its protection (`vm-memory`'s record of what `mmap` was
    /// given) lacks `PROT_WRITE`. Every call that would write, discard or populate it returns
    /// [`Unwritable::Protection`](crate::Unwritable::Protection) before anything is done.
    Refused {
        /// The mapping's protection (`PROT_*` bits).
        prot: i32,
    },
    /// Nothing in the backing can refuse a page, so stores go straight to memory: writable
    /// private anonymous memory (not hugetlbfs), what `GuestMemoryMmap::from_ranges` maps.
    Direct,
    /// Pages that are not resident (`mincore`) are faulted in with `MADV_POPULATE_WRITE` before
    /// they are written; resident ones are written directly: shmem (shared anonymous memory,
    /// memfd and other tmpfs files), which may refuse a new page (a tmpfs size limit, the
    /// commit limit of strict overcommit) but never one it holds.
    FaultInAbsent,
    /// Every page is faulted in with `MADV_POPULATE_WRITE` before it is written: hugetlbfs
    /// memory (an empty pool), a file of any other file system (a full disk, a hole, an I/O
    /// error) and memory of unknown backing. On a host without `MADV_POPULATE_WRITE` (a kernel
    /// before 5.14, an emulator that ignores `madvise`) such memory is refused with
    /// [`Unwritable::Unchecked`](crate::Unwritable::Unchecked) before anything is done.
    FaultInAll,
}

/// A region's host backing, as [`RegionBacking::host_backing`] reports it.
#[derive(Debug, Clone, Copy)]
pub struct HostBacking<'a> {
    /// The kind of memory.
    pub kind: BackingKind,
    /// Its page size: 4 KiB, or the huge page size of hugetlbfs memory.
    pub page_size: usize,
    /// Whether it is hugetlbfs memory (`MAP_HUGETLB`, a hugetlbfs file or a `MFD_HUGETLB` memfd).
    pub hugetlb: bool,
    /// For a file mapping ([`BackingKind::SharedFile`], [`BackingKind::PrivateFile`]): the file
    /// and the file offset of the region's first byte.
    pub file: Option<(&'a File, u64)>,
    /// What a store needs first.
    stores: Stores,
    /// For a file shorter than the region: the bytes of the region (from its start) inside the
    /// file's last page, and the file's length.
    file_end: Option<(u64, u64)>,
}

impl<'a> HostBacking<'a> {
    /// Memory nothing is known about, in base pages.
    pub(crate) const UNKNOWN: HostBacking<'static> =
        HostBacking::new(BackingKind::Unknown, BASE_PAGE, false, None);

    /// A backing of `kind` in pages of `page_size` bytes (`hugetlb`: hugetlbfs pages), of
    /// `file` at an offset for a file mapping. Its stores are [`Stores::FaultInAll`]: every page
    /// is faulted in for writing before it is written, which is always safe and costs a
    /// `madvise` walk of the pages.
    #[must_use]
    pub const fn new(
        kind: BackingKind,
        page_size: usize,
        hugetlb: bool,
        file: Option<(&'a File, u64)>,
    ) -> Self {
        HostBacking { kind, page_size, hugetlb, file, stores: Stores::FaultInAll, file_end: None }
    }

    /// The same backing, mapped without `PROT_WRITE` (`prot`): nothing is written, discarded or
    /// populated ([`Stores::Refused`]).
    #[must_use]
    pub const fn not_writable(mut self, prot: i32) -> Self {
        self.stores = Stores::Refused { prot };
        self
    }

    /// The same backing with `stores`.
    ///
    /// # Safety
    ///
    /// For [`Stores::Direct`]: no store into any byte of the region raises a signal while the
    /// region is in use. For [`Stores::FaultInAbsent`]: no store into a page that `mincore`
    /// reports resident raises a signal. ([`Stores::Refused`] and [`Stores::FaultInAll`] claim
    /// nothing; [`HostBacking::not_writable`] and [`HostBacking::new`] give them safely.)
    #[must_use]
    pub const unsafe fn with_stores(mut self, stores: Stores) -> Self {
        self.stores = stores;
        self
    }

    /// What a store into the region needs first.
    #[must_use]
    pub const fn stores(&self) -> Stores {
        self.stores
    }

    /// For a file mapping whose file ends before the region does: the bytes of the region
    /// (from its start) up to the end of the file's last page (every page from there on would
    /// raise `SIGBUS`), and the file's length. `None`: the file covers the region, or the
    /// backing did not look.
    #[must_use]
    pub const fn file_end(&self) -> Option<(u64, u64)> {
        self.file_end
    }
}

/// A guest memory region that can say how its host memory is backed. Needed by every function
/// of this crate: by [`populate`](crate::populate) (page size, huge-page advice), by
/// [`reset`](crate::reset) (how to discard), and by every writing function for
/// [`HostBacking::stores`] (whether a store can raise a signal).
///
/// Implemented for `vm-memory`'s [`GuestRegionMmap`]; implement it for your own region type
/// to use those functions with it ([`HostBacking::new`] with [`BackingKind::Unknown`] is always a
/// safe answer). Reporting a kind whose discard does not zero the memory is a logic error
/// that makes [`reset`](crate::reset) leave old bytes in place (never undefined behaviour);
/// when in doubt, report [`BackingKind::Unknown`].
pub trait RegionBacking: GuestMemoryRegion {
    /// How the region's host memory is backed.
    fn host_backing(&self) -> HostBacking<'_>;
}

impl<B: Bitmap> RegionBacking for GuestRegionMmap<B> {
    fn host_backing(&self) -> HostBacking<'_> {
        #[cfg(target_os = "linux")]
        {
            let mapping = Mapping {
                flags: self.flags(),
                prot: self.prot(),
                file: self.file_offset().map(|f| (f.file(), f.start())),
                hugetlbfs: self.is_hugetlbfs(),
                len: self.len(),
            };
            mmap_backing(&mapping)
        }
        #[cfg(not(target_os = "linux"))]
        {
            HostBacking::UNKNOWN
        }
    }
}

/// What `vm-memory` records of a region's `mmap`.
#[cfg(target_os = "linux")]
pub(crate) struct Mapping<'a> {
    /// The `flags` given to `mmap`.
    pub(crate) flags: i32,
    /// The `prot` given to `mmap`.
    pub(crate) prot: i32,
    /// The file and offset mapped, if any.
    pub(crate) file: Option<(&'a File, u64)>,
    /// What the VMM told `vm-memory` about hugetlbfs.
    pub(crate) hugetlbfs: Option<bool>,
    /// The region's length in bytes.
    pub(crate) len: u64,
}

/// The backing of a mapping `vm-memory` made (or was told of, for `MmapRegion::build_raw`,
/// whose caller promises that `prot` and `flags` are the mapping's).
#[cfg(target_os = "linux")]
pub(crate) fn mmap_backing<'a>(m: &Mapping<'a>) -> HostBacking<'a> {
    let flags = m.flags;
    // MAP_SHARED (1), MAP_PRIVATE (2) and MAP_SHARED_VALIDATE (3) share the low two bits.
    let shared = matches!(flags & 0x3, libc::MAP_SHARED | libc::MAP_SHARED_VALIDATE);
    let private = flags & 0x3 == libc::MAP_PRIVATE;
    let anonymous = flags & libc::MAP_ANONYMOUS != 0;
    let mapped_file = if anonymous { None } else { m.file };
    let (kind, file) = match mapped_file {
        None if anonymous && shared => (BackingKind::SharedAnonymous, None),
        None if anonymous && private => (BackingKind::PrivateAnonymous, None),
        Some(f) if shared => (BackingKind::SharedFile, Some(f)),
        Some(f) if private => (BackingKind::PrivateFile, Some(f)),
        _ => (BackingKind::Unknown, None),
    };
    // The page size: a hugetlbfs file says it (`f_bsize`), MAP_HUGETLB carries its log2 in
    // the MAP_HUGE_SHIFT bits (0: the default size), a VMM's `hugetlbfs` flag means the default.
    let (file_size, fs) = mapped_file.map_or((None, None), |(f, _)| crate::sys::file_facts(f));
    let mut page_size = BASE_PAGE;
    let mut hugetlb = false;
    if let Some(size) = fs.and_then(|fs| fs.hugetlbfs_page_size) {
        page_size = size;
        hugetlb = true;
    }
    if flags & libc::MAP_HUGETLB != 0 {
        hugetlb = true;
        let log2 = (flags >> libc::MAP_HUGE_SHIFT) & libc::MAP_HUGE_MASK;
        page_size = if log2 != 0 { 1usize << log2 } else { crate::sys::default_huge_page_size() };
    } else if !hugetlb && m.hugetlbfs == Some(true) {
        hugetlb = true;
        page_size = crate::sys::default_huge_page_size();
    }
    let mut backing = HostBacking::new(kind, page_size, hugetlb, file);
    if m.prot & libc::PROT_WRITE == 0 {
        return backing.not_writable(m.prot);
    }
    if let Some((_, offset)) = file {
        // Pages wholly past the end of the file raise SIGBUS: the range checks refuse them.
        if let Some(size) = file_size {
            let page = page_size.max(crate::sys::base_page()) as u64;
            let inside = size.next_multiple_of(page).saturating_sub(offset);
            if inside < m.len {
                backing.file_end = Some((inside, size));
            }
        }
    }
    let stores = match kind {
        _ if hugetlb => Stores::FaultInAll,
        BackingKind::PrivateAnonymous => Stores::Direct,
        BackingKind::SharedAnonymous => Stores::FaultInAbsent,
        BackingKind::SharedFile | BackingKind::PrivateFile if fs.is_some_and(|fs| fs.tmpfs) => {
            Stores::FaultInAbsent
        }
        _ => Stores::FaultInAll,
    };
    // SAFETY: the mapping is writable (`prot` has PROT_WRITE, checked above; `prot` and
    // `flags` are what `vm-memory` passed to `mmap`, or for `build_raw` what its caller
    // promised they are). `Direct` is given to private anonymous memory without huge pages:
    // the kernel backs a store there with a new page, or with the OOM killer, never a signal
    // (its commit charge was taken at `mmap`, if at all). `FaultInAbsent` is given to shmem
    // (shared anonymous memory, and tmpfs files: memfd, `/dev/shm`): a resident page there is
    // allocated and charged to the file, so a store into it is not refused; a page that is
    // not resident may be (a full tmpfs, the commit limit of strict overcommit), and is
    // faulted in first.
    unsafe { backing.with_stores(stores) }
}
