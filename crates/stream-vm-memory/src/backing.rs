//! How a region's host memory is backed, which decides what discarding it does and which pages
//! populate and huge-page advice work on.
//!
//! The engine never guesses: [`RegionBacking`] is the one place a region tells it, implemented
//! here for `vm-memory`'s [`GuestRegionMmap`] (from its `mmap` flags, its file and, for the
//! file, the kernel's `fstatfs`) and open to any other region type.

use std::fs::File;

use vm_memory::GuestMemoryRegion;
use vm_memory::GuestRegionMmap;
use vm_memory::bitmap::Bitmap;

/// The base page size this crate assumes for memory that is not hugetlbfs: 4 KiB. (On a host
/// with larger base pages every figure that depends on it stays correct, only coarser: the
/// page-granular operations round to 4 KiB boundaries, which are inside the host's pages.)
pub const BASE_PAGE: usize = 4096;

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
    pub const fn discards_to_zero(self) -> bool {
        matches!(self, BackingKind::PrivateAnonymous | BackingKind::SharedAnonymous | BackingKind::SharedFile)
    }

    /// Whether `MADV_HUGEPAGE` applies (anonymous memory, and shmem/memfd where the host's
    /// `shmem_enabled` honours the advice); hugetlbfs pages are huge already.
    #[must_use]
    pub const fn takes_huge_page_advice(self) -> bool {
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

/// A region's host backing, as [`RegionBacking::host_backing`] reports it.
#[derive(Debug, Clone, Copy)]
pub struct HostBacking<'a> {
    /// The kind of memory.
    pub kind: BackingKind,
    /// Its page size: [`BASE_PAGE`], or the huge page size of hugetlbfs memory.
    pub page_size: usize,
    /// Whether it is hugetlbfs memory (`MAP_HUGETLB`, a hugetlbfs file or a `MFD_HUGETLB` memfd).
    pub hugetlb: bool,
    /// For [`BackingKind::SharedFile`]: the file and the file offset of the region's first byte.
    pub file: Option<(&'a File, u64)>,
}

impl HostBacking<'_> {
    /// Memory nothing is known about, in base pages.
    pub const UNKNOWN: HostBacking<'static> =
        HostBacking { kind: BackingKind::Unknown, page_size: BASE_PAGE, hugetlb: false, file: None };
}

/// A guest memory region that can say how its host memory is backed. Needed by
/// [`populate`](crate::populate) (page size, huge-page advice) and [`reset`](crate::reset)
/// (how to discard); the zero and fill functions work on any region.
///
/// Implemented for `vm-memory`'s [`GuestRegionMmap`]; implement it for your own region type
/// to use those functions with it. Reporting a kind whose discard does not zero the memory is
/// a logic error that makes [`reset`](crate::reset) leave old bytes in place (never undefined
/// behaviour); when in doubt, report [`BackingKind::Unknown`].
pub trait RegionBacking: GuestMemoryRegion {
    /// How the region's host memory is backed.
    fn host_backing(&self) -> HostBacking<'_>;
}

impl<B: Bitmap> RegionBacking for GuestRegionMmap<B> {
    fn host_backing(&self) -> HostBacking<'_> {
        #[cfg(target_os = "linux")]
        {
            mmap_backing(self.flags(), self.file_offset().map(|f| (f.file(), f.start())), self.is_hugetlbfs())
        }
        #[cfg(not(target_os = "linux"))]
        {
            HostBacking::UNKNOWN
        }
    }
}

/// The backing of a mapping made with `flags`, of `file` at an offset if any; `hugetlbfs` is
/// what the VMM told `vm-memory`.
#[cfg(target_os = "linux")]
pub(crate) fn mmap_backing(
    flags: i32,
    file: Option<(&File, u64)>,
    hugetlbfs: Option<bool>,
) -> HostBacking<'_> {
    // MAP_SHARED (1), MAP_PRIVATE (2) and MAP_SHARED_VALIDATE (3) share the low two bits.
    let shared = matches!(flags & 0x3, libc::MAP_SHARED | libc::MAP_SHARED_VALIDATE);
    let private = flags & 0x3 == libc::MAP_PRIVATE;
    let anonymous = flags & libc::MAP_ANONYMOUS != 0;
    let mapped_file = if anonymous { None } else { file };
    let (kind, file) = match mapped_file {
        None if anonymous && shared => (BackingKind::SharedAnonymous, None),
        None if anonymous && private => (BackingKind::PrivateAnonymous, None),
        Some(f) if shared => (BackingKind::SharedFile, Some(f)),
        Some(_) if private => (BackingKind::PrivateFile, None),
        _ => (BackingKind::Unknown, None),
    };
    // The page size: a hugetlbfs file says it (`f_bsize`), MAP_HUGETLB carries its log2 in
    // the MAP_HUGE_SHIFT bits (0: the default size), a VMM's `hugetlbfs` flag means the default.
    let mut page_size = BASE_PAGE;
    let mut hugetlb = false;
    if let Some((f, _)) = mapped_file {
        if let Some(size) = crate::sys::hugetlbfs_page_size(f) {
            page_size = size;
            hugetlb = true;
        }
    }
    if flags & libc::MAP_HUGETLB != 0 {
        hugetlb = true;
        let log2 = (flags >> libc::MAP_HUGE_SHIFT) & libc::MAP_HUGE_MASK;
        page_size = if log2 != 0 { 1usize << log2 } else { crate::sys::default_huge_page_size() };
    } else if !hugetlb && hugetlbfs == Some(true) {
        hugetlb = true;
        page_size = crate::sys::default_huge_page_size();
    }
    HostBacking { kind, page_size, hugetlb, file }
}
