//! Helpers shared by the integration tests: guest memories of every backing this machine has,
//! a byte and dirty-bit model, residency from the kernel.
#![allow(dead_code, unreachable_pub)]

use std::fs::File;

use vm_memory::bitmap::{AtomicBitmap, Bitmap};
use vm_memory::{
    Bytes, FileOffset, GuestAddress, GuestMemoryBackend, GuestMemoryMmap, GuestMemoryRegion, GuestRegionMmap,
    MemoryRegionAddress, MmapRegion,
};

pub type Mem = GuestMemoryMmap<AtomicBitmap>;

/// The bitmap's page: vm-memory's `AtomicBitmap` default.
pub const PAGE: u64 = 4096;

/// Anonymous private regions at `(guest address, bytes)`, every byte `fill`, dirty bits clear.
pub fn anon(ranges: &[(u64, usize)], fill: u8) -> Mem {
    let ranges: Vec<(GuestAddress, usize)> = ranges.iter().map(|&(a, n)| (GuestAddress(a), n)).collect();
    let mem = Mem::from_ranges(&ranges).unwrap();
    set_all(&mem, fill);
    mem
}

/// Every byte of every region set to `fill` (with vm-memory's own writes), dirty bits cleared.
pub fn set_all(mem: &Mem, fill: u8) {
    for r in mem.iter() {
        mem.write_slice(&vec![fill; r.len() as usize], r.start_addr()).unwrap();
        vm_memory::MmapRegion::bitmap(r).reset();
    }
}

/// A memfd of `len` bytes (`hugetlb`: a `MFD_HUGETLB` one).
pub fn memfd(len: usize, hugetlb: bool) -> std::io::Result<File> {
    use rustix::fs::MemfdFlags;
    let flags = if hugetlb { MemfdFlags::CLOEXEC | MemfdFlags::HUGETLB } else { MemfdFlags::CLOEXEC };
    let fd = rustix::fs::memfd_create("stream-vm-memory-test", flags)?;
    let f = File::from(fd);
    f.set_len(len as u64)?;
    Ok(f)
}

/// A region mapping `len` bytes of `file` from `offset` with `flags`, at `guest`.
pub fn file_region(
    file: File,
    offset: u64,
    len: usize,
    flags: i32,
    guest: u64,
) -> GuestRegionMmap<AtomicBitmap> {
    let m = MmapRegion::<AtomicBitmap>::build(
        Some(FileOffset::new(file, offset)),
        len,
        libc::PROT_READ | libc::PROT_WRITE,
        flags,
    )
    .unwrap();
    GuestRegionMmap::new(m, GuestAddress(guest)).unwrap()
}

/// A shared anonymous region (`MAP_SHARED | MAP_ANONYMOUS`) at `guest`.
pub fn shared_anon_region(len: usize, guest: u64) -> GuestRegionMmap<AtomicBitmap> {
    let m = MmapRegion::<AtomicBitmap>::build(
        None,
        len,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_SHARED | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
    )
    .unwrap();
    GuestRegionMmap::new(m, GuestAddress(guest)).unwrap()
}

/// Whether this host lacks a working `MADV_POPULATE_WRITE` (a kernel before 5.14, qemu-user
/// before 8.1, which ignores `madvise`): the crate then refuses to write shmem (memfd, shared
/// anonymous memory), hugetlbfs memory and memory of unknown backing, since it cannot fault
/// their pages in safely first. Checks that a zero of a memfd says so and returns `true`, for
/// the caller to skip what needs such writes.
pub fn shmem_unchecked() -> bool {
    use stream_vm_memory::{Error, Unwritable};
    if stream_vm_memory::host_support().populate_write {
        return false;
    }
    let mem = GuestMemoryMmap::from_regions(vec![file_region(
        memfd(1 << 20, false).unwrap(),
        0,
        1 << 20,
        libc::MAP_SHARED,
        0,
    )])
    .unwrap();
    match stream_vm_memory::zero(&mem, GuestAddress(0), 4096) {
        Err(Error::Unwritable { why: Unwritable::Unchecked { .. }, .. }) => {}
        other => panic!("a host without MADV_POPULATE_WRITE wrote a memfd: {other:?}"),
    }
    println!("skipped: no MADV_POPULATE_WRITE here; the crate refuses shmem writes (checked)");
    true
}

/// Free huge pages of the default size, from `/proc/meminfo`.
pub fn free_huge_pages() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| m.lines().find_map(|l| l.strip_prefix("HugePages_Free:")?.trim().parse().ok()))
        .unwrap_or(0)
}

/// All bytes of the regions, concatenated in address order.
pub fn bytes(mem: &Mem) -> Vec<u8> {
    let mut all = Vec::new();
    for r in mem.iter() {
        let mut v = vec![0; r.len() as usize];
        mem.read_slice(&mut v, r.start_addr()).unwrap();
        all.extend(v);
    }
    all
}

/// `(guest address of each byte in `bytes` order)` as region ranges: `(start, len)`.
pub fn layout(mem: &Mem) -> Vec<(u64, u64)> {
    mem.iter().map(|r| (r.start_addr().0, r.len())).collect()
}

/// The dirty bits of every region, page by page: `(region start, bitmap page index)`.
pub fn dirty(mem: &Mem) -> Vec<(u64, u64)> {
    let mut v = Vec::new();
    for r in mem.iter() {
        let mut k = 0;
        while k * PAGE < r.len() {
            if r.bitmap().dirty_at((k * PAGE) as usize) {
                v.push((r.start_addr().0, k));
            }
            k += 1;
        }
    }
    v
}

/// The dirty bits a write of `addr..addr + len` must set, page by page (pages counted from
/// each region's start, as the bitmap counts them).
pub fn dirty_model(layout: &[(u64, u64)], ranges: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut v = Vec::new();
    for &(start, rlen) in layout {
        let mut k = 0;
        while k * PAGE < rlen {
            let (p0, p1) = (start + k * PAGE, start + ((k + 1) * PAGE).min(rlen));
            if ranges.iter().any(|&(a, n)| n > 0 && a < p1 && a + n > p0) {
                v.push((start, k));
            }
            k += 1;
        }
    }
    v
}

/// Applies `f(guest address) -> Option<new byte>` to a byte model laid out as [`bytes`].
pub fn model_apply(model: &mut [u8], layout: &[(u64, u64)], f: impl Fn(u64) -> Option<u8>) {
    let mut i = 0;
    for &(start, len) in layout {
        for a in start..start + len {
            if let Some(b) = f(a) {
                model[i] = b;
            }
            i += 1;
        }
    }
}

/// Host address of guest `addr`.
pub fn host(mem: &Mem, addr: u64) -> usize {
    let r = mem.find_region(GuestAddress(addr)).unwrap();
    r.get_host_address(MemoryRegionAddress(addr - r.start_addr().0)).unwrap() as usize
}

/// Residency of each base page of `len` bytes of host memory from `host` (page-aligned).
pub fn resident(host: usize, len: usize) -> Vec<bool> {
    let page = rustix::param::page_size();
    let mut vec = vec![0u8; len.div_ceil(page)];
    // SAFETY: mincore only looks the range up in the page tables and writes `vec`, which has
    // one byte per page of the range.
    let r = unsafe { libc::mincore(host as *mut libc::c_void, len, vec.as_mut_ptr()) };
    assert_eq!(r, 0, "mincore: {}", std::io::Error::last_os_error());
    vec.iter().map(|&b| b & 1 == 1).collect()
}

/// Residency of the whole pages of guest `addr..addr + len` (one region).
pub fn resident_guest(mem: &Mem, addr: u64, len: usize) -> Vec<bool> {
    resident(host(mem, addr), len)
}

/// The first `[vvar]` (or `[vvar_vclock]`) mapping of this process: `VM_PFNMAP | VM_IO`.
pub fn vvar() -> Option<(usize, usize)> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let line = maps.lines().find(|l| l.ends_with("[vvar]") || l.ends_with("[vvar_vclock]"))?;
    let (a, rest) = line.split_once('-')?;
    let b = rest.split_whitespace().next()?;
    let (a, b) = (usize::from_str_radix(a, 16).ok()?, usize::from_str_radix(b, 16).ok()?);
    Some((a, b - a))
}

/// Whether a hugetlbfs test can run with `need` free huge pages (and shmem checks); says why
/// not when it cannot.
pub fn huge_pages_for_a_test(need: u64) -> bool {
    if shmem_unchecked() {
        return false;
    }
    if free_huge_pages() < need {
        println!(
            "skipped: {} free huge pages (HugePages_Free in /proc/meminfo), {need} needed; reserve some with \
             `echo 16 > /proc/sys/vm/nr_hugepages` to run it",
            free_huge_pages()
        );
        return false;
    }
    true
}

/// Guest address of the hostile region: after 8 MiB of anonymous memory.
pub const HOSTILE: u64 = 8 << 20;

/// 8 MiB of anonymous memory at 0, then `hostile` at [`HOSTILE`].
pub fn with_anon(hostile: GuestRegionMmap<AtomicBitmap>) -> Mem {
    let m = MmapRegion::<AtomicBitmap>::build(
        None,
        HOSTILE as usize,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
    )
    .unwrap();
    GuestMemoryMmap::from_regions(vec![GuestRegionMmap::new(m, GuestAddress(0)).unwrap(), hostile]).unwrap()
}

/// `len` bytes of private anonymous memory mapped with `prot` (and `extra` flags) at [`HOSTILE`].
pub fn anon_region(len: usize, prot: i32, extra: i32) -> std::io::Result<GuestRegionMmap<AtomicBitmap>> {
    let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | extra;
    let m = MmapRegion::<AtomicBitmap>::build(None, len, prot, flags).map_err(std::io::Error::other)?;
    Ok(GuestRegionMmap::new(m, GuestAddress(HOSTILE)).unwrap())
}

/// A file mapping truncated to half its length after mapping: the second half is past the end.
pub fn short_file(flags: i32) -> (Mem, usize) {
    let len = 4 << 20;
    let f = memfd(len, false).unwrap();
    let keep = f.try_clone().unwrap();
    let m = MmapRegion::<AtomicBitmap>::build(
        Some(FileOffset::new(f, 0)),
        len,
        libc::PROT_READ | libc::PROT_WRITE,
        flags,
    )
    .unwrap();
    let mem = with_anon(GuestRegionMmap::new(m, GuestAddress(HOSTILE)).unwrap());
    keep.set_len((len / 2) as u64 + 100).unwrap();
    (mem, len)
}

/// A property test's configuration: `cases` cases, or `PROPTEST_CASES` where that is set (CI
/// lowers it under emulation and sanitizers; docs/testing.md, "Sizes").
pub fn proptest_config(cases: u32) -> proptest::prelude::ProptestConfig {
    let env = std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok());
    proptest::prelude::ProptestConfig { cases: env.unwrap_or(cases), ..Default::default() }
}
