//! Reset: in place and by discard on every backing this machine has (private and shared
//! anonymous, memfd, a private file, hugetlbfs where there are huge pages), the Auto rule's
//! residency, partial pages at the ends, the dirty bitmap page by page, errors before any
//! write.

mod common;

use std::os::unix::fs::FileExt;

use common::*;
use stream_par::Threads;
use stream_vm_memory::{
    BackingKind, Error, HostOp, Placement, RegionBacking, ResetPath, ResetPolicy, ResetReport, Workers,
    reset, reset_all, reset_path,
};
use vm_memory::{Bytes, GuestAddress, GuestMemoryBackend, GuestMemoryMmap};

const MIB: usize = 1 << 20;

fn workers() -> Workers {
    Workers::new(Threads::Fixed(2)).with_placement(Placement::Unpinned)
}

/// A forced discard's result, or `None` (with the reason printed) where the kernel or an
/// emulator cannot discard: qemu-user before 8.1 ignores `madvise`, which the crate detects and
/// reports as [`Error::Os`].
fn discarded(r: Result<ResetReport, Error>) -> Option<ResetReport> {
    match r {
        Ok(r) => Some(r),
        Err(Error::Os { op: op @ (HostOp::DontNeed | HostOp::Remove), source, .. })
            if source.kind() == std::io::ErrorKind::Unsupported =>
        {
            println!("skipped the discard checks: {} is not available here: {source}", op.name());
            None
        }
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn the_rule_is_data() {
    assert_eq!(reset_path(BackingKind::PrivateAnonymous, true), ResetPath::InPlace);
    assert_eq!(reset_path(BackingKind::PrivateAnonymous, false), ResetPath::Discard);
    assert_eq!(reset_path(BackingKind::SharedFile, false), ResetPath::Discard);
    assert_eq!(reset_path(BackingKind::PrivateFile, false), ResetPath::InPlace);
    assert_eq!(reset_path(BackingKind::Unknown, false), ResetPath::InPlace);
}

#[test]
fn in_place_zeroes_and_keeps_pages_resident() {
    let mem = anon(&[(0, 10 * MIB), (10 << 20, 10 * MIB + 0x321)], 0xa5);
    let lay = layout(&mem);
    let (addr, len) = (0x123u64, 20 * MIB);
    let r = reset(&mem, GuestAddress(addr), len, ResetPolicy::InPlace, &workers()).unwrap();
    assert_eq!((r.in_place, r.discarded), (len as u64, 0));
    let mut model = vec![0xa5; bytes(&mem).len()];
    model_apply(&mut model, &lay, |a| (addr..addr + len as u64).contains(&a).then_some(0));
    assert!(bytes(&mem) == model);
    assert_eq!(dirty(&mem), dirty_model(&lay, &[(addr, len as u64)]));
    assert!(resident_guest(&mem, 0, 10 * MIB).iter().all(|&r| r));
}

#[test]
fn discard_keeps_the_bytes_around_the_range_and_releases_whole_pages() {
    let mem = anon(&[(0, 16 * MIB)], 0xa5);
    let lay = layout(&mem);
    let (addr, len) = (0x1800u64, 12 * MIB + 0x900);
    let Some(r) = discarded(reset(
        &mem,
        GuestAddress(addr),
        len,
        ResetPolicy::Discard { repopulate: false },
        &workers(),
    )) else {
        return;
    };
    // Pages 1 and the last partial one are zeroed in place; the pages between are discarded.
    assert_eq!(r.in_place, (0x800 + 0x100) as u64, "{r:?}");
    assert_eq!(r.discarded, len as u64 - 0x900);
    let mut model = vec![0xa5; 16 * MIB];
    model_apply(&mut model, &lay, |a| (addr..addr + len as u64).contains(&a).then_some(0));
    assert!(bytes(&mem) == model, "discard changed bytes outside the range or left some inside");
    assert_eq!(dirty(&mem), dirty_model(&lay, &[(addr, len as u64)]), "a discarded page changed: dirty");
    let res = resident_guest(&mem, 0, 16 * MIB);
    assert!(res[0] && res[1], "the page with the range's first bytes stays");
    // (bytes() above read the discarded pages back: they were faulted in again as zero pages,
    // so residency is checked on a second discard that nothing reads.)
    let mem2 = anon(&[(0, 16 * MIB)], 0xa5);
    discarded(reset(&mem2, GuestAddress(addr), len, ResetPolicy::Discard { repopulate: false }, &workers()))
        .unwrap();
    let res = resident_guest(&mem2, 0, 16 * MIB);
    assert!(res[2..(addr as usize + len) / 4096].iter().all(|&r| !r), "discarded pages still resident");
    assert!(res[1] && res[(addr as usize + len) / 4096], "partial pages stay");
}

#[test]
fn discard_with_repopulate_leaves_zero_resident_pages() {
    let mem = anon(&[(0, 16 * MIB)], 0x5a);
    let Some(r) = discarded(reset(
        &mem,
        GuestAddress(0),
        16 * MIB,
        ResetPolicy::Discard { repopulate: true },
        &workers(),
    )) else {
        return;
    };
    assert_eq!((r.discarded, r.repopulated), (16 * MIB as u64, 16 * MIB as u64));
    assert!(resident_guest(&mem, 0, 16 * MIB).iter().all(|&r| r));
    assert!(bytes(&mem).iter().all(|&b| b == 0));
    assert_eq!(dirty(&mem).len(), 16 * MIB / 4096);
}

#[test]
fn auto_zeroes_resident_pages_and_discards_the_others() {
    // 16 MiB never touched, then the first 6 MiB + 0x10 written: resident and non-zero.
    let len = 16 * MIB;
    let mem = Mem::from_ranges(&[(GuestAddress(0), len)]).unwrap();
    mem.write_slice(&vec![0x42; 6 * MIB + 0x10], GuestAddress(0)).unwrap();
    vm_memory::MmapRegion::bitmap(mem.iter().next().unwrap()).reset();
    let r = reset(&mem, GuestAddress(0), len, ResetPolicy::Auto, &workers()).unwrap();
    let res = resident_guest(&mem, 0, len);
    // The written pages stay resident (zeroed in place); the rest stays out of memory.
    let written_pages = (6 * MIB + 0x10).div_ceil(4096);
    let transparent_huge = res[written_pages..].iter().all(|&r| r);
    assert!(res[..written_pages].iter().all(|&r| r));
    if !transparent_huge {
        assert!(res[written_pages..].iter().all(|&r| !r), "Auto faulted in pages that were not resident");
        assert_eq!(r.in_place, (written_pages * 4096) as u64, "{r:?}");
        assert_eq!(r.in_place + r.discarded, len as u64);
    }
    assert_eq!(dirty(&mem).len(), len / 4096, "every page of the range is dirty");
    assert!(bytes(&mem).iter().all(|&b| b == 0));
}

/// Scattered resident pages of private anonymous memory, 4 KiB pages only: Auto zeroes exactly
/// those in place and leaves every other page out of memory (the page tables are asked, by
/// `PAGEMAP_SCAN` where the kernel has it, else `mincore`), across both workers' parts and
/// two adjacent regions.
#[test]
fn auto_finds_scattered_resident_pages_of_private_memory() {
    let lay = [(0u64, 9 * MIB as u64), (9 * MIB as u64, 7 * MIB as u64)];
    let mem = Mem::from_ranges(&lay.iter().map(|&(a, n)| (GuestAddress(a), n as usize)).collect::<Vec<_>>())
        .unwrap();
    for (a, n) in lay {
        // SAFETY: the region's own mapping; the advice changes no byte.
        let _ =
            unsafe { libc::madvise(host(&mem, a) as *mut libc::c_void, n as usize, libc::MADV_NOHUGEPAGE) };
    }
    // Pages written (resident): single pages, runs, the first and last of each region.
    let written: Vec<u64> = [0u64, 1, 2, 100, 1000, 2303, 2304, 2305, 2308, 4095].to_vec();
    let guest_of = |k: u64| k * 4096;
    for &k in &written {
        mem.write_slice(&[0x5c; 7], GuestAddress(guest_of(k) + 9)).unwrap();
    }
    for r in mem.iter() {
        vm_memory::MmapRegion::bitmap(r).reset();
    }
    let len = 16 * MIB;
    let r = reset(&mem, GuestAddress(0), len, ResetPolicy::Auto, &workers()).unwrap();
    assert_eq!(r.in_place, written.len() as u64 * 4096, "{r:?}");
    assert_eq!(r.in_place + r.discarded, (16 * MIB) as u64, "{r:?}");
    for (a, n) in lay {
        let res = resident_guest(&mem, a, n as usize);
        for (i, &on) in res.iter().enumerate() {
            let k = a / 4096 + i as u64;
            assert_eq!(on, written.contains(&k), "page {k}: resident {on}");
        }
    }
    assert_eq!(dirty(&mem), dirty_model(&lay, &[(0, len as u64)]));
    assert!(bytes(&mem).iter().all(|&b| b == 0));
}

#[test]
fn memfd_discard_punches_a_hole_in_the_file() {
    if shmem_unchecked() {
        return;
    }
    let len = 8 * MIB;
    let file = memfd(len, false).unwrap();
    let reader = file.try_clone().unwrap();
    let region = file_region(file, 0, len, libc::MAP_SHARED, 0x1000_0000);
    assert_eq!(region.host_backing().kind, BackingKind::SharedFile);
    let mem = GuestMemoryMmap::from_regions(vec![region]).unwrap();
    mem.write_slice(&vec![0x99; len], GuestAddress(0x1000_0000)).unwrap();
    let (addr, n) = (0x1000_0000u64 + 0x1001, 6 * MIB);
    let r =
        reset(&mem, GuestAddress(addr), n, ResetPolicy::Discard { repopulate: false }, &workers()).unwrap();
    assert!(r.discarded > 0);
    // The file itself (read through another descriptor) has zeros there now.
    let mut back = vec![0u8; len];
    reader.read_exact_at(&mut back, 0).unwrap();
    for (i, &b) in back.iter().enumerate() {
        let inside = (0x1001..0x1001 + n).contains(&i);
        assert_eq!(b, if inside { 0 } else { 0x99 }, "file byte {i:#x}");
    }
    // Auto on resident memfd memory: in place.
    let r = reset(&mem, GuestAddress(0x1000_0000), len, ResetPolicy::Auto, &workers()).unwrap();
    assert!(r.in_place > 0, "{r:?}");
    assert!(bytes(&mem).iter().all(|&b| b == 0));
}

#[test]
fn memfd_auto_keeps_the_files_holes_and_the_callers_offset() {
    if shmem_unchecked() {
        return;
    }
    use std::io::{Seek, SeekFrom};
    let len = 8 * MIB;
    let file = memfd(len, false).unwrap();
    let mut probe = file.try_clone().unwrap();
    probe.seek(SeekFrom::Start(0x123)).unwrap();
    let mem = GuestMemoryMmap::from_regions(vec![file_region(file, 0, len, libc::MAP_SHARED, 0)]).unwrap();
    // The first 3 MiB + 5 bytes written: data; the rest of the file is a hole.
    mem.write_slice(&vec![0x44; 3 * MIB + 5], GuestAddress(0)).unwrap();
    let r = reset(&mem, GuestAddress(0), len, ResetPolicy::Auto, &workers()).unwrap();
    assert_eq!(r.in_place, (3 * MIB + 4096) as u64, "{r:?}");
    assert_eq!(r.discarded, (len - 3 * MIB - 4096) as u64);
    // The written pages stay in the file (zeroed), the hole stays a hole (checked before
    // reading the mapping back: a read fault of shmem allocates the page).
    let data = rustix::fs::seek(&probe, rustix::fs::SeekFrom::Data(0)).unwrap();
    let hole = rustix::fs::seek(&probe, rustix::fs::SeekFrom::Hole(0)).unwrap();
    assert_eq!((data, hole), (0, (3 * MIB + 4096) as u64));
    assert!(bytes(&mem).iter().all(|&b| b == 0));
    assert_eq!(dirty(&mem).len(), len / 4096);
    // (The probe's own seeks moved the offset; the reset did not: it reads through a
    // description of its own. Checked on a fresh clone of the caller's description.)
    let file = memfd(len, false).unwrap();
    let mut caller = file.try_clone().unwrap();
    caller.seek(SeekFrom::Start(0x777)).unwrap();
    let mem = GuestMemoryMmap::from_regions(vec![file_region(file, 0, len, libc::MAP_SHARED, 0)]).unwrap();
    mem.write_slice(&[1; 100], GuestAddress(5 * MIB as u64)).unwrap();
    reset(&mem, GuestAddress(0), len, ResetPolicy::Auto, &workers()).unwrap();
    assert_eq!(caller.stream_position().unwrap(), 0x777);
}

/// Below 16 MiB of a memfd, pages with no page-table entry here are asked of the page cache
/// (`cachestat`): a hole is left alone, data written through the file and never mapped here
/// (or a kernel without `cachestat`, which `mincore` answers) is zeroed in place, at 512 KiB
/// (every page scanned) and 4 MiB (the scan stops at the first entry).
#[test]
fn memfd_auto_tells_holes_from_data_not_mapped_here() {
    if shmem_unchecked() {
        return;
    }
    for len in [512 << 10, 4 * MIB] {
        let file = memfd(len, false).unwrap();
        let writer = file.try_clone().unwrap();
        let mem =
            GuestMemoryMmap::from_regions(vec![file_region(file, 0, len, libc::MAP_SHARED, 0)]).unwrap();
        // Two pages through the file; one through the mapping; holes around them.
        writer.write_all_at(&[0x31; 4096], 4096).unwrap();
        writer.write_all_at(&[0x32; 4096], (len - 8192) as u64).unwrap();
        mem.write_slice(&[0x33; 16], GuestAddress((len / 2) as u64)).unwrap();
        let r = reset(&mem, GuestAddress(0), len, ResetPolicy::Auto, &workers()).unwrap();
        assert_eq!((r.in_place, r.discarded), (3 * 4096, (len - 3 * 4096) as u64), "{len}: {r:?}");
        let data = |at: u64| rustix::fs::seek(&writer, rustix::fs::SeekFrom::Data(at)).unwrap();
        assert_eq!(data(0), 4096, "{len}: a hole was filled");
        assert_eq!(data(8192), (len / 2) as u64, "{len}: a hole was filled");
        let mut page = [0xffu8; 4096];
        for at in [4096, (len / 2) as u64, (len - 8192) as u64] {
            writer.read_exact_at(&mut page, at).unwrap();
            assert!(page.iter().all(|&b| b == 0), "{len}: the data at {at:#x} was not zeroed");
        }
        assert_eq!(dirty(&mem).len(), len / 4096);
    }
}

/// A shared mapping of a file on disk whose data is not in the page cache (written, synced
/// and dropped from the cache with `POSIX_FADV_DONTNEED`): the page cache does not hold it and
/// remembers nothing of it, but it is data, not a hole, and Auto zeroes it (in place or by a
/// punched hole), below 16 MiB (the page tables, then `mincore`) and above (`lseek`).
#[test]
fn auto_zeroes_file_data_that_is_not_in_the_page_cache() {
    if shmem_unchecked() {
        return;
    }
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    for len in [4 * MIB, 20 * MIB] {
        let path = dir.join(format!("reset-evicted-{}-{len}", std::process::id()));
        let file = std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        file.write_all_at(&vec![0x4d; len], 0).unwrap();
        file.sync_all().unwrap();
        rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed).unwrap();
        let reader = file.try_clone().unwrap();
        let mem =
            GuestMemoryMmap::from_regions(vec![file_region(file, 0, len, libc::MAP_SHARED, 0)]).unwrap();
        let r = reset(&mem, GuestAddress(0), len, ResetPolicy::Auto, &workers()).unwrap();
        assert_eq!(r.in_place + r.discarded, len as u64, "{len}: {r:?}");
        let mut back = vec![0xffu8; len];
        reader.read_exact_at(&mut back, 0).unwrap();
        assert!(
            back.iter().all(|&b| b == 0),
            "{len}: data left at {:#x}",
            back.iter().position(|&b| b != 0).unwrap()
        );
    }
}

/// 16 MiB or more of a memfd: the holes are found with `lseek(SEEK_DATA)` on a reopened
/// description, the data by `mincore`.
#[test]
fn a_large_memfd_auto_reset_skips_its_holes() {
    if shmem_unchecked() {
        return;
    }
    use std::io::{Seek, SeekFrom};
    let len = 40 * MIB;
    let file = memfd(len, false).unwrap();
    let mut caller = file.try_clone().unwrap();
    caller.seek(SeekFrom::Start(0x999)).unwrap();
    let probe = caller.try_clone().unwrap();
    let mem = GuestMemoryMmap::from_regions(vec![file_region(file, 0, len, libc::MAP_SHARED, 0)]).unwrap();
    // Data: [1 MiB, 6 MiB) and the page at 30 MiB; holes around them.
    mem.write_slice(&vec![0x21; 5 * MIB], GuestAddress(MIB as u64)).unwrap();
    mem.write_slice(&[0x22; 10], GuestAddress(30 * MIB as u64)).unwrap();
    let r = reset(&mem, GuestAddress(0), len, ResetPolicy::Auto, &workers()).unwrap();
    assert_eq!(r.in_place, (5 * MIB + 4096) as u64, "{r:?}");
    assert_eq!(r.discarded, (len - 5 * MIB - 4096) as u64);
    let seek = |whence| rustix::fs::seek(&probe, whence).unwrap();
    assert_eq!(seek(rustix::fs::SeekFrom::Data(0)), MIB as u64);
    assert_eq!(seek(rustix::fs::SeekFrom::Hole(MIB as u64)), 6 * MIB as u64);
    assert_eq!(seek(rustix::fs::SeekFrom::Data(6 * MIB as u64)), 30 * MIB as u64);
    assert_eq!(seek(rustix::fs::SeekFrom::Hole(30 * MIB as u64)), (30 * MIB + 4096) as u64);
    caller.seek(SeekFrom::Start(0x999)).unwrap();
    reset(&mem, GuestAddress(0), len, ResetPolicy::Auto, &workers()).unwrap();
    assert_eq!(caller.stream_position().unwrap(), 0x999, "the reset moved the caller's file offset");
    assert!(bytes(&mem).iter().all(|&b| b == 0));
    assert_eq!(dirty(&mem).len(), len / 4096);
}

/// Memory out of memory as a whole (a memfd with no data, anonymous memory never touched) is
/// reset by the calling thread alone: Auto finds it so with one call per region and starts no
/// worker (a memfd: `lseek`; anonymous memory: `PAGEMAP_SCAN` where the kernel has it); with
/// one page written, that page is zeroed and the rest left alone.
#[test]
fn auto_starts_no_worker_for_memory_that_is_out_of_memory() {
    let len = 40 * MIB;
    if !shmem_unchecked() {
        let file = memfd(len, false).unwrap();
        let mem =
            GuestMemoryMmap::from_regions(vec![file_region(file, 0, len, libc::MAP_SHARED, 0)]).unwrap();
        let r = reset(&mem, GuestAddress(0), len, ResetPolicy::Auto, &workers()).unwrap();
        assert_eq!(
            (r.in_place, r.discarded, r.work.threads, r.work.bytes),
            (0, len as u64, 1, len as u64),
            "{r:?}"
        );
        assert_eq!(dirty(&mem).len(), len / 4096);
        mem.write_slice(&[0x5a; 8], GuestAddress(33 * MIB as u64)).unwrap();
        let r = reset(&mem, GuestAddress(0), len, ResetPolicy::Auto, &workers()).unwrap();
        assert_eq!((r.in_place, r.discarded), (4096, (len - 4096) as u64), "{r:?}");
        assert!(bytes(&mem).iter().all(|&b| b == 0));
    }
    // Anonymous memory in two regions: the page tables say (`PAGEMAP_SCAN`, Linux 6.7); an older
    // kernel asks `mincore` per chunk, on the workers, with the same result.
    let mem = Mem::from_ranges(&[(GuestAddress(0), len), (GuestAddress(len as u64), len)]).unwrap();
    let r = reset(&mem, GuestAddress(0), 2 * len, ResetPolicy::Auto, &workers()).unwrap();
    assert_eq!((r.in_place, r.discarded, r.work.bytes), (0, 2 * len as u64, 2 * len as u64), "{r:?}");
    for at in [0, len as u64] {
        assert!(resident_guest(&mem, at, len).iter().all(|&r| !r), "Auto faulted pages in");
    }
    assert_eq!(dirty(&mem).len(), 2 * len / 4096);
    mem.write_slice(&[0x5a; 8], GuestAddress(len as u64 + 5)).unwrap();
    let r = reset(&mem, GuestAddress(0), 2 * len, ResetPolicy::Auto, &workers()).unwrap();
    assert_eq!((r.in_place, r.discarded), (4096, 2 * len as u64 - 4096), "{r:?}");
    assert!(bytes(&mem).iter().all(|&b| b == 0));
}

#[test]
fn shared_anonymous_memory_is_removed() {
    if shmem_unchecked() {
        return;
    }
    let region = shared_anon_region(4 * MIB, 0);
    assert_eq!(region.host_backing().kind, BackingKind::SharedAnonymous);
    let mem = GuestMemoryMmap::from_regions(vec![region]).unwrap();
    mem.write_slice(&vec![0x13; 4 * MIB], GuestAddress(0)).unwrap();
    if discarded(reset(
        &mem,
        GuestAddress(0),
        4 * MIB,
        ResetPolicy::Discard { repopulate: false },
        &workers(),
    ))
    .is_some()
    {
        assert!(bytes(&mem).iter().all(|&b| b == 0));
    }
}

#[test]
fn a_private_file_mapping_is_never_discarded() {
    if shmem_unchecked() {
        return;
    }
    let len = 2 * MIB;
    let file = memfd(len, false).unwrap();
    let reader = file.try_clone().unwrap();
    file.write_all_at(&vec![0x61; len], 0).unwrap();
    let region = file_region(file, 0, len, libc::MAP_PRIVATE, 0);
    assert_eq!(region.host_backing().kind, BackingKind::PrivateFile);
    let mem = GuestMemoryMmap::from_regions(vec![region]).unwrap();
    match reset(&mem, GuestAddress(0x10), 0x3000, ResetPolicy::Discard { repopulate: false }, &workers()) {
        Err(Error::CannotDiscard { addr, backing: BackingKind::PrivateFile, .. }) => assert_eq!(addr.0, 0x10),
        other => panic!("{other:?}"),
    }
    assert!(bytes(&mem).iter().all(|&b| b == 0x61), "a refused reset wrote");
    // Auto zeroes it in place (the private copy), the file keeps its bytes.
    let r = reset(&mem, GuestAddress(0), len, ResetPolicy::Auto, &workers()).unwrap();
    assert_eq!((r.in_place, r.discarded), (len as u64, 0));
    assert!(bytes(&mem).iter().all(|&b| b == 0));
    let mut back = vec![0; len];
    reader.read_exact_at(&mut back, 0).unwrap();
    assert!(back.iter().all(|&b| b == 0x61));
}

#[test]
fn a_range_across_backings_takes_each_regions_path() {
    if shmem_unchecked() {
        return;
    }
    let file = memfd(4 * MIB, false).unwrap();
    let anon_region = vm_memory::GuestRegionMmap::from_range(GuestAddress(0), 4 * MIB, None).unwrap();
    let mem = GuestMemoryMmap::from_regions(vec![
        anon_region,
        file_region(file, 0, 4 * MIB, libc::MAP_SHARED, 4 << 20),
    ])
    .unwrap();
    set_all(&mem, 0xfe);
    let Some(r) = discarded(reset(
        &mem,
        GuestAddress(0x800),
        8 * MIB - 0x1000,
        ResetPolicy::Discard { repopulate: true },
        &workers(),
    )) else {
        return;
    };
    assert_eq!(r.in_place + r.discarded, (8 * MIB - 0x1000) as u64);
    let all = bytes(&mem);
    assert!(all[..0x800].iter().all(|&b| b == 0xfe) && all[8 * MIB - 0x800..].iter().all(|&b| b == 0xfe));
    assert!(all[0x800..8 * MIB - 0x800].iter().all(|&b| b == 0));
    assert_eq!(dirty(&mem), dirty_model(&layout(&mem), &[(0x800, (8 * MIB - 0x1000) as u64)]));
}

#[test]
fn mlocked_memory_cannot_be_discarded_but_auto_zeroes_it() {
    let mem = anon(&[(0, 64 << 10)], 0x77);
    let h = host(&mem, 0);
    // The system call itself: sanitizer runtimes replace `mlock` with a no-op.
    // SAFETY: mlock only pins the pages of this test's own mapping.
    if unsafe { libc::syscall(libc::SYS_mlock, h as *const libc::c_void, 64usize << 10) } != 0 {
        println!("skipped: mlock: {}", std::io::Error::last_os_error());
        return;
    }
    match reset(&mem, GuestAddress(0), 64 << 10, ResetPolicy::Discard { repopulate: false }, &workers()) {
        Err(Error::Os { op: HostOp::DontNeed, .. }) => {}
        other => panic!("a discard of mlocked memory: {other:?}"),
    }
    let r = reset(&mem, GuestAddress(0), 64 << 10, ResetPolicy::Auto, &workers()).unwrap();
    assert_eq!(r.in_place, 64 << 10);
    assert!(bytes(&mem).iter().all(|&b| b == 0));
}

/// A forced discard that the kernel refuses after the partial pages at the ends were zeroed in
/// place: the error comes back, and the zeroed bytes are marked dirty (they changed).
#[test]
fn a_refused_discard_marks_what_it_zeroed_dirty() {
    let mem = anon(&[(0, 64 << 10)], 0x77);
    let h = host(&mem, 0);
    // SAFETY: mlock only pins the pages of this test's own mapping.
    if unsafe { libc::syscall(libc::SYS_mlock, h as *const libc::c_void, 64usize << 10) } != 0 {
        println!("skipped: mlock: {}", std::io::Error::last_os_error());
        return;
    }
    let (addr, len) = (0x800u64, (64 << 10) - 0x1000);
    match reset(&mem, GuestAddress(addr), len, ResetPolicy::Discard { repopulate: false }, &workers()) {
        Err(Error::Os { op: HostOp::DontNeed, .. }) => {}
        other => panic!("a discard of mlocked memory: {other:?}"),
    }
    let all = bytes(&mem);
    assert!(all[0x800..0x1000].iter().all(|&b| b == 0), "the first partial page was zeroed in place");
    assert!(
        dirty(&mem).contains(&(0, 0)),
        "zeroed bytes were left clean in the dirty bitmap: {:?}",
        dirty(&mem)
    );
}

#[test]
fn errors_before_any_write_and_empty_ranges() {
    let mem = anon(&[(0, 4 * MIB), (8 << 20, 4 * MIB)], 0x31);
    for policy in [ResetPolicy::Auto, ResetPolicy::InPlace, ResetPolicy::Discard { repopulate: true }] {
        assert!(matches!(
            reset(&mem, GuestAddress(0x1000), 4 * MIB, policy, &workers()),
            Err(Error::OutOfRange { first_invalid: GuestAddress(0x40_0000), .. })
        ));
        assert!(matches!(
            reset(&mem, GuestAddress(u64::MAX - 0x10), 0x20, policy, &workers()),
            Err(Error::AddressOverflow { .. })
        ));
        assert_eq!(
            reset(&mem, GuestAddress(0x40_0000), 0, policy, &workers()).unwrap(),
            ResetReport::default()
        );
    }
    assert!(bytes(&mem).iter().all(|&b| b == 0x31));
    assert!(dirty(&mem).is_empty());
}

#[test]
fn hugetlbfs_memory_where_the_machine_has_huge_pages() {
    if shmem_unchecked() {
        return;
    }
    let need = 4;
    if free_huge_pages() < need {
        println!(
            "skipped: {} free huge pages (HugePages_Free in /proc/meminfo), {need} needed",
            free_huge_pages()
        );
        return;
    }
    let len = need as usize * 2 * MIB;
    let file = match memfd(len, true) {
        Ok(f) => f,
        Err(e) => {
            println!("skipped: memfd_create(MFD_HUGETLB): {e}");
            return;
        }
    };
    let mem = GuestMemoryMmap::from_regions(vec![file_region(file, 0, len, libc::MAP_SHARED, 0)]).unwrap();
    let page = mem.iter().next().unwrap().host_backing().page_size;
    set_all(&mem, 0x66);
    let before = free_huge_pages();
    // From inside the first huge page to inside the last: the ends are zeroed in place, the
    // huge pages between are punched out of the file.
    let (addr, n) = (0x1000u64, len - 0x2000);
    let r =
        reset(&mem, GuestAddress(addr), n, ResetPolicy::Discard { repopulate: false }, &workers()).unwrap();
    assert_eq!(r.discarded, (len - 2 * page) as u64, "{r:?}");
    assert_eq!(free_huge_pages() - before, (len / page - 2) as u64, "punched huge pages go back to the pool");
    let all = bytes(&mem);
    assert!(all[..0x1000].iter().all(|&b| b == 0x66) && all[len - 0x1000..].iter().all(|&b| b == 0x66));
    assert!(all[0x1000..len - 0x1000].iter().all(|&b| b == 0));
    assert_eq!(dirty(&mem), dirty_model(&layout(&mem), &[(addr, n as u64)]));
}

proptest::proptest! {
    #![proptest_config(common::proptest_config(24))]

    /// Any range over adjacent regions of odd sizes, any policy: zero inside, untouched outside,
    /// exactly the touched pages dirty.
    #[test]
    fn any_reset_matches_the_model(
        start in 0x3u64..0x20_0000,
        len in 0usize..0x60_0000,
        policy in 0u8..4,
    ) {
        let regions = [(0x3u64, 0x25_1234usize), (0x3 + 0x25_1234, 0x1f_0003), (0x3 + 0x25_1234 + 0x1f_0003, 0x13_3333)];
        let end = regions[2].0 + regions[2].1 as u64;
        let len = len.min((end - start) as usize);
        let mem = anon(&regions, 0xd7);
        let policy = match policy {
            0 => ResetPolicy::Auto,
            1 => ResetPolicy::InPlace,
            2 => ResetPolicy::Discard { repopulate: false },
            _ => ResetPolicy::Discard { repopulate: true },
        };
        let r = reset(&mem, GuestAddress(start), len, policy, &workers());
        let Some(r) = discarded(r) else { return Ok(()) };
        proptest::prop_assert_eq!(r.in_place + r.discarded, len as u64);
        let lay = layout(&mem);
        let mut model = vec![0xd7; bytes(&mem).len()];
        model_apply(&mut model, &lay, |a| (start..start + len as u64).contains(&a).then_some(0));
        proptest::prop_assert!(bytes(&mem) == model);
        proptest::prop_assert_eq!(dirty(&mem), dirty_model(&lay, &[(start, len as u64)]));
    }
}

#[test]
fn reset_all_zeroes_every_region_around_a_hole() {
    // A guest with a PCI-hole-like gap between its two regions; every policy.
    for policy in [ResetPolicy::InPlace, ResetPolicy::Auto, ResetPolicy::Discard { repopulate: false }] {
        let mem = anon(&[(0, 6 * MIB), (16 * MIB as u64, 4 * MIB + 0x321)], 0xa5);
        let lay = layout(&mem);
        let Some(r) = discarded(reset_all(&mem, policy, &workers())) else {
            continue;
        };
        assert_eq!(r.in_place + r.discarded, (10 * MIB + 0x321) as u64, "{policy:?}");
        assert!(bytes(&mem).iter().all(|&b| b == 0), "{policy:?}");
        assert_eq!(
            dirty(&mem),
            dirty_model(&lay, &[(0, 6 * MIB as u64), (16 * MIB as u64, (4 * MIB + 0x321) as u64)])
        );
    }
}

#[test]
fn reset_all_refuses_before_writing_when_one_region_is_read_only() {
    let ro = anon_region(2 * MIB, libc::PROT_READ, 0).unwrap();
    let mem = with_anon(ro);
    mem.write_slice(&[0x5a; 4096], GuestAddress(0)).unwrap();
    let (before, dirty_before) = (bytes(&mem), dirty(&mem));
    let e = reset_all(&mem, ResetPolicy::InPlace, &workers()).unwrap_err();
    assert!(matches!(e, Error::Unwritable { .. }), "{e}");
    assert!(bytes(&mem) == before);
    assert_eq!(dirty(&mem), dirty_before);
}
