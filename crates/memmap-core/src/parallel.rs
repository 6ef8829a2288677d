//! The parallel runner of the initializers that split a memmap, [`run_views`]: a padata job
//! ([`padata_do_multithreaded`]) over chunks that are each a valid one-thread call, with a
//! byte-identical result.

#[cfg(feature = "std")]
use std::vec::Vec;

#[cfg(feature = "std")]
use crate::InitError;
#[cfg(feature = "std")]
use crate::memmap::Memmap;
#[cfg(feature = "std")]
use crate::model::page::StructPage;
#[cfg(feature = "std")]
use stream_par::{PadataJob, padata_do_multithreaded};

/// One piece of a memmap for [`run_views`]: the struct pages `[start, end)` and what the work
/// on it needs (its hooks, the folio it belongs to, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece<T> {
    /// First PFN.
    pub start: u64,
    /// One past the last PFN.
    pub end: u64,
    /// The piece's own data, handed to the work with the piece's view.
    pub data: T,
}

#[cfg(feature = "std")]
/// What [`run_views`] returns: every piece's data and result in PFN order, and how many
/// workers ran.
#[derive(Debug)]
pub struct ViewsReport<T, R> {
    /// `(data, result)` of every piece, in the order of the pieces.
    pub pieces: Vec<(T, R)>,
    /// Workers that ran, the caller included.
    pub threads: usize,
}

#[cfg(feature = "std")]
/// The parallel runner of every initializer that splits a memmap: each [`Piece`] gets a view of
/// its own struct pages ([`Memmap::split_at`]), and a padata job of up to `threads` workers
/// runs `work(view, data)` once per piece, at least `min_pieces` consecutive pieces at a time.
///
/// Pieces must be disjoint, in PFN order, inside the memmap, and all but the last end at a
/// pageblock boundary (where a memmap can be split); a view covers whole pageblocks, so `work`
/// must write only its piece, and drain its streaming stores before it returns.
///
/// # Errors
///
/// [`InitError::Misaligned`] or [`InitError::OutOfRange`] from a split (nothing runs then).
///
/// # Panics
///
/// If `work` panics (the panic is propagated after the other workers finish).
pub fn run_views<P, T, R, F>(
    memmap: &mut Memmap<'_, P>,
    pieces: Vec<Piece<T>>,
    min_pieces: u64,
    threads: usize,
    work: F,
) -> Result<ViewsReport<T, R>, InitError>
where
    P: StructPage,
    T: Send,
    R: Send,
    F: Fn(&mut Memmap<'_, P>, &mut T) -> R + Sync,
{
    use std::sync::{Mutex, PoisonError};

    let pb = memmap.config().pageblock_nr_pages();
    let mut slots = Vec::with_capacity(pieces.len());
    let mut rest = memmap.reborrow();
    let last = pieces.len().saturating_sub(1);
    for (i, piece) in pieces.into_iter().enumerate() {
        // A view starts at the piece's pageblock: the pages before the piece in it belong to
        // no piece (the previous one ended at a pageblock boundary at or before them).
        let at = (piece.start & !(pb - 1)).max(rest.base_pfn());
        let (_, right) = rest.split_at(at)?;
        // The last view ends with the pageblock of its last PFN: no piece follows it there.
        let end = if i == last { piece.end.next_multiple_of(pb).min(right.end_pfn()) } else { piece.end };
        let (mine, right) = right.split_at(end)?;
        slots.push(Mutex::new((Some(mine), piece.data, None::<R>)));
        rest = right;
    }
    let n = slots.len() as u64;
    let job = PadataJob { start: 0, size: n, align: 1, min_chunk: min_pieces.max(1), max_threads: threads };
    // A job from 0 cannot end past u64::MAX, padata's only error.
    let report = padata_do_multithreaded(&job, |start, end| {
        for k in start..end {
            // Each index is handed to exactly one call, so the lock is never contended: it
            // only carries the piece's view and data to the worker that runs it.
            let mut slot = slots[k as usize].lock().unwrap_or_else(PoisonError::into_inner);
            let (view, data, result) = &mut *slot;
            if let Some(mut view) = view.take() {
                *result = Some(work(&mut view, data));
            }
        }
    })
    .map_err(|_| InitError::RangeOverflow { start_pfn: 0, nr_pages: n })?;
    let pieces = slots
        .into_iter()
        .map(|m| {
            let (_, data, result) = m.into_inner().unwrap_or_else(PoisonError::into_inner);
            (data, result.expect("padata runs every piece once"))
        })
        .collect();
    Ok(ViewsReport { pieces, threads: report.plan.map_or(1, |p| p.nworks) })
}
