//! `padata_do_multithreaded()` (kernel/padata.c): how a job is split between threads.
//!
//! The split is a pure function ([`PadataJob::plan`] and [`PadataJob::chunks`]), so the kernel's
//! rules are testable without threads; [`padata_do_multithreaded`] (`std`) runs it on
//! real threads with `std::thread::scope`, the calling thread participating as in the kernel.
//!
//! The rules, as in the kernel:
//!
//! 1. `size == 0`: nothing to do.
//! 2. `nworks = max(size / max(min_chunk, align), 1)`, then `min(nworks, max_threads)`.
//! 3. `nworks == 1`: one call `thread_fn(start, start + size)` on the calling thread.
//! 4. Otherwise `nworks - 1` helpers are started ("start at 1 because the current task
//!    participates") and `chunk = size / (nworks * 4)` (load balance factor 4), then
//!    `max(chunk, min_chunk)`, `max(chunk, 1)`, `roundup(chunk, align)`.
//! 5. Each helper, under the job lock, takes `size = min(roundup(start + 1, chunk) - start,
//!    remaining)` from the front of the job, so every call's end is chunk-aligned except the
//!    last one's.
//! 6. The calling thread runs a helper too, then waits for the others.

/// `LOAD_BALANCE_FACTOR` of `padata_do_multithreaded`.
pub(crate) const LOAD_BALANCE_FACTOR: u64 = 4;

/// `struct padata_mt_job`, without the function and its argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PadataJob {
    /// `start`.
    pub start: u64,
    /// `size`.
    pub size: u64,
    /// `align`: chunk sizes are rounded up to a multiple of it (0 is treated as 1).
    pub align: u64,
    /// `min_chunk`: the smallest chunk worth a thread (0 is treated as 1).
    pub min_chunk: u64,
    /// `max_threads` (0 is treated as 1).
    pub max_threads: usize,
}

/// How a job is split: the number of works (threads, the caller included) and the chunk size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PadataPlan {
    /// `nworks`, the caller included.
    pub nworks: usize,
    /// `ps.chunk_size`; with one work, the whole job is one call and this is `size`.
    pub chunk: u64,
}

/// `roundup(x, y)` for any `y > 0`, saturating at `u64::MAX`.
const fn roundup(x: u64, y: u64) -> u64 {
    x.div_ceil(y).saturating_mul(y)
}

/// A job [`padata_do_multithreaded`] cannot run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PadataError {
    /// `start + size` passes the end of the `u64` space: no `[start, end)` call can describe
    /// the job's last items. A job must end at `u64::MAX` or below.
    RangeOverflow {
        /// `start`.
        start: u64,
        /// `size`.
        size: u64,
    },
}

impl core::fmt::Display for PadataError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            PadataError::RangeOverflow { start, size } => write!(
                f,
                "padata job [{start:#x}, +{size:#x}) ends past u64::MAX (a job may have at most {:#x} items from that start)",
                u64::MAX - start
            ),
        }
    }
}

impl core::error::Error for PadataError {}

impl PadataJob {
    /// The job of hugetlb's `gather_bootmem_prealloc()`: one item per node id (`size =
    /// nr_node_ids`, `align = min_chunk = 1`), at most one thread per node with memory
    /// (`max_threads = num_node_state(N_MEMORY)`).
    #[must_use]
    pub const fn gather_bootmem(nr_node_ids: u64, nodes_with_memory: usize) -> PadataJob {
        PadataJob { start: 0, size: nr_node_ids, align: 1, min_chunk: 1, max_threads: nodes_with_memory }
    }

    /// One past the job's last item, `start + size`.
    ///
    /// # Errors
    ///
    /// [`PadataError::RangeOverflow`] when that passes `u64::MAX`.
    pub const fn end(&self) -> Result<u64, PadataError> {
        match self.start.checked_add(self.size) {
            Some(end) => Ok(end),
            None => Err(PadataError::RangeOverflow { start: self.start, size: self.size }),
        }
    }

    /// The plan of rules 1-4, or `None` for an empty job. It depends on the sizes only, so
    /// every job has one (whether it can run is [`PadataJob::end`]'s question).
    #[must_use]
    pub fn plan(&self) -> Option<PadataPlan> {
        if self.size == 0 {
            return None;
        }
        let align = self.align.max(1);
        let min_chunk = self.min_chunk.max(1);
        let nworks = (self.size / min_chunk.max(align)).max(1);
        let nworks = nworks.min(self.max_threads.max(1) as u64) as usize;
        if nworks == 1 {
            return Some(PadataPlan { nworks, chunk: self.size });
        }
        // Saturating: more than `u64::MAX / 4` works leave chunks of 0 before the clamps, as
        // the exact quotient would.
        let chunk = self.size / (nworks as u64).saturating_mul(LOAD_BALANCE_FACTOR);
        let chunk = chunk.max(min_chunk).max(1);
        Some(PadataPlan { nworks, chunk: roundup(chunk, align) })
    }

    /// The `[start, end)` of every `thread_fn` call, in the order helpers take them (rule 5 above).
    /// Which thread makes which call depends on scheduling; the set of calls does not.
    ///
    /// # Errors
    ///
    /// [`PadataError::RangeOverflow`] when the job ends past `u64::MAX`.
    pub fn chunks(&self) -> Result<PadataChunks, PadataError> {
        self.end()?;
        Ok(match self.plan() {
            None => PadataChunks { start: self.start, remaining: 0, chunk: 1 },
            // One work: one call for the whole job ("cut to the chase").
            Some(p) if p.nworks == 1 => {
                PadataChunks { start: self.start, remaining: self.size, chunk: u64::MAX }
            }
            Some(p) => PadataChunks { start: self.start, remaining: self.size, chunk: p.chunk },
        })
    }
}

/// Iterator over the calls of a job (see [`PadataJob::chunks`]); also the shared state the
/// helpers take work from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PadataChunks {
    start: u64,
    remaining: u64,
    chunk: u64,
}

impl Iterator for PadataChunks {
    type Item = (u64, u64);

    fn next(&mut self) -> Option<(u64, u64)> {
        if self.remaining == 0 {
            return None;
        }
        let start = self.start;
        // "So end is chunk size aligned if enough work remains": `roundup(start + 1, chunk) -
        // start`, computed without the sum (which passes u64::MAX near the top of the space).
        let size = if self.chunk == u64::MAX {
            self.remaining
        } else {
            (self.chunk - start % self.chunk).min(self.remaining)
        };
        // `PadataJob::chunks` checked that `start + remaining` fits in a u64.
        self.start += size;
        self.remaining -= size;
        Some((start, start + size))
    }
}

/// What [`padata_do_multithreaded`] did.
#[cfg(feature = "std")]
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PadataReport {
    /// The plan (`None` for an empty job).
    pub plan: Option<PadataPlan>,
    /// Calls made by each work, the caller's first: `calls[0]` lists the `[start, end)` the
    /// calling thread ran.
    pub calls: std::vec::Vec<std::vec::Vec<(u64, u64)>>,
}

/// `padata_do_multithreaded(job)` on real threads: `nworks - 1` scoped helper threads plus the
/// calling thread run `thread_fn(start, end)` over the chunks of [`PadataJob::chunks`], and the
/// call returns when all of them are done. A helper the system cannot start (no threads left)
/// leaves its share to the works that did start: every chunk is still run, and
/// [`PadataReport::calls`] has fewer works than the plan.
///
/// # Errors
///
/// [`PadataError::RangeOverflow`] (no call is made) when the job ends past `u64::MAX`; a job
/// that starts at 0 never does.
///
/// # Panics
///
/// If `thread_fn` panics on any thread: the panic is propagated with its payload.
#[cfg(feature = "std")]
pub fn padata_do_multithreaded<F>(job: &PadataJob, thread_fn: F) -> Result<PadataReport, PadataError>
where
    F: Fn(u64, u64) + Sync,
{
    run(job, false, thread_fn)
}

/// [`padata_do_multithreaded`], with no chunk taken until every helper thread has started:
/// for work that holds a lock a thread start needs (`MADV_POPULATE_WRITE` holds `mmap_lock`,
/// under which a new thread maps its stack).
///
/// # Errors
///
/// As for [`padata_do_multithreaded`].
///
/// # Panics
///
/// As for [`padata_do_multithreaded`].
#[cfg(feature = "std")]
pub fn padata_do_multithreaded_together<F>(job: &PadataJob, thread_fn: F) -> Result<PadataReport, PadataError>
where
    F: Fn(u64, u64) + Sync,
{
    run(job, true, thread_fn)
}

/// The runner of [`padata_do_multithreaded`] and, with `together`,
/// [`padata_do_multithreaded_together`].
#[cfg(feature = "std")]
fn run<F>(job: &PadataJob, together: bool, thread_fn: F) -> Result<PadataReport, PadataError>
where
    F: Fn(u64, u64) + Sync,
{
    use std::sync::{Condvar, Mutex, PoisonError};
    use std::vec::Vec;

    let chunks = job.chunks()?;
    let end = job.end()?;
    let Some(plan) = job.plan() else {
        return Ok(PadataReport { plan: None, calls: Vec::new() });
    };
    if plan.nworks == 1 {
        // "Single thread, no coordination needed, cut to the chase."
        thread_fn(job.start, end);
        return Ok(PadataReport { plan: Some(plan), calls: std::vec![std::vec![(job.start, end)]] });
    }
    // The job lock (`ps.lock`): the remaining range the helpers take their chunks from. A
    // helper that panics holds no lock while `thread_fn` runs, so a poisoned lock still holds
    // a consistent remainder.
    let state = Mutex::new(chunks);
    // With `together`: (helpers that have started, whether the caller let them go).
    let gate = (Mutex::new((0usize, false)), Condvar::new());
    let take_chunks = || {
        let mut mine = Vec::new();
        loop {
            // Take the next chunk under the job lock, run it unlocked.
            let next = state.lock().unwrap_or_else(PoisonError::into_inner).next();
            let Some((start, end)) = next else { break };
            thread_fn(start, end);
            mine.push((start, end));
        }
        mine
    };
    let helper = || {
        if together {
            let (lock, cv) = &gate;
            let mut g = lock.lock().unwrap_or_else(PoisonError::into_inner);
            g.0 += 1;
            cv.notify_all();
            while !g.1 {
                g = cv.wait(g).unwrap_or_else(PoisonError::into_inner);
            }
        }
        take_chunks()
    };
    let calls = std::thread::scope(|s| {
        let helpers: Vec<_> = (1..plan.nworks)
            .map_while(|_| std::thread::Builder::new().spawn_scoped(s, helper).ok())
            .collect();
        if together {
            // Every helper that started is waiting: let them all go at once.
            let (lock, cv) = &gate;
            let mut g = lock.lock().unwrap_or_else(PoisonError::into_inner);
            while g.0 < helpers.len() {
                g = cv.wait(g).unwrap_or_else(PoisonError::into_inner);
            }
            g.1 = true;
            cv.notify_all();
        }
        // "The current task participates."
        let mut calls = std::vec![take_chunks()];
        // A helper's panic goes on in the caller with its own payload (its message intact).
        calls.extend(helpers.into_iter().map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))));
        calls
    });
    Ok(PadataReport { plan: Some(plan), calls })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    #[test]
    fn worked_example_of_the_spec() {
        // 64 GiB highest zone, 32 CPUs: 512 sections -> 32 works, 4-section chunks.
        let job = PadataJob { start: 0, size: 16_777_216, align: 32768, min_chunk: 32768, max_threads: 32 };
        assert_eq!(job.plan(), Some(PadataPlan { nworks: 32, chunk: 131_072 }));
    }

    #[test]
    fn gather_bootmem_is_one_node_per_chunk() {
        assert_eq!(PadataJob::gather_bootmem(4, 4).plan(), Some(PadataPlan { nworks: 4, chunk: 1 }));
        assert_eq!(PadataJob::gather_bootmem(4, 2).plan(), Some(PadataPlan { nworks: 2, chunk: 1 }));
        assert_eq!(PadataJob::gather_bootmem(1, 1).plan(), Some(PadataPlan { nworks: 1, chunk: 1 }));
        assert_eq!(PadataJob::gather_bootmem(0, 0).plan(), None);
        assert_eq!(
            PadataJob::gather_bootmem(4, 4).chunks().unwrap().collect::<Vec<_>>(),
            [(0, 1), (1, 2), (2, 3), (3, 4)]
        );
    }

    #[test]
    fn empty_and_single_work_jobs() {
        let job = PadataJob { start: 5, size: 0, align: 8, min_chunk: 8, max_threads: 4 };
        assert_eq!(job.plan(), None);
        assert_eq!(job.chunks().unwrap().count(), 0);
        let job = PadataJob { start: 5, size: 7, align: 8, min_chunk: 8, max_threads: 4 };
        assert_eq!(job.plan(), Some(PadataPlan { nworks: 1, chunk: 7 }));
        assert_eq!(job.chunks().unwrap().collect::<Vec<_>>(), [(5, 12)]);
    }

    /// The threaded runner makes exactly the calls of [`PadataJob::chunks`], each once, and
    /// reports them per work, the caller's first.
    #[cfg(feature = "std")]
    #[test]
    fn the_runner_makes_every_call_of_the_split_once() {
        use std::sync::Mutex;
        let job = PadataJob { start: 3, size: 61, align: 8, min_chunk: 8, max_threads: 3 };
        let seen = Mutex::new(Vec::new());
        let report = padata_do_multithreaded(&job, |s, e| seen.lock().unwrap().push((s, e))).unwrap();
        assert_eq!(report.plan, job.plan());
        assert_eq!(report.calls.len(), 3);
        let mut want: Vec<_> = job.chunks().unwrap().collect();
        let mut reported: Vec<_> = report.calls.concat();
        let mut seen = seen.into_inner().unwrap();
        want.sort_unstable();
        reported.sort_unstable();
        seen.sort_unstable();
        assert_eq!(seen, want);
        assert_eq!(reported, want);
    }

    /// Started together, the works make exactly the calls of the split, each once, every
    /// helper of the plan runs, and the gate lets them all go (no deadlock, one work or eight
    /// on this machine's CPUs).
    #[cfg(feature = "std")]
    #[test]
    fn works_started_together_run_every_chunk_once() {
        use std::sync::Mutex;
        for (size, threads) in [(64u64, 4usize), (24, 3), (8, 1), (64, 2), (4096, 8)] {
            let job = PadataJob { start: 0, size, align: 8, min_chunk: 8, max_threads: threads };
            let nworks = job.plan().unwrap().nworks;
            let seen = Mutex::new(Vec::new());
            let report = padata_do_multithreaded_together(&job, |s, e| {
                seen.lock().unwrap().push((s, e));
            })
            .unwrap();
            assert_eq!(report.calls.len(), nworks, "{job:?}");
            let mut seen = seen.into_inner().unwrap();
            let mut want: Vec<_> = job.chunks().unwrap().collect();
            seen.sort_unstable();
            want.sort_unstable();
            assert_eq!(seen, want, "{job:?}");
        }
    }

    /// A panic in `thread_fn`, on whichever thread runs the chunk, reaches the caller with its
    /// own payload.
    #[cfg(feature = "std")]
    #[test]
    fn a_helper_panic_reaches_the_caller() {
        let job = PadataJob { start: 0, size: 64, align: 8, min_chunk: 8, max_threads: 2 };
        let r = std::panic::catch_unwind(|| {
            padata_do_multithreaded(&job, |s, _| {
                if s == 56 {
                    std::panic::panic_any("last chunk");
                }
            })
        });
        let payload = r.expect_err("the panic propagates");
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"last chunk"));
    }

    #[test]
    fn chunks_of_an_unaligned_start() {
        let job = PadataJob { start: 3, size: 61, align: 8, min_chunk: 8, max_threads: 2 };
        // nworks 2, chunk max(61/8 = 7, 8) = 8.
        assert_eq!(job.plan(), Some(PadataPlan { nworks: 2, chunk: 8 }));
        let c: Vec<_> = job.chunks().unwrap().collect();
        assert_eq!(c[0], (3, 8));
        assert_eq!(c[1], (8, 16));
        assert_eq!(*c.last().unwrap(), (56, 64));
    }
}
