//! The VMMs' prefault algorithms, reimplemented as the baselines of `guest-memory-populate` (on
//! private anonymous regions only): Cloud Hypervisor's, its NUMA-aware proposal, QEMU's, and one
//! `MADV_POPULATE_WRITE` per region. Each faults every page in for writing and changes no byte.

use std::io;
use std::ops::Range;
use std::sync::atomic::{AtomicU8, Ordering};

use stream_vm_memory::{BackingKind, RegionBacking};
use vm_memory::bitmap::AtomicBitmap;
use vm_memory::{GuestAddress, GuestMemoryBackend, GuestMemoryMmap, GuestMemoryRegion};

/// The bench's guest memory.
type Mem = GuestMemoryMmap<AtomicBitmap>;

/// Cloud Hypervisor's cap on prefault threads: 16.
pub const CLOUD_HYPERVISOR_MAX_THREADS: usize = 16;

/// Cloud Hypervisor's bytes per prefault thread: 4 GiB (`64 * (1 << 26)`).
pub const CLOUD_HYPERVISOR_BYTES_PER_THREAD: usize = 64 << 26;

/// QEMU's cap on preallocation threads: 16 (`MAX_MEM_PREALLOC_THREAD_COUNT`).
pub const QEMU_MAX_THREADS: usize = 16;

/// QEMU's least memory per preallocation thread: 64 MiB.
pub const QEMU_BYTES_PER_THREAD: usize = 64 << 20;

/// Cloud Hypervisor's prefault thread count for a region of `num_pages` pages of `page_size`
/// bytes with `cpus` CPUs available (0 only for a region of no whole page).
#[must_use]
pub fn cloud_hypervisor_threads(cpus: usize, page_size: usize, num_pages: usize) -> usize {
    cpus.min(CLOUD_HYPERVISOR_MAX_THREADS)
        .min(num_pages)
        .min((page_size.saturating_mul(num_pages) / CLOUD_HYPERVISOR_BYTES_PER_THREAD).max(1))
}

/// QEMU's preallocation thread count (`get_memset_num_threads`) for a backend of `num_pages`
/// pages of `page_size` bytes, `prealloc_threads` asked (0 counts as 1), `cpus` online CPUs
/// (0: unknown, one thread, as when QEMU's `sysconf` fails). 0 only for no page.
#[must_use]
pub fn qemu_prealloc_threads(
    cpus: usize,
    prealloc_threads: usize,
    page_size: usize,
    num_pages: usize,
) -> usize {
    let n = if cpus > 0 { cpus.min(QEMU_MAX_THREADS).min(prealloc_threads.max(1)) } else { 1 };
    n.min(num_pages).min((page_size.saturating_mul(num_pages) / QEMU_BYTES_PER_THREAD).max(1))
}

/// The pages of each of `threads` workers when `num_pages` pages are split as Cloud
/// Hypervisor and QEMU split them: contiguous and in order, `num_pages / threads` each and one
/// more for the first `num_pages % threads` (empty ranges for workers past the pages).
#[must_use]
pub fn split_pages(num_pages: usize, threads: usize) -> Vec<Range<usize>> {
    let (per, extra) = (num_pages / threads.max(1), num_pages % threads.max(1));
    (0..threads)
        .map(|i| {
            let first = i * per + i.min(extra);
            first..first + per + usize::from(i < extra)
        })
        .collect()
}

/// [`split_pages`] of runs of `runs[k]` pages laid end to end: for each of `threads` workers
/// the parts of its share, in order, as `(run index, pages of that run)`, none empty.
#[must_use]
pub fn split_runs(runs: &[usize], threads: usize) -> Vec<Vec<(usize, Range<usize>)>> {
    // Saturating: runs of more than `usize::MAX` pages in all (no host has them) end there.
    split_pages(runs.iter().fold(0, |a: usize, &n| a.saturating_add(n)), threads)
        .into_iter()
        .map(|share| {
            let mut base = 0usize;
            let mut parts = Vec::new();
            for (k, &n) in runs.iter().enumerate() {
                let (a, b) = (share.start.max(base), share.end.min(base.saturating_add(n)));
                if a < b {
                    parts.push((k, a - base..b - base));
                }
                base = base.saturating_add(n);
            }
            parts
        })
        .collect()
}

/// What a baseline did for one region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaselineRegion {
    /// The region's first guest address.
    pub addr: GuestAddress,
    /// Bytes prefaulted, in whole pages.
    pub bytes: u64,
    /// The threads that worked on this region.
    pub threads: usize,
}

/// One region of the bench's memory: host address, length, guest address, page size.
#[derive(Debug, Clone, Copy)]
struct Region {
    host: usize,
    len: usize,
    guest: GuestAddress,
    page: usize,
}

impl Region {
    /// The call over `pages` (of this region's page size).
    fn call(&self, pages: &Range<usize>) -> Call {
        Call { host: self.host + pages.start * self.page, len: pages.len() * self.page }
    }
}

/// The regions of `mem`, refused unless every one is private anonymous memory (where a store,
/// QEMU's touch, cannot raise a signal, and `madvise` has the mapping to itself).
fn regions(mem: &Mem) -> io::Result<Vec<Region>> {
    mem.iter()
        .map(|r| {
            let b = r.host_backing();
            if b.kind != BackingKind::PrivateAnonymous || b.hugetlb {
                return Err(io::Error::other(format!("{:?}: not private anonymous memory", r.start_addr())));
            }
            Ok(Region {
                host: r.as_ptr() as usize,
                len: r.len() as usize,
                guest: r.start_addr(),
                page: b.page_size,
            })
        })
        .collect()
}

/// One `madvise` (or touch) of a worker: `len` bytes at host address `host`.
#[derive(Debug, Clone, Copy)]
struct Call {
    host: usize,
    len: usize,
}

/// Faults `call` in: `MADV_POPULATE_WRITE`, or with `touch` (the page size) QEMU's touch.
///
/// # Safety
///
/// `call` is whole pages of a private anonymous mapping of the caller's guest memory, mapped
/// for the whole call and covered by no Rust reference; with `touch`, `host` and `len` are
/// multiples of it.
unsafe fn fault_in(call: Call, touch: Option<usize>) -> io::Result<()> {
    let Some(page) = touch else {
        // SAFETY: the range is mapped (the caller's contract); MADV_POPULATE_WRITE changes no
        // byte and only faults pages in.
        let r = unsafe { libc::madvise(call.host as *mut libc::c_void, call.len, libc::MADV_POPULATE_WRITE) };
        return if r == 0 { Ok(()) } else { Err(io::Error::last_os_error()) };
    };
    for at in (call.host..call.host + call.len).step_by(page) {
        // SAFETY: `at` is a byte of a mapped, writable private anonymous mapping (a store there
        // raises no signal) that no Rust reference covers; `u8` needs no alignment. It is
        // accessed only atomically here; other accesses are vm-memory's volatile ones.
        let byte = unsafe { AtomicU8::from_ptr(at as *mut u8) };
        // `black_box`: a store the compiler could prove redundant would take no write fault.
        byte.store(std::hint::black_box(byte.load(Ordering::Relaxed)), Ordering::Relaxed);
    }
    Ok(())
}

/// Runs every worker (its calls) on a thread of its own, all started together; the calling
/// thread waits. The first error in worker order comes back, and a thread that cannot start
/// (too many for the host) is an error too: the ones started then do nothing.
///
/// # Safety
///
/// Every call meets [`fault_in`]'s contract with `touch`.
unsafe fn run_workers(workers: &[Vec<Call>], touch: Option<usize>) -> io::Result<()> {
    // SAFETY: forwarded.
    unsafe { run_workers_with(workers, touch, std::thread::Builder::new) }
}

/// [`run_workers`] with the threads made by `builder` (a test's cannot start).
///
/// # Safety
///
/// As for [`run_workers`].
unsafe fn run_workers_with(
    workers: &[Vec<Call>],
    touch: Option<usize>,
    builder: impl Fn() -> std::thread::Builder,
) -> io::Result<()> {
    // A barrier that can be called off: the last worker to arrive opens it (`Some(true)`) and
    // goes on without sleeping, as `std::sync::Barrier`'s does; a worker that cannot start
    // makes the caller close it (`Some(false)`), and every worker started returns at once.
    let n = workers.len();
    let gate = (std::sync::Mutex::new((0usize, None::<bool>)), std::sync::Condvar::new());
    let lock = || gate.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    std::thread::scope(|s| {
        let mut handles = Vec::with_capacity(n);
        let mut failed = None;
        for (i, calls) in workers.iter().enumerate() {
            let (gate, lock) = (&gate, &lock);
            let spawned = builder().spawn_scoped(s, move || {
                let mut g = lock();
                g.0 += 1;
                if g.0 == n && g.1.is_none() {
                    g.1 = Some(true);
                    gate.1.notify_all();
                }
                while g.1.is_none() {
                    g = gate.1.wait(g).unwrap_or_else(std::sync::PoisonError::into_inner);
                }
                if g.1 == Some(false) {
                    return Ok(());
                }
                drop(g);
                // SAFETY: the caller's contract, for each call.
                calls.iter().try_for_each(|&c| unsafe { fault_in(c, touch) })
            });
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    failed = Some(io::Error::new(
                        e.kind(),
                        format!("prefault worker {i} of {n} could not start: {e}"),
                    ));
                    lock().1 = Some(false);
                    gate.1.notify_all();
                    break;
                }
            }
        }
        let joined = handles.into_iter().try_for_each(|h| h.join().expect("a prefault worker panicked"));
        failed.map_or(joined, Err)
    })
}

/// Prefaults every region of `mem` as Cloud Hypervisor mainline does (`vmm/src/prefault.rs`),
/// with `cpus` as its available parallelism: region after region,
/// [`cloud_hypervisor_threads`] threads each over its whole pages ([`split_pages`]), started
/// together behind a barrier, one `MADV_POPULATE_WRITE` per thread; a partial last page is
/// left out.
///
/// # Errors
///
/// Memory other than private anonymous, before anything is done; a failed `madvise`.
pub fn cloud_hypervisor_prefault(mem: &Mem, cpus: usize) -> io::Result<Vec<BaselineRegion>> {
    let mut out = Vec::new();
    for r in regions(mem)? {
        let num_pages = r.len / r.page;
        let threads = cloud_hypervisor_threads(cpus, r.page, num_pages);
        if threads == 0 {
            continue;
        }
        let workers: Vec<Vec<Call>> =
            split_pages(num_pages, threads).iter().map(|p| vec![r.call(p)]).collect();
        // SAFETY: whole pages of the region, private anonymous (`regions`), mapped while `mem`
        // is borrowed and reached only through raw pointers.
        unsafe { run_workers(&workers, None) }?;
        out.push(BaselineRegion { addr: r.guest, bytes: (num_pages * r.page) as u64, threads });
    }
    Ok(out)
}

/// Prefaults every region of `mem` as Cloud Hypervisor's NUMA-aware proposal (pull request
/// #8785) does on memory of no known node: one unpinned group, all regions' whole pages split
/// between `threads` workers ([`split_runs`]; 0 counts as 1).
///
/// # Errors
///
/// As for [`cloud_hypervisor_prefault`], after every worker finished.
pub fn cloud_hypervisor_numa_prefault(mem: &Mem, threads: usize) -> io::Result<Vec<BaselineRegion>> {
    let regions = regions(mem)?;
    let runs: Vec<usize> = regions.iter().map(|r| r.len / r.page).collect();
    let mut threads_of = vec![0; regions.len()];
    let workers: Vec<Vec<Call>> = split_runs(&runs, threads.max(1))
        .into_iter()
        .filter(|share| !share.is_empty())
        .map(|share| {
            share
                .iter()
                .map(|(k, pages)| {
                    threads_of[*k] += 1;
                    regions[*k].call(pages)
                })
                .collect()
        })
        .collect();
    // SAFETY: as in `cloud_hypervisor_prefault`: whole pages of each region.
    unsafe { run_workers(&workers, None) }?;
    Ok(regions
        .iter()
        .zip(runs.iter().zip(threads_of))
        .filter(|(_, (n, _))| **n > 0)
        .map(|(r, (n, threads))| BaselineRegion { addr: r.guest, bytes: (n * r.page) as u64, threads })
        .collect())
}

/// Preallocates every region of `mem` as QEMU's `qemu_prealloc_mem` (`util/oslib-posix.c`)
/// does, one region after the other: [`qemu_prealloc_threads`] threads over contiguous chunks,
/// `MADV_POPULATE_WRITE`, or QEMU's touch of one byte per page where that fails with `EINVAL`.
///
/// # Errors
///
/// As for [`cloud_hypervisor_prefault`].
pub fn qemu_prealloc(mem: &Mem, prealloc_threads: usize, cpus: usize) -> io::Result<Vec<BaselineRegion>> {
    let mut out = Vec::new();
    for r in regions(mem)? {
        let num_pages = r.len.div_ceil(r.page);
        let threads = qemu_prealloc_threads(cpus, prealloc_threads, r.page, num_pages);
        // QEMU's check (`madv_populate_write_possible`): the advice on the first page.
        // SAFETY: the region's first page, private anonymous and mapped while `mem` is borrowed.
        let touch = match unsafe { fault_in(Call { host: r.host, len: r.page }, None) } {
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Some(r.page),
            _ => None,
        };
        let workers: Vec<Vec<Call>> =
            split_pages(num_pages, threads).iter().map(|p| vec![r.call(p)]).collect();
        if touch.is_none() && threads == 1 {
            // SAFETY: the region's pages, the last rounded up (the kernel maps whole pages),
            // as in `cloud_hypervisor_prefault`.
            unsafe { fault_in(workers[0][0], None) }?;
        } else {
            // SAFETY: as above; the touch only on this private anonymous memory, whose host
            // address `mmap` placed at a page boundary.
            unsafe { run_workers(&workers, touch) }?;
        }
        out.push(BaselineRegion { addr: r.guest, bytes: (num_pages * r.page) as u64, threads });
    }
    Ok(out)
}

/// Prefaults every region of `mem` with one `madvise(MADV_POPULATE_WRITE)` over the whole
/// region (rounded up to whole pages), one region after the other, on the calling thread.
///
/// # Errors
///
/// As for [`cloud_hypervisor_prefault`].
pub fn single_populate_write(mem: &Mem) -> io::Result<Vec<BaselineRegion>> {
    regions(mem)?
        .iter()
        .map(|r| {
            let len = r.len.next_multiple_of(r.page);
            // SAFETY: the whole region up to its next page boundary (where the kernel maps it),
            // as in `cloud_hypervisor_prefault`.
            unsafe { fault_in(Call { host: r.host, len }, None) }?;
            Ok(BaselineRegion { addr: r.guest, bytes: len as u64, threads: 1 })
        })
        .collect()
}

#[cfg(test)]
mod tests;
