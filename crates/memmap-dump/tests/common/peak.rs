//! What a reader allocates, for the tests that bound it (memmap-dump's `json_peak`,
//! kernel-oracle's `readers_peak`, which includes this file): a counting allocator that the
//! test binary installs as its global allocator, the peak of one call, and hostile JSON.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The system allocator, counting the bytes live and their peak.
pub(crate) struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so the
// `GlobalAlloc` contract `System` keeps is kept; the counters only observe the sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(layout.size(), Ordering::SeqCst) + layout.size();
        PEAK.fetch_max(live, Ordering::SeqCst);
        // SAFETY: the caller's `layout` has a non-zero size, as `GlobalAlloc::alloc` requires
        // of its caller; it is passed on unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::SeqCst);
        // SAFETY: `ptr` was returned by `alloc` (so by `System.alloc`) with this `layout`, as
        // the caller guarantees.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// The peak bytes `f` allocates above what was live before it ran (through [`Counting`],
/// the binary's global allocator), and its result.
pub(crate) fn peak_of<T>(f: impl FnOnce() -> T) -> (usize, T) {
    let before = LIVE.load(Ordering::SeqCst);
    PEAK.store(before, Ordering::SeqCst);
    let r = f();
    (PEAK.load(Ordering::SeqCst).saturating_sub(before), r)
}

/// `[E,E,...,E]` of `n` elements.
pub(crate) fn array(elem: &str, n: usize) -> String {
    let mut s = String::with_capacity(n * (elem.len() + 1) + 2);
    s.push('[');
    for i in 0..n {
        if i > 0 {
            s.push(',');
        }
        s.push_str(elem);
    }
    s.push(']');
    s
}
