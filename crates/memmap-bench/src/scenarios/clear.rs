//! `clear`: the init_on_alloc case of the batch-clear series: zeroing `--size` bytes worth of
//! freshly allocated 2 MiB pages.
//!
//! * `per-page`: one 4 KiB clear per base page with a loop of normal 8-byte stores, eight per
//!   64 bytes, like the kernel's `clear_page_orig` (what `kernel_init_pages` did page by page);
//! * `per-page-erms`: one `clear_pages(page, 1)` (`rep stosb` of 4 KiB) per base page, which is
//!   what `clear_page` is on ERMS machines;
//! * `batch`: one `stream_hal::clear_pages(page, 512)` per 2 MiB page (the series'
//!   `clear_highpages_kasan_tagged` → `clear_pages`).
//!
//! The memory is resident before measuring (allocated pages are, in the kernel), so the first
//! round is a cold-cache round rather than a page-fault round.

use std::time::Instant;

use memmap2::MmapOptions;

use super::Common;
use crate::limits::Limits;
use crate::measure::{Runner, interleaved};
use crate::progress::bar;
use crate::report::{LimitKind, Scenario, ScenarioSpec};
use crate::size::Bytes;

const HUGE: usize = 2 << 20;
const PAGE: usize = 4096;

/// One 4 KiB page cleared with normal 8-byte stores, 64 bytes per iteration (`clear_page_orig`).
///
/// # Safety
///
/// `page` is valid for writes of 4096 bytes and 8-byte aligned.
#[inline(never)]
pub unsafe fn clear_page_orig(page: *mut u8) {
    let p = page.cast::<u64>();
    let mut i = 0;
    while i < PAGE / 8 {
        // SAFETY: `i + 7 < 512`, inside the page. Volatile, so the compiler keeps the eight
        // separate `movq` stores per iteration instead of turning the loop into a memset call.
        unsafe {
            for k in 0..8 {
                p.add(i + k).write_volatile(0);
            }
        }
        i += 8;
    }
}

/// Memory the scenario needs.
#[must_use]
pub fn memory_needed(size: u64) -> u64 {
    size
}

/// Runs the scenario over `size` bytes (rounded down to whole 2 MiB pages).
///
/// # Panics
///
/// If the arena cannot be mapped.
pub fn run(size: u64, common: &Common, limits: &Limits) -> Scenario {
    let huge_pages = (size as usize / HUGE).max(1);
    let len = huge_pages * HUGE;
    let rounds = common.rounds(5, 3);
    let mut arena = MmapOptions::new().len(len).map_anon().expect("mmap the arena");
    let _ = arena.advise(memmap2::Advice::HugePage);
    // Resident before measuring (allocated memory is), with non-zero contents.
    if arena.advise(memmap2::Advice::PopulateWrite).is_err() {
        arena.iter_mut().step_by(PAGE).for_each(|b| *b = 1);
    }
    arena.iter_mut().step_by(PAGE).for_each(|b| *b = 1);
    let base = arena.as_mut_ptr();
    let pb = bar((len as u64) * rounds as u64 * 3, "clear-2m", common.progress);
    let runner = |name: &str, f: fn(*mut u8)| {
        let pb = pb.clone();
        Runner::new(name, move |_| {
            let t = Instant::now();
            for h in 0..huge_pages {
                f(base.wrapping_add(h * HUGE));
                if h % 256 == 255 {
                    pb.inc(256 * HUGE as u64);
                }
            }
            let e = t.elapsed();
            pb.inc((huge_pages % 256 * HUGE) as u64);
            e
        })
    };
    let mut runners = vec![
        runner("per-page", |huge| {
            for k in 0..HUGE / PAGE {
                // SAFETY: `huge` is a 2 MiB page of the arena; `k * 4096 + 4096 <= 2 MiB`.
                unsafe { clear_page_orig(huge.wrapping_add(k * PAGE)) };
            }
        }),
        runner("per-page-erms", |huge| {
            for k in 0..HUGE / PAGE {
                // SAFETY: as above, one page.
                unsafe { stream_hal::clear_pages(huge.wrapping_add(k * PAGE), 1) };
            }
            stream_hal::drain();
        }),
        runner("batch", |huge| {
            // SAFETY: `huge` is a 2 MiB page of the arena: 512 whole pages.
            unsafe { stream_hal::clear_pages(huge, HUGE / PAGE) };
            stream_hal::drain();
        }),
    ];
    let samples = interleaved(rounds, &mut runners);
    drop(runners);
    pb.finish_and_clear();
    let zeroed = arena.iter().step_by(4093).all(|&b| b == 0);
    assert!(zeroed, "clear scenario left non-zero bytes");
    let spec = ScenarioSpec {
        name: "clear-2m".into(),
        description: format!(
            "init_on_alloc: clear {} = {} 2 MiB pages, {} rounds",
            Bytes(len as u64),
            huge_pages,
            rounds
        ),
        struct_pages: 0,
        bytes: len as u64,
        threads: 1,
        limit: LimitKind::FillZero,
    };
    let mut sc = Scenario::from_samples(spec, limits, &samples);
    sc.extra.insert("huge_pages".into(), (huge_pages as u64).into());
    sc
}
