//! The one parallel runner: the range's pieces cut into runs of one NUMA node, each node's runs
//! one padata job pinned to its CPUs, chunks split at 2 MiB (or huge page) boundaries. The
//! split is the pure [`plan`](crate::plan); [`execute`] runs it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use stream_par::{PadataJob, Threads, padata_do_multithreaded, padata_do_multithreaded_together};
use vm_memory::GuestAddress;

use crate::backing::{BASE_PAGE, HostBacking};
use crate::error::Error;
use crate::numa::{MemoryNodes, Topology};
use crate::plan::{Group, Span, plan, split_units, unit_size, units};

/// The smallest chunk a worker is handed: 8 MiB (a thread start costs about what streaming
/// 1 MiB does; eight keep it under a few percent).
pub(crate) const MIN_CHUNK: u64 = 8 << 20;

/// Where the workers of a parallel call run.
#[derive(Debug, Clone, Default)]
pub enum Placement {
    /// Pin each worker to the CPUs of the node that holds its memory when the host has two or
    /// more NUMA nodes with CPUs (the host's topology, read once, and the kernel's answer for
    /// the memory); on a one-node host, unpinned and without lookups.
    #[default]
    Auto,
    /// Never pin, never look nodes up.
    Unpinned,
    /// This topology, pinned even when it has one node: what a VMM that knows where it bound
    /// its memory zones passes ([`MemoryNodes::Guest`]), and what the tests inject.
    Topology(Arc<Topology>),
}

/// How many workers a parallel call uses and where they run.
#[derive(Debug, Clone, Default)]
pub struct Workers {
    /// The thread policy shared with the other crates of the workspace
    /// ([`stream_par::Threads`]): the workers for a call of `len` bytes are
    /// `threads.count(len)`, the calling thread included.
    pub threads: Threads,
    /// Where they run.
    pub placement: Placement,
}

impl Workers {
    /// `threads` workers, [`Placement::Auto`].
    #[must_use]
    pub fn new(threads: Threads) -> Workers {
        Workers { threads, placement: Placement::Auto }
    }

    /// The same workers placed by `placement`.
    #[must_use]
    pub fn with_placement(mut self, placement: Placement) -> Workers {
        self.placement = placement;
        self
    }
}

/// A cancellation token for [`populate`](crate::populate): the workers stop between steps of at
/// most 16 MiB after [`Cancel::cancel`], and the call returns what was populated.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    /// A token not cancelled yet.
    #[must_use]
    pub fn new() -> Cancel {
        Cancel::default()
    }

    /// Asks every call holding this token to stop.
    pub fn cancel(&self) {
        // Release pairs with the Acquire load in `is_cancelled`: a worker that sees the flag
        // also sees what the cancelling thread wrote before cancelling.
        self.0.store(true, Ordering::Release);
    }

    /// Whether [`Cancel::cancel`] was called.
    #[must_use]
    pub(crate) fn is_cancelled(&self) -> bool {
        // Acquire pairs with the Release store in `cancel`.
        self.0.load(Ordering::Acquire)
    }
}

/// One part of the range as one worker did it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkReport {
    /// First guest address.
    pub addr: GuestAddress,
    /// Bytes done (less than the part when a populate was cancelled inside it).
    pub len: u64,
    /// The host node of the memory, when it was looked up.
    pub node: Option<u32>,
    /// Whether the worker was pinned to the node's CPUs.
    pub pinned: bool,
    /// The CPU the worker ran on when it finished the part.
    pub cpu: Option<usize>,
}

/// One node's share of a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupReport {
    /// The node (`None`: memory whose node is unknown, or no lookup was made).
    pub node: Option<u32>,
    /// The CPUs its workers were pinned to (`None`: unpinned).
    pub cpus: Option<Vec<usize>>,
    /// Workers that ran (the group's first worker included).
    pub threads: usize,
    /// Bytes of the range on this node.
    pub bytes: u64,
}

/// What a parallel call did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WorkReport {
    /// Bytes done.
    pub bytes: u64,
    /// Workers that ran, over all nodes.
    pub threads: usize,
    /// Per node.
    pub groups: Vec<GroupReport>,
    /// Every part done, by guest address.
    pub chunks: Vec<ChunkReport>,
}

/// One part of the range: the bytes of one region (or one `VolatileSlice`) it covers.
pub(crate) struct RegionPart<'a, B> {
    /// Guest address of the first byte.
    pub(crate) guest: GuestAddress,
    /// Host address of the first byte.
    pub(crate) host: usize,
    /// Bytes.
    pub(crate) len: usize,
    /// Offset of the first byte from the start of the caller's range.
    pub(crate) range_off: u64,
    /// The dirty bitmap of these bytes (offset 0 is the first byte).
    pub(crate) bitmap: B,
    /// How the region is backed.
    pub(crate) backing: HostBacking<'a>,
    /// Host address and length of the whole region (the page rounding of populate and
    /// discard stays inside it).
    pub(crate) region_host: usize,
    /// See `region_host`.
    pub(crate) region_len: usize,
}

impl<B> RegionPart<'_, B> {
    pub(crate) fn span(&self) -> Span {
        Span { host: self.host, len: self.len, guest: self.guest, page: self.backing.page_size }
    }
}

/// Why workers stop early: a cancellation, or another worker's error.
pub(crate) struct Stop<'c> {
    cancel: Option<&'c Cancel>,
    failed: AtomicBool,
}

impl<'c> Stop<'c> {
    pub(crate) fn new(cancel: Option<&'c Cancel>) -> Stop<'c> {
        Stop { cancel, failed: AtomicBool::new(false) }
    }

    /// Whether to stop before the next step.
    pub(crate) fn stopped(&self) -> bool {
        // Acquire pairs with the Release store in `fail` (the error itself is handed over
        // through the `first_err` mutex of `execute`; the flag only says to stop).
        self.failed.load(Ordering::Acquire) || self.cancel.is_some_and(Cancel::is_cancelled)
    }

    /// Whether the call was cancelled (rather than stopped by an error).
    pub(crate) fn cancelled(&self) -> bool {
        self.cancel.is_some_and(Cancel::is_cancelled)
    }

    fn fail(&self) {
        // Release pairs with the Acquire load in `stopped`.
        self.failed.store(true, Ordering::Release);
    }
}

/// Where a placement pins workers: the topology to plan with, or `None` (unpinned, no lookups).
pub(crate) fn pinning(placement: &Placement) -> Option<&Topology> {
    match placement {
        Placement::Unpinned => None,
        Placement::Auto => Topology::host_cached().filter(|t| t.nodes_with_cpus() >= 2),
        Placement::Topology(t) => Some(t),
    }
}

/// When a call's workers start on their chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Start {
    /// Each as soon as it runs (the caller first, while its helpers are being started).
    Now,
    /// Each group's workers together, once all its threads have started
    /// ([`padata_do_multithreaded_together`]): for work that holds the process's `mmap_lock`
    /// (`MADV_POPULATE_WRITE`), which a thread start needs.
    Together,
}

impl Start {
    /// [`Start::Together`] where a piece's stores need its pages faulted in first (a shared
    /// or file mapping: `MADV_POPULATE_WRITE` before the stores), [`Start::Now`] otherwise.
    pub(crate) fn for_stores<B>(pieces: &[RegionPart<'_, B>]) -> Start {
        if pieces.iter().any(|p| p.backing.stores() != crate::backing::Stores::Direct) {
            Start::Together
        } else {
            Start::Now
        }
    }
}

/// Runs `op(piece index, piece, offset in piece, len, stop)` over every byte of `pieces` with `workers`:
/// plans (looking nodes up where the placement pins), then executes. `op` returns the bytes it
/// did (fewer only when it stopped early).
pub(crate) fn run<B, F>(
    pieces: &[RegionPart<'_, B>],
    workers: &Workers,
    min_chunk: u64,
    start: Start,
    stop: &Stop<'_>,
    op: F,
) -> Result<WorkReport, Error>
where
    B: Sync,
    F: Fn(usize, &RegionPart<'_, B>, usize, usize, &Stop<'_>) -> Result<usize, Error> + Sync,
{
    let total: u64 = pieces.iter().map(|p| p.len as u64).sum();
    if total == 0 {
        return Ok(WorkReport::default());
    }
    let threads = workers.threads.count(total).max(1);
    let spans: Vec<Span> = pieces.iter().map(RegionPart::span).collect();
    let topo = pinning(&workers.placement).filter(|_| threads > 1);
    let groups = match topo {
        Some(t) => {
            let max_page = spans.iter().map(|s| s.page).max().unwrap_or(BASE_PAGE);
            let mut units = units(&spans, unit_size(total, max_page));
            if let MemoryNodes::Guest(ranges) = t.memory() {
                let cuts: Vec<u64> =
                    ranges.iter().flat_map(|r| [r.addr.0, r.addr.0.saturating_add(r.len)]).collect();
                units = split_units(&spans, &units, &cuts);
            }
            let nodes: Vec<Option<u32>> = match t.memory() {
                MemoryNodes::Kernel => {
                    let addrs: Vec<usize> = units.iter().map(|u| spans[u.span].host + u.off).collect();
                    crate::numa::memory_nodes(&addrs)
                }
                MemoryNodes::Guest(_) => units
                    .iter()
                    .map(|u| t.guest_node(GuestAddress(spans[u.span].guest.0 + u.off as u64)))
                    .collect(),
            };
            let allowed = crate::sys::current_affinity().ok();
            plan(&spans, Some((&units, &nodes)), Some(t), allowed.as_deref(), threads)
        }
        None => plan(&spans, None, None, None, threads),
    };
    execute(pieces, &groups, min_chunk, start, stop, &op)
}

/// Runs a plan: each pinned group on a thread of its own pinned to its CPUs (the padata
/// helpers it starts inherit the affinity), the unpinned group on the calling thread (with its
/// helpers); returns when every worker is done.
pub(crate) fn execute<B, F>(
    pieces: &[RegionPart<'_, B>],
    groups: &[Group],
    min_chunk: u64,
    start: Start,
    stop: &Stop<'_>,
    op: &F,
) -> Result<WorkReport, Error>
where
    B: Sync,
    F: Fn(usize, &RegionPart<'_, B>, usize, usize, &Stop<'_>) -> Result<usize, Error> + Sync,
{
    let runner = Runner {
        pieces,
        min_chunk,
        start,
        stop,
        op,
        chunks: Mutex::new(Vec::new()),
        first_err: Mutex::new(None),
    };
    let (used, pinned) = runner.run_all(groups);
    runner.finish(groups, &used, &pinned)
}

/// The state shared by every worker of one [`execute`] call: what to run and what came back.
struct Runner<'r, 'p, 's, B, F> {
    pieces: &'r [RegionPart<'p, B>],
    min_chunk: u64,
    /// When the workers of each group start.
    start: Start,
    stop: &'r Stop<'s>,
    op: &'r F,
    /// Every part done, in completion order.
    chunks: Mutex<Vec<ChunkReport>>,
    /// The first error an operation returned (the others stop without reporting theirs).
    first_err: Mutex<Option<Error>>,
}

impl<B, F> Runner<'_, '_, '_, B, F>
where
    B: Sync,
    F: Fn(usize, &RegionPart<'_, B>, usize, usize, &Stop<'_>) -> Result<usize, Error> + Sync,
{
    /// Runs every group, the pinned ones on scoped threads of their own when there are any;
    /// returns per group the workers that ran and whether they were pinned.
    fn run_all(&self, groups: &[Group]) -> (Vec<usize>, Vec<bool>) {
        let mut used = vec![0usize; groups.len()];
        let mut pinned = vec![false; groups.len()];
        if groups.iter().all(|g| g.cpus.is_none()) {
            for (k, g) in groups.iter().enumerate() {
                used[k] = self.run_group(g, false);
            }
            return (used, pinned);
        }
        std::thread::scope(|s| {
            let handles: Vec<_> = groups
                .iter()
                .enumerate()
                .filter_map(|(k, g)| {
                    let cpus = g.cpus.as_deref()?;
                    Some((
                        k,
                        s.spawn(move || {
                            // Best effort, as the kernel allows (a CPU set that the cgroup took
                            // away in the meantime): unpinned work is still correct work.
                            let ok = crate::sys::set_affinity(cpus).is_ok();
                            (self.run_group(g, ok), ok)
                        }),
                    ))
                })
                .collect();
            for (k, g) in groups.iter().enumerate().filter(|(_, g)| g.cpus.is_none()) {
                used[k] = self.run_group(g, false);
            }
            for (k, h) in handles {
                match h.join() {
                    Ok((n, ok)) => {
                        used[k] = n;
                        pinned[k] = ok;
                    }
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            }
        });
        (used, pinned)
    }

    /// Runs one group as one padata job on the calling thread and its helpers; returns the
    /// workers that ran.
    fn run_group(&self, g: &Group, pinned: bool) -> usize {
        let min = self.min_chunk.max(1).div_ceil(g.align) * g.align;
        let job =
            PadataJob { start: 0, size: g.lin_len, align: g.align, min_chunk: min, max_threads: g.threads };
        let chunk = |s, e| self.run_chunk(g, s, e, pinned);
        // A job from 0 cannot end past u64::MAX, padata's only error.
        let report = match self.start {
            Start::Now => padata_do_multithreaded(&job, chunk),
            Start::Together => padata_do_multithreaded_together(&job, chunk),
        };
        report.map_or(0, |r| r.calls.len())
    }

    /// Applies the operation to every part of the chunk `[s, e)` of the group's linear layout
    /// (one part per run it crosses), until the chunk ends, the call is stopped or an
    /// operation fails (which stops the others and keeps the first error).
    fn run_chunk(&self, g: &Group, s: u64, e: u64, pinned: bool) {
        let mut i = g.runs.partition_point(|r| r.lin + r.len as u64 <= s);
        while i < g.runs.len() && g.runs[i].lin < e {
            let r = g.runs[i];
            i += 1;
            let (a, b) = (s.max(r.lin), e.min(r.lin + r.len as u64));
            if a >= b {
                continue;
            }
            if self.stop.stopped() {
                return;
            }
            let p = &self.pieces[r.piece];
            let off = r.off + (a - r.lin) as usize;
            match (self.op)(r.piece, p, off, (b - a) as usize, self.stop) {
                Ok(0) => {}
                Ok(done) => self.chunks.lock().unwrap_or_else(PoisonError::into_inner).push(ChunkReport {
                    addr: GuestAddress(p.guest.0 + off as u64),
                    len: done as u64,
                    node: r.node,
                    pinned,
                    cpu: crate::sys::current_cpu(),
                }),
                Err(err) => {
                    self.stop.fail();
                    self.first_err.lock().unwrap_or_else(PoisonError::into_inner).get_or_insert(err);
                    return;
                }
            }
        }
    }

    /// The call's result once every worker is done: the first error, or the report with the
    /// parts sorted by guest address.
    fn finish(self, groups: &[Group], used: &[usize], pinned: &[bool]) -> Result<WorkReport, Error> {
        if let Some(e) = self.first_err.into_inner().unwrap_or_else(PoisonError::into_inner) {
            return Err(e);
        }
        let mut chunks = self.chunks.into_inner().unwrap_or_else(PoisonError::into_inner);
        chunks.sort_by_key(|c| c.addr);
        Ok(WorkReport {
            bytes: chunks.iter().map(|c| c.len).sum(),
            threads: used.iter().sum(),
            groups: groups
                .iter()
                .zip(used.iter().zip(pinned))
                .map(|(g, (&threads, &p))| GroupReport {
                    node: g.node,
                    cpus: if p { g.cpus.clone() } else { None },
                    threads,
                    bytes: g.bytes,
                })
                .collect(),
            chunks,
        })
    }
}
