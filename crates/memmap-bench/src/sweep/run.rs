//! Running a [`Sweep`]: per size and initializer, the interleaved cold and warm rounds.

use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant};

use memmap_core::{
    BootOptions, BootOrder, FillOptions, InitMode, KernelConfig, Node, NodeLayout, OwnedMemmap, Page64,
    Strategy, StrategyReason,
};

use super::plan::{Init, STRATEGIES, Sweep, llc_bytes, rounds_for};
use super::result::{Point, RETRIES, SWEEP_FORMAT, SelfCheck, SizeResult, SweepReport, TARGET, Verdict};
use crate::measure::{Runner, Samples, interleaved, median};
use crate::progress::Phase;
use crate::scenarios::paired::prefault;
use crate::scenarios::scenario::RunError;
use crate::scenarios::{deferred, zone_device};
use crate::size::Bytes;

/// What one run of an initializer did: the strategy it used and why.
type Used = (Strategy, StrategyReason);

/// The memmap of one initializer at one size, and how to run it.
struct Job {
    init: Init,
    cfg: KernelConfig,
    nr: u64,
    owned: OwnedMemmap<Page64>,
    states: Vec<u8>,
}

impl Job {
    /// Maps and faults in the memmap of `memmap_bytes` for `init`.
    fn new(init: Init, cfg: KernelConfig, memmap_bytes: u64) -> Result<Job, RunError> {
        let nr = memmap_bytes / 64;
        let base = match init {
            Init::ZoneDevice => zone_device::DEVICE_START_PFN,
            Init::NodeBoot => deferred::BASE,
        };
        let mut owned = OwnedMemmap::new(cfg, base, nr)
            .map_err(RunError::of(init.name(), format!("map a memmap of {}", Bytes(memmap_bytes))))?;
        prefault(&mut owned).map_err(RunError::of(init.name(), "fault the memmap in"))?;
        let (zones, memory) = deferred::zone_layout(&cfg, nr);
        let layout = NodeLayout { nid: 0, zones: &zones, memory: &memory, reserved: &[] };
        let states = match init {
            Init::NodeBoot => vec![0u8; Node::<Page64>::states_needed(&cfg, layout.span())],
            Init::ZoneDevice => Vec::new(),
        };
        Ok(Job { init, cfg, nr, owned, states })
    }

    /// One run with `strategy`: its time and what it used.
    fn once(&mut self, strategy: Strategy, pb: &indicatif::ProgressBar) -> (Duration, Used) {
        match self.init {
            Init::ZoneDevice => {
                let range = zone_device::device_range(&self.cfg, self.nr);
                let pgmap = zone_device::Case::Fsdax.pgmap(&self.cfg);
                let mut memmap = self.owned.memmap();
                let t = Instant::now();
                let r = zone_device::init_threads(&mut memmap, &range, &pgmap, strategy, 1, pb);
                (t.elapsed(), (r.used, r.reason))
            }
            Init::NodeBoot => {
                let (zones, memory) = deferred::zone_layout(&self.cfg, self.nr);
                let layout = NodeLayout { nid: 0, zones: &zones, memory: &memory, reserved: &[] };
                let parts = deferred::parts(self.owned.memmap(), layout, &mut self.states);
                let opts = BootOptions {
                    order: BootOrder::Fused,
                    fill: FillOptions::new(strategy),
                    ..BootOptions::new(InitMode::Eager)
                };
                let t = Instant::now();
                let (_node, report) = Node::boot(parts, &opts).expect("a valid node");
                let took = t.elapsed();
                (took, (report.strategy, report.reason))
            }
        }
    }
}

impl Job {
    /// Writes the memmap's dirty lines back and drops all of its lines from the caches
    /// ([`stream_hal::bench_kit::flush_cache_range`]); the time it took, or `None` where the backend has
    /// no cache flush.
    fn write_back(&self) -> Option<Duration> {
        let t = Instant::now();
        stream_hal::bench_kit::flush_cache_range(self.owned.as_bytes()).then(|| t.elapsed())
    }
}

/// Writes `buf` with normal stores (a different byte each time, so no page is left as it was):
/// what evicts the memmap from the caches before a cold run.
fn flush(buf: &mut [u8], round: usize) {
    buf.fill(0x40 | (round as u8 & 0x3f));
    std::hint::black_box(&*buf);
}

/// One initializer at one size: `rounds` interleaved rounds of every strategy, each a cold run
/// (after writing `flush_buf`) and a warm one right after.
fn measure(
    init: Init,
    cfg: KernelConfig,
    memmap_bytes: u64,
    rounds: usize,
    flush_buf: &RefCell<Vec<u8>>,
    phase: &Phase,
) -> Result<SizeResult, RunError> {
    let job = RefCell::new(Job::new(init, cfg, memmap_bytes)?);
    let nr = memmap_bytes / 64;
    let warm: Vec<RefCell<Vec<Duration>>> = STRATEGIES.iter().map(|_| RefCell::default()).collect();
    let used: Vec<Cell<Option<Used>>> = STRATEGIES.iter().map(|_| Cell::new(None)).collect();
    // The bar moves by run (the interleaving sets it); the hooks' bar is not drawn.
    let pb = indicatif::ProgressBar::hidden();
    let cold: Vec<Samples> = {
        let mut runners: Vec<Runner<'_>> = STRATEGIES
            .iter()
            .zip(warm.iter().zip(&used))
            .map(|(&strategy, (warm, used))| {
                let (job, pb) = (&job, pb.clone());
                Runner::new(strategy.name(), move |round| {
                    flush(&mut flush_buf.borrow_mut(), round);
                    let mut job = job.borrow_mut();
                    // Nothing of the memmap cached, nothing of it dirty.
                    let flushes = job.write_back().is_some();
                    let (run, u) = job.once(strategy, &pb);
                    // The write-back the run left behind (cached stores leave their lines dirty,
                    // streaming stores none), less the cost of flushing the memmap when it is
                    // not cached (`write_back` right after itself: the fastest of three, since
                    // at microsecond sizes one flush's noise is as large as the difference).
                    let wb = job.write_back();
                    let idle = (0..3).filter_map(|_| job.write_back()).min();
                    let cold = match (wb, idle) {
                        (Some(wb), Some(idle)) => run + wb.saturating_sub(idle),
                        _ => run,
                    };
                    if flushes {
                        // Warm again: the flushes left the memmap out of the caches.
                        job.once(strategy, &pb);
                    }
                    let (w, _) = job.once(strategy, &pb);
                    warm.borrow_mut().push(w);
                    used.set(Some(u));
                    cold
                })
            })
            .collect();
        interleaved(rounds, &mut runners, phase)
    };
    let results: Vec<Point> = cold
        .iter()
        .zip(&warm)
        .map(|(c, w)| {
            let w = Samples { name: c.name.clone(), rounds: w.borrow().clone() };
            point(c, &w, nr)
        })
        .collect();
    let (auto_used, auto_reason) =
        used[STRATEGIES.len() - 1].get().unwrap_or((Strategy::Auto, StrategyReason::Requested));
    let self_check = SelfCheck::of(&results, auto_used.name());
    Ok(SizeResult {
        init: init.name().into(),
        memmap_bytes,
        struct_pages: nr,
        rounds,
        cold: Verdict::of(&results, |p| p.cold_ns_per_page),
        warm: {
            let v = Verdict::of(&results, |p| p.warm_ns_per_page);
            // Auto is asked for write-once memmaps, which it streams whatever the cache.
            if llc_bytes().is_some_and(|llc| memmap_bytes <= llc) { v.following_the_hint() } else { v }
        },
        results,
        auto_used: auto_used.name().into(),
        auto_reason: auto_reason.to_string(),
        self_check,
    })
}

/// [`measure`], again with twice the rounds (up to [`RETRIES`] times) while auto and the
/// strategy it used do not time alike ([`SelfCheck`]): the same code cannot be slower, so a
/// disagreement is noise the rounds did not average out. Not with `--rounds` or `--quick`.
fn measure_consistent(
    s: &Sweep,
    init: Init,
    bytes: u64,
    rounds: usize,
    flush_buf: &RefCell<Vec<u8>>,
) -> Result<SizeResult, RunError> {
    let mut rounds = rounds;
    let mut tries = 0;
    loop {
        let phase = Phase::new(init.name(), s.progress);
        phase.step(format!("sweep: {} at {} of memmap, {rounds} rounds", init.name(), Bytes(bytes)));
        let mut r = measure(init, s.config, bytes, rounds, flush_buf, &phase)?;
        phase.finish();
        tries += 1;
        r.self_check.tries = tries;
        if r.self_check.consistent || tries > RETRIES || s.rounds.is_some() || s.quick {
            return Ok(r);
        }
        rounds *= 2;
    }
}

/// A strategy's point from its cold and warm samples over `nr` struct pages.
fn point(cold: &Samples, warm: &Samples, nr: u64) -> Point {
    let ns = |s: &Samples| median(s.rebinds()) * 1e9 / nr as f64;
    let ms = |s: &Samples| s.rounds.iter().map(|d| d.as_secs_f64() * 1e3).collect();
    let (c, w) = (ns(cold), ns(warm));
    Point {
        strategy: cold.name.clone(),
        cold_ns_per_page: c,
        warm_ns_per_page: w,
        cold_gbps: 64.0 / c,
        warm_gbps: 64.0 / w,
        cold_rounds_ms: ms(cold),
        warm_rounds_ms: ms(warm),
    }
}

/// Measures every size of `s`, both initializers each.
///
/// # Errors
///
/// When a memmap cannot be mapped or faulted in.
pub fn measure_all(s: &Sweep) -> Result<SweepReport, RunError> {
    let start = Instant::now();
    let flush_buf = RefCell::new(vec![0u8; s.flush_bytes as usize]);
    flush(&mut flush_buf.borrow_mut(), 0);
    let mut out = Vec::new();
    for &bytes in &s.sizes {
        let rounds = s.rounds.unwrap_or_else(|| rounds_for(bytes, s.quick));
        for init in Init::ALL {
            out.push(measure_consistent(s, init, bytes, rounds, &flush_buf)?);
        }
    }
    Ok(SweepReport {
        format: SWEEP_FORMAT,
        command: std::env::args().collect::<Vec<_>>().join(" "),
        provenance: crate::report::provenance::Provenance::now(),
        machine: crate::machine::Machine::detect(),
        config: s.config.name.into(),
        llc_bytes: llc_bytes(),
        flush_bytes: s.flush_bytes,
        cold_counts_write_back: stream_hal::bench_kit::flush_cache_range(&[0u8; 64]),
        target: TARGET,
        auto_threshold_bytes: FillOptions::default().threshold() as u64,
        sizes: out,
        skipped: s.skipped.clone(),
        wall_s: start.elapsed().as_secs_f64(),
    })
}
