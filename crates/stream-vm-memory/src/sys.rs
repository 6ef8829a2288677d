//! The host system calls (`rustix`, and `libc` for what it does not wrap). Off Linux every call
//! reports [`std::io::ErrorKind::Unsupported`] and the callers take their portable paths.

use std::fs::File;
use std::io;

/// One `madvise` advice this crate uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Advice {
    PopulateWrite,
    HugePage,
    DontNeed,
    Remove,
}

#[cfg(target_os = "linux")]
mod linux;

#[cfg(target_os = "linux")]
pub(crate) use linux::*;

#[cfg(not(target_os = "linux"))]
mod portable {
    use super::{Advice, File, io};

    fn unsupported<T>() -> io::Result<T> {
        Err(io::ErrorKind::Unsupported.into())
    }

    /// No `madvise` advice off Linux.
    ///
    /// # Safety
    ///
    /// None needed (nothing is done); `unsafe` to match the Linux signature.
    pub(crate) unsafe fn madvise(_host: usize, _len: usize, _advice: Advice) -> io::Result<()> {
        unsupported()
    }
    pub(crate) fn punch_hole(_file: &File, _offset: u64, _len: u64) -> io::Result<()> {
        unsupported()
    }
    pub(crate) fn move_pages_status(_pages: &[usize]) -> io::Result<Vec<i32>> {
        unsupported()
    }
    pub(crate) fn policy_node(_addr: usize) -> Option<u32> {
        None
    }
    pub(crate) fn current_affinity() -> io::Result<Vec<usize>> {
        unsupported()
    }
    pub(crate) fn set_affinity(_cpus: &[usize]) -> io::Result<()> {
        unsupported()
    }
    pub(crate) fn current_cpu() -> Option<usize> {
        None
    }
    pub(crate) fn mincore(_host: usize, _len: usize) -> io::Result<Vec<u8>> {
        unsupported()
    }
    pub(crate) fn mincore_into(_host: usize, _len: usize, _vec: &mut [u8]) -> io::Result<()> {
        unsupported()
    }
    pub(crate) fn base_page() -> usize {
        4096
    }
    /// What `pagemap_runs` reports for a run of pages (never, off Linux).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(crate) enum Mapped {
        /// Resident.
        Present,
        /// Swapped out.
        Swapped,
    }
    pub(crate) fn pagemap_runs<E: From<io::Error>>(
        _start: usize,
        _end: usize,
        _f: &mut dyn FnMut(usize, usize, Mapped) -> Result<(), E>,
    ) -> Result<(), E> {
        Err(io::Error::from(io::ErrorKind::Unsupported).into())
    }
    pub(crate) fn pagemap_first(_start: usize, _end: usize) -> io::Result<Option<(usize, Mapped)>> {
        unsupported()
    }
    pub(crate) fn takes_effect(_advice: Advice) -> bool {
        false
    }
    pub(crate) fn reopen_readonly(_file: &File) -> io::Result<File> {
        unsupported()
    }
    pub(crate) fn data_extent_start(_file: &File, _off: u64, _end: u64) -> io::Result<Option<u64>> {
        unsupported()
    }
    pub(crate) fn is_hole(_file: &File, _off: u64, _len: u64) -> io::Result<bool> {
        unsupported()
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) use portable::*;

/// `-ENOENT` in a `move_pages` status: the page is not present.
#[cfg(target_os = "linux")]
pub(crate) const STATUS_NOT_PRESENT: i32 = -libc::ENOENT;
#[cfg(not(target_os = "linux"))]
pub(crate) const STATUS_NOT_PRESENT: i32 = -2;

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::Advice;
    use super::linux::*;
    use std::fs::File;
    use std::io;

    /// `PAGEMAP_SCAN` reports the written pages of a private mapping as present runs, in
    /// order, and nothing for the pages never touched or discarded (Linux 6.7 and later; on
    /// an older kernel the scan is refused as unsupported, before any run is reported).
    #[test]
    fn the_page_tables_report_present_runs_only() {
        use rustix::mm::{MapFlags, ProtFlags};
        let page = base_page();
        // SAFETY: a new private mapping of 8 pages this test owns.
        let p = unsafe {
            rustix::mm::mmap_anonymous(
                core::ptr::null_mut(),
                8 * page,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::PRIVATE,
            )
        }
        .unwrap()
        .cast::<u8>();
        // 4 KiB pages only (a transparent huge page would make every page present).
        // SAFETY: the mapping above; the advice changes no byte.
        let _ = unsafe { rustix::mm::madvise(p.cast(), 8 * page, rustix::mm::Advice::LinuxNoHugepage) };
        for k in [1, 2, 3, 6] {
            // SAFETY: page `k` of the 8 mapped above.
            unsafe { p.add(k * page).write_volatile(1) };
        }
        // SAFETY: page 3 of the mapping, which no reference covers.
        unsafe { madvise(p as usize + 3 * page, page, Advice::DontNeed) }.unwrap();
        let mut runs = Vec::new();
        let scanned = pagemap_runs(p as usize, p as usize + 8 * page, &mut |x, y, what| -> io::Result<()> {
            runs.push(((x - p as usize) / page, (y - p as usize) / page, what));
            Ok(())
        });
        // SAFETY: unmaps the test's own mapping.
        unsafe { rustix::mm::munmap(p.cast(), 8 * page) }.unwrap();
        match scanned {
            Ok(()) => assert_eq!(runs, [(1, 3, Mapped::Present), (6, 7, Mapped::Present)]),
            Err(e) => {
                assert_eq!(e.kind(), io::ErrorKind::Unsupported, "{e}");
                assert!(runs.is_empty());
                eprintln!("skipped: this kernel (or emulator) has no PAGEMAP_SCAN");
            }
        }
    }

    /// `cachestat` tells a memfd's holes from its data, swapped out or not, without moving the
    /// file offset (Linux 6.5 and later; before it, or under an emulator that does not pass
    /// the call on, an error).
    #[test]
    fn cachestat_tells_holes_from_data() {
        use std::io::Seek;
        use std::os::unix::fs::FileExt;
        let mut f = File::from(rustix::fs::memfd_create("holes", rustix::fs::MemfdFlags::CLOEXEC).unwrap());
        f.set_len(64 << 12).unwrap();
        f.write_all_at(&[7; 4096], 5 << 12).unwrap();
        f.seek(io::SeekFrom::Start(0x321)).unwrap();
        match is_hole(&f, 0, 5 << 12) {
            Ok(hole) => {
                assert!(hole);
                assert!(!is_hole(&f, 0, 6 << 12).unwrap());
                assert!(!is_hole(&f, 5 << 12, 1).unwrap());
                assert!(is_hole(&f, 6 << 12, 58 << 12).unwrap());
                assert!(is_hole(&f, 1 << 30, 0).unwrap(), "an empty range");
                assert_eq!(f.stream_position().unwrap(), 0x321);
            }
            Err(e) => eprintln!("skipped: no cachestat here: {e}"),
        }
    }

    /// A memfd's file system is found once per mount and remembered; its size is asked every
    /// time, so a file that shrinks (and would raise SIGBUS past its end) is seen shrunk.
    #[test]
    fn the_file_system_is_remembered_and_the_size_never_is() {
        let memfd =
            |name| File::from(rustix::fs::memfd_create(name, rustix::fs::MemfdFlags::CLOEXEC).unwrap());
        let (a, b) = (memfd("a"), memfd("b"));
        a.set_len(1 << 20).unwrap();
        let fs = FileSystem { tmpfs: true, hugetlbfs_page_size: None };
        let tmpfs = Some(fs);
        assert_eq!(file_facts(&a), (Some(1 << 20), tmpfs));
        a.set_len(4096).unwrap();
        assert_eq!(file_facts(&a), (Some(4096), tmpfs));
        assert_eq!(file_facts(&b), (Some(0), tmpfs));
        // Where the kernel has unique mount ids, the two memfds' one mount is remembered once.
        let mask = rustix::fs::StatxFlags::from_bits_retain(0x4000);
        let st = rustix::fs::statx(&a, c"", rustix::fs::AtFlags::EMPTY_PATH, mask).unwrap();
        if st.stx_mask & 0x4000 != 0 && st.stx_mnt_id != 0 {
            let known = FILE_SYSTEMS.lock().unwrap();
            assert_eq!(known.iter().filter(|(m, _)| *m == st.stx_mnt_id).count(), 1, "{known:?}");
            assert!(known.contains(&(st.stx_mnt_id, fs)));
        } else {
            eprintln!(
                "no unique mount id here (an old kernel, an emulator): the file system is asked every call"
            );
        }
        // A file of another file system is not taken for the memfd's.
        let dir = std::env::temp_dir();
        let other = File::open(&dir).unwrap();
        let (_, fs) = file_facts(&other);
        assert_eq!(fs, file_system(&other), "{}", dir.display());
    }
}
