//! Hooks the initializers call: `cond_resched()` at every pageblock-aligned PFN, and the
//! `page_ref_set` tracepoint where the kernel emits it.

use crate::model::flags::MigrateType;

/// What `trace_page_ref_set` records (the `page_ref_mod_template` event class).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageRefEvent {
    /// `page_to_pfn(page)`.
    pub pfn: u64,
    /// `page->flags` at the time of the call.
    pub flags: u64,
    /// `page_ref_count(page)` after the store.
    pub count: i32,
    /// `page->_mapcount`.
    pub mapcount: i32,
    /// `page->mapping`.
    pub mapping: u64,
    /// `get_pageblock_migratetype(page)` (`None` if never set).
    pub migratetype: Option<MigrateType>,
    /// The value passed to `set_page_count`.
    pub val: i32,
}

/// Callbacks from the initializers. Every method has a do-nothing default.
///
/// A [`Node`](crate::Node) calls its hooks holding its memmap lock: a hook must not call back
/// into the node it is called from (allocate, free, expand, grow). With `std` such a call
/// panics with a message instead of deadlocking; without `std` it deadlocks. Another node may
/// be used.
pub trait InitHooks {
    /// `cond_resched()`, called at every pageblock-aligned PFN that is initialized.
    #[inline(always)]
    fn cond_resched(&mut self, _pfn: u64) {}

    /// Whether the `page_ref_set` tracepoint is enabled right now (`tracepoint_enabled()`).
    /// Only consulted when the configuration has `debug_page_ref`.
    #[inline(always)]
    fn page_ref_tracepoint_enabled(&self) -> bool {
        false
    }

    /// `trace_page_ref_set(page, v)`.
    #[inline(always)]
    fn page_ref_set(&mut self, _event: &PageRefEvent) {}

    /// A named phase of an initializer begins (`begin == true`) or ends, on the thread that
    /// runs it, so that a caller can time it (the initializers keep no clocks).
    #[inline(always)]
    fn phase(&mut self, _phase: &'static str, _begin: bool) {}
}

/// Hooks that do nothing (tracepoint disabled).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoHooks;

impl InitHooks for NoHooks {}

impl<H: InitHooks + ?Sized> InitHooks for &mut H {
    #[inline(always)]
    fn cond_resched(&mut self, pfn: u64) {
        (**self).cond_resched(pfn);
    }
    #[inline(always)]
    fn page_ref_tracepoint_enabled(&self) -> bool {
        (**self).page_ref_tracepoint_enabled()
    }
    #[inline(always)]
    fn page_ref_set(&mut self, event: &PageRefEvent) {
        (**self).page_ref_set(event);
    }
    #[inline(always)]
    fn phase(&mut self, phase: &'static str, begin: bool) {
        (**self).phase(phase, begin);
    }
}

/// Hooks that count calls (no allocation; usable in `no_std`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CountingHooks {
    /// Whether to report the tracepoint as enabled.
    pub tracepoint: bool,
    /// `cond_resched` calls.
    pub resched: u64,
    /// `page_ref_set` events.
    pub page_ref_events: u64,
}

impl CountingHooks {
    /// Counting hooks with the tracepoint enabled or not.
    #[must_use]
    pub fn new(tracepoint: bool) -> Self {
        CountingHooks { tracepoint, ..Self::default() }
    }
}

impl InitHooks for CountingHooks {
    fn cond_resched(&mut self, _pfn: u64) {
        self.resched += 1;
    }
    fn page_ref_tracepoint_enabled(&self) -> bool {
        self.tracepoint
    }
    fn page_ref_set(&mut self, _event: &PageRefEvent) {
        self.page_ref_events += 1;
    }
}

/// Hooks that record every call in order (`std`).
#[cfg(feature = "std")]
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RecordingHooks {
    /// Whether to report the tracepoint as enabled.
    pub tracepoint: bool,
    /// PFNs passed to `cond_resched`, in call order.
    pub resched_pfns: std::vec::Vec<u64>,
    /// `page_ref_set` events, in call order.
    pub page_ref_events: std::vec::Vec<PageRefEvent>,
}

#[cfg(feature = "std")]
impl RecordingHooks {
    /// Recording hooks with the tracepoint enabled or not.
    #[must_use]
    pub fn new(tracepoint: bool) -> Self {
        RecordingHooks { tracepoint, ..Self::default() }
    }
}

#[cfg(feature = "std")]
impl InitHooks for RecordingHooks {
    fn cond_resched(&mut self, pfn: u64) {
        self.resched_pfns.push(pfn);
    }
    fn page_ref_tracepoint_enabled(&self) -> bool {
        self.tracepoint
    }
    fn page_ref_set(&mut self, event: &PageRefEvent) {
        self.page_ref_events.push(*event);
    }
}
