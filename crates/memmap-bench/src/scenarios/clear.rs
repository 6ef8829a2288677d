//! `clear`: the init_on_alloc case of the batch-clear series, page-by-page clears against one
//! `stream_hal::clear_pages` per 2 MiB page. `crates/memmap-bench/METHODOLOGY.md` describes each
//! strategy and how it is timed.

use std::time::Instant;

use memmap2::MmapOptions;

use stream_par::{PadataJob, padata_do_multithreaded};

use super::scenario::{CatalogEntry, Context, RunError, Scenario, Setup};
use super::spec::{CommandSpec, PickSpec, Rounds, SizeSpec};
use crate::budget::Knob;
use crate::limits::{FillKind, best_on, run_fastest};
use crate::measure::{Runner, interleaved_paired};
use crate::memory::{MemoryNeed, Overflow};
use crate::report::scenario::{Figure, LimitKind, ScenarioReport, ScenarioSpec};
use crate::size::Bytes;

const HUGE: usize = 2 << 20;
const PAGE: usize = 4096;

/// The size unit of the scenario: the 2 MiB page.
pub const SIZE_UNIT: u64 = HUGE as u64;

/// The scenario's name.
pub const NAME: &str = "clear-2m";

/// Its strategies, baseline first.
pub const STRATEGIES: &[&str] = &["per-page", "per-page-erms", "batch"];

/// The smallest size the suite scales down to.
pub const MIN_SIZE: u64 = 256 << 20;

/// The clear size knob of `clear` and `clear --alloc`.
#[must_use]
pub fn knob(size: u64, fixed: bool) -> Knob {
    Knob::bytes(size, SIZE_UNIT, MIN_SIZE, fixed)
}

/// The `clear` subcommand (`--alloc` runs [`super::alloc`] instead).
pub const COMMAND: CommandSpec = CommandSpec::new(
    "clear",
    "init_on_alloc clearing of 2 MiB pages: page by page versus one clear_pages call",
    SizeSpec::bytes(
        "clear-size",
        SIZE_UNIT,
        "Memory to clear, whole 2 MiB pages; the default is the series' measurement",
        16 << 30,
        1 << 30,
    ),
)
.pick(PickSpec::switch(
    "alloc",
    "Allocate through the buddy allocator with init_on_alloc (batch versus per page) instead of clearing a \
     flat arena",
));

/// 7 rounds (3 under `--quick`).
const ROUNDS: Rounds = Rounds::new(7, 3);

/// The catalog row of `clear-2m`.
pub const ENTRY: CatalogEntry =
    CatalogEntry::new(NAME, &COMMAND, STRATEGIES, ROUNDS, |s| Box::new(Clear::new(s)));

/// Clearing `size` bytes of 2 MiB pages.
#[derive(Debug, Clone)]
pub struct Clear {
    /// Bytes to clear (whole 2 MiB pages).
    pub size: u64,
    /// Whether the user gave the size (it is then never scaled).
    pub fixed: bool,
}

impl Clear {
    /// The scenario with `setup`'s size.
    #[must_use]
    pub fn new(setup: &Setup) -> Clear {
        let (size, fixed) = setup.size(&COMMAND.size);
        Clear { size, fixed }
    }
}

impl Scenario for Clear {
    fn name(&self) -> &'static str {
        NAME
    }

    fn description(&self) -> String {
        format!("{NAME}: clear {}", Bytes(self.size))
    }

    /// The arena, resident.
    fn memory_needed(&self) -> Result<MemoryNeed, Overflow> {
        Ok(MemoryNeed::resident(self.size))
    }

    fn check(&self) -> Result<(), String> {
        if self.size == 0 || self.size % SIZE_UNIT != 0 {
            return Err(format!("clear size {} is not a whole number of 2 MiB pages", Bytes(self.size)));
        }
        usize::try_from(self.size)
            .map(|_| ())
            .map_err(|_| format!("clear size {} does not fit this machine", Bytes(self.size)))
    }

    fn knob(&self) -> Option<Knob> {
        Some(knob(self.size, self.fixed))
    }

    fn resized(&self, value: u64) -> Option<Box<dyn Scenario>> {
        Some(Box::new(Clear { size: value, ..self.clone() }))
    }

    fn run(&self, ctx: &Context<'_>) -> Result<Vec<ScenarioReport>, RunError> {
        run(self.size, ctx)
    }
}

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

/// One strategy: clears the 2 MiB page at the pointer.
type PerHuge = fn(*mut u8);

fn per_page(huge: *mut u8) {
    for k in 0..HUGE / PAGE {
        // SAFETY: `huge` is a 2 MiB page of the arena; `k * 4096 + 4096 <= 2 MiB`.
        unsafe { clear_page_orig(huge.wrapping_add(k * PAGE)) };
    }
}

fn per_page_erms(huge: *mut u8) {
    for k in 0..HUGE / PAGE {
        // SAFETY: as above, one page.
        unsafe { stream_hal::clear_pages(huge.wrapping_add(k * PAGE), 1) };
    }
    stream_hal::drain();
}

fn batch(huge: *mut u8) {
    // SAFETY: `huge` is a 2 MiB page of the arena: 512 whole pages.
    unsafe { stream_hal::clear_pages(huge, HUGE / PAGE) };
    stream_hal::drain();
}

/// Runs the scenario over `size` bytes (whole 2 MiB pages, checked by [`Scenario::check`]).
fn run(size: u64, ctx: &Context<'_>) -> Result<Vec<ScenarioReport>, RunError> {
    let limits = ctx.limits;
    let huge_pages = (size as usize / HUGE).max(1);
    let len = huge_pages * HUGE;
    let rounds = ctx.common.rounds(ROUNDS);
    let phase = ctx.phase(NAME);
    phase.step(format!("{NAME}: map and fault in {}", Bytes(len as u64)));
    let (mut arena, fault_ms) = map_arena(len)?;
    let base = arena.as_mut_ptr() as usize;
    let counts = ctx.threads.counts();
    let bodies: [(&str, PerHuge); 3] =
        [("per-page", per_page), ("per-page-erms", per_page_erms), ("batch", batch)];
    let mut runners = Vec::new();
    let mut pair = Vec::new();
    for (k, &threads) in counts.iter().enumerate() {
        // On all cores only the batch clear: the page-by-page clears are the kernel's one-thread
        // baselines, and at a few seconds per round they would double the suite's time.
        for &(name, f) in bodies.iter().filter(|&&(name, _)| threads == 1 || name == "batch") {
            runners.push(Runner::new(name, move |_| {
                let t = Instant::now();
                if threads <= 1 {
                    for h in 0..huge_pages {
                        f((base as *mut u8).wrapping_add(h * HUGE));
                    }
                } else {
                    clear_parallel(base, len, threads);
                }
                t.elapsed()
            }));
            pair.push(Some(k));
        }
    }
    // The limit run next to each strategy's rounds: the best zero fill at its thread count, on
    // this arena.
    let arena_bytes = || {
        // SAFETY: the arena is `len` initialized bytes at `base`, mapped for the whole scenario;
        // the runners and these limit runs run one at a time, and none keeps the slice past
        // its own run, so the slice is the only access while it lives.
        unsafe { std::slice::from_raw_parts_mut(base as *mut u8, len) }
    };
    let limit_methods: Vec<Vec<String>> =
        counts.iter().map(|&t| best_on(limits, FillKind::Zero, t, arena_bytes())).collect();
    let mut companions: Vec<Runner<'_>> = counts
        .iter()
        .zip(&limit_methods)
        .map(|(&threads, methods)| {
            Runner::new("limit", move |round| {
                run_fastest(methods, FillKind::Zero, threads, round, arena_bytes())
            })
        })
        .collect();
    phase.step(format!("{NAME}: {rounds} rounds"));
    let (samples, paired) = interleaved_paired(rounds, &mut runners, &mut companions, &pair, &phase);
    drop((runners, companions));
    phase.finish();
    let zeroed = arena.iter().step_by(4093).all(|&b| b == 0);
    assert!(zeroed, "clear scenario left non-zero bytes");
    let mut out = Vec::new();
    for (k, &threads) in counts.iter().enumerate() {
        let spec = ScenarioSpec {
            name: NAME.into(),
            description: format!(
                "init_on_alloc: clear {} = {} 2 MiB pages, {} rounds, {}; faulting the arena in: {fault_ms:.1} ms (not in \"first\")",
                Bytes(len as u64),
                huge_pages,
                rounds,
                if threads > 1 { format!("{threads} threads") } else { "1 thread".into() },
            ),
            struct_pages: 0,
            bytes: len as u64,
            threads,
            limit: LimitKind::FillZero,
            figure: Figure::Bandwidth,
        };
        // Samples: the one-thread bodies, then the all-core batch.
        let n = bodies.len();
        let (from, to) = if k == 0 { (0, n) } else { (n, n + 1) };
        let mut sc = ScenarioReport::from_samples(spec, limits, &samples[from..to]);
        sc.set_paired_limit(&limit_methods[k].join(" or "), len as u64, &paired[from..to]);
        sc.extra.insert("huge_pages".into(), (huge_pages as u64).into());
        sc.extra.insert("fault_ms".into(), fault_ms.into());
        out.push(sc);
    }
    Ok(out)
}

/// The arena of `len` bytes, resident, and the time that took.
fn map_arena(len: usize) -> Result<(memmap2::MmapMut, f64), RunError> {
    let mut arena = MmapOptions::new()
        .len(len)
        .map_anon()
        .map_err(RunError::of(NAME, format!("map {}", Bytes(len as u64))))?;
    let _ = arena.advise(memmap2::Advice::HugePage);
    // Resident before measuring (allocated memory is), with non-zero contents. A kernel without
    // MADV_POPULATE_WRITE (before 5.14: EINVAL) has the pages faulted in by the stores below;
    // any other error (ENOMEM: the memory is not there) stops the scenario here, before it
    // touches page after page of memory it cannot have.
    let t = Instant::now();
    if let Err(e) = arena.advise(memmap2::Advice::PopulateWrite) {
        if e.kind() != std::io::ErrorKind::InvalidInput {
            return Err(RunError::of(NAME, format!("populate {}", Bytes(len as u64)))(e));
        }
    }
    arena.iter_mut().step_by(PAGE).for_each(|b| *b = 1);
    let fault_ms = t.elapsed().as_secs_f64() * 1e3;
    Ok((arena, fault_ms))
}

/// The chunk the all-core clear never splits below: 8 MiB (a thread start costs about what a
/// streaming clear of 1 MiB does).
const PARALLEL_MIN_CHUNK: u64 = 8 << 20;

/// Zeroes the `len` bytes at `base` on `threads` workers: a padata job of 2 MiB-aligned
/// `stream_hal::clear` chunks, each drained before its worker reports it done.
fn clear_parallel(base: usize, len: usize, threads: usize) {
    let job = PadataJob {
        start: 0,
        size: len as u64,
        align: HUGE as u64,
        min_chunk: PARALLEL_MIN_CHUNK,
        max_threads: threads,
    };
    // A job from 0 cannot end past u64::MAX, padata's only error.
    let cleared = padata_do_multithreaded(&job, |start, end| {
        // SAFETY: the arena is `len` bytes at `base`, mapped for the whole scenario, and only
        // the runner that is running touches it; padata hands every `[start, end)` of
        // `[0, len)` to exactly one call, so the calls write disjoint bytes of it.
        unsafe { stream_hal::clear((base as *mut u8).wrapping_add(start as usize), (end - start) as usize) };
        stream_hal::drain();
    });
    debug_assert!(cleared.is_ok(), "a padata job from 0: {cleared:?}");
}
