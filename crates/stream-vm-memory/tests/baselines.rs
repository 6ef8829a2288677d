//! The VMM baselines of `stream_vm_memory::baseline` beside Cloud Hypervisor mainline's:
//! Cloud Hypervisor's NUMA-aware prefault, QEMU's preallocation and one `MADV_POPULATE_WRITE`
//! per region. Each faults every page in (asked of the kernel with `mincore`) and changes no
//! byte; the thread splits cover every page of every region exactly once; the thread rules are
//! the VMMs'; and what Cloud Hypervisor mainline's refuses (unwritable regions, pages past the
//! end of a file) they refuse, where the kernel refuses a page they report it, never a signal.

mod common;

use std::sync::Arc;

use common::*;
use stream_vm_memory::baseline::{
    BaselineRegion, QEMU_MAX_THREADS, QemuPrealloc, cloud_hypervisor_numa_prefault,
    cloud_hypervisor_prefault, qemu_prealloc, qemu_prealloc_threads, single_populate_write, split_pages,
    split_runs,
};
use stream_vm_memory::numa::{GuestNodeRange, HostNode, MemoryNodes, Topology};
use stream_vm_memory::{Error, HostOp, Placement, PopulateMethod, RegionBacking, Unwritable, host_support};
use vm_memory::bitmap::AtomicBitmap;
use vm_memory::{Bytes, GuestAddress, GuestMemoryBackend, GuestMemoryMmap, GuestRegionMmap, MmapRegion};

const MIB: usize = 1 << 20;

/// A baseline on a guest memory.
type Baseline = fn(&Mem) -> Result<Vec<BaselineRegion>, Error>;

fn fresh(ranges: &[(u64, usize)]) -> Mem {
    let ranges: Vec<(GuestAddress, usize)> = ranges.iter().map(|&(a, n)| (GuestAddress(a), n)).collect();
    Mem::from_ranges(&ranges).unwrap()
}

/// Whether `r` is the error of a host without `MADV_POPULATE_WRITE` (said, for the caller to
/// skip the rest).
fn unavailable<T: std::fmt::Debug>(r: &Result<T, Error>) -> bool {
    match r {
        Err(Error::Os { source, .. }) if !host_support().populate_write => {
            println!("skipped: MADV_POPULATE_WRITE unavailable here: {source}");
            true
        }
        _ => false,
    }
}

/// Writes a few bytes into `mem` and clears the dirty bits; `check_untouched` then checks that
/// a populate kept them and dirtied nothing.
fn mark(mem: &Mem, at: u64) {
    mem.write_slice(&[7; 100], GuestAddress(at)).unwrap();
    mem.iter().for_each(|r| vm_memory::MmapRegion::bitmap(r).reset());
}

fn check_untouched(mem: &Mem, what: &str) {
    let all = bytes(mem);
    assert_eq!(all.iter().filter(|&&b| b == 7).count(), 100, "{what} changed a byte");
    assert_eq!(all.iter().filter(|&&b| b != 0 && b != 7).count(), 0, "{what} changed a byte");
    assert!(dirty(mem).is_empty(), "{what}: populating changes no byte, nothing is dirty");
}

/// Whether every base page of `len` bytes of guest memory from `addr` (one region of private
/// anonymous memory) was faulted in for writing: mapped exclusively (bit 56 of
/// `/proc/self/pagemap`), which a read fault (the shared zero page) is not.
fn write_faulted(mem: &Mem, addr: u64, len: usize) -> bool {
    use std::os::unix::fs::FileExt;
    let page = rustix::param::page_size();
    let first = host(mem, addr) / page;
    let n = len.div_ceil(page);
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
    // The check the tests below rely on: a page read in is resident (mincore) but maps the
    // shared zero page, not a page of its own.
    let mem = fresh(&[(0, 2 * MIB)]);
    let mut b = [1u8; 1];
    for at in (0..2 * MIB as u64).step_by(4096) {
        mem.read_slice(&mut b, GuestAddress(at)).unwrap();
    }
    assert!(resident_guest(&mem, 0, 2 * MIB).iter().all(|&r| r));
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
    let shares = split_runs(&[1, 1], 4);
    assert_eq!(shares, [vec![(0, 0..1)], vec![(1, 0..1)], vec![], vec![]]);
    assert!(split_runs(&[], 3).iter().all(Vec::is_empty));
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
fn the_numa_prefault_populates_every_whole_page_at_every_thread_count() {
    for placement in [Placement::Unpinned, Placement::Auto] {
        for threads in [0, 1, 2, 3, 5, 64] {
            // Two regions of odd sizes, the second not page aligned in guest space.
            let mem = fresh(&[(0, 12 * MIB + 0x10), (0x10_0000_0001, 9 * MIB + 3)]);
            mark(&mem, 0x10_0000_0001 + 5 * MIB as u64);
            let r = cloud_hypervisor_numa_prefault(&mem, threads, &placement);
            if unavailable(&r) {
                return;
            }
            let r = r.unwrap();
            let what = format!("{threads} threads, {placement:?}");
            // Whole pages, as Cloud Hypervisor: the partial last pages are left.
            assert_eq!(
                r.iter().map(|x| (x.addr, x.bytes)).collect::<Vec<_>>(),
                [(GuestAddress(0), 12 * MIB as u64), (GuestAddress(0x10_0000_0001), 9 * MIB as u64)]
            );
            assert!(resident_guest(&mem, 0, 12 * MIB).iter().all(|&r| r), "{what}");
            assert!(resident_guest(&mem, 0x10_0000_0001, 9 * MIB).iter().all(|&r| r), "{what}");
            assert!(
                write_faulted(&mem, 0, 12 * MIB) && write_faulted(&mem, 0x10_0000_0001, 9 * MIB),
                "{what}"
            );
            // All regions at once over `threads` workers (on this host's one unpinned group, or
            // one group per node that holds the memory): a worker counts in each region it
            // worked on, so the counts add up to between `threads` and `threads + 1`.
            let sum: usize = r.iter().map(|x| x.threads).sum();
            let t = threads.max(1);
            assert!(r.iter().all(|x| x.threads >= 1), "{what}: {r:?}");
            if matches!(placement, Placement::Unpinned) {
                assert!(sum >= t && sum <= t + 1, "{what}: {r:?}");
            }
            check_untouched(&mem, &what);
        }
    }
}

#[test]
fn the_numa_prefault_has_one_worker_group_per_node() {
    let set = rustix::thread::sched_getaffinity(None).unwrap();
    let cpus: Vec<usize> = (0..rustix::thread::CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect();
    let (c0, c1) = (cpus[0], *cpus.get(1).unwrap_or(&cpus[0]));
    // Two regions; node 0 holds the first and 4 MiB of the second, node 1 the rest.
    let topo = Arc::new(Topology::new(
        vec![HostNode { id: 0, cpus: vec![c0] }, HostNode { id: 1, cpus: vec![c1] }],
        MemoryNodes::Guest(vec![
            GuestNodeRange { addr: GuestAddress(0), len: 20 << 20, node: 0 },
            GuestNodeRange { addr: GuestAddress(20 << 20), len: 12 << 20, node: 1 },
        ]),
    ));
    for (threads, per_region) in [(1, [1, 2]), (2, [1, 2]), (4, [2, 3])] {
        let mem = fresh(&[(0, 16 * MIB), (16 << 20, 16 * MIB)]);
        let r = cloud_hypervisor_numa_prefault(&mem, threads, &Placement::Topology(topo.clone()));
        if unavailable(&r) {
            return;
        }
        let r = r.unwrap();
        assert!(write_faulted(&mem, 0, 16 * MIB) && write_faulted(&mem, 16 << 20, 16 * MIB));
        // One worker at least per node, even on one thread: node 0's worker(s) do the first
        // region and the start of the second, node 1's worker the rest of the second. With 4,
        // node 0 (20 MiB) takes 2 (the second crossing into the second region), node 1
        // (12 MiB) 2 (one each, the rest by largest remainder).
        let got: Vec<usize> = r.iter().map(|x| x.threads).collect();
        assert_eq!(got, per_region, "{threads} threads: {r:?}");
    }
}

/// The QEMU options of the tests: `threads` on 8 online CPUs, `method`.
fn qemu(threads: usize, method: PopulateMethod) -> QemuPrealloc {
    QemuPrealloc { method, ..QemuPrealloc::new(threads, 8) }
}

#[test]
fn qemu_prealloc_populates_every_page_with_the_advice_and_with_the_touch() {
    let methods = [PopulateMethod::Auto, PopulateMethod::Madvise, PopulateMethod::Touch];
    for (method, threads, node) in methods.iter().flat_map(|&m| [(m, 1, None), (m, 3, None), (m, 2, Some(0))])
    {
        // 136 MiB takes two threads (64 MiB each at least); the second region one.
        let mem = fresh(&[(0, 136 * MIB + 0x10), (0x10_0000_0001, 9 * MIB + 3)]);
        mark(&mem, 5 * MIB as u64);
        mark(&mem, 0x10_0000_0001 + 5 * MIB as u64 + 1000);
        let r = qemu_prealloc(&mem, &QemuPrealloc { node, ..qemu(threads, method) });
        if unavailable(&r) {
            return;
        }
        let r = r.unwrap();
        let what = format!("{method:?} on {threads} threads, node {node:?}");
        // QEMU rounds the pages up: the partial last pages too.
        let want = [
            BaselineRegion {
                addr: GuestAddress(0),
                bytes: (136 * MIB + 4096) as u64,
                threads: threads.min(2),
            },
            BaselineRegion { addr: GuestAddress(0x10_0000_0001), bytes: (9 * MIB + 4096) as u64, threads: 1 },
        ];
        assert_eq!(r, want, "{what}");
        assert!(resident_guest(&mem, 0, 136 * MIB + 0x10).iter().all(|&r| r), "{what}");
        assert!(resident_guest(&mem, 0x10_0000_0001, 9 * MIB + 3).iter().all(|&r| r), "{what}");
        assert!(write_faulted(&mem, 0, 136 * MIB + 0x10), "{what}");
        assert!(write_faulted(&mem, 0x10_0000_0001, 9 * MIB + 3), "{what}");
        // The touch writes every page's first byte back: the 7s stay, and no bit is dirty
        // (it does not go through vm-memory).
        let all = bytes(&mem);
        assert_eq!(all.iter().filter(|&&b| b == 7).count(), 200, "{what} changed a byte");
        assert_eq!(all.iter().filter(|&&b| b != 0 && b != 7).count(), 0, "{what} changed a byte");
        assert!(dirty(&mem).is_empty(), "{what}");
    }
}

#[test]
fn one_populate_write_per_region_faults_in_every_page() {
    let mem = fresh(&[(0, 12 * MIB + 0x10), (0x10_0000_0001, 9 * MIB + 3), (0x20_0000_0000, 100)]);
    mark(&mem, 3 * MIB as u64);
    let r = single_populate_write(&mem);
    if unavailable(&r) {
        return;
    }
    let r = r.unwrap();
    assert_eq!(
        r,
        [
            BaselineRegion { addr: GuestAddress(0), bytes: (12 * MIB + 4096) as u64, threads: 1 },
            BaselineRegion { addr: GuestAddress(0x10_0000_0001), bytes: (9 * MIB + 4096) as u64, threads: 1 },
            BaselineRegion { addr: GuestAddress(0x20_0000_0000), bytes: 4096, threads: 1 },
        ]
    );
    assert!(resident_guest(&mem, 0, 12 * MIB + 0x10).iter().all(|&r| r));
    assert!(resident_guest(&mem, 0x10_0000_0001, 9 * MIB + 3).iter().all(|&r| r));
    assert!(resident_guest(&mem, 0x20_0000_0000, 100).iter().all(|&r| r));
    assert!(write_faulted(&mem, 0, 12 * MIB + 0x10) && write_faulted(&mem, 0x10_0000_0001, 9 * MIB + 3));
    assert!(write_faulted(&mem, 0x20_0000_0000, 100));
    check_untouched(&mem, "single_populate_write");
}

#[test]
fn a_region_smaller_than_a_page_is_skipped_by_cloud_hypervisor_rules_and_rounded_up_by_qemu() {
    let mem = fresh(&[(0, 4 * MIB), (8 << 20, 100)]);
    let ch = cloud_hypervisor_numa_prefault(&mem, 2, &Placement::Unpinned);
    if unavailable(&ch) {
        return;
    }
    // As mainline: no whole page, no report (and no thread).
    assert_eq!(ch.unwrap().len(), 1);
    assert_eq!(cloud_hypervisor_prefault(&mem, 2).unwrap().len(), 1);
    let q = qemu_prealloc(&mem, &qemu(2, PopulateMethod::Auto)).unwrap();
    assert_eq!(q[1], BaselineRegion { addr: GuestAddress(HOSTILE), bytes: 4096, threads: 1 });
    assert!(resident_guest(&mem, 8 << 20, 100)[0]);
}

#[test]
fn memfd_backed_memory_is_populated_in_the_file_by_every_baseline() {
    if shmem_unchecked() {
        return;
    }
    let len = 8 * MIB;
    let run: [(&str, Baseline); 5] = [
        ("numa", |m| cloud_hypervisor_numa_prefault(m, 2, &Placement::Auto)),
        ("qemu", |m| qemu_prealloc(m, &qemu(2, PopulateMethod::Auto))),
        // Touch only goes to private anonymous memory: shmem takes the advice.
        ("qemu touch", |m| qemu_prealloc(m, &qemu(2, PopulateMethod::Touch))),
        ("qemu madvise", |m| qemu_prealloc(m, &qemu(2, PopulateMethod::Madvise))),
        ("single", single_populate_write),
    ];
    for (name, f) in run {
        let region = file_region(memfd(len, false).unwrap(), 0, len, libc::MAP_SHARED, 0x4000_0000);
        let mem = GuestMemoryMmap::from_regions(vec![region]).unwrap();
        let r = f(&mem).unwrap();
        assert_eq!(r[0].bytes, len as u64, "{name}");
        assert!(resident_guest(&mem, 0x4000_0000, len).iter().all(|&r| r), "{name}");
    }
}

/// Every new baseline on `mem`, each outcome named.
fn outcomes(mem: &Mem) -> Vec<(&'static str, Result<Vec<BaselineRegion>, Error>)> {
    vec![
        ("numa", cloud_hypervisor_numa_prefault(mem, 2, &Placement::Unpinned)),
        ("numa auto", cloud_hypervisor_numa_prefault(mem, 2, &Placement::Auto)),
        ("qemu", qemu_prealloc(mem, &qemu(2, PopulateMethod::Auto))),
        ("qemu touch", qemu_prealloc(mem, &qemu(2, PopulateMethod::Touch))),
        ("qemu madvise", qemu_prealloc(mem, &qemu(2, PopulateMethod::Madvise))),
        ("single", single_populate_write(mem)),
    ]
}

#[test]
fn unwritable_regions_are_refused_before_anything_is_done() {
    for prot in [libc::PROT_READ, libc::PROT_NONE] {
        let mem = with_anon(anon_region(4 * MIB, prot, 0).unwrap());
        assert!(matches!(
            cloud_hypervisor_prefault(&mem, 2),
            Err(Error::Unwritable { why: Unwritable::Protection { .. }, .. })
        ));
        for (name, r) in outcomes(&mem) {
            match r {
                Err(Error::Unwritable { addr, why: Unwritable::Protection { prot: p }, .. }) => {
                    assert_eq!((addr, p), (GuestAddress(HOSTILE), prot), "{name}");
                }
                other => panic!("{name}: {other:?}"),
            }
            assert!(resident_guest(&mem, 0, 8 * MIB).iter().all(|&r| !r), "{name} populated before refusing");
        }
    }
}

#[test]
fn pages_past_the_end_of_a_file_are_refused_before_anything_is_done() {
    let (mem, _) = short_file(libc::MAP_SHARED);
    for (name, r) in outcomes(&mem) {
        assert!(
            matches!(r, Err(Error::Unwritable { why: Unwritable::PastEndOfFile { .. }, .. })),
            "{name}: {r:?}"
        );
        assert!(resident_guest(&mem, 0, 8 * MIB).iter().all(|&r| !r), "{name} populated before refusing");
    }
}

#[test]
fn a_device_mapping_claimed_writable_is_refused_by_the_kernel_not_a_signal() {
    let Some((host, len)) = vvar() else {
        println!("skipped: no [vvar] mapping in /proc/self/maps");
        return;
    };
    // SAFETY: the vDSO's data pages stay mapped for the life of the process.
    let m = unsafe {
        MmapRegion::<AtomicBitmap>::build_raw(host as *mut u8, len, libc::PROT_READ | libc::PROT_WRITE, 0)
    }
    .unwrap();
    let mem = with_anon(GuestRegionMmap::new(m, GuestAddress(HOSTILE)).unwrap());
    let einval = |r: &Result<Vec<BaselineRegion>, Error>| match r {
        Err(Error::Os { op: HostOp::PopulateWrite, source, .. }) => {
            source.raw_os_error() == Some(libc::EINVAL)
        }
        _ => false,
    };
    if !host_support().populate_write {
        assert!(outcomes(&mem).iter().all(|(_, r)| r.is_err()));
        return;
    }
    assert!(einval(&cloud_hypervisor_prefault(&mem, 2)));
    for (name, r) in outcomes(&mem) {
        // QEMU's check on the first page sees EINVAL, and memory of unknown backing is not
        // touched: refused. The others make the call, which the kernel refuses.
        let ok = match name {
            "qemu" => matches!(&r, Err(Error::Unwritable { why: Unwritable::Refused(e), .. })
                if e.raw_os_error() == Some(libc::EINVAL)),
            _ => einval(&r),
        };
        assert!(ok, "{name}: {r:?}");
    }
}

#[test]
fn hugetlb_memory_with_an_empty_pool_is_an_error_not_a_signal() {
    if free_huge_pages() > 0 {
        println!(
            "skipped: the hugetlb pool has {} free pages; this test needs an empty pool",
            free_huge_pages()
        );
        return;
    }
    let region = match anon_region(4 * MIB, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_HUGETLB) {
        Ok(r) => r,
        Err(e) => {
            println!("skipped: mmap(MAP_HUGETLB | MAP_NORESERVE): {e}");
            return;
        }
    };
    let mem = with_anon(region);
    for (name, r) in outcomes(&mem) {
        let ok = match &r {
            Err(Error::Os { op: HostOp::PopulateWrite, source, .. }) => {
                !host_support().populate_write || source.raw_os_error() == Some(libc::EFAULT)
            }
            // Without the advice, QEMU's touch is refused up front (only private anonymous
            // memory is touched).
            Err(Error::Unwritable { why: Unwritable::Unchecked { .. }, .. }) => {
                !host_support().populate_write
            }
            _ => false,
        };
        assert!(ok, "{name}: {r:?}");
    }
}

#[test]
fn hugetlbfs_memory_where_the_machine_has_huge_pages() {
    let need = 8;
    if !huge_pages_for_a_test(need) {
        return;
    }
    let len = (need as usize) * 2 * MIB;
    let run: [(&str, Baseline); 3] = [
        ("numa", |m| cloud_hypervisor_numa_prefault(m, 3, &Placement::Auto)),
        ("qemu", |m| qemu_prealloc(m, &qemu(2, PopulateMethod::Auto))),
        ("single", single_populate_write),
    ];
    for (name, f) in run {
        let Ok(file) = memfd(len, true) else {
            println!("skipped: memfd_create(MFD_HUGETLB)");
            return;
        };
        let mem =
            GuestMemoryMmap::from_regions(vec![file_region(file, 0, len, libc::MAP_SHARED, 0)]).unwrap();
        let page = mem.iter().next().unwrap().host_backing().page_size;
        let r = f(&mem).unwrap();
        assert_eq!(r[0].bytes, len as u64, "{name}");
        assert!(r[0].bytes % page as u64 == 0, "{name}");
        assert!(resident_guest(&mem, 0, len).iter().all(|&r| r), "{name}");
    }
}
