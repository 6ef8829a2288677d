//! Guest memory a store cannot go to: every public function on every such mapping this
//! machine can make returns a typed error (or, where nothing needs storing, succeeds), and
//! never takes a signal. A signal would kill this test binary, so a crash is a failure.
//!
//! The mappings: read-only and `PROT_NONE` anonymous memory, a read-only memfd, a memfd and a
//! private file mapping truncated after mapping (pages past the end of the file), hugetlbfs
//! memory without free huge pages (`MAP_HUGETLB | MAP_NORESERVE`, and a `MFD_HUGETLB` memfd),
//! the kernel's `[vvar]` page (`VM_PFNMAP | VM_IO`) as a region of unknown backing whose
//! claimed protection is writable, and a read-only mapping of unknown backing claimed
//! writable. Each is the second region of a guest memory whose first is ordinary anonymous
//! memory, and every function runs on the hostile region alone and on both regions.

mod common;

use common::*;
use stream_par::Threads;
use stream_vm_memory::{
    Error, HostOp, HugePageAdvice, Placement, PopulateMethod, PopulateOptions, RegionBacking, ResetPolicy,
    Stores, Unwritable, Workers, advise_huge_pages, fill, fill_parallel, fill_pattern, fill_pattern_parallel,
    host_support, populate, populate_all, reset, write, zero, zero_parallel,
};
use vm_memory::bitmap::AtomicBitmap;
use vm_memory::{FileOffset, GuestAddress, GuestMemoryBackend, GuestRegionMmap, MmapRegion};

const MIB: usize = 1 << 20;

fn workers() -> Workers {
    Workers::new(Threads::Fixed(2)).with_placement(Placement::Unpinned)
}

fn popts(method: PopulateMethod) -> PopulateOptions {
    PopulateOptions { method, huge_pages: HugePageAdvice::Leave, ..PopulateOptions::new(workers()) }
}

/// An outcome, as the tables below name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Got {
    Ok,
    Protection,
    PastEnd,
    /// `Unwritable::Refused` with this errno.
    Refused(i32),
    Unchecked,
    /// `Error::Os` for `MADV_POPULATE_WRITE` with this errno.
    PopulateOs(i32),
    CannotDiscard,
    Other,
}

fn got<T>(r: Result<T, Error>) -> Got {
    match r {
        Ok(_) => Got::Ok,
        Err(Error::Unwritable { why: Unwritable::Protection { .. }, .. }) => Got::Protection,
        Err(Error::Unwritable { why: Unwritable::PastEndOfFile { .. }, .. }) => Got::PastEnd,
        Err(Error::Unwritable { why: Unwritable::Refused(e), .. }) => {
            Got::Refused(e.raw_os_error().unwrap_or(0))
        }
        Err(Error::Unwritable { why: Unwritable::Unchecked { .. }, .. }) => Got::Unchecked,
        Err(Error::Os { op: HostOp::PopulateWrite, source, .. }) => {
            Got::PopulateOs(source.raw_os_error().unwrap_or(0))
        }
        Err(Error::CannotDiscard { .. }) => Got::CannotDiscard,
        Err(e) => {
            println!("other error: {e}");
            Got::Other
        }
    }
}

/// Every public function of the crate, on `len` bytes at `addr` of `mem` (the whole memory for
/// `populate_all`).
type Op = (&'static str, fn(&Mem, GuestAddress, usize) -> Got);

const OPS: &[Op] = &[
    ("populate", |m, a, n| got(populate(m, a, n, &popts(PopulateMethod::Auto)))),
    ("populate default options", |m, a, n| got(populate(m, a, n, &PopulateOptions::new(workers())))),
    ("populate touch", |m, a, n| got(populate(m, a, n, &popts(PopulateMethod::Touch)))),
    ("populate_all", |m, _, _| got(populate_all(m, &popts(PopulateMethod::Auto)))),
    ("advise_huge_pages", |m, a, n| got(advise_huge_pages(m, a, n))),
    ("zero", |m, a, n| got(zero(m, a, n))),
    ("fill", |m, a, n| got(fill(m, a, n, 0x5c))),
    ("fill_pattern", |m, a, n| got(fill_pattern(m, a, n, &[1, 2, 3]))),
    ("write", |m, a, n| got(write(m, a, &vec![0x77; n]))),
    ("zero_parallel", |m, a, n| got(zero_parallel(m, a, n, &workers()))),
    ("fill_parallel", |m, a, n| got(fill_parallel(m, a, n, 0x5c, &workers()))),
    ("fill_pattern_parallel", |m, a, n| got(fill_pattern_parallel(m, a, n, &[4, 5], &workers()))),
    ("reset auto", |m, a, n| got(reset(m, a, n, ResetPolicy::Auto, &workers()))),
    ("reset in place", |m, a, n| got(reset(m, a, n, ResetPolicy::InPlace, &workers()))),
    ("reset discard", |m, a, n| got(reset(m, a, n, ResetPolicy::Discard { repopulate: false }, &workers()))),
    ("reset discard repopulate", |m, a, n| {
        got(reset(m, a, n, ResetPolicy::Discard { repopulate: true }, &workers()))
    }),
];

/// Whether `name` is one of the functions that fault pages in rather than store.
fn populates(name: &str) -> bool {
    name.starts_with("populate")
}

/// The outcomes a function may have on a hostile region (alone, or after the anonymous one).
type Expect = fn(&str) -> Vec<Got>;

/// Runs every function on `mem` (whose hostile region is `hostile_len` bytes at [`HOSTILE`])
/// and checks each outcome against `expect`; with `readable`, also that a refusal made before
/// anything was done left the anonymous region's bytes and dirty bits alone.
fn run_all(what: &str, mem: &Mem, hostile_len: usize, expect: Expect, readable_first: bool) {
    let whole = HOSTILE as usize + hostile_len;
    let mut wrong = Vec::new();
    for &(name, op) in OPS {
        for (range, addr, len) in [("hostile region", HOSTILE, hostile_len), ("both regions", 0, whole)] {
            if readable_first {
                set_first(mem, 0x3c);
            }
            let g = op(mem, GuestAddress(addr), len);
            let want = expect(name);
            if !want.contains(&g) {
                wrong.push(format!("{what}: {name} on the {range}: got {g:?}, expected one of {want:?}"));
            }
            // A refusal before anything is done leaves the first region as it was.
            let up_front = matches!(g, Got::Protection | Got::PastEnd | Got::Unchecked | Got::CannotDiscard);
            if readable_first && up_front {
                let mut first = vec![0u8; HOSTILE as usize];
                vm_memory::Bytes::read_slice(mem, &mut first, GuestAddress(0)).unwrap();
                if first.iter().any(|&b| b != 0x3c) || !dirty(mem).iter().all(|&(r, _)| r == HOSTILE) {
                    wrong.push(format!("{what}: {name} on the {range}: refused ({g:?}) after writing"));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The first (anonymous) region set to `v`, dirty bits of every region cleared.
fn set_first(mem: &Mem, v: u8) {
    vm_memory::Bytes::write_slice(mem, &vec![v; HOSTILE as usize], GuestAddress(0)).unwrap();
    for r in mem.iter() {
        vm_memory::MmapRegion::bitmap(r).reset();
    }
}

/// A read-only or `PROT_NONE` mapping: refused before anything is done by every function.
fn refused_by_protection(_: &str) -> Vec<Got> {
    vec![Got::Protection]
}

#[test]
fn read_only_anonymous_memory_is_refused_by_every_function() {
    let mem = with_anon(anon_region(4 * MIB, libc::PROT_READ, 0).unwrap());
    assert_eq!(
        mem.find_region(GuestAddress(HOSTILE)).unwrap().host_backing().stores(),
        Stores::Refused { prot: libc::PROT_READ }
    );
    run_all("read-only", &mem, 4 * MIB, refused_by_protection, true);
    // The message names the range and what to do.
    let e = zero(&mem, GuestAddress(HOSTILE + 0x10), 0x20).unwrap_err().to_string();
    assert!(e.contains("0x800010") && e.contains("PROT_WRITE"), "{e}");
}

#[test]
fn prot_none_memory_is_refused_by_every_function() {
    let mem = with_anon(anon_region(4 * MIB, libc::PROT_NONE, 0).unwrap());
    run_all("PROT_NONE", &mem, 4 * MIB, refused_by_protection, true);
}

#[test]
fn a_read_only_memfd_is_refused_by_every_function() {
    let len = 4 * MIB;
    let f = memfd(len, false).unwrap();
    let m = MmapRegion::<AtomicBitmap>::build(
        Some(FileOffset::new(f, 0)),
        len,
        libc::PROT_READ,
        libc::MAP_SHARED,
    )
    .unwrap();
    let mem = with_anon(GuestRegionMmap::new(m, GuestAddress(HOSTILE)).unwrap());
    run_all("read-only memfd", &mem, len, refused_by_protection, true);
}

fn past_the_end(_: &str) -> Vec<Got> {
    vec![Got::PastEnd]
}

#[test]
fn a_truncated_memfd_is_refused_past_its_end_and_written_before_it() {
    let (mem, len) = short_file(libc::MAP_SHARED);
    run_all("memfd truncated after mapping", &mem, len, past_the_end, true);
    // The error names the first page wholly past the end: the file keeps 2 MiB + 100 bytes,
    // so its last page ends at 2 MiB + 4 KiB.
    match zero(&mem, GuestAddress(HOSTILE), len) {
        Err(Error::Unwritable { addr, len: n, why: Unwritable::PastEndOfFile { file_len, file_offset } }) => {
            assert_eq!((addr.0, n), (HOSTILE + 2 * MIB as u64 + 4096, (2 * MIB - 4096) as u64));
            assert_eq!((file_len, file_offset), (2 * MIB as u64 + 100, 0));
        }
        other => panic!("{other:?}"),
    }
    // Up to the end of the file's last page, everything works (where the host can check a
    // memfd's pages before storing).
    if shmem_unchecked() {
        return;
    }
    let inside = 2 * MIB + 4096;
    for &(name, op) in OPS.iter().filter(|(n, _)| !matches!(*n, "populate_all" | "cloud_hypervisor_prefault"))
    {
        assert_eq!(op(&mem, GuestAddress(HOSTILE), inside), Got::Ok, "{name}");
    }
}

#[test]
fn a_truncated_private_file_mapping_is_refused_past_its_end() {
    let (mem, len) = short_file(libc::MAP_PRIVATE);
    // A private file mapping cannot be discarded to zeros either: the range check comes first.
    run_all("private file mapping truncated after mapping", &mem, len, past_the_end, true);
}

/// Hugetlbfs memory where the pool has no free huge pages: the kernel refuses every fault.
fn empty_pool(name: &str) -> Vec<Got> {
    if populates(name) || name == "reset discard repopulate" {
        return vec![Got::PopulateOs(libc::EFAULT)];
    }
    match name {
        "advise_huge_pages" => vec![Got::Ok],
        // Not resident: discarded (nothing stored); a kernel that cannot discard hugetlbfs
        // memory falls back to storing, which is refused.
        "reset auto" | "reset discard" => vec![Got::Ok, Got::Refused(libc::EFAULT)],
        _ => vec![Got::Refused(libc::EFAULT)],
    }
}

/// `empty_pool` on a host that cannot check pages first: refused up front.
fn empty_pool_unchecked(name: &str) -> Vec<Got> {
    match name {
        "advise_huge_pages" => vec![Got::Ok],
        "populate" | "populate default options" | "populate touch" | "populate_all" => vec![Got::Unchecked],
        "cloud_hypervisor_prefault" => vec![Got::PopulateOs(0)],
        _ => vec![Got::Unchecked],
    }
}

fn skip_unless_pool_empty() -> bool {
    if free_huge_pages() > 0 {
        println!(
            "skipped: the hugetlb pool has {} free pages; this test needs an empty pool",
            free_huge_pages()
        );
        return true;
    }
    false
}

#[test]
fn hugetlb_memory_with_an_empty_pool_is_refused_instead_of_sigbus() {
    if skip_unless_pool_empty() {
        return;
    }
    let len = 4 * MIB;
    let region = match anon_region(len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_HUGETLB) {
        Ok(r) => r,
        Err(e) => {
            println!("skipped: mmap(MAP_HUGETLB | MAP_NORESERVE): {e}");
            return;
        }
    };
    assert_eq!(region.host_backing().stores(), Stores::FaultInAll);
    let mem = with_anon(region);
    let expect: Expect = if host_support().populate_write { empty_pool } else { empty_pool_unchecked };
    run_all("MAP_HUGETLB with an empty pool", &mem, len, expect, true);
}

#[test]
fn a_hugetlb_memfd_with_an_empty_pool_is_refused_instead_of_sigbus() {
    if skip_unless_pool_empty() {
        return;
    }
    let len = 4 * MIB;
    let f = match memfd(len, true) {
        Ok(f) => f,
        Err(e) => {
            println!("skipped: memfd_create(MFD_HUGETLB): {e}");
            return;
        }
    };
    let m = match MmapRegion::<AtomicBitmap>::build(
        Some(FileOffset::new(f, 0)),
        len,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_SHARED | libc::MAP_NORESERVE,
    ) {
        Ok(m) => m,
        Err(e) => {
            println!("skipped: mmap of a hugetlbfs memfd with MAP_NORESERVE: {e}");
            return;
        }
    };
    let mem = with_anon(GuestRegionMmap::new(m, GuestAddress(HOSTILE)).unwrap());
    let expect: Expect = if host_support().populate_write { empty_pool } else { empty_pool_unchecked };
    run_all("hugetlbfs memfd with an empty pool", &mem, len, expect, true);
}

/// A region of unknown backing (no `mmap` flags vm-memory knows) over memory a store cannot
/// go to, its protection claimed writable: nothing but the kernel can tell, and it does.
fn unknown_unwritable(name: &str) -> Vec<Got> {
    let refused = if host_support().populate_write { Got::Refused(libc::EINVAL) } else { Got::Unchecked };
    if populates(name) {
        return if host_support().populate_write {
            vec![Got::PopulateOs(libc::EINVAL)]
        } else {
            vec![Got::Unchecked, Got::PopulateOs(0)]
        };
    }
    match name {
        "advise_huge_pages" => vec![Got::Ok],
        "reset discard" | "reset discard repopulate" => vec![Got::CannotDiscard, Got::Unchecked],
        _ => vec![refused],
    }
}

/// A region over `len` bytes at `host` that vm-memory did not map, with `prot` and no flags.
///
/// # Safety
///
/// `[host, host + len)` is a mapping of this process that stays mapped while the region lives.
unsafe fn raw_region(host: *mut u8, len: usize, prot: i32) -> GuestRegionMmap<AtomicBitmap> {
    // SAFETY: the caller's contract.
    let m = unsafe { MmapRegion::<AtomicBitmap>::build_raw(host, len, prot, 0) }.unwrap();
    GuestRegionMmap::new(m, GuestAddress(HOSTILE)).unwrap()
}

#[test]
fn a_pfnmap_mapping_of_unknown_backing_is_refused_by_the_kernel_not_a_signal() {
    let Some((host, len)) = vvar() else {
        println!("skipped: no [vvar] mapping in /proc/self/maps");
        return;
    };
    // SAFETY: the vDSO's data pages stay mapped for the life of the process.
    let region = unsafe { raw_region(host as *mut u8, len, libc::PROT_READ | libc::PROT_WRITE) };
    assert_eq!(region.host_backing().stores(), Stores::FaultInAll);
    let mem = with_anon(region);
    run_all("[vvar] claimed writable", &mem, len, unknown_unwritable, true);
    // With its true protection, it is refused before the kernel is asked.
    // SAFETY: as above.
    let mem = with_anon(unsafe { raw_region(host as *mut u8, len, libc::PROT_READ) });
    run_all("[vvar]", &mem, len, refused_by_protection, true);
}

#[test]
fn read_only_memory_of_unknown_backing_claimed_writable_is_refused_by_the_kernel() {
    let len = 2 * MIB;
    // SAFETY: a new anonymous mapping at an address the kernel picks: it overlaps nothing.
    let p = unsafe {
        libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
    };
    assert_ne!(p, libc::MAP_FAILED);
    {
        // SAFETY: `p` is mapped until the `munmap` below, after the memory is dropped.
        let mem = with_anon(unsafe { raw_region(p.cast(), len, libc::PROT_READ | libc::PROT_WRITE) });
        run_all("read-only memory claimed writable", &mem, len, unknown_unwritable, true);
        // The regression: populate's default method read the kernel's EINVAL as "no
        // MADV_POPULATE_WRITE here" and touched every page.
        let r = populate(&mem, GuestAddress(HOSTILE), len, &PopulateOptions::new(workers()));
        if host_support().populate_write {
            assert!(matches!(r, Err(Error::Os { op: HostOp::PopulateWrite, .. })), "{r:?}");
        }
    }
    // SAFETY: unmaps exactly the mapping made above, which nothing uses any more.
    assert_eq!(unsafe { libc::munmap(p, len) }, 0);
}

#[test]
fn a_refusal_in_one_region_does_not_switch_the_others_to_touching() {
    // Fresh anonymous memory, then memory of unknown backing the kernel refuses; populating both
    // fails, and a populate of the anonymous region alone afterwards still uses the kernel.
    let len = 2 * MIB;
    // SAFETY: a new anonymous mapping, as above.
    let p = unsafe {
        libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
    };
    assert_ne!(p, libc::MAP_FAILED);
    {
        // SAFETY: `p` is mapped until the `munmap` below.
        let mem = with_anon(unsafe { raw_region(p.cast(), len, libc::PROT_READ | libc::PROT_WRITE) });
        let o = PopulateOptions::new(Workers::new(Threads::Fixed(2)).with_placement(Placement::Unpinned));
        assert!(populate_all(&mem, &o).is_err());
        let r = populate(&mem, GuestAddress(0), HOSTILE as usize, &o).unwrap();
        assert_eq!(r.populated, HOSTILE);
        let expect =
            if host_support().populate_write { PopulateMethod::Madvise } else { PopulateMethod::Touch };
        assert_eq!((r.method, r.huge_pages), (expect, o.huge_pages));
    }
    // SAFETY: unmaps exactly the mapping made above.
    assert_eq!(unsafe { libc::munmap(p, len) }, 0);
}

#[test]
fn ordinary_backings_say_what_their_stores_need() {
    let anon = anon_region(2 * MIB, libc::PROT_READ | libc::PROT_WRITE, 0).unwrap();
    assert_eq!(anon.host_backing().stores(), Stores::Direct);
    let shared = shared_anon_region(2 * MIB, HOSTILE);
    assert_eq!(shared.host_backing().stores(), Stores::FaultInAbsent);
    let f = memfd(2 * MIB, false).unwrap();
    let r = file_region(f, 0, 2 * MIB, libc::MAP_SHARED, HOSTILE);
    assert_eq!((r.host_backing().stores(), r.host_backing().file_end()), (Stores::FaultInAbsent, None));
}

/// The remedy the crate's front page gives for a file truncated by someone else during a call:
/// a memfd sealed with `F_SEAL_SHRINK`. Another thread trying to shrink it all along is refused
/// by the kernel (`EPERM`) and every zero and reset of the sealed file succeeds (unsealed, the
/// same race is a `SIGBUS` in about 4 of 10 calls, which no test process survives).
#[test]
fn a_memfd_sealed_against_shrinking_cannot_be_truncated_under_a_call() {
    use rustix::fs::{MemfdFlags, SealFlags};
    if shmem_unchecked() {
        return;
    }
    let len = 8 * MIB;
    let fd = rustix::fs::memfd_create("sealed", MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING).unwrap();
    let file = std::fs::File::from(fd);
    file.set_len(len as u64).unwrap();
    rustix::fs::fcntl_add_seals(&file, SealFlags::SHRINK).unwrap();
    let other = file.try_clone().unwrap();
    let mem = with_anon(file_region(file, 0, len, libc::MAP_SHARED, HOSTILE));
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let shrinker = s.spawn(|| {
            let mut refused = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                match rustix::fs::ftruncate(&other, MIB as u64) {
                    Err(rustix::io::Errno::PERM) => refused += 1,
                    r => panic!("a sealed memfd shrank: {r:?}"),
                }
            }
            refused
        });
        for round in 0..20 {
            zero(&mem, GuestAddress(HOSTILE), len).unwrap_or_else(|e| panic!("zero {round}: {e}"));
            reset(&mem, GuestAddress(HOSTILE), len, ResetPolicy::Auto, &workers())
                .unwrap_or_else(|e| panic!("reset {round}: {e}"));
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(shrinker.join().unwrap() > 0);
    });
    assert_eq!(other.metadata().unwrap().len(), len as u64);
}
