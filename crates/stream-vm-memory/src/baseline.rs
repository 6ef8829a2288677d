//! The prefault algorithms of the VMMs, reimplemented beside [`populate`](crate::populate) as
//! the baselines it is measured against (`memmap-bench guest-memory`):
//!
//! | function | reimplements |
//! |---|---|
//! | [`cloud_hypervisor_prefault`] | Cloud Hypervisor mainline (`vmm/src/prefault.rs`, `prefault_regions`) |
//! | [`cloud_hypervisor_numa_prefault`] | Cloud Hypervisor's proposed NUMA-aware prefault (pull request #8785, not merged) |
//! | [`qemu_prealloc`] | QEMU's `qemu_prealloc_mem` (`util/oslib-posix.c`), once per memory backend as `backends/hostmem.c` calls it |
//! | [`single_populate_write`] | one `madvise(MADV_POPULATE_WRITE)` per region on the calling thread, what a VMM without a parallel prefault does |
//!
//! Each faults pages in for writing and changes no byte (nothing is marked dirty), checks the
//! regions first as [`populate_all`](crate::populate_all) does, and reports each region's
//! bytes and the threads that worked on it ([`BaselineRegion`]). Huge-page advice is not part
//! of any of them: the VMMs apply `MADV_HUGEPAGE` when they create a region (Cloud
//! Hypervisor's `thp=on`, QEMU on all anonymous guest RAM); use
//! [`advise_huge_pages`](crate::advise_huge_pages) to set memory up the same way.
//!
//! # Cloud Hypervisor mainline
//!
//! What Cloud Hypervisor does (`prefault_regions`): the regions one after the other; for
//! each, a thread count of
//!
//! ```text
//! min(available CPUs, 16, pages, max(1, region bytes / 4 GiB))
//! ```
//!
//! (the last term: about 4 GiB per thread), the region's pages split evenly between the
//! threads ([`split_pages`]: the first `pages % threads` take one more), every thread started
//! and waiting on a barrier (so that no thread stack is mapped, which takes the `mmap_lock` for
//! writing, while another thread's populate holds it for reading), then one
//! `madvise(MADV_POPULATE_WRITE)` per thread over its whole share. The calling thread waits.
//! Pages are the region's page size (the huge page size for hugetlbfs); a region's bytes past
//! its last whole page are not prefaulted.
//!
//! Differences, all on inputs Cloud Hypervisor does not produce: a region smaller than one
//! page is skipped (Cloud Hypervisor would divide by a zero thread count), and errors come
//! back as this crate's [`Error::Os`] with the guest address of the failed share.
//!
//! # Cloud Hypervisor's NUMA-aware prefault (pull request #8785)
//!
//! What the pull request does: each prefault worker pinned, best effort, to the CPUs of its
//! memory zone's `host_numa_node`, intersected with the worker's current affinity (an
//! operator's restriction is never widened); the cap of 16 workers dropped for the host's
//! available parallelism; and every region prefaulted at once: the workers of all regions are
//! started first and wait on one barrier spanning them all, then each makes one
//! `MADV_POPULATE_WRITE` over its share.
//!
//! Here ([`cloud_hypervisor_numa_prefault`]): the node of each part of the memory is learned
//! as this crate's parallel functions learn it ([`Placement`]: from the kernel, which knows
//! the node of a resident page and of a page that a single-node `mbind` policy places, or from
//! the ranges a VMM gives in [`Placement::Topology`]). The memory of each node is one worker
//! group whose workers pin themselves (best effort) to that node's CPUs that the calling
//! thread may use; memory of no known node is one unpinned group. The thread count is a
//! parameter (the pull request takes the host's available parallelism): the workers are split
//! between the groups in proportion to their bytes, at least one each (`max(threads, groups)`
//! in all). A group's whole pages, its regions laid end to end in address order, are split
//! evenly between its workers ([`split_runs`]: contiguous shares, the first `pages % workers`
//! one page more), and a worker makes one `MADV_POPULATE_WRITE` per region its share crosses
//! (in the pull request a share lies inside one region; here a worker can end one region and
//! begin the next). Every worker is started and pinned before the barrier; the calling thread
//! waits. Pages are whole, as in mainline.
//!
//! **On a one-node host** (or with [`Placement::Unpinned`]) there is one unpinned group, and
//! this is all regions at once over `threads` threads: mainline without its cap of 16, its
//! 4 GiB per thread and its region-after-region order.
//!
//! # QEMU
//!
//! What QEMU does (`qemu_prealloc_mem`, `touch_all_pages`), for each memory backend with
//! `prealloc=on`, one backend after the other: it checks whether it can use
//! `MADV_POPULATE_WRITE` on this mapping (`madv_populate_write_possible`: the advice on the
//! first page, usable unless it fails with `EINVAL`, as on a kernel before 5.14), takes
//!
//! ```text
//! min(online CPUs, 16, prealloc-threads, pages, max(1, bytes / 64 MiB))
//! ```
//!
//! threads ([`qemu_prealloc_threads`]), splits the pages into contiguous chunks of
//! `pages / threads`, the first `pages % threads` one page more ([`split_pages`]), and with
//! `MADV_POPULATE_WRITE` on one thread makes the one call on the calling thread. Otherwise it
//! creates the threads (through the backend's `prealloc-context` when it has one: a thread
//! context with `node-affinity` creates them on that node's CPUs), which wait until all are
//! created, then each makes one `MADV_POPULATE_WRITE` over its chunk or, without the advice,
//! reads one byte per page and writes the value back. The calling thread waits. Pages are the
//! backend's page size, counted rounded up (`DIV_ROUND_UP`): a partial last page is faulted
//! in too.
//!
//! Differences: each region stands for one backend; the thread context is a node
//! ([`QemuPrealloc::node`]) whose CPUs (those the calling thread may use) the workers pin
//! themselves to, best effort (QEMU fails to create the context if it cannot set the
//! affinity); the check also counts an advice that succeeds without effect (qemu-user before
//! 8.1) as unusable; without the advice only private anonymous memory is touched
//! ([`Stores::Direct`]: no store there can raise the `SIGBUS` that QEMU catches), other memory
//! is refused before anything is done ([`Unwritable::Unchecked`]) or, where the kernel refuses
//! the advice for that one mapping, [`Unwritable::Refused`]; the touch is an atomic load and
//! store of the same value (the instructions of QEMU's volatile read and write on x86-64 and
//! arm64), and like QEMU's it can lose a store another thread makes between the two:
//! preallocate before vCPUs run, as QEMU does. A `prealloc-threads` of 0 counts as 1 (QEMU
//! refuses it).
//!
//! # One `MADV_POPULATE_WRITE` per region
//!
//! [`single_populate_write`]: each region whole, one after the other, on the calling thread
//! (the kernel rounds the length up to whole pages, so a partial last page is faulted in).

use std::ops::Range;
use std::sync::Barrier;
use std::sync::atomic::{AtomicU8, Ordering};

use vm_memory::{GuestAddress, GuestMemoryBackend};

use crate::backing::{BASE_PAGE, RegionBacking, Stores};
use crate::engine::{self, Placement, RegionPart, Span, Unit};
use crate::error::{Error, HostOp, Unwritable};
use crate::numa::{MemoryNodes, Topology};
use crate::populate::{PopulateMethod, resolved};
use crate::range::all_region_pieces;
use crate::sys::{self, Advice};

/// Cloud Hypervisor's cap on prefault threads: 16.
pub const CLOUD_HYPERVISOR_MAX_THREADS: usize = 16;

/// Cloud Hypervisor's bytes per prefault thread: 4 GiB (`64 * (1 << 26)`).
pub const CLOUD_HYPERVISOR_BYTES_PER_THREAD: usize = 64 << 26;

/// QEMU's cap on preallocation threads: 16 (`MAX_MEM_PREALLOC_THREAD_COUNT`).
pub const QEMU_MAX_THREADS: usize = 16;

/// QEMU's least memory per preallocation thread: 64 MiB.
pub const QEMU_BYTES_PER_THREAD: usize = 64 << 20;

/// Cloud Hypervisor's prefault thread count for a region of `num_pages` pages of `page_size`
/// bytes on a machine where `cpus` CPUs are available (0 only for a region of no whole page).
#[must_use]
pub fn cloud_hypervisor_threads(cpus: usize, page_size: usize, num_pages: usize) -> usize {
    cpus.min(CLOUD_HYPERVISOR_MAX_THREADS)
        .min(num_pages)
        .min((page_size.saturating_mul(num_pages) / CLOUD_HYPERVISOR_BYTES_PER_THREAD).max(1))
}

/// QEMU's preallocation thread count (`get_memset_num_threads`) for a backend of `num_pages`
/// pages of `page_size` bytes, with `prealloc_threads` asked (0 counts as 1) on a machine
/// with `cpus` online CPUs (0: unknown, one thread, as when QEMU's `sysconf` fails). 0 only
/// for no page.
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
/// more for the first `num_pages % threads`. With more workers than pages the last ones get
/// an empty range; no worker, no range.
#[must_use]
pub fn split_pages(num_pages: usize, threads: usize) -> Vec<Range<usize>> {
    if threads == 0 {
        return Vec::new();
    }
    let (per, extra) = (num_pages / threads, num_pages % threads);
    (0..threads)
        .map(|i| {
            let first = i * per + i.min(extra);
            first..first + per + usize::from(i < extra)
        })
        .collect()
}

/// [`split_pages`] of runs of `runs[k]` pages laid end to end (one NUMA group's regions, for
/// [`cloud_hypervisor_numa_prefault`]): for each of `threads` workers the parts of its share,
/// in order, as `(run index, pages of that run)`, none of them empty (a worker with no page
/// has no part).
#[must_use]
pub fn split_runs(runs: &[usize], threads: usize) -> Vec<Vec<(usize, Range<usize>)>> {
    let total = runs.iter().sum();
    split_pages(total, threads)
        .into_iter()
        .map(|share| {
            let mut parts = Vec::new();
            let mut base = 0;
            for (k, &n) in runs.iter().enumerate() {
                let (a, b) = (share.start.max(base), share.end.min(base + n));
                if a < b {
                    parts.push((k, a - base..b - base));
                }
                base += n;
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
    /// Bytes prefaulted, in whole pages (Cloud Hypervisor's leave a partial last page out;
    /// QEMU's and the single call fault it in and count it whole).
    pub bytes: u64,
    /// Threads used: the threads that worked on this region (for
    /// [`cloud_hypervisor_numa_prefault`], whose workers can cross from one region into the
    /// next, a worker counts in each region it worked on).
    pub threads: usize,
}

/// QEMU's preallocation settings of one memory backend, for [`qemu_prealloc`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QemuPrealloc {
    /// `prealloc-threads` (QEMU's default: 1; 0 counts as 1).
    pub threads: usize,
    /// The online CPUs (`sysconf(_SC_NPROCESSORS_ONLN)` in QEMU).
    pub cpus: usize,
    /// The node of the backend's `prealloc-context` (a thread context with `node-affinity`):
    /// the workers pin themselves to its CPUs that the calling thread may use (best effort:
    /// unpinned where the host's topology does not know the node or none of its CPUs is
    /// allowed). `None`: no thread context, unpinned.
    pub node: Option<u32>,
    /// How pages are faulted in: [`PopulateMethod::Auto`] as QEMU decides (see the [module
    /// documentation](self)); [`PopulateMethod::Madvise`] always with `MADV_POPULATE_WRITE`;
    /// [`PopulateMethod::Touch`] with QEMU's touch of one byte per page, where a store cannot
    /// raise a signal ([`Stores::Direct`]), and `MADV_POPULATE_WRITE` elsewhere (what QEMU
    /// does on a kernel before 5.14, for the memory it can touch).
    pub method: PopulateMethod,
}

impl QemuPrealloc {
    /// `threads` preallocation threads on a machine of `cpus` online CPUs, no thread context,
    /// [`PopulateMethod::Auto`].
    #[must_use]
    pub fn new(threads: usize, cpus: usize) -> QemuPrealloc {
        QemuPrealloc { threads, cpus, node: None, method: PopulateMethod::Auto }
    }
}

/// One call of a worker: `len` bytes at host address `host` (guest `guest`).
#[derive(Debug, Clone, Copy)]
struct Call {
    host: usize,
    len: usize,
    guest: GuestAddress,
}

/// The call over `pages` (page indices, pages of `page` bytes) of the whole region `p`.
fn call_of<B>(p: &RegionPart<'_, B>, pages: &Range<usize>, page: usize) -> Call {
    let off = pages.start * page;
    Call { host: p.host + off, len: pages.len() * page, guest: GuestAddress(p.guest.0 + off as u64) }
}

/// How a worker faults its calls in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// `madvise(MADV_POPULATE_WRITE)` over each call.
    PopulateWrite,
    /// QEMU's touch: one byte per `page` bytes read and written back.
    Touch {
        /// The pages' size.
        page: usize,
    },
}

/// One thread of a baseline: the CPUs it pins itself to, and its calls.
#[derive(Debug, Clone)]
struct Worker {
    cpus: Option<Vec<usize>>,
    calls: Vec<Call>,
}

/// Runs every worker on a thread of its own: each pins itself (best effort) and waits on one
/// barrier with all the others, so that no thread stack is mapped while a populate runs, then
/// makes its calls in order, stopping at its first error. The calling thread waits; the
/// first error in worker order comes back.
///
/// # Safety
///
/// Every call of every worker is whole pages of a host mapping that stays mapped, readable
/// and writable, for the whole call and that no Rust reference covers; with [`Fault::Touch`],
/// of memory where a store cannot raise a signal ([`Stores::Direct`]) and whose length and
/// host address are multiples of its `page`.
unsafe fn run_workers(workers: &[Worker], fault: Fault) -> Result<(), Error> {
    let barrier = Barrier::new(workers.len());
    let results: Vec<Result<(), Error>> = std::thread::scope(|s| {
        let handles: Vec<_> = workers
            .iter()
            .map(|w| {
                let barrier = &barrier;
                s.spawn(move || {
                    if let Some(cpus) = &w.cpus {
                        // Best effort, as Cloud Hypervisor's pinning: unpinned work is still
                        // correct work.
                        let _ = sys::set_affinity(cpus);
                    }
                    barrier.wait();
                    // SAFETY: each call meets `fault_in`'s contract: it is the caller's
                    // contract for every call of every worker.
                    w.calls.iter().try_for_each(|c| unsafe { fault_in(c, fault) })
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).collect()
    });
    results.into_iter().collect()
}

/// Faults `c` in with `fault`.
///
/// # Safety
///
/// As for [`run_workers`], for this one call.
unsafe fn fault_in(c: &Call, fault: Fault) -> Result<(), Error> {
    match fault {
        Fault::PopulateWrite => {
            // SAFETY: `[host, host + len)` is mapped for the whole call (the caller's
            // contract); MADV_POPULATE_WRITE changes no byte.
            unsafe { sys::madvise(c.host, c.len, Advice::PopulateWrite) }.map_err(|source| Error::Os {
                op: HostOp::PopulateWrite,
                addr: c.guest,
                len: c.len as u64,
                source,
            })
        }
        Fault::Touch { page } => {
            // SAFETY: the caller's contract is `touch_write_back`'s: mapped readable and
            // writable, no reference over it, multiples of `page`, stores cannot raise a
            // signal.
            unsafe { touch_write_back(c.host, c.len, page) };
            Ok(())
        }
    }
}

/// QEMU's touch (`do_touch_pages`): the first byte of every `page`-sized page of
/// `[host, host + len)` read and the value written back, which takes a write fault and leaves
/// the byte as it was (unless another thread stores into it between the two, as in QEMU).
///
/// # Safety
///
/// `[host, host + len)` is mapped for reads and writes for the whole call and covered by no
/// Rust reference (guest RAM reached through `vm-memory`'s raw pointers); `host` and `len` are
/// multiples of `page`; a store there cannot raise a signal ([`Stores::Direct`]).
unsafe fn touch_write_back(host: usize, len: usize, page: usize) {
    let mut at = host;
    while at < host + len {
        // SAFETY: `at` is inside the mapped range (the caller's contract), so valid for reads
        // and writes of one byte, and `u8` needs no alignment. This code accesses the byte
        // only atomically; other accesses to guest RAM are vm-memory's volatile ones and the
        // guest's, from outside this program's abstract machine (as for `populate`'s touch).
        let byte = unsafe { AtomicU8::from_ptr(at as *mut u8) };
        // Relaxed: the store publishes nothing, it only has to be a write. `black_box` keeps
        // the compiler from seeing that the value stored is the value loaded (a store it
        // could prove redundant would take no write fault).
        let v = byte.load(Ordering::Relaxed);
        byte.store(std::hint::black_box(v), Ordering::Relaxed);
        at += page;
    }
}

/// Prefaults every region of `mem` as Cloud Hypervisor does (see the [module
/// documentation](self)), with `cpus` as its available parallelism
/// (`std::thread::available_parallelism()` there).
///
/// # Errors
///
/// Before anything is done: [`Error::Unwritable`] for a region mapped without `PROT_WRITE` or
/// whose file ends before it does (as for [`populate_all`](crate::populate_all)), and
/// [`Error::Memory`] if a region has no host mapping. [`Error::Os`] if a `madvise` fails (after
/// the other threads of the region finished).
pub fn cloud_hypervisor_prefault<M>(mem: &M, cpus: usize) -> Result<Vec<BaselineRegion>, Error>
where
    M: GuestMemoryBackend + ?Sized,
    M::R: RegionBacking,
{
    let pieces = all_region_pieces(mem)?;
    let mut out = Vec::new();
    for p in &pieces.pieces {
        let page = p.backing.page_size.max(1);
        let num_pages = p.len / page;
        let threads = cloud_hypervisor_threads(cpus, page, num_pages);
        if threads == 0 {
            continue;
        }
        let workers: Vec<Worker> = split_pages(num_pages, threads)
            .iter()
            .map(|pages| Worker { cpus: None, calls: vec![call_of(p, pages, page)] })
            .collect();
        // SAFETY: every call is whole pages (`split_pages` of the region's whole pages) inside
        // the region's writable mapping (`all_region_pieces` refused the others), kept mapped by
        // `pieces` for the whole call and reached only through raw pointers; PopulateWrite.
        unsafe { run_workers(&workers, Fault::PopulateWrite) }?;
        out.push(BaselineRegion { addr: p.guest, bytes: (num_pages * page) as u64, threads });
    }
    Ok(out)
}

/// Prefaults every region of `mem` as Cloud Hypervisor's NUMA-aware prefault (pull request
/// #8785) does (see the [module documentation](self)): all regions at once, one worker group
/// per host node that holds memory (as `placement` learns it), pinned to that node's CPUs,
/// `threads` workers in all (at least one per group; 0 counts as 1).
///
/// # Errors
///
/// As for [`cloud_hypervisor_prefault`]; a failed `madvise` is reported after every worker
/// finished.
pub fn cloud_hypervisor_numa_prefault<M>(
    mem: &M,
    threads: usize,
    placement: &Placement,
) -> Result<Vec<BaselineRegion>, Error>
where
    M: GuestMemoryBackend + ?Sized,
    M::R: RegionBacking,
{
    let pieces = all_region_pieces(mem)?;
    let spans: Vec<Span> = pieces.pieces.iter().map(RegionPart::span).collect();
    let mut workers = Vec::new();
    let mut threads_of = vec![0usize; spans.len()];
    for g in node_groups(&spans, threads.max(1), placement) {
        let runs: Vec<usize> = g.runs.iter().map(|(_, pages)| pages.len()).collect();
        for share in split_runs(&runs, g.threads).into_iter().filter(|s| !s.is_empty()) {
            let mut touched: Vec<usize> = share.iter().map(|(k, _)| g.runs[*k].0).collect();
            touched.dedup();
            touched.iter().for_each(|&i| threads_of[i] += 1);
            let calls = share
                .iter()
                .map(|(k, part)| {
                    let (i, run) = &g.runs[*k];
                    let pages = run.start + part.start..run.start + part.end;
                    call_of(&pieces.pieces[*i], &pages, spans[*i].page.max(1))
                })
                .collect();
            workers.push(Worker { cpus: g.cpus.clone(), calls });
        }
    }
    // SAFETY: every call is whole pages of one region (`page_range` keeps to the region's
    // whole pages, `split_runs` to the runs) inside its writable mapping (`all_region_pieces`
    // refused the others), kept mapped by `pieces` for the whole call and reached only through
    // raw pointers; PopulateWrite.
    unsafe { run_workers(&workers, Fault::PopulateWrite) }?;
    Ok(spans
        .iter()
        .zip(threads_of)
        .filter(|(s, _)| s.len >= s.page.max(1))
        .map(|(s, threads)| {
            let page = s.page.max(1);
            BaselineRegion { addr: s.guest, bytes: (s.len / page * page) as u64, threads }
        })
        .collect())
}

/// One worker group of [`cloud_hypervisor_numa_prefault`]: its CPUs, its runs as
/// `(region index, whole pages of that region)` in order, and its workers.
struct NodeGroup {
    cpus: Option<Vec<usize>>,
    runs: Vec<(usize, Range<usize>)>,
    threads: usize,
}

/// The worker groups of `threads` workers over `spans` under `placement`: the engine's plan
/// (runs of one node each, grouped by node, pinned to the node's allowed CPUs; the rest one
/// unpinned group), its workers split between the groups in proportion to their bytes.
fn node_groups(spans: &[Span], threads: usize, placement: &Placement) -> Vec<NodeGroup> {
    let groups = match engine::pinning(placement) {
        Some(t) => {
            let (units, nodes) = unit_nodes(spans, t);
            let allowed = sys::current_affinity().ok();
            // The plan pins only a call of two or more workers (a lone one runs on the calling
            // thread there); every worker here is a thread of its own, pinned as Cloud
            // Hypervisor pins it, so the groups are planned as for two and counted below.
            engine::plan(spans, Some((&units, &nodes)), Some(t), allowed.as_deref(), threads.max(2))
        }
        None => engine::plan(spans, None, None, None, threads),
    };
    let bytes: Vec<u64> = groups.iter().map(|g| g.bytes).collect();
    groups
        .into_iter()
        .zip(engine::shares(&bytes, threads))
        .map(|(g, threads)| NodeGroup {
            runs: g
                .runs
                .iter()
                .map(|r| (r.piece, page_range(&spans[r.piece], r.off, r.len)))
                .filter(|(_, pages)| !pages.is_empty())
                .collect(),
            cpus: g.cpus,
            threads,
        })
        .collect()
}

/// The NUMA lookup units of `spans` and the node of each, as the engine finds them for a
/// placement with topology `t` (cut at the guest ranges of [`MemoryNodes::Guest`]).
fn unit_nodes(spans: &[Span], t: &Topology) -> (Vec<Unit>, Vec<Option<u32>>) {
    let total: u64 = spans.iter().map(|s| s.len as u64).sum();
    let max_page = spans.iter().map(|s| s.page).max().unwrap_or(BASE_PAGE);
    let mut units = engine::units(spans, engine::unit_size(total, max_page));
    let nodes = match t.memory() {
        MemoryNodes::Kernel => {
            let addrs: Vec<usize> = units.iter().map(|u| spans[u.span].host + u.off).collect();
            crate::numa::memory_nodes_of(&addrs)
        }
        MemoryNodes::Guest(ranges) => {
            let cuts: Vec<u64> =
                ranges.iter().flat_map(|r| [r.addr.0, r.addr.0.saturating_add(r.len)]).collect();
            units = engine::split_units(spans, &units, &cuts);
            units.iter().map(|u| t.guest_node(GuestAddress(spans[u.span].guest.0 + u.off as u64))).collect()
        }
    };
    (units, nodes)
}

/// The whole pages of span `s` whose first byte lies in `off..off + len` (so that the runs of
/// one span share no page and together hold all its whole pages).
fn page_range(s: &Span, off: usize, len: usize) -> Range<usize> {
    let page = s.page.max(1);
    let whole = s.len / page;
    off.div_ceil(page).min(whole)..(off + len).div_ceil(page).min(whole)
}

/// Preallocates every region of `mem` as QEMU's `qemu_prealloc_mem` preallocates a memory
/// backend (see the [module documentation](self)), one region after the other, with
/// `options` as the backend's `prealloc-threads` and `prealloc-context`.
///
/// # Errors
///
/// Before anything is done: as for [`cloud_hypervisor_prefault`], and
/// [`Error::Unwritable`] with [`Unwritable::Unchecked`] for memory other than private
/// anonymous on a host without `MADV_POPULATE_WRITE` (where QEMU would touch it and catch the
/// `SIGBUS`). During the work, after the regions before: [`Unwritable::Refused`] for a region
/// whose mapping refuses the advice (`EINVAL`) and cannot be touched; [`Error::Os`] if a
/// `madvise` fails (after the other threads of the region finished).
pub fn qemu_prealloc<M>(mem: &M, options: &QemuPrealloc) -> Result<Vec<BaselineRegion>, Error>
where
    M: GuestMemoryBackend + ?Sized,
    M::R: RegionBacking,
{
    let pieces = all_region_pieces(mem)?;
    if resolved(options.method) == PopulateMethod::Touch {
        pieces.check_fault_in()?;
    }
    let cpus = options.node.and_then(allowed_cpus_of);
    let mut out = Vec::new();
    for p in &pieces.pieces {
        let page = p.backing.page_size.max(1);
        let num_pages = p.len.div_ceil(page);
        let threads = qemu_prealloc_threads(options.cpus, options.threads, page, num_pages);
        let fault = qemu_fault(p, page, options.method)?;
        if fault == Fault::PopulateWrite && threads == 1 {
            // QEMU: no thread for a single MADV_POPULATE_WRITE.
            // SAFETY: the region's pages, the last rounded up (the kernel maps a region up to
            // its next page boundary), inside its writable mapping (`all_region_pieces`
            // refused the others), kept mapped by `pieces` for the whole call and reached only
            // through raw pointers; PopulateWrite.
            unsafe { fault_in(&call_of(p, &(0..num_pages), page), fault) }?;
        } else {
            let workers: Vec<Worker> = split_pages(num_pages, threads)
                .iter()
                .map(|pages| Worker { cpus: cpus.clone(), calls: vec![call_of(p, pages, page)] })
                .collect();
            // SAFETY: every call is whole pages of the region (`split_pages` of its pages,
            // the last rounded up as above) inside its writable mapping, kept mapped by
            // `pieces` for the whole call and reached only through raw pointers; `qemu_fault`
            // chooses Touch only for `Stores::Direct` memory (private anonymous, whose host
            // address is page-aligned: `mmap` placed it), with its page size.
            unsafe { run_workers(&workers, fault) }?;
        }
        out.push(BaselineRegion { addr: p.guest, bytes: (num_pages * page) as u64, threads });
    }
    Ok(out)
}

/// How QEMU faults region `p` (pages of `page` bytes) in under `method`: for
/// [`PopulateMethod::Auto`] its check (`madv_populate_write_possible`: the advice on the first
/// page, usable unless refused with `EINVAL`; here also unless it has no effect), the touch
/// otherwise, where the memory allows it.
fn qemu_fault<B>(p: &RegionPart<'_, B>, page: usize, method: PopulateMethod) -> Result<Fault, Error> {
    let direct = p.backing.stores() == Stores::Direct;
    match method {
        PopulateMethod::Madvise => Ok(Fault::PopulateWrite),
        PopulateMethod::Touch => Ok(if direct { Fault::Touch { page } } else { Fault::PopulateWrite }),
        PopulateMethod::Auto => {
            // SAFETY: the region's first page, inside its mapping (which covers whole pages),
            // kept mapped by the caller's pieces; MADV_POPULATE_WRITE changes no byte.
            match unsafe { sys::madvise(p.host, page, Advice::PopulateWrite) } {
                Ok(()) => Ok(Fault::PopulateWrite),
                // QEMU uses the advice unless EINVAL; another error comes back from the calls.
                Err(e)
                    if !matches!(
                        e.kind(),
                        std::io::ErrorKind::InvalidInput | std::io::ErrorKind::Unsupported
                    ) =>
                {
                    Ok(Fault::PopulateWrite)
                }
                Err(_) if direct => Ok(Fault::Touch { page }),
                Err(e) => {
                    Err(Error::Unwritable { addr: p.guest, len: p.len as u64, why: Unwritable::Refused(e) })
                }
            }
        }
    }
}

/// The CPUs of host node `node` that the calling thread may use (`None`: the host's topology
/// does not know the node, or none of its CPUs is allowed).
fn allowed_cpus_of(node: u32) -> Option<Vec<usize>> {
    let cpus = Topology::host_cached()?.cpus_of(node)?;
    let allowed = sys::current_affinity().ok();
    let cpus: Vec<usize> =
        cpus.iter().copied().filter(|c| allowed.as_ref().is_none_or(|a| a.contains(c))).collect();
    (!cpus.is_empty()).then_some(cpus)
}

/// Prefaults every region of `mem` with one `madvise(MADV_POPULATE_WRITE)` over the whole
/// region, one region after the other, on the calling thread.
///
/// # Errors
///
/// As for [`cloud_hypervisor_prefault`]; [`Error::Os`] for the first region whose `madvise`
/// fails (the regions before it are populated).
pub fn single_populate_write<M>(mem: &M) -> Result<Vec<BaselineRegion>, Error>
where
    M: GuestMemoryBackend + ?Sized,
    M::R: RegionBacking,
{
    let pieces = all_region_pieces(mem)?;
    pieces
        .pieces
        .iter()
        .map(|p| {
            let len = p.len.next_multiple_of(p.backing.page_size.max(1));
            // SAFETY: the whole region, up to its next page boundary (where the kernel maps
            // it), writable (`all_region_pieces` refused the others), kept mapped by `pieces`
            // for the whole call and reached only through raw pointers; PopulateWrite.
            unsafe { fault_in(&Call { host: p.host, len, guest: p.guest }, Fault::PopulateWrite) }?;
            Ok(BaselineRegion { addr: p.guest, bytes: len as u64, threads: 1 })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
