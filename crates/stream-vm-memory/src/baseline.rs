//! Cloud Hypervisor's prefault, reimplemented beside [`populate`](crate::populate) as the
//! baseline it is measured against.
//!
//! What Cloud Hypervisor does (`vmm/src/prefault.rs`, `prefault_regions`): the regions one
//! after the other; for each, a thread count of
//!
//! ```text
//! min(available CPUs, 16, pages, max(1, region bytes / 4 GiB))
//! ```
//!
//! (the last term: about 4 GiB per thread), the region's pages split evenly between the
//! threads (the first `pages % threads` take one more), every thread started and waiting on a
//! barrier (so that no thread stack is mapped, which takes the `mmap_lock` for writing, while
//! another thread's populate holds it for reading), then one `madvise(MADV_POPULATE_WRITE)` per
//! thread over its whole share. The calling thread waits. Pages are the region's page size
//! (the huge page size for hugetlbfs); a region's bytes past its last whole page are not
//! prefaulted. Huge-page advice is not part of it: Cloud Hypervisor's memory manager applies
//! `MADV_HUGEPAGE` when it creates a region with `thp=on` (use
//! [`advise_huge_pages`](crate::advise_huge_pages) to set memory up the same way).
//!
//! Differences, all on inputs Cloud Hypervisor does not produce: a region smaller than one
//! page is skipped (Cloud Hypervisor would divide by a zero thread count), and errors come
//! back as this crate's [`Error::Os`] with the guest address of the failed share.
//!
//! Cloud Hypervisor's proposed NUMA-aware prefault pins each worker to its zone's host NUMA
//! node, drops the cap of 16 and prefaults all regions at once; [`populate`](crate::populate) does all three (with the
//! workspace's [`Threads`](stream_par::Threads) policy for the count).

use std::sync::Barrier;

use vm_memory::{GuestAddress, GuestMemoryBackend};

use crate::backing::RegionBacking;
use crate::error::{Error, HostOp};
use crate::range::all_region_pieces;
use crate::sys::{self, Advice};

/// Cloud Hypervisor's cap on prefault threads: 16.
pub const CLOUD_HYPERVISOR_MAX_THREADS: usize = 16;

/// Cloud Hypervisor's bytes per prefault thread: 4 GiB (`64 * (1 << 26)`).
pub const CLOUD_HYPERVISOR_BYTES_PER_THREAD: usize = 64 << 26;

/// Cloud Hypervisor's prefault thread count for a region of `num_pages` pages of `page_size`
/// bytes on a machine where `cpus` CPUs are available (0 only for a region of no whole page).
#[must_use]
pub fn cloud_hypervisor_threads(cpus: usize, page_size: usize, num_pages: usize) -> usize {
    cpus.min(CLOUD_HYPERVISOR_MAX_THREADS)
        .min(num_pages)
        .min((page_size.saturating_mul(num_pages) / CLOUD_HYPERVISOR_BYTES_PER_THREAD).max(1))
}

/// What [`cloud_hypervisor_prefault`] did for one region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaselineRegion {
    /// The region's first guest address.
    pub addr: GuestAddress,
    /// Bytes prefaulted (whole pages).
    pub bytes: u64,
    /// Threads used.
    pub threads: usize,
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
        let per = num_pages / threads;
        let extra = num_pages % threads;
        let barrier = Barrier::new(threads);
        let (region_host, region_guest) = (p.host, p.guest);
        let results: Vec<Result<(), Error>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|i| {
                    let barrier = &barrier;
                    s.spawn(move || {
                        barrier.wait();
                        let pages = per + usize::from(i < extra);
                        let first = i * per + i.min(extra);
                        let (host, len) = (region_host + first * page, pages * page);
                        // SAFETY: `[host, host + len)` is whole pages inside the region's
                        // mapping, kept alive by `pieces` for the whole call; MADV_POPULATE_WRITE
                        // changes no byte.
                        unsafe { sys::madvise(host, len, Advice::PopulateWrite) }.map_err(|source| {
                            Error::Os {
                                op: HostOp::PopulateWrite,
                                addr: GuestAddress(region_guest.0 + (first * page) as u64),
                                len: len as u64,
                                source,
                            }
                        })
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).collect()
        });
        results.into_iter().collect::<Result<(), Error>>()?;
        out.push(BaselineRegion { addr: p.guest, bytes: (num_pages * page) as u64, threads });
    }
    Ok(out)
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
