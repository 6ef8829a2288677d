//! The Linux system calls of `sys`.

use super::{Advice, File, io};
use rustix::mm::Advice as RAdvice;
use rustix::thread::CpuSet;

/// `madvise(host, len, advice)`.
///
/// # Safety
///
/// `[host, host + len)` is mapped for the whole call. For [`Advice::DontNeed`] and
/// [`Advice::Remove`], which replace the bytes with zeros, the caller is allowed to change
/// them (no Rust reference covers them, and the caller owns the right to write them).
pub(crate) unsafe fn madvise(host: usize, len: usize, advice: Advice) -> io::Result<()> {
    let a = match advice {
        Advice::PopulateWrite => RAdvice::LinuxPopulateWrite,
        Advice::HugePage => RAdvice::LinuxHugepage,
        Advice::DontNeed => RAdvice::LinuxDontNeed,
        Advice::Remove => RAdvice::LinuxRemove,
    };
    // SAFETY: the caller's contract: the range is mapped, and the destructive advices may
    // change its bytes. The populate and huge-page advices do not change any byte.
    unsafe { rustix::mm::madvise(host as *mut core::ffi::c_void, len, a) }.map_err(io::Error::from)?;
    if advice != Advice::HugePage && !takes_effect(advice) {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "madvise succeeded without effect on a probe page (an emulator that ignores it, such as qemu-user before 8.1)",
        ));
    }
    Ok(())
}

/// Whether `advice` does what it says here, probed once per process on a page of its own:
/// qemu-user before 8.1 answers every `madvise` with success and does nothing, which would
/// leave "discarded" memory with its old bytes and "populated" memory not faulted in.
pub(crate) fn takes_effect(advice: Advice) -> bool {
    use std::sync::OnceLock;
    static PROBES: [OnceLock<bool>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    let k = match advice {
        Advice::PopulateWrite => 0,
        Advice::DontNeed => 1,
        Advice::Remove => 2,
        Advice::HugePage => return true,
    };
    *PROBES[k].get_or_init(|| probe(advice).unwrap_or(false))
}

/// Maps a page, applies `advice` and checks its effect (see [`takes_effect`]).
fn probe(advice: Advice) -> io::Result<bool> {
    use rustix::mm::{MapFlags, ProtFlags};
    let page = rustix::param::page_size();
    let flags = if advice == Advice::Remove { MapFlags::SHARED } else { MapFlags::PRIVATE };
    // SAFETY: a new anonymous mapping at an address the kernel chooses: it overlaps nothing.
    let p = unsafe {
        rustix::mm::mmap_anonymous(core::ptr::null_mut(), page, ProtFlags::READ | ProtFlags::WRITE, flags)
    }?
    .cast::<u8>();
    let ok = (|| -> io::Result<bool> {
        let a = match advice {
            Advice::PopulateWrite => RAdvice::LinuxPopulateWrite,
            Advice::DontNeed => RAdvice::LinuxDontNeed,
            _ => RAdvice::LinuxRemove,
        };
        if advice == Advice::PopulateWrite {
            // SAFETY: `p` is this function's own page; populating changes no byte.
            unsafe { rustix::mm::madvise(p.cast(), page, a) }?;
            return Ok(mincore(p as usize, page)?.first().is_some_and(|v| v & 1 == 1));
        }
        // SAFETY: `p` is this function's own mapped, writable page; no reference covers it.
        unsafe { p.write_volatile(0xa5) };
        // SAFETY: as above; the advice may replace the page's bytes with zeros.
        unsafe { rustix::mm::madvise(p.cast(), page, a) }?;
        // SAFETY: as above.
        Ok(unsafe { p.read_volatile() } == 0)
    })();
    // SAFETY: unmaps exactly the page mapped above, which nothing uses any more.
    let _ = unsafe { rustix::mm::munmap(p.cast(), page) };
    ok
}

/// Punches a hole of `len` bytes at `offset` in `file`, keeping its size.
pub(crate) fn punch_hole(file: &File, offset: u64, len: u64) -> io::Result<()> {
    use rustix::fs::FallocateFlags;
    rustix::fs::fallocate(file, FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE, offset, len)
        .map_err(io::Error::from)
}

/// A second open file description of `file` (`/proc/self/fd/N` opened read-only), whose
/// file offset [`data_extent_start`] may move without moving the caller's.
pub(crate) fn reopen_readonly(file: &File) -> io::Result<File> {
    use rustix::fs::{Mode, OFlags};
    use std::os::fd::AsRawFd;
    let path = format!("/proc/self/fd/{}", file.as_raw_fd());
    Ok(File::from(rustix::fs::open(path.as_str(), OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())?))
}

/// The first byte of data (a page present in the file, or swapped out) at or after `off`
/// and before `end` (`lseek(SEEK_DATA)`), or `None` if the rest up to `end` is a hole.
pub(crate) fn data_extent_start(file: &File, off: u64, end: u64) -> io::Result<Option<u64>> {
    match rustix::fs::seek(file, rustix::fs::SeekFrom::Data(off)) {
        Ok(s) if s < end => Ok(Some(s)),
        Ok(_) => Ok(None),
        // ENXIO: no data at or after `off`.
        Err(rustix::io::Errno::NXIO) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// `cachestat(2)` (Linux 6.5). Since Linux 5.1 every architecture numbers a new system
/// call alike from its own base (asm-generic 434 and 451, alpha 544 and 561, mips o32 4434
/// and 4451), so it is `pidfd_open`'s number, which libc has everywhere, plus 17.
const SYS_CACHESTAT: libc::c_long = libc::SYS_pidfd_open + 17;

/// Whether the `len` bytes of shmem file (memfd, tmpfs) `file` from `off` are a hole: no
/// page of them in the page cache and none swapped out. (Of a file on disk it says nothing:
/// data never read is in neither.) One `cachestat` call whatever the length. `Err` where
/// the kernel has no `cachestat` (before 6.5) or refuses the file (hugetlbfs).
pub(crate) fn is_hole(file: &File, off: u64, len: u64) -> io::Result<bool> {
    use std::os::fd::AsRawFd;
    #[repr(C)]
    struct Range {
        off: u64,
        len: u64,
    }
    #[repr(C)]
    #[derive(Default)]
    struct Stat {
        nr_cache: u64,
        nr_dirty: u64,
        nr_writeback: u64,
        nr_evicted: u64,
        nr_recently_evicted: u64,
    }
    if len == 0 {
        // The kernel reads a length of 0 as "to the end of the file".
        return Ok(true);
    }
    let range = Range { off, len };
    let mut stat = Stat::default();
    // SAFETY: `cachestat(fd, const struct cachestat_range *, struct cachestat *, flags)`:
    // `range` and `stat` are live `repr(C)` values of the kernel's layouts (two and five
    // `__u64`), read and written only during the call; the descriptor is `file`'s, open
    // for the whole call; flags must be 0.
    let r = unsafe {
        libc::syscall(SYS_CACHESTAT, file.as_raw_fd(), &raw const range, &raw mut stat, 0 as libc::c_uint)
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(stat.nr_cache == 0 && stat.nr_evicted == 0)
}

/// `HUGETLBFS_MAGIC` of `statfs(2)`.
const HUGETLBFS_MAGIC: i64 = 0x9584_58f6;

/// `TMPFS_MAGIC` of `statfs(2)`: tmpfs, shmem, memfd (without `MFD_HUGETLB`).
const TMPFS_MAGIC: i64 = 0x0102_1994;

/// What this crate needs to know of the file system of a mapped file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileSystem {
    /// A tmpfs (shmem: memfd, `/dev/shm`).
    pub(crate) tmpfs: bool,
    /// For hugetlbfs (a hugetlbfs file or a `MFD_HUGETLB` memfd): its huge page size, the
    /// file system's block size.
    pub(crate) hugetlbfs_page_size: Option<usize>,
}

/// The file system of `file` (`fstatfs`), if the kernel says.
pub(super) fn file_system(file: &File) -> Option<FileSystem> {
    let st = rustix::fs::fstatfs(file).ok()?;
    #[allow(clippy::unnecessary_cast, clippy::cast_lossless)] // `f_type`'s width differs by target
    let magic = st.f_type as i64;
    Some(FileSystem {
        tmpfs: magic == TMPFS_MAGIC,
        hugetlbfs_page_size: (magic == HUGETLBFS_MAGIC).then_some(st.f_bsize as usize),
    })
}

/// `STATX_MNT_ID_UNIQUE` (Linux 6.8): `statx` reports the mount's 64-bit id, which the
/// kernel never gives to another mount while it runs.
const STATX_MNT_ID_UNIQUE: u32 = 0x4000;

/// How many mounts [`FILE_SYSTEMS`] remembers; a process backs guest memory with files of
/// a few. Past it the oldest is forgotten (and asked again if seen again).
const FILE_SYSTEMS_MAX: usize = 32;

/// The file system of each mount seen, by unique mount id: a mount's file system (its type,
/// and hugetlbfs's page size, fixed when it is mounted) never changes, and its id is never
/// reused, so an entry is never stale.
pub(super) static FILE_SYSTEMS: std::sync::Mutex<Vec<(u64, FileSystem)>> = std::sync::Mutex::new(Vec::new());

/// The size of `file` and its file system, as far as the kernel says: one `statx` for the
/// size (which can change at any time, so it is asked every call) and the unique mount id,
/// and `fstatfs` only for a mount not seen before ([`FILE_SYSTEMS`]); on a kernel without
/// unique mount ids (before 6.8) or `statx`, `fstat` and `fstatfs` every call.
pub(crate) fn file_facts(file: &File) -> (Option<u64>, Option<FileSystem>) {
    use rustix::fs::{AtFlags, StatxFlags};
    let mask = StatxFlags::SIZE | StatxFlags::from_bits_retain(STATX_MNT_ID_UNIQUE);
    let Ok(st) = rustix::fs::statx(file, c"", AtFlags::EMPTY_PATH, mask) else {
        return (rustix::fs::fstat(file).ok().map(|st| st.st_size as u64), file_system(file));
    };
    let size = (st.stx_mask & StatxFlags::SIZE.bits() != 0).then_some(st.stx_size);
    // Mount id 0 is no mount's: an emulator that reports the mask without the field
    // (qemu-user before 8) would make every file one mount.
    if st.stx_mask & STATX_MNT_ID_UNIQUE == 0 || st.stx_mnt_id == 0 {
        return (size, file_system(file));
    }
    let id = st.stx_mnt_id;
    // Poisoned only by a panic inside the few lines below, which leave the list whole.
    let known = || FILE_SYSTEMS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(&(_, fs)) = known().iter().find(|(m, _)| *m == id) {
        return (size, Some(fs));
    }
    let fs = file_system(file);
    if let Some(fs) = fs {
        let mut known = known();
        if !known.iter().any(|(m, _)| *m == id) {
            if known.len() == FILE_SYSTEMS_MAX {
                known.remove(0);
            }
            known.push((id, fs));
        }
    }
    (size, fs)
}

/// `Hugepagesize` of `/proc/meminfo` (2 MiB if it cannot be read), read once per process.
pub(crate) fn default_huge_page_size() -> usize {
    static SIZE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *SIZE.get_or_init(|| {
        std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                m.lines().find_map(|l| {
                    let kib = l.strip_prefix("Hugepagesize:")?.trim().strip_suffix("kB")?.trim();
                    kib.parse::<usize>().ok().map(|k| k << 10)
                })
            })
            .unwrap_or(2 << 20)
    })
}

/// `move_pages(0, n, pages, NULL, status, 0)`: the node of each page (`>= 0`), or a
/// negative errno (`-ENOENT`: not present; `-EFAULT`: not mapped).
pub(crate) fn move_pages_status(pages: &[usize]) -> io::Result<Vec<i32>> {
    let mut status = vec![0i32; pages.len()];
    if pages.is_empty() {
        return Ok(status);
    }
    // SAFETY: `move_pages` with `nodes == NULL` only reads `pages` (`count` pointers) and
    // writes `status` (`count` ints); both are live buffers of exactly `count` elements
    // (`usize` has the layout of a pointer). It moves nothing and dereferences none of
    // the page addresses in this process (the kernel looks them up in the page tables).
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            0 as libc::c_long,
            pages.len() as libc::c_ulong,
            pages.as_ptr(),
            core::ptr::null::<libc::c_int>(),
            status.as_mut_ptr(),
            0 as libc::c_int,
        )
    };
    if r < 0 { Err(io::Error::last_os_error()) } else { Ok(status) }
}

/// Bits of the node masks passed to `get_mempolicy` (the kernel wants at least
/// `nr_node_ids`; 1024 is `MAX_NUMNODES` of the largest configurations).
const MASK_BITS: usize = 1024;

/// `get_mempolicy(&mode, mask, MASK_BITS, addr, flags)`: the mode and the node mask of the
/// policy of the mapping at `addr` (`flags = MPOL_F_ADDR`) or of the calling thread
/// (`addr = 0`, `flags = 0`).
fn get_mempolicy(addr: usize, flags: libc::c_ulong) -> io::Result<(i32, Vec<u32>)> {
    let mut mode: libc::c_int = 0;
    let mut mask = [0 as libc::c_ulong; MASK_BITS / libc::c_ulong::BITS as usize];
    // SAFETY: the kernel writes one int to `mode` and at most `MASK_BITS` bits (rounded up
    // to whole longs: exactly `mask`'s size) to `mask`; `addr` is only looked up in this
    // process's mappings (an unmapped address is EFAULT), never dereferenced here.
    let r = unsafe {
        libc::syscall(
            libc::SYS_get_mempolicy,
            &mut mode as *mut libc::c_int,
            mask.as_mut_ptr(),
            MASK_BITS as libc::c_ulong,
            addr as *mut libc::c_void,
            flags,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    let bits = libc::c_ulong::BITS as usize;
    let nodes = (0..MASK_BITS).filter(|&n| mask[n / bits] >> (n % bits) & 1 == 1).map(|n| n as u32).collect();
    Ok((mode, nodes))
}

/// `MPOL_F_ADDR`.
const MPOL_F_ADDR: libc::c_ulong = 1 << 1;

/// The node a policy places new pages on, when it names exactly one: `MPOL_PREFERRED`
/// (1), `MPOL_BIND` (2) or `MPOL_PREFERRED_MANY` (5) with a single node.
fn single_node(mode: i32, nodes: &[u32]) -> Option<u32> {
    (matches!(mode & 0xff, 1 | 2 | 5) && nodes.len() == 1).then(|| nodes[0])
}

/// The node the memory policy of the mapping at `addr` (or, for `MPOL_DEFAULT`, of the
/// calling thread) places new pages on, when it names exactly one.
pub(crate) fn policy_node(addr: usize) -> Option<u32> {
    let (mode, nodes) = get_mempolicy(addr, MPOL_F_ADDR).ok()?;
    if mode & 0xff == 0 {
        let (mode, nodes) = get_mempolicy(0, 0).ok()?;
        return single_node(mode, &nodes);
    }
    single_node(mode, &nodes)
}

/// `mincore(host, len)`: one byte per base page of the host, bit 0 set where the page is
/// resident.
pub(crate) fn mincore(host: usize, len: usize) -> io::Result<Vec<u8>> {
    let mut vec = vec![0u8; len.div_ceil(rustix::param::page_size())];
    mincore_into(host, len, &mut vec)?;
    Ok(vec)
}

/// [`mincore`] into `vec`, which must hold one byte per base page of the range.
pub(crate) fn mincore_into(host: usize, len: usize, vec: &mut [u8]) -> io::Result<()> {
    if vec.len() < len.div_ceil(rustix::param::page_size()) {
        return Err(io::ErrorKind::InvalidInput.into());
    }
    // SAFETY: `mincore` reads no byte of `[host, host + len)` (it looks the range up in the
    // page tables: an unmapped page is ENOMEM) and writes one byte per base page to `vec`,
    // which holds at least `ceil(len / page)` bytes (checked above).
    let r = unsafe { libc::mincore(host as *mut libc::c_void, len, vec.as_mut_ptr()) };
    if r != 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

/// `struct page_region` of `PAGEMAP_SCAN`: pages `[start, end)` of equal categories.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct PageRegion {
    start: u64,
    end: u64,
    categories: u64,
}

/// `struct pm_scan_arg` of `PAGEMAP_SCAN` (`include/uapi/linux/fs.h`).
#[repr(C)]
#[derive(Debug, Default)]
struct PmScanArg {
    size: u64,
    flags: u64,
    start: u64,
    end: u64,
    walk_end: u64,
    vec: u64,
    vec_len: u64,
    max_pages: u64,
    category_inverted: u64,
    category_mask: u64,
    category_anyof_mask: u64,
    return_mask: u64,
}

/// `PAGEMAP_SCAN`: `_IOWR('f', 16, struct pm_scan_arg)`.
const PAGEMAP_SCAN: u64 = (3 << 30) | ((size_of::<PmScanArg>() as u64) << 16) | (0x66 << 8) | 16;
/// `PAGE_IS_PRESENT`: the page is mapped by a present page-table entry.
const PAGE_IS_PRESENT: u64 = 1 << 3;
/// `PAGE_IS_SWAPPED`: a non-present entry that is not empty (swapped out, a migration entry).
const PAGE_IS_SWAPPED: u64 = 1 << 4;

/// Regions asked of one `PAGEMAP_SCAN` call (on the stack).
const SCAN_REGIONS: usize = 64;

/// What [`pagemap_runs`] reports for a run of pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mapped {
    /// Mapped by present page-table entries: resident.
    Present,
    /// A non-present entry that is not empty: swapped out, or being migrated.
    Swapped,
}

/// Calls `f(x, y, what)` for each run of this process's pages in `[start, end)` that has a
/// page-table entry, present or not, in address order, from one `PAGEMAP_SCAN` call per 64
/// runs (Linux 6.7). Pages without one are skipped: never faulted in, or discarded. `Err`
/// of kind [`io::ErrorKind::Unsupported`] before `f` is called where the kernel has no
/// `PAGEMAP_SCAN` (or an emulator passes it on wrong, see [`pagemap_scan_works`]).
///
/// Unlike `mincore`, this asks the page tables only: a shared page in the page cache but not
/// mapped here is not reported, so it tells residency only for private anonymous memory.
pub(crate) fn pagemap_runs<E: From<io::Error>>(
    start: usize,
    end: usize,
    f: &mut dyn FnMut(usize, usize, Mapped) -> Result<(), E>,
) -> Result<(), E> {
    let Some(file) = pagemap().filter(|_| pagemap_scan_works()) else {
        return Err(io::Error::from(io::ErrorKind::Unsupported).into());
    };
    scan(file, start, end, 0, f)
}

/// The first page of `[start, end)` with a page-table entry, present or not, and what it
/// is; `None` if no page of the range has one. One `PAGEMAP_SCAN` call that stops at that
/// page (it skips whole empty page tables on the way). Errors as [`pagemap_runs`].
pub(crate) fn pagemap_first(start: usize, end: usize) -> io::Result<Option<(usize, Mapped)>> {
    let Some(file) = pagemap().filter(|_| pagemap_scan_works()) else {
        return Err(io::ErrorKind::Unsupported.into());
    };
    let mut first = None;
    let mut one = |x: usize, _: usize, what: Mapped| -> io::Result<()> {
        first = first.or(Some((x, what)));
        Ok(())
    };
    scan(file, start, end, 1, &mut one)?;
    Ok(first)
}

/// The `PAGEMAP_SCAN` loop of [`pagemap_runs`] on `file`, the process's open pagemap: up
/// to `max_pages` pages reported, in one call (0: every page, in as many calls as needed).
fn scan<E: From<io::Error>>(
    file: &File,
    start: usize,
    end: usize,
    max_pages: u64,
    f: &mut dyn FnMut(usize, usize, Mapped) -> Result<(), E>,
) -> Result<(), E> {
    use std::os::fd::AsRawFd;
    let mut regions = [PageRegion::default(); SCAN_REGIONS];
    let mut at = start;
    while at < end {
        let mut arg = PmScanArg {
            size: size_of::<PmScanArg>() as u64,
            start: at as u64,
            end: end as u64,
            vec: regions.as_mut_ptr() as u64,
            vec_len: SCAN_REGIONS as u64,
            max_pages,
            category_anyof_mask: PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
            return_mask: PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
            ..PmScanArg::default()
        };
        // SAFETY: `PAGEMAP_SCAN` reads `arg` (its `size` is this struct's, the layout of
        // `struct pm_scan_arg`), reads no byte of `[at, end)` (it walks this process's page
        // tables: an unmapped address is an error, not a fault), writes at most `vec_len`
        // regions to `vec` (`regions`, that long and alive for the call) and writes
        // `arg.walk_end`.
        let n = unsafe { libc::ioctl(file.as_raw_fd(), PAGEMAP_SCAN as _, &raw mut arg) };
        let n = usize::try_from(n).map_err(|_| io::Error::last_os_error())?;
        for r in &regions[..n.min(SCAN_REGIONS)] {
            let what = if r.categories & PAGE_IS_PRESENT != 0 { Mapped::Present } else { Mapped::Swapped };
            f(r.start as usize, r.end as usize, what)?;
        }
        if max_pages != 0 {
            return Ok(());
        }
        let walked = usize::try_from(arg.walk_end).unwrap_or(end);
        if walked <= at {
            // The kernel walked nothing: a bug of its or an emulator's; say so, not loop.
            return Err(io::Error::other("PAGEMAP_SCAN made no progress").into());
        }
        at = walked;
    }
    Ok(())
}

/// The process's `/proc/self/pagemap`, opened once (`None` where it cannot be).
fn pagemap() -> Option<&'static File> {
    use std::sync::OnceLock;
    static PAGEMAP: OnceLock<Option<File>> = OnceLock::new();
    PAGEMAP.get_or_init(|| File::open("/proc/self/pagemap").ok()).as_ref()
}

/// Whether `PAGEMAP_SCAN` answers right here, probed once per process on two pages of its
/// own, the first written and the second not: it must report the first as present and
/// nothing else. A kernel before 6.7 refuses the call (`ENOTTY`); qemu-user does not
/// emulate it and its guest addresses need not be the host's.
fn pagemap_scan_works() -> bool {
    use std::sync::OnceLock;
    static WORKS: OnceLock<bool> = OnceLock::new();
    *WORKS.get_or_init(|| pagemap().is_some_and(|f| probe_scan(f).unwrap_or(false)))
}

/// The probe of [`pagemap_scan_works`].
fn probe_scan(file: &File) -> io::Result<bool> {
    use rustix::mm::{MapFlags, ProtFlags};
    let page = rustix::param::page_size();
    // SAFETY: a new anonymous mapping at an address the kernel chooses: it overlaps nothing.
    let p = unsafe {
        rustix::mm::mmap_anonymous(
            core::ptr::null_mut(),
            2 * page,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::PRIVATE,
        )
    }?
    .cast::<u8>();
    // SAFETY: `p` is this function's own mapped, writable page; no reference covers it.
    unsafe { p.write_volatile(0xa5) };
    let mut seen = Vec::new();
    let scanned = scan(file, p as usize, p as usize + 2 * page, 0, &mut |x, y, what| -> io::Result<()> {
        seen.push((x, y, what));
        Ok(())
    });
    // SAFETY: unmaps exactly the two pages mapped above, which nothing uses any more.
    let _ = unsafe { rustix::mm::munmap(p.cast(), 2 * page) };
    scanned?;
    Ok(seen == [(p as usize, p as usize + page, Mapped::Present)])
}

/// The host's base page size.
pub(crate) fn base_page() -> usize {
    rustix::param::page_size()
}

/// The CPUs the calling thread may run on.
pub(crate) fn current_affinity() -> io::Result<Vec<usize>> {
    let set = rustix::thread::sched_getaffinity(None).map_err(io::Error::from)?;
    Ok((0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect())
}

/// Restricts the calling thread to `cpus`.
pub(crate) fn set_affinity(cpus: &[usize]) -> io::Result<()> {
    let mut set = CpuSet::new();
    for &c in cpus.iter().filter(|&&c| c < CpuSet::MAX_CPU) {
        set.set(c);
    }
    rustix::thread::sched_setaffinity(None, &set).map_err(io::Error::from)
}

/// The CPU the calling thread runs on.
pub(crate) fn current_cpu() -> Option<usize> {
    Some(rustix::thread::sched_getcpu())
}
