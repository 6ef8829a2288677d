//! `padata_do_multithreaded()` (kernel/padata.c): split `[start, start + size)` into chunks and
//! run them on `nworks` threads, the caller being one of them.
//!
//! The arithmetic ([`PadataJob::plan`]) is no_std; running the job needs `std` threads
//! ([`padata_do_multithreaded`]). `numa_aware` placement (`queue_work_node` round-robin over
//! nodes) has no userspace equivalent and is not modelled: helpers are plain scoped threads.

/// A `struct padata_mt_job`, without the function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PadataJob {
    /// `start`.
    pub start: u64,
    /// `size`.
    pub size: u64,
    /// `align`.
    pub align: u64,
    /// `min_chunk`.
    pub min_chunk: u64,
    /// `max_threads`.
    pub max_threads: u64,
}

/// How [`padata_do_multithreaded`] splits a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PadataPlan {
    /// Threads working, the caller included (0 for an empty job).
    pub nworks: u64,
    /// `ps.chunk_size` (the whole job when `nworks == 1`).
    pub chunk: u64,
}

impl PadataJob {
    /// The job of `gather_bootmem_prealloc()`: one item per node id (`size = nr_node_ids`,
    /// `align = min_chunk = 1`), at most one thread per node with memory.
    #[must_use]
    pub const fn gather_bootmem(nr_node_ids: u64, nodes_with_memory: u64) -> PadataJob {
        PadataJob { start: 0, size: nr_node_ids, align: 1, min_chunk: 1, max_threads: nodes_with_memory }
    }

    /// `nworks` and `chunk_size` as `padata_do_multithreaded()` computes them
    /// (`load_balance_factor` 4).
    #[must_use]
    pub const fn plan(&self) -> PadataPlan {
        if self.size == 0 {
            return PadataPlan { nworks: 0, chunk: 0 };
        }
        let align = if self.align == 0 { 1 } else { self.align };
        let unit = if self.min_chunk > align { self.min_chunk } else { align };
        let mut nworks = self.size / unit;
        if nworks < 1 {
            nworks = 1;
        }
        if nworks > self.max_threads {
            nworks = self.max_threads;
        }
        if nworks <= 1 {
            return PadataPlan { nworks: 1, chunk: self.size };
        }
        let mut chunk = self.size / (nworks * 4);
        if chunk < self.min_chunk {
            chunk = self.min_chunk;
        }
        if chunk < 1 {
            chunk = 1;
        }
        chunk = chunk.div_ceil(align) * align;
        PadataPlan { nworks, chunk }
    }
}

/// Runs `thread_fn(start, end)` over the job's chunks on `plan().nworks` threads, the calling
/// thread included ("Start at 1 because the current task participates"); returns the plan.
/// Chunk ends are chunk-aligned except the last; every unit is covered exactly once.
#[cfg(feature = "std")]
pub fn padata_do_multithreaded(job: &PadataJob, thread_fn: impl Fn(u64, u64) + Sync) -> PadataPlan {
    let plan = job.plan();
    if plan.nworks == 0 {
        return plan;
    }
    if plan.nworks == 1 {
        thread_fn(job.start, job.start + job.size);
        return plan;
    }
    // (next start, remaining size), under the lock as in padata_mt_helper().
    let state = std::sync::Mutex::new((job.start, job.size));
    let helper = || {
        loop {
            let (start, end) = {
                let mut s = state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                if s.1 == 0 {
                    break;
                }
                let start = s.0;
                let size = ((start + 1).div_ceil(plan.chunk) * plan.chunk - start).min(s.1);
                s.0 += size;
                s.1 -= size;
                (start, start + size)
            };
            thread_fn(start, end);
        }
    };
    std::thread::scope(|scope| {
        for _ in 1..plan.nworks {
            scope.spawn(helper);
        }
        helper();
    });
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_follows_padata_arithmetic() {
        // kernel-spec §8.3 worked example: 64 GiB zone, 32 CPUs, section-sized chunks.
        let job = PadataJob { start: 0, size: 16_777_216, align: 32768, min_chunk: 32768, max_threads: 32 };
        assert_eq!(job.plan(), PadataPlan { nworks: 32, chunk: 131_072 });
        // gather_bootmem_prealloc on 4 nodes, all with memory: one node per chunk.
        assert_eq!(PadataJob::gather_bootmem(4, 4).plan(), PadataPlan { nworks: 4, chunk: 1 });
        assert_eq!(PadataJob::gather_bootmem(4, 2).plan(), PadataPlan { nworks: 2, chunk: 1 });
        assert_eq!(PadataJob::gather_bootmem(1, 1).plan(), PadataPlan { nworks: 1, chunk: 1 });
        assert_eq!(PadataJob::gather_bootmem(0, 0).plan(), PadataPlan { nworks: 0, chunk: 0 });
    }

    #[cfg(feature = "std")]
    #[test]
    fn every_unit_runs_once_with_aligned_chunks_and_the_caller_participates() {
        use std::sync::Mutex;
        let job = PadataJob { start: 10, size: 1000, align: 8, min_chunk: 8, max_threads: 3 };
        let calls = Mutex::new(std::vec::Vec::new());
        let caller = std::thread::current().id();
        let plan = padata_do_multithreaded(&job, |s, e| {
            // Long enough that the helpers cannot take every chunk before the caller starts.
            std::thread::sleep(std::time::Duration::from_millis(2));
            calls.lock().unwrap().push((s, e, std::thread::current().id() == caller));
        });
        let mut calls = calls.into_inner().unwrap();
        calls.sort_unstable();
        assert_eq!(plan.nworks, 3);
        let mut next = 10;
        for &(s, e, _) in &calls {
            assert_eq!(s, next);
            assert!(e == 1010 || e % plan.chunk == 0, "chunk end {e} not aligned");
            next = e;
        }
        assert_eq!(next, 1010);
        assert!(calls.iter().any(|c| c.2), "the calling thread ran no chunk");
    }
}
