//! [`memmap_init_zone_device_parallel`] (`std`): `memmap_init_zone_device()` as a padata job
//! over chunks aligned to a section and a compound page, each exactly the one-thread call for
//! its part, so the result is byte-identical to one thread.

use std::vec::Vec;

use super::plan::{self, Plan};
use super::{DevPagemap, InitOptions, InitReport, ZoneDeviceRange, memmap_init_zone_device};
use crate::InitError;
use crate::hooks::InitHooks;
use crate::memmap::Memmap;
use crate::model::page::StructPage;
use crate::parallel::{Piece, run_views};
use stream_par::PadataJob;
use stream_par::Threads;

/// What [`memmap_init_zone_device_parallel`] did.
#[derive(Debug)]
pub struct ParallelInit<H> {
    /// The combined report (drains and pages summed over the chunks).
    pub report: InitReport,
    /// Workers that ran, the caller included (1 when the job ran on the calling thread).
    pub threads: usize,
    /// Every chunk's PFN range `[start, end)` and the hooks it ran with, in PFN order.
    pub chunks: Vec<((u64, u64), H)>,
}

/// `memmap_init_zone_device()` split into section- and compound-aligned chunks run on up to
/// `threads` workers, with the same result as [`memmap_init_zone_device`].
///
/// Each chunk gets its own hooks from `make_hooks(start, end)` (built on the calling thread,
/// returned in PFN order in [`ParallelInit::chunks`]), so a hook is called from one thread at a
/// time. With the `page_ref_set` tracepoint active the job runs on the calling thread, so
/// events keep the kernel's order. [`InitReport::drains`] sums the chunks'.
///
/// # Errors
///
/// Those of [`memmap_init_zone_device`] (nothing is written on error).
///
/// # Panics
///
/// If a hook panics on a worker (the panic is propagated after the other workers finish).
pub fn memmap_init_zone_device_parallel<P, H, F>(
    memmap: &mut Memmap<'_, P>,
    range: &ZoneDeviceRange,
    pgmap: &DevPagemap,
    opts: &InitOptions,
    threads: Threads,
    make_hooks: F,
) -> Result<ParallelInit<H>, InitError>
where
    P: StructPage,
    H: InitHooks + Send,
    F: Fn(u64, u64) -> H,
{
    let planned = plan::plan(memmap, range, pgmap)?;
    let whole = (range.start_pfn, range.start_pfn.saturating_add(range.nr_pages));
    let one_thread = |memmap: &mut Memmap<'_, P>, (s, e): (u64, u64)| {
        let mut hooks = make_hooks(s, e);
        let report = memmap_init_zone_device(memmap, range, pgmap, opts, &mut hooks)?;
        Ok(ParallelInit { report, threads: 1, chunks: std::vec![((s, e), hooks)] })
    };
    let Some(plan) = planned.filter(|p| p.start < p.end) else {
        return one_thread(memmap, whole);
    };
    let written = plan.pages_written();
    let bytes = written.saturating_mul(P::SIZE as u64);
    let workers = threads.count(bytes);
    let probe = make_hooks(plan.start, plan.end);
    if workers <= 1 || memmap.page_ref_tracepoint_active(&probe) {
        drop(probe);
        return one_thread(memmap, (plan.start, plan.end));
    }
    let (used, reason) = opts.fill.resolve(memmap.config(), &probe, bytes);
    drop(probe);
    // The chunks of the kernel's padata split of the range: every end but the last is a
    // multiple of `align` (a section, so pageblock-aligned), where the memmap can be split.
    let align = plan.pages_per_section.max(plan.pfns_per_compound);
    let job = PadataJob {
        start: plan.start,
        size: plan.end - plan.start,
        align,
        min_chunk: align,
        max_threads: workers,
    };
    // The plan's range is inside the memmap, so the job ends below u64::MAX.
    let pieces: Vec<Piece<(Plan, H)>> = job
        .chunks()
        .map_err(|_| InitError::RangeOverflow { start_pfn: job.start, nr_pages: job.size })?
        .map(|(s, e)| Piece { start: s, end: e, data: (Plan { start: s, end: e, ..plan }, make_hooks(s, e)) })
        .collect();
    if pieces.len() <= 1 {
        return one_thread(memmap, (range.start_pfn, plan.end));
    }
    let policy = opts.drains;
    let done = run_views(memmap, pieces, 1, workers, |view, (chunk, hooks)| {
        super::run_plan(view, chunk, pgmap, policy, used, hooks)
    })?;
    let drains = done.pieces.iter().map(|(_, d)| d).sum();
    Ok(ParallelInit {
        report: InitReport::new(opts, (plan.start, plan.end), written, (used, reason), drains),
        threads: done.threads,
        chunks: done
            .pieces
            .into_iter()
            .map(|((chunk, hooks), _)| ((chunk.start, chunk.end), hooks))
            .collect(),
    })
}
