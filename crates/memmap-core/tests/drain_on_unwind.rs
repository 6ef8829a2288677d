//! Streaming stores are drained on every way out of an init, unwinding included: a caller's
//! hook (`cond_resched`) that panics in the middle of a streamed range must not leave weakly
//! ordered stores behind. Only under `--cfg stream_hal_emulate` can a test see undrained stores
//! (stream-hal's emulated backends count them); CI runs this file that way, natively and under
//! Miri. One test per file: the count is process-wide.
#![cfg(stream_hal_emulate)]

use std::panic::{AssertUnwindSafe, catch_unwind};

use memmap_core::{
    DevPagemap, InitHooks, InitOptions, KernelConfig, Memmap, MemoryType, Page64, Strategy, StructPage,
    ZoneDeviceRange, memmap_init_zone_device, pageblocks_needed,
};
use stream_hal::emulation::undrained_stores;

/// Panics at the first `cond_resched` at or after `at`, noting how many stores were pending.
struct PanicAt {
    at: u64,
    pending_at_panic: Option<u64>,
}

impl InitHooks for PanicAt {
    fn cond_resched(&mut self, pfn: u64) {
        if pfn >= self.at {
            self.pending_at_panic = Some(undrained_stores());
            panic!("hook panics at pfn {pfn:#x}");
        }
    }
}

/// Runs a streamed init of `nr_pages` from pfn 0xffc00 (1024 pages before a section
/// boundary) whose hook panics at the first `cond_resched` at or after `start + panic_after`.
fn unwind_through(cfg: KernelConfig, pgmap: DevPagemap, nr_pages: u64, panic_after: u64) {
    let start = 0xf_fc00;
    let range = ZoneDeviceRange::new(cfg.zone_device(), 0, start, nr_pages);
    let mut pages = vec![Page64::ZEROED; nr_pages as usize];
    let mut pageblocks = vec![0u8; pageblocks_needed(&cfg, start, nr_pages)];
    let mut memmap = Memmap::new(cfg, start, &mut pages, &mut pageblocks).expect("memmap");
    let mut hooks = PanicAt { at: start + panic_after, pending_at_panic: None };
    let opts = InitOptions::new(Strategy::Streaming);
    let result = catch_unwind(AssertUnwindSafe(|| {
        memmap_init_zone_device(&mut memmap, &range, &pgmap, &opts, &mut hooks)
    }));
    assert!(result.is_err(), "the hook did not panic");
    let pending = hooks.pending_at_panic.expect("the hook ran");
    assert!(pending > 0, "no streaming store was pending when the hook panicked: the test proves nothing");
    assert_eq!(
        undrained_stores(),
        0,
        "{pending} stores pending at the panic were not drained while unwinding"
    );
}

#[test]
fn a_panicking_hook_leaves_no_undrained_store() {
    assert!(stream_hal::backend().name().ends_with("-emulated"), "backend {}", stream_hal::backend());
    let fsdax = DevPagemap::new(MemoryType::FsDax);
    let devdax_2m = DevPagemap { vmemmap_shift: 9, ..DevPagemap::new(MemoryType::Generic) };
    // Before 7.2, `cond_resched()` runs at pageblock-aligned pfns while the struct pages are
    // written: panic a quarter into the range.
    for pgmap in [fsdax, devdax_2m] {
        unwind_through(KernelConfig::X86_64_6_12, pgmap, 4096, 1024);
    }
    // From 7.2 it runs at section-aligned pfns only: panic at the section boundary 1024 pages
    // into the range.
    for pgmap in [fsdax, devdax_2m] {
        unwind_through(KernelConfig::X86_64, pgmap, 4096, 1024);
    }
}
