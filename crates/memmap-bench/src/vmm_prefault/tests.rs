//! The baselines beside the VMMs' rules: the thread splits cover every page of every region
//! exactly once, the thread rules are the VMMs', and each baseline faults every page in for
//! writing (asked of `/proc/self/pagemap`) and changes no byte.

use super::*;
use vm_memory::bitmap::Bitmap;
use vm_memory::{Bytes, GuestMemoryRegion, MemoryRegionAddress};

const MIB: usize = 1 << 20;

fn fresh(ranges: &[(u64, usize)]) -> Mem {
    let ranges: Vec<(GuestAddress, usize)> = ranges.iter().map(|&(a, n)| (GuestAddress(a), n)).collect();
    Mem::from_ranges(&ranges).unwrap()
}

/// Whether `r` is the error of a host without `MADV_POPULATE_WRITE` (said, for the caller to
/// skip the rest).
fn unavailable<T>(r: &io::Result<T>) -> bool {
    let skip = r.is_err() && !stream_vm_memory::host_support().populate_write;
    if skip {
        println!("skipped: MADV_POPULATE_WRITE unavailable here");
    }
    skip
}

/// Whether `MADV_POPULATE_WRITE` faults pages in on this host: qemu-user answers it and does
/// nothing, and there a baseline that uses it is checked for what it returns and the bytes it
/// keeps, not for faulting pages in (said).
fn advice_faults() -> bool {
    let faults = stream_vm_memory::host_support().populate_write;
    if !faults {
        println!("MADV_POPULATE_WRITE does nothing here: pages faulted in are not checked");
    }
    faults
}

/// Writes 100 bytes of 7 at `at` and clears the dirty bits; `check_untouched` then checks that
/// a baseline kept them and dirtied nothing.
fn mark(mem: &Mem, at: u64) {
    mem.write_slice(&[7; 100], GuestAddress(at)).unwrap();
    mem.iter().for_each(|r| vm_memory::MmapRegion::bitmap(r).reset());
}

fn check_untouched(mem: &Mem, sevens: usize, what: &str) {
    let mut all = Vec::new();
    for r in mem.iter() {
        let mut v = vec![0; r.len() as usize];
        mem.read_slice(&mut v, r.start_addr()).unwrap();
        assert!(
            (0..r.len() as usize).step_by(4096).all(|o| !vm_memory::MmapRegion::bitmap(r).dirty_at(o)),
            "{what}: dirty"
        );
        all.extend(v);
    }
    assert_eq!(all.iter().filter(|&&b| b == 7).count(), sevens, "{what} changed a byte");
    assert_eq!(all.iter().filter(|&&b| b != 0 && b != 7).count(), 0, "{what} changed a byte");
}

/// Whether every base page of `len` guest bytes from `addr` (one region) was faulted in for
/// writing: present and mapped exclusively (bits 63 and 56 of `/proc/self/pagemap`), which a
/// read fault (the shared zero page) is not.
fn write_faulted(mem: &Mem, addr: u64, len: usize) -> bool {
    use std::os::unix::fs::FileExt;
    let r = mem.find_region(GuestAddress(addr)).unwrap();
    let host = r.get_host_address(MemoryRegionAddress(addr - r.start_addr().0)).unwrap() as usize;
    let page = rustix::param::page_size();
    let (first, n) = (host / page, (host % page + len).div_ceil(page));
    let mut raw = vec![0u8; n * 8];
    let f = std::fs::File::open("/proc/self/pagemap").unwrap();
    f.read_exact_at(&mut raw, (first * 8) as u64).unwrap();
    raw.chunks_exact(8).all(|e| {
        let v = u64::from_le_bytes(e.try_into().unwrap());
        v & (1 << 63) != 0 && v & (1 << 56) != 0
    })
}

#[test]
fn a_read_fault_is_not_a_write_fault() {
    let mem = fresh(&[(0, 2 * MIB)]);
    let mut b = [1u8; 1];
    for at in (0..2 * MIB as u64).step_by(4096) {
        mem.read_slice(&mut b, GuestAddress(at)).unwrap();
    }
    assert!(!write_faulted(&mem, 0, 2 * MIB));
    mem.write_slice(&[0; 4096], GuestAddress(0)).unwrap();
    assert!(write_faulted(&mem, 0, 4096));
}

#[test]
fn split_pages_covers_every_page_once_in_order() {
    assert_eq!(split_pages(10, 3), [0..4, 4..7, 7..10]);
    assert_eq!(split_pages(9, 3), [0..3, 3..6, 6..9]);
    assert_eq!(split_pages(7, 1), vec![0..7]);
    // More workers than pages: one page each for the first, nothing for the rest.
    assert_eq!(split_pages(2, 5), [0..1, 1..2, 2..2, 2..2, 2..2]);
    assert_eq!(split_pages(0, 2), [0..0, 0..0]);
    assert!(split_pages(5, 0).is_empty());
    for pages in 0..70 {
        for threads in 1..80 {
            let s = split_pages(pages, threads);
            assert_eq!(s.len(), threads);
            assert_eq!(s[0].start, 0);
            assert_eq!(s[threads - 1].end, pages, "{pages} pages, {threads} threads");
            for (i, r) in s.iter().enumerate() {
                if i > 0 {
                    assert_eq!(r.start, s[i - 1].end, "contiguous");
                }
                // The rounding of Cloud Hypervisor and QEMU: the first `pages % threads` one more.
                assert_eq!(r.len(), pages / threads + usize::from(i < pages % threads));
            }
        }
    }
}

#[test]
fn split_runs_covers_each_run_exactly_once() {
    // A group of regions of odd page counts, one of them empty.
    let runs = [3, 0, 5, 1, 7];
    assert_eq!(split_runs(&runs, 2), [vec![(0, 0..3), (2, 0..5)], vec![(3, 0..1), (4, 0..7)]]);
    assert_eq!(
        split_runs(&runs, 3),
        [vec![(0, 0..3), (2, 0..3)], vec![(2, 3..5), (3, 0..1), (4, 0..2)], vec![(4, 2..7)]]
    );
    for threads in 1..25 {
        let shares = split_runs(&runs, threads);
        assert_eq!(shares.len(), threads);
        let mut seen: Vec<Vec<u32>> = runs.iter().map(|&n| vec![0; n]).collect();
        let mut last = (0, 0);
        for (share, pages) in shares.iter().zip(split_pages(runs.iter().sum(), threads)) {
            assert_eq!(
                share.iter().map(|(_, r)| r.len()).sum::<usize>(),
                pages.len(),
                "shares as split_pages"
            );
            for (k, r) in share {
                assert!(!r.is_empty(), "no empty part");
                assert!((*k, r.start) >= last, "in order");
                last = (*k, r.end);
                r.clone().for_each(|p| seen[*k][p] += 1);
            }
        }
        assert!(seen.iter().flatten().all(|&n| n == 1), "{threads} threads: {seen:?}");
    }
    // More workers than pages: the last get nothing.
    assert_eq!(split_runs(&[1, 1], 4), [vec![(0, 0..1)], vec![(1, 0..1)], vec![], vec![]]);
    assert!(split_runs(&[], 3).iter().all(Vec::is_empty));
}

#[test]
fn the_thread_rule_is_cloud_hypervisors() {
    const G: usize = 1 << 30;
    let p = 4096;
    // About 4 GiB per thread, at least one.
    assert_eq!(cloud_hypervisor_threads(64, p, G / p), 1);
    assert_eq!(cloud_hypervisor_threads(64, p, 4 * G / p), 1);
    assert_eq!(cloud_hypervisor_threads(64, p, 8 * G / p), 2);
    assert_eq!(cloud_hypervisor_threads(64, p, 9 * G / p), 2);
    // Capped by the CPUs and by 16.
    assert_eq!(cloud_hypervisor_threads(2, p, 64 * G / p), 2);
    assert_eq!(cloud_hypervisor_threads(256, p, 1024 * G / p), 16);
    // 1 GiB pages: never more threads than pages.
    assert_eq!(cloud_hypervisor_threads(64, G, 3), 1);
    assert_eq!(cloud_hypervisor_threads(64, G, 40), 10);
    assert_eq!(cloud_hypervisor_threads(64, G, 0), 0);
}

#[test]
fn the_thread_rule_is_qemus() {
    const G: usize = 1 << 30;
    let p = 4096;
    // prealloc-threads, capped by the online CPUs and by 16.
    assert_eq!(qemu_prealloc_threads(64, 8, p, G / p), 8);
    assert_eq!(qemu_prealloc_threads(4, 8, p, G / p), 4);
    assert_eq!(qemu_prealloc_threads(64, 32, p, 64 * G / p), QEMU_MAX_THREADS);
    // At least 64 MiB per thread.
    assert_eq!(qemu_prealloc_threads(64, 8, p, 100 * MIB / p), 1);
    assert_eq!(qemu_prealloc_threads(64, 8, p, 128 * MIB / p), 2);
    // Gigantic pages: never more threads than pages.
    assert_eq!(qemu_prealloc_threads(64, 8, G, 3), 3);
    assert_eq!(qemu_prealloc_threads(64, 8, p, 0), 0);
    // Unknown CPUs: one thread; prealloc-threads 0 counts as 1.
    assert_eq!(qemu_prealloc_threads(0, 8, p, G / p), 1);
    assert_eq!(qemu_prealloc_threads(8, 0, p, G / p), 1);
}

#[test]
fn cloud_hypervisor_prefaults_every_whole_page_of_each_region() {
    let mem = fresh(&[(0, 12 * MIB + 0x10), (0x10_0000_0001, 9 * MIB + 3), (0x20_0000_0000, 100)]);
    mark(&mem, 0x10_0000_0001 + 5 * MIB as u64);
    let r = cloud_hypervisor_prefault(&mem, 4);
    if unavailable(&r) {
        return;
    }
    // One thread per region under 4 GiB; the partial last pages and the region of no whole
    // page are left out.
    assert_eq!(
        r.unwrap(),
        [
            BaselineRegion { addr: GuestAddress(0), bytes: (12 * MIB) as u64, threads: 1 },
            BaselineRegion { addr: GuestAddress(0x10_0000_0001), bytes: (9 * MIB) as u64, threads: 1 },
        ]
    );
    assert!(
        !advice_faults()
            || (write_faulted(&mem, 0, 12 * MIB) && write_faulted(&mem, 0x10_0000_0001, 9 * MIB))
    );
    check_untouched(&mem, 100, "cloud_hypervisor_prefault");
}

#[test]
fn the_baseline_prefaults_whole_regions_with_cloud_hypervisors_thread_rule() {
    let mem = fresh(&[(0, 8 * MIB), (16 << 20, 4 * MIB + 0x800)]);
    let r = cloud_hypervisor_prefault(&mem, 4);
    if unavailable(&r) {
        return;
    }
    let regions = r.unwrap();
    assert_eq!(regions.len(), 2);
    assert_eq!((regions[0].bytes, regions[0].threads), (8 * MIB as u64, 1));
    // Whole pages only: Cloud Hypervisor leaves the partial last page.
    assert_eq!(regions[1].bytes, 4 * MIB as u64);
    assert!(!advice_faults() || (write_faulted(&mem, 0, 8 * MIB) && write_faulted(&mem, 16 << 20, 4 * MIB)));
    assert_eq!(cloud_hypervisor_threads(4, 4096, 2048), 1);
}

#[test]
fn the_numa_prefault_populates_every_whole_page_at_every_thread_count() {
    for threads in [0, 1, 2, 3, 5, 64] {
        // Two regions of odd sizes, the second not page aligned in guest space, and one of no
        // whole page (skipped, as mainline skips it).
        let mem = fresh(&[(0, 12 * MIB + 0x10), (0x10_0000_0001, 9 * MIB + 3), (0x20_0000_0000, 100)]);
        mark(&mem, 0x10_0000_0001 + 5 * MIB as u64);
        let r = cloud_hypervisor_numa_prefault(&mem, threads);
        if unavailable(&r) {
            return;
        }
        let r = r.unwrap();
        let what = format!("{threads} threads");
        assert_eq!(
            r.iter().map(|x| (x.addr, x.bytes)).collect::<Vec<_>>(),
            [(GuestAddress(0), 12 * MIB as u64), (GuestAddress(0x10_0000_0001), 9 * MIB as u64)]
        );
        assert!(
            !advice_faults()
                || (write_faulted(&mem, 0, 12 * MIB) && write_faulted(&mem, 0x10_0000_0001, 9 * MIB)),
            "{what}"
        );
        // All regions at once over `threads` workers: a worker counts in each region it worked
        // on, so the counts add up to between `threads` and `threads + 1`.
        let sum: usize = r.iter().map(|x| x.threads).sum();
        let t = threads.max(1);
        assert!(r.iter().all(|x| x.threads >= 1), "{what}: {r:?}");
        assert!(sum >= t && sum <= t + 1, "{what}: {r:?}");
        check_untouched(&mem, 100, &what);
    }
}

#[test]
fn qemu_prealloc_populates_every_page_with_the_advice_and_with_the_touch() {
    for threads in [1, 3] {
        // 136 MiB takes two threads (64 MiB each at least); the second region one.
        let mem = fresh(&[(0, 136 * MIB + 0x10), (0x10_0000_0001, 9 * MIB + 3)]);
        mark(&mem, 5 * MIB as u64);
        mark(&mem, 0x10_0000_0001 + 5 * MIB as u64 + 1000);
        let r = qemu_prealloc(&mem, threads, 8);
        if unavailable(&r) {
            return;
        }
        // QEMU rounds the pages up: the partial last pages too.
        let want = [
            BaselineRegion {
                addr: GuestAddress(0),
                bytes: (136 * MIB + 4096) as u64,
                threads: threads.min(2),
            },
            BaselineRegion { addr: GuestAddress(0x10_0000_0001), bytes: (9 * MIB + 4096) as u64, threads: 1 },
        ];
        assert_eq!(r.unwrap(), want, "{threads} threads");
        assert!(!advice_faults() || (write_faulted(&mem, 0, 136 * MIB + 0x10)), "{threads} threads");
        assert!(!advice_faults() || (write_faulted(&mem, 0x10_0000_0001, 9 * MIB + 3)), "{threads} threads");
        check_untouched(&mem, 200, "qemu_prealloc");
    }
    // QEMU's touch, as on a host without the advice: every page faulted in for writing, its
    // first byte written back, the 7s kept and no bit dirty (it does not go through vm-memory).
    let mem = fresh(&[(0, 3 * MIB)]);
    mark(&mem, 5000);
    let r = regions(&mem).unwrap()[0];
    let workers: Vec<Vec<Call>> = split_pages(3 * MIB / r.page, 3).iter().map(|p| vec![r.call(p)]).collect();
    // SAFETY: whole pages of the private anonymous region, mapped while `mem` lives and reached
    // only through raw pointers; its host address is page-aligned (`mmap`).
    unsafe { run_workers(&workers, Some(r.page)) }.unwrap();
    assert!(write_faulted(&mem, 0, 3 * MIB));
    check_untouched(&mem, 100, "qemu's touch");
}

#[test]
fn one_populate_write_per_region_faults_in_every_page() {
    let mem = fresh(&[(0, 12 * MIB + 0x10), (0x10_0000_0001, 9 * MIB + 3), (0x20_0000_0000, 100)]);
    mark(&mem, 3 * MIB as u64);
    let r = single_populate_write(&mem);
    if unavailable(&r) {
        return;
    }
    assert_eq!(
        r.unwrap(),
        [
            BaselineRegion { addr: GuestAddress(0), bytes: (12 * MIB + 4096) as u64, threads: 1 },
            BaselineRegion { addr: GuestAddress(0x10_0000_0001), bytes: (9 * MIB + 4096) as u64, threads: 1 },
            BaselineRegion { addr: GuestAddress(0x20_0000_0000), bytes: 4096, threads: 1 },
        ]
    );
    assert!(
        !advice_faults()
            || (write_faulted(&mem, 0, 12 * MIB + 0x10) && write_faulted(&mem, 0x10_0000_0001, 9 * MIB + 3))
    );
    assert!(!advice_faults() || (write_faulted(&mem, 0x20_0000_0000, 100)));
    check_untouched(&mem, 100, "single_populate_write");
}

#[test]
fn memory_other_than_private_anonymous_is_refused_before_anything_is_done() {
    let file = tempfile::tempfile().unwrap();
    file.set_len(4 << 20).unwrap();
    let region =
        vm_memory::MmapRegion::<AtomicBitmap>::from_file(vm_memory::FileOffset::new(file, 0), 4 << 20)
            .unwrap();
    let region = vm_memory::GuestRegionMmap::new(region, GuestAddress(0)).unwrap();
    let mem = Mem::from_regions(vec![region]).unwrap();
    for (what, r) in [
        ("ch", cloud_hypervisor_prefault(&mem, 2)),
        ("ch-numa", cloud_hypervisor_numa_prefault(&mem, 2)),
        ("qemu", qemu_prealloc(&mem, 2, 2)),
        ("once", single_populate_write(&mem)),
    ] {
        assert!(r.is_err(), "{what}");
    }
    assert!(!write_faulted(&mem, 0, 4096));
}

/// A worker that cannot start is an error, not an abort, and the workers started before it
/// neither wait for it forever nor fault anything in (issue 45: a huge thread count started one
/// thread per page and died of SIGABRT when one could not start).
#[test]
fn a_worker_that_cannot_start_is_an_error_and_no_one_waits_for_it() {
    let mem = fresh(&[(0, 4 * MIB)]);
    let r = regions(&mem).unwrap()[0];
    let workers: Vec<Vec<Call>> = split_pages(r.len / r.page, 8).iter().map(|p| vec![r.call(p)]).collect();
    let made = std::sync::atomic::AtomicUsize::new(0);
    // The fourth thread asks for a stack no host can map.
    let builder = || {
        let b = std::thread::Builder::new();
        if made.fetch_add(1, Ordering::Relaxed) == 3 { b.stack_size(usize::MAX / 2) } else { b }
    };
    // SAFETY: whole pages of the private anonymous region of `mem`, which outlives the call.
    let e = unsafe { run_workers_with(&workers, None, builder) }.unwrap_err();
    assert!(e.to_string().contains("prefault worker 3 of 8 could not start"), "{e}");
    assert!(!write_faulted(&mem, 0, 4 * MIB), "the started workers did nothing");
    // A thread count far above the pages starts one worker per page at most, and succeeds.
    let small = fresh(&[(0, 64 * 4096)]);
    let r = cloud_hypervisor_numa_prefault(&small, 1_000_000);
    if !unavailable(&r) {
        assert_eq!(r.unwrap()[0].threads, 64);
    }
}

#[test]
fn split_runs_saturates_instead_of_wrapping() {
    let shares = split_runs(&[usize::MAX, 5, usize::MAX], 3);
    assert_eq!(shares.len(), 3);
    assert!(shares.iter().flatten().all(|(_, r)| !r.is_empty()));
}
